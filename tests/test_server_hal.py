"""system_server over the real HAL (``npuhal.serve_hal`` on a virtual-clock driver), in
one trio run (the stack ``framework.emulator.open_stack`` assembles in memory): what the
npu service pushes and revokes is what the driver then does."""

from __future__ import annotations

import pytest

import numpy as np

from framework.binder import ServiceSpecificException, defaultServiceManager
from framework.emulator import open_stack
from framework.nn import NeuralNetworksError, open_nn_runtime, sampleModel
from framework.npumanager import NpuManager
from interfaces.android.hardware.neuralnetworks import ExecutionPreference as EXEC_PREF
from interfaces.android.hardware.neuralnetworks import IDevice
from interfaces.android.hardware.neuralnetworks import Priority as PRIORITY
from interfaces.npuemu.hal import IHalControl
from npuhal import open_driver
from test_hal_inprocess import Execution, aidl_model, fc_model
from test_server_support import Recorder, World, ask, npu_of, request, write_apps

CAN = NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW
CANCELLED = NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED
COMPLETE = NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE


class StackWorld:
    """The whole stack in one process (``open_stack``: the real HAL over a virtual-clock
    reference driver, system_server), with the helpers of the fake-HAL ``World``."""

    launch = World.launch
    settle = World.settle

    def __init__(self, stack) -> None:
        self.stack = stack
        self.init = stack.init
        self.system = stack.system
        self.launcher = stack.launcher

    @property
    def real_hal(self):
        return self.stack.hal


@pytest.fixture
async def world(autojump_clock, tmp_path):
    apps = write_apps(tmp_path / "apps")
    async with open_driver(clock="virtual") as driver, \
            open_stack(driver, apps_dir=apps, system_options={"unload_timeout": 2.0}) as stack:
        yield StackWorld(stack)


async def control_of(app):
    return IHalControl.asInterface(await defaultServiceManager(app.context.runtime).checkService("npuemu.hal.IHalControl/default"))


def ends(events):
    return [e for e in events if e.kind == 2]


async def test_importance_becomes_the_effective_priority_the_driver_uses(autojump_clock, world):
    fg = await world.launch("com.test.fg")
    bg = await world.launch("com.test.bg")  # cached
    await world.settle()
    fg_end = ends(await (await control_of(fg)).runTestInference(500, -1, "", -1))[-1]
    bg_end = ends(await (await control_of(bg)).runTestInference(0, -1, "", -1))[-1]
    assert fg_end.info.effectivePriority == 500  # foreground: appPriority 0, band 0..1000
    assert bg_end.info.effectivePriority == 1500  # cached: clamped up to its band's floor
    world.system.activity.set_importance("com.test.bg", "foreground")
    await world.settle()
    bg_end = ends(await (await control_of(bg)).runTestInference(0, -1, "", -1))[-1]
    assert bg_end.info.effectivePriority == 0


async def test_completed_work_from_the_driver_takes_turns(autojump_clock, world):
    a = await world.launch("com.test.a")
    b = await world.launch("com.test.b")
    await npu_of(a).setPolicy(NpuManager.NPU_MODEL_POLICY_TURN_TAKING, None)
    ra, rb = Recorder(), Recorder()
    await ask(world, a, request(1), ra)
    await ask(world, b, request(1), rb)
    assert rb.events == [("can_load", 1, NpuManager.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED)]
    await (await control_of(a)).runTestInference(500, -1, "", -1)  # a's work completes on the NPU
    await world.settle(0.5)  # the HAL's 50 ms debounce, then the callback
    assert ("unload", 1, NpuManager.NPU_MODEL_UNLOAD_REASON_TURN_TAKING) in ra.events
    assert rb.events[1:] == [("can_load", 1, CAN), ("loaded", 1)]
    data = world.system.npu.dump_data()
    assert data["counters"]["work_completed"] >= 1
    assert any(e["kind"] == "ended" and e["uid"] == a.context.getUid() for e in data["recent_work_events"])


