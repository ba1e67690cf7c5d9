"""The NNAPI runtime against the HAL as its own OS process (real sockets, SCM_RIGHTS).

``open_stack(processes=True, system_server=False)`` starts a servicemanager and
``python -m npuhal`` (real clock); this test process is init. One test runs the app as its own process under an
app uid, as ``npuemu launch`` would; one SIGKILLs the HAL under a prepared model;
one runs ``npuemu nn plan`` against a whole booted emulator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import trio

import nn_reference
from framework.binder import defaultServiceManager, launch_process
from framework.emulator import BootConfig, open_stack
from framework.nn import CPU_DEVICE_NAME, DeadObjectError, open_nn_runtime, sampleModel
from interfaces.npuemu.hal import IHalControl

pytestmark = pytest.mark.multiprocess

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

APP = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import trio
    sys.path.insert(0, sys.argv[1])
    import nn_reference
    from framework.binder import open_binder_runtime
    from framework.nn import open_nn_runtime, sampleModel

    async def main():
        async with open_binder_runtime() as binder, open_nn_runtime(binder) as nn:
            model = sampleModel()
            rng = np.random.default_rng(5)
            inputs = [rng.random((1, 8, 8, 3), dtype=np.float32), rng.random((1, 16), dtype=np.float32)]
            async with nn.createCompilation(model) as compilation:
                await compilation.finish()
                execution = compilation.createExecution()
                for i, x in enumerate(inputs):
                    execution.setInput(i, x)
                execution.setJobPriority(100)
                outputs = await execution.compute_async()
                expected = nn_reference.run(model.to_hal(), inputs)
                print(json.dumps({
                    "uid": binder.uid,
                    "devices": [d.name for d in nn.devices],
                    "plan": sorted({d.name for d in compilation.plan.devices}),
                    "error": max(float(np.abs(a - b).max()) for a, b in zip(outputs, expected)),
                }))

    trio.run(main)
    """
)


def inputs_for(seed=7):
    rng = np.random.default_rng(seed)
    return [rng.random((1, 8, 8, 3), dtype=np.float32), rng.random((1, 16), dtype=np.float32)]


