"""Logcat lines: writing init's own, adopting the children's, reading them back; the ring they go to.

The format is ``adb logcat -v threadtime``'s: ``MM-DD HH:MM:SS.mmm  pid  tid L tag:
message``. system_server and the HAL write such lines themselves. Whatever a child
prints that is not one (the servicemanager's Python logging, a traceback, a stray
print) init adopts as Android's ``logwrapper`` does: it becomes a line of the child's
pid under the child's name, so nothing a process says is lost and every line of the
log parses.

The log is a bounded ring, as logd's buffers are (:class:`LogRing`): at most
``LOGCAT_BUFFER_BYTES`` on disk, the oldest lines going first, whatever the stack and
its apps print (an app's output reaches it through system_server and init). A full
disk costs lines, never a process: a line that cannot be written is dropped, and the
first line written again says how many were.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ._paths import open_own

__all__ = [
    "LEVELS",
    "LOGCAT_BUFFER_BYTES",
    "LOGCAT_LINE_MAX",
    "LogFilter",
    "LogLine",
    "LogRing",
    "adopt_line",
    "format_line",
    "log_parts",
    "parse_line",
    "parse_lines",
]

#: The most the emulator's log takes on disk: logd's default size of a log buffer
#: (``ro.logd.size``, 256 KiB). One buffer, not logd's several (main, system, crash...):
#: every process of the stack writes the one ``logcat`` file.
LOGCAT_BUFFER_BYTES = 256 * 1024

#: The longest line kept whole: logd's ``LOGGER_ENTRY_MAX_PAYLOAD`` (4068 bytes). A child
#: that prints more without a newline has it cut into lines of this size, so init never
#: holds more than this of any child's output.
LOGCAT_LINE_MAX = 4068

#: What a full disk, a quota or a file too large says: the write fails, the stack goes on.
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)

#: Logcat's priorities, lowest first.
LEVELS = "VDIWEF"

_LINE = re.compile(
    r"^(?P<time>\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\s+(?P<pid>\d+)\s+(?P<tid>\d+)\s+"
    r"(?P<level>[VDIWEF])\s+(?P<tag>[^:\s][^:]*?)\s*: ?(?P<message>.*)$"
)
# The servicemanager's (and any plain Python) logging.basicConfig format:
# "2026-12-01 21:00:00,123 4242 INFO servicemanager: message"
_PYLOG = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<pid>\d+) (?P<level>[A-Z]+) (?P<tag>[^:\s][^:]*?): (?P<message>.*)$"
)


@dataclasses.dataclass(frozen=True, slots=True)
class LogLine:
    """One parsed logcat line (continuation lines of a traceback are their own message)."""

    time: str
    pid: int
    tid: int
    level: str
    tag: str
    message: str

    def __str__(self) -> str:
        return f"{self.time} {self.pid:5d} {self.tid:5d} {self.level} {self.tag}: {self.message}"


def _stamp(now: float | None = None) -> str:
    now = time.time() if now is None else now
    return time.strftime("%m-%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"


def format_line(pid: int, tid: int, level: str, tag: str, message: str, *, now: float | None = None) -> str:
    """One logcat line (no newline) stamped ``now`` (default: the wall clock)."""
    if level not in LEVELS or len(level) != 1:
        raise ValueError(f"bad logcat level {level!r}: one of {', '.join(LEVELS)}")
    return str(LogLine(_stamp(now), pid, tid, level, tag, message))


def parse_line(text: str) -> LogLine | None:
    """The line parsed, or None if it is not in logcat form."""
    m = _LINE.match(text.rstrip("\n"))
    if m is None:
        return None
    return LogLine(m["time"], int(m["pid"]), int(m["tid"]), m["level"], m["tag"], m["message"])


def adopt_line(text: str, pid: int, tag: str, *, now: float | None = None) -> str:
    """A child's output line in logcat form: kept if it already is, else wrapped as ``pid``/``tag``."""
    text = text.rstrip("\n")
    if _LINE.match(text):
        return text
    m = _PYLOG.match(text)
    if m is not None:
        level = m["level"][0] if m["level"][0] in LEVELS else "I"
        if m["level"] == "CRITICAL":
            level = "F"
        return format_line(int(m["pid"]), int(m["pid"]), level, m["tag"], m["message"], now=now)
    # A traceback or a stray print: warn-level if it looks like a failure.
    level = "E" if text.startswith(("Traceback", "  File ")) or re.match(r"^\w+(Error|Exception)\b", text) else "I"
    return format_line(pid, pid, level, tag, text, now=now)


def parse_lines(lines: Iterable[str]) -> Iterator[LogLine]:
    """Parsed lines; a line not in logcat form continues the entry before it (tracebacks)."""
    last: LogLine | None = None
    for raw in lines:
        line = parse_line(raw)
        if line is None:
            if last is None or not raw.strip():
                continue
            line = dataclasses.replace(last, message=raw.rstrip("\n"))
        else:
            last = line
        yield line


