"""The NNAPI runtime against the real HAL code, in one trio run.

servicemanager, the vendor HAL (``framework.emulator.open_stack`` without system_server,
over a virtual-clock reference driver whose time follows trio's autojump MockClock) and
an app process, each with its own binder runtime on a MemoryNetwork. The app side is ``framework.nn`` only,
as a real app's would be. Results are compared with the numpy oracle.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import trio

import nn_reference
from framework.binder import SharedMemory, defaultServiceManager, open_binder_runtime
from framework.emulator import open_stack
from framework.nn import (
    CPU_DEVICE_NAME,
    BadDataError,
    BadStateError,
    DeadObjectError,
    NO_DURATION,
    DeviceType,
    DurationCode,
    ExecutionPreference,
    FuseCode,
    Memory,
    Model,
    OperandType,
    OperationType,
    OpFailedError,
    OutputInsufficientSizeError,
    ResourceExhaustedPersistentError,
    ResultCode,
    open_nn_runtime,
    sampleModel,
)
from framework.nn import toAidlModel
from framework.npumanager import ModelLoadRequest
from npuhal import open_driver

APP_UID = 10001
DRIVERS = ["emu-dsp", "emu-gpu", "emu-hetero", "emu-npu"]  # the servicemanager lists names sorted
#: Where a plain compilation puts the float32 sample model: the reference driver's fastest
#: device in float32 (emu-npu leads on quant8 and float16, not on float32).
FLOAT_FASTEST = "emu-gpu"


async def app_runtime(stack, uid=APP_UID):
    """An app process's binder runtime (it lives as long as the stack)."""
    pid = await stack.spawn(uid)

    async def app_process(task_status):
        async with open_binder_runtime(network=stack.network, pid=pid) as rt:
            task_status.started(rt)
            await trio.sleep_forever()

    return await stack.nursery.start(app_process)


@pytest.fixture
async def stack(autojump_clock):
    """A servicemanager and the HAL over the reference driver, in this process (no system_server)."""
    async with open_driver(clock="virtual") as driver, open_stack(driver, system_server=False) as s:
        yield s


@pytest.fixture
async def app(stack):
    return await app_runtime(stack)


@pytest.fixture
async def nn(app):
    async with open_nn_runtime(app, environ={}) as runtime:
        yield runtime


def sample_inputs(seed=3):
    rng = np.random.default_rng(seed)
    return [rng.random((1, 8, 8, 3), dtype=np.float32), rng.standard_normal((1, 16), dtype=np.float32)]


def assert_matches_reference(model, inputs, outputs):
    expected = nn_reference.run(model.to_hal(), inputs)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


async def run(compilation, inputs):
    execution = compilation.createExecution()
    for i, x in enumerate(inputs):
        execution.setInput(i, x)
    return await execution.compute_async()


# ---- discovery -----------------------------------------------------------------------


async def test_devices_are_the_drivers_then_the_cpu(autojump_clock, nn, stack):
    assert nn.getDeviceCount() == len(DRIVERS) + 1
    names = [nn.getDevice(i).getName() for i in range(nn.getDeviceCount())]
    assert names == [*DRIVERS, CPU_DEVICE_NAME]
    npu = nn.getDeviceByName("emu-npu")
    assert npu.getType() == DeviceType.ACCELERATOR
    assert npu.getVersion() == stack.driver.device_by_name("emu-npu").version
    assert npu.getFeatureLevel() == 29
    assert nn.getDeviceByName("emu-hetero").getType() == DeviceType.OTHER
    # the driver's figures per operand type reach the app as they are
    for t in (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16, OperandType.TENSOR_QUANT8_ASYMM):
        assert npu.getPerformance(t) == stack.driver.device_by_name("emu-npu").capabilities[t]
    assert npu.getPerformance(OperandType.TENSOR_QUANT8_ASYMM).execTime < npu.getPerformance(OperandType.TENSOR_FLOAT32).execTime
    cpu = nn.getDevice(len(DRIVERS))
    assert cpu.getType() == DeviceType.CPU
    perf = cpu.getPerformance(OperandType.TENSOR_FLOAT32)
    assert (perf.execTime, perf.powerUsage) == (1.0, 1.0)


@pytest.mark.parametrize("index", [-1, len(DRIVERS) + 1, 99, "0", 1.0])
async def test_a_bad_device_index_is_bad_data(autojump_clock, nn, index):
    with pytest.raises(BadDataError) as info:
        nn.getDevice(index)
    assert info.value.resultCode == ResultCode.BAD_DATA == 4


async def test_enabled_devices_from_the_environment(autojump_clock, app):
    async with open_nn_runtime(app, environ={"NPUEMU_NN_ENABLED_DEVICES": "emu-(npu|dsp)"}) as nn:
        assert [d.name for d in nn.devices] == ["emu-dsp", "emu-npu", CPU_DEVICE_NAME]


async def test_enabled_devices_option_wins_over_the_environment(autojump_clock, app):
    env = {"NPUEMU_NN_ENABLED_DEVICES": "emu-npu"}
    async with open_nn_runtime(app, enabledDevices="emu-g.*", environ=env) as nn:
        assert [d.name for d in nn.devices] == ["emu-gpu", CPU_DEVICE_NAME]
    # A filter that matches nothing leaves the CPU, which no filter removes.
    async with open_nn_runtime(app, enabledDevices="qti-.*") as nn:
        assert [d.name for d in nn.devices] == [CPU_DEVICE_NAME]


async def test_a_bad_enabled_devices_pattern_is_bad_data(autojump_clock, app):
    with pytest.raises(BadDataError, match="regular expression"):
        async with open_nn_runtime(app, enabledDevices="emu-(npu"):
            pass


async def test_a_dead_hal_leaves_only_the_cpu(autojump_clock, stack, app):
    stack.kill_hal()
    await trio.sleep(0.1)
    async with open_nn_runtime(app, environ={}) as nn:
        assert [d.name for d in nn.devices] == [CPU_DEVICE_NAME]


# ---- supported operations ------------------------------------------------------------


