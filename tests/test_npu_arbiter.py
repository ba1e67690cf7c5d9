"""The npu service's decision core: the issue's scenarios, bad calls, deadlines, dump.

Each test drives an ``NpuArbiter`` the way the service will (one input, the actions it
returns) and asserts what the apps would see. Clock values are plain numbers: the
arbiter has no clock of its own.
"""

from __future__ import annotations

import ast
import pathlib
import copy

import pytest

from framework.binder._status import IllegalArgumentException, IllegalStateException
from framework.npumanager import (
    NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED as CANCELLED,
    NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE as COMPLETE,
    NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW as NOW,
    NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED as NOT_PRIORITIZED,
    NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD as WAIT,
    NPU_MODEL_POLICY_BUDGET,
    NPU_MODEL_POLICY_TURN_TAKING,
    NPU_MODEL_PRIORITY_BACKGROUND as BG,
    NPU_MODEL_PRIORITY_NORMAL as NORMAL,
    NPU_MODEL_PRIORITY_OPPORTUNISTIC as OPP,
    NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB as M,
    NPU_MODEL_SIZE_GREATER_THAN_2G as L,
    NPU_MODEL_SIZE_LESS_THAN_1GB as S,
    NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE as PRESSURE,
    NPU_MODEL_UNLOAD_REASON_THERMAL as THERMAL,
    NPU_MODEL_UNLOAD_REASON_TURN_TAKING as TURN,
)
from framework.server import (
    THERMAL_STATUS_CRITICAL,
    THERMAL_STATUS_MODERATE,
    THERMAL_STATUS_NONE,
    THERMAL_STATUS_SEVERE,
    CanLoad,
    Log,
    NpuArbiter,
    RequestComplete,
    RequestUnload,
    Revoke,
)

CAMERA, PIP, SYNC, CACHED = 10001, 10002, 10003, 10004
IMPORTANCE = {CAMERA: 100, PIP: 200, SYNC: 300, CACHED: 400}


def make(policy: int = NPU_MODEL_POLICY_BUDGET, params=None, **kw) -> NpuArbiter:
    a = NpuArbiter(**kw)
    a.set_policy(policy, params, 0.0)
    for uid, imp in IMPORTANCE.items():
        a.importance_changed(uid, imp, 0.0)
    return a


def calls(actions):
    """The actions without log lines: what the apps and the HAL see."""
    return [x for x in actions if not isinstance(x, Log)]


def load(a: NpuArbiter, uid: int, rid: int, size: int, priority: int = NORMAL, now: float = 0.0) -> None:
    assert calls(a.request_can_load(uid, rid, size, priority, now)) == [CanLoad(uid, rid, NOW)]
    assert calls(a.notify_loaded(uid, rid, now)) == []


def states(a: NpuArbiter, now: float = 0.0) -> dict[tuple[int, int], str]:
    return {(r["uid"], r["id"]): r["state"] for r in a.dump(now)["requests"]}


def test_status_quo_is_the_default_and_approves_everything():
    a = NpuArbiter()
    assert a.dump(0.0)["policy"] == {"id": 0, "name": "status-quo", "params": {}, "source": None, "errors": []}
    for rid in range(5):  # far past what any budget would allow
        assert calls(a.request_can_load(CACHED, rid, L, OPP, 0.0)) == [CanLoad(CACHED, rid, NOW)]
    assert a.budget()["max"] is None and a.budget()["in_use"] == 20


def test_foreground_request_displaces_background_model():
    a = make()
    load(a, SYNC, 1, L, BG)
    acts = calls(a.request_can_load(CAMERA, 7, M, NORMAL, 1.0))
    assert acts == [RequestUnload(SYNC, 1, PRESSURE, 3.0, for_uid=CAMERA), CanLoad(CAMERA, 7, WAIT)]
    assert states(a) == {(SYNC, 1): "unloading", (CAMERA, 7): "wait_for_unload"}
    # The background app complies: its request completes and the camera may load.
    assert calls(a.notify_unloaded(SYNC, 1, 1.5)) == [
        RequestComplete(SYNC, 1, COMPLETE),
        CanLoad(CAMERA, 7, NOW),
    ]
    assert a.next_deadline() is None


