"""The names the stack's services register under with the servicemanager, defined once.

The HAL registers its instances and system_server its services under these names;
the app side, the emulator, the tools and the tests look them up by the same objects.
Android's conventions: a HAL instance is its interface's descriptor, ``/``, and an
instance name (``default``, or an NN device's ``{vendor}-{device}``); a framework
service has the short name ``Context`` gives it (``Context.NPU_SERVICE`` is ``"npu"``).

A hand-written module of ``interfaces`` (as ``c_enums`` is): the names are vocabulary that
the HAL and the framework share, as the compiled modules beside it are.
"""

from __future__ import annotations

from interfaces.android.hardware.neuralnetworks import IDevice
from interfaces.android.hardware.npu import IScheduling
from interfaces.npuemu.hal import IHalControl

__all__ = [
    "ACTIVITY_SERVICE",
    "HAL_CONTROL",
    "HAL_SCHEDULING",
    "HAL_SERVICES",
    "NN_DEVICE_PREFIX",
    "NPU_SERVICE",
    "PACKAGE_SERVICE",
    "SYSTEM_SERVER_SERVICES",
    "THERMAL_SERVICE",
]

# --- the vendor HAL process ---

HAL_SCHEDULING = f"{IScheduling.DESCRIPTOR}/default"
"""``android.hardware.npu.IScheduling/default``: what the ``npu`` service drives."""

HAL_CONTROL = f"{IHalControl.DESCRIPTOR}/default"
"""``npuemu.hal.IHalControl/default``: the emulator's private knobs on the HAL."""

HAL_SERVICES = (HAL_SCHEDULING, HAL_CONTROL)
"""What every HAL registers, whatever its devices."""

NN_DEVICE_PREFIX = f"{IDevice.DESCRIPTOR}/"
"""An NN device's instance is this prefix and ``{vendor}-{device}``."""

# --- system_server (``Context``'s names) ---

NPU_SERVICE = "npu"
ACTIVITY_SERVICE = "activity"
PACKAGE_SERVICE = "package"
THERMAL_SERVICE = "thermal"

SYSTEM_SERVER_SERVICES = (NPU_SERVICE, PACKAGE_SERVICE, ACTIVITY_SERVICE, THERMAL_SERVICE)
"""What system_server registers."""
