"""NN HAL 1.2's operand rules in the model builder, each with Android 10's result code.

The points of AOSP's ValidationTest (runtime/test/TestValidation.cpp) for the model,
compilation and execution calls, and NN HAL 1.2's operand rules (ValidateHal's
validateOperands, NeuralNetworks.h): every one of the 14 operand types, scale and zero
point per type, per-channel quantization, relaxed float32, constants of every type sized
by type. A null pointer of the NDK is None here (UNEXPECTED_NULL).

ValidationTest's cases against this NDK (121 result codes probed one by one; "fixed" were
mismatches, now matched and tested here):

======================================================  =====================================
case (ValidationTest...)                                 result
======================================================  =====================================
Model.AddOperand, SetOperandSymmPerChannelQuantParams    match (nullptr points: fixed)
Model.SetOptionalOperand, SetOperandValue                match
Model.SetOperandValueFromMemory                          match (null memory: fixed)
Model.AddOperation                                       match (null lists: fixed)
Model.IdentifyInputsAndOutputs                           match (null lists: fixed)
Identify.Ok/InputIsOutput/OutputIsInput/Duplicate*       match
identifyInputsAndOutputs twice (ModelBuilder.cpp)        fixed: a second call naming any operand
                                                         of the first is BAD_DATA (it replaced)
an input an operation writes                             fixed: finish()'s BAD_DATA, not identify's
Model.RelaxComputationFloat32toFloat16, Finish,          match
EmptyModel, CreateCompilation, graph points
Model.CreateCompilationForDevices,                       match (null model, list or entry: fixed)
GetSupportedOperationsForDevices
Compilation.SetPreference, Finish, CreateExecution       match
Compilation.SetCaching                                   match (null dir or token: fixed)
Compilation/ForDevices_2.ExecutionTiming                 fixed: setMeasureTiming(False) is
                                                         BAD_DATA too unless for one device
Compilation.ExecutionUsability (async, sync, burst)      fixed: an execution runs once (setters
                                                         and computes after it are BAD_STATE)
ForDevices_1.ExecutionTiming                             match (setMeasureTiming after the run:
                                                         BAD_STATE, fixed with the above)
Execution.SetInput/SetOutput/...FromMemory               match (null memory: fixed); the
                                                         operand-type argument is not in this API
Execution.GetOutputOperandRankAndDimensions              match
Burst.BurstComputeNull                                   fixed (null burst)
Burst.BadCompilation, DifferentCompilations              match
Introspection.GetDevice, DeviceGetNameUnique             match
OEM, extensions, AHardwareBuffer, Android 11's           not in Android 10's NDK as emulated
memory domains, priorities and timeouts
======================================================  =====================================
"""

import numpy as np
import pytest
import trio

from conformance.run import open_nn
from framework.nn import (
    BadDataError,
    BadStateError,
    DurationCode,
    FuseCode,
    HalModel,
    Model,
    OperandLifeTime,
    OperandType,
    OperationType,
    ResultCode,
    SymmPerChannelQuantParams,
    UnexpectedNullError,
    toAidlModel,
    validateModel,
)

T = OperandType.TENSOR_FLOAT32
Q8 = OperandType.TENSOR_QUANT8_ASYMM
PER_CHANNEL = OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL

#: (type, dimensions, scale, zero point) that NN HAL 1.2 accepts, one or more per type.
VALID = [
    (OperandType.FLOAT32, [], 0.0, 0),
    (OperandType.INT32, [], 0.0, 0),
    (OperandType.UINT32, [], 0.0, 0),
    (OperandType.BOOL, [], 0.0, 0),
    (OperandType.FLOAT16, [], 0.0, 0),
    (OperandType.TENSOR_FLOAT32, [2, 3], 0.0, 0),
    (OperandType.TENSOR_FLOAT16, [2, 0], 0.0, 0),  # unspecified dimension
    (OperandType.TENSOR_INT32, [4], 0.0, 0),
    (OperandType.TENSOR_INT32, [4], 0.25, 0),  # a bias carries input scale * filter scale
    (OperandType.TENSOR_BOOL8, [], 0.0, 0),  # unspecified rank
    (OperandType.TENSOR_QUANT8_ASYMM, [1, 2, 2, 1], 0.5, 0),
    (OperandType.TENSOR_QUANT8_ASYMM, [3], 1e-3, 255),
    (OperandType.TENSOR_QUANT8_SYMM, [3], 0.5, 0),
    (OperandType.TENSOR_QUANT16_SYMM, [3], 0.125, 0),
    (OperandType.TENSOR_QUANT16_ASYMM, [3], 0.125, 65535),
    (OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL, [2, 3], 0.0, 0),
]

