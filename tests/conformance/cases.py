"""The conformance cases: every operation call nnref's example tests make, with nnref's answer.

nnref's tests (tests/test_nnref_*.py) hold AOSP's 1.2 test vectors for the operations, each
checked in every variation the 1.2 generator runs (float32, relaxed, float16, quantized,
NCHW), plus examples of their own for what the vectors leave out. Rather than copy those
tables, :func:`harvest` runs the tests that are plain examples (parametrized or not, no
hypothesis, no fixtures) with nnref's kernels wrapped, and keeps every call that nnref
answered: its operation, typed inputs, output templates and the outputs nnref computed.
A call nnref refuses is not a case (its tests also check refusals).

Where the examples leave an operand type the 1.2 spec allows an operation untried,
:func:`derive` makes that variation from another case (float32 first), as AOSP's generator derives its
float16 and quant8 variations from one example: the tensors of the selecting type are
converted (cast, or quantized with parameters covering their range; a convolution's bias
becomes TENSOR_INT32 with scale input x filter), float scalars take the precision 1.2 pairs
with the new type (FLOAT16 beside TENSOR_FLOAT16), the outputs likewise, and nnref computes
the expected outputs of the converted inputs. A variation nnref refuses is dropped.

The result is deterministic, so every xdist worker harvests the same list in the same
order; :func:`cases` caches it per process.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import inspect
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

import nnref
from nnref import Operand, registry
from nnref.core import quantize

#: nnref's test modules that hold examples, by family.
MODULES = (
    "test_nnref_conv", "test_nnref_detection", "test_nnref_elementwise", "test_nnref_lsh",
    "test_nnref_norm", "test_nnref_rnn", "test_nnref_sampling", "test_nnref_shape", "test_nnref_zero_sized",
)

#: Operations whose outputs are random draws: no case compares their values.
RANDOM = frozenset({"RANDOM_MULTINOMIAL"})


@dataclasses.dataclass(frozen=True)
class Case:
    """One operation call: ``inputs`` in the 1.2 signature's order (``None`` or a value-less
    Operand: an omitted optional input), ``expected`` nnref's outputs, ``relaxed`` whether
    float32 may be computed in float16."""

    operation: str
    inputs: tuple[Operand | None, ...]
    expected: tuple[Operand, ...]
    relaxed: bool
    source: str  # the nnref test that made it

    @property
    def id(self) -> str:
        digest = hashlib.sha1(repr(self.key()).encode()).hexdigest()[:8]
        return f"{self.operation}-{self.variant}-{digest}"

    @property
    def variant(self) -> str:
        """float32 / relaxed / float16 / quant / mixed, from the first data input's type."""
        if self.relaxed:
            return "relaxed"
        first = next((i for i in self.inputs if i is not None and i.value is not None and i.value.ndim), None)
        kind = first.type if first is not None else "scalar"
        return {"TENSOR_FLOAT32": "float32", "TENSOR_FLOAT16": "float16", "TENSOR_INT32": "int32",
                "TENSOR_BOOL8": "bool8"}.get(kind, "quant")

    def key(self) -> tuple:
        def one(o: Operand | None) -> tuple:
            if o is None or o.value is None:
                return ("omitted",)
            cq = o.channel_quant
            return (o.type, o.value.shape, o.value.tobytes(), o.scale, o.zero_point,
                    (tuple(cq.scales), cq.channel_dim) if cq else None)
        return (self.operation, self.relaxed, tuple(map(one, self.inputs)),
                tuple((e.type, e.scale, e.zero_point) for e in self.expected))


def _recording(kernels: dict, sink: list, source: list[str]) -> dict:
    def wrap(name: str, kernel: Callable) -> Callable:
        def recorded(call: registry.Call) -> list[Operand]:
            outputs = kernel(call)
            sink.append(Case(name, tuple(call.inputs), tuple(outputs), call.relaxed, source[0]))
            return outputs
        return recorded
    return {name: wrap(name, k) for name, k in kernels.items()}


