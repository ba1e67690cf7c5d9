"""The test oracle: NNAPI's float32 operations in plain numpy, over the HAL model format.

Written for obviousness, not speed: each operation is the textbook formula, so a test
can trust it and compare the C kernels, a driver, or a partitioned plan against it.
``run(model, inputs)`` executes a ``HalModel`` operation by operation and returns the
model outputs in ``outputIndexes`` order. ``run_plan(plan, inputs)`` runs each step of
an ``ExecutionPlan`` on its own sub-model, in order, passing values between steps by
the original operand indexes, as an executor does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from framework.nn import ExecutionPlan, FuseCode, HalModel, OperandLifeTime, OperationType


def activation(x: np.ndarray, fuse: int) -> np.ndarray:
    if fuse == FuseCode.NONE:
        return x
    if fuse == FuseCode.RELU:
        return np.maximum(x, np.float32(0))
    if fuse == FuseCode.RELU1:
        return np.clip(x, np.float32(-1), np.float32(1))
    if fuse == FuseCode.RELU6:
        return np.clip(x, np.float32(0), np.float32(6))
    raise ValueError(f"unknown fuse code {fuse}")


def fully_connected(x: np.ndarray, w: np.ndarray, b: np.ndarray, fuse: int) -> np.ndarray:
    return activation((x @ w.T + b).astype(np.float32), fuse)


def conv_2d(
    x: np.ndarray,
    f: np.ndarray,
    b: np.ndarray,
    pad_left: int,
    pad_right: int,
    pad_top: int,
    pad_bottom: int,
    stride_w: int,
    stride_h: int,
    fuse: int,
) -> np.ndarray:
    """NHWC input, [out, fh, fw, c] filter, explicit zero padding."""
    n, h, w, c = x.shape
    out, fh, fw, _ = f.shape
    padded = np.zeros((n, h + pad_top + pad_bottom, w + pad_left + pad_right, c), np.float32)
    padded[:, pad_top : pad_top + h, pad_left : pad_left + w, :] = x
    oh = (h + pad_top + pad_bottom - fh) // stride_h + 1
    ow = (w + pad_left + pad_right - fw) // stride_w + 1
    result = np.zeros((n, oh, ow, out), np.float32)
    for i in range(fh):
        for j in range(fw):
            window = padded[:, i : i + stride_h * (oh - 1) + 1 : stride_h, j : j + stride_w * (ow - 1) + 1 : stride_w, :]
            result += np.einsum("nhwc,oc->nhwo", window, f[:, i, j, :])
    return activation(result + b, fuse)


def softmax(x: np.ndarray, beta: float) -> np.ndarray:
    z = np.float32(beta) * (x - x.max(axis=-1, keepdims=True))
    e = np.exp(z)
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def run(model: HalModel, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Execute ``model`` on ``inputs`` (one array per ``inputIndexes`` entry)."""
    if len(inputs) != len(model.inputIndexes):
        raise ValueError(f"the model takes {len(model.inputIndexes)} inputs, got {len(inputs)}")
    values: dict[int, np.ndarray] = {}
    for index, array in zip(model.inputIndexes, inputs, strict=True):
        array = np.asarray(array, np.float32)
        expected = model.operands[index].dimensions
        if array.shape != tuple(expected):
            raise ValueError(f"input operand {index} is {list(expected)}, got {list(array.shape)}")
        values[index] = array
    for i, operand in enumerate(model.operands):
        if operand.lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_POOL):
            values[i] = model.constantArray(i)

    def scalar(i: int):
        return values[i].item()

    for op in model.operations:
        a = [values.get(i) for i in op.inputs]
        t = op.type
        if t == OperationType.ADD:
            y = activation(a[0] + a[1], scalar(op.inputs[2]))
        elif t == OperationType.SUB:
            y = activation(a[0] - a[1], scalar(op.inputs[2]))
        elif t == OperationType.MUL:
            y = activation(a[0] * a[1], scalar(op.inputs[2]))
        elif t == OperationType.RELU:
            y = np.maximum(a[0], np.float32(0))
        elif t == OperationType.SOFTMAX:
            y = softmax(a[0], scalar(op.inputs[1]))
        elif t == OperationType.FULLY_CONNECTED:
            y = fully_connected(a[0], a[1], a[2], scalar(op.inputs[3]))
        elif t == OperationType.CONV_2D:
            y = conv_2d(a[0], a[1], a[2], *(scalar(i) for i in op.inputs[3:]))
        else:
            raise ValueError(f"no reference for {t!r}")
        expected = model.operands[op.outputs[0]].dimensions
        if y.shape != tuple(expected):
            raise AssertionError(f"{t.name} gave {y.shape}, the model says {expected}")
        values[op.outputs[0]] = y.astype(np.float32, copy=False)
    return [values[i] for i in model.outputIndexes]


def run_plan(plan: ExecutionPlan, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run each step's sub-model in order, as an executor moving values between devices."""
    whole = plan.model
    values = {i: np.asarray(a, np.float32) for i, a in zip(whole.inputIndexes, inputs, strict=True)}
    for step in plan.steps:
        missing = [i for i in step.inputs if i not in values]
        if missing:
            raise AssertionError(f"step {step.index} needs operands {missing} that no earlier step produced")
        results = run(step.model, [values[i] for i in step.inputs])
        for i, array in zip(step.outputs, results, strict=True):
            if i in values:
                raise AssertionError(f"operand {i} is produced twice (again by step {step.index})")
            values[i] = array
    return [values[i] for i in whole.outputIndexes]
