"""A policy engineer's own npu load policy: loaded from a file, checked, survived, shown.

The sample policies are files in ``tests/npu_policies`` (``smallest_first.py`` a good
one, ``broken.py`` two with bugs), loaded as ``--npu-policy-file`` loads them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner

from framework.cli import main
from framework.emulator import RuntimeFiles
from framework.emulator._reaper import kill_boot
from framework import lab
from framework.lab import check_policy
from framework.npumanager import NpuManager
from framework.server import (
    CanLoad,
    Log,
    NpuArbiter,
    PolicyError,
    PolicyLoadError,
    RequestComplete,
    load_policy,
    policy_source,
)
from test_server_support import Recorder, ask, request, world  # noqa: F401

POLICIES = Path(__file__).parent / "npu_policies"
GOOD = f"{POLICIES / 'smallest_first.py'}:SmallestFirst"
GREEDY = f"{POLICIES / 'broken.py'}:Greedy"
RAISES = f"{POLICIES / 'broken.py'}:Raises"
NOW = NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW
NOT = NpuManager.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED
S, M, L = 0, 1, 2
A, B, C = 10001, 10002, 10003


def calls(actions):
    return [x for x in actions if not isinstance(x, Log)]


def arbiter(spec, params=None, **kw):
    a = NpuArbiter(policy=load_policy(spec, params), **kw)
    for uid in (A, B, C):
        a.importance_changed(uid, 100, 0.0)
    return a


# ---------------------------------------------------------------- loading


def test_a_policy_loads_from_its_file_with_its_params_and_says_where_it_came_from():
    p = load_policy(GOOD, {"maxBudget": 3})
    assert p.name == "smallest-first" and p.max_budget == 3 and p.params() == {"maxBudget": 3}
    assert policy_source(p) == GOOD
    assert type(load_policy(GOOD)) is type(p)  # the same file is one module, whatever loads it


@pytest.mark.parametrize("spec, params, says", [
    ("smallest_first.py", None, "FILE.py:CLASS"),
    ("nope.py:X", None, "does not exist"),
    ("smallest_first.py:Nope", None, "has no class Nope"),
    ("smallest_first.py:IllegalArgumentException", None, "not a subclass of framework.server.NpuPolicy"),
    ("smallest_first.py:SmallestFirst", {"maxBudget": 0}, "from_params"),
    ("smallest_first.py:SmallestFirst", {"budget": 2}, "from_params"),
])
def test_a_policy_that_will_not_load_says_why(spec, params, says):
    with pytest.raises(PolicyLoadError, match=says):
        load_policy(str(POLICIES / spec), params)


def test_a_policy_that_declares_a_bad_budget_is_refused_at_load(tmp_path):
    bad = tmp_path / "weights.py"
    bad.write_text("from framework.server import NpuPolicy\n\n"
                   "class P(NpuPolicy):\n    def weight(self, size):\n        return 0\n")
    with pytest.raises(PolicyLoadError, match="weight\\(\\) must give positive ints"):
        load_policy(f"{bad}:P")


def test_a_policy_file_that_fails_to_import_says_so(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import no_such_module_here\n")
    with pytest.raises(PolicyLoadError, match="failed to import: ModuleNotFoundError"):
        load_policy(f"{bad}:P")


# ---------------------------------------------------------------- deciding


def test_the_sample_policy_grants_the_lightest_waiting_request_when_budget_frees():
    a = arbiter(GOOD, {"maxBudget": 4})
    assert calls(a.request_can_load(A, 1, L, 0, 0.0)) == [CanLoad(A, 1, NOW)]
    assert calls(a.request_can_load(B, 1, M, 0, 1.0)) == [CanLoad(B, 1, NOT)]
    assert calls(a.request_can_load(C, 1, S, 0, 2.0)) == [CanLoad(C, 1, NOT)]
    a.notify_loaded(A, 1, 3.0)
    # A's 4 free: the lightest first, C's small one (1), though B (2) asked earlier; then B fits too.
    out = calls(a.notify_unloaded(A, 1, 4.0))
    assert out[0] == RequestComplete(A, 1, NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE)
    assert out[1:] == [CanLoad(C, 1, NOW), CanLoad(B, 1, NOW)]
    assert a.dump(5.0)["policy"] == {"id": 100, "name": "smallest-first", "params": {"maxBudget": 4},
                                     "source": GOOD, "errors": []}


def test_setpolicy_can_go_back_to_a_loaded_policy_by_its_id():
    a = arbiter(GOOD)
    a.set_policy(NpuManager.NPU_MODEL_POLICY_BUDGET, None, 0.0)
    a.set_policy(100, {"maxBudget": 2}, 1.0)
    assert a.policy.name == "smallest-first" and a.policy.max_budget == 2


# ---------------------------------------------------------------- surviving a broken one


def test_a_policy_that_raises_is_reported_with_its_event_and_the_service_carries_on():
    a = arbiter(RAISES)
    out = a.request_can_load(A, 1, L, 0, 1.5)
    assert calls(out) == [CanLoad(A, 1, NOW)]  # the fallback: the status quo's answer
    (line,) = [x for x in out if isinstance(x, Log)]
    assert line.level == "E" and "raised KeyError: 2" in line.message
    assert "requestCanLoadModel(uid 10001, id 1, size 2, priority 0)" in line.message
    assert calls(a.request_can_load(B, 1, S, 0, 2.0)) == [CanLoad(B, 1, NOW)]  # and it decides again
    (error,) = a.dump(3.0)["policy"]["errors"]
    assert error == {"at": 1.5, "event": "requestCanLoadModel(uid 10001, id 1, size 2, priority 0)",
                     "invariant": None, "error": "KeyError: 2"}
    assert a.dump(3.0)["counters"]["policy_errors"] == 1


def test_an_action_that_breaks_an_invariant_is_refused_and_the_fallback_keeps_the_budget():
    a = arbiter(GREEDY)
    assert calls(a.request_can_load(A, 1, S, 0, 0.0)) == [CanLoad(A, 1, NOW)]
    out = a.request_can_load(B, 1, S, 0, 1.0)
    assert calls(out) == [CanLoad(B, 1, NOT)]  # granting would exceed the declared budget of 1
    (line,) = [x for x in out if isinstance(x, Log)]
    assert "broke invariant budget" in line.message and "left waiting by the fallback" in line.message
    assert a.budget()["in_use"] == 1
    assert a.dump(1.0)["policy"]["errors"][0]["invariant"] == "budget"


def test_a_strict_arbiter_raises_the_policy_error_with_its_event():
    a = arbiter(GREEDY, strict=True)
    a.request_can_load(A, 1, S, 0, 0.0)
    with pytest.raises(PolicyError, match="broke invariant budget.*at event requestCanLoadModel") as info:
        a.request_can_load(B, 1, S, 0, 1.0)
    assert info.value.invariant == "budget"


# ---------------------------------------------------------------- check-policy


def test_check_policy_passes_the_sample_policy_and_fails_a_greedy_one_naming_the_invariant():
    assert check_policy(lambda: load_policy(GOOD), examples=40).ok
    bad = check_policy(lambda: load_policy(GREEDY), examples=40)
    assert not bad.ok and bad.invariant == "budget"
    assert "requestCanLoadModel" in bad.error
    assert bad.steps.count("request") >= 2  # two requests are the least that break a budget of one


def test_npuemu_lab_check_policy_prints_ok_or_the_violated_invariant():
    runner = CliRunner()
    good = runner.invoke(main, ["lab", "check-policy", GOOD, "--examples", "20"])
    assert good.exit_code == 0 and good.stdout.startswith("ok: policy smallest-first kept every invariant")
    bad = runner.invoke(main, ["lab", "check-policy", RAISES, "--examples", "20"])
    assert bad.exit_code == 1
    assert "FAILED: policy raises broke invariant 'exception'" in bad.stdout and "KeyError" in bad.stdout
    assert "inputs (shortest sequence found):" in bad.stdout and "size=2" in bad.stdout
    missing = runner.invoke(main, ["lab", "check-policy", "nope.py:X"])
    assert missing.exit_code == 2 and "does not exist" in missing.stderr


# ---------------------------------------------------------------- in the service


async def test_the_service_survives_a_raising_policy_and_dumpsys_shows_the_error(autojump_clock, world, caplog):
    await world.start_hal()
    system = await world.start_system(npu_policy=load_policy(RAISES))
    with trio.fail_after(5):
        await system.npu.wait_hal_connected()
    app = await world.launch("com.test.fg")
    rec = Recorder()
    with caplog.at_level(logging.ERROR):
        await ask(world, app, request(7, L), rec)
    assert rec.statuses(7)[0] == ("can_load", 7, NOW)  # granted by the fallback
    uid = app.context.getUid()
    assert any(f"requestCanLoadModel(uid {uid}, id 7, size 2, priority 0)" in r.getMessage()
               and "raised KeyError" in r.getMessage() for r in caplog.records)
    text = system.npu.dump_text()
    assert "Policy: raises" in text and f"From: {RAISES}" in text
    assert "Policy errors: 1" in text and "raised KeyError: 2" in text
    rec2 = Recorder()
    await ask(world, app, request(8, S), rec2)  # and it serves the next request as the policy says
    assert rec2.statuses(8)[0] == ("can_load", 8, NOW)


@pytest.mark.multiprocess
def test_boot_with_a_policy_file_and_dumpsys_shows_it(tmp_path):
    root = tmp_path / "emu"
    runner = CliRunner()
    bad = runner.invoke(main, ["boot", "--detach", "--runtime-dir", str(root), "--npu-policy-file", "nope.py:X"])
    assert bad.exit_code == 2 and "does not exist" in bad.stderr
    result = runner.invoke(main, ["boot", "--detach", "--runtime-dir", str(root), "--npu-policy-file", GOOD,
                                  "--npu-policy-params", '{"maxBudget": 2}'])
    assert result.exit_code == 0, result.output + result.stderr
    state = RuntimeFiles(root).read_state()
    try:
        text = runner.invoke(main, ["dumpsys", "npu", "--runtime-dir", str(root)])
        assert text.exit_code == 0, text.output
        assert "Policy: smallest-first  maxBudget=2" in text.stdout
        assert f"From: {GOOD}" in text.stdout and "Budget: max 2" in text.stdout
        data = json.loads(runner.invoke(main, ["dumpsys", "npu", "--json", "--runtime-dir", str(root)]).stdout)
        assert data["policy"]["source"] == GOOD and data["policy"]["params"] == {"maxBudget": 2}
    finally:
        runner.invoke(main, ["shutdown", "--runtime-dir", str(root)])
        kill_boot(state["boot_id"])


# ---------------------------------------------------------------- in the lab


@pytest.mark.slow
def test_the_lab_runs_a_users_policy_and_reports_its_failures_with_their_events():
    from test_lab_stack import policies, workload

    report = lab.run_workload(workload(), policies("fcfs"), sweep=False, whole_stack=True,
                              npu_policy=load_policy(f"{POLICIES / 'broken.py'}:RaisesForCached"))
    assert report.npu_policy == f"raises-for-cached ({POLICIES / 'broken.py'}:RaisesForCached)"
    (run,) = report.nominal
    assert run["completed"] == run["requests"] > 20  # the fallback granted the cached app's loads
    assert run["npu_policy_errors"] >= 1
    assert "requestCanLoadModel(uid" in run["npu_policy_latest_errors"][0]
    assert "RuntimeError: no rule for importance 400" in run["npu_policy_latest_errors"][0]
    text = lab.format_report(report)
    assert "the npu policy failed" in text and "raises-for-cached" in text and "no rule for importance" in text
