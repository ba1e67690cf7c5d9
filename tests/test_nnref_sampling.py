"""nnref's RANDOM_MULTINOMIAL: Philox against Random123's known answers, and the draws' law."""

from __future__ import annotations

import numpy as np
import pytest

import nnref
from nnref import BadOperation, int32, tensor
from nnref.sampling import philox4x32, uniform_doubles


@pytest.mark.parametrize("counter,key,expected", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox4x32_10_known_answers(counter, key, expected):
    assert philox4x32(counter, key) == expected


def test_uniform_doubles_are_in_the_unit_interval_and_seeded():
    first = [d for _, d in zip(range(1000), uniform_doubles(37, -5), strict=False)]
    again = [d for _, d in zip(range(1000), uniform_doubles(37, -5), strict=False)]
    other = [d for _, d in zip(range(1000), uniform_doubles(38, -5), strict=False)]
    assert first == again and first != other
    assert 0.0 <= min(first) and max(first) < 1.0 and abs(np.mean(first) - 0.5) < 0.03


def test_random_multinomial_draws_by_the_softmax():
    logits = tensor("TENSOR_FLOAT32", np.log([[0.2, 0.3, 0.5], [1.0, 1e-9, 1e-9]]).astype(np.float32))
    seeds = tensor("TENSOR_INT32", [1234, 5678])
    out = nnref.evaluate("RANDOM_MULTINOMIAL", [logits, int32(4000), seeds])[0]
    assert out.shape == (2, 4000) and out.type == "TENSOR_INT32"
    freq = np.bincount(out.value[0], minlength=3) / 4000
    np.testing.assert_allclose(freq, [0.2, 0.3, 0.5], atol=0.03)
    assert (out.value[1] == 0).all()
    again = nnref.evaluate("RANDOM_MULTINOMIAL", [logits, int32(4000), seeds])[0]
    np.testing.assert_array_equal(out.value, again.value)  # the seeds fix the draws


def test_random_multinomial_skips_non_finite_logits_and_checks_its_inputs():
    logits = tensor("TENSOR_FLOAT16", [[-np.inf, 0.0, np.nan, 0.0]])
    out = nnref.evaluate("RANDOM_MULTINOMIAL", [logits, int32(200), tensor("TENSOR_INT32", [0, 0])])[0]
    assert set(out.value.ravel().tolist()) <= {1, 3}
    with pytest.raises(BadOperation, match="two int32"):
        nnref.evaluate("RANDOM_MULTINOMIAL", [logits, int32(2), tensor("TENSOR_INT32", [1])])
