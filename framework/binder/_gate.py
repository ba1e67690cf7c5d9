"""The gate a launched child waits at until its launcher has registered it.

``python -I -S framework/binder/_gate.py FD -- argv...`` (a bare script: it imports
nothing but os and sys, so holding a child costs milliseconds): read from pipe FD; on "go",
``exec`` argv (keeping the pid the servicemanager now knows); on end of file (the
launcher gave up, or died), exit 126 without running it. Before the ``exec`` it sets
``no_new_privs``: nothing the child runs (a setuid binary) gains a privilege its
launcher did not give it.
"""

from __future__ import annotations

import ctypes
import os
import sys


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print("usage: _gate.py FD -- argv...", file=sys.stderr)
        return 2
    fd = int(args[0])
    try:
        word = os.read(fd, 2)
    finally:
        os.close(fd)
    if word != b"go":
        return 126
    argv = args[2:]
    # PR_SET_NO_NEW_PRIVS (38), by hand: this script imports nothing of the package.
    if ctypes.CDLL(None, use_errno=True).prctl(38, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                                                ctypes.c_ulong(0)) != 0:
        print(f"cannot set no_new_privs: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 126
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
