"""Starting a process under a uid: the launcher's half of the identity scheme.

The servicemanager only believes a uid for a pid that a launcher (uid 0 or 1000)
registered, and only for the launcher's own child. There is a window between
``fork`` and registration in which the child could already connect and be
refused, so :func:`launch_process` holds the child at a gate: the child runs
``python -I -S framework/binder/_gate.py FD -- argv...``, which blocks reading a pipe
until the launcher has registered its pid, then ``exec``s the real program (same
pid, so the record stays true). If registration fails, the launcher closes the
pipe unwritten and kills the child; the gate exits without running anything.

A launcher that may (root, or system_server with ``CAP_SETUID``) gives the child its OS
identity too: ``os_uid`` starts it as that uid and gid with no supplementary groups, set
in the child between ``fork`` and ``exec`` (see ``_isolation``); ``cgroup`` puts it in a
cgroup while it is held, before it runs a line of its own, so that nothing it starts can
leave it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from ._isolation import ProcessCgroup, os_credentials
from ._runtime import LAUNCH_GATE_ENV, RUNTIME_DIR_ENV, BinderRuntime, _current
from ._servicemanager import defaultServiceManager
from ._status import IllegalStateException
from ._transport import UnixNetwork

__all__ = ["HeldProcess", "launch_process", "spawn_held"]


#: The gate script a launched child waits in (see ``_gate``).
_GATE = os.fspath(Path(__file__).with_name("_gate.py"))


class HeldProcess:
    """A started child that waits for its launcher's word (from :func:`spawn_held`).

    ``release`` registers its pid with the servicemanager under a uid and lets it go;
    ``abandon`` lets it go nowhere (it exits without serving).
    """

    def __init__(self, process: trio.Process, gate: int) -> None:
        self.process = process
        self._gate: int | None = gate

    @property
    def pid(self) -> int:
        return self.process.pid

    async def release(self, uid: int, runtime: BinderRuntime | None = None) -> trio.Process:
        if self._gate is None:
            raise IllegalStateException(f"pid {self.pid} was already released or abandoned")
        runtime = runtime or _current.get()
        if runtime is None:
            raise IllegalStateException("releasing a launched process needs a binder runtime")
        try:
            await defaultServiceManager(runtime).registerProcess(self.pid, uid)
        except BaseException:
            self.abandon()
            self.process.kill()
            with trio.CancelScope(shield=True):
                await self.process.wait()
            raise
        try:
            os.write(self._gate, b"go")
        except BrokenPipeError:
            pass  # a child held in its own runtime may die before it is released: its exit status says why
        finally:
            self.abandon()
        return self.process

    def abandon(self) -> None:
        if self._gate is not None:
            os.close(self._gate)
            self._gate = None


async def spawn_held(
    argv: Sequence[str],
    *,
    runtime_dir: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    gate_in_runtime: bool = False,
    os_uid: int | None = None,
    cgroup: ProcessCgroup | None = None,
    **kwargs: Any,
) -> HeldProcess:
    """Start ``argv`` held until :meth:`HeldProcess.release` registers it.

    By default the child waits in the gate script and runs nothing of its own before
    it is released. With ``gate_in_runtime`` (for Python programs that open a binder
    runtime first thing, as the HAL and system_server do) the program itself starts at
    once and waits inside ``open_binder_runtime``: its imports overlap with whatever
    the launcher does meanwhile (init starts the servicemanager), which is what makes
    a boot fast. No connection is made before the release either way.

    ``os_uid`` runs the child as that OS uid (and gid, no groups); ``cgroup`` holds it
    and everything it will start (see the module's doc).
    """
    if not argv:
        raise ValueError("empty argv")
    child_env = dict(os.environ if env is None else env)
    child_env[RUNTIME_DIR_ENV] = os.fspath(runtime_dir)
    read_end, write_end = os.pipe()
    try:
        pass_fds = tuple(kwargs.pop("pass_fds", ())) + (read_end,)
        if gate_in_runtime:
            child_env[LAUNCH_GATE_ENV] = str(read_end)
            command = list(argv)
        else:
            # The gate runs as a bare script (-I -S: no site, no package import), so
            # holding the child costs a few ms, not an import of the whole binder.
            command = [sys.executable, "-I", "-S", _GATE, str(read_end), "--", *argv]
        if os_uid is not None:
            kwargs.update(os_credentials(os_uid))
        proc = await trio.lowlevel.open_process(command, env=child_env, pass_fds=pass_fds, **kwargs)
        if cgroup is not None:
            try:
                cgroup.add(proc.pid)  # held: it has started nothing that could stay outside
            except BaseException:
                proc.kill()
                with trio.CancelScope(shield=True):
                    await proc.wait()
                raise
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return HeldProcess(proc, write_end)


async def launch_process(
    argv: Sequence[str],
    *,
    uid: int,
    env: Mapping[str, str] | None = None,
    runtime: BinderRuntime | None = None,
    os_uid: int | None = None,
    cgroup: ProcessCgroup | None = None,
    **kwargs: Any,
) -> trio.Process:
    """Start ``argv`` as a child that the binder knows as ``uid``.

    The child is registered with the servicemanager before it runs a line of its
    own; its environment gets ``NPUEMU_RUNTIME_DIR`` so that it finds the
    runtime directory. ``os_uid`` and ``cgroup`` are :func:`spawn_held`'s. Other keyword arguments go to
    :func:`trio.lowlevel.open_process` (``stdout``, ``stderr``, ``cwd``...). The
    caller owns the returned process (wait for it, or kill it).

    Raises ``SecurityException`` if this process may not launch (it is neither
    root nor system), ``IllegalArgumentException`` for a bad uid.
    """
    runtime = runtime or _current.get()
    if runtime is None:
        raise IllegalStateException("launch_process needs a binder runtime: open_binder_runtime first")
    if not isinstance(runtime.network, UnixNetwork):
        raise IllegalStateException("launch_process starts real processes: the runtime must use Unix sockets")
    held = await spawn_held(argv, runtime_dir=runtime.network.runtime_dir, env=env, os_uid=os_uid, cgroup=cgroup,
                            **kwargs)
    return await held.release(uid, runtime)
