"""The lab: every policy on the same arrivals, at the nominal load and across a sweep.

``run_workload`` is the whole experiment for one workload:

1. calibrate the tasks' models to their ``work_ms`` (reference driver);
2. measure each task alone under each policy (the isolated times);
3. generate the arrivals once per load level (a pure function of the
   workload and seed) and run every policy on that same list;
4. summarise every run with the metrics of ``framework.lab.metrics``.

The result (``WorkloadReport``) holds every number; ``to_dict`` gives them as
JSON-able data, and ``framework.lab`` formats tables and plots from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import npuhal
from npuhal import EndReason

from . import _metrics as M
from . import _stack
from ._errors import LabRunError
from ._policy import PolicyError
from ._run import Calibration, Policy, RunResult, calibrate, measure_isolated, run_policy
from ._sweep import Executor, Point, SerialExecutor
from ._workload import Workload, factor_for_load, generate_arrivals, offered_load

__all__ = ["WorkloadReport", "GridResult", "run_workload", "run_grid", "summarize", "failed_summary",
           "prema_comparison", "PREMA_REPORTED"]

#: The paper's headline ratios of PREMA over NP-FCFS (Choi and Rhu, HPCA 2020):
#: ANTT 7.8x lower, STP 1.4x higher, SLA satisfaction 4.8x higher.
PREMA_REPORTED = {"latency_x": 7.8, "throughput_x": 1.4, "sla_x": 4.8}


def _ms(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e6


def summarize(run: RunResult, workload: Workload, isolated_ns: Sequence[int], isolated_busy_ns: Sequence[int],
              *, offered: float, load: float | None = None) -> dict[str, Any]:
    """Every metric of one run, as plain data (see ``framework.lab.metrics``).

    ``isolated_ns``: each task's turnaround alone; ``isolated_busy_ns``: its time
    on the channel alone (the useful work a request needs).
    """
    k = workload.sla_k
    tasks = []
    ntts: list[float] = []
    starving = False
    high: list[float] = []
    high_turn: list[float | None] = []
    high_iso: list[float] = []
    request_ntts: list[float] = []
    for i, task in enumerate(workload.tasks):
        jobs = [j for j in run.jobs if j.task == i]
        done = [j for j in jobs if j.turnaround_ns is not None]
        turn = [j.turnaround_ns / 1e6 for j in done]
        iso = isolated_ns[i] / 1e6
        entry: dict[str, Any] = {
            "name": task.name,
            "priority": task.priority,
            "sla": task.sla,
            "isolated_ms": iso,
            "requests": len(jobs),
            "completed": len(done),
            "preemptions": sum(j.pauses for j in jobs),
        }
        if done:
            ntt = M.mean([M.normalized_turnaround(t, iso) for t in turn])
            request_ntts.extend(M.normalized_turnaround(t, iso) for t in turn)
            ntts.append(ntt)
            entry.update(
                ntt=ntt, np=1.0 / ntt, mean_ms=M.mean(turn), p50_ms=M.percentile(turn, 50),
                p99_ms=M.percentile(turn, 99), max_ms=max(turn),
                wait_mean_ms=M.mean([(j.start_ns - j.arrival_ns) / 1e6 for j in done]),
            )
        else:
            starving = bool(jobs)
            entry.update(ntt=None, np=0.0 if jobs else None, mean_ms=None, p50_ms=None, p99_ms=None, max_ms=None,
                         wait_mean_ms=None)
        if task.sla and jobs:
            entry["sla_satisfaction"] = M.sla_satisfaction([_ms(j.turnaround_ns) for j in jobs], iso, k)
            high.extend(turn)
            high_turn.extend(_ms(j.turnaround_ns) for j in jobs)
            high_iso.extend([iso] * len(jobs))
        else:
            entry["sla_satisfaction"] = None
        tasks.append(entry)

    inflation = 0
    useful = 0
    for j in run.jobs:
        if j.reason is EndReason.COMPLETED:
            useful += isolated_busy_ns[j.task]
            if j.pauses:
                inflation += max(0, j.busy_ns - isolated_busy_ns[j.task])
    overhead = inflation + run.saves_ns
    completed = sum(1 for j in run.jobs if j.reason is EndReason.COMPLETED)
    return {
        "policy": run.policy.name,
        "load": load,
        "offered_load": offered,
        "rate_factor": run.factor,
        "requests": len(run.jobs),
        "completed": completed,
        "failed": len(run.jobs) - completed,
        "wrong_results": sum(1 for j in run.jobs if j.correct is False),
        "antt": M.antt(ntts) if ntts and not starving else None,
        "stp": M.stp(ntts) if ntts else 0.0,
        "fairness": 0.0 if starving else (M.fairness(ntts) if ntts else None),
        "antt_requests": M.mean(request_ntts) if request_ntts else None,
        "sla_k": k,
        "sla_satisfaction": M.sla_satisfaction(high_turn, high_iso, k) if high_turn else None,
        "high_mean_ms": M.mean(high) if high else None,
        "high_p50_ms": M.percentile(high, 50) if high else None,
        "high_p99_ms": M.percentile(high, 99) if high else None,
        "preemptions": sum(j.pauses for j in run.jobs),
        "preemption_overhead_ms": overhead / 1e6,
        "context_save_ms": run.saves_ns / 1e6,
        "overhead_pct": 100.0 * overhead / useful if useful else 0.0,
        "makespan_ms": run.makespan_ns / 1e6,
        "throughput_rps": completed / (run.makespan_ns / 1e9) if run.makespan_ns else 0.0,
        "events_dropped": run.events_dropped,
        "log": list(run.log),
        "npu_policy_errors": run.npu_policy_error_count,
        "npu_policy_latest_errors": list(run.npu_policy_errors),
        "tasks": tasks,
        # One row per request: task index, arrival, first start, end (ms), end reason, pauses, channel time (ms).
        "jobs": [
            [j.task, j.arrival_ns / 1e6, _ms(j.start_ns), _ms(j.end_ns), None if j.reason is None else j.reason.name,
             j.pauses, j.busy_ns / 1e6]
            for j in run.jobs
        ],
    }


_METRIC_KEYS = ("antt", "fairness", "antt_requests", "sla_satisfaction", "high_mean_ms", "high_p50_ms", "high_p99_ms",
                "preemption_overhead_ms", "context_save_ms", "overhead_pct", "makespan_ms", "throughput_rps")


def failed_summary(policy: Policy, error: str, *, offered: float, load: float | None = None) -> dict[str, Any]:
    """The summary of a run that a Python policy's error stopped: every metric missing, the error said."""
    out: dict[str, Any] = {"policy": policy.name, "load": load, "offered_load": offered, "error": error,
                           "requests": 0, "completed": 0, "failed": 0, "wrong_results": 0, "stp": None,
                           "preemptions": 0, "events_dropped": 0, "log": [], "tasks": [], "jobs": []}
    out.update({k: None for k in _METRIC_KEYS})
    return out


