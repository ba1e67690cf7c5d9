"""The binder attacked with real processes: identity, references, and bounds on peers.

A servicemanager process, a service process (uid 1000, the test AIDL's ``IEcho``), an
app process (uid 10001) that hands the service a callback, and the test process as
init (uid 0), the service and the app being ``test_binder_multiprocess``'s. Attackers
are strangers the emulator did not launch (this file run as a script, ``python THIS
ROLE ...``), or the test process itself where the attack needs a peer the
servicemanager knows (a raw socket that has done the handshake).

Owner checks (a reference that reached the wrong uid) are logic, tested in one process
over the in-memory stack (``open_stack``): another uid's ``IPreparedModel.release()``,
and a fake ``onWorkEnded`` or heat report sent to system_server's callbacks.

Each attack is refused or bounded: the service's memory (VmRSS from ``/proc``) grows
by less than a stated cap, and a bystander's call (``whoami``, from the test process
over its own connection) keeps answering within a stated bound of its baseline. The
bounds are generous because the machine running the tests is shared and loaded; what
they catch is the unbounded growth and the multi-second stalls the attacks caused
before the binder bounded its peers.
"""

from __future__ import annotations

import array
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from test_binder_multiprocess import (  # noqa: E402,F401 (rt and echo are fixtures)
    echo,
    load,
    rt,
    servicemanager_world,
    start_echo_and_app,
)

from framework.binder import (  # noqa: E402
    DeadObjectException,
    SecurityException,
    defaultServiceManager,
)
from framework.binder._runtime import MAX_CONNECTIONS_PER_PEER, MAX_PENDING_CALLS  # noqa: E402
from framework.emulator import open_stack  # noqa: E402
from interfaces.android.hardware.neuralnetworks import (  # noqa: E402
    ExecutionPreference,
    IBurst,
    IDevice,
    IPreparedModel,
    Priority,
)
from interfaces.android.hardware.npu import EndReason, ISchedulingCallback, WorkInfo  # noqa: E402
from interfaces.android.hardware.thermal import ThrottlingSeverity  # noqa: E402
from interfaces.npuemu.hal import IHalListener  # noqa: E402
from npuhal import open_driver  # noqa: E402
from test_hal_inprocess import Execution, aidl_model, fc_model  # noqa: E402
from framework.binder._wire import (  # noqa: E402
    MAX_FRAME_SIZE,
    Hello,
    Refused,
    Transaction,
    Welcome,
    decode_frames,
    encode_frame,
)

# Growth of the service's RSS an attack may cause, over its baseline.
RSS_CAP = 48 << 20
# A bystander's call during an attack: at most this many times its baseline median,
# or this many seconds, whichever is larger (the machine is loaded).
LATENCY_FACTOR = 20
LATENCY_FLOOR_S = 1.0


# --------------------------------------------------------------------------------
# Helper processes


def _connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    return sock


def _send_until_refused(sock: socket.socket, data: bytes) -> int:
    """Send ``data`` until the peer hangs up; how many bytes it took."""
    sock.settimeout(10)
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent : sent + 65536])
    except (BrokenPipeError, ConnectionResetError):
        pass
    except TimeoutError:
        return -sent  # the peer stopped reading but kept the connection: not refused
    return sent


def role_bomb(path: str) -> None:
    """A stranger's frame bomb: twenty 1 MiB frames of empty msgpack arrays, each on
    its own connection, sent without a Hello."""
    n = MAX_FRAME_SIZE - 5 - 16
    body = b"\xdd" + struct.pack(">I", n) + b"\x90" * n
    frame = struct.pack(">I", len(body)) + body
    taken = [_send_until_refused(_connect(path), frame) for _ in range(20)]
    print(" ".join(map(str, taken)), flush=True)


