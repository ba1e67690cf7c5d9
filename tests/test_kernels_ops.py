"""The operation library (npu/ops.h) against nnref, called through framework.nn._cpu's ffi (tests/nn_ops.py)."""

from __future__ import annotations

import numpy as np

import nnref
from framework.nn._cpu import ffi, lib
from nn_ops import CODES, Tensor, empty_like, f32, run, status, tensor  # noqa: F401 - shared with the other kernel tests

# -- the quantization arithmetic, against nnref's -----------------------------------

from hypothesis import assume, given, settings, strategies as st  # noqa: E402

import pytest  # noqa: E402
from nnref import core  # noqa: E402

I32 = st.integers(-(2**31), 2**31 - 1)


@given(st.floats(min_value=1e-12, max_value=1e6, allow_nan=False) | st.just(0.0))
def test_quantize_multiplier_is_androids(real):
    q, s = ffi.new("int32_t *"), ffi.new("int32_t *")
    assert lib.npu_quantize_multiplier(real, q, s) == lib.NPU_OK
    assert (q[0], s[0]) == core.quantize_multiplier(real)


@given(I32, I32, st.integers(-31, 31))
def test_fixed_point_helpers_are_androids(a, b, shift):
    assert lib.npu_saturating_rounding_doubling_high_mul(a, b) == int(core.saturating_rounding_doubling_high_mul(a, b))
    if shift >= 0:
        assert lib.npu_rounding_divide_by_pot(a, shift) == int(core.rounding_divide_by_pot(a, shift))
    m = b if b > 0 else (2**30 if b == 0 else -b if b > -(2**31) else 2**31 - 1)
    assert lib.npu_multiply_by_quantized_multiplier(a, m, shift) == int(core.multiply_by_quantized_multiplier(a, m, shift))


def test_bad_multipliers_are_refused():
    q, s = ffi.new("int32_t *"), ffi.new("int32_t *")
    for real in (-1.0, float("nan"), float("inf"), 1e300):
        assert status(lib.npu_quantize_multiplier(real, q, s)) == "BAD_SCALAR"


def test_half_conversion_round_trips_every_half_and_rounds_to_nearest_even():
    halves = np.arange(65536, dtype=np.uint16)
    as_float = np.array([lib.npu_half_to_float(int(h)) for h in halves], np.float32)
    expected = halves.view(np.float16).astype(np.float32)
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(as_float[finite], expected[finite])
    assert np.isnan(as_float[np.isnan(expected)]).all()
    back = np.array([lib.npu_float_to_half(float(f)) for f in as_float[finite]], np.uint16)
    np.testing.assert_array_equal(back, halves[finite])
    rng = np.random.default_rng(1)
    samples = np.concatenate([rng.standard_normal(3000) * 10.0 ** rng.integers(-9, 6, 3000), [65519.0, 65520.0, 1e-8, 3e-8]]).astype(np.float32)
    got = np.array([lib.npu_float_to_half(float(f)) for f in samples], np.uint16)
    with np.errstate(over="ignore"):  # 65520 and beyond round to infinity, as they should
        np.testing.assert_array_equal(got, samples.astype(np.float16).view(np.uint16))


# -- convolutions, fully connected, pools ------------------------------------------

from nnref import ChannelQuant, boolean, int32  # noqa: E402

FLOAT_TYPES = ("TENSOR_FLOAT32", "TENSOR_FLOAT16")
KINDS = ("TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_QUANT8_ASYMM", "PER_CHANNEL")


def values(rng: np.random.Generator, type: str, shape: tuple[int, ...]) -> nnref.Operand:
    """Random operand of ``type`` (quantized ones with a float32 scale and a zero point).

    Floats are within [-1, 1], as a model's activations and weights mostly are: the float32
    kernels accumulate in float32 as Android's do, so a dot product of hundreds of larger
    terms would drift past nnref's float64 by more than Android's 1e-5 tolerance.
    """
    if type in FLOAT_TYPES:
        return nnref.tensor(type, rng.uniform(-1, 1, shape))
    return nnref.tensor(type, rng.integers(0, 256, shape), scale=f32(rng.uniform(0.01, 0.1)),
                        zero_point=int(rng.integers(0, 256)))


def weights(rng, kind: str, x: nnref.Operand, shape: tuple[int, ...], channel_dim: int):
    """(filter, bias) of a convolution of kind over input x; the bias has shape[channel_dim] entries."""
    channels = shape[channel_dim]
    if kind in FLOAT_TYPES:
        return values(rng, kind, shape), values(rng, kind, (channels,))
    if kind == "PER_CHANNEL":
        scales = tuple(f32(s) for s in rng.uniform(0.002, 0.05, channels))
        f = nnref.tensor("TENSOR_QUANT8_SYMM_PER_CHANNEL", rng.integers(-127, 128, shape),
                         channel_quant=ChannelQuant(scales, channel_dim))
    else:
        f = values(rng, "TENSOR_QUANT8_ASYMM", shape)
    return f, nnref.tensor("TENSOR_INT32", rng.integers(-3000, 3000, (channels,)))


