"""Whole binder stacks inside one trio run: several "processes" (each its own
runtime with its own fake pid) on a MemoryNetwork, under the autojump mock clock."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import textwrap
from pathlib import Path

import pytest
import trio
import trio.testing

from framework import binder
from framework.binder import (
    AidlRegistry,
    Binder,
    BadParcelableException,
    DeadObjectException,
    DeathRecipient,
    IllegalArgumentException,
    IllegalStateException,
    MemoryNetwork,
    ParcelFileDescriptor,
    SecurityException,
    ServiceSpecificException,
    SharedMemory,
    TransactionFailedException,
    TransactionTooLargeException,
    UnknownTransactionException,
    UnsupportedOperationException,
    defaultServiceManager,
    interface_class,
    open_binder_runtime,
    serve_servicemanager,
)
from framework.binder._wire import Hello, encode_frame

AIDL = {
    "test/binder/Payload.aidl": """
        package test.binder;
        parcelable Payload { int n; byte[] blob; }
    """,
    "test/binder/Result.aidl": """
        package test.binder;
        parcelable Result { int n; String tag; }
    """,
    "test/binder/ICallback.aidl": """
        package test.binder;
        interface ICallback {
            oneway void onEvent(int seq);
            int ask(int x);
        }
    """,
    "test/binder/IEcho.aidl": """
        package test.binder;
        import test.binder.ICallback;
        import test.binder.Payload;
        import test.binder.Result;
        interface IEcho {
            const int MAGIC = 42;
            Result echo(in Payload p);
            int whoami();
            int callerPid();
            oneway void push(int seq);
            int[] pushed();
            int callBack(ICallback cb, int x);
            void registerCallback(ICallback cb);
            @nullable ICallback getCallback();
            void fire(int seq);
            void fail(int kind);
            void sleepMs(int ms);
            @nullable IBinder passThrough(@nullable IBinder b);
            long checksum(in SharedMemory mem);
            void divide(int a, int b, out int[] q);
            byte[] big(int n);
            void notImplemented();
            byte[] readAll(in ParcelFileDescriptor pfd);
            ParcelFileDescriptor dupLater(in ParcelFileDescriptor pfd, int ms);
        }
    """,
}

FAIL_KINDS = {
    1: (IllegalArgumentException, "bad argument"),
    2: (IllegalStateException, "bad state"),
    3: (SecurityException, "not allowed"),
    4: (UnsupportedOperationException, "not here"),
    5: (BadParcelableException, "broken parcel"),
}


@pytest.fixture(scope="module")
def aidl(tmp_path_factory):
    root = tmp_path_factory.mktemp("aidl")
    for rel, text in AIDL.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    reg = AidlRegistry.load(root)
    return reg


@pytest.fixture
def IEcho(aidl):
    return interface_class(aidl.interface("test.binder.IEcho"))


@pytest.fixture
def ICallback(aidl):
    return interface_class(aidl.interface("test.binder.ICallback"))


def make_echo(aidl, IEcho, ICallback):
    Result = aidl.parcelable("test.binder.Result")

    class Echo(IEcho.Stub):
        def __init__(self):
            super().__init__()
            self.log: list[int] = []
            self.active = 0
            self.max_active = 0
            self.callback = None

        async def echo(self, p):
            return Result(n=p.n + 1, tag=bytes(p.blob).hex())

        async def whoami(self):
            return Binder.getCallingUid()

        async def callerPid(self):
            return Binder.getCallingPid()

        async def push(self, seq):
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            await trio.sleep((seq * 7 % 5) / 1000)  # uneven work: a race would reorder
            self.log.append(seq)
            self.active -= 1

        async def pushed(self):
            return list(self.log)

        async def callBack(self, cb, x):
            return await cb.ask(x)

        async def registerCallback(self, cb):
            self.callback = cb

        async def getCallback(self):
            return self.callback

        async def fire(self, seq):
            await self.callback.onEvent(seq)

        async def fail(self, kind):
            if kind in FAIL_KINDS:
                cls, msg = FAIL_KINDS[kind]
                raise cls(msg)
            if kind == 6:
                raise ServiceSpecificException(17, "vendor error")
            raise RuntimeError("handler bug")

        async def sleepMs(self, ms):
            await trio.sleep(ms / 1000)

        async def passThrough(self, b):
            return b

        async def checksum(self, mem):
            with mem:
                view = mem.map(writable=False)
                try:
                    return sum(view[:])
                finally:
                    view.release() if isinstance(view, memoryview) else view.close()

        async def divide(self, a, b):  # the out argument q comes back in the reply
            if b == 0:
                raise IllegalArgumentException("divide by zero")
            return None, [a // b, a % b]

        async def big(self, n):
            return b"\x01" * n

        async def dupLater(self, pfd, ms):
            with pfd:
                await trio.sleep(ms / 1000)
                return pfd.dup()

        async def readAll(self, pfd):
            with pfd:
                chunks = []
                while chunk := os.read(pfd.fileno(), 65536):
                    chunks.append(chunk)
                return b"".join(chunks)

    return Echo


class Stack:
    """A servicemanager, an 'init' process, and helpers to start fake processes."""

    def __init__(self, net, nursery, init):
        self.net = net
        self.nursery = nursery
        self.init = init

    async def spawn(self, uid: int) -> int:
        """A fake pid, registered as init's child under ``uid`` (launch_process's job)."""
        pid = self.net.spawn(self.net.init_pid)
        await defaultServiceManager(self.init).registerProcess(pid, uid)
        return pid

    async def start(self, uid: int, body=None):
        """Start a process that opens a runtime, runs ``body(rt)`` and then serves.
        Returns (runtime, cancel scope): cancelling the scope is killing the process."""
        pid = await self.spawn(uid)

        async def proc(task_status):
            with trio.CancelScope() as scope:
                async with open_binder_runtime(network=self.net, pid=pid) as rt:
                    if body is not None:
                        await body(rt)
                    task_status.started((rt, scope))
                    await trio.sleep_forever()

        return await self.nursery.start(proc)


@pytest.fixture
async def stack(autojump_clock):
    net = MemoryNetwork()
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(serve_servicemanager, network=net))
        async with open_binder_runtime(network=net, pid=net.init_pid) as init:
            yield Stack(net, nursery, init)
        nursery.cancel_scope.cancel()


@pytest.fixture
async def echo_world(stack, aidl, IEcho, ICallback):
    """A 'system' process serving an Echo as "echo", and an app process (uid 10001)."""
    Echo = make_echo(aidl, IEcho, ICallback)
    impl = Echo()

    async def serve(rt):
        await defaultServiceManager().addService("echo", impl, False, 15)

    server_rt, server_scope = await stack.start(1000, serve)
    app_rt, app_scope = await stack.start(10001)
    echo = IEcho.asInterface(await defaultServiceManager(app_rt).checkService("echo"))
    return dict(impl=impl, echo=echo, server=server_rt, server_scope=server_scope, app=app_rt, app_scope=app_scope)


async def test_two_way_call_with_parcelables(autojump_clock, echo_world, aidl, IEcho):
    Payload = aidl.parcelable("test.binder.Payload")
    result = await echo_world["echo"].echo(Payload(n=41, blob=b"\x00\xff"))
    assert (result.n, result.tag) == (42, "00ff")
    assert IEcho.MAGIC == 42 and IEcho.DESCRIPTOR == "test.binder.IEcho"


async def test_calling_identity_is_the_callers(autojump_clock, echo_world, stack):
    echo, app = echo_world["echo"], echo_world["app"]
    assert await echo.whoami() == 10001
    assert await echo.callerPid() == app.pid
    # Outside a handler, a process sees itself; the init process is root.
    assert Binder.getCallingUid() == 0
    assert app.uid == 10001 and echo_world["server"].uid == 1000


async def test_local_call_keeps_own_identity(autojump_clock, stack, aidl, IEcho, ICallback):
    impl = make_echo(aidl, IEcho, ICallback)()
    # A binder that comes back to its own process is the object itself.
    stack.init.export(impl)
    assert IEcho.asInterface(impl) is impl
    assert await impl.whoami() == 0


async def test_oneway_calls_arrive_in_order_one_at_a_time(autojump_clock, echo_world):
    echo, impl = echo_world["echo"], echo_world["impl"]
    for seq in range(40):
        assert await echo.push(seq) is None
    # oneway returns at once, long before the 40 handlers (~80 ms of work) are done.
    assert len(impl.log) < 40
    while len(await echo.pushed()) < 40:
        await trio.sleep(0.01)
    assert impl.log == list(range(40))
    assert impl.max_active == 1


async def test_many_concurrent_calls_on_one_connection(autojump_clock, echo_world):
    echo = echo_world["echo"]
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(echo.sleepMs, 100)
    # Each handler is its own task: 20 calls of 100 ms overlap.
    assert trio.current_time() - start < 0.2


async def test_nested_calls_back_into_the_caller(autojump_clock, echo_world, ICallback):
    echo = echo_world["echo"]
    seen = []

    class Cb(ICallback.Stub):
        async def ask(self, x):
            # Called by the server while our call to it is still waiting; and we
            # call the server again from inside: three levels, no deadlock.
            seen.append(Binder.getCallingUid())
            return x * 10 + await echo.whoami()

        async def onEvent(self, seq):
            pass

    with trio.fail_after(5):
        assert await echo.callBack(Cb(), 4) == 40 + 10001
    assert seen == [1000]


async def test_callback_handed_to_a_third_process(autojump_clock, echo_world, stack, IEcho, ICallback):
    events = []

    class Cb(ICallback.Stub):
        async def ask(self, x):
            return Binder.getCallingUid()

        async def onEvent(self, seq):
            events.append((seq, Binder.getCallingUid()))

    cb = Cb()
    await echo_world["echo"].registerCallback(cb)

    # A second app gets the first app's callback through the server and calls it directly.
    other, _ = await stack.start(10002)
    echo2 = IEcho.asInterface(await defaultServiceManager(other).checkService("echo"))
    remote_cb = await echo2.getCallback()
    assert isinstance(remote_cb, ICallback.Proxy)
    assert await remote_cb.ask(0) == 10002
    await echo2.fire(7)
    with trio.fail_after(1):
        while not events:
            await trio.sleep(0.001)
    assert events == [(7, 1000)]
    # Back in its own process the reference is the object itself.
    assert await echo_world["echo"].getCallback() is cb


async def test_binder_round_trips_to_the_same_proxy(autojump_clock, echo_world, stack):
    echo, server = echo_world["echo"], echo_world["server"]
    token = Binder()
    back = await echo.passThrough(token)
    assert back is token
    assert await echo.passThrough(None) is None


async def test_statuses_cross_as_exceptions(autojump_clock, echo_world):
    echo = echo_world["echo"]
    for kind, (cls, msg) in FAIL_KINDS.items():
        with pytest.raises(cls, match=msg):
            await echo.fail(kind)
    with pytest.raises(ServiceSpecificException) as info:
        await echo.fail(6)
    assert info.value.error_code == 17 and info.value.message == "vendor error"
    with pytest.raises(IllegalArgumentException, match="divide by zero"):
        await echo.divide(1, 0)
    with pytest.raises(UnsupportedOperationException, match="notImplemented"):
        await echo.notImplemented()


async def test_unexpected_handler_error_is_logged_and_the_server_goes_on(autojump_clock, echo_world, caplog):
    echo = echo_world["echo"]
    with caplog.at_level(logging.ERROR, logger="binder"):
        with pytest.raises(TransactionFailedException, match="RuntimeError: handler bug"):
            await echo.fail(99)
    assert any("handler for code" in r.message for r in caplog.records)
    assert await echo.whoami() == 10001


async def test_out_arguments(autojump_clock, echo_world, IEcho):
    # The proxy takes the in arguments and returns (result, *outs), result None for void.
    assert list(inspect.signature(IEcho.Proxy.divide).parameters) == ["self", "a", "b"]
    assert await echo_world["echo"].divide(17, 5) == (None, [3, 2])


async def test_unknown_transaction_code(autojump_clock, echo_world):
    with pytest.raises(UnknownTransactionException):
        reply = await echo_world["echo"].asBinder().transact(999, [])
        binder._runtime._raise_for_reply(reply)


async def test_bad_parcel_is_an_error_reply_and_the_connection_stays(autojump_clock, echo_world, IEcho):
    echo = echo_world["echo"]
    code = next(m.code for m in IEcho.definition.methods if m.name == "echo")
    reply = await echo.asBinder().transact(code, [["not", "a", "payload"]])
    with pytest.raises(BadParcelableException, match="IEcho.echo: argument p"):
        binder._runtime._raise_for_reply(reply)
    assert await echo.whoami() == 10001


async def test_oversize_transaction_refused_before_sending(autojump_clock, echo_world, aidl):
    Payload = aidl.parcelable("test.binder.Payload")
    echo = echo_world["echo"]
    with pytest.raises(TransactionTooLargeException):
        await echo.echo(Payload(n=1, blob=b"\0" * (binder.MAX_TRANSACTION_SIZE + 10)))
    with pytest.raises(TransactionFailedException, match="reply refused"):
        await echo.big(binder.MAX_TRANSACTION_SIZE + 10)
    assert len(await echo.big(1000)) == 1000


async def test_shared_memory_crosses_as_a_descriptor(autojump_clock, echo_world):
    echo = echo_world["echo"]
    size = 3 * 1024 * 1024  # far over the transaction limit: only the fd travels
    with SharedMemory.create("tensor", size) as mem:
        view = mem.map(writable=True)
        view[:size] = bytes(range(256)) * (size // 256)
        del view
        expected = sum(range(256)) * (size // 256)
        assert await echo.checksum(mem) == expected
        assert await echo.checksum(mem) == expected  # the caller's fd is still its own


async def test_file_descriptor_crosses_and_stays_the_callers(autojump_clock, echo_world):
    from framework.binder import ParcelFileDescriptor

    r, w = os.pipe()
    os.write(w, b"weights")
    os.close(w)
    with ParcelFileDescriptor(r) as pfd:
        assert await echo_world["echo"].readAll(pfd) == b"weights"
        os.fstat(pfd.fileno())  # still open here: the receiver got its own copy


async def test_death_recipient_fires_when_owner_dies(autojump_clock, echo_world):
    echo, scope = echo_world["echo"], echo_world["server_scope"]
    died = []

    class Recipient(DeathRecipient):
        def binderDied(self, who):
            died.append((who, trio.current_time()))

    unlinked = Recipient()
    echo.asBinder().linkToDeath(Recipient())
    echo.asBinder().linkToDeath(unlinked)
    assert echo.asBinder().unlinkToDeath(unlinked)

    pending = []

    async def call_that_will_never_return():
        try:
            await echo.sleepMs(60_000)
        except DeadObjectException as exc:
            pending.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call_that_will_never_return)
        await trio.sleep(0.5)
        killed_at = trio.current_time()
        scope.cancel()  # the server "process" ends
    assert len(died) == 1 and died[0][0] is echo.asBinder()
    assert died[0][1] - killed_at < 0.1
    assert len(pending) == 1
    assert not echo.asBinder().isBinderAlive()
    with pytest.raises(DeadObjectException):
        await echo.whoami()
    with pytest.raises(DeadObjectException):
        echo.asBinder().linkToDeath(Recipient())


async def test_service_of_a_dead_process_leaves_the_registry(autojump_clock, echo_world, stack):
    sm = defaultServiceManager(stack.init)
    assert "echo" in await sm.listServices(15)
    echo_world["server_scope"].cancel()
    await trio.sleep(0.01)
    assert await sm.checkService("echo") is None
    assert "echo" not in await sm.listServices(15)


async def test_wait_for_service_blocks_until_registered(autojump_clock, stack, aidl, IEcho, ICallback):
    sm = defaultServiceManager(stack.init)
    assert await sm.waitForService("late", 1000) is None  # times out (virtual second)
    Echo = make_echo(aidl, IEcho, ICallback)
    got = []

    async def waiter():
        got.append(await sm.waitForService("late", 60_000))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(5)
        assert got == []

        async def register(rt):
            await defaultServiceManager().addService("late", Echo(), False, 15)

        await stack.start(1000, register)
    assert IEcho.asInterface(got[0]) is not None
    assert await IEcho.asInterface(got[0]).whoami() == 0


async def test_registration_notifications(autojump_clock, stack, aidl, IEcho, ICallback):
    from framework.binder.aidl.android.os import IServiceCallback

    heard = []

    class Listener(IServiceCallback.Stub):
        async def onRegistration(self, name, b):
            heard.append(name)

    Echo = make_echo(aidl, IEcho, ICallback)
    sm = defaultServiceManager(stack.init)
    listener = Listener()
    await sm.registerForNotifications("svc", listener)

    async def register(rt):
        await defaultServiceManager().addService("svc", Echo(), False, 15)

    await stack.start(1000, register)
    await trio.sleep(0.01)
    assert heard == ["svc"]
    await sm.unregisterForNotifications("svc", listener)
    with pytest.raises(IllegalArgumentException):
        await sm.unregisterForNotifications("svc", listener)


async def test_apps_may_not_add_services(autojump_clock, stack, aidl, IEcho, ICallback):
    Echo = make_echo(aidl, IEcho, ICallback)
    app, _ = await stack.start(10001)
    with pytest.raises(SecurityException):
        await defaultServiceManager(app).addService("evil", Echo(), False, 15)
    with pytest.raises(IllegalArgumentException):
        await defaultServiceManager(stack.init).addService("bad name!", Echo(), False, 15)


async def test_service_name_belongs_to_its_uid(autojump_clock, stack, aidl, IEcho, ICallback):
    Echo = make_echo(aidl, IEcho, ICallback)

    async def register(rt):
        await defaultServiceManager().addService("owned", Echo(), False, 15)

    await stack.start(1000, register)
    other, _ = await stack.start(1001)
    with pytest.raises(SecurityException, match="registered by uid 1000"):
        await defaultServiceManager(other).addService("owned", Echo(), False, 15)


async def test_unregistered_process_is_refused(autojump_clock, stack):
    with pytest.raises(SecurityException, match="not a known process"):
        async with open_binder_runtime(network=stack.net, pid=stack.net.spawn()):
            pass  # pragma: no cover


async def test_shell_token_gives_the_shell_uid_only(autojump_clock, stack):
    async with open_binder_runtime(network=stack.net, pid=stack.net.spawn(), shell=True) as sh:
        assert sh.uid == binder.AID_SHELL
        sm = defaultServiceManager(sh)
        with pytest.raises(SecurityException):
            await sm.registerProcess(stack.net.spawn(sh.pid), 1000)
        with pytest.raises(SecurityException):
            await sm.addService("shellsvc", Binder(), False, 15)


async def test_forged_shell_token_is_refused(autojump_clock, stack):
    pid = stack.net.spawn()
    stream = await stack.net.connect(binder.SERVICEMANAGER_ADDRESS, pid)
    await stream.send_frame(encode_frame(Hello(token="0" * 64)))
    data, _ = await stream.receive_some()
    assert b"not a known process" in data
    await stream.aclose()


async def test_register_process_rules(autojump_clock, stack):
    sm = defaultServiceManager(stack.init)
    system, _ = await stack.start(1000)
    app, _ = await stack.start(10001)
    # Apps may not launch anything.
    with pytest.raises(SecurityException, match="may not register"):
        await defaultServiceManager(app).registerProcess(stack.net.spawn(app.pid), 10001)
    # system may launch its own children, but not as root, and not someone else's child.
    child = stack.net.spawn(system.pid)
    with pytest.raises(SecurityException, match="only root"):
        await defaultServiceManager(system).registerProcess(child, 0)
    with pytest.raises(SecurityException, match="not a child"):
        await defaultServiceManager(system).registerProcess(stack.net.spawn(stack.net.init_pid), 10005)
    await defaultServiceManager(system).registerProcess(child, 10005)
    # No pid can be registered twice: nobody re-labels a running process.
    with pytest.raises(IllegalStateException, match="already registered"):
        await sm.registerProcess(child, 1000)
    with pytest.raises(IllegalArgumentException, match="no process"):
        await sm.registerProcess(999_999, 10010)
    assert await sm.getUidForPid(child, None) == 10005
    # When the process exits its record goes, so a reused pid inherits nothing.
    stack.net.exit(child)
    await trio.sleep(0.01)
    assert await sm.getUidForPid(child, None) == -1


async def test_garbage_from_one_peer_drops_only_that_peer(autojump_clock, echo_world, stack, caplog):
    echo, server = echo_world["echo"], echo_world["server"]
    # Another launched process that speaks garbage after a valid handshake.
    pid = await stack.spawn(10003)
    garbage = [b"\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1", b"\xff\xff\xff\xff", os.urandom(64)]
    with caplog.at_level(logging.WARNING, logger="binder"):
        for blob in garbage:
            stream = await stack.net.connect(server.address, pid)
            await stream.send_frame(encode_frame(Hello()))
            await stream.receive_some()  # Welcome
            await stream.send_frame([blob])
            with trio.fail_after(1):
                while True:
                    data, _ = await stream.receive_some()
                    if not data:
                        break  # the server hung up on it
            await stream.aclose()
            assert await echo.whoami() == 10001  # everyone else is still served
    assert sum("dropping connection" in r.message for r in caplog.records) == len(garbage)


async def test_runtime_without_a_directory_is_a_clear_error(autojump_clock, monkeypatch):
    monkeypatch.delenv(binder.RUNTIME_DIR_ENV, raising=False)
    with pytest.raises(ValueError, match="runtime directory"):
        async with open_binder_runtime():
            pass  # pragma: no cover


async def test_identity_outside_any_runtime_is_a_clear_error(autojump_clock):
    with pytest.raises(IllegalStateException):
        Binder.getCallingUid()


async def test_public_names_are_exported_exactly_once(autojump_clock):
    import framework.binder as pkg

    public = {n: v for n, v in vars(pkg).items() if not n.startswith("_") and not isinstance(v, type(pkg))}
    # Every public name is defined in one private module and re-exported here once.
    source = Path(pkg.__file__).read_text()
    for name in public:
        assert source.count(f" as {name}\n") == 1, name
    assert {"AidlRegistry", "AidlSyntaxError", "SharedMemory", "ParcelFileDescriptor", "open_binder_runtime"} <= set(public)


# Who reads and who serves (leader/follower on both ends of a connection).


async def test_a_cancelled_reading_caller_hands_the_replies_on(autojump_clock, echo_world):
    # The first call takes the reading role; when it is cancelled, the call still
    # waiting behind it must get its reply all the same.
    echo = echo_world["echo"]
    done = []

    async def long_call(task_status):
        with trio.move_on_after(0.05) as scope:
            task_status.started()
            await echo.sleepMs(1000)
        done.append(("long", scope.cancelled_caught))

    async def short_call():
        await echo.sleepMs(100)
        done.append(("short", trio.current_time()))

    start = trio.current_time()
    with trio.fail_after(5):  # a role lost with its caller would hang the other call
        async with trio.open_nursery() as nursery:
            await nursery.start(long_call)
            nursery.start_soon(short_call)
    assert done[0] == ("long", True)
    assert done[1][0] == "short" and done[1][1] - start < 0.2
    assert await echo.whoami() == 10001  # and the connection reads on


async def test_a_cancelled_reading_caller_leaks_nothing_of_its_late_reply(autojump_clock, echo_world):
    # A lone call reads its own reply; cancelled while it waits, it must leave no trace:
    # its reply, read later by whoever reads next, is nobody's, and the descriptors it
    # carries are closed (not kept for ever by a forgotten waiter).
    echo = echo_world["echo"]
    r, w = os.pipe()
    try:
        with trio.move_on_after(0.05) as scope:
            await echo.dupLater(ParcelFileDescriptor.fromFd(w), 100)
        assert scope.cancelled_caught
        await trio.sleep(0.2)  # the reply, with a copy of the pipe's write end, is on its way
        assert await echo.whoami() == 10001  # this call reads it first
        os.close(w)
        w = -1
        os.set_blocking(r, False)
        assert os.read(r, 1) == b"", "a copy of the write end is still open somewhere"
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


async def test_a_blocked_handler_does_not_hold_up_the_next_call(autojump_clock, echo_world):
    # sleepMs blocks in the task that read it, which hands reading on first: the
    # next call is read and served at once, with the caller's identity.
    echo = echo_world["echo"]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(echo.sleepMs, 1000)
        await trio.sleep(0.01)
        start = trio.current_time()
        with trio.fail_after(5):  # nobody reading would hang it
            assert await echo.whoami() == 10001
            assert await echo.callerPid() == echo_world["app"].pid
        assert trio.current_time() - start < 0.01
        nursery.cancel_scope.cancel()


async def test_run_inline_runs_a_coroutine_to_its_end_in_the_calling_task(autojump_clock):
    from framework.binder._runtime import _run_inline

    blocked = []
    task = trio.lowlevel.current_task()

    async def quick():
        assert trio.lowlevel.current_task() is task

    assert await _run_inline(quick(), lambda: blocked.append("quick")) is False
    assert blocked == []  # never waited: no hand-off

    async def slow():
        await trio.sleep(0.1)
        raise ValueError("late")

    with pytest.raises(ValueError, match="late"):
        await _run_inline(slow(), lambda: blocked.append("slow"))
    assert blocked == ["slow"]  # told once, before it parked

    cleaned = []

    async def forever():
        try:
            await trio.sleep_forever()
        finally:
            cleaned.append(True)

    with trio.move_on_after(0.1) as scope:
        await _run_inline(forever(), lambda: None)
    assert scope.cancelled_caught and cleaned == [True]  # cancellation reached it
