"""nnref's detection operations against AOSP's 1.2 vectors and hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pytest

import nnref
from nnref import BadOperation, boolean, float32, int32, tensor
from nnref.examples import check, real

F32 = "TENSOR_FLOAT32"
Q8 = "TENSOR_QUANT8_ASYMM"
Q16 = "TENSOR_QUANT16_ASYMM"

# box_with_nms_limit.mod.py ---------------------------------------------------------------

NMS_SCORES = [0.90, 0.95, 0.75, 0.80, 0.70, 0.85, 0.60, 0.90, 0.95, 0.90, 0.65, 0.90, 0.80, 0.85, 0.80, 0.60, 0.60, 0.20,
              0.60, 0.80, 0.40, 0.90, 0.55, 0.60, 0.90, 0.75, 0.70, 0.80, 0.70, 0.85, 0.90, 0.95, 0.75, 0.80, 0.85, 0.80,
              0.60, 0.90, 0.95, 0.60, 0.60, 0.20, 0.50, 0.90, 0.80, 0.90, 0.75, 0.70, 0.90, 0.65, 0.90, 0.90, 0.55, 0.60,
              0.60, 0.80, 0.40]
_CORNERS = [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, 5), (7, 6), (8, 7), (9, 8), (2, 2), (1, 1), (5, 5), (3, 3), (6, 6),
            (0, 0), (9, 9), (4, 4), (8, 8), (7, 7)]
NMS_ROIS = []
for a, b in _CORNERS:
    size = 1 if a == 0 and b == 0 else 9
    NMS_ROIS += [a, a, a + size, a + size] + [b, b, b + size + 1, b + size + 1] * 2


def nms_inputs(batches, limit):
    return [real([19, 3], NMS_SCORES), real([19, 12], NMS_ROIS), tensor("TENSOR_INT32", batches),
            float32(0.3), int32(limit), int32(0), float32(0.4), float32(1.0), float32(0.3)]


NMS_1 = [real([12], [0.95, 0.85, 0.75, 0.95, 0.7, 0.95, 0.9, 0.85, 0.75, 0.95, 0.8, 0.7]),
         real([12, 4], [0, 0, 10, 10, 4, 4, 14, 14, 8, 8, 18, 18, 2, 2, 12, 12, 8, 8, 18, 18, 1, 1, 11, 11, 0, 0, 2, 2,
                        5, 5, 15, 15, 9, 9, 19, 19, 3, 3, 13, 13, 0, 0, 2, 2, 9, 9, 19, 19]),
         tensor("TENSOR_INT32", [1, 1, 1, 2, 2, 1, 1, 1, 1, 2, 2, 2]),
         tensor("TENSOR_INT32", [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1])]
NMS_QUANT = {("in", 0): (Q8, 0.01, 0), ("in", 1): (Q16, 0.125, 0), ("out", 0): (Q8, 0.01, 0), ("out", 1): (Q16, 0.125, 0)}


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16"])
def test_box_with_nms_limit(variant):
    assert NMS_ROIS[:12] == [1, 1, 10, 10, 0, 0, 10, 10, 0, 0, 10, 10]  # the vector's first row, rebuilt
    check("BOX_WITH_NMS_LIMIT", nms_inputs([0] * 9 + [1] * 10, -1), NMS_1, variant)


def test_box_with_nms_limit_quant8_and_max_detections():
    check("BOX_WITH_NMS_LIMIT", nms_inputs([0] * 9 + [1] * 10, -1), NMS_1, quant=NMS_QUANT)
    out = nnref.evaluate("BOX_WITH_NMS_LIMIT", nnref.examples.realize(nms_inputs([1] * 9 + [3] * 10, 5), [])[0])
    np.testing.assert_allclose(out[0].value, [0.95, 0.85, 0.75, 0.95, 0.7, 0.95, 0.9, 0.85, 0.95, 0.8])
    assert out[2].value.tolist() == [1, 1, 1, 2, 2, 1, 1, 1, 2, 2]
    assert out[3].value.tolist() == [1, 1, 1, 1, 1, 3, 3, 3, 3, 3]


def test_box_with_nms_limit_can_select_nothing():
    scores = tensor(F32, [[0.9, 0.1, 0.2], [0.8, 0.15, 0.25]])
    rois = tensor(F32, np.tile([0, 0, 10, 10], (2, 3)))
    out = nnref.evaluate("BOX_WITH_NMS_LIMIT", [scores, rois, tensor("TENSOR_INT32", [0, 0]), float32(0.3), int32(-1),
                                                int32(0), float32(0.4), float32(1.0), float32(0.3)])
    assert [o.shape for o in out] == [(0,), (0, 4), (0,), (0,)]


def test_soft_nms_decays_overlapping_scores():
    # Two identical boxes of one class: linear soft NMS keeps the second with score * (1 - IoU) = 0.
    scores = tensor(F32, [[0, 0.9], [0, 0.8], [0, 0.7]])
    rois = tensor(F32, [[0, 0, 0, 0, 0, 0, 10, 10], [0, 0, 0, 0, 0, 0, 10, 10], [0, 0, 0, 0, 0, 0, 10, 5]])
    args = [tensor("TENSOR_INT32", [0, 0, 0]), float32(0.1), int32(-1)]
    linear = nnref.evaluate("BOX_WITH_NMS_LIMIT", [scores, rois, *args, int32(1), float32(0.3), float32(1.0), float32(0.0)])
    # The second box (IoU 1) decays to 0, the third (IoU 0.5) to 0.7 * (1 - 0.5); none drop below 0.
    np.testing.assert_allclose(linear[0].value, [0.9, 0.35, 0.0])
    gaussian = nnref.evaluate("BOX_WITH_NMS_LIMIT", [scores, rois, *args, int32(2), float32(0.3), float32(0.5),
                                                     float32(0.1)])
    # exp(-IoU^2 / 0.5): the third keeps 0.7 * e^-0.5; the second falls to 0.8 * e^-2 * e^-0.5 < 0.1.
    np.testing.assert_allclose(gaussian[0].value, [0.9, 0.7 * np.exp(-0.5)])
    with pytest.raises(BadOperation, match="NMS kernel 3"):
        nnref.evaluate("BOX_WITH_NMS_LIMIT", [scores, rois, *args, int32(3), float32(0.3), float32(1.0), float32(0.0)])


# ROI_ALIGN and ROI_POOLING (roi_align.mod.py, hand-checked pooling) ---------------------------

ALIGN_IN = real([1, 4, 4, 1], [-10, -1, 4, -5, -8, -2, 9, 1, 7, -2, 3, -7, -2, 10, -3, 5])
ALIGN_ROIS = real([4, 4], [2, 2, 4, 4, 0, 0, 8, 8, 2, 0, 4, 8, 0, 2, 8, 4])
ALIGN_OUT = real([4, 2, 2, 1], [0.375, 5.125, -0.375, 2.875, -0.5, -0.3125, 3.1875, 1.125,
                                0.25, 4.25, 4.875, 0.625, -0.1875, 1.125, 0.9375, -2.625])


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16", "nchw"])
def test_roi_align(variant):
    inputs = [ALIGN_IN, ALIGN_ROIS, tensor("TENSOR_INT32", [0, 0, 0, 0]), int32(2), int32(2), float32(2.0), float32(2.0),
              int32(4), int32(4), boolean(False)]
    check("ROI_ALIGN", inputs, [ALIGN_OUT], variant, layout=9)


def test_roi_align_quant8():
    inputs = [ALIGN_IN, ALIGN_ROIS, tensor("TENSOR_INT32", [0, 0, 0, 0]), int32(2), int32(2), float32(2.0), float32(2.0),
              int32(4), int32(4), boolean(False)]
    check("ROI_ALIGN", inputs, [ALIGN_OUT], quant={("in", 0): (Q8, 0.25, 128), ("in", 1): (Q16, 0.125, 0),
                                                   ("out", 0): (Q8, 0.0625, 128)})


def test_roi_pooling_takes_the_max_of_each_bin():
    x = tensor(F32, np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1))
    rois = tensor(F32, [[0, 0, 3, 3], [2, 2, 3, 3]])
    out = nnref.evaluate("ROI_POOLING", [x, rois, tensor("TENSOR_INT32", [0, 0]), int32(2), int32(2), float32(1.0),
                                         float32(1.0), boolean(False)])[0]
    # The first roi covers the whole 4x4 in 2x2 bins; the second is the bottom-right 2x2.
    assert out.value[..., 0].tolist() == [[[5, 7], [13, 15]], [[10, 11], [14, 15]]]
    with pytest.raises(BadOperation, match="x2 < x1"):
        nnref.evaluate("ROI_POOLING", [x, tensor(F32, [[3, 0, 1, 3]]), tensor("TENSOR_INT32", [0]), int32(2), int32(2),
                                       float32(1.0), float32(1.0), boolean(False)])


# Box transforms and proposals ---------------------------------------------------------------


def test_axis_aligned_bbox_transform():
    rois = tensor(F32, [[100, 150, 400, 430], [120, 60, 122, 61]])
    deltas = tensor(F32, [[0.2, 0.1, 0.0, np.log(2.0)], [0, 0, 0, 0]])
    out = nnref.evaluate("AXIS_ALIGNED_BBOX_TRANSFORM", [rois, deltas, tensor("TENSOR_INT32", [0, 0]),
                                                         tensor(F32, [[512, 512]])])[0]
    # Centre (250, 290) moves by (0.2 * 300, 0.1 * 280) to (310, 318); the height doubles to
    # 560; y2 = 598 is clipped to the image's 512.
    np.testing.assert_allclose(out.value, [[160, 38, 460, 512], [120, 60, 122, 61]], rtol=1e-6)


def test_generate_proposals_transforms_filters_and_suppresses():
    scores = tensor(F32, np.array([0.9, 0.8, 0.7, 0.1], np.float32).reshape(1, 2, 2, 1))
    deltas = tensor(F32, np.zeros((1, 2, 2, 4), np.float32))
    anchors = tensor(F32, [[0, 0, 10, 10]])
    out_scores, boxes, batches = nnref.evaluate("GENERATE_PROPOSALS", [
        scores, deltas, anchors, tensor(F32, [[32, 32]]), float32(8.0), float32(8.0), int32(-1), int32(-1),
        float32(0.3), float32(1.0), boolean(False)])
    # Anchors shifted by the 8-pixel stride overlap by IoU 2/18 < 0.3: all four survive, best first.
    np.testing.assert_allclose(out_scores.value, [0.9, 0.8, 0.7, 0.1])
    np.testing.assert_allclose(boxes.value, [[0, 0, 10, 10], [8, 0, 18, 10], [0, 8, 10, 18], [8, 8, 18, 18]])
    assert batches.value.tolist() == [0, 0, 0, 0]
    strict = nnref.evaluate("GENERATE_PROPOSALS", [scores, deltas, anchors, tensor(F32, [[32, 32]]), float32(2.0),
                                                   float32(2.0), int32(2), int32(-1), float32(0.3), float32(1.0),
                                                   boolean(False)])
    np.testing.assert_allclose(strict[0].value, [0.9])  # stride 2: the top two overlap; pre-NMS keeps two


def test_detection_postprocessing_fast_and_regular_nms():
    scores = tensor(F32, [[[0, 0.9, 0.8], [0, 0.75, 0.72], [0, 0.6, 0.5], [0, 0.93, 0.95]]])
    anchors = tensor(F32, [[0.5, 0.5, 1, 1], [0.5, 0.5, 1, 1], [0.5, 2.5, 1, 1], [1.5, 1.5, 1, 1]])
    deltas = tensor(F32, np.zeros((1, 4, 4), np.float32))
    common = [float32(10), float32(10), float32(5), float32(5)]
    fast = nnref.evaluate("DETECTION_POSTPROCESSING", [scores, deltas, anchors, *common, boolean(False), int32(3), int32(1),
                                                       int32(1), float32(0.0), float32(0.5), boolean(False)])
    np.testing.assert_allclose(fast[0].value, [[0.95, 0.9, 0.6]])
    np.testing.assert_allclose(fast[1].value[0, 0], [1, 1, 2, 2])  # (y1, x1, y2, x2)
    assert fast[2].value.tolist() == [[1, 0, 0]] and fast[3].value.tolist() == [3]
    regular = nnref.evaluate("DETECTION_POSTPROCESSING", [scores, deltas, anchors, *common, boolean(True), int32(3),
                                                          int32(1), int32(2), float32(0.0), float32(0.5), boolean(True)])
    np.testing.assert_allclose(regular[0].value, [[0.95, 0.93, 0.9]])
    assert regular[2].value.tolist() == [[2, 1, 1]] and regular[3].value.tolist() == [3]


def test_heatmap_max_keypoint_refines_a_quadratic_peak():
    # A paraboloid peaking at (x, y) = (2.3, 1.6) on a 5x5 grid: the refinement finds it exactly.
    yy, xx = np.mgrid[0:5, 0:5]
    heat = (10 - (xx - 2.3) ** 2 - (yy - 1.6) ** 2).astype(np.float32).reshape(1, 5, 5, 1)
    scores, points = nnref.evaluate("HEATMAP_MAX_KEYPOINT", [tensor(F32, heat), tensor(F32, [[0, 0, 50, 50]]),
                                                             boolean(False)])
    np.testing.assert_allclose(scores.value, [[10]], rtol=1e-5)
    np.testing.assert_allclose(points.value, [[[(2.3 + 0.5) * 10, (1.6 + 0.5) * 10]]], rtol=1e-5)
    nchw = nnref.evaluate("HEATMAP_MAX_KEYPOINT", [tensor(F32, heat.transpose(0, 3, 1, 2)),
                                                   tensor(F32, [[0, 0, 50, 50]]), boolean(True)])
    np.testing.assert_allclose(nchw[1].value, points.value)


# detection_postprocess.mod.py --------------------------------------------------------------

DP_SCORES = real([1, 6, 3], [0, .9, .8, 0, .75, .72, 0, .6, .5, 0, .93, .95, 0, .5, .4, 0, .3, .2])
DP_ANCHORS = real([6, 4], [0.5, 0.5, 1, 1] * 3 + [0.5, 10.5, 1, 1] * 2 + [0.5, 100.5, 1, 1])
_DELTA_ROWS = [[0, 0, 0, 0], [0, 1, 0, 0], [0, -1, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]]


def postprocess(regular, background_in_label, extra_encoding=False):
    rows = [r + [1, 2, 3] for r in _DELTA_ROWS] if extra_encoding else _DELTA_ROWS
    deltas = real([1, 6, len(rows[0])], rows)
    return [DP_SCORES, deltas, DP_ANCHORS, float32(10), float32(10), float32(5), float32(5), boolean(regular),
            int32(3), int32(1), int32(1), float32(0.0), float32(0.5), boolean(background_in_label)]


def detections(scores, boxes, classes, count):
    return [real([1, 3], scores), real([1, 3, 4], boxes), tensor("TENSOR_INT32", [classes]),
            tensor("TENSOR_INT32", [count])]


FAST_BOXES = [0, 10, 1, 11, 0, 0, 1, 1, 0, 100, 1, 101]


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16"])
def test_detection_postprocessing_vectors(variant):
    check("DETECTION_POSTPROCESSING", postprocess(True, False),
          detections([0.95, 0.93, 0.0], [0, 10, 1, 11, 0, 10, 1, 11, 0, 0, 0, 0], [1, 0, 0], 2), variant)
    check("DETECTION_POSTPROCESSING", postprocess(False, False),
          detections([0.95, 0.9, 0.3], FAST_BOXES, [1, 0, 0], 3), variant)
    check("DETECTION_POSTPROCESSING", postprocess(False, False, extra_encoding=True),
          detections([0.95, 0.9, 0.3], FAST_BOXES, [1, 0, 0], 3), variant)
    check("DETECTION_POSTPROCESSING", postprocess(False, True, extra_encoding=True),
          detections([0.95, 0.9, 0.3], FAST_BOXES, [2, 1, 1], 3), variant)


# heatmap_max_keypoint.mod.py -----------------------------------------------------------------

_HEAT = [-10, -1, 4, -5, -8, -2, 9, 1, 7, -2, 3, -7, -2, 2, -3, 5]
HEAT_1 = (_HEAT + _HEAT[:13] + [10, -3, 5] + _HEAT[:6] + [4] + _HEAT[7:] + _HEAT[:3] + [10] + _HEAT[4:6] + [4]
          + _HEAT[7:] + [-10, -56] + _HEAT[2:])  # batches: plain, mirrored bottom, left, top right, clipped delta
HEAT_BOXES = [5, 2, 10, 20, 1, 7, 30, 10, 8, 3, 15, 13, 6, 5, 19, 12, 5, 2, 10, 20]
HEAT_SCORES = [9.071493, 10.00500, 7.187500, 10.00000, 10.689667]
HEAT_POINTS = [8.224462, 8.537316, 11.73000, 9.625000, 8.875000, 9.562500, 17.37500, 5.875000, 9.569672, 2.000000]
SINGULAR = [-10, -57.827329175] + _HEAT[2:]  # the 3x3 grid's Hessian is singular: no refinement


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16", "nchw"])
def test_heatmap_max_keypoint_vectors(variant):
    assert len(HEAT_1) == 80
    check("HEATMAP_MAX_KEYPOINT", [real([5, 4, 4, 1], HEAT_1), real([5, 4], HEAT_BOXES), boolean(False)],
          [real([5, 1], HEAT_SCORES), real([5, 1, 2], HEAT_POINTS)], variant, layout=2, data=[("in", 0)])


@pytest.mark.parametrize("variant", ["float32", "float16"])
def test_heatmap_max_keypoint_singular_hessian_keeps_the_grid_maximum(variant):
    check("HEATMAP_MAX_KEYPOINT", [real([1, 4, 4, 1], SINGULAR), real([1, 4], [5, 2, 10, 20]), boolean(False)],
          [real([1, 1], [9.0]), real([1, 1, 2], [8.125, 8.75])], variant)


def test_heatmap_max_keypoint_quant8():
    check("HEATMAP_MAX_KEYPOINT", [real([5, 4, 4, 1], HEAT_1), real([5, 4], HEAT_BOXES), boolean(False)],
          [real([5, 1], HEAT_SCORES), real([5, 1, 2], HEAT_POINTS)],
          quant={("in", 0): (Q8, 0.5, 128), ("in", 1): (Q16, 0.125, 0), ("out", 0): (Q8, 0.1, 10),
                 ("out", 1): (Q16, 0.125, 0)})


# generate_proposals.mod.py, test 1 (its batch output is now each roi's batch index) ---------

GP_ROIS = [4.3785973, 2.7571943, 6.8214025, 7.642805, 1.3512788, 0.18965816, 4.648721, 4.610342,
           3.1903253, 1.2951627, 6.8096747, 3.1048374, 1.9812691, 3.1571944, 3.6187308, 8.042806]


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16", "nchw"])
def test_generate_proposals_vector(variant):
    inputs = [real([1, 2, 2, 2], [0.8, 0.9, 0.85, 0.85, 0.75, 0.8, 0.9, 0.95]),
              real([1, 2, 2, 8], [0.5, 0.1, 0.1, 0.1, 0.5, 0.1, 0.5, 0.1, -0.25, 0.1, -0.1, -0.1, -0.25, 0.1, 0.2, 0.1,
                                  0.4, -0.1, -0.2, 0.2, 0.4, -0.1, -0.2, 0.2, -0.2, -0.2, 0.2, 0.2, -0.2, -0.2, 0.2, 0.2]),
              real([2, 4], [0, 1, 4, 3, 1, 0, 3, 4]), real([1, 2], [32, 32]), float32(4.0), float32(4.0), int32(-1),
              int32(-1), float32(0.3), float32(1.0), boolean(False)]
    outputs = [real([4], [0.95, 0.9, 0.85, 0.8]), real([4, 4], GP_ROIS), tensor("TENSOR_INT32", [0, 0, 0, 0])]
    check("GENERATE_PROPOSALS", inputs, outputs, variant, layout=10, data=[("in", 0), ("in", 1)])


# roi_pooling.mod.py and axis_aligned_bbox_transform.mod.py ------------------------------------

POOL_IN = [-10, -1, 4, -5, -8, -2, 9, 1, 7, -2, 3, -7, -2, 10, -3, 5]
POOL_QUANT = {("in", 0): (Q8, 0.25, 128), ("in", 1): (Q16, 0.125, 0), ("out", 0): (Q8, 0.25, 128)}


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16", "nchw", "quant8"])
def test_roi_pooling_vectors(variant):
    quant = POOL_QUANT if variant == "quant8" else None
    variant = "float32" if variant == "quant8" else variant
    check("ROI_POOLING", [real([1, 4, 4, 1], POOL_IN), real([4, 4], [2, 2, 4, 4, 0, 0, 6, 6, 2, 0, 4, 6, 0, 2, 6, 4]),
                          tensor("TENSOR_INT32", [0, 0, 0, 0]), int32(2), int32(2), float32(2.0), float32(2.0),
                          boolean(False)],
          [real([4, 2, 2, 1], [-2, 9, -2, 3, -1, 9, 10, 5, -1, 9, 10, 3, -2, 9, 7, 3])], variant, quant, 7)
    # Batch 2 of four, a height stride of 2 and a width stride of 1; a zero-sized roi takes one pixel.
    check("ROI_POOLING", [real([4, 4, 4, 1], [0] * 32 + POOL_IN + [0] * 16),
                          real([5, 4], [1, 2, 2, 4, 0, 0, 3, 6, 1, 0, 2, 6, 0, 2, 3, 4, 0, 0, 0, 0]),
                          tensor("TENSOR_INT32", [2] * 5), int32(2), int32(2), float32(2.0), float32(1.0), boolean(False)],
          [real([5, 2, 2, 1], [-2, 9, -2, 3, -1, 9, 10, 5, -1, 9, 10, 3, -2, 9, 7, 3, -10, -10, -10, -10])],
          variant, quant, 7)


@pytest.mark.parametrize("variant", ["float32", "relaxed", "float16"])
def test_axis_aligned_bbox_transform_vector(variant):
    # axis_aligned_bbox_transform's first roi (the one its image scale of 1 leaves as 1.2 has it).
    deltas = real([1, 8], [0.2, 0.2, 0.1, 0.1, 0.3, -0.1, -0.2, 0.1])
    expected = real([1, 8], [144.224350, 191.276062, 475.775635, 500.723938, 217.190384, 107.276062, 462.809631,
                             416.723938])
    check("AXIS_ALIGNED_BBOX_TRANSFORM", [real([1, 4], [100, 150, 400, 430]), deltas, tensor("TENSOR_INT32", [0]),
                                          real([1, 2], [512, 512])], [expected], variant)
