"""Transports: where the bytes of :mod:`._wire` actually travel.

A *network* is how a runtime listens at an address and connects to another, and
what it knows of processes (who is whose parent, when one exits), which the
servicemanager needs to vouch for uids:

- :class:`UnixNetwork`: the real thing. Every address is a Unix stream socket
  (0600) in the runtime directory (0700); descriptors cross with ``SCM_RIGHTS``;
  process facts come from ``/proc`` and pidfds. Who connected is fixed when the
  connection is accepted: the kernel's ``SO_PEERCRED`` (pid, uid, gid as of the
  ``connect``) and a pidfd of that very process (``SO_PEERPIDFD``; on a kernel
  without it, ``pidfd_open`` at once, checked against the credentials). A server
  judges that process, never a pid number looked up later: ``peer_alive()`` says
  whether the process the pidfd names still runs, and while it does its pid cannot
  name another.
- :class:`MemoryNetwork`: the same contract inside one trio run, so a whole stack
  of "processes" (each its own runtime with its own fake pid) can be tested under
  the autojump mock clock. Descriptors are ``dup``-ed on the way, as the kernel
  would, so ownership rules are exercised for real.

A *stream* moves whole frames: ``send_frame(buffers, fds)`` writes one frame with
its descriptors, ``receive_some()`` returns what arrived (``b""`` at end of
stream) with any descriptors that came with it, and ``wait_hangup()`` returns once
the peer has hung up (or the stream was closed here) without reading anything, so
one task can watch for a peer's death while another does the reading.
"""

from __future__ import annotations

import array
import errno
import itertools
import math
import os
import select
import socket
import stat
import struct
from collections.abc import Awaitable, Sequence
from pathlib import Path

import trio

from ._isolation import SHARED_RUNTIME_DIR_MODE
from ._status import DeadObjectException, ProtocolError
from ._wire import MAX_FDS_PER_FRAME, MAX_HANDSHAKE_FRAME_SIZE
from ._wirec import recvmsg as _recvmsg

__all__ = [
    "MemoryNetwork",
    "UnixNetwork",
]

# Reads go into one preallocated buffer per stream: asking recvmsg for a fresh
# 256 KiB bytes object each time costs an mmap/munmap per read, which was most of
# a round trip's CPU.
_RECV_SIZE = 64 * 1024
# Until the handshake is over a stream reads into a small buffer (a Hello or Welcome
# frame at most): a burst of connections that never say Hello costs little each.
_HANDSHAKE_RECV_SIZE = MAX_HANDSHAKE_FRAME_SIZE + 4
_PEERCRED = struct.Struct("3i")
_INT = struct.Struct("i")
#: getsockopt option of Linux >= 6.5 (asm-generic/socket.h): a pidfd of the peer as of
#: its connect. Python's socket module does not name it yet.
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)
#: How long accept waits for the descriptors it may still open (a burst of
#: connections at EMFILE backs off this long rather than spin).
_EMFILE_BACKOFF_S = 0.01


def _close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _pidfd_alive(pidfd: int) -> bool:
    """Whether the process a pidfd names still runs (a pidfd turns readable at its exit)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return not poller.poll(0)


def _proc_ids(pid: int) -> tuple[int, int] | None:
    """The real uid and gid of live ``pid`` from ``/proc``, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    ids = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Uid", "Gid"):
            ids[key] = int(rest.split()[0])
    return ids.get("Uid", -1), ids.get("Gid", -1)


def _peer_pidfd(sock: socket.socket, pid: int, uid: int, gid: int) -> int | None:
    """A pidfd of the process that connected ``sock``, or None if it is already gone.

    ``SO_PEERPIDFD`` names the connecting process itself, even if it has exited (the
    pidfd is then readable). Without it (Linux before 6.5) the pid is opened at once
    and the process it names must have the connection's credentials; a connecter
    that died and whose pid was taken, in the microseconds since its connect, by a
    process of the same uid and gid is the one case this cannot tell apart.
    """
    try:
        (pidfd,) = _INT.unpack(sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD, _INT.size))
        return pidfd
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return None
        if exc.errno not in (errno.ENOPROTOOPT, errno.EINVAL):
            raise
    try:
        pidfd = os.pidfd_open(pid)
    except (ProcessLookupError, OSError):
        return None
    if _proc_ids(pid) != (uid, gid) or not _pidfd_alive(pidfd):
        os.close(pidfd)
        return None
    return pidfd


