"""No app can stall, flood or fill the system: the npu service's and init's bounds, tried as a hostile app would.

Each bound is a named constant the README's "Security guarantees" section lists. The
logic is tested in one process under the autojump MockClock (the stack of
``test_server_support``); what crosses processes (a stopped app's socket filling, the
servicemanager killed, the disk full) is tried with real processes.
"""

from __future__ import annotations

import pytest
import trio

from framework.npumanager import NpuManager
from framework.server import CALLBACK_DEADLINE_S
from test_server_support import Recorder, ask, npu_of, request, world  # noqa: F401

CAN = NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW
WAIT = NpuManager.NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD
NOT = NpuManager.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED
BIG = NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G


class _Wedged:
    """An app's callback whose process takes nothing: every call hangs (a stopped app)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        async def hang(*args):
            self.calls.append(name)
            await trio.sleep_forever()

        return hang


async def _booted(world, **kw):
    await world.start_hal()
    system = await world.start_system(**kw)
    with trio.fail_after(5):
        await system.npu.wait_hal_connected()
    return system


async def test_an_app_that_takes_no_callback_delays_nobody_and_is_treated_as_dead(autojump_clock, world):
    # An unload deadline far away: only the callback deadline can end the silent app's request.
    system = await _booted(world, unload_timeout=600.0)
    svc = system.npu
    bg, fg, other = [await world.launch(p) for p in ("com.test.bg", "com.test.fg", "com.test.a")]
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, {"maxBudget": 4})
    silent_rec = Recorder()
    await ask(world, bg, request(1, BIG, NpuManager.NPU_MODEL_PRIORITY_BACKGROUND), silent_rec)
    assert silent_rec.events == [("can_load", 1, CAN), ("loaded", 1)]
    bg_uid = bg.context.getUid()
    # From now on bg's process takes nothing (stopped, or not reading its socket).
    wedged = svc._callbacks[(bg_uid, 1)] = _Wedged()

    t0 = trio.current_time()
    fg_rec, other_rec = Recorder(), Recorder()
    await npu_of(fg).requestCanLoadModel(request(7, BIG), fg_rec, fg.context.getMainExecutor())
    await npu_of(other).requestCanLoadModel(request(3), other_rec, other.context.getMainExecutor())
    await world.settle()
    # bg is asked to unload (its call hangs); fg and a bystander are answered at once.
    assert wedged.calls == ["onRequestUnloadModel"]
    assert fg_rec.events == [("can_load", 7, WAIT)]
    assert other_rec.events == [("can_load", 3, NOT)]  # behind fg's reservation (rule 2), told at once
    assert trio.current_time() - t0 < 0.1

    # At the deadline bg is treated as dead: its request goes, the HAL frees its models,
    # and fg gets the budget it waited for.
    with trio.fail_after(CALLBACK_DEADLINE_S + 1):
        while fg_rec.statuses(7)[-1:] != [("loaded", 7)]:
            await fg_rec.changed.wait()
    assert CALLBACK_DEADLINE_S <= trio.current_time() - t0 < CALLBACK_DEADLINE_S + 0.5
    assert fg_rec.events == [("can_load", 7, WAIT), ("can_load", 7, CAN), ("loaded", 7)]
    dump = svc.dump_data()
    assert [r for r in dump["requests"] if r["uid"] == bg_uid] == []
    assert dump["counters"]["callbacks_late"] == 1
    assert bg_uid in world.hal.revoked


async def test_answers_to_one_app_keep_their_order_while_another_is_wedged(autojump_clock, world):
    system = await _booted(world, unload_timeout=600.0)
    svc = system.npu
    a, b = await world.launch("com.test.a"), await world.launch("com.test.b")
    ra = Recorder()
    await ask(world, a, request(1), ra)
    svc._callbacks[(a.context.getUid(), 1)] = _Wedged()
    await npu_of(b).setPolicy(NpuManager.NPU_MODEL_POLICY_TURN_TAKING, None)
    rb = Recorder()
    await npu_of(b).requestCanLoadModel(request(1), rb, b.context.getMainExecutor())
    await world.settle()
    assert rb.events == [("can_load", 1, NOT)]
    # a's turn ends: it is asked to unload (hangs); b's answers then come in the order decided.
    await world.hal.work(a.context.getUid())
    with trio.fail_after(CALLBACK_DEADLINE_S + 1):
        while len(rb.events) < 3:
            await rb.changed.wait()
    assert rb.events == [("can_load", 1, NOT),
                         ("can_load", 1, CAN), ("loaded", 1)]
