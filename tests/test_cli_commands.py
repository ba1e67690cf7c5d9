"""The npuemu commands without a running emulator: help, user errors, logcat on a log file.

Every user error is one line on stderr, ``npuemu: error: ...``, with its exit status
(2 bad usage, 3 no emulator), and never a traceback.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from framework.cli import main
from framework.emulator import LogFilter, parse_lines
from framework.emulator._control import parse_severity, resolve_app
from framework.emulator._logcat import adopt_line, format_line, parse_line
from framework.emulator import NoSuchAppError

COMMANDS = [
    ["boot"], ["shutdown"], ["service", "list"], ["devices"], ["launch"], ["logcat"],
    ["thermal", "set"], ["thermal", "reset"], ["thermal", "status"], ["trace"], ["plot"], ["demo"],
]


@pytest.fixture
def runner():
    return CliRunner()


def _one_error_line(result, pattern: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("npuemu: error: ")
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in result.output + result.stderr


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_command_has_help_with_an_example(runner, argv):
    result = runner.invoke(main, [*argv, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output


def test_no_emulator_is_one_line_and_exit_3(runner, tmp_path):
    for argv in (["service", "list"], ["devices"], ["thermal", "status"], ["thermal", "reset"], ["shutdown"],
                 ["launch", "camera"]):
        result = runner.invoke(main, [*argv, "--runtime-dir", str(tmp_path / "none")])
        assert result.exit_code == 3, (argv, result.output)
        _one_error_line(result, r"no emulator is running in .*/none")


def test_root_runtime_dir_option_reaches_subcommands(runner, tmp_path):
    result = runner.invoke(main, ["--runtime-dir", str(tmp_path / "emu7"), "devices"])
    assert result.exit_code == 3
    _one_error_line(result, r"emu7")


def test_bad_severity_bad_app_bad_speed(runner, tmp_path):
    result = runner.invoke(main, ["thermal", "set", "scorching", "--runtime-dir", str(tmp_path)])
    assert result.exit_code == 2
    _one_error_line(result, r"unknown thermal severity 'scorching'; use one of none, light, .*shutdown")
    result = runner.invoke(main, ["launch", "camra", "--runtime-dir", str(tmp_path)])
    assert result.exit_code == 2
    _one_error_line(result, r"no such app 'camra'.*the sample apps are assistant, camera, legacy, photos, rogue")
    result = runner.invoke(main, ["launch", "camera", "--importance", "visable", "--runtime-dir", str(tmp_path)])
    assert result.exit_code == 2
    _one_error_line(result, r"did you mean visible")
    result = runner.invoke(main, ["boot", "--speed", "0", "--runtime-dir", str(tmp_path)])
    assert result.exit_code == 2
    _one_error_line(result, r"speed must be a positive number")
    result = runner.invoke(main, ["boot", "--driver", str(tmp_path / "nope.so"), "--runtime-dir", str(tmp_path)])
    assert result.exit_code == 2
    _one_error_line(result, r"no driver at .*nope\.so")
    result = runner.invoke(main, ["demo", "--seconds", "2"])
    assert result.exit_code == 2
    _one_error_line(result, r"at least 8")


def test_severity_names_and_numbers():
    assert [parse_severity(s) for s in ("none", "LIGHT", "throttling_severe", "4", 6)] == [0, 1, 3, 4, 6]
    for bad in ("7", -1, "hot"):
        with pytest.raises(ValueError):
            parse_severity(bad)


def test_apps_resolve_by_name_or_path(tmp_path):
    assert resolve_app("camera").name == "camera"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "AndroidManifest.xml").write_text("<manifest/>")
    assert resolve_app(str(tmp_path / "mine")) == tmp_path / "mine"
    with pytest.raises(NoSuchAppError):
        resolve_app(str(tmp_path))  # a folder without a manifest


# -- logcat ---------------------------------------------------------------------------------


def test_logcat_lines_round_trip_and_foreign_lines_are_adopted():
    line = format_line(42, 43, "W", "NpuManagerService", "uid 10001: revoking", now=0.0)
    parsed = parse_line(line)
    assert (parsed.pid, parsed.tid, parsed.level, parsed.tag, parsed.message) == (
        42, 43, "W", "NpuManagerService", "uid 10001: revoking")
    assert adopt_line(line, 7, "hal") == line  # already logcat: kept as it is
    pylog = parse_line(adopt_line("2026-12-01 21:00:00,123 4242 WARNING servicemanager: pid 9 exited", 7, "sm"))
    assert (pylog.pid, pylog.level, pylog.tag, pylog.message) == (4242, "W", "servicemanager", "pid 9 exited")
    stray = parse_line(adopt_line("Traceback (most recent call last):", 7, "system_server"))
    assert (stray.pid, stray.level, stray.tag) == (7, "E", "system_server")
    with pytest.raises(ValueError):
        format_line(1, 1, "X", "tag", "bad level")


def test_filters_by_tag_prefix_and_level():
    lines = list(parse_lines([
        format_line(1, 1, "I", "android.hardware.npu", "serving", now=0),
        format_line(1, 1, "W", "android.hardware.npu.IScheduling", "slow", now=0),
        format_line(2, 2, "I", "NpuManagerService", "ok", now=0),
        format_line(2, 2, "E", "NpuManagerService", "boom", now=0),
        "  File \"x.py\", line 1",  # a traceback's continuation stays with its entry
    ]))
    assert [line.message for line in lines if LogFilter.parse(["android.hardware.npu"])(line)] == ["serving", "slow"]
    assert [line.message for line in lines if LogFilter.parse(["*:E"])(line)] == ["boom", '  File "x.py", line 1']
    assert len([line for line in lines if LogFilter()(line)]) == 5
    with pytest.raises(ValueError, match="bad filter"):
        LogFilter.parse(["tag:Q"])


def test_logcat_dump_reads_the_log_of_a_stopped_emulator(runner, tmp_path):
    (tmp_path / "logcat").write_text("\n".join([
        format_line(10, 10, "I", "init", "booting", now=0),
        format_line(11, 11, "W", "NpuManagerService", "uid 10003 does not declare android.hardware.npu", now=0),
    ]) + "\n")
    result = runner.invoke(main, ["logcat", "-d", "-s", "NpuManagerService", "--runtime-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        line for line in (tmp_path / "logcat").read_text().splitlines() if "NpuManagerService" in line]
    result = runner.invoke(main, ["logcat", "-d", "--runtime-dir", str(tmp_path / "none")])
    assert result.exit_code == 3
    _one_error_line(result, "no log in")


def test_trace_and_plot_without_a_recording(runner, tmp_path):
    for cmd in ("trace", "plot"):
        result = runner.invoke(main, [cmd, "--runtime-dir", str(tmp_path), "--out", str(tmp_path / "x")])
        assert result.exit_code == 1
        _one_error_line(result, "no recording")


def test_framework_emulator_exports_each_public_name_once():
    import ast
    import inspect

    import framework.emulator as emulator

    tree = ast.parse(inspect.getsource(emulator))
    names = [a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names]
    assert len(names) == len(set(names))
    for name in names:
        assert getattr(emulator, name) is not None
    assert {"open_stack", "BootConfig", "open_shell", "EmulatorError"} <= set(names)


# -- the root group's --version, cmd's own options, service refusals -------------------------


def test_version_option_prints_what_the_version_command_does(runner):
    result = runner.invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert re.fullmatch(r"npuemu \d+\.\d+\.\d+, C layer .*\(ABI \d+, build \w+\)\n", result.output)
    assert result.output == runner.invoke(main, ["version"]).output


def test_cmd_takes_runtime_dir_after_the_service(runner, tmp_path):
    late = tmp_path / "emu-late"
    result = runner.invoke(main, ["cmd", "npu", "set-budget-policy", "--max-budget", "4", "--runtime-dir", str(late)])
    assert result.exit_code == 3
    _one_error_line(result, r"no emulator .*/emu-late\b")  # that directory, not the default one
    result = runner.invoke(main, ["cmd", "npu", "info", f"--runtime-dir={late}"])
    assert result.exit_code == 3
    _one_error_line(result, r"/emu-late\b")
    result = runner.invoke(main, ["cmd", "--runtime-dir", str(tmp_path / "a"), "npu", "info", "--runtime-dir", str(late)])
    assert result.exit_code == 2
    _one_error_line(result, r"--runtime-dir given twice")
    result = runner.invoke(main, ["cmd", "npu", "info", "--runtime-dir"])
    assert result.exit_code == 2
    _one_error_line(result, r"--runtime-dir needs a directory")


def test_cmd_npu_help_needs_no_emulator(runner, tmp_path):
    for argv in (["cmd", "npu", "--help"], ["cmd", "npu", "-h"], ["cmd", "npu", "set-budget-policy", "--help"]):
        result = runner.invoke(main, [*argv, "--runtime-dir", str(tmp_path / "none")])
        assert result.exit_code == 0, (argv, result.output, result.stderr)
        assert result.output.startswith("Usage: npuemu cmd [--runtime-dir DIR] npu COMMAND [ARGS]...")
        assert "npu (NPU Manager) commands:" in result.output
        assert "set-budget-policy [--max-budget N] [--weights A,B,C]" in result.output
        assert "set-unload-deadline MS" in result.output


def test_run_test_inference_has_a_default_job_priority(runner, tmp_path):
    result = runner.invoke(main, ["run-test-inference", "--runtime-dir", str(tmp_path / "none")])
    assert result.exit_code == 3, result.output + result.stderr  # not "Missing option --job-priority"
    _one_error_line(result, "no emulator")
    assert "[default: 500]" in runner.invoke(main, ["run-test-inference", "--help"]).output


def test_a_services_illegal_argument_is_bad_usage_with_its_message_alone():
    from framework.binder import IllegalArgumentException, IllegalStateException
    from framework.cli._common import CliError, run

    async def refused(exc):
        raise exc

    with pytest.raises(CliError) as caught:
        run(refused, IllegalArgumentException("set-budget-policy: --max-budget 'x' is not an int"))
    assert (caught.value.exit_code, caught.value.format_message()) == (
        2, "set-budget-policy: --max-budget 'x' is not an int")
    with pytest.raises(CliError) as caught:  # any other refusal stays a failed operation, named
        run(refused, IllegalStateException("not running"))
    assert (caught.value.exit_code, caught.value.format_message()) == (1, "IllegalStateException: not running")


def test_logcat_pid_keeps_one_process_lines(runner, tmp_path):
    (tmp_path / "logcat").write_text("\n".join([
        format_line(10, 10, "I", "init", "booting", now=0),
        format_line(4242, 4242, "E", "AndroidRuntime", "FATAL EXCEPTION: main", now=0),
        format_line(11, 11, "W", "ActivityManager", "Process org.example.mine (pid 4242) crashed at start", now=0),
        format_line(4242, 4242, "E", "AndroidRuntime", "Traceback (most recent call last):", now=0),
        format_line(42420, 42420, "I", "AndroidRuntime", "another process", now=0),
    ]) + "\n")
    result = runner.invoke(main, ["logcat", "-d", "--pid", "4242", "--runtime-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert [line.split(": ", 1)[1] for line in result.output.splitlines()] == [
        "FATAL EXCEPTION: main", "Traceback (most recent call last):"]
    both = runner.invoke(main, ["logcat", "-d", "--pid", "11", "-s", "ActivityManager:W", "--runtime-dir", str(tmp_path)])
    assert both.exit_code == 0 and len(both.output.splitlines()) == 1 and "crashed at start" in both.output
    bad = runner.invoke(main, ["logcat", "-d", "--pid", "0", "--runtime-dir", str(tmp_path)])
    assert bad.exit_code == 2
    _one_error_line(bad, "bad pid 0")


def test_ctrl_c_before_a_command_runs_is_interrupted_not_aborted(runner, monkeypatch):
    # A Ctrl-C that lands before the command's trio run (here: while vts lists its
    # checks) is the same "interrupted", exit 130, as one during the run: not
    # click's "Aborted!" with exit 1, which reads as a failure.
    import framework.vts

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(framework.vts, "describe_checks", interrupted)
    result = runner.invoke(main, ["vts", "--list"])
    assert result.exit_code == 130
    assert result.stderr.strip() == "npuemu: error: interrupted"
    assert "Aborted" not in result.output
