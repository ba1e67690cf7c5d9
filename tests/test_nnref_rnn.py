"""nnref's recurrent operations against AOSP's vectors (rnn, lstm, layer-norm lstm, svdf) and
the sequence forms against stepping the cell by hand."""

from __future__ import annotations

import numpy as np
import pytest

import nnref
from nnref import BadOperation, boolean, float32, int32, tensor
from nnref.examples import check, real

F32 = "TENSOR_FLOAT32"
VARIANTS = ["float32", "relaxed", "float16"]
EMPTY = tensor(F32, np.zeros(0))


def t(shape, values):
    return tensor(F32, np.asarray(values, np.float32).reshape(shape))


# RNN (rnn.mod.py, first step) -------------------------------------------------------------

RNN_W = [0.461459, 0.153381, 0.529743, -0.00371218, 0.676267, -0.211346, 0.317493, 0.969689, -0.343251, 0.186423,
         0.398151, 0.152399, 0.448504, 0.317662, 0.523556, -0.323514, 0.480877, 0.333113, -0.757714, -0.674487,
         -0.643585, 0.217766, -0.0251462, 0.79512, -0.595574, -0.422444, 0.371572, -0.452178, -0.556069, -0.482188,
         -0.685456, -0.727851, 0.841829, 0.551535, -0.232336, 0.729158, -0.00294906, -0.69754, 0.766073, -0.178424,
         0.369513, -0.423241, 0.548547, -0.0152023, -0.757482, -0.85491, 0.251331, -0.989183, 0.306261, -0.340716,
         0.886103, -0.0726757, -0.723523, -0.784303, 0.0354295, 0.566564, -0.485469, -0.620498, 0.832546, 0.697884,
         -0.279115, 0.294415, -0.584313, 0.548772, 0.0648819, 0.968726, 0.723834, -0.0080452, -0.350386, -0.272803,
         0.115121, -0.412644, -0.824713, -0.992843, -0.592904, -0.417893, 0.863791, -0.423461, -0.147601, -0.770664,
         -0.479006, 0.654782, 0.587314, -0.639158, 0.816969, -0.337228, 0.659878, 0.73107, 0.754768, -0.337042,
         0.0960841, 0.368357, 0.244191, -0.817703, -0.211223, 0.442012, 0.37225, -0.623598, -0.405423, 0.455101,
         0.673656, -0.145345, -0.511346, -0.901675, -0.81252, -0.127006, 0.809865, -0.721884, 0.636255, 0.868989,
         -0.347973, -0.10179, -0.777449, 0.917274, 0.819286, 0.206218, -0.00785118, 0.167141, 0.45872, 0.972934,
         -0.276798, 0.837861, 0.747958, -0.0151566, -0.330057, -0.469077, 0.277308, 0.415818]
RNN_B = [0.065691948, -0.69055247, 0.1107955, -0.97084129, -0.23957068, -0.23566568, -0.389184, 0.47481549,
         -0.4791103, 0.29931796, 0.10463274, 0.83918178, 0.37197268, 0.61957061, 0.3956964, -0.37609905]
RNN_X = [0.23689353, 0.285385, 0.037029743, -0.19858193, -0.27569133, 0.43773448, 0.60379338, 0.35562468]
RNN_OUT = [0.496726, 0, 0.965996, 0, 0.0584254, 0, 0, 0.12315, 0, 0, 0.612266, 0.456601, 0, 0.52286, 1.16099, 0.0291232]


@pytest.mark.parametrize("variant", VARIANTS)
def test_rnn(variant):
    check("RNN", [real([2, 8], RNN_X * 2), real([16, 8], RNN_W), real([16, 16], 0.1 * np.eye(16)), real([16], RNN_B),
                  real([2, 16], [0] * 32), int32(1)], [real([2, 16], RNN_OUT * 2), real([2, 16], RNN_OUT * 2)], variant)


