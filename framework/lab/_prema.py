"""PREMA (Choi and Rhu, HPCA 2020) and the paper's baselines, as Python driver policies.

PREMA schedules inference requests on one preemptible NPU:

- **Tokens.**  Each request holds tokens.  It arrives with its priority class's
  weight (low 1, medium 3, high 9) and, while it waits, gains its weight times
  its slowdown since it last ran: ``weight x waited / isolated time``.  A
  running request gains nothing.  Here the class is the workload's job
  priority: 0..333 high, 334..666 medium, 667..1000 low (``classes``).
- **Candidates.**  The threshold is the largest class weight not above the
  largest token any request holds; every request whose tokens reach it is a
  candidate (the running one included).
- **Selection.**  Among the candidates, the shortest estimated job: the
  job-length predictor's estimate of what is left of it (ties: the earlier
  arrival).  The predictor sums the model's per-operation costs, as the cost
  model charges them on the device (the lab profiles each network once alone:
  ``TaskInfo.estimate_ns``), which is what the paper's layer-wise model does
  for its systolic NPU.
- **Mechanism.**  When the selected request is not the running one, how the
  running one leaves depends on its progress: ``DRAIN`` if it is nearly done
  (progress >= ``drain_above``), ``KILL`` if it has barely started (progress
  < ``kill_below``: little work is lost and no context is saved), else
  ``CHECKPOINT``.  The paper chooses by the running job's progress in the same
  three ways; the two thresholds are this module's (parameters).

Baselines, as the paper has them (besides the lab's C policies: NP-FCFS is
``fcfs``, P-HPF is ``preempt-ckpt`` / ``preempt-kill``, NP-HPF ``priority``):
``PreemptiveSjf`` (P-SJF: shortest estimated remaining job first, preemptive,
checkpoint), ``TokenOnly`` (TOKEN: PREMA's tokens and candidates, but the
candidate with the most tokens, not the shortest, and always checkpoint), and
PREMA with a fixed mechanism (``mechanism=``) to isolate the dynamic choice.
``Fcfs`` is first-come first-served in Python, the same schedule as the C
driver's ``fcfs`` (a check of the lab's mechanism, and the simplest example).
"""

from __future__ import annotations

from collections.abc import Sequence

from ._policy import DriverPolicy, Ended, Event, JobView, Mechanism, TaskInfo, View

__all__ = [
    "PREMA_WEIGHTS",
    "priority_weight",
    "Tokens",
    "threshold",
    "candidates",
    "shortest",
    "choose_mechanism",
    "Fcfs",
    "PreemptiveSjf",
    "TokenOnly",
    "Prema",
]

#: The paper's token weights per priority class.
PREMA_WEIGHTS = {"low": 1.0, "medium": 3.0, "high": 9.0}


def priority_weight(priority: int, classes: tuple[int, int] = (333, 666)) -> float:
    """The PREMA weight of a job priority (0 most urgent): high, medium or low class."""
    if priority <= classes[0]:
        return PREMA_WEIGHTS["high"]
    if priority <= classes[1]:
        return PREMA_WEIGHTS["medium"]
    return PREMA_WEIGHTS["low"]


class Tokens:
    """Each request's tokens, kept up to date at every call (a pure function of the calls' times)."""

    def __init__(self, classes: tuple[int, int] = (333, 666)) -> None:
        self.classes = classes
        self.tokens: dict[int, float] = {}
        self.since: dict[int, int] = {}

    def weight(self, job: JobView) -> float:
        return priority_weight(job.task.priority, self.classes)

    def update(self, now_ns: int, waiting: Sequence[JobView], running: Sequence[JobView]) -> None:
        """Credit the waiting requests for the time since the last update; the running ones gain nothing."""
        for job in waiting:
            if job.id not in self.tokens:
                self.tokens[job.id] = self.weight(job)
                self.since[job.id] = job.arrival_ns
            waited = now_ns - self.since[job.id]
            if waited > 0:
                self.tokens[job.id] += self.weight(job) * waited / max(1, job.task.estimate_ns)
            self.since[job.id] = now_ns
        for job in running:
            self.tokens.setdefault(job.id, self.weight(job))
            self.since[job.id] = now_ns

    def __getitem__(self, job: JobView) -> float:
        return self.tokens[job.id]

    def forget(self, job_id: int) -> None:
        self.tokens.pop(job_id, None)
        self.since.pop(job_id, None)


def threshold(max_token: float, weights: Sequence[float] = tuple(PREMA_WEIGHTS.values())) -> float:
    """The largest class weight not above ``max_token`` (the smallest weight if none is)."""
    below = [w for w in weights if w <= max_token]
    return max(below) if below else min(weights)


