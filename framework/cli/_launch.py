"""``npuemu launch APP...``: start sample apps (or your own) and wait until they are up."""

from __future__ import annotations

from pathlib import Path

import click

from framework import emulator
from framework.emulator import open_shell
from framework.server import importance_name, parse_importance

from ._common import EXIT_USAGE, CliError, run, runtime_dir_option

__all__ = ["launch"]

#: How long each app may take to come up before `launch` gives up waiting.
DEFAULT_WAIT_S = 30.0


def importance_arg(level: str | None) -> int:
    """An importance a user typed (name or number), 0 for none given; bad usage otherwise."""
    if level is None:
        return 0
    try:
        return parse_importance(level)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


@click.command()
@click.argument("apps", nargs=-1, required=True)
@click.option("--importance", "level", default=None,
              help="foreground, foreground_service, visible, perceptible, service, top_sleeping, cached, or a"
              " number (default: what each manifest asks for).")
@click.option("--timeout", "wait_s", type=click.FloatRange(min=0), default=DEFAULT_WAIT_S, show_default=True,
              help="Seconds to wait for each app to come up.")
@runtime_dir_option
def launch(apps: tuple[str, ...], level: str | None, wait_s: float, runtime_dir: Path) -> None:
    """Install and start APPs, each its own process, through the activity manager.

    An APP is a sample's folder name under apps/ (camera, assistant, photos, legacy,
    rogue) or a path to a folder holding an AndroidManifest.xml and a main.py.

    Waits, as `am start -W` does, until each app is up (its main.py loaded and its
    main(context) waiting at its first await). An app that crashes before (no main.py,
    a syntax error, an exception) is reported with its cause, and the exit status is 1;
    its traceback is in `npuemu logcat --pid PID`.

    \b
    Examples:
      npuemu launch camera photos
      npuemu launch ./myapp --importance visible
    """
    importance = importance_arg(level)

    async def go() -> list[emulator.LaunchedApp]:
        for app in apps:  # a misspelt name fails before the emulator is touched
            emulator.resolve_app(app)
        async with open_shell(runtime_dir) as runtime:
            return await emulator.launch_apps(runtime, apps, importance, wait_s=wait_s)

    failures = []
    for app in run(go):
        failure = emulator.describe_start(app)
        if failure is None:
            click.echo(f"launched {app.package} pid {app.pid} uid {app.uid} ({importance_name(app.importance)})"
                       f" in {app.start.totalTimeMs} ms")
        else:
            failures.append(failure)
    for failure in failures[:-1]:
        click.echo(f"npuemu: error: {failure}", err=True)
    if failures:
        raise CliError(failures[-1])
