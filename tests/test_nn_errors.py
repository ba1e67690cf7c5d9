"""NNAPI result codes: Android's numbers, one exception class each, the public surface."""

import pytest

import framework.nn as nn
from framework.nn import ErrorStatus, NeuralNetworksError, ResultCode

# Android's numbers (NeuralNetworks.h), written out here on purpose rather than read
# from the enum under test.
ANDROID_RESULT_CODES = {
    "NO_ERROR": 0,
    "OUT_OF_MEMORY": 1,
    "INCOMPLETE": 2,
    "UNEXPECTED_NULL": 3,
    "BAD_DATA": 4,
    "OP_FAILED": 5,
    "BAD_STATE": 6,
    "UNMAPPABLE": 7,
    "OUTPUT_INSUFFICIENT_SIZE": 8,
    "UNAVAILABLE_DEVICE": 9,
    "MISSED_DEADLINE_TRANSIENT": 10,
    "MISSED_DEADLINE_PERSISTENT": 11,
    "RESOURCE_EXHAUSTED_TRANSIENT": 12,
    "RESOURCE_EXHAUSTED_PERSISTENT": 13,
    "DEAD_OBJECT": 14,
}


def test_result_codes_are_androids():
    assert {c.name: int(c) for c in ResultCode} == ANDROID_RESULT_CODES


@pytest.mark.parametrize("code", [c for c in ResultCode if c != ResultCode.NO_ERROR], ids=lambda c: c.name)
def test_every_error_code_has_its_own_exception_carrying_the_number(code):
    error = nn.error_for_result_code(code, "why")
    assert isinstance(error, NeuralNetworksError)
    assert error.resultCode == code
    assert str(error) == f"ANEURALNETWORKS_{code.name}: why"
    with pytest.raises(type(error)) as info:
        raise error
    assert info.value.resultCode == int(code)


def test_all_error_classes_are_distinct():
    classes = {type(nn.error_for_result_code(c)) for c in ResultCode if c != ResultCode.NO_ERROR}
    assert len(classes) == len(ResultCode) - 1


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (nn.BadDataError, ValueError),
        (nn.BadStateError, RuntimeError),
        (nn.OutOfMemoryError, MemoryError),
        (nn.UnexpectedNullError, TypeError),
        (nn.DeadObjectError, ConnectionError),
        (nn.MissedDeadlineTransientError, TimeoutError),
        (nn.OpFailedError, RuntimeError),
    ],
)
def test_errors_are_also_the_builtin_they_resemble(cls, builtin):
    with pytest.raises(builtin):
        raise cls("x")
    with pytest.raises(NeuralNetworksError):
        raise cls("x")


def test_no_error_is_not_an_exception_and_unknown_codes_become_op_failed():
    with pytest.raises(ValueError, match="NO_ERROR is not an error"):
        nn.error_for_result_code(0)
    error = nn.error_for_result_code(99, "from a driver")
    assert isinstance(error, nn.OpFailedError)
    assert "99" in str(error)


def test_hal_error_status_maps_as_androids_runtime_does():
    assert nn.convertErrorStatusToResultCode(ErrorStatus.NONE) == ResultCode.NO_ERROR
    assert nn.convertErrorStatusToResultCode(ErrorStatus.DEVICE_UNAVAILABLE) == ResultCode.UNAVAILABLE_DEVICE
    assert nn.convertErrorStatusToResultCode(ErrorStatus.GENERAL_FAILURE) == ResultCode.OP_FAILED
    assert nn.convertErrorStatusToResultCode(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE) == ResultCode.OUTPUT_INSUFFICIENT_SIZE
    assert nn.convertErrorStatusToResultCode(ErrorStatus.INVALID_ARGUMENT) == ResultCode.BAD_DATA
    assert nn.convertErrorStatusToResultCode(ErrorStatus.MISSED_DEADLINE_TRANSIENT) == ResultCode.MISSED_DEADLINE_TRANSIENT
    assert (
        nn.convertErrorStatusToResultCode(ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT)
        == ResultCode.RESOURCE_EXHAUSTED_PERSISTENT
    )
    assert nn.convertErrorStatusToResultCode(42) == ResultCode.OP_FAILED


