"""The runtime over real Unix sockets, both ends in one process: the transport's own
logic (frames bigger than the socket buffer, sent from many tasks at once), which the
in-memory network cannot exercise. Crossing real processes is test_binder_multiprocess."""

from __future__ import annotations

import os

import trio

from framework.binder import Binder, UnixNetwork, interface_class
from framework.binder._runtime import open_runtime

SIZE = 900 * 1024  # several times a Unix socket's buffer, under the 1 MiB parcel limit


class Mirror(Binder):
    """Answers [byte, size, yield first, blob] with ``size`` copies of ``byte``,
    once it has checked that ``blob`` is all ``byte`` too."""

    async def onTransact(self, code, data, ctx):  # noqa: N802
        byte, size, wait, blob = data
        if blob != bytes([byte]) * len(blob):
            raise ValueError(f"call {byte} arrived with another's bytes or torn")
        if wait:
            await trio.sleep(0)  # the reply is sent from a task that handed the role on
        return bytes([byte]) * size


async def _allow(runtime, pid, token):
    await trio.lowlevel.checkpoint()
    return 1000


async def test_big_frames_from_many_tasks_at_once_arrive_whole_and_in_place(tmp_path):
    net = UnixNetwork(tmp_path / "rt")
    pid = os.getpid()
    with trio.fail_after(60):  # a frame cut short or interleaved would hang or garble
        async with open_runtime(
            network=net, pid=pid, uid=1000, resolver=_allow, interfaces=interface_class, address="server"
        ) as server, open_runtime(network=net, pid=pid, uid=1001, resolver=_allow, interfaces=interface_class) as client:
            mirror = Mirror()
            proxy = client.proxy("server", server.export(mirror))
            got = {}

            async def call(i: int) -> None:
                # Each call's own bytes go out and come back: a frame that interleaved
                # with another, or lost its tail, shows as a wrong byte or a hang.
                reply = await proxy.transact(1, [i, SIZE, i % 2 == 1, bytes([i]) * SIZE])
                got[i] = reply.data
                assert not reply.fds

            async with trio.open_nursery() as nursery:
                for i in range(8):
                    nursery.start_soon(call, i)
            for i in range(8):
                assert got[i] == bytes([i]) * SIZE, f"call {i} got another's bytes or a torn frame"
            # The connection is sound afterwards: small calls still pass both ways.
            assert (await proxy.transact(1, [9, 3, False, b"\x09"])).data == b"\x09\x09\x09"


def test_one_read_brings_the_bytes_and_the_descriptors_sent_with_them() -> None:
    """_wirec.recvmsg, the Unix transport's read: what came, the descriptors that came
    with it (owned by the reader), b"" at the end, BlockingIOError when nothing is there."""
    import array
    import errno
    import socket

    import pytest

    from framework.binder._wirec import recvmsg

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    buf = memoryview(bytearray(16))
    with a, b:
        b.setblocking(False)
        with pytest.raises(BlockingIOError):
            recvmsg(b.fileno(), buf)
        r, w = os.pipe()
        try:
            a.sendmsg([b"hello"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r, w]))])
            data, fds, truncated = recvmsg(b.fileno(), buf)
            assert (data, len(fds), truncated) == (b"hello", 2, False)
            os.write(fds[1], b"!")  # the received write end is the pipe's own
            assert os.read(r, 1) == b"!"
            for fd in fds:
                os.close(fd)
        finally:
            os.close(r)
            os.close(w)
        a.send(b"x" * 40)
        assert recvmsg(b.fileno(), buf) == (b"x" * 16, [], False)  # at most the buffer's size
        assert recvmsg(b.fileno(), buf)[0] == b"x" * 16
        a.shutdown(socket.SHUT_WR)
        assert recvmsg(b.fileno(), buf)[0] == b"x" * 8
        assert recvmsg(b.fileno(), buf) == (b"", [], False)
    with pytest.raises(OSError) as info:
        recvmsg(-1, buf)  # a closed socket's fileno()
    assert info.value.errno == errno.EBADF