@dataclass(slots=True)
class WorkloadReport:
    """Everything one workload's experiment measured."""

    workload: Workload
    policies: tuple[Policy, ...]
    mode: str  # "driver" or "whole-stack"
    npu_policy: str | None  # the npu service's load policy (whole-stack mode)
    model_size: dict[str, Any]  # how the tasks' work_ms was reached: cost scales, or layer counts
    channels: int
    isolated_ms: dict[str, list[float]]
    nominal_load: float
    nominal: list[dict[str, Any]]
    sweep: list[dict[str, Any]] = field(default_factory=list)  # {"load", "rate_factor", "runs": [summary...]}

    def run(self, policy: str, load: float | None = None) -> dict[str, Any]:
        """The summary of ``policy`` at the nominal load, or at sweep level ``load``."""
        runs = self.nominal if load is None else next(
            (s["runs"] for s in self.sweep if abs(s["load"] - load) < 1e-9), None)
        if runs is None:
            raise KeyError(f"no sweep level {load}")
        for r in runs:
            if r["policy"] == policy:
                return r
        raise KeyError(f"no policy {policy!r} in this report")

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload.to_dict(),
            "policies": [p.to_dict() for p in self.policies],
            "mode": self.mode,
            "npu_policy": self.npu_policy,
            "model_size": self.model_size,
            "channels": self.channels,
            "isolated_ms": self.isolated_ms,
            "nominal_load": self.nominal_load,
            "nominal": self.nominal,
            "sweep": self.sweep,
            "prema_comparison": prema_comparison(self),
        }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def prema_comparison(report: WorkloadReport, baseline: str = "fcfs", preemptive: str = "preempt-ckpt") -> dict[str, Any]:
    """PREMA's three headline ratios, for preemptive over non-preemptive FCFS, per load.

    ``latency_x`` = ANTT(FCFS) / ANTT(preemptive) (how many times lower the
    average normalized latency is), ``throughput_x`` = STP ratio, ``sla_x`` =
    SLA-satisfaction ratio; also the high-priority mean latency ratio.  A
    ratio with a zero or missing denominator is ``None``.
    """
    names = {p.name for p in report.policies}
    if baseline not in names or preemptive not in names:
        return {}

    def one(load: float | None) -> dict[str, Any]:
        a, b = report.run(baseline, load), report.run(preemptive, load)
        return {
            "load": a["offered_load"] if load is None else load,
            "latency_x": _ratio(a["antt"], b["antt"]),
            "throughput_x": _ratio(b["stp"], a["stp"]),
            "sla_x": _ratio(b["sla_satisfaction"], a["sla_satisfaction"]),
            "high_latency_x": _ratio(a["high_mean_ms"], b["high_mean_ms"]),
        }

    def each(load: float | None) -> dict[str, dict[str, Any]]:
        a = report.run(baseline, load)
        out = {}
        for p in report.policies:
            b = report.run(p.name, load)
            out[p.name] = {
                "latency_x": _ratio(a["antt"], b["antt"]),
                "request_latency_x": _ratio(a["antt_requests"], b["antt_requests"]),
                "throughput_x": _ratio(b["stp"], a["stp"]),
                "sla_x": _ratio(b["sla_satisfaction"], a["sla_satisfaction"]),
                "fairness_x": _ratio(b["fairness"], a["fairness"]),
            }
        return out

    return {
        "baseline": baseline,
        "preemptive": preemptive,
        "nominal": one(None),
        "sweep": [one(s["load"]) for s in report.sweep],
        # Every policy's ratios over the baseline, at the nominal load and each sweep level.
        "policies": {"nominal": each(None), "sweep": [{"load": s["load"], "ratios": each(s["load"])} for s in report.sweep]},
        "prema_reported": dict(PREMA_REPORTED),
    }


