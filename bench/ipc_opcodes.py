"""What a binder round trip costs in Python, counted, not timed.

    .venv/bin/python bench/ipc_opcodes.py [--calls N] [--top N] [--cpu]

Both ends of bench/ipc.py's small two-way call (``IBench.roundTrip``) run in this one
process, each its own runtime over real Unix sockets (a resolver that vouches for
the one pid stands in for the servicemanager). After a warm-up, ``sys.settrace``
counts every bytecode executed during N calls (opcode events), per function, so the
figures are the same on a quiet machine and a loaded one: bytecodes per round trip
(both ends together), per file, and the top functions with how often each was
entered per call (a coroutine counts once per resumption). Tracing slows the calls
many times over; the counts are what it is for. ``--cpu`` instead times the calls
untraced (process CPU time, both ends, best and median of 7 runs).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

import ipc  # bench/ipc.py, beside this file: its AIDL and ROOT on sys.path
from framework.binder import interface_class, open_binder_runtime


async def vouch(runtime, pid: int, token: str | None) -> int:
    return 1000


async def run(calls: int, warmup: int, body) -> None:
    """Serve IBench in one runtime, call it from another, and hand ``body`` a
    function doing one checked round trip."""
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-") as tmp:
        reg = ipc.write_aidl(Path(tmp) / "aidl")
        IBench = interface_class(reg.interface("bench.ipc.IBench"))
        Small = reg.parcelable("bench.ipc.Small")

        class Bench(IBench.Stub):
            async def roundTrip(self, s):
                return Small(n=s.n + 1, data=s.data)

        rtdir = Path(tmp) / "rt"
        common = dict(uid=1000, resolver=vouch)
        async with open_binder_runtime(rtdir, address="server", context_object=Bench(), **common) as server:
            async with open_binder_runtime(rtdir, address="client", **common) as client:
                bench = IBench.asInterface(client.proxy(server.address, 0, IBench.DESCRIPTOR))
                small = Small(n=1, data=os.urandom(32))

                async def round_trip() -> None:
                    if (await bench.roundTrip(small)).n != 2:
                        raise AssertionError("wrong reply")

                for _ in range(warmup):
                    await round_trip()
                await body(round_trip, calls)


def where(code) -> str:
    path = code.co_filename
    for prefix in (str(ipc.ROOT) + "/", "site-packages/"):
        path = path.split(prefix)[-1]
    return path


async def count(round_trip, calls: int) -> tuple[collections.Counter, collections.Counter]:
    ops: collections.Counter = collections.Counter()
    entries: collections.Counter = collections.Counter()

    def on_opcode(frame, event, arg):
        if event == "opcode":
            ops[frame.f_code] += 1
        return on_opcode

    def on_call(frame, event, arg):
        entries[frame.f_code] += 1
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return on_opcode

    sys.settrace(on_call)
    try:
        for _ in range(calls):
            await round_trip()
    finally:
        sys.settrace(None)
    return ops, entries


def report(ops: collections.Counter, entries: collections.Counter, calls: int, top: int) -> None:
    print(f"bytecodes per round trip (both ends): {sum(ops.values()) / calls:.0f}")
    by_file: collections.Counter = collections.Counter()
    for code, n in ops.items():
        by_file[where(code)] += n
    print("\nper file")
    for path, n in by_file.most_common(top):
        print(f"{n / calls:9.1f}  {path}")
    print("\nper function               (entered per call)")
    for code, n in ops.most_common(top):
        print(f"{n / calls:9.1f} {entries[code] / calls:5.1f}x  {where(code)}:{code.co_firstlineno} {code.co_qualname}")


async def cpu(round_trip, calls: int) -> None:
    runs = []
    for _ in range(7):
        start = time.process_time()
        for _ in range(calls):
            await round_trip()
        runs.append((time.process_time() - start) / calls * 1e6)
    print(f"CPU per round trip (both ends): best {min(runs):.1f} us, median {statistics.median(runs):.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="round trips counted (or timed, per run)")
    parser.add_argument("--top", type=int, default=30, help="how many files and functions to list")
    parser.add_argument("--cpu", action="store_true", help="time the calls untraced instead")
    args = parser.parse_args()
    if args.cpu:
        trio.run(run, args.calls, 50, cpu)
        return
    result = {}

    async def counted(round_trip, calls):
        result["counts"] = await count(round_trip, calls)

    trio.run(run, args.calls, 50, counted)
    report(*result["counts"], args.calls, args.top)


if __name__ == "__main__":
    main()
