"""The binding's public face: exports, devices, errors, open/close, events into trio."""

import ast
import os
import pathlib

import numpy as np
import pytest
import trio
import trio.testing

import npuhal
from interfaces.android.hardware.neuralnetworks import DataLocation
from model_edits import with_operand, with_operation
from npuhal import DeviceStatus, DeviceType, FuseCode, ModelBuilder, OperandType, OperationType

NPUHAL = pathlib.Path(npuhal.__file__).parent


def small_model():
    m = ModelBuilder()
    x = m.input((2, 4))
    m.output(m.operation(OperationType.ADD, [x, m.constant(np.ones((2, 4), np.float32)), m.int32(FuseCode.NONE)], (2, 4)))
    return m.build()


def test_every_public_name_is_exported_once_from_a_private_module():
    tree = ast.parse((NPUHAL / "__init__.py").read_text())
    names = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            assert node.module.startswith("_"), node.module
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name} must be re-exported as itself"
                names.append(alias.name)
    assert len(names) == len(set(names))
    # Exactly what the private modules declare public: nothing missing, nothing extra.
    import importlib

    declared = set()
    for module in {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}:
        declared |= set(importlib.import_module(f"npuhal.{module}").__all__)
    assert set(names) == declared
    for required in ("open_driver", "Driver", "Device", "NpuError", "SchedulingConfig", "WorkInfo", "ModelBuilder"):
        assert required in names


def test_nothing_but_lowlevel_touches_cffi():
    for path in NPUHAL.glob("_*.py"):
        if path.name == "_lowlevel.py":
            continue
        text = path.read_text()
        assert "ffi." not in text and "import _npu" not in text and "from . import _npu" not in text, path.name


def test_error_hierarchy_has_builtin_flavours():
    assert issubclass(npuhal.NpuValueError, ValueError)
    assert issubclass(npuhal.NpuCapacityError, MemoryError)
    assert issubclass(npuhal.NpuPermissionError, PermissionError)
    assert issubclass(npuhal.NpuClosedError, trio.ClosedResourceError)
    assert issubclass(npuhal.NpuLookupError, LookupError)
    for cls in (npuhal.NpuInvalidPriorityError, npuhal.NpuDuplicateUidError, npuhal.NpuAttributionError, npuhal.NpuAbiError):
        assert issubclass(cls, npuhal.NpuError)
    e = npuhal.NpuCapacityError("full", code=-13, name="WEIGHT_MEMORY_FULL", strerror="no room")
    assert (e.code, e.name, e.strerror, str(e)) == (-13, "WEIGHT_MEMORY_FULL", "no room", "full")


def test_every_c_error_code_maps_to_a_specific_class():
    from npuhal import _lowlevel
    from npuhal._errors import NpuError, error_class_for

    seen = 0
    for code in range(-1, -200, -1):
        name = _lowlevel.error_name(code)
        if name == "UNKNOWN":
            break
        seen += 1
        assert error_class_for(name) is not NpuError, f"{name} has no class"
        assert _lowlevel.strerror(code)
    assert seen >= 30


async def test_devices_describe_the_reference_driver():
    async with npuhal.open_driver() as driver:
        devices = driver.devices
        names = [d.name for d in devices]
        assert len(set(names)) == len(names) >= 4
        assert [d.number for d in devices] == list(range(len(devices)))
        for d in devices:
            vendor, _, rest = d.name.partition("-")
            assert vendor == driver.vendor and rest and "-" not in rest
            assert d.version and d.feature_level == 29 and d.status is DeviceStatus.AVAILABLE
            assert npuhal.BUILD_ID in d.version  # a new C build is a new getVersionString()
            assert d.capabilities[OperandType.TENSOR_FLOAT32].execTime > 0
            assert d.capabilities[OperandType.TENSOR_FLOAT32].powerUsage > 0
            assert d.channels >= 1 and d.weight_memory_bytes > 0
        assert {DeviceType.ACCELERATOR, DeviceType.GPU, DeviceType.OTHER} <= {d.type for d in devices}
        npu = next(d for d in devices if d.type is DeviceType.ACCELERATOR)
        assert npu.channels == 2
        hetero = next(d for d in devices if d.parts)
        assert hetero.type is DeviceType.OTHER and len(hetero.parts) == 2
        assert all(p in range(len(devices)) and devices[p].name != hetero.name for p in hetero.parts)
        assert driver.device_by_name(npu.name) == npu
        with pytest.raises(npuhal.NpuLookupError):
            driver.device_by_name("emu-nothing")
        assert "emu" in driver.dump() or driver.vendor in driver.dump()


