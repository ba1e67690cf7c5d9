"""How long does a high-priority job wait for a channel held by low-priority work?

    .venv/bin/python bench/preemption.py            # about 40 s
    .venv/bin/python bench/preemption.py --trials 1000 --real-trials 1000

The scenario: one execution channel (the reference driver's ``emu-gpu``) is
saturated with low-priority work, two long jobs queued back to back.  A short
high-priority job arrives at a uniformly random moment of the first one.  We
measure, under each preemption mode the hardware offers (none, checkpoint at
slice boundaries, kill and restart) and on both clocks:

- the high job's *wait*: from its WorkRequested to its WorkStarted, in emulated
  time (on the real clock that includes the worker thread's real wake-up);
- the *cost to the low-priority work*: how much later the low work finishes
  than it would have with the high job simply run in between (two low jobs plus
  one high job back to back, each measured alone in the same run): context
  saves and restores for a checkpoint, the thrown-away progress for a restart.

Baselines, measured in the same run: each job alone on an idle channel, one
slice of the low job, and DESIGN.md's budget (a high-priority job waits at
most one slice plus a context save; on the real clock, its p99 on a quiet
machine).  Ratios are of medians.  Each real-clock trial is replayed on the
virtual clock with the high job arriving at the same point of the low job:
what the real wait has beyond that replay is the real clock's own lateness
(the worker thread's wake-up, and the machine's scheduling of it), printed
apart, with the machine's load average, which it depends on.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import trio

import npuhal
from interfaces.android.hardware.neuralnetworks import Model
from npuhal import EndReason, FuseCode, ModelBuilder, OperationType, PreemptionMode, WorkStarted, work_times

LOW, HIGH = 1000, 0
UID = 10001


def mlp(width: int, batch: int, layers: int) -> Model:
    rng = np.random.default_rng(0)
    m = ModelBuilder()
    y = m.input((batch, width))
    for _ in range(layers):
        w = m.constant(rng.standard_normal((width, width), dtype=np.float32) * 0.05)
        b = m.constant(np.zeros(width, np.float32))
        y = m.operation(OperationType.FULLY_CONNECTED, [y, w, b, m.int32(FuseCode.RELU)], (batch, width))
    m.output(y)
    return m.build()


class Setup:
    """The models and the knobs shared by every trial."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.low_model = mlp(256, 8, args.layers)
        self.high_model = mlp(256, 1, 1)
        self.low_x = np.random.default_rng(1).standard_normal((8, 256), dtype=np.float32)
        self.high_x = np.random.default_rng(2).standard_normal((1, 256), dtype=np.float32)
        self.cost_scale = args.cost_scale
        self.slices = args.slices
        self.layers = args.layers

    def open(self, mode: PreemptionMode, clock: str) -> tuple[npuhal.Driver, npuhal.ModelHandle, npuhal.ModelHandle]:
        driver = npuhal.Driver.open(clock=clock, preemption=mode, slices_per_operation=self.slices)
        gpu = driver.device_by_name("emu-gpu")
        low = driver.load_model(gpu, self.low_model, cost_scale=self.cost_scale)
        high = driver.load_model(gpu, self.high_model)
        return driver, low, high


def times(events, work_id):
    t = work_times(events, work_id)
    assert t.end_reason in (None, EndReason.COMPLETED), t
    return t.requested_ns, t.started_ns, t.ended_ns


def solo_ns(setup: Setup, which: str) -> tuple[int, int]:
    """One job alone on an idle channel, virtual clock: (its wait, its run time)."""
    driver, low, high = setup.open(PreemptionMode.NONE, "virtual")
    with driver:
        handle, x = (low, setup.low_x) if which == "low" else (high, setup.high_x)
        w = driver.submit(handle, [x], uid=UID, job_priority=LOW)
        driver.run_until_idle()
        req, start, end = times(driver.drain_events(), w)
        return start - req, end - start


async def real_idle_wait_ns(setup: Setup) -> int:
    """The high job alone on an idle channel, real clock: its wait (thread wake-up)."""
    driver, _, high = setup.open(PreemptionMode.NONE, "real")
    async with driver:
        w = driver.submit(high, [setup.high_x], uid=UID, job_priority=HIGH)
        with trio.fail_after(60):
            await driver.wait_work(w)
        req, start, _ = times(driver.drain_events(), w)
        return start - req


def virtual_trial(setup: Setup, mode: PreemptionMode, offset_ns: int) -> tuple[int, int, np.ndarray]:
    driver, low, high = setup.open(mode, "virtual")
    with driver:
        lows = [driver.submit(low, [setup.low_x], uid=UID, job_priority=LOW) for _ in range(2)]
        driver.advance(offset_ns / 1e6)
        hi = driver.submit(high, [setup.high_x], uid=UID, job_priority=HIGH)
        driver.run_until_idle()
        events = driver.drain_events()
        h_req, h_start, _ = times(events, hi)
        first_start = times(events, lows[0])[1]
        last_end = times(events, lows[1])[2]
        return h_start - h_req, last_end - first_start, driver.outputs(lows[0])[0].copy()


async def real_trial(setup: Setup, mode: PreemptionMode, offset_s: float) -> tuple[int, int, np.ndarray, int]:
    """One trial on the real clock: (high wait, low span, low result, the high job's arrival
    after the first low job's start, in emulated ns)."""
    driver, low, high = setup.open(mode, "real")
    async with driver:
        events: list = []
        lows = [driver.submit(low, [setup.low_x], uid=UID, job_priority=LOW) for _ in range(2)]
        with trio.fail_after(60):
            while not any(isinstance(e, WorkStarted) for e in events):
                events += await driver.wait_events()
            await trio.sleep(offset_s)
            hi = driver.submit(high, [setup.high_x], uid=UID, job_priority=HIGH)
            for w in (hi, *lows):
                await driver.wait_work(w)
        events += driver.drain_events()
        h_req, h_start, _ = times(events, hi)
        first_start = times(events, lows[0])[1]
        last_end = times(events, lows[1])[2]
        return h_start - h_req, last_end - first_start, driver.outputs(lows[0])[0].copy(), h_req - first_start


