"""Importance (and heat) to SchedulingConfig: the table, the limits, the no-overtaking proof."""

from __future__ import annotations

import pytest

from framework.binder._status import IllegalArgumentException
from framework.binder import AID_ROOT, AID_SYSTEM
from framework.server import (
    IMPORTANCE_CACHED,
    IMPORTANCE_FOREGROUND,
    IMPORTANCE_FOREGROUND_SERVICE,
    IMPORTANCE_GONE,
    IMPORTANCE_PERCEPTIBLE,
    IMPORTANCE_SERVICE,
    IMPORTANCE_TOP_SLEEPING,
    IMPORTANCE_VISIBLE,
    THERMAL_STATUS_CRITICAL,
    THERMAL_STATUS_NONE,
    THERMAL_STATUS_SEVERE,
    check_config,
    effective_priority,
    scheduling_config_for,
)
from interfaces.android.hardware.npu import SchedulingConfig

APP = 10001
ALL_IMPORTANCES = [
    IMPORTANCE_FOREGROUND,
    IMPORTANCE_FOREGROUND_SERVICE,
    IMPORTANCE_VISIBLE,
    IMPORTANCE_PERCEPTIBLE,
    IMPORTANCE_SERVICE,
    IMPORTANCE_TOP_SLEEPING,
    IMPORTANCE_CACHED,
    IMPORTANCE_GONE,
]
FOREGROUND = [IMPORTANCE_FOREGROUND, IMPORTANCE_FOREGROUND_SERVICE]
BACKGROUND = [IMPORTANCE_SERVICE, IMPORTANCE_TOP_SLEEPING, IMPORTANCE_CACHED, IMPORTANCE_GONE, None]
SEVERITIES = range(7)
JOBS = range(0, 1001)


def band(c: SchedulingConfig) -> tuple[int, int, int]:
    return c.appPriority, c.minPriority, c.maxPriority


@pytest.mark.parametrize(
    "importance, expected",
    [
        (IMPORTANCE_FOREGROUND, (0, 0, 1000)),
        (IMPORTANCE_FOREGROUND_SERVICE, (25, 0, 1000)),
        (IMPORTANCE_VISIBLE, (500, 500, 1500)),
        (IMPORTANCE_PERCEPTIBLE, (500, 500, 1500)),
        (IMPORTANCE_SERVICE, (1000, 1000, 1900)),
        (IMPORTANCE_TOP_SLEEPING, (1000, 1000, 1900)),
        (IMPORTANCE_CACHED, (1000, 1500, 2000)),
        (IMPORTANCE_GONE, (1000, 1500, 2000)),
        (None, (1000, 1500, 2000)),  # never reported: the lowest
    ],
)
def test_the_documented_table(importance, expected):
    assert band(scheduling_config_for(APP, importance)) == expected


def test_system_and_root_are_foreground_and_may_attribute():
    for uid in (AID_SYSTEM, AID_ROOT):
        for reported in (None, IMPORTANCE_CACHED):
            c = scheduling_config_for(uid, reported)
            assert band(c) == (0, 0, 1000) and c.canAttributeOtherUid and c.hasDirectAccess


def test_other_uids_attribute_only_with_the_permission():
    assert not scheduling_config_for(APP, IMPORTANCE_FOREGROUND).canAttributeOtherUid
    assert scheduling_config_for(APP, IMPORTANCE_CACHED, has_attribution_permission=True).canAttributeOtherUid


def test_a_blocked_uid_loses_direct_access():
    assert scheduling_config_for(APP, IMPORTANCE_FOREGROUND).hasDirectAccess
    assert not scheduling_config_for(APP, IMPORTANCE_FOREGROUND, blocked=True).hasDirectAccess


def test_every_config_is_one_the_hal_accepts():
    for imp in [*ALL_IMPORTANCES, None, 150, 299, 399, 999]:
        for sev in SEVERITIES:
            c = scheduling_config_for(APP, imp, thermal_severity=sev)
            assert 0 <= c.appPriority <= 1000
            assert 0 <= c.minPriority <= c.maxPriority <= 2000


