"""Shapes, reductions, indexing and normalizations (kernels/ops_index.c) through their bindings
(kernels/bind_index.c), against nnref: every operand type the 1.2 spec allows, the spec's
variations (layouts, optional inputs, negative axes), and bad calls refused with a sentence."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nnref
from nn_ops import BindError, bind_check, bind_run, bind_vs_nnref, f32
from nnref import boolean, float16, float32, int32

MOVABLE = ("TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM")
FLOAT_Q8 = ("TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_QUANT8_ASYMM")
FLOATS = ("TENSOR_FLOAT32", "TENSOR_FLOAT16")
SEEDS = st.integers(0, 2**32 - 1)
FEW = settings(max_examples=40, deadline=None)


def values(rng: np.random.Generator, type: str, shape: tuple[int, ...]) -> nnref.Operand:
    """A random operand: floats in [-1, 1], int32 small, quant8 with a float32 scale and a zero point."""
    if type in FLOATS:
        return nnref.tensor(type, rng.uniform(-1, 1, shape))
    if type == "TENSOR_INT32":
        return nnref.tensor(type, rng.integers(-1000, 1000, shape))
    if type == "TENSOR_BOOL8":
        return nnref.tensor(type, rng.integers(0, 2, shape).astype(bool))
    return nnref.tensor(type, rng.integers(0, 256, shape), scale=f32(rng.uniform(0.01, 0.1)),
                        zero_point=int(rng.integers(0, 256)))


def ints(*v: int) -> nnref.Operand:
    return nnref.tensor("TENSOR_INT32", np.asarray(v, np.int32).reshape(len(v)))


def real(type: str, v: float) -> nnref.Operand:
    """A float parameter as the 1.2 spec types it for an input of ``type``."""
    return float16(v) if type == "TENSOR_FLOAT16" else float32(v)


def shape(rng: np.random.Generator, rank: int, hi: int = 4) -> tuple[int, ...]:
    return tuple(int(d) for d in rng.integers(1, hi + 1, rank))


def same(name: str, inputs, outputs=(), relaxed: bool = False) -> None:
    """The binding's outputs are nnref's: exactly for moved values, within Android's tolerance otherwise."""
    got, want = bind_vs_nnref(name, inputs, outputs, relaxed=relaxed)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        nnref.assert_close(g, w, relaxed)


def exact(name: str, inputs, outputs=()) -> None:
    got, want = bind_vs_nnref(name, inputs, outputs)
    for g, w in zip(got, want):
        assert (g.type, g.scale, g.zero_point) == (w.type, w.scale, w.zero_point)
        np.testing.assert_array_equal(g.value, w.value)


def refused(name: str, inputs, outputs, status: str, *words: str) -> None:
    """The binding refuses the call with ``status`` and a sentence naming the operation and ``words``."""
    with pytest.raises(BindError) as e:
        bind_run(name, inputs, outputs)
    assert e.value.status == status, e.value
    assert e.value.why.startswith(f"{name}: ")
    for w in words:
        assert w in e.value.why, e.value.why


def requantized(x: nnref.Operand) -> nnref.Operand:
    """An output template of x's type with other quantization (when x is quantized)."""
    if x.type != "TENSOR_QUANT8_ASYMM":
        return nnref.output(x.type)
    return nnref.output(x.type, f32(x.scale * 1.5), (x.zero_point + 7) % 256)


# -- reshaping: SQUEEZE, EXPAND_DIMS -------------------------------------------------------

@FEW
@given(SEEDS, st.sampled_from(FLOAT_Q8), st.integers(1, 4))
def test_squeeze(seed, type, rank):
    rng = np.random.default_rng(seed)
    dims = tuple(1 if rng.random() < 0.5 else int(rng.integers(2, 4)) for _ in range(rank))
    x = values(rng, type, dims)
    ones = [d for d in range(rank) if dims[d] == 1]
    if len(ones) == rank:  # keep the output a tensor of rank >= 1
        x = values(rng, type, dims[:-1] + (2,))
        ones = ones[:-1]
    exact("SQUEEZE", [x])  # every axis of size 1
    exact("SQUEEZE", [x, None])  # omitted axes: the same
    if ones:
        chosen = [a - rank if rng.random() < 0.5 else a for a in ones if rng.random() < 0.7] or [ones[0]]
        exact("SQUEEZE", [x, ints(*chosen)])
        same("SQUEEZE", [x, ints(*chosen)], [requantized(x)])


