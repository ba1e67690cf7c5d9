"""``npuemu lab``: tools for policy engineers (``check-policy``)."""

from __future__ import annotations

import click

from ._common import CliError, load_npu_policy

__all__ = ["lab_group"]


@click.group("lab")
def lab_group() -> None:
    """Tools for policy engineers: check a load policy of your own."""


@lab_group.command("check-policy")
@click.argument("spec", metavar="FILE.py:CLASS")
@click.option("--params", metavar="JSON", default=None, help="The policy's parameters: a JSON object for its from_params.")
@click.option("--examples", type=click.IntRange(min=1), default=200, show_default=True,
              help="How many random runs of the state machine.")
@click.option("--steps", type=click.IntRange(min=1), default=40, show_default=True, help="Inputs per run.")
def check_policy(spec: str, params: str | None, examples: int, steps: int) -> None:
    """Check an npu load policy against the npu service's invariants.

    Runs the npu service's state machine (the invariants its built-in
    policies are tested against: budget, heat, fairness, turns, rule 6, every
    request answered and ended once) with the policy FILE.py:CLASS, a
    framework.server.NpuPolicy subclass. Prints "ok", or the first violated
    invariant with the event that broke it and the shortest sequence of
    inputs that shows it (exit status 1). Deterministic: the same policy gets
    the same runs.

    \b
    Examples:
      npuemu lab check-policy mine.py:MyPolicy
      npuemu lab check-policy mine.py:MyPolicy --examples 100 --steps 80
    """
    from framework import lab  # imported when used, as bench does: the lab (and hypothesis) cost every command 2 s

    load_npu_policy(spec, params)  # a file that will not load fails here, once, with its reason
    result = lab.check_policy(lambda: load_npu_policy(spec, params), examples=examples, steps=steps)
    if result.ok:
        click.echo(f"ok: policy {result.policy} kept every invariant over {examples} runs of {steps} inputs")
        return
    click.echo(f"FAILED: policy {result.policy} broke invariant {result.invariant!r}")
    click.echo(f"  {result.error}")
    click.echo("inputs (shortest sequence found):")
    for line in result.steps.splitlines():
        click.echo(f"  {line}")
    raise CliError(f"policy {result.policy}: invariant {result.invariant} violated")
