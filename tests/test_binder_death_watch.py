"""The binder's death watch over real Unix sockets, in one process.

A connection's death notice is the kernel closing the peer's socket; each outgoing
connection has a task that waits for that hang-up alone (``EPOLLRDHUP`` on a private
epoll, ``_UnixStream.wait_hangup``) while whoever holds the reading role waits for data
on the socket itself (trio's own epoll). These tests pin the cases in which a watch
like that can miss a death: nobody reading when the peer goes, the peer gone before the
watch is armed (during or right after the handshake), the socket in two epolls at once
(a caller reading while the watcher watches), and many idle connections at once.

Two runtimes share one trio run and one runtime directory; closing one of them (its
listener and every accepted socket) is, for the other, what a process's death is.
A ``fail_after`` bounds each wait so that a missed notice fails instead of hanging;
no latency is asserted on the real clock.
"""

from __future__ import annotations

import socket

import pytest
import trio

from framework.binder import Binder, DeadObjectException, DeathRecipient, open_binder_runtime
from framework.binder._transport import _UnixStream

# A missed death notice hangs for ever: this turns it into a failure.
HANG_BOUND_S = 10.0


async def _allow(runtime, pid, token):
    return 1000


class _Blocks(Binder):
    """Answers ping; code 1 never returns (a caller holds the reading role meanwhile)."""

    DESCRIPTOR = "test.death.IBlocks"

    def __init__(self) -> None:
        super().__init__()
        self.entered = trio.Event()

    async def onTransact(self, code, data, ctx):  # noqa: N802
        self.entered.set()
        await trio.sleep_forever()


class _Recipient(DeathRecipient):
    def __init__(self) -> None:
        self.died = trio.Event()
        self.who = None

    def binderDied(self, who):  # noqa: N802
        self.who = who
        self.died.set()


async def _server(rtdir, task_status=trio.TASK_STATUS_IGNORED):
    """A 'process' serving one _Blocks; cancelling its scope is killing it."""
    with trio.CancelScope() as scope:
        async with open_binder_runtime(rtdir, uid=1000, resolver=_allow) as rt:
            obj = _Blocks()
            task_status.started((rt.address, rt.export(obj), obj, scope))
            await trio.sleep_forever()


@pytest.fixture
def rtdir(tmp_path):
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    return d


async def test_an_idle_connection_hears_its_peer_die(rtdir):
    async with trio.open_nursery() as nursery, open_binder_runtime(rtdir, uid=1000, resolver=_allow) as me:
        address, oid, _, kill = await nursery.start(_server, rtdir)
        proxy = me.proxy(address, oid, _Blocks.DESCRIPTOR)
        assert await proxy.pingBinder()  # connected, one call done: now nobody reads
        await trio.sleep(0.05)  # the watcher is parked on the hang-up, nothing else runs
        recipient = _Recipient()
        proxy.linkToDeath(recipient)
        kill.cancel()
        with trio.fail_after(HANG_BOUND_S):
            await recipient.died.wait()
        assert recipient.who is proxy and not proxy.isBinderAlive()
        with pytest.raises(DeadObjectException):
            await proxy.transact(1, None)


async def test_a_link_made_before_the_connection_exists_hears_a_death_during_the_handshake(rtdir):
    async with trio.open_nursery() as nursery, open_binder_runtime(rtdir, uid=1000, resolver=_allow) as me:
        address, oid, _, kill = await nursery.start(_server, rtdir)
        proxy = me.proxy(address, oid, _Blocks.DESCRIPTOR)  # the connection starts now...
        recipient = _Recipient()
        proxy.linkToDeath(recipient)
        kill.cancel()  # ...and its peer is gone before it has said a word
        with trio.fail_after(HANG_BOUND_S):
            await recipient.died.wait()
        assert not proxy.isBinderAlive()


async def test_a_peer_that_dies_right_after_welcoming_is_heard(rtdir):
    # Killed as soon as the handshake is done: before, or while, the watch is armed.
    for _ in range(20):
        async with trio.open_nursery() as nursery, open_binder_runtime(rtdir, uid=1000, resolver=_allow) as me:
            address, oid, _, kill = await nursery.start(_server, rtdir)
            proxy = me.proxy(address, oid, _Blocks.DESCRIPTOR)
            recipient = _Recipient()
            proxy.linkToDeath(recipient)
            conn = me._clients[address]
            await conn.ready.wait()
            kill.cancel()
            with trio.fail_after(HANG_BOUND_S):
                await recipient.died.wait()


async def test_a_caller_reading_when_the_peer_dies_fails_and_the_recipient_fires(rtdir):
    # The socket is in two epolls at once: trio's (the caller waits for its reply)
    # and the watcher's private one.
    async with trio.open_nursery() as nursery, open_binder_runtime(rtdir, uid=1000, resolver=_allow) as me:
        address, oid, obj, kill = await nursery.start(_server, rtdir)
        proxy = me.proxy(address, oid, _Blocks.DESCRIPTOR)
        recipient = _Recipient()
        proxy.linkToDeath(recipient)
        failed = []

        async def call_forever():
            try:
                await proxy.transact(1, None)
            except DeadObjectException as exc:
                failed.append(exc)

        async with trio.open_nursery() as callers:
            callers.start_soon(call_forever)
            await obj.entered.wait()
            assert me._clients[address].reader.holder.kind.value == "caller"  # the caller holds the reading role
            kill.cancel()
            with trio.fail_after(HANG_BOUND_S):
                await recipient.died.wait()
        assert len(failed) == 1


async def test_many_idle_connections_all_hear_their_peers_die(rtdir):
    async with trio.open_nursery() as nursery, open_binder_runtime(rtdir, uid=1000, resolver=_allow) as me:
        servers = [await nursery.start(_server, rtdir) for _ in range(8)]
        # The proxies are kept: a death link lives as long as its proxy (as on Android,
        # where a collected BinderProxy takes its death recipients with it).
        linked = []
        for address, oid, _, _ in servers:
            proxy = me.proxy(address, oid, _Blocks.DESCRIPTOR)
            assert await proxy.pingBinder()
            recipient = _Recipient()
            proxy.linkToDeath(recipient)
            linked.append((proxy, recipient))
        for _, _, _, kill in servers:
            kill.cancel()
        with trio.fail_after(HANG_BOUND_S):
            for proxy, recipient in linked:
                await recipient.died.wait()
                assert recipient.who is proxy


# ---- the transport alone ------------------------------------------------------------------


async def test_wait_hangup_armed_after_the_peer_closed_returns():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stream = _UnixStream(a)
    b.close()  # gone before anyone watched
    with trio.fail_after(HANG_BOUND_S):
        await stream.wait_hangup()
    await stream.aclose()


async def test_wait_hangup_hears_a_close_while_a_reader_waits_on_the_same_socket():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stream = _UnixStream(a)
    got = []

    async def read():
        got.append(await stream.receive_some())

    with trio.fail_after(HANG_BOUND_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            nursery.start_soon(stream.wait_hangup)
            await trio.sleep(0.05)  # both parked: one in trio's epoll, one in the private one
            b.close()
    assert got == [(b"", [])]
    await stream.aclose()


async def test_wait_hangup_returns_when_this_end_closes():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stream = _UnixStream(a)
    try:
        with trio.fail_after(HANG_BOUND_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stream.wait_hangup)
                await trio.sleep(0.05)
                await stream.aclose()
    finally:
        b.close()
