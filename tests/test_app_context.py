"""framework.app: the app's Context and the app process main."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from framework.app import Context, load_app_main
from framework.emulator._logcat import parse_line
from framework.npumanager import NpuManager
from test_server_support import world  # noqa: F401


async def test_context_knows_the_app_from_the_system(autojump_clock, world):
    await world.start_hal()
    system = await world.start_system()
    seen = {}

    async def main(context):
        seen["package"] = context.getPackageName()
        seen["uid"] = context.getUid()
        seen["npu"] = context.getSystemService(Context.NPU_SERVICE)
        seen["again"] = context.getSystemService(Context.NPU_SERVICE)
        seen["nothing"] = context.getSystemService("no.such.service")
        activity = context.getSystemService(Context.ACTIVITY_SERVICE)
        seen["importance"] = await activity.getUidImportance(context.getUid())
        await trio.sleep_forever()

    await world.launch("com.test.bg", main)
    await world.settle()
    assert seen["package"] == "com.test.bg"
    assert seen["uid"] == system.packages.packages.getPackageUid("com.test.bg")
    assert isinstance(seen["npu"], NpuManager) and seen["again"] is seen["npu"]
    assert seen["nothing"] is None
    assert seen["importance"] == 400  # the manifest's launch importance: cached


async def test_an_app_that_crashes_is_a_dead_process(autojump_clock, world):
    await world.start_hal()
    system = await world.start_system()

    async def main(context):
        raise RuntimeError("app bug")

    app = await world.launch("com.test.fg", main)
    with trio.fail_after(1):
        assert await app.wait() == 1
    await world.settle()
    assert not system.activity.state.is_running("com.test.fg")
    assert system.activity.state.getPackageImportance("com.test.fg") == 1000


def test_load_app_main_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="main.py"):
        load_app_main(tmp_path)
    (tmp_path / "main.py").write_text("x = 1\n")
    with pytest.raises(AttributeError, match="main"):
        load_app_main(tmp_path)
    (tmp_path / "main.py").write_text("async def main(context):\n    return 5\n")
    assert load_app_main(tmp_path).__name__ == "main"


def test_app_process_usage_and_no_emulator(tmp_path):
    usage = subprocess.run([sys.executable, "-m", "framework.app"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "usage: python -m framework.app APP_DIR" in usage.stderr
    (tmp_path / "main.py").write_text("async def main(context):\n    pass\n")
    env = {"PATH": "/usr/bin:/bin", "NPUEMU_RUNTIME_DIR": str(tmp_path / "none")}
    lonely = subprocess.run([sys.executable, "-m", "framework.app", str(tmp_path)], capture_output=True, text=True,
                            timeout=60, env=env, cwd=Path(__file__).resolve().parents[1])
    assert lonely.returncode == 1 and "FATAL EXCEPTION" in lonely.stderr
    # Every line of the crash, traceback included, is a logcat line of this process's own.
    lines = [parse_line(line) for line in lonely.stderr.splitlines()]
    assert all(lines), lonely.stderr
    fatal = [line for line in lines if line.tag == "AndroidRuntime"]
    assert {line.pid for line in lines} == {fatal[0].pid} and {line.level for line in fatal} == {"E"}
    assert [line.message for line in fatal[:3]] == [
        "FATAL EXCEPTION: main", f"Process: {tmp_path}, PID: {fatal[0].pid}", "Traceback (most recent call last):"]
    assert len(fatal) > 5 and "DeadObjectException: no process serves servicemanager" in fatal[-1].message


def test_the_app_log_prefixes_every_line_of_a_message_and_its_traceback():
    import logging

    from framework.app._main import _Logcat

    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.LogRecord("AndroidRuntime", logging.ERROR, __file__, 1, "one\ntwo", None, sys.exc_info())
    lines = [parse_line(line) for line in _Logcat().format(record).splitlines()]
    assert all(line is not None and (line.tag, line.level) == ("AndroidRuntime", "E") for line in lines)
    assert [line.message for line in lines][:3] == ["one", "two", "Traceback (most recent call last):"]
    assert [line.message for line in lines][-2:] == ["ValueError: bad", "value"]