def test_turn_taking_between_equals():
    a = make(NPU_MODEL_POLICY_TURN_TAKING)
    a.importance_changed(PIP, 100, 0.0)  # two foreground apps, equals
    load(a, CAMERA, 1, S)
    # Nobody has completed work yet, so the camera is not a victim for its equal.
    assert calls(a.request_can_load(PIP, 1, S, NORMAL, 1.0)) == [CanLoad(PIP, 1, NOT_PRIORITIZED)]
    # The camera finishes a job while its equal waits: its turn is over (rule 7).
    assert calls(a.work_completed(CAMERA, 2.0)) == [RequestUnload(CAMERA, 1, TURN, 4.0)]
    assert calls(a.notify_unloaded(CAMERA, 1, 2.5)) == [RequestComplete(CAMERA, 1, COMPLETE), CanLoad(PIP, 1, NOW)]
    a.notify_loaded(PIP, 1, 2.6)
    a.work_completed(PIP, 3.0)  # nobody waits: no turn to give
    assert states(a) == {(PIP, 1): "loaded"}
    # The camera asks again: PIP ran more recently, so PIP is the one to yield.
    acts = calls(a.request_can_load(CAMERA, 2, S, NORMAL, 4.0))
    assert acts == [RequestUnload(PIP, 1, PRESSURE, 6.0, for_uid=CAMERA), CanLoad(CAMERA, 2, WAIT)]


def test_completing_work_asks_only_the_finishers_loaded_models_to_unload():
    # Issue 12 point 3. Two equals; the camera holds the whole budget: one model loaded,
    # one approved and still compiling. PIP needs more than is free and waits.
    a = make()
    a.importance_changed(PIP, 100, 0.0)
    load(a, CAMERA, 1, M)
    assert calls(a.request_can_load(CAMERA, 2, M, NORMAL, 0.0)) == [CanLoad(CAMERA, 2, NOW)]
    assert calls(a.request_can_load(PIP, 1, M, NORMAL, 1.0)) == [CanLoad(PIP, 1, NOT_PRIORITIZED)]
    # The camera completes work while its equal waits: rule 7 asks its loaded model to
    # unload, and nothing else. Its approved request is not cancelled, and PIP is not
    # granted before anything was unloaded (the completion frees no budget: rule 6).
    assert calls(a.work_completed(CAMERA, 2.0)) == [RequestUnload(CAMERA, 1, TURN, 4.0)]
    assert states(a) == {(CAMERA, 1): "unloading", (CAMERA, 2): "approved", (PIP, 1): "not_prioritized"}
    # Inputs that free no budget re-examine nobody either.
    assert calls(a.notify_loaded(CAMERA, 2, 2.2)) == []
    assert calls(a.tick(3.0)) == []
    assert states(a)[(PIP, 1)] == "not_prioritized"
    # The unload frees budget: now the waiter is looked at again, and it fits.
    assert calls(a.notify_unloaded(CAMERA, 1, 3.5)) == [RequestComplete(CAMERA, 1, COMPLETE), CanLoad(PIP, 1, NOW)]
    assert states(a) == {(CAMERA, 2): "loaded", (PIP, 1): "approved"}


def test_after_a_turn_unload_a_waiter_that_still_does_not_fit_walks_again():
    # The freed budget re-examines the waiter (rule 6): it still needs more, and the
    # camera, which ran more recently, is now its victim (rule 3) for what is left.
    a = make()
    a.importance_changed(PIP, 100, 0.0)
    load(a, CAMERA, 1, M)
    load(a, CAMERA, 2, M)
    assert calls(a.request_can_load(PIP, 1, L, NORMAL, 1.0)) == [CanLoad(PIP, 1, NOT_PRIORITIZED)]
    assert calls(a.work_completed(CAMERA, 2.0)) == [RequestUnload(CAMERA, 1, TURN, 4.0), RequestUnload(CAMERA, 2, TURN, 4.0)]
    assert calls(a.notify_unloaded(CAMERA, 1, 2.5)) == [RequestComplete(CAMERA, 1, COMPLETE)]
    assert calls(a.notify_unloaded(CAMERA, 2, 2.6)) == [RequestComplete(CAMERA, 2, COMPLETE), CanLoad(PIP, 1, NOW)]


