"""Booting the stack as real processes: init's job.

:func:`boot_processes` plays init, as ``npuemu boot`` does; it is the process form of
``open_stack(processes=True)`` (``_stack``), the one entry point for both forms. In order:

1. It takes the runtime directory (0700; root's 1733 under uid isolation) and refuses
   one where a live init already runs, or where a process of a dead one still serves
   (two emulators never share a directory); what a dead emulator left there
   (``init.json``, the shell token, sockets) it removes. It decides the isolation: as
   root (``userns``: root of a user namespace, which ``npuemu boot`` enters for a user
   who is not root, see ``_userns``), where every uid can reach the code and the directory, each process is its own
   OS user (``framework.binder``'s ``_isolation``: the servicemanager and the HAL start
   as the system user, system_server becomes it, the apps it launches are their
   uids); else every process is init's user and the log says why (``isolation:
   nominal``). As root it makes the boot a cgroup (``npuemu-<boot id>``), which every
   process of the stack is put in before it runs.
2. It starts the servicemanager. The servicemanager counts its parent as init, uid 0,
   so this process becomes init.
3. It launches the vendor HAL (``python -m npuhal``) and system_server (``python -m
   framework.server``; not with ``system_server=False``: a HAL of one's own, as
   ``npuemu vts`` and the HAL's process tests use) at once, as uid 1000. They
   start with the servicemanager, held (``spawn_held``): each imports meanwhile
   and waits inside its ``open_binder_runtime`` until init has registered its pid,
   so none connects before the servicemanager vouches for it. Init then waits until each
   has registered every service it owns. A child that dies first, or that does not
   register within ``boot_timeout``, fails the boot with a :class:`BootError`
   quoting the last lines it printed.
4. It writes ``init.json`` (pids, driver, speed) so that ``npuemu shutdown`` and
   the shell commands find it, starts the trace recorder, and yields an
   :class:`Emulator`.

While the emulator runs, init watches its children (``_supervise``): a HAL that
dies is launched again (unless ``BootConfig.restart_hal`` is off), as Android's init
restarts a crashed HAL service, and system_server reconnects to it; any death is an
error in the log with the process's last output. ``Emulator.restart_hal`` restarts it
on request (vts, after a check that crashed or hung the driver). A servicemanager that
dies is started again too, and then the HAL and system_server, which the new one does
not know (``_supervise_servicemanager``, as the servicemanager's ``onrestart`` lines).

Every child's output is read by init and appended to the runtime directory's
``logcat`` ring (256 KiB on disk, see ``_logcat``), adopted into logcat form where it
is not already; a full disk drops lines, never a process. Children run in their own process groups, so a Ctrl-C at the terminal
reaches only init, which then shuts the stack down in order: system_server (and, in
its process group, the apps the activity manager launched), the HAL, the
servicemanager; each gets SIGTERM, then SIGKILL after a grace period, each whatever
happened to the one before. However the boot or the run ends (a failed stage, a
cancellation, a stop signal at any moment of the boot), this shutdown runs for every
process started so far; then init removes the live files and keeps the records (or,
in a temporary runtime directory of its own, removes the directory).

Every process of the stack carries the boot's id in its environment
(``NPUEMU_BOOT_ID``, inherited by the apps). What still carries it after the orderly
stop is killed; and there is no parent-death signal (trio forks from a worker thread,
and the kernel sends that signal when the forking *thread* exits), so init starts a
dead-man switch first (``_reaper``): a small process holding one end of a socket, on
which init sends it a pidfd of each process it starts; unless init stands it down once
nothing is left, it kills those, the boot's cgroup and every process carrying the id.
(``npuemu shutdown`` does the same from a dead init's ``init.json``, should even the
reaper be gone.) Processes are killed through pidfds and the cgroup, never by a
remembered pid or group number: pids are reused within minutes on a busy machine.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

import interfaces.services as services
from framework.binder import (
    AID_SYSTEM,
    CGROUP_ENV,
    ISOLATION_ENV,
    RUNTIME_DIR_ENV,
    SERVICEMANAGER_ADDRESS,
    SHARED_RUNTIME_DIR_MODE,
    BinderRuntime,
    ProcessCgroup,
    RemoteException,
    UnixNetwork,
    defaultServiceManager,
    has_os_uids,
    launch_process,
    open_binder_runtime,
    os_credentials,
    single_exception,
    spawn_held,
)

from ._errors import BootError, EmulatorAlreadyRunningError
from ._logcat import LOGCAT_LINE_MAX, LogRing, adopt_line, format_line
from ._paths import RuntimeFiles, open_own, process_start, resolve_runtime_dir
from ._reaper import BOOT_ID_ENV, kill_boot, remove_cgroup
from ._userns import in_user_namespace, userns_check

__all__ = [
    "HAL_SERVICES",
    "grant_search",
    "SYSTEM_SERVER_SERVICES",
    "BootConfig",
    "Emulator",
    "boot_processes",
]

#: What the HAL registers before the stack counts as up (its IDevice instances follow
#: from the driver and are not waited for by name).
HAL_SERVICES = services.HAL_SERVICES
#: What system_server registers.
SYSTEM_SERVER_SERVICES = services.SYSTEM_SERVER_SERVICES

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_DUMP_FLAG_PRIORITY_ALL = 15  # IServiceManager's CRITICAL | HIGH | NORMAL | DEFAULT
_TAIL_LINES = 30


@dataclasses.dataclass(frozen=True)
class BootConfig:
    """How to boot. Every field has the default ``npuemu boot`` uses.

    ``driver`` is a driver ``.so`` (None: the reference driver built into the HAL);
    ``speed`` scales emulated time against wall time on the real clock; ``clock`` is
    ``real`` or ``virtual``; ``boot_timeout`` bounds each stage's registration;
    ``log_level`` is what each process of the stack logs from (``DEBUG`` to ``ERROR``);
    ``extra_env`` is added to every child's environment; ``record`` starts the trace
    recorder in init (``npuemu trace`` / ``plot`` read what it writes);
    ``restart_hal`` has init launch a HAL that died again (off: it stays dead until
    ``Emulator.restart_hal``, as vts and the death tests want). ``isolation`` is
    ``uid`` (every process its own OS uid: init must be root and the code and the
    runtime directory reachable by other uids; a BootError says why not), ``nominal``
    (every process is init's user), or ``auto`` (``uid`` where it can be had).
    """

    driver: str | None = None
    speed: float = 1.0
    clock: str = "real"
    boot_timeout: float = 15.0
    log_level: str = "INFO"
    extra_env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    record: bool = True
    #: Replace a stage's command line (``"hal"`` or ``"system_server"``): a test's
    #: stand-in, or a HAL built elsewhere. The runtime directory is in the environment.
    commands: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    #: More options for ``python -m framework.server`` (``--block-missing-feature``...).
    system_server_args: Sequence[str] = ()
    #: More options for ``python -m npuhal`` (``--log hal.log``...).
    hal_args: Sequence[str] = ()
    restart_hal: bool = True
    isolation: str = "auto"
    #: Forget what earlier boots kept (the app uids), as the emulator's ``-wipe-data``.
    wipe_data: bool = False

    def __post_init__(self) -> None:
        if self.isolation not in ("auto", "uid", "nominal"):
            raise ValueError(f"isolation must be 'auto', 'uid' or 'nominal', not {self.isolation!r}")
        if not (isinstance(self.speed, (int, float)) and math.isfinite(self.speed) and self.speed > 0):
            raise ValueError(f"speed must be a positive number, not {self.speed!r}")
        if self.clock not in ("real", "virtual"):
            raise ValueError(f"clock must be 'real' or 'virtual', not {self.clock!r}")
        if self.boot_timeout <= 0:
            raise ValueError(f"boot_timeout must be positive, not {self.boot_timeout!r}")
        if self.log_level not in _LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(_LOG_LEVELS)}, not {self.log_level!r}")
        if self.driver is not None:
            path = Path(self.driver)
            if not path.is_file():
                raise FileNotFoundError(f"no driver at {self.driver}")
            object.__setattr__(self, "driver", os.fspath(path.absolute()))

    def hal_argv(self, runtime_dir: Path) -> list[str]:
        if "hal" in self.commands:
            return list(self.commands["hal"])
        argv = [sys.executable, "-m", "npuhal", "--runtime-dir", os.fspath(runtime_dir), "--speed", repr(float(self.speed))]
        if self.clock != "real":
            argv += ["--clock", self.clock]
        if self.driver:
            argv += ["--driver", self.driver]
        return [*argv, "--log-level", self.log_level, *self.hal_args]

    def system_server_argv(self, runtime_dir: Path) -> list[str]:
        if "system_server" in self.commands:
            return list(self.commands["system_server"])
        return [sys.executable, "-m", "framework.server", "--runtime-dir", os.fspath(runtime_dir),
                "--data-dir", os.fspath(RuntimeFiles(runtime_dir).data), "--log-level", self.log_level,
                *self.system_server_args]

    def servicemanager_argv(self, runtime_dir: Path, listen_fd: int) -> list[str]:
        return [sys.executable, "-m", "framework.binder.servicemanager", "--runtime-dir", os.fspath(runtime_dir),
                "--log-level", self.log_level, "--listen-fd", str(listen_fd)]


class _Log:
    """init's end of the log: its own lines and its children's, one write each, into a
    bounded ring (``LogRing``: logd's 256 KiB; a full disk drops lines, never init)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ring = LogRing(path)

    def write_raw(self, line: str) -> None:
        self.ring.write(line)

    def __call__(self, level: str, message: str, tag: str = "init") -> None:
        self.write_raw(format_line(os.getpid(), os.getpid(), level, tag, message))

    def close(self) -> None:
        self.ring.close()


@dataclasses.dataclass
class _Child:
    name: str
    process: trio.Process
    tail: collections.deque[str] = dataclasses.field(default_factory=lambda: collections.deque(maxlen=_TAIL_LINES))
    #: Set when init has started this child's successor (a restarted HAL).
    replaced: trio.Event = dataclasses.field(default_factory=trio.Event)

    def describe_exit(self) -> str:
        rc = self.process.returncode
        if rc is None:
            return "is still running"
        if rc < 0:
            try:
                return f"was killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"was killed by signal {-rc}"
        return f"exited with status {rc}"

    def tail_text(self) -> str:
        return "\n".join(f"    {line}" for line in self.tail) or "    (it printed nothing)"


class Emulator:
    """A booted stack of real processes, as ``open_stack(processes=True)`` yields it.

    ``runtime`` is init's binder runtime (uid 0): what init may do, this may do
    (launch processes, call system-only HAL methods). ``pids`` maps
    ``servicemanager``, ``hal`` and ``system_server`` (if it runs) to their pids;
    ``env`` is the environment each of them started with (a client launched with it
    finds the runtime directory and goes down with the stack).
    """

    def __init__(self, runtime_dir: Path, config: BootConfig, log: _Log) -> None:
        self.runtime_dir = runtime_dir
        self.files = RuntimeFiles(runtime_dir)
        self.config = config
        self.runtime: BinderRuntime | None = None
        self.boot_seconds: float = math.nan
        self._log = log
        self._children: dict[str, _Child] = {}
        #: How many times init has restarted the HAL (0 until it first crashes).
        self.hal_generation = 0
        #: Carried by every process of this boot in its environment (``NPUEMU_BOOT_ID``):
        #: how the reaper, shutdown and ``npuemu shutdown`` find them all (see ``_reaper``).
        self.boot_id = secrets.token_hex(8)
        #: ``uid`` or ``nominal: <why>`` (see ``framework.binder.isolation``).
        self.isolation = "nominal: not booted"
        #: The boot's cgroup (every process of the stack is in it), None where there is none.
        self.cgroup: ProcessCgroup | None = None
        self._reaper: subprocess.Popen | None = None
        self._reaper_channel: socket.socket | None = None
        #: The servicemanager's listening socket: init binds it once and hands it to each
        #: servicemanager it starts (as Android's init creates a service's socket), so the
        #: name is never free for another process to take, not even during a restart.
        self._servicemanager_socket: socket.socket | None = None
        self.booted_at = time.time()
        self.env: dict[str, str] = {}
        self._grace = 3.0
        #: name -> (argv, services) of each stage init launched (how to launch it again).
        self._stages: dict[str, tuple[list[str], tuple[str, ...]]] = {}
        self._helpers: trio.Nursery | None = None
        #: Held while a stage is launched again: init's supervisor and a restart on request take turns.
        self._relaunching = trio.Lock()

    def __repr__(self) -> str:
        return f"<Emulator {self.runtime_dir} pids={self.pids}>"

    @property
    def pids(self) -> dict[str, int]:
        return {name: child.process.pid for name, child in self._children.items()}

    def log(self, level: str, message: str, tag: str = "init") -> None:
        """Append one of init's own lines to the emulator's log."""
        self._log(level, message, tag)

    # -- the dead-man switch (see _reaper) ------------------------------------------

    def _start_reaper(self, env: Mapping[str, str]) -> None:
        self._reaper_channel, read_end = socket.socketpair()  # both non-inheritable: no child holds it open
        env = {k: v for k, v in env.items() if k != BOOT_ID_ENV}  # it is not one of the stack
        try:
            self._reaper = subprocess.Popen(
                # By path: a few ms to start, where importing the package would take 0.4 s.
                [sys.executable, os.fspath(Path(__file__).with_name("_reaper.py")), self.boot_id, str(read_end.fileno()),
                 *([os.fspath(self.cgroup.path)] if self.cgroup else [])],
                pass_fds=(read_end.fileno(),), env=env, stdin=subprocess.DEVNULL,
                start_new_session=True,  # it must outlive a killed init's process group
            )
        finally:
            read_end.close()

    def _track(self, pid: int) -> None:
        """Give the reaper a pidfd of process ``pid``, just started: what it kills if init dies."""
        if self._reaper_channel is None:
            return
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return  # it has exited already
        try:
            socket.send_fds(self._reaper_channel, [b"p"], [pidfd])
        except OSError:
            pass  # no reaper to tell (it died): shutdown's own kill still finds the process
        finally:
            os.close(pidfd)

    def _stop_reaper(self, stand_down: bool) -> None:
        """Close the reaper's socket: with ``q`` (everything is stopped) or without (kill the rest)."""
        if self._reaper_channel is not None:
            if stand_down:
                try:
                    self._reaper_channel.sendall(b"q\n")
                except OSError:
                    pass
            self._reaper_channel.close()
            self._reaper_channel = None
        if self._reaper is not None:
            try:
                self._reaper.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._reaper.kill()
                self._reaper.wait()
            self._reaper = None

    def mark(self, label: str) -> None:
        """A moment worth seeing in the trace and the plot ("thermal spike"), now."""
        import json

        line = json.dumps({"type": "mark", "label": str(label), "wall_ns": time.monotonic_ns()})
        try:
            fd = open_own(self.files.trace_events, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                os.write(fd, (line + "\n").encode())  # one write: the recorder appends here too
            finally:
                os.close(fd)
        except OSError as exc:  # a full disk costs the mark, not the caller
            self.log("W", f"mark {label!r} not recorded: {exc.strerror}")

    def process(self, name: str) -> trio.Process:
        """The trio.Process of ``servicemanager``, ``hal`` or ``system_server``."""
        return self._children[name].process

    def kill(self, name: str = "hal", sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (SIGKILL by default) to a process of the stack; does not wait."""
        proc = self._children[name].process
        if proc.returncode is None:
            proc.send_signal(sig)

    async def restart_hal(self) -> None:
        """Stop the HAL (SIGTERM, SIGKILL after the grace period) and launch a fresh one.

        Returns once the new HAL has registered its services; :class:`BootError` (with
        its last output) if it dies first or is late. A HAL init is restarting by itself
        (it had died) is waited for, then restarted all the same.
        """
        async with self._relaunching:
            await self._stop(self._children["hal"], self._grace)
            await self._relaunch("hal")

    async def _relaunch(self, name: str) -> None:
        """Launch stage ``name`` again (its predecessor has exited) and wait until it registered."""
        assert self._helpers is not None and self.runtime is not None
        argv, services = self._stages[name]
        proc = await launch_process(argv, uid=AID_SYSTEM, env=self.env, runtime=self.runtime, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True, **self._system_identity(name))
        old, fresh = self._children[name], _Child(name, proc)
        self._children[name] = fresh
        self._track(proc.pid)
        old.replaced.set()
        self._helpers.start_soon(self._pump, fresh, proc.stdout)
        if name == "hal":
            self.hal_generation += 1
        self._write_state()
        await self._wait_registered(fresh, services, self.config.boot_timeout)
        self.log("I", f"{name} (pid {proc.pid}) is back: {', '.join(services)}")

    async def _spawn_servicemanager(self) -> _Child:
        """Start a servicemanager (its parent, this process, is init to it); not waited for."""
        identity = self._system_identity("servicemanager")
        if self._servicemanager_socket is None:
            self._servicemanager_socket = UnixNetwork(self.runtime_dir).bind(SERVICEMANAGER_ADDRESS)
        fd = self._servicemanager_socket.fileno()
        sm = _Child(
            "servicemanager",
            await trio.lowlevel.open_process(
                self.config.servicemanager_argv(self.runtime_dir, fd),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                start_new_session=True,
                pass_fds=(fd,),
                **(os_credentials(identity["os_uid"]) if "os_uid" in identity else {}),
            ),
        )
        self._children["servicemanager"] = sm
        self._track(sm.process.pid)
        if identity["cgroup"] is not None:
            identity["cgroup"].add(sm.process.pid)  # (it starts nothing of its own)
        return sm

    async def _restart_servicemanager(self) -> None:
        """The servicemanager died: start a new one and restart what depends on it.

        As the servicemanager's ``onrestart restart ...`` lines in Android's init: the
        new one knows no process (pid -> uid) and no service, so the HAL and
        system_server (and with it the apps) are stopped, then launched again once it
        serves, and register their services anew. Init's own runtime reaches the new
        servicemanager at the next call (the binder forgets a dead servicemanager).
        """
        assert self._helpers is not None
        for name in ("system_server", "hal"):
            if name in self._children:
                await self._stop(self._children[name], self._grace)
        sm = await self._spawn_servicemanager()
        await _wait_ready(sm, self._helpers, self, self.config.boot_timeout)
        self._write_state()
        for name in ("hal", "system_server"):
            if name in self._stages:
                await self._relaunch(name)

    def _write_state(self) -> None:
        """``init.json`` again (new pids); on a full disk the old one stays, with a warning."""
        try:
            self.files.write_state(self.state())
        except OSError as exc:
            self.log("W", f"init.json not updated ({exc.strerror}): shell commands may name old pids")

    def _system_identity(self, name: str) -> dict[str, Any]:
        """How init starts stage ``name``: its OS uid and cgroup (see ``framework.binder.isolation``).

        With uid isolation the servicemanager and the HAL start as the system user;
        system_server starts as root and becomes the system user itself, keeping the
        capabilities that launching apps takes.
        """
        identity: dict[str, Any] = {"cgroup": self._system_cgroup}
        if has_os_uids(self.isolation) and name != "system_server":
            identity["os_uid"] = AID_SYSTEM
        return identity

    @property
    def _system_cgroup(self) -> ProcessCgroup | None:
        return self.cgroup.child("system") if self.cgroup else None

    async def list_services(self) -> list[str]:
        assert self.runtime is not None
        return list(await defaultServiceManager(self.runtime).listServices(_DUMP_FLAG_PRIORITY_ALL))

    def state(self) -> dict[str, Any]:
        return {
            "init_pid": os.getpid(),
            "init_start": process_start(os.getpid()),
            "boot_id": self.boot_id,
            "pids": self.pids,
            "driver": self.config.driver,
            "speed": self.config.speed,
            "clock": self.config.clock,
            "booted_at": self.booted_at,
            "boot_seconds": round(self.boot_seconds, 3),
            "hal_restarts": self.hal_generation,
            "isolation": self.isolation,
            "cgroup": os.fspath(self.cgroup.path) if self.cgroup else None,
        }

    # -- children -------------------------------------------------------------------

    async def _pump(self, child: _Child, stream: Any) -> None:
        """Copy a child's output into the log, line by line, adopting foreign lines."""
        buf = b""
        while True:
            try:
                chunk = await stream.receive_some(65536)
            except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                chunk = b""
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                self._emit(child, raw)
            while len(buf) >= LOGCAT_LINE_MAX:  # no newline in sight: never hold more than a line
                self._emit(child, buf[:LOGCAT_LINE_MAX])
                buf = buf[LOGCAT_LINE_MAX:]
        if buf:
            self._emit(child, buf)

    def _emit(self, child: _Child, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if not text.strip():
            return
        child.tail.append(text)
        self._log.write_raw(adopt_line(text, child.process.pid, child.name))

    async def _wait_registered(self, child: _Child, services: Sequence[str], timeout: float) -> None:
        """Until ``child`` registered ``services``; BootError if it dies or is late."""
        assert self.runtime is not None
        sm = defaultServiceManager(self.runtime)
        missing = list(services)
        deadline = trio.current_time() + timeout
        with trio.CancelScope() as outer:

            async def watch() -> None:
                await child.process.wait()
                outer.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                while missing:
                    left = deadline - trio.current_time()
                    if left <= 0:
                        break
                    binder = await sm.waitForService(missing[0], max(1, int(left * 1000)))
                    # A restarted stage's name may still name its dead predecessor's
                    # service for a moment (until the servicemanager hears of the death):
                    # only a service that answers counts (the predecessor has exited).
                    answers = False
                    if binder is not None and binder.isBinderAlive():
                        with trio.move_on_after(max(0.0, deadline - trio.current_time())):
                            answers = await binder.pingBinder()
                    if answers:
                        missing.pop(0)
                    elif binder is not None:
                        await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
        if child.process.returncode is not None:
            await trio.sleep(0.05)  # let the pump catch the last lines it printed
            raise BootError(
                f"{child.name} (pid {child.process.pid}) {child.describe_exit()} before registering"
                f" {', '.join(missing)}\nits last output:\n{child.tail_text()}"
            )
        if missing:
            raise BootError(
                f"{child.name} (pid {child.process.pid}) did not register {', '.join(missing)}"
                f" within {timeout:g} s\nits last output:\n{child.tail_text()}"
            )

    async def _stop(self, child: _Child, grace: float) -> None:
        """SIGTERM to the child's process group, SIGKILL after ``grace``; then reap it.

        The group is signalled only while its leader is not reaped: until then the
        leader's pid, which is the group's number, cannot belong to anybody else.
        (``proc.returncode`` reaps a child that has exited, so it is asked once.)
        """
        proc = child.process
        if proc.returncode is None:
            self.log("I", f"stopping {child.name} (pid {proc.pid})")
            for sig in (signal.SIGTERM, signal.SIGKILL):
                _signal_group(proc, sig)
                with trio.move_on_after(grace):
                    # Until it exits, without reaping it: its pid (the group's number) stays reserved.
                    await UnixNetwork(self.runtime_dir).wait_exit(proc.pid)
                    break
            # Stragglers of the group (an app that ignored SIGTERM) go with their leader,
            # which has exited but is not reaped yet.
            _signal_group(proc, signal.SIGKILL)
        await proc.wait()
        self.log("I", f"{child.name} (pid {proc.pid}) {child.describe_exit()}")

    async def _stop_all(self, grace: float) -> bool:
        """Stop every process of the stack, in order; whether none is left running.

        Each is stopped whatever happened to the one before; then whatever still
        carries this boot's id (an app that left its group) is killed.
        """
        for name in ("system_server", "hal", "servicemanager"):
            child = self._children.get(name)
            if child is None:
                continue
            try:
                await self._stop(child, grace)
            except Exception as exc:  # noqa: BLE001 - the next one must be stopped all the same
                self.log("E", f"stopping {name} (pid {child.process.pid}) failed: {exc!r}")
        if self._servicemanager_socket is not None:  # from now on a connect is refused (its name goes with the live files)
            self._servicemanager_socket.close()
            self._servicemanager_socket = None
        cgroup = os.fspath(self.cgroup.path) if self.cgroup else None
        for pid in self.cgroup.pids() if self.cgroup else ():
            self.log("W", f"killing pid {pid}, left running in the boot's cgroup")
        for pid in await trio.to_thread.run_sync(functools.partial(kill_boot, self.boot_id, cgroup=cgroup)):
            self.log("W", f"killed pid {pid}, left running by the stack")
        return all(c.process.returncode is not None for c in self._children.values())


def _signal_group(proc: trio.Process, sig: signal.Signals) -> None:
    """``sig`` to the process group ``proc`` leads; ``proc`` must not be reaped yet."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        proc.send_signal(sig)


#: The tree this module belongs to: the stack's processes import the same one, wherever
#: the caller runs from.
_TREE = str(Path(__file__).resolve().parents[2])


def _child_env(runtime_dir: Path, extra: Mapping[str, str], emu: Emulator) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = _TREE + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    env[RUNTIME_DIR_ENV] = os.fspath(runtime_dir)
    env[BOOT_ID_ENV] = emu.boot_id
    env[ISOLATION_ENV] = emu.isolation
    env.pop(CGROUP_ENV, None)
    if emu.cgroup is not None:
        env[CGROUP_ENV] = os.fspath(emu.cgroup.path)
    if has_os_uids(emu.isolation):
        # The system and app uids may not write the tree's bytecode caches (they read them),
        # nor use init's own user site-packages (its $HOME is not theirs).
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"  # lines reach the log as they are written
    return env


def _unreachable(path: Path, *, read: bool) -> str | None:
    """Why other OS users cannot reach ``path`` (traverse each folder above it, and read it), or None."""
    path = path.resolve()
    for folder in reversed(path.parents):
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return f"{folder} is not searchable by other users"
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
        return f"{path} is not searchable by other users"
    if read and not mode & stat.S_IROTH:
        return f"{path} is not readable by other users"
    return None


def _shared_paths(extra: Sequence[Path] = ()) -> list[Path]:
    """What every system and app uid must reach: the tree, Python and its packages, the models."""
    paths = [Path(_TREE), Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix), *extra]
    if os.environ.get("NPUEMU_MODELS_DIR"):
        paths.append(Path(os.environ["NPUEMU_MODELS_DIR"]))
    return paths


def grant_search(extra: Sequence[str | os.PathLike[str]] = ()) -> list[Path]:
    """As root, let other users *search* (o+x, not list) each folder above what uid isolation needs.

    ``make install`` runs this: where Python lives under a 0700 home (``/root/.pyenv``),
    the system and app uids could not even start it. Only folders that lack search
    permission change, and only that bit; the folders changed are returned.
    """
    if os.geteuid() != 0:
        return []
    changed = []
    for path in _shared_paths([Path(p) for p in extra]):
        for folder in reversed(path.resolve().parents):
            try:
                mode = folder.stat().st_mode
            except FileNotFoundError:
                break  # (the models, not downloaded yet)
            if not mode & stat.S_IXOTH:
                os.chmod(folder, stat.S_IMODE(mode) | stat.S_IXOTH)
                changed.append(folder)
    return changed


def _isolation(root: Path, config: BootConfig) -> str:
    """``uid`` if every process can run as its own OS uid here (``userns``: root of a user namespace), else ``nominal: <why>``."""
    if config.isolation == "nominal":
        return "nominal: asked for (BootConfig.isolation)"
    if os.geteuid() != 0:
        why = "init is not root, and no user namespace: " + (
            userns_check() or "nothing is missing for one, but only `npuemu boot` enters it (this process did not)")
    else:
        # Files named on a stage's command line (a driver, a user's policy FILE.py:CLASS) too.
        named = [Path(a.split(":")[0]) for a in (*config.system_server_args, *config.hal_args) if os.path.isfile(a.split(":")[0])]
        extra = [Path(config.driver)] if config.driver else []
        needs = [(root.parent, False)] + [(p, True) for p in _shared_paths([*extra, *named])]
        why = next((w for p, r in needs if (w := _unreachable(p, read=r))), None)
        if why is None:
            return "userns" if in_user_namespace() else "uid"
    if config.isolation == "uid":
        raise BootError(f"uid isolation is impossible: {why}")
    return f"nominal: {why}"


def _prepare_dir(files: RuntimeFiles, isolation: str, wipe_data: bool) -> None:
    """Give the runtime directory, the apps' reports and the data folder the modes ``isolation`` needs."""
    if wipe_data:
        shutil.rmtree(files.data, ignore_errors=True)
    files.data.mkdir(mode=0o700, exist_ok=True)
    if has_os_uids(isolation):
        for folder, _, names in os.walk(files.data):  # system_server's (uid 1000), as /data/system is
            for path in (folder, *(os.path.join(folder, n) for n in names)):
                os.chown(path, AID_SYSTEM, AID_SYSTEM, follow_symlinks=False)
    # The apps' reports are this boot's, as the trace is: an earlier boot's app (another uid
    # since a wipe) would own the names in a sticky folder, and no app could replace them.
    shutil.rmtree(files.app_reports, ignore_errors=True)
    files.app_reports.mkdir(mode=0o700)
    for folder in (files.root, files.app_reports):
        if has_os_uids(isolation):
            os.chown(folder, 0, 0)
            os.chmod(folder, SHARED_RUNTIME_DIR_MODE)  # every uid makes its sockets (reports) here
        elif stat.S_IMODE(folder.stat().st_mode) == SHARED_RUNTIME_DIR_MODE:
            os.chmod(folder, 0o700)  # an isolated emulator ran here before


def _claim(files: RuntimeFiles) -> list[Path]:
    """Take the runtime directory for a new boot; the dead emulator's files it removed.

    A live init there, or a socket something still serves (what a dead init left
    running), is refused; what only a running emulator has (``init.json``, the shell
    token, sockets) and nobody serves is a killed predecessor's, and goes.
    """
    existing = files.read_state()
    if existing is not None:
        raise EmulatorAlreadyRunningError(
            f"an emulator already runs in {files.root} (init pid {existing['init_pid']}); stop it with `npuemu shutdown`")
    served = files.served_sockets()
    if served:
        raise EmulatorAlreadyRunningError(
            f"processes of a dead emulator still serve in {files.root} ({', '.join(p.name for p in served)});"
            f" `npuemu shutdown --runtime-dir {files.root}` stops them")
    return files.remove_live_files()


@asynccontextmanager
async def boot_processes(
    runtime_dir: str | os.PathLike[str] | None = None,
    config: BootConfig | None = None,
    *,
    system_server: bool = True,
    grace: float = 3.0,
) -> AsyncIterator[Emulator]:
    """Boot servicemanager, HAL and system_server in ``runtime_dir``; shut them down on exit.

    ``open_stack(processes=True)`` is the public face of this. ``runtime_dir`` None is a
    temporary directory of its own, removed on exit. Raises
    :class:`EmulatorAlreadyRunningError` if a live init owns the directory and
    :class:`BootError` if a stage fails. However the boot ends (a failure, a
    cancellation, a Ctrl-C at any moment), everything started so far is stopped, and
    on exit the directory keeps only its records (``logcat``, ``trace.jsonl``,
    ``apps/``), none of the files of a running emulator. ``system_server=False``
    boots the servicemanager and the HAL only.
    """
    config = config or BootConfig()
    own_dir = runtime_dir is None
    # In $TMPDIR, where a test session's leak check looks (keep it short: socket paths are at most 108 bytes).
    root = Path(tempfile.mkdtemp(prefix="npuemu-stack-")) if own_dir else resolve_runtime_dir(runtime_dir)
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        async with _boot(root, config, system_server, grace) as emu:
            yield emu
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)


@asynccontextmanager
async def _boot(root: Path, config: BootConfig, system_server: bool, grace: float) -> AsyncIterator[Emulator]:
    files = RuntimeFiles(root)
    stale = _claim(files)
    files.trace_events.unlink(missing_ok=True)
    isolation = _isolation(root, config)
    emu = Emulator(root, config, _Log(files.log))
    log = emu._log
    emu._grace = grace
    emu.isolation = isolation
    booted = stopped = False
    try:
        _prepare_dir(files, isolation, config.wipe_data)
        # The boot's cgroup, where there is one: every process of the stack stays in it.
        emu.cgroup = ProcessCgroup.create_for_boot(f"npuemu-{emu.boot_id}")
        if emu.cgroup is not None and has_os_uids(emu.isolation):
            emu.cgroup.delegate(AID_SYSTEM, AID_SYSTEM)  # system_server makes each app's cgroup in it
        env = emu.env = _child_env(root, config.extra_env, emu)
        # First the dead-man switch: from here on, whatever init starts dies with it.
        emu._start_reaper(env)
        t0 = trio.current_time()
        log("I", f"init pid {os.getpid()} booting in {root} (driver {config.driver or 'reference'}, speed {config.speed:g})")
        log("I" if has_os_uids(emu.isolation) else "W", f"isolation: {emu.isolation}" + (
            " (system processes uid 1000, each app its own uid" + (
                ", in a user namespace mapped to the user's subordinate ids)" if emu.isolation == "userns" else ")")
            if has_os_uids(emu.isolation) else ""))
        if stale:
            log("W", f"removed what a dead emulator left: {', '.join(p.name for p in stale)}")
        async with trio.open_nursery() as nursery:
            try:
                sm = await emu._spawn_servicemanager()
                # The HAL and system_server start now, held: they import while the
                # servicemanager comes up, and wait inside open_binder_runtime until
                # init has registered them (both at once, too: system_server waits for
                # the HAL's IScheduling itself).
                stages = [("hal", config.hal_argv(root), HAL_SERVICES)]
                if system_server:
                    stages.append(("system_server", config.system_server_argv(root), SYSTEM_SERVER_SERVICES))
                emu._stages = {name: (argv, services) for name, argv, services in stages}
                held = {}
                try:
                    for name, argv, _ in stages:
                        held[name] = await spawn_held(
                            argv,
                            runtime_dir=root,
                            env=env,
                            gate_in_runtime=True,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                            **emu._system_identity(name),
                        )
                        child = emu._children[name] = _Child(name, held[name].process)
                        emu._track(child.process.pid)
                        nursery.start_soon(emu._pump, child, held[name].process.stdout)
                    await _wait_ready(sm, nursery, emu, config.boot_timeout)
                except BaseException:
                    for h in held.values():
                        h.abandon()
                    raise
                async with open_binder_runtime(root) as runtime:
                    emu.runtime = runtime
                    for name, _, _ in stages:
                        await held[name].release(AID_SYSTEM, runtime)
                    failures: list[BootError] = []

                    async def wait_stage(name: str, services: Sequence[str]) -> None:
                        try:
                            await emu._wait_registered(emu._children[name], services, config.boot_timeout)
                        except BootError as exc:
                            failures.append(exc)
                            waiting.cancel_scope.cancel()
                        else:
                            log("I", f"{name} (pid {emu._children[name].process.pid}) registered {', '.join(services)}")

                    async with trio.open_nursery() as waiting:
                        for name, _, services in stages:
                            waiting.start_soon(wait_stage, name, services)
                    if failures:
                        raise failures[0]
                    emu.boot_seconds = trio.current_time() - t0
                    async with trio.open_nursery() as helpers:
                        emu._helpers = helpers
                        for name, _, _ in stages:
                            helpers.start_soon(_supervise, emu, name)
                        helpers.start_soon(_supervise_servicemanager, emu)
                        if config.record:
                            from ._recorder import serve_recorder

                            await helpers.start(serve_recorder, emu)
                        emu.booted_at = time.time()
                        files.write_state(emu.state())
                        log("I", f"boot complete in {emu.boot_seconds:.2f} s: {emu.pids}")
                        booted = True
                        try:
                            yield emu
                        finally:
                            files.state.unlink(missing_ok=True)
                            helpers.cancel_scope.cancel()
            except BaseException as exc:
                if not booted and _interrupted(exc):
                    log("W", "boot interrupted: stopping what it started")
                raise
            finally:
                with trio.CancelScope(shield=True):
                    log("I", "shutting down")
                    stopped = await emu._stop_all(grace)
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # One failure is the common case: surface it as itself, not as a group.
        raise single_exception(group) from None
    finally:
        why = sys.exc_info()[1]
        # The reaper stands down only if nothing is left; else it kills the rest.
        emu._stop_reaper(stand_down=stopped)
        if emu.cgroup is not None:  # (gone already if the reaper had to kill what was left)
            remove_cgroup(os.fspath(emu.cgroup.path))
        if stopped:
            files.remove_live_files()
        if why is None or _interrupted(why):
            log("I", "init exiting")
        else:
            log("E", f"init exiting: {type(why).__name__}: {why}")
        log.close()


#: How often init restarts a crashed HAL before it gives up (as Android's init
#: stops restarting a service that crashes four times in four minutes).
HAL_RESTART_LIMIT = 4


async def _supervise(emu: Emulator, name: str) -> None:
    """Watch a stack process; restart the HAL when it dies, as Android's init does.

    A HAL that dies (a driver crash, a SIGKILL) is launched again after a short
    backoff, and system_server reconnects to it as it reconnects on a phone; its
    devices come back, its prepared models do not. A system_server that dies is
    reported and left dead (Android would restart the whole framework; here the
    emulator is for looking at what went wrong), and so is a HAL when
    ``BootConfig.restart_hal`` is off. Each death is an error in the log with the
    process's last output. A process replaced on request (``Emulator.restart_hal``)
    did not die: its successor is watched instead.
    """
    restarts = 0
    while True:
        child = emu._children[name]
        await child.process.wait()
        async with emu._relaunching:  # a restart on request replaces the child under it
            if emu._children[name] is not child:
                continue
            await trio.sleep(0.05)  # let the pump catch the last lines it printed
            emu.log("E", f"{child.name} (pid {child.process.pid}) {child.describe_exit()}; its last output:")
            for line in child.tail:
                emu.log("E", f"  {line}")
            if name == "hal" and emu.config.restart_hal and restarts < HAL_RESTART_LIMIT:
                restarts += 1
                await trio.sleep(0.5 * restarts)
                emu.log("I", f"restarting hal (restart {restarts} of {HAL_RESTART_LIMIT})")
                try:
                    await emu._relaunch(name)
                except (BootError, RemoteException) as exc:  # RemoteException: no servicemanager to register it
                    emu.log("E", f"restarted hal failed: {exc}")
                continue
            if name == "hal" and emu.config.restart_hal:
                emu.log("E", f"hal died {restarts + 1} times; not restarting it again")
        await child.replaced.wait()  # only a restart on request brings it back


#: How often init restarts a servicemanager that died before it gives up (Android's
#: init, for a ``critical`` service as the servicemanager is, allows four crashes in
#: four minutes, then reboots to the bootloader; here the emulator stays up, dead).
SERVICEMANAGER_RESTART_LIMIT = 4


async def _supervise_servicemanager(emu: Emulator) -> None:
    """Restart a servicemanager that dies, and what depends on it (``_restart_servicemanager``).

    Meanwhile a command or a launch fails (no servicemanager to ask); once it is back,
    ``npuemu service list``, dumpsys and launches work again: a short outage, not a dead
    emulator.
    """
    restarts = 0
    while True:
        child = emu._children["servicemanager"]
        await child.process.wait()
        async with emu._relaunching:  # the HAL's supervisor waits while its HAL is replaced
            await trio.sleep(0.05)  # let the pump catch the last lines it printed
            emu.log("E", f"servicemanager (pid {child.process.pid}) {child.describe_exit()}; its last output:")
            for line in child.tail:
                emu.log("E", f"  {line}")
            if restarts >= SERVICEMANAGER_RESTART_LIMIT:
                emu.log("E", f"servicemanager died {restarts + 1} times; not restarting it again")
                return
            restarts += 1
            emu.log("I", f"restarting servicemanager (restart {restarts} of {SERVICEMANAGER_RESTART_LIMIT}),"
                         " then the hal and system_server that depend on it")
            try:
                await emu._restart_servicemanager()
            except (BootError, RemoteException) as exc:
                emu.log("E", f"restarting after the servicemanager's death failed: {exc}")
                continue
            emu.log("I", f"servicemanager (pid {emu.pids['servicemanager']}) and the stack are back")


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is a cancellation or a Ctrl-C (alone or grouped), not a failure."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_interrupted(e) for e in exc.exceptions)
    return isinstance(exc, (trio.Cancelled, KeyboardInterrupt))



async def _wait_ready(sm: _Child, nursery: trio.Nursery, emu: Emulator, timeout: float) -> None:
    """The servicemanager prints ``ready`` on stdout once it serves."""
    proc = sm.process
    nursery.start_soon(emu._pump, sm, proc.stderr)
    ready = trio.Event()

    async def read_stdout() -> None:
        buf = b""
        while True:
            chunk = await proc.stdout.receive_some(4096)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                if raw.strip() == b"ready":
                    ready.set()
                else:
                    emu._emit(sm, raw)
            while len(buf) >= LOGCAT_LINE_MAX:
                emu._emit(sm, buf[:LOGCAT_LINE_MAX])
                buf = buf[LOGCAT_LINE_MAX:]

    nursery.start_soon(read_stdout)
    with trio.move_on_after(timeout):
        async with trio.open_nursery() as inner:

            async def died() -> None:
                await proc.wait()
                inner.cancel_scope.cancel()

            inner.start_soon(died)
            await ready.wait()
            inner.cancel_scope.cancel()
    if not ready.is_set():
        await trio.sleep(0.05)
        why = sm.describe_exit() if proc.returncode is not None else f"did not become ready within {timeout:g} s"
        raise BootError(f"servicemanager (pid {proc.pid}) {why}\nits last output:\n{sm.tail_text()}")
