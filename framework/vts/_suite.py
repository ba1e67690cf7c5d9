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
    direct-access and attribution refusals.  Then the rules probed exactly, with
    executions of vts's own small models through ``IPreparedModel`` (each with an
    input no other execution gets, its output checked): the effective-priority
    formula with its clamp, set versus update, the events of works back to back,
    of two uids, attributed and cancelled, each device's deviceNumber, and a
    preempted work's results.
``NpuFeature.ImplementsHal``
    a device that declares ``android.hardware.npu`` serves ``IScheduling``.
``NeuralnetworksHidlTest.*`` (NN HAL 1.2 ``BasicTests``, ``ValidationTest`` and
``GeneratedTests``, SPEC.md Part A)
    run over every ``android.hardware.neuralnetworks.IDevice`` instance: the basic
    queries, malformed models and requests, and the generated models (``_cases``).
``Seed.*``
    the seeds' own rules: valid device types, a truthful status, a version string
    that changes with every build (``_builds``), and a heterogeneous device whose
    parts are exposed too.

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

import numpy as np
import trio

from framework.binder import (
    DeadObjectException,
    IllegalArgumentException,
    RemoteException,
    SecurityException,
    ServiceSpecificException,
    SharedMemory,
    defaultServiceManager,
)
from framework.emulator import BootConfig, Emulator, open_stack
from framework.npumanager import FEATURE_NEURAL_PROCESSING_UNIT
import interfaces.services as services
from interfaces.android.hardware.neuralnetworks import (
    DataLocation,
    ErrorStatus,
    ExecutionHints,
    ExecutionPreference,
    IDevice,
    OperandLifeTime,
    OperandType,
    Priority,
    Request,
    RequestArgument,
)
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

from ._builds import BUILDS_RECORD, build_identity, load_builds, save_builds
from ._cases import (
    GenCase,
    compare_outputs,
    default_cases_path,
    execute,
    load_cases,
    model_of,
    request_layout,
    sources_digest,
)

__all__ = [
    "CHECK_NAMES",
    "DEFAULT_CHECK_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "VtsCheckResult",
    "VtsDriverNotLoadedError",
    "VtsReport",
    "REPORT_FILE",
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
# One execution or test inference that has not returned after this long is examined:
# a driver whose events say the work ended has a work-id bug, else it hangs.
_WORK_TIMEOUT_S = 5.0
#: The run's report, in its output directory.
REPORT_FILE = "vts-report.json"

SCHEDULING_INSTANCE = services.HAL_SCHEDULING
SCHEDULING_PREFIX = SCHEDULING_INSTANCE.removesuffix("default")
CONTROL_INSTANCE = services.HAL_CONTROL
DEVICE_PREFIX = services.NN_DEVICE_PREFIX
FEATURE_NPU = FEATURE_NEURAL_PROCESSING_UNIT

# The seed's SchedulingConfig band, wide open: the uid's priority is appPriority.
_MIN_BAND, _MAX_BAND = 0, 2000
# struct npu_device_info's version field (npu/driver.h's NPU_VERSION_MAX).
_VERSION_MAX = 128
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


class _Hung(Exception):
    """The HAL stopped answering inside a check: a hang, and the HAL is restarted."""


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
    identity: str              # build_identity of the .so, or the C layer's BUILD_ID
    # Two builds of the driver's source with different build ids (vts built them), or None.
    version_builds: tuple[str, str] | None = None
    previous_build: str | None = None   # the build before this one, as the author named it


_ROOT = Path(__file__).resolve().parents[2]
# The built-in reference driver's source: vts builds it twice for the version check.
_REFERENCE_SOURCE = _ROOT / "csrc" / "drivers" / "reference" / "reference.c"


def _csrc_include() -> Path:
    return _ROOT / "csrc" / "include"


async def _compile(src: Path, out: Path, build_id: str) -> None:
    # The same command as `make driver`, so a driver that builds there builds here.
    cc = os.environ.get("NPU_CC") or os.environ.get("CC") or "cc"
    argv = [
        cc, "-std=c11", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-g", f"-I{_csrc_include()}", "-O2", "-fPIC",
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


async def _build_twice(source: Path, workdir: Path) -> tuple[str, str]:
    """``source`` built as two .so files with two build ids (as `make driver`'s, and another)."""
    source_id = _sha256(source)[:12]
    first, second = workdir / f"{source.stem}.so", workdir / f"{source.stem}.rebuild.so"
    # Each build runs to its end, even when the other fails: a compiler killed
    # halfway leaves its temporary files behind.
    failures: list[NpuDriverError] = []

    async def build(out: Path, build_id: str) -> None:
        try:
            await _compile(source, out, build_id)
        except NpuDriverError as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(build, first, source_id)
        nursery.start_soon(build, second, f"{source_id}-rebuild")
    if failures:
        raise failures[0]  # both builds of one source fail alike: one error is enough
    return os.fspath(first), os.fspath(second)


def _identity(path: str | os.PathLike[str]) -> str:
    """The build's identity; a file that is no ELF object is keyed by its bytes (loading
    it will fail, and the loader says why)."""
    try:
        return build_identity(path)
    except ValueError:
        return "file:" + _sha256(path)[:24]


async def _prepare_target(
    driver: str | os.PathLike[str] | None, workdir: Path, previous_build: str | os.PathLike[str] | None = None
) -> _Target:
    """Resolve ``--driver``: nothing (reference), a ``.so``, or a ``.c`` built twice here."""
    previous = None
    if previous_build is not None:
        if not Path(previous_build).is_file():
            raise NpuValueError(f"no previous build at {os.fspath(previous_build)!r}")
        previous = os.fspath(Path(previous_build).resolve())
    if driver is None:
        builds = await _build_twice(_REFERENCE_SOURCE, workdir) if _REFERENCE_SOURCE.is_file() else None
        return _Target("the built-in reference driver", None, f"builtin:{BUILD_ID}", builds, previous)
    path = Path(driver)
    if not path.is_file():
        raise NpuValueError(f"no driver at {os.fspath(driver)!r}")
    if path.suffix == ".c":
        first, second = await _build_twice(path, workdir)
        return _Target(os.fspath(driver), first, _identity(first), (first, second), previous)
    return _Target(os.fspath(driver), os.fspath(path.resolve()), _identity(path), None, previous)


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
    output_dir: Path | None
    # Other builds' descriptions, by role ("a", "b": the two builds of the source;
    # "previous": the author's previous build): (facts, None) or (None, why not).
    other_builds: dict[str, tuple[dict | None, str | None]] = field(default_factory=dict)
    scheduling: Any = None
    control: Any = None
    services: list[str] = field(default_factory=list)
    devices: dict[str, Any] = field(default_factory=dict)
    hal_failure: str | None = None  # why the HAL is unusable for the rest of the run
    case_path: Path | None = None   # the generated cases
    recorded_builds: dict = field(default_factory=dict)  # other builds in the output dir's record
    generated: Any = None           # the generated tests' outcomes (or verdict), once run
    prepared: dict[str, Any] = field(default_factory=dict)  # the probe model per device
    inputs_made: int = 0            # distinct inputs handed out so far

    @property
    def uid(self) -> int:
        return self.stack.runtime.uid

    async def connect(self) -> None:
        sm = defaultServiceManager(self.stack.runtime)
        self.services = list(await sm.listServices(15))
        self.scheduling = self.control = None
        self.devices = {}
        self.prepared = {}
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

    async def run_inference(
        self, job_priority: int, *, original_uid: int = -1, as_uid: int = -1, device: str | None = None
    ) -> list[Any]:
        """One runTestInference; its events.  A work-id bug is diagnosed, not waited out."""
        device = device or self.inference_device()[0]
        since = await self.event_mark()
        call = self.need_control().runTestInference(job_priority, original_uid, device, as_uid)
        who = "" if as_uid < 0 else f" as uid {as_uid}"
        return list(await self.bounded(call, since, f"runTestInference{who} at job priority {job_priority} on {device}"))

    async def event_mark(self) -> int:
        """The id of the latest work event the HAL recorded (-1: none yet)."""
        latest = list(await self.need_control().recentWorkEvents(1, -1))
        return latest[-1].info.id if latest else -1

    async def events_since(self, since: int, uid: int | None = None) -> list[Any]:
        """The undebounced work events after ``since``, of ``uid`` if given."""
        events = list(await self.need_control().recentWorkEvents(512, since))
        return [e for e in events if uid is None or e.info.uid == uid]

    async def bounded(self, call: Awaitable[Any], since: int, what: str, device: str | None = None) -> Any:
        """``await call``; one that does not return in time is examined.

        If the driver's events say the work ended, the HAL is waiting on a work id
        the driver never reports: a work-id bug, said as such.  Otherwise the driver
        hangs (the runner restarts the HAL).
        """
        with trio.move_on_after(_WORK_TIMEOUT_S):
            return await call
        with trio.move_on_after(2.0) as scope:
            events = [e for e in await self.events_since(since) if device is None or e.deviceName == device]
        if scope.cancelled_caught:
            raise _Hung(f"{what} got no answer within {_WORK_TIMEOUT_S:g} s")
        ended = [e for e in events if e.kind == _KIND_ENDED and e.reason != _END_PAUSED]
        if ended:
            raise _Fail(
                f"{what} did not return within {_WORK_TIMEOUT_S:g} s, though the driver reported "
                f"{_describe_raw(events)}: the work id submit_work returned is not the id the work's events "
                "carry (a work-id bug in the driver)"
            )
        raise _Hung(f"{what}: no answer within {_WORK_TIMEOUT_S:g} s, and the driver reported {_describe_raw(events)}")

    def distinct_input(self, shape: tuple[int, ...]) -> np.ndarray:
        """An input no other execution of this run gets."""
        self.inputs_made += 1
        rng = np.random.default_rng(self.inputs_made)
        return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)

    async def prepare(self, device: str, model: Any) -> Any:
        proxy = self.devices.get(device)
        if proxy is None:
            raise _Fail(f"{DEVICE_PREFIX}{device} is not registered")
        try:
            return await proxy.prepareModel(
                model, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, -1, 0, None
            )
        except ServiceSpecificException as exc:
            raise _Fail(f"prepareModel of vts's {_probe_what(model)} on {device} failed: {exc}") from None
        finally:
            for pool in model.pools:
                pool.close()

    async def probe_run(
        self, device: str, job_priority: int, *, original_uid: int = -1, deadline_ns: int = -1,
        group_id: bytes | None = None, feature_id: str | None = None,
    ) -> list[Any]:
        """One execution of the probe model (y = x + c) on ``device`` with a distinct input,
        its output checked; the events it caused (this uid's, undebounced)."""
        prepared = self.prepared.get(device)
        if prepared is None:
            prepared = self.prepared[device] = await self.prepare(device, _probe_model())
        x = self.distinct_input((1, _PROBE_WIDTH))
        since = await self.event_mark()
        what = f"an execution on {device} at job priority {job_priority}"
        call = execute(prepared, [x], [((1, _PROBE_WIDTH), np.dtype("<f4"))], job_priority=job_priority,
                       original_uid=original_uid, deadline_ns=deadline_ns, group_id=group_id, feature_id=feature_id)
        try:
            (y,) = await self.bounded(call, since, what)
        except ServiceSpecificException as exc:
            raise _Fail(f"{what} failed: {exc}") from None
        want = x + _probe_constant()
        if not np.array_equal(y, want):
            at = int(np.argmax(y.reshape(-1) != want.reshape(-1)))
            raise _Fail(
                f"{what} computed x + c wrongly: element {at} is {float(y.reshape(-1)[at]):.7g}, "
                f"expected {float(want.reshape(-1)[at]):.7g}"
            )
        return await self.events_since(since, self.uid)


#: The probe model's width: y = ADD(x, c) over [1, _PROBE_WIDTH].
_PROBE_WIDTH = 16


def _probe_constant() -> np.ndarray:
    return (np.arange(_PROBE_WIDTH, dtype=np.float32) / 8.0 - 1.0).reshape(1, _PROBE_WIDTH)


def _probe_model() -> Any:
    """y = x + c, [1, 16] float32: cheap, computed by every device that runs ADD."""
    b = ModelBuilder()
    x = b.input([1, _PROBE_WIDTH])
    y = b.operation(OperationType.ADD, [x, b.constant(_probe_constant()), b.int32(0)], [1, _PROBE_WIDTH])
    b.output(y)
    return b.build()


def _long_model(ops: int, width: int) -> Any:
    """t = x; t = t + x, ``ops`` times: many slices (each reads x), cheap to compute."""
    b = ModelBuilder()
    x = b.input([1, width])
    none = b.int32(0)
    t = x
    for _ in range(ops):
        t = b.operation(OperationType.ADD, [t, x, none], [1, width])
    b.output(t)
    return b.build()


def _probe_what(model: Any) -> str:
    n = len(model.main.operations)
    return "probe model (ADD)" if n == 1 else f"model of {n} operations"


def _works(events: Sequence[Any]) -> dict[int, list[Any]]:
    """Events grouped by the driver's work id, in order."""
    works: dict[int, list[Any]] = {}
    for e in events:
        works.setdefault(e.workId, []).append(e)
    return works


def _requested_info(events: Sequence[Any], what: str) -> Any:
    for e in events:
        if e.kind == _KIND_REQUESTED:
            return e.info
    raise _Fail(f"{what} caused no requested event (it caused {_describe_raw(events)})")


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
    await s.need_scheduling().setSchedulingConfigs([_cfg(1001, 500)])
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
        s.need_scheduling().setSchedulingConfigs([_cfg(1001, -1)]), "appPriority -1"
    )


