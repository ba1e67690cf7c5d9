"""Scheduling-lab sweeps fanned out on Dask: the speed-up over a serial run, and the cost per point.

    .venv/bin/python bench/sweep.py [--seeds 4] [--workers 2] [--empty 200]

Two grids of the bundled ``phone`` workload, each run serially in this process and
on a local Dask cluster of ``--workers`` processes (one thread each), in the same
run:

- driver mode: every built-in policy x the workload's sweep x ``--seeds`` seeds,
  requests straight to the driver (points of a few milliseconds: the per-point
  cost dominates);
- whole stack: the same through apps, the npu service and the HAL (points of
  about a second: the speed-up shows).

It prints wall-clock times, the speed-up (serial / Dask) and the results'
identity (the JSON of both runs compared byte for byte), then the cost per
point: ``--empty`` points that do nothing, serially and on the cluster, and
the cluster's start-up time.  On a 2-core machine two workers can at best
halve the time; under load (other work on the machine) they cannot.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from framework import lab  # noqa: E402


def _nothing(i: int) -> int:
    return i


def _grid_seconds(executor: lab.Executor, workloads: list, whole_stack: bool) -> tuple[float, str, int]:
    start = time.perf_counter()
    result = lab.run_grid(workloads, list(lab.builtin_policies()), whole_stack=whole_stack, executor=executor)
    elapsed = time.perf_counter() - start
    if result.failures:
        raise SystemExit(f"bench/sweep.py: {len(result.failures)} points failed: {result.failures[0]}")
    return elapsed, json.dumps(lab.report_json(result.reports)), result.points


def _empty_seconds(executor: lab.Executor, n: int) -> float:
    start = time.perf_counter()
    points = [executor.submit(_nothing, i, i=i) for i in range(n)]
    executor.run(points, lambda _p: None)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4, help="seeds per grid (driver mode; whole stack: half)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--empty", type=int, default=200, help="empty points for the per-point cost")
    args = parser.parse_args()
    phone = lab.load_workload(lab.default_workloads_dir() / "phone.toml")
    grids = [
        ("driver mode", [phone.with_seed(s) for s in range(1, args.seeds + 1)], False),
        # Whole stack: two sweep levels, half the seeds (its points are a hundred times longer).
        ("whole stack", [phone.with_sweep([0.5, 0.9]).with_seed(s) for s in range(1, max(1, args.seeds // 2) + 1)],
         True),
    ]
    started = time.perf_counter()
    with lab.open_executor(workers=args.workers) as cluster:
        startup = time.perf_counter() - started
        rows = []
        for name, workloads, whole in grids:
            serial_s, serial_doc, points = _grid_seconds(lab.SerialExecutor(), workloads, whole)
            dask_s, dask_doc, _ = _grid_seconds(cluster, workloads, whole)
            rows.append((name, points, serial_s, dask_s, serial_doc == dask_doc))
        empty_serial = _empty_seconds(lab.SerialExecutor(), args.empty)
        empty_dask = _empty_seconds(cluster, args.empty)
    load = os.getloadavg()[0]
    print(f"sweeps on a local Dask cluster of {args.workers} workers vs serial, {os.cpu_count()} cores, "
          f"load average {load:.1f}")
    print(f"{'grid':12} {'points':>6} {'serial s':>9} {'dask s':>8} {'speed-up':>9} {'identical':>10}")
    for name, points, s, d, same in rows:
        print(f"{name:12} {points:6d} {s:9.2f} {d:8.2f} {s / d:8.2f}x {'yes' if same else 'NO':>10}")
    per_serial = empty_serial / args.empty * 1e6
    per_dask = empty_dask / args.empty * 1e3
    print(f"per-point cost: {per_serial:.1f} us serial, {per_dask:.2f} ms on the cluster "
          f"({args.empty} empty points); cluster start-up {startup:.1f} s")
    if not all(r[4] for r in rows):
        raise SystemExit("bench/sweep.py: the Dask results differ from the serial ones")


if __name__ == "__main__":
    main()
