"""npuemu's VTS: the conformance suite a driver author runs on a laptop.

``run_vts(driver)`` boots a private HAL on the driver (``framework.emulator.open_stack``
with real processes and no system_server: a servicemanager of its own, ``python -m
npuhal`` as the system uid, this process as init), talks to it over the binder exactly as the framework would, and runs every
check below.  Each check is one function with a bounded time; a driver that
crashes (the HAL process dies: ``DeadObjectException``) or hangs (a call does not
return) fails that check with a sentence that says so, the HAL is restarted, and
the suite goes on with the next check.  The whole run is bounded too.

The checks, in the order they run:

``NpuSchedulingAidl.*`` (AOSP's ``VtsHalNpuSchedulingTargetTest``, SPEC.md Part C)
    config validation, the callback, and real inferences through the vendor's
    ``runTestInference`` (on ``npuemu.hal.IHalControl``, npuemu's counterpart of the
    ``run-test-inference`` tool AOSP's VTS shells out to): the events the
    ISchedulingCallback hears, effective priorities, priority order, and the
    direct-access and attribution refusals.
``NpuFeature.ImplementsHal``
    a device that declares ``android.hardware.npu`` serves ``IScheduling``.
``NeuralnetworksHidlTest.*`` (NN HAL 1.2 ``BasicTests``, SPEC.md Part A)
    run over every ``android.hardware.neuralnetworks.IDevice`` instance.
``Seed.*``
    the seeds' own rules: valid device types, a version string that changes with
    every build, and a heterogeneous device whose parts are exposed too.

How the seed's ``SchedulingConfig`` maps onto AOSP's tests.  AOSP's config has one
``priority`` (0..1000); the seed's has ``minPriority``, ``maxPriority`` and
``appPriority``.  Where an AOSP test sets "priority P", vts sends ``appPriority = P``
with the widest band, ``minPriority = 0`` and ``maxPriority = 2000`` (so the
driver's clamp never hides the sum), and "the uid's priority" is ``appPriority``.

Whose work.  AOSP's tests run the tool as the test's own euid.  vts does the same:
the work is this process's (root, uid 0, init of the private device), and the
configs the inference checks set are for that uid.

Some facts no public interface carries (which devices the driver *describes*, how
many channels each has, which parts a heterogeneous device manages, the versions
of a second build) come from the driver itself, asked in a throwaway child process
(``framework.vts._probe``), so that a driver that crashes on its first callback takes
only that child with it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from framework.binder import (
    DeadObjectException,
    IllegalArgumentException,
    RemoteException,
    SecurityException,
    defaultServiceManager,
)
from framework.emulator import BootConfig, Emulator, open_stack
from framework.npumanager import FEATURE_NEURAL_PROCESSING_UNIT
import interfaces.services as services
from interfaces.android.hardware.neuralnetworks import IDevice
from interfaces.android.hardware.npu import IScheduling, ISchedulingCallback, SchedulingConfig
from interfaces.npuemu.hal import IHalControl, WorkEvent
from npuhal import (
    BUILD_ID,
    DeviceStatus,
    DeviceType,
    EndReason,
    ModelBuilder,
    NpuDriverError,
    NpuValueError,
    OperationType,
    StartReason,
)

__all__ = [
    "CHECK_NAMES",
    "DEFAULT_CHECK_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "VtsCheckResult",
    "VtsDriverNotLoadedError",
    "VtsReport",
    "default_version_record",
    "describe_checks",
    "run_vts",
]

#: A check that has not answered after this long fails as "hangs".
DEFAULT_CHECK_TIMEOUT_S = 10.0
#: The checks' share of a run: once it has passed, the checks not yet run are
#: reported as not run.  What comes before (compiling a .c driver, at most
#: _COMPILE_TIMEOUT_S; the probes and the boot, at most _BOOT_TIMEOUT_S) is
#: bounded on its own, so a run never takes longer than the sum.
DEFAULT_TIMEOUT_S = 240.0
# Booting (or restarting) the private HAL; a driver that hangs in init fails here.
_BOOT_TIMEOUT_S = 20.0
# The driver probe child process.
_PROBE_TIMEOUT_S = 15.0
# Building a driver given as C source.
_COMPILE_TIMEOUT_S = 60.0

SCHEDULING_INSTANCE = services.HAL_SCHEDULING
SCHEDULING_PREFIX = SCHEDULING_INSTANCE.removesuffix("default")
CONTROL_INSTANCE = services.HAL_CONTROL
DEVICE_PREFIX = services.NN_DEVICE_PREFIX
FEATURE_NPU = FEATURE_NEURAL_PROCESSING_UNIT

# The seed's SchedulingConfig band, wide open: the uid's priority is appPriority.
_MIN_BAND, _MAX_BAND = 0, 2000
# The names of the AIDL enums, for messages (the enums are the compiled interfaces').
_DEVICE_TYPES = {int(t): t.name for t in DeviceType}
_TYPE_OTHER, _TYPE_ACCELERATOR = DeviceType.OTHER, DeviceType.ACCELERATOR
_STATUS_AVAILABLE = DeviceStatus.AVAILABLE
_STATUS_NAMES = {int(s): s.name for s in DeviceStatus}
_START_INITIAL = StartReason.INITIAL
_END_PAUSED, _END_COMPLETED = EndReason.PAUSED, EndReason.COMPLETED
_END_NAMES = {int(r): r.name for r in EndReason}
_KIND_REQUESTED, _KIND_STARTED, _KIND_ENDED = WorkEvent.KIND_REQUESTED, WorkEvent.KIND_STARTED, WorkEvent.KIND_ENDED
_EXTENSION_NAME = re.compile(r"[a-z0-9_.]+")


class VtsDriverNotLoadedError(NpuDriverError):
    """The driver under test never came up: the HAL exited, or hung, before it served.

    No check can run on such a driver, so ``run_vts`` raises this (one line: why the
    HAL did not start, and what loading the driver alone said) instead of failing
    every check with the same sentence.
    """


class _Fail(Exception):
    """A check's verdict: the driver does not conform, and this sentence says how."""