async def set_scheduling_configs_duplicate_uid(s: _Session) -> str:
    """Two configs for one uid in one call is EX_ILLEGAL_ARGUMENT."""
    return await _expect_illegal_argument(
        s.need_scheduling().setSchedulingConfigs([_cfg(1001, 0), _cfg(1001, 1000)]), "uid 1001 twice"
    )


async def priorities_validated_across_range(s: _Session) -> str:
    """Priorities out of range are EX_ILLEGAL_ARGUMENT: configs (set and update alike) and job priorities.

    Configs: appPriority -1 or 1001, minPriority -1, maxPriority 2001, minPriority
    above maxPriority, one uid twice; those at the limits (appPriority 0 and 1000,
    bands [2000, 2000] and [0, 0]) are accepted.  Executions at job priority -1 or
    1001 are refused; at 0 and 1000 they run.
    """
    scheduling = s.need_scheduling()
    bad = [
        ("appPriority 1001", [_cfg(1001, 1001)]),
        ("appPriority -1", [_cfg(1001, -1)]),
        ("minPriority -1", [_cfg(1001, 500, -1, 2000)]),
        ("maxPriority 2001", [_cfg(1001, 500, 0, 2001)]),
        ("minPriority 700 above maxPriority 600", [_cfg(1001, 500, 700, 600)]),
        ("uid 1001 twice", [_cfg(1001, 0), _cfg(1001, 1000)]),
    ]
    accepted = []
    for method in ("setSchedulingConfigs", "updateSchedulingConfigs"):
        call = getattr(scheduling, method)
        for what, configs in bad:
            try:
                await call(configs)
            except IllegalArgumentException:
                continue
            except DeadObjectException:
                raise
            except RemoteException as exc:
                raise _Fail(f"{method} with {what} failed with {type(exc).__name__}, not EX_ILLEGAL_ARGUMENT") from None
            accepted.append(f"{method} accepted {what}")
        limits = [_cfg(1001, 0), _cfg(1002, 1000), _cfg(1003, 500, 2000, 2000), _cfg(1004, 500, 0, 0)]
        try:
            await call(limits)
        except IllegalArgumentException as exc:
            raise _Fail(f"{method} refused configs at the limits (appPriority 0 and 1000, bands [0, 2000], "
                        f"[2000, 2000], [0, 0]): {exc.message}") from None
    device, _ = s.inference_device()
    await scheduling.setSchedulingConfigs([_cfg(s.uid, 0)])
    for job in (-1, 1001):
        try:
            await s.probe_run(device, job)
        except IllegalArgumentException:
            continue
        accepted.append(f"an execution at job priority {job} ran")
    for job in (0, 1000):
        try:
            await s.probe_run(device, job)
        except IllegalArgumentException as exc:
            raise _Fail(f"an execution at job priority {job} was refused: {exc.message}") from None
    if accepted:
        raise _Fail("; ".join(accepted) + ": it must fail with EX_ILLEGAL_ARGUMENT")
    return f"{len(bad)} invalid config calls refused by set and update, job priorities -1 and 1001 refused"


