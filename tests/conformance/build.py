"""A conformance case as an app builds it: an NNAPI model of one operation, through framework.nn.

Two layouts of the same case, as AOSP's generated tests run them:
- ``"constants"``: the first tensor input is a model input, the other tensors and every
  scalar are constants set with setOperandValue (weights live in the model);
- ``"inputs"``: every tensor input is a model input (weights as inputs), scalars constants.
``dynamic=True`` declares every output and every model input with unspecified dimensions
(0s of the right rank), as a model whose shapes are known only at execution: the inputs'
are given at setInput (``Built.dims``).

An omitted optional input is an operand with no value (setOperandValue(None)). A case
whose tensors have a zero dimension cannot be one operation's model (NNAPI gives model
inputs and constants at least one element), nor one whose output is a tensor of rank 0
(NNAPI reads rank 0 as "rank not known"): :func:`expressible` says so.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from framework.nn import Model, OperandType, OperationType, SymmPerChannelQuantParams
from nnref import Operand

from .cases import Case

SCALARS = frozenset({"FLOAT32", "INT32", "UINT32", "BOOL", "FLOAT16"})

#: Operations whose optional tensors nnref's examples give as zero-sized values, as AOSP's
#: recurrent test specs write an omitted weight ("{0}" dimensions, no data): such an
#: input is an omitted operand (NO_VALUE) in the model.
ZERO_SIZED_IS_OMITTED = frozenset({
    "LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "SVDF", "RNN",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN",
})


def _omitted(case: Case, o: Operand | None) -> bool:
    if o is None or o.value is None:
        return True
    return case.operation in ZERO_SIZED_IS_OMITTED and o.type not in SCALARS and o.value.size == 0


@dataclasses.dataclass
class Built:
    model: Model
    feeds: list[np.ndarray]      # the model inputs' values, in order
    expected: tuple[Operand, ...]
    dims: list[tuple[int, ...] | None]  # the model inputs' dimensions to give at setInput (None: declared)


def expressible(case: Case) -> str | None:
    """Why ``case`` cannot be a one-operation model, or None."""
    for i, o in enumerate(case.inputs):
        if not _omitted(case, o) and o.type not in SCALARS and 0 in o.value.shape:
            return f"input {i} is zero-sized"
    for k, e in enumerate(case.expected):
        if e.type not in SCALARS and e.value.ndim == 0:
            return f"output {k} is a rank-0 tensor (NNAPI reads a tensor of rank 0 as one of unknown rank)"
    return None


def _add(model: Model, o: Operand, dims: tuple[int, ...]) -> int:
    quant = {"scale": float(o.scale), "zeroPoint": int(o.zero_point)} if o.scale or o.zero_point else {}
    index = model.addOperand(OperandType[o.type], dims, **quant)
    if o.channel_quant is not None:
        quant_params = SymmPerChannelQuantParams(scales=list(o.channel_quant.scales), channelDim=o.channel_quant.channel_dim)
        model.setOperandSymmPerChannelQuantParams(index, quant_params)
    return index


def _unspecified(o: Operand) -> tuple[int, ...]:
    """``o``'s dimensions left unspecified (0s), but for a per-channel operand's channel
    dimension, which its scales fix (NNAPI refuses it unspecified)."""
    dims = [0] * o.value.ndim
    if o.channel_quant is not None:
        dims[o.channel_quant.channel_dim] = o.value.shape[o.channel_quant.channel_dim]
    return tuple(dims)


def build(case: Case, layout: str = "constants", dynamic: bool = False) -> Built:
    model = Model()
    ins, feeds, model_inputs, dims = [], [], [], []
    first_tensor = True
    for o in case.inputs:
        if _omitted(case, o):
            index = model.addOperand(OperandType[o.type] if o is not None else OperandType.TENSOR_FLOAT32, ())
            model.setOperandValue(index, None)
        elif o.type in SCALARS:
            index = _add(model, o, ())
            model.setOperandValue(index, o.value)
        else:
            if first_tensor or layout == "inputs":
                index = _add(model, o, _unspecified(o) if dynamic else o.value.shape)
                model_inputs.append(index)
                feeds.append(o.value)
                dims.append(o.value.shape if dynamic else None)
            else:
                index = _add(model, o, o.value.shape)
                model.setOperandValue(index, o.value)
            first_tensor = False
        ins.append(index)
    outs = [_add(model, e, (0,) * e.value.ndim if dynamic else e.value.shape) for e in case.expected]
    model.addOperation(OperationType[case.operation], ins, outs)
    model.identifyInputsAndOutputs(model_inputs, outs)
    if case.relaxed:
        model.relaxComputationFloat32toFloat16(True)
    model.finish()
    return Built(model, feeds, case.expected, dims)
