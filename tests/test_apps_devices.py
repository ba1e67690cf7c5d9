"""The sample apps find their device by NNAPI discovery (type, then what it runs), never by name.

Against the real HAL over the reference driver in one trio run (the stack of
``test_nn_runtime``): the sample models land on ``emu-npu``; a model the DSP can run
shows that the type comes first and the capabilities decide among devices of a type
(not the servicemanager's order, which lists ``emu-dsp`` before ``emu-npu``); with
no driver device that runs the model, the app runs on the CPU device and says so.
The whole stack on another vendor's driver (``npuemu demo --driver`` on the template
driver, whose only device is ``tmpl-npu``) is in ``test_examples.py``.
"""

from __future__ import annotations

import numpy as np

from apps._kit import Report, choose_device, convnet, cpu_device, device_for, mlp
from framework.nn import CPU_DEVICE_NAME, DeviceType, ExecutionPreference, FuseCode, Model, OperandType, OperationType
from framework.nn import open_nn_runtime
from test_nn_runtime import app, stack  # noqa: F401 (fixtures: servicemanager, the HAL, an app's runtime)


def _dense_relu() -> Model:
    """FULLY_CONNECTED with a fused RELU: an operation every reference device runs, the DSP too."""
    m = Model()
    x = m.addOperand(OperandType.TENSOR_FLOAT32, [1, 4])
    w = m.addOperand(OperandType.TENSOR_FLOAT32, [3, 4])
    m.setOperandValue(w, np.ones((3, 4), np.float32))
    b = m.addOperand(OperandType.TENSOR_FLOAT32, [3])
    m.setOperandValue(b, np.zeros(3, np.float32))
    fuse = m.addOperand(OperandType.INT32)
    m.setOperandValue(fuse, int(FuseCode.RELU))
    y = m.addOperand(OperandType.TENSOR_FLOAT32, [1, 3])
    m.addOperation(OperationType.FULLY_CONNECTED, [x, w, b, fuse], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    return m


class _Context:
    def getPackageName(self):
        return "com.example.test"

    def getUid(self):
        return 10042


async def test_every_sample_model_goes_to_the_fastest_accelerator(autojump_clock, app):  # noqa: F811
    async with open_nn_runtime(app, environ={}) as nn:
        for model in (mlp(7, (64, 128, 10))[0], mlp(5, (256, 512, 512, 256))[0], convnet(11, 24, 3, 16, 4)[0]):
            device = await choose_device(nn, model)
            assert (device.getName(), device.getType()) == ("emu-npu", DeviceType.ACCELERATOR)


async def test_type_first_then_capabilities_not_the_listing_order(autojump_clock, app):  # noqa: F811
    model = _dense_relu()
    async with open_nn_runtime(app, environ={}) as nn:
        assert [d.getName() for d in nn.devices][:2] == ["emu-dsp", "emu-gpu"]  # the servicemanager's order
        # Both accelerators run it: the faster one (execTime 0.1 against 0.6), or the frugal one.
        assert (await choose_device(nn, model)).getName() == "emu-npu"
        assert (await choose_device(nn, model, preference=ExecutionPreference.LOW_POWER)).getName() == "emu-dsp"
    async with open_nn_runtime(app, enabledDevices="emu-(gpu|dsp)") as nn:
        # An accelerator beats a faster GPU; a model the DSP cannot run (SOFTMAX) goes to the GPU.
        assert (await choose_device(nn, model)).getName() == "emu-dsp"
        assert (await choose_device(nn, mlp(7, (64, 128, 10))[0])).getName() == "emu-gpu"
        assert await choose_device(nn, convnet(11, 24, 3, 16, 4)[0], types=(DeviceType.ACCELERATOR,)) is None


async def test_without_a_driver_device_that_runs_the_model_the_app_uses_the_cpu(autojump_clock, app):  # noqa: F811
    model = mlp(7, (64, 128, 10))[0]
    report = Report("test", _Context())
    async with open_nn_runtime(app, enabledDevices="emu-dsp") as nn:
        assert await choose_device(nn, model) is None
        device = await device_for(nn, model, report)
        assert device is cpu_device(nn) and device.getName() == CPU_DEVICE_NAME
    assert report.data["device"] == CPU_DEVICE_NAME
    assert report.data["events"][-1]["kind"] == "device"
    async with open_nn_runtime(app, environ={}) as nn:
        assert (await device_for(nn, model, report)).getName() == "emu-npu"
    assert report.data["device"] == "emu-npu"
