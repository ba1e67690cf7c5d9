"""The low layer of the binding: ``npu/system.h``, call for call.

This is the only module that touches cdata.  Each method of ``System`` is one C
call of ``npu/system.h``: its arguments are converted to C structs here, its
return code is checked at once (``_check``) and turned into the exception class
that ``npuhal._errors`` maps to the code's name, and what it returns is plain
Python (ints, strings, dataclasses from ``npuhal._types``).  Struct sizes, array
lengths and limits are all read from the compiled extension, never written here.

At import the ABI version compiled into ``npuhal._npu`` is compared with the one
this binding speaks and, in a source checkout, with the one in
``csrc/include/npu/hw.h``: a stale build fails loudly with "run make ext"
rather than strangely, later.
"""

from __future__ import annotations

import pathlib
import re
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from interfaces.android.hardware.neuralnetworks import Model
from interfaces.android.hardware.npu import NpuUuid
from interfaces.c_enums import enum_problem
from interfaces.c_model import c_model

from ._errors import NpuAbiError, NpuError, NpuModelError, NpuStateError, NpuValueError, error_class_for
from ._model import main_subgraph
from ._types import (
    Device,
    DeviceStatus,
    DeviceType,
    EndReason,
    FuseCode,
    MemoryPressure,
    OperandLifeTime,
    OperandType,
    OperationType,
    PerformanceInfo,
    SchedulingConfig,
    SliceCost,
    StartReason,
    ThermalChanged,
    ThermalSeverity,
    WorkEnded,
    WorkInfo,
    WorkRequested,
    WorkStarted,
    DriverEvent,
    PreemptionMode,
    SchedulingMode,
)

try:
    from . import _npu
except ImportError as exc:  # pragma: no cover - depends on the build state
    raise NpuAbiError(
        f"the C extension npuhal._npu is missing or unloadable ({exc}); build it with `make ext`"
    ) from exc

ffi = _npu.ffi
lib = _npu.lib

#: The ABI version (``NPU_ABI_VERSION`` of hw.h) this binding was written for.
BINDING_ABI_VERSION = 4


_HEADER = pathlib.Path(__file__).resolve().parent.parent / "csrc" / "include" / "npu" / "hw.h"


def _abi_problem(compiled: int, cdef: int, header_text: str | None) -> str | None:
    """Why this extension must not be used, or None.  (Pure, for the tests.)"""
    if compiled != cdef or compiled != BINDING_ABI_VERSION:
        return (
            f"npuhal._npu speaks NPU ABI {compiled} (cdef {cdef}), this binding speaks "
            f"{BINDING_ABI_VERSION}: rebuild the extension with `make ext`"
        )
    # In a source checkout the headers may have moved on since the last build.
    found = re.search(r"NPU_ABI_VERSION\s*=\s*(\d+)", header_text or "")
    if found and int(found.group(1)) != compiled:
        return (
            f"csrc/include/npu/hw.h declares NPU ABI {found.group(1)} but npuhal._npu was built "
            f"for {compiled}: the build is stale, run `make ext`"
        )
    return None


def _check_abi() -> None:
    try:
        compiled = int(lib.npu_abi_version())
        cdef = int(lib.NPU_ABI_VERSION)
    except AttributeError as exc:
        raise NpuAbiError(f"npuhal._npu predates the NPU ABI ({exc}): rebuild it with `make ext`") from None
    try:
        text = _HEADER.read_text()
    except OSError:
        text = None  # an installed package: no sources to compare with
    problem = _abi_problem(compiled, cdef, text)
    if problem:
        raise NpuAbiError(problem)


