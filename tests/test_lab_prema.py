"""PREMA's rules on hand-worked cases; Python driver policies run by the lab holding the queue.

The rules (``framework.lab._prema``): tokens start at the priority class's
weight (high 9, medium 3, low 1) and grow by weight x waited / isolated time
while a request waits; the threshold is the largest weight not above the
largest token; the candidates reach it; the shortest estimated job among them
runs; a running request leaves by DRAIN (nearly done), KILL (barely started)
or CHECKPOINT by its progress.
"""

import json

import pytest
from click.testing import CliRunner

import npuhal
from framework import lab
from framework.cli._bench import bench
from framework.lab import Arrived, JobView, Mechanism, TaskInfo, View

MS = 1_000_000


def task(index, priority, estimate_ms, name=None):
    return TaskInfo(index, name or f"t{index}", priority, priority == 0, int(estimate_ms * MS), 4)


def job(id_, t, arrival_ms=0.0, executed_ms=0.0, state="waiting"):
    return JobView(id_, t, int(arrival_ms * MS), state, int(executed_ms * MS), None, 0, 0)


def view(now_ms, running=(), ready=(), channels=1):
    trigger = Arrived(ready[-1] if ready else running[-1], int(now_ms * MS))
    free = max(0, channels - len(running))
    return View(int(now_ms * MS), channels, tuple(running), tuple(ready), free, False, trigger)


HIGH, MEDIUM, LOW = task(0, 0, 10), task(1, 500, 20), task(2, 1000, 40)


# ---- the rules, by hand ---------------------------------------------------------------


def test_priority_classes_weigh_nine_three_one():
    assert [lab.priority_weight(p) for p in (0, 333, 334, 666, 667, 1000)] == [9, 9, 3, 3, 1, 1]


def test_tokens_start_at_the_weight_and_grow_by_weight_times_slowdown_while_waiting():
    tokens = lab.Tokens()
    h, lo, run = job(1, HIGH, arrival_ms=0), job(2, LOW, arrival_ms=0), job(3, MEDIUM, arrival_ms=0, state="running")
    tokens.update(0, [h, lo], [run])
    assert (tokens[h], tokens[lo], tokens[run]) == (9, 1, 3)
    # 10 ms later: the high one waited its whole isolated time (slowdown 1: +9), the low
    # one a quarter of its 40 ms (+0.25); the running one gains nothing.
    tokens.update(10 * MS, [h, lo], [run])
    assert tokens[h] == pytest.approx(18) and tokens[lo] == pytest.approx(1.25) and tokens[run] == 3
    # A request first seen late is credited from its arrival.
    late = job(4, MEDIUM, arrival_ms=5)
    tokens.update(25 * MS, [late], [])
    assert tokens[late] == pytest.approx(3 + 3 * 20 / 20)


def test_the_threshold_is_the_largest_class_weight_not_above_the_largest_token():
    assert [lab.threshold(t) for t in (18, 9, 8.9, 3, 2.5, 1, 0.5)] == [9, 9, 3, 3, 1, 1, 1]


def test_candidates_reach_the_threshold_and_the_shortest_of_them_runs():
    tokens = lab.Tokens()
    a, b, c = job(1, HIGH, 0), job(2, MEDIUM, 0), job(3, LOW, 0)
    tokens.tokens.update({1: 9.0, 2: 3.5, 3: 1.0})
    assert lab.candidates([a, b, c], tokens) == [a]
    tokens.tokens.update({1: 4.0, 2: 3.5, 3: 1.0})
    assert lab.candidates([a, b, c], tokens) == [a, b]
    # Shortest estimated job: what is left of it; ties go to the earlier arrival.
    half_done_low = job(5, LOW, 0, executed_ms=35)  # 5 ms left of 40
    assert lab.shortest([a, b, half_done_low]) == half_done_low
    assert lab.shortest([job(7, HIGH, 2), job(6, HIGH, 1)]).id == 6


def test_the_mechanism_follows_the_running_requests_progress():
    assert lab.choose_mechanism(job(1, LOW, executed_ms=38)) is Mechanism.DRAIN  # 95% done
    assert lab.choose_mechanism(job(1, LOW, executed_ms=2)) is Mechanism.KILL  # 5%: little to lose
    assert lab.choose_mechanism(job(1, LOW, executed_ms=20)) is Mechanism.CHECKPOINT
    assert lab.choose_mechanism(job(1, LOW, executed_ms=20), drain_above=0.5) is Mechanism.DRAIN


