"""Hostile models through the driver API: always a clear NpuError, never a crash.

A driver sits in the HAL process and receives models from apps; a malformed model must
come back as an error an app can read, not take the process down. Three kinds of model:

- BASE, a float32 CONV_2D/ADD/SOFTMAX model, with one field of the HAL's Model
  parcelable corrupted: indexes, dimensions, types, lifetimes, locations, scalars;
- every conformance case (tests/conformance: the 95 operations of NN HAL 1.2 in every
  operand type the 1.2 spec allows them: float16, quant8 asymmetric and per-channel,
  quant16, bool8, int32, relaxed float32) built as an app builds it, in the HAL's Model
  form, with one to three hostile changes: an operand's type (any of the 14), scale (0,
  negative, NaN, infinite, subnormal, huge), zero point (out of its type's range),
  per-channel parameters (scales that do not match the channel dimension, a channelDim
  the tensor lacks, bad scales, none, or some on a type that has none), dimensions (0,
  rank 0 to 8, 2^16 to 2^32-1), the operation's type (any of the 95: another's arity
  and types), its inputs and outputs (one short, one long, repeated, any index),
  lifetimes, locations, values, the model's inputs and outputs, relaxed or not;
- each of the 95 operations handed the operands of the others (wrong arities and types);
and a model of unknown dimensions given run-time dimensions of any kind at submission.

Each model goes to ``supported_operations``, ``load_model`` (then, if loaded, a work
submitted, run to its end and the model unloaded) and ``run_model`` (the CPU path), on one
of the driver's devices: every call succeeds or raises ``NpuError`` with a message, and the
driver still runs BASE afterwards. A value the parcelable's own checks refuse (an enum
number it lacks, a number its int field cannot hold) never reaches a driver.

``make fuzz-driver`` runs it long (``NPUEMU_DRIVER_FUZZ_EXAMPLES`` examples per test)
against ASan+UBSan builds of npuhal._npu and framework.nn._cpu, which turns any read or
write out of bounds, and any undefined behaviour, into a failure.
"""

import functools
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npuhal
from conformance.build import build, expressible
from conformance.cases import cases
from framework.nn import NeuralNetworksError, toAidlModel
from interfaces.android.hardware.neuralnetworks import (
    OperandExtraParams,
    OperandLifeTime,
    OperandType,
    SymmPerChannelQuantParams,
)
from model_edits import with_main, with_operand, with_operation
from npuhal import FuseCode, ModelBuilder, OperationType

