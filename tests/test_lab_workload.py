"""Workload files: what they mean, the arrivals they give, and clear errors for bad ones."""

import pytest

from framework import lab
from framework.lab import Arrival, WorkloadError


def base(**top):
    data = {
        "name": "w",
        "seed": 3,
        "duration_ms": 1000,
        "device": "emu-gpu",
        "task": [
            {"name": "cam", "priority": 0, "work_ms": 5, "arrival": {"kind": "periodic", "period_ms": 100}},
            {"name": "bg", "priority": 1000, "work_ms": 40, "arrival": {"kind": "poisson", "rate_hz": 20}},
        ],
    }
    data.update(top)
    return data


def test_the_bundled_workloads_parse_and_name_their_high_priority_tasks():
    paths = sorted(lab.default_workloads_dir().glob("*.toml"))
    assert {p.stem for p in paths} >= {"phone", "mixed"}
    phone = lab.load_workload(lab.default_workloads_dir() / "phone.toml")
    assert phone.device == "emu-npu" and phone.sweep_loads
    # By default the SLA tasks are those at the most important priority.
    assert [t.name for t in phone.tasks if t.sla] == ["camera", "face-unlock"]


def test_defaults_and_explicit_sla():
    w = lab.parse_workload(base())
    assert w.sla_k == 4.0 and w.sweep_loads == () and w.seed == 3
    assert [t.sla for t in w.tasks] == [True, False]
    assert [t.uid for t in w.tasks] == [10000, 10001]
    data = base()
    data["task"][1]["sla"] = True
    data["task"][0]["sla"] = False
    assert [t.sla for t in lab.parse_workload(data).tasks] == [False, True]
    # Once one task says, the others are not SLA tasks unless they say so too.
    data = base()
    data["task"][1]["sla"] = True
    assert [t.sla for t in lab.parse_workload(data).tasks] == [False, True]


def test_periodic_arrivals_are_the_frames_and_poisson_has_its_rate():
    w = lab.parse_workload(base(duration_ms=10_000))
    arrivals = lab.generate_arrivals(w)
    cam = [a.time_ns for a in arrivals if a.task == 0]
    assert cam == [k * 100_000_000 for k in range(100)]
    bg = [a for a in arrivals if a.task == 1]
    # 20 Hz for 10 s: 200 expected, sd ~14.
    assert 150 < len(bg) < 250
    assert arrivals == sorted(arrivals)
    assert all(0 <= a.time_ns < 10_000 * 1_000_000 for a in arrivals)


def test_bursts_are_groups_gap_apart():
    data = base()
    data["task"] = [{"name": "a", "priority": 0, "work_ms": 1,
                     "arrival": {"kind": "bursts", "rate_hz": 2, "size": 3, "gap_ms": 10}}]
    times = [a.time_ns for a in lab.generate_arrivals(lab.parse_workload(base(task=data["task"], duration_ms=60_000)))]
    assert len(times) % 3 <= 2 and len(times) > 150
    # Within a burst the requests are exactly gap_ms apart.
    firsts = times[0:3]
    assert firsts[1] - firsts[0] == 10_000_000 and firsts[2] - firsts[1] == 10_000_000


def test_same_seed_same_arrivals_other_seed_other_arrivals_and_tasks_do_not_disturb_each_other():
    w = lab.parse_workload(base())
    assert lab.generate_arrivals(w) == lab.generate_arrivals(lab.parse_workload(base()))
    other = lab.generate_arrivals(w.with_seed(4))
    assert other != lab.generate_arrivals(w)
    # Adding a task leaves the others' streams alone.
    data = base()
    data["task"].append({"name": "x", "priority": 5, "work_ms": 1, "arrival": {"kind": "poisson", "rate_hz": 50}})
    more = lab.generate_arrivals(lab.parse_workload(data))
    assert [a for a in more if a.task == 1] == [a for a in lab.generate_arrivals(w) if a.task == 1]


