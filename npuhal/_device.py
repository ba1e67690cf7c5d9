"""``android.hardware.neuralnetworks.IDevice/<name>`` and the ``IPreparedModel`` it makes.

Errors follow AOSP's AIDL HAL: a ``ServiceSpecificException`` whose code is the
``ErrorStatus`` (``INVALID_ARGUMENT`` for a malformed model or request,
``RESOURCE_EXHAUSTED_PERSISTENT`` when device memory is full, ``GENERAL_FAILURE`` when
the work failed, ``DEVICE_UNAVAILABLE`` when the device is offline), and a
``SecurityException`` when the scheduling config of the calling uid refuses the work
(no direct access, or an ``originalUid`` it may not attribute to).

Data path.  Model pools and request pools are ``SharedMemory``.  The HAL hands the
driver ``memoryview`` slices of its mappings of the request's pools: inputs are read
and outputs written by the hardware in place, in the client's pages, with no copy on
either side.  A prepared model keeps its mapping of each request pool it is sent,
found again by the region's identity (its memfd's inode), as NNAPI drivers keep the
memory pools a runtime reuses: the client's runtime reuses its request pools, so a
run maps nothing and faults no page in.  After the work's final end the slices are
released; the mappings go with the prepared model (or when newer ones displace them).

Ownership.  A prepared model belongs to the process that called ``prepareModel``
(its pid, from the kernel): when that process exits the HAL frees the model
(``Hal._reap``), as it does on ``release()`` and on ``IHalControl.revokeUidModels``.
Work of the model's execution carries the binder calling uid and pid, never a uid
from the request.  Only the uid that prepared a model may call it (or its bursts): a
reference that reached another uid (handed on, or leaked) is refused with a
``SecurityException`` before the call does anything, as the NN service refuses a
prepared model of another client.  A ``ModelLoadToken`` given to ``prepareModel`` files the model
under the caller's NpuManager request as well, (uid, request id), so that
``IHalControl.revokeRequestModels`` frees one request's models and not its app's others.
"""

from __future__ import annotations

import collections
import logging
import math
import mmap
import os
import time
import weakref
from typing import Any

import numpy as np
import trio

from framework.binder import (
    Binder,
    IllegalArgumentException,
    SecurityException,
    ServiceSpecificException,
)
from interfaces.android.hardware.neuralnetworks import (
    Capabilities as _Capabilities,
    DeviceStatus as _DeviceStatus,
    DeviceType as _DeviceType,
    ErrorStatus as ErrorStatus,
    ExecutionHints as _ExecutionHints,
    ExecutionPreference as _ExecutionPreference,
    ExecutionResult as _ExecutionResult,
    IBurst,
    IDevice,
    IPreparedModel,
    NumberOfCacheFiles as _NumberOfCacheFiles,
    OperandPerformance as _OperandPerformance,
    OperandType as _OperandTypeAidl,
    OutputShape as _OutputShape,
    PerformanceInfo as _PerformanceInfo,
    Priority as _Priority,
    Timing as _Timing,
)

from ._errors import (
    NpuCapacityError,
    NpuError,
    NpuInvalidPriorityError,
    NpuLookupError,
    NpuOfflineError,
    NpuOutputTooSmallError,
    NpuPermissionError,
    NpuValueError,
)
from ._cache import NUM_DATA_CACHE, NUM_MODEL_CACHE, CacheError, check_cache_args, read_cache, write_cache
from ._hal import Hal
from ._model import map_pools
from ._types import DeviceStatus, EndReason, OperandType

__all__ = ["Burst", "NnDevice", "PreparedModel", "ErrorStatus"]

log = logging.getLogger("android.hardware.npu")


# How long an execution that missed its deadline waits for its cancelled work to end.
_CANCEL_GRACE_S = 1.0

# Request pools a prepared model keeps mapped (the most recently used).
_KEPT_MAPPINGS = 8