def quant_output(kind: str, rng) -> nnref.Operand | None:
    if kind in FLOAT_TYPES:
        return None
    return nnref.output("TENSOR_QUANT8_ASYMM", f32(rng.uniform(0.02, 0.2)), int(rng.integers(0, 256)))


def window(pads=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), fuse=0, nchw=False, filter_hw=(1, 1)):
    """A struct npu_window; pads are (left, right, top, bottom), strides and dilations (w, h)."""
    w = ffi.new("struct npu_window *")
    w.pad_left, w.pad_right, w.pad_top, w.pad_bottom = pads
    w.stride_w, w.stride_h = strides
    w.dilation_w, w.dilation_h = dilations
    w.filter_h, w.filter_w = filter_hw
    w.fuse, w.nchw = fuse, nchw
    return w


def nchw_of(x: nnref.Operand) -> nnref.Operand:
    return nnref.Operand(x.type, np.transpose(x.value, (0, 3, 1, 2)), x.scale, x.zero_point)


def check(got: nnref.Operand, expected: nnref.Operand) -> None:
    if got.type == "TENSOR_QUANT8_ASYMM":  # the integer path is Android's: exact
        np.testing.assert_array_equal(got.value, expected.value)
    else:
        nnref.assert_close(got, expected)


conv_params = st.fixed_dictionaries({
    "kind": st.sampled_from(KINDS), "n": st.integers(1, 2), "h": st.integers(1, 9), "w": st.integers(1, 9),
    "c": st.integers(1, 6), "oc": st.integers(1, 20), "fh": st.integers(1, 4), "fw": st.integers(1, 4),
    "pads": st.tuples(*[st.integers(0, 2)] * 4), "strides": st.tuples(st.integers(1, 3), st.integers(1, 3)),
    "dilations": st.tuples(st.integers(1, 2), st.integers(1, 2)), "fuse": st.integers(0, 3),
    "nchw": st.booleans(), "seed": st.integers(0, 2**32 - 1),
})


def conv_case(p: dict, depthwise: bool = False):
    rng = np.random.default_rng(p["seed"])
    kind = p["kind"]
    x = values(rng, "TENSOR_QUANT8_ASYMM" if kind == "PER_CHANNEL" else kind, (p["n"], p["h"], p["w"], p["c"]))
    if depthwise:
        multiplier = 1 + p["oc"] % 3
        f, b = weights(rng, kind, x, (1, p["fh"], p["fw"], p["c"] * multiplier), 3)
    else:
        multiplier = None
        f, b = weights(rng, kind, x, (p["oc"], p["fh"], p["fw"], p["c"]), 0)
    return rng, x, f, b, multiplier


def assume_not_empty(p: dict) -> None:
    oh = core.output_size(p["h"], p["fh"], p["strides"][1], p["dilations"][1], p["pads"][2], p["pads"][3])
    ow = core.output_size(p["w"], p["fw"], p["strides"][0], p["dilations"][0], p["pads"][0], p["pads"][1])
    assume(oh >= 1 and ow >= 1)  # test_conv_2d_matches_nnref checks the refusal


@settings(max_examples=120, deadline=None)
@given(conv_params)
def test_conv_2d_matches_nnref(p):
    oh = core.output_size(p["h"], p["fh"], p["strides"][1], p["dilations"][1], p["pads"][2], p["pads"][3])
    ow = core.output_size(p["w"], p["fw"], p["strides"][0], p["dilations"][0], p["pads"][0], p["pads"][1])
    rng, x, f, b, _ = conv_case(p)
    xin = nchw_of(x) if p["nchw"] else x
    ins = [xin, f, b, *map(int32, p["pads"]), *map(int32, p["strides"]), int32(p["fuse"]), boolean(p["nchw"]),
           *map(int32, p["dilations"])]
    keep = [tensor(xin), tensor(f), tensor(b)]
    if oh < 1 or ow < 1:
        out = Tensor(x.type, np.zeros((1, 1, 1, p["oc"])), 0.1, 0)
        rc = lib.npu_op_conv_2d(*(k.ptr for k in keep), window(**_w(p)), out.ptr, 0, 2**64 - 1)
        assert status(rc) == "BAD_SHAPE"
        return
    got, expected = run("CONV_2D", ins, [quant_output(p["kind"], rng)],
                        lambda out: lib.npu_op_conv_2d(*(k.ptr for k in keep), window(**_w(p)), out, 0, 2**64 - 1))
    check(got, expected)


def _w(p: dict) -> dict:
    return {"pads": p["pads"], "strides": p["strides"], "dilations": p["dilations"], "fuse": p["fuse"], "nchw": p["nchw"]}


