"""The app process: ``python -m framework.app APP_DIR``.

``APP_DIR/main.py`` defines ``async def main(context)``; the process opens its binder
runtime (the runtime dir from ``$NPUEMU_RUNTIME_DIR``), a Context, runs ``main`` and
exits with its result: 0 when it returns, 1 when it raises (the traceback goes to the
log, as an Android app's crash goes to logcat). Logs are logcat lines on stderr.
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

from ._context import open_app_context

__all__ = ["load_app_main", "run_app", "main"]

log = logging.getLogger("AppProcess")


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


async def run_app(app_dir: str | os.PathLike, runtime_dir: str | None = None) -> Any:
    fn = load_app_main(app_dir)
    async with open_binder_runtime(runtime_dir) as rt:
        async with open_app_context(rt) as context:
            log.info("app %s (uid %d) pid %d starting", context.getPackageName(), rt.uid, rt.pid)
            result = fn(context)
            if hasattr(result, "__await__"):
                result = await result
            return result


class _Logcat(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(record.created))
        line = (f"{stamp}.{int(record.msecs):03d} {record.process:5d} {threading.get_native_id():5d} "
                f"{record.levelname[0]} {record.name}: {record.getMessage()}")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


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
        trio.run(run_app, args[0])
    except KeyboardInterrupt:
        return 130
    except BaseException:
        log.exception("FATAL EXCEPTION in app %s", args[0])
        return 1
    return 0