#: What ValidateHal refuses, and the words that must name the rule.
INVALID = [
    (Q8, [2], -1.0, 0, "needs a finite scale > 0"),  # ValidationTest.AddOperand
    (Q8, [], -1.0, 0, "needs a finite scale > 0"),
    (Q8, [2], 1.0, -1, r"zero point must be in 0\.\.255, got -1"),  # ValidationTest.AddOperand
    (Q8, [2], 1.0, 256, r"zero point must be in 0\.\.255"),
    (Q8, [2], 0.0, 0, "needs a finite scale > 0"),
    (Q8, [2], 1e-50, 0, "needs a finite scale > 0"),  # 0 once stored as a float
    (Q8, [2], float("inf"), 0, "needs a finite scale > 0"),
    (Q8, [2], float("nan"), 0, "scale must be a number"),
    (OperandType.TENSOR_QUANT16_ASYMM, [2], 1.0, 65536, r"zero point must be in 0\.\.65535"),
    (OperandType.TENSOR_QUANT8_SYMM, [2], 1.0, 1, "zero point must be 0"),
    (OperandType.TENSOR_QUANT16_SYMM, [2], 1.0, -3, "zero point must be 0"),
    (OperandType.TENSOR_QUANT16_SYMM, [2], 0.0, 0, "needs a finite scale > 0"),
    (OperandType.TENSOR_INT32, [2], -0.5, 0, "scale must be finite and >= 0"),
    (OperandType.TENSOR_INT32, [2], 0.5, 3, "zero point must be 0"),
    (T, [2], 0.5, 0, r"TENSOR_FLOAT32 operand has no scale \(must be 0\)"),
    (T, [2], 0.0, 4, r"TENSOR_FLOAT32 operand has no zero point \(must be 0\)"),
    (PER_CHANNEL, [2], 0.5, 0, "has no scale"),  # its scales are per channel
    (OperandType.TENSOR_BOOL8, [2], 1.0, 0, "has no scale"),
    (OperandType.INT32, [2], 0.0, 0, "scalar has no dimensions"),  # ValidationTest.AddOperand
    (OperandType.FLOAT16, [], 0.0, 1, "has no zero point"),
    (OperandType.INT32, [], 1.0, 0, "has no scale"),
    (T, [5, 4, 4, 786433, 5, 3, 16777216], 0.0, 0, "bytes, more than"),  # size overflows uint32
]


@pytest.mark.parametrize(("type", "dims", "scale", "zero_point"), VALID)
def test_add_operand_takes_every_type_with_its_quantization(type, dims, scale, zero_point):
    m = Model()
    assert m.addOperand(type, dims, scale=scale, zeroPoint=zero_point) == 0
    assert m.operandCount == 1


@pytest.mark.parametrize(("type", "dims", "scale", "zero_point", "match"), INVALID)
def test_add_operand_refuses_what_validate_hal_refuses(type, dims, scale, zero_point, match):
    m = Model()
    with pytest.raises(BadDataError, match=match) as info:
        m.addOperand(type, dims, scale=scale, zeroPoint=zero_point)
    assert info.value.resultCode == ResultCode.BAD_DATA
    assert str(info.value).startswith(f"ANEURALNETWORKS_BAD_DATA: addOperand({type.name}): ")
    assert m.operandCount == 0


def _add_model(m, shape=(2,)):
    """x + c (c a constant), fuse NONE: an operation every reading of ADD takes."""
    x, c, y = m.addOperand(T, shape), m.addOperand(T, shape), m.addOperand(T, shape)
    m.setOperandValue(c, np.ones(shape, np.float32))
    fuse = m.addOperand(OperandType.INT32)
    m.setOperandValue(fuse, FuseCode.NONE)
    m.addOperation(OperationType.ADD, [x, c, fuse], [y])
    return x, y


def test_quantization_and_relax_reach_the_hal_model_and_its_parcelable():
    m = Model()
    x, y = _add_model(m)
    q = m.addOperand(Q8, [1, 2], scale=0.5, zeroPoint=128)  # a model input no operation reads
    w = m.addOperand(PER_CHANNEL, [3, 2])
    m.setOperandSymmPerChannelQuantParams(w, SymmPerChannelQuantParams(scales=[0.5, 0.25, 2.0], channelDim=0))
    m.setOperandValue(w, np.array([[1, -1], [127, -127], [0, 3]], np.int8))
    bias = m.addOperand(OperandType.TENSOR_INT32, [3], scale=0.25)
    m.setOperandValue(bias, np.array([1, 2, 3], np.int32))
    m.relaxComputationFloat32toFloat16(True)
    m.identifyInputsAndOutputs([x, q], [y])
    m.finish()
    assert m.relaxed
    hal = m.to_hal()
    assert hal.relaxComputationFloat32toFloat16 is True
    assert (hal.operands[q].scale, hal.operands[q].zeroPoint, hal.operands[q].extraParams) == (0.5, 128, None)
    assert hal.operands[w].extraParams.channelQuant == SymmPerChannelQuantParams(scales=[0.5, 0.25, 2.0], channelDim=0)
    assert hal.constantArray(w).tolist() == [[1, -1], [127, -127], [0, 3]]
    assert hal.operands[bias].scale == 0.25 and hal.constantArray(bias).tolist() == [1, 2, 3]
    parcel = toAidlModel(hal)
    try:
        assert parcel.relaxComputationFloat32toFloat16 is True
        assert parcel.main.operands[w].extraParams == hal.operands[w].extraParams
        back = HalModel(
            parcel.main,
            parcel.operandValues,
            [bytes(p.mapReadOnly()) for p in parcel.pools],
            relaxComputationFloat32toFloat16=parcel.relaxComputationFloat32toFloat16,
        )
        assert Model.from_hal(back).to_hal() == hal
    finally:
        for pool in parcel.pools:
            pool.close()
    # validateModel (the partitioner's, a HAL model's) keeps them too
    assert validateModel(hal).operands[w].extraParams == hal.operands[w].extraParams


