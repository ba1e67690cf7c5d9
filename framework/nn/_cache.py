"""The compilation cache, the runtime's side: tokens per step, file names, descriptors.

``Compilation.setCaching(cacheDir, token)`` (``ANeuralNetworksCompilation_setCaching``)
gives a directory the app owns and a 32-byte token (``IDevice.BYTE_SIZE_OF_CACHE_TOKEN``)
naming the model. The runtime never reads the files; as Android 10's does, it:

- derives one token per prepared step: SHA-256 of the app's token, then (for a step of a
  partitioned plan) the indexes of the step's operations, then the device's name, its
  version string and the execution preference, so that two steps, two devices, two
  driver builds or two preferences never share files;
- names the files after that token: its 32 bytes as 64 letters ``A``..``P`` (low nibble
  first), then one letter per file, ``A``, ``B``... for the model cache files and ``a``,
  ``b``... for the data cache files, as many as the device's
  ``getNumberOfCacheFilesNeeded`` asks (a device asking none is not cached);
- first asks the device to ``prepareModelFromCache`` from the existing files (opened
  read-only); when they are missing or the device refuses them (corrupt, truncated,
  another driver build) it prepares in full with ``prepareModelWithCache``, handing the
  files opened for writing (created mode 0600), which the driver fills.

A directory that cannot hold the files only costs the cache: the model is prepared in
full, uncached, and the compilation succeeds.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Sequence
from typing import Any

from framework.binder import ParcelFileDescriptor
from interfaces.android.hardware.neuralnetworks import IDevice

from ._errors import BadDataError

__all__ = ["CacheFiles", "checkCaching", "stepToken"]

BYTE_SIZE_OF_CACHE_TOKEN = IDevice.BYTE_SIZE_OF_CACHE_TOKEN
MAX_NUMBER_OF_CACHE_FILES = IDevice.MAX_NUMBER_OF_CACHE_FILES


def checkCaching(cacheDir: Any, token: Any) -> tuple[str, bytes]:
    """``setCaching``'s arguments, checked: a directory path and exactly 32 bytes."""
    if not isinstance(cacheDir, (str, os.PathLike)) or not os.fspath(cacheDir):
        raise BadDataError(f"setCaching: cacheDir is a directory path, not {cacheDir!r}")
    if not isinstance(token, (bytes, bytearray, memoryview)) or len(bytes(token)) != BYTE_SIZE_OF_CACHE_TOKEN:
        raise BadDataError(f"setCaching: the token is {BYTE_SIZE_OF_CACHE_TOKEN} bytes, not {token!r:.80}")
    return os.fspath(cacheDir), bytes(token)


def stepToken(
    token: bytes, deviceName: str, deviceVersion: str, preference: int, operations: Sequence[int] | None
) -> bytes:
    """The token of one prepared step; ``operations`` is None for a plan of one step."""
    h = hashlib.sha256(token)
    if operations is not None:
        h.update(b"step")
        h.update(struct.pack(f"<{len(operations)}I", *operations))
    for text in (deviceName, deviceVersion):
        raw = text.encode()
        h.update(struct.pack("<I", len(raw)) + raw)
    h.update(struct.pack("<i", int(preference)))
    return h.digest()


def _base_name(token: bytes) -> str:
    return "".join(chr(ord("A") + (b & 0x0F)) + chr(ord("A") + (b >> 4)) for b in token)


class CacheFiles:
    """The cache file paths of one step on one device."""

    def __init__(self, cacheDir: str, token: bytes, numModelCache: int, numDataCache: int) -> None:
        base = os.path.join(cacheDir, _base_name(token))
        self.token = token
        self.model = [base + chr(ord("A") + i) for i in range(numModelCache)]
        self.data = [base + chr(ord("a") + i) for i in range(numDataCache)]

    @staticmethod
    def counts(answer: Any) -> tuple[int, int] | None:
        """A device's ``NumberOfCacheFiles``, or None when it caches nothing or answers nonsense."""
        try:
            n_model, n_data = int(answer.numModelCache), int(answer.numDataCache)
        except (AttributeError, TypeError, ValueError):
            return None
        if not (0 <= n_model <= MAX_NUMBER_OF_CACHE_FILES and 0 <= n_data <= MAX_NUMBER_OF_CACHE_FILES):
            return None
        return (n_model, n_data) if n_model or n_data else None

    def exist(self) -> bool:
        return all(os.path.isfile(p) for p in (*self.model, *self.data))

    def open(self, *, write: bool) -> tuple[list[ParcelFileDescriptor], list[ParcelFileDescriptor]]:
        """Descriptors of the files (read-only, or created for writing); ``OSError`` if one fails."""
        flags = (os.O_RDWR | os.O_CREAT) if write else os.O_RDONLY
        opened: list[ParcelFileDescriptor] = []
        try:
            for path in (*self.model, *self.data):
                opened.append(ParcelFileDescriptor(os.open(path, flags | os.O_CLOEXEC, 0o600)))
        except OSError:
            for f in opened:
                f.close()
            raise
        return opened[: len(self.model)], opened[len(self.model) :]
