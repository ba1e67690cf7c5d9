"""Python logging in logcat's ``threadtime`` form: ``time pid tid level tag: message``.

::

    12-01 21:40:02.117  4242  4242 I android.hardware.npu: serving IScheduling/default ...

The tag is the logger's name (``android.hardware.npu``, ``binder``...), the level one
of logcat's letters (V D I W E F).  A record with an exception gets the traceback on
the following lines, each with the same prefix, as logcat prints a multi-line message.
"""

from __future__ import annotations

import logging
import os
import threading
import time

__all__ = ["LogcatFormatter", "LEVEL_LETTERS"]

LEVEL_LETTERS = {
    logging.DEBUG: "D",
    logging.INFO: "I",
    logging.WARNING: "W",
    logging.ERROR: "E",
    logging.CRITICAL: "F",
}


def _letter(levelno: int) -> str:
    if levelno < logging.DEBUG:
        return "V"
    for threshold in (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO):
        if levelno >= threshold:
            return LEVEL_LETTERS[threshold]
    return "D"


class LogcatFormatter(logging.Formatter):
    """Formats each record (and each line of it) as logcat's threadtime."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message = f"{message}\n{self.formatException(record.exc_info)}"
        if record.stack_info:
            message = f"{message}\n{self.formatStack(record.stack_info)}"
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(record.created))
        ms = int(record.msecs)
        tid = threading.get_native_id() if record.thread == threading.get_ident() else record.thread
        prefix = f"{stamp}.{ms:03d} {os.getpid():5d} {tid % 100000:5d} {_letter(record.levelno)} {record.name}: "
        return "\n".join(prefix + line for line in message.splitlines() or [""])
