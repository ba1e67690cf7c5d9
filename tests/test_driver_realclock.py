"""The real clock: C worker threads compute, the eventfd wakes trio.

These assert order and results, never durations: the machine may be slow.
Each test takes a fraction of a second of wall time.
"""

import numpy as np
import pytest
import trio

import npuhal
from npuhal import EndReason, FuseCode, ModelBuilder, OperationType, PreemptionMode, StartReason, WorkEnded, WorkStarted

UID = 10001
# About 100 ms of emulated time for the small model below: long enough that
# Python has queued everything else before it ends, even on a slow machine.
LONG = 300_000


def fc_model(n_in=64, units=32):
    rng = np.random.default_rng(0)
    m = ModelBuilder()
    x = m.input((1, n_in))
    w = m.constant(rng.standard_normal((units, n_in), dtype=np.float32))
    b = m.constant(rng.standard_normal(units, dtype=np.float32))
    m.output(m.operation(OperationType.FULLY_CONNECTED, [x, w, b, m.int32(FuseCode.NONE)], (1, units)))
    return m.build()


def reference(model, x):
    # The same kernels on this thread, no device: what an unpreempted run computes.
    return npuhal.run_model(model, [x])[0]


def single_channel_device(driver):
    return next(d for d in driver.devices if d.type is npuhal.DeviceType.GPU)


async def test_a_work_finishing_on_a_worker_thread_wakes_a_waiting_task():
    model = fc_model()
    async with npuhal.open_driver(clock="real", speed=0.05) as driver:
        handle = driver.load_model(0, model)
        x = np.random.default_rng(1).standard_normal((1, 64), dtype=np.float32)
        seen = []
        with trio.fail_after(30):
            work = driver.submit(handle, [x], uid=UID, job_priority=0)
            while not any(isinstance(e, WorkEnded) for e in seen):
                seen += await driver.wait_events()
        assert [type(e).__name__ for e in seen if hasattr(e, "info")] == ["WorkRequested", "WorkStarted", "WorkEnded"]
        assert seen[-1].reason is EndReason.COMPLETED and seen[-1].info.id == work
        np.testing.assert_array_equal(driver.outputs(work)[0], reference(model, x))


async def test_queued_work_runs_in_priority_order_on_the_threaded_path():
    model = fc_model()
    async with npuhal.open_driver(clock="real", speed=1.0, preemption=PreemptionMode.NONE) as driver:
        dev = single_channel_device(driver)
        blocker_model = driver.load_model(dev, model, cost_scale=LONG)
        handle = driver.load_model(dev, model)
        rng = np.random.default_rng(2)
        xs = [rng.standard_normal((1, 64), dtype=np.float32) for _ in range(5)]
        blocker = driver.submit(blocker_model, [xs[0]], uid=UID, job_priority=1000)
        with trio.fail_after(30):
            # Wait until the blocker holds the channel, so the rest queue behind it.
            while not any(isinstance(e, WorkStarted) for e in await driver.wait_events()):
                pass
            prios = [600, 50, 300, 900]
            ids = [driver.submit(handle, [x], uid=UID, job_priority=p) for x, p in zip(xs[1:], prios)]
            ended = {i: await driver.wait_work(i) for i in [blocker, *ids]}
            events = driver.drain_events()
        assert all(e.reason is EndReason.COMPLETED for e in ended.values())
        assert all(ended[i].info.id == i for i in ended)  # wait_work answers each work's own end
        # The order the C threads finished them in, as the event ring recorded it.
        completed = [e.info.id for e in events if isinstance(e, WorkEnded)]
        assert completed == [blocker] + [i for _, i in sorted(zip(prios, ids))]
        for x, i in zip(xs[1:], ids):
            np.testing.assert_array_equal(driver.outputs(i)[0], reference(model, x))


async def test_checkpoint_preemption_on_worker_threads_gives_identical_results():
    model = fc_model()
    async with npuhal.open_driver(clock="real", speed=1.0, preemption=PreemptionMode.CHECKPOINT, slices_per_operation=16) as driver:
        dev = single_channel_device(driver)
        slow = driver.load_model(dev, model, cost_scale=LONG)
        fast = driver.load_model(dev, model)
        rng = np.random.default_rng(3)
        x_low, x_high = (rng.standard_normal((1, 64), dtype=np.float32) for _ in range(2))
        events = []
        with trio.fail_after(30):
            low = driver.submit(slow, [x_low], uid=UID, job_priority=1000)
            while not any(isinstance(e, WorkStarted) for e in events):
                events += await driver.wait_events()
            high = driver.submit(fast, [x_high], uid=UID, job_priority=0)
            await driver.wait_work(low)
            await driver.wait_work(high)
            events += driver.drain_events()
        life = [(type(e).__name__, e.reason.name if hasattr(e, "reason") else None) for e in events if hasattr(e, "info") and e.info.id == low]
        assert ("WorkEnded", "PAUSED") in life and ("WorkStarted", "RESUMED") in life
        assert life[-1] == ("WorkEnded", "COMPLETED")
        ends = [e.info.id for e in events if isinstance(e, WorkEnded) and e.is_final]
        assert ends == [high, low]
        np.testing.assert_array_equal(driver.outputs(low)[0], reference(model, x_low))
        np.testing.assert_array_equal(driver.outputs(high)[0], reference(model, x_high))


async def test_closing_with_work_in_flight_stops_the_threads_and_releases():
    model = fc_model()
    driver = npuhal.Driver.open(clock="real", speed=1.0)
    handle = driver.load_model(0, model, cost_scale=100000)
    works = [driver.submit(handle, [np.zeros((1, 64), np.float32)], uid=UID, job_priority=0) for _ in range(4)]
    await trio.sleep(0.01)
    with trio.fail_after(30):
        await driver.aclose()
    with pytest.raises(npuhal.NpuClosedError):
        driver.outputs(works[0])


async def test_events_stream_on_the_real_clock():
    model = fc_model()
    async with npuhal.open_driver(clock="real", speed=0.05) as driver:
        handle = driver.load_model(0, model)
        ids = [driver.submit(handle, [np.ones((1, 64), np.float32)], uid=UID, job_priority=0) for _ in range(3)]
        ended = set()
        with trio.fail_after(30):
            async for event in driver.events():
                if isinstance(event, WorkEnded):
                    ended.add(event.info.id)
                    if ended == set(ids):
                        break
                elif isinstance(event, WorkStarted):
                    assert event.reason is StartReason.INITIAL
