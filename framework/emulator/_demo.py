"""``npuemu demo``: the whole story on a private emulator, checked.

The scenario, in emulated-phone terms:

1. **Boot** a private emulator (its own runtime directory) with the npu service's
   block flag on, and switch the npu service to the **budget policy** with
   ``maxBudget`` 5 (weights 1, 2, 4 for the three size classes).
2. **Steady state.** camera (foreground, MediaPipe's face detector on 30 generated
   frames a second: weight 1), photos (indexing the gallery's faces with the face
   landmark model in the background, importance cached, BACKGROUND priority: weight 2),
   rogue (a service, a small model: weight 2) and legacy (no ``uses-feature``) start.
   The budget is full (1 + 2 + 2). legacy is refused by the npu service and denied
   direct access by the HAL, and runs on ``nnapi-reference``. camera's frames preempt
   the long background jobs on the NPU's channels. rogue tries to attribute work to
   another uid and is refused. The assistant starts too, idle in the background.
3. **The assistant is brought up.** It was started in the background (cached) and
   holds nothing until the user brings it up (the activity manager raises it to
   visible); then it asks for its GREATER_THAN_2G model (the full pose landmark model,
   loaded as 2.5 GB: weight 4). The
   budget cannot take it, so the npu service walks the less important apps: photos
   and rogue are asked to unload, and the assistant is told WAIT_FOR_UNLOAD. photos
   complies at once; rogue does not, and at the 2 s deadline its models are
   **revoked** through the HAL. The assistant is then told CAN_LOAD_NOW, answers its
   query and lets the model go; photos, which asked again, gets its turn back.
4. **A thermal spike**: the die is pushed to CRITICAL. Only the foreground may keep
   its models now: photos is asked to unload again (reason THERMAL); camera keeps
   running. The die cools on its own and photos comes back.
5. **Shutdown**, then the summary, a Perfetto trace and a PNG plot.

Each app checks every inference against a reference it computes itself (camera, photos
and the assistant: the same ``.tflite`` model on the CPU device ``nnapi-reference`` in
their own process, within 1e-4 of each output's range; rogue and legacy: numpy), and
writes what happened to ``apps/<name>.json`` in the runtime directory; the demo reads
those, the recorder's trace, the log and ``dumpsys npu``, and checks each app against
what the scenario expects. :func:`run_demo` returns the summary; ``ok`` is whether
every check passed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from framework.nn import CPU_DEVICE_NAME
from framework.npumanager import (
    NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW,
    NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD,
    NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE,
    NPU_MODEL_UNLOAD_REASON_THERMAL,
    NPU_SERVICE,
    constantToString,
)
from interfaces.android.hardware.thermal import ThrottlingSeverity
from interfaces.android.npumanager import INpuManager
from interfaces.npuemu.hal import IHalControl
from interfaces.npuemu.server import IActivityManager
from interfaces.services import ACTIVITY_SERVICE

from ._boot import BootConfig
from ._control import launch_apps, list_devices, read_log
from ._logcat import log_parts
from ._plot import plot_timeline
from ._services import HAL_CONTROL, get_service
from ._stack import open_stack
from ._trace import chrome_trace, enum_name, load_timeline, read_app_reports, summarize

__all__ = ["DEMO_APPS", "Check", "run_demo"]

DEMO_APPS = ("camera", "photos", "rogue", "legacy", "assistant")
_MAX_BUDGET = 5
_CRITICAL = int(ThrottlingSeverity.CRITICAL)


def _names(prefix: str, values: list[int]) -> str:
    """``[WAIT_FOR_UNLOAD, CAN_LOAD_NOW]`` for the NpuManager constants ``values``."""
    return "[" + ", ".join(constantToString(prefix, v) for v in values) + "]"


_SUMMARY_KEYS = ("loads", "unload_requests", "unloads", "inferences", "results_ok", "p50_ms", "p99_ms",
                 "device_p50_ms", "device_p99_ms")


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def _say(progress: Callable[[str], None] | None, text: str) -> None:
    if progress is not None:
        progress(text)


async def _wait_for(predicate: Callable[[], bool], timeout: float, poll: float = 0.1) -> bool:
    with trio.move_on_after(timeout):
        while not predicate():
            await trio.sleep(poll)
        return True
    return predicate()


async def run_demo(
    *,
    seconds: float = 20.0,
    out_dir: str | os.PathLike[str] | None = None,
    runtime_dir: str | os.PathLike[str] | None = None,
    speed: float = 1.0,
    driver: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the scenario; write ``trace.json``, ``timeline.png`` and ``summary.json`` into ``out_dir``.

    ``seconds`` is roughly how long the scenario runs once the apps are up (at
    least 8; the assistant's phase lasts as long as the revocation takes). A fresh
    temporary runtime directory is used (and removed) unless ``runtime_dir`` is given.
    ``driver`` is a driver ``.so`` to boot the HAL on instead of the reference driver:
    the apps find its devices by NNAPI discovery, as on any phone. A missing file is
    FileNotFoundError, before anything starts.
    """
    if not seconds >= 8:
        raise ValueError(f"the demo needs at least 8 seconds, not {seconds!r}")
    config = BootConfig(
        speed=speed,
        driver=None if driver is None else os.fspath(driver),
        system_server_args=("--block-missing-feature",),
    )
    out = Path(out_dir or "npuemu-demo").absolute()
    out.mkdir(parents=True, exist_ok=True)
    own_dir = runtime_dir is None
    # Short: the binder's Unix socket paths must fit in 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="npuemu-demo-", dir="/tmp")) if own_dir else Path(runtime_dir)
    t_start = time.monotonic()
    reports: dict[str, dict[str, Any]] = {}
    npu_dump: dict[str, Any] = {}
    phases: dict[str, float] = {}
    errors: list[str] = []
    try:
        async with open_stack(processes=True, runtime_dir=root, config=config) as emu:
            try:
                npu_dump = await _scenario(emu, driver, seconds, progress, reports, phases, t_start)
            except Exception as exc:  # an app or a driver that broke the story: report it, keep the files
                errors.append(f"{type(exc).__name__}: {exc}")
                _say(progress, f"the scenario stopped early: {errors[-1]}")
            _say(progress, "shutting down")
        log = read_log(root)
        timeline = load_timeline(root)
        trace = chrome_trace(timeline)
        (out / "trace.json").write_text(json.dumps(trace, separators=(",", ":")))
        plot_timeline(timeline, out / "timeline.png", title="npuemu demo: NPU channels, heat and weight memory")
        # The log's ring, both halves, oldest first.
        (out / "logcat.txt").write_bytes(b"".join(p.read_bytes() for p in log_parts(root / "logcat") if p.exists()))
        # The raw recording too, so `npuemu trace|plot --runtime-dir OUT/recording` can redraw it.
        recording = out / "recording"
        shutil.rmtree(recording, ignore_errors=True)
        recording.mkdir(mode=0o700)
        shutil.copy(root / "trace.jsonl", recording / "trace.jsonl")
        shutil.copytree(root / "apps", recording / "apps", ignore=shutil.ignore_patterns("*.tmp"))
        summary = _summarize(reports, timeline, log, npu_dump, time.monotonic() - t_start, errors)
        summary["phases"] = phases
        summary["driver"] = None if driver is None else config.driver
        summary["trace"] = os.fspath(out / "trace.json")
        summary["plot"] = os.fspath(out / "timeline.png")
        summary["log"] = os.fspath(out / "logcat.txt")
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        return summary
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)


