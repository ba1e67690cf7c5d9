"""vts's generated tests: the case file, the models made of it, and Android's comparison.

AOSP's VTS runs generated models (one per operation and operand type, with the
expected outputs of a reference implementation) on every device that claims them.
npuemu's come from the NNAPI conformance material (nnref's example tests, harvested
by ``tests/conformance``): ``tests/make_vts_cases.py`` picks a sample (every
operation, a few cases per operand type) and writes it, with nnref's expected
outputs, to one ``.npz`` file in the build output (``make vts-cases``, also run by
``make install``; ``build/`` is not committed, like the C extensions).  vts reads
that file and imports nothing from ``tests/``.

The file holds a JSON manifest (array ``manifest``: the format, the digest of the
sources it was made from, every case's operation, operands and the names of their
arrays) and one array per tensor value.  ``sources_digest`` hashes the files the
cases derive from; when vts runs in a checkout where they changed, the file is
stale and the check says how to remake it.

A case is one operation as one model, as ``tests/conformance/build.py`` lays it out
("constants"): the first tensor input is the model's input, every other tensor and
every scalar a constant, an omitted optional input a NO_VALUE operand.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from framework.binder import SharedMemory
from interfaces.android.hardware.neuralnetworks import (
    DataLocation,
    ExecutionHints,
    Model,
    Operand,
    OperandExtraParams,
    OperandLifeTime,
    OperandType,
    Operation,
    OperationType,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
)
from interfaces.android.hardware.npu import NpuUuid
from interfaces.c_model import OPERAND_DTYPES

__all__ = [
    "CASES_FORMAT",
    "CaseFile",
    "GenCase",
    "Tensor",
    "compare_outputs",
    "default_cases_path",
    "execute",
    "load_cases",
    "model_of",
    "sources_digest",
    "write_cases",
]

CASES_FORMAT = 1
_ROOT = Path(__file__).resolve().parents[2]
#: The files the cases derive from, relative to the checkout (globs).
SOURCE_GLOBS = (
    "tests/nnref/*.py",
    "tests/conformance/cases.py",
    "tests/conformance/build.py",
    "tests/test_nnref_*.py",
    "tests/make_vts_cases.py",
)

#: Android's tolerances (the generated tests' MixedTypedExample defaults): float32 within
#: 1e-5 + 5 ULP relative; float16 and relaxed float32 within 5 float16 ULP, both ways;
#: quantized within one quantum; everything else exact.
FLOAT32_TOLERANCE = (1e-5, 5.0 * 1.1920928955078125e-7)
FLOAT16_TOLERANCE = (5.0 * 0.0009765625, 5.0 * 0.0009765625)
_QUANTIZED = frozenset({
    "TENSOR_QUANT8_ASYMM", "TENSOR_QUANT8_SYMM", "TENSOR_QUANT16_SYMM", "TENSOR_QUANT16_ASYMM",
    "TENSOR_QUANT8_SYMM_PER_CHANNEL",
})
_SCALARS = frozenset({"FLOAT32", "INT32", "UINT32", "BOOL", "FLOAT16"})
# Constants up to this size travel in operandValues, larger ones in a pool (as the NDK does).
_MAX_COPY_BYTES = 128
_ALIGN = 64


def default_cases_path() -> Path:
    """Where ``make vts-cases`` writes the generated cases in this checkout."""
    return _ROOT / "build" / "vts" / "generated_cases.npz"


def sources_digest(root: Path = _ROOT) -> str | None:
    """A hash of the files the cases are made from, or None outside a checkout (no tests/)."""
    files = sorted({p for pattern in SOURCE_GLOBS for p in root.glob(pattern) if p.is_file()})
    if not files:
        return None
    h = hashlib.sha256()
    for path in files:
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Tensor:
    """One operand of a case: ``value`` None for an omitted optional input."""

    type: str
    value: np.ndarray | None
    scale: float = 0.0
    zero_point: int = 0
    channel_scales: tuple[float, ...] | None = None
    channel_dim: int = 0

    @property
    def omitted(self) -> bool:
        return self.value is None

    @property
    def scalar(self) -> bool:
        return self.type in _SCALARS


@dataclass(frozen=True, slots=True)
class GenCase:
    """One generated test: an operation, its inputs and the outputs the reference computed."""

    id: str
    operation: str
    relaxed: bool
    inputs: tuple[Tensor, ...]
    expected: tuple[Tensor, ...]
    source: str

    @property
    def variant(self) -> str:
        if self.relaxed:
            return "relaxed"
        first = next((t for t in self.inputs if not t.omitted and not t.scalar), None)
        return first.type if first is not None else "scalars"


@dataclass(frozen=True, slots=True)
class CaseFile:
    path: Path
    digest: str | None
    cases: tuple[GenCase, ...]


def write_cases(path: Path, cases: Sequence[GenCase], digest: str | None) -> None:
    """Write ``cases`` to ``path`` (the generator's half; ``load_cases`` reads it)."""
    arrays: dict[str, np.ndarray] = {}
    entries = []

    def tensor(t: Tensor, name: str) -> dict:
        if t.value is not None:
            arrays[name] = np.ascontiguousarray(t.value)
        return {
            "type": t.type, "array": None if t.value is None else name, "scale": float(t.scale),
            "zero_point": int(t.zero_point),
            "channel_scales": None if t.channel_scales is None else [float(s) for s in t.channel_scales],
            "channel_dim": int(t.channel_dim),
        }

    for n, case in enumerate(cases):
        entries.append({
            "id": case.id, "operation": case.operation, "relaxed": case.relaxed, "source": case.source,
            "inputs": [tensor(t, f"c{n}i{i}") for i, t in enumerate(case.inputs)],
            "expected": [tensor(t, f"c{n}o{k}") for k, t in enumerate(case.expected)],
        })
    manifest = json.dumps({"format": CASES_FORMAT, "digest": digest, "cases": entries})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, manifest=np.frombuffer(manifest.encode(), dtype=np.uint8), **arrays)
    tmp.replace(path)


