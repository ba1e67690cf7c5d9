"""Logcat-style log lines for system_server: ``time pid tid level tag: message``.

``MM-DD HH:MM:SS.mmm  pid  tid L tag: message``, as ``adb logcat -v threadtime`` prints
them, so a platform engineer's eye (and ``npuemu logcat``) reads them as it reads a
phone's. The tag is the Python logger's name (``NpuManagerService``,
``ActivityManager``, ``PackageManager``, ``ThermalService``), the level its first letter.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["LogcatFormatter", "configure_logcat"]

_LEVELS = {logging.DEBUG: "D", logging.INFO: "I", logging.WARNING: "W", logging.ERROR: "E", logging.CRITICAL: "F"}


class LogcatFormatter(logging.Formatter):
    """Formats a record as one logcat ``threadtime`` line (tracebacks follow it)."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(record.created))
        level = _LEVELS.get(record.levelno, "V" if record.levelno < logging.DEBUG else "I")
        tid = getattr(record, "native_tid", None) or threading.get_native_id()
        line = f"{stamp}.{int(record.msecs):03d} {record.process:5d} {tid:5d} {level} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logcat(level: str | int = "INFO", path: str | None = None) -> logging.Handler:
    """Send every log record of this process, as logcat lines, to stderr or ``path``."""
    handler: logging.Handler = logging.FileHandler(path) if path else logging.StreamHandler()
    handler.setFormatter(LogcatFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    return handler
