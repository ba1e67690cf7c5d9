"""``ANeuralNetworksModel``: the model builder an app uses.

The calls are the NDK's, without the prefix, and in the same order an NDK app makes
them::

    model = Model()
    x = model.addOperand(OperandType.TENSOR_FLOAT32, [1, 4])
    w = model.addOperand(OperandType.TENSOR_FLOAT32, [3, 4])
    b = model.addOperand(OperandType.TENSOR_FLOAT32, [3])
    fuse = model.addOperand(OperandType.INT32)
    y = model.addOperand(OperandType.TENSOR_FLOAT32, [1, 3])
    model.setOperandValue(w, weights)          # numpy array, bytes, or a Python number
    model.setOperandValue(b, bias)
    model.setOperandValue(fuse, FuseCode.RELU)
    model.addOperation(OperationType.FULLY_CONNECTED, [x, w, b, fuse], [y])
    model.identifyInputsAndOutputs([x], [y])
    model.finish()
    hal = model.to_hal()                       # the shared format, see _hal.py

Quantized operands take the scale and zero point of the NDK's ``ANeuralNetworksOperandType``
as keywords, a per-channel one its scales after::

    x = model.addOperand(OperandType.TENSOR_QUANT8_ASYMM, [1, 8, 8, 3], scale=0.5, zeroPoint=128)
    w = model.addOperand(OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL, [4, 3, 3, 3])
    model.setOperandSymmPerChannelQuantParams(w, SymmPerChannelQuantParams(scales=[0.1] * 4, channelDim=0))

What is checked when: an operand's type, scale and zero point at ``addOperand``; indexes,
counts and the operation's signature at ``addOperation`` (read by the operation's C
binding, with the shapes declared and the constants set so far), so the error points at
the call that caused it; whole-graph rules and shapes at ``finish()``, since an NDK app may
set a constant after the operation that reads it. Errors are ``BadDataError``; any change
after ``finish()``, or use before it, is ``BadStateError``. As in Android 10, a model that
fails to finish is invalid from then on: every later call is ``BadStateError``.

Differences from the NDK, on purpose: ``setOperandValue`` always copies, also values
over 128 bytes (the NDK keeps a pointer to the app's buffer; in Python that buffer's
lifetime is not the app's to promise), and ``finish()`` lays the large values out in one
pool, as Android's runtime does when it copies them into shared memory.
``setOperandValueFromMemory`` keeps a reference to the app's buffer, as the NDK's
``ANeuralNetworksMemory`` does.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np

from interfaces.android.hardware.neuralnetworks import (
    DataLocation,
    Operand,
    OperandExtraParams,
    Operation,
    Subgraph,
    SymmPerChannelQuantParams,
)

from ._errors import BadDataError, BadStateError, requireNotNull
from ._hal import HalModel
from ._types import (
    MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES,
    OperandLifeTime,
    OperandType,
    OperationType,
    dtypeOf,
    isBool,
    isScalar,
)
from ._signature import checkOperation
from ._validate import checkChannelQuant, checkOperandType, expectedByteSize, validateModel

# Android aligns each value in operandValues to 4 bytes and each large value in its
# shared memory so a driver can read a float32 tensor in place; 64 also suits SIMD.
_COPY_ALIGNMENT = 4
_POOL_ALIGNMENT = 64
_UINT32_MAX = 0xFFFFFFFF


@dataclasses.dataclass(slots=True)
class _Operand:
    type: OperandType
    dimensions: tuple[int, ...]
    scale: float = 0.0
    zeroPoint: int = 0
    channelQuant: SymmPerChannelQuantParams | None = None
    lifetime: OperandLifeTime = OperandLifeTime.TEMPORARY_VARIABLE
    value: bytes | None = None  # CONSTANT_COPY, or a large value that finish() pools
    memory: Any = None  # setOperandValueFromMemory: (buffer, offset, length)

    def hal(self, location: DataLocation | None = None) -> Operand:
        """The HAL's Operand for it (``location`` for a constant, once finish() has placed it)."""
        return Operand(
            type=self.type,
            dimensions=list(self.dimensions),
            scale=self.scale,
            zeroPoint=self.zeroPoint,
            lifetime=self.lifetime,
            location=location or DataLocation(),
            extraParams=None if self.channelQuant is None else OperandExtraParams(channelQuant=self.channelQuant),
        )

    def valueBytes(self) -> Any:
        """The constant's bytes when the model holds them (set by value or from a memory), else None."""
        if self.value is not None:
            return self.value
        if self.memory is not None:
            memory, offset, length = self.memory
            return memoryview(memory).cast("B")[offset : offset + length]
        return None


