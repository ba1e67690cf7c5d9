"""DESIGN.md's layering table, checked over the whole tree.

An ast walk of every module of ``npuhal``, ``framework``, ``interfaces``, ``apps`` and
``bench`` (``tests`` may import anything). Every import counts, wherever it is
written: at the top of a module, inside a function (a lazy import is still a
dependency), or under ``if TYPE_CHECKING:`` (for the upward and private rules; such an
import never runs, so it closes no cycle). The contract:

- **No upward import.** Each layer imports only the layers its row of ``LAYERS``
  names (the table of DESIGN.md and the README's design section).
- **No private import across layers.** A module of one layer names no ``_x`` module
  (or ``_x`` name) of another; what another layer needs is re-exported through the
  package's public face.
- **No cycle.** No module imports, directly or through others, a module that imports
  it, with the imports hidden in functions counted: a cycle dodged by a lazy import
  is still a cycle.
"""

from __future__ import annotations

import ast
import collections
import importlib.machinery
import pathlib
import textwrap
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
TREES = ("npuhal", "framework", "interfaces", "apps", "bench")

BINDER = "framework.binder"
INTERFACES = {"interfaces"}  # every .aidl file and the modules compiled from it
SYSTEM = {BINDER, *INTERFACES, "npuhal", "framework.npumanager", "framework.nn", "framework.server"}

#: layer -> the layers it may import (DESIGN.md's "may import" column). A module
#: belongs to the longest layer name that prefixes it.
LAYERS: dict[str, set[str]] = {
    BINDER: set(),
    "interfaces": {BINDER},
    "npuhal": {BINDER, *INTERFACES},
    "framework.npumanager": {BINDER, *INTERFACES},
    "framework.nn": {BINDER, *INTERFACES},
    "framework.server": {BINDER, *INTERFACES, "framework.npumanager"},
    "framework.app": {BINDER, *INTERFACES, "framework.npumanager", "framework.nn"},
    "framework.emulator": SYSTEM | {"framework.app"},
    "framework.lab": SYSTEM | {"framework.app", "framework.emulator"},
    # The tools side: what judges a layer lives outside it (the conformance suite judges the HAL).
    "framework.vts": SYSTEM | {"framework.app", "framework.emulator"},
    "framework.cli": SYSTEM | {"framework.app", "framework.emulator", "framework.lab", "framework.vts"},
    # The sample apps use the app-side APIs only (binder for its exceptions), as a third-party app would.
    "apps": {BINDER, "framework.app", "framework.npumanager", "framework.nn"},
    "bench": SYSTEM | {"framework.app", "framework.emulator", "framework.lab", "framework.vts", "framework.cli", "apps"},
}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # the module imported (the longest known prefix of what is named)
    name: str | None  # for ``from m import name``: the name, when it is not a module
    line: int
    hidden: bool  # inside a function
    type_only: bool  # under ``if TYPE_CHECKING:``

    def __str__(self) -> str:
        what = f"{self.target}.{self.name}" if self.name else self.target
        return f"{self.importer}:{self.line} imports {what}{' (in a function)' if self.hidden else ''}"


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root).parts)
    parts[-1] = parts[-1].split(".")[0]  # foo.py, foo.abi3.so
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def collect_modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module of the trees: Python sources and compiled extensions."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES) + (".py",)
    modules = {}
    for tree in TREES:
        if not (root / tree).is_dir():
            continue
        for path in sorted((root / tree).rglob("*")):
            if path.is_file() and path.name.endswith(suffixes) and "__pycache__" not in path.parts:
                modules[_module_name(path, root)] = path
    return modules


def _known_prefix(name: str, modules: dict[str, pathlib.Path]) -> str | None:
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in modules:
            return candidate
    return None


