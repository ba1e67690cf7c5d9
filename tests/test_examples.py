"""Every example the documentation gives runs: each command's --help, and the README's guides.

The examples are read from where a user reads them, at collection time, so a new one is
run as soon as it is written and a changed one as it now reads:

- every ``npuemu ...`` line of every command's help (``Example: npuemu ...`` too, and
  the root group's quick start); a ``# comment`` is dropped, and so is a trailing remark
  in parentheses, except that ``(or: npuemu ...)`` is an example of its own;
- in the README's guides (``GUIDES``): each ``npuemu``/``make`` line of a code block and
  each inline ``npuemu ...``/``make ...`` span outside tables; the app developer's guide's
  ``xml`` and ``python`` blocks are ``myapp/AndroidManifest.xml`` and ``myapp/main.py``,
  the app that ``npuemu launch ./myapp`` then launches; the policy engineer's guide's
  ``python`` block is ``mine.py``, the policy its examples load.

Each distinct command runs once, as a user would type it, with the ``npuemu`` of this
environment, as a test of its own (its id is the example), in a scratch working
directory that holds what the examples name: ``path/to/mydriver.c`` (a copy of the
template driver, as the driver guide says to start), ``build/drivers/mydriver.so`` and
``mine.so`` built from it, ``my.toml`` (the phone workload on the template's device)
and ``myapp/`` (with an AIDL file of its own under ``myapp/aidl``). What the test changes, and why:

- ``$NPUEMU_RUNTIME_DIR`` points at this module's emulator, and a ``/tmp/...`` path in
  an example lands in the scratch directory: the test never touches anyone's
  default emulator or files.
- ``npuemu demo`` runs with ``--seconds 8``, its documented shortest run, unless the
  example says how long; plain ``npuemu demo`` is the suite's one run of the reference
  driver's demo (conftest's ``documented_demo``), whose results test_demo checks. The
  demos run in the background from the first example that needs no emulator, beside
  the others that need none; their tests wait for them.
- ``make driver`` runs as ``make -C <repo>`` with SRC/OUT in the scratch directory; the
  quick start's ``make demo`` and ``make test`` are checked with ``make -n`` (they run
  ``npuemu demo``, an example run here, and this very suite).
- ``npuemu boot`` in the foreground and ``npuemu logcat`` without ``-d`` stream until
  Ctrl-C: the test waits until the boot serves (``npuemu devices`` succeeds against it;
  on a ``--driver`` it lists the template's device and ``npuemu run-test-inference``
  runs, the driver guide's next step) or the log shows a line, then sends SIGINT, as
  Ctrl-C does, and expects a clean exit with nothing left running.

The order is what makes each example meaningful: the driver is built first; what needs
no emulator (benchmarks, vts, the demo, foreground boots) runs before this module's
emulator boots, so that none competes with its apps; then ``npuemu boot --detach``,
the launches, everything else, ``am kill`` before ``am launch``, and the shutdowns last.
An example passes when it exits 0 without a traceback; a few say more (the demo on the
template driver ran its apps on ``tmpl-npu``). Nothing is marked xfail: an example that
fails is a documentation bug or a code bug to fix.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from framework.cli import main
from framework.emulator import RuntimeFiles
from framework.emulator._paths import pid_alive

# The module's emulator is booted by an example (a test) and stopped by the fixture: what
# the examples start is checked for leftovers when the module ends (see conftest.py).
pytestmark = [pytest.mark.multiprocess, pytest.mark.slow, pytest.mark.module_owns_processes]

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TEMPLATE = ROOT / "csrc" / "drivers" / "template" / "template.c"
NPUEMU = str(Path(sys.executable).with_name("npuemu"))
GUIDES = ("Quick start", "A driver author's guide", "An app developer's guide", "A policy engineer's guide",
          "Running the emulator yourself", "Reading dumpsys and traces")
FAST_DEMO = ("--seconds", "8")
TIMEOUT_S = {"demo": 240, "bench": 240, "vts": 180}


# -- reading the examples ---------------------------------------------------------------


@dataclasses.dataclass
class Example:
    argv: tuple[str, ...]
    sources: list[str]

    @property
    def text(self) -> str:
        return shlex.join(self.argv)

    @property
    def command(self) -> tuple[str, ...]:
        """The npuemu command it runs (``("am", "kill")``), or ``("make", TARGET)``."""
        if self.argv[0] == "make":
            return ("make", next((a for a in self.argv[1:] if "=" not in a and not a.startswith("-")), ""))
        cmd, path, args = main, [], iter(self.argv[1:])
        for arg in args:
            if arg == "--runtime-dir":
                next(args, None)
            elif isinstance(cmd, click.Group) and arg in cmd.commands:
                cmd = cmd.commands[arg]
                path.append(arg)
            elif not arg.startswith("-"):
                break
        return tuple(path)


def _split(line: str) -> list[tuple[str, ...]]:
    """The commands one documented line gives (none if it is not one)."""
    line = line.strip().removeprefix("Example:").strip()
    remark = re.search(r"\s{2,}\((.*)\)\s*$", line)
    found = []
    if remark:
        line = line[: remark.start()]
        alternative = remark.group(1).removeprefix("or:").strip()
        if remark.group(1).startswith("or:") and alternative.startswith("npuemu "):
            found += _split(alternative)
    if line.startswith(("npuemu ", "make ")) or line in ("npuemu", "make"):
        found.append(tuple(shlex.split(line, comments=True)))
    return found


def _walk(cmd: click.Command, path: tuple[str, ...] = ("npuemu",)):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _walk(sub, (*path, name))


def help_examples() -> list[tuple[tuple[str, ...], str]]:
    found = []
    for path, cmd in _walk(main):
        for line in inspect.cleandoc(cmd.help or "").splitlines():
            found += [(argv, f"{' '.join(path)} --help") for argv in _split(line)]
    return found


def readme_sections() -> dict[str, str]:
    sections, title = {}, None
    for line in README.read_text().splitlines(keepends=True):
        if line.startswith("## "):
            title = line[3:].strip()
            sections[title] = ""
        elif title is not None:
            sections[title] += line
    return sections


def readme_guides() -> tuple[list[tuple[tuple[str, ...], str]], dict[str, str]]:
    """The guides' commands, the app files of the app developer's guide and the policy engineer's ``mine.py``."""
    sections = readme_sections()
    missing = [g for g in GUIDES if g not in sections]
    assert not missing, f"README.md has no section {missing}: say in GUIDES where the guides went"
    found, files = [], {}
    for title in GUIDES:
        prose: list[str] = []
        fence = None
        for line in sections[title].splitlines():
            if line.startswith("```"):
                if fence is None:
                    fence, block = line[3:].strip(), []
                    continue
                if fence in ("xml", "python") and title == "An app developer's guide":
                    files[{"xml": "AndroidManifest.xml", "python": "main.py"}[fence]] = "\n".join(block) + "\n"
                if fence == "python" and title == "A policy engineer's guide":
                    files["mine.py"] = "\n".join(block) + "\n"
                fence = None
                continue
            if fence is not None:
                block.append(line)
                if fence in ("", "sh", "console"):
                    found += [(argv, f"README: {title}") for argv in _split(line)]
            elif not line.lstrip().startswith("|"):
                prose.append(line)
        for span in re.findall(r"`([^`]+)`", " ".join(prose)):
            found += [(argv, f"README: {title}") for argv in _split(span)]
    return found, files


