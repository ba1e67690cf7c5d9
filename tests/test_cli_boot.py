"""The real thing: `npuemu boot --detach`, the shell commands against it, `npuemu shutdown`.

One emulator (servicemanager, HAL and system_server as real processes under a detached
init) serves the whole module; each test drives it through the click commands as a
person at a terminal would, and asserts on what they print. A second part boots
in-process with stand-in stages to pin init's boot errors.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest
import trio
from click.testing import CliRunner

from framework.cli import main
from framework.emulator import BootConfig, BootError, RuntimeFiles, open_stack
from framework.emulator._paths import pid_alive
from framework.emulator._reaper import BOOT_ID_ENV, kill_boot, processes_with_env

pytestmark = pytest.mark.multiprocess


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    root = tmp_path_factory.mktemp("emu")
    runner = CliRunner()
    result = runner.invoke(main, ["boot", "--detach", "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output + result.stderr
    assert result.stdout.strip() == str(root)
    state = RuntimeFiles(root).read_state()
    try:
        yield root, state
    finally:
        if RuntimeFiles(root).read_state() is not None:
            runner.invoke(main, ["shutdown", "--runtime-dir", str(root)])
        kill_boot(state["boot_id"])  # nothing, unless a test failed half-way


def test_boot_registers_every_service(emulator):
    root, state = emulator
    assert set(state["pids"]) == {"servicemanager", "hal", "system_server"}
    result = CliRunner().invoke(main, ["service", "list", "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output
    listed = {line.split("\t")[1] for line in result.output.splitlines()[1:]}
    assert {"npu", "package", "activity", "thermal", "android.hardware.npu.IScheduling/default",
            "npuemu.hal.IHalControl/default", "android.hardware.neuralnetworks.IDevice/emu-npu"} <= listed
    assert result.output.startswith(f"Found {len(listed)} services:")


def test_dumpsys_hal_shows_the_driver_and_the_hal_state(emulator):
    root, _ = emulator
    result = CliRunner().invoke(main, ["dumpsys", "hal", "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output
    assert "scheduling callback: set" in result.output  # system_server registered its callback
    for device in ("emu-npu", "emu-gpu", "emu-dsp", "emu-hetero"):
        assert device in result.output
    everything = CliRunner().invoke(main, ["dumpsys", "--runtime-dir", str(root)])
    assert "DUMP OF SERVICE hal:" in everything.output
    refused = CliRunner().invoke(main, ["dumpsys", "hal", "--json", "--runtime-dir", str(root)])
    assert refused.exit_code == 2 and "text only" in refused.stderr


def test_devices_lists_drivers_then_the_cpu(emulator):
    root, _ = emulator
    result = CliRunner().invoke(main, ["devices", "--json", "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows[-1] == {"name": "nnapi-reference", "type": "CPU", "version": "npuemu-1.2", "feature_level": 29,
                        "status": "AVAILABLE"}
    npu = next(r for r in rows if r["name"] == "emu-npu")
    assert npu["type"] == "ACCELERATOR" and npu["version"] and npu["status"] == "AVAILABLE"


def test_a_second_boot_in_the_same_directory_is_refused(emulator):
    root, state = emulator
    result = CliRunner().invoke(main, ["boot", "--detach", "--runtime-dir", str(root)])
    assert result.exit_code == 1
    assert f"an emulator already runs in {root}" in result.stderr
    assert RuntimeFiles(root).read_state()["init_pid"] == state["init_pid"]


def test_thermal_set_holds_the_die_and_the_service_follows_until_reset(emulator):
    root, _ = emulator
    runner = CliRunner()
    try:
        result = runner.invoke(main, ["thermal", "set", "severe", "--json", "--runtime-dir", str(root)])
        assert result.exit_code == 0, result.output
        status = json.loads(result.output)
        assert (status["severity_name"], status["held"]) == ("SEVERE", True)
        assert status["thresholds_c"]["SEVERE"] <= status["temperature_c"] < status["thresholds_c"]["CRITICAL"]
        log = _wait(lambda: [line for line in runner.invoke(
            main, ["logcat", "-d", "-s", "ThermalService", "--runtime-dir", str(root)]).output.splitlines()
            if "SEVERE" in line], 10, "the thermal service to follow")
        assert "-> SEVERE" in log[0]
        result = runner.invoke(main, ["thermal", "status", "--runtime-dir", str(root)])
        assert result.exit_code == 0 and result.output.startswith("severity     SEVERE (3)\n")
        assert "override     held (npuemu thermal reset releases it)" in result.output
        dump = runner.invoke(main, ["dumpsys", "thermal", "--runtime-dir", str(root)])
        assert dump.exit_code == 0 and "IsStatusOverride: true" in dump.output, dump.output
    finally:
        result = runner.invoke(main, ["thermal", "reset", "--json", "--runtime-dir", str(root)])  # the emulator is shared
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["held"] is False
    assert "override" not in runner.invoke(main, ["thermal", "status", "--runtime-dir", str(root)]).output


def test_launch_runs_an_app_through_the_activity_manager(emulator):
    root, _ = emulator
    runner = CliRunner()
    result = runner.invoke(main, ["launch", "legacy", "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output + result.stderr
    assert result.output.startswith("launched com.example.npuemu.legacy pid ")
    assert re.search(r" \(visible\) in \d+ ms$", result.output.strip())  # waited until it was up
    report_path = RuntimeFiles(root).app_reports / "legacy.json"

    def report():
        try:
            r = json.loads(report_path.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return r if r["inferences"] >= 5 else None

    r = _wait(report, 60, "legacy to run inferences")
    assert r["results_ok"] == r["inferences"]  # every result equals the app's own numpy reference
    assert r["package"] == "com.example.npuemu.legacy" and r["uid"] >= 10000
    warned = runner.invoke(main, ["logcat", "-d", "-s", "NpuManagerService:W", "--runtime-dir", str(root)]).output
    assert "does not declare" in warned and "com.example.npuemu.legacy" in warned


MY_APP_MANIFEST = """<manifest xmlns:android="http://schemas.android.com/apk/res/android" package="{package}">
    <uses-feature android:name="android.hardware.npu" android:required="false" />
    <uses-permission android:name="android.permission.ACCESS_NPU_MODEL_MANAGER_API" />
