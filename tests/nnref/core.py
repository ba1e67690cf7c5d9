"""The reference's vocabulary: operands, quantization arithmetic and the shared shape rules.

Everything here follows NN HAL 1.2's types.hal (what an operand type stores, how a
quantized value maps to a real one) and the integer arithmetic Android's reference CPU
implementation uses to requantize (gemmlowp's fixed-point helpers, as TFLite names them:
QuantizeMultiplier, SaturatingRoundingDoublingHighMul, RoundingDivideByPOT), so a quantized
result computed here matches Android's to the quantum. Written plainly in numpy, apart
from the C kernels, so it can judge them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

#: NN HAL 1.2's OperandType, by code (the index). The generated AIDL enum holds the subset
#: npuemu's interfaces know today; tests/test_nnref_core.py checks they agree.
OPERAND_TYPES: tuple[str, ...] = (
    "FLOAT32", "INT32", "UINT32", "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM",
    "BOOL", "TENSOR_QUANT16_SYMM", "TENSOR_FLOAT16", "TENSOR_BOOL8", "FLOAT16",
    "TENSOR_QUANT8_SYMM_PER_CHANNEL", "TENSOR_QUANT16_ASYMM", "TENSOR_QUANT8_SYMM",
)

#: How each type is stored (the numpy dtype of its buffer).
DTYPES: dict[str, np.dtype] = {
    "FLOAT32": np.dtype(np.float32), "INT32": np.dtype(np.int32), "UINT32": np.dtype(np.uint32),
    "TENSOR_FLOAT32": np.dtype(np.float32), "TENSOR_INT32": np.dtype(np.int32),
    "TENSOR_QUANT8_ASYMM": np.dtype(np.uint8), "BOOL": np.dtype(np.bool_),
    "TENSOR_QUANT16_SYMM": np.dtype(np.int16), "TENSOR_FLOAT16": np.dtype(np.float16),
    "TENSOR_BOOL8": np.dtype(np.bool_), "FLOAT16": np.dtype(np.float16),
    "TENSOR_QUANT8_SYMM_PER_CHANNEL": np.dtype(np.int8), "TENSOR_QUANT16_ASYMM": np.dtype(np.uint16),
    "TENSOR_QUANT8_SYMM": np.dtype(np.int8),
}
SCALARS = frozenset({"FLOAT32", "INT32", "UINT32", "BOOL", "FLOAT16"})
FLOATS = frozenset({"TENSOR_FLOAT32", "TENSOR_FLOAT16"})
QUANTIZED = frozenset({"TENSOR_QUANT8_ASYMM", "TENSOR_QUANT16_SYMM", "TENSOR_QUANT16_ASYMM",
                       "TENSOR_QUANT8_SYMM", "TENSOR_QUANT8_SYMM_PER_CHANNEL"})
#: The float types plus the asymmetric 8-bit one: what most 1.2 operations accept.
F_Q8 = ("TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_QUANT8_ASYMM")
F = ("TENSOR_FLOAT32", "TENSOR_FLOAT16")

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def type_name(operand_type: object) -> str:
    """A 1.2 operand type's name, from its name, its code or an enum member."""
    if isinstance(operand_type, str):
        name = operand_type
    elif isinstance(operand_type, int):
        code = int(operand_type)
        if not 0 <= code < len(OPERAND_TYPES):
            raise ValueError(f"operand type {code} is not an NN HAL 1.2 OperandType")
        name = OPERAND_TYPES[code]
    else:
        raise TypeError(f"an operand type is a name or a code, not {operand_type!r}")
    if name not in DTYPES:
        raise ValueError(f"{name!r} is not an NN HAL 1.2 OperandType")
    return name


@dataclasses.dataclass(frozen=True)
class ChannelQuant:
    """TENSOR_QUANT8_SYMM_PER_CHANNEL's parameters (SymmPerChannelQuantParams)."""

    scales: tuple[float, ...]
    channel_dim: int


