"""SPEC Part C's budget rules 1-10, one test (or a few) per rule, and the policy classes."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

import pytest

from framework.binder._status import IllegalArgumentException
from framework.npumanager import (
    NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED as CANCELLED,
    NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE as COMPLETE,
    NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW as NOW,
    NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED as NOT_PRIORITIZED,
    NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD as WAIT,
    NPU_MODEL_POLICY_BUDGET as BUDGET,
    NPU_MODEL_POLICY_STATUS_QUO as STATUS_QUO,
    NPU_MODEL_POLICY_TURN_TAKING as TURN_TAKING,
    NPU_MODEL_PRIORITY_BACKGROUND as BG,
    NPU_MODEL_PRIORITY_NORMAL as NORMAL,
    NPU_MODEL_PRIORITY_OPPORTUNISTIC as OPP,
    NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB as M,
    NPU_MODEL_SIZE_GREATER_THAN_2G as L,
    NPU_MODEL_SIZE_LESS_THAN_1GB as S,
    NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE as PRESSURE,
    NPU_MODEL_UNLOAD_REASON_TURN_TAKING as TURN,
)
from framework.binder import AID_SYSTEM
from framework.server import (
    DEFAULT_POLICIES,
    BudgetPolicy,
    CanLoad,
    Log,
    NpuArbiter,
    RequestComplete,
    RequestUnload,
    Revoke,
    StatusQuoPolicy,
    TurnTakingPolicy,
)

FG, FG2, PIP, SYNC, SYNC2, CACHED = 10001, 10011, 10002, 10003, 10013, 10004
IMPORTANCE = {FG: 100, FG2: 100, PIP: 200, SYNC: 300, SYNC2: 300, CACHED: 400}


def make(policy: int = BUDGET, params=None, **kw) -> NpuArbiter:
    a = NpuArbiter(**kw)
    a.set_policy(policy, params, 0.0)
    for uid, imp in IMPORTANCE.items():
        a.importance_changed(uid, imp, 0.0)
    return a


def calls(actions):
    return [x for x in actions if not isinstance(x, Log)]


def load(a, uid, rid, size, priority=NORMAL, now=0.0):
    assert calls(a.request_can_load(uid, rid, size, priority, now)) == [CanLoad(uid, rid, NOW)]
    a.notify_loaded(uid, rid, now)


def states(a, now=0.0):
    return {(r["uid"], r["id"]): r["state"] for r in a.dump(now)["requests"]}


def unloads(actions):
    return [(x.uid, x.request_id) for x in actions if isinstance(x, RequestUnload)]


# ---------------------------------------------------------------- rule 1: weights, in use, reservations


def test_rule1_in_use_is_the_weight_of_approved_and_loaded_requests():
    a = make()
    load(a, FG, 1, S)  # 1
    a.request_can_load(FG, 2, M, NORMAL, 0.0)  # 2, approved, not loaded
    assert a.budget() == {"max": 4, "in_use": 3, "reserved": 0, "being_freed": 0, "free": 1}
    custom = make(params={"maxBudget": 10, "modelSizeWeights": [3, 5, 7]})
    load(custom, FG, 1, L)
    load(custom, FG, 2, S)
    assert custom.budget()["in_use"] == 10 and custom.budget()["free"] == 0


def test_rule1_wait_for_unload_reserves_the_free_budget_and_what_its_victims_free():
    a = make()
    load(a, CACHED, 1, M)  # 2 in use, 2 free
    assert calls(a.request_can_load(FG, 1, L, NORMAL, 1.0)) == [
        RequestUnload(CACHED, 1, PRESSURE, 3.0, for_uid=FG),
        CanLoad(FG, 1, WAIT),
    ]
    # The 2 free units are kept for FG: a small request that would fit them waits.
    assert calls(a.request_can_load(PIP, 1, S, NORMAL, 1.0)) == [CanLoad(PIP, 1, NOT_PRIORITIZED)]
    b = a.budget()
    assert b["in_use"] + b["reserved"] <= b["max"] + b["being_freed"]
    assert b["free"] == 0
    # What the victim frees goes to FG, not to PIP.
    assert calls(a.notify_unloaded(CACHED, 1, 2.0)) == [RequestComplete(CACHED, 1, COMPLETE), CanLoad(FG, 1, NOW)]
    assert states(a)[(PIP, 1)] == "not_prioritized"


def test_rule1_not_prioritized_holds_and_reserves_nothing():
    a = make()
    load(a, FG, 1, L)
    a.request_can_load(SYNC, 1, L, NORMAL, 0.0)
    assert a.budget() == {"max": 4, "in_use": 4, "reserved": 0, "being_freed": 0, "free": 0}


# ---------------------------------------------------------------- rule 2: fits, unless a more important uid waits


def test_rule2_a_request_that_fits_is_granted_at_once():
    a = make()
    assert calls(a.request_can_load(CACHED, 1, L, OPP, 0.0)) == [CanLoad(CACHED, 1, NOW)]


def test_rule2_a_fitting_request_waits_behind_a_more_important_waiting_one():
    a = make()
    load(a, FG, 1, M)
    load(a, FG, 2, M)
    a.request_can_load(PIP, 1, L, NORMAL, 1.0)  # waits: only more important FG holds budget
    a.notify_unloaded(FG, 2, 2.0)  # 2 free: not enough for PIP's 4
    # SYNC's small request would fit, but PIP (more important) waits first.
    assert calls(a.request_can_load(SYNC, 1, S, NORMAL, 3.0)) == [CanLoad(SYNC, 1, NOT_PRIORITIZED)]
    # An equally important uid is not held back by PIP... but FG2 is more important: fits.
    assert calls(a.request_can_load(FG2, 1, S, NORMAL, 3.0)) == [CanLoad(FG2, 1, NOW)]
    assert calls(a.notify_unloaded(FG2, 1, 4.0)) == [RequestComplete(FG2, 1, COMPLETE)]
    assert calls(a.notify_unloaded(FG, 1, 5.0)) == [RequestComplete(FG, 1, COMPLETE), CanLoad(PIP, 1, NOW)]
    assert states(a)[(SYNC, 1)] == "not_prioritized"


def test_rule2_a_request_that_can_never_fit_blocks_nobody():
    a = make(params={"maxBudget": 3})
    a.request_can_load(FG, 1, L, NORMAL, 0.0)  # weighs 4 > maxBudget 3: never
    assert calls(a.request_can_load(SYNC, 1, S, NORMAL, 0.0)) == [CanLoad(SYNC, 1, NOW)]
    assert states(a)[(FG, 1)] == "not_prioritized"


# ---------------------------------------------------------------- rule 3: the victim walk


def test_rule3_walk_starts_from_the_least_important_uid():
    a = make()
    load(a, SYNC, 1, S)
    load(a, CACHED, 1, S)
    load(a, PIP, 1, M)
    assert unloads(a.request_can_load(FG, 1, S, NORMAL, 1.0)) == [(CACHED, 1)]
    assert unloads(a.request_can_load(FG, 2, S, NORMAL, 1.0)) == [(SYNC, 1)]
    assert unloads(a.request_can_load(FG, 3, M, NORMAL, 1.0)) == [(PIP, 1)]


def test_rule3_walk_never_touches_a_more_important_uid():
    a = make()
    load(a, FG, 1, M)
    load(a, CACHED, 1, S)
    acts = calls(a.request_can_load(PIP, 1, L, NORMAL, 1.0))  # would need FG's model too
    assert acts == [CanLoad(PIP, 1, NOT_PRIORITIZED)]
    assert states(a) == {(FG, 1): "loaded", (CACHED, 1): "loaded", (PIP, 1): "not_prioritized"}


def test_rule3_equals_are_victims_only_if_they_completed_work_more_recently():
    a = make()
    load(a, SYNC2, 1, L)
    # SYNC2 never completed work, SYNC neither: SYNC2 keeps its model.
    assert calls(a.request_can_load(SYNC, 1, S, NORMAL, 1.0)) == [CanLoad(SYNC, 1, NOT_PRIORITIZED)]
    a.cancel(SYNC, 1, 1.0)
    a.work_completed(SYNC, 2.0)
    a.work_completed(SYNC2, 3.0)  # SYNC2 ran more recently than SYNC: it yields
    assert unloads(a.request_can_load(SYNC, 2, S, NORMAL, 4.0)) == [(SYNC2, 1)]
    b = make()
    load(b, SYNC2, 1, L)
    b.work_completed(SYNC2, 2.0)
    b.work_completed(SYNC, 3.0)  # SYNC ran last: SYNC2 keeps its turn
    assert unloads(b.request_can_load(SYNC, 1, S, NORMAL, 4.0)) == []


def test_rule3_among_equal_victims_the_one_that_ran_most_recently_goes_first():
    a = make()
    load(a, SYNC, 1, S)
    load(a, SYNC2, 1, S)
    load(a, CACHED, 1, M)
    a.work_completed(SYNC, 1.0)
    a.work_completed(SYNC2, 2.0)
    assert unloads(a.request_can_load(FG, 1, L, NORMAL, 3.0)) == [(CACHED, 1), (SYNC2, 1), (SYNC, 1)]
    c = make()
    load(c, SYNC, 1, S)
    load(c, SYNC2, 1, S)
    load(c, CACHED, 1, M)
    c.work_completed(SYNC2, 1.0)
    c.work_completed(SYNC, 2.0)
    assert unloads(c.request_can_load(FG, 1, M, NORMAL, 3.0)) == [(CACHED, 1)]
    assert unloads(c.request_can_load(FG, 2, S, NORMAL, 3.0)) == [(SYNC, 1)]


def test_rule3_a_victims_requests_go_by_their_own_priority_then_newest_first():
    a = make()
    load(a, CACHED, 1, S, NORMAL)
    load(a, CACHED, 2, S, BG)
    load(a, CACHED, 3, S, OPP)
    load(a, CACHED, 4, S, NORMAL)
    assert unloads(a.request_can_load(FG, 1, M, NORMAL, 1.0)) == [(CACHED, 3), (CACHED, 2)]
    assert unloads(a.request_can_load(FG, 2, S, NORMAL, 1.0)) == [(CACHED, 4)]
    assert unloads(a.request_can_load(FG, 3, S, NORMAL, 1.0)) == [(CACHED, 1)]


def test_rule3_a_model_asked_to_unload_is_not_asked_again_and_counts_for_the_first_asker():
    a = make()
    load(a, CACHED, 1, L)
    assert unloads(a.request_can_load(PIP, 1, S, NORMAL, 1.0)) == [(CACHED, 1)]
    # FG is more important than PIP but CACHED's model is already promised to PIP.
    assert calls(a.request_can_load(FG, 1, S, NORMAL, 1.5)) == [CanLoad(FG, 1, NOT_PRIORITIZED)]
    # When it goes, PIP (the asker) is served first, then FG from what is left.
    assert calls(a.notify_unloaded(CACHED, 1, 2.0)) == [
        RequestComplete(CACHED, 1, COMPLETE),
        CanLoad(PIP, 1, NOW),
        CanLoad(FG, 1, NOW),
    ]


def test_rule3_not_prioritized_requests_of_a_victim_are_not_taken():
    a = make()
    load(a, PIP, 1, L)
    a.request_can_load(CACHED, 1, S, NORMAL, 0.0)  # waits, holds nothing
    acts = calls(a.request_can_load(SYNC, 1, S, NORMAL, 1.0))
    assert acts == [CanLoad(SYNC, 1, NOT_PRIORITIZED)]  # nothing to take from CACHED
    assert states(a)[(CACHED, 1)] == "not_prioritized"


# ---------------------------------------------------------------- rule 4: unload or cancel


def test_rule4_loaded_victims_are_asked_to_unload_others_cancelled():
    a = make()
    a.request_can_load(CACHED, 1, M, NORMAL, 0.0)  # approved, not loaded
    load(a, CACHED, 2, M)
    acts = calls(a.request_can_load(FG, 1, L, NORMAL, 1.0))
    assert acts == [
        RequestUnload(CACHED, 2, PRESSURE, 3.0, for_uid=FG),
        RequestComplete(CACHED, 1, CANCELLED, for_uid=FG),
        CanLoad(FG, 1, WAIT),
    ]


def test_rule4_a_wait_for_unload_victim_is_cancelled():
    a = make()
    load(a, CACHED, 1, M)  # 2 in use, 2 free
    assert calls(a.request_can_load(SYNC, 1, L, NORMAL, 1.0))[-1] == CanLoad(SYNC, 1, WAIT)  # reserves the 2 free
    # FG's walk: CACHED's model is already unloading for SYNC (counts for nobody else);
    # SYNC's reservation is cancelled, which frees enough at once.
    assert calls(a.request_can_load(FG, 1, M, NORMAL, 2.0)) == [
        RequestComplete(SYNC, 1, CANCELLED, for_uid=FG),
        CanLoad(FG, 1, NOW),
    ]
    assert states(a) == {(CACHED, 1): "unloading", (FG, 1): "approved"}


def test_rule4_a_fully_covered_reservation_is_left_alone():
    a = make()
    load(a, CACHED, 1, L)
    a.request_can_load(SYNC, 1, M, NORMAL, 1.0)  # its 2 are covered by CACHED's 4
    # Cancelling SYNC would free nothing now, so FG waits and SYNC keeps its request.
    assert calls(a.request_can_load(FG, 1, M, NORMAL, 2.0)) == [CanLoad(FG, 1, NOT_PRIORITIZED)]
    assert calls(a.notify_unloaded(CACHED, 1, 3.0)) == [
        RequestComplete(CACHED, 1, COMPLETE),
        CanLoad(SYNC, 1, NOW),
        CanLoad(FG, 1, NOW),
    ]


# ---------------------------------------------------------------- rule 5: when the requester is told


def test_rule5_cancellations_alone_grant_at_once():
    a = make()
    a.request_can_load(CACHED, 1, L, NORMAL, 0.0)  # approved, never loaded
    assert calls(a.request_can_load(FG, 1, L, NORMAL, 1.0)) == [
        RequestComplete(CACHED, 1, CANCELLED, for_uid=FG),
        CanLoad(FG, 1, NOW),
    ]


def test_rule5_can_load_now_only_once_enough_is_freed():
    a = make()
    load(a, CACHED, 1, M)
    load(a, CACHED, 2, M)
    acts = calls(a.request_can_load(FG, 1, L, NORMAL, 1.0))
    assert unloads(acts) == [(CACHED, 2), (CACHED, 1)] and acts[-1] == CanLoad(FG, 1, WAIT)
    assert calls(a.notify_unloaded(CACHED, 2, 1.5)) == [RequestComplete(CACHED, 2, COMPLETE)]  # half
    assert calls(a.tick(3.0)) == [Revoke(CACHED, 1), RequestComplete(CACHED, 1, CANCELLED), CanLoad(FG, 1, NOW)]


# ---------------------------------------------------------------- rule 6: nobody touched; re-examination


def test_rule6_when_not_enough_can_be_freed_nobody_is_touched():
    a = make()
    load(a, FG, 1, M)
    load(a, CACHED, 1, S)
    a.request_can_load(CACHED, 2, S, NORMAL, 0.0)  # approved: could be cancelled...
    before = a.dump(1.0)["requests"]
    # ...but even both of CACHED's give only 2 of the 4 SYNC needs.
    assert calls(a.request_can_load(SYNC, 1, L, NORMAL, 1.0)) == [CanLoad(SYNC, 1, NOT_PRIORITIZED)]
    assert a.dump(1.0)["requests"][:3] == before


def test_rule6_reexamination_goes_most_important_uid_first_then_oldest():
    a = make()
    load(a, FG, 1, L)
    a.request_can_load(CACHED, 1, S, NORMAL, 1.0)
    a.request_can_load(SYNC, 2, S, NORMAL, 2.0)
    a.request_can_load(SYNC, 1, S, NORMAL, 3.0)
    a.request_can_load(PIP, 1, S, NORMAL, 4.0)
    acts = calls(a.notify_unloaded(FG, 1, 5.0))
    assert acts[1:] == [CanLoad(PIP, 1, NOW), CanLoad(SYNC, 2, NOW), CanLoad(SYNC, 1, NOW), CanLoad(CACHED, 1, NOW)]


def test_rule6_a_waiting_request_that_does_not_fit_walks_again_on_importance_change():
    a = make()
    load(a, PIP, 1, L)
    a.request_can_load(SYNC, 1, S, NORMAL, 1.0)  # PIP is more important: waits
    # The PIP app goes to the cache: now SYNC may displace it.
    acts = calls(a.importance_changed(PIP, 400, 2.0))
    assert acts == [RequestUnload(PIP, 1, PRESSURE, 4.0, for_uid=SYNC), CanLoad(SYNC, 1, WAIT)]


# ---------------------------------------------------------------- rule 7: turns


def test_rule7_finishing_work_while_an_equal_waits_costs_the_models():
    a = make()
    load(a, SYNC, 1, M)
    load(a, SYNC, 2, M)
    a.request_can_load(SYNC2, 1, S, NORMAL, 1.0)
    assert calls(a.work_completed(SYNC, 2.0)) == [RequestUnload(SYNC, 1, TURN, 4.0), RequestUnload(SYNC, 2, TURN, 4.0)]


def test_rule7_no_turn_when_only_a_less_or_more_important_uid_waits():
    a = make()
    load(a, FG2, 1, M)
    load(a, SYNC, 1, S)
    # FG needs 4: SYNC's 1 is not enough and FG2 is its equal, so FG waits, nobody touched.
    assert calls(a.request_can_load(FG, 1, L, NORMAL, 1.0)) == [CanLoad(FG, 1, NOT_PRIORITIZED)]
    assert calls(a.work_completed(SYNC, 2.0)) == []  # the waiter is more important, not equal
    b = make()
    load(b, SYNC, 1, L)
    b.request_can_load(CACHED, 1, S, NORMAL, 1.0)
    assert calls(b.work_completed(SYNC, 2.0)) == []  # the waiter is less important


def test_rule7_only_policies_that_take_turns():
    a = make(STATUS_QUO)
    load(a, SYNC, 1, L)
    load(a, SYNC2, 1, L)
    assert calls(a.work_completed(SYNC, 2.0)) == []


# ---------------------------------------------------------------- rule 8: ends


def test_rule8_unloaded_is_complete_cancel_is_cancelled_each_end_once():
    for policy in (STATUS_QUO, BUDGET, TURN_TAKING):
        a = make(policy)
        load(a, FG, 1, S)
        assert calls(a.notify_unloaded(FG, 1, 1.0)) == [RequestComplete(FG, 1, COMPLETE)]
        load(a, FG, 2, S, now=2.0)
        assert calls(a.cancel(FG, 2, 3.0)) == [RequestComplete(FG, 2, CANCELLED)]
        assert a.dump(3.0)["counters"]["completed"] == 1 and a.dump(3.0)["counters"]["cancelled"] == 1


def test_rule8_notify_unloaded_of_an_approved_but_never_loaded_request_completes_it():
    a = make()
    a.request_can_load(FG, 1, S, NORMAL, 0.0)
    assert calls(a.notify_unloaded(FG, 1, 1.0)) == [RequestComplete(FG, 1, COMPLETE)]


# ---------------------------------------------------------------- rule 9: setPolicy


def test_rule9_set_policy_keeps_requests_and_reexamines_waiting_ones():
    a = make()
    load(a, FG, 1, L)
    a.request_can_load(SYNC, 1, M, NORMAL, 1.0)
    a.request_can_load(CACHED, 1, S, NORMAL, 1.0)
    acts = calls(a.set_policy(STATUS_QUO, None, 2.0))
    assert acts == [CanLoad(SYNC, 1, NOW), CanLoad(CACHED, 1, NOW)]
    assert states(a, 2.0)[(FG, 1)] == "loaded"


def test_rule9_lowering_the_maximum_keeps_what_is_approved_but_grants_nothing_new():
    a = make()
    load(a, FG, 1, M)
    load(a, PIP, 1, M)
    a.set_policy(BUDGET, {"maxBudget": 2}, 1.0)
    assert a.budget()["in_use"] == 4 and states(a) == {(FG, 1): "loaded", (PIP, 1): "loaded"}
    # Even PIP's 2 units would leave 2 in use = the maximum: no room for 1 more.
    assert calls(a.request_can_load(FG, 2, S, NORMAL, 2.0)) == [CanLoad(FG, 2, NOT_PRIORITIZED)]
    # Once FG releases its own model, PIP's is enough.
    assert calls(a.notify_unloaded(FG, 1, 3.0)) == [
        RequestComplete(FG, 1, COMPLETE),
        RequestUnload(PIP, 1, PRESSURE, 5.0, for_uid=FG),
        CanLoad(FG, 2, WAIT),
    ]
    assert calls(a.notify_unloaded(PIP, 1, 4.0))[-1] == CanLoad(FG, 2, NOW)


def test_rule9_a_reservation_that_still_adds_up_survives_set_policy():
    a = make()
    load(a, CACHED, 1, L)
    a.request_can_load(FG, 1, M, NORMAL, 1.0)  # WAIT_FOR_UNLOAD on CACHED
    # The same policy again, then turn taking (CACHED's unloading model frees the one slot).
    assert calls(a.set_policy(BUDGET, None, 1.5)) == []
    assert calls(a.set_policy(TURN_TAKING, {}, 2.0)) == []
    assert states(a)[(FG, 1)] == "wait_for_unload"
    assert calls(a.notify_unloaded(CACHED, 1, 3.0)) == [RequestComplete(CACHED, 1, COMPLETE), CanLoad(FG, 1, NOW)]


def test_rule9_a_reservation_that_no_longer_adds_up_is_given_up():
    a = make()
    load(a, CACHED, 1, M)
    a.request_can_load(FG, 1, L, NORMAL, 1.0)  # 2 free + CACHED's 2, reserved
    assert calls(a.set_policy(BUDGET, {"maxBudget": 3}, 2.0)) == [CanLoad(FG, 1, NOT_PRIORITIZED)]
    assert a.budget()["reserved"] == 0
    # Back to a maximum of 4 after CACHED is gone: FG fits and is granted.
    a.notify_unloaded(CACHED, 1, 3.0)
    assert calls(a.set_policy(BUDGET, None, 4.0)) == [CanLoad(FG, 1, NOW)]


@pytest.mark.parametrize(
    "policy, params",
    [
        (TURN_TAKING, {"maxBudget": 1}),
        (STATUS_QUO, {"maxBudget": 4}),
        (BUDGET, {"maxBudget": 0}),
        (BUDGET, {"maxBudget": -3}),
        (BUDGET, {"maxBudget": 2.5}),
        (BUDGET, {"maxBudget": True}),
        (BUDGET, {"modelSizeWeights": [1, 0, 4]}),
        (BUDGET, {"modelSizeWeights": [1, -2, 4]}),
        (BUDGET, {"modelSizeWeights": [1, 2]}),
        (BUDGET, {"modelSizeWeights": "124"}),
        (BUDGET, {"maxbudget": 4}),
        (BUDGET, [("maxBudget", 4)]),
        (7, None),
        ("budget", None),
    ],
)
def test_rule9_a_refused_set_policy_leaves_the_old_policy(policy, params):
    a = make(BUDGET, {"maxBudget": 6})
    load(a, FG, 1, L)
    a.request_can_load(SYNC, 1, L, NORMAL, 0.0)
    before = copy.deepcopy(vars(a))
    with pytest.raises(IllegalArgumentException):
        a.set_policy(policy, params, 1.0)
    assert vars(a) == before
    assert a.policy == BudgetPolicy(6, (1, 2, 4))


def test_rule9_budget_parameters_default_when_missing():
    a = make(BUDGET, {"modelSizeWeights": [1, 1, 2]})
    assert a.dump(0.0)["policy"]["params"] == {"maxBudget": 4, "modelSizeWeights": [1, 1, 2]}
    a.set_policy(BUDGET, {"maxBudget": 8}, 0.0)
    assert a.dump(0.0)["policy"]["params"] == {"maxBudget": 8, "modelSizeWeights": [1, 2, 4]}


# ---------------------------------------------------------------- rule 10: the request's own priority


def test_rule10_request_priority_orders_a_uids_own_requests_but_not_admission():
    a = make()
    # Admission ignores the request's priority: an OPPORTUNISTIC request that fits loads.
    assert calls(a.request_can_load(CACHED, 1, M, OPP, 0.0)) == [CanLoad(CACHED, 1, NOW)]
    a.notify_loaded(CACHED, 1, 0.0)
    load(a, CACHED, 2, M, NORMAL)
    # And a NORMAL request of a less important uid does not displace anybody's OPPORTUNISTIC one.
    assert calls(a.request_can_load(CACHED + 100, 1, S, NORMAL, 1.0)) == [CanLoad(CACHED + 100, 1, NOT_PRIORITIZED)]


# ---------------------------------------------------------------- the policy classes


def test_turn_taking_is_budget_with_weights_one_and_maximum_one():
    t = TurnTakingPolicy.from_params(None)
    assert t.max_budget == 1 and [t.weight(s) for s in (S, M, L)] == [1, 1, 1] and t.takes_turns
    a = make(TURN_TAKING)
    load(a, FG, 1, L)
    assert calls(a.request_can_load(FG, 2, S, NORMAL, 0.0)) == [CanLoad(FG, 2, NOT_PRIORITIZED)]


def test_policies_are_selected_by_aosp_ids_and_round_trip_their_params():
    assert dict(DEFAULT_POLICIES) == {0: StatusQuoPolicy, 1: TurnTakingPolicy, 2: BudgetPolicy}
    p = BudgetPolicy.from_params({"maxBudget": 9, "modelSizeWeights": (2, 3, 5)})
    assert BudgetPolicy.from_params(p.params()) == p
    assert StatusQuoPolicy.from_params(None).max_budget is None
    with pytest.raises(TypeError):
        DEFAULT_POLICIES[5] = StatusQuoPolicy  # read-only: no module-level mutable state


def test_an_engineer_can_add_a_policy():
    @dataclass(frozen=True)
    class OneLargeModel(BudgetPolicy):
        """Anything at all, but only one >2G model at a time."""

        policy_id: ClassVar[int] = 100
        name: ClassVar[str] = "one-large"
        takes_turns: ClassVar[bool] = False
        budget: int = 100
        weights: tuple[int, int, int] = (0 + 1, 1, 100)

        @classmethod
        def from_params(cls, params):
            return cls()

    a = NpuArbiter(policies={**DEFAULT_POLICIES, 100: OneLargeModel})
    a.set_policy(100, None, 0.0)
    a.importance_changed(FG, 100, 0.0)
    a.importance_changed(CACHED, 400, 0.0)
    load(a, CACHED, 1, L)
    assert unloads(a.request_can_load(FG, 1, L, NORMAL, 1.0)) == [(CACHED, 1)]
    assert a.dump(1.0)["policy"]["name"] == "one-large"


def test_system_uid_ranks_as_foreground_whatever_it_is_told():
    a = make()
    a.importance_changed(AID_SYSTEM, 400, 0.0)
    assert a.importance_of(AID_SYSTEM) == 100 and a.importance_of(0) == 100
    assert a.importance_of(99999) == 1000  # unknown uids: the lowest
    load(a, PIP, 1, L)
    assert calls(a.request_can_load(AID_SYSTEM, 1, S, NORMAL, 1.0))[0] == RequestUnload(
        PIP, 1, PRESSURE, 3.0, for_uid=AID_SYSTEM
    )
