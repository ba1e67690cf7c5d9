"""``npuemu vts`` and ``npuemu run-test-inference``: the driver author's two tools.

Both are thin: parse, call the library (``framework.vts.run_vts``; the HAL's
``npuemu.hal.IHalControl.runTestInference``), print, and map failures to an exit
code with one clear line on stderr, as every ``npuemu`` command does
(``_common``): 1 for a failed run, 2 for bad usage, 3 when no emulator runs.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click
import trio

from framework.emulator import work_event_names

from ._common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, CliError, run, runtime_dir_option

T = TypeVar("T")

__all__ = ["format_work_event", "run_test_inference", "vts"]


@click.command("vts")
@click.option(
    "--driver",
    "driver",
    type=click.Path(dir_okay=False),
    default=None,
    help="The driver to test: a .so, or its .c source (built twice, so the version check can compare "
    "two builds). Default: the built-in reference driver.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
@click.option(
    "--check-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds one check may take before it fails as a hang (default 10).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds for the whole run (default 240).",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep the run's record here: the report (vts-report.json) and the builds runs into it have seen "
    "(vts-builds.json), which the version check compares with.",
)
@click.option(
    "--previous-build",
    type=click.Path(dir_okay=False),
    default=None,
    help="The driver's previous build (.so): its version strings must differ from this build's.",
)
@click.option(
    "--cases",
    type=click.Path(dir_okay=False),
    default=None,
    help="The generated cases (default: build/vts/generated_cases.npz, made by `make vts-cases`).",
)
@click.option("--check", "only", multiple=True, help="Run only this check (repeatable); see --list.")
@click.option("--list", "list_checks", is_flag=True, help="Print every check and what it requires, and exit.")
def vts(driver, as_json, check_timeout, timeout, output_dir, previous_build, cases, only, list_checks) -> None:
    """Run the conformance suite (VTS) on a driver, on a private emulator.

    Boots a servicemanager and the HAL on the driver, runs every check of
    VtsHalNpuSchedulingTargetTest, the NN HAL 1.2 IDevice tests (with the
    generated models of `make vts-cases`) and the seeds' rules, and prints a line
    per check (PASS name / FAIL name: why) and then "N passed, M failed". Exit
    status 0 only when every check passed. A driver that crashes or hangs fails
    the checks it breaks, within a bounded time; one on which the HAL does not
    even come up is one error line (exit 1). Ctrl-C stops the run and everything
    it started (exit 130). Given a .so, the version check needs --previous-build
    or an --output-dir that earlier builds' runs used.

    Example: npuemu vts --driver path/to/mydriver.c
    """
    from npuhal import NpuError
    from framework.vts import (
        DEFAULT_CHECK_TIMEOUT_S,
        DEFAULT_TIMEOUT_S,
        VtsDriverNotLoadedError,
        describe_checks,
        run_vts,
    )

    if list_checks:
        checks = describe_checks()
        if as_json:
            click.echo(json.dumps([{"name": n, "requires": d} for n, d in checks], indent=2))
        else:
            width = max(len(n) for n, _ in checks)
            for name, doc in checks:
                click.echo(f"{name:<{width}}  {doc}")
        return

    async def main():
        try:
            return await _until_signalled(
                lambda: run_vts(
                    driver,
                    check_timeout=check_timeout or DEFAULT_CHECK_TIMEOUT_S,
                    timeout=timeout or DEFAULT_TIMEOUT_S,
                    output_dir=output_dir,
                    previous_build=previous_build,
                    cases=cases,
                    only=list(only) or None,
                )
            )
        except VtsDriverNotLoadedError as exc:  # the driver was tried and never came up: nothing ran
            raise CliError(_first_line(exc), EXIT_FAILED) from None
        except NpuError as exc:  # a bad --driver or --check, C that does not compile: nothing ran
            raise CliError(_first_line(exc), EXIT_USAGE) from None

    report = run(main)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        for line in report.lines():
            click.echo(line)
    sys.exit(0 if report.ok else EXIT_FAILED)


#: What ends a vts run from outside: Ctrl-C at the terminal, `kill`, the terminal closing.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def _until_signalled(run_fn: Callable[[], Awaitable[T]]) -> T:
    """``await run_fn()``, cancelled by SIGINT, SIGTERM or SIGHUP.

    A signal is a cancellation here, not a KeyboardInterrupt that may land anywhere
    (in the middle of stopping the HAL, say): whatever the run started is stopped
    and removed as at any cancellation, and then the command reports the run as
    interrupted (exit 130 for Ctrl-C, 128 + the signal for the others). The HAL and
    the probe run in sessions of their own, so the terminal's Ctrl-C reaches only
    this process: no child dies of it first, to be taken for a crashing driver.
    """
    got: list[int] = []
    result: list[T] = []
    failure: list[BaseException] = []
    with trio.open_signal_receiver(*_STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for signum in signals:
                    got.append(signum)
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch)
            try:
                result.append(await run_fn())
            except Exception as exc:  # noqa: BLE001 - carried out of the nursery as itself
                failure.append(exc)
            nursery.cancel_scope.cancel()
    if got:  # whatever the run said as it was cut short (a killed compiler...) is moot
        name = signal.Signals(got[0]).name
        if got[0] == signal.SIGINT:
            raise CliError("interrupted", EXIT_INTERRUPTED)
        raise CliError(f"interrupted by {name}", 128 + got[0])
    if failure:
        try:
            raise failure[0]
        finally:
            failure.clear()
    return result[0]


def format_work_event(event) -> str:
    """One ``npuemu.hal.WorkEvent`` as one aligned line, for people."""
    kind, reason = work_event_names(event)
    info = event.info
    where = event.deviceName + (f" ch{event.channel}" if event.channel >= 0 else "")
    return (
        f"{event.timeNs / 1e6:12.3f} ms  {kind:<9} {reason:<16} work {event.workId:<5} id {info.id:<5} "
        f"uid {info.uid} originalUid {info.originalUid} jobPriority {info.jobPriority} "
        f"effectivePriority {info.effectivePriority} {where}"
    )


@click.command("run-test-inference")
@click.option("--job-priority", "job_priority", type=int, default=500, show_default=True,
              help="0..1000; 0 is the most important (500: an execution's default, as with no hint).")
@click.option("--device", default="", help="The IDevice instance to run on (default: the HAL's first accelerator).")
@click.option("--uid", type=int, default=None, help="Run as this uid (the shell may, as su on an eng build).")
@click.option("--original-uid", "original_uid", type=int, default=None, help="Attribute the work to this uid.")
@runtime_dir_option
def run_test_inference(job_priority, device, uid, original_uid, runtime_dir) -> None:
    """Run one inference through the running HAL and print the work events it caused.

    The vendor's run-test-inference tool that AOSP's VTS calls: one small fixed
    inference (a few hundred emulated ms), as the shell unless --uid says otherwise.
    Each event is printed as one line: emulated time, kind, reason, the driver's
    work id, the WorkInfo id, uids, priorities, device and channel.

    Example: npuemu run-test-inference --job-priority 250 --device emu-npu
    """
    from framework.binder import defaultServiceManager
    from framework.emulator import HAL_CONTROL, EmulatorNotRunningError, open_shell
    from interfaces.npuemu.hal import IHalControl

    if not 0 <= job_priority <= 1000:
        raise CliError(f"--job-priority must be 0..1000 (0 is the most important), not {job_priority}", EXIT_USAGE)
    for label, value in (("--uid", uid), ("--original-uid", original_uid)):
        if value is not None and value < 0:
            raise CliError(f"{label} must be a uid (0 or more), not {value}", EXIT_USAGE)

    async def go():
        async with open_shell(runtime_dir) as runtime:
            binder = await defaultServiceManager(runtime).checkService(HAL_CONTROL)
            if binder is None:
                raise EmulatorNotRunningError(f"the HAL is not running in {runtime_dir} ({HAL_CONTROL} is not registered)")
            control = IHalControl.asInterface(binder)
            # A refusal is mapped as every service's is (_common): bad arguments exit 2, the rest 1.
            return await control.runTestInference(
                job_priority, -1 if original_uid is None else original_uid, device, -1 if uid is None else uid
            )

    for event in run(go):
        click.echo(format_work_event(event))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
