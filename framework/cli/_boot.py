"""``npuemu boot``, ``shutdown``, ``service list`` and ``devices``."""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import select
import sys
import time
import warnings
from pathlib import Path

import click
import trio

from framework import emulator
from framework.emulator import (
    BootConfig,
    BootError,
    BootInterruptedError,
    Emulator,
    RuntimeFiles,
    enter_user_namespace,
    hold_until_signalled,
    open_shell,
    serve_until_signalled,
    userns_check,
)

from ._common import CliError, load_npu_policy, npu_policy_options, run, runtime_dir_option

__all__ = ["boot", "devices", "service", "shutdown"]


def _config(driver: str | None, speed: float, clock: str, boot_timeout: float,
            system_server_args: tuple[str, ...] = (), wipe_data: bool = False) -> BootConfig:
    try:
        return BootConfig(driver=driver, speed=speed, clock=clock, boot_timeout=boot_timeout,
                          system_server_args=system_server_args, wipe_data=wipe_data)
    except (ValueError, OSError) as exc:
        raise CliError(str(exc), 2) from None


def _policy_args(spec: str | None, params: str | None) -> tuple[str, ...]:
    """system_server's options for ``--npu-policy-file``: checked here first, so a bad file fails the boot at once."""
    if load_npu_policy(spec, params) is None or spec is None:
        return ()
    path, _, cls = spec.rpartition(":")
    args = ("--npu-policy-file", f"{os.path.abspath(path)}:{cls}")
    return args if params is None else (*args, "--npu-policy-params", params)


@click.command()
@click.option("--driver", type=click.Path(dir_okay=False), default=None,
              help="A driver .so to boot on (default: the built-in reference driver).")
@click.option("--speed", type=float, default=1.0, show_default=True,
              help="Emulated time per wall-clock time (2.0: the NPU runs twice as fast).")
@click.option("--clock", type=click.Choice(["real", "virtual"]), default="real", show_default=True,
              help="The hardware's clock.")
@click.option("--detach", is_flag=True, help="Return once every service is registered; print the runtime dir.")
@click.option("--boot-timeout", type=float, default=15.0, show_default=True,
              help="Seconds each stage may take to register its services.")
@npu_policy_options
@click.option("--wipe-data", is_flag=True,
              help="Forget what earlier boots in this runtime dir kept (the app uids), as the emulator's -wipe-data.")
@runtime_dir_option
def boot(driver: str | None, speed: float, clock: str, detach: bool, boot_timeout: float,
         npu_policy_file: str | None, npu_policy_params: str | None, wipe_data: bool, runtime_dir: Path) -> None:
    """Boot an emulator: servicemanager, the HAL and system_server, each its own process.

    This process plays init. In the foreground it streams the log until Ctrl-C, then
    shuts everything down cleanly. Not as root, where the machine grants the user a
    subordinate uid range (/etc/subuid, /etc/subgid, newuidmap), init is root of a user
    namespace of its own, so each app still runs as its own uid (isolation: userns). With --detach a background init holds the stack,
    and this returns once every service is registered, printing the runtime dir
    (stop it with `npuemu shutdown`).

    \b
    Examples:
      npuemu boot                                  # foreground, Ctrl-C to stop
      npuemu boot --detach --runtime-dir /tmp/emu2 # a second emulator, in the background
      npuemu boot --driver build/drivers/mydriver.so --speed 4
      npuemu boot --npu-policy-file mine.py:MyPolicy   # the npu service under your load policy
    """
    config = _config(driver, speed, clock, boot_timeout, _policy_args(npu_policy_file, npu_policy_params), wipe_data)
    if RuntimeFiles(runtime_dir).read_state() is not None:
        raise CliError(f"an emulator already runs in {runtime_dir} (stop it with `npuemu shutdown`)")
    if os.geteuid() != 0 and userns_check() is None:
        # Before anything starts a thread (trio, the detached init's fork): unshare wants one.
        try:
            enter_user_namespace()
        except BootError as exc:
            raise CliError(f"boot failed: {exc}") from None
    if detach:
        state = _boot_detached(runtime_dir, config)
        click.echo(str(runtime_dir))
        click.echo(
            f"booted in {state.get('boot_seconds', float('nan')):.2f} s: init pid {state['init_pid']},"
            f" " + ", ".join(f"{k} {v}" for k, v in state.get("pids", {}).items()),
            err=True,
        )
        click.echo(f"isolation: {state.get('isolation', 'unknown')}", err=True)
        return
    run(_boot_foreground, runtime_dir, config)