EXAMPLES = int(os.environ.get("NPUEMU_DRIVER_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def base_model():
    rng = np.random.default_rng(0)
    m = ModelBuilder()
    x = m.input((1, 3, 3, 2))
    f = m.constant(rng.standard_normal((2, 2, 2, 2), dtype=np.float32))
    b = m.constant(np.zeros(2, np.float32))
    params = [m.int32(v) for v in (0, 0, 0, 0, 1, 1, FuseCode.RELU)]
    c = m.operation(OperationType.CONV_2D, [x, f, b, *params], (1, 2, 2, 2))
    y = m.input((1, 2, 2, 2))
    s = m.operation(OperationType.ADD, [c, y, m.int32(FuseCode.NONE)], (1, 2, 2, 2))
    m.output(m.operation(OperationType.SOFTMAX, [s, m.float32(1.0)], (1, 2, 2, 2)))
    return m.build()


BASE = base_model()
WILD = st.one_of(st.integers(-3, 12), st.sampled_from([2**31 - 1, 2**32 - 1, 2**31, -(2**31)]))
INDEX = st.integers(0, 40)
NASTY_SCALES = [0.5, 1.0, 0.0, -1.0, math.nan, math.inf, -math.inf, 1e-45, 1e-30, 1e30]
NASTY_ZERO_POINTS = [0, 1, 127, 128, 255, -1, 256, 32767, -32768, 65535, 65536, 2**31 - 1, -(2**31)]
ABSURD = [0, 1, 2, 3, 7, 65536, 2**20, 2**31 - 1, 2**31, 2**32 - 1]
MAX_ELEMENTS = 1 << 16  # an input or output bigger than this is given a wrong-sized buffer


@st.composite
def corrupted(draw):
    """BASE with one field corrupted; None when the parcelable itself refuses the value
    (an enum number it lacks, a number its int field cannot hold): no driver sees that."""
    main = BASE.main
    target = draw(st.sampled_from(["op_input", "op_output", "op_type", "dims", "type", "lifetime", "location", "io", "values", "drop"]))
    try:
        if target in ("op_input", "op_output"):
            k = draw(st.integers(0, len(main.operations) - 1))
            key = "inputs" if target == "op_input" else "outputs"
            indexes = list(getattr(main.operations[k], key))
            if draw(st.booleans()) and indexes:
                indexes[draw(st.integers(0, len(indexes) - 1))] = draw(INDEX)
            else:
                indexes = draw(st.lists(st.integers(0, 20), max_size=12))
            return with_operation(BASE, k, **{key: indexes})
        if target == "op_type":
            return with_operation(BASE, draw(st.integers(0, len(main.operations) - 1)), type=draw(WILD))
        i = draw(st.integers(0, len(main.operands) - 1))
        if target == "dims":
            return with_operand(BASE, i, dimensions=draw(st.lists(st.integers(0, 9), max_size=8)))
        if target in ("type", "lifetime"):
            return with_operand(BASE, i, **{target: draw(WILD)})
        if target == "location":
            field = draw(st.sampled_from(["poolIndex", "offset", "length"]))
            value = draw(st.integers(0, 2**31 - 1 if field == "poolIndex" else 2**32 - 1))
            return with_operand(BASE, i, location=main.operands[i].location.replace(**{field: value}))
        if target == "io":
            key = draw(st.sampled_from(["inputIndexes", "outputIndexes"]))
            return with_main(BASE, **{key: draw(st.lists(st.integers(0, 20), max_size=4))})
        if target == "values":
            return BASE.replace(operandValues=BASE.operandValues[: draw(st.integers(0, len(BASE.operandValues)))])
        what = draw(st.sampled_from(["operands", "operations"]))
        items = list(getattr(main, what))
        del items[draw(st.integers(0, len(items) - 1))]
        return with_main(BASE, **{what: items})
    except (ValueError, TypeError, OverflowError):
        return None  # the parcelable refused it: the binder would too, before any driver


# -- calling the driver ---------------------------------------------------------------------


def attempt(call):
    """``call()``'s result, or None when it raised an NpuError (which must say something)."""
    try:
        return call()
    except npuhal.NpuError as exc:
        assert str(exc), f"{type(exc).__name__} without a message"
        return None


def buffers(shapes):
    """A buffer for each shape: small values when it is small enough to hold, else one
    element (a wrong size, which the driver must refuse before C reads it)."""
    return [(np.arange(math.prod(s)) % 5).astype(np.float32) if math.prod(s) <= MAX_ELEMENTS else np.zeros(1, np.float32)
            for s in shapes]


def outputs_for(shapes):
    """None (the driver allocates) when every output is small, else wrong-sized buffers."""
    return None if all(math.prod(s) <= MAX_ELEMENTS for s in shapes) else [np.zeros(1, np.float32) for _ in shapes]


def try_everything(driver, model, device=0):
    attempt(lambda: driver.supported_operations(device, model))
    shapes = attempt(lambda: npuhal.io_shapes(model))
    handle = attempt(lambda: driver.load_model(device, model))
    if handle is not None:
        if shapes is not None:
            work = attempt(lambda: driver.submit(handle, buffers(shapes[0]), outputs_for(shapes[1]), uid=1, job_priority=0))
            if work is not None:
                driver.run_until_idle()
                ended = driver.work_ended(work)
                assert ended is not None, "a submitted work never ended"
                if ended.reason is npuhal.EndReason.COMPLETED:
                    driver.outputs(work)
        driver.unload_model(handle)
    if shapes is not None:
        attempt(lambda: npuhal.run_model(model, buffers(shapes[0]), outputs_for(shapes[1])))


def still_works(driver):
    handle = driver.load_model(0, BASE)
    x, y = np.ones((1, 3, 3, 2), np.float32), np.zeros((1, 2, 2, 2), np.float32)
    work = driver.submit(handle, [x, y], uid=1, job_priority=0)
    driver.run_until_idle()
    assert driver.outputs(work)[0].shape == (1, 2, 2, 2)
    driver.unload_model(handle)


def close_pools(model):
    for pool in model.pools:
        pool.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted())
def test_a_corrupted_model_is_an_error_not_a_crash(model):
    with npuhal.Driver.open() as driver:
        if model is not None:
            try_everything(driver, model)
        still_works(driver)  # ...and the driver still works afterwards.


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 200), min_size=0, max_size=4), st.lists(st.integers(0, 200), min_size=0, max_size=3))
def test_buffers_of_any_size_are_checked(in_sizes, out_sizes):
    with npuhal.Driver.open() as driver:
        handle = driver.load_model(0, BASE)
        ins = [np.zeros(n, np.float32) for n in in_sizes]
        outs = [np.zeros(n, np.float32) for n in out_sizes]
        try:
            work = driver.submit(handle, ins, outs, uid=1, job_priority=0)
        except npuhal.NpuValueError:
            return
        # Only the exact sizes get through.
        assert [a.size for a in ins] == [18, 8] and [a.size for a in outs] == [8]
        driver.run_until_idle()
        assert driver.work_ended(work).reason is npuhal.EndReason.COMPLETED


