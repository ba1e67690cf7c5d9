"""The HAL as its own OS process (``open_stack(processes=True, system_server=False)``:
a servicemanager and a HAL of one's own, this process as init): real sockets, real
shared memory, real process death."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import trio

from framework.binder import DeadObjectException, DeathRecipient, TransactionFailedException, defaultServiceManager, launch_process
from framework.emulator import BootConfig, BootError, RuntimeFiles, open_stack
from interfaces.android.hardware.neuralnetworks import ExecutionPreference, IDevice, Priority
from interfaces.android.hardware.npu import IScheduling, SchedulingConfig
from interfaces.npuemu.hal import IHalControl
from nn_reference import fully_connected
from npuhal import FuseCode
from test_hal_inprocess import APP, Execution, aidl_model, fc_model

CLIENT = textwrap.dedent(
    """
    import sys, trio
    from framework.binder import defaultServiceManager, open_binder_runtime
    from interfaces.android.hardware.neuralnetworks import IDevice
    from test_hal_inprocess import aidl_model, fc_model

    async def main():
        async with open_binder_runtime():
            dev = IDevice.asInterface(
                await defaultServiceManager().checkService("android.hardware.neuralnetworks.IDevice/emu-npu"))
            await dev.prepareModel(aidl_model(fc_model()[0]), 1, 1, -1, 1 << 30, None)
            print("prepared", flush=True)
            await trio.sleep_forever()

    trio.run(main)
    """
)


DEVICE_PREFIX = "android.hardware.neuralnetworks.IDevice/"


def private_hal(driver=None, runtime_dir=None, **config):
    """A servicemanager and a HAL (no system_server) as real processes; init does not
    restart a HAL that dies here: the tests kill it on purpose."""
    config.setdefault("restart_hal", False)
    return open_stack(driver, processes=True, system_server=False, runtime_dir=runtime_dir,
                      config=BootConfig(record=False, **config))


async def service(stack, name, interface):
    binder = await defaultServiceManager(stack.runtime).checkService(name)
    assert binder is not None, f"{name} is not registered"
    return interface.asInterface(binder)


async def control(stack):
    return await service(stack, "npuemu.hal.IHalControl/default", IHalControl)


async def scheduling(stack):
    return await service(stack, "android.hardware.npu.IScheduling/default", IScheduling)


async def device_names(stack) -> list[str]:
    names = await defaultServiceManager(stack.runtime).listServices(15)
    return sorted(n[len(DEVICE_PREFIX):] for n in names if n.startswith(DEVICE_PREFIX))


async def prepared_count(hal) -> int:
    dump = await (await control(hal)).dump()
    line = next(line for line in dump.splitlines() if "prepared models:" in line)
    return int(line.split(":")[1])


async def test_services_and_one_execute_through_shared_memory(tmp_path):
    async with private_hal(runtime_dir=tmp_path / "rt", clock="virtual", hal_args=("--log", "hal.log")) as hal:
        assert (tmp_path / "rt").stat().st_mode & 0o777 == 0o700
        assert await device_names(hal) == ["emu-dsp", "emu-gpu", "emu-hetero", "emu-npu"]
        model, w, b = fc_model(seed=11)
        npu = await service(hal, DEVICE_PREFIX + "emu-npu", IDevice)
        prepared = await npu.prepareModel(aidl_model(model), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.HIGH, -1, 0, None)
        x = np.random.default_rng(2).standard_normal((1, 16)).astype(np.float32)
        ex = Execution([x], [(1, 8)])
        await prepared.executeSynchronously(ex.request(), False, -1, 0)
        np.testing.assert_allclose(ex.output(0), fully_connected(x, w, b, FuseCode.RELU), rtol=1e-5, atol=1e-6)
        await prepared.release()
        assert await prepared_count(hal) == 0
        log = (tmp_path / "rt" / "hal.log").read_text().splitlines()
        assert any(" I android.hardware.npu: serving IScheduling/default" in line for line in log)
        assert all(line[:2].isdigit() and line[2] == "-" for line in log)  # logcat's MM-DD...
    # Leaving the block sent SIGTERM: a clean shutdown, exit status 0.
    assert hal.process("hal").returncode == 0
    # The directory keeps its records only (the HAL's log among them), none of a running stack's files.
    assert RuntimeFiles(tmp_path / "rt").live_files() == []
    assert (tmp_path / "rt" / "hal.log").exists()


async def test_a_stack_in_a_directory_of_its_own_leaves_nothing_behind():
    async with private_hal(clock="virtual") as hal:
        root = hal.runtime_dir
        assert root.stat().st_mode & 0o777 == 0o700
        assert sorted(hal.pids) == ["hal", "servicemanager"]
    assert not root.exists()


async def test_a_client_s_death_frees_its_models_within_200_ms(tmp_path):
    async with private_hal(clock="virtual") as hal:
        await (await scheduling(hal)).setSchedulingConfigs([SchedulingConfig(uid=APP, appPriority=500, hasDirectAccess=True)])
        tests_dir = str(Path(__file__).parent)
        env = dict(hal.env, PYTHONPATH=tests_dir + ":" + hal.env["PYTHONPATH"])
        client = await launch_process(
            [sys.executable, "-c", CLIENT], uid=APP, env=env, runtime=hal.runtime, stdout=subprocess.PIPE
        )
        try:
            with trio.fail_after(30):
                assert b"prepared" in await client.stdout.receive_some(64)
            assert await prepared_count(hal) == 1
            client.send_signal(signal.SIGKILL)
            await client.wait()
            await trio.sleep(0.2)
            assert await prepared_count(hal) == 0
        finally:
            if client.returncode is None:
                client.kill()
                await client.wait()
            await client.stdout.aclose()


class Died(DeathRecipient):
    def __init__(self):
        self.event = trio.Event()

    def binderDied(self, who):
        self.event.set()


async def test_sigkill_is_seen_by_a_death_recipient_and_restart_re_registers():
    async with private_hal(clock="virtual") as hal:
        sched = await scheduling(hal)
        died = Died()
        sched.asBinder().linkToDeath(died)
        old_pid = hal.pids["hal"]
        hal.kill("hal")
        with trio.fail_after(10):
            await died.event.wait()
        assert await hal.process("hal").wait() == -signal.SIGKILL
        await hal.restart_hal()
        assert hal.pids["hal"] != old_pid
        fresh = await scheduling(hal)
        assert fresh.asBinder().isBinderAlive()
        await fresh.setSchedulingConfigs([SchedulingConfig(uid=APP, appPriority=100)])
        assert await device_names(hal) == ["emu-dsp", "emu-gpu", "emu-hetero", "emu-npu"]
        # A driver crash takes the HAL process down, as a vendor bug would on a phone.
        with pytest.raises((DeadObjectException, TransactionFailedException)):
            await (await control(hal)).injectFault("emu-npu", IHalControl.FAULT_CRASH, 0)
        assert await hal.process("hal").wait() == -signal.SIGABRT
        # Not restarted by init (restart_hal=False): the death is in the log, and it stays dead.
        await trio.sleep(1.0)
        assert hal.process("hal").returncode == -signal.SIGABRT
        log = RuntimeFiles(hal.runtime_dir).log.read_text()
        assert f"hal (pid {hal.pids['hal']}) was killed by SIGABRT" in log


async def test_a_restart_on_request_while_init_restarts_a_dead_hal_leaves_one_hal():
    async with private_hal(clock="virtual", restart_hal=True) as hal:
        first = hal.pids["hal"]
        hal.kill("hal")
        await hal.restart_hal()  # init is restarting it too: one of them wins, then this one
        second = hal.pids["hal"]
        assert second != first and hal.process("hal").returncode is None
        await trio.sleep(2.0)  # init's own restart (0.5 s backoff) would have happened by now
        assert hal.pids["hal"] == second and hal.process("hal").returncode is None
        assert await device_names(hal) == ["emu-dsp", "emu-gpu", "emu-hetero", "emu-npu"]


async def test_a_driver_that_cannot_load_is_reported_with_the_hal_s_stderr(tmp_path):
    bogus = tmp_path / "not-a-driver.so"
    bogus.write_bytes(b"\x7fELF garbage")
    with pytest.raises(BootError) as info:
        async with private_hal(bogus, clock="virtual"):
            pass
    head, _, tail = str(info.value).partition("its last output:")
    assert "hal (pid" in head and "exited with status 1" in head
    assert "cannot start the HAL" in tail


def test_execution_helper_sizes():
    # The helper itself must lay inputs and outputs out without overlap.
    ex = Execution([np.ones((1, 16))], [(1, 8)])
    assert ex.offsets == [0, 64] and ex.shm.size == 64 + 4 * math.prod((1, 8))
