"""What the sample apps share: their report, their models with numpy references, a load slot.

The samples use only the public app APIs, as a third-party app would: the
``NpuManager`` from ``context.getSystemService(Context.NPU_SERVICE)`` and the NNAPI
runtime (``framework.nn``) over the app's own binder runtime. This module adds the
plumbing a real app would also write for itself:

- :class:`Report`: what happened to the app (loads, unload requests, unloads,
  inferences, results checked, latencies, refusals, revocations), kept as JSON in
  ``$NPUEMU_RUNTIME_DIR/apps/<name>.json`` (rewritten atomically a few times a second,
  so a killed app still leaves its story) and logged as logcat lines.
- :class:`LoadSlot`: one ``ModelLoadRequest``'s life as a stream of events an app's
  main loop can ``await`` (``can_load``, ``unload``, ``complete``), instead of logic
  spread over callbacks; :meth:`LoadSlot.load` (``_loading``) loads an approved request's
  model and copes with what CAN_LOAD_NOW does not promise: the request may end while
  the model compiles, and the device may refuse it for memory another app is still
  releasing (release, wait, ask again).
- :func:`checked_inference`: one inference, timed, its result checked against the
  app's own reference and counted in the report (a failure is kept in its errors).
- :func:`device_for` (``_devices``): the device to load a model on, found by NNAPI
  discovery (type, then the operations the device supports), never by name.
- :func:`open_tflite`, :class:`TfLiteLoad`, :class:`CpuReference`, :func:`checked_run`
  (``_models``): a real model (MediaPipe's ``.tflite`` files, ``make models``) by name,
  loaded on one device as one
  request's load, its CPU reference in the app, and one inference checked against it;
  :func:`camera_frame` and :func:`gallery_photo` (``_pictures``): the generated pictures
  the camera, photos and the assistant feed those models.
- :func:`mlp` and :func:`convnet`: small models built with ``framework.nn.Model``, each
  with a numpy reference the app computes itself to check what the device returned
  (rogue and legacy run them).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import trio

from framework.nn import FuseCode, Model, NeuralNetworksError, OperandType, OperationType
from framework.npumanager import ModelLoadRequest, ModelLoadRequestCallback, constantToString

from ._devices import choose_device, cpu_device, device_for
from ._loading import LoadOutcome, load_model
from ._models import (Answer, CpuReference, TfLiteLoad, checked_run, mismatch, nnapi_models, open_tflite, record,
                      timed_run, weight_shares)
from ._pictures import FRAME_LOOP, camera_frame, gallery_photo, portrait

__all__ = ["FRAME_LOOP", "Answer", "CpuReference", "LoadOutcome", "LoadSlot", "Report", "SlotEvent", "TfLiteLoad",
           "camera_frame", "checked_inference", "checked_run", "choose_device", "close_enough", "convnet",
           "cpu_device", "device_for", "gallery_photo", "load_model", "mismatch", "mlp", "nnapi_models",
           "open_tflite", "percentile", "portrait", "record", "timed_run", "weight_shares"]

_RUNTIME_DIR_ENV = "NPUEMU_RUNTIME_DIR"
MIB = 1 << 20


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, int(np.ceil(q / 100 * len(ordered))))
    return float(ordered[rank - 1])


def close_enough(got: Any, want: np.ndarray) -> bool:
    """Float tolerance for results computed by different kernels (devices and numpy)."""
    got = np.asarray(got, dtype=np.float32).reshape(want.shape)
    return bool(np.allclose(got, want, rtol=1e-4, atol=1e-5))


def _keep_last(values: list[float], value: float, keep: int = 5000) -> None:
    values.append(value)
    if len(values) > keep:
        del values[: len(values) - keep]


class Report:
    """What happened to one app, for people (the log) and for ``npuemu demo`` (the JSON)."""

    def __init__(self, name: str, context: Any) -> None:
        self.name = name
        self.log = logging.getLogger(f"npuemu.app.{name}")
        self._t0 = time.monotonic()
        self.data: dict[str, Any] = {
            "app": name,
            "package": context.getPackageName(),
            "uid": context.getUid(),
            "pid": os.getpid(),
            "loads": 0,
            "unload_requests": 0,
            "unloads": 0,
            "inferences": 0,
            "results_ok": 0,
            "results_bad": 0,
            "latencies_ms": [],
            "device_ms": [],
            "statuses": [],
            "completions": [],
            "refusals": [],
            "revoked": 0,
            "load_retries": 0,
            "devices": [],
            "errors": [],
            "events": [],
        }
        root = os.environ.get(_RUNTIME_DIR_ENV)
        self.path = Path(root) / "apps" / f"{name}.json" if root else None
        self._dirty = True
        self._request_ids = itertools.count(1)

    def new_request_id(self) -> int:
        """A request id unique in this app process (the service refuses a live duplicate)."""
        return next(self._request_ids)

    def bump(self, key: str, by: int = 1) -> None:
        self.data[key] += by
        self._dirty = True

    def note(self, kind: str, message: str = "", level: int = logging.INFO, **fields: Any) -> None:
        """One event in the app's timeline (and one log line)."""
        event = {"t": round(time.monotonic() - self._t0, 3), "kind": kind, **fields}
        self.data["events"].append(event)
        if len(self.data["events"]) > 400:  # a long run keeps its start and its recent past
            del self.data["events"][200:300]
        self.log.log(level, "%s%s", kind, f": {message}" if message else "")
        self._dirty = True

    def inference(self, latency_ms: float, ok: bool, device: str, *, device_ms: float | None = None,
                  why: str = "") -> None:
        """One inference: its latency, whether its result was right (``why`` not), and
        ``device_ms``, the device's emulated time for it, when the device measured it."""
        self.data["inferences"] += 1
        self.data["results_ok" if ok else "results_bad"] += 1
        _keep_last(self.data["latencies_ms"], round(latency_ms, 3))
        if device_ms is not None:
            _keep_last(self.data["device_ms"], round(device_ms, 3))
        if device not in self.data["devices"]:
            self.data["devices"].append(device)
        if not ok:
            self.note("wrong_result", f"{device} returned a result that differs from the reference"
                      + (f": {why}" if why else ""), level=logging.ERROR)
        self._dirty = True

    def summary(self) -> dict[str, Any]:
        lat, dev = self.data["latencies_ms"], self.data["device_ms"]
        return {
            **{k: v for k, v in self.data.items() if k not in ("latencies_ms", "device_ms")},
            "p50_ms": percentile(lat, 50),
            "p99_ms": percentile(lat, 99),
            "device_p50_ms": percentile(dev, 50),
            "device_p99_ms": percentile(dev, 99),
            "saved_at": time.time(),
        }

    def save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.summary(), indent=1))
        os.replace(tmp, self.path)
        self._dirty = False

    async def autosave(self, every: float = 0.2) -> None:
        """Save whenever something changed; run it in the app's nursery."""
        try:
            while True:
                if self._dirty:
                    self.save()
                await trio.sleep(every)
        finally:
            self.save()


