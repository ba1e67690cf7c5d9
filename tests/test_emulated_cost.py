"""The emulated cost model, as a driver author reads it.

- The hardware's per-slice profile (``Driver.set_profiling``/``drain_slices``) is what it
  charged: every slice's time is its formula's, a job's slices add up to its time on the
  channel, and a checkpoint shows as a save and a restore.
- ``npuemu nn run --ops`` lists, per operation of a real model, its FLOPs and bytes: the
  face detector's convolutions count the multiply-adds their shapes give (BlazeFace short
  range is ~30 M MACs), and the listing adds up to the device time of the run, about a
  millisecond on emu-npu as on a 2019-2020 phone's NPU.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

import npuhal
from framework.cli import main
from framework.nn.tflite import loadTfLite, modelsDir
from npuhal import FuseCode, ModelBuilder, OperationType, WorkEnded, WorkStarted


def mlp():
    rng = np.random.default_rng(7)
    m = ModelBuilder()
    x = m.input((1, 256))
    h = m.operation(OperationType.FULLY_CONNECTED,
                    [x, m.constant(rng.standard_normal((256, 256), dtype=np.float32)),
                     m.constant(np.zeros(256, np.float32)), m.int32(FuseCode.RELU)], (1, 256))
    y = m.operation(OperationType.FULLY_CONNECTED,
                    [h, m.constant(rng.standard_normal((256, 256), dtype=np.float32)),
                     m.constant(np.zeros(256, np.float32)), m.int32(FuseCode.NONE)], (1, 256))
    m.output(y)
    return m.build()


def charged_ns(r) -> int:
    return max(1, math.ceil((r.overhead_ns + max(r.compute_ns, r.memory_ns)) * r.throttle + r.restore_ns))


async def test_the_profile_is_what_the_hardware_charged_a_checkpoint_included():
    async with npuhal.open_driver(clock="virtual") as driver:
        gpu = driver.device_by_name("emu-gpu")  # one channel: the second job preempts the first
        handle = driver.load_model(gpu, mlp(), cost_scale=50.0)
        driver.set_profiling()
        x = np.ones((1, 256), np.float32)
        low = driver.submit(handle, [x], uid=10001, job_priority=1000)
        driver.advance(0.3)
        high = driver.submit(handle, [x], uid=10001, job_priority=0)
        driver.run_until_idle()
        slices, dropped = driver.drain_slices()
        events = [e for e in driver.drain_events() if isinstance(e, (WorkStarted, WorkEnded))]
    assert dropped == 0
    # on the channel: STARTED .. ENDED segments per work (the low one paused, then resumed)
    on_channel = {low: 0, high: 0}
    started = {}
    for e in events:
        if isinstance(e, WorkStarted):
            started[e.info.id] = e.time_ns
        else:
            on_channel[e.info.id] += e.time_ns - started.pop(e.info.id)
    computed = [r for r in slices if r.kind == "compute"]
    saves = [r for r in slices if r.kind == "save"]
    for work in (low, high):
        mine = [r for r in computed if r.work_id == work]
        # every slice of the model ran once (the checkpoint resumed, nothing was redone)
        assert sorted(r.slice for r in mine) == list(range(len(mine)))
        assert {r.operation for r in mine} == {0, 1}
        assert sum(r.end_ns - r.start_ns for r in mine) == on_channel[work]
    for r in computed:
        assert r.end_ns - r.start_ns == charged_ns(r)
        assert r.hw_device == 1 and r.channel == 0 and r.compute_class == "float32"
        assert r.operation_type == OperationType.FULLY_CONNECTED
        assert r.bound == "memory"  # 256 KiB of weights for 128 KFLOP: the GPU waits for memory
    # the first layer reads the model input and its weights and writes h; the second reads h
    # where the first left it (a temporary is charged once, to its writer)
    first = sum(r.bytes for r in computed if r.work_id == high and r.operation == 0)
    second = sum(r.bytes for r in computed if r.work_id == high and r.operation == 1)
    assert first == pytest.approx((256 + 256 * 256 + 256 + 256) * 4)
    assert second == pytest.approx((256 * 256 + 256 + 256) * 4)
    # the preemption: one save of the low job, whose next slice pays the restore
    assert [s.work_id for s in saves] == [low]
    resumed = min((r for r in computed if r.work_id == low and r.start_ns > saves[0].start_ns),
                  key=lambda r: r.start_ns)
    assert resumed.restore_ns == saves[0].end_ns - saves[0].start_ns > 0


def test_profiling_refuses_a_bad_capacity():
    with npuhal.Driver.open(clock="virtual") as driver:
        with pytest.raises(npuhal.NpuValueError):
            driver.set_profiling(-1)
        driver.set_profiling(None)  # off
        assert driver.drain_slices() == ([], 0)


def test_profiling_keeps_what_fits_and_counts_the_rest():
    with npuhal.Driver.open(clock="virtual") as driver:
        handle = driver.load_model(driver.device_by_name("emu-npu"), mlp())
        driver.set_profiling(3)
        driver.submit(handle, [np.ones((1, 256), np.float32)], uid=10001, job_priority=500)
        driver.run_until_idle()
        slices, dropped = driver.drain_slices()
        assert len(slices) == 3 and dropped == 5  # 2 operations x 4 slices
        assert driver.drain_slices() == ([], 0)


# ---- a real model: npuemu nn run --ops ------------------------------------------------------


def face_detector():
    path = modelsDir() / "face_detection_short_range.tflite"
    if not path.is_file():
        pytest.fail(f"{path} is missing: `make models` fetches MediaPipe's models (make test does it first)")
    return path


def macs(model, index: int) -> int:
    """A convolution's multiply-adds from its TFLite shapes alone."""
    op = model.operations[index]
    out = int(np.prod(model.tensors[op.outputs[0]].shape))
    filt = model.tensors[op.inputs[1]].shape  # CONV_2D [out, kh, kw, in]; DEPTHWISE [1, kh, kw, out]
    return out * filt[1] * filt[2] * (filt[3] if op.name == "CONV_2D" else 1)


