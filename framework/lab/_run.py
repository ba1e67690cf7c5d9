"""Running a workload under a policy on the emulated NPU, on the virtual clock.

A *policy* is how the device shares itself: a scheduling mode (a free channel
takes the lowest effective priority, or the oldest request) and a preemption
mode (none; checkpoint at a slice boundary; kill and restart), or whatever a
driver ``.so`` does by itself.  Each run opens a fresh driver on the virtual
clock, loads every task's model, submits each request at its arrival time
(``Driver.advance`` to it, then ``submit``), runs until every request has
ended, and reads the work events back as time moves (a window at a time, so
that any backlog, at any load, is read in full): when each request was
queued, first started, paused and resumed, and ended.  No thread and no wall clock is involved, so a run is a
pure function of the workload, the seed and the driver.

Isolated times, the denominators of every normalized metric, are measured
the same way: each task's request alone on a fresh, idle device of the same
driver and modes.  Every completed request's output is compared, bit for
bit, with the isolated run's: preemption must not change results.

Model sizes.  A task says how long one request should run alone
(``work_ms``); the lab builds a small MLP (``layers`` x ``width``, which the
kernels really compute) and finds the hardware ``cost_scale`` that stretches
it to that time, by measuring it at two scales on the reference driver (the
cost model is affine in the scale: a fixed per-slice overhead plus scaled
FLOPs or bytes).  The same scales are used for every policy and driver, so a
faster driver shows as shorter isolated times, not as a different workload.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import npuhal
from interfaces.android.hardware.neuralnetworks import Model
from npuhal import (
    EndReason,
    FuseCode,
    ModelBuilder,
    OperationType,
    PreemptionMode,
    SchedulingConfig,
    SchedulingMode,
    WorkEnded,
    WorkStarted,
)

from . import _policy as P
from . import _prema
from framework.nn import NeuralNetworksError, toAidlModel, tflite

from ._errors import LabRunError
from ._workload import Arrival, Task, Workload

__all__ = [
    "Policy",
    "builtin_policies",
    "driver_policy",
    "python_policy",
    "python_policies",
    "policy_file",
    "Job",
    "RunResult",
    "Calibration",
    "calibrate",
    "measure_isolated",
    "run_policy",
]

MIB = 1 << 20
# Far above anything the die reaches: throttling off unless a workload asks
# for it (the hardware wants six increasing thresholds above ambient).
_NO_THROTTLE_C = (10_000.0, 10_001.0, 10_002.0, 10_003.0, 10_004.0, 10_005.0)
_CALIBRATION_SCALES = (1.0, 1001.0)


@dataclass(frozen=True, slots=True)
class Policy:
    """How the device is shared in one run.

    ``scheduling`` / ``preemption`` override the driver's own modes (``None``:
    the driver's choice); ``driver_path`` is a driver ``.so`` (``None``: the
    reference driver built into npuhal).
    """

    name: str
    description: str
    scheduling: SchedulingMode | None = None
    preemption: PreemptionMode | None = None
    driver_path: str | None = None
    # A Python driver policy (``framework.lab._policy``): a factory of fresh
    # instances.  The lab then holds the queue and the driver runs what it is given.
    python: Callable[[], P.DriverPolicy] | None = field(default=None, compare=False)

    @property
    def preemptive(self) -> bool | None:
        """True/False when the lab fixes the mode; None when it is the driver's own."""
        if self.python is not None:
            return None
        return None if self.preemption is None else self.preemption is not PreemptionMode.NONE

    def open_driver(self, workload: Workload) -> npuhal.Driver:
        try:
            return npuhal.Driver.open(
                self.driver_path,
                clock="virtual",
                preemption=self.preemption,
                scheduling=self.scheduling,
                slices_per_operation=workload.slices_per_operation,
                thermal_thresholds_c=None if workload.thermal else _NO_THROTTLE_C,
            )
        except npuhal.NpuError as e:
            where = self.driver_path or "the reference driver"
            raise LabRunError(f"policy {self.name}: cannot open {where}: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "scheduling": None if self.scheduling is None else self.scheduling.name,
            "preemption": None if self.preemption is None else self.preemption.name,
            "driver": self.driver_path,
            "python": self.python is not None,
        }