def test_not_prioritized_when_only_more_important_uids_hold_the_budget():
    a = make()
    load(a, CAMERA, 1, M)
    load(a, PIP, 1, M)
    before = a.dump(1.0)
    assert calls(a.request_can_load(SYNC, 1, S, NORMAL, 1.0)) == [CanLoad(SYNC, 1, NOT_PRIORITIZED)]
    after = a.dump(1.0)
    assert [r for r in after["requests"] if r["uid"] != SYNC] == before["requests"]  # nobody touched
    assert after["budget"]["reserved"] == 0  # NOT_PRIORITIZED reserves nothing
    # When the PIP window closes, the waiting request gets its turn.
    assert calls(a.notify_unloaded(PIP, 1, 2.0)) == [RequestComplete(PIP, 1, COMPLETE), CanLoad(SYNC, 1, NOW)]


def test_cancelling_a_pending_request():
    a = make()
    load(a, CAMERA, 1, L)
    a.request_can_load(SYNC, 5, S, BG, 1.0)
    assert calls(a.cancel(SYNC, 5, 2.0)) == [RequestComplete(SYNC, 5, CANCELLED)]
    with pytest.raises(IllegalStateException, match="already ended"):
        a.cancel(SYNC, 5, 2.0)
    # Freeing the budget later approves nothing for the cancelled request.
    assert calls(a.notify_unloaded(CAMERA, 1, 3.0)) == [RequestComplete(CAMERA, 1, COMPLETE)]


def test_cancelling_a_loaded_request_frees_its_budget_at_once():
    a = make()
    load(a, CAMERA, 1, L)
    a.request_can_load(PIP, 1, S, NORMAL, 1.0)
    assert calls(a.cancel(CAMERA, 1, 2.0)) == [RequestComplete(CAMERA, 1, CANCELLED), CanLoad(PIP, 1, NOW)]
    with pytest.raises(IllegalStateException):
        a.notify_unloaded(CAMERA, 1, 2.1)  # its end was already reported


def test_app_that_ignores_the_unload_request_is_revoked_at_the_deadline():
    a = make(unload_timeout=0.5)
    load(a, CACHED, 1, L)
    a.request_can_load(CAMERA, 1, L, NORMAL, 10.0)
    assert a.next_deadline() == 10.5
    assert calls(a.tick(10.49)) == []
    acts = a.tick(10.5)
    assert calls(acts) == [Revoke(CACHED, 1), RequestComplete(CACHED, 1, CANCELLED), CanLoad(CAMERA, 1, NOW)]
    assert any(isinstance(x, Log) and x.level == "W" and "revoking" in x.message for x in acts)
    assert a.next_deadline() is None
    assert a.dump(11.0)["counters"]["revoked"] == 1
    with pytest.raises(IllegalStateException):
        a.notify_unloaded(CACHED, 1, 11.0)  # too late: it has ended


def test_default_unload_deadline_is_two_seconds():
    a = make()
    load(a, CACHED, 1, L)
    (unload, _) = calls(a.request_can_load(CAMERA, 1, S, NORMAL, 5.0))
    assert unload.deadline == 7.0 and a.next_deadline() == 7.0
    assert a.dump(5.5)["requests"][0]["unload_deadline_in_s"] == 1.5