def dynamic_model():
    """x + y, both [?, ?]: every dimension is the submission's."""
    m = ModelBuilder()
    x, y = m.input((0, 0)), m.input((0, 0))
    m.output(m.operation(OperationType.ADD, [x, y, m.int32(FuseCode.NONE)], (0, 0)))
    return m.build()


DIMS = st.lists(st.one_of(st.integers(-2, 5), st.sampled_from([2**31, 2**32 - 1, 2**32, 2**40])), max_size=7)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.none(), DIMS), min_size=0, max_size=3), st.lists(st.integers(0, 40), min_size=2, max_size=2),
       st.integers(0, 40))
def test_run_time_dimensions_of_any_kind_are_checked(input_dims, in_sizes, out_size):
    """Dimensions given at submission that overflow, are zero or negative, contradict the
    model, each other or the buffers: a clear error, or a run that computes x + y."""
    with npuhal.Driver.open() as driver:
        handle = driver.load_model(0, dynamic_model())
        x, y = (np.arange(n, dtype=np.float32) for n in in_sizes)
        out = np.full(out_size, -1, np.float32)
        try:
            work = driver.submit(handle, [x, y], [out], uid=1, job_priority=0, input_dims=input_dims)
        except npuhal.NpuError as exc:
            assert str(exc)
        else:
            driver.run_until_idle()
            assert driver.work_ended(work).reason is npuhal.EndReason.COMPLETED
            ((dims, sufficient),) = driver.output_shapes(work)
            want = x.reshape(input_dims[0]) + y.reshape(input_dims[1])  # NNAPI broadcasts as numpy does
            assert sufficient and dims == want.shape
            n = want.size
            np.testing.assert_array_equal(out[:n], want.reshape(-1))
            assert (out[n:] == -1).all()  # nothing written past the output
        # ...and the driver still runs the model afterwards
        work = driver.submit(handle, [np.ones(4, np.float32)] * 2, [np.zeros(4, np.float32)], uid=1, job_priority=0,
                             input_dims=[(2, 2), (2, 2)])
        driver.run_until_idle()
        assert driver.outputs(work)[0].tolist() == [[2, 2], [2, 2]]


# -- conformance cases, in every operand type, made hostile ----------------------------------


@functools.cache
def conformance_cases():
    return [c for c in cases() if expressible(c) is None]


def case_model(case):
    """``case`` as the HAL's Model parcelable (weights as constants), as an app's NDK sends it."""
    try:
        built = build(case, "constants")
    except NeuralNetworksError:
        return None  # a case only another layout expresses
    return toAidlModel(built.model.to_hal())


OPERAND_MUTATIONS = ["type", "scale", "zero_point", "channel_quant", "dims", "one_dim", "lifetime", "location"]
OPERATION_MUTATIONS = ["op_type", "op_inputs", "op_outputs"]
MUTATIONS = [*OPERAND_MUTATIONS, *OPERATION_MUTATIONS, "values", "io", "drop", "relax"]


