"""The app-side NpuManager API: the builder, executors, callbacks' two forms, bundles."""

from __future__ import annotations

import logging

import pytest
import trio

from framework.binder import IllegalArgumentException, IllegalStateException
from framework.npumanager import (
    ModelLoadRequest,
    ModelLoadRequestCallback,
    NpuManager,
    SynchronousExecutor,
    TrioExecutor,
)
from test_server_support import Recorder, npu_of, request, world  # noqa: F401


def test_builder_defaults_and_values():
    r = ModelLoadRequest.Builder(7).build()
    assert (r.getId(), r.getSize(), r.getPriority()) == (7, NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB, NpuManager.NPU_MODEL_PRIORITY_NORMAL)
    big = (
        ModelLoadRequest.Builder(8)
        .setSize(NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G)
        .setPriority(NpuManager.NPU_MODEL_PRIORITY_OPPORTUNISTIC)
        .build()
    )
    assert (big.size, big.priority) == (2, 2000)
    assert big == ModelLoadRequest.Builder(8).setSize(2).setPriority(2000).build()
    assert "mId=8" in str(big)


@pytest.mark.parametrize("size", [3, -1, "0", 1.0, None, True])
def test_invalid_size_is_a_value_error_at_build(size):
    builder = ModelLoadRequest.Builder(1).setSize(size)
    with pytest.raises(ValueError, match="size"):
        builder.build()


@pytest.mark.parametrize("priority", [1, 500, -1, 3000, "0", None])
def test_invalid_priority_is_a_value_error_at_build(priority):
    with pytest.raises(ValueError, match="priority"):
        ModelLoadRequest.Builder(1).setPriority(priority).build()


@pytest.mark.parametrize("request_id", [2**31, -(2**31) - 1, "1", 1.5, None])
def test_request_ids_are_32_bit_ints(request_id):
    with pytest.raises(ValueError, match="32-bit"):
        ModelLoadRequest.Builder(request_id)


def test_constants_are_aosps():
    assert NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW == 0
    assert NpuManager.NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD == 1
    assert NpuManager.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED == 2
    assert NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED == 3
    assert NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE == 4
    assert (NpuManager.NPU_MODEL_POLICY_STATUS_QUO, NpuManager.NPU_MODEL_POLICY_TURN_TAKING, NpuManager.NPU_MODEL_POLICY_BUDGET) == (0, 1, 2)
    assert (NpuManager.NPU_MODEL_PRIORITY_NORMAL, NpuManager.NPU_MODEL_PRIORITY_BACKGROUND) == (0, 1000)
    assert (NpuManager.KEY_MAX_BUDGET, NpuManager.KEY_MODEL_SIZE_WEIGHTS) == ("maxBudget", "modelSizeWeights")


def test_synchronous_executor_runs_at_once_and_refuses_coroutines(caplog):
    ran = []
    SynchronousExecutor().execute(lambda: ran.append(1))
    assert ran == [1]

    async def coro():
        ran.append("never")

    with caplog.at_level(logging.ERROR):
        SynchronousExecutor().execute(coro)
    assert ran == [1] and "TrioExecutor" in caplog.text


async def test_trio_executor_runs_plain_and_async_and_survives_errors(autojump_clock, caplog):
    ran = []

    async def later():
        await trio.sleep(1)
        ran.append("async")

    def boom():
        raise RuntimeError("callback bug")

    async with trio.open_nursery() as nursery:
        ex = TrioExecutor(nursery)
        ex.execute(later)
        ex.execute(boom)
        ex.execute(lambda: ran.append("plain"))
    assert ran == ["plain", "async"]
    assert "callback bug" in caplog.text


class OneArg(ModelLoadRequestCallback):
    """AOSP's one-argument onRequestUnloadModel, and plain methods on a synchronous executor."""

    def __init__(self):
        self.events = []

    def onCanLoadModel(self, request, status, listener):  # noqa: N802
        self.events.append(("can_load", status))
        self.listener = listener

    def onRequestUnloadModel(self, request):  # noqa: N802
        self.events.append(("unload",))

    def onModelLoadRequestComplete(self, request, status):  # noqa: N802
        self.events.append(("complete", status))


async def test_one_argument_unload_callback_on_a_synchronous_executor(autojump_clock, world):
    await world.start_hal()
    await world.start_system()
    bg = await world.launch("com.test.bg")
    fg = await world.launch("com.test.fg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_TURN_TAKING, None)
    cb = OneArg()
    await npu_of(bg).requestCanLoadModel(request(1), cb, SynchronousExecutor())
    await world.settle()
    await cb.listener.notifyModelLoaded(request(1))
    await npu_of(fg).requestCanLoadModel(request(2), Recorder(), fg.context.getMainExecutor())
    await world.settle()
    assert cb.events == [("can_load", 0), ("unload",)]
    await cb.listener.notifyModelUnloaded(request(1))
    await world.settle()
    assert cb.events[-1] == ("complete", NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE)
    with pytest.raises(IllegalStateException, match="already ended"):
        await cb.listener.notifyModelUnloaded(request(1))


async def test_local_checks_refuse_before_any_round_trip(autojump_clock, world):
    await world.start_hal()
    system = await world.start_system()
    app = await world.launch("com.test.fg")
    npu = npu_of(app)
    with pytest.raises(TypeError, match="ModelLoadRequest"):
        await npu.requestCanLoadModel((1, 0, 0), Recorder(), app.context.getMainExecutor())
    with pytest.raises(TypeError, match="execute"):
        await npu.requestCanLoadModel(request(1), Recorder(), object())
    rec = Recorder(auto_load=False)
    await npu.requestCanLoadModel(request(1), rec, app.context.getMainExecutor())
    with pytest.raises(IllegalStateException, match="never requested"):
        await npu.cancelModelLoad(request(1, 2))  # same id, another request: not this app's
    await world.settle()
    # a request id can be used again once its request has ended
    await npu.cancelModelLoad(request(1))
    await world.settle()
    assert rec.events[-1] == ("complete", 1, NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED)
    again = Recorder()
    await npu.requestCanLoadModel(request(1), again, app.context.getMainExecutor())
    await world.settle()
    assert again.events == [("can_load", 1, 0), ("loaded", 1)]
    assert system.npu.dump_data()["counters"]["requests"] == 2


async def test_policy_bundles_in_both_forms(autojump_clock, world):
    await world.start_hal()
    system = await world.start_system()
    app = await world.launch("com.test.fg")
    npu = npu_of(app)
    await npu.setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, {"modelSizeWeights": {"2": 3}})
    assert system.npu.arbiter.policy.params() == {"maxBudget": 4, "modelSizeWeights": [1, 2, 3]}
    await npu.setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, {"maxBudget": 9, "modelSizeWeights": [2, 3, 4]})
    assert system.npu.arbiter.policy.params() == {"maxBudget": 9, "modelSizeWeights": [2, 3, 4]}
    for bad in ({"maxBudget": "9"}, {"modelSizeWeights": {"3": 1}}, {"modelSizeWeights": "1,2,4"}, [1, 2]):
        with pytest.raises(IllegalArgumentException):
            await npu.setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, bad)
    with pytest.raises(IllegalArgumentException, match="no parameters"):
        await npu.setPolicy(NpuManager.NPU_MODEL_POLICY_TURN_TAKING, {"maxBudget": 1})
    with pytest.raises(IllegalArgumentException, match="unknown policy"):
        await npu.setPolicy(7, None)
    assert system.npu.arbiter.policy.params() == {"maxBudget": 9, "modelSizeWeights": [2, 3, 4]}