def test_app_death_drops_its_requests_silently_and_reexamines():
    a = make()
    load(a, CAMERA, 1, L)
    a.request_can_load(SYNC, 1, M, NORMAL, 1.0)
    a.request_can_load(CACHED, 1, S, NORMAL, 1.0)
    acts = calls(a.app_died(CAMERA, 2.0))
    # No callback for the dead app; the waiting ones, most important first.
    assert acts == [CanLoad(SYNC, 1, NOW), CanLoad(CACHED, 1, NOW)]
    assert all(r["uid"] != CAMERA for r in a.dump(2.0)["requests"])
    with pytest.raises(IllegalStateException, match="already ended"):
        a.notify_unloaded(CAMERA, 1, 2.0)
    # The same uid, relaunched, may reuse its ids.
    assert calls(a.request_can_load(CAMERA, 1, S, NORMAL, 3.0)) == [CanLoad(CAMERA, 1, NOW)]


def test_death_of_a_waiting_requester_releases_what_it_reserved():
    a = make()
    load(a, CACHED, 1, L)
    a.request_can_load(CAMERA, 1, L, NORMAL, 1.0)  # asks CACHED to unload, for itself
    a.request_can_load(SYNC, 1, S, NORMAL, 1.0)  # waits: the unload counts only for CAMERA
    assert states(a)[(SYNC, 1)] == "not_prioritized"
    a.app_died(CAMERA, 2.0)
    assert a.budget()["reserved"] == 0
    assert calls(a.notify_unloaded(CACHED, 1, 2.5)) == [RequestComplete(CACHED, 1, COMPLETE), CanLoad(SYNC, 1, NOW)]


def test_two_apps_may_use_the_same_request_id():
    a = make()
    load(a, CAMERA, 1, S)
    load(a, PIP, 1, S)
    a.notify_unloaded(CAMERA, 1, 1.0)
    assert states(a) == {(PIP, 1): "loaded"}


def test_an_ended_request_id_can_be_used_again():
    a = make()
    load(a, CAMERA, 3, S)
    a.notify_unloaded(CAMERA, 3, 1.0)
    load(a, CAMERA, 3, M, now=2.0)
    assert states(a) == {(CAMERA, 3): "loaded"}


# ---------------------------------------------------------------- thermal


def test_severe_refuses_background_loads_and_asks_background_models_to_unload():
    a = make()
    load(a, CAMERA, 1, S, BG)
    load(a, CAMERA, 2, S, NORMAL)
    a.request_can_load(CAMERA, 3, S, OPP, 0.0)
    a.request_can_load(SYNC, 1, S, NORMAL, 0.0)  # approved, not yet loaded
    assert calls(a.thermal_changed(THERMAL_STATUS_MODERATE, 1.0)) == []  # below the threshold
    acts = calls(a.thermal_changed(THERMAL_STATUS_SEVERE, 2.0))
    assert acts == [RequestUnload(CAMERA, 1, THERMAL, 4.0), RequestComplete(CAMERA, 3, CANCELLED)]
    # A new background request waits for the device to cool; a normal one is served.
    assert calls(a.request_can_load(PIP, 1, S, BG, 3.0)) == [CanLoad(PIP, 1, NOT_PRIORITIZED)]
    assert calls(a.request_can_load(PIP, 2, S, NORMAL, 3.0))[0] == CanLoad(PIP, 2, NOW)
    a.notify_unloaded(CAMERA, 1, 3.5)
    assert calls(a.thermal_changed(THERMAL_STATUS_NONE, 4.0)) == [CanLoad(PIP, 1, NOW)]


def test_critical_leaves_models_only_to_the_foreground():
    a = make()
    load(a, CAMERA, 1, S)
    load(a, PIP, 1, S)
    load(a, SYNC, 1, S)
    acts = calls(a.thermal_changed(THERMAL_STATUS_CRITICAL, 1.0))
    assert acts == [RequestUnload(PIP, 1, THERMAL, 3.0), RequestUnload(SYNC, 1, THERMAL, 3.0)]
    assert calls(a.request_can_load(PIP, 2, S, NORMAL, 1.5)) == [CanLoad(PIP, 2, NOT_PRIORITIZED)]
    assert calls(a.request_can_load(CAMERA, 2, S, NORMAL, 1.5)) == [CanLoad(CAMERA, 2, NOW)]
    # The camera app goes to the background while it is critical: its models go too.
    acts = calls(a.importance_changed(CAMERA, 400, 2.0))
    assert acts == [RequestUnload(CAMERA, 1, THERMAL, 4.0), RequestComplete(CAMERA, 2, CANCELLED)]


