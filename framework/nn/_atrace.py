"""The runtime's trace points: work done on the CPU, where the emulator's recorder reads it.

On a phone NNAPI marks its work with atrace, which writes to the kernel's
``trace_marker`` and lands in a Perfetto trace beside the drivers' events. Work on the
CPU device happens in the app's own process, where no HAL sees it; without a trace
point a trace would show an app whose model fell back to the CPU as doing nothing.

Here the marker is a file, ``trace_marker`` in the emulator's runtime directory: every
CPU step of an execution appends one JSON line (``O_APPEND``, one ``write`` of well
under ``PIPE_BUF``, so lines of several apps never interleave)::

    {"type": "cpu", "uid": 10003, "pid": 4242, "device": "nnapi-reference",
     "operations": 3, "why": "fallback", "failed_device": "emu-npu",
     "wall_start_ns": ..., "wall_end_ns": ...}

``why`` is ``planned`` when the compilation put the step on the CPU (the app chose
the CPU, or no driver supports its operations) and ``fallback`` when a driver failed
the run and it was redone on the CPU (``failed_device`` names the driver). Times are
``CLOCK_MONOTONIC``, which every process of the machine shares; init's recorder folds
the lines into its recording. A runtime on an in-memory binder (tests, the lab) has no
directory and writes nothing; the file stops growing at :data:`MAX_MARKER_BYTES`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["MAX_MARKER_BYTES", "TRACE_MARKER_NAME", "CpuTracer"]

#: The marker file's name in the runtime directory.
TRACE_MARKER_NAME = "trace_marker"
#: The file is not written past this size (a long run would otherwise fill the disk).
MAX_MARKER_BYTES = 64 << 20


class CpuTracer:
    """Appends a ``cpu`` record per CPU step; a no-op without a runtime directory."""

    def __init__(self, runtime_dir: str | os.PathLike[str] | None, uid: int, pid: int) -> None:
        self._path = None if runtime_dir is None else Path(runtime_dir) / TRACE_MARKER_NAME
        self._uid = uid
        self._pid = pid

    def step(self, wall_start_ns: int, wall_end_ns: int, operations: int, why: str,
             failed_device: str | None = None, device: str = "nnapi-reference") -> None:
        if self._path is None:
            return
        record: dict[str, Any] = {
            "type": "cpu", "uid": self._uid, "pid": self._pid, "device": device, "operations": operations,
            "why": why, "wall_start_ns": wall_start_ns, "wall_end_ns": wall_end_ns,
        }
        if failed_device is not None:
            record["failed_device"] = failed_device
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:  # the emulator's directory is gone or not ours: tracing is best effort
            self._path = None
            return
        try:
            if os.fstat(fd).st_size + len(line) <= MAX_MARKER_BYTES:
                os.write(fd, line)
        except OSError:
            pass
        finally:
            os.close(fd)
