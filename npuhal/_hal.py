"""The vendor HAL process's core: the state its services share.

One :class:`Hal` per process (made by ``serve_hal``, in ``_serve``) sits between one :class:`~npuhal.Driver` and one binder
runtime, and serves:

- ``android.hardware.npu.IScheduling/default`` (``_scheduling``): configs down to the
  driver, debounced work events up to the framework's ``ISchedulingCallback``;
- ``android.hardware.neuralnetworks.IDevice/<vendor>-<device>`` for every driver device
  whose name is valid, each ``prepareModel`` giving an ``IPreparedModel`` (``_device``);
- ``npuemu.hal.IHalControl/default`` (``_control``), the emulator's private knobs.

Tasks (all in the nursery ``serve_hal`` opens, so they end with it):

- the *pump* waits on the driver's eventfd (``Driver.wait_events``) and gives each work
  event a fresh HAL-wide ``WorkInfo.id`` as it reads it, records it (undebounced) for
  ``recentWorkEvents``, and feeds the debouncer; thermal and memory events go to the
  control listeners;
- the *flusher* sends the debouncer's held ``onWorkEnded`` when its window passes;
- the *sender* makes the oneway callback calls in order, so a slow or dead framework
  never stalls the pump;
- under a virtual-clock driver, the *clock follower* advances emulated time with trio's
  clock while HAL work is in flight (so tests run under trio's MockClock and emulated
  milliseconds are trio milliseconds);
- one *reaper* per client pid that holds prepared models: when the process exits
  (``network.wait_exit``: a pidfd on Unix sockets), its models are freed;
- the *watchdog* resets a channel that has made no progress for ``hang_timeout_ms``
  (drm_sched's timeout detection and recovery), so its work ends FAILED.

Nothing here imports the framework: the HAL knows binder and the driver, no service.
"""

from __future__ import annotations

import collections
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import trio

import interfaces.services as services
from framework.binder import (
    AID_ROOT,
    AID_SHELL,
    AID_SYSTEM,
    Binder,
    DeadObjectException,
    DeathRecipient,
    RemoteException,
    SecurityException,
    TransactionError,
)

from ._debounce import Debouncer, Emit, Kind
from ._errors import NpuClosedError, NpuError
from ._types import (
    EndReason,
    MemoryPressure,
    StartReason,
    ThermalChanged,
    WorkEnded,
    WorkRequested,
    WorkStarted,
)

__all__ = ["Hal", "valid_instance_name"]

log = logging.getLogger("android.hardware.npu")

SCHEDULING_INSTANCE = services.HAL_SCHEDULING
CONTROL_INSTANCE = services.HAL_CONTROL
DEVICE_PREFIX = services.NN_DEVICE_PREFIX

#: The C layer's defaults (``struct npu_system_config``): where LIGHT..SHUTDOWN begin.
DEFAULT_THERMAL_THRESHOLDS_C = (45.0, 55.0, 65.0, 75.0, 85.0, 95.0)

#: The hung-channel watchdog's default patience, in emulated ms (amdgpu's TDR is 10 s).
DEFAULT_HANG_TIMEOUT_MS = 5000.0

# How many undebounced work events recentWorkEvents can look back on.
_RECENT_EVENTS = 4096
# The clock follower's step while HAL work is in flight, in trio seconds.
_FOLLOW_TICK_S = 0.001
_FOLLOW_MAX_TICK_S = 0.016
# Oneway callback calls queued for the sender before new ones are dropped (counted).
_SEND_QUEUE = 65536

_INSTANCE_NAME = re.compile(r"[^-]+-[^-]+")


def valid_instance_name(name: str) -> bool:
    """NNAPI VTS's rule for an IDevice instance: ``{VENDOR}-{DEVICE_NAME}``, exactly one
    '-', neither first nor last."""
    return isinstance(name, str) and _INSTANCE_NAME.fullmatch(name) is not None


