"""nnref's data-movement, reduction and resize operations: AOSP's vectors and inverse pairs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nnref
from nnref import BadOperation, boolean, float32, int32, tensor
from nnref.examples import check, real

Q8 = "TENSOR_QUANT8_ASYMM"
VARIANTS = ["float32", "relaxed", "float16"]


def ints(values):
    return tensor("TENSOR_INT32", values)


def run(name, *inputs, outputs=()):
    return [o.value.tolist() for o in nnref.evaluate(name, list(inputs), list(outputs))]


@pytest.mark.parametrize("variant", VARIANTS)
def test_reshape_concatenation_transpose(variant):
    check("RESHAPE", [real([1, 2, 3], range(6)), ints([3, -1])], [real([3, 2], range(6))], variant)
    check("CONCATENATION", [real([2, 3], range(6)), real([2, 3], range(6, 12)), int32(0)], [real([4, 3], range(12))], variant)
    check("CONCATENATION", [real([2, 1], [1, 2]), real([2, 2], [3, 4, 5, 6]), int32(-1)], [real([2, 3], [1, 3, 4, 2, 5, 6])],
          variant)
    check("TRANSPOSE", [real([1, 2, 2, 1], [1, 2, 3, 4]), ints([0, 2, 1, 3])], [real([1, 2, 2, 1], [1, 3, 2, 4])], variant)


def test_concatenation_quant8_requantizes_inputs_of_other_scales():
    a = tensor(Q8, [10, 20], [1, 2], scale=0.5, zero_point=0)   # 5, 10
    b = tensor(Q8, [1, 2], [1, 2], scale=2.0, zero_point=0)     # 2, 4
    assert run("CONCATENATION", a, b, int32(1), outputs=[nnref.output(Q8, 1.0, 0)]) == [[[5, 10, 2, 4]]]


@pytest.mark.parametrize("variant", VARIANTS)
def test_pad_and_pad_v2(variant):
    x = real([1, 2, 3, 1], [1, 2, 3, 4, 5, 6])
    padded = np.pad(np.arange(1, 7, dtype=float).reshape(1, 2, 3, 1), [(0, 0), (0, 2), (1, 3), (0, 0)])
    check("PAD", [x, ints([[0, 0], [0, 2], [1, 3], [0, 0]])], [real([1, 4, 7, 1], padded)], variant)
    filled = np.pad(np.arange(1, 7, dtype=float).reshape(1, 2, 3, 1), [(0, 0), (0, 2), (1, 3), (0, 0)], constant_values=9.3)
    check("PAD_V2", [x, ints([[0, 0], [0, 2], [1, 3], [0, 0]]), float32(9.3)], [real([1, 4, 7, 1], filled)], variant)


def test_pad_quant8_fills_with_the_zero_point_and_pad_v2_with_a_stored_value():
    x = tensor(Q8, [1, 2], [2], scale=0.5, zero_point=7)
    assert run("PAD", x, ints([[1, 1]])) == [[7, 1, 2, 7]]
    assert run("PAD_V2", x, ints([[0, 2]]), int32(9)) == [[1, 2, 9, 9]]


@pytest.mark.parametrize("variant", VARIANTS)
def test_mean_and_reductions(variant):
    x = real([1, 2, 2, 1], [1, 2, 3, 4])
    check("MEAN", [x, ints([2]), int32(0)], [real([1, 2, 1], [1.5, 3.5])], variant)
    check("MEAN", [x, ints([1, -2]), int32(1)], [real([1, 1, 1, 1], [2.5])], variant)
    y = real([2, 3], [1, -2, 3, 4, 5, -6])
    check("REDUCE_SUM", [y, ints([1]), boolean(False)], [real([2], [2, 3])], variant)
    check("REDUCE_PROD", [y, ints([0]), boolean(True)], [real([1, 3], [4, -10, -18])], variant)
    check("REDUCE_MAX", [y, ints([1, 0]), boolean(False)], [real([], [5])], variant)
    check("REDUCE_MIN", [y, ints([-1]), boolean(False)], [real([2], [-2, -6])], variant)


def test_reduce_all_any_and_quant8_max():
    b = tensor("TENSOR_BOOL8", [[True, False], [True, True]])
    assert run("REDUCE_ALL", b, ints([1]), boolean(False)) == [[False, True]]
    assert run("REDUCE_ANY", b, ints([0]), boolean(True)) == [[[True, True]]]
    q = tensor(Q8, [[3, 9], [7, 1]], scale=0.5, zero_point=2)
    assert run("REDUCE_MAX", q, ints([0]), boolean(False)) == [[7, 9]]


def test_arg_max_min_and_topk():
    x = tensor("TENSOR_FLOAT32", [[1, 2], [4, 3]])
    assert run("ARGMAX", x, int32(1)) == [[1, 0]] and run("ARGMIN", x, int32(0)) == [[0, 0]]
    assert run("ARGMAX", tensor("TENSOR_INT32", [5, 9, 9]), int32(0)) == [1]  # the first of a tie
    values, indices = run("TOPK_V2", tensor("TENSOR_FLOAT32", [[-2.0, 0.2], [0.8, 0.2]]), int32(2))
    assert np.allclose(values, [[0.2, -2.0], [0.8, 0.2]]) and indices == [[1, 0], [0, 1]]
    values, indices = run("TOPK_V2", tensor(Q8, [3, 9, 9, 1], scale=1.0), int32(3))
    assert values == [9, 9, 3] and indices == [1, 2, 0]


ROWS = [[1, 2, 3], [4, 5, 6]]


@pytest.mark.parametrize("x,begin,end,strides,masks,shape,expected", [
    (ROWS, [1, 0], [2, 2], [1, 1], (0, 0, 0), [1, 2], [4, 5]),
    ([1, 2, 3, 4], [-3], [3], [1], (0, 0, 0), [2], [2, 3]),            # negative begin
    ([1, 2, 3], [-1], [-4], [-1], (0, 0, 0), [3], [3, 2, 1]),          # negative stride past the start
    (ROWS, [1, 0], [2, 2], [1, 1], (0, 0, 1), [2], [4, 5]),            # shrink axis 0
    (ROWS, [1, 1], [0, 0], [1, 1], (2, 3, 0), [1, 3], [4, 5, 6]),      # begin mask on axis 1, end masks
    (ROWS, [0, 0], [2, 3], [1, 2], (0, 0, 0), [2, 2], [1, 3, 4, 6]),
])
def test_strided_slice(x, begin, end, strides, masks, shape, expected):
    out = nnref.evaluate("STRIDED_SLICE", [tensor("TENSOR_FLOAT32", x), ints(begin), ints(end), ints(strides),
                                           *map(int32, masks)])[0]
    assert list(out.shape) == shape and out.value.ravel().tolist() == expected


def test_slice_squeeze_expand_tile_gather_split():
    x = tensor("TENSOR_FLOAT32", np.arange(12).reshape(3, 4))
    assert run("SLICE", x, ints([1, 1]), ints([2, -1])) == [[[5, 6, 7], [9, 10, 11]]]
    with pytest.raises(BadOperation, match="SLICE: slice"):
        run("SLICE", x, ints([2, 0]), ints([2, 1]))
    assert run("SQUEEZE", tensor("TENSOR_FLOAT32", np.zeros((1, 2, 1)))) == [[0, 0]]
    assert np.shape(run("SQUEEZE", tensor("TENSOR_FLOAT32", np.zeros((1, 2, 1))), ints([2]))[0]) == (1, 2)
    assert np.shape(run("EXPAND_DIMS", x, int32(-1))[0]) == (3, 4, 1)
    assert run("TILE", tensor("TENSOR_INT32", [[1, 2]]), ints([2, 2])) == [[[1, 2, 1, 2], [1, 2, 1, 2]]]
    assert run("GATHER", tensor("TENSOR_FLOAT32", [[1, 2], [3, 4]]), int32(0), ints([1, 0])) == [[[3, 4], [1, 2]]]
    assert run("GATHER", tensor("TENSOR_FLOAT32", [[1, 2], [3, 4]]), int32(1), ints([[1], [0]])) == [[[[2], [1]], [[4], [3]]]]
    with pytest.raises(BadOperation, match="GATHER: an index is outside"):
        run("GATHER", x, int32(0), ints([3]))
    assert run("SPLIT", x, int32(1), int32(2)) == [[[0, 1], [4, 5], [8, 9]], [[2, 3], [6, 7], [10, 11]]]


def test_channel_shuffle():
    x = tensor("TENSOR_FLOAT32", np.arange(12).reshape(1, 12))
    assert run("CHANNEL_SHUFFLE", x, int32(3), int32(-1)) == [[[0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]]]


@pytest.mark.parametrize("variant", VARIANTS + ["nchw"])
def test_depth_and_space(variant):
    deep = real([1, 2, 2, 4], range(1, 17))
    wide = real([1, 4, 4, 1], [1, 2, 5, 6, 3, 4, 7, 8, 9, 10, 13, 14, 11, 12, 15, 16])
    check("DEPTH_TO_SPACE", [deep, int32(2), boolean(False)], [wide], variant, layout=2)
    check("SPACE_TO_DEPTH", [wide, int32(2), boolean(False)], [deep], variant, layout=2)
    batched = real([4, 2, 2, 1], range(1, 17))
    spread = real([1, 4, 4, 1], [1, 5, 2, 6, 9, 13, 10, 14, 3, 7, 4, 8, 11, 15, 12, 16])
    check("BATCH_TO_SPACE_ND", [batched, ints([2, 2]), boolean(False)], [spread], variant, layout=2)
    check("SPACE_TO_BATCH_ND", [spread, ints([2, 2]), ints([[0, 0], [0, 0]]), boolean(False)], [batched], variant, layout=3)


def test_space_to_batch_pads_with_the_zero_point():
    x = tensor(Q8, [1, 2, 3, 4], [1, 2, 2, 1], scale=1.0, zero_point=9)
    out = nnref.evaluate("SPACE_TO_BATCH_ND", [x, ints([2, 2]), ints([[0, 0], [0, 2]])])[0]
    assert out.shape == (4, 1, 2, 1) and out.value.ravel().tolist() == [1, 9, 2, 9, 3, 9, 4, 9]


@settings(max_examples=40)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=4, max_dims=4, min_side=1, max_side=3),
                  elements=st.floats(-10, 10, width=32)), st.integers(1, 3))
def test_space_to_depth_inverts_depth_to_space(x, block):
    deep = nnref.evaluate("DEPTH_TO_SPACE", [tensor("TENSOR_FLOAT32", np.tile(x, (1, 1, 1, block * block))), int32(block)])[0]
    back = nnref.evaluate("SPACE_TO_DEPTH", [deep, int32(block)])[0]
    np.testing.assert_array_equal(back.value, np.tile(x, (1, 1, 1, block * block)))
    batched = nnref.evaluate("SPACE_TO_BATCH_ND", [deep, ints([block, block]), ints([[0, 0], [0, 0]])])[0]
    restored = nnref.evaluate("BATCH_TO_SPACE_ND", [batched, ints([block, block])])[0]
    np.testing.assert_array_equal(restored.value, deep.value)


@settings(max_examples=40)
@given(hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=4, max_side=3), elements=st.integers(-5, 5)),
       st.randoms())
def test_transpose_by_a_permutation_then_its_inverse_is_identity(x, rng):
    perm = list(range(x.ndim))
    rng.shuffle(perm)
    t = nnref.evaluate("TRANSPOSE", [tensor(Q8, x + 5, scale=1.0), ints(perm)])[0]
    back = nnref.evaluate("TRANSPOSE", [t, ints(list(np.argsort(perm)))])[0]
    np.testing.assert_array_equal(back.value, x + 5)


@pytest.mark.parametrize("variant", VARIANTS + ["nchw"])
def test_resize_bilinear(variant):
    check("RESIZE_BILINEAR", [real([1, 2, 2, 1], [1, 1, 2, 2]), int32(3), int32(3), boolean(False)],
          [real([1, 3, 3, 1], [1, 1, 1, 5 / 3, 5 / 3, 5 / 3, 2, 2, 2])], variant, layout=3)
    check("RESIZE_BILINEAR", [real([1, 2, 2, 2], [3, 4, 6, 10, 9, 10, 12, 16]), int32(3), int32(3), boolean(False)],
          [real([1, 3, 3, 2], [3, 4, 5, 8, 6, 10, 7, 8, 9, 12, 10, 14, 9, 10, 11, 14, 12, 16])], variant, layout=3)


def test_resize_by_scale_and_nearest_neighbor():
    x = tensor("TENSOR_FLOAT32", np.array([1, 2, 3, 4], np.float32).reshape(1, 2, 2, 1))
    by_scale = nnref.evaluate("RESIZE_BILINEAR", [x, float32(1.5), float32(1.5)])[0]
    assert by_scale.shape == (1, 3, 3, 1)
    np.testing.assert_allclose(by_scale.value.ravel(), [1, 5 / 3, 2, 7 / 3, 3, 10 / 3, 3, 11 / 3, 4], rtol=1e-6)
    nearest = nnref.evaluate("RESIZE_NEAREST_NEIGHBOR", [x, int32(3), int32(3), boolean(False)])[0]
    assert nearest.value.ravel().tolist() == [1, 1, 2, 1, 1, 2, 3, 3, 4]
    down = nnref.evaluate("RESIZE_NEAREST_NEIGHBOR", [tensor("TENSOR_FLOAT32", np.arange(16.).reshape(1, 4, 4, 1)),
                                                      int32(2), int32(2), boolean(False)])[0]
    assert down.value.ravel().tolist() == [0, 2, 8, 10]
    q = nnref.evaluate("RESIZE_BILINEAR", [tensor(Q8, [[[[0], [10]], [[20], [30]]]], scale=0.5, zero_point=0),
                                           int32(3), int32(3)])[0]
    assert q.value.ravel().tolist() == [0, 7, 10, 13, 20, 23, 20, 27, 30]


def test_resize_nearest_neighbor_requires_the_layout():
    # 1.2 made RESIZE_BILINEAR's layout optional and gave RESIZE_NEAREST_NEIGHBOR four inputs.
    x = tensor("TENSOR_FLOAT32", np.ones((1, 2, 2, 1), np.float32))
    with pytest.raises(BadOperation, match="RESIZE_NEAREST_NEIGHBOR: takes 4 inputs, got 3"):
        nnref.evaluate("RESIZE_NEAREST_NEIGHBOR", [x, int32(3), int32(3)])
    assert nnref.evaluate("RESIZE_BILINEAR", [x, int32(3), int32(3)])[0].shape == (1, 3, 3, 1)


def test_embedding_and_hashtable_lookup():
    values = tensor("TENSOR_FLOAT32", np.arange(24.).reshape(3, 2, 4))
    out = nnref.evaluate("EMBEDDING_LOOKUP", [ints([1, 0, 2]), values])[0]
    np.testing.assert_array_equal(out.value, values.value[[1, 0, 2]])
    table = tensor("TENSOR_FLOAT32", [[0, 0.1], [1, 1.1], [2, 2.1]])
    out, hits = nnref.evaluate("HASHTABLE_LOOKUP", [ints([1234, -292, -11, 0]), ints([-11, 0, 1234]), table])
    np.testing.assert_allclose(out.value, [[2, 2.1], [0, 0], [0, 0.1], [1, 1.1]])
    assert hits.type == "TENSOR_QUANT8_ASYMM" and hits.value.tolist() == [1, 0, 1, 1]


# resize_nearest_neighbor.mod.py: (input shape, output height, width, scales (h, w), input, output)
NEAREST = [
    ((1, 2, 2, 1), 1, 1, (0.5, 0.5), [1, 2, 3, 4], [1]),
    ((1, 2, 2, 1), 3, 3, (1.5, 1.5), [1, 2, 3, 4], [1, 1, 2, 1, 1, 2, 3, 3, 4]),
    ((1, 3, 3, 1), 2, 2, (0.8, 0.8), range(1, 10), [1, 2, 4, 5]),
    ((1, 2, 2, 1), 2, 5, (1.1, 2.6), [1, 2, 3, 4], [1, 1, 1, 2, 2, 3, 3, 3, 4, 4]),
    ((1, 4, 4, 1), 3, 3, (0.9, 0.9), range(1, 17), [1, 2, 3, 5, 6, 7, 9, 10, 11]),
    ((1, 2, 2, 1), 5, 2, (2.8, 1.4), [1, 2, 3, 4], [1, 2, 1, 2, 1, 2, 3, 4, 3, 4]),
    ((1, 2, 2, 1), 4, 4, (2.0, 2.0), [1, 2, 3, 4], [1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4]),
    ((2, 2, 2, 2), 3, 3, (1.6, 1.8), [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8],
     [1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 5, 5, 5, 5, 6, 6, 5, 5, 5, 5, 6, 6, 7, 7, 7, 7, 8, 8]),
]


@pytest.mark.parametrize("variant", VARIANTS + ["nchw", "quant8"])
@pytest.mark.parametrize("shape,oh,ow,scales,x,y", NEAREST)
def test_resize_nearest_neighbor(shape, oh, ow, scales, x, y, variant):
    quant = {("in", 0): (Q8, 0.25, 100), ("out", 0): (Q8, 0.25, 100)} if variant == "quant8" else None
    variant = "float32" if variant == "quant8" else variant
    out = real([shape[0], oh, ow, shape[3]], y)
    check("RESIZE_NEAREST_NEIGHBOR", [real(shape, x), int32(ow), int32(oh), boolean(False)], [out], variant, quant, 3)
    # The same by scale: width's factor first, as the 1.2 signature orders them.
    by_scale = [real(shape, x), float32(scales[1]), float32(scales[0]), boolean(False)]
    check("RESIZE_NEAREST_NEIGHBOR", by_scale, [out], variant, quant, 3)


def test_channel_shuffle_vectors():
    check("CHANNEL_SHUFFLE", [real([2, 6], [0, 1, 2, 3, 4, 5, 6, 9, 6, 9, 6, 9]), int32(3), int32(-1)],
          [real([2, 6], [0, 2, 4, 1, 3, 5, 6, 6, 6, 9, 9, 9])])
    expected = np.arange(144).reshape(12, 3, 4).transpose(0, 2, 1).reshape(2, 2, 3, 12)  # 0, 4, 8, 1, 5, 9, ...
    assert expected[0, 0, 0].tolist() == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    check("CHANNEL_SHUFFLE", [real([2, 2, 3, 12], range(144)), int32(3), int32(3)], [real([2, 2, 3, 12], expected)],
          quant={("in", 0): (Q8, 0.25, 128), ("out", 0): (Q8, 0.25, 128)})


# slice.mod.py ----------------------------------------------------------------------------------

SLICES = [
    ((4,), [1, 2, 3, 4], [1], [2], [2, 3]),
    ((2, 3), [1, 2, 3, 4, 5, 6], [1, 0], [1, 2], [4, 5]),
    ((2, 3, 2), range(1, 13), [0, 0, 0], [2, 3, 2], range(1, 13)),
    ((4, 1, 1, 1), [1, 2, 3, 4], [1, 0, 0, 0], [3, 1, 1, 1], [2, 3, 4]),
    ((3, 2, 3, 1), [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6], [1, 0, 0, 0], [1, 1, 3, 1], [3, 3, 3]),
    ((3, 2, 3, 1), [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6], [1, 0, 0, 0], [2, 1, -1, 1], [3, 3, 3, 5, 5, 5]),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape,x,begin,size,y", SLICES)
def test_slice_vectors(shape, x, begin, size, y, variant):
    out_shape = [s if s != -1 else shape[d] - begin[d] for d, s in enumerate(size)]
    check("SLICE", [real(shape, x), ints(begin), ints(size)], [real(out_shape, y)], variant)
    stored = tensor(Q8, np.asarray(list(x)).reshape(shape), scale=2.0, zero_point=128)
    out = nnref.evaluate("SLICE", [stored, ints(begin), ints(size)])[0]
    assert out.value.ravel().tolist() == list(y) and (out.scale, out.zero_point) == (2.0, 128)
