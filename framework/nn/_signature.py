"""An operation's signature, as the C binding every device uses reads it (``npu/bind.h``).

NN HAL 1.2 has one reading of each operation's signature in npuemu: its binding in the
C operation library (input counts, optional trailing inputs, operand types and their
quantization rules, scalar parameters, layouts, output shapes), shared by the emulated
devices, the app's in-process ``nnapi-reference`` and the NDK's model builder. This
module is the builder's way to it: :func:`checkOperation` describes an operation's
operands to ``npu_bind_check`` through ``framework.nn._cpu``'s ffi (each operand's type,
quantization, declared or inferred shape, and its value when the model holds it) and
answers the output shapes the binding computed, or raises :class:`BadDataError` with the
binding's sentence (which names the operation, the input and what was expected).

An operation whose binding has not been written is refused the same way, with the
binding frame's own sentence. ``isBound`` says which operations have one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interfaces.android.hardware.neuralnetworks import Operand

from ._errors import BadDataError, OutOfMemoryError
from ._types import OperandLifeTime, OperationType, isScalar

try:
    from ._cpu import ffi, lib
except ImportError as e:  # pragma: no cover - a broken checkout, not a test case
    raise ImportError(
        "framework.nn._cpu (the C operation library) is not built: run `.venv/bin/python setup.py -q build_ext --inplace`"
    ) from e

__all__ = ["MAX_RANK", "checkOperation", "isBound"]

#: The highest rank a C tensor descriptor holds (``NPU_MAX_RANK`` of npu/model.h).
MAX_RANK = len(ffi.new("struct npu_tensor *").dims)

_UINT32_MAX = 0xFFFFFFFF
_WHY_LEN = 200


def isBound(opType: OperationType) -> bool:  # noqa: N802
    """True when the C library has a binding (a 1.2 signature) for ``opType``."""
    return lib.npu_bind_lookup(int(opType)) != ffi.NULL


def _fill(where: str, slot: Any, operand: Operand, data: Any, keep: list[Any]) -> None:
    """One ``struct npu_arg`` from an operand: type, quantization, what is known of its shape and value."""
    if operand.lifetime == OperandLifeTime.NO_VALUE:
        slot.omitted = True
        return
    dims = operand.dimensions
    if len(dims) > MAX_RANK:
        raise BadDataError(f"{where}: an operand of rank {len(dims)}; npuemu's operations take rank {MAX_RANK} at most")
    t = slot.t
    t.type = int(operand.type)
    t.rank = len(dims)
    for i, d in enumerate(dims):
        if not 0 <= d <= _UINT32_MAX:
            raise BadDataError(f"{where}: dimension {d} does not fit a uint32")
        t.dims[i] = d
    t.scale = operand.scale
    t.zero_point = operand.zeroPoint
    extra = operand.extraParams
    if extra is not None:
        scales = ffi.new("float[]", list(extra.channelQuant.scales) or [0.0])
        keep.append(scales)
        t.channel_scales = scales
        t.channel_dim = max(extra.channelQuant.channelDim, 0)
    scalar = isScalar(operand.type)
    slot.has_rank = scalar or len(dims) > 0
    slot.has_shape = scalar or (len(dims) > 0 and 0 not in dims)
    if data is not None and slot.has_shape:
        buffer = ffi.from_buffer("char[]", data)
        keep.append(buffer)
        t.data = buffer


def checkOperation(  # noqa: N802
    where: str, opType: OperationType, inputs: Sequence[tuple[Operand, Any]], outputs: Sequence[Operand]
) -> list[tuple[int, ...] | None]:
    """The binding's verdict on one operation; each output's shape (``None`` when not known yet).

    ``inputs`` are ``(operand, value)`` pairs: ``value`` the constant's bytes when the model
    holds them, else ``None``. An operand's dimensions are what is known of its shape (0 for
    an unknown dimension, none for an unknown rank). ``where`` begins the error's message.
    """
    keep: list[Any] = []
    ins = ffi.new("struct npu_arg[]", max(len(inputs), 1))
    outs = ffi.new("struct npu_arg[]", max(len(outputs), 1))
    for k, (operand, data) in enumerate(inputs):
        _fill(f"{where}: input {k}", ins[k], operand, data, keep)
    for k, operand in enumerate(outputs):
        _fill(f"{where}: output {k}", outs[k], operand, None, keep)
    why = ffi.new("char[]", _WHY_LEN)
    status = lib.npu_bind_check(int(opType), ins, len(inputs), outs, len(outputs), why, _WHY_LEN)
    if status != lib.NPU_OK:
        sentence = ffi.string(why).decode(errors="replace") or ffi.string(lib.npu_strerror(status)).decode()
        if status == lib.NPU_E_NO_MEMORY:
            raise OutOfMemoryError(f"{where}: {sentence}")
        raise BadDataError(f"{where}: {sentence}")
    return [
        tuple(int(o.t.dims[i]) for i in range(o.t.rank)) if o.has_shape else None for o in outs[0 : len(outputs)]
    ]