async def test_supported_operations_are_the_union_over_the_devices(autojump_clock, nn):
    model = sampleModel()
    ops = [op.type for op in model.to_hal().operations]
    dsp = nn.getDeviceByName("emu-dsp")
    dsp_only = await nn.getSupportedOperationsForDevices(model, [dsp])
    # The reference DSP computes neither CONV_2D, SUB nor SOFTMAX.
    assert dsp_only == [t not in (OperationType.CONV_2D, OperationType.SUB, OperationType.SOFTMAX) for t in ops]
    assert await nn.getSupportedOperationsForDevices(model, [dsp, nn.cpu]) == [True] * len(ops)
    assert await nn.getSupportedOperationsForDevices(model, [nn.getDeviceByName("emu-npu")]) == [True] * len(ops)


async def test_supported_operations_refuses_no_devices_and_duplicates(autojump_clock, nn):
    model = sampleModel()
    dsp = nn.getDeviceByName("emu-dsp")
    for devices in ([], [dsp, dsp]):
        with pytest.raises(BadDataError):
            await nn.getSupportedOperationsForDevices(model, devices)
    with pytest.raises(BadStateError):
        await nn.getSupportedOperationsForDevices(Model(), [dsp])


async def test_weights_travel_as_shared_memory(autojump_clock, nn):
    hal = sampleModel().to_hal()
    assert hal.pools, "the sample model's large weights live in a pool"
    regions = [SharedMemory.create("w", len(memoryview(p).cast("B"))) for p in hal.pools]
    aidl = toAidlModel(hal, regions)
    assert all(isinstance(p, SharedMemory) for p in aidl.pools)
    assert len(aidl.main.operations) == len(hal.operations)
    for r in regions:
        r.close()


# ---- compilation and execution ---------------------------------------------------------


async def test_plain_compilation_runs_on_the_fastest_device(autojump_clock, nn):
    model = sampleModel()
    async with nn.createCompilation(model) as compilation:
        await compilation.finish()
        assert {d.name for d in compilation.plan.devices} == {FLOAT_FASTEST}
        inputs = sample_inputs()
        assert_matches_reference(model, inputs, await run(compilation, inputs))


async def test_low_power_splits_one_model_across_npu_and_dsp_with_identical_results(autojump_clock, nn):
    model = sampleModel()
    npu, dsp = nn.getDeviceByName("emu-npu"), nn.getDeviceByName("emu-dsp")
    inputs = sample_inputs()
    async with nn.createCompilationForDevices(model, [npu]) as alone:
        await alone.finish()
        single = await run(alone, inputs)
    async with nn.createCompilationForDevices(model, [npu, dsp]) as split:
        split.setPreference(ExecutionPreference.LOW_POWER)
        await split.finish()
        plan = split.plan
        assert {s.device.name for s in plan.steps} == {"emu-npu", "emu-dsp"}
        # DSP draws less power, so it takes every operation it can compute.
        hal = model.to_hal()
        for k, device in enumerate(plan.assignment):
            dsp_can = hal.operations[k].type not in (OperationType.CONV_2D, OperationType.SUB, OperationType.SOFTMAX)
            assert device.name == ("emu-dsp" if dsp_can else "emu-npu")
        # Temporaries really cross from one device to the other.
        model_io = set(hal.inputIndexes) | set(hal.outputIndexes)
        assert any(set(s.inputs) - model_io for s in plan.steps)
        assert len(plan.steps) >= 3
        results = await run(split, inputs)
    assert_matches_reference(model, inputs, results)
    for a, b in zip(single, results, strict=True):
        np.testing.assert_array_equal(a, b)  # the same C kernels on every device


@pytest.mark.parametrize("name", ["emu-npu", "emu-gpu", "emu-hetero", CPU_DEVICE_NAME])
async def test_every_device_computes_the_reference_result(autojump_clock, nn, name):
    model = sampleModel()
    async with nn.createCompilationForDevices(model, [nn.getDeviceByName(name)]) as compilation:
        await compilation.finish()
        assert [s.device.name for s in compilation.plan.steps] == [name]
        for seed in (1, 2):
            inputs = sample_inputs(seed)
            assert_matches_reference(model, inputs, await run(compilation, inputs))


async def test_for_devices_that_cannot_run_an_operation_is_bad_data(autojump_clock, nn):
    with pytest.raises(BadDataError, match="supported by none"):
        await nn.createCompilationForDevices(sampleModel(), [nn.getDeviceByName("emu-dsp")]).finish()


async def test_create_for_devices_checks_its_device_list(autojump_clock, nn):
    model = sampleModel()
    npu = nn.getDeviceByName("emu-npu")
    for devices in ([], [npu, npu]):
        with pytest.raises(BadDataError):
            nn.createCompilationForDevices(model, devices)
    with pytest.raises(BadStateError):
        nn.createCompilation(Model())


async def test_outputs_and_inputs_in_app_memory_are_zero_copy(autojump_clock, nn):
    model = sampleModel()
    image, embedding = sample_inputs()
    async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as compilation:
        await compilation.finish()
        with Memory.create(4096) as memory:
            memory.asArray((1, 8, 8, 3), offset=0)[:] = image
            execution = compilation.createExecution()
            execution.setInputFromMemory(0, memory, 0, image.nbytes)
            execution.setInput(1, embedding)
            execution.setOutputFromMemory(1, memory, 1024, 40)
            features, scores = await execution.compute_async()
            expected = nn_reference.run(model.to_hal(), [image, embedding])
            # The HAL wrote the scores straight into the app's shared memory.
            np.testing.assert_allclose(memory.asArray((1, 10), offset=1024), expected[1], rtol=1e-5, atol=1e-6)
            assert np.shares_memory(scores, memory.asArray((1, 10), offset=1024))
            np.testing.assert_allclose(features, expected[0], rtol=1e-5, atol=1e-5)


async def test_runs_reuse_the_request_pool_and_nothing_is_mapped_after_the_first(autojump_clock, nn, monkeypatch):
    """A compilation's executions lay their operands in the same region, which the HAL
    keeps mapped: after the first run no region is made or mapped on either side, and
    each run's outputs are still its own."""
    model = sampleModel()
    async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as compilation:
        await compilation.finish()
        first = await run(compilation, sample_inputs(1))
        saved = [a.copy() for a in first]
        calls = []
        for name in ("create", "map"):
            real = getattr(SharedMemory, name)
            monkeypatch.setattr(SharedMemory, name, lambda *a, real=real, name=name, **k: calls.append(name) or real(*a, **k))
        for seed in (2, 3, 4):
            inputs = sample_inputs(seed)
            assert_matches_reference(model, inputs, await run(compilation, inputs))
        assert calls == []
        for a, b in zip(first, saved, strict=True):
            np.testing.assert_array_equal(a, b)


