"""A recorded run as a timeline, as a Chrome/Perfetto trace, and as summary numbers.

:func:`load_timeline` reads what init's recorder wrote (``trace.jsonl``: work events,
heat, memory, and each app uid's package as the package manager named it, so that
every app, a user's own as much as a sample, is named by its package) and pairs work events into
*segments*: one per stretch a job ran on a channel, from a start (INITIAL or RESUMED)
to its end (PAUSED, COMPLETED, FAILED, CANCELLED_*). A preempted job therefore shows
as several segments with a pause between them.

:func:`chrome_trace` lays the timeline out in the Trace Event Format that
ui.perfetto.dev and chrome://tracing open (``{"traceEvents": [...]}``):

- one process per hardware device (``NPU hw0``), one thread per execution channel;
  an ``X`` (complete) event per segment, named after the app, with uid, package,
  job and effective priorities, device and reasons in ``args``; an instant ``i``
  event where a job was preempted (``PAUSED``) and where it resumed;
- one process per app (by its pid, as the HAL saw it), one ``X`` event per
  execution: the binder call from its request until the job ended, and a flow
  (``s`` -> ``f``) from that call to the job's first segment on a channel;
- work the apps ran on the CPU (``nnapi-reference``, in their own processes, marked
  by their NNAPI runtime): a ``CPU (nnapi-reference)`` process with one track per app,
  an ``X`` event per step, named after the app, ``why`` planned or fallback in ``args``;
- counters (``C``): weight memory per hardware device, the die's temperature and
  thermal severity;
- ``M`` metadata events naming every process and thread, and sorting them.

Times are the driver's emulated clock, in microseconds from the first event. Work and
memory events carry it; temperature samples were taken on init's wall clock and are
placed on the emulated clock by the offset the work events imply (each event was read
after it happened, so the smallest ``wall - emulated/speed`` seen bounds the offset).
Jobs whose channel the HAL did not report are laid out on per-device *lanes*, greedily,
so that overlapping jobs never share a track.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from framework.nn import CPU_DEVICE_NAME
from interfaces.android.hardware.npu import EndReason, StartReason
from interfaces.android.hardware.thermal import ThrottlingSeverity

from ._errors import EmulatorError
from ._paths import RuntimeFiles

__all__ = [
    "CpuSlice",
    "Segment",
    "Timeline",
    "chrome_trace",
    "enum_name",
    "load_timeline",
    "summarize",
    "write_trace",
]

_PAUSED = EndReason.PAUSED
_RESUMED = StartReason.RESUMED

_HW_PID_BASE = 100_000_000  # fake pids for hardware tracks, far from real ones
_THERMAL_PID = _HW_PID_BASE - 1
_CPU_PID = _HW_PID_BASE - 2


@dataclasses.dataclass
class Segment:
    """One stretch of a job on a channel, in emulated microseconds."""

    work_id: int
    uid: int
    original_uid: int
    pid: int
    job_priority: int
    effective_priority: int
    device: str
    hw_device: int
    channel: int
    start_us: float
    end_us: float
    start_reason: int
    end_reason: int | None  # None: still running when the trace was taken
    lane: int = -1

    @property
    def track(self) -> tuple[str, int]:
        """(hardware key, channel or lane): where the segment is drawn."""
        hw = f"hw{self.hw_device}" if self.hw_device >= 0 else self.device
        return hw, self.channel if self.channel >= 0 else self.lane


@dataclasses.dataclass
class Execution:
    """One execution as the app's binder call saw it: requested .. ended for good."""

    work_id: int
    uid: int
    pid: int
    requested_us: float
    ended_us: float | None
    end_reason: int | None
    first_start_us: float | None


@dataclasses.dataclass
class CpuSlice:
    """One step an app ran on the CPU device, in emulated microseconds."""

    uid: int
    pid: int
    device: str
    operations: int
    why: str  # "planned" (the compilation put it there) or "fallback" (a driver failed the run)
    failed_device: str | None
    start_us: float
    end_us: float


