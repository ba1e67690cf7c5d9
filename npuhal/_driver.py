"""The pythonic driver: ``open_driver`` and ``Driver``.

This is what the HAL process (and tools, tests, benchmarks) use to talk to a
vendor driver.  It wraps one ``npu_system`` of the C layer: the emulated
hardware, the driver (the built-in reference driver, or any ``.so`` named by
path) and the event ring.  Nothing it returns holds C memory.

Life cycle::

    async with npuhal.open_driver(clock="virtual") as driver:
        npu = driver.device_by_name("emu-npu")
        handle = driver.load_model(npu, model, emulated_size_bytes=2 << 30)
        work = driver.submit(handle, [x], uid=10001, job_priority=500)
        driver.run_until_idle()                      # virtual clock: time moves only here
        for event in driver.drain_events():
            ...                                      # WorkRequested, WorkStarted, WorkEnded...
        y, = driver.outputs(work)

Events and results.  The C layer queues every event in a ring and makes an
eventfd readable.  Whoever drains (``drain_events``, ``wait_events``, the
``events()`` stream) gets each event exactly once, oldest first; the driver
also reads every event on its way past, to know when a work has *ended*: only
then does it release the work's input and output buffers (C borrows them until
the final ``WorkEnded``) and make ``outputs()`` and ``wait_work()`` answer.
Under the virtual clock, ``advance``/``run_until_idle`` read the events they
caused at once (they stay queued for the next ``drain_events``), so results are
ready as soon as the call returns.

Ended works are remembered for their results up to ``keep_ended`` of them
(oldest forgotten first); ``forget(work_id)`` drops one sooner.  Events that a
caller never drains are likewise kept up to ``max_backlog``, then the oldest are
dropped and counted in ``events_dropped``: a HAL that forwards events must keep
draining, as a real one must keep reading its driver's ring.

Threads.  Everything here runs on the caller's thread; under the real clock the
C layer's worker threads compute in the background and only ever signal the
eventfd.  The driver is not thread-safe on the Python side: use it from one
trio run (or one plain thread).
"""

from __future__ import annotations

import collections
import math
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import trio

from interfaces.android.hardware.neuralnetworks import ExecutionPreference, Model

from . import _lowlevel
from ._errors import (
    NpuClosedError,
    NpuExecutionError,
    NpuLookupError,
    NpuOutputTooSmallError,
    NpuStateError,
    NpuValueError,
)
from ._model import io_dtypes, io_shapes, map_pools, mapped
from ._types import (
    Device,
    DriverEvent,
    EndReason,
    PreemptionMode,
    SchedulingConfig,
    SchedulingMode,
    SliceCost,
    ThermalSeverity,
    WorkEnded,
    WorkRequested,
    WorkStarted,
)

__all__ = ["open_driver", "Driver", "ModelHandle", "MemoryInfo", "WorkTimes", "run_model", "work_times"]

_CLOCKS = {"virtual": "NPU_CLOCK_VIRTUAL", "real": "NPU_CLOCK_REAL"}


def _mode(enum_cls, value: Any) -> int:
    try:
        return int(enum_cls(value))
    except ValueError:
        names = ", ".join(m.name for m in enum_cls)
        raise NpuValueError(f"{value!r} is not a {enum_cls.__name__} ({names})") from None


@dataclass(frozen=True, slots=True)
class MemoryInfo:
    """A device's memory right now, in emulated bytes."""

    weight_memory_used: int
    weight_memory_bytes: int
    sram_used: int
    sram_bytes: int


class ModelHandle:
    """A model loaded on one device.  Made by ``Driver.load_model``.

    Attributes: ``id`` (the driver's model id), ``device`` (the ``Device`` it was
    loaded on), ``input_shapes`` and ``output_shapes`` (the dimensions of the model's
    inputs and outputs, in order), ``input_dtypes`` and ``output_dtypes`` (their elements'
    numpy dtypes), ``emulated_size_bytes``.  The model itself is not
    kept: the driver copied what it needs at load.
    """

    __slots__ = ("_driver", "id", "device", "input_shapes", "output_shapes", "input_dtypes", "output_dtypes",
                 "emulated_size_bytes", "_loaded")

    def __init__(self, driver: Driver, model_id: int, device: Device, shapes: tuple[Any, Any], size: int,
                 dtypes: tuple[Any, Any]) -> None:
        self._driver = driver
        self.id = model_id
        self.device = device
        self.input_shapes, self.output_shapes = shapes
        self.input_dtypes, self.output_dtypes = dtypes
        self.emulated_size_bytes = size
        self._loaded = True

    @property
    def loaded(self) -> bool:
        return self._loaded and not self._driver.closed

    def unload(self) -> None:
        """Same as ``driver.unload_model(self)``."""
        self._driver.unload_model(self)

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "unloaded"
        return f"<ModelHandle {self.id} on {self.device.name} ({state})>"


@dataclass(slots=True, eq=False)
class _Work:
    id: int
    model: ModelHandle
    outputs: list[Any]
    keep: list[Any] | None  # the cdata and Python buffers C borrows until the final end
    shapes: Any = None  # the struct npu_shape[] C fills with the outputs' dimensions
    starts: int = 0
    ended: WorkEnded | None = None


