"""``python -m framework.binder.servicemanager --runtime-dir DIR``: the registry process.

The process that runs this is the servicemanager; its parent is init (uid 0).
It prints ``ready`` on stdout once it serves, so a parent can wait for that line.
"""

from __future__ import annotations

import functools
import logging
import os
import sys

import click
import trio

from ._isolation import make_non_dumpable
from ._servicemanager import serve_servicemanager as serve_servicemanager

__all__ = ["serve_servicemanager", "main"]


@click.command()
@click.option("--runtime-dir", required=True, type=click.Path(file_okay=False, readable=False), help="The emulator's runtime directory.")
@click.option("--log-level", default="INFO", show_default=True, help="Python logging level.")
def main(runtime_dir: str, log_level: str) -> None:
    """Serve android.os.IServiceManager in RUNTIME_DIR until killed."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    make_non_dumpable()  # no app may ptrace the registry or read its memory (the shell token)

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                functools.partial(serve_servicemanager, runtime_dir, init_pid=os.getppid())
            )
            print("ready", flush=True)

    try:
        trio.run(run)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
