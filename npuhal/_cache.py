"""The HAL's compilation cache: what ``prepareModelWithCache`` writes and
``prepareModelFromCache`` reads back.

The runtime owns the files (it names them, opens them and hands the HAL their
descriptors); what is in them is the driver's business. npuemu's HAL stores the model
exactly as the driver loaded it, so that preparing the same model again needs no
``prepareModel``: the runtime sends two descriptors and a token instead of the graph and
its weights, and the HAL hands the driver the stored model (which the driver still
validates as it loads: the emulated driver has no compilation worth skipping beyond that).

- the *model cache* (one file): ``MAGIC_MODEL``, the SHA-256 of the rest, then a msgpack
  array: format version, device name, the device's version string (a new driver build
  invalidates every cache), the cache token, the execution preference, the ``Model``
  parcelable without its pools (graph, ``operandValues``, the relaxed flag), the size of
  each pool, and the SHA-256 of the data cache's payload;
- the *data cache* (one file): ``MAGIC_DATA``, the SHA-256 of the rest, then the pools'
  bytes back to back (the weights).

Reading checks everything: magic, both checksums, the token, device and version, the
pool sizes against the data's length, and the model's own decoding. Any mismatch is a
:class:`CacheError` with its reason (the HAL answers ``GENERAL_FAILURE`` and the runtime
prepares the model in full): a truncated, corrupt or foreign cache is never loaded.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Any

import msgpack

from framework.binder import BadParcelableException, SharedMemory
from interfaces.android.hardware.neuralnetworks import ExecutionPreference, IDevice, Model

__all__ = ["CacheError", "NUM_DATA_CACHE", "NUM_MODEL_CACHE", "read_cache", "write_cache"]

#: How many files of each kind every device of this HAL asks for.
NUM_MODEL_CACHE = 1
NUM_DATA_CACHE = 1

MAGIC_MODEL = b"NPUEMU\x01M"
MAGIC_DATA = b"NPUEMU\x01D"
FORMAT = 1
_DIGEST = 32
# A cache larger than this is refused unread (weights of the emulated devices are
# far smaller; the emulated size of a "2 GB" model is a number, not bytes).
_MAX_FILE_BYTES = 1 << 31


class CacheError(Exception):
    """The cache cannot be used; the message says why."""


def _frame(magic: bytes, payload: bytes) -> bytes:
    return magic + hashlib.sha256(payload).digest() + payload


def _unframe(magic: bytes, data: bytes, what: str) -> bytes:
    head = len(magic) + _DIGEST
    if len(data) < head or data[: len(magic)] != magic:
        raise CacheError(f"the {what} is not an npuemu cache (or is truncated)")
    payload = data[head:]
    if hashlib.sha256(payload).digest() != data[len(magic) : head]:
        raise CacheError(f"the {what}'s checksum does not match: corrupt or truncated")
    return payload


def _check_files(files: Any, count: int, what: str) -> list[int]:
    files = list(files or ())
    if len(files) != count:
        raise ValueError(f"{count} {what} file(s) expected (getNumberOfCacheFilesNeeded), got {len(files)}")
    fds = []
    for f in files:
        if f is None:
            raise ValueError(f"a {what} file is null")
        fds.append(f.fileno())
    return fds


def check_cache_args(model_cache: Any, data_cache: Any, token: Any) -> tuple[int, int, bytes]:
    """The two descriptors and the token, or ``ValueError`` naming what is wrong."""
    if not isinstance(token, (bytes, bytearray)) or len(token) != IDevice.BYTE_SIZE_OF_CACHE_TOKEN:
        raise ValueError(f"the cache token is {IDevice.BYTE_SIZE_OF_CACHE_TOKEN} bytes, not {token!r:.60}")
    (model_fd,) = _check_files(model_cache, NUM_MODEL_CACHE, "model cache")
    (data_fd,) = _check_files(data_cache, NUM_DATA_CACHE, "data cache")
    return model_fd, data_fd, bytes(token)


def _read_all(fd: int, what: str) -> bytes:
    try:
        st = os.fstat(fd)
    except OSError as exc:
        raise CacheError(f"the {what} cannot be read: {exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CacheError(f"the {what} is not a regular file")
    if st.st_size > _MAX_FILE_BYTES:
        raise CacheError(f"the {what} is {st.st_size} bytes, more than a cache may be")
    chunks, offset = [], 0
    while offset < st.st_size:
        try:
            chunk = os.pread(fd, st.st_size - offset, offset)
        except OSError as exc:
            raise CacheError(f"the {what} cannot be read: {exc}") from None
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    os.ftruncate(fd, 0)
    view, offset = memoryview(data), 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)


def write_cache(
    model_fd: int, data_fd: int, *, token: bytes, device: str, version: str, preference: int, model: Model,
    pools: list[bytes],
) -> None:
    """Store ``model`` (whose pools' bytes are ``pools``) for ``token``; ``OSError`` if a file refuses."""
    data = b"".join(pools)
    graph = Model(
        main=model.main, referenced=[], operandValues=model.operandValues, pools=[],
        relaxComputationFloat32toFloat16=model.relaxComputationFloat32toFloat16,
    )
    payload = msgpack.packb(
        [FORMAT, device, version, token, int(preference), graph.to_wire(), [len(p) for p in pools],
         hashlib.sha256(data).digest()],
        use_bin_type=True,
    )
    _write_all(data_fd, _frame(MAGIC_DATA, data))
    _write_all(model_fd, _frame(MAGIC_MODEL, payload))


def read_cache(model_fd: int, data_fd: int, *, token: bytes, device: str, version: str) -> tuple[Model, int]:
    """The model stored for ``token`` (its pools new ``SharedMemory`` regions) and its preference."""
    payload = _unframe(MAGIC_MODEL, _read_all(model_fd, "model cache"), "model cache")
    try:
        fields = msgpack.unpackb(payload, raw=False, strict_map_key=True, max_array_len=1 << 24)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise CacheError(f"the model cache does not decode: {exc}") from None
    if not isinstance(fields, list) or len(fields) != 8 or fields[0] != FORMAT:
        raise CacheError("the model cache has another format")
    _, stored_device, stored_version, stored_token, preference, wire, sizes, data_digest = fields
    if stored_token != token:
        raise CacheError("the cache was written for another token")
    if stored_device != device or stored_version != version:
        raise CacheError(f"the cache was written by {stored_device} {stored_version!r}, not {device} {version!r}")
    if preference not in ExecutionPreference._value2member_map_:
        raise CacheError(f"the cache names an unknown preference {preference!r}")
    data = _unframe(MAGIC_DATA, _read_all(data_fd, "data cache"), "data cache")
    if hashlib.sha256(data).digest() != data_digest:
        raise CacheError("the data cache belongs to another model cache")
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes) or sum(sizes) != len(data):
        raise CacheError("the pool sizes do not add up to the data cache")
    try:
        graph = Model.from_wire(wire)
    except BadParcelableException as exc:
        raise CacheError(f"the model in the cache does not decode: {exc}") from None
    pools, offset = [], 0
    try:
        for n in sizes:
            region = SharedMemory.create("npuhal-cached-pool", max(n, 1))
            pools.append(region)
            if n:
                mapping = region.mapReadWrite()
                try:
                    mapping[:n] = data[offset : offset + n]
                finally:
                    mapping.close()
            offset += n
    except BaseException:
        for region in pools:
            region.close()
        raise
    return graph.replace(pools=pools), int(preference)