async def test_use_after_close_raises_closed_and_close_twice_is_harmless():
    driver = npuhal.Driver.open()
    handle = driver.load_model(0, small_model())
    work = driver.submit(handle, [np.zeros((2, 4), np.float32)], uid=1, job_priority=0)
    await driver.aclose()
    await driver.aclose()
    driver.close()
    assert driver.closed and not handle.loaded
    for call in (
        lambda: driver.devices,
        lambda: driver.drain_events(),
        lambda: driver.submit(handle, [np.zeros((2, 4), np.float32)], uid=1, job_priority=0),
        lambda: driver.outputs(work),
        lambda: driver.advance(1),
        lambda: handle.unload(),
        lambda: driver.dump(),
    ):
        with pytest.raises(npuhal.NpuClosedError):
            call()
    with pytest.raises(trio.ClosedResourceError):
        await driver.wait_events()


async def test_open_driver_closes_even_when_the_body_raises():
    with pytest.raises(KeyError):
        async with npuhal.open_driver() as driver:
            raise KeyError("boom")
    assert driver.closed


def test_sync_open_for_tools():
    with npuhal.Driver.open() as driver:
        assert driver.clock == "virtual" and driver.devices
    assert driver.closed


@pytest.mark.parametrize(
    "kwargs",
    [{"clock": "wall"}, {"speed": 0}, {"speed": float("nan")}, {"slices_per_operation": 0}, {"preemption": 9}],
)
def test_open_refuses_bad_options(kwargs):
    with pytest.raises(ValueError):
        npuhal.Driver.open(**kwargs)


def test_open_refuses_a_missing_or_bogus_driver(tmp_path):
    with pytest.raises(npuhal.NpuValueError, match="no driver"):
        npuhal.Driver.open(tmp_path / "absent.so")
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(npuhal.NpuDriverError) as info:
        npuhal.Driver.open(bogus)
    assert info.value.name == "DRIVER_LOAD_FAILED"


async def test_closing_wakes_a_task_waiting_for_events(autojump_clock):
    driver = npuhal.Driver.open()
    got = []

    async def waiter():
        with pytest.raises(npuhal.NpuClosedError):
            await driver.wait_events()
        got.append("woken")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(1)
        await driver.aclose()
    assert got == ["woken"]


async def test_event_stream_ends_when_the_driver_closes(autojump_clock):
    driver = npuhal.Driver.open()
    handle = driver.load_model(0, small_model())
    seen = []

    async def consume():
        async for event in driver.events():
            if isinstance(event, (npuhal.WorkRequested, npuhal.WorkStarted, npuhal.WorkEnded)):
                seen.append(type(event).__name__)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.sleep(1)
        driver.submit(handle, [np.zeros((2, 4), np.float32)], uid=1, job_priority=0)
        driver.run_until_idle()  # pulls the events; the waiting consumer is woken
        await trio.sleep(1)
        await driver.aclose()
    assert seen == ["WorkRequested", "WorkStarted", "WorkEnded"]


async def test_wait_work_and_a_pump_can_share_the_event_fd(autojump_clock):
    async with npuhal.open_driver() as driver:
        handle = driver.load_model(0, small_model())
        work = driver.submit(handle, [np.ones((2, 4), np.float32)], uid=1, job_priority=0)
        pumped = []

        async def pump():
            while not any(isinstance(e, npuhal.WorkEnded) for e in pumped):
                pumped.extend(await driver.wait_events())

        async def stepper():
            await trio.sleep(1)
            driver.run_until_idle()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump)
            nursery.start_soon(stepper)
            ended = await driver.wait_work(work)
        assert ended.reason is npuhal.EndReason.COMPLETED
        assert [type(e).__name__ for e in pumped if hasattr(e, "info")] == ["WorkRequested", "WorkStarted", "WorkEnded"]
        np.testing.assert_array_equal(driver.outputs(work)[0], np.full((2, 4), 2, np.float32))