def test_squeeze_refuses_an_axis_that_is_not_one():
    x = nnref.tensor("TENSOR_FLOAT32", np.zeros((1, 3)))
    refused("SQUEEZE", [x, ints(1)], [nnref.output("TENSOR_FLOAT32")], "BAD_SHAPE", "input 1", "axis 1")
    refused("SQUEEZE", [x, ints(2)], [nnref.output("TENSOR_FLOAT32")], "BAD_SCALAR", "input 1", "axis 2")
    refused("SQUEEZE", [nnref.tensor("TENSOR_INT32", [[1]])], [nnref.output("TENSOR_INT32")],
            "BAD_OPERAND_TYPE", "input 0", "TENSOR_INT32")


@FEW
@given(SEEDS, st.sampled_from(MOVABLE), st.integers(0, 3))
def test_expand_dims(seed, type, rank):
    rng = np.random.default_rng(seed)
    x = values(rng, type, shape(rng, rank) if rank else (2,))
    r = x.value.ndim
    for axis in (0, r, -1, -(r + 1), int(rng.integers(-(r + 1), r + 1))):
        exact("EXPAND_DIMS", [x, int32(axis)])
    same("EXPAND_DIMS", [x, int32(0)], [requantized(x)])


def test_expand_dims_refuses_an_axis_out_of_range_and_a_tensor_axis():
    x = nnref.tensor("TENSOR_INT32", [1, 2])
    refused("EXPAND_DIMS", [x, int32(2)], [nnref.output("TENSOR_INT32")], "BAD_SCALAR", "input 1", "axis 2")
    refused("EXPAND_DIMS", [x, int32(-3)], [nnref.output("TENSOR_INT32")], "BAD_SCALAR", "input 1")
    refused("EXPAND_DIMS", [x, ints(0)], [nnref.output("TENSOR_INT32")], "BAD_OPERAND_TYPE", "input 1", "INT32 scalar")
    refused("EXPAND_DIMS", [x], [nnref.output("TENSOR_INT32")], "BAD_OPERATION", "takes 2 inputs, not 1")
    refused("EXPAND_DIMS", [x, int32(0)], [nnref.output("TENSOR_FLOAT32")], "BAD_OPERAND_TYPE", "output 0")


# -- slicing and repeating: SLICE, TILE, SPLIT, CHANNEL_SHUFFLE ----------------------------

@FEW
@given(SEEDS, st.sampled_from(MOVABLE), st.integers(1, 4))
def test_slice(seed, type, rank):
    rng = np.random.default_rng(seed)
    dims = shape(rng, rank, 5)
    x = values(rng, type, dims)
    begin = [int(rng.integers(0, d)) for d in dims]
    size = [-1 if rng.random() < 0.3 else int(rng.integers(1, d - b + 1)) for d, b in zip(dims, begin)]
    exact("SLICE", [x, ints(*begin), ints(*size)])
    same("SLICE", [x, ints(*begin), ints(*size)], [requantized(x)])


def test_slice_refuses_a_slice_leaving_the_tensor():
    x = nnref.tensor("TENSOR_FLOAT32", np.zeros((2, 3)))
    out = [nnref.output("TENSOR_FLOAT32")]
    refused("SLICE", [x, ints(0, 2), ints(1, 2)], out, "BAD_SCALAR", "inputs 1 and 2", "axis 1 of size 3")
    refused("SLICE", [x, ints(-1, 0), ints(1, 1)], out, "BAD_SCALAR", "axis 0")
    refused("SLICE", [x, ints(0, 0), ints(0, 1)], out, "BAD_SCALAR")
    refused("SLICE", [x, ints(0), ints(1, 1)], out, "BAD_SHAPE", "input 1 must hold 2 values")


@FEW
@given(SEEDS, st.sampled_from(MOVABLE), st.integers(1, 4))
def test_tile(seed, type, rank):
    rng = np.random.default_rng(seed)
    x = values(rng, type, shape(rng, rank, 3))
    multiples = [int(m) for m in rng.integers(1, 4, rank)]
    exact("TILE", [x, ints(*multiples)])
    same("TILE", [x, ints(*multiples)], [requantized(x)])


def test_tile_refuses_a_multiple_below_one():
    x = nnref.tensor("TENSOR_INT32", [[1, 2]])
    refused("TILE", [x, ints(1, 0)], [nnref.output("TENSOR_INT32")], "BAD_SCALAR", "input 1", "axis 1")
    refused("TILE", [x, ints(1, 2, 3)], [nnref.output("TENSOR_INT32")], "BAD_SHAPE", "input 1")


