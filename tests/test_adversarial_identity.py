"""Identity as the kernel gives it, attacked with real processes (issue 17).

As root, init runs the system processes as the system user (uid 1000) and each app as
its own Android uid, so the kernel, not the emulator's bookkeeping, keeps an app out
of the system's secrets and memory. A *hostile* app launched through the activity
manager tries what issue 17 found possible when every process was the same user:
read the shell token, list the runtime directory, read a system process's memory or
environment, ptrace it, copy its descriptors with ``pidfd_getfd``, signal it, leave its
cgroup, become root. Each attempt's errno is its report; every one must be refused.

An app's processes die with it: a grandchild in a session of its own whose parent has
exited (what a ``setsid`` double fork leaves) is gone after ``am kill``, after the app's
own death, and after shutdown. The reaper, given a pidfd of a process that has died
since, never signals the stranger that took its pid and process-group number.

The tests that need root (the uids, ``ns_last_pid``) skip, saying so, where this is not
root; the persistence of package uids holds either way. Every emulator here is stopped
and its directory removed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from framework.binder import AID_SYSTEM, FIRST_APPLICATION_UID
from framework.emulator import BootConfig, BootError, Emulator, RuntimeFiles
from framework.emulator._reaper import BOOT_ID_ENV
from framework.emulator._stack import open_stack
from framework.server._package import (
    INSTALL_FAILED_INTERNAL_ERROR,
    PackageManager,
    PackageManagerException,
    read_package_uids,
)
from interfaces.npuemu.server import IActivityManager, IPackageManager
from test_reliability_support import get, wait_until, write_app

pytestmark = [pytest.mark.multiprocess]

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="OS uids per process need init to be root")

#: What the hostile app tries. Each entry's value in its report is "ok" or the errno's name.
HOSTILE = textwrap.dedent("""\
    import ctypes, errno, json, os, subprocess, sys
    import trio

    libc = ctypes.CDLL(None, use_errno=True)

    def check(rc):
        if rc == -1:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return rc

    def attempt(fn):
        try:
            fn()
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))
        return "ok"

    def pidfd_getfd(pid):
        pidfd = os.pidfd_open(pid)  # anyone may open one; using it is what is checked
        try:
            os.close(check(libc.syscall(438, pidfd, 0, 0)))  # SYS_pidfd_getfd: its stdin
        finally:
            os.close(pidfd)

    def escape():
        # A grandchild in a session of its own, its parent gone: a setsid double fork.
        code = ("import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', "
                "'import os, time; os.setsid(); time.sleep(600)'], stdin=subprocess.DEVNULL, "
                "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")
        return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)

    async def main(context):
        rt = os.environ["NPUEMU_RUNTIME_DIR"]
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "targets.json")) as f:
            targets = json.load(f)
        report = {"uid": os.getuid(), "pid": os.getpid(), "escaped": escape()}
        report["read shell.token"] = attempt(lambda: open(os.path.join(rt, "shell.token")).read())
        report["list the runtime dir"] = attempt(lambda: os.listdir(rt))
        report["become root"] = attempt(lambda: os.setuid(0))
        if targets["cgroup_procs"]:
            report["leave its cgroup"] = attempt(lambda: open(targets["cgroup_procs"], "w").write(str(os.getpid())))
        for name, pid in targets["system"].items():
            report[f"read {name}'s memory"] = attempt(lambda: open(f"/proc/{pid}/mem", "rb").read(1))
            report[f"read {name}'s environment"] = attempt(lambda: open(f"/proc/{pid}/environ", "rb").read())
            report[f"ptrace {name}"] = attempt(lambda: check(libc.ptrace(16, pid, None, None)))  # PTRACE_ATTACH
            report[f"pidfd_getfd {name}"] = attempt(lambda: pidfd_getfd(pid))
            report[f"signal {name}"] = attempt(lambda: os.kill(pid, 0))
        out = os.path.join(rt, "apps", f"hostile-{os.getpid()}.json")
        with open(out + ".tmp", "w") as f:
            json.dump(report, f)
        os.rename(out + ".tmp", out)
        if targets.get("die"):
            os._exit(3)  # the app dies by itself: what it started must die with it
        await trio.sleep_forever()