def test_relax_defaults_off_and_is_refused_after_finish_or_if_not_a_bool():
    m = Model()
    x, y = _add_model(m)
    with pytest.raises(BadDataError, match="takes a bool"):
        m.relaxComputationFloat32toFloat16(1)
    m.relaxComputationFloat32toFloat16(True)
    m.relaxComputationFloat32toFloat16(False)  # the last call holds
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    assert m.to_hal().relaxComputationFloat32toFloat16 is False
    with pytest.raises(BadStateError, match="finished"):  # ValidationTest: after finish, BAD_STATE
        m.relaxComputationFloat32toFloat16(True)
    with pytest.raises(BadDataError, match="relaxComputationFloat32toFloat16 is a bool"):
        HalModel(m.to_hal().main, relaxComputationFloat32toFloat16="yes")


# -- per-channel quantization ------------------------------------------------------------


def test_per_channel_params_as_validation_test_sets_them():
    # ValidationTestModel.SetOperandSymmPerChannelQuantParams: a [2] operand, scales {1, 2}
    m = Model()
    w = m.addOperand(PER_CHANNEL, [2])
    with pytest.raises(BadDataError, match="operand 1 does not exist"):
        m.setOperandSymmPerChannelQuantParams(w + 1, SymmPerChannelQuantParams(scales=[1.0, 2.0], channelDim=0))
    m.setOperandSymmPerChannelQuantParams(w, SymmPerChannelQuantParams(scales=[1.0, 2.0], channelDim=0))


@pytest.mark.parametrize(
    ("type", "dims", "scales", "channel_dim", "match"),
    [
        (Q8, [2], [1.0, 2.0], 0, "only a TENSOR_QUANT8_SYMM_PER_CHANNEL operand has per-channel scales"),
        (PER_CHANNEL, [2, 3], [1.0, 2.0], 2, "channelDim 2 is not a dimension of a rank-2 operand"),
        (PER_CHANNEL, [2, 3], [1.0, 2.0], -1, "channelDim -1 is not a dimension"),
        (PER_CHANNEL, [2, 3], [1.0, 2.0], 1, r"2 per-channel scales for 3 channels \(dimension 1\)"),
        (PER_CHANNEL, [2, 3], [1.0, 0.0], 0, "per-channel scale 1 must be finite and > 0, got 0.0"),
        (PER_CHANNEL, [2, 3], [-1.0, 1.0], 0, "per-channel scale 0 must be finite and > 0"),
        (PER_CHANNEL, [0, 3], [1.0], 0, r"channel dimension 0 is unspecified \(0\)"),
    ],
)
def test_per_channel_params_are_checked(type, dims, scales, channel_dim, match):
    m = Model()
    w = m.addOperand(type, dims, **({"scale": 0.5} if type == Q8 else {}))
    with pytest.raises(BadDataError, match=match):
        m.setOperandSymmPerChannelQuantParams(w, SymmPerChannelQuantParams(scales=scales, channelDim=channel_dim))
    with pytest.raises(BadDataError, match="takes a SymmPerChannelQuantParams"):
        m.setOperandSymmPerChannelQuantParams(w, (scales, channel_dim))


def test_a_per_channel_operand_without_its_scales_does_not_finish():
    m = Model()
    x, y = _add_model(m)
    w = m.addOperand(PER_CHANNEL, [2, 1])
    m.setOperandValue(w, np.array([[1], [2]], np.int8))
    m.identifyInputsAndOutputs([x], [y])
    with pytest.raises(BadDataError, match="operand 4: a TENSOR_QUANT8_SYMM_PER_CHANNEL operand needs its per-channel"):
        m.finish()


def test_validate_model_refuses_extra_params_where_they_do_not_belong():
    m = Model()
    x, y = _add_model(m)
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    hal = m.to_hal()
    from interfaces.android.hardware.neuralnetworks import OperandExtraParams

    extra = OperandExtraParams(channelQuant=SymmPerChannelQuantParams(scales=[1.0, 1.0], channelDim=0))
    operands = list(hal.operands)
    operands[0] = operands[0].replace(extraParams=extra)
    with pytest.raises(BadDataError, match="operand 0: a TENSOR_FLOAT32 operand has no per-channel quantization"):
        validateModel(HalModel(hal.main.replace(operands=operands), hal.operandValues, hal.pools))
    operands = list(hal.operands)
    operands[0] = operands[0].replace(type=Q8, scale=0.0)
    with pytest.raises(BadDataError, match="operand 0: a TENSOR_QUANT8_ASYMM operand needs a finite scale > 0"):
        validateModel(HalModel(hal.main.replace(operands=operands), hal.operandValues, hal.pools))