#: What NN HAL reports for a performance it does not have (FLT_MAX: "never use me").
FLT_MAX = float(np.finfo(np.float32).max)


def service_error(status: Any, message: str) -> ServiceSpecificException:
    return ServiceSpecificException(int(status), f"{ErrorStatus(status).name}: {message}")


def _loadable(model: Any) -> Any:
    """``model`` (the AIDL ``Model``) if the driver can be handed it, else INVALID_ARGUMENT.

    The driver takes the parcelable as it is (its pools stay ``SharedMemory``, which the
    driver maps read-only); referenced subgraphs (IF/WHILE bodies) are refused: the
    emulated hardware has no control flow.
    """
    if model is None:
        raise service_error(ErrorStatus.INVALID_ARGUMENT, "model must not be null")
    if model.referenced:
        raise service_error(ErrorStatus.INVALID_ARGUMENT, "referenced subgraphs (control flow) are not supported")
    return model


def _close_all(objs: Any) -> None:
    for obj in objs or ():
        close = getattr(obj, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass


class NnDevice(IDevice.Stub):
    """One driver device as an NN HAL ``IDevice``."""

    def __init__(self, hal: Hal, device: Any) -> None:
        super().__init__()
        self._hal = hal
        self.number = device.number
        self.name = device.name

    def _device(self) -> Any:
        return self._hal.driver.device(self.number)

    async def getCapabilities(self) -> Any:  # noqa: N802
        dev = self._device()
        caps = dev.capabilities
        unsupported = _PerformanceInfo(execTime=FLT_MAX, powerUsage=FLT_MAX)
        scalar = dev.relaxed_float32_to_float16_scalar or caps.get(OperandType.FLOAT32)
        tensor = dev.relaxed_float32_to_float16_tensor or caps.get(OperandType.TENSOR_FLOAT32)
        # Sorted by operand type: NNAPI VTS checks the order (binary search in the runtime).
        performance = [
            _OperandPerformance(type=_OperandTypeAidl(int(t)), info=caps[t])
            for t in sorted(caps, key=int)
            if int(t) in _OperandTypeAidl._value2member_map_
        ]
        return _Capabilities(
            relaxedFloat32toFloat16PerformanceScalar=scalar if scalar else unsupported,
            relaxedFloat32toFloat16PerformanceTensor=tensor if tensor else unsupported,
            operandPerformance=performance,
            ifPerformance=unsupported,
            whilePerformance=unsupported,
        )

    async def getNumberOfCacheFilesNeeded(self) -> Any:  # noqa: N802
        # The HAL caches every device's models (npuhal._cache): one file of each kind.
        return _NumberOfCacheFiles(numModelCache=NUM_MODEL_CACHE, numDataCache=NUM_DATA_CACHE)

    async def getSupportedExtensions(self) -> list:  # noqa: N802
        return []

    async def getSupportedOperations(self, model: Any) -> list[bool]:  # noqa: N802
        if model is None:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, "model must not be null")
        try:
            return [bool(b) for b in self._hal.driver.supported_operations(self.number, _loadable(model))]
        except NpuValueError as exc:  # NpuModelError included: a malformed model
            raise service_error(ErrorStatus.INVALID_ARGUMENT, str(exc)) from None
        except NpuOfflineError as exc:
            raise service_error(ErrorStatus.DEVICE_UNAVAILABLE, str(exc)) from None
        finally:
            _close_all(model.pools)

    async def getType(self) -> Any:  # noqa: N802
        return _DeviceType(int(self._device().type))

    async def getVersionString(self) -> str:  # noqa: N802
        return self._device().version

    async def getStatus(self) -> Any:  # noqa: N802
        return _DeviceStatus(int(self._device().status))

    async def prepareModel(  # noqa: N802
        self, model: Any, preference: Any, priority: Any, deadlineNs: int, modelSizeBytes: int,  # noqa: N803
        loadToken: Any = None,  # noqa: N803
    ) -> Any:
        return await self.prepareModelWithCache(
            model, preference, priority, deadlineNs, modelSizeBytes, loadToken, [], [], b""
        )

    async def prepareModelWithCache(  # noqa: N802
        self, model: Any, preference: Any, priority: Any, deadlineNs: int, modelSizeBytes: int,  # noqa: N803
        loadToken: Any, modelCache: Any, dataCache: Any, token: bytes,  # noqa: N803
    ) -> Any:
        try:
            try:
                _ExecutionPreference(int(preference))
                _Priority(int(priority))
            except ValueError:
                raise service_error(
                    ErrorStatus.INVALID_ARGUMENT, f"bad preference {preference!r} or priority {priority!r}"
                ) from None
            cache = None
            if modelCache or dataCache:
                try:
                    cache = check_cache_args(modelCache, dataCache, token)
                except ValueError as exc:
                    raise service_error(ErrorStatus.INVALID_ARGUMENT, str(exc)) from None
            loadable = _loadable(model)
            prepared = self._prepare(loadable, int(preference), deadlineNs, modelSizeBytes, loadToken)
            if cache is not None:
                self._write_cache(cache, int(preference), loadable)
        finally:
            _close_all([*(modelCache or ()), *(dataCache or ()), *(model.pools if model is not None else ())])
        self._hal.stats.prepared += 1
        return prepared

    async def prepareModelFromCache(  # noqa: N802
        self, deadlineNs: int, modelCache: Any, dataCache: Any, token: bytes, modelSizeBytes: int,  # noqa: N803
        loadToken: Any = None,  # noqa: N803
    ) -> Any:
        model = None
        try:
            try:
                model_fd, data_fd, token = check_cache_args(modelCache, dataCache, token)
            except ValueError as exc:
                raise service_error(ErrorStatus.INVALID_ARGUMENT, str(exc)) from None
            try:
                model, preference = read_cache(
                    model_fd, data_fd, token=token, device=self.name, version=self._device().version
                )
            except CacheError as exc:
                self._hal.stats.cache_refused += 1
                log.info("%s: compilation cache refused: %s", self.name, exc)
                raise service_error(ErrorStatus.GENERAL_FAILURE, f"the cache cannot be used: {exc}") from None
            prepared = self._prepare(model, preference, deadlineNs, modelSizeBytes, loadToken)
        finally:
            _close_all([*(modelCache or ()), *(dataCache or ()), *(model.pools if model is not None else ())])
        self._hal.stats.prepared_from_cache += 1
        return prepared

    def _write_cache(self, cache: tuple[int, int, bytes], preference: int, model: Any) -> None:
        """Store the model just prepared; a file that refuses costs the cache, not the model."""
        model_fd, data_fd, token = cache
        try:
            pools = [bytes(view) for view in map_pools(model)]
            write_cache(
                model_fd, data_fd, token=token, device=self.name, version=self._device().version,
                preference=preference, model=model, pools=pools,
            )
        except (OSError, NpuError) as exc:
            log.warning("%s: could not write the compilation cache: %s", self.name, exc)
            return
        self._hal.stats.cache_written += 1

    def _prepare(self, model: Any, preference: int, deadlineNs: int, modelSizeBytes: int, loadToken: Any) -> Any:  # noqa: N803
        """Load ``model`` (checked loadable) into the driver; the new ``PreparedModel``."""
        if deadlineNs < -1:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, f"deadlineNs {deadlineNs} (use -1 for none)")
        if modelSizeBytes < 0:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, f"modelSizeBytes {modelSizeBytes} is negative")
        if self._device().status == DeviceStatus.OFFLINE:
            raise service_error(ErrorStatus.DEVICE_UNAVAILABLE, f"{self.name} is offline")
        try:
            handle = self._hal.driver.load_model(
                self.number, model, emulated_size_bytes=modelSizeBytes, preference=preference
            )
        except NpuCapacityError as exc:
            self._hal.poll()  # the refused load's memory event
            raise service_error(ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT, str(exc)) from None
        except NpuOfflineError as exc:
            raise service_error(ErrorStatus.DEVICE_UNAVAILABLE, str(exc)) from None
        except NpuValueError as exc:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, str(exc)) from None
        except NpuError as exc:
            raise service_error(ErrorStatus.GENERAL_FAILURE, str(exc)) from None
        self._hal.poll()
        uid, pid = Binder.getCallingUid(), Binder.getCallingPid()
        load_request = None if loadToken is None else loadToken.requestId
        prepared = PreparedModel(
            self._hal, handle, self.name, uid, pid, load_request, _ExecutionPreference(preference)
        )
        self._hal.track_client(pid, prepared)
        log.info(
            "prepared model %d on %s for uid %d pid %d%s (%d emulated bytes, %s)", handle.id, self.name, uid, pid,
            "" if load_request is None else f" request {load_request}", modelSizeBytes,
            _ExecutionPreference(preference).name,
        )
        return prepared


