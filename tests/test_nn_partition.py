"""The partitioner: NNAPI's device choice per operation, steps, sub-models, CPU fallback."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nn_reference as ref
from framework.nn import (
    CPU_DEVICE_NAME,
    BadDataError,
    BadStateError,
    DeadObjectError,
    DeviceDescriptor,
    DeviceType,
    ExecutionPreference,
    FuseCode,
    Model,
    OperandLifeTime,
    OperandType,
    OperationType,
    OpFailedError,
    PerformanceInfo,
    createPlan,
    createPlanForDevices,
    getSupportedOperationsForDevices,
    makeCapabilities,
    referenceCpuDevice,
    uniformCapabilities,
)

T = OperandType.TENSOR_FLOAT32
ALL = frozenset(OperationType)


def device(name, execTime=0.5, powerUsage=0.5, ops=ALL, type=DeviceType.ACCELERATOR):
    caps = makeCapabilities({T: PerformanceInfo(execTime=execTime, powerUsage=powerUsage)})
    return DeviceDescriptor(name, type, f"{name}-1.0", 29, caps, ops)


def int32(m, v):
    i = m.addOperand(OperandType.INT32)
    m.setOperandValue(i, v)
    return i


def const(m, array):
    array = np.asarray(array, np.float32)
    i = m.addOperand(T, array.shape)
    m.setOperandValue(i, array)
    return i


def vision_model():
    """conv -> relu -> fully connected -> softmax: a small classifier."""
    rng = np.random.default_rng(7)
    m = Model()
    x = m.addOperand(T, [1, 6, 6, 2])
    conv = m.addOperand(T, [])
    m.addOperation(
        OperationType.CONV_2D,
        [x, const(m, rng.standard_normal((4, 3, 3, 2))), const(m, rng.standard_normal(4)),
         *(int32(m, v) for v in (1, 1, 1, 1, 2, 2, FuseCode.NONE))],
        [conv],
    )
    act = m.addOperand(T, [])
    m.addOperation(OperationType.RELU, [conv], [act])
    # The conv output is [1, 3, 3, 4]; FULLY_CONNECTED takes [batch, in], so the
    # classifier runs on the flattened features of a second input of that size.
    features = m.addOperand(T, [1, 36])
    logits = m.addOperand(T, [])
    m.addOperation(
        OperationType.FULLY_CONNECTED,
        [features, const(m, rng.standard_normal((5, 36))), const(m, rng.standard_normal(5)), int32(m, FuseCode.RELU)],
        [logits],
    )
    probs = m.addOperand(T, [])
    m.addOperation(OperationType.SOFTMAX, [logits, _float(m, 1.0)], [probs])
    m.identifyInputsAndOutputs([x, features], [act, probs])
    m.finish()
    return m


def chain_model():
    """x -> ADD(+c) -> MUL(*c) -> SUB(-c) -> RELU -> FC -> SOFTMAX, every result feeding the next."""
    rng = np.random.default_rng(3)
    m = Model()
    x = m.addOperand(T, [2, 8])
    c = const(m, rng.standard_normal((2, 8)))
    prev = x
    for op in (OperationType.ADD, OperationType.MUL, OperationType.SUB):
        out = m.addOperand(T, [2, 8])
        m.addOperation(op, [prev, c, int32(m, FuseCode.NONE)], [out])
        prev = out
    r = m.addOperand(T, [2, 8])
    m.addOperation(OperationType.RELU, [prev], [r])
    fc = m.addOperand(T, [2, 4])
    m.addOperation(
        OperationType.FULLY_CONNECTED,
        [r, const(m, rng.standard_normal((4, 8))), const(m, rng.standard_normal(4)), int32(m, FuseCode.NONE)],
        [fc],
    )
    y = m.addOperand(T, [2, 4])
    m.addOperation(OperationType.SOFTMAX, [fc, _float(m, 2.0)], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    return m


def _float(m, v):
    i = m.addOperand(OperandType.FLOAT32)
    m.setOperandValue(i, v)
    return i


def names(plan):
    return [d.name for d in plan.assignment]


# -- getSupportedOperationsForDevices ------------------------------------------


def test_supported_operations_are_the_union_over_the_devices():
    m = chain_model()
    conv_npu = device("acme-npu", ops={OperationType.ADD, OperationType.RELU})
    fc_gpu = device("acme-gpu", ops={OperationType.FULLY_CONNECTED}, type=DeviceType.GPU)
    assert getSupportedOperationsForDevices(m, [conv_npu]) == [True, False, False, True, False, False]
    assert getSupportedOperationsForDevices(m, [conv_npu, fc_gpu]) == [True, False, False, True, True, False]
    assert getSupportedOperationsForDevices(m.to_hal(), [referenceCpuDevice()]) == [True] * 6


def test_supported_operations_refuses_no_devices_duplicates_and_non_devices():
    m = chain_model()
    with pytest.raises(BadDataError, match="no devices"):
        getSupportedOperationsForDevices(m, [])
    with pytest.raises(BadDataError, match="listed twice"):
        getSupportedOperationsForDevices(m, [device("acme-npu"), device("acme-npu", 0.1)])
    with pytest.raises(BadDataError, match="not a device"):
        getSupportedOperationsForDevices(m, ["acme-npu"])
    with pytest.raises(BadDataError, match="list of devices"):
        getSupportedOperationsForDevices(m, device("acme-npu"))


def test_a_device_answering_with_the_wrong_number_of_bools_is_op_failed():
    liar = device("acme-npu", ops=lambda model: [True])
    with pytest.raises(OpFailedError, match="1 answers for 6 operations"):
        getSupportedOperationsForDevices(chain_model(), [liar])
    with pytest.raises(OpFailedError, match="not a list"):
        getSupportedOperationsForDevices(chain_model(), [device("acme-npu", ops=lambda model: None)])


def test_a_supported_operations_function_sees_the_hal_model():
    seen = []

    def only_wide_tensors(model):
        seen.append(model)
        return [model.operands[op.inputs[0]].dimensions[-1] >= 8 for op in model.operations]

    m = chain_model()
    assert getSupportedOperationsForDevices(m, [device("acme-npu", ops=only_wide_tensors)]) == [True] * 5 + [False]
    assert seen == [m.to_hal()]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": ""}, "non-empty string"),
        ({"type": 9}, "unknown device type 9"),
        ({"version": 1}, "version is a string"),
        ({"featureLevel": "29"}, "feature level is an int"),
        ({"capabilities": {T: (1, 1)}}, "must be a Capabilities"),
        ({"supportedOperations": [142]}, "a function or a set of OperationType"),
    ],
)
def test_device_descriptors_refuse_nonsense(kwargs, match):
    fields = dict(
        name="acme-npu", type=DeviceType.ACCELERATOR, version="1", featureLevel=29,
        capabilities=uniformCapabilities(1, 1),
    )
    with pytest.raises(BadDataError, match=match):
        DeviceDescriptor(**{**fields, **kwargs})


# -- the device choice ----------------------------------------------------------


def test_each_operation_goes_to_the_lowest_exec_time():
    m = chain_model()
    npu = device("acme-npu", execTime=0.3, powerUsage=3.0)
    gpu = device("acme-gpu", execTime=0.6, powerUsage=0.2, type=DeviceType.GPU)
    plan = createPlan(m, [gpu, npu])
    assert names(plan) == ["acme-npu"] * 6
    assert len(plan.steps) == 1 and plan.steps[0].device is npu


def test_low_power_chooses_by_power_usage():
    m = chain_model()
    npu = device("acme-npu", execTime=0.3, powerUsage=3.0)
    gpu = device("acme-gpu", execTime=0.6, powerUsage=0.2, type=DeviceType.GPU)
    plan = createPlan(m, [gpu, npu], preference=ExecutionPreference.LOW_POWER)
    assert names(plan) == ["acme-gpu"] * 6
    assert plan.preference == ExecutionPreference.LOW_POWER
    sustained = createPlan(m, [gpu, npu], preference=ExecutionPreference.SUSTAINED_SPEED)
    assert names(sustained) == ["acme-npu"] * 6


def test_the_cpu_wins_ties_and_the_first_listed_driver_wins_among_drivers():
    m = chain_model()
    as_fast_as_cpu = device("acme-npu", execTime=1.0, powerUsage=1.0)
    assert names(createPlan(m, [as_fast_as_cpu])) == [CPU_DEVICE_NAME] * 6
    a, b = device("acme-a", execTime=0.5), device("acme-b", execTime=0.5)
    assert names(createPlan(m, [a, b])) == ["acme-a"] * 6
    assert names(createPlan(m, [b, a])) == ["acme-b"] * 6
    # A driver that calls itself a CPU is still a driver: it does not win ties.
    vendor_cpu = device("acme-cpu", execTime=1.0, type=DeviceType.CPU)
    assert names(createPlanForDevices(m, [vendor_cpu, referenceCpuDevice()])) == [CPU_DEVICE_NAME] * 6


def test_the_choice_uses_the_first_operands_type():
    m = chain_model()
    # Fast for INT32 scalars, unknown (FLT_MAX) for float tensors: never chosen.
    scalar_fast = DeviceDescriptor(
        "acme-dsp", DeviceType.ACCELERATOR, "1", 29,
        makeCapabilities({OperandType.INT32: PerformanceInfo(execTime=0.01, powerUsage=0.01)}),
    )
    assert names(createPlan(m, [scalar_fast])) == [CPU_DEVICE_NAME] * 6
    tensor_fast = DeviceDescriptor(
        "acme-dsp", DeviceType.ACCELERATOR, "1", 29,
        makeCapabilities({OperandType.INT32: PerformanceInfo(execTime=9, powerUsage=9), T: PerformanceInfo(execTime=0.9, powerUsage=9)}),
    )
    assert names(createPlan(m, [tensor_fast])) == ["acme-dsp"] * 6


def test_a_slower_than_cpu_device_is_not_used_by_plain_compilation_but_is_by_create_for_devices():
    m = chain_model()
    slow = device("acme-slow", execTime=4.0)
    assert names(createPlan(m, [slow])) == [CPU_DEVICE_NAME] * 6
    plan = createPlanForDevices(m, [slow])
    assert names(plan) == ["acme-slow"] * 6
    assert plan.cpu is None and not plan.allowsCpuFallback


def test_an_operation_no_candidate_supports_is_bad_data_for_create_for_devices():
    m = chain_model()
    no_softmax = device("acme-npu", ops=ALL - {OperationType.SOFTMAX})
    with pytest.raises(BadDataError, match=r"operation 5 \(SOFTMAX\) is supported by none of the devices \['acme-npu'\]"):
        createPlanForDevices(m, [no_softmax])
    plain = createPlan(m, [no_softmax])
    assert names(plain) == ["acme-npu"] * 5 + [CPU_DEVICE_NAME]
    narrow_cpu = DeviceDescriptor(CPU_DEVICE_NAME, DeviceType.CPU, "1", 29, uniformCapabilities(1, 1), {OperationType.ADD})
    with pytest.raises(BadDataError, match="supported by none"):
        createPlan(m, [no_softmax], cpu=narrow_cpu)


def test_create_for_devices_uses_exactly_the_subset_given():
    m = chain_model()
    npu = device("acme-npu", execTime=0.2, ops={OperationType.ADD, OperationType.MUL, OperationType.SUB})
    gpu = device("acme-gpu", execTime=0.7, type=DeviceType.GPU)
    assert names(createPlanForDevices(m, [gpu])) == ["acme-gpu"] * 6
    both = createPlanForDevices(m, [gpu, npu])
    assert names(both) == ["acme-npu"] * 3 + ["acme-gpu"] * 3
    assert [s.device.name for s in both.steps] == ["acme-npu", "acme-gpu"]
    assert CPU_DEVICE_NAME not in {d.name for d in both.candidates}
    with_cpu = createPlanForDevices(m, [npu, referenceCpuDevice()])
    assert names(with_cpu) == ["acme-npu"] * 3 + [CPU_DEVICE_NAME] * 3
    for bad, match in (([], "no devices"), ([gpu, gpu], "listed twice")):
        with pytest.raises(BadDataError, match=match):
            createPlanForDevices(m, bad)


def test_plain_compilation_treats_a_broken_driver_as_supporting_nothing_create_for_devices_fails():
    def crash(model):
        raise DeadObjectError("acme-npu died")

    broken = device("acme-npu", execTime=0.1, ops=crash)
    assert names(createPlan(chain_model(), [broken])) == [CPU_DEVICE_NAME] * 6
    with pytest.raises(DeadObjectError):
        createPlanForDevices(chain_model(), [broken])


def test_plain_compilation_refuses_bad_arguments():
    m = chain_model()
    with pytest.raises(BadDataError, match="CPU device's name"):
        createPlan(m, [device(CPU_DEVICE_NAME)])
    with pytest.raises(BadDataError, match="listed twice"):
        createPlan(m, [device("acme-npu"), device("acme-npu")])
    with pytest.raises(BadDataError, match="unknown execution preference 7"):
        createPlan(m, [], preference=7)
    with pytest.raises(BadDataError, match="expected a Model or HalModel"):
        createPlan(m.to_hal().main, [])


# -- steps and sub-models --------------------------------------------------------


def test_a_plan_really_splits_one_model_across_two_devices_and_gives_identical_results():
    m = chain_model()
    npu = device("acme-npu", execTime=0.2, ops={OperationType.ADD, OperationType.MUL, OperationType.FULLY_CONNECTED})
    gpu = device("acme-gpu", execTime=0.5, type=DeviceType.GPU)
    plan = createPlanForDevices(m, [npu, gpu])
    assert names(plan) == ["acme-npu", "acme-npu", "acme-gpu", "acme-gpu", "acme-npu", "acme-gpu"]
    assert [(s.device.name, s.operations) for s in plan.steps] == [
        ("acme-npu", (0, 1)),
        ("acme-gpu", (2, 3)),
        ("acme-npu", (4,)),
        ("acme-gpu", (5,)),
    ]
    hal = m.to_hal()
    first, second = plan.steps[0], plan.steps[1]
    # Step 0 reads the model input and hands MUL's result (a temporary) to step 1.
    assert list(first.inputs) == hal.inputIndexes
    assert list(first.outputs) == hal.operations[1].outputs
    assert second.inputs == first.outputs
    assert list(plan.steps[-1].outputs) == hal.outputIndexes
    # Each sub-model numbers its own operands, and carries the constants it reads.
    sub = first.model
    assert len(sub.operands) == 6  # x, c, ADD's fuse, ADD's result, MUL's fuse, MUL's result
    assert [o.lifetime for o in sub.operands].count(OperandLifeTime.SUBGRAPH_INPUT) == 1
    assert sub.operands[sub.outputIndexes[0]].lifetime == OperandLifeTime.SUBGRAPH_OUTPUT
    assert sub.operands[sub.operations[0].outputs[0]].lifetime == OperandLifeTime.TEMPORARY_VARIABLE
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    whole = ref.run(hal, [x])
    split = ref.run_plan(plan, [x])
    assert np.array_equal(whole[0], split[0])


def test_large_weights_stay_in_shared_pools_and_small_ones_are_copied_per_step():
    m = vision_model()
    npu = device("acme-npu", execTime=0.2, ops={OperationType.CONV_2D, OperationType.FULLY_CONNECTED})
    plan = createPlan(m, [npu])
    hal = m.to_hal()
    npu_steps = [s for s in plan.steps if s.device is npu]
    assert npu_steps and all(s.model.pools for s in npu_steps)
    for s in npu_steps:
        for pool in s.model.pools:
            assert any(pool is p for p in hal.pools)  # shared, not copied
    for s in plan.steps:
        for k, op in zip(s.operations, s.model.operations, strict=True):
            assert op.type == hal.operations[k].type


def test_a_model_output_read_by_a_later_step_is_output_of_one_step_and_input_of_the_next():
    m = Model()
    x = m.addOperand(T, [3])
    a = m.addOperand(T, [3])
    b = m.addOperand(T, [3])
    m.addOperation(OperationType.RELU, [x], [a])
    m.addOperation(OperationType.ADD, [a, x, int32(m, FuseCode.RELU6)], [b])
    m.identifyInputsAndOutputs([x], [a, b])
    m.finish()
    relu_npu = device("acme-npu", ops={OperationType.RELU})
    plan = createPlan(m, [relu_npu])
    assert [(s.device.name, s.inputs, s.outputs) for s in plan.steps] == [
        ("acme-npu", (x,), (a,)),
        (CPU_DEVICE_NAME, (a, x), (b,)),
    ]
    value = np.array([-1, 2, 9], np.float32)
    assert [r.tolist() for r in ref.run_plan(plan, [value])] == [[0, 2, 9], [0, 4, 6]]


def test_ready_operations_of_one_device_share_a_step_even_across_branches():
    m = Model()
    x = m.addOperand(T, [4])
    outs = []
    for op in (OperationType.RELU, OperationType.ADD, OperationType.RELU):
        out = m.addOperand(T, [4])
        ins = [x] if op == OperationType.RELU else [x, x, int32(m, 0)]
        m.addOperation(op, ins, [out])
        outs.append(out)
    m.identifyInputsAndOutputs([x], outs)
    m.finish()
    plan = createPlan(m, [device("acme-npu", ops={OperationType.RELU})])
    assert [(s.device.name, s.operations) for s in plan.steps] == [("acme-npu", (0, 2)), (CPU_DEVICE_NAME, (1,))]


def test_a_temporary_nothing_reads_is_still_a_step_output():
    m = Model()
    x = m.addOperand(T, [2])
    dead = m.addOperand(T, [2])
    y = m.addOperand(T, [2])
    m.addOperation(OperationType.RELU, [x], [dead])
    m.addOperation(OperationType.ADD, [x, x, int32(m, 0)], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    plan = createPlan(m, [device("acme-npu", ops={OperationType.RELU})])
    assert plan.steps[0].outputs == (dead,)
    assert ref.run_plan(plan, [np.array([1, -1], np.float32)])[0].tolist() == [2, -2]


# -- CPU fallback -----------------------------------------------------------------


def test_fall_back_to_cpu_moves_only_the_failed_devices_operations_and_merges_steps():
    m = chain_model()
    npu = device("acme-npu", execTime=0.2, ops={OperationType.ADD, OperationType.MUL})
    gpu = device("acme-gpu", execTime=0.5, ops={OperationType.FULLY_CONNECTED}, type=DeviceType.GPU)
    plan = createPlan(m, [npu, gpu])
    assert names(plan) == ["acme-npu", "acme-npu", CPU_DEVICE_NAME, CPU_DEVICE_NAME, "acme-gpu", CPU_DEVICE_NAME]
    after = plan.fallBackToCpu("acme-npu")
    assert names(after) == [CPU_DEVICE_NAME] * 4 + ["acme-gpu", CPU_DEVICE_NAME]
    assert [s.device.name for s in after.steps] == [CPU_DEVICE_NAME, "acme-gpu", CPU_DEVICE_NAME]
    assert "acme-npu" not in {d.name for d in after.candidates}
    full = plan.fallBackToCpu()
    assert len(full.steps) == 1 and full.steps[0].device.name == CPU_DEVICE_NAME
    x = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)
    expected = ref.run(m.to_hal(), [x])[0]
    for p in (plan, after, full):
        assert np.array_equal(ref.run_plan(p, [x])[0], expected)


def test_create_for_devices_never_falls_back():
    plan = createPlanForDevices(chain_model(), [device("acme-npu")])
    with pytest.raises(BadStateError, match="never falls back"):
        plan.fallBackToCpu("acme-npu")


def test_fall_back_refuses_unknown_devices_and_the_cpu_itself():
    plan = createPlan(chain_model(), [device("acme-npu")])
    with pytest.raises(BadDataError, match="not part of this plan"):
        plan.fallBackToCpu("qti-dsp")
    with pytest.raises(BadDataError, match="nothing to fall back to"):
        plan.fallBackToCpu(CPU_DEVICE_NAME)


# -- describe ----------------------------------------------------------------------


def test_describe_shows_which_operation_runs_where():
    m = chain_model()
    npu = device("acme-npu", execTime=0.25, powerUsage=0.75, ops={OperationType.ADD, OperationType.MUL})
    text = createPlan(m, [npu]).describe()
    lines = text.splitlines()
    assert lines[0].startswith("ExecutionPlan: 6 operation(s) in 2 step(s) on 2 device(s); preference FAST_SINGLE_ANSWER")
    assert "CPU fallback allowed" in lines[0]
    rows = [line.split() for line in lines]
    steps_at = rows.index(["step", "device", "type", "operations", "inputs", "outputs"])
    assert rows[steps_at + 1] == ["0", "acme-npu", "ACCELERATOR", "#0", "ADD,", "#1", "MUL", "0", "4"]
    assert rows[steps_at + 2][:3] == ["1", CPU_DEVICE_NAME, "CPU"]
    assert rows[steps_at + 2][-2:] == ["4", "13"]  # MUL's result flows from step 0 to step 1
    ops_at = rows.index(["op", "operation", "step", "device", "execTime", "powerUsage"])
    assert rows[ops_at + 1] == ["0", "ADD", "0", "acme-npu", "0.25", "0.75"]
    assert rows[ops_at + 6] == ["5", "SOFTMAX", "1", CPU_DEVICE_NAME, "1", "1"]
    # Columns line up: every row of a table starts its device column at the same place.
    table = lines[ops_at : ops_at + 7]
    assert len({line.index("acme-npu") if "acme-npu" in line else line.index(CPU_DEVICE_NAME) for line in table[1:]}) == 1
    for_devices = createPlanForDevices(m, [device("acme-gpu", type=DeviceType.GPU)]).describe()
    assert "CPU fallback never (createForDevices)" in for_devices.splitlines()[0]


# -- property: any plan computes what the whole model computes -------------------

_ELEMENTWISE = [OperationType.ADD, OperationType.SUB, OperationType.MUL]


@st.composite
def random_models(draw):
    """A random DAG over [batch, n] tensors: elementwise ops, RELU, FC, SOFTMAX."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    batch, n = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    m = Model()
    inputs = [m.addOperand(T, [batch, n]) for _ in range(draw(st.integers(1, 2)))]
    available = list(inputs)  # every value is [batch, n]
    consumed: set[int] = set()
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(_ELEMENTWISE + [OperationType.RELU, OperationType.FULLY_CONNECTED, OperationType.SOFTMAX]))
        a = draw(st.sampled_from(available))
        out = m.addOperand(T, [batch, n])
        if kind in _ELEMENTWISE:
            b = draw(st.sampled_from(available + ["const"]))
            if b == "const":
                b = const(m, rng.standard_normal((batch, n)))
            m.addOperation(kind, [a, b, int32(m, draw(st.sampled_from(list(FuseCode))))], [out])
            consumed.add(b)
        elif kind == OperationType.RELU:
            m.addOperation(kind, [a], [out])
        elif kind == OperationType.FULLY_CONNECTED:
            m.addOperation(
                kind,
                [a, const(m, rng.standard_normal((n, n))), const(m, rng.standard_normal(n)), int32(m, FuseCode.NONE)],
                [out],
            )
        else:
            m.addOperation(kind, [a, _float(m, draw(st.sampled_from([0.5, 1.0, 3.0])))], [out])
        consumed.add(a)
        available.append(out)
    results = [i for i in available if i not in inputs]
    outputs = [results[-1]] + [i for i in results[:-1] if i not in consumed or draw(st.booleans())]
    m.identifyInputsAndOutputs(inputs, outputs)
    m.finish()
    feeds = [rng.standard_normal((batch, n)).astype(np.float32) for _ in inputs]
    return m, feeds


