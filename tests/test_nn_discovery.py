"""Device listing and lookup as the NDK presents them, and the sample model."""

import numpy as np
import pytest

import nn_reference as ref
from framework.nn import (
    CPU_DEVICE_NAME,
    FEATURE_LEVEL,
    BadDataError,
    DeviceDescriptor,
    DeviceType,
    OperationType,
    createPlan,
    createPlanForDevices,
    getDevice,
    isValidDeviceName,
    listDevices,
    referenceCpuDevice,
    sampleModel,
    uniformCapabilities,
)


def driver(name, type=DeviceType.ACCELERATOR, execTime=0.5, ops=frozenset(OperationType)):
    return DeviceDescriptor(name, type, f"{name} v2.1", FEATURE_LEVEL, uniformCapabilities(execTime, execTime), ops)


FIELD_NAMES = ["qti-dsp", "qti-gpu", "qti-hta", "nnapi-sample_float_fast", "nnapi-sample_float_slow"]


def test_drivers_come_first_in_their_order_then_the_cpu_device():
    devices = listDevices([driver(n) for n in FIELD_NAMES])
    assert [d.getName() for d in devices] == FIELD_NAMES + [CPU_DEVICE_NAME]
    cpu = devices[-1]
    assert cpu.getType() == DeviceType.CPU
    assert cpu.getFeatureLevel() == 29
    assert cpu.getVersion()
    perf = cpu.getPerformance(0)
    assert (perf.execTime, perf.powerUsage) == (1.0, 1.0)
    assert [d.getName() for d in listDevices([])] == [CPU_DEVICE_NAME]


def test_the_enabled_devices_pattern_limits_drivers_never_the_cpu():
    drivers = [driver(n) for n in FIELD_NAMES]
    assert [d.name for d in listDevices(drivers, enabledDevices="qti-.*")] == [
        "qti-dsp", "qti-gpu", "qti-hta", CPU_DEVICE_NAME,
    ]
    # A whole-name match: "qti" alone matches no driver.
    assert [d.name for d in listDevices(drivers, enabledDevices="qti")] == [CPU_DEVICE_NAME]
    assert [d.name for d in listDevices(drivers, enabledDevices="nnapi-sample_float_(fast|slow)")] == [
        "nnapi-sample_float_fast", "nnapi-sample_float_slow", CPU_DEVICE_NAME,
    ]
    with pytest.raises(BadDataError, match="not a regular expression"):
        listDevices(drivers, enabledDevices="qti-(")


def test_get_device_by_index_and_bad_indexes_are_bad_data():
    devices = listDevices([driver("qti-dsp")])
    assert getDevice(devices, 0).name == "qti-dsp"
    assert getDevice(devices, 1).name == CPU_DEVICE_NAME
    for bad in (2, -1, "0", 1.0, True):
        with pytest.raises(BadDataError):
            getDevice(devices, bad)


@pytest.mark.parametrize(
    ("name", "ok"),
    [("qti-dsp", True), ("nnapi-sample_float_fast", True), ("qtidsp", False), ("-dsp", False),
     ("qti-", False), ("qti-dsp-2", False), ("", False)],
)
def test_instance_names_follow_vendor_dash_device(name, ok):
    assert isValidDeviceName(name) is ok


def test_listing_refuses_bad_instance_names_and_clashes():
    with pytest.raises(BadDataError, match="instance name"):
        listDevices([driver("qti-dsp-2")])
    with pytest.raises(BadDataError, match="listed twice"):
        listDevices([driver("qti-dsp"), driver("qti-dsp")])
    with pytest.raises(BadDataError, match="CPU device's name"):
        listDevices([driver(CPU_DEVICE_NAME)])


def test_the_sample_model_uses_seven_operations_and_splits_across_devices():
    model = sampleModel()
    hal = model.to_hal()
    assert {op.type.name for op in hal.operations} == {"ADD", "SUB", "MUL", "FULLY_CONNECTED", "CONV_2D", "RELU", "SOFTMAX"}
    assert [hal.operands[i].dimensions for i in hal.outputIndexes] == [[1, 3, 3, 4], [1, 10]]
    rng = np.random.default_rng(0)
    feeds = [rng.random((1, 8, 8, 3), np.float32), rng.random((1, 16), np.float32)]
    features, scores = ref.run(hal, feeds)
    assert (features >= 0).all() and np.isclose(scores.sum(), 1.0, atol=1e-6)
    assert np.array_equal(ref.run(sampleModel().to_hal(), feeds)[1], scores)  # seeded: repeatable

    dsp = driver("qti-dsp", execTime=0.2, ops={OperationType.CONV_2D, OperationType.RELU})
    gpu = driver("qti-gpu", type=DeviceType.GPU, execTime=0.6, ops={OperationType.FULLY_CONNECTED, OperationType.ADD})
    plan = createPlan(model, [dsp, gpu])
    assert {d.name for d in plan.devices} == {"qti-dsp", "qti-gpu", CPU_DEVICE_NAME}
    for got, want in zip(ref.run_plan(plan, feeds), (features, scores), strict=True):
        assert np.array_equal(got, want)
    text = plan.describe()
    assert "qti-dsp" in text and "CONV_2D" in text
    narrow = createPlanForDevices(model, [dsp, gpu, referenceCpuDevice()])
    assert [d.name for d in narrow.assignment] == [d.name for d in plan.assignment]
