"""The shared model format on the Python side: NN HAL 1.2's ``Model``, float32 only.

The same plain data travels from the NNAPI runtime (``framework.nn``), over the
binder, into the HAL and down to the C driver.  On the wire and in dicts it uses
NNAPI's own camelCase names::

    {
        "operands": [
            {"type": 3, "dimensions": [1, 4], "lifetime": 1,
             "location": {"poolIndex": 0, "offset": 0, "length": 0}},
            ...
        ],
        "operations": [{"type": 0, "inputs": [0, 1, 2], "outputs": [3]}],
        "inputIndexes": [0, 1],
        "outputIndexes": [3],
        "operandValues": b"...",        # CONSTANT_COPY bytes
        "pools": [memoryview(...)],     # CONSTANT_POOL buffers
    }

The HAL builds a ``Model`` straight from the compiled AIDL ``Model`` it receives
(``Model.from_aidl``), with no intermediate form.  ``Model.from_hal`` accepts such a mapping (camelCase or snake_case keys), any
object with those attributes, or a ``Model``; ``Model.to_hal`` gives the dict
back.  Numbers (operand types, lifetimes, operation types) are NNAPI's.  Type
codes this emulator does not know are kept as plain ints, not refused here: the
driver answers ``supported_operations`` with ``False`` for an operation it
cannot run, and refuses to load it, which is what NNAPI expects of a driver.

``ModelBuilder`` is a small convenience for tools, tests and benchmarks that
want a model without the whole NNAPI runtime.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from interfaces.android.hardware import neuralnetworks as nn_aidl

from ._errors import NpuModelError, NpuValueError
from ._types import OperandLifeTime, OperandType, OperationType

__all__ = ["DataLocation", "Operand", "Operation", "Model", "ModelBuilder"]

#: Constants up to this many bytes are copied into ``operandValues``; larger
#: ones go to a pool as CONSTANT_POOL, as the NNAPI runtime does (128 bytes).
_MAX_COPY_BYTES = 128


def _enum_or_int(enum_cls, value: Any, what: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise NpuModelError(f"{what} must be an integer, got {value!r}") from None
    try:
        return enum_cls(number)
    except ValueError:
        return number


def _index_tuple(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise NpuModelError(f"{what} must be a sequence of integers, got {value!r}")
    out = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise NpuModelError(f"{what} must hold integers, got {item!r}")
        if item < 0:
            raise NpuModelError(f"{what} must not be negative, got {item}")
        out.append(int(item))
    return tuple(out)


def _get(data: Any, camel: str, snake: str, default: Any = ...) -> Any:
    if isinstance(data, Mapping):
        if camel in data:
            return data[camel]
        if snake in data:
            return data[snake]
    else:
        for name in (snake, camel):
            if hasattr(data, name):
                return getattr(data, name)
    if default is ...:
        raise NpuModelError(f"model data has no {camel!r}")
    return default


@dataclass(frozen=True, slots=True)
class DataLocation:
    """Where a constant operand's bytes are: ``operandValues`` or ``pools[pool_index]``."""

    pool_index: int = 0
    offset: int = 0
    length: int = 0

    @classmethod
    def from_hal(cls, data: Any) -> DataLocation:
        if data is None:
            return cls()
        if isinstance(data, DataLocation):
            return data
        values = [
            _get(data, "poolIndex", "pool_index", 0),
            _get(data, "offset", "offset", 0),
            _get(data, "length", "length", 0),
        ]
        pool_index, offset, length = _index_tuple(values, "operand location")
        return cls(pool_index, offset, length)

    def to_hal(self) -> dict:
        return {"poolIndex": self.pool_index, "offset": self.offset, "length": self.length}


@dataclass(frozen=True, slots=True)
class Operand:
    """One operand.  ``dimensions`` are all known (this emulator has no dynamic shapes)."""

    type: OperandType | int
    dimensions: tuple[int, ...]
    lifetime: OperandLifeTime | int
    location: DataLocation = DataLocation()

    @classmethod
    def from_hal(cls, data: Any) -> Operand:
        if isinstance(data, Operand):
            return data
        return cls(
            type=_enum_or_int(OperandType, _get(data, "type", "type"), "operand type"),
            dimensions=_index_tuple(_get(data, "dimensions", "dimensions", ()), "operand dimensions"),
            lifetime=_enum_or_int(OperandLifeTime, _get(data, "lifetime", "lifetime"), "operand lifetime"),
            location=DataLocation.from_hal(_get(data, "location", "location", None)),
        )

    @property
    def element_count(self) -> int:
        return math.prod(self.dimensions)

    def to_hal(self) -> dict:
        return {
            "type": int(self.type),
            "dimensions": list(self.dimensions),
            "lifetime": int(self.lifetime),
            "location": self.location.to_hal(),
        }


