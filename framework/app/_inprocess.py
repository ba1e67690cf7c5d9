"""Apps as tasks: a launcher for whole-stack tests inside one trio run.

``InProcessLauncher(network, apps)`` is a system_server launcher (see
``framework.server``) that, instead of a real process, starts a *task* with its own
fake pid on the ``MemoryNetwork``: it registers that pid with the servicemanager as
the app's uid (as ``launch_process`` does), opens the app's own binder runtime and
runs the app as the real process does (``_activity_thread``: a Context,
``apps[package](context)``, up or crashed told to the activity manager). An
``apps`` value may also be an app folder, loaded as the real process loads it.
Killing it cancels the task, which closes its runtime: to everybody else, the process
died.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from framework.binder import defaultServiceManager, open_binder_runtime

from ._activity_thread import run_app_process
from ._context import Context
from ._main import load_app_main

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

    async def _run(self, app: InProcessApp, main: AppMain | str | os.PathLike) -> None:
        # A path is an app folder, loaded as the real process loads it (a missing
        # main.py or a syntax error then crashes the app at start, as it would there).
        load = (lambda: load_app_main(main)) if isinstance(main, (str, os.PathLike)) else (lambda: main)

        def keep(context: Context) -> None:
            app.context = context
            app.started.set()

        try:
            with app._scope:
                async with open_binder_runtime(network=self.network, pid=app.pid) as rt:
                    app.error = await run_app_process(rt, load, name=app.package, on_context=keep)
            app.returncode = -9 if app._scope.cancelled_caught else (0 if app.error is None else 1)
        except Exception as exc:  # its runtime failed: a process dying, not a test framework error
            app.error, app.returncode = exc, 1
            log.warning("app %s (pid %d) crashed", app.package, app.pid, exc_info=exc)
        finally:
            log.info("app %s (pid %d) exited with %s", app.package, app.pid, app.returncode)
            app._done.set()