def test_nn_run_ops_lists_the_face_detector_per_operation_in_about_a_millisecond():
    path = face_detector()
    result = CliRunner().invoke(main, ["nn", "run", str(path), "--offline", "--device", "emu-npu", "--ops", "--json"],
                                env={})
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    costs = report["operationCosts"]
    assert len(costs) == report["partitions"][0]["operations"] == 90
    assert {c["device"] for c in costs} == {"emu-npu"}
    # the listing is the run: its operations add up to the device's ON_HARDWARE time
    device_us = report["partitions"][0]["emulatedDeviceMs"] * 1e3
    assert sum(c["emulatedUs"] for c in costs) == pytest.approx(device_us, abs=1e-3)
    # a phone's NPU runs BlazeFace in about a millisecond
    assert 700 <= device_us <= 1500
    # FLOPs: twice the multiply-adds the shapes give, per convolution
    model = loadTfLite(path)
    convs = [c for c in costs if c["tflite"] in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    assert len(convs) == 37
    for c in convs:
        assert c["flops"] == 2 * macs(model, c["tfliteIndex"]), c
    total_macs = sum(c["flops"] for c in costs) / 2
    assert 29e6 <= total_macs <= 33e6  # BlazeFace short range: ~30 M MACs at 128x128
    for c in costs:
        fixed, work = c["overheadUs"], max(c["computeUs"], c["memoryUs"])
        assert c["bound"] == ("overhead" if fixed >= work else "compute" if c["computeUs"] >= c["memoryUs"]
                              else "memory"), c
        assert c["emulatedUs"] == pytest.approx(fixed + work, rel=1e-6, abs=c["slices"] * 1e-3), c


def test_nn_run_ops_as_a_table_and_only_offline():
    path = face_detector()
    table = CliRunner().invoke(main, ["nn", "run", str(path), "--offline", "--device", "emu-gpu", "--ops"], env={})
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:3] == ["part", "tflite", "op"])
    assert "#2 CONV_2D" in lines[head + 1] and "emu-gpu" in lines[head + 1]
    assert any(line.split()[:1] == ["total"] for line in lines[head:])
    online = CliRunner().invoke(main, ["nn", "run", str(path), "--ops"], env={})
    assert online.exit_code == 2 and "--ops needs --offline" in online.output


def test_nn_run_trace_has_a_span_per_operation_on_the_device_channel(tmp_path):
    path = face_detector()
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["nn", "run", str(path), "--offline", "--device", "emu-npu", "--trace", str(out),
                                       "--json"], env={})
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    trace = json.loads(out.read_text())
    assert report["trace"]["events"] == len(trace["traceEvents"])
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert list(names.values()) == ["emu-npu (emulated time)"]
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    partitions = [e for e in spans if e["name"].startswith("partition")]
    operations = [e for e in spans if e["name"].startswith("#")]
    assert len(partitions) == 1 and len(operations) == 90  # each operation's slices run back to back
    whole = partitions[0]
    assert whole["dur"] == pytest.approx(report["partitions"][0]["emulatedDeviceMs"] * 1e3, abs=1e-3)
    for op in operations:
        assert op["tid"] == whole["tid"] and whole["ts"] <= op["ts"] and op["ts"] + op["dur"] <= whole["ts"] + whole["dur"] + 1e-6
    assert sum(op["dur"] for op in operations) == pytest.approx(whole["dur"], abs=1e-3)
    first = min(operations, key=lambda e: e["ts"])
    assert first["name"] == "#2 CONV_2D" and first["args"]["flops"] == 2 * 64 * 64 * 24 * 5 * 5 * 3
    assert first["args"]["slices"] == 4 and first["args"]["class"] == "float32"


def test_nn_run_offline_gives_each_partition_its_exact_device_time_across_devices():
    path = modelsDir() / "palm_detection_lite.tflite"
    if not path.is_file():
        pytest.fail(f"{path} is missing: `make models` fetches MediaPipe's models (make test does it first)")
    result = CliRunner().invoke(main, ["nn", "run", str(path), "--offline", "--ops", "--json"], env={})
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["compilation"] == "create"
    nnapi = [p for p in report["partitions"] if p["kind"] == "nnapi"]
    assert len(nnapi) >= 2  # TFLite's CPU kernels between them: no one-device ON_HARDWARE duration
    for p in nnapi:
        listed = sum(c["emulatedUs"] for c in report["operationCosts"] if c["partition"] == p["partition"])
        assert listed > 0 and p["emulatedDeviceMs"] * 1e3 == pytest.approx(listed, abs=1e-3)
