"""Starting a process under a uid: the launcher's half of the identity scheme.

The servicemanager only believes a uid for a pid that a launcher (uid 0 or 1000)
registered, and only for the launcher's own child. There is a window between
``fork`` and registration in which the child could already connect and be
refused, so :func:`launch_process` holds the child at a gate: the child runs
``python -I -S framework/binder/_gate.py FD -- argv...``, which blocks reading a pipe
until the launcher has registered its pid, then ``exec``s the real program (same
pid, so the record stays true). If registration fails, the launcher closes the
pipe unwritten and kills the child; the gate exits without running anything.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from ._runtime import RUNTIME_DIR_ENV, BinderRuntime, _current
from ._status import IllegalStateException
from ._transport import UnixNetwork

__all__ = ["launch_process"]


#: The gate script a launched child waits in (see ``_gate``).
_GATE = os.fspath(Path(__file__).with_name("_gate.py"))


async def launch_process(
    argv: Sequence[str],
    *,
    uid: int,
    env: Mapping[str, str] | None = None,
    runtime: BinderRuntime | None = None,
    **kwargs: Any,
) -> trio.Process:
    """Start ``argv`` as a child that the binder knows as ``uid``.

    The child is registered with the servicemanager before it runs a line of its
    own; its environment gets ``NPUEMU_RUNTIME_DIR`` so that it finds the
    runtime directory. Other keyword arguments go to
    :func:`trio.lowlevel.open_process` (``stdout``, ``stderr``, ``cwd``...). The
    caller owns the returned process (wait for it, or kill it).

    Raises ``SecurityException`` if this process may not launch (it is neither
    root nor system), ``IllegalArgumentException`` for a bad uid.
    """
    from ._servicemanager import defaultServiceManager

    runtime = runtime or _current.get()
    if runtime is None:
        raise IllegalStateException("launch_process needs a binder runtime: open_binder_runtime first")
    if not isinstance(runtime.network, UnixNetwork):
        raise IllegalStateException("launch_process starts real processes: the runtime must use Unix sockets")
    if not argv:
        raise ValueError("empty argv")
    child_env = dict(os.environ if env is None else env)
    child_env[RUNTIME_DIR_ENV] = os.fspath(runtime.network.runtime_dir)
    read_end, write_end = os.pipe()
    try:
        pass_fds = tuple(kwargs.pop("pass_fds", ())) + (read_end,)
        proc = await trio.lowlevel.open_process(
            # The gate runs as a bare script (-I -S: no site, no package import), so
            # holding the child costs a few ms, not an import of the whole binder.
            [sys.executable, "-I", "-S", _GATE, str(read_end), "--", *argv],
            env=child_env,
            pass_fds=pass_fds,
            **kwargs,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    try:
        await defaultServiceManager(runtime).registerProcess(proc.pid, uid)
    except BaseException:
        os.close(write_end)
        proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()
        raise
    try:
        os.write(write_end, b"go")
    finally:
        os.close(write_end)
    return proc
