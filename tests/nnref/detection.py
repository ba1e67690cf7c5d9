"""Detection operations: box transforms, non-maximum suppression, proposals, post-processing,
ROI align/pooling and heatmap keypoints.

Boxes are (x1, y1, x2, y2) except in DETECTION_POSTPROCESSING, whose anchors are
(y, x, h, w) centres and whose boxes come out (y1, x1, y2, x2), as types.hal has them.
Quantized boxes are TENSOR_QUANT16_ASYMM with scale 0.125; everything computes on real
values and quantizes at the end, as Android's reference does. Where the reference sorts
scores with an unstable sort, ties here keep their input order.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .core import F, F_Q8, Call, Operand, from_nhwc, round_away, to_nhwc

BOX = Operand("TENSOR_QUANT16_ASYMM", None, 0.125, 0)  # the fixed parameters of quantized boxes


def _box_input(call: Call, i: int, scores: Operand) -> Operand:
    if scores.type in F:
        return call.same_type(i, scores)
    box = call.tensor(i, "TENSOR_QUANT16_ASYMM")
    if (box.scale, box.zero_point) != (0.125, 0):
        raise call.fail(f"input {i}'s quantized boxes have scale 0.125 and zero point 0")
    return box


def _box_result(call: Call, k: int, scores: Operand, boxes: np.ndarray) -> Operand:
    like = BOX if scores.type == "TENSOR_QUANT8_ASYMM" else scores
    return call.real_result(k, boxes, Operand(like.type, None, like.scale, like.zero_point))


def _check_boxes(call: Call, boxes: np.ndarray) -> None:
    if (boxes[..., 2] < boxes[..., 0]).any() or (boxes[..., 3] < boxes[..., 1]).any():
        raise call.fail("a box has x2 < x1 or y2 < y1")


def _transform(boxes: np.ndarray, deltas: np.ndarray, height: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Apply (dx, dy, dw, dh) deltas to (x1, y1, x2, y2) boxes, clipped to the image."""
    w, h = boxes[..., 2] - boxes[..., 0], boxes[..., 3] - boxes[..., 1]
    cx, cy = boxes[..., 0] + w / 2, boxes[..., 1] + h / 2
    ncx, ncy = cx + deltas[..., 0] * w, cy + deltas[..., 1] * h
    nw, nh = np.exp(deltas[..., 2]) * w, np.exp(deltas[..., 3]) * h
    return np.stack([np.clip(ncx - nw / 2, 0, width), np.clip(ncy - nh / 2, 0, height),
                     np.clip(ncx + nw / 2, 0, width), np.clip(ncy + nh / 2, 0, height)], axis=-1)


def axis_aligned_bbox_transform(call: Call) -> list[Operand]:
    call.count(4)
    rois = call.tensor(0, "TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_QUANT16_ASYMM")
    scores_like = rois if rois.type in F else Operand("TENSOR_QUANT8_ASYMM", None, 1.0, 0)
    deltas = call.same_type(1, rois) if rois.type in F else call.tensor(1, "TENSOR_QUANT8_ASYMM")
    batches = call.tensor(2, "TENSOR_INT32").value
    info = _box_input(call, 3, scores_like).real()
    boxes = rois.real()
    if boxes.ndim != 2 or boxes.shape[1] != 4 or deltas.value.shape[1] % 4:  # type: ignore[union-attr]
        raise call.fail("rois are [n, 4] and deltas [n, classes * 4]")
    _check_boxes(call, boxes)
    if ((batches < 0) | (batches >= info.shape[0])).any():  # type: ignore[operator]
        raise call.fail("a batch index is outside the image info")
    classes = deltas.shape[1] // 4
    d = deltas.real().reshape(len(boxes), classes, 4)
    out = _transform(boxes[:, None, :], d, info[batches, 0][:, None], info[batches, 1][:, None])  # type: ignore[index]
    return [_box_result(call, 0, scores_like, out.reshape(len(boxes), classes * 4))]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    w = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    h = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = w * h
    union = area_a + area_b - inter
    return inter / union if union > 0 else 0.0


