"""The sample apps' real models: their pictures, their one-load compilations, their checks.

The camera, photos and the assistant run MediaPipe's models (``make models`` fetches
them; ``make test`` does it first). What a user of the demo relies on, checked here in
one process over the real HAL (virtual-clock reference driver) and system_server:

- the generated pictures are what the models are made for (the face detector finds the
  camera's face in every frame of its loop, the face landmark model a face in every
  gallery photo; neither finds one in a blank picture), and the same index is the same
  picture;
- a :class:`TfLiteLoad` is one load: every NNAPI partition prepared on the one device,
  under the app's request, holding the declared size once in weight memory (not once per
  partition), and revoked with that request;
- :func:`checked_run` counts a result equal to the CPU device's as right, a different one
  as wrong (saying which output), a failed inference as an error; the check's tolerance
  is test_tflite's, relative to each output's range.
"""

from __future__ import annotations

import numpy as np
import pytest
import trio

from apps._kit import (FRAME_LOOP, CpuReference, LoadSlot, Report, TfLiteLoad, camera_frame, checked_run, choose_device,
                       cpu_device, gallery_photo, mismatch, open_tflite, weight_shares)
from framework.nn import BadDataError, DeviceType, NeuralNetworksError, open_nn_runtime
from framework.nn.tflite import loadTfLite, modelsDir
from framework.npumanager import NpuManager
from test_server_hal import world  # noqa: F401  (the real-HAL world fixture)

GIB = 1 << 30


@pytest.fixture(scope="module")
def models():
    names = ("face_detection_short_range", "face_landmark", "pose_landmark_full")
    missing = [n for n in names if not (modelsDir() / f"{n}.tflite").is_file()]
    if missing:
        pytest.fail(f"{missing} missing from {modelsDir()}: `make models` fetches MediaPipe's models (make test does it first)")
    return {n: loadTfLite(n) for n in names}


def _input_shape(model):
    return model.tensors[model.inputs[0]].shape


class _Context:
    def getPackageName(self):
        return "com.example.test"

    def getUid(self):
        return 10042


# -- the pictures ------------------------------------------------------------------------------


def test_the_same_index_is_the_same_picture_and_the_camera_loops_each_second():
    shape = (1, 128, 128, 3)
    frame = camera_frame(4, shape)
    assert frame.dtype == np.float32 and frame.shape == shape and -1 <= frame.min() < frame.max() <= 1
    assert np.array_equal(frame, camera_frame(4, shape)) and np.array_equal(frame, camera_frame(4 + FRAME_LOOP, shape))
    assert not np.array_equal(frame, camera_frame(5, shape))
    photo = gallery_photo(3, (1, 192, 192, 3))
    assert np.array_equal(photo, gallery_photo(3, (1, 192, 192, 3)))
    assert not np.array_equal(photo, gallery_photo(4, (1, 192, 192, 3)))


async def test_the_detector_finds_the_cameras_face_and_the_landmark_model_each_photos(autojump_clock, world, models,
                                                                                      monkeypatch):
    monkeypatch.delenv("NPUEMU_RUNTIME_DIR", raising=False)
    app = await world.launch("com.test.bg")
    async with open_nn_runtime(app.context.runtime, environ={}) as nn:
        cpu = cpu_device(nn)
        detector, landmarks = models["face_detection_short_range"], models["face_landmark"]
        compiled = await detector.compile(nn, [cpu])
        scores = next(k for k, t in enumerate(detector.outputs) if detector.tensors[t].shape[-1] == 1)
        shape = _input_shape(detector)
        best = [float(np.max((await compiled.run([camera_frame(i, shape)]))[scores])) for i in range(FRAME_LOOP)]
        blank = float(np.max((await compiled.run([np.zeros(shape, np.float32)]))[scores]))
        await compiled.aclose()
        sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        assert min(sigmoid(np.array(best))) > 0.8 and sigmoid(blank) < 0.3, (best, blank)

        compiled = await landmarks.compile(nn, [cpu])
        presence = next(k for k, t in enumerate(landmarks.outputs) if int(np.prod(landmarks.tensors[t].shape)) == 1)
        shape = _input_shape(landmarks)
        flags = [float((await compiled.run([gallery_photo(i, shape)]))[presence].ravel()[0]) for i in range(12)]
        blank = float((await compiled.run([np.zeros(shape, np.float32)]))[presence].ravel()[0])
        await compiled.aclose()
        assert min(flags) > 2 and blank < 0, (flags, blank)  # logits: sure of a face, sure of none


async def test_an_app_opens_a_fetched_model_by_name_off_its_main_thread(models):
    model = await open_tflite("face_detection_short_range")
    assert model.name == "face_detection_short_range"
    assert [p.operations for p in model.partitions] == [p.operations for p in models[model.name].partitions]
    with pytest.raises(BadDataError, match="make models"):
        await open_tflite("no_such_model")


# -- the check ---------------------------------------------------------------------------------


