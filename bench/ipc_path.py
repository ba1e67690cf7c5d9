"""What lies on a round trip's critical path, counted in two real processes.

    .venv/bin/python bench/ipc_path.py [--calls N] [--top N]

A ping-pong's wall time is the work each side does between receiving a message and
sending the next one (the peer waits for it), plus two wake-ups; what a side does
after it sent, until it blocks, overlaps with the peer's work and costs no latency
while each process has a core. So this counts, in each of the two processes of
bench/ipc.py's small round trip (a client here, a server it starts), the bytecodes
executed on the critical path and off it, for the binder's two-way call and for the
floor (ipc.py's length-prefixed msgpack over a bare trio socket).

Each process traces itself (``sys.settrace`` counts opcodes, ``sys.setprofile``
sees its C calls): every socket send, every receive that brings data, and every
return of the run loop's ``epoll.poll``. The critical path of a message is what runs
from the poll that brought it (the wake-up) to the next send; everything from a send
to the next wake-up is overlapped. The counts do not move with the machine's load,
unlike ipc.py's timings; the syscalls and task switches per call are ipc.py's (and
``strace -c -f``'s) business.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

import ipc  # bench/ipc.py, beside this file: its AIDL, its floor, ROOT on sys.path
from framework.binder import interface_class, open_binder_runtime

START, STOP, QUIT = 7, 8, 9  # the floor socket's control messages
_SENDS = {"send", "sendall", "sendmsg"}
_RECVS = {"recv", "recv_into", "recvmsg", "recvmsg_into"}
_TRANSPORT_READ = "framework.binder._wirec"  # the module of the binder transport's read (recvmsg)


class Tracer:
    """Opcodes counted per segment: a segment ends at each marker (a send, a receive
    that brought data, a poll's return), and keeps its own per-function counts."""

    def __init__(self) -> None:
        self.segments: list[tuple[str, collections.Counter]] = []
        self.counts: collections.Counter = collections.Counter()

    def mark(self, what: str) -> None:
        self.segments.append((what, self.counts))
        self.counts = collections.Counter()

    def on_call(self, frame, event, arg):
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return self.on_opcode

    def on_opcode(self, frame, event, arg):
        if event == "opcode":
            self.counts[frame.f_code] += 1
        return self.on_opcode

    def on_profile(self, frame, event, arg):
        if event == "c_return" or event == "c_exception":
            owner = getattr(arg, "__self__", None)
            name = arg.__name__
            if isinstance(owner, socket.socket):
                if name in _SENDS and event == "c_return":
                    self.mark("send")
                elif name in _RECVS and event == "c_return":
                    self.mark("recv")
            elif isinstance(owner, select.epoll) and name == "poll":
                self.mark("wake")
            elif name == "recvmsg" and event == "c_return" and getattr(owner, "__name__", "") == _TRANSPORT_READ:
                self.mark("recv")  # the binder's transport reads in C

    def start(self) -> None:
        self.segments.clear()
        self.counts = collections.Counter()
        sys.settrace(self.on_call)
        sys.setprofile(self.on_profile)
        frame = sys._getframe(1)
        while frame is not None:  # the frames already running: count them too
            frame.f_trace = self.on_opcode
            frame.f_trace_opcodes = True
            frame = frame.f_back

    def stop(self) -> dict:
        sys.settrace(None)
        sys.setprofile(None)
        return self.split()

    def split(self) -> dict:
        """Critical and overlapped opcodes, and the critical ones per function."""
        critical, overlapped = collections.Counter(), 0
        messages = 0
        wake = None  # index of the last wake-up
        open_from = None  # a message came: critical from its wake-up to the next send
        for i, (what, counts) in enumerate(self.segments):
            if what == "wake":
                if open_from is None:
                    wake = i
            elif what == "recv" and open_from is None and wake is not None:
                open_from = wake + 1
                messages += 1
            elif what == "send":
                if open_from is not None:
                    for _, c in self.segments[open_from : i + 1]:
                        critical.update(c)
                    open_from = wake = None
                    continue
            if open_from is None and what != "recv":
                overlapped += sum(counts.values())
        by_function = collections.Counter()
        for code, n in critical.items():
            by_function[where(code)] += n
        return {
            "messages": messages,
            "critical": sum(critical.values()),
            "overlapped": overlapped,
            "functions": by_function.most_common(),
        }


def where(code) -> str:
    path = code.co_filename
    for prefix in (str(ipc.ROOT) + "/", "site-packages/"):
        path = path.split(prefix)[-1]
    return f"{path}:{code.co_firstlineno} {code.co_qualname}"


async def vouch(runtime, pid: int, token: str | None) -> int:
    return 1000


# ------------------------------------------------------------------ the server


async def serve(tmp: Path) -> None:
    reg = ipc.AidlRegistry.load(tmp / "aidl")
    IBench = interface_class(reg.interface("bench.ipc.IBench"))
    Small = reg.parcelable("bench.ipc.Small")

    class Bench(IBench.Stub):
        async def roundTrip(self, s):
            return Small(n=s.n + 1, data=s.data)

    tracer = Tracer()
    common = dict(uid=1000, resolver=vouch)
    async with open_binder_runtime(tmp / "rt", address="server", context_object=Bench(), **common):
        listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await listener.bind(str(tmp / "floor.sock"))
        listener.listen(1)
        sock, _ = await listener.accept()
        fs = ipc.FramedSocket(sock)
        while True:
            kind, n, data = await fs.recv()
            if kind == START:
                await fs.send([kind, 0, b""])
                tracer.start()
            elif kind == STOP:
                result = tracer.stop()
                (tmp / "server.json").write_text(json.dumps(result))
                await fs.send([kind, 0, b""])
            elif kind == QUIT:
                return
            else:
                await fs.send([0, n + 1, data])


# ------------------------------------------------------------------ the client


async def measure(tmp: Path, kind: str, calls: int) -> tuple[dict, dict]:
    reg = ipc.AidlRegistry.load(tmp / "aidl")
    IBench = interface_class(reg.interface("bench.ipc.IBench"))
    Small = reg.parcelable("bench.ipc.Small")
    async with open_binder_runtime(tmp / "rt", address="client", uid=1000, resolver=vouch) as rt:
        bench = IBench.asInterface(rt.proxy("server", 0, IBench.DESCRIPTOR))
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.connect(str(tmp / "floor.sock"))
        fs = ipc.FramedSocket(sock)
        small = Small(n=1, data=os.urandom(32))
        payload = small.data

        async def round_trip() -> None:
            if kind == "floor":
                await fs.send([0, 1, payload])
                await fs.recv()
            else:
                await bench.roundTrip(small)

        for _ in range(50):
            await round_trip()
        tracer = Tracer()
        await fs.send([START, 0, b""])
        await fs.recv()
        tracer.start()
        for _ in range(calls):
            await round_trip()
        mine = tracer.stop()
        await fs.send([STOP, 0, b""])
        await fs.recv()
        await fs.send([QUIT, 0, b""])
        return mine, json.loads((tmp / "server.json").read_text())


def run(kind: str, calls: int) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-") as tmp:
        tmp = Path(tmp)
        ipc.write_aidl(tmp / "aidl")
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(tmp)])
        try:
            deadline = time.monotonic() + 30
            while not ((tmp / "rt" / "server").exists() and (tmp / "floor.sock").exists()):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the server did not start")
                time.sleep(0.05)
            result = trio.run(measure, tmp, kind, calls)
            server.wait(timeout=30)
            return result
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()


