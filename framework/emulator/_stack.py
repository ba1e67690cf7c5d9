"""``open_stack``: the one way to assemble a stack, as real processes or in one process.

::

    # Real processes (``npuemu boot``, ``demo``, ``vts``, the process tests):
    async with open_stack("build/drivers/my.so", processes=True, runtime_dir=rt) as emu:
        ...                                                         # an Emulator: init, uid 0

    # One process over the in-memory binder (the lab, the in-process tests):
    async with npuhal.open_driver(clock="virtual") as driver:       # reference or any .so
        async with open_stack(driver, apps={"com.example.cam": main}) as stack:
            await stack.system.activity.start_app("com.example.cam", "foreground")
            async with stack.shell() as shell: ...                  # a shell runtime, uid 2000

Both are the same stack: a servicemanager, init as uid 0, the HAL and system_server
(unless ``system_server=False``) as uid 1000, apps the activity manager launches.
With ``processes=True`` each is an OS process that init (this process) boots and
supervises (``_boot``); without, each is a runtime of its own on one
``MemoryNetwork``, apps are launched in-process, and the caller's open driver serves
the HAL.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import trio

from framework.app import InProcessLauncher
from framework.binder import (
    AID_SYSTEM,
    BinderRuntime,
    MemoryNetwork,
    defaultServiceManager,
    open_binder_runtime,
    open_service_nursery,
    serve_servicemanager,
)
from framework.server import serve_system_server
from npuhal import Driver, Hal, serve_hal

from ._boot import BootConfig, Emulator, boot_processes

__all__ = ["MemoryStack", "open_stack"]


@dataclass
class MemoryStack:
    """What ``open_stack`` yields: the network, init's runtime and the served stack.

    ``hal`` is the HAL's state (``npuhal.Hal``; the current one after a restart);
    ``system`` system_server's services (``None`` when opened with
    ``system_server=False``); ``launcher`` starts the apps the activity manager
    launches, as tasks of ``nursery``.
    """

    network: MemoryNetwork
    nursery: trio.Nursery
    init: BinderRuntime
    driver: Driver
    launcher: InProcessLauncher
    hal: Hal | None = None
    system: Any = None
    pids: dict[str, int] = field(default_factory=dict)
    hal_options: Mapping[str, Any] = field(default_factory=dict)
    #: The HAL process's scope, and whether it has ended.
    _hal_process: tuple[trio.CancelScope, trio.Event] | None = field(default=None, init=False, repr=False)

    def kill_hal(self) -> None:
        """The HAL process dies: its runtime closes and every connection to it drops, as
        after a SIGKILL. Nothing restarts it but :meth:`restart_hal`. Does not wait."""
        if self._hal_process is not None:
            self._hal_process[0].cancel()

    async def restart_hal(self) -> None:
        """Kill the HAL (if it lives) and serve a fresh one over the same driver, as a new
        process; returns once it has registered its services."""
        if self._hal_process is not None:
            self.kill_hal()
            await self._hal_process[1].wait()
        await self._start_hal()

    async def _start_hal(self) -> None:
        pid = self.pids["hal"] = await self.spawn(AID_SYSTEM)
        scope, ended = self._hal_process = trio.CancelScope(), trio.Event()

        async def hal_process(task_status: Any) -> None:
            try:
                with scope:
                    async with open_binder_runtime(network=self.network, pid=pid) as rt:
                        await serve_hal(self.driver, rt, task_status=task_status, **self.hal_options)
            finally:
                ended.set()

        self.hal = await self.nursery.start(hal_process)

    async def spawn(self, uid: int) -> int:
        """A new process (a pid, init its parent) recorded with the servicemanager as ``uid``."""
        pid = self.network.spawn(self.network.init_pid)
        await defaultServiceManager(self.init).registerProcess(pid, uid)
        return pid

    def shell(self) -> Any:
        """A shell runtime (uid 2000), as ``npuemu`` commands use: ``async with stack.shell() as rt``."""
        return open_binder_runtime(network=self.network, pid=self.network.spawn(), shell=True)


@overload
def open_stack(
    driver: Driver,
    *,
    processes: Literal[False] = False,
    system_server: bool = True,
    apps_dir: str | os.PathLike[str] | None = None,
    apps: Mapping[str, Any] | None = None,
    hal_options: Mapping[str, Any] | None = None,
    system_options: Mapping[str, Any] | None = None,
) -> AbstractAsyncContextManager[MemoryStack]: ...


@overload
def open_stack(
    driver: str | os.PathLike[str] | None = None,
    *,
    processes: Literal[True],
    system_server: bool = True,
    apps_dir: str | os.PathLike[str] | None = None,
    runtime_dir: str | os.PathLike[str] | None = None,
    config: BootConfig | None = None,
    grace: float = 3.0,
) -> AbstractAsyncContextManager[Emulator]: ...


def open_stack(
    driver: Any = None,
    *,
    processes: bool = False,
    system_server: bool = True,
    apps_dir: str | os.PathLike[str] | None = None,
    apps: Mapping[str, Any] | None = None,
    hal_options: Mapping[str, Any] | None = None,
    system_options: Mapping[str, Any] | None = None,
    runtime_dir: str | os.PathLike[str] | None = None,
    config: BootConfig | None = None,
    grace: float = 3.0,
) -> AbstractAsyncContextManager[Any]:
    """A whole stack (servicemanager, HAL, system_server) for the ``async with`` block.

    Both forms: ``system_server=False`` leaves system_server out (a HAL of one's own);
    ``apps_dir`` is the folder of apps system_server installs.

    ``processes=True``: real processes, booted by this process as init (``_boot``);
    yields an :class:`Emulator`. ``driver`` is a driver ``.so`` (None: the reference
    driver); ``config`` is the rest of the boot (clock, speed, timeouts, extra
    arguments; ``config.driver`` if ``driver`` is not given); ``runtime_dir`` None
    is a temporary directory, removed on exit; ``grace`` is how long each process
    has between SIGTERM and SIGKILL at shutdown. :class:`BootError` if it does not come up.

    ``processes=False``: one process over the in-memory binder; yields a
    :class:`MemoryStack`. ``driver`` is an open ``npuhal.Driver`` (the caller owns
    it); ``apps`` maps a package name to its in-process main (or app folder) for the
    launcher; ``hal_options`` go to ``serve_hal``, ``system_options`` to
    ``serve_system_server``. With system_server it returns once the npu service has
    connected to the HAL.

    Everything stops when the block ends; the block's own exception leaves as itself.
    """
    if processes:
        if apps is not None or hal_options is not None or system_options is not None:
            raise TypeError("apps, hal_options and system_options are for the in-memory stack (processes=False)")
        if driver is not None and not isinstance(driver, (str, os.PathLike)):
            raise TypeError(f"processes=True boots the HAL on a driver .so path (None: the reference driver), not {driver!r}")
        config = config or BootConfig()
        if driver is not None:
            config = dataclasses.replace(config, driver=os.fspath(driver))
        if apps_dir is not None:
            config = dataclasses.replace(
                config, system_server_args=(*config.system_server_args, "--apps-dir", os.fspath(apps_dir)))
        return boot_processes(runtime_dir, config, system_server=system_server, grace=grace)
    if runtime_dir is not None or config is not None:
        raise TypeError("runtime_dir and config are for a stack of real processes (processes=True)")
    if driver is None or isinstance(driver, (str, os.PathLike)):
        raise TypeError("the in-memory stack serves an open driver (npuhal.open_driver); a .so path needs processes=True")
    return _serve_in_memory(driver, system_server=system_server, apps=apps, apps_dir=apps_dir,
                            hal_options=hal_options, system_options=system_options)


@asynccontextmanager
async def _serve_in_memory(
    driver: Driver,
    *,
    system_server: bool,
    apps: Mapping[str, Any] | None,
    apps_dir: str | os.PathLike[str] | None,
    hal_options: Mapping[str, Any] | None,
    system_options: Mapping[str, Any] | None,
) -> AsyncIterator[MemoryStack]:
    """The servicemanager, the HAL over ``driver`` and system_server, served in this process."""
    net = MemoryNetwork()
    async with open_service_nursery() as nursery:
        await nursery.start(functools.partial(serve_servicemanager, network=net))
        async with open_binder_runtime(network=net, pid=net.init_pid) as init:
            launcher = InProcessLauncher(net, dict(apps or {}), nursery)
            stack = MemoryStack(net, nursery, init, driver, launcher, hal_options=dict(hal_options or {}))
            await stack._start_hal()
            if system_server:
                pid = stack.pids["system_server"] = await stack.spawn(AID_SYSTEM)

                async def system_process(task_status: Any) -> None:
                    async with open_binder_runtime(network=net, pid=pid) as rt:
                        system = await nursery.start(functools.partial(
                            serve_system_server, rt, apps_dir=apps_dir, launcher=launcher, **dict(system_options or {})))
                        task_status.started(system)
                        await trio.sleep_forever()

                stack.system = await nursery.start(system_process)
                await stack.system.npu.wait_hal_connected()
            yield stack