@dataclass(frozen=True, slots=True)
class VtsCheckResult:
    """One check's outcome: ``detail`` says what was seen, pass or fail."""

    name: str
    passed: bool
    detail: str

    def line(self) -> str:
        """``PASS name`` or ``FAIL name: why``, as ``npuemu vts`` prints it."""
        return f"PASS {self.name}" if self.passed else f"FAIL {self.name}: {self.detail}"

    def as_dict(self) -> dict:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class VtsReport:
    """Every check's result, in run order, and the driver they were run on."""

    driver: str
    results: tuple[VtsCheckResult, ...]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    @property
    def ok(self) -> bool:
        """True only when every check passed (``npuemu vts`` exits 0)."""
        return self.failed == 0

    def result(self, name: str) -> VtsCheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def summary(self) -> str:
        """The closing line: exactly ``N passed, M failed``."""
        return f"{self.passed} passed, {self.failed} failed"

    def lines(self) -> list[str]:
        return [r.line() for r in self.results] + [self.summary()]

    def as_dict(self) -> dict:
        return {
            "driver": self.driver,
            "checks": [r.as_dict() for r in self.results],
            "total": len(self.results),
            "passed": self.passed,
            "failed": self.failed,
        }


# ---- the driver under test, before any HAL ------------------------------------


@dataclass(frozen=True, slots=True)
class _Target:
    """What vts runs: the .so the HAL loads, and how to tell this build from others."""

    label: str                 # as the user named it
    so_path: str | None        # None: the built-in reference driver
    identity: str              # sha256 of the .so, or the C layer's BUILD_ID
    second_build: str | None   # a rebuild of the same source with another build id


def _csrc_include() -> Path:
    return Path(__file__).resolve().parents[2] / "csrc" / "include"


async def _compile(src: Path, out: Path, build_id: str) -> None:
    # The same command as `make driver`, so a driver that builds there builds here.
    cc = os.environ.get("NPU_CC") or os.environ.get("CC") or "cc"
    argv = [
        cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-g", f"-I{_csrc_include()}", "-O2", "-fPIC",
        "-shared", f'-DNPU_BUILD_ID="{build_id}"', str(src), "-o", str(out), "-lm",
    ]
    with trio.move_on_after(_COMPILE_TIMEOUT_S) as scope:
        try:
            done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
        except OSError as exc:
            raise NpuDriverError(f"cannot compile {src}: {exc}") from None
    if scope.cancelled_caught:
        raise NpuDriverError(f"compiling {src} took more than {_COMPILE_TIMEOUT_S:g} s")
    if done.returncode != 0:
        tail = "\n".join(done.stderr.decode(errors="replace").strip().splitlines()[-8:])
        raise NpuDriverError(f"{src} does not compile:\n{tail}")


def _sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


async def _prepare_target(driver: str | os.PathLike[str] | None, workdir: Path) -> _Target:
    """Resolve ``--driver``: nothing (reference), a ``.so``, or a ``.c`` built twice here."""
    if driver is None:
        return _Target("the built-in reference driver", None, f"builtin:{BUILD_ID}", None)
    path = Path(driver)
    if not path.is_file():
        raise NpuValueError(f"no driver at {os.fspath(driver)!r}")
    if path.suffix == ".c":
        source_id = _sha256(path)[:12]
        first, second = workdir / f"{path.stem}.so", workdir / f"{path.stem}.rebuild.so"
        # Each build runs to its end, even when the other fails: a compiler killed
        # halfway leaves its temporary files behind.
        failures: list[NpuDriverError] = []

        async def build(out: Path, build_id: str) -> None:
            try:
                await _compile(path, out, build_id)
            except NpuDriverError as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(build, first, source_id)
            nursery.start_soon(build, second, f"{source_id}-rebuild")
        if failures:
            raise failures[0]  # both builds of one source fail alike: one error is enough
        return _Target(os.fspath(driver), os.fspath(first), _sha256(first), os.fspath(second))
    return _Target(os.fspath(driver), os.fspath(path.resolve()), _sha256(path), None)


