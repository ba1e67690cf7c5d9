"""nnref's convolutions and pooling against AOSP's 1.2 test vectors, in each variation they run."""

from __future__ import annotations

import numpy as np
import pytest

import nnref
from nnref import BadOperation, ChannelQuant, boolean, int32, tensor
from nnref.core import quantize
from nnref.examples import check, real

NHWC = boolean(False)
VARIANTS = ["float32", "relaxed", "float16", "nchw"]
Q8 = "TENSOR_QUANT8_ASYMM"


def q(i: float, f: float, b: float, o: float, zi: int = 0, zf: int = 0, zo: int = 0) -> dict:
    return {("in", 0): (Q8, i, zi), ("in", 1): (Q8, f, zf), ("in", 2): ("TENSOR_INT32", b, 0), ("out", 0): (Q8, o, zo)}


# CONV_2D (conv2d_v1_2, conv2d_dilation) ----------------------------------------------

CONV_1 = ([real([1, 3, 3, 1], [1, 1, 1, 1, .5, 1, 1, 1, 1]), real([1, 2, 2, 1], [.25] * 4), real([1], [0]),
           *map(int32, (0, 0, 0, 0, 1, 1, 0)), NHWC], [real([1, 2, 2, 1], [.875] * 4)])
CONV_2 = ([real([1, 3, 4, 1], range(1, 13)), real([1, 3, 3, 1], [1, 4, 7, 2, 5, 8, 3, 6, 9]), real([1], [-200]),
           *map(int32, (1, 1, 1, 1)), NHWC],  # implicit SAME, strides 1, RELU
          [real([1, 3, 4, 1], [0, 0, 0, 0, 35, 112, 157, 0, 0, 34, 61, 0])])
CONV_LARGE = ([real([1, 2, 3, 3], range(1, 19)), real([3, 1, 1, 3], [1, 4, 7, 2, 5, 8, 3, 6, 9]), real([3], [0, 0, 0]),
               *map(int32, (0, 0, 0, 0, 1, 1, 0)), NHWC],
              [real([1, 2, 3, 3], [30, 36, 42, 66, 81, 96, 102, 126, 150, 138, 171, 204, 174, 216, 258, 210, 261, 312])])
CONV_DILATION_3 = ([real([1, 9, 9, 1], [1 if 3 <= r <= 5 and 3 <= c <= 5 else 0 for r in range(9) for c in range(9)]),
                    real([1, 3, 3, 1], range(1, 10)), real([1], [0]), *map(int32, (0, 0, 0, 0, 1, 1, 0)), NHWC,
                    int32(3), int32(3)], [real([1, 3, 3, 1], [5] * 9)])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("example,layout", [(CONV_1, 10), (CONV_2, 7), (CONV_LARGE, 10), (CONV_DILATION_3, 10)])
def test_conv_2d_examples(example, layout, variant):
    check("CONV_2D", *example, variant=variant, layout=layout)


@pytest.mark.parametrize("example,quant", [
    (CONV_1, q(.5, .125, .0625, .125)),
    (CONV_2, q(.5, .5, .25, 1.0, 127, 127, 50)),
    (CONV_LARGE, q(.5, .5, .25, 2.0, 128, 128, 0)),
    (CONV_DILATION_3, q(.5, .125, .0625, .125)),
])
def test_conv_2d_quant8_examples(example, quant):
    check("CONV_2D", *example, quant=quant)


PER_CHANNEL = ChannelQuant((0.5, 0.75, 1.0), 0)