def _plain_calls(module) -> Iterator[tuple[str, Callable[[], object]]]:
    """(test id, a call running it) for each example test of ``module``: parametrized or
    plain, no hypothesis, no fixture."""
    for name, fn in sorted(vars(module).items()):
        if not (name.startswith("test_") and inspect.isfunction(fn)) or getattr(fn, "is_hypothesis_test", False):
            continue
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
        params = inspect.signature(fn).parameters
        grids = []
        for mark in marks:
            names, values = mark.args[0], mark.args[1]
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            rows = [v.values if hasattr(v, "values") else v for v in values]
            grids.append([dict(zip(names, row if len(names) > 1 else (row,), strict=True)) for row in rows])
        covered = {n for grid in grids for row in grid[:1] for n in row}
        if set(params) - covered:
            continue  # needs a fixture
        for combo in itertools.product(*grids) if grids else [()]:
            kwargs = {k: v for row in combo for k, v in row.items()}
            yield f"{module.__name__}::{name}", functools.partial(fn, **kwargs)


def harvest(modules: Sequence[str] = MODULES) -> list[Case]:
    """Every distinct operation call the example tests of ``modules`` make, in order."""
    sink: list[Case] = []
    source = [""]
    saved = dict(registry.KERNELS)
    registry.KERNELS.update(_recording(saved, sink, source))
    try:
        for module_name in modules:
            module = importlib.import_module(module_name)
            for test_id, run in _plain_calls(module):
                source[0] = test_id
                try:
                    with np.errstate(all="ignore"):
                        run()
                except Exception:  # noqa: BLE001 - a refusal test or a skip: its calls are not cases
                    continue
    finally:
        registry.KERNELS.clear()
        registry.KERNELS.update(saved)
    return _distinct(case for case in sink if case.operation not in RANDOM)


def _distinct(found: Iterable[Case]) -> list[Case]:
    """``found`` without repeats (the same call made twice), in order."""
    seen, unique = set(), []
    for case in found:
        key = case.key()
        if key not in seen:
            seen.add(key)
            unique.append(case)
    return unique


#: Operations with a bias (input 2) whose quantized form is TENSOR_INT32 at input x filter scale.
BIASED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "GROUPED_CONV_2D", "TRANSPOSE_CONV_2D", "FULLY_CONNECTED"})


def _quant_params(values: np.ndarray, type: str) -> tuple[float, int]:
    """A scale and zero point whose grid covers ``values`` (and 0) for quantized ``type``."""
    lo, hi = min(float(values.min(initial=0.0)), 0.0), max(float(values.max(initial=0.0)), 0.0)
    qlo, qhi = nnref.core.quant_range(type)
    if type in ("TENSOR_QUANT8_SYMM", "TENSOR_QUANT16_SYMM"):
        return float(np.float32(max(-lo, hi, 1e-3) / qhi)), 0
    scale = float(np.float32(max(hi - lo, 1e-3) / (qhi - qlo)))
    return scale, int(np.clip(round(qlo - lo / scale), qlo, qhi))


def _convert(o: Operand, type: str) -> Operand:
    real = o.real()
    if type == "TENSOR_FLOAT32":
        return Operand(type, real.astype(np.float32))
    if type == "TENSOR_FLOAT16":
        return Operand(type, real.astype(np.float16))
    if type == "TENSOR_INT32":
        return Operand(type, np.round(real).astype(np.int32))
    if type == "TENSOR_BOOL8":
        return Operand(type, real != 0)
    if type == "TENSOR_QUANT8_SYMM_PER_CHANNEL":  # channels along dimension 0
        scales = tuple(_quant_params(row, "TENSOR_QUANT8_SYMM")[0] for row in real.reshape(real.shape[0], -1))
        stored = np.stack([quantize(row, "TENSOR_QUANT8_SYMM", sc, 0) for row, sc in zip(real, scales, strict=True)])
        return Operand(type, stored, channel_quant=nnref.ChannelQuant(scales, 0))
    scale, zero_point = _quant_params(real, type)
    return Operand(type, quantize(real, type, scale, zero_point), scale, zero_point)


