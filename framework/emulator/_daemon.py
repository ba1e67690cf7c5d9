"""The detached init: ``python -m framework.emulator`` (what ``npuemu boot --detach`` starts).

A detached emulator still needs an init that owns its processes: the servicemanager
trusts its parent as root, and only a process's parent may register it. So ``boot
--detach`` starts this module with ``--daemonize`` (it forks once more and runs in a new
session, with stdin and stdout on ``/dev/null``); it boots the stack with :func:`open_emulator`, reports on the file
descriptor given by ``--ready-fd`` (``ok <json state>`` or ``error <message>``), and
then holds the stack until SIGTERM or SIGINT (``npuemu shutdown`` sends SIGTERM),
when it shuts it down in order and exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import click
import trio

from ._boot import BootConfig, open_emulator
from ._errors import EmulatorError

__all__ = ["main", "serve_until_signalled"]


async def serve_until_signalled(runtime_dir: str, config: BootConfig, ready_fd: int | None) -> int:
    """Boot, report on ``ready_fd``, hold until SIGTERM/SIGINT, shut down. Returns the exit status."""

    def report(text: str) -> None:
        if ready_fd is not None:
            try:
                os.write(ready_fd, (text + "\n").encode())
                os.close(ready_fd)
            except OSError:
                pass

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        try:
            async with open_emulator(runtime_dir, config) as emu:
                report("ok " + json.dumps({"runtime_dir": str(emu.runtime_dir), **emu.state()}))
                async for sig in signals:
                    emu.log("I", f"{signal.Signals(sig).name} received")
                    break
        except (EmulatorError, OSError, ValueError) as exc:
            report(f"error {' '.join(str(exc).split()) if ready_fd is not None else exc}")
            if ready_fd is None:
                print(f"npuemu: {exc}", file=sys.stderr)
            return 1
    return 0


@click.command()
@click.option("--runtime-dir", required=True, type=click.Path(file_okay=False))
@click.option("--driver", default=None, type=click.Path(dir_okay=False))
@click.option("--speed", default=1.0, type=float)
@click.option("--clock", default="real", type=click.Choice(["real", "virtual"]))
@click.option("--boot-timeout", default=15.0, type=float)
@click.option("--ready-fd", default=None, type=int, help="Write 'ok STATE' or 'error MESSAGE' here, then close it.")
@click.option("--daemonize", is_flag=True, help="Fork: the parent returns at once, the child runs in a new session.")
def main(runtime_dir: str, driver: str | None, speed: float, clock: str, boot_timeout: float, ready_fd: int | None,
         daemonize: bool) -> None:
    """Boot an emulator in RUNTIME_DIR and hold it until SIGTERM (the detached init)."""
    if daemonize:
        # The classic double fork: whoever started us reaps our parent at once, and init
        # (this child) is nobody's child to wait for; setsid detaches it from the terminal.
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
    try:
        config = BootConfig(driver=driver, speed=speed, clock=clock, boot_timeout=boot_timeout)
    except (ValueError, OSError) as exc:
        if ready_fd is not None:
            os.write(ready_fd, f"error {exc}\n".encode())
        raise SystemExit(1) from None
    sys.exit(trio.run(serve_until_signalled, runtime_dir, config, ready_fd))
