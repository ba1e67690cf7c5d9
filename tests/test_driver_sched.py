"""Scheduling through the binding, on the virtual clock: exact and repeatable.

Priority order, preemption by checkpoint and by kill-and-restart, cancel,
configs and their refusals, admission refusals, capacity, thermal throttling
and faults, all as the HAL sees them: events and results.
"""

import signal
import subprocess
import sys
import uuid

import numpy as np
import pytest

import npuhal
from interfaces.android.hardware.neuralnetworks import DataLocation, Operand, Operation
from model_edits import with_main, with_operand, with_operation
from npuhal import (
    DeviceType,
    EndReason,
    FuseCode,
    ModelBuilder,
    OperandLifeTime,
    OperandType,
    OperationType,
    PreemptionMode,
    SchedulingConfig,
    StartReason,
    ThermalChanged,
    ThermalSeverity,
    WorkEnded,
    WorkInfo,
    WorkRequested,
    WorkStarted,
)
from interfaces.android.hardware.npu import NpuUuid

UID = 10001
# The reference hardware computes these small models in about 0.1 ms; a cost
# scale stretches a work to tens of emulated milliseconds, so that others can
# arrive while it runs.
LONG = 100_000


def fc_model(n_in=64, units=32, seed=0):
    rng = np.random.default_rng(seed)
    m = ModelBuilder()
    x = m.input((1, n_in))
    w = m.constant(rng.standard_normal((units, n_in), dtype=np.float32))
    b = m.constant(rng.standard_normal(units, dtype=np.float32))
    y = m.operation(OperationType.FULLY_CONNECTED, [x, w, b, m.int32(FuseCode.RELU)], (1, units))
    m.output(m.operation(OperationType.SOFTMAX, [y, m.float32(0.1)], (1, units)))
    return m.build()


def by_type(driver, device_type):
    return next(d for d in driver.devices if d.type is device_type)


def single_channel_device(driver):
    # The GPU: one channel, and every operation these tests use.
    dev = by_type(driver, DeviceType.GPU)
    assert dev.channels == 1
    return dev


def kinds(events, work_id):
    """The life of one work as (class name, reason name) pairs."""
    out = []
    for e in events:
        if isinstance(e, (WorkRequested, WorkStarted, WorkEnded)) and e.info.id == work_id:
            reason = getattr(e, "reason", None)
            out.append((type(e).__name__, None if reason is None else reason.name))
    return out


def x_input(seed=1, n_in=64):
    return np.random.default_rng(seed).standard_normal((1, n_in), dtype=np.float32)


async def test_one_inference_yields_requested_started_ended_with_its_work_info():
    async with npuhal.open_driver() as driver:
        driver.set_scheduling_configs([SchedulingConfig(uid=1001, appPriority=500, hasDirectAccess=True)])
        npu = by_type(driver, DeviceType.ACCELERATOR)
        handle = driver.load_model(npu, fc_model(), cost_scale=LONG)
        group = uuid.uuid4()
        work = driver.submit(
            handle, [x_input()], uid=1001, debug_pid=4242, job_priority=250, group_id=group, feature_id="camera.hdr"
        )
        driver.run_until_idle()
        events = [e for e in driver.drain_events() if not isinstance(e, (ThermalChanged, npuhal.MemoryPressure))]
        assert [type(e) for e in events] == [WorkRequested, WorkStarted, WorkEnded]
        assert events[1].reason is StartReason.INITIAL and events[2].reason is EndReason.COMPLETED
        info = events[0].info
        assert (info.id, info.uid, info.originalUid, info.debugPid) == (work, 1001, 1001, 4242)
        assert (info.jobPriority, info.effectivePriority) == (250, 750)
        assert info.groupId == NpuUuid(uuid=group.bytes) and type(info) is WorkInfo and info.debugFeatureId == "camera.hdr"
        assert info.deviceNumber == npu.number
        stamps = [e.info.timestampMs for e in events]
        assert stamps == sorted(stamps) and stamps[-1] > stamps[0]
        assert driver.drain_events() == []  # each event is drained once