def _calibration_policy(workload: Workload, policies: Sequence[Policy]) -> Policy:
    """The reference driver if it has the workload's device, else the first driver given that has it."""
    candidates = [Policy("calibration", "the reference driver, alone")]
    candidates += [Policy("calibration", f"{Path(p.driver_path).name}, alone", None, None, p.driver_path)
                   for p in policies if p.driver_path]
    for candidate in candidates:
        with candidate.open_driver(workload) as d:
            if any(dev.name == workload.device for dev in d.devices):
                return candidate
    with npuhal.Driver.open() as d:
        names = ", ".join(dev.name for dev in d.devices)
    raise LabRunError(f"{workload.source}: no driver has the device {workload.device!r} (the reference driver has {names})")


def _onto(driver_path: str, policies: Sequence[Policy]) -> list[Policy]:
    """The lab's policies (the hardware's modes, set on the reference driver) set on ``driver_path`` instead.

    The reference driver's own scheduling has no meaning there and is left out:
    the driver's own is its ``driver:`` policy.
    """
    out = []
    for p in policies:
        if p.driver_path is None:
            if p.scheduling is None and p.preemption is None:
                continue
            p = dataclasses.replace(p, description=f"{p.description}, on {Path(driver_path).name}",
                                    driver_path=driver_path)
        out.append(p)
    return out


