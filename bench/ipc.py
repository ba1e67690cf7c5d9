"""IPC benchmark: the binder against a bare trio Unix-socket floor, between two processes.

    .venv/bin/python bench/ipc.py [--calls N] [--oneway N] [--count-calls N] [--tensor-rounds N]

One run starts a servicemanager (in this process, which is therefore init) and one
server process (launched as uid 1000 through ``launch_process``), then measures:

1. floor: a length-prefixed msgpack ping-pong on a bare trio Unix socket
   ([int, 32 bytes] each way, packed and unpacked on both sides);
2. binder: a two-way call with a small parcelable (an int and 32 bytes in, the same
   shape out);
3. oneway throughput of both (N messages, then one round trip to know they all
   arrived);
4. a 4 MiB tensor round trip: inline as a msgpack bin over the bare socket (the
   binder refuses parcels over 1 MiB, which is the point), and through the binder
   as SharedMemory (the server reads the input region and writes the output one,
   each mapped once, at its first call, and the mapping kept).

It prints medians, p99 and the binder/floor ratios, and which targets are met:
binder round trip <= 1.0x the floor, oneway >= 1.0x the floor's throughput, the
shared-memory 4 MiB round trip >= 4x faster than inline.

Wall-clock ratios mean something only on a quiet machine. So it also prints, per
call and for each side (client, server), what load does not change: trio's task
steps (task switches), wake-ups and I/O waits, counted by an Instrument in each
process in a separate run, and the CPU time each process spent in the timed runs.
"""

from __future__ import annotations

import argparse
import functools
import mmap
import os
import socket
import statistics
import struct
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import msgpack
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from framework.binder import (  # noqa: E402
    AidlRegistry,
    SharedMemory,
    defaultServiceManager,
    interface_class,
    launch_process,
    open_binder_runtime,
    serve_servicemanager,
)

AIDL = {
    "bench/ipc/Small.aidl": """
        package bench.ipc;
        parcelable Small { int n; byte[] data; }
    """,
    "bench/ipc/IBench.aidl": """
        package bench.ipc;
        import bench.ipc.Small;
        interface IBench {
            Small roundTrip(in Small s);
            oneway void fire(in Small s);
            long sync(long expected);
            void tensor(in SharedMemory input, in SharedMemory output);
            long[] counters(boolean on);
        }
    """,
}

TENSOR = 4 << 20
HEADER = struct.Struct(">I")


# ------------------------------------------------------------------ counting


class Counter(trio.abc.Instrument):
    """How often trio's scheduler works: task steps (a task runs until it yields,
    one task switch each), wake-ups (a task made runnable) and I/O waits (the run
    loop asks epoll; ``polls`` of them with a zero timeout, the rest block)."""

    def __init__(self) -> None:
        self.steps = self.wakeups = self.waits = self.polls = 0

    def before_task_step(self, task) -> None:
        self.steps += 1

    def task_scheduled(self, task) -> None:
        self.wakeups += 1

    def before_io_wait(self, timeout: float) -> None:
        self.waits += 1
        if timeout <= 0:
            self.polls += 1

    def snapshot(self) -> list[int]:
        return [self.steps, self.wakeups, self.waits, self.polls]


def cpu_ns(pid: int | str = "self") -> int:
    """CPU time used so far by every thread of ``pid``, in ns (the scheduler's own
    count, not the 10 ms ticks of /proc/pid/stat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total


def write_aidl(root: Path) -> AidlRegistry:
    for rel, text in AIDL.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return AidlRegistry.load(root)


# ------------------------------------------------------------------- the floor


class FramedSocket:
    """The floor's framing: 4-byte length + msgpack, buffered reads. Kept as lean
    as a hand-written protocol would be."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    async def send(self, obj) -> None:
        body = msgpack.packb(obj)
        data = memoryview(HEADER.pack(len(body)) + body)
        while data:
            n = await self.sock.send(data)
            data = data[n:]

    async def recv(self):
        buf = self.buf
        while True:
            if len(buf) >= 4:
                (n,) = HEADER.unpack_from(buf)
                if len(buf) >= 4 + n:
                    obj = msgpack.unpackb(memoryview(buf)[4 : 4 + n])
                    del buf[: 4 + n]
                    return obj
            chunk = await self.sock.recv(65536)
            if not chunk:
                raise EOFError
            buf += chunk