def _names_a_command(argv: tuple[str, ...]) -> bool:
    """``npuemu launch`` in a sentence names the command; alone it is no example (it needs APPS)."""
    cmd = main
    for word in argv[1:]:
        if not (isinstance(cmd, click.Group) and word in cmd.commands):
            return False
        cmd = cmd.commands[word]
    return any(isinstance(p, click.Argument) and p.required for p in cmd.params)


def all_examples() -> list[Example]:
    readme, _ = readme_guides()
    by_argv: dict[tuple[str, ...], Example] = {}
    for argv, source in help_examples() + readme:
        if _names_a_command(argv):
            continue
        example = by_argv.setdefault(argv, Example(argv, []))
        if source not in example.sources:
            example.sources.append(source)
    return sorted(by_argv.values(), key=_phase)  # a stable sort: the documents' order within a phase


def _streams(ex: Example) -> bool:
    return (ex.command == ("boot",) and "--detach" not in ex.argv) or (ex.command == ("logcat",) and "-d" not in ex.argv)


def _phase(ex: Example) -> int:
    """When the example runs: see the module docstring."""
    c = ex.command
    if c == ("make", "driver"):
        return 0
    if c[:1] in (("make",), ("version",), ("bench",), ("vts",), ("demo",)) or (c == ("boot",) and _streams(ex)) \
            or (c == ("nn", "plan") and "--offline" in ex.argv):
        return 1
    return {("boot",): 2, ("launch",): 3, ("am", "kill"): 5, ("am", "launch"): 6, ("shutdown",): 7}.get(c, 4)


