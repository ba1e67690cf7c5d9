"""Whole-stack mode: the same workload through the full framework, in one process.

Where ``_run`` submits straight to the driver, here every task is an *app*:
installed from a generated ``AndroidManifest.xml`` (declaring the feature
``android.hardware.npu`` and the NPU Manager permission), launched by the
activity manager at the task's ``importance``, asking the ``npu`` service for
a model load (``requestCanLoadModel``), compiling its model for the workload's
device through NNAPI (``framework.nn``) once approved, and executing each
request at its arrival time with the task's job priority.  Between them run
the real servicemanager, the vendor HAL (``serve_hal`` over a virtual-clock
driver opened with the policy's modes) and system_server with the real
``npu`` service, each with its own binder runtime on a ``MemoryNetwork``
(``framework.emulator.open_stack``),
under trio's autojump ``MockClock`` (the HAL's clock follower keeps emulated
time equal to trio time).  So what is measured includes what the framework
decides: the priority the npu service gives each uid from its importance
(``SchedulingConfig.appPriority``), and, under the budget or turn-taking
load policy, which apps may load at all and who is asked to unload.

An app that is asked to unload (``onRequestUnloadModel``) lets its running
requests finish, releases its compilation, says ``notifyModelUnloaded`` and
files a new request; requests arriving meanwhile wait in the app, and their
turnaround includes the wait.  Requests still waiting ``drain_ms`` after the
last arrival count as not completed.

Timing comes from the HAL's undebounced record of work events (exact
emulated times of each request's queueing, starts, pauses and end, and the
channel it ran on), matched to the apps' requests in submission order per
uid; ``app_turnaround_ms`` in the JSON is what the app itself saw, which can
lag by one step of the HAL's clock follower.

Model sizes.  NNAPI has no cost scale, so a task's ``work_ms`` is reached
with depth: a chain of small FULLY_CONNECTED layers whose emulated time is
mostly the per-slice overhead; the layer count is calibrated on the driver.
Preemption points are therefore much finer than in driver mode (one slice is
tens of microseconds), and a model's emulated weight size is its
``size_mb``, as ``setEmulatedModelSize`` reports it.  The hardware streams
those weights on every inference, so a request cannot be shorter than its
model's weight traffic plus one layer (300 MB take 6.3 ms on emu-npu): a task
whose ``work_ms`` is below that floor runs at it, with one layer, and the
report says so (driver mode reaches any ``work_ms`` through the cost scale,
which scales the traffic too).
"""

from __future__ import annotations

import collections
import logging
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import trio
import trio.testing

import npuhal
from npuhal import FuseCode, ModelBuilder, OperationType
from framework.binder import defaultServiceManager
from framework.emulator import open_stack
from framework.server import NpuPolicy, policy_source
from interfaces.android.hardware.neuralnetworks import Model
from interfaces.android.npumanager import INpuManager
from interfaces.services import NPU_SERVICE

from ._errors import LabRunError
from ._run import Calibration, Job, Policy, RunResult, _alone_ns
from ._workload import Arrival, Task, Workload

__all__ = ["NPU_POLICIES", "StackCalibration", "calibrate_stack", "npu_policy_label", "run_stack"]

#: The npu service's built-in load policies, by the names ``cmd npu`` uses.
NPU_POLICIES = ("status-quo", "turn-taking", "budget")

NpuPolicyChoice = str | NpuPolicy
"""The npu service's load policy for a whole-stack run: a built-in's name, or a policy
object (a user's, from ``framework.server.load_policy``: ``--npu-policy-file``)."""


def npu_policy_label(npu_policy: NpuPolicyChoice) -> str:
    """How reports name the npu policy: a built-in's name, or a user's with where it came from;
    LabRunError if it is neither a built-in's name nor a policy."""
    if isinstance(npu_policy, NpuPolicy):
        source = policy_source(npu_policy)
        return npu_policy.name + (f" ({source})" if source else "")
    if npu_policy not in NPU_POLICIES:
        raise LabRunError(f"npu policy must be one of {', '.join(NPU_POLICIES)} or a policy, not {npu_policy!r}")
    return npu_policy
