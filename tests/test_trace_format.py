"""The recorded run as a Perfetto trace and a plot, from a recording written by hand.

The recording below is what init's recorder writes for a small story: camera's short
job preempts photos' long one on channel 0 of hw0, photos resumes and completes;
rogue's job runs on a channel the HAL did not name (so it goes on a lane); weight
memory rises and falls; the die warms from NONE to SEVERE. The recorder named each app
uid by the package manager's answer (``package`` records); no app left a report. Every
rule of the trace format a viewer relies on is checked against it.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from framework.emulator._plot import plot_timeline
from framework.emulator._trace import chrome_trace, load_timeline, summarize, write_trace
from framework.emulator import EmulatorError

MS = 1_000_000  # ns


def _work(kind, reason, id, work_id, uid, t_ms, *, channel=0, hw=0, pid=None, job=500, eff=1000, device="emu-npu"):
    return {
        "type": "work", "kind": kind, "reason": reason, "id": id, "work_id": work_id, "uid": uid,
        "original_uid": uid, "pid": pid or uid - 5000, "job_priority": job, "effective_priority": eff,
        "device": device, "device_number": 0, "channel": channel if kind != "requested" else -1,
        "hw_device": hw if kind != "requested" else -1, "time_ns": int(t_ms * MS),
        "wall_ns": int(1_000_000_000_000 + t_ms * MS + 2 * MS),
    }


@pytest.fixture
def recording(tmp_path):
    camera, photos, rogue = 10001, 10002, 10003
    records = [
        {"type": "meta", "speed": 1.0, "init_pid": 1, "pids": {"hal": 3}, "wall_ns": 1_000_000_000_000,
         "thresholds_c": [45, 55, 65, 75, 85, 95]},
        _work("requested", -1, 1, 1, photos, 10.0, job=900, eff=1900),
        _work("started", 0, 2, 1, photos, 10.5, job=900, eff=1900),
        _work("requested", -1, 3, 2, camera, 20.0, job=100, eff=100),
        _work("ended", 2, 4, 1, photos, 21.0, job=900, eff=1900),  # PAUSED: preempted
        _work("started", 0, 5, 2, camera, 21.2, job=100, eff=100),
        _work("ended", 4, 6, 2, camera, 24.0, job=100, eff=100),
        _work("started", 1, 7, 1, photos, 24.5, job=900, eff=1900),  # RESUMED
        _work("ended", 4, 8, 1, photos, 40.0, job=900, eff=1900),
        # rogue: two overlapping jobs whose channel the HAL did not report
        _work("requested", -1, 9, 3, rogue, 12.0),
        _work("started", 0, 10, 3, rogue, 12.0, channel=-1, hw=-1),
        _work("requested", -1, 11, 4, rogue, 13.0),
        _work("started", 0, 12, 4, rogue, 13.0, channel=-1, hw=-1),
        _work("ended", 4, 13, 3, rogue, 30.0, channel=-1, hw=-1),
        _work("ended", 3, 14, 4, rogue, 31.0, channel=-1, hw=-1),  # FAILED
        {"type": "memory", "device_number": 0, "hw_device": 0, "used": 1536 << 20, "total": 4 << 30,
         "sram_used": 0, "sram_total": 8 << 20, "refused": None, "time_ns": 5 * MS,
         "wall_ns": 1_000_000_000_000 + 6 * MS},
        {"type": "memory", "device_number": 0, "hw_device": 0, "used": 0, "total": 4 << 30,
         "sram_used": 0, "sram_total": 8 << 20, "refused": None, "time_ns": 45 * MS,
         "wall_ns": 1_000_000_000_000 + 46 * MS},
        {"type": "thermal", "severity": 0, "temperature_c": 30.0, "wall_ns": 1_000_000_000_000 + 11 * MS},
        {"type": "thermal", "severity": 3, "temperature_c": 70.0, "wall_ns": 1_000_000_000_000 + 30 * MS},
        {"type": "mark", "label": "thermal spike", "wall_ns": 1_000_000_000_000 + 29 * MS},
    ]
    for name, uid in (("camera", camera), ("photos", photos), ("rogue", rogue)):
        records.insert(1, {"type": "package", "uid": uid, "package": f"com.example.{name}", "wall_ns": 1})
    (tmp_path / "trace.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n{\"type\": \"wor")
    return tmp_path


def test_segments_pair_starts_with_ends_and_keep_preemption(recording):
    tl = load_timeline(recording)
    photos = sorted((s for s in tl.segments if s.uid == 10002), key=lambda s: s.start_us)
    assert [(s.start_reason, s.end_reason) for s in photos] == [(0, 2), (1, 4)]  # INITIAL->PAUSED, RESUMED->COMPLETED
    assert photos[0].end_us == pytest.approx(21_000) and photos[1].start_us == pytest.approx(24_500)
    s = summarize(tl)
    assert (s["preemptions"], s["resumes"], s["jobs"], s["failed"]) == (1, 1, 4, 1)
    assert s["thermal_max_severity"] == 3
    assert s["per_app"]["com.example.photos"] == {"segments": 2, "jobs": 1, "preempted": 1}


def test_jobs_without_a_channel_never_share_a_lane_while_they_overlap(recording):
    rogue = [s for s in load_timeline(recording).segments if s.uid == 10003]
    assert sorted(s.lane for s in rogue) == [0, 1]
    assert len({s.track for s in rogue}) == 2


def test_trace_events_have_what_perfetto_needs(recording):
    trace = chrome_trace(load_timeline(recording))
    events = trace["traceEvents"]
    json.loads(json.dumps(trace))  # plain JSON all the way down
    phases = Counter(e["ph"] for e in events)
    assert {"X", "i", "C", "M", "s", "f"} <= set(phases)
    named_pids = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    named_threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in events:
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["pid"], int)
        assert e["pid"] in named_pids, e
        if e["ph"] == "X":
            assert e["dur"] > 0 and isinstance(e["tid"], int)
            assert (e["pid"], e["tid"]) in named_threads, e
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values())
        if e["ph"] == "i":
            assert e["s"] in ("t", "p", "g")


def test_job_slices_carry_uid_package_and_priorities(recording):
    events = chrome_trace(load_timeline(recording))["traceEvents"]
    jobs = [e for e in events if e["ph"] == "X" and e["cat"] == "npu.job"]
    assert len(jobs) == 5  # photos twice (preempted), camera, rogue twice
    camera = next(e for e in jobs if e["args"]["uid"] == 10001)
    assert camera["name"] == camera["args"]["package"] == "com.example.camera"  # named by its package
    assert (camera["args"]["job_priority"], camera["args"]["effective_priority"]) == (100, 100)
    assert camera["dur"] == pytest.approx(2_800)
    resumed = [e for e in jobs if e["args"]["start_reason"] == "RESUMED"]
    assert [e["name"] for e in resumed] == ["com.example.photos (resumed)"]
    marks = [e["name"] for e in events if e.get("cat") == "npu.preemption"]
    assert marks == ["preempted: com.example.photos job 1", "resumed: com.example.photos job 1"]
    apps = sorted(e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name" and e["pid"] < 10**8 - 1)
    assert apps == ["com.example.camera (pid 5001)", "com.example.photos (pid 5002)", "com.example.rogue (pid 5003)"]
    # photos' two segments sit on the same channel track, camera's in between
    photos_tracks = {(e["pid"], e["tid"]) for e in jobs if e["args"]["uid"] == 10002}
    assert photos_tracks == {(camera["pid"], camera["tid"])}


def test_flows_link_each_binder_call_to_its_first_slice(recording):
    events = chrome_trace(load_timeline(recording))["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    assert set(starts) == set(finishes) == {1, 2, 3, 4}
    calls = {e["args"]["work_id"]: e for e in events if e["ph"] == "X" and e["cat"] == "binder"}
    for wid, s in starts.items():
        call = calls[wid]
        assert call["ts"] <= s["ts"] <= call["ts"] + call["dur"]  # the flow leaves from inside the call
        assert finishes[wid]["bp"] == "e" and finishes[wid]["ts"] >= s["ts"]
    assert calls[2]["args"]["queued_us"] == pytest.approx(1_200)  # camera waited for the preemption


def test_counters_for_memory_and_temperature(recording):
    events = chrome_trace(load_timeline(recording))["traceEvents"]
    memory = [e["args"]["used"] for e in events if e["ph"] == "C" and e["name"] == "weight memory (MiB)"]
    assert memory == [1536.0, 0.0]
    temps = [e["args"]["die"] for e in events if e["ph"] == "C" and e["name"] == "temperature (C)"]
    assert temps[-1] == 70.0
    assert any(e["name"] == "thermal NONE -> SEVERE" for e in events if e["ph"] == "i")


def test_scenario_marks_are_global_instants_on_the_emulated_clock(recording):
    tl = load_timeline(recording)
    (t, label), = tl.marks
    assert label == "thermal spike"
    # placed from the nearest earlier anchor (rogue's end, read 2 ms after it happened)
    assert 26_000 <= t <= 31_000
    (mark,) = [e for e in chrome_trace(tl)["traceEvents"] if e.get("cat") == "scenario"]
    assert (mark["ph"], mark["s"], mark["name"]) == ("i", "g", "thermal spike")


def test_write_trace_and_plot(recording, tmp_path):
    out = tmp_path / "t.json"
    trace = write_trace(recording, out)
    assert json.loads(out.read_text()) == trace
    png = tmp_path / "t.png"
    legend = plot_timeline(load_timeline(recording), png)
    assert legend == ["com.example.camera", "com.example.photos", "com.example.rogue", "preempted (1)"]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_no_recording_is_a_clear_error(tmp_path):
    with pytest.raises(EmulatorError, match="no recording"):
        load_timeline(tmp_path)


def test_slices_on_one_track_never_overlap(recording):
    """Perfetto nests slices of one thread: a partial overlap would be drawn wrong."""
    events = chrome_trace(load_timeline(recording))["traceEvents"]
    by_track: dict = {}
    for e in events:
        if e["ph"] == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for track, spans in by_track.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-6, track
    rogue_calls = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X" and e.get("cat") == "binder"
                   and e["args"]["uid"] == 10003}
    assert len(rogue_calls) == 2  # two executions in flight at once: two binder threads


def test_the_recording_caps_work_records_but_keeps_heat_and_memory(tmp_path):
    from framework.emulator._recorder import _Sink

    sink = _Sink(tmp_path / "trace.jsonl", max_bytes=600)
    for i in range(10):
        sink.write(_work("requested", -1, i, i, 10001, float(i)))
    sink.write({"type": "thermal", "severity": 0, "temperature_c": 30.0, "wall_ns": 1})
    sink.close()
    kinds = [json.loads(line)["type"] for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert kinds.count("truncated") == 1 and kinds[-1] == "thermal"
    assert 1 <= kinds.count("work") < 10


def test_thermal_flips_at_one_emulated_instant_are_merged(tmp_path):
    """The die hovers at LIGHT's threshold while the emulated clock stands still (no work
    between two events): the samples land on one timestamp and only the last counts."""
    base = 1_000_000_000_000
    records = [
        {"type": "meta", "speed": 1.0, "init_pid": 1, "pids": {}, "wall_ns": base},
        _work("requested", -1, 1, 1, 10001, 10.0),
        _work("started", 0, 2, 1, 10001, 10.0),
        # the next event is read 500 ms of wall time later, but only 1 emulated ms passed
        {**_work("ended", 4, 3, 1, 10001, 11.0), "wall_ns": base + 512 * MS},
        {"type": "thermal", "severity": 0, "temperature_c": 44.0, "wall_ns": base + 5 * MS},
    ]
    for i, (sev, temp) in enumerate([(0, 44.9), (1, 45.1), (0, 44.9), (1, 45.2), (2, 55.5), (1, 50.0)]):
        records.append({"type": "thermal", "severity": sev, "temperature_c": temp, "wall_ns": base + (100 + i) * MS})
    records.append({"type": "thermal", "severity": 1, "temperature_c": 47.0, "wall_ns": base + 520 * MS})
    (tmp_path / "trace.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    tl = load_timeline(tmp_path)
    times = [t for t, _, _ in tl.temperature]
    assert len(times) == len(set(times))  # one sample per instant
    assert [(temp, sev) for _, temp, sev in tl.temperature] == [(44.0, 0), (50.0, 1), (47.0, 1)]
    events = chrome_trace(tl)["traceEvents"]
    severities = [(e["ts"], e["args"]["severity"]) for e in events if e["ph"] == "C" and e["name"] == "thermal severity"]
    assert [sev for _, sev in severities] == [0, 1]
    assert len({ts for ts, _ in severities}) == 2
    assert [e["name"] for e in events if e.get("cat") == "thermal"] == ["thermal NONE -> LIGHT"]


def test_an_app_is_named_by_its_package_never_by_a_report(recording):
    """A sample's report may say anything (or nothing, for a user's own app): the name is
    the package manager's, and a uid it never named stays a uid."""
    (recording / "apps").mkdir()
    (recording / "apps" / "camera.json").write_text(json.dumps({"app": "camera", "uid": 10001, "package": "com.stale"}))
    with open(recording / "trace.jsonl", "a") as f:
        f.write("\n" + json.dumps(_work("started", 0, 90, 90, 10077, 41.0)) + "\n")
    tl = load_timeline(recording)
    assert tl.who(10001) == "com.example.camera"
    assert tl.who(10077) == "uid 10077" and tl.who(1000) == "system"


