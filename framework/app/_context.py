"""The app's ``Context``: who the app is, and its system services.

``open_app_context()`` is what Android's ActivityThread does before ``onCreate``: it
asks the package manager which package this process's uid is, finds the system
services, and opens a nursery that the app's callbacks run in. Then::

    npu = context.getSystemService(Context.NPU_SERVICE)      # an NpuManager
    await npu.requestCanLoadModel(request, callback, context.getMainExecutor())

The app learns its identity only from the system (the binder's calling uid as the
servicemanager recorded it at launch); there is nothing it could claim instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from framework.binder import IllegalStateException, defaultServiceManager
from framework.npumanager import NpuManager, TrioExecutor
from interfaces import services as names
from interfaces.npuemu.server import IActivityManager, IPackageManager, IThermalService

__all__ = ["Context", "open_app_context"]


class Context:
    """``android.content.Context``, the parts an npuemu app uses."""

    NPU_SERVICE = names.NPU_SERVICE
    ACTIVITY_SERVICE = names.ACTIVITY_SERVICE
    PACKAGE_SERVICE = names.PACKAGE_SERVICE
    THERMAL_SERVICE = names.THERMAL_SERVICE

    def __init__(self, runtime: Any, nursery: trio.Nursery, package_name: str | None, services: dict[str, Any]) -> None:
        self._runtime = runtime
        self._nursery = nursery
        self._package_name = package_name
        self._services = services
        self._managers: dict[str, Any] = {}
        self._executor = TrioExecutor(nursery)

    def getPackageName(self) -> str | None:  # noqa: N802
        """This app's package (None for a process that is no installed app)."""
        return self._package_name

    def getUid(self) -> int:  # noqa: N802
        """This process's uid, as the binder knows it (``Process.myUid()``)."""
        return self._runtime.uid

    @property
    def nursery(self) -> trio.Nursery:
        """The app's own nursery: start the app's background tasks here."""
        return self._nursery

    @property
    def runtime(self) -> Any:
        return self._runtime

    def getMainExecutor(self) -> TrioExecutor:  # noqa: N802
        """An executor that runs callbacks as tasks in the app's nursery."""
        return self._executor

    def getSystemService(self, name: str) -> Any:  # noqa: N802
        """The manager of a system service (``NPU_SERVICE``: an ``NpuManager``), or None."""
        if name in self._managers:
            return self._managers[name]
        binder = self._services.get(name)
        if binder is None:
            return None
        if name == self.NPU_SERVICE:
            manager: Any = NpuManager(binder)
        elif name == self.ACTIVITY_SERVICE:
            manager = IActivityManager.asInterface(binder)
        elif name == self.PACKAGE_SERVICE:
            manager = IPackageManager.asInterface(binder)
        elif name == self.THERMAL_SERVICE:
            manager = IThermalService.asInterface(binder)
        else:
            return None
        self._managers[name] = manager
        return manager


@asynccontextmanager
async def open_app_context(runtime: Any, *, timeout: float = 10.0) -> AsyncIterator[Context]:
    """A Context for this process; waits up to ``timeout`` s for system_server's services."""
    sm = defaultServiceManager(runtime)
    services: dict[str, Any] = {}
    for name in (Context.PACKAGE_SERVICE, Context.NPU_SERVICE, Context.ACTIVITY_SERVICE, Context.THERMAL_SERVICE):
        binder = await sm.waitForService(name, int(timeout * 1000))
        if binder is None:
            raise IllegalStateException(f"system service {name!r} did not appear within {timeout:g} s: is system_server up?")
        services[name] = binder
    pm = IPackageManager.asInterface(services[Context.PACKAGE_SERVICE])
    packages = await pm.getPackagesForUid(runtime.uid)
    async with trio.open_nursery() as nursery:
        yield Context(runtime, nursery, packages[0] if packages else None, services)
        nursery.cancel_scope.cancel()
