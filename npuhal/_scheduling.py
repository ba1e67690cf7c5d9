"""``android.hardware.npu.IScheduling/default``: the framework's hold on the driver.

Only the system uid (1000) and root (0) may call it: the ``npu`` service in
system_server is its one client, and a config decides who may touch the NPU at all.
Configs are validated by the driver itself (all or nothing: a priority out of range
or a uid named twice is ``IllegalArgumentException``, ``EX_ILLEGAL_ARGUMENT``, and
nothing changes).  The callback's events come from ``Hal``'s pump and debouncer.
"""

from __future__ import annotations

import logging
from typing import Any

from framework.binder import IllegalArgumentException
from interfaces.android.hardware.npu import IScheduling, SchedulingConfig

from ._errors import NpuValueError
from ._hal import Hal, require_system

__all__ = ["Scheduling"]

log = logging.getLogger("android.hardware.npu")


def driver_configs(configs: Any) -> list[SchedulingConfig]:
    """The AIDL SchedulingConfig list, checked for nulls: the driver takes it as it is."""
    if configs is None:
        raise IllegalArgumentException("configs must not be null")
    out = list(configs)
    if any(c is None for c in out):
        raise IllegalArgumentException("a null SchedulingConfig")
    return out


class Scheduling(IScheduling.Stub):
    """The IScheduling service of one :class:`Hal`."""

    def __init__(self, hal: Hal) -> None:
        super().__init__()
        self._hal = hal

    async def setSchedulingConfigs(self, configs: Any) -> None:  # noqa: N802
        require_system("setSchedulingConfigs")
        try:
            self._hal.driver.set_scheduling_configs(driver_configs(configs))
        except NpuValueError as exc:
            raise IllegalArgumentException(str(exc)) from None
        log.info("scheduling configs replaced: %d uid(s)", len(configs))

    async def updateSchedulingConfigs(self, configs: Any) -> None:  # noqa: N802
        require_system("updateSchedulingConfigs")
        try:
            self._hal.driver.update_scheduling_configs(driver_configs(configs))
        except NpuValueError as exc:
            raise IllegalArgumentException(str(exc)) from None
        log.debug("scheduling configs updated: uids %s", [c.uid for c in configs])

    async def setCallback(self, callback: Any) -> None:  # noqa: N802
        require_system("setCallback")
        self._hal.set_callback(callback)
