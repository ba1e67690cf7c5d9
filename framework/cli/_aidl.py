"""``npuemu aidl``: the AIDL compiler, ahead of time, as Android's ``aidl`` tool.

Each AIDL package's ``.aidl`` files become one Python module, the ``__init__.py`` of
their directory: enums as ``IntEnum``, parcelables as frozen dataclasses with their
codec, interfaces with a ``Stub`` to implement and a ``Proxy`` to call. Without ROOT it
compiles npuemu's own trees (``interfaces/`` and the binder's ``framework/binder/aidl/``),
which is what ``make aidl`` runs after an ``.aidl`` file changes; the modules are
committed and ``tests/test_binder_aidlc.py`` fails while one is stale.
"""

from __future__ import annotations

from pathlib import Path

import click

import framework.binder.aidl
import interfaces
from framework.binder import AidlError
from framework.binder.aidlc import compile_tree, orphan_modules, stale_files, write_files

from ._common import EXIT_FAILED, EXIT_USAGE, CliError

__all__ = ["aidl", "npuemu_trees"]


def _package_dir(package: object) -> Path:
    return Path(next(iter(package.__path__)))  # type: ignore[attr-defined]


def npuemu_trees() -> list[tuple[Path, str, dict[Path, str]]]:
    """npuemu's own AIDL trees: (root, its Python package, the trees it may import from)."""
    binder = _package_dir(framework.binder.aidl)
    return [
        (binder, "framework.binder.aidl", {}),
        (_package_dir(interfaces), "interfaces", {binder: "framework.binder.aidl"}),
    ]


def _include(value: tuple[str, ...]) -> dict[Path, str]:
    out = {}
    for item in value:
        root, sep, package = item.partition("=")
        if not sep or not root or not package:
            raise CliError(f"--include takes DIR=PACKAGE, got {item!r}", EXIT_USAGE)
        if not Path(root).is_dir():
            raise CliError(f"--include {item}: {root} is not a directory", EXIT_USAGE)
        out[Path(root)] = package
    return out


@click.command()
@click.argument("root", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--package", "package", metavar="NAME", help="ROOT's Python package (default: ROOT's directory name).")
@click.option(
    "-I", "--include", "include", multiple=True, metavar="DIR=PACKAGE",
    help="Another compiled tree ROOT's files import from (npuemu's own trees always are).",
)
@click.option("--check", is_flag=True, help="Write nothing; list the stale modules and exit 1 if any.")
def aidl(root: Path | None, package: str | None, include: tuple[str, ...], check: bool) -> None:
    """Compile .aidl files into typed Python modules, as Android's aidl tool does.

    ROOT holds .aidl files in the directories their packages name
    (ROOT/com/example/IFoo.aidl declares package com.example); each package
    becomes ROOT/com/example/__init__.py, importable as PACKAGE.com.example.
    Without ROOT, npuemu's own trees are compiled (what `make aidl` does).

    \b
    Example:
      npuemu aidl myapp/aidl --package myapp.aidl
      npuemu aidl --check
    """
    if root is None:
        if package or include:
            raise CliError("--package and --include need a ROOT", EXIT_USAGE)
        jobs = npuemu_trees()
    else:
        if not root.is_dir():
            raise CliError(f"{root} is not a directory", EXIT_USAGE)
        if not any(root.rglob("*.aidl")):
            raise CliError(f"no .aidl files under {root}", EXIT_USAGE)
        package = package or root.resolve().name
        # npuemu's trees, unless ROOT is (a copy of) one of them
        includes = {r: p for r, p, _ in npuemu_trees() if p != package}
        includes.update(_include(include))
        jobs = [(root, package, includes)]
    stale: list[Path] = []
    for tree, pkg, inc in jobs:
        try:
            files = compile_tree(tree, pkg, inc)
        except AidlError as e:
            raise CliError(str(e), EXIT_FAILED) from None
        orphans = orphan_modules(tree, files)
        if check:
            stale += stale_files(files) + orphans
            continue
        for path in write_files(files):
            click.echo(f"wrote {path}")
        for path in orphans:
            path.unlink()
            click.echo(f"removed {path} (its package has no .aidl files any more)")
    if check and stale:
        for path in stale:
            click.echo(f"stale: {path}", err=True)
        raise CliError(f"{len(stale)} generated module(s) are stale: run `make aidl`", EXIT_FAILED)
