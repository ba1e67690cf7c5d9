"""``npuemu vts`` and ``npuemu run-test-inference``.

A vts run boots real processes (a servicemanager and the HAL, restarted after
every crash or hang), so each driver is run exactly once: the module-scoped
``reports`` fixture runs vts on every deliberately broken driver of tests/drivers/
(each the template or the reference driver with one realistic bug; most given as
source, which vts builds twice, a few built with ``make driver`` and judged against
an older build) and on the template, a few at a time, in child processes
(``npuemu vts --json``'s library call); the tests then read the reports: each
broken driver fails exactly the checks its bug names, with a sentence that says
what was expected and what was seen. The click commands themselves are tested
with CliRunner on the reference driver and on quick error paths.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import trio
from click.testing import CliRunner

from framework.cli._vts import run_test_inference, vts
from framework.vts import _suite as _vts
from framework.vts import (
    CHECK_NAMES,
    GenCase,
    Tensor,
    VtsCheckResult,
    VtsReport,
    default_cases_path,
    load_cases,
    model_of,
    sources_digest,
    write_cases,
)
from framework.vts._builds import build_identity
from framework.vts._cases import compare_outputs

# The reports fixture's runs take half a minute: under xdist the module starts first.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
DRIVERS = ROOT / "tests" / "drivers"
TEMPLATE = ROOT / "csrc" / "drivers" / "template" / "template.c"

# Large enough for the slowest check (two real-clock inferences back to back,
# under two seconds) on a loaded machine.
CHECK_TIMEOUT_S = 8.0
# The hanging driver's: each check that runs work waits this long.
HANG_CHECK_TIMEOUT_S = 2.5
# A hard bound on one child vts run: reaching it is a failure of vts itself.
RUN_BOUND_S = 400.0
PARALLEL_RUNS = 5

#: The checks that run work on a device (a test inference or an execution).
WORK_CHECKS = {
    "NpuSchedulingAidl.RunInferenceStatusCallbacks",
    "NpuSchedulingAidl.RunInferenceEffectivePriority",
    "NpuSchedulingAidl.RunInferencesPrioritized",
    "NpuSchedulingAidl.RunInferenceFailsWithoutDirectAccess",
    "NpuSchedulingAidl.RunInferenceFailsWithoutAttributeOtherUid",
    "NpuSchedulingAidl.PrioritiesValidatedAcrossRange",
    "NpuSchedulingAidl.EffectivePriorityFormula",
    "NpuSchedulingAidl.SetReplacesUpdateMerges",
    "NpuSchedulingAidl.RunInferenceAttributedToOtherUid",
    "NpuSchedulingAidl.RunInferencesBackToBack",
    "NpuSchedulingAidl.CancelledWorkEvents",
    "NpuSchedulingAidl.WorkDeviceNumber",
    "NpuSchedulingAidl.PreemptedWorkResumesIntact",
    "NeuralnetworksHidlTest.ValidateRequest",
    "NeuralnetworksHidlTest.ClaimedModelsPrepare",
    "NeuralnetworksHidlTest.GeneratedTests",
}
#: Of those, the ones whose work the driver refuses before it runs.
REFUSED_WORK_CHECKS = {
    "NpuSchedulingAidl.RunInferenceFailsWithoutDirectAccess",
    "NpuSchedulingAidl.RunInferenceFailsWithoutAttributeOtherUid",
}

# Each broken driver, and exactly the checks it must fail. The first group is issue
# 16's list of realistic single bugs, each failing the check that names it.
EXPECTED_FAILURES = {
    "priority_job_only": {"NpuSchedulingAidl.EffectivePriorityFormula"},
    "priority_half_job": {"NpuSchedulingAidl.EffectivePriorityFormula"},
    "priority_no_clamp": {"NpuSchedulingAidl.EffectivePriorityFormula"},
    "f16_weights": {"NeuralnetworksHidlTest.GeneratedTests"},
    "wrong_softmax": {"NeuralnetworksHidlTest.GeneratedTests"},
    "stale_input": {"NpuSchedulingAidl.PreemptedWorkResumesIntact"},
    "claims_unpreparable": {"NeuralnetworksHidlTest.ClaimedModelsPrepare"},
    "original_uid_as_uid": {"NpuSchedulingAidl.RunInferenceAttributedToOtherUid"},
    "device_number_zero": {"NpuSchedulingAidl.WorkDeviceNumber"},
    "duplicate_name": {"NeuralnetworksHidlTest.GetDeviceNameTest"},
    "status_always_available": {"Seed.StatusTruthful"},
    "update_as_set": {"NpuSchedulingAidl.SetReplacesUpdateMerges"},
    "version_cut": {"NeuralnetworksHidlTest.GetDeviceVersionStringTest"},
    "constant_version": {"Seed.VersionStringChangesWithBuild"},
    "work_id_off_by_one": WORK_CHECKS - REFUSED_WORK_CHECKS,
    # More single bugs a driver author makes.
    "sticky_group": {"NpuSchedulingAidl.RunInferencesBackToBack"},
    "supported_shifted": {"NeuralnetworksHidlTest.GetSupportedOperations"},
    "default_attribution": {"NpuSchedulingAidl.SetReplacesUpdateMerges"},
    "config_no_upper_bounds": {"NpuSchedulingAidl.PrioritiesValidatedAcrossRange"},
    "empty_set_ignored": {"NpuSchedulingAidl.SetReplacesUpdateMerges"},
    "job_priority_clamped": {"NpuSchedulingAidl.PrioritiesValidatedAcrossRange"},
    # Earlier ones.
    "bad_name": {"NeuralnetworksHidlTest.GetDeviceNameTest"},
    "empty_version": {"NeuralnetworksHidlTest.GetDeviceVersionStringTest", "Seed.VersionStringChangesWithBuild"},
    "ignores_priority": {
        "NpuSchedulingAidl.RunInferenceEffectivePriority",
        "NpuSchedulingAidl.RunInferencesPrioritized",
        "NpuSchedulingAidl.EffectivePriorityFormula",
        "NpuSchedulingAidl.PreemptedWorkResumesIntact",
    },
    "bad_events": {
        "NpuSchedulingAidl.RunInferenceStatusCallbacks",
        "NpuSchedulingAidl.RunInferenceAttributedToOtherUid",
        "NpuSchedulingAidl.RunInferencesBackToBack",
        "NpuSchedulingAidl.CancelledWorkEvents",
    },
    "no_direct_access": {"NpuSchedulingAidl.RunInferenceFailsWithoutDirectAccess"},
    # Its tmpl-multi runs work as its part, and says so.
    "bad_hetero": {"Seed.ValidDeviceTypes", "Seed.HeterogeneousPartsExposed", "NpuSchedulingAidl.WorkDeviceNumber"},
    "crash_in_execute": WORK_CHECKS,
    "hang_in_execute": WORK_CHECKS,
}

#: Run as a .so built by `make driver`, with an older build named as the previous
#: one (the other drivers are given as source: vts builds them twice).
AS_BUILT = ("bad_name", "empty_version", "ignores_priority", "no_direct_access", "crash_in_execute",
            "hang_in_execute", "duplicate_name")

_CHILD = textwrap.dedent(
    """
    import json, sys, trio
    from framework.vts import run_vts
    driver, previous, check_timeout = sys.argv[1], sys.argv[2] or None, float(sys.argv[3])
    report = trio.run(lambda: run_vts(driver, previous_build=previous, check_timeout=check_timeout, timeout=300))
    print(json.dumps(report.as_dict()))
    """
)


def _make_driver(src: Path, out: Path) -> Path:
    done = subprocess.run(
        ["make", "-s", "driver", f"SRC={src}", f"OUT={out}"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"make driver SRC={src} failed:\n{done.stderr}"
    return out


def _older_build(src: Path, out: Path) -> Path:
    """``src`` built as `make driver` does, but with another build id: the previous build."""
    argv = ["cc", "-std=c11", "-g", f"-I{ROOT / 'csrc' / 'include'}", "-O2", "-fPIC", "-shared",
            '-DNPU_BUILD_ID="older0000000"', str(src), "-o", str(out), "-lm"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module", autouse=True)
def generated_cases():
    """The generated cases vts runs, made (or found current) as `make install` does."""
    done = subprocess.run(["make", "-s", "vts-cases"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """The AS_BUILT drivers built once with `make driver`, as a driver author would, and
    each one's previous build."""
    out = tmp_path_factory.mktemp("drivers")
    return {
        name: (_make_driver(DRIVERS / f"{name}.c", out / f"{name}.so"),
               _older_build(DRIVERS / f"{name}.c", out / f"{name}.older.so"))
        for name in AS_BUILT
    }


