"""The emulator's errors: one base class, each subclass also the builtin it resembles.

The CLI turns any :class:`EmulatorError` into one line on stderr and a non-zero exit;
a caller of the library catches either the base class or the builtin.
"""

from __future__ import annotations

import signal

__all__ = [
    "BootError",
    "BootInterruptedError",
    "EmulatorAlreadyRunningError",
    "EmulatorError",
    "EmulatorNotRunningError",
    "NoSuchAppError",
]


class EmulatorError(Exception):
    """Base of every error the emulator's orchestration raises."""


class EmulatorNotRunningError(EmulatorError, ConnectionError):
    """No emulator answers in the runtime directory (never booted, or shut down)."""


class EmulatorAlreadyRunningError(EmulatorError, FileExistsError):
    """An emulator already runs in this runtime directory."""


class BootError(EmulatorError, RuntimeError):
    """A process of the stack died or did not register its services in time."""


class BootInterruptedError(BootError):
    """A stop signal (SIGTERM, a Ctrl-C) arrived during the boot; what it had started is stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"boot interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class NoSuchAppError(EmulatorError, LookupError):
    """An app named on the command line is neither under apps/ nor a folder with a manifest."""
