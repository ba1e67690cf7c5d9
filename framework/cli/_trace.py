"""``npuemu trace --out FILE``: the run as a Chrome/Perfetto trace."""

from __future__ import annotations

from pathlib import Path

import click

from framework.emulator import load_timeline, summarize, write_trace

from ._common import mapped_errors, runtime_dir_option

__all__ = ["trace"]


@click.command()
@click.option("--out", "out", type=click.Path(dir_okay=False), default="npuemu-trace.json", show_default=True,
              help="Where to write the trace (JSON).")
@runtime_dir_option
@mapped_errors
def trace(out: str, runtime_dir: Path) -> None:
    """Write what the emulator's NPU did as a trace for ui.perfetto.dev or chrome://tracing.

    A track per execution channel with a slice per job segment (uid, package,
    priorities), preemptions and resumes marked, counters for weight memory and
    temperature, and a flow from each app's binder call to its job. Works on a
    running emulator and on one that has shut down (init records as it runs).

    Example: npuemu trace --out /tmp/run.json   (then open it in ui.perfetto.dev)
    """
    trace_obj = write_trace(runtime_dir, out)
    s = summarize(load_timeline(runtime_dir))
    click.echo(f"wrote {out}: {len(trace_obj['traceEvents'])} events, {s['jobs']} jobs,"
               f" {s['preemptions']} preemptions, {s['resumes']} resumes over {s['duration_ms'] / 1000:.1f} s")
