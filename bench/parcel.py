"""Parcel codec benchmark: encode and decode real parcelables and calls, against msgpack.

    .venv/bin/python bench/parcel.py [--repeat N] [--baseline DIR]

Times, in one process, what every binder transaction pays in the AIDL codec:

* constructing a WorkInfo (every field given, each checked);
* ``to_wire`` / ``from_wire`` of a WorkInfo and of an NN Model (64 operands, 32
  operations, 4 KiB of operand values: what ``prepareModel`` carries);
* the call encoders and decoders of ``ISchedulingCallback.onWorkStarted`` and
  ``IDevice.prepareModel``.

Each row is the best of ``--repeat`` timings (microseconds of CPU time per operation,
so that time the process spends descheduled on a busy machine does not count) and its
ratio to msgpack packing (encoders) or unpacking (decoders) of the same wire data,
the other half of every transaction's cost. ``--baseline DIR`` runs the same cases,
alternating, against the checkout in DIR (another worktree, e.g. one at an older
commit) and adds its times and the ratio this/baseline: below 1.0 is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import timeit
from pathlib import Path
from typing import Any, Callable

import msgpack

Case = tuple[str, Callable[[], Any], Any, str]


def _cases() -> list[Case]:
    """(name, the operation, its wire data, "pack" or "unpack") for each row."""
    from interfaces.android.hardware import neuralnetworks as nn
    from interfaces.android.hardware import npu

    uuid = npu.NpuUuid(uuid=bytes(range(16)))
    fields = dict(
        id=7, groupId=uuid, uid=10001, debugPid=4242, originalUid=10001, debugFeatureId="camera",
        jobPriority=250, effectivePriority=350, timestampMs=123456789012, deviceNumber=1,
    )
    info = npu.WorkInfo(**fields)
    info_wire = msgpack.unpackb(msgpack.packb(info.to_wire()))

    operands = [
        nn.Operand(
            type=nn.OperandType.TENSOR_FLOAT32 if i % 4 else nn.OperandType.INT32,
            dimensions=[1, 28, 28, 8] if i % 4 else [],
            scale=0.0,
            zeroPoint=0,
            lifetime=nn.OperandLifeTime.CONSTANT_COPY if i % 4 == 0 else nn.OperandLifeTime.TEMPORARY_VARIABLE,
            location=nn.DataLocation(poolIndex=0, offset=4 * i, length=4 if i % 4 == 0 else 0),
        )
        for i in range(64)
    ]
    operations = [
        nn.Operation(type=nn.OperationType.ADD, inputs=[2 * i + 1, 2 * i + 2, 0], outputs=[2 * i + 3])
        for i in range(32)
    ]
    model = nn.Model(
        main=nn.Subgraph(operands=operands, operations=operations, inputIndexes=[1], outputIndexes=[63]),
        operandValues=bytes(4096),
    )
    model_wire = msgpack.unpackb(msgpack.packb(model.to_wire()))

    started = npu.ISchedulingCallback.definition.method("onWorkStarted")
    started_args = (info, npu.StartReason.RESUMED)
    started_wire = msgpack.unpackb(msgpack.packb(started.encode_call(started_args, None)))
    prepare = nn.IDevice.definition.method("prepareModel")
    prepare_args = (model, nn.ExecutionPreference.FAST_SINGLE_ANSWER, nn.Priority.MEDIUM, -1, 1 << 20, None)
    prepare_wire = msgpack.unpackb(msgpack.packb(prepare.encode_call(prepare_args, None)))

    return [
        ("WorkInfo(...)", lambda: npu.WorkInfo(**fields), info_wire, "pack"),
        ("WorkInfo.to_wire", info.to_wire, info_wire, "pack"),
        ("WorkInfo.from_wire", lambda: npu.WorkInfo.from_wire(info_wire), info_wire, "unpack"),
        ("Model.to_wire", model.to_wire, model_wire, "pack"),
        ("Model.from_wire", lambda: nn.Model.from_wire(model_wire), model_wire, "unpack"),
        ("onWorkStarted encode_call", lambda: started.encode_call(started_args, None), started_wire, "pack"),
        ("onWorkStarted decode_call", lambda: started.decode_call(started_wire, None), started_wire, "unpack"),
        ("prepareModel encode_call", lambda: prepare.encode_call(prepare_args, None), prepare_wire, "pack"),
        ("prepareModel decode_call", lambda: prepare.decode_call(prepare_wire, None), prepare_wire, "unpack"),
    ]


def _best_us(fn: Callable[[], Any], repeat: int) -> float:
    # CPU time of this process: on a loaded machine, time spent descheduled does not count
    timer = timeit.Timer(fn, timer=time.process_time)
    number, _ = timer.autorange()
    number = max(1, number // 2)
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def measure(repeat: int) -> list[dict[str, Any]]:
    rows = []
    for name, fn, wire, side in _cases():
        packed = msgpack.packb(wire)
        floor = (lambda: msgpack.packb(wire)) if side == "pack" else (lambda: msgpack.unpackb(packed))
        rows.append({"case": name, "us": _best_us(fn, repeat), "msgpack_us": _best_us(floor, repeat), "side": side})
    return rows


def _run_tree(root: Path, repeat: int) -> list[dict[str, Any]]:
    """This script's measurement, importing the codec of the checkout at ``root``."""
    python = root / ".venv/bin/python"
    argv = [str(python if python.exists() else sys.executable), __file__, "--json", "--repeat", str(repeat)]
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timings per case; the best counts (default 7)")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure alternately, for ratios")
    parser.add_argument("--rounds", type=int, default=3, help="alternations with --baseline (default 3)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.repeat)))
        return 0
    here = Path(__file__).resolve().parent.parent
    if args.baseline is None:
        rows, base = _run_tree(here, args.repeat), None
    else:
        # Alternate the two trees so that a change in the machine's load hits both alike.
        mine: list[list[dict[str, Any]]] = []
        theirs: list[list[dict[str, Any]]] = []
        for _ in range(args.rounds):
            mine.append(_run_tree(here, args.repeat))
            theirs.append(_run_tree(args.baseline.resolve(), args.repeat))
        rows, base = _best_of(mine), _best_of(theirs)
    print(f"Parcel codec, best of {args.repeat} (microseconds per operation); msgpack x = codec / msgpack "
          "(pack for encoders, unpack for decoders) of the same wire data")
    head = f"{'case':28} {'us':>9} {'msgpack x':>10}"
    if base is not None:
        head += f" {'baseline us':>12} {'baseline x':>11} {'this/baseline':>14}"
    print(head)
    print("-" * len(head))
    by_case = {r["case"]: r for r in base or []}
    for r in rows:
        line = f"{r['case']:28} {r['us']:9.2f} {r['us'] / r['msgpack_us']:10.2f}"
        b = by_case.get(r["case"])
        if b is not None:
            line += f" {b['us']:12.2f} {b['us'] / b['msgpack_us']:11.2f} {r['us'] / b['us']:14.2f}"
        print(line)
    return 0


def _best_of(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    best = {}
    for run in runs:
        for r in run:
            if r["case"] not in best or r["us"] < best[r["case"]]["us"]:
                best[r["case"]] = r
    return list(best.values())


if __name__ == "__main__":
    sys.exit(main())
