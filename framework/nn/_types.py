"""The NNAPI enums and small value types, with Android's names and numbers.

Sources: NN HAL 1.2 (``types.hal``) for ``PerformanceInfo`` and ``Capabilities``; the
NDK (``NeuralNetworks.h``) for ``FuseCode``. ``DeviceType``, ``DeviceStatus``,
``ExecutionPreference`` (the NDK's ``ANEURALNETWORKS_PREFER_*`` have the same names and
numbers), ``OperandLifeTime``, ``OperandType`` and ``OperationType`` are the HAL's AIDL enums as compiled into ``interfaces`` (the same
classes the HAL uses), re-exported here.
npuemu models are float32 only, so only the types the shared model format names are
here; the numbers are Android's so a model means the same thing in C, in Python and on
the wire.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
from collections.abc import Mapping

import numpy as np

from interfaces.android.hardware.neuralnetworks import (
    DeviceStatus,
    DeviceType,
    ExecutionPreference,
    OperandLifeTime,
    OperandType,
    OperationType,
)

from ._errors import BadDataError

#: ``ANeuralNetworksDevice_getFeatureLevel`` of an Android 10 (NN HAL 1.2) device.
FEATURE_LEVEL = 29

#: Values up to this size are copied into the model at ``setOperandValue``
#: (``ANEURALNETWORKS_MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES``); larger ones live in a pool.
MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES = 128

#: What Android's runtime uses for "no performance figure for this operand type":
#: ``FLT_MAX``, so such a device loses every comparison.
FLT_MAX = float(np.finfo(np.float32).max)


_SCALARS = frozenset({OperandType.FLOAT32, OperandType.INT32, OperandType.UINT32, OperandType.BOOL})
_DTYPES = {
    OperandType.FLOAT32: np.dtype("<f4"),
    OperandType.INT32: np.dtype("<i4"),
    OperandType.UINT32: np.dtype("<u4"),
    OperandType.TENSOR_FLOAT32: np.dtype("<f4"),
    OperandType.TENSOR_INT32: np.dtype("<i4"),
    OperandType.TENSOR_QUANT8_ASYMM: np.dtype("u1"),
    OperandType.BOOL: np.dtype("u1"),
}


def isScalar(operandType: OperandType) -> bool:  # noqa: N802 - NNAPI's spelling
    """True for the scalar types (FLOAT32, INT32, UINT32, BOOL), False for tensors."""
    return operandType in _SCALARS


def dtypeOf(operandType: OperandType) -> np.dtype:  # noqa: N802
    """The numpy dtype of one element, as the model stores it (little-endian)."""
    return _DTYPES[operandType]


class FuseCode(enum.IntEnum):
    """The activation fused onto ADD, SUB, MUL, FULLY_CONNECTED and CONV_2D."""

    NONE = 0
    RELU = 1
    RELU1 = 2
    RELU6 = 3


@dataclasses.dataclass(frozen=True, slots=True)
class PerformanceInfo:
    """A device's cost for one operand type, as a ratio to the CPU: lower is better.

    ``execTime`` is time per operation, ``powerUsage`` energy per operation; the CPU
    reference device is 1.0 for both. NNAPI's VTS requires both to be positive; a
    device that claims otherwise is refused with BAD_DATA rather than trusted to win
    every comparison.
    """

    execTime: float
    powerUsage: float

    def __post_init__(self) -> None:
        for name in ("execTime", "powerUsage"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BadDataError(f"PerformanceInfo.{name} must be a number, not {value!r}")
            if math.isnan(value) or value <= 0:
                raise BadDataError(f"PerformanceInfo.{name} must be > 0, got {value!r}")
            object.__setattr__(self, name, float(value))


#: What a device without a figure for an operand type is assumed to cost.
NO_PERFORMANCE = PerformanceInfo(FLT_MAX, FLT_MAX)


@dataclasses.dataclass(frozen=True, slots=True)
class Capabilities:
    """``IDevice::getCapabilities_1_2()``: performance per operand type.

    ``operandPerformance`` maps an :class:`OperandType` to its :class:`PerformanceInfo`;
    it is stored read-only. A type the device gives no figure for costs ``FLT_MAX``, as
    in Android's ``lookup()``.
    """

    operandPerformance: Mapping[OperandType, PerformanceInfo]
    relaxedFloat32toFloat16PerformanceScalar: PerformanceInfo = NO_PERFORMANCE
    relaxedFloat32toFloat16PerformanceTensor: PerformanceInfo = NO_PERFORMANCE

    def __post_init__(self) -> None:
        table = {}
        for key, info in dict(self.operandPerformance).items():
            try:
                key = OperandType(key)
            except ValueError:
                raise BadDataError(f"Capabilities: unknown operand type {key!r}") from None
            if not isinstance(info, PerformanceInfo):
                raise BadDataError(f"Capabilities[{key.name}] must be a PerformanceInfo, not {info!r}")
            table[key] = info
        object.__setattr__(self, "operandPerformance", types.MappingProxyType(table))

    @classmethod
    def uniform(cls, execTime: float, powerUsage: float) -> Capabilities:
        """The same figures for every operand type (the CPU reference device is 1.0, 1.0)."""
        info = PerformanceInfo(execTime, powerUsage)
        return cls({t: info for t in OperandType}, info, info)

    def getPerformance(self, operandType: OperandType) -> PerformanceInfo:
        return self.operandPerformance.get(operandType, NO_PERFORMANCE)


class Priority(enum.IntEnum):
    """``ANEURALNETWORKS_PRIORITY_*``: how a compilation's work ranks against the app's other work.

    The NDK's numbers (90, 100, 110); the HAL's ``Priority`` is ``LOW = 0, MEDIUM = 1,
    HIGH = 2`` (:attr:`halValue`). ``DEFAULT`` is ``MEDIUM``.
    """

    LOW = 90
    MEDIUM = 100
    HIGH = 110
    DEFAULT = 100

    @property
    def halValue(self) -> int:
        return {Priority.LOW: 0, Priority.MEDIUM: 1, Priority.HIGH: 2}[self]


class DurationCode(enum.IntEnum):
    """``ANEURALNETWORKS_DURATION_*``: which time ``Execution.getDuration`` reports."""

    ON_HARDWARE = 0
    IN_DRIVER = 1


#: ``getDuration``'s answer when a duration is not available (the NDK's UINT64_MAX).
NO_DURATION = (1 << 64) - 1
