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

THERMAL_STATUS_NONE = 0
THERMAL_STATUS_LIGHT = 1
THERMAL_STATUS_MODERATE = 2
THERMAL_STATUS_SEVERE = 3
THERMAL_STATUS_CRITICAL = 4
THERMAL_STATUS_EMERGENCY = 5
THERMAL_STATUS_SHUTDOWN = 6

THERMAL_STATUS_NAMES = ("NONE", "LIGHT", "MODERATE", "SEVERE", "CRITICAL", "EMERGENCY", "SHUTDOWN")

# The two thresholds of the rule above.
REFUSE_BACKGROUND_FROM = THERMAL_STATUS_SEVERE
FOREGROUND_ONLY_FROM = THERMAL_STATUS_CRITICAL

_FOREGROUND = 100  # ActivityManager.IMPORTANCE_FOREGROUND; kept here to avoid a cycle


def check_severity(severity: object) -> int:
    """``severity`` as an int in 0..6, or IllegalArgumentException."""
    if type(severity) is not int or not THERMAL_STATUS_NONE <= severity <= THERMAL_STATUS_SHUTDOWN:
        raise IllegalArgumentException(f"thermal severity must be an int in 0..6 (NONE..SHUTDOWN), not {severity!r}")
    return severity


def thermal_allows(severity: int, importance: int, priority: int) -> bool:
    """May a request of ``priority`` from a uid of ``importance`` hold a model now?"""
    if severity >= FOREGROUND_ONLY_FROM and importance > _FOREGROUND:
        return False
    if severity >= REFUSE_BACKGROUND_FROM and priority > NPU_MODEL_PRIORITY_NORMAL:
        return False
    return True
