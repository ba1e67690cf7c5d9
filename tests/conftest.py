"""No test leaves a process or a runtime directory behind.

Real-process tests boot emulators (init, servicemanager, HAL, system_server, apps); a
test that fails half-way, or a shutdown that misses a process, would leave them
running for good, each holding sockets and memory on a machine other people share.
So every test is checked when it ends, and the run fails if it left something:

- **Processes.** The processes of this pytest session are its descendants and every
  process that carries the session's marker in its environment (``$NPUEMU_TEST_SESSION``,
  set here, inherited by everything a test starts, whoever re-parents it). pytest makes
  itself a child subreaper (``PR_SET_CHILD_SUBREAPER``), so a daemon that double-forks
  away from its parent (``npuemu boot --detach``'s init, which is a fork of this process
  and so never shows the marker in ``/proc/PID/environ``) is re-parented to pytest, not
  to pid 1: it stays a descendant. Only this session's processes are counted: other
  people's emulators on the same machine are none of its business. Around each test only
  the tree is walked (``/proc/PID/task/TID/children``, about a millisecond); a module's
  and the session's checks also read every process's environment for the marker.
- **Runtime directories.** ``$TMPDIR`` (and :data:`tempfile.tempdir`) point at a
  directory private to the session, so what a test or its processes make with
  :mod:`tempfile` (``npuemu-rel-*``, a HAL's private runtime directory, the VTS's
  work directory) lands there; anything a test leaves there is a leak. Under pytest's
  own ``tmp_path`` (which pytest keeps and prunes), an emulator's runtime directory (it
  has a ``logcat``) must not keep what only a running emulator has: ``init.json``, the
  shell token, sockets.

A test that leaves either gets an error at its teardown naming what it left (pid, parent,
command line, runtime directory); the leftovers are then killed or removed, so they
cannot pile up or be blamed on the next test. What a test adds to an emulator that ran
before it (an app launched into its module's emulator) is that emulator's. A module's
fixtures are checked the same way when the module ends (a module marked
``module_owns_processes``, whose tests boot the emulator its fixture stops, only then),
and the session sweeps whatever is still there at the very end (and then fails).

Under pytest-xdist (``make test`` runs it with ``-n 3``: three workers on two cores, as
most tests wait on other processes) each worker is a session of its own here: its own
marker, its own private ``$TMPDIR``, its own basetemp, and it is
its own subreaper, so the checks above hold per worker.
Work is handed out a module at a time (see :class:`ModuleScheduling`): a module's
fixtures (one emulator, one VTS sweep over every broken driver) run once, in one worker.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

#: The environment variable that marks this session's processes.
SESSION_ENV = "NPUEMU_TEST_SESSION"
#: How long a test's processes may take to finish exiting after it ends (seconds).
EXIT_GRACE = float(os.environ.get("NPUEMU_TEST_EXIT_GRACE", "3"))
#: What only a running emulator keeps in its runtime directory (see _paths.RuntimeFiles).
LIVE_FILES = ("init.json", "shell.token")
#: How a process names the emulator (boot) it belongs to (see framework/emulator/_reaper.py).
BOOT_ID = b"NPUEMU_BOOT_ID="
#: The marker of a module whose tests hand what they start over to the module's fixtures.
MODULE_OWNS_PROCESSES = "module_owns_processes"

_PR_SET_CHILD_SUBREAPER = 36


@dataclasses.dataclass(frozen=True)
class Proc:
    """One live process of the session, as /proc shows it."""

    pid: int
    ppid: int
    start: int  # clock ticks after boot: with the pid, it names one process across pid reuse
    cmdline: str
    boot_id: str | None  # the emulator it belongs to ($NPUEMU_BOOT_ID), if any

    def describe(self) -> str:
        return f"pid {self.pid} (parent {self.ppid}): {self.cmdline[:300]}"


class SessionProcesses:
    """The live processes that belong to this pytest session."""

    def __init__(self, marker: str) -> None:
        self.me = os.getpid()
        self._marker = f"{SESSION_ENV}={marker}".encode()
        self._marked: dict[tuple[int, int], bool] = {}  # (pid, start) -> carries the marker
        self._details: dict[tuple[int, int], tuple[str, str | None]] = {}  # -> (cmdline, boot id)

    def _is_marked(self, pid: int, start: int) -> bool:
        key = (pid, start)
        if key not in self._marked:
            try:
                self._marked[key] = self._marker in _environ(pid)
            except OSError:
                return False  # gone, or not ours to read: not this session's
        return self._marked[key]

    def snapshot(self, full: bool = True) -> dict[tuple[int, int], Proc]:
        """This session's live processes. ``full``: every process in /proc is looked at
        (the marker finds one that left the tree); else only the tree under pytest is
        walked, through each thread's ``children`` (a few ms cheaper: run around every test).
        """
        table = self._all() if full else self._tree()
        found = {}
        for pid, (ppid, start) in table.items():
            key = (pid, start)
            if key not in self._details:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
                    boot = next((v.split(b"=", 1)[1].decode() for v in _environ(pid) if v.startswith(BOOT_ID)), None)
                except OSError:
                    continue
                self._details[key] = (cmdline, boot)
            found[key] = Proc(pid, ppid, start, *self._details[key])
        return found

    def _all(self) -> dict[int, tuple[int, int]]:
        """pid -> (ppid, start) of the descendants and of every process carrying the marker."""
        table: dict[int, tuple[int, int]] = {}  # every live process
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
                table[int(entry.name)] = stat
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        ours: set[int] = set()
        stack = [self.me]
        while stack:
            for child in children.get(stack.pop(), ()):
                ours.add(child)
                stack.append(child)
        ours.update(pid for pid, (_, start) in table.items() if pid != self.me and self._is_marked(pid, start))
        return {pid: table[pid] for pid in ours}

    def _tree(self) -> dict[int, tuple[int, int]]:
        """pid -> (ppid, start) of the live descendants of pytest (its subreaper keeps them so)."""
        table: dict[int, tuple[int, int]] = {}
        stack = [self.me]
        while stack:
            parent = stack.pop()
            try:
                threads = os.listdir(f"/proc/{parent}/task")
            except OSError:
                continue
            for tid in threads:
                try:
                    with open(f"/proc/{parent}/task/{tid}/children", "rb") as f:
                        kids = [int(k) for k in f.read().split()]
                except OSError:
                    continue
                for kid in kids:
                    if kid not in table and (stat := _stat(kid)) is not None:
                        table[kid] = stat
                        stack.append(kid)
        return table

    def left_since(self, before: dict[tuple[int, int], Proc], grace: float, full: bool = True) -> list[Proc]:
        """Processes that were not in ``before`` and still run after ``grace`` seconds.

        A process of an emulator that already ran in ``before`` (an app a test launched
        into its module's emulator, a HAL that init restarted) is that emulator's: it
        stops with it, and is checked with it.
        """
        boots = {p.boot_id for p in before.values() if p.boot_id}
        deadline = time.monotonic() + grace
        while True:
            new = [p for key, p in self.snapshot(full).items() if key not in before and p.boot_id not in boots]
            if not new:
                return []
            if time.monotonic() >= deadline:
                # A child first seen between its fork and its exec showed its parent's command
                # line (pytest's): read what each one runs now.
                for p in new:
                    self._details.pop((p.pid, p.start), None)
                now = self.snapshot(full)
                return sorted((now.get((p.pid, p.start), p) for p in new), key=lambda p: p.pid)
            time.sleep(0.05)

    def kill(self, procs: list[Proc]) -> None:
        """SIGKILL each of ``procs`` that is still the same process, and reap those that are ours."""
        for p in procs:
            if self._start_of(p.pid) == p.start:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        for p in procs:
            while time.monotonic() < deadline:
                try:  # our child (maybe re-parented to us, the subreaper): reap it
                    if os.waitpid(p.pid, os.WNOHANG)[0]:
                        break
                except ChildProcessError:  # somebody else's to reap: wait until it is gone
                    if self._start_of(p.pid) != p.start:
                        break
                time.sleep(0.02)

    @staticmethod
    def _start_of(pid: int) -> int | None:
        stat = _stat(pid)
        return None if stat is None else stat[1]


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process; None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in (b"Z", b"X") else (int(fields[1]), int(fields[19]))


def _environ(pid: int) -> list[bytes]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read().split(b"\0")


def _runtime_dir_of(proc: Proc) -> str | None:
    words = proc.cmdline.split()
    if "--runtime-dir" in words[:-1]:
        return words[words.index("--runtime-dir") + 1]
    try:
        return next((v.split(b"=", 1)[1].decode(errors="replace") for v in _environ(proc.pid)
                     if v.startswith(b"NPUEMU_RUNTIME_DIR=")), None)
    except OSError:
        return None


def _live_files(root: Path) -> list[str]:
    """What a stopped emulator's runtime directory ``root`` still holds of a running one."""
    found = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    for entry in entries:
        try:
            if entry.name in LIVE_FILES or stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                found.append(entry.name)
        except OSError:
            pass
    return sorted(found)


def _emulator_dirs(top: Path, depth: int = 4) -> Iterator[Path]:
    """Emulator runtime directories (they have a ``logcat``) at or under ``top``."""
    if (top / "logcat").is_file():
        yield top
    if depth == 0:
        return
    try:
        subdirs = [Path(e.path) for e in os.scandir(top) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for sub in subdirs:
        yield from _emulator_dirs(sub, depth - 1)


class LeakCheck:
    """Before and after a test (or a module): what it started and left behind."""

    def __init__(self, procs: SessionProcesses, private_tmp: Path, basetemp: Path) -> None:
        self.procs = procs
        self.private_tmp = private_tmp
        self.basetemp = basetemp
        self._reported: set[Path] = set()  # runtime directories already blamed on a test

    def before(self, full: bool) -> tuple[bool, dict, set[str], set[str]]:
        return full, self.procs.snapshot(full), _names(self.private_tmp), _names(self.basetemp)

    def after(self, before: tuple[bool, dict, set[str], set[str]], who: str) -> list[str]:
        """Problems ``who`` left since ``before`` (each cleaned up once reported)."""
        full, procs_before, tmp_before, base_before = before
        problems = []
        left = self.procs.left_since(procs_before, EXIT_GRACE, full)
        if left:
            lines = [f"{who} left {len(left)} process(es) running (killed now):"]
            for p in left:
                rt = _runtime_dir_of(p)
                lines.append("  " + p.describe() + (f"  [runtime dir {rt}]" if rt else ""))
            problems.append("\n".join(lines))
            self.procs.kill(left)
        for name in sorted(_names(self.private_tmp) - tmp_before):
            path = self.private_tmp / name
            live = [f"{d} ({', '.join(_live_files(d))})" for d in _emulator_dirs(path) if _live_files(d)]
            problems.append(f"{who} left {path} behind (removed now)" + (f"; a running emulator's files in {'; '.join(live)}" if live else ""))
            shutil.rmtree(path, ignore_errors=True)
        for name in sorted(_names(self.basetemp) - base_before):
            top = self.basetemp / name
            if top.is_symlink():
                continue  # pytest's "<name>current" link to a directory seen under its own name
            for d in _emulator_dirs(top):
                files = _live_files(d)
                if files and d not in self._reported:
                    self._reported.add(d)
                    problems.append(f"{who} left the runtime directory {d} as if its emulator still ran: {', '.join(files)}")
        return problems


def _names(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MODULE_OWNS_PROCESSES}: what a test starts may outlive it (the module's emulator,"
                   " booted by a test); the module's fixtures stop it, and it is checked when the module ends")
    # A pytest that a test runs gets a marker of its own: its processes are still the
    # outer session's (its descendants), and its own checks see only its own.
    os.environ[SESSION_ENV] = f"{os.getpid()}-{secrets.token_hex(6)}"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


@pytest.fixture(scope="session")
def _leak_check(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LeakCheck]:
    basetemp = tmp_path_factory.getbasetemp()
    # Short (Unix socket paths hold 108 bytes) and in the usual temp dir, but ours alone.
    private_tmp = Path(tempfile.mkdtemp(prefix="pytest-npuemu-"))
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = os.fspath(private_tmp)
    check = LeakCheck(SessionProcesses(os.environ[SESSION_ENV]), private_tmp, basetemp)
    try:
        yield check
    finally:
        if saved[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]
        shutil.rmtree(private_tmp, ignore_errors=True)


class DemoRun:
    """One real ``npuemu demo``, run in the background once :meth:`start`-ed.

    It is started by a test or a module's fixture, not by the session's fixture (that
    runs before every check), and waited for in the same module: what it leaves behind
    is then that module's, and is checked with it.
    """

    def __init__(self, work: Path) -> None:
        self.argv = (os.fspath(Path(sys.executable).with_name("npuemu")), "demo", "--seconds", "8")
        self.work = work
        self.out_dir = work / "demo"  # summary.json, trace.json, timeline.png, recording/
        self._proc: subprocess.Popen[bytes] | None = None
        self._result: subprocess.CompletedProcess[str] | None = None

    def start(self) -> None:
        if self._proc is None:
            with open(self.work / "stdout", "w") as stdout, open(self.work / "stderr", "w") as stderr:
                self._proc = subprocess.Popen(self.argv, cwd=self.work, stdout=stdout, stderr=stderr,
                                              env={**os.environ, "NPUEMU_RUNTIME_DIR": os.fspath(self.work / "emu")})

    def wait(self, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        """How it ended (started now if it was not)."""
        self.start()
        assert self._proc is not None
        if self._result is None:
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.stop()
                pytest.fail(f"npuemu demo did not end within {timeout:g} s", pytrace=False)
            out, err = ((self.work / name).read_text() for name in ("stdout", "stderr"))
            self._result = subprocess.CompletedProcess(self.argv, self._proc.returncode, out, err)
        return self._result

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


@pytest.fixture(scope="session")
def documented_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoRun]:
    """The quick start's ``npuemu demo`` (at ``--seconds 8``, its shortest run), run once.

    It is the suite's one run of the reference driver's demo: test_examples runs that
    example through it (started early, beside its other examples), test_demo checks
    what it reports and wrote. With no ``--out-dir`` its results go beside the runtime
    directory, ``$NPUEMU_RUNTIME_DIR``.
    """
    run = DemoRun(tmp_path_factory.mktemp("demo"))
    try:
        yield run
    finally:
        run.stop()


@pytest.fixture(scope="module", autouse=True)
def _no_leak_from_module(request: pytest.FixtureRequest, _leak_check: LeakCheck) -> Iterator[None]:
    before = _leak_check.before(full=True)
    yield
    problems = _leak_check.after(before, f"the fixtures of {request.module.__name__}")
    if not problems:
        return
    if request.session.shouldstop or request.session.shouldfail:
        # Torn down at the end of a run stopped early (-x): say it, without a traceback.
        _report(request.config, "left behind", problems)
        return
    pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(autouse=True)
def _no_leak_from_test(request: pytest.FixtureRequest, _leak_check: LeakCheck) -> Iterator[None]:
    if request.node.get_closest_marker(MODULE_OWNS_PROCESSES) is not None:
        yield  # checked when the module ends
        return
    before = _leak_check.before(full=False)  # the module's check also looks beyond the tree
    yield
    problems = _leak_check.after(before, request.node.nodeid)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def _report(config: pytest.Config, title: str, lines: list[str]) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", title, red=True)
        for line in lines:
            reporter.write_line(line)


#: Test modules that share one worker under xdist, and so its session fixtures, in the order
#: they run there: test_examples starts the one run of ``documented_demo`` early, beside
#: its other examples, and test_demo then reads it.
SAME_WORKER = {"tests/test_examples.py": "documented_demo", "tests/test_demo.py": "documented_demo"}


class ModuleScheduling(LoadScopeScheduling):
    """xdist's unit of work is a module (a class is not split off), or modules of ``SAME_WORKER``.

    A module's fixtures are set up once, where its tests run: one emulator for the
    examples, one VTS sweep over every broken driver. Units go out in the order of the
    collection (see :func:`pytest_collection_modifyitems`: the slow ones first).
    (xdist's own ``xdist_group`` does not group under pytest 9: its suffix no longer
    reaches the node ids.)
    """

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.partition("::")[0]
        return SAME_WORKER.get(module, module)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log) -> LoadScopeScheduling | None:
    if config.getvalue("dist") != "load":
        return None  # a mode asked for by name (each, loadfile, worksteal...) is xdist's own
    config.option.loadscopereorder = False  # keep the order of the collection
    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, the modules with a slow test go first (in their own order), so
    that they start at once and the short ones fill in around them, not after them; the
    modules of ``SAME_WORKER`` in its order."""
    if not hasattr(config, "workerinput"):
        return
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    rank = {module: i for i, module in enumerate(SAME_WORKER)}
    items.sort(key=lambda item: (item.path not in slow, rank.get(item.nodeid.partition("::")[0], 0)))  # stable


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Whatever is still running now escaped every check above: kill it and fail the run."""
    marker = os.environ.get(SESSION_ENV)
    if marker is None:
        return
    procs = SessionProcesses(marker)
    left = procs.left_since({}, EXIT_GRACE)
    if not left:
        return
    procs.kill(left)
    _report(session.config, "processes left behind",
            [f"the session left {len(left)} process(es) running (killed now):", *("  " + p.describe() for p in left)])
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