async def checked_inference(
    compilation: Any, x: np.ndarray, reference: Callable[[np.ndarray], np.ndarray], report: Report, device: str,
    *, job_priority: int | None = None,
) -> NeuralNetworksError | None:
    """Run ``x`` through ``compilation`` once, timed, and check the result against ``reference(x)``.

    ``report`` counts it (latency, right or wrong result, on ``device``) and returns
    None. An inference that fails returns its error, already kept in the report's
    errors: what it means (a revoked model, a refusal) is the app's to say.
    """
    execution = compilation.createExecution()
    execution.setInput(0, x)
    if job_priority is not None:
        execution.setJobPriority(job_priority)
    t = time.perf_counter()
    try:
        (out,) = await execution.compute_async()
    except NeuralNetworksError as exc:
        report.data["errors"].append(f"{device}: {exc}")
        return exc
    report.inference((time.perf_counter() - t) * 1000, close_enough(out, reference(x)), device)
    return None


# -- one model load request as events ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SlotEvent:
    """``kind`` is ``can_load`` (with ``status``), ``unload`` (with ``reason``) or ``complete`` (with ``status``)."""

    kind: str
    status: int = -1
    reason: int = -1


class LoadSlot(ModelLoadRequestCallback):
    """One ``ModelLoadRequest`` and its callbacks, delivered to the app as :class:`SlotEvent`s.

    ``await slot.request()`` files it (a refusal raises right there, as
    ``requestCanLoadModel`` does); ``await slot.next()`` gives the next callback;
    ``slot.listener`` is the ``ModelLoadStatusListener`` once ``onCanLoadModel`` came.
    """

    def __init__(self, npu: Any, executor: Any, report: Report, size: int, priority: int) -> None:
        self.npu = npu
        self.executor = executor
        self.report = report
        self.request = ModelLoadRequest.Builder(report.new_request_id()).setSize(size).setPriority(priority).build()
        self.listener: Any = None
        self.done = False
        self._send, self._recv = trio.open_memory_channel[SlotEvent](64)

    async def file(self) -> None:
        """``requestCanLoadModel`` with this slot as the callback."""
        self.report.note("request", f"request {self.request.getId()}"
                         f" size {constantToString('NPU_MODEL_SIZE_', self.request.getSize())}"
                         f" priority {constantToString('NPU_MODEL_PRIORITY_', self.request.getPriority())}")
        await self.npu.requestCanLoadModel(self.request, self, self.executor)

    async def next(self) -> SlotEvent:
        return await self._recv.receive()

    async def load(self, compilation: Any) -> bool:
        """After CAN_LOAD_NOW: finish ``compilation`` and notifyModelLoaded (:func:`load_model`).

        True when loaded. False when not, the compilation closed and the request ended
        (cancelled while the model compiled, or given back because the device's memory
        was still taken): the app waits a little and files a new request.
        """
        outcome = await load_model(self.npu, self.request, self.listener, compilation, ended=lambda: self.done)
        if outcome is LoadOutcome.DEVICE_FULL:
            self.report.bump("load_retries")
            self.report.note("device_memory_full", f"request {self.request.getId()}: the device refused the model"
                             " for memory another app is still releasing; request given back, will ask again")
        elif outcome is LoadOutcome.ENDED:
            self.report.bump("load_retries")
            self.report.note("ended_while_loading", f"request {self.request.getId()} ended before its model"
                             " was loaded; the compilation is released unused")
        return outcome is LoadOutcome.LOADED

    async def release(self, why: str, **fields: Any) -> None:
        """The loaded model is gone: ``notifyModelUnloaded``, counted and noted (nothing once the request ended)."""
        if self.done:
            return
        await self.listener.notifyModelUnloaded(self.request)
        self.report.bump("unloads")
        self.report.note("unloaded", why, **fields)

    def poll(self) -> SlotEvent | None:
        """The next callback if one has come, else None (for a loop that must not block)."""
        try:
            return self._recv.receive_nowait()
        except trio.WouldBlock:
            return None

    async def wait_can_load_now(self, on_other: Callable[[SlotEvent], Any] | None = None) -> bool:
        """Until CAN_LOAD_NOW (True) or the request ends first (False)."""
        while True:
            event = await self.next()
            if event.kind == "can_load" and event.status == self.npu.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW:
                return True
            if event.kind == "complete":
                return False
            if on_other is not None:
                on_other(event)

    # -- the callbacks, run on the app's executor ---------------------------------------

    async def onCanLoadModel(self, request: Any, status: int, listener: Any) -> None:  # noqa: N802
        self.listener = listener
        self.report.data["statuses"].append(int(status))
        self.report.note("can_load", f"request {request.getId()}: {constantToString('NPU_MODEL_LOAD_STATUS_', status)}",
                         status=int(status))
        await self._send.send(SlotEvent("can_load", status=int(status)))

    async def onRequestUnloadModel(self, request: Any, reason: int = 0) -> None:  # noqa: N802
        self.report.bump("unload_requests")
        self.report.data.setdefault("unload_reasons", []).append(int(reason))
        self.report.note("unload_requested", f"request {request.getId()},"
                         f" reason {constantToString('NPU_MODEL_UNLOAD_REASON_', reason)}", reason=int(reason))
        await self._send.send(SlotEvent("unload", reason=int(reason)))

    async def onModelLoadRequestComplete(self, request: Any, status: int) -> None:  # noqa: N802
        self.done = True
        self.report.data["completions"].append(int(status))
        self.report.note("complete", f"request {request.getId()}:"
                         f" {constantToString('NPU_MODEL_LOAD_REQUEST_STATUS_', status)}", status=int(status))
        await self._send.send(SlotEvent("complete", status=int(status)))


