"""The detection family of the operation library (ops_detection.c) through its bindings
(bind_detection.c), against nnref: AOSP's 1.2 vectors in every variation, generated cases
over every operand type and layout, output counts that depend on the data, zero rois, and
bad calls refused with a sentence naming the input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nnref
import test_nnref_detection as vectors
from framework.nn._cpu import ffi, lib
from nn_ops import OPERATION_CODES, BindError, Tensor, bind_check, bind_run, bind_vs_nnref
from nn_ops import tensor as descriptor
from nnref import boolean, float16, float32, int32, tensor
from nnref.examples import realize

F32, F16, Q8 = "TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_QUANT8_ASYMM"
Q16, Q16S, I32 = "TENSOR_QUANT16_ASYMM", "TENSOR_QUANT16_SYMM", "TENSOR_INT32"
TYPES = (F32, F16, Q8)


def agree(name, inputs, expected=(), variant="float32", quant=None, layout=None, data=nnref.examples.DATA):
    """One variation of an example: the binding's outputs match nnref's and the example's."""
    ins, outs = realize(inputs, expected, variant, quant, layout, data)
    relaxed = variant == "relaxed"
    got, ref = bind_vs_nnref(name, ins, [nnref.Operand(o.type, None, o.scale, o.zero_point) for o in outs],
                             relaxed=relaxed)
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        nnref.assert_close(g, r, relaxed=relaxed)
    for g, e in zip(got, outs):
        nnref.assert_close(g, e, relaxed=relaxed)
    return got


def batches(values):
    return tensor(I32, np.asarray(values, np.int32))


def scalar(variant, value):
    return float16(value) if variant == F16 else float32(value)


def typed(variant, values, scale=0.05, zero_point=128):
    """A data tensor of a variant from real values."""
    values = np.asarray(values, np.float64)
    if variant == Q8:
        return nnref.Operand(Q8, nnref.core.quantize(values, Q8, scale, zero_point), scale, zero_point)
    return tensor(variant, values.astype(nnref.DTYPES[variant]))


def boxes(variant, values):
    """Box coordinates of a variant (quantized: TENSOR_QUANT16_ASYMM, 0.125, 0)."""
    values = np.asarray(values, np.float64)
    if variant in (Q8, Q16):
        return nnref.Operand(Q16, nnref.core.quantize(values, Q16, 0.125, 0), 0.125, 0)
    return tensor(variant, values.astype(nnref.DTYPES[variant]))


def compare(name, inputs, outputs=(), relaxed=False):
    got, ref = bind_vs_nnref(name, inputs, outputs, relaxed=relaxed)
    for g, r in zip(got, ref, strict=True):
        nnref.assert_close(g, r, relaxed=relaxed)
    return got


def refused(name, inputs, outputs, status, *words):
    with pytest.raises(BindError) as e:
        bind_run(name, inputs, outputs)
    assert e.value.status == status, e.value
    for w in words:
        assert w in e.value.why, e.value.why
    assert e.value.why.startswith(name + ": ")


# -- AOSP's vectors, every variation ------------------------------------------------------------

