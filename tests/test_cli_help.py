"""Every `npuemu` command's --help shows an example, as issue 7 asks."""

import click
from click.testing import CliRunner

from framework.cli import main


def commands(group, path=()):
    ctx = click.Context(group, info_name="npuemu")
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from commands(cmd, path + (name,))
        else:
            yield path + (name,)


def test_every_command_has_help_with_an_example():
    runner = CliRunner()
    missing = []
    for path in commands(main):
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        if "Example" not in result.output and "npuemu " not in result.output.split("Options:")[0]:
            missing.append(" ".join(path))
    assert missing == []
