"""``npuemu logcat``: the emulator's log, as `adb logcat -v threadtime` shows it."""

from __future__ import annotations

from pathlib import Path

import click

from framework import emulator
from framework.emulator import LogFilter, RuntimeFiles

from ._common import CliError, run, runtime_dir_option

__all__ = ["logcat"]


@click.command()
@click.option("-d", "dump", is_flag=True, help="Print the log so far and exit (else follow it, Ctrl-C to stop).")
@click.option("-s", "specs", multiple=True, metavar="TAG[:LEVEL]",
              help="Show only this tag (repeatable), from LEVEL (V D I W E F) up; *:W for every tag.")
@click.option("--pid", "pid", type=int, default=None, metavar="PID",
              help="Show only the lines of process PID (as adb logcat --pid).")
@runtime_dir_option
def logcat(dump: bool, specs: tuple[str, ...], pid: int | None, runtime_dir: Path) -> None:
    """Print every process's log lines: init, servicemanager, the HAL, system_server, apps.

    \b
    Examples:
      npuemu logcat -d                      # everything so far
      npuemu logcat -s NpuManagerService    # follow the npu service
      npuemu logcat -d -s '*:W'             # warnings and errors only
      npuemu logcat -d --pid 4242           # one app's lines (its crash, if any)
    """
    try:
        log_filter = LogFilter.parse(specs, pid)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    if dump:
        lines = run(_read, runtime_dir, log_filter)
        for line in lines:
            click.echo(str(line))
        return

    async def follow() -> None:
        path = RuntimeFiles(runtime_dir).log
        if not path.exists():
            emulator.read_log(runtime_dir)  # raises the not-running error
        async for line in emulator.follow_log(path, log_filter=log_filter):
            click.echo(str(line))

    try:
        run(follow)
    except CliError as exc:
        if exc.exit_code == 130:  # Ctrl-C is how one stops following
            return
        raise


async def _read(runtime_dir: Path, log_filter: LogFilter):
    return emulator.read_log(runtime_dir, log_filter)