class _ProcessHandle:
    """A process held by its pidfd: ``alive()`` at once, ``wait_exit()`` asynchronously.

    What the servicemanager keeps for each pid it vouches for, so that a record is
    never believed for a process that has exited (whose pid may name another now).
    """

    __slots__ = ("pid", "_pidfd")

    def __init__(self, pid: int, pidfd: int | None) -> None:
        self.pid = pid
        self._pidfd = pidfd

    def alive(self) -> bool:
        return self._pidfd is not None and _pidfd_alive(self._pidfd)

    async def wait_exit(self) -> None:
        if self._pidfd is None:
            await trio.lowlevel.checkpoint()
            return
        await trio.lowlevel.wait_readable(self._pidfd)

    def close(self) -> None:
        pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            trio.lowlevel.notify_closing(pidfd)
            os.close(pidfd)


# ---------------------------------------------------------------------------------
# Unix sockets


class _UnixStream:
    """A connected ``AF_UNIX``/``SOCK_STREAM`` socket carrying frames and fds.

    It drives a plain non-blocking socket with ``trio.lowlevel`` waits rather than
    going through ``trio.socket``: a frame that fits in the socket buffer goes out
    in one ``sendmsg`` without a trip through the scheduler, and a read that finds
    data returns it at once. That is most of what keeps a binder round trip close
    to a bare ping-pong. Fairness is kept by the callers (a two-way call parks for
    its reply; a oneway call checkpoints) and by a checkpoint every few reads.
    """

    __slots__ = (
        "_sock", "_sending", "_lot", "peer_pid", "peer_uid", "peer_gid", "_pidfd", "_closed", "_streak", "_rbuf",
        "_rsize", "_drained", "_hup",
    )

    def __init__(self, sock: socket.socket, accepted: bool = False) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._sending = False  # a frame is being written; others queue in _lot
        self._lot = trio.lowlevel.ParkingLot()
        # Who is at the other end, as the kernel recorded it at connect; an accepted
        # stream also holds that process by a pidfd (see peer_alive).
        pid, uid, gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
        self.peer_pid, self.peer_uid, self.peer_gid = pid, uid, gid
        self._pidfd = _peer_pidfd(sock, pid, uid, gid) if accepted else None
        self._closed = False
        self._streak = 0
        self._rbuf = memoryview(bytearray(_HANDSHAKE_RECV_SIZE))
        self._rsize = _HANDSHAKE_RECV_SIZE
        self._drained = False
        self._hup: select.epoll | None = None  # made by the first wait_hangup

    def peer_alive(self) -> bool:
        """Whether the process that connected (an accepted stream's peer) still runs:
        while it does, ``peer_pid`` names it and nobody else."""
        return self._pidfd is not None and _pidfd_alive(self._pidfd)

    def handshake_done(self) -> None:
        """Calls come now: read them into the full-size buffer."""
        if self._rsize != _RECV_SIZE:
            self._rbuf = memoryview(bytearray(_RECV_SIZE))
            self._rsize = _RECV_SIZE

    async def send_frame(self, buffers: list[bytes], fds: Sequence[int] = ()) -> None:
        if self._closed:
            raise trio.ClosedResourceError("stream is closed")
        if not fds and not self._sending:
            # The common case: nobody is mid-frame and the frame fits in the socket
            # buffer, so one send does it and nothing can come between: no lock.
            # Without descriptors a plain send of one buffer is the cheapest
            # syscall; joining a small header to the body costs less than sendmsg.
            data = buffers[0] if len(buffers) == 1 else b"".join(buffers)
            try:
                sent = self._sock.send(data)
            except BlockingIOError:
                sent = 0  # nothing went: wait in line below
            except OSError as exc:
                raise trio.BrokenResourceError(f"send failed: {exc}") from exc
            if sent == len(data):
                return
            if sent:
                self._sending = True
                await self._finish(memoryview(data)[sent:])
                return
        # Frames from concurrent handlers must not interleave: a FIFO hand-off lock.
        if self._sending:
            await self._lot.park()  # the releaser handed the lock to us
        else:
            self._sending = True
        try:
            sock = self._sock
            if fds:
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                while True:
                    try:
                        sent = sock.sendmsg(buffers, anc)
                        break
                    except BlockingIOError:
                        await trio.lowlevel.wait_writable(sock)
                total = sum(map(len, buffers))
            else:
                data = buffers[0] if len(buffers) == 1 else b"".join(buffers)
                total = len(data)
                while True:
                    try:
                        sent = sock.send(data)
                        break
                    except BlockingIOError:
                        await trio.lowlevel.wait_writable(sock)
            if sent < total:
                await self._send_rest(memoryview(b"".join(buffers))[sent:])
        except OSError as exc:
            raise trio.BrokenResourceError(f"send failed: {exc}") from exc
        finally:
            self._release()

    def send_now(self, frame: bytes) -> Awaitable[None] | None:
        """Start sending ``frame`` (one buffer, no descriptors) without waiting.

        None once it went whole, which is the common case (no other frame being
        written, room in the socket buffer); else an awaitable that finishes it,
        which the caller must await. So a caller can do its bookkeeping after the
        bytes left, while the peer is already at work on them.
        """
        if self._closed:
            raise trio.ClosedResourceError("stream is closed")
        if self._sending:
            return self.send_frame([frame])  # wait in line
        try:
            sent = self._sock.send(frame)
        except BlockingIOError:
            return self.send_frame([frame])
        except OSError as exc:
            raise trio.BrokenResourceError(f"send failed: {exc}") from exc
        if sent == len(frame):
            return None
        self._sending = True  # the frame's first bytes went: nobody may come between
        return self._finish(memoryview(frame)[sent:])

    async def _finish(self, rest: memoryview) -> None:
        try:
            await self._send_rest(rest)
        finally:
            self._release()

    async def _send_rest(self, rest: memoryview) -> None:
        """Finish a frame whose first bytes went (with its descriptors, if any): a
        frame cut short would corrupt the stream, so it goes whatever, uncancellable."""
        sock = self._sock
        try:
            with trio.CancelScope(shield=True):
                while rest:
                    try:
                        rest = rest[sock.send(rest) :]
                    except BlockingIOError:
                        await trio.lowlevel.wait_writable(sock)
        except OSError as exc:
            raise trio.BrokenResourceError(f"send failed: {exc}") from exc

    def _release(self) -> None:
        """Hand the sending lock to the next in line, or free it."""
        if self._lot:
            self._lot.unpark()
        else:
            self._sending = False

    async def receive_some(self) -> tuple[bytes, list[int]]:
        sock = self._sock
        if self._drained:
            # The last read left the socket empty: a recv now would only say EAGAIN,
            # a syscall spent between a reply arriving and its caller running.
            self._drained = False
            await trio.lowlevel.wait_readable(sock)
        else:
            self._streak += 1
            if self._streak >= 32:  # a peer that never lets the socket drain must not starve us
                self._streak = 0
                await trio.lowlevel.checkpoint()
        while True:
            try:
                # One recvmsg with room for a frame's descriptors (sock.recvmsg_into,
                # the slice and the ancillary data's walk, in one C call).
                data, fds, truncated = _recvmsg(sock.fileno(), self._rbuf)
                self._drained = len(data) < self._rsize
                break
            except BlockingIOError:
                self._streak = 0
                await trio.lowlevel.wait_readable(sock)
            except (ConnectionResetError, BrokenPipeError):
                return b"", []
            except OSError as exc:
                raise trio.BrokenResourceError(f"receive failed: {exc}") from exc
        if truncated:
            _close_fds(fds)
            raise ProtocolError("peer sent more descriptors than a frame may carry")
        return data, fds

    async def wait_hangup(self) -> None:
        """Return when the peer has hung up (or this end was closed); read nothing.

        A private epoll instance watches the socket for ``EPOLLRDHUP`` (``EPOLLHUP``
        and ``EPOLLERR`` always count) and not for data, and trio waits for *that*
        to become readable. So a task can sit here for the life of a connection
        while another one waits for data on the socket itself, which trio allows
        only one task to do.
        """
        if self._hup is None and not self._closed:
            hup = select.epoll(1)  # close-on-exec, as Python makes every fd
            hup.register(self._sock.fileno(), select.EPOLLRDHUP)
            self._hup = hup
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        try:
            await trio.lowlevel.wait_readable(self._hup.fileno())  # type: ignore[union-attr]
        except trio.ClosedResourceError:
            pass  # closed here while we watched: as good as a hang-up to the watcher

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            if self._hup is not None:
                trio.lowlevel.notify_closing(self._hup.fileno())
                self._hup.close()
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
            trio.lowlevel.notify_closing(self._sock)
            self._sock.close()
        await trio.lowlevel.checkpoint()


