"""The graph rules of a HAL model, and shape inference for every operation.

One function, :func:`validateModel`, decides whether a :class:`HalModel` is well formed,
and answers with the same model with every operation output's dimensions filled in.
The model builder calls it from ``finish()``; the HAL side can call it on a model that
arrived over the binder; the partitioner relies on what it guarantees. Everything it
refuses is ``BadDataError`` with a message naming the operand or operation, because the
person reading it is debugging a model they built.

Operation signatures, as NNAPI defines them (float32 only):

============  ==========================================================================
ADD/SUB/MUL   (a, b same shape, fuse INT32) -> same shape
FULLY_        (input [batch, in], weights [units, in], bias [units], fuse) -> [batch, units]
CONNECTED
CONV_2D       (input NHWC [n,h,w,c], filter [out,fh,fw,c], bias [out], pad_left, pad_right,
              pad_top, pad_bottom, stride_w, stride_h, fuse) -> [n, oh, ow, out] with
              oh = (h + pad_top + pad_bottom - fh) // stride_h + 1, likewise ow
RELU          (input) -> same shape
SOFTMAX       (input [batch, n], beta FLOAT32 > 0) -> same shape
============  ==========================================================================

npuemu requires every scalar parameter (fuse codes, paddings, strides, beta) to be a
constant. NNAPI allows a model input there, but output shapes would then be unknown
until execution, and no driver of the emulated hardware can plan memory for that.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable, Sequence

from interfaces.android.hardware.neuralnetworks import Operand

from ._errors import BadDataError
from ._hal import HalModel
from ._types import FuseCode, OperandLifeTime, OperandType, OperationType, dtypeOf, isScalar

_T = OperandType.TENSOR_FLOAT32
_I = OperandType.INT32
_F = OperandType.FLOAT32

#: Input and output operand types of each operation, in NNAPI's order.
SIGNATURES = types.MappingProxyType(
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

_CONSTANTS = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_POOL)


def checkSignature(
    where: str, opType: OperationType, inputTypes: Sequence[OperandType], outputTypes: Sequence[OperandType]
) -> None:
    """Counts and operand types of one operation; ``where`` names it in the error."""
    expectedIn, expectedOut = SIGNATURES[opType]
    if len(inputTypes) != len(expectedIn):
        raise BadDataError(f"{where}: {opType.name} takes {len(expectedIn)} inputs, got {len(inputTypes)}")
    if len(outputTypes) != len(expectedOut):
        raise BadDataError(f"{where}: {opType.name} has {len(expectedOut)} output(s), got {len(outputTypes)}")
    for kind, got, expected in (("input", inputTypes, expectedIn), ("output", outputTypes, expectedOut)):
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if g != e:
                raise BadDataError(f"{where}: {opType.name} {kind} {i} must be {e.name}, got {OperandType(g).name}")


def expectedByteSize(operand: Operand) -> int | None:
    """Bytes of a fully specified operand; ``None`` while a dimension is unknown."""
    if isScalar(operand.type):
        return dtypeOf(operand.type).itemsize
    if not operand.dimensions or 0 in operand.dimensions:
        return None
    return math.prod(operand.dimensions) * dtypeOf(operand.type).itemsize


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
    """Check every rule of a HAL model; return it with output dimensions inferred.

    Raises ``BadDataError`` for: an operand of a scalar type with dimensions, a negative
    dimension, a QUANT8 operand (npuemu carries no scale/zero point), a constant whose
    location lies outside its buffer or whose length is not its size; input/output
    indexes out of range, repeated, or whose lifetime disagrees; no outputs or no
    operations; an operation with the wrong number or types of operands, reading an
    operand nothing has written yet (or NO_VALUE), a non-constant scalar parameter,
    writing a constant, an input, or an operand another operation already wrote, or
    shapes the operation cannot take; an output nothing writes.
    """
    operands = model.operands
    count = len(operands)
    dims = [tuple(o.dimensions) for o in operands]

    for i, o in enumerate(operands):
        where = f"operand {i}"
        if o.type == OperandType.TENSOR_QUANT8_ASYMM:
            raise BadDataError(f"{where}: TENSOR_QUANT8_ASYMM needs a scale and zero point; npuemu models are float32")
        if isScalar(o.type) and o.dimensions:
            raise BadDataError(f"{where}: a {o.type.name} scalar has no dimensions, got {list(o.dimensions)}")
        if any(d < 0 for d in o.dimensions):
            raise BadDataError(f"{where}: negative dimension in {list(o.dimensions)}")
        if o.lifetime in _CONSTANTS:
            size = expectedByteSize(o)
            if size is None:
                raise BadDataError(f"{where}: a constant needs fully specified dimensions, got {list(o.dimensions)}")
            model.constantBytes(i)  # raises if the location is outside its buffer
            if o.location.length != size:
                raise BadDataError(f"{where}: value is {o.location.length} bytes, {o.type.name} {list(o.dimensions)} needs {size}")

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
    for index in model.inputIndexes:
        o = operands[index]
        if expectedByteSize(o) is None:
            raise BadDataError(f"model input operand {index} needs fully specified dimensions, got {list(o.dimensions)}")
    if not model.outputIndexes:
        raise BadDataError("the model has no outputs")
    if not model.operations:
        raise BadDataError("the model has no operations")

    written = [o.lifetime in _CONSTANTS or o.lifetime == OperandLifeTime.SUBGRAPH_INPUT for o in operands]

    def scalar_of(where: str, inputs: tuple[int, ...]) -> Callable[[int], int | float]:
        def scalar(position: int) -> int | float:
            return model.constantArray(inputs[position]).item()

        return scalar

    for k, op in enumerate(model.operations):
        where = f"operation {k} ({op.type.name})"
        for kind, indexes in (("input", op.inputs), ("output", op.outputs)):
            for index in indexes:
                if not 0 <= index < count:
                    raise BadDataError(f"{where}: {kind} operand {index} does not exist ({count} operands)")
        checkSignature(where, op.type, [operands[i].type for i in op.inputs], [operands[i].type for i in op.outputs])
        for position, index in enumerate(op.inputs):
            o = operands[index]
            if o.lifetime == OperandLifeTime.NO_VALUE:
                raise BadDataError(f"{where}: input {position} (operand {index}) has no value, and is not optional")
            if not written[index]:
                raise BadDataError(
                    f"{where}: input {position} reads operand {index} before any operation writes it "
                    "(operations must be in run order, and every temporary written)"
                )
            if isScalar(o.type) and o.lifetime not in _CONSTANTS:
                raise BadDataError(f"{where}: scalar input {position} (operand {index}) must be a constant")
        for index in op.outputs:
            o = operands[index]
            if o.lifetime not in (OperandLifeTime.TEMPORARY_VARIABLE, OperandLifeTime.SUBGRAPH_OUTPUT):
                raise BadDataError(f"{where}: cannot write operand {index}, a {o.lifetime.name}")
            if written[index]:
                raise BadDataError(f"{where}: operand {index} is already the output of another operation")
        args = _Args(where, tuple(dims[i] for i in op.inputs), scalar_of(where, op.inputs))
        inferred = _INFER[op.type](args)
        for index in op.outputs:
            dims[index] = _merge(f"{where}, operand {index}", operands[index].dimensions, inferred)
            written[index] = True

    for index in model.outputIndexes:
        if not written[index]:
            raise BadDataError(f"model output operand {index} is written by no operation")

    if dims == [tuple(o.dimensions) for o in operands]:
        return model
    inferred = [o.replace(dimensions=list(d)) for o, d in zip(operands, dims, strict=True)]
    return dataclasses.replace(model, main=model.main.replace(operands=inferred))
