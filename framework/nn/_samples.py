"""A small sample model that uses every operation, for ``npuemu nn plan`` and demos.

The graph, with fixed pseudo-random weights (seeded, so every run plans and computes
the same thing)::

    image [1, 8, 8, 3] ─ SUB(mean) ─ MUL(scale) ─ CONV_2D 3x3 pad 1 (8 filters, RELU)
        ─ CONV_2D 3x3 stride 2 (4 filters) ─ RELU ─────────────────────► features [1, 3, 3, 4]
    embedding [1, 16] ─ FULLY_CONNECTED 16→32 (RELU) ─ ADD(residual bias)
        ─ FULLY_CONNECTED 32→10 ─ SOFTMAX(beta 1) ─────────────────────► scores [1, 10]

Two independent branches, so a partitioner with a conv-only accelerator and an
FC-capable GPU has something real to split. The operation set has no reshape, which
is why the classifier head reads its own input instead of the conv features.
"""

from __future__ import annotations

import numpy as np

from ._model import Model
from ._types import FuseCode, OperandType, OperationType


def sampleModel(seed: int = 29) -> Model:
    """The finished sample model; inputs ``(image, embedding)``, outputs ``(features, scores)``."""
    rng = np.random.default_rng(seed)
    m = Model()
    tensor = OperandType.TENSOR_FLOAT32

    def const(array: np.ndarray) -> int:
        index = m.addOperand(tensor, array.shape)
        m.setOperandValue(index, array.astype(np.float32))
        return index

    def scalar(operandType: OperandType, value: float) -> int:
        index = m.addOperand(operandType)
        m.setOperandValue(index, value)
        return index

    def op(kind: OperationType, inputs: list[int]) -> int:
        out = m.addOperand(tensor)  # shapes are inferred at finish()
        m.addOperation(kind, inputs, [out])
        return out

    def conv(x: int, filters: int, depth: int, pad: int, stride: int, fuse: FuseCode) -> int:
        weights = const(rng.standard_normal((filters, 3, 3, depth)) * 0.3)
        bias = const(rng.standard_normal(filters) * 0.1)
        params = [scalar(OperandType.INT32, v) for v in (pad, pad, pad, pad, stride, stride, fuse)]
        return op(OperationType.CONV_2D, [x, weights, bias, *params])

    none = scalar(OperandType.INT32, FuseCode.NONE)
    image = m.addOperand(tensor, [1, 8, 8, 3])
    centred = op(OperationType.SUB, [image, const(np.full((1, 8, 8, 3), 0.5)), none])
    scaled = op(OperationType.MUL, [centred, const(np.full((1, 8, 8, 3), 2.0)), none])
    x = conv(scaled, 8, 3, pad=1, stride=1, fuse=FuseCode.RELU)
    x = conv(x, 4, 8, pad=0, stride=2, fuse=FuseCode.NONE)
    features = op(OperationType.RELU, [x])

    embedding = m.addOperand(tensor, [1, 16])
    relu = scalar(OperandType.INT32, FuseCode.RELU)
    hidden = op(
        OperationType.FULLY_CONNECTED,
        [embedding, const(rng.standard_normal((32, 16)) * 0.25), const(rng.standard_normal(32) * 0.1), relu],
    )
    hidden = op(OperationType.ADD, [hidden, const(rng.standard_normal((1, 32)) * 0.1), none])
    logits = op(
        OperationType.FULLY_CONNECTED,
        [hidden, const(rng.standard_normal((10, 32)) * 0.25), const(np.zeros(10)), none],
    )
    scores = op(OperationType.SOFTMAX, [logits, scalar(OperandType.FLOAT32, 1.0)])

    m.identifyInputsAndOutputs([image, embedding], [features, scores])
    m.finish()
    return m
