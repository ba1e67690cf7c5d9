"""``python -m framework.server [--runtime-dir DIR]``: the system_server process.

``npuemu boot`` starts it as uid 1000 (the servicemanager must already know its pid); with
uid isolation it starts as root and makes itself the system user first thing.
It prints ``ready`` on stdout once every service is registered, logs logcat lines to
stderr (or ``--log FILE``), and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import functools
import os
import signal
import sys

import click
import trio

from framework.binder import (
    AID_SYSTEM,
    CAP_KILL,
    CAP_SETGID,
    CAP_SETUID,
    RUNTIME_DIR_ENV,
    become_uid,
    has_os_uids,
    make_non_dumpable,
    open_binder_runtime,
)

from ._logcat import configure_logcat
from ._policy_api import PolicyLoadError, load_policy, parse_policy_params
from ._system_server import serve_system_server

BLOCK_FLAG_ENV = "NPUEMU_NPU_BLOCK_MISSING_FEATURE"


@click.command()
@click.option("--runtime-dir", type=click.Path(file_okay=False, readable=False), default=None,
              help=f"The emulator's runtime directory (default ${RUNTIME_DIR_ENV}).")
@click.option("--apps-dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="Install every app folder in this directory at boot.")
@click.option("--unload-timeout", type=float, default=2.0, show_default=True,
              help="Seconds an app has to unload a model before it is revoked.")
@click.option("--hal-timeout", type=float, default=10.0, show_default=True,
              help="Seconds to wait for the HAL before logging that it is missing.")
@click.option("--block-missing-feature/--no-block-missing-feature", default=None,
              help=f"Refuse apps without <uses-feature android.hardware.npu> (default ${BLOCK_FLAG_ENV}=1).")
@click.option("--npu-policy-file", "policy_spec", metavar="FILE.py:CLASS", default=None,
              help="The npu service's load policy: a framework.server.NpuPolicy subclass in FILE.py.")
@click.option("--npu-policy-params", "policy_params", metavar="JSON", default=None,
              help="Its parameters, a JSON object given to its from_params.")
@click.option("--data-dir", type=click.Path(file_okay=False, readable=False), default=None,
              help="Keep packages.xml (the app uids, stable across boots) here; default: nothing is kept.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None, help="Log to this file.")
@click.option("--log-level", default="INFO", show_default=True)
def main(runtime_dir, apps_dir, unload_timeout, hal_timeout, block_missing_feature, policy_spec, policy_params,
         data_dir, log_path, log_level) -> None:
    """Serve the package, activity, thermal and npu services."""
    if has_os_uids() and os.geteuid() == 0:
        # init started this as root: become the system user, keeping what launching and
        # killing apps takes (see framework.binder.become_uid), before any connection.
        become_uid(AID_SYSTEM, keep=(CAP_KILL, CAP_SETUID, CAP_SETGID))
    else:
        make_non_dumpable()
    configure_logcat(log_level, log_path)
    if block_missing_feature is None:
        block_missing_feature = os.environ.get(BLOCK_FLAG_ENV, "") in ("1", "true", "yes")
    npu_policy = None
    if policy_spec is not None:
        try:
            npu_policy = load_policy(policy_spec, parse_policy_params(policy_params))
        except PolicyLoadError as exc:
            click.echo(f"system_server: {exc}", err=True)
            sys.exit(2)

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with open_binder_runtime(runtime_dir) as rt, trio.open_nursery() as nursery:
                await nursery.start(functools.partial(
                    serve_system_server, rt, hal_timeout=hal_timeout, unload_timeout=unload_timeout,
                    block_missing_feature=block_missing_feature, apps_dir=apps_dir, npu_policy=npu_policy,
                    data_dir=data_dir,
                ))
                print("ready", flush=True)
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    try:
        trio.run(run)
    except Exception as exc:
        click.echo(f"system_server: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