# -- constants of every type --------------------------------------------------------------

#: (type, dims, value as given, its bytes), sizes by type: float16 2 bytes, bool8 1, quant16 2...
VALUES = [
    (OperandType.FLOAT16, [], 1.5, np.float16(1.5).tobytes()),
    (OperandType.BOOL, [], True, b"\x01"),
    (OperandType.UINT32, [], 7, np.uint32(7).tobytes()),
    (OperandType.TENSOR_FLOAT16, [3], [0.5, -2.0, 65504.0], np.array([0.5, -2, 65504], "<f2").tobytes()),
    (OperandType.TENSOR_BOOL8, [2, 2], [[True, False], [False, True]], b"\x01\x00\x00\x01"),
    (OperandType.TENSOR_QUANT8_ASYMM, [3], [0, 128, 255], bytes([0, 128, 255])),
    (OperandType.TENSOR_QUANT8_SYMM, [2], [-128, 127], np.array([-128, 127], "i1").tobytes()),
    (OperandType.TENSOR_QUANT16_SYMM, [2], [-32768, 5], np.array([-32768, 5], "<i2").tobytes()),
    (OperandType.TENSOR_QUANT16_ASYMM, [2], [65535, 1], np.array([65535, 1], "<u2").tobytes()),
    (OperandType.TENSOR_INT32, [2], [-(2**31), 2**31 - 1], np.array([-(2**31), 2**31 - 1], "<i4").tobytes()),
]


def _operand_of(m, type, dims):
    params = {"scale": 0.5} if type.name.startswith("TENSOR_QUANT") else {}
    return m.addOperand(type, dims, **params)


@pytest.mark.parametrize(("type", "dims", "value", "stored"), VALUES)
def test_set_operand_value_takes_every_type_sized_by_type(type, dims, value, stored):
    m = Model()
    i = _operand_of(m, type, dims)
    with pytest.raises(BadDataError, match=f"needs {len(stored)} bytes, got {len(stored) + 1}"):
        m.setOperandValue(i, stored + b"\0")  # ValidationTest.SetOperandValue: wrong length
    m.setOperandValue(i, value)
    assert m._operands[i].value == stored
    m.setOperandValue(i, stored)  # the raw bytes of the right length are accepted as they are
    assert m._operands[i].value == stored


@pytest.mark.parametrize(
    ("type", "dims", "value", "match"),
    [
        (OperandType.TENSOR_QUANT8_ASYMM, [2], [0, 256], r"out of its range 0\.\.255"),
        (OperandType.TENSOR_QUANT8_SYMM, [1], [-129], r"out of its range -128\.\.127"),
        (OperandType.TENSOR_QUANT16_ASYMM, [1], [-1], "out of its range"),
        (OperandType.TENSOR_QUANT8_ASYMM, [1], [0.5], "converted with loss"),
        (OperandType.TENSOR_FLOAT16, [1], [70000.0], "overflows TENSOR_FLOAT16"),
        (OperandType.FLOAT16, [], 1e6, "overflows FLOAT16"),
        (OperandType.TENSOR_BOOL8, [2], [1, 0], "converted with loss"),
        (OperandType.BOOL, [], 1, "converted with loss"),
        (OperandType.TENSOR_FLOAT16, [2, 0], [[], []], "fully specified"),  # unspecified dimension
        (OperandType.TENSOR_QUANT8_ASYMM, [], [1], "fully specified"),  # unspecified rank
    ],
)
def test_set_operand_value_refuses_values_its_type_cannot_hold(type, dims, value, match):
    m = Model()
    i = _operand_of(m, type, dims)
    with pytest.raises(BadDataError, match=match):
        m.setOperandValue(i, value)


# -- ValidationTest's points for the model calls ----------------------------------------


def test_validation_test_set_operand_value_points():
    m = Model()
    f = m.addOperand(OperandType.FLOAT32)
    with pytest.raises(BadDataError):  # 20 bytes is not a float32
        m.setOperandValue(f, b"\0" * 20)
    m.setOperandValue(f, b"\0" * 4)
    with pytest.raises(BadDataError, match="operand 1 does not exist"):
        m.setOperandValue(1, b"\0" * 4)
    m.setOperandValue(f, None)  # SetOptionalOperand: NO_VALUE
    assert m._operands[f].lifetime == OperandLifeTime.NO_VALUE


def test_validation_test_set_operand_value_from_memory_points():
    m = Model()
    f = m.addOperand(T, [1])
    memory = bytearray(20)
    for index, offset, length, match in [
        (-1, 0, 4, "operand -1 does not exist"),
        (0, 0, 20, "needs 4 bytes, got length 20"),
        (1, 0, 4, "operand 1 does not exist"),
        (0, 21, 4, "outside the 20-byte memory"),
        (0, 17, 4, "outside the 20-byte memory"),
    ]:
        with pytest.raises(BadDataError, match=match):
            m.setOperandValueFromMemory(index, memory, offset, length)
    m.setOperandValueFromMemory(f, memory, 16, 4)