STACK_WIDTH = 8
STACK_MAX_LAYERS = 4000
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class StackCalibration:
    """Per task: the layer count that gives its ``work_ms`` through NNAPI.

    ``floor_ms``: what one request of the task's model takes alone with one
    layer, the least it can (mostly its weights' streaming); a task whose
    ``work_ms`` is below it runs at it.
    """

    layers: tuple[int, ...]
    floor_ms: tuple[float, ...] = ()

    def below_floor(self, workload: Workload) -> list[tuple[Task, float]]:
        """The tasks that run longer than their ``work_ms`` asks, with what they take."""
        return [(t, f) for t, f in zip(workload.tasks, self.floor_ms) if t.work_ms < f]


def _hal_model(layers: int, seed: int) -> tuple[Model, np.ndarray]:
    rng = np.random.default_rng([seed, layers])
    m = ModelBuilder()
    y = m.input((1, STACK_WIDTH))
    for _ in range(layers):
        w = m.constant(rng.standard_normal((STACK_WIDTH, STACK_WIDTH), dtype=np.float32) / np.float32(math.sqrt(STACK_WIDTH)))
        b = m.constant(np.full(STACK_WIDTH, 0.1, np.float32))
        y = m.operation(OperationType.FULLY_CONNECTED, [y, w, b, m.int32(FuseCode.RELU)], (1, STACK_WIDTH))
    m.output(y)
    return m.build(), rng.standard_normal((1, STACK_WIDTH), dtype=np.float32)


def _nn_model(layers: int, seed: int) -> Any:
    """The same chain as ``_hal_model``, built the way an app builds it (``framework.nn.Model``)."""
    from framework.nn import Model, OperandType, OperationType as NnOp

    rng = np.random.default_rng([seed, layers])
    m = Model()
    x = m.addOperand(OperandType.TENSOR_FLOAT32, [1, STACK_WIDTH])
    cur = x
    for _ in range(layers):
        w = m.addOperand(OperandType.TENSOR_FLOAT32, [STACK_WIDTH, STACK_WIDTH])
        m.setOperandValue(w, rng.standard_normal((STACK_WIDTH, STACK_WIDTH), dtype=np.float32)
                          / np.float32(math.sqrt(STACK_WIDTH)))
        b = m.addOperand(OperandType.TENSOR_FLOAT32, [STACK_WIDTH])
        m.setOperandValue(b, np.full(STACK_WIDTH, 0.1, np.float32))
        fuse = m.addOperand(OperandType.INT32)
        m.setOperandValue(fuse, int(FuseCode.RELU))
        out = m.addOperand(OperandType.TENSOR_FLOAT32, [1, STACK_WIDTH])
        m.addOperation(NnOp.FULLY_CONNECTED, [cur, w, b, fuse], [out])
        cur = out
    m.identifyInputsAndOutputs([x], [cur])
    m.finish()
    return m, rng.standard_normal((1, STACK_WIDTH), dtype=np.float32)


def calibrate_stack(workload: Workload, policy: Policy) -> StackCalibration:
    """Layer counts for every task's ``work_ms``, measured on ``policy``'s driver alone."""

    def alone(index: int, layers: int) -> int:
        built = [_hal_model(layers, i) for i in range(len(workload.tasks))]
        cal = Calibration((1.0,) * len(built), tuple(m for m, _ in built), tuple(x for _, x in built))
        return _alone_ns(policy, workload, cal, index)[0]

    counts = []
    floors = []
    for i, task in enumerate(workload.tasks):
        t1, t21 = alone(i, 1), alone(i, 21)
        per_layer = (t21 - t1) / 20
        if per_layer <= 0:
            raise LabRunError(f"{workload.source}: task {task.name!r}: a layer costs nothing on {workload.device} "
                              f"({t1 / 1e6:.3f} ms with 1 layer, {t21 / 1e6:.3f} ms with 21): cannot size its model")
        fixed = t1 - per_layer
        # Below one layer's time (its weights' traffic, mostly) the task runs at that floor.
        layers = max(1, round((task.work_ms * 1e6 - fixed) / per_layer))
        if layers > STACK_MAX_LAYERS:
            raise LabRunError(
                f"{workload.source}: task {task.name!r}: work_ms {task.work_ms:g} needs {layers} layers in whole-stack "
                f"mode (at most {STACK_MAX_LAYERS}: {per_layer / 1e6:.3f} ms a layer on {workload.device})"
            )
        counts.append(layers)
        floors.append(t1 / 1e6)
    return StackCalibration(tuple(counts), tuple(floors))


