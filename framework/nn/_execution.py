"""``ANeuralNetworksExecution``: one run of a compiled model, through shared memory.

Where the bytes live. A run lays its operands in one ``SharedMemory`` region, the
*request pool*, which it takes from its compilation and gives back when it ends, for
the next execution to reuse while its size fits (``RequestPools``: no region made, no
page mapped or faulted in per run, here or in the HAL). Model inputs given with
``setInput`` are copied into it (the one copy an app's own array costs), the HAL
writes model outputs into it, and a value that one step of a plan produces and a
later step reads (a temporary crossing from one device to another) stays in it
between the two: the NPU writes it, the DSP or the CPU reads the same pages. Inputs
and outputs given with ``setInputFromMemory`` / ``setOutputFromMemory`` live in the
app's own :class:`Memory` instead, with no copy at all. An output given with
``setOutput`` is copied into the app's buffer; without it, ``compute`` returns a copy
of its bytes in the pool (the arrays are the caller's; the pool serves the next run).

Running. Steps run in plan order: a driver step is one ``IPreparedModel``
``executeSynchronously`` (or ``executeWithHints`` once a hint is set) whose
``Request`` names regions of the pools; a CPU step runs the C kernels on the same
regions in this process. If a driver step fails, a ``createForDevices`` compilation
raises the device's error (``DEAD_OBJECT`` when its process died). A plain one
computes the result anyway: when the device's process died, its operations move to
the CPU for good (the compilation's plan changes) and the run starts over; after any
other failure (a FAILED work, a refused hint) this run is redone wholly on the CPU
and the plan stays, as Android's runtime does.

Three ways to compute, as the NDK has them:

- ``await execution.compute_async()``: in trio code.
- ``execution.compute()``: blocking (``ANeuralNetworksExecution_compute``), from a
  thread other than the trio thread (e.g. under ``trio.to_thread.run_sync``).
- ``event = await execution.startCompute()`` then ``await event.wait()``: the run
  proceeds in the runtime's nursery meanwhile.

Hints for the NPU scheduling HAL (``ExecutionHints``): ``setJobPriority`` (0..1000,
lower runs first), ``setOriginalUid`` (work done on behalf of another uid; the HAL
refuses it unless that is allowed), ``setGroupId`` (a UUID naming an execution group)
and ``setDebugFeatureId``. The work's uid is always this process's binder uid.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import trio

from framework.binder import RemoteException, SharedMemory
from interfaces.android.hardware.neuralnetworks import (
    DataLocation,
    ExecutionHints,
    IPreparedModel,
    Operand,
    OperandLifeTime,
    Request,
    RequestArgument,
)
from interfaces.android.hardware.npu import NpuUuid

from ._aidl import errorFromRemote
from ._burst import Burst
from ._errors import (
    BadDataError,
    BadStateError,
    DeadObjectError,
    NeuralNetworksError,
    OutputInsufficientSizeError,
    requireNotNull,
)
from ._memory import Memory
from ._partition import ExecutionPlan, ExecutionStep
from ._types import NO_DURATION, DurationCode, dtypeOf, isScalar
from ._validate import expectedByteSize

if TYPE_CHECKING:
    from ._compilation import Compilation

__all__ = ["Event", "Execution"]

log = logging.getLogger("NeuralNetworks")

_ALIGN = 64
_UINT32_MAX = 0xFFFFFFFF
_NO_DEADLINE = -1


#: The first region the runtime lays out for an output whose size only the run gives, when
#: the app gave no buffer of its own; a run that needs more tells (OUTPUT_INSUFFICIENT_SIZE
#: from the device) and the runtime runs again with the size it said.
_FIRST_GUESS = 4096


def _known_size(what: str, operand: Operand) -> int:
    """The operand's byte size; an operand whose shape is still unspecified cannot be laid out yet."""
    size = expectedByteSize(operand)
    if size is None:
        raise BadDataError(f"{what} has unspecified dimensions {list(operand.dimensions)}")
    return size


