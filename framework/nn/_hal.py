"""The shared model format: NN HAL 1.2's ``Model`` as plain, immutable data.

This is what crosses every boundary: the runtime hands it to an IDevice over the
binder, the HAL hands it to the C driver, and the partitioner cuts it into one
sub-model per step. The fields and numbers are the HAL's:

``HalModel``
    ``operands``      tuple of :class:`HalOperand` ``(type, dimensions, lifetime, location)``
    ``operations``    tuple of :class:`HalOperation` ``(type, inputs, outputs)``, in run
                      order: every operand an operation reads is a model input, a constant,
                      or written by an *earlier* operation
    ``inputIndexes``  operand indexes of the model inputs, in the order an execution binds them
    ``outputIndexes`` likewise for the outputs
    ``operandValues`` ``bytes`` with the CONSTANT_COPY values; ``location.offset/length``
                      index into it (``poolIndex`` 0, ignored)
    ``pools``         tuple of bytes-like buffers (``bytes``, ``memoryview``, a shared-memory
                      mapping) holding CONSTANT_POOL values at
                      ``location.poolIndex/offset/length``

A TEMPORARY_VARIABLE, SUBGRAPH_INPUT, SUBGRAPH_OUTPUT or NO_VALUE operand has the all-zero
location. Dimensions are a tuple of ints; a 0 means "not known yet" and only an output
of an operation may have one (shape inference fills it in).

:meth:`HalModel.to_dict` gives the msgpack-friendly form with exactly the key names above
(``pools`` stays a list of buffers, which a transport replaces by shared memory), and
:meth:`HalModel.from_dict` reads it back, checking every type, so a malformed parcel is a
``BadDataError`` and not a crash deep in a driver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._errors import BadDataError
from ._types import OperandLifeTime, OperandType, OperationType, dtypeOf, isScalar


def _seq(value: Any, what: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise BadDataError(f"{what} must be a list, not {type(value).__name__}")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise BadDataError(f"{what} must be an int, not {value!r}")
    return int(value)


def _ints(value: Any, what: str) -> tuple[int, ...]:
    return tuple(_int(v, what) for v in _seq(value, what))


def _enum(cls: type, value: Any, what: str) -> Any:
    try:
        return cls(_int(value, what))
    except ValueError:
        raise BadDataError(f"unknown {what} {value!r}") from None


@dataclasses.dataclass(frozen=True, slots=True)
class DataLocation:
    poolIndex: int = 0
    offset: int = 0
    length: int = 0

    def __post_init__(self) -> None:
        for name in ("poolIndex", "offset", "length"):
            object.__setattr__(self, name, _int(getattr(self, name), name))


NO_LOCATION = DataLocation()


@dataclasses.dataclass(frozen=True, slots=True)
class HalOperand:
    type: OperandType
    dimensions: tuple[int, ...]
    lifetime: OperandLifeTime
    location: DataLocation = NO_LOCATION

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", _enum(OperandType, self.type, "operand type"))
        object.__setattr__(self, "dimensions", _ints(self.dimensions, "dimensions"))
        object.__setattr__(self, "lifetime", _enum(OperandLifeTime, self.lifetime, "operand lifetime"))
        if not isinstance(self.location, DataLocation):
            raise BadDataError(f"an operand's location is a DataLocation, not {self.location!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class HalOperation:
    type: OperationType
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", _enum(OperationType, self.type, "operation type"))
        object.__setattr__(self, "inputs", _ints(self.inputs, "operation inputs"))
        object.__setattr__(self, "outputs", _ints(self.outputs, "operation outputs"))


@dataclasses.dataclass(frozen=True, slots=True)
class HalModel:
    operands: tuple[HalOperand, ...]
    operations: tuple[HalOperation, ...]
    inputIndexes: tuple[int, ...]
    outputIndexes: tuple[int, ...]
    operandValues: bytes = b""
    pools: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        for name, cls in (("operands", HalOperand), ("operations", HalOperation)):
            items = tuple(_seq(getattr(self, name), name))
            for item in items:
                if not isinstance(item, cls):
                    raise BadDataError(f"{name} holds {cls.__name__} values, not {item!r}")
            object.__setattr__(self, name, items)
        object.__setattr__(self, "inputIndexes", _ints(self.inputIndexes, "inputIndexes"))
        object.__setattr__(self, "outputIndexes", _ints(self.outputIndexes, "outputIndexes"))
        if not isinstance(self.operandValues, (bytes, bytearray, memoryview)):
            raise BadDataError(f"operandValues must be bytes, not {type(self.operandValues).__name__}")
        object.__setattr__(self, "operandValues", bytes(self.operandValues))
        pools = tuple(_seq(self.pools, "pools"))
        for i, pool in enumerate(pools):
            try:
                memoryview(pool)
            except TypeError:
                raise BadDataError(f"pool {i} is not a buffer ({type(pool).__name__})") from None
        object.__setattr__(self, "pools", pools)

    def constantBytes(self, index: int) -> memoryview:
        """The bytes of constant operand ``index`` (CONSTANT_COPY or CONSTANT_POOL)."""
        operand = self.operands[index]
        loc = operand.location
        if operand.lifetime == OperandLifeTime.CONSTANT_COPY:
            buf = memoryview(self.operandValues)
        elif operand.lifetime == OperandLifeTime.CONSTANT_POOL:
            if not 0 <= loc.poolIndex < len(self.pools):
                raise BadDataError(f"operand {index}: pool {loc.poolIndex} does not exist ({len(self.pools)} pools)")
            buf = memoryview(self.pools[loc.poolIndex]).cast("B")
        else:
            raise BadDataError(f"operand {index} is {operand.lifetime.name}, not a constant")
        if loc.offset < 0 or loc.length < 0 or loc.offset + loc.length > len(buf):
            raise BadDataError(
                f"operand {index}: location offset {loc.offset} length {loc.length} lies outside "
                f"its {len(buf)}-byte buffer"
            )
        return buf[loc.offset : loc.offset + loc.length]

    def constantArray(self, index: int) -> np.ndarray:
        """Constant operand ``index`` as a read-only numpy array of its type and shape."""
        operand = self.operands[index]
        array = np.frombuffer(self.constantBytes(index), dtype=dtypeOf(operand.type))
        return array.reshape(operand.dimensions) if not isScalar(operand.type) else array.reshape(())

    def to_dict(self) -> dict[str, Any]:
        """The plain form (ints, lists, bytes, the pool buffers), with the HAL's key names."""
        return {
            "operands": [
                {
                    "type": int(o.type),
                    "dimensions": list(o.dimensions),
                    "lifetime": int(o.lifetime),
                    "location": {
                        "poolIndex": o.location.poolIndex,
                        "offset": o.location.offset,
                        "length": o.location.length,
                    },
                }
                for o in self.operands
            ],
            "operations": [
                {"type": int(op.type), "inputs": list(op.inputs), "outputs": list(op.outputs)}
                for op in self.operations
            ],
            "inputIndexes": list(self.inputIndexes),
            "outputIndexes": list(self.outputIndexes),
            "operandValues": bytes(self.operandValues),
            "pools": list(self.pools),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HalModel:
        """Read :meth:`to_dict`'s form back; anything malformed is ``BadDataError``.

        This checks types only. Call :func:`framework.nn.validateModel` (or
        ``Model.from_hal``) for the graph rules.
        """
        if not isinstance(data, Mapping):
            raise BadDataError(f"a HAL model is a mapping, not {type(data).__name__}")
        try:
            operands = tuple(
                HalOperand(
                    type=o["type"],
                    dimensions=o["dimensions"],
                    lifetime=o["lifetime"],
                    location=DataLocation(
                        o["location"]["poolIndex"], o["location"]["offset"], o["location"]["length"]
                    ),
                )
                for o in _seq(data["operands"], "operands")
            )
            operations = tuple(
                HalOperation(op["type"], op["inputs"], op["outputs"]) for op in _seq(data["operations"], "operations")
            )
            return cls(
                operands=operands,
                operations=operations,
                inputIndexes=data["inputIndexes"],
                outputIndexes=data["outputIndexes"],
                operandValues=data.get("operandValues", b""),
                pools=data.get("pools", ()),
            )
        except KeyError as e:
            raise BadDataError(f"HAL model field {e.args[0]!r} is missing") from None
        except TypeError as e:
            raise BadDataError(f"malformed HAL model: {e}") from None
