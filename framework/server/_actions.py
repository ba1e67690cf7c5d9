"""What the arbiter asks the ``npu`` service to do: plain, frozen records.

The arbiter never calls anybody. Each of its inputs returns a list of these, in the
order they should be carried out; the service turns each into one binder call (or a
log line) and nothing else, so every decision can be tested without a process.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CanLoad:
    """Call ``onCanLoadModel(request, status, listener)`` on the app's callback.

    ``status`` is CAN_LOAD_NOW, WAIT_FOR_UNLOAD or NOT_PRIORITIZED. A request may be
    told several times (WAIT_FOR_UNLOAD, then CAN_LOAD_NOW), never the same status twice
    in a row, and CAN_LOAD_NOW at most once.
    """

    uid: int
    request_id: int
    status: int


@dataclass(frozen=True, slots=True)
class RequestUnload:
    """Call ``onRequestUnloadModel(request, reason)``; the app should unload and notify.

    ``for_uid`` is the uid whose request the freed budget is meant for (None when the
    cause is heat or turn taking rather than one waiting request). ``deadline`` is the
    service-clock time after which the model is revoked.
    """

    uid: int
    request_id: int
    reason: int
    deadline: float
    for_uid: int | None = None


@dataclass(frozen=True, slots=True)
class RequestComplete:
    """Call ``onModelLoadRequestComplete(request, status)``: the request's last word.

    ``status`` is CANCELLED or COMPLETE. ``for_uid`` is set when the request was
    cancelled to make room for another uid's request (rule 4).
    """

    uid: int
    request_id: int
    status: int
    for_uid: int | None = None


@dataclass(frozen=True, slots=True)
class Revoke:
    """Free this request's models in the HAL: the app ignored its unload request."""

    uid: int
    request_id: int


@dataclass(frozen=True, slots=True)
class Log:
    """A logcat line for the service's log (``level`` is one of V D I W E)."""

    level: str
    message: str


Action = CanLoad | RequestUnload | RequestComplete | Revoke | Log