@pytest.fixture(scope="module")
def reports(built) -> dict[str, VtsReport]:
    """One vts run per driver, a few at a time; each report as the CLI's JSON gives it."""
    runs = {name: (str(DRIVERS / f"{name}.c"), "") for name in EXPECTED_FAILURES}
    runs.update({name: (str(so), str(older)) for name, (so, older) in built.items()})
    runs["template"] = (str(TEMPLATE), "")
    # The slowest runs (a restart per check that runs work) first, so the others overlap them.
    slow_first = ["hang_in_execute", "crash_in_execute", "work_id_off_by_one"]
    pending = sorted(runs.items(), key=lambda item: item[0] not in slow_first)
    active: list[tuple[str, subprocess.Popen]] = []
    results: dict[str, VtsReport] = {}

    def finish(name: str, proc: subprocess.Popen) -> None:
        try:
            out, err = proc.communicate(timeout=RUN_BOUND_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"vts on {name} did not finish within {RUN_BOUND_S} s: vts itself hangs")
        assert proc.returncode == 0, f"vts on {name} crashed:\n{err[-3000:]}"
        data = json.loads(out.strip().splitlines()[-1])
        checks = tuple(VtsCheckResult(c["name"], c["passed"], c["detail"]) for c in data["checks"])
        results[name] = VtsReport(data["driver"], checks)

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    while pending or active:
        while pending and len(active) < PARALLEL_RUNS:
            name, (driver, previous) = pending.pop(0)
            timeout = HANG_CHECK_TIMEOUT_S if name == "hang_in_execute" else CHECK_TIMEOUT_S
            argv = [sys.executable, "-c", _CHILD, driver, previous, str(timeout)]
            active.append((name, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)))
        name, proc = active.pop(0)
        finish(name, proc)
    return results


