"""The parcel codec's library: what the code the AIDL compiler writes calls.

The compiler (``aidlc``) writes each parcelable's ``__init__``, ``to_wire`` and
decoder, and each method's call and reply encoders and decoders, as plain Python in
the generated module; the cheap test that a value already is in canonical form
(``uid.__class__ is int and -2147483648 <= uid <= 2147483647``) is written inline,
and everything else is a call to one of the functions here:

* ``check_<type>(v)`` checks a value handed to a constructor or a proxy call
  (TypeError / ValueError, and normalisation: an ``int`` for an enum field becomes
  the member, a ``bytearray`` for ``byte[]`` becomes ``bytes``);
* ``encode_<type>(v, ctx)`` writes what is not its own wire form (binders and
  descriptors, through the ``ParcelContext``); every primitive and string is;
* ``decode_<type>(w, ...)`` reads untrusted wire data back, raising ``DecodeError``
  on anything but exactly what the type allows.

The generated code adds the field or argument to a message (``rewrap`` for checks,
``DecodeError.path`` for decoding), so every error names where it happened.

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
older writer did not send (``fields_of`` marks them ``DEFAULT``).
"""

from __future__ import annotations

import enum
import keyword
import math
import operator
import struct
from dataclasses import FrozenInstanceError
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ._fd import ParcelFileDescriptor, SharedMemory
from ._status import BadParcelableException

if TYPE_CHECKING:
    from ._aidl import InterfaceDef, ParcelableDef

__all__ = [
    "DEFAULT",
    "DecodeError",
    "ParcelContext",
    "Parcelable",
    "bad_parcelable",
    "check_binder",
    "check_boolean",
    "check_byte",
    "check_bytes",
    "check_char",
    "check_double",
    "check_enum",
    "check_float",
    "check_int",
    "check_long",
    "check_parcelable",
    "check_pfd",
    "check_shared_memory",
    "check_string",
    "decode_binder",
    "decode_boolean",
    "decode_byte",
    "decode_bytes",
    "decode_char",
    "decode_double",
    "decode_enum",
    "decode_float",
    "decode_int",
    "decode_long",
    "decode_pfd",
    "decode_shared_memory",
    "decode_string",
    "describe",
    "encode_binder",
    "encode_pfd",
    "encode_shared_memory",
    "field_name_problem",
    "fields_of",
    "rewrap",
    "what",
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
    """The one exception a caller sees for ``err``, raised while decoding ``where``."""
    return BadParcelableException(f"{where}{err.where()}: {err.message}")


def rewrap(e: Exception, where: str) -> Exception:
    """``e`` (a TypeError or ValueError from a check) again, its message prefixed by ``where``."""
    return type(e)(f"{where}: {e}")


def what(v: Any) -> str:
    """A short description of a value a caller passed, for TypeError messages."""
    return "None" if v is None else describe(v)


def describe(w: Any) -> str:
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


class _Default:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


DEFAULT: Any = _Default()
"""A field's value when the caller, or an older writer, gave none: the field's default."""


def fields_of(data: Any, count: int, name: str) -> list:
    """The ``count`` fields of a parcelable's wire array that is not exactly a list of
    ``count``: a newer writer's trailing fields dropped, an older writer's missing ones
    ``DEFAULT``."""
    if data.__class__ is not list and data.__class__ is not tuple:
        raise DecodeError(f"expected {name} (an array of fields), got {describe(data)}")
    n = len(data)
    return list(data[:count]) if n >= count else [*data, *(DEFAULT,) * (count - n)]


# --------------------------------------------------------------------------- integers


def _check_integer(v: Any, tname: str, lo: int, hi: int) -> int:
    if type(v) is not int:
        if isinstance(v, (bool, float, enum.Flag)) or (isinstance(v, enum.Enum) and not isinstance(v, int)):
            raise TypeError(f"expected {tname}, got {what(v)}")
        try:
            v = operator.index(v)
        except TypeError:
            raise TypeError(f"expected {tname}, got {what(v)}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{v} is out of range for {tname} ({lo}..{hi})")
    return v


def _decode_integer(w: Any, tname: str, lo: int, hi: int) -> int:
    if type(w) is int:
        if lo <= w <= hi:
            return w
        raise DecodeError(f"{w} is out of range for {tname}")
    raise DecodeError(f"expected {tname}, got {describe(w)}")


def check_byte(v: Any) -> int:
    return _check_integer(v, "byte", -(1 << 7), (1 << 7) - 1)


def check_int(v: Any) -> int:
    return _check_integer(v, "int", -(1 << 31), (1 << 31) - 1)


def check_long(v: Any) -> int:
    return _check_integer(v, "long", -(1 << 63), (1 << 63) - 1)


def decode_byte(w: Any) -> int:
    return _decode_integer(w, "byte", -(1 << 7), (1 << 7) - 1)


def decode_int(w: Any) -> int:
    return _decode_integer(w, "int", -(1 << 31), (1 << 31) - 1)


def decode_long(w: Any) -> int:
    return _decode_integer(w, "long", -(1 << 63), (1 << 63) - 1)


# --------------------------------------------------------------------------- other scalars


def check_boolean(v: Any) -> bool:
    if v is True or v is False:
        return v
    raise TypeError(f"expected boolean, got {what(v)}")


def decode_boolean(w: Any) -> bool:
    if w is True or w is False:
        return w
    raise DecodeError(f"expected boolean, got {describe(w)}")


_F32 = struct.Struct("<f")
_FLT_MAX = 3.4028234663852886e38


def _to_f32(v: float) -> float:
    if math.isfinite(v) and abs(v) > _FLT_MAX:
        # struct would raise OverflowError; rounding to binary32 would give inf
        # for some and an error for others, so refuse uniformly.
        raise ValueError(f"{v!r} is out of range for float")
    return _F32.unpack(_F32.pack(v))[0]


def _check_real(v: Any, tname: str) -> float:
    if type(v) is not float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"expected {tname}, got {what(v)}")
        try:
            v = float(v)
        except OverflowError:
            raise ValueError(f"{v} is out of range for {tname}") from None
    return v