</manifest>
"""

MY_APP_MAIN = """
import numpy as np
import trio

from framework.nn import Model, OperandType, OperationType, open_nn_runtime


async def main(context):
    m = Model()
    a, b, out = (m.addOperand(OperandType.TENSOR_FLOAT32, [1, 4]) for _ in range(3))
    fuse = m.addOperand(OperandType.INT32)
    m.setOperandValue(fuse, 0)
    m.addOperation(OperationType.ADD, [a, b, fuse], [out])
    m.identifyInputsAndOutputs([a, b], [out])
    m.finish()
    async with open_nn_runtime(context.runtime) as nn:
        compilation = nn.createCompilationForDevices(m, [nn.getDeviceByName("emu-npu")])
        await compilation.finish()
        execution = compilation.createExecution()
        execution.setInput(0, np.ones((1, 4), np.float32))
        execution.setInput(1, np.ones((1, 4), np.float32))
        (y,) = await execution.compute_async()
        assert (y == 2).all()
        on_cpu = nn.createCompilationForDevices(m, [nn.getDeviceByName("nnapi-reference")])
        await on_cpu.finish()
        execution = on_cpu.createExecution()
        execution.setInput(0, np.ones((1, 4), np.float32))
        execution.setInput(1, np.ones((1, 4), np.float32))
        (y,) = await execution.compute_async()
        assert (y == 2).all()
    await trio.sleep_forever()
