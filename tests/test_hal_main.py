"""``python -m npuhal``'s command line and its logcat-form log."""

from __future__ import annotations

import logging
import re
import sys

import pytest

from framework.binder import RUNTIME_DIR_ENV
from npuhal import __main__ as hal_main
from npuhal._logcat import LogcatFormatter

THREADTIME = re.compile(r"\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +\d+ +\d+ [VDIWEF] [\w.]+: ")


def record(level, msg, name="android.hardware.npu", exc_info=None):
    return logging.LogRecord(name, level, __file__, 1, msg, (), exc_info)


def test_records_are_logcat_threadtime_lines():
    fmt = LogcatFormatter()
    line = fmt.format(record(logging.INFO, "serving IScheduling/default"))
    assert THREADTIME.match(line), line
    assert line.endswith(" I android.hardware.npu: serving IScheduling/default")
    assert " W binder: " in fmt.format(record(logging.WARNING, "x", name="binder"))
    assert " E " in fmt.format(record(logging.ERROR, "x")) and " F " in fmt.format(record(logging.CRITICAL, "x"))
    assert " V " in fmt.format(record(5, "x"))


def test_a_traceback_keeps_the_prefix_on_every_line():
    try:
        raise ValueError("boom")
    except ValueError:
        exc_info = sys.exc_info()
    lines = LogcatFormatter().format(record(logging.ERROR, "handler failed", exc_info=exc_info)).splitlines()
    assert len(lines) > 2 and all(THREADTIME.match(line) for line in lines)
    assert lines[-1].endswith("ValueError: boom")


@pytest.mark.parametrize(
    "argv",
    [["--speed", "0", "--runtime-dir", "/tmp"], ["--clock", "sundial", "--runtime-dir", "/tmp"], ["--hang-timeout-ms", "-1", "--runtime-dir", "/tmp"]],
)
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        hal_main.main(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_no_runtime_directory_is_an_error(monkeypatch, capsys):
    monkeypatch.delenv(RUNTIME_DIR_ENV, raising=False)
    with pytest.raises(SystemExit) as info:
        hal_main.main([])
    assert info.value.code == 2
    assert RUNTIME_DIR_ENV in capsys.readouterr().err


def test_a_missing_runtime_directory_or_unwritable_log_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        hal_main.main(["--runtime-dir", str(tmp_path / "nowhere")])
    assert info.value.code == 2 and "no runtime directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        hal_main.main(["--runtime-dir", str(tmp_path), "--log", "no/such/dir/hal.log"])
    assert info.value.code == 2 and "cannot open the log" in capsys.readouterr().err
