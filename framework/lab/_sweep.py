"""Where a sweep's points run: in this process one after another, or fanned out on Dask.

A policy study is a grid (workloads x seeds x policies x loads x driver builds),
and each point of it is an independent, deterministic run on the virtual clock:
the lab (``_lab``) turns the grid into a small graph of *points* (calibrate a
workload, measure each policy's isolated times, run each policy at each load) and
hands every point to an executor here.  The executor only runs functions; it
knows nothing of policies or workloads.

- ``SerialExecutor`` runs the points in this process, in the order they were
  submitted (a point's inputs are always submitted before it);
- ``DaskExecutor`` submits them to a ``dask.distributed`` cluster: a local one of
  ``workers`` processes, or the existing scheduler at ``scheduler``
  (``tcp://HOST:PORT``).  Points are shipped with cloudpickle; their results
  come back the same, so a grid's numbers do not depend on where it ran.

Both report each finished point to a callback as it finishes, with its value
or the exception it raised: a point that fails does not stop the others (only
the points that need its result, which fail with ``UpstreamFailed``).  Ctrl-C
(``KeyboardInterrupt``) cancels what has not run and propagates, after the
callback has seen everything that finished; serially, after the point in
progress (a second Ctrl-C at once).
"""

from __future__ import annotations

import contextlib
import logging
import itertools
import secrets
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing import resource_tracker
from typing import Any

__all__ = ["Executor", "SerialExecutor", "DaskExecutor", "Point", "UpstreamFailed", "open_executor"]


class UpstreamFailed(Exception):
    """A point not run because a point it needs failed."""


