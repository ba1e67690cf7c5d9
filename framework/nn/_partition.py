"""Which device runs which operation: NNAPI's partitioner, and the plan it makes.

Inputs are :class:`DeviceDescriptor` values, what the runtime knows of a device once
discovered (name, type, version, feature level, capabilities, and a way to ask which
operations of a model it supports). Whether the device is a binder proxy to a HAL
``IDevice`` or the in-process CPU device does not matter here: nothing in this module
calls a device except through ``getSupportedOperations``.

The rule, Android 10's (``ExecutionPlan``/``findBestDeviceForEachOperation``):

1. Each operation goes to the candidate device that supports it with the lowest
   ``execTime``, or the lowest ``powerUsage`` under ``ExecutionPreference.LOW_POWER``,
   for the operation's operand type (:func:`operationPerformance`): the type of its
   selecting input (input 0; the data input of EMBEDDING_LOOKUP, HASHTABLE_LOOKUP and
   SELECT), and for a float32 type of a model relaxed to float16
   (``relaxComputationFloat32toFloat16``) the device's relaxed figures. On a tie the
   CPU device ``nnapi-reference`` wins; among other tied devices the first listed does.
2. An operation no candidate supports is ``BAD_DATA``.
3. Steps are cut greedily, as Android does: the operations ready to run on one device
   (their inputs are model inputs, constants, or outputs of steps already cut) are
   collected into one step, and an operation that becomes ready on the same device
   joins it. Devices are taken in the order listed (drivers first, then the CPU).

4. A plan whose steps pass each other a temporary of unknown size (its dimensions are
   known only at execution) is Android 10's "step model output of unknown size": a
   plain compilation runs the whole model on the CPU instead, ``createForDevices``
   fails with ``OP_FAILED``.

Plain compilation (``ANeuralNetworksCompilation_create``) is :func:`createPlan`: all
driver devices plus the CPU, a driver that fails to answer is treated as supporting
nothing, and the plan may later fall back to the CPU (:meth:`ExecutionPlan.fallBackToCpu`).
``createForDevices`` is :func:`createPlanForDevices`: exactly the given devices, errors
from them propagate, and no fallback ever.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Any

from interfaces.android.hardware.neuralnetworks import DataLocation, Operand, Subgraph

from ._errors import BadDataError, BadStateError, NeuralNetworksError, OpFailedError, requireNotNull
from ._hal import HalModel, describeOperand
from ._model import Model
from ._types import (
    FEATURE_LEVEL,
    Capabilities,
    DeviceType,
    ExecutionPreference,
    OperandLifeTime,
    OperandType,
    OperationType,
    PerformanceInfo,
    checkCapabilities,
    lookupPerformance,
    uniformCapabilities,
)
from ._validate import expectedByteSize, validateModel

#: The name of the runtime's own CPU device.
CPU_DEVICE_NAME = "nnapi-reference"

SupportedOperations = Callable[[HalModel], Sequence[bool]] | Collection[OperationType]


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class DeviceDescriptor:
    """What the partitioner knows of one device.

    ``supportedOperations`` is either the set of :class:`OperationType` the device runs
    (any operation of those types is supported), or a function from a HAL model to one
    bool per operation, the shape of ``IDevice::getSupportedOperations_1_2``; a binder
    proxy's method fits there. Two descriptors with the same name are the same device.
    """

    name: str
    type: DeviceType
    version: str
    featureLevel: int
    capabilities: Capabilities
    supportedOperations: SupportedOperations = frozenset(OperationType)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise BadDataError(f"a device name is a non-empty string, not {self.name!r}")
        try:
            object.__setattr__(self, "type", DeviceType(self.type))
        except ValueError:
            raise BadDataError(f"device {self.name}: unknown device type {self.type!r}") from None
        if not isinstance(self.version, str):
            raise BadDataError(f"device {self.name}: the version is a string, not {self.version!r}")
        if isinstance(self.featureLevel, bool) or not isinstance(self.featureLevel, int):
            raise BadDataError(f"device {self.name}: the feature level is an int, not {self.featureLevel!r}")
        checkCapabilities(self.capabilities, f"device {self.name}: capabilities")
        if not callable(self.supportedOperations):
            try:
                ops = frozenset(OperationType(t) for t in self.supportedOperations)
            except (TypeError, ValueError):
                raise BadDataError(
                    f"device {self.name}: supportedOperations is a function or a set of OperationType, "
                    f"not {self.supportedOperations!r}"
                ) from None
            object.__setattr__(self, "supportedOperations", ops)

    # The NDK's ANeuralNetworksDevice_get* queries, so a descriptor serves as the
    # app-visible device object too.
    def getName(self) -> str:
        return self.name

    def getType(self) -> DeviceType:
        return self.type

    def getVersion(self) -> str:
        return self.version

    def getFeatureLevel(self) -> int:
        return self.featureLevel

    def getPerformance(self, operandType: OperandType) -> PerformanceInfo:  # noqa: N803
        """The device's figure for ``operandType``, ``FLT_MAX`` when it gives none (Android's ``Device::getPerformance``)."""
        return lookupPerformance(self.capabilities, operandType)

    def getSupportedOperations(self, model: HalModel) -> list[bool]:
        """One bool per operation of ``model``; a malformed answer is ``OP_FAILED``."""
        if not callable(self.supportedOperations):
            return [op.type in self.supportedOperations for op in model.operations]
        answer = self.supportedOperations(model)
        try:
            result = [bool(x) for x in answer]
        except TypeError:
            raise OpFailedError(f"device {self.name}: getSupportedOperations gave {answer!r}, not a list") from None
        if len(result) != len(model.operations):
            raise OpFailedError(
                f"device {self.name}: getSupportedOperations gave {len(result)} answers "
                f"for {len(model.operations)} operations"
            )
        return result

    def __repr__(self) -> str:
        return f"DeviceDescriptor({self.name!r}, {self.type.name}, version={self.version!r})"


def referenceCpuDevice(version: str = "npuemu-1.2") -> DeviceDescriptor:
    """The runtime's own CPU device: every operation, execTime = powerUsage = 1.0."""
    return DeviceDescriptor(
        name=CPU_DEVICE_NAME,
        type=DeviceType.CPU,
        version=version,
        featureLevel=FEATURE_LEVEL,
        capabilities=uniformCapabilities(1.0, 1.0),
    )


