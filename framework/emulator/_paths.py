"""Where an emulator lives: its runtime directory and the files init keeps in it.

One emulator, one runtime directory (0700): the binder's sockets, the shell token,
the log, init's pid, the trace recorder's output. Several emulators run side by side
in different directories. The directory is chosen, in order, by ``--runtime-dir``,
by ``$NPUEMU_RUNTIME_DIR`` (the binder's ``RUNTIME_DIR_ENV``, which every process of
the emulator also inherits), or is ``/tmp/npuemu-<uid>/default``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from framework.binder import RUNTIME_DIR_ENV

__all__ = ["RuntimeFiles", "default_runtime_dir", "pid_alive", "resolve_runtime_dir"]


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

    def read_state(self) -> dict | None:
        """init's state if an init that is still alive wrote it, else None."""
        try:
            state = json.loads(self.state.read_text())
        except (FileNotFoundError, ValueError):
            return None
        if not isinstance(state, dict) or not pid_alive(int(state.get("init_pid", -1))):
            return None
        return state

    def write_state(self, state: dict) -> None:
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, self.state)