async def test_an_app_process_computes_through_the_hal_process():
    async with open_stack(processes=True, system_server=False, config=BootConfig(record=False, boot_timeout=30)) as hal:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("NPUEMU_NN_ENABLED_DEVICES", None)
        proc = await launch_process(
            [sys.executable, "-c", APP, str(TESTS)],
            uid=10001,
            env=env,
            runtime=hal.runtime,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        with trio.fail_after(60):
            out = await proc.stdout.receive_some(1 << 16)
            chunks = [out]
            while True:
                more = await proc.stdout.receive_some(1 << 16)
                if not more:
                    break
                chunks.append(more)
            code = await proc.wait()
        err = (await proc.stderr.receive_some(1 << 16)).decode(errors="replace")
        assert code == 0, err
        report = json.loads(b"".join(chunks).decode().strip().splitlines()[-1])
    assert report["uid"] == 10001
    assert report["devices"][-1] == CPU_DEVICE_NAME
    assert "emu-npu" in report["devices"]
    assert report["plan"] == ["emu-gpu"]  # the fastest device in float32
    assert report["error"] < 1e-5


async def test_a_sigkilled_hal_is_dead_object_for_devices_a_fallback_otherwise_and_comes_back():
    model = sampleModel()
    inputs = inputs_for()
    expected = nn_reference.run(model.to_hal(), inputs)
    config = BootConfig(record=False, boot_timeout=30, restart_hal=False)  # the test restarts it itself
    async with open_stack(processes=True, system_server=False, config=config) as hal, \
            open_nn_runtime(hal.runtime, environ={}) as nn:
        npu = nn.getDeviceByName("emu-npu")
        strict = nn.createCompilationForDevices(model, [npu])
        plain = nn.createCompilation(model)
        await strict.finish()
        await plain.finish()
        assert [d.name for d in plain.plan.devices] == ["emu-gpu"]  # the fastest in float32
        for compilation in (strict, plain):  # both run on the HAL while it lives
            execution = compilation.createExecution()
            for i, x in enumerate(inputs):
                execution.setInput(i, x)
            for got, want in zip(await execution.compute_async(), expected, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        hal.kill("hal")
        await hal.process("hal").wait()
        for compilation in (strict, plain):
            execution = compilation.createExecution()
            for i, x in enumerate(inputs):
                execution.setInput(i, x)
            if compilation is strict:
                with pytest.raises(DeadObjectError):
                    await execution.compute_async()
            else:
                for got, want in zip(await execution.compute_async(), expected, strict=True):
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
                assert [d.name for d in compilation.plan.devices] == [CPU_DEVICE_NAME]
        await strict.aclose()
        await plain.aclose()
        # A new HAL process: a plain compilation finds the GPU again by itself.
        await hal.restart_hal()
        async with nn.createCompilation(model) as again:
            await again.finish()
            assert [d.name for d in again.plan.devices] == ["emu-gpu"]
            execution = again.createExecution()
            for i, x in enumerate(inputs):
                execution.setInput(i, x)
            for got, want in zip(await execution.compute_async(), expected, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


async def test_nn_plan_online_matches_offline(tmp_path):
    npuemu = [sys.executable, "-c", "from framework.cli import main; main()"]
    argv = [*npuemu, "nn", "plan", "--devices", "emu-npu,emu-dsp", "--preference", "low-power"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NPUEMU_NN_ENABLED_DEVICES", None)
    offline = await trio.run_process([*argv, "--offline"], capture_stdout=True, env=env)
    async with open_stack(processes=True, runtime_dir=tmp_path / "emu", config=BootConfig(record=False)):
        online = await trio.run_process(
            [*argv, "--runtime-dir", str(tmp_path / "emu")], capture_stdout=True, capture_stderr=True, env=env,
            check=False,
        )
    assert online.returncode == 0, online.stderr.decode()
    text = online.stdout.decode()
    assert "emu-npu" in text and "emu-dsp" in text

    def plan_part(output: bytes | str) -> str:
        output = output.decode() if isinstance(output, bytes) else output
        return output[output.index("ExecutionPlan:"):]

    # Online discovery (sorted by the servicemanager) lists devices in another order
    # than the driver does, but the partitioning is the same.
    assert plan_part(text) == plan_part(offline.stdout)


async def test_a_compilation_cache_crosses_into_the_hal_process_as_descriptors(tmp_path):
    """The cache files are opened here and written and read by the HAL process through
    the descriptors passed over the socket; the second compilation sends no model."""
    model = sampleModel()
    inputs = inputs_for()
    expected = nn_reference.run(model.to_hal(), inputs)
    config = BootConfig(record=False, boot_timeout=30)
    async with open_stack(processes=True, system_server=False, config=config) as hal, \
            open_nn_runtime(hal.runtime, environ={}) as nn:
        control = IHalControl.asInterface(
            await defaultServiceManager(hal.runtime).checkService("npuemu.hal.IHalControl/default")
        )
        for _ in range(2):
            async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as compilation:
                compilation.setCaching(tmp_path, bytes(range(32)))
                await compilation.finish()
                execution = compilation.createExecution()
                for i, x in enumerate(inputs):
                    execution.setInput(i, x)
                for got, want in zip(await execution.compute_async(), expected, strict=True):
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert len(list(tmp_path.iterdir())) == 2 and all(p.stat().st_size > 0 for p in tmp_path.iterdir())
        assert "1 full prepare(s) (1 cached), 1 from cache, 0 cache(s) refused" in await control.dump()


async def test_a_burst_runs_through_the_hal_process():
    """IBurst crosses the process boundary: the burst's pool descriptor travels with each
    request and the HAL finds its mapping by the memory token."""
    model = sampleModel()
    config = BootConfig(record=False, boot_timeout=30)
    async with open_stack(processes=True, system_server=False, config=config) as hal, \
            open_nn_runtime(hal.runtime, environ={}) as nn:
        async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as compilation:
            await compilation.finish()
            async with compilation.createBurst() as burst:
                results = []
                for seed in (7, 8, 9):
                    inputs = inputs_for(seed)
                    execution = compilation.createExecution()
                    for i, x in enumerate(inputs):
                        execution.setInput(i, x)
                    results.append((await execution.burstCompute_async(burst), nn_reference.run(model.to_hal(), inputs)))
                for got, want in results:  # earlier results were not overwritten by later runs
                    for a, b in zip(got, want, strict=True):
                        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
