"""An app's start as `am start -W` sees it: up, crashed (with its cause) or died.

The whole stack in one trio run under the mock clock (``test_server_support.world``):
apps run as the real process runs them (``framework.app._activity_thread``), tell the
activity manager when they are up or crash, and the shell waits for the outcome with
``IActivityManager.waitForAppStart`` as ``npuemu launch`` does.
"""

from __future__ import annotations

import logging

import pytest
import trio

from framework.binder import IllegalArgumentException, SecurityException, defaultServiceManager
from interfaces.npuemu.server import CrashInfo, IActivityManager, WaitResult
from test_server_support import world  # noqa: F401


async def _launch(world, package: str, main) -> int:
    world.launcher.apps[package] = main
    return await world.system.activity.start_app(package)


async def _wait_for_start(world, pid: int, timeout_ms: int = 10_000):
    async with await world.shell() as sh:
        am = IActivityManager.asInterface(await defaultServiceManager(sh).checkService("activity"))
        return await am.waitForAppStart(pid, timeout_ms)


async def _booted(world):
    await world.start_hal()
    return await world.start_system()


async def test_an_app_waiting_in_its_main_is_up(autojump_clock, world):
    await _booted(world)
    reached = trio.Event()

    async def main(context):
        reached.set()
        await trio.sleep_forever()

    pid = await _launch(world, "com.test.fg", main)
    result = await _wait_for_start(world, pid)
    assert reached.is_set()
    assert (result.result, result.pid, result.crashInfo) == (WaitResult.START_SUCCESS, pid, None)


@pytest.mark.parametrize("source, cls, message, line", [
    (None, "FileNotFoundError", "main.py: no such file", 0),
    ("async def main(context)\n    pass\n", "SyntaxError", "expected ':'", 1),
    ("import no_such_module_anywhere\n", "ModuleNotFoundError", "No module named 'no_such_module_anywhere'", 1),
    ("x = 1\n", "AttributeError", "defines no main(context)", 0),
    ("async def main(context):\n    raise RuntimeError('no model file')\n", "RuntimeError", "no model file", 2),
], ids=["no main.py", "syntax error", "import error", "no main", "raises at once"])
async def test_an_app_that_crashes_at_start_is_reported_with_its_cause(
        autojump_clock, world, tmp_path, caplog, source, cls, message, line):
    await _booted(world)
    folder = tmp_path / "app"
    folder.mkdir()
    if source is not None:
        (folder / "main.py").write_text(source)
    with caplog.at_level(logging.INFO):
        pid = await _launch(world, "com.test.fg", folder)
        result = await _wait_for_start(world, pid)
    assert (result.result, result.pid) == (WaitResult.START_CRASHED, pid)
    crash = result.crashInfo
    assert crash.exceptionClassName == cls and message in crash.exceptionMessage
    if line:
        assert crash.throwFileName.endswith("main.py") and crash.throwLineNumber == line
    assert f"{cls}: " in crash.stackTrace.splitlines()[-1]
    fatal = [r for r in caplog.records if r.name == "AndroidRuntime"]
    assert fatal and fatal[0].getMessage() == f"FATAL EXCEPTION: main\nProcess: com.test.fg, PID: {pid}"
    assert any(r.name == "ActivityManager" and f"Process com.test.fg (pid {pid}) crashed at start: {cls}" in r.getMessage()
               for r in caplog.records)
    await world.settle()
    assert not world.system.activity.state.is_running("com.test.fg")
    assert world.launcher.launched["com.test.fg"].returncode == 1


async def test_the_outcome_is_kept_for_a_wait_that_comes_after_the_death(autojump_clock, world):
    await _booted(world)

    async def main(context):
        raise ValueError("bad config")

    pid = await _launch(world, "com.test.fg", main)
    with trio.fail_after(5):
        await world.launcher.launched["com.test.fg"].wait()
    await world.settle()
    result = await _wait_for_start(world, pid, 0)
    assert result.result == WaitResult.START_CRASHED and result.crashInfo.exceptionMessage == "bad config"


async def test_a_crash_after_the_app_is_up_does_not_change_its_start(autojump_clock, world, caplog):
    await _booted(world)

    async def main(context):
        await trio.sleep(1)
        raise RuntimeError("later")

    with caplog.at_level(logging.INFO):
        pid = await _launch(world, "com.test.fg", main)
        assert (await _wait_for_start(world, pid)).result == WaitResult.START_SUCCESS
        await trio.sleep(2)
        assert (await _wait_for_start(world, pid)).result == WaitResult.START_SUCCESS
    assert any(f"Process com.test.fg (pid {pid}) crashed while running: RuntimeError: later" in r.getMessage()
               for r in caplog.records)


async def test_an_app_that_neither_comes_up_nor_dies_times_out(autojump_clock, world):
    class Stuck:
        """A process that never runs the app: it does not attach, does not die."""

        def __init__(self, pid):
            self.pid = pid
            self.gone = trio.Event()

        async def wait(self):
            await self.gone.wait()
            return -9

        def kill(self):
            self.gone.set()

    async def stuck_launcher(info, runtime):
        pid = world.net.spawn(runtime.pid)
        await defaultServiceManager(runtime).registerProcess(pid, info.uid)
        return Stuck(pid)

    world.launcher = stuck_launcher
    await _booted(world)
    pid = await world.system.activity.start_app("com.test.fg")
    before = trio.current_time()
    result = await _wait_for_start(world, pid, 3000)
    assert (result.result, result.pid) == (WaitResult.START_TIMED_OUT, pid)
    assert trio.current_time() - before == pytest.approx(3.0, abs=0.1)
    world.system.activity.kill("com.test.fg")
    await world.settle()
    result = await _wait_for_start(world, pid, 3000)
    assert (result.result, result.exitStatus) == (WaitResult.START_DIED, -9)


async def test_only_an_app_itself_attaches_and_only_the_shell_waits(autojump_clock, world):
    await _booted(world)

    async def main(context):
        am = context.getSystemService("activity")
        with pytest.raises(SecurityException, match="waitForAppStart"):
            await am.waitForAppStart(context.runtime.pid, 0)
        await trio.sleep_forever()

    pid = await _launch(world, "com.test.fg", main)
    assert (await _wait_for_start(world, pid)).result == WaitResult.START_SUCCESS
    async with await world.shell() as sh:
        am = IActivityManager.asInterface(await defaultServiceManager(sh).checkService("activity"))
        with pytest.raises(SecurityException, match="attachApplication"):
            await am.attachApplication()
        crash = CrashInfo(exceptionClassName="Fake")
        with pytest.raises(SecurityException, match="handleApplicationCrash"):
            await am.handleApplicationCrash(crash)
        with pytest.raises(IllegalArgumentException, match="pid 99999"):
            await am.waitForAppStart(99999, 0)
    assert world.system.activity.state.is_running("com.test.fg")