@FEW
@given(SEEDS, st.sampled_from(MOVABLE), st.integers(1, 4), st.integers(1, 3))
def test_split(seed, type, rank, parts):
    rng = np.random.default_rng(seed)
    dims = list(shape(rng, rank, 3))
    axis = int(rng.integers(-rank, rank))
    dims[axis] *= parts
    x = values(rng, type, tuple(dims))
    outputs = [nnref.output(type, x.scale, x.zero_point)] * parts
    got, want = bind_vs_nnref("SPLIT", [x, int32(axis), int32(parts)], outputs)
    assert len(got) == parts
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.value, w.value)


def test_split_refuses_an_uneven_split_and_a_wrong_output_count():
    x = nnref.tensor("TENSOR_FLOAT16", np.zeros((2, 3)))
    out = nnref.output("TENSOR_FLOAT16")
    refused("SPLIT", [x, int32(1), int32(2)], [out, out], "BAD_SHAPE", "axis 1 of size 3")
    refused("SPLIT", [x, int32(0), int32(2)], [out], "BAD_OPERATION", "input 2", "num_splits 2")
    refused("SPLIT", [x, int32(2), int32(1)], [out], "BAD_SCALAR", "input 1", "axis 2")
    assert bind_check("SPLIT", [x, int32(0), int32(2)], [out, out], data=True) == [(1, 3), (1, 3)]


@FEW
@given(SEEDS, st.sampled_from(FLOAT_Q8), st.integers(1, 4))
def test_channel_shuffle(seed, type, rank):
    rng = np.random.default_rng(seed)
    dims = list(shape(rng, rank, 3))
    axis = int(rng.integers(-rank, rank))
    groups = int(rng.integers(1, 4))
    dims[axis] = groups * int(rng.integers(1, 4))
    x = values(rng, type, tuple(dims))
    exact("CHANNEL_SHUFFLE", [x, int32(groups), int32(axis)])
    same("CHANNEL_SHUFFLE", [x, int32(groups), int32(axis)], [requantized(x)])


def test_channel_shuffle_refuses_groups_that_do_not_divide():
    x = nnref.tensor("TENSOR_FLOAT32", np.zeros((2, 6)))
    out = [nnref.output("TENSOR_FLOAT32")]
    refused("CHANNEL_SHUFFLE", [x, int32(4), int32(-1)], out, "BAD_SHAPE", "do not split into 4 groups")
    refused("CHANNEL_SHUFFLE", [x, int32(0), int32(1)], out, "BAD_SCALAR", "input 1")
    refused("CHANNEL_SHUFFLE", [x, int32(2), int32(2)], out, "BAD_SCALAR", "input 2")


# -- space and batch: BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, RESIZE_NEAREST_NEIGHBOR --------

def image(rng, type, n, h, w, c, nchw):
    return values(rng, type, (n, c, h, w) if nchw else (n, h, w, c))


@FEW
@given(SEEDS, st.sampled_from(FLOAT_Q8), st.sampled_from((None, False, True)))
def test_batch_to_space_nd(seed, type, layout):
    rng = np.random.default_rng(seed)
    bh, bw = (int(b) for b in rng.integers(1, 4, 2))
    x = image(rng, type, bh * bw * int(rng.integers(1, 3)), *shape(rng, 3, 3), bool(layout))
    inputs = [x, ints(bh, bw)] + ([] if layout is None else [boolean(layout)])
    exact("BATCH_TO_SPACE_ND", inputs)
    same("BATCH_TO_SPACE_ND", inputs, [requantized(x)])


@FEW
@given(SEEDS, st.sampled_from(FLOAT_Q8), st.sampled_from((None, False, True)))
def test_space_to_batch_nd(seed, type, layout):
    rng = np.random.default_rng(seed)
    bh, bw = (int(b) for b in rng.integers(1, 4, 2))
    top, left = (int(p) for p in rng.integers(0, 3, 2))
    h, w = (int(d) for d in rng.integers(1, 6, 2))
    bottom, right = (-(h + top)) % bh, (-(w + left)) % bw
    x = image(rng, type, int(rng.integers(1, 3)), h, w, int(rng.integers(1, 3)), bool(layout))
    paddings = nnref.tensor("TENSOR_INT32", [[top, bottom], [left, right]])
    inputs = [x, ints(bh, bw), paddings] + ([] if layout is None else [boolean(layout)])
    exact("SPACE_TO_BATCH_ND", inputs)
    same("SPACE_TO_BATCH_ND", inputs, [requantized(x)])


