"""Which build of a driver vts runs, and the record of builds it keeps with a run.

"getVersionString() differs for every new build" can only be judged against another
build.  vts gets one of three ways: it builds the driver's source twice with two build
ids (``--driver x.c``; the built-in reference driver's own source likewise); the
author names the previous build (``--previous-build old.so``); or a run's output
directory (``--output-dir``) keeps the builds earlier runs saw (``vts-builds.json``).

A build is keyed by its identity, not by its file: ``build_identity`` hashes what the
loader maps (the ELF sections a process sees: code, constants, data, symbols) and
leaves out what does not change the driver (debug sections, whose paths differ when
the same source is built in another directory, and build notes).  The same source
built anywhere with the same ``NPU_BUILD_ID`` is one build; a new build id, or any
change of code, is a new one.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

__all__ = ["BUILDS_RECORD", "build_identity", "load_builds", "save_builds"]

#: The record's file name in a run's output directory.
BUILDS_RECORD = "vts-builds.json"

_SHF_ALLOC = 0x2
_SHT_NOTE = 7
_SHT_NOBITS = 8


def build_identity(path: str | os.PathLike[str]) -> str:
    """sha256 (24 hex digits) of the ELF object's loaded sections, by name; ``ValueError``
    for a file that is not a 64-bit little-endian ELF object."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{os.fspath(path)} is not a 64-bit little-endian ELF object")
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names_at, names_size = headers[shstrndx][4], headers[shstrndx][5]
        names = data[names_at : names_at + names_size]
    except (struct.error, IndexError):
        raise ValueError(f"{os.fspath(path)}: truncated ELF section table") from None
    h = hashlib.sha256()
    for name_off, kind, flags, _addr, offset, size, *_ in headers:
        if not flags & _SHF_ALLOC or kind == _SHT_NOTE:
            continue
        name = names[name_off : names.index(b"\0", name_off)]
        h.update(name + b"\0" + struct.pack("<Q", size))
        if kind != _SHT_NOBITS:
            h.update(data[offset : offset + size])
    return h.hexdigest()[:24]


def load_builds(directory: Path) -> dict:
    """``{identity: {"label": ..., "versions": {device: version}}}`` from a run's output
    directory; empty when there is none yet. ``ValueError`` for a record that is not one."""
    path = directory / BUILDS_RECORD
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"the build record {path} is unreadable ({exc}); remove it") from None
    builds = data.get("builds") if isinstance(data, dict) else None
    if not isinstance(builds, dict):
        raise ValueError(f"the build record {path} has no 'builds' table; remove it")
    return builds


def save_builds(directory: Path, builds: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / BUILDS_RECORD
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"builds": builds}, indent=1, sort_keys=True))
    os.replace(tmp, path)
