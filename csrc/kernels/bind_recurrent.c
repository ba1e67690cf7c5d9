/*
 * kernels/bind_recurrent.c - the bindings (npu/bind.h) of RNN, LSTM, SVDF, LSH_PROJECTION and RANDOM_MULTINOMIAL.
 *
 * Each reads the NN HAL 1.2 signature (types.hal's input order; optional
 * tensors omitted or given with no elements), checks types and scalars with
 * what it is given and, once every input's shape is known, the shapes, then
 * sets the outputs' shapes.  The recurrent operations slice by batch row.
 */
#include <stdio.h>
#include <string.h>

#include "npu/bind.h"
#include "npu/errors.h"

static const int32_t FLOATS[] = {NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16};

/* -- shared reads ------------------------------------------------------------------ */

static bool absent(const struct npu_bind_call *c, uint32_t i)
{
    if (i >= c->input_count || c->in[i].omitted)
        return true;
    const struct npu_arg *a = &c->in[i];
    if (!a->has_shape)
        return false;
    for (uint32_t k = 0; k < a->t.rank; k++)
        if (a->t.dims[k] == 0)
            return true;
    return false;
}

/* The descriptor of input i, NULL when an optional input is absent. */
static const struct npu_tensor *input(const struct npu_bind_call *c, uint32_t i)
{
    return absent(c, i) ? NULL : &c->in[i].t;
}

static const struct npu_tensor *output(const struct npu_bind_call *c, uint32_t k)
{
    return &c->out[k].t;
}

/* Every input in [from, to) has a known shape (an omitted one counts). */
static bool shapes_known_in(const struct npu_bind_call *c, uint32_t from, uint32_t to)
{
    for (uint32_t i = from; i < to && i < c->input_count; i++)
        if (!c->in[i].omitted && !c->in[i].has_shape)
            return false;
    return true;
}

static bool shapes_known(const struct npu_bind_call *c, uint32_t n)
{
    return shapes_known_in(c, 0, n);
}

/* Input 0 is a float tensor; inputs listed in more (count of them) are tensors of its type
 * (an optional one, listed in optional, may be absent). */
static int float_family(struct npu_bind_call *c, int32_t *type, const uint32_t *more, uint32_t count,
                        const uint32_t *optional, uint32_t n_optional)
{
    int rc = npu_bind_tensor(c, 0, FLOATS, 2);
    if (rc != NPU_OK)
        return rc;
    *type = c->in[0].t.type;
    for (uint32_t k = 0; k < count; k++) {
        bool may_skip = false;
        for (uint32_t o = 0; o < n_optional; o++)
            may_skip |= optional[o] == more[k];
        if (may_skip && absent(c, more[k]))
            continue;
        rc = npu_bind_tensor(c, more[k], type, 1);
        if (rc != NPU_OK)
            return rc;
    }
    return NPU_OK;
}

static int outputs_of_type(struct npu_bind_call *c, int32_t type)
{
    for (uint32_t k = 0; k < c->output_count; k++)
        if (c->out[k].t.type != type)
            return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "output %u must be of input 0's type", (unsigned)k);
    return NPU_OK;
}

static void format_dims(char *buf, size_t size, uint32_t rank, const uint32_t *dims)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < rank && used < size; k++)
        used += (size_t)snprintf(buf + used, size - used, k ? ", %u" : "%u", (unsigned)dims[k]);
}

/* Input i (what) has a known shape; it must be rank dims d (a 0 accepts any size). */
static int dims_are(struct npu_bind_call *c, uint32_t i, const char *what, uint32_t rank, uint32_t d0, uint32_t d1,
                    uint32_t d2)
{
    const struct npu_tensor *t = &c->in[i].t;
    uint32_t want[3] = {d0, d1, d2};
    bool ok = t->rank == rank;
    for (uint32_t k = 0; ok && k < rank; k++)
        ok = want[k] == 0 || t->dims[k] == want[k];
    if (ok)
        return NPU_OK;
    char got[64], expected[64];
    format_dims(got, sizeof got, t->rank, t->dims);
    format_dims(expected, sizeof expected, rank, want);
    return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u (%s) must be [%s] (0: any), not [%s]", (unsigned)i, what,
                         expected, got);
}

static int activation(struct npu_bind_call *c, uint32_t i, int32_t *value, bool *known)
{
    int rc = npu_bind_i32(c, i, value, known);
    if (rc != NPU_OK || (known && !*known))
        return rc;
    if (*value != 0 && *value != 1 && *value != 2 && *value != 3 && *value != 4 && *value != 6)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "input %u (activation) %d is not NONE, RELU, RELU1, RELU6, TANH (4) or SIGMOID (6)",
                             (unsigned)i, (int)*value);
    return NPU_OK;
}

static int kernel_status(struct npu_bind_call *c, int rc)
{
    if (rc == NPU_OK)
        return rc;
    return npu_bind_fail(c, rc, "the operands do not fit together (%s)", npu_error_name(rc));
}

/* Sets output k to [d0, d1] or [d0, d1, d2]. */
static int set2(struct npu_bind_call *c, uint32_t k, uint32_t d0, uint32_t d1)
{
    uint32_t d[2] = {d0, d1};
    return npu_bind_set_shape(c, k, 2, d);
}

/* Outputs 0 and 1 are both [d0, d1]. */
static int set_both(struct npu_bind_call *c, uint32_t d0, uint32_t d1)
{
    int rc = set2(c, 0, d0, d1);
    return rc == NPU_OK ? set2(c, 1, d0, d1) : rc;
}

/* A sequence output's shape: [time, batch, width] or [batch, time, width], as the input's. */
static int set_sequence(struct npu_bind_call *c, uint32_t k, uint32_t width)
{
    uint32_t d[3] = {c->in[0].t.dims[0], c->in[0].t.dims[1], width};
    return npu_bind_set_shape(c, k, 3, d);
}

static size_t batch_rows(const struct npu_bind_call *c)
{
    return c->in[0].t.rank >= 1 ? c->in[0].t.dims[0] : 1;
}

/* 2 * every element of the weight matrices listed, per batch row and step */
static void matrix_cost(const struct npu_bind_call *c, const uint32_t *weights, uint32_t n, double rows,
                        double *flops, double *bytes)
{
    double macs = 0.0;
    for (uint32_t k = 0; k < n; k++)
        if (!absent(c, weights[k]))
            macs += (double)npu_ops_element_count(&c->in[weights[k]].t);
    *flops = 2.0 * macs * rows;
    *bytes = npu_bind_io_bytes(c);
}

