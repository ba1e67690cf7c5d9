"""A runtime directory's life: what a running emulator keeps there, what a dead one leaves,
and how every command, a new boot and init's dead-man switch treat it.

In one process where the logic allows (no emulator is booted here: a dead or live
emulator is a few files, a socket, a process or two); the real boots are in
test_cli_boot.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
import trio
from click.testing import CliRunner

from framework.cli import main
from framework.emulator import BootConfig, EmulatorAlreadyRunningError, EmulatorNotRunningError, RuntimeFiles
from framework.emulator._boot import Emulator, _Child, _claim, _Log
from framework.emulator._paths import process_start
from framework.emulator._reaper import BOOT_ID_ENV, kill_boot

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def _stale_socket(path: Path) -> None:
    """A socket file nobody listens on: what a killed process leaves."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(os.fspath(path))


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture
def dead_emulator():
    """Makes a directory as a dead emulator left it; removes its stale files after the test."""
    made = []

    def make(root: Path, *, killed: bool) -> Path:
        made.append(root)
        _dead_emulator(root, killed=killed)
        return root

    yield make
    for root in made:
        RuntimeFiles(root).remove_live_files()


def _dead_emulator(root: Path, *, killed: bool) -> None:
    """``root`` as an emulator left it: shut down by the old init, or SIGKILLed (``init.json`` too)."""
    root.mkdir(mode=0o700)
    for name in ("servicemanager", "binder-4242-0badc0de", "binder-4243-0badc0de"):
        _stale_socket(root / name)
    (root / "shell.token").write_text("0" * 64)
    (root / "logcat").write_text("")
    (root / "trace.jsonl").write_text("")
    (root / "apps").mkdir()
    if killed:
        RuntimeFiles(root).write_state({"init_pid": _dead_pid(), "boot_id": "d3adb007", "pids": {}})


# -- the files ------------------------------------------------------------------------------


def test_live_files_are_what_only_a_running_emulator_has(tmp_path, dead_emulator):
    root = dead_emulator(tmp_path / "rt", killed=True)
    files = RuntimeFiles(root)
    assert [p.name for p in files.live_files()] == [
        "binder-4242-0badc0de", "binder-4243-0badc0de", "init.json", "servicemanager", "shell.token"]
    assert files.served_sockets() == []
    assert files.read_state() is None
    assert RuntimeFiles(tmp_path / "never").live_files() == []


def test_init_state_names_one_process_across_pid_reuse(tmp_path):
    """init's pid alone is not enough: pids are reused within minutes on a busy machine."""
    files = RuntimeFiles(tmp_path)
    me = {"init_pid": os.getpid(), "init_start": process_start(os.getpid()), "pids": {}}
    files.write_state(me)
    assert files.read_state() == me
    files.write_state({**me, "init_start": me["init_start"] - 1})  # a dead init whose pid went to this process
    assert files.read_state() is None
    with pytest.raises(EmulatorNotRunningError, match=rf"^no emulator is running in {tmp_path} \(start one"):
        files.running_state()
    files.state.write_text(json.dumps({"init_pid": "x"}))
    assert files.read_state() is None


# -- a boot takes the directory ---------------------------------------------------------------


@pytest.mark.parametrize("killed", [False, True], ids=["shut-down-by-old-init", "sigkilled"])
def test_a_boot_removes_what_a_dead_emulator_left_and_keeps_the_records(tmp_path, killed):
    root = tmp_path / "rt"
    _dead_emulator(root, killed=killed)
    removed = _claim(RuntimeFiles(root))
    assert [p.name for p in removed] == [p for p in ["binder-4242-0badc0de", "binder-4243-0badc0de",
                                                     "init.json" if killed else "", "servicemanager",
                                                     "shell.token"] if p]
    assert sorted(p.name for p in root.iterdir()) == ["apps", "logcat", "trace.jsonl"]


def test_a_boot_refuses_a_directory_where_an_init_lives(tmp_path):
    files = RuntimeFiles(tmp_path)
    files.write_state({"init_pid": os.getpid(), "init_start": process_start(os.getpid()), "pids": {}})
    with pytest.raises(EmulatorAlreadyRunningError, match=rf"an emulator already runs in {tmp_path} \(init pid "
                                                          rf"{os.getpid()}\); stop it with `npuemu shutdown`"):
        _claim(files)
    assert files.state.exists()


def test_a_boot_refuses_a_directory_where_a_dead_inits_servicemanager_still_serves(tmp_path, dead_emulator):
    """init died and so did its reaper: its servicemanager still answers. Not stale: refused."""
    root = dead_emulator(tmp_path / "rt", killed=True)
    (root / "servicemanager").unlink()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(os.fspath(root / "servicemanager"))
        live.listen(1)
        with pytest.raises(EmulatorAlreadyRunningError, match=r"processes of a dead emulator still serve in .*"
                                                              r"\(servicemanager\); `npuemu shutdown --runtime-dir "):
            _claim(RuntimeFiles(root))
    assert (root / "shell.token").exists()  # nothing touched


# -- every command, when no emulator runs ----------------------------------------------------

