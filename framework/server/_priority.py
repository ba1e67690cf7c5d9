"""From an app's importance to the ``SchedulingConfig`` the HAL schedules it by.

The activity manager ranks every uid by *importance* (``ActivityManager.RunningAppProcessInfo``;
a smaller number is more important). The ``npu`` service turns that rank, and the
device's thermal severity, into the seed's ``SchedulingConfig`` for the uid (the compiled parcelable), which the
HAL applies to every job the uid submits::

    effectivePriority = clamp(appPriority + jobPriority, minPriority, maxPriority)

with ``jobPriority`` 0..1000 chosen by the app per job, and a *lower* effective
priority running first. ``appPriority`` shifts a uid's jobs; ``minPriority`` and
``maxPriority`` fence them in, and the fence is what makes the guarantee: a job's own
priority can move it only inside its uid's band.

The bands (importance values are ActivityManager's; system uid 1000 and root 0 always
count as 100, whatever the activity manager says; a uid nobody reported counts as 1000)::

    band          importance                         appPriority  min   max   effective
    ------------  ---------------------------------  -----------  ----  ----  ---------
    foreground    100 FOREGROUND, 125 FG_SERVICE,    imp - 100    0     1000  0 .. 1000
                  system, root                       (0 / 25)
    perceptible   200 VISIBLE, 230 PERCEPTIBLE,      500          500   1500  500 .. 1500
                  anything in 126..299
    background    300 SERVICE, 325 TOP_SLEEPING,     1000         1000  1900  1000 .. 1900
                  anything in 300..399
    cached        400 CACHED, 1000 GONE, unknown     1000         1500  2000  1500 .. 2000

So the most urgent job of any uid at SERVICE or below (effective >= 1000) can never run
before the laziest job of a foreground uid (effective <= 1000): at equal numbers the HAL
keeps arrival order, so a background job never *overtakes* foreground work, it can only
queue behind it. Visible and perceptible apps (a picture-in-picture player, a keyboard)
interleave with the foreground's less urgent jobs but can not beat its urgent ones.
AOSP's own config carries one ``priority`` equal to the importance; the seed's three
fields are what npuemu implements, and a table like this one is the natural reading.

Thermal severity tightens the fences (severities as the thermal HAL's, see ``_thermal``):

- SEVERE and above: the perceptible band starts at 1000 and the background and cached
  bands at 1500, so nothing but the foreground runs in the foreground's range at all.
- CRITICAL and above: every uid but the foreground proper (importance 100, system, root)
  is pinned to 2000, the very last place; its models are being taken away anyway
  (``_thermal``), and what still runs should not heat the device further.

``hasDirectAccess`` is true unless the service blocks the uid (an app that does not
declare ``android.hardware.npu`` while the block flag is on). ``canAttributeOtherUid``
is true for system and root, and otherwise only with ``ATTRIBUTE_WORK_TO_OTHER_APPS``.
"""

from __future__ import annotations

from framework.binder import AID_ROOT, AID_SYSTEM, IllegalArgumentException
from interfaces.android.hardware.npu import SchedulingConfig

from ._activity import (
    IMPORTANCE_CACHED,
    IMPORTANCE_FOREGROUND,
    IMPORTANCE_FOREGROUND_SERVICE,
    IMPORTANCE_GONE,
    IMPORTANCE_SERVICE,
)
from ._thermal import THERMAL_STATUS_CRITICAL, THERMAL_STATUS_SEVERE, check_severity

# SchedulingConfig's limits, as the HAL validates them.
MIN_APP_PRIORITY = 0
MAX_APP_PRIORITY = 1000
MIN_JOB_PRIORITY = 0
MAX_JOB_PRIORITY = 1000
MIN_EFFECTIVE_PRIORITY = 0
MAX_EFFECTIVE_PRIORITY = 2000


def check_uid(uid: object) -> int:
    """``uid`` as an int, or IllegalArgumentException (uids are non-negative ints)."""
    if type(uid) is not int or uid < 0 or uid > 0x7FFFFFFF:
        raise IllegalArgumentException(f"uid must be an int in 0..2147483647, not {uid!r}")
    return uid


