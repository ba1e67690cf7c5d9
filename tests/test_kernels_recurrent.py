"""The recurrent family's bindings and kernels (RNN, the sequence RNNs, SVDF, LSTM and its sequence
forms, QUANTIZED_16BIT_LSTM, LSH_PROJECTION, RANDOM_MULTINOMIAL) against nnref, through the
bindings as a model lays the operations out (tests/nn_ops.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nnref
from framework.nn._cpu import ffi, lib
from nn_ops import BindError, Tensor, bind_check, bind_run, bind_vs_nnref, f32, status, tensor
from nnref import boolean, float16, float32, int32
from nnref.lsh import fingerprint64

F32, F16 = "TENSOR_FLOAT32", "TENSOR_FLOAT16"
#: (tensor type, relaxed): float32, float32 computed as relaxed, float16
VARIANTS = [(F32, False), (F32, True), (F16, False)]
ACTIVATIONS = st.sampled_from([0, 1, 2, 3, 4, 6])
SMALL = st.integers(1, 4)


class Maker:
    """Random operands of one float type, within [-1, 1]."""

    def __init__(self, seed: int, type: str):
        self.rng, self.type = np.random.default_rng(seed), type

    def __call__(self, *shape: int) -> nnref.Operand:
        return nnref.tensor(self.type, self.rng.uniform(-1, 1, shape))

    def clip(self, v: float) -> nnref.Operand:
        return float16(v) if self.type == F16 else float32(v)


def check(name, inputs, relaxed=False):
    got, want = bind_vs_nnref(name, inputs, relaxed=relaxed)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        nnref.assert_close(g, w, relaxed=relaxed)
    return got


def refused(name, inputs, outputs, status_name, *fragments):
    with pytest.raises(BindError) as info:
        bind_run(name, inputs, outputs)
    assert info.value.status == status_name, info.value
    for fragment in fragments:
        assert fragment in info.value.why, info.value.why
    assert info.value.why.startswith(name + ":")


# -- RNN and its sequence forms ---------------------------------------------------------


@pytest.mark.parametrize("type,relaxed", VARIANTS)
@settings(max_examples=15, deadline=None)
@given(batch=SMALL, n_in=SMALL, units=SMALL, act=ACTIVATIONS, seed=st.integers(0, 2**16))
def test_rnn(type, relaxed, batch, n_in, units, act, seed):
    m = Maker(seed, type)
    h, out = check("RNN", [m(batch, n_in), m(units, n_in), m(units, units), m(units), m(batch, units), int32(act)], relaxed)
    np.testing.assert_array_equal(h.value, out.value)  # the new hidden state is also the output


@pytest.mark.parametrize("type,relaxed", VARIANTS)
@settings(max_examples=15, deadline=None)
@given(steps=SMALL, batch=SMALL, n_in=SMALL, units=SMALL, act=ACTIVATIONS, major=st.booleans(), seed=st.integers(0, 2**16))
def test_unidirectional_sequence_rnn(type, relaxed, steps, batch, n_in, units, act, major, seed):
    m = Maker(seed, type)
    x = m(steps, batch, n_in) if major else m(batch, steps, n_in)
    check("UNIDIRECTIONAL_SEQUENCE_RNN", [x, m(units, n_in), m(units, units), m(units), m(batch, units), int32(act),
                                          int32(int(major))], relaxed)


def test_a_sequence_rnn_steps_the_rnn_cell():
    """Each step's output is RNN's on the previous step's hidden state."""
    m = Maker(7, F32)
    x, w, r, b, h = m(3, 2, 4), m(5, 4), m(5, 5), m(5), m(2, 5)
    [seq] = bind_run("UNIDIRECTIONAL_SEQUENCE_RNN", [x, w, r, b, h, int32(4), int32(1)], [nnref.output(F32)])
    for t in range(3):
        h, _ = bind_run("RNN", [nnref.tensor(F32, x.value[t]), w, r, b, h, int32(4)], [nnref.output(F32)] * 2)
        np.testing.assert_allclose(seq.value[t], h.value, rtol=1e-6)


@pytest.mark.parametrize("type,relaxed", VARIANTS)
@pytest.mark.parametrize("aux", ["none", "weights", "parallel"])
@settings(max_examples=8, deadline=None)
@given(steps=SMALL, batch=SMALL, n_in=SMALL, fw_units=SMALL, bw_units=SMALL, act=ACTIVATIONS, major=st.booleans(),
       merge=st.booleans(), seed=st.integers(0, 2**16))