def builtin_policies() -> tuple[Policy, ...]:
    """The policies every comparison runs, in table order."""
    S, P = SchedulingMode, PreemptionMode
    return (
        Policy("fcfs", "non-preemptive first come, first served", S.FCFS, P.NONE),
        Policy("priority", "non-preemptive highest priority first", S.PRIORITY, P.NONE),
        Policy("preempt-ckpt", "preemptive highest priority first, checkpoint and resume", S.PRIORITY, P.CHECKPOINT),
        Policy("preempt-kill", "preemptive highest priority first, kill and restart", S.PRIORITY, P.KILL_RESTART),
        Policy("reference", "the reference driver's own scheduling", None, None),
    )


def python_policy(name: str, description: str, factory: Callable[[], P.DriverPolicy],
                  driver_path: str | None = None) -> Policy:
    """A Python driver policy (``framework.lab._policy``) as a lab policy.

    The driver runs with priority scheduling and checkpoint preemption, the
    means the lab uses to carry out the policy's decisions (see ``_policy``).
    """
    return Policy(name, description, SchedulingMode.PRIORITY, PreemptionMode.CHECKPOINT, driver_path, factory)


def python_policies() -> tuple[Policy, ...]:
    """PREMA and the paper's baselines that the C driver has no mode for, as Python policies, in table order."""
    M = P.Mechanism
    # Factories that pickle (classes and partials of them), so that Dask can ship the policies.
    made = [_prema.PreemptiveSjf, _prema.TokenOnly, _prema.Prema, functools.partial(_prema.Prema, M.CHECKPOINT),
            functools.partial(_prema.Prema, M.KILL), functools.partial(_prema.Prema, M.DRAIN)]
    out = []
    for factory in made:
        probe = factory()
        out.append(python_policy(probe.name, probe.description, factory))
    return tuple(out)


def policy_file(spec: str) -> Policy:
    """A user's Python driver policy, ``"mine.py:MyDriverPolicy"``."""
    return python_policy(*P.load_policy_file(spec))


def driver_policy(path: str | Path) -> Policy:
    """A policy for a driver ``.so``: its own scheduling and preemption, untouched."""
    path = Path(path)
    if not path.is_file():
        raise LabRunError(f"no driver at {str(path)!r}")
    return Policy(f"driver:{path.stem}", f"the driver {path.name}'s own scheduling", None, None, str(path.resolve()))


def _network(task: Task) -> tuple[Model, np.ndarray]:
    """A task's real network: a MediaPipe model that NNAPI takes whole, and a picture for its input."""
    try:
        net = tflite.loadTfLite(tflite.findModel(task.model))
    except NeuralNetworksError as e:
        raise LabRunError(f"task {task.name!r}: model {task.model!r}: {e}") from None
    if len(net.partitions) != 1 or net.partitions[0].kind != "nnapi" or net.partitions[0].model is None:
        raise LabRunError(f"task {task.name!r}: model {task.model!r} is {len(net.partitions)} partitions, some on the "
                          f"app's CPU: the lab's driver mode runs networks NNAPI takes whole")
    model = toAidlModel(net.partitions[0].model.to_hal())
    inputs = model.main.inputIndexes
    if len(inputs) != 1:
        raise LabRunError(f"task {task.name!r}: model {task.model!r} has {len(inputs)} inputs; the lab feeds one")
    shape = tuple(model.main.operands[inputs[0]].dimensions)
    image = tflite.syntheticImage(shape) if len(shape) == 4 else np.zeros(shape, np.float32)
    return model, np.asarray(image, np.float32)


def _task_model(task: Task, index: int) -> tuple[Model, np.ndarray]:
    if task.model is not None:
        return _network(task)
    rng = np.random.default_rng([index, task.width, task.layers])
    m = ModelBuilder()
    y = m.input((1, task.width))
    for _ in range(task.layers):
        # Weights scaled so activations stay O(1) through the layers.
        w = m.constant(rng.standard_normal((task.width, task.width), dtype=np.float32) / np.float32(math.sqrt(task.width)))
        b = m.constant(rng.standard_normal(task.width, dtype=np.float32) * np.float32(0.1))
        y = m.operation(OperationType.FULLY_CONNECTED, [y, w, b, m.int32(FuseCode.RELU)], (1, task.width))
    m.output(y)
    return m.build(), rng.standard_normal((1, task.width), dtype=np.float32)


