"""`npuemu demo`, the real thing, once: every process, every app, the whole scenario.

The run is the quick start's ``npuemu demo`` (conftest's ``documented_demo``, which
test_examples runs that example through too: one real run of the demo for both). It
asserts what the issue promises a user: that each app did its part (loads, unload
requests honoured or ignored, results checked), that preemption, revocation, the legacy
refusal and the thermal spike happened, and that the summary, the trace and the plot were
written and are what they claim to be. ``--json`` prints that same summary, checked in
process on the real run's summary.
"""

from __future__ import annotations

import collections
import json

import pytest
from click.testing import CliRunner

from apps._kit import FRAME_LOOP
from framework.cli import main
from framework.cli import _demo

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]


@pytest.fixture(scope="module")
def demo(documented_demo):
    result = documented_demo.wait()
    summary = json.loads((documented_demo.out_dir / "summary.json").read_text())
    return result, summary, documented_demo.out_dir


def test_demo_exits_0_and_every_check_passed(demo):
    result, summary, _ = demo
    failed = [c for c in summary["checks"] if not c["passed"]]
    assert not failed, failed
    assert summary["ok"] is True
    assert result.returncode == 0, result.stderr[-3000:]
    assert "demo: booted in" in result.stderr  # progress goes to stderr, the summary to stdout
    assert "Traceback" not in result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("npuemu demo: ") and f"{summary['jobs']} NPU jobs" in lines[0], lines[0]
    assert lines[-1] == f"{len(summary['checks'])} passed, 0 failed"
    for check in summary["checks"]:
        assert f"  PASS {check['name']}: {check['detail']}" in lines


def test_demo_json_has_the_promised_keys(demo):
    _, s, _ = demo
    for key in ("apps", "preemptions", "resumes", "thermal_max_severity", "revocations", "blocked_or_warned",
                "duration_s"):
        assert key in s
    assert set(s["apps"]) == {"camera", "photos", "rogue", "legacy", "assistant"}
    for name, a in s["apps"].items():
        for key in ("loads", "unload_requests", "unloads", "inferences", "results_ok", "p50_ms", "p99_ms"):
            assert key in a, (name, key)
        assert a["inferences"] > 0 and a["results_ok"] == a["inferences"], name
    assert 0 < s["duration_s"] < 120


def test_demo_story(demo):
    _, s, _ = demo
    apps = s["apps"]
    assert apps["photos"]["unloads"] == apps["photos"]["unload_requests"] >= 2
    assert apps["rogue"]["unload_requests"] >= 1 and apps["rogue"]["unloads"] == 0 and apps["rogue"]["revoked"] >= 1
    assert 1 in apps["assistant"]["statuses"] and apps["assistant"]["statuses"][-1] == 0  # WAIT_FOR_UNLOAD, then CAN_LOAD_NOW
    assert apps["legacy"]["devices"] == ["nnapi-reference"] and apps["legacy"]["loads"] == 0
    assert s["revocations"] >= 1 and s["blocked_or_warned"] >= 1
    assert s["preemptions"] >= 1 and s["resumes"] >= 1
    assert s["thermal_max_severity"] >= 4


def test_demo_writes_a_trace_and_a_plot(demo):
    _, s, out = demo
    trace = json.loads((out / "trace.json").read_text())
    jobs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "npu.job"]
    assert {e["name"].split()[0] for e in jobs} >= {f"com.example.npuemu.{app}" for app in ("camera", "photos", "rogue", "assistant")}
    on_cpu = collections.Counter(e["name"] for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "cpu")
    whys = {e["args"].get("why") for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "cpu"}
    # legacy runs on nnapi-reference; camera, photos and the assistant run their CPU
    # references there (planned, never a fallback), each distinct input once: the
    # camera's one-second loop of frames, one step each.
    assert set(on_cpu) == {f"com.example.npuemu.{app}" for app in ("legacy", "camera", "photos", "assistant")}
    assert whys == {"planned"} and on_cpu["com.example.npuemu.camera"] == FRAME_LOOP
    assert sum(1 for e in trace["traceEvents"] if e.get("cat") == "npu.preemption") >= 2
    png = (out / "timeline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert s["plot"] == str(out / "timeline.png") and (out / "recording" / "trace.jsonl").is_file()


@pytest.mark.parametrize("ok", [True, False])
def test_demo_json_prints_the_summary_and_exits_by_its_checks(demo, monkeypatch, tmp_path, ok):
    """``--json``: the summary alone on stdout (progress on stderr), exit 1 if a check failed."""
    _, s, _ = demo
    summary = {**s, "ok": ok}
    seen = {}

    async def run_demo(*, seconds, out_dir, driver, progress):
        seen.update(seconds=seconds, out_dir=out_dir, driver=driver)
        progress("booted in 0.1 s")
        return summary

    monkeypatch.setattr(_demo, "run_demo", run_demo)
    result = CliRunner().invoke(main, ["demo", "--json", "--seconds", "9", "--out-dir", str(tmp_path)])
    assert json.loads(result.stdout) == summary
    assert result.stderr == "demo: booted in 0.1 s\n"
    assert seen == {"seconds": 9.0, "out_dir": str(tmp_path), "driver": None}
    assert result.exit_code == (0 if ok else 1)