def _failed(report: VtsReport) -> set[str]:
    return {r.name for r in report.results if not r.passed}


def _explain(report: VtsReport) -> str:
    return "\n".join(r.line() for r in report.results if not r.passed) or "(all passed)"


# ---- the drivers ------------------------------------------------------------------


def test_template_driver_passes_vts(reports):
    report = reports["template"]
    assert [r.name for r in report.results] == list(CHECK_NAMES)
    assert report.ok, _explain(report)
    assert report.summary() == f"{len(CHECK_NAMES)} passed, 0 failed"
    # Given as source, the version check really compared two builds.
    assert "two builds" in report.result("Seed.VersionStringChangesWithBuild").detail


@pytest.mark.parametrize("driver", sorted(EXPECTED_FAILURES))
def test_broken_driver_fails_exactly_its_check(reports, driver):
    report = reports[driver]
    assert [r.name for r in report.results] == list(CHECK_NAMES), "every check must be reported"
    assert _failed(report) == EXPECTED_FAILURES[driver], _explain(report)
    assert report.summary() == f"{len(CHECK_NAMES) - len(EXPECTED_FAILURES[driver])} passed, {len(EXPECTED_FAILURES[driver])} failed"


def test_bad_name_failure_names_the_device(reports):
    detail = reports["bad_name"].result("NeuralnetworksHidlTest.GetDeviceNameTest").detail
    assert "tmpl_dsp" in detail and "not exposed" in detail


def test_ignored_priorities_are_explained(reports):
    report = reports["ignores_priority"]
    assert "ignored" in report.result("NpuSchedulingAidl.RunInferenceEffectivePriority").detail
    assert "not honoured" in report.result("NpuSchedulingAidl.RunInferencesPrioritized").detail


def test_stray_work_is_seen_through_the_debounce(reports):
    detail = reports["bad_events"].result("NpuSchedulingAidl.RunInferenceStatusCallbacks").detail
    assert "CANCELLED_USER" in detail and "2 work(s)" in detail


def test_heterogeneous_rules_are_explained(reports):
    report = reports["bad_hetero"]
    assert "tmpl-multi manages devices [0, 7] but is ACCELERATOR, not OTHER" in report.result("Seed.ValidDeviceTypes").detail
    assert "device 7, which the driver does not describe" in report.result("Seed.HeterogeneousPartsExposed").detail


def test_crashing_driver_is_reported_as_a_crash(reports):
    report = reports["crash_in_execute"]
    for name in WORK_CHECKS:
        detail = report.result(name).detail
        assert "died" in detail and "SIGABRT" in detail, detail
    # The HAL was restarted after each crash: the checks after them still ran and passed.
    assert report.result("NeuralnetworksHidlTest.StatusTest").passed


def test_hanging_driver_is_reported_as_a_hang_within_the_check_timeout(reports):
    report = reports["hang_in_execute"]
    for name in WORK_CHECKS:
        detail = report.result(name).detail
        assert "hangs" in detail, detail
    # One bound per check, or the generated tests' one bound per execution.
    assert f"within {HANG_CHECK_TIMEOUT_S:g} s" in report.result("NpuSchedulingAidl.RunInferencesPrioritized").detail
    assert report.result("NpuFeature.ImplementsHal").passed


