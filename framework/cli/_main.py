"""The root ``npuemu`` group. Commands live in their own modules; the group adds them at the end."""

from __future__ import annotations

import importlib.metadata
import os

import click

from framework.binder import RUNTIME_DIR_ENV

from ._aidl import aidl
from ._bench import bench
from ._boot import boot, devices, service, shutdown
from ._common import EXIT_INTERRUPTED, CliError
from ._demo import demo
from ._lab import lab_group
from ._launch import launch
from ._logcat import logcat
from ._nn import nn
from ._plot import plot
from ._server import am, cmd, dumpsys
from ._thermal import thermal
from ._trace import trace
from ._vts import run_test_inference, vts


def version_text() -> str:
    """``npuemu X, C layer Y (ABI N, build H)``: what ``npuemu --version`` and ``npuemu version`` print."""
    from npuhal import C_VERSION

    return f"npuemu {importlib.metadata.version('npuemu')}, C layer {C_VERSION}"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


class _RootGroup(click.Group):
    """The root group: Ctrl-C anywhere in a command is ``interrupted`` (exit 130).

    Commands that run trio map it through :func:`~._common.run`; this catches the
    rest (a Ctrl-C while a command parses, imports or prints), which click would
    otherwise report as ``Aborted!`` with exit 1, as if something had failed.
    """

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise CliError("interrupted", EXIT_INTERRUPTED) from None


@click.group(cls=_RootGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the versions of the Python package and the compiled C layer, and exit.")
@click.option(
    "--runtime-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="The emulator every subcommand talks to (as if $NPUEMU_RUNTIME_DIR were set).",
)
@click.pass_context
def main(ctx: click.Context, runtime_dir: str | None) -> None:
    """npuemu: Android's NPU stack, emulated on one Linux machine.

    Every layer is its own process, as on a phone: servicemanager, the vendor HAL
    over a C driver, system_server (npu, package, activity, thermal) and the apps.

    \b
    Quick start:
      npuemu boot --detach        # start an emulator, print its runtime dir
      npuemu launch camera photos # run two sample apps
      npuemu dumpsys npu          # what the NPU Manager decided
      npuemu shutdown
      npuemu demo                 # the whole scenario, with a trace and a plot

    Several emulators run side by side: give each its own --runtime-dir (or
    $NPUEMU_RUNTIME_DIR); the default is /tmp/npuemu-<uid>/default.
    """
    if runtime_dir:
        # Subcommands (also those that read only the environment) see this emulator;
        # the old value comes back when the command is done (CliRunner reuses a process).
        old = os.environ.get(RUNTIME_DIR_ENV)
        os.environ[RUNTIME_DIR_ENV] = os.path.abspath(runtime_dir)

        def restore() -> None:
            if old is None:
                os.environ.pop(RUNTIME_DIR_ENV, None)
            else:
                os.environ[RUNTIME_DIR_ENV] = old

        ctx.call_on_close(restore)


@main.command()
def version() -> None:
    """Print the versions of the Python package and the compiled C layer.

    Example: npuemu version   (or: npuemu --version)
    """
    click.echo(version_text())


for _command in (boot, shutdown, service, devices, launch, logcat, thermal, trace, plot, demo, vts, run_test_inference,
                nn, aidl, bench, lab_group, dumpsys, cmd, am):
    main.add_command(_command)
