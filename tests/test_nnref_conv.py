"""nnref's convolutions and pooling against AOSP's 1.2 test vectors, in each variation they run."""

from __future__ import annotations

import numpy as np
import pytest

import nnref
from nnref import BadOperation, ChannelQuant, boolean, int32, tensor
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