def derive(case: Case, type: str) -> Case | None:
    """``case`` with its selecting-type tensors as ``type`` (by their real values), or None
    if nnref refuses it."""
    at, _ = nnref.SELECTING[case.operation]
    source = case.inputs[at].type if at < len(case.inputs) and case.inputs[at] is not None else None
    if source is None or source == type or case.relaxed:
        return None
    for only_selecting in (False, True):  # TILE's int32 multiples stay int32 when its input is not
        made = _derived(case, at, source, type, only_selecting)
        if made is not None:
            return made
    return None


def _scalar_for(o: Operand, type: str) -> Operand:
    """A float scalar of ``o``'s case in the precision 1.2 pairs with tensors of ``type`` (FLOAT16
    beside TENSOR_FLOAT16, FLOAT32 otherwise), as AOSP's float16 variation converts them."""
    if o.type not in ("FLOAT32", "FLOAT16"):
        return o
    if type == "TENSOR_FLOAT16":
        return Operand("FLOAT16", np.asarray(o.value, np.float16))
    return Operand("FLOAT32", np.asarray(o.value, np.float32))


def _derived(case: Case, at: int, source: str, type: str, only_selecting: bool) -> Case | None:
    floats = {"TENSOR_FLOAT32", "TENSOR_FLOAT16"}
    try:
        inputs = [None if o is None else o if o.value is None or o.type != source or (only_selecting and i != at)
                  else _convert(o, type) for i, o in enumerate(case.inputs)]
    except ValueError:  # e.g. a per-channel tensor of rank 0
        return None
    if source in floats and (type in floats or source == "TENSOR_FLOAT16"):
        inputs = [o if o is None or o.value is None else _scalar_for(o, type) for o in inputs]
    if case.operation in BIASED and type == "TENSOR_QUANT8_ASYMM" and len(inputs) > 2 and inputs[2] is not None:
        bias_scale = float(np.float32(inputs[0].scale * inputs[1].scale))
        inputs[2] = Operand("TENSOR_INT32", np.round(case.inputs[2].real() / bias_scale).astype(np.int32), bias_scale, 0)
    templates = []
    for e in case.expected:
        if e.type != source:
            templates.append(Operand(e.type, None, e.scale, e.zero_point))
        elif type in ("TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_INT32", "TENSOR_BOOL8"):
            templates.append(Operand(type))
        else:
            templates.append(Operand(type, None, *_quant_params(e.real(), type)))
    try:
        with np.errstate(all="ignore"):
            expected = nnref.evaluate(case.operation, inputs, templates)
    except (nnref.BadOperation, ValueError, NotImplementedError):
        return None
    return Case(case.operation, tuple(inputs), tuple(expected), False, f"{case.source} as {type}")


def _untried(found: Sequence[Case]) -> list[Case]:
    """Derived cases for each (operation, allowed type) no example tries: up to 3 per pair."""
    tried = {(c.operation, c.inputs[nnref.SELECTING[c.operation][0]].type) for c in found
             if nnref.SELECTING[c.operation][0] < len(c.inputs) and c.inputs[nnref.SELECTING[c.operation][0]] is not None}
    extra = []
    for operation in sorted({c.operation for c in found}):
        for type in nnref.SELECTING[operation][1]:
            if (operation, type) in tried:
                continue
            sources = sorted((c for c in found if c.operation == operation), key=lambda c: c.variant != "float32")
            made = [d for c in sources for d in [derive(c, type)] if d is not None]
            extra += made[:3]
    return extra


@functools.cache
def cases() -> tuple[Case, ...]:
    found = harvest()
    return tuple(_distinct(found + _untried(found)))
