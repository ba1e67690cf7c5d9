"""The binder between real OS processes: a servicemanager process, a system service
process, an app process, and the test process as init (uid 0).

The helper processes are this file run as a script (``python THIS ROLE AIDL_DIR``)
and are started once per module; the tests drive them over the binder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from test_binder_runtime import AIDL, make_echo  # noqa: E402

from framework.binder import (  # noqa: E402
    AID_SHELL,
    AidlRegistry,
    Binder,
    DeadObjectException,
    DeathRecipient,
    SharedMemory,
    TransactionTooLargeException,
    defaultServiceManager,
    interface_class,
    launch_process,
    open_binder_runtime,
)
from framework.binder._wire import Hello, encode_frame  # noqa: E402

pytestmark = pytest.mark.multiprocess


def load(aidl_dir):
    reg = AidlRegistry.load(aidl_dir)
    return (
        reg,
        interface_class(reg.interface("test.binder.IEcho")),
        interface_class(reg.interface("test.binder.ICallback")),
    )


# --------------------------------------------------------------------------------
# Helper processes


async def role_service(aidl_dir: str, name: str) -> None:
    reg, IEcho, ICallback = load(aidl_dir)
    Echo = make_echo(reg, IEcho, ICallback)
    async with open_binder_runtime():
        await defaultServiceManager().addService(name, Echo(), False, 15)
        await trio.sleep_forever()


async def role_app(aidl_dir: str) -> None:
    """An app: hands the service a callback that reports who calls it."""
    reg, IEcho, ICallback = load(aidl_dir)
    async with open_binder_runtime():
        echo = IEcho.asInterface(await defaultServiceManager().waitForService("mp.echo", 10_000))
        my_uid_seen_by_service = await echo.whoami()

        class Cb(ICallback.Stub):
            async def ask(self, x):
                return my_uid_seen_by_service if x == -1 else Binder.getCallingUid() + x

            async def onEvent(self, seq):
                pass

        await echo.registerCallback(Cb())
        await trio.sleep_forever()


async def role_stranger(shell: str) -> None:
    try:
        async with open_binder_runtime(shell=shell == "shell") as rt:
            print(f"uid {rt.uid}", flush=True)
    except Exception as exc:
        print(f"refused {type(exc).__name__}: {exc}", flush=True)


async def role_spoofer() -> None:
    """An app that tries to label processes, its own child and itself, as system."""
    async with open_binder_runtime():
        sm = defaultServiceManager()
        child = await trio.lowlevel.open_process(["sleep", "30"])
        for pid in (child.pid, os.getpid()):
            try:
                await sm.registerProcess(pid, 1000)
                print("registered", flush=True)
            except Exception as exc:
                print(type(exc).__name__, flush=True)
        child.kill()
        await child.wait()
        print(f"uid {await sm.getUidForPid(os.getpid(), None)}", flush=True)


# --------------------------------------------------------------------------------
# The world: started once for the module


class World:
    def __init__(self, rtdir: Path, aidl_dir: Path, sm: subprocess.Popen) -> None:
        self.rtdir = rtdir
        self.aidl_dir = aidl_dir
        self.sm = sm
        self.procs: list = []
        self.reg, self.IEcho, self.ICallback = load(aidl_dir)

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve()), *args]


@contextlib.contextmanager
def servicemanager_world(tmp_path_factory, make_world, start, log_level: str = "WARNING"):
    """A servicemanager process over a new runtime directory, the test AIDL written
    out, this process as init: ``make_world(rtdir, aidl_dir, sm)`` is the world, and
    ``start(world)`` (async) launches the rest into ``world.procs``. On exit every
    process is killed and reaped."""
    rtdir = tmp_path_factory.mktemp("rt")
    rtdir.chmod(0o700)
    aidl_dir = tmp_path_factory.mktemp("aidl")
    for rel, text in AIDL.items():
        (aidl_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (aidl_dir / rel).write_text(textwrap.dedent(text))
    sm = subprocess.Popen(
        [sys.executable, "-m", "framework.binder.servicemanager", "--runtime-dir", str(rtdir), "--log-level", log_level],
        stdout=subprocess.PIPE,
    )
    w = make_world(rtdir, aidl_dir, sm)
    try:
        assert sm.stdout.readline() == b"ready\n"
        trio.run(start, w)
        yield w
    finally:
        for proc in w.procs:
            proc.kill()

        async def reap():
            for proc in w.procs:
                await proc.wait()

        trio.run(reap)
        sm.kill()
        sm.wait()
        sm.stdout.close()


async def start_echo_and_app(w, service_argv: list[str], **kwargs) -> None:
    """Launch the echo service (uid 1000) and the app (uid 10001) that hands it a
    callback; return once the service holds the callback."""
    async with open_binder_runtime(w.rtdir):
        w.procs.append(await launch_process(service_argv, uid=1000, **kwargs))
        w.procs.append(await launch_process(w.argv("app", str(w.aidl_dir)), uid=10001))
        echo = w.IEcho.asInterface(await defaultServiceManager().waitForService("mp.echo", 20_000))
        with trio.fail_after(20):
            while await echo.getCallback() is None:
                await trio.sleep(0.02)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    async def start(w):
        await start_echo_and_app(w, w.argv("service", str(w.aidl_dir), "mp.echo"))

    with servicemanager_world(tmp_path_factory, World, start) as w:
        yield w


@pytest.fixture
async def rt(world):
    async with open_binder_runtime(world.rtdir) as runtime:
        yield runtime


@pytest.fixture
async def echo(world, rt):
    return world.IEcho.asInterface(await defaultServiceManager(rt).checkService("mp.echo"))


async def test_registry_and_calls(world, rt, echo):
    assert rt.uid == 0  # the test process started the servicemanager: it is init
    assert "mp.echo" in await defaultServiceManager(rt).listServices(15)
    Payload = world.reg.parcelable("test.binder.Payload")
    result = await echo.echo(Payload(n=1, blob=b"\x01\x02"))
    assert (result.n, result.tag) == (2, "0102")
    assert await echo.whoami() == 0
    assert await echo.callerPid() == os.getpid()


async def test_runtime_directory_and_sockets_are_private(world, rt, tmp_path):
    import stat

    from framework.binder import SHELL_TOKEN_FILE, UnixNetwork

    assert stat.S_IMODE(world.rtdir.stat().st_mode) == 0o700
    sockets = [p for p in world.rtdir.iterdir() if stat.S_ISSOCK(p.stat().st_mode)]
    assert any(p.name == "servicemanager" for p in sockets) and len(sockets) >= 3
    for path in [*sockets, world.rtdir / SHELL_TOKEN_FILE]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    with pytest.raises(PermissionError, match="0700"):
        UnixNetwork(loose)


async def test_identity_and_callbacks_across_three_processes(world, rt, echo):
    cb = await echo.getCallback()  # the app's object, handed on by the service
    assert await cb.ask(-1) == 10001  # the service saw the app as uid 10001
    assert await cb.ask(5) == 5  # we (uid 0) call the app directly
    assert await echo.callBack(cb, 5) == 1005  # the service (uid 1000) calls the app


async def test_oneway_order(echo):
    before = len(await echo.pushed())
    for seq in range(200):
        await echo.push(seq)
    with trio.fail_after(20):
        while len(got := await echo.pushed()) < before + 200:
            await trio.sleep(0.02)
    assert got[before:] == list(range(200))


async def test_nested_calls(world, echo):
    class Cb(world.ICallback.Stub):
        async def ask(self, x):
            return x * 10 + await echo.whoami()

        async def onEvent(self, seq):
            pass

    with trio.fail_after(10):
        assert await echo.callBack(Cb(), 4) == 40


async def test_death_on_sigkill(world, rt):
    victim = await launch_process(world.argv("service", str(world.aidl_dir), "mp.victim"), uid=1000)
    try:
        sm = defaultServiceManager(rt)
        proxy = await sm.waitForService("mp.victim", 20_000)
        assert await world.IEcho.asInterface(proxy).whoami() == 0
        died = trio.Event()

        class Recipient(DeathRecipient):
            def binderDied(self, who):
                died.set()

        proxy.linkToDeath(Recipient())
        os.kill(victim.pid, signal.SIGKILL)
        killed = trio.current_time()
        with trio.fail_after(5):
            await died.wait()
        latency = trio.current_time() - killed
        # The spec's bar is 100 ms; a loaded CI box gets slack, the number is printed.
        print(f"binderDied {latency * 1000:.1f} ms after SIGKILL")
        assert latency < 1.0
        with pytest.raises(DeadObjectException):
            await world.IEcho.asInterface(proxy).whoami()
        with trio.fail_after(5):
            while await sm.checkService("mp.victim") is not None:
                await trio.sleep(0.01)
    finally:
        victim.kill()
        await victim.wait()


async def test_unregistered_process_is_refused_and_shell_is_uid_2000(world):
    env = {**os.environ, "NPUEMU_RUNTIME_DIR": str(world.rtdir)}
    plain = await trio.run_process(world.argv("stranger", "plain"), capture_stdout=True, env=env)
    assert plain.stdout.decode().startswith("refused SecurityException")
    shell = await trio.run_process(world.argv("stranger", "shell"), capture_stdout=True, env=env)
    assert shell.stdout.decode().strip() == f"uid {AID_SHELL}"


async def test_identity_spoofing_is_refused(world, rt):
    proc = await launch_process(world.argv("spoofer"), uid=10001, stdout=subprocess.PIPE)
    out = b""
    with trio.fail_after(20):
        while chunk := await proc.stdout.receive_some():
            out += chunk
        await proc.wait()
    await proc.stdout.aclose()
    assert out.decode().split("\n")[:3] == ["SecurityException", "SecurityException", "uid 10001"]


async def test_refused_launch_never_runs_the_program(world, rt, tmp_path):
    from framework.binder import IllegalArgumentException

    marker = tmp_path / "ran"
    with pytest.raises(IllegalArgumentException, match="bad uid"):
        await launch_process(["sh", "-c", f"touch {marker}"], uid=-5)
    await trio.sleep(0.2)
    assert not marker.exists()  # held at the gate, then killed: not one line of it ran


HELD_CHILD = """
import trio
from framework.binder import open_binder_runtime

