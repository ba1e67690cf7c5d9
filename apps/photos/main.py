"""photos: background indexing, the NPU's best-behaved tenant.

It indexes the gallery with a convolutional feature extractor ("BETWEEN_1GB_AND_2GB",
NPU_MODEL_PRIORITY_BACKGROUND, low job priority), one long inference per photo, each
checked against its own numpy reference. When the system asks it to unload (a
foreground app needs the budget, or the die is hot) it stops between two photos,
releases the model, calls notifyModelUnloaded at once, and asks again later: its
next request waits (WAIT_FOR_UNLOAD / NOT_PRIORITIZED) until the budget frees.
"""

from __future__ import annotations

import time

import numpy as np
import trio

from apps._kit import LoadSlot, Report, checked_inference, convnet, device_for
from framework.app import Context
from framework.nn import open_nn_runtime
from framework.npumanager import NpuManager

EMULATED_SIZE = 1536 << 20
JOB_PRIORITY = 900
RETRY_AFTER_S = 1.0
WORKERS = 2


async def main(context: Context) -> None:
    report = Report("photos", context)
    npu: NpuManager = context.getSystemService(Context.NPU_SERVICE)
    model, reference = convnet(seed=11, size=24, channels=3, filters=16, depth=4)
    rng = np.random.default_rng(3)
    async with trio.open_nursery() as nursery, open_nn_runtime(context.runtime) as nn:
        nursery.start_soon(report.autosave)
        device = await device_for(nn, model, report)
        while True:
            slot = LoadSlot(npu, context.getMainExecutor(), report, NpuManager.NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB,
                            NpuManager.NPU_MODEL_PRIORITY_BACKGROUND)
            await slot.file()
            if not await slot.wait_can_load_now():
                await trio.sleep(RETRY_AFTER_S)
                continue
            compilation = nn.createCompilationForDevices(model, [device])
            compilation.setEmulatedModelSize(EMULATED_SIZE)
            compilation.setModelLoadRequest(slot.request)  # revoked alone if ever late
            if not await slot.load(compilation):  # ended while compiling, or the device was full
                await trio.sleep(RETRY_AFTER_S)
                continue
            report.bump("loads")
            report.note("loaded", f"feature extractor on {device.getName()}")
            # Two photos at a time, as a batch indexer does; the first callback that
            # says "unload" (or ends the request) stops both between two photos.
            stop = trio.Event()
            outcome: dict[str, float | bool] = {"asked": False}
            watch_scope = trio.CancelScope()

            async def watch() -> None:
                with watch_scope:
                    event = await slot.next()
                    while event.kind == "can_load":  # a repeated status changes nothing here
                        event = await slot.next()
                    outcome["asked"] = event.kind == "unload"
                    outcome["asked_at"] = time.perf_counter()
                    stop.set()

            async with trio.open_nursery() as workers:
                workers.start_soon(watch)
                for _ in range(WORKERS):
                    workers.start_soon(_index, compilation, reference, rng, report, stop, device.getName())
                await stop.wait()  # the workers finish the photo in hand, then return
                watch_scope.cancel()
            await compilation.aclose()
            if outcome["asked"]:
                await slot.release("indexing paused, model released",
                                   after_ms=round((time.perf_counter() - outcome["asked_at"]) * 1000, 1))
            await trio.sleep(RETRY_AFTER_S)


async def _index(compilation, reference, rng, report: Report, stop: trio.Event, device: str) -> None:
    while not stop.is_set():
        photo = rng.random((1, 24, 24, 3), dtype=np.float32)
        failed = await checked_inference(compilation, photo, reference, report, device, job_priority=JOB_PRIORITY)
        if failed is not None:
            report.note("inference_failed", str(failed))
            stop.set()
            return
        await trio.sleep(0)