def test_bidirectional_sequence_rnn(type, relaxed, aux, steps, batch, n_in, fw_units, bw_units, act, major, merge, seed):
    m = Maker(seed, type)

    def seq(width):
        return m(steps, batch, width) if major else m(batch, steps, width)

    n_aux = 2
    bw_in = n_aux if aux == "parallel" else n_in
    inputs = [seq(n_in), m(fw_units, n_in), m(fw_units, fw_units), m(fw_units), m(batch, fw_units),
              m(bw_units, bw_in), m(bw_units, bw_units), m(bw_units), m(batch, bw_units),
              None if aux == "none" else seq(n_aux),
              m(fw_units, n_aux) if aux == "weights" else None, m(bw_units, n_aux) if aux == "weights" else None,
              int32(act), boolean(major), boolean(merge)]
    outs = check("BIDIRECTIONAL_SEQUENCE_RNN", inputs, relaxed)
    assert len(outs) == (1 if merge else 2)


# -- SVDF ----------------------------------------------------------------------------------


@pytest.mark.parametrize("type,relaxed", VARIANTS)
@settings(max_examples=15, deadline=None)
@given(batch=SMALL, n_in=SMALL, units=SMALL, rank=st.integers(1, 3), memory=st.integers(1, 5), bias=st.booleans(),
       act=st.sampled_from([0, 1, 2, 3]), seed=st.integers(0, 2**16))
def test_svdf(type, relaxed, batch, n_in, units, rank, memory, bias, act, seed):
    m = Maker(seed, type)
    filters = units * rank
    state, out = check("SVDF", [m(batch, n_in), m(filters, n_in), m(filters, memory), m(units) if bias else None,
                                m(batch, filters * memory), int32(rank), int32(act)], relaxed)
    assert not state.value.reshape(batch, filters, memory)[..., -1].any()  # the newest slot is left empty


# -- LSTM and its sequence forms ------------------------------------------------------------

LSTM_OPTIONS = st.fixed_dictionaries({
    "cifg": st.booleans(), "peephole": st.booleans(), "projection": st.sampled_from([None, "weights", "bias"]),
    "layer_norm": st.booleans(), "cell_clip": st.sampled_from([0.0, 0.3]), "proj_clip": st.sampled_from([0.0, 0.2]),
    "act": st.sampled_from([0, 1, 3, 4, 6]),
})


def lstm_direction(m, n_in, cells, out, o, n_aux=0):
    """One direction's 17 tensors, its 4 layer norm weights and 4 aux weights, as options say."""
    cifg, proj = o["cifg"], o["projection"]
    out = out if proj else cells
    gates = [None if cifg else m(cells, n_in)] + [m(cells, n_in) for _ in range(3)]
    recurrent = [None if cifg else m(cells, out)] + [m(cells, out) for _ in range(3)]
    peephole = [None if cifg or not o["peephole"] else m(cells)] + [m(cells) if o["peephole"] else None] * 2
    biases = [None if cifg else m(cells)] + [m(cells) for _ in range(3)]
    projection = [m(out, cells) if proj else None, m(out) if proj == "bias" else None]
    norm = [None if cifg or not o["layer_norm"] else m(cells)] + [m(cells) if o["layer_norm"] else None for _ in range(3)]
    aux = [None if cifg or not n_aux else m(cells, n_aux)] + [m(cells, n_aux) if n_aux else None for _ in range(3)]
    return gates + recurrent + peephole + biases + projection, norm, aux, out


def params(m, o):
    return [int32(o["act"]), m.clip(o["cell_clip"]), m.clip(o["proj_clip"])]


@pytest.mark.parametrize("type,relaxed", VARIANTS)
@settings(max_examples=25, deadline=None)
@given(batch=SMALL, n_in=SMALL, cells=st.integers(2, 4), out=SMALL, o=LSTM_OPTIONS, seed=st.integers(0, 2**16))
def test_lstm(type, relaxed, batch, n_in, cells, out, o, seed):
    m = Maker(seed, type)
    tensors, norm, _, out = lstm_direction(m, n_in, cells, out, o)
    inputs = [m(batch, n_in), *tensors, m(batch, out), m(batch, cells), *params(m, o)]
    if o["layer_norm"] or seed % 2:
        inputs += norm  # 27 inputs, the layer norm weights omitted when there is none
    scratch, h, c, output = check("LSTM", inputs, relaxed)
    assert scratch.shape == (batch, cells * (3 if o["cifg"] else 4))
    np.testing.assert_array_equal(h.value, output.value)
    if o["cell_clip"]:
        assert np.abs(c.value.astype(np.float64)).max() <= o["cell_clip"] + 1e-3


