"""The AIDL compiler, ahead of time: the committed modules are current, typed and readable,
a user's AIDL goes through the same compiler, and nothing parses AIDL at run time."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import linecache
import shutil
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest
from click.testing import CliRunner

from framework.binder import AidlError, AidlRegistry, BadParcelableException
from framework.binder._aidl import parse_aidl, resolve
from framework.binder.aidl_support import definitions_of
from framework.binder.aidlc import compile_definitions, compile_tree, orphan_modules, stale_files
from framework.cli import main
from framework.cli._aidl import npuemu_trees
from interfaces.android.hardware import npu
from interfaces.android.hardware.npu import IScheduling, SchedulingConfig, WorkInfo
from interfaces.android.hardware.thermal import ThrottlingSeverity
from interfaces.npuemu.hal import MemoryPressure


@pytest.mark.parametrize("tree", npuemu_trees(), ids=lambda t: t[1])
def test_the_committed_modules_are_what_the_compiler_writes(tree) -> None:
    root, package, include = tree
    files = compile_tree(root, package, include)
    assert files, f"no modules compiled from {root}"
    stale = stale_files(files) + orphan_modules(root, files)
    assert not stale, f"stale generated modules (run `make aidl`): {[str(p) for p in stale]}"


def test_an_edited_aidl_file_makes_its_module_stale(tmp_path: Path) -> None:
    root, package, include = npuemu_trees()[1]
    copy = tmp_path / "interfaces"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert stale_files(compile_tree(copy, package, include)) == []
    aidl = copy / "android/hardware/npu/WorkInfo.aidl"
    aidl.write_text(aidl.read_text().replace("int deviceNumber;", "int deviceNumber;\n    int added;"))
    assert stale_files(compile_tree(copy, package, include)) == [copy / "android/hardware/npu/__init__.py"]
    result = CliRunner().invoke(main, ["aidl", str(copy), "--package", package, "--check"])
    assert result.exit_code == 1 and "stale: " in result.output and "run `make aidl`" in result.output
    for gone in (copy / "npuemu/server").glob("*.aidl"):  # the package's files go: its module is orphaned
        gone.unlink()
    assert orphan_modules(copy, compile_tree(copy, package, include)) == [copy / "npuemu/server/__init__.py"]


def test_generated_types_are_typed_python() -> None:
    assert WorkInfo.__module__ == "interfaces.android.hardware.npu"
    assert dataclasses.is_dataclass(WorkInfo)
    assert [f.name for f in dataclasses.fields(WorkInfo)] == list(WorkInfo.__slots__)
    info = WorkInfo(uid=10001, jobPriority=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.uid = 1  # type: ignore[misc]
    assert issubclass(npu.EndReason, enum.IntEnum) and npu.EndReason.COMPLETED == 4
    assert SchedulingConfig().maxPriority == 2000  # the declared default
    assert IScheduling.MAX_PRIORITY == 1000 and IScheduling.DESCRIPTOR == "android.hardware.npu.IScheduling"
    # Real signatures a reader and a type checker can follow past the proxy.
    call = IScheduling.Proxy.setSchedulingConfigs
    assert list(inspect.signature(call).parameters) == ["self", "configs"]
    assert typing.get_type_hints(call) == {"configs": list[SchedulingConfig], "return": type(None)}
    assert [m.code for m in IScheduling.definition.methods] == [1, 2, 3]
    # The codec is the one the wire has always had: an array in field order.
    assert info.to_wire()[2] == 10001 and WorkInfo.from_wire(info.to_wire()) == info
    with pytest.raises(BadParcelableException, match=r"android\.hardware\.npu\.WorkInfo\.uid: expected int"):
        WorkInfo.from_wire([1, None, "x"])
    assert {d.name for d in definitions_of(npu)} >= {"android.hardware.npu.WorkInfo", "android.hardware.npu.IScheduling"}


USER_AIDL = {
    "com/example/vision/IVision.aidl": """
        package com.example.vision;
        import android.hardware.npu.WorkInfo;
        import com.example.vision.Frame;
        /** An app's own service. */
        interface IVision {
            const int VERSION = 2;
            Frame describe(in Frame frame, in WorkInfo work);
        }
    """,
    "com/example/vision/Frame.aidl": """
        package com.example.vision;
        parcelable Frame { int width = 640; int height; byte[] pixels; }
    """,
}


def test_a_users_aidl_compiles_through_npuemu_aidl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "visionaidl"
    for rel, text in USER_AIDL.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    result = CliRunner().invoke(main, ["aidl", str(root)])
    assert result.exit_code == 0, result.output
    module = root / "com/example/vision/__init__.py"
    assert f"wrote {module}" in result.output
    source = module.read_text()
    assert "from interfaces.android.hardware.npu import WorkInfo" in source  # the shipped vocabulary
    assert "async def describe(self, frame: Frame, work: WorkInfo) -> Frame:" in source
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        from visionaidl.com.example.vision import Frame, IVision

        assert Frame().width == 640 and IVision.VERSION == 2
        method = IVision.definition.method("describe")
        wire = method.encode_call((Frame(height=1), WorkInfo(uid=3)), None)
        frame, work = method.decode_call(wire, None)
        assert frame == Frame(height=1) and type(work) is WorkInfo and work.uid == 3
    finally:
        for name in [n for n in sys.modules if n.startswith("visionaidl")]:
            del sys.modules[name]
    again = CliRunner().invoke(main, ["aidl", str(root), "--check"])
    assert again.exit_code == 0 and again.output == ""


def test_aidl_loaded_in_memory_is_the_module_the_compiler_writes() -> None:
    # AidlRegistry.load / from_text have no codec of their own: they import the text
    # compile_definitions writes (what `npuemu aidl` puts on disk), and a traceback or
    # inspect shows its lines.
    text = "package a; parcelable P { int x = 1; @nullable String s; }"
    P = AidlRegistry.from_text(text).parcelable("a.P")
    written = compile_definitions(resolve([parse_aidl(text, "<aidl 0>", root=None, path=Path("<aidl 0>"))]),
                                  lambda package: package)["a"]
    assert "".join(linecache.getlines(P.to_wire.__code__.co_filename)) == written
    assert "def to_wire(self, ctx: Any = None) -> list:" in inspect.getsource(P.to_wire)


def test_a_broken_user_aidl_file_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "broken"
    (root / "a").mkdir(parents=True)
    (root / "a/P.aidl").write_text("package a;\nparcelable P {\n    Missing m;\n}\n")
    result = CliRunner().invoke(main, ["aidl", str(root)])
    assert result.exit_code == 1
    assert result.output.strip() == f"npuemu: error: {root / 'a/P.aidl'}:3:5: unknown type Missing"
    assert not (root / "a/__init__.py").exists()
    assert issubclass(AidlError, Exception)


def test_the_stack_parses_no_aidl_when_it_starts() -> None:
    code = textwrap.dedent("""
        import framework.binder, framework.emulator, framework.npumanager, framework.server, framework.vts, npuhal
        import interfaces.android.hardware.neuralnetworks, interfaces.android.hardware.npu
        import interfaces.android.npumanager, interfaces.npuemu.hal, interfaces.npuemu.server
        from framework.binder import _aidl
        import framework.binder.aidl.android.os
        assert _aidl._parser.cache_info().currsize == 0, "an AIDL file was parsed at run time"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_importing_the_generated_modules_runs_no_exec_eval_or_compile() -> None:
    # Every codec is Python the compiler wrote, so a reader (and a tool) can follow a call
    # into it; nothing is made at import. The audit hook sees each exec, eval and compile
    # whoever calls them; only the import system's own (running a module's code) may pass.
    code = textwrap.dedent("""
        import sys
        import framework.binder  # the binder itself first (it imports the servicemanager's module)
        del sys.modules["framework.binder.aidl.android.os"]  # which is imported again below
        seen = []

        def hook(event, args):
            if event in ("exec", "compile"):
                caller = sys._getframe(1).f_globals.get("__name__")
                if caller not in ("importlib._bootstrap", "importlib._bootstrap_external"):
                    seen.append(f"{event} from {caller}")

        sys.addaudithook(hook)
        from framework.binder.aidl.android import os as servicemanager
        from interfaces.android.hardware import neuralnetworks as nn, npu
        from interfaces.android import npumanager
        from interfaces.npuemu import hal, server
        info = npu.WorkInfo(uid=10001, groupId=npu.NpuUuid(), debugFeatureId="x")
        assert npu.WorkInfo.from_wire(info.to_wire()) == info
        model = nn.Model(main=nn.Subgraph(operands=[nn.Operand(dimensions=[1, 2])], inputIndexes=[0]))
        prepare = nn.IDevice.definition.method("prepareModel")
        args = (model, nn.ExecutionPreference.LOW_POWER, nn.Priority.LOW, 0, 0, None)
        assert prepare.decode_call(prepare.encode_call(args, None), None) == args
        print(seen or "ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr[-2000:]


# No hand-written class carries the name of an AIDL enum or parcelable (issue 13 point 2),
# except these, which share an AIDL type's name but are the NDK's, not the HAL's: an app's
# NNAPI calls take them, and they differ from the HAL's type of the same name. A new
# mirror fails the test below, and so does leaving an entry here once its class is gone.
_NDK_NAMES = {
    # ANeuralNetworksModel: a builder (addOperand ... finish) an app fills in; finished, it
    # gives the HAL's Model parcelable.
    ("framework/nn/_model.py", "Model"): "ANeuralNetworksModel, the NDK's builder",
    # ANEURALNETWORKS_PRIORITY_*: 90/100/110 where the HAL's Priority is 0/1/2;
    # Priority.halValue is the one conversion.
    ("framework/nn/_types.py", "Priority"): "the NDK's PRIORITY_* codes",
}

# Other names an AIDL type goes by in the layers (the C header's and the NDK's): a
# hand-written class of such a name is a mirror too. The name itself is the compiled class.
_ALIASES = {"FuseCode": "FusedActivationFunc"}


def _stack_definitions() -> list:
    """The definitions of every AIDL package of the stack, as compiled into ``interfaces``."""
    import interfaces.android.hardware.neuralnetworks
    import interfaces.android.hardware.thermal
    import interfaces.android.npumanager
    import interfaces.npuemu.hal
    import interfaces.npuemu.server

    modules = (interfaces.android.hardware.neuralnetworks, npu, interfaces.android.hardware.thermal,
               interfaces.android.npumanager, interfaces.npuemu.hal, interfaces.npuemu.server)
    return [d for m in modules for d in definitions_of(m)]


def _hand_written_nodes():
    """(path, node) for every AST node of the layers' hand-written Python."""
    import ast

    repo = Path(__file__).resolve().parents[1]
    for top in ("npuhal", "framework", "apps", "bench"):
        for path in sorted((repo / top).rglob("*.py")):
            source = path.read_text()
            if not source.startswith("# Generated by the AIDL compiler"):
                for node in ast.walk(ast.parse(source)):
                    yield path.relative_to(repo).as_posix(), node


def test_no_layer_writes_an_aidl_constant_again() -> None:
    """A number the AIDL declares as a constant is read from the compiled interface, not
    written again under the same name (``MAX_PRIORITY = 1000``)."""
    import ast

    constants = {name for d in _stack_definitions() for name in getattr(d, "constants", {})}
    assert {"MAX_PRIORITY", "DEBOUNCE_DURATION_MS", "MAX_NUMBER_OF_CACHE_FILES"} <= constants
    found = []
    for path, node in _hand_written_nodes():
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        literal = isinstance(getattr(node, "value", None), ast.Constant)
        for target in targets:
            if isinstance(target, ast.Name) and literal and target.id.lstrip("_") in constants:
                found.append(f"{path}:{node.lineno} {target.id}")
    assert found == []


def test_no_layer_writes_an_aidl_type_again() -> None:
    import ast

    aidl_types = {d.name.rpartition(".")[2] for d in _stack_definitions() if not hasattr(d, "methods")}
    assert set(_ALIASES.values()) <= aidl_types
    aidl_types |= _ALIASES.keys()
    found = {(path, node.name) for path, node in _hand_written_nodes() if isinstance(node, ast.ClassDef) and node.name in aidl_types}
    assert found == set(_NDK_NAMES)
    # The HAL's own enums are the compiled ones, and C's are checked against them at import.
    import npuhal
    from interfaces.android.hardware import neuralnetworks

    assert npuhal.EndReason is npu.EndReason and npuhal.StartReason is npu.StartReason
    assert npuhal.DeviceType is neuralnetworks.DeviceType and npuhal.OperationType is neuralnetworks.OperationType
    assert npuhal.OperandLifeTime is neuralnetworks.OperandLifeTime and npuhal.PerformanceInfo is neuralnetworks.PerformanceInfo
    assert npuhal.SchedulingConfig is npu.SchedulingConfig and npuhal.WorkInfo is npu.WorkInfo
    assert npuhal.MemoryPressure is MemoryPressure
    assert npuhal.ThermalSeverity is ThrottlingSeverity
    assert npuhal.FuseCode is neuralnetworks.FusedActivationFunc
    # ... and the app-side runtime's are the same classes.
    import framework.nn

    for name in ("DeviceType", "DeviceStatus", "ExecutionPreference", "OperandLifeTime", "OperandType", "OperationType",
                 "ErrorStatus", "PerformanceInfo", "Capabilities"):
        assert getattr(framework.nn, name) is getattr(neuralnetworks, name), name
    for alias, name in _ALIASES.items():
        assert getattr(framework.nn, alias) is getattr(neuralnetworks, name), alias
    assert framework.nn.OperandType is npuhal.OperandType
    # The runtime's in-memory model holds the compiled Subgraph (its Operand, Operation and
    # DataLocation values), and npuhal has no model class: the driver takes the parcelable.
    assert framework.nn.HalModel.__dataclass_fields__["main"].type == "Subgraph"
    assert not hasattr(npuhal, "Model") and not hasattr(framework.nn, "DataLocation")