# -- models and their references ------------------------------------------------------------


def _builder() -> tuple[Model, Callable[..., int], Callable[..., int]]:
    m = Model()

    def const(array: np.ndarray) -> int:
        index = m.addOperand(OperandType.TENSOR_FLOAT32, array.shape)
        m.setOperandValue(index, np.ascontiguousarray(array, dtype=np.float32))
        return index

    def scalar(kind: OperandType, value: float) -> int:
        index = m.addOperand(kind)
        m.setOperandValue(index, value)
        return index

    return m, const, scalar


def mlp(seed: int, sizes: tuple[int, ...], batch: int = 1) -> tuple[Model, Callable[[np.ndarray], np.ndarray]]:
    """FULLY_CONNECTED layers (RELU between), then SOFTMAX: the model and its numpy reference."""
    rng = np.random.default_rng(seed)
    m, const, scalar = _builder()
    layers = []
    x = m.addOperand(OperandType.TENSOR_FLOAT32, [batch, sizes[0]])
    first = cur = x
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        w = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
        b = (rng.standard_normal(n_out) * 0.1).astype(np.float32)
        last = i == len(sizes) - 2
        fuse = FuseCode.NONE if last else FuseCode.RELU
        out = m.addOperand(OperandType.TENSOR_FLOAT32, [batch, n_out])
        m.addOperation(OperationType.FULLY_CONNECTED, [cur, const(w), const(b), scalar(OperandType.INT32, fuse)], [out])
        layers.append((w, b, fuse))
        cur = out
    probs = m.addOperand(OperandType.TENSOR_FLOAT32, [batch, sizes[-1]])
    m.addOperation(OperationType.SOFTMAX, [cur, scalar(OperandType.FLOAT32, 1.0)], [probs])
    m.identifyInputsAndOutputs([first], [probs])
    m.finish()

    def reference(inp: np.ndarray) -> np.ndarray:
        h = inp.astype(np.float64)
        for w, b, fuse in layers:
            h = h @ w.T.astype(np.float64) + b
            if fuse == FuseCode.RELU:
                h = np.maximum(h, 0)
        e = np.exp(h - h.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)

    return m, reference