async def update_scheduling_configs(s: _Session) -> str:
    """updateSchedulingConfigs({uid 1001, priority 500}) succeeds."""
    await s.need_scheduling().updateSchedulingConfigs([_cfg(1001, 500)])
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
    await scheduling.setSchedulingConfigs([_cfg(s.uid, 250, attribute=True)])
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
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0)])
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
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0)])
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
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0, direct=False)])
    s.need_control()
    return await _expect_refused(s, "of a uid without direct access")


async def run_inference_fails_without_attribute_other_uid(s: _Session) -> str:
    """Work attributed to uid 42 by a uid without canAttributeOtherUid is refused."""
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0, attribute=False)])
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


def _version_problem(version: str) -> str | None:
    """Why ``version`` is not a whole version string, or None."""
    if not version:
        return "empty version string"
    if not version.isprintable() or version != version.strip():
        return f"version string {version!r} has control characters or surrounding blanks"
    if len(version.encode()) >= _VERSION_MAX - 1:
        return f"version string {version!r} fills the driver's {_VERSION_MAX}-byte field: it was cut off"
    depth = 0
    for ch in version:
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(ch, 0)
        if depth < 0:
            return f"version string {version!r} closes a bracket it never opened"
    if depth:
        return f"version string {version!r} leaves a bracket open: it was cut off"
    if version[-1] in "-_.,:;/+ ":
        return f"version string {version!r} ends in {version[-1]!r}: it was cut off"
    return None


