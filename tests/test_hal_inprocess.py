"""The vendor HAL in one trio run: servicemanager, HAL and clients on a MemoryNetwork,
a virtual-clock driver whose emulated time follows trio's autojump MockClock."""

from __future__ import annotations

import math

import numpy as np
import pytest
import trio

from framework.binder import (
    DeadObjectException,
    IllegalArgumentException,
    SecurityException,
    ServiceSpecificException,
    SharedMemory,
    defaultServiceManager,
    open_binder_runtime,
)
from framework.emulator import _control as emulator_control
from framework.emulator import open_stack
from npuhal import FuseCode, ModelBuilder, OperationType, open_driver
from nn_reference import fully_connected  # the plain numpy oracle
from interfaces.android.hardware.neuralnetworks import DataLocation as ADataLocation
from interfaces.android.hardware.neuralnetworks import (
    ErrorStatus,
    ExecutionHints,
    ExecutionPreference,
    IDevice,
    ModelLoadToken,
    Priority,
    Request,
    RequestArgument,
    Subgraph,
)
from interfaces.android.hardware.neuralnetworks import Model as AModel
from interfaces.android.hardware.neuralnetworks import Operand as AOperand
from interfaces.android.hardware.neuralnetworks import Operation as AOperation
from interfaces.android.hardware.npu import EndReason, IScheduling, ISchedulingCallback, NpuUuid, SchedulingConfig, StartReason
from interfaces.npuemu.hal import IHalControl, IHalListener
from npuhal._hal import valid_instance_name

APP = 10001
OTHER_APP = 10002
LONG = 100_000  # cost scale: a job of tens of emulated ms on one channel


# ---- client-side helpers ------------------------------------------------------


def aidl_model(model) -> AModel:
    """``model`` as one call sends it: the same parcelable, its pools copied into fresh
    SharedMemory regions (the HAL closes the regions it receives)."""
    pools = []
    for i, pool in enumerate(model.pools):
        data = bytes(pool.mapReadOnly())
        shm = SharedMemory.create(f"model-pool-{i}", len(data))
        with shm.map() as m:
            m[:] = data
        pools.append(shm)
    return model.replace(pools=pools)


def fc_model(n_in=16, units=8, seed=0):
    rng = np.random.default_rng(seed)
    m = ModelBuilder()
    x = m.input((1, n_in))
    w = rng.standard_normal((units, n_in), dtype=np.float32)
    b = rng.standard_normal(units, dtype=np.float32)
    y = m.operation(OperationType.FULLY_CONNECTED, [x, m.constant(w), m.constant(b), m.int32(FuseCode.RELU)], (1, units))
    m.output(y)
    return m.build(), w, b


class Execution:
    """One request: inputs and outputs in one SharedMemory pool (zero copy in the HAL)."""

    def __init__(self, inputs, output_shapes):
        self.inputs = [np.ascontiguousarray(x, np.float32) for x in inputs]
        self.output_shapes = output_shapes
        sizes = [x.nbytes for x in self.inputs] + [4 * math.prod(s) for s in output_shapes]
        self.offsets = list(np.cumsum([0] + sizes[:-1]))
        self.shm = SharedMemory.create("request", sum(sizes))
        self.map = self.shm.map()
        for x, off in zip(self.inputs, self.offsets):
            self.map[off : off + x.nbytes] = x.tobytes()

    def request(self):
        n = len(self.inputs)
        args = [
            RequestArgument(location=ADataLocation(poolIndex=0, offset=int(off), length=int(x.nbytes)))
            for x, off in zip(self.inputs, self.offsets)
        ]
        outs = [
            RequestArgument(location=ADataLocation(poolIndex=0, offset=int(off), length=4 * math.prod(s)))
            for s, off in zip(self.output_shapes, self.offsets[n:])
        ]
        return Request(inputs=args, outputs=outs, pools=[self.shm])

    def output(self, i):
        off = int(self.offsets[len(self.inputs) + i])
        shape = self.output_shapes[i]
        return np.frombuffer(self.map, np.float32, math.prod(shape), off).reshape(shape).copy()


class Recorder(ISchedulingCallback.Stub):
    def __init__(self):
        super().__init__()
        self.events = []
        self.changed = trio.Event()

    def _add(self, item):
        self.events.append(item)
        self.changed.set()
        self.changed = trio.Event()

    async def onWorkRequested(self, info):
        self._add(("requested", info, None))

    async def onWorkStarted(self, info, reason):
        self._add(("started", info, StartReason(reason)))

    async def onWorkEnded(self, info, reason):
        self._add(("ended", info, EndReason(reason)))

    def kinds(self):
        return [k for k, _, _ in self.events]