QUANT_NMS = vectors.NMS_QUANT


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16", "quant8"])
def test_box_with_nms_limit_vector(variant):
    quant, variant = (QUANT_NMS, "float32") if variant == "quant8" else (None, variant)
    agree("BOX_WITH_NMS_LIMIT", vectors.nms_inputs([0] * 9 + [1] * 10, -1), vectors.NMS_1, variant, quant)


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16", "nchw", "quant8"])
def test_roi_align_vector(variant):
    quant = {("in", 0): (Q8, 0.25, 128), ("in", 1): (Q16, 0.125, 0), ("out", 0): (Q8, 0.0625, 128)}
    quant, variant = (quant, "float32") if variant == "quant8" else (None, variant)
    inputs = [vectors.ALIGN_IN, vectors.ALIGN_ROIS, batches([0] * 4), int32(2), int32(2), float32(2.0), float32(2.0),
              int32(4), int32(4), boolean(False)]
    agree("ROI_ALIGN", inputs, [vectors.ALIGN_OUT], variant, quant, layout=9)


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16", "nchw", "quant8"])
def test_roi_pooling_vectors(variant):
    quant, variant = (vectors.POOL_QUANT, "float32") if variant == "quant8" else (None, variant)
    agree("ROI_POOLING", [nnref.examples.real([1, 4, 4, 1], vectors.POOL_IN),
                          nnref.examples.real([4, 4], [2, 2, 4, 4, 0, 0, 6, 6, 2, 0, 4, 6, 0, 2, 6, 4]),
                          batches([0] * 4), int32(2), int32(2), float32(2.0), float32(2.0), boolean(False)],
          [nnref.examples.real([4, 2, 2, 1], [-2, 9, -2, 3, -1, 9, 10, 5, -1, 9, 10, 3, -2, 9, 7, 3])],
          variant, quant, 7)


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16", "nchw", "quant8"])
def test_heatmap_max_keypoint_vectors(variant):
    quant = {("in", 0): (Q8, 0.5, 128), ("in", 1): (Q16, 0.125, 0), ("out", 0): (Q8, 0.1, 10), ("out", 1): (Q16, 0.125, 0)}
    quant, variant = (quant, "float32") if variant == "quant8" else (None, variant)
    real = nnref.examples.real
    agree("HEATMAP_MAX_KEYPOINT", [real([5, 4, 4, 1], vectors.HEAT_1), real([5, 4], vectors.HEAT_BOXES), boolean(False)],
          [real([5, 1], vectors.HEAT_SCORES), real([5, 1, 2], vectors.HEAT_POINTS)], variant, quant, 2, [("in", 0)])
    if variant in ("float32", "float16"):  # a singular Hessian keeps the grid's maximum
        agree("HEATMAP_MAX_KEYPOINT", [real([1, 4, 4, 1], vectors.SINGULAR), real([1, 4], [5, 2, 10, 20]),
                                       boolean(False)], [real([1, 1], [9.0]), real([1, 1, 2], [8.125, 8.75])], variant)


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16", "nchw"])
def test_generate_proposals_vector(variant):
    real = nnref.examples.real
    inputs = [real([1, 2, 2, 2], [0.8, 0.9, 0.85, 0.85, 0.75, 0.8, 0.9, 0.95]),
              real([1, 2, 2, 8], [0.5, 0.1, 0.1, 0.1, 0.5, 0.1, 0.5, 0.1, -0.25, 0.1, -0.1, -0.1, -0.25, 0.1, 0.2, 0.1,
                                  0.4, -0.1, -0.2, 0.2, 0.4, -0.1, -0.2, 0.2, -0.2, -0.2, 0.2, 0.2, -0.2, -0.2, 0.2, 0.2]),
              real([2, 4], [0, 1, 4, 3, 1, 0, 3, 4]), real([1, 2], [32, 32]), float32(4.0), float32(4.0), int32(-1),
              int32(-1), float32(0.3), float32(1.0), boolean(False)]
    outputs = [real([4], [0.95, 0.9, 0.85, 0.8]), real([4, 4], vectors.GP_ROIS), batches([0, 0, 0, 0])]
    agree("GENERATE_PROPOSALS", inputs, outputs, variant, layout=10, data=[("in", 0), ("in", 1)])


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16"])
def test_detection_postprocessing_vectors(variant):
    d = vectors.detections
    agree("DETECTION_POSTPROCESSING", vectors.postprocess(True, False),
          d([0.95, 0.93, 0.0], [0, 10, 1, 11, 0, 10, 1, 11, 0, 0, 0, 0], [1, 0, 0], 2), variant)
    agree("DETECTION_POSTPROCESSING", vectors.postprocess(False, False), d([0.95, 0.9, 0.3], vectors.FAST_BOXES,
                                                                            [1, 0, 0], 3), variant)
    agree("DETECTION_POSTPROCESSING", vectors.postprocess(False, True, extra_encoding=True),
          d([0.95, 0.9, 0.3], vectors.FAST_BOXES, [2, 1, 1], 3), variant)


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16"])
def test_axis_aligned_bbox_transform_vector(variant):
    real = nnref.examples.real
    agree("AXIS_ALIGNED_BBOX_TRANSFORM", [real([1, 4], [100, 150, 400, 430]),
                                          real([1, 8], [0.2, 0.2, 0.1, 0.1, 0.3, -0.1, -0.2, 0.1]), batches([0]),
                                          real([1, 2], [512, 512])],
          [real([1, 8], [144.224350, 191.276062, 475.775635, 500.723938, 217.190384, 107.276062, 462.809631,
                         416.723938])], variant)


# -- generated cases ----------------------------------------------------------------------------

def random_boxes(rng, n, width, height):
    """n valid (x1, y1, x2, y2) boxes inside width x height, on the 0.125 grid."""
    x = np.sort(rng.integers(0, int(width * 8) + 1, (n, 2)), axis=1) / 8
    y = np.sort(rng.integers(0, int(height * 8) + 1, (n, 2)), axis=1) / 8
    return np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1)


SEEDS = st.integers(0, 2**31 - 1)


@settings(max_examples=30, deadline=None)
@given(SEEDS, st.sampled_from((F32, F16, Q16)), st.integers(1, 5), st.integers(1, 3), st.integers(1, 2))
def test_axis_aligned_bbox_transform_matches_nnref(seed, variant, n, classes, images):
    rng = np.random.default_rng(seed)
    info = rng.integers(8, 64, (images, 2)).astype(np.float64)
    rois = random_boxes(rng, n, 64, 64)
    deltas = rng.uniform(-1, 1, (n, 4 * classes))
    delta_op = typed(Q8, deltas, 1 / 64, 128) if variant == Q16 else tensor(variant, deltas.astype(nnref.DTYPES[variant]))
    compare("AXIS_ALIGNED_BBOX_TRANSFORM", [boxes(variant, rois), delta_op, batches(rng.integers(0, images, n)),
                                            boxes(variant, info)])