def test_batch_and_space_refuse_bad_blocks_and_paddings():
    x = nnref.tensor("TENSOR_FLOAT32", np.zeros((4, 2, 2, 1)))
    out = [nnref.output("TENSOR_FLOAT32")]
    refused("BATCH_TO_SPACE_ND", [x, ints(3, 1)], out, "BAD_SHAPE", "batch 4 is not a multiple")
    refused("BATCH_TO_SPACE_ND", [x, ints(0, 1)], out, "BAD_SCALAR", "input 1")
    refused("BATCH_TO_SPACE_ND", [x, ints(2)], out, "BAD_SHAPE", "input 1")
    refused("BATCH_TO_SPACE_ND", [nnref.tensor("TENSOR_FLOAT32", np.zeros((4, 2))), ints(2, 2)], out,
            "BAD_SHAPE", "input 0 must have rank 4")
    refused("SPACE_TO_BATCH_ND", [x, ints(3, 3), nnref.tensor("TENSOR_INT32", [[0, 0], [0, 0]])], out,
            "BAD_SHAPE", "not a multiple")
    refused("SPACE_TO_BATCH_ND", [x, ints(1, 1), nnref.tensor("TENSOR_INT32", [[0, -1], [0, 0]])], out,
            "BAD_SCALAR", "input 2")
    refused("SPACE_TO_BATCH_ND", [x, ints(1, 1), ints(0, 0, 0, 0)], out, "BAD_SHAPE", "input 2")


@FEW
@given(SEEDS, st.sampled_from(FLOAT_Q8), st.booleans(), st.booleans())
def test_resize_nearest_neighbor(seed, type, nchw, by_scale):
    rng = np.random.default_rng(seed)
    n, h, w, c = (int(d) for d in rng.integers(1, 5, 4))
    x = image(rng, type, n, h, w, c, nchw)
    if by_scale:
        sw, sh = (float(np.float16(s)) for s in rng.choice([0.5, 0.75, 1.0, 1.5, 2.0, 2.5], 2))
        if int(w * sw) < 1 or int(h * sh) < 1:
            sw = sh = 2.0
        size = [real(type, sw), real(type, sh)]
    else:
        size = [int32(int(rng.integers(1, 9))), int32(int(rng.integers(1, 9)))]
    exact("RESIZE_NEAREST_NEIGHBOR", [x, *size, boolean(nchw)])
    same("RESIZE_NEAREST_NEIGHBOR", [x, *size, boolean(nchw)], [requantized(x)])


def test_resize_nearest_neighbor_refuses_an_empty_output_and_a_missing_layout():
    x = nnref.tensor("TENSOR_FLOAT32", np.zeros((1, 2, 2, 1)))
    out = [nnref.output("TENSOR_FLOAT32")]
    refused("RESIZE_NEAREST_NEIGHBOR", [x, int32(0), int32(2), boolean(False)], out, "BAD_SCALAR", "inputs 1 and 2")
    refused("RESIZE_NEAREST_NEIGHBOR", [x, float32(0.1), float32(1.0), boolean(False)], out, "BAD_SCALAR")
    refused("RESIZE_NEAREST_NEIGHBOR", [x, int32(2), int32(2)], out, "BAD_OPERATION", "takes 4 inputs, not 3")
    refused("RESIZE_NEAREST_NEIGHBOR", [x, float16(1.0), float16(1.0), boolean(False)], out,
            "BAD_OPERAND_TYPE", "input 1", "FLOAT32 scalar")


# -- lookups: EMBEDDING_LOOKUP, HASHTABLE_LOOKUP, TOPK_V2 --------------------------------------

LOOKED_UP = ("TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM")


@FEW
@given(SEEDS, st.sampled_from(LOOKED_UP), st.integers(2, 4))
def test_embedding_lookup(seed, type, rank):
    rng = np.random.default_rng(seed)
    table = values(rng, type, shape(rng, rank, 4))
    rows = [int(r) for r in rng.integers(0, table.shape[0], int(rng.integers(1, 6)))]
    exact("EMBEDDING_LOOKUP", [ints(*rows), table])