class World:
    def __init__(self, net, nursery, init, driver, hal):
        self.net = net
        self.nursery = nursery
        self.init = init
        self.driver = driver
        self.hal = hal

    async def process(self, uid):
        """A client 'process' with its own runtime; returns (runtime, kill)."""
        pid = self.net.spawn(self.net.init_pid)
        await defaultServiceManager(self.init).registerProcess(pid, uid)

        async def proc(task_status):
            with trio.CancelScope() as scope:
                async with open_binder_runtime(network=self.net, pid=pid) as rt:
                    task_status.started((rt, scope))
                    await trio.sleep_forever()

        return await self.nursery.start(proc)

    async def service(self, rt, name, iface):
        return iface.asInterface(await defaultServiceManager(rt).checkService(name))

    async def scheduling(self, rt):
        return await self.service(rt, "android.hardware.npu.IScheduling/default", IScheduling)

    async def device(self, rt, name):
        return await self.service(rt, f"android.hardware.neuralnetworks.IDevice/{name}", IDevice)

    async def control(self, rt):
        return await self.service(rt, "npuemu.hal.IHalControl/default", IHalControl)


@pytest.fixture
async def world(autojump_clock, request):
    hal_options = getattr(request, "param", {})  # indirect parametrization: serve_hal's options
    async with open_driver(clock="virtual") as driver:
        async with open_stack(driver, system_server=False, hal_options=hal_options) as stack:
            yield World(stack.network, stack.nursery, stack.init, driver, stack.hal)


@pytest.fixture
async def system(world):
    rt, _ = await world.process(1000)
    return rt


async def configure(world, system, *configs):
    sched = await world.scheduling(system)
    await sched.setSchedulingConfigs(list(configs))
    return sched


def app_config(uid=APP, priority=500, **kw):
    kw.setdefault("hasDirectAccess", True)
    return SchedulingConfig(uid=uid, appPriority=priority, minPriority=0, maxPriority=2000, **kw)


async def prepare(world, rt, device="emu-npu", model=None, size=0, request_id=None):
    """prepareModel on ``device``; ``request_id`` names the NpuManager request (a ModelLoadToken)."""
    model = model or fc_model()[0]
    dev = await world.device(rt, device)
    token = None if request_id is None else ModelLoadToken(requestId=request_id)
    return await dev.prepareModel(aidl_model(model), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, -1, size, token)


async def wait_for(recorder, predicate):
    while not predicate(recorder):
        await recorder.changed.wait()


# ---- registration, names ------------------------------------------------------


async def test_every_device_and_the_private_interface_are_registered(autojump_clock, world, system):
    names = await defaultServiceManager(system).listServices(15)
    assert "android.hardware.npu.IScheduling/default" in names
    assert "npuemu.hal.IHalControl/default" in names
    devices = sorted(n.split("/", 1)[1] for n in names if n.startswith("android.hardware.neuralnetworks.IDevice/"))
    assert devices == ["emu-dsp", "emu-gpu", "emu-hetero", "emu-npu"]
    control = await world.control(system)
    assert await control.getDeviceParts("emu-hetero") == ["emu-npu", "emu-dsp"]
    assert await control.getDeviceParts("emu-npu") == []


def test_instance_names_follow_vendor_dash_device():
    assert valid_instance_name("emu-npu") and valid_instance_name("qti-hta")
    for bad in ("emunpu", "-npu", "emu-", "emu-n-pu", "", "-"):
        assert not valid_instance_name(bad), bad


async def test_idevice_describes_the_driver_device(autojump_clock, world, system):
    npu = await world.device(system, "emu-npu")
    hetero = await world.device(system, "emu-hetero")
    assert int(await npu.getType()) == 4 and int(await hetero.getType()) == 1  # ACCELERATOR, OTHER
    version = await npu.getVersionString()
    assert version == world.driver.device_by_name("emu-npu").version and version
    assert int(await npu.getStatus()) == 0  # AVAILABLE
    caps = await npu.getCapabilities()
    types = [int(p.type) for p in caps.operandPerformance]
    assert types == sorted(types) and types
    assert all(p.info.execTime > 0 and p.info.powerUsage > 0 for p in caps.operandPerformance)
    cache = await npu.getNumberOfCacheFilesNeeded()
    assert cache.numModelCache <= 32 and cache.numDataCache <= 32
    assert await npu.getSupportedExtensions() == []


async def test_supported_operations_answers_per_operation(autojump_clock, world, system):
    model, _, _ = fc_model()
    npu = await world.device(system, "emu-npu")
    assert await npu.getSupportedOperations(aidl_model(model)) == [True]
    broken = aidl_model(model)
    broken = broken.replace(main=broken.main.replace(operations=[AOperation(type=9, inputs=[0, 99], outputs=[1])]))
    with pytest.raises(ServiceSpecificException) as info:
        await npu.getSupportedOperations(broken)
    assert info.value.error_code == ErrorStatus.INVALID_ARGUMENT