def _unmap(mapping: Any) -> None:
    if isinstance(mapping, mmap.mmap):
        try:
            mapping.close()
        except BufferError:
            pass  # a view still exported somewhere: the GC unmaps it later


class _Mappings:
    """A prepared model's mappings of the request pools it was sent, by the region's
    identity: (device, inode) of its memfd. The first request naming a region maps it;
    later ones, with a new descriptor for the same region, find the mapping again.

    A kept mapping holds its file open, so while it is kept no other region can have
    its inode: the identity cannot name another client's memory. A mapping too small
    for the size a request claims, or read-only where a request writes, is replaced.
    """

    def __init__(self, keep: int = _KEPT_MAPPINGS) -> None:
        self._keep = keep
        self._maps: collections.OrderedDict[tuple[int, int], tuple[Any, bool]] = collections.OrderedDict()

    def map(self, shm: Any, writable: bool) -> Any:
        """``shm`` mapped (writable if asked); OSError/ValueError as ``SharedMemory.map``."""
        st = os.fstat(shm.fd)
        key = (st.st_dev, st.st_ino)
        hit = self._maps.get(key)
        if hit is not None and len(hit[0]) >= shm.size and (hit[1] or not writable):
            self._maps.move_to_end(key)
            return hit[0]
        mapping = shm.map(writable=writable)
        if hit is not None:
            del self._maps[key]
            _unmap(hit[0])
        if isinstance(mapping, mmap.mmap):  # an empty region maps to an empty view: nothing to keep
            self._maps[key] = (mapping, writable)
            while len(self._maps) > self._keep:
                _unmap(self._maps.popitem(last=False)[1][0])
        return mapping

    def close(self) -> None:
        while self._maps:
            _unmap(self._maps.popitem()[1][0])


