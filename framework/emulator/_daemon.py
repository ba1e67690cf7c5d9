"""The detached init: ``python -m framework.emulator`` (what ``npuemu boot --detach`` starts).

A detached emulator still needs an init that owns its processes: the servicemanager
trusts its parent as root, and only a process's parent may register it. So ``boot
--detach`` starts this module with ``--daemonize`` (it forks once more and runs in a new
session, with stdin and stdout on ``/dev/null``); it boots the stack with ``open_stack(processes=True)``, reports on the file
descriptor given by ``--ready-fd`` (``ok <json state>`` or ``error <message>``), and
then holds the stack until SIGTERM, SIGINT or SIGHUP (``npuemu shutdown`` sends SIGTERM),
when it shuts it down in order and exits 0. A signal during the boot interrupts it and
stops what it had started (``error boot interrupted by SIGTERM``, exit 1).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable

import click
import trio

from ._boot import BootConfig, Emulator
from ._stack import open_stack
from ._errors import BootInterruptedError, EmulatorError

__all__ = ["hold_until_signalled", "main", "serve_until_signalled"]

#: What stops an emulator's init: ``npuemu shutdown``'s SIGTERM, a Ctrl-C, a closed terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def hold_until_signalled(runtime_dir: str | os.PathLike[str], config: BootConfig,
                               on_booted: Callable[[Emulator], None]) -> None:
    """Boot, call ``on_booted``, hold the stack until a stop signal, then shut it down.

    A stop signal during the boot interrupts it at once: what the boot had started is
    stopped, and this raises BootInterruptedError ("boot interrupted by SIGTERM"). The signals
    are taken before anything starts, so none can kill init between two processes it
    starts.
    """
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        received: list[signal.Signals] = []
        arrived = trio.Event()
        booting = trio.CancelScope()
        booted = False

        async def watch() -> None:
            async for sig in signals:
                received.append(signal.Signals(sig))
                if not booted:
                    booting.cancel()  # open_stack stops what the boot had started
                arrived.set()
                return

        failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            with booting:
                try:
                    async with open_stack(processes=True, runtime_dir=runtime_dir, config=config) as emu:
                        booted = True  # no checkpoint since the boot completed: the watcher agrees
                        on_booted(emu)
                        await arrived.wait()
                        emu.log("I", f"{received[0].name} received")
                except Exception as exc:  # noqa: BLE001 - raised below, not as a nursery's group
                    failure = exc
            nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        if not booted:
            raise BootInterruptedError(received[0])


async def serve_until_signalled(runtime_dir: str, config: BootConfig, ready_fd: int | None) -> int:
    """Boot, report on ``ready_fd``, hold until SIGTERM/SIGINT/SIGHUP, shut down. Returns the exit status."""

    def report(text: str) -> None:
        if ready_fd is not None:
            try:
                os.write(ready_fd, (text + "\n").encode())
                os.close(ready_fd)
            except OSError:
                pass

    def booted(emu: Emulator) -> None:
        report("ok " + json.dumps({"runtime_dir": str(emu.runtime_dir), **emu.state()}))

    try:
        await hold_until_signalled(runtime_dir, config, booted)
    except (EmulatorError, OSError, ValueError) as exc:
        report(f"error {' '.join(str(exc).split()) if ready_fd is not None else exc}")
        # Always on stderr too: a detached init's is init.err, which must say why it exited
        # (the ready descriptor is long closed when a running stack fails).
        print(f"npuemu: init exiting: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


@click.command()
@click.option("--runtime-dir", required=True, type=click.Path(file_okay=False))
@click.option("--driver", default=None, type=click.Path(dir_okay=False))
@click.option("--speed", default=1.0, type=float)
@click.option("--clock", default="real", type=click.Choice(["real", "virtual"]))
@click.option("--boot-timeout", default=15.0, type=float)
@click.option("--ready-fd", default=None, type=int, help="Write 'ok STATE' or 'error MESSAGE' here, then close it.")
@click.option("--wipe-data", is_flag=True, help="Forget what earlier boots kept (the app uids).")
@click.option("--daemonize", is_flag=True, help="Fork: the parent returns at once, the child runs in a new session.")
def main(runtime_dir: str, driver: str | None, speed: float, clock: str, boot_timeout: float, ready_fd: int | None,
         wipe_data: bool, daemonize: bool) -> None:
    """Boot an emulator in RUNTIME_DIR and hold it until SIGTERM (the detached init)."""
    if daemonize:
        # The classic double fork: whoever started us reaps our parent at once, and init
        # (this child) is nobody's child to wait for; setsid detaches it from the terminal.
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
    try:
        config = BootConfig(driver=driver, speed=speed, clock=clock, boot_timeout=boot_timeout, wipe_data=wipe_data)
    except (ValueError, OSError) as exc:
        if ready_fd is not None:
            os.write(ready_fd, f"error {exc}\n".encode())
        raise SystemExit(1) from None
    sys.exit(trio.run(serve_until_signalled, runtime_dir, config, ready_fd))