def _nms(candidates: list[int], scores: np.ndarray, box: Callable[[int], np.ndarray], limit: int,
         kernel: Callable[[float], float], drop_below: float) -> list[int]:
    """Greedy NMS: take the best remaining candidate, scale the others' scores by kernel(IoU),
    drop those below ``drop_below`` (scores is changed in place, as the reference does)."""
    remaining, kept = list(candidates), []
    while remaining and (limit < 0 or len(kept) < limit):
        best = max(remaining, key=lambda i: scores[i])
        remaining.remove(best)
        kept.append(best)
        survivors = []
        for i in remaining:
            scores[i] *= kernel(_iou(box(i), box(best)))
            if scores[i] >= drop_below:
                survivors.append(i)
        remaining = survivors
    return kept


def _hard(iou_threshold: float) -> Callable[[float], float]:
    return lambda iou: 1.0 if iou < iou_threshold else 0.0


def _hard_nms(candidates: list[int], scores: np.ndarray, box: Callable[[int], np.ndarray], limit: int,
              iou_threshold: float) -> list[int]:
    """Hard NMS: take the best remaining candidate, drop those overlapping it by iou_threshold or more."""
    remaining, kept = list(candidates), []
    while remaining and (limit < 0 or len(kept) < limit):
        best = max(remaining, key=lambda i: scores[i])
        remaining.remove(best)
        kept.append(best)
        remaining = [i for i in remaining if _iou(box(i), box(best)) < iou_threshold]
    return kept