async def test_a_run_cut_short_does_not_give_its_pool_to_the_next(autojump_clock, nn, monkeypatch):
    """A run cancelled while the device computes leaves the region to the device (which
    may still write it): the next run lays its operands in a new one."""
    model = sampleModel()
    async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as compilation:
        await compilation.finish()
        await run(compilation, sample_inputs(1))
        execution = compilation.createExecution()
        for i, x in enumerate(sample_inputs(2)):
            execution.setInput(i, x)
        with trio.move_on_after(0.0005) as scope:  # the work takes emulated milliseconds
            await execution.compute_async()
        assert scope.cancelled_caught
        created = []
        real = SharedMemory.create
        monkeypatch.setattr(SharedMemory, "create", lambda *a, **k: created.append(a) or real(*a, **k))
        inputs = sample_inputs(3)
        assert_matches_reference(model, inputs, await run(compilation, inputs))
        assert [name for name, _ in created] == ["nn-request"]


async def test_the_hal_tells_regions_apart_when_it_keeps_their_mappings(autojump_clock, nn):
    """Two app memories given in turn as the input (and a region first read, then
    written): each run reads and writes the region it names, never a kept mapping of
    another."""
    model = sampleModel()
    async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as compilation:
        await compilation.finish()
        with Memory.create(4096) as a, Memory.create(4096) as b:
            images = {id(a): sample_inputs(5)[0], id(b): sample_inputs(6)[0]}
            for memory in (a, b):
                memory.asArray((1, 8, 8, 3))[:] = images[id(memory)]
            embedding = sample_inputs()[1]
            for k, memory in enumerate((a, b, a, b)):
                execution = compilation.createExecution()
                execution.setInputFromMemory(0, memory, 0, images[id(memory)].nbytes)
                execution.setInput(1, embedding)
                if k >= 2:  # read only at first (the HAL maps it read-only), then written too
                    execution.setOutputFromMemory(1, memory, 2048, 40)
                features, scores = await execution.compute_async()
                expected = nn_reference.run(model.to_hal(), [images[id(memory)], embedding])
                np.testing.assert_allclose(features, expected[0], rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(scores, expected[1], rtol=1e-5, atol=1e-6)
                if k >= 2:
                    np.testing.assert_allclose(memory.asArray((1, 10), offset=2048), expected[1], rtol=1e-5, atol=1e-6)


async def test_set_output_copies_into_the_apps_array(autojump_clock, nn):
    model = sampleModel()
    async with nn.createCompilation(model) as compilation:
        await compilation.finish()
        execution = compilation.createExecution()
        inputs = sample_inputs()
        for i, x in enumerate(inputs):
            execution.setInput(i, x)
        scores = np.zeros((1, 10), np.float32)
        execution.setOutput(1, scores)
        _, returned = await execution.compute_async()
        assert returned is scores
        np.testing.assert_allclose(scores, nn_reference.run(model.to_hal(), inputs)[1], rtol=1e-5, atol=1e-6)


async def test_bad_inputs_and_outputs_are_bad_data(autojump_clock, nn):
    async with nn.createCompilation(sampleModel()) as compilation:
        await compilation.finish()
        execution = compilation.createExecution()
        with pytest.raises(BadDataError, match="elements"):
            execution.setInput(0, np.zeros((1, 8, 8, 2), np.float32))
        with pytest.raises(BadDataError, match="does not exist"):
            execution.setInput(2, np.zeros(16, np.float32))
        with pytest.raises(BadDataError, match="bytes"):
            execution.setInput(1, b"\0" * 10)
        with pytest.raises(BadDataError, match="not an array|cannot be one"):
            execution.setInput(1, "sixteen floats")
        with pytest.raises(BadDataError, match="read-only"):
            execution.setOutput(1, np.zeros((1, 10), np.float32).view().setflags(write=False) or b"\0" * 40)
        with pytest.raises(BadDataError, match="float32"):
            execution.setOutput(1, np.zeros((1, 10), np.int32))
        with pytest.raises(BadDataError, match="not set"):
            execution.setInput(0, sample_inputs()[0])
            await execution.compute_async()


async def test_options_after_finish_are_bad_state(autojump_clock, nn):
    async with nn.createCompilation(sampleModel()) as compilation:
        with pytest.raises(BadDataError):
            compilation.setPreference(7)
        await compilation.finish()
        with pytest.raises(BadStateError):
            compilation.setPreference(ExecutionPreference.LOW_POWER)
        with pytest.raises(BadStateError):
            await compilation.finish()
    with pytest.raises(BadStateError):
        compilation.createExecution()


async def test_blocking_compute_from_a_thread_and_start_compute(autojump_clock, nn):
    model = sampleModel()
    inputs = sample_inputs()
    async with nn.createCompilation(model) as compilation:
        await compilation.finish()
        execution = compilation.createExecution()
        for i, x in enumerate(inputs):
            execution.setInput(i, x)
        with pytest.raises(BadStateError, match="compute_async"):
            execution.compute()  # on the trio thread it would deadlock
        assert_matches_reference(model, inputs, await trio.to_thread.run_sync(execution.compute))
        # An execution runs once (Android 10): a second start, or a setter, is BAD_STATE.
        with pytest.raises(BadStateError, match="runs once"):
            await execution.startCompute()
        with pytest.raises(BadStateError, match="runs once"):
            execution.setInput(0, inputs[0])
        again = compilation.createExecution()
        for i, x in enumerate(inputs):
            again.setInput(i, x)
        event = await again.startCompute()
        assert_matches_reference(model, inputs, await event.wait())
        assert event.isDone


async def test_a_multi_step_cpu_and_driver_plan_passes_temporaries(autojump_clock, nn):
    # An FC on the NPU feeding a CPU-only step: emu-dsp cannot SOFTMAX, so with
    # [dsp, cpu] and LOW_POWER the graph splits dsp -> cpu -> dsp.
    model = Model()
    t = OperandType.TENSOR_FLOAT32
    x = model.addOperand(t, [1, 4])
    w = model.addOperand(t, [4, 4])
    b = model.addOperand(t, [4])
    fuse = model.addOperand(OperandType.INT32)
    beta = model.addOperand(OperandType.FLOAT32)
    h, s, y = (model.addOperand(t, [1, 4]) for _ in range(3))
    model.setOperandValue(w, np.eye(4, dtype=np.float32) * 2)
    model.setOperandValue(b, np.arange(4, dtype=np.float32))
    model.setOperandValue(fuse, FuseCode.NONE)
    model.setOperandValue(beta, 1.0)
    model.addOperation(OperationType.FULLY_CONNECTED, [x, w, b, fuse], [h])
    model.addOperation(OperationType.SOFTMAX, [h, beta], [s])
    model.addOperation(OperationType.RELU, [s], [y])
    model.identifyInputsAndOutputs([x], [y])
    model.finish()
    async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-dsp"), nn.cpu]) as compilation:
        compilation.setPreference(ExecutionPreference.LOW_POWER)
        await compilation.finish()
        assert [s.device.name for s in compilation.plan.steps] == ["emu-dsp", CPU_DEVICE_NAME, "emu-dsp"]
        inputs = [np.array([[0.5, -1.0, 2.0, 0.0]], np.float32)]
        assert_matches_reference(model, inputs, await run(compilation, inputs))


# ---- hints ------------------------------------------------------------------------------


class Scheduling:
    """The scheduling HAL as system_server sees it: configs in, work events out."""

    def __init__(self, stack):
        from interfaces.android.hardware.npu import IScheduling, ISchedulingCallback, SchedulingConfig

        self.IScheduling, ICallback, self.Config = IScheduling, ISchedulingCallback, SchedulingConfig
        self.stack = stack
        self.started = []
        started = self.started

        class Recorder(ICallback.Stub):
            async def onWorkRequested(self, info):
                pass

            async def onWorkStarted(self, info, reason):
                started.append(info)

            async def onWorkEnded(self, info, reason):
                pass

        self.recorder = Recorder()

    async def connect(self):
        service = await defaultServiceManager(self.stack.init).checkService("android.hardware.npu.IScheduling/default")
        self.hal = self.IScheduling.asInterface(service)
        await self.hal.setCallback(self.recorder)
        return self

    async def configure(self, **fields):
        config = self.Config(uid=APP_UID, appPriority=100, hasDirectAccess=True, **fields)
        await self.hal.setSchedulingConfigs([config])


async def prepared_execution(compilation, seed=3):
    await compilation.finish()
    return fresh_execution(compilation, seed)


def fresh_execution(compilation, seed=3):
    """Another execution of a finished compilation (an execution runs once)."""
    execution = compilation.createExecution()
    for i, x in enumerate(sample_inputs(seed)):
        execution.setInput(i, x)
    return execution


async def test_execution_hints_reach_the_scheduling_hal(autojump_clock, stack, nn):
    scheduling = await Scheduling(stack).connect()
    group = uuid.uuid4()
    async with nn.createCompilationForDevices(sampleModel(), [nn.getDeviceByName("emu-npu")]) as compilation:
        execution = await prepared_execution(compilation)
        execution.setJobPriority(250)
        execution.setGroupId(group)
        execution.setDebugFeatureId("camera.segmentation")
        await execution.compute_async()
        await trio.sleep(1)  # past the callback's debounce
    assert scheduling.started, "the HAL reported no work"
    info = scheduling.started[-1]
    assert info.jobPriority == 250
    assert info.uid == APP_UID
    assert info.originalUid == APP_UID
    assert bytes(info.groupId.uuid) == group.bytes
    assert info.debugFeatureId == "camera.segmentation"
    for bad in (-1, 1001, "high", True):
        with pytest.raises(BadDataError):
            execution.setJobPriority(bad)
    with pytest.raises(BadDataError):
        execution.setGroupId(b"short")


async def test_attribution_needs_the_uids_permission(autojump_clock, stack, nn):
    scheduling = await Scheduling(stack).connect()
    model = sampleModel()
    npu = nn.getDeviceByName("emu-npu")
    async with nn.createCompilationForDevices(model, [npu]) as strict, nn.createCompilation(model) as plain:
        refused = await prepared_execution(strict)
        refused.setOriginalUid(42)
        with pytest.raises(OpFailedError, match="refused"):
            await refused.compute_async()
        # A plain compilation computes anyway, on the CPU (its device refused the work).
        fallback = await prepared_execution(plain, seed=4)
        fallback.setOriginalUid(42)
        assert_matches_reference(model, sample_inputs(4), await fallback.compute_async())
        assert [d.name for d in plain.plan.devices] == [FLOAT_FASTEST]

        await scheduling.configure(canAttributeOtherUid=True)
        allowed = fresh_execution(strict)
        allowed.setOriginalUid(42)
        await allowed.compute_async()
        await trio.sleep(1)
    assert scheduling.started[-1].originalUid == 42
    assert scheduling.started[-1].uid == APP_UID


async def test_an_app_without_direct_access_is_refused_by_the_npu(autojump_clock, stack, nn):
    scheduling = await Scheduling(stack).connect()
    config = scheduling.Config(uid=APP_UID, appPriority=100, hasDirectAccess=False)
    await scheduling.hal.setSchedulingConfigs([config])
    model = sampleModel()
    async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as strict:
        with pytest.raises(OpFailedError):
            await (await prepared_execution(strict)).compute_async()
    async with nn.createCompilation(model) as plain:
        assert_matches_reference(model, sample_inputs(3), await (await prepared_execution(plain)).compute_async())


async def test_timing_is_the_emulated_time_of_the_work(autojump_clock, stack, nn):
    async with nn.createCompilationForDevices(sampleModel(), [nn.getDeviceByName("emu-npu")]) as compilation:
        execution = await prepared_execution(compilation)
        with pytest.raises(BadStateError, match="not computed"):
            execution.getDuration(DurationCode.ON_HARDWARE)
        execution.setMeasureTiming(True)
        await execution.compute_async()
        on_hardware = execution.getDuration(DurationCode.ON_HARDWARE)
        in_driver = execution.getDuration(DurationCode.IN_DRIVER)
        # On hardware: from the work's start on a channel to its end, in emulated ns,
        # exactly as the HAL recorded the driver's events; in driver: from submission.
        events = [e for e in stack.hal.recent if e.kind in (1, 2)]
        work = events[-1].work_id
        started = min(e.time_ns for e in events if e.work_id == work and e.kind == 1)
        ended = max(e.time_ns for e in events if e.work_id == work and e.kind == 2)
        assert on_hardware == ended - started > 0
        assert on_hardware <= in_driver < NO_DURATION
        with pytest.raises(BadDataError):
            execution.getDuration(7)
        # A run not measured has no durations to give (Android 10: BAD_STATE).
        unmeasured = fresh_execution(compilation)
        unmeasured.setMeasureTiming(False)
        await unmeasured.compute_async()
        with pytest.raises(BadStateError, match="not measured"):
            unmeasured.getDuration(DurationCode.IN_DRIVER)
    async with nn.createCompilation(sampleModel()) as plain:
        with pytest.raises(BadDataError, match="exactly one device"):
            (await prepared_execution(plain)).setMeasureTiming(True)


async def test_the_cpu_device_measures_nothing(autojump_clock, nn):
    async with nn.createCompilationForDevices(sampleModel(), [nn.getDeviceByName(CPU_DEVICE_NAME)]) as compilation:
        execution = await prepared_execution(compilation)
        execution.setMeasureTiming(True)
        await execution.compute_async()
        assert execution.getDuration(DurationCode.ON_HARDWARE) == NO_DURATION
        assert execution.getDuration(DurationCode.IN_DRIVER) == NO_DURATION


async def test_a_failed_run_has_no_durations(autojump_clock, stack, nn):
    async with nn.createCompilationForDevices(sampleModel(), [nn.getDeviceByName("emu-npu")]) as compilation:
        execution = await prepared_execution(compilation)
        execution.setMeasureTiming(True)
        await execution.compute_async()
        assert execution.getDuration(DurationCode.ON_HARDWARE) < NO_DURATION
        stack.hal.revoke_uid(APP_UID)  # the model is gone: the next run fails
        failing = fresh_execution(compilation)
        failing.setMeasureTiming(True)
        with pytest.raises(OpFailedError):
            await failing.compute_async()
        assert failing.getDuration(DurationCode.ON_HARDWARE) == NO_DURATION


# ---- failures: fallback or not ------------------------------------------------------------


async def wait_for_work_in_flight(stack):
    while not stack.hal.in_flight:
        await trio.sleep(0.0001)


async def test_a_hal_killed_mid_execution_is_dead_object_for_devices(autojump_clock, stack, nn):
    async with nn.createCompilationForDevices(sampleModel(), [nn.getDeviceByName("emu-npu")]) as compilation:
        await compilation.finish()
        execution = compilation.createExecution()
        for i, x in enumerate(sample_inputs()):
            execution.setInput(i, x)
        event = await execution.startCompute()
        await wait_for_work_in_flight(stack)
        stack.kill_hal()
        with pytest.raises(DeadObjectError) as info:
            await event.wait()
        assert info.value.resultCode == ResultCode.DEAD_OBJECT == 14


async def test_a_hal_killed_mid_execution_falls_back_to_the_cpu(autojump_clock, stack, nn):
    model = sampleModel()
    inputs = sample_inputs()
    async with nn.createCompilation(model) as compilation:
        await compilation.finish()
        assert {d.name for d in compilation.plan.devices} == {FLOAT_FASTEST}
        execution = compilation.createExecution()
        for i, x in enumerate(inputs):
            execution.setInput(i, x)
        event = await execution.startCompute()
        await wait_for_work_in_flight(stack)
        stack.kill_hal()
        assert_matches_reference(model, inputs, await event.wait())
        # The compilation now avoids the dead device for good.
        assert [d.name for d in compilation.plan.devices] == [CPU_DEVICE_NAME]
        assert_matches_reference(model, inputs, await run(compilation, inputs))


async def test_a_failed_work_is_op_failed_or_a_fallback(autojump_clock, stack, nn):
    model = sampleModel()
    inputs = sample_inputs()
    npu = nn.getDeviceByName("emu-npu")
    async with nn.createCompilationForDevices(model, [npu]) as strict, nn.createCompilation(model) as plain:
        await strict.finish()
        await plain.finish()
        stack.driver.fail_next_work(stack.driver.device_by_name("emu-npu"))
        with pytest.raises(OpFailedError):
            await run(strict, inputs)
        stack.driver.fail_next_work(stack.driver.device_by_name(FLOAT_FASTEST))
        assert_matches_reference(model, inputs, await run(plain, inputs))
        # One failed work is that run's problem: the device keeps the plan and runs the next.
        assert [d.name for d in plain.plan.devices] == [FLOAT_FASTEST]
        events_before = stack.hal.stats.read
        assert_matches_reference(model, inputs, await run(plain, inputs))
        await trio.sleep(0.1)
        assert stack.hal.stats.read > events_before, "the next run did not reach the device"
        assert_matches_reference(model, inputs, await run(strict, inputs))


async def test_a_model_too_big_to_prepare_falls_back_or_fails(autojump_clock, nn):
    model = sampleModel()
    npu = nn.getDeviceByName("emu-npu")
    strict = nn.createCompilationForDevices(model, [npu])
    strict.setEmulatedModelSize(64 << 30)  # 64 GiB: more than the NPU's weight memory
    with pytest.raises(ResourceExhaustedPersistentError):
        await strict.finish()
    async with nn.createCompilation(model) as plain:
        plain.setEmulatedModelSize(64 << 30)
        await plain.finish()
        # Every driver refuses it, so the CPU runs it all.
        assert [d.name for d in plain.plan.devices] == [CPU_DEVICE_NAME]
        inputs = sample_inputs()
        assert_matches_reference(model, inputs, await run(plain, inputs))


async def test_earlier_results_survive_later_runs_and_executions_run_concurrently(autojump_clock, nn):
    model = sampleModel()
    async with nn.createCompilation(model) as compilation:
        await compilation.finish()
        execution = compilation.createExecution()
        for i, x in enumerate(sample_inputs(1)):
            execution.setInput(i, x)
        first = await execution.compute_async()
        saved = [a.copy() for a in first]
        second_execution = compilation.createExecution()
        for i, x in enumerate(sample_inputs(2)):
            second_execution.setInput(i, x)
        event = await second_execution.startCompute()
        with pytest.raises(BadStateError, match="computing"):
            await second_execution.startCompute()
        second = await event.wait()
        assert not np.array_equal(first[1], second[1])
        for a, b in zip(first, saved, strict=True):
            np.testing.assert_array_equal(a, b)

        results = {}

        async def one(seed):
            inputs = sample_inputs(seed)
            results[seed] = (inputs, await run(compilation, inputs))

        async with trio.open_nursery() as nursery:
            for seed in (3, 4, 5):
                nursery.start_soon(one, seed)
        for inputs, outputs in results.values():
            assert_matches_reference(model, inputs, outputs)


async def test_every_device_set_and_preference_gives_the_reference_result(autojump_clock, nn):
    """Each subset of the five devices, under each preference: one plan, one run."""
    import itertools

    model = sampleModel()
    inputs = sample_inputs(11)
    expected = nn_reference.run(model.to_hal(), inputs)
    layouts = set()
    for size in range(1, len(nn.devices) + 1):
        for devices in itertools.combinations(nn.devices, size):
            for preference in (ExecutionPreference.FAST_SINGLE_ANSWER, ExecutionPreference.LOW_POWER):
                async with nn.createCompilationForDevices(model, devices) as compilation:
                    compilation.setPreference(preference)
                    if [d.name for d in devices] == ["emu-dsp"]:
                        with pytest.raises(BadDataError):
                            await compilation.finish()
                        continue
                    await compilation.finish()
                    layouts.add(tuple((s.device.name, s.operations) for s in compilation.plan.steps))
                    outputs = await run(compilation, inputs)
                for got, want in zip(outputs, expected, strict=True):
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Single-device plans, and splits of several shapes among them.
    assert sum(len(layout) > 1 for layout in layouts) >= 3


async def test_the_emulated_model_size_is_reserved_on_the_devices_that_run_it(autojump_clock, stack, nn):
    driver = stack.driver
    npu, dsp = driver.device_by_name("emu-npu"), driver.device_by_name("emu-dsp")
    before = {d.name: driver.memory_info(d).weight_memory_used for d in (npu, dsp)}
    size = 256 << 20
    model = sampleModel()
    devices = [nn.getDeviceByName("emu-npu"), nn.getDeviceByName("emu-dsp")]
    async with nn.createCompilationForDevices(model, devices) as c:
        c.setPreference(ExecutionPreference.LOW_POWER)
        c.setEmulatedModelSize(size)
        await c.finish()
        used = {d.name: driver.memory_info(d).weight_memory_used - before[d.name] for d in (npu, dsp)}
        # Each device holds its steps' share of the weights; together, the whole model.
        assert used["emu-npu"] > 0 and used["emu-dsp"] > 0
        assert sum(used.values()) == pytest.approx(size, rel=0.01)
    await trio.sleep(0.1)
    assert {d.name: driver.memory_info(d).weight_memory_used for d in (npu, dsp)} == before  # released
    with pytest.raises(BadDataError):
        nn.createCompilation(model).setEmulatedModelSize(-1)


async def test_the_model_load_request_reaches_every_prepared_model_of_the_compilation(autojump_clock, stack, nn):
    model = sampleModel()
    devices = [nn.getDeviceByName("emu-npu"), nn.getDeviceByName("emu-dsp")]
    async with nn.createCompilationForDevices(model, devices) as named, nn.createCompilation(model) as unnamed:
        named.setPreference(ExecutionPreference.LOW_POWER)  # split across both devices
        named.setModelLoadRequest(ModelLoadRequest.Builder(-7).build())
        await named.finish()
        await unnamed.finish()
        assert {p.device_name for p in stack.hal.prepared if p.load_request == -7} == {"emu-npu", "emu-dsp"}
        assert {p.load_request for p in stack.hal.prepared} == {-7, None}  # the unnamed one names none
        with pytest.raises(BadStateError):
            named.setModelLoadRequest(8)
    for bad in (2**31, "7", 1.0, True, None):
        with pytest.raises(BadDataError, match="setModelLoadRequest"):
            nn.createCompilation(model).setModelLoadRequest(bad)


async def test_a_hal_dead_before_finish_is_dead_object_for_devices_and_the_cpu_otherwise(autojump_clock, stack, nn):
    model = sampleModel()
    strict = nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")])
    plain = nn.createCompilation(model)
    stack.kill_hal()
    await trio.sleep(0.1)
    with pytest.raises(DeadObjectError):
        await strict.finish()
    assert not strict.isFinished
    await plain.finish()
    assert [d.name for d in plain.plan.devices] == [CPU_DEVICE_NAME]
    inputs = sample_inputs()
    assert_matches_reference(model, inputs, await run(plain, inputs))
    await plain.aclose()
    await strict.aclose()


async def test_errors_in_the_runtime_block_are_not_wrapped(autojump_clock, app):
    with pytest.raises(BadDataError):
        async with open_nn_runtime(app, environ={}) as nn:
            nn.getDevice(99)


async def test_refresh_after_a_hal_restart_brings_the_devices_back(autojump_clock, stack, nn):
    model = sampleModel()
    old_npu = nn.getDeviceByName("emu-npu")
    stack.kill_hal()
    await trio.sleep(0.1)
    assert not nn.isAlive(old_npu)
    await stack.restart_hal()
    # A plain compilation notices the dead devices and discovers again.
    async with nn.createCompilation(model) as compilation:
        await compilation.finish()
        assert [d.name for d in compilation.plan.devices] == [FLOAT_FASTEST]
        inputs = sample_inputs()
        assert_matches_reference(model, inputs, await run(compilation, inputs))
    new_npu = nn.getDeviceByName("emu-npu")
    assert new_npu is not old_npu and nn.isAlive(new_npu)
    assert [d.name for d in nn.devices] == [*DRIVERS, CPU_DEVICE_NAME]
    # The old descriptor still belongs to this runtime; it is just dead.
    with pytest.raises(DeadObjectError):
        await nn.createCompilationForDevices(model, [old_npu]).finish()
    await nn.refresh()
    assert nn.getDeviceByName("emu-npu") is new_npu  # a live device keeps its descriptor


async def test_cpu_work_is_marked_for_the_trace_as_planned_or_fallback(autojump_clock, stack, nn, tmp_path):
    """Work on nnapi-reference happens in the app, where no HAL sees it: the runtime marks
    every CPU step in the emulator's trace_marker (here a runtime dir of our own)."""
    import json

    from framework.nn import TRACE_MARKER_NAME
    from framework.nn._atrace import CpuTracer

    nn._cpu_tracer = CpuTracer(tmp_path, 10123, 4242)
    marker = tmp_path / TRACE_MARKER_NAME

    def records():
        return [json.loads(line) for line in marker.read_text().splitlines()] if marker.exists() else []

    model = sampleModel()
    inputs = sample_inputs()
    async with nn.createCompilationForDevices(model, [nn.cpu]) as on_cpu, nn.createCompilation(model) as plain:
        await on_cpu.finish()
        await plain.finish()
        await run(plain, inputs)  # all on a driver device: nothing to mark
        assert records() == []
        await run(on_cpu, inputs)
        (planned,) = records()
        assert planned["why"] == "planned" and "failed_device" not in planned
        assert (planned["uid"], planned["pid"], planned["device"]) == (10123, 4242, "nnapi-reference")
        assert planned["operations"] == len(model.to_hal().operations)
        assert 0 < planned["wall_start_ns"] <= planned["wall_end_ns"]
        stack.driver.fail_next_work(stack.driver.device_by_name(FLOAT_FASTEST))
        assert_matches_reference(model, inputs, await run(plain, inputs))
        fallback = records()[1:]
        assert fallback and all(r["why"] == "fallback" and r["failed_device"] == FLOAT_FASTEST for r in fallback)


# ---- compilation caching ---------------------------------------------------------------------


TOKEN = bytes(range(32))


async def cached_compilation(nn, model, cache_dir, token=TOKEN, devices=("emu-npu",), preference=None):
    compilation = nn.createCompilationForDevices(model, [nn.getDeviceByName(d) for d in devices])
    compilation.setCaching(cache_dir, token)
    if preference is not None:
        compilation.setPreference(preference)
    await compilation.finish()
    return compilation


async def test_a_second_compilation_is_served_from_the_cache(autojump_clock, stack, nn, tmp_path):
    model = sampleModel()
    stats = stack.hal.stats
    async with await cached_compilation(nn, model, tmp_path) as first:
        assert (stats.prepared, stats.cache_written, stats.prepared_from_cache) == (1, 1, 0)
        # Android 10's names: the step token as 64 letters A..P, then A.. (model) / a.. (data).
        names = sorted(p.name for p in tmp_path.iterdir())
        assert len(names) == 2 and {n[-1] for n in names} == {"A", "a"} and names[0][:-1] == names[1][:-1]
        assert len(names[0]) == 65 and set(names[0][:-1]) <= set("ABCDEFGHIJKLMNOP")
        assert_matches_reference(model, sample_inputs(), await run(first, sample_inputs()))
    async with await cached_compilation(nn, model, tmp_path) as second:
        # prepareModel was not called: the HAL prepared it from the files.
        assert (stats.prepared, stats.prepared_from_cache) == (1, 1)
        assert_matches_reference(model, sample_inputs(5), await run(second, sample_inputs(5)))
    # Another token, another device or another preference is another cache.
    async with await cached_compilation(nn, model, tmp_path, token=bytes(32)):
        assert (stats.prepared, stats.prepared_from_cache) == (2, 1)
    async with await cached_compilation(nn, model, tmp_path, devices=("emu-gpu",)):
        assert (stats.prepared, stats.prepared_from_cache) == (3, 1)
    assert len(list(tmp_path.iterdir())) == 6


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "swap"])
async def test_a_damaged_cache_falls_back_to_a_full_prepare(autojump_clock, stack, nn, tmp_path, damage):
    model = sampleModel()
    stats = stack.hal.stats
    async with await cached_compilation(nn, model, tmp_path):
        pass
    model_file = next(p for p in tmp_path.iterdir() if p.name.endswith("A"))
    data_file = next(p for p in tmp_path.iterdir() if p.name.endswith("a"))
    raw = data_file.read_bytes()
    if damage == "truncate":
        data_file.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        data_file.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    elif damage == "empty":
        model_file.write_bytes(b"")
    else:  # each file is sound, but they are not each other's
        model_file.write_bytes(data_file.read_bytes())
    async with await cached_compilation(nn, model, tmp_path) as again:
        assert (stats.prepared, stats.prepared_from_cache, stats.cache_refused) == (2, 0, 1)
        assert_matches_reference(model, sample_inputs(), await run(again, sample_inputs()))
    # The full prepare wrote a sound cache again.
    async with await cached_compilation(nn, model, tmp_path):
        assert stats.prepared_from_cache == 1