async def _scenario(emu: Any, driver: Any, seconds: float, progress: Callable[[str], None] | None,
                    reports: dict[str, dict[str, Any]], phases: dict[str, float], t_start: float) -> dict[str, Any]:
    """The story on a booted emulator; ``reports`` and ``phases`` fill as it goes. Returns ``dumpsys npu``."""
    runtime = emu.runtime
    devices = [f"{d.name} ({d.type})" for d in await list_devices(runtime)]
    on = "the reference driver" if driver is None else f"driver {os.fspath(driver)}"
    _say(progress, f"booted in {emu.boot_seconds:.1f} s ({emu.files.root}) on {on}: {', '.join(devices)}")
    npu = await get_service(runtime, NPU_SERVICE, INpuManager)
    hal = await get_service(runtime, HAL_CONTROL, IHalControl)
    await npu.shellCommand(["set-budget-policy", "--max-budget", str(_MAX_BUDGET)])
    _say(progress, f"npu service: budget policy, maxBudget {_MAX_BUDGET}")

    def fresh() -> dict[str, dict[str, Any]]:
        reports.update(read_app_reports(emu.files))
        return reports

    def app(name: str) -> dict[str, Any]:
        return fresh().get(name, {})

    await launch_apps(runtime, ["camera"], 100)
    await launch_apps(runtime, ["photos"], 400)
    await launch_apps(runtime, ["rogue"], 300)
    await launch_apps(runtime, ["legacy"], 200)
    # The assistant starts in the background and holds nothing until it is brought up.
    (assistant,) = await launch_apps(runtime, ["assistant"], 400)
    _say(progress, "launched camera (foreground), photos (cached), rogue (service), legacy (visible),"
                   " assistant (cached, idle)")
    up = await _wait_for(
        lambda: all(app(a).get("loads", 0) >= 1 for a in ("camera", "photos", "rogue"))
        and app("legacy").get("inferences", 0) > 0 and "uid" in app("assistant"),
        timeout=60,
    )
    phases["apps_up_s"] = round(time.monotonic() - t_start, 1)
    _say(progress, "apps up, budget full (camera 1 + photos 2 + rogue 2)" if up else
         "not every app came up in time")
    await trio.sleep(max(1.0, 0.3 * seconds))

    am = await get_service(runtime, ACTIVITY_SERVICE, IActivityManager)
    emu.mark("assistant brought up")
    await am.setImportance(assistant.package, 200)
    _say(progress, "the user brings up the assistant (visible; a 2.5 GB model)")
    await _wait_for(lambda: app("assistant").get("unloads", 0) >= 1, timeout=max(10.0, 0.4 * seconds))
    a = app("assistant")
    _say(progress, f"assistant: {_names('NPU_MODEL_LOAD_STATUS_', a.get('statuses', []))},"
                   f" {a.get('inferences', 0)} inferences;"
                   f" rogue revoked {app('rogue').get('revoked', 0)}")
    await am.setImportance(assistant.package, 400)
    await _wait_for(lambda: app("photos").get("loads", 0) >= 2, timeout=10)
    _say(progress, f"photos is back (loads {app('photos').get('loads', 0)})")
    await trio.sleep(max(0.5, 0.15 * seconds))
    phases["assistant_done_s"] = round(time.monotonic() - t_start, 1)

    photos_asked = app("photos").get("unload_requests", 0)
    emu.mark("thermal spike")
    status = await hal.setThermalSeverity(_CRITICAL)
    _say(progress, f"thermal spike: die at {status.temperatureC:.0f} C (CRITICAL)")
    await _wait_for(lambda: app("photos").get("unload_requests", 0) > photos_asked, timeout=5)
    cooled = False
    with trio.move_on_after(max(4.0, 0.35 * seconds)):
        while True:
            if int((await hal.thermalStatus()).severity) == 0:
                cooled = True
                break
            await trio.sleep(0.2)
    _say(progress, "the die has cooled" if cooled else "the die is still warm")
    await _wait_for(lambda: app("photos").get("loads", 0) >= 3, timeout=6)
    _say(progress, f"photos is back again (loads {app('photos').get('loads', 0)})")
    await trio.sleep(max(0.5, 0.1 * seconds))
    phases["thermal_done_s"] = round(time.monotonic() - t_start, 1)
    await trio.sleep(0.5)  # the apps' last autosave
    fresh()
    try:
        npu_dump = json.loads(await npu.dump(["--json"]))
    except Exception as exc:  # the summary says what it could not read
        npu_dump = {"error": f"{type(exc).__name__}: {exc}"}
    _say(progress, "shutting down")
    return npu_dump


