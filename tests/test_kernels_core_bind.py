"""The bindings of npu/ops.h's operations (kernels/bind_core.c): each operation read as an NN HAL
1.2 model lays it out (implicit and explicit padding, the layout input, dilation, optional axes,
broadcasting, every operand type SELECTING allows, the quantization rules), run end to end
against nnref; and bad calls refused with a status and a sentence naming the input."""

from __future__ import annotations

import numpy as np
import pytest

import nnref
from nn_ops import BindError, bind_check, bind_run, bind_vs_nnref, f32
from nnref import ChannelQuant, boolean, float16, float32, int32, output, tensor

F32, F16, Q8, I32 = "TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_QUANT8_ASYMM", "TENSOR_INT32"
PC = "TENSOR_QUANT8_SYMM_PER_CHANNEL"
RNG = np.random.default_rng(14)


def values(type: str, shape: tuple[int, ...], scale: float = 0.05, zero_point: int = 120) -> nnref.Operand:
    if type in (F32, F16):
        return tensor(type, RNG.uniform(-1, 1, shape))
    if type == I32:
        return tensor(type, RNG.integers(-50, 50, shape))
    return tensor(type, RNG.integers(0, 256, shape), scale=f32(scale), zero_point=zero_point)


def scalar_like(x: nnref.Operand, v: float) -> nnref.Operand:
    return float16(v) if x.type == F16 else float32(v)


def same(name, inputs, outputs=(), relaxed=False):
    got, expected = bind_vs_nnref(name, inputs, outputs, relaxed=relaxed)
    for g, e in zip(got, expected):
        if g.value.shape != e.value.shape and g.value.size == e.value.size == 1:  # a fully reduced [1] vs ()
            e = nnref.Operand(e.type, e.value.reshape(g.value.shape), e.scale, e.zero_point)
        nnref.assert_close(g, e, relaxed)
        if g.type in (Q8, I32):  # the integer paths are Android's exactly
            np.testing.assert_array_equal(g.value, e.value)


def refused(name, inputs, outputs, status, words, **check):
    with pytest.raises(BindError) as caught:
        if check:
            bind_check(name, inputs, outputs, **check)
        else:
            bind_run(name, inputs, outputs)
    assert caught.value.status == status, caught.value
    assert caught.value.why.startswith(name + ": ")
    assert words in caught.value.why, caught.value.why


# -- convolutions -------------------------------------------------------------------


def conv_operands(type: str, x_shape, filter_shape, out_channels, channel_dim=0):
    """(input, filter, bias) for a convolution of type (PC: quant8 input, per-channel filter)."""
    in_type = Q8 if type == PC else type
    x = values(in_type, x_shape, 0.05, 120)
    if type == PC:
        scales = tuple(f32(s) for s in RNG.uniform(0.01, 0.05, filter_shape[channel_dim]))
        f = tensor(PC, RNG.integers(-127, 128, filter_shape), channel_quant=ChannelQuant(scales, channel_dim))
        bias = tensor(I32, RNG.integers(-500, 500, out_channels), scale=0.0)
    elif type == Q8:
        f = values(Q8, filter_shape, 0.02, 128)
        bias = tensor(I32, RNG.integers(-500, 500, out_channels), scale=f32(x.scale * f.scale))
    else:
        f = values(type, filter_shape)
        bias = values(type, (out_channels,))
    return x, f, bias


def q8_output(type):
    return [output(Q8, 0.1, 100)] if type in (Q8, PC) else []


def nchw(x):
    return nnref.Operand(x.type, np.transpose(x.value, (0, 3, 1, 2)), x.scale, x.zero_point)


@pytest.mark.parametrize("type", [F32, F16, Q8, PC])
def test_conv_2d_explicit_implicit_layout_and_dilation(type):
    x, f, b = conv_operands(type, (2, 6, 5, 3), (4, 3, 2, 3), 4)
    outs = q8_output(type)
    explicit = [int32(1), int32(0), int32(2), int32(1), int32(2), int32(1), int32(1)]
    same("CONV_2D", [x, f, b, *explicit], outs)
    same("CONV_2D", [x, f, b, int32(1), int32(1), int32(2), int32(3)], outs)  # SAME, strides (1, 2), RELU6
    same("CONV_2D", [x, f, b, int32(2), int32(1), int32(1), int32(0), boolean(False), int32(2), int32(2)], outs)
    same("CONV_2D", [nchw(x), f, b, *explicit, boolean(True)], outs)
    same("CONV_2D", [nchw(x), f, b, int32(1), int32(2), int32(1), int32(0), boolean(True), int32(1), int32(2)], outs)


