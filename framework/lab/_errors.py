"""The lab's exceptions: one base class, each subclass also the builtin it resembles.

``except LabError`` catches everything the lab raises on purpose; ``except
ValueError`` still catches a bad workload file, as a caller of ``tomllib`` or
``json`` would expect.
"""

from __future__ import annotations

__all__ = ["LabError", "WorkloadError", "LabRunError"]


class LabError(Exception):
    """Base of every error the scheduling lab raises."""


class WorkloadError(LabError, ValueError):
    """A workload file (or dict) that cannot be used.

    The message names the file and the key, e.g.
    ``phone.toml: task[1] (assistant).arrival.rate_hz: must be a number > 0, got -2``.
    """


class LabRunError(LabError, RuntimeError):
    """A run that could not be carried out: no such device, models that do not
    fit, a driver that refused the work or lost it."""