def _hal_of(model: Model | HalModel, call: str) -> HalModel:
    requireNotNull(call, model=model)
    if isinstance(model, Model):
        if not model.isFinished:
            raise BadStateError(f"{call}: the model is not finished")
        return model.to_hal()
    if isinstance(model, HalModel):
        return validateModel(model)
    raise BadDataError(f"{call}: expected a Model or HalModel, not {type(model).__name__}")


def _check_devices(
    call: str, devices: Sequence[DeviceDescriptor], *, allowEmpty: bool = False
) -> list[DeviceDescriptor]:
    requireNotNull(call, devices=devices)
    if isinstance(devices, DeviceDescriptor) or not isinstance(devices, Sequence | Collection):
        raise BadDataError(f"{call}: devices must be a list of devices, not {devices!r}")
    devices = list(devices)
    if not devices and not allowEmpty:
        raise BadDataError(f"{call}: no devices given")
    for k, d in enumerate(devices):  # every null entry before duplicates, as the NDK
        requireNotNull(call, **{f"device {k}": d})
    names = set()
    for d in devices:
        if not isinstance(d, DeviceDescriptor):
            raise BadDataError(f"{call}: {d!r} is not a device")
        if d.name in names:
            raise BadDataError(f"{call}: device {d.name} is listed twice")
        names.add(d.name)
    return devices


def _answers(
    call: str, hal: HalModel, devices: Sequence[DeviceDescriptor], supported: Sequence[Sequence[bool]] | None
) -> list[list[bool]]:
    """Each device's ``getSupportedOperations`` answer: asked here, or given by the caller.

    A runtime whose devices answer over the binder (asynchronously) asks them first
    and passes the answers in ``supported``, one list per device, in ``devices`` order.
    """
    if supported is None:
        return [device.getSupportedOperations(hal) for device in devices]
    answers = [list(map(bool, a)) for a in supported]
    if len(answers) != len(devices) or any(len(a) != len(hal.operations) for a in answers):
        raise BadDataError(f"{call}: supported needs one answer per device, each one bool per operation")
    return answers


