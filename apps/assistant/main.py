"""assistant: the largest model (GREATER_THAN_2G at NORMAL), loaded on demand.

Its model is MediaPipe's largest, the full pose landmark model (``pose_landmark_full``,
fetched by ``make models``), declared "GREATER_THAN_2G" and loaded with an emulated size
of 2.5 GB (``setEmulatedModelSize``, shared by the model's NNAPI partitions), as an
on-device assistant's model would be. It starts idle, as an assistant does until someone
speaks: it holds no model while in the background. A query comes when the user brings
it up, that is when the activity manager raises its importance to visible or better
(``npuemu am set-importance com.example.npuemu.assistant visible``; launched visible, it
asks at once). The query asks the NPU Manager for room; under the budget policy that
usually means WAIT_FOR_UNLOAD while less important apps are asked to make way, then
CAN_LOAD_NOW. It loads the model, "answers" (the pose of the user in up to four generated
camera frames, as many as fit in about two seconds: at least one) and lets the model go again (notifyModelUnloaded), so the others get their
turn back; then it checks each answer against its own run of the model on the CPU device
(in its own process, once per frame), which holds no one's NPU budget."""

from __future__ import annotations

import time

import trio

from apps._kit import (CpuReference, LoadSlot, Report, TfLiteLoad, camera_frame, cpu_device, device_for, open_tflite,
                       record, timed_run)
from framework.app import Context
from framework.nn import open_nn_runtime
from framework.npumanager import NpuManager

MODEL = "pose_landmark_full"
EMULATED_SIZE = 2560 << 20
FRAMES_PER_QUERY = 4
ANSWER_BUDGET_S = 2.0  # a reply takes at most about this long: no more frames once it has passed
RETRY_AFTER_S = 0.2
VISIBLE = 200  # ActivityManager.RunningAppProcessInfo.IMPORTANCE_VISIBLE


async def main(context: Context) -> None:
    report = Report("assistant", context)
    report.data["model"] = MODEL
    npu: NpuManager = context.getSystemService(Context.NPU_SERVICE)
    activity = context.getSystemService(Context.ACTIVITY_SERVICE)
    async with trio.open_nursery() as nursery, open_nn_runtime(context.runtime) as nn:
        nursery.start_soon(report.autosave)
        model = await open_tflite(MODEL)
        shape = model.tensors[model.inputs[0]].shape
        frames = await trio.to_thread.run_sync(lambda: [camera_frame(k, shape) for k in range(FRAMES_PER_QUERY)])
        device = await device_for(nn, model, report)
        reference = await CpuReference.open(nn, model, cpu_device(nn))
        while True:
            # Idle until the user brings the assistant up, and one query per time.
            while await activity.getUidImportance(context.getUid()) > VISIBLE:
                await trio.sleep(0.1)
            report.note("query", "the user asked something")
            t_ask = time.perf_counter()
            while True:  # until answered or refused; a load the device could not take yet asks again
                slot = LoadSlot(npu, context.getMainExecutor(), report, NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G,
                                NpuManager.NPU_MODEL_PRIORITY_NORMAL)
                await slot.file()
                if not await slot.wait_can_load_now() or await _answer(nn, model, reference, frames, slot, report,
                                                                       device, t_ask):
                    break
                await trio.sleep(RETRY_AFTER_S)
            while await activity.getUidImportance(context.getUid()) <= VISIBLE:
                await trio.sleep(0.1)  # answered; wait until the user leaves and comes back


async def _answer(nn, model, reference: CpuReference, frames, slot: LoadSlot, report: Report, device,
                  t_ask: float) -> bool:
    """The reply, if the model could be loaded (False: ask again)."""
    load = TfLiteLoad(nn, model, device, emulated_size=EMULATED_SIZE, request=slot.request)
    if not await slot.load(load):  # ended while compiling, or the device was full
        return False
    report.data.setdefault("wait_for_load_ms", []).append(round((time.perf_counter() - t_ask) * 1000, 1))
    report.bump("loads")
    report.note("loaded", f"pose landmark model on {device.getName()}")
    answers = []
    t_answer = time.perf_counter()
    for k, frame in enumerate(frames):
        event = slot.poll()
        if event is not None and event.kind in ("unload", "complete"):
            break
        if answers and time.perf_counter() - t_answer > ANSWER_BUDGET_S:
            break  # a slow device answers with fewer frames, and lets the model go in time
        answer, failed = await timed_run(load, [frame], report, job_priority=300)
        if answer is None:
            report.note("inference_failed", str(failed))
            break
        answers.append((k, frame, answer))
    await load.aclose()
    await slot.release("reply done, model released")
    # Checked once the model is let go: the CPU runs hold no one's budget.
    for k, frame, answer in answers:
        record(report, load, answer, await reference.outputs(k, [frame]))
    return True