def _known(shape: tuple[int, ...]) -> bool:
    """Whether a declared shape is complete (a scalar's () is; a tensor's 0 is not known)."""
    return 0 not in shape


def _run_shape(declared: tuple[int, ...], given: Sequence[int] | None, position: int) -> tuple[int, ...]:
    """Input ``position``'s shape for one run: the given dimensions where the model leaves
    them unspecified (each > 0, a specified one the same), else the declared ones."""
    if not given:
        if not _known(declared):
            raise NpuValueError(f"input {position} has unspecified dimensions {list(declared)}: give input_dims")
        return declared
    given = tuple(int(d) for d in given)
    if (declared and len(given) != len(declared)) or any(d <= 0 for d in given) or \
            any(w and d != w for d, w in zip(given, declared)):
        raise NpuValueError(f"input {position} is given dimensions {list(given)}, the model's are {list(declared)}")
    return given


def _as_input(obj: Any, shape: tuple[int, ...], position: int, dtype: np.dtype) -> Any:
    count = math.prod(shape)
    obj = mapped(obj, writable=False)
    if isinstance(obj, np.ndarray):
        if obj.size != count:
            raise NpuValueError(f"input {position} has {obj.size} elements, the model's input {list(shape)} needs {count}")
        # An array of another dtype, or strided, is copied; the copy is what C borrows.
        return np.ascontiguousarray(obj, dtype=dtype)
    try:
        nbytes = memoryview(obj).nbytes
    except TypeError:
        raise NpuValueError(f"input {position} must be a numpy array or bytes-like, got {type(obj).__name__}") from None
    if nbytes != dtype.itemsize * count:
        raise NpuValueError(
            f"input {position} holds {nbytes} bytes, the model's input {list(shape)} of {dtype} needs {dtype.itemsize * count}")
    return obj


def _as_output(obj: Any, shape: tuple[int, ...], position: int, dtype: np.dtype) -> Any:
    count = math.prod(shape)
    if obj is None:
        if not _known(shape):
            raise NpuValueError(f"output {position}'s dimensions {list(shape)} are known only when it runs: give a buffer")
        try:
            return np.zeros(shape, dtype=dtype)
        except (ValueError, MemoryError) as exc:  # dimensions whose product numpy cannot hold
            raise NpuValueError(f"output {position} of {list(shape)} cannot be allocated: {exc}") from None
    obj = mapped(obj, writable=True)
    if isinstance(obj, np.ndarray):
        if obj.dtype != dtype or not obj.flags.c_contiguous or not obj.flags.writeable:
            raise NpuValueError(f"output {position} must be a writable, C-contiguous {dtype} array")
        if not _known(shape):
            return obj  # any size: the run says whether it held the output
        if obj.size != count:
            raise NpuValueError(f"output {position} has {obj.size} elements, the model's output {list(shape)} needs {count}")
        return obj
    try:
        view = memoryview(obj)
    except TypeError:
        raise NpuValueError(f"output {position} must be a numpy array or a writable buffer, got {type(obj).__name__}") from None
    if view.readonly:
        raise NpuValueError(f"output {position} is read-only")
    if _known(shape) and view.nbytes != dtype.itemsize * count:
        raise NpuValueError(f"output {position} holds {view.nbytes} bytes, the model's output {list(shape)} of {dtype} "
                            f"needs {dtype.itemsize * count}")
    return obj


@dataclass(frozen=True, slots=True)
class WorkTimes:
    """One work's life read from driver events, in emulated ns (``None``: no such event)."""

    requested_ns: int | None
    started_ns: int | None  # the first start (later ones resume it after a pause)
    ended_ns: int | None  # the final end (a pause is not one)
    end_reason: EndReason | None  # that end's reason


def work_times(events: Iterable[Any], work: int) -> WorkTimes:
    """When work ``work`` (a ``Driver.submit`` id) was requested, first started and
    finally ended, and why it ended, from a stream of driver events."""
    requested = started = ended = reason = None
    for e in events:
        if not isinstance(e, (WorkRequested, WorkStarted, WorkEnded)) or e.info.id != work:
            continue
        if isinstance(e, WorkRequested):
            requested = e.time_ns
        elif isinstance(e, WorkStarted):
            if started is None:
                started = e.time_ns
        elif e.is_final and reason is None:
            ended, reason = e.time_ns, e.reason
    return WorkTimes(requested, started, ended, reason)