@pytest.mark.parametrize("type,relaxed", VARIANTS)
@settings(max_examples=15, deadline=None)
@given(steps=SMALL, batch=SMALL, n_in=SMALL, cells=st.integers(2, 4), out=SMALL, o=LSTM_OPTIONS, major=st.booleans(),
       seed=st.integers(0, 2**16))
def test_unidirectional_sequence_lstm(type, relaxed, steps, batch, n_in, cells, out, o, major, seed):
    m = Maker(seed, type)
    tensors, norm, _, out = lstm_direction(m, n_in, cells, out, o)
    x = m(steps, batch, n_in) if major else m(batch, steps, n_in)
    inputs = [x, *tensors, m(batch, out), m(batch, cells), *params(m, o), boolean(major), *norm]  # always 28
    check("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, relaxed)


@pytest.mark.parametrize("type,relaxed", VARIANTS)
@pytest.mark.parametrize("aux", ["none", "weights", "parallel"])
@settings(max_examples=6, deadline=None)
@given(steps=SMALL, batch=SMALL, n_in=SMALL, cells=st.integers(2, 3), out=SMALL, fw=LSTM_OPTIONS, bw=LSTM_OPTIONS,
       major=st.booleans(), merge=st.booleans(), seed=st.integers(0, 2**16))
def test_bidirectional_sequence_lstm(type, relaxed, aux, steps, batch, n_in, cells, out, fw, bw, major, merge, seed):
    m = Maker(seed, type)
    bw["layer_norm"] = fw["layer_norm"]  # one operation: both directions normalize or neither
    bw["act"], bw["cell_clip"], bw["proj_clip"] = fw["act"], fw["cell_clip"], fw["proj_clip"]
    n_aux = 2
    fw_t, fw_norm, fw_aux, fw_out = lstm_direction(m, n_in, cells, out, fw, n_aux if aux == "weights" else 0)
    bw_t, bw_norm, bw_aux, bw_out = lstm_direction(m, n_aux if aux == "parallel" else n_in, cells + 1, out + 1, bw,
                                                   n_aux if aux == "weights" else 0)

    def seq(width):
        return m(steps, batch, width) if major else m(batch, steps, width)

    inputs = [seq(n_in), *fw_t, *bw_t, m(batch, fw_out), m(batch, cells), m(batch, bw_out), m(batch, cells + 1),
              None if aux == "none" else seq(n_aux), *fw_aux, *bw_aux, *params(m, fw), boolean(merge), boolean(major)]
    inputs += fw_norm + bw_norm  # all 61 inputs, as Android 10 takes them (omitted without layer norm)
    outs = check("BIDIRECTIONAL_SEQUENCE_LSTM", inputs, relaxed)
    assert [o.shape[-1] for o in outs] == ([fw_out + bw_out] if merge else [fw_out, bw_out])


def test_lstm_scratch_holds_what_androids_reference_leaves_there():
    """Gate-major blocks over the batch: input gate, act(c'), forget gate, output gate * act(c')."""
    m = Maker(3, F32)
    o = dict(cifg=False, peephole=False, projection=None, layer_norm=False, cell_clip=0.0, proj_clip=0.0, act=4)
    tensors, _, _, _ = lstm_direction(m, 2, 3, 3, o)
    x, h, c = m(2, 2), m(2, 3), m(2, 3)
    scratch, h_new, c_new, _ = bind_run("LSTM", [x, *tensors, h, c, *params(m, o)], [nnref.output(F32)] * 4)
    blocks = scratch.value.reshape(4, 2, 3)  # [gate, batch, cell]
    np.testing.assert_allclose(blocks[1], np.tanh(c_new.value), rtol=1e-6)
    np.testing.assert_allclose(blocks[3], h_new.value, rtol=1e-6)  # no projection: o * act(c') is the output
    xw = x.value.astype(np.float64)
    gate = xw @ tensors[1].value.T + h.value @ tensors[5].value.T + tensors[12].value
    np.testing.assert_allclose(blocks[2], 1 / (1 + np.exp(-gate)), rtol=1e-5)


# -- QUANTIZED_16BIT_LSTM -------------------------------------------------------------------

Q8, Q16, I32 = "TENSOR_QUANT8_ASYMM", "TENSOR_QUANT16_SYMM", "TENSOR_INT32"


def q8(values, shape=None, scale=1 / 128, zero_point=128):
    return nnref.tensor(Q8, values, shape, scale=scale, zero_point=zero_point)


def quantized_lstm_inputs(x, weights, w_scale, w_zero, bias, cell, prev):
    return [x, *[q8(w, None, w_scale, w_zero) for w in weights],
            *[nnref.tensor(I32, b, scale=w_scale / 128) for b in bias],
            nnref.tensor(Q16, cell, scale=1 / 2048), prev]


def test_quantized_16bit_lstm_is_androids_to_the_bit():
    """AOSP's quantized_lstm.mod.py vector: the expected values are its reference's, exactly."""
    weights = np.array([254, 206, 77, 168, 146, 250, 71, 20, 215, 6, 235, 171, 223, 7, 118, 225, 10, 218, 59, 130, 174,
                        26, 171, 108, 172, 60, 205, 65, 133, 34, 14, 0, 140, 168, 29, 49, 240, 223, 133, 56, 206, 109,
                        142, 64, 246, 216, 54, 183, 137, 240, 103, 52, 24, 50, 68, 51, 237, 112, 132, 179, 0, 220, 89, 23,
                        158, 110, 69, 4, 207, 253, 3, 169, 106, 214, 67, 23, 195, 187, 59, 158, 45, 3, 11, 99, 119, 132,
                        49, 205, 109, 10, 129, 218, 11, 98, 218, 48]).reshape(16, 6)
    bias = np.array([-7876, 13488, -726, 32839, 39481, 48624, 48976, -21419, 9206, -46884, -11693, -38724, -58999,
                     -17050, -41852, -40538])
    rows = {"i": slice(0, 4), "g": slice(4, 8), "f": slice(8, 12), "o": slice(12, 16)}  # the .mod.py's [i, g, f, o]
    order = "ifgo"  # the 1.2 signature's
    w = [weights[rows[g], :2] for g in order] + [weights[rows[g], 2:] for g in order]
    inputs = quantized_lstm_inputs(q8([166, 179, 50, 150], [2, 2]), w, f32(0.00408021), 100, [bias[rows[g]] for g in order],
                                   np.reshape([876, 1034, 955, -909, 761, 1029, 796, -1036], (2, 4)),
                                   q8([136, 150, 140, 115, 135, 152, 138, 112], [2, 4]))
    cell, out = bind_run("QUANTIZED_16BIT_LSTM", inputs, [nnref.output(Q16, 1 / 2048), nnref.output(Q8, 1 / 128, 128)])
    np.testing.assert_array_equal(cell.value, [[1485, 1177, 1373, -1023], [1019, 1355, 1097, -1235]])
    np.testing.assert_array_equal(out.value, [[140, 151, 146, 112], [136, 156, 142, 112]])


@settings(max_examples=60, deadline=None)
@given(batch=SMALL, n_in=SMALL, n_out=SMALL, w_zero=st.integers(0, 255), w_scale=st.floats(0.001, 0.02),
       seed=st.integers(0, 2**16))
def test_quantized_16bit_lstm_against_nnref(batch, n_in, n_out, w_zero, w_scale, seed):
    """nnref runs Android's fixed-point cell too: equal, saturated gates and cell state included."""
    rng = np.random.default_rng(seed)
    weights = [rng.integers(0, 256, (n_out, n_in if k < 4 else n_out)) for k in range(8)]
    bias = [rng.integers(-40000, 40000, n_out) for _ in range(4)]
    inputs = quantized_lstm_inputs(q8(rng.integers(0, 256, (batch, n_in))), weights, f32(w_scale), w_zero, bias,
                                   rng.integers(-32768, 32768, (batch, n_out)), q8(rng.integers(0, 256, (batch, n_out))))
    got, want = bind_vs_nnref("QUANTIZED_16BIT_LSTM", inputs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.value, w.value)


# -- LSH_PROJECTION ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_fingerprint64_is_farmhashs(data):
    assert lib.npu_fingerprint64(data, len(data)) == fingerprint64(data)


def test_fingerprint64_covers_every_length_branch():
    data = bytes(range(256)) * 2
    for n in range(0, 300):
        assert lib.npu_fingerprint64(data[:n], n) == fingerprint64(data[:n]), n


@pytest.mark.parametrize("type", [F32, F16])
@pytest.mark.parametrize("kind", [1, 2, 3])
@settings(max_examples=10, deadline=None)
@given(functions=SMALL, bits=st.integers(1, 12), rows=SMALL, lookup=st.sampled_from([F32, F16, I32, Q8]),
       weighted=st.booleans(), seed=st.integers(0, 2**16))
def test_lsh_projection(type, kind, functions, bits, rows, lookup, weighted, seed):
    m = Maker(seed, type)
    if lookup in (F32, F16):
        values = nnref.tensor(lookup, m.rng.uniform(-5, 5, (rows, 3)))
    elif lookup == I32:
        values = nnref.tensor(I32, m.rng.integers(-1000, 1000, (rows,)))
    else:
        values = q8(m.rng.integers(0, 256, (rows, 2)), scale=0.5, zero_point=3)
    hashes = nnref.tensor(type, m.rng.uniform(-10, 10, (functions, bits)))
    [out] = check("LSH_PROJECTION", [hashes, values, m(rows) if weighted else None, int32(kind)])
    assert out.shape == ((functions * bits,) if kind == 2 else (functions,))


# -- RANDOM_MULTINOMIAL ---------------------------------------------------------------------


@pytest.mark.parametrize("type", [F32, F16])
@settings(max_examples=15, deadline=None)
@given(batch=SMALL, classes=st.integers(1, 6), samples=st.integers(1, 40),
       seeds=st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1)).filter(lambda s: s != (0, 0)),
       seed=st.integers(0, 2**16))
