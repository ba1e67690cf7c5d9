"""``npuemu nn``: the NNAPI runtime from the command line.

``npuemu nn plan`` shows how NNAPI would partition a sample model (``--model float``:
``framework.nn.sampleModel``, two float32 branches; ``--model mixed``:
``framework.nn.mixedSampleModel``, quantized convolutions under a float head): which
device runs each operation, the steps, and the operands that cross between steps.

Online (the default), it connects to a running emulator as the shell (uid 2000, as
``adb shell``), discovers the HAL's ``IDevice`` instances as an app would, and asks
each which operations it supports. Nothing is loaded into any device's memory.

``--offline`` needs no emulator: it opens the reference driver in this process
(virtual clock) and uses its device descriptions (names, types, capability tables,
supported operations) as the HAL would serve them. It describes the *reference*
driver only; a vendor driver is seen online, through a booted emulator.
"""

from __future__ import annotations

import dataclasses

import click

from ._common import CliError, EXIT_USAGE, run, runtime_dir_option

__all__ = ["nn"]

_PREFERENCES = {"fast": "FAST_SINGLE_ANSWER", "low-power": "LOW_POWER", "sustained": "SUSTAINED_SPEED"}
_MODELS = ("float", "mixed")


def _sample(name: str):
    from framework.nn import mixedSampleModel, sampleModel

    return mixedSampleModel() if name == "mixed" else sampleModel()


@click.group()
def nn() -> None:
    """The NNAPI runtime: devices and compilation plans."""


def _device_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise CliError("--devices needs at least one device name", EXIT_USAGE)
    if len(set(names)) != len(names):
        raise CliError(f"--devices lists a device twice: {value}", EXIT_USAGE)
    return names


def _pick(devices, names: list[str]):
    by_name = {d.name: d for d in devices}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise CliError(f"no device named {', '.join(missing)} (have: {', '.join(by_name)})", EXIT_USAGE)
    return [by_name[n] for n in names]


def _header(devices, chosen) -> str:
    lines = ["devices:"]
    for d in devices:
        mark = "*" if chosen is None or d in chosen else " "
        lines.append(f"  {mark} {d.name:<18} {d.type.name:<12} {d.version}")
    lines.append("  (* = candidate for this compilation)")
    return "\n".join(lines)


async def _online(runtime_dir, model_name, names, preference, enabled):
    from framework.emulator import open_shell
    from framework.nn import open_nn_runtime

    model = _sample(model_name)
    async with open_shell(runtime_dir) as shell, open_nn_runtime(shell, enabledDevices=enabled) as runtime:
        chosen = None if names is None else _pick(runtime.devices, names)
        if chosen is None:
            compilation = runtime.createCompilation(model)
        else:
            compilation = runtime.createCompilationForDevices(model, chosen)
        compilation.setPreference(preference)
        plan = await compilation.partition()
        return _header(runtime.devices, chosen), plan


async def _offline(model_name, names, preference, enabled):
    import re

    from framework.nn import (
        BadDataError,
        DeviceDescriptor,
        DeviceType,
        cpuDevice,
        createPlan,
        createPlanForDevices,
        isValidDeviceName,
        makeCapabilities,
        toAidlModel,
    )
    from npuhal import open_driver

    model = _sample(model_name)
    async with open_driver(clock="virtual") as driver:

        def describe(dev):
            return DeviceDescriptor(
                name=dev.name,
                type=DeviceType(int(dev.type)),
                version=dev.version,
                featureLevel=dev.feature_level,
                capabilities=makeCapabilities(dev.capabilities),
                supportedOperations=lambda hal, n=dev.number: driver.supported_operations(n, toAidlModel(hal)),
            )

        drivers = [describe(d) for d in driver.devices if isValidDeviceName(d.name)]
        if enabled:
            try:
                pattern = re.compile(enabled)
            except re.error as e:
                raise BadDataError(f"--enabled-devices {enabled!r} is not a regular expression: {e}") from None
            drivers = [d for d in drivers if pattern.fullmatch(d.name)]
        devices = [*drivers, cpuDevice()]
        if names is None:
            return _header(devices, None), createPlan(model, drivers, preference=preference, cpu=devices[-1])
        chosen = _pick(devices, names)
        return _header(devices, chosen), createPlanForDevices(model, chosen, preference=preference)