def _io_buffers(
    shapes: tuple[Any, Any], dtypes: tuple[Any, Any], inputs: Sequence[Any], outputs: Sequence[Any] | None,
    input_dims: Sequence[Sequence[int] | None] | None = None,
) -> tuple[list[Any], list[Any]]:
    """The C-ready input and output buffers of one run, each checked against its shape and dtype
    (an input's: as given in ``input_dims`` where the model leaves it unspecified)."""
    in_shapes, out_shapes = shapes
    in_dtypes, out_dtypes = dtypes
    inputs = list(inputs)
    if len(inputs) != len(in_shapes):
        raise NpuValueError(f"the model takes {len(in_shapes)} inputs, got {len(inputs)}")
    given_dims = list(input_dims) if input_dims is not None else [None] * len(in_shapes)
    if len(given_dims) != len(in_shapes):
        raise NpuValueError(f"the model takes {len(in_shapes)} inputs, got {len(given_dims)} input_dims")
    in_shapes = [_run_shape(tuple(s), d, i) for i, (s, d) in enumerate(zip(in_shapes, given_dims))]
    given = [None] * len(out_shapes) if outputs is None else list(outputs)
    if len(given) != len(out_shapes):
        raise NpuValueError(f"the model has {len(out_shapes)} outputs, got {len(given)}")
    ins = [_as_input(x, shape, i, dt) for i, (x, shape, dt) in enumerate(zip(inputs, in_shapes, in_dtypes, strict=True))]
    outs = [_as_output(o, shape, i, dt) for i, (o, shape, dt) in enumerate(zip(given, out_shapes, out_dtypes, strict=True))]
    return ins, outs


def _shaped(buffers: Sequence[Any], shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
    out = []
    for buf, shape, dtype in zip(buffers, shapes, dtypes, strict=True):
        arr = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=dtype)
        if arr.shape != shape:
            arr = arr.reshape(-1)[: math.prod(shape)].reshape(shape)  # a larger buffer than the output
        out.append(arr)
    return out


def run_model(model: Model, inputs: Sequence[Any], outputs: Sequence[Any] | None = None) -> list[np.ndarray]:
    """Run a whole model (the HAL's ``Model`` parcelable) on the calling thread with the hardware's own kernels.

    No driver, no device, no emulated time: this is what a CPU device such as
    NNAPI's ``nnapi-reference`` needs, computing exactly what the emulated NPU
    computes.  Arguments as for ``Driver.submit``; returns the outputs, shaped.
    The GIL is released while C computes.  A malformed model raises
    ``NpuModelError``; a wrong buffer ``NpuValueError``.
    """
    shapes = io_shapes(model)
    dtypes = io_dtypes(model)
    ins, outs = _io_buffers(shapes, dtypes, inputs, outputs)
    _lowlevel.run_model(model, map_pools(model), ins, outs)
    return _shaped(outs, shapes[1], dtypes[1])