class _DriverMode:
    """Requests straight to the driver (``_run``)."""

    name = "driver"

    def __init__(self, workload: Workload, base: Policy) -> None:
        self.workload = workload
        self.base = base
        self.cal: Calibration = calibrate(workload, base)
        self.model_size = {"cost_scales": list(self.cal.cost_scales)}
        self._alone: dict[Any, tuple[list[int], list[int], list[Any]]] = {}

    def __reduce__(self) -> Any:
        # Its models hold shared memory, which cannot be pickled: a Dask worker that
        # receives a mode calibrates again (deterministic: the same models and scales).
        return (type(self), (self.workload, self.base))

    def isolated(self, policy: Policy) -> tuple[list[int], list[int], list[Any]]:
        # A request alone runs the same under any scheduling: measured once per driver and modes.
        key = (policy.driver_path, policy.scheduling, policy.preemption)
        if key not in self._alone:
            self._alone[key] = measure_isolated(self.workload, self.cal, policy)
        return self._alone[key]

    def run(self, policy: Policy, arrivals: list[Any], outs: list[Any], factor: float,
            busy: list[int] | None = None) -> RunResult:
        # A Python policy's job-length predictor: each network's channel time alone, the
        # sum of its operations' costs on this device (``framework.lab._prema``).
        return run_policy(self.workload, self.cal, policy, arrivals, outs, factor=factor, estimates_ns=busy)


class _StackMode:
    """Requests from apps through the whole framework (``_stack``)."""

    name = "whole-stack"

    def __init__(self, workload: Workload, base: Policy, npu_policy: Any) -> None:
        self.workload = workload
        self.base = base
        self.npu_policy = npu_policy
        self.cal = _stack.calibrate_stack(workload, base)
        self.reference = _stack.stack_reference(workload, self.cal)
        self.model_size = {"layers": list(self.cal.layers), "width": _stack.STACK_WIDTH,
                           "floor_ms": list(self.cal.floor_ms)}
        self._alone: dict[str | None, tuple[list[int], list[int], list[Any]]] = {}

    def __reduce__(self) -> Any:
        return (type(self), (self.workload, self.base, self.npu_policy))  # calibrated again where it lands

    def isolated(self, policy: Policy) -> tuple[list[int], list[int], list[Any]]:
        # One request alone cannot be scheduled differently: measured once per driver.
        if policy.driver_path not in self._alone:
            arrivals = _stack.isolated_arrivals(self.workload)
            alone = dataclasses.replace(self.workload, duration_ms=arrivals[-1].time_ns / 1e6 + 1)
            result = _stack.run_stack(alone, self.cal, policy, arrivals, self.reference, npu_policy=self.npu_policy)
            jobs = sorted(result.jobs, key=lambda j: j.task)
            bad = [j for j in jobs if j.turnaround_ns is None]
            if bad or len(jobs) != len(self.workload.tasks):
                name = self.workload.tasks[bad[0].task].name if bad else "?"
                raise LabRunError(f"whole stack, policy {policy.name}: task {name!r} alone did not complete")
            self._alone[policy.driver_path] = ([j.turnaround_ns for j in jobs], [j.busy_ns for j in jobs],
                                               list(self.reference))
        return self._alone[policy.driver_path]

    def run(self, policy: Policy, arrivals: list[Any], outs: list[Any], factor: float,
            busy: list[int] | None = None) -> RunResult:
        return _stack.run_stack(self.workload, self.cal, policy, arrivals, outs, npu_policy=self.npu_policy,
                                     factor=factor)


def run_workload(
    workload: Workload,
    policies: Sequence[Policy],
    *,
    sweep: bool = True,
    progress: Callable[[str], None] | None = None,
    whole_stack: bool = False,
    npu_policy: Any = "status-quo",
    executor: Executor | None = None,
) -> WorkloadReport:
    """Run every policy on ``workload`` at its nominal load and (``sweep``) at each sweep level.

    ``whole_stack``: through the full framework (apps, the npu service under its
    load policy ``npu_policy``, the HAL) instead of straight to the driver; see
    ``framework.lab._stack``.  About a hundred times slower per request.
    ``executor``: where the points run (``framework.lab.open_executor``); by default
    in this process.  The first point that fails raises ``LabRunError`` (``run_grid``
    reports failures and goes on).
    """
    grid = run_grid([workload], policies, sweep=sweep, progress=progress, whole_stack=whole_stack,
                    npu_policy=npu_policy, executor=executor)
    if grid.failures:
        raise LabRunError(grid.failures[0]["error"])
    return grid.reports[0]