async def test_partitioned_steps_are_cached_one_by_one(autojump_clock, stack, nn, tmp_path):
    model = sampleModel()
    stats = stack.hal.stats
    devices = ("emu-npu", "emu-dsp")
    low = ExecutionPreference.LOW_POWER
    async with await cached_compilation(nn, model, tmp_path, devices=devices, preference=low) as first:
        steps = len(first.plan.steps)
        assert steps >= 3 and {s.device.name for s in first.plan.steps} == set(devices)
        assert stats.cache_written == steps
    async with await cached_compilation(nn, model, tmp_path, devices=devices, preference=low) as second:
        assert stats.prepared_from_cache == steps and stats.prepared == steps
        assert_matches_reference(model, sample_inputs(), await run(second, sample_inputs()))
    assert len(list(tmp_path.iterdir())) == 2 * steps  # each step its own files


async def test_caching_arguments_and_an_unusable_directory(autojump_clock, stack, nn, tmp_path):
    compilation = nn.createCompilation(sampleModel())
    with pytest.raises(BadDataError, match="32 bytes"):
        compilation.setCaching(tmp_path, b"short")
    with pytest.raises(BadDataError, match="directory path"):
        compilation.setCaching(42, TOKEN)
    # A directory that does not exist costs the cache, never the compilation.
    compilation.setCaching(tmp_path / "missing", TOKEN)
    async with compilation:
        await compilation.finish()
        assert_matches_reference(sampleModel(), sample_inputs(), await run(compilation, sample_inputs()))
        with pytest.raises(BadStateError):
            compilation.setCaching(tmp_path, TOKEN)
    assert stack.hal.stats.cache_written == 0


