"""Garbage models through the binding: always a clear NpuError, never a crash.

A driver sits in the HAL process and receives models from apps; a malformed
model must come back as an error an app can read, not take the process down.
Hypothesis takes a valid model and corrupts one field at a time: indexes,
dimensions, types, lifetimes, locations, scalars.
"""

import copy

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npuhal
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
    return m.build().to_hal()


BASE = base_model()
WILD = st.one_of(st.integers(-3, 12), st.sampled_from([2**31 - 1, 2**32 - 1, 2**31, -(2**31)]))


@st.composite
def corrupted(draw):
    hal = copy.deepcopy(BASE)
    hal["pools"] = list(BASE["pools"])
    target = draw(st.sampled_from(["op_input", "op_output", "op_type", "dims", "type", "lifetime", "location", "io", "values", "drop"]))
    if target in ("op_input", "op_output"):
        op = draw(st.sampled_from(hal["operations"]))
        key = "inputs" if target == "op_input" else "outputs"
        if draw(st.booleans()) and op[key]:
            op[key][draw(st.integers(0, len(op[key]) - 1))] = draw(st.integers(0, 40))
        else:
            op[key] = draw(st.lists(st.integers(0, 20), max_size=12))
    elif target == "op_type":
        draw(st.sampled_from(hal["operations"]))["type"] = draw(WILD)
    elif target == "dims":
        operand = draw(st.sampled_from(hal["operands"]))
        operand["dimensions"] = draw(st.lists(st.integers(0, 9), max_size=8))
    elif target == "type":
        draw(st.sampled_from(hal["operands"]))["type"] = draw(WILD)
    elif target == "lifetime":
        draw(st.sampled_from(hal["operands"]))["lifetime"] = draw(WILD)
    elif target == "location":
        loc = draw(st.sampled_from(hal["operands"]))["location"]
        loc[draw(st.sampled_from(["poolIndex", "offset", "length"]))] = draw(st.integers(0, 2**32 - 1))
    elif target == "io":
        key = draw(st.sampled_from(["inputIndexes", "outputIndexes"]))
        hal[key] = draw(st.lists(st.integers(0, 20), max_size=4))
    elif target == "values":
        hal["operandValues"] = hal["operandValues"][: draw(st.integers(0, len(hal["operandValues"])))]
    else:
        what = draw(st.sampled_from(["operands", "operations"]))
        if hal[what]:
            del hal[what][draw(st.integers(0, len(hal[what]) - 1))]
    return hal


def try_everything(driver, hal):
    for call in (
        lambda: driver.supported_operations(0, hal),
        lambda: driver.load_model(0, hal),
        lambda: npuhal.run_model(hal, [np.ones(npuhal.Model.from_hal(hal).input_shape(i), np.float32) for i in range(len(hal["inputIndexes"]))]),
    ):
        try:
            call()
        except npuhal.NpuError as exc:
            assert str(exc)  # a readable message, whichever layer found it


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted())
def test_a_corrupted_model_is_an_error_not_a_crash(hal):
    with npuhal.Driver.open() as driver:
        try_everything(driver, hal)
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