def test_enum_numbers_match_the_hal_and_ndk():
    assert nn.FEATURE_LEVEL == 29
    assert {t.name: int(t) for t in nn.DeviceType if t} == {"OTHER": 1, "CPU": 2, "GPU": 3, "ACCELERATOR": 4}
    assert {p.name: int(p) for p in nn.ExecutionPreference} == {
        "LOW_POWER": 0,
        "FAST_SINGLE_ANSWER": 1,
        "SUSTAINED_SPEED": 2,
    }
    assert [int(t) for t in nn.OperationType] == list(range(95))
    assert nn.OperationType.SUB == 36 and nn.OperationType.RESIZE_NEAREST_NEIGHBOR == 94
    assert [int(f) for f in nn.FuseCode] == [0, 1, 2, 3]
    assert nn.OperandType.TENSOR_FLOAT32 == 3 and nn.OperandType.BOOL == 6
    assert nn.OperandType.TENSOR_FLOAT16 == 8 and nn.OperandType.TENSOR_QUANT8_SYMM == 13
    assert nn.OperandLifeTime.CONSTANT_POOL == 4 and nn.OperandLifeTime.NO_VALUE == 5
    assert [s.name for s in nn.DeviceStatus] == ["AVAILABLE", "BUSY", "OFFLINE", "UNKNOWN"]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_performance_info_refuses_what_vts_would(bad):
    with pytest.raises(nn.BadDataError, match="execTime must be > 0"):
        nn.checkPerformanceInfo(nn.PerformanceInfo(execTime=bad, powerUsage=1.0), "npu")
    with pytest.raises(nn.BadDataError, match="powerUsage must be > 0"):
        nn.checkPerformanceInfo(nn.PerformanceInfo(execTime=1.0, powerUsage=bad), "npu")
    # A device claiming it is refused when described, its name in the message.
    caps = nn.makeCapabilities({nn.OperandType.INT32: nn.PerformanceInfo(execTime=bad, powerUsage=1.0)})
    with pytest.raises(nn.BadDataError, match=r"device acme-npu: capabilities\[INT32\]\.execTime must be > 0"):
        nn.DeviceDescriptor("acme-npu", nn.DeviceType.ACCELERATOR, "1", 29, caps)
    relaxed = nn.uniformCapabilities(1, 1).replace(relaxedFloat32toFloat16PerformanceTensor=nn.PerformanceInfo(execTime=1.0, powerUsage=bad))
    with pytest.raises(nn.BadDataError, match=r"relaxedFloat32toFloat16PerformanceTensor\.powerUsage must be > 0"):
        nn.checkCapabilities(relaxed)


@pytest.mark.parametrize("bad", ["fast", True, None])
def test_performance_info_is_the_aidl_parcelable_and_checks_its_types(bad):
    from interfaces.android.hardware import neuralnetworks

    assert nn.PerformanceInfo is neuralnetworks.PerformanceInfo and nn.Capabilities is neuralnetworks.Capabilities
    with pytest.raises(TypeError, match="execTime"):
        nn.PerformanceInfo(execTime=bad, powerUsage=1.0)


def test_capabilities_without_a_figure_cost_flt_max():
    caps = nn.makeCapabilities({nn.OperandType.TENSOR_FLOAT32: nn.PerformanceInfo(execTime=0.5, powerUsage=2)})
    assert nn.checkCapabilities(caps) is caps
    assert nn.lookupPerformance(caps, nn.OperandType.TENSOR_FLOAT32) == nn.PerformanceInfo(execTime=0.5, powerUsage=2.0)
    assert nn.lookupPerformance(caps, nn.OperandType.INT32).execTime == pytest.approx(3.4028234663852886e38)
    assert caps.relaxedFloat32toFloat16PerformanceScalar.execTime == pytest.approx(3.4028234663852886e38)
    # Listed by type, as the HAL lists them; a type listed twice is refused.
    assert [int(p.type) for p in nn.uniformCapabilities(1, 1).operandPerformance] == list(range(14))
    twice = caps.replace(operandPerformance=caps.operandPerformance * 2)
    with pytest.raises(nn.BadDataError, match="TENSOR_FLOAT32 is listed twice"):
        nn.checkCapabilities(twice)
    with pytest.raises(nn.BadDataError, match="must be a Capabilities"):
        nn.checkCapabilities({nn.OperandType.INT32: (1, 1)})


