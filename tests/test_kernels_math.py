"""NN HAL 1.2's math, comparisons, logic and TRANSPOSE_CONV_2D (kernels/ops_math.c through
their bindings, kernels/bind_math.c) against nnref, over every operand type the 1.2 spec
allows; and the calls a binding must refuse, each with its status and a sentence naming the
input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nnref
from nn_ops import BindError, Tensor, bind_check, bind_run, bind_vs_nnref, f32, status
from framework.nn._cpu import ffi, lib

F32, F16, I32, Q8, B8 = "TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM", "TENSOR_BOOL8"
FLOATS = (F32, F16)

SEEDS = st.integers(0, 2**32 - 1)
SHAPES = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def operand(rng: np.random.Generator, type: str, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0,
            scale: float | None = None, zero_point: int | None = None) -> nnref.Operand:
    """A random operand of ``type``; floats within [lo, hi]."""
    if type in FLOATS:
        return nnref.tensor(type, rng.uniform(lo, hi, shape))
    if type == I32:
        return nnref.tensor(type, rng.integers(-20, 20, shape))
    if type == B8:
        return nnref.tensor(type, rng.integers(0, 2, shape).astype(bool))
    return nnref.tensor(type, rng.integers(0, 256, shape),
                        scale=f32(rng.uniform(0.01, 0.1)) if scale is None else scale,
                        zero_point=int(rng.integers(0, 256)) if zero_point is None else zero_point)


def broadcast_partner(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with ``shape``: some leading dimensions dropped, some set to 1."""
    kept = shape[int(rng.integers(0, len(shape))):] if rng.random() < 0.5 else shape
    return tuple(1 if rng.random() < 0.3 else d for d in kept) or (1,)


def check(name: str, inputs, outputs=(), *, relaxed: bool = False) -> list[nnref.Operand]:
    got, expected = bind_vs_nnref(name, inputs, outputs, relaxed=relaxed)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        nnref.assert_close(g, e, relaxed=relaxed)
    return got


def refused(name: str, inputs, outputs, expected_status: str, *words: str) -> str:
    """The binding refuses the call (prepared with data) with that status and a sentence naming words."""
    with pytest.raises(BindError) as e:
        bind_check(name, inputs, outputs, data=True)
    assert e.value.status == expected_status, e.value
    assert e.value.why.startswith(f"{name}: ")
    for w in words:
        assert w in e.value.why, e.value.why
    return e.value.why


# -- one float input ------------------------------------------------------------------

#: each unary float operation and the domain its inputs are drawn from
UNARY = {"FLOOR": (-10, 10), "ABS": (-10, 10), "EXP": (-5, 5), "LOG": (0.01, 10), "RSQRT": (0.01, 10),
         "SQRT": (0, 10), "SIN": (-6.3, 6.3)}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(UNARY)), st.sampled_from(FLOATS), SHAPES, st.booleans(), SEEDS)
def test_unary_float_operations_match_nnref(name, type, shape, relaxed, seed):
    rng = np.random.default_rng(seed)
    lo, hi = UNARY[name]
    check(name, [operand(rng, type, shape, lo, hi)], relaxed=relaxed and type == F32)


def test_outside_a_domain_is_ieee():
    x = nnref.tensor(F32, [-1.0, 0.0, 4.0])
    log, = check("LOG", [x])
    assert np.isnan(log.value[0]) and log.value[1] == -np.inf
    rsqrt, = check("RSQRT", [x])
    assert np.isnan(rsqrt.value[0]) and rsqrt.value[1] == np.inf and rsqrt.value[2] == 0.5


@settings(max_examples=15, deadline=None)
@given(st.sampled_from((F32, F16, I32)), SHAPES, SEEDS)
def test_neg_matches_nnref(type, shape, seed):
    check("NEG", [operand(np.random.default_rng(seed), type, shape)])


def test_neg_of_int32_min_wraps():
    got, = check("NEG", [nnref.tensor(I32, [-(2**31), 2**31 - 1, 0])])
    assert got.value.tolist() == [-(2**31), -(2**31) + 1, 0]