@dataclass(frozen=True, slots=True)
class Operation:
    type: OperationType | int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    @classmethod
    def from_hal(cls, data: Any) -> Operation:
        if isinstance(data, Operation):
            return data
        return cls(
            type=_enum_or_int(OperationType, _get(data, "type", "type"), "operation type"),
            inputs=_index_tuple(_get(data, "inputs", "inputs"), "operation inputs"),
            outputs=_index_tuple(_get(data, "outputs", "outputs"), "operation outputs"),
        )

    def to_hal(self) -> dict:
        return {"type": int(self.type), "inputs": list(self.inputs), "outputs": list(self.outputs)}


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


def _as_bytes_like(obj: Any, what: str) -> memoryview:
    try:
        view = memoryview(obj)
    except TypeError:
        raise NpuValueError(f"{what} must be bytes-like (bytes, memoryview, numpy array, SharedMemory), got {type(obj).__name__}") from None
    if not view.c_contiguous:
        raise NpuValueError(f"{what} must be C-contiguous")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


@dataclass(frozen=True, slots=True)
class Model:
    """An NN HAL 1.2 ``Model``.

    ``pools`` hold buffer-protocol objects (bytes, memoryviews, numpy arrays,
    mmaps); a ``SharedMemory`` given to ``from_hal`` is kept as its read-only
    mapping.
    """

    operands: tuple[Operand, ...]
    operations: tuple[Operation, ...]
    input_indexes: tuple[int, ...]
    output_indexes: tuple[int, ...]
    operand_values: bytes = b""
    pools: tuple[Any, ...] = field(default=(), compare=False)

    @classmethod
    def from_hal(cls, data: Any) -> Model:
        """Normalise HAL plain data (see the module docstring) into a ``Model``.

        Anything with a ``to_hal()`` method (``framework.nn``'s model) is accepted
        too.  Malformed data raises ``NpuModelError``; deeper checks (indexes in
        range, shapes that agree) are the driver's, at load time.
        """
        if isinstance(data, Model):
            return data
        if not isinstance(data, Mapping) and callable(getattr(data, "to_hal", None)):
            data = data.to_hal()
        operands = _get(data, "operands", "operands")
        operations = _get(data, "operations", "operations")
        if not isinstance(operands, Iterable) or not isinstance(operations, Iterable):
            raise NpuModelError("operands and operations must be sequences")
        values = _get(data, "operandValues", "operand_values", b"")
        pools = _get(data, "pools", "pools", ())
        if isinstance(pools, (bytes, bytearray, memoryview)) or not isinstance(pools, Iterable):
            raise NpuModelError("pools must be a sequence of buffers")
        pools = tuple(mapped(pool, writable=False) for pool in pools)
        for i, pool in enumerate(pools):
            _as_bytes_like(pool, f"pools[{i}]")
        return cls(
            operands=tuple(Operand.from_hal(o) for o in operands),
            operations=tuple(Operation.from_hal(o) for o in operations),
            input_indexes=_index_tuple(_get(data, "inputIndexes", "input_indexes"), "inputIndexes"),
            output_indexes=_index_tuple(_get(data, "outputIndexes", "output_indexes"), "outputIndexes"),
            operand_values=bytes(_as_bytes_like(values, "operandValues")),
            pools=pools,
        )

    @classmethod
    def from_aidl(cls, model: nn_aidl.Model) -> Model:
        """The HAL's ``android.hardware.neuralnetworks.Model`` as the driver's model, field by field.

        Only its main subgraph (the caller refuses referenced ones); pools are kept as
        their read-only mappings. Bad values raise ``NpuModelError`` as ``from_hal`` does.
        """
        main = model.main
        pools = tuple(mapped(pool, writable=False) for pool in model.pools)
        for i, pool in enumerate(pools):
            _as_bytes_like(pool, f"pools[{i}]")
        operands = []
        for o in main.operands:
            loc = o.location
            operands.append(
                Operand(
                    type=_enum_or_int(OperandType, o.type, "operand type"),
                    dimensions=_index_tuple(o.dimensions, "operand dimensions"),
                    lifetime=_enum_or_int(OperandLifeTime, o.lifetime, "operand lifetime"),
                    location=DataLocation(*_index_tuple((loc.poolIndex, loc.offset, loc.length), "operand location")),
                )
            )
        operations = tuple(
            Operation(
                type=_enum_or_int(OperationType, op.type, "operation type"),
                inputs=_index_tuple(op.inputs, "operation inputs"),
                outputs=_index_tuple(op.outputs, "operation outputs"),
            )
            for op in main.operations
        )
        return cls(
            operands=tuple(operands),
            operations=operations,
            input_indexes=_index_tuple(main.inputIndexes, "inputIndexes"),
            output_indexes=_index_tuple(main.outputIndexes, "outputIndexes"),
            operand_values=bytes(_as_bytes_like(model.operandValues, "operandValues")),
            pools=pools,
        )

    def to_hal(self) -> dict:
        return {
            "operands": [o.to_hal() for o in self.operands],
            "operations": [o.to_hal() for o in self.operations],
            "inputIndexes": list(self.input_indexes),
            "outputIndexes": list(self.output_indexes),
            "operandValues": self.operand_values,
            "pools": list(self.pools),
        }

    def _io_operand(self, indexes: tuple[int, ...], position: int, what: str) -> Operand:
        try:
            return self.operands[indexes[position]]
        except IndexError:
            raise NpuModelError(f"model {what} {position} names no operand") from None

    def input_shape(self, position: int) -> tuple[int, ...]:
        """Dimensions of the model's ``position``-th input."""
        return self._io_operand(self.input_indexes, position, "input").dimensions

    def output_shape(self, position: int) -> tuple[int, ...]:
        """Dimensions of the model's ``position``-th output."""
        return self._io_operand(self.output_indexes, position, "output").dimensions