def test_sequence_rnns_step_the_cell():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (3, 2, 4)).astype(np.float32)  # [time, batch, input]
    w, r, b = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((5, 4), (5, 5), (5,)))
    h0 = np.zeros((2, 5), np.float32)
    expected, h = [], h0
    for step in x:
        h = np.tanh(step @ w.T + h @ r.T + b)
        expected.append(h)
    expected = np.stack(expected)
    args = [t(w.shape, w), t(r.shape, r), t(b.shape, b), t(h0.shape, h0), int32(4)]
    (out,) = nnref.evaluate("UNIDIRECTIONAL_SEQUENCE_RNN", [t(x.shape, x), *args, int32(1)])
    np.testing.assert_allclose(out.value, expected, rtol=1e-5, atol=1e-6)
    (batch_major,) = nnref.evaluate("UNIDIRECTIONAL_SEQUENCE_RNN", [t((2, 3, 4), x.swapaxes(0, 1)), *args, int32(0)])
    np.testing.assert_allclose(batch_major.value, expected.swapaxes(0, 1), rtol=1e-5, atol=1e-6)
    # Bidirectional: the forward half is the same; the backward half runs the reversed sequence.
    backward, h = [None] * 3, h0
    for step in reversed(range(3)):
        h = np.tanh(x[step] @ w.T + h @ r.T + b)
        backward[step] = h
    bi_args = [t(x.shape, x), *args[:4], *args[:4], EMPTY, EMPTY, EMPTY, int32(4), boolean(True)]
    fw, bw = nnref.evaluate("BIDIRECTIONAL_SEQUENCE_RNN", [*bi_args, boolean(False)])
    np.testing.assert_allclose(fw.value, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bw.value, np.stack(backward), rtol=1e-5, atol=1e-6)
    (merged,) = nnref.evaluate("BIDIRECTIONAL_SEQUENCE_RNN", [*bi_args, boolean(True)])
    np.testing.assert_allclose(merged.value, np.concatenate([expected, np.stack(backward)], -1), rtol=1e-5, atol=1e-6)


# LSTM (lstm.mod.py: no CIFG, no peephole, no projection, no clipping) ------------------------

LSTM_WEIGHTS = {
    "input_to": [[-0.45018822, -0.02338299, -0.0870589, -0.34550029, 0.04266912, -0.15680569, -0.34856534, 0.43890524],
                 [0.09701663, 0.20334584, -0.50592935, -0.31343272, -0.40032279, 0.44781327, 0.01387155, -0.35593212],
                 [-0.50013041, 0.1370284, 0.11810488, 0.2013163, -0.20583314, 0.44344562, 0.22077113, -0.29909778],
                 [-0.25065863, -0.28290087, 0.04613829, 0.40525138, 0.44272184, 0.03897077, -0.1556896, 0.19487578]],
    "recurrent_to": [
        [-0.0063535, -0.2042388, 0.31454784, -0.35746509, 0.28902304, 0.08183324, -0.16555229, 0.02286911, -0.13566875,
         0.03034258, 0.48091322, -0.12528998, 0.24077177, -0.51332325, -0.33502164, 0.10629296],
        [-0.48684245, -0.06655136, 0.42224967, 0.2112639, 0.27654213, 0.20864892, -0.07646349, 0.45877004, 0.00141793,
         -0.14609534, 0.36447752, 0.09196436, 0.28053468, 0.01560611, -0.20127171, -0.01140004],
        [-0.3407414, 0.24443203, -0.2078532, 0.26320225, 0.05695659, -0.00123841, -0.4744786, -0.35869038, -0.06418842,
         -0.13502428, -0.501764, 0.22830659, -0.46367589, 0.26016325, -0.03894562, -0.16368064],
        [0.43385774, -0.17194885, 0.2718237, 0.09215671, 0.24107647, -0.39835793, 0.18212086, 0.01301402, 0.48572797,
         -0.50656658, 0.20047462, -0.20607421, -0.51818722, -0.15390486, 0.0468148, 0.39922136]],
}