def test_thermal_applies_under_status_quo_too():
    a = NpuArbiter()
    a.thermal_changed(THERMAL_STATUS_SEVERE, 0.0)
    assert calls(a.request_can_load(CAMERA, 1, S, OPP, 0.0)) == [CanLoad(CAMERA, 1, NOT_PRIORITIZED)]
    assert calls(a.thermal_changed(THERMAL_STATUS_NONE, 1.0)) == [CanLoad(CAMERA, 1, NOW)]


def test_heat_takes_back_a_wait_for_unload_reservation():
    a = make()
    load(a, CACHED, 1, L)
    a.request_can_load(SYNC, 1, L, BG, 1.0)  # WAIT_FOR_UNLOAD, reserving
    acts = calls(a.thermal_changed(THERMAL_STATUS_SEVERE, 2.0))
    assert acts == [CanLoad(SYNC, 1, NOT_PRIORITIZED)]
    assert a.budget()["reserved"] == 0


# ---------------------------------------------------------------- bad calls change nothing


def _prepared() -> NpuArbiter:
    a = make()
    load(a, CAMERA, 1, M)
    a.request_can_load(CAMERA, 2, S, NORMAL, 0.0)  # approved, not loaded
    load(a, CACHED, 1, S)
    a.request_can_load(SYNC, 1, L, NORMAL, 0.0)  # waiting
    a.notify_unloaded(CAMERA, 1, 0.0)  # (CAMERA, 1) has ended
    assert states(a) == {(CAMERA, 2): "approved", (CACHED, 1): "loaded", (SYNC, 1): "not_prioritized"}
    return a


BAD_CALLS = [
    ("duplicate id", IllegalArgumentException, lambda a: a.request_can_load(CAMERA, 2, S, NORMAL, 1.0)),
    ("bad size", IllegalArgumentException, lambda a: a.request_can_load(CAMERA, 9, 3, NORMAL, 1.0)),
    ("bool size", IllegalArgumentException, lambda a: a.request_can_load(CAMERA, 9, True, NORMAL, 1.0)),
    ("bad priority", IllegalArgumentException, lambda a: a.request_can_load(CAMERA, 9, S, 500, 1.0)),
    ("id not int", IllegalArgumentException, lambda a: a.request_can_load(CAMERA, "9", S, NORMAL, 1.0)),
    ("id too big", IllegalArgumentException, lambda a: a.request_can_load(CAMERA, 2**31, S, NORMAL, 1.0)),
    ("negative uid", IllegalArgumentException, lambda a: a.request_can_load(-1, 9, S, NORMAL, 1.0)),
    ("nan time", IllegalArgumentException, lambda a: a.request_can_load(CAMERA, 9, S, NORMAL, float("nan"))),
    ("loaded unknown", IllegalStateException, lambda a: a.notify_loaded(CAMERA, 99, 1.0)),
    ("loaded ended", IllegalStateException, lambda a: a.notify_loaded(CAMERA, 1, 1.0)),
    ("loaded waiting", IllegalStateException, lambda a: a.notify_loaded(SYNC, 1, 1.0)),
    ("loaded twice", IllegalStateException, lambda a: a.notify_loaded(CACHED, 1, 1.0)),
    ("unloaded waiting", IllegalStateException, lambda a: a.notify_unloaded(SYNC, 1, 1.0)),
    ("unloaded ended", IllegalStateException, lambda a: a.notify_unloaded(CAMERA, 1, 1.0)),
    ("another uid's id", IllegalStateException, lambda a: a.notify_unloaded(PIP, 2, 1.0)),
    ("cancel unknown", IllegalStateException, lambda a: a.cancel(PIP, 1, 1.0)),
    ("cancel ended", IllegalStateException, lambda a: a.cancel(CAMERA, 1, 1.0)),
    ("importance 0", IllegalArgumentException, lambda a: a.importance_changed(PIP, 0, 1.0)),
    ("importance big", IllegalArgumentException, lambda a: a.importance_changed(PIP, 1001, 1.0)),
    ("thermal 7", IllegalArgumentException, lambda a: a.thermal_changed(7, 1.0)),
    ("thermal str", IllegalArgumentException, lambda a: a.thermal_changed("SEVERE", 1.0)),
    ("unknown policy", IllegalArgumentException, lambda a: a.set_policy(3, None, 1.0)),
    ("budget 0", IllegalArgumentException, lambda a: a.set_policy(NPU_MODEL_POLICY_BUDGET, {"maxBudget": 0}, 1.0)),
    ("tick inf", IllegalArgumentException, lambda a: a.tick(float("inf"))),
    ("work uid str", IllegalArgumentException, lambda a: a.work_completed("10001", 1.0)),
    ("death uid float", IllegalArgumentException, lambda a: a.app_died(10001.0, 1.0)),
]


