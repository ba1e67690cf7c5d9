"""No app can stall, flood or fill the system: the npu service's and init's bounds, tried as a hostile app would.

Each bound is a named constant the README's "Security guarantees" section lists. The
logic is tested in one process under the autojump MockClock (the stack of
``test_server_support``); what crosses processes (a stopped app's socket filling, the
servicemanager killed, the disk full) is tried with real processes.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner

from framework.binder import (
    SERVICEMANAGER_ADDRESS,
    IllegalArgumentException,
    IllegalStateException,
    defaultServiceManager,
)
from framework.cli import main as cli_main
from framework.emulator import (
    LOGCAT_BUFFER_BYTES,
    LOGCAT_LINE_MAX,
    BootConfig,
    LogRing,
    follow_log,
    format_line,
    log_parts,
    open_stack,
    read_log,
    serve_until_signalled,
    set_thermal_severity,
)
from framework.npumanager import NpuManager
from framework.server import (
    CALLBACK_DEADLINE_S,
    DUMP_PAGE_ROWS,
    DUMP_REPLY_LIMIT,
    ANR_KILL_BELOW_IMPORTANCE,
    MAX_OPEN_REQUESTS_PER_APP,
    THERMAL_STATUS_SEVERE,
    fit_reply,
)
from interfaces.android.npumanager import IModelLoadCallback, INpuManager, ModelLoadRequestParcelable
from interfaces.npuemu.server import IActivityManager
from test_server_support import Recorder, ask, booted, manifest, npu_of, request, world  # noqa: F401

CAN = NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW
WAIT = NpuManager.NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD
NOT = NpuManager.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED
BIG = NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G


def _cli(*args: str):
    return CliRunner().invoke(cli_main, list(args), catch_exceptions=False)


def _apps_dir(tmp_path: Path, package: str, main: str) -> Path:
    """An apps folder holding one app, ``package``, whose ``main.py`` is ``main``."""
    apps = tmp_path / "apps"
    folder = apps / package.rsplit(".", 1)[-1]
    folder.mkdir(parents=True)
    (folder / "AndroidManifest.xml").write_text(manifest(package))
    (folder / "main.py").write_text(main)
    return apps


class _Wedged:
    """An app's callback whose process takes nothing: every call hangs (a stopped app)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        async def hang(*args):
            self.calls.append(name)
            await trio.sleep_forever()

        return hang


async def test_an_app_that_takes_no_callback_delays_nobody_and_is_killed_in_the_background(autojump_clock, world):
    # An unload deadline far away: only the callback deadline can end the silent app's request.
    system = await booted(world, unload_timeout=600.0)
    svc = system.npu
    bg, fg, other = [await world.launch(p) for p in ("com.test.bg", "com.test.fg", "com.test.a")]
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, {"maxBudget": 4})
    silent_rec = Recorder()
    await ask(world, bg, request(1, BIG, NpuManager.NPU_MODEL_PRIORITY_BACKGROUND), silent_rec)
    assert silent_rec.events == [("can_load", 1, CAN), ("loaded", 1)]
    bg_uid = bg.context.getUid()
    # From now on bg's process takes nothing (stopped, or not reading its socket).
    wedged = svc._callbacks[(bg_uid, 1)] = _Wedged()

    t0 = trio.current_time()
    fg_rec, other_rec = Recorder(), Recorder()
    await npu_of(fg).requestCanLoadModel(request(7, BIG), fg_rec, fg.context.getMainExecutor())
    await npu_of(other).requestCanLoadModel(request(3), other_rec, other.context.getMainExecutor())
    await world.settle()
    # bg is asked to unload (its call hangs); fg and a bystander are answered at once.
    assert wedged.calls == ["onRequestUnloadModel"]
    assert fg_rec.events == [("can_load", 7, WAIT)]
    assert other_rec.events == [("can_load", 3, NOT)]  # behind fg's reservation (rule 2), told at once
    assert trio.current_time() - t0 < 0.1

    # At the deadline bg is treated as dead: its request goes, the HAL frees its models,
    # and fg gets the budget it waited for.
    with trio.fail_after(CALLBACK_DEADLINE_S + 1):
        while fg_rec.statuses(7)[-1:] != [("loaded", 7)]:
            await fg_rec.changed.wait()
    assert CALLBACK_DEADLINE_S <= trio.current_time() - t0 < CALLBACK_DEADLINE_S + 0.5
    assert fg_rec.events == [("can_load", 7, WAIT), ("can_load", 7, CAN), ("loaded", 7)]
    dump = svc.dump_data()
    assert [r for r in dump["requests"] if r["uid"] == bg_uid] == []
    assert dump["counters"]["callbacks_late"] == 1
    assert bg_uid in world.hal.revoked
    # bg is cached: the activity manager kills it as Android kills a background ANR, as
    # `am kill` does, and says so in dumpsys activity.
    with trio.fail_after(5):
        while system.activity.state.is_running(bg_uid):
            await trio.sleep(0.05)
    activity = json.loads(system.activity.dump_text(["--json"]))
    assert [(a["package"], a["killed"]) for a in activity["not_responding"]] == [("com.test.bg", True)]
    assert "killed (bg anr)" in system.activity.dump_text([])
    assert system.activity.state.is_running(fg.context.getUid())