def imports_of(module: str, source: str, modules: dict[str, pathlib.Path], is_package: bool) -> list[Import]:
    tree = ast.parse(source)
    found: list[Import] = []

    def visit(node: ast.AST, hidden: bool, type_only: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            hidden = True
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, hidden, True)
            for child in node.orelse:
                visit(child, hidden, type_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known_prefix(alias.name, modules)
                if target is not None:
                    found.append(Import(module, target, None, node.lineno, hidden, type_only))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                absolute = ".".join(base + ([node.module] if node.module else []))
            else:
                absolute = node.module or ""
            for alias in node.names:
                submodule = f"{absolute}.{alias.name}"
                # A module of the tree, or (``from . import _npu``) a compiled extension not built yet.
                if submodule in modules or (node.level and _is_private(alias.name) and submodule not in modules
                                            and absolute in modules and modules[absolute].name == "__init__.py"):
                    found.append(Import(module, submodule, None, node.lineno, hidden, type_only))
                    continue
                # A relative import names a module of this tree even when it is not built yet.
                target = absolute if node.level else _known_prefix(absolute, modules)
                if target is not None:
                    name = alias.name if target == absolute else None
                    found.append(Import(module, target, name, node.lineno, hidden, type_only))
        for child in ast.iter_child_nodes(node):
            visit(child, hidden, type_only)

    visit(tree, False, False)
    return found


def layer_of(module: str) -> str | None:
    """The layer of a module: the longest row of LAYERS prefixing it (None: a bare root package)."""
    best = None
    for layer in LAYERS:
        if (module == layer or module.startswith(layer + ".")) and (best is None or len(layer) > len(best)):
            best = layer
    return best


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def violations(root: pathlib.Path) -> dict[str, list[str]]:
    modules = collect_modules(root)
    found: list[Import] = []
    for module, path in modules.items():
        if path.suffix == ".py":
            found += imports_of(module, path.read_text(), modules, path.name == "__init__.py")
    problems: dict[str, list[str]] = {"unplaced": [], "upward": [], "private": [], "cycle": []}
    for module in modules:
        if layer_of(module) is None and module not in ("framework",):
            problems["unplaced"].append(f"{module} is in no layer of LAYERS")
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for imp in found:
        src, dst = layer_of(imp.importer), layer_of(imp.target)
        if dst is None:  # the bare ``framework`` namespace: nothing in it
            continue
        if src != dst:
            if dst not in LAYERS.get(src, set()):
                problems["upward"].append(f"{imp}: {src} may not import {dst}")
            inner = imp.target[len(dst) :].split(".") + ([imp.name] if imp.name else [])
            if any(_is_private(p) for p in inner if p):
                problems["private"].append(f"{imp}: a private module or name of {dst}")
        if not imp.type_only:
            graph[imp.importer].add(imp.target)
            # Importing a.b.c first imports a and a.b: an edge to each package one is not inside.
            parts = imp.target.split(".")
            for n in range(1, len(parts)):
                parent = ".".join(parts[:n])
                if parent in modules and not (imp.importer == parent or imp.importer.startswith(parent + ".")):
                    graph[imp.importer].add(parent)
    problems["cycle"] = [" -> ".join(cycle) for cycle in find_cycles(graph)]
    return problems


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {d for ds in graph.values() for d in ds})
    # Tarjan's algorithm, iteratively (no recursion limit on a deep tree).
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    components.append(sorted(component))
    cycles = []
    for component in components:
        members = set(component)
        # A shortest way back to the first member, for the message.
        first = component[0]
        paths = {first: [first]}
        queue = collections.deque([first])
        cycle = None
        while queue and cycle is None:
            node = queue.popleft()
            for child in sorted(graph.get(node, ())):
                if child == first:
                    cycle = paths[node] + [first]
                    break
                if child in members and child not in paths:
                    paths[child] = paths[node] + [child]
                    queue.append(child)
        cycles.append(cycle or component)
    return cycles


def test_the_tree_keeps_the_layering_table():
    problems = violations(ROOT)
    report = "\n".join(f"{kind}: {line}" for kind, lines in problems.items() for line in lines)
    assert not report, "\n" + report


# The checker itself: each rule fails on a tree that breaks it.


