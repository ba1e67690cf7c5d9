"""Tables for people, a PNG for the eye, JSON for everything else."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._lab import PREMA_REPORTED, WorkloadReport, prema_comparison

__all__ = ["format_report", "format_prema", "METRICS_KEY", "report_json", "write_json", "report_figure", "plot_report"]

#: What each column of the table means, as ``_lab.summarize`` computes it.
METRICS_KEY = """\
key (a task is one stream of requests; a request's NTT is its turnaround over its turnaround alone on an idle device):
  ANTT     mean over the tasks of each task's mean NTT; 1 = no slowdown, lower is better ('-': a task completed nothing)
  STP      sum over the tasks of 1/NTT: how many tasks' worth of isolated progress; at most the task count
  fair     the least progressing task's 1/NTT over the most progressing one's: 1 = slowed alike, 0 = one starves
  SLA%     share of the SLA tasks' requests that completed within k x their isolated time (the header's 'SLA within kx')
  hi p50, hi p99  the SLA tasks' completed requests' turnaround percentiles, ms (nearest rank)
  preempt  preemptions (a running request paused for a more important one)
  ovh ms   preemption overhead: context saves, plus the channel time preempted requests took beyond their
           isolated channel time (restores, work redone after a kill)
  ovh%     ovh ms over the run's useful work (every completed request's isolated channel time): 137.5 = the
           preemptions cost 1.375 times all the useful work done, 0 = they cost nothing
  per task NTT  each task's mean NTT"""


def _f(value: float | None, spec: str, width: int) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return f"{'-':>{width}}"
    return f"{value:{width}{spec}}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def format_report(report: WorkloadReport, *, key: bool = True) -> str:
    """The workload's tables: every policy at the nominal load, then the sweep; ``key``: with ``METRICS_KEY``."""
    w = report.workload
    lines = []
    n = report.nominal[0]["requests"]
    lines.append(f"== {w.name}: {w.description}" if w.description else f"== {w.name}")
    lines.append(
        f"{w.device} ({report.channels} channel{'s' if report.channels != 1 else ''}), {n} requests over "
        f"{w.duration_ms:g} ms, offered load {report.nominal_load:.2f}, seed {w.seed}, SLA within {w.sla_k:g}x isolated"
    )
    if report.mode == "whole-stack":
        lines.append(f"whole stack: apps -> npu service (load policy {report.npu_policy}) -> HAL -> driver, "
                     f"in one process on trio's MockClock; models of {report.model_size['layers']} layers")
        for t, floor in zip(w.tasks, report.model_size.get("floor_ms", [])):
            if t.work_ms < floor:
                lines.append(f"  {t.name}: work_ms {t.work_ms:g} is below what a request of its {t.size_mb:g} MB model "
                             f"takes on {w.device} (its weights stream on every inference): {floor:.2f} ms with one layer")
        for run in [*report.nominal, *(r for level in report.sweep for r in level["runs"])]:
            if run.get("npu_policy_errors"):
                lines.append(f"  the npu policy failed {run['npu_policy_errors']} time(s) under {run['policy']} at load "
                             f"{run['offered_load']:.2f} (the service fell back and went on); latest: "
                             + "; ".join(run["npu_policy_latest_errors"][-3:]))
    else:
        lines.append("driver mode: requests straight to the driver on its virtual clock")
    hosts = sorted({Path(p.driver_path).name for p in report.policies if p.driver_path and p.preemptive is not None})
    if hosts:
        lines.append(f"the lab's policies set the hardware's modes on {', '.join(hosts)} "
                     f"(the reference driver has no {w.device})")
    ref = next(iter(report.isolated_ms.values()))
    lines.append("tasks: " + "; ".join(
        f"{t.name} (prio {t.priority}{', SLA' if t.sla else ''}) {iso:.2f} ms alone"
        for t, iso in zip(w.tasks, ref)
    ))
    lines.append("")
    names = [t.name for t in w.tasks]
    width = max(8, *(len(x) for x in names))
    head = (f"{'policy':14} {'ANTT':>6} {'STP':>5} {'fair':>5} {'SLA%':>6} {'hi p50':>7} {'hi p99':>7} "
            f"{'preempt':>7} {'ovh ms':>7} {'ovh%':>5} |" + "".join(f" {x:>{width}}" for x in names))
    lines.append(head)
    lines.append(f"{'':14} {'':>6} {'':>5} {'':>5} {'':>6} {'ms':>7} {'ms':>7} {'':>7} {'':>7} {'':>5} |"
                 + "".join(f" {'NTT':>{width}}" for _ in names))
    lines.append("-" * len(head))
    for r in report.nominal:
        if r.get("error"):
            lines.append(f"{r['policy']:14} failed: see below")
            continue
        sla = None if r["sla_satisfaction"] is None else 100 * r["sla_satisfaction"]
        lines.append(
            f"{r['policy']:14} {_f(r['antt'], '.2f', 6)} {_f(r['stp'], '.2f', 5)} {_f(r['fairness'], '.2f', 5)} "
            f"{_f(sla, '.1f', 6)} {_f(r['high_p50_ms'], '.2f', 7)} {_f(r['high_p99_ms'], '.2f', 7)} "
            f"{r['preemptions']:7d} {_f(r['preemption_overhead_ms'], '.2f', 7)} {_f(r['overhead_pct'], '.1f', 5)} |"
            + "".join(f" {_f(t['ntt'], '.2f', width)}" for t in r["tasks"])
        )
    for r in report.nominal:
        if r.get("error"):
            lines.append(f"!! {r['policy']}: {r['error']}")
        for message in r.get("log", []):
            lines.append(f"   {r['policy']}: {message}")
    problems = [r for r in report.nominal if r["failed"] or r["wrong_results"] or r["events_dropped"]]
    for r in problems:
        lines.append(f"!! {r['policy']}: {r['failed']} requests failed, {r['wrong_results']} wrong results, "
                     f"{r['events_dropped']} events dropped")
    if key:
        lines.append("")
        lines.append(METRICS_KEY)
    if report.sweep:
        lines.append("")
        loads = [s["load"] for s in report.sweep]
        for key, title, spec, scale in (
            ("antt", "ANTT", ".2f", 1),
            ("stp", "STP", ".2f", 1),
            ("sla_satisfaction", "SLA %", ".1f", 100),
            ("high_p99_ms", "high-priority p99 ms", ".1f", 1),
        ):
            lines.append(f"{title + ' by offered load':38}" + "".join(f" {x:>7.2f}" for x in loads))
            for p in report.policies:
                cells = []
                for s in report.sweep:
                    v = next(r[key] for r in s["runs"] if r["policy"] == p.name)
                    cells.append(_f(None if v is None else v * scale, spec, 7))
                lines.append(f"  {p.name:36}" + "".join(f" {c}" for c in cells))
    cmp_ = prema_comparison(report)
    if cmp_:
        c = cmp_["nominal"]
        lines.append("")
        lines.append(
            f"{cmp_['preemptive']} over {cmp_['baseline']} at load {c['load']:.2f}: ANTT {_x(c['latency_x'])} lower, "
            f"STP {_x(c['throughput_x'])}, SLA {_x(c['sla_x'])}, high-priority mean latency {_x(c['high_latency_x'])} lower "
            f"(PREMA reports 7.8x, 1.4x, 4.8x)"
        )
        if cmp_["sweep"]:
            top = max(cmp_["sweep"], key=lambda s: s["load"])
            lines.append(
                f"  at the sweep's highest load {top['load']:.2f}: ANTT {_x(top['latency_x'])}, "
                f"STP {_x(top['throughput_x'])}, SLA {_x(top['sla_x'])}"
            )
    if cmp_ and any(p.name == "prema" for p in report.policies):
        lines.append("")
        lines.append(format_prema(report))
    return "\n".join(lines)


