"""Changing one field of a Model parcelable, for tests that corrupt a model on purpose.

The parcelables are frozen; each function returns a new Model with one operand, one
operation or the main subgraph's fields replaced (``replace`` runs the parcelable's own
checks, so a value its type cannot hold is refused here, before any driver sees it).
"""

from typing import Any

from interfaces.android.hardware.neuralnetworks import Model


def with_main(model: Model, **changes: Any) -> Model:
    return model.replace(main=model.main.replace(**changes))


def with_operand(model: Model, index: int, **changes: Any) -> Model:
    operands = list(model.main.operands)
    operands[index] = operands[index].replace(**changes)
    return with_main(model, operands=operands)


def with_operation(model: Model, index: int, **changes: Any) -> Model:
    operations = list(model.main.operations)
    operations[index] = operations[index].replace(**changes)
    return with_main(model, operations=operations)
