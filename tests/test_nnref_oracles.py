"""Two references written apart agree: nnref and tests/nn_reference.py (the float32 oracle of
the first seven operations) on random inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import nn_reference
import nnref
from nnref import int32, tensor

F32 = "TENSOR_FLOAT32"


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 2), st.integers(1, 6), st.integers(1, 6), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 3), st.integers(1, 3), st.integers(0, 2), st.integers(1, 2), st.integers(0, 3), st.randoms())
def test_conv_2d_agrees_with_nn_reference(n, h, w, c, out, fh, fw, pad, stride, fuse, rng):
    fh, fw = min(fh, h + 2 * pad), min(fw, w + 2 * pad)
    seed = rng.randint(0, 2**31)
    gen = np.random.default_rng(seed)
    x = gen.uniform(-2, 2, (n, h, w, c)).astype(np.float32)
    f = gen.uniform(-1, 1, (out, fh, fw, c)).astype(np.float32)
    b = gen.uniform(-1, 1, out).astype(np.float32)
    expected = nn_reference.conv_2d(x, f, b, pad, pad, pad, pad, stride, stride, fuse)
    got = nnref.evaluate("CONV_2D", [tensor(F32, x), tensor(F32, f), tensor(F32, b),
                                     *map(int32, (pad, pad, pad, pad, stride, stride, fuse))])[0]
    np.testing.assert_allclose(got.value, expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 8), st.integers(1, 5), st.integers(0, 3), st.floats(0.1, 3), st.randoms())
def test_fully_connected_and_softmax_agree_with_nn_reference(batch, size, units, fuse, beta, rng):
    gen = np.random.default_rng(rng.randint(0, 2**31))
    x = gen.uniform(-2, 2, (batch, size)).astype(np.float32)
    w = gen.uniform(-1, 1, (units, size)).astype(np.float32)
    b = gen.uniform(-1, 1, units).astype(np.float32)
    got = nnref.evaluate("FULLY_CONNECTED", [tensor(F32, x), tensor(F32, w), tensor(F32, b), int32(fuse)])[0]
    np.testing.assert_allclose(got.value, nn_reference.fully_connected(x, w, b, fuse), rtol=1e-5, atol=1e-5)
    soft = nnref.evaluate("SOFTMAX", [tensor(F32, x), nnref.float32(beta)])[0]
    np.testing.assert_allclose(soft.value, nn_reference.softmax(x, beta), rtol=1e-5, atol=1e-6)