def test_prema_preempts_a_long_low_request_for_an_arriving_high_one_by_checkpoint():
    prema = lab.Prema()
    low = job(1, LOW, arrival_ms=0, executed_ms=20, state="running")
    high = job(2, HIGH, arrival_ms=20)
    v = view(20, running=[low], ready=[high])
    assert prema.select(v) == high  # tokens 9 vs 1: only the high one is a candidate
    victim, how = prema.preempt(v, high)
    assert victim == low and how is Mechanism.CHECKPOINT
    assert prema.preempt(v, high) == (low, Mechanism.CHECKPOINT)
    assert lab.Prema(Mechanism.KILL).preempt(v, high) == (low, Mechanism.KILL)


def test_a_waiting_low_request_earns_its_way_among_the_candidates_and_wins_if_shorter():
    prema = lab.Prema()
    short_low = job(1, task(3, 1000, 2), arrival_ms=0)  # a 2 ms low-priority request
    long_high = job(2, task(4, 0, 50), arrival_ms=30)
    # At 30 ms the low one waited 15 times its isolated time: 1 + 15 = 16 tokens >= 9.
    v = view(30, ready=[short_low, long_high])
    assert prema.select(v) == short_low
    # Had it just arrived (1 token) the high one alone would be a candidate.
    fresh = lab.Prema()
    v = view(30, ready=[job(1, task(3, 1000, 2), arrival_ms=30), long_high])
    assert fresh.select(v) == long_high


def test_token_only_takes_the_most_tokens_not_the_shortest():
    tok = lab.TokenOnly()
    a, b = job(1, task(0, 0, 50), arrival_ms=0), job(2, task(1, 0, 5), arrival_ms=10)
    v = view(10, ready=[a, b])  # a: 9 + 9*10/50 = 10.8, b: 9: both candidates
    assert tok.select(v) == a and lab.Prema().select(v) == b


# ---- the mechanism: the lab holds the queue ----------------------------------------


def small(device="emu-gpu", seed=3, duration=400):
    return lab.parse_workload({
        "name": "small", "seed": seed, "duration_ms": duration, "device": device, "slices_per_operation": 4,
        "task": [
            {"name": "frame", "priority": 0, "work_ms": 2.0, "layers": 1,
             "arrival": {"kind": "poisson", "rate_hz": 40}},
            {"name": "mid", "priority": 500, "work_ms": 8.0, "layers": 2,
             "arrival": {"kind": "poisson", "rate_hz": 20}},
            {"name": "batch", "priority": 1000, "work_ms": 25.0, "layers": 3,
             "arrival": {"kind": "bursts", "rate_hz": 6, "size": 2, "gap_ms": 1}},
        ],
    }, source="small")


def lives(run):
    return [(j.task, j.arrival_ns, j.start_ns, j.end_ns, j.reason, j.pauses, j.busy_ns, j.correct) for j in run.jobs]


@pytest.mark.parametrize("device", ["emu-gpu", "emu-npu"])  # one channel, and two
def test_python_fcfs_gives_the_c_drivers_fcfs_run_exactly(device):
    w = small(device)
    cal = lab.calibrate(w)
    fcfs = lab.builtin_policies()[0]
    turn, busy, outs = lab.measure_isolated(w, cal, fcfs)
    arrivals = lab.generate_arrivals(w, 1.5)  # a queue forms
    c = lab.run_policy(w, cal, fcfs, arrivals, outs)
    py = lab.run_policy(w, cal, lab.python_policy("py-fcfs", "", lab.Fcfs), arrivals, outs, estimates_ns=busy)
    assert len(c.jobs) > 30 and max(j.start_ns - j.arrival_ns for j in c.jobs) > 10 * MS
    assert lives(py) == lives(c)
    assert py.makespan_ns == c.makespan_ns and py.log == []


def test_driver_next_event_is_where_advance_to_next_event_goes():
    with npuhal.Driver.open() as d:
        assert d.next_event_ns is None
        w = small()
        cal = lab.calibrate(w)
        dev = d.device_by_name("emu-gpu")
        h = d.load_model(dev, cal.models[2], cost_scale=cal.cost_scales[2])
        d.submit(h, [cal.inputs[2]], uid=10002, job_priority=0)
        at = d.next_event_ns
        assert at is not None and at > d.now_ns == 0
        assert d.now_ns == 0 and d.next_event_ns == at  # looking does not move time
        d.advance_to_next_event()
        assert d.now_ns == at


