"""The binder wire protocol, sans-IO: bytes (and file descriptors) in, events out.

Like h11, this module never touches a socket. A transport feeds what it read into
:meth:`Connection.receive_data` and pulls :class:`Event` objects out of
:meth:`Connection.next_event`; to send, it asks :meth:`Connection.send` for the
buffers of one frame and writes them, with the frame's descriptors, in one
``sendmsg``. That is why the codec can be fuzzed directly, and why the same
protocol runs over a Unix socket and over an in-memory pair.

The frame::

    +----------------+------------------------------------------+
    | length: u32 BE | body: a fixed binary header, or an array |
    +----------------+------------------------------------------+

The two frames of every call have fixed binary headers (big-endian, ``struct``),
their parcel after them as one msgpack value:

- :class:`Transaction`: kind ``3`` (u8), oneway (u8, 0 or 1), nfds (u16), code
  (u32), txn_id (i64), target (i64), then the parcel;
- a successful :class:`Reply` (status ``OK``, no exception, no message): kind ``4``
  (u8), a zero byte, nfds (u16), txn_id (i64), then the parcel.

The header's layout does most of the checking: every field is an int of its width
by construction, so a frame is checked in one expression (oneway is 0 or 1, nfds at
most :data:`MAX_FDS_PER_FRAME`, ids not negative), once, and the event is made of
fields known good. Every other frame (the handshake's, a failed reply) is a msgpack
array, ``[kind, field, field, ...]``, its fields in order (a full reply is ``[4,
txn_id, status, exception, message, service_code, data, nfds]``); an array starts
with a byte of 0x90 or above, so the first byte of a body tells the forms apart.

The two frames of a call are cut and made by ``_wirec`` (C) when nothing about them
is unusual; it answers None for anything else, and the Python here does the rest:
the one definition of the protocol, and what says what is wrong with a frame.

One frame per message, at most :data:`MAX_FRAME_SIZE` bytes of body, and at most
:data:`MAX_HANDSHAKE_FRAME_SIZE` before the handshake is over (checked on the length
prefix, before a byte of the body is buffered or decoded: a stranger cannot make a
server hold more). Bodies are decoded with msgpack's limits on each item
(:data:`MAX_PARCEL_ITEMS` per array or map, no extension types). Descriptors
(``SCM_RIGHTS``) are not in the body: a frame says how many it carries and the
transport hands them in beside the bytes; the kernel delivers a ``sendmsg``'s
descriptors with its first byte, so they are matched to frames in order. A
descriptor no frame can claim (more than the frame being received may announce, or
any before the handshake is over) is the peer's protocol error: the connection is
dropped and every descriptor it sent closed at once, never kept.

A connection is one-directional in who asks: the *client* (the side that
connected) sends :class:`Hello` and then :class:`Transaction` frames; the *server*
answers with :class:`Welcome` or :class:`Refused`, then :class:`Reply` frames. A
process that wants to call back into its caller connects to the caller's own socket
(the binder node model: every reference names its owner), so nested calls never
wait behind each other on one stream. All state transitions are in ``_TRANSITIONS``.
"""

from __future__ import annotations

import enum
import struct
from typing import Any, NamedTuple

import msgpack

try:
    from . import _wirec
except ImportError as exc:  # a checkout whose C extensions were built before _wirec.c came
    raise ImportError(f"framework.binder._wirec is not built ({exc}): run make install") from exc
from ._status import MAX_TRANSACTION_SIZE, ProtocolError, TransactionTooLargeException

__all__ = [
    "CLIENT",
    "SERVER",
    "MAX_FDS_PER_FRAME",
    "MAX_FRAME_SIZE",
    "MAX_HANDSHAKE_FRAME_SIZE",
    "MAX_PARCEL_ITEMS",
    "NEED_DATA",
    "PROTOCOL_VERSION",
    "Connection",
    "Event",
    "Hello",
    "Refused",
    "Reply",
    "Role",
    "State",
    "Transaction",
    "Welcome",
    "decode_frames",
    "encode_frame",
]

PROTOCOL_VERSION = 1

#: A parcel may hold MAX_TRANSACTION_SIZE bytes; the frame adds a small envelope.
MAX_FRAME_SIZE = MAX_TRANSACTION_SIZE + 4096

#: Linux's SCM_MAX_FD: the most descriptors one sendmsg can carry.
MAX_FDS_PER_FRAME = 253