def candidates(jobs: Sequence[JobView], tokens: Tokens) -> list[JobView]:
    """The requests whose tokens reach the threshold of the largest token."""
    if not jobs:
        return []
    limit = threshold(max(tokens[j] for j in jobs))
    return [j for j in jobs if tokens[j] >= limit]


def shortest(jobs: Sequence[JobView]) -> JobView | None:
    """The shortest estimated job (what is left of it); ties: the earlier arrival, then the lower id."""
    return min(jobs, key=lambda j: (j.remaining_ns, j.arrival_ns, j.id), default=None)


def choose_mechanism(running: JobView, drain_above: float = 0.9, kill_below: float = 0.1) -> Mechanism:
    """PREMA's dynamic choice by the running request's progress (see the module)."""
    if running.progress >= drain_above:
        return Mechanism.DRAIN
    if running.progress < kill_below:
        return Mechanism.KILL
    return Mechanism.CHECKPOINT


class Fcfs(DriverPolicy):
    """Non-preemptive first come, first served: the oldest waiting request, the running ones left alone."""

    name = "py-fcfs"
    description = "first come, first served in Python (the C fcfs's schedule)"

    def select(self, view: View) -> JobView | None:
        if view.free_channels == 0 and view.running:
            return view.running[0]
        return min(view.ready, key=lambda j: (j.arrival_ns, j.id), default=None)


class PreemptiveSjf(DriverPolicy):
    """P-SJF: the shortest estimated remaining request first, preempting with a checkpoint."""

    name = "p-sjf"
    description = "preemptive shortest estimated job first (checkpoint), priorities ignored"

    def select(self, view: View) -> JobView | None:
        pool = list(view.ready) + ([] if view.free_channels else list(view.running))
        return shortest(pool)

    def preempt(self, view: View, chosen: JobView) -> Mechanism:
        return Mechanism.CHECKPOINT


class Prema(DriverPolicy):
    """PREMA: tokens, candidates by threshold, shortest estimated job, dynamic mechanism.

    ``mechanism``: a fixed one instead of the dynamic choice (the paper's static
    variants); ``drain_above``/``kill_below``: the dynamic choice's thresholds.
    """

    name = "prema"
    description = "PREMA: tokens by priority x slowdown, candidates by threshold, shortest estimated job"

    def __init__(self, mechanism: Mechanism | None = None, *, drain_above: float = 0.9, kill_below: float = 0.1,
                 classes: tuple[int, int] = (333, 666)) -> None:
        self.mechanism = mechanism
        self.drain_above = drain_above
        self.kill_below = kill_below
        self.tokens = Tokens(classes)
        if mechanism is not None:
            self.name = f"prema-{mechanism.value}"
            self.description = f"PREMA's selection, always {mechanism.value}"

    def start(self, tasks: Sequence[TaskInfo], channels: int) -> None:
        self.tokens = Tokens(self.tokens.classes)

    def on_event(self, event: Event, view: View) -> None:
        if isinstance(event, Ended):
            self.tokens.forget(event.job.id)

    def pool(self, view: View) -> list[JobView]:
        self.tokens.update(view.now_ns, view.ready, view.running)
        return list(view.ready) + ([] if view.free_channels else list(view.running))

    def pick(self, jobs: list[JobView]) -> JobView | None:
        return shortest(candidates(jobs, self.tokens))

    def select(self, view: View) -> JobView | None:
        return self.pick(self.pool(view))

    def preempt(self, view: View, chosen: JobView) -> tuple[JobView, Mechanism]:
        # The victim: the running request with the most left (on one channel, the running one).
        victim = max(view.running, key=lambda j: (j.remaining_ns, j.id))
        if self.mechanism is not None:
            return victim, self.mechanism
        return victim, choose_mechanism(victim, self.drain_above, self.kill_below)


class TokenOnly(Prema):
    """TOKEN: PREMA's tokens and candidates, the candidate with the most tokens, always checkpoint."""

    name = "token"
    description = "PREMA's tokens and candidates without SJF: the most tokens first (checkpoint)"

    def __init__(self) -> None:
        super().__init__(Mechanism.CHECKPOINT)
        self.name = TokenOnly.name
        self.description = TokenOnly.description

    def pick(self, jobs: list[JobView]) -> JobView | None:
        return min(candidates(jobs, self.tokens), key=lambda j: (-self.tokens[j], j.arrival_ns, j.id), default=None)
