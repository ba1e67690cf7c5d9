"""A sample of the conformance cases through the HAL as its own OS process.

tests/test_conformance.py runs every case in process; here one case of each bound
operation (its first float32 one, then its first quantized one, up to a dozen
operations) crosses real sockets and shared memory to ``python -m npuhal`` and runs on
each driver device that claims it, so what the in-memory binder shows also holds between
processes: the operands' quantization and the outputs' shapes travel, and claims hold.
"""

from __future__ import annotations

import pytest

from conformance.cases import cases
from conformance.run import open_nn, run_case
from test_conformance import READY, bound

pytestmark = pytest.mark.multiprocess


def sample(limit: int = 12) -> list:
    picked, seen = [], set()
    for variant in ("float32", "quant", "float16"):
        for case in cases():
            key = (case.operation, variant)
            if case.variant == variant and key not in seen and bound(case.operation):
                seen.add(key)
                picked.append(case)
    return picked[:limit]


async def test_a_sample_of_cases_passes_through_the_hal_process():
    picked = sample()
    if not READY or not picked:
        pytest.skip("no operation has a C binding yet")
    outcomes = []
    async with open_nn(processes=True) as nn:
        drivers = [d for d in nn.devices if d.name != "nnapi-reference"]
        for case in picked:
            outcomes += await run_case(nn, case, drivers)
    failed = [o for o in outcomes if o.status in ("failed", "refused")]
    assert not failed, "\n".join(f"{o.case} on {o.device}: {o.detail}" for o in failed)
    assert any(o.status == "passed" for o in outcomes)