class _UnixListener:
    __slots__ = ("_sock", "path", "_owns_path")

    def __init__(self, sock: socket.socket, path: Path, owns_path: bool = True) -> None:
        sock.setblocking(False)
        self._sock = sock
        self.path = path
        self._owns_path = owns_path

    async def accept(self) -> _UnixStream:
        while True:
            try:
                sock, _ = self._sock.accept()
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self._sock)
                continue
            except OSError as exc:
                if self._sock.fileno() < 0:
                    raise trio.ClosedResourceError("listener closed") from None
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    await trio.sleep(_EMFILE_BACKOFF_S)  # out of descriptors: back off, do not spin
                    continue
                raise
            await trio.lowlevel.checkpoint()
            try:
                return _UnixStream(sock, accepted=True)
            except OSError as exc:  # out of descriptors for the pidfd, or the peer is gone
                sock.close()
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
                    await trio.sleep(_EMFILE_BACKOFF_S)
                continue

    async def aclose(self) -> None:
        if self._owns_path:  # an inherited socket's name stays its parent's
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
        trio.lowlevel.notify_closing(self._sock)
        self._sock.close()
        await trio.lowlevel.checkpoint()


class UnixNetwork:
    """Unix sockets in ``runtime_dir``, which is created 0700 if missing.

    A runtime directory that exists with looser permissions, or that belongs to
    another user, is refused: anyone who can write there could stand up a fake
    servicemanager. The one exception is an isolated emulator's (each process its own
    OS uid): owned by root and ``SHARED_RUNTIME_DIR_MODE`` (1733: every uid makes its
    sockets there, none lists it or removes another's), where sockets are 0666 (the
    kernel's ``SO_PEERCRED``, not the file's mode, says who connected).

    ``inherited`` maps addresses to sockets a parent bound and listens on for this
    process (``bind``), as Android's init creates a service's socket and hands it over:
    ``listen`` on such an address serves that socket and leaves its name alone, so the
    name is never free while the parent lives, not even between two children.
    """

    def __init__(self, runtime_dir: str | os.PathLike[str], *,
                 inherited: dict[str, socket.socket] | None = None) -> None:
        self.inherited = dict(inherited or {})
        self.runtime_dir = Path(runtime_dir)
        self.runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = self.runtime_dir.stat()
        mode = stat.S_IMODE(st.st_mode)
        self.shared = st.st_uid == 0 and mode == SHARED_RUNTIME_DIR_MODE
        if not self.shared and (st.st_uid != os.getuid() or mode & 0o077):
            raise PermissionError(
                f"runtime directory {self.runtime_dir} must be owned by uid {os.getuid()} and 0700,"
                f" is uid {st.st_uid} mode {mode:o}"
            )

    def own_pid(self) -> int:
        return os.getpid()

    def _path(self, address: str) -> Path:
        if not address or "/" in address or address.startswith("."):
            raise ValueError(f"bad binder address {address!r}")
        return self.runtime_dir / address

    async def listen(self, address: str, pid: int | None = None) -> _UnixListener:
        if address in self.inherited:
            await trio.lowlevel.checkpoint()
            return _UnixListener(self.inherited[address], self._path(address), owns_path=False)
        sock = self.bind(address)
        await trio.lowlevel.checkpoint()
        return _UnixListener(sock, self._path(address))

    def bind(self, address: str) -> socket.socket:
        """A listening socket at ``address`` (a stale one there replaced), with the directory's mode."""
        path = self._path(address)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            try:
                path.unlink()  # a stale socket from a killed process of the same name
            except FileNotFoundError:
                pass
            # Bind under a restrictive umask so the socket is never briefly world-open.
            old = os.umask(0o177)
            try:
                sock.bind(os.fspath(path))
            finally:
                os.umask(old)
            os.chmod(path, 0o666 if self.shared else 0o600)
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
        return sock

    async def connect(self, address: str, pid: int) -> _UnixStream:
        path = self._path(address)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        try:
            await trio.lowlevel.checkpoint()
            try:
                sock.connect(os.fspath(path))
            except BlockingIOError:  # the listener's backlog is full: wait our turn
                await trio.lowlevel.wait_writable(sock)
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            raise DeadObjectException(f"no process serves {address} ({exc.strerror})") from None
        except BaseException:
            sock.close()
            raise
        return _UnixStream(sock)

    # -- process facts, for the servicemanager --------------------------------------

    def parent_of(self, pid: int) -> int | None:
        """The parent pid of a live process, or None if there is no such process."""
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            return None
        # The command name may hold spaces and parentheses: split after the last ')'.
        fields = text[text.rindex(")") + 2 :].split()
        return int(fields[1])

    async def wait_exit(self, pid: int) -> None:
        """Return when ``pid`` exits (at once if it does not exist)."""
        handle = self.process_handle(pid)
        try:
            await handle.wait_exit()
        finally:
            handle.close()

    def process_handle(self, pid: int) -> _ProcessHandle:
        """``pid``'s process, held by a pidfd from now on (dead at once if there is none)."""
        try:
            pidfd = os.pidfd_open(pid)
        except (ProcessLookupError, ValueError):
            pidfd = None
        return _ProcessHandle(pid, pidfd)


