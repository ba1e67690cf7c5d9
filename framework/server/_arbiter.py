"""The ``npu`` service's decision core: who may load a model, who must give one up.

``NpuArbiter`` is the state of system_server's ``npu`` service with no I/O at all. Every
input the service receives (a binder call from an app, a work event from the HAL, an
importance change from the activity manager, a thermal change, a timer) is one method
taking ``now`` (seconds on whatever clock the service uses) and returning the list of
``Action``s (``_actions``) the service must carry out, in order. A bad call raises the
matching binder exception (``framework.binder._status``) and leaves the state exactly as
it was, so the service can let the exception travel back to the caller as a status.

A request's life (``state`` in ``dump()``)::

    new --> not_prioritized <--> wait_for_unload          (waiting)
      \\          |                    |
       +-------> approved ---> loaded ---> unloading      (holding budget)
                    |             |            |
                    +-------------+------------+--> ended (COMPLETE / CANCELLED), or
                                                    dropped silently when the app dies

*approved*: CAN_LOAD_NOW was sent. *loaded*: the app called notifyModelLoaded.
*unloading*: a loaded model the app was asked to unload; it still holds its weight
until notifyModelUnloaded, a cancel, the app's death, or the unload deadline (then its
models are revoked through the HAL and the request ends CANCELLED: the app did not
finish its side, and CANCELLED is the status an app already handles for "the system
took this away"). *waiting*: NOT_PRIORITIZED holds and reserves nothing;
WAIT_FOR_UNLOAD reserves its weight.

The rules are SPEC Part C's budget rules 1-10, applied to whatever ``_policies`` policy
is set (the status quo policy has no maximum, so it never has to choose). Points the
SPEC leaves open, decided here:

- Among victim uids of equal importance, the one that completed work most recently is
  taken first: the same reading as rule 3's "the one that ran least recently keeps its
  models".
- A model asked to unload counts as freed only for the request whose walk asked for it;
  if that request ends or is granted first, the model counts for nobody, and the weight
  it frees goes back to the pool (re-examination, rule 6). Unloads asked for heat or
  turn taking count for nobody either.
- A request waits behind (rule 2) a more important uid's waiting request only if that
  one can ever be granted: one heavier than ``maxBudget``, or held back by heat, blocks
  nobody. A WAIT_FOR_UNLOAD request is granted as soon as its reservation is complete,
  whatever waits above it: rule 1 keeps that budget for it, and a more important
  requester can always cancel it (rule 4).
- setPolicy re-examines every waiting request under the new numbers. A WAIT_FOR_UNLOAD
  request keeps its reservation while it still adds up (what is free for it plus what
  its victims are freeing covers its new weight); one that no longer does walks again,
  and if nothing more can be freed it gives the reservation up and is told
  NOT_PRIORITIZED (its victims keep unloading; what they free goes back to the pool).
  So running the same ``cmd npu set-budget-policy`` twice changes nothing.
- Rule 6's "whenever budget frees" is read as: whenever a request leaves (ended,
  revoked, dropped at a death: what it held or reserved frees, and nobody waits behind
  it any more); besides that, an importance, the heat or the policy changing. No other
  input moves a waiting request. A COMPLETED work event does only what rule 7 says (the
  finisher's loaded models are asked to unload): it makes the finisher a victim for its
  equals (rule 3), but their walk runs when budget next frees, not at the completion.
- An app's death ends its requests with no callback (the app is gone) and frees their
  budget at once; the HAL frees the dead client's models through its own death notice.
- AOSP quirks not reproduced: a refused request holds no budget, and no callback is
  ever sent twice.

Wiring it (the thin layer this module leaves to the service)::

    uid = get_calling_uid()                      # from the binder, never from the request
    actions = arbiter.request_can_load(uid, req.id, req.size, req.priority, trio.current_time())
    await carry_out(actions)   # CanLoad -> onCanLoadModel, RequestUnload -> onRequestUnloadModel,
                               # RequestComplete -> onModelLoadRequestComplete, Revoke -> the HAL

and one timer task that sleeps until ``next_deadline()`` (re-reading it after every
input) and carries out ``tick(now)``. Callbacks to one app should go out in the order
given: a request's WAIT_FOR_UNLOAD always precedes its CAN_LOAD_NOW.
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from framework.binder import IllegalArgumentException, IllegalStateException
from framework.npumanager import (
    NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED,
    NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE,
    NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW,
    NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED,
    NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD,
    NPU_MODEL_PRIORITIES,
    NPU_MODEL_SIZES,
    NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE,
    NPU_MODEL_UNLOAD_REASON_THERMAL,
    NPU_MODEL_UNLOAD_REASON_TURN_TAKING,
)

from ._actions import Action, CanLoad, Log, RequestComplete, RequestUnload, Revoke
from ._policies import DEFAULT_POLICIES, NpuPolicy, StatusQuoPolicy
from ._priority import check_importance, check_uid, effective_importance
from ._thermal import THERMAL_STATUS_NONE, check_severity, severity_name, thermal_allows

DEFAULT_UNLOAD_TIMEOUT_S = 2.0
ENDED_MEMORY = 4096
"""How many ended requests are remembered, so a late notify says "ended" rather than "unknown"."""

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_NEVER = -math.inf


class RequestState(enum.Enum):
    """Where a live request stands (the module docstring's diagram); ``value`` is dumpsys's word."""

    NOT_PRIORITIZED = "not_prioritized"
    WAIT_FOR_UNLOAD = "wait_for_unload"
    APPROVED = "approved"
    LOADED = "loaded"
    UNLOADING = "unloading"


_WAITING = (RequestState.NOT_PRIORITIZED, RequestState.WAIT_FOR_UNLOAD)
_HOLDING = (RequestState.APPROVED, RequestState.LOADED, RequestState.UNLOADING)
_WAIT_STATUS = {
    RequestState.NOT_PRIORITIZED: NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED,
    RequestState.WAIT_FOR_UNLOAD: NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD,
}

Key = tuple[int, int]  # (uid, request_id): ids are the app's own, so only the pair is unique


@dataclass(slots=True)
class _Request:
    uid: int
    request_id: int
    size: int
    priority: int
    seq: int  # arrival order: "oldest" and "newest" in the rules
    created: float
    state: RequestState = RequestState.NOT_PRIORITIZED
    told: int | None = None  # the last status sent through onCanLoadModel
    claimant: Key | None = None  # unloading: the WAIT_FOR_UNLOAD request this unload is for
    unload_deadline: float | None = None
    unload_reason: int | None = None

    @property
    def key(self) -> Key:
        return (self.uid, self.request_id)


def _check_request_id(request_id: object) -> int:
    if type(request_id) is not int or not _INT32_MIN <= request_id <= _INT32_MAX:
        raise IllegalArgumentException(f"request id must be a 32-bit int, not {request_id!r}")
    return request_id


def _check_unload_timeout(seconds: object) -> float:
    if type(seconds) not in (int, float) or not (0 < seconds < math.inf):
        raise IllegalArgumentException(f"unload_timeout must be a positive number of seconds, not {seconds!r}")
    return float(seconds)


def _check_now(now: object) -> float:
    if type(now) not in (int, float) or not math.isfinite(now):
        raise IllegalArgumentException(f"now must be a finite number of seconds, not {now!r}")
    return float(now)


class NpuArbiter:
    """The ``npu`` service's state and rules; every input returns the actions to take.

    ``unload_timeout`` is how long an app asked to unload has before its models are
    revoked (2 s by default). ``policies`` maps ``NPU_MODEL_POLICY_*`` ids to policy
    classes (``_policies.DEFAULT_POLICIES`` by default); an engineer adding a policy
    passes a mapping with one more entry.
    """

    def __init__(
        self,
        *,
        unload_timeout: float = DEFAULT_UNLOAD_TIMEOUT_S,
        policies: Mapping[int, type[NpuPolicy]] = DEFAULT_POLICIES,
        policy: NpuPolicy | None = None,
    ) -> None:
        self._unload_timeout = _check_unload_timeout(unload_timeout)
        self._policies = dict(policies)
        self._policy: NpuPolicy = policy if policy is not None else StatusQuoPolicy()
        self._requests: dict[Key, _Request] = {}
        self._ended: OrderedDict[Key, int | None] = OrderedDict()  # status, None if dropped at death
        self._importance: dict[int, int] = {}
        self._last_completed: dict[int, float] = {}
        self._thermal = THERMAL_STATUS_NONE
        self._seq = 0
        self._recheck = False  # rule 6's trigger: set by what can let a waiting request move
        self._counters = {
            "requests": 0,
            "can_load_now": 0,
            "wait_for_unload": 0,
            "not_prioritized": 0,
            "unload_requests": 0,
            "cancelled": 0,
            "completed": 0,
            "revoked": 0,
            "dropped_at_death": 0,
            "policy_changes": 0,
        }

    # ------------------------------------------------------------------ inputs

    def request_can_load(self, uid: int, request_id: int, size: int, priority: int, now: float) -> list[Action]:
        """``requestCanLoadModel``: file a request and answer it (rules 2, 3, 5, 6)."""
        check_uid(uid)
        _check_request_id(request_id)
        now = _check_now(now)
        if type(size) is not int or size not in NPU_MODEL_SIZES:
            raise IllegalArgumentException(f"size must be one of NPU_MODEL_SIZE_* {NPU_MODEL_SIZES}, not {size!r}")
        if type(priority) is not int or priority not in NPU_MODEL_PRIORITIES:
            raise IllegalArgumentException(
                f"priority must be one of NPU_MODEL_PRIORITY_* {NPU_MODEL_PRIORITIES}, not {priority!r}"
            )
        key = (uid, request_id)
        if key in self._requests:
            raise IllegalArgumentException(f"uid {uid} already has a live request with id {request_id}")
        self._ended.pop(key, None)  # an ended id may be used again
        self._seq += 1
        r = _Request(uid, request_id, size, priority, self._seq, now)
        self._requests[key] = r
        self._counters["requests"] += 1
        actions: list[Action] = []
        if not self._thermal_ok(r):
            actions.append(Log("I", f"uid {uid} request {request_id}: held back at thermal {self._thermal_name()}"))
        elif self._blocked(r):
            pass  # waits behind a more important uid (rule 2)
        elif self._fits(r):
            self._grant(r, actions)
        else:
            self._try_walk(r, now, actions)
        self._settle(now, actions)
        return actions

    def cancel(self, uid: int, request_id: int, now: float) -> list[Action]:
        """``cancelModelLoad``: end the request with CANCELLED, in any state (rule 8)."""
        r = self._live(uid, request_id, "cancelModelLoad")
        now = _check_now(now)
        actions: list[Action] = []
        self._end(r, NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED, actions)
        self._settle(now, actions)
        return actions

    def notify_loaded(self, uid: int, request_id: int, now: float) -> list[Action]:
        """``notifyModelLoaded``: an approved request's model is in driver memory."""
        r = self._approved(uid, request_id, "notifyModelLoaded")
        now = _check_now(now)
        if r.state is not RequestState.APPROVED:
            raise IllegalStateException(f"notifyModelLoaded twice for uid {uid} request {request_id}")
        r.state = RequestState.LOADED
        actions: list[Action] = []
        self._settle(now, actions)
        return actions

    def notify_unloaded(self, uid: int, request_id: int, now: float) -> list[Action]:
        """``notifyModelUnloaded``: the app released the model; the request is COMPLETE."""
        r = self._approved(uid, request_id, "notifyModelUnloaded")
        now = _check_now(now)
        actions: list[Action] = []
        self._end(r, NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE, actions)
        self._settle(now, actions)
        return actions

    def work_completed(self, uid: int, now: float) -> list[Action]:
        """A COMPLETED work event for ``uid`` (the work's originalUid): turns (rule 7).

        Only the finisher's loaded models are asked to unload, and only when an equally
        important uid waits; nothing else moves (it frees no budget: rule 6).
        """
        check_uid(uid)
        now = _check_now(now)
        self._last_completed[uid] = now
        actions: list[Action] = []
        if self._policy.takes_turns:
            imp = self._imp(uid)
            waiting_equal = any(
                q.uid != uid and self._imp(q.uid) == imp and self._can_ever_run(q) for q in self._waiting()
            )
            if waiting_equal:
                for r in self._sorted(q for q in self._requests.values() if q.uid == uid):
                    if r.state is RequestState.LOADED:
                        self._ask_unload(r, now, NPU_MODEL_UNLOAD_REASON_TURN_TAKING, None, actions)
        self._settle(now, actions)
        return actions

    def importance_changed(self, uid: int, importance: int, now: float) -> list[Action]:
        """The activity manager moved ``uid`` to ``importance``; re-examine (rule 6)."""
        check_uid(uid)
        check_importance(importance)
        now = _check_now(now)
        if self._importance.get(uid) != importance:
            self._importance[uid] = importance
            self._recheck = True
        actions: list[Action] = []
        self._settle(now, actions)
        return actions

    def app_died(self, uid: int, now: float) -> list[Action]:
        """The app's process died: drop its requests silently and re-run rule 6."""
        check_uid(uid)
        now = _check_now(now)
        actions: list[Action] = []
        dead = self._sorted(q for q in self._requests.values() if q.uid == uid)
        for r in dead:
            self._release(r)
            self._remember_end(r.key, None)
            self._counters["dropped_at_death"] += 1
        if dead:
            actions.append(Log("I", f"uid {uid} died: dropped {len(dead)} request(s)"))
        self._settle(now, actions)
        return actions

    def thermal_changed(self, severity: int, now: float) -> list[Action]:
        """The thermal severity changed (``_thermal``'s rule)."""
        check_severity(severity)
        now = _check_now(now)
        actions: list[Action] = []
        if severity != self._thermal:
            actions.append(
                Log("I", f"thermal {self._thermal_name()} -> {severity_name(severity)}")
            )
            self._recheck = True
        self._thermal = severity
        self._settle(now, actions)
        return actions

    def set_policy(self, policy: int, params: Mapping[str, Any] | None, now: float) -> list[Action]:
        """``setPolicy(policy, bundle)``: replace the policy, keep the requests (rule 9)."""
        now = _check_now(now)
        cls = self._policies.get(policy) if type(policy) is int else None
        if cls is None:
            raise IllegalArgumentException(f"unknown policy {policy!r}; known: {sorted(self._policies)}")
        new = cls.from_params(params)  # raises before anything changed
        old = self._policy
        self._policy = new
        self._recheck = True
        self._counters["policy_changes"] += 1
        actions: list[Action] = [Log("I", f"policy {old.name} {old.params()} -> {new.name} {new.params()}")]
        self._settle(now, actions)
        return actions

    def set_unload_timeout(self, seconds: float, now: float) -> list[Action]:
        """``cmd npu set-unload-deadline``: the unload deadline of unload requests asked from now on.

        A model already asked to unload keeps the deadline it was given (its app was
        told it, in effect, with the request); nothing else changes.
        """
        seconds = _check_unload_timeout(seconds)
        _check_now(now)
        old, self._unload_timeout = self._unload_timeout, seconds
        return [Log("I", f"unload deadline {old:g} s -> {seconds:g} s")]

    def tick(self, now: float) -> list[Action]:
        """Time passed: revoke the models of apps past their unload deadline (rule 5)."""
        now = _check_now(now)
        actions: list[Action] = []
        late = self._sorted(
            q
            for q in self._requests.values()
            if q.state is RequestState.UNLOADING and q.unload_deadline is not None and q.unload_deadline <= now
        )
        for r in late:
            actions.append(
                Log("W", f"uid {r.uid} request {r.request_id} did not unload within {self._unload_timeout:g} s: revoking")
            )
            actions.append(Revoke(r.uid, r.request_id))
            self._counters["revoked"] += 1
            self._end(r, NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED, actions)
        self._settle(now, actions)
        return actions

    def next_deadline(self) -> float | None:
        """When ``tick`` next has something to do (an unload deadline), or None."""
        deadlines = [q.unload_deadline for q in self._requests.values() if q.unload_deadline is not None]
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------ queries

    @property
    def policy(self) -> NpuPolicy:
        return self._policy

    @property
    def thermal_severity(self) -> int:
        return self._thermal

    @property
    def unload_timeout(self) -> float:
        return self._unload_timeout

    def request_ids(self, uid: int) -> list[int]:
        """The ids of ``uid``'s live requests (any state), oldest first."""
        check_uid(uid)
        return [r.request_id for r in self._sorted(q for q in self._requests.values() if q.uid == uid)]

    def importance_of(self, uid: int) -> int:
        """The importance ``uid`` is ranked by (system/root 100, unknown 1000)."""
        return self._imp(check_uid(uid))

    def budget(self) -> dict[str, int | None]:
        """``max``, ``in_use``, ``reserved``, ``being_freed`` and ``free`` right now."""
        limit = self._policy.max_budget
        in_use = self._in_use()
        reserved = sum(self._w(q) for q in self._requests.values() if q.state is RequestState.WAIT_FOR_UNLOAD)
        being_freed = sum(self._w(q) for q in self._requests.values() if q.state is RequestState.UNLOADING)
        free = None if limit is None else max(0, self._available(None))
        return {"max": limit, "in_use": in_use, "reserved": reserved, "being_freed": being_freed, "free": free}

    def dump(self, now: float) -> dict[str, Any]:
        """Plain data for ``dumpsys npu``: policy, budget, thermal, requests, counters."""
        now = _check_now(now)
        requests = []
        for r in self._sorted(self._requests.values()):
            requests.append(
                {
                    "uid": r.uid,
                    "id": r.request_id,
                    "size": r.size,
                    "priority": r.priority,
                    "weight": self._w(r),
                    "state": r.state.value,
                    "age_s": now - r.created,
                    "importance": self._imp(r.uid),
                    "unload_deadline_in_s": None if r.unload_deadline is None else r.unload_deadline - now,
                    "unload_for": None if r.claimant is None else list(r.claimant),
                    "unload_reason": r.unload_reason,
                }
            )
        return {
            "policy": {"id": self._policy.policy_id, "name": self._policy.name, "params": self._policy.params()},
            "budget": self.budget(),
            "thermal": {"severity": self._thermal, "name": self._thermal_name()},
            "unload_timeout_s": self._unload_timeout,
            "importance": dict(sorted(self._importance.items())),
            "requests": requests,
            "counters": dict(self._counters),
        }

    # ------------------------------------------------------------------ accounting

    def _imp(self, uid: int) -> int:
        return effective_importance(uid, self._importance.get(uid))

    def _w(self, r: _Request) -> int:
        return self._policy.weight(r.size)

    def _in_use(self) -> int:
        return sum(self._w(q) for q in self._requests.values() if q.state in _HOLDING)

    def _claimed(self, key: Key) -> int:
        return sum(self._w(q) for q in self._requests.values() if q.claimant == key)

    def _claims(self) -> dict[Key, int]:
        """Weight being unloaded for each WAIT_FOR_UNLOAD request, in one pass."""
        claims: dict[Key, int] = {}
        for q in self._requests.values():
            if q.claimant is not None:
                claims[q.claimant] = claims.get(q.claimant, 0) + self._w(q)
        return claims

    def _headroom(self, r: _Request, claims: dict[Key, int] | None = None) -> int:
        """The part of a WAIT_FOR_UNLOAD request's reservation not covered by its victims."""
        claimed = self._claimed(r.key) if claims is None else claims.get(r.key, 0)
        return max(0, self._w(r) - claimed)

    def _available(self, key: Key | None) -> float:
        """Budget free now for request ``key``: the pool plus its own reservation (rule 1)."""
        limit = self._policy.max_budget
        if limit is None:
            return math.inf
        claims = self._claims()
        taken = 0
        for q in self._requests.values():
            if q.state in _HOLDING:
                taken += self._w(q)
            elif q.state is RequestState.WAIT_FOR_UNLOAD and q.key != key:
                taken += self._headroom(q, claims)
        return limit - taken

    def _fits(self, r: _Request) -> bool:
        return self._available(r.key) >= self._w(r)

    def _can_ever_run(self, r: _Request) -> bool:
        limit = self._policy.max_budget
        return self._thermal_ok(r) and (limit is None or self._w(r) <= limit)

    def _thermal_ok(self, r: _Request) -> bool:
        return thermal_allows(self._thermal, self._imp(r.uid), r.priority)

    def _thermal_name(self) -> str:
        return severity_name(self._thermal)

    def _blocked(self, r: _Request) -> bool:
        """Rule 2: a more important uid has a request waiting that could be granted."""
        imp = self._imp(r.uid)
        return any(self._imp(q.uid) < imp and self._can_ever_run(q) for q in self._waiting() if q is not r)

    def _waiting(self) -> list[_Request]:
        """Waiting requests in re-examination order: most important uid, then oldest."""
        return sorted(
            (q for q in self._requests.values() if q.state in _WAITING),
            key=lambda q: (self._imp(q.uid), q.seq),
        )

    @staticmethod
    def _sorted(requests: Iterable[_Request]) -> list[_Request]:
        return sorted(requests, key=lambda q: q.seq)

    # ------------------------------------------------------------------ transitions

    def _live(self, uid: int, request_id: int, call: str) -> _Request:
        check_uid(uid)
        _check_request_id(request_id)
        r = self._requests.get((uid, request_id))
        if r is not None:
            return r
        if (uid, request_id) in self._ended:
            raise IllegalStateException(f"{call} for uid {uid} request {request_id}, which has already ended")
        raise IllegalStateException(f"{call} for uid {uid} request {request_id}, which was never requested")

    def _approved(self, uid: int, request_id: int, call: str) -> _Request:
        """``_live``, for the calls only an approved request may make (notifyModelLoaded/Unloaded)."""
        r = self._live(uid, request_id, call)
        if r.state in _WAITING:
            raise IllegalStateException(
                f"{call} for uid {uid} request {request_id}, which was never approved ({r.state.value})"
            )
        return r

    def _grant(self, r: _Request, actions: list[Action]) -> None:
        self._release_claims(r)
        r.state = RequestState.APPROVED
        r.told = NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW
        self._counters["can_load_now"] += 1
        actions.append(CanLoad(r.uid, r.request_id, NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW))

    def _release_claims(self, r: _Request) -> None:
        for q in self._requests.values():
            if q.claimant == r.key:
                q.claimant = None

    def _release(self, r: _Request) -> None:
        self._release_claims(r)
        del self._requests[r.key]
        # What it held or reserved is free; if it was waiting, nobody waits behind it.
        self._recheck = True

    def _remember_end(self, key: Key, status: int | None) -> None:
        self._ended[key] = status
        self._ended.move_to_end(key)
        while len(self._ended) > ENDED_MEMORY:
            self._ended.popitem(last=False)

    def _end(self, r: _Request, status: int, actions: list[Action], for_uid: int | None = None) -> None:
        """The request's one and only end (rule 8)."""
        self._release(r)
        self._remember_end(r.key, status)
        self._counters["completed" if status == NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE else "cancelled"] += 1
        actions.append(RequestComplete(r.uid, r.request_id, status, for_uid))

    def _ask_unload(
        self, r: _Request, now: float, reason: int, claimant: _Request | None, actions: list[Action]
    ) -> None:
        assert r.state is RequestState.LOADED
        r.state = RequestState.UNLOADING
        r.claimant = None if claimant is None else claimant.key
        r.unload_deadline = now + self._unload_timeout
        r.unload_reason = reason
        self._counters["unload_requests"] += 1
        actions.append(
            RequestUnload(r.uid, r.request_id, reason, r.unload_deadline, None if claimant is None else claimant.uid)
        )

    def _victim_plan(self, r: _Request) -> list[_Request] | None:
        """Rule 3's walk for ``r``: what to take, or None when not enough can be freed."""
        need = self._w(r) - (self._available(r.key) + self._claimed(r.key))
        if need <= 0:
            return []
        imp = self._imp(r.uid)
        ran = self._last_completed.get(r.uid, _NEVER)
        uids = {q.uid for q in self._requests.values() if q.uid != r.uid}
        victims = [
            v
            for v in uids
            if self._imp(v) > imp or (self._imp(v) == imp and self._last_completed.get(v, _NEVER) > ran)
        ]
        # Least important first; among equals, the one that ran most recently first.
        victims.sort(key=lambda v: (-self._imp(v), -self._last_completed.get(v, _NEVER), v))
        claims = self._claims()
        plan: list[_Request] = []
        for v in victims:
            takeable = [
                q
                for q in self._requests.values()
                if q.uid == v and q.state in (RequestState.APPROVED, RequestState.LOADED, RequestState.WAIT_FOR_UNLOAD)
            ]
            # OPPORTUNISTIC, then BACKGROUND, then NORMAL; newest first.
            takeable.sort(key=lambda q: (-q.priority, -q.seq))
            for q in takeable:
                gain = self._headroom(q, claims) if q.state is RequestState.WAIT_FOR_UNLOAD else self._w(q)
                if gain <= 0:
                    continue  # cancelling it would free nothing now: leave it alone
                plan.append(q)
                need -= gain
                if need <= 0:
                    return plan
        return None

    def _try_walk(self, r: _Request, now: float, actions: list[Action]) -> bool:
        """Run rule 3 for ``r`` and apply it (rules 4, 5); False, touching nobody, if it fails."""
        plan = self._victim_plan(r)
        if plan is None:
            return False
        for q in plan:
            if q.state is RequestState.LOADED:
                self._ask_unload(q, now, NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE, r, actions)
            else:
                self._end(q, NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED, actions, for_uid=r.uid)
        if self._fits(r):
            self._grant(r, actions)
        else:
            r.state = RequestState.WAIT_FOR_UNLOAD
        return True

    def _enforce_thermal(self, now: float, actions: list[Action]) -> None:
        for r in self._sorted(self._requests.values()):
            if self._requests.get(r.key) is not r or self._thermal_ok(r):
                continue
            if r.state is RequestState.LOADED:
                self._ask_unload(r, now, NPU_MODEL_UNLOAD_REASON_THERMAL, None, actions)
            elif r.state is RequestState.APPROVED:
                self._end(r, NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED, actions)
            elif r.state is RequestState.WAIT_FOR_UNLOAD:
                self._release_claims(r)
                r.state = RequestState.NOT_PRIORITIZED

    def _settle(self, now: float, actions: list[Action]) -> None:
        """After every input: heat first, then rule 6's re-examination, then tell changes.

        Waiting requests are looked at again only when the input could let one move
        (``_recheck``): a request left (budget or a reservation freed, a rule-2 block
        lifted), or an importance, the heat or the policy changed. Other inputs leave
        them as they are, even where a walk would now succeed: a COMPLETED work event
        makes its uid a victim for its equals (rule 3), and rule 7 alone says what that
        event costs the finisher; the walk waits until budget next frees.
        """
        self._enforce_thermal(now, actions)
        if self._recheck:
            while self._reexamine_once(now, actions):
                pass
            self._recheck = False
        for r in self._sorted(self._requests.values()):
            status = _WAIT_STATUS.get(r.state)
            if status is not None and r.told != status:
                r.told = status
                self._counters["wait_for_unload" if status == NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD else "not_prioritized"] += 1
                actions.append(CanLoad(r.uid, r.request_id, status))

    def _reexamine_once(self, now: float, actions: list[Action]) -> bool:
        """One scan of the waiting requests (rule 6); True as soon as one changed anything.

        The scan stops at the first change and the caller scans again, so every figure
        below is computed once per scan and stays true for the whole of it: that keeps
        a settle linear in the number of requests for the common case (a few grants)
        rather than cubic, which matters with 64 apps cycling.
        """
        waiting = [q for q in self._requests.values() if q.state in _WAITING and self._thermal_ok(q)]
        if not waiting:
            return False
        imps = {q.uid: self._imp(q.uid) for q in self._requests.values()}
        limit = self._policy.max_budget
        claims = self._claims()
        in_use = self._in_use()
        headroom = {
            q.key: self._headroom(q, claims) for q in self._requests.values() if q.state is RequestState.WAIT_FOR_UNLOAD
        }
        reserved = sum(headroom.values())

        def available(r: _Request) -> float:
            if limit is None:
                return math.inf
            return limit - in_use - reserved + headroom.get(r.key, 0)

        # Rule 2: nothing passes a waiting request of a more important uid (one that can run).
        block_above = min((imps[q.uid] for q in waiting if self._can_ever_run(q)), default=math.inf)
        # What each uid could give up, for a quick "the walk can not succeed".
        gains: dict[int, int] = {}
        for q in self._requests.values():
            if q.state in (RequestState.APPROVED, RequestState.LOADED):
                gains[q.uid] = gains.get(q.uid, 0) + self._w(q)
            elif q.state is RequestState.WAIT_FOR_UNLOAD:
                gains[q.uid] = gains.get(q.uid, 0) + headroom[q.key]
        hopeless: set[tuple[int, float]] = set()
        # Reserved requests first: what their victims free is theirs (rule 6's last line).
        waiting.sort(key=lambda q: (q.state is not RequestState.WAIT_FOR_UNLOAD, imps[q.uid], q.seq))
        for r in waiting:
            w = self._w(r)
            if r.state is RequestState.WAIT_FOR_UNLOAD:
                if available(r) >= w:
                    self._grant(r, actions)
                    return True
                if available(r) + claims.get(r.key, 0) < w:
                    # Its reservation no longer adds up (only a policy change does that):
                    # walk again, or fall back to waiting unreserved.
                    if not self._try_walk(r, now, actions):
                        self._release_claims(r)
                        r.state = RequestState.NOT_PRIORITIZED
                    return True
                continue
            if imps[r.uid] > block_above:
                continue
            if available(r) >= w:
                self._grant(r, actions)
                return True
            need = w - available(r)
            if (r.uid, need) in hopeless:
                continue
            imp, ran = imps[r.uid], self._last_completed.get(r.uid, _NEVER)
            could = sum(
                g
                for v, g in gains.items()
                if v != r.uid and (imps[v] > imp or (imps[v] == imp and self._last_completed.get(v, _NEVER) > ran))
            )
            if could >= need and self._try_walk(r, now, actions):
                return True
            hopeless.add((r.uid, need))
        return False