def test_mismatch_is_relative_to_each_outputs_range():
    want = [np.linspace(0, 10, 50, dtype=np.float32).reshape(1, 50), np.array([[0.5]], np.float32)]
    assert mismatch("m", [w.copy() for w in want], want) == ""
    near = want[0].copy()
    near[0, 3] += 0.0009  # 0.9e-4 of the range 10
    assert mismatch("m", [near, want[1]], want) == ""
    far = want[0].copy()
    far[0, 3] += 0.002
    assert mismatch("m", [far, want[1]], want).startswith("output 0: error 2.00e-04")
    nan = want[1].copy()
    nan[0, 0] = np.nan
    assert mismatch("m", [want[0], nan], want).startswith("output 1:")
    assert "shape" in mismatch("m", [want[0].reshape(50, 1), want[1]], want)
    assert mismatch("m", want[:1], want) == "1 outputs, the reference has 2"
    # The two outputs float32 holds to 1e-3 only (test_tflite's ILL_CONDITIONED).
    assert mismatch("selfie_segmentation", [far], [want[0]]) == ""
    assert mismatch("selfie_segmentation", [want[0] + 0.02], [want[0]]) != ""


def test_weight_shares_split_the_size_by_the_weights_each_partition_holds(models):
    pose = models["pose_landmark_full"]
    shares = weight_shares(pose, 2560 << 20)
    nnapi = [p for p in pose.partitions if p.kind == "nnapi"]
    assert sorted(shares) == [p.index for p in nnapi] and len(shares) > 1
    assert sum(shares.values()) == 2560 << 20
    biggest = max(shares, key=shares.__getitem__)
    assert shares[biggest] > (2560 << 20) // 2  # the backbone holds most of the weights
    single = models["face_detection_short_range"]
    assert weight_shares(single, 64 << 20) == {single.partitions[0].index: 64 << 20}


# -- one load for every partition --------------------------------------------------------------


async def test_a_tflite_load_is_one_request_on_one_device_holding_the_size_once(autojump_clock, world, models,
                                                                                 monkeypatch):
    monkeypatch.delenv("NPUEMU_RUNTIME_DIR", raising=False)
    app = await world.launch("com.test.fg")
    npu = app.context.getSystemService("npu")
    report = Report("assistant", app.context)
    pose = models["pose_landmark_full"]
    driver = world.real_hal.driver
    async with open_nn_runtime(app.context.runtime, environ={}) as nn:
        device = await choose_device(nn, pose)
        assert device.getName() == "emu-npu" and device.getType() == DeviceType.ACCELERATOR
        emu_npu = driver.device_by_name("emu-npu")
        before = driver.memory_info(emu_npu).weight_memory_used
        slot = LoadSlot(npu, app.context.getMainExecutor(), report, NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G,
                        NpuManager.NPU_MODEL_PRIORITY_NORMAL)
        await slot.file()
        with trio.fail_after(5):
            assert await slot.wait_can_load_now()
        load = TfLiteLoad(nn, pose, device, emulated_size=2560 << 20, request=slot.request)
        assert await slot.load(load) is True
        partitions = sum(p.kind == "nnapi" for p in pose.partitions)
        mine = [p for p in world.real_hal.prepared if p.owner_uid == app.context.getUid()]
        assert len(mine) == partitions > 1
        assert {(p.device_name, p.load_request) for p in mine} == {("emu-npu", slot.request.getId())}
        assert driver.memory_info(emu_npu).weight_memory_used - before == 2560 << 20

        reference = await CpuReference.open(nn, pose, cpu_device(nn))
        frame = camera_frame(0, _input_shape(pose))
        outputs, failed = await checked_run(load, 0, [frame], reference, report, job_priority=300)
        assert failed is None and len(outputs) == len(pose.outputs)
        assert (report.data["inferences"], report.data["results_ok"]) == (1, 1)
        assert report.data["devices"] == ["emu-npu"] and report.data["device_ms"][0] > 0
        # A wrong answer (the reference says otherwise) is counted as wrong, and says where.
        wrong = [o.copy() for o in await reference.outputs(0, [frame])]
        wrong[0] += np.float32(0.01) * (wrong[0].max() - wrong[0].min())
        reference._outputs["tampered"] = wrong
        _, failed = await checked_run(load, "tampered", [frame], reference, report)
        assert failed is None and (report.data["inferences"], report.data["results_bad"]) == (2, 1)
        assert [e for e in report.data["events"] if e["kind"] == "wrong_result"] != []
        assert reference.runs == 1  # the same key is computed once

        # The request revoked (what the npu service does at an ignored unload's deadline)
        # takes every partition; the next inference is an error, kept in the report.
        assert world.real_hal.revoke_request(app.context.getUid(), slot.request.getId(), keep=()) == partitions
        assert [p for p in world.real_hal.prepared if p.owner_uid == app.context.getUid()] == []
        outputs, failed = await checked_run(load, 0, [frame], reference, report)
        assert outputs is None and isinstance(failed, NeuralNetworksError)
        assert report.data["inferences"] == 2 and report.data["errors"] == [f"emu-npu: {failed}"]
        await load.aclose()
        await reference.aclose()
        assert driver.memory_info(emu_npu).weight_memory_used == before
