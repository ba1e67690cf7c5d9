"""``ANeuralNetworksCompilation``: a model partitioned across devices and prepared on each.

``finish()`` does what Android's ``CompilationBuilder::finish`` does:

1. Ask every candidate device which operations it supports (drivers through their
   IDevice's ``getSupportedOperations``, the CPU through its C kernels).
2. Partition (``_partition``: the lowest execTime, or powerUsage under LOW_POWER, for
   each operation's first operand type; the CPU wins ties) into steps.
3. Prepare each driver step: its sub-model goes to ``IDevice.prepareModel`` with the
   weights as ``SharedMemory`` pools (copied once per compilation, shared by every
   step that reads them) and comes back as an ``IPreparedModel``. CPU steps need no
   preparation; they are checked by the C kernels when they run.

An app that loads under an NpuManager request names it with
``setModelLoadRequest(request)``: every ``prepareModel`` of the compilation then
carries the request's id (a ``ModelLoadToken``), so that when that request's unload
deadline passes the HAL frees exactly its models, not the app's others (npuemu's
addition; AOSP would pass it as a compilation hint).

A plain compilation (``createCompilation``) survives a failing driver: a driver that
cannot say what it supports is taken to support nothing, and one that fails to
prepare its step (or, later, to execute it, or dies) has its operations moved to the
CPU and the plan cut again (``ExecutionPlan.fallBackToCpu``). A compilation for
explicit devices (``createCompilationForDevices``) never does: the device's error is
the app's error, ``DEAD_OBJECT`` when its process died.

Prepared models are released in :meth:`Compilation.aclose` (also ``async with``);
the HAL frees them anyway when this process dies.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import trio

from framework.binder import RemoteException, SharedMemory
from interfaces.android.hardware.neuralnetworks import ModelLoadToken

from . import _cpu_kernels
from ._aidl import errorFromRemote, sharedMemoryFor, toAidlModel
from ._burst import Burst
from ._cache import CacheFiles, checkCaching, stepToken
from ._errors import BadDataError, BadStateError, NeuralNetworksError, requireNotNull
from ._hal import HalModel
from ._model import Model
from ._partition import ExecutionPlan, ExecutionStep, _hal_of, createPlan, createPlanForDevices
from ._types import ExecutionPreference, OperandLifeTime, Priority

if TYPE_CHECKING:
    from ._execution import Execution
    from ._runtime import NeuralNetworks

__all__ = ["Compilation", "RequestPools", "WeightPools", "driverSupportedOperations"]

log = logging.getLogger("NeuralNetworks")

#: ``deadlineNs`` for "no deadline", as AOSP's AIDL HAL spells it.
NO_DEADLINE = -1


class WeightPools:
    """The SharedMemory regions carrying a model's pools; one region per pool object.

    Steps of a plan refer to the *same* pool objects as the whole model, so each pool
    is copied into shared memory once, however many steps and devices read it.
    """

    def __init__(self) -> None:
        self._regions: dict[int, tuple[Any, SharedMemory]] = {}

    def regionsFor(self, hal: HalModel) -> list[SharedMemory]:
        regions = []
        for pool in hal.pools:
            hit = self._regions.get(id(pool))
            if hit is None or hit[0] is not pool:
                hit = (pool, sharedMemoryFor(pool, "nn-weights"))
                self._regions[id(pool)] = hit
            regions.append(hit[1])
        return regions

    def close(self) -> None:
        for _, region in self._regions.values():
            region.close()
        self._regions.clear()

    def __enter__(self) -> WeightPools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Request pools a compilation keeps for its next executions (more run at once make more).
_KEPT_REQUEST_POOLS = 4


class RequestPools:
    """The request pools of a compilation's executions, as NNAPI's runtime keeps its memory
    pools: a ``SharedMemory`` region and its mapping, taken by one execution's run, given
    back when the run is over and taken again by the next while its size fits. So a run
    makes no region, maps nothing and faults no fresh page in, here or in the HAL (which
    keeps its mapping of a region it has seen, by the region's identity).

    A region is given back only when nobody can still write it: a run cut short while a
    driver may still be computing into it (cancelled mid-call) closes it instead.
    """

    def __init__(self) -> None:
        self._free: list[tuple[SharedMemory, Any]] = []
        self._closed = False

    def take(self, size: int) -> tuple[SharedMemory, Any]:
        """A region of at least ``size`` bytes and its read-write mapping: the smallest
        kept one that fits, else a new one."""
        fits = [k for k, (region, _) in enumerate(self._free) if region.size >= size]
        if fits:
            return self._free.pop(min(fits, key=lambda k: self._free[k][0].size))
        region = SharedMemory.create("nn-request", size)
        return region, region.mapReadWrite()

    def give(self, pool: tuple[SharedMemory, Any], reuse: bool) -> None:
        """Give back a region taken with :meth:`take`: kept for the next run when
        ``reuse``, else (or when the compilation is closed, or enough are kept) closed."""
        if reuse and not self._closed:
            self._free.append(pool)
            if len(self._free) <= _KEPT_REQUEST_POOLS:
                return
            pool = self._free.pop(min(range(len(self._free)), key=lambda k: self._free[k][0].size))
        _close_pool(pool)

    def close(self) -> None:
        self._closed = True
        while self._free:
            _close_pool(self._free.pop())


def _close_pool(pool: tuple[SharedMemory, Any]) -> None:
    region, mapping = pool
    region.close()
    try:
        mapping.close()
    except BufferError:
        pass  # a view of it is still held somewhere: the collector unmaps it


async def driverSupportedOperations(name: str, proxy: Any, hal: HalModel, pools: WeightPools) -> list[bool]:
    """``IDevice.getSupportedOperations`` of a driver; a malformed answer is ``OP_FAILED``."""
    try:
        answer = await proxy.getSupportedOperations(toAidlModel(hal, pools.regionsFor(hal)))
    except RemoteException as e:
        raise errorFromRemote(name, "getSupportedOperations", e) from None
    if not isinstance(answer, (list, tuple)) or len(answer) != len(hal.operations):
        raise errorFromRemote(
            name, "getSupportedOperations", ValueError(f"{len(hal.operations)} answers expected, got {answer!r}")
        )
    return [bool(x) for x in answer]


def _constant_bytes(hal: HalModel) -> int:
    return sum(
        o.location.length
        for o in hal.operands
        if o.lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_POOL)
    )


class Compilation:
    """A model compiled for a set of devices. Made by ``NeuralNetworks.createCompilation*``.

    Set options (``setPreference``, ``setPriority``, ``setCaching``,
    ``setEmulatedModelSize``, ``setModelLoadRequest``), then
    ``await finish()``; after that, ``plan`` says which operation runs where and
    ``createExecution()`` runs it.
    """

    def __init__(self, nn: NeuralNetworks, model: Model, devices: tuple[Any, ...] | None) -> None:
        self._nn = nn
        self._model = model
        self._hal = _hal_of(model, "createCompilation")
        self._explicit = devices
        self._preference = ExecutionPreference.FAST_SINGLE_ANSWER
        self._priority = Priority.DEFAULT
        self._emulatedSize = 0
        self._loadRequestId: int | None = None
        self._caching: tuple[str, bytes] | None = None
        self._plan: ExecutionPlan | None = None
        self._prepared: dict[tuple[str, tuple[int, ...]], Any] = {}
        self._cpu_prepared: dict[tuple[tuple[int, ...], ...], _cpu_kernels.PreparedModel] = {}
        self._pools = WeightPools()
        self.requestPools = RequestPools()
        self._lock = trio.Lock()
        self._finishing = False
        self._closed = False

    # -- options (before finish) ----------------------------------------------------

    def _check_open(self, call: str) -> None:
        if self._closed:
            raise BadStateError(f"{call}: the compilation is closed")
        if self._plan is not None or self._finishing:
            raise BadStateError(f"{call}: the compilation is already finished")

    def setPreference(self, preference: ExecutionPreference | int) -> None:
        """``ANEURALNETWORKS_PREFER_*``; LOW_POWER partitions by powerUsage instead of execTime."""
        self._check_open("setPreference")
        try:
            self._preference = ExecutionPreference(preference)
        except ValueError:
            raise BadDataError(f"setPreference: unknown preference {preference!r}") from None

    def setPriority(self, priority: Priority | int) -> None:
        """``ANEURALNETWORKS_PRIORITY_LOW/MEDIUM/HIGH`` (90, 100, 110), passed to prepareModel."""
        self._check_open("setPriority")
        try:
            self._priority = Priority(priority)
        except ValueError:
            raise BadDataError(f"setPriority: {priority!r} is not 90, 100 or 110") from None

    def setEmulatedModelSize(self, sizeBytes: int) -> None:
        """npuemu: the weight memory the model claims on the NPU (a "2 GB" model).

        0 (the default) means its real constant bytes. A model split across devices
        reserves on each a share proportional to the weights its steps hold (a model
        with no weights at all reserves the whole size on each).
        """
        self._check_open("setEmulatedModelSize")
        if isinstance(sizeBytes, bool) or not isinstance(sizeBytes, int) or sizeBytes < 0:
            raise BadDataError(f"setEmulatedModelSize: a size in bytes >= 0, not {sizeBytes!r}")
        self._emulatedSize = sizeBytes

    def setCaching(self, cacheDir: str | os.PathLike, token: bytes) -> None:
        """``ANeuralNetworksCompilation_setCaching``: reuse compiled steps across compilations.

        ``cacheDir`` is a directory the app owns; ``token`` (32 bytes,
        ``IDevice.BYTE_SIZE_OF_CACHE_TOKEN``) names the model: the app must give a
        different token to a different model. A later compilation of the same model
        with the same directory and token is prepared from the cache by every device
        that caches (``_cache`` says how), without sending the model again.
        """
        self._check_open("setCaching")
        requireNotNull("setCaching", cacheDir=cacheDir, token=token)
        self._caching = checkCaching(cacheDir, token)

    def setModelLoadRequest(self, request: Any) -> None:
        """npuemu: the NpuManager ``ModelLoadRequest`` (or its id) this model is loaded for.

        Every ``prepareModel`` of the compilation passes its id to the driver's HAL,
        which files the prepared models under (this app's uid, that id). If the app
        then ignores ``onRequestUnloadModel`` for that request past the unload deadline,
        only these models are revoked; models of the app's other requests live on.
        A model loaded under no named request is revoked with any of its app's requests.
        """
        self._check_open("setModelLoadRequest")
        request_id = request.getId() if callable(getattr(request, "getId", None)) else request
        if isinstance(request_id, bool) or not isinstance(request_id, int) or not -(2**31) <= request_id < 2**31:
            raise BadDataError(f"setModelLoadRequest: a ModelLoadRequest or its 32-bit id, not {request!r}")
        self._loadRequestId = request_id

    # -- finishing ------------------------------------------------------------------

    @property
    def allowsCpuFallback(self) -> bool:
        return self._explicit is None

    @property
    def isFinished(self) -> bool:
        return self._plan is not None

    @property
    def plan(self) -> ExecutionPlan:
        """The current plan (which may change once, by fallback, after a device failed)."""
        if self._plan is None:
            raise BadStateError("the compilation is not finished")
        return self._plan

    @property
    def model(self) -> Model:
        return self._model

    def describe(self) -> str:
        return self.plan.describe()

    async def finish(self) -> None:
        """Partition and prepare (``ANeuralNetworksCompilation_finish``)."""
        self._check_open("finish")
        self._finishing = True
        try:
            plan = await self._partition()
            plan = await self._prepare(plan)
        except BaseException:
            self._finishing = False
            with trio.CancelScope(shield=True):
                await self._release_unused(set())
            raise
        self._plan = plan

    async def partition(self) -> ExecutionPlan:
        """The plan ``finish()`` would start from, without preparing anything.

        What ``npuemu nn plan`` prints: it asks the devices what they support and
        partitions, but loads nothing into any device's memory (so a prepare-time
        fallback is not reflected). The compilation stays open.
        """
        self._check_open("partition")
        return await self._partition()

    async def _partition(self) -> ExecutionPlan:
        nn, hal = self._nn, self._hal
        if self._explicit is None:
            if not all(nn.isAlive(d) for d in nn.driverDevices):
                await nn.refresh()  # a restarted HAL brings its devices back
            drivers = [d for d in nn.driverDevices if nn.isAlive(d)]
            answers = []
            for d in drivers:
                try:
                    answers.append(await driverSupportedOperations(d.name, nn._proxy(d), hal, self._pools))
                except NeuralNetworksError as e:
                    log.warning("%s: getSupportedOperations failed (%s); it gets no operations", d.name, e)
                    answers.append([False] * len(hal.operations))
            return createPlan(hal, drivers, preference=self._preference, cpu=nn.cpu, supported=answers)
        answers = []
        for d in self._explicit:
            proxy = nn._proxy(d)
            if proxy is None:
                answers.append(d.getSupportedOperations(hal))
            else:
                answers.append(await driverSupportedOperations(d.name, proxy, hal, self._pools))
        return createPlanForDevices(hal, self._explicit, preference=self._preference, supported=answers)

    async def _prepare(self, plan: ExecutionPlan) -> ExecutionPlan:
        """Prepare every driver step of ``plan``; on a plain compilation, fall back as needed."""
        while True:
            failed = None
            for step in plan.steps:
                try:
                    await self._prepare_step(step, len(plan.steps) == 1)
                except NeuralNetworksError as e:
                    if not self.allowsCpuFallback:
                        raise
                    log.warning("%s failed to prepare step %d (%s); its operations move to the CPU",
                                step.device.name, step.index, e)
                    failed = step.device.name
                    break
            if failed is None:
                await self._release_unused({(s.device.name, s.operations) for s in plan.steps})
                return plan
            plan = plan.fallBackToCpu(failed)

    async def _prepare_step(self, step: ExecutionStep, whole: bool) -> None:
        proxy = self._nn._proxy(step.device)
        key = (step.device.name, step.operations)
        if proxy is None or key in self._prepared:
            return
        size = self._share_of_emulated_size(step)
        token = None if self._loadRequestId is None else ModelLoadToken(requestId=self._loadRequestId)
        files = await self._cache_files(step, proxy, whole)
        prepared = None
        if files is not None and files.exist():
            prepared = await self._prepare_from_cache(step, proxy, files, size, token)
        if prepared is None:
            prepared = await self._prepare_in_full(step, proxy, files, size, token)
        if prepared is None:
            raise errorFromRemote(step.device.name, "prepareModel", ValueError("returned no prepared model"))
        self._prepared[key] = prepared

    async def _cache_files(self, step: ExecutionStep, proxy: Any, whole: bool) -> CacheFiles | None:
        """The step's cache files, when caching is set and the device caches."""
        if self._caching is None:
            return None
        try:
            counts = CacheFiles.counts(await proxy.getNumberOfCacheFilesNeeded())
        except RemoteException as e:
            log.warning("%s: getNumberOfCacheFilesNeeded failed (%s); not cached", step.device.name, e)
            return None
        if counts is None:
            return None
        cache_dir, app_token = self._caching
        token = stepToken(
            app_token, step.device.name, step.device.version, int(self._preference), None if whole else step.operations
        )
        return CacheFiles(cache_dir, token, *counts)

    async def _prepare_from_cache(
        self, step: ExecutionStep, proxy: Any, files: CacheFiles, size: int, token: Any
    ) -> Any:
        """The step prepared from its cache, or None (the device refused it: prepare in full)."""
        try:
            model_cache, data_cache = files.open(write=False)
        except OSError as e:
            log.info("%s: the cache cannot be opened (%s); preparing in full", step.device.name, e)
            return None
        try:
            return await proxy.prepareModelFromCache(NO_DEADLINE, model_cache, data_cache, files.token, size, token)
        except RemoteException as e:
            log.info("%s: prepareModelFromCache refused (%s); preparing in full", step.device.name, e)
            return None
        finally:
            for f in (*model_cache, *data_cache):
                f.close()

    async def _prepare_in_full(
        self, step: ExecutionStep, proxy: Any, files: CacheFiles | None, size: int, token: Any
    ) -> Any:
        model = toAidlModel(step.model, self._pools.regionsFor(step.model))
        model_cache: list[Any] = []
        data_cache: list[Any] = []
        if files is not None:
            try:
                model_cache, data_cache = files.open(write=True)
            except OSError as e:
                log.warning("%s: the cache cannot be written (%s); compiling uncached", step.device.name, e)
        try:
            return await proxy.prepareModelWithCache(
                model, int(self._preference), self._priority.halValue, NO_DEADLINE, size, token,
                model_cache, data_cache, files.token if model_cache else b"",
            )
        except RemoteException as e:
            raise errorFromRemote(step.device.name, "prepareModel", e) from None
        finally:
            for f in (*model_cache, *data_cache):
                f.close()

    def _share_of_emulated_size(self, step: ExecutionStep) -> int:
        """The emulated bytes ``step`` reserves: the model's size, split by weight held."""
        if not self._emulatedSize:
            return 0
        total = _constant_bytes(self._hal)
        if total == 0:
            return self._emulatedSize
        return max(1, self._emulatedSize * _constant_bytes(step.model) // total)

    def preparedModel(self, step: ExecutionStep) -> Any:
        """The IPreparedModel of a driver step of the current plan."""
        return self._prepared[(step.device.name, step.operations)]

    def cpuPreparedModel(self, step: ExecutionStep) -> _cpu_kernels.PreparedModel:
        """The CPU device's plan of a CPU step, made at its first run and kept."""
        key = (step.operations, tuple(step.inputs), tuple(step.outputs))
        prepared = self._cpu_prepared.get(key)
        if prepared is None:
            prepared = self._cpu_prepared[key] = _cpu_kernels.PreparedModel(step.model)
        return prepared

    async def _release_unused(self, keep: set[tuple[str, tuple[int, ...]]]) -> None:
        for key in [k for k in self._prepared if k not in keep]:
            prepared = self._prepared.pop(key)
            try:
                await prepared.release()
            except RemoteException:
                pass  # a dead HAL has freed it already

    async def fallBack(self, plan: ExecutionPlan, deviceName: str) -> ExecutionPlan:
        """After ``deviceName`` failed under ``plan``: the plan without it (prepared).

        Several executions may fail at once; the first replans, the others find the
        plan already changed and use it.
        """
        if not self.allowsCpuFallback:
            raise BadStateError("a createForDevices compilation never falls back to the CPU")
        async with self._lock:
            if self._plan is not plan:
                return self.plan
            new = await self._prepare(plan.fallBackToCpu(deviceName))
            self._plan = new
            return new

    def createBurst(self) -> Burst:
        """``ANeuralNetworksBurst_create``: a burst of executions of this finished compilation."""
        return Burst(self)

    def createExecution(self) -> Execution:
        """``ANeuralNetworksExecution_create``."""
        from ._execution import Execution

        if self._closed:
            raise BadStateError("createExecution: the compilation is closed")
        return Execution(self)

    # -- life -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Release the prepared models and the weight regions; twice is harmless."""
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            await self._release_unused(set())
        self._cpu_prepared.clear()
        self._pools.close()
        self.requestPools.close()

    async def __aenter__(self) -> Compilation:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def devices(self) -> Sequence[Any]:
        return self.plan.devices

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("finished" if self._plan is not None else "open")
        return f"<Compilation {state}{' for devices' if self._explicit is not None else ''}>"