async def test_a_foreground_app_that_takes_no_callback_is_reported_not_killed(autojump_clock, world):
    system = await booted(world, unload_timeout=600.0)
    fg = await world.launch("com.test.fg")
    assert system.activity.state.getUidImportance(fg.context.getUid()) <= ANR_KILL_BELOW_IMPORTANCE
    rec = Recorder()
    await ask(world, fg, request(1, priority=NpuManager.NPU_MODEL_PRIORITY_BACKGROUND), rec)
    assert rec.events == [("can_load", 1, CAN), ("loaded", 1)]
    system.npu._callbacks[(fg.context.getUid(), 1)] = _Wedged()
    system.npu.thermal_changed(THERMAL_STATUS_SEVERE)  # asks background work to unload: the call hangs
    with trio.fail_after(CALLBACK_DEADLINE_S + 5):
        while not json.loads(system.activity.dump_text(["--json"]))["not_responding"]:
            await trio.sleep(0.1)
    activity = json.loads(system.activity.dump_text(["--json"]))
    assert [(a["package"], a["killed"]) for a in activity["not_responding"]] == [("com.test.fg", False)]
    assert system.activity.state.is_running(fg.context.getUid())


async def test_answers_to_one_app_keep_their_order_while_another_is_wedged(autojump_clock, world):
    system = await booted(world, unload_timeout=600.0)
    svc = system.npu
    a, b = await world.launch("com.test.a"), await world.launch("com.test.b")
    ra = Recorder()
    await ask(world, a, request(1), ra)
    svc._callbacks[(a.context.getUid(), 1)] = _Wedged()
    await npu_of(b).setPolicy(NpuManager.NPU_MODEL_POLICY_TURN_TAKING, None)
    rb = Recorder()
    await npu_of(b).requestCanLoadModel(request(1), rb, b.context.getMainExecutor())
    await world.settle()
    assert rb.events == [("can_load", 1, NOT)]
    # a's turn ends: it is asked to unload (hangs); b's answers then come in the order decided.
    await world.hal.work(a.context.getUid())
    with trio.fail_after(CALLBACK_DEADLINE_S + 1):
        while len(rb.events) < 3:
            await rb.changed.wait()
    assert rb.events == [("can_load", 1, NOT),
                         ("can_load", 1, CAN), ("loaded", 1)]


# -- open requests: a cap per app, filing that stays fast, a dump that pages ------------------


