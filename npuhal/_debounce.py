"""The debounce of ISchedulingCallback events, sans-IO.

``ISchedulingCallback.DEBOUNCE_DURATION_MS`` (50 ms) exists so that a model run in a
tight loop does not flood the framework with requested/started/ended triples. The rules,
as the AIDL documents them and AOSP's reference HAL (Cuttlefish's) implements them:

- ``onWorkRequested`` is suppressed when the uid already has work in flight, or finished
  work less than the debounce window ago (its ended event is still pending).
- ``onWorkStarted`` (INITIAL or RESUMED) is suppressed exactly when the work's
  ``onWorkRequested`` was; so is an ``onWorkEnded(PAUSED)``, which is not a final end.
- A final ``onWorkEnded`` (COMPLETED, CANCELLED_USER, CANCELLED_SYSTEM, FAILED) is held
  per uid, the latest replacing any earlier one, and sent once the uid has had no work in
  flight and made no new request for the whole window.

So a burst of back-to-back inferences from one uid reaches the framework as one
requested, one started and one ended event, the last about 50 ms after the burst ends.

The class knows nothing of binder or trio: it takes events with the current time and
returns what to send now; ``next_due()`` tells the caller when to call ``flush()``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Hashable

from interfaces.android.hardware.npu import ISchedulingCallback, WorkInfo

#: ``ISchedulingCallback.DEBOUNCE_DURATION_MS``, in seconds.
DEBOUNCE_DURATION_S = ISchedulingCallback.DEBOUNCE_DURATION_MS / 1000


class Kind(enum.Enum):
    REQUESTED = "onWorkRequested"
    STARTED = "onWorkStarted"
    ENDED = "onWorkEnded"


@dataclass(frozen=True, slots=True)
class Emit:
    """One callback to make: ``kind.value`` is the ISchedulingCallback method name,
    ``info`` its WorkInfo and ``reason`` its StartReason or EndReason (None for a request).

    Not the AIDL parcelable ``npuemu.hal.WorkEvent``, though it has the same three fields:
    a WorkEvent records what the driver did, every event undebounced, with the driver's
    work id, time, channel and device that the callback never carries; an Emit is what
    the debounce decided to tell the framework, after suppression and holding. Making
    this a WorkEvent would fill those fields with values nobody reads and let one type
    mean both "happened" and "to be sent".
    """

    kind: Kind
    info: WorkInfo
    reason: int | None = None


@dataclass(slots=True)
class _Uid:
    in_flight: set[Hashable] = field(default_factory=set)
    suppressed: set[Hashable] = field(default_factory=set)
    pending: Emit | None = None
    due: float = 0.0


class Debouncer:
    """Applies the DEBOUNCE_DURATION_MS rules to one callback's stream of work events.

    ``work`` identifies a job across its events (the driver's work id); ``paused_reason``
    is the EndReason value that is not a final end (PAUSED).
    """

    def __init__(self, *, paused_reason: int, window: float = DEBOUNCE_DURATION_S) -> None:
        self._paused = paused_reason
        self._window = window
        self._uids: dict[int, _Uid] = {}

    def requested(self, work: Hashable, uid: int, info: Any, now: float) -> list[Emit]:
        state = self._uids.setdefault(uid, _Uid())
        busy = bool(state.in_flight) or state.pending is not None
        state.in_flight.add(work)
        if busy:
            state.suppressed.add(work)
            return []
        return [Emit(Kind.REQUESTED, info)]

    def started(self, work: Hashable, uid: int, info: Any, reason: int, now: float) -> list[Emit]:
        state = self._uids.get(uid)
        if state is None or work in state.suppressed:
            return []
        return [Emit(Kind.STARTED, info, reason)]

    def ended(self, work: Hashable, uid: int, info: Any, reason: int, now: float) -> list[Emit]:
        state = self._uids.get(uid)
        if state is None:
            return []
        if reason == self._paused:
            return [] if work in state.suppressed else [Emit(Kind.ENDED, info, reason)]
        state.in_flight.discard(work)
        state.suppressed.discard(work)
        state.pending = Emit(Kind.ENDED, info, reason)
        state.due = now + self._window
        return self.flush(now)

    def flush(self, now: float) -> list[Emit]:
        """The held ended events whose window has passed, oldest first."""
        ready = [
            (state.due, uid)
            for uid, state in self._uids.items()
            if state.pending is not None and not state.in_flight and state.due <= now
        ]
        out = []
        for _, uid in sorted(ready):
            state = self._uids.pop(uid)
            out.append(state.pending)
        return out

    def next_due(self) -> float | None:
        """When ``flush`` next has something to send (None: nothing is held)."""
        dues = [s.due for s in self._uids.values() if s.pending is not None and not s.in_flight]
        return min(dues, default=None)

    def forget_uid(self, uid: int) -> None:
        """Drops everything held for ``uid`` (its process died, its models were revoked)."""
        self._uids.pop(uid, None)
