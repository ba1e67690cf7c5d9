"""The bindings' frame (npu/bind.h): one binding per operation, named as NN HAL 1.2 names it,
and a refusal that names the operation and says why."""

from __future__ import annotations

import nnref
from framework.nn._cpu import ffi, lib

TABLES = ("npu_bind_core", "npu_bind_math", "npu_bind_index", "npu_bind_recurrent", "npu_bind_detection")


def bound() -> list[int]:
    """Every operation type some family table binds, duplicates kept."""
    types = []
    for table in TABLES:
        entries = getattr(lib, table)
        i = 0
        while entries[i].type >= 0:
            types.append(entries[i].type)
            i += 1
    return types


def test_each_operation_is_bound_at_most_once_and_under_its_own_name():
    types = bound()
    assert len(types) == len(set(types)), "an operation is bound by two families"
    for code in types:
        definition = lib.npu_bind_lookup(code)
        assert ffi.string(definition.name).decode() == nnref.OPERATION_TYPES[code]
        assert definition.prepare != ffi.NULL and definition.run != ffi.NULL


def test_names_are_nn_hal_1_2s():
    for code, name in enumerate(nnref.OPERATION_TYPES):
        assert ffi.string(lib.npu_bind_name(code)).decode() == name
    assert ffi.string(lib.npu_bind_name(95)).decode() == "operation 95"


def test_an_unknown_operation_is_refused_by_number():
    why = ffi.new("char[200]")
    args = ffi.new("struct npu_arg[1]")
    assert lib.npu_bind_check(95, args, 1, args, 1, why, 200) == lib.NPU_E_BAD_OPERATION
    assert ffi.string(why).decode() == "operation 95: npuemu has no binding for this operation"