@settings(max_examples=80, deadline=None)
@given(conv_params)
def test_depthwise_conv_2d_matches_nnref(p):
    assume_not_empty(p)
    rng, x, f, b, multiplier = conv_case(p, depthwise=True)
    xin = nchw_of(x) if p["nchw"] else x
    ins = [xin, f, b, *map(int32, p["pads"]), *map(int32, p["strides"]), int32(multiplier), int32(p["fuse"]),
           boolean(p["nchw"]), *map(int32, p["dilations"])]
    keep = [tensor(xin), tensor(f), tensor(b)]
    got, expected = run("DEPTHWISE_CONV_2D", ins, [quant_output(p["kind"], rng)],
                        lambda out: lib.npu_op_depthwise_conv_2d(*(k.ptr for k in keep), window(**_w(p)), multiplier,
                                                                 out, 0, 2**64 - 1))
    check(got, expected)


@settings(max_examples=60, deadline=None)
@given(conv_params, st.integers(1, 4))
def test_grouped_conv_2d_matches_nnref(p, groups):
    p = {**p, "c": p["c"] * groups, "oc": groups * (1 + p["oc"] % 4), "dilations": (1, 1)}
    assume_not_empty(p)
    rng = np.random.default_rng(p["seed"])
    kind = p["kind"]
    x = values(rng, "TENSOR_QUANT8_ASYMM" if kind == "PER_CHANNEL" else kind, (p["n"], p["h"], p["w"], p["c"]))
    f, b = weights(rng, kind, x, (p["oc"], p["fh"], p["fw"], p["c"] // groups), 0)
    xin = nchw_of(x) if p["nchw"] else x
    ins = [xin, f, b, *map(int32, p["pads"]), *map(int32, p["strides"]), int32(groups), int32(p["fuse"]),
           boolean(p["nchw"])]
    keep = [tensor(xin), tensor(f), tensor(b)]
    got, expected = run("GROUPED_CONV_2D", ins, [quant_output(kind, rng)],
                        lambda out: lib.npu_op_grouped_conv_2d(*(k.ptr for k in keep), window(**_w(p)), groups,
                                                               out, 0, 2**64 - 1))
    check(got, expected)


@pytest.mark.parametrize("scheme", [1, 2])
@pytest.mark.parametrize("kind", ["TENSOR_FLOAT32", "PER_CHANNEL"])
def test_conv_2d_implicit_padding_is_the_specs(scheme, kind):
    """A mobile-shaped layer (stride 2, SAME or VALID): the C's implicit padding and conv agree
    with nnref's 10-input implicit form."""
    p = {"kind": kind, "n": 1, "h": 15, "w": 12, "c": 8, "oc": 24, "fh": 3, "fw": 3, "seed": 7}
    rng, x, f, b, _ = conv_case(p)
    head, tail = ffi.new("int32_t *"), ffi.new("int32_t *")
    pads = []
    for size in (12, 15):  # width, then height
        assert lib.npu_ops_implicit_padding(size, 2, 3, 1, scheme, head, tail) == lib.NPU_OK
        pads += [head[0], tail[0]]
    ins = [x, f, b, int32(scheme), int32(2), int32(2), int32(1)]
    keep = [tensor(x), tensor(f), tensor(b)]
    w = window(pads=tuple(pads), strides=(2, 2), fuse=1)
    got, expected = run("CONV_2D", ins, [quant_output(kind, rng)],
                        lambda out: lib.npu_op_conv_2d(*(k.ptr for k in keep), w, out, 0, 2**64 - 1))
    check(got, expected)


def test_conv_2d_in_slices_is_the_whole():
    """Rows computed slice by slice, in any order, give the output computed at once."""
    p = {"kind": "TENSOR_QUANT8_ASYMM", "n": 2, "h": 10, "w": 7, "c": 5, "oc": 9, "fh": 3, "fw": 3, "seed": 3}
    rng, x, f, b, _ = conv_case(p)
    keep = [tensor(x), tensor(f), tensor(b)]
    w = window(pads=(1, 1, 1, 1), fuse=3)
    out_q = quant_output("TENSOR_QUANT8_ASYMM", rng)
    whole = Tensor(out_q.type, np.zeros((2, 10, 7, 9)), out_q.scale, out_q.zero_point)
    parts = Tensor(out_q.type, np.zeros((2, 10, 7, 9)), out_q.scale, out_q.zero_point)
    assert lib.npu_op_conv_2d(*(k.ptr for k in keep), w, whole.ptr, 0, 2**64 - 1) == lib.NPU_OK
    assert lib.npu_ops_units_spatial(parts.ptr, False) == 20
    for begin, end in [(13, 20), (0, 1), (5, 13), (1, 5)]:
        assert lib.npu_op_conv_2d(*(k.ptr for k in keep), w, parts.ptr, begin, end) == lib.NPU_OK
    np.testing.assert_array_equal(parts.array, whole.array)


fc_params = st.fixed_dictionaries({
    "kind": st.sampled_from(KINDS[:3]), "batch": st.integers(1, 9), "size": st.integers(1, 300),
    "units": st.integers(1, 40), "fuse": st.integers(0, 3), "rank4": st.booleans(), "seed": st.integers(0, 2**32 - 1),
})


@settings(max_examples=80, deadline=None)
@given(fc_params)
def test_fully_connected_matches_nnref(p):
    rng = np.random.default_rng(p["seed"])
    x = values(rng, p["kind"], (p["batch"], 1, 1, p["size"]) if p["rank4"] else (p["batch"], p["size"]))
    wts, b = weights(rng, p["kind"], x, (p["units"], p["size"]), 0)
    keep = [tensor(x), tensor(wts), tensor(b)]
    got, expected = run("FULLY_CONNECTED", [x, wts, b, int32(p["fuse"])], [quant_output(p["kind"], rng)],
                        lambda out: lib.npu_op_fully_connected(*(k.ptr for k in keep), p["fuse"], out, 0, 2**64 - 1))
    check(got, expected)


pool_params = st.fixed_dictionaries({
    "op": st.sampled_from(["AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"]), "kind": st.sampled_from(KINDS[:3]),
    "n": st.integers(1, 2), "h": st.integers(1, 9), "w": st.integers(1, 9), "c": st.integers(1, 5),
    "fh": st.integers(1, 4), "fw": st.integers(1, 4), "pads": st.tuples(*[st.integers(0, 1)] * 4),
    "strides": st.tuples(st.integers(1, 3), st.integers(1, 3)), "fuse": st.integers(0, 3), "nchw": st.booleans(),
    "seed": st.integers(0, 2**32 - 1),
})
POOLS = {"AVERAGE_POOL_2D": lib.npu_op_average_pool_2d, "MAX_POOL_2D": lib.npu_op_max_pool_2d,
         "L2_POOL_2D": lib.npu_op_l2_pool_2d}


@settings(max_examples=120, deadline=None)
@given(pool_params)
def test_pools_match_nnref(p):
    if p["op"] == "L2_POOL_2D" and p["kind"] == "TENSOR_QUANT8_ASYMM":
        p = {**p, "kind": "TENSOR_FLOAT32"}
    assume_not_empty({**p, "dilations": (1, 1)})
    pw, ph = (p["pads"][0], p["pads"][1]), (p["pads"][2], p["pads"][3])
    assume(p["fh"] > max(ph) and p["fw"] > max(pw))  # else a window may lie wholly in the padding
    rng = np.random.default_rng(p["seed"])
    x = values(rng, p["kind"], (p["n"], p["h"], p["w"], p["c"]))
    xin = nchw_of(x) if p["nchw"] else x
    ins = [xin, *map(int32, p["pads"]), *map(int32, p["strides"]), int32(p["fw"]), int32(p["fh"]), int32(p["fuse"]),
           boolean(p["nchw"])]
    w = window(pads=p["pads"], strides=p["strides"], fuse=p["fuse"], nchw=p["nchw"], filter_hw=(p["fh"], p["fw"]))
    keep = tensor(xin)
    got, expected = run(p["op"], ins, [], lambda out: POOLS[p["op"]](keep.ptr, w, out, 0, 2**64 - 1))
    check(got, expected)


# -- element-wise ------------------------------------------------------------------

shapes4 = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@st.composite
def broadcast_pair(draw):
    out = draw(shapes4)
    def side():
        rank = draw(st.integers(1, len(out)))
        return tuple(d if draw(st.booleans()) else 1 for d in out[len(out) - rank:])
    return side(), side()


ARITH = {"ADD": lib.npu_op_add, "SUB": lib.npu_op_sub, "MUL": lib.npu_op_mul}


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(ARITH)), st.sampled_from(KINDS[:3]), broadcast_pair(), st.integers(0, 3),
       st.integers(0, 2**32 - 1))