@pytest.fixture(scope="module")
def prema_report():
    w = small(duration=600)
    policies = [p for p in lab.builtin_policies() if p.name in ("fcfs", "preempt-ckpt")] + list(lab.python_policies())
    return lab.run_workload(w, policies, sweep=False)


def test_prema_and_the_baselines_complete_every_request_with_the_isolated_results(prema_report):
    for run in prema_report.nominal:
        assert "error" not in run, run.get("error")
        assert run["completed"] == run["requests"] > 20 and run["wrong_results"] == 0, run["policy"]


def test_prema_preempts_with_each_mechanism_and_serves_high_priority_better_than_fcfs(prema_report):
    fcfs, prema = prema_report.run("fcfs"), prema_report.run("prema")
    assert prema["preemptions"] > 0 and fcfs["preemptions"] == 0
    assert prema["sla_satisfaction"] > fcfs["sla_satisfaction"]
    assert prema["antt_requests"] < fcfs["antt_requests"]
    # Killing everything it preempts costs PREMA more than checkpointing does.
    assert prema_report.run("prema-kill")["preemption_overhead_ms"] > prema_report.run("prema-checkpoint")[
        "preemption_overhead_ms"]
    assert prema_report.run("prema-drain")["preemptions"] == 0


def test_the_prema_table_stands_beside_the_papers_ratios(prema_report):
    text = lab.format_report(prema_report, key=False)
    assert "PREMA (Choi and Rhu, HPCA 2020) side by side" in text
    section = text.split("side by side")[1]
    row = next(line for line in section.splitlines() if line.startswith("prema "))
    assert "PREMA" in row and row.count("x") >= 4
    assert "7.80x" in text and "1.40x" in text and "4.80x" in text
    ratios = lab.prema_comparison(prema_report)["policies"]["nominal"]
    fcfs, prema = prema_report.run("fcfs"), prema_report.run("prema")
    assert ratios["prema"]["latency_x"] == pytest.approx(fcfs["antt"] / prema["antt"])
    assert ratios["fcfs"]["sla_x"] == 1.0


# ---- a user's policy: from a file, its errors reported with the event --------------


BROKEN = """\
from framework.lab import DriverPolicy

class Broken(DriverPolicy):
    name = "broken"
    def __init__(self):
        self.calls = 0
    def select(self, view):
        if view.trigger.job.id == 5:
            return 1 / 0
        return min(view.ready, key=lambda j: j.arrival_ns, default=None) if view.free_channels else None

class Liar(Broken):
    name = "liar"
    def select(self, view):
        return "the big one"
"""