def _decode_real(w: Any, tname: str) -> float:
    if type(w) is float:
        return w
    if type(w) is int:
        try:
            return float(w)
        except OverflowError:
            raise DecodeError(f"int is out of range for {tname}") from None
    raise DecodeError(f"expected {tname}, got {describe(w)}")


def check_float(v: Any) -> float:
    """A binary32 ``float``: the value rounded as Java's float would hold it."""
    return _to_f32(_check_real(v, "float"))


def check_double(v: Any) -> float:
    return _check_real(v, "double")


def decode_float(w: Any) -> float:
    try:
        return _to_f32(_decode_real(w, "float"))
    except ValueError as e:
        raise DecodeError(str(e)) from None


def decode_double(w: Any) -> float:
    return _decode_real(w, "double")


def check_char(v: Any) -> str:
    if type(v) is str and len(v) == 1 and ord(v) <= 0xFFFF:
        return v
    if isinstance(v, str) and len(v) == 1 and ord(v) <= 0xFFFF:
        return str(v)
    raise TypeError(f"expected char (a str of one UTF-16 code unit), got {what(v)}")


def decode_char(w: Any) -> str:
    if type(w) is int and 0 <= w <= 0xFFFF:
        return chr(w)
    raise DecodeError(f"expected char (int 0..65535), got {describe(w)}")


def _utf8_ok(s: str) -> bool:
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_string(v: Any) -> str:
    if type(v) is not str:
        if not isinstance(v, str):
            raise TypeError(f"expected String, got {what(v)}")
        v = str(v)
    if not _utf8_ok(v):
        raise ValueError("String holds a lone surrogate and cannot be encoded as UTF-8")
    return v


def decode_string(w: Any) -> str:
    if type(w) is str:
        return w
    raise DecodeError(f"expected String, got {describe(w)}")


def check_bytes(v: Any, size: int | None = None) -> bytes:
    """``byte[]`` (``size`` None) or ``byte[size]``: Python bytes, msgpack bin (not an
    array of ints, which is 2-9x larger)."""
    if type(v) is not bytes:
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected {_bytes_shape(size)} (bytes), got {what(v)}")
        v = bytes(v)
    if size is not None and len(v) != size:
        raise ValueError(f"expected {size} bytes for byte[{size}], got {len(v)}")
    return v


def decode_bytes(w: Any, size: int | None = None) -> bytes:
    if type(w) is not bytes:
        raise DecodeError(f"expected {_bytes_shape(size)} (bin), got {describe(w)}")
    if size is not None and len(w) != size:
        raise DecodeError(f"expected {size} bytes for byte[{size}], got {len(w)}")
    return w


def _bytes_shape(size: int | None) -> str:
    return "byte[]" if size is None else f"byte[{size}]"


# --------------------------------------------------------------------------- enums and parcelables


def check_enum(v: Any, cls: type[enum.IntEnum]) -> Any:
    """A member of the AIDL enum ``cls``, from itself or its value."""
    if type(v) is cls:
        return v
    if isinstance(v, (bool, enum.Enum)) or not isinstance(v, int):
        raise TypeError(f"expected {cls.__aidl__.name}, got {what(v)}")  # type: ignore[attr-defined]
    m = cls._value2member_map_.get(int(v))
    if m is None:
        raise ValueError(f"{v} is not a value of {cls.__aidl__.name}")  # type: ignore[attr-defined]
    return m


def decode_enum(w: Any, cls: type[enum.IntEnum]) -> Any:
    """The member of ``cls`` whose backing int ``w`` is."""
    if type(w) is cls:  # an in-process hand-over that skipped msgpack
        return w
    if type(w) is int:
        m = cls._value2member_map_.get(w)
        if m is not None:
            return m
        raise DecodeError(f"{w} is not a value of {cls.__aidl__.name}")  # type: ignore[attr-defined]
    raise DecodeError(f"expected {cls.__aidl__.name} (int), got {describe(w)}")  # type: ignore[attr-defined]


