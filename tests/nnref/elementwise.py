"""Element-wise operations: arithmetic with broadcasting, activations, math, comparisons, casts.

Float16 operands compute in float64 and round to float16 at the end (Android's reference
widens to float32 the same way); quantized ADD, SUB and MUL use the reference's integer
arithmetic, the other quantized element-wise operations dequantize, compute, and quantize
with the output's parameters (within a quantum of Android's fixed-point kernels).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .core import (
    DTYPES,
    F,
    F_Q8,
    Call,
    Operand,
    activate,
    broadcast_shape,
    multiply_by_quantized_multiplier,
    quant_activation_range,
    quantize_multiplier,
    requantize,
)

LEFT_SHIFT = 20  # the headroom the reference gives quantized ADD and SUB


def _binary_inputs(call: Call, types: tuple[str, ...]) -> tuple[Operand, Operand, int]:
    call.count(3)
    a = call.tensor(0, *types)
    b = call.same_type(1, a)
    broadcast_shape(a.shape, b.shape)
    if a.value.ndim > 4 or b.value.ndim > 4:  # type: ignore[union-attr]
        raise call.fail("inputs have rank at most 4")
    return a, b, call.int(2)


def _add_sub_quant8(call: Call, a: Operand, b: Operand, fuse: int, sign: int) -> Operand:
    out = call.spec(0, a)
    twice_max = 2 * max(a.scale, b.scale)
    q1, s1 = quantize_multiplier(a.scale / twice_max)
    q2, s2 = quantize_multiplier(b.scale / twice_max)
    qo, so = quantize_multiplier(twice_max / ((1 << LEFT_SHIFT) * out.scale))
    x1 = (a.value.astype(np.int64) - a.zero_point) * (1 << LEFT_SHIFT)  # type: ignore[union-attr]
    x2 = (b.value.astype(np.int64) - b.zero_point) * (1 << LEFT_SHIFT)  # type: ignore[union-attr]
    total = multiply_by_quantized_multiplier(x1, q1, s1) + multiply_by_quantized_multiplier(x2, sign * q2, s2)
    lo, hi = quant_activation_range(fuse, out)
    raw = multiply_by_quantized_multiplier(total, qo, so) + out.zero_point
    return call.raw_result(0, np.clip(raw, lo, hi).astype(np.uint8), a)


def add(call: Call) -> list[Operand]:
    a, b, fuse = _binary_inputs(call, F_Q8)
    if a.type == "TENSOR_QUANT8_ASYMM":
        return [_add_sub_quant8(call, a, b, fuse, +1)]
    return [call.real_result(0, activate(a.real() + b.real(), fuse), a)]


def sub(call: Call) -> list[Operand]:
    a, b, fuse = _binary_inputs(call, F_Q8)
    if a.type == "TENSOR_QUANT8_ASYMM":
        return [_add_sub_quant8(call, a, b, fuse, -1)]
    return [call.real_result(0, activate(a.real() - b.real(), fuse), a)]


def mul(call: Call) -> list[Operand]:
    a, b, fuse = _binary_inputs(call, F_Q8)
    if a.type == "TENSOR_QUANT8_ASYMM":
        out = call.spec(0, a)
        if not out.scale > a.scale * b.scale:
            raise call.fail("a quantized output's scale must exceed input1_scale * input2_scale")
        acc = (a.value.astype(np.int64) - a.zero_point) * (b.value.astype(np.int64) - b.zero_point)  # type: ignore[union-attr]
        lo, hi = quant_activation_range(fuse, out)
        return [call.raw_result(0, requantize(acc, a.scale * b.scale / out.scale, out, lo, hi), a)]
    return [call.real_result(0, activate(a.real() * b.real(), fuse), a)]


def div(call: Call) -> list[Operand]:
    a, b, fuse = _binary_inputs(call, F)
    with np.errstate(divide="ignore", invalid="ignore"):
        return [call.real_result(0, activate(a.real() / b.real(), fuse), a)]


def _unary(types: tuple[str, ...], fn: Callable[[np.ndarray], np.ndarray],
           max_rank: int | None = None) -> Callable[[Call], list[Operand]]:
    def operation(call: Call) -> list[Operand]:
        call.count(1)
        x = call.tensor(0, *types)
        if max_rank is not None and x.value.ndim > max_rank:  # type: ignore[union-attr]
            raise call.fail(f"input 0 has rank at most {max_rank}, got {x.value.ndim}")  # type: ignore[union-attr]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [call.real_result(0, fn(x.real()), x)]

    return operation


def logistic(call: Call) -> list[Operand]:
    call.count(1)
    x = call.tensor(0, *F_Q8)
    with np.errstate(over="ignore"):
        return [call.real_result(0, 1.0 / (1.0 + np.exp(-x.real())), call.fixed_quant(x, 1.0 / 256, 0))]


def tanh(call: Call) -> list[Operand]:
    call.count(1)
    x = call.tensor(0, *F_Q8)
    return [call.real_result(0, np.tanh(x.real()), call.fixed_quant(x, 1.0 / 128, 128))]


def _binary_real(types: tuple[str, ...], fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 out_type: str | None = None) -> Callable[[Call], list[Operand]]:
    """Broadcast binary operations without a fused activation (the 1.2 additions)."""

    def operation(call: Call) -> list[Operand]:
        call.count(2)
        a = call.tensor(0, *types)
        b = call.same_type(1, a)
        broadcast_shape(a.shape, b.shape)
        if out_type is None and a.type == "TENSOR_INT32":
            return [call.raw_result(0, fn(a.value, b.value).astype(np.int32), a)]  # type: ignore[arg-type]
        if a.type == "TENSOR_BOOL8":
            return [call.raw_result(0, fn(a.value, b.value), a, out_type)]  # type: ignore[arg-type]
        if out_type == "TENSOR_BOOL8" and a.type == "TENSOR_QUANT8_ASYMM":
            # Android's comparisons compute each real value in float32, (stored - zero point) *
            # scale, so reals equal in float32 compare equal (float64 could tell them apart)
            return [call.raw_result(0, fn(_real_float32(a), _real_float32(b)), a, out_type)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [call.real_result(0, fn(a.real(), b.real()), a, out_type)]

    return operation


def _real_float32(x: Operand) -> np.ndarray:
    return (x.value.astype(np.int32) - x.zero_point).astype(np.float32) * np.float32(x.scale)  # type: ignore[union-attr]


COMPARABLE = ("TENSOR_BOOL8", "TENSOR_FLOAT16", "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM")


def _logical(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[Call], list[Operand]]:
    def operation(call: Call) -> list[Operand]:
        call.count(2)
        a = call.tensor(0, "TENSOR_BOOL8")
        b = call.tensor(1, "TENSOR_BOOL8")
        broadcast_shape(a.shape, b.shape)
        return [call.raw_result(0, fn(a.value, b.value), a)]  # type: ignore[arg-type]

    return operation


def logical_not(call: Call) -> list[Operand]:
    call.count(1)
    x = call.tensor(0, "TENSOR_BOOL8")
    return [call.raw_result(0, np.logical_not(x.value), x)]


def neg(call: Call) -> list[Operand]:
    call.count(1)
    x = call.tensor(0, "TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_INT32")
    if x.type == "TENSOR_INT32":
        return [call.raw_result(0, (-x.value.astype(np.int64)).astype(np.int32), x)]  # type: ignore[union-attr]
    return [call.real_result(0, -x.real(), x)]


def relu_family(lo: float, hi: float) -> Callable[[Call], list[Operand]]:
    def operation(call: Call) -> list[Operand]:
        call.count(1)
        x = call.tensor(0, *F_Q8)
        return [call.real_result(0, np.clip(x.real(), lo, hi), x)]

    return operation


def prelu(call: Call) -> list[Operand]:
    call.count(2)
    x = call.tensor(0, *F_Q8)
    alpha = call.same_type(1, x)
    broadcast_shape(x.shape, alpha.shape)
    real, a = x.real(), alpha.real()
    return [call.real_result(0, np.where(real >= 0, real, real * a), x)]


def select(call: Call) -> list[Operand]:
    call.count(3)
    condition = call.tensor(0, "TENSOR_BOOL8")
    a = call.tensor(1, "TENSOR_FLOAT16", "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM")
    b = call.same_type(2, a)
    if not condition.shape == a.shape == b.shape:
        raise call.fail(f"the condition and both inputs have one shape, got {condition.shape}, {a.shape}, {b.shape}")
    if a.type == "TENSOR_INT32":
        return [call.raw_result(0, np.where(condition.value, a.value, b.value), a)]  # type: ignore[arg-type]
    return [call.real_result(0, np.where(condition.value, a.real(), b.real()), a)]  # type: ignore[arg-type]


def cast(call: Call) -> list[Operand]:
    """CAST converts stored values (a quantized operand's integers, not its real values)."""
    types = ("TENSOR_FLOAT16", "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM")
    call.count(1)
    x = call.tensor(0, *types)
    spec = call.spec(0, x)
    if spec.type not in types:
        raise call.fail(f"output is {spec.type}; the 1.2 spec allows {', '.join(types)}")
    v = x.value.astype(np.float64)  # type: ignore[union-attr]
    if spec.type == "TENSOR_QUANT8_ASYMM":
        v = np.clip(v, 0, 255)
    if spec.type in ("TENSOR_QUANT8_ASYMM", "TENSOR_INT32"):
        v = np.trunc(v)
    with np.errstate(over="ignore", invalid="ignore"):
        return [call.raw_result(0, v.astype(DTYPES[spec.type]), x)]


def dequantize(call: Call) -> list[Operand]:
    call.count(1)
    x = call.tensor(0, "TENSOR_QUANT8_ASYMM", "TENSOR_QUANT8_SYMM", "TENSOR_QUANT8_SYMM_PER_CHANNEL")
    spec = call.spec(0, type=call.outputs[0].type if call.outputs and call.outputs[0] else "TENSOR_FLOAT32")
    if spec.type not in F:
        raise call.fail(f"output is {spec.type}; the 1.2 spec allows TENSOR_FLOAT32, TENSOR_FLOAT16")
    return [call.real_result(0, x.real(), type=spec.type)]


def quantize_op(call: Call) -> list[Operand]:
    call.count(1)
    x = call.tensor(0, *F)
    if not call.outputs or call.outputs[0] is None or call.outputs[0].type != "TENSOR_QUANT8_ASYMM":
        raise call.fail("the output is a TENSOR_QUANT8_ASYMM template with its scale and zero point")
    return [call.real_result(0, x.real())]


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


OPERATIONS: dict[str, Callable[[Call], list[Operand]]] = {
    "ADD": add,
    "SUB": sub,
    "MUL": mul,
    "DIV": div,
    "FLOOR": _unary(F, np.floor, max_rank=4),  # types.hal 1.2: "up to 4"
    "ABS": _unary(F, np.abs),
    "EXP": _unary(F, np.exp),
    "LOG": _unary(F, np.log),
    "RSQRT": _unary(F, _rsqrt),
    "SQRT": _unary(F, np.sqrt),
    "SIN": _unary(F, np.sin),
    "NEG": neg,
    "LOGISTIC": logistic,
    "TANH": tanh,
    "RELU": relu_family(0.0, np.inf),
    "RELU1": relu_family(-1.0, 1.0),
    "RELU6": relu_family(0.0, 6.0),
    "PRELU": prelu,
    "MAXIMUM": _binary_real(("TENSOR_FLOAT16", "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM"), np.maximum),
    "MINIMUM": _binary_real(("TENSOR_FLOAT16", "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM"), np.minimum),
    "POW": _binary_real(F, np.power),
    "EQUAL": _binary_real(COMPARABLE, np.equal, "TENSOR_BOOL8"),
    "NOT_EQUAL": _binary_real(COMPARABLE, np.not_equal, "TENSOR_BOOL8"),
    "LESS": _binary_real(COMPARABLE, np.less, "TENSOR_BOOL8"),
    "LESS_EQUAL": _binary_real(COMPARABLE, np.less_equal, "TENSOR_BOOL8"),
    "GREATER": _binary_real(COMPARABLE, np.greater, "TENSOR_BOOL8"),
    "GREATER_EQUAL": _binary_real(COMPARABLE, np.greater_equal, "TENSOR_BOOL8"),
    "LOGICAL_AND": _logical(np.logical_and),
    "LOGICAL_OR": _logical(np.logical_or),
    "LOGICAL_NOT": logical_not,
    "SELECT": select,
    "CAST": cast,
    "DEQUANTIZE": dequantize,
    "QUANTIZE": quantize_op,
}