def _given_dims(call: str, index: int, declared: Sequence[int], dims: Any, scalar: bool) -> tuple[int, ...]:
    """The dimensions of model input ``index`` for a run (``ANeuralNetworksOperandType.dimensions``
    at setInput): each > 0, the model's rank when it has one, a dimension it specifies the same."""
    if isinstance(dims, (str, bytes)) or not isinstance(dims, (Sequence, np.ndarray)):
        raise BadDataError(f"{call}: input {index}'s dimensions are a sequence of ints, not {dims!r}")
    given = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 < d <= _UINT32_MAX:
            raise BadDataError(f"{call}: input {index}'s dimensions must be ints in 1..2^32-1, got {list(dims)!r}")
        given.append(int(d))
    if scalar:
        if given:
            raise BadDataError(f"{call}: input {index} is a scalar; it takes no dimensions, got {given}")
        return ()
    if declared and len(given) != len(declared):
        raise BadDataError(f"{call}: input {index} has rank {len(declared)} ({list(declared)}), given {given}")
    for k, (d, want) in enumerate(zip(given, declared)):
        if want and d != want:
            raise BadDataError(f"{call}: input {index}'s dimension {k} is {want} in the model, given {d}")
    return tuple(given)


@dataclasses.dataclass(frozen=True, slots=True)
class _Place:
    """Where one operand of the whole model lives during a run."""

    memory: Memory | None  # None: the request pool
    offset: int
    length: int