@pytest.mark.parametrize("what, exc, call", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_a_bad_call_raises_and_changes_nothing(what, exc, call):
    a = _prepared()
    before = copy.deepcopy(vars(a))
    with pytest.raises(exc):
        call(a)
    assert vars(a) == before


def test_error_messages_say_what_was_wrong():
    a = _prepared()
    with pytest.raises(IllegalStateException, match="never approved"):
        a.notify_loaded(SYNC, 1, 1.0)
    with pytest.raises(IllegalStateException, match="never requested"):
        a.notify_loaded(CAMERA, 99, 1.0)
    with pytest.raises(IllegalArgumentException, match="already has a live request"):
        a.request_can_load(CAMERA, 2, S, NORMAL, 1.0)


def test_constructor_refuses_a_bad_unload_timeout():
    for bad in (0, -1.0, float("inf"), "2"):
        with pytest.raises(IllegalArgumentException):
            NpuArbiter(unload_timeout=bad)


# ---------------------------------------------------------------- dump


def test_dump_shows_policy_budget_requests_and_counters():
    a = make()
    load(a, CACHED, 1, L, BG, now=1.0)
    a.request_can_load(CAMERA, 4, M, NORMAL, 2.0)
    d = a.dump(3.0)
    assert d["policy"] == {"id": 2, "name": "budget", "params": {"maxBudget": 4, "modelSizeWeights": [1, 2, 4]},
                           "source": None, "errors": []}
    assert d["budget"] == {"max": 4, "in_use": 4, "reserved": 2, "being_freed": 4, "free": 0}
    assert d["thermal"] == {"severity": 0, "name": "NONE"}
    first, second = d["requests"]
    assert first | {"unload_deadline_in_s": None} == {
        "uid": CACHED, "id": 1, "size": L, "priority": BG, "weight": 4, "state": "unloading",
        "age_s": 2.0, "importance": 400, "unload_deadline_in_s": None, "unload_for": [CAMERA, 4],
        "unload_reason": PRESSURE,
    }
    assert first["unload_deadline_in_s"] == 1.0
    assert second["state"] == "wait_for_unload" and second["age_s"] == 1.0
    assert d["counters"]["requests"] == 2 and d["counters"]["unload_requests"] == 1
    assert d["counters"]["wait_for_unload"] == 1 and d["counters"]["can_load_now"] == 1


# ---------------------------------------------------------------- public modules


@pytest.mark.parametrize("package", ["framework.npumanager", "framework.server"])
def test_public_modules_re_export_each_name_exactly_once(package):
    import importlib

    mod = importlib.import_module(package)
    tree = ast.parse(pathlib.Path(mod.__file__).read_text())
    names = [a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names]
    assert len(names) == len(set(names))
    assert all(not n.startswith("_") and hasattr(mod, n) for n in names)


def test_every_constant_reaches_the_public_module():
    import framework.npumanager as public
    from framework.npumanager import _constants

    for name, value in vars(_constants).items():
        if name.isupper() and not name.startswith("_"):  # _CONSTANTS is the module's own table
            assert getattr(public, name) is value, name