@dataclasses.dataclass
class Timeline:
    segments: list[Segment]
    executions: list[Execution]
    temperature: list[tuple[float, float, int]]  # (us, degrees C, severity)
    memory: dict[int, list[tuple[float, int, int]]]  # hw device -> (us, used, total)
    packages: dict[int, str]  # uid -> package, as the package manager named it
    pids: dict[str, int]
    speed: float
    origin_us: float
    hw_names: dict[str, list[str]]  # hardware key -> driver device names seen on it
    thresholds_c: list[float] = dataclasses.field(default_factory=list)
    marks: list[tuple[float, str]] = dataclasses.field(default_factory=list)  # (us, label)
    cpu: list[CpuSlice] = dataclasses.field(default_factory=list)  # the apps' work on the CPU

    def who(self, uid: int) -> str:
        """The app's package; root, system or shell; ``uid N`` for a uid nobody named."""
        if uid in self.packages:
            return self.packages[uid]
        return {0: "root", 1000: "system", 2000: "shell"}.get(uid, f"uid {uid}")

    @property
    def end_us(self) -> float:
        ends = [s.end_us for s in self.segments] + [t for t, _, _ in self.temperature] + [c.end_us for c in self.cpu]
        return max(ends, default=0.0)


def _read_records(path: Path) -> list[dict[str, Any]]:
    records = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue  # a line cut short by a killed recorder
    except FileNotFoundError:
        raise EmulatorError(
            f"no recording in {path.parent}: boot the emulator with `npuemu boot` (it records as it runs)"
        ) from None
    return records


def read_app_reports(files: RuntimeFiles) -> dict[str, dict[str, Any]]:
    """The JSON each sample app left in ``apps/`` (by app name)."""
    reports = {}
    if files.app_reports.is_dir():
        for path in sorted(files.app_reports.glob("*.json")):
            try:
                reports[path.stem] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
    return reports