""")


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


@asynccontextmanager
async def _world() -> AsyncIterator[Path]:
    """A folder every uid can reach (pytest's own are 0700): the apps' code and the runtime dir."""
    base = Path(tempfile.mkdtemp(prefix="npuemu-ident-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@asynccontextmanager
async def _isolated(base: Path, **config) -> AsyncIterator[Emulator]:
    cfg = BootConfig(record=False, boot_timeout=40.0, isolation="uid", **config)
    try:
        async with open_stack(processes=True, apps_dir=base / "apps", runtime_dir=base / "rt", config=cfg,
                              grace=2.0) as emu:
            yield emu
    except BootError as exc:
        if "uid isolation is impossible" in str(exc):
            pytest.skip(str(exc))
        raise


def _hostile(base: Path, folder: str, package: str) -> Path:
    app = write_app(base / "apps", folder, package, HOSTILE, importance="service")
    for path in (base / "apps", app):
        os.chmod(path, 0o755)
    return app


def _targets(app: Path, emu: Emulator, **extra) -> None:
    cgroup = emu.cgroup.path / "cgroup.procs" if emu.cgroup else None
    (app / "targets.json").write_text(json.dumps({
        "system": {name: emu.pids[name] for name in ("servicemanager", "hal", "system_server")},
        "cgroup_procs": str(cgroup) if cgroup else None, **extra}))


async def _report(emu: Emulator, pid: int) -> dict:
    path = emu.runtime_dir / "apps" / f"hostile-{pid}.json"

    async def written() -> bool:
        return path.exists()

    await wait_until(written, timeout=60)
    return json.loads(path.read_text())


async def _wait_gone(pid: int, timeout: float = 15.0) -> None:
    async def gone() -> bool:
        return not _alive(pid)

    await wait_until(gone, timeout=timeout)


@needs_root
async def test_every_process_is_its_own_os_user_and_an_app_reaches_no_secret_of_the_system():
    async with _world() as base:
        app = _hostile(base, "hostile", "com.ident.hostile")
        async with _isolated(base) as emu:
            assert emu.isolation == "uid"
            _targets(app, emu)
            am = await get(emu, "activity", IActivityManager)
            pid = await am.startApp("com.ident.hostile", 0)
            report = await _report(emu, pid)

            # The kernel's view: system processes are the system user, the app its own uid,
            # with no capability and no way to gain one.
            for name in ("servicemanager", "hal", "system_server"):
                status = _status(emu.pids[name])
                assert status["Uid"].split() == [str(AID_SYSTEM)] * 4, (name, status["Uid"])
                assert status["Gid"].split() == [str(AID_SYSTEM)] * 4, (name, status["Gid"])
                assert status["Groups"].strip() == "", (name, status["Groups"])
                # Non-dumpable: the kernel hands its /proc files to root, not to uid 1000.
                assert os.stat(f"/proc/{emu.pids[name]}/environ").st_uid == 0, name
            app_status = _status(pid)
            assert report["uid"] >= FIRST_APPLICATION_UID
            assert app_status["Uid"].split() == [str(report["uid"])] * 4
            assert [int(app_status[k], 16) for k in ("CapPrm", "CapEff", "CapInh", "CapAmb")] == [0, 0, 0, 0]
            assert app_status["NoNewPrivs"].strip() == "1"
            # system_server keeps only what launching and killing apps takes.
            assert int(_status(emu.pids["system_server"])["CapEff"], 16) == (1 << 5) | (1 << 6) | (1 << 7)

            # Every attack is refused by the kernel.
            attacks = {k: v for k, v in report.items() if k not in ("uid", "pid", "escaped")}
            assert len(attacks) == 3 + (1 if emu.cgroup else 0) + 5 * 3
            refused = {k: v for k, v in attacks.items() if v in ("EACCES", "EPERM")}
            assert refused == attacks, {k: v for k, v in attacks.items() if k not in refused}

            # The files the app could not read are the system's; the directory is shared, not open.
            root = emu.runtime_dir
            token = (root / "shell.token").stat()
            assert (token.st_uid, stat.S_IMODE(token.st_mode)) == (AID_SYSTEM, 0o600)
            assert (root.stat().st_uid, stat.S_IMODE(root.stat().st_mode)) == (0, 0o1733)
            assert "Isolation: uid" in await am.dump([])
            assert emu.process("system_server").returncode is None


@needs_root
async def test_an_app_does_not_outlive_its_kill_its_death_or_the_shutdown():
    async with _world() as base:
        apps = {name: _hostile(base, name, f"com.ident.{name}") for name in ("killed", "dying", "lingering")}
        async with _isolated(base) as emu:
            am = await get(emu, "activity", IActivityManager)
            for name, app in apps.items():
                _targets(app, emu, die=name == "dying")
            escaped = {}
            for name in apps:
                pid = await am.startApp(f"com.ident.{name}", 0)
                escaped[name] = (await _report(emu, pid))["escaped"], pid
                grandchild = escaped[name][0]
                if name != "dying":

                    async def own_session(grandchild=grandchild) -> bool:
                        return os.getsid(grandchild) == grandchild  # (its setsid is its first line)

                    await wait_until(own_session, timeout=30)
                    assert os.getsid(pid) != grandchild

            # am kill: the app and the grandchild that left its session.
            grandchild, pid = escaped["killed"]
            await am.killApp("com.ident.killed")
            await _wait_gone(pid)
            await _wait_gone(grandchild)
            # The app died by itself: what it started went with it.
            await _wait_gone(escaped["dying"][0])
            lingering = escaped["lingering"][0]
            assert _alive(lingering)
        # Shutdown.
        assert not _alive(lingering)


def _spawn_with_pid(pid: int, **kwargs) -> subprocess.Popen | None:
    """A process that gets pid ``pid`` (root: ``ns_last_pid``), or None if others keep taking it."""
    for _ in range(200):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


@needs_root
def test_the_reaper_never_signals_a_process_that_took_a_dead_ones_pid_and_group():
    """init sent the reaper a pidfd of a process of the stack, which then died and whose pid
    (and process-group number: it led its group) a stranger got. init dies: the reaper
    kills what is still the stack's, and not the stranger."""
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    env = {**os.environ, BOOT_ID_ENV: "reuse1"}
    old = subprocess.Popen(sleep, env=env, start_new_session=True)
    live = subprocess.Popen(sleep, env=env, start_new_session=True)
    ours, theirs = socket.socketpair()
    reaper = subprocess.Popen([sys.executable, str(Path(__file__).parents[1] / "framework/emulator/_reaper.py"),
                               "reuse1", str(theirs.fileno())], pass_fds=(theirs.fileno(),))
    theirs.close()
    stranger = None
    try:
        for proc in (old, live):
            pidfd = os.pidfd_open(proc.pid)
            socket.send_fds(ours, [b"p"], [pidfd])
            os.close(pidfd)
        old.kill()
        old.wait()  # reaped: its pid, and its group's number, are free
        stranger = _spawn_with_pid(old.pid, start_new_session=True)
        if stranger is None:
            pytest.skip(f"pid {old.pid} kept going to other processes on this busy machine")
        assert os.getpgid(stranger.pid) == old.pid
        ours.close()  # init died without a word
        assert reaper.wait(timeout=20) == 0
        assert live.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None
    finally:
        ours.close()
        for proc in (old, live, reaper, stranger):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


# -- package uids persist ------------------------------------------------------------------------


async def _install(emu: Emulator, app: Path) -> int:
    pm = await get(emu, "package", IPackageManager)
    return await pm.installPackage(str(app))


async def test_package_uids_are_stable_across_boots_and_wipe_data_forgets_them(tmp_path):
    apps = tmp_path / "apps"
    first = write_app(apps, "first", "com.ident.first", "async def main(context):\n    pass\n")
    second = write_app(apps, "second", "com.ident.second", "async def main(context):\n    pass\n")
    root = tmp_path / "rt"

    def boot(**config):
        return open_stack(processes=True, runtime_dir=root, grace=2.0,
                          config=BootConfig(record=False, boot_timeout=40.0, isolation="nominal", **config))

    async with boot() as emu:
        assert [await _install(emu, first), await _install(emu, second)] == [10000, 10001]
        am = await get(emu, "activity", IActivityManager)
        assert "Isolation: nominal: asked for" in await am.dump([])
    assert "W init: isolation: nominal" in RuntimeFiles(root).log.read_text()
    assert read_package_uids(RuntimeFiles(root).data / "packages.xml") == {"com.ident.first": 10000,
                                                                           "com.ident.second": 10001}
    async with boot() as emu:  # installed in the other order: each keeps its uid
        assert [await _install(emu, second), await _install(emu, first)] == [10001, 10000]
    async with boot(wipe_data=True) as emu:
        assert await _install(emu, second) == 10000


def test_a_packages_xml_that_is_not_ours_is_set_aside_and_a_failed_write_refuses_the_install(tmp_path, caplog):
    app = write_app(tmp_path / "apps", "a", "com.ident.a", "async def main(context):\n    pass\n")
    settings = tmp_path / "packages.xml"
    bad = [
        '<!DOCTYPE p [<!ENTITY e "x">]><packages/>',
        "<packages><package name='com.x' userId='10' /></packages>",  # not an app uid
        "<packages><package name='com.x' userId='10005' /><package name='com.y' userId='10005' /></packages>",
        "<packages><package name='com.x' userId='10005'>",
        "<manifest/>",
    ]
    for text in bad:
        settings.write_text(text)
        pm = PackageManager(settings=settings)
        assert pm.installPackage(app).uid == 10000, text
        assert (tmp_path / "packages.xml.bad").read_text() == text
        assert read_package_uids(settings) == {"com.ident.a": 10000}
    assert "set aside as packages.xml.bad" in caplog.text

    settings.write_text("<packages><package name='com.ident.a' userId='10042' /></packages>")
    assert PackageManager(settings=settings).installPackage(app).uid == 10042

    nowhere = tmp_path / "a-file"
    nowhere.write_text("")
    pm = PackageManager(settings=nowhere / "packages.xml")  # its folder is a file: every write fails
    with pytest.raises(PackageManagerException) as info:
        pm.installPackage(app)
    assert info.value.error_code == INSTALL_FAILED_INTERNAL_ERROR and "cannot record" in str(info.value)
    assert not pm.isPackageInstalled("com.ident.a")
