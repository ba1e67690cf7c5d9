"""The ISchedulingCallback debounce rules (npuhal._debounce), on explicit times."""

from npuhal._debounce import DEBOUNCE_DURATION_S as W
from npuhal._debounce import Debouncer, Kind

PAUSED, COMPLETED, FAILED = 2, 4, 3
INITIAL, RESUMED = 0, 1


def kinds(emits):
    return [(e.kind, e.info, e.reason) for e in emits]


def run_job(d, work, uid, t0, t1, reason=COMPLETED):
    out = d.requested(work, uid, f"req{work}", t0)
    out += d.started(work, uid, f"start{work}", INITIAL, t0)
    out += d.ended(work, uid, f"end{work}", reason, t1)
    return out


def test_one_inference_gives_requested_started_then_ended_after_the_window():
    d = Debouncer(paused_reason=PAUSED)
    out = run_job(d, 1, 10001, 0.0, 0.010)
    assert kinds(out) == [(Kind.REQUESTED, "req1", None), (Kind.STARTED, "start1", INITIAL)]
    assert d.next_due() == 0.010 + W
    assert d.flush(0.010 + W - 0.001) == []
    assert kinds(d.flush(0.010 + W)) == [(Kind.ENDED, "end1", COMPLETED)]
    assert d.next_due() is None


def test_a_burst_from_one_uid_is_one_triple_ending_with_the_last_job():
    d = Debouncer(paused_reason=PAUSED)
    out = []
    t = 0.0
    for work in range(1, 6):
        out += run_job(d, work, 10001, t, t + 0.010)
        out += d.flush(t + 0.020)  # the next job comes 20 ms after the last ended: inside the window
        t += 0.020
    assert kinds(out) == [(Kind.REQUESTED, "req1", None), (Kind.STARTED, "start1", INITIAL)]
    assert kinds(d.flush(t + W)) == [(Kind.ENDED, "end5", COMPLETED)]


def test_work_after_the_window_is_reported_again():
    d = Debouncer(paused_reason=PAUSED)
    run_job(d, 1, 7, 0.0, 0.01)
    assert len(d.flush(0.01 + W)) == 1
    out = run_job(d, 2, 7, 1.0, 1.01)
    assert [e.kind for e in out] == [Kind.REQUESTED, Kind.STARTED]


def test_the_held_end_waits_while_the_uid_still_has_work_in_flight():
    d = Debouncer(paused_reason=PAUSED)
    d.requested(1, 7, "r1", 0.0)
    d.requested(2, 7, "r2", 0.0)  # suppressed: work 1 is in flight
    assert d.started(2, 7, "s2", INITIAL, 0.0) == []
    d.ended(1, 7, "e1", COMPLETED, 0.01)
    assert d.flush(1.0) == [] and d.next_due() is None
    d.ended(2, 7, "e2", FAILED, 1.0)
    assert kinds(d.flush(1.0 + W)) == [(Kind.ENDED, "e2", FAILED)]


def test_uids_are_debounced_independently():
    d = Debouncer(paused_reason=PAUSED)
    a = run_job(d, 1, 100, 0.0, 0.01)
    b = run_job(d, 2, 200, 0.005, 0.02)
    assert len(a) == 2 and len(b) == 2
    assert kinds(d.flush(1.0)) == [(Kind.ENDED, "end1", COMPLETED), (Kind.ENDED, "end2", COMPLETED)]


def test_pause_and_resume_of_reported_work_pass_straight_through():
    d = Debouncer(paused_reason=PAUSED)
    d.requested(1, 5, "r", 0.0)
    d.started(1, 5, "s", INITIAL, 0.0)
    assert kinds(d.ended(1, 5, "p", PAUSED, 0.01)) == [(Kind.ENDED, "p", PAUSED)]
    assert kinds(d.started(1, 5, "s2", RESUMED, 0.02)) == [(Kind.STARTED, "s2", RESUMED)]
    assert d.next_due() is None  # a pause is not a final end


def test_pause_of_suppressed_work_is_suppressed_too():
    d = Debouncer(paused_reason=PAUSED)
    d.requested(1, 5, "r1", 0.0)
    d.requested(2, 5, "r2", 0.0)
    assert d.ended(2, 5, "p2", PAUSED, 0.01) == []
    assert d.started(2, 5, "s2", RESUMED, 0.02) == []


def test_forget_uid_drops_what_was_held():
    d = Debouncer(paused_reason=PAUSED)
    run_job(d, 1, 5, 0.0, 0.01)
    d.forget_uid(5)
    assert d.flush(1.0) == [] and d.next_due() is None
