"""Driver-level scheduling policies written in Python: the interface, and loading one from a file.

In the lab's driver mode the lab drives the driver from Python on its virtual
clock, so a policy written in Python can hold the device's queue itself: the
lab keeps every request that has arrived and asks the policy, at each event,
which request the device should run and, when that displaces a running one,
how.  The C driver only ever holds what the policy put on the device (plus the
requests it paused for it).  Nothing in C calls Python: the lab steps the
clock from one event to the next (``Driver.next_event_ns``) and acts between
steps.

Events in (``DriverPolicy.on_event``, optional): ``Arrived`` (a request came),
``Started`` (it took a channel, first or again), ``Preempted`` (it left a
channel before its end: checkpointed, or killed), ``Ended`` (completed, or
failed).  Each carries the request's ``JobView`` and the time.

Decisions out, at every event (``DriverPolicy.select``): which request should
hold a channel now, given a ``View`` of the device (``running``, ``ready``,
``free_channels``, ``now_ns``, the ``trigger`` event):

- with a free channel, a ``ready`` request starts at once; ``None`` leaves the
  channel idle (the lab asks again at the next event);
- with every channel busy, returning a running request (or ``None``) keeps it;
  returning a ready one displaces a running one, and the lab then asks
  ``DriverPolicy.preempt(view, chosen)`` for the victim and the mechanism:
  ``Mechanism.CHECKPOINT`` (the victim saves its context at its next slice
  boundary and later resumes where it stopped), ``Mechanism.KILL`` (it is
  cancelled at the end of its slice and later restarts from its first slice),
  ``Mechanism.DRAIN`` (it runs to its end; the chosen one goes next);
- ``view.planning`` is True when the lab asks ahead: "if a channel freed now,
  which request would take it?".  The answer is put on the device behind the
  running ones, so that a channel that frees between two events goes to it
  without waiting for the lab.

A request's ``JobView`` says its task (priority, the predictor's estimate of
its channel time), its arrival, how much of it has run (``executed_ns``: kept
across a checkpoint, lost to a kill), and when it last ran.  Policies keep
their own state between calls (PREMA's tokens); one instance serves one run.

The hardware resumes a checkpointed request by its priority key, not by a
call: the lab gives each request it puts on the device a key (a later
preemptor a lower one), so a channel that frees resumes the most recently
paused request unless the policy's planned successor is there first.  A policy
that wants an older paused request back is told what the hardware did
(``Started``) and may displace it again; the run's log counts such cases.

Errors: anything a policy raises, and any decision that is not one of the
choices it was given, is a ``PolicyError`` that names the policy, the call,
the time and the event that triggered it.  The lab reports it in that
policy's row and runs the other policies as usual.

A policy in a file: ``load_policy_file("mine.py:MyDriverPolicy")`` (the CLI's
``--policy-file``) imports the file under a private module name and returns a
factory of fresh instances.
"""

from __future__ import annotations

import enum
import importlib.util
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import LabError, LabRunError

__all__ = [
    "Mechanism",
    "TaskInfo",
    "JobView",
    "View",
    "Arrived",
    "Started",
    "Preempted",
    "Ended",
    "Event",
    "DriverPolicy",
    "PolicyError",
    "PolicyFile",
    "load_policy_file",
]


class PolicyError(LabError, RuntimeError):
    """A Python driver policy raised, or decided something it was not offered.

    The message names the policy, the call, the emulated time and the event
    that triggered the call.
    """


class Mechanism(enum.Enum):
    """How a running request leaves its channel for another (PREMA's three)."""

    CHECKPOINT = "checkpoint"
    KILL = "kill"
    DRAIN = "drain"


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """One task (stream of requests) of the workload, as the policy sees it.

    ``priority`` is the workload's job priority (0 most urgent .. 1000);
    ``estimate_ns`` the job-length predictor's estimate of one request's time on
    a channel; ``operations`` how many operations its model has.
    """

    index: int
    name: str
    priority: int
    sla: bool
    estimate_ns: int
    operations: int


@dataclass(frozen=True, slots=True)
class JobView:
    """One request, as it stands when the policy is called.

    ``state``: ``"waiting"`` (never ran, or killed), ``"paused"`` (checkpointed
    on the device, resumes where it stopped), ``"running"`` (on a channel, or
    taking one).  ``executed_ns``: channel time of its current attempt (kept by
    a checkpoint, zeroed by a kill); ``last_ran_ns``: when it last left a
    channel (None if it never ran).
    """

    id: int
    task: TaskInfo
    arrival_ns: int
    state: str
    executed_ns: int
    last_ran_ns: int | None
    preemptions: int
    restarts: int

    @property
    def remaining_ns(self) -> int:
        """The predictor's estimate of what is left of it (never below 0)."""
        return max(0, self.task.estimate_ns - self.executed_ns)

    @property
    def progress(self) -> float:
        """The share of its estimated length already run, in [0, 1]."""
        est = self.task.estimate_ns
        return 1.0 if est <= 0 else min(1.0, self.executed_ns / est)

    def describe(self) -> str:
        return f"request {self.id} (task {self.task.name!r})"


@dataclass(frozen=True, slots=True)
class Arrived:
    job: JobView
    time_ns: int

    def describe(self) -> str:
        return f"the arrival of {self.job.describe()} at {self.time_ns / 1e6:.3f} ms"


@dataclass(frozen=True, slots=True)
class Started:
    job: JobView
    time_ns: int
    resumed: bool

    def describe(self) -> str:
        how = "resumed" if self.resumed else "started"
        return f"{self.job.describe()} {how} at {self.time_ns / 1e6:.3f} ms"


