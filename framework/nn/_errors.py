"""NNAPI result codes, as exceptions that carry their number.

The NDK returns an ``int`` from every call: ``ANEURALNETWORKS_NO_ERROR`` (0) or one of
the codes below. Here a failing call raises instead, and the exception keeps the
number in ``resultCode`` so a caller that speaks NDK (a test comparing against the C
API, a log line, a binder status) still has it. The numbers are Android's
(``NeuralNetworks.h``; ``android.neuralnetworks.Enums.RESULT_CODE_*``).

Every class derives from :class:`NeuralNetworksError` *and* from the builtin it
resembles, so ``except ValueError`` catches ``BAD_DATA`` the way a Python caller
expects, while ``except NeuralNetworksError`` catches everything NNAPI raises.
"""

from __future__ import annotations

import enum

from interfaces.android.hardware.neuralnetworks import ErrorStatus


class ResultCode(enum.IntEnum):
    """``ANEURALNETWORKS_*`` result codes.

    0..9 exist since Android 10 (API 29); 10..14 arrived with API 30. The numbers never
    change, so the runtime knows all of them and can report whatever a driver says.
    """

    NO_ERROR = 0
    OUT_OF_MEMORY = 1
    INCOMPLETE = 2
    UNEXPECTED_NULL = 3
    BAD_DATA = 4
    OP_FAILED = 5
    BAD_STATE = 6
    UNMAPPABLE = 7
    OUTPUT_INSUFFICIENT_SIZE = 8
    UNAVAILABLE_DEVICE = 9
    MISSED_DEADLINE_TRANSIENT = 10
    MISSED_DEADLINE_PERSISTENT = 11
    RESOURCE_EXHAUSTED_TRANSIENT = 12
    RESOURCE_EXHAUSTED_PERSISTENT = 13
    DEAD_OBJECT = 14


class NeuralNetworksError(Exception):
    """Base of every NNAPI error; ``resultCode`` is the NDK's number for it."""

    resultCode: ResultCode = ResultCode.OP_FAILED

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        name = f"ANEURALNETWORKS_{self.resultCode.name}"
        return f"{name}: {self.message}" if self.message else name


class OutOfMemoryError(NeuralNetworksError, MemoryError):
    resultCode = ResultCode.OUT_OF_MEMORY


class IncompleteError(NeuralNetworksError, RuntimeError):
    resultCode = ResultCode.INCOMPLETE


class UnexpectedNullError(NeuralNetworksError, TypeError):
    """A required argument is None: the NDK's null pointer."""

    resultCode = ResultCode.UNEXPECTED_NULL


def requireNotNull(call: str, **arguments: object) -> None:
    """``UNEXPECTED_NULL`` for the first of ``arguments`` that is None, as the NDK answers a
    null pointer where it needs an object, a list or a buffer."""
    for name, value in arguments.items():
        if value is None:
            raise UnexpectedNullError(f"{call}: {name} is None")


class BadDataError(NeuralNetworksError, ValueError):
    """A bad argument: an index out of range, a wrong count, type or shape."""

    resultCode = ResultCode.BAD_DATA


class OpFailedError(NeuralNetworksError, RuntimeError):
    resultCode = ResultCode.OP_FAILED


class BadStateError(NeuralNetworksError, RuntimeError):
    """A call in the wrong state: changing a finished model, using an unfinished one."""

    resultCode = ResultCode.BAD_STATE


class UnmappableError(NeuralNetworksError, OSError):
    resultCode = ResultCode.UNMAPPABLE


class OutputInsufficientSizeError(NeuralNetworksError, ValueError):
    resultCode = ResultCode.OUTPUT_INSUFFICIENT_SIZE


class UnavailableDeviceError(NeuralNetworksError, RuntimeError):
    resultCode = ResultCode.UNAVAILABLE_DEVICE


class MissedDeadlineTransientError(NeuralNetworksError, TimeoutError):
    resultCode = ResultCode.MISSED_DEADLINE_TRANSIENT


class MissedDeadlinePersistentError(NeuralNetworksError, TimeoutError):
    resultCode = ResultCode.MISSED_DEADLINE_PERSISTENT


class ResourceExhaustedTransientError(NeuralNetworksError, RuntimeError):
    resultCode = ResultCode.RESOURCE_EXHAUSTED_TRANSIENT


class ResourceExhaustedPersistentError(NeuralNetworksError, RuntimeError):
    resultCode = ResultCode.RESOURCE_EXHAUSTED_PERSISTENT


class DeadObjectError(NeuralNetworksError, ConnectionError):
    """The driver process behind a device died (binder's DEAD_OBJECT)."""

    resultCode = ResultCode.DEAD_OBJECT


_BY_CODE: dict[ResultCode, type[NeuralNetworksError]] = {
    cls.resultCode: cls
    for cls in (
        OutOfMemoryError,
        IncompleteError,
        UnexpectedNullError,
        BadDataError,
        OpFailedError,
        BadStateError,
        UnmappableError,
        OutputInsufficientSizeError,
        UnavailableDeviceError,
        MissedDeadlineTransientError,
        MissedDeadlinePersistentError,
        ResourceExhaustedTransientError,
        ResourceExhaustedPersistentError,
        DeadObjectError,
    )
}


def error_for_result_code(code: int, message: str = "") -> NeuralNetworksError:
    """The exception for an NDK result code, e.g. one a C driver or a peer returned.

    ``NO_ERROR`` is not an error and asking for it is a programming mistake
    (``ValueError``). A number Android does not define becomes ``OP_FAILED`` with the
    number in the message, so a misbehaving driver cannot crash the runtime.
    """
    if code == ResultCode.NO_ERROR:
        raise ValueError("ANEURALNETWORKS_NO_ERROR is not an error")
    try:
        cls = _BY_CODE[ResultCode(code)]
    except ValueError:
        return OpFailedError(f"unknown result code {code}" + (f": {message}" if message else ""))
    return cls(message)


_FROM_ERROR_STATUS = {
    ErrorStatus.NONE: ResultCode.NO_ERROR,
    ErrorStatus.DEVICE_UNAVAILABLE: ResultCode.UNAVAILABLE_DEVICE,
    ErrorStatus.GENERAL_FAILURE: ResultCode.OP_FAILED,
    ErrorStatus.OUTPUT_INSUFFICIENT_SIZE: ResultCode.OUTPUT_INSUFFICIENT_SIZE,
    ErrorStatus.INVALID_ARGUMENT: ResultCode.BAD_DATA,
    ErrorStatus.MISSED_DEADLINE_TRANSIENT: ResultCode.MISSED_DEADLINE_TRANSIENT,
    ErrorStatus.MISSED_DEADLINE_PERSISTENT: ResultCode.MISSED_DEADLINE_PERSISTENT,
    ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT: ResultCode.RESOURCE_EXHAUSTED_TRANSIENT,
    ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT: ResultCode.RESOURCE_EXHAUSTED_PERSISTENT,
}


def convertErrorStatusToResultCode(status: int) -> ResultCode:
    """Android's mapping from a HAL ``ErrorStatus`` to the NDK result code an app sees.

    An unknown status is a driver bug; Android reports it as ``OP_FAILED``.
    """
    try:
        return _FROM_ERROR_STATUS[ErrorStatus(status)]
    except ValueError:
        return ResultCode.OP_FAILED
