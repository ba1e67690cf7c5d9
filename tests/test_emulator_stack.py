"""open_stack: the whole stack in one process over the in-memory binder, as the lab and
the in-process tests assemble it (one assembly; see framework/emulator/_stack.py)."""

from __future__ import annotations

import pytest
import trio

from framework.binder import AID_SHELL, defaultServiceManager
from framework.emulator import HAL_SERVICES, SYSTEM_SERVER_SERVICES, open_stack
from npuhal import open_driver
from test_server_support import write_apps


async def test_the_stack_serves_every_service_and_launches_apps(autojump_clock, tmp_path):
    started = trio.Event()

    async def main(context):
        started.set()
        await trio.sleep_forever()

    apps = write_apps(tmp_path / "apps", {"com.test.fg": {}})
    async with open_driver(clock="virtual") as driver, open_stack(driver, apps={"com.test.fg": main}, apps_dir=apps) as stack:
        names = await defaultServiceManager(stack.init).listServices(15)
        assert set(HAL_SERVICES) | set(SYSTEM_SERVER_SERVICES) <= set(names)
        assert any(n.startswith("android.hardware.neuralnetworks.IDevice/emu-npu") for n in names)
        await stack.system.activity.start_app("com.test.fg", "foreground")
        with trio.fail_after(5):
            await started.wait()
        async with stack.shell() as shell:
            assert shell.uid == AID_SHELL
        assert set(stack.pids) == {"hal", "system_server"}


async def test_without_system_server_only_the_hal_serves(autojump_clock):
    async with open_driver(clock="virtual") as driver, open_stack(driver, system_server=False) as stack:
        names = await defaultServiceManager(stack.init).listServices(15)
        assert set(HAL_SERVICES) <= set(names)
        assert not set(SYSTEM_SERVER_SERVICES) & set(names)
        assert stack.system is None


async def test_the_blocks_own_error_leaves_as_itself_and_the_stack_stops(autojump_clock):
    async with open_driver(clock="virtual") as driver:
        with pytest.raises(KeyError, match="mine"):
            async with open_stack(driver, system_server=False):
                raise KeyError("mine")
        # The HAL stopped with the stack: the driver closes with nothing left reading it.
    assert trio.current_time() < 1
