"""The AIDL loader: every construct npuemu's .aidl files use, and the errors a typo gets."""

from __future__ import annotations

import enum
import textwrap
from pathlib import Path

import pytest

from framework.binder import AidlRegistry
from framework.binder._aidl import (
    AidlResolutionError,
    AidlSyntaxError,
    Annotation,
    EnumDef,
    InterfaceDef,
    ParcelableDef,
    TypeRef,
)
from framework.binder._parcel import Parcelable

FIXTURES = Path(__file__).parent / "aidl"
NPU = "android.hardware.npu"


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


@pytest.fixture(scope="module")
def hal() -> AidlRegistry:
    return AidlRegistry.load(FIXTURES)


# --------------------------------------------------------------------------- the seed's HAL files


def test_hal_fixtures_load_with_the_seeds_fields_in_order(hal: AidlRegistry) -> None:
    cfg = hal.definition(f"{NPU}.SchedulingConfig")
    assert isinstance(cfg, ParcelableDef)
    assert [(f.name, str(f.type)) for f in cfg.fields] == [
        ("minPriority", "int"),
        ("maxPriority", "int"),
        ("uid", "int"),
        ("appPriority", "int"),
        ("hasDirectAccess", "boolean"),
        ("canAttributeOtherUid", "boolean"),
    ]
    work = hal.definition(f"{NPU}.WorkInfo")
    assert [(f.name, str(f.type)) for f in work.fields] == [
        ("id", "int"),
        ("groupId", f"@nullable {NPU}.NpuUuid"),
        ("uid", "int"),
        ("debugPid", "int"),
        ("originalUid", "int"),
        ("debugFeatureId", "@nullable String"),
        ("jobPriority", "int"),
        ("effectivePriority", "int"),
        ("timestampMs", "long"),
        ("deviceNumber", "int"),
    ]
    uuid = hal.definition(f"{NPU}.NpuUuid")
    assert uuid.fields[0].type == TypeRef("byte", array=16)
    for d in (cfg, work, uuid):
        assert d.annotation("VintfStability") == Annotation("VintfStability")


def test_hal_enums_are_byte_backed_in_declared_order(hal: AidlRegistry) -> None:
    start = hal.definition(f"{NPU}.StartReason")
    end = hal.definition(f"{NPU}.EndReason")
    assert isinstance(start, EnumDef) and start.backing == "byte"
    assert start.enumerators == (("INITIAL", 0), ("RESUMED", 1))
    assert [name for name, _ in end.enumerators] == [
        "CANCELLED_USER",
        "CANCELLED_SYSTEM",
        "PAUSED",
        "FAILED",
        "COMPLETED",
    ]
    EndReason = hal.enum(f"{NPU}.EndReason")
    assert issubclass(EndReason, enum.IntEnum)
    assert EndReason.COMPLETED == 4 and EndReason(2) is EndReason.PAUSED
    assert start.annotation("Backing").get("type") == "byte"


def test_hal_callback_is_a_oneway_interface_with_its_debounce_constant(hal: AidlRegistry) -> None:
    cb = hal.interface(f"{NPU}.ISchedulingCallback")
    assert cb.oneway and cb.descriptor == f"{NPU}.ISchedulingCallback"
    assert dict(cb.constants) == {"DEBOUNCE_DURATION_MS": 50}
    assert [(m.name, m.code, m.oneway) for m in cb.methods] == [
        ("onWorkRequested", 1, True),
        ("onWorkStarted", 2, True),
        ("onWorkEnded", 3, True),
    ]
    started = cb.method("onWorkStarted")
    assert [(a.name, a.type.name, a.direction) for a in started.args] == [
        ("workInfo", f"{NPU}.WorkInfo", "in"),
        ("reason", f"{NPU}.StartReason", "in"),
    ]
    assert cb.method_by_code(3) is cb.method("onWorkEnded")
    assert cb.method_by_code(0) is None and cb.method_by_code(4) is None