def test_random_multinomial_draws_androids_stream_for_given_seeds(type, batch, classes, samples, seeds, seed):
    """Seeded, the draws are TensorFlow's Philox4x32-10 stream as Android's reference reads it,
    which nnref computes independently: the same classes, draw for draw."""
    m = Maker(seed, type)
    logits = nnref.tensor(type, m.rng.uniform(-3, 3, (batch, classes)))
    check("RANDOM_MULTINOMIAL", [logits, int32(samples), nnref.tensor(I32, list(seeds))])


def multinomial(logits, samples, seeds):
    [out] = bind_run("RANDOM_MULTINOMIAL", [nnref.tensor(F32, logits), int32(samples), nnref.tensor(I32, seeds)],
                     [nnref.output(I32)])
    return out.value


def test_random_multinomial_follows_the_softmax_and_skips_non_finite_logits():
    logits = np.array([[0.0, np.log(3.0), -np.inf, np.log(6.0)], [np.nan, 0.0, np.inf, 0.0]], np.float32)
    n = 20000
    for seeds in ([1234, 5678], [0, 0]):
        draws = multinomial(logits, n, seeds)
        counts = np.bincount(draws[0], minlength=4) / n
        np.testing.assert_allclose(counts, [0.1, 0.3, 0.0, 0.6], atol=0.015)
        assert set(np.unique(draws[1])) == {1, 3}  # NaN and infinity never drawn
        assert abs(np.mean(draws[1] == 1) - 0.5) < 0.015


