# npuemu: everything runs through .venv, which these targets create and refresh.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CSRC   := $(shell find csrc -name '*.c' -o -name '*.h' -o -name '*.py' 2>/dev/null)

.PHONY: demo test install ext clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.0.1 setuptools==80.9.0 wheel==0.45.1

$(STAMP): $(VENV)/bin/python pyproject.toml $(CSRC)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(STAMP)

# Rebuild only the C extension, in place (fast, for work on csrc/).
ext: $(STAMP)
	$(PY) setup.py -q build_ext --inplace

demo: $(STAMP)
	$(VENV)/bin/npuemu version

test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info npuhal/_npu*.so npuhal/_npu.c
