"""Plain-data types of the driver binding: enums, devices, configs, work events.

Every number here is Android's (NN HAL 1.2, ``android.hardware.npu``, the thermal
HAL). The enums the AIDL declares (``DeviceType``, ``DeviceStatus``, ``OperandType``,
``OperandLifeTime`` in the AIDL's names (``SUBGRAPH_INPUT``/``SUBGRAPH_OUTPUT``,
``CONSTANT_POOL`` for NN 1.2's MODEL_INPUT/MODEL_OUTPUT/CONSTANT_REFERENCE, same
numbers), ``OperationType``, ``FuseCode`` (the AIDL's ``FusedActivationFunc``),
``StartReason``, ``EndReason``) and the parcelables
``PerformanceInfo`` (NN HAL: ratios to the CPU, lower is better), ``SchedulingConfig``
and ``WorkInfo`` (a work event's ``info``, its ``id`` the
driver's work id) and the event ``MemoryPressure`` (``npuemu.hal``; ``deviceNumber``
-1 when the driver did not say) are the compiled ``interfaces`` ones, not copies.
The C header uses the same numbers; ``npuhal._lowlevel`` checks at import that the compiled extension agrees, so a mismatch fails loudly instead of
silently mislabelling events.

All of these are frozen, slotted dataclasses: they are values, safe to hash,
compare, log and hand across tasks; none holds any C memory.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from interfaces.android.hardware.neuralnetworks import (
    DeviceStatus,
    DeviceType,
    FusedActivationFunc,
    OperandLifeTime,
    OperandType,
    OperationType,
    PerformanceInfo,
)
from interfaces.android.hardware.npu import EndReason, IScheduling, SchedulingConfig, StartReason, WorkInfo
from interfaces.android.hardware.thermal import ThrottlingSeverity
from interfaces.npuemu.hal import MemoryPressure

__all__ = [
    "DeviceType",
    "DeviceStatus",
    "OperandType",
    "OperandLifeTime",
    "OperationType",
    "FuseCode",
    "StartReason",
    "EndReason",
    "ThermalSeverity",
    "PreemptionMode",
    "SchedulingMode",
    "PerformanceInfo",
    "Device",
    "SchedulingConfig",
    "WorkInfo",
    "WorkRequested",
    "WorkStarted",
    "WorkEnded",
    "ThermalChanged",
    "MemoryPressure",
    "DriverEvent",
    "SliceCost",
    "MIN_PRIORITY",
    "MAX_PRIORITY",
    "MAX_EFFECTIVE_PRIORITY",
]

#: ``IScheduling.MIN_PRIORITY``: the *highest* priority.
MIN_PRIORITY: int = IScheduling.MIN_PRIORITY
#: ``IScheduling.MAX_PRIORITY``: the lowest priority a uid or a job can have.
MAX_PRIORITY: int = IScheduling.MAX_PRIORITY
#: uid priority + job priority never exceeds this.
MAX_EFFECTIVE_PRIORITY = 2000

#: The AIDL's ``FusedActivationFunc`` under the name the driver's header and the NDK use
#: (``NPU_FUSE_*``, ``ANEURALNETWORKS_FUSED_*``): the same class, not a copy.
FuseCode = FusedActivationFunc


#: The thermal HAL's ``ThrottlingSeverity``: the compiled AIDL enum (C's is checked against it).
ThermalSeverity = ThrottlingSeverity


class PreemptionMode(enum.IntEnum):
    """How the hardware makes room for higher-priority work on a busy channel.

    ``NONE``: the running job finishes first.  ``CHECKPOINT``: at the next slice
    boundary its context is saved to a preemption buffer (which costs emulated
    time) and later restored; the results are the same as an unpreempted run.
    ``KILL_RESTART``: its progress is thrown away and it starts over later.
    The values are the C header's; ``npuhal._lowlevel`` checks them at import.
    """

    NONE = 1
    CHECKPOINT = 2
    KILL_RESTART = 3


class SchedulingMode(enum.IntEnum):
    """Which queued job a free channel takes: lowest effective priority, or oldest."""

    PRIORITY = 1
    FCFS = 2


@dataclass(frozen=True, slots=True)
class Device:
    """One device a driver exposes, as ``IDevice`` describes it.

    ``number`` is the driver's device number (``WorkInfo.deviceNumber``), counting
    from 0.  ``capabilities`` maps each operand type the device reports to its
    PerformanceInfo.  ``parts`` is empty except for a heterogeneous device (type
    OTHER), where it lists the numbers of the devices it manages; those are also
    exposed as devices of their own, so an app can pick among them.
    """

    number: int
    name: str
    type: DeviceType
    version: str
    feature_level: int
    status: DeviceStatus
    capabilities: dict[OperandType, PerformanceInfo] = field(hash=False)
    weight_memory_bytes: int
    sram_bytes: int
    channels: int
    parts: tuple[int, ...] = ()
    relaxed_float32_to_float16_scalar: PerformanceInfo | None = None
    relaxed_float32_to_float16_tensor: PerformanceInfo | None = None

    @property
    def vendor(self) -> str:
        """The ``{VENDOR}`` half of ``{VENDOR}-{DEVICE_NAME}``."""
        return self.name.partition("-")[0]

    @property
    def is_heterogeneous(self) -> bool:
        return bool(self.parts)


@dataclass(frozen=True, slots=True)
class WorkRequested:
    """The driver queued the work (``onWorkRequested``).

    ``time_ns`` (on every work event) is the emulated time of the event in
    nanoseconds, finer than ``info.timestampMs``: what traces and benchmarks use.
    ``hw_device`` and ``channel`` (on every work event) say where the event happened:
    the hardware device index and its execution channel, -1 where there is none
    (a request, or the end of work that never left the queue).
    """

    info: WorkInfo
    time_ns: int = 0
    hw_device: int = -1
    channel: int = -1


@dataclass(frozen=True, slots=True)
class WorkStarted:
    """The work got a channel (``onWorkStarted``): first time, or after a pause."""

    info: WorkInfo
    reason: StartReason
    time_ns: int = 0
    hw_device: int = -1
    channel: int = -1


@dataclass(frozen=True, slots=True)
class WorkEnded:
    """The work left its channel (``onWorkEnded``).

    Every reason but ``PAUSED`` is final: the driver no longer touches the work's
    buffers, and for ``COMPLETED`` its outputs hold the results.
    """

    info: WorkInfo
    reason: EndReason
    time_ns: int = 0
    hw_device: int = -1
    channel: int = -1

    @property
    def is_final(self) -> bool:
        """True unless the work will start again (only ``PAUSED`` is not final)."""
        return self.reason is not EndReason.PAUSED


@dataclass(frozen=True, slots=True)
class ThermalChanged:
    """The die's throttling severity changed (all devices share one die)."""

    severity: ThermalSeverity
    temperature_c: float
    time_ns: int


