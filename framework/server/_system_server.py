"""system_server: the package, activity, thermal and npu services in one process.

``serve_system_server(runtime, ...)`` is the whole process minus its ``main``: it
installs the apps it is pointed at, starts the four services and registers them with
servicemanager (``package``, ``activity``, ``thermal``, ``npu``), then serves until
cancelled. ``python -m framework.server`` runs it as a real process (``npuemu boot``
starts that as uid 1000); tests run it in-process over a ``MemoryNetwork``.

How the services talk: through plain method calls, since they share a process (as
Android's do). The activity manager tells the npu service of every importance change
and death; the thermal service of every severity change the HAL reports; the package
manager answers permission and feature questions synchronously. Only the HAL and the
apps are reached over the binder.

Who may call what (the binder calling uid decides):

================================  ==========================================
``activity``: startApp, setImportance, killApp     system, root, shell
``activity``: waitForAppStart                      system, root, shell
``activity``: attachApplication, handleAppl...Crash  the app process itself (its own pid)
``activity``: getUidImportance                     anyone
``package``: installPackage                        system, root, shell
``package``: lookups                               anyone
``*.dump``                                         holders of DUMP (system, root, shell)
================================  ==========================================

Launching. The activity manager starts an app through a *launcher*: by default
``launch_process([python, -m, framework.app, CODE_PATH], uid=...)``, which registers
the child's pid with the servicemanager before it runs a line, so the app is its uid
from its first binder call. Tests pass an in-process launcher
(``framework.app.InProcessLauncher``) instead. A launcher is
``async launcher(info, runtime) -> process`` where the process has ``pid``,
``async wait()`` and ``kill()``.

Starting, as ``am start -W`` sees it. A launched process is *starting* until it calls
``attachApplication`` (its code loaded, its ``main`` at its first await: *up*), reports
an uncaught exception with ``handleApplicationCrash`` (*crashed*), or dies (*died*).
``waitForAppStart(pid, timeoutMs)`` returns that outcome as a ``WaitResult``; the
outcomes of the last 64 launches are kept, so a wait that begins after a fast crash
still learns of it. The crash's traceback is the app's own log (tag ``AndroidRuntime``,
its pid); the activity manager logs one line of it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import trio

from framework.binder import (
    AID_ROOT,
    AID_SHELL,
    AID_SYSTEM,
    CGROUP_ENV,
    FIRST_APPLICATION_UID,
    Binder,
    IllegalArgumentException,
    ProcessCgroup,
    IllegalStateException,
    RemoteException,
    SecurityException,
    defaultServiceManager,
    has_os_uids,
    isolation,
    kill_process_tree,
    kill_processes_of_uid,
    launch_process,
)
from interfaces.npuemu.hal import IHalListener
from interfaces.npuemu.server import IActivityManager, IPackageManager, IThermalService, WaitResult
from interfaces.services import ACTIVITY_SERVICE, PACKAGE_SERVICE, THERMAL_SERVICE

from ._activity import (
    IMPORTANCE_PERCEPTIBLE,
    ActivityState,
    ChangeKind,
    UidImportanceChange,
    importance_name,
    launch_importance,
)
from ._arbiter import DEFAULT_UNLOAD_TIMEOUT_S
from ._dump import fit_reply
from ._npu_service import NpuService, enforce_system_caller
from ._policy_api import NpuPolicy
from ._package import (
    FEATURE_NEURAL_PROCESSING_UNIT,
    MANIFEST_FILENAME,
    PERMISSION_DUMP,
    PackageManager,
    PackageManagerException,
)
from ._thermal import THERMAL_STATUS_NONE, check_severity, severity_name

__all__ = [
    "ANR_KILL_BELOW_IMPORTANCE",
    "ActivityManagerService",
    "AppProcess",
    "Launcher",
    "PackageManagerService",
    "SystemServer",
    "ThermalService",
    "launch_app_process",
    "serve_system_server",
]

_PRIVILEGED = (AID_ROOT, AID_SYSTEM, AID_SHELL)


class AppProcess(Protocol):
    """What a launcher returns: a started app process."""

    pid: int

    async def wait(self) -> Any: ...

    def kill(self) -> None: ...


Launcher = Callable[[Any, Any], Awaitable[AppProcess]]


def _enforce_privileged(what: str) -> int:
    uid = Binder.getCallingUid()
    if uid not in _PRIVILEGED:
        raise SecurityException(f"{what}: uid {uid} is not system, root or the shell")
    return uid


def _wants_json(args: Iterable[str]) -> bool:
    return "--json" in list(args)


# --------------------------------------------------------------------------- package


class PackageManagerService:
    """The ``package`` service over a ``PackageManager``."""

    log = logging.getLogger("PackageManager")

    def __init__(self, packages: PackageManager) -> None:
        self.packages = packages
        self.listeners: list[Callable[[], None]] = []
        self.refused: list[dict[str, str]] = []
        self.stub = self._make_stub()

    def install(self, location: str | os.PathLike) -> Any:
        """Install one app folder; a refusal is logged, remembered for dumpsys, and raised."""
        try:
            info = self.packages.installPackage(location)
        except PackageManagerException as exc:
            self.refused.append({"path": str(location), "error": exc.error_name, "message": exc.message})
            self.log.warning("install of %s refused: %s", location, exc.message)
            raise
        self.log.info("installed %s as uid %d (%s)", info.packageName, info.uid, info.codePath)
        for fn in self.listeners:
            fn()
        return info

    def scan(self, apps_dir: str | os.PathLike) -> list[Any]:
        """Install every ``*/AndroidManifest.xml`` under ``apps_dir``, in name order.

        A refused app (malformed or malicious manifest, a missing required feature) is
        logged and skipped: one bad app must not keep the device from booting.
        """
        root = Path(apps_dir)
        if not root.is_dir():
            raise IllegalArgumentException(f"apps directory {root} does not exist")
        installed = []
        for manifest in sorted(root.glob(f"*/{MANIFEST_FILENAME}")):
            try:
                installed.append(self.install(manifest.parent))
            except PackageManagerException:
                pass
        return installed

    def dump_data(self) -> dict[str, Any]:
        return {**self.packages.dump(), "refused": list(self.refused)}

    def dump_text(self, args: Iterable[str]) -> str:
        data = self.dump_data()
        if _wants_json(args):
            return json.dumps(data, indent=2, sort_keys=True) + "\n"
        out = [f"Device: SDK {data['sdk_int']}, features: {', '.join(data['system_features']) or 'none'}", "",
               f"Packages: {len(data['packages'])}"]
        for p in data["packages"]:
            npu = "npu" if any(f["name"] == FEATURE_NEURAL_PROCESSING_UNIT for f in p["reqFeatures"]) else "no npu feature"
            out.append(f"    {p['uid']:>6} {p['packageName']:<32} v{p['versionCode']} target {p['targetSdkVersion']}  {npu}")
            for perm in p["grantedPermissions"]:
                out.append(f"           granted {perm}")
        if data["refused"]:
            out += ["", f"Refused installs: {len(data['refused'])}"]
            out += [f"    {r['path']}: {r['error']}: {r['message']}" for r in data["refused"]]
        return "\n".join(out) + "\n"

    def _make_stub(self) -> Binder:
        svc = self

        class PackageManagerStub(IPackageManager.Stub):
            async def installPackage(self, dir: str) -> int:  # noqa: N802,A002
                _enforce_privileged("installPackage")
                return svc.install(dir).uid

            async def getPackagesForUid(self, uid: int) -> list[str]:  # noqa: N802
                return svc.packages.getPackagesForUid(uid)

            async def checkPermission(self, permission: str, uid: int) -> int:  # noqa: N802
                return int(svc.packages.checkPermission(permission, uid))

            async def getCodePath(self, packageName: str) -> str:  # noqa: N802,N803
                return svc.packages.getPackageInfo(packageName).codePath

            async def dump(self, args: list[str]) -> str:
                svc.packages.enforcePermission(PERMISSION_DUMP, Binder.getCallingUid(), "dumpsys package")
                return fit_reply(svc.dump_text(args), "dumpsys package")

        return PackageManagerStub()


# --------------------------------------------------------------------------- activity


@dataclass
class _RealApp:
    """An app process and, where there is one, its cgroup (everything it started is in it)."""

    proc: trio.Process
    cgroup: ProcessCgroup | None = None
    #: The app's OS uid where it has one of its own (uid or userns isolation), else None.
    os_uid: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def wait(self) -> int:
        return await self.proc.wait()

    def kill(self) -> None:
        """Kill every process the app started: its cgroup, else its process tree and, where
        it has an OS uid of its own, every process of that uid (each by pidfd)."""
        if self.cgroup is not None:
            self.cgroup.kill()
            return
        if self.proc.returncode is None:
            kill_process_tree(self.proc.pid)
        if self.os_uid is not None:  # a user namespace: no cgroup, but a uid that is the app's alone
            kill_processes_of_uid(self.os_uid)


async def launch_app_process(info: Any, runtime: Any) -> AppProcess:
    """The default launcher: ``python -m framework.app CODE_PATH`` as the app's uid.

    With uid isolation the process is that OS uid too; where init gave the boot a cgroup,
    the app gets its own (``uid_<uid>``, as Android's) before it runs a line, so nothing it
    starts outlives its kill or death.
    """
    boot_cgroup = os.environ.get(CGROUP_ENV)
    cgroup = ProcessCgroup(boot_cgroup).child(f"uid_{info.uid}") if boot_cgroup else None
    # An app's stdout joins system_server's stderr (its log): system_server's own stdout
    # is the "ready" line its parent reads, and nobody else drains it.
    proc = await launch_process(
        [sys.executable, "-m", "framework.app", info.codePath], uid=info.uid, runtime=runtime, stdout=sys.stderr.fileno(),
        os_uid=info.uid if has_os_uids() else None, cgroup=cgroup,
        # Its own uid cannot be expected to enter init's working directory: it starts in its code's.
        **({"cwd": info.codePath} if has_os_uids() else {}),
    )
    return _RealApp(proc, cgroup, info.uid if has_os_uids() else None)


#: An app that does not respond (the npu service's answer to it missed
#: ``CALLBACK_DEADLINE_S``) is killed, its whole cgroup as by ``am kill``, when it is less
#: important than this: ActivityManager kills a background app's ANR without asking ("bg
#: anr"). One the user is aware of (perceptible or above) is reported, not killed: Android
#: would show the user an ANR dialog, and nobody here answers one (a developer who stopped
#: a foreground app in a debugger keeps it).
ANR_KILL_BELOW_IMPORTANCE = IMPORTANCE_PERCEPTIBLE


class ActivityManagerService:
    """The ``activity`` service: launches apps, tracks importance, notices deaths."""

    log = logging.getLogger("ActivityManager")

    #: How many launches' outcomes ``waitForAppStart`` can still report.
    STARTS_KEPT = 64
    #: How many apps not responding ``dumpsys activity`` lists (the latest).
    ANRS_KEPT = 16

    def __init__(self, runtime: Any, packages: PackageManager, npu: NpuService, launcher: Launcher | None) -> None:
        self.runtime = runtime
        self.packages = packages
        self.npu = npu
        self.launcher = launcher or launch_app_process
        self.state = ActivityState()
        self._procs: dict[int, AppProcess] = {}
        self._starts: dict[int, _AppStart] = {}
        self._nursery: trio.Nursery | None = None
        self._events: list[dict[str, Any]] = []
        self._anrs: list[dict[str, Any]] = []
        npu.add_not_responding_listener(self.not_responding)
        self.stub = self._make_stub()

    async def serve(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started(self)
            try:
                await trio.sleep_forever()
            finally:
                for proc in self._procs.values():  # system_server going down takes its apps with it
                    try:
                        proc.kill()
                    except (ProcessLookupError, OSError):
                        pass

    async def start_app(self, package: str, importance: int | str | None = None) -> int:
        """Start ``package`` (installed) and return its pid."""
        info = self.packages.getPackageInfo(package)
        level = launch_importance(info.metaData) if importance in (None, 0) else importance
        if self.state.is_running(info.uid):
            raise IllegalStateException(f"{package} is already running as pid {self.state.pid_of(info.uid)}")
        if self._nursery is None:
            raise IllegalStateException("the activity manager is not serving")
        proc = await self.launcher(info, self.runtime)
        try:
            changes = self.state.process_started(info.uid, package, proc.pid, level)
        except RemoteException:
            proc.kill()
            raise
        self._procs[proc.pid] = proc
        self._starts.pop(proc.pid, None)  # a reused pid: the old record is another process's
        self._starts[proc.pid] = _AppStart(package, proc.pid, trio.current_time())
        while len(self._starts) > self.STARTS_KEPT:
            del self._starts[next(iter(self._starts))]
        self._nursery.start_soon(self._watch, proc)
        self.log.info("Start proc %d:%s/u0a%d for npuemu.launch (importance %s)",
                      proc.pid, package, info.uid - FIRST_APPLICATION_UID, importance_name(changes[0].new))
        self._forward(changes)
        return proc.pid

    def set_importance(self, package: str, importance: int | str) -> None:
        changes = self.state.set_importance(package, importance)
        for c in changes:
            self.log.info("%s (uid %d): importance %s -> %s", c.package, c.uid, importance_name(c.old), importance_name(c.new))
        self._forward(changes)

    def kill(self, package: str) -> None:
        pid = self.state.pid_of(package)
        if pid is None:
            info = self.packages.getPackageInfo(package)  # unknown package: NameNotFoundException
            raise IllegalStateException(f"{info.packageName} is not running")
        self.log.info("Killing %d:%s: am kill", pid, package)
        self._procs[pid].kill()

    def not_responding(self, uid: int, reason: str) -> None:
        """Uid ``uid``'s process did not respond (``reason``): kill it if it is in the background."""
        proc_info = next((p for p in self.state.getRunningAppProcesses() if p.uid == uid), None)
        if proc_info is None or proc_info.pid not in self._procs:
            return  # gone already, or no process this manager launched
        pid, package, importance = proc_info.pid, proc_info.processName, proc_info.importance
        killed = importance > ANR_KILL_BELOW_IMPORTANCE
        self._anrs.append({"pid": pid, "uid": uid, "package": package, "importance": importance_name(importance),
                           "reason": reason, "killed": killed})
        del self._anrs[:-self.ANRS_KEPT]
        if killed:
            self.log.warning("Killing %d:%s/u0a%d (importance %s): bg anr: %s", pid, package,
                             uid - FIRST_APPLICATION_UID, importance_name(importance), reason)
            self._procs[pid].kill()
        else:
            self.log.error("ANR in %s (pid %d, importance %s): %s; not killed (the user would be asked)", package, pid,
                           importance_name(importance), reason)

    def attached(self, pid: int) -> None:
        """``attachApplication`` from process ``pid``: it is up."""
        start = self._own_start(pid, "attachApplication")
        if start.settle(WaitResult.START_SUCCESS):
            self.log.info("Displayed %s (pid %d): +%d ms", start.package, pid, start.total_ms())

    def crashed(self, pid: int, crash: Any) -> None:
        """``handleApplicationCrash`` from process ``pid``."""
        start = self._own_start(pid, "handleApplicationCrash")
        when = "at start" if start.settle(WaitResult.START_CRASHED, crash=crash) else "while running"
        start.crash = crash
        where = f" ({crash.throwFileName}:{crash.throwLineNumber})" if crash.throwFileName else ""
        self.log.warning("Process %s (pid %d) crashed %s: %s: %s%s", start.package, pid, when,
                         crash.exceptionClassName, crash.exceptionMessage, where)

    async def wait_for_start(self, pid: int, timeout_ms: int) -> Any:
        """The outcome of process ``pid``'s start as a ``WaitResult``, waiting up to ``timeout_ms``."""
        start = self._starts.get(pid)
        if start is None:
            raise IllegalArgumentException(f"pid {pid} is no app process the activity manager launched recently")
        if timeout_ms < 0:
            raise IllegalArgumentException(f"a timeout is 0 ms or more, not {timeout_ms}")
        with trio.move_on_after(timeout_ms / 1000):
            await start.settled.wait()
        return _wait_result(start)

    def _own_start(self, pid: int, what: str) -> _AppStart:
        start = self._starts.get(pid)
        if start is None or pid not in self._procs:
            raise SecurityException(f"{what}: pid {pid} is no app process this activity manager launched")
        return start

    async def _watch(self, proc: AppProcess) -> None:
        status = await proc.wait()
        try:
            proc.kill()  # what the app started dies with it
        except OSError as exc:
            self.log.warning("killing what pid %d left failed: %s", proc.pid, exc)
        start = self._starts.get(proc.pid)
        if start is not None:
            start.exit_status = status if isinstance(status, int) else 0
            start.settle(WaitResult.START_DIED)
        self._procs.pop(proc.pid, None)
        changes = self.state.process_died(proc.pid)
        for c in changes:
            self.log.info("Process %s (pid %d) has died (%s)", c.package, proc.pid, status)
        self._forward(changes)

    def _forward(self, changes: list[UidImportanceChange]) -> None:
        for c in changes:
            self._events.append(c.to_dict())
            del self._events[:-64]
            self.npu.importance_changed(c.uid, c.new)
            if c.kind is ChangeKind.DIED:
                self.npu.app_died(c.uid, "the activity manager saw its process die")

    def dump_text(self, args: Iterable[str]) -> str:
        data = {**self.state.dump(), "recent_changes": list(self._events), "not_responding": list(self._anrs),
                "isolation": isolation()}
        if _wants_json(args):
            return json.dumps(data, indent=2, sort_keys=True) + "\n"
        out = [f"Isolation: {data['isolation']}", "",
               f"Running processes: {len(data['processes'])} (most important first)"]
        for p in data["processes"]:
            out.append(f"    {p['importance']:>5} {p['importance_name']:<19} pid {p['pid']:<7} uid {p['uid']:<6} {p['package']}")
        if data["gone"]:
            out += ["", "Gone:"]
            out += [f"    uid {p['uid']:<6} {p['package']:<32} starts {p['starts']} deaths {p['deaths']}" for p in data["gone"]]
        if data["not_responding"]:
            out += ["", "Not responding (latest last):"]
            out += [f"    pid {a['pid']:<7} uid {a['uid']:<6} {a['package']:<32} {a['importance']:<19} "
                    f"{'killed (bg anr)' if a['killed'] else 'reported'}: {a['reason']}" for a in data["not_responding"]]
        return "\n".join(out) + "\n"

    def _make_stub(self) -> Binder:
        svc = self

        class ActivityManagerStub(IActivityManager.Stub):
            async def startApp(self, packageName: str, importance: int) -> int:  # noqa: N802,N803
                _enforce_privileged("startApp")
                return await svc.start_app(packageName, importance or None)

            async def setImportance(self, packageName: str, importance: int) -> None:  # noqa: N802,N803
                _enforce_privileged("setImportance")
                svc.set_importance(packageName, importance)

            async def killApp(self, packageName: str) -> None:  # noqa: N802,N803
                _enforce_privileged("killApp")
                svc.kill(packageName)

            async def getUidImportance(self, uid: int) -> int:  # noqa: N802
                return svc.state.getUidImportance(uid)

            async def dump(self, args: list[str]) -> str:
                svc.packages.enforcePermission(PERMISSION_DUMP, Binder.getCallingUid(), "dumpsys activity")
                return fit_reply(svc.dump_text(args), "dumpsys activity")

            async def attachApplication(self) -> None:  # noqa: N802
                svc.attached(Binder.getCallingPid())

            async def handleApplicationCrash(self, crashInfo: Any) -> None:  # noqa: N802,N803
                svc.crashed(Binder.getCallingPid(), crashInfo)

            async def waitForAppStart(self, pid: int, timeoutMs: int) -> Any:  # noqa: N802,N803
                _enforce_privileged("waitForAppStart")
                return await svc.wait_for_start(pid, timeoutMs)

        return ActivityManagerStub()


@dataclass
class _AppStart:
    """One launch's way to up, crashed or died (WaitResult's START_* codes)."""

    package: str
    pid: int
    launched_at: float
    result: int | None = None
    settled_at: float | None = None
    crash: Any = None
    exit_status: int = 0
    settled: trio.Event = dataclasses.field(default_factory=trio.Event)

    def settle(self, result: int, *, crash: Any = None) -> bool:
        """Record the outcome if none is yet; whether this call did."""
        if self.result is not None:
            return False
        self.result, self.crash, self.settled_at = result, crash, trio.current_time()
        self.settled.set()
        return True

    def total_ms(self) -> int:
        end = self.settled_at if self.settled_at is not None else trio.current_time()
        return round((end - self.launched_at) * 1000)


def _wait_result(start: _AppStart) -> Any:
    result = WaitResult.START_TIMED_OUT if start.result is None else start.result
    return WaitResult(result=result, pid=start.pid, totalTimeMs=start.total_ms(),
                      exitStatus=start.exit_status if start.result is not None else 0, crashInfo=start.crash)


# --------------------------------------------------------------------------- thermal


#: How long ``dumpsys thermal`` waits for the HAL to say whether an override holds the die.
_DUMP_ASK_HAL_S = 1.0


class ThermalService:
    """The ``thermal`` service: follows the HAL die's severity, tells the npu service."""

    log = logging.getLogger("ThermalService")

    def __init__(self, npu: NpuService, packages: PackageManager) -> None:
        self.npu = npu
        self.packages = packages
        self.severity = THERMAL_STATUS_NONE
        self.temperature: float | None = None
        self.changes: list[dict[str, Any]] = []
        self.memory: dict[int, dict[str, Any]] = {}
        svc = self

        class Listener(IHalListener.Stub):
            async def onTransact(self, code: int, data: Any, ctx: Any) -> Any:  # noqa: N802
                enforce_system_caller("IHalListener")  # heat and memory come from the HAL only
                return await super().onTransact(code, data, ctx)

            async def onThermalSeverityChanged(self, severity: int, temperatureC: float) -> None:  # noqa: N802,N803
                svc.follow(severity, temperatureC)

            async def onMemoryPressure(self, pressure: Any) -> None:  # noqa: N802
                svc.memory[pressure.hwDevice] = {
                    "deviceNumber": pressure.deviceNumber, "weightMemoryUsed": pressure.weightMemoryUsed,
                    "weightMemoryTotal": pressure.weightMemoryTotal, "sramUsed": pressure.sramUsed,
                    "sramTotal": pressure.sramTotal, "refused": pressure.refused,
                }
                if pressure.refused:
                    svc.log.warning("device %d refused a load: %s", pressure.deviceNumber, pressure.refused)

        self.listener = Listener()
        self.stub = self._make_stub()
        self.control: Any = None  # the HAL's IHalControl, once connected
        npu.add_hal_listener(self.hal_connected)

    async def hal_connected(self, control: Any) -> None:
        self.control = control
        await control.registerListener(self.listener)
        status = await control.thermalStatus()
        self.follow(status.severity, status.temperatureC)

    def follow(self, severity: int, temperature: float | None = None) -> None:
        try:
            check_severity(severity)
        except IllegalArgumentException:
            self.log.error("the HAL reported an impossible severity %r; ignored", severity)
            return
        self.temperature = temperature
        if severity != self.severity:
            self.log.info("thermal status %s -> %s (%.1f C)", severity_name(self.severity),
                          severity_name(severity), temperature if temperature is not None else float("nan"))
            self.changes.append({"from": self.severity, "to": severity, "temperatureC": temperature, "at": trio.current_time()})
            del self.changes[:-32]
            self.severity = severity
        self.npu.thermal_changed(severity)

    async def status_override(self) -> bool | None:
        """Whether an override (``npuemu thermal set``) holds the die; None while the HAL
        cannot say (not connected, or gone)."""
        if self.control is None:
            return None
        with trio.move_on_after(_DUMP_ASK_HAL_S):  # a hung HAL must not hang dumpsys
            try:
                return bool((await self.control.thermalStatus()).overridden)
            except (RemoteException, trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        return None

    def dump_text(self, args: Iterable[str], status_override: bool | None = None) -> str:
        data = {"severity": self.severity, "name": severity_name(self.severity), "temperatureC": self.temperature,
                "statusOverride": status_override, "changes": self.changes, "memory": self.memory}
        if _wants_json(args):
            return json.dumps(data, indent=2, sort_keys=True) + "\n"
        temp = "unknown" if self.temperature is None else f"{self.temperature:.1f} C"
        held = "unknown (the HAL cannot say)" if status_override is None else str(status_override).lower()
        out = [f"Thermal status: {data['name']} ({self.severity}), die {temp}",
               f"IsStatusOverride: {held}", f"Changes: {len(self.changes)}"]
        out += [f"    {severity_name(c['from'])} -> {severity_name(c['to'])} at t={c['at']:.3f}" for c in self.changes]
        for hw, m in sorted(self.memory.items()):
            out.append(f"Memory hw {hw}: weights {m['weightMemoryUsed']}/{m['weightMemoryTotal']}  sram {m['sramUsed']}/{m['sramTotal']}")
        return "\n".join(out) + "\n"

    def _make_stub(self) -> Binder:
        svc = self

        class ThermalStub(IThermalService.Stub):
            async def getCurrentThermalStatus(self) -> int:  # noqa: N802
                return svc.severity

            async def dump(self, args: list[str]) -> str:
                svc.packages.enforcePermission(PERMISSION_DUMP, Binder.getCallingUid(), "dumpsys thermal")
                return fit_reply(svc.dump_text(args, await svc.status_override()), "dumpsys thermal")

        return ThermalStub()


# --------------------------------------------------------------------------- the process


@dataclass
class SystemServer:
    """What ``serve_system_server`` hands its starter: the services, for tests and tools."""

    runtime: Any
    packages: PackageManagerService
    activity: ActivityManagerService
    thermal: ThermalService
    npu: NpuService


async def serve_system_server(
    runtime: Any,
    *,
    hal_timeout: float = 10.0,
    unload_timeout: float = DEFAULT_UNLOAD_TIMEOUT_S,
    block_missing_feature: bool = False,
    apps_dir: str | os.PathLike | None = None,
    system_features: Iterable[str] = (FEATURE_NEURAL_PROCESSING_UNIT,),
    launcher: Launcher | None = None,
    npu_policy: NpuPolicy | None = None,
    data_dir: str | os.PathLike | None = None,
    task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve system_server's services on ``runtime`` (uid 1000) until cancelled.

    ``data_dir``: where what survives a reboot is kept (``packages.xml``: the app uids);
    None keeps nothing.

    ``apps_dir``: install every app folder in it first (refusals are logged).
    ``hal_timeout``: how long the npu service waits for the HAL before logging that it
    still waits. ``npu_policy``: the npu service's load policy at boot (the status quo if
    None; ``_policy_api.load_policy`` loads a user's). ``task_status.started()`` gets the :class:`SystemServer` once every
    service is registered.
    """
    packages = PackageManager(system_features, settings=Path(data_dir) / "packages.xml" if data_dir else None)
    pms = PackageManagerService(packages)
    if apps_dir is not None:
        pms.scan(apps_dir)
    npu = NpuService(
        runtime, packages, unload_timeout=unload_timeout, block_missing_feature=block_missing_feature,
        hal_timeout=hal_timeout, policy=npu_policy,
    )
    pms.listeners.append(npu.packages_changed)
    thermal = ThermalService(npu, packages)
    async with trio.open_nursery() as nursery:
        activity = ActivityManagerService(runtime, packages, npu, launcher)
        await nursery.start(activity.serve)
        sm = defaultServiceManager(runtime)
        await sm.addService(PACKAGE_SERVICE, pms.stub, False, 8)
        await sm.addService(ACTIVITY_SERVICE, activity.stub, False, 8)
        await sm.addService(THERMAL_SERVICE, thermal.stub, False, 8)
        await nursery.start(npu.serve)
        logging.getLogger("SystemServer").info(
            "system_server pid %d: package, activity, thermal, npu registered (%d apps installed)",
            runtime.pid, len(packages.getInstalledPackages()),
        )
        task_status.started(SystemServer(runtime, pms, activity, thermal, npu))
        await trio.sleep_forever()

