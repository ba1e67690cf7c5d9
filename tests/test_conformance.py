"""npuemu's NNAPI conformance suite: every operation's cases on every device that claims them.

The cases are nnref's checked examples (tests/conformance/cases.py: AOSP's 1.2 vectors in
their variations, and nnref's own), each built as an app builds a model and run, in
process, on each emulated device and on nnapi-reference, compared with nnref within
Android's tolerances (tests/conformance/run.py). Each case runs three ways on every
device that claims it: weights as constants, weights as model inputs, and outputs
declared with unspecified dimensions (dynamic output shapes).

What must hold, per operation that has a C binding:
- nnapi-reference (the runtime's CPU device) supports and passes every case: it runs all
  of NN HAL 1.2;
- a device that claims a case (getSupportedOperations) prepares it and passes it: a
  claim is a promise.
An operation without a binding yet is skipped with that reason (a visible count, never a
silent pass). `make conformance-table` prints the per-device table.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import nnref

from conformance.cases import cases
from conformance.run import LAYOUTS, open_nn, run_case
from framework.nn import CPU_DEVICE_NAME
from framework.nn._cpu import ffi, lib  # the bindings the runtime's CPU device was built with
from nn_ops import OPERATION_CODES

OPERATIONS = sorted({c.operation for c in cases()})


def bound(operation: str) -> bool:
    return lib.npu_bind_lookup(OPERATION_CODES[operation]) != ffi.NULL


def stack_takes_bindings() -> bool:
    """Whether the NDK builds, and nnapi-reference computes, a bound operation beyond the
    seven float32 ones the stack had (one probe: a float16 ABS). While the bindings land
    ahead of the NDK and the plan that use them, the suite waits for both, as one skip."""
    probe = next(c for c in cases() if c.operation == "ABS" and c.variant == "float16")

    async def run() -> bool:
        async with open_nn() as nn:
            (outcome,) = await run_case(nn, probe, [nn.cpu])
            return outcome.status == "passed"

    return bound("ABS") and trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))


READY = stack_takes_bindings()


#: Operations with a known failing case, and why (strict: the mark fails once they pass).
KNOWN_GAPS = {
}


@pytest.mark.parametrize("operation", [
    pytest.param(op, marks=pytest.mark.xfail(reason=KNOWN_GAPS[op], strict=True)) if op in KNOWN_GAPS else op
    for op in OPERATIONS
])
async def test_every_claimed_case_passes(autojump_clock, operation):
    if not READY:
        pytest.skip("the NDK or the plan does not run the C bindings yet")
    if not bound(operation):
        pytest.skip(f"{operation} has no C binding yet")
    mine = [c for c in cases() if c.operation == operation]
    outcomes = []
    async with open_nn() as nn:
        devices = [*nn.devices]
        for case in mine:
            for layout, dynamic in LAYOUTS:
                outcomes += await run_case(nn, case, devices, layout, dynamic)
    failed = [o for o in outcomes if o.status in ("failed", "refused")]
    assert not failed, "\n".join(f"{o.case} on {o.device} ({o.layout}): {o.detail}" for o in failed[:20])
    refused = [o for o in outcomes if o.device == CPU_DEVICE_NAME and o.status == "unclaimed"]
    assert not refused, f"nnapi-reference does not support {[f'{o.case} ({o.layout})' for o in refused[:10]]}"
    assert any(o.status == "passed" for o in outcomes), f"no case of {operation} ran anywhere"


#: (operation, type) pairs 1.2 allows that no case tries yet, and why.
UNTRIED = {
    ("GENERATE_PROPOSALS", "TENSOR_QUANT8_ASYMM"): "its quant8 form needs QUANT16_ASYMM anchors at scale 0.125",
    ("AXIS_ALIGNED_BBOX_TRANSFORM", "TENSOR_QUANT16_ASYMM"): "likewise: boxes at scale 0.125, deltas quant8",
    ("RANDOM_MULTINOMIAL", "TENSOR_FLOAT32"): "a random draw: no value to compare (nnref's tests check its law)",
    ("RANDOM_MULTINOMIAL", "TENSOR_FLOAT16"): "likewise",
}


def test_cases_try_every_operand_type_the_spec_allows_each_operation():
    tried = set()
    for c in cases():
        at = nnref.SELECTING[c.operation][0]
        if at < len(c.inputs) and c.inputs[at] is not None:
            tried.add((c.operation, c.inputs[at].type))
    allowed = {(op, t) for op, (_, types) in nnref.SELECTING.items() for t in types}
    assert allowed - tried == set(UNTRIED)
    assert len({c.id for c in cases()}) == len(cases()), "two cases share an id"
