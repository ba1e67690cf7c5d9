"""File descriptors that travel inside parcels: ParcelFileDescriptor and SharedMemory.

A parcel is msgpack and cannot hold a descriptor, so these two types are encoded
through the ``ParcelContext`` the runtime hands to every encode and decode: on the
way out the codec calls ``ctx.write_fd(fd)`` and writes the index it returns (the
runtime dups the descriptor and sends it with ``SCM_RIGHTS`` beside the frame); on
the way in it calls ``ctx.read_fd(index)`` and wraps the descriptor it is given,
which the new object then owns.

Ownership is the rule that keeps descriptors from leaking or being closed twice:

* ``ParcelFileDescriptor(fd)`` adopts ``fd``; ``close()`` closes it, ``detach()``
  hands it back to the caller and forgets it. ``ParcelFileDescriptor.fromFd(fd)``
  dups instead, as Android's does.
* ``SharedMemory.create(name, size)`` is Android's ``android.os.SharedMemory``: a
  memfd of a fixed size, sealed so that nobody (not even a hostile peer holding the
  same descriptor) can shrink it under another process's mapping, which would turn
  every later access into SIGBUS. ``map()`` returns an ``mmap`` that stays valid
  after the SharedMemory itself is closed.

Both close idempotently, work as context managers, and close a still-owned
descriptor when garbage collected (silently: the owner of a decoded parcel may
never have looked at the field).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import stat

__all__ = ["ParcelFileDescriptor", "SharedMemory"]

# Seals every SharedMemory carries: its size is fixed once created. F_SEAL_SEAL is not
# added, so a caller that wants a read-only region can still add F_SEAL_WRITE.
_SIZE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


def _check_fd(fd: object) -> int:
    if isinstance(fd, bool) or not isinstance(fd, int):
        raise TypeError(f"a file descriptor is an int, got {type(fd).__name__}")
    if fd < 0:
        raise ValueError(f"invalid file descriptor {fd}")
    return int(fd)


class _OwnedFd:
    """Owns one file descriptor: closed exactly once, by ``close()``, ``with`` or collection.

    A decoded parcel's owner may never touch a descriptor field; collection must not
    leak it.
    """

    __slots__ = ("_fd",)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            self._fd = -1
            try:
                os.close(fd)
            except OSError:
                pass


class ParcelFileDescriptor(_OwnedFd):
    """An owned file descriptor that can be sent in a parcel (android.os.ParcelFileDescriptor)."""

    __slots__ = ()

    def __init__(self, fd: int) -> None:
        """Adopt ``fd``: from now on this object closes it."""
        self._fd = _check_fd(fd)

    @classmethod
    def adoptFd(cls, fd: int) -> ParcelFileDescriptor:
        """Android's name for the constructor: take ownership of ``fd``."""
        return cls(fd)

    @classmethod
    def fromFd(cls, fd: int) -> ParcelFileDescriptor:
        """A new descriptor for the same open file (``dup``); the caller keeps ``fd``."""
        return cls(os.dup(_check_fd(fd)))

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def fileno(self) -> int:
        """The descriptor, still owned by this object."""
        if self._fd < 0:
            raise ValueError("ParcelFileDescriptor is closed")
        return self._fd

    getFd = fileno

    def detach(self) -> int:
        """Give the descriptor to the caller, who must now close it."""
        fd = self.fileno()
        self._fd = -1
        return fd

    detachFd = detach

    def dup(self) -> ParcelFileDescriptor:
        return ParcelFileDescriptor(os.dup(self.fileno()))

    def getStatSize(self) -> int:
        """The file's size, or -1 when it is not a regular file (as on Android)."""
        st = os.fstat(self.fileno())
        return st.st_size if stat.S_ISREG(st.st_mode) else -1

    def __repr__(self) -> str:
        return f"ParcelFileDescriptor(fd={self._fd})" if self._fd >= 0 else "ParcelFileDescriptor(closed)"


class SharedMemory(_OwnedFd):
    """A fixed-size shared memory region backed by a sealed memfd (android.os.SharedMemory).

    Create one with ``SharedMemory.create(name, size)``, fill it through ``map()``, and
    put it in a parcel: the receiver gets its own ``SharedMemory`` over the same pages,
    so tensors and weights move at memory speed instead of through msgpack.
    """

    __slots__ = ("_size", "_name")

    def __init__(self, fd: int, size: int, *, name: str = "") -> None:
        """Adopt ``fd`` as a region of ``size`` bytes.

        The descriptor must be a memfd sealed against shrinking and at least ``size``
        bytes long; anything else could be truncated under a mapping. On a ValueError
        or OSError the descriptor is closed, since the caller handed it over.
        """
        fd = _check_fd(fd)
        try:
            if isinstance(size, bool) or not isinstance(size, int):
                raise TypeError(f"SharedMemory size is an int, got {type(size).__name__}")
            if size < 0:
                raise ValueError(f"SharedMemory size must be >= 0, got {size}")
            try:
                seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            except OSError as e:
                raise ValueError(f"fd {fd} is not a memfd (F_GET_SEALS: {os.strerror(e.errno)})") from None
            if not seals & fcntl.F_SEAL_SHRINK:
                raise ValueError(f"fd {fd} is not sealed against shrinking; it could be truncated under a mapping")
            actual = os.fstat(fd).st_size
            if actual < size:
                raise ValueError(f"fd {fd} holds {actual} bytes, fewer than the {size} claimed")
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._size = int(size)
        self._name = name

    @classmethod
    def create(cls, name: str, size: int) -> SharedMemory:
        """A new zero-filled region of ``size`` bytes; ``name`` shows in /proc/<pid>/fd."""
        if not isinstance(name, str):
            raise TypeError(f"SharedMemory name is a str, got {type(name).__name__}")
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"SharedMemory size is an int, got {type(size).__name__}")
        if size < 0:
            raise ValueError(f"SharedMemory size must be >= 0, got {size}")
        fd = os.memfd_create(name or "SharedMemory", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SIZE_SEALS)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, size, name=name)

    @property
    def size(self) -> int:
        return self._size

    def getSize(self) -> int:
        return self._size

    @property
    def name(self) -> str:
        return self._name

    @property
    def closed(self) -> bool:
        return self._fd < 0

    @property
    def fd(self) -> int:
        """The descriptor, still owned by this object."""
        if self._fd < 0:
            raise ValueError("SharedMemory is closed")
        return self._fd

    def fileno(self) -> int:
        return self.fd

    def map(self, writable: bool = True) -> mmap.mmap | memoryview:
        """Map the whole region; the mapping outlives ``close()`` of this object.

        An empty region cannot be mmapped, so it maps to an empty memoryview.
        """
        fd = self.fd
        if self._size == 0:
            return memoryview(bytearray()) if writable else memoryview(b"")
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        return mmap.mmap(fd, self._size, flags=mmap.MAP_SHARED, prot=prot)

    def mapReadWrite(self) -> mmap.mmap | memoryview:
        return self.map(writable=True)

    def mapReadOnly(self) -> mmap.mmap | memoryview:
        return self.map(writable=False)

    def __repr__(self) -> str:
        state = f"fd={self._fd}" if self._fd >= 0 else "closed"
        return f"SharedMemory(name={self._name!r}, size={self._size}, {state})"