class ModelBuilder:
    """Build a float32 ``Model`` in a few lines (for tools, tests and benchmarks).

    ::

        b = ModelBuilder()
        x = b.input([1, 8])
        w = b.constant(np.ones((4, 8), np.float32))
        bias = b.constant(np.zeros(4, np.float32))
        y = b.operation(OperationType.FULLY_CONNECTED, [x, w, bias, b.int32(FuseCode.RELU)], [1, 4])
        b.output(y)
        model = b.build()

    Small constants go to ``operandValues`` (CONSTANT_COPY), large ones to a pool
    (CONSTANT_POOL), as the NNAPI runtime places them.  No shape inference:
    the caller gives each operation's output dimensions (the driver checks them).
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
        index = self._add(Operand(OperandType.TENSOR_FLOAT32, tuple(dims), OperandLifeTime.SUBGRAPH_INPUT))
        self._inputs.append(index)
        return index

    def _constant(self, type_: OperandType, dims: tuple[int, ...], data: bytes) -> int:
        if len(data) <= _MAX_COPY_BYTES:
            # NNAPI aligns every CONSTANT_COPY value to 4 bytes in operandValues.
            self._values.extend(b"\0" * (-len(self._values) % 4))
            location = DataLocation(0, len(self._values), len(data))
            self._values.extend(data)
            lifetime = OperandLifeTime.CONSTANT_COPY
        else:
            self._pool.extend(b"\0" * (-len(self._pool) % 16))
            location = DataLocation(0, len(self._pool), len(data))
            self._pool.extend(data)
            lifetime = OperandLifeTime.CONSTANT_POOL
        return self._add(Operand(type_, dims, lifetime, location))

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

    def operation(self, type_: OperationType | int, inputs: Sequence[int], output_dims: Sequence[int]) -> int:
        """Append an operation writing one new temporary tensor; returns its index."""
        out = self._add(Operand(OperandType.TENSOR_FLOAT32, tuple(output_dims), OperandLifeTime.TEMPORARY_VARIABLE))
        self._operations.append(Operation(type_, tuple(inputs), (out,)))
        return out

    def output(self, index: int) -> None:
        """Make a temporary tensor one of the model's outputs."""
        operand = self._operands[index]
        if operand.lifetime != OperandLifeTime.TEMPORARY_VARIABLE:
            raise NpuModelError(f"operand {index} is not a computed tensor")
        self._operands[index] = Operand(operand.type, operand.dimensions, OperandLifeTime.SUBGRAPH_OUTPUT, operand.location)
        self._outputs.append(index)

    def build(self) -> Model:
        return Model(
            operands=tuple(self._operands),
            operations=tuple(self._operations),
            input_indexes=tuple(self._inputs),
            output_indexes=tuple(self._outputs),
            operand_values=bytes(self._values),
            pools=(bytes(self._pool),) if self._pool else (),
        )