/* -- RNN --------------------------------------------------------------------------- */

static int rnn_prepare(struct npu_bind_call *c)
{
    int rc = npu_bind_counts(c, 6, 6, 2);
    int32_t type, act;
    bool known;
    static const uint32_t more[] = {1, 2, 3, 4};
    if (rc == NPU_OK)
        rc = float_family(c, &type, more, 4, NULL, 0);
    if (rc == NPU_OK)
        rc = activation(c, 5, &act, &known);
    if (rc == NPU_OK)
        rc = outputs_of_type(c, type);
    if (rc != NPU_OK || !shapes_known(c, 5))
        return rc;
    const struct npu_tensor *x = &c->in[0].t, *w = &c->in[1].t;
    uint32_t batch = x->rank == 2 ? x->dims[0] : 0, units = w->rank == 2 ? w->dims[0] : 0;
    rc = dims_are(c, 0, "input", 2, 0, 0, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 1, "weights", 2, 0, x->dims[1], 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 2, "recurrent weights", 2, units, units, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 3, "bias", 1, units, 0, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 4, "hidden state", 2, batch, units, 0);
    return rc == NPU_OK ? set_both(c, batch, units) : rc;
}

static int rnn_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    int32_t act;
    int rc = activation(c, 5, &act, NULL);
    if (rc != NPU_OK)
        return rc;
    return kernel_status(c, npu_op_rnn(input(c, 0), input(c, 1), input(c, 2), input(c, 3), input(c, 4), act,
                                       output(c, 0), output(c, 1), begin, end));
}

static void rnn_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    static const uint32_t weights[] = {1, 2};
    matrix_cost(c, weights, 2, (double)batch_rows(c), flops, bytes);
}

/* -- UNIDIRECTIONAL_SEQUENCE_RNN and BIDIRECTIONAL_SEQUENCE_RNN ------------------------ */

/* The time-major flag of a sequence operation: INT32 (RNN) or BOOL. */
static int time_major(struct npu_bind_call *c, uint32_t i, bool as_bool, bool *value, bool *known)
{
    if (as_bool)
        return npu_bind_bool(c, i, value, known);
    int32_t v = 0;
    int rc = npu_bind_i32(c, i, &v, known);
    *value = v != 0;
    return rc;
}

/* The batch rows of a sequence operation whose prepare() passed (the flag's value known). */
static size_t sequence_rows(const struct npu_bind_call *c, uint32_t flag, bool as_bool)
{
    const void *data = c->in[flag].t.data;
    bool major = false;
    if (data != NULL)
        major = as_bool ? *(const uint8_t *)data != 0 : *(const int32_t *)data != 0;
    size_t rows = npu_ops_units_recurrent(&c->in[0].t, true, major);
    return rows ? rows : 1;
}

/* One direction's weights (w, r, b, h at first..first+3) against the input's sizes. */
static int rnn_direction_shapes(struct npu_bind_call *c, uint32_t first, uint32_t n_in, uint32_t batch,
                                uint32_t *units)
{
    const struct npu_tensor *w = &c->in[first].t;
    *units = w->rank == 2 ? w->dims[0] : 0;
    int rc = dims_are(c, first, "weights", 2, 0, n_in, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, first + 1, "recurrent weights", 2, *units, *units, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, first + 2, "bias", 1, *units, 0, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, first + 3, "hidden state", 2, batch, *units, 0);
    return rc;
}

static int uni_rnn_prepare(struct npu_bind_call *c)
{
    int rc = npu_bind_counts(c, 7, 7, 1);
    int32_t type, act;
    bool known, major, major_known;
    static const uint32_t more[] = {1, 2, 3, 4};
    if (rc == NPU_OK)
        rc = float_family(c, &type, more, 4, NULL, 0);
    if (rc == NPU_OK)
        rc = activation(c, 5, &act, &known);
    if (rc == NPU_OK)
        rc = time_major(c, 6, false, &major, &major_known);
    if (rc == NPU_OK)
        rc = outputs_of_type(c, type);
    if (rc != NPU_OK || !major_known || !shapes_known(c, 5))
        return rc;
    rc = dims_are(c, 0, "input", 3, 0, 0, 0);
    const struct npu_tensor *x = &c->in[0].t;
    uint32_t units;
    if (rc == NPU_OK)
        rc = rnn_direction_shapes(c, 1, x->dims[2], major ? x->dims[1] : x->dims[0], &units);
    if (rc == NPU_OK)
        rc = set_sequence(c, 0, units);
    return rc;
}

static int uni_rnn_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    int32_t act;
    bool major;
    int rc = activation(c, 5, &act, NULL);
    if (rc == NPU_OK)
        rc = time_major(c, 6, false, &major, NULL);
    if (rc != NPU_OK)
        return rc;
    struct npu_rnn_direction d = {.weights = input(c, 1), .recurrent = input(c, 2), .bias = input(c, 3),
                                  .hidden = input(c, 4)};
    return kernel_status(c, npu_op_sequence_rnn(input(c, 0), &d, act, major, output(c, 0), begin, end));
}

static size_t uni_rnn_units(const struct npu_bind_call *c)
{
    return sequence_rows(c, 6, false);
}

static void uni_rnn_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    static const uint32_t weights[] = {1, 2};
    double steps_rows = c->in[0].t.rank == 3 ? (double)c->in[0].t.dims[0] * c->in[0].t.dims[1] : 1.0;
    matrix_cost(c, weights, 2, steps_rows, flops, bytes);
}

/* A bidirectional operation's outputs: one merged, or forward and backward. */
static int set_bidirectional(struct npu_bind_call *c, bool merge, uint32_t fw, uint32_t bw)
{
    if (merge)
        return set_sequence(c, 0, fw + bw);
    int rc = set_sequence(c, 0, fw);
    return rc == NPU_OK ? set_sequence(c, 1, bw) : rc;
}

/* BIDIRECTIONAL_SEQUENCE_RNN: 0 input, 1-4 forward w/r/b/h, 5-8 backward, 9 aux input,
 * 10/11 forward/backward aux weights, 12 activation, 13 time major, 14 merge outputs. */
