"""The app ``bench/load.py`` launches 64 times (copied in as each app's ``main.py``).

Public app APIs only: it waits for the bench's start signal (``load.json`` in the
runtime directory: the wall-clock start and the duration), then cycles until the
end time:

    requestCanLoadModel -> onCanLoadModel(CAN_LOAD_NOW)     admission latency
    compile on the NPU, notifyModelLoaded
    one execution, checked against numpy               execution latency
    release the model, notifyModelUnloaded -> onModelLoadRequestComplete(COMPLETE)

A request answered WAIT_FOR_UNLOAD or NOT_PRIORITIZED waits for the later
CAN_LOAD_NOW (admission latency counts the wait); one cancelled (the system took the
budget back, before or after approving it) is counted and the app asks again. An
unload request is obeyed at once.

CAN_LOAD_NOW is the budget's word, not the device's: the load goes through the
sample apps' ``apps._kit.load_model``, as a careful app's would. An approval cancelled
while its model compiles releases the model unused; a load the device refuses
(``RESOURCE_EXHAUSTED``: memory an app whose approval was just cancelled is still
releasing, the race SPEC Part C's rules 4 and 8 allow) gives the approval back, waits a
little (50 ms, doubling while it recurs, at most 1 s) and asks again. Both are counted,
neither is an error.
Its numbers go to ``load-<package>.json`` when it stops.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import trio

from apps import LoadOutcome, load_model, mlp
from framework.app import Context
from framework.binder import IllegalStateException
from framework.nn import NeuralNetworksError, open_nn_runtime
from framework.npumanager import ModelLoadRequest, ModelLoadRequestCallback, NpuManager

CAN_LOAD_NOW = NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW


class Slot(ModelLoadRequestCallback):
    def __init__(self) -> None:
        self.send, self.recv = trio.open_memory_channel(16)
        self.listener = None
        self.done = False

    def onCanLoadModel(self, request, status, listener):  # noqa: N802
        self.listener = listener
        self.send.send_nowait(("can_load", status))

    def onRequestUnloadModel(self, request, reason=0):  # noqa: N802
        self.send.send_nowait(("unload", reason))

    def onModelLoadRequestComplete(self, request, status):  # noqa: N802
        self.done = True
        self.send.send_nowait(("complete", status))


async def main(context: Context) -> None:
    rtdir = os.environ["NPUEMU_RUNTIME_DIR"]
    package = context.getPackageName()
    control = os.path.join(rtdir, "load.json")
    stats = {"package": package, "uid": context.getUid(), "pid": os.getpid(), "cycles": 0, "admission_ms": [],
             "execution_ms": [], "statuses": {}, "cancelled": 0, "unload_asked": 0, "errors": [], "bad_results": 0,
             "ended_before_load": 0, "device_full": 0}
    npu = context.getSystemService(Context.NPU_SERVICE)
    seed = context.getUid() % 1000
    model, reference = mlp(seed=seed, sizes=(32, 32, 8))
    rng = np.random.default_rng(seed)
    sizes = [NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB] * 3 + [NpuManager.NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB]
    request_id = 0
    refused_in_a_row = 0  # loads the device refused for memory, since the last that fitted
    async with open_nn_runtime(context.runtime) as nn:
        # Up and discovered: say so, and wait for the common start (the start-up of
        # 64 Pythons on two cores is not the load being measured).
        open(os.path.join(rtdir, f"ready-{package}"), "w").close()
        while not os.path.exists(control):
            await trio.sleep(0.1)
        plan = json.load(open(control))
        await trio.sleep_until(trio.current_time() + max(0.0, plan["start"] - time.time()))
        end = trio.current_time() + max(0.0, plan["start"] + plan["duration"] - time.time())
        device = nn.getDeviceByName(plan.get("device", "emu-npu"))
        while trio.current_time() < end:
            request_id += 1
            size = sizes[request_id % len(sizes)]
            request = ModelLoadRequest.Builder(request_id).setSize(size).build()
            slot = Slot()
            t0 = time.perf_counter()
            await npu.requestCanLoadModel(request, slot, context.getMainExecutor())
            granted = False
            with trio.move_on_at(end):
                while True:
                    kind, status = await slot.recv.receive()
                    stats["statuses"][f"{kind}:{status}"] = stats["statuses"].get(f"{kind}:{status}", 0) + 1
                    if kind == "can_load" and status == CAN_LOAD_NOW:
                        granted = True
                        break
                    if kind == "complete":
                        stats["cancelled"] += 1
                        break
            if not granted:
                if trio.current_time() >= end:
                    try:
                        await npu.cancelModelLoad(request)
                    except Exception:  # noqa: BLE001 - it may have ended meanwhile
                        pass
                continue
            stats["admission_ms"].append((time.perf_counter() - t0) * 1000)
            try:
                async with nn.createCompilationForDevices(model, [device]) as compilation:
                    compilation.setEmulatedModelSize((512 if size else 256) << 20)  # fits the budget: 8 x 256 MiB, 4 x 512 MiB
                    outcome = await load_model(npu, request, slot.listener, compilation, ended=lambda: slot.done)
                    if outcome is LoadOutcome.ENDED:
                        # The budget policy cancelled the approved request while it
                        # compiled (rule 4: a more important uid needed the budget).
                        # Its model was released unused, as an app must.
                        stats["ended_before_load"] += 1
                        stats["cycles"] += 1
                        continue
                    if outcome is LoadOutcome.DEVICE_FULL:
                        stats["device_full"] += 1
                        refused_in_a_row += 1
                        await trio.sleep(min(1.0, 0.05 * 2 ** (refused_in_a_row - 1)))
                        continue  # the approval was given back: ask again
                    refused_in_a_row = 0
                    x = rng.random((1, 32), dtype=np.float32)
                    execution = compilation.createExecution()
                    execution.setInput(0, x)
                    t1 = time.perf_counter()
                    (y,) = await execution.compute_async()
                    stats["execution_ms"].append((time.perf_counter() - t1) * 1000)
                    if not np.allclose(np.asarray(y).reshape(1, 8), reference(x), rtol=1e-4, atol=1e-5):
                        stats["bad_results"] += 1
            except (NeuralNetworksError, Exception) as exc:  # noqa: BLE001 - counted, reported
                if len(stats["errors"]) < 20:
                    stats["errors"].append(f"{type(exc).__name__}: {exc}"[:300])
            try:
                await slot.listener.notifyModelUnloaded(request)
            except IllegalStateException:
                stats["ended_before_load"] += 1  # cancelled or revoked meanwhile: already ended
            except Exception as exc:  # noqa: BLE001 - revoked or cancelled meanwhile: counted
                if len(stats["errors"]) < 20:
                    stats["errors"].append(f"unload: {type(exc).__name__}: {exc}"[:300])
            while True:  # drain to the request's end
                with trio.move_on_after(5):
                    kind, status = await slot.recv.receive()
                    if kind == "unload":
                        stats["unload_asked"] += 1
                    if kind == "complete":
                        break
                    continue
                break
            stats["cycles"] += 1
    out = os.path.join(rtdir, f"load-{package}.json")
    with open(out + ".tmp", "w") as f:
        json.dump(stats, f)
    os.replace(out + ".tmp", out)