def roi_inputs(seed, variant, nchw, stride):
    """An image of 1-2 batches in a layout, and 1-3 rois inside it (in the image's coordinates)."""
    rng = np.random.default_rng(seed)
    b, h, w, c = rng.integers(1, 3), rng.integers(2, 6), rng.integers(2, 6), rng.integers(1, 3)
    n = rng.integers(1, 4)
    image = rng.uniform(-4, 4, (b, h, w, c))
    x = typed(variant, np.transpose(image, (0, 3, 1, 2)) if nchw else image, 0.05, 100)
    return [x, boxes(variant, random_boxes(rng, n, w * stride, h * stride)), batches(rng.integers(0, b, n))]


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.sampled_from(TYPES), st.booleans(), st.integers(1, 3), st.integers(1, 3), st.sampled_from((0, 1, 2)),
       st.sampled_from((0.5, 1.0, 2.0)))
def test_roi_align_matches_nnref(seed, variant, nchw, oh, ow, ratio, stride):
    out = [nnref.output(Q8, 0.04, 120)] if variant == Q8 else []
    compare("ROI_ALIGN", [*roi_inputs(seed, variant, nchw, stride), int32(oh), int32(ow), scalar(variant, stride),
                          scalar(variant, stride), int32(ratio), int32(ratio), boolean(nchw)], out)


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.sampled_from(TYPES), st.booleans(), st.integers(1, 3), st.integers(1, 3),
       st.sampled_from((0.5, 1.0, 2.0)), st.booleans())
def test_roi_pooling_matches_nnref(seed, variant, nchw, oh, ow, stride, requantize):
    out = [nnref.output(Q8, 0.1, 90)] if variant == Q8 and requantize else []
    compare("ROI_POOLING", [*roi_inputs(seed, variant, nchw, stride), int32(oh), int32(ow), scalar(variant, stride),
                            scalar(variant, stride), boolean(nchw)], out)


@settings(max_examples=30, deadline=None)
@given(SEEDS, st.sampled_from(TYPES), st.booleans(), st.integers(2, 5), st.integers(1, 3))
def test_heatmap_max_keypoint_matches_nnref(seed, variant, nchw, size, keypoints):
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 4)
    heat = rng.uniform(-3, 3, (n, size, size, keypoints))
    x = typed(variant, np.transpose(heat, (0, 3, 1, 2)) if nchw else heat, 0.05, 100)
    out = [nnref.output(Q8, 0.05, 100), nnref.output(Q16, 0.125, 0)] if variant == Q8 else []
    compare("HEATMAP_MAX_KEYPOINT", [x, boxes(variant, random_boxes(rng, n, 40, 40)), boolean(nchw)], out)


@settings(max_examples=60, deadline=None)
@given(SEEDS, st.sampled_from(TYPES), st.integers(1, 8), st.integers(2, 4), st.sampled_from((0, 1, 2)),
       st.sampled_from((-1, 0, 1, 3)), st.integers(1, 2), st.sampled_from((0.2113, 0.4871)))
def test_box_with_nms_limit_matches_nnref(seed, variant, n, classes, kernel, limit, images, iou):
    rng = np.random.default_rng(seed)
    scores = rng.permutation(np.linspace(0.05, 0.95, n * classes)).reshape(n, classes)  # distinct: no ties
    # Crowded, so that they overlap; the IoU thresholds are no ratio of these areas (at an exact tie
    # Android's float IoU and nnref's double one may decide differently).
    rois = random_boxes(rng, n * classes, 4, 4).reshape(n, 4 * classes)
    image_of = np.sort(rng.integers(0, images, n))
    inputs = [typed(variant, scores, 1 / 256, 0), boxes(variant, rois), batches(image_of),
              scalar(variant, 0.2), int32(limit), int32(kernel), scalar(variant, iou), scalar(variant, 0.5),
              scalar(variant, 0.1)]
    out = [nnref.output(Q8, 1 / 256, 0)] if variant == Q8 else []
    compare("BOX_WITH_NMS_LIMIT", inputs, out)


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.sampled_from(TYPES), st.booleans(), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2),
       st.sampled_from((-1, 0, 3)), st.sampled_from((-1, 2, 5)))
