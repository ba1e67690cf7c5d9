"""Typed values <-> msgpack-able data: the parcel codec behind every binder call.

The AIDL loader (``_aidl``) resolves every type use to a ``TypeRef``; this module turns
each one, once, at load time, into a ``Codec``: four closures that

* ``check`` a value handed to a constructor or a proxy call (TypeError / ValueError,
  and normalisation: an ``int`` for an enum field becomes the member, a ``bytearray``
  for ``byte[]`` becomes ``bytes``, a tuple for ``T[]`` becomes a fresh list);
* ``encode`` a checked value into msgpack-able data (``None`` when the value already
  is its own wire form, which is true of every primitive and string: a parcelable's
  ``to_wire`` then is little more than building a list of its slots);
* ``decode`` untrusted wire data back into a value, raising ``DecodeError`` on
  anything but exactly what the type allows;
* give the field's ``default``.

Parcelable classes are generated from their definitions with the field codecs
inlined: ``__init__``, ``to_wire`` and the decoder are compiled Python (``exec`` of
code built from the field list) rather than loops that look fields up per call,
because this is the hot path of every transaction.

Wire forms, chosen so that msgpack carries them natively:

=====================  ===================================================
AIDL type              wire
=====================  ===================================================
boolean                msgpack bool
byte, int, long        msgpack int, range-checked to 8, 32 or 64 bits
char                   int 0..0xFFFF (a UTF-16 code unit); Python: 1-char str
float, double          msgpack float (float values are rounded to binary32)
String                 msgpack str
byte[] / byte[n]       msgpack bin; Python: ``bytes``
T[] / T[n] / List<T>   msgpack array; Python: ``list``
enum                   its backing int; Python: the IntEnum member
parcelable             array of its fields in declared order
IBinder / interface    whatever ``ctx.write_binder`` returns
ParcelFileDescriptor   ``ctx.write_fd`` index
SharedMemory           ``[ctx.write_fd index, size]``
=====================  ===================================================

Evolution follows stable AIDL: fields are only ever appended, so a decoder ignores
trailing fields it does not know and fills defaults for the trailing fields an
older writer did not send.
"""

from __future__ import annotations

import enum
import keyword
import math
import operator
import struct
from dataclasses import FrozenInstanceError
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from ._fd import ParcelFileDescriptor, SharedMemory
from ._status import BadParcelableException

if TYPE_CHECKING:
    from ._aidl import InterfaceDef, MethodDef, ParcelableDef, TypeRef

__all__ = [
    "Codec",
    "DecodeError",
    "Parcelable",
    "ParcelContext",
]


class ParcelContext(Protocol):
    """What the runtime gives the codec for values that are not plain data.

    The codec only calls it; the binder runtime implements it per transaction.
    """

    def write_binder(self, obj: Any, interface: InterfaceDef | None) -> Any:
        """A msgpack-able handle for a local Binder, a BinderProxy or None.

        ``interface`` is the declared interface, or None for a plain ``IBinder``.
        """

    def read_binder(self, handle: Any, interface: InterfaceDef | None) -> Any:
        """A proxy (the interface's Proxy when given) or None, from a handle."""

    def write_fd(self, fd: int) -> int:
        """Send ``fd`` along with the transaction (the runtime dups it); its index."""

    def read_fd(self, index: int) -> int:
        """The descriptor sent at ``index``, now owned by the caller."""