@dataclasses.dataclass(frozen=True, eq=False)
class Operand:
    """One operand's value: its storage array, type and quantization parameters.

    ``value`` is None for an output template (it only names the type and, for a quantized
    output, the scale and zero point the model declares).
    """

    type: str
    value: np.ndarray | None = None
    scale: float = 0.0
    zero_point: int = 0
    channel_quant: ChannelQuant | None = None

    def __post_init__(self) -> None:
        name = type_name(self.type)
        object.__setattr__(self, "type", name)
        if self.value is not None:
            array = np.asarray(self.value)
            if name != "TENSOR_BOOL8" and name != "BOOL" and array.dtype.kind == "f" and DTYPES[name].kind in "iu":
                if not np.all(array == np.round(array)):
                    raise ValueError(f"a {name} operand stores integers, got {array}")
            with np.errstate(over="raise", invalid="raise"):
                stored = array.astype(DTYPES[name])
            if DTYPES[name].kind in "iu" and not np.array_equal(stored.astype(np.int64), array.astype(np.int64)):
                raise ValueError(f"a value does not fit {name}: {array}")
            if name in SCALARS and stored.ndim != 0:
                raise ValueError(f"a {name} operand is a scalar, got shape {stored.shape}")
            object.__setattr__(self, "value", stored)
        if name == "TENSOR_QUANT8_SYMM_PER_CHANNEL":
            if self.channel_quant is None:
                raise ValueError("a TENSOR_QUANT8_SYMM_PER_CHANNEL operand needs channel_quant")
        elif name in QUANTIZED and self.value is not None and not self.scale > 0:
            raise ValueError(f"a {name} operand needs a scale > 0, got {self.scale}")

    @property
    def shape(self) -> tuple[int, ...]:
        assert self.value is not None
        return self.value.shape

    def real(self) -> np.ndarray:
        """The real values (float64): dequantized when quantized, else the value itself."""
        assert self.value is not None, "an output template has no value"
        v = self.value.astype(np.float64)
        if self.type == "TENSOR_QUANT8_SYMM_PER_CHANNEL":
            cq = self.channel_quant
            assert cq is not None
            shape = [1] * v.ndim
            shape[cq.channel_dim] = -1
            return v * np.asarray(cq.scales, np.float64).reshape(shape)
        if self.type in QUANTIZED:
            return (v - self.zero_point) * self.scale
        return v

    def item(self) -> int | float | bool:
        assert self.value is not None and self.value.ndim == 0, f"{self.type} is not a scalar"
        return self.value.item()


# -- building operands ----------------------------------------------------------------


def tensor(type: str, values: object, shape: Sequence[int] | None = None, scale: float = 0.0,
           zero_point: int = 0, channel_quant: ChannelQuant | None = None) -> Operand:
    array = np.asarray(values)
    if shape is not None:
        array = array.reshape(tuple(shape))
    return Operand(type, array, scale, zero_point, channel_quant)


def int32(v: int) -> Operand:
    return Operand("INT32", np.asarray(v))


def float32(v: float) -> Operand:
    return Operand("FLOAT32", np.asarray(v))


def float16(v: float) -> Operand:
    return Operand("FLOAT16", np.asarray(v))


def boolean(v: bool) -> Operand:
    return Operand("BOOL", np.asarray(v))


def output(type: str, scale: float = 0.0, zero_point: int = 0) -> Operand:
    """An output template: the type (and a quantized output's parameters) a model declares."""
    return Operand(type, None, scale, zero_point)


# -- rounding and quantization --------------------------------------------------------