def check_importance(importance: object) -> int:
    """``importance`` as an int in 1..1000, or IllegalArgumentException."""
    if type(importance) is not int or not 1 <= importance <= IMPORTANCE_GONE:
        raise IllegalArgumentException(
            f"importance must be an int in 1..{IMPORTANCE_GONE} "
            f"(ActivityManager's scale, 100 foreground .. 1000 gone), not {importance!r}"
        )
    return importance


def effective_importance(uid: int, reported: int | None) -> int:
    """The importance the npu service ranks ``uid`` by.

    System and root are always foreground (100), as AOSP's PriorityManager pins them;
    a uid the activity manager never reported is the least important of all.
    """
    if uid in (AID_ROOT, AID_SYSTEM):
        return IMPORTANCE_FOREGROUND
    return IMPORTANCE_GONE if reported is None else reported


def is_foreground(importance: int) -> bool:
    """True for the importances of the foreground band (<= FOREGROUND_SERVICE)."""
    return importance <= IMPORTANCE_FOREGROUND_SERVICE


def check_config(config: SchedulingConfig) -> SchedulingConfig:
    """``config`` if the HAL would accept it, else IllegalArgumentException (its checks)."""
    if not MIN_APP_PRIORITY <= config.appPriority <= MAX_APP_PRIORITY:
        raise IllegalArgumentException(f"appPriority {config.appPriority} outside 0..1000")
    if not MIN_EFFECTIVE_PRIORITY <= config.minPriority <= config.maxPriority <= MAX_EFFECTIVE_PRIORITY:
        raise IllegalArgumentException(
            f"need 0 <= minPriority <= maxPriority <= 2000, got {config.minPriority}, {config.maxPriority}"
        )
    return config


def effective_priority(config: SchedulingConfig, job_priority: int) -> int:
    """What the HAL computes for a job of ``config``'s uid: clamp(app + job, min, max)."""
    if type(job_priority) is not int or not MIN_JOB_PRIORITY <= job_priority <= MAX_JOB_PRIORITY:
        raise IllegalArgumentException(f"jobPriority must be an int in 0..1000, not {job_priority!r}")
    return min(max(config.appPriority + job_priority, config.minPriority), config.maxPriority)


def priority_band(importance: int, thermal_severity: int = 0) -> tuple[int, int, int]:
    """``(appPriority, minPriority, maxPriority)`` for an importance: the module's table."""
    check_importance(importance)
    check_severity(thermal_severity)
    if thermal_severity >= THERMAL_STATUS_CRITICAL and importance > IMPORTANCE_FOREGROUND:
        return 1000, 2000, 2000
    if is_foreground(importance):
        return max(importance - IMPORTANCE_FOREGROUND, 0), 0, 1000
    severe = thermal_severity >= THERMAL_STATUS_SEVERE
    if importance < IMPORTANCE_SERVICE:
        return 500, 1000 if severe else 500, 1500
    if importance < IMPORTANCE_CACHED:
        return 1000, 1500 if severe else 1000, 1900
    return 1000, 1500, 2000


def scheduling_config_for(
    uid: int,
    importance: int | None,
    *,
    thermal_severity: int = 0,
    has_attribution_permission: bool = False,
    blocked: bool = False,
) -> SchedulingConfig:
    """The ``SchedulingConfig`` for ``uid`` at ``importance`` (None: never reported).

    ``has_attribution_permission`` is whether the package manager grants the uid
    ``ATTRIBUTE_WORK_TO_OTHER_APPS``; ``blocked`` takes away direct access (an app
    that does not declare the NPU feature, with the service's block flag on).
    """
    check_uid(uid)
    if importance is not None:
        check_importance(importance)
    imp = effective_importance(uid, importance)
    app, lo, hi = priority_band(imp, thermal_severity)
    privileged = uid in (AID_ROOT, AID_SYSTEM)
    return check_config(
        SchedulingConfig(
            minPriority=lo,
            maxPriority=hi,
            uid=uid,
            appPriority=app,
            hasDirectAccess=not blocked,
            canAttributeOtherUid=privileged or bool(has_attribution_permission),
        )
    )
