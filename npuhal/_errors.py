"""The exceptions the driver binding raises.

Every failure of the C layer arrives as a negative ``npu_status`` code.  The
low-level layer turns it into an instance of one of the classes below at once,
carrying the code, the C name of the code (``NPU_E_...``) and the text of
``npu_strerror``.  Each class also inherits the builtin exception it resembles,
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
    "NpuTimeoutError",
    "NpuDriverError",
    "NpuAbiError",
    "NpuClosedError",
]


class NpuError(Exception):
    """Base class of every error npuhal raises.

    Attributes:
        code: the C status code (negative), or ``None`` when the error was found
            on the Python side before C was called.
        name: the C name of the code, e.g. ``"NPU_E_NO_WEIGHT_MEMORY"`` (``None``
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


class NpuTimeoutError(NpuError, TimeoutError):
    """The hardware did not answer in time (a hung channel)."""


class NpuDriverError(NpuError, OSError):
    """The driver itself failed: it could not be loaded, or it reported a fault."""


class NpuAbiError(NpuError, ImportError):
    """The compiled extension or a driver ``.so`` speaks another ABI version.

    Raised at import time when ``npuhal._npu`` is stale (rebuild it with
    ``make ext``), and by ``open_driver`` for a driver built against other headers.
    """


class NpuClosedError(NpuError, trio.ClosedResourceError):
    """The driver was closed; nothing can be done with it or its handles any more."""


# C code names, by their distinctive part, mapped to classes.  Checked in order:
# the first fragment found in the code's name wins, so specific fragments come
# before general ones.  A code no fragment matches becomes a plain NpuError, which
# is still catchable and still carries the name and the C text.
_NAME_FRAGMENTS: tuple[tuple[str, type[NpuError]], ...] = (
    ("DUPLICATE", NpuDuplicateUidError),
    ("DUP_UID", NpuDuplicateUidError),
    ("PRIORITY", NpuInvalidPriorityError),
    ("DIRECT_ACCESS", NpuDirectAccessError),
    ("NO_DIRECT", NpuDirectAccessError),
    ("ATTRIBUT", NpuAttributionError),
    ("PERMISSION", NpuPermissionError),
    ("UNSUPPORTED", NpuUnsupportedOperationError),
    ("NOT_SUPPORTED", NpuUnsupportedOperationError),
    ("ABI", NpuAbiError),
    ("MEMORY", NpuCapacityError),
    ("NOMEM", NpuCapacityError),
    ("SRAM", NpuCapacityError),
    ("CAPACITY", NpuCapacityError),
    ("FULL", NpuCapacityError),
    ("TOO_MANY", NpuCapacityError),
    ("TIMEOUT", NpuTimeoutError),
    ("TIMED_OUT", NpuTimeoutError),
    ("HUNG", NpuTimeoutError),
    ("NO_DEVICE", NpuLookupError),
    ("NO_SUCH", NpuLookupError),
    ("NOT_FOUND", NpuLookupError),
    ("UNKNOWN_", NpuLookupError),
    ("BAD_DEVICE", NpuLookupError),
    ("BAD_MODEL", NpuLookupError),
    ("BAD_WORK", NpuLookupError),
    ("OPERAND", NpuModelError),
    ("OPERATION", NpuModelError),
    ("SHAPE", NpuModelError),
    ("MODEL", NpuModelError),
    ("LOCATION", NpuModelError),
    ("DLOPEN", NpuDriverError),
    ("DRIVER", NpuDriverError),
    ("LOAD", NpuDriverError),
    ("FAULT", NpuDriverError),
    ("IO", NpuDriverError),
    ("STATE", NpuStateError),
    ("BUSY", NpuStateError),
    ("CLOCK", NpuStateError),
    ("AGAIN", NpuStateError),
    ("INVAL", NpuValueError),
    ("ARG", NpuValueError),
    ("CONFIG", NpuValueError),
    ("BUFFER", NpuValueError),
    ("SIZE", NpuValueError),
    ("RANGE", NpuValueError),
    ("NULL", NpuValueError),
    ("UID", NpuValueError),
)


def error_class_for(name: str) -> type[NpuError]:
    """The exception class for a C status code's name (``NPU_E_...``)."""
    upper = name.upper()
    for fragment, cls in _NAME_FRAGMENTS:
        if fragment in upper:
            return cls
    return NpuError