def load_timeline(runtime_dir: str | os.PathLike[str]) -> Timeline:
    """The recorded run of the emulator in ``runtime_dir`` (running or shut down)."""
    files = RuntimeFiles(Path(runtime_dir))
    records = _read_records(files.trace_events)
    meta = next((r for r in records if r.get("type") == "meta"), {})
    speed = float(meta.get("speed", 1.0)) or 1.0
    packages = {int(r["uid"]): str(r["package"]) for r in records if r.get("type") == "package"}

    work = sorted((r for r in records if r.get("type") == "work"), key=lambda r: (r["time_ns"], r["id"]))
    memory_records = [r for r in records if r.get("type") == "memory"]
    to_emulated = _wall_to_emulated(work + memory_records, speed)
    segments: list[Segment] = []
    executions: dict[int, Execution] = {}
    running: dict[int, Segment] = {}
    hw_names: dict[str, list[str]] = defaultdict(list)
    for r in work:
        t_us = r["time_ns"] / 1000
        wid = r["work_id"]
        if r["kind"] == "requested":
            executions[wid] = Execution(wid, r["uid"], r["pid"], t_us, None, None, None)
        elif r["kind"] == "started":
            ex = executions.setdefault(wid, Execution(wid, r["uid"], r["pid"], t_us, None, None, None))
            if ex.first_start_us is None:
                ex.first_start_us = t_us
            seg = Segment(wid, r["uid"], r["original_uid"], r["pid"], r["job_priority"], r["effective_priority"],
                          r["device"], r["hw_device"], r["channel"], t_us, t_us, r["reason"], None)
            running[wid] = seg
            segments.append(seg)
        elif r["kind"] == "ended":
            seg = running.pop(wid, None)
            if seg is not None:
                seg.end_us = t_us
                seg.end_reason = r["reason"]
                if seg.channel < 0 <= r["channel"]:
                    seg.channel, seg.hw_device = r["channel"], r["hw_device"]
            if r["reason"] != _PAUSED:
                ex = executions.get(wid)
                if ex is not None:
                    ex.ended_us, ex.end_reason = t_us, r["reason"]
    last_us = max((r["time_ns"] / 1000 for r in work), default=0.0)
    for seg in running.values():
        seg.end_us = max(seg.end_us, last_us)
    _assign_lanes(segments)
    for seg in segments:
        key = seg.track[0]
        if seg.device not in hw_names[key]:
            hw_names[key].append(seg.device)

    temperature = _merge_same_time(
        (to_emulated(r["wall_ns"]) / 1000, float(r["temperature_c"]), int(r["severity"]))
        for r in records
        if r.get("type") == "thermal" and "wall_ns" in r and to_emulated is not None
    )
    marks = sorted((to_emulated(r["wall_ns"]) / 1000, r["label"]) for r in records
                   if r.get("type") == "mark" and to_emulated is not None)
    cpu = sorted((
        CpuSlice(int(r["uid"]), int(r["pid"]), str(r.get("device", CPU_DEVICE_NAME)), int(r["operations"]),
                 str(r["why"]), r.get("failed_device"), to_emulated(r["wall_start_ns"]) / 1000,
                 to_emulated(r["wall_end_ns"]) / 1000)
        for r in records if r.get("type") == "cpu" and to_emulated is not None
    ), key=lambda c: c.start_us)
    memory: dict[int, list[tuple[float, int, int]]] = defaultdict(list)
    for r in sorted(memory_records, key=lambda r: r["time_ns"]):
        memory[int(r["hw_device"])].append((r["time_ns"] / 1000, int(r["used"]), int(r["total"])))

    # The story starts with the first work or memory event (a second before it):
    # the boot's flat temperature line before that is only noise.
    starts = [s.start_us for s in segments] + [e.requested_us for e in executions.values()]
    starts += [t for series in memory.values() for t, _, _ in series] + [c.start_us for c in cpu]
    if starts:
        origin = min(starts) - 1e6
        before = [sample for sample in temperature if sample[0] < origin]
        temperature = ([(origin, before[-1][1], before[-1][2])] if before else []) + [
            sample for sample in temperature if sample[0] >= origin]
    else:
        origin = min((t for t, _, _ in temperature), default=0.0)
    return Timeline(segments, list(executions.values()), temperature, dict(memory), packages,
                    dict(meta.get("pids", {})), speed, origin, dict(hw_names), list(meta.get("thresholds_c", [])), marks,
                    cpu)


def _merge_same_time(samples: Iterable[tuple[float, float, int]]) -> list[tuple[float, float, int]]:
    """Temperature samples in time order, one per emulated instant: the last taken.

    Samples are taken on the wall clock; several can land on one emulated instant
    (the emulated clock stands still between two work events). A die that hovered at a
    threshold meanwhile would otherwise flip NONE -> LIGHT -> NONE -> LIGHT at one
    timestamp, which a viewer draws as noise: only where it ended up counts.
    """
    merged: dict[float, tuple[float, float, int]] = {}
    # A stable sort on time alone: samples of one instant stay in the order taken.
    for sample in sorted(samples, key=lambda s: s[0]):
        merged.pop(round(sample[0], 3), None)
        merged[round(sample[0], 3)] = sample
    return list(merged.values())


def _wall_to_emulated(records: list[dict[str, Any]], speed: float):
    """A map from init's wall clock to the driver's emulated clock, from event anchors.

    The emulated clock is not a fixed offset from the wall (at rest the real clock
    may lag), so each wall time is placed from the nearest earlier anchor (an event
    with both times) at ``speed``, and never past the next anchor. None without
    anchors.
    """
    import bisect

    anchors = sorted((r["wall_ns"], r["time_ns"]) for r in records if "wall_ns" in r and "time_ns" in r)
    if not anchors:
        return None
    walls = [w for w, _ in anchors]

    def convert(wall_ns: float) -> float:
        i = bisect.bisect_right(walls, wall_ns) - 1
        if i < 0:
            w, e = anchors[0]
            return max(e + (wall_ns - w) * speed, 0.0)
        w, e = anchors[i]
        guess = e + (wall_ns - w) * speed
        if i + 1 < len(anchors):
            guess = min(guess, anchors[i + 1][1])
        return guess

    return convert


