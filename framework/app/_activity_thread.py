"""What runs an app in its process, around its code: Android's ActivityThread, in small.

:func:`run_app_process` is the whole life of an app process on its binder runtime,
shared by the real process (``python -m framework.app``) and the in-process launcher
of whole-stack tests:

1. open the app's ``Context`` (who it is, its system services);
2. load its code (``load()``: ``main.py``'s ``main``) and call ``main(context)``;
3. once ``main`` has run to its first await, tell the activity manager the app is up
   (``attachApplication``): what ``npuemu launch`` waits for, as ``am start -W`` does;
4. if anything raises, the app crashes as an Android app does: the traceback goes to
   the log under the app's own pid and the tag ``AndroidRuntime``, one log line per
   traceback line, after ``FATAL EXCEPTION: main`` and ``Process: PACKAGE, PID: N``;
   the activity manager is told (``handleApplicationCrash``, with a ``CrashInfo``) and
   the process exits 1.

A crash before step 3 is a crash *at start*: ``npuemu launch`` reports it with its
cause and fails. One after it is a crash while running: logged and reported the same
way, while ``npuemu launch`` has already returned.
"""

from __future__ import annotations

import inspect
import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from framework.binder import SecurityException, single_exception
from interfaces.npuemu.server import CrashInfo

from ._context import Context, open_app_context

__all__ = ["crash_info", "log_fatal_exception", "run_app_process"]

AppMain = Callable[[Context], Awaitable[Any] | Any]

#: Android's tag for an app's uncaught exception.
crash_log = logging.getLogger("AndroidRuntime")
log = logging.getLogger("ActivityThread")

#: How long a dying app tries to tell the activity manager of its crash.
_REPORT_TIMEOUT_S = 2.0
#: A CrashInfo's stack trace is cut here (a binder transaction has 1 MiB).
_MAX_STACK_TRACE = 64 << 10



def log_fatal_exception(exc: BaseException, process_name: str, pid: int) -> None:
    """The crash as Android logs it: ``FATAL EXCEPTION: main``, the process, the traceback."""
    exc = single_exception(exc)
    crash_log.error("FATAL EXCEPTION: main\nProcess: %s, PID: %d", process_name, pid, exc_info=exc)


def crash_info(exc: BaseException) -> Any:
    """A ``CrashInfo`` parcelable of ``exc``: its class, message, where it was raised."""
    filename, line = "", 0
    if isinstance(exc, SyntaxError):
        filename, line = exc.filename or "", exc.lineno or 0
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            filename, line = frames[-1].filename, frames[-1].lineno or 0
    message = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
    return CrashInfo(
        exceptionClassName=type(exc).__name__,
        exceptionMessage=" ".join(message.split()),
        throwFileName=filename,
        throwLineNumber=line,
        stackTrace="".join(traceback.format_exception(exc))[-_MAX_STACK_TRACE:],
    )


async def run_app_process(
    runtime: Any,
    load: Callable[[], AppMain],
    *,
    name: str,
    on_context: Callable[[Context], None] | None = None,
) -> BaseException | None:
    """Run the app on ``runtime`` until its ``main`` returns; the crash, or None.

    ``load()`` returns the app's ``main`` (it may raise: a missing main.py, a syntax
    error). ``name`` names the process in the crash log until its package is known.
    ``on_context`` sees the Context once it is open (the in-process launcher keeps it).
    """
    process_name = name
    activity = None
    try:
        async with open_app_context(runtime) as context:
            process_name = context.getPackageName() or name
            activity = context.getSystemService(Context.ACTIVITY_SERVICE)
            log.info("app %s (uid %d) pid %d starting", process_name, runtime.uid, runtime.pid)
            if on_context is not None:
                on_context(context)
            await _run_main(context, load, activity)
    except Exception as caught:
        exc = single_exception(caught)
        log_fatal_exception(exc, process_name, runtime.pid)
        if activity is not None:
            with trio.move_on_after(_REPORT_TIMEOUT_S):
                try:
                    await activity.handleApplicationCrash(crash_info(exc))
                except Exception as report_failed:  # system_server gone too: the log has it all
                    crash_log.warning("could not report the crash to the activity manager: %s", report_failed)
        return exc
    return None


async def _run_main(context: Context, load: Callable[[], AppMain], activity: Any) -> None:
    fn = load()
    result = fn(context)
    attached = False

    async def attach() -> None:
        nonlocal attached
        if attached:
            return
        attached = True
        try:
            await activity.attachApplication()
        except SecurityException:  # a process the activity manager did not launch: nobody waits for it
            log.info("not launched by the activity manager; not attaching")

    if not inspect.iscoroutine(result):  # a plain function has run to its end
        if hasattr(result, "__await__"):
            await result
        await attach()
        return

    async def attach_when_waiting() -> None:
        # This task first runs once main has yielded for the first time (or ended).
        if inspect.getcoroutinestate(result) != inspect.CORO_CLOSED:
            await attach()

    context.nursery.start_soon(attach_when_waiting)
    await result
    await attach()  # main returned before its first yield: it was up, and is done
