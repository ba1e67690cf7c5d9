"""The parcel codec: typed parcelables, method calls and replies <-> msgpack-able data."""

from __future__ import annotations

import dataclasses
import enum
import fcntl
import inspect
import os
import typing
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.binder import AidlRegistry
from framework.binder._aidl import TypeRef
from framework.binder._fd import ParcelFileDescriptor, SharedMemory
from framework.binder._status import BadParcelableException

FIXTURES = Path(__file__).parent / "aidl"
NPU = "android.hardware.npu"


def wire_trip(data: Any) -> Any:
    """What the other side sees: the data through msgpack, as the runtime sends it."""
    return msgpack.unpackb(msgpack.packb(data), raw=False)


class FakeBinder:
    """Stands in for a local Binder or a proxy; the codec never looks inside."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"FakeBinder({self.name})"


class FakeContext:
    """A ParcelContext that keeps binders in a table and dups descriptors, like the runtime."""

    def __init__(self) -> None:
        self.binders: list[Any] = []
        self.interfaces: list[Any] = []
        self.fds: list[int] = []

    def write_binder(self, obj: Any, interface: Any) -> Any:
        self.binders.append(obj)
        self.interfaces.append(interface)
        return len(self.binders) - 1

    def read_binder(self, handle: Any, interface: Any) -> Any:
        if type(handle) is not int or not 0 <= handle < len(self.binders):
            raise BadParcelableException(f"no binder with handle {handle!r}")
        return self.binders[handle]

    def write_fd(self, fd: int) -> int:
        self.fds.append(os.dup(fd))
        return len(self.fds) - 1

    def read_fd(self, index: int) -> int:
        fd = self.fds[index]
        if fd < 0:
            raise BadParcelableException(f"descriptor {index} was already taken")
        self.fds[index] = -1
        return fd

    def close(self) -> None:
        for fd in self.fds:
            if fd >= 0:
                os.close(fd)
        self.fds = []


@pytest.fixture
def ctx():
    c = FakeContext()
    yield c
    c.close()


@pytest.fixture(scope="module")
def hal() -> AidlRegistry:
    return AidlRegistry.load(FIXTURES)


DEMO = [
    """
    package demo;
    @Backing(type="int")
    enum Mode { OFF = 0, ON = 10, AUTO }
    """,
    """
    package demo;
    parcelable Inner { int a; @nullable String s; byte[] b; }
    """,
    """
    package demo;
    import demo.Mode;
    import demo.Inner;
    import demo.ICallback;
    parcelable Holder {
        const int ANSWER = 42;
        Mode mode = Mode.AUTO;
        List<Inner> inners;
        @nullable Inner maybe;
        IBinder token;
        @nullable IBinder maybeToken;
        @nullable ICallback callback;
        @nullable ParcelFileDescriptor pfd;
        @nullable SharedMemory shm;
        char c = 'z';
        float f;
        double d;
        int[3] triple;
        byte b;
        long l;
    }
    """,
    """
    package demo;
    import demo.Holder;
    import demo.Inner;
    interface ICallback {
        @nullable String describe(in int what, in @nullable String hint);
        int fill(out int[] values, inout Inner inner, in byte[4] key);
        oneway void ping(in Holder h);
        ICallback self();
        void nothing();
    }
    """,
]


@pytest.fixture(scope="module")
def demo() -> AidlRegistry:
    return AidlRegistry.from_text(*DEMO)


# --------------------------------------------------------------------------- construction


def test_construction_checks_types_and_names_the_field(hal: AidlRegistry) -> None:
    WorkInfo = hal.parcelable(f"{NPU}.WorkInfo")
    with pytest.raises(TypeError, match=r"WorkInfo\.uid: expected int, got str"):
        WorkInfo(uid="1000")
    with pytest.raises(TypeError, match=r"WorkInfo\.uid: expected int, got bool"):
        WorkInfo(uid=True)
    with pytest.raises(ValueError, match=r"WorkInfo\.id: 2147483648 is out of range for int"):
        WorkInfo(id=2**31)
    with pytest.raises(TypeError, match=r"WorkInfo\.groupId: expected android\.hardware\.npu\.NpuUuid"):
        WorkInfo(groupId=b"\0" * 16)
    with pytest.raises(TypeError, match="unexpected keyword argument 'priority'"):
        WorkInfo(priority=3)
    with pytest.raises(TypeError):
        WorkInfo(1)  # keyword-only, as AIDL fields have no order a caller should rely on
    NpuUuid = hal.parcelable(f"{NPU}.NpuUuid")
    with pytest.raises(ValueError, match=r"NpuUuid\.uuid: expected 16 bytes for byte\[16\], got 3"):
        NpuUuid(uuid=b"abc")
    assert NpuUuid(uuid=bytearray(16)).uuid == bytes(16)


def test_parcelables_are_frozen_comparable_and_replaceable(hal: AidlRegistry) -> None:
    Cfg = hal.parcelable(f"{NPU}.SchedulingConfig")
    a = Cfg(uid=1001, minPriority=0, maxPriority=500, appPriority=100, hasDirectAccess=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.uid = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        a.extra = 1  # type: ignore[attr-defined]
    b = a.replace(appPriority=200)
    assert b.appPriority == 200 and b.uid == 1001 and a.appPriority == 100
    assert a == Cfg(uid=1001, maxPriority=500, appPriority=100, hasDirectAccess=True)
    assert a != b and a != "SchedulingConfig"
    assert hash(a) == hash(a.replace())
    assert repr(a) == (
        "SchedulingConfig(minPriority=0, maxPriority=500, uid=1001, appPriority=100, "
        "hasDirectAccess=True, canAttributeOtherUid=False)"
    )
    with pytest.raises(TypeError, match="has no field"):
        a.replace(priority=1)
    with pytest.raises(TypeError, match=r"SchedulingConfig\.uid"):
        a.replace(uid=None)


def test_enum_fields_take_members_or_their_values(demo: AidlRegistry) -> None:
    Holder, Mode = demo.parcelable("demo.Holder"), demo.enum("demo.Mode")
    assert Holder().mode is Mode.AUTO and Mode.AUTO == 11
    assert Holder(mode=10).mode is Mode.ON
    with pytest.raises(ValueError, match=r"Holder\.mode: 3 is not a value of demo\.Mode"):
        Holder(mode=3)

    class Other(enum.IntEnum):
        ON = 10

    with pytest.raises(TypeError, match=r"Holder\.mode: expected demo\.Mode"):
        Holder(mode=Other.ON)  # another enum's member is a mistake even if the value exists
    assert Holder.ANSWER == 42


def test_lists_are_checked_element_by_element_and_copied(demo: AidlRegistry) -> None:
    Holder, Inner = demo.parcelable("demo.Holder"), demo.parcelable("demo.Inner")
    items = [Inner(a=1)]
    h = Holder(inners=items)
    items.append(Inner(a=2))
    assert h.inners == [Inner(a=1)]  # the caller's list is not the parcelable's
    with pytest.raises(TypeError, match=r"Holder\.inners: \[1\]: expected demo\.Inner"):
        Holder(inners=[Inner(), 5])
    with pytest.raises(TypeError, match=r"Holder\.inners: expected List<demo\.Inner> \(a list\)"):
        Holder(inners=Inner())
    with pytest.raises(ValueError, match=r"Holder\.triple: expected 3 elements for int\[3\], got 2"):
        Holder(triple=[1, 2])
    assert Holder(triple=(1, 2, 3)).triple == [1, 2, 3]


def test_char_float_and_string_rules(demo: AidlRegistry) -> None:
    Holder, Inner = demo.parcelable("demo.Holder"), demo.parcelable("demo.Inner")
    assert Holder(f=0.1).f == pytest.approx(0.1) and Holder(f=0.1).f != 0.1  # binary32, like Java's float
    assert Holder(d=0.1).d == 0.1 and Holder(d=3).d == 3.0
    with pytest.raises(ValueError, match=r"Holder\.f: 1e\+39 is out of range for float"):
        Holder(f=1e39)
    with pytest.raises(TypeError, match=r"Holder\.c: expected char"):
        Holder(c="ab")
    with pytest.raises(TypeError, match=r"Holder\.c: expected char"):
        Holder(c="\U0001f600")  # not one UTF-16 code unit
    with pytest.raises(ValueError, match=r"Inner\.s: String holds a lone surrogate"):
        Inner(s="\ud800")
    with pytest.raises(ValueError, match=r"Holder\.b: 128 is out of range for byte"):
        Holder(b=128)


# --------------------------------------------------------------------------- wire format


def test_work_info_wire_format_is_a_field_array_in_declared_order(hal: AidlRegistry) -> None:
    WorkInfo, NpuUuid = hal.parcelable(f"{NPU}.WorkInfo"), hal.parcelable(f"{NPU}.NpuUuid")
    w = WorkInfo(
        id=7,
        groupId=NpuUuid(uuid=bytes(range(16))),
        uid=10001,
        debugPid=4242,
        originalUid=10001,
        debugFeatureId="camera",
        jobPriority=250,
        effectivePriority=350,
        timestampMs=123456789012,
        deviceNumber=1,
    )
    assert w.to_wire() == [7, [bytes(range(16))], 10001, 4242, 10001, "camera", 250, 350, 123456789012, 1]
    assert WorkInfo.from_wire(wire_trip(w.to_wire())) == w
    assert WorkInfo().to_wire() == [0, None, 0, 0, 0, None, 0, 0, 0, 0]


def test_enums_travel_as_their_backing_int(demo: AidlRegistry, hal: AidlRegistry) -> None:
    cb = hal.interface(f"{NPU}.ISchedulingCallback")
    WorkInfo, EndReason = hal.parcelable(f"{NPU}.WorkInfo"), hal.enum(f"{NPU}.EndReason")
    data = cb.method("onWorkEnded").encode_call((WorkInfo(id=1), EndReason.PAUSED), None)
    assert data[1] == 2 and type(data[1]) is int
    info, reason = cb.method("onWorkEnded").decode_call(wire_trip(data), None)
    assert reason is EndReason.PAUSED and info.id == 1


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ("not an array", r"WorkInfo: expected WorkInfo \(an array of fields\), got str"),
        ([1, None, "x"], r"WorkInfo\.uid: expected int, got str"),
        ([None], r"WorkInfo\.id: expected int, got nil"),
        ([2**31], r"WorkInfo\.id: 2147483648 is out of range for int"),
        ([0, None, 0, 0, 0, None, 0, 0, 2**63], r"WorkInfo\.timestampMs: 9223372036854775808 is out of range for long"),
        ([0, [b"short"]], r"WorkInfo\.groupId\.uuid: expected 16 bytes for byte\[16\], got 5"),
        ([0, [[1] * 16]], r"WorkInfo\.groupId\.uuid: expected byte\[16\] \(bin\), got array of 16"),
        ([0, 5], r"WorkInfo\.groupId: expected NpuUuid \(an array of fields\), got int 5"),
        ([0, None, 0, 0, 0, b"bytes"], r"WorkInfo\.debugFeatureId: expected String, got 5 bytes"),
        ([True], r"WorkInfo\.id: expected int, got bool True"),
        ([1.0], r"WorkInfo\.id: expected int, got float 1\.0"),
    ],
)
def test_bad_wire_data_is_bad_parcelable_naming_parcelable_and_field(
    hal: AidlRegistry, wire: Any, message: str
) -> None:
    WorkInfo = hal.parcelable(f"{NPU}.WorkInfo")
    with pytest.raises(BadParcelableException, match=f"^android\\.hardware\\.npu\\.{message}"):
        WorkInfo.from_wire(wire)


def test_bad_enum_and_byte_values_are_refused_on_decode(demo: AidlRegistry) -> None:
    Holder = demo.parcelable("demo.Holder")
    with pytest.raises(BadParcelableException, match=r"demo\.Holder\.mode: 3 is not a value of demo\.Mode"):
        Holder.from_wire([3])
    ctx = FakeContext()
    wire = Holder(token=FakeBinder("t")).to_wire(ctx)
    assert Holder.from_wire(wire, ctx).token is ctx.binders[0]
    wire[3] = None  # token is IBinder, not @nullable
    with pytest.raises(BadParcelableException, match=r"demo\.Holder\.token: null IBinder where @nullable is not declared"):
        Holder.from_wire(wire, ctx)
    with pytest.raises(BadParcelableException, match=r"demo\.Holder\.inners\[1\]\.a: expected int, got str"):
        Holder.from_wire([11, [[1, None, b""], ["x"]]])
    with pytest.raises(BadParcelableException, match=r"demo\.Holder\.triple: expected 3 elements for int\[3\], got 1"):
        Holder.from_wire([11, [], None, 0, None, None, None, None, 97, 0.0, 0.0, [1]], ctx)
    with pytest.raises(BadParcelableException, match=r"demo\.Holder\.b: -129 is out of range for byte"):
        Holder.from_wire([11, [], None, 0, None, None, None, None, 97, 0.0, 0.0, [1, 2, 3], -129], ctx)


def test_a_self_referencing_parcelable_decodes_deep_chains_but_refuses_absurd_nesting() -> None:
    reg = AidlRegistry.from_text("package a; parcelable Node { int v; @nullable Node next; }")
    Node = reg.parcelable("a.Node")
    chain = None
    for i in range(50):
        chain = Node(v=i, next=chain)
    assert Node.from_wire(wire_trip(chain.to_wire())) == chain
    wire: Any = [0, None]
    for _ in range(5000):
        wire = [0, wire]
    with pytest.raises(BadParcelableException, match="nested too deeply"):
        Node.from_wire(wire)


# --------------------------------------------------------------------------- evolution

V1 = "package evo; parcelable Msg { int a; String b; }"
V2 = """
package evo;
parcelable Msg {
    int a;
    String b;
    @nullable String c;
    int[] d = {1, 2};
    long e = 7;
}
"""


def test_a_new_writer_and_an_old_reader() -> None:
    old = AidlRegistry.from_text(V1).parcelable("evo.Msg")
    new = AidlRegistry.from_text(V2).parcelable("evo.Msg")
    m = new(a=1, b="x", c="extra", d=[9], e=99)
    assert old.from_wire(wire_trip(m.to_wire())) == old(a=1, b="x")


def test_an_old_writer_and_a_new_reader() -> None:
    old = AidlRegistry.from_text(V1).parcelable("evo.Msg")
    new = AidlRegistry.from_text(V2).parcelable("evo.Msg")
    got = new.from_wire(wire_trip(old(a=1, b="x").to_wire()))
    assert got == new(a=1, b="x") and got.c is None and got.d == [1, 2] and got.e == 7
    # the declared default list is fresh for every decoded value, never shared
    again = new.from_wire([1, "x"])
    assert again.d is not got.d


def test_evolution_inside_lists_of_parcelables() -> None:
    holder = "package evo; import evo.Msg; parcelable Box { List<Msg> msgs; @nullable Msg one; }"
    old = AidlRegistry.from_text(V1, holder)
    new = AidlRegistry.from_text(V2, holder)
    NewBox, NewMsg = new.parcelable("evo.Box"), new.parcelable("evo.Msg")
    OldBox, OldMsg = old.parcelable("evo.Box"), old.parcelable("evo.Msg")
    box = NewBox(msgs=[NewMsg(a=1, c="c"), NewMsg(a=2, e=3)], one=NewMsg(b="z"))
    assert OldBox.from_wire(wire_trip(box.to_wire())) == OldBox(
        msgs=[OldMsg(a=1), OldMsg(a=2)], one=OldMsg(b="z")
    )
    back = NewBox.from_wire(wire_trip(OldBox.from_wire(wire_trip(box.to_wire())).to_wire()))
    assert back.msgs[0].c is None and back.msgs[1].e == 7


# --------------------------------------------------------------------------- binders and descriptors


def test_binder_fields_go_through_the_context(demo: AidlRegistry, ctx: FakeContext) -> None:
    Holder = demo.parcelable("demo.Holder")
    callback_def = demo.interface("demo.ICallback")
    tok, cb = FakeBinder("token"), FakeBinder("callback")
    h = Holder(token=tok, callback=cb)
    wire = wire_trip(h.to_wire(ctx))
    assert ctx.binders == [tok, cb]
    assert ctx.interfaces == [None, callback_def]  # plain IBinder has no interface
    back = Holder.from_wire(wire, ctx)
    assert back.token is tok and back.callback is cb and back.maybeToken is None


def test_a_non_nullable_binder_cannot_be_written_as_null(demo: AidlRegistry, ctx: FakeContext) -> None:
    Holder = demo.parcelable("demo.Holder")
    with pytest.raises(TypeError, match=r"^Holder\.token: a non-@nullable IBinder cannot be null"):
        Holder().to_wire(ctx)
    with pytest.raises(TypeError, match=r"Holder\.token: expected a binder object for IBinder, got int"):
        Holder(token=5)
    with pytest.raises(TypeError, match="needs a ParcelContext"):
        Holder(token=FakeBinder("t")).to_wire()
    with pytest.raises(BadParcelableException, match="no binder with handle 99"):
        Holder.from_wire([11, [], None, 99], ctx)


def test_shared_memory_crosses_with_its_pages(demo: AidlRegistry, ctx: FakeContext) -> None:
    Holder = demo.parcelable("demo.Holder")
    with SharedMemory.create("tensor", 4096) as shm:
        m = shm.map()
        m[:5] = b"hello"
        wire = wire_trip(Holder(token=FakeBinder("t"), shm=shm).to_wire(ctx))
        m.close()
    got = Holder.from_wire(wire, ctx).shm
    assert got is not None and got.size == 4096
    with got:
        view = got.map(writable=False)
        assert view[:5] == b"hello"
        view.close()
    assert got.closed


def test_a_parcel_file_descriptor_crosses_as_a_new_owned_fd(demo: AidlRegistry, ctx: FakeContext) -> None:
    Holder = demo.parcelable("demo.Holder")
    r, w = os.pipe()
    with ParcelFileDescriptor(w) as pfd:
        wire = wire_trip(Holder(token=FakeBinder("t"), pfd=pfd).to_wire(ctx))
    got = Holder.from_wire(wire, ctx).pfd
    assert got is not None and got.fileno() != w
    os.write(got.fileno(), b"ping")
    assert os.read(r, 4) == b"ping"
    got.close()
    os.close(r)


def test_a_peer_cannot_pass_a_truncatable_region_as_shared_memory(demo: AidlRegistry, ctx: FakeContext) -> None:
    Holder = demo.parcelable("demo.Holder")
    base = [11, [], None, 0, None, None, None]  # then shm
    ctx.write_binder(FakeBinder("t"), None)
    unsealed = os.memfd_create("unsealed", os.MFD_CLOEXEC)
    os.ftruncate(unsealed, 4096)
    r, w = os.pipe()
    with SharedMemory.create("small", 16) as small:
        cases = [
            (unsealed, 4096, "not sealed against shrinking"),
            (r, 16, "is not a memfd"),
            (small.fd, 1 << 20, "holds 16 bytes, fewer than the 1048576 claimed"),
        ]
        for fd, size, message in cases:
            ctx.write_fd(fd)
            with pytest.raises(BadParcelableException, match=f"demo\\.Holder\\.shm: bad SharedMemory: .*{message}"):
                Holder.from_wire(base + [[len(ctx.fds) - 1, size]], ctx)
            assert ctx.fds[-1] == -1  # taken, and closed by the codec: no leak
    for fd in (unsealed, r, w):
        os.close(fd)


def test_shared_memory_is_sealed_and_closes_idempotently() -> None:
    shm = SharedMemory.create("x", 100)
    seals = fcntl.fcntl(shm.fd, fcntl.F_GET_SEALS)
    assert seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_GROW
    with pytest.raises(OSError):
        os.ftruncate(shm.fd, 10)
    assert shm.getSize() == 100 and len(shm.mapReadOnly()) == 100
    shm.close()
    shm.close()
    with pytest.raises(ValueError, match="closed"):
        shm.map()
    with pytest.raises(ValueError, match="size must be >= 0"):
        SharedMemory.create("x", -1)
    empty = SharedMemory.create("empty", 0)
    assert len(empty.map()) == 0
    empty.close()


def test_parcel_file_descriptor_ownership() -> None:
    r, w = os.pipe()
    pfd = ParcelFileDescriptor(r)
    assert pfd.detach() == r and pfd.closed
    with pytest.raises(ValueError, match="closed"):
        pfd.fileno()
    dup = ParcelFileDescriptor.fromFd(w)
    assert dup.fileno() != w
    dup.close()
    dup.close()
    os.fstat(w)  # fromFd left the original open
    for fd in (r, w):
        os.close(fd)
    with pytest.raises(ValueError, match="invalid file descriptor"):
        ParcelFileDescriptor(-1)


# --------------------------------------------------------------------------- methods


def test_in_out_inout_arguments_and_replies(demo: AidlRegistry) -> None:
    cb, Inner = demo.interface("demo.ICallback"), demo.parcelable("demo.Inner")
    fill = cb.method("fill")
    # the caller passes the in and inout arguments, and the service gets the same
    data = fill.encode_call((Inner(a=1), b"abcd"), None)
    assert data == [[1, None, b""], b"abcd"]
    with pytest.raises(TypeError, match=r"demo\.ICallback\.fill takes 2 argument\(s\) \(inner, key\), got 3"):
        fill.encode_call(([9, 9], Inner(a=1), b"abcd"), None)  # an out argument is not sent
    inner, key = fill.decode_call(wire_trip(data), None)
    assert inner == Inner(a=1) and key == b"abcd"
    reply = fill.encode_reply(3, ([1, 2], inner.replace(a=2)), None)
    assert reply == [3, [1, 2], [2, None, b""]]
    assert fill.decode_reply(wire_trip(reply), None) == (3, [1, 2], Inner(a=2))
    # The proxy and the stub have that signature, and their docstring says what comes back.
    for side in (cb.cls.Proxy, cb.cls.Stub):
        assert list(inspect.signature(side.fill).parameters) == ["self", "inner", "key"]
        assert "returns (result, values, inner)" in side.fill.__doc__
    assert typing.get_type_hints(cb.cls.Proxy.fill)["return"] == tuple[int, list[int], Inner]

    describe = cb.method("describe")
    assert describe.decode_call(wire_trip(describe.encode_call((5, None), None)), None) == (5, None)
    assert describe.decode_reply(wire_trip(describe.encode_reply(None, (), None)), None) is None
    assert describe.decode_reply(["x"], None) == "x"
    nothing = cb.method("nothing")
    assert nothing.encode_call((), None) == [] and nothing.decode_reply([], None) is None


def test_method_encoding_errors_name_the_method_and_argument(demo: AidlRegistry) -> None:
    cb = demo.interface("demo.ICallback")
    with pytest.raises(TypeError, match=r"demo\.ICallback\.describe takes 2 argument\(s\) \(what, hint\), got 1"):
        cb.method("describe").encode_call((1,), None)
    with pytest.raises(TypeError, match=r"demo\.ICallback\.describe: argument what: expected int, got str"):
        cb.method("describe").encode_call(("1", None), None)
    with pytest.raises(ValueError, match=r"demo\.ICallback\.fill: argument key: expected 4 bytes"):
        cb.method("fill").encode_call((cb and demo.parcelable("demo.Inner")(), b"abc"), None)
    with pytest.raises(TypeError, match=r"demo\.ICallback\.fill: return value: expected int, got None"):
        cb.method("fill").encode_reply(None, ([], demo.parcelable("demo.Inner")()), None)
    with pytest.raises(TypeError, match=r"demo\.ICallback\.nothing returns void, not int 1"):
        cb.method("nothing").encode_reply(1, (), None)
    with pytest.raises(TypeError, match="a non-@nullable demo.ICallback cannot be null"):
        cb.method("self").encode_reply(None, (), FakeContext())


def test_method_decoding_errors_are_bad_parcelable(demo: AidlRegistry) -> None:
    cb = demo.interface("demo.ICallback")
    with pytest.raises(BadParcelableException, match=r"demo\.ICallback\.describe: expected 2 argument\(s\), got 3"):
        cb.method("describe").decode_call([1, None, 3], None)
    with pytest.raises(BadParcelableException, match=r"describe: argument hint: expected String, got int 3"):
        cb.method("describe").decode_call([1, 3], None)
    with pytest.raises(BadParcelableException, match=r"fill: out argument inner\.a: expected int, got nil"):
        cb.method("fill").decode_reply([0, [], [None, None, b""]], None)
    with pytest.raises(BadParcelableException, match=r"fill: expected a reply of 3 value\(s\), got array of 1"):
        cb.method("fill").decode_reply([0], None)


# --------------------------------------------------------------------------- properties

_INT = {"byte": 8, "int": 32, "long": 64}


def values_for(reg: AidlRegistry, tr: TypeRef) -> st.SearchStrategy[Any]:
    """Every value a field of type ``tr`` may hold (binders and descriptors excluded)."""
    if tr.array is not None or tr.name == "List":
        if tr.name == "byte" and tr.array is not None:
            n = tr.array
            s: st.SearchStrategy[Any] = st.binary(min_size=max(n, 0), max_size=n if n >= 0 else 40)
        else:
            elem = values_for(reg, tr.args[0] if tr.name == "List" else TypeRef(tr.name))
            n = tr.array if tr.array is not None else -1
            s = st.lists(elem, min_size=max(n, 0), max_size=n if n >= 0 else 4)
        return st.none() | s if tr.nullable else s
    if tr.name in _INT:
        bits = _INT[tr.name]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if tr.name == "boolean":
        return st.booleans()
    if tr.name == "float":
        return st.floats(width=32, allow_nan=False)
    if tr.name == "double":
        return st.floats(allow_nan=False)
    if tr.name == "char":
        return st.characters(max_codepoint=0xFFFF)
    if tr.name == "String":
        s = st.text(max_size=20)
        return st.none() | s if tr.nullable else s
    d = reg.definition(tr.name)
    if hasattr(d, "enumerators"):
        return st.sampled_from(list(d.cls))
    s = st.builds(d.cls, **{f.name: values_for(reg, f.type) for f in d.fields})
    return st.none() | s if tr.nullable else s


FIELD_TYPES = [
    "boolean", "byte", "char", "int", "long", "float", "double", "String", "@nullable String",
    "int[]", "long[3]", "byte[]", "byte[8]", "String[]", "@nullable int[]", "List<String>",
    "boolean[]", "double[2]", "Tone", "Tone[]", "Leaf", "@nullable Leaf", "Leaf[]", "List<Leaf>", "@nullable Leaf[]",
]  # fmt: skip


@st.composite
def generated_parcelable(draw: st.DrawFn) -> tuple[AidlRegistry, type]:
    types = draw(st.lists(st.sampled_from(FIELD_TYPES), max_size=8))
    fields = "\n".join(f"    {t} f{i};" for i, t in enumerate(types))
    reg = AidlRegistry.from_text(
        "package gen; enum Tone { LOW, MID = 5, HIGH }",
        "package gen; parcelable Leaf { int a; @nullable String s; byte[] b; }",
        f"package gen;\nparcelable Gen {{\n{fields}\n}}",
    )
    return reg, reg.parcelable("gen.Gen")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), made=generated_parcelable())
def test_encode_then_decode_is_identity_for_generated_types(data: st.DataObject, made: tuple) -> None:
    reg, Gen = made
    value = data.draw(values_for(reg, TypeRef("gen.Gen")))
    assert Gen.from_wire(wire_trip(value.to_wire())) == value


@pytest.mark.parametrize("name", [f"{NPU}.WorkInfo", f"{NPU}.SchedulingConfig", f"{NPU}.NpuUuid"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_encode_then_decode_is_identity_for_the_hal_types(hal: AidlRegistry, name: str, data: st.DataObject) -> None:
    value = data.draw(values_for(hal, TypeRef(name)))
    cls = hal.parcelable(name)
    assert cls.from_wire(wire_trip(value.to_wire())) == value


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_method_calls_round_trip(demo: AidlRegistry, data: st.DataObject) -> None:
    fill = demo.interface("demo.ICallback").method("fill")
    inner = data.draw(values_for(demo, TypeRef("demo.Inner")))
    key = data.draw(st.binary(min_size=4, max_size=4))
    values = data.draw(values_for(demo, TypeRef("int", array=-1)))
    got = fill.decode_call(wire_trip(fill.encode_call((inner, key), None)), None)
    assert got == (inner, key)
    assert fill.decode_reply(wire_trip(fill.encode_reply(7, (values, inner), None)), None) == (7, values, inner)


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=20),
    lambda children: st.lists(children, max_size=12),
    max_leaves=40,
)


def decoders(hal: AidlRegistry, demo: AidlRegistry) -> list:
    ctx = FakeContext()
    ctx.write_binder(FakeBinder("t"), None)
    cb = demo.interface("demo.ICallback")
    out = [lambda w, c=cls: c.from_wire(w, ctx) for cls in (hal.parcelable(f"{NPU}.WorkInfo"), demo.parcelable("demo.Holder"))]
    for m in cb.methods:
        out.append(lambda w, m=m: m.decode_call(w, ctx))
        out.append(lambda w, m=m: m.decode_reply(w, ctx))
    return out


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=200))
def test_random_bytes_raise_only_bad_parcelable(hal: AidlRegistry, demo: AidlRegistry, raw: bytes) -> None:
    try:
        wire = msgpack.unpackb(raw, raw=False)
    except Exception:  # not msgpack at all: the runtime's framing layer refuses it, not the codec
        return
    for decode in decoders(hal, demo):
        try:
            decode(wire)
        except BadParcelableException:
            pass


@settings(max_examples=200, deadline=None)
@given(wire=msgpack_values)
def test_arbitrary_msgpack_values_raise_only_bad_parcelable(hal: AidlRegistry, demo: AidlRegistry, wire: Any) -> None:
    for decode in decoders(hal, demo):
        try:
            decode(wire)
        except BadParcelableException:
            pass


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_one_corrupted_field_raises_only_bad_parcelable(hal: AidlRegistry, data: st.DataObject) -> None:
    WorkInfo = hal.parcelable(f"{NPU}.WorkInfo")
    wire = data.draw(values_for(hal, TypeRef(f"{NPU}.WorkInfo"))).to_wire()
    i = data.draw(st.integers(0, len(wire) - 1))
    wire[i] = data.draw(msgpack_values)
    try:
        got = WorkInfo.from_wire(wire)
    except BadParcelableException as e:
        assert f"WorkInfo.{WorkInfo._aidl_fields[i]}" in str(e)
    else:
        # the garbage happened to be valid for that field: it must then survive a round trip
        assert WorkInfo.from_wire(wire_trip(got.to_wire())) == got


@pytest.fixture(scope="module")
def evolution() -> tuple[AidlRegistry, AidlRegistry]:
    return AidlRegistry.from_text(V1), AidlRegistry.from_text(V2)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_evolution_properties(evolution: tuple[AidlRegistry, AidlRegistry], data: st.DataObject) -> None:
    old_reg, new_reg = evolution
    Old, New = old_reg.parcelable("evo.Msg"), new_reg.parcelable("evo.Msg")
    new = data.draw(values_for(new_reg, TypeRef("evo.Msg")))
    assert Old.from_wire(wire_trip(new.to_wire())) == Old(a=new.a, b=new.b)
    old = data.draw(values_for(old_reg, TypeRef("evo.Msg")))
    assert New.from_wire(wire_trip(old.to_wire())) == New(a=old.a, b=old.b)


def test_field_names_that_look_like_generated_locals_work() -> None:
    reg = AidlRegistry.from_text("package a; parcelable P { int self; String data; int e; long ctx; int n; }")
    P = reg.parcelable("a.P")
    p = P(self=1, data="d", e=2, ctx=3, n=4)
    assert P.from_wire(wire_trip(p.to_wire())) == p and p.self == 1 and p.ctx == 3
    with pytest.raises(TypeError, match=r"P\.e: expected int"):
        P(e="x")


def test_names_that_hide_what_the_generated_code_uses_work() -> None:
    # Fields and arguments named like builtins, the runtime module, a type or a constant.
    reg = AidlRegistry.from_text(
        "package a; enum E { X, Y }",
        "package a; parcelable Q { int v; }",
        """package a; import a.E; import a.Q;
        parcelable P {
            const int DEFAULT = 3;
            int len; int object; int[] list; int[] enumerate; String str; @nullable Q Q; E E = E.Y;
            byte[4] bytes; int _rt; float float;
        }""",
        "package a; import a.P; interface I { P f(in int len, in List<String> str, in P P, in int ctx, in int e); }",
    )
    P, Q = reg.parcelable("a.P"), reg.parcelable("a.Q")
    p = P(len=1, object=2, list=[3], enumerate=(4,), str="s", Q=Q(v=5), bytes=b"abcd", _rt=7, float=1.5)
    assert P.from_wire(wire_trip(p.to_wire())) == p and p.enumerate == [4]
    assert P().E.name == "Y" and P.from_wire([1]).E.name == "Y" and P.DEFAULT == 3
    with pytest.raises(TypeError, match=r"^P\.len: expected int, got str"):
        P(len="x")
    f = reg.interface("a.I").method("f")
    args = (1, ["x"], p, 2, 3)
    assert f.decode_call(wire_trip(f.encode_call(args, None)), None) == args


def test_a_list_mutated_after_construction_is_caught_when_written(demo: AidlRegistry) -> None:
    import copy

    Holder, Inner = demo.parcelable("demo.Holder"), demo.parcelable("demo.Inner")
    h = Holder(token=FakeBinder("t"), inners=[Inner(a=1)])
    assert copy.deepcopy(h).inners == h.inners and copy.deepcopy(h).inners is not h.inners
    h.inners.append("not an Inner")  # lists inside a frozen parcelable are still lists
    with pytest.raises(TypeError, match=r"^Holder\.inners: expected demo\.Inner, got str"):
        h.to_wire(FakeContext())


def test_lists_and_arrays_of_binders(ctx: FakeContext) -> None:
    reg = AidlRegistry.from_text(
        "package a; interface IThing { void take(in IBinder[] binders, in List<IThing> things); }"
    )
    take = reg.interface("a.IThing").method("take")
    b1, b2, t1 = FakeBinder("b1"), FakeBinder("b2"), FakeBinder("t1")
    data = wire_trip(take.encode_call(([b1, b2], [t1]), ctx))
    assert ctx.interfaces == [None, None, reg.interface("a.IThing")]
    assert take.decode_call(data, ctx) == ([b1, b2], [t1])
    with pytest.raises(TypeError, match=r"argument binders: a non-@nullable IBinder cannot be null"):
        take.encode_call(([None], []), ctx)
    with pytest.raises(BadParcelableException, match=r"argument things\[0\]: null a\.IThing"):
        take.decode_call([[], [None]], ctx)


PLAIN_FIELD_TYPES = ["boolean", "byte", "int", "long", "double", "String", "@nullable String", "byte[]", "byte[4]"]
# Wire values around each plain type's edges, and of every other shape a peer may send.
edge_values = st.one_of(
    st.sampled_from([True, False, None, 0, 1, -1, 127, 128, -128, -129, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1,
                     2**63 - 1, -(2**63), 2**63, 0.0, 1.5, float("inf"), "", "é", b"", b"abcd", b"abcde", [], {}]),
    st.integers(), st.floats(), st.text(max_size=4), st.binary(max_size=6),
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), types=st.lists(st.sampled_from(PLAIN_FIELD_TYPES), min_size=1, max_size=5))
def test_plain_fields_decoded_in_c_are_what_the_python_decodes(data: st.DataObject, types: list[str]) -> None:
    """A parcelable of plain fields is decoded by _wirec.decode_fields, and made by
    _wirec.init_fields, when every value passes as it is: the same parcelable, or the
    same error, as the generated Python."""
    from framework.binder import aidl_support

    fields = "\n".join(f"    {t} f{i};" for i, t in enumerate(types))
    reg = AidlRegistry.from_text(f"package gen;\nparcelable Plain {{\n{fields}\n}}")
    Plain = reg.parcelable("gen.Plain")
    wire = data.draw(st.lists(edge_values, min_size=len(types) - 1, max_size=len(types) + 1) | edge_values)

    values = data.draw(st.lists(edge_values | st.sampled_from(["\ud800", "a\udfff"]), min_size=len(types), max_size=len(types)))

    def fields(value: Any) -> list:
        return [(type(getattr(value, f"f{i}")), getattr(value, f"f{i}")) for i in range(len(types))]

    def outcome() -> Any:
        try:
            decoded = ("value", fields(Plain.from_wire(wire)))
        except BadParcelableException as exc:
            decoded = ("error", str(exc))
        try:
            made = ("value", fields(Plain(**{f"f{i}": v for i, v in enumerate(values)})))
        except (TypeError, ValueError) as exc:
            made = ("error", type(exc), str(exc))
        return decoded, made

    fast = outcome()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(aidl_support, "decode_fields", lambda *args: None)
        m.setattr(aidl_support, "init_fields", lambda *args: False)
        slow = outcome()
    assert fast == slow


def test_decode_fields_refuses_what_is_not_a_parcelables_slots() -> None:
    from framework.binder import _wirec

    reg = AidlRegistry.from_text("package gen; parcelable P { int a; }", "package gen; parcelable Q { int b; }")
    P, Q = reg.parcelable("gen.P"), reg.parcelable("gen.Q")
    kinds = ((_wirec.FIELD_INT, 0, 10),)
    assert _wirec.decode_fields(P, (P.a,), kinds, [3]) == P(a=3)
    assert _wirec.decode_fields(P, (P.a,), kinds, [11]) is None
    with pytest.raises(TypeError):
        _wirec.decode_fields(P, (Q.b,), kinds, [3])  # another class's slot
    with pytest.raises(TypeError):
        _wirec.decode_fields(P, (P.a, P.a), kinds, [3])  # one kind per slot
    with pytest.raises(TypeError):
        _wirec.decode_fields(P, (P.a,), ((99,),), [3])  # no such kind
    with pytest.raises(TypeError):
        _wirec.decode_fields(P, (len,), kinds, [3])  # not a member descriptor
    p = P(a=1)
    assert _wirec.init_fields(p, (P.a,), kinds, (11,)) is False and p.a == 1
    assert _wirec.init_fields(p, (P.a,), kinds, (4,)) is True and p.a == 4
    with pytest.raises(TypeError):
        _wirec.init_fields(Q(b=1), (P.a,), kinds, (4,))  # another class's slot