class DecodeError(Exception):
    """Wire data that does not match its type, on its way up to the public API.

    ``path`` collects the field names and list indices from the failing value outward
    (innermost first, because appending is O(1) at every level); the public entry
    points turn it into one ``BadParcelableException`` whose message names the
    outermost parcelable or method and the whole path.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []

    def where(self) -> str:
        return "".join(reversed(self.path))


def bad_parcelable(where: str, err: DecodeError) -> BadParcelableException:
    return BadParcelableException(f"{where}{err.where()}: {err.message}")


def _what(v: Any) -> str:
    """A short description of a value a caller passed, for TypeError messages."""
    return "None" if v is None else _describe(v)


def _describe(w: Any) -> str:
    """A short, safe description of wire data (never its whole repr) for error messages."""
    if w is None:
        return "nil"
    if w is True or w is False:
        return f"bool {w}"
    t = type(w)
    if t is int:
        return f"int {w}" if -(10**12) < w < 10**12 else "a large int"
    if t is float:
        return f"float {w!r}"
    if t is str:
        return f"str of length {len(w)}"
    if t is bytes:
        return f"{len(w)} bytes"
    if t is list or t is tuple:
        return f"array of {len(w)}"
    if t is dict:
        return f"map of {len(w)}"
    return t.__name__


class Codec:
    """How one AIDL type is checked, encoded, decoded and defaulted. Built once per type use.

    ``ok_value`` and ``ok_wire`` are optional Python expression templates over ``{v}``
    that are true when a value (or wire datum) already is in canonical form; generated
    parcelable code inlines them and falls back to ``check`` / ``decode`` only when they
    are false, so a valid int field costs one comparison rather than a call.
    """

    __slots__ = (
        "name",
        "check",
        "encode",
        "decode",
        "default",
        "default_factory",
        "ok_value",
        "ok_wire",
        "needs_ctx",
        "env",
    )

    def __init__(
        self,
        name: str,
        check: Callable[[Any], Any],
        encode: Callable[[Any, Any], Any] | None,
        decode: Callable[[Any, Any], Any],
        *,
        default: Any = None,
        default_factory: Callable[[], Any] | None = None,
        ok_value: str | None = None,
        ok_wire: str | None = None,
        needs_ctx: bool = False,
        env: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.check = check
        self.encode = encode
        self.decode = decode
        self.default = default
        self.default_factory = default_factory
        self.ok_value = ok_value
        self.ok_wire = ok_wire
        self.needs_ctx = needs_ctx
        # names the ok_value / ok_wire templates refer to, for the generated code's globals
        self.env = env or {}

    def make_default(self) -> Any:
        return self.default_factory() if self.default_factory is not None else self.default

    def __repr__(self) -> str:
        return f"<Codec {self.name}>"


# --------------------------------------------------------------------------- primitives

_INT_RANGES = {
    "byte": (-(1 << 7), (1 << 7) - 1),
    "int": (-(1 << 31), (1 << 31) - 1),
    "long": (-(1 << 63), (1 << 63) - 1),
}


def _int_codec(tname: str) -> Codec:
    lo, hi = _INT_RANGES[tname]

    def check(v: Any) -> int:
        if type(v) is not int:
            if isinstance(v, (bool, float, enum.Flag)) or (
                isinstance(v, enum.Enum) and not isinstance(v, int)
            ):
                raise TypeError(f"expected {tname}, got {_what(v)}")
            try:
                v = operator.index(v)
            except TypeError:
                raise TypeError(f"expected {tname}, got {_what(v)}") from None
        if not lo <= v <= hi:
            raise ValueError(f"{v} is out of range for {tname} ({lo}..{hi})")
        return v

    def decode(w: Any, ctx: Any) -> int:
        if type(w) is int and lo <= w <= hi:
            return w
        if type(w) is int:
            raise DecodeError(f"{w} is out of range for {tname}")
        raise DecodeError(f"expected {tname}, got {_describe(w)}")

    ok = f"({{v}}.__class__ is int and {lo} <= {{v}} <= {hi})"
    return Codec(tname, check, None, decode, default=0, ok_value=ok, ok_wire=ok)


def _bool_check(v: Any) -> bool:
    if v is True or v is False:
        return v
    raise TypeError(f"expected boolean, got {_what(v)}")


def _bool_decode(w: Any, ctx: Any) -> bool:
    if w is True or w is False:
        return w
    raise DecodeError(f"expected boolean, got {_describe(w)}")


_F32 = struct.Struct("<f")
_FLT_MAX = 3.4028234663852886e38


def _to_f32(v: float) -> float:
    if math.isfinite(v) and abs(v) > _FLT_MAX:
        # struct would raise OverflowError; rounding to binary32 would give inf
        # for some and an error for others, so refuse uniformly.
        raise ValueError(f"{v!r} is out of range for float")
    return _F32.unpack(_F32.pack(v))[0]


def _float_codec(tname: str) -> Codec:
    single = tname == "float"

    def check(v: Any) -> float:
        if type(v) is not float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"expected {tname}, got {_what(v)}")
            try:
                v = float(v)
            except OverflowError:
                raise ValueError(f"{v} is out of range for {tname}") from None
        return _to_f32(v) if single else v

    def decode(w: Any, ctx: Any) -> float:
        if type(w) is float:
            pass
        elif type(w) is int:
            try:
                w = float(w)
            except OverflowError:
                raise DecodeError(f"int is out of range for {tname}") from None
        else:
            raise DecodeError(f"expected {tname}, got {_describe(w)}")
        if single:
            try:
                return _to_f32(w)
            except ValueError as e:
                raise DecodeError(str(e)) from None
        return w

    return Codec(
        tname,
        check,
        None,
        decode,
        default=0.0,
        ok_value=None if single else "({v}.__class__ is float)",
        ok_wire=None if single else "({v}.__class__ is float)",
    )


def _char_check(v: Any) -> str:
    if type(v) is str and len(v) == 1 and ord(v) <= 0xFFFF:
        return v
    if isinstance(v, str) and len(v) == 1 and ord(v) <= 0xFFFF:
        return str(v)
    raise TypeError(f"expected char (a str of one UTF-16 code unit), got {_what(v)}")


def _char_encode(v: str, ctx: Any) -> int:
    return ord(v)


def _char_decode(w: Any, ctx: Any) -> str:
    if type(w) is int and 0 <= w <= 0xFFFF:
        return chr(w)
    raise DecodeError(f"expected char (int 0..65535), got {_describe(w)}")


def _utf8_ok(s: str) -> bool:
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _string_check(v: Any) -> str:
    if type(v) is not str:
        if not isinstance(v, str):
            raise TypeError(f"expected String, got {_what(v)}")
        v = str(v)
    if not _utf8_ok(v):
        raise ValueError("String holds a lone surrogate and cannot be encoded as UTF-8")
    return v


def _string_decode(w: Any, ctx: Any) -> str:
    if type(w) is str:
        return w
    raise DecodeError(f"expected String, got {_describe(w)}")


def _bytes_codec(fixed: int | None) -> Codec:
    """``byte[]``: Python bytes, msgpack bin (not an array of ints, which is 2-9x larger)."""
    shape = "byte[]" if fixed is None else f"byte[{fixed}]"

    def check(v: Any) -> bytes:
        if type(v) is not bytes:
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise TypeError(f"expected {shape} (bytes), got {_what(v)}")
            v = bytes(v)
        if fixed is not None and len(v) != fixed:
            raise ValueError(f"expected {fixed} bytes for {shape}, got {len(v)}")
        return v

    def decode(w: Any, ctx: Any) -> bytes:
        if type(w) is not bytes:
            raise DecodeError(f"expected {shape} (bin), got {_describe(w)}")
        if fixed is not None and len(w) != fixed:
            raise DecodeError(f"expected {fixed} bytes for {shape}, got {len(w)}")
        return w

    if fixed is None:
        ok = "({v}.__class__ is bytes)"
        return Codec(shape, check, None, decode, default=b"", ok_value=ok, ok_wire=ok)
    ok = f"({{v}}.__class__ is bytes and len({{v}}) == {fixed})"
    return Codec(shape, check, None, decode, default=bytes(fixed), ok_value=ok, ok_wire=ok)


def primitive_codec(name: str) -> Codec:
    """The codec of a builtin scalar type, by its AIDL name."""
    if name in _INT_RANGES:
        return _int_codec(name)
    if name == "boolean":
        ok = "({v} is True or {v} is False)"
        return Codec("boolean", _bool_check, None, _bool_decode, default=False, ok_value=ok, ok_wire=ok)
    if name in ("float", "double"):
        return _float_codec(name)
    if name == "char":
        return Codec("char", _char_check, _char_encode, _char_decode, default="\0")
    if name == "String":
        return Codec(
            "String",
            _string_check,
            None,
            _string_decode,
            default="",
            ok_value="({v}.__class__ is str and {v}.isascii())",
            ok_wire="({v}.__class__ is str)",
        )
    raise KeyError(name)


# --------------------------------------------------------------------------- objects

_NOT_A_BINDER = (bool, int, float, str, bytes, bytearray, list, tuple, dict, enum.Enum)


def binder_codec(interface: InterfaceDef | None) -> Codec:
    """``IBinder`` (interface None) or an interface type: handles made by the context.

    A value of None is accepted at construction (there is no other default for a
    binder), but only a ``@nullable`` one may be encoded; see ``nullable``.
    """
    name = "IBinder" if interface is None else interface.name

    def check(v: Any) -> Any:
        if v is not None and (isinstance(v, _NOT_A_BINDER) or isinstance(v, Parcelable)):
            raise TypeError(f"expected a binder object for {name}, got {_what(v)}")
        return v

    def encode(v: Any, ctx: Any) -> Any:
        if ctx is None:
            raise TypeError(f"{name} needs a ParcelContext to be written")
        return ctx.write_binder(v, interface)

    def decode(w: Any, ctx: Any) -> Any:
        if ctx is None:
            raise DecodeError(f"{name} needs a ParcelContext to be read")
        try:
            return ctx.read_binder(w, interface)
        except BadParcelableException as e:
            raise DecodeError(e.message or f"bad binder handle for {name}") from None
        except (TypeError, ValueError, KeyError, IndexError) as e:
            raise DecodeError(f"bad binder handle for {name}: {e}") from None

    return Codec(name, check, encode, decode, default=None, needs_ctx=True)


def _read_fd(ctx: Any, w: Any, name: str) -> int:
    if ctx is None:
        raise DecodeError(f"{name} needs a ParcelContext to be read")
    if type(w) is not int or w < 0:
        raise DecodeError(f"expected a descriptor index for {name}, got {_describe(w)}")
    try:
        fd = ctx.read_fd(w)
    except BadParcelableException as e:
        raise DecodeError(e.message or f"no descriptor at index {w}") from None
    except (TypeError, ValueError, KeyError, IndexError, OSError) as e:
        raise DecodeError(f"no descriptor at index {w}: {e}") from None
    if type(fd) is not int or fd < 0:
        raise DecodeError(f"the context returned {_describe(fd)} for descriptor index {w}")
    return fd


def pfd_codec() -> Codec:
    def check(v: Any) -> Any:
        if v is not None and not isinstance(v, ParcelFileDescriptor):
            raise TypeError(f"expected ParcelFileDescriptor, got {_what(v)}")
        return v

    def encode(v: ParcelFileDescriptor, ctx: Any) -> int:
        if ctx is None:
            raise TypeError("ParcelFileDescriptor needs a ParcelContext to be written")
        return ctx.write_fd(v.fileno())

    def decode(w: Any, ctx: Any) -> ParcelFileDescriptor:
        return ParcelFileDescriptor(_read_fd(ctx, w, "ParcelFileDescriptor"))

    return Codec("ParcelFileDescriptor", check, encode, decode, default=None, needs_ctx=True)


def shared_memory_codec() -> Codec:
    def check(v: Any) -> Any:
        if v is not None and not isinstance(v, SharedMemory):
            raise TypeError(f"expected SharedMemory, got {_what(v)}")
        return v

    def encode(v: SharedMemory, ctx: Any) -> list:
        if ctx is None:
            raise TypeError("SharedMemory needs a ParcelContext to be written")
        return [ctx.write_fd(v.fd), v.size]

    def decode(w: Any, ctx: Any) -> SharedMemory:
        if (
            type(w) is not list and type(w) is not tuple
            or len(w) != 2
            or type(w[1]) is not int
            or w[1] < 0
        ):
            raise DecodeError(f"expected SharedMemory [index, size], got {_describe(w)}")
        fd = _read_fd(ctx, w[0], "SharedMemory")
        try:
            return SharedMemory(fd, w[1])
        except (ValueError, OSError) as e:  # SharedMemory closed the fd it was given
            raise DecodeError(f"bad SharedMemory: {e}") from None

    return Codec("SharedMemory", check, encode, decode, default=None, needs_ctx=True)


def enum_codec(cls: type[enum.IntEnum], qualified: str) -> Codec:
    """An AIDL enum: the IntEnum member in Python, its backing int on the wire."""
    by_value = {m.value: m for m in cls}
    first = next(iter(cls))

    def check(v: Any) -> Any:
        if type(v) is cls:
            return v
        if isinstance(v, (bool, enum.Enum)) or not isinstance(v, int):
            raise TypeError(f"expected {qualified}, got {_what(v)}")
        m = by_value.get(int(v))
        if m is None:
            raise ValueError(f"{v} is not a value of {qualified}")
        return m

    def encode(v: Any, ctx: Any) -> int:
        return v._value_  # a plain int on the wire, even before msgpack sees it

    def decode(w: Any, ctx: Any) -> Any:
        if type(w) is cls:  # an in-process hand-over that skipped msgpack
            return w
        if type(w) is int:
            m = by_value.get(w)
            if m is not None:
                return m
            raise DecodeError(f"{w} is not a value of {qualified}")
        raise DecodeError(f"expected {qualified} (int), got {_describe(w)}")

    return Codec(qualified, check, encode, decode, default=first, ok_value=f"({{v}}.__class__ is _aidl_cls_{id(cls)})",
                 env={f"_aidl_cls_{id(cls)}": cls})


def parcelable_codec(cls: type[Parcelable], qualified: str) -> Codec:
    """A parcelable used as a field, argument or element: its ``to_wire`` array."""

    def check(v: Any) -> Any:
        if type(v) is cls or isinstance(v, cls):
            return v
        raise TypeError(f"expected {qualified}, got {_what(v)}")

    def encode(v: Parcelable, ctx: Any) -> list:
        if v.__class__ is cls:
            return v.to_wire(ctx)
        # Only reachable through a list mutated after construction: check it now.
        return check(v).to_wire(ctx)

    def decode(w: Any, ctx: Any) -> Any:
        return cls._aidl_decode(w, ctx)

    return Codec(
        qualified,
        check,
        encode,
        decode,
        default_factory=cls,
        ok_value=f"({{v}}.__class__ is _aidl_cls_{id(cls)})",
        env={f"_aidl_cls_{id(cls)}": cls},
    )


# --------------------------------------------------------------------------- combinators


def nullable(inner: Codec) -> Codec:
    """``@nullable T``: None is allowed everywhere and travels as nil."""
    icheck, iencode, idecode = inner.check, inner.encode, inner.decode

    def check(v: Any) -> Any:
        return None if v is None else icheck(v)

    def decode(w: Any, ctx: Any) -> Any:
        return None if w is None else idecode(w, ctx)

    encode = None
    if iencode is not None:

        def encode(v: Any, ctx: Any) -> Any:
            return None if v is None else iencode(v, ctx)

    ok_value = f"({{v}} is None or {inner.ok_value})" if inner.ok_value else None
    ok_wire = f"({{v}} is None or {inner.ok_wire})" if inner.ok_wire else None
    return Codec(
        f"@nullable {inner.name}",
        check,
        encode,
        decode,
        default=None,
        ok_value=ok_value,
        ok_wire=ok_wire,
        needs_ctx=inner.needs_ctx,
        env=inner.env,
    )


def non_null_object(inner: Codec) -> Codec:
    """A non-nullable binder or descriptor: None stands until it is written, then TypeError."""
    iencode, idecode = inner.encode, inner.decode
    assert iencode is not None

    def encode(v: Any, ctx: Any) -> Any:
        if v is None:
            raise TypeError(f"a non-@nullable {inner.name} cannot be null")
        return iencode(v, ctx)

    def decode(w: Any, ctx: Any) -> Any:
        v = idecode(w, ctx) if w is not None else None
        if v is None:
            raise DecodeError(f"null {inner.name} where @nullable is not declared")
        return v

    return Codec(inner.name, inner.check, encode, decode, default=None, needs_ctx=True)


def array_codec(elem: Codec, fixed: int | None, kind: str) -> Codec:
    """``T[]``, ``T[n]`` or ``List<T>``: a Python list, a msgpack array."""
    shape = f"{elem.name}[]" if kind == "array" and fixed is None else (
        f"{elem.name}[{fixed}]" if kind == "array" else f"List<{elem.name}>"
    )
    echeck, eencode, edecode = elem.check, elem.encode, elem.decode

    def check(v: Any) -> list:
        if type(v) is not list and not isinstance(v, (list, tuple)):
            raise TypeError(f"expected {shape} (a list), got {_what(v)}")
        if fixed is not None and len(v) != fixed:
            raise ValueError(f"expected {fixed} elements for {shape}, got {len(v)}")
        out = []
        for i, x in enumerate(v):
            try:
                out.append(echeck(x))
            except (TypeError, ValueError) as e:
                raise type(e)(f"[{i}]: {e}") from None
        return out

    encode = None
    if eencode is not None:

        def encode(v: list, ctx: Any) -> list:
            return [eencode(x, ctx) for x in v]

    ok_elem = elem.ok_wire

    def decode(w: Any, ctx: Any) -> list:
        if type(w) is not list and type(w) is not tuple:
            raise DecodeError(f"expected {shape} (an array), got {_describe(w)}")
        if fixed is not None and len(w) != fixed:
            raise DecodeError(f"expected {fixed} elements for {shape}, got {len(w)}")
        out = []
        append = out.append
        for i, x in enumerate(w):
            try:
                append(edecode(x, ctx))
            except DecodeError as e:
                e.path.append(f"[{i}]")
                raise
        return out

    if ok_elem is not None and not elem.needs_ctx:
        # Primitive elements: validate with one generator and keep the list as is.
        ok_fn = eval(f"lambda v: {ok_elem.format(v='v')}", dict(elem.env))  # noqa: S307 - our own template
        slow_decode = decode

        def decode(w: Any, ctx: Any) -> list:  # noqa: F811
            if (type(w) is list or type(w) is tuple) and (fixed is None or len(w) == fixed):
                if all(map(ok_fn, w)):
                    return list(w)
            return slow_decode(w, ctx)

    if fixed is None:
        return Codec(shape, check, encode, decode, default_factory=list, needs_ctx=elem.needs_ctx)

    def default() -> list:
        return [elem.make_default() for _ in range(fixed)]

    return Codec(shape, check, encode, decode, default_factory=default, needs_ctx=elem.needs_ctx)


# --------------------------------------------------------------------------- parcelable classes


class Parcelable:
    """Base of every class generated from an AIDL ``parcelable``.

    Instances are frozen and slotted; construct them with keyword arguments. Every
    value is checked at construction (TypeError or ValueError naming the field), so
    encoding never has to look again. ``to_wire(ctx)`` gives the msgpack-able array of
    fields in declared order; ``from_wire(data, ctx)`` is its strict inverse and raises
    only ``BadParcelableException``.
    """

    __slots__ = ()
    __aidl__: ClassVar[ParcelableDef]
    _aidl_fields: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r} of frozen parcelable {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r} of frozen parcelable {type(self).__name__}")

    def _aidl_astuple(self) -> tuple:
        return tuple(getattr(self, f) for f in self._aidl_fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._aidl_astuple() == other._aidl_astuple()  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.__class__, self._aidl_astuple()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._aidl_fields)
        return f"{type(self).__name__}({inner})"

    def replace(self, **changes: Any) -> Parcelable:
        """A copy with ``changes`` applied, checked like a new construction."""
        kw = {f: getattr(self, f) for f in self._aidl_fields}
        unknown = set(changes) - set(kw)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {', '.join(sorted(unknown))}")
        kw.update(changes)
        return type(self)(**kw)

    def __copy__(self) -> Parcelable:
        return self

    def __deepcopy__(self, memo: dict) -> Parcelable:
        import copy

        return type(self)(**{f: copy.deepcopy(getattr(self, f), memo) for f in self._aidl_fields})

    def __reduce__(self) -> Any:
        # Generated classes are not importable by name, so pickle cannot find them;
        # say so plainly rather than failing inside copyreg.
        raise TypeError(
            f"{type(self).__name__} is an AIDL parcelable: send it through a binder "
            "(to_wire / from_wire), not pickle"
        )

    def to_wire(self, ctx: Any = None) -> list:  # replaced in every generated class
        raise NotImplementedError

    @classmethod
    def _aidl_decode(cls, data: Any, ctx: Any) -> Parcelable:  # replaced in every generated class
        raise NotImplementedError

    @classmethod
    def from_wire(cls, data: Any, ctx: Any = None) -> Parcelable:
        """Decode ``data`` (as msgpack unpacked it); BadParcelableException if it does not fit."""
        try:
            return cls._aidl_decode(data, ctx)
        except DecodeError as e:
            raise bad_parcelable(cls.__aidl__.name, e) from None
        except RecursionError:
            raise BadParcelableException(f"{cls.__aidl__.name}: nested too deeply") from None


def make_parcelable_shell(
    simple_name: str, field_names: tuple[str, ...], constants: dict[str, Any]
) -> type[Parcelable]:
    """The class object, with its slots and constants, before any codec exists.

    Classes are made first and filled in later so that parcelables can refer to each
    other (and to themselves, through @nullable fields or lists) in any order.
    """
    ns: dict[str, Any] = {"__slots__": field_names, "_aidl_fields": field_names, "__match_args__": field_names}
    ns.update(constants)
    return type(simple_name, (Parcelable,), ns)


_RESERVED = frozenset(dir(Parcelable)) | {"__aidl__"}


def field_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Python field name of a generated parcelable, or None."""
    if keyword.iskeyword(name):
        return f"{name!r} is a Python keyword"
    if name in _RESERVED or name.startswith(("_aidl_", "__")):
        return f"{name!r} would shadow a method of the generated parcelable class"
    return None