class _Pools:
    """A request's SharedMemory pools mapped for one execution.

    ``cached`` maps pool indexes to mappings a burst keeps (npuemu's ``IBurst``), and
    ``mappings`` is the prepared model's keeper of the others: both stay mapped on
    close; without them a pool is mapped for this execution and unmapped on close.
    """

    def __init__(
        self, pools: list, writable: set[int], cached: dict[int, Any] | None = None, mappings: _Mappings | None = None
    ) -> None:
        self._shm = pools
        self._maps: dict[int, Any] = dict(cached or {})
        self._cached = set(self._maps)
        self._mappings = mappings
        self._views: list[memoryview] = []
        self._writable = writable

    def region(self, index: int, offset: int, length: int, needed: int, what: str) -> memoryview:
        if not 0 <= index < len(self._shm):
            raise service_error(ErrorStatus.INVALID_ARGUMENT, f"{what}: pool {index} of {len(self._shm)}")
        shm = self._shm[index]
        if shm is None:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, f"{what}: pool {index} is null")
        if length == 0:
            length = needed  # NNAPI: 0 means "as long as the operand is"
        if length != needed:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, f"{what} is {length} bytes, the operand needs {needed}")
        if offset < 0 or offset + length > shm.size:
            raise service_error(
                ErrorStatus.INVALID_ARGUMENT, f"{what}: bytes {offset}..{offset + length} outside pool {index} ({shm.size} bytes)"
            )
        mapping = self._maps.get(index)
        if mapping is None:
            try:
                if self._mappings is not None:
                    mapping = self._mappings.map(shm, index in self._writable)
                    self._cached.add(index)
                else:
                    mapping = shm.map(writable=index in self._writable)
            except (OSError, ValueError) as exc:
                raise service_error(ErrorStatus.INVALID_ARGUMENT, f"{what}: pool {index} cannot be mapped: {exc}") from None
            self._maps[index] = mapping
        view = memoryview(mapping)[offset : offset + length]
        if len(view) != length:  # a burst's memory is not the pool this request sent
            view.release()
            raise service_error(
                ErrorStatus.INVALID_ARGUMENT, f"{what}: bytes {offset}..{offset + length} outside the memory of pool {index}"
            )
        self._views.append(view)
        return view

    def close(self) -> None:
        for view in self._views:
            try:
                view.release()
            except BufferError:
                pass  # still exported (a refused submission's traceback): the GC frees it
        self._views.clear()
        for index, mapping in self._maps.items():
            if index not in self._cached:
                _unmap(mapping)
        self._maps.clear()
        _close_all(self._shm)


