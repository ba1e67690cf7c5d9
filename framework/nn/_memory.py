"""``ANeuralNetworksMemory``: app memory a driver reads and writes in place.

A :class:`Memory` is a ``SharedMemory`` region (a sealed memfd) and one read-write
mapping of it in this process. Handed to ``Execution.setInputFromMemory`` or
``setOutputFromMemory``, its descriptor crosses to the HAL beside the request, the
HAL maps the same pages, and tensors move without a single copy: the app writes an
input through :meth:`asArray`, the driver computes from it, and writes the output
where the app will read it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.binder import SharedMemory

from ._errors import BadDataError, BadStateError

__all__ = ["Memory"]


class Memory:
    """Shared memory for execution inputs and outputs (``ANeuralNetworksMemory``)."""

    __slots__ = ("_shared", "_mapping")

    def __init__(self, shared: SharedMemory) -> None:
        """Adopt ``shared`` (``ANeuralNetworksMemory_createFromFd``); ``close()`` closes it."""
        if not isinstance(shared, SharedMemory):
            raise BadDataError(f"Memory wraps a SharedMemory, not {type(shared).__name__}")
        if shared.size == 0:
            raise BadDataError("a Memory of 0 bytes holds nothing")
        self._shared = shared
        self._mapping = shared.mapReadWrite()

    @classmethod
    def create(cls, size: int, name: str = "nn-memory") -> Memory:
        """A new zero-filled region of ``size`` bytes."""
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise BadDataError(f"Memory.create: size must be a positive int, not {size!r}")
        return cls(SharedMemory.create(name, size))

    @property
    def size(self) -> int:
        return self._shared.size

    @property
    def closed(self) -> bool:
        return self._shared.closed

    @property
    def sharedMemory(self) -> SharedMemory:
        """The region itself, as it travels in a Request's pools."""
        if self._shared.closed:
            raise BadStateError("the Memory is closed")
        return self._shared

    def view(self, offset: int = 0, length: int | None = None) -> memoryview:
        """Bytes ``[offset, offset + length)`` of the mapping, writable, no copy."""
        if self._shared.closed:
            raise BadStateError("the Memory is closed")
        length = self.size - offset if length is None else length
        self.checkRange(offset, length)
        return memoryview(self._mapping)[offset : offset + length]

    def asArray(self, shape: Any, dtype: Any = np.float32, offset: int = 0) -> np.ndarray:
        """A numpy array over the memory at ``offset`` (no copy): write inputs, read outputs."""
        shape = tuple(int(d) for d in np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),)
        dtype = np.dtype(dtype)
        length = math.prod(shape) * dtype.itemsize
        return np.frombuffer(self.view(offset, length), dtype=dtype).reshape(shape)

    def checkRange(self, offset: Any, length: Any) -> None:
        for name, value in (("offset", offset), ("length", length)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise BadDataError(f"Memory: {name} must be an int >= 0, not {value!r}")
        if offset + length > self.size:
            raise BadDataError(f"Memory: offset {offset} length {length} lies outside its {self.size} bytes")

    def close(self) -> None:
        """Close the region (``ANeuralNetworksMemory_free``); views already taken stay valid."""
        self._shared.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Memory {self.size} bytes{' (closed)' if self.closed else ''}>"