def getSupportedOperationsForDevices(
    model: Model | HalModel,
    devices: Sequence[DeviceDescriptor],
    *,
    supported: Sequence[Sequence[bool]] | None = None,
) -> list[bool]:
    """``ANeuralNetworksModel_getSupportedOperationsForDevices``: the union over ``devices``.

    One bool per operation, in the order the app added them. No devices, or one device
    twice, is ``BAD_DATA``; an unfinished model is ``BAD_STATE``. ``supported`` carries
    answers the caller already has (see :func:`_answers`).
    """
    call = "getSupportedOperationsForDevices"
    hal = _hal_of(model, call)
    devices = _check_devices(call, devices)
    supported_ops = [False] * len(hal.operations)
    for answer in _answers(call, hal, devices, supported):
        for k, ok in enumerate(answer):
            supported_ops[k] = supported_ops[k] or ok
    if isinstance(model, Model):
        app = [False] * len(supported_ops)
        for k, ok in enumerate(supported_ops):
            app[model.appOperationIndex(k)] = ok
        return app
    return supported_ops


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class ExecutionStep:
    """One step of a plan: a sub-model that one device runs whole.

    ``model`` has its own operand numbering. ``inputs[i]`` is the operand of the
    *original* model that feeds the sub-model's input ``i`` (a model input, or a
    temporary an earlier step wrote), and ``outputs[i]`` the original operand the
    sub-model's output ``i`` produces (a model output, or a temporary a later step
    reads). ``operations`` are the original model's operation indexes, in run order.
    """

    index: int
    device: DeviceDescriptor
    operations: tuple[int, ...]
    model: HalModel
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class ExecutionPlan:
    """A compiled model: the steps to run in order, and which device runs each operation.

    ``assignment[k]`` is the device of the original model's operation ``k``.
    ``allowsCpuFallback`` is true for plain compilation and false for
    ``createForDevices``. Operation indexes here are the HAL model's (run order);
    for a model an app built out of order, ``Model.appOperationIndex`` maps them back.
    """

    model: HalModel
    preference: ExecutionPreference
    candidates: tuple[DeviceDescriptor, ...]
    cpu: DeviceDescriptor | None
    allowsCpuFallback: bool
    assignment: tuple[DeviceDescriptor, ...]
    steps: tuple[ExecutionStep, ...]

    @property
    def devices(self) -> tuple[DeviceDescriptor, ...]:
        """The devices the plan uses, in step order, each once."""
        seen: dict[str, DeviceDescriptor] = {}
        for step in self.steps:
            seen.setdefault(step.device.name, step.device)
        return tuple(seen.values())

    def fallBackToCpu(self, deviceName: str | None = None) -> ExecutionPlan:
        """The plan to use after device ``deviceName`` failed: its operations on the CPU.

        With no name, the whole model moves to the CPU (Android's full fallback). Steps
        are cut again, so operations that now sit on the CPU next to each other share
        a step. A ``createForDevices`` plan never falls back: ``BAD_STATE``.
        """
        if not self.allowsCpuFallback or self.cpu is None:
            raise BadStateError("a createForDevices compilation never falls back to the CPU")
        if deviceName is not None and deviceName not in {d.name for d in self.candidates}:
            raise BadDataError(f"fallBackToCpu: device {deviceName!r} is not part of this plan")
        if deviceName == self.cpu.name:
            raise BadDataError("fallBackToCpu: the CPU device itself failed; there is nothing to fall back to")
        cpu_ok = self.cpu.getSupportedOperations(self.model)
        assignment = []
        for k, device in enumerate(self.assignment):
            if deviceName is None or device.name == deviceName:
                if not cpu_ok[k]:
                    raise OpFailedError(f"operation {k} ({self.model.operations[k].type.name}) cannot run on the CPU")
                device = self.cpu
            assignment.append(device)
        candidates = tuple(d for d in self.candidates if deviceName is None or d.name != deviceName)
        if deviceName is None:
            candidates = (self.cpu,)
        return _make_plan(self.model, self.preference, candidates, self.cpu, True, assignment)

    def describe(self) -> str:
        """A table for people: which operation runs where, and what flows between steps."""
        ops = self.model.operations
        lines = [
            f"ExecutionPlan: {len(ops)} operation(s) in {len(self.steps)} step(s) on "
            f"{len(self.devices)} device(s); preference {self.preference.name}; "
            f"CPU fallback {'allowed' if self.allowsCpuFallback else 'never (createForDevices)'}",
            "",
        ]
        rows = [("step", "device", "type", "operations", "inputs", "outputs")]
        for s in self.steps:
            rows.append(
                (
                    str(s.index),
                    s.device.name,
                    s.device.type.name,
                    ", ".join(f"#{k} {ops[k].type.name}" for k in s.operations),
                    " ".join(map(str, s.inputs)) or "-",
                    " ".join(map(str, s.outputs)) or "-",
                )
            )
        lines += _table(rows)
        lines.append("")
        rows = [("op", "operation", "step", "device", "execTime", "powerUsage")]
        step_of = {k: s.index for s in self.steps for k in s.operations}
        for k, (op, device) in enumerate(zip(ops, self.assignment, strict=True)):
            perf = operationPerformance(device, self.model, op)
            rows.append(
                (str(k), op.type.name, str(step_of[k]), device.name, f"{perf.execTime:g}", f"{perf.powerUsage:g}")
            )
        lines += _table(rows)
        lines.append("")
        lines.append("inputs/outputs are operand indexes of the whole model:")
        crossing = sorted({i for s in self.steps for i in (*s.inputs, *s.outputs)})
        lines += _table([("operand", "type")] + [(str(i), describeOperand(self.model.operands[i])) for i in crossing])
        return "\n".join(lines)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def createPlan(
    model: Model | HalModel,
    devices: Sequence[DeviceDescriptor],
    *,
    preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
    cpu: DeviceDescriptor | None = None,
    supported: Sequence[Sequence[bool]] | None = None,
) -> ExecutionPlan:
    """Plain compilation: the driver ``devices`` (possibly none) plus the CPU device.

    A driver whose ``getSupportedOperations`` fails is taken to support nothing, as
    Android's runtime does: a broken driver costs speed, never the compilation.
    ``supported``, when given, holds the drivers' answers (one list per device, the
    CPU is always asked here).
    """
    call = "createPlan"
    hal = _hal_of(model, call)
    cpu = cpu if cpu is not None else referenceCpuDevice()
    devices = _check_devices(call, devices, allowEmpty=True)
    if any(d.name == cpu.name for d in devices):
        raise BadDataError(f"{call}: a driver device may not be named {cpu.name}, the CPU device's name")
    candidates = [*devices, cpu]
    if supported is not None:
        answers = _answers(call, hal, devices, supported)
    else:
        answers = []
        for device in devices:
            try:
                answers.append(device.getSupportedOperations(hal))
            except NeuralNetworksError:
                answers.append([False] * len(hal.operations))
    answers.append(cpu.getSupportedOperations(hal))
    return _partition(hal, _preference(preference), candidates, cpu, True, answers)


