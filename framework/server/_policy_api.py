"""The NPU Manager's load policy as a public plug-in API: requests, events, the base class.

A load policy decides, for the ``npu`` service, which model-load requests may load now,
which wait, and whose loaded models are asked to unload. The arbiter (``_arbiter``)
keeps everything that is protocol rather than policy: it checks every binder call,
keeps each request's state and what its app has been told, sends the callbacks, holds
unload deadlines and revokes at them, drops a dead app's requests. After each input it
hands the policy one *event* and a *context*; the policy looks at the live requests
through the context and takes *actions* through it. Every action is checked against
the invariants before it is applied; one that would break one raises
``PolicyViolation`` naming it. If the handler raises (a violation, or any exception of
its own), the actions it took before stand (each was checked), the error is logged
with the event, and a safe fallback finishes the event: a new request is granted if
the heat and the policy's declared budget allow it (the status quo's answer), else it
waits NOT_PRIORITIZED. The service keeps serving.

Events (``ctx.event``, frozen dataclasses; ``str()`` reads as a log line):

===================== =====================================================================
``RequestFiled``       ``requestCanLoadModel``: ``ctx.request(uid, request_id)`` is new.
``RequestCancelled``   ``cancelModelLoad``: the request has already ended (CANCELLED).
``ModelLoaded``        ``notifyModelLoaded``: the request is now ``LOADED``.
``ModelUnloaded``      ``notifyModelUnloaded``: the request has ended (COMPLETE).
``WorkCompleted``      a COMPLETED work event of ``uid`` from the HAL.
``ImportanceChanged``  the activity manager moved ``uid`` (``changed`` False if it did not).
``AppDied``            ``uid`` died; its requests were dropped (no callback).
``ThermalChanged``     the thermal severity changed (``ctx.thermal`` is the new one).
``UnloadDeadline``     ``revoked`` requests missed their unload deadline: revoked, ended.
``PolicySet``          this policy was just installed by ``setPolicy`` over live requests.
===================== =====================================================================

Actions (methods of the context; each returns None or raises ``PolicyViolation``):

- ``ctx.grant(r)``: CAN_LOAD_NOW to a waiting request.
- ``ctx.reserve(r)``: WAIT_FOR_UNLOAD: it waits, its weight reserved.
- ``ctx.hold(r)``: NOT_PRIORITIZED: it waits, reserving nothing. A new request the
  policy neither grants nor reserves is held.
- ``ctx.ask_unload(r, reason, for_request=None)``: ``onRequestUnloadModel`` to a loaded
  model (``NPU_MODEL_UNLOAD_REASON_*``); it is revoked if its app does not unload in
  time. RESOURCE_PRESSURE needs the waiting request it makes room for.
- ``ctx.cancel(r, for_request=None)``: end a request CANCELLED (a waiting or approved
  one, typically: a loaded one should be asked to unload).
- ``ctx.log(level, message)``: a logcat line from the policy.

The invariants (the stateful test's, checked on every action of every policy):

- *live*: only a live request is acted on; CAN_LOAD_NOW at most once; only a loaded
  model is asked to unload.
- *budget*: with ``max_budget`` set, the weight approved or loaded never exceeds it, and
  approved + reserved never exceeds it plus the weight being unloaded; after a
  ``setPolicy`` that leaves more than that approved, nothing grows until it fits.
- *heat*: nothing is granted that the thermal rule forbids (``ctx.thermal_allows``); a
  THERMAL unload only of what it forbids.
- *fairness*: nobody is displaced (asked to unload for RESOURCE_PRESSURE, or cancelled for
  another request) for a less important uid, nor for an equal one that ran more recently.
- *turns* (rule 7): a COMPLETED work event does nothing but ask the finisher's loaded
  models to unload (TURN_TAKING); TURN_TAKING is for no other event.
- *rule 6*: a request already answered moves (granted, reserved, held) only at an event
  that could let it: a request ended or was dropped in this event, or an importance, the
  heat or the policy changed (``ctx.may_move``).
- *reservation*: a WAIT_FOR_UNLOAD request goes back to NOT_PRIORITIZED only at a
  ``PolicySet`` or when the heat forbids it.

A policy from a file (``--npu-policy-file mine.py:MyPolicy``) is loaded by
``load_policy``: a subclass of ``NpuPolicy`` built with ``from_params``.
"""

from __future__ import annotations

import enum
import hashlib
import importlib.util
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from framework.binder import IllegalArgumentException
from framework.npumanager import DEFAULT_MODEL_SIZE_WEIGHTS, NPU_MODEL_SIZES

if TYPE_CHECKING:
    from ._arbiter import PolicyContext

Key = tuple[int, int]  # (uid, request_id): ids are the app's own, so only the pair is unique


class RequestState(enum.Enum):
    """Where a live request stands (``_arbiter``'s diagram); ``value`` is dumpsys's word."""

    NOT_PRIORITIZED = "not_prioritized"
    WAIT_FOR_UNLOAD = "wait_for_unload"
    APPROVED = "approved"
    LOADED = "loaded"
    UNLOADING = "unloading"