def test_validation_test_identify_inputs_and_outputs_points():
    m = Model()
    x, y = _add_model(m)
    with pytest.raises(BadDataError, match="operand 9 does not exist"):
        m.identifyInputsAndOutputs([x, 9], [y])
    with pytest.raises(BadDataError, match="operand 1 cannot be a model input: it is a CONSTANT_COPY"):
        m.identifyInputsAndOutputs([1], [y])
    with pytest.raises(UnexpectedNullError):  # a null list
        m.identifyInputsAndOutputs(None, [y])
    with pytest.raises(UnexpectedNullError):
        m.identifyInputsAndOutputs([x], None)
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    with pytest.raises(BadStateError):
        m.identifyInputsAndOutputs([x], [y])
    with pytest.raises(BadStateError):  # finish twice
        m.finish()


def _identify_fixture():
    """ValidationTestIdentify's model: 3 = ADD(0, 1, 2), nothing identified yet."""
    m = Model()
    for type, dims in ((T, [1]), (T, [1]), (OperandType.INT32, []), (T, [1])):
        m.addOperand(type, dims)
    m.addOperation(OperationType.ADD, [0, 1, 2], [3])
    return m


@pytest.mark.parametrize(
    ("case", "inputs", "outputs", "refusal"),
    [
        ("Ok", [0, 1, 2], [3], None),
        ("InputIsOutput", [0, 1, 2], [3, 0], "operand 0 cannot be a model output: it is already a model input"),
        ("OutputIsInput", [0, 1, 2, 3], [3], "operand 3 cannot be a model output: it is already a model input"),
        ("DuplicateInputs", [0, 1, 2, 0], [3], "operand 0 cannot be a model input: it is already a model input"),
        ("DuplicateOutputs", [0, 1, 2], [3, 3], "operand 3 cannot be a model output: it is already a model output"),
    ],
)
def test_validation_test_identify(case, inputs, outputs, refusal):
    m = _identify_fixture()
    if refusal is None:
        m.identifyInputsAndOutputs(inputs, outputs)
        m.finish()
        return
    with pytest.raises(BadDataError, match=refusal):
        m.identifyInputsAndOutputs(inputs, outputs)


def test_identify_inputs_and_outputs_twice_as_android_10s_model_builder():
    # The first call's operands are model inputs and outputs from then on: naming any of
    # them again, even in the very same lists, is BAD_DATA.
    m = _identify_fixture()
    m.identifyInputsAndOutputs([0, 1, 2], [3])
    with pytest.raises(BadDataError, match="operand 0 cannot be a model input: it is already a model input"):
        m.identifyInputsAndOutputs([0, 1, 2], [3])
    m.finish()  # the first call's lists stand
    assert (m.to_hal().inputIndexes, m.to_hal().outputIndexes) == ([0, 1, 2], [3])

    # A failed call keeps what it marked before the refusal: operand 0 stays an input.
    m = _identify_fixture()
    with pytest.raises(BadDataError, match="operand 0 cannot be a model input: it is already a model input"):
        m.identifyInputsAndOutputs([0, 0], [3])
    with pytest.raises(BadDataError, match="operand 0 cannot be a model input: it is already a model input"):
        m.identifyInputsAndOutputs([0, 1, 2], [3])

    # A second call naming other operands replaces the lists; the first's keep their role,
    # unlisted, which finish() refuses (Android 10 would finish and leave them unbound).
    m = _identify_fixture()
    m.addOperand(T, [1])
    m.addOperation(OperationType.ADD, [3, 1, 2], [4])
    m.identifyInputsAndOutputs([0], [3])
    m.identifyInputsAndOutputs([1, 2], [4])
    with pytest.raises(BadDataError, match="operand 0 is SUBGRAPH_INPUT but not in inputIndexes"):
        m.finish()


def test_validation_test_add_operation_points():
    m = Model()
    x, y, z = m.addOperand(T, [2]), m.addOperand(T, [2]), m.addOperand(T, [2])
    fuse = m.addOperand(OperandType.INT32)
    m.setOperandValue(fuse, 0)
    with pytest.raises(BadDataError, match="not an NN HAL 1.2 operation type"):
        m.addOperation(-1, [x, y, fuse], [z])
    with pytest.raises(BadDataError, match="not an NN HAL 1.2 operation type"):
        m.addOperation(95, [x, y, fuse], [z])
    with pytest.raises(BadDataError, match="operand 4 does not exist"):
        m.addOperation(OperationType.ADD, [x, y, 4], [z])
    with pytest.raises(BadDataError, match="operand 9 does not exist"):
        m.addOperation(OperationType.ADD, [x, y, fuse], [9])
    with pytest.raises(BadDataError, match="ADD"):  # a wrong signature: a scalar where a tensor goes
        m.addOperation(OperationType.ADD, [x, fuse, fuse], [z])
    assert m.operationCount == 0
    m.addOperation(OperationType.ADD, [x, y, fuse], [z])


