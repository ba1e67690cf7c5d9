"""rogue: the tenant the NPU Manager exists for.

It loads a "BETWEEN_1GB_AND_2GB" model and then misbehaves twice:

- It tries to pass its work off as another app's (``setOriginalUid``) without
  ``ATTRIBUTE_WORK_TO_OTHER_APPS``: the HAL refuses that execution.
- It ignores ``onRequestUnloadModel`` and keeps computing. At the unload deadline the
  npu service revokes its models through the HAL; its next executions fail, and it
  records the revocation (and the request's end, if the service sends one). It names
  no request on its compilation (``setModelLoadRequest``), which shelters nothing: a
  model filed under no request goes with its app's late request.
"""

from __future__ import annotations

import os

import numpy as np
import trio

from apps._kit import LoadSlot, Report, checked_inference, device_for, mlp
from framework.app import Context
from framework.nn import NeuralNetworksError, open_nn_runtime
from framework.npumanager import NpuManager

EMULATED_SIZE = 1536 << 20
VICTIM_UID = int(os.environ.get("NPUEMU_ROGUE_VICTIM_UID", "1000"))


async def main(context: Context) -> None:
    report = Report("rogue", context)
    npu: NpuManager = context.getSystemService(Context.NPU_SERVICE)
    model, reference = mlp(seed=13, sizes=(128, 256, 32))
    rng = np.random.default_rng(13)
    async with trio.open_nursery() as nursery, open_nn_runtime(context.runtime) as nn:
        nursery.start_soon(report.autosave)
        device = await device_for(nn, model, report)
        slot = LoadSlot(npu, context.getMainExecutor(), report, NpuManager.NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB,
                        NpuManager.NPU_MODEL_PRIORITY_NORMAL)
        await slot.file()
        if not await slot.wait_can_load_now():
            report.note("never_loaded", "the request ended before CAN_LOAD_NOW")
            await trio.sleep_forever()
        compilation = nn.createCompilationForDevices(model, [device])
        compilation.setEmulatedModelSize(EMULATED_SIZE)
        if not await slot.load(compilation):
            report.note("never_loaded", "the model was not loaded (the request ended, or the device was full)")
            await trio.sleep_forever()
        report.bump("loads")
        report.note("loaded", f"model on {device.getName()}")

        # Misdeed one: work attributed to someone else.
        x = rng.standard_normal((1, 128)).astype(np.float32)
        execution = compilation.createExecution()
        execution.setInput(0, x)
        execution.setOriginalUid(VICTIM_UID)
        try:
            await execution.compute_async()
        except NeuralNetworksError as exc:
            # A refusal is the HAL's SecurityException, which NNAPI reports as OP_FAILED "refused".
            refused = "refused" in str(exc)
            report.data["refusals"].append(
                {"what": "attribution", "to_uid": VICTIM_UID, "error": str(exc), "refused": refused})
            report.note("attribution_refused" if refused else "attribution_failed",
                        f"work attributed to uid {VICTIM_UID}: {exc}", level=20 if refused else 30)
        else:
            report.note("attribution_accepted", f"the HAL ran work attributed to uid {VICTIM_UID}!",
                        level=40)
            report.data["attribution_accepted"] = True

        # Misdeed two: unload requests are noted and ignored.
        asked = False
        while True:
            event = slot.poll()
            if event is not None and event.kind == "unload":
                asked = True
                report.note("ignoring_unload", "keeping the model anyway")
            x = rng.standard_normal((1, 128)).astype(np.float32)
            failed = await checked_inference(compilation, x, reference, report, device.getName())
            if failed is not None:
                if asked:
                    report.bump("revoked")
                    report.note("revoked", f"the model is gone: {failed}")
                else:
                    report.note("inference_failed", str(failed))
                break
            await trio.sleep(0.01)
        await compilation.aclose()
        await trio.sleep_forever()
