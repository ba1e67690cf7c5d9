"""``serve_hal``: the vendor HAL's services over one driver, registered with the servicemanager.

The assembly of the HAL process: one :class:`~npuhal._hal.Hal` (the state the
services share) and its tasks, then the services over it (``_device``'s ``IDevice``
per driver device, ``_control``'s ``IHalControl``, ``_scheduling``'s
``IScheduling``). It sits above all of them, so none of them imports it.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import trio

from framework.binder import defaultServiceManager

from ._control import HalControl
from ._device import NnDevice
from ._hal import (
    CONTROL_INSTANCE,
    DEFAULT_HANG_TIMEOUT_MS,
    DEFAULT_THERMAL_THRESHOLDS_C,
    DEVICE_PREFIX,
    SCHEDULING_INSTANCE,
    Hal,
    valid_instance_name,
)
from ._scheduling import Scheduling

__all__ = ["serve_hal"]

log = logging.getLogger("android.hardware.npu")


async def serve_hal(
    driver: Any,
    runtime: Any,
    *,
    thermal_thresholds_c: Any = None,
    hang_timeout_ms: float | None = DEFAULT_HANG_TIMEOUT_MS,
    task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the vendor HAL over ``driver`` in ``runtime`` until cancelled.

    Registers ``IScheduling/default``, one ``IDevice/<name>`` per validly named driver
    device (a bad name is logged and skipped), and ``npuemu.hal.IHalControl/default``
    with the runtime's servicemanager, then ``task_status.started(hal)`` with the
    :class:`Hal`.  ``thermal_thresholds_c`` are the ones the driver was opened with
    (default: the C layer's), for ``setThermalSeverity``.  ``hang_timeout_ms`` is the
    watchdog's patience with a channel that makes no progress, in emulated ms
    (``None``: no watchdog).

    The servicemanager has no removeService: the services leave its registry when
    this process's runtime closes (binder death), which is what a clean shutdown
    does.  Leaving this function does not close the driver; its owner does.
    """
    thresholds = thermal_thresholds_c or getattr(driver, "thermal_thresholds_c", None) or DEFAULT_THERMAL_THRESHOLDS_C
    if len(thresholds) != 6 or any(not math.isfinite(t) for t in thresholds):
        raise ValueError(f"thermal_thresholds_c needs six finite temperatures, got {thresholds!r}")
    sm = defaultServiceManager(runtime)
    async with trio.open_nursery() as nursery:
        hal = Hal(driver, runtime, nursery, thermal_thresholds_c=thresholds)
        nursery.start_soon(hal._pump)
        nursery.start_soon(hal._flusher)
        nursery.start_soon(hal._sender)
        nursery.start_soon(hal._listener_sender)
        if driver.clock == "virtual":
            nursery.start_soon(hal._follow_virtual_clock)
        if hang_timeout_ms is not None:
            if not (hang_timeout_ms > 0 and math.isfinite(hang_timeout_ms)):
                raise ValueError(f"hang_timeout_ms must be a positive number or None, not {hang_timeout_ms!r}")
            nursery.start_soon(hal._watchdog, float(hang_timeout_ms))
        for device in driver.devices:
            if not valid_instance_name(device.name):
                log.error(
                    "driver device %d is named %r, not {VENDOR}-{DEVICE_NAME} with exactly one '-': not registered",
                    device.number,
                    device.name,
                )
                continue
            service = NnDevice(hal, device)
            hal.devices[device.number] = service
            hal.device_names[device.number] = device.name
        for number, service in hal.devices.items():
            await sm.addService(DEVICE_PREFIX + hal.device_names[number], service, False, 0)
        await sm.addService(CONTROL_INSTANCE, HalControl(hal), False, 0)
        # IScheduling last: whoever waits for it (init, the npu service)
        # then finds every other service already there.
        await sm.addService(SCHEDULING_INSTANCE, Scheduling(hal), False, 0)
        log.info(
            "serving IScheduling/default, IHalControl/default and %d IDevice(s): %s",
            len(hal.devices),
            ", ".join(hal.device_names.values()),
        )
        task_status.started(hal)
        await trio.sleep_forever()