async def test_a_valid_operation_the_device_cannot_run_is_false_not_an_error(autojump_clock, world, system):
    # ARGMAX is valid NNAPI and npuemu computes it, but emu-npu does not claim it.
    axis = AOperand(type=1, lifetime=3, location=ADataLocation(poolIndex=0, offset=0, length=4))
    model = AModel(
        main=Subgraph(
            operands=[AOperand(type=3, dimensions=[1, 4], lifetime=1), axis,
                      AOperand(type=4, dimensions=[1], lifetime=2)],
            operations=[AOperation(type=39, inputs=[0, 1], outputs=[2])],
            inputIndexes=[0],
            outputIndexes=[2],
        ),
        operandValues=(1).to_bytes(4, "little"),
    )
    npu = await world.device(system, "emu-npu")
    assert await npu.getSupportedOperations(model) == [False]
    with pytest.raises(ServiceSpecificException) as info:
        await npu.prepareModel(model, ExecutionPreference.LOW_POWER, Priority.LOW, -1, 0, None)
    assert info.value.error_code == ErrorStatus.INVALID_ARGUMENT


# ---- IScheduling ----------------------------------------------------------------


async def test_configs_are_validated_and_refusals_change_nothing(autojump_clock, world, system):
    sched = await world.scheduling(system)
    await sched.setSchedulingConfigs([app_config(1001, 500)])
    for bad in ([app_config(1001, -1)], [app_config(1001, 500), app_config(1001, 400)], [app_config(1002, 1001)]):
        with pytest.raises(IllegalArgumentException):
            await sched.setSchedulingConfigs(bad)
        with pytest.raises(IllegalArgumentException):
            await sched.updateSchedulingConfigs(bad)
    await sched.updateSchedulingConfigs([app_config(1002, 100)])
    await sched.setCallback(Recorder())
    await sched.setCallback(None)
    # The valid config of 1001 is still the one in force: 500 + job 0 = 500.
    assert await effective_priority(world, system, 1001, 0) == 500
    assert await effective_priority(world, system, 1002, 10) == 110


async def effective_priority(world, system, uid, job_priority):
    control = await world.control(system)
    events = await control.runTestInference(job_priority, -1, "emu-npu", uid)
    assert events, "the test inference caused no work events"
    return events[0].info.effectivePriority


async def test_only_system_and_root_may_call_ischeduling(autojump_clock, world, system):
    for uid in (APP, 2000):
        rt, _ = await world.process(uid)
        sched = await world.scheduling(rt)
        for call in (
            sched.setSchedulingConfigs([app_config()]),
            sched.updateSchedulingConfigs([app_config()]),
            sched.setCallback(None),
        ):
            with pytest.raises(SecurityException):
                await call
    root = world.init
    await (await world.scheduling(root)).setSchedulingConfigs([app_config()])


# ---- events -----------------------------------------------------------------------


async def test_one_inference_yields_exactly_requested_started_ended(autojump_clock, world, system):
    sched = await configure(world, system, app_config(priority=500))
    recorder = Recorder()
    await sched.setCallback(recorder)
    app, _ = await world.process(APP)
    model, w, b = fc_model()
    prepared = await prepare(world, app, model=model)
    x = np.arange(16, dtype=np.float32).reshape(1, 16) / 8
    ex = Execution([x], [(1, 8)])
    await prepared.executeWithHints(ex.request(), False, -1, ExecutionHints(jobPriority=300))
    await wait_for(recorder, lambda r: len(r.events) == 3)
    await trio.sleep(0.2)  # nothing more comes after the debounce window
    assert recorder.kinds() == ["requested", "started", "ended"]
    infos = [info for _, info, _ in recorder.events]
    assert [i.jobPriority for i in infos] == [300] * 3
    assert all(i.effectivePriority >= 500 for i in infos)
    assert all(i.uid == APP and i.originalUid == APP and i.debugPid == app.pid for i in infos)
    assert infos[0].id < infos[1].id < infos[2].id
    assert infos[0].timestampMs <= infos[1].timestampMs <= infos[2].timestampMs
    assert all(i.deviceNumber == world.driver.device_by_name("emu-npu").number for i in infos)
    assert recorder.events[1][2] == StartReason.INITIAL and recorder.events[2][2] == EndReason.COMPLETED


async def test_a_burst_is_debounced_to_one_triple(autojump_clock, world, system):
    sched = await configure(world, system, app_config())
    recorder = Recorder()
    await sched.setCallback(recorder)
    app, _ = await world.process(APP)
    prepared = await prepare(world, app)
    for _ in range(5):
        ex = Execution([np.ones((1, 16))], [(1, 8)])
        await prepared.executeSynchronously(ex.request(), False, -1, 0)
    await trio.sleep(0.2)
    assert recorder.kinds() == ["requested", "started", "ended"]