@dataclass(slots=True)
class GridResult:
    """A grid's reports (one per workload that could be calibrated, in the order given), and
    every point that failed, with its parameters: ``{"workload", "seed", "stage", "policy",
    "load", "error"}`` (a policy with a failed point is left out of its workload's report)."""

    reports: list[WorkloadReport]
    failures: list[dict[str, Any]]
    points: int


# The points of one workload's graph.  Each is a module-level function of picklable
# arguments (the lab's dataclasses, numpy arrays), so that Dask can ship it.

def _calibrate_point(workload: Workload, base: Policy, whole_stack: bool, npu_policy: Any) -> _DriverMode | _StackMode:
    return _StackMode(workload, base, npu_policy) if whole_stack else _DriverMode(workload, base)


def _model_size_point(mode: _DriverMode | _StackMode) -> dict[str, Any]:
    return mode.model_size


def _isolated_point(mode: _DriverMode | _StackMode, policy: Policy) -> tuple[list[int], list[int], list[Any]]:
    return mode.isolated(policy)


def _levels_point(mode: _DriverMode | _StackMode, base: Policy, base_isolated: tuple[list[int], list[int], list[Any]],
                  sweep: bool) -> dict[str, Any]:
    # Offered load and the sweep's factors come from the calibration driver's
    # figures: the workload's intensity must not depend on the policies picked.
    workload = mode.workload
    with base.open_driver(workload) as d:
        channels = d.device_by_name(workload.device).channels
    ref_ms = [t / 1e6 for t in base_isolated[0]]
    levels: list[tuple[float, float | None]] = [(1.0, None)]
    if sweep:
        levels += [(factor_for_load(workload, ref_ms, channels, load), load) for load in workload.sweep_loads]
    return {"channels": channels, "nominal_load": offered_load(workload, ref_ms, channels), "levels": levels}


def _run_point(mode: _DriverMode | _StackMode, policy: Policy, isolated: tuple[list[int], list[int], list[Any]],
               levels: dict[str, Any], index: int) -> dict[str, Any]:
    factor, load = levels["levels"][index]
    turn, busy, outs = isolated
    try:
        result = mode.run(policy, generate_arrivals(mode.workload, factor), outs, factor, busy)
    except PolicyError as e:
        # A Python policy's own error: its row says so (with the event); the other
        # policies' points run as usual.
        return failed_summary(policy, str(e), load=load, offered=offered_load(
            mode.workload, [t / 1e6 for t in turn], levels["channels"], factor))
    offered = offered_load(mode.workload, [t / 1e6 for t in turn], result.channels, factor)
    return summarize(result, mode.workload, turn, busy, offered=offered, load=load)


