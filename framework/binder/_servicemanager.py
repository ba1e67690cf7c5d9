"""servicemanager: the name registry, and the one place that knows pid -> uid.

Run it as its own process (``python -m framework.binder.servicemanager
--runtime-dir DIR``) or in-process with :func:`serve_servicemanager`. It serves
``android.os.IServiceManager`` (``aidl/android/os/IServiceManager.aidl``) as object
0 at the well-known address ``servicemanager`` in the runtime directory.

Who is who. The process that started the servicemanager is init, uid 0. A
launcher (uid 0 or 1000) registers each child it starts with the uid it runs as,
before the child serves (:func:`framework.binder.launch_process` holds the child at
a gate until then). The servicemanager checks with the kernel that the pid is the
caller's child and alive, never lets one pid be registered twice, and holds each
process it vouches for by a pidfd: a record is believed only while that process
runs (checked at every lookup, not only when the exit is noticed), so a reused pid
inherits nothing. The pid it is asked about is the one each runtime fixed, with a
pidfd of its own, when it accepted the connection (see ``_transport``). A
process that presents the shell token (a random secret in the 0600 file
``shell.token``) is the shell, uid 2000. Everyone else is refused by every runtime.

Registry rules. Only system uids (below 10000, not the shell) may add services; a
name held by a live service can be replaced only by the same uid or by root. A
service whose process dies leaves the registry at once.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import Any

import trio

from ._interface import interface_class
from .aidl.android.os import IServiceCallback, IServiceManager
from ._runtime import (
    SERVICEMANAGER_ADDRESS,
    SHELL_TOKEN_FILE,
    Binder,
    BinderProxy,
    BinderRuntime,
    DeathRecipient,
    _current,
    open_runtime,
)
from ._status import IllegalArgumentException, IllegalStateException, SecurityException
from ._transport import MemoryNetwork, UnixNetwork

__all__ = [
    "AID_ROOT",
    "AID_SHELL",
    "AID_SYSTEM",
    "FIRST_APPLICATION_UID",
    "LAST_APPLICATION_UID",
    "defaultServiceManager",
    "serve_servicemanager",
]

log = logging.getLogger("servicemanager")

# android.os.Process's uids (system/core's AID_*): defined here once, for every layer.
AID_ROOT = 0
AID_SYSTEM = 1000
AID_SHELL = 2000
FIRST_APPLICATION_UID = 10000
LAST_APPLICATION_UID = 19999

_NAME = re.compile(r"[A-Za-z0-9_.\-/]{1,127}")


def defaultServiceManager(runtime: BinderRuntime | None = None) -> Any:  # noqa: N802 - libbinder's name
    """The servicemanager, as an ``IServiceManager`` proxy of this process's runtime."""
    runtime = runtime or _current.get()
    if runtime is None:
        raise IllegalStateException("no binder runtime in this context: open_binder_runtime first")
    return IServiceManager.asInterface(runtime.context_object())


async def servicemanager_resolver(runtime: BinderRuntime, pid: int, token: str | None) -> int | None:
    """The default :data:`Resolver`: ask the servicemanager who ``pid`` is."""
    uid = await defaultServiceManager(runtime).getUidForPid(pid, token)
    return None if uid < 0 else uid


class _Registry:
    """The servicemanager's state, kept apart from the binder plumbing."""

    def __init__(self, network: Any, nursery: trio.Nursery, init_pid: int, own_pid: int, token: str) -> None:
        self.network = network
        self.nursery = nursery
        self.token = token
        # pid -> (uid, the process held by its pidfd)
        self.uids: dict[int, tuple[int, Any]] = {init_pid: (AID_ROOT, network.process_handle(init_pid))}
        if own_pid != init_pid:
            self.uids[own_pid] = (AID_SYSTEM, network.process_handle(own_pid))
        # name -> (binder, owner uid, dump priority)
        self.services: dict[str, tuple[Any, int, int]] = {}
        self.callbacks: dict[str, list[Any]] = {}
        self.changed = trio.Event()

    def resolve(self, pid: int, token: str | None) -> int | None:
        record = self.uids.get(pid)
        if record is not None and record[1].alive():
            return record[0]
        if token is not None and hmac.compare_digest(token.encode(), self.token.encode()):
            return AID_SHELL
        return None

    def register(self, pid: int, uid: int, process: Any) -> None:
        self.uids[pid] = (uid, process)
        self.nursery.start_soon(self._forget_on_exit, pid, process)

    async def _forget_on_exit(self, pid: int, process: Any) -> None:
        try:
            await process.wait_exit()
        finally:
            if self.uids.get(pid, (None, None))[1] is process:
                del self.uids[pid]
                log.info("pid %d exited; its uid record is gone", pid)
            process.close()