async def test_execute_results_equal_the_numpy_reference_and_are_written_in_place(autojump_clock, world, system):
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    model, w, b = fc_model(seed=3)
    prepared = await prepare(world, app, model=model)
    x = np.random.default_rng(1).standard_normal((1, 16)).astype(np.float32)
    ex = Execution([x], [(1, 8)])
    result = await prepared.executeSynchronously(ex.request(), True, -1, 0)
    expected = fully_connected(x, w, b, FuseCode.RELU)
    np.testing.assert_allclose(ex.output(0), expected, rtol=1e-5, atol=1e-6)
    assert result.outputSufficientSize and list(result.outputShapes[0].dimensions) == [1, 8]
    assert result.timing.timeOnDeviceNs > 0 and result.timing.timeInDriverNs >= result.timing.timeOnDeviceNs


async def test_events_without_a_callback_are_dropped_and_counted(autojump_clock, world, system):
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    prepared = await prepare(world, app)
    await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)
    await trio.sleep(0.2)
    assert world.hal.stats.dropped_no_callback == 3
    dump = await (await world.control(system)).dump()
    assert "scheduling callback: none" in dump and "3 (no callback)" in dump


async def test_priority_order_later_higher_priority_job_finishes_first(autojump_clock, world, system):
    await configure(world, system, app_config(APP, 0), app_config(OTHER_APP, 0))
    control = await world.control(system)
    finished = []

    async def run(uid, priority, delay):
        await trio.sleep(delay)
        events = await control.runTestInference(priority, -1, "emu-gpu", uid)  # one channel
        assert [e.kind for e in events][-1] == 2 and events[-1].reason == EndReason.COMPLETED
        finished.append(priority)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, APP, 500, 0)
        nursery.start_soon(run, OTHER_APP, 250, 0.05)
    assert finished == [250, 500]


async def test_job_priority_raises_effective_priority(autojump_clock, world, system):
    await configure(world, system, app_config(APP, 100))
    assert await effective_priority(world, system, APP, 1000) > await effective_priority(world, system, APP, 0)


# ---- who may run what --------------------------------------------------------------


async def test_a_uid_without_direct_access_cannot_execute(autojump_clock, world, system):
    await configure(world, system, app_config(hasDirectAccess=False))
    app, _ = await world.process(APP)
    prepared = await prepare(world, app)
    with pytest.raises(SecurityException):
        await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)
    assert world.hal.stats.read == 0  # a refused submission is no work at all


async def test_attribution_needs_can_attribute_other_uid(autojump_clock, world, system):
    sched = await configure(world, system, app_config(APP), app_config(OTHER_APP, canAttributeOtherUid=True))
    recorder = Recorder()
    await sched.setCallback(recorder)
    a, _ = await world.process(APP)
    b, _ = await world.process(OTHER_APP)
    hints = ExecutionHints(jobPriority=100, originalUid=42)
    with pytest.raises(SecurityException):
        await (await prepare(world, a)).executeWithHints(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, hints)
    await (await prepare(world, b)).executeWithHints(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, hints)
    await wait_for(recorder, lambda r: len(r.events) == 3)
    assert {(i.uid, i.originalUid) for _, i, _ in recorder.events} == {(OTHER_APP, 42)}


async def test_test_inference_as_another_uid_is_for_root_system_and_shell(autojump_clock, world, system):
    await configure(world, system, app_config(APP), app_config(OTHER_APP))
    app, _ = await world.process(APP)
    with pytest.raises(SecurityException):
        await (await world.control(app)).runTestInference(0, -1, "emu-npu", OTHER_APP)
    mine = await (await world.control(app)).runTestInference(0, -1, "emu-npu", -1)
    assert {e.info.uid for e in mine} == {APP}
    shell_pid = world.net.spawn(world.net.init_pid)
    async with open_binder_runtime(network=world.net, pid=shell_pid, shell=True) as shell:
        assert shell.uid == 2000
        events = await (await world.control(shell)).runTestInference(700, -1, "emu-npu", OTHER_APP)
        assert [e.kind for e in events] == [0, 1, 2]
        assert {e.info.uid for e in events} == {OTHER_APP} and events[0].info.jobPriority == 700
        assert {e.deviceName for e in events} == {"emu-npu"} and events[0].timeNs <= events[-1].timeNs


# ---- lifetimes -------------------------------------------------------------------


async def test_a_dead_client_s_models_are_freed_within_200_ms(autojump_clock, world, system):
    await configure(world, system, app_config())
    app, kill_app = await world.process(APP)
    npu = world.driver.device_by_name("emu-npu")
    before = world.driver.memory_info(npu).weight_memory_used
    await prepare(world, app, size=1 << 30)
    await prepare(world, app, size=1 << 29)
    assert world.driver.memory_info(npu).weight_memory_used >= before + (3 << 29)
    assert "2 model(s), 1.5 GiB on emu-npu" in await (await world.control(system)).dump()
    kill_app.cancel()
    await trio.sleep(0.2)
    assert world.driver.memory_info(npu).weight_memory_used == before
    assert not world.hal.prepared


async def test_release_frees_at_once_and_the_object_is_dead_after(autojump_clock, world, system):
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    npu = world.driver.device_by_name("emu-npu")
    before = world.driver.memory_info(npu).weight_memory_used
    prepared = await prepare(world, app, size=1 << 30)
    await prepared.release()
    assert world.driver.memory_info(npu).weight_memory_used == before
    with pytest.raises(DeadObjectException):
        await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)