def test_random_multinomial_is_deterministic_for_seeds_and_random_without():
    logits = np.zeros((2, 10), np.float32)
    a, b = multinomial(logits, 200, [7, 9]), multinomial(logits, 200, [7, 9])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, multinomial(logits, 200, [7, 10]))
    assert not np.array_equal(multinomial(logits, 200, [0, 0]), multinomial(logits, 200, [0, 0]))  # P(equal) = 1e-400


# -- bad calls ---------------------------------------------------------------------------------


def rnn_inputs(m):
    return [m(2, 3), m(4, 3), m(4, 4), m(4), m(2, 4), int32(1)]


def test_bad_rnn_calls_are_refused_naming_the_input():
    m = Maker(1, F32)
    outs = [nnref.output(F32)] * 2
    good = rnn_inputs(m)
    refused("RNN", good[:5], outs, "BAD_OPERATION", "takes 6 inputs, not 5")
    refused("RNN", [nnref.tensor(I32, np.ones((2, 3))), *good[1:]], outs, "BAD_OPERAND_TYPE", "input 0")
    refused("RNN", [good[0], nnref.tensor(F16, good[1].value), *good[2:]], outs, "BAD_OPERAND_TYPE", "input 1")
    refused("RNN", [*good[:5], int32(5)], outs, "BAD_SCALAR", "input 5 (activation)")
    refused("RNN", [*good[:3], m(5), *good[4:]], outs, "BAD_SHAPE", "input 3 (bias)")
    refused("RNN", [*good[:4], m(3, 4), good[5]], outs, "BAD_SHAPE", "input 4 (hidden state)")
    refused("RNN", [*good[:5], float32(1.0)], outs, "BAD_OPERAND_TYPE", "input 5")
    refused("RNN", good, [nnref.output(F16)] * 2, "BAD_OPERAND_TYPE", "output 0")