async def floor_server(path: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
    listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await listener.bind(path)
    listener.listen(4)
    task_status.started()
    async with trio.open_nursery() as nursery:
        while True:
            sock, _ = await listener.accept()
            nursery.start_soon(floor_conn, sock)


async def floor_conn(sock) -> None:
    fs = FramedSocket(sock)
    count = 0
    try:
        while True:
            kind, n, data = await fs.recv()
            if kind == 0:  # ping
                await fs.send([0, n + 1, data])
            elif kind == 1:  # one way
                count += 1
            elif kind == 2:  # sync
                await fs.send([2, count, b""])
                count = 0
            elif kind == 3:  # tensor echo
                await fs.send([3, n, data])
    except EOFError:
        pass
    finally:
        sock.close()


# ------------------------------------------------------------------ the server


async def serve(aidl_dir: str, floor_path: str) -> None:
    reg = AidlRegistry.load(aidl_dir)
    IBench = interface_class(reg.interface("bench.ipc.IBench"))
    Small = reg.parcelable("bench.ipc.Small")

    class Bench(IBench.Stub):
        def __init__(self):
            super().__init__()
            self.count = 0
            self.changed = trio.Event()
            # Each region is mapped once and the mapping kept, as NNAPI's memory pools
            # are: a call brings a new descriptor of the same memfd, which fstat names.
            self.regions: dict[tuple, mmap.mmap] = {}

        async def roundTrip(self, s):
            return Small(n=s.n + 1, data=s.data)

        async def fire(self, s):
            self.count += 1
            if self.count >= self.waiting:
                self.changed.set()

        waiting = 1 << 62

        async def sync(self, expected):
            self.waiting = expected
            while self.count < expected:
                self.changed = trio.Event()
                await self.changed.wait()
            self.waiting = 1 << 62
            count, self.count = self.count, 0
            return count

        counter = None

        async def counters(self, on):
            """Start counting the scheduler's work in this process (on), or stop
            and return the counts since the start."""
            counts = self.counter.snapshot() if self.counter is not None else [0, 0, 0, 0]
            if self.counter is not None:
                trio.lowlevel.remove_instrument(self.counter)
                self.counter = None
            if on:
                self.counter = Counter()
                trio.lowlevel.add_instrument(self.counter)
            return counts

        def region(self, mem, writable: bool) -> mmap.mmap:
            st = os.fstat(mem.fd)
            key = (st.st_dev, st.st_ino, mem.size, writable)
            mapped = self.regions.get(key)
            if mapped is None:
                # MAP_POPULATE: fault the pages in one go rather than 1024 faults.
                prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
                mapped = mmap.mmap(mem.fd, mem.size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=prot)
                self.regions[key] = mapped
            return mapped

        async def tensor(self, input, output):
            with input, output:
                src, dst = self.region(input, False), self.region(output, True)
                with memoryview(src) as a, memoryview(dst) as b:
                    b[:] = a  # one copy, page to page: the work a real kernel would read

    async with open_binder_runtime():
        async with trio.open_nursery() as nursery:
            await nursery.start(floor_server, floor_path)
            await defaultServiceManager().addService("bench", Bench(), False, 15)
            await trio.sleep_forever()


# ------------------------------------------------------------------ the client


def pct(samples: list[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * p))]