async def _boot_foreground(runtime_dir: Path, config: BootConfig) -> None:
    log_path = RuntimeFiles(runtime_dir).log
    offset = log_path.stat().st_size if log_path.exists() else 0

    async def stream() -> None:
        async for line in emulator.follow_log(log_path, offset=offset):
            click.echo(str(line))

    def booted(emu: Emulator) -> None:
        click.echo(f"npuemu: booted in {emu.boot_seconds:.2f} s in {runtime_dir}; Ctrl-C shuts down", err=True)

    async with trio.open_nursery() as nursery:
        # The log streams from the first line of the boot to the last of the shutdown.
        nursery.start_soon(stream)
        try:
            await hold_until_signalled(runtime_dir, config, booted)
        except BootInterruptedError as exc:  # a Ctrl-C during the boot: 130, as a shell says it
            raise CliError(str(exc), 128 + exc.signum) from None
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.3)  # the follower polls every 0.1 s: let it print the last lines
            nursery.cancel_scope.cancel()
    click.echo("npuemu: shut down", err=True)


#: Bytes of ``init.err`` taken when the detached init starts, so that its last words fit on a full disk.
_ERR_RESERVE = 16 * 1024


def _run_daemon(runtime_dir: Path, config: BootConfig, ready_fd: int, err_path: Path) -> None:
    """The forked child of ``boot --detach``: becomes the detached init, then exits.

    It inherits the state of whatever program ran the command (a test session has run
    hundreds of tests in it): its garbage is frozen before this runs (_boot_detached);
    its warning filters (pytest's "error" would turn a warning into init's death) and
    its fault handler (on a descriptor closed below) are dropped here.
    """
    status = 1
    try:
        warnings.resetwarnings()
        os.setsid()  # a Ctrl-C or a closed terminal does not reach it
        if os.fork() > 0:
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            # Room for init's last words, taken now: on a full disk they must still fit.
            # The file is that long (zeros) until init cuts it at what it wrote.
            os.posix_fallocate(err, 0, _ERR_RESERVE)
        except OSError:
            pass
        for fd, target in ((devnull, 0), (devnull, 1), (err, 2)):
            os.dup2(fd, target)
        # Nothing of the command's own (its terminal, a caller's pipes) stays open in init.
        os.closerange(3, ready_fd)
        os.closerange(ready_fd + 1, os.sysconf("SC_OPEN_MAX"))
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        if faulthandler.is_enabled():
            faulthandler.enable(file=sys.stderr)  # not the host's descriptor, closed above
        status = trio.run(serve_until_signalled, os.fspath(runtime_dir), config, ready_fd)
    except BaseException:  # noqa: BLE001 - the daemon's last words go to init.err
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
            said = os.lseek(2, 0, os.SEEK_CUR)
            os.ftruncate(2, said)  # the reserve's zeros go
            if status == 0 and said == 0:
                err_path.unlink(missing_ok=True)  # a clean run said nothing: leave no empty file
        except OSError:
            pass
        os._exit(status)