def role_burst(path: str, count: str) -> None:
    """A stranger opens ``count`` connections at once, says nothing, and holds them."""
    socks = []
    for _ in range(int(count)):
        try:
            socks.append(_connect(path))
        except OSError:
            break
    closed = 0
    time.sleep(0.5)
    for sock in socks:
        sock.setblocking(False)
        try:
            closed += sock.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    print(f"{len(socks)} {closed}", flush=True)
    sys.stdin.read()  # hold them until the test is done measuring


# --------------------------------------------------------------------------------
# The world


class World:
    def __init__(self, rtdir: Path, aidl_dir: Path, sm: subprocess.Popen) -> None:
        self.rtdir = rtdir
        self.aidl_dir = aidl_dir
        self.sm = sm
        self.procs: list = []
        self.service_pid = 0
        self.reg, self.IEcho, self.ICallback = load(aidl_dir)

    def argv(self, role: str, *args: str) -> list[str]:
        # The service and the app are test_binder_multiprocess's, run from their light
        # script (this one imports the whole stack for its in-process tests).
        script = HERE / "test_binder_multiprocess.py" if role in ("service", "app") else Path(__file__).resolve()
        return [sys.executable, str(script), role, *args]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    async def start(w):
        await start_echo_and_app(w, w.argv("service", str(w.aidl_dir), "mp.echo"), stderr=subprocess.DEVNULL)
        w.service_pid = w.procs[0].pid

    with servicemanager_world(tmp_path_factory, World, start, log_level="ERROR") as w:
        yield w


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def latencies(echo, n: int = 20) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        assert await echo.whoami() == 0
        out.append(time.perf_counter() - start)
        await trio.sleep(0.005)
    return out


class Bystander:
    """Calls the service over and over while an attack runs; records each call's time."""

    def __init__(self, echo) -> None:
        self.echo = echo
        self.times: list[float] = []
        self.baseline = 0.0

    async def measure_baseline(self) -> None:
        self.baseline = statistics.median(await latencies(self.echo))

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            start = time.perf_counter()
            assert await self.echo.whoami() == 0
            self.times.append(time.perf_counter() - start)
            await trio.sleep(0.01)

    def check(self) -> None:
        assert self.times, "the bystander was never served during the attack"
        bound = max(LATENCY_FLOOR_S, LATENCY_FACTOR * self.baseline)
        assert max(self.times) < bound, (max(self.times), self.baseline, bound)


async def attacked(world, echo, attack) -> tuple[int, Bystander]:
    """Run ``attack()`` with a bystander calling; the service's RSS growth."""
    bystander = Bystander(echo)
    await bystander.measure_baseline()
    before = rss(world.service_pid)
    async with trio.open_nursery() as nursery:
        await nursery.start(bystander.run)
        await attack()
        await trio.sleep(0.2)
        nursery.cancel_scope.cancel()
    grown = rss(world.service_pid) - before
    bystander.check()
    assert await echo.whoami() == 0
    return grown, bystander


class RawPeer:
    """A raw connection from the test process (init: a peer the servicemanager knows)."""

    def __init__(self, path: Path) -> None:
        self.sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.path = path

    async def handshake(self) -> None:
        await self.sock.connect(str(self.path))
        await self.sock.send(b"".join(encode_frame(Hello())))
        (event,) = decode_frames(await self.recv_frame())
        assert type(event) is Welcome, event

    async def recv_frame(self) -> bytes:
        header = await self.recv_exactly(4)
        (n,) = struct.unpack(">I", header)
        return header + await self.recv_exactly(n)

    async def recv_exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = await self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    async def hung_up(self, timeout: float = 10) -> bool:
        with trio.move_on_after(timeout):
            try:
                while await self.sock.recv(65536):
                    pass
            except OSError:
                pass
            return True
        return False

    def close(self) -> None:
        self.sock.close()


def service_path(world, echo) -> Path:
    return world.rtdir / echo.asBinder()._address


# --------------------------------------------------------------------------------
# Identity


