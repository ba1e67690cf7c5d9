"""The built-in load policies of ``setPolicy``: status quo, budget, turn taking.

They implement the public policy interface (``_policy_api``: ``NpuPolicy``, its events,
actions and invariants) like any user's policy, through ``BudgetRules``: SPEC Part C's
budget rules 1-10 over three numbers each policy declares, so every built-in gets the
same reservations, victim walk, re-examination and deadlines:

- ``max_budget``: the budget, or None for "unbounded" (nothing is ever refused for size).
- ``weight(size)``: what a request of that size class costs.
- ``takes_turns``: whether completing work while an equal uid waits costs a uid its
  models (rule 7).

``policy_id`` is the ``NPU_MODEL_POLICY_*`` number ``setPolicy`` selects a policy by,
``from_params(params)`` builds it from a ``PersistableBundle``-like dict (or raises
IllegalArgumentException: the arbiter then keeps the old policy), ``params()`` reports
it for ``dumpsys`` and ``cmd npu info``. A policy engineer changes the numbers by
subclassing ``BudgetPolicy``, or writes new rules as an ``NpuPolicy`` of their own.

Bundle keys are AOSP's: ``maxBudget`` (int) and ``modelSizeWeights`` (three ints, for
LESS_THAN_1GB, BETWEEN_1GB_AND_2GB, GREATER_THAN_2G). A missing key takes its default;
an unknown key is refused rather than ignored, because a misspelt ``maxbudget``
silently meaning 4 is the bug a policy engineer would least like to chase.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from framework.binder import IllegalArgumentException
from framework.npumanager import (
        NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE,
    NPU_MODEL_UNLOAD_REASON_THERMAL,
    NPU_MODEL_UNLOAD_REASON_TURN_TAKING,
    DEFAULT_MAX_BUDGET,
    DEFAULT_MODEL_SIZE_WEIGHTS,
    KEY_MAX_BUDGET,
    KEY_MODEL_SIZE_WEIGHTS,
    NPU_MODEL_POLICY_BUDGET,
    NPU_MODEL_POLICY_STATUS_QUO,
    NPU_MODEL_POLICY_TURN_TAKING,
    NPU_MODEL_SIZES,
)

from ._policy_api import (
    NEVER,
    Event,
    ImportanceChanged,
    LoadRequest,
    NpuPolicy,
    PolicySet,
    RequestFiled,
    RequestState,
    ThermalChanged,
    WorkCompleted,
)
from ._thermal import severity_name, thermal_restricts

if TYPE_CHECKING:
    from ._arbiter import PolicyContext



def _bundle(params: Mapping[str, Any] | None, policy: str) -> Mapping[str, Any]:
    if params is None:  # Java callers pass a null bundle for "no parameters"
        return {}
    if not isinstance(params, Mapping):
        raise IllegalArgumentException(f"{policy} policy parameters must be a bundle (a dict), not {params!r}")
    for key in params:
        if not isinstance(key, str):
            raise IllegalArgumentException(f"{policy} policy parameter names must be strings, not {key!r}")
    return params


def _positive_int(value: Any, what: str) -> int:
    if type(value) is not int or value <= 0:
        raise IllegalArgumentException(f"{what} must be a positive int, not {value!r}")
    return value


class BudgetRules(NpuPolicy):
    """SPEC Part C's budget rules 1-10 under ``max_budget``, ``weight`` and ``takes_turns``.

    Stateless: everything it weighs is read from the context at each event, so a
    policy can be swapped by ``setPolicy`` over live requests (rule 9) and compared by
    value. The points the SPEC leaves open are ``_arbiter``'s docstring's.
    """

    __slots__ = ()
    takes_turns: ClassVar[bool] = False

    def on_event(self, ctx: PolicyContext, event: Event) -> None:
        if isinstance(event, RequestFiled):
            r = ctx.request(event.uid, event.request_id)
            assert r is not None
            if not ctx.thermal_allows(r):
                ctx.log("I", f"uid {r.uid} request {r.request_id}: held back at thermal {severity_name(ctx.thermal)}")
            elif self._blocked(ctx, r):
                pass  # waits behind a more important uid (rule 2)
            elif ctx.available(r) >= ctx.weight(r):
                ctx.grant(r)
            else:
                self._try_walk(ctx, r)
        elif isinstance(event, WorkCompleted) and self.takes_turns:
            self._take_turns(ctx, event.uid)
        if isinstance(event, WorkCompleted):
            return  # rule 7 alone says what a completion costs; it frees nothing (rule 6)
        self._enforce_thermal(ctx, event)
        if ctx.may_move:
            while self._reexamine_once(ctx):
                pass

    def _take_turns(self, ctx: PolicyContext, uid: int) -> None:
        """Rule 7: only the finisher's loaded models, and only when an equally important uid waits."""
        imp = ctx.importance(uid)
        if any(q.uid != uid and ctx.importance(q.uid) == imp and self._can_ever_run(ctx, q) for q in ctx.waiting_heads()):
            for r in ctx.requests_of(uid, RequestState.LOADED):
                ctx.ask_unload(r, NPU_MODEL_UNLOAD_REASON_TURN_TAKING)

    def _can_ever_run(self, ctx: PolicyContext, r: LoadRequest) -> bool:
        limit = self.max_budget
        return ctx.thermal_allows(r) and (limit is None or ctx.weight(r) <= limit)

    def _blocked(self, ctx: PolicyContext, r: LoadRequest) -> bool:
        """Rule 2: a more important uid has a request waiting that could be granted."""
        imp = ctx.importance(r.uid)
        return any(
            ctx.importance(q.uid) < imp and self._can_ever_run(ctx, q) for q in ctx.waiting_heads() if q is not r
        )

    def _victim_plan(self, ctx: PolicyContext, r: LoadRequest) -> list[LoadRequest] | None:
        """Rule 3's walk for ``r``: what to take, or None when not enough can be freed."""
        claims = ctx.claims()
        need = ctx.weight(r) - (ctx.available(r) + claims.get(r.key, 0))
        if need <= 0:
            return []
        imp = ctx.importance(r.uid)
        ran = ctx.last_completed(r.uid)
        ranks = {v: (ctx.importance(v), ctx.last_completed(v)) for v in ctx.uids() if v != r.uid}
        victims = [v for v, (vi, vran) in ranks.items() if vi > imp or (vi == imp and vran > ran)]
        # Least important first; among equals, the one that ran most recently first.
        victims.sort(key=lambda v: (-ranks[v][0], -ranks[v][1], v))
        plan: list[LoadRequest] = []
        for v in victims:
            takeable = ctx.requests_of(v, RequestState.APPROVED, RequestState.LOADED, RequestState.WAIT_FOR_UNLOAD)
            # OPPORTUNISTIC, then BACKGROUND, then NORMAL; newest first.
            takeable.sort(key=lambda q: (-q.priority, -q.seq))
            for q in takeable:
                gain = ctx.headroom(q, claims) if q.state is RequestState.WAIT_FOR_UNLOAD else ctx.weight(q)
                if gain <= 0:
                    continue  # cancelling it would free nothing now: leave it alone
                plan.append(q)
                need -= gain
                if need <= 0:
                    return plan
        return None

    def _try_walk(self, ctx: PolicyContext, r: LoadRequest) -> bool:
        """Run rule 3 for ``r`` and apply it (rules 4, 5); False, touching nobody, if it fails."""
        plan = self._victim_plan(ctx, r)
        if plan is None:
            return False
        for q in plan:
            if q.state is RequestState.LOADED:
                ctx.ask_unload(q, NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE, r)
            else:
                ctx.cancel(q, r)
        if ctx.available(r) >= ctx.weight(r):
            ctx.grant(r)
        else:
            ctx.reserve(r)
        return True

    def _enforce_thermal(self, ctx: PolicyContext, event: Event) -> None:
        """Take back what the heat forbids, at the events that can make something forbidden.

        Nothing is granted that the heat forbids, so a request held can become forbidden
        only when the heat, its uid's importance or the policy changes: only those events
        look, and an importance change only at its uid's requests.
        """
        if not thermal_restricts(ctx.thermal):
            return  # nothing to enforce: a walk over every request filed would cost each event that much
        if isinstance(event, (ThermalChanged, PolicySet)):
            uids = ctx.uids()
        elif isinstance(event, ImportanceChanged) and event.changed:
            uids = [event.uid]
        else:
            return
        held = (RequestState.APPROVED, RequestState.LOADED, RequestState.WAIT_FOR_UNLOAD)
        forbidden = [r for uid in uids for r in ctx.requests_of(uid, *held) if not ctx.thermal_allows(r)]
        forbidden.sort(key=lambda r: r.seq)
        for r in forbidden:
            if not ctx.live(r):
                continue
            if r.state is RequestState.LOADED:
                ctx.ask_unload(r, NPU_MODEL_UNLOAD_REASON_THERMAL)
            elif r.state is RequestState.APPROVED:
                ctx.cancel(r)
            elif r.state is RequestState.WAIT_FOR_UNLOAD:
                ctx.hold(r)

    def _reexamine_once(self, ctx: PolicyContext) -> bool:
        """One scan of the waiting requests (rule 6); True as soon as one changed anything.

        Waiting requests are looked at again only when the event could let one move
        (``ctx.may_move``): a request left (budget or a reservation freed, a rule-2
        block lifted), or an importance, the heat or the policy changed. The scan stops
        at the first change and the caller scans again, so every figure below is
        computed once per scan and stays true for the whole of it. It looks only at the
        heads of the waiting requests (``ctx.waiting_heads()``: a NOT_PRIORITIZED request
        behind an older one of its uid, size and priority meets the same answer) and at
        each uid's figures, so a scan costs the uids and their kinds of request, not the
        requests on file, which matters with 64 apps at their cap.
        """
        waiting = [q for q in ctx.waiting_heads() if ctx.thermal_allows(q)]
        if not waiting:
            return False
        uids = ctx.uids()
        imps = {uid: ctx.importance(uid) for uid in uids}
        limit = self.max_budget
        claims = ctx.claims()
        in_use = ctx.weight_in(RequestState.APPROVED, RequestState.LOADED, RequestState.UNLOADING)
        reserving = ctx.requests_in(RequestState.WAIT_FOR_UNLOAD)
        headroom = {q.key: ctx.headroom(q, claims) for q in reserving}
        reserved = sum(headroom.values())

        def available(r: LoadRequest) -> float:
            if limit is None:
                return math.inf
            return limit - in_use - reserved + headroom.get(r.key, 0)

        # Rule 2: nothing passes a waiting request of a more important uid (one that can run).
        block_above = min((imps[q.uid] for q in waiting if self._can_ever_run(ctx, q)), default=math.inf)
        # What each uid could give up, for a quick "the walk can not succeed".
        gains = {uid: ctx.weight_of(uid, RequestState.APPROVED, RequestState.LOADED) for uid in uids}
        for q in reserving:
            gains[q.uid] += headroom[q.key]
        hopeless: set[tuple[int, float]] = set()
        # Reserved requests first: what their victims free is theirs (rule 6's last line).
        waiting.sort(key=lambda q: (q.state is not RequestState.WAIT_FOR_UNLOAD, imps[q.uid], q.seq))
        for r in waiting:
            w = ctx.weight(r)
            if r.state is RequestState.WAIT_FOR_UNLOAD:
                if available(r) >= w:
                    ctx.grant(r)
                    return True
                if available(r) + claims.get(r.key, 0) < w:
                    # Its reservation no longer adds up (only a policy change does that):
                    # walk again, or fall back to waiting unreserved.
                    if not self._try_walk(ctx, r):
                        ctx.hold(r)
                    return True
                continue
            if imps[r.uid] > block_above:
                continue
            if available(r) >= w:
                ctx.grant(r)
                return True
            need = w - available(r)
            if (r.uid, need) in hopeless:
                continue
            imp, ran = imps[r.uid], ctx.last_completed(r.uid)
            could = sum(
                g
                for v, g in gains.items()
                if v != r.uid and (imps[v] > imp or (imps[v] == imp and ctx.last_completed(v) > ran))
            )
            if could >= need and self._try_walk(ctx, r):
                return True
            hopeless.add((r.uid, need))
        return False