static int merge_outputs(struct npu_bind_call *c, uint32_t i, bool *merge, bool *known)
{
    int rc = npu_bind_bool(c, i, merge, known);
    if (rc != NPU_OK)
        return rc;
    if (c->output_count != 1 && c->output_count != 2)
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "has 1 output (merged) or 2, not %u", (unsigned)c->output_count);
    if (*known && c->output_count != (*merge ? 1u : 2u))
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "input %u (merge outputs) is %s: %u output%s, not %u",
                             (unsigned)i, *merge ? "true" : "false", *merge ? 1u : 2u, *merge ? "" : "s",
                             (unsigned)c->output_count);
    return NPU_OK;
}

/* The aux input, when present, is a sequence like the input (steps, batch). */
static int aux_sequence_shape(struct npu_bind_call *c, uint32_t i)
{
    const struct npu_tensor *x = &c->in[0].t;
    return dims_are(c, i, "aux input", 3, x->dims[0], x->dims[1], 0);
}

static int bi_rnn_prepare(struct npu_bind_call *c)
{
    if (c->input_count != 15)  /* the output count depends on merge outputs, checked there */
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "takes 15 inputs, not %u", (unsigned)c->input_count);
    int32_t type, act;
    bool known, major, major_known, merge, merge_known;
    static const uint32_t more[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    static const uint32_t optional[] = {9, 10, 11};
    int rc = float_family(c, &type, more, 11, optional, 3);
    if (rc == NPU_OK)
        rc = activation(c, 12, &act, &known);
    if (rc == NPU_OK)
        rc = npu_bind_bool(c, 13, &major, &major_known);
    if (rc == NPU_OK)
        rc = merge_outputs(c, 14, &merge, &merge_known);
    if (rc == NPU_OK)
        rc = outputs_of_type(c, type);
    if (rc != NPU_OK || !major_known || !merge_known || !shapes_known(c, 12))
        return rc;
    bool aux = !absent(c, 9), fw_aux = !absent(c, 10), bw_aux = !absent(c, 11);
    if (fw_aux != bw_aux || (fw_aux && !aux))
        return npu_bind_fail(c, NPU_E_BAD_OPERATION,
                             "inputs 10 and 11 (aux weights) are both given, with input 9 (aux input), or both omitted");
    rc = dims_are(c, 0, "input", 3, 0, 0, 0);
    if (rc == NPU_OK && aux)
        rc = aux_sequence_shape(c, 9);
    if (rc != NPU_OK)
        return rc;
    const struct npu_tensor *x = &c->in[0].t;
    uint32_t batch = major ? x->dims[1] : x->dims[0], fw_units, bw_units;
    /* without aux weights, the aux input is the backward direction's input (parallel linking) */
    uint32_t bw_in = aux && !fw_aux ? c->in[9].t.dims[2] : x->dims[2];
    rc = rnn_direction_shapes(c, 1, x->dims[2], batch, &fw_units);
    if (rc == NPU_OK)
        rc = rnn_direction_shapes(c, 5, bw_in, batch, &bw_units);
    if (rc == NPU_OK && fw_aux)
        rc = dims_are(c, 10, "forward aux weights", 2, fw_units, c->in[9].t.dims[2], 0);
    if (rc == NPU_OK && bw_aux)
        rc = dims_are(c, 11, "backward aux weights", 2, bw_units, c->in[9].t.dims[2], 0);
    return rc == NPU_OK ? set_bidirectional(c, merge, fw_units, bw_units) : rc;
}

static int bi_rnn_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    int32_t act;
    bool major, merge;
    int rc = activation(c, 12, &act, NULL);
    if (rc == NPU_OK)
        rc = npu_bind_bool(c, 13, &major, NULL);
    if (rc == NPU_OK)
        rc = npu_bind_bool(c, 14, &merge, NULL);
    if (rc != NPU_OK)
        return rc;
    const struct npu_tensor *aux = input(c, 9), *bw_input = input(c, 0);
    bool parallel = aux != NULL && absent(c, 10);
    if (parallel) {
        bw_input = aux;
        aux = NULL;
    }
    struct npu_rnn_direction fw = {input(c, 1), input(c, 2), input(c, 3), input(c, 4), aux, input(c, 10), false, 0};
    struct npu_rnn_direction bw = {input(c, 5), input(c, 6), input(c, 7), input(c, 8), aux, input(c, 11), true, 0};
    if (merge)
        bw.column = c->in[1].t.dims[0];
    rc = npu_op_sequence_rnn(input(c, 0), &fw, act, major, output(c, 0), begin, end);
    if (rc == NPU_OK)
        rc = npu_op_sequence_rnn(bw_input, &bw, act, major, output(c, merge ? 0 : 1), begin, end);
    return kernel_status(c, rc);
}

static size_t bi_rnn_units(const struct npu_bind_call *c)
{
    return sequence_rows(c, 13, true);
}

static void bi_rnn_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    static const uint32_t weights[] = {1, 2, 5, 6, 10, 11};
    double steps_rows = c->in[0].t.rank == 3 ? (double)c->in[0].t.dims[0] * c->in[0].t.dims[1] : 1.0;
    matrix_cost(c, weights, 6, steps_rows, flops, bytes);
}

/* -- SVDF -------------------------------------------------------------------------- */

static int svdf_prepare(struct npu_bind_call *c)
{
    int rc = npu_bind_counts(c, 7, 7, 2);
    int32_t type, rank, act;
    bool rank_known, known;
    static const uint32_t more[] = {1, 2, 3, 4}, optional[] = {3};
    if (rc == NPU_OK)
        rc = float_family(c, &type, more, 4, optional, 1);
    if (rc == NPU_OK)
        rc = npu_bind_i32(c, 5, &rank, &rank_known);
    if (rc == NPU_OK)
        rc = activation(c, 6, &act, &known);
    if (rc == NPU_OK)
        rc = outputs_of_type(c, type);
    if (rc != NPU_OK)
        return rc;
    if (rank_known && rank < 1)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 5 (rank) must be at least 1, not %d", (int)rank);
    if (!rank_known || !shapes_known(c, 5))
        return NPU_OK;
    const struct npu_tensor *x = &c->in[0].t, *wf = &c->in[1].t, *wt = &c->in[2].t;
    rc = dims_are(c, 0, "input", 2, 0, 0, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 1, "feature weights", 2, 0, x->dims[1], 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 2, "time weights", 2, wf->dims[0], 0, 0);
    if (rc != NPU_OK)
        return rc;
    uint32_t filters = wf->dims[0], memory = wt->dims[1], batch = x->dims[0];
    if (filters % (uint32_t)rank != 0)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 5 (rank) %d does not divide the %u filters of input 1",
                             (int)rank, (unsigned)filters);
    uint32_t units = filters / (uint32_t)rank;
    if ((uint64_t)filters * memory > UINT32_MAX)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 2 (time weights) is too large");
    if (!absent(c, 3))
        rc = dims_are(c, 3, "bias", 1, units, 0, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 4, "state", 2, batch, filters * memory, 0);
    if (rc == NPU_OK)
        rc = set2(c, 0, batch, filters * memory);
    if (rc == NPU_OK)
        rc = set2(c, 1, batch, units);
    return rc;
}

