"""Multiprogram metrics, as the multi-tenancy literature defines them.

From Eyerman and Eeckhout, "System-Level Performance Metrics for
Multiprogram Workloads" (IEEE Micro 28(3), 2008), and PREMA (Choi and Rhu,
HPCA 2020), which applies them to NPU tasks:

- a task's *normalized turnaround time* ``NTT = T_shared / T_isolated``: how
  many times longer its requests take on the shared device than alone on the
  same device (>= 1, up to measurement noise; 1 means no interference);
- its *normalized progress* ``NP = 1 / NTT``;
- ``ANTT`` = the mean of the tasks' NTTs (lower is better: the user-perceived
  slowdown);
- ``STP`` = the sum of the tasks' NPs (higher is better: how many tasks'
  worth of isolated progress the system makes; at most the task count);
- *fairness* = ``min_{i,j} NP_i / NP_j`` = the smallest NP over the largest
  (1 when every task is slowed alike, towards 0 when one starves);
- *SLA satisfaction*: the share of the high-priority requests that finish
  within ``k`` times their isolated time (PREMA uses k = 4 ... 10);
- the *tail latency*: a high percentile of the high-priority requests'
  turnaround.

Here a *task* is one stream of a workload (the camera, the assistant) and a
*request* one submission; a task's NTT is the mean of its requests' NTTs.

Every function takes plain numbers and is pure.  Empty inputs and
non-positive times raise ``ValueError`` (a metric of nothing is a bug in the
caller, not a zero).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "normalized_turnaround",
    "antt",
    "stp",
    "fairness",
    "sla_satisfaction",
    "percentile",
    "mean",
]


def _positive(value: float, what: str) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a positive time, got {value!r}")
    return float(value)


def _nonempty(values: Sequence[float], what: str) -> list[float]:
    values = list(values)
    if not values:
        raise ValueError(f"{what} of no values")
    return values


def normalized_turnaround(turnaround: float, isolated: float) -> float:
    """``T_shared / T_isolated`` for one request (or one task's mean turnaround)."""
    return _positive(turnaround, "turnaround") / _positive(isolated, "isolated time")


def mean(values: Sequence[float]) -> float:
    values = _nonempty(values, "mean")
    return math.fsum(values) / len(values)


def antt(ntts: Sequence[float]) -> float:
    """Average normalized turnaround time: the mean of the per-task NTTs."""
    values = _nonempty(ntts, "ANTT")
    for v in values:
        _positive(v, "an NTT")
    return math.fsum(values) / len(values)


def stp(ntts: Sequence[float]) -> float:
    """System throughput: the sum over tasks of their normalized progress ``1 / NTT``."""
    values = _nonempty(ntts, "STP")
    return math.fsum(1.0 / _positive(v, "an NTT") for v in values)


def fairness(ntts: Sequence[float]) -> float:
    """``min_{i,j} NP_i / NP_j``: the least-progressing task's NP over the best one's."""
    values = _nonempty(ntts, "fairness")
    progress = [1.0 / _positive(v, "an NTT") for v in values]
    return min(progress) / max(progress)


def sla_satisfaction(turnarounds: Sequence[float | None], isolated: Sequence[float] | float, k: float) -> float:
    """The share of requests with ``turnaround <= k * isolated``.

    ``isolated`` is one time for all, or one per request.  A request that never
    completed (``None``) misses its SLA.
    """
    values = _nonempty(turnarounds, "SLA satisfaction")
    if not (isinstance(k, (int, float)) and math.isfinite(k) and k > 0):
        raise ValueError(f"k must be a positive number, got {k!r}")
    if isinstance(isolated, (int, float)):
        isolated = [isolated] * len(values)
    isolated = list(isolated)
    if len(isolated) != len(values):
        raise ValueError(f"{len(values)} turnarounds but {len(isolated)} isolated times")
    met = sum(1 for t, i in zip(values, isolated) if t is not None and t <= k * _positive(i, "isolated time"))
    return met / len(values)


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile: the smallest value with at least p% of them at or below it.

    Nearest rank (not interpolation) so that a reported tail is a latency some
    request really had: p99 of 10 requests is the largest one.
    """
    values = sorted(_nonempty(values, "percentile"))
    if not (0 < p <= 100):
        raise ValueError(f"p must be in (0, 100], got {p!r}")
    rank = math.ceil(p / 100 * len(values))
    return values[rank - 1]