def box_with_nms_limit(call: Call) -> list[Operand]:
    call.count(9)
    scores_op = call.tensor(0, *F_Q8)
    rois = _box_input(call, 1, scores_op)
    batches = call.tensor(2, "TENSOR_INT32").value
    threshold, limit, kernel_code = call.float(3), call.int(4), call.int(5)
    iou_threshold, sigma, nms_threshold = call.float(6), call.float(7), call.float(8)
    kernels = {0: _hard(iou_threshold),
               1: lambda iou: 1.0 if iou < iou_threshold else 1.0 - iou,
               2: lambda iou: math.exp(-iou * iou / sigma)}
    if kernel_code not in kernels:
        raise call.fail(f"NMS kernel {kernel_code} is not hard (0), linear (1) or gaussian (2)")
    scores = scores_op.real().copy()
    boxes = rois.real()
    n, classes = scores.shape
    if boxes.shape != (n, classes * 4) or batches.shape != (n,) or classes < 2:  # type: ignore[union-attr]
        raise call.fail("scores are [n, classes > 1], rois [n, classes * 4], batches [n]")
    _check_boxes(call, boxes.reshape(n, classes, 4))
    flat_boxes = boxes.reshape(n * classes, 4)
    flat_scores = scores.ravel()
    order: list[int] = []
    for batch in dict.fromkeys(batches.tolist()):  # type: ignore[union-attr]
        rows = [r for r in range(n) if batches[r] == batch]  # type: ignore[index]
        picked: list[int] = []
        for c in range(1, classes):  # class 0 is the background
            candidates = [r * classes + c for r in rows if flat_scores[r * classes + c] > threshold]
            picked += _nms(candidates, flat_scores, lambda i: flat_boxes[i], limit, kernels[kernel_code], nms_threshold)
        picked.sort(key=lambda i: -flat_scores[i])
        if limit >= 0:
            picked = picked[:limit]
        picked.sort(key=lambda i: (i % classes, -flat_scores[i]))
        order += picked
    index = np.asarray(order, np.int64)
    box_out = rois.value.reshape(n * classes, 4)[index]  # type: ignore[union-attr]
    return [call.real_result(0, flat_scores[index], scores_op),
            call.raw_result(1, box_out, BOX if scores_op.type == "TENSOR_QUANT8_ASYMM" else scores_op),
            call.raw_result(2, (index % classes).astype(np.int32), type="TENSOR_INT32"),
            call.raw_result(3, batches[index // classes].astype(np.int32), type="TENSOR_INT32")]  # type: ignore[index]


def generate_proposals(call: Call) -> list[Operand]:
    call.count(11)
    scores_op = call.tensor(0, *F_Q8)
    deltas_op = call.same_type(1, scores_op)
    anchors = (call.same_type(2, scores_op) if scores_op.type in F else call.tensor(2, "TENSOR_QUANT16_SYMM")).real()
    info = _box_input(call, 3, scores_op).real()
    h_stride, w_stride = call.float(4), call.float(5)
    pre_nms, post_nms = call.int(6), call.int(7)
    iou_threshold, min_size, nchw = call.float(8), call.float(9), call.bool(10)
    scores = to_nhwc(scores_op.real(), nchw)
    deltas = to_nhwc(deltas_op.real(), nchw)
    batches, height, width, anchor_count = scores.shape
    if anchors.shape != (anchor_count, 4) or deltas.shape != (batches, height, width, anchor_count * 4):
        raise call.fail("anchors are [anchors, 4] and deltas [batches, h, w, anchors * 4]")
    shift_x = np.arange(width)[None, :, None] * w_stride
    shift_y = np.arange(height)[:, None, None] * h_stride
    base = np.broadcast_to(anchors, (height, width, anchor_count, 4)).copy()
    base[..., 0] += shift_x
    base[..., 2] += shift_x
    base[..., 1] += shift_y
    base[..., 3] += shift_y
    base = base.reshape(-1, 4)
    out_scores, out_boxes, out_batches = [], [], []
    for b in range(batches):
        s = scores[b].ravel().copy()
        boxes = _transform(base, deltas[b].reshape(-1, 4), info[b, 0], info[b, 1])
        select = list(range(len(s)))
        if 0 < pre_nms < len(select):
            select = sorted(select, key=lambda i: -s[i])[:pre_nms]
        w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        cx, cy = boxes[:, 0] + w / 2, boxes[:, 1] + h / 2
        select = [i for i in select if w[i] > min_size and h[i] > min_size and cx[i] < info[b, 1] and cy[i] < info[b, 0]]
        kept = _hard_nms(select, s, lambda i: boxes[i], post_nms, iou_threshold)  # noqa: B023
        out_scores += [s[i] for i in kept]
        out_boxes += [boxes[i] for i in kept]
        out_batches += [b] * len(kept)
    return [call.real_result(0, np.asarray(out_scores), scores_op),
            _box_result(call, 1, scores_op, np.asarray(out_boxes).reshape(-1, 4)),
            call.raw_result(2, np.asarray(out_batches, np.int32), type="TENSOR_INT32")]


def detection_postprocessing(call: Call) -> list[Operand]:
    call.count(14)
    scores_op = call.tensor(0, *F)
    scores = scores_op.real()
    deltas = call.same_type(1, scores_op).real()
    anchors = call.same_type(2, scores_op).real()
    scale_y, scale_x, scale_h, scale_w = (call.float(i) for i in (3, 4, 5, 6))
    regular = call.bool(7)
    max_detections, max_classes, max_per_class = call.int(8), call.int(9), call.int(10)
    score_threshold, iou_threshold, background_in_label = call.float(11), call.float(12), call.bool(13)
    batches, anchor_count, classes = scores.shape
    if min(scale_y, scale_x, scale_h, scale_w) <= 0 or classes < 2 or max_detections < 1 or deltas.shape[2] < 4:
        raise call.fail("scales are positive, classes > 1, max detections > 0, box encodings >= 4")
    out_count = max_detections if regular else max_detections * max_classes
    out_scores = np.zeros((batches, out_count))
    out_boxes = np.zeros((batches, out_count, 4))
    out_classes = np.zeros((batches, out_count), np.int32)
    detections = np.zeros(batches, np.int32)
    label_shift = 0 if background_in_label else 1
    for b in range(batches):
        d = deltas[b]
        y = anchors[:, 0] + anchors[:, 2] * d[:, 0] / scale_y
        x = anchors[:, 1] + anchors[:, 3] * d[:, 1] / scale_x
        half_h = anchors[:, 2] * np.exp(d[:, 2] / scale_h) / 2
        half_w = anchors[:, 3] * np.exp(d[:, 3] / scale_w) / 2
        boxes = np.stack([y - half_h, x - half_w, y + half_h, x + half_w], axis=-1)
        s = scores[b].ravel().copy()
        if regular:
            picked: list[int] = []
            for c in range(1, classes):
                candidates = [a * classes + c for a in range(anchor_count) if s[a * classes + c] > score_threshold]
                picked += _hard_nms(candidates, s, lambda i: boxes[i // classes], max_per_class, iou_threshold)  # noqa: B023
            picked = sorted(picked, key=lambda i: -s[i])[:max_detections]
            for k, i in enumerate(picked):
                out_scores[b, k], out_boxes[b, k] = s[i], boxes[i // classes]
                out_classes[b, k] = i % classes - label_shift
            detections[b] = len(picked)
        else:
            per_anchor = scores[b][:, 1:]
            best = per_anchor.max(axis=1)
            candidates = [a for a in range(anchor_count) if best[a] > score_threshold]
            kept = _hard_nms(candidates, best, lambda i: boxes[i], max_detections, iou_threshold)  # noqa: B023
            take = min(classes - 1, max_classes)
            k = 0
            for a in kept:
                ranked = sorted(range(1, classes), key=lambda c: -scores[b][a, c])  # noqa: B023
                for c in ranked[:take]:
                    out_scores[b, k], out_boxes[b, k], out_classes[b, k] = scores[b][a, c], boxes[a], c - label_shift
                    k += 1
            detections[b] = len(kept) * take
    return [call.real_result(0, out_scores, scores_op), call.real_result(1, out_boxes, scores_op),
            call.raw_result(2, out_classes, type="TENSOR_INT32"), call.raw_result(3, detections, type="TENSOR_INT32")]


def _roi_reads(call: Call, layout_at: int) -> tuple[Operand, bool, np.ndarray, np.ndarray, np.ndarray]:
    x = call.tensor(0, *F_Q8)
    if x.value.ndim != 4:  # type: ignore[union-attr]
        raise call.fail("the input has rank 4")
    rois = _box_input(call, 1, x).real()
    batches = call.tensor(2, "TENSOR_INT32").value
    nchw = call.bool(layout_at)
    if rois.ndim != 2 or rois.shape[1] != 4 or batches.shape != (len(rois),):  # type: ignore[union-attr]
        raise call.fail("rois are [n, 4] with one batch index each")
    if ((batches < 0) | (batches >= x.shape[0])).any():  # type: ignore[operator]
        raise call.fail("a batch index is outside the input")
    _check_boxes(call, rois)
    if (rois < 0).any():
        raise call.fail("a roi is outside the input")
    return x, nchw, to_nhwc(x.real(), nchw), rois, batches  # type: ignore[return-value]


def _out_size(call: Call, at: int) -> tuple[int, int, float, float]:
    oh, ow, h_stride, w_stride = call.int(at), call.int(at + 1), call.float(at + 2), call.float(at + 3)
    if min(oh, ow) < 1 or min(h_stride, w_stride) <= 0:
        raise call.fail("the output size and the strides are positive")
    return oh, ow, h_stride, w_stride


def roi_align(call: Call) -> list[Operand]:
    call.count(10)
    x, nchw, v, rois, batches = _roi_reads(call, 9)
    oh, ow, h_stride, w_stride = _out_size(call, 3)
    h_ratio, w_ratio = call.int(7), call.int(8)
    _, height, width, depth = v.shape
    out = np.zeros((len(rois), oh, ow, depth))
    for r, (roi, b) in enumerate(zip(rois, batches, strict=True)):
        x1, y1, x2, y2 = roi[0] / w_stride, roi[1] / h_stride, roi[2] / w_stride, roi[3] / h_stride
        if x2 > width or y2 > height:
            raise call.fail("a roi is outside the input")
        w_step, h_step = max(x2 - x1, 1.0) / ow, max(y2 - y1, 1.0) / oh
        ws = w_ratio if w_ratio > 0 else math.ceil(w_step)
        hs = h_ratio if h_ratio > 0 else math.ceil(h_step)
        for i in range(oh):
            for j in range(ow):
                total = np.zeros(depth)
                for sy in range(hs):
                    for sx in range(ws):
                        yy = y1 + i * h_step + (sy + 0.5) * h_step / hs
                        xx = x1 + j * w_step + (sx + 0.5) * w_step / ws
                        total += _bilinear(v[b], yy, xx)
                out[r, i, j] = total / (hs * ws)
    return [call.real_result(0, from_nhwc(out, nchw), x)]


def _bilinear(image: np.ndarray, y: float, x: float) -> np.ndarray:
    height, width = image.shape[:2]
    y0, x0 = int(math.floor(y)), int(math.floor(x))
    dy, dx = y - y0, x - x0
    y1, x1 = y0 + 1, x0 + 1
    if x0 >= width - 1:
        x0 = x1 = width - 1
        dx = 0.0
    if y0 >= height - 1:
        y0 = y1 = height - 1
        dy = 0.0
    return ((1 - dx) * (1 - dy) * image[y0, x0] + dx * (1 - dy) * image[y0, x1]
            + (1 - dx) * dy * image[y1, x0] + dx * dy * image[y1, x1])


def roi_pooling(call: Call) -> list[Operand]:
    call.count(8)
    x, nchw, v, rois, batches = _roi_reads(call, 7)
    oh, ow, h_stride, w_stride = _out_size(call, 3)
    _, height, width, depth = v.shape
    out = np.zeros((len(rois), oh, ow, depth))  # an empty bin is a real zero (the zero point)
    for r, (roi, b) in enumerate(zip(rois, batches, strict=True)):
        x1, y1, x2, y2 = (int(c) for c in round_away(roi / np.array([w_stride, h_stride, w_stride, h_stride])))
        w_step, h_step = max(x2 - x1 + 1, 1) / ow, max(y2 - y1 + 1, 1) / oh
        for i in range(oh):
            for j in range(ow):
                hs, he = min(math.floor(h_step * i + y1), height), min(math.ceil(h_step * (i + 1) + y1), height)
                ws, we = min(math.floor(w_step * j + x1), width), min(math.ceil(w_step * (j + 1) + x1), width)
                if he > hs and we > ws:
                    out[r, i, j] = v[b, hs:he, ws:we].max(axis=(0, 1))
    return [call.real_result(0, from_nhwc(out, nchw), x)]


def heatmap_max_keypoint(call: Call) -> list[Operand]:
    call.count(3)
    heat_op = call.tensor(0, *F_Q8)
    boxes = _box_input(call, 1, heat_op).real()
    nchw = call.bool(2)
    heat = to_nhwc(heat_op.real(), nchw)
    n, size, size_w, keypoints = heat.shape
    if size != size_w or size < 2 or boxes.shape != (n, 4):
        raise call.fail("heatmaps are square, at least 2x2, with one box each")
    _check_boxes(call, boxes)
    tolerance = 1e-3 if heat_op.type == "TENSOR_FLOAT16" else 1e-5
    scores = np.zeros((n, keypoints))
    points = np.zeros((n, keypoints, 2))
    for i in range(n):
        for k in range(keypoints):
            flat = heat[i, :, :, k].ravel()
            best = int(np.argmax(flat))
            by, bx = divmod(best, size)
            grid = np.empty((3, 3))
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    yy, xx = by + dy, bx + dx
                    yy = 1 if yy < 0 else (size - 2 if yy >= size else yy)  # mirrored at the border
                    xx = 1 if xx < 0 else (size - 2 if xx >= size else xx)
                    grid[dy + 1, dx + 1] = heat[i, yy, xx, k]
            delta, score = _refine(grid, flat[best], tolerance)
            x1, y1, x2, y2 = boxes[i]
            points[i, k] = [(bx + delta[0] + 0.5) / size * (x2 - x1) + x1, (by + delta[1] + 0.5) / size * (y2 - y1) + y1]
            scores[i, k] = score
    return [call.real_result(0, scores, heat_op), _box_result(call, 1, heat_op, points)]


def _refine(grid: np.ndarray, score: float, tolerance: float) -> tuple[np.ndarray, float]:
    """The reference's quadratic (2nd-order Taylor) refinement of the maximum's position."""
    b = np.array([-(grid[1, 2] - grid[1, 0]) / 2, -(grid[2, 1] - grid[0, 1]) / 2])
    a00 = grid[1, 0] - 2 * grid[1, 1] + grid[1, 2]
    a01 = (grid[2, 2] - grid[2, 0] - grid[0, 2] + grid[0, 0]) / 4
    a11 = grid[0, 1] - 2 * grid[1, 1] + grid[2, 1]
    det = a00 * a11 - a01 * a01
    if abs(det) < tolerance + tolerance * a00 * a11:
        return np.zeros(2), score
    delta = np.array([(a11 * b[0] - a01 * b[1]) / det, (a00 * b[1] - a01 * b[0]) / det])
    if np.abs(delta).max() > 1.5:
        delta *= 1.5 / np.abs(delta).max()
    quad = (a00 * delta[0] + a01 * delta[1]) * delta[0] + (a01 * delta[0] + a11 * delta[1]) * delta[1]
    return delta, grid[1, 1] - b @ delta + quad / 2


OPERATIONS: dict[str, Callable[[Call], list[Operand]]] = {
    "AXIS_ALIGNED_BBOX_TRANSFORM": axis_aligned_bbox_transform,
    "BOX_WITH_NMS_LIMIT": box_with_nms_limit,
    "GENERATE_PROPOSALS": generate_proposals,
    "DETECTION_POSTPROCESSING": detection_postprocessing,
    "ROI_ALIGN": roi_align,
    "ROI_POOLING": roi_pooling,
    "HEATMAP_MAX_KEYPOINT": heatmap_max_keypoint,
}