def stack_reference(workload: Workload, cal: StackCalibration) -> list[np.ndarray]:
    """What each task's model computes, by the hardware's own kernels (no device, no time)."""
    out = []
    for i in range(len(workload.tasks)):
        model, x = _hal_model(cal.layers[i], i)
        out.append(npuhal.run_model(model, [x])[0])
    return out


def isolated_arrivals(workload: Workload) -> list[Arrival]:
    """One request per task, each alone: far enough apart that none overlaps the next."""
    gap_ns = round((max(t.work_ms for t in workload.tasks) * 4 + 50) * 1e6)
    return [Arrival(i * gap_ns, i) for i in range(len(workload.tasks))]


def _package(index: int) -> str:
    return f"org.npuemu.lab.task{index}"


def _manifest(package: str, label: str) -> str:
    return f"""<?xml version="1.0" encoding="utf-8"?>
<manifest xmlns:android="http://schemas.android.com/apk/res/android" package="{package}"
    android:versionCode="1" android:versionName="1.0">
    <uses-sdk android:minSdkVersion="29" android:targetSdkVersion="37" />
    <uses-feature android:name="android.hardware.npu" android:required="false" />
    <uses-permission android:name="android.permission.ACCESS_NPU_MODEL_MANAGER_API" />
    <application android:label="{label}" />
</manifest>
"""


def _size_class(size_mb: float) -> int:
    from framework.npumanager import (
        NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB,
        NPU_MODEL_SIZE_GREATER_THAN_2G,
        NPU_MODEL_SIZE_LESS_THAN_1GB,
    )

    if size_mb < 1024:
        return NPU_MODEL_SIZE_LESS_THAN_1GB
    return NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB if size_mb <= 2048 else NPU_MODEL_SIZE_GREATER_THAN_2G


@dataclass(slots=True)
class _Request:
    task: int
    arrival_s: float
    end_s: float | None = None
    ok: bool = False
    correct: bool | None = None