def check_parcelable(v: Any, cls: type[Parcelable]) -> Any:
    if isinstance(v, cls):
        return v
    raise TypeError(f"expected {cls.__aidl__.name}, got {what(v)}")


# --------------------------------------------------------------------------- binders and descriptors

_NOT_A_BINDER = (bool, int, float, str, bytes, bytearray, list, tuple, dict, enum.Enum)


def check_binder(v: Any, name: str) -> Any:
    """An ``IBinder`` or interface value (``name`` is the type): a binder object or None.

    None is accepted at construction (there is no other default for a binder), but
    only a ``@nullable`` one may be written; see ``encode_binder``.
    """
    if v is not None and (isinstance(v, _NOT_A_BINDER) or isinstance(v, Parcelable)):
        raise TypeError(f"expected a binder object for {name}, got {what(v)}")
    return v


def encode_binder(v: Any, ctx: Any, interface: InterfaceDef | None, name: str) -> Any:
    """The handle ``ctx`` makes for ``v``; ``interface`` is the declared one (None: IBinder)."""
    if v is None:
        raise TypeError(f"a non-@nullable {name} cannot be null")
    if ctx is None:
        raise TypeError(f"{name} needs a ParcelContext to be written")
    return ctx.write_binder(v, interface)


def decode_binder(w: Any, ctx: Any, interface: InterfaceDef | None, name: str, nullable: bool = False) -> Any:
    """The proxy (or local binder) ``ctx`` gives for handle ``w``."""
    if w is None:
        raise _null(name)
    if ctx is None:
        raise DecodeError(f"{name} needs a ParcelContext to be read")
    try:
        v = ctx.read_binder(w, interface)
    except BadParcelableException as e:
        raise DecodeError(e.message or f"bad binder handle for {name}") from None
    except (TypeError, ValueError, KeyError, IndexError) as e:
        raise DecodeError(f"bad binder handle for {name}: {e}") from None
    if v is None and not nullable:
        raise _null(name)
    return v


def _null(name: str) -> DecodeError:
    return DecodeError(f"null {name} where @nullable is not declared")


def _read_fd(ctx: Any, w: Any, name: str) -> int:
    if ctx is None:
        raise DecodeError(f"{name} needs a ParcelContext to be read")
    if type(w) is not int or w < 0:
        raise DecodeError(f"expected a descriptor index for {name}, got {describe(w)}")
    try:
        fd = ctx.read_fd(w)
    except BadParcelableException as e:
        raise DecodeError(e.message or f"no descriptor at index {w}") from None
    except (TypeError, ValueError, KeyError, IndexError, OSError) as e:
        raise DecodeError(f"no descriptor at index {w}: {e}") from None
    if type(fd) is not int or fd < 0:
        raise DecodeError(f"the context returned {describe(fd)} for descriptor index {w}")
    return fd


def check_pfd(v: Any) -> Any:
    if v is not None and not isinstance(v, ParcelFileDescriptor):
        raise TypeError(f"expected ParcelFileDescriptor, got {what(v)}")
    return v


def encode_pfd(v: ParcelFileDescriptor | None, ctx: Any) -> int:
    if v is None:
        raise TypeError("a non-@nullable ParcelFileDescriptor cannot be null")
    if ctx is None:
        raise TypeError("ParcelFileDescriptor needs a ParcelContext to be written")
    return ctx.write_fd(v.fileno())


def decode_pfd(w: Any, ctx: Any) -> ParcelFileDescriptor:
    if w is None:
        raise _null("ParcelFileDescriptor")
    return ParcelFileDescriptor(_read_fd(ctx, w, "ParcelFileDescriptor"))


def check_shared_memory(v: Any) -> Any:
    if v is not None and not isinstance(v, SharedMemory):
        raise TypeError(f"expected SharedMemory, got {what(v)}")
    return v


def encode_shared_memory(v: SharedMemory | None, ctx: Any) -> list:
    if v is None:
        raise TypeError("a non-@nullable SharedMemory cannot be null")
    if ctx is None:
        raise TypeError("SharedMemory needs a ParcelContext to be written")
    return [ctx.write_fd(v.fd), v.size]


def decode_shared_memory(w: Any, ctx: Any) -> SharedMemory:
    if w is None:
        raise _null("SharedMemory")
    if type(w) is not list and type(w) is not tuple or len(w) != 2 or type(w[1]) is not int or w[1] < 0:
        raise DecodeError(f"expected SharedMemory [index, size], got {describe(w)}")
    fd = _read_fd(ctx, w[0], "SharedMemory")
    try:
        return SharedMemory(fd, w[1])
    except (ValueError, OSError) as e:  # SharedMemory closed the fd it was given
        raise DecodeError(f"bad SharedMemory: {e}") from None


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


_RESERVED = frozenset(dir(Parcelable)) | {"__aidl__"}


def field_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Python field name of a generated parcelable, or None."""
    if keyword.iskeyword(name):
        return f"{name!r} is a Python keyword"
    if name in _RESERVED or name.startswith(("_aidl_", "__")):
        return f"{name!r} would shadow a method of the generated parcelable class"
    return None
