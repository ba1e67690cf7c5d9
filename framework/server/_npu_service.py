"""The ``npu`` system service: the arbiter, carried out over the binder.

``NpuService`` is the I/O half of AOSP's ``NpuManagerServiceImpl``. Everything it
decides is decided by ``NpuArbiter`` (``_arbiter``); this module only feeds it inputs
and carries out its ``Action``s:

- **Apps** call ``INpuManager`` (registered as ``npu``). The caller is the binder
  calling uid, never a field. Callers need ``ACCESS_NPU_MODEL_MANAGER_API`` (else
  EX_SECURITY). An app targeting Android 17 that does not declare
  ``<uses-feature android:name="android.hardware.npu">`` is warned in the log once, or,
  with the block flag on (``--block-missing-feature``, AOSP's
  ``npumanager_block_missing_feature``), refused with EX_SECURITY and given no direct
  access in its SchedulingConfig.
- **Answers** (``onCanLoadModel``, ``onRequestUnloadModel``, ``onModelLoadRequestComplete``)
  go to the request's own ``IModelLoadCallback``, oneway, through one *lane* per app
  (uid): each app's answers leave in exactly the order the arbiter produced them,
  whichever binder call caused them, and the lanes run concurrently, so no app waits
  behind another. Each answer has ``CALLBACK_DEADLINE_S`` to leave (connecting to the
  app, its handshake, room in its socket: a oneway call waits for nothing else); an
  app that does not take it in time (stopped, wedged, not reading) is treated as dead
  and reported to the activity manager as not responding (which kills a background one),
  as is one whose callback is dead. Revocations go to the HAL through a lane of their
  own; an app hears that a request ended only after the HAL was asked to free its
  models.
- **Deadlines**: one task sleeps until the arbiter's ``next_deadline()`` and then
  ``tick``s it; a model not unloaded in time is revoked through
  ``IHalControl.revokeRequestModels`` and its request ends CANCELLED. The HAL files
  each prepared model under the request the app named for it (the compilation's
  ``ModelLoadToken``), so it frees that request's models, and any of the uid's models
  filed under no request the service still has on file, while the app's other
  requests keep theirs. ``cmd npu set-unload-deadline MS`` sets the deadline.
- **The HAL**: the service waits for ``android.hardware.npu.IScheduling/default``, sets
  its ``ISchedulingCallback``, pushes every uid's ``SchedulingConfig``
  (``_priority.scheduling_config_for``) with ``setSchedulingConfigs``, and from then on
  pushes the changed ones with ``updateSchedulingConfigs`` after every importance or
  thermal change. COMPLETED work events move the policy (``work_completed`` for the
  work's originalUid, or its uid when it has none). When the HAL dies (linkToDeath)
  the service logs it and waits for the HAL to come back, then sets the callback and
  pushes the full set again.

  *While the HAL is away*, model loads are still arbitrated as usual: the budget is
  the framework's bookkeeping, not the driver's, and an app that was told
  CAN_LOAD_NOW simply fails to load until the HAL is back (its NNAPI calls see a dead
  device). Configs computed meanwhile are pushed in full on reconnect. A revocation
  due meanwhile still ends the request (the app lost its chance), and is logged as
  not delivered: a restarted HAL has no models of anyone anyway.
- **Deaths**: an app's death (its callback's death notice, or the activity manager's)
  drops its requests silently, frees their budget at once, and asks the HAL to free
  its models (``revokeUidModels``), so they are gone within a binder round trip, not
  only when the HAL's own death watch fires.

The service's clock is trio's (``trio.current_time()``), so tests run it under the
autojump MockClock.
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from collections.abc import Callable, Iterable
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import trio

from framework.binder import (
    AID_ROOT,
    AID_SHELL,
    AID_SYSTEM,
    FIRST_APPLICATION_UID,
    Binder,
    DeathRecipient,
    IllegalArgumentException,
    RemoteException,
    SecurityException,
    TransactionError,
    defaultServiceManager,
)
from framework.npumanager import (
    ACCESS_NPU_MODEL_MANAGER_API,
    ATTRIBUTE_WORK_TO_OTHER_APPS,
    FEATURE_NEURAL_PROCESSING_UNIT,
    KEY_MAX_BUDGET,
    KEY_MODEL_SIZE_WEIGHTS,
    NPU_MODEL_POLICY_BUDGET,
    NPU_MODEL_POLICY_STATUS_QUO,
    NPU_MODEL_POLICY_TURN_TAKING,
    NPU_SERVICE,
    constantToString,
)
from interfaces.android.hardware.npu import (
    EndReason,
    IScheduling,
    ISchedulingCallback,
    StartReason,
)
from interfaces.android.npumanager import IModelLoadCallback, INpuManager
from interfaces.npuemu.hal import IHalControl
from interfaces.services import HAL_CONTROL, HAL_SCHEDULING

from ._actions import Action, CanLoad, Log, RequestComplete, RequestUnload, Revoke
from ._arbiter import DEFAULT_UNLOAD_TIMEOUT_S, MAX_OPEN_REQUESTS_PER_APP, NpuArbiter
from ._dump import fit_reply, page_arg
from ._policy_api import NpuPolicy, policy_source
from ._package import PERMISSION_DUMP, NameNotFoundException, PackageManager
from ._priority import scheduling_config_for

__all__ = ["CALLBACK_DEADLINE_S", "DUMP_PAGE_ROWS", "NpuService", "enforce_system_caller", "is_system_caller"]

log = logging.getLogger("NpuManagerService")

_RECENT_EVENTS = 64
_REVOKE_TIMEOUT_S = 1.0

#: How long one answer to an app (a oneway ``IModelLoadCallback`` call) may take to
#: leave: connecting to the app, its handshake and room in its socket. Past it the app
#: is treated as dead (its requests are dropped, its HAL models freed), never as a
#: reason to delay other apps: their answers go out meanwhile, in lanes of their own.
#: Android's binder fails a oneway call at once when the target's async buffer is
#: full; the deadline leaves a live app on a loaded machine time to accept a connection.
CALLBACK_DEADLINE_S = 5.0

#: Requests one page of ``dumpsys npu`` lists (``--page N`` for the others): one app at
#: its cap fits in a page, and a page's ``--json`` stays far below the binder's 1 MiB.
DUMP_PAGE_ROWS = MAX_OPEN_REQUESTS_PER_APP
# Android 17 (CINNAMON_BUN): the release from which a missing NPU feature matters.
_FEATURE_RULE_FROM_SDK = 37


@dataclass(frozen=True, slots=True)
class _RevokeUid:
    """Free every model of ``uid`` in the HAL: its app died (the service's own action,
    queued behind the arbiter's so it is carried out in order with them)."""

    uid: int


class _Lanes:
    """Jobs in order per key, keys concurrently; a job past ``deadline`` calls ``on_late``.

    A lane is a queue and one task that drains it, started when the first job comes
    and ended when the queue is empty. ``put(key, job, deadline)`` queues ``job`` (an
    ``async`` callable); a job still running ``deadline`` seconds after it started gets
    ``on_late(key)`` called (it is then cancelled, if it can be: a frame half written
    finishes, whatever it takes), and its lane goes on when it ends. No lane ever waits
    for another.
    """

    def __init__(self, on_late) -> None:
        self._on_late = on_late
        self._queues: dict[Any, deque] = {}
        self._nursery: trio.Nursery | None = None

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        for key, queue in self._queues.items():
            nursery.start_soon(self._drain, key, queue)

    def put(self, key: Any, job, deadline: float | None = None) -> None:
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            if self._nursery is not None:
                self._nursery.start_soon(self._drain, key, queue)
        queue.append((job, deadline))

    def pending(self) -> dict[Any, int]:
        """How many jobs wait (or run) in each lane."""
        return {key: len(queue) for key, queue in self._queues.items()}

    async def _drain(self, key: Any, queue: deque) -> None:
        try:
            while queue:
                job, deadline = queue[0]
                if deadline is None:
                    await job()
                else:
                    await self._with_deadline(key, job, deadline)
                queue.popleft()
        finally:
            if self._queues.get(key) is queue:
                del self._queues[key]

    async def _with_deadline(self, key: Any, job, deadline: float) -> None:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                await trio.sleep(deadline)
                self._on_late(key)
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            await job()
            nursery.cancel_scope.cancel()


class _Died(DeathRecipient):
    __slots__ = ("fn",)

    def __init__(self, fn) -> None:
        self.fn = fn

    def binderDied(self, who: Any) -> None:  # noqa: N802
        self.fn()


def _policy_bundle(params: Any) -> dict[str, Any] | None:
    """A ``PolicyParams`` parcelable back into the bundle dict the policies read."""
    if params is None:
        return None
    bundle: dict[str, Any] = {}
    for key in params.keys:
        if key == KEY_MAX_BUDGET:
            if not params.hasMaxBudget:
                raise IllegalArgumentException(f"{KEY_MAX_BUDGET} is listed but has no value")
            bundle[key] = params.maxBudget
        elif key == KEY_MODEL_SIZE_WEIGHTS:
            if params.modelSizeWeights is None:
                raise IllegalArgumentException(f"{KEY_MODEL_SIZE_WEIGHTS} is listed but has no value")
            bundle[key] = list(params.modelSizeWeights)
        else:
            bundle[key] = None  # the policy refuses unknown keys by name
    return bundle


def is_system_caller() -> bool:
    """Whether the binder call being served comes from system or root."""
    return Binder.getCallingUid() in (AID_ROOT, AID_SYSTEM)


def enforce_system_caller(what: str) -> None:
    """Refuse the call being served unless system or root makes it: the callbacks a
    system service registers with the HAL, which nobody else may call."""
    if not is_system_caller():
        uid = Binder.getCallingUid()
        log.warning("%s refused: uid %d is not system", what, uid)
        raise SecurityException(f"{what}: only system may call, not uid {uid}")


class NpuService:
    """The ``npu`` service of one system_server. Start it with ``await nursery.start(svc.serve)``.

    ``packages`` is system_server's PackageManager (permissions, features, names).
    ``unload_timeout`` is the unload deadline in seconds; ``block_missing_feature``
    refuses apps that do not declare ``android.hardware.npu``; ``hal_timeout`` is how
    long to wait for the HAL before saying so in the log (the service keeps waiting).
    ``policy`` is the load policy at boot (the status quo if None; a user's, from
    ``--npu-policy-file``, joins ``setPolicy``'s choices if it has a ``policy_id``).
    """

    def __init__(
        self,
        runtime: Any,
        packages: PackageManager,
        *,
        unload_timeout: float = DEFAULT_UNLOAD_TIMEOUT_S,
        block_missing_feature: bool = False,
        hal_timeout: float = 10.0,
        policy: NpuPolicy | None = None,
    ) -> None:
        if not (isinstance(hal_timeout, (int, float)) and 0 < hal_timeout < math.inf):
            raise IllegalArgumentException(f"hal_timeout must be a positive number of seconds, not {hal_timeout!r}")
        self.runtime = runtime
        self.packages = packages
        self.arbiter = NpuArbiter(unload_timeout=unload_timeout, policy=policy)
        self.block_missing_feature = bool(block_missing_feature)
        self.hal_timeout = float(hal_timeout)
        self._IScheduling = IScheduling
        self._ISchedulingCallback = ISchedulingCallback
        self._IHalControl = IHalControl
        self._work_reasons = {"started": StartReason, "ended": EndReason}
        self._IModelLoadCallback = IModelLoadCallback
        self._callbacks: dict[tuple[int, int], Any] = {}
        self._importance: dict[int, int] = {}
        self._warned_feature: set[int] = set()
        self._recent: deque[dict[str, Any]] = deque(maxlen=_RECENT_EVENTS)
        self._pushed: dict[int, Any] = {}
        self._scheduling: Any = None
        self._control: Any = None
        self._hal_connects = 0
        self._hal_deaths = 0
        self._counters = {"work_events": 0, "work_completed": 0, "callbacks_sent": 0, "callbacks_failed": 0,
                          "callbacks_late": 0, "revocations_sent": 0, "revocations_failed": 0, "config_pushes": 0,
                          "refused_calls": 0}
        #: One lane per app uid (its answers), and "hal" (revocations).
        self._lanes = _Lanes(self._callback_late)
        self._wake = trio.Event()
        self._configs_dirty = trio.Event()
        self._hal_listeners: list[Any] = []
        self._not_responding: list[Callable[[int, str], None]] = []
        self._connected = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.stub = self._make_stub()
        self._sched_callback = self._make_scheduling_callback()

    # ------------------------------------------------------------------ lifecycle

    async def serve(self, *, register: bool = True, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Run the service's tasks; with ``register``, add it to servicemanager as ``npu``."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._lanes.start(nursery)
            nursery.start_soon(self._deadline_loop)
            nursery.start_soon(self._config_loop)
            nursery.start_soon(self._hal_loop)
            if register:
                await defaultServiceManager(self.runtime).addService(NPU_SERVICE, self.stub, False, 8)
                source = policy_source(self.arbiter.policy)
                log.info("npu service registered (policy %s%s, unload deadline %g s, block missing feature %s)",
                         self.arbiter.policy.name, f" from {source}" if source else "", self.arbiter.unload_timeout,
                         self.block_missing_feature)
            task_status.started(self)
            await trio.sleep_forever()

    def add_hal_listener(self, fn) -> None:
        """``await fn(control)`` each time the HAL (re)connects (the thermal service's hook)."""
        self._hal_listeners.append(fn)

    def add_not_responding_listener(self, fn: Callable[[int, str], None]) -> None:
        """``fn(uid, reason)`` when an app misses ``CALLBACK_DEADLINE_S`` (the activity manager's ANR hook)."""
        self._not_responding.append(fn)

    @property
    def hal_connected(self) -> bool:
        return self._scheduling is not None

    async def wait_hal_connected(self) -> None:
        while self._scheduling is None:
            await self._connected.wait()

    # ------------------------------------------------------------------ inputs from system_server

    def importance_changed(self, uid: int, importance: int) -> None:
        """The activity manager moved ``uid`` (an app) to ``importance``."""
        self._importance[uid] = importance
        self._apply(self.arbiter.importance_changed(uid, importance, self._now()))
        self._configs_changed()

    def app_died(self, uid: int, why: str = "process died") -> None:
        """The app's process is gone: drop its requests, free its HAL models."""
        had = any(k[0] == uid for k in self._callbacks)
        for key in [k for k in self._callbacks if k[0] == uid]:
            del self._callbacks[key]
        actions = self.arbiter.app_died(uid, self._now())
        if had:
            log.info("uid %d (%s): %s; its requests are dropped", uid, self._name(uid), why)
            actions = [*actions, _RevokeUid(uid)]
        self._apply(actions)

    def thermal_changed(self, severity: int) -> None:
        """The thermal service saw the die's severity change."""
        if severity == self.arbiter.thermal_severity:
            return
        self._apply(self.arbiter.thermal_changed(severity, self._now()))
        self._configs_changed()

    def packages_changed(self) -> None:
        """A package was installed or removed: its config must reach the HAL."""
        self._configs_changed()

    # ------------------------------------------------------------------ the binder face

    def _make_stub(self) -> Binder:
        svc = self

        class NpuManagerStub(INpuManager.Stub):
            async def canLoadModel(self, request: Any, callback: Any) -> None:  # noqa: N802
                uid = svc._enforce_caller("canLoadModel")
                if callback is None:
                    raise IllegalArgumentException("canLoadModel needs a callback")
                svc._check_feature(uid)
                cb = svc._IModelLoadCallback.asInterface(callback)
                key = (uid, request.id)
                actions = svc.arbiter.request_can_load(uid, request.id, request.size, request.priority, svc._now())
                svc._callbacks[key] = cb
                binder = cb.asBinder()
                try:
                    binder.linkToDeath(_Died(lambda: svc.app_died(uid, "its callback died")))
                except TransactionError:
                    actions = [*actions, *svc.arbiter.app_died(uid, svc._now())]
                svc._apply(actions)

            async def cancelModelLoad(self, request: Any) -> None:  # noqa: N802
                uid = svc._enforce_caller("cancelModelLoad")
                svc._apply(svc.arbiter.cancel(uid, request.id, svc._now()))

            async def notifyModelLoaded(self, request: Any) -> None:  # noqa: N802
                uid = svc._enforce_caller("notifyModelLoaded")
                svc._apply(svc.arbiter.notify_loaded(uid, request.id, svc._now()))

            async def notifyModelUnloaded(self, request: Any) -> None:  # noqa: N802
                uid = svc._enforce_caller("notifyModelUnloaded")
                svc._apply(svc.arbiter.notify_unloaded(uid, request.id, svc._now()))

            async def setPolicy(self, policy: int, params: Any) -> None:  # noqa: N802
                uid = svc._enforce_caller("setPolicy")
                actions = svc.arbiter.set_policy(policy, _policy_bundle(params), svc._now())
                log.info("setPolicy(%s) by uid %d (%s)", _named("NPU_MODEL_POLICY_", policy), uid, svc._name(uid))
                svc._apply(actions)

            async def dump(self, args: list[str]) -> str:
                svc._enforce_dump()
                return fit_reply(svc.dump_text(args), "dumpsys npu")

            async def shellCommand(self, args: list[str]) -> str:  # noqa: N802
                svc._enforce_shell("cmd npu")
                return svc._shell_command(list(args))

        return NpuManagerStub()

    def _enforce_caller(self, what: str) -> int:
        uid = Binder.getCallingUid()
        try:
            self.packages.enforcePermission(ACCESS_NPU_MODEL_MANAGER_API, uid, f"{what}: Model Manager permission denied")
        except SecurityException:
            self._counters["refused_calls"] += 1
            log.warning("%s refused: uid %d (%s) lacks %s", what, uid, self._name(uid), ACCESS_NPU_MODEL_MANAGER_API)
            raise
        return uid

    def _enforce_shell(self, what: str) -> int:
        """``cmd`` is for the person at the terminal: the shell, root and system only.

        As AOSP's ``Binder.shellCommand``, which refuses any other caller; holding the
        Model Manager permission (every app that loads models does) is not enough.
        """
        uid = Binder.getCallingUid()
        if uid not in (AID_ROOT, AID_SYSTEM, AID_SHELL):
            self._counters["refused_calls"] += 1
            log.warning("%s refused: uid %d (%s) is not the shell", what, uid, self._name(uid))
            raise SecurityException(f"{what}: only the shell, root or system may run shell commands, not uid {uid}")
        return uid

    def _enforce_dump(self) -> None:
        uid = Binder.getCallingUid()
        self.packages.enforcePermission(PERMISSION_DUMP, uid, "dumpsys npu")

    def _missing_feature(self, uid: int) -> bool:
        try:
            info = self.packages.getPackageInfoForUid(uid)
        except NameNotFoundException:
            return False  # system, root, shell: not apps
        return info.targetSdkVersion >= _FEATURE_RULE_FROM_SDK and not info.declares_feature(FEATURE_NEURAL_PROCESSING_UNIT)

    def _check_feature(self, uid: int) -> None:
        if not self._missing_feature(uid):
            return
        name = self._name(uid)
        if self.block_missing_feature:
            self._counters["refused_calls"] += 1
            log.warning("uid %d (%s) does not declare %s: NPU access is blocked", uid, name, FEATURE_NEURAL_PROCESSING_UNIT)
            raise SecurityException(
                f"uid {uid} ({name}) does not declare <uses-feature android:name=\"{FEATURE_NEURAL_PROCESSING_UNIT}\">: "
                "NPU access is blocked on this device"
            )
        if uid not in self._warned_feature:
            self._warned_feature.add(uid)
            log.warning(
                "uid %d (%s) does not declare <uses-feature android:name=\"%s\">: "
                "NPU access will soon be blocked for apps targeting Android 17",
                uid, name, FEATURE_NEURAL_PROCESSING_UNIT,
            )

    # ------------------------------------------------------------------ carrying out actions

    def _now(self) -> float:
        return trio.current_time()

    def _apply(self, actions: Iterable[Action | _RevokeUid]) -> None:
        """Carry out the arbiter's actions: log lines now, the rest into their lanes."""
        for action in actions:
            if isinstance(action, Log):
                level = {"V": logging.DEBUG, "D": logging.DEBUG, "I": logging.INFO, "W": logging.WARNING}.get(
                    action.level, logging.ERROR
                )
                log.log(level, "%s", action.message)
            elif isinstance(action, (Revoke, _RevokeUid)):
                request_id = action.request_id if isinstance(action, Revoke) else None
                done = trio.Event()
                self._lanes.put("hal", functools.partial(self._revoke, action.uid, request_id, done))
                if request_id is not None:
                    self._lanes.put(action.uid, done.wait)  # its RequestComplete follows
            else:
                self._lanes.put(action.uid, functools.partial(self._send_callback, action), CALLBACK_DEADLINE_S)
        self._wake.set()

    def _callback_late(self, uid: Any) -> None:
        """An app's lane missed ``CALLBACK_DEADLINE_S``: the app is treated as dead."""
        if uid == "hal":
            return  # revocations bound themselves (_REVOKE_TIMEOUT_S)
        self._counters["callbacks_late"] += 1
        log.warning("uid %d (%s): a callback did not leave within %g s; treating the app as dead",
                    uid, self._name(uid), CALLBACK_DEADLINE_S)
        reason = f"it took no callback within {CALLBACK_DEADLINE_S:g} s"
        self.app_died(uid, reason)
        for fn in self._not_responding:
            try:
                fn(uid, f"npu: {reason}")
            except Exception:  # a listener's bug must not stop the lanes
                log.exception("reporting uid %d as not responding failed", uid)

    async def _send_callback(self, action: CanLoad | RequestUnload | RequestComplete) -> None:
        key = (action.uid, action.request_id)
        cb = self._callbacks.pop(key, None) if isinstance(action, RequestComplete) else self._callbacks.get(key)
        if cb is None:
            return  # the app died first: nobody to tell
        try:
            if isinstance(action, CanLoad):
                log.info("uid %d request %d: onCanLoadModel(%s)", action.uid, action.request_id,
                         _named("NPU_MODEL_LOAD_STATUS_", action.status))
                await cb.onCanLoadModel(action.status)
            elif isinstance(action, RequestUnload):
                log.info("uid %d request %d: onRequestUnloadModel(%s, deadline in %.3g s)", action.uid,
                         action.request_id, _named("NPU_MODEL_UNLOAD_REASON_", action.reason), action.deadline - self._now())
                await cb.onRequestUnloadModel(action.reason)
            else:
                log.info("uid %d request %d: onModelLoadRequestComplete(%s)", action.uid, action.request_id,
                         _named("NPU_MODEL_LOAD_REQUEST_STATUS_", action.status))
                await cb.onModelLoadRequestComplete(action.status)
            self._counters["callbacks_sent"] += 1
        except TransactionError as exc:
            self._counters["callbacks_failed"] += 1
            log.warning("uid %d: callback failed (%s); treating the app as dead", action.uid, exc)
            self.app_died(action.uid, "its callback is unreachable")
        except Exception:  # one broken app must never stop the service
            log.exception("carrying out %r failed", action)

    async def _revoke(self, uid: int, request_id: int | None, done: trio.Event) -> None:
        """Free models in the HAL: the uid's all (``request_id`` None: its app died), or
        one request's, keeping those of the uid's requests still on file. ``done`` is set
        when it is over, however it went."""
        try:
            await self._revoke_now(uid, request_id)
        except Exception:  # noqa: BLE001 - the HAL lane must go on
            log.exception("revoking uid %d's models failed", uid)
        finally:
            done.set()

    async def _revoke_now(self, uid: int, request_id: int | None) -> None:
        control = self._control
        what = "app death" if request_id is None else f"request {request_id} past its unload deadline"
        if control is None:
            log.warning("uid %d: cannot revoke models (%s): the HAL is not connected", uid, what)
            self._counters["revocations_failed"] += 1
            return
        try:
            with trio.fail_after(_REVOKE_TIMEOUT_S):
                if request_id is None:
                    n = await control.revokeUidModels(uid)
                else:
                    keep = [i for i in self.arbiter.request_ids(uid) if i != request_id]
                    n = await control.revokeRequestModels(uid, request_id, keep)
        except (RemoteException, trio.TooSlowError) as exc:
            self._counters["revocations_failed"] += 1
            log.warning("uid %d: revokeUidModels failed (%s): %s", uid, what, exc)
            return
        self._counters["revocations_sent"] += 1
        log.info("uid %d: HAL freed %d model(s) (%s)", uid, n, what)

    async def _deadline_loop(self) -> None:
        while True:
            self._wake = trio.Event()
            deadline = self.arbiter.next_deadline()
            if deadline is None:
                await self._wake.wait()
                continue
            with trio.move_on_at(deadline):
                await self._wake.wait()
            if trio.current_time() >= deadline:
                self._apply(self.arbiter.tick(self._now()))

    # ------------------------------------------------------------------ the HAL

    def _make_scheduling_callback(self) -> Binder:
        svc = self

        class SchedulingCallback(self._ISchedulingCallback.Stub):
            async def onTransact(self, code: int, data: Any, ctx: Any) -> Any:  # noqa: N802
                # The HAL's events only: whoever else holds this reference may not feed
                # the arbiter work it never ran (a fake COMPLETED turns rule 7).
                svc._counters["refused_calls"] += not is_system_caller()
                enforce_system_caller("ISchedulingCallback")
                return await super().onTransact(code, data, ctx)

            async def onWorkRequested(self, info: Any) -> None:  # noqa: N802
                svc._record("requested", info, None)

            async def onWorkStarted(self, info: Any, reason: int) -> None:  # noqa: N802
                svc._record("started", info, int(reason))

            async def onWorkEnded(self, info: Any, reason: int) -> None:  # noqa: N802
                svc._record("ended", info, int(reason))
                if int(reason) == EndReason.COMPLETED:
                    uid = info.originalUid if info.originalUid >= 0 else info.uid
                    svc._counters["work_completed"] += 1
                    svc._apply(svc.arbiter.work_completed(uid, svc._now()))

        return SchedulingCallback()

    def _record(self, kind: str, info: Any, reason: int | None) -> None:
        self._counters["work_events"] += 1
        self._recent.append(
            {
                "kind": kind,
                "reason": reason,
                "reasonName": None if reason is None else _enum_name(self._work_reasons[kind], reason),
                "id": info.id,
                "uid": info.uid,
                "originalUid": info.originalUid,
                "jobPriority": info.jobPriority,
                "effectivePriority": info.effectivePriority,
                "timestampMs": info.timestampMs,
                "deviceNumber": info.deviceNumber,
                "at": self._now(),
            }
        )

    async def _hal_loop(self) -> None:
        sm = defaultServiceManager(self.runtime)
        waited = 0.0
        while True:
            binder = await sm.waitForService(HAL_SCHEDULING, int(self.hal_timeout * 1000))
            if binder is None:
                waited += self.hal_timeout
                log.error("%s is not registered after %g s; still waiting", HAL_SCHEDULING, waited)
                continue
            waited = 0.0
            died = trio.Event()
            try:
                binder.linkToDeath(_Died(died.set))
                scheduling = self._IScheduling.asInterface(binder)
                await scheduling.setCallback(self._sched_callback)
                # The HAL registers its private interface after IScheduling: give it a moment.
                control_binder = await sm.waitForService(HAL_CONTROL, int(min(self.hal_timeout, 2.0) * 1000))
                control = self._IHalControl.asInterface(control_binder) if control_binder is not None else None
                configs = self._all_configs()
                await scheduling.setSchedulingConfigs(list(configs.values()))
            except TransactionError as exc:
                log.warning("connecting to %s failed (%s); waiting for it again", HAL_SCHEDULING, exc)
                await trio.sleep(0.05)
                continue
            except RemoteException as exc:
                # The HAL refused us (a security or argument error): a bug on one side or
                # the other, never a reason to take system_server down. Try again later.
                log.error("%s refused the npu service: %s: %s; retrying in %g s",
                          HAL_SCHEDULING, type(exc).__name__, exc.message, self.hal_timeout)
                with trio.move_on_after(self.hal_timeout):
                    await died.wait()
                continue
            self._pushed = configs
            self._counters["config_pushes"] += 1
            self._scheduling, self._control = scheduling, control
            self._hal_connects += 1
            self._connected.set()
            self._connected = trio.Event()
            log.info("connected to %s (%d configs pushed%s)", HAL_SCHEDULING, len(configs),
                     "" if control is not None else f"; no {HAL_CONTROL}: revocation unavailable")
            if control is not None:
                for fn in self._hal_listeners:
                    try:
                        await fn(control)
                    except RemoteException as exc:
                        log.warning("HAL listener setup failed: %s: %s", type(exc).__name__, exc.message)
            self._configs_changed()  # anything that changed while connecting
            await died.wait()
            self._scheduling = self._control = None
            self._hal_deaths += 1
            log.error("Lost connection to IScheduling; waiting for the HAL to come back")

    # ------------------------------------------------------------------ SchedulingConfigs

    def _config_uids(self) -> list[int]:
        uids = {AID_ROOT, AID_SYSTEM}
        uids.update(info.uid for info in self.packages.getInstalledPackages())
        uids.update(self._importance)
        return sorted(uids)

    def _config_for(self, uid: int) -> Any:
        return scheduling_config_for(
            uid,
            self._importance.get(uid),
            thermal_severity=self.arbiter.thermal_severity,
            has_attribution_permission=bool(self.packages.checkPermission(ATTRIBUTE_WORK_TO_OTHER_APPS, uid)),
            blocked=self.block_missing_feature and self._missing_feature(uid),
        )

    def _all_configs(self) -> dict[int, Any]:
        return {uid: self._config_for(uid) for uid in self._config_uids()}

    def _configs_changed(self) -> None:
        self._configs_dirty.set()

    async def _config_loop(self) -> None:
        while True:
            await self._configs_dirty.wait()
            self._configs_dirty = trio.Event()
            scheduling = self._scheduling
            if scheduling is None:
                continue  # pushed in full on (re)connect
            configs = self._all_configs()
            changed = [c for uid, c in configs.items() if self._pushed.get(uid) != c]
            if not changed:
                continue
            try:
                await scheduling.updateSchedulingConfigs(list(changed))
            except TransactionError as exc:
                log.warning("updateSchedulingConfigs failed (%s); the full set goes on reconnect", exc)
                continue
            except RemoteException as exc:
                log.error("the HAL refused SchedulingConfigs %s: %s", changed, exc)
                continue
            self._pushed.update((c.uid, c) for c in changed)
            self._counters["config_pushes"] += 1
            for c in changed:
                log.info("SchedulingConfig uid %d (%s): app %d band %d..%d direct %s attribute %s",
                         c.uid, self._name(c.uid), c.appPriority, c.minPriority, c.maxPriority,
                         c.hasDirectAccess, c.canAttributeOtherUid)

    # ------------------------------------------------------------------ cmd npu

    def _shell_command(self, args: list[str]) -> str:
        if not args or args[0] in ("help", "-h", "--help"):
            return _SHELL_HELP
        command, rest = args[0], args[1:]
        now = self._now()
        if command == "set-status-quo-policy":
            _no_args(command, rest)
            self._apply(self.arbiter.set_policy(NPU_MODEL_POLICY_STATUS_QUO, None, now))
        elif command == "set-turn-taking-policy":
            _no_args(command, rest)
            self._apply(self.arbiter.set_policy(NPU_MODEL_POLICY_TURN_TAKING, None, now))
        elif command == "set-budget-policy":
            self._apply(self.arbiter.set_policy(NPU_MODEL_POLICY_BUDGET, _budget_args(rest), now))
        elif command == "set-unload-deadline":
            self._apply(self.arbiter.set_unload_timeout(_deadline_ms_arg(command, rest) / 1000, now))
            return f"unload deadline: {_duration(self.arbiter.unload_timeout)}\n"
        elif command == "info":
            return fit_reply(self.dump_text(rest), "cmd npu info")
        else:
            raise IllegalArgumentException(f"unknown command {command!r}; try: cmd npu help")
        policy = self.arbiter.policy
        return f"policy: {policy.name} {json.dumps(policy.params()) if policy.params() else ''}".rstrip() + "\n"

    # ------------------------------------------------------------------ dumpsys npu

    def _name(self, uid: int) -> str:
        return self.packages.getNameForUid(uid) or ("system" if uid < FIRST_APPLICATION_UID else "")

    def dump_data(self, page: int = 0) -> dict[str, Any]:
        """Everything ``dumpsys npu --json [--page N]`` prints.

        Requests are listed ``DUMP_PAGE_ROWS`` at a time, oldest first (``page`` 0 is the
        first): with every app at its cap the whole list would not fit a binder reply.
        ``requests_per_uid`` counts them all, by state, on every page.
        """
        now = self._now()
        data = self.arbiter.dump(now)
        everything = data["requests"]
        per_uid: dict[int, dict[str, int]] = {}
        for r in everything:
            states = per_uid.setdefault(r["uid"], {})
            states[r["state"]] = states.get(r["state"], 0) + 1
        pages = max(1, -(-len(everything) // DUMP_PAGE_ROWS))
        first = page * DUMP_PAGE_ROWS
        data["requests"] = everything[first:first + DUMP_PAGE_ROWS]
        data["page"] = {"index": page, "pages": pages, "rows": DUMP_PAGE_ROWS, "first_row": first,
                        "requests_total": len(everything)}
        data["requests_per_uid"] = {
            str(uid): {"package": self._name(uid), **states} for uid, states in sorted(per_uid.items())
        }
        for r in data["requests"]:
            r["package"] = self._name(r["uid"])
        data["loaded_models"] = [
            {"uid": r["uid"], "package": r["package"], "id": r["id"], "size": r["size"], "state": r["state"]}
            for r in data["requests"]
            if r["state"] in ("loaded", "unloading")
        ]
        data["scheduling_configs"] = [
            {"package": self._name(uid), **dataclasses.asdict(cfg), "pushed": self._pushed.get(uid) == cfg}
            for uid, cfg in self._all_configs().items()
        ]
        data["hal"] = {
            "connected": self.hal_connected,
            "control": self._control is not None,
            "connects": self._hal_connects,
            "deaths": self._hal_deaths,
        }
        data["block_missing_feature"] = self.block_missing_feature
        data["recent_work_events"] = list(self._recent)
        data["counters"] = {**data["counters"], **self._counters}
        data["time"] = now
        return data

    def dump_text(self, args: Iterable[str] = ()) -> str:
        page, args = page_arg(list(args), "dumpsys npu")
        data = self.dump_data(page)
        if "--json" in args:
            return json.dumps(data, indent=2, sort_keys=True) + "\n"
        return _format_dump(data)


def _no_args(command: str, rest: list[str]) -> None:
    if rest:
        raise IllegalArgumentException(f"{command} takes no arguments, got {' '.join(rest)}")


#: The longest unload deadline ``cmd npu set-unload-deadline`` takes: an int32 of ms (~24.8 days).
MAX_UNLOAD_DEADLINE_MS = 2**31 - 1


def _deadline_ms_arg(command: str, rest: list[str]) -> int:
    """``set-unload-deadline MS``: one whole, positive number of milliseconds."""
    if len(rest) != 1:
        got = f", not {' '.join(rest)!r}" if rest else ""
        raise IllegalArgumentException(f"{command} takes one argument, MS (milliseconds){got}")
    text = rest[0]
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) <= MAX_UNLOAD_DEADLINE_MS:
        raise IllegalArgumentException(
            f"{command}: {text!r} is not a whole number of milliseconds from 1 to {MAX_UNLOAD_DEADLINE_MS}")
    return int(text)


def _duration(seconds: float) -> str:
    """A deadline as people read it: ``2 s``, ``750 ms``."""
    ms = round(seconds * 1000, 3)
    return f"{ms / 1000:g} s" if ms % 1000 == 0 else f"{ms:g} ms"


def _budget_args(rest: list[str]) -> dict[str, Any]:
    bundle: dict[str, Any] = {}
    it = iter(rest)
    for arg in it:
        name, eq, value = arg.partition("=")
        if name not in ("--max-budget", "--weights"):
            raise IllegalArgumentException(f"set-budget-policy: unknown option {arg!r} (options: --max-budget N, --weights A,B,C)")
        if not eq:
            value = next(it, None)
            if value is None:
                raise IllegalArgumentException(f"set-budget-policy: {name} needs a value")
        try:
            if name == "--max-budget":
                bundle[KEY_MAX_BUDGET] = int(value)
            else:
                bundle[KEY_MODEL_SIZE_WEIGHTS] = [int(w) for w in value.split(",")]
        except ValueError:
            raise IllegalArgumentException(f"set-budget-policy: {name} {value!r} is not {'an int' if name == '--max-budget' else 'A,B,C ints'}") from None
    return bundle


_SHELL_HELP = """\
npu (NPU Manager) commands:
  help
      Print this help text.
  set-status-quo-policy
      Every request may load at once (the default).
  set-budget-policy [--max-budget N] [--weights A,B,C]
      At most N (default 4) of weight loaded; weights of <1GB, 1-2GB, >2GB models (default 1,2,4).
  set-turn-taking-policy
      One model at a time; apps of equal importance take turns.
  set-unload-deadline MS
      How long (1..2147483647 ms; default 2000) an app asked to unload from now on has before its
      request's models are revoked through the HAL. Apps already asked keep their deadline.
  info
      Show the current policy, requests, priorities, etc. (as dumpsys npu).
"""

_SIZE_NAMES = ("<1GB", "1-2GB", ">2GB")


def _named(prefix: str, value: int) -> str:
    """An NpuManager constant for the log: its name and, in brackets, the number sent."""
    return f"{constantToString(prefix, value)} [{value}]"


def _enum_name(enum_type: Any, value: int) -> str:
    """An AIDL enum's name for ``value`` (the number itself if the enum has no such value)."""
    try:
        return enum_type(value).name
    except ValueError:
        return str(value)


def _format_dump(d: dict[str, Any]) -> str:
    out: list[str] = []
    pol = d["policy"]
    params = " ".join(f"{k}={v}" for k, v in pol["params"].items())
    out.append(f"Policy: {pol['name']}{'  ' + params if params else ''}")
    if pol.get("source"):
        out.append(f"  From: {pol['source']}")
    if d["counters"].get("policy_errors"):
        out.append(f"  Policy errors: {d['counters']['policy_errors']} (the latest {len(pol['errors'])}; "
                   "each event finished by the fallback)")
        for e in pol["errors"]:
            what = f"broke {e['error']}" if e["invariant"] else f"raised {e['error']}"
            out.append(f"    at {e['at']:.3f}s  {e['event']}: {what}")
    b = d["budget"]
    if b["max"] is None:
        out.append(f"  Budget: unlimited (in use {b['in_use']} by the default weights)")
    else:
        out.append(f"  Budget: max {b['max']}  in use {b['in_use']}  reserved {b['reserved']}  "
                   f"being freed {b['being_freed']}  free {b['free']}")
    out.append(f"  Unload deadline: {_duration(d['unload_timeout_s'])}   Block missing feature: {d['block_missing_feature']}")
    t = d["thermal"]
    out.append(f"Thermal: {t['name']} ({t['severity']})")
    hal = d["hal"]
    out.append(f"HAL: {'connected' if hal['connected'] else 'NOT CONNECTED'}  (connects {hal['connects']}, deaths {hal['deaths']})")
    out.append("")
    pg = d["page"]
    shown = len(d["requests"])
    paging = ""
    if pg["pages"] > 1:
        paging = (f"  (page {pg['index']} of 0..{pg['pages'] - 1}: rows {pg['first_row'] + 1}-{pg['first_row'] + shown};"
                  " dumpsys npu --page N for another)")
    out.append(f"Requests: {pg['requests_total']}{paging}")
    if pg["pages"] > 1:  # too many to list: how many each uid has, in every state
        for uid, states in d["requests_per_uid"].items():
            counts = "  ".join(f"{k} {v}" for k, v in states.items() if k != "package")
            out.append(f"    {uid:>6} {states['package'][:28]:<28} {counts}")
        if d["requests"]:
            out.append("")
    if d["requests"]:
        out.append(f"    {'uid':>6} {'package':<28} {'id':>6} {'size':<6} {'priority':<13} {'state':<16} {'age':>8}")
        for r in d["requests"]:
            extra = ""
            if r["unload_deadline_in_s"] is not None:
                extra = f"  unload due in {r['unload_deadline_in_s']:.3g} s"
            out.append(
                f"    {r['uid']:>6} {r['package'][:28]:<28} {r['id']:>6} {_SIZE_NAMES[r['size']]:<6} "
                f"{constantToString('NPU_MODEL_PRIORITY_', r['priority']):<13} {r['state'].upper():<16} {r['age_s']:>7.2f}s{extra}"
            )
    out.append(f"Loaded models: {len(d['loaded_models'])}")
    for m in d["loaded_models"]:
        out.append(f"    {m['uid']:>6} {m['package']:<28} request {m['id']} ({_SIZE_NAMES[m['size']]}) {m['state']}")
    out.append("")
    out.append("Priorities (SchedulingConfig per uid):")
    out.append(f"    {'uid':>6} {'package':<28} {'importance':>10} {'app':>5} {'min':>5} {'max':>5}  direct attribute")
    imp = d["importance"]
    for c in sorted(d["scheduling_configs"], key=lambda c: (c["appPriority"], c["minPriority"], c["uid"])):
        importance = 100 if c["uid"] in (0, 1000) else imp.get(str(c["uid"]), imp.get(c["uid"], 1000))
        out.append(
            f"    {c['uid']:>6} {c['package'][:28]:<28} {importance:>10} {c['appPriority']:>5} {c['minPriority']:>5} "
            f"{c['maxPriority']:>5}  {str(c['hasDirectAccess']):<6} {c['canAttributeOtherUid']}"
            + ("" if c["pushed"] else "  (not pushed yet)")
        )
    out.append("")
    out.append(f"Recent work events: {len(d['recent_work_events'])}")
    for e in d["recent_work_events"][-16:]:
        reason = "" if e["reason"] is None else f" {e.get('reasonName', e['reason'])} [{e['reason']}]"
        out.append(f"    #{e['id']:<6} {e['kind']:<9} uid {e['uid']} (orig {e['originalUid']}) job {e['jobPriority']} "
                   f"eff {e['effectivePriority']} dev {e['deviceNumber']} t={e['timestampMs']}ms{reason}")
    out.append("")
    out.append("Counters: " + "  ".join(f"{k}={v}" for k, v in sorted(d["counters"].items())))
    return "\n".join(out) + "\n"