static int svdf_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    int32_t rank, act;
    int rc = npu_bind_i32(c, 5, &rank, NULL);
    if (rc == NPU_OK)
        rc = activation(c, 6, &act, NULL);
    if (rc != NPU_OK)
        return rc;
    return kernel_status(c, npu_op_svdf(input(c, 0), input(c, 1), input(c, 2), input(c, 3), input(c, 4), rank, act,
                                        output(c, 0), output(c, 1), begin, end));
}

static void svdf_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    static const uint32_t weights[] = {1, 2};
    matrix_cost(c, weights, 2, (double)batch_rows(c), flops, bytes);
}

/* -- LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM ---------------------
 * One direction's 17 tensors from first: input-to (i, f, c, o), recurrent-to (i, f, c, o),
 * cell-to (i, f, o), biases (i, f, c, o), projection weights and bias; the layer norm
 * weights (i, f, c, o) and aux weights (i, f, c, o) where the operation has them. */

static const char *const LSTM_NAMES[17] = {
    "input-to-input weights", "input-to-forget weights", "input-to-cell weights", "input-to-output weights",
    "recurrent-to-input weights", "recurrent-to-forget weights", "recurrent-to-cell weights",
    "recurrent-to-output weights", "cell-to-input weights", "cell-to-forget weights", "cell-to-output weights",
    "input gate bias", "forget gate bias", "cell gate bias", "output gate bias", "projection weights",
    "projection bias",
};

struct lstm_layout {
    uint32_t first, layer_norm, aux;  /* layer_norm/aux: index of the first of four, or 0 for none */
};

static void lstm_weights(const struct npu_bind_call *c, const struct lstm_layout *l, struct npu_lstm_weights *w)
{
    memset(w, 0, sizeof *w);
    for (uint32_t g = 0; g < 4; g++) {
        w->input_to[g] = input(c, l->first + g);
        w->recurrent_to[g] = input(c, l->first + 4 + g);
        w->bias[g] = input(c, l->first + 11 + g);
        if (l->layer_norm)
            w->layer_norm[g] = input(c, l->layer_norm + g);
        if (l->aux)
            w->aux_to[g] = input(c, l->aux + g);
    }
    for (uint32_t g = 0; g < 3; g++)
        w->peephole[g] = input(c, l->first + 8 + g);
    w->projection = input(c, l->first + 15);
    w->projection_bias = input(c, l->first + 16);
}

/* The tensors of one direction are of the input's type, the optional ones absent or so. */
static int lstm_types(struct npu_bind_call *c, const struct lstm_layout *l, int32_t type)
{
    static const bool REQUIRED[17] = {false, true, true, true, false, true, true, true, false, false, false,
                                      false, true, true, true, false, false};
    for (uint32_t k = 0; k < 17; k++) {
        if (!REQUIRED[k] && absent(c, l->first + k))
            continue;
        int rc = npu_bind_tensor(c, l->first + k, &type, 1);
        if (rc != NPU_OK)
            return rc;
    }
    for (uint32_t g = 0; g < 4; g++) {
        uint32_t extra[2] = {l->layer_norm ? l->layer_norm + g : 0, l->aux ? l->aux + g : 0};
        for (int e = 0; e < 2; e++) {
            if (extra[e] == 0 || absent(c, extra[e]))
                continue;
            int rc = npu_bind_tensor(c, extra[e], &type, 1);
            if (rc != NPU_OK)
                return rc;
        }
    }
    return NPU_OK;
}

/* Shapes of one direction (shapes known): n_in the input's width, n_aux the aux input's (0:
 * none); *n_cell and *n_out its sizes.  Names the input that does not fit. */
static int lstm_shapes(struct npu_bind_call *c, const struct lstm_layout *l, uint32_t n_in, uint32_t n_aux,
                       uint32_t *n_cell, uint32_t *n_out, bool *cifg)
{
    uint32_t f = l->first;
    int rc = dims_are(c, f + 1, LSTM_NAMES[1], 2, 0, n_in, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, f + 5, LSTM_NAMES[5], 2, c->in[f + 1].t.dims[0], 0, 0);
    if (rc != NPU_OK)
        return rc;
    uint32_t cells = c->in[f + 1].t.dims[0], out = c->in[f + 5].t.dims[1];
    *cifg = absent(c, f);
    bool peephole = !absent(c, f + 9), layer_norm = l->layer_norm && !absent(c, l->layer_norm + 1);
    bool projection = !absent(c, f + 15);
    for (uint32_t g = 0; g < 4 && rc == NPU_OK; g++) {
        bool used = g != 0 || !*cifg;
        struct {
            uint32_t at;
            bool want;
            uint32_t rank, d1;
            const char *name;
        } items[] = {
            {f + g, used, 2, n_in, LSTM_NAMES[g]},
            {f + 4 + g, used, 2, out, LSTM_NAMES[4 + g]},
            {f + 11 + g, used, 1, 0, LSTM_NAMES[11 + g]},
            {l->layer_norm ? l->layer_norm + g : 0, used && layer_norm, 1, 0, "layer norm weights"},
            {l->aux ? l->aux + g : 0, used && n_aux > 0, 2, n_aux, "aux weights"},
        };
        for (size_t k = 0; k < sizeof items / sizeof items[0] && rc == NPU_OK; k++) {
            if (items[k].at == 0 && !items[k].want)
                continue;
            bool given = items[k].at != 0 && !absent(c, items[k].at);
            if (given != items[k].want)
                return npu_bind_fail(c, NPU_E_BAD_OPERATION, "input %u (%s) must be %s here", (unsigned)items[k].at,
                                     items[k].name, items[k].want ? "given" : "omitted");
            if (given)
                rc = dims_are(c, items[k].at, items[k].name, items[k].rank, cells, items[k].d1, 0);
        }
    }
    for (uint32_t g = 0; g < 3 && rc == NPU_OK; g++) {
        bool want = peephole && (g != 0 || !*cifg);
        if (absent(c, f + 8 + g) == want)
            return npu_bind_fail(c, NPU_E_BAD_OPERATION, "input %u (%s) must be %s here", (unsigned)(f + 8 + g),
                                 LSTM_NAMES[8 + g], want ? "given" : "omitted");
        if (want)
            rc = dims_are(c, f + 8 + g, LSTM_NAMES[8 + g], 1, cells, 0, 0);
    }
    if (rc == NPU_OK && projection)
        rc = dims_are(c, f + 15, LSTM_NAMES[15], 2, out, cells, 0);
    if (rc == NPU_OK && !absent(c, f + 16)) {
        if (!projection)
            return npu_bind_fail(c, NPU_E_BAD_OPERATION, "input %u (projection bias) needs projection weights",
                                 (unsigned)(f + 16));
        rc = dims_are(c, f + 16, LSTM_NAMES[16], 1, out, 0, 0);
    }
    if (rc == NPU_OK && !projection && out != cells)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE,
                             "input %u (recurrent-to-forget weights) must be [%u, %u] without projection",
                             (unsigned)(f + 5), (unsigned)cells, (unsigned)cells);
    *n_cell = cells;
    *n_out = out;
    return rc;
}

