"""The emulator's interfaces as a client sees them, and the shell's connection.

The CLI and the recorder reach the HAL and system_server only through binder
interfaces, loaded from the ``.aidl`` files (``npuhal/aidl`` for the HAL's,
``framework/aidl`` for system_server's), as any client of a service would. The files
are located without importing the packages that serve them.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from framework.binder import (
    AidlRegistry,
    BinderRuntime,
    SecurityException,
    defaultServiceManager,
    interface_class,
    open_binder_runtime,
)

from ._errors import EmulatorNotRunningError
from ._paths import RuntimeFiles, resolve_runtime_dir

__all__ = [
    "HAL_CONTROL",
    "EmulatorInterfaces",
    "emulator_interfaces",
    "get_service",
    "open_shell",
]

HAL_CONTROL = "npuemu.hal.IHalControl/default"
IDEVICE_PREFIX = "android.hardware.neuralnetworks.IDevice/"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"package {name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


@dataclasses.dataclass(frozen=True)
class EmulatorInterfaces:
    """Interface classes of the services the CLI talks to."""

    registry: AidlRegistry
    IHalControl: type
    IHalListener: type
    IActivityManager: type
    IPackageManager: type
    IThermalService: type
    IDevice: type
    INpuManager: type


@functools.cache
def emulator_interfaces() -> EmulatorInterfaces:
    """Parsed once per process (a memo of a pure function of the installed .aidl files)."""
    registry = AidlRegistry.load(_package_dir("npuhal") / "aidl", _package_dir("framework") / "aidl")
    i = registry.interface
    return EmulatorInterfaces(
        registry=registry,
        IHalControl=interface_class(i("npuemu.hal.IHalControl")),
        IHalListener=interface_class(i("npuemu.hal.IHalListener")),
        IActivityManager=interface_class(i("npuemu.server.IActivityManager")),
        IPackageManager=interface_class(i("npuemu.server.IPackageManager")),
        IThermalService=interface_class(i("npuemu.server.IThermalService")),
        IDevice=interface_class(i("android.hardware.neuralnetworks.IDevice")),
        INpuManager=interface_class(i("android.npumanager.INpuManager")),
    )


async def get_service(runtime: BinderRuntime, name: str, interface: type) -> Any:
    """``interface.asInterface`` of service ``name``; EmulatorNotRunningError if it is absent."""
    binder = await defaultServiceManager(runtime).checkService(name)
    if binder is None:
        raise EmulatorNotRunningError(f"service {name} is not running in {runtime.network.runtime_dir}")
    return interface.asInterface(binder)


@asynccontextmanager
async def open_shell(runtime_dir: str | os.PathLike[str] | None = None) -> AsyncIterator[BinderRuntime]:
    """A binder runtime as the shell (uid 2000), as ``adb shell`` is, in a running emulator."""
    root = resolve_runtime_dir(runtime_dir)
    files = RuntimeFiles(root)
    if not root.is_dir() or files.read_state() is None:
        raise EmulatorNotRunningError(f"no emulator is running in {root} (start one with `npuemu boot`)")
    opened = False
    try:
        async with open_binder_runtime(root, shell=True) as runtime:
            opened = True
            yield runtime
    except (SecurityException, ConnectionError, FileNotFoundError) as exc:
        if opened:  # the body's own error: not ours to rename
            raise
        raise EmulatorNotRunningError(f"cannot reach the emulator in {root}: {exc}") from None