def test_every_public_name_is_exported_once_and_from_a_private_module():
    import ast
    import inspect
    import pathlib

    source = pathlib.Path(nn.__file__).read_text()
    names = [
        alias.asname
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]
    assert len(names) == len(set(names))
    # A public submodule (framework.nn.tflite, once imported) is an attribute, not an export.
    public = {n for n in dir(nn) if not n.startswith("_") and not inspect.ismodule(getattr(nn, n))}
    assert public == set(names)
    for name in names:
        value = getattr(nn, name)
        # the runtime's own, or the HAL's AIDL vocabulary as compiled into interfaces
        assert isinstance(value, (int, str)) or value.__module__.startswith(("framework.nn._", "interfaces.")), name


def test_the_runtime_imports_nothing_above_it():
    # The NNAPI runtime sits beside NpuManager, over the binder: the vendor HAL
    # (npuhal), system_server and the CLI are above or beside it, never imported.
    import subprocess
    import sys

    code = (
        "import sys, framework.nn; "
        "print(sorted(m for m in sys.modules if m.startswith(('npuhal', 'framework.server', "
        "'framework.cli', 'framework.npumanager'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_runtime_error_status_is_the_hals():
    from interfaces.android.hardware.neuralnetworks import ErrorStatus as HalErrorStatus

    assert ErrorStatus is HalErrorStatus


def test_binder_failures_of_a_device_become_ndk_result_codes():
    from framework.binder import (
        DeadObjectException,
        IllegalArgumentException,
        SecurityException,
        ServiceSpecificException,
    )
    from framework.nn._aidl import errorFromRemote

    def code(exc):
        error = errorFromRemote("emu-npu", "execute", exc)
        assert "emu-npu" in str(error)
        return error.resultCode

    assert code(DeadObjectException("gone")) == ResultCode.DEAD_OBJECT
    assert code(ServiceSpecificException(ErrorStatus.INVALID_ARGUMENT, "bad")) == ResultCode.BAD_DATA
    assert code(ServiceSpecificException(ErrorStatus.DEVICE_UNAVAILABLE)) == ResultCode.UNAVAILABLE_DEVICE
    assert (
        code(ServiceSpecificException(ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT))
        == ResultCode.RESOURCE_EXHAUSTED_PERSISTENT
    )
    # A driver that "fails" with NONE, or with a code nobody defined, still fails.
    assert code(ServiceSpecificException(ErrorStatus.NONE)) == ResultCode.OP_FAILED
    assert code(ServiceSpecificException(99)) == ResultCode.OP_FAILED
    assert code(IllegalArgumentException("jobPriority")) == ResultCode.BAD_DATA
    assert code(SecurityException("no direct access")) == ResultCode.OP_FAILED


def test_the_ndk_priority_converts_to_the_hals_in_one_place():
    from interfaces.android.hardware.neuralnetworks import Priority as HalPriority

    assert [int(p) for p in nn.Priority] == [90, 100, 110]  # DEFAULT is an alias of MEDIUM
    assert {p: p.halValue for p in nn.Priority} == {
        nn.Priority.LOW: HalPriority.LOW, nn.Priority.MEDIUM: HalPriority.MEDIUM, nn.Priority.HIGH: HalPriority.HIGH
    }
    assert nn.Priority.DEFAULT.halValue is HalPriority.MEDIUM