EXAMPLES = all_examples()


# -- the scratch directory, the emulator -----------------------------------------------


@dataclasses.dataclass
class Scratch:
    work: Path
    emulator: Path  # this module's emulator ($NPUEMU_RUNTIME_DIR)

    def env(self, runtime_dir: Path | None = None) -> dict[str, str]:
        return {**os.environ, "NPUEMU_RUNTIME_DIR": str(runtime_dir or self.emulator)}

    def runtime_dirs(self) -> list[Path]:
        return [p.parent for p in self.work.rglob("init.json")] + [self.emulator]


def _make_driver(src: Path, out: Path) -> None:
    subprocess.run(["make", "-s", "-C", str(ROOT), "driver", f"SRC={src}", f"OUT={out}"], check=True,
                   capture_output=True, timeout=120)


def _ours(pid: int, runtime_dir: Path) -> bool:
    """Whether ``pid`` still is a process of the emulator in ``runtime_dir`` (not a reused pid)."""
    try:
        seen = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return os.fsencode(runtime_dir) in seen and pid_alive(pid)


def _stop(runtime_dir: Path) -> None:
    """Shut an emulator down if one runs there, and make sure none of its processes is left."""
    try:
        state = json.loads(RuntimeFiles(runtime_dir).state.read_text())
    except (OSError, ValueError):
        return
    if RuntimeFiles(runtime_dir).read_state() is not None:
        subprocess.run([NPUEMU, "shutdown", "--runtime-dir", str(runtime_dir)], capture_output=True, timeout=60)
    for pid in [state.get("init_pid"), *state.get("pids", {}).values()]:
        if pid and _ours(pid, runtime_dir):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    work = tmp_path_factory.mktemp("examples")
    (work / "path" / "to").mkdir(parents=True)
    shutil.copy(TEMPLATE, work / "path" / "to" / "mydriver.c")
    (work / "build" / "drivers").mkdir(parents=True)
    _make_driver(work / "path" / "to" / "mydriver.c", work / "build" / "drivers" / "mydriver.so")
    shutil.copy(work / "build" / "drivers" / "mydriver.so", work / "build" / "drivers" / "mine.so")
    phone = (ROOT / "bench" / "workloads" / "phone.toml").read_text()
    (work / "my.toml").write_text(re.sub(r'(?m)^device = "emu-npu"', 'device = "tmpl-npu"',
                                         phone.replace('name = "phone"', 'name = "my"', 1)))
    _, files = readme_guides()
    (work / "myapp").mkdir()
    (work / "mine.py").write_text(files.pop("mine.py"))  # the policy engineer's guide's policy
    for name, text in files.items():
        (work / "myapp" / name).write_text(text)
    # the app's own AIDL, which `npuemu aidl myapp/aidl --package myapp.aidl` compiles
    aidl = work / "myapp" / "aidl" / "com" / "example" / "myapp"
    aidl.mkdir(parents=True)
    (aidl / "IFrameListener.aidl").write_text(
        "package com.example.myapp;\n\n"
        "import android.hardware.npu.WorkInfo;\n\n"
        "oneway interface IFrameListener {\n"
        "    void onFrame(int frame, in WorkInfo work);\n"
        "}\n")
    (work / "tmp").mkdir()
    s = Scratch(work, work / "emu")
    try:
        yield s
    finally:
        for runtime_dir in s.runtime_dirs():
            _stop(runtime_dir)


def _booted(s: Scratch) -> None:
    """This module's emulator runs (run alone, an example that needs it would find none)."""
    if RuntimeFiles(s.emulator).read_state() is None:
        subprocess.run([NPUEMU, "boot", "--detach"], env=s.env(), capture_output=True, check=True, timeout=60)


