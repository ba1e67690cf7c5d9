"""Zero-sized batches, as AOSP's 1.2 "zero_sized" tests feed them (a BOX_WITH_NMS_LIMIT that
selects nothing, then ROI_ALIGN): every operation that allows them gives empty outputs of
the right shape, with no error and no warning."""

from __future__ import annotations

import numpy as np
import pytest

import nnref
from nnref import boolean, float32, int32, tensor

F32, Q8 = "TENSOR_FLOAT32", "TENSOR_QUANT8_ASYMM"


def empty(shape, type=F32):
    if type == Q8:
        return tensor(Q8, np.zeros(shape, np.uint8), scale=0.1, zero_point=128)
    return tensor(type, np.zeros(shape, np.int32 if type == "TENSOR_INT32" else np.float32))


def ones(shape):
    return tensor(F32, np.ones(shape, np.float32))


Z4, Q4 = empty((0, 2, 2, 1)), empty((0, 2, 2, 1), Q8)
WINDOW = [*map(int32, (0, 0, 0, 0, 1, 1, 2, 2, 0)), boolean(False)]
CASES = {
    "CONV_2D": ([Z4, ones((1, 1, 1, 1)), tensor(F32, [0.0]), *map(int32, (0, 0, 0, 0, 1, 1, 0)), boolean(False)],
                [(0, 2, 2, 1)]),
    "DEPTHWISE_CONV_2D": ([Z4, ones((1, 1, 1, 1)), tensor(F32, [0.0]), *map(int32, (0, 0, 0, 0, 1, 1, 1, 0)),
                          boolean(False)], [(0, 2, 2, 1)]),
    "GROUPED_CONV_2D": ([Z4, ones((1, 1, 1, 1)), tensor(F32, [0.0]), *map(int32, (0, 0, 0, 0, 1, 1, 1, 0)),
                        boolean(False)], [(0, 2, 2, 1)]),
    "TRANSPOSE_CONV_2D": ([Z4, ones((1, 1, 1, 1)), tensor(F32, [0.0]), *map(int32, (0, 0, 0, 0, 1, 1, 0)),
                          boolean(False)], [(0, 2, 2, 1)]),
    "AVERAGE_POOL_2D": ([Z4, *WINDOW], [(0, 1, 1, 1)]),
    "MAX_POOL_2D": ([Q4, *WINDOW], [(0, 1, 1, 1)]),
    "L2_POOL_2D": ([Z4, *WINDOW], [(0, 1, 1, 1)]),
    "FULLY_CONNECTED": ([empty((0, 2)), ones((3, 2)), tensor(F32, [0.0] * 3), int32(0)], [(0, 3)]),
    "SOFTMAX": ([Z4, float32(1.0)], [(0, 2, 2, 1)]),
    "LOGISTIC": ([Q4], [(0, 2, 2, 1)]),
    "L2_NORMALIZATION": ([Z4], [(0, 2, 2, 1)]),
    "INSTANCE_NORMALIZATION": ([Z4, float32(1), float32(0), float32(1e-5), boolean(False)], [(0, 2, 2, 1)]),
    "ADD": ([Z4, ones((1,)), int32(0)], [(0, 2, 2, 1)]),
    "RESIZE_BILINEAR": ([Z4, int32(3), int32(3)], [(0, 3, 3, 1)]),
    "RESIZE_NEAREST_NEIGHBOR": ([Q4, int32(3), int32(3), boolean(False)], [(0, 3, 3, 1)]),
    "PAD": ([Z4, tensor("TENSOR_INT32", [[0, 0], [1, 1], [1, 1], [0, 0]])], [(0, 4, 4, 1)]),
    "MEAN": ([Z4, tensor("TENSOR_INT32", [1, 2]), int32(1)], [(0, 1, 1, 1)]),
    "CHANNEL_SHUFFLE": ([Z4, int32(1), int32(-1)], [(0, 2, 2, 1)]),
    "DEPTH_TO_SPACE": ([empty((0, 1, 1, 4)), int32(2)], [(0, 2, 2, 1)]),
    "ROI_ALIGN": ([ones((1, 2, 2, 1)), empty((0, 4)), empty((0,), "TENSOR_INT32"), int32(2), int32(2), float32(1),
                   float32(1), int32(2), int32(2), boolean(False)], [(0, 2, 2, 1)]),
    "ROI_POOLING": ([ones((1, 2, 2, 1)), empty((0, 4)), empty((0,), "TENSOR_INT32"), int32(2), int32(2), float32(1),
                     float32(1), boolean(False)], [(0, 2, 2, 1)]),
    "BOX_WITH_NMS_LIMIT": ([empty((0, 2)), empty((0, 8)), empty((0,), "TENSOR_INT32"), float32(.3), int32(-1), int32(0),
                            float32(.4), float32(1), float32(.3)], [(0,), (0, 4), (0,), (0,)]),
    "AXIS_ALIGNED_BBOX_TRANSFORM": ([empty((0, 4)), empty((0, 4)), empty((0,), "TENSOR_INT32"), tensor(F32, [[10, 10.0]])],
                                    [(0, 4)]),
    "HEATMAP_MAX_KEYPOINT": ([empty((0, 2, 2, 1)), empty((0, 4)), boolean(False)], [(0, 1), (0, 1, 2)]),
}


@pytest.mark.parametrize("operation", CASES)
def test_zero_sized_batches(operation):
    inputs, shapes = CASES[operation]
    assert [o.shape for o in nnref.evaluate(operation, inputs)] == shapes
