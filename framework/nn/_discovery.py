"""Device listing as the NDK presents it: drivers first, then ``nnapi-reference``.

Pure list logic over :class:`DeviceDescriptor` values; finding the HAL's IDevice
instances through the servicemanager is the runtime's job, which then calls
:func:`listDevices` with what it found.

``enabledDevices`` is npuemu's counterpart of a debug property limiting the drivers an
app sees: a regular expression that a driver's whole name must match
(``re.fullmatch``, so ``qti-.*`` keeps ``qti-dsp`` and ``qti-gpu``). The CPU device is
always listed, as on Android, where the reference device cannot be switched off by
such a filter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ._errors import BadDataError
from ._partition import DeviceDescriptor, _check_devices, referenceCpuDevice


def isValidDeviceName(name: str) -> bool:
    """NNAPI VTS's rule for an IDevice instance name: ``{VENDOR}-{DEVICE_NAME}``.

    Exactly one '-', neither first nor last (``qti-dsp``, ``nnapi-sample_float_fast``).
    """
    return isinstance(name, str) and name.count("-") == 1 and not name.startswith("-") and not name.endswith("-")


def listDevices(
    driverDevices: Sequence[DeviceDescriptor],
    *,
    enabledDevices: str | None = None,
    cpu: DeviceDescriptor | None = None,
) -> tuple[DeviceDescriptor, ...]:
    """What ``getDeviceCount``/``getDevice`` enumerate, in order.

    Drivers keep the order given (the HAL's registration order), filtered by the
    ``enabledDevices`` regular expression when set; the CPU device comes last. A
    driver with an invalid instance name, two drivers of one name, one that takes the
    CPU device's name, or a pattern that does not compile, is ``BAD_DATA``.
    """
    cpu = cpu if cpu is not None else referenceCpuDevice()
    drivers = _check_devices("listDevices", driverDevices, allowEmpty=True)
    for d in drivers:
        if not isValidDeviceName(d.name):
            raise BadDataError(f"listDevices: {d.name!r} is not a {{VENDOR}}-{{DEVICE_NAME}} instance name")
        if d.name == cpu.name:
            raise BadDataError(f"listDevices: a driver may not be named {cpu.name}, the CPU device's name")
    if enabledDevices is not None:
        try:
            pattern = re.compile(enabledDevices)
        except (re.error, TypeError) as e:
            raise BadDataError(f"listDevices: enabledDevices {enabledDevices!r} is not a regular expression: {e}") from None
        drivers = [d for d in drivers if pattern.fullmatch(d.name)]
    return (*drivers, cpu)


def getDevice(devices: Sequence[DeviceDescriptor], index: int) -> DeviceDescriptor:
    """``ANeuralNetworks_getDevice``: an index past the count is ``BAD_DATA``."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise BadDataError(f"getDevice: a device index is an int, not {index!r}")
    if not 0 <= index < len(devices):
        raise BadDataError(f"getDevice: index {index} is out of range ({len(devices)} devices)")
    return devices[index]
