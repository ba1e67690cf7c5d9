"""The suite's own guard (conftest.py): a test that leaves a process or a directory fails.

One inner pytest session runs tests that leak in each way the guard must see (a plain
child, a daemon that double-forked away, a process whose environment was scrubbed, a
temp directory) next to a clean test, while a process of somebody else's runs alongside.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.multiprocess

INNER = '''
import os, subprocess, sys, tempfile, time

def test_clean():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_leaves_a_child():
    subprocess.Popen(["sleep", "61.NONCE"])

def test_leaves_a_daemon():
    # Double fork: the survivor's parent exits at once (it would be pid 1's child).
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "62.NONCE"])
        os._exit(0)
    os.waitpid(middle, 0)

def test_leaves_a_scrubbed_child():
    subprocess.Popen(["sleep", "63.NONCE"], env={"PATH": "/usr/bin:/bin"})

def test_leaves_a_temp_dir():
    tempfile.mkdtemp(prefix="npuemu-rel-")

def test_waits_for_what_it_stops():
    p = subprocess.Popen(["sleep", "64.NONCE"])
    p.terminate()  # exits within the grace, unwaited: not a leak
'''


def _sleeping(seconds: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
                state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if argv[:2] == [b"sleep", seconds.encode()] and state != "Z":
                found.append(int(entry.name))
    return found


# Under xdist workers (as `make test` runs the suite; each its own session to the checks), and alone.
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist-workers"])
def test_a_leaking_test_fails_and_names_what_it_left(tmp_path, workers):
    (tmp_path / "conftest.py").write_text((Path(__file__).with_name("conftest.py")).read_text())
    # The sleeps are this run's own (another suite on the machine may run this test too).
    nonce = f"{secrets.randbelow(10**6):06d}"
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER).replace("NONCE", nonce))
    # Somebody else's process (not of the inner session): it must not count.
    other = subprocess.Popen(["sleep", f"65.{nonce}"], start_new_session=True)
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *workers,
                              "--basetemp", str(tmp_path / "inner-tmp"), "test_inner.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "NPUEMU_TEST_EXIT_GRACE": "0.5"})
        out = run.stdout + run.stderr
        assert run.returncode == 1, out
        assert "6 passed, 4 errors" in out, out
        for test, what in [("test_leaves_a_child", f"sleep 61.{nonce}"), ("test_leaves_a_daemon", f"sleep 62.{nonce}"),
                           ("test_leaves_a_scrubbed_child", f"sleep 63.{nonce}")]:
            assert f"ERROR at teardown of {test}" in out or f"ERROR test_inner.py::{test}" in out, out
            assert f"test_inner.py::{test} left 1 process(es) running (killed now):" in out, out
            assert what in out, out
        assert "(parent 1)" not in out  # the daemon was re-parented to pytest, not lost to init
        assert "ERROR at teardown of test_leaves_a_temp_dir" in out, out
        assert "test_inner.py::test_leaves_a_temp_dir left " in out and "npuemu-rel-" in out, out
        assert f"sleep 64.{nonce}" not in out and "test_clean left" not in out
        # Everything leaked was killed, the temp dir is gone; the other process lives on.
        assert not any(_sleeping(f"{s}.{nonce}") for s in ("61", "62", "63", "64"))
        assert other.poll() is None
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
