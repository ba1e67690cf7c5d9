"""What the shell commands do, as library calls: shutdown, launch, thermal, devices, logs.

Each takes a binder runtime opened as the shell (``open_shell``) where it talks to
the system, so that a test, a script and ``npuemu`` do exactly the same thing.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import trio

from framework.binder import BinderRuntime, defaultServiceManager
from framework.nn import FEATURE_LEVEL, referenceCpuDevice
from interfaces.android.hardware.neuralnetworks import DeviceStatus, DeviceType, IDevice
from interfaces.android.hardware.thermal import ThrottlingSeverity
from interfaces.npuemu.hal import IHalControl
from interfaces.npuemu.server import IActivityManager, IPackageManager, IThermalService, WaitResult
from interfaces.services import ACTIVITY_SERVICE, PACKAGE_SERVICE, THERMAL_SERVICE

from ._errors import EmulatorError, EmulatorNotRunningError, NoSuchAppError
from ._logcat import LogFilter, LogLine, log_parts, parse_line, parse_lines
from ._paths import RuntimeFiles, process_start
from ._reaper import kill_boot
from ._services import HAL_CONTROL, IDEVICE_PREFIX, get_service
from ._trace import enum_name

__all__ = [
    "DeviceRow",
    "LaunchedApp",
    "apps_root",
    "describe_start",
    "follow_log",
    "launch_apps",
    "list_devices",
    "parse_severity",
    "read_log",
    "reset_thermal",
    "resolve_app",
    "set_thermal_severity",
    "shutdown",
    "thermal_status",
]



# -- shutdown ---------------------------------------------------------------------------


async def shutdown(runtime_dir: Path, *, timeout: float = 15.0) -> int:
    """SIGTERM to the emulator's init, then wait until it has exited. Returns init's pid.

    init stops system_server (and its apps), the HAL and the servicemanager in
    order, removes the files of a running emulator, and exits; if it has not
    exited after ``timeout``, it and every process of its boot are SIGKILLed.
    Where init died without that (a SIGKILL) and its reaper too, whatever of its boot
    still runs is killed here and its files removed.
    """
    files = RuntimeFiles(runtime_dir)
    try:
        state = files.running_state()
    except EmulatorNotRunningError:
        leftovers = _orphans(files)
        files.remove_live_files()
        if leftovers:
            raise EmulatorError(f"init of {runtime_dir} had died; killed what it left running (pids "
                                f"{', '.join(map(str, leftovers))})") from None
        raise
    pid, start = int(state["init_pid"]), state.get("init_start")

    def init_alive() -> bool:  # that init, not a process that got its pid since
        now = process_start(pid)
        return now is not None and start in (None, now)

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return pid
    with trio.move_on_after(timeout):
        while init_alive():
            await trio.sleep(0.05)
        return pid
    if init_alive():
        os.kill(pid, signal.SIGKILL)
    await trio.to_thread.run_sync(functools.partial(kill_boot, str(state.get("boot_id", "")), cgroup=state.get("cgroup")))
    files.remove_live_files()
    raise EmulatorError(f"init (pid {pid}) did not shut down within {timeout:g} s; it and its stack were killed")


def _orphans(files: RuntimeFiles) -> list[int]:
    """Kill what a dead init's boot (named in its ``init.json``) left running; their pids."""
    try:
        state = json.loads(files.state.read_text())
        boot_id, cgroup = state["boot_id"], state.get("cgroup")
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []
    return kill_boot(str(boot_id), cgroup=cgroup if isinstance(cgroup, str) else None) if boot_id else []


# -- apps -------------------------------------------------------------------------------