def test_hal_scheduling_interface(hal: AidlRegistry) -> None:
    sched = hal.interface(f"{NPU}.IScheduling")
    assert not sched.oneway
    assert dict(sched.constants) == {"MIN_PRIORITY": 0, "MAX_PRIORITY": 1000}
    assert [m.name for m in sched.methods] == ["setSchedulingConfigs", "updateSchedulingConfigs", "setCallback"]
    assert [m.code for m in sched.methods] == [1, 2, 3]
    cfgs = sched.method("setSchedulingConfigs").args[0]
    assert cfgs.type == TypeRef(f"{NPU}.SchedulingConfig", array=-1)
    cb = sched.method("setCallback").args[0]
    assert cb.type.name == f"{NPU}.ISchedulingCallback" and cb.type.nullable
    assert sched.method("setCallback").return_type.name == "void"


def test_javadoc_becomes_the_docstring(hal: AidlRegistry) -> None:
    WorkInfo = hal.parcelable(f"{NPU}.WorkInfo")
    assert WorkInfo.__doc__ == "One NPU execution group, as the driver reports its life to the framework."
    sched = hal.interface(f"{NPU}.IScheduling")
    assert sched.doc.startswith("The NPU scheduling HAL")
    assert "EX_ILLEGAL_ARGUMENT" in sched.method("setSchedulingConfigs").doc


def test_registry_lookups_and_iteration(hal: AidlRegistry) -> None:
    assert {d.name for d in hal} == {
        f"{NPU}.{n}"
        for n in ("SchedulingConfig", "WorkInfo", "NpuUuid", "StartReason", "EndReason", "IScheduling", "ISchedulingCallback")
    }
    assert len(hal) == 7 and f"{NPU}.WorkInfo" in hal
    assert hal.lookup(f"{NPU}.WorkInfo") is hal.parcelable(f"{NPU}.WorkInfo")
    assert hal.lookup(f"{NPU}.EndReason") is hal.enum(f"{NPU}.EndReason")
    assert isinstance(hal.lookup(f"{NPU}.IScheduling"), InterfaceDef)
    with pytest.raises(KeyError, match=r"no AIDL definition named 'WorkInfo'; did you mean android\.hardware\.npu\.WorkInfo"):
        hal.lookup("WorkInfo")
    with pytest.raises(KeyError, match="is a parcelable, not an interface"):
        hal.interface(f"{NPU}.WorkInfo")
    with pytest.raises(KeyError, match="is an interface, not a parcelable"):
        hal.parcelable(f"{NPU}.IScheduling")


def test_interface_defs_are_hashable_and_identity_compared(hal: AidlRegistry) -> None:
    # The runtime caches proxy classes per interface.
    sched = hal.interface(f"{NPU}.IScheduling")
    cache = {sched: 1, sched.methods[0]: 2}
    assert cache[hal.interface(f"{NPU}.IScheduling")] == 1


# --------------------------------------------------------------------------- every construct


EVERYTHING = """
/* A file that uses every construct npuemu's AIDL subset has. */
package com.example.demo;

import com.example.demo.Color;   // enums
import com.example.demo.IListener;

/**
 * A parcelable with defaults.
 * Second line.
 */
@JavaDerive(toString=true, equals=true)
@Descriptor(value="demo")
parcelable Everything {
    const int LIMIT = (1 << 4) | 3;
    const String TAG = "every" + "thing";
    const long BIG = 0x10L;
    int plain;
    int withDefault = LIMIT * 2 - 1;   // 37
    byte smallByte = -128;
    long big = 5000000000L;
    boolean flag = true;
    float ratio = 1.5f;
    double precise = 2.5e3;
    char letter = 'x';
    String name = "dflt\\n\\"q\\"";
    @nullable String maybe;
    @utf8InCpp String utf8;
    Color color;
    Color chosen = Color.BLUE;
    int[] numbers = {1, 2, 3};
    byte[] blob;
    byte[4] magic = {1, 2, 3, -1};
    float[2] pair;
    List<String> names;
    List<Inner> inners;
    @nullable Inner maybeInner;
    Inner inner;
    IBinder token;
    @nullable IListener listener;
    @nullable ParcelFileDescriptor pfd;
    @nullable SharedMemory shm;
}
"""

EVERYTHING_INNER = """
package com.example.demo;
parcelable Inner { int x = 7; @nullable Inner next; }
"""