WAITING = (RequestState.NOT_PRIORITIZED, RequestState.WAIT_FOR_UNLOAD)
HOLDING = (RequestState.APPROVED, RequestState.LOADED, RequestState.UNLOADING)


@dataclass(frozen=True, slots=True)
class LoadRequest:
    """One live model-load request, as a policy sees it (read-only: only actions change it).

    ``seq`` is the arrival order ("oldest" in the rules); ``created`` the service-clock
    time it came; ``told`` the last ``NPU_MODEL_LOAD_STATUS_*`` its app was sent (None:
    not answered yet); ``claimant`` the waiting request this model is being unloaded for
    (RESOURCE_PRESSURE; None once that request is granted, held or ended).
    """

    uid: int
    request_id: int
    size: int
    priority: int
    seq: int
    created: float
    state: RequestState = RequestState.NOT_PRIORITIZED
    told: int | None = None
    claimant: Key | None = None
    unload_deadline: float | None = None
    unload_reason: int | None = None

    @property
    def key(self) -> Key:
        return (self.uid, self.request_id)

    @property
    def is_new(self) -> bool:
        """Not answered yet: only at its own ``RequestFiled`` event."""
        return self.told is None

    @property
    def waiting(self) -> bool:
        return self.state in WAITING


# ---------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class RequestFiled:
    uid: int
    request_id: int
    size: int
    priority: int

    def __str__(self) -> str:
        return f"requestCanLoadModel(uid {self.uid}, id {self.request_id}, size {self.size}, priority {self.priority})"


@dataclass(frozen=True, slots=True)
class RequestCancelled:
    uid: int
    request_id: int

    def __str__(self) -> str:
        return f"cancelModelLoad(uid {self.uid}, id {self.request_id})"


@dataclass(frozen=True, slots=True)
class ModelLoaded:
    uid: int
    request_id: int

    def __str__(self) -> str:
        return f"notifyModelLoaded(uid {self.uid}, id {self.request_id})"


@dataclass(frozen=True, slots=True)
class ModelUnloaded:
    uid: int
    request_id: int

    def __str__(self) -> str:
        return f"notifyModelUnloaded(uid {self.uid}, id {self.request_id})"


@dataclass(frozen=True, slots=True)
class WorkCompleted:
    uid: int

    def __str__(self) -> str:
        return f"work completed (uid {self.uid})"


@dataclass(frozen=True, slots=True)
class ImportanceChanged:
    uid: int
    importance: int
    changed: bool

    def __str__(self) -> str:
        return f"importance of uid {self.uid} -> {self.importance}" + ("" if self.changed else " (unchanged)")


@dataclass(frozen=True, slots=True)
class AppDied:
    uid: int
    dropped: tuple[Key, ...]

    def __str__(self) -> str:
        return f"uid {self.uid} died ({len(self.dropped)} request(s) dropped)"


@dataclass(frozen=True, slots=True)
class ThermalChanged:
    old: int
    new: int

    def __str__(self) -> str:
        return f"thermal {self.old} -> {self.new}"


@dataclass(frozen=True, slots=True)
class UnloadDeadline:
    revoked: tuple[Key, ...]

    def __str__(self) -> str:
        return f"unload deadline passed ({', '.join(f'uid {u} id {i}' for u, i in self.revoked) or 'nothing revoked'})"


@dataclass(frozen=True, slots=True)
class PolicySet:
    old: str

    def __str__(self) -> str:
        return f"setPolicy (was {self.old})"


Event = (
    RequestFiled | RequestCancelled | ModelLoaded | ModelUnloaded | WorkCompleted | ImportanceChanged
    | AppDied | ThermalChanged | UnloadDeadline | PolicySet
)


# ---------------------------------------------------------------------- errors


class PolicyViolation(Exception):
    """An action that would break an invariant; ``invariant`` names it (module docstring)."""

    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(f"{invariant}: {message}")
        self.invariant = invariant


class PolicyError(Exception):
    """A policy failed at an event (raised only by a strict arbiter, as ``check-policy`` runs one)."""

    def __init__(self, policy: str, event: Event, error: BaseException) -> None:
        invariant = error.invariant if isinstance(error, PolicyViolation) else None
        what = f"broke invariant {error}" if invariant else f"raised {type(error).__name__}: {error}"
        super().__init__(f"policy {policy} {what}, at event {event}")
        self.event, self.error, self.invariant = event, error, invariant


class PolicyLoadError(ValueError):
    """A policy file that cannot be loaded: a bad spec, a missing file or class, an import error."""


# ---------------------------------------------------------------------- the base class


