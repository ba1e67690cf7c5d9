"""The TFLite importer: see :mod:`framework.nn.tflite`, its public face."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tflite as _fb
import trio

from interfaces.android.hardware.neuralnetworks import SymmPerChannelQuantParams

from . import _cpu_kernels
from ._errors import BadDataError, BadStateError
from ._model import Model
from ._types import NO_DURATION, DurationCode, FuseCode, OperandType, OperationType

__all__ = [
    "MODELS_DIR_ENV", "CompiledTfLite", "Partition", "PartitionTiming", "TfLiteModel", "TfLiteOperation", "TfLiteTensor",
    "densify", "findModel", "loadTfLite", "modelsDir", "syntheticImage",
]

_BUILTIN_NAMES = {v: k for k, v in vars(_fb.BuiltinOperator).items() if not k.startswith("_")}
_TYPE_NAMES = {v: k for k, v in vars(_fb.TensorType).items() if not k.startswith("_")}
_DTYPES = {
    _fb.TensorType.FLOAT32: np.dtype("<f4"),
    _fb.TensorType.FLOAT16: np.dtype("<f2"),
    _fb.TensorType.INT32: np.dtype("<i4"),
    _fb.TensorType.UINT8: np.dtype("u1"),
    _fb.TensorType.INT8: np.dtype("i1"),
    _fb.TensorType.INT64: np.dtype("<i8"),
    _fb.TensorType.BOOL: np.dtype("?"),
    _fb.TensorType.INT16: np.dtype("<i2"),
}

# TFLite's Padding (schema: SAME = 0, VALID = 1) to NNAPI's implicit padding scheme.
_PADDING_SAME, _PADDING_VALID = 1, 2
_NNAPI_PADDING = {_fb.Padding.SAME: _PADDING_SAME, _fb.Padding.VALID: _PADDING_VALID}
# TFLite's ActivationFunctionType to NNAPI's FuseCode: NONE, RELU, RELU_N1_TO_1, RELU6
# have the same numbers; TANH and SIGN_BIT have no NNAPI fuse code.
_FUSE = {0: FuseCode.NONE, 1: FuseCode.RELU, 2: FuseCode.RELU1, 3: FuseCode.RELU6}
_ACTIVATION_NAMES = {v: k for k, v in vars(_fb.ActivationFunctionType).items() if not k.startswith("_")}

#: NNAPI's feature level the delegate's rules are applied for (Android 10).
FEATURE_LEVEL = 29


# ---- the parsed graph -----------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class TfLiteTensor:
    """One tensor of the model: its shape, element type, quantization and constant value."""

    index: int
    name: str
    shape: tuple[int, ...]
    type: str  # TFLite's TensorType name: FLOAT32, FLOAT16, INT8 ...
    dtype: np.dtype
    scales: tuple[float, ...] = ()
    zeroPoints: tuple[int, ...] = ()
    quantizedDimension: int = 0
    value: np.ndarray | None = None  # a constant (after folding: float16 weights dequantized)
    sparse: Any = None  # the schema's SparsityParameters of a sparse constant

    @property
    def isConstant(self) -> bool:
        return self.value is not None

    @property
    def isPerChannel(self) -> bool:
        return len(self.scales) > 1


@dataclasses.dataclass(slots=True)
class TfLiteOperation:
    """One operator of the model and the decision about it.

    ``where`` is ``"nnapi"`` (delegated), ``"cpu"`` (this module's kernel) or
    ``"folded"`` (a constant computed at load); ``reason`` says why it is not delegated.
    """

    index: int
    name: str  # the builtin's name, or the custom operation's
    version: int
    inputs: tuple[int, ...]  # tensor indexes, -1 for an omitted optional input
    outputs: tuple[int, ...]
    options: Any  # the schema's options table, or the custom options' bytes
    where: str = ""
    reason: str = ""


@dataclasses.dataclass(slots=True)
class Partition:
    """Operations that run together: one NNAPI model, or one CPU kernel."""

    index: int
    kind: str  # "nnapi" or "cpu"
    operations: tuple[int, ...]
    inputs: tuple[int, ...]  # tensors read from outside the partition, in first-read order
    outputs: tuple[int, ...]  # tensors written here that others (or the app) read
    model: Model | None = None  # the NNAPI model of an "nnapi" partition
    #: per NNAPI operation of ``model`` (the index ``addOperation`` returned), its TFLite operation
    sources: tuple[int, ...] = ()

    def label(self, ops: Sequence[TfLiteOperation]) -> str:
        names: dict[str, int] = {}
        for k in self.operations:
            names[ops[k].name] = names.get(ops[k].name, 0) + 1
        return ", ".join(f"{n} x{c}" if c > 1 else n for n, c in names.items())


def _read_buffer(model: Any, tensor: Any, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray | None:
    buffer = model.Buffers(tensor.Buffer())
    if buffer is None:
        return None
    if buffer.Offset() > 1:  # the data lives after the flatbuffer (models over 2 GB)
        raise BadDataError("loadTfLite: tensor data outside the flatbuffer (a >2 GB model) is not supported")
    if buffer.DataLength() == 0:
        return None
    raw = buffer.DataAsNumpy().tobytes()
    if dtype.itemsize and len(raw) % dtype.itemsize:
        raise BadDataError(f"loadTfLite: tensor {tensor.Name().decode()!r}: {len(raw)} bytes is not a whole number of {dtype}")
    array = np.frombuffer(raw, dtype=dtype)
    if tensor.Sparsity() is None:
        if array.size != int(np.prod(shape, dtype=np.int64)):
            raise BadDataError(
                f"loadTfLite: tensor {tensor.Name().decode()!r} has {array.size} values for shape {list(shape)}")
        array = array.reshape(shape)
    return array


def _options(op: Any, name: str) -> Any:
    """The operator's builtin options table, as the schema's class for its type."""
    table = op.BuiltinOptions()
    if table is None:
        return None
    kind = op.BuiltinOptionsType()
    names = {v: k for k, v in vars(_fb.BuiltinOptions).items() if not k.startswith("_")}
    cls = getattr(_fb, names.get(kind, ""), None)
    if cls is None:
        raise BadDataError(f"loadTfLite: operation {name}: unknown options type {kind}")
    options = cls()
    options.Init(table.Bytes, table.Pos)
    return options


def _parse(data: bytes) -> tuple[list[TfLiteTensor], list[TfLiteOperation], tuple[int, ...], tuple[int, ...]]:
    if len(data) < 8 or not _fb.Model.ModelBufferHasIdentifier(data, 0):
        raise BadDataError("loadTfLite: not a TFLite flatbuffer (no 'TFL3' identifier)")
    try:
        model = _fb.Model.GetRootAsModel(data, 0)
        if model.SubgraphsLength() < 1:
            raise BadDataError("loadTfLite: the model has no subgraph")
        graph = model.Subgraphs(0)
        tensors = []
        for i in range(graph.TensorsLength()):
            t = graph.Tensors(i)
            if t.Type() not in _DTYPES:
                raise BadDataError(f"loadTfLite: tensor {i} has type {_TYPE_NAMES.get(t.Type(), t.Type())}, not supported")
            dtype = _DTYPES[t.Type()]
            shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
            q = t.Quantization()
            scales: tuple[float, ...] = ()
            zeros: tuple[int, ...] = ()
            qdim = 0
            if q is not None and q.ScaleLength():
                scales = tuple(float(s) for s in q.ScaleAsNumpy())
                zeros = tuple(int(z) for z in q.ZeroPointAsNumpy()) if q.ZeroPointLength() else (0,) * len(scales)
                qdim = q.QuantizedDimension()
            tensors.append(TfLiteTensor(
                index=i, name=t.Name().decode(errors="replace"), shape=shape, type=_TYPE_NAMES[t.Type()],
                dtype=dtype, scales=scales, zeroPoints=zeros, quantizedDimension=qdim,
                value=_read_buffer(model, t, dtype, shape), sparse=t.Sparsity(),
            ))
        operations = []
        for k in range(graph.OperatorsLength()):
            op = graph.Operators(k)
            if op.OpcodeIndex() >= model.OperatorCodesLength():
                raise BadDataError(f"loadTfLite: operation {k} names operator code {op.OpcodeIndex()}, which does not exist")
            code = model.OperatorCodes(op.OpcodeIndex())
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            if builtin == _fb.BuiltinOperator.CUSTOM:
                name = (code.CustomCode() or b"").decode(errors="replace")
                options: Any = bytes(op.CustomOptionsAsNumpy()) if op.CustomOptionsLength() else b""
            else:
                name = _BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}")
                options = _options(op, name)
            ins = tuple(int(i) for i in op.InputsAsNumpy()) if op.InputsLength() else ()
            outs = tuple(int(i) for i in op.OutputsAsNumpy()) if op.OutputsLength() else ()
            for i in (*ins, *outs):
                if not -1 <= i < len(tensors):
                    raise BadDataError(f"loadTfLite: operation {k} ({name}) names tensor {i}, which does not exist")
            operations.append(TfLiteOperation(k, name, code.Version(), ins, outs, options,
                                              where="custom" if builtin == _fb.BuiltinOperator.CUSTOM else ""))
        inputs = tuple(int(i) for i in graph.InputsAsNumpy()) if graph.InputsLength() else ()
        outputs = tuple(int(i) for i in graph.OutputsAsNumpy()) if graph.OutputsLength() else ()
    except BadDataError:
        raise
    except Exception as e:  # a truncated or corrupt flatbuffer: the accessors read out of range
        raise BadDataError(f"loadTfLite: a malformed flatbuffer ({type(e).__name__}: {e})") from None
    for i in (*inputs, *outputs):
        if not 0 <= i < len(tensors):
            raise BadDataError(f"loadTfLite: the model's inputs or outputs name tensor {i}, which does not exist")
    return tensors, operations, inputs, outputs


# ---- constant folding ---------------------------------------------------------------------


def _sparse_index_vector(kind: int, table: Any) -> np.ndarray:
    classes = {
        _fb.SparseIndexVector.Int32Vector: _fb.Int32Vector,
        _fb.SparseIndexVector.Uint16Vector: _fb.Uint16Vector,
        _fb.SparseIndexVector.Uint8Vector: _fb.Uint8Vector,
    }
    if kind not in classes or table is None:
        raise BadDataError(f"DENSIFY: sparse index vector type {kind} is not known")
    vector = classes[kind]()
    vector.Init(table.Bytes, table.Pos)
    return vector.ValuesAsNumpy().astype(np.int64) if vector.ValuesLength() else np.zeros(0, np.int64)


def densify(values: np.ndarray, shape: tuple[int, ...], sparsity: Any) -> np.ndarray:
    """The dense tensor of a sparse constant (TFLite's sparsity format, without blocks).

    Each dimension is DENSE (every index present) or SPARSE_CSR (``array_segments``
    give each parent's range in ``array_indices``); values are stored in traversal
    order, which must be the plain order of the dimensions.
    """
    order = sparsity.TraversalOrderAsNumpy().tolist() if sparsity.TraversalOrderLength() else list(range(len(shape)))
    if order != list(range(len(shape))) or sparsity.BlockMapLength():
        raise BadDataError("DENSIFY: only sparse tensors without blocks, in plain dimension order, are supported")
    if sparsity.DimMetadataLength() != len(shape):
        raise BadDataError(f"DENSIFY: {sparsity.DimMetadataLength()} dimension descriptions for a rank-{len(shape)} tensor")
    positions = np.zeros(1, np.int64)
    coords: list[np.ndarray] = []
    for d in range(len(shape)):
        meta = sparsity.DimMetadata(d)
        if meta.Format() == _fb.DimensionType.DENSE:
            n = meta.DenseSize()
            if n != shape[d]:
                raise BadDataError(f"DENSIFY: dimension {d} is dense with {n} entries, the shape says {shape[d]}")
            coords = [np.repeat(c, n) for c in coords] + [np.tile(np.arange(n), positions.size)]
            positions = (positions[:, None] * n + np.arange(n)).ravel()
        else:
            segments = _sparse_index_vector(meta.ArraySegmentsType(), meta.ArraySegments())
            indices = _sparse_index_vector(meta.ArrayIndicesType(), meta.ArrayIndices())
            if positions.size and (positions.max() + 1 >= segments.size):
                raise BadDataError(f"DENSIFY: dimension {d}'s segments are too few")
            starts, ends = segments[positions], segments[positions + 1]
            counts = ends - starts
            if (counts < 0).any() or (ends.size and ends.max() > indices.size):
                raise BadDataError(f"DENSIFY: dimension {d}'s segments are not ordered within its indices")
            children = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if counts.sum() else np.zeros(0, np.int64)
            coords = [np.repeat(c, counts) for c in coords] + [indices[children]]
            if coords[-1].size and (coords[-1].min() < 0 or coords[-1].max() >= shape[d]):
                raise BadDataError(f"DENSIFY: an index of dimension {d} is outside 0..{shape[d] - 1}")
            positions = children
    if positions.size != values.size:
        raise BadDataError(f"DENSIFY: the sparse structure names {positions.size} values, the buffer holds {values.size}")
    dense = np.zeros(shape, dtype=values.dtype)
    dense[tuple(coords)] = values
    return dense


def _dequantized(tensor: TfLiteTensor, value: np.ndarray) -> np.ndarray:
    """A constant's float32 value (float16 converted, int8/uint8 scaled), as DEQUANTIZE computes."""
    if value.dtype == np.float16:
        return value.astype(np.float32)
    if value.dtype.kind in "iu" and tensor.scales:
        scales = np.asarray(tensor.scales, np.float32)
        zeros = np.asarray(tensor.zeroPoints, np.float32)
        if tensor.isPerChannel:
            shape = [1] * value.ndim
            shape[tensor.quantizedDimension] = -1
            scales, zeros = scales.reshape(shape), zeros.reshape(shape)
        return ((value.astype(np.float32) - zeros) * scales).astype(np.float32)
    raise BadDataError(f"DEQUANTIZE: tensor {tensor.name!r} of type {tensor.type} without quantization")


def _fold(tensors: list[TfLiteTensor], ops: list[TfLiteOperation]) -> None:
    """Compute at load what only depends on constants: DEQUANTIZE and DENSIFY of weights."""
    for op in ops:
        if op.name not in ("DEQUANTIZE", "DENSIFY") or len(op.inputs) != 1 or len(op.outputs) != 1:
            continue
        source, target = tensors[op.inputs[0]], tensors[op.outputs[0]]
        if source.value is None:
            continue
        value = source.value
        if source.sparse is not None:
            if op.name != "DENSIFY":
                continue
            value = densify(value, source.shape, source.sparse)
        if op.name == "DEQUANTIZE":
            value = _dequantized(source, value)
        if value.shape != target.shape:
            raise BadDataError(f"{op.name} {op.index}: the folded value has shape {list(value.shape)}, "
                               f"the output tensor {list(target.shape)}")
        target.value = np.ascontiguousarray(value, dtype=target.dtype)
        op.where, op.reason = "folded", "a constant, computed at load"


# ---- the delegate's rules for NNAPI 1.2 -------------------------------------------------------


class _Refused(Exception):
    """An operation NNAPI 1.2 cannot take as it is (the delegate's validation failed)."""


def _expect(ok: bool, why: str) -> None:
    if not ok:
        raise _Refused(why)


_FLOAT_OR_QUANT8 = frozenset({"FLOAT32", "UINT8", "INT8"})


class _Builder:
    """The NNAPI model of one partition: operands per TFLite tensor, then the operations."""

    def __init__(self, tensors: list[TfLiteTensor]) -> None:
        self.tensors = tensors
        self.model = Model()
        self.operand: dict[int, int] = {}  # TFLite tensor -> NNAPI operand

    # operands

    def tensor(self, index: int) -> int:
        if index in self.operand:
            return self.operand[index]
        t = self.tensors[index]
        value = t.value
        if t.type == "FLOAT32":
            operand = self.model.addOperand(OperandType.TENSOR_FLOAT32, t.shape)
        elif t.type == "INT32":
            scale = t.scales[0] if t.scales and len(t.scales) == 1 else 0.0
            operand = self.model.addOperand(OperandType.TENSOR_INT32, t.shape, scale=scale)
        elif t.type == "UINT8":
            operand = self.model.addOperand(OperandType.TENSOR_QUANT8_ASYMM, t.shape,
                                            scale=t.scales[0], zeroPoint=t.zeroPoints[0])
        elif t.type == "INT8" and t.isPerChannel:
            operand = self.model.addOperand(OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL, t.shape)
            self.model.setOperandSymmPerChannelQuantParams(
                operand, SymmPerChannelQuantParams(scales=list(t.scales), channelDim=t.quantizedDimension))
        elif t.type == "INT8":
            # NNAPI 1.2 has no signed asymmetric type: the delegate shifts int8 by 128.
            operand = self.model.addOperand(OperandType.TENSOR_QUANT8_ASYMM, t.shape,
                                            scale=t.scales[0], zeroPoint=t.zeroPoints[0] + 128)
            if value is not None:
                value = (value.astype(np.int16) + 128).astype(np.uint8)
        else:
            raise _Refused(f"tensor {t.name!r} is {t.type}")
        if value is not None:
            self.model.setOperandValue(operand, value)
        self.operand[index] = operand
        return operand

    def constant(self, operandType: OperandType, value: Any, shape: Sequence[int] = ()) -> int:  # noqa: N803
        operand = self.model.addOperand(operandType, shape)
        self.model.setOperandValue(operand, value)
        return operand

    def int32(self, value: int) -> int:
        return self.constant(OperandType.INT32, int(value))

    def float32(self, value: float) -> int:
        return self.constant(OperandType.FLOAT32, float(value))

    def bool(self, value: bool) -> int:
        return self.constant(OperandType.BOOL, bool(value))

    def int32s(self, values: Sequence[int]) -> int:
        array = np.asarray(values, np.int32).reshape(-1)
        return self.constant(OperandType.TENSOR_INT32, array, array.shape)

    def temporary_like(self, index: int) -> int:
        t = self.tensors[index]
        return self.model.addOperand(OperandType.TENSOR_FLOAT32, t.shape)

    def add(self, operation: OperationType, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        self.model.addOperation(operation, list(inputs), list(outputs))


def _padding(options: Any) -> int:
    padding = options.Padding()
    _expect(padding in _NNAPI_PADDING, f"padding {padding} is neither SAME nor VALID")
    return _NNAPI_PADDING[padding]


def _fuse(options: Any) -> FuseCode:
    act = options.FusedActivationFunction() if options is not None else 0
    _expect(act in _FUSE, f"fused activation {_ACTIVATION_NAMES.get(act, act)} has no NNAPI fuse code")
    return _FUSE[act]


def _const(tensors: list[TfLiteTensor], index: int, what: str) -> np.ndarray:
    _expect(index >= 0 and tensors[index].value is not None, f"the {what} must be constant")
    return tensors[index].value


def _types_ok(tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    t = tensors[op.inputs[0]]
    _expect(t.type in _FLOAT_OR_QUANT8, f"input type {t.type} (NNAPI takes float32 or quant8 here)")


def _bias(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation, units: int) -> int:
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        return b.tensor(op.inputs[2])
    _expect(tensors[op.inputs[0]].type == "FLOAT32", "a quantized operation without a bias")
    return b.constant(OperandType.TENSOR_FLOAT32, np.zeros(units, np.float32), (units,))


def _map_conv(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    o = op.options
    _types_ok(tensors, op)
    _const(tensors, op.inputs[1], "filter")
    fuse = _fuse(o)
    filt = tensors[op.inputs[1]]
    dil = (o.DilationWFactor(), o.DilationHFactor())
    units = filt.shape[3] if op.name == "DEPTHWISE_CONV_2D" else filt.shape[0]
    ins = [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), _bias(b, tensors, op, units),
           b.int32(_padding(o)), b.int32(o.StrideW()), b.int32(o.StrideH())]
    if op.name == "DEPTHWISE_CONV_2D":
        in_c, out_c = tensors[op.inputs[0]].shape[3], filt.shape[3]
        _expect(in_c > 0 and out_c % in_c == 0, "the output channels are not a multiple of the input channels")
        ins.append(b.int32(out_c // in_c))
    ins.append(b.int32(fuse))
    if dil != (1, 1):
        ins += [b.bool(False), b.int32(dil[0]), b.int32(dil[1])]
    kind = OperationType.CONV_2D if op.name == "CONV_2D" else OperationType.DEPTHWISE_CONV_2D
    b.add(kind, ins, [b.tensor(op.outputs[0])])


def _map_pool(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    o = op.options
    _types_ok(tensors, op)
    _expect(len(tensors[op.inputs[0]].shape) == 4, "the input is not rank 4")
    kind = {"AVERAGE_POOL_2D": OperationType.AVERAGE_POOL_2D, "MAX_POOL_2D": OperationType.MAX_POOL_2D}[op.name]
    b.add(kind, [b.tensor(op.inputs[0]), b.int32(_padding(o)), b.int32(o.StrideW()),
                 b.int32(o.StrideH()), b.int32(o.FilterWidth()), b.int32(o.FilterHeight()), b.int32(_fuse(o))],
          [b.tensor(op.outputs[0])])


def _map_binary(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    _expect(all(len(tensors[i].shape) <= 4 for i in op.inputs[:2]), "an input's rank is over 4")
    kind = {"ADD": OperationType.ADD, "MUL": OperationType.MUL, "SUB": OperationType.SUB,
            "DIV": OperationType.DIV}[op.name]
    if op.name in ("SUB", "DIV"):
        _expect(tensors[op.inputs[0]].type == "FLOAT32", f"NNAPI 1.2 runs {op.name} on float32 only here")
    b.add(kind, [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), b.int32(_fuse(op.options))],
          [b.tensor(op.outputs[0])])


def _map_unary(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    kind = {"RELU": OperationType.RELU, "RELU6": OperationType.RELU6, "RELU_N1_TO_1": OperationType.RELU1,
            "LOGISTIC": OperationType.LOGISTIC, "TANH": OperationType.TANH}[op.name]
    b.add(kind, [b.tensor(op.inputs[0])], [b.tensor(op.outputs[0])])


def _map_hard_swish(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    # NNAPI 1.2 has no HARD_SWISH: x * relu6(x + 3) / 6 == 0.5x * relu1(x / 3) + 0.5x.
    _expect(tensors[op.inputs[0]].type == "FLOAT32", "HARD_SWISH is lowered for float32 only")
    x = b.tensor(op.inputs[0])
    third = b.temporary_like(op.inputs[0])
    half = b.temporary_like(op.inputs[0])
    product = b.temporary_like(op.inputs[0])
    one = (1,)
    b.add(OperationType.MUL, [x, b.constant(OperandType.TENSOR_FLOAT32, np.full(one, 1 / 3, np.float32), one),
                              b.int32(FuseCode.RELU1)], [third])
    b.add(OperationType.MUL, [x, b.constant(OperandType.TENSOR_FLOAT32, np.full(one, 0.5, np.float32), one),
                              b.int32(FuseCode.NONE)], [half])
    b.add(OperationType.MUL, [third, half, b.int32(FuseCode.NONE)], [product])
    b.add(OperationType.ADD, [product, half, b.int32(FuseCode.NONE)], [b.tensor(op.outputs[0])])


def _map_fully_connected(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    o = op.options
    _types_ok(tensors, op)
    _expect(o is None or o.WeightsFormat() == _fb.FullyConnectedOptionsWeightsFormat.DEFAULT,
            "shuffled weights")
    weights = tensors[op.inputs[1]]
    out = tensors[op.outputs[0]]
    _expect(len(weights.shape) == 2, "the weights are not rank 2")
    _expect(len(out.shape) == 2, "keep_num_dims with an output of rank over 2")
    b.add(OperationType.FULLY_CONNECTED,
          [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), _bias(b, tensors, op, weights.shape[0]),
           b.int32(_fuse(o))], [b.tensor(op.outputs[0])])


def _map_mean(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    axes = _const(tensors, op.inputs[1], "axis")
    b.add(OperationType.MEAN, [b.tensor(op.inputs[0]), b.int32s(axes), b.int32(1 if op.options.KeepDims() else 0)],
          [b.tensor(op.outputs[0])])


def _map_pad(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    _expect(0 not in tensors[op.inputs[0]].shape, "the input has no elements")
    paddings = _const(tensors, op.inputs[1], "paddings")
    ins = [b.tensor(op.inputs[0]), b.constant(OperandType.TENSOR_INT32, paddings.astype(np.int32), paddings.shape)]
    kind = OperationType.PAD
    if op.name == "PADV2" and len(op.inputs) > 2:
        _expect(tensors[op.inputs[0]].type == "FLOAT32", "PADV2 is mapped for float32 only")
        ins.append(b.float32(float(_const(tensors, op.inputs[2], "pad value").reshape(-1)[0])))
        kind = OperationType.PAD_V2
    b.add(kind, ins, [b.tensor(op.outputs[0])])


def _map_reshape(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    if len(op.inputs) > 1 and op.inputs[1] >= 0:
        _const(tensors, op.inputs[1], "shape")
    out = tensors[op.outputs[0]]
    _expect(len(out.shape) > 0, "a reshape to a scalar")
    b.add(OperationType.RESHAPE, [b.tensor(op.inputs[0]), b.int32s(out.shape)], [b.tensor(op.outputs[0])])


def _map_concatenation(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    _expect(_fuse(op.options) == FuseCode.NONE, "a fused activation on CONCATENATION")
    rank = len(tensors[op.inputs[0]].shape)
    _expect(rank <= 4, "the input's rank is over 4")
    axis = op.options.Axis()
    b.add(OperationType.CONCATENATION, [*(b.tensor(i) for i in op.inputs), b.int32(axis + rank if axis < 0 else axis)],
          [b.tensor(op.outputs[0])])


def _map_resize_bilinear(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    _expect(len(tensors[op.inputs[0]].shape) == 4, "the input is not rank 4")
    _const(tensors, op.inputs[1], "size")
    o = op.options
    _expect(not o.AlignCorners(), "align_corners needs NNAPI 1.3 (feature level 30)")
    _expect(not o.HalfPixelCenters(), "half_pixel_centers needs NNAPI 1.3 (feature level 30)")
    out = tensors[op.outputs[0]].shape
    b.add(OperationType.RESIZE_BILINEAR, [b.tensor(op.inputs[0]), b.int32(out[2]), b.int32(out[1])],
          [b.tensor(op.outputs[0])])


def _map_prelu(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    b.add(OperationType.PRELU, [b.tensor(op.inputs[0]), b.tensor(op.inputs[1])], [b.tensor(op.outputs[0])])


def _map_strided_slice(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    o = op.options
    _types_ok(tensors, op)
    _expect(o.EllipsisMask() == 0 and o.NewAxisMask() == 0, "an ellipsis or new-axis mask")
    _expect(not o.Offset(), "offset mode")
    ins = [b.tensor(op.inputs[0])]
    for i, what in zip(op.inputs[1:4], ("begin", "end", "strides")):
        ins.append(b.int32s(_const(tensors, i, what)))
    ins += [b.int32(o.BeginMask()), b.int32(o.EndMask()), b.int32(o.ShrinkAxisMask())]
    b.add(OperationType.STRIDED_SLICE, ins, [b.tensor(op.outputs[0])])


def _map_depth_to_space(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    kind = OperationType.DEPTH_TO_SPACE if op.name == "DEPTH_TO_SPACE" else OperationType.SPACE_TO_DEPTH
    b.add(kind, [b.tensor(op.inputs[0]), b.int32(op.options.BlockSize())], [b.tensor(op.outputs[0])])


def _map_softmax(b: _Builder, tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    _types_ok(tensors, op)
    b.add(OperationType.SOFTMAX, [b.tensor(op.inputs[0]), b.float32(op.options.Beta())], [b.tensor(op.outputs[0])])


_MAPPERS: dict[str, Callable[[_Builder, list[TfLiteTensor], TfLiteOperation], None]] = {
    "CONV_2D": _map_conv,
    "DEPTHWISE_CONV_2D": _map_conv,
    "AVERAGE_POOL_2D": _map_pool,
    "MAX_POOL_2D": _map_pool,
    "ADD": _map_binary,
    "MUL": _map_binary,
    "SUB": _map_binary,
    "DIV": _map_binary,
    "RELU": _map_unary,
    "RELU6": _map_unary,
    "RELU_N1_TO_1": _map_unary,
    "LOGISTIC": _map_unary,
    "TANH": _map_unary,
    "HARD_SWISH": _map_hard_swish,
    "FULLY_CONNECTED": _map_fully_connected,
    "MEAN": _map_mean,
    "PAD": _map_pad,
    "PADV2": _map_pad,
    "RESHAPE": _map_reshape,
    "CONCATENATION": _map_concatenation,
    "RESIZE_BILINEAR": _map_resize_bilinear,
    "PRELU": _map_prelu,
    "STRIDED_SLICE": _map_strided_slice,
    "DEPTH_TO_SPACE": _map_depth_to_space,
    "SPACE_TO_DEPTH": _map_depth_to_space,
    "SOFTMAX": _map_softmax,
}


# ---- the CPU kernels (TFLite's reference semantics) --------------------------------------------


def _resize_bilinear(tensors: list[TfLiteTensor], op: TfLiteOperation, x: np.ndarray) -> np.ndarray:
    out_h, out_w = tensors[op.outputs[0]].shape[1:3]
    align, half = bool(op.options.AlignCorners()), bool(op.options.HalfPixelCenters())
    _, in_h, in_w, _ = x.shape

    def axis(out_size: int, in_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        scale = (in_size - 1) / (out_size - 1) if align and out_size > 1 else in_size / out_size
        o = np.arange(out_size, dtype=np.float32)
        src = ((o + 0.5) * np.float32(scale) - 0.5) if half else o * np.float32(scale)
        lo = np.maximum(np.floor(src), 0).astype(np.int64)
        hi = np.minimum(np.ceil(src), in_size - 1).astype(np.int64)
        return lo, hi, (src - lo).astype(np.float32)

    y0, y1, dy = axis(out_h, in_h)
    x0, x1, dx = axis(out_w, in_w)
    dy, dx = dy[None, :, None, None], dx[None, None, :, None]
    # across each input row first (every output row's top and bottom is one of them),
    # then between the two rows: the same products and sums as pixel by pixel
    across = np.take(x, x0, axis=2) * (1 - dx) + np.take(x, x1, axis=2) * dx
    return (np.take(across, y0, axis=1) * (1 - dy) + np.take(across, y1, axis=1) * dy).astype(np.float32, copy=False)


def _transpose_conv_bias(tensors: list[TfLiteTensor], op: TfLiteOperation, x: np.ndarray) -> np.ndarray:
    """MediaPipe's ``Convolution2DTransposeBias``: a transposed convolution plus a bias.

    Options: TFLite's ``TfLiteTransposeConvParams`` as three int32 (padding: 1 SAME,
    2 VALID; stride width; stride height). Weights are [out, kh, kw, in].
    """
    if len(op.options) < 12:
        raise BadDataError(f"Convolution2DTransposeBias {op.index}: options of {len(op.options)} bytes, need 12")
    padding, stride_w, stride_h = (int(v) for v in np.frombuffer(op.options[:12], "<i4"))
    if padding not in (1, 2) or stride_w < 1 or stride_h < 1:
        raise BadDataError(f"Convolution2DTransposeBias {op.index}: padding {padding}, strides {stride_w}x{stride_h}")
    weights = tensors[op.inputs[1]].value
    bias = tensors[op.inputs[2]].value
    n, in_h, in_w, _ = x.shape
    out_c, k_h, k_w, _ = weights.shape
    out_h, out_w = tensors[op.outputs[0]].shape[1:3]
    full = np.zeros((n, (in_h - 1) * stride_h + k_h, (in_w - 1) * stride_w + k_w, out_c), np.float32)
    for ky in range(k_h):
        for kx in range(k_w):
            contribution = x @ weights[:, ky, kx, :].T
            full[:, ky : ky + (in_h - 1) * stride_h + 1 : stride_h, kx : kx + (in_w - 1) * stride_w + 1 : stride_w] += contribution
    top = max((full.shape[1] - out_h) // 2, 0) if padding == 1 else 0
    left = max((full.shape[2] - out_w) // 2, 0) if padding == 1 else 0
    return (full[:, top : top + out_h, left : left + out_w] + bias).astype(np.float32)


def _dequantize(tensors: list[TfLiteTensor], op: TfLiteOperation, x: np.ndarray) -> np.ndarray:
    return _dequantized(tensors[op.inputs[0]], x)


_CPU_KERNELS: dict[str, Callable[[list[TfLiteTensor], TfLiteOperation, np.ndarray], np.ndarray]] = {
    "RESIZE_BILINEAR": _resize_bilinear,
    "Convolution2DTransposeBias": _transpose_conv_bias,
    "DEQUANTIZE": _dequantize,
}


def _cpu_check(tensors: list[TfLiteTensor], op: TfLiteOperation) -> None:
    if not op.inputs or op.inputs[0] < 0 or len(op.outputs) != 1 or op.outputs[0] < 0:
        raise BadDataError(f"{op.name} {op.index}: the CPU kernel takes an input and gives one output")
    if op.name == "Convolution2DTransposeBias":
        if len(op.inputs) != 3 or any(tensors[i].value is None for i in op.inputs[1:]):
            raise BadDataError(f"Convolution2DTransposeBias {op.index}: needs constant weights and bias")
        w = tensors[op.inputs[1]]
        if len(w.shape) != 4 or w.shape[3] != tensors[op.inputs[0]].shape[-1]:
            raise BadDataError(f"Convolution2DTransposeBias {op.index}: weights {list(w.shape)} do not fit the input")
    if tensors[op.inputs[0]].type not in ("FLOAT32", "FLOAT16", "INT8", "UINT8"):
        raise BadDataError(f"{op.name} {op.index}: the CPU kernel takes float32 input, not {tensors[op.inputs[0]].type}")


# ---- the model ---------------------------------------------------------------------------------


class TfLiteModel:
    """A loaded ``.tflite`` model: its tensors, operations, and how they are split."""

    def __init__(self, data: bytes, name: str = "model") -> None:
        self.name = name
        self.tensors, self.operations, self.inputs, self.outputs = _parse(data)
        _fold(self.tensors, self.operations)
        self._decide()
        self.partitions = self._partition()
        for p in self.partitions:
            if p.kind == "nnapi":
                p.model = self._build(p)

    # which operation goes where

    def _decide(self) -> None:
        unknown = sorted({op.name for op in self.operations
                          if op.where == "custom" and op.name not in _CPU_KERNELS})
        if unknown:
            raise BadDataError(f"loadTfLite: {self.name}: unknown custom operation(s) {', '.join(unknown)} "
                               "(neither NNAPI nor this runtime's CPU kernels can run them)")
        for op in self.operations:
            if op.where == "folded":
                continue
            if op.where == "custom":
                _cpu_check(self.tensors, op)
                op.where, op.reason = "cpu", "a custom operation (the NNAPI delegate takes builtins only)"
                continue
            mapper = _MAPPERS.get(op.name)
            why = "" if mapper is not None else f"{op.name} is not an NNAPI 1.2 operation"
            if mapper is not None:
                try:
                    _expect(all(i < 0 or self.tensors[i].type != "FLOAT16" or self.tensors[i].value is not None
                                for i in op.inputs), "a float16 tensor computed at run time")
                    mapper(_Builder(self.tensors), self.tensors, op)
                except _Refused as e:
                    why = str(e)
                except BadDataError as e:  # NNAPI's own checks refused what the mapper built
                    why = str(e)
                except (IndexError, AttributeError, TypeError, ValueError) as e:  # too few inputs, no options...
                    raise BadDataError(f"loadTfLite: {self.name}: operation {op.index} ({op.name}) is malformed: "
                                       f"{type(e).__name__}: {e}") from None
            if not why:
                op.where = "nnapi"
            elif op.name in _CPU_KERNELS:
                _cpu_check(self.tensors, op)
                op.where, op.reason = "cpu", why
            else:
                raise BadDataError(f"loadTfLite: {self.name}: operation {op.index} ({op.name}) cannot run: {why}, "
                                   "and this runtime has no CPU kernel for it")

    def _partition(self) -> list[Partition]:
        """The operations split as TFLite splits a graph for a delegate: subsets that are all
        NNAPI or all CPU, each as large as the dependencies allow (not just runs of neighbours).

        As TFLite's ``PartitionGraphIntoIndependentNodeSubsets`` (greedy): a subset takes, in
        the model's order and again until none is left, every operation whose inputs are all
        computed (by earlier subsets or this one) and whose kind is the subset's (the first
        ready operation sets it); then the next subset begins.  An NNAPI subset is one
        partition (one NNAPI model); a CPU subset runs its operations one by one, each its own
        partition.  Every NNAPI subset is delegated (the delegate's
        ``max_number_delegated_partitions`` = 0, no limit).
        """
        ops = [op for op in self.operations if op.where != "folded"]
        producer = {t: op.index for op in ops for t in op.outputs}
        readers: dict[int, set[int]] = {}
        for op in ops:
            for t in op.inputs:
                readers.setdefault(t, set()).add(op.index)
        for op in ops:
            for t in op.inputs:
                if t >= 0 and self.tensors[t].value is None and t not in producer and t not in self.inputs:
                    raise BadDataError(f"loadTfLite: tensor {t} is read but never written")
        computed: set[int] = set()
        waiting = list(ops)
        groups: list[tuple[str, list[int]]] = []
        while waiting:
            kind: str | None = None
            members: list[int] = []
            progress = True
            while progress:
                progress = False
                for op in waiting:
                    if op.index in members or any(t in producer and t not in computed for t in op.inputs):
                        continue
                    kind = kind or op.where
                    if op.where == kind:
                        members.append(op.index)
                        computed.update(op.outputs)
                        progress = True
            if not members:
                raise BadDataError(f"loadTfLite: {self.name}: the operations' inputs form a cycle")
            taken = set(members)
            waiting = [op for op in waiting if op.index not in taken]
            groups += [(kind, members)] if kind == "nnapi" else [(kind, [k]) for k in members]
        partitions = []
        for kind, members in groups:
            inside = set(members)
            written = {t for k in members for t in self.operations[k].outputs}
            ins: list[int] = []
            for k in members:
                for t in self.operations[k].inputs:
                    if t >= 0 and t not in written and self.tensors[t].value is None and t not in ins:
                        ins.append(t)
            outs = [t for k in members for t in self.operations[k].outputs
                    if t in self.outputs or readers.get(t, set()) - inside]
            partitions.append(Partition(len(partitions), kind, tuple(members), tuple(ins), tuple(outs)))
        return partitions

    def _build(self, partition: Partition) -> Model:
        b = _Builder(self.tensors)
        for t in partition.inputs:
            b.tensor(t)
        sources: list[int] = []
        for k in partition.operations:
            op = self.operations[k]
            _MAPPERS[op.name](b, self.tensors, op)
            sources += [k] * (b.model.operationCount - len(sources))
        partition.sources = tuple(sources)
        b.model.identifyInputsAndOutputs([b.operand[t] for t in partition.inputs],
                                         [b.operand[t] for t in partition.outputs])
        b.model.finish()
        return b.model

    def runOperation(self, index: int, values: dict[int, np.ndarray]) -> dict[int, np.ndarray]:  # noqa: N802
        """One operation alone, in this process: its outputs (tensor index -> array), its
        inputs read from ``values`` (tensor index -> array; constants are the model's).

        A delegated operation runs as its own NNAPI model (the delegate's lowering: HARD_SWISH
        is four operations) on nnapi-reference's kernels, the ones every emulated device
        computes with; a CPU one on its kernel. Op by op, fed LiteRT's tensors
        (``experimental_preserve_all_tensors``) or the previous operations' outputs, it tells
        where a difference from LiteRT starts and where it grows (``bench/accuracy.py``)."""
        op = self.operations[index]
        if op.where == "folded":
            return {op.outputs[0]: self.tensors[op.outputs[0]].value}
        missing = [t for t in op.inputs if t >= 0 and self.tensors[t].value is None and t not in values]
        if missing:
            raise BadDataError(f"runOperation: operation {index} ({op.name}) reads tensor(s) {missing}, not given")
        if op.where == "cpu":
            return {op.outputs[0]: _CPU_KERNELS[op.name](self.tensors, op, values[op.inputs[0]])}
        b = _Builder(self.tensors)
        given = [t for t in dict.fromkeys(op.inputs) if t >= 0 and self.tensors[t].value is None]
        for t in given:
            b.tensor(t)
        _MAPPERS[op.name](b, self.tensors, op)
        b.model.identifyInputsAndOutputs([b.operand[t] for t in given], [b.operand[t] for t in op.outputs])
        b.model.finish()
        outputs = [np.empty(self.tensors[t].shape, np.uint8 if self.tensors[t].type == "INT8" else self.tensors[t].dtype)
                   for t in op.outputs]
        _cpu_kernels.runModel(b.model.to_hal(), [_to_nnapi(self.tensors[t], np.ascontiguousarray(values[t]))
                                                 for t in given], outputs)
        return {t: _from_nnapi(self.tensors[t], out) for t, out in zip(op.outputs, outputs)}

    # describing

    def placement(self) -> list[tuple[int, str, str, str]]:
        """Per operation: (index, name, where, reason), in the model's order."""
        return [(op.index, op.name, op.where, op.reason) for op in self.operations]

    def describe(self) -> str:
        """The plan for people: each partition, in run order, with what it runs."""
        folded = sum(op.where == "folded" for op in self.operations)
        lines = [f"{self.name}: {len(self.operations)} operations, {folded} folded at load "
                 f"(DEQUANTIZE/DENSIFY of constants), {len(self.partitions)} partitions"]
        for p in self.partitions:
            where = "NNAPI" if p.kind == "nnapi" else "CPU (in the app)"
            lines.append(f"  partition {p.index}: {where:<16} {len(p.operations):>3} ops  {p.label(self.operations)}")
            if p.kind == "cpu":
                op = self.operations[p.operations[0]]
                lines.append(f"      why not NNAPI: {op.reason}")
        return "\n".join(lines)

    async def compile(self, nn: Any, devices: Sequence[Any] | None = None, preference: Any = None) -> CompiledTfLite:
        """Compile every NNAPI partition on ``nn`` (a ``NeuralNetworks``): ``create``, or
        ``createForDevices(devices)`` when devices are given. Each compilation is finished."""
        compilations: dict[int, Any] = {}
        try:
            for p in self.partitions:
                if p.kind != "nnapi":
                    continue
                if devices is None:
                    c = nn.createCompilation(p.model)
                else:
                    c = nn.createCompilationForDevices(p.model, list(devices))
                compilations[p.index] = c
                if preference is not None:
                    c.setPreference(preference)
                await c.finish()
        except BaseException:
            for c in compilations.values():
                await c.aclose()
            raise
        return CompiledTfLite(self, compilations, measurable=devices is not None and len(devices) == 1)


@dataclasses.dataclass(slots=True)
class PartitionTiming:
    """One partition's share of the last run: real time here, and the devices' emulated time."""

    partition: int
    kind: str
    devices: tuple[str, ...]
    wallNs: int  # real time in this process, from the first input to the last output
    clockNs: int  # the trio clock's advance meanwhile: emulated time under a virtual clock
    deviceNs: int | None  # ON_HARDWARE: emulated time on the device (a one-device compilation), else None


class CompiledTfLite:
    """A TFLite model ready to run: NNAPI compilations for its partitions, CPU kernels for the rest."""

    def __init__(self, model: TfLiteModel, compilations: dict[int, Any], measurable: bool = False) -> None:
        self.model = model
        self._measurable = measurable
        self._compilations = compilations
        self._closed = False
        self.timings: list[PartitionTiming] = []

    def plans(self) -> dict[int, Any]:
        """Each NNAPI partition's ``ExecutionPlan`` (which device runs which operation)."""
        return {k: c.plan for k, c in self._compilations.items()}

    def sourceOperation(self, partition: int, halIndex: int) -> int:  # noqa: N803
        """The TFLite operation that NNAPI partition ``partition``'s HAL operation
        ``halIndex`` (an index of its ``plans()`` model, as its steps' ``operations``
        give them) was lowered from."""
        compilation = self._compilations[partition]
        return self.model.partitions[partition].sources[compilation.model.appOperationIndex(halIndex)]

    def placement(self) -> list[tuple[int, str, str]]:
        """Per TFLite operation, in the model's order: (index, name, where it runs).

        Where: a device name (an operation the delegate lowered to several NNAPI
        operations names each device once, joined by ``+``), ``app-cpu`` (this module's
        kernel) or ``folded`` (computed at load).
        """
        where: dict[int, list[str]] = {}
        for p in self.model.partitions:
            if p.kind != "nnapi":
                for k in p.operations:
                    where[k] = ["app-cpu"]
                continue
            for hal_index, device in enumerate(self._compilations[p.index].plan.assignment):
                names = where.setdefault(self.sourceOperation(p.index, hal_index), [])
                if device.name not in names:
                    names.append(device.name)
        return [(op.index, op.name, "+".join(where.get(op.index, ["folded"]))) for op in self.model.operations]

    async def run(self, inputs: Sequence[np.ndarray], *, jobPriority: int | None = None) -> list[np.ndarray]:  # noqa: N803
        """Run the model on ``inputs`` (one array per model input); its outputs, in order.

        ``jobPriority`` (0 most urgent .. 1000) is every NNAPI partition's execution's
        ``setJobPriority``: the app's urgency of this one inference, on each device step."""
        if self._closed:
            raise BadStateError("run: the compiled model is closed")
        model = self.model
        if len(inputs) != len(model.inputs):
            raise BadDataError(f"run: the model takes {len(model.inputs)} inputs, got {len(inputs)}")
        values: dict[int, np.ndarray] = {}
        for position, (t, given) in enumerate(zip(model.inputs, inputs)):
            tensor = model.tensors[t]
            array = np.asarray(given)
            if array.shape != tensor.shape or array.dtype != tensor.dtype:
                raise BadDataError(f"run: input {position} must be {tensor.dtype} {list(tensor.shape)}, "
                                   f"got {array.dtype} {list(array.shape)}")
            values[t] = array
        timings = []
        for p in model.partitions:
            start, clock_start = time.perf_counter_ns(), trio.current_time()
            device_ns: int | None = None
            if p.kind == "nnapi":
                compilation = self._compilations[p.index]
                execution = compilation.createExecution()
                single = self._measurable  # Android measures a compilation for exactly one device
                if single:
                    execution.setMeasureTiming(True)
                if jobPriority is not None:
                    execution.setJobPriority(jobPriority)
                for i, t in enumerate(p.inputs):
                    execution.setInput(i, _to_nnapi(model.tensors[t], values[t]))
                results = await execution.compute_async()
                for t, r in zip(p.outputs, results):
                    values[t] = _from_nnapi(model.tensors[t], r)
                if single:
                    d = execution.getDuration(DurationCode.ON_HARDWARE)
                    device_ns = None if d == NO_DURATION else d
                names = tuple(d.name for d in compilation.plan.devices)
            else:
                op = model.operations[p.operations[0]]
                out = _CPU_KERNELS[op.name](model.tensors, op, values[op.inputs[0]])
                if out.shape != model.tensors[op.outputs[0]].shape:
                    raise BadDataError(f"{op.name} {op.index}: computed {list(out.shape)}, the model declares "
                                       f"{list(model.tensors[op.outputs[0]].shape)}")
                values[op.outputs[0]] = out
                names = ("app-cpu",)
            timings.append(PartitionTiming(p.index, p.kind, names, time.perf_counter_ns() - start,
                                           round((trio.current_time() - clock_start) * 1e9), device_ns))
        self.timings = timings
        return [values[t] if t in values else model.tensors[t].value for t in model.outputs]

    async def aclose(self) -> None:
        """Release every compilation (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for c in self._compilations.values():
            await c.aclose()


def _to_nnapi(tensor: TfLiteTensor, array: np.ndarray) -> np.ndarray:
    if tensor.type == "INT8" and not tensor.isPerChannel:
        return (array.astype(np.int16) + 128).astype(np.uint8)
    return np.ascontiguousarray(array)


def _from_nnapi(tensor: TfLiteTensor, array: np.ndarray) -> np.ndarray:
    if tensor.type == "INT8" and not tensor.isPerChannel:
        return (array.astype(np.int16) - 128).astype(np.int8)
    return array


#: The environment variable naming the folder ``make models`` fills (MediaPipe's models).
MODELS_DIR_ENV = "NPUEMU_MODELS_DIR"


def modelsDir() -> Path:  # noqa: N802
    """Where ``make models`` puts MediaPipe 0.10.14's ``.tflite`` files: ``$NPUEMU_MODELS_DIR``,
    else ``~/.cache/npuemu/models/mediapipe-0.10.14``."""
    return Path(os.environ.get(MODELS_DIR_ENV) or Path.home() / ".cache/npuemu/models/mediapipe-0.10.14")


def findModel(name: str | os.PathLike) -> Path:  # noqa: N802
    """``name`` if it is a file, else the fetched model of that name (``face_landmark`` or
    ``face_landmark.tflite`` in :func:`modelsDir`); ``BadDataError`` when neither exists."""
    path = Path(name)
    if path.is_file():
        return path
    fetched = modelsDir() / (path.name if path.suffix == ".tflite" else f"{path.name}.tflite")
    if path.parent == Path(".") and fetched.is_file():
        return fetched
    raise BadDataError(f"no model {os.fspath(name)!r}: not a file, nor a fetched model in {modelsDir()} "
                       "(`make models` fetches MediaPipe's)")


def syntheticImage(shape: Sequence[int], seed: int = 0) -> np.ndarray:  # noqa: N802
    """A deterministic picture for an NHWC float32 input, in [-1, 1]: soft bright blobs on a
    gradient, with a little noise. Real models give degenerate outputs on white noise (a
    segmentation's sigmoid saturates everywhere), so runs and comparisons use this."""
    if len(shape) != 4:
        raise BadDataError(f"syntheticImage: an NHWC shape, not {list(shape)}")
    n, h, w, c = (int(d) for d in shape)
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w] / max(h, w, 1)
    image = np.zeros((h, w, c), np.float64) + (0.3 * x + 0.2 * y)[..., None]
    for _ in range(6):
        cy, cx, r = rng.random(3) * (1, 1, 0.25) + (0, 0, 0.05)
        image += rng.random(c) * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * r * r))[..., None]
    image += 0.05 * rng.standard_normal(image.shape)
    image = image / image.max() * 2 - 1
    return np.ascontiguousarray(np.broadcast_to(image, (n, h, w, c)), dtype=np.float32)


def loadTfLite(source: str | os.PathLike | bytes, name: str | None = None) -> TfLiteModel:  # noqa: N802
    """Load a ``.tflite`` model (a path, a fetched model's name as :func:`findModel` takes it, or
    the file's bytes) and split it as the NNAPI delegate does."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        label = name or "model"
    else:
        source = findModel(source)
        try:
            with open(source, "rb") as f:
                data = f.read()
        except OSError as e:
            raise BadDataError(f"loadTfLite: cannot read {os.fspath(source)!r}: {e.strerror}") from None
        label = name or os.path.basename(os.fspath(source)).removesuffix(".tflite")
    return TfLiteModel(data, label)