def test_embedding_lookup_refuses_a_row_outside_the_table():
    table = nnref.tensor("TENSOR_FLOAT32", np.zeros((3, 2)))
    out = [nnref.output("TENSOR_FLOAT32")]
    refused("EMBEDDING_LOOKUP", [ints(0, 3), table], out, "BAD_SCALAR", "input 0", "row 3 of 3")
    refused("EMBEDDING_LOOKUP", [ints(-1), table], out, "BAD_SCALAR", "row -1")
    refused("EMBEDDING_LOOKUP", [ints(0), nnref.tensor("TENSOR_FLOAT32", [1.0, 2.0])], out, "BAD_SHAPE", "input 1")
    refused("EMBEDDING_LOOKUP", [ints(0), nnref.tensor("TENSOR_FLOAT16", np.zeros((3, 2)))],
            [nnref.output("TENSOR_FLOAT16")], "BAD_OPERAND_TYPE", "input 1")


@FEW
@given(SEEDS, st.sampled_from(LOOKED_UP), st.integers(1, 3))
def test_hashtable_lookup(seed, type, rank):
    rng = np.random.default_rng(seed)
    table = values(rng, type, shape(rng, rank, 4))
    keys = [int(k) for k in rng.choice(np.arange(-20, 20), table.shape[0], replace=False)]
    lookups = [int(k) for k in rng.integers(-20, 20, int(rng.integers(1, 7)))] + [keys[0]]
    hits = nnref.output("TENSOR_QUANT8_ASYMM", 1.0, 0)
    got, want = bind_vs_nnref("HASHTABLE_LOOKUP", [ints(*lookups), ints(*keys), table],
                              [nnref.output(type, table.scale, table.zero_point), hits])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.value, w.value)
    assert got[1].value[-1] == 1


def test_hashtable_lookup_refuses_keys_unlike_the_rows():
    table = nnref.tensor("TENSOR_INT32", [[1], [2]])
    outs = [nnref.output("TENSOR_INT32"), nnref.output("TENSOR_QUANT8_ASYMM", 1.0, 0)]
    refused("HASHTABLE_LOOKUP", [ints(1), ints(1, 2, 3), table], outs, "BAD_SHAPE", "input 1 has 3 keys")
    refused("HASHTABLE_LOOKUP", [ints(1), ints(1, 2), table], outs[:1], "BAD_OPERATION", "2 outputs")
    refused("HASHTABLE_LOOKUP", [ints(1), ints(1, 2), table], [outs[0], nnref.output("TENSOR_INT32")],
            "BAD_OPERAND_TYPE", "output 1")


@FEW
@given(SEEDS, st.sampled_from(MOVABLE), st.integers(1, 4))
def test_topk_v2(seed, type, rank):
    rng = np.random.default_rng(seed)
    x = values(rng, type, shape(rng, rank, 5))
    if rng.random() < 0.5:  # ties: the earlier index first
        x = nnref.Operand(x.type, np.round(x.value * 2) / 2 if type in FLOATS else x.value // 64 * 64,
                          x.scale, x.zero_point)
    k = int(rng.integers(1, x.shape[-1] + 1))
    exact("TOPK_V2", [x, int32(k)], [nnref.output(type, x.scale, x.zero_point), nnref.output("TENSOR_INT32")])


def test_topk_v2_refuses_k_beyond_the_last_axis():
    x = nnref.tensor("TENSOR_FLOAT32", np.zeros((2, 3)))
    outs = [nnref.output("TENSOR_FLOAT32"), nnref.output("TENSOR_INT32")]
    refused("TOPK_V2", [x, int32(4)], outs, "BAD_SCALAR", "input 1", "k 4")
    refused("TOPK_V2", [x, int32(0)], outs, "BAD_SCALAR", "input 1")
    refused("TOPK_V2", [x, int32(1)], [outs[0], nnref.output("TENSOR_FLOAT32")], "BAD_OPERAND_TYPE", "output 1")


# -- reductions: REDUCE_SUM, REDUCE_PROD, REDUCE_ALL, REDUCE_ANY ---------------------------------

def axes_of(rng, rank):
    chosen = sorted({int(a) for a in rng.integers(0, rank, int(rng.integers(1, rank + 1)))})
    return [a - rank if rng.random() < 0.4 else a for a in chosen]


@FEW
@given(SEEDS, st.sampled_from(("REDUCE_SUM", "REDUCE_PROD", "REDUCE_ALL", "REDUCE_ANY")), st.integers(1, 4),
       st.booleans(), st.booleans())
