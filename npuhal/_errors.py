"""The exceptions the driver binding raises.

Every failure of the C layer arrives as a negative ``npu_status`` code.  The
low-level layer turns it into an instance of one of the classes below at once,
carrying the code, its C name (``npu_error_name``, e.g. ``"SRAM_FULL"``) and
the text of ``npu_strerror``.  Errors found in Python before C is called (a
buffer of the wrong size, a negative dimension) use the same classes with
``code`` None.  Each class also inherits the builtin exception it resembles,
so callers may catch either the npuemu class or the builtin::

    try:
        driver.set_scheduling_configs(configs)
    except NpuDuplicateUidError:      # precisely this refusal
        ...
    except ValueError:                # or any invalid argument at all
        ...

Which C code maps to which class is decided by the code's *name*, never by its
number (numbers belong to the C header and may move between ABI versions).
"""

from __future__ import annotations

import trio

__all__ = [
    "NpuError",
    "NpuValueError",
    "NpuOutputTooSmallError",
    "NpuInvalidPriorityError",
    "NpuDuplicateUidError",
    "NpuModelError",
    "NpuUnsupportedOperationError",
    "NpuCapacityError",
    "NpuPermissionError",
    "NpuDirectAccessError",
    "NpuAttributionError",
    "NpuLookupError",
    "NpuStateError",
    "NpuOfflineError",
    "NpuNotSupportedError",
    "NpuTimeoutError",
    "NpuDriverError",
    "NpuAbiError",
    "NpuExecutionError",
    "NpuClosedError",
]


class NpuError(Exception):
    """Base class of every error npuhal raises.

    Attributes:
        code: the C status code (negative), or ``None`` when the error was found
            on the Python side before C was called.
        name: the C name of the code, e.g. ``"WEIGHT_MEMORY_FULL"`` (``None``
            for Python-side errors).
        strerror: ``npu_strerror(code)``, the C layer's own one-line explanation.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        name: str | None = None,
        strerror: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.name = name
        self.strerror = strerror


# NpuError comes first in each base list, unlike the usual (ValueError, NpuError):
# the builtins define their own __init__, which would otherwise shadow NpuError's
# and leave code/name/strerror unset.  isinstance works the same either way.


class NpuValueError(NpuError, ValueError):
    """An argument the driver refuses: a bad config, a bad model, a bad buffer."""


class NpuInvalidPriorityError(NpuValueError):
    """A scheduling config or a job priority outside the documented ranges."""


class NpuDuplicateUidError(NpuValueError):
    """One ``set/updateSchedulingConfigs`` call named the same uid twice."""


class NpuModelError(NpuValueError):
    """A model that is malformed: bad operand index, wrong shape, bad location..."""


class NpuUnsupportedOperationError(NpuModelError):
    """A well-formed model with an operation this device cannot run."""


class NpuCapacityError(NpuError, MemoryError):
    """Weight memory, SRAM, or a fixed-size table of the driver is full."""


class NpuPermissionError(NpuError, PermissionError):
    """The driver refused work on behalf of a uid."""


class NpuDirectAccessError(NpuPermissionError):
    """The uid's config has ``hasDirectAccess = false``."""


class NpuAttributionError(NpuPermissionError):
    """``originalUid != uid`` and the uid may not attribute work to others."""


class NpuLookupError(NpuError, LookupError):
    """No such device, model or work."""


class NpuStateError(NpuError, RuntimeError):
    """The call is valid but not now (e.g. a virtual-clock call on a real clock)."""


class NpuOfflineError(NpuStateError):
    """The device is offline (it reached thermal SHUTDOWN)."""


class NpuNotSupportedError(NpuError, NotImplementedError):
    """The driver does not implement this optional callback at all."""


class NpuTimeoutError(NpuError, TimeoutError):
    """The hardware did not answer in time (a hung channel)."""


class NpuDriverError(NpuError, OSError):
    """The driver itself failed: it could not be loaded, or it reported a fault."""


class NpuAbiError(NpuError, ImportError):
    """The compiled extension or a driver ``.so`` speaks another ABI version.

    Raised at import time when ``npuhal._npu`` is stale (rebuild it with
    ``make ext``), and by ``open_driver`` for a driver built against other headers.
    """


class NpuExecutionError(NpuError, RuntimeError):
    """A work ended without results (``Driver.execute``): failed, cancelled, or unloaded.

    ``ended`` is the final ``WorkEnded`` event; ``reason`` its ``EndReason``.
    """

    def __init__(self, message: str, *, ended) -> None:
        super().__init__(message)
        self.ended = ended
        self.reason = ended.reason