#: The C enum each Python enum must equal, name for name and number for number, and the
#: prefix of its enumerators. The AIDL's own enums (compiled into ``interfaces``) come
#: first; the hardware's, which no AIDL declares, follow.
_C_ENUMS = (
    (DeviceType, "npu_device_type", "NPU_DEVICE_"),
    (DeviceStatus, "npu_device_status", "NPU_STATUS_"),
    (OperandType, "npu_operand_type", "NPU_OPERAND_"),
    (OperandLifeTime, "npu_operand_lifetime", "NPU_LIFETIME_"),
    (OperationType, "npu_operation_type", "NPU_OP_"),
    (FuseCode, "npu_fuse_code", "NPU_FUSE_"),  # FusedActivationFunc
    (StartReason, "npu_start_reason", "NPU_START_REASON_"),
    (EndReason, "npu_end_reason", "NPU_END_REASON_"),
    (ThermalSeverity, "npu_thermal_severity", "NPU_THERMAL_"),
    (PreemptionMode, "npu_preemption_mode", "NPU_PREEMPT_"),
    (SchedulingMode, "npu_sched_mode", "NPU_SCHED_"),
)

def _check_enums() -> None:
    # The Python enums carry Android's numbers; the header must agree, or every
    # event, device and model would be silently mislabelled.
    for enum_cls, c_enum, prefix in _C_ENUMS:
        problem = enum_problem(enum_cls, c_enum, ffi.typeof(f"enum {c_enum}").elements, prefix)
        if problem:
            raise NpuAbiError(f"{problem}: the headers changed, update the AIDL or the binding and rebuild (`make ext`)")


_check_abi()
_check_enums()

__all__ = ["ABI_VERSION", "BUILD_ID", "C_VERSION"]

#: The NPU ABI version (hw.h + driver.h) of the compiled extension.
ABI_VERSION: int = int(lib.npu_abi_version())
#: A hash of the C sources the extension was built from (``npu_build_id``);
#: every driver version string of the reference driver embeds it.
BUILD_ID: str = ffi.string(lib.npu_build_id()).decode()
#: The C layer's version line (``npu_build_version``): version, ABI and build id.
C_VERSION: str = ffi.string(lib.npu_build_version()).decode()


def _c_str(cdata_chars) -> str:
    return ffi.string(cdata_chars).decode("utf-8", "replace")


def error_name(status: int) -> str:
    return _c_str(lib.npu_error_name(status))


def strerror(status: int) -> str:
    return _c_str(lib.npu_strerror(status))


def make_error(status: int, context: str) -> NpuError:
    """The exception for a failed C call (``status`` < 0)."""
    name = error_name(status)
    text = strerror(status)
    cls = error_class_for(name)
    return cls(f"{context}: {text} [{name}]", code=status, name=name, strerror=text)


def _check(status: int, context: str) -> None:
    if status != lib.NPU_OK:
        raise make_error(status, context)