def run_grid(
    workloads: Sequence[Workload],
    policies: Sequence[Policy],
    *,
    sweep: bool = True,
    progress: Callable[[str], None] | None = None,
    on_point: Callable[[dict[str, Any]], None] | None = None,
    whole_stack: bool = False,
    npu_policy: Any = "status-quo",
    executor: Executor | None = None,
) -> GridResult:
    """Every policy on every workload (give one per seed for a seed axis), as a graph of
    independent points on ``executor`` (serial by default; Dask with ``open_executor``).

    Per workload: calibrate it, measure each policy's isolated times, then run each
    policy at the nominal load and at each sweep level.  The numbers are the same
    wherever the points run.  ``on_point`` sees each finished point (``{"done",
    "total", "params", "error"}``) as it finishes, for progress bars and partial results.
    """
    if not policies:
        raise LabRunError("no policy to run")
    names = [p.name for p in policies]
    if len(set(names)) != len(names):
        raise LabRunError(f"two policies share a name: {names}")
    if whole_stack and any(p.python is not None for p in policies):
        names = ", ".join(p.name for p in policies if p.python is not None)
        raise LabRunError(f"Python driver policies ({names}) run in driver mode only, not --whole-stack")
    label = None
    if whole_stack:
        label = _stack.npu_policy_label(npu_policy)  # a built-in's name, or a user's policy (--npu-policy-file)
    say = progress or (lambda _msg: None)
    executor = executor or SerialExecutor()
    plans = []
    for workload in workloads:
        base = _calibration_policy(workload, policies)
        ps = list(policies)
        if base.driver_path is not None:
            ps = _onto(base.driver_path, ps)
            say(f"{workload.name}: the reference driver has no {workload.device}: the lab's policies set their modes "
                f"on {Path(base.driver_path).name}")
        where = {"workload": workload.name, "seed": workload.seed}
        mode = executor.submit(_calibrate_point, workload, base, whole_stack, npu_policy, fetch=False, **where,
                               stage="calibrate")
        size = executor.submit(_model_size_point, mode, **where, stage="calibrate")
        isolated = {p.name: executor.submit(_isolated_point, mode, p, **where, stage="isolated", policy=p.name)
                    for p in ps}
        base_iso = executor.submit(_isolated_point, mode, base, **where, stage="isolated", policy=base.name)
        levels = executor.submit(_levels_point, mode, base, base_iso, sweep, **where, stage="levels")
        loads = [None] + (list(workload.sweep_loads) if sweep else [])
        runs = {(p.name, i): executor.submit(_run_point, mode, p, isolated[p.name], levels, i, **where, stage="run",
                                             policy=p.name, load="nominal" if load is None else load)
                for i, load in enumerate(loads) for p in ps}
        plans.append((workload, ps, mode, size, isolated, base_iso, levels, runs))
        say(f"{workload.name} (seed {workload.seed}): {len(ps)} policies x {len(loads)} loads "
            f"({'whole-stack' if whole_stack else 'driver'} mode)")
    points = [p for _w, _ps, mode, size, isolated, base_iso, levels, runs in plans
              for p in (mode, size, *isolated.values(), base_iso, levels, *runs.values())]
    done = 0

    def finished(point: Point) -> None:
        nonlocal done
        done += 1
        if on_point is not None:
            on_point({"done": done, "total": len(points), "params": point.params,
                      "error": None if point.error is None else f"{type(point.error).__name__}: {point.error}",
                      "value": point.value if point.params.get("stage") == "run" else None})

    say(f"{len(points)} points on {executor.where}")
    executor.run(points, finished)
    reports, failures = [], []
    for workload, ps, mode, size, isolated, base_iso, levels, runs in plans:
        bad = [p for p in (mode, size, *isolated.values(), base_iso, levels, *runs.values()) if p.failed]
        failures += [{**p.params, "policy": p.params.get("policy"), "load": p.params.get("load"),
                      "error": f"{type(p.error).__name__}: {p.error}"} for p in bad]
        if mode.failed or size.failed or levels.failed:
            continue
        failed_policies = {p.params.get("policy") for p in bad}
        kept = [p for p in ps if p.name not in failed_policies]
        lv = levels.value
        n_levels = len(lv["levels"])
        report = WorkloadReport(
            workload=workload,
            policies=tuple(kept),
            mode=_StackMode.name if whole_stack else _DriverMode.name,
            npu_policy=label,
            model_size=size.value,
            channels=lv["channels"],
            isolated_ms={p.name: [t / 1e6 for t in isolated[p.name].value[0]] for p in kept},
            nominal_load=lv["nominal_load"],
            nominal=[runs[(p.name, 0)].value for p in kept],
        )
        for i in range(1, n_levels):
            factor, load = lv["levels"][i]
            report.sweep.append({"load": load, "rate_factor": factor, "runs": [runs[(p.name, i)].value for p in kept]})
        reports.append(report)
    return GridResult(reports, failures, len(points))
