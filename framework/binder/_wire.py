"""The binder wire protocol, sans-IO: bytes (and file descriptors) in, events out.

Like h11, this module never touches a socket. A transport feeds what it read into
:meth:`Connection.receive_data` and pulls :class:`Event` objects out of
:meth:`Connection.next_event`; to send, it asks :meth:`Connection.send` for the
buffers of one frame and writes them, with the frame's descriptors, in one
``sendmsg``. That is why the codec can be fuzzed directly, and why the same
protocol runs over a Unix socket and over an in-memory pair.

The frame::

    +----------------+-----------------------------------------+
    | length: u32 BE | msgpack array: [kind, field, field, ...] |
    +----------------+-----------------------------------------+

One frame per message, at most :data:`MAX_FRAME_SIZE` bytes of body. Descriptors
(``SCM_RIGHTS``) are not in the body: a frame says how many it carries and the
transport hands them in beside the bytes; the kernel delivers a ``sendmsg``'s
descriptors with its first byte, so they are matched to frames in order.

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
from dataclasses import dataclass, field
from typing import Any

import msgpack

from ._status import MAX_TRANSACTION_SIZE, ProtocolError, TransactionTooLargeException

__all__ = [
    "CLIENT",
    "SERVER",
    "MAX_FDS_PER_FRAME",
    "MAX_FRAME_SIZE",
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


CLIENT = Role.CLIENT
SERVER = Role.SERVER


class State(enum.Enum):
    HANDSHAKE = "handshake"  # client: Hello not yet answered; server: Hello not yet read/answered
    READY = "ready"
    CLOSED = "closed"  # refused, or torn down; nothing more may pass


# ---------------------------------------------------------------------------------
# Events: frozen, slotted, and validating, so a bad frame is caught at one place.


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if type(value) is not int or not lo <= value <= hi:
        raise ProtocolError(f"{name} must be an int in [{lo}, {hi}], got {value!r}")


def _check_str(name: str, value: Any, *, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    if type(value) is not str:
        raise ProtocolError(f"{name} must be a str, got {type(value).__name__}")


def _check_nfds(nfds: Any) -> None:
    _check_int("nfds", nfds, 0, MAX_FDS_PER_FRAME)


class Event:
    """Base of every protocol event. ``KIND`` is its tag on the wire."""

    __slots__ = ()
    KIND: int = -1

    def _fields(self) -> list:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Hello(Event):
    """First frame from a client. ``token`` is the shell token, if the peer has one."""

    version: int = PROTOCOL_VERSION
    token: str | None = None
    KIND = 0

    def __post_init__(self) -> None:
        _check_int("version", self.version, 0, _INT32[1])
        _check_str("token", self.token, nullable=True)

    def _fields(self) -> list:
        return [self.version, self.token]


@dataclass(frozen=True, slots=True)
class Welcome(Event):
    """The server accepted: who it is, and the uid it resolved for the client."""

    pid: int
    uid: int
    peer_uid: int
    KIND = 1

    def __post_init__(self) -> None:
        _check_int("pid", self.pid, 0, _INT32[1])
        _check_int("uid", self.uid, 0, _INT32[1])
        _check_int("peer_uid", self.peer_uid, 0, _INT32[1])

    def _fields(self) -> list:
        return [self.pid, self.uid, self.peer_uid]


@dataclass(frozen=True, slots=True)
class Refused(Event):
    """The server will not serve this peer (unknown process, bad version...)."""

    reason: str
    KIND = 2

    def __post_init__(self) -> None:
        _check_str("reason", self.reason)

    def _fields(self) -> list:
        return [self.reason]


@dataclass(frozen=True, slots=True)
class Transaction(Event):
    """A call: ``data`` is the parcel (a msgpack-able list from the AIDL codec)."""

    txn_id: int
    target: int
    code: int
    oneway: bool
    data: Any
    nfds: int = 0
    fds: tuple[int, ...] = field(default=(), compare=False)
    KIND = 3

    def __post_init__(self) -> None:
        _check_int("txn_id", self.txn_id, 0, _MAX_TXN_ID)
        _check_int("target", self.target, 0, _MAX_OBJECT_ID)
        _check_int("code", self.code, 0, _MAX_CODE)
        if type(self.oneway) is not bool:
            raise ProtocolError(f"oneway must be a bool, got {self.oneway!r}")
        _check_nfds(self.nfds)

    def _fields(self) -> list:
        return [self.txn_id, self.target, self.code, self.oneway, self.data, self.nfds]


@dataclass(frozen=True, slots=True)
class Reply(Event):
    """The answer to a two-way :class:`Transaction`.

    ``status`` is the transport status (``OK``, ``UNKNOWN_TRANSACTION``,
    ``FAILED_TRANSACTION``); with ``OK``, ``exception`` is the binder exception code
    (``EX_NONE`` for success) and ``message``/``service_code`` go with it.
    """

    txn_id: int
    status: int = 0
    exception: int = 0
    message: str = ""
    service_code: int = 0
    data: Any = None
    nfds: int = 0
    fds: tuple[int, ...] = field(default=(), compare=False)
    KIND = 4

    def __post_init__(self) -> None:
        _check_int("txn_id", self.txn_id, 0, _MAX_TXN_ID)
        _check_int("status", self.status, *_INT32)
        _check_int("exception", self.exception, *_INT32)
        _check_str("message", self.message)
        _check_int("service_code", self.service_code, *_INT32)
        _check_nfds(self.nfds)

    def _fields(self) -> list:
        return [
            self.txn_id,
            self.status,
            self.exception,
            self.message,
            self.service_code,
            self.data,
            self.nfds,
        ]


_EVENT_TYPES: dict[int, type[Event]] = {
    cls.KIND: cls for cls in (Hello, Welcome, Refused, Transaction, Reply)
}


# ---------------------------------------------------------------------------------
# Framing


def encode_frame(event: Event) -> list[bytes]:
    """The buffers of one frame (header, body), ready for one ``sendmsg``.

    Raises :class:`TransactionTooLargeException` if a transaction's or reply's body
    is over :data:`MAX_TRANSACTION_SIZE`, and :class:`ProtocolError` if the event's
    data is not msgpack-able.
    """
    try:
        body = msgpack.packb([event.KIND, *event._fields()], use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode {type(event).__name__}: {exc}") from None
    if len(body) > MAX_TRANSACTION_SIZE:
        raise TransactionTooLargeException(
            f"{type(event).__name__} of {len(body)} bytes is over the {MAX_TRANSACTION_SIZE}-byte"
            " limit; send bulk data as SharedMemory"
        )
    return [_HEADER.pack(len(body)), body]


def _decode_body(body: bytes | memoryview, fds: tuple[int, ...]) -> Event:
    try:
        items = msgpack.unpackb(body, raw=False, use_list=True, strict_map_key=False)
    except Exception as exc:  # msgpack raises a zoo of types; all mean "garbage"
        raise ProtocolError(f"undecodable frame body: {type(exc).__name__}: {exc}") from None
    if type(items) is not list or not items:
        raise ProtocolError("frame body is not a non-empty array")
    kind = items[0]
    cls = _EVENT_TYPES.get(kind) if type(kind) is int else None
    if cls is None:
        raise ProtocolError(f"unknown frame kind {kind!r}")
    args = items[1:]
    if cls is Transaction:
        if len(args) != 6:
            raise ProtocolError(f"Transaction frame has {len(args)} fields, expected 6")
        return Transaction(*args, fds=fds)
    if cls is Reply:
        if len(args) != 7:
            raise ProtocolError(f"Reply frame has {len(args)} fields, expected 7")
        return Reply(*args, fds=fds)
    try:
        return cls(*args)
    except TypeError:
        raise ProtocolError(f"{cls.__name__} frame has {len(args)} fields") from None


def decode_frames(data: bytes) -> list[Event]:
    """Every event in ``data``, which must hold whole frames only (for tests and tools)."""
    conn = _Framer()
    conn.feed(data, ())
    events = []
    while (event := conn.next()) is not NEED_DATA:
        events.append(event)
    if conn.buffered:
        raise ProtocolError(f"{conn.buffered} trailing bytes after the last frame")
    return events


class _Framer:
    """Cuts a byte stream into frames and pairs them with the descriptors that came."""

    __slots__ = ("_buf", "_fds")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._fds: list[int] = []

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes, fds: tuple[int, ...] | list[int]) -> None:
        self._buf += data
        self._fds.extend(fds)

    def next(self) -> Event | _NeedData:
        buf = self._buf
        if len(buf) < _HEADER_SIZE:
            return NEED_DATA
        (length,) = _HEADER.unpack_from(buf)
        # Refuse a huge prefix at once: waiting for 4 GiB that will never come would
        # pin the peer's memory and hide the fault.
        if length == 0 or length > MAX_FRAME_SIZE:
            raise ProtocolError(f"frame length {length} outside 1..{MAX_FRAME_SIZE}")
        end = _HEADER_SIZE + length
        if len(buf) < end:
            return NEED_DATA
        body = bytes(memoryview(buf)[_HEADER_SIZE:end])
        del buf[:end]
        event = _decode_body(body, ())
        nfds = getattr(event, "nfds", 0)
        if nfds:
            if len(self._fds) < nfds:
                raise ProtocolError(f"frame announces {nfds} descriptors, {len(self._fds)} arrived")
            fds = tuple(self._fds[:nfds])
            del self._fds[:nfds]
            event = _with_fds(event, fds)
        return event

    def take_stray_fds(self) -> list[int]:
        """Descriptors no frame claimed (the caller closes them)."""
        fds, self._fds = self._fds, []
        return fds


def _with_fds(event: Event, fds: tuple[int, ...]) -> Event:
    object.__setattr__(event, "fds", fds)
    return event


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


class LocalProtocolError(RuntimeError):
    """This side tried to send something the protocol does not allow (a bug here)."""


class Connection:
    """One end of a binder connection, with no I/O.

    Besides the handshake it tracks transactions: a client may have many two-way
    calls in flight (each with its own id) and must not reuse an id before its
    reply; a server must answer each two-way call exactly once, and never a oneway
    one. A reply for a call that was never made is the peer's protocol error.
    """

    __slots__ = ("role", "state", "_framer", "_hello_seen", "_pending", "_next_txn_id")

    def __init__(self, role: Role) -> None:
        self.role = role
        self.state = State.HANDSHAKE
        self._framer = _Framer()
        self._hello_seen = False
        self._pending: set[int] = set()  # two-way txn ids awaiting a reply
        self._next_txn_id = 1

    # -- sending -------------------------------------------------------------------

    def new_txn_id(self) -> int:
        txn_id = self._next_txn_id
        self._next_txn_id += 1
        return txn_id

    def send(self, event: Event) -> list[bytes]:
        """Check ``event`` against the state machine and return its frame's buffers."""
        self._transition(_OUT, event, LocalProtocolError)
        if type(event) is Transaction:
            if not event.oneway:
                if event.txn_id in self._pending:
                    raise LocalProtocolError(f"transaction id {event.txn_id} is already in flight")
                self._pending.add(event.txn_id)
        elif type(event) is Reply:
            if event.txn_id not in self._pending:
                raise LocalProtocolError(f"no two-way transaction {event.txn_id} to reply to")
            self._pending.discard(event.txn_id)
        elif type(event) is Hello:
            if self._hello_seen:
                raise LocalProtocolError("Hello sent twice")
            self._hello_seen = True
        try:
            return encode_frame(event)
        except (ProtocolError, TransactionTooLargeException):
            # Undo the bookkeeping: the frame never left, the call can fail cleanly.
            if type(event) is Transaction and not event.oneway:
                self._pending.discard(event.txn_id)
            elif type(event) is Reply:
                self._pending.add(event.txn_id)
            raise

    def pending_count(self) -> int:
        return len(self._pending)

    # -- receiving -----------------------------------------------------------------

    def receive_data(self, data: bytes, fds: tuple[int, ...] | list[int] = ()) -> None:
        """Add what the transport read. ``b""`` means the peer closed its end."""
        if self.state is State.CLOSED and data:
            raise ProtocolError("data after the connection closed")
        self._framer.feed(data, fds)

    def next_event(self) -> Event | _NeedData:
        """The next complete event, or :data:`NEED_DATA`. Raises :class:`ProtocolError`."""
        event = self._framer.next()
        if event is NEED_DATA:
            return event
        self._transition(_IN, event, ProtocolError)
        if type(event) is Hello:
            if self._hello_seen:
                raise ProtocolError("Hello received twice")
            self._hello_seen = True
            if event.version != PROTOCOL_VERSION:
                raise ProtocolError(f"protocol version {event.version}, expected {PROTOCOL_VERSION}")
        elif type(event) is Transaction and not event.oneway:
            if event.txn_id in self._pending:
                raise ProtocolError(f"transaction id {event.txn_id} reused while in flight")
            self._pending.add(event.txn_id)
        elif type(event) is Reply:
            if event.txn_id not in self._pending:
                raise ProtocolError(f"reply to unknown transaction {event.txn_id}")
            self._pending.discard(event.txn_id)
        return event

    def close(self) -> list[int]:
        """Mark closed; returns descriptors that arrived but no frame claimed."""
        self.state = State.CLOSED
        return self._framer.take_stray_fds()

    def _transition(self, direction: str, event: Event, error: type[Exception]) -> None:
        key = (self.role, self.state, direction, type(event))
        new_state = _TRANSITIONS.get(key)
        if new_state is None:
            verb = "send" if direction == _OUT else "receive"
            raise error(f"{self.role.value} cannot {verb} {type(event).__name__} in state {self.state.value}")
        if type(event) is Welcome or type(event) is Refused:
            # The server must have read a Hello before answering it.
            if self.role is SERVER and not self._hello_seen:
                raise error(f"server cannot {direction} {type(event).__name__} before Hello")
        self.state = new_state
