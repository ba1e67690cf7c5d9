"""nnref's element-wise operations: AOSP's vectors, broadcasting, and the quantized integer paths."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnref
from nnref import BadOperation, float32, int32, tensor
from nnref.examples import check, real

Q8 = "TENSOR_QUANT8_ASYMM"
FLOAT_VARIANTS = ["float32", "relaxed", "float16"]


def q8(values, scale, zero_point=0, shape=None):
    return tensor(Q8, values, shape, scale=scale, zero_point=zero_point)


@pytest.mark.parametrize("variant", FLOAT_VARIANTS)
def test_add_sub_mul_div_broadcast(variant):
    a, b = real([1, 2], [1, 2]), real([2, 2], [1, 2, 3, 4])
    check("ADD", [a, b, int32(0)], [real([2, 2], [2, 4, 4, 6])], variant)
    check("SUB", [b, a, int32(0)], [real([2, 2], [0, 0, 2, 2])], variant)
    check("MUL", [a, b, int32(0)], [real([2, 2], [1, 4, 3, 8])], variant)
    check("DIV", [b, a, int32(0)], [real([2, 2], [1, 1, 3, 2])], variant)
    # A fused RELU1 clamps the sum.
    check("ADD", [real([3], [-2, .25, 2]), real([1], [.5]), int32(2)], [real([3], [-1, .75, 1])], variant)


def test_add_quant8_broadcast_stored_values():
    # add_broadcast_quant8 (1.0): scale 2.0 everywhere.
    out = nnref.evaluate("ADD", [q8([1, 2], 2.0, shape=[1, 2]), q8([1, 2, 3, 4], 2.0, shape=[2, 2]), int32(0)],
                         [nnref.output(Q8, 2.0, 0)])[0]
    assert out.value.tolist() == [[2, 4], [4, 6]]


def test_mul_quant8_rounds_halves_away_from_zero():
    # mul_broadcast_quant8 (1.0): products 1, 4, 3, 8 at output scale 2: 0.5 -> 1, 1.5 -> 2.
    out = nnref.evaluate("MUL", [q8([1, 2], 1.0, shape=[1, 2]), q8([1, 2, 3, 4], 1.0, shape=[2, 2]), int32(0)],
                         [nnref.output(Q8, 2.0, 0)])[0]
    assert out.value.tolist() == [[1, 2], [2, 4]]
    with pytest.raises(BadOperation, match="must exceed input1_scale"):
        nnref.evaluate("MUL", [q8([1], 1.0), q8([1], 1.0), int32(0)], [nnref.output(Q8, 0.5, 0)])


def test_sub_quant8_with_different_scales_and_relu():
    a = q8([120, 130, 140], 0.5, 128)     # -4, 1, 6
    b = q8([10, 20, 30], 0.25, 10)        # 0, 2.5, 5
    out = nnref.evaluate("SUB", [a, b, int32(1)], [nnref.output(Q8, 0.1, 100)])[0]
    assert out.value.tolist() == [100, 100, 110]  # relu(-4, -1.5, 1) at scale 0.1 from 100


BYTES = st.lists(st.integers(0, 255), min_size=1, max_size=6)


@settings(max_examples=60)
@given(BYTES, st.integers(0, 255), st.floats(0.01, 2), st.floats(0.01, 2), st.floats(0.02, 4), st.integers(0, 255),
       st.integers(0, 255), st.integers(0, 3))
def test_quantized_add_and_sub_are_within_a_quantum_of_the_real_result(xs, y, sx, sy, so, zx, zo, fuse):
    a, b = q8(xs, sx, zx), q8([y], sy, 128)
    for name, real_op in (("ADD", np.add), ("SUB", np.subtract)):
        out = nnref.evaluate(name, [a, b, int32(fuse)], [nnref.output(Q8, so, zo)])[0]
        exact = real_op(a.real(), b.real())
        lo, hi = {0: (-np.inf, np.inf), 1: (0, np.inf), 2: (-1, 1), 3: (0, 6)}[fuse]
        expected = np.clip(np.round(np.clip(exact, lo, hi) / so) + zo, 0, 255)
        assert np.abs(out.value.astype(int) - expected).max() <= 1, (name, exact)


@settings(max_examples=50)
@given(BYTES, st.integers(0, 255), st.floats(0.01, 1), st.floats(0.01, 1), st.integers(0, 255))
def test_quantized_mul_is_within_a_quantum_of_the_real_result(xs, y, sx, sy, zo):
    a, b = q8(xs, sx, 100), q8([y], sy, 50)
    so = sx * sy * 1.5
    out = nnref.evaluate("MUL", [a, b, int32(0)], [nnref.output(Q8, so, zo)])[0]
    expected = np.clip(np.round(a.real() * b.real() / so) + zo, 0, 255)
    assert np.abs(out.value.astype(int) - expected).max() <= 1


def test_broadcasting_refuses_shapes_that_do_not_fit():
    with pytest.raises(BadOperation, match=r"ADD: shapes \[2\] and \[3\] do not broadcast"):
        nnref.evaluate("ADD", [tensor("TENSOR_FLOAT32", [1, 2]), tensor("TENSOR_FLOAT32", [1, 2, 3]), int32(0)])
    with pytest.raises(BadOperation, match="input 1 is TENSOR_INT32"):
        nnref.evaluate("ADD", [tensor("TENSOR_FLOAT32", [1]), tensor("TENSOR_INT32", [1]), int32(0)])


@pytest.mark.parametrize("variant", FLOAT_VARIANTS)
def test_activations(variant):
    check("LOGISTIC", [real([1, 2, 2, 1], [1, 2, 4, 8])],
          [real([1, 2, 2, 1], [0.7310586, 0.8807970, 0.9820138, 0.9996646])], variant)
    check("TANH", [real([4], [-1, 0, 1, 10])], [real([4], [-0.7615942, 0, 0.7615942, 1])], variant)
    check("RELU", [real([4], [-10, -0.5, 0.5, 10])], [real([4], [0, 0, 0.5, 10])], variant)
    check("RELU1", [real([4], [-10, -0.5, 0.5, 10])], [real([4], [-1, -0.5, 0.5, 1])], variant)
    check("RELU6", [real([4], [-10, -0.5, 0.5, 10])], [real([4], [0, 0, 0.5, 6])], variant)


def test_quant8_activations_have_fixed_output_ranges():
    x = q8([0, 64, 128, 192, 255], 1 / 16, 128)  # -8, -4, 0, 4, 7.94
    logistic = nnref.evaluate("LOGISTIC", [x], [nnref.output(Q8, 1 / 256, 0)])[0]
    assert logistic.value.tolist() == [0, 5, 128, 251, 255]
    tanh = nnref.evaluate("TANH", [x], [nnref.output(Q8, 1 / 128, 128)])[0]
    assert tanh.value.tolist() == [0, 0, 128, 255, 255]
    with pytest.raises(BadOperation, match="scale 0.00390625 and zero point 0"):
        nnref.evaluate("LOGISTIC", [x], [nnref.output(Q8, 0.5, 0)])
    relu6 = nnref.evaluate("RELU6", [x])[0]
    assert relu6.value.tolist() == [128, 128, 128, 192, 224]


PRELU = ([real([1, 2, 2, 3], [0, 0, 0, 1, 1, 1, -1, -1, -1, -2, -2, -2]), real([1, 1, 3], [0, 1, 2])],
         [real([1, 2, 2, 3], [0, 0, 0, 1, 1, 1, 0, -1, -2, 0, -2, -4])])


@pytest.mark.parametrize("variant", FLOAT_VARIANTS)
def test_prelu(variant):
    check("PRELU", *PRELU, variant)


def test_prelu_quant8():
    check("PRELU", *PRELU, quant={("in", 0): (Q8, .25, 128), ("in", 1): (Q8, .25, 50), ("out", 0): (Q8, .5, 120)})


@pytest.mark.parametrize("variant", FLOAT_VARIANTS)
def test_math(variant):
    check("ABS", [real([4], [-2, -0.5, 0, 3])], [real([4], [2, 0.5, 0, 3])], variant)
    check("EXP", [real([3], [0, 1, -1])], [real([3], [1, np.e, 1 / np.e])], variant)
    check("LOG", [real([3], [1, np.e, 0.5])], [real([3], [0, 1, np.log(0.5)])], variant)
    check("NEG", [real([2], [1, -2.5])], [real([2], [-1, 2.5])], variant)
    check("SQRT", [real([2], [4, 2])], [real([2], [2, np.sqrt(2)])], variant)
    check("RSQRT", [real([2], [4, 0.25])], [real([2], [0.5, 2])], variant)
    check("SIN", [real([3], [0, np.pi / 2, -np.pi / 6])], [real([3], [0, 1, -0.5])], variant)
    check("FLOOR", [real([4], [-1.5, -0.2, 0.0, 1.9])], [real([4], [-2, -1, 0, 1])], variant)
    check("POW", [real([2, 1], [2, 3]), real([1, 2], [2, 0.5])], [real([2, 2], [4, np.sqrt(2), 9, np.sqrt(3)])], variant)
    check("MAXIMUM", [real([3], [1, 5, -1]), real([1], [2])], [real([3], [2, 5, 2])], variant)
    check("MINIMUM", [real([3], [1, 5, -1]), real([1], [2])], [real([3], [1, 2, -1])], variant)


def test_maximum_quant8_requantizes_each_input_to_the_output():
    a, b = q8([128, 140], 0.5, 128), q8([100, 108], 1.0, 100)  # 0, 6 and 0, 8
    out = nnref.evaluate("MAXIMUM", [a, b], [nnref.output(Q8, 2.0, 10)])[0]
    assert out.value.tolist() == [10, 14]
    ints = nnref.evaluate("MINIMUM", [tensor("TENSOR_INT32", [5, -7]), tensor("TENSOR_INT32", [3])])[0]
    assert ints.type == "TENSOR_INT32" and ints.value.tolist() == [3, -7]
    neg = nnref.evaluate("NEG", [tensor("TENSOR_INT32", [5, -7])])[0]
    assert neg.value.tolist() == [-5, 7]


def test_comparisons_give_bool8_and_compare_real_values():
    a = q8([128, 130, 132], 0.5, 128)     # 0, 1, 2
    b = q8([11, 11, 11], 1.0, 10)         # 1
    assert nnref.evaluate("GREATER", [a, b])[0].value.tolist() == [False, False, True]
    assert nnref.evaluate("EQUAL", [a, b])[0].value.tolist() == [False, True, False]
    f = tensor("TENSOR_FLOAT32", [1, 2, 3])
    g = tensor("TENSOR_FLOAT32", [2])
    for name, expected in [("LESS", [1, 0, 0]), ("LESS_EQUAL", [1, 1, 0]), ("GREATER_EQUAL", [0, 1, 1]),
                           ("NOT_EQUAL", [1, 0, 1])]:
        out = nnref.evaluate(name, [f, g])[0]
        assert out.type == "TENSOR_BOOL8" and out.value.tolist() == [bool(e) for e in expected], name
    t, u = tensor("TENSOR_BOOL8", [True, True, False, False]), tensor("TENSOR_BOOL8", [True, False, True, False])
    assert nnref.evaluate("LOGICAL_AND", [t, u])[0].value.tolist() == [True, False, False, False]
    assert nnref.evaluate("LOGICAL_OR", [t, u])[0].value.tolist() == [True, True, True, False]
    assert nnref.evaluate("LOGICAL_NOT", [t])[0].value.tolist() == [False, False, True, True]
    assert nnref.evaluate("EQUAL", [t, u])[0].value.tolist() == [True, False, False, True]


def test_select_picks_by_the_condition():
    c = tensor("TENSOR_BOOL8", [True, False, True])
    out = nnref.evaluate("SELECT", [c, tensor("TENSOR_FLOAT32", [1, 2, 3]), tensor("TENSOR_FLOAT32", [4, 5, 6])])[0]
    assert out.value.tolist() == [1, 5, 3]
    q = nnref.evaluate("SELECT", [c, q8([10, 20, 30], 1.0), q8([4, 5, 6], 2.0)], [nnref.output(Q8, 1.0, 0)])[0]
    assert q.value.tolist() == [10, 10, 30]


def test_cast_converts_stored_values():
    f = tensor("TENSOR_FLOAT32", [-3.7, 0.5, 2.9, 300.0])
    assert nnref.evaluate("CAST", [f], [nnref.output(Q8, 1.0, 0)])[0].value.tolist() == [0, 0, 2, 255]
    assert nnref.evaluate("CAST", [f], [nnref.output("TENSOR_INT32")])[0].value.tolist() == [-3, 0, 2, 300]
    q = q8([0, 200], 0.5, 100)
    assert nnref.evaluate("CAST", [q], [nnref.output("TENSOR_FLOAT32")])[0].value.tolist() == [0.0, 200.0]
    half = nnref.evaluate("CAST", [tensor("TENSOR_INT32", [1, -2])], [nnref.output("TENSOR_FLOAT16")])[0]
    assert half.value.dtype == np.float16 and half.value.tolist() == [1.0, -2.0]


def test_quantize_and_dequantize():
    x = tensor("TENSOR_FLOAT32", [-10, -0.5, 0, 0.5, 0.25, 100])
    q = nnref.evaluate("QUANTIZE", [x], [nnref.output(Q8, 0.5, 127)])[0]
    assert q.value.tolist() == [107, 126, 127, 128, 128, 255]  # 0.5 quanta round away from zero
    d = nnref.evaluate("DEQUANTIZE", [q8([0, 32, 128, 255], 1.0, 0)])[0]
    assert d.type == "TENSOR_FLOAT32" and d.value.tolist() == [0, 32, 128, 255]
    symm = tensor("TENSOR_QUANT8_SYMM", [-128, 0, 127], scale=0.5)
    d16 = nnref.evaluate("DEQUANTIZE", [symm], [nnref.output("TENSOR_FLOAT16")])[0]
    assert d16.value.dtype == np.float16 and d16.value.tolist() == [-64, 0, 63.5]
    with pytest.raises(BadOperation, match="QUANTIZE: the output is a TENSOR_QUANT8_ASYMM template"):
        nnref.evaluate("QUANTIZE", [x])


@settings(max_examples=50)
@given(st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=8), st.floats(0.01, 2), st.integers(0, 255))
def test_quantize_then_dequantize_ops_round_trip_within_half_a_quantum(xs, scale, zp):
    x = tensor("TENSOR_FLOAT32", np.float32(xs))
    q = nnref.evaluate("QUANTIZE", [x], [nnref.output(Q8, scale, zp)])[0]
    back = nnref.evaluate("DEQUANTIZE", [q])[0].value.astype(np.float64)
    inside = (q.value > 0) & (q.value < 255)
    assert np.all(np.abs(back - x.value)[inside] <= scale / 2 + 1e-4)


def test_float16_results_are_half_precision():
    out = nnref.evaluate("ADD", [tensor("TENSOR_FLOAT16", [1, 2]), tensor("TENSOR_FLOAT16", [0.5]), int32(0)])[0]
    assert out.type == "TENSOR_FLOAT16" and out.value.dtype == np.float16 and out.value.tolist() == [1.5, 2.5]
    assert float32(1.0).type == "FLOAT32"


def test_sub_quantized_vector():
    # sub_quantized: every stored value minus a shuffle of them, at one scale, floored at 0.
    import random

    random.seed(0)
    a = list(range(256))
    b = list(a)
    random.shuffle(b)
    out = nnref.evaluate("SUB", [q8(a, 0.5, shape=[2, 4, 16, 2]), q8(b, 0.5, shape=[2, 4, 16, 2]), int32(0)])[0]
    assert out.value.ravel().tolist() == [max(0, x - y) for x, y in zip(a, b, strict=True)]


def test_tanh_quantized_vector():
    # tanh_quantized: all 256 inputs at scale 0.05 around 100, within a quantum of the real tanh.
    out = nnref.evaluate("TANH", [q8(range(256), 0.05, 100)], [nnref.output(Q8, 1 / 128, 128)])[0]
    expected = np.clip(np.round(np.tanh((np.arange(256) - 100) * 0.05) * 128) + 128, 0, 255)
    assert np.abs(out.value.astype(int) - expected).max() <= 1
