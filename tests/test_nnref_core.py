"""nnref's core: the operand vocabulary, Android's fixed-point arithmetic, padding, tolerances."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import nnref
from interfaces.android.hardware.neuralnetworks import OperandType, OperationType
from nnref.core import (
    implicit_padding,
    multiply_by_quantized_multiplier,
    quantize,
    quantize_multiplier,
    rounding_divide_by_pot,
    round_away,
    saturating_rounding_doubling_high_mul,
)

INT32 = st.integers(-(2**31), 2**31 - 1)


def test_the_generated_enums_agree_with_the_1_2_tables():
    # interfaces' enums hold the subset npuemu knows today; every member has its 1.2 code.
    for member in OperationType:
        assert nnref.OPERATION_TYPES[member.value] == member.name
    for member in OperandType:
        assert nnref.OPERAND_TYPES[member.value] == member.name
    assert len(nnref.OPERATION_TYPES) == 95 and len(set(nnref.OPERATION_TYPES)) == 95
    assert nnref.operation_name(OperationType.CONV_2D) == "CONV_2D" == nnref.operation_name(3)


def test_all_95_operations_have_a_reference_and_a_test():
    assert nnref.implemented() == nnref.OPERATION_TYPES
    tests = "".join(p.read_text() for p in Path(__file__).parent.glob("test_nnref_*.py"))
    untested = [name for name in nnref.OPERATION_TYPES if f'"{name}"' not in tests]
    assert not untested, f"operations no test evaluates: {untested}"
    with pytest.raises(ValueError, match="not an NN HAL 1.2 OperationType"):
        nnref.evaluate("HARD_SWISH", [])


def test_each_operation_names_the_operand_types_1_2_allows_it_and_refuses_others():
    assert set(nnref.SELECTING) == set(nnref.OPERATION_TYPES)
    tensors = [t for t in nnref.OPERAND_TYPES if t.startswith("TENSOR_")]
    for name, (at, types) in nnref.SELECTING.items():
        assert types and set(types) <= set(tensors), name
        wrong = next(t for t in tensors if t not in types and t != "TENSOR_QUANT8_SYMM_PER_CHANNEL")
        inputs = [nnref.int32(0)] * at + [nnref.Operand(wrong, None)]
        with pytest.raises(nnref.BadOperation, match=f"{name}: input {at} is {wrong}; the 1.2 spec allows"):
            nnref.evaluate(name, inputs)


def test_operands_store_their_type_and_refuse_what_does_not_fit():
    q = nnref.tensor("TENSOR_QUANT8_ASYMM", [0, 128, 255], scale=0.5, zero_point=128)
    assert q.value.dtype == np.uint8 and q.real().tolist() == [-64.0, 0.0, 63.5]
    assert nnref.tensor(OperandType.TENSOR_INT32, [1, 2]).type == "TENSOR_INT32"
    with pytest.raises(ValueError, match="does not fit TENSOR_QUANT8_ASYMM"):
        nnref.tensor("TENSOR_QUANT8_ASYMM", [256], scale=1.0)
    with pytest.raises(ValueError, match="needs a scale"):
        nnref.tensor("TENSOR_QUANT8_ASYMM", [1])
    with pytest.raises(ValueError, match="stores integers"):
        nnref.tensor("TENSOR_INT32", [1.5])
    with pytest.raises(ValueError, match="needs channel_quant"):
        nnref.tensor("TENSOR_QUANT8_SYMM_PER_CHANNEL", [1])
    per_channel = nnref.tensor("TENSOR_QUANT8_SYMM_PER_CHANNEL", [[2, 2], [-2, 4]],
                               channel_quant=nnref.ChannelQuant((0.5, 0.25), 0))
    assert per_channel.real().tolist() == [[1.0, 1.0], [-0.5, 1.0]]


def test_round_away_rounds_halves_away_from_zero_like_std_round():
    assert round_away(np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49])).tolist() == [1, 2, 3, -1, -3, 0]


@given(st.floats(-1000, 1000, allow_nan=False), st.floats(0.001, 10), st.integers(0, 255))
def test_quantize_then_dequantize_is_within_half_a_quantum(x, scale, zero_point):
    q = quantize(np.array([x]), "TENSOR_QUANT8_ASYMM", scale, zero_point)
    back = (int(q[0]) - zero_point) * scale
    if 0 < q[0] < 255:  # unsaturated
        assert abs(back - x) <= scale / 2 + 1e-9


@given(st.floats(1e-6, 1e3, allow_nan=False))
def test_quantize_multiplier_is_a_q31_mantissa_and_a_shift(real):
    q, shift = quantize_multiplier(real)
    assert 2**30 <= q < 2**31
    assert abs(q * 2.0 ** (shift - 31) - real) <= real * 2.0**-30


@given(INT32, INT32)
@example(1, -(2**30))  # ab/2**31 = -0.5 exactly: gemmlowp gives 0, not -1
@example(1, 2**30)  # +0.5 gives 1
def test_saturating_rounding_doubling_high_mul_is_round_of_ab_over_2_31(a, b):
    got = int(saturating_rounding_doubling_high_mul(np.array([a]), b)[0])
    if a == b == -(2**31):
        assert got == 2**31 - 1
        return
    exact = Fraction(a * b, 2**31)
    # gemmlowp nudges by 2**30 (a half) when ab >= 0, by 1 - 2**30 (one short of a half) when ab < 0,
    # then truncates: a positive half rounds away from zero, a negative half toward it (-0.5 -> 0).
    if exact >= 0:
        assert got == math.floor(exact + Fraction(1, 2))
    else:
        assert got == math.ceil(exact - Fraction(1, 2) + Fraction(1, 2**31))


@given(INT32, st.integers(0, 31))
def test_rounding_divide_by_pot_rounds_halves_away_from_zero(x, exponent):
    got = int(rounding_divide_by_pot(np.array([x]), exponent)[0])
    exact = Fraction(x, 2**exponent)
    expected = math.floor(exact + Fraction(1, 2)) if exact >= 0 else math.ceil(exact - Fraction(1, 2))
    assert got == expected


@settings(max_examples=200)
@given(st.integers(-(2**20), 2**20), st.floats(1e-4, 0.99))
def test_multiply_by_quantized_multiplier_is_within_one_of_the_real_product(x, real):
    q, shift = quantize_multiplier(real)
    assert abs(int(multiply_by_quantized_multiplier(np.array([x]), q, shift)[0]) - x * real) <= 1


@pytest.mark.parametrize("size,stride,filter_size,dilation,expected", [
    (3, 1, 2, 1, (0, 1)),   # SAME, odd padding goes to the tail
    (8, 1, 3, 1, (1, 1)),
    (6, 2, 2, 3, (1, 1)),   # dilation 3: effective filter 4 (depthwise_conv2d_dilation test 5)
    (224, 2, 3, 1, (0, 1)),
    (5, 3, 3, 1, (0, 1)),
])
def test_implicit_same_padding_as_the_spec_computes_it(size, stride, filter_size, dilation, expected):
    assert implicit_padding(size, stride, filter_size, dilation, 1) == expected
    assert implicit_padding(size, stride, filter_size, dilation, 2) == (0, 0)


def test_assert_close_uses_android_tolerances():
    a = nnref.tensor("TENSOR_FLOAT32", [1.0])
    nnref.assert_close(a, nnref.tensor("TENSOR_FLOAT32", [1.000001]))
    with pytest.raises(AssertionError):
        nnref.assert_close(a, nnref.tensor("TENSOR_FLOAT32", [1.001]))
    nnref.assert_close(a, nnref.tensor("TENSOR_FLOAT32", [1.001]), relaxed=True)
    q = nnref.tensor("TENSOR_QUANT8_ASYMM", [10], scale=1.0)
    nnref.assert_close(q, nnref.tensor("TENSOR_QUANT8_ASYMM", [11], scale=1.0))
    with pytest.raises(AssertionError, match="beyond one quantum"):
        nnref.assert_close(q, nnref.tensor("TENSOR_QUANT8_ASYMM", [12], scale=1.0))