def _assign_lanes(segments: list[Segment]) -> None:
    """Segments without a channel get the lowest lane of their device that is free."""
    lanes: dict[str, list[float]] = defaultdict(list)  # device -> end time of each lane
    for seg in sorted((s for s in segments if s.channel < 0), key=lambda s: s.start_us):
        ends = lanes[seg.device]
        for i, end in enumerate(ends):
            if end <= seg.start_us:
                seg.lane, ends[i] = i, seg.end_us
                break
        else:
            seg.lane = len(ends)
            ends.append(seg.end_us)


# -- the Chrome / Perfetto trace -----------------------------------------------------------


def chrome_trace(tl: Timeline) -> dict[str, Any]:
    """The timeline as a Trace Event Format object (``{"traceEvents": [...]}``)."""
    events: list[dict[str, Any]] = []
    o = tl.origin_us

    def ts(us: float) -> float:
        return round(us - o, 3)

    hw_keys = sorted({s.track[0] for s in tl.segments} | {f"hw{k}" for k in tl.memory})
    hw_pid = {key: _HW_PID_BASE + i for i, key in enumerate(hw_keys)}
    for i, key in enumerate(hw_keys):
        names = ", ".join(tl.hw_names.get(key, [])) or key
        events.append(_meta("process_name", hw_pid[key], 0, {"name": f"NPU {key} ({names})"}))
        events.append(_meta("process_sort_index", hw_pid[key], 0, {"sort_index": i}))
    tracks = sorted({s.track for s in tl.segments})
    for key, ch in tracks:
        label = f"channel {ch}" if any(s.track == (key, ch) and s.channel >= 0 for s in tl.segments) else f"lane {ch}"
        events.append(_meta("thread_name", hw_pid[key], ch + 1, {"name": label}))
        events.append(_meta("thread_sort_index", hw_pid[key], ch + 1, {"sort_index": ch}))

    for seg in tl.segments:
        key, ch = seg.track
        pid, tid = hw_pid[key], ch + 1
        name = tl.who(seg.uid)
        resumed = seg.start_reason == _RESUMED
        args = {
            "uid": seg.uid,
            "package": tl.who(seg.uid),
            "original_uid": seg.original_uid,
            "pid": seg.pid,
            "work_id": seg.work_id,
            "job_priority": seg.job_priority,
            "effective_priority": seg.effective_priority,
            "device": seg.device,
            "channel": seg.channel,
            "start_reason": enum_name(StartReason, seg.start_reason),
            "end_reason": _end_name(seg.end_reason),
        }
        events.append({
            "name": f"{name}{' (resumed)' if resumed else ''}",
            "cat": "npu.job",
            "ph": "X",
            "ts": ts(seg.start_us),
            "dur": round(max(seg.end_us - seg.start_us, 0.001), 3),
            "pid": pid,
            "tid": tid,
            "args": args,
        })
        if seg.end_reason == _PAUSED:
            events.append({"name": f"preempted: {name} job {seg.work_id}", "cat": "npu.preemption", "ph": "i",
                           "s": "t", "ts": ts(seg.end_us), "pid": pid, "tid": tid, "args": args})
        if resumed:
            events.append({"name": f"resumed: {name} job {seg.work_id}", "cat": "npu.preemption", "ph": "i",
                           "s": "t", "ts": ts(seg.start_us), "pid": pid, "tid": tid, "args": args})

    # The apps' side: each execution is a binder call, with a flow to its first slice.
    first_segment: dict[int, Segment] = {}
    for seg in tl.segments:
        first_segment.setdefault(seg.work_id, seg)
    app_pids = sorted({e.pid for e in tl.executions if e.pid > 0})
    by_pid_uid = {e.pid: e.uid for e in tl.executions}
    # An app may have several executions in flight (photos indexes two at a time):
    # each gets the lowest free binder-thread lane, so slices on one track never overlap.
    lane_of: dict[int, int] = {}
    lane_ends: dict[int, list[float]] = defaultdict(list)
    for ex in sorted(tl.executions, key=lambda e: e.requested_us):
        end = ex.ended_us if ex.ended_us is not None else max(ex.requested_us, tl.end_us)
        ends = lane_ends[ex.pid]
        free = next((i for i, e in enumerate(ends) if e <= ex.requested_us), len(ends))
        if free == len(ends):
            ends.append(end)
        else:
            ends[free] = end
        lane_of[ex.work_id] = free
    for i, pid in enumerate(app_pids):
        label = f"{tl.who(by_pid_uid[pid])} (pid {pid})"
        events.append(_meta("process_name", pid, 0, {"name": label}))
        events.append(_meta("process_sort_index", pid, 0, {"sort_index": 100 + i}))
        for lane in range(len(lane_ends[pid])):
            events.append(_meta("thread_name", pid, lane + 1, {"name": f"binder thread {lane + 1}: execute"}))
    for ex in tl.executions:
        if ex.pid <= 0:
            continue
        end = ex.ended_us if ex.ended_us is not None else max(ex.requested_us, tl.end_us)
        tid = lane_of[ex.work_id] + 1
        events.append({
            "name": "execute",
            "cat": "binder",
            "ph": "X",
            "ts": ts(ex.requested_us),
            "dur": round(max(end - ex.requested_us, 0.001), 3),
            "pid": ex.pid,
            "tid": tid,
            "args": {"work_id": ex.work_id, "uid": ex.uid, "end_reason": _end_name(ex.end_reason),
                     "queued_us": round((ex.first_start_us or end) - ex.requested_us, 3)},
        })
        seg = first_segment.get(ex.work_id)
        if seg is not None:
            key, ch = seg.track
            flow = {"name": "binder transaction", "cat": "binder", "id": ex.work_id}
            events.append({**flow, "ph": "s", "ts": ts(ex.requested_us), "pid": ex.pid, "tid": tid})
            events.append({**flow, "ph": "f", "bp": "e", "ts": ts(seg.start_us), "pid": hw_pid[key], "tid": ch + 1})

    # The apps' work on the CPU: a track per app, beside the NPU's channels.
    if tl.cpu:
        events.append(_meta("process_name", _CPU_PID, 0, {"name": "CPU (nnapi-reference, in the app processes)"}))
        events.append(_meta("process_sort_index", _CPU_PID, 0, {"sort_index": len(hw_keys)}))
        for pid in sorted({c.pid for c in tl.cpu}):
            uid = next(c.uid for c in tl.cpu if c.pid == pid)
            events.append(_meta("thread_name", _CPU_PID, pid, {"name": f"{tl.who(uid)} (pid {pid})"}))
    for c in tl.cpu:
        args = {"uid": c.uid, "package": tl.who(c.uid), "pid": c.pid, "device": c.device,
                "operations": c.operations, "why": c.why}
        if c.failed_device is not None:
            args["failed_device"] = c.failed_device
        events.append({"name": tl.who(c.uid) + (" (fallback)" if c.why == "fallback" else ""), "cat": "cpu",
                       "ph": "X", "ts": ts(c.start_us), "dur": round(max(c.end_us - c.start_us, 0.001), 3),
                       "pid": _CPU_PID, "tid": c.pid, "args": args})

    # Counters.
    for hw, series in sorted(tl.memory.items()):
        key = f"hw{hw}" if hw >= 0 else "hw?"
        pid = hw_pid.get(key, _THERMAL_PID)
        for t, used, total in series:
            events.append({"name": "weight memory (MiB)", "ph": "C", "ts": ts(t), "pid": pid,
                           "args": {"used": round(used / 2**20, 1), "free": round((total - used) / 2**20, 1)}})
    if tl.temperature:
        events.append(_meta("process_name", _THERMAL_PID, 0, {"name": "thermal (die)"}))
        events.append(_meta("process_sort_index", _THERMAL_PID, 0, {"sort_index": -1}))
        last_sev = None
        for t, temp, sev in tl.temperature:
            if t < o:
                continue
            events.append({"name": "temperature (C)", "ph": "C", "ts": ts(t), "pid": _THERMAL_PID,
                           "args": {"die": temp}})
            if sev != last_sev:
                events.append({"name": "thermal severity", "ph": "C", "ts": ts(t), "pid": _THERMAL_PID,
                               "args": {"severity": sev}})
                if last_sev is not None:
                    events.append({"name": f"thermal {_sev(last_sev)} -> {_sev(sev)}", "cat": "thermal", "ph": "i",
                                   "s": "g", "ts": ts(t), "pid": _THERMAL_PID, "tid": 0})
                last_sev = sev
    for t, label in tl.marks:
        events.append({"name": label, "cat": "scenario", "ph": "i", "s": "g", "ts": ts(max(t, o)),
                       "pid": _THERMAL_PID, "tid": 0})
    if tl.marks and not tl.temperature:
        events.append(_meta("process_name", _THERMAL_PID, 0, {"name": "thermal (die)"}))
    events.sort(key=lambda e: (e["ph"] != "M", e.get("ts", 0)))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "metadata": {"producer": "npuemu", "clock": "emulated", "speed": tl.speed},
    }


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