@pytest.mark.parametrize("nchw", [None, False, True])
def test_conv_2d_per_channel_filter_requantizes_each_channel(nchw):
    # conv2d_per_channel: no layout input, then NHWC and NCHW.
    x = np.array([138, 108] * 3).reshape(1, 3, 1, 2) if nchw is not None else np.full((1, 3, 1, 2), 138)
    expected = [121, 118, 115] * 3 if nchw is not None else [137, 141, 145] * 3
    expected = np.array(expected).reshape(1, 3, 1, 3)
    if nchw:
        x, expected = x.transpose(0, 3, 1, 2), expected.transpose(0, 3, 1, 2)
    inputs = [tensor(Q8, x, scale=0.5, zero_point=128),
              tensor("TENSOR_QUANT8_SYMM_PER_CHANNEL", [1, 2] * 3, [3, 1, 1, 2], channel_quant=PER_CHANNEL),
              tensor("TENSOR_INT32", [4, 4, 4]), *map(int32, (0, 0, 0, 0, 1, 1, 0))]
    if nchw is not None:
        inputs.append(boolean(nchw))
    out = nnref.evaluate("CONV_2D", inputs, [nnref.output(Q8, 1.0, 128)])[0]
    np.testing.assert_array_equal(out.value, expected)


# DEPTHWISE_CONV_2D (depthwise_conv2d_dilation) -------------------------------------------

DW_IN = real([1, 3, 3, 2], [10, 21, 10, 22, 10, 23, 10, 24, 10, 25, 10, 26, 10, 27, 10, 28, 10, 29])
DW_F = real([1, 2, 2, 4], [.25, 0, .2, 0, .25, 0, 0, .3, .25, 0, 0, 0, .25, .1, 0, 0])
DW_OUT = real([1, 2, 2, 4], [11, 3, 7.2, 10.6, 11, 3, 7.4, 10.9, 11, 3, 7.8, 11.5, 11, 3, 8.0, 11.8])
DW_1 = ([DW_IN, DW_F, real([4], [1, 2, 3, 4]), *map(int32, (0, 0, 0, 0, 1, 1, 2, 0)), NHWC, int32(1), int32(1)], [DW_OUT])
DW_1_IMPLICIT = ([DW_IN, DW_F, real([4], [1, 2, 3, 4]), *map(int32, (2, 1, 1, 2, 0)), NHWC, int32(1), int32(1)], [DW_OUT])
DW_2 = ([real([1, 4, 4, 2], [0] * 11 + [1, 1] + [0] * 6 + [1, 1] + [0] * 11), real([1, 2, 2, 4], range(1, 17)),
         real([4], [0] * 4), *map(int32, (0, 0, 0, 0, 1, 1, 2, 0)), NHWC, int32(2), int32(2)],
        [real([1, 2, 2, 4], [13, 14, 0, 0, 0, 0, 11, 12, 5, 6, 0, 0, 0, 0, 3, 4])])
DW_SAME_STRIDE_2 = ([real([1, 6, 6, 1], [1 if 2 <= r <= 3 and 2 <= c <= 3 else 0 for r in range(6) for c in range(6)]),
                     real([1, 2, 2, 1], [1, 2, 3, 4]), real([1], [0]), *map(int32, (1, 2, 2, 1, 0)), NHWC,
                     int32(3), int32(3)], [real([1, 3, 3, 1], [4, 0, 3, 0, 0, 0, 2, 0, 1])])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("example,layout", [(DW_1, 11), (DW_1_IMPLICIT, 8), (DW_2, 11), (DW_SAME_STRIDE_2, 8)])
def test_depthwise_conv_2d_examples(example, layout, variant):
    check("DEPTHWISE_CONV_2D", *example, variant=variant, layout=layout)


@pytest.mark.parametrize("example", [DW_1, DW_1_IMPLICIT])
def test_depthwise_conv_2d_quant8(example):
    check("DEPTHWISE_CONV_2D", *example, quant=q(.5, .01, .005, .1))


def test_depthwise_conv_2d_v1_0_quant8_with_multiplier():
    # depthwise_conv2d_quant8_large-like 1.0 vector: multiplier 2, VALID, stored values in and out.
    x = tensor(Q8, [129, 131, 141, 143, 133, 135, 145, 147, 137, 139, 149, 151], [1, 3, 2, 2], 0.5, 127)
    f = tensor(Q8, [129, 131, 133, 135, 109, 147, 105, 151, 137, 139, 141, 143, 153, 99, 157, 95], [1, 2, 2, 4], 0.5, 127)
    b = tensor("TENSOR_INT32", [4, 8, 12, 16], scale=0.25)
    out = nnref.evaluate("DEPTHWISE_CONV_2D", [x, f, b, *map(int32, (2, 1, 1, 2, 0))], [nnref.output(Q8, 1.0, 127)])[0]
    assert out.value.ravel().tolist() == [198, 93, 226, 107, 218, 101, 254, 123]


