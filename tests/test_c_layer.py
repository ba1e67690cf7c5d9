"""The C layer's own tests, run from pytest so `make test` covers them.

The C test binary (csrc/tests/) pins the emulated hardware's behaviour on the
virtual clock and stresses the real clock's threads; it closes with the line
``N passed, M failed``.  These tests build it through the Makefile's C targets
(the one place that knows the compiler flags) and check that line.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.MULTILINE)
# The C suite has this many tests; fewer means a test silently vanished.
MIN_TESTS = 34

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("make") is None, reason="needs a C compiler and make"
)


def make(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # Under `make test` the parent's jobserver flags would leak in; this make is its own.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )


def summary(output: str) -> tuple[int, int]:
    found = SUMMARY.findall(output)
    assert found, f"no 'N passed, M failed' line in:\n{output}"
    passed, failed = found[-1]
    return int(passed), int(failed)


def test_c_tests_pass() -> None:
    result = make("ctest")
    passed, failed = summary(result.stdout)
    assert failed == 0, result.stdout + result.stderr
    assert passed >= MIN_TESTS
    assert result.returncode == 0, result.stderr


def test_c_tests_clean_under_address_and_undefined_sanitizers() -> None:
    result = make("asan")
    passed, failed = summary(result.stdout)
    # a sanitizer report goes to stderr and makes the binary exit non-zero
    assert result.returncode == 0 and failed == 0, result.stdout + result.stderr
    assert passed >= MIN_TESTS
    assert "ERROR: AddressSanitizer" not in result.stderr
    assert "runtime error" not in result.stderr


@pytest.mark.parametrize(
    "source", ["csrc/drivers/template/template.c", "csrc/drivers/reference/reference.c"]
)
def test_make_driver_builds_a_loadable_driver(tmp_path: pathlib.Path, source: str) -> None:
    """`make driver SRC=...` yields a .so the loader accepts and that computes."""
    out = tmp_path / "driver.so"
    built = make("driver", f"SRC={source}", f"OUT={out}")
    assert built.returncode == 0, built.stderr
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(out)], capture_output=True, text=True,
                             check=True).stdout
    assert re.search(r"\bT npu_driver_entry$", symbols, re.MULTILINE)
    tests = make("build/c/npu_tests")
    assert tests.returncode == 0, tests.stderr
    run = subprocess.run([str(ROOT / "build/c/npu_tests"), "--only", "loader", "--driver-so", str(out)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert summary(run.stdout) == (1, 0), run.stdout


def test_make_driver_without_source_is_a_clear_error() -> None:
    result = make("driver")
    assert result.returncode != 0
    assert "usage: make driver SRC=" in result.stderr
