"""init's dead-man switch: ``python framework/emulator/_reaper.py BOOT_ID FD``.

A parent-death signal cannot protect the stack (trio forks from worker threads, and
the kernel sends that signal when the forking thread exits), so init starts this small
process first, with one pipe, and says ``"q\\n"`` on it once it has stopped every
process of the stack itself. If the pipe reaches end of file without ``q`` (init died:
a SIGKILL, an OOM kill, a crash; or init could not stop everything), this kills what
is left.

What is left is found, not remembered: every process of one boot carries the boot's id
in its environment (``NPUEMU_BOOT_ID``, set by init for its children and inherited by
theirs, apps included), which ``/proc/PID/environ`` shows to the same user. So a
process that init started a moment before it died is found as surely as one it
recorded, and a pid that was reused since (a machine churns through its pids in
minutes) is somebody else's process and never signalled.

The module has no imports from the package (it starts in a few ms); init's own
shutdown also uses :func:`kill_boot` for stragglers.
"""

from __future__ import annotations

import os
import signal
import sys
import time

__all__ = ["BOOT_ID_ENV", "kill_boot", "main", "processes_with_env"]

#: The environment variable naming the boot a process belongs to.
BOOT_ID_ENV = "NPUEMU_BOOT_ID"


def processes_with_env(name: str, value: str) -> list[tuple[int, int]]:
    """``(pid, pgid)`` of every live process (but this one) whose environment has ``name=value``."""
    marker = f"{name}={value}".encode()
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if fields[0] not in (b"Z", b"X"):
            found.append((int(name), int(fields[2])))
    return found


def kill_boot(boot_id: str, timeout: float = 5.0) -> list[int]:
    """SIGKILL every process of boot ``boot_id`` until none is left; the pids killed.

    A process group is killed whole only when its leader is one of the boot's
    processes (the HAL's, system_server's with its apps): a group whose number was
    freed and reused is never hit.
    """
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        procs = processes_with_env(BOOT_ID_ENV, boot_id)
        if not procs or time.monotonic() > deadline:
            return killed
        pids = {pid for pid, _ in procs}
        for pid, pgid in procs:
            try:
                if pgid == pid:
                    os.killpg(pgid, signal.SIGKILL)
                elif pgid not in pids:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if pid not in killed:
                killed.append(pid)
        time.sleep(0.02)  # a SIGKILLed process is gone within a moment; look again


def main(boot_id: str, fd: int) -> int:
    # Ignore the terminal's Ctrl-C: init handles it and then says "q".
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    buf = b""
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            chunk = pipe.read(4096)
            if not chunk:
                break
            buf += chunk
            if b"q\n" in buf:
                return 0
    kill_boot(boot_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
