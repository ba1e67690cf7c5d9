"""Recurrent operations: RNN, LSTM (CIFG, peephole, projection, clipping, layer norm), SVDF,
and their sequence forms (unidirectional and bidirectional, time- or batch-major, with an
auxiliary input). Float32 and float16; computed in float64, cast at the end.

Gates are [batch, units] = x W^T + h R^T (+ peephole c * w) + b, as types.hal writes them;
a bidirectional operation runs its backward direction over the reversed sequence and
writes each step's output at that step's place. An optional tensor may be omitted or
given with no elements, as AOSP's tests give it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from .core import F, Call, Operand, multiply_by_quantized_multiplier, quantize_multiplier, rounding_divide_by_pot

#: TFLite's fused activations, which the recurrent operations take by code.
ACTIVATIONS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    0: lambda v: v,
    1: lambda v: np.maximum(v, 0),
    2: lambda v: np.clip(v, -1, 1),
    3: lambda v: np.clip(v, 0, 6),
    4: np.tanh,
    6: lambda v: 1 / (1 + np.exp(-v)),
}


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-v))


def _activation(call: Call, i: int) -> Callable[[np.ndarray], np.ndarray]:
    code = call.int(i)
    if code not in ACTIVATIONS:
        raise call.fail(f"activation {code} is not NONE, RELU, RELU1, RELU6, TANH or SIGMOID")
    return ACTIVATIONS[code]


def _optional(call: Call, i: int, like: Operand) -> np.ndarray | None:
    """An optional tensor's reals: None when omitted or empty."""
    if not call.has(i) or call.inputs[i].value.size == 0:  # type: ignore[union-attr]
        return None
    return call.same_type(i, like).real()


def _required(call: Call, i: int, like: Operand) -> np.ndarray:
    return call.same_type(i, like).real()


def _sequence(x: np.ndarray, time_major: bool) -> np.ndarray:
    """A sequence input as [time, batch, ...]."""
    return x if time_major else np.swapaxes(x, 0, 1)


# -- RNN ------------------------------------------------------------------------------------


def _rnn_step(x, h, w, r, b, act, aux=None, aux_w=None):
    total = x @ w.T + h @ r.T + b
    if aux is not None and aux_w is not None:
        total = total + aux @ aux_w.T
    return act(total)


def rnn(call: Call) -> list[Operand]:
    call.count(6)
    x = call.tensor(0, *F)
    w, r, b, h = (_required(call, i, x) for i in (1, 2, 3, 4))
    out = _rnn_step(x.real(), h, w, r, b, _activation(call, 5))
    return [call.real_result(0, out, x), call.real_result(1, out, x)]


def unidirectional_sequence_rnn(call: Call) -> list[Operand]:
    call.count(7)
    x = call.tensor(0, *F)
    w, r, b, h = (_required(call, i, x) for i in (1, 2, 3, 4))
    act, time_major = _activation(call, 5), call.int(6) != 0
    steps = []
    for xt in _sequence(x.real(), time_major):
        h = _rnn_step(xt, h, w, r, b, act)
        steps.append(h)
    return [call.real_result(0, _sequence(np.stack(steps), time_major), x)]


def bidirectional_sequence_rnn(call: Call) -> list[Operand]:
    call.count(15)
    x = call.tensor(0, *F)
    fw = [_required(call, i, x) for i in (1, 2, 3, 4)]
    bw = [_required(call, i, x) for i in (5, 6, 7, 8)]
    aux = _optional(call, 9, x)
    fw_aux_w, bw_aux_w = _optional(call, 10, x), _optional(call, 11, x)
    act, time_major, merge = _activation(call, 12), call.bool(13), call.bool(14)
    seq = _sequence(x.real(), time_major)
    aux_seq = _sequence(aux, time_major) if aux is not None else None
    bw_seq = seq
    if aux_seq is not None and fw_aux_w is None:  # parallel linking: backward reads the aux input
        bw_seq, aux_seq = aux_seq, None
    fw_out, bw_out = [], [None] * len(seq)
    h = fw[3]
    for t in range(len(seq)):
        h = _rnn_step(seq[t], h, *fw[:3], act, None if aux_seq is None else aux_seq[t], fw_aux_w)
        fw_out.append(h)
    h = bw[3]
    for t in reversed(range(len(seq))):
        h = _rnn_step(bw_seq[t], h, *bw[:3], act, None if aux_seq is None else aux_seq[t], bw_aux_w)
        bw_out[t] = h
    return _bidirectional_outputs(call, x, np.stack(fw_out), np.stack(bw_out), time_major, merge)  # type: ignore[arg-type]


