"""Test vectors in the form AOSP's generated tests state them, and their variations.

An example gives real values (``Real``) for tensors and plain scalars; a variation turns
it into typed operands as the 1.2 test generator does: ``float32``; ``relaxed`` (float32
computed with float16 tolerance); ``float16`` (tensors and float scalars in half
precision); a quantized mapping ``{("in", i) | ("out", k): (type, scale, zero_point)}``
(the listed tensors quantized with those parameters); and ``nchw`` (the data tensors,
by default input 0 and output 0, transposed to NCHW, the layout input set). ``check`` runs ``evaluate`` and compares with
Android's tolerances.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from .core import Operand, assert_close, from_nhwc, quantize, round_away
from .registry import evaluate

Quant = Mapping[tuple[str, int], tuple[str, float, int]]


@dataclasses.dataclass(frozen=True)
class Real:
    """A float tensor of an example, by its real values."""

    shape: tuple[int, ...]
    values: tuple[float, ...]

    def array(self) -> np.ndarray:
        return np.asarray(self.values, np.float64).reshape(self.shape)


def real(shape: Sequence[int], values: Sequence[float]) -> Real:
    return Real(tuple(shape), tuple(float(v) for v in np.ravel(values)))


DATA = (("in", 0), ("out", 0))


def _typed(item: Real | Operand, key: tuple[str, int], variant: str, quant: Quant | None, nchw: bool) -> Operand:
    if isinstance(item, Operand):
        if variant == "float16" and item.type == "FLOAT32":
            return Operand("FLOAT16", item.value)
        return item
    array = item.array()
    if nchw and array.ndim == 4:
        array = from_nhwc(array, True)
    if quant is not None and key in quant:
        type, scale, zero_point = quant[key]
        if type == "TENSOR_INT32":
            return Operand(type, round_away(array / scale).astype(np.int32), scale, zero_point)
        return Operand(type, quantize(array, type, scale, zero_point), scale, zero_point)
    return Operand("TENSOR_FLOAT16" if variant == "float16" else "TENSOR_FLOAT32", array)


def realize(inputs: Sequence[Real | Operand], outputs: Sequence[Real | Operand], variant: str = "float32",
            quant: Quant | None = None, layout: int | None = None,
            data: Sequence[tuple[str, int]] = DATA) -> tuple[list[Operand], list[Operand]]:
    """The typed inputs and expected outputs of one variation (``layout``: the layout input's
    index, for ``variant='nchw'``; ``data``: the tensors that variation transposes)."""
    nchw = variant == "nchw"
    ins = [_typed(x, ("in", i), variant, quant, nchw and ("in", i) in data) for i, x in enumerate(inputs)]
    if nchw:
        assert layout is not None, "an NCHW variation names the layout input"
        ins[layout] = Operand("BOOL", np.asarray(True))
    outs = [_typed(x, ("out", k), variant, quant, nchw and ("out", k) in data) for k, x in enumerate(outputs)]
    return ins, outs


def check(operation: str, inputs: Sequence[Real | Operand], outputs: Sequence[Real | Operand],
          variant: str = "float32", quant: Quant | None = None, layout: int | None = None,
          data: Sequence[tuple[str, int]] = DATA) -> list[Operand]:
    """Evaluate one variation of an example and assert each output is within Android's tolerance."""
    ins, expected = realize(inputs, outputs, variant, quant, layout, data)
    templates = [Operand(e.type, None, e.scale, e.zero_point) for e in expected]
    actual = evaluate(operation, ins, templates, relaxed=variant == "relaxed")
    assert len(actual) == len(expected), f"{operation}: {len(actual)} outputs, expected {len(expected)}"
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e, relaxed=variant == "relaxed")
    return actual
