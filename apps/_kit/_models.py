"""Real models as a sample app holds them: a ``.tflite`` file, its NNAPI load, its CPU reference.

The samples run MediaPipe's models (``make models`` fetches them) through
``framework.nn.tflite``, as an app on a phone runs a ``.tflite`` file through TFLite's
NNAPI delegate. An app needs a little more than ``TfLiteModel.compile`` gives it:

- :func:`open_tflite`: the fetched model by name, loaded off the app's main thread.
- :class:`TfLiteLoad`: the model compiled for one device *as one load* under the NPU
  Manager. Each NNAPI partition of the model is its own compilation, and each carries
  the ``ModelLoadRequest`` (so a revocation takes them all) and its share of the size the
  app declares (``setEmulatedModelSize``, split by the weights each partition holds, so
  the device holds the declared size once, not once per partition). ``finish`` and
  ``aclose`` are a compilation's, so :func:`load_model` loads it like any other.
- :class:`CpuReference`: the same model compiled for the CPU device (``nnapi-reference``,
  in the app's process): what the app checks every device result against. Each input's
  outputs are computed once, under a key the app gives (a frame index, a photo index).
- :func:`checked_run`: one inference, timed and checked; :func:`timed_run` and :func:`record`
  are its two halves, for an app that checks after it has let the model go.
- :func:`mismatch`: the check, the tolerance of ``tests/test_tflite.py``: every output
  within 1e-4 of the reference relative to that output's range (1e-3 for the two outputs
  float32 cannot hold to 1e-4 across summation orders).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import trio

from framework.nn import NeuralNetworksError, OperandLifeTime
from framework.nn.tflite import CompiledTfLite, TfLiteModel, loadTfLite

__all__ = ["Answer", "CpuReference", "TfLiteLoad", "checked_run", "mismatch", "nnapi_models", "open_tflite", "record", "timed_run", "weight_shares"]

#: An output's largest error, relative to the reference output's range.
TOLERANCE = 1e-4
#: (model, output) pairs that float32 holds to 1e-3 only, as tests/test_tflite.py says why.
ILL_CONDITIONED = {("pose_landmark_full", 2): 1e-3, ("selfie_segmentation", 0): 1e-3}


async def open_tflite(name: str) -> TfLiteModel:
    """The fetched model ``name`` (``make models``), read and split by the NNAPI delegate's
    rules off the app's main thread (as an app loads a model file off its UI thread: the
    app keeps answering its callbacks meanwhile)."""
    return await trio.to_thread.run_sync(loadTfLite, name)


def nnapi_models(model: Any) -> list[Any]:
    """The NNAPI ``Model``s a device must run: a TFLite model's NNAPI partitions, else ``[model]``."""
    if isinstance(model, TfLiteModel):
        return [p.model for p in model.partitions if p.kind == "nnapi"]
    return [model]


def _constant_bytes(model: Any) -> int:
    """The bytes of an NNAPI model's constants: what a device holds of it in weight memory."""
    return sum(o.location.length for o in model.to_hal().operands
               if o.lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_POOL))


