"""Which device a sample app runs its model on, found as an app on a phone finds it.

A phone's NNAPI devices are whatever its vendor's driver registers, so an app never
assumes a name: it enumerates the devices (``getDeviceCount``/``getDevice``), looks at
each one's type (``getType``) and asks which operations of its own model the device
supports (``getSupportedOperationsForDevices``). The samples take the most preferred
type that has a device running every operation of the model: ACCELERATOR (an NPU or a
DSP), then GPU, then OTHER (a vendor's heterogeneous device). Among several of that
type, the one whose ``Capabilities`` promise the best float32 tensor performance
(``execTime``, or ``powerUsage`` for a LOW_POWER app), as NNAPI's own partitioner ranks
devices; the NDK does not show an app these figures, npuemu's device objects do. Ties go
to the first in NNAPI's order. With no such device, the model runs on the CPU device,
which NNAPI always lists.

On the reference driver that is ``emu-npu`` for every sample model (``emu-dsp`` is an
accelerator too, but lacks SOFTMAX and CONV_2D); on the template driver, ``tmpl-npu``.
"""

from __future__ import annotations

from typing import Any

from framework.nn import DeviceType, ExecutionPreference, NeuralNetworksError, OperandType

from ._models import nnapi_models

__all__ = ["PREFERRED_TYPES", "choose_device", "cpu_device", "device_for"]

#: Device types an app would load a model onto, most preferred first.
PREFERRED_TYPES = (DeviceType.ACCELERATOR, DeviceType.GPU, DeviceType.OTHER)


def _enumerate(nn: Any) -> list[Any]:
    return [nn.getDevice(i) for i in range(nn.getDeviceCount())]


def cpu_device(nn: Any) -> Any:
    """The device of type CPU (``nnapi-reference``), which NNAPI lists on every phone."""
    for device in _enumerate(nn):
        if device.getType() == DeviceType.CPU:
            return device
    raise LookupError("NNAPI lists no CPU device")


def _cost(device: Any, preference: ExecutionPreference) -> float:
    info = device.getPerformance(OperandType.TENSOR_FLOAT32)
    return info.powerUsage if preference == ExecutionPreference.LOW_POWER else info.execTime


async def choose_device(
    nn: Any,
    model: Any,
    *,
    types: tuple[DeviceType, ...] = PREFERRED_TYPES,
    preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
) -> Any | None:
    """The driver device to load ``model`` on, or None when no device of ``types`` runs all of it.

    ``model`` is an NNAPI ``Model`` or a ``TfLiteModel`` (then every one of its NNAPI
    partitions must run on the device; one with none runs in the app). A device qualifies when ``getSupportedOperationsForDevices`` says it supports
    every operation of the model; one that cannot answer (its driver died, say) does
    not. The first type of ``types`` with a qualifying device wins; within it, the best
    float32 tensor figure for ``preference``, then NNAPI's enumeration order.
    """
    models = nnapi_models(model)
    if not models:
        return None
    devices = _enumerate(nn)
    for wanted in types:
        able = []
        for device in devices:
            if device.getType() != wanted:
                continue
            try:
                supported = [await nn.getSupportedOperationsForDevices(m, [device]) for m in models]
            except NeuralNetworksError:
                continue
            if all(all(s) for s in supported):
                able.append(device)
        if able:
            return min(able, key=lambda d: _cost(d, preference))  # min keeps the first of equals
    return None


async def device_for(nn: Any, model: Any, report: Any) -> Any:
    """:func:`choose_device`, else the CPU device; the choice goes into the app's report and log."""
    device = await choose_device(nn, model)
    if device is None:
        device = cpu_device(nn)
        why = "no accelerator, GPU or other driver device runs every operation of the model"
    else:
        why = f"the fastest {device.getType().name} that runs every operation of the model"
    report.data["device"] = device.getName()
    report.note("device", f"{device.getName()} ({device.getType().name}): {why}", device=device.getName())
    return device
