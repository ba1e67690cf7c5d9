# npuemu: everything runs through .venv, which these targets create and refresh.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CSRC   := $(shell find csrc -name '*.c' -o -name '*.h' -o -name '*.py' 2>/dev/null) framework/binder/_wirec.c
# The generated tests `npuemu vts` runs (build output, not committed): a sample of the
# conformance cases with their expected outputs, remade when their sources change.
VTS_CASES     := build/vts/generated_cases.npz
VTS_CASES_SRC := $(wildcard tests/nnref/*.py tests/test_nnref_*.py) tests/conformance/cases.py \
	tests/conformance/build.py tests/make_vts_cases.py

.PHONY: demo test install ext clean aidl conformance-table vts-cases models isolation

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.0.1 setuptools==80.9.0 wheel==0.45.1

$(STAMP): $(VENV)/bin/python pyproject.toml $(CSRC)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(STAMP) $(VTS_CASES) isolation

# uid isolation (as root; nothing otherwise): the system and app uids must be able to start
# Python and read the tree and the models. Where a folder above them is not searchable by
# other users (Python under a 0700 /root), grant search (o+x, never read) on it, and say so.
# A user who is not root boots in a user namespace (isolation: userns), which takes newuidmap
# and newgidmap: as root where they are missing, install Debian's uidmap package, and say so.
isolation: | $(STAMP)
	@$(PY) -c 'import sys; from framework.emulator import grant_search; \
		[print(f"made {p} searchable by other users (uid isolation)") for p in grant_search(sys.argv[1:])]' $(MODELS_DIR)
	@if [ "$$(id -u)" = 0 ] && ! command -v newuidmap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then \
		echo "installing uidmap (newuidmap/newgidmap: a boot that is not root runs in a user namespace)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq uidmap >/dev/null || \
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq uidmap >/dev/null; } || \
		echo "could not install uidmap: a boot that is not root stays nominal"; \
	fi

# --- real models (issue 15) ---
# MediaPipe's .tflite models, from the mediapipe wheel on the package index (never committed):
# downloaded once with pip (the wheel only, not installed), the .tflite files unpacked into
# MODELS_DIR, outside git. No network: pip gives up after its timeout and this fails saying so.
MODELS_VERSION := 0.10.14
MODELS_DIR     ?= $(HOME)/.cache/npuemu/models/mediapipe-$(MODELS_VERSION)
MODELS_STAMP   := $(MODELS_DIR)/.complete

$(MODELS_STAMP): | $(VENV)/bin/python
	@mkdir -p $(MODELS_DIR)/.wheel
	@timeout 900 $(PY) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
		--platform manylinux_2_17_x86_64 --timeout 30 --retries 2 -d $(MODELS_DIR)/.wheel mediapipe==$(MODELS_VERSION) \
		|| { echo "make models: could not download mediapipe==$(MODELS_VERSION) from the package index" \
		"(no network?); the real-model tests and the demo need its .tflite files in $(MODELS_DIR)" >&2; exit 1; }
	$(PY) -c 'import sys, zipfile, pathlib; out = pathlib.Path(sys.argv[1]); \
		z = zipfile.ZipFile(next(out.glob(".wheel/mediapipe-*.whl"))); \
		names = [n for n in z.namelist() if n.startswith("mediapipe/modules/") and n.endswith(".tflite")]; \
		[(out / pathlib.Path(n).name).write_bytes(z.read(n)) for n in names]; print(len(names), "models in", out)' $(MODELS_DIR)
	@rm -rf $(MODELS_DIR)/.wheel
	@touch $@

models: $(MODELS_STAMP)

# Rebuild only the C extension, in place (fast, for work on csrc/).
ext: | $(STAMP)
	$(PY) setup.py -q build_ext --inplace

# Compile every .aidl file into its package's Python module (committed; a test checks them).
aidl: $(STAMP)
	$(VENV)/bin/npuemu aidl

demo: $(STAMP) $(MODELS_STAMP) isolation
	$(VENV)/bin/npuemu demo

test: $(STAMP) $(VTS_CASES) $(MODELS_STAMP) isolation
	NPUEMU_MODELS_DIR=$(MODELS_DIR) $(PY) -m pytest -q -n 3


$(VTS_CASES): $(VTS_CASES_SRC) build/c/template.so | $(STAMP)
	$(PY) tests/make_vts_cases.py build/c/template.so $@

vts-cases: $(VTS_CASES)

# The NNAPI conformance table: per operation, what each emulated device supports and passes.
conformance-table: $(STAMP)
	$(PY) tests/conformance/report.py

clean:
	rm -rf $(VENV) build *.egg-info npuhal/_npu*.so npuhal/_npu.c framework/nn/_cpu*.so framework/nn/_cpu.c framework/binder/_wirec*.so

# --- C layer targets ---
# The C tests, the sanitizer runs and driver builds compile straight from csrc/
# with the system compiler; none of them touches .venv.
NPU_CC       ?= cc
NPU_CFLAGS   := -std=c11 -ffp-contract=off -Wall -Wextra -Werror -g -Icsrc/include
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

# --- reliability targets ---
# Long runs of issue 8 that do not belong in `make test`. None of them reinstalls
# anything; the sanitizer build goes to build/asan, beside the installed extension.
FUZZ_TIME    ?= 300
LOAD_APPS    ?= 64
ASAN_DIR     := build/asan
ASAN_PRELOAD  = $(shell $(NPU_CC) -print-file-name=libasan.so):$(shell $(NPU_CC) -print-file-name=libubsan.so)
# The multi-process tests that the sanitized HAL runs under, and the driver under
# model churn while work runs (issue 12's use-after-free, up to the user's bench command).
SANITIZE_TESTS := tests/test_hal_process.py tests/test_reliability_faults.py tests/test_fuzz_socket.py \
	tests/test_nn_multiprocess.py tests/test_security_isolation.py tests/test_driver_model_reloads.py

.PHONY: fuzz soak load sanitize fuzz-bindings fuzz-driver

# Coverage-guided fuzzing of the wire codec and every served parcel decoder with
# atheris (tests/fuzz/fuzz_binder.py), FUZZ_TIME seconds from seeds of real frames;
# without atheris, the same check under a long hypothesis run instead.
fuzz: $(STAMP)
	-$(PY) -m pip install --quiet atheris==2.3.0
	@mkdir -p build/fuzz/corpus
	$(PY) tests/fuzz/fuzz_binder.py --write-seeds build/fuzz/corpus
	@if $(PY) -c 'import atheris' 2>/dev/null; then \
		$(PY) tests/fuzz/fuzz_binder.py -max_total_time=$(FUZZ_TIME) -artifact_prefix=build/fuzz/ build/fuzz/corpus; \
	else \
		echo "atheris is not installed: running the hypothesis harness long instead"; \
		NPUEMU_FUZZ_EXAMPLES=20000 $(PY) -m pytest -q tests/test_fuzz_codec.py -p no:cacheprovider \
			--hypothesis-seed=0 -o addopts=""; \
	fi

# The 64-app load test for one minute: p50/p99 admission and execution latency, leaks.
load: $(STAMP)
	$(PY) bench/load.py --apps $(LOAD_APPS) --duration 60

# Ten minutes of the same load, then the npu service's stateful test in its soak profile.
soak: $(STAMP)
	$(PY) bench/load.py --apps $(LOAD_APPS) --duration 600
	NPUEMU_HYPOTHESIS_PROFILE=soak $(PY) -m pytest -q tests/test_npu_stateful.py

# The multi-process tests with the driver extension built under ASan+UBSan, loaded by
# every HAL process (the sanitizer runtime preloaded; Python's own leaks not reported;
# a UBSan finding aborts). They run from $(ASAN_DIR) so `import npuhal` finds the
# instrumented copy there first; the installed extension is not touched.
# Every finding goes to $(ASAN_REPORTS).<pid> (pytest's capture would swallow one in
# the test process; a HAL child's dies with the child, which the framework survives
# by design): the run fails if any process wrote one, and prints them.
ASAN_REPORTS := $(CURDIR)/$(ASAN_DIR)/report
sanitize: $(STAMP)
	$(PY) tests/fuzz/build_asan_ext.py $(ASAN_DIR)
	cd $(ASAN_DIR) && LD_PRELOAD=$(ASAN_PRELOAD) ASAN_OPTIONS=detect_leaks=0 $(CURDIR)/$(PY) -c \
		'import npuhal._npu as m, sys; sys.exit(0 if "/$(ASAN_DIR)/" in m.__file__ else "not the ASan build: " + m.__file__)'
	rm -f $(ASAN_REPORTS).*
	cd $(ASAN_DIR) && LD_PRELOAD=$(ASAN_PRELOAD) \
		ASAN_OPTIONS=detect_leaks=0:handle_abort=0:detect_stack_use_after_return=0:log_path=$(ASAN_REPORTS) \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(ASAN_REPORTS) \
		$(CURDIR)/$(PY) -m pytest -q -p no:cacheprovider -c $(CURDIR)/pyproject.toml --rootdir $(CURDIR) \
		$(addprefix $(CURDIR)/,$(SANITIZE_TESTS)); rc=$$?; \
	for f in $(ASAN_REPORTS).*; do [ -e "$$f" ] || continue; echo "== sanitizer finding: $$f"; cat "$$f"; rc=1; done; \
	exit $$rc

# $(call asan_imported,MODULES): fails unless each module is the instrumented copy in $(ASAN_DIR).
asan_imported = cd $(ASAN_DIR) && LD_PRELOAD=$(ASAN_PRELOAD) ASAN_OPTIONS=detect_leaks=0 $(CURDIR)/$(PY) -c \
	'import importlib, sys; bad = [m for m in sys.argv[1:] if "/$(ASAN_DIR)/" not in importlib.import_module(m).__file__]; sys.exit("not the ASan build: " + " ".join(bad) if bad else 0)' $(1)
# $(call asan_pytest,ENV,TESTS): pytest on TESTS from $(ASAN_DIR), the sanitizers' runtime
# preloaded and ENV set; any finding of either sanitizer fails the run.
asan_pytest = cd $(ASAN_DIR) && LD_PRELOAD=$(ASAN_PRELOAD) PYTHONMALLOC=malloc $(1) \
	ASAN_OPTIONS=detect_leaks=0:handle_abort=0:detect_stack_use_after_return=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(CURDIR)/$(PY) -m pytest -q -x -p no:cacheprovider -c $(CURDIR)/pyproject.toml --rootdir $(CURDIR) \
	$(addprefix $(CURDIR)/,$(2))

# Every operation's binding (npu/bind.h) called with hostile operands, long
# (tests/test_bind_fuzz.py at BIND_FUZZ_EXAMPLES examples per operation and test),
# against framework.nn._cpu built under ASan+UBSan in $(ASAN_DIR): a read or write out
# of bounds or any undefined behaviour fails the run, as a crash or a wrong status does.
BIND_FUZZ_EXAMPLES ?= 400
fuzz-bindings: $(STAMP)
	$(PY) tests/fuzz/build_asan_ext.py $(ASAN_DIR) cpu
	$(call asan_imported,framework.nn._cpu)
	$(call asan_pytest,NPUEMU_BIND_FUZZ_EXAMPLES=$(BIND_FUZZ_EXAMPLES),tests/test_bind_fuzz.py)

# Hostile models through the driver API, long (tests/test_driver_fuzz.py at
# DRIVER_FUZZ_EXAMPLES examples per test: conformance models of every operation and
# operand type made hostile, through supported_operations, load_model, a work run to its
# end and run_model), against npuhal._npu (the driver) and framework.nn._cpu (the NDK's
# bindings that build those models) both built under ASan+UBSan in $(ASAN_DIR).
DRIVER_FUZZ_EXAMPLES ?= 3000
fuzz-driver: $(STAMP)
	$(PY) tests/fuzz/build_asan_ext.py $(ASAN_DIR) npuhal cpu
	$(call asan_imported,npuhal._npu framework.nn._cpu)
	$(call asan_pytest,NPUEMU_DRIVER_FUZZ_EXAMPLES=$(DRIVER_FUZZ_EXAMPLES),tests/test_driver_fuzz.py)
