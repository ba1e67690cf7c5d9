"""camera: the latency-sensitive foreground pipeline, a face detector at 30 frames a second.

It runs MediaPipe's short-range face detector (``face_detection_short_range``, fetched
by ``make models``; "LESS_THAN_1GB") on the NPU, one inference per preview frame at 30
frames a second, and reports the p50/p99 latency against a 50 ms target and how many
frames held a face. The frames are generated (``camera_frame``: a person swaying in a
one-second loop), so the same frame index is the same picture. Every result is checked
against the app's own run of the same model on the CPU device (``nnapi-reference``, in
this process), computed once per distinct frame; a mismatch is a wrong result.

It is a good citizen: asked to unload (a thermal emergency, say) it releases the model,
tells the service, and asks again a second later; meanwhile the preview's frames run on
the CPU device (counted as ``cpu_frames``: they are the reference itself, so they check
nothing) so the preview never stops.
"""

from __future__ import annotations

import numpy as np
import trio

from apps._kit import (FRAME_LOOP, CpuReference, LoadSlot, Report, TfLiteLoad, camera_frame, checked_run, cpu_device,
                       device_for, open_tflite)
from framework.app import Context
from framework.nn import open_nn_runtime
from framework.npumanager import NpuManager

MODEL = "face_detection_short_range"
FRAME_PERIOD_S = 1 / 30
LATENCY_TARGET_MS = 50.0
EMULATED_SIZE = 64 << 20
JOB_PRIORITY = 100  # a camera frame is urgent within the app, too
FACE_SCORE = 0.5  # a frame holds a face when an anchor's score (a logit) passes this probability


async def main(context: Context) -> None:
    report = Report("camera", context)
    report.data.update(latency_target_ms=LATENCY_TARGET_MS, model=MODEL, frames_with_face=0, cpu_frames=0)
    npu: NpuManager = context.getSystemService(Context.NPU_SERVICE)
    async with trio.open_nursery() as nursery, open_nn_runtime(context.runtime) as nn:
        nursery.start_soon(report.autosave)
        model = await open_tflite(MODEL)
        preview = _Preview(model, report)
        device = await device_for(nn, model, report)
        reference = await CpuReference.open(nn, model, cpu_device(nn))
        while True:
            slot = LoadSlot(npu, context.getMainExecutor(), report, NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB,
                            NpuManager.NPU_MODEL_PRIORITY_NORMAL)
            await slot.file()
            if not await slot.wait_can_load_now():
                await trio.sleep(1.0)
                continue
            load = TfLiteLoad(nn, model, device, emulated_size=EMULATED_SIZE, request=slot.request)
            if not await slot.load(load):  # ended while compiling, or the device was full
                await trio.sleep(1.0)
                continue
            report.bump("loads")
            report.note("loaded", f"face detector on {device.getName()}")
            asked = await preview.on_device(slot, load, reference)
            await load.aclose()
            if asked:
                await slot.release("model released as asked")
            # Until the NPU is ours again, frames go to the CPU: the preview must not stop.
            with trio.move_on_after(1.0):
                await preview.on_cpu(reference)


class _Preview:
    """The preview's frames, numbered from the app's start, one every FRAME_PERIOD_S.

    The frames are a clip of FRAME_LOOP frames played round and round: each is drawn
    once and kept (drawing one costs about what the face detector does)."""

    def __init__(self, model, report: Report) -> None:
        self.shape = model.tensors[model.inputs[0]].shape
        self.scores = next(k for k, t in enumerate(model.outputs) if model.tensors[t].shape[-1] == 1)
        self.report = report
        self.index = 0
        self._clip: dict[int, np.ndarray] = {}

    def _next(self) -> tuple[int, np.ndarray]:
        index, self.index = self.index, self.index + 1
        key = index % FRAME_LOOP
        if key not in self._clip:
            self._clip[key] = camera_frame(key, self.shape)
        return key, self._clip[key]

    async def on_device(self, slot: LoadSlot, load: TfLiteLoad, reference: CpuReference) -> bool:
        """Frames on the loaded model until the slot is asked to unload or ends (True if asked)."""
        next_frame = trio.current_time()
        while True:
            event = slot.poll()
            if event is not None and event.kind in ("unload", "complete"):
                return event.kind == "unload"
            key, frame = self._next()
            outputs, failed = await checked_run(load, key, [frame], reference, self.report, job_priority=JOB_PRIORITY)
            if failed is not None:
                self.report.note("inference_failed", str(failed))
                return False
            self._faces(outputs)
            next_frame += FRAME_PERIOD_S
            await trio.sleep_until(max(next_frame, trio.current_time()))

    async def on_cpu(self, reference: CpuReference) -> None:
        next_frame = trio.current_time()
        while True:
            _, frame = self._next()
            self._faces(await reference.compute([frame]))
            self.report.bump("cpu_frames")
            next_frame += FRAME_PERIOD_S
            await trio.sleep_until(max(next_frame, trio.current_time()))

    def _faces(self, outputs: list[np.ndarray]) -> None:
        logit = float(np.max(outputs[self.scores]))
        if logit > np.log(FACE_SCORE / (1 - FACE_SCORE)):
            self.report.bump("frames_with_face")