class _TaskApp:
    """One task's app: a model-load slot that reloads when asked to unload, and its requests."""

    def __init__(self, lab: _StackRun, index: int) -> None:
        self.lab = lab
        self.index = index
        self.task = lab.workload.tasks[index]
        self.model, self.x = _nn_model(lab.cal.layers[index], index)
        self.compilation: Any = None
        self.loaded = trio.Event()
        self.ready = trio.Event()  # first answer from the service (any)
        self.unload_asked = trio.Event()
        self.running = 0
        self.idle = trio.Event()
        self.loads = 0
        self.unloads = 0
        self.statuses: list[int] = []

    async def main(self, context: Any) -> None:
        from framework.app import Context
        from framework.nn import open_nn_runtime

        npu = context.getSystemService(Context.NPU_SERVICE)
        async with open_nn_runtime(context.runtime, enabledDevices="") as nn, trio.open_nursery() as nursery:
            device = nn.getDeviceByName(self.lab.workload.device)
            nursery.start_soon(self._slot, npu, nn, device, context)
            await self.lab.go.wait()
            t0 = self.lab.t0
            async with trio.open_nursery() as requests:
                for arrival_s in self.lab.arrivals_s[self.index]:
                    await trio.sleep_until(t0 + arrival_s)
                    request = _Request(self.index, arrival_s)
                    self.lab.requests.append(request)
                    requests.start_soon(self._execute, request)
            nursery.cancel_scope.cancel()

    async def _slot(self, npu: Any, nn: Any, device: Any, context: Any) -> None:
        from framework.npumanager import (
            NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW,
            NPU_MODEL_PRIORITY_BACKGROUND,
            NPU_MODEL_PRIORITY_NORMAL,
            ModelLoadRequest,
        )

        app = self

        class Callback:
            """One request's callbacks, on a channel of its own: a late callback of an
            earlier request (its COMPLETE after an unload) must not be read as this one's."""

            def __init__(self) -> None:
                self.send, self.events = trio.open_memory_channel[tuple[str, int, Any]](64)

            async def onCanLoadModel(self, request: Any, status: int, listener: Any) -> None:  # noqa: N802
                await self.send.send(("can_load", int(status), listener))

            async def onRequestUnloadModel(self, request: Any, reason: int = 0) -> None:  # noqa: N802
                app.unload_asked.set()
                await self.send.send(("unload", int(reason), None))

            async def onModelLoadRequestComplete(self, request: Any, status: int) -> None:  # noqa: N802
                await self.send.send(("complete", int(status), None))

        priority = NPU_MODEL_PRIORITY_NORMAL if self.task.priority < 500 else NPU_MODEL_PRIORITY_BACKGROUND
        request_id = self.index * 100_000
        while True:
            request_id += 1
            request = ModelLoadRequest.Builder(request_id).setSize(_size_class(self.task.size_mb)).setPriority(priority).build()
            callback = Callback()
            events = callback.events
            await npu.requestCanLoadModel(request, callback, context.getMainExecutor())
            listener = None
            while True:
                kind, status, who = await events.receive()
                self.ready.set()
                if kind == "can_load":
                    self.statuses.append(status)
                    listener = who
                    if status == NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW:
                        break
                elif kind == "complete":
                    listener = None
                    break
            if listener is None:
                await trio.sleep(0.05)  # cancelled before it could load: ask again shortly
                continue
            compilation = nn.createCompilationForDevices(self.model, [device])
            compilation.setEmulatedModelSize(int(self.task.size_mb * MIB))
            await compilation.finish()
            await listener.notifyModelLoaded(request)
            self.loads += 1
            self.compilation = compilation
            self.unload_asked = trio.Event()
            self.loaded.set()
            # Serve until asked to unload (or the request ends), then release and ask again.
            while True:
                kind, status, _ = await events.receive()
                if kind in ("unload", "complete"):
                    break
            self.loaded = trio.Event()
            while self.running:
                self.idle = trio.Event()
                await self.idle.wait()
            self.compilation = None
            await compilation.aclose()
            if kind == "unload":
                await listener.notifyModelUnloaded(request)
                self.unloads += 1

    async def _execute(self, request: _Request) -> None:
        from framework.nn import NeuralNetworksError

        while self.compilation is None or not self.loaded.is_set():
            await self.loaded.wait()
        self.running += 1
        try:
            execution = self.compilation.createExecution()
            execution.setInput(0, self.x)
            execution.setJobPriority(self.task.priority)
            try:
                (out,) = await execution.compute_async()
            except NeuralNetworksError:
                request.ok = False
            else:
                request.ok = True
                request.correct = bool(np.array_equal(out, self.lab.reference[self.index]))
            request.end_s = trio.current_time()
        finally:
            self.running -= 1
            if not self.running:
                self.idle.set()


class _StackRun:
    def __init__(self, workload: Workload, cal: StackCalibration, arrivals: Sequence[Arrival],
                 reference: Sequence[np.ndarray], npu_policy: NpuPolicyChoice, drain_ms: float) -> None:
        self.workload = workload
        self.cal = cal
        self.arrivals_s: list[list[float]] = [[] for _ in workload.tasks]
        for a in arrivals:
            self.arrivals_s[a.task].append(a.time_ns / 1e9)
        self.total = len(arrivals)
        self.reference = reference
        self.npu_policy = npu_policy
        self.drain_s = drain_ms / 1e3
        self.go = trio.Event()
        self.t0 = 0.0
        self.requests: list[_Request] = []
        self.apps = [_TaskApp(self, i) for i in range(len(workload.tasks))]
        self.uids: dict[int, int] = {}
        self.hal: Any = None
        self.channels = 0
        self.t0_driver_ns = 0
        self.log: _Collector | None = None
        self.npu: Any = None  # system_server's npu service, for its policy's errors


