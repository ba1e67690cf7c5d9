"""The conformance table: per operation, what each device supports and passes.

Run with ``make conformance-table`` (or ``.venv/bin/python tests/conformance/report.py``).
Every case runs in each layout of tests/test_conformance.py on every device, in one
process on the virtual clock; the table shows, per operation and device, the operand
types (of the operation's selecting input) the device claimed and ``passed/claimed``
runs, then the failures in full.
"""

from __future__ import annotations

import collections
import pathlib
import sys

import trio
import trio.testing

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/, for nnref and conformance

import nnref  # noqa: E402
from conformance.cases import cases  # noqa: E402
from conformance.run import LAYOUTS, open_nn, run_case  # noqa: E402

SHORT = {"TENSOR_FLOAT32": "f32", "TENSOR_FLOAT16": "f16", "TENSOR_QUANT8_ASYMM": "q8", "TENSOR_INT32": "i32",
         "TENSOR_BOOL8": "b8", "TENSOR_QUANT8_SYMM": "q8s", "TENSOR_QUANT8_SYMM_PER_CHANNEL": "q8pc",
         "TENSOR_QUANT16_ASYMM": "q16a", "TENSOR_QUANT16_SYMM": "q16s"}


def selecting_type(case) -> str:
    at = nnref.SELECTING[case.operation][0]
    o = case.inputs[at] if at < len(case.inputs) else None
    kind = SHORT.get(o.type, o.type) if o is not None else "?"
    return kind + ("(relaxed)" if case.relaxed else "")


async def collect():
    outcomes, types = [], {}
    async with open_nn() as nn:
        devices = [*nn.devices]
        for case in cases():
            types[case.id] = selecting_type(case)
            for layout, dynamic in LAYOUTS:
                outcomes += await run_case(nn, case, devices, layout, dynamic)
    return [d.name for d in devices], outcomes, types


def table(device_names, outcomes, types) -> str:
    cell = collections.defaultdict(lambda: [0, 0, set()])  # (op, device) -> passed, claimed, types
    for o in outcomes:
        c = cell[o.operation, o.device]
        if o.status in ("passed", "failed"):
            c[1] += 1
            c[2].add(types[o.case])
            c[0] += o.status == "passed"
    lines = ["| operation | " + " | ".join(device_names) + " |", "|---" * (len(device_names) + 1) + "|"]
    totals = {d: [0, 0] for d in device_names}
    for op in sorted({o.operation for o in outcomes}):
        row = []
        for d in device_names:
            passed, claimed, kinds = cell[op, d]
            totals[d][0] += passed
            totals[d][1] += claimed
            row.append(f"{' '.join(sorted(kinds))} {passed}/{claimed}" if claimed else "-")
        lines.append(f"| {op} | " + " | ".join(row) + " |")
    lines.append("| **all** | " + " | ".join(f"**{p}/{c}**" for p, c in totals.values()) + " |")
    return "\n".join(lines)


def main() -> int:
    names, outcomes, types = trio.run(collect, clock=trio.testing.MockClock(autojump_threshold=0))
    print(table(names, outcomes, types))
    failed = [o for o in outcomes if o.status == "failed"]
    refused = {(o.case, o.layout): o.detail for o in outcomes if o.status == "refused"}
    inexpressible = {o.case for o in outcomes if o.status == "inexpressible"}
    print(f"\n{len(cases())} cases x {len(LAYOUTS)} layouts on {len(names)} devices; "
          f"{len(inexpressible)} cases not expressible as a one-operation model (zero-sized inputs, rank-0 outputs); "
          f"{len(refused)} case layouts refused by the NDK; {len(failed)} failed runs")
    by_operation = collections.Counter(case.split("-")[0] for case, _ in refused)
    if by_operation:
        print("refused by the NDK, per operation: " + ", ".join(f"{op} {n}" for op, n in sorted(by_operation.items())))
    for o in failed:
        print(f"FAILED {o.case} on {o.device} ({o.layout}): {o.detail}")
    return 1 if failed or refused else 0


if __name__ == "__main__":
    sys.exit(main())