"""


def _my_app(root, name: str, main: str | None):
    folder = root / name
    folder.mkdir()
    (folder / "AndroidManifest.xml").write_text(MY_APP_MANIFEST.format(package=f"org.example.{name}"))
    if main is not None:
        (folder / "main.py").write_text(main)
    return str(folder)


def test_launch_waits_for_the_app_and_reports_a_crash_at_start(emulator, tmp_path):
    """`npuemu launch` of a user's apps, as `am start -W`: up, or crashed with its cause."""
    root, _ = emulator
    runner = CliRunner()
    result = runner.invoke(main, ["launch", _my_app(tmp_path, "mine", MY_APP_MAIN), "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output + result.stderr
    assert re.fullmatch(r"launched org\.example\.mine pid \d+ uid \d+ \(foreground\) in \d+ ms\n", result.output)

    broken = _my_app(tmp_path, "broken", "async def main(context)\n    pass\n")
    missing = _my_app(tmp_path, "missing", None)
    result = runner.invoke(main, ["launch", broken, missing, "--runtime-dir", str(root)])
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    pids = []
    for line, package, cause in zip(lines, ("broken", "missing"), (
            r"SyntaxError: expected ':' at .*/broken/main\.py:1", r"FileNotFoundError: .*/missing/main\.py: no such file \(an app folder holds AndroidManifest\.xml and main\.py\)")):
        m = re.fullmatch(rf"npuemu: error: org\.example\.{package} \(pid (\d+)\) crashed at start: {cause}"
                         rf" \(the traceback: npuemu logcat -d --pid (\d+)\)", line)
        assert m and m[1] == m[2], line
        pids.append(int(m[1]))

    # The traceback is the app's own: its pid, the tag AndroidRuntime, every line. (init
    # copies the processes' output into the log as it comes: the last line may lag.)
    def logged(*argv: str, until: str):
        out = runner.invoke(main, ["logcat", "-d", *argv, "--runtime-dir", str(root)]).output
        return until in out and out

    log = _wait(lambda: logged("--pid", str(pids[0]), until="SyntaxError: expected"), 10, "the traceback").splitlines()
    assert all(f" {pids[0]} " in line[18:32] for line in log)
    fatal = [line.split(": ", 1)[1] for line in log if " E AndroidRuntime: " in line]
    assert fatal[:2] == ["FATAL EXCEPTION: main", f"Process: org.example.broken, PID: {pids[0]}"]
    assert fatal[2] == "Traceback (most recent call last):" and fatal[-1] == "SyntaxError: expected ':'"
    tagged = _wait(lambda: logged("-s", "AndroidRuntime", until="FileNotFoundError: "), 10, "the other traceback")
    assert "SyntaxError: expected ':'" in tagged
    am_says = f"Process org.example.broken (pid {pids[0]}) crashed at start: SyntaxError"
    _wait(lambda: logged("-s", "ActivityManager", until=am_says), 10, "the activity manager's line")


def test_trace_of_the_running_emulator(emulator, tmp_path):
    root, _ = emulator
    out = tmp_path / "trace.json"

    def traced():  # until org.example.mine's step on the CPU (after it was up) is recorded
        result = CliRunner().invoke(main, ["trace", "--out", str(out), "--runtime-dir", str(root)])
        assert result.exit_code == 0, result.output + result.stderr
        trace = json.loads(out.read_text())
        return any(e.get("cat") == "cpu" for e in trace["traceEvents"]) and trace

    trace = _wait(traced, 30, "the CPU step of org.example.mine in the trace")
    jobs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "npu.job"]
    assert jobs, "legacy's inference on emu-npu (refused or run) or the test inference left no job"
    names = {e["name"] for e in jobs}
    assert {"com.example.npuemu.legacy", "org.example.mine"} <= names  # named by the package manager's answer
    on_cpu = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "cpu"]
    assert [(e["name"], e["args"]["why"]) for e in on_cpu] == [("org.example.mine", "planned")]  # its own track
    assert any(e["ph"] == "C" and e["name"] == "temperature (C)" for e in trace["traceEvents"])


def test_a_services_refusal_of_bad_arguments_exits_2_with_its_message(emulator):
    """IllegalArgumentException from system_server or the HAL: bad usage, the message alone."""
    root, _ = emulator
    runner = CliRunner()
    for argv, message in (
        (["cmd", "npu", "set-budget-policy", "--max-budget", "many"], "set-budget-policy: --max-budget 'many' is not an int"),
        (["cmd", "npu", "frobnicate"], "unknown command 'frobnicate'; try: cmd npu help"),
        (["am", "set-importance", "com.example.nobody", "visible"], "no app 'com.example.nobody' has been started"),
    ):
        result = runner.invoke(main, [*argv, "--runtime-dir", str(root)])
        assert (result.exit_code, result.stderr) == (2, f"npuemu: error: {message}\n"), argv


