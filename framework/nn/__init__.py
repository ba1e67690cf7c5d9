"""framework.nn: the app-side NNAPI runtime (Android 10, NN HAL 1.2 semantics).

General layout, the pure core first (no binder, no C, no I/O):

- ``_errors``     NDK result codes as exceptions (``NeuralNetworksError`` and one
                  subclass per code, each also the builtin it resembles).
- ``_types``      the enums and small value types with Android's numbers:
                  ``OperandType``, ``OperationType``, ``DeviceType`` (the compiled AIDL's), the
                  checks over ``Capabilities``, the NDK's ``Priority``...
- ``_hal``        the runtime's in-memory model (``HalModel``): the HAL's own ``Subgraph``
                  (the compiled AIDL types) and ``operandValues``, its pools as buffers.
- ``_signature``  an operation's 1.2 signature and output shapes, asked of its C binding
                  (``npu/bind.h``) through the ``_cpu`` extension's ffi.
- ``_validate``   the operand and graph rules of a HAL model, as Android 10 checks them.
- ``_model``      the NDK-style builder (``Model``: addOperand ... finish, to_hal).
- ``_partition``  the partitioner: ``DeviceDescriptor`` in, ``ExecutionPlan`` out,
                  ``getSupportedOperationsForDevices``, CPU fallback.
- ``_discovery``  the device list an app enumerates (drivers, then ``nnapi-reference``),
                  the enabled-devices filter, ``getDevice(index)``.
- ``_samples``    a small model using every operation, for ``npuemu nn plan`` and demos.

The runtime over the binder and the C kernels, built on the core:

- ``_cpu``          the cffi extension (``csrc/build_nn_cpu.py``): the float32 kernels of
                    the emulated NPU, compiled again for the in-process CPU device.
- ``_cpu_kernels``  its only user: run a HalModel, or ask what it can compute.
- ``_aidl``         the conversions to the HAL's AIDL types (compiled into ``interfaces``,
                    imported by name; never npuhal): HalModel to the ``Model`` parcelable
                    with weights as ``SharedMemory``, binder errors to NDK result codes.
- ``_memory``       ``Memory`` (``ANeuralNetworksMemory``): shared memory for zero-copy I/O.
- ``_compilation``  ``Compilation``: partition, prepare each step, fall back to the CPU.
- ``_cache``        the compilation cache's tokens, file names and descriptors.
- ``_burst``        ``Burst``: executions of one compilation reusing driver bursts and memory.
- ``_execution``    ``Execution`` and ``Event``: one run through the request pool.
- ``_runtime``      ``open_nn_runtime`` and ``NeuralNetworks``: discovery through the
                    servicemanager, the enabled-devices filter, the app's entry point.
- ``_atrace``       the runtime's trace points: each CPU step, appended to the emulator's
                    ``trace_marker`` for its trace recorder.

One public module is not re-exported here (it brings the ``tflite`` flatbuffer parser,
80 ms to import):

- ``tflite``        the re-exports of ``_tflite``: ``.tflite`` files as TFLite's NNAPI
                    delegate builds them: constants folded, NNAPI partitions as ``Model``s,
                    the rest on CPU kernels in the app (``loadTfLite``,
                    ``TfLiteModel.compile``, ``CompiledTfLite.run``).

Everything public is re-exported here, once.
"""

from ._errors import BadDataError as BadDataError
from ._errors import BadStateError as BadStateError
from ._errors import DeadObjectError as DeadObjectError
from ._errors import ErrorStatus as ErrorStatus
from ._errors import IncompleteError as IncompleteError
from ._errors import MissedDeadlinePersistentError as MissedDeadlinePersistentError
from ._errors import MissedDeadlineTransientError as MissedDeadlineTransientError
from ._errors import NeuralNetworksError as NeuralNetworksError
from ._errors import OpFailedError as OpFailedError
from ._errors import OutOfMemoryError as OutOfMemoryError
from ._errors import OutputInsufficientSizeError as OutputInsufficientSizeError
from ._errors import ResourceExhaustedPersistentError as ResourceExhaustedPersistentError
from ._errors import ResourceExhaustedTransientError as ResourceExhaustedTransientError
from ._errors import ResultCode as ResultCode
from ._errors import UnavailableDeviceError as UnavailableDeviceError
from ._errors import UnexpectedNullError as UnexpectedNullError
from ._errors import UnmappableError as UnmappableError
from ._errors import convertErrorStatusToResultCode as convertErrorStatusToResultCode
from ._errors import error_for_result_code as error_for_result_code
from ._aidl import toAidlModel as toAidlModel
from ._atrace import TRACE_MARKER_NAME as TRACE_MARKER_NAME
from ._burst import Burst as Burst
from ._compilation import Compilation as Compilation
from ._discovery import getDevice as getDevice
from ._discovery import isValidDeviceName as isValidDeviceName
from ._discovery import listDevices as listDevices
from ._execution import Event as Event
from ._execution import Execution as Execution
from ._hal import HalModel as HalModel
from ._hal import describeOperand as describeOperand
from ._memory import Memory as Memory
from ._model import Model as Model
from ._partition import CPU_DEVICE_NAME as CPU_DEVICE_NAME
from ._partition import DeviceDescriptor as DeviceDescriptor
from ._partition import ExecutionPlan as ExecutionPlan
from ._partition import ExecutionStep as ExecutionStep
from ._partition import createPlan as createPlan
from ._partition import createPlanForDevices as createPlanForDevices
from ._partition import getSupportedOperationsForDevices as getSupportedOperationsForDevices
from ._partition import referenceCpuDevice as referenceCpuDevice
from ._runtime import ENABLED_DEVICES_ENV as ENABLED_DEVICES_ENV
from ._runtime import NeuralNetworks as NeuralNetworks
from ._runtime import cpuDevice as cpuDevice
from ._runtime import open_nn_runtime as open_nn_runtime
from ._samples import mixedSampleModel as mixedSampleModel
from ._samples import sampleModel as sampleModel
from ._types import FEATURE_LEVEL as FEATURE_LEVEL
from ._types import MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES as MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES
from ._types import Capabilities as Capabilities
from ._types import DeviceStatus as DeviceStatus
from ._types import NO_DURATION as NO_DURATION
from ._types import DeviceType as DeviceType
from ._types import DurationCode as DurationCode
from ._types import ExecutionPreference as ExecutionPreference
from ._types import FuseCode as FuseCode
from ._types import OperandLifeTime as OperandLifeTime
from ._types import OperandType as OperandType
from ._types import OperationType as OperationType
from ._types import OperandPerformance as OperandPerformance
from ._types import PerformanceInfo as PerformanceInfo
from ._types import Priority as Priority
from ._types import SymmPerChannelQuantParams as SymmPerChannelQuantParams
from ._types import checkCapabilities as checkCapabilities
from ._types import checkPerformanceInfo as checkPerformanceInfo
from ._types import lookupPerformance as lookupPerformance
from ._types import makeCapabilities as makeCapabilities
from ._types import uniformCapabilities as uniformCapabilities
from ._validate import validateModel as validateModel