async def test_effective_priority_is_clamped_and_job_priority_orders_it():
    async with npuhal.open_driver() as driver:
        driver.set_scheduling_configs([SchedulingConfig(uid=7, appPriority=300, minPriority=400, maxPriority=900, hasDirectAccess=True)])
        handle = driver.load_model(0, fc_model())
        ids = [driver.submit(handle, [x_input()], uid=7, job_priority=p) for p in (0, 300, 1000)]
        driver.run_until_idle()
        eff = {e.info.id: e.info.effectivePriority for e in driver.drain_events() if isinstance(e, WorkRequested)}
        assert [eff[i] for i in ids] == [400, 600, 900]
        # A uid without a config: appPriority 1000, so jobPriority 1000 ranks below 0.
        a = driver.submit(handle, [x_input()], uid=8, job_priority=0)
        b = driver.submit(handle, [x_input()], uid=8, job_priority=1000)
        driver.run_until_idle()
        eff = {e.info.id: e.info.effectivePriority for e in driver.drain_events() if isinstance(e, WorkRequested)}
        assert eff[a] == 1000 and eff[b] == 2000


async def test_a_free_channel_takes_the_lowest_effective_priority_first_ties_in_arrival_order():
    async with npuhal.open_driver(preemption=PreemptionMode.NONE) as driver:
        dev = single_channel_device(driver)
        handle = driver.load_model(dev, fc_model(), cost_scale=LONG)
        blocker = driver.submit(handle, [x_input()], uid=UID, job_priority=1000)
        # All of these queue behind the blocker, in this arrival order.
        prios = [700, 100, 400, 100, 0, 999]
        ids = [driver.submit(handle, [x_input(i)], uid=UID, job_priority=p) for i, p in enumerate(prios)]
        driver.run_until_idle()
        completed = [e.info.id for e in driver.drain_events() if isinstance(e, WorkEnded)]
        expected = [blocker] + [i for _, _, i in sorted(zip(prios, range(len(ids)), ids))]
        assert completed == expected


async def _preempted_run(mode):
    """A low-priority work preempted mid-run by a high-priority one; its events and result."""
    async with npuhal.open_driver(preemption=mode, slices_per_operation=8) as driver:
        dev = single_channel_device(driver)
        handle = driver.load_model(dev, fc_model(), cost_scale=LONG)
        low = driver.submit(handle, [x_input(3)], uid=UID, job_priority=900)
        driver.advance_to_next_event()
        driver.advance_to_next_event()  # a few slices in
        assert driver.work_ended(low) is None
        high = driver.submit(handle, [x_input(4)], uid=UID, job_priority=0)
        driver.run_until_idle()
        events = driver.drain_events()
        ends = {e.info.id: e for e in events if isinstance(e, WorkEnded) and e.is_final}
        return events, low, high, driver.outputs(low)[0].copy(), driver.outputs(high)[0].copy(), ends


async def _plain_result(seed):
    async with npuhal.open_driver(preemption=PreemptionMode.NONE, slices_per_operation=8) as driver:
        handle = driver.load_model(single_channel_device(driver), fc_model(), cost_scale=LONG)
        w = driver.submit(handle, [x_input(seed)], uid=UID, job_priority=500)
        driver.run_until_idle()
        return driver.outputs(w)[0].copy()


@pytest.mark.parametrize("mode", [PreemptionMode.CHECKPOINT, PreemptionMode.KILL_RESTART])
async def test_preemption_pauses_then_resumes_with_identical_results(mode):
    events, low, high, low_out, high_out, ends = await _preempted_run(mode)
    life = kinds(events, low)
    assert life == [
        ("WorkRequested", None),
        ("WorkStarted", "INITIAL"),
        ("WorkEnded", "PAUSED"),
        ("WorkStarted", "RESUMED"),
        ("WorkEnded", "COMPLETED"),
    ]
    # The high-priority work ran entirely inside the low one's pause.
    order = [(type(e).__name__, e.info.id, getattr(e, "reason", None)) for e in events if hasattr(e, "info")]
    paused_at = order.index(("WorkEnded", low, EndReason.PAUSED))
    resumed_at = order.index(("WorkStarted", low, StartReason.RESUMED))
    assert ("WorkEnded", high, EndReason.COMPLETED) in order[paused_at:resumed_at]
    assert np.array_equal(low_out, await _plain_result(3))  # bit-identical
    assert np.array_equal(high_out, await _plain_result(4))


