"""The sample apps' own pieces: their numpy references, their reports, their load slots.

An app that "checks its results against a reference it computes itself" is only as
good as that reference: each model's numpy reference must equal what the C kernels
(the same ones every device runs) compute, and must notice a wrong answer.
"""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
import trio

from apps._kit import LoadSlot, Report, checked_inference, close_enough, convnet, mlp, percentile
from framework.nn import OpFailedError, _cpu_kernels, open_nn_runtime
from framework.npumanager import NpuManager, SynchronousExecutor
from test_server_hal import world  # noqa: F401  (the real-HAL world fixture, for the loading tests)


def _run_on_kernels(model, x: np.ndarray, out_shape) -> np.ndarray:
    out = np.zeros(out_shape, dtype=np.float32)
    _cpu_kernels.runModel(model.to_hal(), [np.ascontiguousarray(x, dtype=np.float32)], [out])
    return out


@pytest.mark.parametrize("sizes", [(64, 128, 10), (256, 512, 512, 256), (32, 64, 8)])
def test_mlp_reference_equals_the_kernels(sizes):
    model, reference = mlp(seed=3, sizes=sizes)
    x = np.random.default_rng(0).standard_normal((1, sizes[0])).astype(np.float32)
    got = _run_on_kernels(model, x, (1, sizes[-1]))
    want = reference(x)
    assert close_enough(got, want)
    assert want.sum() == pytest.approx(1.0, abs=1e-5)  # a softmax
    wrong = got.copy()
    wrong[0, 0] += 0.01
    assert not close_enough(wrong, want)


def test_convnet_reference_equals_the_kernels():
    model, reference = convnet(seed=11, size=24, channels=3, filters=16, depth=4)
    img = np.random.default_rng(1).random((1, 24, 24, 3), dtype=np.float32)
    got = _run_on_kernels(model, img, (1, 24, 24, 16))
    assert close_enough(got, reference(img))
    assert (got >= 0).all() and got.max() > 0  # RELU'd, not all zero


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50.0, 99.0, 100.0)
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0


class _Context:
    def getPackageName(self):
        return "com.example.test"

    def getUid(self):
        return 10042


