"""nnref's normalizations: softmax over any axis, log-softmax, L2, local response, instance."""

from __future__ import annotations

import numpy as np
import pytest

import nnref
from nnref import BadOperation, boolean, float32, int32, tensor
from nnref.examples import check, real

Q8 = "TENSOR_QUANT8_ASYMM"
VARIANTS = ["float32", "relaxed", "float16"]
ROW = [1., 2., 3., 4., 5., -1., -2., -3., -4., -5.]
SOFT = [0.011656231, 0.031684921, 0.086128544, 0.234121657, 0.636408647,
        0.636408647, 0.234121657, 0.086128544, 0.031684921, 0.011656231]


def moved(values, axis, rank):
    """softmax_v1_2's AddAllDimsAndAxis: the [.., 5] rows moved so the softmax axis is ``axis``."""
    rows = np.asarray(values * 4, np.float64).reshape(8, 5)
    x = {1: rows[0], 2: rows, 3: rows.reshape(2, 4, 5), 4: rows.reshape(2, 2, 2, 5)}[rank]
    return np.moveaxis(x, -1, axis)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("rank", [1, 2, 3, 4])
def test_softmax_every_rank_and_axis(rank, variant):
    for axis in range(-rank, rank):
        x, y = moved(ROW, axis, rank), moved(SOFT, axis, rank)
        check("SOFTMAX", [real(x.shape, x), float32(1.0), int32(axis)], [real(y.shape, y)], variant)
    x = moved(ROW, -1, rank)
    check("SOFTMAX", [real(x.shape, x), float32(1e-6)], [real(x.shape, np.full(x.shape, 0.2))], variant)


def test_softmax_quant8():
    check("SOFTMAX", [real([2, 5], ROW), float32(1.0)], [real([2, 5], SOFT)],
          quant={("in", 0): (Q8, .25, 128), ("out", 0): (Q8, 1 / 256, 0)})
    with pytest.raises(BadOperation, match="SOFTMAX: a TENSOR_QUANT8_ASYMM output has scale"):
        nnref.evaluate("SOFTMAX", [tensor(Q8, [1], scale=1.0), float32(1.0)], [nnref.output(Q8, 0.5, 0)])


@pytest.mark.parametrize("variant", VARIANTS)
def test_log_softmax(variant):
    check("LOG_SOFTMAX", [real([2, 2], [0, np.log(3), 1, 1]), float32(1.0), int32(1)],
          [real([2, 2], [np.log(.25), np.log(.75), np.log(.5), np.log(.5)])], variant)
    check("LOG_SOFTMAX", [real([1, 2], [0, np.log(3)]), float32(2.0), int32(-1)],
          [real([1, 2], [np.log(.1), np.log(.9)])], variant)


L2 = [-1.1, 0.6, 0.7, 1.2, -0.7, 0.1]  # l2_normalization: the squares sum to 4
L2_OUT = [-0.55, 0.3, 0.35, 0.6, -0.35, 0.05]


@pytest.mark.parametrize("variant", VARIANTS)
def test_l2_normalization(variant):
    check("L2_NORMALIZATION", [real([1, 1, 1, 6], L2)], [real([1, 1, 1, 6], L2_OUT)], variant)
    x = np.moveaxis(np.asarray(L2).reshape(1, 1, 1, 6), -1, 1)
    check("L2_NORMALIZATION", [real(x.shape, x), int32(1)], [real(x.shape, np.asarray(L2_OUT).reshape(x.shape))], variant)


def test_l2_normalization_quant8():
    check("L2_NORMALIZATION", [real([1, 6], L2)], [real([1, 6], L2_OUT)],
          quant={("in", 0): (Q8, .1, 128), ("out", 0): (Q8, 1 / 128, 128)})


@pytest.mark.parametrize("variant", VARIANTS)
def test_local_response_normalization(variant):
    # local_response_norm_float_1: a radius covering the depth, bias 0, alpha 1, beta .5: L2.
    check("LOCAL_RESPONSE_NORMALIZATION", [real([1, 1, 1, 6], L2), int32(20), float32(0), float32(1), float32(.5)],
          [real([1, 1, 1, 6], L2_OUT)], variant)
    # radius 1, bias 1, alpha 1, beta 1: x / (1 + the squares of its neighbours and itself).
    x = [1., 2., 3.]
    expected = [1 / (1 + 1 + 4), 2 / (1 + 1 + 4 + 9), 3 / (1 + 4 + 9)]
    check("LOCAL_RESPONSE_NORMALIZATION", [real([3], x), int32(1), float32(1), float32(1), float32(1), int32(0)],
          [real([3], expected)], variant)


@pytest.mark.parametrize("variant", VARIANTS + ["nchw"])
def test_instance_normalization(variant):
    # Per batch and channel over height and width: {1, 3} has mean 2, variance 1.
    x = real([1, 1, 2, 2], [1, 10, 3, 30])
    y = real([1, 1, 2, 2], [-1, -1, 3, 3])  # gamma 2, beta 1
    # epsilon 1e-10 is 0 in float16: Android 10 takes it (nothing checks epsilon), as here.
    check("INSTANCE_NORMALIZATION", [x, float32(2), float32(1), float32(1e-10), boolean(False)], [y], variant, layout=4)


INSTANCE_NORM_IN = [0, 0, 0, -2, 0, -2, 0, 4, 1, -1, -1, 2, -1, -2, 1, 1]


@pytest.mark.parametrize("variant", VARIANTS + ["nchw"])
@pytest.mark.parametrize("gamma, beta, expected", [
    # instance_normalization: epsilon 1e-4; a plane of zeros has variance 0 and stays at beta.
    (1.0, 0.0, [0, 0, 0, -0.8164898, 0, -0.8164898, 0, 1.6329796,
                0.99995005, -0.6324429, -0.99995005, 1.2648858, -0.99995005, -1.2648858, 0.99995005, 0.6324429]),
    (2.0, 10.0, [10, 10, 10, 8.367021, 10, 8.367021, 10, 13.265959,
                 11.9999, 8.735114, 8.0001, 12.529772, 8.0001, 7.470228, 11.9999, 11.264886]),
])
def test_instance_normalization_aosp(variant, gamma, beta, expected):
    check("INSTANCE_NORMALIZATION",
          [real([2, 2, 2, 2], INSTANCE_NORM_IN), float32(gamma), float32(beta), float32(1e-4), boolean(False)],
          [real([2, 2, 2, 2], expected)], variant, layout=4)


def test_instance_normalization_refuses_a_negative_epsilon():
    x = tensor("TENSOR_FLOAT32", np.ones((1, 2, 2, 1)))
    with pytest.raises(BadOperation, match="INSTANCE_NORMALIZATION: epsilon -0.5 must be a finite value >= 0"):
        nnref.evaluate("INSTANCE_NORMALIZATION", [x, float32(1), float32(0), float32(-0.5), boolean(False)])


def test_softmax_axis_out_of_range():
    with pytest.raises(BadOperation, match=r"SOFTMAX: axis 2 is outside \[-2, 2\)"):
        nnref.evaluate("SOFTMAX", [tensor("TENSOR_FLOAT32", [[1.0]]), float32(1.0), int32(2)])
