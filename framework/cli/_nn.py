"""``npuemu nn``: the NNAPI runtime from the command line.

``npuemu nn plan`` shows how NNAPI would partition a sample model (``--model float``:
``framework.nn.sampleModel``, two float32 branches; ``--model mixed``:
``framework.nn.mixedSampleModel``, quantized convolutions under a float head): which
device runs each operation, the steps, and the operands that cross between steps.

Online (the default), it connects to a running emulator as the shell (uid 2000, as
``adb shell``), discovers the HAL's ``IDevice`` instances as an app would, and asks
each which operations it supports. Nothing is loaded into any device's memory.

``--offline`` needs no emulator: it opens the reference driver in this process
(virtual clock) and uses its device descriptions (names, types, capability tables,
supported operations) as the HAL would serve them. It describes the *reference*
driver only; a vendor driver is seen online, through a booted emulator.
"""

from __future__ import annotations

import click

from ._common import CliError, EXIT_USAGE, run, runtime_dir_option

__all__ = ["nn"]

_PREFERENCES = {"fast": "FAST_SINGLE_ANSWER", "low-power": "LOW_POWER", "sustained": "SUSTAINED_SPEED"}
_MODELS = ("float", "mixed")


def _sample(name: str):
    from framework.nn import mixedSampleModel, sampleModel

    return mixedSampleModel() if name == "mixed" else sampleModel()


@click.group()
def nn() -> None:
    """The NNAPI runtime: devices and compilation plans."""


def _device_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise CliError("--devices needs at least one device name", EXIT_USAGE)
    if len(set(names)) != len(names):
        raise CliError(f"--devices lists a device twice: {value}", EXIT_USAGE)
    return names


def _pick(devices, names: list[str]):
    by_name = {d.name: d for d in devices}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise CliError(f"no device named {', '.join(missing)} (have: {', '.join(by_name)})", EXIT_USAGE)
    return [by_name[n] for n in names]


def _header(devices, chosen) -> str:
    lines = ["devices:"]
    for d in devices:
        mark = "*" if chosen is None or d in chosen else " "
        lines.append(f"  {mark} {d.name:<18} {d.type.name:<12} {d.version}")
    lines.append("  (* = candidate for this compilation)")
    return "\n".join(lines)


async def _online(runtime_dir, model_name, names, preference, enabled):
    from framework.emulator import open_shell
    from framework.nn import open_nn_runtime

    model = _sample(model_name)
    async with open_shell(runtime_dir) as shell, open_nn_runtime(shell, enabledDevices=enabled) as runtime:
        chosen = None if names is None else _pick(runtime.devices, names)
        if chosen is None:
            compilation = runtime.createCompilation(model)
        else:
            compilation = runtime.createCompilationForDevices(model, chosen)
        compilation.setPreference(preference)
        plan = await compilation.partition()
        return _header(runtime.devices, chosen), plan


async def _offline(model_name, names, preference, enabled):
    import re

    from framework.nn import (
        BadDataError,
        DeviceDescriptor,
        DeviceType,
        cpuDevice,
        createPlan,
        createPlanForDevices,
        isValidDeviceName,
        makeCapabilities,
        toAidlModel,
    )
    from npuhal import open_driver

    model = _sample(model_name)
    async with open_driver(clock="virtual") as driver:

        def describe(dev):
            return DeviceDescriptor(
                name=dev.name,
                type=DeviceType(int(dev.type)),
                version=dev.version,
                featureLevel=dev.feature_level,
                capabilities=makeCapabilities(dev.capabilities),
                supportedOperations=lambda hal, n=dev.number: driver.supported_operations(n, toAidlModel(hal)),
            )

        drivers = [describe(d) for d in driver.devices if isValidDeviceName(d.name)]
        if enabled:
            try:
                pattern = re.compile(enabled)
            except re.error as e:
                raise BadDataError(f"--enabled-devices {enabled!r} is not a regular expression: {e}") from None
            drivers = [d for d in drivers if pattern.fullmatch(d.name)]
        devices = [*drivers, cpuDevice()]
        if names is None:
            return _header(devices, None), createPlan(model, drivers, preference=preference, cpu=devices[-1])
        chosen = _pick(devices, names)
        return _header(devices, chosen), createPlanForDevices(model, chosen, preference=preference)


@nn.command()
@click.option("--model", "model_name", type=click.Choice(_MODELS), default="float", show_default=True,
              help="float = two float32 branches; mixed = quantized convolutions under a float head.")
@click.option("--devices", "devices", default=None, metavar="A,B",
              help="Compile for exactly these devices (createForDevices: no CPU fallback).")
@click.option("--preference", type=click.Choice(list(_PREFERENCES)), default="fast", show_default=True,
              help="fast = FAST_SINGLE_ANSWER (execTime), low-power = LOW_POWER (powerUsage), sustained.")
@click.option("--enabled-devices", "enabled", default=None, metavar="REGEX",
              help="Only driver devices whose whole name matches (default: $NPUEMU_NN_ENABLED_DEVICES).")
@click.option("--offline", is_flag=True, help="No emulator: the reference driver's devices, computed here.")
@runtime_dir_option
def plan(model_name, devices, preference, enabled, offline, runtime_dir) -> None:
    """Print how NNAPI partitions a sample model: which operation runs where.

    \b
    Examples:
      npuemu nn plan
      npuemu nn plan --devices emu-npu,emu-dsp --preference low-power
      npuemu nn plan --offline --enabled-devices 'emu-(gpu|dsp)'
      npuemu nn plan --model mixed --offline
    """
    import os

    from framework.nn import ENABLED_DEVICES_ENV, ExecutionPreference, NeuralNetworksError

    names = _device_list(devices)
    pref = ExecutionPreference[_PREFERENCES[preference]]
    enabled = enabled if enabled is not None else os.environ.get(ENABLED_DEVICES_ENV) or None
    try:
        if offline:
            header, result = run(_offline, model_name, names, pref, enabled)
        else:
            header, result = run(_online, runtime_dir, model_name, names, pref, enabled)
    except NeuralNetworksError as e:
        raise CliError(str(e)) from None
    click.echo(header)
    click.echo("")
    click.echo(result.describe())