@pytest.mark.multiprocess
@pytest.mark.skipif(os.geteuid() != 0, reason="forcing a pid's reuse writes /proc/sys/kernel/ns_last_pid (root)")
async def test_a_dead_connecters_reused_pid_gets_nothing(world, echo, rt):
    """A stranger connects, hands its socket to an accomplice, and exits; its pid is
    then reused by a process launched as system (uid 1000), before the accomplice
    says Hello on the stranger's connection. The uid of whatever has the pid when
    the Hello comes is system's; the service judges the process that connected,
    which is dead, and refuses."""
    path = str(service_path(world, echo))
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child = os.fork()
    if child == 0:  # the stranger: connect, hand the socket over, exit
        try:
            sock = _connect(path)
            there.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [sock.fileno()]))])
        finally:
            os._exit(0)
    there.close()
    _, anc, _, _ = here.recvmsg(1, socket.CMSG_SPACE(4))
    conn = socket.socket(fileno=array.array("i", anc[0][2])[0])
    here.close()
    os.waitpid(child, 0)  # the pid is free now
    reused = None
    try:
        for _ in range(500):  # others fork too: try until the pid comes round to us
            Path("/proc/sys/kernel/ns_last_pid").write_text(str(child - 1))
            pid = os.fork()
            if pid == 0:
                os.execv("/bin/sleep", ["sleep", "60"])
            if pid == child:
                reused = pid
                break
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        if reused is None:
            pytest.skip(f"pid {child} was not reused in 500 tries (other processes forked first)")
        # As a launcher does: this process (init) vouches that its child runs as system.
        sm = defaultServiceManager(rt)
        await sm.registerProcess(reused, 1000)
        assert await sm.getUidForPid(child, None) == 1000  # the pid is system's now
        conn.sendall(b"".join(encode_frame(Hello())))
        conn.settimeout(10)
        reply = conn.recv(4096)
        events = decode_frames(reply) if reply else []
        assert events and type(events[0]) is Refused, events
    finally:
        conn.close()
        if reused is not None:
            os.kill(reused, 9)
            os.waitpid(reused, 0)
    assert await echo.whoami() == 0


# --------------------------------------------------------------------------------
# References


@pytest.mark.multiprocess
async def test_an_object_is_reached_only_through_a_reference_it_was_handed(world, echo, rt):
    """The app's callback lives at a socket anyone can list. Enumerating object ids
    there finds nothing; the reference the service hands over reaches it."""
    handed = await echo.getCallback()
    address = handed.asBinder()._address
    assert address in os.listdir(world.rtdir)  # no secret: the id is
    for guess in [*range(0, 512), *(1 << b for b in range(9, 63))]:
        forged = rt.proxy(address, guess, "test.binder.ICallback")
        with pytest.raises(DeadObjectException):
            await world.ICallback.asInterface(forged).ask(1)
    assert await handed.ask(5) == 5  # uid 0 (this process, init) + 5: the reference works


# --------------------------------------------------------------------------------
# Bounds


@pytest.mark.multiprocess
async def test_a_strangers_frame_bomb_is_refused_at_the_length_prefix(world, echo):
    """Twenty 1 MiB frames of empty arrays from a process nobody launched: each
    connection is dropped at its first bytes (a frame over 4 KiB before the
    handshake), nothing is decoded, and the service's memory does not move."""
    path = str(service_path(world, echo))
    result = {}

    async def attack():
        proc = await trio.run_process(world.argv("bomb", path), capture_stdout=True)
        result["taken"] = [int(x) for x in proc.stdout.split()]

    grown, _ = await attacked(world, echo, attack)
    assert len(result["taken"]) == 20
    # Each connection took what the socket buffers hold before the drop, not the frame.
    assert all(0 <= t < MAX_FRAME_SIZE for t in result["taken"]), result
    assert grown < 8 << 20, grown