def round_away(x: np.ndarray | float) -> np.ndarray:
    """C's std::round: halves away from zero (numpy's round is to even)."""
    x = np.asarray(x, np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quant_range(type: str) -> tuple[int, int]:
    info = np.iinfo(DTYPES[type])
    return int(info.min), int(info.max)


def quantize(real: np.ndarray, type: str, scale: float, zero_point: int) -> np.ndarray:
    """QUANTIZE's rule: round(x / scale) + zero_point, halves away from zero, saturated."""
    lo, hi = quant_range(type)
    with np.errstate(invalid="ignore"):
        q = round_away(np.asarray(real, np.float64) / scale) + zero_point
    return np.clip(np.nan_to_num(q), lo, hi).astype(DTYPES[type])


def quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier: ``real == q * 2**(shift - 31)`` with q a Q31 int32 in [2**30, 2**31)."""
    if real == 0.0:
        return 0, 0
    if real < 0:
        raise ValueError(f"a requantization multiplier is positive, got {real}")
    mantissa, shift = math.frexp(real)
    q = int(round_away(mantissa * (1 << 31)))
    if q == 1 << 31:
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q, shift


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: int | np.ndarray) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul over int32 values (as int64 arrays)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    total = ab + nudge
    # C's division truncates toward zero.
    high = np.where(total >= 0, total >> 31, -((-total) >> 31))
    return np.where(overflow, INT32_MAX, high).astype(np.int64)


def rounding_divide_by_pot(x: np.ndarray, exponent: int | np.ndarray) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: x / 2**exponent, halves away from zero."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x: np.ndarray, q: int | np.ndarray, shift: int | np.ndarray) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier: x * q * 2**(shift - 31), rounded as the reference."""
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    shifted = np.clip(np.asarray(x, np.int64) * (np.int64(1) << left), INT32_MIN, INT32_MAX)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, q), right)


def requantize(acc: np.ndarray, real_multiplier: float | np.ndarray, out: Operand, lo: int, hi: int) -> np.ndarray:
    """An int32 accumulator to ``out``'s storage: times the multiplier, plus the zero point, clamped."""
    multipliers = np.atleast_1d(np.asarray(real_multiplier, np.float64))
    pairs = [quantize_multiplier(float(m)) for m in multipliers.ravel()]
    q = np.asarray([p[0] for p in pairs], np.int64).reshape(multipliers.shape)
    s = np.asarray([p[1] for p in pairs], np.int64).reshape(multipliers.shape)
    if np.ndim(real_multiplier) == 0:
        q, s = q[0], s[0]
    scaled = multiply_by_quantized_multiplier(acc, q, s) + out.zero_point
    return np.clip(scaled, lo, hi).astype(DTYPES[out.type])


# -- fused activations ----------------------------------------------------------------

FUSE_NONE, FUSE_RELU, FUSE_RELU1, FUSE_RELU6 = 0, 1, 2, 3


def activation_bounds(fuse: int) -> tuple[float, float]:
    bounds = {FUSE_NONE: (-math.inf, math.inf), FUSE_RELU: (0.0, math.inf),
              FUSE_RELU1: (-1.0, 1.0), FUSE_RELU6: (0.0, 6.0)}
    if fuse not in bounds:
        raise ValueError(f"fused activation {fuse} is not NONE, RELU, RELU1 or RELU6")
    return bounds[fuse]


def activate(x: np.ndarray, fuse: int) -> np.ndarray:
    lo, hi = activation_bounds(fuse)
    return np.clip(x, lo, hi)


def quant_activation_range(fuse: int, out: Operand) -> tuple[int, int]:
    """CalculateActivationRangeUint8: the bounds as quantized values, within the type's range."""
    qmin, qmax = quant_range(out.type)
    lo, hi = activation_bounds(fuse)

    def q(v: float) -> int:
        return out.zero_point + int(round_away(v / out.scale))

    return (qmin if lo == -math.inf else max(qmin, q(lo)), qmax if hi == math.inf else min(qmax, q(hi)))


# -- shapes: padding, layout, broadcasting ----------------------------------------------

PADDING_SAME, PADDING_VALID = 1, 2