def test_cmd_npu_set_unload_deadline_is_shown_by_dumpsys_and_bad_values_exit_2(emulator):
    root, _ = emulator
    runner = CliRunner()

    def run(*argv):
        return runner.invoke(main, [*argv, "--runtime-dir", str(root)])

    try:
        result = run("cmd", "npu", "set-unload-deadline", "750")
        assert (result.exit_code, result.output) == (0, "unload deadline: 750 ms\n"), result.stderr
        assert "Unload deadline: 750 ms " in run("dumpsys", "npu").output
        assert json.loads(run("dumpsys", "npu", "--json").output)["unload_timeout_s"] == 0.75
        for bad in ("0", "-1", "1.5", "soon", "2147483648"):
            result = run("cmd", "npu", "set-unload-deadline", bad)
            assert (result.exit_code, result.stderr) == (
                2, f"npuemu: error: set-unload-deadline: {bad!r} is not a whole number of milliseconds "
                   "from 1 to 2147483647\n"), bad
        result = run("cmd", "npu", "set-unload-deadline")
        assert (result.exit_code, result.stderr) == (
            2, "npuemu: error: set-unload-deadline takes one argument, MS (milliseconds)\n")
        assert "Unload deadline: 750 ms " in run("dumpsys", "npu").output  # refusals changed nothing
    finally:
        run("cmd", "npu", "set-unload-deadline", "2000")  # the module's emulator is shared


