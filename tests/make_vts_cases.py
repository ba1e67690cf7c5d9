"""Write vts's generated cases (``make vts-cases``): a sample of the conformance cases.

    python tests/make_vts_cases.py TEMPLATE_SO [OUT]   # default OUT: build/vts/generated_cases.npz

The cases are ``tests/conformance``'s (nnref's example tests, with nnref's answers),
those a one-operation model can express and that npuemu's emulated hardware takes: the
template driver (``make`` builds it, build/c/template.so; it claims every operation
the hardware computes) must find the model valid and load it. The conformance suite's
known gaps are such cases (nnref accepts them, Android 10 or the hardware does not):
they would judge the stack, not a driver. They are laid out as vts runs them (see
``framework/vts/_cases.py``). The sample keeps vts within its time budget: for every
operation and every operand type it is tried in (float32, relaxed, float16, the
quantized ones, int32, bool8), the ``PER_VARIANT`` smallest cases. The file records the
digest of its sources, so a vts run in a checkout where they changed says it is stale.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from conformance.build import ZERO_SIZED_IS_OMITTED, expressible  # noqa: E402
from conformance.cases import cases  # noqa: E402

from framework.vts import GenCase, Tensor, default_cases_path, model_of, sources_digest, write_cases  # noqa: E402
from npuhal import Driver, NpuError  # noqa: E402

#: Cases per (operation, variant).
PER_VARIANT = 2
_SCALARS = {"FLOAT32", "INT32", "UINT32", "BOOL", "FLOAT16"}


def _tensor(case, o) -> Tensor:
    omitted = o is None or o.value is None or (
        case.operation in ZERO_SIZED_IS_OMITTED and o.type not in _SCALARS and o.value.size == 0)
    if omitted:
        return Tensor(o.type if o is not None else "TENSOR_FLOAT32", None)
    cq = o.channel_quant
    return Tensor(o.type, o.value, float(o.scale), int(o.zero_point),
                  None if cq is None else tuple(float(s) for s in cq.scales), 0 if cq is None else int(cq.channel_dim))


def _loads(driver: Driver, case: GenCase) -> bool:
    """Whether the template's device finds the case's model valid and loads it."""
    model = model_of(case).model
    try:
        if not all(driver.supported_operations(0, model)):
            return False
        driver.load_model(0, model).unload()
    except NpuError:
        return False
    finally:
        for pool in model.pools:
            pool.close()
    return True


def sample(template: str) -> tuple[list[GenCase], list[str]]:
    """The sample, and the ids of the cases left out (invalid, or not loadable)."""
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for case in cases():
        if expressible(case) is None:
            groups[(case.operation, case.variant)].append(case)
    picked, invalid = [], []
    size = lambda c: sum(0 if o is None or o.value is None else o.value.size for o in c.inputs)  # noqa: E731
    with Driver.open(template, clock="virtual") as driver:
        for key in sorted(groups):
            kept = 0
            for case in sorted(groups[key], key=lambda c: (size(c), c.id)):
                made = GenCase(case.id, case.operation, case.relaxed, tuple(_tensor(case, o) for o in case.inputs),
                               tuple(_tensor(case, e) for e in case.expected), case.source)
                if not _loads(driver, made):
                    invalid.append(case.id)
                    continue
                picked.append(made)
                kept += 1
                if kept == PER_VARIANT:
                    break
    return picked, invalid


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = Path(argv[2]) if len(argv) > 2 else default_cases_path()
    picked, invalid = sample(argv[1])
    write_cases(out, picked, sources_digest())
    print(f"wrote {len(picked)} cases of {len({c.operation for c in picked})} operations to {out}"
          f" ({len(invalid)} left out as invalid or not loadable: {', '.join(invalid) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
