"""The sample apps' own pieces: their numpy references, their reports, their load slots.

An app that "checks its results against a reference it computes itself" is only as
good as that reference: each model's numpy reference must equal what the C kernels
(the same ones every device runs) compute, and must notice a wrong answer.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import trio

from apps._kit import LoadSlot, Report, close_enough, convnet, mlp, percentile
from framework.nn import _cpu_kernels
from framework.npumanager import NpuManager, SynchronousExecutor


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


def test_report_is_saved_as_json_with_latency_percentiles(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUEMU_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "apps").mkdir()
    report = Report("camera", _Context())
    for ms in (10.0, 20.0, 30.0, 40.0):
        report.inference(ms, ok=True, device="emu-npu")
    report.inference(99.0, ok=False, device="nnapi-reference")
    report.bump("loads")
    report.save()
    saved = json.loads((tmp_path / "apps" / "camera.json").read_text())
    assert (saved["inferences"], saved["results_ok"], saved["results_bad"], saved["loads"]) == (5, 4, 1, 1)
    assert (saved["p50_ms"], saved["p99_ms"]) == (30.0, 99.0)
    assert saved["devices"] == ["emu-npu", "nnapi-reference"]
    assert saved["uid"] == 10042 and saved["package"] == "com.example.test"
    assert any(e["kind"] == "wrong_result" for e in saved["events"])
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