def createPlanForDevices(
    model: Model | HalModel,
    devices: Sequence[DeviceDescriptor],
    *,
    preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
    supported: Sequence[Sequence[bool]] | None = None,
) -> ExecutionPlan:
    """``createForDevices``: only ``devices`` (the CPU only if listed), never a fallback.

    No devices or a duplicated device is ``BAD_DATA``, and so is an operation none of
    them supports; a device that fails to say what it supports fails the compilation.
    ``supported``, when given, holds every device's answer, in ``devices`` order.
    """
    call = "createPlanForDevices"
    hal = _hal_of(model, call)
    devices = _check_devices(call, devices)
    cpu = next((d for d in devices if d.name == CPU_DEVICE_NAME), None)
    return _partition(hal, _preference(preference), devices, cpu, False, _answers(call, hal, devices, supported))


#: The input whose operand type is an operation's type where it is not input 0 (the
#: others are lookup indexes or a condition). Android 10's runtime reads input 0 for
#: every operation; npuemu reads the data these three operations move.
_SELECTING_INPUT = {
    OperationType.EMBEDDING_LOOKUP: 1,
    OperationType.HASHTABLE_LOOKUP: 2,
    OperationType.SELECT: 1,
}


def operationPerformance(device: DeviceDescriptor, hal: HalModel, op: Any) -> PerformanceInfo:
    """The figure by which ``device`` competes for operation ``op`` of ``hal``.

    The device's ``PerformanceInfo`` for the operand type of the operation's selecting
    input; when the model lets float32 compute as float16, its relaxed figure
    (``relaxedFloat32toFloat16PerformanceTensor`` for TENSOR_FLOAT32,
    ``...Scalar`` for FLOAT32), as Android 10's ``ModelBuilder::getPerformance``.
    """
    operand_type = hal.operands[op.inputs[_SELECTING_INPUT.get(op.type, 0)]].type
    if hal.relaxComputationFloat32toFloat16:
        if operand_type == OperandType.TENSOR_FLOAT32:
            return device.capabilities.relaxedFloat32toFloat16PerformanceTensor
        if operand_type == OperandType.FLOAT32:
            return device.capabilities.relaxedFloat32toFloat16PerformanceScalar
    return device.getPerformance(operand_type)


