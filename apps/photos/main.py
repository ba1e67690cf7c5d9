"""photos: background indexing with a face landmark model, the NPU's best-behaved tenant.

It indexes the faces of the gallery with MediaPipe's face landmark model
(``face_landmark``, fetched by ``make models``: 468 points of a face mesh and whether
the crop holds a face; "BETWEEN_1GB_AND_2GB", NPU_MODEL_PRIORITY_BACKGROUND, low job
priority), one long inference per photo, two photos at a time. The gallery is generated (``gallery_photo``:
photo ``i`` is always the same face crop); each result is checked against the app's own
run of the same model on the CPU device (``nnapi-reference``, in this process), computed
once per photo, and counted in ``faces`` when the model says it holds a face. When the
system asks it to unload (a foreground app needs the budget, or the die is hot) it stops
between two photos (or drops the photos in hand after FINISH_IN_HAND_S), releases the
model, calls notifyModelUnloaded at once, and asks again later: its next request waits (WAIT_FOR_UNLOAD / NOT_PRIORITIZED) until the budget
frees. Once through the gallery it starts over (a re-index, as after a model update).
"""

from __future__ import annotations

import time

import numpy as np
import trio

from apps._kit import (CpuReference, LoadSlot, Report, TfLiteLoad, checked_run, cpu_device, device_for, gallery_photo,
                       open_tflite)
from framework.app import Context
from framework.nn import open_nn_runtime
from framework.npumanager import NpuManager

MODEL = "face_landmark"
GALLERY = 12  # photos
EMULATED_SIZE = 1536 << 20
JOB_PRIORITY = 900
RETRY_AFTER_S = 1.0
WORKERS = 2
#: Asked to unload, the photos in hand may take this long to finish; what is still running
#: then is dropped (cancelled), so the model is released well within the unload deadline
#: even when camera frames keep preempting the indexing (a loaded machine, a slow driver).
FINISH_IN_HAND_S = 0.5


async def main(context: Context) -> None:
    report = Report("photos", context)
    report.data.update(model=MODEL, indexed=0, faces=0)
    npu: NpuManager = context.getSystemService(Context.NPU_SERVICE)
    async with trio.open_nursery() as nursery, open_nn_runtime(context.runtime) as nn:
        nursery.start_soon(report.autosave)
        model = await open_tflite(MODEL)
        gallery = _Gallery(model)
        device = await device_for(nn, model, report)
        reference = await CpuReference.open(nn, model, cpu_device(nn))
        while True:
            slot = LoadSlot(npu, context.getMainExecutor(), report, NpuManager.NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB,
                            NpuManager.NPU_MODEL_PRIORITY_BACKGROUND)
            await slot.file()
            if not await slot.wait_can_load_now():
                await trio.sleep(RETRY_AFTER_S)
                continue
            load = TfLiteLoad(nn, model, device, emulated_size=EMULATED_SIZE, request=slot.request)
            if not await slot.load(load):  # ended while compiling, or the device was full
                await trio.sleep(RETRY_AFTER_S)
                continue
            report.bump("loads")
            report.note("loaded", f"face landmark model on {device.getName()}")
            # Two photos at a time, as a batch indexer does (and so both of the NPU's
            # channels: a camera frame must preempt one); the first callback that says
            # "unload" (or ends the request) stops both between two photos.
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
                    workers.start_soon(_index, load, reference, gallery, report, stop)
                await stop.wait()  # the workers finish the photo in hand, then return
                watch_scope.cancel()
                workers.cancel_scope.deadline = trio.current_time() + FINISH_IN_HAND_S
            await load.aclose()
            if outcome["asked"]:
                await slot.release("indexing paused, model released",
                                   after_ms=round((time.perf_counter() - outcome["asked_at"]) * 1000, 1))
            await trio.sleep(RETRY_AFTER_S)


class _Gallery:
    """The photos to index, in order, round and round (each drawn once, then kept)."""

    def __init__(self, model) -> None:
        self.shape = model.tensors[model.inputs[0]].shape
        self.presence = next(k for k, t in enumerate(model.outputs) if model.tensors[t].value is None
                             and int(np.prod(model.tensors[t].shape)) == 1)
        self.next = 0
        self._photos: dict[int, np.ndarray] = {}

    def take(self) -> tuple[int, np.ndarray]:
        index, self.next = self.next, (self.next + 1) % GALLERY
        if index not in self._photos:
            self._photos[index] = gallery_photo(index, self.shape)
        return index, self._photos[index]


async def _index(load: TfLiteLoad, reference: CpuReference, gallery: _Gallery, report: Report,
                 stop: trio.Event) -> None:
    while not stop.is_set():
        index, photo = gallery.take()
        outputs, failed = await checked_run(load, index, [photo], reference, report, job_priority=JOB_PRIORITY)
        if failed is not None:
            report.note("inference_failed", str(failed))
            stop.set()
            return
        report.bump("indexed")
        if float(outputs[gallery.presence].ravel()[0]) > 0:  # a logit: more likely a face than not
            report.bump("faces")
        await trio.sleep(0)
