"""legacy: an app from before the NPU Manager, without ``<uses-feature android.hardware.npu>``.

It asks the NPU Manager for a load anyway (its NNAPI library does, on its behalf).
The npu service warns about the missing feature in the log, or, with the block flag
on, refuses the request (SecurityException) and takes away its direct NPU access, so
the HAL refuses its executions as well. The app shows what it was told, and runs its
model on the NNAPI CPU device ``nnapi-reference`` instead, checking every result
against its numpy reference. It finds both devices by NNAPI discovery (type and the
operations they support), as every sample does, never by name.
"""

from __future__ import annotations

import time

import numpy as np
import trio

from apps._kit import LoadSlot, Report, choose_device, close_enough, cpu_device, mlp
from framework.app import Context
from framework.binder import SecurityException
from framework.nn import NeuralNetworksError, open_nn_runtime
from framework.npumanager import NpuManager

INFERENCE_PERIOD_S = 0.05


async def main(context: Context) -> None:
    report = Report("legacy", context)
    npu: NpuManager = context.getSystemService(Context.NPU_SERVICE)
    model, reference = mlp(seed=17, sizes=(32, 64, 8))
    rng = np.random.default_rng(17)
    async with trio.open_nursery() as nursery, open_nn_runtime(context.runtime) as nn:
        nursery.start_soon(report.autosave)
        slot = LoadSlot(npu, context.getMainExecutor(), report, NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB,
                        NpuManager.NPU_MODEL_PRIORITY_NORMAL)
        approved = False
        try:
            await slot.file()
        except SecurityException as exc:
            report.data["refusals"].append({"what": "requestCanLoadModel", "error": str(exc)})
            report.data["blocked"] = True
            report.note("load_refused", str(exc))
        else:
            report.data["blocked"] = False
            approved = await slot.wait_can_load_now()
            report.note("warned", "approved; the service logs a warning about the missing uses-feature")
        # Even approved, an app without the feature may be denied direct access: try, then fall back.
        npu_device = await choose_device(nn, model)
        use_npu = False
        if npu_device is None:
            report.note("no_accelerator", "no driver device runs every operation of the model")
        else:
            try:
                compilation = nn.createCompilationForDevices(model, [npu_device])
                await compilation.finish()
                x = rng.standard_normal((1, 32)).astype(np.float32)
                execution = compilation.createExecution()
                execution.setInput(0, x)
                (out,) = await execution.compute_async()
            except NeuralNetworksError as exc:
                report.data["refusals"].append({"what": f"execute on {npu_device.getName()}", "error": str(exc)})
                report.note("npu_refused", str(exc))
            else:
                report.inference(0.0, close_enough(out, reference(x)), npu_device.getName())
                use_npu = approved
                await compilation.aclose()
        if approved and not slot.done:
            await slot.listener.notifyModelLoaded(slot.request)
            report.bump("loads")
            if not use_npu:  # nothing of ours stays on the NPU
                await slot.listener.notifyModelUnloaded(slot.request)
                report.bump("unloads")
        cpu = cpu_device(nn)
        device = npu_device if use_npu else cpu
        compilation = nn.createCompilationForDevices(model, [device])
        await compilation.finish()
        report.note("running", f"on {device.getName()}")
        while True:
            x = rng.standard_normal((1, 32)).astype(np.float32)
            execution = compilation.createExecution()
            execution.setInput(0, x)
            t = time.perf_counter()
            (out,) = await execution.compute_async()
            report.inference((time.perf_counter() - t) * 1000, close_enough(out, reference(x)), device.getName())
            await trio.sleep(INFERENCE_PERIOD_S)