EVERYTHING_COLOR = """
package com.example.demo;
@Backing(type="int")
enum Color {
    RED = 1 << 2,   // 4
    GREEN,          // 5
    BLUE = GREEN * 10,
    ALIAS_OF_RED = RED,
    /** javadoc on an enumerator is fine */
    LAST,
}
"""

EVERYTHING_LISTENER = """
package com.example.demo;
import com.example.demo.Everything;
import com.example.demo.Inner;

oneway interface IListener {
    void onEvent(in Everything e);
    oneway void onPing();
}
"""

EVERYTHING_SERVICE = """
package com.example.demo;
import com.example.demo.IListener;
import com.example.demo.Inner;

@VintfStability
@SuppressWarnings(value={"inout-parameter", "out-array"})
interface IService {
    const String NAME = "demo";
    const int VERSION = 3;
    @nullable String describe(in int what, in @nullable String hint);
    int fill(out int[] values, inout Inner inner, in byte[16] key);
    oneway void listen(in IListener listener);
    IBinder token();
    void take(in List<Inner> items, in IBinder[] binders);
    @Deprecated void old();
}
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> AidlRegistry:
    root = tmp_path_factory.mktemp("demo")
    write(root, "com/example/demo/Everything.aidl", EVERYTHING)
    write(root, "com/example/demo/Inner.aidl", EVERYTHING_INNER)
    write(root, "com/example/demo/Color.aidl", EVERYTHING_COLOR)
    write(root, "com/example/demo/IListener.aidl", EVERYTHING_LISTENER)
    write(root, "com/example/demo/IService.aidl", EVERYTHING_SERVICE)
    return AidlRegistry.load(root)


def test_parcelable_defaults_and_constants(demo: AidlRegistry) -> None:
    E = demo.parcelable("com.example.demo.Everything")
    Color = demo.enum("com.example.demo.Color")
    Inner = demo.parcelable("com.example.demo.Inner")
    e = E()
    assert E.LIMIT == 19 and E.TAG == "everything" and E.BIG == 16
    assert e.plain == 0 and e.withDefault == 37 and e.smallByte == -128 and e.big == 5_000_000_000
    assert e.flag is True and e.ratio == 1.5 and e.precise == 2500.0 and e.letter == "x"
    assert e.name == 'dflt\n"q"' and e.maybe is None and e.utf8 == ""
    assert e.color is Color.RED  # an enum's zero is its first enumerator
    assert e.chosen is Color.BLUE
    assert e.numbers == [1, 2, 3] and e.blob == b"" and e.magic == b"\x01\x02\x03\xff"
    assert e.pair == [0.0, 0.0] and e.names == [] and e.inners == []
    assert e.maybeInner is None and e.inner == Inner(x=7, next=None)
    assert e.token is None and e.listener is None and e.pfd is None and e.shm is None
    # mutable defaults are fresh per instance
    assert E().numbers is not e.numbers


def test_enum_values_implicit_explicit_and_expressions(demo: AidlRegistry) -> None:
    color = demo.definition("com.example.demo.Color")
    assert color.backing == "int"
    assert color.enumerators == (("RED", 4), ("GREEN", 5), ("BLUE", 50), ("ALIAS_OF_RED", 4), ("LAST", 5))


def test_annotations_are_kept_with_their_parameters(demo: AidlRegistry) -> None:
    everything = demo.definition("com.example.demo.Everything")
    assert everything.annotation("JavaDerive") == Annotation("JavaDerive", (("toString", True), ("equals", True)))
    assert everything.annotation("Descriptor").get("value") == "demo"
    svc = demo.interface("com.example.demo.IService")
    assert svc.annotation("SuppressWarnings").get("value") == ("inout-parameter", "out-array")
    assert svc.method("old").annotation("Deprecated") == Annotation("Deprecated")
    utf8 = next(f for f in everything.fields if f.name == "utf8")
    assert utf8.type.annotation("utf8InCpp") is not None and not utf8.type.nullable
    assert everything.doc == "A parcelable with defaults.\nSecond line."


def test_types_resolve_to_qualified_names(demo: AidlRegistry) -> None:
    fields = {f.name: f.type for f in demo.definition("com.example.demo.Everything").fields}
    assert fields["color"] == TypeRef("com.example.demo.Color")
    assert fields["inners"] == TypeRef("List", (TypeRef("com.example.demo.Inner"),))
    assert fields["pair"] == TypeRef("float", array=2)
    assert fields["numbers"].array == -1
    assert fields["listener"].name == "com.example.demo.IListener" and fields["listener"].nullable
    assert fields["token"] == TypeRef("IBinder")


def test_methods_directions_codes_and_oneway(demo: AidlRegistry) -> None:
    svc = demo.interface("com.example.demo.IService")
    assert dict(svc.constants) == {"NAME": "demo", "VERSION": 3}
    assert [(m.name, m.code) for m in svc.methods] == [
        ("describe", 1),
        ("fill", 2),
        ("listen", 3),
        ("token", 4),
        ("take", 5),
        ("old", 6),
    ]
    describe = svc.method("describe")
    assert describe.return_type == TypeRef("String", nullable=True, annotations=(Annotation("nullable"),))
    assert describe.args[1].type.nullable
    fill = svc.method("fill")
    assert [a.direction for a in fill.args] == ["out", "inout", "in"]
    assert [a.name for a in fill.in_args] == ["inner", "key"]
    assert [a.name for a in fill.out_args] == ["values", "inner"]
    assert svc.method("listen").oneway and not fill.oneway
    listener = demo.interface("com.example.demo.IListener")
    assert listener.oneway and all(m.oneway for m in listener.methods)


def test_from_text_loads_without_a_directory_layout() -> None:
    reg = AidlRegistry.from_text("package a; parcelable P { int x = 1; }", "package a; interface I { P get(); }")
    P = reg.parcelable("a.P")
    assert P().x == 1
    assert reg.interface("a.I").method("get").return_type == TypeRef("a.P")


def test_fully_qualified_type_names_need_no_import() -> None:
    reg = AidlRegistry.from_text("package a.b; parcelable P { int x; }", "package c; parcelable Q { a.b.P p; }")
    assert reg.definition("c.Q").fields[0].type.name == "a.b.P"


def test_a_single_file_root() -> None:
    reg = AidlRegistry.load(FIXTURES / "android/hardware/npu/StartReason.aidl")
    assert reg.names() == [f"{NPU}.StartReason"]


# --------------------------------------------------------------------------- syntax errors


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("package a;\nparcelable P {\n    int x\n}\n", 4, 1, r"unexpected '\}', expected"),
        ("package a;\nparcelable P { int x; } }", 2, 25, r"unexpected '\}'"),
        ("package a;\ninterface I {\n  void f(in int a, );\n}", 3, 20, r"unexpected '\)'"),
        ("package a;\nparcelable P {\n  int x = 1 +;\n}", 3, 14, "unexpected ';'"),
        ("package a;\nparcelable P {\n  int x = 1;\n", 4, 1, "unexpected end of file"),
        ("package a;\nparcelable P { int $x; }", 2, 20, r"unexpected character '\$'"),
        ("package a\nparcelable P {}", 2, 1, r"unexpected 'parcelable', expected ';'"),
        ("/* never closed\npackage a;", 1, 1, r"unterminated /\* comment"),
        ('package a;\nparcelable P { String s = "open; }', 2, 27, "unterminated string literal"),
        ("package a;\nenum E { A B }", 2, 12, "unexpected 'B'"),
    ],
)
def test_syntax_errors_report_file_line_column(tmp_path: Path, text: str, line: int, column: int, message: str) -> None:
    name = "P" if "parcelable" in text or "/*" in text else ("I" if "interface" in text else "E")
    path = tmp_path / "a" / f"{name}.aidl"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(AidlSyntaxError) as info:
        AidlRegistry.load(tmp_path)
    err = info.value
    assert (err.filename, err.line, err.column) == (str(path), line, column)
    assert str(err).startswith(f"{path}:{line}:{column}: ")
    import re

    assert re.search(message, err.message), err.message


# --------------------------------------------------------------------------- resolution errors


def load_error(tmp_path: Path, files: dict[str, str]) -> AidlResolutionError:
    for rel, text in files.items():
        write(tmp_path, rel, text)
    with pytest.raises(AidlResolutionError) as info:
        AidlRegistry.load(tmp_path)
    return info.value


@pytest.mark.parametrize(
    ("files", "where", "line", "message"),
    [
        (
            {"a/P.aidl": "package a;\nparcelable P {\n    int x;\n    Missing m;\n}"},
            "a/P.aidl",
            4,
            "unknown type Missing",
        ),
        (
            {"a/P.aidl": "package a;\nimport b.Gone;\nparcelable P { int x; }"},
            "a/P.aidl",
            2,
            r"import b\.Gone: no file defines it \(looked for b/Gone\.aidl",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  int x;\n  String x;\n}"},
            "a/P.aidl",
            4,
            r"x is declared twice in P \(as field at line 3\)",
        ),
        (
            {"a/I.aidl": "package a;\ninterface I {\n  void f();\n  void f(int x);\n}"},
            "a/I.aidl",
            4,
            "f is declared twice in I .*no overloading",
        ),
        (
            {"a/E.aidl": "package a;\nenum E {\n  A,\n  A,\n}"},
            "a/E.aidl",
            4,
            "enumerator A is defined twice",
        ),
        (
            {"a/I.aidl": "package a;\ninterface I {\n  oneway int f();\n}"},
            "a/I.aidl",
            3,
            "oneway method f must return void, not int",
        ),
        (
            {"a/I.aidl": "package a;\noneway interface I {\n  void f(out int[] x);\n}"},
            "a/I.aidl",
            3,
            "oneway method f cannot have out argument x",
        ),
        (
            {"a/I.aidl": "package a;\ninterface I {\n  void f(out int x);\n}"},
            "a/I.aidl",
            3,
            "only arrays, Lists and parcelables can be out or inout",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  @nullable int x;\n}"},
            "a/P.aidl",
            3,
            "a primitive int cannot be @nullable",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  List l;\n}"},
            "a/P.aidl",
            3,
            r"List takes exactly one type argument",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  void v;\n}"},
            "a/P.aidl",
            3,
            "void is only a return type",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  byte b = 200;\n}"},
            "a/P.aidl",
            3,
            r"field b: 200 does not fit in byte \(-128\.\.127\)",
        ),
        (
            {"a/E.aidl": "package a;\nenum E {\n  A = 127,\n  B,\n}"},
            "a/E.aidl",
            4,
            r"enumerator B = 128 does not fit the byte backing",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  int x;\n  P self;\n}"},
            "a/P.aidl",
            4,
            r"field self makes a\.P -> a\.P contain itself; mark it @nullable",
        ),
        (
            {"a/E.aidl": 'package a;\n@Backing(type="short")\nenum E { A }'},
            "a/E.aidl",
            3,
            r'@Backing\(type=\.\.\.\) must be "byte", "int" or "long"',
        ),
        (
            {"a/Q.aidl": "package a;\nparcelable P { int x; }"},
            "a/Q.aidl",
            2,
            "parcelable P must be in a file named P.aidl",
        ),
        (
            {"a/P.aidl": "package b;\nparcelable P { int x; }"},
            "a/P.aidl",
            1,
            r"package b does not match the file's directory a .*expected package a",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  int from;\n}"},
            "a/P.aidl",
            3,
            "field from: 'from' is a Python keyword",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  const int A = B;\n  const int B = A;\n}"},
            "a/P.aidl",
            4,
            "the value of P.A depends on itself",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  Map<String, int> m;\n}"},
            "a/P.aidl",
            3,
            "Map is not supported",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P {\n  int x = 1;\n  const int C = 1 / 0;\n}"},
            "a/P.aidl",
            4,
            "division by zero",
        ),
        (
            {"a/P.aidl": "package a;\nparcelable P { int x; }\nparcelable Q { int y; }"},
            "a/P.aidl",
            3,
            "only one type per file",
        ),
        (
            {"a/P.aidl": "package a;\nimport a.E;\nparcelable P {\n  E e = 3;\n}", "a/E.aidl": "package a;\nenum E { A, B }"},
            "a/P.aidl",
            4,
            "field e: 3 is not a value of a.E",
        ),
    ],
)
def test_resolution_errors_name_file_and_line(
    tmp_path: Path, files: dict[str, str], where: str, line: int, message: str
) -> None:
    err = load_error(tmp_path, files)
    assert err.filename == str(tmp_path / where)
    assert err.line == line
    assert str(err).startswith(f"{tmp_path / where}:{line}:")
    import re

    assert re.search(message, err.message), err.message


def test_a_definition_in_two_files_names_both(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    write(one, "a/P.aidl", "package a;\nparcelable P { int x; }")
    write(two, "a/P.aidl", "package a;\n\nparcelable P { long y; }")
    with pytest.raises(AidlResolutionError) as info:
        AidlRegistry.load(one, two)
    assert info.value.filename == str(two / "a/P.aidl") and info.value.line == 3
    assert f"a.P is defined twice (first at {one / 'a/P.aidl'}:2)" in str(info.value)


def test_a_missing_root_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        AidlRegistry.load(tmp_path / "nowhere")


def test_an_unimported_type_from_another_package_gets_a_hint() -> None:
    with pytest.raises(AidlResolutionError, match=r"unknown type P \(did you mean to import a\.P\?\)"):
        AidlRegistry.from_text("package a; parcelable P { int x; }", "package b; parcelable Q { P p; }")


def test_parcelables_are_parcelable_subclasses(hal: AidlRegistry) -> None:
    for d in hal:
        if isinstance(d, ParcelableDef):
            assert issubclass(d.cls, Parcelable) and d.cls.__aidl__ is d


def test_hex_literals_are_bit_patterns_as_in_the_aidl_compiler() -> None:
    reg = AidlRegistry.from_text(
        """
        package a;
        interface I {
            const int ALL = 0xFFFFFFFF;
            const int TOP = 0x80000000;
            const long WIDE = 0xFFFFFFFFFFFFFFFFL;
            const long SMALL = 0x7fL;
            const int MASK = ~0x0F & 0xFF;
        }
        """
    )
    assert dict(reg.interface("a.I").constants) == {"ALL": -1, "TOP": -(2**31), "WIDE": -1, "SMALL": 127, "MASK": 0xF0}


def test_constants_can_name_other_types_constants_and_enumerators() -> None:
    reg = AidlRegistry.from_text(
        "package a; interface IBase { const int BASE = 100; }",
        "package a; enum Level { LOW = IBase.BASE, HIGH = LOW + 1 }",
        "package b; import a.IBase; import a.Level; parcelable P { int x = IBase.BASE * 2; Level l = Level.HIGH; }",
    )
    assert reg.definition("a.Level").enumerators == (("LOW", 100), ("HIGH", 101))
    P = reg.parcelable("b.P")
    assert P().x == 200 and P().l is reg.enum("a.Level").HIGH
    with pytest.raises(AidlResolutionError, match=r"a\.IBase has no constant or enumerator NOPE"):
        AidlRegistry.from_text(
            "package a; interface IBase { const int BASE = 100; }",
            "package a; parcelable Q { int x = IBase.NOPE; }",
        )
    with pytest.raises(AidlResolutionError, match=r"field l: a\.Other\.X is not a a\.Level"):
        AidlRegistry.from_text(
            "package a; enum Level { LOW }",
            "package a; enum Other { X }",
            "package a; parcelable Q { Level l = Other.X; }",
        )


def test_the_parser_cache_is_written_reused_and_survives_corruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from framework.binder import _aidl

    monkeypatch.setattr(_aidl, "__file__", str(tmp_path / "_aidl.py"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    text = (FIXTURES / "android/hardware/npu/WorkInfo.aidl").read_text()
    built = _aidl._parser.__wrapped__()
    (cache,) = (tmp_path / "__pycache__").glob("_aidl_grammar.*.lark")
    loaded = _aidl._parser.__wrapped__()
    assert loaded.parse(text) == built.parse(text)
    cache.write_bytes(b"half-written by a racing process")
    rebuilt = _aidl._parser.__wrapped__()
    assert rebuilt.parse(text) == built.parse(text)
    assert cache.stat().st_size > 1000  # rewritten whole
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    cache.unlink()
    _aidl._parser.__wrapped__()
    assert not cache.exists()