def apps_root() -> Path:
    """The sample apps' folder (the ``apps`` package: ``apps/<name>/AndroidManifest.xml``)."""
    spec = importlib.util.find_spec("apps")
    if spec is None or not spec.submodule_search_locations:
        raise NoSuchAppError("the sample apps (package 'apps') are not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_app(app: str) -> Path:
    """An app folder: a sample's name under apps/, or a path to a folder with a manifest."""
    candidates = []
    path = Path(app).expanduser()
    if os.sep in app or app.startswith(".") or path.is_dir():
        candidates.append(path)
    else:
        candidates.append(apps_root() / app)
    for folder in candidates:
        if (folder / "AndroidManifest.xml").is_file():
            return folder.absolute()
    try:
        samples = sorted(p.name for p in apps_root().iterdir() if (p / "AndroidManifest.xml").is_file())
    except NoSuchAppError:
        samples = []
    where = f"; the sample apps are {', '.join(samples)}" if samples else ""
    raise NoSuchAppError(f"no such app {app!r}: not a sample name nor a folder with an AndroidManifest.xml{where}")


@dataclasses.dataclass(frozen=True)
class LaunchedApp:
    package: str
    uid: int
    pid: int
    importance: int
    folder: Path
    #: How its start ended (a ``WaitResult``: up, crashed, died, timed out); None unwaited.
    start: Any = None


async def launch_apps(
    runtime: BinderRuntime, apps: Sequence[str], importance: int = 0, *, wait_s: float | None = None
) -> list[LaunchedApp]:
    """Install (if needed) and start each app through the package and activity managers.

    ``importance`` 0 means the one the app's manifest asks for
    (``npuemu.launch.importance``). Folders are resolved before anything starts, so
    a misspelt name launches nothing. With ``wait_s``, every app is started first and
    then waited for, up to ``wait_s`` seconds each, until it is up or has crashed or
    died (``am start -W``): each ``LaunchedApp.start`` says which.
    """
    folders = [resolve_app(a) for a in apps]
    pm = await get_service(runtime, PACKAGE_SERVICE, IPackageManager)
    am = await get_service(runtime, ACTIVITY_SERVICE, IActivityManager)
    launched = []
    for folder in folders:
        uid = await pm.installPackage(os.fspath(folder))
        packages = await pm.getPackagesForUid(uid)
        if not packages:
            raise EmulatorError(f"the package manager installed {folder} as uid {uid} but lists no package for it")
        package = packages[0]
        pid = await am.startApp(package, importance)
        launched.append(LaunchedApp(package, uid, pid, await am.getUidImportance(uid), folder))
    if wait_s is not None:
        launched = [dataclasses.replace(app, start=await am.waitForAppStart(app.pid, round(wait_s * 1000)))
                    for app in launched]
    return launched


def describe_start(app: LaunchedApp) -> str | None:
    """Why ``app`` is not up, in one line (None when it is, or was not waited for)."""
    start = app.start
    if start is None or start.result == WaitResult.START_SUCCESS:
        return None
    who = f"{app.package} (pid {app.pid})"
    if start.result == WaitResult.START_CRASHED:
        crash = start.crashInfo
        where = ""
        if crash.throwFileName and Path(crash.throwFileName).is_relative_to(app.folder):  # the app's own code
            where = f" at {crash.throwFileName}" + (f":{crash.throwLineNumber}" if crash.throwLineNumber else "")
        message = f": {crash.exceptionMessage}" if crash.exceptionMessage else ""
        return (f"{who} crashed at start: {crash.exceptionClassName}{message}{where}"
                f" (the traceback: npuemu logcat -d --pid {app.pid})")
    if start.result == WaitResult.START_DIED:
        how = f"was killed by signal {-start.exitStatus}" if start.exitStatus < 0 else f"exited with status {start.exitStatus}"
        return f"{who} {how} before it was up (npuemu logcat -d --pid {app.pid})"
    return f"{who} is not up after {start.totalTimeMs / 1000:g} s (still starting; npuemu logcat --pid {app.pid})"


# -- thermal ----------------------------------------------------------------------------


def parse_severity(text: str | int) -> int:
    """A severity from its name (``severe``, ``THROTTLING_SEVERE``) or number (0..6)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        key = str(text).strip().upper().removeprefix("THROTTLING_").removeprefix("THERMAL_STATUS_")
        if key.isdigit():
            value = int(key)
        elif key in ThrottlingSeverity.__members__:
            return int(ThrottlingSeverity[key])
        else:
            raise ValueError(f"unknown thermal severity {text!r}; use one of {', '.join(s.name.lower() for s in ThrottlingSeverity)}")
    try:
        return int(ThrottlingSeverity(value))
    except ValueError:
        raise ValueError(f"thermal severity {value} is out of range 0..{int(max(ThrottlingSeverity))}") from None


def _thermal_dict(status: Any) -> dict[str, Any]:
    sev = int(status.severity)
    return {
        "severity": sev,
        "severity_name": enum_name(ThrottlingSeverity, sev),
        "temperature_c": round(float(status.temperatureC), 2),
        "thresholds_c": {s.name: round(float(t), 2) for s, t in zip(list(ThrottlingSeverity)[1:], status.thresholdsC)},
        "held": bool(status.overridden),
    }


async def thermal_status(runtime: BinderRuntime) -> dict[str, Any]:
    """The die's temperature, severity and thresholds, and what the thermal service follows."""
    hal = await get_service(runtime, HAL_CONTROL, IHalControl)
    result = _thermal_dict(await hal.thermalStatus())
    binder = await defaultServiceManager(runtime).checkService(THERMAL_SERVICE)
    if binder is not None:
        result["thermal_service_status"] = int(await IThermalService.asInterface(binder).getCurrentThermalStatus())
    return result


async def set_thermal_severity(runtime: BinderRuntime, severity: int) -> dict[str, Any]:
    """Hold the die in ``severity``'s band until :func:`reset_thermal` (a thermal override)."""
    hal = await get_service(runtime, HAL_CONTROL, IHalControl)
    return _thermal_dict(await hal.overrideThermalSeverity(parse_severity(severity)))


async def reset_thermal(runtime: BinderRuntime) -> dict[str, Any]:
    """Release the override: the die heats and cools again from where it was held."""
    hal = await get_service(runtime, HAL_CONTROL, IHalControl)
    return _thermal_dict(await hal.resetThermalOverride())


# -- devices ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DeviceRow:
    """One NNAPI device as ``npuemu devices`` lists it."""

    name: str
    type: str
    version: str
    feature_level: int
    status: str


async def list_devices(runtime: BinderRuntime) -> list[DeviceRow]:
    """The NNAPI devices an app would enumerate: the driver's IDevice instances, then the CPU."""
    sm = defaultServiceManager(runtime)
    rows = []
    for service in await sm.listServices(15):
        if not service.startswith(IDEVICE_PREFIX):
            continue
        device = IDevice.asInterface(await sm.checkService(service))
        if device is None:
            continue  # gone between the list and the lookup
        dtype = int(await device.getType())
        status = int(await device.getStatus())
        rows.append(
            DeviceRow(
                name=service.removeprefix(IDEVICE_PREFIX),
                type=enum_name(DeviceType, dtype),
                version=await device.getVersionString(),
                feature_level=FEATURE_LEVEL,
                status=enum_name(DeviceStatus, status),
            )
        )
    cpu = referenceCpuDevice()  # what every app's NNAPI runtime adds in its own process
    rows.append(DeviceRow(cpu.name, cpu.type.name, cpu.version, cpu.featureLevel, DeviceStatus.AVAILABLE.name))
    return rows


# -- log --------------------------------------------------------------------------------


def read_log(runtime_dir: Path, log_filter: LogFilter = LogFilter()) -> list[LogLine]:
    """Every line the emulator's log still holds (its ring's two halves, oldest first), filtered."""
    path = RuntimeFiles(runtime_dir).log
    if not path.exists():
        raise EmulatorNotRunningError(f"no log in {runtime_dir}: no emulator has run there")
    text: list[str] = []
    for part in log_parts(path):
        try:
            with open(part, encoding="utf-8", errors="replace") as f:
                text.extend(f)
        except FileNotFoundError:
            continue  # the half before was never written, or rotated away just now
    return [line for line in parse_lines(text) if log_filter(line)]


async def follow_log(
    path: Path, *, offset: int = 0, log_filter: LogFilter = LogFilter(), poll: float = 0.1
) -> AsyncIterator[LogLine]:
    """Lines appended to ``path`` from byte ``offset`` on, as they come (``tail -f``).

    Follows the log across its ring's turns: when ``path`` becomes ``path.1`` (a new
    file at ``path``), the rest of the old one is read there, then the new one from 0.
    """
    pending = b""
    last: LogLine | None = None
    following: int | None = None  # the inode being read
    while True:
        chunk = b""
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                inode = st.st_ino
                if following is not None and (inode != following or st.st_size < offset):
                    # The ring turned (a file of the same number, shorter, turned twice).
                    chunk = _rest_of(log_parts(path)[0], following, offset)
                    offset = 0
                following = inode
                f.seek(offset)
                fresh = f.read()
                offset += len(fresh)
                chunk += fresh
        except FileNotFoundError:
            pass
        if chunk:
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                text = raw.decode("utf-8", "replace")
                line = parse_line(text)
                if line is None:  # a traceback's continuation belongs to the entry before it
                    if last is None or not text.strip():
                        continue
                    line = dataclasses.replace(last, message=text)
                else:
                    last = line
                if log_filter(line):
                    yield line
        await trio.sleep(poll)


def _rest_of(path: Path, inode: int, offset: int) -> bytes:
    """What file ``inode``, now at ``path`` (the ring turned), holds from ``offset`` on."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_ino != inode:
                return b""  # it turned twice between two polls: those lines are gone
            f.seek(offset)
            return f.read()
    except FileNotFoundError:
        return b""