def test_work_on_the_cpu_has_its_own_track(recording):
    """legacy's model runs on nnapi-reference in its own process (the marker's records, as
    the recorder folded them in); camera's once fell back after the NPU failed its run."""
    base = 1_000_000_000_000
    cpu = [
        {"type": "package", "uid": 10004, "package": "com.example.legacy", "wall_ns": 1},
        {"type": "cpu", "uid": 10004, "pid": 5004, "device": "nnapi-reference", "operations": 3, "why": "planned",
         "wall_start_ns": base + 14 * MS, "wall_end_ns": base + 15 * MS},
        {"type": "cpu", "uid": 10004, "pid": 5004, "device": "nnapi-reference", "operations": 3, "why": "planned",
         "wall_start_ns": base + 25 * MS, "wall_end_ns": base + 26 * MS},
        {"type": "cpu", "uid": 10001, "pid": 5001, "device": "nnapi-reference", "operations": 2, "why": "fallback",
         "failed_device": "emu-npu", "wall_start_ns": base + 27 * MS, "wall_end_ns": base + 28 * MS},
    ]
    with open(recording / "trace.jsonl", "a") as f:
        f.write("\n" + "\n".join(json.dumps(r) for r in cpu) + "\n")
    tl = load_timeline(recording)
    assert [(c.uid, c.why) for c in tl.cpu] == [(10004, "planned"), (10004, "planned"), (10001, "fallback")]
    events = chrome_trace(tl)["traceEvents"]
    (proc,) = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"
               and e["args"]["name"].startswith("CPU (nnapi-reference")]
    tracks = {e["tid"]: e["args"]["name"] for e in events
              if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == proc["pid"]}
    assert tracks == {5001: "com.example.camera (pid 5001)", 5004: "com.example.legacy (pid 5004)"}
    slices = [e for e in events if e["ph"] == "X" and e["cat"] == "cpu"]
    assert [(e["name"], e["tid"]) for e in slices] == [
        ("com.example.legacy", 5004), ("com.example.legacy", 5004), ("com.example.camera (fallback)", 5001)]
    assert all(e["pid"] == proc["pid"] for e in slices)  # not on any NPU channel
    assert slices[2]["args"]["failed_device"] == "emu-npu" and slices[0]["args"]["operations"] == 3
    assert slices[0]["dur"] == pytest.approx(1_000, rel=0.01)
    s = summarize(tl)
    assert (s["cpu_steps"], s["cpu_fallbacks"]) == (3, 1)
    assert s["per_app"]["com.example.legacy"] == {"segments": 0, "jobs": 0, "preempted": 0, "cpu_steps": 2}
    legend = plot_timeline(tl, recording / "t.png")
    assert "com.example.legacy" in legend  # its only work is on the CPU row