def lstm_inputs():
    gates_in = [real([4, 2], w) for w in LSTM_WEIGHTS["input_to"]]
    gates_rec = [real([4, 4], w) for w in LSTM_WEIGHTS["recurrent_to"]]
    biases = [real([4], b) for b in ([0] * 4, [1] * 4, [0] * 4, [0] * 4)]
    none = real([0], [])  # an omitted optional tensor, typed by the variation
    return [real([1, 2], [2, 3]), *gates_in, *gates_rec, none, none, none, *biases, none, none,
            real([1, 4], [0] * 4), real([1, 4], [0] * 4), int32(4), float32(0), float32(0)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_lstm(variant):
    out = [-0.0297319, 0.122947, 0.208851, -0.153588]
    ins, _ = nnref.examples.realize(lstm_inputs(), [], variant)
    results = nnref.evaluate("LSTM", ins, relaxed=variant == "relaxed")
    expected = [real([1, 4], out), real([1, 4], [-0.145439, 0.157475, 0.293663, -0.277353]), real([1, 4], out)]
    _, want = nnref.examples.realize([], expected, variant)
    assert results[0].shape == (1, 16)  # the scratch buffer: four gates per cell
    for got, exp in zip(results[1:], want, strict=True):
        nnref.assert_close(got, exp, relaxed=variant == "relaxed")


# Layer-normalized LSTM with peephole and projection (unidirectional_sequence_lstm_1step) -----

LN = {
    "input_to": [[0.5, 0.6, 0.7, -0.8, -0.9, 0.1, 0.2, 0.3, -0.4, 0.5, -0.8, 0.7, -0.6, 0.5, -0.4, -0.5, -0.4, -0.3, -0.2, -0.1],
                 [-0.6, -0.1, 0.3, 0.2, 0.9, -0.5, -0.2, -0.4, 0.3, -0.8, -0.4, 0.3, -0.5, -0.4, -0.6, 0.3, -0.4, -0.6, -0.5, -0.5],
                 [-0.4, -0.3, -0.2, -0.1, -0.5, 0.5, -0.2, -0.3, -0.2, -0.6, 0.6, -0.1, -0.4, -0.3, -0.7, 0.7, -0.9, -0.5, 0.8, 0.6],
                 [-0.8, -0.4, -0.2, -0.9, -0.1, -0.7, 0.3, -0.3, -0.8, -0.2, 0.6, -0.2, 0.4, -0.7, -0.3, -0.5, 0.1, 0.5, -0.6, -0.4]],
    "recurrent_to": [[-0.2, -0.3, 0.4, 0.1, -0.5, 0.9, -0.2, -0.3, -0.7, 0.05, -0.2, -0.6],
                     [-0.5, -0.3, -0.5, -0.2, 0.6, 0.4, 0.9, 0.3, -0.1, 0.2, 0.5, 0.2],
                     [-0.3, 0.2, 0.1, -0.3, 0.8, -0.08, -0.2, 0.3, 0.8, -0.6, -0.1, 0.2],
                     [0.3, -0.1, 0.1, -0.2, -0.5, -0.7, -0.2, -0.6, -0.1, -0.4, -0.7, -0.2]],
    "cell_to": [[0.05, 0.1, 0.25, 0.15], [-0.02, -0.15, -0.25, -0.03], [0.1, -0.1, -0.5, 0.05]],
    "bias": [[0.03, 0.15, 0.22, 0.38], [0.1, -0.3, -0.2, 0.1], [-0.05, 0.72, 0.25, 0.08], [0.05, -0.01, 0.2, 0.1]],
    "projection": [-0.1, 0.2, 0.01, -0.2, 0.1, 0.5, 0.3, 0.08, 0.07, 0.2, -0.4, 0.2],
    "layer_norm": [[0.1, 0.2, 0.3, 0.5], [0.2, 0.2, 0.4, 0.3], [0.7, 0.2, 0.3, 0.8], [0.6, 0.2, 0.2, 0.5]],
}
LN_X = [0.7, 0.8, 0.1, 0.2, 0.3, 0.3, 0.2, 0.9, 0.8, 0.1]
LN_CELL = [-0.451771229505539, 0.376915663480759, 0.225425109267235, 0.232406347990036,
           -0.252585828304291, 0.330421179533005, 0.017305245622993, 0.366601228713989]
LN_OUT = [0.024407668039203, 0.128027379512787, -0.001709178090096, -0.006924282759428, 0.084874063730240, 0.063444979488850]


def ln_weights():
    return ([t([4, 5], w) for w in LN["input_to"]] + [t([4, 3], w) for w in LN["recurrent_to"]]
            + [t([4], w) for w in LN["cell_to"]] + [t([4], b) for b in LN["bias"]] + [t([3, 4], LN["projection"]), EMPTY])


def test_layer_norm_lstm_with_peephole_and_projection():
    states = [t([2, 3], [0] * 6), t([2, 4], [0] * 8)]
    norms = [t([4], w) for w in LN["layer_norm"]]
    _, h, c, out = nnref.evaluate("LSTM", [t([2, 5], LN_X), *ln_weights(), *states, int32(4), float32(0), float32(0), *norms])
    np.testing.assert_allclose(c.value.ravel(), LN_CELL, atol=1e-5)
    np.testing.assert_allclose(out.value.ravel(), LN_OUT, atol=1e-5)
    np.testing.assert_array_equal(h.value, out.value)
    (seq,) = nnref.evaluate("UNIDIRECTIONAL_SEQUENCE_LSTM", [t([1, 2, 5], LN_X), *ln_weights(), *states, int32(4),
                                                             float32(0), float32(0), boolean(True), *norms])
    np.testing.assert_allclose(seq.value.ravel(), LN_OUT, atol=1e-5)


def test_bidirectional_lstm_runs_each_direction_as_the_sequence_lstm_would():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (3, 2, 5)).astype(np.float32)
    weights = ln_weights()
    states = [t([2, 3], [0] * 6), t([2, 4], [0] * 8)]
    tail = [int32(4), float32(0), float32(0)]
    no_norm = [EMPTY] * 4  # the layer norm weights' places, as Android 10's signatures always have them
    (fw_expected,) = nnref.evaluate("UNIDIRECTIONAL_SEQUENCE_LSTM", [t(x.shape, x), *weights, *states, *tail, boolean(True),
                                                                     *no_norm])
    (bw_reversed,) = nnref.evaluate("UNIDIRECTIONAL_SEQUENCE_LSTM", [t(x.shape, x[::-1]), *weights, *states, *tail,
                                                                     boolean(True), *no_norm])
    inputs = [t(x.shape, x), *weights, *weights, *states, *states, EMPTY, *[EMPTY] * 8, *tail, boolean(False), boolean(True),
              *no_norm, *no_norm]
    fw, bw = nnref.evaluate("BIDIRECTIONAL_SEQUENCE_LSTM", inputs)
    np.testing.assert_allclose(fw.value, fw_expected.value, rtol=1e-6)
    np.testing.assert_allclose(bw.value, bw_reversed.value[::-1], rtol=1e-6)