def _int(value: Any, what: str, lo: int, hi: int, error: type[NpuValueError] = NpuValueError) -> int:
    """An int within [lo, hi], so that cffi never raises OverflowError at a caller."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise error(f"{what} must be an integer, got {value!r}")
    number = int(value)
    if not lo <= number <= hi:
        raise error(f"{what} {number} is out of range ({lo}..{hi})")
    return number


def _u32(value: Any, what: str, error: type[NpuValueError] = NpuModelError) -> int:
    return _int(value, what, 0, 0xFFFFFFFF, error)


def _u64(value: Any, what: str) -> int:
    return _int(value, what, 0, 2**64 - 1)


def _i64(value: Any, what: str) -> int:
    return _int(value, what, 0, 2**63 - 1)


def _i32(value: Any, what: str, error: type[NpuValueError] = NpuValueError) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise error(f"{what} must be an integer, got {value!r}")
    number = int(value)
    if not -(2**31) <= number < 2**31:
        raise error(f"{what} {number} does not fit in 32 bits")
    return number


class CModel:
    """A ``struct npu_model`` built straight from the HAL's ``Model`` parcelable, and everything it points to.

    ``pools`` are the model's pools already mapped (``npuhal._model.map_pools``), given
    apart so that this stays the one conversion, with no second model form. C borrows a
    model only for the call it is passed to; this object keeps the arrays alive for as
    long as it lives, so build it, make the call, drop it.
    """

    __slots__ = ("ptr", "operation_count", "_keep")

    def __init__(self, model: Model, pools: Sequence[Any]) -> None:
        main = main_subgraph(model)
        if len(pools) != len(model.pools):
            raise NpuValueError(f"the model has {len(model.pools)} pools, {len(pools)} mapped")
        self.ptr, keep = c_model(ffi, main, model.operandValues, pools, NpuModelError,
                                 model.relaxComputationFloat32toFloat16)
        self.operation_count = len(main.operations)
        self._keep = [*keep, model]


def validate_model(model: Model, pools: Sequence[Any]) -> tuple[int, int | None]:
    """``npu_model_validate``: (status, index of the bad operation or None)."""
    cm = CModel(model, pools)
    bad = ffi.new("uint32_t *")
    status = lib.npu_model_validate(cm.ptr, bad)
    return status, (None if bad[0] == 0xFFFFFFFF else int(bad[0]))


def c_buffers(buffers: Sequence[Any], *, writable: bool) -> tuple[Any, list[Any]]:
    """A ``struct npu_buffer[]`` over Python buffers, and the cdata keeping them alive."""
    arr = ffi.new("struct npu_buffer[]", max(len(buffers), 1))
    keep: list[Any] = [arr]
    for i, buf in enumerate(buffers):
        c = ffi.from_buffer("char[]", buf, require_writable=writable)
        keep.append(c)
        arr[i].data = c
        arr[i].length = len(c)
    return arr, keep


#: NPU_MAX_RANK, as struct npu_shape holds it.
MAX_RANK = len(ffi.new("struct npu_shape *").dims)


def new_shapes(count: int, dims: Sequence[Sequence[int] | None] | None = None) -> Any:
    """A ``struct npu_shape[count]``, zeroed ("as declared" / not known yet), or holding
    ``dims[i]`` (``None`` or empty: as declared) for each i."""
    arr = ffi.new("struct npu_shape[]", max(count, 1))
    for i, d in enumerate(dims or ()):
        d = list(d or ())
        if len(d) > MAX_RANK:
            raise NpuValueError(f"input {i} is given rank {len(d)}; npuemu computes up to rank {MAX_RANK}")
        arr[i].rank = len(d)
        for k, v in enumerate(d):
            arr[i].dims[k] = _u32(v, f"input {i} dimension {k}", NpuValueError)
    return arr


def read_shapes(arr: Any, count: int) -> list[tuple[tuple[int, ...], bool]]:
    """Each ``struct npu_shape`` of ``arr[:count]`` as (dimensions, whether the buffer held it)."""
    return [(tuple(int(arr[i].dims[k]) for k in range(arr[i].rank)), bool(arr[i].sufficient)) for i in range(count)]


def run_model(model: Model, pools: Sequence[Any], inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
    """``npu_kernel_run_model``: run a whole model on this thread, no device involved."""
    cm = CModel(model, pools)
    cin, keep_in = c_buffers(inputs, writable=False)
    cout, keep_out = c_buffers(outputs, writable=True)
    _check(lib.npu_kernel_run_model(cm.ptr, cin, len(inputs), cout, len(outputs)), "npu_kernel_run_model")
    del keep_in, keep_out


def _work_info(w) -> WorkInfo:
    return WorkInfo(
        id=int(w.id),
        groupId=NpuUuid(uuid=bytes(ffi.buffer(w.group_id))) if w.has_group_id else None,
        uid=int(w.uid),
        debugPid=int(w.debug_pid),
        originalUid=int(w.original_uid),
        debugFeatureId=_c_str(w.debug_feature_id) if w.has_debug_feature_id else None,
        jobPriority=int(w.job_priority),
        effectivePriority=int(w.effective_priority),
        timestampMs=int(w.timestamp_ms),
        deviceNumber=int(w.device_number),
    )


def convert_event(ev) -> DriverEvent:
    kind = ev.type
    if kind == lib.NPU_EVENT_WORK_REQUESTED:
        return WorkRequested(_work_info(ev.work), int(ev.time_ns), int(ev.hw_device), int(ev.channel))
    if kind == lib.NPU_EVENT_WORK_STARTED:
        return WorkStarted(_work_info(ev.work), StartReason(ev.reason), int(ev.time_ns), int(ev.hw_device), int(ev.channel))
    if kind == lib.NPU_EVENT_WORK_ENDED:
        return WorkEnded(_work_info(ev.work), EndReason(ev.reason), int(ev.time_ns), int(ev.hw_device), int(ev.channel))
    if kind == lib.NPU_EVENT_THERMAL:
        return ThermalChanged(
            ThermalSeverity(ev.thermal_severity), round(float(ev.temperature_c), 3), int(ev.time_ns)
        )
    if kind == lib.NPU_EVENT_MEMORY:
        return MemoryPressure(
            deviceNumber=max(int(ev.device_number), -1),
            hwDevice=int(ev.memory_device),
            weightMemoryUsed=int(ev.weight_memory_used),
            weightMemoryTotal=int(ev.weight_memory_total),
            sramUsed=int(ev.sram_used),
            sramTotal=int(ev.sram_total),
            refused=None if ev.memory_status == lib.NPU_OK else error_name(ev.memory_status),
            timeNs=int(ev.time_ns),
        )
    raise NpuError(f"the C layer sent an event of unknown type {kind}")


_COMPUTE_CLASSES = ("float32", "float16", "quant8")


def _slice_cost(r) -> SliceCost:
    op = int(r.operation_type)
    return SliceCost(
        kind="save" if r.kind == lib.NPU_SLICE_SAVE else "compute", work_id=int(r.work_id),
        hw_device=int(r.hw_device), channel=int(r.channel), operation=int(r.operation),
        operation_type=OperationType(op) if op in OperationType._value2member_map_ else op,
        compute_class=_COMPUTE_CLASSES[r.compute_class] if 0 <= r.compute_class < 3 else str(r.compute_class),
        slice=int(r.slice), start_ns=int(r.start_ns), end_ns=int(r.end_ns), flops=float(r.flops),
        bytes=float(r.bytes), compute_ns=float(r.compute_ns), memory_ns=float(r.memory_ns),
        overhead_ns=float(r.overhead_ns), throttle=float(r.throttle), restore_ns=float(r.restore_ns),
    )


def _device(number: int, info) -> Device:
    caps = {}
    for t in OperandType:
        if int(t) < lib.NPU_OPERAND_TYPE_COUNT:
            p = info.operand_performance[int(t)]
            caps[t] = _perf(p)
    return Device(
        number=number,
        name=_c_str(info.name),
        type=DeviceType(info.type),
        version=_c_str(info.version),
        feature_level=int(info.feature_level),
        status=DeviceStatus(info.status),
        capabilities=caps,
        weight_memory_bytes=int(info.weight_memory_bytes),
        sram_bytes=int(info.sram_bytes),
        channels=int(info.channel_count),
        parts=tuple(int(info.parts[i]) for i in range(info.part_count)),
        relaxed_float32_to_float16_scalar=_perf(info.relaxed_float32_to_float16_scalar),
        relaxed_float32_to_float16_tensor=_perf(info.relaxed_float32_to_float16_tensor),
    )


def _perf(p) -> PerformanceInfo:
    return PerformanceInfo(execTime=float(p.exec_time), powerUsage=float(p.power_usage))


def _c_configs(configs: Sequence[SchedulingConfig]):
    arr = ffi.new("struct npu_scheduling_config[]", max(len(configs), 1))
    for i, cfg in enumerate(configs):
        if not isinstance(cfg, SchedulingConfig):
            raise NpuValueError(f"configs[{i}] is a {type(cfg).__name__}, not a SchedulingConfig")
        c = arr[i]
        c.min_priority = _i32(cfg.minPriority, "minPriority")
        c.max_priority = _i32(cfg.maxPriority, "maxPriority")
        c.uid = _i32(cfg.uid, "uid")
        c.app_priority = _i32(cfg.appPriority, "appPriority")
        c.has_direct_access = bool(cfg.hasDirectAccess)
        c.can_attribute_other_uid = bool(cfg.canAttributeOtherUid)
    return arr


class System:
    """One ``struct npu_system``: the emulated hardware, a driver and the event ring.

    A thin owner of the C pointer.  ``destroy`` is idempotent; every other call
    after it raises ``NpuStateError`` (the pythonic layer raises its own
    ``NpuClosedError`` first, so users never see that).
    """

    def __init__(
        self,
        *,
        clock: int,
        speed_factor: float = 0.0,
        driver_path: str | None = None,
        thermal_thresholds_c: Sequence[float] | None = None,
        ambient_c: float = 0.0,
        thermal_time_constant_ms: float = 0.0,
        preemption_mode: int = 0,
        scheduling_mode: int = 0,
        slices_per_operation: int = 0,
    ) -> None:
        self._ptr = None
        cfg = ffi.new("struct npu_system_config *")
        cfg.clock = clock
        cfg.speed_factor = speed_factor
        n_thresholds = len(cfg.thermal_thresholds_c)
        if thermal_thresholds_c is not None:
            values = [float(t) for t in thermal_thresholds_c]
            if len(values) != n_thresholds:
                raise NpuValueError(
                    f"thermal_thresholds_c needs {n_thresholds} temperatures (LIGHT..SHUTDOWN), got {len(values)}"
                )
            for i, t in enumerate(values):
                cfg.thermal_thresholds_c[i] = t
        cfg.ambient_c = ambient_c
        cfg.thermal_time_constant_ms = thermal_time_constant_ms
        path = ffi.new("char[]", driver_path.encode()) if driver_path else ffi.NULL
        cfg.driver_path = path
        cfg.preemption_mode = preemption_mode
        cfg.scheduling_mode = scheduling_mode
        cfg.slices_per_operation = slices_per_operation
        out = ffi.new("struct npu_system **")
        _check(lib.npu_system_create(cfg, out), f"npu_system_create({driver_path or 'reference driver'})")
        self._ptr = out[0]
        self._event_cap = 256
        self._events = ffi.new("struct npu_event[]", self._event_cap)
        self._count = ffi.new("uint32_t *")

    @property
    def ptr(self):
        if self._ptr is None:
            raise NpuStateError("the npu_system was destroyed")
        return self._ptr

    def destroy(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            lib.npu_system_destroy(ptr)

    def __del__(self) -> None:
        # A forgotten system must not keep its worker threads running; the
        # pythonic layer closes explicitly first, so this is only a backstop.
        try:
            self.destroy()
        except Exception:
            pass

    @property
    def destroyed(self) -> bool:
        return self._ptr is None

    # ---- events ----

    def event_fd(self) -> int:
        return int(lib.npu_system_event_fd(self.ptr))

    def drain_events(self) -> list[DriverEvent]:
        """Every waiting event, oldest first (several C calls if the ring is long)."""
        out: list[DriverEvent] = []
        while True:
            _check(
                lib.npu_system_drain_events(self.ptr, self._events, self._event_cap, self._count),
                "npu_system_drain_events",
            )
            n = self._count[0]
            out.extend(convert_event(self._events[i]) for i in range(n))
            if n < self._event_cap:
                return out

    def events_dropped(self) -> int:
        return int(lib.npu_system_events_dropped(self.ptr))

    # ---- the cost profile ----

    def set_profiling(self, capacity: int) -> None:
        _check(lib.npu_system_set_profiling(self.ptr, _int(capacity, "capacity", 0, 2**32 - 1)),
               "npu_system_set_profiling")

    def drain_slices(self) -> tuple[list[SliceCost], int]:
        """(every kept record, oldest first; how many were dropped since the last drain)."""
        out: list[SliceCost] = []
        cap = 4096
        buf = ffi.new("struct npu_slice_record[]", cap)
        count, dropped = ffi.new("uint32_t *"), ffi.new("uint64_t *")
        lost = 0
        while True:
            _check(lib.npu_system_drain_slices(self.ptr, buf, cap, count, dropped), "npu_system_drain_slices")
            lost += int(dropped[0])
            out.extend(_slice_cost(buf[i]) for i in range(count[0]))
            if count[0] < cap:
                return out, lost

    # ---- clock ----

    def clock(self) -> int:
        return int(lib.npu_system_clock(self.ptr))

    def now_ns(self) -> int:
        return int(lib.npu_system_now_ns(self.ptr))

    def advance(self, ns: int) -> None:
        _check(lib.npu_system_advance(self.ptr, _i64(ns, "ns")), "npu_system_advance")

    def advance_to_next_event(self) -> int:
        now = ffi.new("int64_t *")
        _check(lib.npu_system_advance_to_next_event(self.ptr, now), "npu_system_advance_to_next_event")
        return int(now[0])

    def next_event_ns(self) -> int | None:
        at = ffi.new("int64_t *")
        _check(lib.npu_system_next_event_ns(self.ptr, at), "npu_system_next_event_ns")
        return None if at[0] < 0 else int(at[0])

    def run_until_idle(self, max_ns: int = 0) -> None:
        _check(lib.npu_system_run_until_idle(self.ptr, _i64(max_ns, "max_ns")), "npu_system_run_until_idle")

    # ---- driver ----

    def vendor(self) -> str:
        return _c_str(lib.npu_system_vendor(self.ptr))

    def device_count(self) -> int:
        return int(lib.npu_system_device_count(self.ptr))

    def get_device_info(self, device: int) -> Device:
        device = _u32(device, "device number", NpuValueError)
        info = ffi.new("struct npu_device_info *")
        _check(lib.npu_system_get_device_info(self.ptr, device, info), f"get_device_info({device})")
        return _device(device, info)

    def device_memory(self, device: int) -> tuple[int, int, int, int]:
        """(weight used, weight total, sram used, sram total) of a driver device, now."""
        device = _u32(device, "device number", NpuValueError)
        info = ffi.new("struct npu_device_info *")
        _check(lib.npu_system_get_device_info(self.ptr, device, info), f"get_device_info({device})")
        return (
            int(info.weight_memory_used),
            int(info.weight_memory_bytes),
            int(info.sram_used),
            int(info.sram_bytes),
        )

    def get_supported_operations(self, device: int, model: Model, pools: Sequence[Any]) -> list[bool]:
        device = _u32(device, "device number", NpuValueError)
        cm = CModel(model, pools)
        supported = ffi.new("bool[]", max(cm.operation_count, 1))
        _check(
            lib.npu_system_get_supported_operations(self.ptr, device, cm.ptr, supported),
            f"get_supported_operations(device {device})",
        )
        return [bool(supported[i]) for i in range(cm.operation_count)]

    def set_scheduling_configs(self, configs: Sequence[SchedulingConfig]) -> None:
        arr = _c_configs(configs)
        _check(lib.npu_system_set_scheduling_configs(self.ptr, arr, len(configs)), "setSchedulingConfigs")

    def update_scheduling_configs(self, configs: Sequence[SchedulingConfig]) -> None:
        arr = _c_configs(configs)
        _check(lib.npu_system_update_scheduling_configs(self.ptr, arr, len(configs)), "updateSchedulingConfigs")

    def load_model(
        self,
        device: int,
        model: Model,
        pools: Sequence[Any],
        *,
        emulated_weight_bytes: int = 0,
        emulated_sram_bytes: int = 0,
        cost_scale: float = 0.0,
        preference: int | None = None,
    ) -> int:
        device = _u32(device, "device number", NpuValueError)
        cm = CModel(model, pools)
        params = ffi.new("struct npu_load_params *")
        params.emulated_weight_bytes = _u64(emulated_weight_bytes, "emulated_weight_bytes")
        params.emulated_sram_bytes = _u64(emulated_sram_bytes, "emulated_sram_bytes")
        params.cost_scale = cost_scale
        # NNAPI's ExecutionPreference + 1 (enum npu_load_preference; 0: not said).
        params.preference = 0 if preference is None else int(preference) + 1
        model_id = ffi.new("uint32_t *")
        _check(lib.npu_system_load_model(self.ptr, device, cm.ptr, params, model_id), f"load_model(device {device})")
        return int(model_id[0])

    def unload_model(self, model_id: int) -> None:
        _check(lib.npu_system_unload_model(self.ptr, _u32(model_id, "model id", NpuValueError)), f"unload_model({model_id})")

    def submit_work(
        self,
        *,
        model_id: int,
        uid: int,
        original_uid: int,
        debug_pid: int,
        job_priority: int,
        group_id: uuid.UUID | None,
        feature_id: str | None,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
        input_shapes: Any = None,
        output_shapes: Any = None,
    ) -> tuple[int, list[Any]]:
        """Submit; returns (work id, the cdata that must outlive the work's final ENDED).

        ``input_shapes`` and ``output_shapes`` are ``new_shapes`` arrays (or None): the
        inputs' given dimensions, and where the outputs' real ones go.
        """
        req = ffi.new("struct npu_work_request *")
        req.model_id = _u32(model_id, "model id", NpuValueError)
        req.uid = _i32(uid, "uid")
        req.original_uid = _i32(original_uid, "originalUid")
        req.debug_pid = _i32(debug_pid, "debugPid")
        req.job_priority = _i32(job_priority, "jobPriority")
        if group_id is not None:
            req.has_group_id = True
            ffi.memmove(req.group_id, group_id.bytes, len(group_id.bytes))
        try:
            feature = ffi.new("char[]", feature_id.encode()) if feature_id is not None else ffi.NULL
        except UnicodeEncodeError:
            raise NpuValueError(f"feature id {feature_id!r} is not encodable as UTF-8") from None
        req.debug_feature_id = feature
        cin, keep_in = c_buffers(inputs, writable=False)
        cout, keep_out = c_buffers(outputs, writable=True)
        req.input_count, req.inputs = len(inputs), cin
        req.output_count, req.outputs = len(outputs), cout
        req.input_shapes = ffi.NULL if input_shapes is None else input_shapes
        req.output_shapes = ffi.NULL if output_shapes is None else output_shapes
        work_id = ffi.new("int32_t *")
        _check(lib.npu_system_submit_work(self.ptr, req, work_id), "submit_work")
        return int(work_id[0]), keep_in + keep_out

    def cancel_work(self, work_id: int) -> None:
        _check(lib.npu_system_cancel_work(self.ptr, _i32(work_id, "work id")), f"cancel_work({work_id})")

    def inject_fault(self, kind: int, *, device: int = 0, channel: int = 0, heat_c: float = 0.0) -> None:
        fault = ffi.new("struct npu_fault *")
        fault.kind = kind
        fault.device = _u32(device, "device number", NpuValueError)
        fault.channel = _u32(channel, "channel", NpuValueError)
        if not np.isfinite(heat_c):
            raise NpuValueError(f"heat_c must be finite, not {heat_c!r}")
        fault.heat_c = heat_c
        _check(lib.npu_system_inject_fault(self.ptr, fault), "inject_fault")

    def reset_channel(self, device: int, channel: int) -> None:
        _check(
            lib.npu_system_reset_channel(
                self.ptr, _u32(device, "device number", NpuValueError), _u32(channel, "channel", NpuValueError)
            ),
            f"reset_channel({device}, {channel})",
        )

    def set_preemption_mode(self, mode: int) -> None:
        _check(lib.npu_system_set_preemption_mode(self.ptr, mode), "set_preemption_mode")

    def set_scheduling_mode(self, mode: int) -> None:
        _check(lib.npu_system_set_scheduling_mode(self.ptr, mode), "set_scheduling_mode")

    def thermal_state(self) -> tuple[ThermalSeverity, float]:
        sev = ffi.new("int32_t *")
        temp = ffi.new("float *")
        _check(lib.npu_system_thermal_state(self.ptr, sev, temp), "thermal_state")
        return ThermalSeverity(sev[0]), float(temp[0])

    def thermal_override(self, hold: bool, temperature_c: float = 0.0) -> None:
        if hold and not np.isfinite(temperature_c):
            raise NpuValueError(f"a held temperature must be finite, not {temperature_c!r}")
        _check(lib.npu_system_thermal_override(self.ptr, bool(hold), float(temperature_c)), "thermal_override")

    def thermal_held(self) -> bool:
        return bool(lib.npu_system_thermal_held(self.ptr))

    def dump(self) -> str:
        length = ffi.new("size_t *")
        cap = 4096
        while True:
            buf = ffi.new("char[]", cap)
            status = lib.npu_system_dump(self.ptr, buf, cap, length)
            if status == lib.NPU_E_BUFFER_TOO_SMALL:
                cap = int(length[0]) + 1
                continue
            _check(status, "dump")
            return _c_str(buf)