def implicit_padding(size: int, stride: int, filter_size: int, dilation: int, scheme: int) -> tuple[int, int]:
    """The 1.2 spec's implicit padding: (head, tail) for one spatial dimension."""
    effective = (filter_size - 1) * dilation + 1
    if scheme == PADDING_SAME:
        out = (size + stride - 1) // stride
        needed = max(0, (out - 1) * stride + effective - size)
        return needed // 2, needed - needed // 2
    if scheme == PADDING_VALID:
        return 0, 0
    raise ValueError(f"padding scheme {scheme} is not SAME (1) or VALID (2)")


def output_size(size: int, filter_size: int, stride: int, dilation: int, head: int, tail: int) -> int:
    effective = (filter_size - 1) * dilation + 1
    return (size - effective + head + tail + stride) // stride


def to_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return np.transpose(x, (0, 2, 3, 1)) if nchw else x


def from_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return np.transpose(x, (0, 3, 1, 2)) if nchw else x


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """NNAPI's broadcasting: dimensions aligned from the right, each equal or one of them 1."""
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise ValueError(f"shapes {list(a)} and {list(b)} do not broadcast") from None


# -- Android's tolerances -----------------------------------------------------------------

#: (atol, rtol) of the generated tests' comparison: float32, then float16 or relaxed float32.
FLOAT32_TOLERANCE = (1e-5, 5.0 * 1.1920928955078125e-7)
FLOAT16_TOLERANCE = (5.0 * 0.0009765625, 5.0 * 0.0009765625)


def assert_close(actual: Operand, expected: Operand, relaxed: bool = False) -> None:
    """Android's comparison: floats within (atol + rtol*|expected|), quantized within one quantum."""
    assert actual.type == expected.type, f"{actual.type} != {expected.type}"
    assert actual.value is not None and expected.value is not None
    a, e = actual.value, expected.value
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    if actual.type in ("TENSOR_FLOAT32", "TENSOR_FLOAT16", "FLOAT32", "FLOAT16"):
        atol, rtol = FLOAT16_TOLERANCE if relaxed or "16" in actual.type else FLOAT32_TOLERANCE
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), atol=atol, rtol=rtol)
    elif actual.type in QUANTIZED:
        diff = np.abs(a.astype(np.int64) - e.astype(np.int64))
        assert diff.size == 0 or diff.max() <= 1, f"beyond one quantum:\n{a}\n{e}"
    else:
        np.testing.assert_array_equal(a, e)


# -- one operation's call ---------------------------------------------------------------


class BadOperation(ValueError):
    """The inputs do not make a valid call of the operation (the message names it and why)."""


