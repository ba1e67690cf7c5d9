"""The trace recorder: init's small ``traced``.

The HAL keeps only its latest work events, and the shell may not listen to thermal or
memory changes (those are for the system), so a trace taken after the fact needs
someone who was there. init is: while the emulator runs, :func:`serve_recorder`
polls ``IHalControl.recentWorkEvents`` (every work event, undebounced, with its
channel), samples ``thermalStatus``, and listens as root to the HAL's memory-pressure
and thermal callbacks. It appends one JSON object per line to ``trace.jsonl`` in the
runtime directory; ``npuemu trace`` and ``npuemu plot`` turn that file into a
Perfetto trace and a PNG (``_trace``).

Records (``type``):

- ``meta``: ``speed``, ``init_pid``, ``pids`` (servicemanager, hal, system_server),
  ``wall_ns`` (init's monotonic clock when recording began), ``thresholds_c`` (where
  each thermal severity begins).
- ``work``: a WorkEvent: ``kind`` (requested/started/ended), ``reason``, ``id``,
  ``work_id``, ``uid``, ``original_uid``, ``pid``, ``job_priority``,
  ``effective_priority``, ``device``, ``device_number``, ``channel``, ``hw_device``,
  ``time_ns`` (emulated), ``wall_ns`` (when init read it).
- ``memory``: MemoryPressure: ``hw_device``, ``used``, ``total``, ``sram_used``,
  ``sram_total``, ``refused``, ``time_ns`` (emulated), ``wall_ns``.
- ``thermal``: ``severity``, ``temperature_c``, ``wall_ns``.
- ``package``: ``uid``, ``package``: the package manager's name for an app uid, written
  once, the first time a work or cpu record names that uid (as its uid or its original uid).
- ``cpu``: a step an app's NNAPI runtime ran on the CPU (``nnapi-reference``), as the
  app marked it in the runtime directory's ``trace_marker`` (``framework.nn._atrace``):
  ``uid``, ``pid``, ``device``, ``operations``, ``why`` (planned or fallback),
  ``failed_device``, ``wall_start_ns`` and ``wall_end_ns`` (CLOCK_MONOTONIC). The
  recorder folds the marker's new lines in at every poll, as traced reads ftrace.
- ``truncated``: work records stopped here (the size cap).
- ``hal_restart``: init restarted the HAL; ``generation``, and the ``time_ns`` from
  which the new HAL's events are placed (its driver's clock starts at zero again, so
  its times are shifted by that much, and its ids by ``generation * 10**9``).

Every emulated time is the driver's (nanoseconds since it opened); wall times are
init's ``CLOCK_MONOTONIC``. The trace builder aligns the two (``_trace``).
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

import trio

from framework.binder import FIRST_APPLICATION_UID, defaultServiceManager, has_os_uids
from framework.nn import TRACE_MARKER_NAME
from interfaces.android.hardware.npu import EndReason, StartReason
from interfaces.npuemu.hal import IHalControl, IHalListener, WorkEvent
from interfaces.npuemu.server import IPackageManager
from interfaces.services import PACKAGE_SERVICE

from ._services import HAL_CONTROL, get_service
from ._trace import enum_name

__all__ = ["KIND_NAMES", "serve_recorder", "work_event_names", "work_record"]

#: A WorkEvent's kind, as a record and a person name it.
KIND_NAMES = {WorkEvent.KIND_REQUESTED: "requested", WorkEvent.KIND_STARTED: "started", WorkEvent.KIND_ENDED: "ended"}


def work_event_names(event: WorkEvent) -> tuple[str, str]:
    """``(kind, reason)`` of a WorkEvent as people read them: ``("ended", "PAUSED")``.

    The reason is a StartReason's or an EndReason's name, ``""`` for a request; a
    number no enum knows (another build's) comes back as text.
    """
    kind = KIND_NAMES.get(event.kind, str(event.kind))
    if event.kind == WorkEvent.KIND_STARTED:
        return kind, enum_name(StartReason, event.reason)
    if event.kind == WorkEvent.KIND_ENDED:
        return kind, enum_name(EndReason, event.reason)
    return kind, ""


def work_record(event: WorkEvent) -> dict[str, Any]:
    """A WorkEvent parcelable as a ``work`` record."""
    info = event.info
    kind = KIND_NAMES.get(event.kind, str(event.kind))
    return {
        "type": "work",
        "kind": kind,
        "reason": int(event.reason),
        "id": int(info.id),
        "work_id": int(event.workId),
        "uid": int(info.uid),
        "original_uid": int(info.originalUid),
        "pid": int(info.debugPid),
        "job_priority": int(info.jobPriority),
        "effective_priority": int(info.effectivePriority),
        "device": event.deviceName,
        "device_number": int(info.deviceNumber),
        "channel": int(event.channel),
        "hw_device": int(event.hwDevice),
        "time_ns": int(event.timeNs),
        "wall_ns": time.monotonic_ns(),
    }


class _Sink:
    """``trace.jsonl``, appended to; work and cpu records stop at ``max_bytes`` (a
    week-long run at 30 frames a second would otherwise fill the disk), the rest never do."""

    def __init__(self, path: os.PathLike[str], max_bytes: int) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self._lines: list[str] = []
        self._left = max_bytes
        self.truncated = False
        #: Records a full disk refused (dropped, not retried: the recorder must not grow).
        self.dropped = 0
        self.no_space: OSError | None = None

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        if record["type"] in ("work", "cpu"):
            if self._left < len(line):
                if not self.truncated:
                    self.truncated = True
                    self._lines.append(json.dumps({"type": "truncated", "wall_ns": time.monotonic_ns()}) + "\n")
                return
            self._left -= len(line)
        self._lines.append(line)

    def flush(self) -> None:
        """Append what was written since the last flush, in one write (whole lines)."""
        lines, self._lines = self._lines, []
        if not lines or self._fd < 0:
            return
        data = "".join(lines).encode()
        try:
            n = os.write(self._fd, data)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise
            self.dropped += len(lines)
            self.no_space = exc
            return
        if n < len(data):  # the disk filled mid-way: end the cut line so the file still parses
            self.dropped += data[n:].count(b"\n")
            self.no_space = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            try:
                os.write(self._fd, b"\n")
            except OSError:
                pass

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1


class _MarkerReader:
    """The new complete lines of the runtime directory's ``trace_marker``, as records.

    ``fresh`` removes a marker an earlier emulator of the directory left (its lines
    are in its own recording), before any app of this one runs.
    """

    def __init__(self, path: Path, *, fresh: bool = False, shared: bool = False) -> None:
        self._path = path
        self._offset = 0
        self._pending = b""
        if fresh:
            path.unlink(missing_ok=True)
            if shared:
                # Under uid isolation each app is its own user: init makes the file, root's
                # and 0622, so every app appends to it and none reads another's lines.
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                try:
                    os.fchmod(fd, 0o622)
                finally:
                    os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self._path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read(1 << 20)
        except FileNotFoundError:  # no app has run on the CPU yet
            return []
        self._offset += len(chunk)
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        records = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # not ours to judge: a marker line that does not parse is dropped
            if isinstance(record, dict) and record.get("type") == "cpu" and _valid_cpu(record):
                records.append(record)
        return records


def _valid_cpu(record: dict[str, Any]) -> bool:
    """Whether a marker line is a cpu record the trace can draw (apps write the file)."""
    ints = ("uid", "pid", "operations", "wall_start_ns", "wall_end_ns")
    return (all(isinstance(record.get(k), int) and not isinstance(record.get(k), bool) for k in ints)
            and record["wall_start_ns"] <= record["wall_end_ns"] and isinstance(record.get("why"), str))


class _PackageNames:
    """Names each app uid of the recording by the package manager's answer, once.

    The trace names an app by its package; only the package manager knows it for any
    app (a user's own as much as a sample). A uid is asked about when a work record
    first names it; a lookup that fails (system_server not up yet) is tried again at
    the uid's next record.
    """

    def __init__(self, runtime: Any, sink: _Sink) -> None:
        self._runtime = runtime
        self._sink = sink
        self._known: set[int] = set()

    async def name(self, *uids: int) -> None:
        for uid in uids:
            if uid < FIRST_APPLICATION_UID or uid in self._known:  # the system's uids go unnamed
                continue
            binder = await defaultServiceManager(self._runtime).checkService(PACKAGE_SERVICE)
            if binder is None:
                return
            try:
                packages = await IPackageManager.asInterface(binder).getPackagesForUid(uid)
            except Exception:  # system_server restarting: ask again at the uid's next record
                return
            self._known.add(uid)
            if packages:
                self._sink.write({"type": "package", "uid": uid, "package": packages[0], "wall_ns": time.monotonic_ns()})


class _Epoch:
    """One HAL process's life. A restarted HAL's driver counts time and ids from zero
    again; the recorder shifts them so the recording stays one increasing timeline."""

    def __init__(self, generation: int, offset_ns: int) -> None:
        self.generation = generation
        self.offset_ns = offset_ns
        self.id_base = generation * 1_000_000_000
        self.since = -1
        self.last_ns = offset_ns
        self.last_wall = time.monotonic_ns()

    def work(self, event: Any) -> dict[str, Any]:
        record = work_record(event)
        record["time_ns"] += self.offset_ns
        record["id"] += self.id_base
        record["work_id"] += self.id_base
        self.since = max(self.since, int(event.info.id))
        self.last_ns = max(self.last_ns, record["time_ns"])
        self.last_wall = record["wall_ns"]
        return record


async def serve_recorder(
    emulator: Any,
    *,
    poll_interval: float = 0.05,
    max_bytes: int = 256 << 20,
    task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED,
) -> None:
    """Record the running emulator into ``trace.jsonl`` until cancelled.

    Work records stop after ``max_bytes`` of them (logged once, marked ``truncated``
    in the file); thermal and memory records go on.

    A HAL that lacks one of the calls (an older build) costs that kind of record,
    logged once, never the boot. A HAL that dies is looked up again every tick until
    init has restarted it; the new one's events continue the same timeline.
    """
    runtime = emulator.runtime
    sm = defaultServiceManager(runtime)
    hal = await get_service(runtime, HAL_CONTROL, IHalControl)
    sink = _Sink(emulator.files.trace_events, max_bytes)
    try:
        thresholds = [round(float(t), 2) for t in (await hal.thermalStatus()).thresholdsC]
    except Exception:  # an older HAL: the plot then draws no bands
        thresholds = []
    sink.write(
        {
            "type": "meta",
            "speed": emulator.config.speed,
            "init_pid": os.getpid(),
            "pids": emulator.pids,
            "wall_ns": time.monotonic_ns(),
            "thresholds_c": thresholds,
        }
    )
    epoch = _Epoch(0, 0)
    names = _PackageNames(runtime, sink)
    marker = _MarkerReader(emulator.files.root / TRACE_MARKER_NAME, fresh=True, shared=has_os_uids(emulator.isolation))

    class Listener(IHalListener.Stub):
        async def onThermalSeverityChanged(self, severity: int, temperatureC: float) -> None:  # noqa: N802,N803
            sink.write({"type": "thermal", "severity": int(severity), "temperature_c": float(temperatureC),
                        "wall_ns": time.monotonic_ns(), "changed": True})

        async def onMemoryPressure(self, p: Any) -> None:  # noqa: N802
            sink.write(
                {
                    "type": "memory",
                    "device_number": int(p.deviceNumber),
                    "hw_device": int(p.hwDevice),
                    "used": int(p.weightMemoryUsed),
                    "total": int(p.weightMemoryTotal),
                    "sram_used": int(p.sramUsed),
                    "sram_total": int(p.sramTotal),
                    "refused": p.refused,
                    "time_ns": int(p.timeNs) + epoch.offset_ns,
                    "wall_ns": time.monotonic_ns(),
                }
            )

    warned: set[str] = set()

    def warn_once(what: str, exc: BaseException) -> None:
        if what not in warned:
            warned.add(what)
            emulator.log("W", f"recorder: {what} failed, its records are missing: {type(exc).__name__}: {exc}",
                         tag="traced")

    listener = Listener()

    async def register(control: Any) -> None:
        try:
            await control.registerListener(listener)
        except Exception as exc:  # the recorder is an observer: it never fails the boot
            warn_once("registerListener", exc)

    await register(hal)
    last_thermal: tuple[int, float] | None = None
    last_thermal_wall = 0
    task_status.started()
    try:
        while True:
            if hal is None:
                binder = await sm.checkService(HAL_CONTROL)
                if binder is not None and binder.isBinderAlive():
                    hal = IHalControl.asInterface(binder)
                    gap = (time.monotonic_ns() - epoch.last_wall) * emulator.config.speed
                    epoch = _Epoch(epoch.generation + 1, int(epoch.last_ns + gap))
                    sink.write({"type": "hal_restart", "generation": epoch.generation,
                                "time_ns": epoch.offset_ns, "wall_ns": time.monotonic_ns()})
                    await register(hal)
                    emulator.log("I", f"recorder: following the restarted HAL (generation {epoch.generation})",
                                 tag="traced")
            if hal is not None:
                try:
                    for event in await hal.recentWorkEvents(4096, epoch.since):
                        record = epoch.work(event)
                        await names.name(record["uid"], record["original_uid"])
                        sink.write(record)
                    status = await hal.thermalStatus()
                except Exception as exc:
                    if not hal.asBinder().isBinderAlive():
                        hal = None  # the HAL died: look for init's restarted one
                    else:
                        warn_once("a HAL call", exc)
                else:
                    now = time.monotonic_ns()
                    sample = (int(status.severity), round(float(status.temperatureC), 2))
                    # A sample when it moves, and a heartbeat so a flat line still draws.
                    if sample != last_thermal or now - last_thermal_wall > 500_000_000:
                        sink.write({"type": "thermal", "severity": sample[0], "temperature_c": sample[1],
                                    "wall_ns": now})
                        last_thermal, last_thermal_wall = sample, now
            for record in marker.read():
                await names.name(record["uid"])
                sink.write(record)
            if sink.no_space is not None and "no space" not in warned:
                warned.add("no space")
                emulator.log("W", f"recorder: {sink.no_space.strerror}: records are dropped until there is room"
                             " (the stack goes on)", tag="traced")
            if sink.truncated and "truncated" not in warned:
                warned.add("truncated")
                emulator.log("W", f"recorder: {max_bytes >> 20} MiB of work events recorded; recording no more of"
                             " them (thermal and memory go on)", tag="traced")
            sink.flush()
            await trio.sleep(poll_interval)
    finally:
        with trio.CancelScope(shield=True):
            try:
                with trio.move_on_after(0.5):
                    for record in marker.read():  # the apps' last CPU steps (named already, or not at all)
                        sink.write(record)
                    if hal is not None:
                        for event in await hal.recentWorkEvents(4096, epoch.since):
                            sink.write(epoch.work(event))
            except Exception:  # the HAL may already be gone at shutdown
                pass
            sink.close()