#: Each command that talks to a running emulator, with arguments that are otherwise valid.
NEEDS_AN_EMULATOR = {
    "am kill": ["com.example.npuemu.camera"],
    "am launch": ["com.example.npuemu.camera"],
    "am set-importance": ["com.example.npuemu.camera", "cached"],
    "cmd": ["npu", "info"],
    "devices": [],
    "dumpsys": [],
    "launch": ["camera"],
    "nn plan": [],
    "nn run": ["iris_landmark"],
    "run-test-inference": ["--job-priority", "100"],
    "service list": [],
    "shutdown": [],
    "thermal reset": [],
    "thermal set": ["severe"],
    "thermal status": [],
}
#: Commands that do not: they boot their own, or read what a stopped one recorded.
NEEDS_NONE = {"aidl", "bench scheduling", "boot", "demo", "lab check-policy", "logcat", "plot", "trace", "version",
              "vts"}


def _leaf_commands(group: click.Group, prefix: str = "") -> set[str]:
    names = set()
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            names |= _leaf_commands(command, f"{prefix}{name} ")
        else:
            names.add(prefix + name)
    return names


def test_every_command_is_known_to_need_an_emulator_or_not():
    assert _leaf_commands(main) == set(NEEDS_AN_EMULATOR) | NEEDS_NONE


@pytest.mark.parametrize("state", ["never-booted", "shut-down-by-old-init", "sigkilled"])
def test_every_command_says_the_same_line_when_no_emulator_runs(tmp_path, dead_emulator, state):
    root = tmp_path / "rt"
    if state != "never-booted":
        dead_emulator(root, killed=state == "sigkilled")
    line = f"npuemu: error: no emulator is running in {root} (start one with `npuemu boot`)\n"
    for command, args in NEEDS_AN_EMULATOR.items():
        result = CliRunner().invoke(main, ["--runtime-dir", str(root), *command.split(), *args])
        assert (result.exit_code, result.stderr) == (3, line), (command, result.output)


# -- the dead-man switch and init's shutdown --------------------------------------------------


def _spawn(boot_id: str | None, **kwargs) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != BOOT_ID_ENV}
    if boot_id is not None:
        env[BOOT_ID_ENV] = boot_id
    return subprocess.Popen(SLEEP, env=env, **kwargs)


def _reap(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_kill_boot_kills_that_boots_processes_and_nobody_elses():
    # A group leader with a follower in its group (system_server and an app it launched).
    leader = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, time; print(subprocess.Popen({SLEEP!r}).pid, flush=True); time.sleep(60)"],
        env={**os.environ, BOOT_ID_ENV: "b1"}, start_new_session=True, stdout=subprocess.PIPE, text=True)
    alone = _spawn("b1")  # in this test's own group: killed alone, the group spared
    strangers = [_spawn("b2", start_new_session=True), _spawn(None, start_new_session=True)]
    try:
        follower = int(leader.stdout.readline())
        time.sleep(0.3)  # each has exec'd: its environment is its own
        assert sorted(kill_boot("b1")) == sorted([leader.pid, follower, alone.pid])
        assert [p.wait(timeout=10) for p in (leader, alone)] == [-9, -9]
        assert process_start(follower) is None  # (re-parented to this test's process, a zombie)
        assert all(p.poll() is None for p in strangers)
        assert kill_boot("b1") == []
    finally:
        _reap(leader, alone, *strangers)
        leader.stdout.close()


@pytest.mark.parametrize("stand_down", [True, False])
def test_the_reaper_kills_the_boot_unless_init_stands_it_down(stand_down):
    stack = _spawn("b3", start_new_session=True)
    read_end, write_end = os.pipe()
    reaper = subprocess.Popen([sys.executable, str(Path(kill_boot.__code__.co_filename)), "b3", str(read_end)],
                              pass_fds=(read_end,))
    os.close(read_end)
    try:
        time.sleep(0.3)
        if stand_down:
            os.write(write_end, b"q\n")
        os.close(write_end)  # init exits (or dies)
        assert reaper.wait(timeout=10) == 0
        assert (stack.poll() is None) == stand_down
    finally:
        _reap(stack, reaper)


async def test_shutdown_goes_on_past_a_stage_it_cannot_stop(tmp_path, monkeypatch):
    """The issue's log: `stopping system_server`, then `init exiting`, and the HAL and the
    servicemanager ran on. Now each stage is stopped whatever happened to the one before,
    and what still carries the boot's id is killed."""
    log = _Log(tmp_path / "logcat")
    emu = Emulator(tmp_path, BootConfig(record=False), log)
    env = {**os.environ, BOOT_ID_ENV: emu.boot_id}
    for name in ("servicemanager", "hal", "system_server"):
        emu._children[name] = _Child(name, await trio.lowlevel.open_process(SLEEP, env=env, start_new_session=True))
    real_stop = Emulator._stop

    async def stop(self, child, grace):
        if child.name == "system_server":
            raise OSError("no such thing")
        await real_stop(self, child, grace)

    monkeypatch.setattr(Emulator, "_stop", stop)
    assert await emu._stop_all(grace=1.0)
    log.close()
    assert all(c.process.returncode is not None for c in emu._children.values())
    text = (tmp_path / "logcat").read_text()
    ss = emu._children["system_server"].process.pid
    assert f"stopping system_server (pid {ss}) failed: OSError('no such thing')" in text
    assert "hal (pid" in text and "servicemanager (pid" in text
    assert f"killed pid {ss}, left running by the stack" in text