async def _stack_main(run: _StackRun, policy: Policy, apps_dir: Path) -> _RecordReader:
    driver = policy.open_driver(run.workload)
    run.channels = driver.device_by_name(run.workload.device).channels
    apps = {_package(i): app.main for i, app in enumerate(run.apps)}
    plugin = run.npu_policy if isinstance(run.npu_policy, NpuPolicy) else None
    async with driver, open_stack(driver, apps=apps, apps_dir=apps_dir, system_options={"npu_policy": plugin}) as stack:
        run.hal, system = stack.hal, stack.system
        run.npu = system.npu
        if plugin is None:
            async with stack.shell() as shell:
                npu = INpuManager.asInterface(await defaultServiceManager(shell).getService(NPU_SERVICE))
                await npu.shellCommand([f"set-{run.npu_policy}-policy"])
        for i, task in enumerate(run.workload.tasks):
            await system.activity.start_app(_package(i), task.importance)
            run.uids[system.packages.packages.getPackageInfo(_package(i)).uid] = i
        with trio.fail_after(60):
            for app in run.apps:
                await app.ready.wait()
        # Let the first loads settle (compilations, unload round trips) before the clock starts.
        await trio.sleep(0.25)
        run.t0 = trio.current_time()
        run.hal.sync_clock()
        run.t0_driver_ns = driver.now_ns
        records = _RecordReader(run.hal.recent)
        run.go.set()
        end = run.t0 + run.workload.duration_ms / 1e3 + run.drain_s
        while trio.current_time() < end:
            records.pull()
            if len(run.requests) == run.total and all(r.end_s is not None for r in run.requests):
                break
            await trio.sleep(0.01)
        records.pull()
        if run.log is not None:
            run.log.active = False
    return records


class _RecordReader:
    """Copies the HAL's record of work events as it grows, which it does without bound
    under overload while the record itself keeps only its newest ``maxlen`` events."""

    def __init__(self, recent: collections.deque[Any]) -> None:
        self.recent = recent
        self.records: list[Any] = []
        self.lost = False

    def pull(self) -> None:
        last = self.records[-1] if self.records else None
        new = []
        for r in reversed(self.recent):
            if r is last:
                break
            new.append(r)
        else:
            # The newest record already copied is gone: more events came between two reads
            # than the HAL keeps.
            self.lost = self.lost or last is not None
        self.records.extend(reversed(new))


def run_stack(
    workload: Workload,
    cal: StackCalibration,
    policy: Policy,
    arrivals: Sequence[Arrival],
    reference: Sequence[np.ndarray],
    *,
    npu_policy: NpuPolicyChoice = "status-quo",
    drain_ms: float = 10_000.0,
    factor: float = 1.0,
) -> RunResult:
    """Run ``arrivals`` through the whole stack under ``policy`` and the npu service's ``npu_policy``.

    A user's npu policy that fails at an event (``framework.server.PolicyError``) does not
    stop the run: the service carries on with its fallback, and the result's
    ``npu_policy_errors`` says each failure with its event.
    """
    npu_policy_label(npu_policy)
    run = _StackRun(workload, cal, arrivals, reference, npu_policy, drain_ms)
    with tempfile.TemporaryDirectory(prefix="npuemu-lab-apps-") as tmp:
        apps_dir = Path(tmp)
        for i, task in enumerate(workload.tasks):
            folder = apps_dir / f"task{i:03d}"
            folder.mkdir()
            (folder / "AndroidManifest.xml").write_text(_manifest(_package(i), task.name))
        # The stack's services log as they would on a device (a callback
        # dropped at teardown, say); keep that out of the table, in the JSON.
        collector = run.log = _Collector()
        root = logging.getLogger()
        root.addHandler(collector)
        try:
            records = trio.run(_stack_main, run, policy, apps_dir, clock=trio.testing.MockClock(autojump_threshold=0))
        except npuhal.NpuError as e:
            raise LabRunError(f"whole stack, policy {policy.name}: {e}") from None
        finally:
            root.removeHandler(collector)
    if records.lost:
        raise LabRunError(f"whole stack, policy {policy.name}: more work events came in 10 ms of emulated time "
                          f"than the HAL's record keeps ({run.hal.recent.maxlen})")
    result = _to_result(run, policy, records.records, factor)
    result.log = collector.lines
    if run.npu is not None:
        result.npu_policy_errors = [f"at {e['at'] - run.t0:.3f}s {e['event']}: {e['error']}"
                                    for e in run.npu.arbiter.policy_errors]
        result.npu_policy_error_count = run.npu.arbiter.dump(0.0)["counters"]["policy_errors"]
    return result


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.active = True  # off at teardown, whose order (and so its log) trio does not fix

    def emit(self, record: logging.LogRecord) -> None:
        if not self.active or len(self.lines) >= 100:
            return
        line = f"{record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            line += " (" + "; ".join(f"{type(e).__name__}: {e}" for e in _leaves(record.exc_info[1])) + ")"
        self.lines.append(line)


