"""``evaluate``: one NN HAL 1.2 operation over plain values, by its name or enum member."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import conv, detection, elementwise, lsh, norm, rnn, sampling, shape
from .core import BadOperation, Call, Operand
from .signatures import SELECTING

#: NN HAL 1.2's OperationType, by code (the index): all 95 operations.
OPERATION_TYPES: tuple[str, ...] = (
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE",
    "DEQUANTIZE", "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED", "HASHTABLE_LOOKUP",
    "L2_NORMALIZATION", "L2_POOL_2D", "LOCAL_RESPONSE_NORMALIZATION", "LOGISTIC", "LSH_PROJECTION",
    "LSTM", "MAX_POOL_2D", "MUL", "RELU", "RELU1", "RELU6", "RESHAPE", "RESIZE_BILINEAR", "RNN",
    "SOFTMAX", "SPACE_TO_DEPTH", "SVDF", "TANH",
    # 1.1
    "BATCH_TO_SPACE_ND", "DIV", "MEAN", "PAD", "SPACE_TO_BATCH_ND", "SQUEEZE", "STRIDED_SLICE",
    "SUB", "TRANSPOSE",
    # 1.2
    "ABS", "ARGMAX", "ARGMIN", "AXIS_ALIGNED_BBOX_TRANSFORM", "BIDIRECTIONAL_SEQUENCE_LSTM",
    "BIDIRECTIONAL_SEQUENCE_RNN", "BOX_WITH_NMS_LIMIT", "CAST", "CHANNEL_SHUFFLE",
    "DETECTION_POSTPROCESSING", "EQUAL", "EXP", "EXPAND_DIMS", "GATHER", "GENERATE_PROPOSALS",
    "GREATER", "GREATER_EQUAL", "GROUPED_CONV_2D", "HEATMAP_MAX_KEYPOINT", "INSTANCE_NORMALIZATION",
    "LESS", "LESS_EQUAL", "LOG", "LOGICAL_AND", "LOGICAL_NOT", "LOGICAL_OR", "LOG_SOFTMAX",
    "MAXIMUM", "MINIMUM", "NEG", "NOT_EQUAL", "PAD_V2", "POW", "PRELU", "QUANTIZE",
    "QUANTIZED_16BIT_LSTM", "RANDOM_MULTINOMIAL", "REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX",
    "REDUCE_MIN", "REDUCE_PROD", "REDUCE_SUM", "ROI_ALIGN", "ROI_POOLING", "RSQRT", "SELECT", "SIN",
    "SLICE", "SPLIT", "SQRT", "TILE", "TOPK_V2", "TRANSPOSE_CONV_2D", "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "RESIZE_NEAREST_NEIGHBOR",
)

Kernel = Callable[[Call], list[Operand]]

_FAMILIES: tuple[dict[str, Kernel], ...] = (
    elementwise.OPERATIONS, conv.OPERATIONS, detection.OPERATIONS, lsh.OPERATIONS, norm.OPERATIONS,
    rnn.OPERATIONS, sampling.OPERATIONS, shape.OPERATIONS,
)
KERNELS: dict[str, Kernel] = {name: kernel for family in _FAMILIES for name, kernel in family.items()}
assert len(KERNELS) == sum(map(len, _FAMILIES)), "two families define one operation"


def operation_name(operation: object) -> str:
    """A 1.2 operation's name, from its name, its code or an OperationType member."""
    if isinstance(operation, str):
        name = operation
    elif isinstance(operation, int):
        if not 0 <= int(operation) < len(OPERATION_TYPES):
            raise ValueError(f"operation {int(operation)} is not an NN HAL 1.2 OperationType")
        name = OPERATION_TYPES[int(operation)]
    else:
        raise TypeError(f"an operation is a name or a code, not {operation!r}")
    if name not in OPERATION_TYPES:
        raise ValueError(f"{name!r} is not an NN HAL 1.2 OperationType")
    return name


def implemented() -> tuple[str, ...]:
    return tuple(name for name in OPERATION_TYPES if name in KERNELS)


def evaluate(operation: object, inputs: Sequence[Operand], outputs: Sequence[Operand | None] = (),
             *, relaxed: bool = False) -> list[Operand]:
    """Run one operation: ``inputs`` in the 1.2 signature's order (a trailing optional input may
    be left out, or given as an Operand with no value), ``outputs`` the templates naming each
    output's type and quantization (defaults: the first input's). Returns the outputs' values.
    """
    name = operation_name(operation)
    kernel = KERNELS.get(name)
    if kernel is None:
        raise NotImplementedError(f"nnref has no reference for {name} yet")
    at, types = SELECTING[name]
    if at < len(inputs) and isinstance(inputs[at], Operand) and inputs[at].type not in types:
        raise BadOperation(f"{name}: input {at} is {inputs[at].type}; the 1.2 spec allows {', '.join(types)}")
    try:
        return kernel(Call(name, inputs, outputs, relaxed))
    except BadOperation:
        raise
    except ValueError as e:  # a shared rule (padding, broadcasting, shapes) refused the call
        raise BadOperation(f"{name}: {e}") from e