class Driver:
    """One vendor driver over one emulated NPU.  Use ``open_driver`` (or ``Driver.open``).

    Closing (``aclose``, ``close``, leaving ``async with``/``with``) always
    releases the C system: its worker threads stop, work still in flight ends,
    the eventfd closes.  Closing twice is harmless; any other call afterwards,
    on the driver or its model handles, raises ``NpuClosedError`` (a
    ``trio.ClosedResourceError``).
    """

    def __init__(self, system: _lowlevel.System, *, keep_ended: int, max_backlog: int, clock: str) -> None:
        self._sys = system
        self._clock = clock
        self._fd = system.event_fd()
        self._works: dict[int, _Work] = {}
        self._ended: collections.OrderedDict[int, _Work] = collections.OrderedDict()
        self._keep_ended = keep_ended
        self._backlog: collections.deque[DriverEvent] = collections.deque()
        self._max_backlog = max_backlog
        self._dropped = 0
        self._models: dict[int, ModelHandle] = {}
        # Only one task may wait_readable() on the fd; the others wait for it
        # (or any other pull) on a broadcast event.
        self._fd_scope: trio.CancelScope | None = None
        self._fd_wants: Callable[[], bool] | None = None  # what the fd-waiter waits for
        self._pulled = trio.Event()
        self._generation = 0
        self._closed = False

    # ---- opening and closing ----------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        clock: str = "virtual",
        speed: float = 1.0,
        preemption: PreemptionMode | None = None,
        scheduling: SchedulingMode | None = None,
        slices_per_operation: int | None = None,
        thermal_thresholds_c: Sequence[float] | None = None,
        ambient_c: float | None = None,
        thermal_time_constant_ms: float | None = None,
        keep_ended: int = 4096,
        max_backlog: int = 1 << 16,
    ) -> Driver:
        """Open a vendor driver over a fresh emulated NPU, synchronously (for tools; close it).

        Arguments:
            path: a driver ``.so`` to dlopen; ``None`` for the built-in reference driver.
            clock: ``"virtual"`` (no threads; time moves only in ``advance`` and
                ``run_until_idle``, so runs repeat exactly) or ``"real"`` (worker
                threads; emulated durations take ``speed`` times as long in wall time).
            preemption, scheduling: override the driver's modes (``None``: its choice).
            slices_per_operation: how finely each operation is cut (preemption points).
            thermal_thresholds_c: six temperatures at which LIGHT..SHUTDOWN begin.
            ambient_c, thermal_time_constant_ms: the thermal model (``None``: C defaults).
            keep_ended, max_backlog: bounds on remembered results and undrained events.

        Errors: ``NpuDriverError`` when the ``.so`` cannot be loaded or its init
        fails, ``NpuAbiError`` when it was built against other headers.
        """
        if clock not in _CLOCKS:
            raise NpuValueError(f"clock must be 'virtual' or 'real', not {clock!r}")
        if not (isinstance(speed, (int, float)) and speed > 0 and math.isfinite(speed)):
            raise NpuValueError(f"speed must be a positive number, not {speed!r}")
        if slices_per_operation is not None and not (isinstance(slices_per_operation, int) and slices_per_operation > 0):
            raise NpuValueError(f"slices_per_operation must be a positive int, not {slices_per_operation!r}")
        if path is not None:
            # Absolute, because dlopen() of a bare "x.so" searches the library
            # path, not the current directory the caller meant.
            path = os.path.abspath(os.fspath(path))
            if not os.path.isfile(path):
                raise NpuValueError(f"no driver at {path!r}")
        system = _lowlevel.System(
            clock=getattr(_lowlevel.lib, _CLOCKS[clock]),
            speed_factor=float(speed),
            driver_path=path,
            thermal_thresholds_c=thermal_thresholds_c,
            ambient_c=0.0 if ambient_c is None else float(ambient_c),
            thermal_time_constant_ms=0.0 if thermal_time_constant_ms is None else float(thermal_time_constant_ms),
            preemption_mode=0 if preemption is None else _mode(PreemptionMode, preemption),
            scheduling_mode=0 if scheduling is None else _mode(SchedulingMode, scheduling),
            slices_per_operation=slices_per_operation or 0,
        )
        return cls(system, keep_ended=keep_ended, max_backlog=max_backlog, clock=clock)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Release everything now.  Safe to call twice, and outside trio."""
        if self._closed:
            return
        self._closed = True
        try:
            # Wake any task blocked in wait_readable on our fd before C closes it.
            trio.lowlevel.notify_closing(self._fd)
        except RuntimeError:
            pass  # not inside a trio run: nobody can be waiting on it
        self._sys.destroy()
        for work in self._works.values():
            work.keep = None
        self._works.clear()
        for handle in self._models.values():
            handle._loaded = False
        self._models.clear()
        self._wake()

    async def aclose(self) -> None:
        """Close (see ``close``); a checkpoint, and releases even if cancelled."""
        self.close()
        await trio.lowlevel.checkpoint()

    async def __aenter__(self) -> Driver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        # A driver dropped without closing still stops its C threads before its
        # buffers go; close() first, while the work records are intact.
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _live(self) -> _lowlevel.System:
        if self._closed:
            raise NpuClosedError("the driver is closed")
        return self._sys

    # ---- devices --------------------------------------------------------------

    @property
    def vendor(self) -> str:
        return self._live().vendor()

    @property
    def devices(self) -> list[Device]:
        """Every device, asked of the driver now (status can change, e.g. to OFFLINE)."""
        sys = self._live()
        return [sys.get_device_info(i) for i in range(sys.device_count())]

    def device(self, number: int) -> Device:
        return self._live().get_device_info(self._number(number))

    def device_by_name(self, name: str) -> Device:
        for device in self.devices:
            if device.name == name:
                return device
        raise NpuLookupError(f"no device named {name!r}; the driver has {[d.name for d in self.devices]}")

    def memory_info(self, device: Device | int) -> MemoryInfo:
        return MemoryInfo(*self._live().device_memory(self._number(device)))

    @staticmethod
    def _number(device: Device | int) -> int:
        number = device.number if isinstance(device, Device) else device
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise NpuValueError(f"a device is a Device or a device number, not {device!r}")
        return number

    # ---- scheduling configs ---------------------------------------------------

    def set_scheduling_configs(self, configs: Sequence[SchedulingConfig]) -> None:
        """``IScheduling.setSchedulingConfigs``: replace every uid's config (all or nothing).

        Raises ``NpuInvalidPriorityError`` for a config out of range and
        ``NpuDuplicateUidError`` when one uid appears twice; either way nothing changes.
        """
        self._live().set_scheduling_configs(list(configs))

    def update_scheduling_configs(self, configs: Sequence[SchedulingConfig]) -> None:
        """``IScheduling.updateSchedulingConfigs``: replace or add the given uids' configs."""
        self._live().update_scheduling_configs(list(configs))

    # ---- models ---------------------------------------------------------------

    def supported_operations(self, device: Device | int, model: Model) -> list[bool]:
        """``getSupportedOperations_1_2``: one bool per operation of ``model``.

        ``model`` is the HAL's ``Model`` parcelable (see ``npuhal._model``).  A
        malformed model raises ``NpuModelError`` rather than answering False.
        """
        sys = self._live()
        return sys.get_supported_operations(self._number(device), model, map_pools(model))

    def load_model(
        self,
        device: Device | int,
        model: Model,
        *,
        emulated_size_bytes: int = 0,
        emulated_sram_bytes: int = 0,
        cost_scale: float = 1.0,
        preference: ExecutionPreference | int | None = None,
    ) -> ModelHandle:
        """Load ``model`` into ``device``'s weight memory.

        ``emulated_size_bytes`` is how much weight memory the model claims (a
        "2 GB" model reserves 2 GB of emulated memory and allocates only its
        real tensors); 0 means its real constant bytes.  ``cost_scale``
        multiplies its FLOPs and bytes in the hardware's cost model, to emulate
        a model bigger than the tensors it really computes.  ``model`` is the
        HAL's ``Model`` parcelable; its pools are mapped and read only during the
        call (the caller may close them after).  ``preference`` is the NNAPI
        ``ExecutionPreference`` the app compiled for (None: not said), passed to the
        driver (``npu_load_params.preference``; the reference driver places a
        LOW_POWER model on emu-hetero's lower-power part).  Past capacity: ``NpuCapacityError``.
        """
        if preference is not None:
            try:
                preference = ExecutionPreference(preference)
            except ValueError:
                raise NpuValueError(f"unknown execution preference {preference!r}") from None
        shapes = io_shapes(model)
        sys = self._live()
        number = self._number(device)
        for name, value in (("emulated_size_bytes", emulated_size_bytes), ("emulated_sram_bytes", emulated_sram_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise NpuValueError(f"{name} must be a non-negative int, not {value!r}")
        if not (isinstance(cost_scale, (int, float)) and cost_scale > 0 and math.isfinite(cost_scale)):
            raise NpuValueError(f"cost_scale must be a positive number, not {cost_scale!r}")
        dev = sys.get_device_info(number)
        model_id = sys.load_model(
            number,
            model,
            map_pools(model),
            emulated_weight_bytes=emulated_size_bytes,
            emulated_sram_bytes=emulated_sram_bytes,
            cost_scale=float(cost_scale),
            preference=preference,
        )
        handle = ModelHandle(self, model_id, dev, shapes, emulated_size_bytes, io_dtypes(model))
        self._models[model_id] = handle
        return handle

    def unload_model(self, handle: ModelHandle) -> None:
        """Free a model's memory; its work in flight ends ``CANCELLED_SYSTEM``."""
        sys = self._live()
        if self._models.get(handle.id) is not handle:
            raise NpuLookupError(f"{handle!r} is not loaded in this driver")
        sys.unload_model(handle.id)
        handle._loaded = False
        del self._models[handle.id]

    # ---- work -----------------------------------------------------------------

    def submit(
        self,
        model: ModelHandle,
        inputs: Sequence[Any],
        outputs: Sequence[Any] | None = None,
        *,
        uid: int,
        original_uid: int | None = None,
        debug_pid: int = 0,
        job_priority: int,
        group_id: uuid.UUID | bytes | None = None,
        feature_id: str | None = None,
        input_dims: Sequence[Sequence[int] | None] | None = None,
    ) -> int:
        """Queue one execution of ``model``; returns its work id (``WorkInfo.id``).

        ``input_dims`` (one entry per input, ``None`` for "as declared") gives the
        dimensions of inputs the model leaves unspecified (NNAPI's
        ``RequestArgument.dimensions``); an output whose dimensions only the run gives
        needs a buffer of the caller's, of any size: ``output_shapes(work_id)`` says
        what it got, and a buffer too small refuses the submission
        (``NpuOutputTooSmallError``, with ``output_shapes``) when the input shapes tell
        at once, or ends the work ``FAILED`` when only computed values do.

        ``inputs``: one per model input, numpy arrays (any dtype, converted to
        float32), bytes-like objects or ``SharedMemory`` regions of the right
        size.  ``outputs``: one per model output, writable float32 numpy
        arrays, buffers or ``SharedMemory`` regions, written in place;
        ``None`` (or a ``None`` entry) lets the driver allocate them, to read
        with ``outputs(work_id)``.  The buffers are kept alive here until the
        work's final end, as the C layer borrows them until then.

        ``group_id`` is the execution group's NpuUuid (a ``uuid.UUID`` or 16
        bytes); ``feature_id`` the ``debugFeatureId``, which the C layer keeps
        to its first 63 bytes.  ``original_uid`` defaults to ``uid`` (no
        attribution).  Refusals:
        ``NpuInvalidPriorityError`` (job priority outside 0..1000),
        ``NpuDirectAccessError``, ``NpuAttributionError``; a refused submission
        emits no event.
        """
        sys = self._live()
        if not isinstance(model, ModelHandle) or self._models.get(model.id) is not model:
            raise NpuLookupError(f"{model!r} is not a model loaded in this driver")
        ins, outs = _io_buffers((model.input_shapes, model.output_shapes), (model.input_dtypes, model.output_dtypes),
                                inputs, outputs, input_dims)
        given = _lowlevel.new_shapes(len(ins), input_dims) if input_dims is not None else None
        shapes = _lowlevel.new_shapes(len(outs))
        if isinstance(group_id, (bytes, bytearray)):
            if len(group_id) != 16:
                raise NpuValueError("group_id must be a UUID or 16 bytes")
            group_id = uuid.UUID(bytes=bytes(group_id))
        elif group_id is not None and not isinstance(group_id, uuid.UUID):
            raise NpuValueError(f"group_id must be a UUID or 16 bytes, not {group_id!r}")
        if feature_id is not None and not isinstance(feature_id, str):
            raise NpuValueError(f"feature_id must be a str, not {feature_id!r}")
        try:
            work_id, keep = sys.submit_work(
                model_id=model.id,
                uid=uid,
                original_uid=uid if original_uid is None else original_uid,
                debug_pid=debug_pid,
                job_priority=job_priority,
                group_id=group_id,
                feature_id=feature_id,
                inputs=ins,
                outputs=outs,
                input_shapes=given,
                output_shapes=shapes,
            )
        except NpuOutputTooSmallError as exc:
            exc.output_shapes = _lowlevel.read_shapes(shapes, len(outs))
            raise
        self._works[work_id] = _Work(work_id, model, outs, keep + ins + outs, shapes=shapes)
        return work_id

    def output_shapes(self, work_id: int) -> list[tuple[tuple[int, ...], bool]]:
        """Each output's dimensions as the work computed them (as far as it got: () while
        not known) and whether its buffer held it (False: the work ended FAILED for it)."""
        self._live()
        self._pull()
        work = self._record(work_id)
        return _lowlevel.read_shapes(work.shapes, len(work.outputs))

    def cancel(self, work_id: int) -> None:
        """End a work with ``CANCELLED_USER`` (at once if queued, else after its slice)."""
        self._live().cancel_work(work_id)

    def _record(self, work_id: int) -> _Work:
        work = self._works.get(work_id) or self._ended.get(work_id)
        if work is None:
            raise NpuLookupError(f"no work {work_id} (never submitted here, or forgotten)")
        return work

    def work_ended(self, work_id: int) -> WorkEnded | None:
        """The work's final ``WorkEnded`` if it has been seen, else None."""
        self._live()
        self._pull()
        return self._record(work_id).ended

    def outputs(self, work_id: int) -> list[np.ndarray]:
        """The results of a work that ended ``COMPLETED``, shaped as the model's outputs.

        The arrays are the very buffers the work wrote: the caller's own array
        when it gave one of the output's shape, else a view over its buffer.  ``NpuStateError`` if the work has not
        ended yet or ended otherwise (the message says how).
        """
        self._live()
        self._pull()
        work = self._record(work_id)
        if work.ended is None:
            raise NpuStateError(f"work {work_id} has not ended yet")
        if work.ended.reason is not EndReason.COMPLETED:
            raise NpuStateError(f"work {work_id} ended {work.ended.reason.name}, it has no results")
        shapes = [got or declared for (got, _), declared in
                  zip(_lowlevel.read_shapes(work.shapes, len(work.outputs)), work.model.output_shapes)]
        return _shaped(work.outputs, shapes, work.model.output_dtypes)

    def forget(self, work_id: int) -> None:
        """Drop an ended work's record (and its output buffers) now."""
        self._ended.pop(work_id, None)

    async def wait_work(self, work_id: int) -> WorkEnded:
        """Wait until the work has ended for good (any reason but PAUSED).

        Waits on the eventfd itself if no other task does; otherwise it is woken
        by whoever drains.  Under the virtual clock something must advance time.
        """
        self._live()
        self._pull()
        work = self._record(work_id)
        if work.ended is not None:
            await trio.lowlevel.checkpoint()
            return work.ended

        def ended() -> bool:
            return work.ended is not None

        while True:
            await self._wait_for_more(ended)  # a checkpoint: nothing more is owed once it ended
            self._live()
            self._pull()
            if work.ended is not None:
                return work.ended

    async def execute(
        self,
        model: ModelHandle,
        inputs: Sequence[Any],
        outputs: Sequence[Any] | None = None,
        **work: Any,
    ) -> list[np.ndarray]:
        """Submit, wait for the end, return the outputs: one synchronous execution.

        Takes ``submit``'s arguments.  A work that ends other than COMPLETED
        raises ``NpuExecutionError`` carrying the ``WorkEnded``.  If the caller
        is cancelled while waiting, the work is cancelled too.
        """
        work_id = self.submit(model, inputs, outputs, **work)
        try:
            ended = await self.wait_work(work_id)
        except trio.Cancelled:
            if not self._closed:
                try:
                    self.cancel(work_id)
                except NpuLookupError:
                    pass  # it ended meanwhile
            raise
        if ended.reason is not EndReason.COMPLETED:
            raise NpuExecutionError(f"work {work_id} ended {ended.reason.name}", ended=ended)
        return self.outputs(work_id)

    # ---- events ---------------------------------------------------------------

    def _pull(self, *, wake: bool = True) -> bool:
        """Read every event C has queued: update works, then keep them for the drainers.
        Whether there were any; ``wake=False`` leaves waking the waiters to the caller."""
        if self._closed:
            return False
        events = self._sys.drain_events()
        if not events:
            return False
        for event in events:
            if isinstance(event, WorkEnded):
                self._on_ended(event)
            elif isinstance(event, WorkStarted):
                work = self._works.get(event.info.id)
                if work is not None:
                    work.starts += 1
        self._backlog.extend(events)
        excess = len(self._backlog) - self._max_backlog
        for _ in range(max(excess, 0)):
            self._backlog.popleft()
            self._dropped += 1
        if wake:
            self._wake()
        return True

    def _wake(self) -> None:
        """New events were read: wake every waiter on the broadcast, and the fd-waiter
        if what it waits for is now there (events to drain, its work's end). Waking it
        for nothing would cost its task a trip through trio's loop and its fd a new
        registration, on every execution of the HAL."""
        self._generation += 1
        self._broadcast()
        if self._fd_scope is not None and (self._fd_wants is None or self._fd_wants()):
            self._fd_scope.cancel()

    def _broadcast(self) -> None:
        self._pulled.set()
        self._pulled = trio.Event()

    def _on_ended(self, event: WorkEnded) -> None:
        if not event.is_final:
            return
        work = self._works.pop(event.info.id, None)
        if work is None:
            return
        work.ended = event
        work.keep = None  # C no longer touches the buffers
        self._ended[work.id] = work
        while len(self._ended) > self._keep_ended:
            self._ended.popitem(last=False)

    async def _wait_for_more(self, wants: Callable[[], bool]) -> None:
        """Return once new events may have arrived (after a pull by anyone).

        One task at a time sleeps on the eventfd (trio allows no more); the
        others sleep on a broadcast that every pull sets.  Another task's pull
        wakes the fd-waiter only once ``wants()`` (what it waits for) is true.
        However the fd-waiter leaves (woken, cancelled, closed) it broadcasts,
        so that if events are still to come another waiter takes the fd over.
        """
        if self._fd_scope is not None:
            await self._pulled.wait()
            return
        generation = self._generation
        try:
            with trio.CancelScope() as scope:
                self._fd_scope, self._fd_wants = scope, wants
                try:
                    await trio.lowlevel.wait_readable(self._fd)
                except (trio.ClosedResourceError, OSError):
                    if self._closed:
                        raise NpuClosedError("the driver was closed while waiting for events") from None
                    raise
                finally:
                    self._fd_scope = self._fd_wants = None
            if self._closed:
                raise NpuClosedError("the driver was closed while waiting for events")
            if generation == self._generation:
                self._pull()
        finally:
            self._broadcast()

    def drain_events(self) -> list[DriverEvent]:
        """Every event not yet drained, oldest first; never blocks."""
        self._live()
        pulled = self._pull(wake=False)
        events = list(self._backlog)
        self._backlog.clear()
        if pulled:
            self._wake()  # after the backlog is taken: an fd-waiter for events has none to get
        return events

    async def wait_events(self) -> list[DriverEvent]:
        """Wait until at least one event is there, then drain them all.

        A checkpoint even when events are already waiting.  Sleeps on the C
        layer's eventfd (``trio.lowlevel.wait_readable``), so a real-clock work
        finishing on a C worker thread wakes it.  Raises ``NpuClosedError`` if
        the driver is closed meanwhile.
        """
        await trio.lowlevel.checkpoint()
        while True:
            events = self.drain_events()
            if events:
                return events
            await self._wait_for_more(self._has_backlog)

    def _has_backlog(self) -> bool:
        return bool(self._backlog)

    def events(self) -> AsyncIterator[DriverEvent]:
        """``async for event in driver.events():`` one event at a time, until closed."""
        return _EventStream(self)

    @property
    def events_dropped(self) -> int:
        """Events lost: to the C ring overflowing, or to an undrained backlog."""
        return self._dropped + (0 if self._closed else self._sys.events_dropped())

    # ---- the cost profile -----------------------------------------------------

    def set_profiling(self, capacity: int | None = 1 << 16) -> None:
        """Record each slice the hardware charges (``drain_slices``), keeping at most
        ``capacity`` undrained records (later ones are dropped and counted); None or 0
        stops recording. Costs a little per slice while on."""
        self._live().set_profiling(capacity or 0)

    def drain_slices(self) -> tuple[list[SliceCost], int]:
        """The slices charged since the last drain, oldest first (``SliceCost``), and how
        many records were dropped meanwhile for want of room."""
        return self._live().drain_slices()

    # ---- the clock ------------------------------------------------------------

    @property
    def clock(self) -> str:
        """``"virtual"`` or ``"real"``."""
        return self._clock

    @property
    def now_ns(self) -> int:
        """Emulated time since the driver opened, in nanoseconds."""
        return self._live().now_ns()

    @property
    def now_ms(self) -> float:
        return self.now_ns / 1e6

    def _virtual(self) -> _lowlevel.System:
        sys = self._live()
        if self._clock != "virtual":
            raise NpuStateError("this driver runs on the real clock: time cannot be stepped")
        return sys

    def advance(self, ms: float) -> None:
        """Virtual clock: move time forward by ``ms`` milliseconds, doing what falls due."""
        sys = self._virtual()
        if not (isinstance(ms, (int, float)) and ms >= 0 and math.isfinite(ms)):
            raise NpuValueError(f"advance needs a non-negative number of ms, not {ms!r}")
        sys.advance(round(ms * 1e6))
        self._pull()

    def advance_and_drain(self, ms: float) -> list[DriverEvent]:
        """Virtual clock: ``advance(ms)`` then ``drain_events()``, in one: the events the
        step caused (and any before it), taken by the caller, so that no task waiting
        for events is woken to find none."""
        sys = self._virtual()
        if not (isinstance(ms, (int, float)) and ms >= 0 and math.isfinite(ms)):
            raise NpuValueError(f"advance needs a non-negative number of ms, not {ms!r}")
        sys.advance(round(ms * 1e6))
        return self.drain_events()

    def advance_to_next_event(self) -> float:
        """Virtual clock: move to the next slice boundary; returns the new ``now_ms``."""
        sys = self._virtual()
        now = sys.advance_to_next_event()
        self._pull()
        return now / 1e6

    @property
    def next_event_ns(self) -> int | None:
        """Virtual clock: when ``advance_to_next_event`` would stop (emulated ns), without
        moving time; None when nothing is left to happen.  A caller that drives the
        driver (the lab's Python scheduling policies) steps from event to event with it
        and never passes a time it must act at."""
        return self._virtual().next_event_ns()

    def run_until_idle(self, max_ms: float | None = None) -> None:
        """Virtual clock: run until no channel has work (hung ones aside), or ``max_ms`` pass."""
        sys = self._virtual()
        if max_ms is not None and not (isinstance(max_ms, (int, float)) and max_ms > 0 and math.isfinite(max_ms)):
            raise NpuValueError(f"max_ms must be a positive number or None, not {max_ms!r}")
        sys.run_until_idle(0 if max_ms is None else max(1, round(max_ms * 1e6)))
        self._pull()

    # ---- modes, thermal, faults, dump -----------------------------------------

    def set_preemption_mode(self, mode: PreemptionMode) -> None:
        """Override the driver's preemption mode (from the next slice boundary)."""
        self._live().set_preemption_mode(_mode(PreemptionMode, mode))

    def set_scheduling_mode(self, mode: SchedulingMode) -> None:
        self._live().set_scheduling_mode(_mode(SchedulingMode, mode))

    def thermal_state(self) -> tuple[ThermalSeverity, float]:
        """(severity, die temperature in degrees C) now."""
        return self._live().thermal_state()

    def hold_temperature(self, celsius: float | None) -> None:
        """A thermal override: hold the die at ``celsius`` (None: release it).

        Held, the die neither heats with load nor cools at rest, so its severity and
        the throttling that goes with it stay until released (a heat spike moves the
        held temperature). Released, it heats and cools from where it was.
        """
        sys = self._live()
        if celsius is None:
            sys.thermal_override(False)
            return
        if isinstance(celsius, bool) or not isinstance(celsius, (int, float)) or not math.isfinite(celsius):
            raise NpuValueError(f"hold_temperature needs a finite temperature in degrees C or None, not {celsius!r}")
        sys.thermal_override(True, float(celsius))

    @property
    def thermal_held(self) -> bool:
        """Whether a thermal override holds the die."""
        return self._live().thermal_held()

    def fail_next_work(self, device: Device | int) -> None:
        """Fault: the next slice to finish on ``device`` fails its work (ENDED FAILED)."""
        self._live().inject_fault(_lowlevel.lib.NPU_FAULT_FAIL_NEXT_WORK, device=self._number(device))

    def hang_channel(self, device: Device | int, channel: int) -> None:
        """Fault: a channel stops making progress until ``reset_channel``."""
        self._live().inject_fault(_lowlevel.lib.NPU_FAULT_HANG_CHANNEL, device=self._number(device), channel=channel)

    def reset_channel(self, device: Device | int, channel: int) -> None:
        """Un-hang a channel; its stuck work ends FAILED.  ``NpuStateError`` if not hung."""
        self._live().reset_channel(self._number(device), channel)

    def heat_spike(self, celsius: float, device: Device | int = 0) -> None:
        """Fault: the die temperature jumps by ``celsius`` degrees."""
        self._live().inject_fault(_lowlevel.lib.NPU_FAULT_HEAT_SPIKE, device=self._number(device), heat_c=float(celsius))

    def crash(self) -> None:
        """Fault: the driver aborts the whole process, as a driver bug would.  Never returns."""
        self._live().inject_fault(_lowlevel.lib.NPU_FAULT_CRASH)

    def dump(self) -> str:
        """The driver's and the hardware's state, for ``dumpsys``."""
        return self._live().dump()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._models)} models, {len(self._works)} works in flight"
        return f"<npuhal.Driver {self._clock} clock, {state}>"


class _EventStream:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._pending: collections.deque[DriverEvent] = collections.deque()

    def __aiter__(self) -> _EventStream:
        return self

    async def __anext__(self) -> DriverEvent:
        if not self._pending:
            try:
                self._pending.extend(await self._driver.wait_events())
            except NpuClosedError:
                raise StopAsyncIteration from None
        else:
            await trio.lowlevel.checkpoint()
        return self._pending.popleft()


@asynccontextmanager
async def open_driver(path: str | os.PathLike[str] | None = None, **options: Any) -> AsyncIterator[Driver]:
    """Open a vendor driver over a fresh emulated NPU (:meth:`Driver.open`, which names
    the options); closes it on exit.
    """
    driver = Driver.open(path, **options)
    try:
        yield driver
    finally:
        await driver.aclose()