def test_reductions(seed, name, rank, keep, relaxed):
    rng = np.random.default_rng(seed)
    types = ("TENSOR_BOOL8",) if name in ("REDUCE_ALL", "REDUCE_ANY") else FLOATS
    type = types[int(rng.integers(0, len(types)))]
    x = values(rng, type, shape(rng, rank, 4))
    axes = axes_of(rng, rank)
    if len({a % rank for a in axes}) == rank and not keep:
        axes = axes[:-1] or axes  # every axis away: checked apart (the output is [1])
        if len({a % rank for a in axes}) == rank:
            keep = True
    same(name, [x, ints(*axes), boolean(keep)], relaxed=relaxed)


def test_a_reduction_of_every_axis_is_a_one_element_tensor():
    x = nnref.tensor("TENSOR_FLOAT32", [[1.0, 2.0], [3.0, 4.0]])
    [got] = bind_run("REDUCE_SUM", [x, ints(0, -1), boolean(False)], [nnref.output("TENSOR_FLOAT32")])
    assert got.value.tolist() == [10.0]
    b = nnref.tensor("TENSOR_BOOL8", [[True, False]])
    [got] = bind_run("REDUCE_ANY", [b, ints(1, 0), boolean(False)], [nnref.output("TENSOR_BOOL8")])
    assert got.value.tolist() == [True]


def test_reductions_refuse_bad_axes_and_types():
    x = nnref.tensor("TENSOR_FLOAT32", np.zeros((2, 3)))
    out = [nnref.output("TENSOR_FLOAT32")]
    refused("REDUCE_SUM", [x, ints(2), boolean(False)], out, "BAD_SCALAR", "input 1", "axis 2")
    refused("REDUCE_PROD", [x, ints(0), int32(0)], out, "BAD_OPERAND_TYPE", "input 2", "BOOL scalar")
    refused("REDUCE_ALL", [x, ints(0), boolean(False)], out, "BAD_OPERAND_TYPE", "input 0", "TENSOR_BOOL8")
    refused("REDUCE_SUM", [nnref.tensor("TENSOR_QUANT8_ASYMM", [[1]], scale=0.5), ints(0), boolean(True)],
            [nnref.output("TENSOR_QUANT8_ASYMM", 0.5)], "BAD_OPERAND_TYPE", "input 0")


# -- normalizations: LOG_SOFTMAX, LOCAL_RESPONSE_NORMALIZATION, INSTANCE_NORMALIZATION -----------

@FEW
@given(SEEDS, st.sampled_from(FLOATS), st.integers(1, 4), st.booleans())
def test_log_softmax(seed, type, rank, relaxed):
    rng = np.random.default_rng(seed)
    x = values(rng, type, shape(rng, rank, 5))
    axis = int(rng.integers(-rank, rank))
    same("LOG_SOFTMAX", [x, real(type, float(rng.choice([0.5, 1.0, 2.0]))), int32(axis)], relaxed=relaxed)


@FEW
@given(SEEDS, st.sampled_from(FLOATS), st.integers(1, 4), st.booleans())
def test_local_response_normalization(seed, type, rank, with_axis):
    rng = np.random.default_rng(seed)
    x = values(rng, type, shape(rng, rank, 6))
    params = [int32(int(rng.integers(0, 4))), real(type, 1.0), real(type, 0.5), real(type, 0.75)]
    if with_axis:
        same("LOCAL_RESPONSE_NORMALIZATION", [x, *params, int32(int(rng.integers(-rank, rank)))])
    else:
        same("LOCAL_RESPONSE_NORMALIZATION", [x, *params])


@FEW
@given(SEEDS, st.sampled_from(FLOATS), st.booleans())
def test_instance_normalization(seed, type, nchw):
    rng = np.random.default_rng(seed)
    x = image(rng, type, *shape(rng, 4, 4), nchw)
    params = [real(type, float(rng.choice([0.5, 1.0, 2.0]))), real(type, 0.25), real(type, 1e-3)]
    same("INSTANCE_NORMALIZATION", [x, *params, boolean(nchw)])