async def get_device_version_string_test(s: _Session) -> str:
    """getVersionString() is a whole version string: not empty, printable, not cut off.

    Cut off means it fills the driver's 128-byte field, leaves a bracket open, or
    ends in a separator.
    """

    async def check(name: str, device: Any) -> str:
        version = await device.getVersionString()
        why = _version_problem(version)
        if why:
            raise _Fail(why)
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
    """Every device is named {VENDOR}-{DEVICE_NAME}: exactly one '-', neither first nor last; no two alike.

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
        numbers: dict[str, list[int]] = {}
        for d in s.facts["devices"]:
            numbers.setdefault(d["name"], []).append(d["number"])
        for dup, which in sorted(numbers.items()):
            if len(which) > 1:
                problems.append(
                    f"the driver names devices {', '.join(map(str, which))} all {dup!r}: names must be unique "
                    "(the servicemanager keeps only the last one registered)"
                )
        for d in s.facts["devices"]:
            if numbers.get(d["name"], [])[1:]:
                continue
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
    """getSupportedOperations(model) answers one bool per operation, each as for that operation alone.

    The model is ADD -> RELU -> MUL; each answer must be the device's answer for a
    model of that one operation, so an answer at the wrong index shows.
    """
    model, count = _test_model()
    alone = _single_op_models()

    async def check(name: str, device: Any) -> str:
        answer = list(await device.getSupportedOperations(model))
        if len(answer) != count or not all(isinstance(v, bool) for v in answer):
            raise _Fail(f"answered {answer!r} for a model of {count} operations")
        each = []
        for op, single in alone:
            one = list(await device.getSupportedOperations(single))
            if len(one) != 1:
                raise _Fail(f"answered {one!r} for a model of one operation ({op})")
            each.append(one[0])
        if answer != each:
            ops = [op for op, _ in alone]
            raise _Fail(f"answered {dict(zip(ops, answer))} for ADD -> RELU -> MUL, but {dict(zip(ops, each))} "
                        "for each operation alone")
        return f"{sum(answer)}/{count}"

    return await _each_device(s, check)


def _single_op_models() -> list[tuple[str, Any]]:
    """ADD, RELU and MUL over [1, 4], one model each (the operations of ``_test_model``)."""
    out = []
    for op in (OperationType.ADD, OperationType.RELU, OperationType.MUL):
        b = ModelBuilder()
        x = b.input([1, 4])
        ins = [x] if op == OperationType.RELU else [x, b.input([1, 4]), b.int32(0)]
        b.output(b.operation(op, ins, [1, 4]))
        out.append((op.name, b.build()))
    return out


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


async def version_string_changes_with_build(s: _Session) -> str:
    """getVersionString() differs for every new build of a driver (the seed's rule).

    Judged from two builds that differ, keyed by their build identity (what the
    loader maps: the same source built at another path is the same build).  Given
    the driver as C source (the built-in reference driver: its own source), vts
    builds it twice with different ``NPU_BUILD_ID`` values and every device's
    version must differ between the two.  Given a ``.so``, the author names the
    previous build (``--previous-build``), or the run's output directory
    (``--output-dir``) keeps the builds earlier runs saw: a version string a
    different build already reported fails.  With none of these, vts has nothing
    to compare and says how to give it something: a first build never passes unseen.
    """
    versions = {}
    for name, device in sorted(s.need_devices().items()):
        versions[name] = await device.getVersionString()
    notes = []
    if s.output_dir is not None:
        notes.append(_record_build(s, versions))
    if s.target.version_builds is not None:
        (a, a_error), (b, b_error) = s.other_builds["a"], s.other_builds["b"]
        if a is None or b is None:
            raise _Fail(f"a build of the source could not be asked for its versions: {a_error or b_error}")
        first = {d["name"]: d["version"] for d in a["devices"]}
        again = {d["name"]: d["version"] for d in b["devices"]}
        same = [n for n, v in sorted(first.items()) if again.get(n) == v]
        if same:
            raise _Fail(
                "two builds of the source with different build ids report the same version string for "
                + ", ".join(f"{n} ({first[n]!r})" for n in same)
            )
        return "; ".join(["two builds of the source report different versions on every device", *filter(None, notes)])
    if s.target.previous_build is not None:
        previous, error = s.other_builds["previous"]
        if previous is None:
            raise _Fail(f"the previous build {s.target.previous_build} could not be asked for its versions: {error}")
        if _identity(s.target.previous_build) == s.target.identity:
            raise _Fail(
                f"the previous build {s.target.previous_build} is this same build (identity {s.target.identity}): "
                "name an older build"
            )
        before = {d["name"]: d["version"] for d in previous["devices"]}
        same = [n for n, v in versions.items() if before.get(n) == v]
        if same:
            raise _Fail(
                f"this build and the previous one ({s.target.previous_build}) report the same version string for "
                + ", ".join(f"{n} ({versions[n]!r})" for n in same)
            )
        return f"differs from the previous build {s.target.previous_build} on every device"
    if s.output_dir is not None:
        return _judge_recorded(s, versions)
    raise _Fail(
        "vts has no other build to compare with: give the driver's source (--driver x.c), name its previous "
        "build (--previous-build old.so), or run vts on each build with the same --output-dir"
    )


def _record_build(s: _Session, versions: dict[str, str]) -> str:
    try:
        builds = load_builds(s.output_dir)
    except ValueError as exc:
        raise _Fail(str(exc)) from None
    s.recorded_builds = {k: v for k, v in builds.items() if k != s.target.identity}
    builds[s.target.identity] = {"label": s.target.label, "versions": versions}
    save_builds(s.output_dir, builds)
    return ""


def _judge_recorded(s: _Session, versions: dict[str, str]) -> str:
    others = s.recorded_builds
    if not others:
        raise _Fail(
            f"{s.output_dir / BUILDS_RECORD} holds no other build than this one ({s.target.identity}): "
            "rebuild the driver and run vts again with the same --output-dir, or name the previous build"
        )
    clashes = []
    for identity, build in sorted(others.items()):
        for name, version in versions.items():
            if build.get("versions", {}).get(name) == version:
                clashes.append(f"{name} reports {version!r}, as did build {identity} ({build.get('label', '?')})")
    if clashes:
        raise _Fail("; ".join(clashes))
    return f"differs from the {len(others)} other build(s) recorded in {s.output_dir / BUILDS_RECORD}"


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


# ---- the scheduling rules, probed exactly ----------------------------------------

# The group and feature of one back-to-back work (the other has none).
_GROUP, _FEATURE = bytes(range(0x10, 0x20)), "vts.back-to-back"


def _hex(group: bytes | None) -> str:
    return "none" if group is None else group.hex()

# Other uids in the configs vts sets, so that a driver that reads the wrong config shows.
_OTHER_UID, _SECOND_UID = 4242, 4243


def _cfg(uid: int, app: int, lo: int = _MIN_BAND, hi: int = _MAX_BAND, *, direct: bool = True,
         attribute: bool = False) -> Any:
    """A SchedulingConfig; by default the widest band, direct access, no attribution."""
    return SchedulingConfig(minPriority=lo, maxPriority=hi, uid=uid, appPriority=app, hasDirectAccess=direct,
                            canAttributeOtherUid=attribute)


def _expected_priority(app: int, job: int, lo: int, hi: int) -> int:
    return min(max(app + job, lo), hi)


def _formula_diagnosis(rows: Sequence[tuple[int, int, int, int, int]]) -> str:
    """What the wrong effective priorities have in common (rows: app, job, min, max, got)."""
    if all(got == job for app, job, lo, hi, got in rows):
        return "the uid's appPriority is ignored (effectivePriority = jobPriority)"
    if all(got == app + job // 2 for app, job, lo, hi, got in rows):
        return "computed as appPriority + jobPriority / 2"
    if all(got == app + job for app, job, lo, hi, got in rows):
        return "appPriority + jobPriority is not clamped to [minPriority, maxPriority]"
    return "not clamp(appPriority + jobPriority, minPriority, maxPriority)"


async def effective_priority_formula(s: _Session) -> str:
    """effectivePriority is clamp(appPriority + jobPriority, minPriority, maxPriority), across the range.

    Configs at their limits (appPriority 0 and 1000, bands [0, 2000], [300, 600],
    [2000, 2000], [0, 0]), job priorities 0..1000, the defaults of a uid with no
    config (appPriority 1000 in [0, 2000]), and a second uid's work (run as it by
    runTestInference), each among other uids' configs.  The value is read from the
    work's own events.
    """
    device, _ = s.inference_device()
    scheduling = s.need_scheduling()
    others = [_cfg(_OTHER_UID, 0, 0, 0), _cfg(_SECOND_UID + 1, 1000, 2000, 2000)]
    probes = [  # app, job, min, max
        (0, 0, 0, 2000), (0, 1000, 0, 2000), (1000, 1000, 0, 2000), (250, 500, 0, 2000), (1000, 0, 0, 2000),
        (100, 0, 300, 600), (100, 400, 300, 600), (100, 1000, 300, 600), (0, 0, 2000, 2000),
        (1000, 1000, 0, 0), (500, 123, 700, 700),
    ]
    wrong, seen = [], 0
    for app, job, lo, hi in probes:
        await scheduling.setSchedulingConfigs([others[0], _cfg(s.uid, app, lo, hi), others[1]])
        info = _requested_info(await s.probe_run(device, job), f"an execution at job priority {job}")
        seen += 1
        if info.effectivePriority != _expected_priority(app, job, lo, hi):
            wrong.append((app, job, lo, hi, info.effectivePriority))
    # No config: the defaults.
    await scheduling.setSchedulingConfigs(others)
    info = _requested_info(await s.probe_run(device, 500), "an execution of a uid with no config")
    if info.effectivePriority != 1500:
        wrong.append((1000, 500, 0, 2000, info.effectivePriority))
    # Another uid's work, among the others' configs.
    await scheduling.setSchedulingConfigs([*others, _cfg(_SECOND_UID, 300, 0, 2000), _cfg(s.uid, 0)])
    events = await s.run_inference(100, as_uid=_SECOND_UID, device=device)
    info = _requested_info(events, f"runTestInference as uid {_SECOND_UID}")
    if info.uid != _SECOND_UID:
        raise _Fail(f"runTestInference as uid {_SECOND_UID} reports uid {info.uid}")
    if info.effectivePriority != 400:
        wrong.append((300, 100, 0, 2000, info.effectivePriority))
    if wrong:
        shown = "; ".join(
            f"appPriority {app} in [{lo}, {hi}], job {job}: expected {_expected_priority(app, job, lo, hi)}, got {got}"
            for app, job, lo, hi, got in wrong[:4]
        )
        more = f" (and {len(wrong) - 4} more)" if len(wrong) > 4 else ""
        raise _Fail(f"{_formula_diagnosis(wrong)}: {shown}{more}")
    return f"{seen + 2} works on {device}, two uids and the defaults: every effectivePriority as the formula says"


async def set_replaces_update_merges(s: _Session) -> str:
    """setSchedulingConfigs replaces every config; updateSchedulingConfigs merges; a refused call changes nothing.

    Read from whether this uid may attribute its work to uid 4242 after each call
    (canAttributeOtherUid: a refusal or a run, whatever the priorities).
    """
    device, _ = s.inference_device()
    scheduling = s.need_scheduling()

    async def attributes() -> bool:
        try:
            await s.probe_run(device, 500, original_uid=_OTHER_UID)
        except SecurityException:
            return False
        return True

    def me(attribute: bool) -> Any:
        return _cfg(s.uid, 100, attribute=attribute)

    steps: list[tuple[str, Callable[[], Awaitable[Any]], bool, str]] = [
        ("setSchedulingConfigs({uid 4242})",
         lambda: scheduling.setSchedulingConfigs([_cfg(_OTHER_UID, 900)]), False,
         "a uid with no config may not attribute work to another uid (the default)"),
        ("setSchedulingConfigs({this uid may attribute, uid 4242})",
         lambda: scheduling.setSchedulingConfigs([me(True), _cfg(_OTHER_UID, 900)]), True, "set was not applied"),
        ("updateSchedulingConfigs({uid 4242})",
         lambda: scheduling.updateSchedulingConfigs([_cfg(_OTHER_UID, 50)]), True,
         "update dropped the configs it did not name (it acts as set)"),
        ("updateSchedulingConfigs({this uid may not attribute})",
         lambda: scheduling.updateSchedulingConfigs([me(False)]), False, "update did not replace this uid's config"),
        ("updateSchedulingConfigs({this uid may attribute})",
         lambda: scheduling.updateSchedulingConfigs([me(True)]), True, "update did not replace this uid's config"),
        ("setSchedulingConfigs({})",
         lambda: scheduling.setSchedulingConfigs([]), False, "an empty set kept the configs (it must clear them)"),
        ("updateSchedulingConfigs({this uid may attribute})",
         lambda: scheduling.updateSchedulingConfigs([me(True)]), True, "update did not add this uid's config"),
        ("setSchedulingConfigs({uid 4242})",
         lambda: scheduling.setSchedulingConfigs([_cfg(_OTHER_UID, 10)]), False,
         "set kept a config it did not name (it acts as update); a uid with no config may not attribute"),
        ("updateSchedulingConfigs({this uid may attribute, uid 4242 at appPriority -1}), refused",
         lambda: _refused(scheduling.updateSchedulingConfigs([me(True), _cfg(_OTHER_UID, -1)])), False,
         "a refused update changed a config"),
        ("setSchedulingConfigs({this uid may attribute, this uid again}), refused",
         lambda: _refused(scheduling.setSchedulingConfigs([me(True), me(False)])), False,
         "a refused set changed a config"),
    ]
    for label, call, want, meaning in steps:
        await call()
        got = await attributes()
        if got != want:
            did = "ran" if got else "was refused"
            raise _Fail(f"after {label}, this uid's work attributed to uid {_OTHER_UID} {did}: {meaning}")
    return "set replaces, update merges, refused calls change nothing"


async def _refused(call: Awaitable[Any]) -> None:
    try:
        await call
    except IllegalArgumentException:
        return
    raise _Fail("an invalid config call was accepted; it must fail with EX_ILLEGAL_ARGUMENT")


def _check_work(events: Sequence[Any], what: str, *, uid: int, original_uid: int, job: int) -> None:
    """One work's events: requested, started(INITIAL), any pauses, ended(COMPLETED), each
    carrying the uid, originalUid and jobPriority it was submitted with."""
    for e in events:
        label = _describe_raw([e])
        if e.info.uid != uid:
            raise _Fail(f"{what}: its {label} reports uid {e.info.uid}, it was submitted by uid {uid}")
        if e.info.originalUid != original_uid:
            raise _Fail(
                f"{what}: its {label} reports originalUid {e.info.originalUid}, it was attributed to {original_uid}"
                + (" (the driver reports uid as originalUid)" if e.info.originalUid == uid else "")
            )
        if e.info.jobPriority != job:
            raise _Fail(f"{what}: its {label} reports jobPriority {e.info.jobPriority}, it was submitted at {job}")
    kinds = [(e.kind, e.reason if e.kind != _KIND_REQUESTED else None) for e in events]
    if (len(kinds) < 3 or kinds[0] != (_KIND_REQUESTED, None) or kinds[1] != (_KIND_STARTED, _START_INITIAL)
            or kinds[-1] != (_KIND_ENDED, _END_COMPLETED)):
        raise _Fail(f"{what} caused {_describe_raw(events)}; expected requested, started(INITIAL), ..., ended(COMPLETED)")


async def run_inference_attributed_to_other_uid(s: _Session) -> str:
    """Work attributed to uid 4242 by a uid with canAttributeOtherUid runs and reports originalUid 4242."""
    device, _ = s.inference_device()
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0, attribute=True)])
    try:
        events = await s.probe_run(device, 500, original_uid=_OTHER_UID)
    except SecurityException as exc:
        raise _Fail(f"work attributed to uid {_OTHER_UID} by a uid with canAttributeOtherUid was refused: "
                    f"{exc.message}") from None
    works = _works(events)
    if len(works) != 1:
        raise _Fail(f"one attributed execution caused {_describe_raw(events)} over {len(works)} work(s)")
    _check_work(events, f"the work attributed to uid {_OTHER_UID}", uid=s.uid, original_uid=_OTHER_UID, job=500)
    return f"uid {s.uid}'s work attributed to uid {_OTHER_UID}: every event reports originalUid {_OTHER_UID}"


async def run_inferences_back_to_back(s: _Session) -> str:
    """Two works back to back and one of another uid meanwhile: each its own id and its own events.

    Every event carries its work's uid, originalUid (its uid: nothing attributed)
    and jobPriority; ids increase over all of them.
    """
    device, _ = s.inference_device()
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0), _cfg(_SECOND_UID, 100)])
    since = await s.event_mark()
    other: list[Any] = []

    async def second_uid() -> None:
        other.extend(await s.run_inference(700, as_uid=_SECOND_UID, device=device))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second_uid)
        await s.probe_run(device, 300, group_id=_GROUP, feature_id=_FEATURE)
        await s.probe_run(device, 600)
    events = await s.events_since(since)
    mine = _works([e for e in events if e.info.uid == s.uid])
    theirs = _works([e for e in events if e.info.uid == _SECOND_UID])
    strays = [e for e in events if e.info.uid not in (s.uid, _SECOND_UID)]
    if strays:
        raise _Fail(f"the works of uids {s.uid} and {_SECOND_UID} caused events of uid(s) "
                    f"{sorted({e.info.uid for e in strays})}: {_describe_raw(strays)}")
    if len(mine) != 2 or len(theirs) != 1:
        raise _Fail(
            f"two executions of uid {s.uid} and one test inference of uid {_SECOND_UID} were reported as "
            f"{len(mine)} and {len(theirs)} work(s): {_describe_raw(events)}"
        )
    for (work, evs), job, group, feature in zip(mine.items(), (300, 600), (_GROUP, None), (_FEATURE, None)):
        what = f"uid {s.uid}'s work {work} (job priority {job})"
        _check_work(evs, what, uid=s.uid, original_uid=s.uid, job=job)
        for e in evs:
            got_group = None if e.info.groupId is None else bytes(e.info.groupId.uuid)
            if got_group != group or e.info.debugFeatureId != feature:
                raise _Fail(
                    f"{what}, submitted with groupId {_hex(group)} and debugFeatureId {feature!r}, reports groupId "
                    f"{_hex(got_group)} and debugFeatureId {e.info.debugFeatureId!r} in its {_describe_raw([e])}"
                )
            if e.info.debugPid != os.getpid():
                raise _Fail(f"{what} reports debugPid {e.info.debugPid}, it was submitted by pid {os.getpid()}")
    for work, evs in theirs.items():
        _check_work(evs, f"uid {_SECOND_UID}'s work {work}", uid=_SECOND_UID, original_uid=_SECOND_UID, job=700)
    ids = [e.info.id for e in events]
    if ids != sorted(set(ids)):
        raise _Fail(f"event ids do not increase: {ids}")
    return f"3 works of 2 uids on {device}: each requested, started, ended with its own uid and priority"


async def cancelled_work_events(s: _Session) -> str:
    """A queued work cancelled (its execution's deadline passed) ends CANCELLED_USER, and never completes.

    vts fills every channel of the device with test inferences at job priority 0,
    then executes at job priority 1000 with a deadline 50 ms away: the HAL
    cancels the work, as an app's missed deadline does.
    """
    device, channels = s.inference_device()
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0)])
    prepared = s.prepared.get(device) or await s.prepare(device, _probe_model())
    s.prepared[device] = prepared
    since = await s.event_mark()
    outcome: list[BaseException | None] = []

    async with trio.open_nursery() as nursery:
        for _ in range(channels):
            nursery.start_soon(s.run_inference, 0)
        # Wait until every channel is busy (bounded: the inferences take a few hundred ms).
        with trio.move_on_after(_WORK_TIMEOUT_S):
            while sum(e.kind == _KIND_STARTED for e in await s.events_since(since, s.uid)) < channels:
                await trio.sleep(0.005)
        x = s.distinct_input((1, _PROBE_WIDTH))
        mark = await s.event_mark()
        deadline = time.monotonic_ns() + 50_000_000
        try:
            await s.bounded(
                execute(prepared, [x], [((1, _PROBE_WIDTH), np.dtype("<f4"))], job_priority=1000,
                        deadline_ns=deadline), mark, "an execution with a deadline")
            outcome.append(None)
        except ServiceSpecificException as exc:
            outcome.append(exc)
    events = await s.events_since(mark, s.uid)
    blocked = {e.workId for e in await s.events_since(since, s.uid) if e.info.id <= mark}
    works = {w: evs for w, evs in _works(events).items() if w not in blocked}
    late = [w for w, evs in works.items() if evs[0].kind == _KIND_REQUESTED and evs[0].info.jobPriority == 1000]
    if len(late) != 1:
        raise _Fail(f"the execution with a deadline was reported as {len(late)} work(s): {_describe_raw(events)}")
    evs = works[late[0]]
    ends = [e for e in evs if e.kind == _KIND_ENDED and e.reason != _END_PAUSED]
    if outcome and outcome[0] is None:
        raise _Fail(f"the execution whose deadline passed while it waited returned results ({_describe_raw(evs)})")
    if len(ends) != 1 or ends[0].reason != EndReason.CANCELLED_USER:
        raise _Fail(f"the work cancelled in the queue caused {_describe_raw(evs)}; expected one ended(CANCELLED_USER)")
    return f"cancelled in the queue of {device}: {_describe_raw(evs)}"


async def work_device_number(s: _Session) -> str:
    """Each device's work reports that device's deviceNumber (the driver's own number for it)."""
    # A name two devices share is GetDeviceNameTest's failure: either number may be the one served.
    numbers: dict[str, list[int]] = {}
    for d in s.probe_devices():
        numbers.setdefault(d["name"], []).append(d["number"])
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0)])
    seen, wrong = [], []
    for name in sorted(s.need_devices()):
        if name not in numbers:
            continue
        if name not in s.prepared:
            try:
                s.prepared[name] = await s.prepare(name, _probe_model())
            except _Fail:
                continue  # a device without ADD runs no probe (whether it says so is another check's)
        events = await s.probe_run(name, 500)
        number = " or ".join(map(str, numbers[name]))
        for e in events:
            if e.info.deviceNumber not in numbers[name]:
                wrong.append(f"work on {name} (driver device {number}) reports deviceNumber {e.info.deviceNumber} "
                             f"({e.deviceName}) in its {_describe_raw([e])}")
                break
        seen.append(f"{name} {number}")
    if wrong:
        raise _Fail("; ".join(wrong))
    if not seen:
        raise _Fail("no device runs ADD, so no work could be run on any")
    return ", ".join(seen)