def test_generate_proposals_matches_nnref(seed, variant, nchw, h, w, anchors, pre, post):
    rng = np.random.default_rng(seed)
    b = rng.integers(1, 3)
    scores = rng.permutation(np.linspace(0.05, 0.95, b * h * w * anchors)).reshape(b, h, w, anchors)
    deltas = rng.uniform(-0.5, 0.5, (b, h, w, 4 * anchors))
    lay = (lambda a: np.transpose(a, (0, 3, 1, 2))) if nchw else (lambda a: a)
    anchor = random_boxes(rng, anchors, 8, 8) + [0, 0, 1, 1]
    anchor_op = (nnref.Operand(Q16S, nnref.core.quantize(anchor, Q16S, 0.125, 0), 0.125, 0) if variant == Q8
                 else tensor(variant, anchor.astype(nnref.DTYPES[variant])))
    inputs = [typed(variant, lay(scores), 1 / 256, 0), typed(variant, lay(deltas), 1 / 128, 128), anchor_op,
              boxes(variant, np.full((b, 2), 16.0)), scalar(variant, 4.0), scalar(variant, 4.0), int32(pre),
              int32(post), scalar(variant, 0.4), scalar(variant, 0.5), boolean(nchw)]
    out = [nnref.output(Q8, 1 / 256, 0)] if variant == Q8 else []
    compare("GENERATE_PROPOSALS", inputs, out)


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.sampled_from((F32, F16)), st.booleans(), st.integers(1, 6), st.integers(2, 4), st.integers(1, 4),
       st.integers(1, 3), st.booleans())
def test_detection_postprocessing_matches_nnref(seed, variant, regular, anchors, classes, max_det, per, background):
    rng = np.random.default_rng(seed)
    b = rng.integers(1, 3)
    scores = rng.permutation(np.linspace(0.0, 0.95, b * anchors * classes)).reshape(b, anchors, classes)
    deltas = rng.uniform(-1, 1, (b, anchors, rng.integers(4, 6)))
    centres = rng.uniform(0, 4, (anchors, 2))
    anchor = np.concatenate([centres, rng.uniform(0.5, 2, (anchors, 2))], axis=1)
    inputs = [typed(variant, scores), typed(variant, deltas), typed(variant, anchor), *(scalar(variant, s) for s in
              (10.0, 10.0, 5.0, 5.0)), boolean(regular), int32(max_det), int32(per), int32(per),
              scalar(variant, 0.1), scalar(variant, 0.5), boolean(background)]
    compare("DETECTION_POSTPROCESSING", inputs)


# -- outputs whose count depends on the data ---------------------------------------------------------

def nms_call(scores, threshold=0.3):
    n = len(scores)
    return [tensor(F32, np.asarray(scores, np.float32)), tensor(F32, np.tile([0, 0, 10, 10], (n, 2)).astype(np.float32)),
            batches([0] * n), float32(threshold), int32(-1), int32(0), float32(0.5), float32(1.0), float32(0.3)]


NMS_OUTPUTS = [nnref.output(F32), nnref.output(F32), nnref.output(I32), nnref.output(I32)]


def test_box_with_nms_limit_counts_only_once_the_data_is_known():
    call = nms_call([[0.1, 0.9], [0.2, 0.8], [0.3, 0.2]])
    assert bind_check("BOX_WITH_NMS_LIMIT", call, NMS_OUTPUTS) == [None] * 4  # shapes only: unknown
    # With the data: the two boxes are one (IoU 1), the third's score is under the threshold.
    assert bind_check("BOX_WITH_NMS_LIMIT", call, NMS_OUTPUTS, data=True) == [(1,), (1, 4), (1,), (1,)]
    got = bind_run("BOX_WITH_NMS_LIMIT", call, NMS_OUTPUTS)
    assert got[0].value.tolist() == pytest.approx([0.9]) and got[2].value.tolist() == [1]


@pytest.mark.parametrize("variant", [F32, F16, Q8])
def test_soft_nms_decays_overlapping_scores(variant):
    # nnref's hand-checked case: one class, a box, its copy and a half-overlapping one.
    rois = boxes(variant, [[0, 0, 0, 0, 0, 0, 10, 10], [0, 0, 0, 0, 0, 0, 10, 10], [0, 0, 0, 0, 0, 0, 10, 5]])
    scores = typed(variant, [[0, 0.9], [0, 0.8], [0, 0.7]], 1 / 128, 0)
    args = [batches([0, 0, 0]), scalar(variant, 0.1), int32(-1)]
    out = [nnref.output(Q8, 1 / 128, 0)] if variant == Q8 else []
    linear = compare("BOX_WITH_NMS_LIMIT", [scores, rois, *args, int32(1), scalar(variant, 0.3), scalar(variant, 1.0),
                                            scalar(variant, 0.0)], out)
    np.testing.assert_allclose(linear[0].real(), [0.9, 0.35, 0.0], atol=0.01)  # 0.7 * (1 - 0.5); 0.8 * (1 - 1)
    gaussian = compare("BOX_WITH_NMS_LIMIT", [scores, rois, *args, int32(2), scalar(variant, 0.3),
                                              scalar(variant, 0.5), scalar(variant, 0.1)], out)
    np.testing.assert_allclose(gaussian[0].real(), [0.9, 0.7 * np.exp(-0.5)], atol=0.01)


