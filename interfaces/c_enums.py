"""How the C headers spell the vocabulary, and the check that they spell it as the AIDL does.

Both C extensions (npuhal's driver binding and framework.nn's CPU kernels) declare the
NN and NPU enums in their headers; each checks, at import, that every C enum equals
its compiled AIDL enum name for name and number for number, both ways, through
:func:`enum_problem`. Hand-written, as ``services`` is: shared vocabulary of the HAL
and the framework, which may not import each other.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["NN12_NAMES", "enum_problem"]

#: The headers keep NN HAL 1.2's lifetime names where the AIDL says SUBGRAPH_* / CONSTANT_POOL.
NN12_NAMES: Mapping[str, str] = {
    "MODEL_INPUT": "SUBGRAPH_INPUT",
    "MODEL_OUTPUT": "SUBGRAPH_OUTPUT",
    "CONSTANT_REFERENCE": "CONSTANT_POOL",
}


def enum_problem(enum_cls: type[enum.IntEnum], c_enum: str, c_elements: Mapping[int, str], prefix: str) -> str | None:
    """Why the C enum ``c_enum`` (``{number: name}``) and ``enum_cls`` differ, or None.

    Both ways: every C enumerator but a ``*_COUNT`` sentinel must be a member of the same
    number, and every member must be in C.
    """
    c_side = {}
    for number, c_name in c_elements.items():
        if not c_name.endswith("_COUNT"):
            name = c_name.removeprefix(prefix)
            c_side[NN12_NAMES.get(name, name)] = int(number)
    py_side = {m.name: int(m) for m in enum_cls}
    where = f"enum {c_enum} (C) and {enum_cls.__module__}.{enum_cls.__name__}"
    for name in sorted(c_side.keys() | py_side.keys()):
        c_value, py_value = c_side.get(name), py_side.get(name)
        if c_value == py_value:
            continue
        if c_value is None:
            return f"{where} differ: {enum_cls.__name__}.{name} = {py_value} is missing in C"
        if py_value is None:
            return f"{where} differ: C's {prefix}{name} = {c_value} is missing in {enum_cls.__name__}"
        return f"{where} differ: {prefix}{name} is {c_value} in C, {py_value} in {enum_cls.__name__}"
    return None