def finish_parcelable_class(
    cls: type[Parcelable], pdef: ParcelableDef, codecs: list[Codec], *, module: str | None = None
) -> None:
    """Compile ``__init__``, ``to_wire`` and the decoder of ``cls`` from its field codecs."""
    names = cls._aidl_fields
    qual = pdef.name
    simple = cls.__name__
    g: dict[str, Any] = {
        "_aidl_cls": cls,
        "_aidl_new": object.__new__,
        "_aidl_MISSING": _MISSING,
        "_aidl_DecodeError": DecodeError,
        "_aidl_rewrap": _rewrap,
        "_aidl_describe": _describe,
    }
    for c in codecs:
        g.update(c.env)

    # Every generated name starts with _aidl_ (a prefix no field may use), so a field
    # called ``self``, ``data`` or ``e`` cannot shadow anything.
    params = ", ".join(f"{n}=_aidl_MISSING" for n in names)
    init = [f"def __init__(_aidl_self, *, {params}):" if names else "def __init__(_aidl_self):"]
    enc = ["def to_wire(_aidl_self, _aidl_ctx=None):"]
    enc_items: list[str] = []
    # The common case, a writer of the same version: one unpacking, no length tests.
    fast = [
        f"    if _aidl_data.__class__ is list and len(_aidl_data) == {len(names)}:",
        f"        {''.join(f'_aidl_w{i}, ' for i in range(len(names)))}= _aidl_data",
    ] if names else []
    fast_set = ["        _aidl_self = _aidl_new(_aidl_cls)"]
    dec = [
        "def _aidl_decode(_aidl_data, _aidl_ctx):",
        "    if _aidl_data.__class__ is not list and _aidl_data.__class__ is not tuple:",
        f"        raise _aidl_DecodeError('expected {simple} (an array of fields), got ' + _aidl_describe(_aidl_data))",
        "    _aidl_n = len(_aidl_data)",
        "    _aidl_self = _aidl_new(_aidl_cls)",
    ]
    for i, (name, codec) in enumerate(zip(names, codecs)):
        g[f"_aidl_s{i}"] = getattr(cls, name).__set__
        g[f"_aidl_c{i}"] = codec.check
        g[f"_aidl_e{i}"] = codec.encode
        g[f"_aidl_d{i}"] = codec.decode
        g[f"_aidl_f{i}"] = codec.default_factory
        g[f"_aidl_v{i}"] = codec.default
        default_expr = f"_aidl_f{i}()" if codec.default_factory is not None else f"_aidl_v{i}"
        # __init__: the default, or the value if already canonical, else check() it
        init.append(f"    if {name} is _aidl_MISSING:")
        init.append(f"        {name} = {default_expr}")
        if codec.ok_value:
            init.append(f"    elif not {codec.ok_value.format(v=name)}:")
        else:
            init.append("    else:")
        init.append("        try:")
        init.append(f"            {name} = _aidl_c{i}({name})")
        init.append("        except (TypeError, ValueError) as _aidl_e:")
        init.append(f"            raise _aidl_rewrap(_aidl_e, {simple + '.' + name!r}) from None")
        init.append(f"    _aidl_s{i}(_aidl_self, {name})")
        # to_wire: checked values of most types are their own wire form
        # (the others may still fail: a null non-@nullable binder, a closed descriptor)
        if codec.encode is None:
            enc_items.append(f"_aidl_self.{name}")
        else:
            enc.append("    try:")
            enc.append(f"        _aidl_x{i} = _aidl_e{i}(_aidl_self.{name}, _aidl_ctx)")
            enc.append("    except (TypeError, ValueError) as _aidl_e:")
            enc.append(f"        raise _aidl_rewrap(_aidl_e, {simple + '.' + name!r}) from None")
            enc_items.append(f"_aidl_x{i}")
        # decoder: a field the writer did not send (an older writer) takes its default
        dec.append(f"    if _aidl_n > {i}:")
        dec.append(f"        _aidl_w = _aidl_data[{i}]")
        if codec.ok_wire:
            dec.append(f"        if not {codec.ok_wire.format(v='_aidl_w')}:")
            pad = "            "
        else:
            pad = "        "
        dec.append(f"{pad}try:")
        dec.append(f"{pad}    _aidl_w = _aidl_d{i}(_aidl_w, _aidl_ctx)")
        dec.append(f"{pad}except _aidl_DecodeError as _aidl_e:")
        dec.append(f"{pad}    _aidl_e.path.append({'.' + name!r})")
        dec.append(f"{pad}    raise")
        dec.append("    else:")
        dec.append(f"        _aidl_w = {default_expr}")
        dec.append(f"    _aidl_s{i}(_aidl_self, _aidl_w)")
        if codec.ok_wire:
            fast.append(f"        if not {codec.ok_wire.format(v=f'_aidl_w{i}')}:")
            fpad = "            "
        else:
            fpad = "        "
        fast.append(f"{fpad}try:")
        fast.append(f"{fpad}    _aidl_w{i} = _aidl_d{i}(_aidl_w{i}, _aidl_ctx)")
        fast.append(f"{fpad}except _aidl_DecodeError as _aidl_e:")
        fast.append(f"{fpad}    _aidl_e.path.append({'.' + name!r})")
        fast.append(f"{fpad}    raise")
        fast_set.append(f"        _aidl_s{i}(_aidl_self, _aidl_w{i})")
    if not names:
        init.append("    pass")
    enc.append(f"    return [{', '.join(enc_items)}]")
    dec.append("    return _aidl_self")
    if names:
        dec[1:1] = fast + fast_set + ["        return _aidl_self"]
    src = "\n".join(init + enc + dec)
    exec(compile(src, f"<aidl parcelable {qual}>", "exec"), g)  # noqa: S102 - generated from our own AST
    g["__init__"].__qualname__ = f"{simple}.__init__"
    g["to_wire"].__qualname__ = f"{simple}.to_wire"
    g["to_wire"].__doc__ = f"The fields of this {simple} as a msgpack-able array, in declared order."
    cls.__init__ = g["__init__"]  # type: ignore[misc]
    cls.to_wire = g["to_wire"]  # type: ignore[method-assign]
    cls._aidl_decode = staticmethod(g["_aidl_decode"])  # type: ignore[method-assign, assignment]
    cls.__aidl__ = pdef
    cls.__module__ = module or pdef.name.rpartition(".")[0] or "aidl"
    cls.__qualname__ = simple
    cls.__doc__ = pdef.doc or f"AIDL parcelable {qual}."


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