def test_box_with_nms_limit_can_select_nothing():
    got = bind_run("BOX_WITH_NMS_LIMIT", nms_call([[0.1, 0.2], [0.2, 0.1]]), NMS_OUTPUTS)
    assert [g.shape for g in got] == [(0,), (0, 4), (0,), (0,)]


def test_generate_proposals_counts_from_the_data():
    scores = tensor(F32, np.array([0.9, 0.8, 0.7, 0.1], np.float32).reshape(1, 2, 2, 1))
    call = [scores, tensor(F32, np.zeros((1, 2, 2, 4), np.float32)), tensor(F32, [[0, 0, 10, 10]]),
            tensor(F32, [[32, 32]]), float32(2.0), float32(2.0), int32(-1), int32(-1), float32(0.3), float32(1.0),
            boolean(False)]
    outputs = [nnref.output(F32), nnref.output(F32), nnref.output(I32)]
    assert bind_check("GENERATE_PROPOSALS", call, outputs) == [None] * 3
    assert bind_check("GENERATE_PROPOSALS", call, outputs, data=True)[0] == (1,)  # stride 2: all overlap
    call[9] = float32(100.0)  # no box is that large: nothing
    assert [g.shape for g in bind_run("GENERATE_PROPOSALS", call, outputs)] == [(0,), (0, 4), (0,)]


@pytest.mark.parametrize("name, by_shapes", [
    ("ROI_ALIGN", False), ("ROI_POOLING", False), ("HEATMAP_MAX_KEYPOINT", False), ("AXIS_ALIGNED_BBOX_TRANSFORM", True),
    ("DETECTION_POSTPROCESSING", False), ("BOX_WITH_NMS_LIMIT", False), ("GENERATE_PROPOSALS", False),
])
def test_prepare_computes_the_shapes_it_can_from_what_it_is_given(name, by_shapes):
    """Types alone (the NDK's addOperation without dimensions) leave every output unknown; declared
    shapes suffice when no scalar or value decides a dimension; with every value, each is known."""
    real = nnref.examples.real
    calls = {
        "ROI_ALIGN": ALIGN, "ROI_POOLING": [*ALIGN[:7], boolean(False)],
        "HEATMAP_MAX_KEYPOINT": realize([real([5, 4, 4, 1], vectors.HEAT_1), real([5, 4], vectors.HEAT_BOXES),
                                         boolean(False)], [])[0],
        "AXIS_ALIGNED_BBOX_TRANSFORM": [tensor(F32, [[0, 0, 4, 4]]), tensor(F32, np.zeros((1, 8), np.float32)),
                                        batches([0]), tensor(F32, [[8, 8]])],
        "DETECTION_POSTPROCESSING": realize(vectors.postprocess(True, False), [])[0],
        "BOX_WITH_NMS_LIMIT": nms_call([[0.1, 0.9], [0.2, 0.8]]),
        "GENERATE_PROPOSALS": realize([nnref.examples.real([1, 2, 2, 1], [0.9, 0.8, 0.7, 0.1]),
                                       nnref.examples.real([1, 2, 2, 4], [0] * 16), real([1, 4], [0, 0, 10, 10]),
                                       real([1, 2], [32, 32]), float32(2.0), float32(2.0), int32(-1), int32(-1),
                                       float32(0.3), float32(1.0), boolean(False)], [])[0],
    }
    call = calls[name]
    outputs = [nnref.Operand(o.type, None, o.scale, o.zero_point) for o in nnref.evaluate(name, call)]
    assert bind_check(name, call, outputs, shapes=False) == [None] * len(outputs)
    computed = [o.shape for o in bind_run(name, call, outputs)]
    assert bind_check(name, call, outputs) == (computed if by_shapes else [None] * len(outputs))
    assert bind_check(name, call, outputs, data=True) == computed


def empty(shape, type=F32):
    return tensor(type, np.zeros(shape, nnref.DTYPES[type]))


