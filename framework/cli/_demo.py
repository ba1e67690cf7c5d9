"""``npuemu demo``: boot, run the scenario with every sample app, check it, shut down."""

from __future__ import annotations

import json
import os

import click

from framework.emulator import resolve_runtime_dir, run_demo

from ._common import CliError, EXIT_FAILED, run

__all__ = ["demo"]


def _print_summary(s: dict) -> None:
    echo = click.echo
    echo("")
    echo(f"npuemu demo: {s['duration_s']:.1f} s, {s['jobs']} NPU jobs, {s['results_checked']} results checked"
         f" ({s['results_wrong']} wrong)")
    echo("")
    echo(f"  {'app':<10} {'loads':>5} {'unload?':>7} {'unloaded':>8} {'inferences':>10} {'ok':>6}"
         f" {'p50 ms':>7} {'p99 ms':>7} {'dev p50':>7}  devices, model")
    for name, a in s["apps"].items():
        p50, p99, dev = (f"{a[k]:.1f}" if a.get(k) is not None else "-" for k in ("p50_ms", "p99_ms", "device_p50_ms"))
        model = f" ({a['model']})" if a.get("model") else ""
        echo(f"  {name:<10} {a['loads']:>5} {a['unload_requests']:>7} {a['unloads']:>8} {a['inferences']:>10}"
             f" {a['results_ok']:>6} {p50:>7} {p99:>7} {dev:>7}  {', '.join(a['devices']) or '-'}{model}")
    echo("  (p50/p99: an inference as the app timed it; dev p50: the device's emulated time for it, ON_HARDWARE)")
    echo("")
    echo(f"  preemptions {s['preemptions']}, resumes {s['resumes']}; revocations {s['revocations']};"
         f" apps warned or blocked {s['blocked_or_warned']};"
         f" thermal max severity {s['thermal_max_severity_name']} ({s['temperature_max_c']} C)")
    echo("")
    for c in s["checks"]:
        echo(f"  {'PASS' if c['passed'] else 'FAIL'} {c['name']}: {c['detail']}")
    echo("")
    echo(f"  trace {s['trace']} (open in ui.perfetto.dev)")
    echo(f"  plot  {s['plot']}")
    echo(f"  log   {s['log']}")
    passed = sum(c["passed"] for c in s["checks"])
    echo(f"{passed} passed, {len(s['checks']) - passed} failed")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (progress still goes to stderr).")
@click.option("--seconds", type=float, default=20.0, show_default=True,
              help="About how long the scenario runs once the apps are up (at least 8).")
@click.option("--out-dir", type=click.Path(file_okay=False), default=None,
              help="Where the trace, the plot, the log and summary.json go (default: demo beside the runtime"
                   " directory, /tmp/npuemu-<uid>/demo unless $NPUEMU_RUNTIME_DIR says otherwise).")
@click.option("--driver", type=click.Path(dir_okay=False), default=None,
              help="Run on a driver .so (built with `make driver`) instead of the reference driver.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
def demo(as_json: bool, seconds: float, out_dir: str, driver: str | None, quiet: bool) -> None:
    """Run the whole story on a private emulator and check that every app behaved.

    camera runs in the foreground and photos indexes in the background under the
    budget policy; the assistant arrives and displaces photos (and rogue, which
    ignores the request and is revoked); legacy, which lacks the NPU feature, is
    refused and runs on the CPU; a thermal spike sends the background away until the
    die cools. Then a summary, a Perfetto trace and a PNG. Exit status 0 only if
    every check passed. The apps find their devices by NNAPI discovery, so with
    --driver the same story runs on a driver author's devices.

    \b
    Examples:
      npuemu demo
      npuemu demo --driver build/drivers/mydriver.so
    """
    if not seconds >= 8:
        raise CliError(f"--seconds must be at least 8, not {seconds:g}", 2)
    if driver is not None and not os.path.isfile(driver):
        raise CliError(f"no driver at {driver}", 2)

    def progress(text: str) -> None:
        if not quiet:
            click.echo(f"demo: {text}", err=True)

    if out_dir is None:
        out_dir = os.fspath(resolve_runtime_dir().parent / "demo")
    summary = run(lambda: run_demo(seconds=seconds, out_dir=out_dir, driver=driver, progress=progress))
    if as_json:
        click.echo(json.dumps(summary, indent=1))
    else:
        _print_summary(summary)
    if not summary["ok"]:
        raise SystemExit(EXIT_FAILED)
