"""camera: the latency-sensitive foreground pipeline.

A small classifier (64 -> 128 -> 10, "LESS_THAN_1GB") on the NPU, one inference per
frame at 30 frames a second, each checked against the app's own numpy reference.
It reports the p50/p99 latency against a 50 ms target. It is a good citizen: asked to
unload (a thermal emergency, say) it releases the model, tells the service, and asks
again a second later; meanwhile frames run on the CPU so the preview never stops.
"""

from __future__ import annotations

import numpy as np
import trio

from apps._kit import LoadSlot, Report, checked_inference, cpu_device, device_for, mlp
from framework.app import Context
from framework.nn import open_nn_runtime
from framework.npumanager import NpuManager

FRAME_PERIOD_S = 1 / 30
LATENCY_TARGET_MS = 50.0
EMULATED_SIZE = 64 << 20
JOB_PRIORITY = 100  # a camera frame is urgent within the app, too


async def main(context: Context) -> None:
    report = Report("camera", context)
    report.data["latency_target_ms"] = LATENCY_TARGET_MS
    npu: NpuManager = context.getSystemService(Context.NPU_SERVICE)
    model, reference = mlp(seed=7, sizes=(64, 128, 10))
    rng = np.random.default_rng(1)
    async with trio.open_nursery() as nursery, open_nn_runtime(context.runtime) as nn:
        nursery.start_soon(report.autosave)
        device = await device_for(nn, model, report)
        cpu = cpu_device(nn)
        cpu_compilation = nn.createCompilationForDevices(model, [cpu])
        await cpu_compilation.finish()
        while True:
            slot = LoadSlot(npu, context.getMainExecutor(), report, NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB,
                            NpuManager.NPU_MODEL_PRIORITY_NORMAL)
            await slot.file()
            if not await slot.wait_can_load_now():
                await trio.sleep(1.0)
                continue
            compilation = nn.createCompilationForDevices(model, [device])
            compilation.setEmulatedModelSize(EMULATED_SIZE)
            compilation.setModelLoadRequest(slot.request)  # revoked alone if ever late
            if not await slot.load(compilation):  # ended while compiling, or the device was full
                await trio.sleep(1.0)
                continue
            report.bump("loads")
            report.note("loaded", f"classifier on {device.getName()}")
            asked = await _frames(slot, compilation, reference, rng, report, device.getName())
            await compilation.aclose()
            if asked:
                await slot.release("model released as asked")
            # Until the NPU is ours again, frames go to the CPU: the preview must not stop.
            with trio.move_on_after(1.0):
                await _frames(None, cpu_compilation, reference, rng, report, cpu.getName())


async def _frames(slot, compilation, reference, rng, report: Report, device: str) -> bool:
    """Frames until the slot is asked to unload or ends (True if asked); forever without a slot."""
    next_frame = trio.current_time()
    while True:
        if slot is not None:
            event = slot.poll()
            if event is not None and event.kind in ("unload", "complete"):
                return event.kind == "unload"
        frame = rng.standard_normal((1, 64)).astype(np.float32)
        failed = await checked_inference(compilation, frame, reference, report, device, job_priority=JOB_PRIORITY)
        if failed is not None:
            report.note("inference_failed", str(failed))
            if slot is not None:
                return False
        next_frame += FRAME_PERIOD_S
        await trio.sleep_until(max(next_frame, trio.current_time()))