def test_add_sub_mul_broadcast_match_nnref(op, kind, shapes, fuse, seed):
    rng = np.random.default_rng(seed)
    a, b = values(rng, kind, shapes[0]), values(rng, kind, shapes[1])
    out = quant_output(kind, rng)
    if op == "MUL" and out is not None and not out.scale > a.scale * b.scale:
        out = nnref.output(out.type, f32(a.scale * b.scale * 1.5), out.zero_point)
    keep = [tensor(a), tensor(b)]
    got, expected = run(op, [a, b, int32(fuse)], [out], lambda o: ARITH[op](keep[0].ptr, keep[1].ptr, fuse, o))
    check(got, expected)


UNARY = {"RELU": lib.npu_op_relu, "RELU1": lib.npu_op_relu1, "RELU6": lib.npu_op_relu6,
         "LOGISTIC": lib.npu_op_logistic, "TANH": lib.npu_op_tanh}
FIXED = {"LOGISTIC": (1 / 256, 0), "TANH": (1 / 128, 128)}


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(UNARY)), st.sampled_from(KINDS[:3]), shapes4, st.integers(0, 2**32 - 1))
def test_activations_match_nnref(op, kind, shape, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, kind, tuple(shape))
    if kind in FLOAT_TYPES:
        x = nnref.tensor(kind, x.value.astype(np.float64) * 4)
    out = None if kind in FLOAT_TYPES else nnref.output(kind, *FIXED.get(op, (x.scale, x.zero_point)))
    keep = tensor(x)
    got, expected = run(op, [x], [out], lambda o: UNARY[op](keep.ptr, o))
    nnref.assert_close(got, expected)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(KINDS[:3]), shapes4, st.floats(0.1, 3.0), st.data())
