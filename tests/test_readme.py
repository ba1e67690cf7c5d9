"""The README stays true: its CLI reference names every command there is."""

from pathlib import Path

import click

from framework.cli import main

README = Path(__file__).resolve().parent.parent / "README.md"


def leaf_commands(group, path=("npuemu",)):
    ctx = click.Context(group, info_name=path[-1])
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd.hidden:
            continue
        if isinstance(cmd, click.Group):
            yield from leaf_commands(cmd, path + (name,))
        else:
            yield " ".join(path + (name,))


def test_the_cli_reference_lists_every_command():
    text = README.read_text()
    reference = text[text.index("## CLI reference") :]
    missing = [c for c in leaf_commands(main) if f"`{c} " not in reference]
    assert missing == []


def test_the_quick_start_gives_the_two_commands():
    text = README.read_text()
    assert "make demo" in text and "make test" in text
