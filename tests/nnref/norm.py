"""Normalizations along an axis: softmax, log-softmax, L2, local response, instance."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .core import F, F_Q8, Call, Operand, to_nhwc, from_nhwc


def softmax(call: Call) -> list[Operand]:
    call.count(2, 3)
    x = call.tensor(0, *F_Q8)
    beta = call.float(1)
    axis = call.axis(2, x.value.ndim) if call.has(2) else x.value.ndim - 1  # type: ignore[union-attr]
    out = call.fixed_quant(x, 1.0 / 256, 0)
    z = beta * x.real()
    e = np.exp(z - z.max(axis=axis, keepdims=True, initial=-np.inf))
    return [call.real_result(0, e / e.sum(axis=axis, keepdims=True), out)]


def log_softmax(call: Call) -> list[Operand]:
    call.count(3)
    x = call.tensor(0, *F)
    beta = call.float(1)
    axis = call.axis(2, x.value.ndim)  # type: ignore[union-attr]
    z = beta * x.real()
    z = z - z.max(axis=axis, keepdims=True)
    return [call.real_result(0, z - np.log(np.exp(z).sum(axis=axis, keepdims=True)), x)]


def l2_normalization(call: Call) -> list[Operand]:
    call.count(1, 2)
    x = call.tensor(0, *F_Q8)
    axis = call.axis(1, x.value.ndim) if call.has(1) else x.value.ndim - 1  # type: ignore[union-attr]
    out = call.fixed_quant(x, 1.0 / 128, 128)
    v = x.real()
    norm = np.maximum(np.sqrt((v * v).sum(axis=axis, keepdims=True)), 1e-6)
    return [call.real_result(0, v / norm, out)]


def local_response_normalization(call: Call) -> list[Operand]:
    call.count(5, 6)
    x = call.tensor(0, *F)
    radius = call.int(1)
    bias, alpha, beta = call.float(2), call.float(3), call.float(4)
    axis = call.axis(5, x.value.ndim) if call.has(5) else x.value.ndim - 1  # type: ignore[union-attr]
    v = np.moveaxis(x.real(), axis, -1)
    sq = v * v
    depth = v.shape[-1]
    total = np.zeros_like(v)
    for c in range(depth):
        total[..., c] = sq[..., max(0, c - radius) : min(depth, c + radius + 1)].sum(axis=-1)
    return [call.real_result(0, np.moveaxis(v / (bias + alpha * total) ** beta, -1, axis), x)]


def instance_normalization(call: Call) -> list[Operand]:
    call.count(5)
    x = call.tensor(0, *F)
    if x.value.ndim != 4:  # type: ignore[union-attr]
        raise call.fail("the input has rank 4")
    gamma, beta, epsilon = call.float(1, like=x), call.float(2, like=x), call.float(3, like=x)
    if not 0 <= epsilon < np.inf:  # Android 10 checks nothing: 0 (a tiny one in float16) is valid
        raise call.fail(f"epsilon {epsilon} must be a finite value >= 0")
    nchw = call.bool(4)
    v = to_nhwc(x.real(), nchw)
    mean = v.mean(axis=(1, 2), keepdims=True)
    var = ((v - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    return [call.real_result(0, from_nhwc((v - mean) * gamma / np.sqrt(var + epsilon) + beta, nchw), x)]


OPERATIONS: dict[str, Callable[[Call], list[Operand]]] = {
    "SOFTMAX": softmax,
    "LOG_SOFTMAX": log_softmax,
    "L2_NORMALIZATION": l2_normalization,
    "LOCAL_RESPONSE_NORMALIZATION": local_response_normalization,
    "INSTANCE_NORMALIZATION": instance_normalization,
}