/* activation at i, the clips at i+1 and i+2 (FLOAT32, or FLOAT16 for float16 tensors) */
static int lstm_params(struct npu_bind_call *c, uint32_t i, int32_t type, struct npu_lstm_params *p, bool need)
{
    int32_t scalar = type == NPU_OPERAND_TENSOR_FLOAT16 ? NPU_OPERAND_FLOAT16 : NPU_OPERAND_FLOAT32;
    bool known[3];
    int rc = activation(c, i, &p->activation, need ? NULL : &known[0]);
    if (rc == NPU_OK)
        rc = npu_bind_f32(c, i + 1, scalar, &p->cell_clip, need ? NULL : &known[1]);
    if (rc == NPU_OK)
        rc = npu_bind_f32(c, i + 2, scalar, &p->proj_clip, need ? NULL : &known[2]);
    if (rc != NPU_OK)
        return rc;
    for (uint32_t k = 1; k < 3; k++) {
        float v = k == 1 ? p->cell_clip : p->proj_clip;
        if ((need || known[k]) && !(v >= 0.0f))
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (%s clip) must not be negative", (unsigned)(i + k),
                                 k == 1 ? "cell" : "projection");
    }
    return NPU_OK;
}

static const struct lstm_layout LSTM_PLAIN = {1, 0, 0}, LSTM_NORM = {1, 23, 0};

/* LSTM and UNIDIRECTIONAL_SEQUENCE_LSTM: the 17 tensors, the states at 18 and 19, the
 * activation and clips at 20-22, the outputs: all of input 0's type. */
static int lstm_signature(struct npu_bind_call *c, const struct lstm_layout *l, int32_t *type)
{
    struct npu_lstm_params p;
    int rc = float_family(c, type, (const uint32_t[]){18, 19}, 2, NULL, 0);
    if (rc == NPU_OK)
        rc = lstm_types(c, l, *type);
    if (rc == NPU_OK)
        rc = lstm_params(c, 20, *type, &p, false);
    return rc == NPU_OK ? outputs_of_type(c, *type) : rc;
}

/* The state inputs at 18 and 19 (shapes known). */
static int lstm_states(struct npu_bind_call *c, uint32_t batch, uint32_t out, uint32_t cells)
{
    int rc = dims_are(c, 18, "output state", 2, batch, out, 0);
    return rc == NPU_OK ? dims_are(c, 19, "cell state", 2, batch, cells, 0) : rc;
}

static int lstm_prepare(struct npu_bind_call *c)
{
    int rc = npu_bind_counts(c, 23, 27, 4);
    int32_t type;
    const struct lstm_layout *l = c->input_count == 27 ? &LSTM_NORM : &LSTM_PLAIN;
    if (rc == NPU_OK)
        rc = lstm_signature(c, l, &type);
    if (rc != NPU_OK || !shapes_known(c, 20) || !shapes_known_in(c, 23, c->input_count))
        return rc;
    rc = dims_are(c, 0, "input", 2, 0, 0, 0);
    uint32_t cells, out, batch = c->in[0].t.dims[0];
    bool cifg;
    if (rc == NPU_OK)
        rc = lstm_shapes(c, l, c->in[0].t.dims[1], 0, &cells, &out, &cifg);
    if (rc == NPU_OK)
        rc = lstm_states(c, batch, out, cells);
    if (rc == NPU_OK)
        rc = set2(c, 0, batch, cells * (cifg ? 3 : 4));
    if (rc == NPU_OK)
        rc = set2(c, 1, batch, out);
    if (rc == NPU_OK)
        rc = set2(c, 2, batch, cells);
    if (rc == NPU_OK)
        rc = set2(c, 3, batch, out);
    return rc;
}

static int lstm_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    struct npu_lstm_params p;
    int rc = lstm_params(c, 20, c->in[0].t.type, &p, true);
    if (rc != NPU_OK)
        return rc;
    struct npu_lstm_weights w;
    lstm_weights(c, c->input_count == 27 ? &LSTM_NORM : &LSTM_PLAIN, &w);
    return kernel_status(c, npu_op_lstm(input(c, 0), &w, input(c, 18), input(c, 19), &p, output(c, 0),
                                        output(c, 1), output(c, 2), output(c, 3), begin, end));
}

static const uint32_t LSTM_MATRICES[] = {1, 2, 3, 4, 5, 6, 7, 8, 16};

static void lstm_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    matrix_cost(c, LSTM_MATRICES, 9, (double)batch_rows(c), flops, bytes);
}

/* UNIDIRECTIONAL_SEQUENCE_LSTM, new in 1.2, always has the layer norm weights' places
 * (24-27, omitted without layer norm): Android 10 takes 28 inputs, never 24. */
static const struct lstm_layout SEQ_NORM = {1, 24, 0};

