"""The HAL's compilation cache format (npuhal._cache): every damage is a CacheError.

Each test writes a sound cache of a small model into real files, damages it one way, and
reads it back; the reader must name the problem, never load a model from it, never raise
anything else. Through the whole stack (runtime, HAL, driver) the same cases are in
test_nn_runtime.py's caching tests.
"""

from __future__ import annotations

import hashlib
import os

import msgpack
import numpy as np
import pytest

from npuhal import FuseCode, ModelBuilder, OperationType
from npuhal._cache import MAGIC_MODEL, CacheError, read_cache, write_cache

TOKEN = bytes(range(32))


def small_model():
    rng = np.random.default_rng(1)
    m = ModelBuilder()
    x = m.input((1, 40))
    w = rng.standard_normal((8, 40), dtype=np.float32)  # large enough for a pool
    y = m.operation(OperationType.FULLY_CONNECTED, [x, m.constant(w), m.constant(np.zeros(8, np.float32)),
                                                   m.int32(FuseCode.NONE)], (1, 8))
    m.output(y)
    return m.build()


@pytest.fixture
def files(tmp_path):
    model = small_model()
    pools = [bytes(p.mapReadOnly()) for p in model.pools]
    paths = tmp_path / "model", tmp_path / "data"
    fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o600) for p in paths]
    write_cache(*fds, token=TOKEN, device="emu-npu", version="v1", preference=0, model=model, pools=pools)
    yield model, pools, paths, fds
    for fd in fds:
        os.close(fd)


def read(fds, **changes):
    args = dict(token=TOKEN, device="emu-npu", version="v1") | changes
    return read_cache(*fds, **args)


def test_a_sound_cache_gives_the_model_back(files):
    model, pools, _, fds = files
    got, preference = read(fds)
    assert preference == 0
    assert got.main == model.main and got.operandValues == model.operandValues
    assert [bytes(p.mapReadOnly())[: len(b)] for p, b in zip(got.pools, pools, strict=True)] == pools
    for p in got.pools:
        p.close()


@pytest.mark.parametrize("changes, reason", [
    ({"token": bytes(32)}, "another token"),
    ({"device": "emu-gpu"}, "written by emu-npu"),
    ({"version": "v2"}, "written by emu-npu"),
])
def test_a_cache_of_another_token_device_or_build_is_refused(files, changes, reason):
    with pytest.raises(CacheError, match=reason):
        read(files[3], **changes)


def reframe(path, fields):
    payload = msgpack.packb(fields, use_bin_type=True)
    path.write_bytes(MAGIC_MODEL + hashlib.sha256(payload).digest() + payload)


@pytest.mark.parametrize("damage", ["garbage", "short list", "sizes", "bad model", "preference", "not msgpack"])
def test_a_well_framed_but_wrong_model_cache_is_refused(files, damage):
    _, _, (model_path, _), fds = files
    data = model_path.read_bytes()
    fields = msgpack.unpackb(data[len(MAGIC_MODEL) + 32:], raw=False)
    if damage == "garbage":
        reframe(model_path, {"not": "a cache"})
    elif damage == "short list":
        reframe(model_path, fields[:5])
    elif damage == "sizes":
        reframe(model_path, fields[:6] + [[fields[6][0] + 4]] + fields[7:])
    elif damage == "bad model":
        reframe(model_path, fields[:5] + [[1, 2, 3]] + fields[6:])
    elif damage == "preference":
        reframe(model_path, fields[:4] + [99] + fields[5:])
    else:
        payload = b"\xc1" * 40
        model_path.write_bytes(MAGIC_MODEL + hashlib.sha256(payload).digest() + payload)
    with pytest.raises(CacheError):
        read(fds)


@pytest.mark.parametrize("cut", [0, 5, 39, 41, -1])
def test_a_truncated_file_is_refused(files, cut):
    _, _, paths, fds = files
    for path in paths:
        data = path.read_bytes()
        path.write_bytes(data[:cut])
        with pytest.raises(CacheError):
            read(fds)
        path.write_bytes(data)
    read(fds)  # sound again
