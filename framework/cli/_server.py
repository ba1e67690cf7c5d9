"""``npuemu dumpsys``, ``npuemu cmd npu ...`` and ``npuemu am ...``: the shell's view of system_server.

Each command connects to the running emulator as the shell (uid 2000, through the
shell token of the runtime directory, as ``adb shell`` does), makes one or two binder
calls and prints what comes back. The work is the services' own (``dumpsys`` output
is written by each service, ``cmd npu`` is parsed by the npu service, as AOSP's
``handleShellCommand``), so these commands stay thin: parse, call, print, and turn
a refusal into one line on stderr and exit status 1 (2 for a usage error)::

    npuemu dumpsys npu --json
    npuemu cmd npu set-budget-policy --max-budget 6 --weights 1,2,4
    npuemu am set-importance com.example.npuemu.camera cached
    npuemu am kill com.example.npuemu.camera
    npuemu am launch com.example.npuemu.camera --importance foreground

The runtime directory is resolved as every command resolves it (``--runtime-dir``,
the root group's, ``$NPUEMU_RUNTIME_DIR``, the default). Exit statuses are
``_common``'s: 1 a refusal, 2 bad usage, 3 no emulator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from framework.binder import defaultServiceManager
from framework.emulator import HAL_CONTROL, open_shell, resolve_runtime_dir
from framework.server import NPU_SHELL_HELP
from interfaces.android.npumanager import INpuManager
from interfaces.npuemu.hal import IHalControl
from interfaces.npuemu.server import IActivityManager, IPackageManager, IThermalService
from interfaces.services import ACTIVITY_SERVICE, NPU_SERVICE, PACKAGE_SERVICE, THERMAL_SERVICE

from ._common import EXIT_NOT_RUNNING, EXIT_USAGE, CliError, run, runtime_dir_option
from ._launch import importance_arg

SERVICES = {
    NPU_SERVICE: INpuManager,
    ACTIVITY_SERVICE: IActivityManager,
    PACKAGE_SERVICE: IPackageManager,
    THERMAL_SERVICE: IThermalService,
}


#: The vendor HAL's own dump (``lshal debug`` on a phone), through its private interface.
HAL_DUMP = "hal"


async def _hal_dump(rt: Any) -> str:
    binder = await defaultServiceManager(rt).checkService(HAL_CONTROL)
    if binder is None:
        raise CliError(f"{HAL_CONTROL} is not running (is the HAL up?)", EXIT_NOT_RUNNING)
    return await IHalControl.asInterface(binder).dump()


async def _service(rt: Any, name: str) -> Any:
    binder = await defaultServiceManager(rt).checkService(name)
    if binder is None:
        raise CliError(f"service {name!r} is not running (is system_server up?)", EXIT_NOT_RUNNING)
    return SERVICES[name].asInterface(binder)


def _run_as_shell(runtime_dir: Path, body: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``body(runtime)`` as the shell; what a user can cause becomes one clear line."""

    async def session() -> Any:
        async with open_shell(runtime_dir) as rt:
            return await body(rt)

    return run(session)