async def test_an_app_past_its_cap_of_open_requests_gets_a_clear_error(autojump_clock, world):
    system = await booted(world)
    app, other = await world.launch("com.test.bg"), await world.launch("com.test.fg")
    npu = npu_of(app)
    recorders = [Recorder() for _ in range(MAX_OPEN_REQUESTS_PER_APP)]
    for i, rec in enumerate(recorders):
        await npu.requestCanLoadModel(request(i), rec, app.context.getMainExecutor())
    with pytest.raises(IllegalStateException, match="MAX_OPEN_REQUESTS_PER_APP"):
        await npu.requestCanLoadModel(request(MAX_OPEN_REQUESTS_PER_APP), Recorder(), app.context.getMainExecutor())
    await world.settle()
    assert len(system.npu.arbiter.request_ids(app.context.getUid())) == MAX_OPEN_REQUESTS_PER_APP
    # Another app is not affected; and once one request ends, the app may file again.
    rec = Recorder()
    await ask(world, other, request(1), rec)
    assert rec.events[0] == ("can_load", 1, CAN)
    await recorders[0].listener.notifyModelUnloaded(request(0))
    await world.settle()
    await npu.requestCanLoadModel(request(MAX_OPEN_REQUESTS_PER_APP), Recorder(), app.context.getMainExecutor())