class Model:
    """A neural network model under construction, then finished and immutable."""

    def __init__(self) -> None:
        self._operands: list[_Operand] = []
        self._operations: list[Operation] = []
        self._writer: dict[int, int] = {}  # operand index -> the operation that writes it
        self._inputs: tuple[int, ...] = ()
        self._outputs: tuple[int, ...] = ()
        self._relax = False
        self._hal: HalModel | None = None
        self._invalid = False  # finish() refused it: Android 10's "invalid model"
        self._sortedToApp: tuple[int, ...] = ()

    # -- state -------------------------------------------------------------------

    @property
    def isFinished(self) -> bool:
        return self._hal is not None

    @property
    def operandCount(self) -> int:
        return len(self._hal.operands) if self._hal is not None else len(self._operands)

    @property
    def operationCount(self) -> int:
        return len(self._hal.operations) if self._hal is not None else len(self._operations)

    def _check_mutable(self, call: str) -> None:
        if self._hal is not None:
            raise BadStateError(f"{call}: the model is finished and can no longer change")
        if self._invalid:
            raise BadStateError(f"{call}: the model failed to finish and is invalid; build a new one")

    def _check_operand(self, call: str, index: Any) -> _Operand:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise BadDataError(f"{call}: an operand index is an int, not {index!r}")
        if not 0 <= index < len(self._operands):
            raise BadDataError(f"{call}: operand {index} does not exist ({len(self._operands)} operands)")
        return self._operands[index]

    # -- building ----------------------------------------------------------------

    def addOperand(
        self, type: OperandType | int, dimensions: Sequence[int] = (), *, scale: float = 0.0, zeroPoint: int = 0  # noqa: N803
    ) -> int:
        """Add an operand and return its index (``ANeuralNetworksModel_addOperand``).

        ``type``, ``dimensions``, ``scale`` and ``zeroPoint`` are the fields of the NDK's
        ``ANeuralNetworksOperandType``. A scalar type takes no dimensions. A tensor's
        dimensions may contain 0 ("not known", or ``()`` for an unknown rank) unless it
        becomes a constant; shape inference at ``finish()`` fills in what an operation
        determines, the rest is known at execution. The scale and zero point are 0 except
        for the quantized types (see :func:`framework.nn._validate.checkOperandType`).
        """
        self._check_mutable("addOperand")
        requireNotNull("addOperand", type=type)
        try:
            operandType = OperandType(type)
        except ValueError:
            raise BadDataError(f"addOperand: unknown operand type {type!r}") from None
        if isinstance(dimensions, (str, bytes)) or not isinstance(dimensions, Sequence | np.ndarray):
            raise BadDataError(f"addOperand: dimensions must be a sequence of ints, not {dimensions!r}")
        dims = []
        for d in dimensions:
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d <= _UINT32_MAX:
                raise BadDataError(f"addOperand: dimensions must be ints in 0..2^32-1, got {list(dimensions)!r}")
            dims.append(int(d))
        if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)):
            raise BadDataError(f"addOperand: the scale is a number, not {scale!r}")
        if isinstance(zeroPoint, bool) or not isinstance(zeroPoint, (int, np.integer)):
            raise BadDataError(f"addOperand: the zero point is an int, not {zeroPoint!r}")
        with np.errstate(over="ignore"):
            stored = float(np.float32(scale))  # what the model (an AIDL float) holds
        checkOperandType(f"addOperand({operandType.name})", operandType, dims, stored, int(zeroPoint))
        self._operands.append(_Operand(operandType, tuple(dims), stored, int(zeroPoint)))
        return len(self._operands) - 1

    def setOperandSymmPerChannelQuantParams(self, index: int, channelQuant: SymmPerChannelQuantParams) -> None:  # noqa: N802, N803
        """The per-channel scales of a TENSOR_QUANT8_SYMM_PER_CHANNEL operand.

        ``ANeuralNetworksModel_setOperandSymmPerChannelQuantParams``: ``channelQuant`` is
        the HAL's ``SymmPerChannelQuantParams`` (``scales``, ``channelDim``): one scale > 0
        per index of dimension ``channelDim``, which the operand must have specified. A
        second call replaces the first.
        """
        call = "setOperandSymmPerChannelQuantParams"
        self._check_mutable(call)
        requireNotNull(call, channelQuant=channelQuant)
        operand = self._check_operand(call, index)
        if not isinstance(channelQuant, SymmPerChannelQuantParams):
            raise BadDataError(f"{call}: takes a SymmPerChannelQuantParams, not {type(channelQuant).__name__}")
        if operand.type != OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            raise BadDataError(
                f"{call}: operand {index} is {operand.type.name}; only a TENSOR_QUANT8_SYMM_PER_CHANNEL operand has "
                "per-channel scales"
            )
        params = SymmPerChannelQuantParams(scales=list(channelQuant.scales), channelDim=channelQuant.channelDim)
        checkChannelQuant(
            f"{call}: operand {index}",
            Operand(type=operand.type, dimensions=list(operand.dimensions), extraParams=OperandExtraParams(channelQuant=params)),
        )
        operand.channelQuant = params

    def relaxComputationFloat32toFloat16(self, allow: bool) -> None:  # noqa: N802
        """Let float32 operations compute with float16's range and precision (before ``finish()``).

        ``ANeuralNetworksModel_relaxComputationFloat32toFloat16``: the model's HAL form
        carries it to every device, which may then run its float32 operations as float16.
        """
        self._check_mutable("relaxComputationFloat32toFloat16")
        if not isinstance(allow, (bool, np.bool_)):
            raise BadDataError(f"relaxComputationFloat32toFloat16: takes a bool, not {allow!r}")
        self._relax = bool(allow)

    @property
    def relaxed(self) -> bool:
        """Whether ``relaxComputationFloat32toFloat16(True)`` was called."""
        return self._hal.relaxComputationFloat32toFloat16 if self._hal is not None else self._relax

    def setOperandValue(self, index: int, value: Any) -> None:
        """Make operand ``index`` a constant (``ANeuralNetworksModel_setOperandValue``).

        ``value`` is a numpy array (or anything ``np.asarray`` takes: a list, a Python
        number, a ``FuseCode``) of the operand's shape, converted to its element type
        when that loses nothing but float precision; or a bytes-like object of exactly
        the operand's size; or ``None`` for an omitted optional operand (NO_VALUE).
        Values up to 128 bytes become CONSTANT_COPY, larger ones CONSTANT_POOL.
        """
        self._check_mutable("setOperandValue")
        operand = self._check_operand("setOperandValue", index)
        self._check_can_be_constant("setOperandValue", index, operand)
        if value is None:
            operand.lifetime, operand.value, operand.memory = OperandLifeTime.NO_VALUE, None, None
            return
        size = self._constant_size("setOperandValue", index, operand)
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = memoryview(value).cast("B").tobytes()
            if len(data) != size:
                raise BadDataError(f"setOperandValue: operand {index} needs {size} bytes, got {len(data)}")
        else:
            data = _to_bytes(index, operand, value)
        operand.value, operand.memory = data, None
        operand.lifetime = (
            OperandLifeTime.CONSTANT_COPY
            if size <= MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES
            else OperandLifeTime.CONSTANT_POOL
        )

    def setOperandValueFromMemory(self, index: int, memory: Any, offset: int, length: int) -> None:
        """Make operand ``index`` a constant read from an app buffer (a pool) in place.

        ``memory`` is any bytes-like object (a shared-memory mapping, in the end); the
        model keeps a reference to it and the app must not change it afterwards, as
        with ``ANeuralNetworksModel_setOperandValueFromMemory``.
        """
        self._check_mutable("setOperandValueFromMemory")
        requireNotNull("setOperandValueFromMemory", memory=memory)
        operand = self._check_operand("setOperandValueFromMemory", index)
        self._check_can_be_constant("setOperandValueFromMemory", index, operand)
        try:
            view = memoryview(memory).cast("B")
        except TypeError:
            raise BadDataError(f"setOperandValueFromMemory: {type(memory).__name__} is not a buffer") from None
        size = self._constant_size("setOperandValueFromMemory", index, operand)
        if length != size:
            raise BadDataError(f"setOperandValueFromMemory: operand {index} needs {size} bytes, got length {length}")
        if offset < 0 or offset + length > len(view):
            raise BadDataError(
                f"setOperandValueFromMemory: offset {offset} length {length} lies outside the {len(view)}-byte memory"
            )
        operand.lifetime, operand.value, operand.memory = OperandLifeTime.CONSTANT_POOL, None, (memory, offset, length)

    def _check_can_be_constant(self, call: str, index: int, operand: _Operand) -> None:
        if operand.lifetime in (OperandLifeTime.SUBGRAPH_INPUT, OperandLifeTime.SUBGRAPH_OUTPUT):
            raise BadDataError(f"{call}: operand {index} is a {operand.lifetime.name} and cannot have a value")
        if index in self._writer:
            raise BadDataError(f"{call}: operand {index} is written by operation {self._writer[index]}")

    def _constant_size(self, call: str, index: int, operand: _Operand) -> int:
        size = expectedByteSize(operand.hal())
        if size is None:
            raise BadDataError(f"{call}: operand {index} needs fully specified dimensions, has {list(operand.dimensions)}")
        return size

    def addOperation(self, type: OperationType | int, inputs: Sequence[int], outputs: Sequence[int]) -> int:
        """Add an operation and return its index (``ANeuralNetworksModel_addOperation``)."""
        self._check_mutable("addOperation")
        requireNotNull("addOperation", inputs=inputs, outputs=outputs)
        try:
            opType = OperationType(type)
        except ValueError:
            raise BadDataError(f"addOperation: {type!r} is not an NN HAL 1.2 operation type") from None
        where = f"addOperation({opType.name})"
        ins = tuple(int(i) for i in _index_list(where, "inputs", inputs))
        outs = tuple(int(i) for i in _index_list(where, "outputs", outputs))
        for i in ins + outs:
            self._check_operand(where, i)
        checkOperation(
            "addOperation",
            opType,
            [(self._operands[i].hal(), self._operands[i].valueBytes()) for i in ins],
            [self._operands[i].hal() for i in outs],
        )
        if len(set(outs)) != len(outs):
            raise BadDataError(f"{where}: output operands repeat: {list(outs)}")
        for i in outs:
            lifetime = self._operands[i].lifetime
            if lifetime not in (OperandLifeTime.TEMPORARY_VARIABLE, OperandLifeTime.SUBGRAPH_OUTPUT):
                raise BadDataError(f"{where}: operand {i} is a {lifetime.name} and cannot be an output")
            if i in ins:
                raise BadDataError(f"{where}: operand {i} is both an input and an output")
        self._operations.append(Operation(type=opType, inputs=list(ins), outputs=list(outs)))
        for i in outs:  # a second writer is Android 10's BAD_DATA at finish(), not here
            self._writer.setdefault(i, len(self._operations) - 1)
        return len(self._operations) - 1

    def identifyInputsAndOutputs(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        """Name the model's inputs and outputs, in the order an execution binds them.

        As Android 10's ModelBuilder: each listed operand, inputs first and in order, must
        still be a plain temporary (not a constant, an omitted value, or already an input
        or output) and becomes a model input (output) at once; the first that is not ends
        the call with ``BAD_DATA``, the operands marked before it staying marked. So an
        operand listed twice, as both, or by an earlier call is refused, and a second
        call can name only operands the first did not (its lists replace the first's;
        the first's operands keep their role, which ``finish()`` then refuses as inputs
        or outputs the model does not list, where Android 10 finishes the model and
        leaves them unbound). Whether an input is written by an operation is
        ``finish()``'s to say, as in Android 10.
        """
        call = "identifyInputsAndOutputs"
        self._check_mutable(call)
        requireNotNull(call, inputs=inputs, outputs=outputs)
        ins = tuple(int(i) for i in _index_list(call, "inputs", inputs))
        outs = tuple(int(i) for i in _index_list(call, "outputs", outputs))
        for i in ins + outs:
            self._check_operand(call, i)
        self._inputs = self._mark(call, "input", self._inputs, ins, OperandLifeTime.SUBGRAPH_INPUT)
        self._outputs = self._mark(call, "output", self._outputs, outs, OperandLifeTime.SUBGRAPH_OUTPUT)

    def _mark(
        self, call: str, kind: str, before: tuple[int, ...], indexes: tuple[int, ...], lifetime: OperandLifeTime
    ) -> tuple[int, ...]:
        """The new index list, each operand of ``indexes`` given ``lifetime`` in turn."""
        # Android resizes its list and overwrites it in place: on a failure the list
        # holds the operands marked so far, then what was there before (or operand 0).
        listed = list(before[: len(indexes)]) + [0] * max(0, len(indexes) - len(before))
        for k, i in enumerate(indexes):
            operand = self._operands[i]
            if operand.lifetime != OperandLifeTime.TEMPORARY_VARIABLE:
                if kind == "input":
                    self._inputs = tuple(listed)
                else:
                    self._outputs = tuple(listed)
                role = {OperandLifeTime.SUBGRAPH_INPUT: "already a model input",
                        OperandLifeTime.SUBGRAPH_OUTPUT: "already a model output"}.get(
                    operand.lifetime, f"a {operand.lifetime.name} (it has a value)")
                raise BadDataError(f"{call}: operand {i} cannot be a model {kind}: it is {role}")
            listed[k] = i
            operand.lifetime = lifetime
        return tuple(listed)

    def finish(self) -> None:
        """Validate the whole graph, infer shapes, and freeze the model.

        Operations are put in run order (a stable topological sort: a model built in
        order keeps its numbering); ``getSupportedOperationsForDevices`` still answers
        in the order the app added them. A model that fails to finish is invalid, as in
        Android 10: later calls are ``BadStateError``.
        """
        self._check_mutable("finish")
        order = self._run_order()
        operations = tuple(self._operations[k] for k in order)

        # Large copied values share one pool, pool 0 when it exists (it becomes one
        # shared-memory region); app memories from setOperandValueFromMemory follow it.
        values = bytearray()
        pool = bytearray()
        own_pool = any(o.lifetime == OperandLifeTime.CONSTANT_POOL and o.memory is None for o in self._operands)
        app_pools: list[Any] = []
        pool_of: dict[int, int] = {}
        operands = []
        for o in self._operands:
            location = DataLocation()
            if o.lifetime == OperandLifeTime.CONSTANT_COPY:
                values.extend(bytes(-len(values) % _COPY_ALIGNMENT))
                location = DataLocation(offset=len(values), length=len(o.value))
                values.extend(o.value)
            elif o.lifetime == OperandLifeTime.CONSTANT_POOL and o.memory is None:
                pool.extend(bytes(-len(pool) % _POOL_ALIGNMENT))
                location = DataLocation(offset=len(pool), length=len(o.value))
                pool.extend(o.value)
            elif o.lifetime == OperandLifeTime.CONSTANT_POOL:
                memory, offset, length = o.memory
                if id(memory) not in pool_of:
                    pool_of[id(memory)] = len(app_pools) + own_pool
                    app_pools.append(memory)
                location = DataLocation(poolIndex=pool_of[id(memory)], offset=offset, length=length)
            operands.append(o.hal(location))
        pools = ((bytes(pool),) if own_pool else ()) + tuple(app_pools)
        main = Subgraph(
            operands=operands,
            operations=list(operations),
            inputIndexes=list(self._inputs),
            outputIndexes=list(self._outputs),
        )
        hal = HalModel(main, operandValues=bytes(values), pools=pools, relaxComputationFloat32toFloat16=self._relax)
        try:
            self._hal = validateModel(hal)
        except BadDataError:
            self._invalid = True
            raise
        self._sortedToApp = tuple(order)

    def _run_order(self) -> list[int]:
        """Operation indexes in run order; the lowest ready index first, so it is stable.

        Operations caught in a cycle, or reading a temporary nothing writes, are left
        at the end in their own order: validation then names the first bad read.
        """
        _pending = (OperandLifeTime.TEMPORARY_VARIABLE, OperandLifeTime.SUBGRAPH_OUTPUT)
        ready_operands = {i for i, o in enumerate(self._operands) if o.lifetime not in _pending}
        waiting = []
        readers: dict[int, list[int]] = {}
        for k, op in enumerate(self._operations):
            missing = {i for i in op.inputs if i not in ready_operands}
            waiting.append(len(missing))
            for i in missing:
                readers.setdefault(i, []).append(k)
        heap = [k for k, n in enumerate(waiting) if n == 0]
        heapq.heapify(heap)
        order = []
        while heap:
            k = heapq.heappop(heap)
            order.append(k)
            for i in self._operations[k].outputs:
                for reader in readers.pop(i, ()):
                    waiting[reader] -= 1
                    if waiting[reader] == 0:
                        heapq.heappush(heap, reader)
        placed = set(order)
        return order + [k for k in range(len(self._operations)) if k not in placed]

    # -- the finished model ------------------------------------------------------

    def to_hal(self) -> HalModel:
        """The finished model in the shared HAL format (immutable; safe to share)."""
        if self._hal is None:
            raise BadStateError("to_hal: the model is not finished")
        return self._hal

    @classmethod
    def from_hal(cls, hal: HalModel) -> Model:
        """A finished model from the HAL format, after checking every rule of it."""
        if not isinstance(hal, HalModel):
            raise BadDataError(f"from_hal takes a HalModel, not {type(hal).__name__}")
        model = cls()
        model._hal = validateModel(hal)
        model._sortedToApp = tuple(range(len(hal.operations)))
        return model

    def appOperationIndex(self, halIndex: int) -> int:
        """The index the app's ``addOperation`` returned for HAL operation ``halIndex``."""
        if self._hal is None:
            raise BadStateError("appOperationIndex: the model is not finished")
        return self._sortedToApp[halIndex]


def _index_list(call: str, what: str, value: Any) -> Sequence[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise BadDataError(f"{call}: {what} must be a list of operand indexes, not {value!r}")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise BadDataError(f"{call}: {what} must be operand indexes (ints), got {list(value)!r}")
    return value


def _to_bytes(index: int, operand: _Operand, value: Any) -> bytes:
    target = dtypeOf(operand.type)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise BadDataError(f"setOperandValue: operand {index}: {value!r} is not an array ({e})") from None
    shape = () if isScalar(operand.type) else operand.dimensions
    if array.shape != shape:
        raise BadDataError(
            f"setOperandValue: operand {index} is {operand.type.name} {list(shape)}, the value has shape {list(array.shape)}"
        )
    kind = array.dtype.kind
    if isBool(operand.type):
        ok = kind == "b"
    elif target.kind == "f":
        ok = kind in "fiu"
    else:
        ok = kind in "iub"
    if not ok:
        raise BadDataError(
            f"setOperandValue: operand {index} is {operand.type.name}; a {array.dtype} value would be converted with loss"
        )
    if target.kind in "iu" and kind in "iu" and array.size:
        info = np.iinfo(target)
        if array.min() < info.min or array.max() > info.max:
            raise BadDataError(
                f"setOperandValue: operand {index} is {operand.type.name}; a value is out of its range "
                f"{info.min}..{info.max}"
            )
    with np.errstate(over="ignore", invalid="ignore"):
        converted = np.asarray(array, dtype=target)
    if target.kind == "f" and kind == "f" and not np.array_equal(np.isinf(converted), np.isinf(array)):
        raise BadDataError(f"setOperandValue: operand {index}: a value overflows {operand.type.name}")
    return converted.tobytes()