@st.composite
def random_devices(draw):
    count = draw(st.integers(1, 3))
    devices = []
    for k in range(count):
        ops = draw(st.sets(st.sampled_from(list(OperationType))))
        perf = PerformanceInfo(execTime=draw(st.sampled_from([0.25, 0.5, 1.0, 2.0])), powerUsage=draw(st.sampled_from([0.25, 1.0, 4.0])))
        devices.append(DeviceDescriptor(f"acme-dev{k}", DeviceType.ACCELERATOR, "1", 29, makeCapabilities({T: perf}), ops))
    return devices


@settings(max_examples=120, deadline=None)
@given(random_models(), random_devices(), st.sampled_from(list(ExecutionPreference)))
def test_every_plan_computes_exactly_what_the_whole_model_computes(model_and_feeds, devices, preference):
    m, feeds = model_and_feeds
    hal = m.to_hal()
    plan = createPlan(m, devices, preference=preference)
    cpu = plan.cpu
    for k, (op, chosen) in enumerate(zip(hal.operations, plan.assignment, strict=True)):
        def cost(d):
            p = d.getPerformance(T)
            return p.powerUsage if preference == ExecutionPreference.LOW_POWER else p.execTime

        able = [d for d in [*devices, cpu] if op.type in d.supportedOperations]
        assert chosen in able
        assert cost(chosen) == min(cost(d) for d in able)
        if cost(cpu) == cost(chosen):
            assert chosen is cpu
    stepped = sorted(k for s in plan.steps for k in s.operations)
    assert stepped == list(range(len(hal.operations)))
    whole = ref.run(hal, feeds)
    split = ref.run_plan(plan, feeds)
    for w, s in zip(whole, split, strict=True):
        assert np.array_equal(w, s, equal_nan=True)
    if any(s.device is not cpu for s in plan.steps):
        fallen = plan.fallBackToCpu(next(s.device.name for s in plan.steps if s.device is not cpu))
        for w, s in zip(whole, ref.run_plan(fallen, feeds), strict=True):
            assert np.array_equal(w, s, equal_nan=True)


