"""The HAL as its own OS process (``open_private_hal``): real sockets, real shared
memory, real process death."""

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

from framework.binder import DeadObjectException, DeathRecipient, TransactionFailedException, launch_process
from interfaces.android.hardware.neuralnetworks import ExecutionPreference, Priority
from interfaces.android.hardware.npu import SchedulingConfig
from interfaces.npuemu.hal import IHalControl
from nn_reference import fully_connected
from npuhal import FuseCode, PrivateHalError, open_private_hal
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


async def prepared_count(hal) -> int:
    dump = await (await hal.control()).dump()
    line = next(line for line in dump.splitlines() if "prepared models:" in line)
    return int(line.split(":")[1])


async def test_services_and_one_execute_through_shared_memory(tmp_path):
    async with open_private_hal(clock="virtual", runtime_dir=tmp_path / "rt", extra_args=("--log", "hal.log")) as hal:
        assert (tmp_path / "rt").stat().st_mode & 0o777 == 0o700
        assert await hal.device_names() == ["emu-dsp", "emu-gpu", "emu-hetero", "emu-npu"]
        model, w, b = fc_model(seed=11)
        npu = await hal.device("emu-npu")
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
    assert hal.process.returncode == 0
    assert not (tmp_path / "rt").exists()


async def test_a_client_s_death_frees_its_models_within_200_ms(tmp_path):
    async with open_private_hal(clock="virtual") as hal:
        await (await hal.scheduling()).setSchedulingConfigs([SchedulingConfig(uid=APP, appPriority=500, hasDirectAccess=True)])
        tests_dir = str(Path(__file__).parent)
        env = dict(hal._env, PYTHONPATH=tests_dir + ":" + hal._env["PYTHONPATH"])
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
    async with open_private_hal(clock="virtual") as hal:
        sched = await hal.scheduling()
        died = Died()
        sched.asBinder().linkToDeath(died)
        old_pid = hal.pid
        hal.kill()
        with trio.fail_after(10):
            await died.event.wait()
        assert await hal.wait() == -signal.SIGKILL
        await hal.restart()
        assert hal.pid != old_pid
        fresh = await hal.scheduling()
        assert fresh.asBinder().isBinderAlive()
        await fresh.setSchedulingConfigs([SchedulingConfig(uid=APP, appPriority=100)])
        assert await hal.device_names() == ["emu-dsp", "emu-gpu", "emu-hetero", "emu-npu"]
        # A driver crash takes the HAL process down, as a vendor bug would on a phone.
        control = await hal.control()
        with pytest.raises((DeadObjectException, TransactionFailedException)):
            await control.injectFault("emu-npu", IHalControl.FAULT_CRASH, 0)
        assert await hal.wait() == -signal.SIGABRT


async def test_a_driver_that_cannot_load_is_reported_with_the_hal_s_stderr(tmp_path):
    bogus = tmp_path / "not-a-driver.so"
    bogus.write_bytes(b"\x7fELF garbage")
    with pytest.raises(PrivateHalError) as info:
        async with open_private_hal(bogus, clock="virtual"):
            pass
    assert "exited with status 1" in str(info.value)
    assert "cannot start the HAL" in info.value.stderr_tail


def test_execution_helper_sizes():
    # The helper itself must lay inputs and outputs out without overlap.
    ex = Execution([np.ones((1, 16))], [(1, 8)])
    assert ex.offsets == [0, 64] and ex.shm.size == 64 + 4 * math.prod((1, 8))