async def main():
    async with open_binder_runtime() as rt:
        print("uid", rt.uid, flush=True)

trio.run(main)
"""


async def test_a_child_held_in_its_runtime_connects_only_once_released(world, rt):
    from framework.binder import spawn_held

    argv = [sys.executable, "-c", HELD_CHILD]
    held = await spawn_held(argv, runtime_dir=world.rtdir, gate_in_runtime=True, stdout=subprocess.PIPE)
    await trio.sleep(0.5)
    assert held.process.poll() is None  # started, and waiting for its launcher
    proc = await held.release(10042)
    out = b""
    with trio.fail_after(20):
        while chunk := await proc.stdout.receive_some():
            out += chunk
        await proc.wait()
    await proc.stdout.aclose()
    assert (out, proc.returncode) == (b"uid 10042\n", 0)

    abandoned = await spawn_held(argv, runtime_dir=world.rtdir, gate_in_runtime=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    abandoned.abandon()
    with trio.fail_after(20):
        err = b""
        while chunk := await abandoned.process.stderr.receive_some():
            err += chunk
        await abandoned.process.wait()
    await abandoned.process.stdout.aclose()
    await abandoned.process.stderr.aclose()
    assert abandoned.process.returncode != 0 and b"did not register this process" in err


async def test_oversize_refused_and_service_unharmed(world, echo):
    Payload = world.reg.parcelable("test.binder.Payload")
    with pytest.raises(TransactionTooLargeException):
        await echo.echo(Payload(n=0, blob=b"\0" * (2 << 20)))
    assert await echo.whoami() == 0


async def test_descriptor_passing(echo):
    from framework.binder import ParcelFileDescriptor

    r, w = os.pipe()
    os.write(w, b"across processes")
    os.close(w)
    with ParcelFileDescriptor(r) as pfd:
        assert await echo.readAll(pfd) == b"across processes"
    size = 4 << 20
    with SharedMemory.create("tensor", size) as mem:
        view = mem.map(writable=True)
        view[:size] = b"\x03" * size
        del view
        assert await echo.checksum(mem) == 3 * size


async def test_garbage_frames_dropped_while_others_served(echo):
    address = echo.asBinder()._address
    rtdir = echo.asBinder()._runtime.network.runtime_dir
    for blob in (b"\xff\xff\xff\xffjunk", b"\x00\x00\x00\x04\xc1\xc1\xc1\xc1", os.urandom(100)):
        for hello_first in (False, True):
            sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            await sock.connect(str(rtdir / address))
            if hello_first:
                await sock.send(b"".join(encode_frame(Hello())))
                header = await sock.recv(4)
                (n,) = struct.unpack(">I", header)
                await sock.recv(n)  # Welcome
            await sock.send(blob)
            with trio.fail_after(5):
                while await sock.recv(4096):
                    pass  # the service hangs up on garbage
            sock.close()
            assert await echo.whoami() == 0


def main() -> None:
    role, *args = sys.argv[1:]
    fn = {"service": role_service, "app": role_app, "stranger": role_stranger, "spoofer": role_spoofer}[role]
    trio.run(fn, *args)


if __name__ == "__main__":
    main()