def convnet(seed: int, size: int, channels: int, filters: int, depth: int) -> tuple[Model, Callable[[np.ndarray], np.ndarray]]:
    """``depth`` 3x3 CONV_2D layers (padding 1, RELU) on an NHWC image: the model and its reference."""
    rng = np.random.default_rng(seed)
    m, const, scalar = _builder()
    x = m.addOperand(OperandType.TENSOR_FLOAT32, [1, size, size, channels])
    cur, c_in, layers = x, channels, []
    for _ in range(depth):
        w = (rng.standard_normal((filters, 3, 3, c_in)) / np.sqrt(9 * c_in)).astype(np.float32)
        b = (rng.standard_normal(filters) * 0.05).astype(np.float32)
        params = [scalar(OperandType.INT32, v) for v in (1, 1, 1, 1, 1, 1, FuseCode.RELU)]
        out = m.addOperand(OperandType.TENSOR_FLOAT32, [1, size, size, filters])
        m.addOperation(OperationType.CONV_2D, [cur, const(w), const(b), *params], [out])
        layers.append((w, b))
        cur, c_in = out, filters
    m.identifyInputsAndOutputs([x], [cur])
    m.finish()

    def reference(img: np.ndarray) -> np.ndarray:
        h = img.astype(np.float64)
        for w, b in layers:
            n, hh, ww, _ = h.shape
            padded = np.pad(h, ((0, 0), (1, 1), (1, 1), (0, 0)))
            out = np.zeros((n, hh, ww, w.shape[0]))
            for dy in range(3):
                for dx in range(3):
                    patch = padded[:, dy:dy + hh, dx:dx + ww, :]
                    out += np.einsum("nhwc,fc->nhwf", patch, w[:, dy, dx, :].astype(np.float64))
            h = np.maximum(out + b, 0)
        return h.astype(np.float32)

    return m, reference