def test_the_sweep_compresses_the_same_draws_and_reaches_the_asked_load():
    w = lab.parse_workload(base(duration_ms=5000))
    slow = [a.time_ns for a in lab.generate_arrivals(w, 1.0) if a.task == 1]
    fast = [a.time_ns for a in lab.generate_arrivals(w, 2.0) if a.task == 1]
    # Twice the rate: the same Poisson draws at half the gaps.
    assert fast[: len(slow) // 2] == pytest.approx([t / 2 for t in slow[: len(slow) // 2]], abs=1)
    iso = [5.0, 40.0]
    nominal = lab.offered_load(w, iso, channels=1)
    assert nominal == pytest.approx(10 * 5 / 1000 + 20 * 40 / 1000)
    f = lab.factor_for_load(w, iso, 1, 0.5)
    assert lab.offered_load(w, iso, 1, f) == pytest.approx(0.5)
    data = base()
    data["task"][1]["scale_with_load"] = False
    fixed = lab.parse_workload(data)
    with pytest.raises(WorkloadError, match="unscaled tasks offer alone"):
        lab.factor_for_load(fixed, iso, 1, 0.5)  # bg alone offers 0.8


def test_trace_from_a_file_relative_to_the_workload(tmp_path):
    (tmp_path / "t.csv").write_text("time_ms,who\n# a comment\n5.5,a\n\n1.0,b\n")
    (tmp_path / "w.toml").write_text(
        'name = "tr"\nduration_ms = 10\ndevice = "emu-gpu"\n'
        '[[task]]\nname = "a"\npriority = 0\nwork_ms = 1\narrival = { kind = "trace", file = "t.csv" }\n'
    )
    w = lab.load_workload(tmp_path / "w.toml")
    assert lab.generate_arrivals(w) == [Arrival(1_000_000, 0), Arrival(5_500_000, 0)]


def _task(**changes):
    t = {"name": "a", "priority": 0, "work_ms": 1, "arrival": {"kind": "poisson", "rate_hz": 1}}
    t.update(changes)
    return t


@pytest.mark.parametrize(
    "data, message",
    [
        ({**base(), "name": ""}, r"name: must be a non-empty string"),
        ({k: v for k, v in base().items() if k != "device"}, r"device: missing \(required\)"),
        (base(duration_ms=-5), r"duration_ms: must be a number > 0, got -5"),
        (base(colour="red"), r"colour: unknown key"),
        (base(task=[]), r"task: needs at least one \[\[task\]\] table"),
        (base(task=[_task(priority=1001)]), r"task\[0\] \(a\)\.priority: must be an integer in 0\.\.1000, got 1001"),
        (base(task=[_task(priority=1.5)]), r"priority: must be an integer, got float 1.5"),
        (base(task=[_task(work_ms="fast")]), r"work_ms: must be a finite number, got str 'fast'"),
        (base(task=[_task(arrival={"kind": "sometimes"})]), r"arrival\.kind: must be one of periodic, poisson"),
        (base(task=[_task(arrival={"kind": "poisson", "rate_hz": -2})]), r"arrival\.rate_hz: must be a number > 0"),
        (base(task=[_task(arrival={"kind": "poisson", "rate": 2})]), r"arrival\.rate_hz: missing"),
        (base(task=[_task(arrival={"kind": "poisson", "rate_hz": 2, "burst": 1})]), r"arrival\.burst: unknown key"),
        (base(task=[_task(arrival={"kind": "periodic", "period_ms": 10, "jitter_ms": 5})]),
         r"jitter_ms: must be less than half the period"),
        (base(task=[_task(arrival={"kind": "trace"})]), r"a trace needs exactly one of times_ms"),
        (base(task=[_task(arrival={"kind": "trace", "times_ms": [1, -1]})]), r"times_ms\[1\]: must be a time in ms >= 0"),
        (base(task=[_task(), _task()]), r"task\[1\] \(a\)\.name: a second task named 'a'"),
        (base(task=[_task(uid=5), _task(name="b", uid=5)]), r"uid: 5 is already task 'a'"),
        (base(task=[_task(sla=False)]), r"no task has sla = true"),
        (base(sla={"k": 0.5}), r"sla\.k: must be a number >= 1"),
        (base(sweep={"loads": [0.5, 0]}), r"sweep\.loads\[1\]: must be an offered load in \(0, 10\]"),
        (base(task=[_task(arrival={"kind": "poisson", "rate_hz": 1e9})]), r"the lab caps a run at"),
        (base(task="camera"), r"task: needs at least one"),
        (base(task=["camera"]), r"task\[0\] must be a table"),
    ],
)
def test_bad_workloads_get_an_error_that_says_where(data, message):
    with pytest.raises(WorkloadError, match=message) as info:
        lab.parse_workload(data, source="bad.toml")
    assert str(info.value).startswith("bad.toml: ")
    assert isinstance(info.value, ValueError) and isinstance(info.value, lab.LabError)


def test_bad_files(tmp_path):
    with pytest.raises(WorkloadError, match="no such workload file"):
        lab.load_workload(tmp_path / "missing.toml")
    (tmp_path / "broken.toml").write_text('name = "x"\nduration_ms = = 3\n')
    with pytest.raises(WorkloadError, match=r"broken\.toml: not valid TOML"):
        lab.load_workload(tmp_path / "broken.toml")
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(WorkloadError, match="not UTF-8"):
        lab.load_workload(tmp_path / "bin.toml")
    (tmp_path / "tr.toml").write_text(
        'name = "tr"\nduration_ms = 10\ndevice = "emu-gpu"\n'
        '[[task]]\nname = "a"\npriority = 0\nwork_ms = 1\narrival = { kind = "trace", file = "nope.csv" }\n'
    )
    with pytest.raises(WorkloadError, match=r"arrival\.file: cannot read trace"):
        lab.load_workload(tmp_path / "tr.toml")
    (tmp_path / "bad.csv").write_text("1.0\nsoon\n")
    (tmp_path / "tr2.toml").write_text((tmp_path / "tr.toml").read_text().replace("nope.csv", "bad.csv"))
    with pytest.raises(WorkloadError, match=r"bad\.csv line 2: not a time in ms: 'soon'"):
        lab.load_workload(tmp_path / "tr2.toml")