_MISSING = _Missing()


def _rewrap(e: Exception, where: str) -> Exception:
    return type(e)(f"{where}: {e}")


# --------------------------------------------------------------------------- methods


class MethodCodec:
    """The argument and reply codecs of one method, compiled like a parcelable's.

    Four functions are generated per method (``encode_call``, ``decode_call``,
    ``encode_reply``, ``decode_reply``) with every argument's codec bound by name, so a
    call costs what its arguments cost and nothing per method.
    """

    __slots__ = ("where", "names", "directions", "encode_call", "decode_call", "encode_reply", "decode_reply")

    def __init__(self, where: str, names: list[str], directions: list[str], codecs: list[Codec], ret: Codec | None):
        self.where = where
        self.names = tuple(names)
        self.directions = tuple(directions)
        in_idx = [i for i, d in enumerate(directions) if d != "out"]
        out_idx = [i for i, d in enumerate(directions) if d != "in"]
        g: dict[str, Any] = {
            "DecodeError": DecodeError,
            "BadParcelableException": BadParcelableException,
            "_describe": _describe,
            "_what": _what,
            "_bad": bad_parcelable,
            "_rewrap": _rewrap,
            "_where": where,
        }
        for i, c in enumerate(codecs):
            g[f"_c{i}"], g[f"_e{i}"], g[f"_d{i}"], g[f"_f{i}"] = c.check, c.encode, c.decode, c.make_default
            g.update(c.env)
        if ret is not None:
            g["_cr"], g["_er"], g["_dr"] = ret.check, ret.encode, ret.decode
            g.update(ret.env)

        def check_encode(var: str, i: int | str, label: str, out: list[str], pad: str) -> None:
            c = codecs[i] if isinstance(i, int) else ret
            assert c is not None
            ok = c.ok_value.format(v=var) if c.ok_value else None
            out.append(f"{pad}try:")
            if ok:
                out.append(f"{pad}    if not {ok}:")
                out.append(f"{pad}        {var} = _c{i}({var})")
            else:
                out.append(f"{pad}    {var} = _c{i}({var})")
            if c.encode is not None:
                out.append(f"{pad}    {var} = _e{i}({var}, ctx)")
            out.append(f"{pad}except (TypeError, ValueError) as e:")
            out.append(f"{pad}    raise _rewrap(e, _where + {label!r}) from None")

        def decode(var: str, i: int | str, label: str, out: list[str], pad: str) -> None:
            c = codecs[i] if isinstance(i, int) else ret
            assert c is not None
            if c.ok_wire:
                out.append(f"{pad}if not {c.ok_wire.format(v=var)}:")
                pad += "    "
            out.append(f"{pad}try:")
            out.append(f"{pad}    {var} = _d{i}({var}, ctx)")
            out.append(f"{pad}except DecodeError as e:")
            out.append(f"{pad}    e.path.append({label!r})")
            out.append(f"{pad}    raise")

        n_in, n_all, n_out = len(in_idx), len(names), len(out_idx)
        a = [f"a{i}" for i in range(n_all)]
        ins = ", ".join(names[i] for i in in_idx) or "none"
        src: list[str] = []

        # encode_call(args, ctx): the in/inout arguments, or all of them (outs ignored)
        src.append("def encode_call(args, ctx):")
        src.append("    n = len(args)")
        unpack_in = "".join(f"{a[i]}, " for i in in_idx)
        unpack_all = "".join(f"{x}, " for x in a)
        src.append(f"    if n == {n_in}:")
        src.append(f"        {unpack_in}= args" if n_in else "        pass")
        if n_all != n_in:
            src.append(f"    elif n == {n_all}:")
            src.append(f"        {unpack_all}= args")
        src.append("    else:")
        src.append(
            f"        raise TypeError(_where + ' takes {n_in} argument(s) ({ins}), got ' + str(n))"
        )
        for i in in_idx:
            check_encode(a[i], i, f": argument {names[i]}", src, "    ")
        src.append(f"    return [{', '.join(a[i] for i in in_idx)}]")

        # decode_call(data, ctx): the full positional tuple, out arguments defaulted
        src.append("def decode_call(data, ctx):")
        src.append("    if data.__class__ is not list and data.__class__ is not tuple:")
        src.append("        raise BadParcelableException(_where + ': expected an array of arguments, got ' + _describe(data))")
        src.append(f"    if len(data) != {n_in}:")
        src.append(
            f"        raise BadParcelableException(_where + ': expected {n_in} argument(s), got ' + str(len(data)))"
        )
        src.append("    try:")
        src.append(f"        {unpack_in}= data" if n_in else "        pass")
        for i in in_idx:
            decode(a[i], i, f": argument {names[i]}", src, "        ")
        src.append("    except DecodeError as e:")
        src.append("        raise _bad(_where, e) from None")
        src.append("    except RecursionError:")
        src.append("        raise BadParcelableException(_where + ': nested too deeply') from None")
        for i in range(n_all):
            if i not in in_idx:
                src.append(f"    {a[i]} = _f{i}()")
        src.append(f"    return ({''.join(f'{x}, ' for x in a)})")

        # encode_reply(result, outs, ctx)
        src.append("def encode_reply(result, outs, ctx):")
        src.append(f"    if len(outs) != {n_out}:")
        src.append(
            f"        raise TypeError(_where + ' replies with {n_out} out/inout value(s), got ' + str(len(outs)))"
        )
        if n_out:
            src.append(f"    {''.join(f'{a[i]}, ' for i in out_idx)}= outs")
        if ret is None:
            src.append("    if result is not None:")
            src.append("        raise TypeError(_where + ' returns void, not ' + _what(result))")
        else:
            check_encode("result", "r", ": return value", src, "    ")
        for i in out_idx:
            check_encode(a[i], i, f": out argument {names[i]}", src, "    ")
        head = [] if ret is None else ["result"]
        src.append(f"    return [{', '.join(head + [a[i] for i in out_idx])}]")

        # decode_reply(data, ctx): result, or (result, *outs)
        n_reply = len(head) + n_out
        src.append("def decode_reply(data, ctx):")
        src.append(
            f"    if (data.__class__ is not list and data.__class__ is not tuple) or len(data) != {n_reply}:"
        )
        src.append(
            f"        raise BadParcelableException(_where + ': expected a reply of {n_reply} value(s), got ' + _describe(data))"
        )
        src.append("    try:")
        reply_vars = (["result"] if ret is not None else []) + [a[i] for i in out_idx]
        src.append(f"        {''.join(f'{v}, ' for v in reply_vars)}= data" if reply_vars else "        pass")
        if ret is not None:
            decode("result", "r", ": return value", src, "        ")
        for i in out_idx:
            decode(a[i], i, f": out argument {names[i]}", src, "        ")
        src.append("    except DecodeError as e:")
        src.append("        raise _bad(_where, e) from None")
        src.append("    except RecursionError:")
        src.append("        raise BadParcelableException(_where + ': nested too deeply') from None")
        result = "result" if ret is not None else "None"
        if n_out:
            src.append(f"    return ({result}, {', '.join(a[i] for i in out_idx)})")
        else:
            src.append(f"    return {result}")

        exec(compile("\n".join(src), f"<aidl method {where}>", "exec"), g)  # noqa: S102
        for fn in ("encode_call", "decode_call", "encode_reply", "decode_reply"):
            setattr(self, fn, g[fn])