def test_sequence_lstms_take_android_10s_input_counts_and_clip_types():
    # UNIDIRECTIONAL_SEQUENCE_LSTM takes 28 inputs and BIDIRECTIONAL_SEQUENCE_LSTM 61 (Android 10's
    # validation), the clips of the tensors' precision: FLOAT16 beside TENSOR_FLOAT16.
    x = t([1, 2, 5], LN_X)
    states = [t([2, 3], [0] * 6), t([2, 4], [0] * 8)]
    tail = [int32(4), float32(0), float32(0), boolean(True)]
    with pytest.raises(BadOperation, match="UNIDIRECTIONAL_SEQUENCE_LSTM: takes 28 inputs, got 24"):
        nnref.evaluate("UNIDIRECTIONAL_SEQUENCE_LSTM", [x, *ln_weights(), *states, *tail])
    both = [x, *ln_weights(), *ln_weights(), *states, *states, EMPTY, *[EMPTY] * 8, *tail[:3], boolean(False),
            boolean(True)]
    with pytest.raises(BadOperation, match="BIDIRECTIONAL_SEQUENCE_LSTM: takes 61 inputs, got 53"):
        nnref.evaluate("BIDIRECTIONAL_SEQUENCE_LSTM", both)
    half = [tensor("TENSOR_FLOAT16", o.value) if o.type == F32 else o for o in [x, *ln_weights(), *states]]
    with pytest.raises(BadOperation, match="input 21 is FLOAT32; the 1.2 spec allows FLOAT16"):
        nnref.evaluate("UNIDIRECTIONAL_SEQUENCE_LSTM", [*half, *tail, *[EMPTY] * 4])
    # (the conformance cases derive float16 forms of the float32 examples, FLOAT16 clips and all)