def test_a_model_of_no_operations_or_an_unwritten_output_is_bad_data_at_finish():
    m = Model()
    x, y = m.addOperand(T, [2]), m.addOperand(T, [2])
    m.identifyInputsAndOutputs([x], [y])
    with pytest.raises(BadDataError, match="no operations"):
        m.finish()
    with pytest.raises(BadStateError, match="invalid"):  # Android 10: a model that failed finish is invalid
        m.finish()


# -- signatures: the C bindings' reading -------------------------------------------------


def test_an_operation_without_a_binding_is_refused_with_the_frames_sentence():
    from framework.nn._signature import isBound

    unbound = [t for t in OperationType if not isBound(t)]
    if not unbound:
        pytest.skip("every NN HAL 1.2 operation has its binding")
    m = Model()
    x, y = m.addOperand(T, [2]), m.addOperand(T, [2])
    with pytest.raises(BadDataError, match=f"addOperation: {unbound[0].name}: npuemu has no binding for this operation"):
        m.addOperation(unbound[0], [x], [y])
    assert m.operationCount == 0


def test_quantized_operations_are_accepted_and_their_shapes_inferred():
    m = Model()
    a = m.addOperand(Q8, [2, 3], scale=0.5, zeroPoint=10)
    b = m.addOperand(Q8, [1, 3], scale=0.25, zeroPoint=0)
    m.setOperandValue(b, np.array([[4, 8, 12]], np.uint8))
    fuse = m.addOperand(OperandType.INT32)
    m.setOperandValue(fuse, FuseCode.RELU)
    y = m.addOperand(Q8, [0, 0], scale=1.0, zeroPoint=3)  # broadcast: the binding infers [2, 3]
    m.addOperation(OperationType.ADD, [a, b, fuse], [y])
    m.identifyInputsAndOutputs([a], [y])
    m.finish()
    assert m.to_hal().operands[y].dimensions == [2, 3]


def test_a_wrong_signature_names_the_operation_input_and_expected_type():
    m = Model()
    a = m.addOperand(Q8, [2, 3], scale=0.5)
    b = m.addOperand(T, [2, 3])
    fuse = m.addOperand(OperandType.INT32)
    y = m.addOperand(Q8, [2, 3], scale=0.5)
    with pytest.raises(BadDataError, match=r"addOperation: ADD: input 1 .*TENSOR_QUANT8_ASYMM.*TENSOR_FLOAT32"):
        m.addOperation(OperationType.ADD, [a, b, fuse], [y])


def test_an_operand_of_a_rank_the_c_descriptors_cannot_hold_is_refused():
    from framework.nn._signature import MAX_RANK

    m = Model()
    x, y = m.addOperand(T, [1] * (MAX_RANK + 1)), m.addOperand(T, [])
    with pytest.raises(BadDataError, match=f"input 0: an operand of rank {MAX_RANK + 1}"):
        m.addOperation(OperationType.RELU, [x], [y])


def test_plan_descriptions_show_each_crossing_operands_quantization():
    from framework.nn import DeviceDescriptor, DeviceType, createPlanForDevices, uniformCapabilities

    m = Model()
    a = m.addOperand(Q8, [2, 3], scale=0.5, zeroPoint=10)
    fuse = m.addOperand(OperandType.INT32)
    m.setOperandValue(fuse, FuseCode.NONE)
    y = m.addOperand(Q8, [0, 3], scale=1.0, zeroPoint=3)
    m.addOperation(OperationType.ADD, [a, a, fuse], [y])
    m.identifyInputsAndOutputs([a], [y])
    m.finish()
    device = DeviceDescriptor("acme-npu", DeviceType.ACCELERATOR, "1", 29, uniformCapabilities(1, 1))
    text = createPlanForDevices(m, [device]).describe()
    assert "0        TENSOR_QUANT8_ASYMM [2, 3] scale 0.5 zeroPoint 10" in text
    assert "2        TENSOR_QUANT8_ASYMM [2, 3] scale 1 zeroPoint 3" in text


def test_describe_operand_names_per_channel_scales_and_unknown_dimensions():
    from framework.nn import describeOperand
    from interfaces.android.hardware.neuralnetworks import Operand, OperandExtraParams

    quant = SymmPerChannelQuantParams(scales=[0.5, 0.25], channelDim=0)
    w = Operand(type=PER_CHANNEL, dimensions=[2, 3], extraParams=OperandExtraParams(channelQuant=quant))
    assert describeOperand(w) == "TENSOR_QUANT8_SYMM_PER_CHANNEL [2, 3] channelDim 0 scales [0.5, 0.25]"
    assert describeOperand(Operand(type=T, dimensions=[0, 4])) == "TENSOR_FLOAT32 [?, 4]"
    assert describeOperand(Operand(type=T)) == "TENSOR_FLOAT32 [?]"
    assert describeOperand(Operand(type=OperandType.INT32)) == "INT32"


# -- ValidationTest's graph points: the fixtures' models, each finish()'s result code ------