async def test_kill_restart_costs_the_low_work_more_than_checkpointing():
    _, low, _, _, _, ends_ck = await _preempted_run(PreemptionMode.CHECKPOINT)
    _, low2, _, _, _, ends_kr = await _preempted_run(PreemptionMode.KILL_RESTART)
    # Same submissions on fresh drivers, so the same ids; restart redoes the lost slices.
    assert low == low2
    assert ends_kr[low].time_ns > ends_ck[low].time_ns


async def test_without_preemption_the_high_priority_work_waits():
    events, low, high, *_ = await _preempted_run(PreemptionMode.NONE)
    assert ("WorkEnded", "PAUSED") not in kinds(events, low)
    ended = [e.info.id for e in events if isinstance(e, WorkEnded)]
    assert ended == [low, high]


async def test_cancel_a_queued_and_a_running_work_gives_cancelled_user():
    async with npuhal.open_driver(preemption=PreemptionMode.NONE) as driver:
        handle = driver.load_model(single_channel_device(driver), fc_model(), cost_scale=LONG)
        running = driver.submit(handle, [x_input()], uid=UID, job_priority=0)
        queued = driver.submit(handle, [x_input()], uid=UID, job_priority=0)
        driver.advance_to_next_event()
        driver.cancel(queued)
        driver.cancel(running)
        driver.run_until_idle()
        for w in (running, queued):
            ended = driver.work_ended(w)
            assert ended.reason is EndReason.CANCELLED_USER
            with pytest.raises(npuhal.NpuStateError, match="CANCELLED_USER"):
                driver.outputs(w)
        with pytest.raises(npuhal.NpuLookupError) as info:
            driver.cancel(queued)  # already ended
        assert info.value.name == "BAD_WORK_ID" and info.value.code < 0


async def test_unloading_a_model_ends_its_work_cancelled_system():
    async with npuhal.open_driver() as driver:
        handle = driver.load_model(single_channel_device(driver), fc_model(), cost_scale=LONG)
        w = driver.submit(handle, [x_input()], uid=UID, job_priority=0)
        handle.unload()
        assert not handle.loaded
        assert driver.work_ended(w).reason is EndReason.CANCELLED_SYSTEM
        with pytest.raises(npuhal.NpuLookupError):
            driver.submit(handle, [x_input()], uid=UID, job_priority=0)


async def test_invalid_configs_are_refused_distinctly_and_change_nothing():
    async with npuhal.open_driver() as driver:
        driver.set_scheduling_configs([SchedulingConfig(uid=1001, appPriority=500, hasDirectAccess=True)])
        with pytest.raises(npuhal.NpuInvalidPriorityError) as bad_priority:
            driver.set_scheduling_configs([SchedulingConfig(uid=1002, appPriority=-1, hasDirectAccess=True)])
        with pytest.raises(npuhal.NpuDuplicateUidError) as duplicate:
            driver.update_scheduling_configs([SchedulingConfig(uid=5, appPriority=1, hasDirectAccess=True), SchedulingConfig(uid=5, appPriority=2, hasDirectAccess=True)])
        for bad in (
            SchedulingConfig(uid=1, appPriority=1001, hasDirectAccess=True),
            SchedulingConfig(uid=1, minPriority=900, maxPriority=800, hasDirectAccess=True),
            SchedulingConfig(uid=1, maxPriority=2001, hasDirectAccess=True),
        ):
            with pytest.raises(npuhal.NpuInvalidPriorityError):
                driver.update_scheduling_configs([bad])
        assert bad_priority.value.code != duplicate.value.code
        assert isinstance(bad_priority.value, ValueError) and isinstance(duplicate.value, ValueError)
        assert "appPriority" in bad_priority.value.strerror
        # uid 1001 still has priority 500, uid 5 still has no config at all.
        handle = driver.load_model(0, fc_model())
        a = driver.submit(handle, [x_input()], uid=1001, job_priority=0)
        b = driver.submit(handle, [x_input()], uid=5, job_priority=0)
        eff = {e.info.id: e.info.effectivePriority for e in driver.drain_events() if isinstance(e, WorkRequested)}
        assert eff == {a: 500, b: 1000}
        with pytest.raises(npuhal.NpuValueError):
            driver.set_scheduling_configs([{"uid": 1}])  # not a SchedulingConfig