# ---- bursts ------------------------------------------------------------------------------


def hal_bursts(stack):
    return [b for p in stack.hal.prepared for b in p.bursts]


async def burst_run(compilation, burst, inputs):
    execution = compilation.createExecution()
    for i, x in enumerate(inputs):
        execution.setInput(i, x)
    return await execution.burstCompute_async(burst)


async def test_a_burst_runs_executions_over_one_driver_burst_and_cached_memory(autojump_clock, stack, nn):
    model = sampleModel()
    async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as compilation:
        await compilation.finish()
        async with compilation.createBurst() as burst:
            first = await burst_run(compilation, burst, sample_inputs(1))
            (hal_burst,) = hal_bursts(stack)
            (token,) = hal_burst.memories  # the burst's request pool, mapped once
            mapping = hal_burst.memories[token][0]
            for seed in (2, 3):
                assert_matches_reference(model, sample_inputs(seed), await burst_run(compilation, burst, sample_inputs(seed)))
            assert hal_bursts(stack) == [hal_burst] and hal_burst.memories[token][0] is mapping
            # Results are the app's: a later execution of the burst does not overwrite them.
            assert_matches_reference(model, sample_inputs(1), first)
            # An app Memory gets its own token, the same on every execution.
            memory = Memory.create(sample_inputs(4)[0].nbytes)
            memory.view(0, memory.size).cast("B")[:] = sample_inputs(4)[0].tobytes()
            for _ in range(2):
                execution = compilation.createExecution()
                execution.setInputFromMemory(0, memory, 0, memory.size)
                execution.setInput(1, sample_inputs(4)[1])
                assert_matches_reference(model, sample_inputs(4), await execution.burstCompute_async(burst))
            assert len(hal_burst.memories) == 2
        # Burst_free: the driver drops what it cached.
        assert hal_burst.memories == {}
        memory.close()


