"""The NNAPI runtime of one app process: ``open_nn_runtime`` and :class:`NeuralNetworks`.

Android's libneuralnetworks finds the drivers when the process first touches NNAPI:
every ``android.hardware.neuralnetworks.IDevice/{name}`` instance the service manager
lists, then its own CPU device, ``nnapi-reference``. Here that is one object, opened
over the process's binder runtime and holding the device list for its life (no module
state: two runtimes in one test see what they were opened on)::

    async with open_binder_runtime(...) as binder, open_nn_runtime(binder) as nn:
        for i in range(nn.getDeviceCount()):
            device = nn.getDevice(i)
            print(device.getName(), device.getType().name, device.getVersion())
        compilation = nn.createCompilation(model)
        await compilation.finish()
        execution = compilation.createExecution()
        execution.setInput(0, image)
        features, scores = await execution.compute_async()

The enabled-devices filter is npuemu's ``debug.nn.enabled-devices``: a regular
expression a driver's whole name must match (``re.fullmatch``), from the
``enabledDevices`` argument or else the ``NPUEMU_NN_ENABLED_DEVICES`` environment
variable. It limits the *driver* devices; ``nnapi-reference`` is always there, as on
Android. Filtered devices are never contacted.

A driver that fails to describe itself at discovery (it died, it gave a malformed
capability table, its name breaks the ``{VENDOR}-{DEVICE_NAME}`` rule) is left out and
logged: an app should not fail to start because one vendor service is broken.

When the HAL process dies and comes back, :meth:`NeuralNetworks.refresh` finds its
devices again; a plain compilation does so by itself when it sees a dead device, so a
long-running app gets the NPU back without restarting.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from framework.binder import BinderRuntime, RemoteException, defaultServiceManager, open_service_nursery
from interfaces.android.hardware.neuralnetworks import IDevice

from . import _cpu_kernels
from ._atrace import CpuTracer
from ._aidl import IDEVICE_DESCRIPTOR, errorFromRemote
from ._compilation import Compilation, WeightPools, driverSupportedOperations
from ._discovery import getDevice, isValidDeviceName, listDevices
from ._errors import BadDataError, NeuralNetworksError
from ._model import Model
from ._partition import CPU_DEVICE_NAME, DeviceDescriptor, _check_devices, _hal_of, getSupportedOperationsForDevices
from ._types import FEATURE_LEVEL, DeviceType, uniformCapabilities

__all__ = ["ENABLED_DEVICES_ENV", "NeuralNetworks", "cpuDevice", "open_nn_runtime"]

log = logging.getLogger("NeuralNetworks")

#: The environment variable for Android's ``debug.nn.enabled-devices`` property.
ENABLED_DEVICES_ENV = "NPUEMU_NN_ENABLED_DEVICES"

_DUMP_ALL = 15  # IServiceManager.DUMP_FLAG_PRIORITY_ALL


def cpuDevice() -> DeviceDescriptor:
    """``nnapi-reference`` as the runtime lists it: the C kernels say what it supports.

    execTime = powerUsage = 1.0 for every operand type. (``referenceCpuDevice`` is the
    pure partitioner's stand-in, which claims every operation without asking C.)
    """
    return DeviceDescriptor(
        name=CPU_DEVICE_NAME,
        type=DeviceType.CPU,
        version="npuemu-nn-cpu-1.2",
        featureLevel=FEATURE_LEVEL,
        capabilities=uniformCapabilities(1.0, 1.0),
        supportedOperations=_cpu_kernels.checkSupport,
    )


class NeuralNetworks:
    """The devices an app can use, and the factory of its compilations.

    Made by :func:`open_nn_runtime`. ``devices`` is the NDK's enumeration: driver
    devices in the service manager's order, then ``nnapi-reference``.
    """

    def __init__(self, binder: BinderRuntime, nursery: trio.Nursery, pattern: re.Pattern[str] | None) -> None:
        self._binder = binder
        self._nursery = nursery
        self._pattern = pattern
        self._cpu = cpuDevice()
        self._devices: tuple[DeviceDescriptor, ...] = (self._cpu,)
        # Every driver descriptor this runtime ever handed out, to its IDevice proxy:
        # a compilation made before a refresh() keeps reaching (or failing on) its own.
        self._proxies: dict[DeviceDescriptor, Any] = {}
        self._token = trio.lowlevel.current_trio_token()
        self._closed = False
        # Work on the CPU is marked where the emulator's trace recorder reads it.
        self._cpu_tracer = CpuTracer(getattr(binder.network, "runtime_dir", None), binder.uid, binder.pid)

    # -- discovery (ANeuralNetworks_getDeviceCount, ANeuralNetworks_getDevice) -----

    @property
    def devices(self) -> tuple[DeviceDescriptor, ...]:
        return self._devices

    @property
    def cpu(self) -> DeviceDescriptor:
        return self._cpu

    def getDeviceCount(self) -> int:
        return len(self._devices)

    def getDevice(self, index: int) -> DeviceDescriptor:
        """Device ``index`` (0 .. count - 1); anything else is ``BAD_DATA``."""
        return getDevice(self._devices, index)

    def getDeviceByName(self, name: str) -> DeviceDescriptor:
        """The device called ``name`` (not an NDK call: apps loop over getDevice for it)."""
        for d in self._devices:
            if d.name == name:
                return d
        raise BadDataError(f"no device named {name!r} (have {[d.name for d in self._devices]})")

    @property
    def driverDevices(self) -> tuple[DeviceDescriptor, ...]:
        return self._devices[:-1]

    def _proxy(self, device: DeviceDescriptor) -> Any:
        """The IDevice proxy of a driver device of this runtime; None for the CPU."""
        if device is self._cpu:
            return None
        proxy = self._proxies.get(device)
        if proxy is None:
            raise BadDataError(f"{device!r} is not a device of this runtime")
        return proxy

    def isAlive(self, device: DeviceDescriptor) -> bool:
        """Whether the device's driver process still lives (the CPU always does)."""
        proxy = self._proxy(device)
        return proxy is None or proxy.asBinder().isBinderAlive()

    async def refresh(self) -> None:
        """Discover the drivers again: after a HAL restart its devices come back.

        A device whose process still lives keeps its descriptor; one that died and
        was registered again gets a new one (``getDevice`` returns it from now on);
        one that is gone is no longer listed. Compilations made earlier keep the
        devices they were made with (a dead one fails over as usual).
        """
        live = {d.name: d for d in self.driverDevices if self.isAlive(d)}
        drivers = []
        for name, proxy in await _find_drivers(self._binder, self._pattern):
            known = live.get(name)
            if known is not None:
                drivers.append(known)
                continue
            try:
                device = await _describe(name, proxy)
            except NeuralNetworksError as e:
                log.warning("ignoring device %s: %s", name, e)
                continue
            self._proxies[device] = proxy
            drivers.append(device)
        self._devices = listDevices(drivers, cpu=self._cpu)

    def _checkOwn(self, call: str, devices: Sequence[DeviceDescriptor]) -> list[DeviceDescriptor]:
        devices = _check_devices(call, devices)
        for d in devices:
            if d is not self._cpu and d not in self._proxies:
                raise BadDataError(f"{call}: {d!r} is not a device of this runtime")
        return devices

    # -- models and compilations ----------------------------------------------------

    async def getSupportedOperationsForDevices(
        self, model: Model, devices: Sequence[DeviceDescriptor]
    ) -> list[bool]:
        """``ANeuralNetworksModel_getSupportedOperationsForDevices``: the union over ``devices``.

        One bool per operation in the app's order; each driver is asked through its
        IDevice's ``getSupportedOperations``. No devices or a duplicated one is
        ``BAD_DATA``; a driver that fails to answer fails the call with its error.
        """
        call = "getSupportedOperationsForDevices"
        hal = _hal_of(model, call)
        devices = self._checkOwn(call, devices)
        with WeightPools() as pools:
            answers = [
                d.getSupportedOperations(hal)
                if self._proxy(d) is None
                else await driverSupportedOperations(d.name, self._proxy(d), hal, pools)
                for d in devices
            ]
        return getSupportedOperationsForDevices(model, devices, supported=answers)

    def createCompilation(self, model: Model) -> Compilation:
        """``ANeuralNetworksCompilation_create``: every device, CPU fallback allowed."""
        return Compilation(self, model, None)

    def createCompilationForDevices(self, model: Model, devices: Sequence[DeviceDescriptor]) -> Compilation:
        """``ANeuralNetworksCompilation_createForDevices``: only ``devices``, no fallback ever."""
        devices = self._checkOwn("createForDevices", devices)
        return Compilation(self, model, tuple(devices))

    def __repr__(self) -> str:
        return f"<NeuralNetworks devices={[d.name for d in self._devices]}>"


async def _describe(name: str, proxy: Any) -> DeviceDescriptor:
    """One driver's DeviceDescriptor, from its IDevice (getType, getVersionString, getCapabilities)."""
    try:
        device_type = await proxy.getType()
        version = await proxy.getVersionString()
        caps = await proxy.getCapabilities()
    except RemoteException as e:
        raise errorFromRemote(name, "describe", e) from None
    if not isinstance(version, str) or not version:
        raise BadDataError(f"device {name}: an empty version string (NNAPI requires one)")
    return DeviceDescriptor(
        name=name,
        type=DeviceType(int(device_type)),
        version=version,
        featureLevel=FEATURE_LEVEL,
        capabilities=caps,
        supportedOperations=_asked_over_binder(name),
    )


def _asked_over_binder(name: str):
    def supported(_model: Any) -> list[bool]:
        raise BadDataError(
            f"device {name} answers over the binder: use "
            "NeuralNetworks.getSupportedOperationsForDevices (async)"
        )

    return supported


async def _find_drivers(binder: BinderRuntime, pattern: re.Pattern[str] | None) -> list[tuple[str, Any]]:
    """(name, IDevice proxy) of every registered instance the filter lets through, in order."""
    sm = defaultServiceManager(binder)
    prefix = IDEVICE_DESCRIPTOR + "/"
    found = []
    for service_name in await sm.listServices(_DUMP_ALL):
        if not service_name.startswith(prefix):
            continue
        name = service_name[len(prefix):]
        if pattern is not None and not pattern.fullmatch(name):
            continue  # filtered devices are never contacted
        if not isValidDeviceName(name) or name == CPU_DEVICE_NAME:
            log.warning("ignoring IDevice instance %r: not a {VENDOR}-{DEVICE_NAME} name", name)
            continue
        service = await sm.checkService(service_name)
        if service is not None:  # else it left between listServices and now
            found.append((name, IDevice.asInterface(service)))
    return found


@asynccontextmanager
async def open_nn_runtime(
    binder: BinderRuntime,
    *,
    enabledDevices: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[NeuralNetworks]:
    """Discover the devices and hold them for the block; background computes end with it.

    ``enabledDevices`` (a regex, see the module docstring) overrides the
    ``NPUEMU_NN_ENABLED_DEVICES`` variable of ``environ`` (default ``os.environ``);
    an empty string means no filter. A pattern that does not compile is ``BAD_DATA``.
    """
    if enabledDevices is None:
        enabledDevices = (os.environ if environ is None else environ).get(ENABLED_DEVICES_ENV) or None
    pattern = None
    if enabledDevices:
        try:
            pattern = re.compile(enabledDevices)
        except re.error as e:
            raise BadDataError(f"enabled devices {enabledDevices!r} is not a regular expression: {e}") from None
    # The app catches BadDataError, not an ExceptionGroup around it.
    async with open_service_nursery() as nursery:
        nn = NeuralNetworks(binder, nursery, pattern)
        try:
            await nn.refresh()
            yield nn
        finally:
            nn._closed = True
