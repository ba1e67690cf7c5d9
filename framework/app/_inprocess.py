"""Apps as tasks: a launcher for whole-stack tests inside one trio run.

``InProcessLauncher(network, apps)`` is a system_server launcher (see
``framework.server``) that, instead of a real process, starts a *task* with its own
fake pid on the ``MemoryNetwork``: it registers that pid with the servicemanager as
the app's uid (as ``launch_process`` does), opens the app's own binder runtime and
Context, and runs ``apps[package](context)``. Killing it cancels the task, which
closes its runtime: to everybody else, the process died.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import logging

import trio

from framework.binder import defaultServiceManager, open_binder_runtime

from ._context import Context, open_app_context

__all__ = ["InProcessApp", "InProcessLauncher"]

log = logging.getLogger("InProcessLauncher")

AppMain = Callable[[Context], Awaitable[Any]]


class InProcessApp:
    """One app 'process': ``pid``, ``kill()``, ``await wait()``, and its ``context``."""

    def __init__(self, pid: int, package: str) -> None:
        self.pid = pid
        self.package = package
        self.context: Context | None = None
        self.returncode: int | None = None
        self.error: BaseException | None = None
        self._scope = trio.CancelScope()
        self._done = trio.Event()
        self.started = trio.Event()

    def kill(self) -> None:
        self._scope.cancel()

    async def wait(self) -> int | None:
        await self._done.wait()
        return self.returncode


class InProcessLauncher:
    """Launch apps as tasks in ``nursery`` (set it before the first launch)."""

    def __init__(self, network: Any, apps: Mapping[str, AppMain], nursery: trio.Nursery | None = None) -> None:
        self.network = network
        self.apps = dict(apps)
        self.nursery = nursery
        self.launched: dict[str, InProcessApp] = {}

    async def __call__(self, info: Any, runtime: Any) -> InProcessApp:
        main = self.apps.get(info.packageName)
        if main is None:
            raise LookupError(f"no in-process main for {info.packageName}")
        if self.nursery is None:
            raise RuntimeError("InProcessLauncher.nursery is not set")
        pid = self.network.spawn(runtime.pid)
        await defaultServiceManager(runtime).registerProcess(pid, info.uid)
        app = InProcessApp(pid, info.packageName)
        self.launched[info.packageName] = app
        self.nursery.start_soon(self._run, app, main)
        return app

    async def _run(self, app: InProcessApp, main: AppMain) -> None:
        try:
            with app._scope:
                async with open_binder_runtime(network=self.network, pid=app.pid) as rt:
                    async with open_app_context(rt) as context:
                        app.context = context
                        app.started.set()
                        await main(context)
            app.returncode = 0 if not app._scope.cancelled_caught else -9
        except Exception as exc:  # an app crashing is a process dying, not a test framework error
            app.error = exc
            app.returncode = 1
            log.warning("app %s (pid %d) crashed", app.package, app.pid, exc_info=exc)
        finally:
            log.info("app %s (pid %d) exited with %s", app.package, app.pid, app.returncode)
            app._done.set()