async def test_one_execution_of_a_burst_at_a_time(autojump_clock, stack, nn):
    async with nn.createCompilationForDevices(sampleModel(), [nn.getDeviceByName("emu-npu")]) as compilation:
        await compilation.finish()
        burst = compilation.createBurst()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(burst_run, compilation, burst, sample_inputs())
            await wait_for_work_in_flight(stack)
            with pytest.raises(BadStateError, match="another execution of this burst"):
                await burst_run(compilation, burst, sample_inputs())
            with pytest.raises(BadStateError):
                await burst.aclose()
        await burst_run(compilation, burst, sample_inputs())  # free again once it ended
        await burst.aclose()
        with pytest.raises(BadStateError, match="closed"):
            await burst_run(compilation, burst, sample_inputs())
        async with nn.createCompilationForDevices(sampleModel(), [nn.getDeviceByName("emu-npu")]) as other:
            await other.finish()
            async with other.createBurst() as foreign:
                with pytest.raises(BadDataError, match="another compilation"):
                    await burst_run(compilation, foreign, sample_inputs())
    unfinished = nn.createCompilation(sampleModel())
    with pytest.raises(BadStateError, match="not finished"):
        unfinished.createBurst()
    await unfinished.aclose()


async def test_a_partitioned_burst_has_one_driver_burst_per_driver_step(autojump_clock, stack, nn):
    model = sampleModel()
    devices = [nn.getDeviceByName("emu-npu"), nn.getDeviceByName("emu-dsp"), nn.cpu]
    async with nn.createCompilationForDevices(model, devices) as compilation:
        compilation.setPreference(ExecutionPreference.LOW_POWER)
        await compilation.finish()
        driver_steps = [s for s in compilation.plan.steps if s.device.name != CPU_DEVICE_NAME]
        assert len(driver_steps) >= 2
        async with compilation.createBurst() as burst:
            for seed in (1, 2):
                assert_matches_reference(model, sample_inputs(seed), await burst_run(compilation, burst, sample_inputs(seed)))
            assert len(hal_bursts(stack)) == len(driver_steps)
            # Each driver burst maps the one request pool once.
            assert all(len(b.memories) == 1 for b in hal_bursts(stack))