static int uni_lstm_prepare(struct npu_bind_call *c)
{
    int rc = npu_bind_counts(c, 28, 28, 1);
    int32_t type;
    bool major, major_known;
    const struct lstm_layout *l = &SEQ_NORM;
    if (rc == NPU_OK)
        rc = lstm_signature(c, l, &type);
    if (rc == NPU_OK)
        rc = npu_bind_bool(c, 23, &major, &major_known);
    if (rc != NPU_OK || !major_known || !shapes_known(c, 20) || !shapes_known_in(c, 24, c->input_count))
        return rc;
    rc = dims_are(c, 0, "input", 3, 0, 0, 0);
    if (rc != NPU_OK)
        return rc;
    const struct npu_tensor *x = &c->in[0].t;
    uint32_t cells, out, batch = major ? x->dims[1] : x->dims[0];
    bool cifg;
    rc = lstm_shapes(c, l, x->dims[2], 0, &cells, &out, &cifg);
    if (rc == NPU_OK)
        rc = lstm_states(c, batch, out, cells);
    if (rc == NPU_OK)
        rc = set_sequence(c, 0, out);
    return rc;
}

static int uni_lstm_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    struct npu_lstm_params p;
    bool major;
    int rc = lstm_params(c, 20, c->in[0].t.type, &p, true);
    if (rc == NPU_OK)
        rc = npu_bind_bool(c, 23, &major, NULL);
    if (rc != NPU_OK)
        return rc;
    struct npu_lstm_weights w;
    lstm_weights(c, &SEQ_NORM, &w);
    struct npu_lstm_direction d = {&w, input(c, 18), input(c, 19), NULL, false, 0};
    return kernel_status(c, npu_op_sequence_lstm(input(c, 0), &d, &p, major, output(c, 0), begin, end));
}

static size_t uni_lstm_units(const struct npu_bind_call *c)
{
    return sequence_rows(c, 23, true);
}

static void uni_lstm_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    double steps_rows = c->in[0].t.rank == 3 ? (double)c->in[0].t.dims[0] * c->in[0].t.dims[1] : 1.0;
    matrix_cost(c, LSTM_MATRICES, 9, steps_rows, flops, bytes);
}

/* BIDIRECTIONAL_SEQUENCE_LSTM: 0 input, 1-17 forward, 18-34 backward, 35-38 forward
 * output/cell state, backward output/cell state, 39 aux input, 40-43 forward aux weights,
 * 44-47 backward aux weights, 48 activation, 49-50 clips, 51 merge outputs, 52 time major,
 * 53-56 forward layer norm weights, 57-60 backward. */
static void bi_lstm_layouts(bool aux_weights, struct lstm_layout *fw,
                            struct lstm_layout *bw)
{
    *fw = (struct lstm_layout){1, 53, aux_weights ? 40 : 0};
    *bw = (struct lstm_layout){18, 57, aux_weights ? 44 : 0};
}

static bool any_given(const struct npu_bind_call *c, uint32_t from, uint32_t count)
{
    for (uint32_t i = from; i < from + count; i++)
        if (!absent(c, i))
            return true;
    return false;
}

static int bi_lstm_prepare(struct npu_bind_call *c)
{
    if (c->input_count != 61)  /* Android 10 takes all 61, the layer norm weights omitted or not */
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "takes 61 inputs, not %u", (unsigned)c->input_count);
    int32_t type;
    struct npu_lstm_params p;
    bool major, major_known, merge, merge_known;
    int rc = float_family(c, &type, (const uint32_t[]){35, 36, 37, 38, 39}, 5, (const uint32_t[]){39}, 1);
    struct lstm_layout fw, bw;
    bi_lstm_layouts(true, &fw, &bw);
    if (rc == NPU_OK)
        rc = lstm_types(c, &fw, type);
    if (rc == NPU_OK)
        rc = lstm_types(c, &bw, type);
    if (rc == NPU_OK)
        rc = lstm_params(c, 48, type, &p, false);
    if (rc == NPU_OK)
        rc = merge_outputs(c, 51, &merge, &merge_known);
    if (rc == NPU_OK)
        rc = npu_bind_bool(c, 52, &major, &major_known);
    if (rc == NPU_OK)
        rc = outputs_of_type(c, type);
    if (rc != NPU_OK || !major_known || !merge_known || !shapes_known(c, 48) || !shapes_known_in(c, 53, 61))
        return rc;
    bool aux = !absent(c, 39), fw_aux = any_given(c, 40, 4), bw_aux = any_given(c, 44, 4);
    if (fw_aux != bw_aux || (fw_aux && !aux))
        return npu_bind_fail(c, NPU_E_BAD_OPERATION,
                             "inputs 40-47 (aux weights) are given for both directions, with input 39 (aux input), or omitted");
    bi_lstm_layouts(fw_aux, &fw, &bw);
    rc = dims_are(c, 0, "input", 3, 0, 0, 0);
    if (rc == NPU_OK && aux)
        rc = aux_sequence_shape(c, 39);
    if (rc != NPU_OK)
        return rc;
    const struct npu_tensor *x = &c->in[0].t;
    uint32_t batch = major ? x->dims[1] : x->dims[0], n_aux = aux ? c->in[39].t.dims[2] : 0;
    bool parallel = aux && !fw_aux, cifg;
    uint32_t fw_cells, fw_out, bw_cells, bw_out;
    rc = lstm_shapes(c, &fw, x->dims[2], parallel ? 0 : n_aux, &fw_cells, &fw_out, &cifg);
    if (rc == NPU_OK)
        rc = lstm_shapes(c, &bw, parallel ? n_aux : x->dims[2], parallel ? 0 : n_aux, &bw_cells, &bw_out, &cifg);
    if (rc == NPU_OK)
        rc = dims_are(c, 35, "forward output state", 2, batch, fw_out, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 36, "forward cell state", 2, batch, fw_cells, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 37, "backward output state", 2, batch, bw_out, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 38, "backward cell state", 2, batch, bw_cells, 0);
    return rc == NPU_OK ? set_bidirectional(c, merge, fw_out, bw_out) : rc;
}