def test_softmax_matches_nnref(kind, shape, beta, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    beta = f32(beta)
    x = values(rng, kind, tuple(shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    out = None if kind in FLOAT_TYPES else nnref.output(kind, 1 / 256, 0)
    keep = tensor(x)
    got, expected = run("SOFTMAX", [x, nnref.float32(beta), int32(axis)], [out],
                        lambda o: lib.npu_op_softmax(keep.ptr, beta, axis, o))
    nnref.assert_close(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS[:3]), broadcast_pair(), st.integers(0, 2**32 - 1))
def test_prelu_matches_nnref(kind, shapes, seed):
    rng = np.random.default_rng(seed)
    x, alpha = values(rng, kind, shapes[0]), values(rng, kind, shapes[1])
    shape = core.broadcast_shape(shapes[0], shapes[1])
    keep = [tensor(x), tensor(alpha)]
    got, expected = run("PRELU", [x, alpha], [quant_output(kind, rng)],
                        lambda o: lib.npu_op_prelu(keep[0].ptr, keep[1].ptr, o))
    assert got.shape == shape
    nnref.assert_close(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FLOAT_TYPES), shapes4, st.integers(0, 2**32 - 1))
def test_quantize_and_dequantize_match_nnref(float_type, shape, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, float_type, tuple(shape))
    out = quant_output("TENSOR_QUANT8_ASYMM", rng)
    keep = tensor(x)
    got, expected = run("QUANTIZE", [x], [out], lambda o: lib.npu_op_quantize(keep.ptr, o))
    check(got, expected)
    q = values(rng, "TENSOR_QUANT8_ASYMM", tuple(shape))
    per_channel = nnref.tensor("TENSOR_QUANT8_SYMM_PER_CHANNEL", rng.integers(-128, 128, shape),
                               channel_quant=ChannelQuant(tuple(f32(s) for s in rng.uniform(0.01, 1, shape[-1])),
                                                          len(shape) - 1))
    for source in (q, per_channel):
        keep = tensor(source)
        got, expected = run("DEQUANTIZE", [source], [nnref.output(float_type)],
                            lambda o: lib.npu_op_dequantize(keep.ptr, o))
        nnref.assert_close(got, expected)


# -- moving values -----------------------------------------------------------------


def moved_output(kind: str, x: nnref.Operand, rng, requantize: bool) -> nnref.Operand | None:
    if kind in FLOAT_TYPES or not requantize:
        return None
    return quant_output(kind, rng)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS[:3]), shapes4, st.booleans(), st.integers(0, 2**32 - 1))
def test_reshape_transpose_match_nnref(kind, shape, requantize, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, kind, tuple(shape))
    out = moved_output(kind, x, rng, requantize)
    keep = tensor(x)
    target = nnref.tensor("TENSOR_INT32", [-1, int(np.prod(shape[:1]))] if False else [int(np.prod(shape))])
    got, expected = run("RESHAPE", [x, target], [out], lambda o: lib.npu_op_reshape(keep.ptr, o))
    check(got, expected)
    perm = [int(v) for v in rng.permutation(len(shape))]
    perm_c = ffi.new("int32_t[]", perm)
    got, expected = run("TRANSPOSE", [x, nnref.tensor("TENSOR_INT32", perm)], [out],
                        lambda o: lib.npu_op_transpose(keep.ptr, perm_c, o))
    check(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS[:3]), shapes4, st.integers(1, 3), st.data())
def test_concatenation_matches_nnref(kind, shape, count, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    parts = []
    for _ in range(count):
        s = list(shape)
        s[axis] = data.draw(st.integers(1, 3))
        parts.append(values(rng, kind, tuple(s)))
    keep = [tensor(p) for p in parts]
    array = ffi.new("struct npu_tensor *[]", [k.ptr for k in keep])
    got, expected = run("CONCATENATION", [*parts, int32(axis)], [quant_output(kind, rng)],
                        lambda o: lib.npu_op_concatenation(array, count, axis, o))
    check(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS[:3]), shapes4, st.booleans(), st.data())
def test_pad_and_pad_v2_match_nnref(kind, shape, v2, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = values(rng, kind, tuple(shape))
    widths = [[data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))] for _ in shape]
    flat = ffi.new("int32_t[]", [v for pair in widths for v in pair])
    keep = tensor(x)
    paddings = nnref.tensor("TENSOR_INT32", widths)
    if v2:
        value = int(rng.integers(0, 256)) if kind == "TENSOR_QUANT8_ASYMM" else f32(rng.uniform(-3, 3))
        scalar = {"TENSOR_FLOAT32": nnref.float32, "TENSOR_FLOAT16": nnref.float16, "TENSOR_QUANT8_ASYMM": int32}[kind]
        got, expected = run("PAD_V2", [x, paddings, scalar(value)], [],
                            lambda o: lib.npu_op_pad_v2(keep.ptr, flat, value, o))
    else:
        got, expected = run("PAD", [x, paddings], [], lambda o: lib.npu_op_pad(keep.ptr, flat, o))
    check(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS[:3]), shapes4, st.booleans(), st.data())