#: The paper's names for the lab's policies, where they are the paper's baselines.
PAPER_NAMES = {"fcfs": "NP-FCFS", "priority": "NP-HPF", "preempt-ckpt": "P-HPF (ckpt)", "preempt-kill": "P-HPF (kill)",
               "p-sjf": "P-SJF", "token": "TOKEN", "prema": "PREMA", "prema-checkpoint": "PREMA static ckpt",
               "prema-kill": "PREMA static kill", "prema-drain": "NP-PREMA (drain)"}


def format_prema(report: WorkloadReport, baseline: str = "fcfs") -> str:
    """PREMA's metrics for every policy, and their ratios over NP-FCFS beside the paper's.

    ANTT, STP and fairness are over the workload's tasks (streams), ANTT/req
    over its requests (the paper's tasks are single inferences); SLA% is the
    high-priority requests' share within k x their isolated time.
    """
    cmp_ = prema_comparison(report, baseline)
    ratios = cmp_["policies"]["nominal"]
    lines = [f"PREMA (Choi and Rhu, HPCA 2020) side by side, at offered load {report.nominal_load:.2f} "
             f"(x: ratio over NP-FCFS = {baseline}; ANTT x = how many times lower)"]
    head = (f"{'policy':16} {'paper':18} {'ANTT':>6} {'ANTT/req':>8} {'STP':>5} {'fair':>5} {'SLA%':>6} {'preempt':>7} |"
            f" {'ANTT x':>7} {'/req x':>7} {'STP x':>6} {'SLA x':>6}")
    lines.append(head)
    lines.append("-" * len(head))
    for r in report.nominal:
        name = r["policy"]
        if r.get("error"):
            lines.append(f"{name:16} {PAPER_NAMES.get(name, ''):18} failed: {r['error']}")
            continue
        x = ratios[name]
        sla = None if r["sla_satisfaction"] is None else 100 * r["sla_satisfaction"]
        lines.append(
            f"{name:16} {PAPER_NAMES.get(name, ''):18} {_f(r['antt'], '.2f', 6)} {_f(r['antt_requests'], '.2f', 8)} "
            f"{_f(r['stp'], '.2f', 5)} {_f(r['fairness'], '.2f', 5)} {_f(sla, '.1f', 6)} {r['preemptions']:7d} |"
            f" {_x(x['latency_x']):>7} {_x(x['request_latency_x']):>7} {_x(x['throughput_x']):>6} {_x(x['sla_x']):>6}")
    p = PREMA_REPORTED
    lines.append(f"{'paper: PREMA over NP-FCFS (its workloads, its NPU)':{len(head) - 33}} |"
                 f" {_x(p['latency_x']):>7} {'':>7} {_x(p['throughput_x']):>6} {_x(p['sla_x']):>6}")
    for level in cmp_["policies"]["sweep"]:
        x = level["ratios"].get("prema")
        if x:
            lines.append(f"  prema at offered load {level['load']:.2f}: ANTT {_x(x['latency_x'])} lower "
                         f"(per request {_x(x['request_latency_x'])}), STP {_x(x['throughput_x'])}, "
                         f"SLA {_x(x['sla_x'])}")
    return "\n".join(lines)


