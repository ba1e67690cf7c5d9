"""The emulator's interfaces as a client sees them, and the shell's connection.

The CLI and the recorder reach the HAL and system_server only through binder
interfaces, compiled from the ``.aidl`` files into ``interfaces``, as any client of a
service would; they never import the packages that serve them.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import interfaces.services as services
from framework.binder import (
    BinderRuntime,
    DeadObjectException,
    SecurityException,
    defaultServiceManager,
    open_binder_runtime,
)

from ._errors import EmulatorNotRunningError
from ._paths import RuntimeFiles, resolve_runtime_dir

__all__ = [
    "HAL_CONTROL",
    "get_service",
    "open_shell",
]

HAL_CONTROL = services.HAL_CONTROL
IDEVICE_PREFIX = services.NN_DEVICE_PREFIX


async def get_service(runtime: BinderRuntime, name: str, interface: type) -> Any:
    """``interface.asInterface`` of service ``name``; EmulatorNotRunningError if it is absent."""
    binder = await defaultServiceManager(runtime).checkService(name)
    if binder is None:
        raise EmulatorNotRunningError(f"service {name} is not running in {runtime.network.runtime_dir}")
    return interface.asInterface(binder)


@asynccontextmanager
async def open_shell(runtime_dir: str | os.PathLike[str] | None = None) -> AsyncIterator[BinderRuntime]:
    """A binder runtime as the shell (uid 2000), as ``adb shell`` is, in a running emulator.

    The check every command makes: if no servicemanager answers in the directory (never
    booted, shut down, or what a killed emulator left), EmulatorNotRunningError, said as
    :meth:`RuntimeFiles.not_running` says it.
    """
    files = RuntimeFiles(resolve_runtime_dir(runtime_dir))
    if not files.root.is_dir():
        raise files.not_running()  # (and no directory made for it)
    opened = False
    try:
        async with open_binder_runtime(files.root, shell=True) as runtime:
            opened = True
            yield runtime
    except (SecurityException, DeadObjectException, ConnectionError, FileNotFoundError):
        if opened:  # the body's own error: not ours to rename
            raise
        raise files.not_running() from None
