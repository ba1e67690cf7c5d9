"""Faults, as real processes suffer them, and what is left afterwards.

Every claim here is about processes, so every actor is one: servicemanager, the HAL
and system_server as ``npuemu boot`` starts them, and apps the activity manager
launches (``tests/fuzz/worker_app.py``, which uses only the public app APIs and
keeps its story in a JSON file). The faults:

- an app SIGKILLed while loading (approved, model prepared, not yet notified), while
  executing, and while asked to unload (under the budget policy, with a more
  important app waiting for its budget);
- the driver failing one work (a FAILED end, the app sees the error and goes on);
- a hung channel (the HAL's watchdog, drm_sched's TDR, resets it; the stuck work
  fails instead of waiting for ever);
- the HAL SIGKILLed, and the driver crashing the HAL (SIGABRT): init restarts it,
  the npu service notices, reconnects to the new HAL, keeps the apps' requests, and
  the apps compute on the NPU again.

After each, nothing is leaked: no request or budget in ``dumpsys npu``, no prepared
model or weight memory in the HAL, no descriptor or memfd mapping left in the
long-lived processes (``/proc/PID/fd`` and ``/proc/PID/maps`` against a baseline).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import trio

from interfaces.android.hardware.npu import EndReason
from interfaces.android.npumanager import INpuManager
from interfaces.npuemu.hal import IHalControl
from interfaces.npuemu.server import IActivityManager
from test_reliability_support import (
    HAL_CONTROL,
    ProcFacts,
    booted,
    driver_weights_in_use,
    fd_targets,
    get,
    hal_dump,
    hal_prepared_models,
    long_lived,
    settled_baseline,
    npu_dump,
    wait_until,
    write_app,
)

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

WORKER = (Path(__file__).with_name("fuzz") / "worker_app.py").read_text()
FAULT_FAIL_NEXT_WORK, FAULT_HANG_CHANNEL, FAULT_CRASH = 1, 2, 4
CAN_LOAD_NOW, WAIT_FOR_UNLOAD = 0, 1
KIND_ENDED = 2
END_FAILED = int(EndReason.FAILED)


def story(emu, name: str) -> dict | None:
    try:
        return json.loads((emu.runtime_dir / f"rel-{name}.json").read_text())
    except FileNotFoundError:
        return None


async def wait_story(emu, name: str, predicate, timeout: float = 40.0) -> dict:
    async def ok() -> bool:
        s = story(emu, name)
        return s is not None and predicate(s)

    try:
        await wait_until(ok, timeout=timeout)
    except trio.TooSlowError:
        raise AssertionError(f"{name}: {story(emu, name)}") from None
    return story(emu, name)


async def assert_nothing_left(emu, baseline: dict[str, ProcFacts], *, hal_models: int = 0, timeout: float = 10.0) -> None:
    """No request, budget, model, weight memory, descriptor or memfd beyond the baseline."""
    last: dict = {}

    async def clean() -> bool:
        dump = await npu_dump(emu)
        hal = await hal_dump(emu)
        now = long_lived(emu, baseline)
        last.update(requests=dump["requests"], budget=dump["budget"], loaded=dump["loaded_models"],
                    prepared=hal_prepared_models(hal), weights=driver_weights_in_use(hal), now=now)
        return (
            dump["requests"] == []
            and dump["budget"]["in_use"] == 0
            and dump["budget"]["reserved"] == 0
            and dump["loaded_models"] == []
            and hal_prepared_models(hal) == hal_models
            and (hal_models or set(driver_weights_in_use(hal)) == {"0"})
            and all(now[n].fds <= baseline[n].fds for n in baseline)
            and all(now[n].memfd_fds <= baseline[n].memfd_fds for n in baseline)
            and all(now[n].memfd_maps <= baseline[n].memfd_maps for n in baseline)
        )

    try:
        await wait_until(clean, timeout=timeout)
    except trio.TooSlowError:
        fds = {n: fd_targets(emu.pids[n]) for n in baseline}
        raise AssertionError(f"left behind: {last}\nbaseline: {baseline}\nfds now: {fds}") from None


async def test_apps_sigkilled_while_loading_executing_and_asked_to_unload_leave_nothing(tmp_path):
    apps = tmp_path / "apps"
    for name, importance in [("loading_npu", "service"), ("exec_npu", "service"), ("stubborn_npu", "cached"),
                             ("claimer_npu", "foreground")]:
        write_app(apps, name, f"com.rel.{name}", WORKER, importance=importance)
    # A long unload deadline: the stubborn app's model must be freed by its death, not revoked.
    async with booted(apps, system_server_args=("--unload-timeout", "60")) as emu:
        am = await get(emu, "activity", IActivityManager)
        npu = await get(emu, "npu", INpuManager)
        await wait_until(lambda: _hal_connected(emu))
        assert "budget" in await npu.shellCommand(["set-budget-policy", "--max-budget", "4"])
        baseline = await settled_baseline(emu)

        # 1. Killed while loading: approved and prepared in the HAL, not yet notified.
        await am.startApp("com.rel.loading_npu", 0)
        s = await wait_story(emu, "loading_npu", lambda s: s["phase"] == "loading")
        dump = await npu_dump(emu)
        assert [(r["id"], r["state"]) for r in dump["requests"]] == [(1, "approved")]
        assert hal_prepared_models(await hal_dump(emu)) == 1
        os.kill(s["pid"], signal.SIGKILL)
        await assert_nothing_left(emu, baseline)
        assert (await npu_dump(emu))["counters"]["dropped_at_death"] == 1

        # 2. Killed while executing, back to back on the NPU.
        await am.startApp("com.rel.exec_npu", 0)
        s = await wait_story(emu, "exec_npu", lambda s: s["executions"] >= 5)
        assert s["last_ok"] and s["errors"] == []
        os.kill(s["pid"], signal.SIGKILL)
        await assert_nothing_left(emu, baseline)

        # 3. Killed while asked to unload: the stubborn cached app holds the whole
        # budget, a foreground app asks for it and waits; the death frees it.
        await am.startApp("com.rel.stubborn_npu", 0)
        stubborn = await wait_story(emu, "stubborn_npu", lambda s: s["phase"] == "loaded")
        await am.startApp("com.rel.claimer_npu", 0)
        await wait_story(emu, "stubborn_npu", lambda s: s["phase"] == "asked")
        claimer = await wait_story(emu, "claimer_npu", lambda s: s["events"] == [["can_load", WAIT_FOR_UNLOAD]])
        dump = await npu_dump(emu)
        assert dump["budget"]["in_use"] == 4 and dump["budget"]["being_freed"] == 4, dump["budget"]
        os.kill(stubborn["pid"], signal.SIGKILL)
        claimer = await wait_story(emu, "claimer_npu", lambda s: s["phase"] == "loaded")
        assert claimer["events"] == [["can_load", WAIT_FOR_UNLOAD], ["can_load", CAN_LOAD_NOW]]
        dump = await npu_dump(emu)
        assert [(r["uid"], r["state"]) for r in dump["requests"]] == [(claimer["uid"], "loaded")]
        assert dump["budget"]["in_use"] == 4
        assert story(emu, "stubborn_npu")["events"][-1][0] == "unload"  # asked, never completed: it died
        await am.killApp("com.rel.claimer_npu")
        await assert_nothing_left(emu, baseline)
        for name in ("servicemanager", "hal", "system_server"):
            assert emu.process(name).returncode is None


async def test_driver_failure_hung_channel_hal_kill_and_driver_crash(tmp_path):
    apps = tmp_path / "apps"
    for name in ("exec_npu", "exec_dsp"):
        write_app(apps, name, f"com.rel.{name}", WORKER, importance="service")
    async with booted(apps, hal_args=("--hang-timeout-ms", "400")) as emu:
        with trio.fail_after(180):  # a hang anywhere is a failure, not a stuck suite
            await _faults(emu)


async def _faults(emu) -> None:
    am = await get(emu, "activity", IActivityManager)
    await wait_until(lambda: _hal_connected(emu))
    baseline = await settled_baseline(emu)
    await am.startApp("com.rel.exec_npu", 0)
    await am.startApp("com.rel.exec_dsp", 0)
    npu_app = await wait_story(emu, "exec_npu", lambda s: s["executions"] >= 3)
    await wait_story(emu, "exec_dsp", lambda s: s["executions"] >= 3)

    # A driver work failure: one FAILED end; the app sees the error and goes on.
    control = await get(emu, HAL_CONTROL, IHalControl)
    await control.injectFault("emu-npu", FAULT_FAIL_NEXT_WORK, 0.0)
    after = await wait_story(emu, "exec_npu", lambda s: s.get("error_count", 0) >= 1)
    assert "OpFailedError" in after["errors"][0][1] or "FAILED" in after["errors"][0][2], after["errors"]
    n = after["executions"]
    await wait_story(emu, "exec_npu", lambda s: s["executions"] >= n + 3 and s["last_ok"])
    # The HAL's undebounced record has the FAILED end (the npu service's copy is
    # debounced: a uid that keeps asking has its ends held back).
    failed = [e for e in await control.recentWorkEvents(500, 0)
              if e.kind == KIND_ENDED and e.reason == END_FAILED and e.deviceName == "emu-npu"]
    assert len(failed) == 1 and failed[0].info.uid == npu_app["uid"], failed

    # A hung channel: the watchdog (400 ms here) resets it, the stuck work fails.
    dsp_before = story(emu, "exec_dsp")
    await control.injectFault("emu-dsp", FAULT_HANG_CHANNEL, 0.0)
    hung = await wait_story(emu, "exec_dsp", lambda s: s.get("error_count", 0) > dsp_before.get("error_count", 0),
                            timeout=20)
    n = hung["executions"]
    await wait_story(emu, "exec_dsp", lambda s: s["executions"] >= n + 3 and s["last_ok"], timeout=20)
    assert "restarts 1" in await control.dump() or "reset" in (emu.runtime_dir / "logcat").read_text()

    # The HAL SIGKILLed, then the driver crashing it: init restarts it (as Android's
    # init restarts a crashed HAL service), the npu service notices the death,
    # reconnects to the new HAL, keeps the apps' requests, and the apps compute again.
    for round_, how in enumerate(("sigkill", "driver-crash"), start=1):
        dump = await npu_dump(emu)
        deaths, connects = dump["hal"]["deaths"], dump["hal"]["connects"]
        requests_before = sorted((r["uid"], r["id"], r["state"]) for r in dump["requests"])
        assert [s for _, _, s in requests_before] == ["loaded", "loaded"]
        recovered = story(emu, "exec_npu")["recovered"]
        proc = emu.process("hal")
        assert emu.hal_generation == round_ - 1 and await _hal_registered_by(emu, proc.pid)
        if how == "sigkill":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            control = await get(emu, HAL_CONTROL, IHalControl)
            with pytest.raises(Exception):  # noqa: B017 - the HAL dies under the call
                await control.injectFault("emu-npu", FAULT_CRASH, 0.0)
        status = await proc.wait()
        assert status == (-signal.SIGKILL if how == "sigkill" else -signal.SIGABRT), status
        # The npu service counts the death. Its "not connected" is a moment that init's
        # restart may end before anyone looks; the count stays.
        await wait_until(lambda: _hal_state(emu, lambda h: h["deaths"] == deaths + 1))
        # Across the HAL's death the requests stay on file as they were.
        dump = await npu_dump(emu)
        assert sorted((r["uid"], r["id"], r["state"]) for r in dump["requests"]) == requests_before
        # init's new HAL, and the npu service on it: connected once more, configs pushed.
        await wait_until(lambda: _hal_state(emu, lambda h: h["connected"] and h["connects"] == connects + 1),
                         timeout=20)
        assert emu.hal_generation == round_ and emu.pids["hal"] != proc.pid
        assert await _hal_registered_by(emu, emu.pids["hal"])
        dump = await npu_dump(emu)
        assert all(c["pushed"] for c in dump["scheduling_configs"]), dump["scheduling_configs"]
        for name in ("exec_npu", "exec_dsp"):
            s = await wait_story(emu, name, lambda s: s["recovered"] >= round_, timeout=30)
            n = s["executions"]
            await wait_story(emu, name, lambda s: s["executions"] >= n + 3 and s["last_ok"], timeout=30)
        assert story(emu, "exec_npu")["recovered"] == recovered + 1
        dump = await npu_dump(emu)
        assert sorted((r["uid"], r["id"], r["state"]) for r in dump["requests"]) == requests_before
        if round_ == 1:
            # The first HAL restart makes connections that then live as long as the
            # HAL does (the servicemanager's death links to the new HAL's services,
            # the npu service's new proxies). From here on, a HAL death must cost
            # nothing: the second one is measured against this.
            baseline = await settled_baseline(emu, ("servicemanager", "system_server"))

    # Done: both apps go, and nothing is left anywhere (the HAL is a new process:
    # it must hold exactly nothing).
    await am.killApp("com.rel.exec_npu")
    await am.killApp("com.rel.exec_dsp")
    for name in ("servicemanager", "system_server"):
        assert emu.process(name).returncode is None
    hal_pid = emu.pids["hal"]
    hal_now = ProcFacts.of(hal_pid)
    await assert_nothing_left(emu, baseline)
    final = ProcFacts.of(hal_pid)
    assert final.memfd_fds == 0 and final.memfd_maps == 0, final
    assert final.fds <= hal_now.fds


async def _hal_connected(emu) -> bool:
    return (await npu_dump(emu))["hal"]["connected"]


async def _hal_state(emu, predicate) -> bool:
    return predicate((await npu_dump(emu))["hal"])


async def _hal_registered_by(emu, pid: int) -> bool:
    from framework.binder import defaultServiceManager

    binder = await defaultServiceManager(emu.runtime).checkService(HAL_CONTROL)
    return binder is not None and binder.isBinderAlive() and getattr(binder, "_address", "").startswith(f"binder-{pid}-")