def _validation_test_model(m, fuse_is_input=True):
    """ValidationTestModel::createModel: ADD of two [2] tensors, the fuse code a model input."""
    a, b, fuse, out = m.addOperand(T, [2]), m.addOperand(T, [2]), m.addOperand(OperandType.INT32), m.addOperand(T, [2])
    if not fuse_is_input:
        m.setOperandValue(fuse, 0)
    m.addOperation(OperationType.ADD, [a, b, fuse], [out])
    m.identifyInputsAndOutputs([a, b, fuse] if fuse_is_input else [a, b], [out])


def test_validation_test_fixture_finishes_with_a_scalar_model_input():
    m = Model()
    _validation_test_model(m)
    m.finish()  # NO_ERROR: 1.2 lets a scalar parameter be a model input
    assert m.to_hal().inputIndexes == [0, 1, 2]
    with pytest.raises(BadStateError):  # ValidationTestModel.Finish: twice is BAD_STATE
        m.finish()


def _logistic(m, src, dst):
    m.addOperation(OperationType.LOGISTIC, [src], [dst])


@pytest.mark.parametrize(
    ("case", "result"),
    [
        ("Cycle", "BAD_DATA"),
        ("AcyclicReadBeforeWrite", "NO_ERROR"),
        ("MissingWrite", "BAD_DATA"),
        ("UnwrittenOperand", "BAD_DATA"),
        ("MultipleWrite", "BAD_DATA"),
        ("EmptyModel", "BAD_DATA"),
    ],
)
def test_validation_test_graph_points(case, result):
    m = Model()
    if case == "Cycle":  # 3 = ADD(0, 4, 2); 4 = ADD(1, 3, 2); 5 = ADD(4, 0, 2)
        for _ in range(2):
            m.addOperand(T, [1])
        m.addOperand(OperandType.INT32)
        for _ in range(3):
            m.addOperand(T, [1])
        m.addOperation(OperationType.ADD, [0, 4, 2], [3])
        m.addOperation(OperationType.ADD, [1, 3, 2], [4])
        m.addOperation(OperationType.ADD, [4, 0, 2], [5])
        m.identifyInputsAndOutputs([0, 1, 2], [5])
    elif case == "AcyclicReadBeforeWrite":  # 1 = LOGISTIC(2); 2 = LOGISTIC(0): not sorted, still valid
        for _ in range(3):
            m.addOperand(T, [1])
        _logistic(m, 2, 1)
        _logistic(m, 0, 2)
        m.identifyInputsAndOutputs([0], [1])
    elif case == "MissingWrite":  # 2 = LOGISTIC(1), 1 never written
        for _ in range(4):
            m.addOperand(T, [1])
        _logistic(m, 1, 2)
        _logistic(m, 0, 3)
        m.identifyInputsAndOutputs([0], [2, 3])
    elif case == "UnwrittenOperand":  # operand 1 is never written nor read
        for _ in range(3):
            m.addOperand(T, [1])
        _logistic(m, 0, 2)
        m.identifyInputsAndOutputs([0], [2])
    elif case == "MultipleWrite":  # 2 = ADD(0, 0, 1), twice: each addOperation is NO_ERROR
        m.addOperand(T, [1])
        m.addOperand(OperandType.INT32)
        m.addOperand(T, [1])
        for _ in range(2):
            m.addOperation(OperationType.ADD, [0, 0, 1], [2])
        m.identifyInputsAndOutputs([0, 1], [2])
    if result == "NO_ERROR":
        m.finish()
        assert m.isFinished
    else:
        with pytest.raises(BadDataError) as info:
            m.finish()
        assert info.value.resultCode == ResultCode.BAD_DATA and not m.isFinished


# -- ValidationTest's points for compilations and executions -------------------------------


def _validation_test_compiled_model():
    """ValidationTestModel::createModel, finished: 3 = ADD(0, 1, 2), all three model inputs."""
    m = Model()
    _validation_test_model(m)
    m.finish()
    return m


def _inputs_set(compilation):
    execution = compilation.createExecution()
    execution.setInput(0, np.zeros(2, np.float32))
    execution.setInput(1, np.ones(2, np.float32))
    execution.setInput(2, np.int32(0))
    execution.setOutput(0, np.zeros(2, np.float32))
    return execution


async def _run(kind, compilation, execution):
    if kind == "async":
        await (await execution.startCompute()).wait()
    elif kind == "sync":
        await trio.to_thread.run_sync(execution.compute)
    else:
        async with compilation.createBurst() as burst:
            await execution.burstCompute_async(burst)


