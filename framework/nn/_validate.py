"""The rules of a HAL model, as Android 10's runtime checks them before a driver sees it.

:func:`validateModel` decides whether a :class:`HalModel` is well formed and answers with
the same model, every operation output's dimensions filled in where they can be known.
The model builder calls it from ``finish()``; the partitioner on each step's sub-model.
:func:`checkOperandType` holds the operand rules ``addOperand`` applies at once. Everything
refused is ``BadDataError`` (``ANEURALNETWORKS_BAD_DATA``) with a message naming the call or
operation, the operand and the rule, because the person reading it is debugging a model
they built.

The rules (NN HAL 1.2's, as AOSP's ValidateHal and NeuralNetworks.h state them):

- operands: a known type; a scalar has no dimensions; a tensor constant has every
  dimension; scale 0 and zero point 0 except: TENSOR_QUANT8_ASYMM (scale > 0, zero point
  0..255), TENSOR_QUANT16_ASYMM (scale > 0, 0..65535), TENSOR_QUANT8_SYMM and
  TENSOR_QUANT16_SYMM (scale > 0, zero point 0), TENSOR_INT32 (scale >= 0, zero point
  0: a bias carries its scale); TENSOR_QUANT8_SYMM_PER_CHANNEL and only it has
  per-channel scales (``extraParams.channelQuant``: channelDim < rank, one scale > 0 per
  index of that dimension); a constant's bytes lie inside their buffer and are exactly its
  size;
- the model's inputs and outputs: existing operands of lifetime SUBGRAPH_INPUT /
  SUBGRAPH_OUTPUT, each listed once, and every such operand listed; at least one output
  and one operation;
- operations: in run order (each reads only model inputs, constants, omitted optional
  inputs and what an earlier operation wrote); each temporary and model output written
  exactly once; never a constant or a model input; the signature and shapes as the
  operation's C binding reads them (:mod:`._signature`: one reading of the 1.2 spec shared
  with every device), which also infers the outputs' shapes from what is known.

Stricter than Android 10, which leaves the rest to the driver: a constant scalar
parameter out of range (a fuse code, a stride) and shapes the operation cannot take are
refused here, since the binding sees them.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from interfaces.android.hardware.neuralnetworks import DataLocation, Operand

from ._errors import BadDataError
from ._hal import HalModel
from ._signature import checkOperation, isBound
from ._types import FuseCode, OperandLifeTime, OperandType, OperationType, dtypeOf, isScalar

_CONSTANTS = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_POOL)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_UINT32_MAX = 2**32 - 1
#: Types whose scale must be > 0, with their zero point's range.
_QUANTIZED = {
    OperandType.TENSOR_QUANT8_ASYMM: (0, 255),
    OperandType.TENSOR_QUANT16_ASYMM: (0, 65535),
    OperandType.TENSOR_QUANT8_SYMM: (0, 0),
    OperandType.TENSOR_QUANT16_SYMM: (0, 0),
}


def checkOperandType(where: str, type: OperandType, dimensions: Sequence[int], scale: float, zeroPoint: int) -> None:  # noqa: N802, N803
    """NN HAL 1.2's rules for one operand's type, dimensions, scale and zero point.

    Unspecified dimensions (0, or no dimensions for a tensor of unknown rank) are allowed
    here; whether an operand may leave them unspecified depends on its lifetime
    (:func:`validateModel`).
    """
    if isScalar(type) and len(dimensions):
        raise BadDataError(f"{where}: a {type.name} scalar has no dimensions, got {list(dimensions)}")
    if any(d < 0 for d in dimensions):
        raise BadDataError(f"{where}: negative dimension in {list(dimensions)}")
    if not isinstance(zeroPoint, int) or isinstance(zeroPoint, bool) or not _INT32_MIN <= zeroPoint <= _INT32_MAX:
        raise BadDataError(f"{where}: the zero point must be an int32, got {zeroPoint!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or math.isnan(scale):
        raise BadDataError(f"{where}: the scale must be a number, got {scale!r}")
    if not isScalar(type):
        size = math.prod(d for d in dimensions if d) * dtypeOf(type).itemsize
        if size > _UINT32_MAX:
            raise BadDataError(f"{where}: {list(dimensions)} is {size} bytes, more than an operand holds (2^32-1)")
    if type in _QUANTIZED:
        low, high = _QUANTIZED[type]
        if not (scale > 0 and math.isfinite(scale)):
            raise BadDataError(f"{where}: a {type.name} operand needs a finite scale > 0, got {scale!r}")
        if not low <= zeroPoint <= high:
            rule = "must be 0" if high == 0 else f"must be in {low}..{high}"
            raise BadDataError(f"{where}: a {type.name} operand's zero point {rule}, got {zeroPoint}")
    elif type == OperandType.TENSOR_INT32:
        if not (scale >= 0 and math.isfinite(scale)):
            raise BadDataError(f"{where}: a TENSOR_INT32 operand's scale must be finite and >= 0, got {scale!r}")
        if zeroPoint != 0:
            raise BadDataError(f"{where}: a TENSOR_INT32 operand's zero point must be 0, got {zeroPoint}")
    else:
        if scale != 0:
            raise BadDataError(f"{where}: a {type.name} operand has no scale (must be 0), got {scale!r}")
        if zeroPoint != 0:
            raise BadDataError(f"{where}: a {type.name} operand has no zero point (must be 0), got {zeroPoint}")


def checkChannelQuant(where: str, operand: Operand) -> None:  # noqa: N802
    """Per-channel scales: present on a TENSOR_QUANT8_SYMM_PER_CHANNEL operand, and only there."""
    extra = operand.extraParams
    if operand.type != OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        if extra is not None:
            raise BadDataError(f"{where}: a {operand.type.name} operand has no per-channel quantization (extraParams)")
        return
    if extra is None:
        raise BadDataError(
            f"{where}: a TENSOR_QUANT8_SYMM_PER_CHANNEL operand needs its per-channel scales "
            "(setOperandSymmPerChannelQuantParams)"
        )
    quant = extra.channelQuant
    rank = len(operand.dimensions)
    if not 0 <= quant.channelDim < rank:
        raise BadDataError(f"{where}: channelDim {quant.channelDim} is not a dimension of a rank-{rank} operand")
    channels = operand.dimensions[quant.channelDim]
    if channels == 0:
        raise BadDataError(f"{where}: channel dimension {quant.channelDim} is unspecified (0)")
    if len(quant.scales) != channels:
        raise BadDataError(
            f"{where}: {len(quant.scales)} per-channel scales for {channels} channels (dimension {quant.channelDim})"
        )
    for i, s in enumerate(quant.scales):
        if not (s > 0 and math.isfinite(s)):
            raise BadDataError(f"{where}: per-channel scale {i} must be finite and > 0, got {s!r}")


def expectedByteSize(operand: Operand) -> int | None:
    """Bytes of a fully specified operand; ``None`` while a dimension (or the rank) is unknown."""
    if isScalar(operand.type):
        return dtypeOf(operand.type).itemsize
    if not operand.dimensions or 0 in operand.dimensions:
        return None
    return math.prod(operand.dimensions) * dtypeOf(operand.type).itemsize


def operationShapes(  # noqa: N802
    where: str,
    opType: OperationType,
    inputs: Sequence[tuple[Operand, Any]],
    outputs: Sequence[Operand],
    shapes: bool = True,
) -> list[tuple[int, ...] | None]:
    """One operation's signature (and, with ``shapes``, its output shapes) checked; see :func:`checkOperation`.

    Until the C library binds them, the seven float32 operations npuemu had before NN HAL
    1.2's (``_LEGACY``) keep their old reading below; every other operation goes to its
    binding, which refuses it when there is none yet.
    """
    if opType in _LEGACY and not isBound(opType):
        return _legacy(where, opType, inputs, outputs, shapes)
    return checkOperation(where, opType, inputs, outputs)


# -- the seven float32 operations' reading, until their bindings land (bind_core.c) ------

_T = OperandType.TENSOR_FLOAT32
_I = OperandType.INT32
_F = OperandType.FLOAT32

#: Input and output operand types of each, in NNAPI's order (float32 only).
_LEGACY = types.MappingProxyType(
    {
        OperationType.ADD: ((_T, _T, _I), (_T,)),
        OperationType.SUB: ((_T, _T, _I), (_T,)),
        OperationType.MUL: ((_T, _T, _I), (_T,)),
        OperationType.FULLY_CONNECTED: ((_T, _T, _T, _I), (_T,)),
        OperationType.CONV_2D: ((_T, _T, _T) + (_I,) * 7, (_T,)),
        OperationType.RELU: ((_T,), (_T,)),
        OperationType.SOFTMAX: ((_T, _F), (_T,)),
    }
)


def _legacy(
    where: str, opType: OperationType, inputs: Sequence[tuple[Operand, Any]], outputs: Sequence[Operand], shapes: bool
) -> list[tuple[int, ...] | None]:
    """Counts and types; with ``shapes``, the output shape (every input's shape and scalar known)."""
    expectedIn, expectedOut = _LEGACY[opType]
    if len(inputs) != len(expectedIn):
        raise BadDataError(f"{where}: {opType.name} takes {len(expectedIn)} inputs, got {len(inputs)}")
    if len(outputs) != len(expectedOut):
        raise BadDataError(f"{where}: {opType.name} has {len(expectedOut)} output(s), got {len(outputs)}")
    got = [o.type for o, _ in inputs], [o.type for o in outputs]
    for kind, types_, expected in (("input", got[0], expectedIn), ("output", got[1], expectedOut)):
        for i, (g, e) in enumerate(zip(types_, expected, strict=True)):
            if g != e:
                raise BadDataError(f"{where}: {opType.name} {kind} {i} must be {e.name}, got {OperandType(g).name}")
    if not shapes:
        return [None] * len(outputs)
    for i, (o, data) in enumerate(inputs):
        if o.lifetime == OperandLifeTime.NO_VALUE:
            raise BadDataError(f"{where}: input {i} has no value, and is not optional")
        if isScalar(o.type) and data is None:
            raise BadDataError(f"{where}: scalar input {i} must be a constant")
        if not isScalar(o.type) and (not o.dimensions or 0 in o.dimensions):
            raise BadDataError(f"{where}: input {i}'s shape {list(o.dimensions)} is not known")

    def scalar(position: int) -> int | float:
        operand, data = inputs[position]
        return np.frombuffer(data, dtype=dtypeOf(operand.type)).item()

    inferred = _INFER[opType](_Args(where, tuple(tuple(o.dimensions) for o, _ in inputs), scalar))
    return [_merge(f"{where}: output 0", tuple(outputs[0].dimensions), inferred)]


@dataclasses.dataclass(frozen=True, slots=True)
class _Args:
    """What shape inference sees of one operation: its inputs' dims and its scalars."""

    where: str
    dims: tuple[tuple[int, ...], ...]
    scalar: Callable[[int], int | float]


def _same_shape(a: _Args) -> tuple[int, ...]:
    if a.dims[0] != a.dims[1]:
        raise BadDataError(f"{a.where}: inputs must have the same shape, got {list(a.dims[0])} and {list(a.dims[1])}")
    _fuse(a, 2)
    return a.dims[0]


def _fuse(a: _Args, index: int) -> None:
    code = a.scalar(index)
    if code not in set(FuseCode):
        raise BadDataError(f"{a.where}: input {index} is fuse code {code}, not one of {[int(c) for c in FuseCode]}")


def _rank(a: _Args, index: int, rank: int, name: str) -> tuple[int, ...]:
    dims = a.dims[index]
    if len(dims) != rank:
        raise BadDataError(f"{a.where}: {name} (input {index}) must have rank {rank}, got shape {list(dims)}")
    return dims


def _fully_connected(a: _Args) -> tuple[int, ...]:
    batch, size = _rank(a, 0, 2, "input")
    units, wsize = _rank(a, 1, 2, "weights")
    (bias,) = _rank(a, 2, 1, "bias")
    if wsize != size:
        raise BadDataError(f"{a.where}: weights {[units, wsize]} do not match input {[batch, size]}")
    if bias != units:
        raise BadDataError(f"{a.where}: bias has {bias} elements, weights have {units} units")
    _fuse(a, 3)
    return (batch, units)


def _conv_2d(a: _Args) -> tuple[int, ...]:
    n, h, w, c = _rank(a, 0, 4, "input")
    out, fh, fw, fc = _rank(a, 1, 4, "filter")
    (bias,) = _rank(a, 2, 1, "bias")
    if fc != c:
        raise BadDataError(f"{a.where}: filter depth {fc} does not match input depth {c}")
    if bias != out:
        raise BadDataError(f"{a.where}: bias has {bias} elements, filter has {out} outputs")
    left, right, top, bottom, stride_w, stride_h = (a.scalar(i) for i in range(3, 9))
    for i, value in zip(range(3, 7), (left, right, top, bottom)):
        if value < 0:
            raise BadDataError(f"{a.where}: padding (input {i}) must be >= 0, got {value}")
    for i, value in ((7, stride_w), (8, stride_h)):
        if value < 1:
            raise BadDataError(f"{a.where}: stride (input {i}) must be >= 1, got {value}")
    if h + top + bottom < fh or w + left + right < fw:
        raise BadDataError(
            f"{a.where}: filter {fh}x{fw} is larger than the padded input {h + top + bottom}x{w + left + right}"
        )
    _fuse(a, 9)
    oh = (h + top + bottom - fh) // stride_h + 1
    ow = (w + left + right - fw) // stride_w + 1
    return (n, oh, ow, out)


def _relu(a: _Args) -> tuple[int, ...]:
    return a.dims[0]


def _softmax(a: _Args) -> tuple[int, ...]:
    dims = _rank(a, 0, 2, "input")
    beta = a.scalar(1)
    if not (beta > 0 and math.isfinite(beta)):
        raise BadDataError(f"{a.where}: beta must be a finite number > 0, got {beta}")
    return dims


_INFER = {
    OperationType.ADD: _same_shape,
    OperationType.SUB: _same_shape,
    OperationType.MUL: _same_shape,
    OperationType.FULLY_CONNECTED: _fully_connected,
    OperationType.CONV_2D: _conv_2d,
    OperationType.RELU: _relu,
    OperationType.SOFTMAX: _softmax,
}


def _merge(where: str, declared: tuple[int, ...], inferred: tuple[int, ...]) -> tuple[int, ...]:
    """An output's declared dims may leave the rank (``()``) or some dims (0) open."""
    if not declared:
        return inferred
    if len(declared) != len(inferred) or any(d not in (0, i) for d, i in zip(declared, inferred)):
        raise BadDataError(f"{where}: output declared as {list(declared)}, but the operation gives {list(inferred)}")
    return inferred


def validateModel(model: HalModel) -> HalModel:
    """Check every rule of a HAL model (the module's list); return it with output dimensions inferred.

    An output whose shape depends on what is not known before execution (an input of
    unspecified dimensions, a shape read from a model input) keeps the dimensions it was
    declared with.
    """
    operands = model.operands
    count = len(operands)
    if not count:
        raise BadDataError("the model has no operands")

    for i, o in enumerate(operands):
        where = f"operand {i}"
        checkOperandType(where, o.type, o.dimensions, o.scale, o.zeroPoint)
        checkChannelQuant(where, o)
        if o.lifetime in _CONSTANTS:
            size = expectedByteSize(o)
            if size is None:
                raise BadDataError(f"{where}: a constant needs fully specified dimensions, got {list(o.dimensions)}")
            model.constantBytes(i)  # raises if the location is outside its buffer
            if o.location.length != size:
                raise BadDataError(
                    f"{where}: value is {o.location.length} bytes, {o.type.name} {list(o.dimensions)} needs {size}"
                )
        elif o.location != DataLocation():
            raise BadDataError(f"{where}: a {o.lifetime.name} operand has no location, got {o.location}")

    for name, indexes, lifetime in (
        ("inputIndexes", model.inputIndexes, OperandLifeTime.SUBGRAPH_INPUT),
        ("outputIndexes", model.outputIndexes, OperandLifeTime.SUBGRAPH_OUTPUT),
    ):
        for index in indexes:
            if not 0 <= index < count:
                raise BadDataError(f"{name}: operand {index} does not exist ({count} operands)")
            if operands[index].lifetime != lifetime:
                raise BadDataError(f"{name}: operand {index} is {operands[index].lifetime.name}, not {lifetime.name}")
        if len(set(indexes)) != len(indexes):
            raise BadDataError(f"{name} lists an operand twice: {list(indexes)}")
        listed = set(indexes)
        for i, o in enumerate(operands):
            if o.lifetime == lifetime and i not in listed:
                raise BadDataError(f"operand {i} is {lifetime.name} but not in {name}")
    if not model.outputIndexes:
        raise BadDataError("the model has no outputs")
    if not model.operations:
        raise BadDataError("the model has no operations")

    known = list(operands)  # each operand with the dimensions known so far
    written = [o.lifetime in _CONSTANTS or o.lifetime == OperandLifeTime.SUBGRAPH_INPUT for o in operands]
    for k, op in enumerate(model.operations):
        where = f"operation {k} ({op.type.name})"
        for kind, indexes in (("input", op.inputs), ("output", op.outputs)):
            for index in indexes:
                if not 0 <= index < count:
                    raise BadDataError(f"{where}: {kind} operand {index} does not exist ({count} operands)")
        for position, index in enumerate(op.inputs):
            if not written[index] and operands[index].lifetime != OperandLifeTime.NO_VALUE:
                raise BadDataError(
                    f"{where}: input {position} reads operand {index} before any operation writes it "
                    "(operations must be in run order, and every temporary written)"
                )
        if len(set(op.outputs)) != len(op.outputs):
            raise BadDataError(f"{where}: output operands repeat: {list(op.outputs)}")
        for index in op.outputs:
            o = operands[index]
            if o.lifetime not in (OperandLifeTime.TEMPORARY_VARIABLE, OperandLifeTime.SUBGRAPH_OUTPUT):
                raise BadDataError(f"{where}: cannot write operand {index}, a {o.lifetime.name}")
            if written[index]:
                raise BadDataError(f"{where}: operand {index} is already the output of another operation")
        inputs = [
            (known[i], model.constantBytes(i) if operands[i].lifetime in _CONSTANTS else None) for i in op.inputs
        ]
        shapes = operationShapes(where, op.type, inputs, [known[i] for i in op.outputs])
        for index, shape in zip(op.outputs, shapes, strict=True):
            if shape is not None and tuple(shape) != tuple(known[index].dimensions):
                known[index] = known[index].replace(dimensions=list(shape))
            written[index] = True

    for index in model.outputIndexes:
        if not written[index]:
            raise BadDataError(f"model output operand {index} is written by no operation")
    for i, o in enumerate(operands):
        if o.lifetime == OperandLifeTime.TEMPORARY_VARIABLE and not written[i]:
            raise BadDataError(f"operand {i} is a TEMPORARY_VARIABLE no operation writes")

    if all(a is b for a, b in zip(known, operands, strict=True)):
        return model
    return dataclasses.replace(model, main=model.main.replace(operands=known))