def test_cifg_lstm_derives_the_input_gate_from_the_forget_gate():
    weights = ln_weights()
    cifg = [EMPTY, *weights[1:4], EMPTY, *weights[5:8], EMPTY, *weights[9:11], EMPTY, *weights[12:]]
    states = [t([2, 3], [0] * 6), t([2, 4], [0] * 8)]
    scratch, h, c, out = nnref.evaluate("LSTM", [t([2, 5], LN_X), *cifg, *states, int32(4), float32(0.1), float32(0.01)])
    assert scratch.shape == (2, 12)  # three gates without the input gate
    assert np.abs(c.value).max() <= 0.1 + 1e-7 and np.abs(out.value).max() <= 0.01 + 1e-7  # clipped
    with pytest.raises(BadOperation, match="all given or all omitted"):
        nnref.evaluate("LSTM", [t([2, 5], LN_X), EMPTY, *weights[1:], *states, int32(4), float32(0), float32(0)])


# SVDF (svdf.mod.py, first step) -------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_svdf(variant):
    features = [-0.31930989, -0.36118156, 0.0079667, 0.37613347, 0.22197971, 0.12416199, 0.27901134, 0.27557442,
                0.3905206, -0.36137494, -0.06634006, -0.10640851]
    times = [-0.31930989, 0.37613347, 0.27901134, -0.36137494, -0.36118156, 0.22197971, 0.27557442, -0.06634006,
             0.0079667, 0.12416199, 0.3905206, -0.10640851, -0.0976817, 0.15294972, 0.39635518, -0.02702999, 0.39296314,
             0.15785322, 0.21931258, 0.31053296, -0.36916667, 0.38031587, -0.21580373, 0.27072677, 0.23622236,
             0.34936687, 0.18174365, 0.35907319, -0.17493086, 0.324846, -0.10781813, 0.27201805, 0.14324132,
             -0.23681851, -0.27115166, -0.01580888, -0.14943552, 0.15465137, 0.09784451, -0.0337657]
    x = [0.12609188, -0.46347019, -0.89598465] * 2
    out = [0.014899, -0.0517661, -0.143725, -0.00271883] * 2
    ins, (want,) = nnref.examples.realize(
        [real([2, 3], x), real([4, 3], features), real([4, 10], times), real([0], []), real([2, 40], [0] * 80),
         int32(1), int32(0)], [real([2, 4], out)], variant)
    state, got = nnref.evaluate("SVDF", ins, relaxed=variant == "relaxed")
    nnref.assert_close(got, want, relaxed=variant == "relaxed")
    # The state shifts left: the newest activations (x W^T) sit one slot from the end.
    newest = np.asarray(x, np.float64).reshape(2, 3) @ np.asarray(features).reshape(4, 3).T
    np.testing.assert_allclose(state.value.reshape(2, 4, 10)[..., -2], newest, atol=2e-3)
    assert not state.value.reshape(2, 4, 10)[..., -1].any()


# QUANTIZED_16BIT_LSTM (quantized_lstm.mod.py; its weights are [i, g, f, o] rows of [x, h]) ----


