"""Garbage models through the binding: always a clear NpuError, never a crash.

A driver sits in the HAL process and receives models from apps; a malformed
model must come back as an error an app can read, not take the process down.
Hypothesis takes a valid model (the HAL's Model parcelable) and corrupts one field at
a time: indexes, dimensions, types, lifetimes, locations, scalars. A value the
parcelable's own checks refuse (an enum number it lacks) never reaches a driver.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npuhal
from model_edits import with_main, with_operand, with_operation
from npuhal import FuseCode, ModelBuilder, OperationType


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


def try_everything(driver, model):
    for call in (
        lambda: driver.supported_operations(0, model),
        lambda: driver.load_model(0, model),
        lambda: npuhal.run_model(model, [np.ones(shape, np.float32) for shape in npuhal.io_shapes(model)[0]]),
    ):
        try:
            call()
        except npuhal.NpuError as exc:
            assert str(exc)  # a readable message, whichever layer found it


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted())
def test_a_corrupted_model_is_an_error_not_a_crash(model):
    with npuhal.Driver.open() as driver:
        if model is not None:
            try_everything(driver, model)
        # ...and the driver still works afterwards.
        handle = driver.load_model(0, BASE)
        x, y = np.ones((1, 3, 3, 2), np.float32), np.zeros((1, 2, 2, 2), np.float32)
        work = driver.submit(handle, [x, y], uid=1, job_priority=0)
        driver.run_until_idle()
        assert driver.outputs(work)[0].shape == (1, 2, 2, 2)


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
