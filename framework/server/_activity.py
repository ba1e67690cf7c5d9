"""The activity manager's state: which app processes run, and how important each is.

This is the pure half of system_server's activity manager. The half with I/O (it
spawns app processes, registers pid -> uid with the servicemanager, watches them die,
and serves ``npuemu am``) drives an ``ActivityState`` and forwards the change records
it returns to the ``npu`` service, which turns importance into scheduling priority.

Importance
==========

Android's ``ActivityManager.RunningAppProcessInfo`` importance values; lower is more
important. The ``npu`` service ranks uids by it (AOSP's PriorityManager takes a uid's
priority from it) and maps it to the HAL's ``SchedulingConfig``:

==========================  =====  ===============================================
name                        value  meaning
==========================  =====  ===============================================
``foreground``                100  the top activity, what the user is looking at
``foreground_service``        125  a foreground service (a notification is shown)
``visible``                   200  visible but not top (an overlay, split screen)
``perceptible``               230  not visible, but the user notices (music)
``service``                   300  a started background service (a job)
``top_sleeping``              325  the top activity while the screen is off
``cached``                    400  kept in memory, may be killed at any time
``gone``                     1000  no process
==========================  =====  ===============================================

``parse_importance`` reads any of these as a name (any case, ``-`` or ``_``, with or
without ``IMPORTANCE_``) or a number, as ``npuemu am set-importance`` and
``npuemu launch --importance`` take them.

Importance values come out of this module as plain ``int``, as Android's do, so they
go unchanged into the ``npu`` service's arbiter and priority mapping (which check for
exactly ``int``) and onto the wire. ``Importance`` is the enum that names them:
``Importance(200).label == "visible"``, or ``importance_name(200)``.

The model
=========

One process per app uid (there are no shared uids, and an app is one process). A uid
is *running* from ``process_started`` until ``process_died``; while running it has a
pid and an importance below ``gone``. After death the uid is remembered with
importance ``gone`` (``getUidImportance`` answers ``gone`` for it, as for a uid never
seen), and it may start again with a new pid.

Every call that changes something returns a list of ``UidImportanceChange`` records,
oldest first, and a call that changes nothing returns ``[]``, so a follower never sees
a duplicate (Android's ``OnUidImportanceListener`` is likewise only told of changes).
A call that is wrong (an unknown package, a pid that is already someone else's, a
start of a running uid) raises and changes nothing.

The launch importance
=====================

An app's manifest may name the importance ``npuemu launch`` gives it by default::

    <application>
        <meta-data android:name="npuemu.launch.importance" android:value="foreground" />
    </application>

``launch_importance(info.metaData)`` reads it (``foreground`` if absent).
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

from framework.binder import FIRST_APPLICATION_UID, IllegalArgumentException, IllegalStateException

__all__ = [
    "Importance",
    "IMPORTANCE_FOREGROUND",
    "IMPORTANCE_FOREGROUND_SERVICE",
    "IMPORTANCE_VISIBLE",
    "IMPORTANCE_PERCEPTIBLE",
    "IMPORTANCE_SERVICE",
    "IMPORTANCE_TOP_SLEEPING",
    "IMPORTANCE_CACHED",
    "IMPORTANCE_GONE",
    "META_LAUNCH_IMPORTANCE",
    "parse_importance",
    "importance_name",
    "launch_importance",
    "ChangeKind",
    "UidImportanceChange",
    "RunningAppProcessInfo",
    "ActivityState",
]


class Importance(enum.IntEnum):
    """``ActivityManager.RunningAppProcessInfo.IMPORTANCE_*``; lower is more important."""

    FOREGROUND = 100
    FOREGROUND_SERVICE = 125
    VISIBLE = 200
    PERCEPTIBLE = 230
    SERVICE = 300
    TOP_SLEEPING = 325
    CACHED = 400
    GONE = 1000

    @property
    def label(self) -> str:
        """The name people type and read: ``foreground_service``."""
        return self.name.lower()


IMPORTANCE_FOREGROUND = int(Importance.FOREGROUND)
IMPORTANCE_FOREGROUND_SERVICE = int(Importance.FOREGROUND_SERVICE)
IMPORTANCE_VISIBLE = int(Importance.VISIBLE)
IMPORTANCE_PERCEPTIBLE = int(Importance.PERCEPTIBLE)
IMPORTANCE_SERVICE = int(Importance.SERVICE)
IMPORTANCE_TOP_SLEEPING = int(Importance.TOP_SLEEPING)
IMPORTANCE_CACHED = int(Importance.CACHED)
IMPORTANCE_GONE = int(Importance.GONE)

META_LAUNCH_IMPORTANCE = "npuemu.launch.importance"


def _valid_levels() -> str:
    return ", ".join(f"{level.label} ({level.value})" for level in Importance)


def parse_importance(level: object) -> int:
    """An importance value (a plain int) from a name (``"visible"``, ``"FOREGROUND_SERVICE"``,
    ``"foreground-service"``, ``"IMPORTANCE_CACHED"``) or a number (``200``, ``"200"``).

    Anything else is an ``IllegalArgumentException`` (a ValueError) that lists the valid
    levels, and suggests the nearest name for a misspelling.
    """
    if isinstance(level, bool):
        raise IllegalArgumentException(f"{level!r} is not an importance; use one of {_valid_levels()}")
    if isinstance(level, int):
        try:
            return int(Importance(level))
        except ValueError:
            raise IllegalArgumentException(
                f"{level} is not an importance value; use one of {_valid_levels()}"
            ) from None
    if not isinstance(level, str):
        raise IllegalArgumentException(
            f"an importance is a name or a number, not {type(level).__name__}; use one of {_valid_levels()}"
        )
    text = level.strip()
    if re.fullmatch(r"[+-]?[0-9]+", text):
        return parse_importance(int(text))
    key = text.upper().replace("-", "_").replace(" ", "_")
    key = key.removeprefix("IMPORTANCE_")
    try:
        return int(Importance[key])
    except KeyError:
        pass
    labels = [member.label for member in Importance]
    close = difflib.get_close_matches(key.lower(), labels, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise IllegalArgumentException(f"unknown importance {level!r}{hint}; use one of {_valid_levels()}")


def importance_name(importance: int) -> str:
    """The label of a known importance value (``"visible"``); the number for any other."""
    try:
        return Importance(importance).label
    except ValueError:
        return str(importance)


def launch_importance(meta_data: Mapping[str, str], default: int = IMPORTANCE_FOREGROUND) -> int:
    """The importance an app's manifest asks to be launched at (``npuemu.launch.importance``).

    A bad value is an ``IllegalArgumentException`` that names the key, so a typo in a
    manifest is reported at launch with the list of valid names.
    """
    raw = meta_data.get(META_LAUNCH_IMPORTANCE)
    if raw is None:
        return default
    try:
        importance = parse_importance(raw)
    except IllegalArgumentException as e:
        raise IllegalArgumentException(f"<meta-data {META_LAUNCH_IMPORTANCE}>: {e.message}") from None
    if importance == IMPORTANCE_GONE:
        raise IllegalArgumentException(f"<meta-data {META_LAUNCH_IMPORTANCE}>: an app cannot be launched as gone")
    return importance


class ChangeKind(enum.Enum):
    """Why a uid's importance record changed."""

    STARTED = "started"  # a process started for the uid (from gone)
    IMPORTANCE = "importance"  # a running process's importance changed
    DIED = "died"  # the process died (to gone)