def test_a_work_id_bug_is_named_as_such(reports):
    report = reports["work_id_off_by_one"]
    for name in WORK_CHECKS - REFUSED_WORK_CHECKS:
        detail = report.result(name).detail
        assert "work-id bug" in detail and "hang" not in detail and "not honoured" not in detail, detail
    # It says what it saw: the work's events, ended COMPLETED, under the driver's own id.
    assert "ended(COMPLETED) of work 1" in report.result("NpuSchedulingAidl.RunInferenceStatusCallbacks").detail


def test_unchanged_version_string_fails_when_built_twice(reports):
    report = reports["constant_version"]
    assert _failed(report) == {"Seed.VersionStringChangesWithBuild"}, _explain(report)
    assert "'tmpl 0.1'" in report.result("Seed.VersionStringChangesWithBuild").detail


def test_a_so_is_judged_against_the_previous_build_named(reports):
    detail = reports["bad_name"].result("Seed.VersionStringChangesWithBuild").detail
    assert detail.startswith("differs from the previous build ") and detail.endswith(".older.so on every device")


@pytest.mark.parametrize("driver, check, words", [
    ("priority_job_only", "NpuSchedulingAidl.EffectivePriorityFormula",
     ["appPriority is ignored", "appPriority 250 in [0, 2000], job 500: expected 750, got 500"]),
    ("priority_half_job", "NpuSchedulingAidl.EffectivePriorityFormula",
     ["computed as appPriority + jobPriority / 2", "job 1000: expected 1000, got 500"]),
    ("priority_no_clamp", "NpuSchedulingAidl.EffectivePriorityFormula",
     ["not clamped", "appPriority 100 in [300, 600], job 0: expected 300, got 100"]),
    ("update_as_set", "NpuSchedulingAidl.SetReplacesUpdateMerges", ["after updateSchedulingConfigs({uid 4242})",
                                                                    "it acts as set"]),
    ("original_uid_as_uid", "NpuSchedulingAidl.RunInferenceAttributedToOtherUid",
     ["reports originalUid 0, it was attributed to 4242", "reports uid as originalUid"]),
    ("device_number_zero", "NpuSchedulingAidl.WorkDeviceNumber",
     ["work on emu-gpu (driver device 1) reports deviceNumber 0 (emu-npu)", "emu-hetero (driver device 3)"]),
    ("stale_input", "NpuSchedulingAidl.PreemptedWorkResumesIntact", ["but run alone it gives"]),
    ("f16_weights", "NeuralnetworksHidlTest.GeneratedTests", ["tmpl-npu: ", "(TENSOR_FLOAT32, case ",
                                                              "expected ", "not within 1e-05"]),
    ("wrong_softmax", "NeuralnetworksHidlTest.GeneratedTests", ["tmpl-npu: SOFTMAX (TENSOR_FLOAT32, case SOFTMAX-float32-"]),
    ("claims_unpreparable", "NeuralnetworksHidlTest.ClaimedModelsPrepare",
     ["L2_NORMALIZATION", "getSupportedOperations claims it, prepareModel refused it", "UNSUPPORTED_OPERATION"]),
    ("duplicate_name", "NeuralnetworksHidlTest.GetDeviceNameTest", ["devices 0, 1 all 'tmpl-npu'"]),
    ("status_always_available", "Seed.StatusTruthful", ["tmpl-npu with all 1 channel(s) hung reports AVAILABLE"]),
    ("version_cut", "NeuralnetworksHidlTest.GetDeviceVersionStringTest", ["leaves a bracket open: it was cut off"]),
    ("config_no_upper_bounds", "NpuSchedulingAidl.PrioritiesValidatedAcrossRange",
     ["setSchedulingConfigs accepted appPriority 1001", "updateSchedulingConfigs accepted maxPriority 2001"]),
    ("job_priority_clamped", "NpuSchedulingAidl.PrioritiesValidatedAcrossRange",
     ["an execution at job priority -1 ran; an execution at job priority 1001 ran"]),
    ("empty_set_ignored", "NpuSchedulingAidl.SetReplacesUpdateMerges",
     ["after setSchedulingConfigs({}), this uid's work attributed to uid 4242 ran: an empty set kept the configs"]),
    ("sticky_group", "NpuSchedulingAidl.RunInferencesBackToBack",
     ["submitted with groupId none and debugFeatureId None, reports groupId 101112131415161718191a1b1c1d1e1f"]),
    ("supported_shifted", "NeuralnetworksHidlTest.GetSupportedOperations",
     ["answered {'ADD': False, 'RELU': True, 'MUL': True} for ADD -> RELU -> MUL, but"]),
    ("default_attribution", "NpuSchedulingAidl.SetReplacesUpdateMerges",
     ["after setSchedulingConfigs({uid 4242}), this uid's work attributed to uid 4242 ran",
      "a uid with no config may not attribute"]),
])
def test_each_bug_is_explained(reports, driver, check, words):
    detail = reports[driver].result(check).detail
    for w in words:
        assert w in detail, detail


