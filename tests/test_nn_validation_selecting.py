"""Two independent readings of NN HAL 1.2's operand types agree: the C bindings and nnref's SELECTING.

The model builder takes an operation's signature from its C binding (npu/bind.h), so what a
binding accepts is what an app may build. ``tests/nnref/signatures.py`` states, apart from
the C, which operand types the 1.2 spec allows at each operation's selecting input. For
every bound operation, this test finds a call of a common shape that nnref evaluates for
some allowed type (one tensor; two; two and a fuse code; a tensor and an axis; a tensor and
a float scalar; SELECT's condition and two tensors; a pool, a convolution of each kind and
FULLY_CONNECTED with explicit parameters; a tensor with a shape, axes, paddings, indices, a
block size, a new size or a strided slice's), then puts each of the 9 tensor operand
types at the selecting input (and every input and output of the same role) and asks the
binding: it must accept every type nnref accepts in that call and refuse every type
SELECTING leaves out. Operations whose signature fits none of these shapes are listed by
``test_coverage`` and judged by their family's own tests instead.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import nnref
from framework.nn._cpu import ffi, lib
from nn_ops import OPERATION_CODES, BindError, bind_check

TENSOR_TYPES = tuple(t for t in nnref.OPERAND_TYPES if t.startswith("TENSOR_"))


def _tensor(type: str, shape=(2, 3)) -> nnref.Operand:
    n = int(np.prod(shape))
    if type in ("TENSOR_FLOAT32", "TENSOR_FLOAT16"):
        return nnref.tensor(type, np.linspace(-1, 1, n), shape)
    if type == "TENSOR_BOOL8":
        return nnref.tensor(type, np.arange(n) % 2 == 0, shape)
    if type == "TENSOR_INT32":
        return nnref.tensor(type, np.arange(n) - 2, shape)
    if type == "TENSOR_QUANT8_ASYMM":
        return nnref.tensor(type, np.arange(n) + 100, shape, 0.5, 100)
    if type == "TENSOR_QUANT16_ASYMM":
        return nnref.tensor(type, np.arange(n) + 1000, shape, 0.125, 1000)
    if type == "TENSOR_QUANT8_SYMM_PER_CHANNEL":
        return nnref.tensor(type, np.arange(n) - 2, shape, channel_quant=nnref.ChannelQuant((0.5,) * shape[0], 0))
    return nnref.tensor(type, np.arange(n) - 2, shape, 0.25, 0)  # the symmetric ones


def _float_scalar(type: str, value: float) -> nnref.Operand:
    return nnref.float16(value) if type == "TENSOR_FLOAT16" else nnref.float32(value)


def _bias(type: str, n: int) -> nnref.Operand:
    """A convolution's or FULLY_CONNECTED's bias: TENSOR_INT32 at input scale x filter scale when quantized."""
    if type == "TENSOR_QUANT8_ASYMM":
        return nnref.tensor("TENSOR_INT32", np.arange(n), (n,), 0.25, 0)
    return _tensor(type, (n,))


def _ints(*values: int) -> list[nnref.Operand]:
    return [nnref.int32(v) for v in values]


def _int_tensor(values, shape) -> nnref.Operand:
    return nnref.tensor("TENSOR_INT32", np.asarray(values), shape)


IMAGE = (1, 2, 2, 2)  # NHWC
NO_PADDING, UNIT_STRIDES = (0, 0, 0, 0), (1, 1)

#: (name, selecting input, inputs for a tensor type at the selecting input)
TEMPLATES = (
    ("one tensor", 0, lambda t: [_tensor(t)]),
    ("two tensors", 0, lambda t: [_tensor(t), _tensor(t)]),
    ("two tensors and a fuse code", 0, lambda t: [_tensor(t), _tensor(t), nnref.int32(0)]),
    ("a tensor and an axis", 0, lambda t: [_tensor(t), nnref.int32(-1)]),
    ("a tensor and a float scalar", 0, lambda t: [_tensor(t), _float_scalar(t, 1.0)]),
    ("SELECT's condition and two tensors", 1, lambda t: [_tensor("TENSOR_BOOL8"), _tensor(t), _tensor(t)]),
    ("a pool, explicit padding", 0, lambda t: [_tensor(t, IMAGE), *_ints(*NO_PADDING, *UNIT_STRIDES, 1, 1, 0)]),
    ("a convolution, explicit padding", 0,
     lambda t: [_tensor(t, IMAGE), _tensor(t, (1, 1, 1, 2)), _bias(t, 1), *_ints(*NO_PADDING, *UNIT_STRIDES, 0)]),
    ("a depthwise convolution, explicit padding", 0,
     lambda t: [_tensor(t, IMAGE), _tensor(t, (1, 1, 1, 2)), _bias(t, 2), *_ints(*NO_PADDING, *UNIT_STRIDES, 1, 0)]),
    ("a grouped convolution, explicit padding", 0,
     lambda t: [_tensor(t, IMAGE), _tensor(t, (2, 1, 1, 1)), _bias(t, 2), *_ints(*NO_PADDING, *UNIT_STRIDES, 2, 0),
                nnref.boolean(False)]),
    ("a transpose convolution, explicit padding", 0,
     lambda t: [_tensor(t, IMAGE), _tensor(t, (1, 1, 1, 2)), _bias(t, 1), *_ints(*NO_PADDING, *UNIT_STRIDES, 0),
                nnref.boolean(False)]),
    ("FULLY_CONNECTED", 0, lambda t: [_tensor(t), _tensor(t, (4, 3)), _bias(t, 4), nnref.int32(0)]),
    ("a tensor and a shape", 0, lambda t: [_tensor(t), _int_tensor([3, 2], (2,))]),
    ("a tensor, axes and an INT32 keep_dims", 0, lambda t: [_tensor(t), _int_tensor([0], (1,)), nnref.int32(0)]),
    ("a tensor, axes and a BOOL keep_dims", 0, lambda t: [_tensor(t), _int_tensor([0], (1,)), nnref.boolean(False)]),
    ("a tensor and paddings", 0, lambda t: [_tensor(t), _int_tensor([0, 1, 1, 0], (2, 2))]),
    ("a tensor, paddings and a pad value", 0,
     lambda t: [_tensor(t), _int_tensor([0, 1, 1, 0], (2, 2)),
                nnref.int32(100) if t == "TENSOR_QUANT8_ASYMM" else _float_scalar(t, 0.5)]),
    ("a tensor, an axis and indices", 0, lambda t: [_tensor(t), nnref.int32(1), _int_tensor([2, 0], (2,))]),
    ("an image and a block size", 0, lambda t: [_tensor(t, (1, 2, 2, 4)), nnref.int32(2)]),
    ("an image, a new size and the layout", 0, lambda t: [_tensor(t, IMAGE), *_ints(3, 3), nnref.boolean(False)]),
    ("a strided slice", 0,
     lambda t: [_tensor(t), _int_tensor([0, 0], (2,)), _int_tensor([2, 3], (2,)), _int_tensor([1, 2], (2,)),
                *_ints(0, 0, 0)]),
)


def _bound(name: str) -> bool:
    return lib.npu_bind_lookup(OPERATION_CODES[name]) != ffi.NULL


BOUND = sorted(name for name in nnref.SELECTING if _bound(name))


@functools.cache
def _reference_call(name: str) -> tuple[str, dict[str, list[nnref.Operand]]] | None:
    """The first template nnref evaluates for some allowed type, with its outputs per allowed type."""
    at, allowed = nnref.SELECTING[name]
    for label, position, make in TEMPLATES:
        if position != at:
            continue
        outputs: dict[str, list[nnref.Operand]] = {}
        for t in allowed:
            try:
                results = nnref.evaluate(name, make(t))
            except (nnref.BadOperation, NotImplementedError, ValueError, TypeError, IndexError):
                continue
            outputs[t] = [nnref.output(r.type, r.scale, r.zero_point) for r in results]
        if outputs:
            return label, outputs
    return None


def test_coverage():
    """Which bound operations this test judges; the rest are their family tests' to judge."""
    covered = [name for name in BOUND if _reference_call(name) is not None]
    if BOUND:
        assert covered, f"no bound operation fits a template: {BOUND}"


@pytest.mark.parametrize("name", BOUND or ["(none bound)"])
def test_the_binding_accepts_exactly_the_types_selecting_allows(name):
    if name == "(none bound)":
        pytest.skip("no operation is bound yet")
    found = _reference_call(name)
    if found is None:
        pytest.skip(f"{name}'s signature fits none of the templates")
    label, outputs = found
    at, allowed = nnref.SELECTING[name]
    make = next(m for lbl, _, m in TEMPLATES if lbl == label)
    for t in TENSOR_TYPES:
        inputs = make(t)
        if t in outputs:
            try:
                bind_check(name, inputs, outputs[t], data=True)
            except BindError as e:
                pytest.fail(f"{name} ({label}): nnref takes {t} at input {at}, the binding refuses it: {e}")
        elif t not in allowed:
            given = inputs[at]
            template = [nnref.Operand(t, None, given.scale, given.zero_point, given.channel_quant)]
            with pytest.raises(BindError) as info:
                bind_check(name, inputs, template, data=True)
            assert info.value.why.startswith(f"{name}: "), info.value.why