async def test_work_without_direct_access_or_with_unauthorised_attribution_is_refused():
    async with npuhal.open_driver() as driver:
        driver.set_scheduling_configs(
            [
                SchedulingConfig(uid=2001, hasDirectAccess=False),
                SchedulingConfig(uid=2002, hasDirectAccess=True),
                SchedulingConfig(uid=1000, appPriority=100, canAttributeOtherUid=True, hasDirectAccess=True),
            ]
        )
        handle = driver.load_model(0, fc_model())
        with pytest.raises(npuhal.NpuDirectAccessError) as direct:
            driver.submit(handle, [x_input()], uid=2001, job_priority=0)
        with pytest.raises(npuhal.NpuAttributionError) as attribution:
            driver.submit(handle, [x_input()], uid=2002, original_uid=42, job_priority=0)
        assert isinstance(direct.value, PermissionError) and isinstance(attribution.value, PermissionError)
        assert direct.value.code != attribution.value.code
        with pytest.raises(npuhal.NpuInvalidPriorityError):
            driver.submit(handle, [x_input()], uid=2002, job_priority=1001)
        # Refused submissions emit nothing (loading the model did: a MemoryPressure).
        assert not [e for e in driver.drain_events() if hasattr(e, "info")]
        ok = driver.submit(handle, [x_input()], uid=1000, original_uid=42, job_priority=0)
        driver.run_until_idle()
        requested = [e for e in driver.drain_events() if isinstance(e, WorkRequested)]
        assert [(e.info.id, e.info.uid, e.info.originalUid) for e in requested] == [(ok, 1000, 42)]


