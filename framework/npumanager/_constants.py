"""The constants of ``android.npumanager``, with AOSP's names and values.

Everything an app passes to, or receives from, the ``npu`` service is a plain ``int``
on the binder, exactly as in Android's ``NpuManager``: a request's size class and
priority, the status given to ``onCanLoadModel`` and ``onModelLoadRequestComplete``,
the policy ids of ``setPolicy``, and the reason given to the two-argument
``onRequestUnloadModel(request, reason)``. The values come from the published
``packages/modules/NpuManager`` sources where those name them; the few the sources
leave open (``NPU_MODEL_PRIORITY_OPPORTUNISTIC``, the unload reasons) are npuemu's
choice and say so.
"""

from __future__ import annotations

from interfaces import services as names

# --- ModelLoadRequest size classes (an estimate of the model's weight memory) ---

NPU_MODEL_SIZE_LESS_THAN_1GB = 0
NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB = 1
NPU_MODEL_SIZE_GREATER_THAN_2G = 2

NPU_MODEL_SIZES = (
    NPU_MODEL_SIZE_LESS_THAN_1GB,
    NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB,
    NPU_MODEL_SIZE_GREATER_THAN_2G,
)

# --- ModelLoadRequest priorities (lower is more urgent, as in the scheduling HAL) ---

NPU_MODEL_PRIORITY_NORMAL = 0
NPU_MODEL_PRIORITY_BACKGROUND = 1000

NPU_MODEL_PRIORITY_OPPORTUNISTIC = 2000
"""Work that runs only when nothing else wants the NPU (npuemu's value).

AOSP publishes NORMAL = 0 and BACKGROUND = 1000 but no number for the seed's
OPPORTUNISTIC. npuemu puts it *beyond* BACKGROUND, at 2000, for three reasons: the
seed's wording ("opportunistic") means less urgent than background work; the numbers
then read like the HAL's, where a larger number is a lower priority and 2000 is the
largest ``effectivePriority`` a job can have; and ordering requests by their number
gives the victim order of the budget policy directly (OPPORTUNISTIC is given up first,
then BACKGROUND, then NORMAL). A value between 0 and 1000 would have made an
"opportunistic" model outrank every background one, which no reader would expect.
"""

NPU_MODEL_PRIORITIES = (
    NPU_MODEL_PRIORITY_NORMAL,
    NPU_MODEL_PRIORITY_BACKGROUND,
    NPU_MODEL_PRIORITY_OPPORTUNISTIC,
)

# --- status passed to ModelLoadRequestCallback.onCanLoadModel ---

NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW = 0
NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD = 1
NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED = 2

# --- status passed to ModelLoadRequestCallback.onModelLoadRequestComplete ---

NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED = 3
NPU_MODEL_LOAD_REQUEST_STATUS_COMPLETE = 4

# --- policies for NpuManager.setPolicy ---

NPU_MODEL_POLICY_STATUS_QUO = 0
NPU_MODEL_POLICY_TURN_TAKING = 1
NPU_MODEL_POLICY_BUDGET = 2

# --- the budget policy's parameters (setPolicy's bundle): AOSP's keys, and the defaults
# the service takes for a key left out (and the app side for a size left out of the
# nested ``modelSizeWeights`` bundle) ---

KEY_MAX_BUDGET = "maxBudget"
KEY_MODEL_SIZE_WEIGHTS = "modelSizeWeights"
DEFAULT_MAX_BUDGET = 4
DEFAULT_MODEL_SIZE_WEIGHTS = (1, 2, 4)
"""What a model of each size class costs: LESS_THAN_1GB, BETWEEN_1GB_AND_2GB, GREATER_THAN_2G."""

# --- reasons passed to onRequestUnloadModel(request, reason) (npuemu's values) ---
# The seed names the two-argument callback but no reasons; these are the causes the
# npu service actually has. 0 is reserved so a missing reason never reads as a cause.

NPU_MODEL_UNLOAD_REASON_UNSPECIFIED = 0
NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE = 1
"""Another request needs the budget this model holds (budget policy, rules 3-5)."""
NPU_MODEL_UNLOAD_REASON_TURN_TAKING = 2
"""This app just completed work while an equally important app waits (rule 7)."""
NPU_MODEL_UNLOAD_REASON_THERMAL = 3
"""The device is too hot for this model's priority or for this app's importance."""

NPU_MODEL_UNLOAD_REASONS = (
    NPU_MODEL_UNLOAD_REASON_UNSPECIFIED,
    NPU_MODEL_UNLOAD_REASON_RESOURCE_PRESSURE,
    NPU_MODEL_UNLOAD_REASON_TURN_TAKING,
    NPU_MODEL_UNLOAD_REASON_THERMAL,
)

# --- names: the service, the feature apps declare, the permissions ---

NPU_SERVICE = names.NPU_SERVICE
"""The name the service registers with servicemanager (``Context.NPU_SERVICE``)."""

FEATURE_NEURAL_PROCESSING_UNIT = "android.hardware.npu"
"""``PackageManager.FEATURE_NEURAL_PROCESSING_UNIT``, for ``<uses-feature>``."""

ACCESS_NPU_MODEL_MANAGER_API = "android.permission.ACCESS_NPU_MODEL_MANAGER_API"
"""Needed to call the ``npu`` service at all (``@RequiresPermission`` in NpuManager)."""

ATTRIBUTE_WORK_TO_OTHER_APPS = "android.permission.ATTRIBUTE_WORK_TO_OTHER_APPS"
"""Lets a uid submit NPU work on behalf of another uid (``canAttributeOtherUid``)."""


# --- names for people: logs, dumps, reports ---


def constantToString(prefix: str, value: object) -> str:
    """The name of the constant of this module that starts with ``prefix`` and equals ``value``.

    Android's ``DebugUtils.constantToString(NpuManager.class, prefix, value)``, over
    the constants above rather than a second table of names::

        constantToString("NPU_MODEL_LOAD_STATUS_", 1)    == "WAIT_FOR_UNLOAD"
        constantToString("NPU_MODEL_UNLOAD_REASON_", 3)  == "THERMAL"

    The prefix is cut off. A value no such constant has comes back as its number, so
    a log line never hides what was actually sent.
    """
    if type(value) is int:
        for name, constant in _CONSTANTS.items():
            if constant == value and name.startswith(prefix):
                return name[len(prefix):]
    return str(value)


# Every int constant above, by name (the naming tuples such as NPU_MODEL_SIZES are not ints).
_CONSTANTS = {name: value for name, value in globals().items() if name.startswith("NPU_") and type(value) is int}
