"""Whether a user who is not root could have uid isolation through a user namespace.

Not as root, the way to real per-app uids is a user namespace (as rootless podman does):
init's user as the namespace's root and a subordinate uid and gid range (``/etc/subuid``,
``/etc/subgid``, granted by the machine's administrator) mapped to the namespace's uids
1..N, written for the namespace by the setuid ``newuidmap``/``newgidmap`` (Debian's
``uidmap`` package). The range must reach the last Android app uid
(``LAST_APPLICATION_UID``), since each app runs as its own.

``userns_check`` finds what such a boot would need and says what is missing, so a
nominal boot names the reason. Where nothing is missing, ``npuemu boot`` calls
:func:`enter_user_namespace` before anything else runs: the process unshares a user
namespace (it must be single-threaded, so before trio starts), a helper it forked just
before (still outside, the namespace's owner) runs ``newuidmap``/``newgidmap`` on it, and
the process carries on as the namespace's root, where init does what it does as root
(system processes the namespace's uid 1000, each app its own uid): ``isolation: userns``.
Outside, these uids are the subordinate ones (``start + uid - 1``); the user is the
namespace's root, so its own commands reach the stack as init's user would (README,
"Security guarantees").
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from framework.binder import LAST_APPLICATION_UID

from ._errors import BootError
from ._paths import RuntimeFiles

__all__ = [
    "SUBORDINATE_IDS_NEEDED",
    "SubordinateRange",
    "enter_user_namespace",
    "in_user_namespace",
    "join_emulator_namespace",
    "join_user_namespace",
    "subordinate_range",
    "userns_check",
]

#: The namespace's uids 1..N come from the subordinate range: every Android uid up to the
#: last app uid must be mapped (system 1000, shell 2000, apps 10000..19999).
SUBORDINATE_IDS_NEEDED = LAST_APPLICATION_UID


@dataclass(frozen=True)
class SubordinateRange:
    """``count`` ids from ``start`` (a line ``user:start:count`` of /etc/subuid or /etc/subgid)."""

    start: int
    count: int


def subordinate_range(path: Path, uid: int, name: str | None) -> SubordinateRange | None:
    """The largest range ``path`` grants the user (by name or by number), or None."""
    try:
        text = path.read_text()
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        return None
    best: SubordinateRange | None = None
    for line in text.splitlines():
        fields = line.strip().split(":")
        if len(fields) != 3 or fields[0] not in (str(uid), name):
            continue
        try:
            start, count = int(fields[1]), int(fields[2])
        except ValueError:
            continue  # a malformed line grants nothing, as newuidmap reads it
        if start >= 0 and count > 0 and (best is None or count > best.count):
            best = SubordinateRange(start, count)
    return best


def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def userns_check(
    uid: int | None = None,
    *,
    etc: Path = Path("/etc"),
    proc: Path = Path("/proc"),
    which: Callable[[str], str | None] = shutil.which,
) -> str | None:
    """Why a boot by ``uid`` (this process's by default) cannot have uid isolation in a user namespace.

    Each missing piece is named: user namespaces switched off, ``newuidmap``/``newgidmap``
    not installed, no subordinate range (or one too small) in ``etc``/subuid or subgid.
    None: nothing is missing.
    """
    uid = os.getuid() if uid is None else uid
    name = _user_name(uid)
    who = f"user {name or uid}"
    try:
        if int((proc / "sys/user/max_user_namespaces").read_text()) == 0:
            return "user namespaces are switched off (/proc/sys/user/max_user_namespaces is 0)"
    except (FileNotFoundError, ValueError):
        return "this kernel has no user namespaces"
    missing = [tool for tool in ("newuidmap", "newgidmap") if which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (Debian's uidmap package)"
    for kind in ("subuid", "subgid"):
        granted = subordinate_range(etc / kind, uid, name)
        if granted is None:
            return f"{who} has no subordinate {kind[3:]} range in {etc / kind}"
        if granted.count < SUBORDINATE_IDS_NEEDED:
            return (f"{who}'s subordinate {kind[3:]} range in {etc / kind} has {granted.count} ids;"
                    f" Android's uids need {SUBORDINATE_IDS_NEEDED}")
    return None


#: ``unshare(2)``'s flag for a new user namespace (linux/sched.h).
_CLONE_NEWUSER = 0x10000000
#: The ioctl that gives a namespace's owner (linux/nsfs.h ``NS_GET_OWNER_UID``).
_NS_GET_OWNER_UID = 0xB704


def in_user_namespace(proc: Path = Path("/proc")) -> bool:
    """Whether this process runs in a user namespace of its own (its uid map is not the machine's identity)."""
    try:
        return (proc / "self/uid_map").read_text().split() != ["0", "0", "4294967295"]
    except FileNotFoundError:
        return False


#: What the waiting parent of :func:`_one_thread` passes on to the child it waits for.
_RELAYED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def _one_thread() -> None:
    """Go on in a forked child of this process if it has threads; the parent waits and exits as the child does.

    The kernel lets only a single-threaded process unshare or join a user namespace, and
    a command has threads of its libraries' by then (OpenBLAS's, from numpy's import). A
    fork's child has one. Stop signals sent to the parent are passed on to the child.
    """
    if len(os.listdir("/proc/self/task")) == 1:
        return
    child = os.fork()
    if child == 0:
        return
    for sig in _RELAYED_SIGNALS:  # pragma: no cover - the parent never returns
        signal.signal(sig, lambda signum, _frame: os.kill(child, signum))
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: the same end for the parent
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)


def _map_ids(pid: int, uid: int, gid: int, ranges: dict[str, SubordinateRange]) -> str:
    """Run newuidmap/newgidmap on ``pid``'s namespace: inner 0 the user, inner 1.. the range; what failed, or ''."""
    for tool, own, granted in (("newuidmap", uid, ranges["subuid"]), ("newgidmap", gid, ranges["subgid"])):
        argv = [tool, str(pid), "0", str(own), "1", "1", str(granted.start), str(SUBORDINATE_IDS_NEEDED)]
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(argv)}: {exc}"
        if done.returncode != 0:
            return f"{' '.join(argv)}: {done.stderr.strip() or f'exit status {done.returncode}'}"
    return ""


