"""Real models: npuemu's compute time per device against LiteRT's, on the same machine.

    python bench/models.py [--models-dir DIR] [--runs 3] [--device NAME ...] [--json] [NAME ...]

For every MediaPipe model LiteRT runs (``make models`` fetches them), in one process:
LiteRT single-threaded (the best of ``--runs``), then the model through NNAPI
(``framework.nn.tflite``) against the HAL over the reference driver in this process
(virtual clock, so the emulated time is exact and costs no waiting), compiled for
``nnapi-reference`` alone and for each emulated device (``createForDevices``: the
device alone when it claims every operation, else the device and ``nnapi-reference``,
marked ``+cpu``). For each it prints the real time of a run (the best of ``--runs``, all
partitions, CPU kernels in the app included), its ratio to LiteRT's, and the emulated
time the devices computed over the NNAPI partitions (the slices the hardware charged the
run, from its own record: exact, ``+cpu`` too); ``nnapi-reference`` has none.

It measures only: no assertion. Under load (a shared machine) the real times are high.
numpy's OpenBLAS runs one thread (OPENBLAS_NUM_THREADS=1, set before numpy is imported):
its idle threads would otherwise spin beside the single-threaded kernels and LiteRT.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS: one thread, as LiteRT and the kernels

import trio  # noqa: E402
import trio.testing  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ai_edge_litert.interpreter import Interpreter  # noqa: E402

from framework.binder import open_binder_runtime  # noqa: E402
from framework.emulator import open_stack  # noqa: E402
from framework.nn import CPU_DEVICE_NAME, NeuralNetworks, NeuralNetworksError, open_nn_runtime  # noqa: E402
from framework.nn.tflite import loadTfLite, modelsDir, syntheticImage  # noqa: E402
from npuhal import Driver, open_driver  # noqa: E402

MODELS = [
    "face_detection_short_range", "face_detection_full_range_sparse", "face_landmark", "iris_landmark",
    "hand_recrop", "hand_landmark_lite", "hand_landmark_full", "palm_detection_lite", "palm_detection_full",
    "pose_detection", "pose_landmark_full", "selfie_segmentation", "selfie_segmentation_landscape",
]
DRIVERS = ["emu-npu", "emu-gpu", "emu-dsp", "emu-hetero"]


def litert_ms(path: Path, inputs, runs: int) -> float:
    interpreter = Interpreter(model_path=str(path), num_threads=1)
    interpreter.allocate_tensors()
    for detail, x in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], x)
    best = float("inf")
    for _ in range(runs + 1):  # the first run warms up
        start = time.perf_counter()
        interpreter.invoke()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


async def npuemu_ms(nn, driver, model, devices, inputs, runs: int) -> tuple[float, float]:
    """(best real ms of a run, emulated ms the devices computed in that run: the slices the
    hardware charged it, from its own record)."""
    compiled = await model.compile(nn, devices)
    try:
        best = (float("inf"), 0.0)
        for _ in range(runs + 1):
            driver.drain_slices()
            await compiled.run(inputs)
            real = sum(t.wallNs for t in compiled.timings) / 1e6
            slices, dropped = driver.drain_slices()
            if dropped:
                raise RuntimeError(f"{model.name}: {dropped} slice records dropped")
            best = min(best, (real, sum(r.end_ns - r.start_ns for r in slices) / 1e6))
        return best
    finally:
        await compiled.aclose()


@contextlib.asynccontextmanager
async def open_app_stack() -> AsyncIterator[tuple[NeuralNetworks, Driver]]:
    """An app's NNAPI runtime over the HAL and the reference driver in this process (virtual
    clock), and that driver (recording the slices it charges: ``Driver.drain_slices``)."""
    async with open_driver(clock="virtual") as driver, open_stack(driver, system_server=False) as stack:

        async def app_process(task_status):
            async with open_binder_runtime(network=stack.network, pid=await stack.spawn(10001)) as rt:
                task_status.started(rt)
                await trio.sleep_forever()

        app = await stack.nursery.start(app_process)
        driver.set_profiling()
        async with open_nn_runtime(app, environ={}) as nn:
            yield nn, driver


@contextlib.asynccontextmanager
async def open_app_nn() -> AsyncIterator[NeuralNetworks]:
    """An app's NNAPI runtime over the HAL and the reference driver in this process (virtual clock)."""
    async with open_app_stack() as (nn, _):
        yield nn


