"""nnref: an independent numpy reference of NN HAL 1.2's 95 operations, to judge the C kernels.

Layout: ``core`` holds the vocabulary (``Operand``: a value with its type, scale, zero
point and per-channel parameters; the quantization arithmetic of Android's reference CPU
implementation; fused activations, implicit padding, layouts, broadcasting; Android's
tolerances) and ``Call`` (one operation's inputs as each kernel reads them). One module
per family of operations holds the kernels, each exporting ``OPERATIONS`` (name ->
kernel); ``registry`` joins them into ``evaluate``; ``signatures`` says which operand types
the 1.2 spec allows each operation (``SELECTING``). Plain values in, plain values out: no
model format, so any form of model can be wired to it.
"""

from .core import (
    DTYPES as DTYPES,
    OPERAND_TYPES as OPERAND_TYPES,
    BadOperation as BadOperation,
    ChannelQuant as ChannelQuant,
    Operand as Operand,
    assert_close as assert_close,
    boolean as boolean,
    float16 as float16,
    float32 as float32,
    int32 as int32,
    output as output,
    tensor as tensor,
)
from .registry import (
    OPERATION_TYPES as OPERATION_TYPES,
    evaluate as evaluate,
    implemented as implemented,
    operation_name as operation_name,
)
from .signatures import SELECTING as SELECTING