def test_normalizations_refuse_bad_parameters():
    x = nnref.tensor("TENSOR_FLOAT32", np.ones((1, 2, 2, 3)))
    out = [nnref.output("TENSOR_FLOAT32")]
    refused("LOG_SOFTMAX", [x, float32(1.0), int32(4)], out, "BAD_SCALAR", "input 2", "axis 4")
    refused("LOG_SOFTMAX", [x, float32(0.0), int32(0)], out, "BAD_SCALAR", "input 1", "beta")
    refused("LOG_SOFTMAX", [x, float16(1.0), int32(0)], out, "BAD_OPERAND_TYPE", "input 1", "FLOAT32 scalar")
    refused("LOCAL_RESPONSE_NORMALIZATION", [x, int32(-1), float32(1), float32(1), float32(1)], out,
            "BAD_SCALAR", "input 1", "radius")
    refused("LOCAL_RESPONSE_NORMALIZATION", [x, int32(1), float32(1), float32(1)], out,
            "BAD_OPERATION", "takes 5 to 6 inputs, not 4")
    refused("INSTANCE_NORMALIZATION", [x, float32(1), float32(0), float32(-1e-3), boolean(False)], out,
            "BAD_SCALAR", "input 3", "epsilon")
    refused("INSTANCE_NORMALIZATION", [nnref.tensor("TENSOR_FLOAT32", np.ones((2, 3))),
                                float32(1), float32(0), float32(1e-3), boolean(False)], out,
            "BAD_SHAPE", "input 0 must have rank 4")
    q = nnref.tensor("TENSOR_QUANT8_ASYMM", np.ones((1, 2, 2, 3)), scale=0.5)
    refused("INSTANCE_NORMALIZATION", [q, float32(1), float32(0), float32(1e-3), boolean(False)],
            [nnref.output("TENSOR_QUANT8_ASYMM", 0.5)], "BAD_OPERAND_TYPE", "input 0")


# -- what addOperation sees: types and shapes, no data -------------------------------------------

def test_without_data_the_bindings_check_the_signature_and_leave_data_shaped_outputs_unknown():
    x = nnref.tensor("TENSOR_FLOAT32", np.zeros((2, 4)))
    out = [nnref.output("TENSOR_FLOAT32")]
    assert bind_check("LOG_SOFTMAX", [x, float32(1.0), int32(1)], out) == [(2, 4)]
    assert bind_check("SLICE", [x, ints(0, 0), ints(1, 1)], out) == [None]
    assert bind_check("SLICE", [x, ints(0, 0), ints(1, 1)], out, data=True) == [(1, 1)]
    assert bind_check("REDUCE_SUM", [x, ints(1), boolean(True)], out, shapes=False) == [None]
    with pytest.raises(BindError, match="input 1 must be TENSOR_INT32"):
        bind_check("TILE", [x, nnref.tensor("TENSOR_FLOAT32", [1.0, 1.0])], out)


def test_squeeze_with_empty_axes_squeezes_every_axis_of_size_one():
    x = nnref.tensor("TENSOR_QUANT8_ASYMM", np.arange(3).reshape(1, 3, 1), scale=0.5, zero_point=3)
    empty = nnref.tensor("TENSOR_INT32", np.zeros(0, np.int32))
    [got] = bind_run("SQUEEZE", [x, empty], [nnref.output("TENSOR_QUANT8_ASYMM", 0.5, 3)])
    assert got.value.tolist() == [0, 1, 2]
    exact("SQUEEZE", [x, empty])


