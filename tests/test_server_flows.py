"""system_server flows around the arbiter: deaths, the HAL going away, heat, importance,
the shell's dumpsys / cmd / am, the package manager's refusals (fake HAL, one trio run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import trio

from interfaces.android.npumanager import INpuManager
from interfaces.npuemu.server import IActivityManager, IPackageManager, IThermalService
from framework.binder import IllegalArgumentException, SecurityException, defaultServiceManager
from framework.npumanager import NpuManager
from test_server_support import FakeHal, Recorder, ask, booted, npu_of, request, world  # noqa: F401

CAN = NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW
WAIT = NpuManager.NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD
NOT = NpuManager.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED
CANCELLED = NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED
COMPLETE = NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE
BIG = NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G
MANIFESTS = Path(__file__).parent / "manifests"


async def service(rt, name, iface):
    return iface.asInterface(await defaultServiceManager(rt).checkService(name))


async def test_a_dead_app_frees_its_budget_and_its_hal_models_at_once(autojump_clock, world):
    system = await booted(world)
    holder = await world.launch("com.test.fg")
    waiter = await world.launch("com.test.bg")
    await npu_of(holder).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, None)
    rh, rw = Recorder(), Recorder()
    await ask(world, holder, request(1, BIG), rh)
    await ask(world, waiter, request(2, BIG, 1000), rw)
    assert rw.events == [("can_load", 2, NOT)]
    uid = holder.context.getUid()
    t0 = trio.current_time()
    holder.kill()
    while uid not in world.hal.revoked:
        await trio.sleep(0.001)
    assert trio.current_time() - t0 < 0.2
    await world.settle()
    assert rw.events[1:] == [("can_load", 2, CAN), ("loaded", 2)]
    data = system.npu.dump_data()
    assert [r["uid"] for r in data["requests"]] == [waiter.context.getUid()]
    assert data["counters"]["dropped_at_death"] == 1
    assert system.activity.state.getUidImportance(uid) == 1000
    assert rh.events == [("can_load", 1, CAN), ("loaded", 1)]  # the dead are not called back


async def test_hal_death_and_reconnect(autojump_clock, world, caplog):
    system = await booted(world)
    app = await world.launch("com.test.fg")
    first = world.hal
    assert first.set_calls and first.callback is not None
    world.kill_hal()
    while system.npu.hal_connected:
        await trio.sleep(0.001)
    assert "Lost connection to IScheduling" in caplog.text
    # meanwhile, loads are still arbitrated (the budget is the framework's bookkeeping)
    rec = Recorder()
    await ask(world, app, request(1), rec)
    assert rec.events == [("can_load", 1, CAN), ("loaded", 1)]
    # and an importance change made while the HAL is away reaches the new HAL in full
    system.activity.set_importance("com.test.fg", "cached")
    second = await world.start_hal(FakeHal())
    with trio.fail_after(5):
        await system.npu.wait_hal_connected()
    await world.settle()
    assert second.callback is not None
    uid = app.context.getUid()
    assert second.configs[uid].minPriority == 1500  # the cached band
    assert {0, 1000, uid} <= set(second.configs)
    assert system.npu.dump_data()["hal"] == {"connected": True, "control": True, "connects": 2, "deaths": 1}


async def test_importance_changes_reach_the_hal_and_the_policy(autojump_clock, world):
    system = await booted(world)
    a = await world.launch("com.test.fg")
    b = await world.launch("com.test.bg")
    ua, ub = a.context.getUid(), b.context.getUid()
    await world.settle()
    assert world.hal.configs[ua].appPriority == 0 and world.hal.configs[ua].maxPriority == 1000
    assert world.hal.configs[ub].minPriority == 1500
    await npu_of(a).setPolicy(NpuManager.NPU_MODEL_POLICY_TURN_TAKING, None)
    ra, rb = Recorder(), Recorder()
    await ask(world, b, request(1), rb)
    await ask(world, a, request(1), ra)
    assert rb.events[-1] == ("complete", 1, COMPLETE)  # the foreground displaced the cached app
    # now the cached app comes to the foreground and the other goes to the background
    system.activity.set_importance("com.test.fg", "cached")
    system.activity.set_importance("com.test.bg", "foreground")
    await world.settle()
    assert world.hal.configs[ub].maxPriority == 1000 and world.hal.configs[ua].minPriority == 1500
    rb2 = Recorder()
    await ask(world, b, request(2), rb2)
    assert rb2.events == [("can_load", 2, WAIT), ("can_load", 2, CAN), ("loaded", 2)]
    assert ra.events[:3] == [("can_load", 1, WAIT), ("can_load", 1, CAN), ("loaded", 1)]
    assert ra.events[3:] == [("unload", 1, NpuManager.NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE), ("unloaded", 1), ("complete", 1, COMPLETE)]
    assert world.hal.update_calls  # pushed incrementally, not by a full reset


async def test_heat_takes_background_models_and_clamps_priorities(autojump_clock, world):
    system = await booted(world)
    fg = await world.launch("com.test.fg")
    bg = await world.launch("com.test.a")  # service importance
    rf, rb = Recorder(), Recorder()
    await npu_of(fg).requestCanLoadModel(request(1), rf, fg.context.getMainExecutor())
    await ask(world, bg, request(1, 0, NpuManager.NPU_MODEL_PRIORITY_BACKGROUND), rb)
    await world.hal.set_severity(3)  # SEVERE: no background-priority models
    await world.settle()
    assert rb.events[2:] == [("unload", 1, NpuManager.NPU_MODEL_UNLOAD_REASON_THERMAL), ("unloaded", 1), ("complete", 1, COMPLETE)]
    assert rf.events == [("can_load", 1, CAN), ("loaded", 1)]
    assert system.thermal.severity == 3
    await world.hal.set_severity(4)  # CRITICAL: only the foreground runs, others pinned last
    await world.settle()
    assert world.hal.configs[bg.context.getUid()].minPriority == 2000
    assert world.hal.configs[fg.context.getUid()].maxPriority == 1000
    assert system.npu.dump_data()["thermal"]["name"] == "CRITICAL"


async def test_thermal_state_is_read_when_the_hal_connects(autojump_clock, world):
    hal = FakeHal()
    hal.severity = 3
    await world.start_hal(hal)
    system = await world.start_system()
    await system.npu.wait_hal_connected()
    await world.settle()
    assert system.thermal.severity == 3 and system.npu.arbiter.thermal_severity == 3


async def test_dumpsys_thermal_says_whether_an_override_holds_the_die(autojump_clock, world):
    """`npuemu thermal set` holds the die; `dumpsys thermal` says so, as Android's
    IsStatusOverride line does, and says it cannot tell once the HAL is gone."""
    system = await booted(world)
    async with await world.shell() as sh:
        thermal = await service(sh, "thermal", IThermalService)
        assert "IsStatusOverride: false" in await thermal.dump([])
        world.hal.overridden = True
        assert "IsStatusOverride: true" in await thermal.dump([])
        assert json.loads(await thermal.dump(["--json"]))["statusOverride"] is True
        world.kill_hal()
        await world.settle()
        assert "IsStatusOverride: unknown (the HAL cannot say)" in await thermal.dump([])
        assert json.loads(await thermal.dump(["--json"]))["statusOverride"] is None
    assert system.thermal.severity == 0


async def test_dumpsys_npu_text_and_json(autojump_clock, world):
    system = await booted(world)
    app = await world.launch("com.test.fg")
    await npu_of(app).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, {"maxBudget": 6, "modelSizeWeights": {"2": 5}})
    await npu_of(app).requestCanLoadModel(request(3, BIG), Recorder(), app.context.getMainExecutor())
    await world.hal.work(app.context.getUid())
    await world.settle(0.5)
    async with await world.shell() as sh:
        npu = await service(sh, "npu", INpuManager)
        text = await npu.dump([])
        data = json.loads(await npu.dump(["--json"]))
    assert "Policy: budget" in text and "maxBudget=6" in text and "modelSizeWeights=[1, 2, 5]" in text
    assert "com.test.fg" in text and "LOADED" in text and "Budget: max 6  in use 5" in text
    assert "Priorities" in text and "Recent work events: 3" in text
    assert data["budget"]["in_use"] == 5 and data["budget"]["free"] == 1
    (req,) = data["requests"]
    assert (req["package"], req["id"], req["state"], req["size"]) == ("com.test.fg", 3, "loaded", 2)
    assert req["age_s"] >= 0.5
    assert data["loaded_models"][0]["id"] == 3
    assert any(c["uid"] == app.context.getUid() and c["appPriority"] == 0 for c in data["scheduling_configs"])
    assert [e["kind"] for e in data["recent_work_events"]] == ["requested", "started", "ended"]
    assert data["thermal"]["name"] == "NONE" and data["counters"]["work_completed"] == 1


async def test_apps_may_not_dump_or_drive_the_activity_manager(autojump_clock, world):
    await booted(world)
    app = await world.launch("com.test.fg")
    with pytest.raises(SecurityException, match="DUMP"):
        await npu_of(app)._service.dump([])
    am = await service(app.context.runtime, "activity", IActivityManager)
    with pytest.raises(SecurityException):
        await am.killApp("com.test.fg")
    with pytest.raises(SecurityException):
        await am.setImportance("com.test.fg", 400)
    assert await am.getUidImportance(app.context.getUid()) == 100


async def test_cmd_npu_through_the_shell(autojump_clock, world):
    system = await booted(world)
    async with await world.shell() as sh:
        npu = await service(sh, "npu", INpuManager)
        out = await npu.shellCommand(["set-budget-policy", "--max-budget", "8", "--weights=1,3,5"])
        assert "budget" in out and '"maxBudget": 8' in out
        assert system.npu.arbiter.policy.params() == {"maxBudget": 8, "modelSizeWeights": [1, 3, 5]}
        with pytest.raises(IllegalArgumentException, match="--weights"):
            await npu.shellCommand(["set-budget-policy", "--weights", "1,x,3"])
        with pytest.raises(IllegalArgumentException, match="takes no arguments"):
            await npu.shellCommand(["set-turn-taking-policy", "extra"])
        with pytest.raises(IllegalArgumentException, match="unknown command"):
            await npu.shellCommand(["frobnicate"])
        assert system.npu.arbiter.policy.name == "budget"  # refused commands changed nothing
        await npu.shellCommand(["set-turn-taking-policy"])
        assert system.npu.arbiter.policy.name == "turn-taking"
        assert "Policy: turn-taking" in await npu.shellCommand(["info"])
        assert "set-budget-policy" in await npu.shellCommand(["help"])


async def test_an_app_cannot_run_cmd_npu_even_with_the_npu_permission(autojump_clock, world):
    system = await booted(world)
    app = await world.launch("com.test.fg")
    npu = await service(app.context.runtime, "npu", INpuManager)
    with pytest.raises(SecurityException, match="shell"):
        await npu.shellCommand(["set-turn-taking-policy"])
    assert system.npu.arbiter.policy.name != "turn-taking"  # nothing changed


async def test_am_through_the_shell(autojump_clock, world):
    system = await booted(world)
    app = await world.launch("com.test.fg")
    async with await world.shell() as sh:
        am = await service(sh, "activity", IActivityManager)
        await am.setImportance("com.test.fg", 300)
        assert system.activity.state.getPackageImportance("com.test.fg") == 300
        text = await am.dump([])
        assert "com.test.fg" in text and "service" in text
        with pytest.raises(IllegalArgumentException):
            await am.setImportance("com.test.fg", 123)
        await am.killApp("com.test.fg")
        with trio.fail_after(1):
            await app.wait()
        await world.settle()
        assert json.loads(await am.dump(["--json"]))["processes"] == []


async def test_malicious_and_broken_manifests_are_refused_at_install(autojump_clock, world, tmp_path):
    for name in ("billion_laughs", "external_entity", "external_dtd", "not_xml"):
        d = world.apps_dir / f"evil_{name}"
        d.mkdir()
        shutil.copy(MANIFESTS / f"{name}.xml", d / "AndroidManifest.xml")
    req = world.apps_dir / "needs_npu"
    req.mkdir()
    shutil.copy(MANIFESTS / "requires_npu.xml", req / "AndroidManifest.xml")
    await world.start_hal()
    system = await world.start_system(system_features=())
    refused = {Path(r["path"]).name: r["error"] for r in system.packages.dump_data()["refused"]}
    assert set(refused) == {"evil_billion_laughs", "evil_external_entity", "evil_external_dtd", "evil_not_xml", "needs_npu"}
    assert refused["needs_npu"] == "INSTALL_FAILED_MISSING_FEATURE"
    assert system.packages.packages.isPackageInstalled("com.test.fg")  # the good ones still install
    async with await world.shell() as sh:
        pm = await service(sh, "package", IPackageManager)
        text = await pm.dump([])
        assert "Refused installs: 5" in text
        with pytest.raises(Exception, match="DOCTYPE|DTD|entit"):
            await pm.installPackage(str(world.apps_dir / "evil_billion_laughs"))


async def test_a_hal_that_refuses_the_service_does_not_take_system_server_down(autojump_clock, world, caplog):
    hal = FakeHal(refuse=True)
    await world.start_hal(hal)
    system = await world.start_system(hal_timeout=1.0)
    await world.settle(2.5)
    assert len(hal.refusals) >= 2 and not system.npu.hal_connected  # it keeps trying, politely
    assert "refused the npu service" in caplog.text
    app = await world.launch("com.test.fg")
    rec = Recorder()
    await ask(world, app, request(1), rec)
    assert rec.events == [("can_load", 1, CAN), ("loaded", 1)]


async def test_a_waiting_requester_that_dies_gives_its_reservation_back(autojump_clock, world):
    system = await booted(world)
    bg = await world.launch("com.test.bg")
    fg = await world.launch("com.test.fg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, None)
    slow = Recorder(auto_unload=False)
    await ask(world, bg, request(1, BIG, 1000), slow)
    await npu_of(fg).requestCanLoadModel(request(2, BIG), Recorder(), fg.context.getMainExecutor())
    await world.settle()
    assert system.npu.arbiter.budget()["reserved"] == 4
    fg.kill()
    await world.settle()
    budget = system.npu.arbiter.budget()
    assert budget["reserved"] == 0
    # the model asked to unload for it now counts for nobody; when it goes, the budget is free
    await slow.listener.notifyModelUnloaded(request(1, BIG, 1000))
    await world.settle()
    assert system.npu.arbiter.budget()["in_use"] == 0 and system.npu.dump_data()["requests"] == []


async def test_cmd_npu_set_unload_deadline_is_validated_and_dumped(autojump_clock, world):
    system = await booted(world)
    async with await world.shell() as sh:
        npu = await service(sh, "npu", INpuManager)
        assert "Unload deadline: 2 s " in await npu.shellCommand(["info"])
        assert await npu.shellCommand(["set-unload-deadline", "750"]) == "unload deadline: 750 ms\n"
        assert system.npu.arbiter.unload_timeout == 0.75
        assert "Unload deadline: 750 ms " in await npu.dump([])
        assert json.loads(await npu.dump(["--json"]))["unload_timeout_s"] == 0.75
        for bad in (["0"], ["-5"], ["1.5"], ["2s"], ["abc"], ["2147483648"], ["١٢"], [], ["100", "200"]):
            with pytest.raises(IllegalArgumentException, match="set-unload-deadline") as info:
                await npu.shellCommand(["set-unload-deadline", *bad])
            assert "\n" not in str(info.value)
        assert system.npu.arbiter.unload_timeout == 0.75  # refused values changed nothing
        assert await npu.shellCommand(["set-unload-deadline", "3000"]) == "unload deadline: 3 s\n"
        assert "set-unload-deadline MS" in await npu.shellCommand(["help"])
