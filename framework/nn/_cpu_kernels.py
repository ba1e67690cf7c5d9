"""``nnapi-reference`` computes here: the C kernels of ``framework.nn._cpu``, in-process.

The extension is built by ``csrc/build_nn_cpu.py`` from the very kernel sources the
emulated NPU runs, so the CPU device and every driver device agree to the last bit
on the same sub-model (the tests hold them to float tolerance only because a
partition may change the order in which a driver and the CPU sum). This module is
the only one that touches its cdata: a :class:`HalModel` goes in, plain bools and
filled buffers come out, and every C status becomes a :class:`NeuralNetworksError`.

The C layer reads the model only during a call, so a ``struct npu_model`` is built
per call and its keep-alive list dies with it. The GIL is released while C computes
(cffi API mode), so a long CPU step does not stall a trio program's other threads.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from interfaces.c_enums import enum_problem
from interfaces.c_model import c_model

from ._errors import BadDataError, NeuralNetworksError, OpFailedError, OutOfMemoryError
from ._hal import HalModel
from ._types import FuseCode, OperandLifeTime, OperandType, OperationType

try:
    from ._cpu import ffi, lib
except ImportError as e:  # pragma: no cover - a broken checkout, not a test case
    raise ImportError(
        "framework.nn._cpu (the CPU device's C kernels) is not built: run "
        "`.venv/bin/python setup.py -q build_ext --inplace`"
    ) from e

__all__ = ["PreparedModel", "checkSupport", "runModel"]


def _check_enums() -> None:
    """The extension's model enums must be the compiled AIDL ones, name for name, both ways.

    A stale build (or a header that moved on) fails here, at import, not as a mislabelled
    model later.
    """
    for aidl, c_enum, prefix in (
        (OperandType, "npu_operand_type", "NPU_OPERAND_"),
        (OperandLifeTime, "npu_operand_lifetime", "NPU_LIFETIME_"),
        (OperationType, "npu_operation_type", "NPU_OP_"),
        (FuseCode, "npu_fuse_code", "NPU_FUSE_"),
    ):
        problem = enum_problem(aidl, c_enum, ffi.typeof(f"enum {c_enum}").elements, prefix)
        if problem:
            raise ImportError(f"framework.nn._cpu: {problem}: rebuild the extension (`make ext`) or update the AIDL")

_check_enums()

# C status names that mean "the model or the buffers are wrong" (the caller's data),
# as opposed to the host running out of memory or an internal failure.
_DATA_ERRORS = frozenset(
    {
        "INVALID_ARGUMENT",
        "BAD_OPERAND_INDEX",
        "BAD_OPERAND_TYPE",
        "BAD_SHAPE",
        "BAD_LIFETIME",
        "BAD_OPERAND_LOCATION",
        "BAD_OPERATION",
        "UNSUPPORTED_OPERATION",
        "BAD_FUSE_CODE",
        "BAD_SCALAR",
        "BAD_MODEL_IO",
        "BAD_BUFFER",
        "TOO_MANY",
    }
)
_UINT32_MAX = 0xFFFFFFFF
_MAX_RANK = len(ffi.new("struct npu_shape *").dims)  # NPU_MAX_RANK


def _error(call: str, status: int, bad_operation: int | None = None) -> NeuralNetworksError:
    name = ffi.string(lib.npu_error_name(status)).decode()
    message = f"{call}: {ffi.string(lib.npu_strerror(status)).decode()} (NPU_E_{name})"
    if bad_operation is not None and bad_operation != _UINT32_MAX:
        message += f" at operation {bad_operation}"
    if name == "NO_MEMORY":
        return OutOfMemoryError(message)
    if name in _DATA_ERRORS:
        return BadDataError(message)
    return OpFailedError(message)


class _CModel:
    """A ``struct npu_model`` over a HalModel (interfaces.c_model), and the cdata it points into."""

    __slots__ = ("ptr", "_keep")

    def __init__(self, model: HalModel) -> None:
        self.ptr, self._keep = c_model(ffi, model.main, model.operandValues, model.pools, BadDataError)


def checkSupport(model: HalModel) -> list[bool]:
    """The CPU device's ``getSupportedOperations``: what the C kernels can compute.

    A valid NNAPI operation the kernels do not implement answers False (so the
    partitioner places it elsewhere, or refuses the model); a structurally broken
    model is ``BAD_DATA``.
    """
    cmodel = _CModel(model)
    computable = ffi.new("bool[]", max(len(model.operations), 1))
    bad = ffi.new("uint32_t *", _UINT32_MAX)
    status = lib.npu_model_check_support(cmodel.ptr, computable, bad)
    if status != 0:
        raise _error("getSupportedOperations", status, bad[0])
    return [bool(computable[k]) for k in range(len(model.operations))]


def _buffers(call: str, what: str, buffers: Sequence[Any], writable: bool) -> tuple[Any, list[Any]]:
    arr = ffi.new("struct npu_buffer[]", max(len(buffers), 1))
    keep: list[Any] = [arr]
    for i, buf in enumerate(buffers):
        try:
            view = memoryview(buf).cast("B")
        except TypeError:
            raise BadDataError(f"{call}: {what} {i} is not a buffer ({type(buf).__name__})") from None
        if writable and view.readonly:
            raise BadDataError(f"{call}: {what} {i} is read-only")
        data = ffi.from_buffer("char[]", view, require_writable=writable) if len(view) else ffi.NULL
        keep.append(data)
        arr[i].data, arr[i].length = data, len(view)
    return arr, keep


def runModel(
    model: HalModel,
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    inputDimensions: Sequence[Sequence[int] | None] | None = None,  # noqa: N803
) -> list[tuple[list[int], bool]]:
    """Run ``model`` whole on the calling thread: outputs are written in place.

    ``inputs[i]`` holds the bytes of ``model.inputIndexes[i]`` and ``outputs[i]`` is a
    writable buffer for ``model.outputIndexes[i]`` (a C-contiguous numpy array, a
    memoryview into shared memory...). ``inputDimensions[i]`` (``None`` or empty: as
    declared) gives the dimensions of an input the model leaves unspecified; an input's
    buffer is exactly its size, an output's exactly its size when the model declares it
    whole, and at least its size when only the run gives it.

    Returns each output's dimensions and whether its buffer held it: a buffer too small
    (only possible for an output the model leaves unspecified) is ``False`` there, the
    run stopped, and the dimensions say what it needs.
    """
    cmodel = _CModel(model)
    return _run(lambda *args: lib.npu_kernel_run_model_shaped(cmodel.ptr, *args), inputs, outputs, inputDimensions)


class PreparedModel:
    """A model the CPU device planned once (``npu_kernel_prepare``), for many runs.

    What ``runModel`` does per call (building the C model, validating and planning it,
    copying its constants, allocating its temporaries) is done here once; each ``run``
    only computes. Runs of one prepared model are serialised (the C plan keeps one
    arena); the C side is freed with the object.
    """

    __slots__ = ("_ptr", "_lock")

    def __init__(self, model: HalModel) -> None:
        cmodel = _CModel(model)
        out = ffi.new("struct npu_kernel_prepared **")
        status = lib.npu_kernel_prepare(cmodel.ptr, out)
        if status != 0:
            raise _error("prepare on nnapi-reference", status)
        self._ptr = ffi.gc(out[0], lib.npu_kernel_release)
        self._lock = threading.Lock()

    def run(
        self,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
        inputDimensions: Sequence[Sequence[int] | None] | None = None,  # noqa: N803
    ) -> list[tuple[list[int], bool]]:
        """As ``runModel`` of the model this was prepared from."""
        with self._lock:
            return _run(lambda *args: lib.npu_kernel_run_prepared(self._ptr, *args), inputs, outputs, inputDimensions)


def _run(
    call: Any,
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    inputDimensions: Sequence[Sequence[int] | None] | None,  # noqa: N803
) -> list[tuple[list[int], bool]]:
    """``call(ins, shapes_in, n_in, outs, shapes_out, n_out)`` (a C run) on the buffers."""
    ins, keep_in = _buffers("execute", "input", inputs, False)
    outs, keep_out = _buffers("execute", "output", outputs, True)
    shapes_in = ffi.NULL
    if inputDimensions is not None:
        if len(inputDimensions) != len(inputs):
            raise BadDataError(f"execute: {len(inputDimensions)} input dimensions for {len(inputs)} inputs")
        shapes_in = ffi.new("struct npu_shape[]", max(len(inputs), 1))
        for i, dims in enumerate(inputDimensions):
            dims = list(dims or ())
            if len(dims) > _MAX_RANK or any(not 0 <= int(d) <= _UINT32_MAX for d in dims):
                raise BadDataError(f"execute: input {i}'s dimensions {dims} are not a shape npuemu computes")
            shapes_in[i].rank = len(dims)
            for k, d in enumerate(dims):
                shapes_in[i].dims[k] = int(d)
    shapes_out = ffi.new("struct npu_shape[]", max(len(outputs), 1))
    status = call(ins, shapes_in, len(inputs), outs, shapes_out, len(outputs))
    del keep_in, keep_out
    shapes = [([int(shapes_out[i].dims[k]) for k in range(shapes_out[i].rank)], bool(shapes_out[i].sufficient))
              for i in range(len(outputs))]
    if status != 0 and ffi.string(lib.npu_error_name(status)).decode() != "BUFFER_TOO_SMALL":
        raise _error("execute on nnapi-reference", status)
    return shapes
