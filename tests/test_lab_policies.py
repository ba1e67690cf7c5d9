"""Each policy's defining behaviour, visible in the lab's numbers; repeatability; run errors.

One small workload on one channel (emu-gpu): a short high-priority frame every
20 ms against long low-priority jobs that keep the channel busy.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import npuhal
from framework import lab
from framework.lab import LabRunError

ROOT = Path(__file__).resolve().parents[1]
LAYERS, SLICES = 2, 8
HI_MS, LO_MS = 2.0, 30.0


def workload(seed=5, device="emu-gpu", **changes):
    data = {
        "name": "duel",
        "seed": seed,
        "duration_ms": 600,
        "device": device,
        "slices_per_operation": SLICES,
        "sweep": {"loads": [0.5, 0.9]},
        "task": [
            {"name": "frame", "priority": 0, "work_ms": HI_MS, "size_mb": 10, "layers": 1,
             "arrival": {"kind": "periodic", "period_ms": 20, "phase_ms": 3, "jitter_ms": 2}},
            # Batch work comes in threes, so that a queue of it forms.
            {"name": "batch", "priority": 1000, "work_ms": LO_MS, "size_mb": 100, "layers": LAYERS,
             "arrival": {"kind": "bursts", "rate_hz": 8, "size": 3, "gap_ms": 1}},
        ],
    }
    data.update(changes)
    return lab.parse_workload(data, source="duel")


@pytest.fixture(scope="module")
def report():
    return lab.run_workload(workload(), lab.builtin_policies())


def jobs(run, task=None):
    # [task, arrival, start, end, reason, pauses, busy]
    return [j for j in run["jobs"] if task is None or j[0] == task]


def test_every_request_completes_with_the_isolated_result_under_every_policy(report):
    for run in report.nominal + [r for s in report.sweep for r in s["runs"]]:
        assert run["completed"] == run["requests"] > 10, run["policy"]
        assert run["wrong_results"] == 0 and run["events_dropped"] == 0
        assert all(j[4] == "COMPLETED" for j in run["jobs"])
    assert report.isolated_ms["fcfs"] == pytest.approx([HI_MS, LO_MS], rel=1e-3)


def frames_passed_over(run):
    """Batch jobs that the channel started while a frame was already waiting."""
    frames = jobs(run, 0)
    return [b for b in jobs(run, 1) if [f for f in frames if f[1] < b[2] < f[2]]]


def test_fcfs_never_preempts_and_starts_requests_in_arrival_order(report):
    run = report.run("fcfs")
    assert run["preemptions"] == 0 and run["preemption_overhead_ms"] == 0
    starts = [j[2] for j in sorted(run["jobs"], key=lambda j: j[1])]
    assert starts == sorted(starts)
    # And so frames wait behind queued batch work that merely arrived first.
    assert frames_passed_over(run)
    assert run["tasks"][0]["p99_ms"] > 2 * LO_MS


def test_nonpreemptive_priority_never_preempts_and_never_starts_batch_work_while_a_frame_waits(report):
    run = report.run("priority")
    assert run["preemptions"] == 0
    # The channel never chose batch work while a frame waited...
    assert frames_passed_over(run) == []
    # ...but a frame does wait for the batch job already running: at most one of them.
    waits = [f[2] - f[1] for f in jobs(run, 0)]
    assert max(waits) > 1 and max(waits) <= LO_MS + 1e-6
    assert run["tasks"][0]["ntt"] < report.run("fcfs")["tasks"][0]["ntt"]


def test_preemption_cuts_the_frame_tail_to_one_slice_plus_a_save(report):
    ckpt, kill = report.run("preempt-ckpt"), report.run("preempt-kill")
    slice_ms = LO_MS / (LAYERS * SLICES)
    for run in (ckpt, kill):
        assert run["preemptions"] > 0
        # DESIGN.md's budget: a high-priority job waits at most one slice plus a context save.
        assert run["high_p99_ms"] <= HI_MS + slice_ms + 0.1, run["policy"]
        for other in ("fcfs", "priority"):
            assert run["high_p99_ms"] * 3 < report.run(other)["high_p99_ms"]
        assert run["sla_satisfaction"] == 1.0
    assert report.run("fcfs")["sla_satisfaction"] < 1.0


def test_kill_restart_throws_away_work_that_a_checkpoint_keeps(report):
    ckpt, kill = report.run("preempt-ckpt"), report.run("preempt-kill")
    assert 0 < ckpt["preemption_overhead_ms"] < kill["preemption_overhead_ms"]
    assert ckpt["context_save_ms"] > 0 and kill["context_save_ms"] == 0
    assert kill["tasks"][1]["ntt"] > ckpt["tasks"][1]["ntt"]
    # Redone work inflates the batch's channel time; a checkpoint only adds its restores.
    iso = report.isolated_ms["preempt-ckpt"][1]
    assert max(j[6] for j in jobs(ckpt, 1)) < iso * 1.05
    assert max(j[6] for j in jobs(kill, 1)) > iso * 1.2


def test_the_reference_driver_schedules_as_preemptive_priority_with_checkpoints(report):
    ref, ckpt = report.run("reference"), report.run("preempt-ckpt")
    strip = lambda r: {k: v for k, v in r.items() if k != "policy"}  # noqa: E731
    assert strip(ref) == strip(ckpt)


def test_the_sweep_loads_the_device_as_asked_and_fcfs_degrades_fastest(report):
    assert [s["load"] for s in report.sweep] == [0.5, 0.9]
    for s in report.sweep:
        assert report.run("fcfs", s["load"])["offered_load"] == pytest.approx(s["load"], rel=1e-3)
    low, high = (report.run("fcfs", x)["antt"] for x in (0.5, 0.9))
    assert high > low
    cmp_ = lab.prema_comparison(report)
    assert cmp_["nominal"]["latency_x"] > 1 and cmp_["nominal"]["sla_x"] > 1


def test_overload_runs_to_the_end_and_reports(monkeypatch):
    """Past load 1 a backlog builds up and drains after the last arrival: every request is still accounted.

    Issue 12: at load 1.5 the lab read that drain's hundreds of ends in one go,
    after the driver had forgotten the oldest (``NpuLookupError: no work 74``);
    read in one go, a large enough backlog's events would also overflow the
    hardware's event ring.  Time now moves in windows with the events read after
    each, and results land in buffers of the lab's own.
    """
    batches = []
    drain = npuhal.Driver.drain_events

    def recorded(self):
        events = drain(self)
        batches.append(len(events))
        return events

    monkeypatch.setattr(npuhal.Driver, "drain_events", recorded)
    policies = [p for p in lab.builtin_policies() if p.name in ("fcfs", "preempt-ckpt", "preempt-kill")]
    report = lab.run_workload(workload(sweep={"loads": [1.5, 3.0]}), policies)
    for s in report.sweep:
        for run in s["runs"]:
            assert run["completed"] == run["requests"] > 60, (s["load"], run["policy"])
            assert run["wrong_results"] == 0 and run["events_dropped"] == 0
    fcfs = [report.run("fcfs", load)["antt"] for load in (None, 1.5, 3.0)]
    assert fcfs == sorted(fcfs) and fcfs[2] > 10 * fcfs[0]
    # The 155 requests at load 3 leave a backlog of about 90 behind the last arrival;
    # their events were read a window at a time, not all at once.
    assert max(batches) < 30
    text = lab.format_report(report)
    assert "!!" not in text and "ANTT by offered load" in text


def test_every_panel_of_the_figure_has_a_legend_naming_every_policy(report):
    import matplotlib.pyplot as plt

    fig = lab.report_figure(report)
    try:
        assert len(fig.axes) == 6
        names = [p.name for p in report.policies]
        for ax in fig.axes:
            legend = ax.get_legend()
            assert legend is not None, ax.get_title()
            labels = [t.get_text() for t in legend.get_texts()]
            assert labels[:len(names)] == names, ax.get_title()
            if ax.get_xlabel() == "offered load":
                # The dotted line at the nominal load says what it is.
                assert labels[len(names):] == [f"nominal load {report.nominal_load:.2f}"]
    finally:
        plt.close(fig)


def test_same_seed_same_numbers_other_seed_other_numbers():
    policies = [p for p in lab.builtin_policies() if p.name in ("fcfs", "preempt-ckpt")]
    first = json.dumps(lab.run_workload(workload(), policies).to_dict())
    second = json.dumps(lab.run_workload(workload(), policies).to_dict())
    assert first == second
    other = json.dumps(lab.run_workload(workload(seed=6), policies).to_dict())
    assert other != first


def test_run_errors_are_clear():
    fcfs = [lab.builtin_policies()[0]]
    with pytest.raises(LabRunError, match=r"no driver has the device 'emu-tpu' \(the reference driver has emu-npu"):
        lab.run_workload(workload(device="emu-tpu"), fcfs, sweep=False)
    big = workload()
    big = lab.parse_workload({**big.raw, "task": [{**t, "size_mb": 1500} for t in big.raw["task"]]}, source="big")
    with pytest.raises(LabRunError, match=r"do not fit emu-gpu's 2048 MiB"):
        lab.run_workload(big, fcfs, sweep=False)
    tiny = lab.parse_workload({**workload().raw, "task": [{**workload().raw["task"][0], "work_ms": 0.001}]},
                              source="tiny")
    with pytest.raises(LabRunError, match=r"work_ms 0.001 is below what its model costs"):
        lab.run_workload(tiny, fcfs, sweep=False)
    with pytest.raises(LabRunError, match="no driver at"):
        lab.driver_policy("/nonexistent/driver.so")


def _build(tmp_path, src):
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("make or cc is missing")
    out = tmp_path / (Path(src).stem + ".so")
    done = subprocess.run(["make", "-s", "driver", f"SRC={src}", f"OUT={out}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out


def test_a_driver_so_is_measured_with_its_own_scheduling(tmp_path):
    good = lab.driver_policy(_build(tmp_path, "csrc/drivers/template/template.c"))
    # The same template, except that it hands the hardware one priority for every job.
    flat = lab.driver_policy(_build(tmp_path, "tests/drivers/ignores_priority.c"))
    report = lab.run_workload(workload(device="tmpl-npu"), [good, flat], sweep=False)
    g, f = report.run("driver:template"), report.run("driver:ignores_priority")
    assert g["completed"] == g["requests"] and f["completed"] == f["requests"]
    assert g["preemptions"] > 0 and f["preemptions"] == 0
    assert g["high_p99_ms"] * 3 < f["high_p99_ms"]


def test_the_lab_policies_run_on_a_driver_whose_device_the_reference_driver_lacks(tmp_path):
    # `npuemu bench scheduling my.toml --driver mine.so` (a --help example) for a driver
    # author whose device is not one of the reference driver's: the hardware's modes are set
    # on their driver instead (the reference driver's own scheduling has no meaning there).
    mine = lab.driver_policy(_build(tmp_path, "csrc/drivers/template/template.c"))
    report = lab.run_workload(workload(device="tmpl-npu"), [*lab.builtin_policies(), mine], sweep=False)
    assert [p.name for p in report.policies] == ["fcfs", "priority", "preempt-ckpt", "preempt-kill", "driver:template"]
    assert {p.driver_path for p in report.policies} == {mine.driver_path}
    for run in report.nominal:
        assert run["completed"] == run["requests"] and run["wrong_results"] == 0
    assert report.run("fcfs")["preemptions"] == report.run("priority")["preemptions"] == 0
    assert report.run("preempt-ckpt")["preemptions"] > 0 and report.run("preempt-kill")["context_save_ms"] == 0
    assert "the lab's policies set the hardware's modes on template.so (the reference driver has no tmpl-npu)" in \
        lab.format_report(report)