# The long model: this many ADDs over [1, _LONG_WIDTH], four slices each (~48 emulated ms
# on the reference driver's emu-npu, 2 us a slice; ~480 ms on the template driver's 20 us).
_LONG_OPS, _LONG_WIDTH = 6000, 256
# The generated tests' share of check timeouts (they run first in ClaimedModelsPrepare).
_GENERATED_BUDGET = 6.0


async def preempted_work_resumes_intact(s: _Session) -> str:
    """A preempted work resumes and computes exactly what it computes unpreempted, though other works ran between.

    On the device of the inference checks, every channel gets a long work at job
    priority 1000, then as many at job priority 0 preempt them; each with its own
    input.  Each output must equal the same input's output run alone, and at
    least one work must have been paused and resumed (the driver's events say so).
    """
    device, channels = s.inference_device()
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0)])
    prepared = await s.prepare(device, _long_model(_LONG_OPS, _LONG_WIDTH))
    out_spec = [((1, _LONG_WIDTH), np.dtype("<f4"))]
    try:
        for attempt in range(3):
            lows = [s.distinct_input((1, _LONG_WIDTH)) for _ in range(channels)]
            highs = [s.distinct_input((1, _LONG_WIDTH)) for _ in range(channels)]
            alone = []
            for x in lows + highs:
                alone.append((await s.bounded(execute(prepared, [x], out_spec), await s.event_mark(), "a long execution"))[0])
            since = await s.event_mark()
            results: dict[int, np.ndarray] = {}

            async def run(k: int, x: np.ndarray, job: int) -> None:
                (results[k],) = await execute(prepared, [x], out_spec, job_priority=job)

            with trio.move_on_after(_WORK_TIMEOUT_S * 2) as scope:
                async with trio.open_nursery() as nursery:
                    for k, x in enumerate(lows):
                        nursery.start_soon(run, k, x, 1000)
                    with trio.move_on_after(_WORK_TIMEOUT_S):
                        while sum(e.kind == _KIND_STARTED for e in await s.events_since(since, s.uid)) < channels:
                            await trio.sleep(0.002)
                    for k, x in enumerate(highs):
                        nursery.start_soon(run, channels + k, x, 0)
            if scope.cancelled_caught:
                await s.bounded(trio.sleep_forever(), since, "the long executions")
            events = await s.events_since(since, s.uid)
            paused = {e.workId for e in events if e.kind == _KIND_ENDED and e.reason == _END_PAUSED}
            resumed = {e.workId for e in events if e.kind == _KIND_STARTED and e.reason == StartReason.RESUMED}
            for k, (got, want) in enumerate(zip((results[i] for i in range(2 * channels)), alone)):
                if not np.array_equal(got, want):
                    at = int(np.argmax(got.reshape(-1) != want.reshape(-1)))
                    inputs = lows + highs
                    mixed = [j for j, other in enumerate(alone) if j != k and np.array_equal(got, other)]
                    note = (f"; it is exactly the result of input #{mixed[0]}: the work computed with another work's input"
                            if mixed else "")
                    role = "a job at priority 1000 (preempted)" if k < channels else "a job at priority 0 (preempting)"
                    raise _Fail(
                        f"on {device}, {role} with input #{k} returned element {at} = {float(got.reshape(-1)[at]):.7g}, "
                        f"but run alone it gives {float(want.reshape(-1)[at]):.7g}{note} "
                        f"(its input's element is {float(inputs[k].reshape(-1)[at % _LONG_WIDTH]):.7g}; "
                        f"{len(paused)} work(s) paused, {len(resumed)} resumed)"
                    )
            if paused & resumed:
                return (f"on {device}, {len(paused & resumed)} work(s) paused and resumed while {channels} others ran: "
                        "every output identical to its run alone")
        levels = sorted({e.info.effectivePriority for e in events if e.kind == _KIND_REQUESTED})
        if len(levels) == 1:
            raise _Fail(f"on {device}, the works at job priority 1000 and 0 all got effectivePriority {levels[0]}: "
                        "none outranks another, so none was preempted")
        raise _Fail(f"on {device}, no work at job priority 1000 was paused for one at 0 in 3 tries: "
                    f"the device never preempts ({_describe_raw(events)})")
    finally:
        await prepared.release()