async def test_revoked_models_fail_their_later_executes_cleanly(autojump_clock, world, system):
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    prepared = await prepare(world, app)
    with pytest.raises(SecurityException):
        await (await world.control(app)).revokeUidModels(APP)
    assert await (await world.control(system)).revokeUidModels(APP) == 1
    with pytest.raises(ServiceSpecificException) as info:
        await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)
    assert info.value.error_code == ErrorStatus.GENERAL_FAILURE
    assert not world.hal.prepared


async def test_revoking_a_request_frees_its_models_and_keeps_the_other_requests(autojump_clock, world, system):
    await configure(world, system, app_config(), app_config(OTHER_APP))
    app, _ = await world.process(APP)
    other, _ = await world.process(OTHER_APP)
    late = await prepare(world, app, request_id=1)
    late_too = await prepare(world, app, device="emu-gpu", request_id=1)  # one request, two devices
    kept = await prepare(world, app, request_id=2)
    untagged = await prepare(world, app)  # named no request: nobody vouches for it
    stray = await prepare(world, app, request_id=99)  # a request the framework does not have
    same_id_other_uid = await prepare(world, other, request_id=1)
    assert "(requests 1, 2, 99; 1 for no request)" in await (await world.control(system)).dump()
    with pytest.raises(SecurityException):
        await (await world.control(app)).revokeRequestModels(APP, 2, [])  # an app cannot revoke
    with pytest.raises(IllegalArgumentException, match="both revoked and kept"):
        await (await world.control(system)).revokeRequestModels(APP, 1, [1, 2])
    assert len(world.hal.prepared) == 6  # refused calls freed nothing
    assert await (await world.control(system)).revokeRequestModels(APP, 1, [2]) == 4
    run = Execution([np.ones((1, 16))], [(1, 8)])
    for gone in (late, late_too, untagged, stray):
        with pytest.raises(ServiceSpecificException) as info:
            await gone.executeSynchronously(run.request(), False, -1, 0)
        assert info.value.error_code == ErrorStatus.GENERAL_FAILURE
    for alive in (kept, same_id_other_uid):
        await alive.executeSynchronously(run.request(), False, -1, 0)
    assert sorted((p.owner_uid, p.load_request) for p in world.hal.prepared) == [(APP, 2), (OTHER_APP, 1)]


async def test_a_dead_callback_is_cleared_and_the_hal_goes_on(autojump_clock, world, system):
    await configure(world, system, app_config())
    other_system, kill_framework = await world.process(1000)
    await (await world.scheduling(other_system)).setCallback(Recorder())
    kill_framework.cancel()
    await trio.sleep(0.01)
    app, _ = await world.process(APP)
    prepared = await prepare(world, app)
    await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)
    await trio.sleep(0.2)
    assert world.hal.callback is None and world.hal.stats.callback_deaths == 1
    # A new framework registers again and hears the next work.
    recorder = Recorder()
    await (await world.scheduling(system)).setCallback(recorder)
    await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)
    await wait_for(recorder, lambda r: len(r.events) == 3)


# ---- errors ---------------------------------------------------------------------------


async def test_bad_requests_and_models_are_invalid_argument(autojump_clock, world, system):
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    prepared = await prepare(world, app)
    ex = Execution([np.ones((1, 16))], [(1, 8)])
    req = ex.request()
    short = req.replace(inputs=[req.inputs[0].replace(location=req.inputs[0].location.replace(length=8))])
    outside = req.replace(outputs=[req.outputs[0].replace(location=req.outputs[0].location.replace(offset=1 << 20))])
    for bad in (short, outside, req.replace(inputs=[]), req.replace(pools=[])):
        with pytest.raises(ServiceSpecificException) as info:
            await prepared.executeSynchronously(bad, False, -1, 0)
        assert info.value.error_code == ErrorStatus.INVALID_ARGUMENT
    with pytest.raises(IllegalArgumentException):
        await prepared.executeWithHints(req, False, -1, ExecutionHints(jobPriority=1001))
    npu = await world.device(app, "emu-npu")
    model = aidl_model(fc_model()[0])
    bad_model = model.replace(main=model.main.replace(inputIndexes=[7]))
    with pytest.raises(ServiceSpecificException) as info:
        await npu.prepareModel(bad_model, ExecutionPreference.LOW_POWER, Priority.LOW, -1, 0, None)
    assert info.value.error_code == ErrorStatus.INVALID_ARGUMENT
    # Still works after all that.
    await prepared.executeSynchronously(req, False, -1, 0)


async def test_device_memory_exhaustion_is_resource_exhausted(autojump_clock, world, system):
    app, _ = await world.process(APP)
    total = world.driver.device_by_name("emu-npu").weight_memory_bytes
    with pytest.raises(ServiceSpecificException) as info:
        await prepare(world, app, size=total + 1)
    assert info.value.error_code == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT


