"""The model builder: NDK validation rules, shape inference, the HAL format and back."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nn_reference as ref
from framework.nn import (
    BadDataError,
    BadStateError,
    DeviceDescriptor,
    DeviceType,
    FuseCode,
    HalModel,
    Model,
    OperandLifeTime,
    OperandType,
    OperationType,
    createPlan,
    getSupportedOperationsForDevices,
    uniformCapabilities,
    validateModel,
)
from interfaces.android.hardware.neuralnetworks import DataLocation, Operand, Operation, Subgraph
from interfaces.android.hardware.neuralnetworks import Model as AidlModel

T = OperandType.TENSOR_FLOAT32
I32 = OperandType.INT32
F32 = OperandType.FLOAT32


def tensor(m, dims):
    return m.addOperand(T, dims)


def const(m, array):
    array = np.asarray(array, np.float32)
    i = m.addOperand(T, array.shape)
    m.setOperandValue(i, array)
    return i


def int32(m, value):
    i = m.addOperand(I32)
    m.setOperandValue(i, value)
    return i


def float32(m, value):
    i = m.addOperand(F32)
    m.setOperandValue(i, value)
    return i


def add_model(shape_a=(2, 3), shape_b=(2, 3), out=(2, 3), fuse=FuseCode.NONE):
    m = Model()
    a, b = tensor(m, shape_a), tensor(m, shape_b)
    y = tensor(m, out)
    m.addOperation(OperationType.ADD, [a, b, int32(m, fuse)], [y])
    m.identifyInputsAndOutputs([a, b], [y])
    return m


def fc_model(batch=2, size=40, units=3):
    rng = np.random.default_rng(0)
    m = Model()
    x = tensor(m, [batch, size])
    w = const(m, rng.standard_normal((units, size)))
    b = const(m, rng.standard_normal(units))
    y = tensor(m, [batch, units])
    m.addOperation(OperationType.FULLY_CONNECTED, [x, w, b, int32(m, FuseCode.RELU)], [y])
    m.identifyInputsAndOutputs([x], [y])
    return m


def conv_params(m, left=0, right=0, top=0, bottom=0, stride_w=1, stride_h=1, fuse=FuseCode.NONE):
    return [int32(m, v) for v in (left, right, top, bottom, stride_w, stride_h, fuse)]


def conv_model(m=None, h=5, w=5, c=2, out=3, fh=3, fw=3, declared=(), **params):
    m = Model() if m is None else m
    x = tensor(m, [1, h, w, c])
    f = const(m, np.linspace(-1, 1, out * fh * fw * c).reshape(out, fh, fw, c))
    b = const(m, np.arange(out))
    y = tensor(m, declared)
    m.addOperation(OperationType.CONV_2D, [x, f, b, *conv_params(m, **params)], [y])
    m.identifyInputsAndOutputs([x], [y])
    return m, y


# -- the HAL layout --------------------------------------------------------------


def test_small_values_are_copied_into_operand_values_and_large_ones_pooled():
    weights = np.arange(3 * 40, dtype=np.float32).reshape(3, 40)  # 480 bytes: pooled
    bias = np.array([1.0, 2.0, 3.0], np.float32)  # 12 bytes: copied
    m = Model()
    x, w, b = tensor(m, [1, 40]), tensor(m, [3, 40]), tensor(m, [3])
    m.setOperandValue(w, weights)
    m.setOperandValue(b, bias)
    fuse = int32(m, FuseCode.NONE)
    y = tensor(m, [1, 3])
    m.addOperation(OperationType.FULLY_CONNECTED, [x, w, b, fuse], [y])
    m.identifyInputsAndOutputs([x], [y])
    weights[:] = -1  # the model copied the value; the app may reuse its buffer
    m.finish()
    hal = m.to_hal()
    assert hal.operands[w].lifetime == OperandLifeTime.CONSTANT_POOL
    loc = hal.operands[w].location
    assert (loc.poolIndex, loc.length) == (0, 480) and loc.offset % 64 == 0
    assert np.array_equal(hal.constantArray(w), np.arange(120, dtype=np.float32).reshape(3, 40))
    assert hal.operands[b].lifetime == OperandLifeTime.CONSTANT_COPY
    loc = hal.operands[b].location
    assert hal.operandValues[loc.offset : loc.offset + loc.length] == bias.tobytes()
    assert hal.constantArray(fuse).item() == 0
    assert hal.operands[x].lifetime == OperandLifeTime.SUBGRAPH_INPUT
    assert hal.operands[y].lifetime == OperandLifeTime.SUBGRAPH_OUTPUT
    assert (hal.inputIndexes, hal.outputIndexes) == ([x], [y])


def test_value_from_memory_references_the_apps_buffer_after_the_models_own_pool():
    memory = bytearray(1024)
    np.frombuffer(memory, np.float32)[8:128] = np.arange(120)
    m = Model()
    x = tensor(m, [1, 40])
    w = tensor(m, [3, 40])
    m.setOperandValueFromMemory(w, memory, 32, 480)
    big_bias = const(m, np.zeros((1, 40)))  # 160 bytes: the model's own pool
    y = tensor(m, [1, 40])
    m.addOperation(OperationType.ADD, [x, big_bias, int32(m, 0)], [y])
    z = tensor(m, [1, 3])
    m.addOperation(OperationType.FULLY_CONNECTED, [y, w, const(m, [0, 0, 0]), int32(m, 0)], [z])
    m.identifyInputsAndOutputs([x], [z])
    m.finish()
    hal = m.to_hal()
    assert len(hal.pools) == 2 and hal.pools[1] is memory
    assert hal.operands[w].location.poolIndex == 1 and hal.operands[w].location.offset == 32
    assert hal.constantArray(w)[2, 39] == 119
    m = Model()
    w = tensor(m, [3, 40])
    with pytest.raises(BadDataError, match="outside the 1024-byte memory"):
        m.setOperandValueFromMemory(w, memory, 1000, 480)
    with pytest.raises(BadDataError, match="needs 480 bytes, got length 4"):
        m.setOperandValueFromMemory(w, memory, 0, 4)
    with pytest.raises(BadDataError, match="not a buffer"):
        m.setOperandValueFromMemory(w, [0] * 480, 0, 480)


def test_the_hal_model_is_the_aidl_subgraph_and_sends_as_the_model_parcelable():
    from framework.nn import toAidlModel

    m = fc_model()
    m.finish()
    hal = m.to_hal()
    assert isinstance(hal.main, Subgraph) and hal.operands is hal.main.operands
    assert hal.operations == [Operation(type=OperationType.FULLY_CONNECTED, inputs=[0, 1, 2, 4], outputs=[3])]
    assert hal.operands[1].location == DataLocation(poolIndex=0, offset=0, length=480)
    parcel = toAidlModel(hal)
    try:
        # No operand or operation changes form on the way to a driver: the same subgraph.
        assert isinstance(parcel, AidlModel) and parcel.main is hal.main and parcel.referenced == []
        assert parcel.operandValues == hal.operandValues
        assert [bytes(p.mapReadOnly()) for p in parcel.pools] == [bytes(p) for p in hal.pools]
        back = HalModel(parcel.main, parcel.operandValues, [bytes(p.mapReadOnly()) for p in parcel.pools])
        assert Model.from_hal(back).to_hal() == hal
    finally:
        for pool in parcel.pools:
            pool.close()


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (lambda h: h.operands[0].replace(type=77), ValueError, "77 is not a value of .*OperandType"),
        (lambda h: h.operands[0].replace(dimensions="2x40"), TypeError, "dimensions"),
        (lambda h: h.operations[0].replace(type=95), ValueError, "95 is not a value of .*OperationType"),
        (lambda h: h.operations[0].replace(inputs=[0, 1, 2.5, 3]), TypeError, "inputs"),
        (lambda h: HalModel(h.main, operandValues="text"), BadDataError, "operandValues must be bytes"),
        (lambda h: HalModel(h.main, pools=[42]), BadDataError, "pool 0 is not a buffer"),
        (lambda h: HalModel({"operands": []}), BadDataError, "main is a Subgraph parcelable, not dict"),
    ],
)
def test_malformed_fields_are_refused_where_they_are_made(bad, error, match):
    m = fc_model()
    m.finish()
    with pytest.raises(error, match=match):
        bad(m.to_hal())


def test_validate_refuses_hal_models_that_break_the_rules():
    import dataclasses

    m = fc_model()
    m.finish()
    hal = m.to_hal()

    def with_main(**changes):
        return dataclasses.replace(hal, main=hal.main.replace(**changes))

    w = hal.operands[1]
    too_long = w.replace(location=w.location.replace(length=484))
    with pytest.raises(BadDataError, match="outside"):
        validateModel(with_main(operands=[hal.operands[0], too_long, *hal.operands[2:]]))
    wrong_size = w.replace(dimensions=[3, 39])
    with pytest.raises(BadDataError, match="needs 468"):
        validateModel(with_main(operands=[hal.operands[0], wrong_size, *hal.operands[2:]]))
    with pytest.raises(BadDataError, match="SUBGRAPH_INPUT but not in inputIndexes"):
        validateModel(with_main(inputIndexes=[]))
    with pytest.raises(BadDataError, match="not SUBGRAPH_OUTPUT"):
        validateModel(with_main(outputIndexes=[0]))


def test_hal_operations_must_be_in_run_order():
    m = Model()
    x = tensor(m, [2])
    t = tensor(m, [2])
    y = tensor(m, [2])
    m.addOperation(OperationType.RELU, [x], [t])
    m.addOperation(OperationType.RELU, [t], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    hal = m.to_hal()
    import dataclasses

    swapped = dataclasses.replace(hal, main=hal.main.replace(operations=hal.operations[::-1]))
    with pytest.raises(BadDataError, match="before any operation writes it"):
        Model.from_hal(swapped)


# -- run order -------------------------------------------------------------------


def test_finish_sorts_operations_into_run_order_and_keeps_app_numbering_for_queries():
    m = Model()
    x = tensor(m, [2, 2])
    t = tensor(m, [2, 2])
    y = tensor(m, [2, 2])
    second = m.addOperation(OperationType.ADD, [t, x, int32(m, 0)], [y])  # reads t, written below
    first = m.addOperation(OperationType.RELU, [x], [t])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    hal = m.to_hal()
    assert [op.type for op in hal.operations] == [OperationType.RELU, OperationType.ADD]
    assert m.appOperationIndex(0) == first and m.appOperationIndex(1) == second
    relu_only = DeviceDescriptor("acme-npu", DeviceType.ACCELERATOR, "1", 29, uniformCapabilities(1, 1), {OperationType.RELU})
    supported = getSupportedOperationsForDevices(m, [relu_only])
    assert supported[first] is True and supported[second] is False
    x_value = np.array([[1, -2], [-3, 4]], np.float32)
    assert np.array_equal(ref.run(hal, [x_value])[0], np.maximum(x_value, 0) + x_value)


def test_an_operation_cycle_is_bad_data_at_finish():
    m = Model()
    x = tensor(m, [2])
    a, b = tensor(m, [2]), tensor(m, [2])
    m.addOperation(OperationType.ADD, [x, b, int32(m, 0)], [a])
    m.addOperation(OperationType.RELU, [a], [b])
    m.identifyInputsAndOutputs([x], [a])
    with pytest.raises(BadDataError, match="before any operation writes it"):
        m.finish()


# -- validation: BAD_DATA at the call ------------------------------------------


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((99, []), "unknown operand type 99"),
        ((I32, [1]), "scalar has no dimensions"),
        ((T, [2, -1]), r"ints in 0\.\.2\^32-1"),
        ((T, [2.0]), r"ints in 0\.\.2\^32-1"),
        ((T, "23"), "sequence of ints"),
        ((OperandType.TENSOR_QUANT8_ASYMM, [2]), "needs a finite scale > 0"),
    ],
)
def test_add_operand_refuses(args, match):
    with pytest.raises(BadDataError, match=match):
        Model().addOperand(*args)


@pytest.mark.parametrize(
    ("operand", "value", "match"),
    [
        ((T, [2, 2]), b"\0" * 12, "needs 16 bytes, got 12"),
        ((T, [2, 2]), np.zeros((4,), np.float32), r"value has shape \[4\]"),
        ((T, [2, 2]), [[1, 2], [3]], "not an array"),
        ((I32, []), 1.5, "converted with loss"),
        ((I32, []), 2**31, "out of its range"),
        ((T, [2, 0]), np.zeros((2, 0)), "fully specified"),
        ((T, []), 1.0, "fully specified"),
        ((F32, []), "one", "converted with loss"),
        ((F32, []), 1e300, "overflows FLOAT32"),
        ((T, [2]), [1.0, -1e39], "overflows TENSOR_FLOAT32"),
        ((OperandType.BOOL, []), 1, "converted with loss"),
    ],
)
def test_set_operand_value_refuses_values_of_the_wrong_size_or_kind(operand, value, match):
    m = Model()
    i = m.addOperand(*operand)
    with pytest.raises(BadDataError, match=match):
        m.setOperandValue(i, value)


def test_set_operand_value_refuses_bad_indexes_inputs_and_outputs():
    m = add_model()
    for index in (-1, 4, 99, "0", True):
        with pytest.raises(BadDataError):
            m.setOperandValue(index, np.zeros((2, 3)))
    with pytest.raises(BadDataError, match="SUBGRAPH_INPUT and cannot have a value"):
        m.setOperandValue(0, np.zeros((2, 3)))
    with pytest.raises(BadDataError, match="SUBGRAPH_OUTPUT and cannot have a value"):
        m.setOperandValue(2, np.zeros((2, 3)))
    m2 = Model()
    x, y = tensor(m2, [2]), tensor(m2, [2])
    m2.addOperation(OperationType.RELU, [x], [y])
    with pytest.raises(BadDataError, match="written by operation 0"):
        m2.setOperandValue(y, [1, 2])


def test_scalar_values_convert_from_python_numbers_and_enums():
    m = Model()
    beta = float32(m, 1)  # an int for a FLOAT32 is exact enough
    fuse = int32(m, FuseCode.RELU6)
    raw = m.addOperand(I32)
    m.setOperandValue(raw, np.int32(-5).tobytes())
    x, y = tensor(m, [1, 2]), tensor(m, [1, 2])
    m.addOperation(OperationType.SOFTMAX, [x, beta], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    hal = m.to_hal()
    assert hal.constantArray(beta).item() == 1.0
    assert hal.constantArray(fuse).item() == 3
    assert hal.constantArray(raw).item() == -5


def test_set_operand_value_none_omits_the_operand_and_an_operation_refuses_it():
    m = Model()
    x, y = tensor(m, [2]), tensor(m, [2])
    fuse = m.addOperand(I32)
    m.setOperandValue(fuse, None)
    with pytest.raises(BadDataError, match="ADD: input 2 .* may not be omitted"):
        m.addOperation(OperationType.ADD, [x, x, fuse], [y])
    m.setOperandValue(fuse, 0)
    m.addOperation(OperationType.ADD, [x, x, fuse], [y])
    m.setOperandValue(fuse, None)  # omitted after its reader: finish() asks the binding again
    m.identifyInputsAndOutputs([x], [y])
    with pytest.raises(BadDataError, match=r"operation 0 \(ADD\): ADD: input 2 .* may not be omitted"):
        m.finish()


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda m, x, y, f: m.addOperation(95, [x, x, f], [y]), "95 is not an NN HAL 1.2 operation type"),
        (lambda m, x, y, f: m.addOperation(OperationType.ADD, [x, 17, f], [y]), "operand 17 does not exist"),
        (lambda m, x, y, f: m.addOperation(OperationType.ADD, [x, x], [y]), "ADD.* 3 inputs"),
        (lambda m, x, y, f: m.addOperation(OperationType.ADD, [x, f, f], [y]), "ADD.*input 1 must be TENSOR_FLOAT32"),
        (lambda m, x, y, f: m.addOperation(OperationType.RELU, [x], [y, y]), "RELU.* 1 output"),
        (lambda m, x, y, f: m.addOperation(OperationType.RELU, [x], [f]), "RELU.*output 0"),
        (lambda m, x, y, f: m.addOperation(OperationType.RELU, [y], [y]), "both an input and an output"),
        (lambda m, x, y, f: m.addOperation(OperationType.RELU, [x], "y"), "list of operand indexes"),
        (lambda m, x, y, f: m.addOperation(OperationType.RELU, [x], [1.0]), "operand indexes"),
    ],
)
def test_add_operation_refuses(build, match):
    m = Model()
    x, y = tensor(m, [2]), tensor(m, [2])
    f = int32(m, 0)
    with pytest.raises(BadDataError, match=match):
        build(m, x, y, f)
    assert m.operationCount == 0


def test_an_operand_written_by_two_operations_is_bad_data():
    m = Model()
    x, y = tensor(m, [2]), tensor(m, [2])
    m.addOperation(OperationType.RELU, [x], [y])
    m.addOperation(OperationType.RELU, [x], [y])  # Android 10 takes the call (ValidationTest.MultipleWrite)...
    m.identifyInputsAndOutputs([x], [y])
    with pytest.raises(BadDataError, match=r"operation 1 \(RELU\): operand 1 is already the output of another operation"):
        m.finish()  # ... and refuses the model


def test_an_operation_cannot_write_a_constant_or_a_model_input():
    m = Model()
    x = tensor(m, [2])
    c = const(m, [1, 2])
    with pytest.raises(BadDataError, match="CONSTANT_COPY and cannot be an output"):
        m.addOperation(OperationType.RELU, [x], [c])
    m.identifyInputsAndOutputs([x], [])
    z = tensor(m, [2])
    with pytest.raises(BadDataError, match="SUBGRAPH_INPUT and cannot be an output"):
        m.addOperation(OperationType.RELU, [z], [x])


@pytest.mark.parametrize(
    ("inputs", "outputs", "match"),
    [
        ([0, 9], [2], "operand 9 does not exist"),
        ([0, 0], [2], "operand 0 cannot be a model input: it is already a model input"),
        ([0, 1], [2, 2], "operand 2 cannot be a model output: it is already a model output"),
        ([0, 3], [2], "operand 3 cannot be a model input: it is a CONSTANT_COPY"),
        ([0, 1], [0, 2], "operand 0 cannot be a model output: it is already a model input"),
        ("01", [2], "list of operand indexes"),
    ],
)
def test_identify_inputs_and_outputs_refuses(inputs, outputs, match):
    m = Model()
    a, b, y = tensor(m, [2, 3]), tensor(m, [2, 3]), tensor(m, [2, 3])
    m.addOperation(OperationType.ADD, [a, b, int32(m, FuseCode.NONE)], [y])  # the fuse code is operand 3
    with pytest.raises(BadDataError, match=match):
        m.identifyInputsAndOutputs(inputs, outputs)


def test_an_input_written_by_an_operation_is_finishs_to_refuse():
    m = Model()
    a, b, y = tensor(m, [2, 3]), tensor(m, [2, 3]), tensor(m, [2, 3])
    m.addOperation(OperationType.ADD, [a, b, int32(m, FuseCode.NONE)], [y])
    z = tensor(m, [2, 3])
    m.addOperation(OperationType.RELU, [y], [z])
    m.identifyInputsAndOutputs([a, b, y], [z])  # Android 10's ModelBuilder takes it...
    assert "cannot write operand 2, a SUBGRAPH_INPUT" in _finish_error(m)  # ...and finish() refuses it


# -- validation: BAD_DATA at finish() -------------------------------------------


def _finish_error(m):
    with pytest.raises(BadDataError) as info:
        m.finish()
    assert not m.isFinished
    return str(info.value)


# What an operation refuses is its binding's to say (tests/test_kernels_*_bind.py); these
# check that the builder asks it, at addOperation with what is known then (the shapes
# declared, the constants set so far) or at finish() with everything, and names the
# operation. A refused operation is not added; a model that fails to finish stays unfinished.


def _refusal(build):
    """The BAD_DATA message of building (``build(model)``) and finishing a model."""
    m = Model()
    with pytest.raises(BadDataError) as info:
        build(m)
        m.finish()
    assert not m.isFinished
    return str(info.value)


def _add(shape_b=(2, 3), out=(2, 3), fuse=FuseCode.NONE, fuse_after=False):
    def build(m):
        a, b, y = tensor(m, [2, 3]), tensor(m, shape_b), tensor(m, out)
        f = m.addOperand(I32)
        if not fuse_after:
            m.setOperandValue(f, fuse)
        m.addOperation(OperationType.ADD, [a, b, f], [y])
        if fuse_after:
            m.setOperandValue(f, fuse)
        m.identifyInputsAndOutputs([a, b], [y])

    return build


def test_operations_refuse_shapes_and_values_they_cannot_take():
    for build in (_add(shape_b=(3, 2)), _add(out=(2, 4)), _add(out=(2, 3, 1)), _add(fuse=7)):
        assert _refusal(build).startswith("ANEURALNETWORKS_BAD_DATA: addOperation: ADD: ")
    # a constant set after its reader is checked at finish()
    assert _refusal(_add(fuse=7, fuse_after=True)).startswith("ANEURALNETWORKS_BAD_DATA: operation 0 (ADD): ADD: ")


def test_fully_connected_mismatches_are_refused():
    for x_dims, w_dims, b_dims in [([2, 4], [3, 5], [3]), ([2, 4], [3, 4], [2])]:

        def build(m, x_dims=x_dims, w_dims=w_dims, b_dims=b_dims):
            x = tensor(m, x_dims)
            w, b = const(m, np.zeros(w_dims)), const(m, np.zeros(b_dims))
            m.addOperation(OperationType.FULLY_CONNECTED, [x, w, b, int32(m, 0)], [tensor(m, [])])

        assert "FULLY_CONNECTED: " in _refusal(build)


@pytest.mark.parametrize(
    "kwargs",
    [{"c": 2, "fh": 6}, {"stride_w": 0}, {"stride_h": -2}, {"top": -1}, {"fuse": 4}, {"declared": (1, 3, 3, 4)}],
)
def test_bad_conv_parameters_are_refused(kwargs):
    assert "CONV_2D: " in _refusal(lambda m: conv_model(m, **kwargs))


def test_conv_filter_depth_and_bias_mismatch_are_refused():
    def build(m):
        x = tensor(m, [1, 4, 4, 2])
        f = const(m, np.zeros((3, 1, 1, 5)))
        m.addOperation(OperationType.CONV_2D, [x, f, const(m, np.zeros(3)), *conv_params(m)], [tensor(m, [])])

    assert "CONV_2D: " in _refusal(build)


def test_softmax_beta_is_refused():
    for beta in (0.0, -1.0, float("inf")):

        def build(m, beta=beta):
            x, y = tensor(m, [2, 3]), tensor(m, [2, 3])
            m.addOperation(OperationType.SOFTMAX, [x, float32(m, beta)], [y])

        assert "SOFTMAX: " in _refusal(build)


def test_finish_refuses_graphs_that_are_not_whole():
    m = Model()
    x = tensor(m, [2])
    m.identifyInputsAndOutputs([x], [])
    assert "no outputs" in _finish_error(m)

    m = Model()
    x, y = tensor(m, [2]), tensor(m, [2])
    m.identifyInputsAndOutputs([x], [y])
    assert "no operations" in _finish_error(m)

    m = Model()
    x, t, y = tensor(m, [2]), tensor(m, [2]), tensor(m, [2])
    m.addOperation(OperationType.ADD, [x, t, int32(m, 0)], [y])  # t: nobody writes it
    m.identifyInputsAndOutputs([x], [y])
    assert "reads operand 1 before any operation writes it" in _finish_error(m)

    m = Model()
    x, y, z = tensor(m, [2]), tensor(m, [2]), tensor(m, [2])
    m.addOperation(OperationType.RELU, [x], [y])
    m.identifyInputsAndOutputs([x], [y, z])
    assert "model output operand 2 is written by no operation" in _finish_error(m)


def test_a_constant_may_be_set_after_the_operation_that_reads_it():
    m = Model()
    x, y = tensor(m, [2]), tensor(m, [2])
    fuse = m.addOperand(I32)
    m.addOperation(OperationType.ADD, [x, x, fuse], [y])
    m.setOperandValue(fuse, FuseCode.RELU)  # the NDK lets a constant be set after its reader
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    assert np.array_equal(ref.run(m.to_hal(), [np.array([1, -1], np.float32)])[0], [2, 0])


def test_a_model_that_failed_to_finish_is_invalid_as_in_android_10():
    m = Model()
    x, y = tensor(m, [2]), tensor(m, [2])
    fuse = m.addOperand(I32)
    m.addOperation(OperationType.ADD, [x, x, fuse], [y])
    m.identifyInputsAndOutputs([x], [y])  # fuse: a temporary nothing writes
    _finish_error(m)
    for call in (lambda: m.setOperandValue(fuse, FuseCode.RELU), m.finish, lambda: m.addOperand(T, [2])):
        with pytest.raises(BadStateError, match="failed to finish and is invalid"):
            call()
    assert not m.isFinished


# -- BAD_STATE ---------------------------------------------------------------------


def test_changes_after_finish_and_use_before_finish_are_bad_state():
    m = add_model()
    with pytest.raises(BadStateError, match="not finished"):
        m.to_hal()
    cpu_like = DeviceDescriptor("acme-npu", DeviceType.ACCELERATOR, "1", 29, uniformCapabilities(1, 1))
    with pytest.raises(BadStateError):
        getSupportedOperationsForDevices(m, [cpu_like])
    with pytest.raises(BadStateError):
        createPlan(m, [])
    m.finish()
    for call in (
        lambda: m.addOperand(T, [2]),
        lambda: m.setOperandValue(3, 0),
        lambda: m.setOperandValueFromMemory(3, b"\0" * 4, 0, 4),
        lambda: m.addOperation(OperationType.RELU, [0], [1]),
        lambda: m.identifyInputsAndOutputs([0], [2]),
        m.finish,
    ):
        with pytest.raises(BadStateError, match="finished"):
            call()
    assert m.to_hal().operations[0].type == OperationType.ADD


# -- shape inference -------------------------------------------------------------


def test_shape_inference_fills_unknown_output_dimensions():
    m, y = conv_model(h=7, w=6, c=2, out=4, fh=3, fw=2, declared=(0, 0, 0, 4), top=1, bottom=1, stride_h=2, stride_w=2)
    m.finish()
    # oh = (7 + 1 + 1 - 3) // 2 + 1 = 4, ow = (6 - 2) // 2 + 1 = 3
    assert m.to_hal().operands[y].dimensions == [1, 4, 3, 4]


def test_shape_inference_for_each_operation_matches_the_reference():
    rng = np.random.default_rng(1)
    m = Model()
    x = tensor(m, [2, 6])
    t1 = tensor(m, [])
    m.addOperation(OperationType.MUL, [x, x, int32(m, FuseCode.RELU1)], [t1])
    t2 = tensor(m, [])
    m.addOperation(OperationType.SUB, [t1, x, int32(m, FuseCode.RELU6)], [t2])
    t3 = tensor(m, [])
    m.addOperation(OperationType.FULLY_CONNECTED, [t2, const(m, rng.random((5, 6))), const(m, rng.random(5)), int32(m, 0)], [t3])
    t4 = tensor(m, [0, 0])
    m.addOperation(OperationType.RELU, [t3], [t4])
    y = tensor(m, [])
    m.addOperation(OperationType.SOFTMAX, [t4, float32(m, 0.5)], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    hal = m.to_hal()
    assert [hal.operands[i].dimensions for i in (t1, t2, t3, t4, y)] == [[2, 6], [2, 6], [2, 5], [2, 5], [2, 5]]
    (out,) = ref.run(hal, [rng.standard_normal((2, 6)).astype(np.float32)])
    assert out.shape == (2, 5)
    assert np.allclose(out.sum(axis=1), 1.0, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    h=st.integers(1, 7),
    w=st.integers(1, 7),
    fh=st.integers(1, 4),
    fw=st.integers(1, 4),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
)
def test_conv_shape_inference_agrees_with_the_reference_or_refuses(h, w, fh, fw, pads, strides):
    left, right, top, bottom = pads
    kwargs = dict(h=h, w=w, c=2, out=2, fh=fh, fw=fw, left=left, right=right, top=top, bottom=bottom,
                  stride_w=strides[0], stride_h=strides[1])
    if h + top + bottom < fh or w + left + right < fw:
        with pytest.raises(BadDataError, match="CONV_2D: the output would be"):
            conv_model(**kwargs)
        return
    m, y = conv_model(**kwargs)
    m.finish()
    hal = m.to_hal()
    (out,) = ref.run(hal, [np.ones((1, h, w, 2), np.float32)])
    assert tuple(hal.operands[y].dimensions) == out.shape


# -- the reference itself ---------------------------------------------------------


def test_reference_conv_matches_a_hand_computed_case():
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    f = np.ones((1, 2, 2, 1), np.float32)
    out = ref.conv_2d(x, f, np.array([0.5], np.float32), 0, 0, 0, 0, 1, 1, FuseCode.NONE)
    assert out[0, :, :, 0].tolist() == [[8.5, 12.5], [20.5, 24.5]]
    padded = ref.conv_2d(x, f, np.zeros(1, np.float32), 1, 0, 1, 0, 2, 2, FuseCode.NONE)
    assert padded[0, :, :, 0].tolist() == [[0, 3], [9, 24]]


def test_reference_fused_activations_and_fully_connected():
    x = np.array([[-2.0, 0.5, 7.0]], np.float32)
    assert ref.activation(x, FuseCode.RELU).tolist() == [[0, 0.5, 7]]
    assert ref.activation(x, FuseCode.RELU1).tolist() == [[-1, 0.5, 1]]
    assert ref.activation(x, FuseCode.RELU6).tolist() == [[0, 0.5, 6]]
    w = np.array([[1, 0, 0], [0, 0, 1]], np.float32)
    assert ref.fully_connected(x, w, np.array([1, -10], np.float32), FuseCode.RELU).tolist() == [[0, 0]]
    s = ref.softmax(np.array([[0.0, np.log(3.0)]], np.float32), 1.0)
    assert np.allclose(s, [[0.25, 0.75]])


def test_the_hal_models_values_are_the_compiled_aidl_parcelables():
    from interfaces.android.hardware import neuralnetworks

    operand = Operand(type=3, dimensions=[2, 2], lifetime=1)  # plain ints, as a decoded parcel gives them
    assert operand.type is OperandType.TENSOR_FLOAT32 and operand.dimensions == [2, 2]
    assert operand.lifetime is OperandLifeTime.SUBGRAPH_INPUT and operand.location == DataLocation()
    assert (Operand, Operation, DataLocation, Subgraph) == (
        neuralnetworks.Operand, neuralnetworks.Operation, neuralnetworks.DataLocation, neuralnetworks.Subgraph
    )
    hal = HalModel(Subgraph(operands=[operand], inputIndexes=[0]))
    with pytest.raises(BadDataError, match="SUBGRAPH_INPUT, not a constant"):
        hal.constantBytes(0)
    with pytest.raises(BadDataError, match="takes a HalModel"):
        Model.from_hal(hal.main)


@pytest.mark.parametrize(
    ("c_enum", "moved", "differ"),
    [
        # an extension built before SOFTMAX moved
        ("npu_operation_type", (25, 26), r"enum npu_operation_type \(C\) and .*OperationType differ: NPU_OP_SOFTMAX is 26 in C, 25 in OperationType"),
        # one whose fuse codes are not FusedActivationFunc's
        ("npu_fuse_code", (3, 4), r"enum npu_fuse_code \(C\) and .*FusedActivationFunc differ: NPU_FUSE_RELU6 is 4 in C, 3 in FusedActivationFunc"),
    ],
)
def test_the_cpu_extensions_model_enums_are_checked_against_the_aidl(monkeypatch, c_enum, moved, differ):
    from framework.nn import _cpu_kernels

    assert _cpu_kernels._check_enums() is None
    real = _cpu_kernels.ffi
    old, new = moved

    class StaleFfi:
        def typeof(self, name):
            ctype = real.typeof(name)
            if name != f"enum {c_enum}":
                return ctype
            elements = {(new if n == old else n): c for n, c in ctype.elements.items()}
            return type("CEnum", (), {"elements": elements})()

    monkeypatch.setattr(_cpu_kernels, "ffi", StaleFfi())
    with pytest.raises(ImportError, match=differ):
        _cpu_kernels._check_enums()