class NpuOutputTooSmallError(NpuValueError):
    """An output's buffer is smaller than the output the run computes (a model output whose
    dimensions only the execution gives).  ``output_shapes``: each output's (dimensions,
    whether its buffer held it), as far as known, when the submission says them."""

    output_shapes: list[tuple[tuple[int, ...], bool]] | None = None


class NpuClosedError(NpuError, trio.ClosedResourceError):
    """The driver was closed; nothing can be done with it or its handles any more."""


# The C codes (npu/errors.h, by npu_error_name) mapped to classes.  The numbers
# stay in C; only the names are written here.
_BY_NAME: dict[str, type[NpuError]] = {
    "INVALID_ARGUMENT": NpuValueError,
    "NO_MEMORY": NpuCapacityError,
    "NOT_SUPPORTED": NpuNotSupportedError,
    "BAD_DEVICE": NpuLookupError,
    "BAD_CHANNEL": NpuLookupError,
    "BAD_MODEL_ID": NpuLookupError,
    "BAD_WORK_ID": NpuLookupError,
    "INVALID_PRIORITY": NpuInvalidPriorityError,
    "DUPLICATE_UID": NpuDuplicateUidError,
    "INVALID_JOB_PRIORITY": NpuInvalidPriorityError,
    "NO_DIRECT_ACCESS": NpuDirectAccessError,
    "ATTRIBUTION_DENIED": NpuAttributionError,
    "WEIGHT_MEMORY_FULL": NpuCapacityError,
    "SRAM_FULL": NpuCapacityError,
    "BAD_OPERAND_INDEX": NpuModelError,
    "BAD_OPERAND_TYPE": NpuModelError,
    "BAD_SHAPE": NpuModelError,
    "BAD_LIFETIME": NpuModelError,
    "BAD_OPERAND_LOCATION": NpuModelError,
    "BAD_OPERATION": NpuModelError,
    "UNSUPPORTED_OPERATION": NpuUnsupportedOperationError,
    "BAD_FUSE_CODE": NpuModelError,
    "BAD_SCALAR": NpuModelError,
    "BAD_MODEL_IO": NpuModelError,
    "BAD_BUFFER": NpuValueError,
    "WRONG_CLOCK": NpuStateError,
    "NOT_HUNG": NpuStateError,
    "DRIVER_LOAD_FAILED": NpuDriverError,
    "DRIVER_NO_ENTRY": NpuDriverError,
    "DRIVER_ABI_MISMATCH": NpuAbiError,
    "DRIVER_INCOMPLETE": NpuDriverError,
    "DRIVER_INIT_FAILED": NpuDriverError,
    "SYSTEM_ERROR": NpuDriverError,
    "BUFFER_TOO_SMALL": NpuOutputTooSmallError,
    "TOO_MANY": NpuCapacityError,
    "OFFLINE": NpuOfflineError,
}

# A code added to C after this table was written still gets a fitting class
# from the distinctive part of its name (first fragment found wins), and at
# worst a plain NpuError, which still carries the name and the C text.
_NAME_FRAGMENTS: tuple[tuple[str, type[NpuError]], ...] = (
    ("DUPLICATE", NpuDuplicateUidError),
    ("PRIORITY", NpuInvalidPriorityError),
    ("DIRECT_ACCESS", NpuDirectAccessError),
    ("ATTRIBUT", NpuAttributionError),
    ("UNSUPPORTED", NpuUnsupportedOperationError),
    ("ABI", NpuAbiError),
    ("FULL", NpuCapacityError),
    ("MEMORY", NpuCapacityError),
    ("TOO_MANY", NpuCapacityError),
    ("TIMEOUT", NpuTimeoutError),
    ("HUNG", NpuTimeoutError),
    ("_ID", NpuLookupError),
    ("BAD_DEVICE", NpuLookupError),
    ("OPERAND", NpuModelError),
    ("OPERATION", NpuModelError),
    ("SHAPE", NpuModelError),
    ("MODEL", NpuModelError),
    ("DRIVER", NpuDriverError),
    ("CLOCK", NpuStateError),
    ("INVALID", NpuValueError),
    ("BAD_", NpuValueError),
)


def error_class_for(name: str) -> type[NpuError]:
    """The exception class for a C status code's name (as ``npu_error_name`` gives it)."""
    upper = name.upper().removeprefix("NPU_E_")
    if upper in _BY_NAME:
        return _BY_NAME[upper]
    for fragment, cls in _NAME_FRAGMENTS:
        if fragment in upper:
            return cls
    return NpuError