def require_system(what: str) -> int:
    """The calling uid, if it is root or system; else ``SecurityException``."""
    uid = Binder.getCallingUid()
    if uid not in (AID_ROOT, AID_SYSTEM):
        raise SecurityException(f"{what}: uid {uid} is neither system (1000) nor root (0)")
    return uid


def require_shell_or_system(what: str) -> int:
    uid = Binder.getCallingUid()
    if uid not in (AID_ROOT, AID_SYSTEM, AID_SHELL):
        raise SecurityException(f"{what}: uid {uid} is not system, root or the shell")
    return uid


@dataclass(slots=True)
class _Recorded:
    """One undebounced work event, with what traces need."""

    kind: int  # WorkEvent.KIND_*
    reason: int
    info: Any  # the AIDL WorkInfo, id already the HAL's
    work_id: int
    time_ns: int
    channel: int
    hw_device: int


@dataclass(slots=True)
class _Timing:
    submitted_ns: int
    started_ns: int | None = None
    ended_ns: int | None = None
    device_number: int = -1
    last_ns: int = 0  # emulated time of its latest event (or of the watchdog's last look)


@dataclass
class HalStats:
    """Counters for dump(): what reached the callback and what did not."""

    sent: collections.Counter = field(default_factory=collections.Counter)
    dropped_no_callback: int = 0
    dropped_queue_full: int = 0
    read: int = 0  # work events read from the driver
    emitted: int = 0  # callbacks the debouncer let through (sent, dropped or queued)
    callback_deaths: int = 0
    prepared: int = 0  # prepareModel / prepareModelWithCache that loaded a model
    prepared_from_cache: int = 0  # prepareModelFromCache that loaded a model
    cache_written: int = 0  # compilation caches written
    cache_refused: int = 0  # caches prepareModelFromCache could not use


class _CallbackDied(DeathRecipient):
    __slots__ = ("hal", "callback")

    def __init__(self, hal: Hal, callback: Any) -> None:
        self.hal = hal
        self.callback = callback

    def binderDied(self, who: Any) -> None:  # noqa: N802 - Android's name
        self.hal.callback_died(self.callback, "its process died")