@nn.command()
@click.option("--model", "model_name", type=click.Choice(_MODELS), default="float", show_default=True,
              help="float = two float32 branches; mixed = quantized convolutions under a float head.")
@click.option("--devices", "devices", default=None, metavar="A,B",
              help="Compile for exactly these devices (createForDevices: no CPU fallback).")
@click.option("--preference", type=click.Choice(list(_PREFERENCES)), default="fast", show_default=True,
              help="fast = FAST_SINGLE_ANSWER (execTime), low-power = LOW_POWER (powerUsage), sustained.")
@click.option("--enabled-devices", "enabled", default=None, metavar="REGEX",
              help="Only driver devices whose whole name matches (default: $NPUEMU_NN_ENABLED_DEVICES).")
@click.option("--offline", is_flag=True, help="No emulator: the reference driver's devices, computed here.")
@runtime_dir_option
def plan(model_name, devices, preference, enabled, offline, runtime_dir) -> None:
    """Print how NNAPI partitions a sample model: which operation runs where.

    \b
    Examples:
      npuemu nn plan
      npuemu nn plan --devices emu-npu,emu-dsp --preference low-power
      npuemu nn plan --offline --enabled-devices 'emu-(gpu|dsp)'
      npuemu nn plan --model mixed --offline
    """
    import os

    from framework.nn import ENABLED_DEVICES_ENV, ExecutionPreference, NeuralNetworksError

    names = _device_list(devices)
    pref = ExecutionPreference[_PREFERENCES[preference]]
    enabled = enabled if enabled is not None else os.environ.get(ENABLED_DEVICES_ENV) or None
    try:
        if offline:
            header, result = run(_offline, model_name, names, pref, enabled)
        else:
            header, result = run(_online, runtime_dir, model_name, names, pref, enabled)
    except NeuralNetworksError as e:
        raise CliError(str(e)) from None
    click.echo(header)
    click.echo("")
    click.echo(result.describe())


# ---- npuemu nn run: a real .tflite model ------------------------------------------------------


def _inputs(model, paths):
    import numpy as np

    from framework.nn.tflite import syntheticImage

    if paths and len(paths) != len(model.inputs):
        raise CliError(f"{model.name} takes {len(model.inputs)} input(s); --input was given {len(paths)} time(s)",
                       EXIT_USAGE)
    arrays = []
    for position, t in enumerate(model.inputs):
        tensor = model.tensors[t]
        if paths:
            try:
                array = np.load(paths[position], allow_pickle=False)
            except (OSError, ValueError) as e:
                raise CliError(f"--input {paths[position]}: not a .npy array ({e})", EXIT_USAGE) from None
            if array.shape != tensor.shape:
                raise CliError(f"--input {paths[position]}: shape {list(array.shape)}, the model's input {position} "
                               f"is {list(tensor.shape)}", EXIT_USAGE)
            arrays.append(np.ascontiguousarray(array, dtype=tensor.dtype))
        elif len(tensor.shape) == 4 and tensor.type == "FLOAT32":
            arrays.append(syntheticImage(tensor.shape))
        else:
            raise CliError(f"input {position} of {model.name} is {tensor.type} {list(tensor.shape)}, not a picture: "
                           "give it with --input x.npy", EXIT_USAGE)
    return arrays


def _litert(path, inputs):
    """LiteRT's outputs and its time (single-threaded, the best of three runs, in ms)."""
    import time

    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise CliError("--compare litert needs the ai-edge-litert package (`make install` installs it)") from None
    interpreter = Interpreter(model_path=str(path), num_threads=1)
    interpreter.allocate_tensors()
    for detail, x in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], x)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        interpreter.invoke()
        best = min(best, time.perf_counter() - start)
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()], best * 1e3


