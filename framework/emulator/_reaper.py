"""init's dead-man switch: ``python -m framework.emulator._reaper``.

A parent-death signal cannot protect the stack (trio forks from worker threads, and
the kernel sends that signal when the forking thread exits), so init starts this small
process instead, with one pipe. init writes the process group of every stack process
it starts (``"<pgid>\\n"``), and ``"q\\n"`` once it has stopped them itself. If the
pipe reaches end of file without ``q`` (init died: a SIGKILL, an OOM kill, a crash),
this kills every group it was told of, so a dead emulator leaves no HAL or
system_server (or app: they live in system_server's group) behind.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["main"]


def main(fd: int) -> int:
    # Ignore the terminal's Ctrl-C: init handles it and then says "q".
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    groups: list[int] = []
    buf = b""
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            chunk = pipe.read(4096)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line == b"q":
                    return 0
                if line.strip().isdigit():
                    groups.append(int(line))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