def load_cases(path: Path) -> CaseFile:
    """The cases of ``path``; ``ValueError`` (saying why) for a file that is not one."""
    try:
        with np.load(path, allow_pickle=False) as data:
            manifest = json.loads(bytes(data["manifest"]).decode())
            if manifest.get("format") != CASES_FORMAT:
                raise ValueError(f"format {manifest.get('format')!r}, this vts reads format {CASES_FORMAT}")

            def tensor(d: dict) -> Tensor:
                scales = d["channel_scales"]
                return Tensor(
                    d["type"], None if d["array"] is None else data[d["array"]], d["scale"], d["zero_point"],
                    None if scales is None else tuple(scales), d["channel_dim"],
                )

            cases = tuple(
                GenCase(c["id"], c["operation"], c["relaxed"], tuple(map(tensor, c["inputs"])),
                        tuple(map(tensor, c["expected"])), c["source"])
                for c in manifest["cases"]
            )
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{path} is not a vts case file ({exc})") from None
    return CaseFile(path, manifest.get("digest"), cases)


# ---- a case as a model, run through the HAL --------------------------------------


@dataclass(frozen=True, slots=True)
class Built:
    model: Model
    feeds: list[np.ndarray]               # the model inputs' stored values, in order
    outputs: list[tuple[tuple[int, ...], np.dtype]]  # each output's shape and element type


def _dtype(type_name: str) -> np.dtype:
    return OPERAND_DTYPES[OperandType[type_name]]


def model_of(case: GenCase) -> Built:
    """``case`` as one operation's ``Model``: its first tensor input the model's input."""
    operands: list[Operand] = []
    values = bytearray()
    pool = bytearray()
    feeds: list[np.ndarray] = []
    model_inputs: list[int] = []

    def add(t: Tensor, dims: Sequence[int], lifetime: OperandLifeTime, location: DataLocation | None = None) -> int:
        extra = None
        if t.channel_scales is not None:
            extra = OperandExtraParams(channelQuant=SymmPerChannelQuantParams(
                scales=[float(s) for s in t.channel_scales], channelDim=int(t.channel_dim)))
        operands.append(Operand(
            type=OperandType[t.type], dimensions=[int(d) for d in dims], scale=float(t.scale),
            zeroPoint=int(t.zero_point), lifetime=lifetime, location=location or DataLocation(), extraParams=extra,
        ))
        return len(operands) - 1

    def constant(t: Tensor) -> int:
        data = np.ascontiguousarray(t.value, dtype=_dtype(t.type)).tobytes()
        dims = () if t.scalar else np.shape(t.value)  # a scalar is stored as one element
        if len(data) <= _MAX_COPY_BYTES:
            values.extend(b"\0" * (-len(values) % 4))
            where = DataLocation(poolIndex=0, offset=len(values), length=len(data))
            values.extend(data)
            return add(t, dims, OperandLifeTime.CONSTANT_COPY, where)
        pool.extend(b"\0" * (-len(pool) % 16))
        where = DataLocation(poolIndex=0, offset=len(pool), length=len(data))
        pool.extend(data)
        return add(t, dims, OperandLifeTime.CONSTANT_POOL, where)

    ins = []
    for t in case.inputs:
        if t.omitted:
            ins.append(add(t, (), OperandLifeTime.NO_VALUE))
        elif t.scalar or model_inputs:
            ins.append(constant(t))
        else:
            index = add(t, np.shape(t.value), OperandLifeTime.SUBGRAPH_INPUT)
            model_inputs.append(index)
            feeds.append(np.ascontiguousarray(t.value, dtype=_dtype(t.type)))
            ins.append(index)
    outs = [add(e, np.shape(e.value), OperandLifeTime.SUBGRAPH_OUTPUT) for e in case.expected]
    pools = []
    if pool:
        region = SharedMemory.create("vts-model-pool", len(pool))
        mapping = region.mapReadWrite()
        try:
            mapping[:] = pool
        finally:
            mapping.close()
        pools.append(region)
    model = Model(
        main=Subgraph(
            operands=operands,
            operations=[Operation(type=OperationType[case.operation], inputs=ins, outputs=outs)],
            inputIndexes=model_inputs,
            outputIndexes=outs,
        ),
        operandValues=bytes(values),
        pools=pools,
        relaxComputationFloat32toFloat16=case.relaxed,
    )
    return Built(model, feeds, [(tuple(np.shape(e.value)), _dtype(e.type)) for e in case.expected])


def request_layout(feeds: Sequence[np.ndarray], outputs: Sequence[tuple[tuple[int, ...], np.dtype]]) -> tuple[
        list[tuple[int, int]], list[tuple[int, int]], int]:
    """(offset, length) of each input and output in one pool, each aligned; and the pool's size."""
    offset = 0
    places_in, places_out = [], []
    for nbytes, places in [(f.nbytes, places_in) for f in feeds] + [
            (int(math.prod(shape)) * dtype.itemsize, places_out) for shape, dtype in outputs]:
        places.append((offset, nbytes))
        offset += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
    return places_in, places_out, max(offset, _ALIGN)


async def execute(
    prepared: Any,
    feeds: Sequence[np.ndarray],
    outputs: Sequence[tuple[tuple[int, ...], np.dtype]],
    *,
    job_priority: int = 500,
    original_uid: int = -1,
    deadline_ns: int = -1,
    group_id: bytes | None = None,
    feature_id: str | None = None,
) -> list[np.ndarray]:
    """One execution of ``prepared`` (an ``IPreparedModel`` proxy) with ``feeds``; its outputs.

    Inputs and outputs share one fresh pool, so every execution sees its own bytes.
    """
    places_in, places_out, size = request_layout(feeds, outputs)
    region = SharedMemory.create("vts-request", size)
    mapping = region.mapReadWrite()
    try:
        for feed, (offset, length) in zip(feeds, places_in):
            mapping[offset : offset + length] = feed.tobytes()

        def argument(offset: int, length: int) -> RequestArgument:
            return RequestArgument(
                hasNoValue=False, location=DataLocation(poolIndex=0, offset=offset, length=length), dimensions=[]
            )

        request = Request(
            inputs=[argument(*p) for p in places_in], outputs=[argument(*p) for p in places_out], pools=[region]
        )
        hints = ExecutionHints(
            jobPriority=job_priority, originalUid=original_uid,
            groupId=None if group_id is None else NpuUuid(uuid=group_id), debugFeatureId=feature_id,
        )
        await prepared.executeWithHints(request, False, deadline_ns, hints)
        return [
            np.frombuffer(bytes(mapping[offset : offset + length]), dtype=dtype).reshape(shape)
            for (offset, length), (shape, dtype) in zip(places_out, outputs)
        ]
    finally:
        mapping.close()
        region.close()


def compare_outputs(outputs: Sequence[np.ndarray], case: GenCase) -> str:
    """'' when ``outputs`` are the case's expected ones within Android's tolerance, else
    one sentence: which output, which element, expected versus observed."""
    for k, (got, want) in enumerate(zip(outputs, case.expected)):
        expected = np.asarray(want.value)
        if got.shape != expected.shape:
            return f"output {k} has shape {list(got.shape)}, expected {list(expected.shape)}"
        if want.type in ("TENSOR_FLOAT32", "TENSOR_FLOAT16", "FLOAT32", "FLOAT16"):
            atol, rtol = FLOAT16_TOLERANCE if case.relaxed or "16" in want.type else FLOAT32_TOLERANCE
            g, e = got.astype(np.float64), expected.astype(np.float64)
            bad = ~(np.abs(g - e) <= atol + rtol * np.abs(e)) & ~((g == e) | (np.isnan(g) & np.isnan(e)))
            limit = f"within {atol:g} + {rtol:g}*|expected|"
        elif want.type in _QUANTIZED:
            g, e = got.astype(np.int64), expected.astype(np.int64)
            bad = np.abs(g - e) > 1
            limit = "within one quantum"
        else:
            g, e = got, expected
            bad = g != e
            limit = "exactly"
        if np.any(bad):
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            worst = ""
            if g.dtype.kind == "f":
                worst = f", largest difference {float(np.max(np.abs(g - e)[bad])):.3g}"
            return (
                f"output {k} ({want.type}) element {list(at)}: expected {_num(e[at])}, got {_num(g[at])} "
                f"({int(np.count_nonzero(bad))} of {bad.size} elements not {limit}{worst})"
            )
    if len(outputs) != len(case.expected):
        return f"{len(outputs)} outputs, expected {len(case.expected)}"
    return ""


def _num(x: Any) -> str:
    x = np.asarray(x).item()
    return f"{x:.7g}" if isinstance(x, float) else str(x)