async def test_loading_past_weight_memory_is_a_capacity_error_and_unload_frees_it():
    async with npuhal.open_driver() as driver:
        npu = by_type(driver, DeviceType.ACCELERATOR)
        total = npu.weight_memory_bytes
        big = driver.load_model(npu, fc_model(), emulated_size_bytes=total * 6 // 10)
        assert driver.memory_info(npu).weight_memory_used >= total * 6 // 10
        with pytest.raises(npuhal.NpuCapacityError) as info:
            driver.load_model(npu, fc_model(), emulated_size_bytes=total * 6 // 10)
        assert isinstance(info.value, MemoryError) and info.value.name == "WEIGHT_MEMORY_FULL"
        with pytest.raises(npuhal.NpuCapacityError):
            driver.load_model(npu, fc_model(), emulated_size_bytes=total + 1)
        pressure = [e for e in driver.drain_events() if isinstance(e, npuhal.MemoryPressure)]
        assert pressure[0].refused is None and pressure[0].deviceNumber == npu.number
        assert pressure[0].weightMemoryUsed >= total * 6 // 10 and pressure[0].weightMemoryTotal == total
        assert [e.refused for e in pressure[1:]] == ["WEIGHT_MEMORY_FULL"] * 2
        big.unload()
        again = driver.load_model(npu, fc_model(), emulated_size_bytes=total * 6 // 10)
        assert again.loaded
        with pytest.raises(npuhal.NpuCapacityError) as info:
            driver.load_model(npu, fc_model(), emulated_sram_bytes=npu.sram_bytes + 1)
        assert info.value.name == "SRAM_FULL"


async def test_bad_models_and_buffers_get_clear_errors():
    async with npuhal.open_driver() as driver:
        model = fc_model()
        fc = model.main.operations[0]
        with pytest.raises(npuhal.NpuModelError) as info:
            driver.load_model(0, with_operation(model, 0, inputs=[fc.inputs[0], 999, *fc.inputs[2:]]))
        assert info.value.name == "BAD_OPERAND_INDEX"
        with pytest.raises(npuhal.NpuModelError, match="BAD_SHAPE"):
            driver.load_model(0, with_operand(model, fc.outputs[0], dimensions=[1, 31]))
        with pytest.raises(npuhal.NpuLookupError):
            driver.load_model(99, fc_model())
        handle = driver.load_model(0, fc_model())
        with pytest.raises(npuhal.NpuValueError, match="elements"):
            driver.submit(handle, [np.zeros((1, 63), np.float32)], uid=UID, job_priority=0)
        with pytest.raises(npuhal.NpuValueError, match="read-only"):
            driver.submit(handle, [x_input()], [bytes(4 * 32)], uid=UID, job_priority=0)
        with pytest.raises(npuhal.NpuValueError, match="float32"):
            driver.submit(handle, [x_input()], [np.zeros((1, 32), np.float64)], uid=UID, job_priority=0)
        with pytest.raises(npuhal.NpuValueError, match="inputs"):
            driver.submit(handle, [], uid=UID, job_priority=0)


async def test_supported_operations_reflects_each_devices_op_set():
    async with npuhal.open_driver() as driver:
        m = ModelBuilder()
        x = m.input((2, 8))
        y = m.operation(OperationType.SOFTMAX, [x, m.float32(1.0)], (2, 8))
        m.output(m.operation(OperationType.RELU, [y], (2, 8)))
        model = m.build()
        answers = {d.name: driver.supported_operations(d, model) for d in driver.devices}
        assert all(len(a) == 2 for a in answers.values())
        npu = by_type(driver, DeviceType.ACCELERATOR)
        assert answers[npu.name] == [True, True]
        # The DSP-like device has a small op set: softmax is not in it.
        assert any(a == [False, True] for a in answers.values()), answers
        small = next(d for d in driver.devices if answers[d.name] == [False, True])
        with pytest.raises(npuhal.NpuUnsupportedOperationError):
            driver.load_model(small, model)


async def test_a_valid_operation_the_hardware_cannot_compute_is_unsupported_not_an_error():
    async with npuhal.open_driver() as driver:
        # ARGMAX is valid NNAPI and npuemu computes it, but the NPU does not claim it.
        m = ModelBuilder()
        x = m.input((1, 4))
        r = m.operation(OperationType.RELU, [x], (1, 4))
        m.output(m.operation(OperationType.ARGMAX, [r, m.int32(1)], (1,), operand_type=OperandType.TENSOR_INT32))
        model = m.build()
        npu = by_type(driver, DeviceType.ACCELERATOR)
        assert driver.supported_operations(npu, model) == [True, False]
        with pytest.raises(npuhal.NpuModelError):
            driver.load_model(npu, model)
        # ... but a structural error stays an error.
        with pytest.raises(npuhal.NpuModelError, match="BAD_OPERAND_INDEX"):
            driver.supported_operations(npu, with_operation(model, 1, inputs=[1, 77]))
        # A number NN HAL 1.2 has no operation for cannot be in a model at all.
        with pytest.raises(ValueError, match="OperationType"):
            m.operation(95, [x], (1, 4))


async def test_throttling_lengthens_work_and_severities_are_reported():
    async def duration(spike):
        async with npuhal.open_driver(thermal_time_constant_ms=1e9) as driver:
            dev = single_channel_device(driver)
            handle = driver.load_model(dev, fc_model(), cost_scale=LONG)
            if spike:
                driver.heat_spike(spike)
            severity = driver.thermal_state()[0]
            t0 = driver.now_ns
            driver.submit(handle, [x_input()], uid=UID, job_priority=0)
            driver.run_until_idle()
            thermal = [e for e in driver.drain_events() if isinstance(e, ThermalChanged)]
            return driver.now_ns - t0, severity, thermal

    cool, sev0, _ = await duration(0)
    warm, sev1, ev1 = await duration(25)  # 25 + 25 = 50 C: LIGHT (45..55)
    hot, sev2, ev2 = await duration(45)  # 70 C: SEVERE (65..75)
    assert sev0 is ThermalSeverity.NONE
    assert sev1 is ThermalSeverity.LIGHT and sev2 is ThermalSeverity.SEVERE
    assert ev1[0].severity is ThermalSeverity.LIGHT and ev2[0].severity is ThermalSeverity.SEVERE
    assert ev2[0].temperature_c == pytest.approx(70, abs=1)
    assert cool < warm < hot


async def test_the_die_heats_with_load_and_cools_at_rest():
    thresholds = [26, 27, 28, 29, 30, 200]
    async with npuhal.open_driver(thermal_thresholds_c=thresholds, thermal_time_constant_ms=50) as driver:
        handle = driver.load_model(by_type(driver, DeviceType.ACCELERATOR), fc_model(), cost_scale=LONG)
        for _ in range(8):
            driver.submit(handle, [x_input()], uid=UID, job_priority=0)
        driver.run_until_idle()
        hot = driver.thermal_state()
        driver.advance(5_000)  # a hundred time constants of rest
        cold = driver.thermal_state()
        severities = [e.severity for e in driver.drain_events() if isinstance(e, ThermalChanged)]
        assert hot[0] > ThermalSeverity.NONE and hot[1] > 26
        assert cold[0] is ThermalSeverity.NONE and cold[1] < hot[1]
        assert severities[0] > ThermalSeverity.NONE and severities[-1] is ThermalSeverity.NONE
    with pytest.raises(npuhal.NpuValueError):
        npuhal.Driver.open(thermal_thresholds_c=[1, 2, 3])


async def test_fault_injection_fail_hang_and_reset():
    async with npuhal.open_driver() as driver:
        dev = single_channel_device(driver)
        handle = driver.load_model(dev, fc_model(), cost_scale=LONG)
        driver.fail_next_work(dev)
        failed = driver.submit(handle, [x_input()], uid=UID, job_priority=0)
        driver.run_until_idle()
        assert driver.work_ended(failed).reason is EndReason.FAILED
        driver.hang_channel(dev, 0)
        stuck = driver.submit(handle, [x_input()], uid=UID, job_priority=0)
        driver.run_until_idle(max_ms=1000)
        assert driver.work_ended(stuck) is None
        driver.reset_channel(dev, 0)
        driver.run_until_idle()
        assert driver.work_ended(stuck).reason is EndReason.FAILED
        with pytest.raises(npuhal.NpuStateError) as info:
            driver.reset_channel(dev, 0)
        assert info.value.name == "NOT_HUNG"
        ok = driver.submit(handle, [x_input()], uid=UID, job_priority=0)
        driver.run_until_idle()
        assert driver.work_ended(ok).reason is EndReason.COMPLETED


def test_crash_fault_aborts_the_process():
    code = "import npuhal; d = npuhal.Driver.open(); d.crash(); print('survived')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGABRT and "survived" not in proc.stdout


async def test_virtual_clock_is_exactly_repeatable():
    async def trace():
        async with npuhal.open_driver(preemption=PreemptionMode.CHECKPOINT) as driver:
            handle = driver.load_model(by_type(driver, DeviceType.ACCELERATOR), fc_model(), cost_scale=LONG)
            for i in range(6):
                driver.submit(handle, [x_input(i)], uid=UID + i % 2, job_priority=(i * 373) % 1000)
                driver.advance(0.05)
            driver.run_until_idle()
            return [(type(e).__name__, getattr(e, "reason", None), e.info.id, e.info.timestampMs)
                    for e in driver.drain_events() if hasattr(e, "info")]

    assert await trace() == await trace()


async def test_advance_refuses_bad_input_and_the_real_clock():
    async with npuhal.open_driver() as driver:
        with pytest.raises(npuhal.NpuValueError):
            driver.advance(-1)
        before = driver.now_ns
        driver.advance(2.5)
        assert driver.now_ns - before == 2_500_000
    async with npuhal.open_driver(clock="real") as driver:
        with pytest.raises(npuhal.NpuStateError):
            driver.advance(1)
        with pytest.raises(npuhal.NpuStateError):
            driver.run_until_idle()
