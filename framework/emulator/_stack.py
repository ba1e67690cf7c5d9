"""``open_stack``: the whole stack in one process, over the in-memory binder.

::

    async with npuhal.open_driver(clock="virtual") as driver:       # reference or any .so
        async with open_stack(driver, apps={"com.example.cam": main}) as stack:
            await stack.system.activity.start_app("com.example.cam", "foreground")
            async with stack.shell() as shell: ...                  # a shell runtime, uid 2000

The same processes as a booted emulator (a servicemanager, init as uid 0, the HAL
and system_server as uid 1000, apps launched in-process by the activity manager),
each a runtime of its own on one ``MemoryNetwork``: the lab and the tests that need
a whole stack but no OS processes assemble it here, once. ``open_emulator`` is the
same stack as real processes.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

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

__all__ = ["MemoryStack", "open_stack"]


@dataclass
class MemoryStack:
    """What ``open_stack`` yields: the network, init's runtime and the served stack.

    ``hal`` is the HAL's state (``npuhal.Hal``); ``system`` system_server's services
    (``None`` when opened with ``system_server=False``); ``launcher`` starts the apps
    the activity manager launches, as tasks of ``nursery``.
    """

    network: MemoryNetwork
    nursery: trio.Nursery
    init: BinderRuntime
    driver: Driver
    hal: Hal
    launcher: InProcessLauncher
    system: Any = None
    pids: dict[str, int] = field(default_factory=dict)

    async def spawn(self, uid: int) -> int:
        """A new process (a pid, init its parent) recorded with the servicemanager as ``uid``."""
        pid = self.network.spawn(self.network.init_pid)
        await defaultServiceManager(self.init).registerProcess(pid, uid)
        return pid

    def shell(self) -> Any:
        """A shell runtime (uid 2000), as ``npuemu`` commands use: ``async with stack.shell() as rt``."""
        return open_binder_runtime(network=self.network, pid=self.network.spawn(), shell=True)


@asynccontextmanager
async def open_stack(
    driver: Driver,
    *,
    system_server: bool = True,
    apps: Mapping[str, Any] | None = None,
    apps_dir: str | os.PathLike[str] | None = None,
    hal_options: Mapping[str, Any] | None = None,
    system_options: Mapping[str, Any] | None = None,
) -> AsyncIterator[MemoryStack]:
    """Serve the servicemanager, the HAL over ``driver`` and system_server in this process.

    ``driver`` is an open ``npuhal.Driver`` (the caller owns it). ``apps`` maps a
    package name to its in-process main (or app folder) for the launcher;
    ``apps_dir`` is what system_server installs. ``hal_options`` go to
    ``serve_hal``, ``system_options`` to ``serve_system_server``. With
    ``system_server=True`` it returns once the npu service has connected to the HAL.
    Everything stops when the block ends; the block's own exception leaves as itself.
    """
    net = MemoryNetwork()
    async with open_service_nursery() as nursery:
        await nursery.start(functools.partial(serve_servicemanager, network=net))
        async with open_binder_runtime(network=net, pid=net.init_pid) as init:
            launcher = InProcessLauncher(net, dict(apps or {}), nursery)
            pids: dict[str, int] = {}

            sm = defaultServiceManager(init)

            async def hal_process(task_status: Any) -> None:
                async with open_binder_runtime(network=net, pid=pids["hal"]) as rt:
                    await serve_hal(driver, rt, task_status=task_status, **dict(hal_options or {}))

            async def system_process(task_status: Any) -> None:
                async with open_binder_runtime(network=net, pid=pids["system_server"]) as rt:
                    system = await nursery.start(functools.partial(
                        serve_system_server, rt, apps_dir=apps_dir, launcher=launcher, **dict(system_options or {})))
                    task_status.started(system)
                    await trio.sleep_forever()

            pids["hal"] = net.spawn(net.init_pid)
            await sm.registerProcess(pids["hal"], AID_SYSTEM)
            hal = await nursery.start(hal_process)
            stack = MemoryStack(net, nursery, init, driver, hal, launcher, pids=pids)
            if system_server:
                pids["system_server"] = net.spawn(net.init_pid)
                await sm.registerProcess(pids["system_server"], AID_SYSTEM)
                stack.system = await nursery.start(system_process)
                await stack.system.npu.wait_hal_connected()
            yield stack