async def test_validation_test_execution_timing(autojump_clock):
    """ExecutionTiming: setMeasureTiming, either value, is BAD_DATA unless the compilation is
    for exactly one device; there, durations after each kind of run."""
    async with open_nn() as nn:
        model = _validation_test_compiled_model()
        plain = nn.createCompilation(model)
        both = nn.createCompilationForDevices(model, [nn.getDevice(0), nn.getDevice(1)])
        one = nn.createCompilationForDevices(model, [nn.getDevice(0)])
        for compilation in (plain, both, one):
            await compilation.finish()
        for compilation in (plain, both):
            execution = compilation.createExecution()
            for measure in (False, True):
                with pytest.raises(BadDataError, match="exactly one device"):
                    execution.setMeasureTiming(measure)
        for kind in ("async", "sync", "burst"):
            execution = _inputs_set(one)
            execution.setMeasureTiming(False)
            execution.setMeasureTiming(True)
            await _run(kind, one, execution)
            assert execution.getDuration(DurationCode.ON_HARDWARE) <= execution.getDuration(DurationCode.IN_DRIVER)
            with pytest.raises(BadDataError):
                execution.getDuration(-1)
        for compilation in (plain, both, one):
            await compilation.aclose()


@pytest.mark.parametrize("kind", ["async", "sync", "burst"])
async def test_validation_test_execution_usability(autojump_clock, kind):
    """ExecutionUsability: an execution runs once. After its run (whichever way it ran)
    every setter and every way to compute is BAD_STATE; its results stay readable."""
    async with open_nn() as nn:
        model = _validation_test_compiled_model()
        async with nn.createCompilationForDevices(model, [nn.getDevice(0)]) as compilation:
            await compilation.finish()
            execution = _inputs_set(compilation)
            execution.setMeasureTiming(True)
            await _run(kind, compilation, execution)
            setters = {
                "setInput": lambda: execution.setInput(0, np.zeros(2, np.float32)),
                "setOutput": lambda: execution.setOutput(0, np.zeros(2, np.float32)),
                "setMeasureTiming": lambda: execution.setMeasureTiming(False),
                "setJobPriority": lambda: execution.setJobPriority(1),
            }
            for call, setter in setters.items():
                with pytest.raises(BadStateError, match="runs once"):
                    setter()
            for again in ("async", "sync", "burst"):
                with pytest.raises(BadStateError, match="runs once"):
                    await _run(again, compilation, execution)
            assert execution.getOutputOperandDimensions(0) == [2]
            assert execution.getDuration(DurationCode.ON_HARDWARE) <= execution.getDuration(DurationCode.IN_DRIVER)


#: The NDK's null pointers, as None: each call is UNEXPECTED_NULL (ValidationTest's
#: nullptr points: a null list, object or buffer where the call needs one).
MODEL_NULLS = {
    "addOperand": lambda m: m.addOperand(None),
    "setOperandSymmPerChannelQuantParams": lambda m: m.setOperandSymmPerChannelQuantParams(0, None),
    "setOperandValueFromMemory": lambda m: m.setOperandValueFromMemory(0, None, 0, 4),
    "addOperation inputs": lambda m: m.addOperation(OperationType.AVERAGE_POOL_2D, None, [0]),
    "addOperation outputs": lambda m: m.addOperation(OperationType.AVERAGE_POOL_2D, [0], None),
    "identifyInputsAndOutputs inputs": lambda m: m.identifyInputsAndOutputs(None, [0]),
    "identifyInputsAndOutputs outputs": lambda m: m.identifyInputsAndOutputs([0], None),
}


@pytest.mark.parametrize("call", MODEL_NULLS)
def test_a_null_argument_of_a_model_call_is_unexpected_null(call):
    m = Model()
    m.addOperand(PER_CHANNEL, [2])
    with pytest.raises(UnexpectedNullError) as info:
        MODEL_NULLS[call](m)
    assert info.value.resultCode == ResultCode.UNEXPECTED_NULL


async def test_a_null_argument_of_a_runtime_call_is_unexpected_null(autojump_clock):
    async with open_nn() as nn:
        model = _validation_test_compiled_model()
        device = nn.getDevice(0)
        for call in (
            lambda: nn.createCompilation(None),
            lambda: nn.createCompilationForDevices(None, [device]),
            lambda: nn.createCompilationForDevices(model, None),
            lambda: nn.createCompilationForDevices(model, [device, None]),
            lambda: nn.createCompilationForDevices(model, [device, device, None]),  # null before duplicate
        ):
            with pytest.raises(UnexpectedNullError):
                call()
        for devices in (None, [device, None]):
            with pytest.raises(UnexpectedNullError):
                await nn.getSupportedOperationsForDevices(model, devices)
        with pytest.raises(UnexpectedNullError):
            await nn.getSupportedOperationsForDevices(None, [device])
        compilation = nn.createCompilation(model)
        with pytest.raises(UnexpectedNullError):
            compilation.setCaching(None, bytes(32))
        with pytest.raises(UnexpectedNullError):
            compilation.setCaching("/nonexistent", None)
        await compilation.finish()
        execution = _inputs_set(compilation)
        with pytest.raises(UnexpectedNullError):
            execution.setInputFromMemory(0, None, 0, 8)
        with pytest.raises(UnexpectedNullError):
            execution.setOutputFromMemory(0, None, 0, 8)
        with pytest.raises(UnexpectedNullError):
            await execution.burstCompute_async(None)
        await execution.compute_async()  # none of those calls spoiled it
        await compilation.aclose()