# -- two inputs, broadcast ----------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(FLOATS), SHAPES, st.integers(0, 3), st.booleans(), st.booleans(), SEEDS)
def test_div_broadcasts_with_a_fused_activation(type, shape, fuse, swap, relaxed, seed):
    rng = np.random.default_rng(seed)
    shapes = (shape, broadcast_partner(rng, shape))
    a, b = shapes[::-1] if swap else shapes
    divisor = operand(rng, type, b, 0.5, 2.0)
    divisor = nnref.tensor(type, divisor.value * rng.choice([-1, 1], b))
    check("DIV", [operand(rng, type, a, -3, 3), divisor, nnref.int32(fuse)], relaxed=relaxed and type == F32)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(FLOATS), SHAPES, SEEDS)
def test_pow_broadcasts(type, shape, seed):
    rng = np.random.default_rng(seed)
    check("POW", [operand(rng, type, shape, 0.1, 3), operand(rng, type, broadcast_partner(rng, shape), -2, 2)])


COMPARISONS = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(COMPARISONS), st.sampled_from((B8, F16, F32, I32, Q8)),
       st.lists(st.integers(1, 3), min_size=1, max_size=6).map(tuple), st.booleans(), SEEDS)
def test_comparisons_broadcast_over_every_type(name, type, shape, shared_quant, seed):
    rng = np.random.default_rng(seed)
    a = operand(rng, type, shape)
    partner = broadcast_partner(rng, shape)
    if type in FLOATS:  # draw from a few values so that equal ones occur
        a = nnref.tensor(type, rng.integers(-2, 3, shape) / 2)
        b = nnref.tensor(type, rng.integers(-2, 3, partner) / 2)
    elif type == Q8 and shared_quant:  # one scale and zero point: equal stored values are equal reals
        b = operand(rng, type, partner, scale=a.scale, zero_point=a.zero_point)
    elif type == Q8:  # scales 2:1 and zero points apart: equal reals from different stored values
        b = operand(rng, type, partner, scale=f32(a.scale * 2), zero_point=int(rng.integers(100, 156)))
        b = nnref.tensor(Q8, np.clip(b.value // 8 + 112, 0, 255), scale=b.scale, zero_point=b.zero_point)
        a = nnref.tensor(Q8, np.clip(a.value // 4 + 100, 0, 255), scale=a.scale, zero_point=a.zero_point)
    else:
        b = operand(rng, type, partner)
    got, = check(name, [a, b])
    assert got.type == B8


def test_quant8_comparisons_compare_real_values():
    a = nnref.tensor(Q8, [10, 12, 14], scale=0.5, zero_point=10)   # 0, 1, 2
    b = nnref.tensor(Q8, [0, 1, 2], scale=1.0, zero_point=0)       # 0, 1, 2
    got, = check("EQUAL", [a, b])
    assert got.value.tolist() == [True, True, True]
    got, = check("LESS", [a, nnref.tensor(Q8, [1], scale=1.0, zero_point=0)])
    assert got.value.tolist() == [True, False, False]
    # Android computes each real value in float32: 170 * f32(1/85) and 255 * f32(2/255) are
    # both 2.0 there, though float64 tells them apart
    a = nnref.tensor(Q8, [170], scale=f32(1 / 85), zero_point=0)
    b = nnref.tensor(Q8, [255], scale=f32(2 / 255), zero_point=0)
    for name, expected in (("LESS", False), ("EQUAL", True), ("GREATER_EQUAL", True)):
        got, = check(name, [a, b])
        assert got.value.tolist() == [expected], name


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(("LOGICAL_AND", "LOGICAL_OR")), SHAPES, SEEDS)
def test_logical_operations_broadcast(name, shape, seed):
    rng = np.random.default_rng(seed)
    check(name, [operand(rng, B8, shape), operand(rng, B8, broadcast_partner(rng, shape))])


def test_logical_not():
    got, = check("LOGICAL_NOT", [nnref.tensor(B8, [[True, False], [False, False]])])
    assert got.value.tolist() == [[False, True], [True, True]]


# -- SELECT and CAST --------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.sampled_from((F16, F32, I32, Q8)), SHAPES, st.booleans(), SEEDS)
def test_select_picks_and_requantizes(type, shape, own_quant, seed):
    rng = np.random.default_rng(seed)
    a, b = operand(rng, type, shape), operand(rng, type, shape)
    outputs = [nnref.output(Q8, f32(rng.uniform(0.01, 0.2)), int(rng.integers(0, 256)))] if type == Q8 and own_quant else []
    check("SELECT", [operand(rng, B8, shape), a, b], outputs)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from((F16, F32, I32, Q8)), st.sampled_from((F16, F32, I32, Q8)), SHAPES, SEEDS)
def test_cast_converts_stored_values(source, target, shape, seed):
    rng = np.random.default_rng(seed)
    if source in FLOATS:
        x = nnref.tensor(source, rng.uniform(-300, 300, shape))
    elif source == I32:
        x = nnref.tensor(source, rng.integers(-300, 300, shape))
    else:
        x = operand(rng, source, shape)
    out = nnref.output(target, 0.5, 3) if target == Q8 else nnref.output(target)
    check("CAST", [x], [out])


def test_cast_to_integers_truncates_and_saturates():
    x = nnref.tensor(F32, [2.7, -2.7, 1e10, -1e10, np.nan, 300.0, -5.0])
    to_int = Tensor(I32, np.zeros(7))
    assert lib.npu_op_cast(Tensor(F32, x.value).ptr, to_int.ptr) == lib.NPU_OK
    assert to_int.array.tolist() == [2, -2, 2**31 - 1, -(2**31), 0, 300, -5]
    to_q8 = Tensor(Q8, np.zeros(7), scale=1.0)
    assert lib.npu_op_cast(Tensor(F32, x.value).ptr, to_q8.ptr) == lib.NPU_OK
    assert to_q8.array.tolist() == [2, 0, 255, 0, 0, 255, 0]


# -- what prepare knows without data, and what it refuses ----------------------------------------


def test_shapes_are_known_at_add_operation_without_data():
    a, b = nnref.tensor(F32, np.ones((2, 1, 3))), nnref.tensor(F32, np.ones((4, 1)))
    assert bind_check("POW", [a, b], [nnref.output(F32)]) == [(2, 4, 3)]
    assert bind_check("LESS", [a, b], [nnref.output(B8)]) == [(2, 4, 3)]
    assert bind_check("DIV", [a, b, nnref.int32(0)], [nnref.output(F32)]) == [(2, 4, 3)]
    assert bind_check("SQRT", [a], [nnref.output(F32)]) == [(2, 1, 3)]
    assert bind_check("EXP", [a], [nnref.output(F32)], shapes=False) == [None]


def test_bad_calls_are_refused_naming_the_input():
    x = nnref.tensor(F32, np.ones((2, 3)))
    refused("ABS", [nnref.tensor(I32, [1])], [nnref.output(I32)], "BAD_OPERAND_TYPE", "input 0", "TENSOR_FLOAT32")
    refused("ABS", [x, x], [nnref.output(F32)], "BAD_OPERATION", "takes 1 inputs, not 2")
    refused("FLOOR", [nnref.tensor(F32, np.ones((1,) * 5))], [nnref.output(F32)], "BAD_SHAPE", "input 0", "rank 5")
    with pytest.raises(nnref.BadOperation, match="rank at most 4"):  # types.hal 1.2: FLOOR's rank is up to 4
        nnref.evaluate("FLOOR", [nnref.tensor(F32, np.ones((1,) * 5))])
    check("ABS", [nnref.tensor(F32, np.full((1, 2, 1, 1, 2), -2.0))])  # the 1.2 additions' rank is "from 1"
    refused("EXP", [x], [nnref.output(F16)], "BAD_OPERAND_TYPE", "output 0")
    refused("DIV", [x, x, nnref.int32(7)], [nnref.output(F32)], "BAD_FUSE_CODE", "input 2")
    refused("DIV", [x, x, nnref.float32(0.0)], [nnref.output(F32)], "BAD_OPERAND_TYPE", "input 2", "INT32")
    refused("DIV", [x, nnref.tensor(F16, np.ones(3))], [nnref.output(F32)], "BAD_OPERATION", "3 inputs")
    refused("DIV", [x, nnref.tensor(F16, np.ones(3)), nnref.int32(0)], [nnref.output(F32)],
            "BAD_OPERAND_TYPE", "input 1")
    refused("POW", [x, nnref.tensor(F32, np.ones((4,)))], [nnref.output(F32)], "BAD_SHAPE", "broadcast")
    refused("POW", [nnref.tensor(F32, np.ones((1,) * 5)), x], [nnref.output(F32)], "BAD_SHAPE", "input 0", "rank 5")
    refused("EQUAL", [x, x], [nnref.output(F32)], "BAD_OPERAND_TYPE", "output 0", "TENSOR_BOOL8")
    refused("GREATER", [x, nnref.tensor(I32, np.ones((2, 3)))], [nnref.output(B8)], "BAD_OPERAND_TYPE", "input 1")
    refused("LOGICAL_AND", [x, x], [nnref.output(B8)], "BAD_OPERAND_TYPE", "input 0", "TENSOR_BOOL8")
    cond = nnref.tensor(B8, np.ones((2, 2), bool))
    refused("SELECT", [cond, x, x], [nnref.output(F32)], "BAD_SHAPE", "input 0 and input 1")
    refused("SELECT", [x, x, x], [nnref.output(F32)], "BAD_OPERAND_TYPE", "input 0", "TENSOR_BOOL8")
    refused("CAST", [x], [nnref.output(B8)], "BAD_OPERAND_TYPE", "output 0")
    refused("CAST", [x], [nnref.output(Q8, 0.0, 0)], "BAD_SCALAR", "output 0")
    refused("LOGICAL_NOT", [x], [nnref.output(B8)], "BAD_OPERAND_TYPE", "input 0")


def test_the_library_refuses_bad_descriptors():
    x, y = Tensor(F32, np.ones(3)), Tensor(F32, np.ones(4))
    assert status(lib.npu_op_sqrt(x.ptr, y.ptr)) == "BAD_SHAPE"
    assert status(lib.npu_op_sqrt(x.ptr, Tensor(F16, np.ones(3)).ptr)) == "BAD_OPERAND_TYPE"
    assert status(lib.npu_op_equal(x.ptr, x.ptr, Tensor(F32, np.ones(3)).ptr)) == "BAD_OPERAND_TYPE"
    assert status(lib.npu_op_equal(x.ptr, y.ptr, Tensor(B8, np.ones(4)).ptr)) == "BAD_SHAPE"
    assert status(lib.npu_op_div(x.ptr, x.ptr, 9, Tensor(F32, np.ones(3)).ptr)) == "BAD_FUSE_CODE"
    assert status(lib.npu_op_abs(ffi.NULL, x.ptr)) == "INVALID_ARGUMENT"


# -- TRANSPOSE_CONV_2D ------------------------------------------------------------------

from test_kernels_ops import KINDS, nchw_of, quant_output, values, weights  # noqa: E402 - the convolutions' operands

tconv_params = st.fixed_dictionaries({
    "kind": st.sampled_from(KINDS), "n": st.integers(1, 2), "h": st.integers(1, 5), "w": st.integers(1, 5),
    "c": st.integers(1, 5), "oc": st.integers(1, 18), "fh": st.integers(1, 4), "fw": st.integers(1, 4),
    "pads": st.tuples(st.integers(0, 2), st.integers(-2, 2), st.integers(0, 2), st.integers(-2, 2)),
    "strides": st.tuples(st.integers(1, 3), st.integers(1, 3)), "fuse": st.integers(0, 3),
    "nchw": st.booleans(), "seed": SEEDS,
})


def tconv_operands(p: dict):
    rng = np.random.default_rng(p["seed"])
    kind = p["kind"]
    x = values(rng, Q8 if kind == "PER_CHANNEL" else kind, (p["n"], p["h"], p["w"], p["c"]))
    f, b = weights(rng, kind, x, (p["oc"], p["fh"], p["fw"], p["c"]), 0)
    if kind == Q8:  # the spec's quantized bias: the input's scale times the filter's
        b = nnref.tensor(I32, b.value, scale=f32(x.scale * f.scale))
    return rng, (nchw_of(x) if p["nchw"] else x), f, b


def tconv_size(size: int, filter_size: int, stride: int, head: int, tail: int) -> int:
    return (size - 1) * stride + filter_size - head - tail


def check_exact(name, inputs, outputs):
    """As check(), but a quantized result must equal nnref's: the integer path is Android's."""
    got, expected = bind_vs_nnref(name, inputs, outputs)
    if got[0].type == Q8:
        np.testing.assert_array_equal(got[0].value, expected[0].value)
    else:
        nnref.assert_close(got[0], expected[0])
    return got[0]


@settings(max_examples=80, deadline=None)
@given(tconv_params)
def test_transpose_conv_2d_explicit_padding_matches_nnref(p):
    oh = tconv_size(p["h"], p["fh"], p["strides"][1], p["pads"][2], p["pads"][3])
    ow = tconv_size(p["w"], p["fw"], p["strides"][0], p["pads"][0], p["pads"][1])
    rng, x, f, b = tconv_operands(p)
    ins = [x, f, b, *map(nnref.int32, p["pads"]), *map(nnref.int32, p["strides"]), nnref.int32(p["fuse"]),
           nnref.boolean(p["nchw"])]
    out = quant_output(p["kind"], rng)
    if oh < 1 or ow < 1:
        refused("TRANSPOSE_CONV_2D", ins, [out or nnref.output(x.type)], "BAD_SHAPE", "the output would be")
        return
    got = check_exact("TRANSPOSE_CONV_2D", ins, [out])
    assert got.value.shape[2 if p["nchw"] else 1: 4 if p["nchw"] else 3] == (oh, ow)


@settings(max_examples=60, deadline=None)
@given(tconv_params, st.sampled_from((1, 2)), st.integers(0, 3), st.integers(0, 3))
def test_transpose_conv_2d_implicit_padding_matches_nnref(p, scheme, extra_h, extra_w):
    rng, x, f, b = tconv_operands(p)
    sw, sh = p["strides"]
    oh, ow = p["h"] * sh + extra_h % sh, p["w"] * sw + extra_w % sw  # the sizes a model would ask for
    shape = [p["n"], p["oc"], oh, ow] if p["nchw"] else [p["n"], oh, ow, p["oc"]]
    ins = [x, f, b, nnref.tensor(I32, shape), nnref.int32(scheme), nnref.int32(sw), nnref.int32(sh),
           nnref.int32(p["fuse"]), nnref.boolean(p["nchw"])]
    check_exact("TRANSPOSE_CONV_2D", ins, [quant_output(p["kind"], rng)])


def test_transpose_conv_2d_slices_compute_the_whole():
    """Run unit by unit (the plan's slices), the output is what one call computes."""
    p = {"kind": Q8, "n": 2, "h": 3, "w": 4, "c": 3, "oc": 5, "fh": 3, "fw": 2, "strides": (2, 2), "nchw": True,
         "seed": 7}
    rng, x, f, b = tconv_operands(p)
    out_q = nnref.output(Q8, 0.05, 100)
    ins = [x, f, b, *map(nnref.int32, (1, 0, 1, 0)), nnref.int32(2), nnref.int32(2), nnref.int32(1),
           nnref.boolean(True)]
    whole = check_exact("TRANSPOSE_CONV_2D", ins, [out_q])
    n, oc, oh, ow = whole.value.shape
    w = ffi.new("struct npu_window *", {"pad_left": 1, "pad_top": 1, "stride_w": 2, "stride_h": 2,
                                        "dilation_w": 1, "dilation_h": 1, "fuse": 1, "nchw": True})
    out = Tensor(Q8, np.zeros(whole.value.shape), 0.05, 100)
    tensors = [Tensor(Q8, x.value, x.scale, x.zero_point), Tensor(f.type, f.value, f.scale, f.zero_point),
               Tensor(I32, b.value)]
    assert lib.npu_ops_units_spatial(out.ptr, True) == n * oh
    for unit in range(n * oh):
        assert lib.npu_op_transpose_conv_2d(*(t.ptr for t in tensors), w, out.ptr, unit, unit + 1) == lib.NPU_OK
    np.testing.assert_array_equal(out.array, whole.value)


def test_transpose_conv_2d_takes_zero_batches():
    x = nnref.tensor(F32, np.zeros((0, 2, 2, 1)))
    ins = [x, nnref.tensor(F32, np.ones((3, 1, 1, 1))), nnref.tensor(F32, np.zeros(3)),
           *map(nnref.int32, (0, 0, 0, 0, 1, 1, 0)), nnref.boolean(False)]
    got, = check("TRANSPOSE_CONV_2D", ins)
    assert got.value.shape == (0, 2, 2, 3)
    ins[0] = nnref.tensor(F32, np.zeros((1, 0, 2, 1)))
    refused("TRANSPOSE_CONV_2D", ins, [nnref.output(F32)], "BAD_SHAPE", "input 0", "height")


def test_transpose_conv_2d_output_shape_needs_the_scalars_and_the_output_shape_data():
    x, f, b = nnref.tensor(F32, np.ones((1, 2, 2, 1))), nnref.tensor(F32, np.ones((3, 3, 3, 1))), nnref.tensor(F32, np.ones(3))
    explicit = [x, f, b, *map(nnref.int32, (0, 0, 0, 0, 2, 2, 0)), nnref.boolean(False)]
    assert bind_check("TRANSPOSE_CONV_2D", explicit, [nnref.output(F32)]) == [None]  # scalars' values unknown
    assert bind_check("TRANSPOSE_CONV_2D", explicit, [nnref.output(F32)], data=True) == [(1, 5, 5, 3)]
    same = [x, f, b, nnref.tensor(I32, [1, 4, 4, 3]), *map(nnref.int32, (1, 2, 2, 0)), nnref.boolean(False)]
    assert bind_check("TRANSPOSE_CONV_2D", same, [nnref.output(F32)], data=True) == [(1, 4, 4, 3)]
    valid = [x, f, b, nnref.tensor(I32, [1, 4, 4, 3]), *map(nnref.int32, (2, 2, 2, 0)), nnref.boolean(False)]
    assert bind_check("TRANSPOSE_CONV_2D", valid, [nnref.output(F32)], data=True) == [(1, 5, 5, 3)]


def test_transpose_conv_2d_bad_calls_are_refused():
    x, f, b = nnref.tensor(F32, np.ones((1, 2, 2, 1))), nnref.tensor(F32, np.ones((3, 3, 3, 1))), nnref.tensor(F32, np.ones(3))
    scalars = [*map(nnref.int32, (0, 0, 0, 0, 1, 1, 0)), nnref.boolean(False)]
    name, out = "TRANSPOSE_CONV_2D", [nnref.output(F32)]
    refused(name, [x, f, b, *scalars[:-1]], out, "BAD_OPERATION", "10")
    refused(name, [x, f, nnref.tensor(F16, np.ones(3)), *scalars], out, "BAD_OPERAND_TYPE", "input 2")
    refused(name, [x, f, nnref.tensor(F32, np.ones(2)), *scalars], out, "BAD_SHAPE", "input 2 (bias)")
    refused(name, [x, nnref.tensor(F32, np.ones((3, 3, 3, 2))), b, *scalars], out, "BAD_SHAPE", "input 1 (filter)")
    refused(name, [x, nnref.tensor(F32, np.ones((3, 3, 3))), b, *scalars], out, "BAD_SHAPE",
            "input 1", "rank 4")
    bad = list(scalars)
    bad[0] = nnref.int32(-1)
    refused(name, [x, f, b, *bad], out, "BAD_SCALAR", "input 3 (padding left)")
    bad = list(scalars)
    bad[4] = nnref.int32(0)
    refused(name, [x, f, b, *bad], out, "BAD_SCALAR", "input 7 (stride width)")
    bad = list(scalars)
    bad[6] = nnref.int32(4)
    refused(name, [x, f, b, *bad], out, "BAD_FUSE_CODE", "input 9")
    bad = list(scalars)
    bad[7] = nnref.int32(0)
    refused(name, [x, f, b, *bad], out, "BAD_OPERAND_TYPE", "input 10", "BOOL")
    implicit = [x, f, b, nnref.tensor(I32, [1, 4, 4, 3]), *map(nnref.int32, (3, 1, 1, 0)), nnref.boolean(False)]
    refused(name, implicit, out, "BAD_SCALAR", "input 4 (padding scheme)")
    implicit[3] = nnref.tensor(I32, [4, 4, 3])
    implicit[4] = nnref.int32(1)
    refused(name, implicit, out, "BAD_SHAPE", "input 3 (output shape)")
    xq = nnref.tensor(Q8, np.ones((1, 2, 2, 1)), scale=0.5, zero_point=0)
    fq = nnref.tensor("TENSOR_QUANT8_SYMM_PER_CHANNEL", np.ones((3, 3, 3, 1)),
                      channel_quant=nnref.ChannelQuant((0.1,), 3))
    refused(name, [xq, fq, nnref.tensor(I32, np.ones(3)), *scalars], [nnref.output(Q8, 0.5, 0)], "BAD_SCALAR",
            "input 1 (filter)", "dimension 3")
    refused(name, [xq, f, nnref.tensor(I32, np.ones(3)), *scalars], [nnref.output(Q8, 0.5, 0)], "BAD_OPERAND_TYPE",
            "input 1")
    fq = nnref.tensor(Q8, np.ones((3, 3, 3, 1)), scale=0.25, zero_point=1)
    refused(name, [xq, fq, nnref.tensor(I32, np.ones(3), scale=0.25), *scalars], [nnref.output(Q8, 0.5, 0)],
            "BAD_SCALAR", "input 2 (bias)", "0.125")
    refused(name, [xq, fq, nnref.tensor(I32, np.ones(3), scale=0.125, zero_point=3), *scalars],
            [nnref.output(Q8, 0.5, 0)], "BAD_SCALAR", "input 2 (bias)", "zero point 0")


# -- the conformance cases (AOSP's 1.2 vectors and their variations) through the bindings --------

from conformance.cases import cases  # noqa: E402

FAMILY = ("FLOOR", "DIV", "ABS", "CAST", "EQUAL", "EXP", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "LOG",
          "LOGICAL_AND", "LOGICAL_NOT", "LOGICAL_OR", "NEG", "NOT_EQUAL", "POW", "RSQRT", "SELECT", "SIN", "SQRT",
          "TRANSPOSE_CONV_2D")


@pytest.mark.parametrize("operation", FAMILY)
def test_every_conformance_case_passes_through_the_binding(operation):
    """The suite's cases run here binding to nnref, before any device or NDK is involved."""
    mine = [c for c in cases() if c.operation == operation]
    assert mine, f"no conformance case of {operation}"
    for case in mine:
        templates = [nnref.Operand(e.type, None, e.scale, e.zero_point, e.channel_quant) for e in case.expected]
        got = bind_run(operation, list(case.inputs), templates)
        for g, e in zip(got, case.expected):
            nnref.assert_close(g, e, relaxed=case.relaxed)


# -- any call at all: a status, never a crash ---------------------------------------------------

SCALAR_TYPES = ("INT32", "FLOAT32", "BOOL", "FLOAT16", "UINT32")
TENSOR_TYPES = (F32, F16, I32, Q8, B8, "TENSOR_QUANT8_SYMM_PER_CHANNEL", "TENSOR_QUANT16_SYMM")


def any_operand(rng: np.random.Generator, type: str, shape: tuple[int, ...]) -> nnref.Operand:
    if type in SCALAR_TYPES:
        return nnref.Operand(type, np.asarray(rng.integers(-2, 6)).astype(nnref.DTYPES[type]))
    values = rng.integers(-3, 6, shape)
    if type == "TENSOR_QUANT8_SYMM_PER_CHANNEL":
        return nnref.tensor(type, values, channel_quant=nnref.ChannelQuant((0.5,) * shape[0], 0))
    if type in (Q8, "TENSOR_QUANT16_SYMM"):
        return nnref.tensor(type, np.abs(values) if type == Q8 else values, scale=0.5, zero_point=0)
    return nnref.tensor(type, values.astype(bool) if type == B8 else values)


@pytest.fixture(scope="module")
def family_cases() -> dict[str, list]:
    """The conformance cases of each operation of the family (harvested outside any @given)."""
    return {name: [c for c in cases() if c.operation == name] for name in FAMILY}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FAMILY), st.lists(st.tuples(st.sampled_from(TENSOR_TYPES + SCALAR_TYPES),
                                                   st.lists(st.integers(1, 4), min_size=1, max_size=5).map(tuple)),
                                         max_size=12),
       st.sampled_from(TENSOR_TYPES[:5]), st.booleans(), st.booleans(), SEEDS)
def test_any_call_gets_a_status_never_a_crash(family_cases, operation, specs, out_type, data, from_case, seed):
    """Random operands, or a conformance case with some of its inputs replaced by random ones."""
    rng = np.random.default_rng(seed)
    inputs = [any_operand(rng, t, shape) for t, shape in specs]
    if from_case:
        mine = family_cases[operation]
        case = mine[int(rng.integers(0, len(mine)))]
        inputs = list(case.inputs)
        for k, operand in zip(rng.integers(0, len(inputs), len(specs) % 3 + 1), inputs[:]):
            inputs[k] = operand if rng.random() < 0.3 else any_operand(rng, *specs[0]) if specs else None
        inputs = [i for i in inputs if i is not None]
        if rng.random() < 0.5:
            out_type = case.expected[0].type
    outputs = [nnref.output(out_type, 0.5 if out_type == Q8 else 0.0)]
    try:
        bind_check(operation, inputs, outputs, data=data)
        bind_run(operation, inputs, outputs)
    except BindError as e:
        assert e.why.startswith(f"{operation}: ") and e.status != "OK"