class _Parameterless:
    """What a policy that takes no parameters shares: it reports none and refuses any."""

    __slots__ = ()
    name: ClassVar[str]

    def params(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> Any:
        what = cls.name.replace("-", " ")
        if _bundle(params, what):
            raise IllegalArgumentException(f"the {what} policy takes no parameters, got {sorted(params)}")
        return cls()


@dataclass(frozen=True, slots=True)
class StatusQuoPolicy(_Parameterless, BudgetRules):
    """AOSP's default: every request is CAN_LOAD_NOW at once; nothing is weighed.

    Weights are still reported (the budget's defaults) so ``dumpsys`` can show what
    the loaded models would cost under a budget, which is what someone about to switch
    policies wants to know.
    """

    policy_id: ClassVar[int] = NPU_MODEL_POLICY_STATUS_QUO
    name: ClassVar[str] = "status-quo"
    takes_turns: ClassVar[bool] = False

    @property
    def max_budget(self) -> None:
        return None

    def weight(self, size: int) -> int:
        return DEFAULT_MODEL_SIZE_WEIGHTS[size]


@dataclass(frozen=True, slots=True)
class BudgetPolicy(BudgetRules):
    """At most ``maxBudget`` of weight approved or loaded at once (rules 1-7)."""

    policy_id: ClassVar[int] = NPU_MODEL_POLICY_BUDGET
    name: ClassVar[str] = "budget"
    takes_turns: ClassVar[bool] = True

    budget: int = DEFAULT_MAX_BUDGET
    weights: tuple[int, int, int] = DEFAULT_MODEL_SIZE_WEIGHTS

    def __post_init__(self) -> None:
        _positive_int(self.budget, KEY_MAX_BUDGET)
        if len(self.weights) != len(NPU_MODEL_SIZES):
            raise IllegalArgumentException(f"{KEY_MODEL_SIZE_WEIGHTS} needs {len(NPU_MODEL_SIZES)} weights")
        for w in self.weights:
            _positive_int(w, f"each of {KEY_MODEL_SIZE_WEIGHTS}")

    @property
    def max_budget(self) -> int:
        return self.budget

    def weight(self, size: int) -> int:
        return self.weights[size]

    def params(self) -> dict[str, Any]:
        return {KEY_MAX_BUDGET: self.budget, KEY_MODEL_SIZE_WEIGHTS: list(self.weights)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> BudgetPolicy:
        bundle = _bundle(params, "budget")
        unknown = sorted(set(bundle) - {KEY_MAX_BUDGET, KEY_MODEL_SIZE_WEIGHTS})
        if unknown:
            raise IllegalArgumentException(
                f"unknown budget policy parameter(s) {unknown}; known: {KEY_MAX_BUDGET}, {KEY_MODEL_SIZE_WEIGHTS}"
            )
        budget = _positive_int(bundle.get(KEY_MAX_BUDGET, DEFAULT_MAX_BUDGET), KEY_MAX_BUDGET)
        raw = bundle.get(KEY_MODEL_SIZE_WEIGHTS, DEFAULT_MODEL_SIZE_WEIGHTS)
        if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)) or len(raw) != len(NPU_MODEL_SIZES):
            raise IllegalArgumentException(
                f"{KEY_MODEL_SIZE_WEIGHTS} must be {len(NPU_MODEL_SIZES)} ints "
                f"(<1GB, 1-2GB, >2GB), not {raw!r}"
            )
        weights = tuple(_positive_int(w, f"each of {KEY_MODEL_SIZE_WEIGHTS}") for w in raw)
        return cls(budget, weights)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class TurnTakingPolicy(_Parameterless, BudgetPolicy):
    """The budget policy with every weight 1 and a maximum of 1: one model at a time.

    Apps of equal importance alternate: the one that completed work most recently
    yields (rule 7). It takes no parameters; a non-empty bundle is refused.
    """

    policy_id: ClassVar[int] = NPU_MODEL_POLICY_TURN_TAKING
    name: ClassVar[str] = "turn-taking"
    takes_turns: ClassVar[bool] = True

    budget: int = 1
    weights: tuple[int, int, int] = (1, 1, 1)


DEFAULT_POLICIES: Mapping[int, type[NpuPolicy]] = MappingProxyType(
    {cls.policy_id: cls for cls in (StatusQuoPolicy, TurnTakingPolicy, BudgetPolicy)}
)
"""The policies ``setPolicy`` knows by default, by id (read-only; pass your own to the arbiter)."""