@pytest.mark.parametrize("name, inputs, shapes", [
    ("ROI_ALIGN", [tensor(F32, np.ones((1, 2, 2, 1), np.float32)), empty((0, 4)), empty((0,), I32), int32(2), int32(2),
                   float32(1), float32(1), int32(2), int32(2), boolean(False)], [(0, 2, 2, 1)]),
    ("ROI_POOLING", [tensor(F32, np.ones((1, 2, 2, 1), np.float32)), empty((0, 4)), empty((0,), I32), int32(2), int32(2),
                     float32(1), float32(1), boolean(True)], [(0, 2, 2, 2)]),  # NCHW: 2 channels
    ("BOX_WITH_NMS_LIMIT", [empty((0, 2)), empty((0, 8)), empty((0,), I32), float32(.3), int32(-1), int32(0),
                            float32(.4), float32(1), float32(.3)], [(0,), (0, 4), (0,), (0,)]),
    ("AXIS_ALIGNED_BBOX_TRANSFORM", [empty((0, 4)), empty((0, 4)), empty((0,), I32), tensor(F32, [[10, 10.0]])],
     [(0, 4)]),
    ("HEATMAP_MAX_KEYPOINT", [empty((0, 2, 2, 1)), empty((0, 4)), boolean(False)], [(0, 1), (0, 1, 2)]),
])
def test_zero_rois_give_empty_outputs(name, inputs, shapes):
    got = compare(name, inputs)
    assert [g.shape for g in got] == shapes


# -- the cost model's figures ---------------------------------------------------------------------

def cost(name, inputs, outputs):
    """(FLOPs, bytes) the binding charges one call."""
    shapes = bind_check(name, inputs, outputs, data=True)
    keep = []
    ins, outs = ffi.new("struct npu_arg[]", len(inputs)), ffi.new("struct npu_arg[]", len(outputs))
    operands = [(slot, op.type, op.value, op.scale, op.zero_point) for slot, op in zip(ins, inputs)]
    operands += [(slot, o.type, np.zeros(shape, nnref.DTYPES[o.type]), o.scale, o.zero_point)
                 for slot, o, shape in zip(outs, outputs, shapes)]
    for slot, type, value, scale, zero_point in operands:
        keep.append(Tensor(type, value, scale, zero_point))
        slot.t = keep[-1].ptr[0]
        slot.has_rank = slot.has_shape = True
    call = ffi.new("struct npu_bind_call *", {"type": OPERATION_CODES[name], "input_count": len(inputs),
                                              "output_count": len(outputs), "in": ins, "out": outs})
    flops, nbytes = ffi.new("double *"), ffi.new("double *")
    lib.npu_bind_lookup(OPERATION_CODES[name]).cost(call, flops, nbytes)
    return flops[0], nbytes[0]


def test_roi_operations_charge_their_samples_and_cells():
    out = [nnref.output(F32)]
    # ROI_ALIGN: 1 roi x 2x2 bins x 1 channel, 4 samples of 4 taps (8 FLOPs) each; the image, the roi,
    # its batch and the output move: 16 + 4 + 1 + 4 values of 4 bytes.
    assert cost("ROI_ALIGN", with_input(with_input(ALIGN, 7, int32(2)), 8, int32(2)), out) == (4 * 4 * 8, 25 * 4)
    assert cost("ROI_ALIGN", with_input(with_input(ALIGN, 7, int32(4)), 8, int32(1)), out)[0] == 4 * 4 * 8
    # ROI_POOLING: a bin of a roi spanning the 4x4 image covers 2x2 cells.
    assert cost("ROI_POOLING", [*ALIGN[:7], boolean(False)], out) == (4 * 4, 25 * 4)


# -- bad calls ----------------------------------------------------------------------------------------

ALIGN = [tensor(F32, np.ones((1, 4, 4, 1), np.float32)), tensor(F32, [[0, 0, 2, 2]]), batches([0]), int32(2), int32(2),
         float32(1.0), float32(1.0), int32(0), int32(0), boolean(False)]


def with_input(inputs, i, value):
    return [*inputs[:i], value, *inputs[i + 1:]]