async def _probe(so_path: str | None) -> dict:
    """The driver's own description of its devices (see ``framework.vts._probe``)."""
    argv = [sys.executable, "-m", "framework.vts._probe"]
    if so_path is not None:
        argv += ["--driver", so_path]
    with trio.move_on_after(_PROBE_TIMEOUT_S) as scope:
        # Its own session, as the HAL's: a Ctrl-C at the terminal is vts's to handle
        # (it cancels the run, which kills this child), not a traceback of the probe's.
        done = await trio.run_process(
            argv, capture_stdout=True, capture_stderr=True, check=False, start_new_session=True
        )
    if scope.cancelled_caught:
        raise _Fail(f"the driver did not describe its devices within {_PROBE_TIMEOUT_S:g} s (it hangs)")
    if done.returncode != 0:
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        why = _signal_note(done.returncode) or (last[0] if last else f"exit status {done.returncode}")
        raise _Fail(f"loading the driver alone failed: {why}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise _Fail(f"the driver probe printed something other than its JSON: {done.stdout[:200]!r}") from None


def _signal_note(returncode: int | None) -> str:
    if returncode is None or returncode >= 0:
        return ""
    import signal

    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


# ---- the session: one private HAL, reconnected after each crash ----------------


class _Recorder:
    """What the ISchedulingCallback vts registered has heard, in arrival order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any, int | None]] = []
        self._changed = trio.Event()

    def add(self, method: str, info: Any, reason: int | None) -> None:
        self.events.append((method, info, reason))
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, count: int, timeout: float) -> None:
        with trio.move_on_after(timeout):
            while len(self.events) < count:
                await self._changed.wait()


class _RecordingCallback(ISchedulingCallback.Stub):
    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self._recorder = recorder

    async def onWorkRequested(self, workInfo: Any) -> None:  # noqa: N802,N803 - AIDL names
        self._recorder.add("onWorkRequested", workInfo, None)

    async def onWorkStarted(self, workInfo: Any, reason: Any) -> None:  # noqa: N802,N803
        self._recorder.add("onWorkStarted", workInfo, int(reason))

    async def onWorkEnded(self, workInfo: Any, reason: Any) -> None:  # noqa: N802,N803
        self._recorder.add("onWorkEnded", workInfo, int(reason))


@dataclass
class _Session:
    """The private HAL under test and the proxies to it, refreshed after a restart."""

    stack: Emulator  # the HAL runs in it, this process its init
    target: _Target
    facts: dict | None              # the probe's answer, None if the probe failed
    probe_error: str | None
    version_record: Path | None
    rebuild_facts: dict | None = None   # the second build's description (C source only)
    rebuild_error: str | None = None
    scheduling: Any = None
    control: Any = None
    services: list[str] = field(default_factory=list)
    devices: dict[str, Any] = field(default_factory=dict)
    hal_failure: str | None = None  # why the HAL is unusable for the rest of the run

    @property
    def uid(self) -> int:
        return self.stack.runtime.uid

    async def connect(self) -> None:
        sm = defaultServiceManager(self.stack.runtime)
        self.services = list(await sm.listServices(15))
        self.scheduling = self.control = None
        self.devices = {}
        binder = await sm.checkService(SCHEDULING_INSTANCE)
        if binder is not None:
            self.scheduling = IScheduling.asInterface(binder)
        binder = await sm.checkService(CONTROL_INSTANCE)
        if binder is not None:
            self.control = IHalControl.asInterface(binder)
        for name in self.services:
            if name.startswith(DEVICE_PREFIX):
                binder = await sm.checkService(name)
                if binder is not None:
                    self.devices[name[len(DEVICE_PREFIX):]] = IDevice.asInterface(binder)

    def death_note(self) -> str:
        """How the HAL process ended, if it did (a signal name, an exit code)."""
        code = self.stack.process("hal").returncode
        if code is None:
            return ""
        return _signal_note(code) or f"exit status {code}"

    async def exit_note(self) -> str:
        """``death_note`` once the dead HAL has been reaped (its socket closes first)."""
        with trio.move_on_after(1.0):
            await self.stack.process("hal").wait()
        return self.death_note()

    async def alive(self) -> bool:
        """Whether the HAL still answers (a ping through IScheduling, bounded)."""
        if self.scheduling is None:
            return self.death_note() == ""
        with trio.move_on_after(2.0):
            try:
                return bool(await self.scheduling.asBinder().pingBinder())
            except RemoteException:
                return False
        return False

    async def restart(self, why: str) -> None:
        if why == "hung":
            # A driver stuck in a callback holds the HAL's only thread: SIGTERM
            # would wait for a Python signal handler that never runs.
            self.stack.kill("hal")
        with trio.fail_after(_BOOT_TIMEOUT_S):
            await self.stack.restart_hal()
            await self.connect()

    # -- helpers the checks share ---------------------------------------------

    def config(self, uid: int, priority: int, *, direct: bool = True, attribute: bool = False) -> Any:
        return SchedulingConfig(
            minPriority=_MIN_BAND,
            maxPriority=_MAX_BAND,
            uid=uid,
            appPriority=priority,
            hasDirectAccess=direct,
            canAttributeOtherUid=attribute,
        )

    def new_callback(self) -> tuple[Any, _Recorder]:
        recorder = _Recorder()
        return _RecordingCallback(recorder), recorder

    def need_scheduling(self) -> Any:
        if self.scheduling is None:
            raise _Fail(f"{SCHEDULING_INSTANCE} is not registered")
        return self.scheduling

    def need_control(self) -> Any:
        if self.control is None:
            raise _Fail(f"{CONTROL_INSTANCE} is not registered, so no inference can be run")
        return self.control

    def need_devices(self) -> dict[str, Any]:
        if not self.devices:
            raise _Fail(f"no {DEVICE_PREFIX}* instance is registered")
        return self.devices

    def probe_devices(self) -> list[dict]:
        if self.facts is None:
            raise _Fail(f"the driver's own description is unavailable: {self.probe_error}")
        return self.facts["devices"]

    def inference_device(self) -> tuple[str, int]:
        """The device the inference checks use, and its channel count.

        The HAL's own default ("the first accelerator"), named explicitly so that
        vts knows how many channels it has (the ordering check fills all but one).
        """
        facts = self.facts["devices"] if self.facts else []
        registered = [d for d in facts if d["name"] in self.devices]
        for d in registered:
            if d["type"] == _TYPE_ACCELERATOR and not d["parts"]:
                return d["name"], max(1, d["channels"])
        if registered:
            return registered[0]["name"], max(1, registered[0]["channels"])
        if self.devices:
            return next(iter(self.devices)), 1
        raise _Fail(f"no {DEVICE_PREFIX}* instance is registered to run an inference on")

    async def run_inference(self, job_priority: int, *, original_uid: int = -1) -> list[Any]:
        device, _ = self.inference_device()
        return list(await self.need_control().runTestInference(job_priority, original_uid, device, -1))


def _describe(events: Sequence[tuple[str, Any, int | None]]) -> str:
    out = []
    for method, _, reason in events:
        if method == "onWorkStarted":
            method += "(INITIAL)" if reason == _START_INITIAL else f"({'RESUMED' if reason == StartReason.RESUMED else reason})"
        elif method == "onWorkEnded":
            method += f"({_END_NAMES.get(reason, reason)})"
        out.append(method)
    return ", ".join(out) or "nothing"


def _describe_raw(events: Sequence[Any]) -> str:
    names = {_KIND_REQUESTED: "requested", _KIND_STARTED: "started", _KIND_ENDED: "ended"}
    out = []
    for e in events:
        label = names.get(e.kind, str(e.kind))
        if e.kind == _KIND_STARTED:
            label += "(INITIAL)" if e.reason == _START_INITIAL else "(RESUMED)"
        elif e.kind == _KIND_ENDED:
            label += f"({_END_NAMES.get(e.reason, e.reason)})"
        out.append(f"{label} of work {e.workId}")
    return ", ".join(out) or "nothing"


def _final_end(events: Sequence[Any]) -> Any:
    ends = [e for e in events if e.kind == _KIND_ENDED and e.reason != _END_PAUSED]
    if not ends:
        raise _Fail("runTestInference returned without the work's final onWorkEnded")
    return ends[-1]


def _first_request(events: Sequence[Any]) -> Any:
    for e in events:
        if e.kind == _KIND_REQUESTED:
            return e
    raise _Fail("runTestInference returned no requested event")


# ---- NpuSchedulingAidl ---------------------------------------------------------


async def set_scheduling_configs(s: _Session) -> str:
    """setSchedulingConfigs({uid 1001, priority 500}) succeeds."""
    await s.need_scheduling().setSchedulingConfigs([s.config(1001, 500)])
    return "accepted {uid 1001, appPriority 500}"


async def _expect_illegal_argument(call: Awaitable[Any], what: str) -> str:
    try:
        await call
    except IllegalArgumentException as exc:
        return f"{what}: EX_ILLEGAL_ARGUMENT ({exc.message})"
    except DeadObjectException:
        raise
    except RemoteException as exc:
        raise _Fail(f"{what} failed with {type(exc).__name__} ({exc}), not EX_ILLEGAL_ARGUMENT") from None
    raise _Fail(f"{what} was accepted; it must fail with EX_ILLEGAL_ARGUMENT")


async def set_scheduling_configs_invalid_priority(s: _Session) -> str:
    """A config with priority -1 is EX_ILLEGAL_ARGUMENT.

    AOSP's older test used -100; the current one, and SPEC.md, -1.
    """
    return await _expect_illegal_argument(
        s.need_scheduling().setSchedulingConfigs([s.config(1001, -1)]), "appPriority -1"
    )


async def set_scheduling_configs_duplicate_uid(s: _Session) -> str:
    """Two configs for one uid in one call is EX_ILLEGAL_ARGUMENT."""
    return await _expect_illegal_argument(
        s.need_scheduling().setSchedulingConfigs([s.config(1001, 0), s.config(1001, 1000)]), "uid 1001 twice"
    )


async def update_scheduling_configs(s: _Session) -> str:
    """updateSchedulingConfigs({uid 1001, priority 500}) succeeds."""
    await s.need_scheduling().updateSchedulingConfigs([s.config(1001, 500)])
    return "accepted {uid 1001, appPriority 500}"


async def set_callback(s: _Session) -> str:
    """setCallback with a fresh callback succeeds."""
    callback, _ = s.new_callback()
    await s.need_scheduling().setCallback(callback)
    return "accepted"


async def set_callback_null(s: _Session) -> str:
    """setCallback(null) succeeds (it removes the callback)."""
    await s.need_scheduling().setCallback(None)
    return "accepted"


async def run_inference_status_callbacks(s: _Session) -> str:
    """One inference is heard as exactly requested, started, ended.

    As AOSP: the uid at priority 250 (attribution allowed), one inference at job
    priority 500, then 100 ms of quiet.  Each event carries jobPriority 500 and an
    effectivePriority >= 250; timestamps (CLOCK_MONOTONIC ms) do not decrease,
    starting no earlier than the call; ids increase.  npuemu adds what a framework
    relies on: the work is the caller's uid, it starts INITIAL and ends COMPLETED,
    and the HAL's undebounced record of the driver's events (``recentWorkEvents``)
    shows exactly one work with exactly those three events: the debounce would
    fold a driver's stray extra work into one clean-looking triple.
    """
    scheduling = s.need_scheduling()
    s.need_control()
    await scheduling.setSchedulingConfigs([s.config(s.uid, 250, attribute=True)])
    control = s.need_control()
    callback, recorder = s.new_callback()
    await scheduling.setCallback(callback)
    try:
        latest = list(await control.recentWorkEvents(1, -1))
        since = latest[-1].info.id if latest else -1
        start_ms = math.floor(time.monotonic() * 1000)
        await s.run_inference(500)
        # The final onWorkEnded is held for the 50 ms debounce window after the work.
        await recorder.wait_for(3, 2.0)
        await trio.sleep(0.1)
    finally:
        await scheduling.setCallback(None)
    # The debounce may fold a driver's stray work into one clean triple; the
    # HAL's undebounced record shows everything the inference made the driver do.
    raw = [e for e in await control.recentWorkEvents(256, since) if e.info.uid == s.uid]
    shape = [(e.kind, e.reason if e.kind != _KIND_REQUESTED else None) for e in raw]
    if len({e.workId for e in raw}) != 1 or shape != [(_KIND_REQUESTED, None), (_KIND_STARTED, _START_INITIAL), (_KIND_ENDED, _END_COMPLETED)]:
        raise _Fail(
            f"one inference made the driver report {_describe_raw(raw)} over {len({e.workId for e in raw})} work(s); "
            "expected exactly requested, started(INITIAL), ended(COMPLETED) of one work"
        )
    events = list(recorder.events)
    methods = [m for m, _, _ in events]
    want = ["onWorkRequested", "onWorkStarted", "onWorkEnded"]
    if methods != want:
        raise _Fail(f"heard {_describe(events)}; expected exactly onWorkRequested, onWorkStarted, onWorkEnded")
    last_ts, last_id = start_ms, None
    for method, info, _ in events:
        if info.jobPriority != 500:
            raise _Fail(f"{method} has jobPriority {info.jobPriority}, but the job was submitted at 500")
        if info.effectivePriority < 250:
            raise _Fail(f"{method} has effectivePriority {info.effectivePriority}, below the uid's priority 250")
        if info.timestampMs < last_ts:
            raise _Fail(f"{method} has timestampMs {info.timestampMs}, earlier than {last_ts} before it")
        if last_id is not None and info.id <= last_id:
            raise _Fail(f"{method} has id {info.id}, not greater than the previous event's {last_id}")
        if info.uid != s.uid:
            raise _Fail(f"{method} reports uid {info.uid}; the work was submitted by uid {s.uid}")
        last_ts, last_id = info.timestampMs, info.id
    if events[1][2] != _START_INITIAL:
        raise _Fail(f"onWorkStarted has reason {events[1][2]}, not INITIAL")
    if events[2][2] != _END_COMPLETED:
        reason = events[2][2]
        raise _Fail(f"onWorkEnded has reason {_END_NAMES.get(reason, reason)}, not COMPLETED")
    info = events[0][1]
    return f"requested, started, ended; effectivePriority {info.effectivePriority}, ids {events[0][1].id}..{last_id}"


async def run_inference_effective_priority(s: _Session) -> str:
    """Job priority 1000 gets a larger effectivePriority than job priority 0.

    As AOSP: the uid at priority 0; the effective priorities are read from the
    requested events the inference caused.
    """
    await s.need_scheduling().setSchedulingConfigs([s.config(s.uid, 0)])
    low = _first_request(await s.run_inference(1000)).info
    if low.jobPriority != 1000:
        raise _Fail(f"the work submitted at job priority 1000 reports jobPriority {low.jobPriority}")
    high = _first_request(await s.run_inference(0)).info
    if high.jobPriority != 0:
        raise _Fail(f"the work submitted at job priority 0 reports jobPriority {high.jobPriority}")
    if not low.effectivePriority > high.effectivePriority:
        raise _Fail(
            f"job priority 1000 got effectivePriority {low.effectivePriority}, job priority 0 got "
            f"{high.effectivePriority}: the job priority is ignored"
        )
    for info in (low, high):
        if not 0 <= info.effectivePriority <= 2000:
            raise _Fail(f"effectivePriority {info.effectivePriority} is outside 0..2000")
    return f"job 1000 -> {low.effectivePriority}, job 0 -> {high.effectivePriority}"


async def run_inferences_prioritized(s: _Session) -> str:
    """A job at 250 submitted 50 ms after one at 500 finishes first.

    SPEC.md's numbers; AOSP's stored test submits 1000 then, 100 ms later, 0 (with
    Cuttlefish's tool queueing 200 requests per run, so the device is always
    contended).  One npuemu inference occupies one channel, so on a device with C
    channels vts first occupies C - 1 of them with inferences at job priority 0
    (effective 0, which nothing preempts), leaving the two jobs to compete for the
    last channel.  The end times compared are the HAL's, in emulated ns.
    """
    await s.need_scheduling().setSchedulingConfigs([s.config(s.uid, 0)])
    s.need_control()
    device, channels = s.inference_device()
    results: dict[str, list[Any]] = {}
    errors: list[BaseException] = []

    async def run(key: str, priority: int, delay: float) -> None:
        await trio.sleep(delay)
        try:
            results[key] = await s.run_inference(priority)
        except RemoteException as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        for i in range(channels - 1):
            nursery.start_soon(run, f"blocker{i}", 0, 0.0)
        nursery.start_soon(run, "500", 500, 0.02 if channels > 1 else 0.0)
        nursery.start_soon(run, "250", 250, (0.02 if channels > 1 else 0.0) + 0.05)
    for exc in errors:
        if isinstance(exc, DeadObjectException):
            raise exc
    if errors:
        raise _Fail(f"an inference failed: {type(errors[0]).__name__}: {errors[0]}")
    first, second = _final_end(results["500"]), _final_end(results["250"])
    for label, end in (("500", first), ("250", second)):
        if end.reason != _END_COMPLETED:
            raise _Fail(f"the job at {label} ended {_END_NAMES.get(end.reason, end.reason)}, not COMPLETED")
    if not second.timeNs < first.timeNs:
        lag = (second.timeNs - first.timeNs) / 1e6
        raise _Fail(
            f"on {device} the job at 250 ended {lag:.1f} ms after the job at 500 it was submitted 50 ms after: "
            "priority is not honoured"
        )
    lead = (first.timeNs - second.timeNs) / 1e6
    note = f", {channels - 1} other channel(s) kept busy" if channels > 1 else ""
    return f"on {device} the job at 250 ended {lead:.1f} ms before the job at 500{note}"


async def _expect_refused(s: _Session, what: str, **kwargs: Any) -> str:
    try:
        events = await s.run_inference(500, **kwargs)
    except DeadObjectException:
        raise
    except SecurityException as exc:
        return f"refused: SecurityException ({exc.message})"
    except RemoteException as exc:
        return f"refused: {type(exc).__name__} ({exc})"
    ran = "ran to completion" if any(e.kind == _KIND_ENDED and e.reason == _END_COMPLETED for e in events) else "was accepted"
    raise _Fail(f"the work {what} {ran}; it must be refused")


async def run_inference_fails_without_direct_access(s: _Session) -> str:
    """Work from a uid whose config has hasDirectAccess = false is refused."""
    await s.need_scheduling().setSchedulingConfigs([s.config(s.uid, 0, direct=False)])
    s.need_control()
    return await _expect_refused(s, "of a uid without direct access")


async def run_inference_fails_without_attribute_other_uid(s: _Session) -> str:
    """Work attributed to uid 42 by a uid without canAttributeOtherUid is refused."""
    await s.need_scheduling().setSchedulingConfigs([s.config(s.uid, 0, attribute=False)])
    s.need_control()
    return await _expect_refused(s, "attributed to uid 42 without canAttributeOtherUid", original_uid=42)


async def feature_implements_hal(s: _Session) -> str:
    """A device that declares android.hardware.npu serves an IScheduling instance.

    The emulated device always declares the feature (npuemu emulates a device with
    an NPU), so at least one ``android.hardware.npu.IScheduling/*`` instance must be
    registered and answer a ping with the right descriptor.
    """
    instances = [n for n in s.services if n.startswith(SCHEDULING_PREFIX)]
    if not instances:
        raise _Fail(f"the device declares {FEATURE_NPU} but no {SCHEDULING_PREFIX}* instance is registered")
    binder = s.need_scheduling().asBinder()
    if not await binder.pingBinder():
        raise _Fail(f"{SCHEDULING_INSTANCE} does not answer a ping")
    descriptor = binder.getInterfaceDescriptor()
    if descriptor and descriptor != "android.hardware.npu.IScheduling":
        raise _Fail(f"{SCHEDULING_INSTANCE} is a {descriptor}")
    return f"{FEATURE_NPU} declared; {', '.join(instances)} registered"


# ---- NeuralnetworksHidlTest: NN HAL 1.2 over every IDevice ---------------------


async def _each_device(s: _Session, check: Callable[[str, Any], Awaitable[str | None]]) -> str:
    """Run ``check`` on every instance; fail naming every instance that fails."""
    failures, notes = [], []
    for name, device in sorted(s.need_devices().items()):
        try:
            note = await check(name, device)
        except _Fail as exc:
            failures.append(f"{name}: {exc}")
        else:
            if note:
                notes.append(f"{name} {note}")
    if failures:
        raise _Fail("; ".join(failures))
    return "; ".join(notes) or f"{len(s.devices)} device(s)"


async def status_test(s: _Session) -> str:
    """getStatus() is AVAILABLE (NN HAL 1.0's DeviceStatus)."""

    async def check(name: str, device: Any) -> str:
        status = int(await device.getStatus())
        if status != _STATUS_AVAILABLE:
            raise _Fail(f"status {_STATUS_NAMES.get(status, status)}, not AVAILABLE")
        return "AVAILABLE"

    return await _each_device(s, check)


async def get_capabilities_test(s: _Session) -> str:
    """Every execTime and powerUsage in getCapabilities() is > 0.

    That is the relaxed float32-to-float16 scalar and tensor figures and every
    operandPerformance entry; as in AOSP's test, operandPerformance must also be
    sorted by operand type.
    """

    async def check(name: str, device: Any) -> str:
        caps = await device.getCapabilities()
        figures = [
            ("relaxedFloat32toFloat16PerformanceScalar", caps.relaxedFloat32toFloat16PerformanceScalar),
            ("relaxedFloat32toFloat16PerformanceTensor", caps.relaxedFloat32toFloat16PerformanceTensor),
        ] + [(f"operandPerformance[type {p.type}]", p.info) for p in caps.operandPerformance]
        for label, info in figures:
            if not (info.execTime > 0 and info.powerUsage > 0):
                raise _Fail(f"{label} is execTime {info.execTime}, powerUsage {info.powerUsage}; both must be > 0")
        types = [int(p.type) for p in caps.operandPerformance]
        if types != sorted(types):
            raise _Fail(f"operandPerformance is not sorted by type: {types}")
        return None

    return await _each_device(s, check)


async def get_device_version_string_test(s: _Session) -> str:
    """getVersionString() is not empty."""

    async def check(name: str, device: Any) -> str:
        version = await device.getVersionString()
        if not version:
            raise _Fail("empty version string")
        return f"{version!r}"

    return await _each_device(s, check)


async def get_device_type_test(s: _Session) -> str:
    """getType() is OTHER, CPU, GPU or ACCELERATOR."""

    async def check(name: str, device: Any) -> str:
        kind = int(await device.getType())
        if kind not in _DEVICE_TYPES:
            raise _Fail(f"type {kind} is none of OTHER(1), CPU(2), GPU(3), ACCELERATOR(4)")
        return _DEVICE_TYPES[kind]

    return await _each_device(s, check)


def _name_problem(name: str) -> str | None:
    dashes = name.count("-")
    if dashes != 1:
        return f"{dashes} '-' (exactly one is required)"
    if name.startswith("-") or name.endswith("-"):
        return "the '-' is at an end"
    return None


async def get_device_name_test(s: _Session) -> str:
    """Every device is named {VENDOR}-{DEVICE_NAME}: exactly one '-', neither first nor last.

    AOSP checks the instances that exist.  npuemu's HAL does not register a device
    whose name breaks the rule, so vts also compares the registered instances with
    the devices the driver itself describes: a device missing for its name fails here.
    """
    problems = []
    for name in s.devices:
        why = _name_problem(name)
        if why:
            problems.append(f"instance {name!r} has {why}")
    if s.facts is not None:
        for d in s.facts["devices"]:
            if d["name"] not in s.devices:
                why = _name_problem(d["name"]) or "a name the HAL refused"
                problems.append(f"driver device {d['number']} {d['name']!r} is not exposed: {why}")
    if problems:
        raise _Fail("; ".join(problems))
    s.need_devices()
    return ", ".join(sorted(s.devices))


async def get_device_supported_extensions_test(s: _Session) -> str:
    """Every extension name uses only [a-z0-9_.] and contains a '.'."""

    async def check(name: str, device: Any) -> str:
        extensions = list(await device.getSupportedExtensions())
        for ext in extensions:
            if not _EXTENSION_NAME.fullmatch(ext.name or "") or "." not in ext.name:
                raise _Fail(f"extension name {ext.name!r} must use [a-z0-9_.] and contain a '.'")
        return f"{len(extensions)} extension(s)" if extensions else None

    return await _each_device(s, check)


async def get_number_of_cache_files_needed(s: _Session) -> str:
    """numModelCache and numDataCache are each 0..32 (MAX_NUMBER_OF_CACHE_FILES)."""

    async def check(name: str, device: Any) -> str:
        n = await device.getNumberOfCacheFilesNeeded()
        for label, value in (("numModelCache", n.numModelCache), ("numDataCache", n.numDataCache)):
            if not 0 <= value <= IDevice.MAX_NUMBER_OF_CACHE_FILES:
                raise _Fail(f"{label} is {value}, outside 0..{IDevice.MAX_NUMBER_OF_CACHE_FILES}")
        return None

    return await _each_device(s, check)


def _test_model() -> tuple[Any, int]:
    """ADD -> RELU -> MUL over [1, 4] tensors, as the Model parcelable; and its op count."""
    b = ModelBuilder()
    x, y = b.input([1, 4]), b.input([1, 4])
    none = b.int32(0)
    s = b.operation(OperationType.ADD, [x, y, none], [1, 4])
    r = b.operation(OperationType.RELU, [s], [1, 4])
    out = b.operation(OperationType.MUL, [r, x, none], [1, 4])
    b.output(out)
    model = b.build()
    return model, len(model.main.operations)


async def get_supported_operations(s: _Session) -> str:
    """getSupportedOperations(model) answers one bool per operation of the model."""
    model, count = _test_model()

    async def check(name: str, device: Any) -> str:
        answer = list(await device.getSupportedOperations(model))
        if len(answer) != count or not all(isinstance(v, bool) for v in answer):
            raise _Fail(f"answered {answer!r} for a model of {count} operations")
        return f"{sum(answer)}/{count}"

    return await _each_device(s, check)


# ---- the seeds' rules -----------------------------------------------------------


async def valid_device_types(s: _Session) -> str:
    """Each device is OTHER, CPU, GPU or ACCELERATOR; a heterogeneous one (it manages others) is OTHER.

    The seed's type rules, as the driver describes its devices and the HAL serves them.
    """
    failures = []
    types = {}
    for name, device in sorted(s.need_devices().items()):
        types[name] = int(await device.getType())
        if types[name] not in _DEVICE_TYPES:
            failures.append(f"{name} has type {types[name]}")
    for d in s.probe_devices():
        if d["parts"] and d["name"] in types and types[d["name"]] != _TYPE_OTHER:
            kind = _DEVICE_TYPES.get(types[d["name"]], types[d["name"]])
            failures.append(f"{d['name']} manages devices {d['parts']} but is {kind}, not OTHER")
    if failures:
        raise _Fail("; ".join(failures))
    return ", ".join(f"{n} {_DEVICE_TYPES[t]}" for n, t in types.items())


def default_version_record() -> Path:
    """Where vts remembers the version strings of the builds it has seen."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "npuemu" / "vts-versions.json"


async def version_string_changes_with_build(s: _Session) -> str:
    """getVersionString() differs for every new build of a driver (the seed's rule).

    How vts knows two builds: given the driver as C source, it builds it twice
    with different ``NPU_BUILD_ID`` values, runs the HAL on the first, asks the
    second for its versions, and requires every device's to differ.  Given a
    ``.so`` (or the built-in reference), it cannot rebuild, so it compares with
    its record of earlier builds (``--version-record``; by default
    ``~/.local/state/npuemu/vts-versions.json``, keyed by the .so's sha256 or the
    C layer's build id): a version string an earlier, *different* binary already
    reported fails.  The first build vts sees passes and is recorded.
    """
    versions = {}
    for name, device in sorted(s.need_devices().items()):
        versions[name] = await device.getVersionString()
    if s.target.second_build is not None:
        if s.rebuild_facts is None:
            raise _Fail(f"the second build could not be asked for its versions: {s.rebuild_error}")
        again = {d["name"]: d["version"] for d in s.rebuild_facts["devices"]}
        same = [n for n, v in versions.items() if again.get(n) == v]
        if same:
            raise _Fail(
                "two builds of the source with different build ids report the same version string for "
                + ", ".join(f"{n} ({versions[n]!r})" for n in same)
            )
        return "two builds of the source report different versions on every device"
    if s.version_record is None:
        raise _Fail("no version record to compare with, and no source to rebuild")
    record = _load_record(s.version_record)
    clashes, seen_before = [], 0
    for name, version in versions.items():
        builds = record.setdefault(name, {})
        other = builds.get(version)
        if other is not None and other != s.target.identity:
            clashes.append(f"{name} reports {version!r}, as did an earlier, different build ({other[:19]})")
        seen_before += any(ident != s.target.identity for ident in builds.values())
        builds.setdefault(version, s.target.identity)
    if clashes:
        raise _Fail("; ".join(clashes))
    _save_record(s.version_record, record)
    if seen_before:
        return f"differs from the {seen_before} device(s)' earlier builds in {s.version_record}"
    return f"no other build of these devices recorded yet; this one's versions are kept in {s.version_record}"


def _load_record(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise _Fail(f"the version record {path} is unreadable ({exc}); remove it") from None
    return data if isinstance(data, dict) else {}


def _save_record(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    os.replace(tmp, path)


async def heterogeneous_parts_exposed(s: _Session) -> str:
    """A heterogeneous device's parts are also exposed as IDevices of their own.

    NN HAL 1.2: a driver with an interface that manages several devices must also
    expose each of them, so an app can pick among them.
    """
    facts = s.probe_devices()
    by_number = {d["number"]: d for d in facts}
    failures, seen = [], []
    for d in facts:
        if not d["parts"]:
            continue
        seen.append(d["name"])
        if d["name"] not in s.devices:
            failures.append(f"the heterogeneous device {d['name']} is not exposed")
        for part in d["parts"]:
            p = by_number.get(part)
            if p is None:
                failures.append(f"{d['name']} manages device {part}, which the driver does not describe")
            elif p["name"] not in s.devices:
                failures.append(f"{d['name']} manages {p['name']}, which is not exposed on its own")
    if failures:
        raise _Fail("; ".join(failures))
    if not seen:
        return "no heterogeneous device (nothing to check)"
    return ", ".join(
        f"{n} manages {', '.join(by_number[p]['name'] for p in next(d for d in facts if d['name'] == n)['parts'])}"
        for n in seen
    )


@dataclass(frozen=True, slots=True)
class _Check:
    name: str
    run: Callable[[_Session], Awaitable[str]]


_CHECKS: tuple[_Check, ...] = (
    _Check("NpuSchedulingAidl.SetSchedulingConfigs", set_scheduling_configs),
    _Check("NpuSchedulingAidl.SetSchedulingConfigsInvalidPriority", set_scheduling_configs_invalid_priority),
    _Check("NpuSchedulingAidl.SetSchedulingConfigsDuplicateUid", set_scheduling_configs_duplicate_uid),
    _Check("NpuSchedulingAidl.UpdateSchedulingConfigs", update_scheduling_configs),
    _Check("NpuSchedulingAidl.SetCallback", set_callback),
    _Check("NpuSchedulingAidl.SetCallbackNull", set_callback_null),
    _Check("NpuSchedulingAidl.RunInferenceStatusCallbacks", run_inference_status_callbacks),
    _Check("NpuSchedulingAidl.RunInferenceEffectivePriority", run_inference_effective_priority),
    _Check("NpuSchedulingAidl.RunInferencesPrioritized", run_inferences_prioritized),
    _Check("NpuSchedulingAidl.RunInferenceFailsWithoutDirectAccess", run_inference_fails_without_direct_access),
    _Check("NpuSchedulingAidl.RunInferenceFailsWithoutAttributeOtherUid", run_inference_fails_without_attribute_other_uid),
    _Check("NpuFeature.ImplementsHal", feature_implements_hal),
    _Check("NeuralnetworksHidlTest.StatusTest", status_test),
    _Check("NeuralnetworksHidlTest.GetCapabilitiesTest", get_capabilities_test),
    _Check("NeuralnetworksHidlTest.GetDeviceVersionStringTest", get_device_version_string_test),
    _Check("NeuralnetworksHidlTest.GetDeviceTypeTest", get_device_type_test),
    _Check("NeuralnetworksHidlTest.GetDeviceNameTest", get_device_name_test),
    _Check("NeuralnetworksHidlTest.GetDeviceSupportedExtensionsTest", get_device_supported_extensions_test),
    _Check("NeuralnetworksHidlTest.GetNumberOfCacheFilesNeeded", get_number_of_cache_files_needed),
    _Check("NeuralnetworksHidlTest.GetSupportedOperations", get_supported_operations),
    _Check("Seed.ValidDeviceTypes", valid_device_types),
    _Check("Seed.VersionStringChangesWithBuild", version_string_changes_with_build),
    _Check("Seed.HeterogeneousPartsExposed", heterogeneous_parts_exposed),
)

#: Every check's name, in run order.
CHECK_NAMES: tuple[str, ...] = tuple(c.name for c in _CHECKS)


def describe_checks() -> list[tuple[str, str]]:
    """``(name, what it requires)`` for every check, in run order: each docstring's first line."""
    out = []
    for c in _CHECKS:
        first_paragraph = (c.run.__doc__ or "").strip().split("\n\n")[0]
        out.append((c.name, " ".join(first_paragraph.replace("``", "").split())))
    return out


# ---- the runner -------------------------------------------------------------------


async def _run_check(s: _Session, check: _Check, budget: float) -> tuple[VtsCheckResult, str | None]:
    """One check within ``budget`` seconds; also says whether the HAL needs a restart."""
    restart_why = None
    with trio.move_on_after(budget) as scope:
        try:
            detail = await check.run(s)
        except _Fail as exc:
            result = VtsCheckResult(check.name, False, str(exc))
        except DeadObjectException:
            result, restart_why = None, "died"
        except RemoteException as exc:
            result = VtsCheckResult(check.name, False, f"unexpected {type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - e.g. a parcel of the wrong shape: a verdict, not a crash
            result = VtsCheckResult(check.name, False, f"vts could not complete the check: {type(exc).__name__}: {exc}")
        else:
            result = VtsCheckResult(check.name, True, detail)
    if restart_why == "died":
        note = await s.exit_note()
        result = VtsCheckResult(
            check.name, False, f"the HAL process died during the check{' (' + note + ')' if note else ''}: the driver crashed"
        )
    elif scope.cancelled_caught:
        result = VtsCheckResult(
            check.name, False, f"no answer within {budget:g} s: the driver hangs (the HAL is restarted)"
        )
        restart_why = "hung"
    if restart_why is None and not await s.alive():
        restart_why = "died" if await s.exit_note() else "hung"
        if result.passed:
            result = VtsCheckResult(check.name, False, f"the HAL stopped answering after the check ({restart_why})")
    return result, restart_why


async def _run_checks(
    s: _Session, checks: Sequence[_Check], *, deadline: float, check_timeout: float, timeout: float
) -> list[VtsCheckResult]:
    """Every check in turn, each bounded, restarting the HAL after a crash or a hang.

    A check that the deadline leaves no time for, or that comes after a restart
    that failed, is reported as not run: every check gets a line, always.
    """
    results = []
    for check in checks:
        left = deadline - trio.current_time()
        if s.hal_failure is not None:
            results.append(VtsCheckResult(check.name, False, f"not run: {s.hal_failure}"))
            continue
        if left <= 0:
            results.append(VtsCheckResult(check.name, False, f"not run: the run's {timeout:g} s limit passed"))
            continue
        result, restart_why = await _run_check(s, check, min(check_timeout, left))
        results.append(result)
        if restart_why is not None and deadline - trio.current_time() > 0:
            try:
                await s.restart(restart_why)
            except Exception as exc:  # noqa: BLE001 - whatever went wrong, the remaining checks say so
                s.hal_failure = f"the HAL could not be restarted after it {restart_why}: {_one_line(exc)}"
    return results


async def run_vts(
    driver: str | os.PathLike[str] | None = None,
    *,
    check_timeout: float = DEFAULT_CHECK_TIMEOUT_S,
    timeout: float = DEFAULT_TIMEOUT_S,
    version_record: str | os.PathLike[str] | None = None,
    only: Sequence[str] | None = None,
) -> VtsReport:
    """Boot a private HAL on ``driver`` and run every check; never hangs.

    Arguments:
        driver: a driver ``.so``, a driver ``.c`` (built twice, for the version
            check), or ``None`` for the built-in reference driver.
        check_timeout: seconds one check may take before it fails as a hang.
        timeout: seconds for the whole run; checks not reached in time fail as
            "not run".
        version_record: the file of earlier builds' version strings (see
            ``Seed.VersionStringChangesWithBuild``); default
            ``default_version_record()``.
        only: run just these checks (names from ``CHECK_NAMES``).

    Raises ``NpuValueError`` for a driver path that does not exist or an unknown
    check name, ``NpuDriverError`` for C source that does not compile, and
    :class:`VtsDriverNotLoadedError` for a driver on which the HAL does not come up
    (it fails to load, crashes or hangs at start): no check ran, and one error says why.
    """
    if not (check_timeout > 0 and timeout > 0):
        raise NpuValueError("check_timeout and timeout must be positive")
    checks = _CHECKS
    if only is not None:
        unknown = sorted(set(only) - set(CHECK_NAMES))
        if unknown:
            raise NpuValueError(f"unknown check(s): {', '.join(unknown)}")
        checks = tuple(c for c in _CHECKS if c.name in set(only))
    record = Path(version_record) if version_record is not None else default_version_record()
    workdir = Path(tempfile.mkdtemp(prefix="npuemu-vts-"))
    try:
        deadline = trio.current_time() + timeout
        target = await _prepare_target(driver, workdir)
        probes: dict[str, tuple[dict | None, str | None]] = {}
        probed = trio.Event()

        async def probe(key: str, so_path: str | None) -> None:
            try:
                probes[key] = (await _probe(so_path), None)
            except _Fail as exc:
                probes[key] = (None, str(exc))

        async def probe_all() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(probe, "main", target.so_path)
                if target.second_build is not None:
                    nursery.start_soon(probe, "rebuild", target.second_build)
            probed.set()

        # The probes run while the HAL boots: a driver that hangs on its first
        # callback costs one timeout, not two in a row.
        async with trio.open_nursery() as background:
            background.start_soon(probe_all)
            async with AsyncExitStack() as stack:
                boot_error = None
                try:
                    # open_stack bounds its own boot (a cancel scope around
                    # entering it would close over the nursery it keeps open).
                    boot_timeout = min(_BOOT_TIMEOUT_S, max(0.5, deadline - trio.current_time()))
                    hal = await stack.enter_async_context(open_stack(
                        target.so_path, processes=True, system_server=False,
                        config=BootConfig(boot_timeout=boot_timeout, record=False, restart_hal=False),
                    ))
                except Exception as exc:  # noqa: BLE001 - any boot failure is the driver's verdict
                    boot_error = f"the HAL did not start: {_first_line(exc)}"
                await probed.wait()
                facts, probe_error = probes["main"]
                rebuild_facts, rebuild_error = probes.get("rebuild", (None, None))
                if boot_error is None:
                    session = _Session(hal, target, facts, probe_error, record, rebuild_facts, rebuild_error)
                    with trio.move_on_after(boot_timeout) as scope:
                        await session.connect()
                    if scope.cancelled_caught:
                        boot_error = f"the HAL did not answer within {boot_timeout:g} s of booting (the driver hangs)"
                if boot_error is None:
                    results = await _run_checks(
                        session, checks, deadline=deadline, check_timeout=check_timeout, timeout=timeout
                    )
        if boot_error is not None:
            # Raised out here, not in the nursery: the caller catches the error itself.
            # The driver's own words first (the probe loaded it alone), then the HAL's fate.
            why = f"{probe_error}; {boot_error}" if probe_error else boot_error
            raise VtsDriverNotLoadedError(f"{target.label} did not come up: {why}")
        return VtsReport(target.label, tuple(results))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
