"""What filing and deciding cost in the arbiter does not grow with other apps' requests (issue 17).

64 apps at their cap of 500 are 32,000 requests on file. Each event of a 65th app's
request (filing, a completion, a cancel) and a bystander's importance change is counted
in Python lines executed by ``framework/server`` (``bench/filing.py``'s ``count_ops``: exact,
whatever the machine's load), on a world of 100 requests and on one of 32,000 from the
same 64 apps, under the status quo (all loaded) and the budget policy (nearly all
waiting). The indexes those events read are checked against a walk over every request
at every step of the invariants' state machine.
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
from hypothesis import settings

from framework.lab import policy_machine
from framework.npumanager import (
    NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW as NOW,
    NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED as NOT_PRIORITIZED,
    NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD as WAIT,
    NPU_MODEL_PRIORITY_BACKGROUND as BG,
    NPU_MODEL_PRIORITY_NORMAL as NORMAL,
    NPU_MODEL_SIZE_GREATER_THAN_2G as L,
)
from framework.server import (
    THERMAL_STATUS_NONE,
    THERMAL_STATUS_SEVERE,
    BudgetPolicy,
    CanLoad,
    NpuArbiter,
    PolicyContext,
    RequestState,
)

_spec = importlib.util.spec_from_file_location(
    "bench_filing", pathlib.Path(__file__).resolve().parents[1] / "bench" / "filing.py")
assert _spec is not None and _spec.loader is not None
filing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(filing)


@pytest.mark.slow
@pytest.mark.parametrize("policy", sorted(filing.POLICIES))
def test_an_event_costs_the_same_with_100_or_32000_requests_on_file(policy):
    ops = {}
    for n in (100, 32_000):
        a = filing.world(n, policy)
        assert len(a.dump(0.0)["requests"]) == n
        ops[n] = {name: filing.count_ops(call) for name, call in filing.life(a)}
    for event, few in ops[100].items():
        many = ops[32_000][event]
        # Equal today; a little room for a heap's log n, none for a walk (which is 320x).
        assert many <= few * 1.2 + 10, f"{policy}: {event} took {many} lines at 32,000 requests, {few} at 100"


def test_the_op_counter_counts_a_walk():
    # The counter is what the test above rests on: a walk over the requests must show.
    a = filing.world(2_000, "status-quo")
    one = filing.count_ops(lambda: a.request_ids(filing.FIRST_UID))
    everything = filing.count_ops(lambda: a.dump(0.0))
    assert everything > 2_000 > 50 * one


class IndexCheckingBudget(BudgetPolicy):
    """The budget policy, checking at every event that each indexed read agrees with a walk."""

    def on_event(self, ctx: PolicyContext, event) -> None:
        every = ctx.requests()
        assert [r.seq for r in every] == sorted(r.seq for r in every)
        uids = ctx.uids()
        assert len(uids) == len(set(uids)) and set(uids) == {r.uid for r in every}
        states = list(RequestState)
        for uid in {r.uid for r in every}:
            assert ctx.requests_of(uid) == [r for r in every if r.uid == uid]
            for s in states:
                assert ctx.requests_of(uid, s) == [r for r in every if r.uid == uid and r.state is s]
                assert ctx.weight_of(uid, s) == sum(ctx.weight(r) for r in every if r.uid == uid and r.state is s)
        for s in states:
            assert ctx.requests_in(s) == [r for r in every if r.state is s]
            assert ctx.weight_in(s) == sum(ctx.weight(r) for r in every if r.state is s)
        assert ctx.waiting() == [r for r in every if r.waiting]
        heads, seen = [], set()
        for r in every:
            kind = (r.uid, r.size, r.priority)
            if r.state is RequestState.WAIT_FOR_UNLOAD:
                heads.append(r)
            elif r.state is RequestState.NOT_PRIORITIZED and kind not in seen:
                seen.add(kind)
                heads.append(r)
        assert ctx.waiting_heads() == heads
        claims: dict = {}
        for r in every:
            if r.claimant is not None:
                claims[r.claimant] = claims.get(r.claimant, 0) + ctx.weight(r)
        assert ctx.claims() == claims
        super().on_event(ctx, event)


IndexedReads = policy_machine(IndexCheckingBudget)
IndexedReads.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestIndexedReadsAgreeWithAWalk = IndexedReads.TestCase


def test_a_reservation_taken_back_by_heat_heads_its_kind_again():
    # uid 10002's first request reserves (WAIT_FOR_UNLOAD), its second waits behind it;
    # heat that refuses background work takes the reservation back (NOT_PRIORITIZED):
    # the older one heads its kind again, and is the one granted when room comes.
    a = NpuArbiter(policy=IndexCheckingBudget(budget=4), strict=True)
    a.importance_changed(10001, 300, 0.0)
    a.importance_changed(10002, 100, 0.0)
    a.request_can_load(10001, 1, L, NORMAL, 0.0)
    a.notify_loaded(10001, 1, 0.0)
    assert CanLoad(10002, 1, WAIT) in a.request_can_load(10002, 1, L, BG, 0.0)
    assert CanLoad(10002, 2, NOT_PRIORITIZED) in a.request_can_load(10002, 2, L, BG, 0.0)
    assert CanLoad(10002, 1, NOT_PRIORITIZED) in a.thermal_changed(THERMAL_STATUS_SEVERE, 0.0)
    a.notify_unloaded(10001, 1, 0.0)
    assert CanLoad(10002, 1, NOW) in a.thermal_changed(THERMAL_STATUS_NONE, 0.0)
