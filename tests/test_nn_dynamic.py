"""Shapes known only at execution, through the NDK (issue 14, Android 10's dynamic shapes).

A model input declared with unspecified dimensions takes them at ``setInput`` (checked
against the model's), an output whose shape only the data decides (BOX_WITH_NMS_LIMIT's
count) reports it, and a buffer too small for it is OUTPUT_INSUFFICIENT_SIZE with the
needed dimensions, after which a new execution with a larger buffer runs (an execution
runs once, as in Android 10).
In one process (servicemanager, HAL and app over the in-memory binder, virtual clock),
and once through the HAL as its own OS process.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.run import open_nn
from framework.nn import (
    CPU_DEVICE_NAME,
    BadDataError,
    Model,
    OperandType,
    OperationType,
    OutputInsufficientSizeError,
)

F32, I32 = OperandType.TENSOR_FLOAT32, OperandType.TENSOR_INT32
BIAS = np.array([1, 2, 3], np.float32)


def add_model() -> Model:
    """y = x + [1, 2, 3], x of shape [?, 3]: the rows are the execution's."""
    m = Model()
    x = m.addOperand(F32, (0, 3))
    b = m.addOperand(F32, (3,))
    m.setOperandValue(b, BIAS)
    fuse = m.addOperand(OperandType.INT32)
    m.setOperandValue(fuse, np.int32(0))
    y = m.addOperand(F32, (0, 3))
    m.addOperation(OperationType.ADD, [x, b, fuse], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    return m


def nms_model(abs_first: bool = False) -> Model:
    """BOX_WITH_NMS_LIMIT over N boxes of 2 classes: how many it keeps depends on the
    scores; with ``abs_first`` the scores are ABS of the input, computed in the run."""
    m = Model()
    scores = m.addOperand(F32, (0, 2))
    rois = m.addOperand(F32, (0, 8))
    batches = m.addOperand(I32, (0,))
    selected = scores
    if abs_first:
        selected = m.addOperand(F32, (0, 2))
        m.addOperation(OperationType.ABS, [scores], [selected])
    params = []
    for type_, value in ((OperandType.FLOAT32, 0.3), (OperandType.INT32, -1), (OperandType.INT32, 0),
                         (OperandType.FLOAT32, 0.4), (OperandType.FLOAT32, 1.0), (OperandType.FLOAT32, 0.3)):
        p = m.addOperand(type_)
        m.setOperandValue(p, np.float32(value) if type_ == OperandType.FLOAT32 else np.int32(value))
        params.append(p)
    outs = [m.addOperand(F32, (0,)), m.addOperand(F32, (0, 4)), m.addOperand(I32, (0,)), m.addOperand(I32, (0,))]
    m.addOperation(OperationType.BOX_WITH_NMS_LIMIT, [selected, rois, batches, *params], outs)
    m.identifyInputsAndOutputs([scores, rois, batches], outs)
    m.finish()
    return m


# Three boxes apart, class 1 scores 0.9, 0.2, 0.5 (negated: ABS makes them so): two pass 0.3.
SCORES = np.array([[0, 0.9], [0, 0.2], [0, 0.5]], np.float32)
ROIS = np.array([[0, 0, 1, 1] * 2, [2, 2, 3, 3] * 2, [4, 4, 5, 5] * 2], np.float32)
BATCHES = np.zeros(3, np.int32)


async def first_claiming(nn, devices, model):
    for device in devices:
        if all(await nn.getSupportedOperationsForDevices(model, [device])):
            return device
    raise AssertionError(f"no device of {[d.name for d in devices]} claims the model")


async def test_input_dimensions_given_at_set_input_run_on_every_device_that_claims(autojump_clock):
    model = add_model()
    async with open_nn() as nn:
        ran = []
        for device in nn.devices:
            if not all(await nn.getSupportedOperationsForDevices(model, [device])):
                continue
            async with nn.createCompilationForDevices(model, [device]) as compilation:
                await compilation.finish()
                for rows in (2, 5, 2):  # the second 2 is served by the plan kept for [2, 3]
                    execution = compilation.createExecution()
                    x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
                    execution.setInput(0, x.tobytes(), dimensions=[rows, 3])
                    (y,) = await execution.compute_async()
                    assert y.shape == (rows, 3)
                    np.testing.assert_array_equal(y, x + BIAS)
                    assert execution.getOutputOperandDimensions(0) == [rows, 3]
            ran.append(device.name)
        assert CPU_DEVICE_NAME in ran and len(ran) > 1, ran  # the CPU and at least one driver device


async def test_given_dimensions_that_contradict_the_model_are_bad_data(autojump_clock):
    async with open_nn() as nn:
        async with nn.createCompilationForDevices(add_model(), [nn.getDeviceByName(CPU_DEVICE_NAME)]) as compilation:
            await compilation.finish()
            execution = compilation.createExecution()
            x = np.zeros((2, 3), np.float32)
            for dims, why in (([2, 4], "dimension 1 is 3"), ([6], "rank 2"), ([0, 3], "1..2"),
                              ([2**32, 3], "1..2"), ([2, 3, 1], "rank 2"), ("23", "sequence")):
                with pytest.raises(BadDataError, match=why):
                    execution.setInput(0, x, dimensions=dims)
            with pytest.raises(BadDataError, match="unspecified dimensions"):
                execution.setInput(0, x.tobytes())  # bytes do not say their shape
            with pytest.raises(BadDataError, match="needs 24 bytes"):
                execution.setInput(0, x.tobytes()[:20], dimensions=[2, 3])
            with pytest.raises(BadDataError, match="rank 2"):
                execution.setInput(0, np.zeros(6, np.float32))  # an array of the wrong rank
            with pytest.raises(BadDataError, match="not set"):
                await execution.compute_async()  # nothing refused was kept
            execution.setInput(0, x)  # an array carries its dimensions
            (y,) = await execution.compute_async()
            assert y.shape == (2, 3)


@pytest.mark.parametrize("abs_first", [False, True], ids=["from-inputs", "after-a-computed-temporary"])
async def test_a_data_dependent_output_reports_its_size_and_a_larger_buffer_runs(autojump_clock, abs_first):
    async with open_nn() as nn:
        model = nms_model(abs_first)
        async with nn.createCompilationForDevices(model, [nn.getDeviceByName(CPU_DEVICE_NAME)]) as compilation:
            await compilation.finish()
            def execution_of(scores, rois, batches):
                execution = compilation.createExecution()
                for i, x in enumerate((scores, rois, batches)):
                    execution.setInput(i, x)
                return execution

            execution = execution_of(-SCORES if abs_first else SCORES, ROIS, BATCHES)
            outputs = [np.zeros(1, np.float32), np.zeros((1, 4), np.float32), np.zeros(1, np.int32),
                       np.zeros(1, np.int32)]
            for i, buffer in enumerate(outputs):
                execution.setOutput(i, buffer)
            with pytest.raises(OutputInsufficientSizeError):
                await execution.compute_async()
            assert execution.getOutputOperandDimensions(0) == [2]
            # the app enlarges its buffers (larger than needed is fine) in a new execution
            # (an execution runs once in Android 10)
            execution = execution_of(-SCORES if abs_first else SCORES, ROIS, BATCHES)
            big = [np.zeros(3, np.float32), np.zeros((3, 4), np.float32), np.zeros(3, np.int32), np.zeros(3, np.int32)]
            for i, buffer in enumerate(big):
                execution.setOutput(i, buffer)
            scores, boxes, classes, batch = await execution.compute_async()
            np.testing.assert_allclose(scores, [0.9, 0.5])
            np.testing.assert_array_equal(boxes, [[0, 0, 1, 1], [4, 4, 5, 5]])
            assert list(classes) == [1, 1] and list(batch) == [0, 0]
            assert [execution.getOutputOperandDimensions(i) for i in range(4)] == [[2], [2, 4], [2], [2]]
            # without buffers of its own the runtime sizes the outputs as the run says
            execution = execution_of(np.concatenate([SCORES, [[0, 0.8]]]).astype(np.float32) * (-1 if abs_first else 1),
                                     np.concatenate([ROIS, [[6, 6, 7, 7] * 2]]).astype(np.float32),
                                     np.zeros(4, np.int32))
            scores, boxes, _, _ = await execution.compute_async()
            np.testing.assert_allclose(scores, [0.9, 0.8, 0.5])
            assert boxes.shape == (3, 4)


async def test_a_driver_output_buffer_too_small_for_the_given_shapes_is_the_apps_to_fix(autojump_clock):
    async with open_nn() as nn:
        drivers = [d for d in nn.devices if d.name != CPU_DEVICE_NAME]
        model = add_model()
        device = await first_claiming(nn, drivers, model)
        async with nn.createCompilationForDevices(model, [device]) as compilation:
            await compilation.finish()
            execution = compilation.createExecution()
            execution.setInput(0, np.ones((4, 3), np.float32))
            execution.setOutput(0, np.zeros((2, 3), np.float32))
            with pytest.raises(OutputInsufficientSizeError):
                await execution.compute_async()
            assert execution.getOutputOperandDimensions(0) == [4, 3]
            execution = compilation.createExecution()
            execution.setInput(0, np.ones((4, 3), np.float32))
            execution.setOutput(0, np.zeros((4, 3), np.float32))
            (y,) = await execution.compute_async()
            np.testing.assert_array_equal(y, np.ones((4, 3)) + BIAS)


@pytest.mark.multiprocess
async def test_input_dimensions_cross_the_hal_process():
    model = add_model()
    async with open_nn(processes=True) as nn:
        drivers = [d for d in nn.devices if d.name != CPU_DEVICE_NAME]
        device = await first_claiming(nn, drivers, model)
        async with nn.createCompilationForDevices(model, [device]) as compilation:
            await compilation.finish()
            for rows in (3, 7):
                execution = compilation.createExecution()
                x = np.full((rows, 3), 2, np.float32)
                execution.setInput(0, x)
                (y,) = await execution.compute_async()
                np.testing.assert_array_equal(y, x + BIAS)
                assert execution.getOutputOperandDimensions(0) == [rows, 3]
