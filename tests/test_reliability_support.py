"""What the reliability, security and fuzz tests share: a booted emulator and /proc.

Not a test module (it defines no tests); pytest imports it like the other
``test_*_support`` files. Everything here reads the stack from outside, as an
operator would: the servicemanager's registry, ``dumpsys`` through the binder, and
``/proc/PID`` for descriptors and shared-memory mappings.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from framework.emulator import BootConfig, Emulator, open_stack
from interfaces.android.npumanager import INpuManager
from interfaces.npuemu.hal import IHalControl
from interfaces.services import HAL_CONTROL
from test_server_support import manifest


@dataclass(frozen=True)
class ProcFacts:
    """What /proc says about one process: descriptors, and shared memory among them."""

    fds: int
    memfd_fds: int
    memfd_maps: int

    @classmethod
    def of(cls, pid: int) -> ProcFacts:
        fd_dir = Path(f"/proc/{pid}/fd")
        targets = []
        for name in os.listdir(fd_dir):
            try:
                targets.append(os.readlink(fd_dir / name))
            except FileNotFoundError:
                pass  # closed while we looked
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        return cls(
            fds=len(targets),
            memfd_fds=sum(t.startswith("/memfd:") for t in targets),
            memfd_maps=sum("/memfd:" in line for line in maps),
        )


def fd_targets(pid: int) -> list[str]:
    """What each of ``pid``'s descriptors points at (for a leak's error message)."""
    out = []
    for name in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        try:
            out.append(f"{name}->{os.readlink(f'/proc/{pid}/fd/{name}')}")
        except FileNotFoundError:
            pass
    return out


def long_lived(emu: Emulator, names: Any = None) -> dict[str, ProcFacts]:
    """The facts of servicemanager, HAL and system_server (or of ``names``), by name."""
    return {name: ProcFacts.of(pid) for name, pid in emu.pids.items() if names is None or name in names}


async def settled_baseline(emu: Emulator, names: Any = None, *, samples: int = 5, timeout: float = 10.0) -> dict[str, ProcFacts]:
    """:func:`long_lived` once the stack is at rest: the same facts ``samples`` times in a row.

    Connections and their death watches come up asynchronously after a service is
    registered (a watch's epoll is made when its connection's task first waits for a
    hang-up), so a baseline taken at once may miss a descriptor that the stack at
    rest holds, and every later comparison would count it as a leak.
    """
    with trio.fail_after(timeout):
        last, same = long_lived(emu, names), 1
        while same < samples:
            await trio.sleep(0.05)
            now = long_lived(emu, names)
            last, same = now, (same + 1 if now == last else 1)
    return last


def socket_addresses(emu: Emulator) -> dict[str, str]:
    """Each stack process's binder address (its socket's name in the runtime directory)."""
    found = {"servicemanager": "servicemanager"}
    for entry in os.listdir(emu.runtime_dir):
        for name, pid in emu.pids.items():
            if entry.startswith(f"binder-{pid}-"):
                found[name] = entry
    return found


async def get(emu: Emulator, name: str, iface: type) -> Any:
    from framework.binder import defaultServiceManager

    binder = await defaultServiceManager(emu.runtime).checkService(name)
    assert binder is not None, f"{name} is not registered"
    return iface.asInterface(binder)


async def npu_dump(emu: Emulator) -> dict[str, Any]:
    """``dumpsys npu --json``, as init."""
    npu = await get(emu, "npu", INpuManager)
    return json.loads(await npu.dump(["--json"]))


async def hal_dump(emu: Emulator) -> str:
    return await (await get(emu, HAL_CONTROL, IHalControl)).dump()


def hal_prepared_models(dump: str) -> int:
    line = next(line for line in dump.splitlines() if "prepared models:" in line)
    return int(line.split(":")[1])


def driver_weights_in_use(dump: str) -> list[str]:
    """Weight memory in use, per device and per emulated block, as the HAL's dump says it
    (``weights 512/4096 MiB`` for a driver device, ``weights 0 B / 4.0 GiB`` for a block)."""
    return [line.split("weights")[1].split("/")[0].split()[0] for line in dump.splitlines() if " weights " in line]


async def wait_until(predicate: Callable[[], Awaitable[bool]], timeout: float = 15.0, what: str = "") -> None:
    with trio.fail_after(timeout):
        while not await predicate():
            await trio.sleep(0.05)


def write_app(apps: Path, folder: str, package: str, main_py: str, **manifest_kw: Any) -> Path:
    d = apps / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "AndroidManifest.xml").write_text(manifest(package, **manifest_kw))
    (d / "main.py").write_text(main_py)
    return d


@asynccontextmanager
async def booted(apps_dir: Path | None = None, **config: Any) -> AsyncIterator[Emulator]:
    """A whole emulator (servicemanager, HAL, system_server as real processes) in a
    fresh 0700 directory, with ``apps_dir`` installed; this process is init.

    ``system_server_args`` and ``hal_args`` extend those processes' command lines;
    other keywords are ``BootConfig`` fields."""
    rtdir = Path(tempfile.mkdtemp(prefix="npuemu-rel-"))
    os.chmod(rtdir, 0o700)
    cfg = BootConfig(record=False, boot_timeout=40.0, **config)
    try:
        async with open_stack(processes=True, apps_dir=apps_dir, runtime_dir=rtdir, config=cfg, grace=2.0) as emu:
            yield emu
    finally:
        import shutil

        shutil.rmtree(rtdir, ignore_errors=True)