async def test_dumpsys_npu_pages_what_apps_have_on_file(autojump_clock, world):
    # 20,000 requests once made the dump's reply pass the binder's 1 MiB: now the dump
    # lists DUMP_PAGE_ROWS of them a page, and counts them all per uid.
    system = await booted(world)
    arbiter = system.npu.arbiter
    apps, total = 3, 3 * MAX_OPEN_REQUESTS_PER_APP
    for n in range(total):
        arbiter.request_can_load(10_100 + n % apps, n, 0, 0, trio.current_time())
    pages = -(-total // DUMP_PAGE_ROWS)
    async with await world.shell() as shell:
        npu = INpuManager.Proxy(await defaultServiceManager(shell).checkService("npu"))
        first = json.loads(await npu.dump(["--json"]))
        last = json.loads(await npu.dump(["--json", "--page", str(pages - 1)]))
        text = await npu.dump([])
        with pytest.raises(IllegalArgumentException, match="--page"):
            await npu.dump(["--page", "x"])
    assert first["page"] == {"index": 0, "pages": pages, "rows": DUMP_PAGE_ROWS, "first_row": 0,
                             "requests_total": total}
    assert len(first["requests"]) == DUMP_PAGE_ROWS and [r["id"] for r in first["requests"]][0] == 0
    assert [r["id"] for r in last["requests"]][-1] == total - 1
    assert sum(v["approved"] for v in first["requests_per_uid"].values()) == total
    assert len(text.encode()) <= DUMP_REPLY_LIMIT
    assert (f"Requests: {total}  (page 0 of 0..{pages - 1}: rows 1-{DUMP_PAGE_ROWS};"
            " dumpsys npu --page N for another)") in text


def test_a_dump_longer_than_a_binder_reply_is_cut_with_a_note():
    text = "".join(f"line {i:07d} {'x' * 90}\n" for i in range(20_000))  # about 2 MiB
    cut = fit_reply(text, "dumpsys test")
    assert len(cut.encode()) <= DUMP_REPLY_LIMIT
    assert cut.startswith("line 0000000 ")
    assert cut.endswith(f"... dumpsys test: the dump was cut at {DUMP_REPLY_LIMIT} bytes of {len(text.encode())}"
                        " (binder's reply limit)\n")
    assert fit_reply("short\n", "x") == "short\n"


# -- with real processes: a stopped app's socket fills; a bystander is answered at once -------

#: How soon a bystander is answered while a stopped app's answers pile up: well inside
#: CALLBACK_DEADLINE_S, so it did not wait for the stopped app's lane to give up.
BYSTANDER_BOUND_S = CALLBACK_DEADLINE_S / 2

SILENT_MAIN = """\
import os, signal
import trio
from framework.app import Context
from framework.npumanager import ModelLoadRequest, ModelLoadRequestCallback, NpuManager

N = {n}
loaded = []
done = trio.Event()

class Callback(ModelLoadRequestCallback):
    async def onCanLoadModel(self, request, status, listener):
        if status == NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW:
            await listener.notifyModelLoaded(request)
            loaded.append(request.id)
            if len(loaded) == N:
                done.set()

async def main(context):
    npu = context.getSystemService(Context.NPU_SERVICE)
    callback = Callback()
    for i in range(N):
        request = ModelLoadRequest.Builder(i).setPriority(NpuManager.NPU_MODEL_PRIORITY_BACKGROUND).build()
        await npu.requestCanLoadModel(request, callback, context.getMainExecutor())
    await done.wait()
    print("all", N, "loaded: stopping myself", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # from now on this process reads nothing
    await trio.sleep_forever()
"""


def _process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _frames_to_fill_a_socket() -> int:
    """How many small oneway frames fill a Unix socket nobody reads, with room to spare.

    A small message costs about 770 bytes of the sender's buffer (its skb), so the
    default 208 KiB takes about 280 of them.
    """
    with open("/proc/sys/net/core/wmem_default") as f:
        return int(f.read()) // 600 + 50


@pytest.mark.multiprocess
async def test_a_stopped_app_whose_socket_fills_delays_no_bystander_and_is_killed(tmp_path):
    n = _frames_to_fill_a_socket()
    if n > MAX_OPEN_REQUESTS_PER_APP:
        pytest.skip(f"this machine's socket buffers take {n} frames, more than one app may have requests")
    apps = _apps_dir(tmp_path, "com.test.silent", SILENT_MAIN.format(n=n))
    config = BootConfig(clock="virtual", record=False, boot_timeout=30, system_server_args=("--unload-timeout", "600000"))
    async with open_stack(processes=True, apps_dir=apps, config=config) as emu:
        sm = defaultServiceManager(emu.runtime)
        npu = INpuManager.Proxy(await sm.checkService("npu"))
        am = IActivityManager.Proxy(await sm.checkService("activity"))
        pid = await am.startApp("com.test.silent", 400)  # cached: in the background
        try:
            async def dump():
                return json.loads(await npu.dump(["--json"]))

            with trio.fail_after(120):
                while (await dump())["budget"]["in_use"] < n:  # status quo: each request weighs 1
                    await trio.sleep(0.2)
                while _process_state(pid) != "T":  # stopped
                    await trio.sleep(0.05)
            # Heat: every BACKGROUND model must go. n unload requests pile up for the
            # stopped app; past about 280 its socket is full and the next one cannot leave.
            await set_thermal_severity(emu.runtime, THERMAL_STATUS_SEVERE)
            with trio.fail_after(30):
                while (await dump())["thermal"]["severity"] != THERMAL_STATUS_SEVERE:
                    await trio.sleep(0.05)

            answered = trio.Event()
            statuses = []

            class Bystander(IModelLoadCallback.Stub):
                async def onCanLoadModel(self, status):  # noqa: N802
                    statuses.append(status)
                    answered.set()

                async def onRequestUnloadModel(self, reason):  # noqa: N802
                    pass

                async def onModelLoadRequestComplete(self, status):  # noqa: N802
                    pass

            t0 = trio.current_time()
            await npu.canLoadModel(ModelLoadRequestParcelable(id=1, size=0, priority=0), Bystander())
            with trio.fail_after(60):
                await answered.wait()
            waited = trio.current_time() - t0
            assert statuses == [CAN]
            assert waited < BYSTANDER_BOUND_S, f"the bystander waited {waited:.2f} s"

            # The stopped app's lane missed its deadline: it is treated as dead, and the
            # activity manager kills it (a background ANR), its cgroup as `am kill` does.
            with trio.fail_after(CALLBACK_DEADLINE_S + 30):
                while (d := await dump())["counters"]["callbacks_late"] < 1:
                    await trio.sleep(0.2)
            assert [u["package"] for u in d["requests_per_uid"].values()] == ["root"]  # the bystander's alone
            with trio.fail_after(30):
                while os.path.exists(f"/proc/{pid}"):
                    await trio.sleep(0.1)
            activity = json.loads(await am.dump(["--json"]))
            assert [(a["pid"], a["killed"]) for a in activity["not_responding"]] == [(pid, True)]
            assert pid not in [p["pid"] for p in activity["processes"]]
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- the servicemanager is supervised -------------------------------------------------------

#: How long the stack may be out after the servicemanager is killed: init restarts it,
#: then the HAL and system_server (as init's ``onrestart``), each within a boot stage's
#: time; generous, for a loaded 2-core machine.
SERVICEMANAGER_OUTAGE_BOUND_S = 60.0

IDLE_MAIN = """\
import trio

async def main(context):
    await trio.sleep_forever()
"""


def _take_if_free(path: str) -> socket.socket | None:
    """What a process does to take a socket name nobody serves: connect, and if refused
    (a dead server's file), remove it and bind its own. Its socket if it took the name."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
            return None  # somebody serves it
        except (ConnectionRefusedError, FileNotFoundError):
            pass
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind(path)
    squatter.listen(1)
    return squatter


@pytest.mark.multiprocess
async def test_the_servicemanager_killed_is_restarted_with_what_depends_on_it(tmp_path):
    apps = _apps_dir(tmp_path, "com.test.idle", IDLE_MAIN)
    config = BootConfig(clock="virtual", record=False, boot_timeout=30)
    async with open_stack(processes=True, apps_dir=apps, config=config) as emu:
        rtdir = str(emu.runtime_dir)
        before = dict(emu.pids)
        result = await trio.to_thread.run_sync(_cli, "--runtime-dir", rtdir, "am", "launch", "com.test.idle")
        assert result.exit_code == 0, result.output
        old_app = int(result.output.split("as pid")[1].split()[0])

        name = os.path.join(rtdir, SERVICEMANAGER_ADDRESS)
        socket_before = os.stat(name).st_ino
        t0 = trio.current_time()
        emu.kill("servicemanager")
        # A short outage: the shell's commands fail with one clear line (or wait for the
        # new servicemanager), then work again. Init holds the servicemanager's socket
        # throughout: its name is never free for another process of the same user to
        # take (a nominal boot's apps are that user), not between the old one's death
        # and the new one's start either.
        with trio.fail_after(SERVICEMANAGER_OUTAGE_BOUND_S):
            while True:
                squatter = _take_if_free(name)
                if squatter is not None:
                    squatter.close()
                    raise AssertionError("another process took the servicemanager's name")
                listed = await trio.to_thread.run_sync(_cli, "--runtime-dir", rtdir, "service", "list")
                if listed.exit_code == 0 and "npu" in listed.output.split() and "activity" in listed.output.split():
                    break
                assert "Traceback" not in listed.output
                await trio.sleep(0.2)
        outage = trio.current_time() - t0
        assert os.stat(name).st_ino == socket_before  # the same socket, served by the new servicemanager
        after = emu.pids
        assert all(after[name] != before[name] for name in ("servicemanager", "hal", "system_server")), (before, after)
        dump = await trio.to_thread.run_sync(_cli, "--runtime-dir", rtdir, "dumpsys", "npu", "--json")
        assert dump.exit_code == 0, dump.output
        assert json.loads(dump.output)["requests"] == []
        # The apps went with system_server; a new launch works, and the app comes up.
        with pytest.raises(ProcessLookupError):
            os.kill(old_app, 0)
        launched = await trio.to_thread.run_sync(_cli, "--runtime-dir", rtdir, "am", "launch", "com.test.idle")
        assert launched.exit_code == 0, launched.output
        log = emu.files.log.read_text()
        assert "restarting servicemanager (restart 1 of 4)" in log
        assert "and the stack are back" in log
        print(f"outage {outage:.1f} s")


# -- logs that cannot fill a disk ---------------------------------------------------------


def _on_disk(path) -> int:
    return sum(p.stat().st_size for p in log_parts(path) if p.exists())


def test_the_log_is_a_ring_of_bounded_size_that_keeps_the_newest_lines(tmp_path):
    path = tmp_path / "logcat"
    size = 4 * LOGCAT_LINE_MAX
    ring = LogRing(path, size)
    try:
        for i in range(5_000):
            assert ring.write(format_line(42, 42, "I", "chatty", f"line {i:05d} " + "x" * 80))
            assert _on_disk(path) <= size
        assert ring.write("y" * (3 * LOGCAT_LINE_MAX))  # one huge line is cut, never more than a line
    finally:
        ring.close()
    assert _on_disk(path) <= size
    lines = [line.message for line in read_log(tmp_path) if line.message.startswith("line ")]
    numbers = [int(m.split()[1]) for m in lines]
    assert numbers == list(range(numbers[0], 5_000))  # the newest, in order, none missing
    assert len(numbers) * 100 >= size // 2 - LOGCAT_LINE_MAX  # at least half the ring is kept
    with pytest.raises(ValueError):
        LogRing(tmp_path / "tiny", LOGCAT_LINE_MAX)


@contextlib.contextmanager
def _tiny_tmpfs(size: str):
    """A tmpfs of ``size`` (root only): a disk that really fills. Removed on exit."""
    if os.geteuid() != 0:
        pytest.skip("a tmpfs needs root (CI runs as root); test_a_full_disk_injected covers this")
    where = tempfile.mkdtemp(prefix="npuemu-enospc-")
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", where],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        try:
            yield Path(where)
        finally:
            subprocess.run(["umount", "-l", where], check=True)
    finally:
        os.rmdir(where)


def _fill(directory: Path) -> Path:
    """Write a file until the disk says ENOSPC; its path."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_a_full_disk_drops_lines_and_says_so_once_there_is_room(tmp_path):
    with _tiny_tmpfs("64k") as disk:
        ring = LogRing(disk / "logcat", 32 * 1024)
        try:
            assert ring.write(format_line(1, 1, "I", "t", "before"))
            filler = _fill(disk)
            kept = sum(ring.write(format_line(1, 1, "I", "t", f"full {i}")) for i in range(100))
            assert ring.dropped == 100 - kept and ring.dropped > 0
            filler.unlink()
            assert ring.write(format_line(1, 1, "I", "t", "after"))
        finally:
            ring.close()
        messages = [line.message for line in read_log(disk)]
    assert messages[0] == "before" and messages[-1] == "after"
    assert f"{100 - kept} line(s) dropped: No space left on device" in messages[-2]


def test_a_full_disk_injected(tmp_path, monkeypatch):
    """The same without root: the write itself says ENOSPC."""
    ring = LogRing(tmp_path / "logcat")
    real_write = os.write
    full = True

    def write(fd, data):
        if full and fd == ring._fd:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    try:
        assert not ring.write("lost 1") and not ring.write("lost 2")
        full = False
        assert ring.write(format_line(1, 1, "I", "t", "after"))
    finally:
        ring.close()
    messages = [line.message for line in read_log(tmp_path)]
    assert messages == ["2 line(s) dropped: No space left on device", "after"]


CHATTY_MAIN = """\
import trio

async def main(context):
    i = 0
    while True:
        print(f"chatty line {i} " + "x" * 200, flush=True)
        i += 1
        if i % 50 == 0:
            await trio.sleep(0.01)
"""


@pytest.mark.multiprocess
async def test_a_chatty_app_and_a_full_disk_leave_the_stack_up_and_the_log_bounded(tmp_path):
    apps = _apps_dir(tmp_path, "com.test.chatty", CHATTY_MAIN)
    config = BootConfig(clock="virtual", record=False, boot_timeout=30)
    with _tiny_tmpfs("8m") as disk:
        async with open_stack(processes=True, runtime_dir=disk / "rt", apps_dir=apps, config=config) as emu:
            rtdir = str(emu.runtime_dir)
            log = emu.files.log
            result = await trio.to_thread.run_sync(_cli, "--runtime-dir", rtdir, "am", "launch", "com.test.chatty")
            assert result.exit_code == 0, result.output
            # The app prints about 1 MB/s: the log turns, and stays within its ring.
            with trio.fail_after(60):
                while not log_parts(log)[0].exists():
                    await trio.sleep(0.1)
            assert _on_disk(log) <= LOGCAT_BUFFER_BYTES
            filler = await trio.to_thread.run_sync(_fill, disk)
            await trio.sleep(2)  # the app prints on; init drops what does not fit (the ring's turns free some)
            assert all(emu.process(name).returncode is None for name in ("servicemanager", "hal", "system_server"))
            dump = await trio.to_thread.run_sync(_cli, "--runtime-dir", rtdir, "dumpsys", "activity")
            assert dump.exit_code == 0 and "com.test.chatty" in dump.output, dump.output
            killed = await trio.to_thread.run_sync(_cli, "--runtime-dir", rtdir, "am", "kill", "com.test.chatty")
            assert killed.exit_code == 0, killed.output
            filler.unlink()
            await trio.sleep(1)  # the kill's lines: the log is quiet now
            # Quiet, so nothing scrolls: fill the disk, log 200 lines, make room, log one more.
            # Every line lost is counted by the note before the next one written. (If the
            # ring turned just then, its freed half took them all: fill again.)
            for attempt in range(3):
                filler = await trio.to_thread.run_sync(_fill, disk)
                for i in range(200):
                    emu.log("I", f"while full {attempt} {i}")
                filler.unlink()
                emu.log("I", f"room again {attempt}")
                messages = [line.message for line in read_log(disk / "rt")]
                kept = sum(m.startswith(f"while full {attempt} ") for m in messages)
                if kept < 200:
                    break
            notes = [m for m in messages if m.endswith("line(s) dropped: No space left on device")]
            assert notes and int(notes[-1].split()[0]) >= 200 - kept, notes
            assert messages.index(notes[-1]) == messages.index(f"room again {attempt}") - 1
            assert _on_disk(log) <= LOGCAT_BUFFER_BYTES


async def test_following_the_log_goes_on_across_the_rings_turns(autojump_clock, tmp_path):
    path = tmp_path / "logcat"
    ring = LogRing(path, 64 * 1024)
    seen: list[str] = []

    async def follow(task_status=trio.TASK_STATUS_IGNORED):
        task_status.started()
        async for line in follow_log(path):
            seen.append(line.message)

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(follow)
            for batch in range(30):  # about 10 KB a batch: the ring turns every third
                for i in range(100):
                    ring.write(format_line(7, 7, "I", "t", f"{batch * 100 + i:05d} " + "z" * 80))
                await trio.sleep(0.25)  # the follower polls every 0.1 s
            nursery.cancel_scope.cancel()
    finally:
        ring.close()
    assert [int(m.split()[0]) for m in seen] == list(range(3000))


async def test_init_says_why_it_exited_on_stderr_which_is_init_err(tmp_path, capsys):
    read_end, write_end = os.pipe()
    config = BootConfig(clock="virtual", record=False, boot_timeout=10, commands={"hal": [sys.executable, "-c", "pass"]})
    try:
        status = await serve_until_signalled(str(tmp_path / "rt"), config, write_end)
        report = os.read(read_end, 65536).decode()
    finally:
        os.close(read_end)
    assert status == 1
    assert report.startswith("error hal (pid")
    err = capsys.readouterr().err
    assert "npuemu: init exiting: BootError: hal (pid" in err and "exited with status 0 before registering" in err