def test_answers_given_by_the_caller_replace_asking_the_devices():
    # A runtime whose devices answer over the binder asks first and passes the answers.
    model = vision_model()
    n = model.operationCount

    def refuse(_hal):
        raise AssertionError("a device was asked although its answer was given")

    npu = device("emu-npu", execTime=0.1, ops=refuse)
    plan = createPlanForDevices(model, [npu], supported=[[True] * n])
    assert {d.name for d in plan.assignment} == {"emu-npu"}
    plan = createPlan(model, [npu], supported=[[False] * n])
    assert {d.name for d in plan.assignment} == {CPU_DEVICE_NAME}
    assert getSupportedOperationsForDevices(model, [npu], supported=[[True] + [False] * (n - 1)]).count(True) == 1
    for wrong in ([], [[True] * (n + 1)], [[True] * n, [True] * n]):
        with pytest.raises(BadDataError, match="one answer per device"):
            createPlanForDevices(model, [npu], supported=wrong)


def test_relaxed_models_compete_on_the_relaxed_figures():
    """A relaxed float32 model goes where float16-speed float32 is cheapest, as Android 10."""
    def model(relaxed):
        m = Model()
        x = m.addOperand(T, [1, 4])
        y = m.addOperand(T, [1, 4])
        m.addOperation(OperationType.RELU, [x], [y])
        m.identifyInputsAndOutputs([x], [y])
        if relaxed:
            m.relaxComputationFloat32toFloat16(True)
        m.finish()
        return m

    float_caps = {T: PerformanceInfo(execTime=0.5, powerUsage=0.5)}
    fast16 = PerformanceInfo(execTime=0.1, powerUsage=0.1)
    plain = DeviceDescriptor("a-plain", DeviceType.GPU, "1", 29, makeCapabilities(float_caps), ALL)
    halfy = DeviceDescriptor(
        "b-halfy", DeviceType.GPU, "1", 29,
        makeCapabilities({T: PerformanceInfo(execTime=0.9, powerUsage=0.9)}).replace(
            relaxedFloat32toFloat16PerformanceTensor=fast16), ALL,
    )
    assert [s.device.name for s in createPlan(model(False), [plain, halfy]).steps] == ["a-plain"]
    assert [s.device.name for s in createPlan(model(True), [plain, halfy]).steps] == ["b-halfy"]


