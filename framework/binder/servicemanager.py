"""``python -m framework.binder.servicemanager --runtime-dir DIR``: the registry process.

The process that runs this is the servicemanager; its parent is init (uid 0).
It prints ``ready`` on stdout once it serves, so a parent can wait for that line.
``--listen-fd N`` serves the listening socket its parent bound at the servicemanager's
name and handed over as descriptor N (init does, so the name is never free while the
servicemanager restarts), instead of binding the name itself.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys

import click
import trio

from ._isolation import make_non_dumpable
from ._runtime import SERVICEMANAGER_ADDRESS
from ._servicemanager import serve_servicemanager as serve_servicemanager
from ._transport import UnixNetwork

__all__ = ["serve_servicemanager", "main"]


@click.command()
@click.option("--runtime-dir", required=True, type=click.Path(file_okay=False, readable=False), help="The emulator's runtime directory.")
@click.option("--log-level", default="INFO", show_default=True, help="Python logging level.")
@click.option("--listen-fd", type=click.IntRange(min=3), default=None,
              help="Serve this inherited listening socket (bound at the servicemanager's name by the parent).")
def main(runtime_dir: str, log_level: str, listen_fd: int | None) -> None:
    """Serve android.os.IServiceManager in RUNTIME_DIR until killed."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    make_non_dumpable()  # no app may ptrace the registry or read its memory (the shell token)
    inherited = {}
    if listen_fd is not None:
        sock = socket.socket(fileno=listen_fd)
        if sock.family != socket.AF_UNIX or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) != 1:
            raise click.BadParameter(f"descriptor {listen_fd} is not a listening Unix socket", param_hint="--listen-fd")
        sock.set_inheritable(False)
        inherited[SERVICEMANAGER_ADDRESS] = sock

    async def run() -> None:
        network = UnixNetwork(runtime_dir, inherited=inherited)
        async with trio.open_nursery() as nursery:
            await nursery.start(
                functools.partial(serve_servicemanager, network=network, init_pid=os.getppid())
            )
            print("ready", flush=True)

    try:
        trio.run(run)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