def test_roi_align_refuses_bad_calls():
    out = [nnref.output(F32)]
    refused("ROI_ALIGN", ALIGN[:9], out, "BAD_OPERATION", "takes 10 inputs, not 9")
    refused("ROI_ALIGN", with_input(ALIGN, 0, tensor(I32, np.ones((1, 4, 4, 1), np.int32))), out, "BAD_OPERAND_TYPE",
            "input 0")
    refused("ROI_ALIGN", with_input(ALIGN, 1, tensor(F16, [[0, 0, 2, 2]])), out, "BAD_OPERAND_TYPE", "input 1")
    refused("ROI_ALIGN", with_input(ALIGN, 3, int32(0)), out, "BAD_SCALAR", "output height")
    refused("ROI_ALIGN", with_input(ALIGN, 5, float32(-1.0)), out, "BAD_SCALAR", "strides")
    refused("ROI_ALIGN", with_input(ALIGN, 5, float16(1.0)), out, "BAD_OPERAND_TYPE", "input 5", "FLOAT32")
    refused("ROI_ALIGN", with_input(ALIGN, 7, int32(-1)), out, "BAD_SCALAR", "sampling ratios")
    refused("ROI_ALIGN", with_input(ALIGN, 8, int32(1025)), out, "BAD_SCALAR", "0..1024")
    refused("ROI_ALIGN", with_input(ALIGN, 1, tensor(F32, [[0, 0, 2]])), out, "BAD_SHAPE", "input 1 (rois)")
    refused("ROI_ALIGN", with_input(ALIGN, 2, batches([0, 0])), out, "BAD_SHAPE", "input 2 (batches)")
    refused("ROI_ALIGN", ALIGN, [nnref.output(F16)], "BAD_OPERAND_TYPE", "output 0")
    # Malformed data: found when it is run.
    refused("ROI_ALIGN", with_input(ALIGN, 1, tensor(F32, [[3, 0, 2, 2]])), out, "INVALID_ARGUMENT", "x2 < x1")
    refused("ROI_ALIGN", with_input(ALIGN, 1, tensor(F32, [[0, 0, 5, 2]])), out, "INVALID_ARGUMENT", "outside")
    refused("ROI_ALIGN", with_input(ALIGN, 2, batches([1])), out, "INVALID_ARGUMENT", "batch")
    # Android's quant8 path requantizes by a multiplier below 1: a far finer output scale is refused.
    quant = [typed(Q8, np.ones((1, 4, 4, 1)), 1.0, 0), boxes(Q8, [[0, 0, 2, 2]]), *ALIGN[2:]]
    refused("ROI_ALIGN", quant, [nnref.output(Q8, 1e-4, 0)], "BAD_SCALAR", "output 0's scale is too small")


def test_quantized_boxes_must_have_the_specs_parameters():
    x = typed(Q8, np.ones((1, 4, 4, 1)), 0.1, 0)
    rois = nnref.Operand(Q16, np.array([[0, 0, 16, 16]], np.uint16), 0.25, 0)
    call = [x, rois, *ALIGN[2:]]
    refused("ROI_ALIGN", call, [nnref.output(Q8, 0.1, 0)], "BAD_SCALAR", "scale 0.125 and zero point 0")
    heat = [typed(Q8, np.ones((1, 2, 2, 1)), 0.1, 0), boxes(Q8, [[0, 0, 4, 4]]), boolean(False)]
    refused("HEATMAP_MAX_KEYPOINT", heat, [nnref.output(Q8, 0.1, 0), nnref.output(Q16, 0.5, 0)], "BAD_SCALAR",
            "output 1")


def test_box_with_nms_limit_refuses_bad_calls():
    call = nms_call([[0.1, 0.9], [0.2, 0.8]])
    refused("BOX_WITH_NMS_LIMIT", with_input(call, 5, int32(3)), NMS_OUTPUTS, "BAD_SCALAR", "NMS kernel", "not 3")
    refused("BOX_WITH_NMS_LIMIT", with_input(with_input(call, 5, int32(2)), 7, float32(0.0)), NMS_OUTPUTS,
            "BAD_SCALAR", "sigma")
    refused("BOX_WITH_NMS_LIMIT", with_input(call, 0, tensor(F32, [[0.9], [0.8]])), NMS_OUTPUTS, "BAD_SHAPE",
            "2 classes")
    refused("BOX_WITH_NMS_LIMIT", with_input(call, 1, tensor(F32, np.zeros((2, 4), np.float32))), NMS_OUTPUTS,
            "BAD_SHAPE", "input 1 (rois)")
    refused("BOX_WITH_NMS_LIMIT", call, NMS_OUTPUTS[:3], "BAD_OPERATION", "4 outputs")
    refused("BOX_WITH_NMS_LIMIT", call, [NMS_OUTPUTS[0], NMS_OUTPUTS[1], nnref.output(F32), NMS_OUTPUTS[3]],
            "BAD_OPERAND_TYPE", "output 2")
    refused("BOX_WITH_NMS_LIMIT", with_input(call, 1, tensor(F32, np.tile([10, 0, 0, 10], (2, 2)).astype(np.float32))),
            NMS_OUTPUTS, "INVALID_ARGUMENT", "x2 < x1")


def test_detection_postprocessing_refuses_bad_scalars():
    ins, _ = realize(vectors.postprocess(True, False), [])
    outputs = [nnref.output(F32), nnref.output(F32), nnref.output(I32), nnref.output(I32)]
    refused("DETECTION_POSTPROCESSING", with_input(ins, 4, float32(0.0)), outputs, "BAD_SCALAR", "input 4")
    refused("DETECTION_POSTPROCESSING", with_input(ins, 8, int32(0)), outputs, "BAD_SCALAR", "max detections")
    refused("DETECTION_POSTPROCESSING", with_input(ins, 10, int32(0)), outputs, "BAD_SCALAR", "per class")
    refused("DETECTION_POSTPROCESSING", with_input(with_input(ins, 7, boolean(False)), 9, int32(0)), outputs,
            "BAD_SCALAR", "per detection")
    refused("DETECTION_POSTPROCESSING", with_input(ins, 11, float32(-0.5)), outputs, "BAD_SCALAR", "thresholds")
    refused("DETECTION_POSTPROCESSING", with_input(ins, 0, typed(Q8, np.zeros((1, 6, 3)))), outputs,
            "BAD_OPERAND_TYPE", "input 0")


