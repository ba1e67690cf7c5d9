"""Logcat lines: writing init's own, adopting the children's, reading them back.

The format is ``adb logcat -v threadtime``'s: ``MM-DD HH:MM:SS.mmm  pid  tid L tag:
message``. system_server and the HAL write such lines themselves. Whatever a child
prints that is not one (the servicemanager's Python logging, a traceback, a stray
print) init adopts as Android's ``logwrapper`` does: it becomes a line of the child's
pid under the child's name, so nothing a process says is lost and every line of the
log parses.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterable, Iterator

__all__ = ["LEVELS", "LogLine", "LogFilter", "format_line", "adopt_line", "parse_line", "parse_lines"]

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