async def test_the_raw_eventfd_becomes_readable_when_events_wait(autojump_clock):
    # Wait on the C eventfd directly: nothing but C's signal can wake this task.
    async with npuhal.open_driver() as driver:
        handle = driver.load_model(0, small_model())
        fd = driver._sys.event_fd()
        assert not os.get_blocking(fd)  # C made it non-blocking, as trio needs
        driver.drain_events()
        woke = trio.Event()

        async def sleeper():
            await trio.lowlevel.wait_readable(fd)
            woke.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper)
            await trio.sleep(1)
            assert not woke.is_set()
            # submit() queues WorkRequested in C and does not read it back.
            driver.submit(handle, [np.zeros((2, 4), np.float32)], uid=1, job_priority=0)
            with trio.fail_after(5):
                await woke.wait()


def test_the_compiled_abi_is_checked():
    from npuhal import _lowlevel

    v = _lowlevel.BINDING_ABI_VERSION
    assert npuhal.ABI_VERSION == v and _lowlevel._check_abi() is None
    header = f"enum {{ NPU_ABI_VERSION = {v} }};"
    assert _lowlevel._abi_problem(v, v, header) is None
    assert _lowlevel._abi_problem(v, v, None) is None  # installed: no sources
    # A stale build: the sources moved on, or the .so is older than the binding.
    assert "make ext" in _lowlevel._abi_problem(v, v, f"enum {{ NPU_ABI_VERSION = {v + 1} }};")
    assert "make ext" in _lowlevel._abi_problem(v - 1, v - 1, header)


def test_every_c_enum_is_checked_against_the_compiled_aidl_enum_both_ways():
    from interfaces.android.hardware import neuralnetworks, npu
    from interfaces.c_enums import enum_problem
    from npuhal import _lowlevel

    checked = {enum_cls for enum_cls, _, _ in _lowlevel._C_ENUMS}
    for aidl_enum in (neuralnetworks.DeviceType, neuralnetworks.DeviceStatus, neuralnetworks.OperandType,
                      neuralnetworks.OperandLifeTime, neuralnetworks.OperationType, neuralnetworks.FusedActivationFunc,
                      npu.StartReason, npu.EndReason):
        assert aidl_enum in checked, aidl_enum
    # Every enum of the C headers the binding reads is one of them.
    c_enums = {c_enum for _, c_enum, _ in _lowlevel._C_ENUMS}
    assert c_enums >= {"npu_device_type", "npu_operation_type", "npu_operand_type", "npu_operand_lifetime",
                       "npu_fuse_code", "npu_start_reason", "npu_end_reason"}
    assert _lowlevel._check_enums() is None
    OperationType = neuralnetworks.OperationType
    ops = {int(m): f"NPU_OP_{m.name}" for m in OperationType}
    assert enum_problem(OperationType, "npu_operation_type", ops, "NPU_OP_") is None
    # A number that moved, an operation only C has, one only the AIDL has: each named.
    moved = enum_problem(OperationType, "npu_operation_type", {**ops, 96: "NPU_OP_SUB"} | {36: "NPU_OP_X"}, "NPU_OP_")
    assert "NPU_OP_SUB is 96 in C, 36 in OperationType" in moved
    extra = enum_problem(OperationType, "npu_operation_type", {**ops, 95: "NPU_OP_HARD_SWISH"}, "NPU_OP_")
    assert "C's NPU_OP_HARD_SWISH = 95 is missing in OperationType" in extra
    missing = enum_problem(OperationType, "npu_operation_type", {k: v for k, v in ops.items() if k != 25}, "NPU_OP_")
    assert "interfaces.android.hardware.neuralnetworks.OperationType" in missing
    assert "OperationType.SOFTMAX = 25 is missing in C" in missing
    # The header's NN 1.2 lifetime names are the AIDL's SUBGRAPH_* / CONSTANT_POOL; a count sentinel is no member.
    lifetimes = {0: "NPU_LIFETIME_TEMPORARY_VARIABLE", 1: "NPU_LIFETIME_MODEL_INPUT", 2: "NPU_LIFETIME_MODEL_OUTPUT",
                 3: "NPU_LIFETIME_CONSTANT_COPY", 4: "NPU_LIFETIME_CONSTANT_REFERENCE", 5: "NPU_LIFETIME_NO_VALUE",
                 6: "NPU_LIFETIME_COUNT"}
    assert enum_problem(neuralnetworks.OperandLifeTime, "npu_operand_lifetime", lifetimes, "NPU_LIFETIME_") is None


