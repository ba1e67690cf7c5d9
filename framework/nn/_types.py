"""The NNAPI enums and small value types, with Android's names and numbers.

Sources: the NDK (``NeuralNetworks.h``) for ``Priority`` (whose numbers are the NDK's,
not the HAL's: ``Priority.halValue`` converts). ``FuseCode`` (the NDK's name for the
AIDL's ``FusedActivationFunc``, same numbers), ``DeviceType``,
``DeviceStatus``, ``ExecutionPreference`` (the NDK's ``ANEURALNETWORKS_PREFER_*`` have the
same names and numbers), ``OperandLifeTime``, ``OperandType`` and ``OperationType`` are
the HAL's AIDL enums, and ``PerformanceInfo`` and ``Capabilities`` its parcelables, as
compiled into ``interfaces`` (the same classes the HAL uses), re-exported here; what the
runtime asks of the two parcelables (positive figures, ``FLT_MAX`` for a type a device
gives none) are functions over them.
The numbers are Android's, so a model means the same thing in C, in Python and on the
wire; ``dtypeOf`` says how each of NN HAL 1.2's 14 operand types is stored.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping

import numpy as np

from interfaces.android.hardware.neuralnetworks import (
    Capabilities,
    DeviceStatus,
    DeviceType,
    ExecutionPreference,
    FusedActivationFunc,
    OperandLifeTime,
    OperandPerformance,
    OperandType,
    OperationType,
    PerformanceInfo,
    SymmPerChannelQuantParams,
)
from interfaces.android.hardware.neuralnetworks import (
    Priority as HalPriority,
)

from interfaces.c_model import OPERAND_DTYPES

from ._errors import BadDataError

#: ``ANeuralNetworksDevice_getFeatureLevel`` of an Android 10 (NN HAL 1.2) device.
FEATURE_LEVEL = 29

#: Values up to this size are copied into the model at ``setOperandValue``
#: (``ANEURALNETWORKS_MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES``); larger ones live in a pool.
MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES = 128

#: What Android's runtime uses for "no performance figure for this operand type":
#: ``FLT_MAX``, so such a device loses every comparison.
FLT_MAX = float(np.finfo(np.float32).max)


_SCALARS = frozenset(
    {OperandType.FLOAT32, OperandType.INT32, OperandType.UINT32, OperandType.BOOL, OperandType.FLOAT16}
)
# How each type is stored, little-endian (types.hal): a BOOL or TENSOR_BOOL8 element is one
# byte, 0 false and anything else true.
_DTYPES = OPERAND_DTYPES
_BOOLS = frozenset({OperandType.BOOL, OperandType.TENSOR_BOOL8})


def isScalar(operandType: OperandType) -> bool:  # noqa: N802 - NNAPI's spelling
    """True for the scalar types (FLOAT32, INT32, UINT32, BOOL, FLOAT16), False for tensors."""
    return operandType in _SCALARS


def isBool(operandType: OperandType) -> bool:  # noqa: N802
    """True for BOOL and TENSOR_BOOL8 (one byte per element, stored as 0 or 1)."""
    return operandType in _BOOLS


def dtypeOf(operandType: OperandType) -> np.dtype:  # noqa: N802
    """The numpy dtype of one element, as the model stores it (little-endian)."""
    return _DTYPES[operandType]


#: ``ANEURALNETWORKS_FUSED_*``, the activation fused onto ADD, SUB, MUL, FULLY_CONNECTED
#: and CONV_2D: the NDK's codes have the HAL's ``FusedActivationFunc`` names and numbers,
#: so the NDK name is the compiled AIDL class itself.
FuseCode = FusedActivationFunc

#: What a device without a figure for an operand type is assumed to cost.
NO_PERFORMANCE = PerformanceInfo(execTime=FLT_MAX, powerUsage=FLT_MAX)


def checkPerformanceInfo(info: PerformanceInfo, what: str) -> PerformanceInfo:  # noqa: N802
    """``info`` if both its figures are positive (NNAPI's VTS requires it), else ``BadDataError``.

    A device claiming 0, a negative or NaN cost is refused rather than trusted to win
    every comparison.
    """
    if not isinstance(info, PerformanceInfo):
        raise BadDataError(f"{what} must be a PerformanceInfo, not {info!r}")
    for name in ("execTime", "powerUsage"):
        value = getattr(info, name)
        if math.isnan(value) or value <= 0:
            raise BadDataError(f"{what}.{name} must be > 0, got {value!r}")
    return info


def checkCapabilities(capabilities: Capabilities, what: str = "capabilities") -> Capabilities:  # noqa: N802
    """``capabilities`` (``IDevice::getCapabilities``) if every figure in it is sound, else ``BadDataError``.

    Every PerformanceInfo positive, and each operand type listed at most once.
    """
    if not isinstance(capabilities, Capabilities):
        raise BadDataError(f"{what} must be a Capabilities, not {type(capabilities).__name__}")
    for name in ("relaxedFloat32toFloat16PerformanceScalar", "relaxedFloat32toFloat16PerformanceTensor",
                 "ifPerformance", "whilePerformance"):
        checkPerformanceInfo(getattr(capabilities, name), f"{what}.{name}")
    seen = set()
    for entry in capabilities.operandPerformance:
        if entry.type in seen:
            raise BadDataError(f"{what}: operand type {entry.type.name} is listed twice")
        seen.add(entry.type)
        checkPerformanceInfo(entry.info, f"{what}[{entry.type.name}]")
    return capabilities


def makeCapabilities(  # noqa: N802
    operandPerformance: Mapping[OperandType, PerformanceInfo], default: PerformanceInfo = NO_PERFORMANCE
) -> Capabilities:
    """The ``Capabilities`` parcelable listing ``operandPerformance`` (sorted by type, as the HAL lists it).

    ``default`` fills the figures no operand type names (relaxed float32, control flow);
    an operand type left out costs ``FLT_MAX`` (see :func:`lookupPerformance`).
    """
    entries = [
        OperandPerformance(type=OperandType(t), info=info) for t, info in sorted(operandPerformance.items())
    ]
    return Capabilities(
        relaxedFloat32toFloat16PerformanceScalar=default,
        relaxedFloat32toFloat16PerformanceTensor=default,
        operandPerformance=entries,
        ifPerformance=default,
        whilePerformance=default,
    )


def uniformCapabilities(execTime: float, powerUsage: float) -> Capabilities:  # noqa: N802, N803
    """The same figures for every operand type (the CPU reference device is 1.0, 1.0)."""
    info = PerformanceInfo(execTime=execTime, powerUsage=powerUsage)
    return makeCapabilities(dict.fromkeys(OperandType, info), info)


def lookupPerformance(capabilities: Capabilities, operandType: OperandType) -> PerformanceInfo:  # noqa: N802, N803
    """The figure for ``operandType``; ``FLT_MAX`` for a type the device gives none (Android's ``lookup``)."""
    for entry in capabilities.operandPerformance:
        if entry.type == operandType:
            return entry.info
    return NO_PERFORMANCE


class Priority(enum.IntEnum):
    """``ANEURALNETWORKS_PRIORITY_*``: how a compilation's work ranks against the app's other work.

    The NDK's own enum, not a copy of the HAL's: its numbers are 90, 100, 110 where the
    HAL's ``Priority`` (AIDL) says ``LOW = 0, MEDIUM = 1, HIGH = 2``. :attr:`halValue`
    is the one conversion between them. ``DEFAULT`` is ``MEDIUM``.
    """

    LOW = 90
    MEDIUM = 100
    HIGH = 110
    DEFAULT = 100

    @property
    def halValue(self) -> HalPriority:  # noqa: N802
        """The HAL's ``Priority`` of the same name (``DEFAULT`` is ``MEDIUM``), as ``prepareModel`` takes it."""
        return HalPriority[self.name]


class DurationCode(enum.IntEnum):
    """``ANEURALNETWORKS_DURATION_*``: which time ``Execution.getDuration`` reports."""

    ON_HARDWARE = 0
    IN_DRIVER = 1


#: ``getDuration``'s answer when a duration is not available (the NDK's UINT64_MAX).
NO_DURATION = (1 << 64) - 1