class _DropOnDeath(DeathRecipient):
    __slots__ = ("registry",)

    def __init__(self, registry: _Registry) -> None:
        self.registry = registry

    def binderDied(self, who: Any) -> None:  # noqa: N802
        reg = self.registry
        for name in [n for n, (b, _, _) in reg.services.items() if b.asBinder() is who]:
            del reg.services[name]
            log.info("service %s died and left the registry", name)
        for name, cbs in reg.callbacks.items():
            cbs[:] = [cb for cb in cbs if cb.asBinder() is not who]


def _make_stub(registry: _Registry) -> Binder:
    reaper = _DropOnDeath(registry)

    def check_name(name: str) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise IllegalArgumentException(f"bad service name {name!r}")

    class ServiceManager(IServiceManager.Stub):
        async def getService(self, name: str) -> Any:  # noqa: N802
            return await self.checkService(name)

        async def checkService(self, name: str) -> Any:  # noqa: N802
            check_name(name)
            entry = registry.services.get(name)
            return None if entry is None else entry[0]

        async def addService(self, name: str, service: Any, allowIsolated: bool, dumpPriority: int) -> None:  # noqa: N802,N803
            check_name(name)
            uid = Binder.getCallingUid()
            if uid >= FIRST_APPLICATION_UID or uid == AID_SHELL:
                raise SecurityException(f"uid {uid} may not add services (adding {name})")
            if service is None:
                raise IllegalArgumentException(f"null service for {name}")
            old = registry.services.get(name)
            if old is not None and old[1] != uid and uid != AID_ROOT:
                raise SecurityException(f"{name} is registered by uid {old[1]}, not {uid}")
            binder = service.asBinder()
            if isinstance(binder, BinderProxy):
                binder.linkToDeath(reaper)
            registry.services[name] = (binder, uid, dumpPriority)
            log.info("added %s (uid %d)", name, uid)
            registry.changed.set()
            registry.changed = trio.Event()
            for cb in list(registry.callbacks.get(name, ())):
                await _notify(cb, name, binder)

        async def listServices(self, dumpPriority: int) -> list[str]:  # noqa: N802,N803
            return sorted(n for n, (_, _, prio) in registry.services.items() if prio & dumpPriority or not prio)

        async def registerForNotifications(self, name: str, callback: Any) -> None:  # noqa: N802
            check_name(name)
            if callback is None:
                raise IllegalArgumentException("null callback")
            binder = callback.asBinder()
            if isinstance(binder, BinderProxy):
                binder.linkToDeath(reaper)
            registry.callbacks.setdefault(name, []).append(callback)
            entry = registry.services.get(name)
            if entry is not None:
                await _notify(callback, name, entry[0])

        async def unregisterForNotifications(self, name: str, callback: Any) -> None:  # noqa: N802
            cbs = registry.callbacks.get(name, [])
            keep = [cb for cb in cbs if cb.asBinder() is not callback.asBinder()]
            if len(keep) == len(cbs):
                raise IllegalArgumentException(f"callback not registered for {name}")
            registry.callbacks[name] = keep

        async def waitForService(self, name: str, timeoutMs: int) -> Any:  # noqa: N802,N803
            check_name(name)
            if timeoutMs < 0:
                raise IllegalArgumentException(f"negative timeout {timeoutMs}")
            with trio.move_on_after(timeoutMs / 1000):
                while name not in registry.services:
                    await registry.changed.wait()
            entry = registry.services.get(name)
            return None if entry is None else entry[0]

        async def registerProcess(self, pid: int, uid: int) -> None:  # noqa: N802
            caller_uid, caller_pid = Binder.getCallingUid(), Binder.getCallingPid()
            if caller_uid not in (AID_ROOT, AID_SYSTEM):
                raise SecurityException(f"uid {caller_uid} may not register processes")
            if uid < 0:
                raise IllegalArgumentException(f"bad uid {uid}")
            if uid == AID_ROOT and caller_uid != AID_ROOT:
                raise SecurityException("only root may start a root process")
            old = registry.uids.get(pid)
            if old is not None and old[1].alive():
                raise IllegalStateException(f"pid {pid} is already registered as uid {old[0]}")
            # Hold the process first, then check it is the caller's child: the record
            # then belongs to the very process checked (a launcher keeps its child
            # unreaped, so the pid cannot change hands meanwhile either). A child that
            # has already exited is registered all the same (its launcher reports the
            # exit); its record is never believed, as the process is not alive.
            process = registry.network.process_handle(pid)
            parent = registry.network.parent_of(pid)
            if parent is None:
                process.close()
                raise IllegalArgumentException(f"no process {pid}")
            if parent != caller_pid:
                process.close()
                raise SecurityException(f"pid {pid} is not a child of the caller (pid {caller_pid})")
            registry.register(pid, uid, process)
            log.info("pid %d runs as uid %d (launched by pid %d)", pid, uid, caller_pid)

        async def getUidForPid(self, pid: int, shellToken: str | None) -> int:  # noqa: N802,N803
            uid = registry.resolve(pid, shellToken)
            return -1 if uid is None else uid

    return ServiceManager()