def test_a_broken_user_policy_is_reported_with_its_event_and_the_others_run(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(BROKEN)
    w = small()
    policies = [lab.builtin_policies()[0], lab.policy_file(f"{path}:Broken"), lab.policy_file(f"{path}:Liar")]
    report = lab.run_workload(w, policies, sweep=False)
    assert report.run("fcfs")["completed"] == report.run("fcfs")["requests"] > 10
    broken = report.run("py:broken")["error"]
    assert "select() raised ZeroDivisionError" in broken and "request 5" in broken and " ms" in broken
    assert "not one of the requests in its view" in report.run("py:liar")["error"]
    text = lab.format_report(report, key=False)
    assert "!! py:broken: policy broken: select() raised ZeroDivisionError" in text


def test_policy_files_from_the_cli_and_their_mistakes(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(BROKEN + "\nclass Fifo(Broken):\n    name = 'fifo'\n    def select(self, view):\n"
                    "        return min(view.ready, key=lambda j: j.arrival_ns, default=None) "
                    "if view.free_channels else (view.running[0] if view.running else None)\n")
    workload = tmp_path / "w.toml"
    workload.write_text('name = "w"\nduration_ms = 200\ndevice = "emu-gpu"\n[[task]]\nname = "a"\npriority = 0\n'
                        'work_ms = 3.0\nlayers = 1\narrival = { kind = "poisson", rate_hz = 50.0 }\n'
                        '[[task]]\nname = "b"\npriority = 1000\nwork_ms = 10.0\nlayers = 2\n'
                        'arrival = { kind = "poisson", rate_hz = 30.0 }\n')
    runner = CliRunner()
    result = runner.invoke(bench, ["scheduling", "-q", str(workload), "--no-sweep", "--no-plot", "--out",
                                   str(tmp_path / "out"), "--policy", "fcfs", "--policy", "prema",
                                   "--policy-file", f"{path}:Fifo", "--policy-file", f"{path}:Broken"],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "out" / "scheduling.json").read_text())
    runs = {r["policy"]: r for r in doc["workloads"][0]["nominal"]}
    assert runs["py:fifo"]["antt"] == pytest.approx(runs["fcfs"]["antt"])  # the same schedule as the C fcfs
    assert "ZeroDivisionError" in runs["py:broken"]["error"] and runs["prema"]["completed"] > 0
    for spec, message in ((f"{path}:Nope", "has no 'Nope'"), (f"{tmp_path}/none.py:X", "no such file"),
                          ("nocolon", "FILE.py:ClassName")):
        result = runner.invoke(bench, ["scheduling", "-q", str(workload), "--policy-file", spec])
        assert result.exit_code != 0 and message in result.output, result.output
    result = runner.invoke(bench, ["scheduling", "-q", str(workload), "--whole-stack", "--policy", "prema"])
    assert result.exit_code != 0 and "driver mode only" in result.output


def test_a_real_network_task_runs_under_prema_with_the_isolated_results():
    w = lab.parse_workload({
        "name": "nets", "seed": 1, "duration_ms": 150, "device": "emu-gpu", "slices_per_operation": 1,
        "task": [
            {"name": "recrop-hi", "model": "hand_recrop", "priority": 0, "work_ms": 4.0,
             "arrival": {"kind": "poisson", "rate_hz": 40}},
            {"name": "recrop-lo", "model": "hand_recrop", "priority": 1000, "work_ms": 30.0,
             "arrival": {"kind": "poisson", "rate_hz": 15}},
        ],
    }, source="nets")
    policies = [lab.builtin_policies()[0]] + [p for p in lab.python_policies() if p.name == "prema"]
    report = lab.run_workload(w, policies, sweep=False)
    assert report.isolated_ms["fcfs"] == pytest.approx([4.0, 30.0], rel=0.02)
    for run in report.nominal:
        assert run["completed"] == run["requests"] >= 4 and run["wrong_results"] == 0, run
    with pytest.raises(lab.LabRunError, match="partitions"):
        bad = lab.parse_workload({"name": "x", "duration_ms": 10, "device": "emu-gpu", "task": [
            {"name": "pose", "model": "pose_detection", "priority": 0, "work_ms": 5.0,
             "arrival": {"kind": "periodic", "period_ms": 5}}]}, source="x")
        lab.run_workload(bad, policies[:1], sweep=False)


def test_the_bundled_prema_workload_is_built_like_the_papers_and_runs_by_name_only():
    w = lab.load_workload(lab.default_workloads_dir() / "prema.toml")
    assert w.device == "emu-gpu" and not w.default_run
    assert {t.model for t in w.tasks} == {"hand_recrop", "face_detection_short_range", "hand_landmark_lite",
                                          "iris_landmark"}
    # Every network at every priority class: priorities are not tied to size.
    for model in {t.model for t in w.tasks}:
        assert sorted(lab.priority_weight(t.priority) for t in w.tasks if t.model == model) == [1, 3, 9]
    assert all(isinstance(t.arrival, lab.Poisson) for t in w.tasks)


def test_python_policies_and_a_users_file_fan_out_on_dask_with_the_serial_numbers(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(BROKEN)
    w = small(duration=200)
    ps = [lab.builtin_policies()[0], *[p for p in lab.python_policies() if p.name in ("prema", "prema-kill")],
          lab.policy_file(f"{path}:Broken")]
    serial = lab.run_grid([w], ps, sweep=False)
    with lab.open_executor(workers=2) as executor:
        fanned = lab.run_grid([w], ps, sweep=False, executor=executor)
    assert serial.failures == fanned.failures == []
    assert json.dumps(lab.report_json(serial.reports)) == json.dumps(lab.report_json(fanned.reports))
    assert "ZeroDivisionError" in fanned.reports[0].run("py:broken")["error"]
