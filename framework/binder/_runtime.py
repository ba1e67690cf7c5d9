"""The per-process binder runtime (Android's ProcessState and IPCThreadState).

One :class:`BinderRuntime` per process, opened with :func:`open_binder_runtime`. It
listens on its own socket in the runtime directory and serves the local
:class:`Binder` objects it has handed out; it keeps one outgoing connection per
remote process it talks to, over which its :class:`BinderProxy` objects call.

The node model. A binder reference in a parcel is ``[owner address, object id,
descriptor]``. Whoever receives it (the process it was sent to, or a third one it
is handed on to) connects to the owner directly; the object is always called in
the process that made it. A reference to one of this process's own objects comes
back as the object itself, as on Android, so local calls are plain Python calls.
The object id is random (:data:`OBJECT_ID_BITS` bits from ``secrets``), so a
reference is a capability: a process can call only objects whose reference it was
handed, never one it enumerates (the socket names in the runtime directory are no
secret; the ids are).

Lifetime. An object, once written into a parcel, stays exported until its runtime
closes: remote references are not counted. That is simple and safe (a reference
never dangles while the owner lives) at the price of holding per-request callbacks
for the life of the process; a process that makes many short-lived callbacks can
drop them with :meth:`BinderRuntime.unexport`.

Calls. No task switch on the way of a lone call, at either end (the leader/follower
pattern, as in ACE's reactor or binder's own looper threads): the caller that finds
nobody reading its connection reads its reply itself, and the task that reads a
call runs the handler itself. A handler that has to wait (a sleep, a lock, a
nested call) first hands the reading on to another task of the connection, so
many calls on one connection still run at once, each may block, and a handler
may call back into its caller. Oneway calls to one object run one at a time, in
the order they arrived. Who holds the reading role, who waits and who is woken is
``_reader``'s state machine; the connections here do the I/O it asks for.

Death. The kernel closing the owner's socket is the death notice: every pending
call on that connection fails with :class:`DeadObjectException`, and every
:class:`DeathRecipient` linked to a proxy of that process fires at once. Each
outgoing connection has a task that watches for the hang-up alone (reading
nothing), so a death is noticed when no call is in flight too.

Identity. A handler runs with the caller's pid (the kernel's, ``SO_PEERCRED``,
fixed with a pidfd of that process when the connection is accepted) and uid (what
the servicemanager vouched for that pid, resolved once per connection at the
handshake and believed only if the process the pidfd names still runs afterwards,
so a reused pid inherits nothing) in a context variable, set once per serving task, since each task serves one
connection: :meth:`Binder.getCallingUid` and :meth:`Binder.getCallingPid` read it.
Outside a handler they give the process's own identity. A local call does not
change the identity (Android's rule; use :meth:`Binder.clearCallingIdentity` to act
as yourself).
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import os
import secrets
import types
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from . import _status
from ._nursery import open_service_nursery
from ._reader import ACTIVE, READING, WAITING, Party, Reader
from ._status import (
    DeadObjectException,
    IllegalStateException,
    ProtocolError,
    RemoteException,
    SecurityException,
    TransactionError,
    TransactionFailedException,
    TransactionTooLargeException,
    UnknownTransactionException,
)
from ._transport import MemoryNetwork, UnixNetwork
from ._wire import (
    CLIENT,
    MAX_FDS_PER_FRAME,
    NEED_DATA,
    SERVER,
    Connection,
    Hello,
    Refused,
    Reply,
    State,
    Transaction,
    Welcome,
)

__all__ = [
    "MAX_CONNECTIONS_PER_PEER",
    "MAX_CONNECTION_BUFFER",
    "MAX_HANDSHAKING",
    "MAX_PENDING_CALLS",
    "MAX_QUEUED_ONEWAY",
    "OBJECT_ID_BITS",
    "RUNTIME_DIR_ENV",
    "SERVICEMANAGER_ADDRESS",
    "SHELL_TOKEN_FILE",
    "Binder",
    "BinderProxy",
    "BinderRuntime",
    "DeathRecipient",
    "IBinder",
    "open_runtime",
]

log = logging.getLogger("binder")

#: The servicemanager's well-known address; its registry is object 0 there.
SERVICEMANAGER_ADDRESS = "servicemanager"
CONTEXT_OBJECT_ID = 0
#: The shell's secret, 0600 in the runtime directory (adb's key, in spirit).
SHELL_TOKEN_FILE = "shell.token"
RUNTIME_DIR_ENV = "NPUEMU_RUNTIME_DIR"

_HANDSHAKE_TIMEOUT = 10.0

# Bounds on what one peer can make a server hold, as the binder driver bounds it
# (each named in the README's bounds table, with the figure it mirrors):

#: Frame bytes of the calls one connection has in this process (read, not finished):
#: binder's transaction buffer per process, 1 MiB - 8 KiB (BINDER_VM_SIZE).
MAX_CONNECTION_BUFFER = (1 << 20) - 8 * 1024
#: Two-way calls of one connection being served at once. Binder has 15 threads per
#: process; handlers here are tasks, cheap, but each holds its parcel.
MAX_PENDING_CALLS = 64
#: Oneway calls of one connection served or queued at once (binder bounds them by
#: bytes, to half its buffer, which a connection meets here too).
MAX_QUEUED_ONEWAY = 1024
#: Connections one peer process may hold to one server (a runtime makes one per
#: server it talks to; a process rarely holds more than a few runtimes).
MAX_CONNECTIONS_PER_PEER = 16
#: Accepted connections whose handshake is under way at once; past it new ones are
#: closed at once (each costs a socket, a task and a small buffer until then).
MAX_HANDSHAKING = 256
# Codes at or above this are IBinder's own (ping, interface...), not an interface's.
_SPECIAL_CODES = _status.LAST_CALL_TRANSACTION + 1
# Idle serving tasks kept per connection, waiting to be handed the reading role
# (more handlers blocked at once spawn more).
_MAX_IDLE_WORKERS = 4
# A task sending oneway calls back to back lets others run on every this many.
_ONEWAY_YIELD_EVERY = 16
# A task serving calls read ahead in one read lets others run on every this many.
_BACKLOG_YIELD_EVERY = 16

# (pid, uid) of whoever the current handler serves; None outside any runtime.
_calling: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "binder_calling_identity", default=None
)
# The runtime whose code is running (its own identity is the default one).
_current: contextvars.ContextVar[BinderRuntime | None] = contextvars.ContextVar(
    "binder_runtime", default=None
)

#: How a runtime learns a caller's uid: (runtime, kernel pid, shell token) -> uid, or
#: None to refuse. The default asks the servicemanager.
Resolver = Callable[["BinderRuntime", int, "str | None"], Awaitable["int | None"]]
#: How a runtime makes the typed face of a binder it reads: an ``InterfaceDef`` to its
#: interface class (the one with ``asInterface``). ``_interface.interface_class`` is the one
#: ``open_binder_runtime`` passes; the runtime imports no interface machinery itself.
InterfaceFactory = Callable[[Any], Any]


def _close_fds(fds) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


# ---------------------------------------------------------------------------------
# Objects


class DeathRecipient:
    """Subclass and override :meth:`binderDied`; link with ``proxy.linkToDeath(self)``.

    ``binderDied`` is called once, in the runtime's own task, when the process that
    owns the object is gone. It may be a plain or an ``async`` method.
    """

    def binderDied(self, who: IBinder) -> Any:  # noqa: N802 - Android's name
        raise NotImplementedError


class IBinder:
    """What every binder, local or remote, answers (android.os.IBinder)."""

    __slots__ = ()

    def asBinder(self) -> IBinder:  # noqa: N802
        return self

    def linkToDeath(self, recipient: DeathRecipient, cookie: Any = None) -> None:  # noqa: N802
        raise NotImplementedError

    def unlinkToDeath(self, recipient: DeathRecipient) -> bool:  # noqa: N802
        raise NotImplementedError

    def isBinderAlive(self) -> bool:  # noqa: N802
        raise NotImplementedError


class Binder(IBinder):
    """A local binder object. Subclass an interface's ``Stub`` rather than this.

    A raw ``Binder`` answers ping and interface queries; override :meth:`onTransact`
    to serve codes by hand.
    """

    __slots__ = ("_runtime", "_object_id", "__weakref__")

    #: The interface descriptor; an interface's Stub sets it.
    DESCRIPTOR: str = ""

    def __init__(self) -> None:
        self._runtime: BinderRuntime | None = None
        self._object_id: int | None = None

    async def onTransact(self, code: int, data: Any, ctx: Any) -> Any:  # noqa: N802
        """Serve transaction ``code``; return the reply parcel (msgpack-able)."""
        raise UnknownTransactionException(f"{type(self).__name__} has no transaction code {code}")

    def getInterfaceDescriptor(self) -> str:  # noqa: N802
        return self.DESCRIPTOR

    def linkToDeath(self, recipient: DeathRecipient, cookie: Any = None) -> None:  # noqa: N802
        """A local object cannot die under its own process: nothing to link."""

    def unlinkToDeath(self, recipient: DeathRecipient) -> bool:  # noqa: N802
        return False

    def isBinderAlive(self) -> bool:  # noqa: N802
        return self._runtime is None or not self._runtime._closed

    async def pingBinder(self) -> bool:  # noqa: N802
        await trio.lowlevel.checkpoint()
        return self.isBinderAlive()

    # Android's static identity calls, on the class as there.

    @staticmethod
    def getCallingPid() -> int:  # noqa: N802
        """The pid of the process whose call is being served (or this process's own)."""
        return _identity()[0]

    @staticmethod
    def getCallingUid() -> int:  # noqa: N802
        """The uid of the process whose call is being served (or this process's own)."""
        return _identity()[1]

    @staticmethod
    def clearCallingIdentity() -> contextvars.Token:  # noqa: N802
        """Act as this process until :meth:`restoreCallingIdentity` gets the token back."""
        runtime = _current.get()
        if runtime is None:
            raise IllegalStateException("no binder runtime in this context")
        return _calling.set((runtime.pid, runtime.uid))

    @staticmethod
    def restoreCallingIdentity(token: contextvars.Token) -> None:  # noqa: N802
        _calling.reset(token)


def _identity() -> tuple[int, int]:
    ident = _calling.get()
    if ident is None:
        raise IllegalStateException("no binder runtime in this context: open_binder_runtime first")
    return ident


class BinderProxy(IBinder):
    """A reference to an object in another process. Obtain one from a parcel or
    the servicemanager; wrap it with ``IFoo.asInterface(proxy)`` to call methods.

    Proxies are unique per (process, object) within a runtime, so ``==`` and
    ``is`` agree and a death link made through any copy of a reference holds.
    """

    __slots__ = ("_runtime", "_address", "_object_id", "_descriptor", "_recipients", "_dead", "__weakref__")

    def __init__(self, runtime: BinderRuntime, address: str, object_id: int, descriptor: str) -> None:
        self._runtime = runtime
        self._address = address
        self._object_id = object_id
        self._descriptor = descriptor
        self._recipients: list[tuple[DeathRecipient, Any]] = []
        self._dead = False

    def __repr__(self) -> str:
        state = "dead" if self._dead else "alive"
        # Only the id's last digits: a reference is a capability, and reprs reach logs.
        oid = f"{self._object_id & 0xFFFF:04x}" if self._object_id else "0"
        return f"<BinderProxy {self._descriptor or 'IBinder'} {self._address}#..{oid} {state}>"

    def getInterfaceDescriptor(self) -> str:  # noqa: N802
        """The descriptor the owner declared when it sent the reference."""
        return self._descriptor

    def isBinderAlive(self) -> bool:  # noqa: N802
        if self._dead:
            return False
        conn = self._runtime._clients.get(self._address)
        return conn is None or conn.error is None

    def linkToDeath(self, recipient: DeathRecipient, cookie: Any = None) -> None:  # noqa: N802
        """Call ``recipient.binderDied(self)`` when the owning process dies.

        Raises :class:`DeadObjectException` if it is already known to be dead.
        """
        if not callable(getattr(recipient, "binderDied", None)):
            raise TypeError(f"{recipient!r} has no binderDied method")
        if not self.isBinderAlive():
            raise DeadObjectException(f"{self!r} is already dead")
        self._recipients.append((recipient, cookie))
        self._runtime._ensure_connection(self._address)

    def unlinkToDeath(self, recipient: DeathRecipient) -> bool:  # noqa: N802
        for i, (r, _) in enumerate(self._recipients):
            if r is recipient:
                del self._recipients[i]
                return True
        return False

    async def pingBinder(self) -> bool:  # noqa: N802
        try:
            await self.transact(_status.PING_TRANSACTION, None)
        except TransactionError:
            return False
        return True

    async def transact(self, code: int, data: Any, fds: tuple[int, ...] = (), *, oneway: bool = False) -> Reply | None:
        """Send a raw transaction; returns the :class:`Reply` (None when oneway).

        ``fds`` are sent along (the caller keeps its own). Interface proxies use
        the typed path instead; this is for tools and tests.
        """
        conn = await self._runtime._client_for(self._address)
        return await conn.transact(self._object_id, code, data, fds, oneway)

    async def _call(self, method: Any, args: tuple) -> Any:
        runtime = self._runtime
        # Encoding never waits, so the runtime's one writing context serves every
        # call: the descriptors a call writes are taken out of it at once.
        writer = runtime._writer
        try:
            data = method.encode_call(args, writer)
        except BaseException:
            writer.close_out()
            raise
        fds = writer.out_fds
        if fds:
            writer.out_fds = []
        else:
            fds = ()  # not the shared list, which another call may write to while this one waits
        try:
            conn = runtime._clients.get(self._address)
            if conn is None or not conn.usable:
                conn = await runtime._client_for(self._address)
            reply = await conn.transact(self._object_id, method.code, data, fds, method.oneway)
        finally:
            if fds:
                _close_fds(fds)
        if reply is None:
            return None
        if not reply.fds:  # nothing to own: the runtime's context without descriptors will do
            if reply.status or reply.exception:
                _raise_for_reply(reply)
            return method.decode_reply(reply.data, runtime._no_fds)
        rctx = _ParcelContext(runtime, reply.fds)
        try:
            _raise_for_reply(reply)
            return method.decode_reply(reply.data, rctx)
        finally:
            rctx.release_in()

    def _die(self) -> None:
        if self._dead:
            return
        self._dead = True
        recipients, self._recipients = self._recipients, []
        for recipient, _cookie in recipients:
            try:
                result = recipient.binderDied(self)
                if inspect.isawaitable(result):
                    self._runtime._nursery.start_soon(_await_logged, result, f"binderDied of {recipient!r}")
            except Exception:
                log.exception("binderDied of %r raised", recipient)


async def _await_logged(awaitable: Awaitable, what: str) -> None:
    try:
        await awaitable
    except Exception:
        log.exception("%s raised", what)


def _raise_for_reply(reply: Reply) -> None:
    status = reply.status
    if status != _status.OK:
        if status == _status.UNKNOWN_TRANSACTION:
            raise UnknownTransactionException(reply.message)
        if status == _status.DEAD_OBJECT:
            raise DeadObjectException(reply.message)
        raise TransactionFailedException(reply.message or f"transaction failed with status {status}")
    if reply.exception != _status.EX_NONE:
        raise _status.exception_for(reply.exception, reply.message, reply.service_code)


# ---------------------------------------------------------------------------------
# Parcels: what the AIDL codec calls for binders and descriptors


class _ParcelContext:
    """The ``ctx`` of ``encode_call``/``decode_call`` and friends, for one parcel.

    Written descriptors are ``dup``-ed (the caller keeps its own) and closed once
    the frame has gone. Received ones belong to the parcel until ``read_fd`` hands
    one over; the rest are closed when the parcel is done.
    """

    __slots__ = ("_runtime", "out_fds", "_in_fds", "_taken")

    def __init__(self, runtime: BinderRuntime, in_fds: tuple[int, ...]) -> None:
        self._runtime = runtime
        self.out_fds: list[int] = []
        self._in_fds = in_fds
        self._taken: set[int] | None = None

    def write_binder(self, obj: Any, interface: Any) -> Any:
        if obj is None:
            return None
        as_binder = getattr(obj, "asBinder", None)
        if as_binder is None:
            raise TypeError(f"expected a binder or interface, got {type(obj).__name__}")
        binder = as_binder()
        want = interface.name if interface is not None else None
        if isinstance(binder, Binder):
            if want and binder.DESCRIPTOR != want:
                raise TypeError(f"expected {want}, got a local {binder.DESCRIPTOR or 'IBinder'}")
            runtime = self._runtime
            return [runtime.address, runtime.export(binder), binder.DESCRIPTOR]
        if isinstance(binder, BinderProxy):
            if want and binder._descriptor and binder._descriptor != want:
                raise TypeError(f"expected {want}, got a proxy of {binder._descriptor}")
            return [binder._address, binder._object_id, binder._descriptor]
        raise TypeError(f"expected a binder or interface, got {type(obj).__name__}")

    def read_binder(self, handle: Any, interface: Any) -> Any:
        if handle is None:
            return None
        if (
            type(handle) is not list
            or len(handle) != 3
            or type(handle[0]) is not str
            or type(handle[1]) is not int
            or type(handle[2]) is not str
        ):
            raise _status.BadParcelableException(f"malformed binder reference {handle!r}")
        address, object_id, descriptor = handle
        if interface is not None and descriptor and descriptor != interface.name:
            raise _status.BadParcelableException(f"expected a {interface.name}, got a {descriptor}")
        binder = self._runtime._binder_for(address, object_id, descriptor)
        if interface is None:
            return binder
        return self._runtime._interfaces(interface).asInterface(binder)

    def write_fd(self, fd: int) -> int:
        if type(fd) is not int or fd < 0:
            raise TypeError(f"a file descriptor must be a non-negative int, got {fd!r}")
        if len(self.out_fds) >= MAX_FDS_PER_FRAME:
            raise TransactionTooLargeException(f"more than {MAX_FDS_PER_FRAME} descriptors in one parcel")
        try:
            dup = os.dup(fd)
        except OSError as exc:
            raise ValueError(f"file descriptor {fd} is not open: {exc.strerror}") from None
        self.out_fds.append(dup)
        return len(self.out_fds) - 1

    def read_fd(self, index: int) -> int:
        if type(index) is not int or not 0 <= index < len(self._in_fds):
            raise _status.BadParcelableException(
                f"descriptor index {index!r} but the parcel carries {len(self._in_fds)}"
            )
        if self._taken is None:
            self._taken = set()
        if index in self._taken:
            raise _status.BadParcelableException(f"descriptor {index} read twice")
        self._taken.add(index)
        return self._in_fds[index]

    def close_out(self) -> None:
        if self.out_fds:
            fds, self.out_fds = self.out_fds, []
            _close_fds(fds)

    def release_in(self) -> None:
        if self._in_fds:
            taken = self._taken or ()
            _close_fds([fd for i, fd in enumerate(self._in_fds) if i not in taken])
            self._in_fds = ()


# ---------------------------------------------------------------------------------
# Connections
#
# Who reads each connection is the reading role of ``_reader``: its Reader moves
# the parties (callers, the watcher, serving tasks) and calls ``_wake`` for each
# one it takes out of WAITING; these classes do the I/O.


def _wake(party: Party) -> None:
    trio.lowlevel.reschedule(party.task)


async def _park(reader: Reader, party: Party) -> None:
    """Wait until ``reader`` wakes ``party`` (handed the role, answered, or the
    connection lost); cancelled, the party gives up."""

    def abort(_raise_cancel: Any) -> trio.lowlevel.Abort:
        reader.cancel(party)  # a waiting party holds no reply
        return trio.lowlevel.Abort.SUCCEEDED

    party.task = trio.lowlevel.current_task()  # what _wake reschedules (only a waiter needs it)
    await trio.lowlevel.wait_task_rescheduled(abort)


async def _next_event(wire: Connection, stream: Any) -> Any:
    """The next event ``wire`` makes of what ``stream`` brings; None at its end."""
    while True:
        event = wire.next_event()
        if event is not NEED_DATA:
            return event
        data, fds = await stream.receive_some()
        if not data:
            _close_fds(fds)
            return None
        wire.receive_data(data, fds)


async def _ignoring_hangup(sending: Awaitable[None]) -> None:
    """Finish a reply's send; a peer gone meanwhile was waiting for nothing."""
    try:
        await sending
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


def _connection_error(address: str, exc: BaseException) -> RemoteException:
    """What a caller of a connection that broke with ``exc`` is told."""
    if isinstance(exc, ProtocolError):
        log.warning("dropping connection to %s: %s", address, exc)
        return DeadObjectException(f"connection to {address} dropped: {exc}")
    if isinstance(exc, RemoteException):
        return exc
    if isinstance(exc, trio.TooSlowError):
        return DeadObjectException(f"{address} did not answer the handshake")
    return DeadObjectException(f"connection to {address} lost: {exc}")


class _ClientConn:
    """This process's connection to another one, over which its proxies call.

    A two-way caller is a party of the connection's :class:`Reader`: after sending
    it reads its reply itself if nobody else reads (no task switch for a lone
    call), or waits to be given its reply or the role.

    The connection's own task (:meth:`run`) does the handshake and then watches
    for the peer's hang-up, reading nothing (``stream.wait_hangup``): that is the
    death notice even when no call is in flight. When it comes, the watcher takes
    the reading role, reads what the peer said before it went, and tears down:
    pending calls fail with :class:`DeadObjectException` and death recipients fire.
    """

    def __init__(self, runtime: BinderRuntime, address: str) -> None:
        self.runtime = runtime
        self.address = address
        self.stream: Any = None
        self.wire = Connection(CLIENT)
        self.reader = Reader(_wake)
        self.ready = trio.Event()
        self.usable = False
        self.error: RemoteException | None = None
        self.remote_pid = -1
        self.remote_uid = -1
        self._peer_uid = -1
        self._torn_down = False
        self._oneways = 0  # oneway calls sent, to yield to trio on every few

    def fail(self) -> RemoteException:
        err = self.error
        assert err is not None
        return type(err)(err.message)

    async def run(self) -> None:
        runtime = self.runtime
        try:
            self.stream = stream = await runtime.network.connect(self.address, runtime.pid)
            await stream.send_frame(self.wire.send(Hello(token=runtime._token)))
            with trio.fail_after(_HANDSHAKE_TIMEOUT):
                event = await _next_event(self.wire, stream)
            if event is None:
                raise DeadObjectException(f"{self.address} closed during the handshake")
            if type(event) is Refused:
                raise SecurityException(f"{self.address} refused this process: {event.reason}")
            self.remote_pid, self.remote_uid = event.pid, event.uid
            self._peer_uid = event.peer_uid
            stream.handshake_done()
            self.usable = True
            self.ready.set()
            await stream.wait_hangup()
            # The peer hung up. Replies it sent before going still count: read them
            # (once the caller reading now, if any, passes the role on).
            reader = self.reader
            watcher = reader.watch()
            if watcher.state is ACTIVE and reader.read(watcher) is WAITING:
                await _park(reader, watcher)
            if watcher.state is READING:
                await self._read_until(watcher)
        except (RemoteException, trio.TooSlowError, trio.BrokenResourceError, OSError) as exc:
            if self.error is None:
                self.error = _connection_error(self.address, exc)
        finally:
            self._tear_down(DeadObjectException(f"connection to {self.address} closed"))
            if self.stream is not None:
                with trio.CancelScope(shield=True):
                    await self.stream.aclose()

    def _tear_down(self, error: RemoteException) -> None:
        """The connection is over: fail every pending call and send death notices.

        Run by whoever learns it first (the watcher, or a caller reading); the
        second time does nothing. Death recipients fire before any failed caller
        runs again, so a caller that sees DeadObjectException can count on them.
        """
        if self.error is None:
            self.error = error
        if self._torn_down:
            return
        self._torn_down = True
        self.usable = False
        self.ready.set()
        self.reader.lose()  # waiting callers wake to DONE with no reply: they raise fail()
        _close_fds(self.wire.close())
        if not self.runtime._closed:
            self.runtime._on_connection_lost(self.address)

    def _died(self) -> DeadObjectException:
        return DeadObjectException(f"process at {self.address} died")

    async def _read_until(self, party: Party) -> None:
        """Hold the reading role while ``party`` does: hand each reply read to its
        caller, until ``party``'s own comes (or, for the watcher, the stream ends)."""
        reader, wire, stream = self.reader, self.wire, self.stream
        try:
            while party.state is READING:
                # _next_event written out: the reply read here is the one a lone call waits for.
                event = wire.next_event()
                while event is NEED_DATA:
                    data, fds = await stream.receive_some()
                    if not data:
                        _close_fds(fds)
                        raise DeadObjectException(f"process at {self.address} died")
                    event = wire.receive(data, fds)
                if not reader.answer(event.txn_id, event):
                    _close_fds(event.fds)  # its caller was cancelled; nobody wants it
        except (RemoteException, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            # The connection is broken for everyone: tear down now, and close the
            # stream, which wakes the watcher in run() to finish.
            self._tear_down(_connection_error(self.address, exc))
            with trio.CancelScope(shield=True):
                await stream.aclose()
            raise self.fail() from None
        finally:
            if party.state is READING:  # cancelled while reading: pass the role on
                reader.cancel(party)

    async def transact(self, target: int, code: int, data: Any, fds, oneway: bool) -> Reply | None:
        if not self.usable:
            raise self.fail() if self.error else DeadObjectException(f"{self.address} is not connected")
        txn_id, frame = self.wire.send_call(target, code, oneway, data, len(fds))
        stream = self.stream
        try:
            sending = stream.send_now(frame) if not fds else stream.send_frame([frame], fds)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The peer is gone and the watcher has not said so yet (EPIPE wins the
            # race with the hang-up): the caller sees what it will see next.
            raise (self.fail() if not self.usable and not oneway else self._died()) from None
        if oneway:
            if sending is not None:
                try:
                    await sending
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    raise self._died() from None
            # The send itself need not yield; a caller looping on oneway calls must,
            # now and then (a schedule point is a trip through trio's run loop, most
            # of a oneway call's cost). It may be cancelled at every one.
            self._oneways += 1
            if self._oneways % _ONEWAY_YIELD_EVERY:
                await trio.lowlevel.checkpoint_if_cancelled()
            else:
                await trio.lowlevel.checkpoint()
            return None
        reader = self.reader
        # The call's party is made once its bytes have left (while the peer works on
        # them) but before this task can wait: no other task has run since the
        # send, so nobody can have read the reply yet.
        party = reader.call(txn_id)
        if sending is not None:
            try:
                await sending
            except BaseException as exc:
                unread = reader.cancel(party)
                if unread is not None:
                    _close_fds(unread.fds)
                if not self.usable:
                    raise self.fail() from None
                if isinstance(exc, (trio.BrokenResourceError, trio.ClosedResourceError)):
                    raise self._died() from None
                raise
        if party.state is ACTIVE and reader.read(party) is WAITING:
            await _park(reader, party)
        if party.state is READING:
            await self._read_until(party)
        if party.reply is None:
            raise self.fail()
        return party.reply


@types.coroutine
def _run_inline(coro: Any, on_block: Callable[[], None]) -> Any:
    """Run the coroutine ``coro`` to its end in the calling task; call ``on_block()``
    the first time it has to wait. Returns whether it did wait.

    This is ``await coro`` with a hook: a coroutine that finishes without ever
    yielding to trio (most handlers: decode, compute, reply into the socket
    buffer) costs no task at all, and one that does block has told us so before
    trio parks it, while there is still time to let another task take over.
    """
    try:
        trap = coro.send(None)
    except StopIteration:
        return False
    try:
        on_block()
    except BaseException:
        coro.close()
        raise
    while True:
        # Forward trio's answer to the trap into the coroutine, as ``await`` would.
        try:
            value = yield trap
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                trap = coro.throw(exc)
            except StopIteration:
                return True
        else:
            try:
                trap = coro.send(value)
            except StopIteration:
                return True


class _ServerConn:
    """A connection another process opened to us: we read calls and send replies.

    Each serving task is a party of the connection's :class:`Reader`. The one
    holding the role reads a call and runs the handler itself, inline, through
    :func:`_run_inline`: a handler that never waits replies without any task
    switch. The moment a handler has to wait (a sleep, a lock, a nested call, a
    full socket), the role passes to an idle task of this connection (or a new
    one) before the handler parks, so the next call is read and served at once and
    every handler can block independently. The task that ran the blocked handler
    finishes it, replies, and then idles until it is handed the role again.
    Oneway calls take the same path through the target object's queue, which keeps
    them in order and one at a time.
    """

    __slots__ = (
        "runtime", "stream", "wire", "reader", "peer_pid", "peer_uid", "identity", "backlog", "held", "calls",
        "oneways", "full", "_room", "_unheld",
    )

    def __init__(self, runtime: BinderRuntime, stream: Any) -> None:
        self.runtime = runtime
        self.stream = stream
        self.wire = Connection(SERVER)
        self.reader = Reader(_wake, self._spawn, max_idle=_MAX_IDLE_WORKERS)
        self.peer_pid = stream.peer_pid
        self.peer_uid = -1
        self.identity = (self.peer_pid, -1)
        # Calls read ahead, not yet served, each with its frame's size.
        self.backlog: deque[tuple[Transaction, int]] = deque()
        # What the peer has in this process: frame bytes and calls read and not yet
        # finished (two-way calls being served, oneway calls served or queued). Past a
        # cap (``full``) the connection is not read until enough finish.
        self.held = 0
        self.calls = 0
        self.oneways = 0
        self.full = False
        self._room: trio.CancelScope | None = None
        self._unheld = 0  # the frame bytes of the call the role's holder serves inline

    def _charge(self, size: int, oneway: bool) -> None:
        """A call of ``size`` frame bytes is read: the peer holds that much more here."""
        self.held += size
        if oneway:
            self.oneways += 1
        else:
            self.calls += 1
        if self.held > MAX_CONNECTION_BUFFER or self.calls >= MAX_PENDING_CALLS or self.oneways >= MAX_QUEUED_ONEWAY:
            self._stop_reading()

    def _block_charging(self) -> None:
        """The handler run inline blocks: its call (``_unheld`` bytes) is held from now
        on, and the role goes to another task."""
        self._charge(self._unheld, False)
        self.reader.block()

    def _stop_reading(self) -> None:
        """The peer is over a cap here: this connection is not read until enough finish."""
        if not self.full:
            log.warning(
                "pid %d holds %d bytes in %d calls and %d oneway calls here: not reading it until they finish",
                self.peer_pid, self.held, self.calls, self.oneways,
            )
        self.full = True

    def _release(self, size: int, oneway: bool) -> None:
        """A call is finished: what it held is free; reading resumes once under every cap."""
        self.held -= size
        if oneway:
            self.oneways -= 1
        else:
            self.calls -= 1
        if self.full and (
            self.held <= MAX_CONNECTION_BUFFER // 2
            and self.calls < MAX_PENDING_CALLS // 2
            and self.oneways < MAX_QUEUED_ONEWAY // 2
        ):
            self.full = False
            if self._room is not None:
                self._room.cancel()

    async def _wait_for_room(self) -> None:
        """Hold off reading while the peer is over a cap, until its calls finish (or it
        hangs up): its further calls wait in the kernel's socket buffer, and its
        sends block once that is full, as binder's callers wait for a thread."""
        with trio.CancelScope() as scope:
            self._room = scope
            await self.stream.wait_hangup()
        self._room = None

    def _spawn(self, party: Party) -> None:
        self.runtime._nursery.start_soon(self._work, party)

    async def run(self) -> None:
        runtime, wire, stream = self.runtime, self.wire, self.stream
        party = self.reader.first_worker()
        welcomed = False
        try:
            if not stream.peer_alive():
                log.info("dropping connection from pid %d: it exited before it was accepted", self.peer_pid)
                return
            with trio.fail_after(_HANDSHAKE_TIMEOUT):
                hello = await _next_event(wire, stream)
                if hello is None:
                    return
                try:
                    uid = await runtime._resolve(self.peer_pid, hello.token)
                except RemoteException as exc:
                    # No servicemanager to vouch (it died, or we are shutting down):
                    # nobody unknown gets in.
                    log.warning("cannot resolve pid %d: %s", self.peer_pid, exc)
                    uid = None
            # The uid was vouched for whatever process had this pid when the
            # servicemanager looked (while that process lived). The one that connected
            # still runs now, so it ran then too and had the pid: it is that process.
            # Had it exited, its pid might name another (a restarted HAL, uid 1000).
            if uid is not None and not stream.peer_alive():
                log.warning("refusing pid %d: the process that connected has exited", self.peer_pid)
                uid = None
            if uid is None:
                log.warning("refusing pid %d: not a process this emulator launched", self.peer_pid)
                await stream.send_frame(wire.send(Refused(f"pid {self.peer_pid} is not a known process")))
                return
            self.peer_uid = uid
            self.identity = (self.peer_pid, uid)
            await stream.send_frame(wire.send(Welcome(runtime.pid, runtime.uid, uid)))
            stream.handshake_done()
            welcomed = True
        except ProtocolError as exc:
            log.warning("dropping connection from pid %d: %s", self.peer_pid, exc)
        except trio.TooSlowError:
            log.warning("dropping connection from pid %d: no handshake", self.peer_pid)
        except (trio.BrokenResourceError, OSError) as exc:
            log.info("connection from pid %d lost: %s", self.peer_pid, exc)
        finally:
            runtime._handshaking -= 1
            if not welcomed:
                await self._finish()
        await self._work(party)

    async def _work(self, party: Party) -> None:
        """A task of this connection: read and serve while holding the role, idle
        while another task holds it, end when the connection does."""
        _calling.set(self.identity)  # once per task: every call it serves is this peer's
        reader = self.reader
        try:
            while party.state is READING:
                if not await self._read(party):
                    return
                # A handler blocked, another task reads now, and ours is done.
                if reader.idle(party) is WAITING:
                    await _park(reader, party)
        finally:
            if party.state is ACTIVE:  # cancelled while finishing a blocked handler
                reader.cancel(party)

    async def _read(self, party: Party) -> bool:
        """Hold the reading role (as ``party``): read calls and serve them inline.

        Returns True once the role has been handed on (a handler blocked), False
        when the connection is over (this task tore it down).
        """
        runtime, block, wire, backlog = self.runtime, self.reader.block, self.wire, self.backlog
        stream = self.stream
        try:
            while True:
                if backlog:
                    event, size = backlog.popleft()
                    if not len(backlog) % _BACKLOG_YIELD_EVERY:
                        # One read can hold thousands of small calls, each served inline
                        # without a schedule point: other connections get their turn.
                        await trio.lowlevel.checkpoint()
                else:
                    # _next_event written out: this is where every call is read.
                    event = wire.next_event()
                    while event is NEED_DATA:
                        if self.full:
                            await self._wait_for_room()
                        data, fds = await stream.receive_some()
                        if not data:
                            _close_fds(fds)
                            return False
                        event = wire.receive(data, fds)
                    size = wire.frame_size
                    # Check every frame of this read before serving any: a peer that
                    # breaks the protocol anywhere in it is dropped unserved (a reused
                    # id, say, must not pass because the call it reuses has just ended).
                    try:
                        while (more := wire.next_event()) is not NEED_DATA:
                            backlog.append((more, wire.frame_size))
                    except ProtocolError:
                        _close_fds(event.fds)
                        raise
                if event.oneway:
                    self._charge(size, True)  # released as its queue serves it
                    call = runtime._take_oneway(self, event, size)
                    if call is None:
                        continue  # queued behind the target's running oneway call
                    if await _run_inline(call, block):
                        return True
                else:
                    # A handler that replies without waiting holds nothing once it is
                    # done, so its call is charged only if it blocks (_block_charging),
                    # and released once it is done; what the pair would do to a peer
                    # over a cap is done after the reply went (off the critical path).
                    self._unheld = size
                    try:
                        waited = await _run_inline(
                            runtime._serve_call(self, event, set_identity=False), self._block_charging
                        )
                    finally:
                        if party.state is not READING:  # it blocked: charged
                            self._release(size, False)
                    if waited:
                        return True
                    if self.held + size > MAX_CONNECTION_BUFFER or self.calls + 1 >= MAX_PENDING_CALLS:
                        self._charge(size, False)
                        self._release(size, False)
        except ProtocolError as exc:
            log.warning("dropping connection from pid %d: %s", self.peer_pid, exc)
        except (trio.BrokenResourceError, OSError) as exc:
            log.info("connection from pid %d lost: %s", self.peer_pid, exc)
        finally:
            # The holder tears down (at the stream's end, on an error, or cancelled);
            # a task whose handler was cancelled after it handed the role on leaves
            # that to the holder.
            if party.state is READING:
                await self._finish()
        return False

    async def _finish(self) -> None:
        reader = self.reader
        if reader.lost:
            return
        reader.lose()  # idle tasks wake to DONE and end
        _close_fds(self.wire.close())
        while self.backlog:
            _close_fds(self.backlog.popleft()[0].fds)
        runtime = self.runtime
        if self in runtime._server_conns:
            runtime._server_conns.discard(self)
            left = runtime._peer_conns.pop(self.peer_pid, 1) - 1
            if left:
                runtime._peer_conns[self.peer_pid] = left
        with trio.CancelScope(shield=True):
            await self.stream.aclose()

    def send_reply(self, txn_id: int, data: Any, fds: list[int]) -> Awaitable[None] | None:
        """Start sending a handler's result (with the descriptors it wrote) as the
        reply to ``txn_id``: None once it went (or nobody waits for it any more),
        else an awaitable that finishes it, which the caller must await. A reply
        that fits in the socket buffer goes without a coroutine or a wait."""
        wire = self.wire
        if wire.state is State.CLOSED:
            return None  # the caller hung up (or died) while we worked; nobody is waiting
        try:
            frame = wire.send_reply(txn_id, data, len(fds))
        except (TransactionTooLargeException, ProtocolError) as exc:
            log.warning("reply to pid %d refused: %s", self.peer_pid, exc)
            return self.send_error(Reply(txn_id, status=_status.FAILED_TRANSACTION, message=f"reply refused: {exc}"))
        try:
            sending = self.stream.send_frame([frame], fds) if fds else self.stream.send_now(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None  # the caller is gone; nobody is waiting for this
        if sending is None:
            return None
        return _ignoring_hangup(sending)

    async def send_error(self, reply: Reply) -> None:
        """Send a failure status (a reply with no data or descriptors)."""
        if self.wire.state is State.CLOSED:
            return
        try:
            await self.stream.send_frame(self.wire.send(reply))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


# ---------------------------------------------------------------------------------
# The runtime


#: Bits of randomness in an object id: a reference is a capability because its id
#: cannot be guessed (the binder driver gets the same from handles it translates per
#: process). 63 bits, so that an id fits the wire's signed 64-bit target field; a peer
#: probing one id per round trip would need millions of years to find one.
OBJECT_ID_BITS = 63


def _new_object_id(taken: dict[int, Binder]) -> int:
    """An unguessable object id (from ``secrets``), never 0 (the context object's)."""
    while True:
        object_id = secrets.randbits(OBJECT_ID_BITS)
        if object_id != CONTEXT_OBJECT_ID and object_id not in taken:
            return object_id


class BinderRuntime:
    """This process's binder state. Made by :func:`open_binder_runtime`.

    ``pid``/``uid`` are this process's identity as the binder sees it; ``address``
    is where it serves.
    """

    def __init__(
        self,
        network: Any,
        nursery: trio.Nursery,
        *,
        pid: int,
        uid: int,
        address: str,
        resolver: Resolver | None,
        interfaces: InterfaceFactory,
        token: str | None,
    ) -> None:
        self.network = network
        self.pid = pid
        self.uid = uid
        self.address = address
        self._nursery = nursery
        self._resolver = resolver
        self._interfaces = interfaces
        self._token = token
        self._objects: dict[int, Binder] = {}
        self._clients: dict[str, _ClientConn] = {}
        self._proxies: weakref.WeakValueDictionary[tuple[str, int], BinderProxy] = weakref.WeakValueDictionary()
        self._server_conns: set[_ServerConn] = set()
        self._peer_conns: dict[int, int] = {}  # peer pid -> its connections here
        self._handshaking = 0  # accepted connections not yet welcomed or refused
        self._refusing = False
        self._oneway: dict[int, deque] = {}
        self._listener: Any = None
        self._closed = False
        # What decodes a parcel that carries no descriptors: it writes nothing, and
        # reading a descriptor from it is the parcel's error (so it holds no state).
        self._no_fds = _ParcelContext(self, ())
        # What encodes every outgoing call and reply, and decodes calls that carry no
        # descriptors: whoever writes descriptors into it takes them out (emptying
        # out_fds) before anything can wait (BinderProxy._call, _serve_call).
        self._writer = _ParcelContext(self, ())

    def __repr__(self) -> str:
        return f"<BinderRuntime pid={self.pid} uid={self.uid} at {self.address}>"

    # -- objects --------------------------------------------------------------------

    def export(self, binder: Binder) -> int:
        """The object id under which ``binder`` is served here (exported on first use)."""
        if binder._runtime is self:
            return binder._object_id  # type: ignore[return-value]
        if binder._runtime is not None:
            raise IllegalStateException(f"{binder!r} already belongs to {binder._runtime!r}")
        if self._closed:
            raise IllegalStateException("binder runtime is closed")
        object_id = _new_object_id(self._objects)
        binder._runtime, binder._object_id = self, object_id
        self._objects[object_id] = binder
        return object_id

    def unexport(self, binder: Binder) -> None:
        """Stop serving ``binder``: later calls through old references fail as dead."""
        if binder._runtime is self:
            self._objects.pop(binder._object_id, None)  # type: ignore[arg-type]

    def set_context_object(self, binder: Binder) -> None:
        """Serve ``binder`` as object 0 (the servicemanager's registry)."""
        if binder._runtime is not None:
            raise IllegalStateException(f"{binder!r} is already exported")
        binder._runtime, binder._object_id = self, CONTEXT_OBJECT_ID
        self._objects[CONTEXT_OBJECT_ID] = binder

    def proxy(self, address: str, object_id: int, descriptor: str = "") -> IBinder:
        """The binder for object ``object_id`` of the process at ``address``."""
        return self._binder_for(address, object_id, descriptor)

    def context_object(self) -> IBinder:
        """The servicemanager's registry, as a binder."""
        return self._binder_for(SERVICEMANAGER_ADDRESS, CONTEXT_OBJECT_ID, "android.os.IServiceManager")

    def _binder_for(self, address: str, object_id: int, descriptor: str) -> IBinder:
        if address == self.address:
            obj = self._objects.get(object_id)
            if obj is None:
                raise _status.BadParcelableException(f"no local object {object_id} in this process")
            return obj
        key = (address, object_id)
        proxy = self._proxies.get(key)
        if proxy is None:
            proxy = BinderProxy(self, address, object_id, descriptor)
            conn = self._clients.get(address)
            if conn is not None and conn.error is not None:
                proxy._dead = True
            self._proxies[key] = proxy
            # Connect now, not at the first call: a death link must see the owner die
            # even if nobody ever calls.
            self._ensure_connection(address)
        elif descriptor and not proxy._descriptor:
            proxy._descriptor = descriptor
        return proxy

    # -- outgoing -------------------------------------------------------------------

    def _ensure_connection(self, address: str) -> _ClientConn:
        conn = self._clients.get(address)
        if conn is None:
            if self._closed:
                raise DeadObjectException("binder runtime is closed")
            conn = _ClientConn(self, address)
            self._clients[address] = conn
            self._nursery.start_soon(conn.run)
        return conn

    async def _client_for(self, address: str) -> _ClientConn:
        conn = self._ensure_connection(address)
        if not conn.ready.is_set():
            await conn.ready.wait()
        if conn.error is not None:
            raise conn.fail()
        return conn

    def _on_connection_lost(self, address: str) -> None:
        for (addr, _), proxy in list(self._proxies.items()):
            if addr == address:
                proxy._die()
        if address == SERVICEMANAGER_ADDRESS:
            # The one well-known address: init restarts a servicemanager that died, and
            # the next defaultServiceManager() must reach the new one (as libbinder's
            # handle 0 always names the current context manager), not the dead proxy.
            self._clients.pop(address, None)
            for key in list(self._proxies.keys()):
                if key[0] == address:
                    self._proxies.pop(key, None)

    # -- incoming -------------------------------------------------------------------

    async def _resolve(self, pid: int, token: str | None) -> int | None:
        if self._resolver is None:
            return None
        return await self._resolver(self, pid, token)

    async def _accept_loop(self, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                stream = await self._listener.accept()
            except (trio.ClosedResourceError, OSError):
                return
            pid = stream.peer_pid
            peers = self._peer_conns
            if self._handshaking >= MAX_HANDSHAKING or peers.get(pid, 0) >= MAX_CONNECTIONS_PER_PEER:
                # Refused before a byte is read: a burst costs a socket each, briefly.
                if not self._refusing:
                    log.warning(
                        "refusing connections: %d handshakes under way, pid %d has %d connections",
                        self._handshaking, pid, peers.get(pid, 0),
                    )
                self._refusing = True
                await stream.aclose()
                continue
            self._refusing = False
            peers[pid] = peers.get(pid, 0) + 1
            self._handshaking += 1
            conn = _ServerConn(self, stream)
            self._server_conns.add(conn)
            self._nursery.start_soon(conn.run)

    def _take_oneway(self, conn: _ServerConn, event: Transaction, size: int) -> Any:
        """The coroutine that serves oneway ``event`` now, or None if it was queued.

        Oneway calls to one object run one at a time, in arrival order (binder's
        async_todo list); calls to different objects do not wait for each other.
        Whoever runs the coroutine drains the object's queue, including calls that
        other connections queue behind it meanwhile.
        """
        queue = self._oneway.get(event.target)
        if queue is not None:
            queue.append((conn, event, size))
            return None
        queue = self._oneway[event.target] = deque(((conn, event, size),))
        return self._drain_oneway(event.target, queue)

    async def _drain_oneway(self, target: int, queue: deque) -> None:
        try:
            while queue:
                conn, event, size = queue[0]
                try:
                    await self._serve_call(conn, event)
                finally:
                    conn._release(size, True)
                queue.popleft()
        finally:
            if self._oneway.get(target) is queue:
                del self._oneway[target]

    async def _serve_call(self, conn: _ServerConn, event: Transaction, set_identity: bool = True) -> None:
        token = _calling.set(conn.identity) if set_identity else None
        in_fds = event.fds
        # A parcel without descriptors is decoded, and its reply encoded, in the
        # runtime's one writing context: nothing reads a descriptor from it, and
        # the reply's descriptors are taken out of it as soon as they are written
        # (no await between encoding and sending), as BinderProxy._call does.
        ctx = _ParcelContext(self, in_fds) if in_fds else self._writer
        try:
            obj = self._objects.get(event.target)
            if obj is None:
                raise DeadObjectException(f"no object {event.target} in pid {self.pid}")
            code = event.code
            if code < _SPECIAL_CODES:
                data = await obj.onTransact(code, event.data, ctx)
            elif code == _status.PING_TRANSACTION:
                data = None
            elif code == _status.INTERFACE_TRANSACTION:
                data = obj.DESCRIPTOR
            else:
                data = await obj.onTransact(code, event.data, ctx)
        except BaseException as exc:
            ctx.close_out()  # whatever the handler's reply wrote before failing stays here
            if not isinstance(exc, Exception):
                raise
            reply = self._error_reply(conn, event, exc)
        else:
            reply = None
        finally:
            if in_fds:
                ctx.release_in()
            if token is not None:
                _calling.reset(token)
        if event.oneway:
            if reply is not None:
                log.warning("oneway call code %d from pid %d failed: %s", event.code, conn.peer_pid, reply.message)
            return
        if reply is not None:
            await conn.send_error(reply)
            return
        out_fds = ctx.out_fds
        if not out_fds:
            sending = conn.send_reply(event.txn_id, data, out_fds)
            if sending is not None:
                await sending
            return
        ctx.out_fds = []
        try:
            sending = conn.send_reply(event.txn_id, data, out_fds)
            if sending is not None:
                await sending
        finally:
            _close_fds(out_fds)  # the reply's, once it went (or did not)

    def _error_reply(self, conn: _ServerConn, event: Transaction, exc: Exception) -> Reply:
        """The status a failed handler sends back (binder::Status from an exception)."""
        if isinstance(exc, UnknownTransactionException):
            return Reply(event.txn_id, status=_status.UNKNOWN_TRANSACTION, message=str(exc))
        if isinstance(exc, DeadObjectException) and event.target not in self._objects:
            return Reply(event.txn_id, status=_status.DEAD_OBJECT, message=exc.message)
        if isinstance(exc, TransactionError):
            # The handler's own outgoing call failed (a dead peer...): a failure status.
            return Reply(
                event.txn_id,
                exception=_status.EX_TRANSACTION_FAILED,
                message=f"{type(exc).__name__}: {exc.message}",
            )
        if isinstance(exc, RemoteException):
            return Reply(
                event.txn_id,
                exception=exc.exception_code,
                message=exc.message,
                service_code=getattr(exc, "error_code", 0),
            )
        log.error(
            "handler for code %d on %s failed (caller pid %d)",
            event.code,
            type(self._objects.get(event.target)).__name__,
            conn.peer_pid,
            exc_info=exc,
        )
        return Reply(event.txn_id, exception=_status.EX_TRANSACTION_FAILED, message=f"{type(exc).__name__}: {exc}")

    # -- lifecycle ------------------------------------------------------------------

    async def _start(self) -> None:
        self._listener = await self.network.listen(self.address, self.pid)
        await self._nursery.start(self._accept_loop)

    async def _learn_identity(self) -> None:
        conn = await self._client_for(SERVICEMANAGER_ADDRESS)
        self.uid = conn._peer_uid

    async def _aclose(self) -> None:
        self._closed = True
        if self._listener is not None:
            await self._listener.aclose()
        self._objects.clear()
        if isinstance(self.network, MemoryNetwork):
            self.network.exit(self.pid)


#: Set by ``spawn_held(..., gate_in_runtime=True)``: the pipe on which this process's
#: launcher says "go" once the servicemanager knows its pid.
LAUNCH_GATE_ENV = "NPUEMU_LAUNCH_GATE_FD"


async def _pass_launch_gate() -> None:
    """Wait for the launcher's word, if this process was started held (see ``_launch``).

    The process has imported what it needs meanwhile; it connects to nobody before its
    launcher has registered its pid, and runs no further if the launcher gave up.
    """
    value = os.environ.pop(LAUNCH_GATE_ENV, None)
    if value is None:
        return
    fd = int(value)
    try:
        os.set_blocking(fd, False)
        word = b""
        while len(word) < 2:
            try:
                chunk = os.read(fd, 2 - len(word))
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                continue
            if not chunk:
                break
            word += chunk
    except OSError as exc:
        raise SecurityException(f"the launch gate (fd {fd}) is unusable: {exc.strerror}") from None
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    if word != b"go":
        raise SecurityException("the launcher did not register this process: refusing to start")


def _read_shell_token(runtime_dir: Path) -> str:
    path = runtime_dir / SHELL_TOKEN_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        raise SecurityException(f"no shell token at {path}: is the emulator booted?") from None


@asynccontextmanager
async def open_runtime(
    runtime_dir: str | os.PathLike[str] | None = None,
    *,
    resolver: Resolver,
    interfaces: InterfaceFactory,
    network: Any = None,
    pid: int | None = None,
    shell: bool = False,
    uid: int | None = None,
    address: str | None = None,
    context_object: Binder | None = None,
) -> AsyncIterator[BinderRuntime]:
    """Open this process's binder runtime; it serves until the block exits.

    ``open_binder_runtime`` (``_open``) is this with the usual ``resolver`` (ask the
    servicemanager) and ``interfaces`` (``interface_class``) filled in; the
    servicemanager itself passes its own resolver.

    ``runtime_dir`` (default ``$NPUEMU_RUNTIME_DIR``) selects Unix sockets there;
    or pass a ``network`` (a :class:`MemoryNetwork` and a fake ``pid`` for tests).
    The process's uid is whatever the servicemanager vouches for; a process it
    does not know is refused (:class:`SecurityException`) unless ``shell`` is set
    and the shell token can be read, which makes it the shell, uid 2000.

    ``uid`` is for the servicemanager itself (which knows the uids without asking)
    and for tests that run without one; ``context_object`` is served as object 0
    from the first moment (the servicemanager's registry).
    """
    if network is None:
        await _pass_launch_gate()
        if runtime_dir is None:
            runtime_dir = os.environ.get(RUNTIME_DIR_ENV)
            if not runtime_dir:
                raise ValueError(f"no runtime directory: pass runtime_dir or set ${RUNTIME_DIR_ENV}")
        network = UnixNetwork(runtime_dir)
    if pid is None:
        if isinstance(network, MemoryNetwork):
            raise ValueError("a MemoryNetwork runtime needs an explicit fake pid")
        pid = os.getpid()
    token = None
    if shell:
        if not isinstance(network, UnixNetwork):
            token = getattr(network, "shell_token", None)
            if token is None:
                raise SecurityException("this network has no shell token")
        else:
            token = _read_shell_token(network.runtime_dir)
    if address is None:
        address = f"binder-{pid}-{secrets.token_hex(4)}"
    # A caller catches SecurityException, not an ExceptionGroup around it.
    async with open_service_nursery() as nursery:
        runtime = BinderRuntime(
            network,
            nursery,
            pid=pid,
            uid=-1 if uid is None else uid,
            address=address,
            resolver=resolver,
            interfaces=interfaces,
            token=token,
        )
        if context_object is not None:
            runtime.set_context_object(context_object)
        rt_token = _current.set(runtime)
        try:
            await runtime._start()
            if uid is None:
                await runtime._learn_identity()
            id_token = _calling.set((runtime.pid, runtime.uid))
            try:
                yield runtime
            finally:
                _calling.reset(id_token)
        finally:
            _current.reset(rt_token)
            with trio.CancelScope(shield=True):
                await runtime._aclose()
