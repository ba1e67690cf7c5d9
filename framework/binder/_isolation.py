"""OS identity and process containment: what makes a launched uid the kernel's truth.

Run as root, init gives each process of the stack an OS identity, as the zygote does on
a phone: the servicemanager, the HAL and system_server run as the system user (uid and
gid 1000), every app as its own Android uid (10000 and up), each with ``setgroups`` /
``setresgid`` / ``setresuid`` done in the child between ``fork`` and ``exec``
(:func:`os_credentials`: ``subprocess``'s ``user``/``group``/``extra_groups``, done in
C). ``SO_PEERCRED`` then tells the truth about who calls, an app reads no file of the
system's, and it cannot ptrace, ``pidfd_getfd`` or read the memory of a process of
another uid. This is *uid isolation* (``uid``; ``userns`` where init is root of a user
namespace of its own, mapped to the user's subordinate ids, as ``npuemu boot`` makes one
for a user who is not root); where it cannot be had (init is not root, or the
code or the runtime directory cannot be reached by other uids) the emulator runs every
process as init's user and says so (*nominal* isolation, ``$NPUEMU_ISOLATION``).

system_server launches the apps, so it keeps, as the system user, the three
capabilities that takes (:func:`become_uid`): ``CAP_SETUID`` and ``CAP_SETGID`` (the
zygote's power to give a child its uid; a departure: Android keeps that in the zygote)
and ``CAP_KILL`` (Android's system_server has it, to kill apps). None of them reaches
an app: an app's ``exec`` as a non-root uid, with no ambient or inheritable set, leaves it
none, and the launch gate sets ``no_new_privs`` so a setuid binary cannot give one back.
Every system process makes itself non-dumpable (:func:`make_non_dumpable`), so not even
another process of the same uid may ptrace it or read its ``/proc/PID/mem``.

An app's processes are kept together in a cgroup (:class:`ProcessCgroup`, cgroup v2,
where the machine has one writable: Android puts every app process in its
``uid_<uid>/pid_<pid>`` cgroup for the same reason): a process cannot leave it
(``setsid`` and double forks do not), and ``cgroup.kill`` kills every process in it at
once. Without one, :func:`kill_process_tree` kills the app's process and its
descendants, each through a pidfd (never by a pid or group number that may have been
reused), which a process that left the tree (a double fork whose middle exited) escapes;
where the app has an OS uid of its own (a user namespace, which has no cgroups),
:func:`kill_processes_of_uid` then kills every process of that uid, the escapee too.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

__all__ = [
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CGROUP_ENV",
    "ISOLATION_ENV",
    "SHARED_RUNTIME_DIR_MODE",
    "ProcessCgroup",
    "become_uid",
    "has_os_uids",
    "isolation",
    "kill_process_tree",
    "kill_processes_of_uid",
    "make_non_dumpable",
    "os_credentials",
    "pidfd_kill",
    "set_no_new_privs",
]

#: Set by init for every process of the stack: ``uid`` when each process runs as its own
#: OS uid (``userns``: the same in a user namespace init is root of), else
#: ``nominal: <why>`` (every process is init's user).
ISOLATION_ENV = "NPUEMU_ISOLATION"
#: Set by init for system_server: the boot's cgroup (delegated to the system user), in
#: which it makes one ``uid_<uid>`` cgroup per app.
CGROUP_ENV = "NPUEMU_CGROUP"

#: The mode of an isolated emulator's runtime directory (owned by root): every uid may make
#: its sockets there and reach another's by name; none may list it, or remove or replace
#: another's file (the sticky bit).
SHARED_RUNTIME_DIR_MODE = 0o1733

_PR_SET_DUMPABLE = 4
_PR_SET_KEEPCAPS = 8
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
#: The capabilities system_server keeps (linux/capability.h numbers).
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7


def isolation() -> str:
    """This process's isolation as init set it: ``uid``, ``userns`` or ``nominal: <why>``."""
    return os.environ.get(ISOLATION_ENV, "nominal: not started by an emulator's init")


def has_os_uids(value: str | None = None) -> bool:
    """Whether isolation ``value`` (this process's by default) runs each process as its own OS uid."""
    return (isolation() if value is None else value) in ("uid", "userns")


def os_credentials(uid: int) -> dict[str, object]:
    """The ``subprocess`` arguments that start a child as OS uid ``uid`` (gid ``uid``, no groups)."""
    return {"user": uid, "group": uid, "extra_groups": []}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int = 0) -> None:
    if _libc().prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def make_non_dumpable() -> None:
    """``PR_SET_DUMPABLE 0``: no ptrace, ``/proc/PID/mem`` or ``pidfd_getfd`` of this process but by root."""
    _prctl(_PR_SET_DUMPABLE, 0)


def set_no_new_privs() -> None:
    """``PR_SET_NO_NEW_PRIVS``: no ``exec`` of this process or its children gains a privilege."""
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def become_uid(uid: int, keep: Iterable[int] = ()) -> None:
    """Make this root process OS uid and gid ``uid`` with no groups, keeping capabilities ``keep``.

    For a process that must keep a privilege as a non-root user (system_server: see the
    module's doc). The kept capabilities are effective and permitted, never inheritable or
    ambient, so no program this process runs inherits them; it ends non-dumpable.
    """
    mask = 0
    for cap in keep:
        if not 0 <= cap < 32:
            raise ValueError(f"capability {cap} is not one this keeps")
        mask |= 1 << cap
    _prctl(_PR_SET_KEEPCAPS, 1)
    try:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    finally:
        _prctl(_PR_SET_KEEPCAPS, 0)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)(_CapData(mask, mask, 0), _CapData(0, 0, 0))
    if _libc().capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    make_non_dumpable()