def test_bad_sequence_and_svdf_calls_are_refused():
    m = Maker(2, F32)
    seq = [m(3, 2, 3), m(4, 3), m(4, 4), m(4), m(2, 4), int32(1), int32(1)]
    refused("UNIDIRECTIONAL_SEQUENCE_RNN", [m(2, 3), *seq[1:]], [nnref.output(F32)], "BAD_SHAPE", "input 0 (input)")
    bi = [m(3, 2, 3), m(4, 3), m(4, 4), m(4), m(2, 4), m(4, 3), m(4, 4), m(4), m(2, 4), None, m(4, 2), m(4, 2),
          int32(1), boolean(True), boolean(True)]
    refused("BIDIRECTIONAL_SEQUENCE_RNN", bi, [nnref.output(F32)], "BAD_OPERATION", "aux weights")
    bi[10] = bi[11] = None
    refused("BIDIRECTIONAL_SEQUENCE_RNN", bi, [nnref.output(F32)] * 2, "BAD_OPERATION", "input 14 (merge outputs)")
    svdf = [m(2, 3), m(4, 3), m(4, 5), None, m(2, 20), int32(3), int32(0)]
    refused("SVDF", svdf, [nnref.output(F32)] * 2, "BAD_SCALAR", "input 5 (rank) 3 does not divide")
    svdf[5] = int32(0)
    refused("SVDF", svdf, [nnref.output(F32)] * 2, "BAD_SCALAR", "input 5 (rank)")
    svdf[5] = int32(2)
    svdf[4] = m(2, 19)
    refused("SVDF", svdf, [nnref.output(F32)] * 2, "BAD_SHAPE", "input 4 (state)")


def test_bad_lstm_calls_are_refused():
    m = Maker(3, F32)
    o = dict(cifg=False, peephole=False, projection=None, layer_norm=False, cell_clip=0.0, proj_clip=0.0, act=4)
    tensors, _, _, _ = lstm_direction(m, 2, 3, 3, o)
    good = [m(2, 2), *tensors, m(2, 3), m(2, 3), *params(m, o)]
    outs = [nnref.output(F32)] * 4
    cifg_half = list(good)
    cifg_half[1] = None  # input-to-input omitted, recurrent-to-input kept
    refused("LSTM", cifg_half, outs, "BAD_OPERATION", "input 5 (recurrent-to-input weights) must be omitted")
    peephole_half = list(good)
    peephole_half[10] = m(3)  # cell-to-forget without cell-to-output
    refused("LSTM", peephole_half, outs, "BAD_OPERATION", "input 9 (cell-to-input weights) must be given")
    refused("LSTM", [*good[:21], float32(-1.0), good[22]], outs, "BAD_SCALAR", "input 21 (cell clip)")
    refused("LSTM", [*good[:21], float16(0.0), good[22]], outs, "BAD_OPERAND_TYPE", "input 21")
    refused("LSTM", [*good[:20], int32(5), *good[21:]], outs, "BAD_SCALAR", "input 20 (activation)")
    bias_only = list(good)
    bias_only[17] = m(3)
    refused("LSTM", bias_only, outs, "BAD_OPERATION", "input 17 (projection bias) needs projection weights")
    refused("LSTM", good[:22], outs, "BAD_OPERATION", "takes 23 to 27 inputs")
    sequence = [m(2, 1, 2), *good[1:], boolean(False)]  # Android 10's 24-input form does not exist
    refused("UNIDIRECTIONAL_SEQUENCE_LSTM", sequence, [nnref.output(F32)], "BAD_OPERATION", "takes 28 inputs, not 24")
    [seq_out] = bind_run("UNIDIRECTIONAL_SEQUENCE_LSTM", sequence + [None] * 4, [nnref.output(F32)])
    assert seq_out.shape == (2, 1, 3)
    bidirectional = [m(2, 1, 2), *tensors, *tensors, m(2, 3), m(2, 3), m(2, 3), m(2, 3), None, *[None] * 8,
                     *params(m, o), boolean(True), boolean(False)]
    refused("BIDIRECTIONAL_SEQUENCE_LSTM", bidirectional, [nnref.output(F32)], "BAD_OPERATION", "takes 61 inputs, not 53")
    [merged] = bind_run("BIDIRECTIONAL_SEQUENCE_LSTM", bidirectional + [None] * 8, [nnref.output(F32)])
    assert merged.shape == (2, 1, 6)


