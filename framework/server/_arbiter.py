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

What to decide is the policy's (``_policy_api``: the events a policy gets, the actions
it may take and the invariants every action is checked against). This module keeps the
protocol: it checks every call, keeps each request's state and what its app was told,
applies the policy's actions after checking them, tells waiting requests their status,
holds unload deadlines and revokes at them, drops a dead app's requests, and survives a
policy that fails (the error is logged with its event, a safe fallback finishes it).

The built-in policies (``_policies``: status quo, budget, turn taking) apply SPEC Part C's
budget rules 1-10 (the status quo policy has no maximum, so it never has to choose).
Points the SPEC leaves open, decided there:

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

Cost: no event walks the requests on file. The arbiter keeps its live requests indexed
by uid, by state, by uid and state, NOT_PRIORITIZED ones by (uid, size, priority) oldest
first, the models unloading for each claimant, counts per size class (so the budget's
figures are sums of a few counts at the policy's weights), unload deadlines in a heap and
the waiting requests not yet told their status; every change to a request goes through
``_update``, which keeps them. The built-in policies read through them (``PolicyContext``'s
``requests_of``, ``waiting_heads``, ``weight_of``...), so an event costs its own app's
requests and the number of apps, not the 32,000 requests of 64 apps at their cap
(``bench/filing.py``, ``tests/test_npu_arbiter_cost.py``). ``requests()`` and
``waiting()`` still walk, for policies that want the whole list.

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

import heapq
import math
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

from framework.binder import IllegalArgumentException, IllegalStateException, RemoteException
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
from ._policies import DEFAULT_POLICIES, StatusQuoPolicy
from ._policy_api import (
    HOLDING,
    NEVER,
    WAITING,
    AppDied,
    Event,
    ImportanceChanged,
    Key,
    LoadRequest,
    ModelLoaded,
    ModelUnloaded,
    NpuPolicy,
    PolicyError,
    PolicySet,
    PolicyViolation,
    RequestCancelled,
    declared_budget,
    RequestFiled,
    RequestState,
    ThermalChanged,
    UnloadDeadline,
    WorkCompleted,
    policy_source,
)
from ._priority import check_importance, check_uid, effective_importance
from ._thermal import THERMAL_STATUS_NONE, check_severity, severity_name, thermal_allows

DEFAULT_UNLOAD_TIMEOUT_S = 2.0
MAX_OPEN_REQUESTS_PER_APP = 500
"""How many live requests one uid may have on file (any state); past it ``requestCanLoadModel``
is refused with IllegalStateException. As AlarmManagerService caps a uid's alarms (500): the
service's memory, its answers and ``dumpsys npu`` stay bounded whatever one app files."""
ENDED_MEMORY = 4096
"""How many ended requests are remembered, so a late notify says "ended" rather than "unknown"."""
POLICY_ERRORS_KEPT = 16
"""How many of a policy's latest errors ``dump()`` shows (all are counted and logged)."""

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_WAIT_STATUS = {
    RequestState.NOT_PRIORITIZED: NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED,
    RequestState.WAIT_FOR_UNLOAD: NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD,
}
_UNLOAD_REASONS = (
    NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE,
    NPU_MODEL_UNLOAD_REASON_THERMAL,
    NPU_MODEL_UNLOAD_REASON_TURN_TAKING,
)


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


def _seq(r: LoadRequest) -> int:
    return r.seq


def _who(r: LoadRequest) -> str:
    return f"uid {r.uid} request {r.request_id}"


class PolicyContext:
    """What a policy sees and does while it handles one event (``_policy_api``'s docstring).

    Reads: ``event``, ``now``, ``thermal``, ``may_move``, ``requests()``, ``waiting()``,
    ``uids()``, ``requests_of(uid, *states)``, ``requests_in(*states)``, ``waiting_heads()``,
    ``weight_of(uid, *states)``, ``weight_in(*states)``, ``request(uid, id)``, ``live(r)``, ``importance(uid)``, ``last_completed(uid)``,
    ``thermal_allows(r)``, ``weight(r)``, and the budget's figures (``available(r)``,
    ``claims()``, ``headroom(r)``, ``budget()``). Actions: ``grant``, ``reserve``,
    ``hold``, ``ask_unload``, ``cancel``, ``log``; each is checked, then applied at once
    (the next read sees it), or raises ``PolicyViolation`` having changed nothing.
    """

    __slots__ = ("_a", "event", "now", "actions", "_moving", "_ended")

    def __init__(self, arbiter: NpuArbiter, event: Event, now: float, actions: list[Action], moving: bool,
                 ended: bool) -> None:
        self._a = arbiter
        self.event = event
        self.now = now
        self.actions = actions
        self._moving = moving
        self._ended = ended

    # ------------------------------------------------------------------ reads

    @property
    def thermal(self) -> int:
        """The thermal severity (``THERMAL_STATUS_*``)."""
        return self._a._thermal

    @property
    def may_move(self) -> bool:
        """Whether a request already answered may move now (rule 6): a request ended or
        was dropped in this event, or an importance, the heat or the policy changed."""
        return self._moving or self._ended

    @property
    def unload_timeout(self) -> float:
        return self._a._unload_timeout

    def requests(self) -> list[LoadRequest]:
        """Every live request, oldest first (a walk over all of them: prefer the reads below)."""
        return list(self._a._requests.values())

    def waiting(self) -> list[LoadRequest]:
        """The live requests not approved (NOT_PRIORITIZED or WAIT_FOR_UNLOAD, new ones too), oldest first."""
        return self.requests_in(*WAITING)

    def uids(self) -> list[int]:
        """The uids with a live request."""
        return list(self._a._by_uid)

    def requests_of(self, uid: int, *states: RequestState) -> list[LoadRequest]:
        """``uid``'s live requests (in ``states``, if any are named), oldest first; costs only that uid's requests."""
        a = self._a
        if not states:
            return list(a._by_uid.get(uid, {}).values())
        found = [r for s in states for r in a._by_uid_state.get((uid, s), {}).values()]
        found.sort(key=_seq)  # a state's index is in the order requests entered it
        return found

    def requests_in(self, *states: RequestState) -> list[LoadRequest]:
        """Every live request in ``states``, oldest first; costs only the requests in them."""
        found = [r for s in states for r in self._a._by_state[s].values()]
        found.sort(key=_seq)
        return found

    def waiting_heads(self) -> list[LoadRequest]:
        """Every WAIT_FOR_UNLOAD request and the oldest NOT_PRIORITIZED request of each
        (uid, size, priority), oldest first.

        NOT_PRIORITIZED requests of one uid, size and priority differ in nothing a budget
        weighs but their age (each reserves nothing; importance, weight and heat are the
        same), so a policy that serves equals oldest first need look at no other: this
        read costs the number of such classes (at most nine per uid), not the requests.
        """
        a = self._a
        heads = [next(iter(c.values())) for c in a._np_classes.values()]
        heads.extend(a._by_state[RequestState.WAIT_FOR_UNLOAD].values())
        heads.sort(key=_seq)
        return heads

    def weight_of(self, uid: int, *states: RequestState) -> int:
        """The weight of ``uid``'s live requests in ``states`` (at the policy's weights), from counts."""
        return self._a._weigh(*(self._a._uid_sizes.get((uid, s)) for s in states))

    def weight_in(self, *states: RequestState) -> int:
        """The weight of every live request in ``states``, from counts."""
        return self._a._weigh(*(self._a._sizes[s] for s in states))

    def request(self, uid: int, request_id: int) -> LoadRequest | None:
        return self._a._requests.get((uid, request_id))

    def live(self, r: LoadRequest) -> bool:
        """Whether ``r`` is still live (actions of this event may have ended it)."""
        return self._a._requests.get(r.key) is r

    def importance(self, uid: int) -> int:
        """The importance ``uid`` is ranked by (lower is more important; system 100, unknown 1000)."""
        return self._a._imp(uid)

    def last_completed(self, uid: int) -> float:
        """When ``uid`` last completed work (``_policy_api.NEVER`` if never)."""
        return self._a._last_completed.get(uid, NEVER)

    def thermal_allows(self, r: LoadRequest) -> bool:
        """Whether the thermal rule lets ``r`` hold a model at the present heat."""
        return self._a._thermal_ok(r)

    def weight(self, r: LoadRequest) -> int:
        return self._a._w(r)

    def claims(self) -> dict[Key, int]:
        """Weight being unloaded for each WAIT_FOR_UNLOAD request."""
        return self._a._claims()

    def headroom(self, r: LoadRequest, claims: dict[Key, int] | None = None) -> int:
        """The part of a WAIT_FOR_UNLOAD request's reservation not covered by its victims."""
        return self._a._headroom(r, claims)

    def available(self, r: LoadRequest | None) -> float:
        """Budget free now for ``r``: the pool plus its own reservation (inf if unbounded)."""
        return self._a._available(None if r is None else r.key)

    def budget(self) -> dict[str, int | None]:
        return self._a.budget()

    # ------------------------------------------------------------------ actions

    def grant(self, r: LoadRequest) -> None:
        """CAN_LOAD_NOW: ``r`` (waiting) may load."""
        self._live_waiting(r, "CAN_LOAD_NOW")
        self._moves(r, "granted")
        if not self._a._thermal_ok(r):
            raise PolicyViolation("heat", f"{_who(r)} granted at thermal {severity_name(self.thermal)}, which forbids it")
        w = self._a._w(r)
        self._budget_allows(r, w, -w if r.state is RequestState.WAIT_FOR_UNLOAD else 0, "granting")
        self._a._release_claims(r)
        self._a._update(r, state=RequestState.APPROVED, told=NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW)
        self._a._counters["can_load_now"] += 1
        self.actions.append(CanLoad(r.uid, r.request_id, NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW))

    def reserve(self, r: LoadRequest) -> None:
        """WAIT_FOR_UNLOAD: ``r`` waits with its weight reserved (told at the end of the event)."""
        self._live_waiting(r, "WAIT_FOR_UNLOAD")
        if r.state is RequestState.WAIT_FOR_UNLOAD:
            return
        self._moves(r, "reserved")
        self._budget_allows(r, 0, self._a._w(r), "reserving")
        self._a._update(r, state=RequestState.WAIT_FOR_UNLOAD)

    def hold(self, r: LoadRequest) -> None:
        """NOT_PRIORITIZED: ``r`` waits, reserving nothing (told at the end of the event)."""
        self._live_waiting(r, "NOT_PRIORITIZED")
        if r.state is RequestState.NOT_PRIORITIZED:
            return
        self._moves(r, "held")
        if not isinstance(self.event, PolicySet) and self._a._thermal_ok(r):
            raise PolicyViolation("reservation", f"{_who(r)} lost its WAIT_FOR_UNLOAD reservation at {self.event}")
        self._a._release_claims(r)
        self._a._update(r, state=RequestState.NOT_PRIORITIZED)

    def ask_unload(self, r: LoadRequest, reason: int, for_request: LoadRequest | None = None) -> None:
        """``onRequestUnloadModel(reason)`` to ``r``'s loaded model, revoked at the deadline."""
        self._live(r, "ask_unload")
        if r.state is not RequestState.LOADED:
            raise PolicyViolation("live", f"only a loaded model is asked to unload; {_who(r)} is {r.state.value}")
        if reason not in _UNLOAD_REASONS:
            raise PolicyViolation("action", f"unload reason must be one of NPU_MODEL_UNLOAD_REASON_* {_UNLOAD_REASONS}, not {reason!r}")
        finisher = self.event.uid if isinstance(self.event, WorkCompleted) else None
        if (reason == NPU_MODEL_UNLOAD_REASON_TURN_TAKING) != (finisher is not None) or (
                finisher is not None and r.uid != finisher):
            raise PolicyViolation("turns", f"{_who(r)} asked to unload ({reason}) at {self.event}: a COMPLETED work "
                                           "event asks only its finisher's models, for TURN_TAKING, and only it does")
        if (reason == NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE) != (for_request is not None):
            raise PolicyViolation("action", "RESOURCE_PRESSURE, and only it, names the request it makes room for")
        if for_request is not None:
            self._live(for_request, "ask_unload for")
            if not for_request.waiting:
                raise PolicyViolation("action", f"unload for {_who(for_request)}, which is not waiting")
            self._fair(r, for_request, "asked to unload")
        if reason == NPU_MODEL_UNLOAD_REASON_THERMAL and self._a._thermal_ok(r):
            raise PolicyViolation("heat", f"{_who(r)} asked to unload for heat at {severity_name(self.thermal)}, which allows it")
        self._a._ask_unload(r, self.now, reason, for_request, self.actions)

    def cancel(self, r: LoadRequest, for_request: LoadRequest | None = None) -> None:
        """End ``r`` (waiting or approved, not loaded) CANCELLED, to make room for ``for_request`` if given."""
        self._live(r, "cancel")
        if r.state in (RequestState.LOADED, RequestState.UNLOADING):
            raise PolicyViolation("live", f"{_who(r)} has a loaded model: ask it to unload rather than cancel it")
        if isinstance(self.event, WorkCompleted):
            raise PolicyViolation("turns", f"{_who(r)} cancelled at {self.event}: rule 7 only asks for unloads")
        if for_request is not None:
            self._live(for_request, "cancel for")
            self._fair(r, for_request, "cancelled")
        self._a._end(r, NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED, self.actions,
                     None if for_request is None else for_request.uid)
        self._ended = True

    def log(self, level: str, message: str) -> None:
        """A logcat line (``level`` one of V D I W E)."""
        if not (isinstance(level, str) and len(level) == 1 and level in "VDIWE"):
            raise PolicyViolation("action", f"log level must be one of V D I W E, not {level!r}")
        if not (isinstance(message, str) and message):
            raise PolicyViolation("action", f"a log message is a non-empty string, not {message!r}")
        self.actions.append(Log(level, message))

    # ------------------------------------------------------------------ checks

    def _live(self, r: object, what: str) -> None:
        if not isinstance(r, LoadRequest) or self._a._requests.get(r.key) is not r:
            raise PolicyViolation("live", f"{what}: {r!r} is not a live request")

    def _live_waiting(self, r: object, status: str) -> None:
        self._live(r, status)
        assert isinstance(r, LoadRequest)
        if not r.waiting:
            raise PolicyViolation("live", f"{status} for {_who(r)}, which is already {r.state.value}")

    def _moves(self, r: LoadRequest, how: str) -> None:
        if not r.is_new and not self.may_move:
            raise PolicyViolation("rule 6", f"{_who(r)} ({r.state.value}) {how} at {self.event}, "
                                            "which frees nothing and changes no importance, heat or policy")

    def _fair(self, victim: LoadRequest, for_request: LoadRequest, how: str) -> None:
        vi, fi = self._a._imp(victim.uid), self._a._imp(for_request.uid)
        ran = self._a._last_completed
        if not (vi > fi or (vi == fi and ran.get(victim.uid, NEVER) > ran.get(for_request.uid, NEVER))):
            raise PolicyViolation("fairness", f"{_who(victim)} (importance {vi}) {how} for {_who(for_request)} "
                                              f"(importance {fi}), which is not more important nor ran less recently")

    def _budget_allows(self, r: LoadRequest, more_used: int, more_reserved: int, how: str) -> None:
        use, total = self._a._over_budget()
        if use is None or total is None:
            return
        after_use, after_total = use + more_used, total + more_used + more_reserved
        if after_use > max(use, 0) or after_total > max(total, 0):
            b = self._a.budget()
            raise PolicyViolation("budget", f"{how} {_who(r)} (weight {self._a._w(r)}) would exceed the budget "
                                            f"(max {b['max']}, in use {b['in_use']}, reserved {b['reserved']}, "
                                            f"being freed {b['being_freed']})")


class NpuArbiter:
    """The ``npu`` service's state and protocol; every input returns the actions to take.

    ``unload_timeout`` is how long an app asked to unload has before its models are
    revoked (2 s by default). ``policies`` maps ``NPU_MODEL_POLICY_*`` ids to policy
    classes (``_policies.DEFAULT_POLICIES`` by default); ``policy`` is the one in force
    at the start (the status quo by default; its class joins ``policies`` if it has a
    ``policy_id`` they lack). ``strict`` makes a failing policy raise ``PolicyError``
    from the input instead of falling back (what ``check-policy`` runs).
    """

    def __init__(
        self,
        *,
        unload_timeout: float = DEFAULT_UNLOAD_TIMEOUT_S,
        policies: Mapping[int, type[NpuPolicy]] = DEFAULT_POLICIES,
        policy: NpuPolicy | None = None,
        strict: bool = False,
    ) -> None:
        self._unload_timeout = _check_unload_timeout(unload_timeout)
        self._policies = dict(policies)
        if policy is not None and not isinstance(policy, NpuPolicy):
            raise TypeError(f"policy must be an NpuPolicy, not {policy!r}")
        self._policy: NpuPolicy = policy if policy is not None else StatusQuoPolicy()
        self._limit, self._weights = declared_budget(self._policy)
        pid = type(self._policy).policy_id
        if type(pid) is int:
            self._policies.setdefault(pid, type(self._policy))
        self._strict = bool(strict)
        # The live requests and their indexes, kept by ``_update``/``_release`` so that no
        # event walks the requests of apps it does not concern (module docstring, "Cost").
        self._requests: dict[Key, LoadRequest] = {}  # every live request, oldest first
        self._by_uid: dict[int, dict[Key, LoadRequest]] = {}  # oldest first; its size is MAX_OPEN_REQUESTS_PER_APP's
        self._by_state: dict[RequestState, dict[Key, LoadRequest]] = {s: {} for s in RequestState}
        self._by_uid_state: dict[tuple[int, RequestState], dict[Key, LoadRequest]] = {}
        self._sizes: dict[RequestState, list[int]] = {s: [0] * len(NPU_MODEL_SIZES) for s in RequestState}
        self._uid_sizes: dict[tuple[int, RequestState], list[int]] = {}  # requests per size class
        self._np_classes: dict[tuple[int, int, int], dict[Key, LoadRequest]] = {}  # (uid, size, priority), oldest first
        self._victims: dict[Key, dict[Key, LoadRequest]] = {}  # claimant -> the models unloading for it
        self._deadlines: list[tuple[float, int, Key]] = []  # a heap of unload deadlines, stale entries dropped lazily
        self._untold: dict[Key, LoadRequest] = {}  # waiting requests whose app was not told their status
        self._ended: OrderedDict[Key, int | None] = OrderedDict()  # status, None if dropped at death
        self._importance: dict[int, int] = {}
        self._last_completed: dict[int, float] = {}
        self._thermal = THERMAL_STATUS_NONE
        self._seq = 0
        self._policy_errors: deque[dict[str, Any]] = deque(maxlen=POLICY_ERRORS_KEPT)
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
            "policy_errors": 0,
        }

    # ------------------------------------------------------------------ inputs

    def request_can_load(self, uid: int, request_id: int, size: int, priority: int, now: float) -> list[Action]:
        """``requestCanLoadModel``: file a request; the policy answers it (else NOT_PRIORITIZED)."""
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
        if len(self._by_uid.get(uid, ())) >= MAX_OPEN_REQUESTS_PER_APP:
            raise IllegalStateException(
                f"uid {uid} already has {MAX_OPEN_REQUESTS_PER_APP} requests open (MAX_OPEN_REQUESTS_PER_APP):"
                " cancel or finish some before filing more")
        self._ended.pop(key, None)  # an ended id may be used again
        self._seq += 1
        r = LoadRequest(uid, request_id, size, priority, self._seq, now)
        self._requests[key] = r
        self._by_uid.setdefault(uid, {})[key] = r
        self._index(r)
        self._untold[key] = r
        self._counters["requests"] += 1
        return self._decide(RequestFiled(uid, request_id, size, priority), now)

    def cancel(self, uid: int, request_id: int, now: float) -> list[Action]:
        """``cancelModelLoad``: end the request with CANCELLED, in any state (rule 8)."""
        r = self._live(uid, request_id, "cancelModelLoad")
        now = _check_now(now)
        actions: list[Action] = []
        self._end(r, NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED, actions)
        return self._decide(RequestCancelled(uid, request_id), now, actions, ended=True)

    def notify_loaded(self, uid: int, request_id: int, now: float) -> list[Action]:
        """``notifyModelLoaded``: an approved request's model is in driver memory."""
        r = self._approved(uid, request_id, "notifyModelLoaded")
        now = _check_now(now)
        if r.state is not RequestState.APPROVED:
            raise IllegalStateException(f"notifyModelLoaded twice for uid {uid} request {request_id}")
        self._update(r, state=RequestState.LOADED)
        return self._decide(ModelLoaded(uid, request_id), now)

    def notify_unloaded(self, uid: int, request_id: int, now: float) -> list[Action]:
        """``notifyModelUnloaded``: the app released the model; the request is COMPLETE."""
        r = self._approved(uid, request_id, "notifyModelUnloaded")
        now = _check_now(now)
        actions: list[Action] = []
        self._end(r, NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE, actions)
        return self._decide(ModelUnloaded(uid, request_id), now, actions, ended=True)

    def work_completed(self, uid: int, now: float) -> list[Action]:
        """A COMPLETED work event for ``uid`` (the work's originalUid): the policy may take turns (rule 7)."""
        check_uid(uid)
        now = _check_now(now)
        self._last_completed[uid] = now
        return self._decide(WorkCompleted(uid), now)

    def importance_changed(self, uid: int, importance: int, now: float) -> list[Action]:
        """The activity manager moved ``uid`` to ``importance``; re-examine (rule 6)."""
        check_uid(uid)
        check_importance(importance)
        now = _check_now(now)
        changed = self._importance.get(uid) != importance
        self._importance[uid] = importance
        return self._decide(ImportanceChanged(uid, importance, changed), now, moving=changed)

    def app_died(self, uid: int, now: float) -> list[Action]:
        """The app's process died: drop its requests silently and re-run rule 6."""
        check_uid(uid)
        now = _check_now(now)
        actions: list[Action] = []
        dead = list(self._by_uid.get(uid, {}).values())
        for r in dead:
            self._release(r)
            self._remember_end(r.key, None)
            self._counters["dropped_at_death"] += 1
        if dead:
            actions.append(Log("I", f"uid {uid} died: dropped {len(dead)} request(s)"))
        return self._decide(AppDied(uid, tuple(r.key for r in dead)), now, actions, ended=bool(dead))

    def thermal_changed(self, severity: int, now: float) -> list[Action]:
        """The thermal severity changed (``_thermal``'s rule)."""
        check_severity(severity)
        now = _check_now(now)
        actions: list[Action] = []
        old = self._thermal
        if severity != old:
            actions.append(Log("I", f"thermal {self._thermal_name()} -> {severity_name(severity)}"))
        self._thermal = severity
        return self._decide(ThermalChanged(old, severity), now, actions, moving=severity != old)

    def set_policy(self, policy: int, params: Mapping[str, Any] | None, now: float) -> list[Action]:
        """``setPolicy(policy, bundle)``: replace the policy, keep the requests (rule 9)."""
        now = _check_now(now)
        cls = self._policies.get(policy) if type(policy) is int else None
        if cls is None:
            raise IllegalArgumentException(f"unknown policy {policy!r}; known: {sorted(self._policies)}")
        try:
            new = cls.from_params(params)  # raises before anything changed
        except RemoteException:
            raise
        except Exception as exc:
            raise IllegalArgumentException(f"policy {cls.name} refused its parameters: {type(exc).__name__}: {exc}") from None
        if not isinstance(new, NpuPolicy):
            raise IllegalArgumentException(f"policy {cls.name}'s from_params returned {new!r}, not a policy")
        try:
            declared = declared_budget(new)
        except ValueError as exc:
            raise IllegalArgumentException(str(exc)) from None
        old = self._policy
        self._policy = new
        self._limit, self._weights = declared
        self._counters["policy_changes"] += 1
        actions: list[Action] = [Log("I", f"policy {old.name} {old.params()} -> {new.name} {new.params()}")]
        return self._decide(PolicySet(old.name), now, actions, moving=True)

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
        due: dict[Key, LoadRequest] = {}
        while self._deadlines and self._deadlines[0][0] <= now:
            r = self._unloading_at(heapq.heappop(self._deadlines))
            if r is not None:
                due[r.key] = r
        late = sorted(due.values(), key=_seq)
        if not late:
            return actions
        for r in late:
            actions.append(
                Log("W", f"uid {r.uid} request {r.request_id} did not unload within {self._unload_timeout:g} s: revoking")
            )
            actions.append(Revoke(r.uid, r.request_id))
            self._counters["revoked"] += 1
            self._end(r, NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED, actions)
        return self._decide(UnloadDeadline(tuple(r.key for r in late)), now, actions, ended=True)

    def next_deadline(self) -> float | None:
        """When ``tick`` next has something to do (an unload deadline), or None."""
        heap = self._deadlines
        while heap and self._unloading_at(heap[0]) is None:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _unloading_at(self, entry: tuple[float, int, Key]) -> LoadRequest | None:
        """The request a deadline heap entry stands for, if it is still unloading by that deadline."""
        deadline, seq, key = entry
        r = self._requests.get(key)
        if r is None or r.seq != seq or r.state is not RequestState.UNLOADING or r.unload_deadline != deadline:
            return None
        return r

    # ------------------------------------------------------------------ the policy boundary

    def _decide(self, event: Event, now: float, actions: list[Action] | None = None, *,
                moving: bool = False, ended: bool = False) -> list[Action]:
        """Hand ``event`` to the policy, survive its failure, then tell waiting requests their status."""
        ctx = PolicyContext(self, event, now, [] if actions is None else actions, moving, ended)
        try:
            self._policy.on_event(ctx, event)
        except Exception as exc:  # a policy's bug must not take the service down
            if self._strict:
                raise PolicyError(self._policy.name, event, exc) from exc
            self._policy_failed(ctx, event, exc)
        self._tell(ctx.actions)
        return ctx.actions

    def _policy_failed(self, ctx: PolicyContext, event: Event, exc: Exception) -> None:
        """Log and record the error with its event; the fallback answers a new request."""
        error = PolicyError(self._policy.name, event, exc)
        self._counters["policy_errors"] += 1
        self._policy_errors.append({"at": ctx.now, "event": str(event), "invariant": error.invariant,
                                    "error": str(exc) if error.invariant else f"{type(exc).__name__}: {exc}"})
        fallback = "left waiting"
        r = ctx.request(event.uid, event.request_id) if isinstance(event, RequestFiled) else None
        if r is not None and r.is_new and r.waiting:
            try:
                ctx.grant(r)  # the status quo's answer, within the heat and the declared budget
                fallback = "granted"
            except PolicyViolation:
                pass  # it waits as the policy left it (NOT_PRIORITIZED, or reserved if it reserved it)
        ctx.actions.append(Log("E", f"{error}; the service carried on" +
                               (f" (the new request was {fallback} by the fallback)" if r is not None else "")))

    def _tell(self, actions: list[Action]) -> None:
        """Tell every waiting request whose status changed (a new one included) its status."""
        untold = sorted(self._untold.values(), key=_seq)
        self._untold.clear()
        for r in untold:
            status = _WAIT_STATUS.get(r.state)
            if status is not None and r.told != status:
                object.__setattr__(r, "told", status)
                self._counters["wait_for_unload" if status == NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD else "not_prioritized"] += 1
                actions.append(CanLoad(r.uid, r.request_id, status))

    # ------------------------------------------------------------------ queries

    @property
    def policy(self) -> NpuPolicy:
        return self._policy

    @property
    def policy_errors(self) -> list[dict[str, Any]]:
        """The policy's latest errors (``POLICY_ERRORS_KEPT``), oldest first: ``at``, ``event``, ``invariant``, ``error``."""
        return list(self._policy_errors)

    @property
    def thermal_severity(self) -> int:
        return self._thermal

    @property
    def unload_timeout(self) -> float:
        return self._unload_timeout

    def request_ids(self, uid: int) -> list[int]:
        """The ids of ``uid``'s live requests (any state), oldest first."""
        check_uid(uid)
        return [r.request_id for r in self._by_uid.get(uid, {}).values()]

    def importance_of(self, uid: int) -> int:
        """The importance ``uid`` is ranked by (system/root 100, unknown 1000)."""
        return self._imp(check_uid(uid))

    def budget(self) -> dict[str, int | None]:
        """``max``, ``in_use``, ``reserved``, ``being_freed`` and ``free`` right now."""
        limit = self._limit
        in_use = self._in_use()
        reserved = self._weigh(self._sizes[RequestState.WAIT_FOR_UNLOAD])
        being_freed = self._weigh(self._sizes[RequestState.UNLOADING])
        free = None if limit is None else max(0, self._available(None))
        return {"max": limit, "in_use": in_use, "reserved": reserved, "being_freed": being_freed, "free": free}

    def dump(self, now: float) -> dict[str, Any]:
        """Plain data for ``dumpsys npu``: policy, budget, thermal, requests, counters."""
        now = _check_now(now)
        requests = []
        for r in self._requests.values():
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
        policy = self._policy
        return {
            "policy": {"id": policy.policy_id, "name": policy.name, "params": policy.params(),
                       "source": policy_source(policy), "errors": self.policy_errors},
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

    def _w(self, r: LoadRequest) -> int:
        return self._weights[r.size]

    def _weigh(self, *counts: list[int] | None) -> int:
        """The weight of requests counted per size class (``_sizes``, ``_uid_sizes``), at today's weights."""
        weights = self._weights
        return sum(n * weights[size] for c in counts if c is not None for size, n in enumerate(c))

    def _in_use(self) -> int:
        return self._weigh(*(self._sizes[s] for s in HOLDING))

    def _claims(self) -> dict[Key, int]:
        """Weight being unloaded for each WAIT_FOR_UNLOAD request (costs the models being unloaded for one)."""
        return {c: sum(self._w(q) for q in victims.values()) for c, victims in self._victims.items()}

    def _headroom(self, r: LoadRequest, claims: dict[Key, int] | None = None) -> int:
        """The part of a WAIT_FOR_UNLOAD request's reservation not covered by its victims."""
        claimed = self._claims().get(r.key, 0) if claims is None else claims.get(r.key, 0)
        return max(0, self._w(r) - claimed)

    def _available(self, key: Key | None) -> float:
        """Budget free now for request ``key``: the pool plus its own reservation (rule 1)."""
        limit = self._limit
        if limit is None:
            return math.inf
        claims = self._claims()
        taken = self._in_use()
        for q in self._by_state[RequestState.WAIT_FOR_UNLOAD].values():
            if q.key != key:
                taken += self._headroom(q, claims)
        return limit - taken

    def _over_budget(self) -> tuple[int | None, int | None]:
        """How far over the budget: (in use - max, in use + reserved - max - being freed); None if unbounded."""
        limit = self._limit
        if limit is None:
            return None, None
        used = self._in_use()
        reserved = self._weigh(self._sizes[RequestState.WAIT_FOR_UNLOAD])
        freeing = self._weigh(self._sizes[RequestState.UNLOADING])
        return used - limit, used + reserved - limit - freeing

    def _thermal_ok(self, r: LoadRequest) -> bool:
        return thermal_allows(self._thermal, self._imp(r.uid), r.priority)

    def _thermal_name(self) -> str:
        return severity_name(self._thermal)

    # ------------------------------------------------------------------ transitions

    def _live(self, uid: int, request_id: int, call: str) -> LoadRequest:
        check_uid(uid)
        _check_request_id(request_id)
        r = self._requests.get((uid, request_id))
        if r is not None:
            return r
        if (uid, request_id) in self._ended:
            raise IllegalStateException(f"{call} for uid {uid} request {request_id}, which has already ended")
        raise IllegalStateException(f"{call} for uid {uid} request {request_id}, which was never requested")

    def _approved(self, uid: int, request_id: int, call: str) -> LoadRequest:
        """``_live``, for the calls only an approved request may make (notifyModelLoaded/Unloaded)."""
        r = self._live(uid, request_id, call)
        if r.waiting:
            raise IllegalStateException(
                f"{call} for uid {uid} request {request_id}, which was never approved ({r.state.value})"
            )
        return r

    def _release_claims(self, r: LoadRequest) -> None:
        """Unloads asked for ``r`` count for nobody any more (it was granted, held or ended)."""
        for q in self._victims.pop(r.key, {}).values():
            object.__setattr__(q, "claimant", None)

    def _release(self, r: LoadRequest) -> None:
        self._release_claims(r)
        self._update(r, claimant=None)
        self._unindex(r, r.state)
        del self._requests[r.key]
        mine = self._by_uid[r.uid]
        del mine[r.key]
        if not mine:
            del self._by_uid[r.uid]
        self._untold.pop(r.key, None)

    # ------------------------------------------------------------------ indexes

    def _update(self, r: LoadRequest, **fields: Any) -> None:
        """Change a live record (frozen to policies: only the arbiter writes it) and its indexes."""
        state, claimant = r.state, r.claimant
        for name, value in fields.items():
            object.__setattr__(r, name, value)
        if r.state is not state:
            self._unindex(r, state)
            self._index(r)
        if r.claimant != claimant:
            if claimant is not None:
                victims = self._victims[claimant]
                del victims[r.key]
                if not victims:
                    del self._victims[claimant]
            if r.claimant is not None:
                self._victims.setdefault(r.claimant, {})[r.key] = r
        if "unload_deadline" in fields and r.unload_deadline is not None:
            heap = self._deadlines
            heapq.heappush(heap, (r.unload_deadline, r.seq, r.key))
            if len(heap) > 2 * len(self._by_state[RequestState.UNLOADING]) + 64:  # stale entries: rebuild
                live = (self._unloading_at(entry) for entry in heap)
                heap[:] = [(q.unload_deadline, q.seq, q.key) for q in live if q is not None]  # type: ignore[misc]
                heapq.heapify(heap)
        status = _WAIT_STATUS.get(r.state)
        if status is not None and r.told != status:
            self._untold[r.key] = r
        else:
            self._untold.pop(r.key, None)

    def _index(self, r: LoadRequest) -> None:
        key, state, uid = r.key, r.state, r.uid
        self._by_state[state][key] = r
        self._by_uid_state.setdefault((uid, state), {})[key] = r
        self._sizes[state][r.size] += 1
        self._uid_sizes.setdefault((uid, state), [0] * len(NPU_MODEL_SIZES))[r.size] += 1
        if state is RequestState.NOT_PRIORITIZED:
            kind = self._np_classes.setdefault((uid, r.size, r.priority), {})
            older = bool(kind) and next(reversed(kind.values())).seq > r.seq
            kind[key] = r
            if older:  # back from WAIT_FOR_UNLOAD (rare): put it in its place among its uid's own
                ordered = sorted(kind.values(), key=_seq)
                kind.clear()
                kind.update((q.key, q) for q in ordered)

    def _unindex(self, r: LoadRequest, state: RequestState) -> None:
        key, uid = r.key, r.uid
        del self._by_state[state][key]
        mine = self._by_uid_state[(uid, state)]
        del mine[key]
        if not mine:
            del self._by_uid_state[(uid, state)]
        self._sizes[state][r.size] -= 1
        counts = self._uid_sizes[(uid, state)]
        counts[r.size] -= 1
        if not any(counts):
            del self._uid_sizes[(uid, state)]
        if state is RequestState.NOT_PRIORITIZED:
            kind = self._np_classes[(uid, r.size, r.priority)]
            del kind[key]
            if not kind:
                del self._np_classes[(uid, r.size, r.priority)]

    def _remember_end(self, key: Key, status: int | None) -> None:
        self._ended[key] = status
        self._ended.move_to_end(key)
        while len(self._ended) > ENDED_MEMORY:
            self._ended.popitem(last=False)

    def _end(self, r: LoadRequest, status: int, actions: list[Action], for_uid: int | None = None) -> None:
        """The request's one and only end (rule 8)."""
        self._release(r)
        self._remember_end(r.key, status)
        self._counters["completed" if status == NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE else "cancelled"] += 1
        actions.append(RequestComplete(r.uid, r.request_id, status, for_uid))

    def _ask_unload(
        self, r: LoadRequest, now: float, reason: int, claimant: LoadRequest | None, actions: list[Action]
    ) -> None:
        deadline = now + self._unload_timeout
        self._update(r, state=RequestState.UNLOADING, claimant=None if claimant is None else claimant.key,
             unload_deadline=deadline, unload_reason=reason)
        self._counters["unload_requests"] += 1
        actions.append(RequestUnload(r.uid, r.request_id, reason, deadline, None if claimant is None else claimant.uid))
