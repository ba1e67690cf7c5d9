"""The model the driver loads is the NN HAL's ``Model`` parcelable itself.

There is no model class of the binding's own: the HAL receives
``android.hardware.neuralnetworks.Model`` (compiled into ``interfaces``) and hands it to
the driver as it is, and ``npuhal._lowlevel.CModel`` converts it straight to the C
``struct npu_model``, field by field.  Its pools are ``SharedMemory`` regions, as on the
wire; :func:`map_pools` maps them read-only for the one call in which C reads them (the
driver copies what it keeps).  Only the main subgraph: the emulated hardware has no
control flow, so referenced subgraphs are refused.  Numbers (operand types,
lifetimes, operation types) are NNAPI's; the parcelable's own checks refuse a number
its enums do not have, and the driver answers ``supported_operations`` with ``False``
for an operation it knows but cannot run, and refuses to load it, which is what NNAPI
expects of a driver.

``ModelBuilder`` builds such a ``Model`` for tools, tests and benchmarks that want one
without the whole NNAPI runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from framework.binder import SharedMemory
from interfaces.android.hardware.neuralnetworks import DataLocation, Model, Operand, Operation, Subgraph
from interfaces.c_model import OPERAND_DTYPES

from ._errors import NpuModelError
from ._types import OperandLifeTime, OperandType, OperationType

__all__ = ["ModelBuilder", "io_shapes"]

#: Constants up to this many bytes are copied into ``operandValues``; larger
#: ones go to a pool as CONSTANT_POOL, as the NNAPI runtime does (128 bytes).
_MAX_COPY_BYTES = 128


def main_subgraph(model: Model) -> Subgraph:
    """``model.main``, after refusing what the driver cannot load (``NpuModelError``).

    The model must be the HAL's ``Model`` parcelable (not a dict, not another
    class with the same field names), with no referenced subgraphs.
    """
    if not isinstance(model, Model):
        raise NpuModelError(
            f"a model is an android.hardware.neuralnetworks.Model parcelable, not {type(model).__name__}"
        )
    if model.referenced:
        raise NpuModelError("referenced subgraphs (control flow) are not supported")
    return model.main


def io_shapes(model: Model) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """The dimensions of the model's inputs and of its outputs, in order."""
    main = main_subgraph(model)
    shapes = []
    for what, indexes in (("input", main.inputIndexes), ("output", main.outputIndexes)):
        found = []
        for position, index in enumerate(indexes):
            if not 0 <= index < len(main.operands):
                raise NpuModelError(f"model {what} {position} names no operand ({index})")
            found.append(tuple(main.operands[index].dimensions))
        shapes.append(tuple(found))
    return shapes[0], shapes[1]


def io_dtypes(model: Model) -> tuple[tuple[np.dtype, ...], tuple[np.dtype, ...]]:
    """The element dtypes of the model's inputs and of its outputs, in order (call after
    :func:`io_shapes`, which checks the indexes)."""
    main = main_subgraph(model)
    return tuple(tuple(OPERAND_DTYPES[main.operands[i].type] for i in indexes)
                 for indexes in (main.inputIndexes, main.outputIndexes))  # type: ignore[return-value]


def mapped(obj: Any, *, writable: bool) -> Any:
    """A buffer-protocol object for ``obj``.

    Anything with the buffer protocol is returned as is.  An Android-style
    ``SharedMemory`` (``framework.binder``'s, which a HAL receives tensors and
    weights in) has no buffer protocol of its own: its ``mapReadWrite()`` or
    ``mapReadOnly()`` mapping is returned instead, and the caller must keep
    that mapping alive for as long as C may read or write it.
    """
    try:
        memoryview(obj)
        return obj
    except TypeError:
        pass
    method = getattr(obj, "mapReadWrite" if writable else "mapReadOnly", None)
    if callable(method):
        return method()
    return obj


def map_pools(model: Model) -> list[Any]:
    """Each of the model's pools mapped read-only, in order (``pools[i]`` for ``poolIndex`` i).

    The mappings outlive the ``SharedMemory`` objects; drop them after the C call.
    A closed region is ``NpuModelError``.
    """
    main_subgraph(model)
    views = []
    for i, pool in enumerate(model.pools):
        try:
            views.append(memoryview(mapped(pool, writable=False)).cast("B"))
        except (ValueError, TypeError) as exc:
            raise NpuModelError(f"pools[{i}] cannot be mapped: {exc}") from None
    return views


