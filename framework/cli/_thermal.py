"""``npuemu thermal set SEVERITY | reset | status``: the die's heat, as the thermal HAL sees it.

``set`` is a thermal override, as ``cmd thermalservice override-status`` on a phone: the
die is held in the band until ``reset`` (``cmd thermalservice reset``) releases it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from framework import emulator
from framework.emulator import open_shell
from interfaces.android.hardware.thermal import ThrottlingSeverity

from ._common import CliError, run, runtime_dir_option

__all__ = ["thermal"]


def _print(status: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(status, indent=1))
        return
    click.echo(f"severity     {status['severity_name']} ({status['severity']})")
    click.echo(f"temperature  {status['temperature_c']:.1f} C")
    if status.get("held"):
        click.echo("override     held (npuemu thermal reset releases it)")
    if "thermal_service_status" in status:
        sev = status["thermal_service_status"]
        click.echo(f"service      {emulator.enum_name(ThrottlingSeverity, sev)} (what system_server follows)")
    bands = ", ".join(f"{name.lower()} {t:.1f}" for name, t in status["thresholds_c"].items())
    click.echo(f"thresholds   {bands}")


@click.group()
def thermal() -> None:
    """The NPU die's thermal state.

    \b
    Examples:
      npuemu thermal status
      npuemu thermal set severe
      npuemu thermal reset
    """


@thermal.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@runtime_dir_option
def thermal_status(as_json: bool, runtime_dir: Path) -> None:
    """Print the die's severity, temperature and thresholds.

    Example: npuemu thermal status --json
    """

    async def go() -> dict:
        async with open_shell(runtime_dir) as runtime:
            return await emulator.thermal_status(runtime)

    _print(run(go), as_json)


@thermal.command("set")
@click.argument("severity")
@click.option("--json", "as_json", is_flag=True, help="Print the new state as JSON.")
@runtime_dir_option
def thermal_set(severity: str, as_json: bool, runtime_dir: Path) -> None:
    """Hold the die in SEVERITY's band (none light moderate severe critical emergency shutdown, or 0-6).

    A thermal override, as `cmd thermalservice override-status` on a phone: the die
    neither heats with load nor cools at rest, so the driver throttles and system_server
    follows that severity until `npuemu thermal reset` (or another `set`).

    Example: npuemu thermal set critical
    """
    try:
        value = emulator.parse_severity(severity)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None

    async def go() -> dict:
        async with open_shell(runtime_dir) as runtime:
            return await emulator.set_thermal_severity(runtime, value)

    _print(run(go), as_json)


@thermal.command("reset")
@click.option("--json", "as_json", is_flag=True, help="Print the state as JSON.")
@runtime_dir_option
def thermal_reset(as_json: bool, runtime_dir: Path) -> None:
    """Release `thermal set`'s override: the die heats and cools again from where it was.

    As `cmd thermalservice reset` on a phone; harmless when nothing is held.

    Example: npuemu thermal reset
    """

    async def go() -> dict:
        async with open_shell(runtime_dir) as runtime:
            return await emulator.reset_thermal(runtime)

    _print(run(go), as_json)