# ---- output shapes from the driver -------------------------------------------------------


async def test_output_dimensions_are_the_drivers_and_an_insufficient_output_is_the_apps_error(
    autojump_clock, stack, nn
):
    model = sampleModel()
    async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as compilation:
        execution = await prepared_execution(compilation)
        with pytest.raises(BadStateError, match="not computed"):
            execution.getOutputOperandDimensions(0)
        outputs = await execution.compute_async()
        assert execution.getOutputOperandDimensions(0) == list(outputs[0].shape)
        assert execution.getOutputOperandRank(1) == outputs[1].ndim
        with pytest.raises(BadDataError):
            execution.getOutputOperandDimensions(len(outputs))
        # The HAL's ExecutionResult is the contract: a driver that finds output 0's
        # buffer too small says so with the size it needs.
        too_small(stack)
        execution = fresh_execution(compilation)
        with pytest.raises(OutputInsufficientSizeError, match="too small"):
            await execution.compute_async()
        # The step's output 0 is the model's output at this position.
        position = compilation.plan.model.outputIndexes.index(compilation.plan.steps[0].outputs[0])
        assert execution.getOutputOperandDimensions(position) == [7, 9]
        assert execution.getOutputOperandRank(position) == 2
    async with nn.createCompilation(model) as plain:
        # No CPU fallback either: the app must give a bigger buffer.
        execution = await prepared_execution(plain)
        too_small(stack)
        with pytest.raises(OutputInsufficientSizeError):
            await execution.compute_async()


def too_small(stack):
    """Make the HAL's one prepared model report its step output 0 insufficient, as [7, 9]."""
    (prepared,) = stack.hal.prepared
    real = prepared._execute

    async def execute(*args):
        result = await real(*args)
        shapes = list(result.outputShapes)
        shapes[0] = shapes[0].replace(dimensions=[7, 9], isSufficient=False)
        return result.replace(outputSufficientSize=False, outputShapes=shapes)

    prepared._execute = execute