@dataclasses.dataclass(frozen=True)
class LogFilter:
    """``npuemu logcat [--pid N] -s TAG[:LEVEL] ...``: which lines to show.

    With no specs every line shows. ``TAG`` shows that tag at any level,
    ``TAG:W`` from warnings up, ``*:E`` every tag from errors up; a tag is matched
    exactly, or as a prefix ending in a dot (``android.hardware.npu`` shows
    ``android.hardware.npu.IScheduling`` too). ``pid`` keeps only that process's
    lines (``adb logcat --pid``), before the tags are looked at.
    """

    specs: tuple[tuple[str, str], ...] = ()
    pid: int | None = None

    @classmethod
    def parse(cls, specs: Iterable[str], pid: int | None = None) -> LogFilter:
        parsed = []
        for spec in specs:
            tag, _, level = spec.partition(":")
            level = (level or "V").upper()
            if not tag or level not in LEVELS or len(level) != 1:
                raise ValueError(f"bad filter {spec!r}: use TAG or TAG:LEVEL with LEVEL one of {', '.join(LEVELS)}")
            parsed.append((tag, level))
        if pid is not None and pid <= 0:
            raise ValueError(f"bad pid {pid}: a process id is 1 or more")
        return cls(tuple(parsed), pid)

    def __call__(self, line: LogLine) -> bool:
        if self.pid is not None and line.pid != self.pid:
            return False
        if not self.specs:
            return True
        for tag, level in self.specs:
            if tag == "*" or line.tag == tag or line.tag.startswith(tag + "."):
                return LEVELS.index(line.level) >= LEVELS.index(level)
        return False


def log_parts(path: Path) -> list[Path]:
    """The ring's files at ``path``, oldest first: ``logcat.1`` (the half before), ``logcat``."""
    return [path.with_name(path.name + ".1"), path]


class LogRing:
    """An append-only log bounded to ``size`` bytes on disk: two halves, the oldest dropped.

    Lines are appended to ``path`` (``O_APPEND``, one ``write`` each); when the next
    would take it past ``size / 2``, it becomes ``path.1`` (replacing the half before)
    and a new ``path`` starts. So the log takes at most ``size`` bytes and keeps at least
    the last ``size / 2``; :func:`log_parts` lists what to read, in order. ``write``
    never raises for a full disk: the line is dropped (``dropped`` counts them) and the
    next line that can be written is preceded by a warning saying how many went.
    """

    def __init__(self, path: Path, size: int = LOGCAT_BUFFER_BYTES) -> None:
        if size < 2 * LOGCAT_LINE_MAX:
            raise ValueError(f"a log ring of {size} bytes cannot hold two lines of {LOGCAT_LINE_MAX}")
        self.path = Path(path)
        self.size = size
        self.dropped = 0  # lines lost to a full disk since the last that was written
        self.dropped_total = 0
        self._why = ""
        self._cut = False  # a line was cut short and not ended
        self._fd = open_own(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self._written = os.fstat(self._fd).st_size

    def write(self, line: str) -> bool:
        """Append ``line`` (no newline); False if the disk refused it (it is dropped)."""
        if self._fd < 0:
            return False
        data = line.encode("utf-8", "replace")[: LOGCAT_LINE_MAX - 1] + b"\n"
        if self.dropped:
            note = format_line(os.getpid(), os.getpid(), "W", "logd",
                               f"{self.dropped} line(s) dropped: {self._why}").encode() + b"\n"
            if not self._append(note):
                self._drop()
                return False
            self.dropped = 0
        if not self._append(data):
            self._drop()
            return False
        return True

    def _drop(self) -> None:
        self.dropped += 1
        self.dropped_total += 1

    def _append(self, data: bytes) -> bool:
        if self._written + len(data) > self.size // 2:
            self._rotate()
        if self._cut:  # the last line was cut by a full disk: end it first, so this one parses
            data = b"\n" + data
        try:
            n = os.write(self._fd, data)
        except OSError as exc:
            if exc.errno not in _NO_SPACE:
                raise
            self._why = exc.strerror or os.strerror(exc.errno)
            return False
        self._written += n
        self._cut = n < len(data) and n > 0
        if n < len(data):  # the disk filled mid-line
            self._why = os.strerror(errno.ENOSPC)
            return False
        return True

    def _rotate(self) -> None:
        """``path`` becomes ``path.1`` (freeing the half before: room even on a full disk)."""
        try:
            os.replace(self.path, log_parts(self.path)[0])
        except FileNotFoundError:
            pass  # a rotation that failed half way left no current half to keep
        try:
            fd = open_own(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC)
        except OSError as exc:
            if exc.errno not in _NO_SPACE:
                raise
            # Not even an empty file fits: start this half again in place, so the ring
            # still never grows past its size.
            os.ftruncate(self._fd, 0)
            self._written = 0
            self._cut = False
            return
        os.close(self._fd)
        self._fd = fd
        self._written = 0
        self._cut = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
