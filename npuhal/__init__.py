"""npuhal: the vendor HAL process and the Python face of the C driver.

General layout (read bottom up; nothing imports a module above it):

- ``_npu`` is the cffi extension built from ``csrc/`` (``make ext``): the
  emulated hardware, the kernels, the reference driver and the loader that
  dlopens any other driver ``.so``.
- ``_lowlevel`` mirrors the C API call for call: sizes come from C, every
  return code is checked at once and becomes an exception, and the ABI version
  compiled into ``_npu`` is checked at import.  It is the only module that
  touches cdata.
- ``_errors``, ``_types`` and ``_model`` are pure Python: the exception
  hierarchy, the enums and frozen dataclasses (devices, configs, work events),
  and what the driver asks of a model, which is the NN HAL's ``Model``
  parcelable itself (``ModelBuilder`` makes one; no model class of its own).
- ``_driver`` is the pythonic layer the HAL process uses: ``open_driver`` gives
  a ``Driver`` that lists devices, loads models, submits and cancels work,
  streams events into trio and steps the virtual clock.  No cdata escapes it.
  ``run_model`` runs a model on the calling thread with the same kernels, for
  a CPU device.
- The HAL process itself builds on ``_driver`` and never reaches below it:
  ``_hal`` (the state the services share: the event pump, the debounce,
  ``WorkInfo`` ids, client tracking), ``_scheduling`` (``IScheduling``),
  ``_device`` (``IDevice`` and ``IPreparedModel``), ``_control`` (the
  emulator-private ``npuemu.hal.IHalControl``), ``_debounce`` (the sans-IO
  debounce rules), ``_logcat`` (the log format); ``_serve`` (``serve_hal``)
  assembles them, above all of them; ``__main__`` (``python -m npuhal``) runs it.
  Its AIDL lives, compiled, in ``interfaces``.

Starting a stack around the HAL (a servicemanager, this process as init, the HAL as
uid 1000) is not the HAL's job: ``framework.emulator.open_stack`` does it, the one
assembly of a stack (``npuemu boot``, ``npuemu vts``, the tests).

The conformance suite that judges a driver and this HAL (``npuemu vts``) is not part
of it: it lives on the tools side, ``framework.vts``.

What npuhal may import: ``framework.binder`` (and the AIDL it compiles), nothing
else of the framework: the HAL knows no framework service (``tests/test_layering.py``
holds the table). Everything public is re-exported here, exactly once; import from
``npuhal``.
"""

from ._driver import (
    Driver as Driver,
    MemoryInfo as MemoryInfo,
    ModelHandle as ModelHandle,
    WorkTimes as WorkTimes,
    open_driver as open_driver,
    run_model as run_model,
    work_times as work_times,
)
from ._errors import (
    NpuAbiError as NpuAbiError,
    NpuAttributionError as NpuAttributionError,
    NpuCapacityError as NpuCapacityError,
    NpuClosedError as NpuClosedError,
    NpuDirectAccessError as NpuDirectAccessError,
    NpuDriverError as NpuDriverError,
    NpuDuplicateUidError as NpuDuplicateUidError,
    NpuError as NpuError,
    NpuExecutionError as NpuExecutionError,
    NpuInvalidPriorityError as NpuInvalidPriorityError,
    NpuLookupError as NpuLookupError,
    NpuModelError as NpuModelError,
    NpuNotSupportedError as NpuNotSupportedError,
    NpuOfflineError as NpuOfflineError,
    NpuOutputTooSmallError as NpuOutputTooSmallError,
    NpuPermissionError as NpuPermissionError,
    NpuStateError as NpuStateError,
    NpuTimeoutError as NpuTimeoutError,
    NpuUnsupportedOperationError as NpuUnsupportedOperationError,
    NpuValueError as NpuValueError,
)
from ._hal import (
    Hal as Hal,
    valid_instance_name as valid_instance_name,
)
from ._lowlevel import (
    ABI_VERSION as ABI_VERSION,
    BUILD_ID as BUILD_ID,
    C_VERSION as C_VERSION,
)
from ._model import (
    ModelBuilder as ModelBuilder,
    io_shapes as io_shapes,
)
from ._serve import serve_hal as serve_hal
from ._types import (
    MAX_EFFECTIVE_PRIORITY as MAX_EFFECTIVE_PRIORITY,
    MAX_PRIORITY as MAX_PRIORITY,
    MIN_PRIORITY as MIN_PRIORITY,
    Device as Device,
    DeviceStatus as DeviceStatus,
    DeviceType as DeviceType,
    DriverEvent as DriverEvent,
    EndReason as EndReason,
    FuseCode as FuseCode,
    MemoryPressure as MemoryPressure,
    OperandLifeTime as OperandLifeTime,
    OperandType as OperandType,
    OperationType as OperationType,
    PerformanceInfo as PerformanceInfo,
    PreemptionMode as PreemptionMode,
    SchedulingConfig as SchedulingConfig,
    SchedulingMode as SchedulingMode,
    SliceCost as SliceCost,
    StartReason as StartReason,
    ThermalChanged as ThermalChanged,
    ThermalSeverity as ThermalSeverity,
    WorkEnded as WorkEnded,
    WorkInfo as WorkInfo,
    WorkRequested as WorkRequested,
    WorkStarted as WorkStarted,
)