def test_report_is_saved_as_json_with_latency_percentiles(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("NPUEMU_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "apps").mkdir()
    report = Report("camera", _Context())
    for ms in (10.0, 20.0, 30.0, 40.0):
        report.inference(ms, ok=True, device="emu-npu", device_ms=ms / 10)
    report.inference(99.0, ok=False, device="nnapi-reference", why="output 1: error 3.00e-03 of its range")
    report.bump("loads")
    report.save()
    saved = json.loads((tmp_path / "apps" / "camera.json").read_text())
    assert (saved["inferences"], saved["results_ok"], saved["results_bad"], saved["loads"]) == (5, 4, 1, 1)
    assert (saved["p50_ms"], saved["p99_ms"]) == (30.0, 99.0)
    assert (saved["device_p50_ms"], saved["device_p99_ms"]) == (2.0, 4.0)  # only the measured ones
    assert "latencies_ms" not in saved and "device_ms" not in saved
    assert saved["devices"] == ["emu-npu", "nnapi-reference"]
    assert saved["uid"] == 10042 and saved["package"] == "com.example.test"
    assert any(e["kind"] == "wrong_result" for e in saved["events"])
    assert "nnapi-reference returned a result that differs from the reference: output 1" in caplog.text
    assert report.new_request_id() == 1 and report.new_request_id() == 2


class _FakeNpu:
    NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW = NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW

    def __init__(self):
        self.filed = []

    async def requestCanLoadModel(self, request, callback, executor):  # noqa: N802
        self.filed.append((request, callback, executor))


async def test_load_slot_turns_callbacks_into_events(tmp_path, monkeypatch):
    monkeypatch.delenv("NPUEMU_RUNTIME_DIR", raising=False)
    report = Report("photos", _Context())
    npu = _FakeNpu()
    slot = LoadSlot(npu, SynchronousExecutor(), report, NpuManager.NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB,
                    NpuManager.NPU_MODEL_PRIORITY_BACKGROUND)
    await slot.file()
    (request, callback, _), = npu.filed
    assert callback is slot and request.getPriority() == NpuManager.NPU_MODEL_PRIORITY_BACKGROUND
    listener = object()

    async def service():
        await slot.onCanLoadModel(request, NpuManager.NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD, listener)
        await slot.onCanLoadModel(request, NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW, listener)
        await slot.onRequestUnloadModel(request, 3)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(service)
        assert await slot.wait_can_load_now() is True
    assert slot.listener is listener
    assert slot.poll().reason == 3 and slot.poll() is None
    assert report.data["statuses"] == [1, 0] and report.data["unload_reasons"] == [3]
    await slot.onModelLoadRequestComplete(request, NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE)
    assert slot.done and slot.poll().kind == "complete"


class _Compilation:
    """Executions that answer ``answer(x)``, or raise ``error``; each remembers its job priority."""

    def __init__(self, answer=None, error=None):
        self.answer, self.error, self.priorities = answer, error, []

    def createExecution(self):  # noqa: N802
        compilation = self

        class Execution:
            def setInput(self, index, x):  # noqa: N802
                self.x = x

            def setJobPriority(self, priority):  # noqa: N802
                compilation.priorities.append(priority)

            async def compute_async(self):
                await trio.lowlevel.checkpoint()
                if compilation.error is not None:
                    raise compilation.error
                return [compilation.answer(self.x)]

        return Execution()


async def test_checked_inference_counts_right_and_wrong_results_and_keeps_failures(monkeypatch):
    monkeypatch.delenv("NPUEMU_RUNTIME_DIR", raising=False)
    report = Report("camera", _Context())
    _, reference = mlp(seed=3, sizes=(4, 8, 2))
    x = np.ones((1, 4), np.float32)
    right = _Compilation(answer=reference)
    assert await checked_inference(right, x, reference, report, "emu-npu", job_priority=100) is None
    assert await checked_inference(_Compilation(answer=lambda x: reference(x) + 0.1), x, reference, report, "emu-gpu") is None
    assert (report.data["inferences"], report.data["results_ok"], report.data["results_bad"]) == (2, 1, 1)
    assert right.priorities == [100] and report.data["devices"] == ["emu-npu", "emu-gpu"]
    failing = _Compilation(error=OpFailedError("refused"))
    assert isinstance(await checked_inference(failing, x, reference, report, "emu-npu"), OpFailedError)
    assert report.data["inferences"] == 2 and report.data["errors"] == [f"emu-npu: {failing.error}"]


class _Listener:
    def __init__(self):
        self.unloaded = []

    async def notifyModelUnloaded(self, request):  # noqa: N802
        self.unloaded.append(request)


async def test_load_slot_release_tells_the_service_once_and_never_after_the_request_ended(monkeypatch):
    monkeypatch.delenv("NPUEMU_RUNTIME_DIR", raising=False)
    report = Report("photos", _Context())
    slot = LoadSlot(_FakeNpu(), SynchronousExecutor(), report, NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB,
                    NpuManager.NPU_MODEL_PRIORITY_NORMAL)
    slot.listener = listener = _Listener()
    await slot.release("done", after_ms=5.0)
    assert listener.unloaded == [slot.request] and report.data["unloads"] == 1
    assert report.data["events"][-1]["kind"] == "unloaded" and report.data["events"][-1]["after_ms"] == 5.0
    slot.done = True  # the service ended the request: there is nothing to tell it
    await slot.release("again")
    assert listener.unloaded == [slot.request] and report.data["unloads"] == 1


# -- loading an approved request's model: what CAN_LOAD_NOW does not promise --------------
#
# Issue 12 point 9: under the budget policy a more important app's request cancels an
# approved request that is still compiling (rule 4) and takes its budget at once (rule 8),
# while the cancelled app's model may still sit in device memory until that app learns
# of the cancellation and releases it. The new holder's prepareModel then fails with
# RESOURCE_EXHAUSTED_PERSISTENT (WEIGHT_MEMORY_FULL). An app must give the approval back,
# wait and ask again; the cancelled app must release what it compiled, unused. These run
# the real HAL (virtual-clock driver), system_server and two apps in one trio run.

GIB = 1 << 30
_L = NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G  # weight 4 of the default maxBudget 4


class _App:
    """One in-process app's NpuManager, report and NNAPI runtime."""

    def __init__(self, app, name: str, nn) -> None:
        self.context = app.context
        self.npu = app.context.getSystemService("npu")
        self.report = Report(name, app.context)
        self.nn = nn
        self.model, _ = mlp(seed=1, sizes=(8, 8, 4))

    def slot(self) -> LoadSlot:
        return LoadSlot(self.npu, self.context.getMainExecutor(), self.report, _L, NpuManager.NPU_MODEL_PRIORITY_NORMAL)

    def compilation(self, slot: LoadSlot, size: int):
        c = self.nn.createCompilationForDevices(self.model, [self.nn.getDeviceByName("emu-npu")])  # 4 GiB of weights
        c.setEmulatedModelSize(size)
        c.setModelLoadRequest(slot.request)
        return c

    async def approved(self, world) -> LoadSlot:
        slot = self.slot()
        await slot.file()
        with trio.fail_after(5):
            assert await slot.wait_can_load_now()
        return slot


def _held(world, app: _App) -> list[int]:
    return sorted(p.load_request for p in world.real_hal.prepared if p.owner_uid == app.context.getUid())


class _Gated:
    """A compilation whose finish() waits for the test to open the gate (a slow compile)."""

    def __init__(self, compilation) -> None:
        self.compilation = compilation
        self.gate = trio.Event()

    async def finish(self) -> None:
        await self.gate.wait()
        await self.compilation.finish()

    async def aclose(self) -> None:
        await self.compilation.aclose()


@contextlib.asynccontextmanager
async def _two_apps(world, monkeypatch):
    """A cached app (rule 3's victim) and a foreground one, under the budget policy."""
    monkeypatch.delenv("NPUEMU_RUNTIME_DIR", raising=False)
    bg_app = await world.launch("com.test.bg")
    fg_app = await world.launch("com.test.fg")
    await fg_app.context.getSystemService("npu").setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, None)
    async with open_nn_runtime(bg_app.context.runtime, environ={}) as bg_nn, \
            open_nn_runtime(fg_app.context.runtime, environ={}) as fg_nn:
        yield _App(bg_app, "bg", bg_nn), _App(fg_app, "fg", fg_nn)


async def test_a_load_refused_for_memory_gives_the_approval_back_and_the_next_request_loads(
        autojump_clock, world, monkeypatch):
    async with _two_apps(world, monkeypatch) as (bg, fg):
        # The cached app is approved and compiles 3 GiB, but has not said "loaded" yet.
        bg_slot = await bg.approved(world)
        bg_compilation = bg.compilation(bg_slot, 3 * GIB)
        await bg_compilation.finish()
        # The foreground app's request cancels it (rule 4) and is granted at once (rule 5).
        fg_slot = await fg.approved(world)
        await world.settle()
        assert bg_slot.done and bg.report.data["completions"] == [NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED]
        # Its 2 GiB do not fit beside the cancelled app's 3 GiB: the load is refused, the
        # approval given back, nothing of it left in the HAL or the service.
        assert await fg_slot.load(fg.compilation(fg_slot, 2 * GIB)) is False
        await world.settle()
        assert fg_slot.done and fg.report.data["completions"] == [NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED]
        assert fg.report.data["load_retries"] == 1
        assert any(e["kind"] == "device_memory_full" for e in fg.report.data["events"])
        assert _held(world, fg) == [] and _held(world, bg) == [bg_slot.request.getId()]
        assert world.system.npu.dump_data()["requests"] == []
        assert world.system.npu.dump_data()["budget"]["in_use"] == 0
        # The cancelled app learns and releases; the foreground app asks again and loads.
        await bg_compilation.aclose()
        fg_again = await fg.approved(world)
        compilation = fg.compilation(fg_again, 2 * GIB)
        assert await fg_again.load(compilation) is True
        await world.settle()
        assert _held(world, fg) == [fg_again.request.getId()] and _held(world, bg) == []
        assert [r["state"] for r in world.system.npu.dump_data()["requests"]] == ["loaded"]
        await compilation.aclose()
        await fg_again.listener.notifyModelUnloaded(fg_again.request)


async def test_a_request_cancelled_while_its_model_compiles_releases_the_model_unused(
        autojump_clock, world, monkeypatch):
    async with _two_apps(world, monkeypatch) as (bg, fg):
        # Cancelled before it started compiling: nothing reaches the device.
        slot = await bg.approved(world)
        fg_slot = await fg.approved(world)
        await world.settle()
        assert await slot.load(bg.compilation(slot, GIB)) is False
        assert _held(world, bg) == [] and world.real_hal.prepared == set()
        await fg_slot.listener.notifyModelUnloaded(fg_slot.request)
        await world.settle()
        # Cancelled while compiling: the compile ends, notifyModelLoaded is refused (or
        # the callback came first), and the model is released, never reported loaded.
        slot = await bg.approved(world)
        gated = _Gated(bg.compilation(slot, GIB))
        result = {}

        async def load():
            result["loaded"] = await slot.load(gated)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(load)
            await world.settle()
            fg_slot = await fg.approved(world)
            gated.gate.set()
        assert result == {"loaded": False}
        assert _held(world, bg) == []
        assert bg.report.data["load_retries"] == 2 and bg.report.data["loads"] == 0
        assert [e["kind"] for e in bg.report.data["events"]].count("ended_while_loading") == 2
        assert [r["uid"] for r in world.system.npu.dump_data()["requests"]] == [fg.context.getUid()]