async def measure(names: list[str], models_dir: Path, runs: int, devices: list[str]) -> list[dict]:
    rows = []
    async with open_app_stack() as (nn, driver):
        cpu = nn.getDeviceByName(CPU_DEVICE_NAME)
        for name in names:
            path = models_dir / f"{name}.tflite"
            model = loadTfLite(path)
            inputs = [syntheticImage(model.tensors[t].shape) for t in model.inputs]
            row = {"model": name, "litertMs": litert_ms(path, inputs, runs), "devices": {}}
            for device in devices:
                chosen = [cpu] if device == CPU_DEVICE_NAME else [nn.getDeviceByName(device)]
                label = device
                try:
                    real, emulated = await npuemu_ms(nn, driver, model, chosen, inputs, runs)
                except NeuralNetworksError:
                    label = f"{device}+cpu"
                    try:
                        real, emulated = await npuemu_ms(nn, driver, model, [chosen[0], cpu], inputs, runs)
                    except NeuralNetworksError as e:
                        row["devices"][device] = {"error": str(e)[:120]}
                        continue
                row["devices"][device] = {"as": label, "realMs": real, "emulatedMs": emulated,
                                          "ratio": real / row["litertMs"]}
            rows.append(row)
            print(f"  measured {name}", file=sys.stderr, flush=True)
    return rows


_SHORT = {"RESOURCE_EXHAUSTED_PERSISTENT": "no room (EXHAUSTED)"}


def table(rows: list[dict], devices: list[str]) -> str:
    head = f"{'model':<31} {'LiteRT':>7}"
    for device in devices:
        head += f" | {device:>22}"
    lines = [head, f"{'':<31} {'ms':>7}" + "".join(f" | {'real ms  ratio  emul ms':>22}" for _ in devices)]
    for row in rows:
        line = f"{row['model']:<31} {row['litertMs']:>7.2f}"
        for device in devices:
            d = row["devices"].get(device, {})
            if "error" in d:  # the status, e.g. RESOURCE_EXHAUSTED_PERSISTENT: the device has no room
                status = d["error"].split(":")[0].removeprefix("ANEURALNETWORKS_")
                line += f" | {_SHORT.get(status, status)[:22]:>22}"
                continue
            mark = "*" if d["as"].endswith("+cpu") else " "
            line += f" | {d['realMs']:>7.1f}{mark}{d['ratio']:>5.1f}x {d['emulatedMs']:>7.2f}"
        lines.append(line)
    lines.append("* the device with nnapi-reference (it does not claim every operation, or alone it failed);"
                 " a status: it failed with nnapi-reference too")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=MODELS)
    parser.add_argument("--models-dir", type=Path, default=modelsDir())
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", action="append", choices=[CPU_DEVICE_NAME, *DRIVERS],
                        help="measure only this device (repeatable; default: every one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    missing = [n for n in args.names if not (args.models_dir / f"{n}.tflite").is_file()]
    if missing:
        sys.exit(f"models missing in {args.models_dir}: {', '.join(missing)} (`make models` fetches them)")
    devices = args.device or [CPU_DEVICE_NAME, *DRIVERS]
    rows = trio.run(measure, args.names, args.models_dir, args.runs, devices,
                    clock=trio.testing.MockClock(autojump_threshold=0))
    print(json.dumps(rows, indent=2) if args.json else table(rows, devices))


if __name__ == "__main__":
    main()