def mutate(rng, model):
    """``model`` with one hostile change (unchanged if the parcelable refuses it)."""
    main = model.main

    def pick(values):
        return values[int(rng.integers(0, len(values)))]

    def below(n):
        return int(rng.integers(0, max(n, 1)))

    what = pick(MUTATIONS)
    i = below(len(main.operands))
    operand = main.operands[i] if main.operands else None
    k = below(len(main.operations))
    if (operand is None and what in OPERAND_MUTATIONS) or (not main.operations and what in OPERATION_MUTATIONS):
        return model  # an earlier change dropped them all
    try:
        if what == "type":
            return with_operand(model, i, type=pick(list(OperandType)))
        if what == "scale":
            return with_operand(model, i, scale=pick(NASTY_SCALES))
        if what == "zero_point":
            return with_operand(model, i, zeroPoint=pick(NASTY_ZERO_POINTS))
        if what == "channel_quant":
            if below(5) == 0:
                return with_operand(model, i, extraParams=None)
            rank = len(operand.dimensions)
            dim = pick([0, max(rank - 1, 0), rank, rank + 3, 2**31 - 1])
            channels = operand.dimensions[dim] if dim < rank else 1
            count = min(pick([0, 1, 3, channels, channels + 1, max(channels - 1, 0)]), 1 << 12)
            scales = [pick(NASTY_SCALES) if below(2) else 0.5 for _ in range(count)]
            quant = SymmPerChannelQuantParams(scales=scales, channelDim=dim)
            return with_operand(model, i, extraParams=OperandExtraParams(channelQuant=quant))
        if what == "dims":
            return with_operand(model, i, dimensions=[pick(ABSURD) for _ in range(below(9))])
        if what == "one_dim":
            dims = list(operand.dimensions) or [1]
            dims[below(len(dims))] = pick(ABSURD)
            return with_operand(model, i, dimensions=dims)
        if what == "op_type":
            return with_operation(model, k, type=pick(list(OperationType)))
        if what in ("op_inputs", "op_outputs"):
            key = "inputs" if what == "op_inputs" else "outputs"
            indexes = list(getattr(main.operations[k], key))
            any_index = len(main.operands) + 3
            shape = pick(["short", "long", "repeat", "any", "list"])
            if shape == "short":
                indexes = indexes[:-1]
            elif shape == "long":
                indexes = [*indexes, below(any_index)]
            elif shape == "repeat" and indexes:
                indexes[below(len(indexes))] = indexes[0]
            elif shape == "any" and indexes:
                indexes[below(len(indexes))] = below(any_index)
            else:
                indexes = [below(any_index) for _ in range(below(71))]
            return with_operation(model, k, **{key: indexes})
        if what == "lifetime":
            return with_operand(model, i, lifetime=pick(list(OperandLifeTime)))
        if what == "location":
            field = pick(["poolIndex", "offset", "length"])
            value = pick([0, 1, 3, 4, 127, 128, 4096, 2**31 - 1, 2**32 - 1])
            return with_operand(model, i, location=operand.location.replace(**{field: value}))
        if what == "values":
            return model.replace(operandValues=model.operandValues[: below(len(model.operandValues) + 1)])
        if what == "io":
            key = pick(["inputIndexes", "outputIndexes"])
            return with_main(model, **{key: [below(len(main.operands) + 3) for _ in range(below(5))]})
        if what == "drop":
            key = pick(["operands", "operations"])
            items = list(getattr(main, key))
            if items:
                del items[below(len(items))]
            return with_main(model, **{key: items})
        return model.replace(relaxComputationFloat32toFloat16=not model.relaxComputationFloat32toFloat16)
    except (ValueError, TypeError, OverflowError):
        return model  # the parcelable refused it: the binder would too, before any driver


@pytest.fixture(scope="module")
def driver():
    with npuhal.Driver.open() as d:
        yield d


class Cases(list):
    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing example
        return f"<{len(self)} conformance cases>"


@pytest.fixture(scope="module")
def pool():
    """The conformance cases, harvested outside any @given (the harvest runs nnref's tests)."""
    return Cases(conformance_cases())


@FUZZ
@given(seed=st.integers(0, 2**32 - 1))
def test_a_conformance_case_made_hostile_is_an_error_or_a_result(driver, pool, seed):
    """Any operation in any operand type, one to three fields made hostile."""
    rng = np.random.default_rng(seed)
    model = original = case_model(pool[int(rng.integers(0, len(pool)))])
    if model is None:
        return
    try:
        for _ in range(int(rng.integers(1, 4))):
            model = mutate(rng, model)
        try_everything(driver, model, int(rng.integers(0, len(driver.devices))))
        still_works(driver)
    finally:
        close_pools(original)


def donors():
    """One case model per distinct (operation, input count, operand types): the operand lists
    the 95 operations are handed, each the wrong arity or types for most of them."""
    seen, picked = set(), []
    for case in conformance_cases():
        key = (len(case.inputs), tuple(o.type if o is not None else None for o in case.inputs))
        if key not in seen:
            seen.add(key)
            picked.append(case)
    return picked[::max(1, len(picked) // 40)]


@pytest.mark.parametrize("operation", list(OperationType), ids=lambda t: t.name)
def test_every_operation_given_other_operations_operands_is_an_error_or_a_result(driver, pool, operation):
    for case in donors():
        model = case_model(case)
        if model is None:
            continue
        try:
            try_everything(driver, with_operation(model, 0, type=operation), int(operation) % len(driver.devices))
        finally:
            close_pools(model)
    still_works(driver)
