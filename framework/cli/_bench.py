"""``npuemu bench``: measurements that print tables.

``npuemu bench scheduling`` is the scheduling lab (``framework.lab``): every
policy on the same arrivals, on the emulated NPU's virtual clock, with the
multiprogram metrics of the literature.  This module only parses options,
calls the lab, and turns its errors into one line and an exit code.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from ._common import load_npu_policy, npu_policy_options

__all__ = ["bench", "scheduling"]


@click.group()
def bench() -> None:
    """Benchmarks of the emulated stack (they print tables and write files)."""


def _resolve_workload(text: str, directory: Path) -> Path:
    path = Path(text)
    if path.exists() or path.suffix:
        return path
    # A bare name is one of the bundled workloads.
    candidate = directory / f"{text}.toml"
    if candidate.exists():
        return candidate
    known = ", ".join(sorted(p.stem for p in directory.glob("*.toml"))) or "none"
    raise click.BadParameter(f"no workload file {text!r} and no bundled workload of that name (bundled: {known})",
                             param_hint="WORKLOAD")


def _loads(text: str | None) -> list[float] | None:
    if text is None:
        return None
    if text.strip() == "":
        return []
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of numbers", param_hint="--loads") from None
    for v in values:
        if not (0 < v <= 10):
            raise click.BadParameter(f"an offered load must be in (0, 10], got {v:g}", param_hint="--loads")
    return values


@bench.command()
@click.argument("workloads", nargs=-1, metavar="[WORKLOAD]...")
@click.option("--policy", "policy_names", multiple=True, metavar="NAME",
              help="Run only these built-in policies (repeatable): fcfs, priority, preempt-ckpt, preempt-kill, "
                   "reference, and the Python ones p-sjf, token, prema, prema-checkpoint, prema-kill, prema-drain.")
@click.option("--policy-file", "policy_files", multiple=True, metavar="FILE.py:CLASS",
              help="Also run a Python driver policy of yours (repeatable; the interface: README, 'Scheduling lab').")
@click.option("--driver", "drivers", multiple=True, type=click.Path(dir_okay=False),
              help="Also run a driver .so with its own scheduling (repeatable).")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Override every workload's seed.")
@click.option("--k", "sla_k", type=click.FloatRange(min=1.0), default=None,
              help="SLA: a high-priority request must finish within K x its isolated time (overrides the workload's).")
@click.option("--loads", default=None, metavar="L1,L2,...", help="Sweep these offered loads instead of the workload's.")
@click.option("--no-sweep", is_flag=True, help="Only the workload's nominal load.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="scheduling-lab", show_default=True,
              help="Where the JSON and the plots go.")
@click.option("--no-plot", is_flag=True, help="Skip the PNG plots.")
@click.option("--whole-stack", is_flag=True,
              help="Run through the full framework in one process (apps, npu service, HAL) instead of straight "
                   "to the driver; slower.")
@click.option("--npu-policy", type=click.Choice(["status-quo", "turn-taking", "budget"]), default="status-quo",
              show_default=True, help="With --whole-stack: the npu service's model-load policy.")
@click.option("--seeds", "seeds_text", default=None, metavar="S1,S2,...",
              help="Run every workload once per seed (a seed axis of the grid; overrides --seed).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Fan the grid's points out on a local Dask cluster of this many worker processes.")
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
              help="Fan the grid's points out on an existing Dask cluster (its scheduler's address).")
@npu_policy_options
@click.option("-q", "--quiet", is_flag=True, help="No progress lines or bar on stderr.")
def scheduling(
    workloads: tuple[str, ...],
    policy_names: tuple[str, ...],
    policy_files: tuple[str, ...],
    drivers: tuple[str, ...],
    seed: int | None,
    sla_k: float | None,
    loads: str | None,
    no_sweep: bool,
    out_dir: str,
    no_plot: bool,
    whole_stack: bool,
    npu_policy: str,
    seeds_text: str | None,
    workers: int | None,
    scheduler: str | None,
    npu_policy_file: str | None,
    npu_policy_params: str | None,
    quiet: bool,
) -> None:
    """Compare NPU scheduling policies on the same arrivals, on the virtual clock.

    WORKLOAD is a workload file (TOML, see framework/lab/_workload.py) or the
    name of one in bench/workloads; by default, every bundled one.  Each runs
    under non-preemptive FCFS, non-preemptive priority, preemptive
    highest-priority-first with checkpoint and with kill-restart, the
    reference driver's own scheduling, PREMA (Choi and Rhu, HPCA 2020) and the
    paper's baselines as Python policies that hold the queue in the lab, any
    --policy-file (FILE.py:CLASS, a Python driver policy of yours) and any
    --driver given; at its nominal
    load and across its load sweep.  A workload whose device only a --driver
    has runs the built-in policies on that driver, with the hardware's modes
    set.  Prints a table per workload, with a key to its columns under the
    first; writes OUT/scheduling.json (every number) and OUT/<workload>.png
    (every panel with its legend).  The same seed gives the same numbers.
    The bundled 'prema' workload (real networks, minutes) runs only by name,
    and prints PREMA's table beside the paper's ratios over NP-FCFS.  A bare
    run adds PREMA alone to the C driver's policies; a named workload also
    gets p-sjf, token and PREMA with a fixed mechanism.

    The grid (workloads x --seeds x policies x loads) is a set of independent,
    deterministic points: --workers N runs them on a local Dask cluster of N
    processes, --scheduler on an existing one (see the README's lab section);
    the numbers are the same as a serial run's.  A point that fails is reported
    with its parameters (its policy is left out of that workload's tables) while
    the rest go on, and the exit status is 1.  Interrupted (Ctrl-C), what had
    finished is kept in OUT/scheduling.partial.json.

    --whole-stack runs the same arrivals through the full framework in one
    process (each task an app that asks the npu service for its model load and
    executes through NNAPI, the HAL, the driver), over the in-memory binder
    and trio's mock clock, so that the npu service's priorities and load
    policy (--npu-policy, or your own with --npu-policy-file FILE.py:CLASS) are
    part of what is measured.

    \b
    Examples:
      npuemu bench scheduling
      npuemu bench scheduling phone --policy fcfs --policy preempt-ckpt --no-sweep
      npuemu bench scheduling my.toml --driver build/drivers/mine.so --k 5 --seed 3
      npuemu bench scheduling mixed --policy fcfs --policy prema --no-sweep
      npuemu bench scheduling phone --whole-stack --no-sweep --npu-policy budget
      npuemu bench scheduling phone --seeds 1,2,3,4 --workers 2
      npuemu bench scheduling phone --whole-stack --no-sweep --npu-policy-file mine.py:MyPolicy
    """
    from framework import lab

    started = time.monotonic()
    directory = lab.default_workloads_dir()
    skipped: list[Path] = []
    if workloads:
        paths = [_resolve_workload(w, directory) for w in workloads]
    else:
        paths = sorted(directory.glob("*.toml"))
        if not paths:
            raise click.ClickException(f"no bundled workloads in {directory}; name a workload file")
        try:
            skipped = [p for p in paths if not lab.load_workload(p).default_run]
        except lab.LabError as e:
            raise click.ClickException(str(e)) from None
        paths = [p for p in paths if p not in skipped]
    sweep_loads = _loads(loads)
    plugin = load_npu_policy(npu_policy_file, npu_policy_params)
    if plugin is not None and not whole_stack:
        raise click.UsageError("--npu-policy-file is the npu service's policy: it needs --whole-stack")
    builtin = {p.name: p for p in lab.builtin_policies()}
    # The Python policies (PREMA and the paper's baselines) hold the queue in the
    # lab itself: driver mode only.
    python = {p.name: p for p in lab.python_policies()}
    known = {**builtin, **python}
    unknown = [n for n in policy_names if n not in known]
    if unknown:
        raise click.BadParameter(f"unknown policy {unknown[0]!r} (known: {', '.join(known)})", param_hint="--policy")
    say = (lambda _m: None) if quiet else (lambda m: click.echo(m, err=True))
    seeds = _seeds(seeds_text)
    out = Path(out_dir)
    done_points: list[dict] = []
    for p in skipped:
        say(f"{p.stem}: not in a bare run (default_run = false: it takes minutes); "
            f"run it by name: npuemu bench scheduling {p.stem}")
    try:
        if policy_names:
            policies = [known[n] for n in dict.fromkeys(policy_names)]
        else:
            # A bare run (every bundled workload) adds PREMA alone, to stay short; a
            # named workload gets the paper's baselines and PREMA's variants too.
            extra = [] if whole_stack else list(python.values()) if workloads else [python["prema"]]
            policies = list(builtin.values()) + extra
        policies += [lab.driver_policy(d) for d in drivers]
        policies += [lab.policy_file(f) for f in policy_files]
        grid = []
        for path in paths:
            workload = lab.load_workload(path)
            if seed is not None:
                workload = workload.with_seed(seed)
            if sla_k is not None:
                workload = workload.with_sla_k(sla_k)
            if sweep_loads is not None:
                workload = workload.with_sweep(sweep_loads)
            grid += [workload.with_seed(s) for s in seeds] if seeds else [workload]
        with lab.open_executor(workers=workers, scheduler=scheduler) as executor, \
                _progress_bar(quiet) as bar:

            def point_done(p: dict) -> None:
                bar.total = p["total"]
                bar.update(1)
                if p["error"] is None and p["value"] is not None:
                    done_points.append({**p["params"], "summary": p["value"]})

            result = lab.run_grid(grid, policies, sweep=not no_sweep, progress=say, on_point=point_done,
                                  whole_stack=whole_stack, npu_policy=npu_policy if plugin is None else plugin,
                                  executor=executor)
        for i, report in enumerate(result.reports):
            # The key to the columns once, under the first table.
            click.echo(lab.format_report(report, key=i == 0))
            click.echo("")
        document = lab.report_json(result.reports, seed_override=seed)
        document["failures"] = result.failures
        json_path = lab.write_json(document, out / "scheduling.json")
        written = [json_path]
        if not no_plot:
            written += [lab.plot_report(r, out / _plot_name(r, len(seeds) > 1)) for r in result.reports]
    except KeyboardInterrupt:
        partial = lab.write_json({"lab": "npuemu scheduling lab, interrupted", "points": done_points},
                                 out / "scheduling.partial.json")
        click.echo(f"interrupted: {len(done_points)} finished runs kept in {partial}", err=True)
        raise SystemExit(130) from None
    except (lab.LabError, OSError) as e:
        raise click.ClickException(str(e)) from None
    for f in result.failures:
        where = ", ".join(f"{k} {f[k]}" for k in ("workload", "seed", "stage", "policy", "load") if f.get(k) is not None)
        click.echo(f"failed: {where}: {f['error']}", err=True)
    click.echo("wrote " + ", ".join(str(p) for p in written) + f" in {time.monotonic() - started:.1f} s")
    if result.failures:
        raise SystemExit(1)


def _seeds(text: str | None) -> list[int]:
    if text is None:
        return []
    try:
        seeds = [int(x) for x in text.split(",")]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of integers", param_hint="--seeds") from None
    if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise click.BadParameter(f"seeds must be distinct integers >= 0, got {text!r}", param_hint="--seeds")
    return seeds


def _plot_name(report: Any, by_seed: bool) -> str:
    return f"{report.workload.name}-seed{report.workload.seed}.png" if by_seed else f"{report.workload.name}.png"


def _progress_bar(quiet: bool) -> Any:
    from tqdm import tqdm

    # On a terminal only (disable=None), so logs and CI output stay plain.
    return tqdm(total=0, unit="point", desc="points", disable=True if quiet else None, leave=False, file=sys.stderr)