async def _notify(callback: Any, name: str, binder: Any) -> None:
    try:
        await callback.onRegistration(name, binder)
    except Exception as exc:  # a dead or broken listener must not fail addService
        log.warning("registration callback for %s failed: %s", name, exc)


def _write_token(runtime_dir: Path) -> str:
    token = secrets.token_hex(32)
    path = runtime_dir / SHELL_TOKEN_FILE
    # A fresh 0600 file of a random name (mkstemp: O_EXCL): where every uid may write the
    # directory (an isolated emulator's), no app can have put a file or a symlink there first.
    fd, tmp = tempfile.mkstemp(prefix=".token-", dir=runtime_dir)
    try:
        try:
            os.write(fd, token.encode())
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return token


async def serve_servicemanager(
    runtime_dir: str | os.PathLike[str] | None = None,
    *,
    network: Any = None,
    pid: int | None = None,
    init_pid: int | None = None,
    task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the servicemanager until cancelled.

    ``init_pid`` is the process that counts as init (uid 0): by default the
    process calling this (``python -m framework.binder.servicemanager`` passes
    its parent). With a :class:`MemoryNetwork`, ``pid`` is the servicemanager's
    fake pid (default: a new one) and init is the network's ``init_pid``.
    ``task_status.started()`` gets the :class:`BinderRuntime` once it serves.
    """
    if network is None:
        if runtime_dir is None:
            raise ValueError("serve_servicemanager needs runtime_dir or network")
        network = UnixNetwork(runtime_dir)
    if isinstance(network, MemoryNetwork):
        pid = network.spawn() if pid is None else pid
        init_pid = network.init_pid if init_pid is None else init_pid
        token = secrets.token_hex(32)
        network.shell_token = token
    else:
        pid = os.getpid() if pid is None else pid
        init_pid = os.getpid() if init_pid is None else init_pid
        token = _write_token(network.runtime_dir)
    async with trio.open_nursery() as nursery:
        registry = _Registry(network, nursery, init_pid, pid, token)
        stub = _make_stub(registry)
        own_uid = registry.uids[pid][0]

        async def resolve(_runtime: BinderRuntime, peer_pid: int, peer_token: str | None) -> int | None:
            await trio.lowlevel.checkpoint()
            return registry.resolve(peer_pid, peer_token)

        async with open_runtime(
            network=network,
            pid=pid,
            uid=own_uid,
            resolver=resolve,
            interfaces=interface_class,
            address=SERVICEMANAGER_ADDRESS,
            context_object=stub,
        ) as runtime:
            log.info("servicemanager pid %d serving (init is pid %d)", pid, init_pid)
            task_status.started(runtime)
            try:
                await trio.sleep_forever()
            finally:
                for own in {init_pid, pid}:  # the records no exit task closes
                    record = registry.uids.pop(own, None)
                    if record is not None:
                        record[1].close()