def _check_owner(owner_uid: int, what: str) -> None:
    """Refuse a call on a prepared model (or its burst) from any uid but the one that prepared it."""
    uid = Binder.getCallingUid()
    if uid != owner_uid:
        raise SecurityException(f"uid {uid} may not use a {what} of uid {owner_uid}")


class PreparedModel(IPreparedModel.Stub):
    """A model loaded in driver memory, owned by one client process.

    ``load_request`` is the id of the owner uid's NpuManager request it was prepared
    for (its ``ModelLoadToken``), or None when the app named none.
    """

    def __init__(
        self, hal: Hal, handle: Any, device_name: str, owner_uid: int, owner_pid: int, load_request: int | None = None,
        preference: Any = _ExecutionPreference.FAST_SINGLE_ANSWER,
    ) -> None:
        super().__init__()
        self.preference = preference
        self._hal = hal
        self.handle = handle
        self.device_name = device_name
        self.owner_uid = owner_uid
        self.owner_pid = owner_pid
        self.load_request = load_request
        self._gone: str | None = None
        self._revoked = False
        self._running: set[int] = set()
        self._mappings = _Mappings()
        self.bursts: weakref.WeakSet[Burst] = weakref.WeakSet()

    async def onTransact(self, code: int, data: Any, ctx: Any) -> Any:  # noqa: N802
        _check_owner(self.owner_uid, "prepared model")
        return await super().onTransact(code, data, ctx)

    def __repr__(self) -> str:
        what = f"model {self.handle.id}" if self.handle is not None else f"gone ({self._gone})"
        request = "" if self.load_request is None else f" request {self.load_request}"
        return f"<PreparedModel {what} on {self.device_name} of uid {self.owner_uid} pid {self.owner_pid}{request}>"

    def free(self, why: str, *, revoked: bool = False) -> None:
        """Unload now (idempotent).  Work in flight ends CANCELLED_SYSTEM."""
        if self._gone is not None:
            return
        self._gone = why
        self._revoked = revoked
        self._hal.untrack(self)
        for burst in list(self.bursts):
            burst.close()
        self._mappings.close()
        try:
            if self.handle.loaded:
                self.handle.unload()
        except NpuError as exc:
            log.warning("unloading %r: %s", self, exc)
        self._hal.poll()
        # A revoked model stays exported (its later calls must fail cleanly, not as a
        # dead object) but need not keep the model's constant pools mapped.
        self.handle = None
        if not revoked:
            # A released or orphaned model is gone for good: later calls see a dead object.
            runtime = self._hal.runtime
            runtime.unexport(self)

    async def release(self) -> None:
        self.free(f"released by pid {Binder.getCallingPid()}")

    def check_alive(self) -> None:
        """Refuse a call on a freed model: GENERAL_FAILURE if revoked, else DEVICE_UNAVAILABLE."""
        if self._gone is not None:
            status = ErrorStatus.GENERAL_FAILURE if self._revoked else ErrorStatus.DEVICE_UNAVAILABLE
            raise service_error(status, f"the prepared model is gone: {self._gone}")

    async def configureExecutionBurst(self) -> Any:  # noqa: N802
        self.check_alive()
        burst = Burst(self)
        self.bursts.add(burst)
        return burst

    async def executeSynchronously(  # noqa: N802
        self, request: Any, measureTiming: bool, deadlineNs: int, loopTimeoutDurationNs: int  # noqa: N803
    ) -> Any:
        return await self.executeWithHints(request, measureTiming, deadlineNs, _ExecutionHints())

    async def executeWithHints(self, request: Any, measureTiming: bool, deadlineNs: int, hints: Any) -> Any:  # noqa: N802,N803
        if request is None:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, "request must not be null")
        if hints is None:
            hints = _ExecutionHints()
        pools = _Pools(list(request.pools), {a.location.poolIndex for a in request.outputs}, mappings=self._mappings)
        try:
            return await self._execute(request, pools, measureTiming, deadlineNs, hints)
        finally:
            pools.close()

    def _buffers(self, args: list, shapes: list, dtypes: list, pools: _Pools, what: str) -> tuple[list, list]:
        """The request's regions of the model's inputs or outputs, and the dimensions each
        argument gives (an input the model leaves unspecified takes them from its
        RequestArgument.dimensions; an output whose size only the run gives may have a
        region of any length)."""
        if len(args) != len(shapes):
            raise service_error(ErrorStatus.INVALID_ARGUMENT, f"the model has {len(shapes)} {what}s, the request {len(args)}")
        out, dims = [], []
        for i, (arg, shape, dtype) in enumerate(zip(args, shapes, dtypes)):
            if arg is None or arg.hasNoValue:
                raise service_error(ErrorStatus.INVALID_ARGUMENT, f"{what} {i} has no value (optional operands unsupported)")
            given = tuple(int(d) for d in arg.dimensions or ())
            known = 0 not in shape
            bad = bool(given) and (
                (len(shape) > 0 and len(given) != len(shape))
                or 0 in given
                or any(want and d != want for d, want in zip(given, shape))
                or (what == "output" and known and given != tuple(shape))
            )
            if bad:
                raise service_error(
                    ErrorStatus.INVALID_ARGUMENT, f"{what} {i} has dimensions {list(given)}, the model's are {list(shape)}"
                )
            run_shape = given or tuple(shape)
            loc = arg.location
            if what == "output" and not known:
                needed = loc.length  # only the run says how much it needs; the driver checks
            elif 0 in run_shape:
                raise service_error(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"{what} {i} has unspecified dimensions {list(shape)} and the request gives none",
                )
            else:
                needed = dtype.itemsize * math.prod(run_shape)
            out.append(pools.region(loc.poolIndex, loc.offset, loc.length, needed, f"{what} {i}"))
            dims.append(given if what == "input" and not known else None)
        return out, dims

    async def _execute(self, request: Any, pools: _Pools, measure: bool, deadline_ns: int, hints: Any) -> Any:
        self.check_alive()
        if deadline_ns < -1:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, f"deadlineNs {deadline_ns} (use -1 for none)")
        handle = self.handle
        ins, in_dims = self._buffers(list(request.inputs), handle.input_shapes, handle.input_dtypes, pools, "input")
        outs, _ = self._buffers(list(request.outputs), handle.output_shapes, handle.output_dtypes, pools, "output")
        uid, pid = Binder.getCallingUid(), Binder.getCallingPid()
        original = uid if hints.originalUid < 0 else hints.originalUid
        group = None if hints.groupId is None else bytes(hints.groupId.uuid)
        driver = self._hal.driver
        self._hal.sync_clock()
        try:
            work_id = driver.submit(
                self.handle,
                ins,
                outs,
                uid=uid,
                original_uid=original,
                debug_pid=pid,
                job_priority=hints.jobPriority,
                group_id=group,
                feature_id=hints.debugFeatureId,
                input_dims=in_dims,
            )
        except NpuOutputTooSmallError as exc:
            # the input shapes already say an output's buffer is too small: the app's to fix
            return _insufficient(exc.output_shapes or [])
        except NpuPermissionError as exc:
            raise SecurityException(str(exc)) from None
        except NpuInvalidPriorityError as exc:
            raise IllegalArgumentException(str(exc)) from None
        except NpuOfflineError as exc:
            raise service_error(ErrorStatus.DEVICE_UNAVAILABLE, str(exc)) from None
        except NpuCapacityError as exc:
            raise service_error(ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT, str(exc)) from None
        except NpuLookupError as exc:
            raise service_error(ErrorStatus.DEVICE_UNAVAILABLE, f"the prepared model is gone: {exc}") from None
        except NpuValueError as exc:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, str(exc)) from None
        self._hal.work_submitted(work_id)
        self._running.add(work_id)
        reported: list = []
        try:
            ended = await self._wait(work_id, deadline_ns)
            await self._hal.wait_recorded(work_id)
            reported = driver.output_shapes(work_id)
        finally:
            self._running.discard(work_id)
            timing = self._hal.timing_of(work_id)
            if not driver.closed:
                driver.forget(work_id)  # drops its references to the request's pages
        if ended.reason is EndReason.COMPLETED:
            shapes = [_OutputShape(dimensions=list(got or declared), isSufficient=True)
                      for (got, _), declared in zip(reported, self.handle.output_shapes)]
            t = _Timing()
            if measure and timing is not None and timing.started_ns is not None and timing.ended_ns is not None:
                t = _Timing(
                    timeOnDeviceNs=timing.ended_ns - timing.started_ns, timeInDriverNs=timing.ended_ns - timing.submitted_ns
                )
            return _ExecutionResult(outputSufficientSize=True, outputShapes=shapes, timing=t)
        if ended.reason is EndReason.FAILED and not all(ok for _, ok in reported):
            return _insufficient(reported)  # a computed count outgrew an output's buffer
        if ended.reason is EndReason.FAILED:
            raise service_error(ErrorStatus.GENERAL_FAILURE, f"work {work_id} failed on {self.device_name}")
        if self._gone is not None:
            status = ErrorStatus.GENERAL_FAILURE if self._revoked else ErrorStatus.DEVICE_UNAVAILABLE
            raise service_error(status, f"work {work_id} was cancelled: {self._gone}")
        raise service_error(ErrorStatus.GENERAL_FAILURE, f"work {work_id} ended {ended.reason.name}")

    async def _wait(self, work_id: int, deadline_ns: int) -> Any:
        driver = self._hal.driver
        if deadline_ns < 0:
            return await driver.wait_work(work_id)
        # deadlineNs is CLOCK_MONOTONIC (AOSP's "time since boot" in the AIDL HAL).
        remaining = (deadline_ns - time.monotonic_ns()) / 1e9
        with trio.move_on_after(max(0.0, remaining)):
            return await driver.wait_work(work_id)
        try:
            driver.cancel(work_id)
        except NpuError:
            pass
        # A running work stops at its next slice boundary; a hung channel never gets
        # there (the watchdog will reset it), so wait a little, not forever.  Until its
        # end the driver keeps the request's mappings alive, so nothing is unmapped
        # under the hardware's feet.
        with trio.CancelScope(shield=True), trio.move_on_after(_CANCEL_GRACE_S):
            await driver.wait_work(work_id)
        raise service_error(ErrorStatus.MISSED_DEADLINE_TRANSIENT, f"work {work_id} missed its deadline")