def report_json(reports: Sequence[WorkloadReport], *, seed_override: int | None = None) -> dict[str, Any]:
    """Every number of every workload, as one JSON-able document."""
    import npuhal

    return {
        "lab": "npuemu scheduling lab",
        "format": 1,
        "c_layer_build": npuhal.BUILD_ID,
        "seed_override": seed_override,
        "workloads": [r.to_dict() for r in reports],
    }


def write_json(document: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # allow_nan=False: a NaN sneaking into the numbers is a bug to see, not JSON to emit.
    path.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n")
    return path


def report_figure(report: WorkloadReport) -> Any:
    """The 2x3 ``matplotlib`` figure: ANTT, STP, fairness, SLA, high-priority p99 against load;
    per-task NTT at the nominal load.  Every panel has its legend.  Close it with ``plt.close``."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    levels = [(report.nominal_load, report.nominal)] + [(s["load"], s["runs"]) for s in report.sweep]
    levels.sort(key=lambda x: x[0])
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    panels = (
        ("antt", "ANTT (lower is better)", 1, axes[0][0], True),
        ("stp", "STP (higher is better)", 1, axes[0][1], False),
        ("fairness", "fairness (min NP / max NP)", 1, axes[0][2], False),
        ("sla_satisfaction", f"SLA satisfaction % (within {report.workload.sla_k:g}x isolated)", 100, axes[1][0], False),
        ("high_p99_ms", "high-priority p99 latency (ms)", 1, axes[1][1], True),
    )
    markers = "os^vDPX*"
    for key, title, scale, ax, log in panels:
        for i, p in enumerate(report.policies):
            xs, ys = [], []
            for load, runs in levels:
                v = next(r[key] for r in runs if r["policy"] == p.name)
                if v is not None:
                    xs.append(load)
                    ys.append(v * scale)
            # A driver's own modes may coincide with a lab policy's (the reference
            # driver's do): hollow and dashed, so the line beneath stays visible.
            own = p.scheduling is None and p.preemption is None
            ax.plot(xs, ys, marker=markers[i % len(markers)], linestyle="--" if own else "-", label=p.name,
                    markerfacecolor="none" if own else None, markersize=9 if own else 6)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("offered load")
        ax.axvline(report.nominal_load, color="grey", linewidth=0.6, linestyle=":",
                   label=f"nominal load {report.nominal_load:.2f}")
        if log:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    ax = axes[1][2]
    tasks = [t.name for t in report.workload.tasks]
    n = len(report.policies)
    bar = 0.8 / n
    for i, r in enumerate(report.nominal):
        if r.get("error"):
            continue
        ax.bar([x + i * bar for x in range(len(tasks))], [t["ntt"] or 0 for t in r["tasks"]], bar, label=r["policy"])
    ax.set_xticks([x + bar * (n - 1) / 2 for x in range(len(tasks))], tasks, fontsize=8, rotation=20, ha="right")
    ax.set_yscale("log")
    ax.set_title(f"per-task NTT at the nominal load {report.nominal_load:.2f}", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    w = report.workload
    mode = f", whole stack ({report.npu_policy})" if report.mode == "whole-stack" else ""
    fig.suptitle(f"{w.name} on {w.device} ({report.channels} ch){mode}, seed {w.seed}: {w.description}", fontsize=11)
    fig.tight_layout()
    return fig


def plot_report(report: WorkloadReport, path: str | Path) -> Path:
    """``report_figure`` as a PNG at ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = report_figure(report)
    import matplotlib.pyplot as plt

    try:
        fig.savefig(path, dpi=90)
    finally:
        plt.close(fig)
    return path
