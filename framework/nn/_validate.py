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
from collections.abc import Sequence

from interfaces.android.hardware.neuralnetworks import DataLocation, Operand

from ._errors import BadDataError
from ._hal import HalModel
from ._signature import checkOperation
from ._types import OperandLifeTime, OperandType, dtypeOf, isScalar

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
        shapes = checkOperation(where, op.type, inputs, [known[i] for i in op.outputs])
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