def test_a_background_job_never_overtakes_foreground_work_at_any_job_priority():
    """For every pair of job priorities: the background job's effective priority is >= the foreground's."""
    for sev in SEVERITIES:
        worst_foreground = max(
            effective_priority(scheduling_config_for(uid, imp, thermal_severity=sev), j)
            for imp in FOREGROUND
            for uid in (APP, AID_SYSTEM)
            for j in JOBS
        )
        for imp in BACKGROUND:
            c = scheduling_config_for(APP + 1, imp, thermal_severity=sev)
            best_background = min(effective_priority(c, j) for j in JOBS)
            assert best_background >= worst_foreground, (sev, imp)


def test_within_a_band_job_priority_still_orders_jobs():
    c = scheduling_config_for(APP, IMPORTANCE_FOREGROUND)
    assert [effective_priority(c, j) for j in (0, 250, 500, 1000)] == [0, 250, 500, 1000]
    bg = scheduling_config_for(APP, IMPORTANCE_SERVICE)
    assert effective_priority(bg, 0) < effective_priority(bg, 500) <= effective_priority(bg, 1000)


def test_less_important_never_gets_a_better_band():
    for sev in SEVERITIES:
        bands = [band(scheduling_config_for(APP, imp, thermal_severity=sev)) for imp in ALL_IMPORTANCES]
        for (a1, lo1, hi1), (a2, lo2, hi2) in zip(bands, bands[1:]):
            assert lo1 <= lo2 and hi1 <= hi2 and a1 <= a2


def test_heat_tightens_the_fences():
    vis = lambda sev: band(scheduling_config_for(APP, IMPORTANCE_VISIBLE, thermal_severity=sev))  # noqa: E731
    bg = lambda sev: band(scheduling_config_for(APP, IMPORTANCE_SERVICE, thermal_severity=sev))  # noqa: E731
    assert vis(THERMAL_STATUS_NONE) == (500, 500, 1500) and vis(THERMAL_STATUS_SEVERE) == (500, 1000, 1500)
    assert bg(THERMAL_STATUS_SEVERE) == (1000, 1500, 1900)
    # Critical: everything but the foreground proper goes to the very end.
    for imp in ALL_IMPORTANCES[1:]:
        c = scheduling_config_for(APP, imp, thermal_severity=THERMAL_STATUS_CRITICAL)
        assert {effective_priority(c, j) for j in (0, 1000)} == {2000}
    assert band(scheduling_config_for(APP, IMPORTANCE_FOREGROUND, thermal_severity=THERMAL_STATUS_CRITICAL)) == (0, 0, 1000)


def test_the_config_is_the_compiled_aidl_parcelable():
    c = scheduling_config_for(APP, IMPORTANCE_VISIBLE)
    assert type(c) is SchedulingConfig and c.uid == APP
    assert SchedulingConfig.from_wire(c.to_wire()) == c


@pytest.mark.parametrize(
    "call",
    [
        lambda: scheduling_config_for(-1, 100),
        lambda: scheduling_config_for(APP, 0),
        lambda: scheduling_config_for(APP, 1001),
        lambda: scheduling_config_for(APP, "foreground"),
        lambda: scheduling_config_for(APP, 100, thermal_severity=7),
        lambda: effective_priority(scheduling_config_for(APP, 100), 1001),
        lambda: effective_priority(scheduling_config_for(APP, 100), -1),
        lambda: check_config(SchedulingConfig(minPriority=1500, maxPriority=1000, uid=APP, appPriority=0, hasDirectAccess=True)),
        lambda: check_config(SchedulingConfig(minPriority=0, maxPriority=2001, uid=APP, appPriority=0, hasDirectAccess=True)),
        lambda: check_config(SchedulingConfig(minPriority=0, maxPriority=1000, uid=APP, appPriority=1001, hasDirectAccess=True)),
    ],
)
def test_bad_input_is_a_clear_illegal_argument(call):
    with pytest.raises(IllegalArgumentException):
        call()
