"""The npu service's thermal rules: what may hold a model at each severity.

Severities are the thermal HAL's ``ThrottlingSeverity`` (and PowerManager's
``THERMAL_STATUS_*``), which the emulated hardware reports as it heats:
NONE 0, LIGHT 1, MODERATE 2, SEVERE 3, CRITICAL 4, EMERGENCY 5, SHUTDOWN 6.

The rule, under every policy (status quo included), one line per step:

- below SEVERE: heat changes nothing the service decides (the driver throttles its
  clock on its own).
- SEVERE and above: a request whose own priority is BACKGROUND or OPPORTUNISTIC may not
  hold a model. A new one is answered NOT_PRIORITIZED and waits for the device to cool;
  a loaded one is asked to unload (reason THERMAL); one approved but not yet loaded is
  cancelled (CANCELLED), since an app cannot be told "stop loading" any other way; one
  holding WAIT_FOR_UNLOAD gives up its reservation and is told NOT_PRIORITIZED.
- CRITICAL and above: the same for *every* request of a uid that is not foreground
  (importance above 100, ActivityManager's IMPORTANCE_FOREGROUND; system and root count
  as foreground). Only the app the user is looking at keeps the NPU.

When the severity falls, the requests held back are looked at again like any waiting
request; models already asked to unload are not called back.
"""

from __future__ import annotations

from framework.binder import IllegalArgumentException
from framework.npumanager import NPU_MODEL_PRIORITY_NORMAL
from interfaces.android.hardware.thermal import ThrottlingSeverity

from ._activity import IMPORTANCE_FOREGROUND

# PowerManager's names for the compiled ThrottlingSeverity's values, as plain ints.
THERMAL_STATUS_NONE = int(ThrottlingSeverity.NONE)
THERMAL_STATUS_LIGHT = int(ThrottlingSeverity.LIGHT)
THERMAL_STATUS_MODERATE = int(ThrottlingSeverity.MODERATE)
THERMAL_STATUS_SEVERE = int(ThrottlingSeverity.SEVERE)
THERMAL_STATUS_CRITICAL = int(ThrottlingSeverity.CRITICAL)
THERMAL_STATUS_EMERGENCY = int(ThrottlingSeverity.EMERGENCY)
THERMAL_STATUS_SHUTDOWN = int(ThrottlingSeverity.SHUTDOWN)

# The two thresholds of the rule above.
REFUSE_BACKGROUND_FROM = THERMAL_STATUS_SEVERE
FOREGROUND_ONLY_FROM = THERMAL_STATUS_CRITICAL


def check_severity(severity: object) -> int:
    """``severity`` as an int in 0..6, or IllegalArgumentException."""
    if type(severity) is not int or not THERMAL_STATUS_NONE <= severity <= THERMAL_STATUS_SHUTDOWN:
        raise IllegalArgumentException(f"thermal severity must be an int in 0..6 (NONE..SHUTDOWN), not {severity!r}")
    return severity


def severity_name(severity: int) -> str:
    """``severity``'s name (``"SEVERE"``), or IllegalArgumentException."""
    return ThrottlingSeverity(check_severity(severity)).name


def thermal_restricts(severity: int) -> bool:
    """Whether the heat at ``severity`` refuses any request at all (below it every one may hold a model)."""
    return severity >= min(REFUSE_BACKGROUND_FROM, FOREGROUND_ONLY_FROM)


def thermal_allows(severity: int, importance: int, priority: int) -> bool:
    """May a request of ``priority`` from a uid of ``importance`` hold a model now?"""
    if severity >= FOREGROUND_ONLY_FROM and importance > IMPORTANCE_FOREGROUND:
        return False
    if severity >= REFUSE_BACKGROUND_FROM and priority > NPU_MODEL_PRIORITY_NORMAL:
        return False
    return True
