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
ext: | $(STAMP)
	$(PY) setup.py -q build_ext --inplace

demo: $(STAMP)
	$(VENV)/bin/npuemu demo

test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info npuhal/_npu*.so npuhal/_npu.c framework/nn/_cpu*.so framework/nn/_cpu.c

# --- C layer targets ---
# The C tests, the sanitizer runs and driver builds compile straight from csrc/
# with the system compiler; none of them touches .venv.
NPU_CC       ?= cc
NPU_CFLAGS   := -std=c11 -Wall -Wextra -Werror -g -Icsrc/include
NPU_LIBS     := -lm -lpthread -ldl
NPU_LIB_SRC   = $(wildcard csrc/hw/*.c csrc/kernels/*.c csrc/drivers/reference/*.c)
NPU_TEST_SRC  = $(wildcard csrc/tests/*.c)
NPU_HEADERS   = $(wildcard csrc/include/npu/*.h csrc/*/*.h csrc/tests/*.h)
NPU_BUILD_ID  = $(shell cat $(NPU_LIB_SRC) $(NPU_HEADERS) | sha256sum | cut -c1-12)
NPU_CBUILD   := build/c
NPU_TEMPLATE := $(NPU_CBUILD)/template.so

.PHONY: ctest asan tsan valgrind driver

$(NPU_TEMPLATE): csrc/drivers/template/template.c $(NPU_HEADERS)
	@mkdir -p $(NPU_CBUILD)
	$(NPU_CC) $(NPU_CFLAGS) -O2 -fPIC -shared -DNPU_BUILD_ID='"$(shell sha256sum $< | cut -c1-12)"' $< -o $@

$(NPU_CBUILD)/npu_tests: $(NPU_LIB_SRC) $(NPU_TEST_SRC) $(NPU_HEADERS)
	@mkdir -p $(NPU_CBUILD)
	$(NPU_CC) $(NPU_CFLAGS) -O2 -DNPU_BUILTIN_REFERENCE -DNPU_BUILD_ID='"$(NPU_BUILD_ID)"' $(NPU_LIB_SRC) $(NPU_TEST_SRC) -o $@ $(NPU_LIBS)

$(NPU_CBUILD)/npu_tests_asan: $(NPU_LIB_SRC) $(NPU_TEST_SRC) $(NPU_HEADERS)
	@mkdir -p $(NPU_CBUILD)
	$(NPU_CC) $(NPU_CFLAGS) -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
		-DNPU_BUILTIN_REFERENCE -DNPU_BUILD_ID='"$(NPU_BUILD_ID)"' $(NPU_LIB_SRC) $(NPU_TEST_SRC) -o $@ $(NPU_LIBS)

$(NPU_CBUILD)/npu_tests_tsan: $(NPU_LIB_SRC) $(NPU_TEST_SRC) $(NPU_HEADERS)
	@mkdir -p $(NPU_CBUILD)
	$(NPU_CC) $(NPU_CFLAGS) -O1 -fsanitize=thread \
		-DNPU_BUILTIN_REFERENCE -DNPU_BUILD_ID='"$(NPU_BUILD_ID)"' $(NPU_LIB_SRC) $(NPU_TEST_SRC) -o $@ $(NPU_LIBS)

$(NPU_CBUILD)/npu_tests_g: $(NPU_LIB_SRC) $(NPU_TEST_SRC) $(NPU_HEADERS)
	@mkdir -p $(NPU_CBUILD)
	$(NPU_CC) $(NPU_CFLAGS) -O0 -DNPU_BUILTIN_REFERENCE -DNPU_BUILD_ID='"$(NPU_BUILD_ID)"' $(NPU_LIB_SRC) $(NPU_TEST_SRC) -o $@ $(NPU_LIBS)

# All C tests, including the template driver loaded by path.
ctest: $(NPU_CBUILD)/npu_tests $(NPU_TEMPLATE)
	$(NPU_CBUILD)/npu_tests --driver-so $(NPU_TEMPLATE)

# AddressSanitizer + UndefinedBehaviorSanitizer (with leak checking) over all C tests.
asan: $(NPU_CBUILD)/npu_tests_asan $(NPU_TEMPLATE)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
		$(NPU_CBUILD)/npu_tests_asan --driver-so $(NPU_TEMPLATE)

# ThreadSanitizer over the real-clock tests (worker threads, concurrent submitters).
tsan: $(NPU_CBUILD)/npu_tests_tsan
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(NPU_CBUILD)/npu_tests_tsan --only real_clock

# Valgrind memcheck over all C tests: no invalid access, no leak.
valgrind: $(NPU_CBUILD)/npu_tests_g $(NPU_TEMPLATE)
	valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=1 \
		$(NPU_CBUILD)/npu_tests_g --driver-so $(NPU_TEMPLATE)

# Build any driver source into a .so against the headers:
#   make driver SRC=path/to/mydriver.c [OUT=path/to/mydriver.so]
OUT ?= build/drivers/$(basename $(notdir $(SRC))).so
driver:
	@test -n "$(SRC)" || { echo "usage: make driver SRC=path/to/driver.c [OUT=path.so]" >&2; exit 2; }
	@mkdir -p $(dir $(OUT))
	$(NPU_CC) $(NPU_CFLAGS) -O2 -fPIC -shared -DNPU_BUILD_ID='"$(shell sha256sum $(SRC) | cut -c1-12)"' \
		$(SRC) -o $(OUT) -lm
	@echo "built $(OUT)"