def _to_result(run: _StackRun, policy: Policy, records: list[Any], factor: float) -> RunResult:
    """Match the HAL's record of each work to the app request it served (per uid, in order)."""
    works: dict[int, dict[str, Any]] = {}
    order: dict[int, list[int]] = {}
    saves = 0
    paused_at: dict[tuple[int, int], int] = {}  # (hw device, channel) -> when a pause freed it
    for r in records:
        task = run.uids.get(r.info.uid)
        if task is None:
            continue
        w = works.setdefault(r.work_id, {"task": task, "req": None, "start": None, "end": None, "reason": None,
                                         "pauses": 0, "busy": 0, "seg": None})
        if r.kind == 0:
            w["req"] = r.time_ns
            order.setdefault(task, []).append(r.work_id)
        elif r.kind == 1:
            if w["start"] is None:
                w["start"] = r.time_ns
            w["seg"] = r.time_ns
            freed = paused_at.pop((r.hw_device, r.channel), None)
            if freed is not None:
                saves += r.time_ns - freed  # the context save between a pause and the next start
        else:
            if w["seg"] is not None:
                w["busy"] += r.time_ns - w["seg"]
                w["seg"] = None
            if r.reason == int(npuhal.EndReason.PAUSED):
                w["pauses"] += 1
                paused_at[(r.hw_device, r.channel)] = r.time_ns
            else:
                w["end"] = r.time_ns
                w["reason"] = npuhal.EndReason(r.reason)
    jobs: list[Job] = []
    by_task: dict[int, list[_Request]] = {}
    for req in sorted(run.requests, key=lambda q: (q.task, q.arrival_s)):
        by_task.setdefault(req.task, []).append(req)
    t0 = run.t0_driver_ns
    for task, reqs in by_task.items():
        ids = order.get(task, [])
        for k, req in enumerate(reqs):
            # The k-th request the app made is the k-th work the HAL saw from its uid.
            w = works[ids[k]] if k < len(ids) else None
            job = Job(task, round(req.arrival_s * 1e9), -1 if w is None else ids[k])
            if w is not None and w["end"] is not None and req.end_s is not None:
                job.start_ns = w["start"] - t0
                job.end_ns = w["end"] - t0
                job.reason = w["reason"] if req.ok else npuhal.EndReason.FAILED
                job.pauses = w["pauses"]
                job.busy_ns = w["busy"]
                job.correct = req.correct
            elif req.end_s is not None:
                job.reason = npuhal.EndReason.FAILED
            jobs.append(job)
    jobs.sort(key=lambda j: (j.arrival_ns, j.task))
    makespan = max((j.end_ns for j in jobs if j.end_ns is not None), default=0)
    return RunResult(policy, factor, jobs, run.channels, saves, makespan, 0)