def test_generate_proposals_and_transform_refuse_bad_calls():
    scores = tensor(F32, np.ones((1, 2, 2, 1), np.float32))
    call = [scores, tensor(F32, np.zeros((1, 2, 2, 4), np.float32)), tensor(F32, [[0, 0, 10, 10]]),
            tensor(F32, [[32, 32]]), float32(2.0), float32(2.0), int32(-1), int32(-1), float32(0.3), float32(1.0),
            boolean(False)]
    outputs = [nnref.output(F32), nnref.output(F32), nnref.output(I32)]
    refused("GENERATE_PROPOSALS", with_input(call, 1, tensor(F32, np.zeros((1, 2, 2, 3), np.float32))), outputs,
            "BAD_SHAPE", "input 1 (deltas)")
    refused("GENERATE_PROPOSALS", with_input(call, 2, tensor(F32, [[10, 0, 0, 10]])), outputs, "INVALID_ARGUMENT",
            "anchor")
    q = [typed(Q8, np.ones((1, 2, 2, 1)), 0.1, 0), typed(Q8, np.zeros((1, 2, 2, 4)), 0.1, 128),
         boxes(Q8, [[0, 0, 10, 10]]), boxes(Q8, [[32, 32]]), *call[4:]]
    refused("GENERATE_PROPOSALS", q, [nnref.output(Q8, 0.1, 0), nnref.output(Q16, 0.125, 0), nnref.output(I32)],
            "BAD_OPERAND_TYPE", "input 2", "TENSOR_QUANT16_SYMM")
    bbox = [tensor(F32, [[0, 0, 4, 4]]), tensor(F32, np.zeros((1, 6), np.float32)), batches([0]), tensor(F32, [[8, 8]])]
    refused("AXIS_ALIGNED_BBOX_TRANSFORM", bbox, [nnref.output(F32)], "BAD_SHAPE", "4 per class")
    refused("AXIS_ALIGNED_BBOX_TRANSFORM", with_input(bbox, 1, tensor(F32, np.zeros((1, 4), np.float32)))[:3] +
            [batches([0])], [nnref.output(F32)], "BAD_OPERAND_TYPE", "input 3")


def test_the_kernels_refuse_null_descriptors():
    null = ffi.NULL
    count = ffi.new("uint32_t *")
    nms = ffi.new("struct npu_nms_params *", {"max_detections": -1, "iou_threshold": 0.5})
    proposals = ffi.new("struct npu_proposal_params *", {"pre_nms": -1, "post_nms": -1})
    detection = ffi.new("struct npu_detection_params *", {"scale_y": 1, "scale_x": 1, "scale_h": 1, "scale_w": 1,
                                                          "max_detections": 1, "max_detections_per_class": 1,
                                                          "regular_nms": True})
    codes = [lib.npu_op_axis_aligned_bbox_transform(null, null, null, null, null),
             lib.npu_op_roi_align(null, null, null, 1.0, 1.0, 0, 0, False, null, 0, 1),
             lib.npu_op_roi_pooling(null, null, null, 1.0, 1.0, False, null, 0, 1),
             lib.npu_op_heatmap_max_keypoint(null, null, False, null, null),
             lib.npu_op_box_with_nms_limit(null, null, null, nms, null, null, null, null, count),
             lib.npu_op_generate_proposals(null, null, null, null, proposals, null, null, null, count),
             lib.npu_op_detection_postprocessing(null, null, null, detection, null, null, null, null)]
    assert codes == [lib.NPU_E_INVALID_ARGUMENT] * len(codes)
    # Real inputs and a count of 2, but one output missing: refused, not written through NULL.
    inputs = nms_call([[0.1, 0.9], [0.2, 0.8]])[:3]
    inputs[1] = tensor(F32, np.array([[0, 0, 1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 5, 5, 6, 6]], np.float32))
    ts = [descriptor(op) for op in inputs]
    outs = [Tensor(F32, np.zeros(2, np.float32)), Tensor(F32, np.zeros((2, 4), np.float32)),
            Tensor(I32, np.zeros(2, np.int32))]
    assert lib.npu_op_box_with_nms_limit(ts[0].ptr, ts[1].ptr, ts[2].ptr, nms, null, null, null, null, count) == 0
    assert count[0] == 2
    assert lib.npu_op_box_with_nms_limit(ts[0].ptr, ts[1].ptr, ts[2].ptr, nms, outs[0].ptr, outs[1].ptr, outs[2].ptr,
                                         null, count) == lib.NPU_E_INVALID_ARGUMENT