def _summarize(reports: dict[str, dict[str, Any]], timeline: Any, log: list[Any], npu_dump: dict[str, Any],
               duration: float, errors: list[str]) -> dict[str, Any]:
    hw = summarize(timeline)
    apps = {}
    for name in DEMO_APPS:
        r = reports.get(name, {})
        apps[name] = {k: r.get(k, None if k.endswith("_ms") else 0) for k in _SUMMARY_KEYS}
        apps[name]["model"] = r.get("model")
        apps[name]["results_bad"] = r.get("results_bad", 0)
        apps[name]["devices"] = r.get("devices", [])
        apps[name]["statuses"] = r.get("statuses", [])
        apps[name]["revoked"] = r.get("revoked", 0)
        apps[name]["refusals"] = [f.get("what") for f in r.get("refusals", [])]
    warned_uids = {line.message.split()[1] for line in log
                   if line.tag == "NpuManagerService" and "does not declare" in line.message
                   and line.message.startswith("uid ")}
    counters = npu_dump.get("counters", {}) if isinstance(npu_dump, dict) else {}
    revocations = int(counters.get("revocations_sent", 0) or counters.get("revoked", 0))
    summary: dict[str, Any] = {
        "apps": apps,
        "preemptions": hw["preemptions"],
        "resumes": hw["resumes"],
        "jobs": hw["jobs"],
        "thermal_max_severity": hw["thermal_max_severity"],
        "thermal_max_severity_name": enum_name(ThrottlingSeverity, hw["thermal_max_severity"]),
        "temperature_max_c": hw["temperature_max_c"],
        "revocations": revocations,
        "blocked_or_warned": len(warned_uids),
        "duration_s": round(duration, 1),
        "results_checked": sum(a["inferences"] for a in apps.values()),
        "results_wrong": sum(a["results_bad"] for a in apps.values()),
        "errors": errors,
    }
    checks = _checks(reports, summary)
    summary["checks"] = [dataclasses.asdict(c) for c in checks]
    summary["ok"] = all(c.passed for c in checks)
    return summary