def test_mean_matches_nnref(kind, shape, keep_dims, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = values(rng, kind, tuple(shape))
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=3))
    keep = tensor(x)
    axes_c = ffi.new("int32_t[]", axes)
    got, expected = run("MEAN", [x, nnref.tensor("TENSOR_INT32", axes), int32(int(keep_dims))], [quant_output(kind, rng)],
                        lambda o: lib.npu_op_mean(keep.ptr, axes_c, len(axes), keep_dims, o))
    nnref.assert_close(got, expected)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(KINDS[:3]), shapes4, st.data())
def test_strided_slice_matches_nnref(kind, shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = values(rng, kind, tuple(shape))
    rank = len(shape)
    begin, end, strides = [], [], []
    for d in shape:  # a non-empty slice of each axis, indexes from either end
        step = data.draw(st.sampled_from([-2, -1, 1, 2]))
        b = data.draw(st.integers(0, d - 1))
        e = data.draw(st.integers(b + 1, d + 1) if step > 0 else st.integers(-1, b - 1))
        begin.append(b - d if data.draw(st.booleans()) else b)
        end.append(-d - 1 if e == -1 else (e - d if e < d and data.draw(st.booleans()) else e))
        strides.append(step)
    masks = [data.draw(st.integers(0, 2**rank - 1)) for _ in range(3)]
    ins = [x, *(nnref.tensor("TENSOR_INT32", v) for v in (begin, end, strides)), *map(int32, masks)]
    try:
        nnref.evaluate("STRIDED_SLICE", ins)
    except nnref.BadOperation:  # a shrunk axis keeps more than one element: shrink none
        masks[2] = 0
        ins[-1] = int32(0)
    keep = tensor(x)
    c = [ffi.new("int32_t[]", v) for v in (begin, end, strides)]
    got, expected = run("STRIDED_SLICE", ins, [], lambda o: lib.npu_op_strided_slice(keep.ptr, *c, *masks, o))
    check(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS[:3]), st.tuples(*[st.integers(1, 5)] * 4), st.integers(1, 9), st.integers(1, 9),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_resize_bilinear_matches_nnref(kind, shape, oh, ow, nchw, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, kind, shape)
    keep = tensor(x)
    got, expected = run("RESIZE_BILINEAR", [x, int32(ow), int32(oh), boolean(nchw)], [quant_output(kind, rng)],
                        lambda o: lib.npu_op_resize_bilinear(keep.ptr, nchw, o))
    nnref.assert_close(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS[:3]), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_depth_to_space_and_back_match_nnref(kind, block, h, w, c, nchw, seed):
    rng = np.random.default_rng(seed)
    deep = values(rng, kind, (1, h, w, c * block * block))
    deep = nchw_of(deep) if nchw else deep
    keep = tensor(deep)
    got, expected = run("DEPTH_TO_SPACE", [deep, int32(block), boolean(nchw)], [],
                        lambda o: lib.npu_op_depth_to_space(keep.ptr, block, nchw, o))
    check(got, expected)
    back_keep = tensor(got)
    again, expected = run("SPACE_TO_DEPTH", [got, int32(block), boolean(nchw)], [],
                          lambda o: lib.npu_op_space_to_depth(back_keep.ptr, block, nchw, o))
    check(again, expected)
    np.testing.assert_array_equal(again.value, deep.value)


# -- bad descriptors are errors, never crashes ---------------------------------------


def _conv_parts():
    rng = np.random.default_rng(0)
    x = values(rng, "TENSOR_FLOAT32", (1, 5, 5, 3))
    f, b = weights(rng, "TENSOR_FLOAT32", x, (4, 3, 3, 3), 0)
    return [tensor(x), tensor(f), tensor(b), Tensor("TENSOR_FLOAT32", np.zeros((1, 3, 3, 4)))]


def _conv(parts, w=None):
    x, f, b, out = (p.ptr if p is not None else ffi.NULL for p in parts)
    return status(lib.npu_op_conv_2d(x, f, b, w if w is not None else window(), out, 0, 2**64 - 1))


def test_a_good_conv_call_is_ok_and_its_corruptions_are_errors():
    assert _conv(_conv_parts()) == "OK"
    cases = {
        "null output": (lambda p: p.__setitem__(3, None), "INVALID_ARGUMENT"),
        "null data": (lambda p: setattr(p[0].ptr, "data", ffi.NULL), "INVALID_ARGUMENT"),
        "unknown type": (lambda p: setattr(p[1].ptr, "type", 99), "BAD_OPERAND_TYPE"),
        "a scalar type": (lambda p: setattr(p[1].ptr, "type", 0), "BAD_OPERAND_TYPE"),
        "mixed types": (lambda p: setattr(p[2].ptr, "type", 8), "BAD_OPERAND_TYPE"),
        "rank 3 input": (lambda p: setattr(p[0].ptr, "rank", 3), "BAD_SHAPE"),
        "rank 7": (lambda p: setattr(p[0].ptr, "rank", 7), "BAD_SHAPE"),
        "zero dimension": (lambda p: p[0].ptr.dims.__setitem__(2, 0), "BAD_SHAPE"),
        "huge dimensions": (lambda p: [p[0].ptr.dims.__setitem__(i, 2**31) for i in range(4)], "BAD_SHAPE"),
        "depth mismatch": (lambda p: p[1].ptr.dims.__setitem__(3, 2), "BAD_SHAPE"),
        "bias length": (lambda p: p[2].ptr.dims.__setitem__(0, 5), "BAD_SHAPE"),
        "output shape": (lambda p: p[3].ptr.dims.__setitem__(1, 4), "BAD_SHAPE"),
    }
    for name, (corrupt, code) in cases.items():
        parts = _conv_parts()
        corrupt(parts)
        assert _conv(parts) == code, name


def test_bad_windows_and_quantization_parameters_are_errors():
    parts = _conv_parts()
    for field, value in (("stride_w", 0), ("dilation_h", -1), ("pad_top", -2), ("stride_h", 2**31 - 1)):
        w = window()
        setattr(w, field, value)
        assert _conv(parts, w) == "BAD_SCALAR", field
    w = window(fuse=4)
    assert _conv(parts, w) == "BAD_FUSE_CODE"
    w = window(pads=(0, 0, 0, 0), strides=(9, 9))
    assert _conv(parts, w) == "BAD_SHAPE"  # a 1x1 output the descriptor does not have
    rng = np.random.default_rng(0)
    x = values(rng, "TENSOR_QUANT8_ASYMM", (1, 4))
    q = tensor(x)
    out = Tensor("TENSOR_QUANT8_ASYMM", np.zeros((1, 4)), 0.1, 0)
    for field, value in (("scale", 0.0), ("scale", float("nan")), ("zero_point", 256), ("zero_point", -1)):
        setattr(q.ptr, field, value)
        assert status(lib.npu_op_add(q.ptr, q.ptr, 0, out.ptr)) == "BAD_SCALAR", (field, value)
        q = tensor(x)
    # a per-channel filter without scales, or with a bad one
    # (square, so that a wrong channel_dim still names a dimension of 4 scales)
    f = nnref.tensor("TENSOR_QUANT8_SYMM_PER_CHANNEL", np.ones((4, 1, 1, 4)), channel_quant=ChannelQuant((0.1,) * 4, 0))
    ft = tensor(f)
    xin = tensor(values(rng, "TENSOR_QUANT8_ASYMM", (1, 2, 2, 4)))
    bias = tensor(nnref.tensor("TENSOR_INT32", [0] * 4))
    o = Tensor("TENSOR_QUANT8_ASYMM", np.zeros((1, 2, 2, 4)), 0.5, 0)
    assert _conv([xin, ft, bias, o]) == "OK"
    ft.ptr.channel_scales = ffi.NULL
    assert _conv([xin, ft, bias, o]) == "INVALID_ARGUMENT"
    ft = tensor(f)
    ft._scales[1] = -1.0
    assert _conv([xin, ft, bias, o]) == "BAD_SCALAR"
    ft = tensor(f)
    ft.ptr.channel_dim = 3  # CONV_2D's per-channel filter is along its output channels
    assert _conv([xin, ft, bias, o]) == "BAD_SCALAR"


def test_other_operations_refuse_bad_calls():
    rng = np.random.default_rng(0)
    a = tensor(values(rng, "TENSOR_FLOAT32", (2, 3)))
    b = tensor(values(rng, "TENSOR_FLOAT32", (4, 3)))
    out = Tensor("TENSOR_FLOAT32", np.zeros((2, 3)))
    assert status(lib.npu_op_add(a.ptr, b.ptr, 0, out.ptr)) == "BAD_SHAPE"  # 2 and 4 do not broadcast
    assert status(lib.npu_op_add(a.ptr, a.ptr, 0, ffi.NULL)) == "INVALID_ARGUMENT"
    assert status(lib.npu_op_softmax(a.ptr, 1.0, 2, out.ptr)) == "BAD_SCALAR"
    assert status(lib.npu_op_softmax(a.ptr, 0.0, 0, out.ptr)) == "BAD_SCALAR"
    assert status(lib.npu_op_transpose(a.ptr, ffi.new("int32_t[]", [0, 0]), out.ptr)) == "BAD_SCALAR"
    assert status(lib.npu_op_reshape(a.ptr, Tensor("TENSOR_FLOAT32", np.zeros(5)).ptr)) == "BAD_SHAPE"
    assert status(lib.npu_op_pad(a.ptr, ffi.new("int32_t[]", [0, -1, 0, 0]), out.ptr)) == "BAD_SCALAR"
    assert status(lib.npu_op_pad(a.ptr, ffi.NULL, out.ptr)) == "INVALID_ARGUMENT"
    assert status(lib.npu_op_concatenation(ffi.NULL, 2, 0, out.ptr)) == "INVALID_ARGUMENT"
    assert status(lib.npu_op_quantize(a.ptr, out.ptr)) == "BAD_OPERAND_TYPE"
    ints = Tensor("TENSOR_INT32", np.zeros((2, 3)))
    assert status(lib.npu_op_relu(ints.ptr, ints.ptr)) == "BAD_OPERAND_TYPE"
    img = tensor(values(rng, "TENSOR_FLOAT32", (1, 4, 4, 4)))
    assert status(lib.npu_op_depth_to_space(img.ptr, 0, False, img.ptr)) == "BAD_SCALAR"
    assert status(lib.npu_op_space_to_depth(img.ptr, 3, False, img.ptr)) == "BAD_SHAPE"
    q = tensor(values(rng, "TENSOR_QUANT8_ASYMM", (2, 3)))
    wrong = Tensor("TENSOR_QUANT8_ASYMM", np.zeros((2, 3)), 0.5, 0)  # LOGISTIC's output is 1/256, 0
    assert status(lib.npu_op_logistic(q.ptr, wrong.ptr)) == "BAD_SCALAR"


# -- more operations real models use -------------------------------------------------

ALL4 = ("TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_QUANT8_ASYMM", "TENSOR_INT32")


def values4(rng, type: str, shape: tuple[int, ...]) -> nnref.Operand:
    if type == "TENSOR_INT32":
        return nnref.tensor(type, rng.integers(-50, 50, shape))
    return values(rng, type, shape)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["MAXIMUM", "MINIMUM"]), st.sampled_from(ALL4), broadcast_pair(), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_maximum_minimum_match_nnref(op, kind, shapes, same_quant, seed):
    rng = np.random.default_rng(seed)
    a, b = values4(rng, kind, shapes[0]), values4(rng, kind, shapes[1])
    if kind == "TENSOR_QUANT8_ASYMM" and same_quant:  # a model's usual case: one scale for all
        b = nnref.Operand(kind, b.value, a.scale, a.zero_point)
    out = quant_output(kind, rng) if kind == "TENSOR_QUANT8_ASYMM" and not same_quant else None
    fn = lib.npu_op_maximum if op == "MAXIMUM" else lib.npu_op_minimum
    keep = [tensor(a), tensor(b)]
    got, expected = run(op, [a, b], [out], lambda o: fn(keep[0].ptr, keep[1].ptr, o))
    check(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["ARGMAX", "ARGMIN"]), st.sampled_from(ALL4), shapes4, st.data())
