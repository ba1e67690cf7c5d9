"""``npuemu launch APP...``: start sample apps (or your own) through the activity manager."""

from __future__ import annotations

from pathlib import Path

import click

from framework.emulator import _control
from framework.emulator._services import open_shell

from ._common import CliError, run, runtime_dir_option

__all__ = ["launch"]


def _importance(level: str | None) -> int:
    if level is None:
        return 0
    from framework.server._activity import parse_importance

    try:
        return parse_importance(level)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None


@click.command()
@click.argument("apps", nargs=-1, required=True)
@click.option("--importance", "level", default=None,
              help="foreground, foreground_service, visible, perceptible, service, top_sleeping, cached, or a"
              " number (default: what each manifest asks for).")
@runtime_dir_option
def launch(apps: tuple[str, ...], level: str | None, runtime_dir: Path) -> None:
    """Install and start APPs, each its own process, through the activity manager.

    An APP is a sample's folder name under apps/ (camera, assistant, photos, legacy,
    rogue) or a path to a folder holding an AndroidManifest.xml and a main.py.

    \b
    Examples:
      npuemu launch camera photos
      npuemu launch ./myapp --importance visible
    """
    importance = _importance(level)

    async def go() -> list[_control.LaunchedApp]:
        for app in apps:  # a misspelt name fails before the emulator is touched
            _control.resolve_app(app)
        async with open_shell(runtime_dir) as runtime:
            return await _control.launch_apps(runtime, apps, importance)

    for app in run(go):
        from framework.server._activity import importance_name

        click.echo(f"launched {app.package} pid {app.pid} uid {app.uid} ({importance_name(app.importance)})")