def test_run_model_without_a_device_uses_the_same_kernels():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (out,) = npuhal.run_model(small_model(), [x])
    np.testing.assert_array_equal(out, x + 1)
    mine = np.zeros((2, 4), np.float32)
    assert npuhal.run_model(small_model(), [x.tobytes()], [mine])[0] is mine
    np.testing.assert_array_equal(mine, x + 1)
    with pytest.raises(npuhal.NpuValueError):
        npuhal.run_model(small_model(), [x, x])
    with pytest.raises(npuhal.NpuModelError, match="BAD_OPERAND_INDEX"):
        npuhal.run_model(with_operation(small_model(), 0, inputs=[0, 9, 2]), [x])


@pytest.mark.parametrize(
    "call",
    [
        lambda d, h: d.hang_channel(0, -1),
        lambda d, h: d.reset_channel(2**40, 0),
        lambda d, h: d.device(-3),
        lambda d, h: d.memory_info(2**33),
        lambda d, h: d.heat_spike(float("nan")),
        lambda d, h: d.hold_temperature(float("inf")),
        lambda d, h: d.hold_temperature("hot"),
        lambda d, h: d.advance(1e30),
        lambda d, h: d.cancel("7"),
        lambda d, h: d.set_preemption_mode(42),
        lambda d, h: d.load_model(0, small_model(), emulated_size_bytes=2**70),
        lambda d, h: d.load_model(0, small_model(), cost_scale=0),
        lambda d, h: d.submit(h, [np.zeros((2, 4), np.float32)], uid=2**40, job_priority=0),
        lambda d, h: d.submit(h, [np.zeros((2, 4), np.float32)], uid=1, job_priority=0, group_id=b"short"),
        lambda d, h: d.submit(h, [np.zeros((2, 4), np.float32)], uid=1, job_priority=0, feature_id=b"bytes"),
        lambda d, h: d.submit(h, [object()], uid=1, job_priority=0),
        lambda d, h: d.supported_operations(0, {"operands": []}),
    ],
)
def test_bad_arguments_are_value_errors_never_crashes(call):
    with npuhal.Driver.open() as driver:
        handle = driver.load_model(0, small_model())
        with pytest.raises(npuhal.NpuValueError):
            call(driver, handle)
        # The driver is still fine afterwards.
        work = driver.submit(handle, [np.ones((2, 4), np.float32)], uid=1, job_priority=0)
        driver.run_until_idle()
        np.testing.assert_array_equal(driver.outputs(work)[0], np.full((2, 4), 2, np.float32))


async def test_execute_returns_outputs_or_raises_with_the_end(autojump_clock):
    async with npuhal.open_driver() as driver:
        handle = driver.load_model(0, small_model())

        async def step():
            while True:
                await trio.sleep(0.001)
                driver.run_until_idle()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(step)
            (out,) = await driver.execute(handle, [np.ones((2, 4), np.float32)], uid=1, job_priority=0)
            np.testing.assert_array_equal(out, np.full((2, 4), 2, np.float32))
            driver.fail_next_work(0)
            with pytest.raises(npuhal.NpuExecutionError) as info:
                await driver.execute(handle, [np.ones((2, 4), np.float32)], uid=1, job_priority=0)
            assert info.value.reason is npuhal.EndReason.FAILED and isinstance(info.value, RuntimeError)
            nursery.cancel_scope.cancel()


async def test_a_cancelled_execute_cancels_its_work(autojump_clock):
    async with npuhal.open_driver() as driver:
        handle = driver.load_model(0, small_model(), cost_scale=100_000)
        with trio.move_on_after(1):
            await driver.execute(handle, [np.ones((2, 4), np.float32)], uid=1, job_priority=0)
        driver.run_until_idle()
        ended = [e for e in driver.drain_events() if isinstance(e, npuhal.WorkEnded)]
        assert [e.reason for e in ended] == [npuhal.EndReason.CANCELLED_USER]