class Background:
    """The demos (``_background``), run beside the other examples that need no emulator."""

    def __init__(self, s: Scratch, examples: list[Example], documented_demo) -> None:
        self.scratch, self.examples, self.documented_demo = s, examples, documented_demo
        self.procs: dict[str, tuple[subprocess.Popen, Path]] = {}

    def start(self) -> None:
        for ex in self.examples:
            argv = _argv(ex, self.scratch)
            if ex.argv == ("npuemu", "demo"):  # the suite's one run of it, the same command
                assert self.documented_demo.argv == tuple(argv), (self.documented_demo.argv, argv)
                self.documented_demo.start()
            elif ex.text not in self.procs:
                out = self.scratch.work / f"background{len(self.procs)}"
                with open(out.with_suffix(".out"), "w") as stdout, open(out.with_suffix(".err"), "w") as stderr:
                    proc = subprocess.Popen(argv, cwd=self.scratch.work, env=self.scratch.env(), stdout=stdout,
                                            stderr=stderr)
                self.procs[ex.text] = proc, out

    def wait(self, ex: Example) -> tuple[int, str, str]:
        self.start()
        if ex.argv == ("npuemu", "demo"):
            result = self.documented_demo.wait(TIMEOUT_S["demo"])
            return result.returncode, result.stdout, result.stderr
        proc, out = self.procs[ex.text]
        proc.wait(timeout=TIMEOUT_S["demo"])
        return proc.returncode, out.with_suffix(".out").read_text(), out.with_suffix(".err").read_text()

    def stop(self) -> None:
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _background(ex: Example) -> bool:
    return ex.command == ("demo",)


@pytest.fixture(scope="module")
def background(scratch: Scratch, request: pytest.FixtureRequest):
    """The selected demo examples, started by the first example that needs no emulator."""
    selected = [item.callspec.params["ex"] for item in request.session.items
                if item.path == Path(__file__) and item.originalname == "test_the_documented_example_runs"]
    examples = [ex for ex in selected if _background(ex)]
    bg = Background(scratch, examples, request.getfixturevalue("documented_demo") if examples else None)
    try:
        yield bg
    finally:
        bg.stop()


# -- running one example -----------------------------------------------------------------


def _argv(ex: Example, s: Scratch) -> list[str]:
    """The example as this test runs it (see the module docstring)."""
    argv = [str(s.work / "tmp" / a.removeprefix("/tmp/")) if a.startswith("/tmp/") else a for a in ex.argv]
    if argv[0] == "npuemu":
        argv[0] = NPUEMU
        if ex.command == ("demo",) and "--seconds" not in argv:
            argv += FAST_DEMO
        return argv
    if ex.command == ("make", "driver"):
        args = {a.partition("=")[0]: a.partition("=")[2] for a in argv[2:] if "=" in a}
        src = s.work / args["SRC"]
        out = s.work / (args.get("OUT") or f"build/drivers/{src.stem}.so")
        return ["make", "-C", str(ROOT), "driver", f"SRC={src}", f"OUT={out}"]
    return ["make", "-n", "-C", str(ROOT), *argv[1:]]


def _run(argv: list[str], s: Scratch, timeout: float, runtime_dir: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=s.work, env=s.env(runtime_dir), capture_output=True, text=True, timeout=timeout)


