"""Calling the C operation library and its bindings through framework.nn._cpu's ffi, with nnref operands.

For the kernels (npu/ops.h): ``tensor(operand)`` makes a ``struct npu_tensor`` of an nnref
Operand (keeping its storage alive); ``run(name, inputs, outputs, call)`` evaluates the
operation with nnref, makes output descriptors of the expected shapes and parameters, calls
``call(*descriptors)`` (which calls the C) and returns (C result, nnref result) as Operands.

For the bindings (npu/bind.h), which read an operation as a model lays it out:
``bind_run(name, inputs, outputs)`` prepares the binding (the 1.2 signature, the output
shapes), sizes the outputs, runs it and returns the outputs as Operands, or raises
:class:`BindError` with the binding's status name and sentence; ``bind_check`` only
prepares, with shapes and data optional, as the NDK's addOperation does;
``bind_vs_nnref`` returns (C outputs, nnref outputs) for one call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import nnref
from framework.nn._cpu import ffi, lib

CODES = {name: code for code, name in enumerate(nnref.OPERAND_TYPES)}
OPERATION_CODES = {name: code for code, name in enumerate(nnref.OPERATION_TYPES)}


class Tensor:
    """A ``struct npu_tensor *`` and everything its pointers point into."""

    def __init__(self, type: str, array: np.ndarray, scale: float = 0.0, zero_point: int = 0,
                 channel_scales: Sequence[float] | None = None, channel_dim: int = 0):
        self.array = np.array(array, dtype=nnref.DTYPES[type], order="C")  # a copy; 0-d stays 0-d
        self.ptr = ffi.new("struct npu_tensor *")
        self.ptr.type = CODES[type]
        self.ptr.rank = self.array.ndim
        for i, d in enumerate(self.array.shape):
            self.ptr.dims[i] = d
        self._buffer = ffi.from_buffer(self.array, require_writable=True) if self.array.size else ffi.NULL
        self.ptr.data = ffi.cast("void *", self._buffer)
        self.ptr.scale = scale
        self.ptr.zero_point = zero_point
        self._scales = ffi.new("float[]", list(channel_scales)) if channel_scales is not None else ffi.NULL
        self.ptr.channel_scales = self._scales
        self.ptr.channel_dim = channel_dim


def tensor(operand: nnref.Operand) -> Tensor:
    cq = operand.channel_quant
    return Tensor(operand.type, np.array(operand.value), operand.scale, operand.zero_point,
                  cq.scales if cq else None, cq.channel_dim if cq else 0)


def empty_like(expected: nnref.Operand) -> Tensor:
    return Tensor(expected.type, np.zeros_like(expected.value), expected.scale, expected.zero_point)


def status(code: int) -> str:
    return ffi.string(lib.npu_error_name(code)).decode()


def run(name: str, inputs: Sequence[nnref.Operand], outputs: Sequence[nnref.Operand | None],
        call: Callable[..., int]) -> tuple[nnref.Operand, nnref.Operand]:
    """nnref's result of ``name`` and the C's, computed by ``call(output_descriptor)``."""
    expected = nnref.evaluate(name, inputs, outputs)[0]
    out = empty_like(expected)
    rc = call(out.ptr)
    assert rc == lib.NPU_OK, f"{name}: {status(rc)}"
    got = nnref.Operand(expected.type, out.array, expected.scale, expected.zero_point)
    return got, expected


def f32(values: object) -> float:
    """A scale as the float32 the C descriptor holds (so nnref and the C see one value)."""
    return float(np.float32(values))


class BindError(Exception):
    """A binding refused a call: ``status`` is the npu_status name, ``why`` its sentence."""

    def __init__(self, status: str, why: str):
        super().__init__(f"{status}: {why}")
        self.status, self.why = status, why


def _arg(slot, operand: nnref.Operand | None, keep: list, *, shape: bool = True, data: bool = True) -> None:
    """Fills one ``struct npu_arg`` from an Operand (None or a value-less input: omitted)."""
    if operand is None:
        slot.omitted = True
        return
    t = tensor(operand) if operand.value is not None else Tensor(operand.type, np.zeros(0), operand.scale, operand.zero_point)
    keep.append(t)
    slot.t = t.ptr[0]
    slot.has_rank = slot.has_shape = shape and operand.value is not None
    if not (data and operand.value is not None):
        slot.t.data = ffi.NULL


def _out_arg(slot, template: nnref.Operand, keep: list) -> None:
    """An output as a model declares it: type and quantization, shape unknown."""
    cq = template.channel_quant
    t = Tensor(template.type, np.zeros(0), template.scale, template.zero_point,
               cq.scales if cq else None, cq.channel_dim if cq else 0)
    keep.append(t)
    slot.t = t.ptr[0]
    slot.t.rank = 0
    slot.t.data = ffi.NULL


def _call(fn, name: str, ins, n_in: int, outs, n_out: int) -> None:
    why = ffi.new("char[200]")
    rc = fn(OPERATION_CODES[name], ins, n_in, outs, n_out, why, 200)
    if rc != lib.NPU_OK:
        raise BindError(status(rc), ffi.string(why).decode())


def bind_check(name: str, inputs: Sequence[nnref.Operand | None], outputs: Sequence[nnref.Operand],
               *, shapes: bool = True, data: bool = False) -> list[tuple[int, ...] | None]:
    """Prepares ``name``'s binding; returns each output's computed shape (None when unknown)."""
    keep: list = []
    ins = ffi.new("struct npu_arg[]", max(len(inputs), 1))
    outs = ffi.new("struct npu_arg[]", max(len(outputs), 1))
    for slot, operand in zip(ins, inputs):
        _arg(slot, operand, keep, shape=shapes, data=data)
    for slot, template in zip(outs, outputs):
        _out_arg(slot, template, keep)
    _call(lib.npu_bind_check, name, ins, len(inputs), outs, len(outputs))
    return [tuple(o.t.dims[i] for i in range(o.t.rank)) if o.has_shape else None for o in outs[0:len(outputs)]]


def bind_run(name: str, inputs: Sequence[nnref.Operand | None], outputs: Sequence[nnref.Operand]) -> list[nnref.Operand]:
    """Prepares and runs ``name``'s binding; ``outputs`` name each output's type and quantization."""
    shapes = bind_check(name, inputs, outputs, data=True)
    keep: list = []
    ins = ffi.new("struct npu_arg[]", max(len(inputs), 1))
    outs = ffi.new("struct npu_arg[]", max(len(outputs), 1))
    for slot, operand in zip(ins, inputs):
        _arg(slot, operand, keep)
    results = []
    for slot, template, shape in zip(outs, outputs, shapes):
        cq = template.channel_quant
        t = Tensor(template.type, np.zeros(shape, nnref.DTYPES[template.type]), template.scale, template.zero_point,
                   cq.scales if cq else None, cq.channel_dim if cq else 0)
        keep.append(t)
        slot.t = t.ptr[0]
        slot.has_rank = slot.has_shape = True
        results.append(t)
    _call(lib.npu_bind_run, name, ins, len(inputs), outs, len(outputs))
    return [nnref.Operand(o.type, t.array, o.scale, o.zero_point, o.channel_quant) for o, t in zip(outputs, results)]


def bind_vs_nnref(name: str, inputs: Sequence[nnref.Operand | None], outputs: Sequence[nnref.Operand | None] = (),
                  *, relaxed: bool = False) -> tuple[list[nnref.Operand], list[nnref.Operand]]:
    """(the binding's outputs, nnref's) for one call; output templates default as nnref's do."""
    expected = nnref.evaluate(name, [i if i is not None else nnref.Operand(_first_type(inputs)) for i in inputs],
                              outputs, relaxed=relaxed)
    templates = [nnref.Operand(e.type, None, e.scale, e.zero_point, e.channel_quant) for e in expected]
    return bind_run(name, inputs, templates), expected


def _first_type(inputs: Sequence[nnref.Operand | None]) -> str:
    return next(i.type for i in inputs if i is not None)
