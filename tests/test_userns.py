"""A boot that is not root: a user namespace with real uids (issue 17, its last point).

Run as root only to set the stage without touching the host's files: in a private mount
namespace, a made-up ``passwd``, ``group``, ``subuid`` and ``subgid`` are bind-mounted
over ``/etc``'s, granting a test user (not root) a subordinate range; that user runs
``npuemu boot --detach``. Init is then root of a user namespace of its own
(``isolation: userns``): the system processes are its uid 1000 and each app its own uid,
which outside are the user's subordinate ids. A hostile app, launched by the user, can
neither read the shell token nor read, ptrace, ``pidfd_getfd`` or signal a system
process or another app. The user's own ``npuemu`` commands, from outside the namespace,
work (they join it as its root), and its ``shutdown`` leaves no process behind, as a
foreground boot stopped by a Ctrl-C to the command does. Skips,
saying why, where this is not root or the machine lacks ``uidmap``.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from framework.binder import AID_SYSTEM, FIRST_APPLICATION_UID
from framework.emulator import SUBORDINATE_IDS_NEEDED
from test_adversarial_identity import HOSTILE, _alive, _status
from test_reliability_support import write_app

pytestmark = [pytest.mark.multiprocess]

_TOOLS = ("newuidmap", "newgidmap", "unshare", "setpriv")
_missing = [t for t in _TOOLS if shutil.which(t) is None]
pytestmark.append(pytest.mark.skipif(os.geteuid() != 0, reason="setting up a test user's /etc needs root"))
pytestmark.append(pytest.mark.skipif(bool(_missing), reason=f"{', '.join(_missing)} not installed (`make install` installs uidmap)"))
pytestmark.append(pytest.mark.skipif(not (os.path.isfile("/etc/subuid") and os.path.isfile("/etc/subgid")),
                                     reason="no /etc/subuid and /etc/subgid to bind a test's over"))

#: The test user's subordinate range (outside, inner uid N is SUB_START + N - 1).
SUB_START = 300000
NPUEMU = [sys.executable, "-c", "import sys; from framework.cli import main; sys.exit(main())"]
SLEEPER = "import trio\n\nasync def main(context):\n    await trio.sleep_forever()\n"


def _free_uid() -> int:
    uid = 4242
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def _outer(inner: int) -> int:
    return SUB_START + inner - 1


class _User:
    """A user who is not root, granted a subordinate range in a made-up /etc."""

    def __init__(self, base: Path, uid: int) -> None:
        self.base, self.uid = base, uid
        etc = base / "etc"
        etc.mkdir(mode=0o755)
        (etc / "passwd").write_text(Path("/etc/passwd").read_text() + f"npuemu-test:x:{uid}:{uid}::{base}:/bin/sh\n")
        (etc / "group").write_text(Path("/etc/group").read_text() + f"npuemu-test:x:{uid}:\n")
        for kind in ("subuid", "subgid"):
            (etc / kind).write_text(f"npuemu-test:{SUB_START}:65536\n")
        for path in etc.iterdir():
            path.chmod(0o644)
        self.env = {**os.environ, "HOME": os.fspath(base), "PYTHONDONTWRITEBYTECODE": "1",
                    "PYTHONPATH": os.fspath(Path(__file__).resolve().parents[1])}
        self.env.pop("NPUEMU_RUNTIME_DIR", None)

    def argv(self, argv: list[str], *, etc: bool = False) -> list[str]:
        """``argv`` as the user; with ``etc``, in a private mount namespace that sees the made-up /etc files."""
        as_user = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--", *argv]
        if not etc:
            return as_user
        binds = " && ".join(f"mount --bind {self.base}/etc/{f} /etc/{f}" for f in ("passwd", "group", "subuid", "subgid"))
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{binds} && exec "$@"', "sh", *as_user]

    def run(self, argv: list[str], *, etc: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(argv, etc=etc), env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def npuemu(self, *args: str, rt: Path, **kw) -> subprocess.CompletedProcess:
        done = self.run([*NPUEMU, *args, "--runtime-dir", os.fspath(rt)], **kw)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done


@contextmanager
def _stage() -> Iterator[tuple[_User, Path]]:
    base = Path(tempfile.mkdtemp(prefix="npuemu-userns-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        user = _User(base, _free_uid())
        rt = base / "rt"
        rt.mkdir(mode=0o700)
        os.chown(rt, user.uid, user.uid)
        yield user, rt
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _wait(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_user_who_is_not_root_boots_with_real_uids_in_a_user_namespace():
    with _stage() as (user, rt):
        booted = user.run([*NPUEMU, "boot", "--detach", "--boot-timeout", "40", "--runtime-dir", os.fspath(rt)], etc=True)
        state = None
        down = None
        try:
            assert booted.returncode == 0, (booted.stdout, booted.stderr)
            assert "isolation: userns" in booted.stderr
            state = json.loads((rt / "init.json").read_text())
            assert state["isolation"] == "userns"
            # Outside, init is the user; the system processes are the range's uid 1000.
            assert _status(state["init_pid"])["Uid"].split() == [str(user.uid)] * 4
            for name in ("servicemanager", "hal", "system_server"):
                status = _status(state["pids"][name])
                assert status["Uid"].split() == [str(_outer(AID_SYSTEM))] * 4, (name, status["Uid"])
                assert status["Gid"].split() == [str(_outer(AID_SYSTEM))] * 4, (name, status["Gid"])
                # Non-dumpable: its /proc files belong to the namespace's root (the user), not to uid 1000.
                assert os.stat(f"/proc/{state['pids'][name]}/environ").st_uid == user.uid, name
            token = (rt / "shell.token").stat()
            assert (token.st_uid, token.st_mode & 0o777) == (_outer(AID_SYSTEM), 0o600)

            # The user's commands, from outside, reach the stack.
            assert "Isolation: userns" in user.npuemu("dumpsys", "activity", rt=rt).stdout
            assert "nnapi-reference" in user.npuemu("devices", rt=rt).stdout

            # Two apps as the user launches them: a bystander, and a hostile one that attacks
            # the system processes and the bystander.
            apps = user.base / "apps"
            apps.mkdir(mode=0o755)
            bystander = write_app(apps, "bystander", "com.userns.bystander", SLEEPER, importance="service")
            hostile = write_app(apps, "hostile", "com.userns.hostile", HOSTILE, importance="service")
            for path in (bystander, hostile):
                os.chmod(path, 0o755)
            launched = user.npuemu("launch", os.fspath(bystander), rt=rt).stdout
            by_pid = int(re.search(r"launched com.userns.bystander pid (\d+)", launched).group(1))
            targets = {name: state["pids"][name] for name in ("servicemanager", "hal", "system_server")}
            (hostile / "targets.json").write_text(json.dumps({"system": {**targets, "another app": by_pid},
                                                              "cgroup_procs": None}))
            user.npuemu("launch", os.fspath(hostile), rt=rt)
            reports = rt / "apps"
            _wait(lambda: any(p.name.startswith("hostile-") and p.suffix == ".json" for p in _listing(reports)))
            report_path = next(p for p in _listing(reports) if p.name.startswith("hostile-") and p.suffix == ".json")
            report = json.loads(report_path.read_text())

            # Inside, the app is its own Android uid; outside, that uid of the range. No capability.
            assert report["uid"] >= FIRST_APPLICATION_UID
            assert report["uid"] < SUBORDINATE_IDS_NEEDED + 1
            app_status = _status(report["pid"])
            assert app_status["Uid"].split() == [str(_outer(report["uid"]))] * 4
            assert [int(app_status[k], 16) for k in ("CapPrm", "CapEff", "CapInh", "CapAmb")] == [0, 0, 0, 0]
            assert _status(by_pid)["Uid"].split()[0] != app_status["Uid"].split()[0]
            attacks = {k: v for k, v in report.items() if k not in ("uid", "pid", "escaped")}
            assert len(attacks) == 3 + 5 * 4
            refused = {k: v for k, v in attacks.items() if v in ("EACCES", "EPERM")}
            assert refused == attacks, {k: v for k, v in attacks.items() if k not in refused}
            started = [state["init_pid"], *state["pids"].values(), report["pid"], report["escaped"], by_pid]

            # am kill: no cgroup in a user namespace, so the app's uid is what its processes
            # share: the app and the grandchild that left its session die, the bystander lives.
            assert _alive(report["escaped"])
            user.npuemu("am", "kill", "com.userns.hostile", rt=rt)
            _wait(lambda: not _alive(report["pid"]) and not _alive(report["escaped"]), timeout=30)
            assert _alive(by_pid)
        finally:
            if state is not None:
                down = user.run([*NPUEMU, "shutdown", "--runtime-dir", os.fspath(rt)])
        assert down is not None and down.returncode == 0, (down and down.stdout, down and down.stderr)
        # Nothing is left: the stack, the apps, the app's escaped grandchild.
        _wait(lambda: not any(_alive(pid) for pid in started), timeout=30)
        assert not (rt / "init.json").exists() and not (rt / "shell.token").exists()


def test_a_foreground_boot_in_a_user_namespace_stops_on_ctrl_c_and_leaves_nothing():
    with _stage() as (user, rt):
        # Only a single-threaded process may unshare a user namespace: a command that has
        # OpenBLAS's thread forks init into it, one that has none (OPENBLAS_NUM_THREADS=1
        # inherited, as from a test that imported the benchmarks) is init itself. Either way
        # a Ctrl-C to the command reaches init.
        proc = subprocess.Popen(user.argv([*NPUEMU, "boot", "--boot-timeout", "40", "--runtime-dir", os.fspath(rt)], etc=True),
                                env=user.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        state = None
        try:
            _wait(lambda: (rt / "init.json").exists() or proc.poll() is not None)
            state = json.loads((rt / "init.json").read_text())
            assert state["isolation"] == "userns"
            assert "nnapi-reference" in user.npuemu("devices", rt=rt).stdout
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                user.run([*NPUEMU, "shutdown", "--runtime-dir", os.fspath(rt)])
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, out
        assert "isolation: userns" in out and "npuemu: shut down" in out
        _wait(lambda: not any(_alive(pid) for pid in [state["init_pid"], *state["pids"].values()]), timeout=30)


def _listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []
