"""No call of any operation's binding can crash the C: a status with a sentence, or a result.

Every bound operation (npu/bind.h, looked up with ``npu_bind_lookup``) is called through
``npu_bind_check`` (as the NDK's addOperation calls it) and ``npu_bind_run`` (as a plan-less
caller runs it) with hostile operand lists: wrong counts, any operand type (unknown ones too)
at any position, omitted inputs anywhere, ranks 0..6 with dimensions 0 and huge ones whose
product overflows, scalars with dimensions, NULL data with a known shape, per-channel
quantization with channelDim out of range or no scales, scales 0, negative, NaN or infinite,
zero points out of range, outputs declared with other shapes and types; and conformance
cases (tests/conformance/cases.py) with a few of those mutations applied, so that the calls
reach past the signature checks into the kernels.

Each call must return NPU_OK or a negative status whose sentence names the operation. The
operands respect what bind.h asks of a caller and no more: a present operand's data holds
its declared shape in its declared type. Outputs sit between guard zones that must come back
untouched, and inputs must come back as they went in.

``make fuzz-bindings`` runs the same tests long (``NPUEMU_BIND_FUZZ_EXAMPLES``) against an
ASan+UBSan build of framework.nn._cpu, which turns any read or write out of bounds, and any
undefined behaviour, into a failure.
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import nnref
from conformance.cases import cases
from framework.nn._cpu import ffi, lib

BOUND = [name for code, name in enumerate(nnref.OPERATION_TYPES) if lib.npu_bind_lookup(code) != ffi.NULL]
CODES = {name: code for code, name in enumerate(nnref.OPERAND_TYPES)}
SCALARS = {CODES[t] for t in ("FLOAT32", "INT32", "UINT32", "BOOL", "FLOAT16")}
#: every operand type, and numbers that are none
TYPES = [*range(len(nnref.OPERAND_TYPES)), -1, len(nnref.OPERAND_TYPES), 99]
NASTY_SCALES = [0.5, 1.0, 0.0, -1.0, math.nan, math.inf, -math.inf, 1e-30, 1e30, 2.0**-40]
NASTY_ZERO_POINTS = [0, 127, 128, 255, -1, 256, 32767, -32768, 65535, 2**31 - 1, -(2**31)]
HUGE = [65536, 2**20, 2**31 - 1, 2**31, 2**32 - 1]
MAX_BYTES = 1 << 20     # a present operand's data is at most this (a bigger one is passed as NULL)
GUARD = 64               # bytes of guard on each side of an output
PATTERN = 0xA5
EXAMPLES = int(os.environ.get("NPUEMU_BIND_FUZZ_EXAMPLES", "12"))


def element_size(type: int) -> int:
    if 0 <= type < len(nnref.OPERAND_TYPES):
        return np.dtype(nnref.DTYPES[nnref.OPERAND_TYPES[type]]).itemsize
    return 4  # an unknown type: sized as a word, which no binding may read anyway


@dataclasses.dataclass
class Arg:
    """One ``struct npu_arg`` to be: what a caller could hand a binding."""

    type: int
    dims: list[int]
    has_rank: bool = True
    has_shape: bool = True
    data: np.ndarray | None = None  # uint8 bytes; None: NULL
    omitted: bool = False
    scale: float = 0.0
    zero_point: int = 0
    channel_scales: list[float] | None = None
    channel_dim: int = 0

    def byte_size(self) -> int:
        count = math.prod(self.dims) if self.type not in SCALARS or self.dims else 1
        return max(count, 1 if self.type in SCALARS else 0) * element_size(self.type)


def from_operand(operand: nnref.Operand | None) -> Arg:
    if operand is None or operand.value is None:
        return Arg(CODES[operand.type] if operand is not None else 0, [], omitted=True)
    value = np.ascontiguousarray(np.asarray(operand.value, dtype=nnref.DTYPES[operand.type]))
    cq = operand.channel_quant
    return Arg(CODES[operand.type], list(value.shape), data=value.view(np.uint8).reshape(-1).copy(),
               scale=float(np.float32(operand.scale)), zero_point=operand.zero_point,
               channel_scales=list(cq.scales) if cq else None, channel_dim=cq.channel_dim if cq else 0)


def output_of(operand: nnref.Operand) -> Arg:
    """An output as a model declares it: type and quantization, shape unknown."""
    arg = from_operand(nnref.Operand(operand.type, np.zeros(0), operand.scale, operand.zero_point, operand.channel_quant))
    arg.dims, arg.has_rank, arg.has_shape, arg.data = [], False, False, None
    return arg


# -- making hostile operands ------------------------------------------------------------------

def fill(rng: np.random.Generator, arg: Arg) -> None:
    """Gives arg data of its declared size (small values of its type, or any bytes), or NULL
    when that size is too big to hold."""
    size = arg.byte_size()
    if size > MAX_BYTES:
        arg.data = None
        return
    if rng.random() < 0.5 and 0 <= arg.type < len(nnref.OPERAND_TYPES):
        dtype = np.dtype(nnref.DTYPES[nnref.OPERAND_TYPES[arg.type]])
        values = rng.integers(-3, 8, size // dtype.itemsize).astype(dtype)
        arg.data = values.view(np.uint8).copy()
    else:
        arg.data = rng.integers(0, 256, size, dtype=np.uint8)


def nasty_dims(rng: np.random.Generator, rank: int) -> list[int]:
    dims = [int(rng.integers(1, 5)) for _ in range(rank)]
    for k in range(rank):
        roll = rng.random()
        if roll < 0.1:
            dims[k] = 0
        elif roll < 0.2:
            dims[k] = int(rng.choice(HUGE))
    return dims


def random_arg(rng: np.random.Generator) -> Arg:
    type = int(rng.choice(TYPES))
    rank = 0 if type in SCALARS and rng.random() < 0.7 else int(rng.integers(0, 7))
    arg = Arg(type, nasty_dims(rng, rank))
    arg.scale, arg.zero_point = float(rng.choice(NASTY_SCALES)), int(rng.choice(NASTY_ZERO_POINTS))
    if type == CODES["TENSOR_QUANT8_SYMM_PER_CHANNEL"] or rng.random() < 0.1:
        per_channel(rng, arg)
    if rng.random() < 0.15:
        arg.has_shape = False
        arg.has_rank = rng.random() < 0.5
    fill(rng, arg)
    if rng.random() < 0.1:
        arg.data = None
    if rng.random() < 0.05:
        arg.omitted = True
    return arg


def per_channel(rng: np.random.Generator, arg: Arg) -> None:
    """Per-channel scales, possibly none, possibly naming a dimension the tensor lacks."""
    arg.channel_dim = int(rng.integers(0, len(arg.dims) + 1)) if rng.random() < 0.8 else int(rng.choice([6, 7, 2**31, 2**32 - 1]))
    if rng.random() < 0.15:
        arg.channel_scales = None
        return
    count = arg.dims[arg.channel_dim] if arg.channel_dim < len(arg.dims) else 1
    count = min(max(count, 1), 1 << 16)   # a huge dimension's scales: more than the C may read without its data
    scales = rng.choice(NASTY_SCALES, count) if rng.random() < 0.5 else np.full(count, 0.5)
    arg.channel_scales = [float(s) for s in scales]


def mutate(rng: np.random.Generator, args: list[Arg]) -> list[Arg]:
    """One hostile change to a list of inputs."""
    what = rng.integers(0, 12)
    k = int(rng.integers(0, len(args))) if args else 0
    if what == 0:  # a count: none, one short, one long, many
        return [[], args[:-1], [*args, random_arg(rng)], [*args, *(random_arg(rng) for _ in range(int(rng.integers(2, 70))))]][int(rng.integers(0, 4))]
    if not args:
        return [random_arg(rng)]
    a = args[k] = dataclasses.replace(args[k])
    if what == 1:
        args[k] = random_arg(rng)
    elif what == 2:
        a.omitted = True
    elif what == 3:  # another type, same bytes
        a.type = int(rng.choice(TYPES))
        fill(rng, a)
    elif what == 4:  # another rank or shape
        a.dims = nasty_dims(rng, int(rng.integers(0, 7)))
        fill(rng, a)
    elif what == 5:  # one dimension 0 or huge
        if a.dims:
            a.dims[int(rng.integers(0, len(a.dims)))] = int(rng.choice([0, *HUGE]))
        else:
            a.dims = [int(rng.choice([1, 2, 0, *HUGE]))]
        fill(rng, a)
    elif what == 6:
        a.data = None
    elif what == 7:
        a.scale = float(rng.choice(NASTY_SCALES))
    elif what == 8:
        a.zero_point = int(rng.choice(NASTY_ZERO_POINTS))
    elif what == 9:
        per_channel(rng, a)
    elif what == 10:  # shape unknown (data kept: sized by the dims the descriptor still holds)
        a.has_shape = False
        a.has_rank = bool(rng.random() < 0.5)
    else:  # another value of the same type and shape
        fill(rng, a)
    return args


def mutate_outputs(rng: np.random.Generator, outs: list[Arg]) -> list[Arg]:
    what = rng.integers(0, 5)
    if what == 0:
        return [[], outs[:-1], [*outs, dataclasses.replace(outs[-1]) if outs else output_arg(rng)]][int(rng.integers(0, 3))]
    if not outs:
        return [output_arg(rng)]
    k = int(rng.integers(0, len(outs)))
    o = outs[k] = dataclasses.replace(outs[k])
    if what == 1:
        o.type = int(rng.choice(TYPES))
    elif what == 2:
        o.dims, o.has_rank, o.has_shape = nasty_dims(rng, int(rng.integers(0, 7))), True, True
    elif what == 3:
        o.scale, o.zero_point = float(rng.choice(NASTY_SCALES)), int(rng.choice(NASTY_ZERO_POINTS))
    else:
        per_channel(rng, o)
    return outs


def output_arg(rng: np.random.Generator) -> Arg:
    o = Arg(int(rng.choice(TYPES)), [], has_rank=False, has_shape=False)
    o.scale, o.zero_point = float(rng.choice(NASTY_SCALES)), int(rng.choice(NASTY_ZERO_POINTS))
    return o


# -- calling ----------------------------------------------------------------------------------

class Slots:
    """``struct npu_arg[]`` of a list of Args, and everything its pointers point into."""

    def __init__(self, args: list[Arg], *, outputs: bool = False):
        self.array = ffi.new("struct npu_arg[]", max(len(args), 1))
        self.keep: list = []
        self.guarded: list[tuple[np.ndarray, int]] = []
        for slot, arg in zip(self.array, args):
            self._fill(slot, arg, outputs)

    def _fill(self, slot, arg: Arg, output: bool) -> None:
        slot.omitted, slot.has_rank, slot.has_shape = arg.omitted, arg.has_rank, arg.has_shape
        t = slot.t
        t.type, t.rank = arg.type, len(arg.dims)
        for i, d in enumerate(arg.dims):
            t.dims[i] = d
        t.scale, t.zero_point, t.channel_dim = arg.scale, arg.zero_point, arg.channel_dim
        if arg.channel_scales is not None:
            scales = ffi.new("float[]", arg.channel_scales)
            self.keep.append(scales)
            t.channel_scales = scales
        if output and arg.data is not None:
            # the output's buffer between two guard zones
            buffer = np.full(GUARD + arg.data.size + GUARD, PATTERN, np.uint8)
            self.guarded.append((buffer, arg.data.size))
            self.keep.append(buffer)
            t.data = ffi.cast("void *", ffi.from_buffer(buffer, require_writable=True)) + GUARD
        elif arg.data is not None:
            data = arg.data.copy()   # exactly its bytes: ASan sees a read past them
            self.keep.append(data)
            t.data = ffi.from_buffer(data, require_writable=True) if data.size else ffi.NULL

    def guards_intact(self) -> bool:
        return all((b[:GUARD] == PATTERN).all() and (b[GUARD + n:] == PATTERN).all() for b, n in self.guarded)


def call(fn, operation: str, ins: list[Arg], outs: list[Arg], *, out_slots: Slots | None = None) -> tuple[int, Slots]:
    """Calls fn (npu_bind_check or npu_bind_run); checks the status, its sentence, the guards and the inputs."""
    in_slots = Slots(ins)
    out_slots = out_slots or Slots(outs, outputs=True)
    before = [bytes(k) for k in in_slots.keep if isinstance(k, np.ndarray)]
    why = ffi.new("char[200]")
    rc = fn(nnref.OPERATION_TYPES.index(operation), in_slots.array, len(ins), out_slots.array, len(outs), why, 200)
    sentence = ffi.string(why).decode()
    name = ffi.string(lib.npu_error_name(rc)).decode()
    assert rc == lib.NPU_OK or (rc < 0 and sentence.startswith(f"{operation}: ") and len(sentence) > len(operation) + 3), \
        f"{operation}: status {rc} ({name}) with the sentence {sentence!r}"
    assert out_slots.guards_intact(), f"{operation} wrote outside an output's buffer ({name}: {sentence!r})"
    assert before == [bytes(k) for k in in_slots.keep if isinstance(k, np.ndarray)], f"{operation} wrote into an input"
    return rc, out_slots


def check_and_run(rng: np.random.Generator, operation: str, ins: list[Arg], outs: list[Arg]) -> None:
    """npu_bind_check as the NDK calls it (shapes, maybe constants' data), then npu_bind_run with
    outputs sized by the shapes it computed, or by shapes declared at random."""
    probe = [dataclasses.replace(a, data=None) if rng.random() < 0.5 else a for a in ins]
    rc, checked = call(lib.npu_bind_check, operation, probe, outs)
    ran = []
    for slot, o in zip(checked.array, outs):
        o = dataclasses.replace(o)
        if rc == lib.NPU_OK and slot.has_shape and rng.random() < 0.8:
            o.dims = [slot.t.dims[i] for i in range(slot.t.rank)]
        elif not o.has_shape:
            o.dims = nasty_dims(rng, int(rng.integers(0, 5)))
        o.has_rank = o.has_shape = True
        size = o.byte_size()
        o.data = None if size > MAX_BYTES or rng.random() < 0.03 else np.zeros(size, np.uint8)
        ran.append(o)
    call(lib.npu_bind_run, operation, ins, ran)


@pytest.fixture(scope="module")
def conformance() -> dict[str, list]:
    """Each bound operation's conformance cases (harvested outside any @given)."""
    by_operation: dict[str, list] = {name: [] for name in BOUND}
    for case in cases():
        if case.operation in by_operation:
            by_operation[case.operation].append(case)
    return by_operation


FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 50,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SEEDS = st.integers(0, 2**32 - 1)


@pytest.mark.parametrize("type", [-1, 95, 2**31 - 1, -(2**31), *(
    code for code, name in enumerate(nnref.OPERATION_TYPES) if name not in BOUND)])
def test_an_operation_without_a_binding_is_refused(type):
    """Any number that is no bound operation: BAD_OPERATION and a sentence, whatever the operands."""
    why = ffi.new("char[200]")
    ins = Slots([Arg(CODES["TENSOR_FLOAT32"], [1], data=np.zeros(4, np.uint8))])
    for fn in (lib.npu_bind_check, lib.npu_bind_run):
        assert fn(type, ins.array, 1, ffi.NULL, 0, why, 200) == lib.NPU_E_BAD_OPERATION
        assert "has no binding" in ffi.string(why).decode()


@pytest.mark.parametrize("operation", BOUND)
@FUZZ
@given(seed=SEEDS)
def test_random_operands_get_a_status(operation, seed):
    """Any operand list at all: counts 0 to many, any type at any position, any shape."""
    rng = np.random.default_rng(seed)
    ins = [random_arg(rng) for _ in range(int(rng.choice([0, 1, 2, 3, 4, 7, 11, 24, 61, 70])))]
    outs = [output_arg(rng) for _ in range(int(rng.choice([0, 1, 1, 2, 3, 4])))]
    check_and_run(rng, operation, ins, outs)


@pytest.mark.parametrize("operation", BOUND)
@FUZZ
@given(seed=SEEDS, mutations=st.integers(1, 3), outputs_too=st.booleans())
def test_a_conformance_case_mutated_gets_a_status(conformance, operation, seed, mutations, outputs_too):
    """A valid call (one of the operation's conformance cases) with one to three hostile changes."""
    rng = np.random.default_rng(seed)
    mine = conformance[operation]
    if not mine:
        pytest.skip(f"{operation} has no conformance case")
    case = mine[int(rng.integers(0, len(mine)))]
    ins = [from_operand(i) for i in case.inputs]
    outs = [output_of(e) for e in case.expected]
    for _ in range(mutations):
        ins = mutate(rng, ins)
    if outputs_too:
        outs = mutate_outputs(rng, outs)
    check_and_run(rng, operation, ins, outs)
