"""Models loaded and unloaded while other work is queued and running (issue 12's segfault).

The npu service's budget policy asks apps to unload and reload all the time, so
one driver sees far more loads in its life than the emulated hardware's model
table first holds (16, then 32, ...).  A running or queued job refers to its
model; the table's growth must never move a model under it.  Before the fix
the table was an array of models that ``realloc`` moved: the next slice
boundary read the freed array, and ``npuemu bench scheduling mixed
--whole-stack --no-sweep --npu-policy budget`` died of SIGSEGV in
``advance``.  ``make sanitize`` runs this file against the ASan build.
"""

import json
import signal
import subprocess
import sys

import numpy as np
import pytest

import npuhal
from npuhal import DeviceType, EndReason, FuseCode, ModelBuilder, OperationType, PreemptionMode, WorkEnded

UID = 10001


def fc_model(n=64, seed=0):
    rng = np.random.default_rng(seed)
    m = ModelBuilder()
    x = m.input((1, n))
    w = m.constant(rng.standard_normal((n, n), dtype=np.float32))
    b = m.constant(rng.standard_normal(n, dtype=np.float32))
    m.output(m.operation(OperationType.FULLY_CONNECTED, [x, w, b, m.int32(FuseCode.RELU)], (1, n)))
    return m.build()


def add_model():
    m = ModelBuilder()
    x = m.input((1, 4))
    m.output(m.operation(OperationType.ADD, [x, m.constant(np.ones((1, 4), np.float32)), m.int32(FuseCode.NONE)], (1, 4)))
    return m.build()


async def test_seventy_loads_while_work_is_queued_and_running_end_with_every_result_right():
    x = np.random.default_rng(1).standard_normal((1, 64), dtype=np.float32)
    want = npuhal.run_model(fc_model(), [x])[0]
    async with npuhal.open_driver(preemption=PreemptionMode.KILL_RESTART) as driver:
        gpu = next(d for d in driver.devices if d.type is DeviceType.GPU)  # one channel
        long = driver.load_model(gpu, fc_model(), cost_scale=20_000)
        running = driver.submit(long, [x], uid=UID, job_priority=500)
        queued = driver.submit(long, [x], uid=UID, job_priority=600)
        small = add_model()
        shorts = []
        for i in range(70):
            driver.advance(0.02)  # a slice boundary with the table at every size
            handle = driver.load_model(gpu, small)
            if i % 10 == 8:  # a fresh model's short work preempts the long ones
                shorts.append(driver.submit(handle, [np.full((1, 4), i, np.float32)], uid=UID + 1, job_priority=0))
            elif i % 2:
                driver.unload_model(handle)
        assert max(h.id for h in driver._models.values()) > 64  # the table grew past 16, 32 and 64
        driver.run_until_idle()
        ends = {e.info.id: e.reason for e in driver.drain_events() if isinstance(e, WorkEnded) and e.is_final}
        assert [ends[w] for w in (running, queued, *shorts)] == [EndReason.COMPLETED] * (2 + len(shorts))
        np.testing.assert_array_equal(driver.outputs(running)[0], want)
        np.testing.assert_array_equal(driver.outputs(queued)[0], want)
        assert [float(driver.outputs(w)[0][0, 0]) for w in shorts] == [i + 1.0 for i in range(8, 70, 10)]


@pytest.mark.slow
def test_bench_scheduling_mixed_whole_stack_under_the_budget_policy_runs_to_the_end(tmp_path):
    # The user's very command (one scheduling policy, to keep it short), in its own
    # process: before the fix it died of SIGSEGV every time.
    cmd = [sys.executable, "-c", "from framework.cli import main; main()", "bench", "scheduling", "mixed",
           "--whole-stack", "--no-sweep", "--npu-policy", "budget", "--policy", "preempt-kill", "--no-plot", "-q",
           "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    died = f" (killed by {signal.Signals(-proc.returncode).name})" if proc.returncode < 0 else ""
    assert proc.returncode == 0, f"exit {proc.returncode}{died}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    (w,) = json.loads((tmp_path / "scheduling.json").read_text())["workloads"]
    assert w["npu_policy"] == "budget"
    (run,) = w["nominal"]
    assert run["policy"] == "preempt-kill" and run["requests"] > 100
    assert run["completed"] == run["requests"] and run["wrong_results"] == 0
