"""open_stack, the one assembly of a stack: in one process over the in-memory binder (the
lab, the in-process tests) or as real processes under this process as init (npuemu boot,
demo, vts, the process tests); see framework/emulator/_stack.py."""

from __future__ import annotations

import pytest
import trio

from framework.binder import AID_ROOT, AID_SHELL, defaultServiceManager
from framework.emulator import HAL_SERVICES, SYSTEM_SERVER_SERVICES, BootConfig, RuntimeFiles, open_stack
from interfaces.npuemu.server import IPackageManager
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


async def test_the_in_memory_hal_dies_and_comes_back_as_a_new_process(autojump_clock, tmp_path):
    scheduling = "android.hardware.npu.IScheduling/default"
    apps = write_apps(tmp_path / "apps", {"com.test.fg": {}})
    async with open_driver(clock="virtual") as driver, open_stack(driver, apps_dir=apps) as stack:
        sm = defaultServiceManager(stack.init)
        old_pid, old_hal = stack.pids["hal"], stack.hal
        stack.kill_hal()
        with trio.fail_after(5):  # its services leave the registry, as a dead process's do
            while await sm.checkService(scheduling) is not None:
                await trio.sleep(0.01)
        await stack.restart_hal()
        assert stack.pids["hal"] != old_pid and stack.hal is not old_hal
        assert await sm.checkService(scheduling) is not None
        with trio.fail_after(30):  # system_server reconnects, as to a restarted HAL process
            while (hal := stack.system.npu.dump_data()["hal"]) != {**hal, "connected": True, "connects": 2}:
                await trio.sleep(0.1)
        assert hal["deaths"] == 1


@pytest.mark.multiprocess
async def test_both_forms_serve_the_same_services(tmp_path):
    apps = write_apps(tmp_path / "apps", {"com.test.fg": {}})
    async with open_driver(clock="virtual") as driver, open_stack(driver, apps_dir=apps) as stack:
        in_memory = set(await defaultServiceManager(stack.init).listServices(15))
    config = BootConfig(clock="virtual", record=False, log_level="WARNING")
    async with open_stack(processes=True, apps_dir=apps, config=config) as emu:
        assert emu.runtime.uid == AID_ROOT  # this process is init
        assert sorted(emu.pids) == ["hal", "servicemanager", "system_server"]
        assert set(await emu.list_services()) == in_memory
        package = IPackageManager.asInterface(await defaultServiceManager(emu.runtime).checkService("package"))
        assert await package.getCodePath("com.test.fg") == str(apps / "fg")  # apps_dir installed
        root = emu.runtime_dir
        assert RuntimeFiles(root).read_state()["pids"] == emu.pids
        # Each process logs from log_level up: the HAL's INFO line "serving ..." is not in the log.
        log = RuntimeFiles(root).log.read_text()
        assert "boot complete" in log and "serving IScheduling/default" not in log
    assert not root.exists()  # a runtime directory of its own goes with the stack


def test_a_boot_config_names_a_known_log_level():
    with pytest.raises(ValueError, match="log_level must be one of DEBUG, INFO, WARNING, ERROR, not 'LOUD'"):
        BootConfig(log_level="LOUD")


@pytest.mark.parametrize(("driver", "options", "message"), [
    ("x.so", {}, "a .so path needs processes=True"),
    (None, {}, "a .so path needs processes=True"),
    ("open", {"processes": True}, "processes=True boots the HAL on a driver .so path"),
    ("open", {"runtime_dir": "/tmp/x"}, "runtime_dir and config are for a stack of real processes"),
    (None, {"processes": True, "apps": {}}, "apps, hal_options and system_options are for the in-memory stack"),
])
async def test_a_mixed_up_call_is_a_type_error_before_anything_starts(autojump_clock, driver, options, message):
    async with open_driver(clock="virtual") as opened:
        with pytest.raises(TypeError, match=message):
            open_stack(opened if driver == "open" else driver, **options)