def _boot_detached(runtime_dir: Path, config: BootConfig) -> dict:
    runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    err_path = runtime_dir / "init.err"
    read_end, write_end = os.pipe()
    # The daemon init is this process, forked: everything it needs is imported already,
    # so the stack's boot does not wait for one more interpreter to start (a third of
    # the boot on a 2-core machine). Forked before trio runs here, so no trio state is
    # copied; the child double-forks into a session of its own, as a daemon does.
    # The child does inherit every object of this process, though, and the descriptors
    # their finalizers close: garbage the child's collector freed there (a socket left
    # in a reference cycle by an earlier trio run of the same process: a test's) would
    # close a descriptor number the child has since reused for its own epoll or socket
    # ("boot failed: [Errno 9] Bad file descriptor"). So no collection runs across the
    # fork, and the child freezes what it inherited: none of it is collected there.
    collecting = gc.isenabled()
    gc.disable()
    try:
        child = os.fork()
        if child == 0:
            gc.freeze()
            gc.enable()
            os.close(read_end)
            _run_daemon(runtime_dir, config, write_end, err_path)  # never returns
    finally:
        if collecting:
            gc.enable()
    os.close(write_end)
    _, wait_status = os.waitpid(child, 0)  # at once: the daemon is its child, now orphaned
    first_fork_status = os.waitstatus_to_exitcode(wait_status)
    data = b""
    deadline = time.monotonic() + 3 * config.boot_timeout + 10
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([read_end], [], [], 0.2)
            if ready:
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                data += chunk
            elif first_fork_status != 0 and not data:
                break
    finally:
        os.close(read_end)
    text = data.decode("utf-8", "replace").strip()
    if text.startswith("ok "):
        return json.loads(text[3:])
    if text.startswith("error "):
        raise CliError(f"boot failed: {text[6:]}")
    tail = err_path.read_text(errors="replace").strip("\0 \n").splitlines()[-5:] if err_path.exists() else []
    raise CliError("boot failed: init exited without a word" + (
        f"; its stderr ends: {' | '.join(tail)}" if tail else ""))


@click.command()
@click.option("--timeout", type=float, default=15.0, show_default=True, help="Seconds to wait for init to exit.")
@runtime_dir_option
def shutdown(timeout: float, runtime_dir: Path) -> None:
    """Shut down the emulator: apps, system_server, the HAL, servicemanager, init.

    Example: npuemu shutdown --runtime-dir /tmp/emu2
    """
    pid = run(lambda: emulator.shutdown(runtime_dir, timeout=timeout))
    click.echo(f"emulator in {runtime_dir} shut down (init pid {pid})")


@click.group()
def service() -> None:
    """The servicemanager's registry.

    Example: npuemu service list
    """


@service.command("list")
@runtime_dir_option
def service_list(runtime_dir: Path) -> None:
    """List every registered service, as `adb shell service list` does.

    Example: npuemu service list
    """

    async def go() -> list[str]:
        from framework.binder import defaultServiceManager

        async with open_shell(runtime_dir) as runtime:
            return list(await defaultServiceManager(runtime).listServices(15))

    names = run(go)
    click.echo(f"Found {len(names)} services:")
    for i, name in enumerate(names):
        click.echo(f"{i}\t{name}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the devices as a JSON array.")
@runtime_dir_option
def devices(as_json: bool, runtime_dir: Path) -> None:
    """List the NNAPI devices an app enumerates: the driver's, then nnapi-reference.

    Example: npuemu devices
    """

    async def go() -> list[emulator.DeviceRow]:
        async with open_shell(runtime_dir) as runtime:
            return await emulator.list_devices(runtime)

    rows = run(go)
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows], indent=1))
        return
    width = max(len(r.name) for r in rows)
    click.echo(f"{'#':>2}  {'NAME':<{width}}  {'TYPE':<11}  {'LEVEL':>5}  {'STATUS':<9}  VERSION")
    for i, r in enumerate(rows):
        click.echo(f"{i:>2}  {r.name:<{width}}  {r.type:<11}  {r.feature_level:>5}  {r.status:<9}  {r.version}")