def _tree(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


BASE = {
    "framework/__init__.py": "",
    "framework/binder/__init__.py": "from ._runtime import Binder as Binder\n",
    "framework/binder/_runtime.py": "class Binder: pass\n",
    "framework/binder/_status.py": "class Oops(Exception): pass\n",
    "npuhal/__init__.py": "from ._hal import serve as serve\n",
    "npuhal/_hal.py": "from framework.binder import Binder\ndef serve(): pass\n",
    "npuhal/_device.py": "from ._hal import serve\n",
}


def test_a_clean_tree_passes(tmp_path):
    assert violations(_tree(tmp_path, BASE)) == {"unplaced": [], "upward": [], "private": [], "cycle": []}


def test_an_upward_import_fails_even_in_a_function(tmp_path):
    files = dict(BASE)
    files["framework/binder/_runtime.py"] = "class Binder:\n    def f(self):\n        import npuhal\n"
    problems = violations(_tree(tmp_path, files))
    assert problems["upward"] == [
        "framework.binder._runtime:3 imports npuhal (in a function): framework.binder may not import npuhal"
    ]


def test_a_private_import_fails(tmp_path):
    files = dict(BASE)
    files["npuhal/_device.py"] = "from framework.binder._status import Oops\n"
    files["npuhal/_scheduling.py"] = "from framework.binder import _status\n"
    files["npuhal/_control.py"] = "from framework.binder import _hidden_name\n"
    problems = violations(_tree(tmp_path, files))
    assert len(problems["private"]) == 3
    assert problems["upward"] == []


def test_a_cycle_hidden_in_a_function_fails(tmp_path):
    files = dict(BASE)
    files["npuhal/_hal.py"] = "def serve():\n    from ._device import x\n"
    files["npuhal/_device.py"] = "from ._hal import serve\nx = 1\n"
    assert violations(_tree(tmp_path, files))["cycle"] == ["npuhal._device -> npuhal._hal -> npuhal._device"]


def test_a_cycle_through_another_package_fails(tmp_path):
    files = dict(BASE)
    files["framework/binder/_runtime.py"] = "from framework.binder import _status\nclass Binder: pass\n"
    files["framework/binder/__init__.py"] = "from ._runtime import Binder as Binder\nfrom ._status import Oops as Oops\n"
    # A package's modules may import each other through the package (they are inside it).
    assert violations(_tree(tmp_path, files))["cycle"] == []
    files["framework/binder/_status.py"] = "import npuhal\nclass Oops(Exception): pass\n"
    problems = violations(_tree(tmp_path, files))
    assert problems["upward"] and problems["cycle"]


def test_a_type_checking_import_closes_no_cycle_but_must_still_point_down(tmp_path):
    files = dict(BASE)
    files["npuhal/_hal.py"] = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._device import x\n"
    assert violations(_tree(tmp_path, files))["cycle"] == []
    files["framework/binder/_runtime.py"] = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import npuhal\n"
    assert violations(_tree(tmp_path, files))["upward"]


def test_a_module_outside_every_layer_is_reported(tmp_path):
    files = dict(BASE)
    files["framework/newthing/__init__.py"] = ""
    assert violations(_tree(tmp_path, files))["unplaced"] == ["framework.newthing is in no layer of LAYERS"]


@pytest.mark.parametrize("module, layer", [
    ("framework.binder._runtime", BINDER),
    ("framework.binder", BINDER),
    ("npuhal._hal", "npuhal"),
    ("framework.vts._suite", "framework.vts"),
    ("apps.camera.main", "apps"),
    ("framework", None),
])
def test_layer_of(module, layer):
    assert layer_of(module) == layer


# Public faces: what other layers may import.


def _public_faces() -> list[pathlib.Path]:
    """Every package ``__init__`` that re-exports from its private modules, and every public
    module that is nothing but such re-exports."""
    faces = []
    for module, path in collect_modules(ROOT).items():
        if path.suffix != ".py" or any(_is_private(p) for p in module.split(".")) or path.stem == "__main__":
            continue
        body = ast.parse(path.read_text()).body
        reexports = [n for n in body if isinstance(n, ast.ImportFrom) and n.level == 1
                     and _is_private((n.module or "_").split(".")[0])]
        only_imports = all(
            isinstance(n, (ast.ImportFrom, ast.Import)) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
            or (isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"])
            for n in body
        )
        if reexports and (path.name == "__init__.py" or only_imports):
            faces.append(path)
    return faces


def test_every_package_with_a_public_face_is_checked():
    names = {_module_name(p, ROOT) for p in _public_faces()}
    assert {"apps", "framework.binder", "framework.cli", "framework.emulator", "framework.lab", "framework.nn",
            "framework.npumanager", "framework.server", "framework.app", "framework.vts", "npuhal"} <= names


@pytest.mark.parametrize("path", _public_faces(), ids=lambda p: _module_name(p, ROOT))
def test_each_public_name_is_exported_exactly_once_from_its_own_modules(path):
    import importlib

    module = _module_name(path, ROOT)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    face = importlib.import_module(module)
    exported: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)  # name -> [(source, its name)]
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            assert node.level == 1, f"{module} re-exports only from its own modules, not {node.module!r}"
            for alias in node.names:
                exported[alias.asname or alias.name].append((f"{package}.{node.module}", alias.name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            assert _is_private(node.name), f"{module} defines {node.name} itself: a public face only re-exports"
    twice = sorted(n for n, sources in exported.items() if len(sources) > 1)
    assert not twice, f"{module} exports {twice} more than once"
    public = {n for n, v in vars(face).items() if not n.startswith("_") and not isinstance(v, type(face))}
    assert public == set(exported), f"{module}: public names not re-exported from a private module: {public ^ set(exported)}"
    for name, [(source, original)] in exported.items():
        declared = getattr(importlib.import_module(source), "__all__", None)
        assert declared is None or original in declared or _is_private(original), (
            f"{module}.{name} is not in {source}.__all__"
        )


def test_the_framework_layout_names_every_folder():
    doc = ast.get_docstring(ast.parse((ROOT / "framework" / "__init__.py").read_text()))
    folders = sorted(p.name for p in (ROOT / "framework").iterdir() if (p / "__init__.py").is_file())
    missing = [f for f in folders if f"``{f}/``" not in doc]
    assert not missing, f"framework/__init__.py's layout does not name {missing}"
    for layer in LAYERS:
        if layer.startswith("framework."):
            assert f"``{layer.split('.')[1]}/``" in doc, layer
