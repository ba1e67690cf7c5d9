"""The runtime's in-memory model: the HAL's own ``Subgraph`` and ``operandValues``, pools as buffers.

A :class:`HalModel` is the NN HAL's ``Model`` parcelable as the app process holds it. Its
``main`` *is* the compiled AIDL ``Subgraph`` (``interfaces.android.hardware.neuralnetworks``):
its operands are AIDL ``Operand`` values with AIDL ``DataLocation`` locations, its
operations AIDL ``Operation`` values, with the HAL's field names and numbers. Only the
pools differ from the parcelable: here they are buffers in this process (``bytes``, a
shared-memory mapping), where the parcelable carries ``SharedMemory`` regions. So sending
it to a driver changes no operand or operation: ``toAidlModel`` puts the same ``main``
and ``operandValues`` beside the regions that carry the pools.

``main``
    ``operands``      the operands, ``(type, dimensions, scale, zeroPoint, lifetime, location,
                      extraParams)``: a quantized type's scale and zero point, and a
                      TENSOR_QUANT8_SYMM_PER_CHANNEL operand's per-channel scales in
                      ``extraParams.channelQuant`` (``None`` for every other type)
    ``operations``    ``(type, inputs, outputs)``, in run order: every operand an operation
                      reads is a model input, a constant, or written by an *earlier* operation
    ``inputIndexes``  operand indexes of the model inputs, in the order an execution binds them
    ``outputIndexes`` likewise for the outputs
``operandValues``    ``bytes`` with the CONSTANT_COPY values; ``location.offset/length``
                      index into it (``poolIndex`` 0, ignored)
``pools``            tuple of bytes-like buffers holding CONSTANT_POOL values at
                      ``location.poolIndex/offset/length``
``relaxComputationFloat32toFloat16``
                     the app allows float32 operations to compute in float16's range and
                     precision (``ANeuralNetworksModel_relaxComputationFloat32toFloat16``)

A TEMPORARY_VARIABLE, SUBGRAPH_INPUT, SUBGRAPH_OUTPUT or NO_VALUE operand has the all-zero
location. A dimension 0 means "not known yet" (no dimensions at all, for a tensor: the rank
is not known either); a constant knows all of its dimensions, and shape inference fills
in an operation's outputs where it can. The parcelables check their own field types; the graph
rules are :func:`framework.nn.validateModel`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from interfaces.android.hardware.neuralnetworks import Operand, Operation, Subgraph

from ._errors import BadDataError
from ._types import OperandLifeTime, dtypeOf, isScalar


@dataclasses.dataclass(frozen=True, slots=True)
class HalModel:
    main: Subgraph
    operandValues: bytes = b""
    pools: tuple[Any, ...] = ()
    relaxComputationFloat32toFloat16: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.main, Subgraph):
            raise BadDataError(f"a HalModel's main is a Subgraph parcelable, not {type(self.main).__name__}")
        if not isinstance(self.operandValues, (bytes, bytearray, memoryview)):
            raise BadDataError(f"operandValues must be bytes, not {type(self.operandValues).__name__}")
        object.__setattr__(self, "operandValues", bytes(self.operandValues))
        if isinstance(self.pools, (str, bytes)) or not isinstance(self.pools, Sequence):
            raise BadDataError(f"pools must be a list of buffers, not {type(self.pools).__name__}")
        pools = tuple(self.pools)
        for i, pool in enumerate(pools):
            try:
                memoryview(pool)
            except TypeError:
                raise BadDataError(f"pool {i} is not a buffer ({type(pool).__name__})") from None
        object.__setattr__(self, "pools", pools)
        if not isinstance(self.relaxComputationFloat32toFloat16, bool):
            raise BadDataError(
                f"relaxComputationFloat32toFloat16 is a bool, not {type(self.relaxComputationFloat32toFloat16).__name__}"
            )

    # The subgraph's fields, read as the model's own (the runtime has one subgraph).
    @property
    def operands(self) -> list[Operand]:
        return self.main.operands

    @property
    def operations(self) -> list[Operation]:
        return self.main.operations

    @property
    def inputIndexes(self) -> list[int]:  # noqa: N802
        return self.main.inputIndexes

    @property
    def outputIndexes(self) -> list[int]:  # noqa: N802
        return self.main.outputIndexes

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


def describeOperand(operand: Operand) -> str:  # noqa: N802
    """One operand for people: type, dimensions (``?`` unknown) and quantization, e.g.
    ``TENSOR_QUANT8_ASYMM [1, 8, 8, 3] scale 0.5 zeroPoint 128``."""
    text = operand.type.name
    if not isScalar(operand.type):
        dims = ", ".join(str(d) if d else "?" for d in operand.dimensions) if operand.dimensions else "?"
        text += f" [{dims}]"
    if operand.scale or operand.zeroPoint:
        text += f" scale {operand.scale:g} zeroPoint {operand.zeroPoint}"
    if operand.extraParams is not None:
        quant = operand.extraParams.channelQuant
        text += f" channelDim {quant.channelDim} scales [{', '.join(f'{x:g}' for x in quant.scales)}]"
    return text
