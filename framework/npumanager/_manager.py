"""``android.npumanager.NpuManager``: what an app calls before it loads a model.

An app gets its NpuManager from its context (``context.getSystemService(Context.NPU_SERVICE)``)
and, before it touches a driver, reserves the load::

    request = ModelLoadRequest.Builder(7) \\
        .setSize(NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G) \\
        .setPriority(NpuManager.NPU_MODEL_PRIORITY_NORMAL) \\
        .build()

    class Callback(ModelLoadRequestCallback):
        async def onCanLoadModel(self, request, status, listener):
            if status == NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW:
                ...load the model through NNAPI...
                await listener.notifyModelLoaded(request)

        async def onRequestUnloadModel(self, request, reason):
            ...release the model...
            await listener.notifyModelUnloaded(request)

        def onModelLoadRequestComplete(self, request, status):
            ...

    await npu.requestCanLoadModel(request, Callback(), context.getMainExecutor())

``requestCanLoadModel`` returns as soon as the service has filed the request (a
duplicate id, a bad size or priority, or a missing permission raise right there); the
answers come later, on the executor. Each callback method may be a plain function or
an ``async def``: a :class:`TrioExecutor` runs either in the app's nursery, one task per
callback; :class:`SynchronousExecutor` runs plain functions at once, in the task that
received the binder call (an ``async`` callback there is an error, logged). Any
object with Java's ``execute(runnable)`` works as an executor.

``onRequestUnloadModel`` may take ``(request)`` or ``(request, reason)``: NpuManager
looks at the method's signature and calls the form it has. ``reason`` is an
``NPU_MODEL_UNLOAD_REASON_*`` (npuemu's; AOSP's callback has no reason).

Wrong calls are refused before anything changes: a duplicate live request id is
``IllegalArgumentException``; ``cancelModelLoad`` or a notify for a request this
manager never sent, or that has ended, is ``IllegalStateException``; so are
``notifyModelLoaded`` before CAN_LOAD_NOW, twice, or ``notifyModelUnloaded`` before
the model was approved. The service enforces the same rules (so a hand-made binder
client cannot get round them); checking here as well gives the app the error without
a round trip and with the request named.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from framework.binder import IllegalArgumentException, IllegalStateException
from interfaces.android.npumanager import (
    IModelLoadCallback,
    INpuManager,
    ModelLoadRequestParcelable,
    PolicyParams,
)

from . import _constants as c

__all__ = [
    "ModelLoadRequest",
    "ModelLoadRequestCallback",
    "ModelLoadStatusListener",
    "NpuManager",
    "SynchronousExecutor",
    "TrioExecutor",
]

log = logging.getLogger("NpuManager")

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True, slots=True)
class ModelLoadRequest:
    """A request to load one model: the app's id, a size class, a priority.

    Build it with :class:`ModelLoadRequest.Builder`. Two requests are equal when their
    three fields are; the uid is not a field (the service takes it from the binder).
    """

    id: int
    size: int
    priority: int

    def getId(self) -> int:  # noqa: N802
        return self.id

    def getSize(self) -> int:  # noqa: N802
        return self.size

    def getPriority(self) -> int:  # noqa: N802
        return self.priority

    def __str__(self) -> str:
        return f"ModelLoadRequest{{mId={self.id}, mSize={self.size}, mPriority={self.priority}}}"

    class Builder:
        """``new ModelLoadRequest.Builder(requestId).setSize(...).setPriority(...).build()``.

        Defaults, as AOSP's: size LESS_THAN_1GB, priority NORMAL. ``build()`` checks the
        values (AOSP's builder does not; a bad value then fails far away, in the service).
        """

        def __init__(self, request_id: int) -> None:
            if type(request_id) is not int or not _INT32_MIN <= request_id <= _INT32_MAX:
                raise ValueError(f"a request id is a 32-bit int, not {request_id!r}")
            self._id = request_id
            self._size = c.NPU_MODEL_SIZE_LESS_THAN_1GB
            self._priority = c.NPU_MODEL_PRIORITY_NORMAL

        def setSize(self, size: int) -> ModelLoadRequest.Builder:  # noqa: N802
            self._size = size
            return self

        def setPriority(self, priority: int) -> ModelLoadRequest.Builder:  # noqa: N802
            self._priority = priority
            return self

        def build(self) -> ModelLoadRequest:
            if type(self._size) is not int or self._size not in c.NPU_MODEL_SIZES:
                raise ValueError(
                    f"request {self._id}: size must be one of NPU_MODEL_SIZE_LESS_THAN_1GB (0), "
                    f"BETWEEN_1GB_AND_2GB (1), GREATER_THAN_2G (2), not {self._size!r}"
                )
            if type(self._priority) is not int or self._priority not in c.NPU_MODEL_PRIORITIES:
                raise ValueError(
                    f"request {self._id}: priority must be one of NPU_MODEL_PRIORITY_NORMAL (0), "
                    f"BACKGROUND (1000), OPPORTUNISTIC (2000), not {self._priority!r}"
                )
            return ModelLoadRequest(self._id, self._size, self._priority)


class ModelLoadRequestCallback:
    """``NpuManager.ModelLoadRequestCallback``: override what you need (plain or async)."""

    def onCanLoadModel(self, request: ModelLoadRequest, status: int, listener: ModelLoadStatusListener) -> Any:  # noqa: N802
        """CAN_LOAD_NOW: load, then ``listener.notifyModelLoaded``. WAIT_FOR_UNLOAD /
        NOT_PRIORITIZED: wait; CAN_LOAD_NOW may follow."""

    def onRequestUnloadModel(self, request: ModelLoadRequest, reason: int = c.NPU_MODEL_UNLOAD_REASON_UNSPECIFIED) -> Any:  # noqa: N802
        """Release the model, then ``listener.notifyModelUnloaded``."""

    def onModelLoadRequestComplete(self, request: ModelLoadRequest, status: int) -> Any:  # noqa: N802
        """CANCELLED or COMPLETE: the request is over."""


class SynchronousExecutor:
    """Runs each callback at once, in the task that received it. Callbacks must be plain functions."""

    def execute(self, runnable: Callable[[], Any]) -> None:
        result = runnable()
        if inspect.isawaitable(result):
            if hasattr(result, "close"):
                result.close()
            log.error("an async callback was given to SynchronousExecutor; use a TrioExecutor: %r", runnable)


class TrioExecutor:
    """Runs each callback as its own task in ``nursery`` (an app's main nursery).

    An exception in a callback is logged, not raised into the nursery: one bad callback
    must not take the app down with it (Android's executors behave alike).
    """

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def execute(self, runnable: Callable[[], Any]) -> None:
        self._nursery.start_soon(self._run, runnable)

    async def _run(self, runnable: Callable[[], Any]) -> None:
        try:
            result = runnable()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("an NpuManager callback raised")


def _takes_reason(method: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(method)
    except (TypeError, ValueError):
        return False
    params = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        return True
    return len(params) >= 2


# A request's life as the app sees it (the service's states, simplified).
_PENDING, _APPROVED, _LOADED, _ENDED = "pending", "approved", "loaded", "ended"


class _Tracked:
    __slots__ = ("request", "callback", "executor", "state", "binder")

    def __init__(self, request, callback, executor) -> None:
        self.request = request
        self.callback = callback
        self.executor = executor
        self.state = _PENDING
        self.binder = None


class ModelLoadStatusListener:
    """``NpuManager.ModelLoadStatusListener``: tell the service what the app did."""

    def __init__(self, manager: NpuManager) -> None:
        self._manager = manager

    async def notifyModelLoaded(self, request: ModelLoadRequest) -> None:  # noqa: N802
        """The approved model is now fully in driver memory."""
        m = self._manager
        t = m._approved(request, "notifyModelLoaded")
        if t.state == _LOADED:
            raise IllegalStateException(f"notifyModelLoaded({request}): already notified")
        await m._service.notifyModelLoaded(m._parcel(request))
        t.state = _LOADED

    async def notifyModelUnloaded(self, request: ModelLoadRequest) -> None:  # noqa: N802
        """The model is released; the request ends COMPLETE."""
        m = self._manager
        m._approved(request, "notifyModelUnloaded")
        await m._service.notifyModelUnloaded(m._parcel(request))


class NpuManager:
    """The app's handle on the ``npu`` service (``Context.NPU_SERVICE``).

    Made by the app's context; ``NpuManager(service)`` takes the service binder (or an
    ``INpuManager`` proxy). The ``NPU_*`` constants are class attributes, as in Java.
    """

    NPU_MODEL_SIZE_LESS_THAN_1GB = c.NPU_MODEL_SIZE_LESS_THAN_1GB
    NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB = c.NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB
    NPU_MODEL_SIZE_GREATER_THAN_2G = c.NPU_MODEL_SIZE_GREATER_THAN_2G
    NPU_MODEL_PRIORITY_NORMAL = c.NPU_MODEL_PRIORITY_NORMAL
    NPU_MODEL_PRIORITY_BACKGROUND = c.NPU_MODEL_PRIORITY_BACKGROUND
    NPU_MODEL_PRIORITY_OPPORTUNISTIC = c.NPU_MODEL_PRIORITY_OPPORTUNISTIC
    NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW = c.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW
    NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD = c.NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD
    NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED = c.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED
    NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED = c.NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED
    NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE = c.NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE
    NPU_MODEL_POLICY_STATUS_QUO = c.NPU_MODEL_POLICY_STATUS_QUO
    NPU_MODEL_POLICY_TURN_TAKING = c.NPU_MODEL_POLICY_TURN_TAKING
    NPU_MODEL_POLICY_BUDGET = c.NPU_MODEL_POLICY_BUDGET
    NPU_MODEL_UNLOAD_REASON_UNSPECIFIED = c.NPU_MODEL_UNLOAD_REASON_UNSPECIFIED
    NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE = c.NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE
    NPU_MODEL_UNLOAD_REASON_TURN_TAKING = c.NPU_MODEL_UNLOAD_REASON_TURN_TAKING
    NPU_MODEL_UNLOAD_REASON_THERMAL = c.NPU_MODEL_UNLOAD_REASON_THERMAL
    KEY_MAX_BUDGET = c.KEY_MAX_BUDGET
    KEY_MODEL_SIZE_WEIGHTS = c.KEY_MODEL_SIZE_WEIGHTS

    ModelLoadStatusListener = ModelLoadStatusListener
    ModelLoadRequestCallback = ModelLoadRequestCallback

    def __init__(self, service: Any) -> None:
        if service is None:
            raise IllegalStateException("the npu service is not running on this device")
        self._service = INpuManager.asInterface(service)
        self._ICallback = IModelLoadCallback
        self._Parcel = ModelLoadRequestParcelable
        self._PolicyParams = PolicyParams
        self._requests: dict[int, _Tracked] = {}
        self._listener = ModelLoadStatusListener(self)

    # ------------------------------------------------------------------ the API

    async def requestCanLoadModel(  # noqa: N802
        self, request: ModelLoadRequest, callback: ModelLoadRequestCallback, executor: Any
    ) -> None:
        """File ``request``; the answers arrive on ``executor`` through ``callback``."""
        if not isinstance(request, ModelLoadRequest):
            raise TypeError(f"expected a ModelLoadRequest (use ModelLoadRequest.Builder), got {type(request).__name__}")
        if callback is None or executor is None:
            raise TypeError("requestCanLoadModel needs a callback and an executor")
        if not callable(getattr(executor, "execute", None)):
            raise TypeError(f"an executor has an execute(runnable) method; {executor!r} does not")
        live = self._requests.get(request.id)
        if live is not None and live.state != _ENDED:
            raise IllegalArgumentException(f"request id {request.id} is already in use by a live request ({live.request})")
        tracked = _Tracked(request, callback, executor)
        binder = self._make_callback(tracked)
        tracked.binder = binder
        # Filed before the call: the service may answer (oneway) before its reply arrives,
        # and a callback that notifies at once must find its request.
        previous = self._requests.get(request.id)
        self._requests[request.id] = tracked
        try:
            await self._service.canLoadModel(self._parcel(request), binder)
        except BaseException:
            if self._requests.get(request.id) is tracked:
                if previous is None:
                    del self._requests[request.id]
                else:
                    self._requests[request.id] = previous
            raise

    async def cancelModelLoad(self, request: ModelLoadRequest) -> None:  # noqa: N802
        """End the request with CANCELLED (``onModelLoadRequestComplete`` follows)."""
        self._tracked_for(request, "cancelModelLoad")
        await self._service.cancelModelLoad(self._parcel(request))

    async def setPolicy(self, policy: int, params: Mapping[str, Any] | None = None) -> None:  # noqa: N802
        """Select ``NPU_MODEL_POLICY_*``; ``params`` is the bundle (``maxBudget``, ``modelSizeWeights``).

        ``modelSizeWeights`` may be three ints, or AOSP's nested bundle keyed ``"0"``,
        ``"1"``, ``"2"`` (a size left out keeps its default weight).
        """
        await self._service.setPolicy(policy, self._policy_params(params))

    # ------------------------------------------------------------------ internals

    def _parcel(self, request: ModelLoadRequest) -> Any:
        return self._Parcel(id=request.id, size=request.size, priority=request.priority)

    def _tracked_for(self, request: ModelLoadRequest, call: str) -> _Tracked:
        if not isinstance(request, ModelLoadRequest):
            raise TypeError(f"{call} takes a ModelLoadRequest, not {type(request).__name__}")
        t = self._requests.get(request.id)
        if t is None or t.request != request:
            raise IllegalStateException(f"{call}({request}): this app never requested it")
        if t.state == _ENDED:
            raise IllegalStateException(f"{call}({request}): the request has already ended")
        return t

    def _approved(self, request: ModelLoadRequest, call: str) -> _Tracked:
        """``_tracked_for``, for the calls only an approved request may make."""
        t = self._tracked_for(request, call)
        if t.state == _PENDING:
            raise IllegalStateException(f"{call}({request}): it was never approved (no CAN_LOAD_NOW yet)")
        return t

    def _policy_params(self, params: Mapping[str, Any] | None) -> Any:
        if params is None:
            return None
        if not isinstance(params, Mapping):
            raise IllegalArgumentException(f"policy parameters are a bundle (a dict), not {params!r}")
        keys = [str(k) for k in params]
        max_budget = params.get(self.KEY_MAX_BUDGET)
        if max_budget is not None and type(max_budget) is not int:
            raise IllegalArgumentException(f"{self.KEY_MAX_BUDGET} must be an int, not {max_budget!r}")
        weights = params.get(self.KEY_MODEL_SIZE_WEIGHTS)
        if isinstance(weights, Mapping):
            # AOSP's nested bundle: keys "0", "1", "2"; a size left out keeps its default.
            unknown = set(weights) - {str(size) for size in c.NPU_MODEL_SIZES}
            if unknown:
                raise IllegalArgumentException(f"{self.KEY_MODEL_SIZE_WEIGHTS} has unknown size keys {sorted(unknown)}")
            weights = [weights.get(str(size), c.DEFAULT_MODEL_SIZE_WEIGHTS[size]) for size in c.NPU_MODEL_SIZES]
        if weights is not None:
            if isinstance(weights, (str, bytes)) or not all(type(w) is int for w in weights):
                raise IllegalArgumentException(f"{self.KEY_MODEL_SIZE_WEIGHTS} must be ints, not {weights!r}")
            weights = list(weights)
        return self._PolicyParams(
            keys=keys,
            hasMaxBudget=max_budget is not None,
            maxBudget=max_budget if max_budget is not None else 0,
            modelSizeWeights=weights,
        )

    def _make_callback(self, t: _Tracked) -> Any:
        manager = self
        takes_reason = _takes_reason(t.callback.onRequestUnloadModel)

        class ModelLoadCallback(self._ICallback.Stub):
            async def onCanLoadModel(self, status: int) -> None:  # noqa: N802
                if status == c.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW and t.state == _PENDING:
                    t.state = _APPROVED
                t.executor.execute(lambda: t.callback.onCanLoadModel(t.request, status, manager._listener))

            async def onRequestUnloadModel(self, reason: int) -> None:  # noqa: N802
                if takes_reason:
                    t.executor.execute(lambda: t.callback.onRequestUnloadModel(t.request, reason))
                else:
                    t.executor.execute(lambda: t.callback.onRequestUnloadModel(t.request))

            async def onModelLoadRequestComplete(self, status: int) -> None:  # noqa: N802
                t.state = _ENDED  # kept, so a late notify says "ended", not "never requested"
                runtime = getattr(self, "_runtime", None)
                if runtime is not None:
                    runtime.unexport(self)  # one binder per request: do not keep it for ever
                t.executor.execute(lambda: t.callback.onModelLoadRequestComplete(t.request, status))

        return ModelLoadCallback()
