"""``npuemu lab check-policy``: the npu service's invariants, checked against any load policy.

The stateful test of the npu service (``tests/test_npu_stateful.py``) lives here so
that it runs against a policy of one's own as it does against the built-ins: a
hypothesis state machine drives an ``NpuArbiter`` with every input the service gets
(requests, cancels, loads, unloads, importance changes, deaths, completed work, heat,
time, setPolicy, and bad calls of every kind) and keeps its own record of what each app
has been *told*, built from the returned actions alone. After every step it checks:

- the apps' view and the arbiter's state agree, request by request;
- the budget the policy declares (``max_budget``, ``weight``): in use never exceeds the
  maximum, and in use + reserved never exceeds the maximum + the weight being freed,
  except right after a setPolicy, while what was already approved stands above the new
  numbers (and then nothing grows);
- every request ends exactly once, and only a live request is ever called back;
- no request of a dead app survives its death;
- nobody is displaced for a less important uid (an equal only if it ran more recently),
  heat unloads only what the thermal rule forbids, turn unloads only for the finisher;
- a bad call raises and leaves the state untouched;
- an unload deadline is honoured exactly, and ``next_deadline`` says when;
- rule 7: a COMPLETED work event asks only the finisher's loaded models to unload;
- rule 6: a waiting request moves only at a step that could let it: one where a
  request ended or was dropped, or an importance, the heat or the policy changed.

The arbiter runs *strict*: an action of the policy that breaks an invariant, or an
exception from it, raises ``PolicyError`` (naming the invariant and the event) instead
of falling back as the service does. ``check_policy`` runs the machine and returns the
first failure, shrunk by hypothesis to its shortest sequence of inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.errors import FlakyFailure
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from framework.binder import AID_SYSTEM, IllegalArgumentException, IllegalStateException
from framework.npumanager import (
    NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED as CANCELLED,
    NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE as COMPLETE,
    NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW as NOW,
    NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED as NOT_PRIORITIZED,
    NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD as WAIT,
    NPU_MODEL_SIZES,
    NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE as PRESSURE,
    NPU_MODEL_UNLOAD_REASON_THERMAL as THERMAL,
    NPU_MODEL_UNLOAD_REASON_TURN_TAKING as TURN,
)
from framework.server import (
    CanLoad,
    Log,
    NpuArbiter,
    NpuPolicy,
    PolicyError,
    RequestComplete,
    RequestUnload,
    Revoke,
    thermal_allows,
)

__all__ = ["CheckResult", "NpuArbiterMachine", "check_policy", "policy_machine"]

UIDS = [AID_SYSTEM, 10001, 10002, 10003]
IDS = st.integers(0, 2)
PRIORITIES = st.sampled_from([0, 0, 1000, 2000])  # NORMAL most often: heat refuses the others
SEVERITIES = st.sampled_from([0, 0, 0, 0, 1, 3, 4, 6])  # mostly cool, so models load
IMPORTANCES = [100, 125, 200, 300, 400, 1000]
TIMEOUT = 2.0
STATE_NAME = {"np": "not_prioritized", "wfu": "wait_for_unload", "approved": "approved", "loaded": "loaded", "unloading": "unloading"}

POLICY_CHOICES = st.one_of(
    st.just((0, None)),
    st.just((1, None)),
    st.just((1, {})),
    st.builds(lambda m: (2, {"maxBudget": m}), st.integers(1, 6)),
    st.builds(
        lambda m, w: (2, {"maxBudget": m, "modelSizeWeights": w}),
        st.integers(1, 6),
        st.lists(st.integers(1, 4), min_size=3, max_size=3),
    ),
)
BAD_POLICIES = st.sampled_from(
    [
        (1, {"maxBudget": 1}),
        (2, {"maxBudget": 0}),
        (2, {"modelSizeWeights": [1, 0, 1]}),
        (2, {"modelSizeWeights": [1, 1]}),
        (0, {"x": 1}),
        (9, None),
    ]
)

class _Told:
    """One request as its app sees it."""

    __slots__ = ("size", "priority", "status", "told", "deadline")

    def __init__(self, size: int, priority: int) -> None:
        self.size, self.priority = size, priority
        self.status = "new"
        self.told: int | None = None
        self.deadline: float | None = None


class NpuArbiterMachine(RuleBasedStateMachine):
    """The machine over the built-in policies (``setPolicy`` among them); ``policy_machine`` makes one for any policy."""

    #: Makes the policy under test (a fresh one per run), or None: the built-ins, switched by setPolicy.
    make_policy: ClassVar[Callable[[], NpuPolicy] | None] = None

    def __init__(self) -> None:
        super().__init__()
        plugin = None if self.make_policy is None else type(self).make_policy()
        self.a = NpuArbiter(unload_timeout=TIMEOUT, policy=plugin, strict=True)
        self.plugin = plugin
        self.now = 0.0
        self.live: dict[tuple[int, int], _Told] = {}
        self.ended_once: set[tuple[int, int, int]] = set()  # (uid, id, incarnation)
        self.incarnation: dict[tuple[int, int], int] = {}
        self.importance: dict[int, int] = {}
        self.ran: dict[int, float] = {}
        self.thermal = 0
        self.limit: int | None = self.a.policy.max_budget
        self.weights = tuple(self.a.policy.weight(s) for s in NPU_MODEL_SIZES)
        self.takes_turns = False
        self.may_exceed = False
        self.prev = (0, 0)
        self.dead_quiet: set[int] = set()  # uids that died and have not asked since
        self.step_kind = ""
        self.finisher: int | None = None
        self.reexamines = False  # whether this step may move a waiting request (rule 6)

    # ------------------------------------------------------------ the model's helpers

    def imp(self, uid: int) -> int:
        return 100 if uid in (0, AID_SYSTEM) else self.importance.get(uid, 1000)

    def w(self, t: _Told) -> int:
        return self.weights[t.size]

    def usage(self) -> tuple[int, int, int]:
        used = sum(self.w(t) for t in self.live.values() if t.status in ("approved", "loaded", "unloading"))
        reserved = sum(self.w(t) for t in self.live.values() if t.status == "wfu")
        freeing = sum(self.w(t) for t in self.live.values() if t.status == "unloading")
        return used, reserved, freeing

    def displaced_fairly(self, victim: int, for_uid: int) -> bool:
        vi, fi = self.imp(victim), self.imp(for_uid)
        return vi > fi or (vi == fi and self.ran.get(victim, float("-inf")) > self.ran.get(for_uid, float("-inf")))

    def apply(self, actions) -> None:
        reexamines = self.reexamines or self.step_kind in ("cancel", "unloaded", "death", "thermal", "policy")
        self.reexamines = False
        for x in actions:
            if isinstance(x, Log):
                assert x.level in "VDIWE" and x.message
                continue
            if self.step_kind == "work":
                assert isinstance(x, RequestUnload) and x.reason == TURN, f"{x}: rule 7 asks for unloads, and nothing else"
            if isinstance(x, (RequestComplete, Revoke)):
                reexamines = True  # a request ends: its budget frees
            key = (x.uid, x.request_id)
            assert key in self.live, f"{x} for a request that is not live"
            t = self.live[key]
            if isinstance(x, CanLoad):
                assert t.status in ("new", "np", "wfu"), f"{x} for a request already {t.status}"
                assert t.status == "new" or reexamines, f"{x}: a waiting request moved at a {self.step_kind} step (rule 6)"
                assert t.told != x.status, f"{x} told twice in a row"
                if t.status == "wfu" and x.status == NOT_PRIORITIZED:
                    # A reservation is kept until granted (rule 1): only a new policy
                    # or the heat may take it back.
                    assert self.step_kind == "policy" or not thermal_allows(
                        self.thermal, self.imp(x.uid), t.priority
                    ), f"{x}: a WAIT_FOR_UNLOAD reservation was lost"
                t.told = x.status
                t.status = {NOW: "approved", WAIT: "wfu", NOT_PRIORITIZED: "np"}[x.status]
            elif isinstance(x, RequestUnload):
                assert t.status == "loaded", f"{x} for a request {t.status}"
                assert x.deadline == self.now + TIMEOUT
                if x.reason == PRESSURE:
                    assert x.for_uid is not None and self.displaced_fairly(x.uid, x.for_uid), x
                elif x.reason == THERMAL:
                    assert not thermal_allows(self.thermal, self.imp(x.uid), t.priority), x
                else:
                    assert x.reason == TURN and self.step_kind == "work" and x.uid == self.finisher, x
                t.status, t.deadline = "unloading", x.deadline
            elif isinstance(x, Revoke):
                assert t.status == "unloading" and t.deadline is not None and t.deadline <= self.now, x
                t.status = "revoked"
            elif isinstance(x, RequestComplete):
                if x.for_uid is not None:
                    assert self.displaced_fairly(x.uid, x.for_uid), x
                if x.status == COMPLETE:
                    assert self.step_kind == "unloaded", x
                else:
                    assert x.status == CANCELLED
                if t.status == "revoked":
                    assert self.step_kind == "tick"
                inc = (x.uid, x.request_id, self.incarnation[key])
                assert inc not in self.ended_once, f"{x}: ended twice"
                self.ended_once.add(inc)
                del self.live[key]
            else:  # pragma: no cover
                raise AssertionError(f"unknown action {x!r}")
        for key, t in self.live.items():
            assert t.status not in ("new", "revoked"), f"{key} was never answered ({t.status})"

    def refused(self, exc, call) -> None:
        policy = self.a.policy  # compared by identity: a policy of one's own need not copy or compare
        before = copy.deepcopy({k: v for k, v in vars(self.a).items() if k not in ("_policy", "_policies")})
        try:
            call()
        except exc:
            pass
        else:  # pragma: no cover
            raise AssertionError(f"expected {exc.__name__}")
        after = {k: v for k, v in vars(self.a).items() if k not in ("_policy", "_policies")}
        assert self.a.policy is policy and after == before, "a refused call changed the state"

    # ------------------------------------------------------------ inputs

    @initialize(
        choice=st.one_of(POLICY_CHOICES.filter(lambda c: c[0] != 0), POLICY_CHOICES),
        importances=st.lists(st.sampled_from([100, 200, 400]), min_size=len(UIDS), max_size=len(UIDS)),
    )
    def start(self, choice, importances):
        # Most runs start under a budget: the status quo has nothing to decide.
        if self.plugin is None:
            self.set_policy(choice)
        self.may_exceed = False
        for uid, imp in zip(UIDS, importances):
            self.importance_changed(uid, imp)

    @rule(uid=st.sampled_from(UIDS), rid=IDS, size=st.sampled_from(NPU_MODEL_SIZES), priority=PRIORITIES)
    def request(self, uid, rid, size, priority):
        key = (uid, rid)
        if key in self.live:
            self.refused(IllegalArgumentException, lambda: self.a.request_can_load(uid, rid, size, priority, self.now))
            return
        self.step_kind = "request"
        self.live[key] = _Told(size, priority)
        self.incarnation[key] = self.incarnation.get(key, 0) + 1
        self.dead_quiet.discard(uid)
        self.apply(self.a.request_can_load(uid, rid, size, priority, self.now))

    @rule(uid=st.sampled_from(UIDS), rid=IDS, size=st.sampled_from(NPU_MODEL_SIZES), priority=PRIORITIES)
    def request_and_load(self, uid, rid, size, priority):
        # The common path, in one step, so runs reach loaded models (and victims) sooner.
        self.request(uid, rid, size, priority)
        t = self.live.get((uid, rid))
        if t is not None and t.status == "approved":
            self.loaded(uid, rid)

    @rule(uid=st.sampled_from(UIDS), rid=IDS, size=st.sampled_from(NPU_MODEL_SIZES), priority=PRIORITIES)
    def request_and_load_again(self, uid, rid, size, priority):
        self.request_and_load(uid, rid, size, priority)

    @rule(uid=st.sampled_from(UIDS), rid=IDS)
    def cancel(self, uid, rid):
        if (uid, rid) not in self.live:
            self.refused(IllegalStateException, lambda: self.a.cancel(uid, rid, self.now))
            return
        self.step_kind = "cancel"
        actions = self.a.cancel(uid, rid, self.now)
        assert [x for x in actions if isinstance(x, RequestComplete)][0] == RequestComplete(uid, rid, CANCELLED)
        self.apply(actions)

    @rule(uid=st.sampled_from(UIDS), rid=IDS)
    def loaded(self, uid, rid):
        t = self.live.get((uid, rid))
        if t is None or t.status != "approved":
            self.refused(IllegalStateException, lambda: self.a.notify_loaded(uid, rid, self.now))
            return
        self.step_kind = "loaded"
        t.status = "loaded"
        self.apply(self.a.notify_loaded(uid, rid, self.now))

    @rule(uid=st.sampled_from(UIDS), rid=IDS)
    def unloaded(self, uid, rid):
        t = self.live.get((uid, rid))
        if t is None or t.status not in ("approved", "loaded", "unloading"):
            self.refused(IllegalStateException, lambda: self.a.notify_unloaded(uid, rid, self.now))
            return
        self.step_kind = "unloaded"
        actions = self.a.notify_unloaded(uid, rid, self.now)
        assert [x for x in actions if isinstance(x, RequestComplete)][0] == RequestComplete(uid, rid, COMPLETE)
        self.apply(actions)

    @rule(uid=st.sampled_from(UIDS), importance=st.sampled_from(IMPORTANCES))
    def importance_changed(self, uid, importance):
        self.step_kind = "importance"
        self.reexamines = self.importance.get(uid) != importance
        self.importance[uid] = importance
        self.apply(self.a.importance_changed(uid, importance, self.now))

    @rule(uid=st.sampled_from(UIDS))
    def work_completed(self, uid):
        self.step_kind, self.finisher = "work", uid
        self.ran[uid] = self.now
        self.apply(self.a.work_completed(uid, self.now))

    # Twice as often: the finisher of a turn often has a request approved but not loaded yet.
    @rule(uid=st.sampled_from(UIDS))
    def work_completed_again(self, uid):
        self.work_completed(uid)

    @rule(uid=st.sampled_from(UIDS))
    def app_died(self, uid):
        self.step_kind = "death"
        for key in [k for k in self.live if k[0] == uid]:
            del self.live[key]  # dropped silently: any callback for them now fails
        self.dead_quiet.add(uid)
        self.apply(self.a.app_died(uid, self.now))

    @rule(severity=SEVERITIES)
    def thermal_changed(self, severity):
        self.step_kind = "thermal"
        self.thermal = severity
        self.apply(self.a.thermal_changed(severity, self.now))

    @rule(dt=st.sampled_from([0.0, 0.25, 1.0, 1.99, 2.0, 3.0]))
    def tick(self, dt):
        self.step_kind = "tick"
        self.now += dt
        due = {k for k, t in self.live.items() if t.status == "unloading" and t.deadline <= self.now}
        actions = self.a.tick(self.now)
        revoked = {(x.uid, x.request_id) for x in actions if isinstance(x, Revoke)}
        assert revoked == due
        self.apply(actions)

    @rule(choice=POLICY_CHOICES)
    def set_policy(self, choice):
        policy, params = choice
        if self.plugin is not None:
            # A policy of one's own is set again (setPolicy over live requests, rule 9), if it has an id.
            if type(self.plugin).policy_id is None:
                return
            policy, params = type(self.plugin).policy_id, self.plugin.params()
        self.step_kind = "policy"
        actions = self.a.set_policy(policy, params, self.now)
        if self.plugin is not None:
            self.may_exceed = True
            self.prev = (float("inf"), float("inf"))
            self.apply(actions)
            return
        if policy == 0:
            self.limit, self.weights, self.takes_turns = None, (1, 2, 4), False
        elif policy == 1:
            self.limit, self.weights, self.takes_turns = 1, (1, 1, 1), True
        else:
            self.limit = params.get("maxBudget", 4)
            self.weights = tuple(params.get("modelSizeWeights", (1, 2, 4)))
            self.takes_turns = True
        self.may_exceed = True
        self.prev = (float("inf"), float("inf"))
        self.apply(actions)

    @rule(data=st.data())
    def bad_call(self, data):
        bad_policy = data.draw(BAD_POLICIES) if self.plugin is None else (9, None)
        call = data.draw(
            st.sampled_from(
                [
                    lambda: self.a.set_policy(*bad_policy, self.now),
                    lambda: self.a.request_can_load(10001, 9, 7, 0, self.now),
                    lambda: self.a.request_can_load(10001, 9, 0, 5, self.now),
                    lambda: self.a.importance_changed(10001, 0, self.now),
                    lambda: self.a.thermal_changed(-1, self.now),
                    lambda: self.a.tick(float("nan")),
                ]
            )
        )
        self.refused(IllegalArgumentException, call)

    def teardown(self):
        # "Exactly once": cancel whatever is left; each must end now, and only once.
        while self.live:
            uid, rid = next(iter(self.live))
            self.step_kind = "cancel"
            self.apply(self.a.cancel(uid, rid, self.now))
        assert self.a.dump(self.now)["requests"] == []
        assert self.a.budget()["in_use"] == 0 and self.a.next_deadline() is None

    # ------------------------------------------------------------ invariants

    @invariant()
    def agrees_with_the_apps_view(self):
        theirs = {(r["uid"], r["id"]): r["state"] for r in self.a.dump(self.now)["requests"]}
        ours = {k: STATE_NAME[t.status] for k, t in self.live.items()}
        assert theirs == ours

    @invariant()
    def budget_holds(self):
        used, reserved, freeing = self.usage()
        b = self.a.budget()
        assert (b["in_use"], b["reserved"], b["being_freed"]) == (used, reserved, freeing)
        if self.limit is None:
            return
        over_use = used - self.limit
        over_all = used + reserved - (self.limit + freeing)
        if over_use <= 0 and over_all <= 0:
            self.may_exceed = False
        else:
            assert self.may_exceed, f"budget exceeded without a setPolicy: {b}"
            assert over_use <= max(self.prev[0], 0) and over_all <= max(self.prev[1], 0), "grew while over budget"
        self.prev = (over_use, over_all)

    @invariant()
    def nothing_survives_a_death(self):
        for r in self.a.dump(self.now)["requests"]:
            assert r["uid"] not in self.dead_quiet

    @invariant()
    def deadlines_are_announced(self):
        deadlines = [t.deadline for t in self.live.values() if t.status == "unloading"]
        assert self.a.next_deadline() == (min(deadlines) if deadlines else None)


def policy_machine(make_policy: Callable[[], NpuPolicy]) -> type[NpuArbiterMachine]:
    """The machine over the policy ``make_policy`` makes (a fresh one for each run)."""
    return type("PolicyMachine", (NpuArbiterMachine,), {"make_policy": staticmethod(make_policy)})


@dataclass(frozen=True)
class CheckResult:
    """What ``check_policy`` found: ``ok``, or the first failure (shrunk).

    ``invariant`` names the broken invariant (``_policy_api``'s names; ``exception``
    when the policy raised; ``model`` when the machine's own record disagreed),
    ``error`` says it with the event, ``steps`` is the shortest sequence of inputs
    that shows it, as hypothesis printed it.
    """

    ok: bool
    policy: str
    examples: int
    steps_per_example: int
    invariant: str | None = None
    error: str | None = None
    steps: str = ""


def check_policy(make_policy: Callable[[], NpuPolicy], *, examples: int = 200, steps: int = 40) -> CheckResult:
    """Run the machine ``examples`` times (``steps`` inputs each) over ``make_policy``'s policy.

    Deterministic (hypothesis derandomized: the same policy gets the same runs); writes
    no example database.
    """
    name = make_policy().name
    machine = policy_machine(make_policy)
    options: dict[str, Any] = {"max_examples": examples, "stateful_step_count": steps, "deadline": None,
                               "database": None, "print_blob": False,
                               "suppress_health_check": list(HealthCheck), "derandomize": True,
                               "report_multiple_bugs": False}
    try:
        run_state_machine_as_test(machine, settings=settings(**options))
    except PolicyError as exc:
        return CheckResult(False, name, examples, steps, exc.invariant or "exception", str(exc), _steps(exc))
    except (AssertionError, FlakyFailure) as exc:
        return CheckResult(False, name, examples, steps, "model", f"{type(exc).__name__}: {exc}", _steps(exc))
    return CheckResult(True, name, examples, steps)


_CHECKS = {name for name, value in vars(NpuArbiterMachine).items() if hasattr(value, "hypothesis_stateful_invariant")}


def _steps(exc: BaseException) -> str:
    """The inputs of the shrunk failing example (hypothesis's note on the exception), one a line."""
    notes = "\n".join(getattr(exc, "__notes__", []))
    steps = []
    for line in notes.splitlines():
        line = line.strip()
        if line.startswith("state.") and line.removeprefix("state.").split("(")[0] not in (*_CHECKS, "teardown"):
            steps.append(line.removeprefix("state."))
    return "\n".join(steps)