def test_quantized_16bit_lstm():
    weights = np.array([254, 206, 77, 168, 146, 250, 71, 20, 215, 6, 235, 171, 223, 7, 118, 225, 10, 218, 59, 130, 174, 26,
                        171, 108, 172, 60, 205, 65, 133, 34, 14, 0, 140, 168, 29, 49, 240, 223, 133, 56, 206, 109, 142, 64,
                        246, 216, 54, 183, 137, 240, 103, 52, 24, 50, 68, 51, 237, 112, 132, 179, 0, 220, 89, 23, 158, 110,
                        69, 4, 207, 253, 3, 169, 106, 214, 67, 23, 195, 187, 59, 158, 45, 3, 11, 99, 119, 132, 49, 205, 109,
                        10, 129, 218, 11, 98, 218, 48]).reshape(16, 6)
    bias = np.array([-7876, 13488, -726, 32839, 39481, 48624, 48976, -21419, 9206, -46884, -11693, -38724, -58999, -17050,
                     -41852, -40538])
    scale = 0.00408021
    rows = {"i": slice(0, 4), "g": slice(4, 8), "f": slice(8, 12), "o": slice(12, 16)}

    def q8(values, shape, s=1 / 128, z=128):
        return tensor("TENSOR_QUANT8_ASYMM", values, shape, scale=s, zero_point=z)

    order = "ifgo"  # the 1.2 signature's gate order
    input_w = [q8(weights[rows[g], :2], None, scale, 100) for g in order]
    recurrent_w = [q8(weights[rows[g], 2:], None, scale, 100) for g in order]
    biases = [tensor("TENSOR_INT32", bias[rows[g]], scale=scale / 128) for g in order]
    cell = tensor("TENSOR_QUANT16_SYMM", [876, 1034, 955, -909, 761, 1029, 796, -1036], [2, 4], scale=1 / 2048)
    c, h = nnref.evaluate("QUANTIZED_16BIT_LSTM", [q8([166, 179, 50, 150], [2, 2]), *input_w, *recurrent_w, *biases, cell,
                                                   q8([136, 150, 140, 115, 135, 152, 138, 112], [2, 4])])
    np.testing.assert_array_equal(c.value, [[1485, 1177, 1373, -1023], [1019, 1355, 1097, -1235]])  # exactly Android's
    np.testing.assert_array_equal(h.value, [[140, 151, 146, 112], [136, 156, 142, 112]])
    with pytest.raises(BadOperation, match="share one scale"):
        nnref.evaluate("QUANTIZED_16BIT_LSTM", [q8([166, 179, 50, 150], [2, 2]), q8([1] * 8, [4, 2], 0.5, 0),
                                                *input_w[1:], *recurrent_w, *biases, cell, q8([128] * 8, [2, 4])])


# lstm2.mod.py: CIFG with peephole ---------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_cifg_peephole_lstm_vector(variant):
    none = real([0], [])
    w = {"f": [-0.55291498, -0.42866567, 0.13056988, -0.3633365, -0.22755712, 0.28253698, 0.24407166, 0.33826375],
         "c": [-0.49770179, -0.27711356, -0.09624726, 0.05100781, 0.04717243, 0.48944736, -0.38535351, -0.17212132],
         "o": [0.10725588, -0.02335852, -0.55932593, -0.09426838, -0.44257352, 0.54939759, 0.01533556, 0.42751634]}
    r = {"f": [-0.13832897, -0.0515101, -0.2359007, -0.16661474, -0.14340827, 0.36986142, 0.23414481, 0.55899,
               0.10798943, -0.41174671, 0.17751795, -0.34484994, -0.35874045, -0.11352962, 0.27268326, 0.54058349],
         "c": [0.54066205, -0.32668582, -0.43562764, -0.56094903, 0.42957711, 0.01841056, -0.32764608, -0.33027974,
               -0.10826075, 0.20675004, 0.19069612, -0.03026325, -0.54532051, 0.33003211, 0.44901288, 0.21193194],
         "o": [0.41613156, 0.42610586, -0.16495961, -0.5663873, 0.30579174, -0.05115908, -0.33941799, 0.23364776,
               0.11178309, 0.09481031, -0.26424935, 0.46261835, 0.50248802, 0.26114327, -0.43736315, 0.33149987]}
    inputs = [real([1, 2], [2, 3]), none, *(real([4, 2], w[g]) for g in "fco"), none, *(real([4, 4], r[g]) for g in "fco"),
              none, real([4], [0.47485286, -0.51955009, -0.24458408, 0.31544167]),
              real([4], [-0.17135078, 0.82760304, 0.85573703, -0.77109635]),
              none, real([4], [1] * 4), real([4], [0] * 4), real([4], [0] * 4), none, none,
              real([1, 4], [0] * 4), real([1, 4], [0] * 4), int32(4), float32(0), float32(0)]
    ins, (h, c, out) = nnref.examples.realize(inputs, [real([1, 4], [-0.364445, -0.00352185, 0.128866, -0.0516365]),
                                                       real([1, 4], [-0.760444, -0.0180416, 0.182264, -0.0649371]),
                                                       real([1, 4], [-0.36444446, -0.00352185, 0.12886585, -0.05163646])],
                                              variant)
    scratch, *results = nnref.evaluate("LSTM", ins, relaxed=variant == "relaxed")
    assert scratch.shape == (1, 12)
    for got, want in zip(results, (h, c, out), strict=True):
        nnref.assert_close(got, want, relaxed=variant == "relaxed")