def _stream(ex: Example, argv: list[str], s: Scratch) -> tuple[int, str, str]:
    """Start a command that runs until Ctrl-C, check it works, then press Ctrl-C."""
    runtime_dir = s.work / f"stream{len(list(s.work.glob('stream*')))}" if ex.command == ("boot",) else s.emulator
    out, err = runtime_dir.with_suffix(".out"), runtime_dir.with_suffix(".err")
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(argv, cwd=s.work, env=s.env(runtime_dir), stdout=stdout, stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        if ex.command == ("boot",):
            while _run([NPUEMU, "devices"], s, 30, runtime_dir).returncode != 0:
                assert proc.poll() is None and time.monotonic() < deadline, f"{ex.text} did not boot: {err.read_text()}"
                time.sleep(0.3)
            if "--driver" in argv:  # the template's device, and the driver guide's next step works on it
                devices = _run([NPUEMU, "devices"], s, 30, runtime_dir).stdout
                assert "tmpl-npu" in devices, devices
                inference = _run([NPUEMU, "run-test-inference", "--job-priority", "250"], s, 60, runtime_dir)
                assert inference.returncode == 0 and "COMPLETED" in inference.stdout, inference.stdout + inference.stderr
        else:
            while not out.read_text().strip():
                assert proc.poll() is None and time.monotonic() < deadline, f"{ex.text} printed nothing"
                time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if ex.command == ("boot",):
            _stop(runtime_dir)
    if ex.command == ("boot",):
        assert RuntimeFiles(runtime_dir).read_state() is None, "Ctrl-C left the emulator running"
    return code, out.read_text(), err.read_text()


def _check_output(ex: Example, out: str) -> None:
    """What a few examples must print, beyond exiting 0."""
    if ex.command == ("demo",) and "--driver" in ex.argv:
        assert '"tmpl-npu"' in out or " tmpl-npu" in out, out  # its apps ran on the template's device
    if ex.command == ("make", "demo"):
        assert "npuemu demo" in out, out
    if ex.command == ("make", "test"):
        assert "pytest" in out, out


@pytest.mark.parametrize("ex", EXAMPLES, ids=[ex.text for ex in EXAMPLES])
def test_the_documented_example_runs(ex: Example, scratch: Scratch, background: Background):
    if _phase(ex) >= 1:  # the driver is built
        background.start()
    if _phase(ex) >= 3:
        _booted(scratch)
    argv = _argv(ex, scratch)
    where = " and ".join(ex.sources)
    if _streams(ex):
        code, out, err = _stream(ex, argv, scratch)
        assert code in (0, 130), f"{ex.text} ({where}) exited {code} at Ctrl-C:\n{err}"
    elif _background(ex):
        code, out, err = background.wait(ex)
        assert code == 0, f"{ex.text} ({where}) exited {code}:\n{out[-2000:]}\n{err[-2000:]}"
    else:
        timeout = TIMEOUT_S.get(next(iter(ex.command), ""), 60)
        result = _run(argv, scratch, timeout)
        code, out, err = result.returncode, result.stdout, result.stderr
        assert code == 0, f"{ex.text} ({where}) exited {code}:\n{out[-2000:]}\n{err[-2000:]}"
    assert "Traceback" not in err, f"{ex.text} ({where}):\n{err}"
    _check_output(ex, out)


def test_the_examples_are_found():
    """The reading above finds what the documents hold (so an empty list cannot pass)."""
    texts = {ex.text for ex in EXAMPLES}
    assert {"npuemu boot --detach", "npuemu demo", "npuemu launch ./myapp --importance visible",
            "make driver SRC=path/to/mydriver.c", "npuemu demo --driver build/drivers/mydriver.so",
            "npuemu logcat -s NpuManagerService", "npuemu --runtime-dir /tmp/emu2 devices"} <= texts
    assert all("#" not in ex.text for ex in EXAMPLES)
    _, files = readme_guides()
    assert set(files) == {"AndroidManifest.xml", "main.py", "mine.py"} and "async def main(context)" in files["main.py"]
    assert "class MyPolicy(NpuPolicy):" in files["mine.py"]
    phases = [_phase(ex) for ex in EXAMPLES]
    assert phases == sorted(phases) and phases[0] == 0 and phases[-1] == 7


def test_a_documented_line_is_read_as_a_user_reads_it():
    assert _split("npuemu boot --detach        # start an emulator") == [("npuemu", "boot", "--detach")]
    assert _split("Example: npuemu trace --out /tmp/run.json   (then open it in ui.perfetto.dev)") == [
        ("npuemu", "trace", "--out", "/tmp/run.json")]
    assert _split("Example: npuemu version   (or: npuemu --version)") == [
        ("npuemu", "--version"), ("npuemu", "version")]
    assert _split("npuemu nn plan --offline --enabled-devices 'emu-(gpu|dsp)'") == [
        ("npuemu", "nn", "plan", "--offline", "--enabled-devices", "emu-(gpu|dsp)")]
    assert _split("make driver SRC=x.c") == [("make", "driver", "SRC=x.c")]
    assert _split("its traceback is in `npuemu logcat --pid PID`.") == []
    assert Example(("npuemu", "--runtime-dir", "/tmp/x", "am", "kill", "p"), []).command == ("am", "kill")
    assert Example(("make", "-n", "demo"), []).command == ("make", "demo")
    assert _names_a_command(("npuemu", "launch")) and _names_a_command(("npuemu", "am", "kill"))
    assert not _names_a_command(("npuemu", "trace")) and not _names_a_command(("npuemu", "launch", "camera"))
