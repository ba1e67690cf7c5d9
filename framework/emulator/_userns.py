"""Whether a user who is not root could have uid isolation through a user namespace.

Not as root, the way to real per-app uids is a user namespace (as rootless podman does):
init's user as the namespace's root and a subordinate uid and gid range (``/etc/subuid``,
``/etc/subgid``, granted by the machine's administrator) mapped to the namespace's uids
1..N, written for the namespace by the setuid ``newuidmap``/``newgidmap`` (Debian's
``uidmap`` package). The range must reach the last Android app uid
(``LAST_APPLICATION_UID``), since each app runs as its own.

``userns_check`` finds what such a boot would need and says what is missing, so a
nominal boot names the reason. npuemu does not yet enter the namespace: where everything
is there, the reason says that instead (README, "Security guarantees").
"""

from __future__ import annotations

import os
import pwd
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from framework.binder import LAST_APPLICATION_UID

__all__ = ["SUBORDINATE_IDS_NEEDED", "SubordinateRange", "subordinate_range", "userns_check"]

#: The namespace's uids 1..N come from the subordinate range: every Android uid up to the
#: last app uid must be mapped (system 1000, shell 2000, apps 10000..19999).
SUBORDINATE_IDS_NEEDED = LAST_APPLICATION_UID


@dataclass(frozen=True)
class SubordinateRange:
    """``count`` ids from ``start`` (a line ``user:start:count`` of /etc/subuid or /etc/subgid)."""

    start: int
    count: int


def subordinate_range(path: Path, uid: int, name: str | None) -> SubordinateRange | None:
    """The largest range ``path`` grants the user (by name or by number), or None."""
    try:
        text = path.read_text()
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        return None
    best: SubordinateRange | None = None
    for line in text.splitlines():
        fields = line.strip().split(":")
        if len(fields) != 3 or fields[0] not in (str(uid), name):
            continue
        try:
            start, count = int(fields[1]), int(fields[2])
        except ValueError:
            continue  # a malformed line grants nothing, as newuidmap reads it
        if start >= 0 and count > 0 and (best is None or count > best.count):
            best = SubordinateRange(start, count)
    return best


def userns_check(
    uid: int | None = None,
    *,
    etc: Path = Path("/etc"),
    proc: Path = Path("/proc"),
    which: Callable[[str], str | None] = shutil.which,
) -> str:
    """Why a boot by ``uid`` (this process's by default) cannot have uid isolation in a user namespace.

    Each missing piece is named: user namespaces switched off, ``newuidmap``/``newgidmap``
    not installed, no subordinate range (or one too small) in ``etc``/subuid or subgid.
    """
    uid = os.getuid() if uid is None else uid
    try:
        name: str | None = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None
    who = f"user {name or uid}"
    try:
        if int((proc / "sys/user/max_user_namespaces").read_text()) == 0:
            return "user namespaces are switched off (/proc/sys/user/max_user_namespaces is 0)"
    except (FileNotFoundError, ValueError):
        return "this kernel has no user namespaces"
    missing = [tool for tool in ("newuidmap", "newgidmap") if which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (Debian's uidmap package)"
    for kind in ("subuid", "subgid"):
        granted = subordinate_range(etc / kind, uid, name)
        if granted is None:
            return f"{who} has no subordinate {kind[3:]} range in {etc / kind}"
        if granted.count < SUBORDINATE_IDS_NEEDED:
            return (f"{who}'s subordinate {kind[3:]} range in {etc / kind} has {granted.count} ids;"
                    f" Android's uids need {SUBORDINATE_IDS_NEEDED}")
    return f"{who} could have a user namespace with subordinate uids and gids, but npuemu does not enter one yet"