def enum_name(enum_type: type[enum.IntEnum], value: int) -> str:
    """The name ``enum_type`` gives ``value`` (a compiled AIDL enum's), or the number as
    text where it gives none: a record or a parcel from another build still reads."""
    try:
        return enum_type(value).name
    except ValueError:
        return str(value)


def _end_name(reason: int | None) -> str | None:
    return None if reason is None else enum_name(EndReason, reason)


def _sev(sev: int) -> str:
    return enum_name(ThrottlingSeverity, sev)


def write_trace(runtime_dir: str | os.PathLike[str], out: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the run's trace to ``out``; returns the trace object."""
    trace = chrome_trace(load_timeline(runtime_dir))
    tmp = Path(out).with_name(Path(out).name + ".tmp")
    tmp.write_text(json.dumps(trace, separators=(",", ":")))
    os.replace(tmp, out)
    return trace


def summarize(tl: Timeline) -> dict[str, Any]:
    """What the hardware saw: jobs, preemptions, resumes, failures, heat, per app."""
    per_app: dict[str, dict[str, int]] = defaultdict(lambda: {"segments": 0, "jobs": 0, "preempted": 0})
    jobs_seen: set[int] = set()
    for seg in tl.segments:
        row = per_app[tl.who(seg.uid)]
        row["segments"] += 1
        if seg.work_id not in jobs_seen:
            jobs_seen.add(seg.work_id)
            row["jobs"] += 1
        if seg.end_reason == _PAUSED:
            row["preempted"] += 1
    ended = [e for e in tl.executions if e.end_reason is not None]
    for c in tl.cpu:
        per_app[tl.who(c.uid)].setdefault("cpu_steps", 0)
        per_app[tl.who(c.uid)]["cpu_steps"] += 1
    return {
        "jobs": len({s.work_id for s in tl.segments}),
        "cpu_steps": len(tl.cpu),
        "cpu_fallbacks": sum(1 for c in tl.cpu if c.why == "fallback"),
        "preemptions": sum(1 for s in tl.segments if s.end_reason == _PAUSED),
        "resumes": sum(1 for s in tl.segments if s.start_reason == _RESUMED),
        "failed": sum(1 for e in ended if e.end_reason == 3),
        "cancelled": sum(1 for e in ended if e.end_reason in (0, 1)),
        "thermal_max_severity": max((sev for _, _, sev in tl.temperature), default=0),
        "temperature_max_c": round(max((temp for _, temp, _ in tl.temperature), default=float("nan")), 1) if tl.temperature else None,
        "per_app": dict(per_app),
        "duration_ms": round((tl.end_us - tl.origin_us) / 1000, 1),
    }