def _checks(reports: dict[str, dict[str, Any]], s: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []

    def check(name: str, passed: bool, detail: str) -> None:
        checks.append(Check(name, bool(passed), detail))

    check("scenario: ran to the end", not s["errors"], "; ".join(s["errors"]) or "every phase ran")

    for name in DEMO_APPS:
        r = reports.get(name, {})
        n, ok = r.get("inferences", 0), r.get("results_ok", 0)
        check(f"{name}: results checked", n > 0 and ok == n, f"{ok} of {n} inferences equal the app's own reference")
    cam = reports.get("camera", {})
    target = cam.get("latency_target_ms", 50.0)
    check("camera: loaded on the NPU, p50 within target",
          cam.get("loads", 0) >= 1 and cam.get("p50_ms") is not None and cam["p50_ms"] <= target,
          f"loads {cam.get('loads', 0)}, p50 {cam.get('p50_ms')} ms, p99 {cam.get('p99_ms')} ms, target {target} ms"
          f" (on the device, emulated: p50 {cam.get('device_p50_ms')} ms, p99 {cam.get('device_p99_ms')} ms)")
    ph = reports.get("photos", {})
    frames = cam.get("inferences", 0) + cam.get("cpu_frames", 0)
    check("camera and photos: the models found the faces",
          frames > 0 and cam.get("frames_with_face") == frames and ph.get("indexed", 0) > 0
          and ph.get("faces") == ph.get("indexed"),
          f"{cam.get('model')}: a face in {cam.get('frames_with_face')} of {frames} frames;"
          f" {ph.get('model')}: a face in {ph.get('faces')} of {ph.get('indexed')} photos")
    reasons = ph.get("unload_reasons", [])
    check("photos: asked to unload (budget, then heat), complied every time, came back",
          NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE in reasons and NPU_MODEL_UNLOAD_REASON_THERMAL in reasons
          and ph.get("unloads", 0) == ph.get("unload_requests", 0) and ph.get("loads", 0) >= 3,
          f"unload requests {ph.get('unload_requests', 0)} (reasons {_names('NPU_MODEL_UNLOAD_REASON_', reasons)}), unloads {ph.get('unloads', 0)},"
          f" loads {ph.get('loads', 0)}")
    asst = reports.get("assistant", {})
    statuses = asst.get("statuses", [])
    check("assistant: waited for the unloads, then loaded and released",
          NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD in statuses and NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW in statuses
          and asst.get("loads", 0) >= 1
          and asst.get("unloads", 0) >= 1,
          f"statuses {_names('NPU_MODEL_LOAD_STATUS_', statuses)}, loads {asst.get('loads', 0)}, unloads {asst.get('unloads', 0)}")
    rogue = reports.get("rogue", {})
    refused = [f for f in rogue.get("refusals", []) if f.get("what") == "attribution"]
    check("rogue: ignored the unload request and was revoked",
          rogue.get("unload_requests", 0) >= 1 and rogue.get("unloads", 0) == 0 and rogue.get("revoked", 0) >= 1
          and s["revocations"] >= 1,
          f"unload requests {rogue.get('unload_requests', 0)}, revoked {rogue.get('revoked', 0)},"
          f" service revocations {s['revocations']}")
    check("rogue: work attributed to another uid was refused",
          bool(refused) and all(f.get("refused") for f in refused),
          "; ".join(f.get("error", "") for f in refused) or "no attribution attempt recorded")
    leg = reports.get("legacy", {})
    check("legacy: blocked or warned, ran on the CPU",
          s["blocked_or_warned"] >= 1 and leg.get("devices") == [CPU_DEVICE_NAME],
          f"warned/blocked uids {s['blocked_or_warned']}, refusals {[f.get('what') for f in leg.get('refusals', [])]},"
          f" devices {leg.get('devices')}")
    check("NPU: background work was preempted and resumed", s["preemptions"] >= 1 and s["resumes"] >= 1,
          f"{s['preemptions']} preemptions, {s['resumes']} resumes in {s['jobs']} jobs")
    check("thermal: the spike reached CRITICAL", s["thermal_max_severity"] >= _CRITICAL,
          f"max severity {s['thermal_max_severity_name']}, max {s['temperature_max_c']} C")
    return checks