async def test_a_model_not_unloaded_in_time_is_revoked_in_the_driver(autojump_clock, world):
    bg = await world.launch("com.test.bg")
    fg = await world.launch("com.test.fg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, None)
    stubborn = Recorder(auto_unload=False)
    await ask(world, bg, request(1, 2, 1000), stubborn)
    model, _, _ = fc_model()
    dev = IDevice.asInterface(await defaultServiceManager(bg.context.runtime).checkService("android.hardware.neuralnetworks.IDevice/emu-npu"))
    prepared = await dev.prepareModel(aidl_model(model), EXEC_PREF.FAST_SINGLE_ANSWER, PRIORITY.MEDIUM, -1, 0, None)
    execution = Execution([[[1.0] * 16]], [(1, 8)])
    await prepared.executeSynchronously(execution.request(), False, -1, -1)  # works while approved
    rf = Recorder()
    await npu_of(fg).requestCanLoadModel(request(2, 2), rf, fg.context.getMainExecutor())
    await world.settle(2.5)
    assert stubborn.events[-1] == ("complete", 1, CANCELLED)
    assert rf.events[-2:] == [("can_load", 2, CAN), ("loaded", 2)]
    with pytest.raises(ServiceSpecificException):
        await prepared.executeSynchronously(execution.request(), False, -1, -1)
    assert world.system.npu.dump_data()["counters"]["revocations_sent"] == 1


async def test_the_die_heating_up_reaches_the_npu_service(autojump_clock, world):
    fg = await world.launch("com.test.fg")
    bg = await world.launch("com.test.a")  # service importance
    rb = Recorder()
    await ask(world, bg, request(1), rb)
    control = IHalControl.asInterface(await defaultServiceManager(world.init).checkService("npuemu.hal.IHalControl/default"))
    await control.setThermalSeverity(4)  # CRITICAL: `npuemu thermal set critical`
    await world.settle(0.2)
    assert world.system.thermal.severity >= 4
    assert world.system.npu.arbiter.thermal_severity == world.system.thermal.severity
    assert rb.events[2:] == [("unload", 1, NpuManager.NPU_MODEL_UNLOAD_REASON_THERMAL), ("unloaded", 1), ("complete", 1, COMPLETE)]
    end = ends(await (await control_of(bg)).runTestInference(0, -1, "", -1))[-1]
    assert end.info.effectivePriority == 2000  # pinned last while it is this hot
    end = ends(await (await control_of(fg)).runTestInference(0, -1, "", -1))[-1]
    assert end.info.effectivePriority == 0


async def test_revocation_frees_the_late_request_and_spares_the_apps_other_model(autojump_clock, world):
    """One app, two approved and loaded requests, each with its NNAPI compilation: the
    one asked to unload ignores it past the deadline; only its prepared model is freed."""
    bg = await world.launch("com.test.bg")  # cached: the victim of a foreground request
    fg = await world.launch("com.test.fg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, None)  # maxBudget 4, weights 1, 2, 4
    kept_req = request(1, NpuManager.NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB)  # weight 2, NORMAL
    late_req = request(2, NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB, NpuManager.NPU_MODEL_PRIORITY_BACKGROUND)
    well_behaved, stubborn = Recorder(), Recorder(auto_unload=False)
    await ask(world, bg, kept_req, well_behaved)
    await ask(world, bg, late_req, stubborn)
    model = sampleModel()
    rng = np.random.default_rng(5)
    inputs = [rng.random((1, 8, 8, 3), dtype=np.float32), rng.standard_normal((1, 16), dtype=np.float32)]

    async def run(compilation):
        execution = compilation.createExecution()
        for i, x in enumerate(inputs):
            execution.setInput(i, x)
        return await execution.compute_async()

    async with open_nn_runtime(bg.context.runtime, environ={}) as nn:
        npu = nn.getDeviceByName("emu-npu")
        compilations = {}
        for req in (kept_req, late_req):
            compilation = nn.createCompilationForDevices(model, [npu])
            compilation.setModelLoadRequest(req)
            await compilation.finish()
            compilations[req.id] = compilation
        expected = await run(compilations[1])
        bg_uid = bg.context.getUid()
        assert sorted(p.load_request for p in world.real_hal.prepared if p.owner_uid == bg_uid) == [1, 2]

        rf = Recorder()
        await npu_of(fg).requestCanLoadModel(request(7, NpuManager.NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB), rf,
                                             fg.context.getMainExecutor())
        await world.settle(0.1)
        assert stubborn.events[-1] == ("unload", 2, NpuManager.NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE)
        assert well_behaved.events == [("can_load", 1, CAN), ("loaded", 1)]  # never asked
        await world.settle(2.0)  # past the 2 s deadline: request 2 is revoked
        assert stubborn.events[-1] == ("complete", 2, CANCELLED)
        assert rf.events[-2:] == [("can_load", 7, CAN), ("loaded", 7)]
        with pytest.raises(NeuralNetworksError):
            await run(compilations[2])
        for got, want in zip(await run(compilations[1]), expected, strict=True):  # the other still executes
            np.testing.assert_array_equal(got, want)
        assert [p.load_request for p in world.real_hal.prepared if p.owner_uid == bg_uid] == [1]
        assert [r["id"] for r in world.system.npu.dump_data()["requests"] if r["uid"] == bg_uid] == [1]
        for compilation in compilations.values():
            await compilation.aclose()


async def test_a_held_override_keeps_the_system_at_that_severity_until_reset(autojump_clock, world):
    bg = await world.launch("com.test.a")  # service importance: not foreground
    control = IHalControl.asInterface(await defaultServiceManager(world.init).checkService("npuemu.hal.IHalControl/default"))
    await control.overrideThermalSeverity(4)  # CRITICAL, held: `npuemu thermal set critical`
    await world.settle(30)  # a free die would have cooled to NONE long ago
    await (await control_of(bg)).runTestInference(0, -1, "", -1)  # emulated time catches up, under load
    await world.settle(0.2)
    assert world.system.thermal.severity == 4 and world.system.npu.arbiter.thermal_severity == 4
    held = Recorder()
    await ask(world, bg, request(1), held)
    assert held.events == [("can_load", 1, NpuManager.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED)]
    await control.resetThermalOverride()  # `npuemu thermal reset`
    await world.settle(30)
    await (await control_of(bg)).runTestInference(0, -1, "", -1)
    await world.settle(0.2)
    assert world.system.thermal.severity == 0
    assert held.events[1:] == [("can_load", 1, CAN), ("loaded", 1)]