def test_bad_quantized_lstm_lsh_and_multinomial_calls_are_refused():
    rng = np.random.default_rng(4)
    weights = [rng.integers(0, 256, (2, 3 if k < 4 else 2)) for k in range(8)]
    good = quantized_lstm_inputs(q8(rng.integers(0, 256, (1, 3))), weights, f32(0.01), 10, [np.zeros(2)] * 4,
                                 np.zeros((1, 2)), q8([128, 128], [1, 2]))
    outs = [nnref.output(Q16, 1 / 2048), nnref.output(Q8, 1 / 128, 128)]
    refused("QUANTIZED_16BIT_LSTM", [q8(good[0].value, scale=0.5), *good[1:]], outs, "BAD_SCALAR", "input 0 (input)")
    refused("QUANTIZED_16BIT_LSTM", [good[0], q8(weights[0], None, 0.02, 10), *good[2:]], outs, "BAD_SCALAR", "input 2")
    refused("QUANTIZED_16BIT_LSTM", good, [nnref.output(Q16, 1 / 1024), outs[1]], "BAD_SCALAR", "output 0")
    m = Maker(5, F32)
    lsh = [m(2, 4), m(3, 2), None, int32(4)]
    refused("LSH_PROJECTION", lsh, [nnref.output(I32)], "BAD_SCALAR", "input 3 (type)")
    refused("LSH_PROJECTION", [m(2, 33), *lsh[1:3], int32(1)], [nnref.output(I32)], "BAD_SHAPE", "at most 32")
    refused("LSH_PROJECTION", [lsh[0], lsh[1], m(2), int32(1)], [nnref.output(I32)], "BAD_SHAPE", "input 2 (weight)")
    seeds = nnref.tensor(I32, [1, 2])
    refused("RANDOM_MULTINOMIAL", [m(2, 3), int32(0), seeds], [nnref.output(I32)], "BAD_SCALAR", "input 1")
    refused("RANDOM_MULTINOMIAL", [m(2, 3), int32(4), nnref.tensor(I32, [1, 2, 3])], [nnref.output(I32)], "BAD_SHAPE",
            "input 2 (seeds)")
    refused("RANDOM_MULTINOMIAL", [nnref.tensor(I32, np.ones((2, 3))), int32(4), seeds], [nnref.output(I32)],
            "BAD_OPERAND_TYPE", "input 0")


# -- what the NDK's addOperation sees, and slices -------------------------------------------


def test_shapes_come_from_declared_shapes_without_data():
    m = Maker(6, F32)
    assert bind_check("RNN", rnn_inputs(m), [nnref.output(F32)] * 2) == [(2, 4), (2, 4)]
    seq = [m(3, 2, 3), m(4, 3), m(4, 4), m(4), m(2, 4), int32(1), int32(1)]
    assert bind_check("UNIDIRECTIONAL_SEQUENCE_RNN", seq, [nnref.output(F32)]) == [None]  # time major unknown
    assert bind_check("UNIDIRECTIONAL_SEQUENCE_RNN", seq, [nnref.output(F32)], data=True) == [(3, 2, 4)]
    assert bind_check("RANDOM_MULTINOMIAL", [m(2, 3), int32(5), nnref.tensor(I32, [1, 2])], [nnref.output(I32)],
                      data=True) == [(2, 5)]


def test_a_range_of_batch_rows_computes_those_rows_only():
    m = Maker(8, F32)
    x, w, r, b, h = (tensor(v) for v in rnn_inputs(m)[:5])
    outs = [Tensor(F32, np.full((2, 4), 7.0, np.float32)) for _ in range(2)]
    assert lib.npu_ops_units_recurrent(x.ptr, False, False) == 2
    assert lib.npu_op_rnn(x.ptr, w.ptr, r.ptr, b.ptr, h.ptr, 1, outs[0].ptr, outs[1].ptr, 1, 2) == lib.NPU_OK
    assert (outs[0].array[0] == 7.0).all() and not (outs[0].array[1] == 7.0).any()
    assert lib.npu_op_rnn(x.ptr, w.ptr, r.ptr, b.ptr, h.ptr, 1, outs[0].ptr, outs[1].ptr, 0, 2**64 - 1) == lib.NPU_OK
    assert not (outs[0].array == 7.0).any()