# bidirectional_sequence_rnn.mod.py's relations: its forward half is rnn.mod.py's RNN; the
# auxiliary input with its weights adds to the gates like the regular one (all of the input
# there, or half in each, gives the same outputs); a reversed sequence swaps the directions.


def bidirectional_rnn(x, w, aux=None, aux_w=None, merge=False):
    r, b = 0.1 * np.eye(16, dtype=np.float32), np.asarray(RNN_B, np.float32)
    h = np.zeros((x.shape[0], 16), np.float32)
    per_direction = [t(w.shape, w), t(r.shape, r), t(b.shape, b), t(h.shape, h)]
    aux_inputs = ([t(aux.shape, aux), t(aux_w.shape, aux_w), t(aux_w.shape, aux_w)] if aux is not None
                  else [EMPTY, EMPTY, EMPTY])
    return nnref.evaluate("BIDIRECTIONAL_SEQUENCE_RNN", [t(x.shape, x), *per_direction, *per_direction, *aux_inputs,
                                                         int32(1), boolean(False), boolean(merge)])


def test_bidirectional_rnn_relations():
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 5, 8)).astype(np.float32)  # batch-major
    x[:, 0, :] = RNN_X
    w = np.asarray(RNN_W, np.float32).reshape(16, 8)
    fw, bw = bidirectional_rnn(x, w)
    np.testing.assert_allclose(fw.value[:, 0, :], [RNN_OUT, RNN_OUT], atol=1e-5)
    aux_fw, aux_bw = bidirectional_rnn(np.zeros_like(x), np.zeros_like(w), aux=x, aux_w=w)
    np.testing.assert_allclose(aux_fw.value, fw.value, atol=1e-5)
    np.testing.assert_allclose(aux_bw.value, bw.value, atol=1e-5)
    half_fw, half_bw = bidirectional_rnn(x[..., :4].copy(), w[:, :4].copy(), aux=x[..., 4:].copy(), aux_w=w[:, 4:].copy())
    np.testing.assert_allclose(half_fw.value, fw.value, atol=1e-5)
    np.testing.assert_allclose(half_bw.value, bw.value, atol=1e-5)
    rev_fw, rev_bw = bidirectional_rnn(x[:, ::-1, :].copy(), w)
    np.testing.assert_allclose(rev_fw.value, bw.value[:, ::-1, :], atol=1e-5)
    np.testing.assert_allclose(rev_bw.value, fw.value[:, ::-1, :], atol=1e-5)
    (merged,) = bidirectional_rnn(x, w, merge=True)
    np.testing.assert_allclose(merged.value, np.concatenate([fw.value, bw.value], axis=-1), atol=1e-6)