# GROUPED_CONV_2D (grouped_conv2d) ------------------------------------------------------------

GROUPED_1 = ([real([1, 3, 3, 2], [1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1, 2, 3, 3, 3, 3, 3]),
              real([2, 2, 2, 1], [1, 2, 2, 1, 4, 3, 2, 1]), real([2], [10, -33.5]),
              *map(int32, (0, 0, 0, 0, 1, 1, 2, 0)), NHWC],
             [real([1, 2, 2, 2], [33, -0.5, 33, 7.5, 31, 4.5, 27, -9.5])])
GROUPED_CHANNEL = ([real([1, 2, 2, 9], [1, 2, 3, 4, 55, 4, 3, 2, 1, 5, 4, 3, 2, 11, 2, 3, 4, 5,
                                        2, 3, 2, 3, 22, 3, 2, 3, 2, 1, 0, 2, 1, 33, 1, 2, 0, 1]),
                    real([6, 1, 1, 3], [1, 2, 3, 2, 1, 0, 2, 3, 3, 6, 6, 6, 9, 8, 5, 2, 1, 1]),
                    real([6], [10, -20, 30, -40, 50, -60]), *map(int32, (1, 1, 1, 3, 0)), NHWC],
                   [real([1, 2, 2, 6], [24, -16, 215, 338, 98, -51, 32, -6, 73, 50, 134, -45,
                                        24, -13, 111, 128, 102, -51, 17, -18, 134, 170, 73, -55])])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("example,layout", [(GROUPED_1, 11), (GROUPED_CHANNEL, 8)])
def test_grouped_conv_2d_examples(example, layout, variant):
    check("GROUPED_CONV_2D", *example, variant=variant, layout=layout)


@pytest.mark.parametrize("example,quant", [(GROUPED_1, q(.25, .25, .0625, .5, 100, 128, 80)),
                                           (GROUPED_CHANNEL, q(.5, .25, .125, 2.0, 0, 0, 60))])
def test_grouped_conv_2d_quant8(example, quant):
    check("GROUPED_CONV_2D", *example, quant=quant)


# TRANSPOSE_CONV_2D (transpose_conv2d) -------------------------------------------------------


def transpose_example(variant: str):
    shape = [1, 2, 5, 5] if variant == "nchw" else [1, 5, 5, 2]
    return ([real([1, 2, 2, 1], [1, 2, 3, 4]), real([2, 3, 3, 1], [1, 3, 5, 7, 9, 11, 13, 15, 17, 2, 4, 6, 8, 10, 12, 14, 16, 18]),
             real([2], [-1.5, -2]), tensor("TENSOR_INT32", shape), *map(int32, (2, 2, 2, 0)), NHWC],
            [real([1, 5, 5, 2], [-0.5, 0, 1.5, 2, 5.5, 8, 4.5, 6, 8.5, 10, 5.5, 6, 7.5, 8, 23.5, 26, 16.5, 18, 20.5, 22,
                                 14.5, 18, 22.5, 26, 60.5, 70, 40.5, 46, 52.5, 58, 19.5, 22, 25.5, 28, 59.5, 66, 34.5, 38,
                                 42.5, 46, 37.5, 40, 43.5, 46, 101.5, 108, 58.5, 62, 66.5, 70])])


TCONV_IN = real([1, 4, 4, 2], range(1, 33))
TCONV_F = real([1, 3, 3, 2], range(1, 19))
TCONV_EXPLICIT = ([TCONV_IN, TCONV_F, real([1], [0]), *map(int32, (1, 2, 2, 1, 1, 1, 0)), NHWC],
                  [real([1, 3, 3, 1], [678, 1347, 1689, 1494, 2715, 3057, 1968, 3352, 3652])])


