"""Binder statuses and the exceptions they become on the caller's side.

The exception codes are Android's (``android.os.Parcel`` / ``binder::Status``);
a handler that raises one of these classes sends the matching status back, and the
proxy re-raises it with the remote message. Transport-level failures (a dead peer, a
frame too large, an unknown code) are ``TransactionError`` subclasses, as on Android
where they are status_t values rather than exceptions written into the reply.
"""

from __future__ import annotations

import errno

# Exception codes written into a reply (binder::Status::Exception).
EX_NONE = 0
EX_SECURITY = -1
EX_BAD_PARCELABLE = -2
EX_ILLEGAL_ARGUMENT = -3
EX_NULL_POINTER = -4
EX_ILLEGAL_STATE = -5
EX_NETWORK_MAIN_THREAD = -6
EX_UNSUPPORTED_OPERATION = -7
EX_SERVICE_SPECIFIC = -8
EX_PARCELABLE = -9
EX_TRANSACTION_FAILED = -129

# Transport status codes (status_t).
OK = 0
UNKNOWN_TRANSACTION = -errno.EBADMSG
DEAD_OBJECT = -errno.EPIPE
FAILED_TRANSACTION = -2147483646  # INT32_MIN + 2
BAD_VALUE = -errno.EINVAL

FIRST_CALL_TRANSACTION = 1
LAST_CALL_TRANSACTION = 0x00FFFFFF
MAX_TRANSACTION_SIZE = 1 << 20  # 1 MiB, as the kernel's binder buffer


class RemoteException(Exception):
    """Base of every binder error a caller can see (android.os.RemoteException)."""

    exception_code: int = EX_TRANSACTION_FAILED

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class SecurityException(RemoteException, PermissionError):
    exception_code = EX_SECURITY


class BadParcelableException(RemoteException, ValueError):
    exception_code = EX_BAD_PARCELABLE


class IllegalArgumentException(RemoteException, ValueError):
    exception_code = EX_ILLEGAL_ARGUMENT


class NullPointerException(RemoteException, TypeError):
    exception_code = EX_NULL_POINTER


class IllegalStateException(RemoteException, RuntimeError):
    exception_code = EX_ILLEGAL_STATE


class UnsupportedOperationException(RemoteException, NotImplementedError):
    exception_code = EX_UNSUPPORTED_OPERATION


class ServiceSpecificException(RemoteException):
    """An error with a service-defined code (EX_SERVICE_SPECIFIC)."""

    exception_code = EX_SERVICE_SPECIFIC

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message)
        self.error_code = error_code

    def __str__(self) -> str:
        return f"{self.error_code}: {self.message}" if self.message else str(self.error_code)

    def __reduce__(self):
        return (type(self), (self.error_code, self.message))


class TransactionError(RemoteException):
    """The transaction itself failed: nothing reached, or came back from, the handler."""

    exception_code = EX_TRANSACTION_FAILED
    status: int = FAILED_TRANSACTION


class TransactionFailedException(TransactionError):
    status = FAILED_TRANSACTION


class DeadObjectException(TransactionError):
    """The object's process is gone (DEAD_OBJECT)."""

    status = DEAD_OBJECT


class TransactionTooLargeException(TransactionError):
    """The parcel is over MAX_TRANSACTION_SIZE; it was never sent."""

    status = FAILED_TRANSACTION


class UnknownTransactionException(TransactionError):
    """The target does not implement that transaction code (UNKNOWN_TRANSACTION)."""

    status = UNKNOWN_TRANSACTION


_BY_CODE: dict[int, type[RemoteException]] = {
    cls.exception_code: cls
    for cls in (
        SecurityException,
        BadParcelableException,
        IllegalArgumentException,
        NullPointerException,
        IllegalStateException,
        UnsupportedOperationException,
        ServiceSpecificException,
        TransactionFailedException,
    )
}


def exception_for(code: int, message: str, service_specific_code: int = 0) -> RemoteException:
    """The exception a caller raises for a reply with exception code ``code``."""
    if code == EX_SERVICE_SPECIFIC:
        return ServiceSpecificException(service_specific_code, message)
    cls = _BY_CODE.get(code, TransactionFailedException)
    return cls(message)


class ProtocolError(TransactionError, ValueError):
    """A peer sent bytes that are not the binder protocol (bad length, garbage, a frame
    out of turn). The connection to that peer is dropped; everyone else is served."""

    status = FAILED_TRANSACTION


def _pack_chars(a: str, b: str, c: str, d: str) -> int:
    return (ord(a) << 24) | (ord(b) << 16) | (ord(c) << 8) | ord(d)


# Transactions every binder answers, whatever its interface (IBinder.java).
PING_TRANSACTION = _pack_chars("_", "P", "N", "G")
INTERFACE_TRANSACTION = _pack_chars("_", "N", "T", "F")