def _bidirectional_outputs(call: Call, x: Operand, fw: np.ndarray, bw: np.ndarray, time_major: bool,
                           merge: bool) -> list[Operand]:
    if merge:
        return [call.real_result(0, _sequence(np.concatenate([fw, bw], axis=-1), time_major), x)]
    return [call.real_result(0, _sequence(fw, time_major), x), call.real_result(1, _sequence(bw, time_major), x)]


# -- LSTM -----------------------------------------------------------------------------------


@dataclasses.dataclass
class LstmWeights:
    """One direction's LSTM parameters, by gate: input (i), forget (f), cell (c), output (o)."""

    input_w: dict[str, np.ndarray | None]
    recurrent_w: dict[str, np.ndarray | None]
    peephole: dict[str, np.ndarray | None]
    bias: dict[str, np.ndarray | None]
    projection: np.ndarray | None
    projection_bias: np.ndarray | None
    layer_norm: dict[str, np.ndarray | None]
    aux_w: dict[str, np.ndarray | None]

    @classmethod
    def read(cls, call: Call, x: Operand, first: int, layer_norm_at: int | None,
             aux_at: int | None = None) -> LstmWeights:
        """The 17 tensors from ``first`` (input-to x4, recurrent-to x4, cell-to x3 (no cell),
        biases x4, projection weights and bias), the layer norm weights, the aux weights."""
        gates = "ifco"
        opt = lambda i: _optional(call, i, x)  # noqa: E731
        weights = cls(
            input_w={g: opt(first + k) for k, g in enumerate(gates)},
            recurrent_w={g: opt(first + 4 + k) for k, g in enumerate(gates)},
            peephole={g: opt(first + 8 + k) for k, g in enumerate("ifo")},
            bias={g: opt(first + 11 + k) for k, g in enumerate(gates)},
            projection=opt(first + 15), projection_bias=opt(first + 16),
            layer_norm={g: (opt(layer_norm_at + k) if layer_norm_at is not None else None) for k, g in enumerate(gates)},
            aux_w={g: (opt(aux_at + k) if aux_at is not None else None) for k, g in enumerate(gates)},
        )
        for g in "fco":
            if weights.input_w[g] is None or weights.recurrent_w[g] is None:
                raise call.fail(f"the {dict(f='forget', c='cell', o='output')[g]} gate's weights are required")
        if weights.bias["f"] is None or weights.bias["c"] is None or weights.bias["o"] is None:
            raise call.fail("the forget, cell and output gate biases are required")
        cifg = weights.input_w["i"] is None
        if cifg != (weights.recurrent_w["i"] is None) or (not cifg and weights.bias["i"] is None):
            raise call.fail("input gate weights, recurrent weights and bias are all given or all omitted (CIFG)")
        return weights


def _gate(w: LstmWeights, g: str, x: np.ndarray, h: np.ndarray, c: np.ndarray | None, act, aux: np.ndarray | None):
    total = x @ w.input_w[g].T + h @ w.recurrent_w[g].T  # type: ignore[union-attr]
    if aux is not None and w.aux_w[g] is not None:
        total = total + aux @ w.aux_w[g].T  # type: ignore[union-attr]
    if c is not None and w.peephole.get(g) is not None:
        total = total + c * w.peephole[g]
    if w.layer_norm[g] is not None:
        mean = total.mean(axis=-1, keepdims=True)
        var = ((total - mean) ** 2).mean(axis=-1, keepdims=True)
        total = (total - mean) / np.sqrt(var + 1e-8) * w.layer_norm[g]
    return act(total + w.bias[g])