# --------------------------------------------------------------------------- killing


def pidfd_kill(pid: int, sig: int = signal.SIGKILL, still_ours: Callable[[int], bool] | None = None) -> bool:
    """Send ``sig`` to process ``pid`` through a pidfd; whether it was sent.

    The pidfd names one process for good. ``still_ours(pid)`` is asked *after* it is
    open: if it says yes while the pidfd's process is alive, the answer was about that
    process, not about one that took its number since; a no, or a process gone
    meanwhile, sends nothing.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False  # gone, or never there
    try:
        if still_ours is not None and not still_ours(pid):
            return False
        signal.pidfd_send_signal(pidfd, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        os.close(pidfd)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            continue
    return found


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def kill_process_tree(pid: int, sig: int = signal.SIGKILL) -> list[int]:
    """``sig`` to process ``pid`` and every descendant, each through a pidfd; the pids signalled.

    Children are listed before their parent is signalled (a killed parent's children
    move to a subreaper), and each is signalled only while its parent is still the one
    it was listed under.
    """
    signalled: list[int] = []

    def walk(parent: int) -> Iterator[tuple[int, int]]:
        for child in _children(parent):
            yield from walk(child)
            yield child, parent

    for child, parent in list(walk(pid)):
        if pidfd_kill(child, sig, lambda p, parent=parent: _parent(p) == parent):
            signalled.append(child)
    if pidfd_kill(pid, sig):
        signalled.append(pid)
    return signalled


def _real_uid(pid: int) -> int | None:
    """Process ``pid``'s real uid as this process's user namespace sees it (None: gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


#: How many sweeps :func:`kill_processes_of_uid` makes at most: a process that forks
#: between a sweep's listing and its kill is caught by the next one.
UID_KILL_SWEEPS = 8


def kill_processes_of_uid(uid: int, sig: int = signal.SIGKILL) -> list[int]:
    """``sig`` to every process whose real uid is ``uid``, each through a pidfd; the pids signalled.

    Android kills an app by its uid's processes (``killProcessGroup``); where an app has
    no cgroup of its own (a user namespace) this is how its double-forked escapees die
    with it. An app cannot change its uid (no capability, ``no_new_privs``), so a process
    of that uid is the app's. Sweeps until one finds nothing (at most ``UID_KILL_SWEEPS``).
    """
    signalled: list[int] = []
    for _ in range(UID_KILL_SWEEPS):
        found = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) != os.getpid()]
        hit = [pid for pid in found
               if _real_uid(pid) == uid and pidfd_kill(pid, sig, lambda p: _real_uid(p) == uid)]
        if not hit:
            break
        signalled += hit
    return signalled


# --------------------------------------------------------------------------- cgroups


def _cgroup2_mount() -> Path | None:
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    return Path(left.split()[4])
    except OSError:
        return None
    return None


class ProcessCgroup:
    """One cgroup v2 directory: processes put in it cannot leave it, and die together.

    ``ProcessCgroup.create_for_boot(name)`` makes one under this process's own cgroup
    (None where there is no writable cgroup v2: not root, or none mounted). ``child``
    makes or opens a sub-cgroup; ``add`` moves a process in (a held child, before it
    runs a line of its own); ``kill`` kills every process in it and its sub-cgroups
    (``cgroup.kill``, or each through a pidfd on kernels before 5.14). Whoever made the
    boot's removes it when the boot ends (init, or its reaper).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"ProcessCgroup({os.fspath(self.path)!r})"

    @classmethod
    def create_for_boot(cls, name: str) -> ProcessCgroup | None:
        if os.geteuid() != 0:
            return None
        mount = _cgroup2_mount()
        if mount is None:
            return None
        own = "/"
        try:
            with open("/proc/self/cgroup") as f:
                for line in f:
                    if line.startswith("0::"):
                        own = line[3:].strip()
        except OSError:
            return None
        parent = mount / own.lstrip("/")
        try:
            path = parent / name
            path.mkdir(mode=0o755)
        except OSError:
            return None
        return cls(path)

    def child(self, name: str) -> ProcessCgroup:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad cgroup name {name!r}")
        path = self.path / name
        path.mkdir(mode=0o755, exist_ok=True)
        return ProcessCgroup(path)

    def delegate(self, uid: int, gid: int) -> None:
        """Let OS user ``uid`` make sub-cgroups here and move processes among them (cgroup v2 delegation)."""
        os.chown(self.path, uid, gid)
        for name in ("cgroup.procs", "cgroup.threads", "cgroup.subtree_control"):
            with contextlib.suppress(FileNotFoundError):
                os.chown(self.path / name, uid, gid)

    def add(self, pid: int) -> None:
        with open(self.path / "cgroup.procs", "w") as f:
            f.write(str(pid))

    def pids(self) -> list[int]:
        """The processes in this cgroup and its sub-cgroups."""
        found: list[int] = []
        for folder, _, _ in os.walk(self.path):
            try:
                with open(os.path.join(folder, "cgroup.procs")) as f:
                    found += [int(p) for p in f.read().split()]
            except (OSError, ValueError):
                continue
        return found

    def kill(self) -> None:
        try:
            with open(self.path / "cgroup.kill", "w") as f:
                f.write("1")
            return
        except FileNotFoundError:
            if not self.path.exists():
                return
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
        for _ in range(100):  # no cgroup.kill (Linux < 5.14): one by one, until a look finds none
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                pidfd_kill(pid, signal.SIGKILL, lambda p: p in self.pids())
