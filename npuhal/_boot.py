"""``open_private_hal``: a servicemanager and a HAL process of one's own, for tests and vts.

::

    async with npuhal.open_private_hal("./my_driver.so", clock="virtual") as hal:
        sched = await hal.scheduling()              # IScheduling proxy, we are root
        await sched.setSchedulingConfigs([...])
        hal.kill()                                  # SIGKILL the HAL: death recipients fire
        await hal.restart()                         # a fresh HAL, registered again

The calling process becomes init (uid 0): it starts ``python -m
framework.binder.servicemanager`` as its child, opens its own binder runtime, and
launches ``python -m npuhal`` as uid 1000 (system) through ``launch_process``.  It
waits until ``android.hardware.npu.IScheduling/default`` is registered; if the HAL
exits first or does not register in time, it raises :class:`PrivateHalError` with the
tail of the HAL's stderr (a driver that crashes at load shows its last words there).
On exit everything it started is terminated and everything it created removed.
Both children run in sessions of their own (as init starts the emulator's stages), so a
Ctrl-C at the caller's terminal reaches the caller only, and the caller stops them.
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from framework.binder import (
    AID_SYSTEM,
    defaultServiceManager,
    launch_process,
    open_binder_runtime,
    open_service_nursery,
)
from interfaces.android.hardware.neuralnetworks import IDevice
from interfaces.android.hardware.npu import IScheduling
from interfaces.npuemu.hal import IHalControl

from ._hal import CONTROL_INSTANCE, DEVICE_PREFIX, SCHEDULING_INSTANCE

__all__ = ["open_private_hal", "PrivateHal", "PrivateHalError"]

log = logging.getLogger("npuemu.boot")

_STDERR_TAIL_LINES = 40


class PrivateHalError(RuntimeError):
    """The private HAL did not come up: it exited, or never registered IScheduling."""

    def __init__(self, message: str, stderr_tail: str = "") -> None:
        super().__init__(message + (f"\n--- HAL stderr (tail) ---\n{stderr_tail}" if stderr_tail else ""))
        self.stderr_tail = stderr_tail


class PrivateHal:
    """What ``open_private_hal`` yields.

    Attributes: ``runtime_dir`` (Path), ``runtime`` (this process's BinderRuntime, uid
    0), ``pid`` (the HAL's current pid), ``process`` (its ``trio.Process``).
    """

    def __init__(self, runtime_dir: Path, runtime: Any, nursery: trio.Nursery, argv: list[str], env: dict, timeout: float) -> None:
        self.runtime_dir = runtime_dir
        self.runtime = runtime
        self._nursery = nursery
        self._argv = argv
        self._env = env
        self._timeout = timeout
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL_LINES)
        self.process: trio.Process | None = None

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else -1

    def stderr_tail(self) -> str:
        """The HAL's last lines on stderr (its log, unless ``--log`` was given)."""
        return "\n".join(self._stderr)

    async def _pump_stderr(self, stream: Any) -> None:
        buf = b""
        async with stream:
            async for chunk in stream:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    self._stderr.append(line.decode(errors="replace"))
        if buf:
            self._stderr.append(buf.decode(errors="replace"))

    async def _launch(self) -> None:
        self._stderr.clear()
        proc = await launch_process(
            self._argv, uid=AID_SYSTEM, env=self._env, runtime=self.runtime, stderr=subprocess.PIPE,
            start_new_session=True,  # see open_private_hal: the caller's Ctrl-C is the caller's
        )
        self.process = proc
        self._nursery.start_soon(self._pump_stderr, proc.stderr)
        sm = defaultServiceManager(self.runtime)
        with trio.move_on_after(self._timeout) as scope:
            async with trio.open_nursery() as race:

                async def died() -> None:
                    await proc.wait()
                    race.cancel_scope.cancel()

                race.start_soon(died)
                while True:
                    binder = await sm.waitForService(SCHEDULING_INSTANCE, 100)
                    if binder is not None and binder.isBinderAlive() and self._owned_by(binder, proc.pid):
                        race.cancel_scope.cancel()
                        return
        if proc.returncode is not None:
            await trio.sleep(0.05)  # the last stderr lines
            raise PrivateHalError(
                f"the HAL (pid {proc.pid}) exited with status {proc.returncode} before registering", self.stderr_tail()
            )
        if scope.cancelled_caught:
            await self._terminate()
            raise PrivateHalError(f"the HAL did not register {SCHEDULING_INSTANCE} within {self._timeout:g} s", self.stderr_tail())

    @staticmethod
    def _owned_by(binder: Any, pid: int) -> bool:
        # A runtime's address is "binder-<pid>-<random>": the registry may still hold
        # the previous HAL's service for a moment after it died.
        address = getattr(binder, "_address", "")
        return not address.startswith("binder-") or address.split("-")[1] == str(pid)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (SIGKILL by default) to the HAL; does not wait."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(sig)

    async def _terminate(self) -> None:
        proc = self.process
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        with trio.move_on_after(5) as scope:
            await proc.wait()
        if scope.cancelled_caught:
            proc.kill()
            await proc.wait()

    async def wait(self) -> int:
        """Wait for the HAL process to exit; its status."""
        return await self.process.wait()

    async def restart(self) -> None:
        """Stop the HAL (SIGTERM, then SIGKILL) and start a fresh one, registered."""
        await self._terminate()
        await self._launch()

    # ---- typed services, as this process (root) --------------------------------------

    async def _service(self, name: str, iface: type) -> Any:
        binder = await defaultServiceManager(self.runtime).checkService(name)
        if binder is None:
            raise LookupError(f"{name} is not registered")
        return iface.asInterface(binder)

    async def scheduling(self) -> Any:
        return await self._service(SCHEDULING_INSTANCE, IScheduling)

    async def control(self) -> Any:
        return await self._service(CONTROL_INSTANCE, IHalControl)

    async def device(self, name: str) -> Any:
        return await self._service(DEVICE_PREFIX + name, IDevice)

    async def device_names(self) -> list[str]:
        names = await defaultServiceManager(self.runtime).listServices(15)
        return sorted(n[len(DEVICE_PREFIX) :] for n in names if n.startswith(DEVICE_PREFIX))


@asynccontextmanager
async def open_private_hal(
    driver_path: str | os.PathLike[str] | None = None,
    *,
    runtime_dir: str | os.PathLike[str] | None = None,
    speed: float = 1.0,
    clock: str = "real",
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 20.0,
    extra_args: tuple[str, ...] = (),
) -> AsyncIterator[PrivateHal]:
    """Boot a servicemanager and a HAL on ``driver_path``; tear both down on exit.

    ``runtime_dir`` is created (0700) if it does not exist, and then removed at the
    end; an existing one is left in place.  ``extra_env`` is added to the HAL's
    environment; ``extra_args`` to its command line (e.g. ``("--log", "hal.log")``).
    Raises :class:`PrivateHalError` if the HAL does not come up within ``timeout``.
    """
    if clock not in ("real", "virtual"):
        raise ValueError(f"clock must be 'real' or 'virtual', not {clock!r}")
    if not (isinstance(speed, (int, float)) and speed > 0):
        raise ValueError(f"speed must be a positive number, not {speed!r}")
    created: Path | None = None
    if runtime_dir is None:
        created = Path(tempfile.mkdtemp(prefix="npuemu-hal-"))
        rtdir = created
    else:
        rtdir = Path(runtime_dir)
        if not rtdir.exists():
            rtdir.mkdir(mode=0o700, parents=True)
            created = rtdir
    os.chmod(rtdir, 0o700)
    argv = [sys.executable, "-m", "npuhal", "--runtime-dir", str(rtdir), "--clock", clock, "--speed", repr(float(speed))]
    if driver_path is not None:
        argv += ["--driver", os.path.abspath(os.fspath(driver_path))]
    argv += list(extra_args)
    env = dict(os.environ)
    # The child must import this very tree, wherever the caller runs from.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra_env or {})
    sm_proc = None
    try:
        sm_proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "framework.binder.servicemanager", "--runtime-dir", str(rtdir), "--log-level", "WARNING"],
            stdout=subprocess.PIPE,
            env=env,
            # Each child in a session of its own, as init starts the emulator's: a Ctrl-C
            # at the caller's terminal reaches the caller alone, which stops them in order
            # (not a HAL dying of SIGINT halfway through, taken for a crashing driver).
            start_new_session=True,
        )
        with trio.move_on_after(timeout):
            line = b""
            while not line.endswith(b"\n"):
                chunk = await sm_proc.stdout.receive_some(64)
                if not chunk:
                    break
                line += chunk
        if b"ready" not in line:
            raise PrivateHalError("the servicemanager did not start")
        # Callers catch PrivateHalError (or their own AssertionError), not an
        # ExceptionGroup around it.
        async with open_binder_runtime(rtdir) as runtime, open_service_nursery() as nursery:
            hal = PrivateHal(rtdir, runtime, nursery, argv, env, timeout)
            try:
                await hal._launch()
                yield hal
            finally:
                with trio.CancelScope(shield=True):
                    await hal._terminate()
    finally:
        with trio.CancelScope(shield=True):
            if sm_proc is not None:
                if sm_proc.returncode is None:
                    sm_proc.terminate()
                    with trio.move_on_after(5):
                        await sm_proc.wait()
                    if sm_proc.returncode is None:
                        sm_proc.kill()
                        await sm_proc.wait()
                await sm_proc.stdout.aclose()
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