def test_a_forgotten_driver_is_closed_by_the_garbage_collector():
    import gc

    def threads():
        return len(os.listdir("/proc/self/task"))

    before = threads()
    driver = npuhal.Driver.open(clock="real")
    assert threads() > before  # the C worker threads
    del driver
    gc.collect()
    assert threads() == before


async def test_when_the_task_on_the_fd_is_cancelled_another_waiter_takes_over(autojump_clock):
    async with npuhal.open_driver() as driver:
        handle = driver.load_model(0, small_model())
        work = driver.submit(handle, [np.ones((2, 4), np.float32)], uid=1, job_priority=0)
        driver.drain_events()
        results = []
        impatient = trio.CancelScope()

        async def fd_waiter():
            with impatient:
                await driver.wait_events()

        async def patient():
            results.append(await driver.wait_work(work))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fd_waiter)
            await trio.sleep(1)  # fd_waiter now sleeps on the eventfd
            nursery.start_soon(patient)
            await trio.sleep(1)  # patient sleeps behind it
            impatient.cancel()  # the task on the fd leaves...
            await trio.sleep(1)
            # ...then C signals the eventfd, with no pull by anyone in Python.
            driver._sys.advance(10**9)
            with trio.fail_after(5):
                while not results:
                    await trio.sleep(0.01)
        assert results[0].reason is npuhal.EndReason.COMPLETED


def test_shared_memory_carries_weights_inputs_and_outputs():
    binder = pytest.importorskip("framework.binder._fd", reason="framework.binder's SharedMemory is not there")
    SharedMemory = binder.SharedMemory
    rng = np.random.default_rng(9)
    w = rng.standard_normal((2, 4), dtype=np.float32)
    x = rng.standard_normal((2, 4), dtype=np.float32)
    model = small_model()
    # Move the constant into a shared-memory pool of its own, as an app's runtime would send it.
    weights = SharedMemory.create("weights", w.nbytes)
    weights.mapReadWrite()[:] = w.tobytes()
    const = model.main.operations[0].inputs[1]
    location = DataLocation(poolIndex=0, offset=0, length=w.nbytes)
    hal = with_operand(model, const, lifetime=npuhal.OperandLifeTime.CONSTANT_POOL, location=location)
    hal = hal.replace(pools=[weights])
    shm_in, shm_out = SharedMemory.create("in", x.nbytes), SharedMemory.create("out", x.nbytes)
    shm_in.mapReadWrite()[:] = x.tobytes()
    with npuhal.Driver.open() as driver:
        handle = driver.load_model(0, hal)
        work = driver.submit(handle, [shm_in], [shm_out], uid=1, job_priority=0)
        driver.run_until_idle()
        np.testing.assert_array_equal(driver.outputs(work)[0], x + w)
    # The results are in the region itself, visible through a fresh mapping.
    np.testing.assert_array_equal(np.frombuffer(shm_out.mapReadOnly(), np.float32).reshape(2, 4), x + w)


def test_work_times_reads_one_works_life_from_the_events():
    # The lab and bench/preemption.py both time a work from its events with this.
    with npuhal.Driver.open() as driver:
        handle = driver.load_model(0, small_model())
        done = driver.submit(handle, [np.zeros((2, 4), np.float32)], uid=1, job_priority=0)
        cancelled = driver.submit(handle, [np.zeros((2, 4), np.float32)], uid=1, job_priority=0)
        driver.cancel(cancelled)
        driver.run_until_idle()
        events = driver.drain_events()
    times = npuhal.work_times(events, done)
    assert times.end_reason is npuhal.EndReason.COMPLETED
    assert times.requested_ns <= times.started_ns < times.ended_ns
    ours = [e for e in events if getattr(e, "info", None) is not None and e.info.id == done]
    assert times.requested_ns == ours[0].time_ns and times.ended_ns == ours[-1].time_ns
    gone = npuhal.work_times(events, cancelled)
    assert gone.end_reason is npuhal.EndReason.CANCELLED_USER and gone.requested_ns is not None
    assert npuhal.work_times(events, 10**9) == npuhal.WorkTimes(None, None, None, None)