class NpuPolicy:
    """The interface every load policy implements, the built-in ones included.

    Class attributes: ``name`` (shown by dumpsys and in logs) and ``policy_id`` (the
    ``NPU_MODEL_POLICY_*`` number ``setPolicy`` selects it by; None: only installed
    directly, as ``--npu-policy-file`` does).

    What a policy declares (read once, when it is installed, by the arbiter's checks and
    by dumpsys):

    - ``max_budget``: the most weight approved or loaded at once, or None (unbounded);
    - ``weight(size)``: what a request of that ``NPU_MODEL_SIZE_*`` costs.

    What it decides: ``on_event(ctx, event)``, called after every input (module
    docstring: the events, the actions, the invariants). Its default does nothing, so
    every new request waits NOT_PRIORITIZED.

    Built from ``from_params(params)`` (a ``PersistableBundle``-like dict or None; raise
    IllegalArgumentException to refuse it) and reported by ``params()``.
    """

    name: ClassVar[str] = "unnamed"
    policy_id: ClassVar[int | None] = None

    @property
    def max_budget(self) -> int | None:
        return None

    def weight(self, size: int) -> int:
        return DEFAULT_MODEL_SIZE_WEIGHTS[size]

    def params(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> NpuPolicy:
        if params:
            raise IllegalArgumentException(f"the {cls.name} policy takes no parameters, got {sorted(params)}")
        return cls()

    def on_event(self, ctx: PolicyContext, event: Event) -> None:
        pass

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A policy loaded from a file pickles as "load that file with these params", so a
        # lab sweep's worker process (Dask) rebuilds it from the same file (``params()``
        # must round-trip through ``from_params``); any other pickles as usual.
        source = policy_source(self)
        if source is None:
            return super().__reduce_ex__(protocol)
        return (load_policy, (source, self.params() or None))


def declared_budget(policy: NpuPolicy) -> tuple[int | None, tuple[int, ...]]:
    """The policy's ``max_budget`` and its ``weight`` of each size, read once when it is
    installed; ValueError unless a positive int (or None) and positive ints."""
    limit = policy.max_budget
    if limit is not None and (type(limit) is not int or limit <= 0):
        raise ValueError(f"policy {policy.name}: max_budget must be a positive int or None, not {limit!r}")
    weights = tuple(policy.weight(size) for size in NPU_MODEL_SIZES)
    for w in weights:
        if type(w) is not int or w <= 0:
            raise ValueError(f"policy {policy.name}: weight() must give positive ints, not {weights!r}")
    return limit, weights


def policy_source(policy: NpuPolicy) -> str | None:
    """``file.py:Class`` for a policy loaded from a file, None for one of the framework's own."""
    cls = type(policy)
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__npu_policy_file__", None)
    return None if path is None else f"{path}:{cls.__qualname__}"


def parse_policy_params(text: str | None) -> dict[str, Any] | None:
    """``--npu-policy-params``: a JSON object (None for none); ``PolicyLoadError`` if it is not one."""
    if text is None:
        return None
    try:
        params = json.loads(text)
    except ValueError as exc:
        raise PolicyLoadError(f"policy parameters must be a JSON object: {exc}") from None
    if not isinstance(params, dict):
        raise PolicyLoadError(f"policy parameters must be a JSON object, not {text!r}")
    return params


def load_policy(spec: str, params: Mapping[str, Any] | None = None) -> NpuPolicy:
    """The policy ``spec`` names (``path/to/file.py:ClassName``), built with ``params``.

    The file is imported as a module of its own (once per content: loading the same
    file twice gives the same class). ``PolicyLoadError`` says what is wrong: the spec,
    the file, its import (with the exception), the class, or its parameters.
    """
    path_text, sep, cls_name = spec.rpartition(":")
    if not sep or not path_text or not cls_name.isidentifier():
        raise PolicyLoadError(f"a policy is named FILE.py:CLASS, not {spec!r}")
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise PolicyLoadError(f"policy file {path_text} does not exist")
    source = path.read_bytes()
    name = f"npuemu_policy_{path.stem}_{hashlib.sha256(bytes(path) + source).hexdigest()[:12]}"
    module = sys.modules.get(name)
    if module is None:
        mspec = importlib.util.spec_from_file_location(name, path)
        if mspec is None or mspec.loader is None:
            raise PolicyLoadError(f"policy file {path_text} is not a Python module")
        module = importlib.util.module_from_spec(mspec)
        module.__npu_policy_file__ = str(path)  # type: ignore[attr-defined]
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        try:
            mspec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise PolicyLoadError(f"policy file {path_text} failed to import: {type(exc).__name__}: {exc}") from exc
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise PolicyLoadError(f"policy file {path_text} has no class {cls_name}")
    if not (isinstance(cls, type) and issubclass(cls, NpuPolicy)):
        raise PolicyLoadError(f"{cls_name} in {path_text} is not a subclass of framework.server.NpuPolicy")
    try:
        policy = cls.from_params(params)
    except Exception as exc:
        raise PolicyLoadError(f"{cls_name}.from_params({params!r}) failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(policy, NpuPolicy):
        raise PolicyLoadError(f"{cls_name}.from_params returned {policy!r}, not an NpuPolicy")
    try:
        declared_budget(policy)
    except Exception as exc:
        raise PolicyLoadError(str(exc) if isinstance(exc, ValueError) else f"{cls_name}: {type(exc).__name__}: {exc}") from exc
    return policy


NEVER = -math.inf
"""``ctx.last_completed(uid)`` of a uid that never completed work."""