# ---- the generated tests -----------------------------------------------------------


async def _generated(s: _Session) -> dict:
    """Every generated case on every device that claims all of it, once per run (a
    verdict or a hang on the way is also given once, and repeated to the second check)."""
    if isinstance(s.generated, (_Fail, _Hung)):
        raise type(s.generated)(*s.generated.args)
    if s.generated is not None:
        return s.generated
    try:
        try:
            s.generated = await _run_generated(s)
        except BaseExceptionGroup as group:  # the devices run concurrently
            raise _most_telling(group) from None
    except (_Fail, _Hung) as exc:
        s.generated = exc
        raise
    return s.generated


async def _run_generated(s: _Session) -> dict:
    if s.case_path is None or not s.case_path.is_file():
        raise _Fail(f"no generated cases at {s.case_path}: make them with `make vts-cases` in the npuemu checkout")
    try:
        case_file = load_cases(s.case_path)
    except ValueError as exc:
        raise _Fail(f"{exc}: remake it with `make vts-cases`") from None
    current = sources_digest()
    if current is not None and case_file.digest != current:
        raise _Fail(f"{s.case_path} is stale (made from sources {case_file.digest}, the checkout's are {current}): "
                    "remake it with `make vts-cases`")
    outcome: dict[str, Any] = {"refused": [], "wrong": [], "passed": 0, "claimed": {}, "cases": len(case_file.cases)}

    async def run_on(name: str) -> None:
        device = s.devices[name]
        for case in case_file.cases:
            built = model_of(case)
            try:
                try:
                    support = list(await device.getSupportedOperations(built.model))
                except ServiceSpecificException as exc:
                    outcome["wrong"].append((name, case, f"getSupportedOperations refused the valid model: {exc}"))
                    continue
                if not support or not all(support):
                    continue
                outcome["claimed"].setdefault(name, set()).add(case.operation)
                try:
                    prepared = await device.prepareModel(
                        built.model, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, -1, 0, None)
                except ServiceSpecificException as exc:
                    outcome["refused"].append((name, case, str(exc)))
                    continue
            finally:
                for pool in built.model.pools:
                    pool.close()
            try:
                since = await s.event_mark()
                outputs = await s.bounded(execute(prepared, built.feeds, built.outputs), since,
                                          f"{case.operation} ({case.variant}, case {case.id}) on {name}", name)
            except ServiceSpecificException as exc:
                outcome["wrong"].append((name, case, f"the execution failed: {exc}"))
                continue
            finally:
                await prepared.release()
            problem = compare_outputs(outputs, case)
            if problem:
                outcome["wrong"].append((name, case, problem))
            else:
                outcome["passed"] += 1

    # The devices one at a time each, all at once: the HAL serves them concurrently.
    async with trio.open_nursery() as nursery:
        for name in sorted(s.need_devices()):
            nursery.start_soon(run_on, name)
    order = {case.id: i for i, case in enumerate(case_file.cases)}
    for key in ("refused", "wrong"):
        outcome[key].sort(key=lambda item: (item[0], order[item[1].id]))
    return outcome


def _case_label(device: str, case: GenCase) -> str:
    return f"{device}: {case.operation} ({case.variant}, case {case.id})"


def _listed(items: Sequence[str], limit: int = 5) -> str:
    more = f"; and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