def test_argmax_argmin_match_nnref(op, kind, shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = values4(rng, kind, tuple(shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    fn = lib.npu_op_argmax if op == "ARGMAX" else lib.npu_op_argmin
    keep = tensor(x)
    got, expected = run(op, [x, int32(axis)], [], lambda o: fn(keep.ptr, axis, o))
    check(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["REDUCE_MAX", "REDUCE_MIN"]), st.sampled_from(KINDS[:3]), shapes4, st.booleans(), st.data())
def test_reduce_max_min_match_nnref(op, kind, shape, keep_dims, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = values(rng, kind, tuple(shape))
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=3))
    fn = lib.npu_op_reduce_max if op == "REDUCE_MAX" else lib.npu_op_reduce_min
    keep = tensor(x)
    axes_c = ffi.new("int32_t[]", axes)
    got, expected = run(op, [x, nnref.tensor("TENSOR_INT32", axes), boolean(keep_dims)], [],
                        lambda o: fn(keep.ptr, axes_c, len(axes), keep_dims, o))
    check(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ALL4), shapes4, st.data())
def test_gather_matches_nnref(kind, shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = values4(rng, kind, tuple(shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    idx_shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    indices = nnref.tensor("TENSOR_INT32", rng.integers(0, shape[axis], idx_shape))
    keep = [tensor(x), tensor(indices)]
    got, expected = run("GATHER", [x, int32(axis), indices], [],
                        lambda o: lib.npu_op_gather(keep[0].ptr, axis, keep[1].ptr, o))
    check(got, expected)
    bad = tensor(nnref.tensor("TENSOR_INT32", [shape[axis]]))  # one past the end
    a = axis % len(shape)
    out = Tensor(kind, np.zeros((*shape[:a], 1, *shape[a + 1:])), x.scale, x.zero_point)
    assert status(lib.npu_op_gather(keep[0].ptr, axis, bad.ptr, out.ptr)) == "BAD_SCALAR"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS[:3]), shapes4, st.data())
def test_l2_normalization_matches_nnref(kind, shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = values(rng, kind, tuple(shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    out = None if kind in FLOAT_TYPES else nnref.output(kind, 1 / 128, 128)
    keep = tensor(x)
    got, expected = run("L2_NORMALIZATION", [x, int32(axis)], [out],
                        lambda o: lib.npu_op_l2_normalization(keep.ptr, axis, o))
    nnref.assert_close(got, expected)
