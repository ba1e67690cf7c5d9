"""The app the fault tests launch (copied in as an app's ``main.py``).

It uses only the public app APIs (``NpuManager`` and ``framework.nn``) and keeps its
story in ``$NPUEMU_RUNTIME_DIR/rel-<last part of its package>.json``, rewritten
atomically after every change, so the test reads it whenever it likes and a SIGKILL
leaves the last state behind. Its behaviour comes from its package name,
``com.rel.<mode>_<device>``:

- ``loading``: asks, is approved, prepares the model on the device and then "loads"
  for ever (never calls notifyModelLoaded): killed while loading.
- ``exec``: asks, loads, notifies, then executes back to back for ever; an error is
  recorded and, if the device died, the runtime rediscovers the drivers and the app
  compiles again (what an app does after a HAL restart).
- ``stubborn``: loads a >2 GB model, and when asked to unload records it and does
  nothing (killed while asked to unload).
- ``claimer``: asks for a >2 GB model and loads it once it may.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import trio

from apps._kit import convnet, mlp
from framework.app import Context
from framework.nn import DeadObjectError, FuseCode, Model, NeuralNetworksError, OperandType, OperationType, open_nn_runtime
from framework.npumanager import ModelLoadRequest, ModelLoadRequestCallback, NpuManager


class Story:
    def __init__(self, name: str, context: Context) -> None:
        self.path = os.path.join(os.environ["NPUEMU_RUNTIME_DIR"], f"rel-{name}.json")
        self.data = {"pid": os.getpid(), "uid": context.getUid(), "phase": "started", "events": [],
                     "executions": 0, "errors": [], "recovered": 0}
        self.save()

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)

    def phase(self, phase: str) -> None:
        self.data["phase"] = phase
        self.save()


class Callback(ModelLoadRequestCallback):
    def __init__(self, story: Story) -> None:
        self.story = story
        self.approved = trio.Event()
        self.asked = trio.Event()
        self.listener = None

    def onCanLoadModel(self, request, status, listener):  # noqa: N802
        self.story.data["events"].append(["can_load", status])
        self.story.save()
        if status == NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW:
            self.listener = listener
            self.approved.set()

    def onRequestUnloadModel(self, request, reason=0):  # noqa: N802
        self.story.data["events"].append(["unload", reason])
        self.story.save()
        self.asked.set()

    def onModelLoadRequestComplete(self, request, status):  # noqa: N802
        self.story.data["events"].append(["complete", status])
        self.story.save()


async def main(context: Context) -> None:
    name = context.getPackageName().rsplit(".", 1)[-1]
    mode, _, device = name.partition("_")
    device = {"npu": "emu-npu", "dsp": "emu-dsp", "gpu": "emu-gpu"}.get(device, "emu-npu")
    story = Story(name, context)
    npu = context.getSystemService(Context.NPU_SERVICE)
    big = mode in ("stubborn", "claimer")
    size = NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G if big else NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB
    request = ModelLoadRequest.Builder(1).setSize(size).build()
    cb = Callback(story)
    await npu.requestCanLoadModel(request, cb, context.getMainExecutor())
    story.phase("requested")
    await cb.approved.wait()
    if mode == "exec" and device == "emu-dsp":
        model, reference = dense(seed=5, n_in=256, n_out=256)
        shape = (1, 256)
    elif mode == "exec":
        model, reference = convnet(seed=5, size=16, channels=3, filters=8, depth=2)
        shape = (1, 16, 16, 3)
    else:
        model, reference = mlp(seed=5, sizes=(32, 16))
        shape = (1, 32)
    async with open_nn_runtime(context.runtime) as nn:
        compilation = nn.createCompilationForDevices(model, [nn.getDeviceByName(device)])
        compilation.setEmulatedModelSize((2560 if big else 256) << 20)
        await compilation.finish()
        if mode == "loading":
            story.phase("loading")
            await trio.sleep_forever()
        await cb.listener.notifyModelLoaded(request)
        story.phase("loaded")
        if mode == "stubborn":
            await cb.asked.wait()
            story.phase("asked")
            await trio.sleep_forever()
        if mode == "claimer":
            await trio.sleep_forever()
        rng = np.random.default_rng(0)
        while True:
            x = rng.random(shape, dtype=np.float32)
            execution = compilation.createExecution()
            execution.setInput(0, x)
            t = time.perf_counter()
            try:
                (y,) = await execution.compute_async()
            except NeuralNetworksError as exc:
                if len(story.data["errors"]) < 50:
                    story.data["errors"].append([round(time.time(), 3), type(exc).__name__, str(exc)[:300]])
                story.data["error_count"] = story.data.get("error_count", 0) + 1
                story.save()
                if isinstance(exc, DeadObjectError) or not nn.isAlive(nn.getDeviceByName(device)):
                    try:
                        await compilation.aclose()
                    except NeuralNetworksError:
                        pass  # its driver is gone: nothing to release there
                    compilation = await _recompile(nn, model, device, story)
                continue
            ok = bool(np.allclose(np.asarray(y).reshape(reference(x).shape), reference(x), rtol=1e-4, atol=1e-5))
            story.data["executions"] += 1
            story.data["last_ok"] = ok
            story.data["last_ms"] = round((time.perf_counter() - t) * 1000, 2)
            if story.data["executions"] == 1 or story.data["executions"] % 5 == 0:
                story.data["phase"] = "executing"
                story.save()
            await trio.sleep(0)


def dense(seed: int, n_in: int, n_out: int):
    """One FULLY_CONNECTED + RELU layer: what the frugal emu-dsp runs (it has no SOFTMAX)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
    b = (rng.standard_normal(n_out) * 0.1).astype(np.float32)
    m = Model()
    x = m.addOperand(OperandType.TENSOR_FLOAT32, [1, n_in])
    wi = m.addOperand(OperandType.TENSOR_FLOAT32, [n_out, n_in])
    m.setOperandValue(wi, w)
    bi = m.addOperand(OperandType.TENSOR_FLOAT32, [n_out])
    m.setOperandValue(bi, b)
    fuse = m.addOperand(OperandType.INT32)
    m.setOperandValue(fuse, int(FuseCode.RELU))
    y = m.addOperand(OperandType.TENSOR_FLOAT32, [1, n_out])
    m.addOperation(OperationType.FULLY_CONNECTED, [x, wi, bi, fuse], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    return m, lambda inp: np.maximum(inp.astype(np.float64) @ w.T.astype(np.float64) + b, 0).astype(np.float32)


async def _recompile(nn, model, device, story):
    """After the HAL died: wait for it to come back, then compile on it again."""
    while True:
        await nn.refresh()
        try:
            fresh = nn.createCompilationForDevices(model, [nn.getDeviceByName(device)])
            fresh.setEmulatedModelSize(256 << 20)
            await fresh.finish()
        except NeuralNetworksError:
            await trio.sleep(0.2)
            continue
        story.data["recovered"] += 1
        story.save()
        return fresh