class Call:
    """One operation's inputs, output templates and mode, with the reads every operation makes."""

    def __init__(self, name: str, inputs: Sequence[Operand], outputs: Sequence[Operand | None], relaxed: bool):
        self.name = name
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.relaxed = relaxed
        for i, operand in enumerate(self.inputs):
            if not isinstance(operand, Operand):
                raise TypeError(f"{name}: input {i} is {type(operand).__name__}, not an nnref Operand")

    def fail(self, message: str) -> BadOperation:
        return BadOperation(f"{self.name}: {message}")

    def count(self, *allowed: int) -> int:
        n = len(self.inputs)
        if n not in allowed:
            raise self.fail(f"takes {' or '.join(map(str, allowed))} inputs, got {n}")
        return n

    def has(self, i: int) -> bool:
        """Whether optional input ``i`` is given (present and not omitted with no value)."""
        return i < len(self.inputs) and self.inputs[i].value is not None

    def input(self, i: int, *types: str) -> Operand:
        if not self.has(i):
            raise self.fail(f"input {i} is missing")
        operand = self.inputs[i]
        if types and operand.type not in types:
            raise self.fail(f"input {i} is {operand.type}; the 1.2 spec allows {', '.join(types)}")
        return operand

    def tensor(self, i: int, *types: str) -> Operand:
        operand = self.input(i, *types)
        if operand.type in SCALARS:
            raise self.fail(f"input {i} is a scalar {operand.type}, not a tensor")
        return operand

    def same_type(self, i: int, like: Operand) -> Operand:
        return self.tensor(i, like.type)

    def int(self, i: int, default: int | None = None) -> int:
        if not self.has(i) and default is not None:
            return default
        return int(self.input(i, "INT32", "UINT32").item())

    def float(self, i: int, default: float | None = None, like: Operand | None = None) -> float:
        """A float scalar; with ``like``, of its tensor's precision as 1.2 requires where it
        says so: FLOAT16 beside a TENSOR_FLOAT16, FLOAT32 otherwise."""
        if not self.has(i) and default is not None:
            return default
        if like is None:
            return float(self.input(i, "FLOAT32", "FLOAT16").item())
        return float(self.input(i, "FLOAT16" if like.type == "TENSOR_FLOAT16" else "FLOAT32").item())

    def bool(self, i: int, default: bool | None = None) -> bool:
        if not self.has(i) and default is not None:
            return default
        return bool(self.input(i, "BOOL").item())

    def ints(self, i: int) -> list[int]:
        return [int(v) for v in self.tensor(i, "TENSOR_INT32").value.ravel()]  # type: ignore[union-attr]

    def axis(self, i: int, rank: int) -> int:
        axis = self.int(i)
        if not -rank <= axis < rank:
            raise self.fail(f"axis {axis} is outside [-{rank}, {rank})")
        return axis % rank

    def spec(self, k: int, like: Operand | None = None, type: str | None = None) -> Operand:
        """Output ``k``'s template: the one given, else ``type`` or ``like``'s type and parameters."""
        given = self.outputs[k] if k < len(self.outputs) else None
        if given is not None:
            if type is not None and given.type != type:
                raise self.fail(f"output {k} is {type}, not {given.type}")
            if given.type in QUANTIZED and not given.scale > 0:
                raise self.fail(f"output {k} is {given.type} and needs a scale > 0")
            return given
        if type is not None and (like is None or like.type != type):
            return output(type)
        if like is None:
            like = self.inputs[0]
        return Operand(like.type, None, like.scale, like.zero_point)

    def fixed_quant(self, x: Operand, scale: float, zero_point: int) -> Operand:
        """Output 0's template for an operation whose quantized output range is fixed by the spec
        (LOGISTIC, TANH, SOFTMAX, L2_NORMALIZATION): those parameters, or a given one that matches."""
        if x.type != "TENSOR_QUANT8_ASYMM":
            return self.spec(0, x)
        given = self.outputs[0] if self.outputs else None
        if given is not None and (given.type, given.scale, given.zero_point) != (x.type, scale, zero_point):
            raise self.fail(f"a TENSOR_QUANT8_ASYMM output has scale {scale} and zero point {zero_point}, "
                            f"got {given.scale} and {given.zero_point}")
        return Operand(x.type, None, scale, zero_point)

    def real_result(self, k: int, real: np.ndarray, like: Operand | None = None, type: str | None = None) -> Operand:
        """Output ``k`` from real values: quantized with its parameters, or cast to its float type."""
        spec = self.spec(k, like, type)
        real = np.asarray(real)
        if spec.type in QUANTIZED:
            return Operand(spec.type, quantize(real, spec.type, spec.scale, spec.zero_point), spec.scale, spec.zero_point)
        with np.errstate(over="ignore"):
            return Operand(spec.type, real.astype(DTYPES[spec.type]), spec.scale, spec.zero_point)

    def raw_result(self, k: int, stored: np.ndarray, like: Operand | None = None, type: str | None = None) -> Operand:
        """Output ``k`` from values already in its storage form (a quantized kernel's integers)."""
        spec = self.spec(k, like, type)
        return Operand(spec.type, np.asarray(stored), spec.scale, spec.zero_point)
