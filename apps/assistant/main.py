"""assistant: a large model (GREATER_THAN_2G at NORMAL), loaded on demand.

It starts idle, as an assistant does until someone speaks: it holds no model while
in the background. A query comes when the user brings it up, that is when the activity
manager raises its importance to visible or better (``npuemu am set-importance
com.example.npuemu.assistant visible``; launched visible, it asks at once). The query
asks the NPU Manager for room; under the budget policy that usually means WAIT_FOR_UNLOAD while
less important apps are asked to make way, then CAN_LOAD_NOW. It loads the model,
"generates" a reply (a run of inferences, each checked against its numpy reference),
and lets the model go again (notifyModelUnloaded), so the others get their turn back.
"""

from __future__ import annotations

import time

import numpy as np
import trio

from apps._kit import LoadSlot, Report, checked_inference, device_for, mlp
from framework.app import Context
from framework.nn import open_nn_runtime
from framework.npumanager import NpuManager

EMULATED_SIZE = 2560 << 20
TOKENS_PER_QUERY = 40
RETRY_AFTER_S = 0.2
VISIBLE = 200  # ActivityManager.RunningAppProcessInfo.IMPORTANCE_VISIBLE


async def main(context: Context) -> None:
    report = Report("assistant", context)
    npu: NpuManager = context.getSystemService(Context.NPU_SERVICE)
    model, reference = mlp(seed=5, sizes=(256, 512, 512, 256))
    rng = np.random.default_rng(5)
    activity = context.getSystemService(Context.ACTIVITY_SERVICE)
    async with trio.open_nursery() as nursery, open_nn_runtime(context.runtime) as nn:
        nursery.start_soon(report.autosave)
        device = await device_for(nn, model, report)
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
                if not await slot.wait_can_load_now() or await _answer(nn, model, reference, rng, slot, report, device,
                                                                       t_ask):
                    break
                await trio.sleep(RETRY_AFTER_S)
            while await activity.getUidImportance(context.getUid()) <= VISIBLE:
                await trio.sleep(0.1)  # answered; wait until the user leaves and comes back


async def _answer(nn, model, reference, rng, slot: LoadSlot, report: Report, device, t_ask: float) -> bool:
    """The reply, if the model could be loaded (False: ask again)."""
    compilation = nn.createCompilationForDevices(model, [device])
    compilation.setEmulatedModelSize(EMULATED_SIZE)
    compilation.setModelLoadRequest(slot.request)  # revoked alone if ever late
    if not await slot.load(compilation):  # ended while compiling, or the device was full
        return False
    report.data.setdefault("wait_for_load_ms", []).append(round((time.perf_counter() - t_ask) * 1000, 1))
    report.bump("loads")
    report.note("loaded", f"language model on {device.getName()}")
    for _ in range(TOKENS_PER_QUERY):
        event = slot.poll()
        if event is not None and event.kind in ("unload", "complete"):
            break
        x = rng.standard_normal((1, 256)).astype(np.float32)
        failed = await checked_inference(compilation, x, reference, report, device.getName(), job_priority=300)
        if failed is not None:
            report.note("inference_failed", str(failed))
            break
    await compilation.aclose()
    await slot.release("reply done, model released")
    return True
