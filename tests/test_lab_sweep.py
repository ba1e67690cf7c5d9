"""Sweeps on Dask: the same numbers as a serial run, failures reported with their parameters,
partial results kept when interrupted, and nothing left running."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from framework import lab
from framework.cli._bench import bench
from framework.lab import LabRunError

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = {
    "name": "duel",
    "seed": 5,
    "duration_ms": 300,
    "device": "emu-gpu",
    "slices_per_operation": 4,
    "sweep": {"loads": [0.5, 0.9]},
    "task": [
        {"name": "frame", "priority": 0, "work_ms": 2.0, "size_mb": 10, "layers": 1,
         "arrival": {"kind": "periodic", "period_ms": 20, "phase_ms": 3, "jitter_ms": 2}},
        {"name": "batch", "priority": 1000, "work_ms": 20.0, "size_mb": 100, "layers": 2,
         "arrival": {"kind": "bursts", "rate_hz": 8, "size": 3, "gap_ms": 1}},
    ],
}


def grid():
    w = lab.parse_workload(WORKLOAD, source="duel")
    return [w, w.with_seed(6)]


def policies(*names):
    return [p for p in lab.builtin_policies() if p.name in names]


def not_a_driver(tmp_path):
    # A file that is not a driver: opening it fails inside the points that use it.
    path = tmp_path / "notadriver.so"
    path.write_bytes(b"this is not an ELF file\n")
    return lab.driver_policy(path)


def children():
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.fixture(scope="module")
def cluster():
    before = children()
    with lab.open_executor(workers=2) as executor:
        assert executor.workers == 2
        yield executor
    # The cluster's worker processes are gone with it.
    deadline = time.monotonic() + 30
    while children() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not children() - before


def document(result):
    return json.dumps(lab.report_json(result.reports), indent=1)


def test_a_grid_on_dask_gives_byte_identical_results_to_a_serial_run(cluster):
    ps = policies("fcfs", "preempt-ckpt", "reference")
    serial = lab.run_grid(grid(), ps)
    fanned = lab.run_grid(grid(), ps, executor=cluster)
    assert serial.failures == fanned.failures == []
    # 2 workloads x (calibrate, its model sizes, 3 + 1 isolated, levels, 3 policies x 3 loads)
    assert serial.points == fanned.points == 2 * (2 + 4 + 1 + 9)
    assert [r.workload.seed for r in fanned.reports] == [5, 6]
    assert document(serial) == document(fanned)
    # The seeds differ, so the grid is not one run repeated.
    a, b = (r.run("fcfs")["jobs"] for r in serial.reports)
    assert a != b


@pytest.mark.parametrize("where", ["serial", "dask"])
def test_a_failing_point_is_reported_with_its_parameters_while_the_rest_go_on(tmp_path, cluster, where):
    bad = not_a_driver(tmp_path)
    seen = []
    result = lab.run_grid(grid()[:1], [*policies("fcfs", "priority"), bad], executor=cluster if where == "dask" else None,
                          on_point=seen.append)
    # The bad policy's isolated measurement failed; its runs were not attempted.
    stages = sorted((f["stage"], str(f["load"])) for f in result.failures)
    assert stages == [("isolated", "None"), ("run", "0.5"), ("run", "0.9"), ("run", "nominal")]
    for f in result.failures:
        assert (f["workload"], f["seed"], f["policy"]) == ("duel", 5, "driver:notadriver")
    isolated = next(f for f in result.failures if f["stage"] == "isolated")
    assert "notadriver.so" in isolated["error"]
    assert all("UpstreamFailed" in f["error"] for f in result.failures if f["stage"] == "run")
    # The others ran in full, with the numbers they have alone.
    (report,) = result.reports
    assert [p.name for p in report.policies] == ["fcfs", "priority"]
    alone = lab.run_workload(grid()[0], policies("fcfs", "priority"))
    assert json.dumps(report.to_dict()) == json.dumps(alone.to_dict())
    assert len(seen) == result.points and seen[-1]["done"] == seen[-1]["total"] == result.points


def test_the_single_workload_api_still_raises_the_first_failure(tmp_path):
    with pytest.raises(LabRunError, match="notadriver"):
        lab.run_workload(grid()[0], [*policies("fcfs"), not_a_driver(tmp_path)], sweep=False)


@pytest.fixture
def workload_file(tmp_path):
    # WORKLOAD as a TOML file.
    lines = ['name = "duel"', 'seed = 5', 'duration_ms = 300', 'device = "emu-gpu"', 'slices_per_operation = 4',
             "", "[sweep]", "loads = [0.5, 0.9]"]
    for t in WORKLOAD["task"]:
        arrival = ", ".join(f"{k} = {json.dumps(v)}" for k, v in t["arrival"].items())
        lines += ["", "[[task]]"] + [f"{k} = {json.dumps(v)}" for k, v in t.items() if k != "arrival"]
        lines.append(f"arrival = {{ {arrival} }}")
    path = tmp_path / "duel.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_cli_runs_a_seed_axis_and_reports_failures_with_exit_status_1(tmp_path, workload_file):
    bad = tmp_path / "notadriver.so"
    bad.write_bytes(b"not a driver\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(bench, ["scheduling", str(workload_file), "--seeds", "5,6", "--policy", "fcfs",
                                        "--driver", str(bad), "--no-plot", "--no-sweep", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "failed: workload duel, seed 5, stage isolated, policy driver:notadriver" in result.output
    doc = json.loads((out / "scheduling.json").read_text())
    assert [w["workload"]["seed"] for w in doc["workloads"]] == [5, 6]
    assert {f["policy"] for f in doc["failures"]} == {"driver:notadriver"}
    assert len(doc["failures"]) == 4  # its isolated point and its nominal run, per seed


def test_the_cli_fans_out_on_an_existing_scheduler_with_the_serial_numbers(tmp_path, workload_file, cluster):
    # --scheduler: a cluster someone else started (here the module's local one, by its address).
    runs = {}
    for name, extra in (("serial", []), ("remote", ["--scheduler", cluster.address])):
        out = tmp_path / name
        result = CliRunner().invoke(bench, ["scheduling", str(workload_file), "--seeds", "5,6", "--policy", "fcfs",
                                            "--policy", "preempt-ckpt", "--no-plot", "--out", str(out), *extra])
        assert result.exit_code == 0, result.output
        runs[name] = (out / "scheduling.json").read_text()
    assert runs["serial"] == runs["remote"]
    assert len(json.loads(runs["remote"])["workloads"]) == 2


@pytest.mark.parametrize("args, message", [
    (["--seeds", "1,x"], "is not a comma-separated list of integers"),
    (["--seeds", "1,1"], "seeds must be distinct"),
    (["--workers", "0"], "0 is not in the range x>=1"),
])
def test_bad_sweep_options_get_one_clear_line(workload_file, args, message):
    result = CliRunner().invoke(bench, ["scheduling", str(workload_file), "--no-plot", *args])
    assert result.exit_code == 2 and message in result.output


def test_an_interrupted_sweep_keeps_what_finished(tmp_path):
    # A real process, interrupted as a user's Ctrl-C would: it exits 130 and leaves the
    # finished runs in scheduling.partial.json, and no process behind.
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "npuemu"), "bench", "scheduling", "phone", "--whole-stack", "--no-plot",
         "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # The points are being run once it says how many there are.
        line = ""
        while "points on" not in line:
            line = proc.stderr.readline()
            assert line, "the sweep ended before running its points"
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    partial = json.loads((out / "scheduling.partial.json").read_text())
    assert "finished runs kept in" in err
    for point in partial["points"]:
        assert point["stage"] == "run" and point["summary"]["policy"] == point["policy"]