static int bi_lstm_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    struct npu_lstm_params p;
    bool major, merge;
    int rc = lstm_params(c, 48, c->in[0].t.type, &p, true);
    if (rc == NPU_OK)
        rc = npu_bind_bool(c, 51, &merge, NULL);
    if (rc == NPU_OK)
        rc = npu_bind_bool(c, 52, &major, NULL);
    if (rc != NPU_OK)
        return rc;
    bool fw_aux = any_given(c, 40, 4);
    const struct npu_tensor *aux = input(c, 39), *bw_input = input(c, 0);
    if (aux != NULL && !fw_aux) {  /* parallel linking: the aux input is the backward input */
        bw_input = aux;
        aux = NULL;
    }
    struct lstm_layout fl, bl;
    bi_lstm_layouts(fw_aux, &fl, &bl);
    struct npu_lstm_weights fw_w, bw_w;
    lstm_weights(c, &fl, &fw_w);
    lstm_weights(c, &bl, &bw_w);
    struct npu_lstm_direction fw = {&fw_w, input(c, 35), input(c, 36), aux, false, 0};
    struct npu_lstm_direction bw = {&bw_w, input(c, 37), input(c, 38), aux, true, 0};
    if (merge)
        bw.column = c->in[35].t.dims[1];
    rc = npu_op_sequence_lstm(input(c, 0), &fw, &p, major, output(c, 0), begin, end);
    if (rc == NPU_OK)
        rc = npu_op_sequence_lstm(bw_input, &bw, &p, major, output(c, merge ? 0 : 1), begin, end);
    return kernel_status(c, rc);
}

static size_t bi_lstm_units(const struct npu_bind_call *c)
{
    return sequence_rows(c, 52, true);
}

static void bi_lstm_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    static const uint32_t matrices[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 18, 19, 20, 21, 22, 23, 24, 25, 33,
                                        40, 41, 42, 43, 44, 45, 46, 47};
    double steps_rows = c->in[0].t.rank == 3 ? (double)c->in[0].t.dims[0] * c->in[0].t.dims[1] : 1.0;
    matrix_cost(c, matrices, sizeof matrices / sizeof matrices[0], steps_rows, flops, bytes);
}

/* -- QUANTIZED_16BIT_LSTM ------------------------------------------------------------- */

static int q16_quant(struct npu_bind_call *c, const char *what, const struct npu_tensor *t, bool input_side,
                     uint32_t i)
{
    if (t->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM && (t->scale != 1.0f / 128.0f || t->zero_point != 128))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "%s %u (%s) must have scale 1/128 and zero point 128",
                             input_side ? "input" : "output", (unsigned)i, what);
    if (t->type == NPU_OPERAND_TENSOR_QUANT16_SYMM && (t->scale != 1.0f / 2048.0f || t->zero_point != 0))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "%s %u (%s) must have scale 1/2048 and zero point 0",
                             input_side ? "input" : "output", (unsigned)i, what);
    return NPU_OK;
}

static int qlstm_prepare(struct npu_bind_call *c)
{
    static const int32_t Q8 = NPU_OPERAND_TENSOR_QUANT8_ASYMM, I32 = NPU_OPERAND_TENSOR_INT32,
                         Q16 = NPU_OPERAND_TENSOR_QUANT16_SYMM;
    int rc = npu_bind_counts(c, 15, 15, 2);
    for (uint32_t i = 0; i < 15 && rc == NPU_OK; i++)
        rc = npu_bind_tensor(c, i, i >= 9 && i <= 12 ? &I32 : (i == 13 ? &Q16 : &Q8), 1);
    if (rc != NPU_OK)
        return rc;
    if (c->out[0].t.type != Q16 || c->out[1].t.type != Q8)
        return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE,
                             "outputs are the cell state (TENSOR_QUANT16_SYMM) and the output (TENSOR_QUANT8_ASYMM)");
    rc = q16_quant(c, "input", &c->in[0].t, true, 0);
    if (rc == NPU_OK)
        rc = q16_quant(c, "previous cell state", &c->in[13].t, true, 13);
    if (rc == NPU_OK)
        rc = q16_quant(c, "previous output", &c->in[14].t, true, 14);
    if (rc == NPU_OK)
        rc = q16_quant(c, "cell state", &c->out[0].t, false, 0);
    if (rc == NPU_OK)
        rc = q16_quant(c, "output", &c->out[1].t, false, 1);
    if (rc != NPU_OK)
        return rc;
    const struct npu_tensor *w0 = &c->in[1].t;
    for (uint32_t i = 2; i <= 8; i++)
        if (c->in[i].t.scale != w0->scale || c->in[i].t.zero_point != w0->zero_point)
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u's scale and zero point must be input 1's (one for all weights)",
                                 (unsigned)i);
    for (uint32_t i = 9; i <= 12; i++)
        if ((double)c->in[i].t.scale != (double)w0->scale / 128.0 || c->in[i].t.zero_point != 0)
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (a bias) must have the weights' scale / 128 and zero point 0",
                                 (unsigned)i);
    if (!shapes_known(c, 15))
        return NPU_OK;
    rc = dims_are(c, 0, "input", 2, 0, 0, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 14, "previous output", 2, c->in[0].t.dims[0], 0, 0);
    if (rc != NPU_OK)
        return rc;
    uint32_t batch = c->in[0].t.dims[0], n_in = c->in[0].t.dims[1], n_out = c->in[14].t.dims[1];
    for (uint32_t i = 1; i <= 8 && rc == NPU_OK; i++)
        rc = dims_are(c, i, i <= 4 ? "input weights" : "recurrent weights", 2, n_out, i <= 4 ? n_in : n_out, 0);
    for (uint32_t i = 9; i <= 12 && rc == NPU_OK; i++)
        rc = dims_are(c, i, "bias", 1, n_out, 0, 0);
    if (rc == NPU_OK)
        rc = dims_are(c, 13, "previous cell state", 2, batch, n_out, 0);
    return rc == NPU_OK ? set_both(c, batch, n_out) : rc;
}

static int qlstm_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    const struct npu_tensor *weights[8], *biases[4];
    for (uint32_t k = 0; k < 8; k++)
        weights[k] = input(c, 1 + k);
    for (uint32_t k = 0; k < 4; k++)
        biases[k] = input(c, 9 + k);
    return kernel_status(c, npu_op_quantized_16bit_lstm(input(c, 0), weights, biases, input(c, 13), input(c, 14),
                                                        output(c, 0), output(c, 1), begin, end));
}

static void qlstm_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    static const uint32_t weights[] = {1, 2, 3, 4, 5, 6, 7, 8};
    matrix_cost(c, weights, 8, (double)batch_rows(c), flops, bytes);
}

static size_t rows_units(const struct npu_bind_call *c)
{
    return batch_rows(c);
}

