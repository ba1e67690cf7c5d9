"""Nurseries whose errors leave as themselves, not wrapped in an ``ExceptionGroup``.

A context manager that owns background tasks (a runtime's readers, a HAL's pump,
an emulator's stages) runs them in a trio nursery, and a trio nursery wraps every
exception that crosses it in an ``ExceptionGroup``: the caller's own
``SecurityException`` or ``AssertionError``, raised in the ``async with`` body, would
reach the caller as a group. ``open_service_nursery`` is the one place that carries
the body's exception out of the nursery by hand: the body ends, the background tasks
are cancelled, and the exception is raised again outside, as itself. A background
task's own failure still leaves as a group (it is not the body's);
``single_exception`` unwraps the common case of one failure in nested groups.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

__all__ = ["open_service_nursery", "single_exception"]


@asynccontextmanager
async def open_service_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery for background tasks; the body's exception leaves it unwrapped.

    When the body ends (returns or raises) the nursery's tasks are cancelled. Cleanup
    the caller needs before that goes in its own ``finally`` inside the body::

        async with open_service_nursery() as nursery:
            thing = Thing(nursery)
            try:
                yield thing
            finally:
                with trio.CancelScope(shield=True):
                    await thing.aclose()
    """
    escaped: BaseException | None = None
    async with trio.open_nursery() as nursery:
        try:
            yield nursery
        except BaseException as exc:
            escaped = exc
        finally:
            nursery.cancel_scope.cancel()
    if escaped is not None:
        try:
            raise escaped
        finally:
            escaped = None  # no reference cycle through the traceback


def single_exception(exc: BaseException) -> BaseException:
    """The one exception inside nested one-exception groups, else ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