def _preference(value: Any) -> ExecutionPreference:
    try:
        return ExecutionPreference(value)
    except ValueError:
        raise BadDataError(f"unknown execution preference {value!r}") from None


def _partition(
    hal: HalModel,
    preference: ExecutionPreference,
    candidates: Sequence[DeviceDescriptor],
    cpu: DeviceDescriptor | None,
    allowsCpuFallback: bool,
    supported: Sequence[Sequence[bool]],
) -> ExecutionPlan:
    assignment = []
    for k, op in enumerate(hal.operations):
        best, best_value = None, None
        for device, ok in zip(candidates, supported, strict=True):
            if not ok[k]:
                continue
            perf = operationPerformance(device, hal, op)
            value = perf.powerUsage if preference == ExecutionPreference.LOW_POWER else perf.execTime
            if best is None or value < best_value or (value == best_value and cpu is not None and device is cpu):
                best, best_value = device, value
        if best is None:
            raise BadDataError(
                f"operation {k} ({op.type.name}) is supported by none of the devices "
                f"{[d.name for d in candidates]}"
            )
        assignment.append(best)
    plan = _make_plan(hal, preference, tuple(candidates), cpu, allowsCpuFallback, assignment)
    unknown = _unknown_size_crossings(plan)
    if unknown:
        # Android 10's runtime cannot lay out a temporary between steps before it knows
        # its size: a plain compilation runs the whole model on the CPU instead, a
        # createForDevices one fails (ExecutionPlan's "step model output of unknown size").
        if not allowsCpuFallback or cpu is None:
            raise OpFailedError(
                f"operand(s) {unknown} cross from one device's step to another's with an unknown size: "
                "the model cannot be split across these devices (Android 10 runs it on one device or the CPU)"
            )
        cpu_ok = cpu.getSupportedOperations(hal)
        if not all(cpu_ok):
            raise OpFailedError(f"operand(s) {unknown} of unknown size cross steps, and the CPU cannot run the model whole")
        return _make_plan(hal, preference, tuple(candidates), cpu, True, [cpu] * len(hal.operations))
    return plan


def _unknown_size_crossings(plan: ExecutionPlan) -> list[int]:
    """Temporaries of the model that cross between steps while their size is not known."""
    if len(plan.steps) < 2:
        return []
    outputs = set(plan.model.outputIndexes)
    crossing = {i for s in plan.steps for i in s.outputs if i not in outputs}
    return sorted(i for i in crossing if expectedByteSize(plan.model.operands[i]) is None)


def _make_plan(
    hal: HalModel,
    preference: ExecutionPreference,
    candidates: tuple[DeviceDescriptor, ...],
    cpu: DeviceDescriptor | None,
    allowsCpuFallback: bool,
    assignment: Sequence[DeviceDescriptor],
) -> ExecutionPlan:
    groups = _cut_steps(hal, candidates, assignment)
    readers: dict[int, set[int]] = {}
    for s, (_, ops) in enumerate(groups):
        for k in ops:
            for i in hal.operations[k].inputs:
                readers.setdefault(i, set()).add(s)
    # A temporary no operation reads is a step output too: a sub-model must have at
    # least one output, and the value is there for whoever wants to look at it.
    unread = {i for op in hal.operations for i in op.outputs} - readers.keys()
    steps = tuple(
        _extract_step(hal, s, device, ops, unread | {i for i, r in readers.items() if any(t > s for t in r)})
        for s, (device, ops) in enumerate(groups)
    )
    return ExecutionPlan(hal, preference, candidates, cpu, allowsCpuFallback, tuple(assignment), steps)