@click.command()
@click.argument("service", required=False, type=click.Choice(sorted(SERVICES) + [HAL_DUMP]))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (system_server's services).")
@click.option("--page", type=click.IntRange(min=0), default=None, metavar="N",
              help="npu: which page of requests to list (0 first; the dump says how many there are).")
@runtime_dir_option
def dumpsys(service: str | None, as_json: bool, page: int | None, runtime_dir: Path) -> None:
    """Print a system service's state (all of them without SERVICE).

    `hal` is the vendor HAL's own dump: the driver's devices, channels and memory, the
    callback and the events it sent or dropped, the prepared models per uid (text only).

    Example: npuemu dumpsys npu --json
    """
    if service == HAL_DUMP and as_json:
        raise CliError("the HAL's dump is text only: drop --json", EXIT_USAGE)
    if page is not None and service != NPU_SERVICE:
        raise CliError("--page is for dumpsys npu", EXIT_USAGE)
    names = [service] if service else [*SERVICES] + ([] if as_json else [HAL_DUMP])
    args = (["--json"] if as_json else []) + ([] if page is None else ["--page", str(page)])

    async def one(rt: Any, name: str) -> str:
        if name == HAL_DUMP:
            return await _hal_dump(rt)
        return await (await _service(rt, name)).dump(args)

    async def body(rt: Any) -> list[tuple[str, str]]:
        return [(name, await one(rt, name)) for name in names]

    for name, text in _run_as_shell(runtime_dir, body):
        if len(names) > 1 and not as_json:
            click.echo(f"-------------------------------------------------------------------------------\nDUMP OF SERVICE {name}:")
        click.echo(text, nl=False)


#: The service shell commands' own help, answered here so that it needs no emulator.
SHELL_HELP = {NPU_SERVICE: NPU_SHELL_HELP}


def _split_own_options(args: tuple[str, ...]) -> tuple[list[str], str | None, bool]:
    """``args`` after SERVICE without npuemu's own options: (the service's args, a
    ``--runtime-dir`` found among them, whether ``-h``/``--help`` was)."""
    rest: list[str] = []
    runtime_dir: str | None = None
    wants_help = False
    it = iter(args)
    for arg in it:
        if arg == "--runtime-dir":
            runtime_dir = next(it, None)
            if runtime_dir is None:
                raise CliError("--runtime-dir needs a directory", EXIT_USAGE)
        elif arg.startswith("--runtime-dir="):
            runtime_dir = arg.partition("=")[2]
        elif arg in ("-h", "--help"):
            wants_help = True
        else:
            rest.append(arg)
    return rest, runtime_dir, wants_help


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("service", type=click.Choice(sorted(SHELL_HELP)))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@runtime_dir_option
@click.pass_context
def cmd(ctx: click.Context, service: str, args: tuple[str, ...], runtime_dir: Path) -> None:
    """Run a service's shell command: npu set-status-quo-policy | set-budget-policy
    [--max-budget N] [--weights A,B,C] | set-turn-taking-policy | set-unload-deadline MS | info | help.

    The arguments after SERVICE go to the service, except npuemu's own --runtime-dir
    DIR (anywhere on the line) and -h/--help (the service's commands, no emulator
    needed).

    Example: npuemu cmd npu set-budget-policy --max-budget 6
    """
    service_args, late_dir, wants_help = _split_own_options(args)
    if wants_help:
        click.echo(f"Usage: npuemu cmd [--runtime-dir DIR] {service} COMMAND [ARGS]...\n")
        click.echo(SHELL_HELP[service], nl=False)
        return
    if late_dir is not None:
        late = resolve_runtime_dir(late_dir)
        given = ctx.get_parameter_source("runtime_dir") is click.core.ParameterSource.COMMANDLINE
        if given and late != runtime_dir:
            raise CliError(f"--runtime-dir given twice ({runtime_dir} and {late}): give it once", EXIT_USAGE)
        runtime_dir = late

    async def body(rt: Any) -> str:
        return await (await _service(rt, service)).shellCommand(service_args)

    click.echo(_run_as_shell(runtime_dir, body), nl=False)


@click.group()
def am() -> None:
    """The activity manager: launch and kill apps, set their importance."""


@am.command("set-importance")
@click.argument("package")
@click.argument("level")
@runtime_dir_option
def set_importance(package: str, level: str, runtime_dir: Path) -> None:
    """Set a running app's importance (foreground, visible, service, cached... or 100..400).

    Example: npuemu am set-importance com.example.npuemu.camera cached
    """
    importance = importance_arg(level)

    async def body(rt: Any) -> None:
        await (await _service(rt, ACTIVITY_SERVICE)).setImportance(package, importance)

    _run_as_shell(runtime_dir, body)
    click.echo(f"{package}: importance {importance}")


@am.command("kill")
@click.argument("package")
@runtime_dir_option
def kill(package: str, runtime_dir: Path) -> None:
    """Kill an app's process (the npu service frees what it held).

    Example: npuemu am kill com.example.npuemu.camera
    """

    async def body(rt: Any) -> None:
        await (await _service(rt, ACTIVITY_SERVICE)).killApp(package)

    _run_as_shell(runtime_dir, body)
    click.echo(f"killed {package}")


@am.command("launch")
@click.argument("package")
@click.option("--importance", default=None, help="Start at this importance (default: the manifest's).")
@runtime_dir_option
def launch(package: str, importance: str | None, runtime_dir: Path) -> None:
    """Start an installed app's process.

    Example: npuemu am launch com.example.npuemu.camera --importance visible
    """
    level = importance_arg(importance)

    async def body(rt: Any) -> int:
        return await (await _service(rt, ACTIVITY_SERVICE)).startApp(package, level)

    pid = _run_as_shell(runtime_dir, body)
    click.echo(f"started {package} as pid {pid}")


