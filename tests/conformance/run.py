"""Running conformance cases on devices, in one process, as an app: the outcome of each.

``open_nn()`` starts the servicemanager and the HAL over the reference driver on the
virtual clock (``framework.emulator.open_stack`` without system_server) and an app's
NNAPI runtime, all in this trio run (the caller provides trio's autojump MockClock, so
the driver's virtual time follows it). ``run_cases`` builds each case as a model, asks each
device whether it supports it, and on each that does, compiles it for that device alone
(createForDevices: no CPU fallback) and executes it, comparing the outputs with nnref's
within Android's tolerances.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Sequence

import numpy as np
import trio

import nnref
from framework.binder import open_binder_runtime
from framework.emulator import BootConfig, open_stack
from framework.nn import NeuralNetworks, NeuralNetworksError, open_nn_runtime
from npuhal import open_driver

from .build import build, expressible
from .cases import Case

APP_UID = 10001

#: The layouts every case runs in: weights as constants; weights as model inputs; the
#: model's inputs and outputs declared with unspecified dimensions (given at setInput).
LAYOUTS = (("constants", False), ("inputs", False), ("constants", True))


@contextlib.asynccontextmanager
async def open_nn(processes: bool = False) -> AsyncIterator[NeuralNetworks]:
    """An app's NNAPI runtime over the emulated devices: all in this process (on the
    virtual clock), or, with ``processes``, over a servicemanager and the HAL as real OS
    processes (real clock, real sockets and shared memory), this process their init."""
    if processes:
        config = BootConfig(record=False, boot_timeout=30)
        async with open_stack(processes=True, system_server=False, config=config) as hal, \
                open_nn_runtime(hal.runtime, environ={}) as nn:
            yield nn
        return
    async with open_driver(clock="virtual") as driver, open_stack(driver, system_server=False) as stack:
        pid = await stack.spawn(APP_UID)
        async with open_binder_runtime(network=stack.network, pid=pid) as app, open_nn_runtime(app, environ={}) as nn:
            yield nn


@dataclasses.dataclass(frozen=True)
class Outcome:
    case: str
    operation: str
    variant: str
    device: str
    layout: str
    status: str  # "passed", "failed", "unclaimed" (the device does not support it), "refused" (the NDK
    #             refused the model: no device saw it), "inexpressible" (no one-operation model can hold it)
    detail: str = ""


def compare(outputs: Sequence[np.ndarray], case: Case) -> str:
    """'' when ``outputs`` are nnref's within Android's tolerance, else why not."""
    if len(outputs) != len(case.expected):
        return f"{len(outputs)} outputs, expected {len(case.expected)}"
    for k, (got, want) in enumerate(zip(outputs, case.expected, strict=True)):
        if tuple(got.shape) != tuple(want.value.shape):
            return f"output {k} has shape {tuple(got.shape)}, expected {tuple(want.value.shape)}"
        try:
            nnref.assert_close(nnref.Operand(want.type, np.asarray(got), want.scale, want.zero_point), want,
                               relaxed=case.relaxed)
        except AssertionError as e:
            return f"output {k}: {str(e).strip().splitlines()[0][:300]}"
    return ""


async def run_case(nn: NeuralNetworks, case: Case, devices: Sequence, layout: str = "constants",
                   dynamic: bool = False) -> list[Outcome]:
    """``case`` on each of ``devices``, one Outcome per device."""
    tag = layout + ("+dynamic" if dynamic else "")

    def outcome(device: str, status: str, detail: str = "") -> Outcome:
        return Outcome(case.id, case.operation, case.variant, device, tag, status, detail)

    why = expressible(case)
    if why:
        return [outcome(d.name, "inexpressible", why) for d in devices]
    try:
        built = build(case, layout, dynamic)
    except NeuralNetworksError as e:
        return [outcome(d.name, "refused", f"the NDK refused the model: {e}") for d in devices]
    except Exception as e:  # noqa: BLE001 - the NDK crashing on a valid model is a failure to report, not to stop at
        return [outcome(d.name, "refused", f"the NDK raised {type(e).__name__}: {e}") for d in devices]
    results = []
    for device in devices:
        try:
            supported = await nn.getSupportedOperationsForDevices(built.model, [device])
        except NeuralNetworksError as e:
            results.append(outcome(device.name, "failed", f"getSupportedOperations: {e}"))
            continue
        if not all(supported):
            results.append(outcome(device.name, "unclaimed"))
            continue
        try:
            async with nn.createCompilationForDevices(built.model, [device]) as compilation:
                await compilation.finish()
                execution = compilation.createExecution()
                for i, (x, dims) in enumerate(zip(built.feeds, built.dims)):
                    execution.setInput(i, x, dimensions=dims)
                outputs = await execution.compute_async()
        except NeuralNetworksError as e:
            results.append(outcome(device.name, "failed", f"claimed, then {type(e).__name__}: {e}"))
            continue
        problem = compare(outputs, case)
        results.append(outcome(device.name, "failed" if problem else "passed", problem))
        await trio.lowlevel.checkpoint()
    return results