def weight_shares(model: TfLiteModel, total: int) -> dict[int, int]:
    """``total`` bytes split over the NNAPI partitions (by index) in proportion to the
    constant bytes each holds (as a compilation split across devices shares its size);
    the shares add up to ``total`` exactly."""
    held = {p.index: _constant_bytes(p.model) for p in model.partitions if p.kind == "nnapi"}
    weights = sum(held.values())
    if not held:
        return {}
    if weights == 0:
        return {k: total // len(held) + (i < total % len(held)) for i, k in enumerate(held)}
    shares = {k: total * b // weights for k, b in held.items()}
    biggest = max(held, key=held.__getitem__)
    shares[biggest] += total - sum(shares.values())
    return shares


def mismatch(name: str, got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> str:
    """'' when every output of model ``name`` is within tolerance of the reference, else which is not."""
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g.shape != w.shape:
            return f"output {k} has shape {list(g.shape)}, the reference {list(w.shape)}"
        span = float(w.max() - w.min()) or 1.0
        error = float(np.abs(g - w).max()) / span if g.size else 0.0
        bound = ILL_CONDITIONED.get((name, k), TOLERANCE)
        if not error <= bound:  # a NaN is a mismatch too
            return f"output {k}: error {error:.2e} of its range (tolerance {bound:.0e})"
    return ""


class TfLiteLoad:
    """``model`` compiled for ``device`` alone, for one ``ModelLoadRequest``: finish, run, aclose."""

    def __init__(self, nn: Any, model: TfLiteModel, device: Any, *, emulated_size: int = 0,
                 request: Any = None) -> None:
        self.model = model
        self.device = device
        shares = weight_shares(model, emulated_size) if emulated_size else {}
        self._compilations: dict[int, Any] = {}
        for p in model.partitions:
            if p.kind != "nnapi":
                continue
            compilation = nn.createCompilationForDevices(p.model, [device])
            if shares.get(p.index):
                compilation.setEmulatedModelSize(shares[p.index])
            if request is not None:
                compilation.setModelLoadRequest(request)
            self._compilations[p.index] = compilation
        self._compiled = CompiledTfLite(model, self._compilations, measurable=True)

    async def finish(self) -> None:
        """Prepare every partition on the device (the load itself)."""
        for compilation in self._compilations.values():
            await compilation.finish()

    async def run(self, inputs: Sequence[np.ndarray], *, job_priority: int | None = None) -> tuple[list[np.ndarray], float]:
        """The outputs, and the device's emulated time for them in ms (``ON_HARDWARE``, summed over the partitions)."""
        outputs = await self._compiled.run(inputs, jobPriority=job_priority)
        device_ns = sum(t.deviceNs or 0 for t in self._compiled.timings)  # read before any other task runs
        return outputs, device_ns / 1e6

    async def aclose(self) -> None:
        await self._compiled.aclose()


class CpuReference:
    """The model on the CPU device in this process; each keyed input's outputs computed once."""

    def __init__(self, model: TfLiteModel, compiled: CompiledTfLite) -> None:
        self.model = model
        self._compiled = compiled
        self._outputs: dict[Hashable, list[np.ndarray]] = {}
        self.runs = 0
        self.run_ms = 0.0

    @classmethod
    async def open(cls, nn: Any, model: TfLiteModel, cpu: Any) -> CpuReference:
        return cls(model, await model.compile(nn, [cpu]))

    async def outputs(self, key: Hashable, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The CPU's outputs for ``inputs``, which the app names ``key`` (the same key, the same inputs)."""
        if key not in self._outputs:
            t = time.perf_counter()
            self._outputs[key] = await self._compiled.run(inputs)
            self.runs += 1
            self.run_ms += (time.perf_counter() - t) * 1000
        return self._outputs[key]

    async def compute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run the model on the CPU device, for its own sake (kept nowhere)."""
        return await self._compiled.run(inputs)

    async def aclose(self) -> None:
        await self._compiled.aclose()


@dataclasses.dataclass(frozen=True)
class Answer:
    """One inference's outputs as the device gave them, with the app's and the device's time for it."""

    outputs: list[np.ndarray]
    latency_ms: float
    device_ms: float


async def timed_run(load: TfLiteLoad, inputs: Sequence[np.ndarray], report: Any, *,
                    job_priority: int | None = None) -> tuple[Answer | None, NeuralNetworksError | None]:
    """One inference of ``load``, timed. A failed one is (None, its error), kept in the report's errors."""
    t = time.perf_counter()
    try:
        outputs, device_ms = await load.run(inputs, job_priority=job_priority)
    except NeuralNetworksError as exc:
        report.data["errors"].append(f"{load.device.getName()}: {exc}")
        return None, exc
    return Answer(outputs, (time.perf_counter() - t) * 1000, device_ms), None


def record(report: Any, load: TfLiteLoad, answer: Answer, want: Sequence[np.ndarray]) -> bool:
    """Count ``answer`` in ``report``: right when within tolerance of ``want``, else wrong (saying where)."""
    wrong = mismatch(load.model.name, answer.outputs, want)
    report.inference(answer.latency_ms, not wrong, load.device.getName(), device_ms=answer.device_ms, why=wrong)
    return not wrong


async def checked_run(load: TfLiteLoad, key: Hashable, inputs: Sequence[np.ndarray], reference: CpuReference,
                      report: Any, *, job_priority: int | None = None) -> tuple[list[np.ndarray] | None, NeuralNetworksError | None]:
    """One inference of ``load`` on ``inputs``, timed and checked against ``reference``'s outputs for ``key``.

    ``report`` counts it (latency, the device's emulated time, right or wrong). A failed
    inference is (None, its error), already kept in the report's errors.
    """
    want = await reference.outputs(key, inputs)
    answer, failed = await timed_run(load, inputs, report, job_priority=job_priority)
    if answer is None:
        return None, failed
    record(report, load, answer, want)
    return answer.outputs, None