async def test_a_failed_work_is_general_failure_and_ends_failed(autojump_clock, world, system):
    sched = await configure(world, system, app_config())
    recorder = Recorder()
    await sched.setCallback(recorder)
    app, _ = await world.process(APP)
    prepared = await prepare(world, app)
    await (await world.control(system)).injectFault("emu-npu", IHalControl.FAULT_FAIL_NEXT_WORK, 0)
    with pytest.raises(ServiceSpecificException) as info:
        await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)
    assert info.value.error_code == ErrorStatus.GENERAL_FAILURE
    await wait_for(recorder, lambda r: r.kinds() == ["requested", "started", "ended"])
    assert recorder.events[-1][2] == EndReason.FAILED


async def test_the_heterogeneous_device_computes_too(autojump_clock, world, system):
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    model, w, b = fc_model(seed=5)
    prepared = await prepare(world, app, "emu-hetero", model)
    x = np.full((1, 16), 0.25, np.float32)
    ex = Execution([x], [(1, 8)])
    await prepared.executeSynchronously(ex.request(), False, -1, 0)
    np.testing.assert_allclose(ex.output(0), fully_connected(x, w, b, FuseCode.RELU), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("preference, part", [
    (ExecutionPreference.FAST_SINGLE_ANSWER, "npu"),  # the part with the most free memory
    (ExecutionPreference.LOW_POWER, "dsp"),  # the part that draws least
])
async def test_the_preference_reaches_the_driver(autojump_clock, world, system, preference, part):
    """The reference driver places an emu-hetero model by the app's preference."""
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    model, w, b = fc_model(seed=5)
    hetero = await world.device(app, "emu-hetero")
    prepared = await hetero.prepareModel(aidl_model(model), preference, Priority.MEDIUM, -1, 0, None)
    x = np.full((1, 16), 0.5, np.float32)
    ex = Execution([x], [(1, 8)])
    await prepared.executeSynchronously(ex.request(), False, -1, 0)
    np.testing.assert_allclose(ex.output(0), fully_connected(x, w, b, FuseCode.RELU), rtol=1e-5, atol=1e-6)
    started = [e for e in world.hal.recent if e.kind == 1]
    silicon = {"npu": 0, "gpu": 1, "dsp": 2}  # the order the reference driver adds its silicon
    assert started and {e.hw_device for e in started} == {silicon[part]}
    assert all(e.info.deviceNumber == world.driver.device_by_name("emu-hetero").number for e in started)
    assert f"preference {preference.name}" in world.hal.dump()


# ---- the private interface ------------------------------------------------------------


class Listener(IHalListener.Stub):
    def __init__(self):
        super().__init__()
        self.thermal = []
        self.memory = []

    async def onThermalSeverityChanged(self, severity, temperatureC):
        self.thermal.append((severity, temperatureC))

    async def onMemoryPressure(self, pressure):
        self.memory.append(pressure)


async def test_thermal_severity_is_set_from_the_thresholds_and_heard(autojump_clock, world, system):
    control = await world.control(system)
    listener = Listener()
    await control.registerListener(listener)
    status = await control.setThermalSeverity(3)
    assert status.severity == 3
    assert status.thresholdsC[2] <= status.temperatureC < status.thresholdsC[3]
    await trio.sleep(0.01)
    assert listener.thermal and listener.thermal[-1][0] == 3
    app, _ = await world.process(APP)
    with pytest.raises(SecurityException):
        await (await world.control(app)).setThermalSeverity(0)
    assert (await (await world.control(app)).thermalStatus()).severity == 3
    with pytest.raises(IllegalArgumentException):
        await control.setThermalSeverity(7)
    await control.setThermalSeverity(6)  # SHUTDOWN: the devices go offline
    npu = await world.device(app, "emu-npu")
    assert int(await npu.getStatus()) == 2  # OFFLINE
    with pytest.raises(ServiceSpecificException) as info:
        await prepare(world, app)
    assert info.value.error_code == ErrorStatus.DEVICE_UNAVAILABLE


async def test_a_thermal_override_holds_the_die_until_reset(autojump_clock, world, system):
    control = await world.control(system)
    listener = Listener()
    await control.registerListener(listener)
    status = await control.overrideThermalSeverity(3)  # `npuemu thermal set severe`
    assert (status.severity, status.overridden) == (3, True)
    held_at = status.temperatureC
    assert status.thresholdsC[2] <= held_at < status.thresholdsC[3]
    await trio.sleep(30)  # 30 s at rest: a free die would be back to NONE in about 2
    await control.runTestInference(0, -1, "", -1)  # and load would heat it
    status = await control.thermalStatus()
    assert (status.severity, status.temperatureC, status.overridden) == (3, held_at, True)
    assert "(held by an override)" in await control.dump()
    app, _ = await world.process(APP)
    for call in ("overrideThermalSeverity", "resetThermalOverride"):
        with pytest.raises(SecurityException):
            await getattr(await world.control(app), call)(*([0] if call.startswith("override") else []))
    with pytest.raises(IllegalArgumentException):
        await control.overrideThermalSeverity(7)
    await control.overrideThermalSeverity(4)  # another override moves it
    status = await control.resetThermalOverride()  # `npuemu thermal reset`
    assert (status.severity, status.overridden) == (4, False)
    await trio.sleep(30)
    status = await control.thermalStatus()
    assert (status.severity, status.overridden) == (0, False)
    await trio.sleep(0.01)
    assert [severity for severity, _ in listener.thermal][:2] == [3, 4] and listener.thermal[-1][0] == 0
    assert (await control.resetThermalOverride()).severity == 0  # nothing held: harmless


async def test_thermal_set_holds_and_thermal_reset_releases(autojump_clock, world):
    """What `npuemu thermal set` / `reset` / `status` do, as the shell (uid 2000)."""
    shell, _ = await world.process(2000)
    status = await emulator_control.set_thermal_severity(shell, "critical")
    assert (status["severity_name"], status["held"]) == ("CRITICAL", True)
    await trio.sleep(10)
    status = await emulator_control.thermal_status(shell)
    assert (status["severity_name"], status["held"]) == ("CRITICAL", True)
    assert (await emulator_control.reset_thermal(shell))["held"] is False
    await trio.sleep(30)
    assert (await emulator_control.thermal_status(shell))["severity_name"] == "NONE"


async def test_memory_pressure_reaches_listeners(autojump_clock, world, system):
    control = await world.control(system)
    listener = Listener()
    await control.registerListener(listener)
    app, _ = await world.process(APP)
    await prepare(world, app, size=1 << 30)
    await trio.sleep(0.01)
    loads = [p for p in listener.memory if p.deviceNumber == world.driver.device_by_name("emu-npu").number]
    assert loads and loads[-1].weightMemoryUsed >= 1 << 30 and loads[-1].refused is None


async def test_recent_work_events_are_undebounced_with_times(autojump_clock, world, system):
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    prepared = await prepare(world, app)
    for _ in range(2):
        await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)
    control = await world.control(system)
    events = await control.recentWorkEvents(100, -1)
    assert [e.kind for e in events] == [0, 1, 2, 0, 1, 2]
    assert [e.info.id for e in events] == sorted(e.info.id for e in events)
    assert events[0].workId == events[2].workId != events[3].workId
    assert all(e.deviceName == "emu-npu" for e in events)
    assert [e.kind for e in await control.recentWorkEvents(100, events[2].info.id)] == [0, 1, 2]
    assert len(await control.recentWorkEvents(2, -1)) == 2
    app_control = await world.control(app)
    with pytest.raises(SecurityException):
        await app_control.recentWorkEvents(10, -1)


