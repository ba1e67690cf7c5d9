"""The atheris harness (``tests/fuzz/fuzz_binder.py``), run by hypothesis in the suite.

``check_one`` feeds bytes to a server-side wire ``Connection`` (only ``ProtocolError``
may come out) and, when they are one msgpack value, to the call and reply decoders of
every method of every interface the stack serves and to every parcelable (only
``BadParcelableException`` may come out). Here it gets random bytes, well-formed
frames with one byte changed, truncated or with a lying length, and random msgpack
values; ``make fuzz`` runs the same function under atheris for minutes (or, without atheris,
these tests with ``NPUEMU_FUZZ_EXAMPLES`` examples each).
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).with_name("fuzz")))
from fuzz_binder import check_one, decoders, seed_inputs  # noqa: E402

SETTINGS = settings(max_examples=int(os.environ.get("NPUEMU_FUZZ_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=10)
    | st.binary(max_size=24),
    lambda children: st.lists(children, max_size=8) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=30,
)


def test_the_harness_covers_every_served_interface():
    names = {name.split("(")[0].rsplit(".", 1)[0] for name, _ in decoders()}
    for iface in ("android.hardware.npu.IScheduling", "android.hardware.neuralnetworks.IDevice",
                  "android.hardware.neuralnetworks.IPreparedModel", "npuemu.hal.IHalControl",
                  "android.npumanager.INpuManager", "npuemu.server.IActivityManager", "android.os.IServiceManager"):
        assert iface in names, iface


def test_the_harness_catches_what_it_hunts(monkeypatch):
    # A decoder that fails the wrong way must be reported, or the fuzzer would find nothing.
    import fuzz_binder

    def broken(_wire):
        raise KeyError("oops")

    monkeypatch.setattr(fuzz_binder, "decoders", lambda: (("broken", broken),))
    with pytest.raises(AssertionError, match="broken: KeyError"):
        fuzz_binder.check_one(msgpack.packb([1, 2]))


@pytest.mark.parametrize("seed", range(len(seed_inputs())))
def test_seeds_pass(seed):
    check_one(seed_inputs()[seed])


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes(data):
    check_one(data)


@SETTINGS
@given(st.sampled_from(seed_inputs()), st.data())
def test_mutated_frames(seed, data):
    kind = data.draw(st.sampled_from(["flip", "truncate", "length", "append"]))
    buf = bytearray(seed)
    if kind == "flip":
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    elif kind == "truncate":
        buf = buf[: data.draw(st.integers(0, len(buf)))]
    elif kind == "length":
        buf[:4] = struct.pack(">I", data.draw(st.integers(0, 2**32 - 1)))
    else:
        buf += data.draw(st.binary(min_size=1, max_size=40))
    check_one(bytes(buf))


@SETTINGS
@given(values)
def test_random_msgpack_values(value):
    check_one(msgpack.packb(value, use_bin_type=True))