def test_wrong_outputs_name_the_element_and_both_values(reports):
    detail = reports["wrong_softmax"].result("NeuralnetworksHidlTest.GeneratedTests").detail
    assert re.search(r"output 0 \(TENSOR_FLOAT32\) element \[\d+(, \d+)*\]: expected [-0-9.e]+, got [-0-9.e]+", detail), detail


# ---- the build record and the generated cases (no HAL) --------------------------------


def _cc(src: Path, out: Path, build_id: str) -> Path:
    argv = ["cc", "-std=c11", "-g", f"-I{ROOT / 'csrc' / 'include'}", "-O2", "-fPIC", "-shared",
            f'-DNPU_BUILD_ID="{build_id}"', str(src), "-o", str(out), "-lm"]
    subprocess.run(argv, check=True, capture_output=True, timeout=120, cwd=out.parent)
    return out


def test_build_identity_is_the_build_not_the_file(tmp_path):
    """The same source with the same build id, built in two directories (different debug
    paths, different files), is one build; another build id is another build."""
    here, there = tmp_path / "a", tmp_path / "b"
    here.mkdir(), there.mkdir()
    for d in (here, there):
        shutil.copy(TEMPLATE, d / "template.c")
    one = _cc(here / "template.c", here / "t.so", "id-1")
    same = _cc(there / "template.c", there / "t.so", "id-1")
    other = _cc(here / "template.c", here / "t2.so", "id-2")
    assert one.read_bytes() != same.read_bytes()
    assert build_identity(one) == build_identity(same) != build_identity(other)
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        build_identity(TEMPLATE)


class _FakeDevice:
    def __init__(self, version: str) -> None:
        self.version = version

    async def getVersionString(self) -> str:  # noqa: N802 - the AIDL name
        return self.version


def _fake_session(out: Path | None, identity: str, version: str) -> SimpleNamespace:
    target = _vts._Target(f"{identity}.so", f"/{identity}.so", identity)
    devices = {"acme-npu": _FakeDevice(version)}
    return SimpleNamespace(target=target, output_dir=out, devices=devices, need_devices=lambda: devices,
                           recorded_builds={})


async def test_output_dir_record_judges_builds_by_identity(tmp_path):
    out = tmp_path / "run"
    check = _vts.version_string_changes_with_build
    # The first build seen is not a pass: there is nothing to compare it with.
    with pytest.raises(_vts._Fail, match="holds no other build than this one"):
        await check(_fake_session(out, "build-a", "acme 1.0"))
    # The same build again (an unchanged driver, wherever it was built): still nothing to compare.
    with pytest.raises(_vts._Fail, match="holds no other build"):
        await check(_fake_session(out, "build-a", "acme 1.0"))
    # A new build with a new version passes, compared with the first.
    assert "differs from the 1 other build(s) recorded" in await check(_fake_session(out, "build-b", "acme 1.1"))
    with pytest.raises(_vts._Fail, match=r"acme-npu reports 'acme 1.0', as did build build-a \(build-a.so\)"):
        await check(_fake_session(out, "build-c", "acme 1.0"))
    recorded = json.loads((out / "vts-builds.json").read_text())["builds"]
    assert sorted(recorded) == ["build-a", "build-b", "build-c"]
    assert recorded["build-b"] == {"label": "build-b.so", "versions": {"acme-npu": "acme 1.1"}}


async def test_no_way_to_compare_is_a_failure_that_says_how(tmp_path):
    with pytest.raises(_vts._Fail, match="--previous-build"):
        await _vts.version_string_changes_with_build(_fake_session(None, "build-a", "acme 1.0"))
    (tmp_path / "vts-builds.json").write_text("{not json")
    with pytest.raises(_vts._Fail, match="unreadable"):
        await _vts.version_string_changes_with_build(_fake_session(tmp_path, "build-a", "acme 1.0"))


@pytest.mark.parametrize("version, why", [
    ("", "empty"),
    ("acme 1.0 (build 1234", "bracket open"),
    ("acme 1.0 build 12)", "closes a bracket"),
    ("acme 1.0 (build 12) -", "ends in"),
    ("acme\t1.0", "control characters"),
    ("v" * 127, "fills the driver's 128-byte field"),
])
def test_cut_version_strings(version, why):
    assert why in _vts._version_problem(version)


def test_whole_version_strings():
    for version in ("emu-reference 1.0 (build 5ff74a3f99c8)", "tmpl 0.1", "acme-npu 2.3.1+g1234abc [rc1]"):
        assert _vts._version_problem(version) is None