def test_an_operation_competes_on_its_selecting_inputs_type():
    """SELECT's type is its data's (input 1), not its TENSOR_BOOL8 condition's."""
    m = Model()
    cond = m.addOperand(OperandType.TENSOR_BOOL8, [4])
    a = m.addOperand(T, [4])
    b = m.addOperand(T, [4])
    out = m.addOperand(T, [4])
    m.addOperation(OperationType.SELECT, [cond, a, b], [out])
    m.identifyInputsAndOutputs([cond, a, b], [out])
    m.finish()
    bool8 = OperandType.TENSOR_BOOL8
    by_bool = DeviceDescriptor("a-bool", DeviceType.GPU, "1", 29, makeCapabilities(
        {bool8: PerformanceInfo(execTime=0.1, powerUsage=0.1), T: PerformanceInfo(execTime=0.9, powerUsage=0.9)}), ALL)
    by_float = DeviceDescriptor("b-float", DeviceType.GPU, "1", 29, makeCapabilities(
        {bool8: PerformanceInfo(execTime=0.9, powerUsage=0.9), T: PerformanceInfo(execTime=0.2, powerUsage=0.2)}), ALL)
    assert [s.device.name for s in createPlan(m, [by_bool, by_float]).steps] == ["b-float"]


def unknown_temporary_model():
    """x (dims unknown) -> SUB -> t (unknown) -> RELU -> y: t's size is known only at execution."""
    m = Model()
    x = m.addOperand(T, [0, 4])
    t = m.addOperand(T, [0, 4])
    y = m.addOperand(T, [0, 4])
    m.addOperation(OperationType.SUB, [x, x, int32(m, FuseCode.NONE)], [t])
    m.addOperation(OperationType.RELU, [t], [y])
    m.identifyInputsAndOutputs([x], [y])
    m.finish()
    return m


def test_a_split_over_a_temporary_of_unknown_size_falls_back_as_android_10():
    """Android 10 cannot partition a model whose step crosses a temporary of unknown
    size: plain compilation runs the whole model on the CPU, createForDevices fails."""
    subber = device("a-sub", 0.1, 0.1, ops={OperationType.SUB})
    relu = device("b-relu", 0.1, 0.1, ops={OperationType.RELU})
    plan = createPlan(unknown_temporary_model(), [subber, relu])
    assert [s.device.name for s in plan.steps] == [CPU_DEVICE_NAME]
    assert len(plan.steps[0].operations) == 2
    with pytest.raises(OpFailedError, match="unknown size"):
        createPlanForDevices(unknown_temporary_model(), [subber, relu])
    # One device runs it whole: nothing crosses, nothing to refuse.
    both = device("c-both", 0.1, 0.1)
    assert [s.device.name for s in createPlanForDevices(unknown_temporary_model(), [both]).steps] == ["c-both"]