@dataclass(frozen=True, slots=True)
class UidImportanceChange:
    """One change, for the ``npu`` service to follow (``OnUidImportanceListener``).

    ``pid`` is the process concerned: the new one on STARTED, the dead one on DIED.
    ``old`` is ``GONE`` on STARTED and ``new`` is ``GONE`` on DIED.
    """

    kind: ChangeKind
    uid: int
    package: str
    pid: int
    old: int
    new: int

    def to_dict(self) -> dict:
        return {
            "kind": self.kind.value,
            "uid": self.uid,
            "package": self.package,
            "pid": self.pid,
            "old": self.old,
            "new": self.new,
        }


@dataclass(frozen=True, slots=True)
class RunningAppProcessInfo:
    """A running app process (``ActivityManager.RunningAppProcessInfo``)."""

    processName: str
    pid: int
    uid: int
    importance: int


@dataclass(slots=True)
class _UidRecord:
    uid: int
    package: str
    pid: int | None = None
    importance: int = IMPORTANCE_GONE
    starts: int = 0
    deaths: int = 0


def _check_int(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise IllegalArgumentException(f"a {what} is an int, not {type(value).__name__} {value!r}")
    if value < minimum:
        raise IllegalArgumentException(f"a {what} is at least {minimum}, not {value}")
    return value


class ActivityState:
    """Running app processes and their importance, with change records for followers.

    ``first_app_uid`` is the lowest uid an app may run as (Android's
    ``FIRST_APPLICATION_UID``, 10000): system processes are not the activity
    manager's to track here.
    """

    def __init__(self, *, first_app_uid: int = FIRST_APPLICATION_UID) -> None:
        self._first_app_uid = _check_int(first_app_uid, "uid", 0)
        self._uids: dict[int, _UidRecord] = {}
        self._by_package: dict[str, int] = {}
        self._by_pid: dict[int, int] = {}

    # --- inputs

    def process_started(
        self, uid: int, package: str, pid: int, importance: object = IMPORTANCE_FOREGROUND
    ) -> list[UidImportanceChange]:
        """Record that ``package`` now runs as ``uid`` in process ``pid``.

        ``importance`` is anything ``parse_importance`` reads, except ``gone``.
        """
        uid = _check_int(uid, "uid", 0)
        if uid < self._first_app_uid:
            raise IllegalArgumentException(
                f"uid {uid} is not an application uid (apps run as {self._first_app_uid} and up)"
            )
        if not isinstance(package, str) or not package:
            raise IllegalArgumentException(f"a package name is a non-empty string, not {package!r}")
        pid = _check_int(pid, "pid", 1)
        level = parse_importance(importance)
        if level == IMPORTANCE_GONE:
            raise IllegalArgumentException("a process cannot start as gone; give the importance it starts at")
        record = self._uids.get(uid)
        if record is not None and record.package != package:
            raise IllegalStateException(f"uid {uid} belongs to {record.package}, not {package}")
        owner = self._by_package.get(package)
        if owner is not None and owner != uid:
            raise IllegalStateException(f"{package} runs as uid {owner}, not {uid}")
        if record is not None and record.pid is not None:
            raise IllegalStateException(f"{package} (uid {uid}) is already running as pid {record.pid}")
        if pid in self._by_pid:
            other = self._uids[self._by_pid[pid]]
            raise IllegalStateException(f"pid {pid} is already {other.package} (uid {other.uid})")

        if record is None:
            record = self._uids[uid] = _UidRecord(uid, package)
            self._by_package[package] = uid
        record.pid = pid
        record.importance = level
        record.starts += 1
        self._by_pid[pid] = uid
        return [UidImportanceChange(ChangeKind.STARTED, uid, package, pid, IMPORTANCE_GONE, level)]

    def set_importance(self, who: int | str, importance: object) -> list[UidImportanceChange]:
        """Set a running app's importance; ``who`` is its uid or package name.

        Returns ``[]`` when the importance is already that. ``gone`` is refused: a
        process leaves by dying (``npuemu am kill``), not by being declared gone.
        """
        level = parse_importance(importance)
        record = self._running(who)
        if level == IMPORTANCE_GONE:
            raise IllegalArgumentException(
                f"{record.package} cannot be set to gone while it runs; kill it instead (npuemu am kill {record.package})"
            )
        if level == record.importance:
            return []
        old, record.importance = record.importance, level
        return [UidImportanceChange(ChangeKind.IMPORTANCE, record.uid, record.package, record.pid, old, level)]

    def process_died(self, pid: int) -> list[UidImportanceChange]:
        """Record that process ``pid`` is gone, however it went.

        An unknown pid (never an app's, or already reported) returns ``[]``: death
        notices race with kills, and the second report of one death is not an error.
        """
        pid = _check_int(pid, "pid", 1)
        uid = self._by_pid.pop(pid, None)
        if uid is None:
            return []
        record = self._uids[uid]
        old = record.importance
        record.pid = None
        record.importance = IMPORTANCE_GONE
        record.deaths += 1
        return [UidImportanceChange(ChangeKind.DIED, uid, record.package, pid, old, IMPORTANCE_GONE)]

    # --- lookups (ActivityManager's names)

    def getUidImportance(self, uid: int) -> int:
        """The uid's importance; ``gone`` for a uid not running or never seen."""
        record = self._uids.get(_check_int(uid, "uid", 0))
        return IMPORTANCE_GONE if record is None else record.importance

    def getPackageImportance(self, package: str) -> int:
        uid = self._by_package.get(package)
        return IMPORTANCE_GONE if uid is None else self._uids[uid].importance

    def getRunningAppProcesses(self) -> list[RunningAppProcessInfo]:
        """Running processes, most important first (then by uid)."""
        running = [r for r in self._uids.values() if r.pid is not None]
        running.sort(key=lambda r: (r.importance, r.uid))
        return [RunningAppProcessInfo(r.package, r.pid, r.uid, r.importance) for r in running]

    def pid_of(self, who: int | str) -> int | None:
        """The running pid of a uid or package, or None."""
        record = self._find(who)
        return None if record is None else record.pid

    def uid_of_pid(self, pid: int) -> int | None:
        return self._by_pid.get(pid)

    def is_running(self, who: int | str) -> bool:
        return self.pid_of(who) is not None

    # --- dumpsys

    def dump(self) -> dict:
        """Plain data for ``dumpsys activity``: processes, most important first, then
        uids that have run and are gone."""

        def row(r: _UidRecord) -> dict:
            return {
                "uid": r.uid,
                "package": r.package,
                "pid": r.pid,
                "importance": r.importance,
                "importance_name": importance_name(r.importance),
                "starts": r.starts,
                "deaths": r.deaths,
            }

        records = sorted(self._uids.values(), key=lambda r: (r.importance, r.uid))
        return {
            "processes": [row(r) for r in records if r.pid is not None],
            "gone": [row(r) for r in records if r.pid is None],
        }

    # --- internals

    def _find(self, who: int | str) -> _UidRecord | None:
        if isinstance(who, str):
            uid = self._by_package.get(who)
            return None if uid is None else self._uids[uid]
        return self._uids.get(_check_int(who, "uid", 0))

    def _running(self, who: int | str) -> _UidRecord:
        record = self._find(who)
        if record is None:
            raise IllegalArgumentException(f"no app {who!r} has been started")
        if record.pid is None:
            raise IllegalStateException(f"{record.package} (uid {record.uid}) is not running")
        return record