@pytest.mark.multiprocess
async def test_a_descriptor_flood_is_closed_at_once(world, echo):
    """A known peer begins a frame, then sends byte after byte of it, each with 253
    descriptors the frame never announces: the service drops the connection at the
    second batch and holds none of them, while the peer still has it open."""
    before = open_fds(world.service_pid)
    peer = RawPeer(service_path(world, echo))
    await peer.handshake()
    r, w = os.pipe()
    try:
        await peer.sock.send(struct.pack(">I", 4096))  # a frame of 4 KiB begins
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r] * 253))]
        sent = 0
        try:
            for _ in range(40):
                await peer.sock.sendmsg([b"\0"], anc)
                sent += 253
        except OSError:
            pass
        await trio.sleep(0.5)
        held = open_fds(world.service_pid) - before
        assert await peer.hung_up()
    finally:
        peer.close()
        os.close(r)
        os.close(w)
    assert held <= 253 + 2, (held, sent)
    assert await echo.whoami() == 0


@pytest.mark.multiprocess
async def test_half_sent_frames_hold_at_most_a_frame_each(world, echo):
    """Forty known connections each send all but the last byte of a 1 MiB frame and
    stall: past MAX_CONNECTIONS_PER_PEER they are closed at accept, each other holds
    one frame's bytes, and others are served meanwhile."""
    peers = []

    async def attack():
        body_len = MAX_FRAME_SIZE - 1024
        partial = memoryview(struct.pack(">I", body_len) + b"\x00" * (body_len - 1))
        for _ in range(40):
            peer = RawPeer(service_path(world, echo))
            peers.append(peer)
            try:
                await peer.handshake()
                view = partial
                while view:
                    view = view[await peer.sock.send(view) :]
            except (OSError, EOFError):
                pass  # closed at accept: this process has its share of connections

    try:
        grown, _ = await attacked(world, echo, attack)
    finally:
        for peer in peers:
            peer.close()
    assert MAX_CONNECTIONS_PER_PEER == 16
    assert grown < 32 << 20, grown  # 16 frames of 1 MiB and change; forty would be over 40 MiB


@pytest.mark.multiprocess
async def test_thirty_thousand_unread_calls_are_held_to_the_cap(world, echo):
    """A known peer sends 30,000 two-way calls on one connection and never reads a
    reply: the service serves MAX_PENDING_CALLS of them at most at once and stops
    reading the rest; it does not grow, and others are served."""
    peer = RawPeer(service_path(world, echo))
    target = echo.asBinder()._object_id
    whoami = 2  # IEcho's second method
    frames = b"".join(
        b"".join(encode_frame(Transaction(txn_id, target, whoami, False, []))) for txn_id in range(1, 30_001)
    )
    done = {}

    async def attack():
        await peer.handshake()
        with trio.move_on_after(5):
            view = memoryview(frames)
            while view:
                view = view[await peer.sock.send(view) :]
            done["all"] = True

    try:
        grown, _ = await attacked(world, echo, attack)
    finally:
        peer.close()
    assert "all" not in done, "30,000 unread calls all went: nothing held the peer back"
    assert MAX_PENDING_CALLS == 64
    assert grown < RSS_CAP, grown