def test_generated_cases_are_current_and_cover_every_operation():
    case_file = load_cases(default_cases_path())
    assert case_file.digest == sources_digest(), "stale: make vts-cases"
    operations = {c.operation for c in case_file.cases}
    assert len(operations) >= 90, sorted(operations)
    variants = {(c.operation, c.variant) for c in case_file.cases}
    assert ("CONV_2D", "TENSOR_QUANT8_ASYMM") in variants and ("ADD", "relaxed") in variants
    # Every case's expected outputs are there, and its model is one operation.
    for case in case_file.cases[:50]:
        built = model_of(case)
        assert len(built.model.main.operations) == 1 and len(built.outputs) == len(case.expected)
        for pool in built.model.pools:
            pool.close()


def test_compare_outputs_uses_androids_tolerances():
    f32 = GenCase("x", "ADD", False, (), (Tensor("TENSOR_FLOAT32", np.array([1.0, 100.0], np.float32)),), "t")
    assert compare_outputs([np.array([1.0 + 9e-6, 100.0 + 6e-5], np.float32)], f32) == ""
    problem = compare_outputs([np.array([1.0, 100.0 + 2e-4], np.float32)], f32)
    assert problem.startswith("output 0 (TENSOR_FLOAT32) element [1]: expected 100, got 100.0002")
    relaxed = GenCase("x", "ADD", True, (), f32.expected, "t")
    assert compare_outputs([np.array([1.0, 100.0 + 0.4], np.float32)], relaxed) == ""
    q8 = GenCase("x", "ADD", False, (), (Tensor("TENSOR_QUANT8_ASYMM", np.array([10, 20], np.uint8), 0.5, 3),), "t")
    assert compare_outputs([np.array([11, 19], np.uint8)], q8) == ""
    assert "within one quantum" in compare_outputs([np.array([12, 20], np.uint8)], q8)
    i32 = GenCase("x", "ARGMAX", False, (), (Tensor("TENSOR_INT32", np.array([1, 2], np.int32)),), "t")
    assert "exactly" in compare_outputs([np.array([1, 3], np.int32)], i32)


async def test_missing_or_stale_cases_say_how_to_make_them(tmp_path):
    session = SimpleNamespace(case_path=tmp_path / "nope.npz", generated=None)
    with pytest.raises(_vts._Fail, match="make vts-cases"):
        await _vts.generated_tests(session)
    stale = tmp_path / "stale.npz"
    write_cases(stale, [], "0000")
    session = SimpleNamespace(case_path=stale, generated=None)
    with pytest.raises(_vts._Fail, match="is stale .* remake it with `make vts-cases`"):
        await _vts.claimed_models_prepare(session)


# ---- the runner's bounds (no HAL: a fake session, the autojump clock) -------------------


class _FakeSession:
    """What _run_checks needs of a session: liveness, how the HAL died, a restart."""

    def __init__(self, *, restart_fails: bool = False) -> None:
        self.hal_failure = None
        self.restarts: list[str] = []
        self.dead = False
        self.restart_fails = restart_fails

    async def alive(self) -> bool:
        return not self.dead

    async def exit_note(self) -> str:
        return "killed by SIGABRT" if self.dead else ""

    async def restart(self, why: str) -> None:
        self.restarts.append(why)
        if self.restart_fails:
            raise RuntimeError("the HAL did not register IScheduling/default within 20 s")
        self.dead = False


def _check(name, body):
    async def run(session):
        return await body(session)

    return _vts._Check(name, run)


async def _passes(session):
    return "fine"


async def _hangs(session):
    await trio.sleep_forever()


async def _crashes(session):
    from framework.binder import DeadObjectException

    session.dead = True
    raise DeadObjectException("peer closed")


async def _has_a_bug(session):
    return {}["missing"]


async def test_runner_reports_hangs_crashes_and_the_deadline(autojump_clock):
    session = _FakeSession()
    checks = [
        _check("A.Hangs", _hangs),
        _check("A.Crashes", _crashes),
        _check("A.Passes", _passes),
        _check("A.Bug", _has_a_bug),
        _check("A.HangsPastTheDeadline", _hangs),
        _check("A.NeverReached", _passes),
    ]
    start = trio.current_time()
    results = await _vts._run_checks(session, checks, deadline=start + 3.5, check_timeout=2.0, timeout=3.5)
    lines = [r.line() for r in results]
    assert lines == [
        "FAIL A.Hangs: no answer within 2 s: the driver hangs (the HAL is restarted)",
        "FAIL A.Crashes: the HAL process died during the check (killed by SIGABRT): the driver crashed",
        "PASS A.Passes",
        "FAIL A.Bug: vts could not complete the check: KeyError: 'missing'",
        # Only 1.5 s of the run's 3.5 s were left for it.
        "FAIL A.HangsPastTheDeadline: no answer within 1.5 s: the driver hangs (the HAL is restarted)",
        "FAIL A.NeverReached: not run: the run's 3.5 s limit passed",
    ]
    # No restart after the last hang: the run's time was up, nothing else would run.
    assert session.restarts == ["hung", "died"]
    assert trio.current_time() - start == pytest.approx(3.5)