@dataclass(slots=True, eq=False)
class Point:
    """One submitted unit of work: ``fn(*args)``, where an argument may be another ``Point``
    (its value is passed).  ``params`` says what it is, for progress and failure reports."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    params: dict[str, Any]
    fetch: bool = True  # bring the value back here (False: it only feeds other points)
    handle: Any = None  # the executor's own handle (a Dask future)
    done: bool = False
    value: Any = None
    error: BaseException | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def upstream(self) -> list[Point]:
        return [a for a in self.args if isinstance(a, Point)]


class Executor:
    """Runs points; ``run`` reports each to ``on_done`` as it finishes."""

    name = "executor"
    workers = 1
    where = "this process"  # for progress lines

    def submit(self, fn: Callable[..., Any], *args: Any, fetch: bool = True, **params: Any) -> Point:
        """``fn(*args)`` as a point (``params`` name it in reports); ``fetch=False``: its value only
        feeds other points, and need not come back to this process."""
        point = Point(fn, args, params, fetch)
        self._submit(point)
        return point

    def _submit(self, point: Point) -> None:
        raise NotImplementedError

    def run(self, points: Sequence[Point], on_done: Callable[[Point], None]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SerialExecutor(Executor):
    """Every point in this process, in submission order."""

    name = "serial"

    def __init__(self) -> None:
        self._queue: list[Point] = []

    def _submit(self, point: Point) -> None:
        self._queue.append(point)

    def run(self, points: Sequence[Point], on_done: Callable[[Point], None]) -> None:
        wanted = {id(p) for p in points}
        with _interrupt_between_points() as interrupted:
            for point in self._queue:
                if interrupted():
                    raise KeyboardInterrupt
                if point.done:
                    continue
                failed = next((u for u in point.upstream() if u.failed), None)
                if failed is not None:
                    point.error = UpstreamFailed(_describe(failed))
                else:
                    try:
                        point.value = point.fn(*[a.value if isinstance(a, Point) else a for a in point.args])
                    except Exception as e:  # noqa: BLE001 - a point's failure is data, reported with its parameters
                        point.error = e
                point.done = True
                if id(point) in wanted:
                    on_done(point)
        self._queue = [p for p in self._queue if not p.done]


@contextlib.contextmanager
def _interrupt_between_points() -> Iterator[Callable[[], bool]]:
    """Ctrl-C ends a serial sweep after the point in progress (whose own code, a whole trio
    stack, might otherwise take the interrupt for one of its failures); a second one at once."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield lambda: False
        return
    hits = 0

    def handler(signum: int, frame: Any) -> None:
        nonlocal hits
        hits += 1
        if hits > 1:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: hits > 0
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class DaskExecutor(Executor):
    """Points on a ``dask.distributed`` cluster: a local one of ``workers`` processes (one
    thread each: a point is single-threaded Python and C), or the scheduler at ``scheduler``."""

    name = "dask"

    def __init__(self, workers: int | None = None, scheduler: str | None = None) -> None:
        import dask
        from distributed import Client, LocalCluster

        self._cluster = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self._prefix = f"npuemu-lab-{secrets.token_hex(4)}"
        self._count = itertools.count()
        if scheduler is not None:
            self._client = Client(scheduler, set_as_default=False)
            self.where = scheduler
        else:
            # Worker scratch space in a directory of ours, removed at close: nothing left behind.
            # The dashboard on a free port: two clusters on one machine must not both want 8787.
            self._scratch = tempfile.TemporaryDirectory(prefix="npuemu-dask-")
            # Logs at CRITICAL only: a point's failure is reported with its parameters, and a
            # worker's heartbeat racing the scheduler's close at shutdown is no failure.
            with dask.config.set({"temporary-directory": self._scratch.name}):
                self._cluster = LocalCluster(n_workers=workers or 2, threads_per_worker=1, processes=True,
                                             dashboard_address=":0", local_directory=self._scratch.name,
                                             silence_logs=logging.CRITICAL)
            self._client = Client(self._cluster, set_as_default=False)
            self.where = f"a local cluster of {workers or 2} worker processes"
        self.workers = max(1, len(self._client.scheduler_info().get("workers", {})))
        self.address: str = self._client.scheduler.address  # tcp://HOST:PORT, for --scheduler

    def _submit(self, point: Point) -> None:
        args = [a.handle if isinstance(a, Point) else a for a in point.args]
        key = f"{self._prefix}-{next(self._count)}"
        point.handle = self._client.submit(point.fn, *args, key=key, pure=False)

    def run(self, points: Sequence[Point], on_done: Callable[[Point], None]) -> None:
        from distributed import as_completed

        by_key = {p.handle.key: p for p in points}
        pending = as_completed([p.handle for p in points], loop=self._client.loop)
        try:
            for future in pending:
                point = by_key[future.key]
                failed = next((u for u in point.upstream() if u.failed or u.handle.status != "finished"), None)
                if failed is not None:
                    if failed.error is None:  # it failed too, and is not reported yet
                        failed.error = _future_error(failed.handle)
                    point.error = UpstreamFailed(_describe(failed))
                elif future.status == "finished":
                    point.value = future.result() if point.fetch else None
                else:
                    point.error = _future_error(future)
                point.done = True
                on_done(point)
        except BaseException:
            self._client.cancel([p.handle for p in points if not p.done])
            raise

    def close(self) -> None:
        try:
            self._client.close()
            if self._cluster is not None:
                self._cluster.close()
        finally:
            if self._scratch is not None:
                self._scratch.cleanup()
            if self._cluster is not None:
                # Spawning the workers started multiprocessing's resource tracker; it would
                # outlive the cluster until this process exits.  Nothing else here uses it.
                stop = getattr(resource_tracker._resource_tracker, "_stop", None)
                if stop is not None:
                    stop()


def _future_error(future: Any) -> BaseException:
    if future.status == "error":
        return future.exception()
    return RuntimeError(f"the cluster lost this point ({future.status})")


def _describe(point: Point) -> str:
    what = ", ".join(f"{k}={v}" for k, v in point.params.items())
    return f"{what}: {type(point.error).__name__}: {point.error}"


def open_executor(workers: int | None = None, scheduler: str | None = None) -> Executor:
    """Serial when neither is given; else Dask (``scheduler`` wins over ``workers``)."""
    if scheduler is None and workers is None:
        return SerialExecutor()
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    return DaskExecutor(workers=workers, scheduler=scheduler)