@pytest.mark.parametrize("type", [F32, F16, Q8, PC])
def test_depthwise_conv_2d_with_a_multiplier(type):
    x, f, b = conv_operands(type, (1, 5, 5, 2), (1, 3, 3, 4), 4, channel_dim=3)
    outs = q8_output(type)
    same("DEPTHWISE_CONV_2D", [x, f, b, int32(1), int32(1), int32(1), int32(2), int32(0)], outs)
    same("DEPTHWISE_CONV_2D", [x, f, b, int32(0), int32(1), int32(1), int32(0), int32(2), int32(1), int32(2),
                               int32(1)], outs)
    same("DEPTHWISE_CONV_2D", [nchw(x), f, b, int32(2), int32(1), int32(1), int32(2), int32(0), boolean(True),
                               int32(2), int32(1)], outs)


@pytest.mark.parametrize("type", [F32, F16, Q8, PC])
def test_grouped_conv_2d(type):
    x, f, b = conv_operands(type, (1, 4, 4, 4), (6, 2, 2, 2), 6)
    outs = q8_output(type)
    same("GROUPED_CONV_2D", [x, f, b, int32(2), int32(1), int32(1), int32(2), int32(0), boolean(False)], outs)
    same("GROUPED_CONV_2D", [nchw(x), f, b, int32(1), int32(0), int32(0), int32(1), int32(2), int32(1), int32(2),
                             int32(1), boolean(True)], outs)


@pytest.mark.parametrize("type", [F32, F16, Q8])
def test_fully_connected_reads_any_input_as_rows(type):
    x = values(type, (2, 3, 2, 4))
    w = values(type, (5, 8), 0.02, 128)
    b = (tensor(I32, RNG.integers(-300, 300, 5), scale=f32(x.scale * w.scale)) if type == Q8
         else values(type, (5,)))
    same("FULLY_CONNECTED", [x, w, b, int32(1)], q8_output(type))
    assert bind_check("FULLY_CONNECTED", [x, w, b, int32(0)], [output(type, 0.1, 100)]) == [(6, 5)]


@pytest.mark.parametrize("name,types", [("AVERAGE_POOL_2D", (F32, F16, Q8)), ("MAX_POOL_2D", (F32, F16, Q8)),
                                        ("L2_POOL_2D", (F32, F16))])
def test_pools_explicit_implicit_and_nchw(name, types):
    for type in types:
        x = values(type, (2, 5, 6, 3))
        same(name, [x, int32(1), int32(0), int32(0), int32(1), int32(2), int32(2), int32(2), int32(3), int32(0)])
        same(name, [x, int32(1), int32(2), int32(1), int32(3), int32(2), int32(1)])
        same(name, [nchw(x), int32(2), int32(1), int32(2), int32(2), int32(2), int32(0), boolean(True)])


# -- element-wise ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("type", [F32, F16, Q8])
def test_arithmetic_broadcasts(name, type):
    a = values(type, (2, 1, 3), 0.05, 100)
    b = values(type, (4, 1), 0.03, 140)
    same(name, [a, b, int32(0)], [output(Q8, 0.2, 128)] if type == Q8 else [])
    same(name, [b, a, int32(1)], [output(Q8, 0.2, 10)] if type == Q8 else [])


