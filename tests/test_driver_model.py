"""The model the driver loads is the HAL's Model parcelable: building it, converting it to C, refusals."""

import numpy as np
import pytest

import npuhal
from model_edits import with_main, with_operand, with_operation
from framework.binder import SharedMemory
from interfaces.android.hardware.neuralnetworks import DataLocation, Model, Operand, Subgraph
from npuhal import (
    FuseCode,
    ModelBuilder,
    NpuModelError,
    OperandLifeTime,
    OperandType,
    OperationType,
)


def _add_model() -> Model:
    b = ModelBuilder()
    x = b.input([2, 3])
    y = b.input([2, 3])
    z = b.operation(OperationType.ADD, [x, y, b.int32(FuseCode.NONE)], [2, 3])
    b.output(z)
    return b.build()


def test_builder_places_small_constants_in_operand_values_and_large_in_a_shared_memory_pool():
    b = ModelBuilder()
    x = b.input([1, 64])
    small = b.constant(np.arange(4, dtype=np.float32))
    big = b.constant(np.arange(64 * 8, dtype=np.float32).reshape(8, 64))
    model = b.build()
    assert isinstance(model, Model) and model.referenced == []
    operands = model.main.operands
    assert operands[small].lifetime == OperandLifeTime.CONSTANT_COPY
    loc = operands[small].location
    assert np.frombuffer(model.operandValues[loc.offset : loc.offset + loc.length], np.float32).tolist() == [0, 1, 2, 3]
    assert operands[big].lifetime == OperandLifeTime.CONSTANT_POOL
    loc = operands[big].location
    (pool,) = model.pools
    assert isinstance(pool, SharedMemory)  # as on the wire: weights travel as a descriptor
    got = np.frombuffer(bytes(pool.mapReadOnly())[loc.offset : loc.offset + loc.length], np.float32)
    assert got.reshape(8, 64)[7, 63] == 64 * 8 - 1
    assert model.main.inputIndexes == [x]
    assert npuhal.io_shapes(model) == (((1, 64),), ())


def test_the_driver_loads_and_runs_the_parcelable_as_built():
    model = _add_model()
    assert [op.type for op in model.main.operations] == [OperationType.ADD]
    assert model.main.operands[3].lifetime == OperandLifeTime.SUBGRAPH_OUTPUT
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = npuhal.run_model(model, [x, x])
    np.testing.assert_array_equal(out, 2 * x)
    with npuhal.Driver.open() as driver:
        assert driver.supported_operations(0, model) == [True]
        handle = driver.load_model(0, model)
        assert (handle.input_shapes, handle.output_shapes) == (((2, 3), (2, 3)), ((2, 3),))


def test_only_the_parcelable_is_a_model():
    # No dict form, no look-alike with the same field names.
    as_dict = {"operands": [], "operations": [], "inputIndexes": [], "outputIndexes": []}
    for wrong in (as_dict, _add_model().main, None):
        with pytest.raises(NpuModelError, match="android.hardware.neuralnetworks.Model parcelable"):
            npuhal.run_model(wrong, [])
    with npuhal.Driver.open() as driver:
        with pytest.raises(NpuModelError, match="parcelable, not dict"):
            driver.load_model(0, as_dict)


def test_referenced_subgraphs_and_closed_pools_are_refused():
    model = _add_model()
    with pytest.raises(NpuModelError, match="referenced subgraphs"):
        npuhal.io_shapes(model.replace(referenced=[Subgraph()]))
    region = SharedMemory.create("closed", 16)
    region.close()
    with npuhal.Driver.open() as driver:
        with pytest.raises(NpuModelError, match=r"pools\[0\] cannot be mapped"):
            driver.load_model(0, model.replace(pools=[region]))


def test_values_c_cannot_hold_are_a_clear_model_error():
    model = _add_model()
    cases = [
        (with_operand(model, 0, dimensions=[2, -3]), "dimension -3 is out of range"),
        (with_operand(model, 2, location=DataLocation(poolIndex=0, offset=2**32, length=4)), "location offset"),
        (with_operation(model, 0, inputs=[0, -1, 2]), "operand index -1 is out of range"),
        (with_main(model, inputIndexes=[0, -1]), "model input 1 names no operand"),
    ]
    with npuhal.Driver.open() as driver:
        for bad, fragment in cases:
            with pytest.raises(NpuModelError, match=fragment) as info:
                driver.load_model(0, bad)
            assert isinstance(info.value, ValueError)
            assert info.value.code is None  # found in Python, before C
    # An output position that names no operand is refused before any buffer is read.
    with pytest.raises(NpuModelError, match="model output 0 names no operand"):
        npuhal.io_shapes(with_main(model, outputIndexes=[9]))


def test_the_parcelable_refuses_numbers_its_enums_lack():
    # 95 is past NN HAL 1.2's last operation (RESIZE_NEAREST_NEIGHBOR, 94): no model can carry it.
    with pytest.raises(ValueError, match="not a value of android.hardware.neuralnetworks.OperationType"):
        _add_model().main.operations[0].replace(type=95)
    with pytest.raises(TypeError, match="dimensions"):
        Operand(type=OperandType.TENSOR_FLOAT32, dimensions=[2, 1.5])


def test_builder_refuses_to_output_a_non_computed_operand():
    b = ModelBuilder()
    x = b.input([3])
    with pytest.raises(NpuModelError):
        b.output(x)


def test_operand_type_enum_numbers_are_nnapi():
    assert OperandType.TENSOR_FLOAT32 == 3 and OperandType.BOOL == 6
    assert OperationType.SUB == 36 and OperationType.SOFTMAX == 25