def _cut_steps(
    hal: HalModel, candidates: Sequence[DeviceDescriptor], assignment: Sequence[DeviceDescriptor]
) -> list[tuple[DeviceDescriptor, list[int]]]:
    """Android's greedy cut: drain one device's queue of ready operations per step."""
    slot = {d.name: n for n, d in enumerate(candidates)}
    queues: list[deque[int]] = [deque() for _ in candidates]
    writer = {i: k for k, op in enumerate(hal.operations) for i in op.outputs}
    waiting = []
    readers: dict[int, list[int]] = {}
    for k, op in enumerate(hal.operations):
        pending = {i for i in op.inputs if i in writer}
        waiting.append(len(pending))
        for i in pending:
            readers.setdefault(i, []).append(k)
        if not pending:
            queues[slot[assignment[k].name]].append(k)
    groups = []
    while True:
        n = next((n for n, q in enumerate(queues) if q), None)
        if n is None:
            break
        ops = []
        while queues[n]:
            k = queues[n].popleft()
            ops.append(k)
            for i in hal.operations[k].outputs:
                for reader in readers.get(i, ()):
                    waiting[reader] -= 1
                    if waiting[reader] == 0:
                        queues[slot[assignment[reader].name]].append(reader)
        groups.append((candidates[n], ops))
    return groups


def _extract_step(
    hal: HalModel, index: int, device: DeviceDescriptor, ops: Sequence[int], readLater: set[int]
) -> ExecutionStep:
    """The sub-model of one step, with its own numbering and its constants carried."""
    written_here = {i for k in ops for i in hal.operations[k].outputs}
    new_index: dict[int, int] = {}
    operands: list[Operand] = []
    values = bytearray()
    pools: list[Any] = []
    pool_index: dict[int, int] = {}
    inputs: list[int] = []
    outputs: list[int] = []

    def add(i: int) -> int:
        if i in new_index:
            return new_index[i]
        o = hal.operands[i]
        location = DataLocation()
        if o.lifetime == OperandLifeTime.CONSTANT_COPY:
            values.extend(bytes(-len(values) % 4))
            location = DataLocation(offset=len(values), length=o.location.length)
            values.extend(hal.constantBytes(i))
            lifetime = o.lifetime
        elif o.lifetime == OperandLifeTime.CONSTANT_POOL:
            # Pools are shared, not copied: a step refers to the same weights in memory.
            if o.location.poolIndex not in pool_index:
                pool_index[o.location.poolIndex] = len(pools)
                pools.append(hal.pools[o.location.poolIndex])
            location = o.location.replace(poolIndex=pool_index[o.location.poolIndex])
            lifetime = o.lifetime
        elif o.lifetime == OperandLifeTime.NO_VALUE:
            lifetime = o.lifetime
        elif i in written_here:
            outward = o.lifetime == OperandLifeTime.SUBGRAPH_OUTPUT or i in readLater
            lifetime = OperandLifeTime.SUBGRAPH_OUTPUT if outward else OperandLifeTime.TEMPORARY_VARIABLE
            if outward:
                outputs.append(i)
        else:
            lifetime = OperandLifeTime.SUBGRAPH_INPUT
            inputs.append(i)
        new_index[i] = len(operands)
        operands.append(o.replace(lifetime=lifetime, location=location))
        return new_index[i]

    operations = []
    for k in ops:
        op = hal.operations[k]
        operations.append(op.replace(inputs=[add(i) for i in op.inputs], outputs=[add(i) for i in op.outputs]))
    main = Subgraph(
        operands=operands,
        operations=operations,
        inputIndexes=[new_index[i] for i in inputs],
        outputIndexes=[new_index[i] for i in outputs],
    )
    sub = HalModel(
        main,
        operandValues=bytes(values),
        pools=tuple(pools),
        relaxComputationFloat32toFloat16=hal.relaxComputationFloat32toFloat16,
    )
    return ExecutionStep(index, device, tuple(ops), validateModel(sub), tuple(inputs), tuple(outputs))