class ModelBuilder:
    """Build a float32 ``Model`` parcelable in a few lines (for tools, tests and benchmarks).

    ::

        b = ModelBuilder()
        x = b.input([1, 8])
        w = b.constant(np.ones((4, 8), np.float32))
        bias = b.constant(np.zeros(4, np.float32))
        y = b.operation(OperationType.FULLY_CONNECTED, [x, w, bias, b.int32(FuseCode.RELU)], [1, 4])
        b.output(y)
        model = b.build()

    Small constants go to ``operandValues`` (CONSTANT_COPY), large ones to one
    ``SharedMemory`` pool (CONSTANT_POOL), as the NNAPI runtime places them.  No shape
    inference: the caller gives each operation's output dimensions (the driver checks
    them).
    """

    def __init__(self) -> None:
        self._operands: list[Operand] = []
        self._operations: list[Operation] = []
        self._inputs: list[int] = []
        self._outputs: list[int] = []
        self._values = bytearray()
        self._pool = bytearray()

    def _add(self, operand: Operand) -> int:
        self._operands.append(operand)
        return len(self._operands) - 1

    def input(self, dims: Sequence[int]) -> int:
        index = self._add(
            Operand(type=OperandType.TENSOR_FLOAT32, dimensions=list(dims), lifetime=OperandLifeTime.SUBGRAPH_INPUT)
        )
        self._inputs.append(index)
        return index

    def _constant(self, type_: OperandType, dims: tuple[int, ...], data: bytes) -> int:
        if len(data) <= _MAX_COPY_BYTES:
            # NNAPI aligns every CONSTANT_COPY value to 4 bytes in operandValues.
            self._values.extend(b"\0" * (-len(self._values) % 4))
            location = DataLocation(poolIndex=0, offset=len(self._values), length=len(data))
            self._values.extend(data)
            lifetime = OperandLifeTime.CONSTANT_COPY
        else:
            self._pool.extend(b"\0" * (-len(self._pool) % 16))
            location = DataLocation(poolIndex=0, offset=len(self._pool), length=len(data))
            self._pool.extend(data)
            lifetime = OperandLifeTime.CONSTANT_POOL
        return self._add(Operand(type=type_, dimensions=list(dims), lifetime=lifetime, location=location))

    def constant(self, array: Any) -> int:
        """A TENSOR_FLOAT32 constant with ``array``'s shape and values."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        return self._constant(OperandType.TENSOR_FLOAT32, tuple(a.shape), a.tobytes())

    def int32(self, value: int) -> int:
        """An INT32 scalar constant (a fuse code, a padding, a stride)."""
        return self._constant(OperandType.INT32, (), np.int32(int(value)).tobytes())

    def float32(self, value: float) -> int:
        """A FLOAT32 scalar constant (SOFTMAX's beta)."""
        return self._constant(OperandType.FLOAT32, (), np.float32(value).tobytes())

    def operation(self, type_: OperationType | int, inputs: Sequence[int], output_dims: Sequence[int],
                  operand_type: OperandType = OperandType.TENSOR_FLOAT32) -> int:
        """Append an operation writing one new temporary tensor (float32 unless operand_type says); returns its index."""
        out = self._add(Operand(type=operand_type, dimensions=list(output_dims)))
        self._operations.append(Operation(type=OperationType(type_), inputs=list(inputs), outputs=[out]))
        return out

    def output(self, index: int) -> None:
        """Make a temporary tensor one of the model's outputs."""
        operand = self._operands[index]
        if operand.lifetime != OperandLifeTime.TEMPORARY_VARIABLE:
            raise NpuModelError(f"operand {index} is not a computed tensor")
        self._operands[index] = operand.replace(lifetime=OperandLifeTime.SUBGRAPH_OUTPUT)
        self._outputs.append(index)

    def build(self) -> Model:
        """The ``Model``; its pool (if any) is a new ``SharedMemory`` region the model owns."""
        pools = []
        if self._pool:
            region = SharedMemory.create("npuhal-model-pool", len(self._pool))
            mapping = region.mapReadWrite()
            try:
                mapping[:] = self._pool
            finally:
                mapping.close()
            pools.append(region)
        main = Subgraph(
            operands=list(self._operands),
            operations=list(self._operations),
            inputIndexes=list(self._inputs),
            outputIndexes=list(self._outputs),
        )
        return Model(main=main, operandValues=bytes(self._values), pools=pools)