def test_run_test_inference_runs_at_the_default_job_priority(emulator):
    root, _ = emulator
    result = CliRunner().invoke(main, ["run-test-inference", "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output + result.stderr
    kinds = [line.split()[2] for line in result.output.splitlines()]
    assert kinds[0] == "requested" and kinds[-1] == "ended"
    assert all("jobPriority 500 " in line for line in result.output.splitlines())


def test_init_restarts_a_crashed_hal_and_the_system_reconnects(emulator):
    """A driver that aborts takes the HAL process down; init launches it again, as on a phone."""
    root, _ = emulator
    from framework.emulator import open_shell
    from interfaces.npuemu.hal import IHalControl
    from framework.emulator._services import HAL_CONTROL, get_service

    before = RuntimeFiles(root).read_state()["pids"]["hal"]

    async def crash() -> None:
        async with open_shell(root) as runtime:
            hal = await get_service(runtime, HAL_CONTROL, IHalControl)
            try:
                await hal.injectFault("emu-npu", 4, 0.0)  # FAULT_CRASH: the driver aborts the HAL
            except Exception:
                pass  # the reply may never come: the process is gone

    trio.run(crash)
    state = _wait(lambda: (s := RuntimeFiles(root).read_state()) and s["pids"]["hal"] != before and s,
                  30, "init to restart the HAL")
    assert state["hal_restarts"] == 1
    runner = CliRunner()

    def reconnected():
        log = runner.invoke(main, ["logcat", "-d", "--runtime-dir", str(root)]).output
        return log.count("connected to android.hardware.npu.IScheduling/default") >= 2 and log

    log = _wait(reconnected, 30, "system_server to reconnect to the new HAL")
    assert f"hal (pid {before}) was killed by SIGABRT" in log
    assert "restarting hal (restart 1 of 4)" in log
    result = runner.invoke(main, ["devices", "--runtime-dir", str(root)])
    assert result.exit_code == 0 and "emu-npu" in result.output


def test_foreground_boot_beside_another_emulator_streams_the_log_and_stops_on_ctrl_c(emulator, tmp_path):
    """`npuemu boot` in a terminal, while the module's emulator runs in another directory:
    log lines stream to stdout, Ctrl-C stops everything of this one and nothing of the other."""
    import signal
    import subprocess

    root = tmp_path / "fg"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from framework.cli import main; main()", "boot", "--runtime-dir", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        state = _wait(lambda: RuntimeFiles(root).read_state(), 60, "the foreground boot")
        other_root, _ = emulator
        assert not set(state["pids"].values()) & set(RuntimeFiles(other_root).read_state()["pids"].values())
        both = [CliRunner().invoke(main, ["service", "list", "--runtime-dir", str(d)]) for d in (root, other_root)]
        assert all(r.exit_code == 0 and "npu" in r.output for r in both)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "booted in" in err and "shut down" in err
    assert "Traceback" not in err
    lines = out.splitlines()
    assert any("NpuManagerService" in line and "npu service registered" in line for line in lines)
    assert any(" init: SIGINT received" in line for line in lines)
    for pid in [state["init_pid"], *state["pids"].values()]:
        assert not pid_alive(pid), pid
    other_now = RuntimeFiles(other_root).read_state()  # (the HAL test above restarted its HAL)
    assert all(pid_alive(pid) for pid in other_now["pids"].values())  # the other emulator is untouched


def test_shutdown_stops_every_process(emulator):
    root, _ = emulator
    state = RuntimeFiles(root).read_state()
    result = CliRunner().invoke(main, ["shutdown", "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output + result.stderr
    assert f"init pid {state['init_pid']}" in result.output
    for pid in [state["init_pid"], *state["pids"].values()]:
        assert not pid_alive(pid), pid
    assert RuntimeFiles(root).read_state() is None
    # What boot created for the running emulator is gone; its records stay for logcat and trace.
    assert RuntimeFiles(root).live_files() == []
    assert {"apps", "logcat", "trace.jsonl"} <= {p.name for p in root.iterdir()}
    for argv in (["service", "list"], ["dumpsys"], ["cmd", "npu", "info"], ["am", "kill", "com.example.npuemu.camera"]):
        result = CliRunner().invoke(main, ["--runtime-dir", str(root), *argv])
        assert result.exit_code == 3, (argv, result.output)
        assert result.stderr == f"npuemu: error: no emulator is running in {root} (start one with `npuemu boot`)\n"
    result = CliRunner().invoke(main, ["logcat", "-d", "-s", "init", "--runtime-dir", str(root)])
    assert result.exit_code == 0 and " init: init exiting" in result.output.splitlines()[-1]


# -- init's boot errors, with stand-in stages ------------------------------------------------


async def test_a_stage_that_dies_fails_the_boot_with_its_last_words(tmp_path):
    config = BootConfig(record=False, boot_timeout=20, commands={
        "hal": [sys.executable, "-c", "import sys; print('driver exploded: no such device'); sys.exit(3)"],
        "system_server": [sys.executable, "-c", "import time; time.sleep(60)"],
    })
    with pytest.raises(BootError, match=r"(?s)hal \(pid \d+\) exited with status 3 before registering.*driver exploded"):
        async with open_stack(processes=True, runtime_dir=tmp_path / "rt", config=config):
            pass  # pragma: no cover
    assert RuntimeFiles(tmp_path / "rt").read_state() is None
    log = (tmp_path / "rt" / "logcat").read_text()
    assert "driver exploded: no such device" in log  # the child's output is in the log, adopted


async def test_a_stage_that_never_registers_times_out(tmp_path):
    sleeper = [sys.executable, "-c", "import time; print('thinking', flush=True); time.sleep(60)"]
    config = BootConfig(record=False, boot_timeout=3, commands={"hal": sleeper, "system_server": sleeper})
    with trio.fail_after(30):
        with pytest.raises(BootError, match=r"did not register .* within 3 s"):
            async with open_stack(processes=True, runtime_dir=tmp_path / "rt", config=config):
                pass  # pragma: no cover


async def test_shutdown_after_init_was_killed_stops_its_leftovers(tmp_path):
    """A SIGKILLed init (and its reaper) cannot clean up; `npuemu shutdown` then stops
    every process of the boot init.json names, and only those, and removes its files."""
    import subprocess

    from framework.emulator._control import shutdown
    from framework.emulator import EmulatorError

    root = tmp_path / "rt"
    root.mkdir(mode=0o700)
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    ours = subprocess.Popen(sleep, start_new_session=True, env={**os.environ, BOOT_ID_ENV: "b00700"})
    # Another emulator's process, and one that only names this directory: not of this boot.
    others = [subprocess.Popen(sleep, start_new_session=True, env={**os.environ, BOOT_ID_ENV: "0th3r"}),
              subprocess.Popen([*sleep, "--runtime-dir", str(root)], start_new_session=True)]
    try:
        dead_init = subprocess.Popen([sys.executable, "-c", "pass"])
        dead_init.wait()
        RuntimeFiles(root).write_state({"init_pid": dead_init.pid, "boot_id": "b00700", "pids": {"hal": ours.pid}})
        (root / "shell.token").write_text("0" * 64)
        with pytest.raises(EmulatorError, match=rf"had died; killed what it left running \(pids {ours.pid}\)"):
            await shutdown(root)
        assert ours.wait(timeout=10) == -9
        assert all(p.poll() is None for p in others)
        assert sorted(p.name for p in root.iterdir()) == []
    finally:
        for p in (ours, *others):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_boot_on_a_driver_authors_so(tmp_path):
    """The driver author's loop: `make driver`, then `npuemu boot --driver x.so`; its devices are listed."""
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    so = tmp_path / "template.so"
    build = subprocess.run(["make", "-s", "driver", "SRC=csrc/drivers/template/template.c", f"OUT={so}"],
                           cwd=repo, capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    root = tmp_path / "rt"
    runner = CliRunner()
    result = runner.invoke(main, ["boot", "--detach", "--driver", str(so), "--speed", "2", "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output + result.stderr
    try:
        assert RuntimeFiles(root).read_state()["driver"] == str(so)
        result = runner.invoke(main, ["devices", "--runtime-dir", str(root)])
        assert result.exit_code == 0, result.output
        names = [line.split()[1] for line in result.output.splitlines()[1:]]
        assert names == ["tmpl-npu", "nnapi-reference"]
    finally:
        assert runner.invoke(main, ["shutdown", "--runtime-dir", str(root)]).exit_code == 0


def test_boot_detach_collects_none_of_the_commands_garbage_in_init(tmp_path, monkeypatch):
    """`boot --detach` forks the command's own process into init. Garbage the command
    leaves (in a test process: a socket in a reference cycle from an earlier trio run)
    must never be collected in init, where its finalizer would close a descriptor number
    init has reused for its own sockets: "boot failed: [Errno 9] Bad file descriptor",
    now and then, in a full test run."""
    import gc

    record = tmp_path / "finalized-by"
    me = os.getpid()
    real_fork = os.fork

    class Garbage:
        def __init__(self) -> None:
            self.cycle = self  # only the cyclic collector frees it

        def __del__(self) -> None:
            fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{os.getpid()}\n".encode())
            finally:
                os.close(fd)

    def fork_with_garbage() -> int:
        if os.getpid() == me:
            gc.collect()  # nothing of the test's own is pending; then fresh garbage, uncollected
            for _ in range(50):
                Garbage()
        return real_fork()

    monkeypatch.setattr(os, "fork", fork_with_garbage)
    root = tmp_path / "rt"
    runner = CliRunner()
    result = runner.invoke(main, ["boot", "--detach", "--runtime-dir", str(root)])
    try:
        assert result.exit_code == 0, result.output + result.stderr
    finally:
        assert runner.invoke(main, ["shutdown", "--runtime-dir", str(root)]).exit_code == 0
    gc.collect()
    finalized_in = record.read_text().split()
    assert len(finalized_in) >= 50 and set(finalized_in) == {str(me)}, finalized_in


def test_a_sigkilled_init_leaves_nothing_running_and_the_next_boot_takes_over(tmp_path):
    """init's dead-man switch: when init dies without shutting down, its stack dies with it;
    a boot in the same directory then removes what the dead one left and runs."""
    import signal
    import subprocess

    root = tmp_path / "rt"
    script = (
        "import sys, trio\n"
        "from framework.emulator import BootConfig, open_stack\n"
        "async def main():\n"
        "    async with open_stack(processes=True, runtime_dir=sys.argv[1], config=BootConfig(record=False)) as emu:\n"
        "        print('up', flush=True)\n"
        "        await trio.sleep_forever()\n"
        "trio.run(main)\n"
    )
    init = subprocess.Popen([sys.executable, "-c", script, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert init.stdout.readline().strip() == "up"
        state = RuntimeFiles(root).read_state()
        pids = list(state["pids"].values())
        assert all(pid_alive(p) for p in pids)
        init.send_signal(signal.SIGKILL)
        init.wait(timeout=10)
        _wait(lambda: not any(pid_alive(p) for p in pids), 10, "the stack to die with its init")
    finally:
        if init.poll() is None:
            init.kill()
            init.wait()
        init.stdout.close()
    stale = sorted(p.name for p in RuntimeFiles(root).live_files())
    assert "init.json" in stale and "servicemanager" in stale and "shell.token" in stale
    # Stale, not running: every command says so, and a boot takes the directory over.
    result = CliRunner().invoke(main, ["dumpsys", "--runtime-dir", str(root)])
    assert (result.exit_code, result.stderr) == (3, f"npuemu: error: no emulator is running in {root} (start one with `npuemu boot`)\n")
    runner = CliRunner()
    result = runner.invoke(main, ["boot", "--detach", "--runtime-dir", str(root)])
    assert result.exit_code == 0, result.output + result.stderr
    try:
        log = (root / "logcat").read_text()
        assert "removed what a dead emulator left: " + ", ".join(stale) in log
        assert runner.invoke(main, ["devices", "--runtime-dir", str(root)]).exit_code == 0
    finally:
        assert runner.invoke(main, ["shutdown", "--runtime-dir", str(root)]).exit_code == 0
    assert RuntimeFiles(root).live_files() == []


#: A boot that cannot complete: system_server is a stand-in that never registers.
_NEVER_BOOTS = (
    "import sys, trio\n"
    "from framework.emulator import BootConfig\n"
    "from framework.emulator._daemon import serve_until_signalled\n"
    "standin = [sys.executable, '-c', 'import time; print(\"stand-in up\", flush=True); time.sleep(600)']\n"
    "config = BootConfig(record=False, boot_timeout=60, commands={'system_server': standin})\n"
    "sys.exit(trio.run(serve_until_signalled, sys.argv[1], config, 1))\n"
)


def _processes_in(root) -> list[int]:
    """The live processes of the emulator in ``root`` (each has it in its environment)."""
    return processes_with_env("NPUEMU_RUNTIME_DIR", str(root))


@pytest.mark.parametrize("moment", [None, r"servicemanager: servicemanager pid \d+ serving",
                                    r"init: hal \(pid \d+\) registered", "stand-in up"],
                         ids=["at-once", "servicemanager-up", "hal-registered", "system-server-running"])
def test_a_sigterm_at_any_moment_of_the_boot_stops_everything_it_started(tmp_path, moment):
    """`npuemu shutdown` (SIGTERM) while init boots: the boot stops where it is, every process
    it had started is stopped, init exits, and the directory keeps only the log."""
    import re
    import signal
    import subprocess

    root = tmp_path / "rt"
    init = subprocess.Popen([sys.executable, "-c", _NEVER_BOOTS, str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if moment is not None:
            log = root / "logcat"
            _wait(lambda: log.exists() and re.search(moment, log.read_text()), 60, moment)
            assert _processes_in(root)  # (the moment is inside the boot: something runs)
        init.send_signal(signal.SIGTERM)
        out, err = init.communicate(timeout=30)
    finally:
        if init.poll() is None:
            init.kill()
            init.wait()
    if moment is None and init.returncode == -signal.SIGTERM:
        assert not root.exists() or not (root / "logcat").exists()  # killed before it started anything
    else:
        assert (init.returncode, out) == (1, "error boot interrupted by SIGTERM\n"), err
        log = (root / "logcat").read_text()
        assert "W init: boot interrupted: stopping what it started" in log
        assert log.rstrip().endswith("I init: init exiting")
    assert _processes_in(root) == []
    assert RuntimeFiles(root).live_files() == []
