"""Load: N app processes at once cycling request, load, execute, unload.

    python bench/load.py [--apps 64] [--duration 60] [--policy budget|status-quo] [--json]

It boots a private emulator (servicemanager, HAL and system_server as real
processes; this process is init), installs ``--apps`` copies of ``bench/load_app.py``
as separate packages (each its own uid), launches them all through the activity
manager, and once every one is up tells them to start (``load.json``: a start time and
a duration). Each app cycles ``requestCanLoadModel`` -> ``CAN_LOAD_NOW`` -> compile
on the NPU -> ``notifyModelLoaded`` -> one execution checked against numpy ->
release -> ``notifyModelUnloaded``, and reports its own latencies.

It prints, for people (or as JSON):

- processes, cycles, cycles per second;
- admission latency (request filed to CAN_LOAD_NOW) p50/p99/max, and execution
  latency (one compute, start to result) p50/p99/max, over all apps;
- statuses seen (CAN_LOAD_NOW, WAIT_FOR_UNLOAD, NOT_PRIORITIZED, COMPLETE...),
  errors and wrong results; approvals cancelled before their model was loaded, and
  loads the device refused for memory a cancelled app was still releasing (the app
  gave the approval back and asked again: ``load_app.py`` says why neither is an error);
- leaks, checked after every app has stopped (their processes gone; one still running
  two minutes after its report is a failure): requests or budget left in
  ``dumpsys npu``, prepared models or weight memory left in the HAL, and descriptors
  and memfd mappings of the three long-lived processes against their count before
  the apps started (``/proc/PID/fd``, ``/proc/PID/maps``).

The exit status is 1 if anything leaked, an app failed to report or to exit, a result
was wrong, or there were errors; 0 otherwise. ``make load`` runs a minute, ``make soak``
ten.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from framework.binder import defaultServiceManager  # noqa: E402
from framework.emulator import BootConfig, open_stack  # noqa: E402
from interfaces.android.npumanager import INpuManager  # noqa: E402
from interfaces.npuemu.hal import IHalControl  # noqa: E402
from interfaces.npuemu.server import IActivityManager  # noqa: E402
from interfaces.services import ACTIVITY_SERVICE, HAL_CONTROL, NPU_SERVICE  # noqa: E402

APP = Path(__file__).with_name("load_app.py")
MANIFEST = textwrap.dedent("""\
    <?xml version="1.0" encoding="utf-8"?>
    <manifest xmlns:android="http://schemas.android.com/apk/res/android" package="{package}">
        <uses-sdk android:minSdkVersion="29" android:targetSdkVersion="37" />
        <uses-feature android:name="android.hardware.npu" android:required="false" />
        <uses-permission android:name="android.permission.ACCESS_NPU_MODEL_MANAGER_API" />
        <application android:label="{package}">
            <meta-data android:name="npuemu.launch.importance" android:value="{importance}" />
        </application>
    </manifest>
    """)
IMPORTANCES = ["foreground", "visible", "service", "cached"]
APP_EXIT_TIMEOUT_S = 120.0  # after its report, an app still running this long is a failure


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[max(0, int(np.ceil(q / 100 * len(ordered))) - 1)])


def proc_facts(pid: int) -> dict[str, int]:
    fd_dir = Path(f"/proc/{pid}/fd")
    targets = []
    for name in os.listdir(fd_dir):
        try:
            targets.append(os.readlink(fd_dir / name))
        except FileNotFoundError:
            pass
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {"fds": len(targets), "memfd_fds": sum(t.startswith("/memfd:") for t in targets),
            "memfd_maps": sum("/memfd:" in line for line in maps)}


async def service(runtime, name: str, iface: type):
    binder = await defaultServiceManager(runtime).checkService(name)
    if binder is None:
        raise RuntimeError(f"{name} is not registered")
    return iface.asInterface(binder)


async def run(args: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix="npuemu-load-"))
    os.chmod(work, 0o700)
    apps, rtdir = work / "apps", work / "rt"
    for i in range(args.apps):
        d = apps / f"load{i:03d}"
        d.mkdir(parents=True)
        (d / "AndroidManifest.xml").write_text(MANIFEST.format(package=f"com.npuemu.load{i:03d}",
                                                               importance=IMPORTANCES[i % len(IMPORTANCES)]))
        shutil.copy(APP, d / "main.py")
    config = BootConfig(record=False, boot_timeout=60.0, log_level="WARNING",
                        system_server_args=("--apps-dir", os.fspath(apps)),
                        extra_env={"NPUEMU_LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT)})
    try:
        async with open_stack(processes=True, runtime_dir=rtdir, config=config, grace=3.0) as emu:
            rt = emu.runtime
            npu = await service(rt, NPU_SERVICE, INpuManager)
            am = await service(rt, ACTIVITY_SERVICE, IActivityManager)
            control = await service(rt, HAL_CONTROL, IHalControl)
            with trio.fail_after(30):
                while not json.loads(await npu.dump(["--json"]))["hal"]["connected"]:
                    await trio.sleep(0.1)
            if args.policy == "budget":
                await npu.shellCommand(["set-budget-policy", "--max-budget", str(args.max_budget)])
            before = {name: proc_facts(pid) for name, pid in emu.pids.items()}
            t_launch = time.monotonic()
            pids = {}
            for i in range(args.apps):
                pids[i] = await am.startApp(f"com.npuemu.load{i:03d}", 0)
            # Every app up (its binder runtime, context and NN runtime open) before
            # the clock starts: the start-up of 64 Pythons on 2 cores is not the load.
            with trio.fail_after(max(120.0, args.apps * 3.0)):
                while len(list(rtdir.glob("ready-*"))) < args.apps:
                    await trio.sleep(0.2)
            start = time.time() + 1.0
            (rtdir / "load.json").write_text(json.dumps({"start": start, "duration": args.duration}))
            print(f"{args.apps} apps up {time.monotonic() - t_launch:.1f} s after launch; cycling for {args.duration:g} s",
                  file=sys.stderr, flush=True)
            deadline = start + args.duration + 60
            reports: dict[str, dict] = {}
            while time.time() < deadline and len(reports) < args.apps:
                for path in rtdir.glob("load-*.json"):
                    if path.name not in reports:
                        reports[path.name] = json.loads(path.read_text())
                await trio.sleep(0.5)
            # Every app stops after writing its report; its process takes a while to
            # exit (seconds, growing with the requests it made, and 64 exit at once on
            # a busy machine). Leaks are looked for only once all are gone: their
            # connections are still open until then.
            t_reported = time.monotonic()
            with trio.move_on_after(APP_EXIT_TIMEOUT_S):
                while any(os.path.exists(f"/proc/{p}") for p in pids.values()):
                    await trio.sleep(0.2)
            exit_s = time.monotonic() - t_reported
            alive_at_end = sum(os.path.exists(f"/proc/{p}") for p in pids.values())
            # Leaks: after every app exited, nothing of theirs may remain.
            leaks: list[str] = []
            with trio.move_on_after(20):
                while True:
                    dump = json.loads(await npu.dump(["--json"]))
                    hal = await control.dump()
                    prepared = int(next(line for line in hal.splitlines() if "prepared models:" in line).split(":")[1])
                    weights = [line.split("weights")[1].split("/")[0].split()[0] for line in hal.splitlines()
                               if " weights " in line]
                    after = {name: proc_facts(pid) for name, pid in emu.pids.items()}
                    leaks = []
                    if dump["requests"]:
                        leaks.append(f"{len(dump['requests'])} requests left in dumpsys npu")
                    if dump["budget"]["in_use"] or dump["budget"]["reserved"]:
                        leaks.append(f"budget left: {dump['budget']}")
                    if prepared:
                        leaks.append(f"{prepared} prepared models left in the HAL")
                    if set(weights) != {"0"}:
                        leaks.append(f"weight memory left in the driver: {weights}")
                    for name in before:
                        for key in ("fds", "memfd_fds", "memfd_maps"):
                            if after[name][key] > before[name][key]:
                                leaks.append(f"{name}: {key} {before[name][key]} -> {after[name][key]}")
                    if not leaks:
                        break
                    await trio.sleep(0.5)
            counters = dump["counters"]
            crashed = [name for name in emu.pids if emu.process(name).returncode is not None]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    adm = [v for r in reports.values() for v in r["admission_ms"]]
    exe = [v for r in reports.values() for v in r["execution_ms"]]
    statuses: dict[str, int] = {}
    for r in reports.values():
        for k, v in r["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    cycles = sum(r["cycles"] for r in reports.values())
    errors = [e for r in reports.values() for e in r["errors"]]
    by_importance: dict[str, int] = {}
    for r in reports.values():
        level = IMPORTANCES[int(r["package"][-3:]) % len(IMPORTANCES)]
        by_importance[level] = by_importance.get(level, 0) + r["cycles"]
    return {
        "apps": args.apps, "reported": len(reports), "duration_s": args.duration, "policy": args.policy,
        "cycles": cycles, "cycles_per_s": round(cycles / args.duration, 1),
        "min_cycles_per_app": min((r["cycles"] for r in reports.values()), default=0),
        "admission_ms": {"p50": pct(adm, 50), "p99": pct(adm, 99), "max": max(adm, default=None), "n": len(adm)},
        "execution_ms": {"p50": pct(exe, 50), "p99": pct(exe, 99), "max": max(exe, default=None), "n": len(exe)},
        "statuses": statuses, "cancelled": sum(r["cancelled"] for r in reports.values()),
        "unload_asked": sum(r["unload_asked"] for r in reports.values()),
        "ended_before_load": sum(r.get("ended_before_load", 0) for r in reports.values()),
        "device_full": sum(r.get("device_full", 0) for r in reports.values()),
        "cycles_by_importance": by_importance,
        "bad_results": sum(r["bad_results"] for r in reports.values()), "errors": len(errors),
        "first_errors": errors[:5], "apps_alive_after": alive_at_end, "apps_exit_s": round(exit_s, 1),
        "stack_crashed": crashed,
        "leaks": leaks, "npu_counters": {k: counters[k] for k in ("requests", "can_load_now", "wait_for_unload",
                                                                  "not_prioritized", "cancelled", "completed",
                                                                  "dropped_at_death", "revoked")},
    }


def render(r: dict) -> str:
    def f(v):
        return "-" if v is None else f"{v:8.2f}"

    lines = [
        f"load: {r['apps']} app processes, {r['duration_s']:g} s, policy {r['policy']}",
        f"  cycles           {r['cycles']} ({r['cycles_per_s']}/s, at least {r['min_cycles_per_app']} per app;"
        f" {r['reported']}/{r['apps']} apps reported)",
        "                       p50      p99      max   (ms)",
        f"  admission     {f(r['admission_ms']['p50'])} {f(r['admission_ms']['p99'])} {f(r['admission_ms']['max'])}"
        f"   n={r['admission_ms']['n']}",
        f"  execution     {f(r['execution_ms']['p50'])} {f(r['execution_ms']['p99'])} {f(r['execution_ms']['max'])}"
        f"   n={r['execution_ms']['n']}",
        f"  statuses       {json.dumps(r['statuses'], sort_keys=True)}",
        f"  cycles by importance {json.dumps(r['cycles_by_importance'])}",
        f"  cancelled while waiting {r['cancelled']}  ended after approval {r['ended_before_load']}"
        f"  device full, asked again {r['device_full']}  unload asked {r['unload_asked']}"
        f"  wrong results {r['bad_results']}  errors {r['errors']}",
        f"  apps stopped   {r['apps_exit_s']:g} s after their reports"
        + (f"; {r['apps_alive_after']} still running" if r["apps_alive_after"] else ""),
        f"  stack crashed  {r['stack_crashed'] or 'none'}",
        f"  leaks          {'; '.join(r['leaks']) or 'none'}",
    ]
    lines += [f"    error: {e}" for e in r["first_errors"]]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", type=int, default=64)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of cycling (after every app is up)")
    ap.add_argument("--policy", choices=["budget", "status-quo"], default="budget")
    ap.add_argument("--max-budget", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.apps < 1 or args.duration <= 0:
        ap.error("--apps must be >= 1 and --duration > 0")
    result = trio.run(run, args)
    print(json.dumps(result, indent=2) if args.json else render(result))
    ok = (not result["leaks"] and result["reported"] == result["apps"] and not result["bad_results"]
          and not result["errors"] and not result["stack_crashed"] and not result["apps_alive_after"]
          and result["cycles"] > 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