async def generated_tests(s: _Session) -> str:
    """Every generated model a device claims computes the reference's outputs within Android's tolerances.

    The models are one operation each (every operation and operand type of NN HAL
    1.2, a few cases each, from the conformance material; ``make vts-cases``),
    prepared and executed on every device whose getSupportedOperations claims all
    of the model, each with its own inputs.  Float32 within 1e-5 + 5 ULP,
    float16 and relaxed within 5 float16 ULP, quantized within one quantum.
    """
    outcome = await _generated(s)
    if outcome["wrong"]:
        raise _Fail(_listed([f"{_case_label(d, c)}: {why}" for d, c, why in outcome["wrong"]]))
    claimed = outcome["claimed"]
    if not claimed:
        return f"no device claims any of the {outcome['cases']} generated models"
    return f"{outcome['passed']} executions within tolerance; " + ", ".join(
        f"{d} {len(ops)} operations" for d, ops in sorted(claimed.items()))


async def claimed_models_prepare(s: _Session) -> str:
    """A device that claims every operation of a generated model prepares it (prepareModel succeeds)."""
    outcome = await _generated(s)
    if outcome["refused"]:
        raise _Fail(_listed([
            f"{_case_label(d, c)}: getSupportedOperations claims it, prepareModel refused it: {why}"
            for d, c, why in outcome["refused"]
        ]))
    return f"every claimed model of {outcome['cases']} generated ones prepared"


# ---- validation -------------------------------------------------------------------


def _mutated(edit: Callable[[Any], Any]) -> Any:
    """The probe model with ``edit`` applied to its main subgraph (which returns the new one)."""
    model = _probe_model()
    return model.replace(main=edit(model.main))


def _operand(sub: Any, index: int, **changes: Any) -> Any:
    operands = list(sub.operands)
    operands[index] = operands[index].replace(**changes)
    return sub.replace(operands=operands)


def _operation(sub: Any, **changes: Any) -> Any:
    return sub.replace(operations=[sub.operations[0].replace(**changes)])


# Each malformed model, and what is wrong with it. The probe model's operands: 0 the input
# x, 1 the constant c, 2 the fuse code, 3 the output.
_BAD_MODELS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("an operation input index past the operands", lambda m: _operation(m, inputs=[0, 1, 99])),
    ("an operation output index past the operands", lambda m: _operation(m, outputs=[7])),
    ("ADD with a missing input (2 of 3)", lambda m: _operation(m, inputs=[0, 1])),
    ("ADD with an extra input", lambda m: _operation(m, inputs=[0, 1, 2, 2])),
    ("an input of the wrong type (TENSOR_BOOL8)", lambda m: _operand(m, 0, type=OperandType.TENSOR_BOOL8)),
    ("a fuse code that is a tensor", lambda m: _operand(m, 2, type=OperandType.TENSOR_INT32, dimensions=[1])),
    ("an output of the wrong rank", lambda m: _operand(m, 3, dimensions=[1, 1, _PROBE_WIDTH])),
    ("an output of the wrong shape", lambda m: _operand(m, 3, dimensions=[1, _PROBE_WIDTH + 1])),
    ("inputs of mismatched shapes", lambda m: _operand(m, 0, dimensions=[1, _PROBE_WIDTH - 3])),
    ("a constant past the end of operandValues",
     lambda m: _operand(m, 2, location=DataLocation(poolIndex=0, offset=4096, length=4))),
    ("a constant of the wrong length", lambda m: _operand(m, 2, location=m.operands[2].location.replace(length=2))),
    ("a constant in a pool that does not exist",
     lambda m: _operand(m, 1, lifetime=OperandLifeTime.CONSTANT_POOL,
                        location=DataLocation(poolIndex=3, offset=0, length=4 * _PROBE_WIDTH))),
    ("a model input that is a constant", lambda m: m.replace(inputIndexes=[1])),
    ("a model output index past the operands", lambda m: m.replace(outputIndexes=[42])),
    ("an operand read before it is written", lambda m: _operand(m, 0, lifetime=OperandLifeTime.TEMPORARY_VARIABLE)),
    ("a negative dimension", lambda m: _operand(m, 0, dimensions=[1, -_PROBE_WIDTH])),
)


async def _expect_invalid(call: Awaitable[Any], what: str) -> str | None:
    """None when ``call`` fails with INVALID_ARGUMENT, else what it did instead."""
    try:
        result = await call
    except ServiceSpecificException as exc:
        if exc.error_code == ErrorStatus.INVALID_ARGUMENT:
            return None
        name = ErrorStatus(exc.error_code).name if exc.error_code in iter(ErrorStatus) else exc.error_code
        return f"{what} failed with {name}, not INVALID_ARGUMENT ({exc.message})"
    except DeadObjectException:
        raise
    except RemoteException as exc:
        return f"{what} raised {type(exc).__name__} ({exc}), not INVALID_ARGUMENT"
    release = getattr(result, "release", None)
    if release is not None:
        await release()
    return f"{what} succeeded"


async def validate_model(s: _Session) -> str:
    """Malformed models are refused with INVALID_ARGUMENT by getSupportedOperations and prepareModel, on every device.

    Bad operand and operation indexes, missing or extra inputs, wrong types, ranks
    and shapes, constants outside their memory, constants as model inputs, operands
    read before written.  The device must answer each (no crash, no hang) and still
    prepare the well-formed model afterwards.
    """
    problems = []
    for name in sorted(s.need_devices()):
        device = s.devices[name]
        for what, edit in _BAD_MODELS:
            try:
                model = _mutated(edit)
            except (TypeError, ValueError):
                continue  # not even expressible as a parcel
            for call, label in ((device.getSupportedOperations(model), "getSupportedOperations"),
                                (device.prepareModel(model, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                                                     -1, 0, None), "prepareModel")):
                wrong = await _expect_invalid(call, f"{label} of a model with {what}")
                if wrong:
                    problems.append(f"{name}: {wrong}")
        prepared = await s.prepare(name, _probe_model()) if all(
            await device.getSupportedOperations(_probe_model())) else None
        if prepared is not None:
            await prepared.release()
    if problems:
        raise _Fail(_listed(problems))
    return f"{len(_BAD_MODELS)} malformed models refused on {len(s.devices)} device(s)"


async def validate_request(s: _Session) -> str:
    """Malformed requests are refused with INVALID_ARGUMENT, and the model then still executes.

    Missing or extra arguments, an argument with no value, wrong dimensions,
    undersized and oversized regions, offsets outside the pool or negative, a pool
    that does not exist.
    """
    device, _ = s.inference_device()
    await s.need_scheduling().setSchedulingConfigs([_cfg(s.uid, 0)])
    prepared = await s.prepare(device, _probe_model())
    try:
        x = s.distinct_input((1, _PROBE_WIDTH))
        places_in, places_out, size = request_layout([x], [((1, _PROBE_WIDTH), np.dtype("<f4"))])
        (in_off, in_len), (out_off, out_len) = places_in[0], places_out[0]

        def arg(offset: int, length: int, pool: int = 0, **changes: Any) -> Any:
            return RequestArgument(hasNoValue=False, location=DataLocation(poolIndex=pool, offset=offset, length=length),
                                   dimensions=[]).replace(**changes)

        good_in, good_out = arg(in_off, in_len), arg(out_off, out_len)
        bad: list[tuple[str, list, list]] = [
            ("no input", [], [good_out]),
            ("an extra input", [good_in, good_in], [good_out]),
            ("no output", [good_in], []),
            ("an input with no value", [arg(in_off, in_len, hasNoValue=True)], [good_out]),
            ("an input of the wrong dimensions", [arg(in_off, in_len, dimensions=[1, _PROBE_WIDTH + 1])], [good_out]),
            ("an undersized input region", [arg(in_off, in_len - 4)], [good_out]),
            ("an oversized input region", [arg(in_off, in_len + 4)], [good_out]),
            ("an undersized output region", [good_in], [arg(out_off, out_len - 4)]),
            ("an input past the end of its pool", [arg(size - 8, in_len)], [good_out]),
            ("an output at a negative offset", [good_in], [arg(-64, out_len)]),
            ("an input in a pool that does not exist", [arg(in_off, in_len, pool=1)], [good_out]),
        ]
        problems = []
        for what, ins, outs in bad:
            region = SharedMemory.create("vts-bad-request", size)
            try:
                request = Request(inputs=ins, outputs=outs, pools=[region])
                wrong = await _expect_invalid(
                    prepared.executeWithHints(request, False, -1, ExecutionHints()), f"an execution with {what}")
            finally:
                region.close()
            if wrong:
                problems.append(wrong)
        if problems:
            raise _Fail(f"on {device}: " + _listed(problems))
        await s.probe_run(device, 500)
    finally:
        await prepared.release()
    return f"{len(bad)} malformed requests refused on {device}; the model still executes"


