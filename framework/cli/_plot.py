"""``npuemu plot --out FILE.png``: the run as a picture."""

from __future__ import annotations

from pathlib import Path

import click

from framework.emulator import load_timeline, plot_timeline, summarize

from ._common import mapped_errors, runtime_dir_option

__all__ = ["plot"]


@click.command()
@click.option("--out", "out", type=click.Path(dir_okay=False), default="npuemu-timeline.png", show_default=True,
              help="Where to write the PNG.")
@click.option("--title", default=None, help="The figure's title.")
@runtime_dir_option
@mapped_errors
def plot(out: str, title: str | None, runtime_dir: Path) -> None:
    """Draw the NPU's channels over time (coloured by app, preemptions marked), heat and memory.

    Example: npuemu plot --out /tmp/run.png
    """
    timeline = load_timeline(runtime_dir)
    plot_timeline(timeline, out, title=title)
    s = summarize(timeline)
    click.echo(f"wrote {out}: {s['jobs']} jobs, {s['preemptions']} preemptions over {s['duration_ms'] / 1000:.1f} s")
