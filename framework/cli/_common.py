"""What every ``npuemu`` command shares: the runtime directory option and error mapping.

Commands stay thin: parse, call the library inside :func:`run`, print. :func:`run`
turns what a user can cause (no emulator running, no such app, a bad severity, a
binder refusal) into one line on stderr and an exit status, never a traceback:

====  =========================================================
0     success
1     the operation failed (a refusal, a failed check, a dead service)
2     bad usage (click's own, and bad values found later)
3     no emulator runs in the runtime directory
130   interrupted (Ctrl-C)
====  =========================================================

A bug still shows its traceback: only the exception families a user can cause are
mapped.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import trio

from framework.binder import IllegalArgumentException, RemoteException, single_exception
from framework.emulator import (
    BootError,
    EmulatorError,
    EmulatorNotRunningError,
    NoSuchAppError,
    join_emulator_namespace,
    resolve_runtime_dir,
)
from framework.server import NpuPolicy, PolicyLoadError, load_policy, parse_policy_params

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_RUNNING",
    "EXIT_USAGE",
    "CliError",
    "load_npu_policy",
    "mapped_errors",
    "npu_policy_options",
    "runtime_dir_option",
    "run",
]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3
EXIT_INTERRUPTED = 130

T = TypeVar("T")


class CliError(click.ClickException):
    """One line on stderr (``npuemu: error: ...``) and an exit status."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(" ".join(str(message).split()) or "failed")
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"npuemu: error: {self.format_message()}", err=True)


def runtime_dir_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--runtime-dir DIR``, defined once: the emulator a command means.

    The command receives ``runtime_dir`` as a :class:`~pathlib.Path`, resolved as
    ``--runtime-dir``, else the root group's ``--runtime-dir``, else
    ``$NPUEMU_RUNTIME_DIR``, else ``/tmp/npuemu-<uid>/default``. Where a ``userns``
    emulator runs there (a boot that was not root), the command joins its user namespace
    first, as its root (``framework.emulator.join_emulator_namespace``).
    """

    def resolve(ctx: click.Context, _param: click.Parameter, value: str | None) -> Path:
        root = resolve_runtime_dir(value)
        try:
            join_emulator_namespace(root)
        except BootError as exc:
            raise CliError(str(exc)) from None
        return root

    return click.option(
        "--runtime-dir",
        type=click.Path(file_okay=False),
        default=None,
        callback=resolve,
        help="The emulator's runtime directory (default: $NPUEMU_RUNTIME_DIR, else /tmp/npuemu-<uid>/default).",
    )(fn)


def npu_policy_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--npu-policy-file FILE.py:CLASS`` and ``--npu-policy-params JSON``, defined once.

    The command receives ``npu_policy_file`` and ``npu_policy_params`` (strings or
    None); ``load_npu_policy`` turns them into the policy.
    """
    fn = click.option("--npu-policy-params", metavar="JSON", default=None,
                      help="The policy's parameters: a JSON object for its from_params.")(fn)
    return click.option("--npu-policy-file", metavar="FILE.py:CLASS", default=None,
                        help="The npu service's load policy: a framework.server.NpuPolicy subclass in FILE.py.")(fn)


def load_npu_policy(spec: str | None, params: str | None) -> NpuPolicy | None:
    """The policy ``--npu-policy-file``/``--npu-policy-params`` name (None if none); CliError (2) if it will not load."""
    if spec is None:
        if params is not None:
            raise CliError("--npu-policy-params needs --npu-policy-file", EXIT_USAGE)
        return None
    try:
        return load_policy(spec, parse_policy_params(params))
    except PolicyLoadError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _message(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def run(async_fn: Callable[..., Awaitable[T]], *args: Any, clock: Any = None) -> T:
    """``trio.run(async_fn, *args, clock=clock)``, with the user's errors as :class:`CliError`."""
    try:
        return trio.run(async_fn, *args, clock=clock)
    except click.ClickException:
        raise
    except KeyboardInterrupt:
        raise CliError("interrupted", EXIT_INTERRUPTED) from None
    except BaseExceptionGroup as group:
        exc = single_exception(group)
        if exc is group:
            raise
        _raise_mapped(exc)
        raise
    except Exception as exc:
        _raise_mapped(exc)
        raise



def _raise_mapped(exc: BaseException) -> None:
    if isinstance(exc, click.ClickException):
        raise exc
    if isinstance(exc, EmulatorNotRunningError):
        raise CliError(_message(exc), EXIT_NOT_RUNNING) from None
    if isinstance(exc, NoSuchAppError):
        raise CliError(_message(exc), EXIT_USAGE) from None
    if isinstance(exc, EmulatorError):
        raise CliError(_message(exc)) from None
    if isinstance(exc, IllegalArgumentException):  # a service refused the arguments: bad usage, as click's
        raise CliError(_message(exc), EXIT_USAGE) from None
    if isinstance(exc, RemoteException):
        raise CliError(f"{type(exc).__name__}: {_message(exc)}") from None
    if isinstance(exc, (ValueError, LookupError)):
        raise CliError(_message(exc), EXIT_USAGE) from None
    if isinstance(exc, OSError):
        raise CliError(_message(exc)) from None


def mapped_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """Decorate a synchronous command body so its user errors are :class:`CliError`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except click.ClickException:
            raise
        except Exception as exc:
            _raise_mapped(exc)
            raise

    return wrapper