async def measure(args) -> dict:
    results = {}
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-") as tmp:
        tmp = Path(tmp)
        rtdir = tmp / "rt"
        reg = write_aidl(tmp / "aidl")
        IBench = interface_class(reg.interface("bench.ipc.IBench"))
        Small = reg.parcelable("bench.ipc.Small")
        floor_path = str(tmp / "floor.sock")
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(serve_servicemanager, rtdir))
            async with open_binder_runtime(rtdir) as rt:
                proc = await launch_process(
                    [sys.executable, __file__, "--serve", str(tmp / "aidl"), floor_path], uid=1000
                )
                try:
                    bench = IBench.asInterface(await defaultServiceManager(rt).waitForService("bench", 30_000))
                    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    await sock.connect(floor_path)
                    fs = FramedSocket(sock)
                    payload = os.urandom(32)
                    small = Small(n=1, data=payload)

                    async def floor_rt():
                        await fs.send([0, 1, payload])
                        await fs.recv()

                    async def binder_rt():
                        await bench.roundTrip(small)

                    async def floor_oneway(n):
                        for _ in range(n):
                            await fs.send([1, 1, payload])
                        await fs.send([2, 0, b""])
                        _, got, _ = await fs.recv()
                        assert got == n, got

                    async def binder_oneway(n):
                        for _ in range(n):
                            await bench.fire(small)
                        got = await bench.sync(n)
                        assert got == n, got

                    # CPU time of each side, read around each block of calls (the
                    # scheduler's count in ns, so blocks need not be long).
                    cpu = {key: [0, 0] for key in ("floor_rt", "binder_rt", "floor_oneway", "binder_oneway")}

                    async def timed_block(key, block):
                        c0, s0 = cpu_ns(), cpu_ns(proc.pid)
                        t0 = time.perf_counter()
                        await block()
                        elapsed = time.perf_counter() - t0
                        c1, s1 = cpu_ns(), cpu_ns(proc.pid)
                        cpu[key][0] += c1 - c0
                        cpu[key][1] += s1 - s0
                        return elapsed

                    # Interleave rounds so that drift (turbo, other load) hits both alike.
                    floor_s, binder_s = [], []
                    for _ in range(args.calls // 100):
                        for key, fn, out in (("floor_rt", floor_rt, floor_s), ("binder_rt", binder_rt, binder_s)):

                            async def block(fn=fn, out=out):
                                for _ in range(100):
                                    t0 = time.perf_counter()
                                    await fn()
                                    out.append(time.perf_counter() - t0)

                            await timed_block(key, block)
                    results["rt"] = (floor_s, binder_s)

                    # Oneway throughput, in interleaved rounds as above.
                    rounds = 10
                    per = max(1, args.oneway // rounds)
                    floor_t = binder_t = 0.0
                    for _ in range(rounds):
                        floor_t += await timed_block("floor_oneway", functools.partial(floor_oneway, per))
                        binder_t += await timed_block("binder_oneway", functools.partial(binder_oneway, per))
                    results["oneway"] = (rounds * per / floor_t, rounds * per / binder_t)
                    results["cpu"] = {
                        key: (mine / n, theirs / n)
                        for key, (mine, theirs) in cpu.items()
                        for n in [args.calls if key.endswith("_rt") else rounds * per]
                    }

                    # The scheduler's work per call on each side, counted by an
                    # instrument in both processes (apart from the timed runs, which it
                    # would slow down).
                    counts = {}
                    for key, block, n in (
                        ("floor_rt", floor_rt, args.count_calls),
                        ("binder_rt", binder_rt, args.count_calls),
                        ("floor_oneway", functools.partial(floor_oneway, args.count_calls), 1),
                        ("binder_oneway", functools.partial(binder_oneway, args.count_calls), 1),
                    ):
                        await bench.counters(True)
                        me = Counter()
                        trio.lowlevel.add_instrument(me)
                        for _ in range(n):
                            await block()
                        trio.lowlevel.remove_instrument(me)
                        theirs = await bench.counters(False)
                        counts[key] = (
                            [x / args.count_calls for x in me.snapshot()],
                            [x / args.count_calls for x in theirs],
                        )
                    results["counts"] = counts
                    results["count_calls"] = args.count_calls

                    # 4 MiB tensors.
                    tensor = os.urandom(TENSOR)
                    inline, shm = [], []
                    with SharedMemory.create("in", TENSOR) as src, SharedMemory.create("out", TENSOR) as dst:
                        view = src.map(writable=True)
                        view[:] = tensor
                        del view
                        for _ in range(args.tensor_rounds):
                            t0 = time.perf_counter()
                            await fs.send([3, 0, tensor])
                            _, _, back = await fs.recv()
                            inline.append(time.perf_counter() - t0)
                            assert len(back) == TENSOR
                            t0 = time.perf_counter()
                            await bench.tensor(src, dst)
                            shm.append(time.perf_counter() - t0)
                        out = dst.map(writable=False)
                        assert out[:64] == tensor[:64] and out[-64:] == tensor[-64:]
                        del out
                    results["tensor"] = (inline, shm)
                    sock.close()
                finally:
                    proc.kill()
                    await proc.wait()
            nursery.cancel_scope.cancel()
    return results


def report(results: dict) -> bool:
    floor_s, binder_s = results["rt"]
    f_med, b_med = statistics.median(floor_s), statistics.median(binder_s)
    f99, b99 = pct(floor_s, 0.99), pct(binder_s, 0.99)
    floor_tp, binder_tp = results["oneway"]
    inline, shm = results["tensor"]
    i_med, s_med = statistics.median(inline), statistics.median(shm)
    us, ms = 1e6, 1e3
    rows = [
        ("round trip, small", f"{f_med * us:8.1f} us", f"{b_med * us:8.1f} us", f"{b_med / f_med:5.2f}x", "<= 1.00x", b_med / f_med <= 1.0),
        ("round trip p99", f"{f99 * us:8.1f} us", f"{b99 * us:8.1f} us", f"{b99 / f99:5.2f}x", "", None),
        ("oneway throughput", f"{floor_tp:8.0f} /s", f"{binder_tp:8.0f} /s", f"{binder_tp / floor_tp:5.2f}x", ">= 1.00x", binder_tp / floor_tp >= 1.0),
        ("4 MiB round trip", f"{i_med * ms:8.2f} ms", f"{s_med * ms:8.2f} ms", f"{i_med / s_med:5.1f}x", ">= 4x faster", i_med / s_med >= 4),
    ]
    print(f"{'':20} {'floor / inline':>14} {'binder / shm':>14} {'ratio':>7}  {'target':<13} met")
    for name, a, b, ratio, target, ok in rows:
        met = "" if ok is None else ("yes" if ok else "NO")
        print(f"{name:20} {a:>14} {b:>14} {ratio:>7}  {target:<13} {met}")
    print(f"({len(floor_s)} round trips each, {len(inline)} tensor rounds; 4 MiB p99: inline {pct(inline, .99) * ms:.2f} ms, shm {pct(shm, .99) * ms:.2f} ms)")
    print()
    # Where the time goes, in numbers that load does not change: the scheduler's work
    # per call (from the counted run) and each process's CPU time (from the timed one).
    counts, cpu = results["counts"], results["cpu"]
    print(f"{'per call':20} {'client: floor':>13} {'binder':>7} {'server: floor':>14} {'binder':>7}")
    for kind, label in (("rt", "round trip"), ("oneway", "oneway")):
        (fc, fs), (bc, bs) = counts[f"floor_{kind}"], counts[f"binder_{kind}"]
        for i, what in enumerate(("task steps", "wake-ups", "I/O waits", "  of them polls")):
            print(f"{label + ', ' + what:20} {fc[i]:13.2f} {bc[i]:7.2f} {fs[i]:14.2f} {bs[i]:7.2f}")
        (fcpu, fscpu), (bcpu, bscpu) = cpu[f"floor_{kind}"], cpu[f"binder_{kind}"]
        print(f"{label + ', CPU us':20} {fcpu / 1e3:13.1f} {bcpu / 1e3:7.1f} {fscpu / 1e3:14.1f} {bscpu / 1e3:7.1f}")
    print(f"(counts over {results['count_calls']} calls of each kind, by a trio Instrument in each process;")
    print(" CPU time from /proc/<pid>/task/*/schedstat around the timed calls)")
    # Other work on the machine stretches both sides, but not alike: say how loaded it was.
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"(load average {load} on {os.cpu_count()} cpus; compare ratios of runs under like load)")
    return all(ok for *_, ok in rows if ok is not None)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        trio.run(serve, sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4000, help="round trips of each kind")
    parser.add_argument("--oneway", type=int, default=20000, help="oneway messages of each kind")
    parser.add_argument("--count-calls", type=int, default=1000, help="calls of each kind counted by the instruments")
    parser.add_argument("--tensor-rounds", type=int, default=30, help="4 MiB round trips of each kind")
    args = parser.parse_args()
    ok = report(trio.run(measure, args))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
