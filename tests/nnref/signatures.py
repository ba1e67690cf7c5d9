"""The operand types NN HAL 1.2 allows each operation, by the input that selects them.

``SELECTING[name] == (index, types)``: the operation's variant is chosen by input
``index``'s type, one of ``types`` (types.hal's "Supported tensor OperandType" lists). The
conformance suite reads it to know which variations to generate; ``evaluate`` refuses any
other type there before a kernel runs.
"""

from __future__ import annotations

F32, F16, I32, Q8 = "TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM"
FLOAT = (F32, F16)
FLOAT_Q8 = (F32, F16, Q8)
ALL4 = (F16, F32, I32, Q8)
BOOL8 = ("TENSOR_BOOL8",)

_BY_TYPES: dict[tuple[str, ...], tuple[str, ...]] = {
    FLOAT_Q8: (
        "ADD", "MUL", "SUB", "AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D",
        "GROUPED_CONV_2D", "TRANSPOSE_CONV_2D", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "FULLY_CONNECTED",
        "L2_NORMALIZATION", "LOGISTIC", "TANH", "RELU", "RELU1", "RELU6", "RESHAPE", "RESIZE_BILINEAR",
        "RESIZE_NEAREST_NEIGHBOR", "SOFTMAX", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "MEAN", "PAD", "PAD_V2",
        "SQUEEZE", "STRIDED_SLICE", "TRANSPOSE", "CHANNEL_SHUFFLE", "PRELU", "REDUCE_MAX", "REDUCE_MIN",
        "BOX_WITH_NMS_LIMIT", "GENERATE_PROPOSALS", "HEATMAP_MAX_KEYPOINT", "ROI_ALIGN", "ROI_POOLING",
    ),
    FLOAT: (
        "DIV", "L2_POOL_2D", "FLOOR", "LOCAL_RESPONSE_NORMALIZATION", "LSTM", "RNN", "SVDF", "ABS", "EXP", "LOG",
        "RSQRT", "SIN", "SQRT", "POW", "LOG_SOFTMAX", "INSTANCE_NORMALIZATION", "QUANTIZE", "RANDOM_MULTINOMIAL",
        "REDUCE_PROD", "REDUCE_SUM", "DETECTION_POSTPROCESSING", "LSH_PROJECTION", "BIDIRECTIONAL_SEQUENCE_LSTM",
        "BIDIRECTIONAL_SEQUENCE_RNN", "UNIDIRECTIONAL_SEQUENCE_LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN",
    ),
    ALL4: ("ARGMAX", "ARGMIN", "CAST", "EXPAND_DIMS", "GATHER", "MAXIMUM", "MINIMUM", "SLICE", "SPLIT", "TILE", "TOPK_V2"),
    (*BOOL8, *ALL4): ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"),
    BOOL8: ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "REDUCE_ALL", "REDUCE_ANY"),
    (F32, F16, I32): ("NEG",),
    (Q8,): ("QUANTIZED_16BIT_LSTM",),
    (Q8, "TENSOR_QUANT8_SYMM", "TENSOR_QUANT8_SYMM_PER_CHANNEL"): ("DEQUANTIZE",),
    (F16, F32, "TENSOR_QUANT16_ASYMM"): ("AXIS_ALIGNED_BBOX_TRANSFORM",),
}
#: Operations whose selecting input is not input 0: the looked-up values, SELECT's data.
_AT = {"EMBEDDING_LOOKUP": (1, (F32, I32, Q8)), "HASHTABLE_LOOKUP": (2, (F32, I32, Q8)), "SELECT": (1, ALL4)}

SELECTING: dict[str, tuple[int, tuple[str, ...]]] = {
    **{name: (0, types) for types, names in _BY_TYPES.items() for name in names},
    **_AT,
}