def report(results: dict, calls: int, top: int) -> None:
    print(f"bytecodes per round trip ({calls} calls), on the critical path and overlapped with the peer's work")
    print(f"{'':12} {'client crit':>11} {'overlapped':>10} {'server crit':>11} {'overlapped':>10} {'crit, both':>10}")
    for kind, (client, server) in results.items():
        crit = (client["critical"] + server["critical"]) / calls
        print(
            f"{kind:12} {client['critical'] / calls:11.0f} {client['overlapped'] / calls:10.0f}"
            f" {server['critical'] / calls:11.0f} {server['overlapped'] / calls:10.0f} {crit:10.0f}"
        )
    for kind, (client, server) in results.items():
        for side, result in (("client", client), ("server", server)):
            print(f"\n{kind}, {side}: the critical path's functions")
            for name, n in result["functions"][:top]:
                print(f"{n / calls:9.1f}  {name}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        trio.run(serve, Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="round trips counted")
    parser.add_argument("--top", type=int, default=25, help="functions listed per side")
    args = parser.parse_args()
    results = {kind: run(kind, args.calls) for kind in ("floor", "binder")}
    for kind, (client, server) in results.items():
        for side, result in (("client", client), ("server", server)):
            if result["messages"] < args.calls:
                raise SystemExit(f"{kind} {side}: {result['messages']} messages seen for {args.calls} calls")
    report(results, args.calls, args.top)


if __name__ == "__main__":
    main()
