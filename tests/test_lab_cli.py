"""``npuemu bench scheduling``: output, files, and one clear line for each kind of mistake."""

import json

import pytest
from click.testing import CliRunner

from framework.cli._bench import bench

WORKLOAD = """\
name = "tiny"
description = "a frame against batch work"
seed = 2
duration_ms = 300
device = "emu-gpu"

[sweep]
loads = [0.6]

[[task]]
name = "frame"
priority = 0
work_ms = 2.0
layers = 1
arrival = { kind = "periodic", period_ms = 25.0 }

[[task]]
name = "batch"
priority = 1000
work_ms = 20.0
arrival = { kind = "bursts", rate_hz = 10.0, size = 2, gap_ms = 0.0 }
"""


@pytest.fixture
def workload_file(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(WORKLOAD)
    return path


def run(*args):
    return CliRunner().invoke(bench, ["scheduling", "-q", *map(str, args)], catch_exceptions=False)


def test_prints_the_table_and_writes_json_and_a_png(tmp_path, workload_file):
    out = tmp_path / "out"
    result = run(workload_file, "--out", out)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "== tiny: a frame against batch work" in text
    for name in ("fcfs", "priority", "preempt-ckpt", "preempt-kill", "reference"):
        assert f"\n{name} " in text
    assert "ANTT by offered load" in text and "(PREMA reports 7.8x, 1.4x, 4.8x)" in text
    doc = json.loads((out / "scheduling.json").read_text())
    (w,) = doc["workloads"]
    assert w["workload"]["name"] == "tiny" and [s["load"] for s in w["sweep"]] == [0.6]
    fcfs = next(r for r in w["nominal"] if r["policy"] == "fcfs")
    assert fcfs["preemptions"] == 0 and fcfs["requests"] == len(fcfs["jobs"]) > 10
    # The table shows the JSON's numbers.
    row = next(line for line in text.splitlines() if line.startswith("fcfs "))
    assert row.split()[1] == f"{fcfs['antt']:.2f}" and row.split()[2] == f"{fcfs['stp']:.2f}"
    assert (out / "tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_table_comes_with_a_key_to_its_columns_once(tmp_path, workload_file):
    result = run(workload_file, workload_file, "--no-plot", "--policy", "preempt-kill", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.count("== tiny:") == 2
    # Under the first table, before the second.
    assert text.index("== tiny:") < text.index("\nkey (") < text.index("== tiny:", text.index("== tiny:") + 1)
    for column in ("ANTT", "STP", "fair", "SLA%", "hi p50, hi p99", "preempt", "ovh ms", "ovh%", "per task NTT"):
        lines = [line for line in text.splitlines() if line.startswith(f"  {column} ")]
        assert len(lines) == 1, column
    assert "ovh%     ovh ms over the run's useful work" in text and "137.5 = the" in text
    assert "1.375 times all the useful work done" in text
    # Kill-restart throws work away: its ovh% is the table's ovh ms over the useful channel time.
    (w,) = [json.loads((tmp_path / "scheduling.json").read_text())["workloads"][0]]
    kill = w["nominal"][0]
    assert kill["overhead_pct"] > 0
    useful = sum(w["isolated_ms"]["preempt-kill"][j[0]] for j in kill["jobs"] if j[4] == "COMPLETED")
    assert kill["overhead_pct"] == pytest.approx(100 * kill["preemption_overhead_ms"] / useful, rel=0.01)


def test_options_pick_policies_seed_k_and_loads(tmp_path, workload_file):
    out = tmp_path / "o"
    args = [workload_file, "--policy", "fcfs", "--policy", "preempt-ckpt", "--seed", 9, "--k", 2.5,
            "--loads", "0.4,0.8", "--no-plot", "--out", out]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert "\npriority " not in result.output and "\npreempt-ckpt " in result.output
    doc = json.loads((out / "scheduling.json").read_text())
    (w,) = doc["workloads"]
    assert w["workload"]["seed"] == 9 and w["workload"]["sla_k"] == 2.5
    assert [s["load"] for s in w["sweep"]] == [0.4, 0.8]
    assert [p["name"] for p in w["policies"]] == ["fcfs", "preempt-ckpt"]
    assert not (out / "tiny.png").exists()
    # Same arguments, same numbers.
    first = (out / "scheduling.json").read_text()
    assert run(*args).exit_code == 0
    assert (out / "scheduling.json").read_text() == first
    result = run(workload_file, "--no-sweep", "--no-plot", "--policy", "fcfs", "--out", out)
    assert "by offered load" not in result.output


def test_a_bundled_workload_by_name(tmp_path):
    result = run("nonesuch", "--out", tmp_path)
    assert result.exit_code == 2
    assert "no workload file 'nonesuch' and no bundled workload of that name (bundled: " in result.output
    assert "phone" in result.output


def test_the_bundled_phone_workload_overloaded_runs_to_the_end(tmp_path):
    # Issue 12: this command ended in a traceback (NpuLookupError: no work 155).
    result = run("phone", "--loads", "1.5", "--policy", "fcfs", "--no-plot", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    assert "ANTT by offered load" in result.output and "!!" not in result.output
    (w,) = json.loads((tmp_path / "scheduling.json").read_text())["workloads"]
    (over,) = w["sweep"][0]["runs"]
    assert over["completed"] == over["requests"] > 150 and over["wrong_results"] == 0


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--policy", "random"], 2, "unknown policy 'random' (known: fcfs, priority"),
        (["--loads", "0.5,lots"], 2, "'0.5,lots' is not a comma-separated list of numbers"),
        (["--loads", "0"], 2, "an offered load must be in (0, 10]"),
        (["--k", "0.5"], 2, "--k"),
        (["--driver", "/nonexistent.so"], 1, "Error: no driver at '/nonexistent.so'"),
    ],
)
def test_bad_options_get_one_clear_line(tmp_path, workload_file, args, code, message):
    result = run(workload_file, "--out", tmp_path, *args)
    assert result.exit_code == code
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_bad_workload_file_is_one_line_naming_the_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(WORKLOAD.replace("rate_hz = 10.0", "rate_hz = -1.0"))
    result = run(bad, "--out", tmp_path)
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: bad.toml: task[1] (batch).arrival.rate_hz: must be a number > 0, got -1.0"
    )
    assert not (tmp_path / "scheduling.json").exists()