async def test_unknown_device_and_fault_kinds_are_illegal_arguments(autojump_clock, world, system):
    control = await world.control(system)
    with pytest.raises(IllegalArgumentException):
        await control.injectFault("emu-nope", IHalControl.FAULT_FAIL_NEXT_WORK, 0)
    with pytest.raises(IllegalArgumentException):
        await control.injectFault("emu-npu", 99, 0)
    with pytest.raises(IllegalArgumentException):
        await control.resetChannel("emu-npu", 0)  # not hung


class _Renamed:
    """A driver whose device 1 has a name NNAPI VTS would reject."""

    def __init__(self, driver):
        self._driver = driver

    def __getattr__(self, name):
        return getattr(self._driver, name)

    @property
    def devices(self):
        import dataclasses

        devs = self._driver.devices
        devs[1] = dataclasses.replace(devs[1], name="badname")
        return devs


async def test_a_badly_named_driver_device_is_not_registered(autojump_clock, caplog):
    async with open_driver(clock="virtual") as driver, open_stack(_Renamed(driver), system_server=False) as stack:
        names = await defaultServiceManager(stack.init).listServices(15)
        devices = sorted(n.rsplit("/", 1)[1] for n in names if "IDevice/" in n)
        assert devices == ["emu-dsp", "emu-hetero", "emu-npu"]
        assert any("badname" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)


@pytest.mark.parametrize("world", [{"hang_timeout_ms": 400}], indirect=True)
async def test_the_watchdog_resets_a_hung_channel_and_the_execute_fails(autojump_clock, world, system, caplog):
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    prepared = await prepare(world, app, "emu-gpu")
    control = await world.control(system)
    await control.injectFault("emu-gpu", IHalControl.FAULT_HANG_CHANNEL, 0)
    start = trio.current_time()
    with trio.fail_after(60):
        with pytest.raises(ServiceSpecificException) as info:
            await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)
    assert info.value.error_code == ErrorStatus.GENERAL_FAILURE
    assert 0.4 <= trio.current_time() - start < 0.6  # mock time: the timeout, plus one look
    assert any("watchdog" in r.getMessage() and "emu-gpu channel 0" in r.getMessage() for r in caplog.records)
    # The channel works again.
    await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, 0)