@dataclass(frozen=True, slots=True)
class Preempted:
    job: JobView
    time_ns: int
    mechanism: Mechanism

    def describe(self) -> str:
        return f"{self.job.describe()} preempted ({self.mechanism.value}) at {self.time_ns / 1e6:.3f} ms"


@dataclass(frozen=True, slots=True)
class Ended:
    job: JobView
    time_ns: int
    reason: str  # an EndReason name: COMPLETED, FAILED, ...

    def describe(self) -> str:
        return f"{self.job.describe()} ended {self.reason} at {self.time_ns / 1e6:.3f} ms"


Event = Arrived | Started | Preempted | Ended


@dataclass(frozen=True, slots=True)
class View:
    """The device when the policy is called.

    ``running``: the requests on a channel (or taking one); ``ready``: the
    requests the policy may start (waiting, or paused on the device);
    ``free_channels``: channels with nothing to run; ``planning``: the lab asks
    which request would take a channel if one freed now (see the module);
    ``trigger``: the event this call answers.
    """

    now_ns: int
    channels: int
    running: tuple[JobView, ...]
    ready: tuple[JobView, ...]
    free_channels: int
    planning: bool
    trigger: Event


class DriverPolicy:
    """Base class of a Python driver-level scheduling policy (see the module for the protocol).

    Subclasses set ``name`` and ``description`` and implement ``select``;
    ``preempt`` defaults to draining (a non-preemptive policy), ``start`` and
    ``on_event`` to nothing.
    """

    name: str = "python"
    description: str = "a Python driver policy"

    def start(self, tasks: Sequence[TaskInfo], channels: int) -> None:
        """A run begins: the workload's tasks and the device's channel count."""

    def on_event(self, event: Event, view: View) -> None:
        """Something happened on the device (called before ``select`` for the same event)."""

    def select(self, view: View) -> JobView | None:
        """The request that should hold a channel now (see the module), or None."""
        raise NotImplementedError

    def preempt(self, view: View, chosen: JobView) -> Mechanism | tuple[JobView, Mechanism]:
        """How ``chosen`` displaces a running request: a mechanism (the victim is the
        running request that started last), or (victim, mechanism)."""
        return Mechanism.DRAIN


def policy_name(policy: DriverPolicy) -> str:
    return str(getattr(policy, "name", None) or type(policy).__name__)


class PolicyFile:
    """A factory of fresh instances of the class a file defines (``"mine.py:MyPolicy"``).

    It pickles as its spec, so that a Dask worker loads the file itself (at the same
    path: a remote worker needs the file there too).
    """

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._cls: type | None = None

    def __reduce__(self) -> Any:
        return (type(self), (self.spec,))

    def __call__(self) -> DriverPolicy:
        if self._cls is None:
            self._cls = _load_class(self.spec)
        return self._cls()


def load_policy_file(spec: str) -> tuple[str, str, Callable[[], DriverPolicy]]:
    """``"path/to/file.py:ClassName"`` -> (name, description, factory of fresh instances).

    The class needs a ``select`` method (subclassing ``DriverPolicy`` is the easy
    way).  A missing file, a file that fails to import, or a missing or unfit
    class is a ``LabRunError`` that says which.
    """
    cls = _load_class(spec)
    path = Path(spec.rpartition(":")[0])
    try:
        probe = cls()
    except Exception as e:
        raise LabRunError(f"{spec}: {cls.__name__}() failed: {type(e).__name__}: {e}") from None
    name = f"py:{policy_name(probe)}"
    description = str(getattr(probe, "description", "") or f"{cls.__name__} from {path.name}")
    factory = PolicyFile(str(path.resolve()) + ":" + cls.__name__)
    factory._cls = cls
    return name, description, factory


def _load_class(spec: str) -> type:
    path_text, sep, cls_name = spec.rpartition(":")
    if not sep or not path_text or not cls_name.isidentifier():
        raise LabRunError(f"--policy-file wants FILE.py:ClassName, got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise LabRunError(f"policy file {path_text!r}: no such file")
    module_name = f"_npuemu_lab_policy_{abs(hash(str(path.resolve())))}"
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise LabRunError(f"policy file {path_text!r}: not a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(module_name, None)
        raise LabRunError(f"policy file {path_text!r} failed to import: {type(e).__name__}: {e}") from None
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise LabRunError(f"policy file {path_text!r} has no {cls_name!r}")
    if not inspect.isclass(cls) or not callable(getattr(cls, "select", None)):
        raise LabRunError(f"{spec}: {cls_name} is not a class with a select(view) method")
    return cls


def call(policy: DriverPolicy, method: str, view: View | None, trigger: Event | None, now_ns: int, *args: Any) -> Any:
    """Call a policy method; anything it raises becomes a ``PolicyError`` with the event."""
    try:
        return getattr(policy, method)(*args)
    except Exception as e:
        on = trigger.describe() if trigger is not None else "the start of the run"
        raise PolicyError(f"policy {policy_name(policy)}: {method}() raised {type(e).__name__}: {e} "
                          f"at {now_ns / 1e6:.3f} ms, on {on}") from e


def refuse(policy: DriverPolicy, method: str, trigger: Event, now_ns: int, what: str) -> PolicyError:
    return PolicyError(f"policy {policy_name(policy)}: {method}() {what} at {now_ns / 1e6:.3f} ms, "
                       f"on {trigger.describe()}")