def lstm_step(w: LstmWeights, x: np.ndarray, h: np.ndarray, c: np.ndarray, act, cell_clip: float, proj_clip: float,
              aux: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step: returns (output state h, cell state c, the scratch buffer's blocks [blocks, batch, cells]).

    The scratch holds what Android's reference (LSTM.cpp's LSTMStep) leaves in it, gate block by
    gate block: the input gate, act(c_new) (its cell-gate block is reused for it), the forget gate
    (1 - forget with CIFG, computed in place), and output gate * act(c_new); CIFG has no input block.
    """
    f = _gate(w, "f", x, h, c, _sigmoid, aux)
    i = 1 - f if w.input_w["i"] is None else _gate(w, "i", x, h, c, _sigmoid, aux)
    g = _gate(w, "c", x, h, None, act, aux)
    c_new = f * c + i * g
    if cell_clip > 0:
        c_new = np.clip(c_new, -cell_clip, cell_clip)
    o = _gate(w, "o", x, h, c_new, _sigmoid, aux)
    activated = act(c_new)
    m = m_gated = o * activated
    if w.projection is not None:
        m = m @ w.projection.T + (w.projection_bias if w.projection_bias is not None else 0)
        if proj_clip > 0:
            m = np.clip(m, -proj_clip, proj_clip)
    gates = [activated, 1 - f, m_gated] if w.input_w["i"] is None else [i, activated, f, m_gated]
    return m, c_new, np.stack(gates)


def _clips(call: Call, at: int, x: Operand) -> tuple[float, float]:
    cell_clip, proj_clip = call.float(at, like=x), call.float(at + 1, like=x)
    if cell_clip < 0 or proj_clip < 0:
        raise call.fail("clipping thresholds are not negative")
    return cell_clip, proj_clip


def lstm(call: Call) -> list[Operand]:
    n = call.count(23, 27)
    x = call.tensor(0, *F)
    w = LstmWeights.read(call, x, 1, 23 if n == 27 else None)
    h, c = _required(call, 18, x), _required(call, 19, x)
    act = _activation(call, 20)
    h, c, blocks = lstm_step(w, x.real(), h, c, act, *_clips(call, 21, x))
    scratch = blocks.reshape(blocks.shape[1], -1)  # gate-major memory, as a [batch, blocks * cells] tensor
    return [call.real_result(0, scratch, x), call.real_result(1, h, x), call.real_result(2, c, x),
            call.real_result(3, h, x)]


def unidirectional_sequence_lstm(call: Call) -> list[Operand]:
    call.count(28)  # new in 1.2: the layer norm weights' places are always there (omitted or not)
    x = call.tensor(0, *F)
    w = LstmWeights.read(call, x, 1, 24)
    h, c = _required(call, 18, x), _required(call, 19, x)
    act, clips, time_major = _activation(call, 20), _clips(call, 21, x), call.bool(23)
    steps = []
    for xt in _sequence(x.real(), time_major):
        h, c, _ = lstm_step(w, xt, h, c, act, *clips)
        steps.append(h)
    return [call.real_result(0, _sequence(np.stack(steps), time_major), x)]


def bidirectional_sequence_lstm(call: Call) -> list[Operand]:
    call.count(61)  # Android 10 takes all 61: the aux input and weights, the layer norm weights
    x = call.tensor(0, *F)
    fw = LstmWeights.read(call, x, 1, 53, 40)
    bw = LstmWeights.read(call, x, 18, 57, 44)
    states = [_required(call, i, x) for i in (35, 36, 37, 38)]
    aux = _optional(call, 39, x)
    act, clips = _activation(call, 48), _clips(call, 49, x)
    merge, time_major = call.bool(51), call.bool(52)
    seq = _sequence(x.real(), time_major)
    aux_seq = _sequence(aux, time_major) if aux is not None else None
    bw_seq = seq
    if aux_seq is not None and all(v is None for v in fw.aux_w.values()):  # parallel linking
        bw_seq, aux_seq = aux_seq, None
    h, c = states[0], states[1]
    fw_out = []
    for t in range(len(seq)):
        h, c, _ = lstm_step(fw, seq[t], h, c, act, *clips, None if aux_seq is None else aux_seq[t])
        fw_out.append(h)
    h, c = states[2], states[3]
    bw_out: list[np.ndarray] = [np.empty(0)] * len(seq)
    for t in reversed(range(len(seq))):
        h, c, _ = lstm_step(bw, bw_seq[t], h, c, act, *clips, None if aux_seq is None else aux_seq[t])
        bw_out[t] = h
    return _bidirectional_outputs(call, x, np.stack(fw_out), np.stack(bw_out), time_major, merge)


# -- SVDF -----------------------------------------------------------------------------------


def svdf(call: Call) -> list[Operand]:
    call.count(7)
    x = call.tensor(0, *F)
    features, times = _required(call, 1, x), _required(call, 2, x)
    bias = _optional(call, 3, x)
    state_in = _required(call, 4, x)
    rank, act = call.int(5), _activation(call, 6)
    batch = x.shape[0]
    filters, memory = times.shape
    if rank < 1 or filters % rank or features.shape[0] != filters:
        raise call.fail(f"{features.shape[0]} feature filters and {filters} time filters do not fit rank {rank}")
    units = filters // rank
    state = state_in.reshape(batch, filters, memory).copy()
    state[..., -1] = x.real() @ features.T  # the newest activation takes the last slot
    per_filter = (state * times).sum(axis=-1)
    out = per_filter.reshape(batch, units, rank).sum(axis=-1) + (bias if bias is not None else 0)
    shifted = np.zeros_like(state)
    shifted[..., :-1] = state[..., 1:]
    return [call.real_result(0, shifted.reshape(batch, filters * memory), x), call.real_result(1, act(out), x)]


# -- QUANTIZED_16BIT_LSTM -------------------------------------------------------------------
#
# Android's reference runs the cell in gemmlowp's 16-bit fixed point: a value with k integer
# bits is an int16 raw r meaning r * 2**(k - 15). The helpers below take and return int64
# arrays of such raws (wrapped to int16 where the reference's int16 arithmetic wraps).


def _wrap16(v: np.ndarray) -> np.ndarray:
    return ((np.asarray(v, np.int64) + 32768) % 65536) - 32768


def _sat16(v: np.ndarray) -> np.ndarray:
    return np.clip(np.asarray(v, np.int64), -32768, 32767)


def _fx_mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int16: the product, integer bits adding up."""
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    ab = a * b
    total = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = np.where(total >= 0, total // 32768, -((-total) // 32768))  # C's division truncates
    return np.where((a == -32768) & (b == -32768), 32767, _wrap16(high))


def _fx_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT: a saturating left shift, or a rounding right shift."""
    x = np.asarray(x, np.int64)
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (15 - exponent)) - 1
    return np.where(x > threshold, 32767, np.where(x < -threshold, -32768, x << exponent))


def _fx_const(raw32: int) -> int:
    """A 32-bit fixed-point constant as the 16-bit raw gemmlowp derives from it."""
    return int(rounding_divide_by_pot(np.int64(raw32), 16))


def _fx_exp_on_negative(a: np.ndarray, bits: int) -> np.ndarray:
    """exp(a) for a <= 0 with ``bits`` integer bits: a Taylor series on [-1/4, 0) around -1/8,
    times exp(-2**k) for each bit of the rest; 0 integer bits out."""
    frac = 15 - bits
    quarter = 1 << (frac - 2)
    low = _wrap16((a & (quarter - 1)) - quarter)
    x = _wrap16(_fx_pot(low, bits) + (1 << 12))
    x2 = _fx_mul(x, x)
    x3, x4 = _fx_mul(x2, x), _fx_mul(x2, x2)
    poly = _fx_pot(_wrap16(_fx_mul(_wrap16(_fx_pot(x4, -2) + x3), _fx_const(715827883)) + x2), -1)
    e8 = _fx_const(1895147668)
    result = _sat16(e8 + _fx_mul(e8, _wrap16(x + poly)))
    remainder = _wrap16(low - a)
    for k, multiplier in zip(range(-2, 5), (1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242)):
        if bits > k:
            result = np.where(remainder & (1 << (frac + k)), _fx_mul(result, _fx_const(multiplier)), result)
    return np.where(a == 0, 32767, result)


def _fx_newton(a: np.ndarray) -> np.ndarray:
    """2 / (1 + a) for a in (0, 1) by three Newton-Raphson steps, with 2 integer bits."""
    total = np.asarray(a, np.int64) + 32767
    half = np.where(total >= 0, (total + 1) // 2, -((1 - total) // 2))  # RoundingHalfSum
    x = _wrap16(_fx_const(1515870810) + _fx_mul(half, _fx_const(-1010580540)))
    for _ in range(3):
        x = _wrap16(x + _fx_pot(_fx_mul(x, _wrap16((1 << 13) - _fx_mul(half, x))), 2))
    return x


def _fx_logistic(a: np.ndarray, bits: int) -> np.ndarray:
    magnitude = np.where(a > 0, a, _wrap16(-a))
    positive = _fx_pot(_fx_newton(_fx_exp_on_negative(_wrap16(-magnitude), bits)), 1)
    return np.where(a == 0, 1 << 14, np.where(a > 0, positive, 32767 - positive))


def _fx_tanh(a: np.ndarray, bits: int) -> np.ndarray:
    negative = np.where(a < 0, a, _wrap16(-a))
    t = _fx_pot(_wrap16(_fx_newton(_fx_exp_on_negative(negative, bits + 1)) - (1 << 13)), 2)
    return np.where(a == 0, 0, np.where(a < 0, _wrap16(-t), t))


def quantized_16bit_lstm(call: Call) -> list[Operand]:
    """One quantized LSTM step (no CIFG, peephole, projection or clipping), as Android's reference
    computes it: input and output TENSOR_QUANT8_ASYMM at 1/128 around 128, weights one shared
    TENSOR_QUANT8_ASYMM scale, int32 biases at weight_scale/128, the cell state TENSOR_QUANT16_SYMM
    at 1/2048 (4 integer bits). Each gate's int32 sum is requantized to 3 integer bits of int16;
    then gemmlowp's fixed-point logistic and tanh, products and rescales, exactly."""
    call.count(15)
    x = call.tensor(0, "TENSOR_QUANT8_ASYMM")
    weights = [call.tensor(i, "TENSOR_QUANT8_ASYMM") for i in range(1, 9)]
    if len({(w.scale, w.zero_point) for w in weights}) != 1:
        raise call.fail("all eight weight tensors share one scale and zero point")
    biases = [call.tensor(i, "TENSOR_INT32") for i in range(9, 13)]
    cell = call.tensor(13, "TENSOR_QUANT16_SYMM")
    prev = call.tensor(14, "TENSOR_QUANT8_ASYMM")
    fixed = {"input": (x, 1 / 128, 128), "previous output": (prev, 1 / 128, 128), "cell state": (cell, 1 / 2048, 0)}
    for name, (operand, scale, zero) in fixed.items():
        if (operand.scale, operand.zero_point) != (scale, zero):
            raise call.fail(f"the {name} has scale {scale} and zero point {zero}")
    multiplier, shift = quantize_multiplier(4096 * float(np.float32(biases[0].scale)))  # the bias scale, a float32
    xs = x.value.astype(np.int64) - 128  # type: ignore[union-attr]
    hs = prev.value.astype(np.int64) - 128  # type: ignore[union-attr]
    gates = []
    for k in range(4):  # input, forget, cell, output
        w_x = weights[k].value.astype(np.int64) - weights[k].zero_point  # type: ignore[union-attr]
        w_h = weights[4 + k].value.astype(np.int64) - weights[k].zero_point  # type: ignore[union-attr]
        acc = biases[k].value.astype(np.int64) + xs @ w_x.T + hs @ w_h.T  # type: ignore[union-attr]
        gates.append(_sat16(multiply_by_quantized_multiplier(acc, multiplier, shift)))
    i, f = _fx_logistic(gates[0], 3), _fx_logistic(gates[1], 3)
    g, o = _fx_tanh(gates[2], 3), _fx_logistic(gates[3], 3)
    state = _sat16(_fx_pot(_fx_mul(i, g), -4) + _fx_mul(f, cell.value.astype(np.int64)))  # type: ignore[union-attr]
    activ = _fx_mul(o, _fx_tanh(_fx_pot(state, 1), 3))
    out = 128 + np.clip(rounding_divide_by_pot(activ, 8), -128, 127)
    return [call.raw_result(0, state.astype(np.int16), cell), call.raw_result(1, out.astype(np.uint8), prev)]


OPERATIONS: dict[str, Callable[[Call], list[Operand]]] = {
    "RNN": rnn,
    "UNIDIRECTIONAL_SEQUENCE_RNN": unidirectional_sequence_rnn,
    "BIDIRECTIONAL_SEQUENCE_RNN": bidirectional_sequence_rnn,
    "LSTM": lstm,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": unidirectional_sequence_lstm,
    "BIDIRECTIONAL_SEQUENCE_LSTM": bidirectional_sequence_lstm,
    "SVDF": svdf,
    "QUANTIZED_16BIT_LSTM": quantized_16bit_lstm,
}
