"""The npu service over the binder: whole stacks in one trio run (see test_server_support)."""

from __future__ import annotations

import pytest
import trio

from interfaces.android.npumanager import INpuManager
from framework.binder import IllegalArgumentException, IllegalStateException, SecurityException, defaultServiceManager
from framework.npumanager import NpuManager
from test_server_support import Recorder, ask, booted, npu_of, request, world  # noqa: F401

CAN = NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW
WAIT = NpuManager.NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD
NOT = NpuManager.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED
CANCELLED = NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED
COMPLETE = NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE
BIG = NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G
SMALL = NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB


async def test_status_quo_grants_at_once_and_unload_completes(autojump_clock, world):
    await booted(world)
    app = await world.launch("com.test.fg")
    npu, rec = npu_of(app), Recorder()
    await npu.requestCanLoadModel(request(1, BIG), rec, app.context.getMainExecutor())
    await world.settle()
    assert rec.events == [("can_load", 1, CAN), ("loaded", 1)]
    await rec.listener.notifyModelUnloaded(request(1, BIG))
    await world.settle()
    assert rec.events[-1] == ("complete", 1, COMPLETE)


async def test_foreground_request_displaces_a_background_model(autojump_clock, world):
    system = await booted(world)
    bg = await world.launch("com.test.bg")
    fg = await world.launch("com.test.fg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, {"maxBudget": 4})
    bg_rec, fg_rec = Recorder(), Recorder()
    await ask(world, bg, request(1, BIG, 1000), bg_rec)
    assert bg_rec.events == [("can_load", 1, CAN), ("loaded", 1)]
    await ask(world, fg, request(7, BIG), fg_rec)
    assert bg_rec.events[2:] == [("unload", 1, NpuManager.NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE), ("unloaded", 1), ("complete", 1, COMPLETE)]
    assert fg_rec.events == [("can_load", 7, WAIT), ("can_load", 7, CAN), ("loaded", 7)]


async def test_not_prioritized_when_only_more_important_uids_hold_the_budget(autojump_clock, world):
    await booted(world)
    fg = await world.launch("com.test.fg")
    bg = await world.launch("com.test.bg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, None)
    fg_rec, bg_rec = Recorder(), Recorder()
    await ask(world, fg, request(1, BIG), fg_rec)
    await ask(world, bg, request(2, SMALL, 1000), bg_rec)
    assert bg_rec.events == [("can_load", 2, NOT)]
    assert fg_rec.events == [("can_load", 1, CAN), ("loaded", 1)]  # nobody touched
    # when the foreground lets go, the waiting request is granted
    await fg_rec.listener.notifyModelUnloaded(request(1, BIG))
    await world.settle()
    assert bg_rec.events[1:] == [("can_load", 2, CAN), ("loaded", 2)]


async def test_turn_taking_between_equals(autojump_clock, world):
    system = await booted(world)
    a = await world.launch("com.test.a")
    b = await world.launch("com.test.b")
    await npu_of(a).setPolicy(NpuManager.NPU_MODEL_POLICY_TURN_TAKING, None)
    ra, rb = Recorder(), Recorder()
    await ask(world, a, request(1), ra)
    await ask(world, b, request(1), rb)
    assert rb.events == [("can_load", 1, NOT)]  # a has not run yet: it keeps its model
    uid_a = a.context.getUid()
    await world.hal.work(uid_a)  # a completes work while b waits: a's turn is over
    await world.settle()
    assert ra.events[2:] == [("unload", 1, NpuManager.NPU_MODEL_UNLOAD_REASON_TURN_TAKING), ("unloaded", 1), ("complete", 1, COMPLETE)]
    assert rb.events[1:] == [("can_load", 1, CAN), ("loaded", 1)]
    assert system.npu.dump_data()["counters"]["work_completed"] == 1


async def test_cancelling_a_pending_request(autojump_clock, world):
    await booted(world)
    fg = await world.launch("com.test.fg")
    bg = await world.launch("com.test.bg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_TURN_TAKING, None)
    rf, rb = Recorder(), Recorder()
    await ask(world, fg, request(1), rf)
    await ask(world, bg, request(5), rb)
    assert rb.events == [("can_load", 5, NOT)]
    await npu_of(bg).cancelModelLoad(request(5))
    await world.settle()
    assert rb.events[1:] == [("complete", 5, CANCELLED)]
    # ended: a second cancel and a notify are refused, clearly
    with pytest.raises(IllegalStateException, match="already ended"):
        await npu_of(bg).cancelModelLoad(request(5))
    # the foreground unloading does not resurrect it
    await rf.listener.notifyModelUnloaded(request(1))
    await world.settle()
    assert rb.events[1:] == [("complete", 5, CANCELLED)]


async def test_an_app_that_ignores_the_unload_request_is_revoked_at_the_deadline(autojump_clock, world):
    system = await booted(world, unload_timeout=2.0)
    bg = await world.launch("com.test.bg")
    fg = await world.launch("com.test.fg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, None)
    stubborn, rf = Recorder(auto_unload=False), Recorder()
    await ask(world, bg, request(1, BIG, 1000), stubborn)
    t0 = trio.current_time()
    await npu_of(fg).requestCanLoadModel(request(2, BIG), rf, fg.context.getMainExecutor())
    await world.settle(1.0)
    assert rf.events == [("can_load", 2, WAIT)]
    assert world.hal.revoked_requests == []
    await world.settle(1.5)
    bg_uid = bg.context.getUid()
    assert world.hal.revoked_requests == [(bg_uid, 1, [])]  # that request's models, none of another kept
    assert world.hal.revoked == []  # not every model of the uid
    assert stubborn.events[-1] == ("complete", 1, CANCELLED)
    assert rf.events[1:] == [("can_load", 2, CAN), ("loaded", 2)]
    assert system.npu.dump_data()["counters"]["revoked"] == 1
    assert trio.current_time() - t0 >= 2.0


async def test_callers_need_the_permission(autojump_clock, world):
    await booted(world)
    app = await world.launch("com.test.noperm")
    with pytest.raises(SecurityException, match="ACCESS_NPU_MODEL_MANAGER_API"):
        await npu_of(app).requestCanLoadModel(request(1), Recorder(), app.context.getMainExecutor())
    with pytest.raises(SecurityException):
        await npu_of(app).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, None)


async def test_missing_feature_is_warned_or_blocked(autojump_clock, world, caplog):
    await booted(world)
    app = await world.launch("com.test.legacy")
    rec = Recorder()
    await ask(world, app, request(1), rec)
    assert rec.events[0] == ("can_load", 1, CAN)
    assert "will soon be blocked" in caplog.text


async def test_block_flag_refuses_apps_without_the_feature(autojump_clock, world):
    system = await booted(world, block_missing_feature=True)
    app = await world.launch("com.test.legacy")
    with pytest.raises(SecurityException, match="blocked"):
        await npu_of(app).requestCanLoadModel(request(1), Recorder(), app.context.getMainExecutor())
    await world.settle()
    uid = app.context.getUid()
    assert world.hal.configs[uid].hasDirectAccess is False
    fg = await world.launch("com.test.fg")
    assert world.hal.configs[fg.context.getUid()].hasDirectAccess is True
    assert system.npu.dump_data()["block_missing_feature"] is True


async def test_wrong_calls_are_clear_errors_and_change_nothing(autojump_clock, world):
    system = await booted(world)
    app = await world.launch("com.test.fg")
    npu, rec = npu_of(app), Recorder(auto_load=False)
    ex = app.context.getMainExecutor()
    await npu.requestCanLoadModel(request(1), rec, ex)
    with pytest.raises(IllegalArgumentException, match="already in use"):
        await npu.requestCanLoadModel(request(1), Recorder(), ex)
    with pytest.raises(IllegalStateException, match="never requested"):
        await npu.cancelModelLoad(request(99))
    await world.settle()
    assert rec.events == [("can_load", 1, CAN)]
    await rec.listener.notifyModelLoaded(request(1))
    with pytest.raises(IllegalStateException, match="already notified"):
        await rec.listener.notifyModelLoaded(request(1))
    with pytest.raises(IllegalArgumentException, match="maxBudget"):
        await npu.setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, {"maxBudget": 0})
    with pytest.raises(IllegalArgumentException, match="unknown"):
        await npu.setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, {"maxbudget": 3})
    data = system.npu.dump_data()
    assert data["policy"]["name"] == "status-quo"
    assert [(r["id"], r["state"]) for r in data["requests"]] == [(1, "loaded")]


async def test_a_hand_made_client_cannot_break_the_rules(autojump_clock, world):
    """The service checks the same rules itself: a client bypassing NpuManager's own checks."""
    await booted(world)
    app = await world.launch("com.test.fg")
    npu = npu_of(app)
    svc = npu._service
    with pytest.raises(IllegalStateException):
        await svc.notifyModelLoaded(npu._parcel(request(3)))
    bad = npu._Parcel(id=4, size=7, priority=0)
    with pytest.raises(IllegalArgumentException, match="size"):
        await svc.canLoadModel(bad, npu._make_callback(type("T", (), {"request": request(4), "callback": Recorder(), "executor": None, "state": "pending"})()))


async def test_completed_work_counts_for_its_original_uid(autojump_clock, world):
    """Work an intermediary (uid 1000) ran on an app's behalf is the app's turn used up."""
    await booted(world)
    a = await world.launch("com.test.a")
    b = await world.launch("com.test.b")
    await npu_of(a).setPolicy(NpuManager.NPU_MODEL_POLICY_TURN_TAKING, None)
    ra, rb = Recorder(), Recorder()
    await ask(world, a, request(1), ra)
    await ask(world, b, request(1), rb)
    await world.hal.work(1000, original_uid=b.context.getUid())  # b's work: b yields nothing, it holds nothing
    await world.settle()
    assert rb.events == [("can_load", 1, NOT)] and ra.events == [("can_load", 1, CAN), ("loaded", 1)]
    await world.hal.work(1000, original_uid=a.context.getUid())
    await world.settle()
    assert ("unload", 1, NpuManager.NPU_MODEL_UNLOAD_REASON_TURN_TAKING) in ra.events
    assert rb.events[-1] == ("loaded", 1)
    await world.hal.work(a.context.getUid(), reason=3)  # FAILED work moves nothing
    await world.settle()
    assert world.system.npu.dump_data()["counters"]["work_completed"] == 2


async def test_set_unload_deadline_applies_to_unload_requests_asked_from_then_on(autojump_clock, world):
    system = await booted(world, unload_timeout=2.0)
    bg = await world.launch("com.test.bg")
    fg = await world.launch("com.test.fg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, None)
    first, second = Recorder(auto_unload=False), Recorder(auto_unload=False)
    await ask(world, bg, request(1, BIG, 1000), first)
    rf = Recorder()
    await npu_of(fg).requestCanLoadModel(request(2, BIG), rf, fg.context.getMainExecutor())
    await world.settle(0.1)
    assert first.events[-1] == ("unload", 1, NpuManager.NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE)
    async with await world.shell() as sh:
        npu = INpuManager.asInterface(await defaultServiceManager(sh).checkService("npu"))
        await npu.shellCommand(["set-unload-deadline", "500"])
    await world.settle(1.0)
    assert first.events[-1][0] == "unload"  # asked under the 2 s deadline: it keeps it
    await world.settle(1.0)
    assert first.events[-1] == ("complete", 1, CANCELLED)
    await rf.listener.notifyModelUnloaded(request(2, BIG))
    await ask(world, bg, request(3, BIG, 1000), second)
    t0 = trio.current_time()
    await npu_of(fg).requestCanLoadModel(request(4, BIG), Recorder(), fg.context.getMainExecutor())
    while not (second.events and second.events[-1] == ("complete", 3, CANCELLED)):
        await trio.sleep(0.01)
    assert 0.5 <= trio.current_time() - t0 < 0.6  # the new, shorter deadline
    assert world.system.npu.dump_data()["counters"]["revoked"] == 2
