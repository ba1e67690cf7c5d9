"""Where an emulator lives: its runtime directory and the files init keeps in it.

One emulator, one runtime directory (0700): the binder's sockets, the shell token,
the log, init's pid, the trace recorder's output. Several emulators run side by side
in different directories. The directory is chosen, in order, by ``--runtime-dir``,
by ``$NPUEMU_RUNTIME_DIR`` (the binder's ``RUNTIME_DIR_ENV``, which every process of
the emulator also inherits), or is ``/tmp/npuemu-<uid>/default``.

Two kinds of file live there. The *live* ones exist only while the emulator runs:
``init.json``, the shell token and the binder's sockets; shutdown removes them, and a
boot that finds them without a live init removes them as a dead emulator's. The
*records* stay after shutdown for ``logcat``, ``trace`` and ``plot``: ``logcat``,
``trace.jsonl``, the apps' reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import socket
import stat
import tempfile
from pathlib import Path

from framework.binder import RUNTIME_DIR_ENV, SHELL_TOKEN_FILE

from ._errors import EmulatorNotRunningError

__all__ = ["RuntimeFiles", "default_runtime_dir", "open_own", "pid_alive", "process_start", "resolve_runtime_dir"]


def open_own(path: str | os.PathLike[str], flags: int, mode: int = 0o600) -> int:
    """``os.open`` for init's files in a runtime directory other users may write (uid isolation).

    What an app could have planted under the name is never written through: a symlink
    (``O_NOFOLLOW``) or a hard link to somebody else's file (one link and this user's, or
    it is removed and the file made afresh, ``O_EXCL``). ``O_TRUNC`` applies only after
    the check.
    """
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    trunc = flags & os.O_TRUNC
    for _ in range(2):
        try:
            fd = os.open(path, flags & ~os.O_TRUNC, mode)
        except OSError as exc:
            if exc.errno != errno.ELOOP or not flags & os.O_CREAT:
                raise
            os.unlink(path)  # a planted symlink
            continue
        st = os.fstat(fd)
        if st.st_nlink == 1 and st.st_uid == os.geteuid() and stat.S_ISREG(st.st_mode):
            if trunc:
                os.ftruncate(fd, 0)
            return fd
        os.close(fd)
        if not flags & os.O_CREAT:
            break
        os.unlink(path)  # a planted link to a file not ours: make ours afresh
        flags |= os.O_EXCL
    raise PermissionError(errno.EPERM, f"{path} is not a file of this user's (a link another user made?)")


def default_runtime_dir() -> Path:
    """``/tmp/npuemu-<uid>/default``: short, since Unix socket paths are (108 bytes)."""
    return Path(f"/tmp/npuemu-{os.getuid()}") / "default"


def resolve_runtime_dir(option: str | os.PathLike[str] | None = None) -> Path:
    """The runtime directory an emulator command means (absolute, not created)."""
    if option:
        return Path(option).expanduser().absolute()
    env = os.environ.get(RUNTIME_DIR_ENV)
    if env:
        return Path(env).expanduser().absolute()
    return default_runtime_dir()


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (and is not a zombie we could reap)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            # the state letter follows the parenthesised command name
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), None if it is gone or a zombie.

    With the pid it names one process: pids are reused within minutes on a busy machine.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


@dataclasses.dataclass(frozen=True)
class RuntimeFiles:
    """The files init keeps in a runtime directory."""

    root: Path

    @property
    def log(self) -> Path:
        """Every process's logcat lines, in the order they were written."""
        return self.root / "logcat"

    @property
    def state(self) -> Path:
        """``init.json``: init's pid and the stack's pids, present while the emulator runs."""
        return self.root / "init.json"

    @property
    def trace_events(self) -> Path:
        """The recorder's JSON lines: work events, thermal and memory samples."""
        return self.root / "trace.jsonl"

    @property
    def app_reports(self) -> Path:
        """Where sample apps write their JSON reports (one file per package)."""
        return self.root / "apps"

    @property
    def data(self) -> Path:
        """What survives a reboot (system_server's ``packages.xml``); ``boot --wipe-data`` empties it."""
        return self.root / "data"

    @property
    def shell_token(self) -> Path:
        """The servicemanager's secret for the shell (0600): whoever reads it is uid 2000."""
        return self.root / SHELL_TOKEN_FILE

    @property
    def daemon_errors(self) -> Path:
        """The detached init's stderr (``boot --detach``): empty unless it crashed."""
        return self.root / "init.err"

    def not_running(self) -> EmulatorNotRunningError:
        """The one way every command says that no emulator runs here (exit status 3)."""
        return EmulatorNotRunningError(f"no emulator is running in {self.root} (start one with `npuemu boot`)")

    def running_state(self) -> dict:
        """init's state if an init runs here, else :meth:`not_running`."""
        state = self.read_state()
        if state is None:
            raise self.not_running()
        return state

    def live_files(self) -> list[Path]:
        """What only a running emulator has here: ``init.json``, the shell token, sockets."""
        try:
            entries = list(os.scandir(self.root))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for entry in entries:
            try:
                is_socket = stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
            except OSError:
                continue
            if is_socket or entry.name in (self.state.name, SHELL_TOKEN_FILE):
                found.append(Path(entry.path))
        return sorted(found)

    def served_sockets(self) -> list[Path]:
        """The sockets here that a live process still listens on (a connect succeeds)."""
        served = []
        for path in self.live_files():
            if path.name in (self.state.name, SHELL_TOKEN_FILE):
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(1.0)
                try:
                    probe.connect(os.fspath(path))
                except (ConnectionRefusedError, FileNotFoundError):
                    continue  # nobody listens: a dead process's socket
                except OSError:
                    pass  # a full backlog, a slow accept: somebody is there
            served.append(path)
        return served

    def remove_live_files(self) -> list[Path]:
        """Remove the live files (once nothing of the emulator runs); the ones removed."""
        removed = []
        for path in self.live_files():
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            removed.append(path)
        return removed

    def read_state(self) -> dict | None:
        """init's state if an init that is still alive wrote it, else None."""
        try:
            state = json.loads(self.state.read_text())
        except (FileNotFoundError, NotADirectoryError, ValueError):
            return None
        try:
            pid = int(state.get("init_pid", -1))
        except (AttributeError, TypeError, ValueError):
            return None  # not init's
        start = process_start(pid) if pid > 0 else None
        if start is None or state.get("init_start", start) != start:
            return None  # init is gone (its pid may already be another process's)
        return state

    def write_state(self, state: dict) -> None:
        # A fresh file of a random name (O_EXCL): in an isolated emulator's directory, which
        # every uid may write, an app could have put a symlink at any name init can guess.
        fd, tmp = tempfile.mkstemp(prefix=".init-", dir=self.root)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(state, indent=1, sort_keys=True))
            os.replace(tmp, self.state)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