DriverEvent = WorkRequested | WorkStarted | WorkEnded | ThermalChanged | MemoryPressure


@dataclass(frozen=True, slots=True)
class SliceCost:
    """One slice of a job as the hardware charged it (``Driver.set_profiling``).

    ``end_ns - start_ns`` is ``(overhead_ns + max(compute_ns, memory_ns)) * throttle +
    restore_ns``, rounded up to a whole nanosecond: ``compute_ns`` is the slice's FLOPs
    at the device's rate for its compute class, ``memory_ns`` its bytes at the device's
    bandwidth (both times the load's cost scale). ``kind`` is ``"save"`` for a
    checkpoint's context save (``bytes``: the live tensors saved), ``"compute"`` else.
    """

    kind: str
    work_id: int
    hw_device: int
    channel: int
    operation: int  # index into the loaded model's operations
    operation_type: OperationType | int
    compute_class: str  # "float32", "float16" or "quant8": the rate it was charged at
    slice: int
    start_ns: int
    end_ns: int
    flops: float
    bytes: float
    compute_ns: float
    memory_ns: float
    overhead_ns: float
    throttle: float
    restore_ns: float

    @property
    def bound(self) -> str:
        """What set the slice's time: ``"compute"``, ``"memory"`` or (neither past the
        fixed cost, or a save) ``"overhead"``."""
        if self.kind == "save" or max(self.compute_ns, self.memory_ns) <= 0:
            return "overhead"
        return "compute" if self.compute_ns >= self.memory_ns else "memory"