def test_bad_descriptors_are_error_codes():
    m = Maker(9, F32)
    x, w, r, b, h = (tensor(v) for v in rnn_inputs(m)[:5])
    out = Tensor(F32, np.zeros((2, 4), np.float32))
    assert status(lib.npu_op_rnn(ffi.NULL, w.ptr, r.ptr, b.ptr, h.ptr, 1, out.ptr, out.ptr, 0, 2)) == "INVALID_ARGUMENT"
    assert status(lib.npu_op_rnn(x.ptr, w.ptr, r.ptr, b.ptr, h.ptr, 5, out.ptr, out.ptr, 0, 2)) == "BAD_SCALAR"
    assert status(lib.npu_op_rnn(x.ptr, r.ptr, r.ptr, b.ptr, h.ptr, 1, out.ptr, out.ptr, 0, 2)) == "BAD_SHAPE"
    assert status(lib.npu_op_lstm(x.ptr, ffi.NULL, h.ptr, h.ptr, ffi.NULL, out.ptr, out.ptr, out.ptr, out.ptr, 0, 2)) \
        == "INVALID_ARGUMENT"
    assert status(lib.npu_op_sequence_rnn(x.ptr, ffi.NULL, 1, True, out.ptr, 0, 2)) == "INVALID_ARGUMENT"
    assert status(lib.npu_op_random_multinomial(x.ptr, 3, 1, 2, out.ptr)) == "BAD_OPERAND_TYPE"  # not TENSOR_INT32
    draws = Tensor(I32, np.zeros((2, 4), np.int32))
    assert status(lib.npu_op_random_multinomial(x.ptr, 3, 1, 2, draws.ptr)) == "BAD_SHAPE"  # 4 samples a row, not 3
    assert status(lib.npu_op_lsh_projection(x.ptr, x.ptr, ffi.NULL, 2, draws.ptr)) == "BAD_SHAPE"


def bind_cost(name, inputs, outputs):
    """The binding's (FLOPs, bytes) for a call whose every shape is known."""
    results = bind_run(name, inputs, outputs)
    keep = []

    def args(operands):
        array = ffi.new("struct npu_arg[]", len(operands))
        for slot, operand in zip(array, operands):
            if operand is None:
                slot.omitted = True
                continue
            t = tensor(operand)
            keep.append(t)
            slot.t = t.ptr[0]
            slot.has_rank = slot.has_shape = True
        keep.append(array)
        return array

    code = nnref.OPERATION_TYPES.index(name)
    call = ffi.new("struct npu_bind_call *", {"type": code, "input_count": len(inputs), "output_count": len(results),
                                              "in": args(inputs), "out": args(results)})
    flops, bytes_ = ffi.new("double *"), ffi.new("double *")
    lib.npu_bind_cost(lib.npu_bind_lookup(code), call, flops, bytes_)
    return flops[0], bytes_[0]


def test_the_cost_model_charges_the_multiply_adds_of_every_step():
    m = Maker(10, F32)
    flops, bytes_ = bind_cost("RNN", rnn_inputs(m), [nnref.output(F32)] * 2)
    assert flops == 2 * 2 * (4 * 3 + 4 * 4)  # batch 2, units 4: x W^T (in 3) and h R^T
    assert bytes_ == 4 * (2 * 3 + 4 * 3 + 4 * 4 + 4 + 2 * 4 + 2 * (2 * 4))
    seq = [m(5, 2, 3), m(4, 3), m(4, 4), m(4), m(2, 4), int32(1), int32(1)]
    flops, _ = bind_cost("UNIDIRECTIONAL_SEQUENCE_RNN", seq, [nnref.output(F32)])
    assert flops == 5 * 2 * 2 * (4 * 3 + 4 * 4)  # 5 steps of 2 rows
    o = dict(cifg=True, peephole=False, projection="weights", layer_norm=False, cell_clip=0.0, proj_clip=0.0, act=4)
    tensors, _, _, out = lstm_direction(m, 3, 4, 2, o)
    flops, _ = bind_cost("LSTM", [m(2, 3), *tensors, m(2, out), m(2, 4), *params(m, o)], [nnref.output(F32)] * 4)
    assert flops == 2 * 2 * (3 * 4 * 3 + 3 * 4 * 2 + 2 * 4)  # CIFG: 3 gates' input and recurrent weights, projection


def test_without_shapes_or_data_the_signature_is_still_checked():
    """addOperation before any shape is known: types and counts are checked, outputs left unknown."""
    m = Maker(11, F16)
    o = dict(cifg=False, peephole=True, projection=None, layer_norm=False, cell_clip=0.0, proj_clip=0.0, act=4)
    tensors, _, _, out = lstm_direction(m, 3, 4, 4, o)
    inputs = [m(2, 3), *tensors, m(2, out), m(2, 4), *params(m, o)]
    assert bind_check("LSTM", inputs, [nnref.output(F16)] * 4, shapes=False) == [None] * 4
    with pytest.raises(BindError, match="input 21 must be a FLOAT16 scalar, not FLOAT32"):
        bind_check("LSTM", [*inputs[:21], float32(0.0), inputs[22]], [nnref.output(F16)] * 4, shapes=False)
