"""The Python side of the shared model format: conversion, normalisation, refusals."""

import numpy as np
import pytest

from npuhal import (
    DataLocation,
    FuseCode,
    Model,
    ModelBuilder,
    NpuModelError,
    NpuValueError,
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


def test_builder_places_small_constants_in_operand_values_and_large_in_a_pool():
    b = ModelBuilder()
    x = b.input([1, 64])
    small = b.constant(np.arange(4, dtype=np.float32))
    big = b.constant(np.arange(64 * 8, dtype=np.float32).reshape(8, 64))
    model = b.build()
    assert model.operands[small].lifetime == OperandLifeTime.CONSTANT_COPY
    loc = model.operands[small].location
    assert np.frombuffer(model.operand_values[loc.offset : loc.offset + loc.length], np.float32).tolist() == [0, 1, 2, 3]
    assert model.operands[big].lifetime == OperandLifeTime.CONSTANT_POOL
    loc = model.operands[big].location
    pool = bytes(model.pools[loc.pool_index])
    got = np.frombuffer(pool[loc.offset : loc.offset + loc.length], np.float32)
    assert got.reshape(8, 64)[7, 63] == 64 * 8 - 1
    assert model.input_indexes == (x,)


def test_to_hal_and_back_is_identity():
    model = _add_model()
    hal = model.to_hal()
    assert hal["operations"] == [{"type": 0, "inputs": [0, 1, 2], "outputs": [3]}]
    assert hal["operands"][3]["lifetime"] == OperandLifeTime.SUBGRAPH_OUTPUT
    assert Model.from_hal(hal) == model


def test_from_hal_accepts_snake_case_objects_and_to_hal_providers():
    model = _add_model()

    class Provider:
        def to_hal(self):
            return model.to_hal()

    assert Model.from_hal(Provider()) == model
    snake = {
        "operands": [
            {"type": 3, "dimensions": [4], "lifetime": 1, "location": {"pool_index": 0, "offset": 0, "length": 0}},
            {"type": 3, "dimensions": [4], "lifetime": 2},
        ],
        "operations": [{"type": 19, "inputs": [0], "outputs": [1]}],
        "input_indexes": [0],
        "output_indexes": [1],
    }
    m = Model.from_hal(snake)
    assert m.operations[0].type is OperationType.RELU
    assert m.operands[1].location == DataLocation()
    assert m.output_shape(0) == (4,)


def test_unknown_type_codes_are_kept_for_the_driver_to_judge():
    hal = _add_model().to_hal()
    hal["operations"][0]["type"] = 1  # AVERAGE_POOL_2D: NNAPI has it, npuemu does not
    m = Model.from_hal(hal)
    assert m.operations[0].type == 1 and not isinstance(m.operations[0].type, OperationType)


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda h: h.pop("operands"), "operands"),
        (lambda h: h["operations"][0].update(inputs=[0, -1, 2]), "negative"),
        (lambda h: h["operations"][0].update(inputs="012"), "sequence"),
        (lambda h: h["operands"][0].update(dimensions=[2, 1.5]), "integers"),
        (lambda h: h["operands"][0].update(type="tensor"), "integer"),
        (lambda h: h.update(pools=b"not a list"), "pools"),
    ],
)
def test_malformed_model_data_is_a_clear_model_error(mutate, fragment):
    hal = _add_model().to_hal()
    mutate(hal)
    with pytest.raises(NpuModelError, match=fragment) as info:
        Model.from_hal(hal)
    assert isinstance(info.value, ValueError)
    assert info.value.code is None  # found in Python, before C


def test_pools_must_be_buffers():
    hal = _add_model().to_hal()
    hal["pools"] = [object()]
    with pytest.raises(NpuValueError, match="bytes-like"):
        Model.from_hal(hal)


def test_builder_refuses_to_output_a_non_computed_operand():
    b = ModelBuilder()
    x = b.input([3])
    with pytest.raises(NpuModelError):
        b.output(x)


def test_operand_type_enum_numbers_are_nnapi():
    assert OperandType.TENSOR_FLOAT32 == 3 and OperandType.BOOL == 6
    assert OperationType.SUB == 36 and OperationType.SOFTMAX == 25