# ---- discovery as a whole ------------------------------------------------------------


async def status_truthful(s: _Session) -> str:
    """A device whose every channel hangs reports OFFLINE, and AVAILABLE again once they are reset.

    vts hangs the channels with the HAL's fault injection (the driver's
    ``inject_fault``), asks getStatus(), and resets them (``reset_channel``).
    """
    control = s.need_control()
    notes = []
    for d in sorted(s.probe_devices(), key=lambda d: (bool(d["parts"]), d["number"])):
        name = d["name"]
        if name not in s.devices or d["parts"]:
            continue
        channels = max(1, d["channels"])
        try:
            for ch in range(channels):
                await control.injectFault(name, IHalControl.FAULT_HANG_CHANNEL, float(ch))
        except (IllegalArgumentException, ServiceSpecificException) as exc:
            notes.append(f"{name}: channels cannot be hung ({_one_line(exc)})")
            continue
        try:
            status = int(await s.devices[name].getStatus())
        finally:
            for ch in range(channels):
                await control.resetChannel(name, ch)
        if status != DeviceStatus.OFFLINE:
            raise _Fail(f"{name} with all {channels} channel(s) hung reports {_STATUS_NAMES.get(status, status)}, "
                        "not OFFLINE: its status is not the device's")
        again = int(await s.devices[name].getStatus())
        if again != _STATUS_AVAILABLE:
            raise _Fail(f"{name} reports {_STATUS_NAMES.get(again, again)} after its channels were reset, not AVAILABLE")
        notes.append(f"{name} OFFLINE when hung")
    if not notes:
        raise _Fail("no device to hang")
    return "; ".join(notes)


@dataclass(frozen=True, slots=True)
class _Check:
    name: str
    run: Callable[[_Session], Awaitable[str]]
    # How many check timeouts it may take: the generated tests run hundreds of models
    # (each execution is bounded on its own, so a hang still shows within one).
    budget: float = 1.0


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
    _Check("NpuSchedulingAidl.PrioritiesValidatedAcrossRange", priorities_validated_across_range),
    _Check("NpuSchedulingAidl.EffectivePriorityFormula", effective_priority_formula),
    _Check("NpuSchedulingAidl.SetReplacesUpdateMerges", set_replaces_update_merges),
    _Check("NpuSchedulingAidl.RunInferenceAttributedToOtherUid", run_inference_attributed_to_other_uid),
    _Check("NpuSchedulingAidl.RunInferencesBackToBack", run_inferences_back_to_back),
    _Check("NpuSchedulingAidl.CancelledWorkEvents", cancelled_work_events),
    _Check("NpuSchedulingAidl.WorkDeviceNumber", work_device_number),
    _Check("NpuSchedulingAidl.PreemptedWorkResumesIntact", preempted_work_resumes_intact),
    _Check("NpuFeature.ImplementsHal", feature_implements_hal),
    _Check("NeuralnetworksHidlTest.StatusTest", status_test),
    _Check("NeuralnetworksHidlTest.GetCapabilitiesTest", get_capabilities_test),
    _Check("NeuralnetworksHidlTest.GetDeviceVersionStringTest", get_device_version_string_test),
    _Check("NeuralnetworksHidlTest.GetDeviceTypeTest", get_device_type_test),
    _Check("NeuralnetworksHidlTest.GetDeviceNameTest", get_device_name_test),
    _Check("NeuralnetworksHidlTest.GetDeviceSupportedExtensionsTest", get_device_supported_extensions_test),
    _Check("NeuralnetworksHidlTest.GetNumberOfCacheFilesNeeded", get_number_of_cache_files_needed),
    _Check("NeuralnetworksHidlTest.GetSupportedOperations", get_supported_operations),
    _Check("NeuralnetworksHidlTest.ValidateModel", validate_model),
    _Check("NeuralnetworksHidlTest.ValidateRequest", validate_request),
    _Check("NeuralnetworksHidlTest.ClaimedModelsPrepare", claimed_models_prepare, budget=_GENERATED_BUDGET),
    _Check("NeuralnetworksHidlTest.GeneratedTests", generated_tests),
    _Check("Seed.ValidDeviceTypes", valid_device_types),
    _Check("Seed.StatusTruthful", status_truthful),
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
    hung: str | None = None
    with trio.move_on_after(budget) as scope:
        try:
            try:
                detail = await check.run(s)
            except BaseExceptionGroup as group:  # concurrent work in a check: its most telling failure
                raise _most_telling(group) from None
        except _Fail as exc:
            result = VtsCheckResult(check.name, False, str(exc))
        except _Hung as exc:
            result, hung = None, str(exc)
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
    elif hung is not None:
        result = VtsCheckResult(check.name, False, f"{hung}: the driver hangs (the HAL is restarted)")
        restart_why = "hung"
    if restart_why is None and not await s.alive():
        restart_why = "died" if await s.exit_note() else "hung"
        if result.passed:
            result = VtsCheckResult(check.name, False, f"the HAL stopped answering after the check ({restart_why})")
    return result, restart_why


def _most_telling(group: BaseExceptionGroup) -> BaseException:
    """Of a check's concurrent failures: a crash, else a hang, else a verdict, else the first."""
    leaves = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for sub in exc.exceptions:
                walk(sub)
        else:
            leaves.append(exc)

    walk(group)
    for kind in (DeadObjectException, _Hung, _Fail):
        for exc in leaves:
            if isinstance(exc, kind):
                return exc
    return leaves[0] if leaves else group


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
        result, restart_why = await _run_check(s, check, min(check_timeout * check.budget, left))
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
    output_dir: str | os.PathLike[str] | None = None,
    previous_build: str | os.PathLike[str] | None = None,
    cases: str | os.PathLike[str] | None = None,
    only: Sequence[str] | None = None,
) -> VtsReport:
    """Boot a private HAL on ``driver`` and run every check; never hangs.

    Arguments:
        driver: a driver ``.so``, a driver ``.c`` (built twice, for the version
            check), or ``None`` for the built-in reference driver.
        check_timeout: seconds one check may take before it fails as a hang.
        timeout: seconds for the whole run; checks not reached in time fail as
            "not run".
        output_dir: the run's record: the report (``vts-report.json``) and the builds
            runs into it have seen (``vts-builds.json``, keyed by build identity; see
            ``Seed.VersionStringChangesWithBuild``). None: nothing is written.
        previous_build: the driver's previous build (a .so), for the version check.
        cases: the generated cases (default ``default_cases_path()``, made by
            ``make vts-cases``).
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
    out = Path(output_dir) if output_dir is not None else None
    case_path = Path(cases) if cases is not None else default_cases_path()
    workdir = Path(tempfile.mkdtemp(prefix="npuemu-vts-"))
    try:
        deadline = trio.current_time() + timeout
        target = await _prepare_target(driver, workdir, previous_build)
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
                for role, path in zip("ab", target.version_builds or ()):
                    nursery.start_soon(probe, role, path)
                if target.previous_build is not None:
                    nursery.start_soon(probe, "previous", target.previous_build)
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
                others = {role: probes[role] for role in ("a", "b", "previous") if role in probes}
                if boot_error is None:
                    session = _Session(hal, target, facts, probe_error, out, others, case_path=case_path)
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
        report = VtsReport(target.label, tuple(results))
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / REPORT_FILE).write_text(json.dumps(report.as_dict(), indent=2) + "\n")
        return report
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