@pytest.mark.parametrize("variant", VARIANTS)
def test_transpose_conv_2d_valid_stride_2(variant):
    check("TRANSPOSE_CONV_2D", *transpose_example(variant), variant=variant, layout=8)


def test_transpose_conv_2d_quant8_and_per_channel():
    check("TRANSPOSE_CONV_2D", *transpose_example("float32"), quant=q(.5, .5, .25, .5))
    x, f, b, *rest = transpose_example("float32")[0]
    per_channel = tensor("TENSOR_QUANT8_SYMM_PER_CHANNEL", f.array() / np.array([.25, .5]).reshape(2, 1, 1, 1),
                         channel_quant=ChannelQuant((.25, .5), 0))
    inputs = [tensor(Q8, x.array() / .25 + 100, scale=.25, zero_point=100), per_channel,
              tensor("TENSOR_INT32", b.array() / np.array([.0625, .125])), *rest]
    out = nnref.evaluate("TRANSPOSE_CONV_2D", inputs, [nnref.output(Q8, .5, 80)])[0]
    expected = quantize(transpose_example("float32")[1][0].array(), Q8, .5, 80)  # 101.5 saturates at 255
    assert np.abs(out.value.astype(int) - expected).max() <= 1


@pytest.mark.parametrize("variant", VARIANTS)
def test_transpose_conv_2d_same_and_explicit(variant):
    shape = [1, 1, 4, 4] if variant == "nchw" else [1, 4, 4, 1]
    same = ([TCONV_IN, TCONV_F, real([1], [0]), tensor("TENSOR_INT32", shape), *map(int32, (1, 1, 1, 0)), NHWC],
            [real([1, 4, 4, 1], [184, 412, 568, 528, 678, 1347, 1689, 1434, 1494, 2715, 3057, 2442, 1968, 3352, 3652, 2760])])
    check("TRANSPOSE_CONV_2D", *same, variant=variant, layout=8)
    check("TRANSPOSE_CONV_2D", *TCONV_EXPLICIT, variant=variant, layout=10)


def test_transpose_conv_2d_same_stride_3_relu_quant8():
    large = ([real([1, 1, 2, 1], [300, 500]), real([1, 3, 3, 1], [9, 5, 6, 9, 8, 5, 3, 1, 4]), real([1], [-1000]),
              tensor("TENSOR_INT32", [1, 3, 4, 1]), *map(int32, (1, 3, 3, 1)), NHWC],
             [real([1, 3, 4, 1], [500, 800, 3500, 1500, 1400, 500, 3500, 3000, 0, 200, 500, 0])])
    check("TRANSPOSE_CONV_2D", *large)
    check("TRANSPOSE_CONV_2D", *large, quant=q(2.0, .25, .5, 20.0, 0, 128, 50))


# FULLY_CONNECTED (fully_connected_float / _quant8) --------------------------------------------

FC = ([real([3, 1], [2, 32, 16]), real([1, 1], [2]), real([1], [4]), int32(0)], [real([3, 1], [8, 68, 36])])
FC_RANK4 = ([real([1, 2, 2, 5], [1, 2, 3, 4, 5, 6, 7, 8, -9, -10, 1, 2, 3, 4, 5, 6, 7, -8, 9, -10]),
             real([3, 10], list(range(1, 11)) * 3), real([3], [1, 2, 3]), int32(0)],
            [real([2, 3], [24, 25, 26, 58, 59, 60])])


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16"])
@pytest.mark.parametrize("example", [FC, FC_RANK4])
def test_fully_connected_examples(example, variant):
    check("FULLY_CONNECTED", *example, variant=variant)


def test_fully_connected_quant8():
    check("FULLY_CONNECTED", *FC, quant=q(.5, .5, .25, 1.0, 127, 127, 127))


# pooling (avg_pool_v1_2, max_pool_v1_2, l2_pool_v1_2) -------------------------------------------

POOL_IN = real([1, 2, 4, 1], [0, 6, 2, 4, 3, 2, 10, 7])
SAME_2X2_STRIDE_2 = [*map(int32, (1, 2, 2, 2, 2, 0)), NHWC]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("operation,expected", [("AVERAGE_POOL_2D", [2.75, 5.75]), ("MAX_POOL_2D", [6, 10]),
                                                ("L2_POOL_2D", [3.5, 6.5])])