#: The largest frame a peer may send before the handshake is over (a Hello is a few
#: dozen bytes; its token 64): what a stranger can make a server buffer and decode.
MAX_HANDSHAKE_FRAME_SIZE = 4096

#: The most items one msgpack array or map of a body may declare (msgpack's
#: ``max_array_len``/``max_map_len``): a count that cannot fit the frame's bytes is
#: refused before anything is allocated for it. Strings and binaries are bounded by
#: the frame itself; extension types are refused (parcels use none).
MAX_PARCEL_ITEMS = 1 << 17

_HEADER = struct.Struct(">I")
_HEADER_SIZE = _HEADER.size

_MAX_TXN_ID = (1 << 63) - 1
_MAX_CODE = (1 << 32) - 1
_MAX_OBJECT_ID = (1 << 63) - 1
_INT32 = (-(1 << 31), (1 << 31) - 1)


class _NeedData:
    """Sentinel: the buffer holds no complete frame yet."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = _NeedData()


class Role(enum.Enum):
    CLIENT = "client"
    SERVER = "server"

    __hash__ = object.__hash__  # members are singletons; Enum's own hash is Python code


CLIENT = Role.CLIENT
SERVER = Role.SERVER


class State(enum.Enum):
    HANDSHAKE = "handshake"  # client: Hello not yet answered; server: Hello not yet read/answered
    READY = "ready"
    CLOSED = "closed"  # refused, or torn down; nothing more may pass

    __hash__ = object.__hash__


# ---------------------------------------------------------------------------------
# Events: immutable, slotted, and validating, so a bad frame is caught at one place.
#
# They are NamedTuples rather than frozen dataclasses because they are made twice
# per call on the hot path: a tuple is built in one step, and each class checks all
# its fields in one expression, working out which field is wrong only when one is.


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if type(value) is not int or not lo <= value <= hi:
        raise ProtocolError(f"{name} must be an int in [{lo}, {hi}], got {value!r}")


def _check_str(name: str, value: Any, *, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    if type(value) is not str:
        raise ProtocolError(f"{name} must be a str, got {type(value).__name__}")


class Event:
    """Base of every protocol event. ``KIND`` is its tag on the wire; the first
    ``NWIRE`` fields travel (``fds`` rides beside the frame, not in it)."""

    __slots__ = ()
    KIND: int = -1
    NWIRE: int = 0

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and tuple.__eq__(self, other)  # type: ignore[arg-type]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple.__hash__(self)))  # type: ignore[arg-type]


class _HelloFields(NamedTuple):
    version: int = PROTOCOL_VERSION
    token: str | None = None


class Hello(Event, _HelloFields):
    """First frame from a client. ``token`` is the shell token, if the peer has one."""

    __slots__ = ()
    KIND = 0
    NWIRE = 2

    def __new__(cls, version: int = PROTOCOL_VERSION, token: str | None = None) -> Hello:
        _check_int("version", version, 0, _INT32[1])
        _check_str("token", token, nullable=True)
        return tuple.__new__(cls, (version, token))


class _WelcomeFields(NamedTuple):
    pid: int
    uid: int
    peer_uid: int


class Welcome(Event, _WelcomeFields):
    """The server accepted: who it is, and the uid it resolved for the client."""

    __slots__ = ()
    KIND = 1
    NWIRE = 3

    def __new__(cls, pid: int, uid: int, peer_uid: int) -> Welcome:
        _check_int("pid", pid, 0, _INT32[1])
        _check_int("uid", uid, 0, _INT32[1])
        _check_int("peer_uid", peer_uid, 0, _INT32[1])
        return tuple.__new__(cls, (pid, uid, peer_uid))


class _RefusedFields(NamedTuple):
    reason: str


class Refused(Event, _RefusedFields):
    """The server will not serve this peer (unknown process, bad version...)."""

    __slots__ = ()
    KIND = 2
    NWIRE = 1

    def __new__(cls, reason: str) -> Refused:
        _check_str("reason", reason)
        return tuple.__new__(cls, (reason,))


class _TransactionFields(NamedTuple):
    txn_id: int
    target: int
    code: int
    oneway: bool
    data: Any
    nfds: int = 0
    fds: tuple[int, ...] = ()


class Transaction(Event, _TransactionFields):
    """A call: ``data`` is the parcel (a msgpack-able list from the AIDL codec);
    ``nfds`` descriptors travel with it and arrive as ``fds``."""

    __slots__ = ()
    KIND = 3
    NWIRE = 6

    def __new__(
        cls, txn_id: int, target: int, code: int, oneway: bool, data: Any, nfds: int = 0, fds: tuple[int, ...] = ()
    ) -> Transaction:
        if not (
            type(txn_id) is int
            and 0 <= txn_id <= _MAX_TXN_ID
            and type(target) is int
            and 0 <= target <= _MAX_OBJECT_ID
            and type(code) is int
            and 0 <= code <= _MAX_CODE
            and type(oneway) is bool
            and type(nfds) is int
            and 0 <= nfds <= MAX_FDS_PER_FRAME
        ):
            _check_int("txn_id", txn_id, 0, _MAX_TXN_ID)
            _check_int("target", target, 0, _MAX_OBJECT_ID)
            _check_int("code", code, 0, _MAX_CODE)
            if type(oneway) is not bool:
                raise ProtocolError(f"oneway must be a bool, got {oneway!r}")
            _check_int("nfds", nfds, 0, MAX_FDS_PER_FRAME)
        return tuple.__new__(cls, (txn_id, target, code, oneway, data, nfds, fds))


class _ReplyFields(NamedTuple):
    txn_id: int
    status: int = 0
    exception: int = 0
    message: str = ""
    service_code: int = 0
    data: Any = None
    nfds: int = 0
    fds: tuple[int, ...] = ()


class Reply(Event, _ReplyFields):
    """The answer to a two-way :class:`Transaction`.

    ``status`` is the transport status (``OK``, ``UNKNOWN_TRANSACTION``,
    ``FAILED_TRANSACTION``, ``DEAD_OBJECT``); with ``OK``, ``exception`` is the
    binder exception code (``EX_NONE`` for success) and ``message`` and
    ``service_code`` go with it.
    """

    __slots__ = ()
    KIND = 4
    NWIRE = 7

    def __new__(
        cls,
        txn_id: int,
        status: int = 0,
        exception: int = 0,
        message: str = "",
        service_code: int = 0,
        data: Any = None,
        nfds: int = 0,
        fds: tuple[int, ...] = (),
    ) -> Reply:
        lo, hi = _INT32
        if not (
            type(txn_id) is int
            and 0 <= txn_id <= _MAX_TXN_ID
            and type(status) is int
            and lo <= status <= hi
            and type(exception) is int
            and lo <= exception <= hi
            and type(message) is str
            and type(service_code) is int
            and lo <= service_code <= hi
            and type(nfds) is int
            and 0 <= nfds <= MAX_FDS_PER_FRAME
        ):
            _check_int("txn_id", txn_id, 0, _MAX_TXN_ID)
            _check_int("status", status, lo, hi)
            _check_int("exception", exception, lo, hi)
            _check_str("message", message)
            _check_int("service_code", service_code, lo, hi)
            _check_int("nfds", nfds, 0, MAX_FDS_PER_FRAME)
        return tuple.__new__(cls, (txn_id, status, exception, message, service_code, data, nfds, fds))

    @classmethod
    def ok(cls, txn_id: int, data: Any, nfds: int = 0, fds: tuple[int, ...] = ()) -> Reply:
        """A successful reply (status ``OK``, no exception): the fields that can be
        wrong are checked, the constant ones are right by construction."""
        if not (
            txn_id.__class__ is int
            and 0 <= txn_id <= _MAX_TXN_ID
            and nfds.__class__ is int
            and 0 <= nfds <= MAX_FDS_PER_FRAME
        ):
            _check_int("txn_id", txn_id, 0, _MAX_TXN_ID)
            _check_int("nfds", nfds, 0, MAX_FDS_PER_FRAME)
        return tuple.__new__(cls, (txn_id, 0, 0, "", 0, data, nfds, fds))


_EVENT_TYPES: dict[int, type[Event]] = {
    cls.KIND: cls for cls in (Hello, Welcome, Refused, Transaction, Reply)
}


# ---------------------------------------------------------------------------------
# Framing

# The binary headers of a call's two frames, each packed with the frame's length
# prefix before it (one pack per frame) and read from the body's start.
_TXN_FRAME = struct.Struct(">IBBHIqq")
_OK_FRAME = struct.Struct(">IBBHq")
_TXN_HEAD = struct.Struct(">BBHIqq")
_OK_HEAD = struct.Struct(">BBHq")
_TXN_HEAD_SIZE = _TXN_HEAD.size
_OK_HEAD_SIZE = _OK_HEAD.size


def encode_frame(event: Event, pack: Any = None) -> list[bytes]:
    """The buffers of one frame (header, body), ready for one ``sendmsg``.

    ``pack`` is a reusable ``msgpack.Packer(...).pack`` (a connection keeps one);
    by default a fresh one is made.

    Raises :class:`TransactionTooLargeException` if a transaction's or reply's
    parcel is over :data:`MAX_TRANSACTION_SIZE`, and :class:`ProtocolError` if the
    event's data is not msgpack-able.
    """
    pack = pack or _packb
    cls = type(event)
    if cls is Transaction:
        txn_id, target, code, oneway, data, nfds, _ = event
        body = _encode(pack, data, "Transaction")
        return [_TXN_FRAME.pack(_TXN_HEAD_SIZE + len(body), 3, oneway, nfds, code, txn_id, target), body]
    if cls is Reply and not (event.status or event.exception or event.message or event.service_code):
        body = _encode(pack, event.data, "Reply")
        return [_OK_FRAME.pack(_OK_HEAD_SIZE + len(body), 4, 0, event.nfds, event.txn_id), body]
    body = _encode(pack, [event.KIND, *event[: event.NWIRE]], cls.__name__)
    return [_HEADER.pack(len(body)), body]


def _encode(pack: Any, obj: Any, what: str) -> bytes:
    """``obj`` in msgpack: a parcel, or a whole array; at most MAX_TRANSACTION_SIZE bytes."""
    try:
        body = pack(obj)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode {what}: {exc}") from None
    if len(body) > MAX_TRANSACTION_SIZE:
        raise TransactionTooLargeException(
            f"{what} of {len(body)} bytes is over the {MAX_TRANSACTION_SIZE}-byte limit; send bulk data as SharedMemory"
        )
    return body


def _packb(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _decode_array(items: Any, with_fds: Any) -> Event:
    """The event of a frame sent as an array (the handshake's kinds, a full reply), or
    the ProtocolError saying what is wrong with it."""
    if items.__class__ is not list or not items:
        raise ProtocolError("frame body is not a non-empty array")
    kind = items[0]
    cls = _EVENT_TYPES.get(kind) if kind.__class__ is int else None
    if cls is None:
        raise ProtocolError(f"unknown frame kind {kind!r}")
    if cls is Transaction:
        raise ProtocolError("a Transaction frame has a binary header, not an array")
    if len(items) != cls.NWIRE + 1:
        raise ProtocolError(f"{cls.__name__} frame has {len(items) - 1} fields, expected {cls.NWIRE}")
    if cls is Reply and items[-1]:
        return with_fds(cls, tuple(items[1:-1]), items[-1])
    return cls(*items[1:])


def decode_frames(data: bytes) -> list[Event]:
    """Every event in ``data``, which must hold whole frames only (for tests and tools)."""
    framer = _Framer()
    framer.feed(data, ())
    events = []
    while (event := framer.next()) is not NEED_DATA:
        events.append(event)
    if framer.buffered:
        raise ProtocolError(f"{framer.buffered} trailing bytes after the last frame")
    return events


class _Framer:
    """Cuts a byte stream into frames and pairs them with the descriptors that came.

    The common case, one read holding whole frames, is parsed straight out of the
    bytes the transport read, without copying them into a buffer first.
    """

    __slots__ = ("_buf", "_pos", "_fds", "frame_size")

    def __init__(self) -> None:
        # What is buffered is _buf[_pos:]; once all of it is taken, _buf is empty.
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self._fds: list[int] = []
        self.frame_size = 0  # the bytes of the last frame cut (what a server charges a call)

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def feed(self, data: bytes, fds: tuple[int, ...] | list[int]) -> None:
        if self._pos >= len(self._buf):
            self._buf, self._pos = data, 0
        else:
            buf = self._buf
            if type(buf) is not bytearray:
                buf = bytearray(memoryview(buf)[self._pos :])
            elif self._pos:
                del buf[: self._pos]
            buf += data
            self._buf, self._pos = buf, 0
        if fds:
            self._fds.extend(fds)

    def next(self) -> Event | _NeedData:
        """The next whole frame as its event, or :data:`NEED_DATA`.

        One function cuts the frame and makes its event: a transaction or a
        successful reply from its binary header, checked in one expression (the
        layout has done the rest) and its parcel decoded; anything else from its
        msgpack array (:func:`_decode_array`, which also says what is wrong with a bad
        one). A frame refused leaves its descriptors here, for the connection's close.
        """
        buf, pos = self._buf, self._pos
        if len(buf) - pos < _HEADER_SIZE:
            return NEED_DATA
        (length,) = _HEADER.unpack_from(buf, pos)
        # Refuse a huge prefix at once: waiting for 4 GiB that will never come would
        # pin the peer's memory and hide the fault.
        if length == 0 or length > MAX_FRAME_SIZE:
            raise ProtocolError(f"frame length {length} outside 1..{MAX_FRAME_SIZE}")
        start = pos + _HEADER_SIZE
        end = start + length
        if len(buf) < end:
            return NEED_DATA
        if end == len(buf):  # all taken: an empty buffer says so (Connection.receive's test)
            self._buf, self._pos = b"", 0
        else:
            self._pos = end
        self.frame_size = length
        kind = buf[start]
        if kind == 3:  # Transaction.KIND
            if length <= _TXN_HEAD_SIZE:
                raise ProtocolError(f"Transaction frame of {length} bytes: no room for its header and parcel")
            _, oneway, nfds, code, txn_id, target = _TXN_HEAD.unpack_from(buf, start)
            if oneway > 1 or nfds > MAX_FDS_PER_FRAME or txn_id < 0 or target < 0:
                Transaction(txn_id, target, code, oneway if oneway > 1 else oneway == 1, None, nfds)  # says which
            start += _TXN_HEAD_SIZE
        elif kind == 4:  # Reply.KIND: a successful reply's header
            if length <= _OK_HEAD_SIZE:
                raise ProtocolError(f"Reply frame of {length} bytes: no room for its header and parcel")
            _, zero, nfds, txn_id = _OK_HEAD.unpack_from(buf, start)
            if zero or nfds > MAX_FDS_PER_FRAME or txn_id < 0:
                if zero:
                    raise ProtocolError(f"Reply header's second byte is {zero}, must be 0")
                Reply.ok(txn_id, None, nfds)  # says which
            start += _OK_HEAD_SIZE
        try:
            # (raw=False and use_list=True are msgpack's defaults: naming them costs a little.)
            data = msgpack.unpackb(
                buf[start:end],
                strict_map_key=False,
                max_array_len=MAX_PARCEL_ITEMS,
                max_map_len=MAX_PARCEL_ITEMS,
                max_ext_len=0,
            )
        except Exception as exc:  # msgpack raises a zoo of types; all mean "garbage"
            raise ProtocolError(f"undecodable frame body: {type(exc).__name__}: {exc}") from None
        if kind == 3:
            fds = self._take_fds(nfds) if nfds else ()
            return tuple.__new__(Transaction, (txn_id, target, code, oneway == 1, data, nfds, fds))
        if kind == 4:
            fds = self._take_fds(nfds) if nfds else ()
            return tuple.__new__(Reply, (txn_id, 0, 0, "", 0, data, nfds, fds))
        return _decode_array(data, self._with_fds)

    def _with_fds(self, make: Any, fields: tuple, nfds: Any) -> Event:
        """``make(*fields, nfds, fds)``, the frame's descriptors taken: given back if
        the event refuses its fields, so that the connection's close returns them."""
        fds = self._take_fds(nfds) if nfds.__class__ is int and 0 < nfds <= MAX_FDS_PER_FRAME else ()
        try:
            return make(*fields, nfds, fds)
        except ProtocolError:
            self._fds[:0] = fds
            raise

    def _take_fds(self, nfds: int) -> tuple[int, ...]:
        if len(self._fds) < nfds:
            raise ProtocolError(f"frame announces {nfds} descriptors, {len(self._fds)} arrived")
        fds = tuple(self._fds[:nfds])
        del self._fds[:nfds]
        return fds

    def take_stray_fds(self) -> list[int]:
        """Descriptors no frame claimed (the caller closes them)."""
        fds, self._fds = self._fds, []
        return fds


# ---------------------------------------------------------------------------------
# The connection state machine.
#
# (role, state, direction, event type) -> next state. "out" is what this side sends,
# "in" what it receives. Anything absent from the table is a protocol error: a
# LocalProtocolError (our bug) when sending, a ProtocolError (the peer's) when
# receiving.

_OUT, _IN = "out", "in"
HS, READY, CLOSED = State.HANDSHAKE, State.READY, State.CLOSED

_TRANSITIONS: dict[tuple[Role, State, str, type[Event]], State] = {
    # The client speaks first, then waits for the verdict.
    (CLIENT, HS, _OUT, Hello): HS,
    (CLIENT, HS, _IN, Welcome): READY,
    (CLIENT, HS, _IN, Refused): CLOSED,
    (CLIENT, READY, _OUT, Transaction): READY,
    (CLIENT, READY, _IN, Reply): READY,
    # The server reads the Hello, resolves the peer, and answers.
    (SERVER, HS, _IN, Hello): HS,
    (SERVER, HS, _OUT, Welcome): READY,
    (SERVER, HS, _OUT, Refused): CLOSED,
    (SERVER, READY, _IN, Transaction): READY,
    (SERVER, READY, _OUT, Reply): READY,
}


# The same table, looked up the way a connection asks: role -> direction -> state ->
# event type -> next state (two subscripts and a get, no key to build per event).
_BY_STATE: dict[Role, dict[str, dict[State, dict[type[Event], State]]]] = {
    role: {direction: {state: {} for state in State} for direction in (_OUT, _IN)} for role in Role
}
for (_role, _state, _direction, _cls), _next in _TRANSITIONS.items():
    _BY_STATE[_role][_direction][_state][_cls] = _next
del _role, _state, _direction, _cls, _next

# A call's two frames are cut and made in C when nothing about them is unusual
# (_wirec.c, which answers None for anything else: then the Python here does it, or
# says what is wrong). It decodes a parcel as _Framer.next does.
if getattr(_wirec, "VERSION", None) != 2:
    raise ImportError(f"{_wirec.__file__} is a stale build of framework/binder/_wirec.c: run make install")
_wirec.configure(
    msgpack.unpackb,
    {"strict_map_key": False, "max_array_len": MAX_PARCEL_ITEMS, "max_map_len": MAX_PARCEL_ITEMS, "max_ext_len": 0},
    Transaction,
    Reply,
    MAX_FRAME_SIZE,
    MAX_TRANSACTION_SIZE,
)

# Connection.receive takes a call's frame on a ready connection without asking the
# table: what it may skip is that the table keeps a ready connection ready.
if _TRANSITIONS[(SERVER, READY, _IN, Transaction)] is not READY or _TRANSITIONS[(CLIENT, READY, _IN, Reply)] is not READY:
    raise RuntimeError("Connection.receive's shortcut assumes a call keeps a ready connection ready")


class LocalProtocolError(RuntimeError):
    """This side tried to send something the protocol does not allow (a bug here)."""


class Connection(_Framer):
    """One end of a binder connection, with no I/O: a framer with the protocol's state.

    Besides the handshake it tracks transactions: a client may have many two-way
    calls in flight (each with its own id) and must not reuse an id before its
    reply; a server must answer each two-way call exactly once, and never a oneway
    one. A reply for a call that was never made is the peer's protocol error.
    """

    __slots__ = (
        "role", "state", "_hello_seen", "_pending", "_next_txn_id", "_pack", "_out", "_in", "_take", "_call_state",
        "_reply_state",
    )

    def __init__(self, role: Role) -> None:
        self.role = role
        self.state = State.HANDSHAKE
        super().__init__()
        self._hello_seen = False
        self._pending: set[int] = set()  # two-way txn ids awaiting a reply
        self._next_txn_id = 1
        # One Packer per connection: packb would build (and free) one per frame.
        self._pack = msgpack.Packer(use_bin_type=True).pack
        self._out = _BY_STATE[role][_OUT]
        self._in = _BY_STATE[role][_IN]
        # What receive() takes whole: the frame of a call this side is sent.
        self._take = _wirec.take_transaction if role is SERVER else _wirec.take_reply
        # The state in which send_call (a client's) and send_reply (a server's) may
        # send: READY, or None on the other side (no state is None): one test each.
        self._call_state = READY if role is CLIENT else None
        self._reply_state = READY if role is SERVER else None

    # -- sending -------------------------------------------------------------------

    def new_txn_id(self) -> int:
        txn_id = self._next_txn_id
        self._next_txn_id += 1
        return txn_id

    def send(self, event: Event) -> list[bytes]:
        """Check ``event`` against the state machine and return its frame's buffers."""
        cls = type(event)
        state = self.state
        new_state = self._out[state].get(cls)
        if new_state is None:
            raise self._refused(_OUT, event, LocalProtocolError)
        pending = self._pending
        if cls is Transaction:
            if not event.oneway:
                if event.txn_id in pending:
                    raise LocalProtocolError(f"transaction id {event.txn_id} is already in flight")
                pending.add(event.txn_id)
        elif cls is Reply:
            if event.txn_id not in pending:
                raise LocalProtocolError(f"no two-way transaction {event.txn_id} to reply to")
            pending.discard(event.txn_id)
        elif cls is Hello:
            if self._hello_seen:
                raise LocalProtocolError("Hello sent twice")
            self._hello_seen = True
        elif not self._hello_seen:  # Welcome or Refused: the server must have read a Hello
            raise LocalProtocolError(f"server cannot {_OUT} {cls.__name__} before Hello")
        try:
            frame = encode_frame(event, self._pack)
        except (ProtocolError, TransactionTooLargeException):
            # Undo the bookkeeping: the frame never left, the call can fail cleanly.
            if cls is Transaction and not event.oneway:
                pending.discard(event.txn_id)
            elif cls is Reply:
                pending.add(event.txn_id)
            raise
        self.state = new_state
        return frame

    # The two frames of every call, framed without going through an event's type:
    # what ``send(Transaction(...))`` and ``send(Reply.ok(...))`` do, the same checks
    # in the same order, for the runtime's hot path.

    def send_call(self, target: int, code: int, oneway: bool, data: Any, nfds: int = 0) -> tuple[int, bytes]:
        """Frame a call from this client under a new transaction id: ``(txn_id, frame)``,
        the frame one buffer (its header joined to the parcel), ready for one send."""
        if self.state is not self._call_state:  # READY, on a client
            raise self._refused(_OUT, Transaction(0, target, code, oneway, data, nfds), LocalProtocolError)
        txn_id = self._next_txn_id
        self._next_txn_id = txn_id + 1
        frame = _wirec.frame_call(self._pack, target, code, oneway, nfds, txn_id, data)
        if frame is None:
            frame = self._frame_call(target, code, oneway, nfds, txn_id, data)
        if not oneway:
            pending = self._pending
            if txn_id in pending:  # only if send() was given this id by hand
                raise LocalProtocolError(f"transaction id {txn_id} is already in flight")
            pending.add(txn_id)
        return txn_id, frame

    def _frame_call(self, target: int, code: int, oneway: bool, nfds: int, txn_id: int, data: Any) -> bytes:
        """What ``_wirec.frame_call`` does, the general way, which says what is wrong."""
        # The id is ours and fits; the rest is checked in one expression (the event
        # says which field is wrong when one is).
        if not (
            target.__class__ is int
            and 0 <= target <= _MAX_OBJECT_ID
            and code.__class__ is int
            and 0 <= code <= _MAX_CODE
            and (oneway is True or oneway is False)
            and nfds.__class__ is int
            and 0 <= nfds <= MAX_FDS_PER_FRAME
        ):
            Transaction(txn_id, target, code, oneway, data, nfds)
        body = _encode(self._pack, data, "Transaction")
        return _TXN_FRAME.pack(_TXN_HEAD_SIZE + len(body), 3, oneway, nfds, code, txn_id, target) + body

    def send_reply(self, txn_id: int, data: Any, nfds: int = 0) -> bytes:
        """Frame this server's successful reply to call ``txn_id``, as one buffer."""
        if self.state is not self._reply_state:  # READY, on a server
            raise self._refused(_OUT, Reply.ok(txn_id, data, nfds), LocalProtocolError)
        pending = self._pending
        if txn_id not in pending:
            raise LocalProtocolError(f"no two-way transaction {txn_id} to reply to")
        frame = _wirec.frame_reply(self._pack, txn_id, nfds, data)
        if frame is None:  # the general way, which says what is wrong
            if not (nfds.__class__ is int and 0 <= nfds <= MAX_FDS_PER_FRAME):  # the id is a pending one
                Reply.ok(txn_id, data, nfds)
            body = _encode(self._pack, data, "Reply")
            frame = _OK_FRAME.pack(_OK_HEAD_SIZE + len(body), 4, 0, nfds, txn_id) + body
        pending.discard(txn_id)
        return frame

    def pending_count(self) -> int:
        return len(self._pending)

    # -- receiving -----------------------------------------------------------------

    def receive_data(self, data: bytes, fds: tuple[int, ...] | list[int] = ()) -> None:
        """Add what the transport read. ``b""`` means the peer closed its end."""
        if self.state is State.CLOSED and data:
            raise ProtocolError("data after the connection closed")
        self.feed(data, fds)

    def receive(self, data: bytes, fds: tuple[int, ...] | list[int] = ()) -> Event | _NeedData:
        """What a reader does with each read, in one call: :meth:`receive_data`, then
        :meth:`next_event`.

        The read a ready connection almost always gets, one whole frame of a call
        with no descriptors (a server's :class:`Transaction`, a client's successful
        :class:`Reply`) and nothing buffered before it, is taken in one C call
        (``_wirec.take_transaction``, ``take_reply``): the checks of
        :meth:`next_event`, the same decoding, the same transition (``_TRANSITIONS``
        says the state stays READY). Whatever it does not take (a bad field, an
        undecodable parcel, a reused id, more than one frame...) goes the general
        way, which takes it or says what is wrong.
        """
        if not self._buf and not fds and self.state is READY:
            event = self._take(data, self._pending)
            if event is not None:
                self.frame_size = len(data)
                return event
        if self.state is State.CLOSED and data:
            raise ProtocolError("data after the connection closed")
        if fds or self._buf:
            self.feed(data, fds)
        else:  # feed's common case, written out: the last read's frames are all taken
            self._buf, self._pos = data, 0
        return self.next_event()

    def next_event(self) -> Event | _NeedData:
        """The next complete event, or :data:`NEED_DATA`. Raises :class:`ProtocolError`."""
        buf = self._buf
        if not buf or len(buf) - self._pos < _HEADER_SIZE:
            if self._fds:
                self._check_fds()
            return NEED_DATA  # the common answer after a whole read: no call to find it
        if self.state is not READY:
            self._check_handshake_frame()
        event = self.next()
        if event is NEED_DATA:
            if self._fds:
                self._check_fds()
            return event
        cls = event.__class__
        new_state = self._in[self.state].get(cls)
        if new_state is None:
            raise self._refused(_IN, event, ProtocolError)
        if cls is Reply:
            try:
                self._pending.remove(event.txn_id)
            except KeyError:
                raise ProtocolError(f"reply to unknown transaction {event.txn_id}") from None
        elif cls is Transaction:
            if not event.oneway:
                if event.txn_id in self._pending:
                    raise ProtocolError(f"transaction id {event.txn_id} reused while in flight")
                self._pending.add(event.txn_id)
        elif cls is Hello:
            if self._hello_seen:
                raise ProtocolError("Hello received twice")
            self._hello_seen = True
            if event.version != PROTOCOL_VERSION:
                raise ProtocolError(f"protocol version {event.version}, expected {PROTOCOL_VERSION}")
        self.state = new_state
        return event

    def _check_handshake_frame(self) -> None:
        """Before the handshake is over, refuse a frame over MAX_HANDSHAKE_FRAME_SIZE by
        its length prefix, before its body is buffered or decoded."""
        (length,) = _HEADER.unpack_from(self._buf, self._pos)
        if length > MAX_HANDSHAKE_FRAME_SIZE:
            raise ProtocolError(
                f"frame length {length} before the handshake is over (at most {MAX_HANDSHAKE_FRAME_SIZE})"
            )

    def _check_fds(self) -> None:
        """Every whole frame is taken: the descriptors still here belong to the frame
        being received, which may carry MAX_FDS_PER_FRAME at most (and none before the
        handshake is over, none when no frame has begun). More is the peer's error."""
        pending = len(self._fds)
        if self.state is not READY or self._pos >= len(self._buf):
            allowed = 0
        else:
            allowed = MAX_FDS_PER_FRAME
        if pending > allowed:
            raise ProtocolError(f"{pending} descriptors that no frame announces (at most {allowed} here)")

    def close(self) -> list[int]:
        """Mark closed; returns descriptors that arrived but no frame claimed."""
        self.state = State.CLOSED
        return self.take_stray_fds()

    def _refused(self, direction: str, event: Event, error: type[Exception]) -> Exception:
        verb = "send" if direction == _OUT else "receive"
        return error(f"{self.role.value} cannot {verb} {type(event).__name__} in state {self.state.value}")