def p99(values):
    return float(np.percentile(values, 99))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=300, help="virtual-clock trials per mode")
    parser.add_argument("--real-trials", type=int, default=300, help="real-clock trials per mode (0: skip)")
    parser.add_argument("--slices", type=int, default=8, help="slices per operation (preemption points)")
    parser.add_argument("--layers", type=int, default=3, help="FULLY_CONNECTED layers of the low job")
    parser.add_argument("--cost-scale", type=float, default=20.0, help="stretches the low job's emulated cost")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.trials < 1 or args.real_trials < 0 or args.slices < 1:
        parser.error("trials and slices must be positive")

    started = time.monotonic()
    load_before = os.getloadavg()
    setup = Setup(args)
    _, low_ns = solo_ns(setup, "low")
    idle_wait = {"virtual": [solo_ns(setup, "high")[0] / 1e6]}
    high_ns = solo_ns(setup, "high")[1]
    if args.real_trials:
        idle_wait["real"] = [trio.run(real_idle_wait_ns, setup) / 1e6 for _ in range(min(args.real_trials, 10))]
    n_slices = args.layers * args.slices
    slice_ns = low_ns / n_slices
    ideal_ns = 2 * low_ns + high_ns  # two low jobs and the high one back to back
    rng = np.random.default_rng(args.seed)

    reference = None
    rows = []
    late: dict[PreemptionMode, list[float]] = {}
    for clock, trials in (("virtual", args.trials), ("real", args.real_trials)):
        if trials == 0:
            continue
        offsets = rng.uniform(0, low_ns, size=trials)
        for mode in (PreemptionMode.NONE, PreemptionMode.CHECKPOINT, PreemptionMode.KILL_RESTART):
            waits, costs = [], []
            for offset in offsets:
                if clock == "virtual":
                    wait, span, out = virtual_trial(setup, mode, int(offset))
                else:
                    wait, span, out, arrived = trio.run(real_trial, setup, mode, offset / 1e9)
                    late.setdefault(mode, []).append((wait - virtual_trial(setup, mode, arrived)[0]) / 1e6)
                if reference is None:
                    reference = out
                # Preempted or not, the low job's result must not change.
                if not np.array_equal(out, reference):
                    print(f"{clock} {mode.name}: the low job's result changed under preemption", file=sys.stderr)
                    return 1
                waits.append(wait / 1e6)
                costs.append(max(span - ideal_ns, 0) / 1e6)
            rows.append((clock, mode, waits, costs))

    save_ms = None
    for clock, mode, _, costs in rows:
        if clock == "virtual" and mode is PreemptionMode.CHECKPOINT:
            save_ms = statistics.median(costs) / 2  # one save and one restore per preemption
    budget_ms = slice_ns / 1e6 + (save_ms or 0.0)

    print("Preemption: a high-priority job arriving on a channel saturated with low-priority work")
    print(f"device emu-gpu (1 channel); low job {low_ns / 1e6:.3f} ms = {n_slices} slices of {slice_ns / 1e6:.3f} ms; "
          f"high job {high_ns / 1e6:.3f} ms alone")
    idle = ", ".join(f"{statistics.median(v):.3f} ms ({k})" for k, v in idle_wait.items())
    print(f"baseline: the high job on an idle channel waits {idle} (median)")
    print(f"budget (DESIGN.md): one slice + a context save = {budget_ms:.3f} ms; "
          f"trials per mode: {args.trials} virtual, {args.real_trials} real")
    print()
    header = f"{'clock':8} {'preemption':13} {'wait med ms':>11} {'wait p99 ms':>11} {'p99/budget':>10} {'med vs none':>11} " \
             f"{'low cost med ms':>15} {'low cost p99 ms':>15} {'cost % low job':>14}"
    print(header)
    print("-" * len(header))
    none_median = {}
    for clock, mode, waits, costs in rows:
        if mode is PreemptionMode.NONE:
            none_median[clock] = statistics.median(waits)
        ratio = statistics.median(waits) / none_median[clock] if none_median[clock] else float("nan")
        print(
            f"{clock:8} {mode.name.lower():13} {statistics.median(waits):11.3f} {p99(waits):11.3f} "
            f"{p99(waits) / budget_ms:10.2f} {ratio:11.3f} {statistics.median(costs):15.3f} {p99(costs):15.3f} "
            f"{100 * statistics.median(costs) / (low_ns / 1e6):13.1f}%"
        )
    if late:
        print()
        print("real clock: the wait beyond the virtual clock's for the same arrival (wake-up and scheduling lateness)")
        header = f"{'preemption':13} {'late med ms':>11} {'late p90 ms':>11} {'late p99 ms':>11} {'late max ms':>11}"
        print(header)
        print("-" * len(header))
        for mode, values in late.items():
            print(f"{mode.name.lower():13} {statistics.median(values):11.3f} {float(np.percentile(values, 90)):11.3f} "
                  f"{p99(values):11.3f} {max(values):11.3f}")
    load_after = os.getloadavg()
    print()
    print(f"load average (1, 5, 15 min) on {os.cpu_count()} CPUs: {' '.join(f'{x:.2f}' for x in load_before)} at the "
          f"start, {' '.join(f'{x:.2f}' for x in load_after)} at the end")
    print(f"low job results identical in every trial and mode; ran in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
