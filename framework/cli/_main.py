import click


@click.group()
def main() -> None:
    """npuemu: Android's NPU stack, emulated on one Linux machine."""


@main.command()
def version() -> None:
    """Print the versions of the Python package and the compiled C layer.

    Example: npuemu version
    """
    from npuhal import _npu

    click.echo(f"npuemu 0.1.0, C layer {_npu.ffi.string(_npu.lib.npu_build_version()).decode()}")


from ._vts import run_test_inference, vts  # noqa: E402 - commands register after the group

main.add_command(vts)
main.add_command(run_test_inference)