# ---------------------------------------------------------------------------------
# In memory


class _MemoryStream:
    __slots__ = ("_send", "_recv", "peer_pid", "peer_uid", "peer_gid", "_closed", "_hangup", "_peer", "_network")

    def __init__(
        self, send: trio.MemorySendChannel, recv: trio.MemoryReceiveChannel, peer_pid: int, network: MemoryNetwork
    ):
        self._send = send
        self._recv = recv
        self.peer_pid = peer_pid
        self.peer_uid = self.peer_gid = os.getuid()  # one OS user, as the kernel would say
        self._network = network
        self._closed = False
        self._hangup = trio.Event()  # set when either end closes
        self._peer: _MemoryStream | None = None

    def peer_alive(self) -> bool:
        """Whether the fake process at the other end still runs (fake pids are never reused)."""
        return self._network.parent_of(self.peer_pid) is not None

    def handshake_done(self) -> None:
        pass

    async def send_frame(self, buffers: list[bytes], fds: Sequence[int] = ()) -> None:
        dup = [os.dup(fd) for fd in fds]  # what SCM_RIGHTS does: the receiver gets its own
        try:
            self._send.send_nowait((b"".join(buffers), dup))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            _close_fds(dup)
            raise trio.BrokenResourceError("peer closed") from exc
        await trio.lowlevel.checkpoint()

    def send_now(self, frame: bytes) -> Awaitable[None] | None:
        """What :meth:`_UnixStream.send_now` does; here a send always checkpoints,
        so it is left to the awaitable."""
        return self.send_frame([frame])

    async def receive_some(self) -> tuple[bytes, list[int]]:
        try:
            return await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return b"", []

    async def wait_hangup(self) -> None:
        await self._hangup.wait()

    async def aclose(self) -> None:
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        self._hangup.set()
        if self._peer is not None:
            self._peer._hangup.set()
        self._send.close()
        # Whatever the peer sent and we never read: close its descriptors, as the kernel does.
        while True:
            try:
                _, fds = self._recv.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            _close_fds(fds)
        self._recv.close()
        await trio.lowlevel.checkpoint()


