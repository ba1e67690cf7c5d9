"""The reference driver's devices differ as a phone's do (issue 14, point 3).

- Each device claims operations by (operation, operand type) and keeps its word: over
  every conformance case, a device claims a model exactly when it loads it (the
  conformance suite then runs and checks each claimed case).
- Its PerformanceInfo per operand type is its silicon's cost model: the emulated time the
  hardware charges a convolution, per device and type, is in the ratios the figures say,
  and quantized work is really cheaper where the figures say so.
- So partitioning means something: ``create`` splits the mixed quantized/float sample
  model across devices (never the CPU), ``createForDevices`` on a device lacking an
  operation fails as NNAPI does, and emu-hetero places a quantized model on the part its
  per-type claims allow.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import npuhal
from conformance.build import build, expressible
from conformance.cases import cases
from conformance.run import LAYOUTS, open_nn
from framework.cli import main
from framework.nn import (
    CPU_DEVICE_NAME,
    BadDataError,
    ExecutionPreference,
    FuseCode,
    Model,
    NeuralNetworksError,
    OperandType,
    OperationType,
    SymmPerChannelQuantParams,
    mixedSampleModel,
    toAidlModel,
)
from npuhal import NpuUnsupportedOperationError, WorkEnded, WorkStarted

SILICON = {"emu-npu": 0, "emu-gpu": 1, "emu-dsp": 2}  # the order the driver adds its silicon

async def test_every_device_claims_exactly_the_cases_it_loads():
    """getSupportedOperations is a promise: all claimed <=> load_model accepts."""
    mismatched, claimed_counts = [], {}
    async with npuhal.open_driver(clock="virtual") as driver:
        for case in cases():
            if expressible(case):
                continue
            for layout, dynamic in LAYOUTS:
                try:
                    model = build(case, layout, dynamic).model
                except NeuralNetworksError:  # the NDK refusing a case is the conformance suite's count
                    continue
                aidl = toAidlModel(model.to_hal())
                for dev in driver.devices:
                    claimed = all(driver.supported_operations(dev, aidl))
                    try:
                        driver.unload_model(driver.load_model(dev, aidl))
                        loaded = True
                    except NpuUnsupportedOperationError:
                        loaded = False
                    claimed_counts[dev.name] = claimed_counts.get(dev.name, 0) + claimed
                    if claimed != loaded:
                        where = f"{case.id} ({layout}{'+dynamic' if dynamic else ''}) on {dev.name}"
                        mismatched.append(f"{where}: claimed {claimed}, loaded {loaded}")
    assert not mismatched, "\n".join(mismatched[:20])
    # the devices differ: the GPU claims the most (every float case), the DSP the fewest
    assert claimed_counts["emu-gpu"] > claimed_counts["emu-npu"] > claimed_counts["emu-dsp"] > 0
    assert claimed_counts["emu-hetero"] == claimed_counts["emu-npu"]  # its npu part claims all the dsp does


def reference_conv(kind: str) -> Model:
    """The convolution the driver's figures are computed for: 3x3, 32 -> 32 channels on
    28x28, SAME padding, in float32, float16, quant8, or float32 relaxed to float16."""
    rng = np.random.default_rng(3)
    m = Model()
    if kind == "quant8":
        t, dtype, q_in, q_w, q_out = OperandType.TENSOR_QUANT8_ASYMM, np.uint8, \
            {"scale": 0.5, "zeroPoint": 128}, {"scale": 0.01, "zeroPoint": 128}, {"scale": 1.0, "zeroPoint": 128}
        weights = rng.integers(0, 256, (32, 3, 3, 32)).astype(dtype)
        bias_type, bias, q_bias = OperandType.TENSOR_INT32, np.zeros(32, np.int32), {"scale": 0.005, "zeroPoint": 0}
    else:
        t = OperandType.TENSOR_FLOAT16 if kind == "float16" else OperandType.TENSOR_FLOAT32
        dtype = np.float16 if kind == "float16" else np.float32
        q_in = q_w = q_out = q_bias = {}
        weights = rng.standard_normal((32, 3, 3, 32)).astype(dtype)
        bias_type, bias = t, np.zeros(32, dtype)
    x = m.addOperand(t, [1, 28, 28, 32], **q_in)
    w = m.addOperand(t, [32, 3, 3, 32], **q_w)
    m.setOperandValue(w, weights)
    b = m.addOperand(bias_type, [32], **q_bias)
    m.setOperandValue(b, bias)
    params = []
    for v in (1, 1, 1, FuseCode.NONE):  # SAME padding, stride 1x1, no activation
        params.append(m.addOperand(OperandType.INT32))
        m.setOperandValue(params[-1], int(v))
    y = m.addOperand(t, [1, 28, 28, 32], **q_out)
    m.addOperation(OperationType.CONV_2D, [x, w, b, *params], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.relaxComputationFloat32toFloat16(kind == "relaxed")
    m.finish()
    return m


COST_SCALE = 1000.0  # makes the per-slice overhead negligible beside the convolution
INPUT_DTYPES = {"float32": np.float32, "float16": np.float16, "quant8": np.uint8, "relaxed": np.float32}
TYPES = {"float32": OperandType.TENSOR_FLOAT32, "float16": OperandType.TENSOR_FLOAT16,
         "quant8": OperandType.TENSOR_QUANT8_ASYMM}


FLT_MAX = float(np.finfo(np.float32).max)


def figures_of(driver, name: str, kind: str) -> float:
    dev = driver.device_by_name(name)
    return dev.relaxed_float32_to_float16_tensor.execTime if kind == "relaxed" else dev.capabilities[TYPES[kind]].execTime


async def test_performance_info_is_the_cost_the_hardware_charges():
    async with npuhal.open_driver(clock="virtual") as driver:
        durations, figures = {}, {}
        for dev in driver.devices:
            if dev.name not in SILICON:
                continue
            for kind in [*TYPES, "relaxed"]:
                aidl = toAidlModel(reference_conv(kind).to_hal())
                claimed = all(driver.supported_operations(dev, aidl))
                figure = figures_of(driver, dev.name, kind)
                if not claimed:
                    with pytest.raises(NpuUnsupportedOperationError):
                        driver.load_model(dev, aidl)
                    continue
                handle = driver.load_model(dev, aidl, cost_scale=COST_SCALE)
                x = np.ones((1, 28, 28, 32), INPUT_DTYPES[kind])
                work = driver.submit(handle, [x.tobytes()], uid=10001, job_priority=500)
                driver.run_until_idle()
                events = [e for e in driver.drain_events() if isinstance(e, (WorkStarted, WorkEnded))
                          and e.info.id == work]
                assert [type(e) for e in events] == [WorkStarted, WorkEnded]
                assert events[0].hw_device == SILICON[dev.name]
                durations[dev.name, kind] = events[1].time_ns - events[0].time_ns
                figures[dev.name, kind] = figure
                driver.unload_model(handle)
        # FLT_MAX: the types a device runs no operation in
        assert figures_of(driver, "emu-gpu", "quant8") == figures_of(driver, "emu-dsp", "float16") == FLT_MAX
        # what each device runs: the NPU every type, the GPU floats, the DSP quant8 (its float
        # operations are ADD, MUL, RELU and FULLY_CONNECTED, not convolutions)
        assert set(durations) == {("emu-npu", "float32"), ("emu-npu", "float16"), ("emu-npu", "quant8"),
                                  ("emu-npu", "relaxed"), ("emu-gpu", "float32"), ("emu-gpu", "float16"),
                                  ("emu-gpu", "relaxed"), ("emu-dsp", "quant8")}
        base = ("emu-npu", "float32")
        for key in durations:
            assert durations[key] / durations[base] == pytest.approx(figures[key] / figures[base], rel=0.02), key
        # quant8 is really cheaper on the NPU and the DSP; float16 beats float32 on the NPU and GPU
        assert durations["emu-npu", "quant8"] < durations["emu-npu", "float16"] < durations["emu-npu", "float32"]
        assert durations["emu-gpu", "float16"] < durations["emu-gpu", "float32"]
        # a relaxed float32 model computes at float16's rate (as its relaxed figures say)
        assert durations["emu-npu", "relaxed"] < durations["emu-npu", "float32"]
        assert durations["emu-gpu", "relaxed"] < durations["emu-gpu", "float32"]
        assert durations["emu-dsp", "quant8"] < durations["emu-gpu", "float32"]
        # and the leaders: the NPU on quant8 and float16, the GPU on float32
        assert durations["emu-npu", "quant8"] < durations["emu-dsp", "quant8"]
        assert durations["emu-npu", "float16"] < durations["emu-gpu", "float16"]
        assert durations["emu-gpu", "float32"] < durations["emu-npu", "float32"]


async def test_relaxed_figures_are_float16s_where_a_device_runs_float16():
    async with npuhal.open_driver(clock="virtual") as driver:
        for dev in driver.devices:
            f16 = dev.capabilities[OperandType.TENSOR_FLOAT16]
            runs_f16 = f16.execTime < FLT_MAX
            want = f16 if runs_f16 else dev.capabilities[OperandType.TENSOR_FLOAT32]
            assert dev.relaxed_float32_to_float16_tensor == want, dev.name
            assert dev.relaxed_float32_to_float16_scalar == want, dev.name
        assert [d.name for d in driver.devices if d.capabilities[OperandType.TENSOR_FLOAT16].execTime < FLT_MAX] == \
            ["emu-npu", "emu-gpu", "emu-hetero"]


def quantized_ops(hal) -> set[int]:
    return {k for k, op in enumerate(hal.operations)
            if hal.operands[op.inputs[0]].type == OperandType.TENSOR_QUANT8_ASYMM}


@pytest.mark.parametrize("preference, quant_devices, float_devices", [
    (ExecutionPreference.FAST_SINGLE_ANSWER, {"emu-npu"}, {"emu-gpu"}),
    # LOW_POWER: the frugal DSP takes what it runs (not the per-channel CONV_2D, QUANTIZE,
    # DEQUANTIZE, nor the float RESHAPE and SOFTMAX)
    (ExecutionPreference.LOW_POWER, {"emu-npu", "emu-dsp"}, {"emu-gpu", "emu-dsp"}),
])
async def test_create_splits_the_mixed_model_quant8_onto_the_npu_float_onto_the_gpu(
        autojump_clock, preference, quant_devices, float_devices):
    model = mixedSampleModel()
    hal = model.to_hal()
    quantized = quantized_ops(hal)
    assert quantized == {1, 2, 3, 4}  # CONV_2D, DEPTHWISE_CONV_2D, AVERAGE_POOL_2D, DEQUANTIZE
    image = np.random.default_rng(0).random((1, 16, 16, 3), np.float32)
    async with open_nn() as nn:
        async with nn.createCompilation(model) as compilation:
            compilation.setPreference(preference)
            await compilation.finish()
            plan = compilation.plan
            names = [d.name for d in plan.assignment]
            assert CPU_DEVICE_NAME not in names
            assert {names[k] for k in quantized} == quant_devices
            assert {names[k] for k in range(len(names)) if k not in quantized} == float_devices
            assert len(plan.steps) >= 3
            execution = compilation.createExecution()
            execution.setInput(0, image)
            (scores,) = await execution.compute_async()
        async with nn.createCompilationForDevices(model, [nn.cpu]) as alone:
            await alone.finish()
            execution = alone.createExecution()
            execution.setInput(0, image)
            (want,) = await execution.compute_async()
    np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-6)


async def test_create_for_a_device_that_lacks_an_operation_fails_as_nnapi_does(autojump_clock):
    model = mixedSampleModel()
    async with open_nn() as nn:
        dsp = nn.getDeviceByName("emu-dsp")
        supported = await nn.getSupportedOperationsForDevices(model, [dsp])
        # QUANTIZE, the per-channel CONV_2D, DEQUANTIZE and the float RESHAPE and SOFTMAX are not the DSP's
        assert supported == [False, False, True, True, False, False, True, False]
        with pytest.raises(BadDataError, match="supported by none of the devices"):
            async with nn.createCompilationForDevices(model, [dsp]) as compilation:
                await compilation.finish()
        # the NPU and the GPU together run all of it
        both = [nn.getDeviceByName("emu-npu"), nn.getDeviceByName("emu-gpu")]
        async with nn.createCompilationForDevices(model, both) as compilation:
            await compilation.finish()
            assert {d.name for d in compilation.plan.assignment} == {"emu-npu", "emu-gpu"}


def quant8_add(per_channel_conv: bool = False) -> Model:
    """quant8 ADD of two inputs, or a quant8 CONV_2D with a per-channel filter."""
    m = Model()
    q = {"scale": 0.5, "zeroPoint": 128}
    a = m.addOperand(OperandType.TENSOR_QUANT8_ASYMM, [1, 4, 4, 2], **q)
    y = m.addOperand(OperandType.TENSOR_QUANT8_ASYMM, [1, 4, 4, 2], **q)
    fuse = m.addOperand(OperandType.INT32)
    m.setOperandValue(fuse, int(FuseCode.NONE))
    if not per_channel_conv:
        b = m.addOperand(OperandType.TENSOR_QUANT8_ASYMM, [1, 4, 4, 2], **q)
        m.addOperation(OperationType.ADD, [a, b, fuse], [y])
        m.identifyInputsAndOutputs([a, b], [y])
    else:
        w = m.addOperand(OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL, [2, 1, 1, 2])
        m.setOperandSymmPerChannelQuantParams(w, SymmPerChannelQuantParams(scales=[0.1, 0.2], channelDim=0))
        m.setOperandValue(w, np.array([1, 2, 3, 4], np.int8).reshape(2, 1, 1, 2))
        bias = m.addOperand(OperandType.TENSOR_INT32, [2])
        m.setOperandValue(bias, np.zeros(2, np.int32))
        ints = []
        for v in (1, 1, 1):
            ints.append(m.addOperand(OperandType.INT32))
            m.setOperandValue(ints[-1], v)
        m.addOperation(OperationType.CONV_2D, [a, w, bias, *ints, fuse], [y])
        m.identifyInputsAndOutputs([a], [y])
    m.finish()
    return m


@pytest.mark.parametrize("per_channel, part", [(False, "emu-dsp"), (True, "emu-npu")])
async def test_hetero_places_a_low_power_quant8_model_on_a_part_that_claims_it(per_channel, part):
    """emu-hetero's LOW_POWER choice is its frugal DSP, unless the DSP lacks an operation's
    type: a per-channel filter is the NPU's alone."""
    model = quant8_add(per_channel)
    aidl = toAidlModel(model.to_hal())
    async with npuhal.open_driver(clock="virtual") as driver:
        hetero = driver.device_by_name("emu-hetero")
        assert all(driver.supported_operations(hetero, aidl))
        assert all(driver.supported_operations(driver.device_by_name(part), aidl))
        handle = driver.load_model(hetero, aidl, preference=ExecutionPreference.LOW_POWER)
        inputs = [np.full((1, 4, 4, 2), 130, np.uint8).tobytes()] * len(model.to_hal().inputIndexes)
        work = driver.submit(handle, inputs, uid=10001, job_priority=500)
        driver.run_until_idle()
        started = [e for e in driver.drain_events() if isinstance(e, WorkStarted) and e.info.id == work]
        assert started and started[0].hw_device == SILICON[part]
        assert started[0].info.deviceNumber == hetero.number


def test_nn_plan_prints_the_mixed_split():
    result = CliRunner().invoke(main, ["nn", "plan", "--model", "mixed", "--offline"], env={})
    assert result.exit_code == 0, result.output
    steps = [line.split()[1] for line in result.output.splitlines() if line[:1].isdigit() and "#" in line]
    assert steps == ["emu-gpu", "emu-npu", "emu-gpu"]
    assert "#1 CONV_2D, #2 DEPTHWISE_CONV_2D, #3 AVERAGE_POOL_2D, #4 DEQUANTIZE" in result.output
