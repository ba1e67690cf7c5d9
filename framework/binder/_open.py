"""``open_binder_runtime``: a process's binder runtime, with the usual parts passed in.

``_runtime`` imports neither the servicemanager nor the interface machinery: who
vouches for a peer's uid (a :data:`~framework.binder._runtime.Resolver`) and how a
binder read from a parcel gets its typed face (an
:data:`~framework.binder._runtime.InterfaceFactory`) are given to it. This module sits
above ``_interface`` and ``_servicemanager`` and passes the usual ones: ask the
servicemanager, and ``interface_class``.
"""

from __future__ import annotations

import os
from contextlib import AbstractAsyncContextManager
from typing import Any

from ._interface import interface_class
from ._runtime import Binder, BinderRuntime, Resolver, open_runtime
from ._servicemanager import servicemanager_resolver

__all__ = ["open_binder_runtime"]


def open_binder_runtime(
    runtime_dir: str | os.PathLike[str] | None = None,
    *,
    network: Any = None,
    pid: int | None = None,
    shell: bool = False,
    uid: int | None = None,
    resolver: Resolver | None = None,
    address: str | None = None,
    context_object: Binder | None = None,
) -> AbstractAsyncContextManager[BinderRuntime]:
    """Open this process's binder runtime; it serves until the block exits.

    ``runtime_dir`` (default ``$NPUEMU_RUNTIME_DIR``) selects Unix sockets there;
    or pass a ``network`` (a :class:`MemoryNetwork` and a fake ``pid`` for tests).
    The process's uid is whatever the servicemanager vouches for; a process it
    does not know is refused (:class:`SecurityException`) unless ``shell`` is set
    and the shell token can be read, which makes it the shell, uid 2000.

    ``uid`` and ``resolver`` are for the servicemanager itself (which knows the
    uids without asking) and for tests that run without one; ``context_object``
    is served as object 0 from the first moment (the servicemanager's registry).
    """
    return open_runtime(
        runtime_dir,
        network=network,
        pid=pid,
        shell=shell,
        uid=uid,
        resolver=servicemanager_resolver if resolver is None else resolver,
        interfaces=interface_class,
        address=address,
        context_object=context_object,
    )