def enter_user_namespace(*, etc: Path = Path("/etc")) -> None:
    """Make this (single-threaded) process root of a new user namespace with the user's subordinate ids.

    The namespace's uid and gid 0 are the user's own, 1..``SUBORDINATE_IDS_NEEDED`` the
    first ids of its ranges in ``etc``/subuid and subgid. Raises :class:`BootError` with the
    reason where that cannot be done (what :func:`userns_check` names, or what the kernel
    or ``newuidmap`` said); if the namespace was made but not mapped, this process is left
    in it and must exit.
    """
    why = userns_check()
    if why is not None:
        raise BootError(f"no user namespace: {why}")
    uid, gid = os.getuid(), os.getgid()
    name = _user_name(uid)
    ranges = {kind: subordinate_range(etc / kind, uid, name) for kind in ("subuid", "subgid")}
    assert all(ranges.values())  # (userns_check found them)
    _one_thread()
    parent = os.getpid()
    go_r, go_w = os.pipe()
    said_r, said_w = os.pipe()
    # The helper is forked before the unshare, so it stays outside as the namespace's owner,
    # which is whom newuidmap lets map it.
    helper = os.fork()
    if helper == 0:  # pragma: no cover - the forked helper (its result goes through the pipe)
        status = 1
        try:
            os.close(go_w)
            os.close(said_r)
            if os.read(go_r, 1) == b"u":
                os.write(said_w, _map_ids(parent, uid, gid, ranges).encode() or b"")
                status = 0
        finally:
            os._exit(status)
    os.close(go_r)
    os.close(said_w)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        failed = libc.unshare(_CLONE_NEWUSER) != 0
        err = ctypes.get_errno()
        if not failed:
            os.write(go_w, b"u")
        os.close(go_w)
        said = b""
        while chunk := os.read(said_r, 4096):
            said += chunk
    finally:
        os.close(said_r)
        _, status = os.waitpid(helper, 0)
    if failed:
        raise BootError(f"cannot make a user namespace: unshare: {os.strerror(err)}")
    if said or os.waitstatus_to_exitcode(status) != 0:
        raise BootError(f"cannot map the user namespace's ids: {said.decode(errors='replace') or 'the helper failed'}")
    # The namespace's root now: no supplementary groups of the user's (unmapped there).
    os.setgroups([])
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def join_user_namespace(pid: int) -> None:
    """Join (``setns``) the user namespace of process ``pid``, which this user must own, as its root.

    The shell's commands from outside a ``userns`` emulator do this first (as
    ``nsenter --user`` would): inside they are the namespace's root, as init is, so
    they read the shell token (the system's, 0600) and the runtime directory is theirs;
    an app, the namespace's uid 10000 and up, can do neither. Only a namespace this
    user owns is joined (an app's own nested one is not), and only from a single-threaded
    process. Raises :class:`BootError` saying why not.
    """
    try:
        fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise BootError(f"cannot open process {pid}'s user namespace: {exc.strerror}") from None
    try:
        owner = bytearray(4)
        try:
            fcntl.ioctl(fd, _NS_GET_OWNER_UID, owner)
        except OSError as exc:
            raise BootError(f"cannot tell who owns process {pid}'s user namespace: {exc.strerror}") from None
        if int.from_bytes(owner, "little") != os.getuid():
            raise BootError(f"process {pid}'s user namespace is not this user's")
        _one_thread()
        if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWUSER) != 0:
            err = ctypes.get_errno()
            raise BootError(f"cannot join process {pid}'s user namespace: setns: {os.strerror(err)}")
    finally:
        os.close(fd)
    os.setgroups([])
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def join_emulator_namespace(runtime_dir: Path) -> bool:
    """Join the user namespace of the ``userns`` emulator running in ``runtime_dir``, if one does and this is not root.

    Its ``init.json`` must be this user's (the runtime directory lets other uids make
    files). True if joined; False where there is nothing to join. For a single-threaded
    process only (the CLI, as it resolves ``--runtime-dir``).
    """
    if os.geteuid() == 0:
        return False
    files = RuntimeFiles(runtime_dir)
    state = files.read_state()
    if state is None or state.get("isolation") != "userns":
        return False
    if files.state.stat().st_uid != os.getuid():
        raise BootError(f"{files.state} is not this user's: not joining its emulator's namespace")
    join_user_namespace(int(state["init_pid"]))
    return True