@pytest.mark.multiprocess
async def test_a_burst_of_a_thousand_connections_is_bounded(world, echo):
    """A stranger opens 1,000 connections at once and holds them silent: past
    MAX_CONNECTIONS_PER_PEER they are closed at once, and the rest cost little."""
    path = str(service_path(world, echo))
    proc = subprocess.Popen(world.argv("burst", path, "1000"), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    result = {}

    async def attack():
        line = await trio.to_thread.run_sync(proc.stdout.readline)
        opened, closed = map(int, line.split())
        result.update(opened=opened, closed=closed)

    try:
        grown, _ = await attacked(world, echo, attack)
    finally:
        proc.stdin.close()
        proc.wait()
        proc.stdout.close()
    assert result["opened"] - result["closed"] <= MAX_CONNECTIONS_PER_PEER, result
    assert grown < RSS_CAP, grown


# --------------------------------------------------------------------------------
# Owner checks, in one process (the whole stack in memory, on the virtual clock)


@pytest.fixture
async def stack(autojump_clock, tmp_path):
    from test_server_hal import StackWorld
    from test_server_support import write_apps

    async with open_driver(clock="virtual") as driver, open_stack(driver, apps_dir=write_apps(tmp_path / "apps")) as s:
        yield StackWorld(s)


def leaked(runtime, binder, interface):
    """What a process holds once ``binder``'s reference reached it (handed on by its
    owner, or leaked): the proxy its runtime makes of that reference."""
    return interface.asInterface(runtime.proxy(binder._runtime.address, binder._object_id, interface.DESCRIPTOR))


async def test_another_uids_prepared_model_refuses_it(autojump_clock, stack):
    """b holds a's prepared model and its burst: release() and executions are
    refused, a's model stays loaded and still executes."""
    a = await stack.launch("com.test.a")
    b = await stack.launch("com.test.b")
    model, w, bias = fc_model()
    device = IDevice.asInterface(
        await defaultServiceManager(a.context.runtime).checkService("android.hardware.neuralnetworks.IDevice/emu-npu")
    )
    prepared = await device.prepareModel(
        aidl_model(model), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, -1, 0, None
    )
    await prepared.configureExecutionBurst()
    (mine,) = [p for p in stack.real_hal.prepared if p.owner_uid == a.context.getUid()]
    (its_burst,) = list(mine.bursts)
    x = np.ones((1, 16), np.float32)
    stolen = leaked(b.context.runtime, mine, IPreparedModel)
    with pytest.raises(SecurityException, match="may not use a prepared model"):
        await stolen.release()
    with pytest.raises(SecurityException, match="may not use a prepared model"):
        await stolen.executeSynchronously(Execution([x], [(1, 8)]).request(), False, -1, 0)
    with pytest.raises(SecurityException, match="may not use a burst"):
        await leaked(b.context.runtime, its_burst, IBurst).releaseMemoryResource(0)
    assert mine in stack.real_hal.prepared
    ex = Execution([x], [(1, 8)])
    await prepared.executeSynchronously(ex.request(), False, -1, 0)  # the owner still may
    np.testing.assert_allclose(ex.output(0), np.maximum(x @ w.T + bias, 0), rtol=1e-5)
    await prepared.release()
    assert mine not in stack.real_hal.prepared


async def test_system_servers_hal_callbacks_refuse_anyone_but_system(autojump_clock, stack):
    """An app holding system_server's ISchedulingCallback and IHalListener references
    sends a fake COMPLETED for another app and a fake CRITICAL heat: both refused,
    neither reaches the arbiter or the thermal service."""
    thief = await stack.launch("com.test.a")
    npu = stack.system.npu
    before = npu.dump_data()["counters"]
    callback = leaked(thief.context.runtime, npu._sched_callback, ISchedulingCallback)
    info = WorkInfo(id=1, uid=10099, originalUid=-1, jobPriority=0, effectivePriority=0, timestampMs=0, deviceNumber=0)
    await callback.onWorkEnded(info, EndReason.COMPLETED)  # oneway: refused and logged there
    listener = leaked(thief.context.runtime, stack.system.thermal.listener, IHalListener)
    await listener.onThermalSeverityChanged(ThrottlingSeverity.CRITICAL, 99.0)
    await trio.sleep(0.1)
    after = npu.dump_data()["counters"]
    assert after["work_completed"] == before["work_completed"]
    assert after["work_events"] == before["work_events"]
    assert after["refused_calls"] > before["refused_calls"]
    assert stack.system.thermal.severity != ThrottlingSeverity.CRITICAL


def main() -> None:
    role, *args = sys.argv[1:]
    {"bomb": role_bomb, "burst": role_burst}[role](*args)


if __name__ == "__main__":
    main()