async def test_a_missed_deadline_is_missed_deadline_transient(autojump_clock, world, system):
    import time

    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    prepared = await prepare(world, app, "emu-gpu")
    await (await world.control(system)).injectFault("emu-gpu", IHalControl.FAULT_HANG_CHANNEL, 0)
    deadline = time.monotonic_ns() + 50_000_000  # CLOCK_MONOTONIC, as AOSP's AIDL HAL
    with pytest.raises(ServiceSpecificException) as info:
        await prepared.executeSynchronously(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, deadline, 0)
    assert info.value.error_code == ErrorStatus.MISSED_DEADLINE_TRANSIENT


async def test_group_and_feature_ids_reach_the_callback(autojump_clock, world, system):
    sched = await configure(world, system, app_config())
    recorder = Recorder()
    await sched.setCallback(recorder)
    app, _ = await world.process(APP)
    prepared = await prepare(world, app)
    group = NpuUuid(uuid=bytes(range(16)))
    hints = ExecutionHints(jobPriority=10, groupId=group, debugFeatureId="camera.segmentation")
    await prepared.executeWithHints(Execution([np.ones((1, 16))], [(1, 8)]).request(), False, -1, hints)
    await wait_for(recorder, lambda r: len(r.events) == 3)
    assert {(i.groupId, i.debugFeatureId) for _, i, _ in recorder.events} == {(group, "camera.segmentation")}


def test_the_driver_takes_the_aidl_model_the_hal_receives():
    # No conversion in between: the compiled AIDL Model goes to the driver as it is
    # (its pools mapped for the call), and C's refusals are NpuModelError, which the HAL
    # answers INVALID_ARGUMENT.
    import npuhal

    model, w, b = fc_model()
    wire = aidl_model(model)
    try:
        x = np.ones((1, 16), np.float32)
        (y,) = npuhal.run_model(wire, [x])
        np.testing.assert_allclose(y, np.maximum(x @ w.T + b, 0)[0:1], rtol=1e-5)
        bad = wire.replace(main=wire.main.replace(inputIndexes=[-1]))
        with pytest.raises(npuhal.NpuModelError, match="model input 0 names no operand"):
            npuhal.run_model(bad, [x])
    finally:
        for pool in wire.pools:
            pool.close()


async def test_a_burst_maps_a_memory_once_by_its_token(autojump_clock, world, system):
    await configure(world, system, app_config())
    app, _ = await world.process(APP)
    model, w, b = fc_model(seed=2)
    prepared = await prepare(world, app, model=model)
    burst = await prepared.configureExecutionBurst()
    (hal_burst,) = [b for p in world.hal.prepared for b in p.bursts]
    x = np.full((1, 16), 0.5, np.float32)
    ex = Execution([x], [(1, 8)])
    mappings = []
    for _ in range(2):
        result = await burst.executeSynchronously(ex.request(), [7], True, -1, 0)
        assert result.outputSufficientSize and result.timing.timeOnDeviceNs > 0
        np.testing.assert_allclose(ex.output(0), fully_connected(x, w, b, FuseCode.RELU), rtol=1e-5, atol=1e-6)
        mappings.append(hal_burst.memories[7][0])
    assert mappings[0] is mappings[1]
    # -1: not cached, mapped for the call only.
    await burst.executeSynchronously(ex.request(), [-1], False, -1, 0)
    assert list(hal_burst.memories) == [7]
    # One token per pool, none below -1.
    for tokens in ([], [7, 8], [-2]):
        with pytest.raises(ServiceSpecificException) as info:
            await burst.executeSynchronously(ex.request(), tokens, False, -1, 0)
        assert info.value.error_code == ErrorStatus.INVALID_ARGUMENT
    # A token names the memory it was first given with: a request reaching past that
    # memory's end is refused, never read or written out of bounds.
    big = SharedMemory.create("big-request", 8192)
    far = Request(
        inputs=[RequestArgument(location=ADataLocation(poolIndex=0, offset=4096, length=64))],
        outputs=[RequestArgument(location=ADataLocation(poolIndex=0, offset=6144, length=32))],
        pools=[big],
    )
    with pytest.raises(ServiceSpecificException) as info:
        await burst.executeSynchronously(far, [7], False, -1, 0)
    assert info.value.error_code == ErrorStatus.INVALID_ARGUMENT
    await burst.releaseMemoryResource(7)
    await burst.releaseMemoryResource(12345)  # unknown: nothing to do
    assert hal_burst.memories == {}
    await burst.executeSynchronously(ex.request(), [7], False, -1, 0)
    # The prepared model's end ends its bursts.
    await prepared.release()
    assert hal_burst.memories == {}
    with pytest.raises(ServiceSpecificException):
        await burst.executeSynchronously(ex.request(), [7], False, -1, 0)
    big.close()