@pytest.mark.parametrize("name", ["MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("type", [F32, F16, Q8, I32])
def test_maximum_minimum(name, type):
    same(name, [values(type, (3, 1, 2)), values(type, (1, 4, 2))])


@pytest.mark.parametrize("name", ["RELU", "RELU1", "RELU6", "LOGISTIC", "TANH"])
@pytest.mark.parametrize("type", [F32, F16, Q8])
def test_activations(name, type):
    x = values(type, (2, 3, 4), 0.1, 128)
    same(name, [x])
    if type == Q8 and name.startswith("RELU"):
        same(name, [x], [output(Q8, 0.03, 5)])


@pytest.mark.parametrize("type", [F32, F16, Q8])
def test_softmax_on_any_axis_and_rank(type):
    for shape, axis in (((2, 5), None), ((2, 3, 4), 1), ((1, 2, 3, 4), -3), ((6,), 0)):
        x = values(type, shape, 0.1, 128)
        same("SOFTMAX", [x, scalar_like(x, 0.7)] + ([] if axis is None else [int32(axis)]))


@pytest.mark.parametrize("type", [F32, F16, Q8])
def test_l2_normalization_prelu(type):
    x = values(type, (2, 3, 4), 0.1, 128)
    same("L2_NORMALIZATION", [x])
    same("L2_NORMALIZATION", [x, int32(-2)])
    same("PRELU", [x, values(type, (3, 1), 0.01, 50)])


def test_quantize_and_dequantize():
    for type in (F32, F16):
        same("QUANTIZE", [values(type, (3, 4))], [output(Q8, 0.01, 100)])
        same("DEQUANTIZE", [values(Q8, (2, 5))], [output(type)])
    per_channel = tensor(PC, RNG.integers(-127, 128, (2, 3)), channel_quant=ChannelQuant((0.5, 0.25), 0))
    same("DEQUANTIZE", [per_channel], [output(F32)])
    same("DEQUANTIZE", [tensor("TENSOR_QUANT8_SYMM", [[-3, 4]], scale=0.5)], [output(F16)])


# -- moving values ----------------------------------------------------------------------


@pytest.mark.parametrize("type", [F32, F16, Q8])
def test_reshape_concatenation_pad(type):
    x = values(type, (2, 3, 4))
    same("RESHAPE", [x, tensor(I32, [4, -1])])
    same("RESHAPE", [x, tensor(I32, [24])], [output(Q8, 0.07, 3)] if type == Q8 else [])
    same("CONCATENATION", [x, values(type, (2, 1, 4), 0.02, 30), values(type, (2, 2, 4)), int32(-2)],
         [output(Q8, 0.05, 120)] if type == Q8 else [])
    same("PAD", [x, tensor(I32, [[0, 1], [2, 0], [1, 1]])])
    fill = int32(7) if type == Q8 else scalar_like(x, -2.5)
    same("PAD_V2", [x, tensor(I32, [[1, 0], [0, 0], [2, 3]]), fill])


@pytest.mark.parametrize("type", [F32, F16, Q8])
def test_reductions_and_arg(type):
    x = values(type, (2, 3, 4), 0.1, 100)
    same("MEAN", [x, tensor(I32, [1, -1]), int32(1)])
    same("MEAN", [x, tensor(I32, [0]), int32(0)])
    same("MEAN", [x, tensor(I32, [0, 1, 2]), int32(0)])
    same("REDUCE_MAX", [x, tensor(I32, [2]), boolean(False)])
    same("REDUCE_MIN", [x, tensor(I32, [0, 2]), boolean(True)])
    for t in (type, I32):
        y = values(t, (2, 3, 4))
        same("ARGMAX", [y, int32(1)])
        same("ARGMIN", [y, int32(-1)])


@pytest.mark.parametrize("type", [F32, F16, Q8, I32])
def test_gather(type):
    x = values(type, (3, 4, 2))
    same("GATHER", [x, int32(1), tensor(I32, [[3, 0], [1, 1]])])
    same("GATHER", [x, int32(-3), tensor(I32, [2])])


@pytest.mark.parametrize("type", [F32, F16, Q8])
def test_transpose_strided_slice(type):
    x = values(type, (2, 3, 4))
    same("TRANSPOSE", [x, tensor(I32, [1, 2, 0])])
    same("TRANSPOSE", [x])
    same("STRIDED_SLICE", [x, tensor(I32, [0, -1, 3]), tensor(I32, [2, 0, 0]), tensor(I32, [1, -1, -2]),
                           int32(0), int32(0), int32(0)])
    same("STRIDED_SLICE", [x, tensor(I32, [1, 0, 1]), tensor(I32, [2, 3, 4]), tensor(I32, [1, 2, 1]),
                           int32(0b010), int32(0b100), int32(0b001)])


@pytest.mark.parametrize("type", [F32, F16, Q8])
def test_resize_and_space_depth(type):
    x = values(type, (1, 2, 4, 8))
    same("RESIZE_BILINEAR", [x, int32(5), int32(3)])
    same("RESIZE_BILINEAR", [nchw(x), scalar_like(x, 1.5), scalar_like(x, 2.0), boolean(True)])
    same("DEPTH_TO_SPACE", [x, int32(2)])
    same("DEPTH_TO_SPACE", [nchw(x), int32(2), boolean(True)])
    same("SPACE_TO_DEPTH", [x, int32(2)])
    same("SPACE_TO_DEPTH", [nchw(x), int32(2), boolean(True)])


# -- what prepare knows without data or shapes ---------------------------------------------


def test_prepare_without_data_gives_what_it_can():
    x, f, b = conv_operands(F32, (1, 8, 8, 3), (5, 3, 3, 3), 5)
    conv = [x, f, b, int32(1), int32(2), int32(2), int32(0)]
    assert bind_check("CONV_2D", conv, [output(F32)], data=False) == [None]  # padding scheme unknown
    assert bind_check("CONV_2D", conv, [output(F32)], data=True) == [(1, 4, 4, 5)]
    assert bind_check("ADD", [x, x, int32(0)], [output(F32)], data=False) == [(1, 8, 8, 3)]
    assert bind_check("ADD", [x, x, int32(0)], [output(F32)], shapes=False) == [None]
    assert bind_check("RESHAPE", [x, tensor(I32, [-1, 3])], [output(F32)], data=False) == [None]


# -- refusals ---------------------------------------------------------------------------------


def test_bad_calls_are_refused_naming_the_input():
    x, f, b = conv_operands(F32, (1, 4, 4, 3), (2, 3, 3, 3), 2)
    pads = [int32(0)] * 4 + [int32(1), int32(1), int32(0)]
    refused("CONV_2D", [x, f, b, *pads[:5]], [output(F32)], "BAD_OPERATION", "inputs")
    refused("CONV_2D", [x, values(F16, (2, 3, 3, 3)), b, *pads], [output(F32)], "BAD_OPERAND_TYPE", "input 1")
    refused("CONV_2D", [x, f, b, int32(-1), *pads[1:]], [output(F32)], "BAD_SCALAR", "input 3 (padding)")
    refused("CONV_2D", [x, f, b, *pads[:4], int32(0), int32(1), int32(0)], [output(F32)], "BAD_SCALAR", "strides")
    refused("CONV_2D", [x, f, b, *pads[:6], int32(4)], [output(F32)], "BAD_FUSE_CODE", "input 9")
    refused("CONV_2D", [x, f, b, int32(3), int32(1), int32(1), int32(0)], [output(F32)], "BAD_SCALAR", "scheme")
    refused("CONV_2D", [x, values(F32, (2, 3, 3, 2)), b, *pads], [output(F32)], "BAD_SHAPE", "depth")
    refused("CONV_2D", [x, f, values(F32, (3,)), *pads], [output(F32)], "BAD_SHAPE", "input 2 (bias)")
    refused("CONV_2D", [x, values(F32, (2, 5, 5, 3)), values(F32, (2,)), *pads], [output(F32)], "BAD_SHAPE",
            "output would be")
    refused("CONV_2D", [x, f, b, *pads], [output(F16)], "BAD_OPERAND_TYPE", "output 0")


def test_quantization_rules_are_checked():
    x, f, b = conv_operands(Q8, (1, 4, 4, 3), (2, 3, 3, 3), 2)
    pads = [int32(0)] * 4 + [int32(1), int32(1), int32(0)]
    wrong_bias = tensor(I32, b.value, scale=f32(x.scale * f.scale * 2))
    refused("CONV_2D", [x, f, wrong_bias, *pads], [output(Q8, 0.1, 0)], "BAD_SCALAR", "input 2 (bias)")
    refused("CONV_2D", [x, f, b, *pads], [output(Q8, 0.0, 0)], "BAD_SCALAR", "output 0")
    pc, _, _ = conv_operands(PC, (1, 4, 4, 3), (2, 3, 3, 3), 2)
    _, fpc, bpc = conv_operands(PC, (1, 4, 4, 3), (2, 3, 3, 3), 2, channel_dim=3)
    refused("CONV_2D", [pc, fpc, bpc, *pads], [output(Q8, 0.1, 0)], "BAD_SCALAR", "channelDim")
    q = values(Q8, (2, 3), 0.1, 128)
    refused("LOGISTIC", [q], [output(Q8, 0.1, 0)], "BAD_SCALAR", "scale 0.00390625 and zero point 0")
    refused("SOFTMAX", [q, float32(1.0)], [output(Q8, 1 / 128, 0)], "BAD_SCALAR", "output 0")
    refused("MUL", [q, q, int32(0)], [output(Q8, 0.001, 0)], "BAD_SCALAR", "exceed")
    refused("MAX_POOL_2D", [values(Q8, (1, 2, 2, 1), 0.1, 128), int32(2), int32(1), int32(1), int32(1), int32(1),
                            int32(0)], [output(Q8, 0.2, 128)], "BAD_SCALAR", "keep input 0's scale")


def test_bad_shapes_and_scalars_of_the_other_operations():
    x = values(F32, (2, 3, 4))
    refused("ADD", [x, values(F32, (2, 4)), int32(0)], [output(F32)], "BAD_SHAPE", "broadcast")
    refused("SOFTMAX", [x, float32(0.0)], [output(F32)], "BAD_SCALAR", "beta")
    refused("SOFTMAX", [x, float16(1.0)], [output(F32)], "BAD_OPERAND_TYPE", "input 1")
    refused("SOFTMAX", [x, float32(1.0), int32(3)], [output(F32)], "BAD_SCALAR", "axis")
    refused("RESHAPE", [x, tensor(I32, [5, -1])], [output(F32)], "BAD_SHAPE", "fill")
    refused("RESHAPE", [x, tensor(I32, [-1, -1])], [output(F32)], "BAD_SHAPE", "input 1 (shape)")
    refused("CONCATENATION", [x, values(F32, (2, 2, 5)), int32(1)], [output(F32)], "BAD_SHAPE", "dimension 2")
    refused("PAD", [x, tensor(I32, [[0, 1], [0, 1]])], [output(F32)], "BAD_SHAPE", "paddings")
    refused("PAD", [x, tensor(I32, [[0, 1], [0, -1], [0, 0]])], [output(F32)], "BAD_SCALAR", "paddings")
    refused("PAD_V2", [values(Q8, (2, 2)), tensor(I32, [[0, 1], [0, 1]]), int32(256)], [output(Q8, 0.05, 120)],
            "BAD_SCALAR", "pad value")
    refused("MEAN", [x, tensor(I32, [3]), int32(0)], [output(F32)], "BAD_SCALAR", "axes")
    refused("ARGMAX", [x, int32(0)], [output(F32)], "BAD_OPERAND_TYPE", "output 0 must be TENSOR_INT32")
    refused("GATHER", [x, int32(0), tensor(I32, [2])], [output(F32)], "BAD_SCALAR", "indices")
    refused("TRANSPOSE", [x, tensor(I32, [0, 0, 1])], [output(F32)], "BAD_SCALAR", "permutation")
    refused("STRIDED_SLICE", [x, tensor(I32, [0, 0, 0]), tensor(I32, [2, 3, 4]), tensor(I32, [1, 0, 1]),
                              int32(0), int32(0), int32(0)], [output(F32)], "BAD_SCALAR", "strides")
    refused("DEPTH_TO_SPACE", [values(F32, (1, 2, 2, 3)), int32(2)], [output(F32)], "BAD_SHAPE", "block")
    refused("RESIZE_BILINEAR", [values(F32, (1, 2, 2, 3)), int32(0), int32(2)], [output(F32)], "BAD_SHAPE",
            "output would be")
    refused("QUANTIZE", [x], [output(F32)], "BAD_OPERAND_TYPE", "output 0")
    refused("DEQUANTIZE", [x], [output(F32)], "BAD_OPERAND_TYPE", "input 0")
    refused("RELU", [x, x], [output(F32)], "BAD_OPERATION", "takes 1 inputs")
    refused("L2_POOL_2D", [values(Q8, (1, 2, 2, 1)), *[int32(1)] * 5, int32(0)], [output(Q8, 0.1, 0)],
            "BAD_OPERAND_TYPE", "input 0")