def test_the_kernels_refuse_null_and_mismatched_descriptors():
    from framework.nn._cpu import ffi, lib
    from nn_ops import Tensor, status

    x = Tensor("TENSOR_FLOAT32", np.zeros((2, 3), np.float32))
    wrong = Tensor("TENSOR_FLOAT32", np.zeros((5,), np.float32))
    q = Tensor("TENSOR_QUANT8_ASYMM", np.zeros((2, 3), np.uint8), 0.0, 0)  # a scale of 0
    axes = ffi.new("int32_t[]", [0, 1])
    null = ffi.NULL
    calls = {
        "squeeze": lambda a, o: lib.npu_op_squeeze(a, axes, 1, o),
        "expand_dims": lambda a, o: lib.npu_op_expand_dims(a, 0, o),
        "slice": lambda a, o: lib.npu_op_slice(a, axes, axes, o),
        "tile": lambda a, o: lib.npu_op_tile(a, axes, o),
        "channel_shuffle": lambda a, o: lib.npu_op_channel_shuffle(a, 1, 0, o),
        "batch_to_space_nd": lambda a, o: lib.npu_op_batch_to_space_nd(a, 1, 1, False, o),
        "resize_nearest_neighbor": lambda a, o: lib.npu_op_resize_nearest_neighbor(a, False, o),
        "reduce_sum": lambda a, o: lib.npu_op_reduce_sum(a, axes, 1, False, o),
        "log_softmax": lambda a, o: lib.npu_op_log_softmax(a, 1.0, 0, o),
        "local_response_normalization": lambda a, o: lib.npu_op_local_response_normalization(a, 1, 1, 1, 1, 0, o),
        "instance_normalization": lambda a, o: lib.npu_op_instance_normalization(a, 1, 0, 1e-3, False, o),
        "topk_v2": lambda a, o: lib.npu_op_topk_v2(a, 1, o, o),
        "embedding_lookup": lambda a, o: lib.npu_op_embedding_lookup(a, a, o),
        "hashtable_lookup": lambda a, o: lib.npu_op_hashtable_lookup(a, a, a, o, o),
        "split": lambda a, o: lib.npu_op_split(a, 0, ffi.new("struct npu_tensor *[]", [o]), 1),
    }
    for name, call in calls.items():
        assert status(call(null, x.ptr)) == "INVALID_ARGUMENT", name
        assert status(call(x.ptr, null)) == "INVALID_ARGUMENT", name
        assert status(call(x.ptr, wrong.ptr)) != "OK", name
        assert status(call(q.ptr, q.ptr)) == "BAD_SCALAR", name
    assert status(lib.npu_op_slice(x.ptr, null, axes, x.ptr)) == "INVALID_ARGUMENT"
    assert status(lib.npu_op_split(x.ptr, 0, null, 0)) == "INVALID_ARGUMENT"
    assert status(lib.npu_op_space_to_batch_nd(x.ptr, 1, 1, null, False, x.ptr)) == "INVALID_ARGUMENT"


def test_a_quantized_output_needs_a_usable_scale_and_zero_point():
    q = nnref.tensor("TENSOR_QUANT8_ASYMM", [[1, 2]], scale=0.5, zero_point=1)
    refused("TILE", [q, ints(1, 2)], [nnref.output("TENSOR_QUANT8_ASYMM", 0.0, 0)], "BAD_SCALAR", "output 0",
            "scale > 0")
    refused("TILE", [q, ints(1, 2)], [nnref.output("TENSOR_QUANT8_ASYMM", 0.5, 300)], "BAD_SCALAR", "output 0")


def test_resize_nearest_neighbor_scales_in_float32_as_androids_reference():
    # 2 rows to 50: the scale is float32(0.04), and 25 * 0.04f rounds to 1.0 in float32 (0.99999998 in double)
    x = nnref.tensor("TENSOR_FLOAT32", [[[[0.0]], [[1.0]]]])
    [got] = bind_run("RESIZE_NEAREST_NEIGHBOR", [x, int32(1), int32(50), boolean(False)],
                     [nnref.output("TENSOR_FLOAT32")])
    assert got.value[0, :, 0, 0].tolist() == [0.0] * 25 + [1.0] * 25
    exact("RESIZE_NEAREST_NEIGHBOR", [x, int32(1), int32(50), boolean(False)])


@pytest.mark.parametrize("type", FLOAT_Q8)
def test_zero_sized_batches_give_empty_outputs_where_android_allows_them(type):
    q = type == "TENSOR_QUANT8_ASYMM"
    x = nnref.tensor(type, np.zeros((0, 2, 3, 4), np.uint8 if q else np.float32), scale=0.5 if q else 0.0)
    got, want = bind_vs_nnref("RESIZE_NEAREST_NEIGHBOR", [x, int32(5), int32(4), boolean(True)])
    assert got[0].value.shape == want[0].shape == (0, 2, 4, 5)
    got, want = bind_vs_nnref("CHANNEL_SHUFFLE", [x, int32(2), int32(-1)])
    assert got[0].value.shape == want[0].shape == (0, 2, 3, 4)
    if not q:
        params = [real(type, 1.0), real(type, 0.0), real(type, 1e-3), boolean(False)]
        got, want = bind_vs_nnref("INSTANCE_NORMALIZATION", [x, *params])
        assert got[0].value.shape == want[0].shape == (0, 2, 3, 4)
    refused("TILE", [x, ints(1, 1, 1, 1)], [nnref.output(type, x.scale)], "BAD_SHAPE", "input 0 has an empty dimension 0")