class Hal:
    """The state the HAL's services share.  Made by :func:`serve_hal`; not thread-safe
    (everything runs in one trio run, like the driver)."""

    def __init__(self, driver: Any, runtime: Any, nursery: trio.Nursery, *, thermal_thresholds_c: Any) -> None:
        self.driver = driver
        self.runtime = runtime
        self.nursery = nursery
        self.thresholds = tuple(float(t) for t in thermal_thresholds_c)
        self.callback: Any = None
        self._callback_link: tuple[Any, DeathRecipient] | None = None
        self.debouncer = Debouncer(paused_reason=int(EndReason.PAUSED))
        self.stats = HalStats()
        self._next_event_id = 1
        self.recent: collections.deque[_Recorded] = collections.deque(maxlen=_RECENT_EVENTS)
        self._send, self._send_recv = trio.open_memory_channel(_SEND_QUEUE)
        self._notify_send, self._notify_recv = trio.open_memory_channel(_SEND_QUEUE)
        self._debounce_changed = trio.Event()
        self._flush_at: float | None = None  # when the flusher next wakes by itself (None: never)
        # Driver work ids this HAL submitted and that have not ended for good.
        self.in_flight: dict[int, _Timing] = {}
        self._end_recorded: dict[int, trio.Event] = {}
        self._finished: collections.OrderedDict[int, _Timing] = collections.OrderedDict()
        self._work_submitted = trio.Event()
        # (trio time, driver ns) at which a virtual driver's clock was tied to trio's.
        self._clock_origin: tuple[float, int] | None = None
        # IDevice services by driver device number (valid names only) and their names.
        self.devices: dict[int, Any] = {}
        self.device_names: dict[int, str] = {}
        # Prepared models: all live ones, and by owning client pid.
        self.prepared: set[Any] = set()
        self.by_pid: dict[int, set[Any]] = {}
        self.listeners: list[Any] = []
        self.thermal_last: ThermalChanged | None = None

    # ---- ids, time -----------------------------------------------------------

    def new_event_id(self) -> int:
        event_id = self._next_event_id
        # WorkInfo.id is an AIDL int; wrap long before that (never within one run).
        self._next_event_id = event_id + 1 if event_id < 2**31 - 1 else 1
        return event_id

    def work_submitted(self, work_id: int) -> None:
        """A HAL service queued work: track it, handle what the submission emitted (its
        request, a start on an idle channel) now, and wake the virtual clock follower."""
        now = self.driver.now_ns
        self.in_flight[work_id] = _Timing(now, last_ns=now)
        self._end_recorded[work_id] = trio.Event()
        self.poll()
        self._work_submitted.set()

    async def wait_recorded(self, work_id: int) -> None:
        """Until the HAL has read ``work_id``'s final end (its timing and events are in).
        Not a checkpoint when it already has: the caller waited for the end itself."""
        event = self._end_recorded.get(work_id)
        if event is not None:
            await event.wait()

    # ---- driver events -> WorkInfo -------------------------------------------

    def on_event(self, event: Any) -> None:
        now = trio.current_time()
        if isinstance(event, WorkRequested | WorkStarted | WorkEnded):
            self._on_work_event(event, now)
        elif isinstance(event, ThermalChanged):
            self.thermal_last = event
            log.info("thermal severity %s at %.1f C", event.severity.name, event.temperature_c)
            self._notify_listeners("onThermalSeverityChanged", int(event.severity), float(event.temperature_c))
        elif isinstance(event, MemoryPressure):
            self._notify_listeners("onMemoryPressure", event)

    def _on_work_event(self, event: Any, now: float) -> None:
        info = event.info.replace(id=self.new_event_id())  # the HAL-wide id over the driver's
        work = event.info.id
        uid = event.info.uid
        timing = self.in_flight.get(work)
        if timing is not None:
            timing.last_ns = event.time_ns
            timing.device_number = event.info.deviceNumber
        channel = getattr(event, "channel", -1)
        hw_device = getattr(event, "hw_device", -1)
        if isinstance(event, WorkRequested):
            kind, reason = 0, -1
            emits = self.debouncer.requested(work, uid, info, now)
        elif isinstance(event, WorkStarted):
            kind, reason = 1, int(event.reason)
            if timing is not None and timing.started_ns is None:
                timing.started_ns = event.time_ns
            emits = self.debouncer.started(work, uid, info, reason, now)
        else:
            kind, reason = 2, int(event.reason)
            if event.is_final and timing is not None:
                timing.ended_ns = event.time_ns
                del self.in_flight[work]
                recorded = self._end_recorded.pop(work, None)
                if recorded is not None:
                    # Waiters run only after this function returns, when the event is
                    # in self.recent too.
                    recorded.set()
                self._finished[work] = timing
                while len(self._finished) > _RECENT_EVENTS:
                    self._finished.popitem(last=False)
            emits = self.debouncer.ended(work, uid, info, reason, now)
        self.recent.append(_Recorded(kind, reason, info, work, event.time_ns, channel, hw_device))
        self.stats.read += 1
        for emit in emits:
            self.deliver(emit)
        self._wake_flusher()

    def _wake_flusher(self) -> None:
        """Wake the flusher if the debouncer now holds something due before the time it
        sleeps until (an event that only moves a due later, or holds nothing new, need
        not: the flusher waking at the old time finds nothing ready and sleeps again)."""
        due = self.debouncer.next_due()
        if due is not None and (self._flush_at is None or due < self._flush_at):
            self._debounce_changed.set()

    def timing_of(self, work_id: int) -> _Timing | None:
        return self.in_flight.get(work_id) or self._finished.get(work_id)

    def deliver(self, emit: Emit) -> None:
        """Hand one debounced callback to the sender, or count it dropped."""
        self.stats.emitted += 1
        callback = self.callback
        if callback is None:
            self.stats.dropped_no_callback += 1
            return
        try:
            self._send.send_nowait((callback, emit))
        except trio.WouldBlock:
            self.stats.dropped_queue_full += 1

    # ---- the callback ----------------------------------------------------------

    def set_callback(self, callback: Any) -> None:
        if self._callback_link is not None:
            binder, recipient = self._callback_link
            self._callback_link = None
            try:
                binder.unlinkToDeath(recipient)
            except Exception:
                pass
        self.callback = callback
        if callback is not None:
            binder = callback.asBinder()
            recipient = _CallbackDied(self, callback)
            try:
                binder.linkToDeath(recipient)
            except RemoteException:
                # Already dead: the first send will find out and clear it.
                pass
            else:
                self._callback_link = (binder, recipient)
            log.info("scheduling callback set (pid %d)", Binder.getCallingPid())
        else:
            log.info("scheduling callback cleared")

    def callback_died(self, callback: Any, why: str) -> None:
        if self.callback is not callback:
            return
        self.stats.callback_deaths += 1
        log.warning("scheduling callback dropped: %s", why)
        self._callback_link = None
        self.callback = None

    async def _sender(self) -> None:
        async for callback, emit in self._send_recv:
            if self.callback is not callback:
                # Replaced or dead meanwhile: the new one starts fresh.
                self.stats.dropped_no_callback += 1
                continue
            args = (emit.info,) if emit.kind is Kind.REQUESTED else (
                emit.info,
                (StartReason if emit.kind is Kind.STARTED else EndReason)(emit.reason),
            )
            try:
                await getattr(callback, emit.kind.value)(*args)
            except (DeadObjectException, TransactionError) as exc:
                self.callback_died(callback, f"{type(exc).__name__}: {exc}")
                continue
            except RemoteException as exc:
                log.warning("%s to the scheduling callback failed: %s", emit.kind.value, exc)
                continue
            self.stats.sent[emit.kind.value] += 1

    async def _flusher(self) -> None:
        while True:
            due = self._flush_at = self.debouncer.next_due()
            changed = self._debounce_changed
            if due is None:
                await changed.wait()
            else:
                with trio.move_on_at(due):
                    await changed.wait()
            if changed.is_set():
                self._debounce_changed = trio.Event()
            for emit in self.debouncer.flush(trio.current_time()):
                self.deliver(emit)

    # ---- listeners (IHalControl) -----------------------------------------------

    def _notify_listeners(self, method: str, *args: Any) -> None:
        if not self.listeners:
            return
        try:
            self._notify_send.send_nowait((method, args))
        except trio.WouldBlock:
            log.warning("HAL listeners are not keeping up: %s dropped", method)

    async def _listener_sender(self) -> None:
        # One task, so every listener hears the changes in the order they happened.
        async for method, args in self._notify_recv:
            for listener in list(self.listeners):
                try:
                    await getattr(listener, method)(*args)
                except (DeadObjectException, TransactionError):
                    if listener in self.listeners:
                        self.listeners.remove(listener)
                        log.info("a HAL listener died and was dropped")
                except RemoteException as exc:
                    log.warning("HAL listener %s failed: %s", method, exc)

    # ---- the pump and the clock --------------------------------------------------

    def poll(self) -> None:
        """Handle what the driver has queued now, without waiting for its eventfd.

        Called after a handler changed the hardware directly (a load, an unload, a
        heat spike, a submission): the virtual clock signals the eventfd only when
        time moves, and listeners should hear of the change within the call.
        """
        if self.driver.closed:
            return
        self._handle(self.driver.drain_events())

    def _handle(self, events: list[Any]) -> None:
        for event in events:
            try:
                self.on_event(event)
            except Exception:  # one bad event must not stop the HAL's events
                log.exception("could not handle driver event %r", event)

    async def _pump(self) -> None:
        while True:
            try:
                events = await self.driver.wait_events()
            except NpuClosedError:
                return
            self._handle(events)

    def sync_clock(self) -> None:
        """Under a virtual-clock driver, bring emulated time up to trio's now, and
        handle at once what happened meanwhile (slices computed, works ended): a
        caller waiting for its work wakes without a trip through the pump.

        Called before every submission, so that a job submitted 50 trio-ms after
        another is 50 emulated ms later too, however long the HAL was idle (idle
        time passes for the hardware as well: it cools).
        """
        if self._clock_origin is None or self.driver.closed:
            return
        trio_origin, driver_origin = self._clock_origin
        target_ns = driver_origin + round((trio.current_time() - trio_origin) * 1e9)
        behind_ns = target_ns - self.driver.now_ns
        if behind_ns > 0:
            self._handle(self.driver.advance_and_drain(behind_ns / 1e6))

    async def _follow_virtual_clock(self) -> None:
        """Emulated time follows trio time while this HAL has work in flight.

        Steps of 1 ms while events come; while none do (a long slice, a hung
        channel) the step doubles up to 16 ms, so a long quiet job costs little.
        Event *times* are the driver's, exact whatever the step; only when the HAL
        notices them (and a caller's execute returns) can lag by one step.
        """
        self._clock_origin = (trio.current_time(), self.driver.now_ns)
        tick = _FOLLOW_TICK_S
        while not self.driver.closed:
            if not self.in_flight:
                self._work_submitted = trio.Event()
                await self._work_submitted.wait()
                self._work_submitted = trio.Event()
                tick = _FOLLOW_TICK_S
            seen = self.stats.read
            with trio.move_on_after(tick):
                await self._work_submitted.wait()  # a new job: step finely again
            if self._work_submitted.is_set():
                self._work_submitted = trio.Event()
                tick = _FOLLOW_TICK_S
            self.sync_clock()
            tick = _FOLLOW_TICK_S if self.stats.read != seen else min(tick * 2, _FOLLOW_MAX_TICK_S)

    async def _watchdog(self, timeout_ms: float) -> None:
        """drm_sched's TDR, in spirit: a channel that makes no progress gets reset.

        Every quarter of the timeout, each work this HAL submitted that has had no
        event for ``timeout_ms`` of emulated time is looked at: every *hung* channel of
        its device (and of the parts of a heterogeneous one) is reset, so its stuck
        work ends FAILED and the caller gets GENERAL_FAILURE instead of waiting
        forever.  A channel that is merely busy with a long job is not hung (the
        driver refuses to reset it), so a long job is never killed.
        """
        timeout_ns = round(timeout_ms * 1e6)
        while not self.driver.closed:
            await trio.sleep(timeout_ms / 4000)
            if self.driver.closed:
                return
            now = self.driver.now_ns
            for work_id, timing in list(self.in_flight.items()):
                if now - timing.last_ns < timeout_ns or timing.device_number < 0:
                    continue
                timing.last_ns = now  # look again only after another full timeout
                self._reset_hung(timing.device_number, work_id, timeout_ms)
            self.poll()

    def _reset_hung(self, number: int, work_id: int, timeout_ms: float) -> None:
        try:
            device = self.driver.device(number)
        except NpuError:
            return
        for dev_number in (number, *device.parts):
            try:
                channels = self.driver.device(dev_number).channels
            except NpuError:
                continue
            for channel in range(channels):
                try:
                    self.driver.reset_channel(dev_number, channel)
                except NpuError:
                    continue  # not hung: busy, idle, or not resettable this way
                log.error(
                    "watchdog: %s channel %d made no progress for %g ms (work %d waiting): channel reset",
                    self.device_names.get(dev_number, dev_number),
                    channel,
                    timeout_ms,
                    work_id,
                )

    # ---- prepared models by client -------------------------------------------------

    def track_client(self, pid: int, prepared: Any) -> None:
        models = self.by_pid.get(pid)
        if models is None:
            models = self.by_pid[pid] = set()
            self.nursery.start_soon(self._reap, pid)
        models.add(prepared)
        self.prepared.add(prepared)

    def untrack(self, prepared: Any) -> None:
        self.prepared.discard(prepared)
        models = self.by_pid.get(prepared.owner_pid)
        if models is not None:
            models.discard(prepared)

    async def _reap(self, pid: int) -> None:
        await self.runtime.network.wait_exit(pid)
        models = self.by_pid.pop(pid, set())
        for prepared in list(models):
            prepared.free(f"client pid {pid} died")
        if models:
            log.info("client pid %d died: freed %d prepared model(s)", pid, len(models))

    def revoke_uid(self, uid: int) -> int:
        """Free every prepared model of ``uid`` (its app died); returns how many."""
        return self._revoke(uid, lambda p: True, f"models of uid {uid} were revoked")

    def revoke_request(self, uid: int, request_id: int, keep: Any) -> int:
        """``request_id``'s unload deadline passed: free ``uid``'s models not filed under ``keep``.

        That is the request's own models, and those filed under no request (or one the
        framework does not vouch for): only a model of another live request survives.
        """
        keep = frozenset(keep)
        return self._revoke(
            uid, lambda p: p.load_request not in keep, f"request {request_id} of uid {uid} was revoked"
        )

    def _revoke(self, uid: int, chosen: Any, why: str) -> int:
        count = 0
        for prepared in list(self.prepared):
            if prepared.owner_uid == uid and chosen(prepared):
                prepared.free(why, revoked=True)
                count += 1
        # The debouncer keeps the uid's state: its cancelled work still ends, and the
        # framework must hear that end like any other.
        return count

    # ---- dump -------------------------------------------------------------------------

    def dump(self) -> str:
        lines = ["HAL android.hardware.npu (npuemu)"]
        cb = "set" if self.callback is not None else "none"
        sent = ", ".join(f"{k} {v}" for k, v in sorted(self.stats.sent.items())) or "none"
        lines.append(f"  scheduling callback: {cb} (deaths {self.stats.callback_deaths})")
        lines.append(f"  events sent:         {sent}")
        lines.append(
            f"  events dropped:      {self.stats.dropped_no_callback} (no callback), "
            f"{self.stats.dropped_queue_full} (queue full)"
        )
        lines.append(
            f"  debounce:            {self.stats.read} work events read, {self.stats.emitted} let through, "
            f"{self.stats.read - self.stats.emitted} suppressed or held"
        )
        lines.append(f"  work in flight:      {len(self.in_flight)}; next event id {self._next_event_id}")
        lines.append(f"  devices:             {', '.join(self.device_names[n] for n in sorted(self.device_names))}")
        lines.append(f"  listeners:           {len(self.listeners)}")
        lines.append(f"  prepared models:     {len(self.prepared)}")
        lines.append(
            f"  compilation cache:   {self.stats.prepared} full prepare(s) ({self.stats.cache_written} cached), "
            f"{self.stats.prepared_from_cache} from cache, {self.stats.cache_refused} cache(s) refused"
        )
        by_owner: dict[tuple[int, int], list[Any]] = collections.defaultdict(list)
        for p in self.prepared:
            by_owner[(p.owner_uid, p.owner_pid)].append(p)
        for (uid, pid), models in sorted(by_owner.items()):
            sizes = sum(p.handle.emulated_size_bytes for p in models)
            names = ", ".join(sorted({p.device_name for p in models}))
            requests = sorted({p.load_request for p in models if p.load_request is not None})
            untagged = sum(p.load_request is None for p in models)
            filed = [f"request{'s' if len(requests) > 1 else ''} {', '.join(map(str, requests))}"] if requests else []
            filed += [f"{untagged} for no request"] if untagged else []
            preferences = ", ".join(sorted({p.preference.name for p in models}))
            lines.append(
                f"    uid {uid:<6} pid {pid:<7} {len(models)} model(s), {_size(sizes)} on {names} ({'; '.join(filed)}), "
                f"preference {preferences}"
            )
        lines.append("")
        try:
            lines.append(self.driver.dump().rstrip("\n"))
        except NpuError as exc:
            lines.append(f"driver: {exc}")
        return "\n".join(lines) + "\n"


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"