def test_pool_same_padding(operation, expected, variant):
    check(operation, [POOL_IN, *SAME_2X2_STRIDE_2], [real([1, 1, 2, 1], expected)], variant=variant, layout=7)


@pytest.mark.parametrize("operation,expected", [("AVERAGE_POOL_2D", [2.75, 5.75]), ("MAX_POOL_2D", [6, 10])])
def test_pool_quant8(operation, expected):
    check(operation, [POOL_IN, *SAME_2X2_STRIDE_2], [real([1, 1, 2, 1], expected)],
          quant={("in", 0): (Q8, .25, 0), ("out", 0): (Q8, .25, 0)})


def test_average_pool_excludes_padding_and_applies_relu6():
    # avg_pool_v1_2 test 4: filter 100 over a 52x60 input padded by 50: every window's
    # valid part averages 10, clipped to 6; the padding never counts.
    x = real([1, 52, 60, 1], [10] * 52 * 60)
    args = [*map(int32, (50, 50, 50, 50, 5, 5, 100, 100, 3))]
    out = check("AVERAGE_POOL_2D", [x, *args], [real([1, 11, 13, 1], [6] * 143)])
    assert out[0].shape == (1, 11, 13, 1)


def test_max_pool_quant8_relu1_clamps_in_the_quantized_domain():
    x = tensor(Q8, [0, 50, 100, 200], [1, 2, 2, 1], scale=.02, zero_point=100)
    out = nnref.evaluate("MAX_POOL_2D", [x, *map(int32, (0, 0, 0, 0, 1, 1, 1, 1, 2))])[0]
    assert out.value.ravel().tolist() == [50, 50, 100, 150]  # [-1, 1] is [50, 150]


def test_bad_calls_name_the_operation_and_the_fault():
    x = tensor("TENSOR_FLOAT32", np.zeros((1, 3, 3, 1)))
    f = tensor("TENSOR_FLOAT32", np.zeros((1, 2, 2, 2)))
    with pytest.raises(BadOperation, match="CONV_2D: filter depth 2 != input depth 1"):
        nnref.evaluate("CONV_2D", [x, f, tensor("TENSOR_FLOAT32", [0.0]), *map(int32, (2, 1, 1, 0))])
    with pytest.raises(BadOperation, match="takes 7 or 8 or 10 or 11 or 13 inputs, got 3"):
        nnref.evaluate("CONV_2D", [x, f, x])
    with pytest.raises(BadOperation, match="padding scheme|SAME"):
        nnref.evaluate("CONV_2D", [x, tensor("TENSOR_FLOAT32", np.zeros((1, 2, 2, 1))), tensor("TENSOR_FLOAT32", [0.0]),
                                   *map(int32, (7, 1, 1, 0))])


def test_fully_connected_quant8_large_vector():
    # fully_connected_quant8_large: 5 products of 2.0 * [2, 4, 4, 4, 2] plus a 0.4 bias: 32.4 -> 32.
    x = tensor(Q8, [[10] * 5], scale=0.2)
    w = tensor(Q8, [[10, 20, 20, 20, 10]], scale=0.2)
    out = nnref.evaluate("FULLY_CONNECTED", [x, w, tensor("TENSOR_INT32", [10], scale=0.04), int32(0)],
                         [nnref.output(Q8, 1.0, 0)])[0]
    assert out.value.tolist() == [[32]]


@pytest.mark.parametrize("operation", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pool_quant8_1x1_filter_keeps_values(operation):
    x = tensor(Q8, [1, 2, 3, 4], [1, 2, 2, 1], scale=0.5)
    out = nnref.evaluate(operation, [x, *map(int32, (0, 0, 0, 0, 1, 1, 1, 1, 0))])[0]
    assert out.value.ravel().tolist() == [1, 2, 3, 4] and (out.scale, out.zero_point) == (0.5, 0)