async def test_runner_stops_touching_a_hal_that_cannot_restart(autojump_clock):
    session = _FakeSession(restart_fails=True)
    checks = [_check("B.Crashes", _crashes), _check("B.Passes", _passes)]
    results = await _vts._run_checks(session, checks, deadline=trio.current_time() + 60, check_timeout=5, timeout=60)
    assert results[1].line() == (
        "FAIL B.Passes: not run: the HAL could not be restarted after it died: "
        "the HAL did not register IScheduling/default within 20 s"
    )
    assert session.restarts == ["died"]


# ---- the click commands ----------------------------------------------------------------


def test_vts_cli_reference_driver_json(tmp_path):
    result = CliRunner().invoke(vts, ["--json", "--output-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    # The run's record: its report, and this build of the reference driver.
    assert json.loads((tmp_path / "run" / "vts-report.json").read_text()) == data
    builds = json.loads((tmp_path / "run" / "vts-builds.json").read_text())["builds"]
    assert [b["label"] for b in builds.values()] == ["the built-in reference driver"]
    assert data["driver"] == "the built-in reference driver"
    assert data["failed"] == 0 and data["passed"] == len(CHECK_NAMES)
    assert [c["name"] for c in data["checks"]] == list(CHECK_NAMES)
    assert all(c["passed"] and c["detail"] for c in data["checks"])
    # The reference driver's heterogeneous device and its parts.
    hetero = next(c for c in data["checks"] if c["name"] == "Seed.HeterogeneousPartsExposed")
    assert hetero["detail"] == "emu-hetero manages emu-npu, emu-dsp"


def test_vts_cli_text_output_and_exit_status(built, tmp_path):
    only = ["NeuralnetworksHidlTest.GetDeviceVersionStringTest", "NeuralnetworksHidlTest.GetDeviceTypeTest"]
    argv = ["--driver", str(built["empty_version"][0])]
    for name in only:
        argv += ["--check", name]
    result = CliRunner().invoke(vts, argv)
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "FAIL NeuralnetworksHidlTest.GetDeviceVersionStringTest: tmpl-npu: empty version string",
        "PASS NeuralnetworksHidlTest.GetDeviceTypeTest",
        "1 passed, 1 failed",
    ]


def test_vts_cli_lists_every_check_with_what_it_requires():
    result = CliRunner().invoke(vts, ["--list", "--json"])
    assert result.exit_code == 0
    listed = json.loads(result.output)
    assert [c["name"] for c in listed] == list(CHECK_NAMES)
    assert all(c["requires"].endswith(".") and "\n" not in c["requires"] for c in listed)
    by_name = {c["name"]: c["requires"] for c in listed}
    assert by_name["NpuSchedulingAidl.RunInferencesPrioritized"] == (
        "A job at 250 submitted 50 ms after one at 500 finishes first."
    )


def test_vts_cli_bad_arguments_are_one_line_errors(tmp_path):
    missing = CliRunner().invoke(vts, ["--driver", str(tmp_path / "nope.so")])
    assert missing.exit_code == 2
    assert missing.output.strip() == f"npuemu: error: no driver at '{tmp_path / 'nope.so'}'"
    unknown = CliRunner().invoke(vts, ["--check", "NoSuch.Check"])
    assert unknown.exit_code == 2 and unknown.output.strip() == "npuemu: error: unknown check(s): NoSuch.Check"
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    bad_source = CliRunner().invoke(vts, ["--driver", str(broken)])
    assert bad_source.exit_code == 2 and bad_source.output.startswith(f"npuemu: error: {broken} does not compile")
    assert len(bad_source.output.strip().splitlines()) == 1


def test_run_test_inference_refuses_a_job_priority_outside_0_1000():
    for bad in ("-1", "1001"):
        result = CliRunner().invoke(run_test_inference, ["--job-priority", bad, "--runtime-dir", "/nonexistent"])
        assert result.exit_code == 2
        assert result.output.strip() == f"npuemu: error: --job-priority must be 0..1000 (0 is the most important), not {bad}"


def test_run_test_inference_without_an_emulator(tmp_path):
    empty = tmp_path / "rt"
    empty.mkdir(mode=0o700)
    result = CliRunner().invoke(run_test_inference, ["--job-priority", "500", "--runtime-dir", str(empty)])
    assert result.exit_code == 3  # npuemu's "no emulator runs" status
    assert result.output.startswith(f"npuemu: error: no emulator is running in {empty}")
    assert len(result.output.strip().splitlines()) == 1


async def test_run_test_inference_through_a_running_emulator():
    from framework.emulator import BootConfig, open_stack

    # Short: Unix socket paths live under it (108 bytes at most).
    root = Path(tempfile.mkdtemp(prefix="npuemu-vts-", dir="/tmp"))
    try:
        async with open_stack(processes=True, runtime_dir=root, config=BootConfig(record=False)):
            runner = CliRunner()

            def cli(*argv: str):
                return runner.invoke(run_test_inference, [*argv, "--runtime-dir", str(root)])

            # The CLI runs its own trio loop, so it gets a thread of its own.
            result = await trio.to_thread.run_sync(cli, "--job-priority", "250", "--device", "emu-gpu")
            assert result.exit_code == 0, result.output
            lines = result.output.splitlines()
            assert [line.split()[2] for line in lines] == ["requested", "started", "ended"]
            assert "INITIAL" in lines[1] and "COMPLETED" in lines[2]
            # Run from a terminal the CLI is the shell (uid 2000); here it shares this
            # process, init, whose identity the servicemanager already knows (uid 0).
            assert all("jobPriority 250" in line and "emu-gpu" in line and "uid 0 " in line for line in lines)

            unknown = await trio.to_thread.run_sync(cli, "--job-priority", "0", "--device", "acme-nothing")
            assert unknown.exit_code == 2  # the HAL's IllegalArgumentException is bad usage, its message alone
            assert unknown.output.startswith("npuemu: error: ") and "acme-nothing" in unknown.output
            assert "IllegalArgumentException" not in unknown.output
            assert len(unknown.output.strip().splitlines()) == 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_vts_cli_a_driver_that_does_not_load_is_one_error_line(tmp_path):
    """No check can run on a driver the HAL cannot load: one line says why, exit 1."""
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not an ELF object\n")
    result = CliRunner().invoke(vts, ["--driver", str(bad)])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(
        f"npuemu: error: {bad} did not come up: loading the driver alone failed: NpuDriverError: "
    ), lines[0]
    assert "[DRIVER_LOAD_FAILED]" in lines[0] and "; the HAL did not start: hal (pid " in lines[0], lines[0]
    assert lines[0].endswith("exited with status 1 before registering"
                             " android.hardware.npu.IScheduling/default, npuemu.hal.IHalControl/default"), lines[0]


# ---- Ctrl-C ----------------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line), for every process /proc shows now."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError):
            continue
        table[int(entry)] = (int(stat[stat.rindex(")") + 2 :].split()[1]), cmdline)
    return table


def _descendants(pid: int) -> dict[int, str]:
    table = _proc_table()
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, cmdline) in table.items():
            if ppid == parent and child not in found:
                found[child] = cmdline
                frontier.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.mark.multiprocess