class Execution:
    """One execution of a :class:`Compilation`. Made by ``compilation.createExecution()``."""

    def __init__(self, compilation: Compilation) -> None:
        self._compilation = compilation
        hal = compilation.plan.model
        self._hal = hal
        self._inputs: dict[int, Any] = {}  # position -> array of the operand's dtype (copied in) or _Place
        self._outputs: dict[int, Any] = {}  # position -> app buffer (copied out) or _Place
        self._dims: dict[int, tuple[int, ...]] = {}  # input position -> dimensions given at setInput
        self._guess: dict[int, int] = {}  # output operand of unknown size -> bytes to lay out for it
        self._hints: dict[str, Any] = {}
        self._measure = False
        self._durations: dict[DurationCode, int] | None = None  # None: no run ended yet
        self._measured = False  # whether the last run was measured
        self._shapes: dict[int, list[int]] = {}  # operand -> dimensions a driver reported in the last run
        self._pool: SharedMemory | None = None  # this run's request pool
        self._mapping: Any = None
        self._taken: tuple[SharedMemory, Any] | None = None  # the pool this run took from the compilation
        self._burst: Burst | None = None  # during a burstCompute
        self._running = False
        self._started = False  # an execution runs once, as in Android 10

    # -- binding inputs and outputs -----------------------------------------------------

    def _index(self, call: str, kind: str, position: Any) -> int:
        """The operand of model input or output ``position``; BAD_DATA if there is none."""
        indexes = self._hal.inputIndexes if kind == "input" else self._hal.outputIndexes
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
            raise BadDataError(f"{call}: an {kind} index is an int, not {position!r}")
        if not 0 <= position < len(indexes):
            raise BadDataError(f"{call}: {kind} {position} does not exist (the model has {len(indexes)})")
        return indexes[position]

    def _operand(self, call: str, kind: str, position: Any, dimensions: Any = None) -> tuple[int, int | None]:
        """The operand of model input or output ``position`` and its byte size in this run.

        An input whose dimensions the model leaves unspecified takes them from
        ``dimensions`` (remembered for the run); an output's size is ``None`` while only
        the run can give it.
        """
        operand = self._index(call, kind, position)
        o = self._hal.operands[operand]
        if kind == "output":
            if dimensions is not None:
                raise BadDataError(f"{call}: an output's dimensions are the run's to give, not the app's")
            return operand, expectedByteSize(o)
        if dimensions is None:
            self._dims.pop(position, None)
            return operand, _known_size(f"{call}: input {position} (give them: dimensions=...)", o)
        dims = _given_dims(call, position, o.dimensions, dimensions, isScalar(o.type))
        if dims and expectedByteSize(o) is None:
            self._dims[position] = dims
        else:
            self._dims.pop(position, None)
        return operand, (math.prod(dims) if dims else 1) * dtypeOf(o.type).itemsize

    def _check_unstarted(self, call: str) -> None:
        """BAD_STATE once the execution started: in Android 10 an execution is set up,
        computed once, then only read (its durations and output dimensions)."""
        if self._running:
            raise BadStateError(f"{call}: the execution is computing")
        if self._started:
            raise BadStateError(f"{call}: the execution has run; an execution runs once (create another)")

    def _dtype(self, kind: str, position: int) -> np.dtype:
        indexes = self._hal.inputIndexes if kind == "input" else self._hal.outputIndexes
        return dtypeOf(self._hal.operands[indexes[position]].type)

    def setInput(self, index: int, buffer: Any, dimensions: Sequence[int] | None = None) -> None:
        """Model input ``index`` from an array (anything numpy reads as numbers) or bytes.

        An array must hold exactly the operand's element count, in values its type
        stores: any numbers for a float operand (converted to float32 or float16),
        integers that fit for an integer or quantized one (the stored values: a
        TENSOR_QUANT8_ASYMM input takes 0..255, not real values), booleans or 0/1 for
        TENSOR_BOOL8. A bytes-like object must be exactly its byte size. The value is
        copied into the request pool when the execution computes.

        ``dimensions`` is what the NDK's ``type`` argument (``ANeuralNetworksOperandType``)
        adds for an input the model declares with unspecified dimensions: this run's, each
        > 0, of the model's rank, equal to each dimension the model does specify (else
        ``BAD_DATA``). An array whose shape fits the model's gives them itself.
        """
        self._check_unstarted("setInput")
        operand = self._index("setInput", "input", index)
        if dimensions is None and expectedByteSize(self._hal.operands[operand]) is None and isinstance(buffer, np.ndarray):
            dimensions = buffer.shape  # an array of a shape the model allows carries its dimensions
        operand, size = self._operand("setInput", "input", index, dimensions)
        dtype = self._dtype("input", index)
        type_name = self._hal.operands[operand].type.name
        if isinstance(buffer, (bytes, bytearray, memoryview)):
            view = memoryview(buffer).cast("B")
            if len(view) != size:
                raise BadDataError(f"setInput: input {index} needs {size} bytes, got {len(view)}")
            self._inputs[index] = np.frombuffer(view, dtype=dtype)
            return
        try:
            array = np.asarray(buffer)
        except (TypeError, ValueError) as e:
            raise BadDataError(f"setInput: input {index}: {type(buffer).__name__} is not an array ({e})") from None
        count = size // dtype.itemsize
        if array.dtype.kind not in "fiub":
            raise BadDataError(f"setInput: input {index} is {type_name}; a {array.dtype} array cannot be one")
        if array.size != count:
            dims = list(self._hal.operands[operand].dimensions)
            raise BadDataError(f"setInput: input {index} is {dims} ({count} elements), got {array.size} elements")
        if dtype.kind in "iub":
            with np.errstate(invalid="ignore"):
                stored = array.astype(dtype)
            if array.dtype.kind == "f" and not np.array_equal(stored, array) or \
                    array.dtype.kind in "iu" and not np.array_equal(stored.astype(np.int64), array.astype(np.int64)):
                raise BadDataError(
                    f"setInput: input {index} is {type_name}: its values must be {dtype} integers "
                    f"(the stored values), got {array.dtype} values that do not fit")
            array = stored
        else:
            array = array.astype(dtype)  # a copy: later changes to the app's array do not reach the run
        self._inputs[index] = array

    def setInputFromMemory(
        self, index: int, memory: Memory, offset: int, length: int, dimensions: Sequence[int] | None = None
    ) -> None:
        """Model input ``index`` read in place from ``memory`` (zero copy); ``dimensions``
        as for :meth:`setInput`."""
        self._check_unstarted("setInputFromMemory")
        self._inputs[index] = self._place("setInputFromMemory", "input", index, memory, offset, length, dimensions)

    def setOutput(self, index: int, buffer: Any = None) -> None:
        """Model output ``index`` copied into ``buffer`` (a writable array of the operand's
        dtype, e.g. float32, float16 or uint8, or a buffer of its byte size).

        ``None`` undoes an earlier call: the result is then a view of the request pool.
        For an output whose dimensions only the run gives, any buffer at least as large
        as the result will do; a smaller one ends the run with OUTPUT_INSUFFICIENT_SIZE
        and ``getOutputOperandDimensions`` says what it needs.
        """
        self._check_unstarted("setOutput")
        operand, size = self._operand("setOutput", "output", index)
        if buffer is None:
            self._outputs.pop(index, None)
            return
        try:
            view = memoryview(buffer).cast("B")
        except TypeError:
            raise BadDataError(f"setOutput: output {index}: {type(buffer).__name__} is not a buffer") from None
        except ValueError:
            raise BadDataError(f"setOutput: output {index} must be C-contiguous") from None
        if view.readonly:
            raise BadDataError(f"setOutput: output {index} is read-only")
        if size is not None and len(view) != size:
            raise BadDataError(f"setOutput: output {index} needs {size} bytes, got {len(view)}")
        dtype = self._dtype("output", index)
        if isinstance(buffer, np.ndarray) and buffer.dtype != dtype:
            raise BadDataError(f"setOutput: output {index} is {dtype}, the array is {buffer.dtype}")
        self._outputs[index] = buffer

    def setOutputFromMemory(self, index: int, memory: Memory, offset: int, length: int) -> None:
        """Model output ``index`` written in place into ``memory`` by the device (zero copy)."""
        self._check_unstarted("setOutputFromMemory")
        self._outputs[index] = self._place("setOutputFromMemory", "output", index, memory, offset, length)

    def _place(
        self, call: str, kind: str, index: int, memory: Any, offset: int, length: int, dimensions: Any = None
    ) -> _Place:
        requireNotNull(call, memory=memory)
        operand, size = self._operand(call, kind, index, dimensions)
        if not isinstance(memory, Memory):
            raise BadDataError(f"{call}: memory must be a Memory, not {type(memory).__name__}")
        if memory.closed:
            raise BadStateError(f"{call}: the Memory is closed")
        memory.checkRange(offset, length)
        if size is not None and length != size:
            raise BadDataError(f"{call}: {kind} {index} needs {size} bytes, got length {length}")
        itemsize = dtypeOf(self._hal.operands[operand].type).itemsize
        if offset % itemsize:
            raise BadDataError(f"{call}: offset {offset} is not {itemsize}-byte aligned (the operand's elements)")
        return _Place(memory, int(offset), int(length))

    # -- scheduling hints ----------------------------------------------------------------

    def setJobPriority(self, priority: int) -> None:
        """WorkInfo.jobPriority, 0 (most urgent) .. 1000 (least); the HAL's default is 500."""
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 1000:
            raise BadDataError(f"setJobPriority: 0..1000, not {priority!r}")
        self._check_unstarted("setJobPriority")
        self._hints["jobPriority"] = priority

    def setOriginalUid(self, uid: int) -> None:
        """WorkInfo.originalUid: the app this work is done for (attribution)."""
        if isinstance(uid, bool) or not isinstance(uid, int) or uid < 0:
            raise BadDataError(f"setOriginalUid: a uid >= 0, not {uid!r}")
        self._check_unstarted("setOriginalUid")
        self._hints["originalUid"] = uid

    def setGroupId(self, groupId: uuid.UUID | bytes) -> None:
        """WorkInfo.groupId: the execution group (a UUID, or its 16 bytes)."""
        if isinstance(groupId, uuid.UUID):
            raw = groupId.bytes
        elif isinstance(groupId, (bytes, bytearray)) and len(groupId) == 16:
            raw = bytes(groupId)
        else:
            raise BadDataError(f"setGroupId: a UUID or 16 bytes, not {groupId!r}")
        self._check_unstarted("setGroupId")
        self._hints["groupId"] = raw

    def setDebugFeatureId(self, featureId: str) -> None:
        """WorkInfo.debugFeatureId: a name for the feature, for traces and dumps."""
        if not isinstance(featureId, str):
            raise BadDataError(f"setDebugFeatureId: a str, not {featureId!r}")
        self._check_unstarted("setDebugFeatureId")
        self._hints["debugFeatureId"] = featureId

    # -- timing -----------------------------------------------------------------------

    def setMeasureTiming(self, measure: bool) -> None:
        """``ANeuralNetworksExecution_setMeasureTiming``: ask every step for its durations.

        Allowed only on a ``createForDevices`` compilation for exactly one device, as
        in the NDK (a partitioned run has no single "the hardware").
        """
        if not isinstance(measure, bool):
            raise BadDataError(f"setMeasureTiming: a bool, not {measure!r}")
        explicit = self._compilation._explicit
        if explicit is None or len(explicit) != 1:  # either value, before the state (as the NDK)
            raise BadDataError("setMeasureTiming: only for a compilation created for exactly one device")
        self._check_unstarted("setMeasureTiming")
        self._measure = measure

    def getDuration(self, code: DurationCode | int) -> int:
        """``ANeuralNetworksExecution_getDuration``: nanoseconds of the last run, as Android 10.

        ``ON_HARDWARE`` is the emulated time the device computed the work (from its
        start on a channel to its end: preemptions included, queueing not);
        ``IN_DRIVER`` is that plus the driver's own time (from submission to end: the
        wait in the driver's queue too). ``NO_DURATION`` (UINT64_MAX) when the device
        did not say, when the work ran on the CPU device (``nnapi-reference`` measures
        nothing, as Android's) and after a failed run. ``BAD_STATE`` before any run and
        when ``setMeasureTiming(True)`` was not in force for the last one.
        """
        try:
            code = DurationCode(code)
        except ValueError:
            raise BadDataError(f"getDuration: unknown duration code {code!r}") from None
        if self._durations is None:
            raise BadStateError("getDuration: the execution has not computed")
        if not self._measured:
            raise BadStateError("getDuration: the last run was not measured (setMeasureTiming(True) first)")
        return self._durations.get(code, NO_DURATION)

    def _hal_hints(self) -> Any:
        h = self._hints
        group = NpuUuid(uuid=h["groupId"]) if "groupId" in h else None
        return ExecutionHints(
            jobPriority=h.get("jobPriority", 500),
            originalUid=h.get("originalUid", -1),
            groupId=group,
            debugFeatureId=h.get("debugFeatureId"),
        )

    # -- computing -----------------------------------------------------------------------

    async def compute_async(self) -> list[np.ndarray]:
        """Run to completion; the outputs, shaped, in ``outputIndexes`` order."""
        self._begin("compute")
        try:
            return await self._compute()
        finally:
            self._running = False

    def _begin(self, call: str) -> None:
        self._check_unstarted(call)
        if self._compilation._closed:
            raise BadStateError(f"{call}: the compilation is closed")
        missing = [i for i in range(len(self._hal.inputIndexes)) if i not in self._inputs]
        if missing:
            raise BadDataError(f"{call}: input(s) {missing} are not set")
        self._running = True
        self._started = True
        self._durations = None
        self._measured = self._measure
        self._shapes = {}

    async def _compute(self) -> list[np.ndarray]:
        plan = self._compilation.plan
        failed_device: str | None = None  # the driver whose failure sent this run to the CPU
        while True:
            try:
                return await self._run(plan, failed_device)
            except _Grow:
                continue  # an output region of the runtime's own was too small: it is now as large as said
            except _StepFailed as failure:
                if not self._compilation.allowsCpuFallback:
                    self._durations = {}  # a failed run has no durations
                    raise failure.error from None
                if isinstance(failure.error, DeadObjectError):
                    # The device's process is gone: its operations move to the CPU for
                    # good (the compilation's plan changes; its other devices stay).
                    plan = await self._compilation.fallBack(plan, failure.device)
                    failed_device = failure.device
                else:
                    # A failure of this run only (a FAILED work, a refused hint): as
                    # Android's runtime, run this execution again wholly on the CPU and
                    # leave the plan alone, so the next one tries the device again.
                    log.warning("%s failed an execution (%s); this one runs on the CPU", failure.device, failure.error)
                    plan = plan.fallBackToCpu()
                    failed_device = failure.device

    async def burstCompute_async(self, burst: Burst) -> list[np.ndarray]:
        """``ANeuralNetworksExecution_burstCompute`` in trio code: run within ``burst``.

        ``burst`` must come from this execution's compilation (else ``BAD_DATA``) and
        run no other execution now (else ``BAD_STATE``); see :mod:`._burst`.
        """
        requireNotNull("burstCompute", burst=burst)
        if not isinstance(burst, Burst):
            raise BadDataError(f"burstCompute: a Burst, not {type(burst).__name__}")
        burst._acquire(self._compilation)
        try:
            self._begin("burstCompute")
            self._burst = burst
            try:
                return await self._compute()
            finally:
                self._running = False
                self._burst = None
        finally:
            burst._release()

    def burstCompute(self, burst: Burst) -> list[np.ndarray]:
        """``ANeuralNetworksExecution_burstCompute``: blocking, from a thread that is not trio's."""
        self._check_blocking("burstCompute")
        return trio.from_thread.run(self.burstCompute_async, burst, trio_token=self._compilation._nn._token)

    def compute(self) -> list[np.ndarray]:
        """``ANeuralNetworksExecution_compute``: blocking, from a thread that is not trio's."""
        self._check_blocking("compute")
        return trio.from_thread.run(self.compute_async, trio_token=self._compilation._nn._token)

    @staticmethod
    def _check_blocking(call: str) -> None:
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            return
        raise BadStateError(f"{call}() blocks: in trio code use `await execution.{call}_async()`")

    async def startCompute(self) -> Event:
        """``ANeuralNetworksExecution_startCompute``: the run goes on in the background."""
        nn = self._compilation._nn
        if nn._closed:
            raise BadStateError("startCompute: the NeuralNetworks runtime is closed")
        self._begin("startCompute")
        event = Event()

        async def compute() -> list[np.ndarray]:
            try:
                return await self._compute()
            finally:
                self._running = False

        nn._nursery.start_soon(event._run, compute)
        await trio.lowlevel.checkpoint()
        return event

    # -- one run over one plan -----------------------------------------------------------

    def _layout(self, plan: ExecutionPlan) -> dict[int, _Place]:
        """Where every operand that crosses a step boundary lives; sizes the request pool."""
        hal = self._hal
        places: dict[int, _Place] = {}
        offset = 0

        def in_pool(operand: int, size: int | None = None) -> None:
            nonlocal offset
            if operand in places:
                return
            if size is None:
                size = _known_size(f"compute: operand {operand}", hal.operands[operand])
            places[operand] = _Place(None, offset, size)
            offset += -(-size // _ALIGN) * _ALIGN

        for position, operand in enumerate(hal.inputIndexes):
            given = self._inputs[position]
            if isinstance(given, _Place):
                places[operand] = given  # app Memory: used in place
            else:
                in_pool(operand, given.nbytes)
        for position, operand in enumerate(hal.outputIndexes):
            given = self._outputs.get(position)
            if isinstance(given, _Place):
                places[operand] = given
            elif expectedByteSize(hal.operands[operand]) is not None:
                in_pool(operand)
            elif given is not None:
                in_pool(operand, memoryview(given).nbytes)  # the app's buffer: its size is what the run may use
            else:
                in_pool(operand, self._guess.get(operand, _FIRST_GUESS))
        for step in plan.steps:
            for operand in (*step.inputs, *step.outputs):
                in_pool(operand)
        # The compilation's pool (a burst's run: the burst's), given back by _run.
        if self._burst is not None:
            self._pool, self._mapping = self._burst.requestPool(max(offset, _ALIGN))
        else:
            self._taken = self._compilation.requestPools.take(max(offset, _ALIGN))
            self._pool, self._mapping = self._taken
        return places

    def _give_back(self, reuse: bool) -> None:
        """The run is over: its pool goes back to the compilation (closed unless ``reuse``)."""
        taken, self._taken = self._taken, None
        self._pool = self._mapping = None
        if taken is not None:
            self._compilation.requestPools.give(taken, reuse)

    def _view(self, place: _Place) -> memoryview:
        if place.memory is not None:
            return place.memory.view(place.offset, place.length)
        return memoryview(self._mapping)[place.offset : place.offset + place.length]

    async def _run(self, plan: ExecutionPlan, failed_device: str | None = None) -> list[np.ndarray]:
        places = self._layout(plan)
        reuse = False
        try:
            results = await self._run_in(plan, places, failed_device)
            reuse = True
            return results
        except _StepFailed as failure:
            # The device answered, so it is done with the pool; unless it gave up on a
            # deadline, when its work may still be ending (the HAL's grace is short).
            reuse = not isinstance(failure.error, TimeoutError)
            raise
        except (_Grow, NeuralNetworksError):
            reuse = True  # every step has answered: nobody writes the pool any more
            raise
        finally:
            self._give_back(reuse)  # a run cut short (cancelled) may have a driver still writing it

    async def _run_in(self, plan: ExecutionPlan, places: dict[int, _Place], failed_device: str | None) -> list[np.ndarray]:
        hal = self._hal
        timings: list[tuple[int, int]] = []  # (on hardware, in driver) per step, -1 unknown
        for position, operand in enumerate(hal.inputIndexes):
            given = self._inputs[position]
            if not isinstance(given, _Place):
                np.frombuffer(self._view(places[operand]), dtype=given.dtype)[:] = given.reshape(-1)
        for step in plan.steps:
            if self._compilation._nn._proxy(step.device) is None:
                await trio.lowlevel.checkpoint()
                wall_start = time.monotonic_ns()
                shapes = self._compilation.cpuPreparedModel(step).run(
                    [self._view(places[i]) for i in step.inputs],
                    [self._view(places[i]) for i in step.outputs],
                    [self._run_dims(i) for i in step.inputs],
                )
                self._record_shapes(step, [(step_out, dims, ok) for step_out, (dims, ok) in zip(step.outputs, shapes)])
                timings.append((-1, -1))  # the CPU device measures nothing (Android's doesn't)
                self._compilation._nn._cpu_tracer.step(
                    wall_start, time.monotonic_ns(), len(step.operations),
                    "planned" if failed_device is None else "fallback", failed_device)
            else:
                timings.append(await self._run_on_driver(step, places))
        # Android 10 reports durations only of a run one driver step made whole (a
        # measured compilation is for one device); a -1 from the driver is "unknown".
        single = timings[0] if len(timings) == 1 else (-1, -1)
        self._durations = {
            code: value for code, value in zip((DurationCode.ON_HARDWARE, DurationCode.IN_DRIVER), single) if value >= 0
        }
        results = []
        for position, operand in enumerate(hal.outputIndexes):
            dims = self._shapes.get(operand) or list(hal.operands[operand].dimensions)
            dtype = dtypeOf(hal.operands[operand].type)
            count = math.prod(dims)
            array = np.frombuffer(self._view(places[operand])[: count * dtype.itemsize], dtype=dtype).reshape(dims)
            target = self._outputs.get(position)
            if target is not None and not isinstance(target, _Place):
                memoryview(target).cast("B")[: array.nbytes] = array.tobytes()
                if isinstance(target, np.ndarray):
                    array = target if target.size == count else target.reshape(-1)[:count].reshape(dims)
                else:
                    array = array.copy()
            elif target is None and places[operand].memory is None:
                array = array.copy()  # the pool is the next run's (the compilation's or the burst's)
            results.append(array)
        return results

    async def _run_on_driver(self, step: ExecutionStep, places: dict[int, _Place]) -> tuple[int, int]:
        pools: list[SharedMemory] = [self._pool]
        pool_of: dict[int, int] = {}

        def argument(operand: int) -> Any:
            place = places[operand]
            if place.memory is None:
                index = 0
            else:
                index = pool_of.get(id(place.memory))
                if index is None:
                    index = pool_of[id(place.memory)] = len(pools)
                    pools.append(place.memory.sharedMemory)
            location = DataLocation(poolIndex=index, offset=place.offset, length=place.length, padding=0)
            return RequestArgument(hasNoValue=False, location=location, dimensions=list(self._run_dims(operand)))

        request = Request(
            inputs=[argument(i) for i in step.inputs],
            outputs=[argument(i) for i in step.outputs],
            pools=pools,
        )
        prepared = self._compilation.preparedModel(step)
        try:
            if self._burst is not None and not self._hints:
                try:
                    controller = await self._burst.controller(step, prepared)
                except NeuralNetworksError as e:
                    raise _StepFailed(step.device.name, e) from None
                tokens = [self._burst.memoryToken(p) for p in pools]
                timeout = IPreparedModel.DEFAULT_LOOP_TIMEOUT_DURATION_NS
                result = await controller.executeSynchronously(request, tokens, self._measure, _NO_DEADLINE, timeout)
            elif self._hints:
                result = await prepared.executeWithHints(request, self._measure, _NO_DEADLINE, self._hal_hints())
            else:
                timeout = IPreparedModel.DEFAULT_LOOP_TIMEOUT_DURATION_NS
                result = await prepared.executeSynchronously(request, self._measure, _NO_DEADLINE, timeout)
        except RemoteException as e:
            raise _StepFailed(step.device.name, errorFromRemote(step.device.name, "execute", e)) from None
        if result is not None:
            self._record_result(step, result)
        timing = getattr(result, "timing", None)
        if timing is None:
            return (-1, -1)
        return (timing.timeOnDeviceNs, timing.timeInDriverNs)

    def _run_dims(self, operand: int) -> tuple[int, ...]:
        """The dimensions this run gives operand (a model input's from setInput), else ()."""
        hal = self._hal
        if hal.operands[operand].lifetime == OperandLifeTime.SUBGRAPH_INPUT:
            return self._dims.get(hal.inputIndexes.index(operand), ())
        return ()

    def _record_result(self, step: ExecutionStep, result: Any) -> None:
        """The output shapes the driver reported (the HAL's ``ExecutionResult`` is the contract)."""
        shapes = list(result.outputShapes or ())
        if shapes and len(shapes) != len(step.outputs):
            raise _StepFailed(step.device.name, errorFromRemote(
                step.device.name, "execute", ValueError(f"{len(shapes)} output shapes for {len(step.outputs)} outputs")))
        reported = [(o, [int(d) for d in s.dimensions], bool(s.isSufficient)) for o, s in zip(step.outputs, shapes)]
        if not result.outputSufficientSize and all(ok for _, _, ok in reported):
            reported = [(o, dims, False) for o, dims, _ in reported] or [(o, [], False) for o in step.outputs]
        self._record_shapes(step, reported)

    def _record_shapes(self, step: ExecutionStep, reported: list[tuple[int, list[int], bool]]) -> None:
        """Keep each output's dimensions as the device reported them; an output it found too
        small ends the run with OUTPUT_INSUFFICIENT_SIZE, which is the app's to fix, not a
        device failure: no fallback. A region of the runtime's own (no setOutput) is the
        runtime's to fix: it grows to the size said and the run starts again (_Grow)."""
        for operand, dims, _ in reported:
            if dims:
                self._shapes[operand] = dims
        small = [o for o, _, ok in reported if not ok]
        if not small:
            return
        hal = self._hal
        own = []
        for operand in small:
            position = hal.outputIndexes.index(operand) if operand in hal.outputIndexes else None
            dims = self._shapes.get(operand)
            unknown = expectedByteSize(hal.operands[operand]) is None
            if position is not None and unknown and self._outputs.get(position) is None and dims:
                need = math.prod(dims) * dtypeOf(hal.operands[operand].type).itemsize
                if need > self._guess.get(operand, _FIRST_GUESS):
                    own.append((operand, need))
        if len(own) == len(small):
            self._guess.update(own)
            raise _Grow()
        self._durations = {}
        raise OutputInsufficientSizeError(
            f"{step.device.name}: the buffer of operand(s) {small} is too small for the output "
            f"({', '.join(f'{o}: {self._shapes.get(o)}' for o in small)}); getOutputOperandDimensions says the size"
        )

    def getOutputOperandDimensions(self, index: int) -> list[int]:
        """``ANeuralNetworksExecution_getOutputOperandDimensions``: the output's dimensions in the last run.

        As the device reported them (also after an OUTPUT_INSUFFICIENT_SIZE run, so the
        app can size its buffer), else as the model declares them. ``BAD_STATE`` before
        a run ended.
        """
        operand = self._index("getOutputOperandDimensions", "output", index)
        if self._durations is None:
            raise BadStateError("getOutputOperandDimensions: the execution has not computed")
        return list(self._shapes.get(operand, self._hal.operands[operand].dimensions))

    def getOutputOperandRank(self, index: int) -> int:
        """``ANeuralNetworksExecution_getOutputOperandRank``: the rank of the last run's output."""
        return len(self.getOutputOperandDimensions(index))

    def __repr__(self) -> str:
        return f"<Execution of {self._compilation!r}{' (computing)' if self._running else ''}>"


class _Grow(Exception):
    """The run laid out too small a region of its own for an output; run again."""


class _StepFailed(Exception):
    """A driver step failed; carries the device's name and the NNAPI error for it."""

    def __init__(self, device: str, error: NeuralNetworksError) -> None:
        super().__init__(str(error))
        self.device = device
        self.error = error


class Event:
    """``ANeuralNetworksEvent``: the end of a ``startCompute``."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self._results: list[np.ndarray] | None = None
        self._error: BaseException | None = None

    async def _run(self, compute: Any) -> None:
        try:
            self._results = await compute()
        except NeuralNetworksError as e:
            self._error = e
        except trio.Cancelled:
            from ._errors import OpFailedError

            self._error = OpFailedError("the NeuralNetworks runtime closed before the execution ended")
            self._done.set()
            raise
        finally:
            self._done.set()

    @property
    def isDone(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> list[np.ndarray]:
        """``ANeuralNetworksEvent_wait``: the outputs, or the execution's error raised."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._results is not None
        return self._results


