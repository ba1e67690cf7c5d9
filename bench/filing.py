"""What filing and deciding cost in the npu service's arbiter, against the requests on file.

    .venv/bin/python bench/filing.py [--repeat N] [--requests 100,32000]

64 apps each file their share of the requests (at 32,000, each is at its cap of 500,
``MAX_OPEN_REQUESTS_PER_APP``), under the status quo (every request approved and loaded)
and under the budget policy (four loaded, the rest waiting NOT_PRIORITIZED, importances
spread over four levels). Then a 65th app goes through one request's life, and a
bystander's importance changes there and back: each event is one row.

For each event it prints the Python lines the arbiter and the policy executed (``ops``,
counted with ``sys.settrace`` over ``framework/server``: exact, whatever the machine's
load) and the median wall time of ``--repeat`` runs. Filing's cost must not grow with the
requests of other apps: the ops at 32,000 are those at 100. ``tests/test_npu_arbiter_cost.py``
asserts that from ``count_ops``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from framework.npumanager import (  # noqa: E402
    NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW,
    NPU_MODEL_PRIORITY_NORMAL,
    NPU_MODEL_SIZE_LESS_THAN_1GB,
)
from framework.server import BudgetPolicy, CanLoad, NpuArbiter, StatusQuoPolicy  # noqa: E402

APPS = 64
FIRST_UID = 10000
FILER = FIRST_UID + APPS  # the app whose request's life is measured
IMPORTANCES = (100, 125, 200, 300)  # foreground, foreground service, visible, perceptible
POLICIES = {"status-quo": StatusQuoPolicy, "budget": BudgetPolicy}
_SERVER = str(Path(__file__).resolve().parents[1] / "framework" / "server")


def world(requests: int, policy: str) -> NpuArbiter:
    """An arbiter with ``requests`` requests on file from ``APPS`` apps (as even as can be)."""
    a = NpuArbiter(policy=POLICIES[policy]())
    now = 0.0
    for i in range(APPS):
        a.importance_changed(FIRST_UID + i, IMPORTANCES[i % len(IMPORTANCES)], now)
    a.importance_changed(FILER, 200, now)
    for n in range(requests):
        uid = FIRST_UID + n % APPS
        rid = n // APPS
        for action in a.request_can_load(uid, rid, NPU_MODEL_SIZE_LESS_THAN_1GB, NPU_MODEL_PRIORITY_NORMAL, now):
            if isinstance(action, CanLoad) and action.status == NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW:
                a.notify_loaded(uid, rid, now)
    return a


def life(a: NpuArbiter) -> list[tuple[str, Callable[[], Any]]]:
    """One request of the 65th app from filing to its end, and a bystander moved and back."""
    bystander = FIRST_UID + 1
    return [
        ("requestCanLoadModel", lambda: a.request_can_load(FILER, 1, NPU_MODEL_SIZE_LESS_THAN_1GB,
                                                            NPU_MODEL_PRIORITY_NORMAL, 1.0)),
        ("work completed", lambda: a.work_completed(FILER, 1.0)),
        ("cancelModelLoad", lambda: a.cancel(FILER, 1, 1.0)),
        ("importance changed", lambda: a.importance_changed(bystander, 400, 1.0)),
        ("importance back", lambda: a.importance_changed(bystander, IMPORTANCES[1], 1.0)),
        ("tick", lambda: a.tick(1.0)),
    ]


def count_ops(call: Callable[[], Any]) -> int:
    """The lines of ``framework/server`` that ``call`` executes (``sys.settrace``; other tracers are restored)."""
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(_SERVER) else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count


def measure(requests: int, policy: str, repeat: int) -> list[tuple[str, int, float]]:
    """(event, ops, median microseconds) for each event of ``life``, on a world of ``requests``."""
    a = world(requests, policy)
    ops = [count_ops(call) for _, call in life(a)]
    times: list[list[float]] = [[] for _ in ops]
    for _ in range(repeat):
        for i, (_, call) in enumerate(life(a)):
            t0 = time.perf_counter()
            call()
            times[i].append((time.perf_counter() - t0) * 1e6)
    return [(name, n, statistics.median(t)) for (name, _), n, t in zip(life(a), ops, times)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=51)
    parser.add_argument("--requests", default="100,32000")
    args = parser.parse_args()
    sizes = [int(x) for x in args.requests.split(",")]
    print(f"{'policy':<11} {'event':<20}" + "".join(f" {f'ops@{n}':>10} {f'us@{n}':>10}" for n in sizes))
    for policy in POLICIES:
        rows = [measure(n, policy, args.repeat) for n in sizes]
        for i, (name, _, _) in enumerate(rows[0]):
            print(f"{policy:<11} {name:<20}" + "".join(f" {r[i][1]:>10} {r[i][2]:>10.1f}" for r in rows))


if __name__ == "__main__":
    main()