def test_vts_ctrl_c_mid_run_is_an_interrupted_run_that_leaves_nothing(tmp_path):
    """Ctrl-C at the terminal (SIGINT to vts's process group) while the HAL serves the
    checks: the run is reported as interrupted (exit 130), not as a driver that crashed;
    no child prints a KeyboardInterrupt traceback; nothing vts started is left."""
    import signal
    import time

    npuemu = Path(sys.executable).with_name("npuemu")
    proc = subprocess.Popen(
        [str(npuemu), "vts"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group, as a shell gives a foreground job
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    seen: dict[int, str] = {}
    try:
        # Mid-run: the private HAL is up and serving (its binder socket exists).
        deadline = time.monotonic() + 60
        serving = None
        while serving is None and time.monotonic() < deadline and proc.poll() is None:
            seen.update(_descendants(proc.pid))
            for pid, cmdline in seen.items():
                args = cmdline.split()
                if "npuhal" in args and "--runtime-dir" in args:
                    rtdir = Path(args[args.index("--runtime-dir") + 1])
                    if _alive(pid) and list(rtdir.glob(f"binder-{pid}-*")):
                        serving = (pid, rtdir)
            time.sleep(0.02)
        assert serving is not None, f"the HAL never served (vts exit {proc.poll()})"
        seen.update(_descendants(proc.pid))
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, (out, err)
    assert err.strip() == "npuemu: error: interrupted", err
    assert out == "", out  # no report: no check was judged on a HAL that was being stopped
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err
    left = {pid: cmdline for pid, cmdline in seen.items() if _alive(pid)}
    assert left == {}, left
    assert not serving[1].exists(), f"the private HAL's runtime directory {serving[1]} was left behind"