class _MemoryListener:
    __slots__ = ("_network", "_address", "_pid", "_incoming", "_outgoing")

    def __init__(self, network: MemoryNetwork, address: str, pid: int) -> None:
        self._network = network
        self._address = address
        self._pid = pid
        self._outgoing, self._incoming = trio.open_memory_channel(math.inf)

    async def accept(self) -> _MemoryStream:
        try:
            return await self._incoming.receive()
        except trio.EndOfChannel:
            raise trio.ClosedResourceError("listener closed") from None

    async def aclose(self) -> None:
        self._network._listeners.pop(self._address, None)
        self._outgoing.close()
        while True:
            try:
                stream = self._incoming.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            await stream.aclose()
        self._incoming.close()
        await trio.lowlevel.checkpoint()


class MemoryNetwork:
    """Addresses and processes inside one trio run (for whole-stack tests).

    Fake pids come from :meth:`spawn`, which records the parent as ``fork`` would;
    :meth:`exit` ends one (a runtime calls it when it closes, so a closed runtime
    is a dead process to the servicemanager). ``init_pid`` is pid 1's stand-in.
    """

    def __init__(self, init_pid: int = 1) -> None:
        self.init_pid = init_pid
        #: Set by the servicemanager serving on this network (the shell's secret).
        self.shell_token: str | None = None
        self._listeners: dict[str, _MemoryListener] = {}
        self._parents: dict[int, int] = {init_pid: 0}
        self._exited: dict[int, trio.Event] = {init_pid: trio.Event()}
        self._pids = itertools.count(init_pid + 99)

    def spawn(self, parent: int | None = None) -> int:
        """A new live pid whose parent is ``parent`` (default: init)."""
        pid = next(self._pids)
        self._parents[pid] = self.init_pid if parent is None else parent
        self._exited[pid] = trio.Event()
        return pid

    def exit(self, pid: int) -> None:
        self._parents.pop(pid, None)
        event = self._exited.get(pid)
        if event is not None:
            event.set()

    def parent_of(self, pid: int) -> int | None:
        return self._parents.get(pid)

    async def wait_exit(self, pid: int) -> None:
        event = self._exited.get(pid)
        if event is None or pid not in self._parents:
            await trio.lowlevel.checkpoint()
            return
        await event.wait()

    def process_handle(self, pid: int) -> _MemoryProcess:
        return _MemoryProcess(self, pid)

    async def listen(self, address: str, pid: int) -> _MemoryListener:
        if address in self._listeners:
            raise OSError(errno.EADDRINUSE, f"address {address} in use")
        listener = _MemoryListener(self, address, pid)
        self._listeners[address] = listener
        await trio.lowlevel.checkpoint()
        return listener

    async def connect(self, address: str, pid: int) -> _MemoryStream:
        await trio.lowlevel.checkpoint()
        listener = self._listeners.get(address)
        if listener is None:
            raise DeadObjectException(f"no process serves {address}")
        a_send, b_recv = trio.open_memory_channel(math.inf)
        b_send, a_recv = trio.open_memory_channel(math.inf)
        client = _MemoryStream(a_send, a_recv, peer_pid=listener._pid, network=self)
        server = _MemoryStream(b_send, b_recv, peer_pid=pid, network=self)
        client._peer, server._peer = server, client
        try:
            listener._outgoing.send_nowait(server)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise DeadObjectException(f"no process serves {address}") from None
        return client


class _MemoryProcess:
    """:class:`_ProcessHandle`'s twin for a fake pid."""

    __slots__ = ("pid", "_network")

    def __init__(self, network: MemoryNetwork, pid: int) -> None:
        self.pid = pid
        self._network = network

    def alive(self) -> bool:
        return self._network.parent_of(self.pid) is not None

    async def wait_exit(self) -> None:
        await self._network.wait_exit(self.pid)

    def close(self) -> None:
        pass