async def _run_model(nn, model, names, inputs, driver=None):
    chosen = None if not names else _pick(nn.devices, names)
    compiled = await model.compile(nn, chosen)
    try:
        if driver is not None:
            driver.drain_slices()  # what compiling charged (nothing, today) is not this run's
        outputs = await compiled.run(inputs)
        jobs = None if driver is None else _device_jobs(model, compiled, *driver.drain_slices())
        return [d.name for d in nn.devices], compiled.placement(), compiled.timings, outputs, jobs
    finally:
        await compiled.aclose()


@dataclasses.dataclass(frozen=True)
class _Job:
    """One device step of the run and the slices the hardware charged it, each with the
    TFLite operation it computes (its index)."""

    partition: int
    device: str
    slices: list
    sources: list[int]


def _device_jobs(model, compiled, slices, dropped) -> list[_Job] | None:
    """The run's device jobs, in run order, with what the hardware charged each; None
    when the record does not match the plan's device steps (some were dropped, a step
    fell back to the CPU).

    The run executes its device steps one after another, one job each, so the jobs (in
    work id order) are the device steps of the NNAPI partitions in run order; a slice's
    operation is an index into its step's sub-model, whose operation j is the step's
    ``operations[j]`` of the partition's NNAPI model."""
    from framework.nn import CPU_DEVICE_NAME

    if dropped:
        return None
    steps = []
    plans = compiled.plans()
    for p in model.partitions:
        if p.kind == "nnapi":
            steps += [(p, s) for s in plans[p.index].steps if s.device.name != CPU_DEVICE_NAME]
    by_work: dict[int, list] = {}
    for r in slices:
        by_work.setdefault(r.work_id, []).append(r)
    if len(by_work) != len(steps):
        return None
    return [_Job(p.index, step.device.name, work,
                 [compiled.sourceOperation(p.index, step.operations[r.operation]) for r in work])
            for (p, step), work in zip(steps, (by_work[w] for w in sorted(by_work)))]


# Where a listing row and a trace span keep a slice's count, FLOPs, bytes and compute,
# memory and fixed microseconds.
_ROW_KEYS = ("slices", "flops", "bytes", "computeUs", "memoryUs", "overheadUs")
_TRACE_KEYS = ("slices", "flops", "bytes", "compute_us", "memory_us", "fixed_us")


def _add_slice(into: dict, r, keys: tuple[str, ...]) -> None:
    """Adds what the hardware charged slice r to a row's or a span's totals."""
    for key, value in zip(keys, (1, r.flops, r.bytes, r.compute_ns / 1e3, r.memory_ns / 1e3, r.overhead_ns / 1e3)):
        into[key] += value


def _operation_costs(model, jobs: list[_Job]) -> list[dict]:
    """Per operation a device ran, in run order: what the hardware charged it (its slices
    summed) and why."""
    rows = []
    for job in jobs:
        per_op: dict[int, dict] = {}
        for r, source in zip(job.slices, job.sources):
            row = per_op.get(r.operation)
            if row is None:
                row = per_op[r.operation] = {
                    "partition": job.partition, "device": job.device, "tfliteIndex": source,
                    "tflite": model.operations[source].name,
                    "nnapi": getattr(r.operation_type, "name", str(r.operation_type)),
                    "class": r.compute_class, "slices": 0, "flops": 0.0, "bytes": 0.0, "computeUs": 0.0,
                    "memoryUs": 0.0, "overheadUs": 0.0, "saveUs": 0.0, "emulatedUs": 0.0,
                    "startUs": r.start_ns / 1e3}
            us = (r.end_ns - r.start_ns) / 1e3
            row["emulatedUs"] += us
            if r.kind == "save":
                row["saveUs"] += us
                continue
            _add_slice(row, r, _ROW_KEYS)
        for row in per_op.values():
            row["bound"] = ("overhead" if row["overheadUs"] >= max(row["computeUs"], row["memoryUs"])
                            else "compute" if row["computeUs"] >= row["memoryUs"] else "memory")
        rows += per_op.values()
    return rows