def test_the_recorder_folds_in_the_apps_marker_lines(tmp_path):
    from framework.emulator._recorder import _MarkerReader
    from framework.nn._atrace import CpuTracer

    tracer = CpuTracer(tmp_path, 10004, 5004)
    reader = _MarkerReader(tmp_path / "trace_marker")
    assert reader.read() == []  # no app has run on the CPU yet
    tracer.step(10, 20, 3, "planned")
    with open(tmp_path / "trace_marker", "ab") as f:  # what a misbehaving app might write
        f.write(b'not json\n{"type": "cpu", "uid": "x"}\n{"type": "cpu", "uid": 1, "pid": 2, "operations": 1, "why"')
    (first,) = reader.read()
    assert (first["uid"], first["why"], first["wall_start_ns"], first["wall_end_ns"]) == (10004, "planned", 10, 20)
    with open(tmp_path / "trace_marker", "ab") as f:  # the cut line is completed later
        f.write(b': "planned", "wall_start_ns": 5, "wall_end_ns": 6}\n')
    (second,) = reader.read()
    assert (second["uid"], second["pid"]) == (1, 2)
    assert reader.read() == []
    CpuTracer(None, 1, 2).step(1, 2, 1, "planned")  # a runtime with no directory marks nothing
    assert _MarkerReader(tmp_path / "trace_marker", fresh=True).read() == []  # a new boot: an old marker is gone
    assert not (tmp_path / "trace_marker").exists()
