"""The runtime's side of the NN HAL: conversions to and from the AIDL types.

The HAL process serves ``android.hardware.neuralnetworks.IDevice/{name}``, declared in
``interfaces/android/hardware/neuralnetworks``. Those ``.aidl`` files, and the module
the AIDL compiler made of them, are the contract between the two processes, as the
HAL's interface definitions are on Android, where libneuralnetworks is built against
``android.hardware.neuralnetworks-V*``: the runtime imports the compiled interfaces by
name (``from interfaces.android.hardware.neuralnetworks import Request``), never the
HAL's Python package (DESIGN.md: nothing imports upward).

Conversions, one place each:

- :func:`toAidlModel`: a :class:`HalModel` (the runtime's in-memory model, whose ``main``
  is already the AIDL ``Subgraph``) as the HAL's ``Model`` parcelable: the same ``main``,
  with every pool a ``SharedMemory`` so weights travel as a file descriptor, not through
  msgpack. The caller owns the regions (a compilation keeps them for its life and closes
  them in ``aclose``).
- :func:`errorFromRemote`: a binder exception from a HAL call to the NDK result code an
  app sees, as Android's ``convertErrorStatusToResultCode`` and ``DEAD_OBJECT`` rules.
"""

from __future__ import annotations

from typing import Any

import interfaces.android.hardware.neuralnetworks as nn_hal
from framework.binder import (
    DeadObjectException,
    IllegalArgumentException,
    RemoteException,
    SecurityException,
    ServiceSpecificException,
    SharedMemory,
    TransactionError,
)

from ._errors import (
    BadDataError,
    DeadObjectError,
    NeuralNetworksError,
    OpFailedError,
    ResultCode,
    UnavailableDeviceError,
    convertErrorStatusToResultCode,
    error_for_result_code,
)
from ._hal import HalModel

__all__ = ["IDEVICE_DESCRIPTOR", "errorFromRemote", "toAidlModel"]

#: The interface name; an instance is registered as ``{IDEVICE_DESCRIPTOR}/{name}``.
IDEVICE_DESCRIPTOR = "android.hardware.neuralnetworks.IDevice"


def sharedMemoryFor(pool: Any, name: str) -> SharedMemory:
    """A new ``SharedMemory`` holding a copy of ``pool``'s bytes (one copy, at compile time)."""
    view = memoryview(pool).cast("B")
    region = SharedMemory.create(name, len(view))
    if len(view):
        mapping = region.mapReadWrite()
        try:
            mapping[:] = view
        finally:
            mapping.close()
    return region


def toAidlModel(hal: HalModel, pools: list[SharedMemory] | None = None) -> Any:
    """``hal`` as the HAL's ``Model`` parcelable; ``pools[i]`` carries ``hal.pools[i]``.

    Without ``pools``, each pool is copied into a new ``SharedMemory`` region, which the
    parcelable's ``pools`` then own (close them when done, or let them be collected).
    """
    if pools is None:
        pools = [sharedMemoryFor(pool, "nn-weights") for pool in hal.pools]
    if len(pools) != len(hal.pools):
        raise ValueError(f"toAidlModel: {len(hal.pools)} pools need {len(hal.pools)} regions, got {len(pools)}")
    return nn_hal.Model(
        main=hal.main,
        referenced=[],
        operandValues=hal.operandValues,
        pools=list(pools),
        relaxComputationFloat32toFloat16=hal.relaxComputationFloat32toFloat16,
    )


def errorFromRemote(device: str, call: str, exc: BaseException) -> NeuralNetworksError:
    """What an app sees when ``call`` on ``device`` failed with binder exception ``exc``."""
    where = f"{device}: {call}"
    if isinstance(exc, NeuralNetworksError):
        return exc
    if isinstance(exc, DeadObjectException):
        return DeadObjectError(f"{where}: the driver process died ({exc})")
    if isinstance(exc, ServiceSpecificException):
        code = convertErrorStatusToResultCode(exc.error_code)
        if code == ResultCode.NO_ERROR:  # a driver that fails with NONE is lying
            code = ResultCode.OP_FAILED
        return error_for_result_code(code, f"{where}: {exc.message or exc}")
    if isinstance(exc, IllegalArgumentException):
        return BadDataError(f"{where}: {exc.message or exc}")
    if isinstance(exc, SecurityException):
        return OpFailedError(f"{where}: refused: {exc.message or exc}")
    if isinstance(exc, TransactionError):
        return UnavailableDeviceError(f"{where}: {exc}")
    if isinstance(exc, RemoteException):
        return OpFailedError(f"{where}: {exc}")
    return OpFailedError(f"{where}: {type(exc).__name__}: {exc}")
