"""The lab's metrics on cases small enough to compute by hand."""

import math

import pytest

from framework import lab
from framework.lab import Job, Policy, RunResult
from npuhal import EndReason


def test_normalized_turnaround_is_shared_over_isolated():
    assert lab.normalized_turnaround(15.0, 5.0) == 3.0
    assert lab.normalized_turnaround(5.0, 5.0) == 1.0


def test_antt_stp_fairness_by_hand():
    # Three tasks slowed 1x, 2x and 4x: NP = 1, 0.5, 0.25.
    ntts = [1.0, 2.0, 4.0]
    assert lab.antt(ntts) == pytest.approx(7 / 3)
    assert lab.stp(ntts) == pytest.approx(1.75)
    assert lab.fairness(ntts) == pytest.approx(0.25)
    # No interference: STP is the task count, fairness perfect.
    assert lab.stp([1.0] * 4) == 4.0 and lab.fairness([1.0] * 4) == 1.0
    # Everybody slowed alike is fair, however slow.
    assert lab.fairness([3.0, 3.0]) == 1.0


def test_sla_satisfaction_counts_requests_within_k_isolated_and_misses_the_unfinished():
    # isolated 3 ms, k = 4: the deadline is 12 ms.
    assert lab.sla_satisfaction([4.0, 12.0, None, 13.0], 3.0, 4) == 0.5
    # One isolated time per request.
    assert lab.sla_satisfaction([10.0, 10.0], [2.0, 3.0], 4) == 0.5
    assert lab.sla_satisfaction([10.0, 10.0], [2.0, 3.0], 5) == 1.0


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(10, 0, -1)]  # unsorted on purpose
    assert lab.percentile(values, 99) == 10.0
    assert lab.percentile(values, 50) == 5.0
    assert lab.percentile(values, 90) == 9.0
    assert lab.percentile(values, 91) == 10.0
    assert lab.percentile([7.0], 99) == 7.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: lab.antt([]),
        lambda: lab.stp([0.0]),
        lambda: lab.fairness([1.0, -2.0]),
        lambda: lab.normalized_turnaround(1.0, 0.0),
        lambda: lab.normalized_turnaround(math.nan, 1.0),
        lambda: lab.sla_satisfaction([], 1.0, 4),
        lambda: lab.sla_satisfaction([1.0], 1.0, 0),
        lambda: lab.sla_satisfaction([1.0, 2.0], [1.0], 4),
        lambda: lab.percentile([1.0], 0),
        lambda: lab.percentile([], 50),
    ],
)
def test_metrics_of_nothing_or_of_nonsense_raise_valueerror(call):
    with pytest.raises(ValueError):
        call()


def _workload():
    return lab.parse_workload({
        "name": "hand",
        "duration_ms": 100,
        "device": "emu-gpu",
        "sla": {"k": 2.0},
        "task": [
            {"name": "hi", "priority": 0, "work_ms": 2, "arrival": {"kind": "trace", "times_ms": [0, 10]}},
            {"name": "lo", "priority": 1000, "work_ms": 10, "arrival": {"kind": "trace", "times_ms": [0]}},
        ],
    })


def test_summarize_a_hand_made_run():
    ms = 1_000_000
    w = _workload()
    jobs = [
        # hi #1: arrives 0, waits 10 ms behind lo, runs 2 ms: turnaround 12 = 6x isolated (SLA miss at k=2).
        Job(task=0, arrival_ns=0, work_id=1, start_ns=10 * ms, end_ns=12 * ms, reason=EndReason.COMPLETED, busy_ns=2 * ms,
            correct=True),
        # hi #2: arrives 10, waits 2 ms behind hi #1: turnaround 4 = 2x.
        Job(task=0, arrival_ns=10 * ms, work_id=2, start_ns=12 * ms, end_ns=14 * ms, reason=EndReason.COMPLETED,
            busy_ns=2 * ms, correct=True),
        # lo: preempted once, 1 ms of restore on top of its 10: turnaround 15 = 1.5x.
        Job(task=1, arrival_ns=0, work_id=3, start_ns=0, end_ns=15 * ms, reason=EndReason.COMPLETED, pauses=1,
            busy_ns=11 * ms, correct=False),
    ]
    run = RunResult(Policy("x", "hand"), 1.0, jobs, channels=1, saves_ns=ms, makespan_ns=15 * ms, events_dropped=0)
    s = lab.summarize(run, w, [2 * ms, 10 * ms], [2 * ms, 10 * ms], offered=0.5)
    hi, lo = s["tasks"]
    assert hi["ntt"] == pytest.approx((6 + 2) / 2)
    assert lo["ntt"] == pytest.approx(1.5)
    assert s["antt"] == pytest.approx((4 + 1.5) / 2)
    assert s["stp"] == pytest.approx(1 / 4 + 1 / 1.5)
    assert s["fairness"] == pytest.approx((1 / 4) / (1 / 1.5))
    # SLA k=2 (deadline 4 ms): #1 (12 ms) misses, #2 (4 ms) meets.
    assert s["sla_satisfaction"] == 0.5 and hi["sla_satisfaction"] == 0.5 and lo["sla_satisfaction"] is None
    assert s["high_p99_ms"] == 12.0 and s["high_p50_ms"] == 4.0
    # Overhead: the save (1 ms) plus lo's inflation over its isolated channel time (1 ms).
    assert s["preemptions"] == 1 and s["preemption_overhead_ms"] == pytest.approx(2.0)
    assert s["overhead_pct"] == pytest.approx(100 * 2 / 14)
    assert s["wrong_results"] == 1 and s["failed"] == 0
    assert s["throughput_rps"] == pytest.approx(3 / 0.015)


def test_a_task_that_never_completes_makes_fairness_zero_and_antt_undefined():
    ms = 1_000_000
    w = _workload()
    jobs = [
        Job(task=0, arrival_ns=0, work_id=1, start_ns=0, end_ns=2 * ms, reason=EndReason.COMPLETED, busy_ns=2 * ms),
        Job(task=0, arrival_ns=10 * ms, work_id=2, start_ns=10 * ms, end_ns=12 * ms, reason=EndReason.COMPLETED,
            busy_ns=2 * ms),
        Job(task=1, arrival_ns=0, work_id=3, start_ns=2 * ms, end_ns=3 * ms, reason=EndReason.FAILED, busy_ns=ms),
    ]
    run = RunResult(Policy("x", "hand"), 1.0, jobs, channels=1, saves_ns=0, makespan_ns=12 * ms, events_dropped=0)
    s = lab.summarize(run, w, [2 * ms, 10 * ms], [2 * ms, 10 * ms], offered=0.5)
    assert s["failed"] == 1 and s["tasks"][1]["ntt"] is None and s["tasks"][1]["np"] == 0.0
    assert s["fairness"] == 0.0 and s["antt"] is None
    assert s["stp"] == pytest.approx(1.0)
