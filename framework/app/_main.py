"""The app process: ``python -m framework.app APP_DIR``.

``APP_DIR/main.py`` defines ``async def main(context)``; the process opens its binder
runtime (the runtime dir from ``$NPUEMU_RUNTIME_DIR``), and runs the app through
``_activity_thread``: a Context, ``main``, the activity manager told when it is up or
crashed. It exits 0 when ``main`` returns, 1 when anything raises (the traceback goes
to the log under the app's pid and the tag ``AndroidRuntime``, as an Android app's
crash goes to logcat). Logs are logcat lines on stderr, one per line of a message or
traceback, so that every line carries the app's pid and tag.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import trio

from framework.binder import open_binder_runtime

from ._activity_thread import log_fatal_exception, run_app_process

__all__ = ["load_app_main", "run_app", "main"]


def load_app_main(app_dir: str | os.PathLike) -> Any:
    """The ``main`` of ``app_dir/main.py``; a clear error if there is none."""
    path = Path(app_dir) / "main.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (an app folder holds AndroidManifest.xml and main.py)")
    spec = importlib.util.spec_from_file_location(f"npuemu_app_{abs(hash(str(path.resolve())))}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, "main", None)
    if fn is None or not callable(fn):
        raise AttributeError(f"{path} defines no main(context)")
    return fn


async def run_app(app_dir: str | os.PathLike, runtime_dir: str | None = None) -> BaseException | None:
    """The app in ``app_dir`` as this process: its crash (already logged and reported), or None."""
    async with open_binder_runtime(runtime_dir) as rt:
        return await run_app_process(rt, lambda: load_app_main(app_dir), name=os.fspath(app_dir))


class _Logcat(logging.Formatter):
    """One logcat ``threadtime`` line per line of the message and its traceback."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(record.created))
        prefix = (f"{stamp}.{int(record.msecs):03d} {record.process:5d} {threading.get_native_id():5d} "
                  f"{record.levelname[0]} {record.name}: ")
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return "\n".join(prefix + line for line in text.splitlines() or [""])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m framework.app APP_DIR", file=sys.stderr)
        return 2
    handler = logging.StreamHandler()
    handler.setFormatter(_Logcat())
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(os.environ.get("NPUEMU_LOG_LEVEL", "INFO"))
    try:
        crash = trio.run(run_app, args[0])
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # before the app could run: no emulator, no binder
        log_fatal_exception(exc, args[0], os.getpid())
        return 1
    return 0 if crash is None else 1
