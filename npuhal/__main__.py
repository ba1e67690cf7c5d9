"""``python -m npuhal``: the vendor HAL process.

::

    python -m npuhal [--driver PATH] [--runtime-dir DIR] [--clock real|virtual]
                     [--speed X] [--hang-timeout-ms MS] [--log FILE] [--log-level LEVEL]

Loads the driver (the built-in reference driver unless ``--driver`` names a ``.so``),
opens the binder runtime in the runtime directory (default ``$NPUEMU_RUNTIME_DIR``),
registers its services with the servicemanager and serves until SIGTERM or SIGINT.
Shutting down closes the binder runtime first (its services leave the registry, and
every client sees the death) and then the driver.  The process must have been
started by a launcher the servicemanager trusts (``framework.binder.launch_process``,
as ``framework.emulator.open_stack`` does), normally as uid 1000.

Logs go to stderr, or to ``--log FILE`` (relative to the runtime directory), in
logcat's threadtime form.  Exit status: 0 after a signal, 1 when the driver cannot be
loaded or the binder refuses the process, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import signal
import sys
from pathlib import Path

import trio

from framework.binder import RUNTIME_DIR_ENV, RemoteException, make_non_dumpable, open_binder_runtime

from ._driver import open_driver
from ._errors import NpuError
from ._hal import DEFAULT_HANG_TIMEOUT_MS
from ._logcat import LogcatFormatter
from ._serve import serve_hal

log = logging.getLogger("android.hardware.npu")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m npuhal", description="The npuemu vendor HAL process.")
    p.add_argument("--driver", metavar="PATH", help="driver .so to load (default: the reference driver)")
    p.add_argument("--runtime-dir", metavar="DIR", help=f"the emulator's runtime directory (default: ${RUNTIME_DIR_ENV})")
    p.add_argument("--clock", choices=("real", "virtual"), default="real", help="the hardware's clock (default: real)")
    p.add_argument("--speed", type=float, default=1.0, help="real clock: wall time per emulated time (default: 1.0)")
    p.add_argument(
        "--hang-timeout-ms",
        type=float,
        default=DEFAULT_HANG_TIMEOUT_MS,
        help="reset a channel that makes no progress this long, in emulated ms; 0 disables (default: %(default)g)",
    )
    p.add_argument("--log", metavar="FILE", help="append the log here (relative to the runtime dir) instead of stderr")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    return p


def _setup_logging(args: argparse.Namespace, runtime_dir: Path) -> None:
    if args.log:
        path = Path(args.log)
        if not path.is_absolute():
            path = runtime_dir / path
        handler: logging.Handler = logging.FileHandler(path)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogcatFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(args.log_level)


async def _serve(args: argparse.Namespace, runtime_dir: Path) -> int:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        try:
            async with open_driver(args.driver, clock=args.clock, speed=args.speed) as driver:
                log.info(
                    "driver %s loaded (%s clock, speed %g): %s",
                    args.driver or "reference",
                    args.clock,
                    args.speed,
                    ", ".join(d.name for d in driver.devices),
                )
                async with open_binder_runtime(runtime_dir) as runtime:
                    async with trio.open_nursery() as nursery:
                        await nursery.start(
                            functools.partial(
                                serve_hal, driver, runtime, hang_timeout_ms=args.hang_timeout_ms or None
                            )
                        )
                        async for signum in signals:
                            log.info("%s: shutting down", signal.Signals(signum).name)
                            nursery.cancel_scope.cancel()
                            break
                log.info("binder runtime closed; closing the driver")
        except NpuError as exc:
            log.error("cannot start the HAL: %s", exc)
            return 1
        except RemoteException as exc:
            log.error("the binder refused the HAL: %s", exc)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not (args.speed > 0):
        _parser().error(f"--speed must be positive, not {args.speed}")
    if not (args.hang_timeout_ms >= 0):
        _parser().error(f"--hang-timeout-ms must be >= 0, not {args.hang_timeout_ms}")
    runtime_dir = args.runtime_dir or os.environ.get(RUNTIME_DIR_ENV)
    if not runtime_dir:
        _parser().error(f"no runtime directory: pass --runtime-dir or set ${RUNTIME_DIR_ENV}")
    runtime_dir = Path(runtime_dir)
    if not runtime_dir.is_dir():
        _parser().error(f"no runtime directory at {runtime_dir}: is the emulator booted?")
    try:
        _setup_logging(args, runtime_dir)
    except OSError as exc:
        _parser().error(f"cannot open the log: {exc}")
    make_non_dumpable()  # no app may ptrace the HAL or copy its descriptors
    log.info("npuhal pid %d starting in %s", os.getpid(), runtime_dir)
    return trio.run(_serve, args, runtime_dir)


if __name__ == "__main__":
    sys.exit(main())