def _output_buffers(handle: npuhal.ModelHandle) -> list[np.ndarray]:
    """One buffer of the lab's own per output, read when the request's end is accounted."""
    return [np.empty(shape, dtype) for shape, dtype in zip(handle.output_shapes, handle.output_dtypes)]


def _same(outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> bool:
    """Bit for bit the isolated run's outputs (preemption must not change results)."""
    return len(outputs) == len(reference) and all(np.array_equal(a, b) for a, b in zip(outputs, reference))


@dataclass(frozen=True, slots=True)
class Calibration:
    """The per-task models and the cost scales that give them their ``work_ms``."""

    cost_scales: tuple[float, ...]
    models: tuple[Model, ...] = field(repr=False)
    inputs: tuple[np.ndarray, ...] = field(repr=False)


def _device(driver: npuhal.Driver, workload: Workload, who: str) -> npuhal.Device:
    try:
        return driver.device_by_name(workload.device)
    except npuhal.NpuLookupError:
        names = ", ".join(d.name for d in driver.devices)
        raise LabRunError(f"{workload.source}: {who} has no device {workload.device!r} (it has {names})") from None


def _load(driver: npuhal.Driver, device: npuhal.Device, workload: Workload, cal: Calibration, who: str,
          only: int | None = None) -> list[npuhal.ModelHandle | None]:
    handles: list[npuhal.ModelHandle | None] = []
    for i, task in enumerate(workload.tasks):
        if only is not None and i != only:
            handles.append(None)
            continue
        try:
            handles.append(driver.load_model(
                device, cal.models[i], emulated_size_bytes=int(task.size_mb * MIB), cost_scale=cal.cost_scales[i]
            ))
        except npuhal.NpuCapacityError as e:
            need = sum(t.size_mb for t in workload.tasks)
            raise LabRunError(
                f"{workload.source}: {who}: the tasks' models ({need:g} MiB in all) do not fit {device.name}'s "
                f"{device.weight_memory_bytes // MIB} MiB of weight memory: {e}"
            ) from None
        except npuhal.NpuError as e:
            raise LabRunError(f"{workload.source}: {who}: {device.name} refused task {task.name!r}'s model: {e}") from None
    return handles


def _alone_ns(policy: Policy, workload: Workload, cal: Calibration, index: int) -> tuple[int, int, np.ndarray]:
    """One request of task ``index`` alone on a fresh device: (turnaround, time on the channel, output)."""
    task = workload.tasks[index]
    with policy.open_driver(workload) as driver:
        device = _device(driver, workload, f"policy {policy.name}")
        handle = _load(driver, device, workload, cal, f"policy {policy.name}", only=index)[index]
        work = driver.submit(handle, [cal.inputs[index]], uid=task.uid, job_priority=task.priority)
        driver.run_until_idle()
        times = npuhal.work_times(driver.drain_events(), work)
        if times.end_reason not in (None, EndReason.COMPLETED):
            raise LabRunError(f"policy {policy.name}: task {task.name!r} alone ended {times.end_reason.name}")
        req, start, end = times.requested_ns, times.started_ns, times.ended_ns
        if req is None or start is None or end is None or end <= req:
            raise LabRunError(f"policy {policy.name}: task {task.name!r} alone did not report a full life")
        return end - req, end - start, [o.copy() for o in driver.outputs(work)]


def calibrate(workload: Workload, policy: Policy | None = None) -> Calibration:
    """Find each task's cost scale so that one request alone takes about ``work_ms``.

    Measured under ``policy`` (default: the reference driver, its own modes).
    A ``work_ms`` below what the model costs at the smallest scale is a
    ``LabRunError`` that says the floor.
    """
    policy = policy or Policy("calibration", "the reference driver, alone")
    built = [_task_model(t, i) for i, t in enumerate(workload.tasks)]
    models = tuple(m for m, _ in built)
    inputs = tuple(x for _, x in built)
    scales = []
    for i, task in enumerate(workload.tasks):
        lo, hi = _CALIBRATION_SCALES
        t_lo = _alone_ns(policy, workload, Calibration((lo,) * len(models), models, inputs), i)[0]
        t_hi = _alone_ns(policy, workload, Calibration((hi,) * len(models), models, inputs), i)[0]
        slope = (t_hi - t_lo) / (hi - lo)
        target = task.work_ms * 1e6
        floor = t_lo - slope * (lo - 0.0)
        if slope <= 0 or target <= floor:
            raise LabRunError(
                f"{workload.source}: task {task.name!r}: work_ms {task.work_ms:g} is below what its model costs on "
                f"{workload.device} at any scale ({floor / 1e6:.3f} ms: fewer layers cut the per-slice overhead)"
            )
        scales.append((target - floor) / slope)
    return Calibration(tuple(scales), models, inputs)


def measure_isolated(workload: Workload, cal: Calibration, policy: Policy) -> tuple[list[int], list[int], list[np.ndarray]]:
    """Each task alone under ``policy``: (turnaround ns, channel time ns, output) per task."""
    turn, busy, outs = [], [], []
    for i in range(len(workload.tasks)):
        t, b, o = _alone_ns(policy, workload, cal, i)
        turn.append(t)
        busy.append(b)
        outs.append(o)
    return turn, busy, outs


@dataclass(slots=True)
class Job:
    """One request's life, in emulated ns from the start of the run."""

    task: int
    arrival_ns: int
    work_id: int
    start_ns: int | None = None
    end_ns: int | None = None
    reason: EndReason | None = None
    pauses: int = 0
    busy_ns: int = 0
    correct: bool | None = None
    _segment: int | None = None

    @property
    def turnaround_ns(self) -> int | None:
        if self.reason is not EndReason.COMPLETED or self.end_ns is None:
            return None
        return self.end_ns - self.arrival_ns


@dataclass(slots=True)
class RunResult:
    """What one policy did with one list of arrivals."""

    policy: Policy
    factor: float
    jobs: list[Job]
    channels: int
    saves_ns: int
    makespan_ns: int
    events_dropped: int
    log: list[str] = field(default_factory=list)  # warnings the stack logged during the run
    # Whole stack: how often the npu service's load policy failed, and its latest failures with their events.
    npu_policy_error_count: int = 0
    npu_policy_errors: list[str] = field(default_factory=list)


def run_policy(
    workload: Workload,
    cal: Calibration,
    policy: Policy,
    arrivals: Sequence[Arrival],
    reference_outputs: Sequence[np.ndarray],
    *,
    factor: float = 1.0,
    estimates_ns: Sequence[int] | None = None,
) -> RunResult:
    """Submit every arrival at its time under ``policy``; return every request's life.

    ``reference_outputs`` are the isolated runs' results; each completed request
    is checked against its task's (``Job.correct``).  A Python policy
    (``policy.python``) holds the queue itself (``_HeldQueue``); its job-length
    predictor's estimates are ``estimates_ns`` (default: the calibrated work).
    """
    if policy.python is not None:
        if estimates_ns is None:
            estimates_ns = [round(t.work_ms * 1e6) for t in workload.tasks]
        return _HeldQueue(workload, cal, policy, reference_outputs, factor, estimates_ns).run(arrivals)
    with policy.open_driver(workload) as driver:
        who = f"policy {policy.name}"
        device = _device(driver, workload, who)
        # Each task's uid at the highest app priority, so a request's effective
        # priority is its job priority: the workload's numbers, unchanged.
        driver.set_scheduling_configs([SchedulingConfig(uid=t.uid, appPriority=0, hasDirectAccess=True) for t in workload.tasks])
        handles = _load(driver, device, workload, cal, who)
        jobs: dict[int, Job] = {}
        order: list[Job] = []
        # Each request writes its result into a buffer of the lab's own, read when
        # its end is accounted: no driver record has to outlive the wait.
        pending: dict[int, list[np.ndarray]] = {}
        state = _Accounting()

        def account() -> None:
            for e in driver.drain_events():
                state.event(e, jobs)
            for job in state.finished:
                out = pending.pop(job.work_id)
                if job.reason is EndReason.COMPLETED:
                    job.correct = _same(out, reference_outputs[job.task])
                driver.forget(job.work_id)
            state.finished.clear()

        # Time moves in windows of the shortest task's work, with the events read
        # after each: under overload a backlog of thousands of requests drains
        # after the last arrival, and read in one go its events would outgrow the
        # hardware's event ring (they would be dropped).  In one window a channel
        # runs about one request's slices.
        window_ns = max(1, round(min(t.work_ms for t in workload.tasks) * 1e6))

        def run_to(until_ns: int | None) -> None:
            """Advance to ``until_ns`` (None: until every request ended), reading events as they come."""
            while pending and (until_ns is None or driver.now_ns < until_ns):
                before = driver.now_ns
                if until_ns is None:
                    driver.run_until_idle(window_ns / 1e6)
                else:
                    driver.advance(min(window_ns, until_ns - before) / 1e6)
                account()
                if until_ns is None and driver.now_ns == before:
                    return  # idle with requests unended: reported below
            if until_ns is not None and driver.now_ns < until_ns:
                driver.advance((until_ns - driver.now_ns) / 1e6)  # idle meanwhile: nothing to read
            account()

        for arrival in arrivals:
            run_to(arrival.time_ns)
            task = workload.tasks[arrival.task]
            handle = handles[arrival.task]
            out = _output_buffers(handle)
            try:
                work = driver.submit(handle, [cal.inputs[arrival.task]], out, uid=task.uid,
                                     job_priority=task.priority)
            except npuhal.NpuError as e:
                raise LabRunError(f"{who}: the driver refused task {task.name!r}'s request: {e}") from None
            job = Job(arrival.task, driver.now_ns, work)
            jobs[work] = job
            pending[work] = out
            order.append(job)
        run_to(None)
        lost = [j for j in order if j.reason is None]
        if lost:
            raise LabRunError(f"{who}: {len(lost)} requests never ended (the first: work {lost[0].work_id}; "
                              f"{driver.events_dropped} events dropped)")
        makespan = max((j.end_ns for j in order if j.end_ns is not None), default=0)
        return RunResult(policy, factor, order, device.channels, state.saves_ns, makespan, driver.events_dropped)


class _Accounting:
    """Turns work events into request lives, and measures context-save time.

    A checkpoint save happens after the preempted request's ENDED(PAUSED) and
    before the next STARTED on the same channel (events say which: ``hw_device``
    and ``channel``).  With a binding whose events carry no channel (-1), each
    pause is matched instead with the next start, at or after it, of a request
    more important than the paused one.  The restore is inside the resumed
    request's own channel time, so it shows as that request's inflation over
    its isolated time.
    """

    def __init__(self) -> None:
        self.paused_on: dict[tuple[int, int], int] = {}  # (hw device, channel) -> when a pause freed it
        self.pending: list[tuple[int, int]] = []  # without channels: (pause time, paused effective priority)
        self.saves_ns = 0
        self.finished: list[Job] = []

    def event(self, e: Any, jobs: dict[int, Job]) -> None:
        if not isinstance(e, (WorkStarted, WorkEnded)):
            return
        job = jobs.get(e.info.id)
        if job is None:
            return
        t = e.time_ns
        if isinstance(e, WorkStarted):
            if job.start_ns is None:
                job.start_ns = t
            job._segment = t
            place = (getattr(e, "hw_device", -1), getattr(e, "channel", -1))
            if place[1] >= 0:
                freed = self.paused_on.pop(place, None)
                if freed is not None:
                    self.saves_ns += t - freed
                return
            prio = e.info.effectivePriority
            for i, (paused_at, paused_prio) in enumerate(self.pending):
                if prio < paused_prio and t >= paused_at:
                    self.saves_ns += t - paused_at
                    del self.pending[i]
                    break
            return
        if job._segment is not None:
            job.busy_ns += t - job._segment
            job._segment = None
        if e.reason is EndReason.PAUSED:
            job.pauses += 1
            place = (getattr(e, "hw_device", -1), getattr(e, "channel", -1))
            if place[1] >= 0:
                self.paused_on[place] = t
            else:
                self.pending.append((t, e.info.effectivePriority))
        else:
            job.end_ns = t
            job.reason = e.reason
            self.finished.append(job)



# ---- Python driver policies: the lab holds the queue ------------------------------

#: Keys: the lab sets every task's app priority to 1000, so a request's key is
#: 1000 + its job priority; it submits at "levels", key 2000 - level, a
#: checkpoint preemptor one level above its victim (a strictly lower key is what
#: makes the hardware pause a running request).
_APP_PRIORITY = 1000
_MAX_LEVEL = 1000


@dataclass(slots=True)
class _Req:
    """A request while the lab holds it for a Python policy."""

    id: int
    task: int
    arrival_ns: int
    job: Job
    state: str = "waiting"  # waiting, staged, running, pausing, paused, killing, done
    work: int | None = None
    level: int = 0
    executed_ns: int = 0
    segment_ns: int | None = None
    last_ran_ns: int | None = None
    restarts: int = 0
    out: list[np.ndarray] | None = None


class _HeldQueue:
    """One run of a Python driver policy: the lab keeps every arrived request and
    puts on the device only what the policy decides (see ``framework.lab._policy``)."""

    def __init__(self, workload: Workload, cal: Calibration, policy: Policy, reference_outputs: Sequence[np.ndarray],
                 factor: float, estimates_ns: Sequence[int]) -> None:
        assert policy.python is not None
        self.workload = workload
        self.cal = cal
        self.policy = policy
        self.reference = reference_outputs
        self.factor = factor
        self.who = f"policy {policy.name}"
        self.tasks = tuple(
            P.TaskInfo(i, t.name, t.priority, t.sla, int(estimates_ns[i]), len(cal.models[i].main.operations))
            for i, t in enumerate(workload.tasks)
        )
        self.reqs: list[_Req] = []
        self.by_work: dict[int, _Req] = {}
        self.log: list[str] = []
        self.saves_ns = 0
        self.paused_on: dict[tuple[int, int], int] = {}
        self.unresumable = 0  # decisions the hardware's key order could not carry out exactly

    # -- views -------------------------------------------------------------------

    def view_of(self, r: _Req) -> P.JobView:
        state = {"staged": "waiting", "killing": "running", "pausing": "running"}.get(r.state, r.state)
        executed = r.executed_ns
        if r.segment_ns is not None:
            executed += self.driver.now_ns - r.segment_ns
        return P.JobView(r.id, self.tasks[r.task], r.arrival_ns, state, executed, r.last_ran_ns,
                         r.job.pauses, r.restarts)

    def running(self) -> list[_Req]:
        return [r for r in self.reqs if r.state in ("running", "pausing", "killing")]

    def ready(self) -> list[_Req]:
        return [r for r in self.reqs if r.state in ("waiting", "staged", "paused")]

    def view(self, trigger: P.Event, planning: bool = False) -> tuple[P.View, dict[int, _Req]]:
        running = self.running()
        ready = self.ready()
        free = 0 if planning else max(0, self.channels - len(running))
        v = P.View(self.driver.now_ns, self.channels, tuple(self.view_of(r) for r in running),
                   tuple(self.view_of(r) for r in ready), 1 if planning else free, planning, trigger)
        return v, {r.id: r for r in running + ready}

    # -- the run -----------------------------------------------------------------

    def run(self, arrivals: Sequence[Arrival]) -> RunResult:
        workload, policy = self.workload, self.policy
        try:
            self.instance = policy.python()
        except Exception as e:
            raise P.PolicyError(f"{self.who}: making the policy raised {type(e).__name__}: {e}, "
                                f"at the start of the run") from e
        with policy.open_driver(workload) as driver:
            self.driver = driver
            device = _device(driver, workload, self.who)
            self.channels = device.channels
            driver.set_scheduling_configs([SchedulingConfig(uid=t.uid, appPriority=_APP_PRIORITY, hasDirectAccess=True)
                                           for t in workload.tasks])
            self.handles = _load(driver, device, workload, self.cal, self.who)
            P.call(self.instance, "start", None, None, 0, self.tasks, self.channels)
            i, n = 0, len(arrivals)
            while True:
                t_arr = arrivals[i].time_ns if i < n else None
                t_hw = driver.next_event_ns
                if t_hw is None and t_arr is None:
                    break
                if t_hw is not None and (t_arr is None or t_hw <= t_arr):
                    driver.advance_to_next_event()
                    triggers = self.read_events()
                else:
                    if t_arr > driver.now_ns:
                        driver.advance((t_arr - driver.now_ns) / 1e6)
                    triggers = self.read_events()  # a thermal step may have landed here
                    while i < n and arrivals[i].time_ns <= driver.now_ns:
                        a = arrivals[i]
                        r = _Req(len(self.reqs), a.task, a.time_ns, Job(a.task, a.time_ns, -1))
                        self.reqs.append(r)
                        triggers.append(P.Arrived(self.view_of(r), a.time_ns))
                        i += 1
                for event in triggers:
                    v, _ = self.view(event)
                    P.call(self.instance, "on_event", v, event, driver.now_ns, event, v)
                if triggers:
                    self.schedule(triggers[-1])
            left = [r for r in self.reqs if r.state != "done"]
            if left:
                raise P.PolicyError(
                    f"{self.who}: the device went idle with {len(left)} requests never run (the first: "
                    f"{self.view_of(left[0]).describe()}, {left[0].state}): select() left them waiting")
            jobs = [r.job for r in self.reqs]
            makespan = max((j.end_ns for j in jobs if j.end_ns is not None), default=0)
            if self.unresumable:
                self.log.append(f"{self.unresumable} decisions to resume an older paused request went by the "
                                f"hardware's resume order instead (see framework.lab._policy)")
            return RunResult(policy, self.factor, jobs, device.channels, self.saves_ns, makespan,
                             driver.events_dropped, self.log)

    # -- events ------------------------------------------------------------------

    def read_events(self) -> list[P.Event]:
        out: list[P.Event] = []
        for e in self.driver.drain_events():
            if not isinstance(e, (WorkStarted, WorkEnded)):
                continue
            r = self.by_work.get(e.info.id)
            if r is None:
                continue
            t = e.time_ns
            place = (getattr(e, "hw_device", -1), getattr(e, "channel", -1))
            if isinstance(e, WorkStarted):
                freed = self.paused_on.pop(place, None)
                if freed is not None:
                    self.saves_ns += t - freed
                resumed = r.state == "paused"
                r.state = "running"
                r.segment_ns = t
                if r.job.start_ns is None:
                    r.job.start_ns = t
                out.append(P.Started(self.view_of(r), t, resumed))
                continue
            ran = 0 if r.segment_ns is None else t - r.segment_ns
            r.job.busy_ns += ran
            r.segment_ns = None
            if e.reason is EndReason.PAUSED:
                r.executed_ns += ran
                r.last_ran_ns = t
                r.job.pauses += 1
                r.state = "paused"
                if place[1] >= 0:
                    self.paused_on[place] = t
                out.append(P.Preempted(self.view_of(r), t, P.Mechanism.CHECKPOINT))
            elif r.state == "killing" and e.reason is EndReason.CANCELLED_USER:
                del self.by_work[e.info.id]
                self.driver.forget(e.info.id)
                r.work = None
                r.last_ran_ns = t
                if ran:
                    r.executed_ns = 0
                    r.restarts += 1
                    r.job.pauses += 1
                    out.append(P.Preempted(self.view_of(r), t, P.Mechanism.KILL))
                r.state = "waiting"
            else:
                del self.by_work[e.info.id]
                r.executed_ns += ran
                r.last_ran_ns = t
                r.state = "done"
                r.job.end_ns = t
                r.job.reason = e.reason
                if e.reason is EndReason.COMPLETED:
                    r.job.correct = _same(r.out, self.reference[r.task])
                self.driver.forget(e.info.id)
                r.out = None
                out.append(P.Ended(self.view_of(r), t, e.reason.name))
        return out

    # -- decisions ---------------------------------------------------------------

    def submit(self, r: _Req, level: int) -> None:
        if level > _MAX_LEVEL:
            raise LabRunError(f"{self.who}: more than {_MAX_LEVEL} nested checkpoint preemptions")
        task = self.workload.tasks[r.task]
        handle = self.handles[r.task]
        if r.out is None:
            r.out = _output_buffers(handle)
        try:
            work = self.driver.submit(handle, [self.cal.inputs[r.task]], r.out, uid=task.uid,
                                      job_priority=_MAX_LEVEL - level)
        except npuhal.NpuError as e:
            raise LabRunError(f"{self.who}: the driver refused task {task.name!r}'s request: {e}") from None
        r.work = work
        r.level = level
        self.by_work[work] = r

    def take_back(self, r: _Req) -> None:
        """Cancel ``r``'s work, which the device has not started, and make it wait again (nothing is lost)."""
        assert r.work is not None
        self.by_work.pop(r.work, None)
        self.driver.cancel(r.work)
        self.driver.forget(r.work)
        r.work = None
        r.state = "waiting"

    def unstage(self) -> None:
        """Take back a planned successor that has not started (a queued cancel is immediate)."""
        for r in self.reqs:
            if r.state == "staged":
                self.take_back(r)

    def floor_level(self) -> int:
        """The level a request must be submitted at to go before every paused one."""
        paused = [r.level for r in self.reqs if r.state == "paused"]
        return max(paused) + 1 if paused else 0

    def pick(self, trigger: P.Event, planning: bool) -> tuple[P.View, dict[int, _Req], _Req | None]:
        v, reqs = self.view(trigger, planning)
        chosen = P.call(self.instance, "select", v, trigger, v.now_ns, v)
        if chosen is None:
            return v, reqs, None
        if not isinstance(chosen, P.JobView) or chosen.id not in reqs or chosen not in (v.running + v.ready):
            raise P.refuse(self.instance, "select", trigger, v.now_ns,
                           f"returned {chosen!r}, not one of the requests in its view (or None)")
        return v, reqs, reqs[chosen.id]

    def schedule(self, trigger: P.Event) -> None:
        # Free channels first: each gets the policy's choice, at once.
        self.unstage()
        while True:
            v, reqs, r = self.pick(trigger, planning=False)
            if v.free_channels == 0:
                break
            if r is None:
                return
            if r.state not in ("waiting",):
                if r.state == "paused":  # the hardware would have resumed it by itself
                    self.unresumable += 1
                    return
                raise P.refuse(self.instance, "select", trigger, v.now_ns,
                               f"chose {self.view_of(r).describe()}, already running, for a free channel")
            self.submit(r, self.floor_level())
            r.state = "running"
        if r is not None and r.state in ("waiting", "paused"):
            self.displace(v, reqs, r, trigger)
        self.plan(trigger)

    def displace(self, v: P.View, reqs: dict[int, _Req], chosen: _Req, trigger: P.Event) -> None:
        cv = self.view_of(chosen)
        answer = P.call(self.instance, "preempt", v, trigger, v.now_ns, v, cv)
        running = self.running()
        if isinstance(answer, tuple) and len(answer) == 2:
            victim_view, how = answer
            victim = reqs.get(getattr(victim_view, "id", None))
            if victim is None or victim not in running:
                raise P.refuse(self.instance, "preempt", trigger, v.now_ns,
                               f"named {victim_view!r} as the victim, not a running request")
        else:
            how = answer
            victim = max(running, key=lambda x: (x.job.start_ns or 0, x.id)) if running else None
        if not isinstance(how, P.Mechanism):
            raise P.refuse(self.instance, "preempt", trigger, v.now_ns, f"returned {answer!r}, not a Mechanism")
        if victim is None or how is P.Mechanism.DRAIN or victim.state != "running":
            # Draining, or the victim is already leaving its channel: the chosen one
            # goes next (plan() puts it behind the running ones).
            return
        if victim.segment_ns is None and chosen.state == "waiting":
            # The victim was put on the device but has not started (it waits for a
            # context save): take it back, nothing is lost, and send the chosen one instead.
            self.take_back(victim)
            self.submit(chosen, victim.level)
            chosen.state = "running"
            return
        if chosen.state == "paused":
            # Its key is fixed: it comes back when the channel frees and it is the
            # most recently paused.  Kill the victim for it; a checkpoint would not
            # let it through.
            self.unresumable += how is P.Mechanism.CHECKPOINT or chosen.level != max(
                (x.level for x in self.reqs if x.state == "paused"), default=chosen.level)
            if how is P.Mechanism.KILL:
                self.kill(victim)
            return
        if how is P.Mechanism.KILL:
            self.kill(victim)
            self.submit(chosen, victim.level)
        else:
            self.submit(chosen, victim.level + 1)
            victim.state = "pausing"
        chosen.state = "running"

    def kill(self, victim: _Req) -> None:
        assert victim.work is not None
        victim.state = "killing"
        self.driver.cancel(victim.work)

    def plan(self, trigger: P.Event) -> None:
        """Put the policy's next choice behind the running requests (see the module)."""
        running = self.running()
        if not running or any(r.state != "running" for r in running):
            return
        _, _, r = self.pick(trigger, planning=True)
        if r is None or r.state != "waiting":
            return
        level = min(x.level for x in running)
        if level < self.floor_level():
            return
        self.submit(r, level)
        r.state = "staged"
