"""A plan keeps a convolution's packed filter between runs (npu/bind.h's kept slot).

nnapi-reference's prepared model (``PreparedModel``) plans once and runs many times: the
first run of a CONV_2D packs its constant filter for the GEMM and leaves it with the plan,
later runs use it. What a user relies on: every run of a prepared model computes what a
fresh one-off run (``runModel``, a plan of its own, nothing kept) computes, bit for bit,
whatever the inputs, for float32 and float16 filters and for grouped convolutions.
"""

from __future__ import annotations

import numpy as np
import pytest

from framework.nn import FuseCode, Model, OperandType, OperationType
from framework.nn._cpu_kernels import PreparedModel, runModel


def conv_model(dtype, groups: int):
    kind = OperandType.TENSOR_FLOAT32 if dtype == np.float32 else OperandType.TENSOR_FLOAT16
    rng = np.random.default_rng(1)
    c, out, k = 6, 20, 3  # 20 output channels: a whole panel of 16 and an edge one
    m = Model()

    def const(array):
        i = m.addOperand(kind, array.shape)
        m.setOperandValue(i, array.astype(dtype))
        return i

    def i32(v):
        i = m.addOperand(OperandType.INT32)
        m.setOperandValue(i, v)
        return i

    x = m.addOperand(kind, [1, 9, 11, c])
    f = const(rng.standard_normal((out, k, k, c // groups)))
    b = const(rng.standard_normal(out))
    y = m.addOperand(kind, [1, 9, 11, out])
    pads = [i32(v) for v in (1, 1, 1, 1, 1, 1)]  # left right top bottom, strides
    if groups == 1:
        m.addOperation(OperationType.CONV_2D, [x, f, b, *pads, i32(FuseCode.RELU6)], [y])
    else:
        nhwc = m.addOperand(OperandType.BOOL)
        m.setOperandValue(nhwc, False)
        m.addOperation(OperationType.GROUPED_CONV_2D, [x, f, b, *pads, i32(groups), i32(FuseCode.RELU6), nhwc], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    return m.to_hal()


@pytest.mark.parametrize("dtype, groups", [(np.float32, 1), (np.float16, 1), (np.float32, 2)])
def test_every_run_of_a_prepared_convolution_computes_what_a_fresh_plan_does(dtype, groups):
    hal = conv_model(dtype, groups)
    prepared = PreparedModel(hal)
    rng = np.random.default_rng(2)
    for _ in range(3):  # the first run packs and keeps the filter, the later ones reuse it
        x = (rng.standard_normal((1, 9, 11, 6)) * 4).astype(dtype)
        kept, fresh = np.empty((1, 9, 11, 20), dtype), np.empty((1, 9, 11, 20), dtype)
        prepared.run([x], [kept])
        runModel(hal, [x], [fresh])
        assert np.array_equal(kept, fresh)
        assert 0 < np.count_nonzero(kept) < kept.size  # RELU6 clamps some: the run computed
