"""init's dead-man switch: ``python framework/emulator/_reaper.py BOOT_ID FD [CGROUP]``.

A parent-death signal cannot protect the stack (trio forks from worker threads, and
the kernel sends that signal when the forking thread exits), so init starts this small
process first, with one Unix socket (FD; a pipe also does, without pidfds), and says
``"q\\n"`` on it once it has stopped every process of the stack itself. If the socket
reaches end of file without ``q`` (init died: a SIGKILL, an OOM kill, a crash; or init
could not stop everything), this kills what is left.

What is left is killed through pidfds, never by a pid or a process-group number (a
machine churns through its pids in minutes: a remembered number may be a stranger's by
now):

- init sends a pidfd of each process it starts (``p`` with the descriptor attached):
  a pidfd names one process for good, however long ago it was opened, and it works where
  nothing else could find the process (a non-dumpable system process's environment is
  hidden from a non-root reaper).

- Where init made the boot a cgroup (``CGROUP``, see ``framework.binder.ProcessCgroup``),
  every process of the stack, apps and whatever they started included, is in it and
  cannot leave it: ``cgroup.kill`` kills them all at once, and the cgroup is removed.
- Every process of one boot also carries the boot's id in its environment
  (``NPUEMU_BOOT_ID``, set by init for its children and inherited by theirs). Each one
  found so is opened as a pidfd first, its environment read again, and signalled
  through that pidfd only if it still shows the id: a pid that was reused since (by a
  process that does not carry the id) is never signalled, nor is any process group.

The module has no imports from the package (it starts in a few ms); init's own
shutdown also uses :func:`kill_boot` for stragglers.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
import time

__all__ = ["BOOT_ID_ENV", "kill_boot", "main", "processes_with_env", "remove_cgroup"]

#: The environment variable naming the boot a process belongs to.
BOOT_ID_ENV = "NPUEMU_BOOT_ID"


def _has_env(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False  # gone meanwhile, or not ours to read


def processes_with_env(name: str, value: str) -> list[int]:
    """Every live process (but this one) whose environment has ``name=value``."""
    marker = f"{name}={value}".encode()
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me or not _has_env(int(entry), marker):
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def _kill_if_marked(pid: int, marker: bytes) -> bool:
    """SIGKILL ``pid`` through a pidfd if, once the pidfd is open, it still carries ``marker``."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        # Read after the pidfd pins the process: while it lives, this is its environment.
        if not _has_env(pid, marker):
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(pidfd)


def remove_cgroup(path: str, timeout: float = 5.0) -> bool:
    """Kill every process in cgroup ``path`` (``cgroup.kill``) and remove it; whether it is gone."""
    deadline = time.monotonic() + timeout
    while os.path.isdir(path):
        try:
            with open(os.path.join(path, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            pass  # gone meanwhile, or a kernel before 5.14 (the id scan below kills those)
        try:
            for folder in sorted((f for f, _, _ in os.walk(path)), key=len, reverse=True):
                os.rmdir(folder)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
            time.sleep(0.01)  # killed processes leave as they exit
    return True


def kill_boot(boot_id: str, timeout: float = 5.0, cgroup: str | None = None) -> list[int]:
    """SIGKILL every process of boot ``boot_id`` until none is left; the pids killed.

    ``cgroup`` (the boot's) is killed whole and removed first; then each process that
    carries the boot's id is killed through its pidfd (see the module's doc).
    """
    if cgroup:
        remove_cgroup(cgroup, timeout)
    marker = f"{BOOT_ID_ENV}={boot_id}".encode()
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        pids = processes_with_env(BOOT_ID_ENV, boot_id)
        if not pids or time.monotonic() > deadline:
            return killed
        for pid in pids:
            if _kill_if_marked(pid, marker) and pid not in killed:
                killed.append(pid)
        time.sleep(0.02)  # a SIGKILLed process is gone within a moment; look again


def _listen(fd: int, pidfds: list[int]) -> bool:
    """Read init's word on ``fd`` until end of file, keeping the pidfds it sends; whether it said ``q``."""
    buf = b""
    try:
        channel = socket.socket(fileno=fd)
    except OSError:  # a pipe: words only
        channel = None
    with channel if channel is not None else os.fdopen(fd, "rb", buffering=0) as f:
        while True:
            if channel is not None:
                chunk, fds, _, _ = socket.recv_fds(channel, 4096, 64)
                pidfds += fds
            else:
                chunk = f.read(4096)
            if not chunk:
                return False
            buf += chunk
            if b"q\n" in buf:
                return True


def main(boot_id: str, fd: int, cgroup: str | None = None) -> int:
    # Ignore the terminal's Ctrl-C: init handles it and then says "q".
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pidfds: list[int] = []
    if _listen(fd, pidfds):
        return 0
    for pidfd in pidfds:  # the processes init started, each for sure (a pidfd is never reused)
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except OSError:
            pass  # it has exited already
    kill_boot(boot_id, cgroup=cgroup)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:4]))
