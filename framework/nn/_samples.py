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


def mixedSampleModel(seed: int = 31) -> Model:
    """A small quantized vision model with a float classifier head, for ``npuemu nn plan
    --model mixed``: the quantized convolutions suit an NPU or a DSP, the float head a GPU.

    ::

        image [1, 16, 16, 3] float32 ─ QUANTIZE (scale 1/128, zero point 128)
            ─ CONV_2D 3x3 SAME stride 2, 8 filters per-channel, RELU       (quant8)
            ─ DEPTHWISE_CONV_2D 3x3 SAME, RELU6                            (quant8)
            ─ AVERAGE_POOL_2D 8x8 ─ DEQUANTIZE ─ RESHAPE [1, 8]
            ─ FULLY_CONNECTED 8→10 ─ SOFTMAX ──────────────────────────────► scores [1, 10]

    Inputs ``(image,)``, outputs ``(scores,)``; seeded, so every run plans the same thing.
    """
    from ._types import SymmPerChannelQuantParams

    rng = np.random.default_rng(seed)
    m = Model()
    q8 = OperandType.TENSOR_QUANT8_ASYMM

    def const(operandType: OperandType, array: np.ndarray, **quant: float) -> int:
        index = m.addOperand(operandType, array.shape, **quant)
        m.setOperandValue(index, array)
        return index

    def scalar(operandType: OperandType, value: object) -> int:
        index = m.addOperand(operandType)
        m.setOperandValue(index, value)
        return index

    def out(operandType: OperandType, **quant: float) -> int:
        return m.addOperand(operandType, **quant)  # shapes are inferred at finish()

    def ints(*values: int) -> list[int]:
        return [scalar(OperandType.INT32, v) for v in values]

    image = m.addOperand(OperandType.TENSOR_FLOAT32, [1, 16, 16, 3])
    quantized = out(q8, scale=1 / 128, zeroPoint=128)
    m.addOperation(OperationType.QUANTIZE, [image], [quantized])

    in_scale, act_scale = 1 / 128, 1 / 32
    filter_scales = [float(s) for s in rng.uniform(0.004, 0.01, 8)]
    weights = m.addOperand(OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL, [8, 3, 3, 3])
    m.setOperandSymmPerChannelQuantParams(weights, SymmPerChannelQuantParams(scales=filter_scales, channelDim=0))
    m.setOperandValue(weights, rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8))
    bias = m.addOperand(OperandType.TENSOR_INT32, [8])  # per-channel: each scale is the input's x the filter's
    m.setOperandValue(bias, rng.integers(-200, 200, 8).astype(np.int32))
    conv = out(q8, scale=act_scale, zeroPoint=0)
    m.addOperation(OperationType.CONV_2D, [quantized, weights, bias, *ints(1, 2, 2, FuseCode.RELU)], [conv])

    dw_scale = 0.01
    dw_weights = const(q8, rng.integers(0, 256, (1, 3, 3, 8)).astype(np.uint8), scale=dw_scale, zeroPoint=128)
    dw_bias = const(OperandType.TENSOR_INT32, rng.integers(-100, 100, 8).astype(np.int32),
                    scale=act_scale * dw_scale, zeroPoint=0)
    depthwise = out(q8, scale=6 / 255, zeroPoint=0)
    m.addOperation(OperationType.DEPTHWISE_CONV_2D, [conv, dw_weights, dw_bias, *ints(1, 1, 1, 1, FuseCode.RELU6)],
                   [depthwise])

    pooled = out(q8, scale=6 / 255, zeroPoint=0)
    m.addOperation(OperationType.AVERAGE_POOL_2D, [depthwise, *ints(2, 1, 1, 8, 8, FuseCode.NONE)], [pooled])
    real = out(OperandType.TENSOR_FLOAT32)
    m.addOperation(OperationType.DEQUANTIZE, [pooled], [real])
    flat = out(OperandType.TENSOR_FLOAT32)
    m.addOperation(OperationType.RESHAPE, [real, const(OperandType.TENSOR_INT32, np.array([1, 8], np.int32))], [flat])
    logits = out(OperandType.TENSOR_FLOAT32)
    m.addOperation(OperationType.FULLY_CONNECTED, [
        flat, const(OperandType.TENSOR_FLOAT32, (rng.standard_normal((10, 8)) * 0.5).astype(np.float32)),
        const(OperandType.TENSOR_FLOAT32, np.zeros(10, np.float32)), *ints(FuseCode.NONE)], [logits])
    scores = out(OperandType.TENSOR_FLOAT32)
    m.addOperation(OperationType.SOFTMAX, [logits, scalar(OperandType.FLOAT32, 1.0)], [scores])

    m.identifyInputsAndOutputs([image], [scores])
    m.finish()
    return m