/* -- LSH_PROJECTION ------------------------------------------------------------------ */

static int lsh_prepare(struct npu_bind_call *c)
{
    static const int32_t LOOKUP[] = {NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_INT32,
                                     NPU_OPERAND_TENSOR_QUANT8_ASYMM};
    int rc = npu_bind_counts(c, 4, 4, 1);
    int32_t type, kind;
    bool known;
    if (rc == NPU_OK)
        rc = float_family(c, &type, (const uint32_t[]){2}, 1, (const uint32_t[]){2}, 1);
    if (rc == NPU_OK)
        rc = npu_bind_tensor(c, 1, LOOKUP, 4);
    if (rc == NPU_OK)
        rc = npu_bind_i32(c, 3, &kind, &known);
    if (rc != NPU_OK)
        return rc;
    if (known && (kind < 1 || kind > 3))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "input 3 (type) %d is not SPARSE_DEPRECATED (1), DENSE (2) or SPARSE (3)", (int)kind);
    if (c->out[0].t.type != NPU_OPERAND_TENSOR_INT32)
        return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "output 0 must be TENSOR_INT32");
    if (!known || !shapes_known(c, 3))
        return NPU_OK;
    rc = dims_are(c, 0, "hash functions", 2, 0, 0, 0);
    if (rc != NPU_OK)
        return rc;
    uint32_t functions = c->in[0].t.dims[0], bits = c->in[0].t.dims[1];
    if (bits > 32)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 0 (hash functions) has %u bits per function, at most 32",
                             (unsigned)bits);
    if (c->in[1].t.rank < 1)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (input) must have at least one dimension");
    if (!absent(c, 2))
        rc = dims_are(c, 2, "weight", 1, c->in[1].t.dims[0], 0, 0);
    if (rc != NPU_OK)
        return rc;
    uint32_t n = kind == 2 ? functions * bits : functions;
    return npu_bind_set_shape(c, 0, 1, &n);
}

static int lsh_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin;
    (void)end;
    int32_t kind;
    int rc = npu_bind_i32(c, 3, &kind, NULL);
    if (rc != NPU_OK)
        return rc;
    return kernel_status(c, npu_op_lsh_projection(input(c, 0), input(c, 1), input(c, 2), kind, output(c, 0)));
}

static void lsh_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    /* one hash of a (4 + row) byte key per bit and input row, about a FLOP per byte */
    double hashes = (double)npu_ops_element_count(&c->in[0].t);
    *flops = hashes * (double)npu_ops_byte_size(&c->in[1].t);
    *bytes = npu_bind_io_bytes(c);
}

/* -- RANDOM_MULTINOMIAL ---------------------------------------------------------------- */

static int multinomial_prepare(struct npu_bind_call *c)
{
    static const int32_t I32 = NPU_OPERAND_TENSOR_INT32;
    int rc = npu_bind_counts(c, 3, 3, 1);
    int32_t type, samples;
    bool known;
    if (rc == NPU_OK)
        rc = float_family(c, &type, NULL, 0, NULL, 0);
    if (rc == NPU_OK)
        rc = npu_bind_i32(c, 1, &samples, &known);
    if (rc == NPU_OK)
        rc = npu_bind_tensor(c, 2, &I32, 1);
    if (rc != NPU_OK)
        return rc;
    if (known && samples < 1)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (sample count) must be at least 1, not %d", (int)samples);
    if (c->out[0].t.type != I32)
        return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "output 0 must be TENSOR_INT32");
    if (c->in[2].has_shape) {
        rc = dims_are(c, 2, "seeds", 1, 2, 0, 0);
        if (rc != NPU_OK)
            return rc;
    }
    if (!known || !c->in[0].has_shape)
        return NPU_OK;
    rc = dims_are(c, 0, "logits", 2, 0, 0, 0);
    return rc == NPU_OK ? set2(c, 0, c->in[0].t.dims[0], (uint32_t)samples) : rc;
}

static int multinomial_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin;
    (void)end;
    int32_t samples;
    int rc = npu_bind_i32(c, 1, &samples, NULL);
    if (rc != NPU_OK)
        return rc;
    const struct npu_tensor *s = &c->in[2].t;
    const int32_t *seeds = s->data;
    if (seeds == NULL || s->rank != 1 || s->dims[0] != 2)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 2 (seeds) must be two known int32 values");
    return kernel_status(c, npu_op_random_multinomial(input(c, 0), samples, seeds[0], seeds[1], output(c, 0)));
}

const struct npu_op_def npu_bind_recurrent[] = {
    {NPU_OP_RNN, "RNN", rnn_prepare, rows_units, rnn_run, rnn_cost},
    {NPU_OP_UNIDIRECTIONAL_SEQUENCE_RNN, "UNIDIRECTIONAL_SEQUENCE_RNN", uni_rnn_prepare, uni_rnn_units, uni_rnn_run,
     uni_rnn_cost},
    {NPU_OP_BIDIRECTIONAL_SEQUENCE_RNN, "BIDIRECTIONAL_SEQUENCE_RNN", bi_rnn_prepare, bi_rnn_units, bi_rnn_run,
     bi_rnn_cost},
    {NPU_OP_SVDF, "SVDF", svdf_prepare, rows_units, svdf_run, svdf_cost},
    {NPU_OP_LSTM, "LSTM", lstm_prepare, rows_units, lstm_run, lstm_cost},
    {NPU_OP_UNIDIRECTIONAL_SEQUENCE_LSTM, "UNIDIRECTIONAL_SEQUENCE_LSTM", uni_lstm_prepare, uni_lstm_units,
     uni_lstm_run, uni_lstm_cost},
    {NPU_OP_BIDIRECTIONAL_SEQUENCE_LSTM, "BIDIRECTIONAL_SEQUENCE_LSTM", bi_lstm_prepare, bi_lstm_units, bi_lstm_run,
     bi_lstm_cost},
    {NPU_OP_QUANTIZED_16BIT_LSTM, "QUANTIZED_16BIT_LSTM", qlstm_prepare, rows_units, qlstm_run, qlstm_cost},
    {NPU_OP_LSH_PROJECTION, "LSH_PROJECTION", lsh_prepare, NULL, lsh_run, lsh_cost},
    {NPU_OP_RANDOM_MULTINOMIAL, "RANDOM_MULTINOMIAL", multinomial_prepare, NULL, multinomial_run, NULL},
    {.type = -1},
};