def _insufficient(reported: list) -> Any:
    """ExecutionResult of a run an output's buffer was too small for: each output's dimensions
    as far as known, the one too small marked (OUTPUT_INSUFFICIENT_SIZE to the runtime)."""
    shapes = [_OutputShape(dimensions=list(dims), isSufficient=ok) for dims, ok in reported]
    return _ExecutionResult(outputSufficientSize=False, outputShapes=shapes, timing=_Timing())


class Burst(IBurst.Stub):
    """``IPreparedModel.configureExecutionBurst``'s ``IBurst``: executions of one prepared
    model that keep the request pools they name mapped between calls.

    A pool given with a memory identifier token (not -1) is mapped the first time the
    token is seen and found again by it later; the descriptor each call carries is
    closed unmapped. ``releaseMemoryResource`` unmaps one; the prepared model's end
    unmaps all. Calls of one burst run one at a time, in order.
    """

    def __init__(self, prepared: PreparedModel) -> None:
        super().__init__()
        self._prepared = prepared
        self._lock = trio.Lock()
        # token -> (mapping, writable); mappings stay until released
        self.memories: dict[int, tuple[Any, bool]] = {}

    async def onTransact(self, code: int, data: Any, ctx: Any) -> Any:  # noqa: N802
        _check_owner(self._prepared.owner_uid, "burst")
        return await super().onTransact(code, data, ctx)

    async def executeSynchronously(  # noqa: N802
        self, request: Any, memoryIdentifierTokens: list[int], measureTiming: bool, deadlineNs: int,  # noqa: N803
        loopTimeoutDurationNs: int,  # noqa: N803
    ) -> Any:
        if request is None:
            raise service_error(ErrorStatus.INVALID_ARGUMENT, "request must not be null")
        tokens = list(memoryIdentifierTokens or ())
        if len(tokens) != len(request.pools) or any(t < -1 for t in tokens):
            raise service_error(
                ErrorStatus.INVALID_ARGUMENT,
                f"{len(request.pools)} pool(s) need as many memory identifier tokens (>= -1), got {tokens}",
            )
        writable = {a.location.poolIndex for a in request.outputs}
        async with self._lock:
            self._prepared.check_alive()  # nothing is cached for a model that is gone
            cached = {}
            for index, token in enumerate(tokens):
                if token < 0:
                    continue
                hit = self.memories.get(token)
                if hit is None or (index in writable and not hit[1]):
                    shm = request.pools[index]
                    if shm is None:
                        continue  # _Pools names the null pool
                    try:
                        mapping = shm.map(writable=index in writable)
                    except (OSError, ValueError) as exc:
                        raise service_error(
                            ErrorStatus.INVALID_ARGUMENT, f"pool {index} cannot be mapped: {exc}"
                        ) from None
                    if hit is not None:
                        _unmap(hit[0])
                    hit = self.memories[token] = (mapping, index in writable)
                cached[index] = hit[0]
            pools = _Pools(list(request.pools), writable, cached)
            try:
                return await self._prepared._execute(request, pools, measureTiming, deadlineNs, _ExecutionHints())
            finally:
                pools.close()

    async def releaseMemoryResource(self, memoryIdentifierToken: int) -> None:  # noqa: N802,N803
        hit = self.memories.pop(memoryIdentifierToken, None)
        if hit is not None:
            _unmap(hit[0])

    def close(self) -> None:
        for mapping, _ in self.memories.values():
            _unmap(mapping)
        self.memories.clear()