def _trace(model, jobs: list[_Job]) -> dict:
    """The run's emulated device time as a Chrome/Perfetto trace: a process per device, a
    thread per channel, on it a span per partition and inside it a span per operation (its
    consecutive slices on that channel), args saying what the hardware charged."""
    events: list[dict] = []
    pids: dict[str, int] = {}
    tids: set[tuple[int, int]] = set()
    for job in jobs:
        pid = pids.setdefault(job.device, len(pids) + 1)
        spans: list[dict] = []
        for r, source in zip(job.slices, job.sources):
            tids.add((pid, r.channel))
            name = "context save" if r.kind == "save" else f"#{source} {model.operations[source].name}"
            last = spans[-1] if spans else None
            if (last is not None and last["name"] == name and last["tid"] == r.channel
                    and last["_end"] == r.start_ns and r.kind != "save"):
                last["_end"] = r.end_ns
                args = last["args"]
            else:
                args = {"slices": 0, "flops": 0.0, "bytes": 0.0, "compute_us": 0.0, "memory_us": 0.0,
                        "fixed_us": 0.0, "class": r.compute_class,
                        "nnapi": getattr(r.operation_type, "name", str(r.operation_type))}
                spans.append({"name": name, "ph": "X", "pid": pid, "tid": r.channel, "_start": r.start_ns,
                              "_end": r.end_ns, "args": args})
            _add_slice(args, r, _TRACE_KEYS)
        for channel in sorted({s["tid"] for s in spans}):
            mine = [s for s in spans if s["tid"] == channel]
            spans.append({"name": f"partition {job.partition}", "ph": "X", "pid": pid, "tid": channel,
                          "_start": min(s["_start"] for s in mine), "_end": max(s["_end"] for s in mine),
                          "args": {"device": job.device, "operations": len({s["name"] for s in mine})}})
        for s in spans:
            s["ts"] = s.pop("_start") / 1e3
            s["dur"] = s.pop("_end") / 1e3 - s["ts"]
        events += spans
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"{device} (emulated time)"}}
            for device, pid in pids.items()]
    meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"channel {tid}"}}
             for pid, tid in sorted(tids)]
    return {"traceEvents": meta + sorted(events, key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"])),
            "displayTimeUnit": "ns"}


async def _run_online(runtime_dir, model, names, inputs):
    from framework.emulator import open_shell
    from framework.nn import open_nn_runtime

    async with open_shell(runtime_dir) as shell, open_nn_runtime(shell) as nn:
        return await _run_model(nn, model, names, inputs)


async def _run_offline(model, names, inputs):
    import trio.testing

    from framework.binder import open_binder_runtime
    from framework.emulator import open_stack
    from framework.nn import open_nn_runtime
    from npuhal import open_driver

    async def shell_process(stack, pid, task_status=trio.TASK_STATUS_IGNORED):
        async with open_binder_runtime(network=stack.network, pid=pid) as rt:
            task_status.started(rt)
            await trio.sleep_forever()

    async with open_driver(clock="virtual") as driver, open_stack(driver, system_server=False) as stack:
        shell = await stack.nursery.start(shell_process, stack, await stack.spawn(2000))
        driver.set_profiling()  # each partition's exact device time, and --ops and --trace
        async with open_nn_runtime(shell, environ={}) as nn:
            return await _run_model(nn, model, names, inputs, driver)


def _report(model, devices, names, placement, timings, outputs, jobs, reference, litert_ms, offline, show_ops):
    import numpy as np

    rows = []
    for t in timings:
        p = model.partitions[t.partition]
        ops = [placement[k][2] for k in p.operations]
        counts = {d: ops.count(d) for d in dict.fromkeys(ops)}
        emulated = t.deviceNs
        if emulated is None and jobs is not None and p.kind == "nnapi":  # offline: the hardware's record, exact
            emulated = sum(r.end_ns - r.start_ns for job in jobs if job.partition == p.index for r in job.slices)
        elif emulated is None and offline and p.kind == "nnapi":
            emulated = t.clockNs
        rows.append({
            "partition": p.index,
            "kind": p.kind,
            "operations": len(p.operations),
            "what": p.label(model.operations),
            "devices": counts,
            "realMs": t.wallNs / 1e6,
            "emulatedDeviceMs": None if emulated is None else emulated / 1e6,
        })
    result = {
        "model": model.name,
        "devices": devices,
        "compilation": "createForDevices" if names else "create",
        "candidates": list(names) if names else devices,
        "operations": [{"index": k, "name": n, "where": w} for k, n, w in placement],
        "partitions": rows,
        "realMs": sum(r["realMs"] for r in rows),
        "outputs": [{"shape": list(np.shape(o))} for o in outputs],
    }
    if show_ops:
        result["operationCosts"] = _operation_costs(model, jobs)  # offline: jobs is not None
    if reference is not None:
        result["litertMs"] = litert_ms
        for entry, got, want in zip(result["outputs"], outputs, reference):
            got = np.asarray(got, np.float64).reshape(want.shape)
            want = want.astype(np.float64)
            error = float(np.abs(got - want).max()) if want.size else 0.0
            span = float(want.max() - want.min()) if want.size else 0.0
            entry.update(maxAbsError=error, maxRelError=error / span if span > 0 else error, range=span)
    return result


def _text(result) -> str:
    lines = [f"model: {result['model']}   compilation: {result['compilation']} "
             f"({', '.join(result['candidates'])})", ""]
    lines.append(f"{'partition':<10} {'where':<7} {'ops':>4}  {'devices (operations)':<44} {'real ms':>9} {'emulated ms':>12}")
    for r in result["partitions"]:
        devices = ", ".join(f"{d} {n}" for d, n in r["devices"].items())
        emulated = "-" if r["emulatedDeviceMs"] is None else f"{r['emulatedDeviceMs']:.3f}"
        lines.append(f"{r['partition']:<10} {r['kind']:<7} {r['operations']:>4}  {devices:<44} "
                     f"{r['realMs']:>9.2f} {emulated:>12}")
        lines.append(f"{'':<10} {r['what']}")
    lines.append(f"{'total':<10} {'':<7} {'':>4}  {'':<44} {result['realMs']:>9.2f}")
    if "operationCosts" in result:
        lines += [""] + _cost_lines(result["operationCosts"])
    folded = sum(op["where"] == "folded" for op in result["operations"])
    lines.append(f"({folded} operations folded at load: DEQUANTIZE/DENSIFY of constants)")
    if "trace" in result:
        lines.append(f"wrote {result['trace']['path']}: {result['trace']['events']} events "
                     "(open it in ui.perfetto.dev)")
    if "litertMs" in result:
        lines += ["", f"against LiteRT (1 thread, {result['litertMs']:.2f} ms; real-time ratio "
                      f"{result['realMs'] / result['litertMs']:.1f}x):"]
        for i, o in enumerate(result["outputs"]):
            lines.append(f"  output {i} {str(o['shape']):<18} max abs error {o['maxAbsError']:.2e}   "
                         f"max rel error {o['maxRelError']:.2e} (of its range {o['range']:.4g})")
    return "\n".join(lines)


def _cost_lines(costs) -> list[str]:
    """The --ops table: per operation a device ran, its emulated time and why."""
    lines = [f"{'part':>4} {'tflite op':<26} {'device':<10} {'class':<7} {'slices':>6} {'MFLOP':>8} {'KB':>8} "
             f"{'compute us':>10} {'memory us':>9} {'fixed us':>8} {'emul us':>8}  bound"]
    for c in costs:
        name = f"#{c['tfliteIndex']} {c['tflite']}" + ("" if c["nnapi"] == c["tflite"] else f" ({c['nnapi']})")
        lines.append(f"{c['partition']:>4} {name[:26]:<26} {c['device']:<10} {c['class']:<7} {c['slices']:>6} "
                     f"{c['flops'] / 1e6:>8.2f} {c['bytes'] / 1e3:>8.1f} {c['computeUs']:>10.2f} "
                     f"{c['memoryUs']:>9.2f} {c['overheadUs']:>8.2f} {c['emulatedUs']:>8.2f}  {c['bound']}")
    total = {k: sum(c[k] for c in costs) for k in ("slices", "flops", "bytes", "computeUs", "memoryUs",
                                                   "overheadUs", "emulatedUs")}
    lines.append(f"{'':>4} {'total':<26} {'':<10} {'':<7} {total['slices']:>6} {total['flops'] / 1e6:>8.2f} "
                 f"{total['bytes'] / 1e3:>8.1f} {total['computeUs']:>10.2f} {total['memoryUs']:>9.2f} "
                 f"{total['overheadUs']:>8.2f} {total['emulatedUs']:>8.2f}")
    bound = {b: sum(c["bound"] == b for c in costs) for b in ("compute", "memory", "overhead")}
    lines.append(f"(emulated us = (fixed + max(compute, memory)) x throttle per slice, plus context saves; "
                 f"{bound['compute']} operations compute-bound, {bound['memory']} memory-bound, "
                 f"{bound['overhead']} bound by the fixed cost per slice)")
    return lines


@nn.command("run")
@click.argument("model_path", metavar="MODEL")
@click.option("--device", "devices", multiple=True, metavar="NAME",
              help="Compile for exactly this device (repeatable: createForDevices, no CPU fallback). "
                   "Default: every device (create).")
@click.option("--input", "input_paths", multiple=True, metavar="X.npy", type=click.Path(exists=True, dir_okay=False),
              help="An input as a .npy array (repeat per model input). Default: a synthetic picture.")
@click.option("--compare", type=click.Choice(["litert"]), default=None,
              help="Run the model on LiteRT too (single-threaded) and print each output's error.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table.")
@click.option("--offline", is_flag=True, help="No emulator: the reference driver in this process, on a virtual clock.")
@click.option("--ops", "show_ops", is_flag=True,
              help="Per operation a device ran: its FLOPs, bytes, compute class and emulated time, and what bound "
                   "it (needs --offline: the hardware's own record of the run).")
@click.option("--trace", "trace_path", metavar="FILE", type=click.Path(dir_okay=False),
              help="Write the run's emulated device time as a Chrome/Perfetto trace: a track per device channel, "
                   "a span per partition and per operation (needs --offline).")
@runtime_dir_option
def run_model(model_path, devices, input_paths, compare, as_json, offline, show_ops, trace_path, runtime_dir) -> None:
    """Run a .tflite model through NNAPI: the plan, the time per partition, the error against LiteRT.

    MODEL is a .tflite file, or the name of a model `make models` fetched
    (MediaPipe's, in $NPUEMU_MODELS_DIR or ~/.cache/npuemu/models/mediapipe-0.10.14).

    \b
    Examples:
      npuemu nn run face_detection_short_range --offline --compare litert
      npuemu nn run iris_landmark --device emu-gpu --device nnapi-reference --json
    """
    import json

    import trio.testing

    from framework.nn import NeuralNetworksError
    from framework.nn.tflite import findModel, loadTfLite

    if len(set(devices)) != len(devices):
        raise CliError(f"--device names a device twice: {', '.join(devices)}", EXIT_USAGE)
    for flag, given in (("--ops", show_ops), ("--trace", trace_path)):
        if given and not offline:
            raise CliError(f"{flag} needs --offline (the driver in this process records what it charged)", EXIT_USAGE)
    try:
        model_path = findModel(model_path)
    except NeuralNetworksError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    try:
        model = loadTfLite(model_path)
        inputs = _inputs(model, input_paths)
        if offline:
            found = run(_run_offline, model, list(devices), inputs, clock=trio.testing.MockClock(autojump_threshold=0))
        else:
            found = run(_run_online, runtime_dir, model, list(devices), inputs)
    except NeuralNetworksError as e:
        raise CliError(str(e)) from None
    if (show_ops or trace_path) and found[4] is None:
        raise CliError("the hardware's record of the run does not match its device steps (a step fell back to "
                       "the CPU, or the record overflowed): no --ops or --trace")
    reference, litert_ms = _litert(model_path, inputs) if compare == "litert" else (None, None)
    result = _report(model, found[0], list(devices), *found[1:], reference, litert_ms, offline, show_ops)
    if trace_path:
        trace = _trace(model, found[4])
        try:
            with open(trace_path, "w") as f:
                json.dump(trace, f)
        except OSError as e:
            raise CliError(f"--trace {trace_path}: {e.strerror}") from None
        result["trace"] = {"path": str(trace_path), "events": len(trace["traceEvents"])}
    click.echo(json.dumps(result, indent=2) if as_json else _text(result))
