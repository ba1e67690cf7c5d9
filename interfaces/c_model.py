"""The one conversion of an NN model (an AIDL ``Subgraph``, its values and pools) into C's
``struct npu_model`` (csrc/include/npu/model.h).

Both C extensions take that struct: npuhal's driver binding (the HAL's devices) and
framework.nn's CPU kernels (``nnapi-reference``). They may not import each other, so the
conversion lives here, beside :mod:`interfaces.c_enums`, and takes the extension's ``ffi``
as a parameter. It carries every operand's type, dimensions, lifetime, location and
quantization (``scale``, ``zeroPoint``, ``extraParams.channelQuant``'s scales and channel
dimension). C reads the struct only during the call it is passed to: keep the returned
keep-alive list for as long as the pointer is used.

``OPERAND_DTYPES`` is how C stores each operand type's elements (npu/model.h): the one
table the NDK, nnapi-reference and the HAL size and read buffers by.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from interfaces.android.hardware.neuralnetworks import OperandType

__all__ = ["OPERAND_DTYPES", "c_model"]

#: One element of each NN HAL 1.2 operand type, as the model and C store it (little-endian).
OPERAND_DTYPES: dict[OperandType, np.dtype] = {
    OperandType.FLOAT32: np.dtype("<f4"),
    OperandType.INT32: np.dtype("<i4"),
    OperandType.UINT32: np.dtype("<u4"),
    OperandType.TENSOR_FLOAT32: np.dtype("<f4"),
    OperandType.TENSOR_INT32: np.dtype("<i4"),
    OperandType.TENSOR_QUANT8_ASYMM: np.dtype("u1"),
    OperandType.BOOL: np.dtype("u1"),
    OperandType.TENSOR_QUANT16_SYMM: np.dtype("<i2"),
    OperandType.TENSOR_FLOAT16: np.dtype("<f2"),
    OperandType.TENSOR_BOOL8: np.dtype("u1"),
    OperandType.FLOAT16: np.dtype("<f2"),
    OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: np.dtype("i1"),
    OperandType.TENSOR_QUANT16_ASYMM: np.dtype("<u2"),
    OperandType.TENSOR_QUANT8_SYMM: np.dtype("i1"),
}

_UINT32_MAX = 0xFFFFFFFF


def c_model(ffi: Any, subgraph: Any, operand_values: bytes, pools: Sequence[Any],
            error: Callable[[str], Exception], relaxed: bool = False) -> tuple[Any, list[Any]]:
    """``(struct npu_model *, keep-alive list)`` for ``subgraph`` (its operands, operations and
    input and output indexes), the model's ``operand_values`` and its ``pools`` (buffers,
    already mapped); ``relaxed`` is its relaxComputationFloat32toFloat16. A number that does
    not fit the C format raises ``error(message)``."""

    def u32(value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _UINT32_MAX:
            raise error(f"{what} {value!r} is out of range (0..{_UINT32_MAX})")
        return value

    def i32(value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
            raise error(f"{what} {value!r} is out of range ({-(2**31)}..{2**31 - 1})")
        return value

    def indexes(values: Sequence[int], what: str) -> Any:
        array = ffi.new("uint32_t[]", [u32(x, what) for x in values] or [0])
        keep.append(array)
        return array

    keep: list[Any] = []
    operands = ffi.new("struct npu_operand[]", max(len(subgraph.operands), 1))
    for i, o in enumerate(subgraph.operands):
        c = operands[i]
        c.type = int(o.type)
        c.dimension_count = len(o.dimensions)
        c.dimensions = indexes(o.dimensions, "dimension")
        c.lifetime = int(o.lifetime)
        c.location.pool_index = u32(o.location.poolIndex, "pool index")
        c.location.offset = u32(o.location.offset, "location offset")
        c.location.length = u32(o.location.length, "location length")
        c.scale = float(o.scale)
        c.zero_point = i32(o.zeroPoint, "zero point")
        quant = o.extraParams.channelQuant if o.extraParams is not None else None
        if quant is not None:
            scales = ffi.new("float[]", [float(s) for s in quant.scales] or [0.0])
            keep.append(scales)
            c.channel_dim = u32(quant.channelDim, "channelDim")
            c.channel_scale_count = len(quant.scales)
            c.channel_scales = scales
    operations = ffi.new("struct npu_operation[]", max(len(subgraph.operations), 1))
    for k, op in enumerate(subgraph.operations):
        c = operations[k]
        c.type = int(op.type)
        c.input_count, c.inputs = len(op.inputs), indexes(op.inputs, "operand index")
        c.output_count, c.outputs = len(op.outputs), indexes(op.outputs, "operand index")
    cpools = ffi.new("struct npu_pool[]", max(len(pools), 1))
    for p, pool in enumerate(pools):
        view = memoryview(pool).cast("B")
        buf = ffi.from_buffer("char[]", view) if len(view) else ffi.NULL
        keep.append(buf)
        cpools[p].data, cpools[p].length = buf, len(view)
    values = ffi.from_buffer("char[]", operand_values) if operand_values else ffi.NULL
    m = ffi.new("struct npu_model *")
    m.operand_count, m.operands = len(subgraph.operands), operands
    m.operation_count, m.operations = len(subgraph.operations), operations
    m.input_count, m.input_indexes = len(subgraph.inputIndexes), indexes(subgraph.inputIndexes, "input index")
    m.output_count, m.output_indexes = len(subgraph.outputIndexes), indexes(subgraph.outputIndexes, "output index")
    m.operand_values, m.operand_values_length = values, len(operand_values)
    m.pool_count, m.pools = len(pools), cpools
    m.relax_float32_to_float16 = bool(relaxed)
    keep += [operands, operations, cpools, values, operand_values, pools]
    return m, keep
