"""``ANeuralNetworksBurst``: a run of executions of one compilation, reusing what it can.

An app that runs the same model many times in a row (frames of a video, a stream of
audio) makes a burst of its compilation (``compilation.createBurst()``,
``ANeuralNetworksBurst_create``) and runs each execution with
``await execution.burstCompute_async(burst)`` (``ANeuralNetworksExecution_burstCompute``;
``burstCompute`` blocks, from a thread). What a burst reuses, as Android's:

- one ``IBurst`` per driver step of the plan (``IPreparedModel.configureExecutionBurst``),
  asked for the first time the step runs in the burst, so a partitioned plan has one per
  device step and a CPU step none;
- memory identifier tokens: every ``SharedMemory`` a request of the burst names (the
  burst's own request pool, an app :class:`Memory`) gets a token the first time, the
  same token every later time, so the driver maps it once and finds its mapping again
  (``IBurst.executeSynchronously``'s ``memoryIdentifierTokens``); ``aclose`` tells the
  driver to drop them (``releaseMemoryResource``);
- one request pool for all its executions (instead of a fresh region per run), grown
  when an execution needs more; the outputs an execution returns are therefore copies
  out of it, so that the next execution cannot overwrite them.

One execution at a time: ``burstCompute`` while another execution of the same burst
computes is ``BAD_STATE``, as in Android. A burst of another compilation is ``BAD_DATA``.
An execution that carries scheduling hints runs outside the burst's ``IBurst`` (the HAL's
burst takes no hints) and uses the rest of the burst as usual. ``aclose()``
(``ANeuralNetworksBurst_free``; also ``async with``) releases it; closing the
compilation ends its bursts.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import trio

from framework.binder import RemoteException, SharedMemory

from ._aidl import errorFromRemote
from ._errors import BadDataError, BadStateError

if TYPE_CHECKING:
    from ._compilation import Compilation
    from ._partition import ExecutionStep

__all__ = ["Burst"]


class Burst:
    """``ANeuralNetworksBurst``; made by ``compilation.createBurst()``."""

    def __init__(self, compilation: Compilation) -> None:
        if compilation._closed:
            raise BadStateError("createBurst: the compilation is closed")
        if not compilation.isFinished:
            raise BadStateError("createBurst: the compilation is not finished")
        self._compilation = compilation
        self._controllers: dict[int, tuple[Any, Any]] = {}  # id(prepared) -> (prepared, IBurst)
        self._tokens: dict[int, tuple[SharedMemory, int]] = {}  # id(region) -> (region, token)
        self._next_token = itertools.count(1)
        self._pool: SharedMemory | None = None
        self._mapping: Any = None
        self._busy = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _acquire(self, compilation: Compilation) -> None:
        """Begin one execution's run in this burst; ``BAD_STATE`` if one is running."""
        if self._closed:
            raise BadStateError("burstCompute: the burst is closed")
        if compilation is not self._compilation:
            raise BadDataError("burstCompute: the burst was made from another compilation")
        if self._busy:
            raise BadStateError("burstCompute: another execution of this burst is computing")
        self._busy = True

    def _release(self) -> None:
        self._busy = False

    def requestPool(self, size: int) -> tuple[SharedMemory, Any]:
        """The burst's request pool and its mapping, at least ``size`` bytes."""
        if self._pool is None or self._pool.size < size:
            self._drop_pool()
            self._pool = SharedMemory.create("nn-burst-request", size)
            self._mapping = self._pool.mapReadWrite()
        return self._pool, self._mapping

    def _drop_pool(self) -> None:
        if self._pool is not None:
            self._tokens.pop(id(self._pool), None)  # the driver drops it at its next release
            self._pool.close()
            self._pool = None
            self._mapping = None

    def memoryToken(self, region: SharedMemory) -> int:
        """The token the driver knows ``region`` by in this burst (the same every time)."""
        hit = self._tokens.get(id(region))
        if hit is None or hit[0] is not region:
            hit = (region, next(self._next_token))
            self._tokens[id(region)] = hit
        return hit[1]

    async def controller(self, step: ExecutionStep, prepared: Any) -> Any:
        """The ``IBurst`` of ``step``'s prepared model, configured on first use."""
        hit = self._controllers.get(id(prepared))
        if hit is not None and hit[0] is prepared:
            return hit[1]
        try:
            controller = await prepared.configureExecutionBurst()
        except RemoteException as e:
            raise errorFromRemote(step.device.name, "configureExecutionBurst", e) from None
        if controller is None:
            raise errorFromRemote(step.device.name, "configureExecutionBurst", ValueError("returned no burst"))
        self._controllers[id(prepared)] = (prepared, controller)
        return controller

    async def aclose(self) -> None:
        """``ANeuralNetworksBurst_free``: release the driver's cached memories; twice is harmless."""
        if self._closed:
            return
        if self._busy:
            raise BadStateError("Burst_free: an execution of this burst is computing")
        self._closed = True
        tokens = [token for _, token in self._tokens.values()]
        with trio.CancelScope(shield=True):
            for _, controller in self._controllers.values():
                for token in tokens:
                    try:
                        await controller.releaseMemoryResource(token)
                    except RemoteException:
                        break  # the prepared model or its HAL is gone, and its burst with it
        self._controllers.clear()
        self._tokens.clear()
        self._drop_pool()

    async def __aenter__(self) -> Burst:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("computing" if self._busy else "idle")
        return f"<Burst {state}, {len(self._controllers)} driver burst(s), {len(self._tokens)} memory token(s)>"
