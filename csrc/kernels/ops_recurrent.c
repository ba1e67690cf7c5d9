/*
 * Recurrent operations: RNN and its sequence forms, SVDF, LSTM (CIFG,
 * peephole, projection, clipping, layer normalization, auxiliary input) and
 * its sequence forms, QUANTIZED_16BIT_LSTM in Android's 16-bit fixed point,
 * LSH_PROJECTION (FarmHash Fingerprint64) and RANDOM_MULTINOMIAL (Philox).
 *
 * The float operations widen float16 tensors to float32 (as Android's
 * reference does), accumulate dot products in double and keep states in
 * float.  Batch rows recur independently, so a range of batch rows is the
 * unit of every sliced operation here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ops_internal.h"

/* -- shared pieces -------------------------------------------------------------- */

/* The widened copies and scratch buffers of one call, freed together. */
enum { ARENA_SLOTS = 96 };
struct arena {
    void *p[ARENA_SLOTS];
    unsigned n;
    bool failed;
};

static void *arena_keep(struct arena *a, void *p)
{
    if (p == NULL || a->n == ARENA_SLOTS) {
        free(p);
        a->failed = true;
        return NULL;
    }
    a->p[a->n++] = p;
    return p;
}

static void arena_free(struct arena *a)
{
    for (unsigned i = 0; i < a->n; i++)
        free(a->p[i]);
    a->n = 0;
}

/* t's values as float32 (t itself when it is float32); NULL for a NULL t. */
static const float *widen(struct arena *a, const struct npu_tensor *t)
{
    if (t == NULL)
        return NULL;
    if (t->type == NPU_OPERAND_TENSOR_FLOAT32)
        return t->data;
    size_t n = npu_ops_element_count(t);
    float *f = arena_keep(a, malloc(n * sizeof *f));
    if (f != NULL)
        for (size_t i = 0; i < n; i++)
            f[i] = npu_half_to_float(((const uint16_t *)t->data)[i]);
    return f;
}

static float *scratch_floats(struct arena *a, size_t n)
{
    return arena_keep(a, calloc(n ? n : 1, sizeof(float)));
}

static void put(const struct npu_tensor *out, size_t i, float v)
{
    if (out->type == NPU_OPERAND_TENSOR_FLOAT16)
        ((uint16_t *)out->data)[i] = npu_float_to_half(v);
    else
        ((float *)out->data)[i] = v;
}

/* t is a usable tensor of type, rank and dims (a 0 in dims is not checked). */
static int shaped(const struct npu_tensor *t, int32_t type, uint32_t rank, size_t d0, size_t d1, size_t d2)
{
    OPS_TRY(ops_check(t));
    if (t->type != type)
        return NPU_E_BAD_OPERAND_TYPE;
    size_t want[3] = {d0, d1, d2};
    if (t->rank != rank)
        return NPU_E_BAD_SHAPE;
    for (uint32_t i = 0; i < rank && i < 3; i++)
        if (want[i] != 0 && t->dims[i] != want[i])
            return NPU_E_BAD_SHAPE;
    return NPU_OK;
}

/* t is a [rows, cols] matrix of type; *rows receives its rows. */
static int matrix(const struct npu_tensor *t, int32_t type, size_t cols, size_t *rows)
{
    OPS_TRY(ops_check(t));
    *rows = t->dims[0];
    return shaped(t, type, 2, 0, cols, 0);
}

static int check_float_input(const struct npu_tensor *t, uint32_t rank)
{
    OPS_TRY(ops_check(t));
    if (!ops_is_float(t))
        return NPU_E_BAD_OPERAND_TYPE;
    return t->rank == rank ? NPU_OK : NPU_E_BAD_SHAPE;
}

static int check_activation(int32_t a)
{
    return a == 0 || a == 1 || a == 2 || a == 3 || a == 4 || a == 6 ? NPU_OK : NPU_E_BAD_SCALAR;
}

static double sigmoid(double v)
{
    return 1.0 / (1.0 + exp(-v));
}

static double activate(int32_t a, double v)
{
    switch (a) {
    case NPU_RNN_ACT_RELU: return v < 0.0 ? 0.0 : v;
    case NPU_RNN_ACT_RELU1: return v < -1.0 ? -1.0 : (v > 1.0 ? 1.0 : v);
    case NPU_RNN_ACT_RELU6: return v < 0.0 ? 0.0 : (v > 6.0 ? 6.0 : v);
    case NPU_RNN_ACT_TANH: return tanh(v);
    case NPU_RNN_ACT_SIGMOID: return sigmoid(v);
    default: return v;
    }
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

size_t npu_ops_units_recurrent(const struct npu_tensor *input, bool sequence, bool time_major)
{
    if (input == NULL || input->rank < 2 || input->rank > NPU_MAX_RANK)
        return 0;
    return sequence && time_major ? input->dims[1] : input->dims[0];
}

/* A sequence tensor's geometry: time steps, batch rows, features. */
struct seq {
    size_t steps, batch, width;
    bool time_major;
};

static struct seq seq_of(const struct npu_tensor *t, bool time_major)
{
    struct seq s = {.time_major = time_major, .width = t->dims[2]};
    s.steps = time_major ? t->dims[0] : t->dims[1];
    s.batch = time_major ? t->dims[1] : t->dims[0];
    return s;
}

/* The offset of (step, row) in a sequence tensor of that width. */
static size_t seq_at(const struct seq *s, size_t step, size_t row, size_t width)
{
    return (s->time_major ? step * s->batch + row : row * s->steps + step) * width;
}

/* -- RNN -------------------------------------------------------------------------- */

/* h_new = act(x W^T + aux Waux^T + h R^T + b) */
static void rnn_cell(const float *x, size_t n_in, const float *aux, const float *w_aux, size_t n_aux,
                     const float *h, const float *w, const float *r, const float *bias, size_t units,
                     int32_t activation, float *h_new)
{
    for (size_t u = 0; u < units; u++) {
        double v = bias[u] + dot(x, w + u * n_in, n_in) + dot(h, r + u * units, units);
        if (aux != NULL)
            v += dot(aux, w_aux + u * n_aux, n_aux);
        h_new[u] = (float)activate(activation, v);
    }
}

int npu_op_rnn(const struct npu_tensor *input, const struct npu_tensor *weights,
               const struct npu_tensor *recurrent, const struct npu_tensor *bias,
               const struct npu_tensor *hidden_in, int32_t activation,
               const struct npu_tensor *hidden_out, const struct npu_tensor *output,
               size_t begin, size_t end)
{
    OPS_TRY(check_float_input(input, 2));
    int32_t type = input->type;
    size_t batch = input->dims[0], n_in = input->dims[1];
    size_t units;
    OPS_TRY(matrix(weights, type, n_in, &units));
    OPS_TRY(shaped(recurrent, type, 2, units, units, 0));
    OPS_TRY(shaped(bias, type, 1, units, 0, 0));
    OPS_TRY(shaped(hidden_in, type, 2, batch, units, 0));
    OPS_TRY(shaped(hidden_out, type, 2, batch, units, 0));
    OPS_TRY(shaped(output, type, 2, batch, units, 0));
    OPS_TRY(check_activation(activation));
    ops_clamp_range(batch, &begin, &end);
    struct arena a = {0};
    const float *x = widen(&a, input), *w = widen(&a, weights), *r = widen(&a, recurrent);
    const float *b = widen(&a, bias), *h = widen(&a, hidden_in);
    float *h_new = scratch_floats(&a, units);
    if (a.failed) {
        arena_free(&a);
        return NPU_E_NO_MEMORY;
    }
    for (size_t row = begin; row < end; row++) {
        rnn_cell(x + row * n_in, n_in, NULL, NULL, 0, h + row * units, w, r, b, units, activation, h_new);
        for (size_t u = 0; u < units; u++) {
            put(hidden_out, row * units + u, h_new[u]);
            put(output, row * units + u, h_new[u]);
        }
    }
    arena_free(&a);
    return NPU_OK;
}

/* The output of one direction: [steps, batch, >= column + units] in the input's layout. */
static int check_sequence_output(const struct npu_tensor *output, int32_t type, const struct seq *s,
                                 uint32_t column, size_t units)
{
    OPS_TRY(ops_check(output));
    if (output->type != type)
        return NPU_E_BAD_OPERAND_TYPE;
    if (output->rank != 3)
        return NPU_E_BAD_SHAPE;
    struct seq o = seq_of(output, s->time_major);
    if (o.steps != s->steps || o.batch != s->batch || (size_t)column + units > o.width)
        return NPU_E_BAD_SHAPE;
    return NPU_OK;
}

/* An auxiliary sequence input: same steps and batch as the input. */
static int check_aux_sequence(const struct npu_tensor *aux, int32_t type, const struct seq *s)
{
    OPS_TRY(check_float_input(aux, 3));
    if (aux->type != type)
        return NPU_E_BAD_OPERAND_TYPE;
    struct seq x = seq_of(aux, s->time_major);
    return x.steps == s->steps && x.batch == s->batch ? NPU_OK : NPU_E_BAD_SHAPE;
}

int npu_op_sequence_rnn(const struct npu_tensor *input, const struct npu_rnn_direction *d,
                        int32_t activation, bool time_major, const struct npu_tensor *output,
                        size_t begin, size_t end)
{
    if (d == NULL)
        return NPU_E_INVALID_ARGUMENT;
    OPS_TRY(check_float_input(input, 3));
    int32_t type = input->type;
    struct seq s = seq_of(input, time_major);
    size_t units;
    OPS_TRY(matrix(d->weights, type, s.width, &units));
    OPS_TRY(shaped(d->recurrent, type, 2, units, units, 0));
    OPS_TRY(shaped(d->bias, type, 1, units, 0, 0));
    OPS_TRY(shaped(d->hidden, type, 2, s.batch, units, 0));
    size_t n_aux = 0;
    if ((d->aux_input == NULL) != (d->aux_weights == NULL))
        return NPU_E_INVALID_ARGUMENT;
    if (d->aux_input != NULL) {
        OPS_TRY(check_aux_sequence(d->aux_input, type, &s));
        n_aux = d->aux_input->dims[2];
        OPS_TRY(shaped(d->aux_weights, type, 2, units, n_aux, 0));
    }
    OPS_TRY(check_sequence_output(output, type, &s, d->column, units));
    OPS_TRY(check_activation(activation));
    size_t width = output->dims[2];
    ops_clamp_range(s.batch, &begin, &end);
    struct arena a = {0};
    const float *x = widen(&a, input), *w = widen(&a, d->weights), *r = widen(&a, d->recurrent);
    const float *b = widen(&a, d->bias), *h0 = widen(&a, d->hidden);
    const float *aux = widen(&a, d->aux_input), *w_aux = widen(&a, d->aux_weights);
    float *h = scratch_floats(&a, units), *h_new = scratch_floats(&a, units);
    if (a.failed) {
        arena_free(&a);
        return NPU_E_NO_MEMORY;
    }
    for (size_t row = begin; row < end; row++) {
        memcpy(h, h0 + row * units, units * sizeof *h);
        for (size_t k = 0; k < s.steps; k++) {
            size_t t = d->reverse ? s.steps - 1 - k : k;
            rnn_cell(x + seq_at(&s, t, row, s.width), s.width, aux ? aux + seq_at(&s, t, row, n_aux) : NULL,
                     w_aux, n_aux, h, w, r, b, units, activation, h_new);
            size_t at = seq_at(&s, t, row, width) + d->column;
            for (size_t u = 0; u < units; u++)
                put(output, at + u, h_new[u]);
            float *swap = h;
            h = h_new;
            h_new = swap;
        }
    }
    arena_free(&a);
    return NPU_OK;
}

/* -- SVDF --------------------------------------------------------------------------- */

int npu_op_svdf(const struct npu_tensor *input, const struct npu_tensor *weights_feature,
                const struct npu_tensor *weights_time, const struct npu_tensor *bias,
                const struct npu_tensor *state_in, int32_t rank, int32_t activation,
                const struct npu_tensor *state_out, const struct npu_tensor *output,
                size_t begin, size_t end)
{
    OPS_TRY(check_float_input(input, 2));
    int32_t type = input->type;
    size_t batch = input->dims[0], n_in = input->dims[1];
    size_t filters;
    OPS_TRY(matrix(weights_feature, type, n_in, &filters));
    OPS_TRY(ops_check(weights_time));
    size_t memory = weights_time->dims[weights_time->rank > 1 ? 1 : 0];
    OPS_TRY(shaped(weights_time, type, 2, filters, memory, 0));
    if (rank < 1 || filters % (size_t)rank != 0)
        return NPU_E_BAD_SCALAR;
    OPS_TRY(check_activation(activation));
    size_t units = filters / (size_t)rank;
    if (bias != NULL)
        OPS_TRY(shaped(bias, type, 1, units, 0, 0));
    if (filters > OPS_MAX_ELEMENTS / memory)
        return NPU_E_BAD_SHAPE;
    size_t state = filters * memory;
    OPS_TRY(shaped(state_in, type, 2, batch, state, 0));
    OPS_TRY(shaped(state_out, type, 2, batch, state, 0));
    OPS_TRY(shaped(output, type, 2, batch, units, 0));
    ops_clamp_range(batch, &begin, &end);
    struct arena a = {0};
    const float *x = widen(&a, input), *wf = widen(&a, weights_feature), *wt = widen(&a, weights_time);
    const float *b = widen(&a, bias), *s_in = widen(&a, state_in);
    float *s = scratch_floats(&a, state), *per_filter = scratch_floats(&a, filters);
    if (a.failed) {
        arena_free(&a);
        return NPU_E_NO_MEMORY;
    }
    for (size_t row = begin; row < end; row++) {
        memcpy(s, s_in + row * state, state * sizeof *s);
        for (size_t f = 0; f < filters; f++) {
            float *slots = s + f * memory;
            /* the newest activation takes the last slot; then the time filter */
            slots[memory - 1] = (float)dot(x + row * n_in, wf + f * n_in, n_in);
            per_filter[f] = (float)dot(slots, wt + f * memory, memory);
        }
        for (size_t u = 0; u < units; u++) {
            double v = b != NULL ? b[u] : 0.0;
            for (size_t k = 0; k < (size_t)rank; k++)
                v += per_filter[u * (size_t)rank + k];
            put(output, row * units + u, (float)activate(activation, v));
        }
        /* every filter's memory shifts one slot towards the oldest, the newest empty */
        for (size_t f = 0; f < filters; f++) {
            float *slots = s + f * memory;
            for (size_t k = 0; k + 1 < memory; k++)
                put(state_out, row * state + f * memory + k, slots[k + 1]);
            put(state_out, row * state + f * memory + memory - 1, 0.0f);
        }
    }
    arena_free(&a);
    return NPU_OK;
}

/* -- LSTM --------------------------------------------------------------------------- */

enum { GATE_I, GATE_F, GATE_C, GATE_O };

/* A checked LSTM cell: its sizes and its parameters as float32. */
struct lstm {
    size_t n_in, n_aux, n_cell, n_out;
    bool cifg, peephole, layer_norm, projection;
    const float *input_to[4], *recurrent_to[4], *peephole_w[3], *bias[4];
    const float *proj, *proj_bias, *ln[4], *aux_to[4];
};

/* Present exactly when want says, and then of shape [d0] or [d0, d1]. */
static int optional_shaped(const struct npu_tensor *t, bool want, int32_t type, uint32_t rank, size_t d0, size_t d1)
{
    if (t == NULL)
        return want ? NPU_E_INVALID_ARGUMENT : NPU_OK;
    if (!want)
        return NPU_E_INVALID_ARGUMENT;
    return shaped(t, type, rank, d0, d1, 0);
}

static int lstm_check(const struct npu_lstm_weights *w, int32_t type, size_t n_in, size_t n_aux, struct lstm *c)
{
    if (w == NULL)
        return NPU_E_INVALID_ARGUMENT;
    memset(c, 0, sizeof *c);
    OPS_TRY(ops_check(w->input_to[GATE_F]));
    OPS_TRY(ops_check(w->recurrent_to[GATE_F]));
    if (w->recurrent_to[GATE_F]->rank != 2)
        return NPU_E_BAD_SHAPE;
    c->n_in = n_in;
    c->n_aux = n_aux;
    c->n_cell = w->input_to[GATE_F]->dims[0];
    c->n_out = w->recurrent_to[GATE_F]->dims[1];
    c->cifg = w->input_to[GATE_I] == NULL;
    c->peephole = w->peephole[1] != NULL;
    c->layer_norm = w->layer_norm[GATE_F] != NULL;
    c->projection = w->projection != NULL;
    for (int g = 0; g < 4; g++) {
        bool used = g != GATE_I || !c->cifg;
        OPS_TRY(optional_shaped(w->input_to[g], used, type, 2, c->n_cell, n_in));
        OPS_TRY(optional_shaped(w->recurrent_to[g], used, type, 2, c->n_cell, c->n_out));
        OPS_TRY(optional_shaped(w->bias[g], used, type, 1, c->n_cell, 0));
        OPS_TRY(optional_shaped(w->layer_norm[g], used && c->layer_norm, type, 1, c->n_cell, 0));
        OPS_TRY(optional_shaped(w->aux_to[g], used && n_aux > 0, type, 2, c->n_cell, n_aux));
    }
    OPS_TRY(optional_shaped(w->peephole[0], c->peephole && !c->cifg, type, 1, c->n_cell, 0));
    OPS_TRY(optional_shaped(w->peephole[1], c->peephole, type, 1, c->n_cell, 0));
    OPS_TRY(optional_shaped(w->peephole[2], c->peephole, type, 1, c->n_cell, 0));
    OPS_TRY(optional_shaped(w->projection, c->projection, type, 2, c->n_out, c->n_cell));
    if (w->projection_bias != NULL)
        OPS_TRY(optional_shaped(w->projection_bias, c->projection, type, 1, c->n_out, 0));
    if (!c->projection && c->n_out != c->n_cell)
        return NPU_E_BAD_SHAPE;
    return NPU_OK;
}

static void lstm_widen(struct arena *a, const struct npu_lstm_weights *w, struct lstm *c)
{
    for (int g = 0; g < 4; g++) {
        c->input_to[g] = widen(a, w->input_to[g]);
        c->recurrent_to[g] = widen(a, w->recurrent_to[g]);
        c->bias[g] = widen(a, w->bias[g]);
        c->ln[g] = widen(a, w->layer_norm[g]);
        c->aux_to[g] = widen(a, w->aux_to[g]);
    }
    for (int g = 0; g < 3; g++)
        c->peephole_w[g] = widen(a, w->peephole[g]);
    c->proj = widen(a, w->projection);
    c->proj_bias = widen(a, w->projection_bias);
}

static int check_lstm_params(const struct npu_lstm_params *p)
{
    if (p == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (!(p->cell_clip >= 0.0f) || !(p->proj_clip >= 0.0f))
        return NPU_E_BAD_SCALAR;
    return check_activation(p->activation);
}

static double clip(double v, float limit)
{
    if (limit > 0.0f)
        return v < -limit ? -limit : (v > limit ? limit : v);
    return v;
}

/* Gate g's activations into out[n_cell]; cell is the state its peephole reads. */
static void lstm_gate(const struct lstm *c, int g, const float *x, const float *aux, const float *h,
                      const float *cell, double (*act)(int32_t, double), int32_t code, double *pre, float *out)
{
    size_t n = c->n_cell;
    int peep = g == GATE_I ? 0 : (g == GATE_F ? 1 : (g == GATE_O ? 2 : -1));
    for (size_t j = 0; j < n; j++) {
        double v = dot(x, c->input_to[g] + j * c->n_in, c->n_in) + dot(h, c->recurrent_to[g] + j * c->n_out, c->n_out);
        if (aux != NULL)
            v += dot(aux, c->aux_to[g] + j * c->n_aux, c->n_aux);
        if (c->peephole && peep >= 0)
            v += (double)cell[j] * c->peephole_w[peep][j];
        pre[j] = v;
    }
    if (c->layer_norm) {
        double mean = 0.0, var = 0.0;
        for (size_t j = 0; j < n; j++)
            mean += pre[j];
        mean /= (double)n;
        for (size_t j = 0; j < n; j++)
            var += (pre[j] - mean) * (pre[j] - mean);
        var /= (double)n;
        double inv = 1.0 / sqrt(var + 1e-8);
        for (size_t j = 0; j < n; j++)
            pre[j] = (pre[j] - mean) * inv * c->ln[g][j];
    }
    for (size_t j = 0; j < n; j++)
        out[j] = (float)act(code, pre[j] + c->bias[g][j]);
}

static double gate_sigmoid(int32_t code, double v)
{
    (void)code;
    return sigmoid(v);
}

/* One step of one batch row.  gates: 4 * n_cell floats, left holding (by
 * gate block i, c, f, o) the input gate, act(c_new), the forget gate (1 - f
 * with CIFG) and o * act(c_new), as Android's reference leaves its scratch;
 * pre: n_cell doubles; m: n_cell floats. */
static void lstm_row(const struct lstm *c, const struct npu_lstm_params *p, const float *x, const float *aux,
                     const float *h, const float *cell, float *h_new, float *cell_new, float *gates, double *pre)
{
    size_t n = c->n_cell;
    float *gi = gates, *gc = gates + n, *gf = gates + 2 * n, *go = gates + 3 * n;
    lstm_gate(c, GATE_F, x, aux, h, cell, gate_sigmoid, 0, pre, gf);
    if (!c->cifg)
        lstm_gate(c, GATE_I, x, aux, h, cell, gate_sigmoid, 0, pre, gi);
    else
        for (size_t j = 0; j < n; j++)
            gi[j] = 1.0f - gf[j];
    lstm_gate(c, GATE_C, x, aux, h, cell, activate, p->activation, pre, gc);
    for (size_t j = 0; j < n; j++)
        cell_new[j] = (float)clip((double)gf[j] * cell[j] + (double)gi[j] * gc[j], p->cell_clip);
    lstm_gate(c, GATE_O, x, aux, h, cell_new, gate_sigmoid, 0, pre, go);
    for (size_t j = 0; j < n; j++) {
        gc[j] = (float)activate(p->activation, cell_new[j]);
        go[j] = go[j] * gc[j];
    }
    if (c->cifg)
        for (size_t j = 0; j < n; j++)
            gf[j] = 1.0f - gf[j];
    if (!c->projection) {
        memcpy(h_new, go, n * sizeof *h_new);
        return;
    }
    for (size_t k = 0; k < c->n_out; k++) {
        double v = (c->proj_bias ? c->proj_bias[k] : 0.0) + dot(go, c->proj + k * n, n);
        h_new[k] = (float)clip(v, p->proj_clip);
    }
}

int npu_op_lstm(const struct npu_tensor *input, const struct npu_lstm_weights *w,
                const struct npu_tensor *output_state_in, const struct npu_tensor *cell_state_in,
                const struct npu_lstm_params *p, const struct npu_tensor *scratch,
                const struct npu_tensor *output_state_out, const struct npu_tensor *cell_state_out,
                const struct npu_tensor *output, size_t begin, size_t end)
{
    OPS_TRY(check_float_input(input, 2));
    int32_t type = input->type;
    size_t batch = input->dims[0];
    struct lstm c;
    OPS_TRY(lstm_check(w, type, input->dims[1], 0, &c));
    OPS_TRY(check_lstm_params(p));
    size_t n = c.n_cell, blocks = c.cifg ? 3 : 4;
    OPS_TRY(shaped(output_state_in, type, 2, batch, c.n_out, 0));
    OPS_TRY(shaped(cell_state_in, type, 2, batch, n, 0));
    OPS_TRY(shaped(scratch, type, 2, batch, n * blocks, 0));
    OPS_TRY(shaped(output_state_out, type, 2, batch, c.n_out, 0));
    OPS_TRY(shaped(cell_state_out, type, 2, batch, n, 0));
    OPS_TRY(shaped(output, type, 2, batch, c.n_out, 0));
    ops_clamp_range(batch, &begin, &end);
    struct arena a = {0};
    lstm_widen(&a, w, &c);
    const float *x = widen(&a, input), *h = widen(&a, output_state_in), *cell = widen(&a, cell_state_in);
    float *gates = scratch_floats(&a, 4 * n), *h_new = scratch_floats(&a, c.n_out), *cell_new = scratch_floats(&a, n);
    double *pre = arena_keep(&a, calloc(n, sizeof *pre));
    if (a.failed) {
        arena_free(&a);
        return NPU_E_NO_MEMORY;
    }
    for (size_t row = begin; row < end; row++) {
        lstm_row(&c, p, x + row * c.n_in, NULL, h + row * c.n_out, cell + row * n, h_new, cell_new, gates, pre);
        for (size_t k = 0; k < c.n_out; k++) {
            put(output_state_out, row * c.n_out + k, h_new[k]);
            put(output, row * c.n_out + k, h_new[k]);
        }
        for (size_t j = 0; j < n; j++)
            put(cell_state_out, row * n + j, cell_new[j]);
        /* gate-major blocks of [batch, cells]; CIFG has no input gate block */
        for (size_t k = 0; k < blocks; k++) {
            const float *block = gates + (c.cifg ? k + 1 : k) * n;
            for (size_t j = 0; j < n; j++)
                put(scratch, (k * batch + row) * n + j, block[j]);
        }
    }
    arena_free(&a);
    return NPU_OK;
}

int npu_op_sequence_lstm(const struct npu_tensor *input, const struct npu_lstm_direction *d,
                         const struct npu_lstm_params *p, bool time_major,
                         const struct npu_tensor *output, size_t begin, size_t end)
{
    if (d == NULL)
        return NPU_E_INVALID_ARGUMENT;
    OPS_TRY(check_float_input(input, 3));
    int32_t type = input->type;
    struct seq s = seq_of(input, time_major);
    size_t n_aux = 0;
    if (d->aux_input != NULL) {
        OPS_TRY(check_aux_sequence(d->aux_input, type, &s));
        n_aux = d->aux_input->dims[2];
    }
    struct lstm c;
    OPS_TRY(lstm_check(d->w, type, s.width, n_aux, &c));
    OPS_TRY(check_lstm_params(p));
    size_t n = c.n_cell;
    OPS_TRY(shaped(d->output_state, type, 2, s.batch, c.n_out, 0));
    OPS_TRY(shaped(d->cell_state, type, 2, s.batch, n, 0));
    OPS_TRY(check_sequence_output(output, type, &s, d->column, c.n_out));
    size_t width = output->dims[2];
    ops_clamp_range(s.batch, &begin, &end);
    struct arena a = {0};
    lstm_widen(&a, d->w, &c);
    const float *x = widen(&a, input), *aux = widen(&a, d->aux_input);
    const float *h0 = widen(&a, d->output_state), *cell0 = widen(&a, d->cell_state);
    float *gates = scratch_floats(&a, 4 * n);
    float *h = scratch_floats(&a, c.n_out), *h_new = scratch_floats(&a, c.n_out);
    float *cell = scratch_floats(&a, n), *cell_new = scratch_floats(&a, n);
    double *pre = arena_keep(&a, calloc(n, sizeof *pre));
    if (a.failed) {
        arena_free(&a);
        return NPU_E_NO_MEMORY;
    }
    for (size_t row = begin; row < end; row++) {
        memcpy(h, h0 + row * c.n_out, c.n_out * sizeof *h);
        memcpy(cell, cell0 + row * n, n * sizeof *cell);
        for (size_t k = 0; k < s.steps; k++) {
            size_t t = d->reverse ? s.steps - 1 - k : k;
            lstm_row(&c, p, x + seq_at(&s, t, row, s.width), aux ? aux + seq_at(&s, t, row, n_aux) : NULL, h, cell,
                     h_new, cell_new, gates, pre);
            size_t at = seq_at(&s, t, row, width) + d->column;
            for (size_t u = 0; u < c.n_out; u++)
                put(output, at + u, h_new[u]);
            float *swap = h;
            h = h_new;
            h_new = swap;
            swap = cell;
            cell = cell_new;
            cell_new = swap;
        }
    }
    arena_free(&a);
    return NPU_OK;
}

/* -- QUANTIZED_16BIT_LSTM: gemmlowp's 16-bit fixed point ----------------------------
 * A value with k integer bits is an int16 raw r meaning r * 2^(k - 15). */

static int16_t sat16(int32_t v)
{
    return (int16_t)(v < -32768 ? -32768 : (v > 32767 ? 32767 : v));
}

/* the product of two raws, the integer bits adding up (rounded, -1 * -1 saturated) */
static int16_t fx_mul(int16_t a, int16_t b)
{
    if (a == INT16_MIN && b == INT16_MIN)
        return INT16_MAX;
    int32_t ab = (int32_t)a * b;
    int32_t nudge = ab >= 0 ? (1 << 14) : 1 - (1 << 14);
    return (int16_t)((ab + nudge) / (1 << 15));
}

static int16_t fx_div_pot(int16_t x, int exponent)
{
    int32_t mask = (1 << exponent) - 1;
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (int16_t)((x >> exponent) + (remainder > threshold ? 1 : 0));
}

/* x * 2^exponent, saturating up, rounding down */
static int16_t fx_mul_pot(int16_t x, int exponent)
{
    if (exponent < 0)
        return fx_div_pot(x, -exponent);
    if (exponent == 0)
        return x;
    int32_t threshold = (1 << (15 - exponent)) - 1;
    if (x > threshold)
        return INT16_MAX;
    if (x < -threshold)
        return INT16_MIN;
    return (int16_t)(x * (1 << exponent));
}

static int16_t fx_neg(int16_t x)
{
    return (int16_t)-x;  /* -(-32768) wraps, as the reference's int16 does */
}

/* a 32-bit fixed-point constant as a 16-bit raw */
static int16_t fx_const(int32_t raw32)
{
    return (int16_t)npu_rounding_divide_by_pot(raw32, 16);
}

/* exp(a) for a in [-1/4, 0), 0 integer bits in and out */
static int16_t fx_exp_quarter(int16_t a)
{
    const int16_t e_minus_eighth = fx_const(1895147668), third = fx_const(715827883);
    int16_t x = (int16_t)(a + (1 << 12));  /* a + 1/8 */
    int16_t x2 = fx_mul(x, x), x3 = fx_mul(x2, x), x4 = fx_mul(x2, x2);
    int16_t x4_4 = fx_mul_pot(x4, -2);
    int16_t poly = fx_mul_pot((int16_t)(fx_mul((int16_t)(x4_4 + x3), third) + x2), -1);
    return sat16((int32_t)e_minus_eighth + fx_mul(e_minus_eighth, (int16_t)(x + poly)));
}

/* exp(a) for a <= 0 with bits integer bits; the result has 0 */
static int16_t fx_exp_negative(int16_t a, int bits)
{
    int frac = 15 - bits;
    int16_t quarter = (int16_t)(1 << (frac - 2));
    int16_t mask = (int16_t)(quarter - 1);
    int16_t low = (int16_t)((a & mask) - quarter);
    int16_t result = fx_exp_quarter(fx_mul_pot(low, bits));
    int16_t remainder = (int16_t)(low - a);
    static const int32_t MULTIPLIERS[] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
    for (int e = -2; e <= 4; e++)
        if (bits > e && (remainder & (1 << (frac + e))))
            result = fx_mul(result, fx_const(MULTIPLIERS[e + 2]));
    if (bits > 5 && a < -(1 << (frac + 5)))
        result = 0;
    return a == 0 ? INT16_MAX : result;
}

/* (two Newton-Raphson helpers) 1/(1+x) and (1-x)/(1+x) for x in (0, 1), 0 integer bits */
static int16_t fx_reciprocal_steps(int16_t a)
{
    int16_t half_denominator = (int16_t)((((int32_t)a + INT16_MAX) + (((int32_t)a + INT16_MAX) >= 0 ? 1 : -1)) / 2);
    const int16_t c48_17 = fx_const(1515870810), cm32_17 = fx_const(-1010580540), one2 = 1 << 13;
    int16_t x = (int16_t)(c48_17 + fx_mul(half_denominator, cm32_17));
    for (int i = 0; i < 3; i++) {
        int16_t hx = fx_mul(half_denominator, x);
        int16_t one_minus = (int16_t)(one2 - hx);
        x = (int16_t)(x + fx_mul_pot(fx_mul(x, one_minus), 2));
    }
    return x;  /* 1 / (1 + a) with 2 integer bits, doubled */
}

static int16_t fx_one_over_one_plus(int16_t a)
{
    return fx_mul_pot(fx_reciprocal_steps(a), 1);  /* x / 2 with 1 integer bit, rescaled to 0 */
}

static int16_t fx_one_minus_over_one_plus(int16_t a)
{
    return fx_mul_pot((int16_t)(fx_reciprocal_steps(a) - (1 << 13)), 2);
}

/* logistic and tanh of a value with bits integer bits; results with 0 */
static int16_t fx_logistic(int16_t a, int bits)
{
    if (a == 0)
        return 1 << 14;
    int16_t magnitude = a > 0 ? a : fx_neg(a);
    int16_t positive = fx_one_over_one_plus(fx_exp_negative(fx_neg(magnitude), bits));
    return a > 0 ? positive : (int16_t)(INT16_MAX - positive);
}

static int16_t fx_tanh(int16_t a, int bits)
{
    if (a == 0)
        return 0;
    int16_t n = a < 0 ? a : fx_neg(a);
    /* exp(2n): n with one more integer bit */
    int16_t t = fx_one_minus_over_one_plus(fx_exp_negative(n, bits + 1));
    return a < 0 ? fx_neg(t) : t;
}

static int check_q8(const struct npu_tensor *t, size_t d0, size_t d1, float scale, int32_t zero_point)
{
    OPS_TRY(shaped(t, NPU_OPERAND_TENSOR_QUANT8_ASYMM, 2, d0, d1, 0));
    return t->scale == scale && t->zero_point == zero_point ? NPU_OK : NPU_E_BAD_SCALAR;
}

int npu_op_quantized_16bit_lstm(const struct npu_tensor *input, const struct npu_tensor *const weights[8],
                                const struct npu_tensor *const biases[4], const struct npu_tensor *prev_cell,
                                const struct npu_tensor *prev_output, const struct npu_tensor *cell_out,
                                const struct npu_tensor *output, size_t begin, size_t end)
{
    if (weights == NULL || biases == NULL)
        return NPU_E_INVALID_ARGUMENT;
    OPS_TRY(ops_check(input));
    if (input->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM)
        return NPU_E_BAD_OPERAND_TYPE;
    if (input->rank != 2)
        return NPU_E_BAD_SHAPE;
    const float q = 1.0f / 128.0f;
    size_t batch = input->dims[0], n_in = input->dims[1];
    OPS_TRY(check_q8(input, batch, n_in, q, 128));
    OPS_TRY(ops_check(prev_output));
    if (prev_output->rank != 2)
        return NPU_E_BAD_SHAPE;
    size_t n_out = prev_output->dims[1];
    OPS_TRY(check_q8(prev_output, batch, n_out, q, 128));
    OPS_TRY(ops_check(weights[0]));
    float w_scale = weights[0]->scale;
    int32_t w_zero = weights[0]->zero_point;
    for (int k = 0; k < 8; k++)
        OPS_TRY(check_q8(weights[k], n_out, k < 4 ? n_in : n_out, w_scale, w_zero));
    for (int k = 0; k < 4; k++) {
        OPS_TRY(shaped(biases[k], NPU_OPERAND_TENSOR_INT32, 1, n_out, 0, 0));
        if ((double)biases[k]->scale != (double)w_scale / 128.0 || biases[k]->zero_point != 0)
            return NPU_E_BAD_SCALAR;
    }
    /* Android's rule: the cell state's scale is 2^(StateIntegerBits - 15), and 4 bits is all it takes */
    OPS_TRY(shaped(prev_cell, NPU_OPERAND_TENSOR_QUANT16_SYMM, 2, batch, n_out, 0));
    OPS_TRY(shaped(cell_out, NPU_OPERAND_TENSOR_QUANT16_SYMM, 2, batch, n_out, 0));
    for (int k = 0; k < 2; k++) {
        float log2_scale = logf((k ? cell_out : prev_cell)->scale) * (1.0f / logf(2.0f));
        if (fabsf(log2_scale - roundf(log2_scale)) >= 1e-3f || (int)roundf(log2_scale) != -11)
            return NPU_E_BAD_SCALAR;
    }
    OPS_TRY(check_q8(output, batch, n_out, q, 128));
    int32_t multiplier, shift;
    OPS_TRY(npu_quantize_multiplier(4096.0 * biases[0]->scale, &multiplier, &shift));
    ops_clamp_range(batch, &begin, &end);
    const uint8_t *x = input->data, *h = prev_output->data;
    const int16_t *cell = prev_cell->data;
    int16_t *cell_new = cell_out->data;
    uint8_t *out = output->data;
    for (size_t row = begin; row < end; row++) {
        for (size_t j = 0; j < n_out; j++) {
            int16_t gate[4];  /* input, forget, cell, output: 3 integer bits */
            for (int g = 0; g < 4; g++) {
                const uint8_t *wx = (const uint8_t *)weights[g]->data + j * n_in;
                const uint8_t *wh = (const uint8_t *)weights[4 + g]->data + j * n_out;
                int32_t acc = ((const int32_t *)biases[g]->data)[j];
                for (size_t k = 0; k < n_in; k++)
                    acc += ((int32_t)x[row * n_in + k] - 128) * ((int32_t)wx[k] - w_zero);
                for (size_t k = 0; k < n_out; k++)
                    acc += ((int32_t)h[row * n_out + k] - 128) * ((int32_t)wh[k] - w_zero);
                gate[g] = sat16(npu_multiply_by_quantized_multiplier(acc, multiplier, shift));
            }
            int16_t i = fx_logistic(gate[0], 3), f = fx_logistic(gate[1], 3);
            int16_t g = fx_tanh(gate[2], 3), o = fx_logistic(gate[3], 3);
            int16_t ig = fx_mul(i, g);                            /* 0 integer bits */
            int16_t fc = fx_mul(f, cell[row * n_out + j]);        /* 4 integer bits */
            int16_t state = sat16((int32_t)fx_mul_pot(ig, -4) + fc);
            int16_t activ = fx_mul(o, fx_tanh(fx_mul_pot(state, 1), 3));  /* tanh of the state at 3 bits */
            cell_new[row * n_out + j] = state;
            int16_t scaled = fx_div_pot(activ, 8);
            out[row * n_out + j] = (uint8_t)(128 + (scaled < -128 ? -128 : (scaled > 127 ? 127 : scaled)));
        }
    }
    return NPU_OK;
}

/* -- LSH_PROJECTION: FarmHash Fingerprint64 ------------------------------------------ */

static const uint64_t K0 = 0xc3a5c85c97cb3127ULL, K1 = 0xb492b66fbe98f273ULL, K2 = 0x9ae16a3b2f90404fULL;

static uint64_t fetch64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;  /* little-endian hosts, as the emulator's */
}

static uint32_t fetch32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t rot64(uint64_t v, int shift)
{
    return shift == 0 ? v : (v >> shift) | (v << (64 - shift));
}

static uint64_t shift_mix(uint64_t v)
{
    return v ^ (v >> 47);
}

static uint64_t hash_len16(uint64_t u, uint64_t v, uint64_t mul)
{
    uint64_t a = (u ^ v) * mul;
    a ^= a >> 47;
    uint64_t b = (v ^ a) * mul;
    b ^= b >> 47;
    return b * mul;
}

static uint64_t hash_0_to_16(const uint8_t *s, size_t len)
{
    if (len >= 8) {
        uint64_t mul = K2 + len * 2, a = fetch64(s) + K2, b = fetch64(s + len - 8);
        uint64_t c = rot64(b, 37) * mul + a, d = (rot64(a, 25) + b) * mul;
        return hash_len16(c, d, mul);
    }
    if (len >= 4) {
        uint64_t mul = K2 + len * 2;
        return hash_len16(len + ((uint64_t)fetch32(s) << 3), fetch32(s + len - 4), mul);
    }
    if (len > 0) {
        uint32_t y = (uint32_t)s[0] + ((uint32_t)s[len >> 1] << 8);
        uint32_t z = (uint32_t)len + ((uint32_t)s[len - 1] << 2);
        return shift_mix(y * K2 ^ z * K0) * K2;
    }
    return K2;
}

static uint64_t hash_17_to_32(const uint8_t *s, size_t len)
{
    uint64_t mul = K2 + len * 2, a = fetch64(s) * K1, b = fetch64(s + 8);
    uint64_t c = fetch64(s + len - 8) * mul, d = fetch64(s + len - 16) * K2;
    return hash_len16(rot64(a + b, 43) + rot64(c, 30) + d, a + rot64(b + K2, 18) + c, mul);
}

static uint64_t hash_33_to_64(const uint8_t *s, size_t len)
{
    uint64_t mul = K2 + len * 2, a = fetch64(s) * K2, b = fetch64(s + 8);
    uint64_t c = fetch64(s + len - 8) * mul, d = fetch64(s + len - 16) * K2;
    uint64_t y = rot64(a + b, 43) + rot64(c, 30) + d;
    uint64_t z = hash_len16(y, a + rot64(b + K2, 18) + c, mul);
    uint64_t e = fetch64(s + 16) * mul, f = fetch64(s + 24);
    uint64_t g = (y + fetch64(s + len - 32)) * mul, h = (z + fetch64(s + len - 24)) * mul;
    return hash_len16(rot64(e + f, 43) + rot64(g, 30) + h, e + rot64(f + a, 18) + g, mul);
}

struct pair64 {
    uint64_t first, second;
};

static struct pair64 weak_hash32(const uint8_t *s, uint64_t a, uint64_t b)
{
    uint64_t w = fetch64(s), x = fetch64(s + 8), y = fetch64(s + 16), z = fetch64(s + 24);
    a += w;
    b = rot64(b + a + z, 21);
    uint64_t c = a;
    a += x + y;
    b += rot64(a, 44);
    return (struct pair64){a + z, b + c};
}

uint64_t npu_fingerprint64(const void *data, size_t len)
{
    const uint8_t *s = data;
    if (len <= 16)
        return hash_0_to_16(s, len);
    if (len <= 32)
        return hash_17_to_32(s, len);
    if (len <= 64)
        return hash_33_to_64(s, len);
    uint64_t x = 81, y = 81 * K1 + 113, z = shift_mix(y * K2 + 113) * K2;
    struct pair64 v = {0, 0}, w = {0, 0};
    x = x * K2 + fetch64(s);
    const uint8_t *end = s + ((len - 1) / 64) * 64, *last64 = s + len - 64;
    do {
        x = rot64(x + y + v.first + fetch64(s + 8), 37) * K1;
        y = rot64(y + v.second + fetch64(s + 48), 42) * K1;
        x ^= w.second;
        y += v.first + fetch64(s + 40);
        z = rot64(z + w.first, 33) * K1;
        v = weak_hash32(s, v.second * K1, x + w.first);
        w = weak_hash32(s + 32, z + w.second, y + fetch64(s + 16));
        uint64_t t = z;
        z = x;
        x = t;
        s += 64;
    } while (s != end);
    uint64_t mul = K1 + ((z & 0xff) << 1);
    s = last64;
    w.first += (len - 1) & 63;
    v.first += w.first;
    w.first += v.first;
    x = rot64(x + y + v.first + fetch64(s + 8), 37) * mul;
    y = rot64(y + v.second + fetch64(s + 48), 42) * mul;
    x ^= w.second * 9;
    y += v.first * 9 + fetch64(s + 40);
    z = rot64(z + w.first, 33) * mul;
    v = weak_hash32(s, v.second * mul, x + w.first);
    w = weak_hash32(s + 32, z + w.second, y + fetch64(s + 16));
    uint64_t t = z;
    z = x;
    x = t;
    return hash_len16(hash_len16(v.first, w.first, mul) + shift_mix(y) * K0 + z,
                      hash_len16(v.second, w.second, mul) + x, mul);
}

int npu_op_lsh_projection(const struct npu_tensor *hash, const struct npu_tensor *input,
                          const struct npu_tensor *weight, int32_t type, const struct npu_tensor *output)
{
    OPS_TRY(check_float_input(hash, 2));
    OPS_TRY(ops_check(input));
    if (input->rank < 1)
        return NPU_E_BAD_SHAPE;
    size_t functions = hash->dims[0], bits = hash->dims[1], rows = input->dims[0];
    if (bits > 32)
        return NPU_E_BAD_SHAPE;
    if (weight != NULL)
        OPS_TRY(shaped(weight, hash->type, 1, rows, 0, 0));
    if (type < 1 || type > 3)
        return NPU_E_BAD_SCALAR;
    bool dense = type == 2;
    OPS_TRY(shaped(output, NPU_OPERAND_TENSOR_INT32, 1, dense ? functions * bits : functions, 0, 0));
    size_t row_bytes = npu_ops_byte_size(input) / rows;
    uint8_t *key = malloc(sizeof(float) + row_bytes);
    if (key == NULL)
        return NPU_E_NO_MEMORY;
    int32_t *out = output->data;
    for (size_t i = 0; i < functions; i++) {
        uint32_t signature = 0;
        for (size_t j = 0; j < bits; j++) {
            float seed = (float)ops_get(hash, i * bits + j);
            memcpy(key, &seed, sizeof seed);
            double score = 0.0;
            for (size_t r = 0; r < rows; r++) {
                memcpy(key + sizeof seed, (const uint8_t *)input->data + r * row_bytes, row_bytes);
                double value = (double)(int64_t)npu_fingerprint64(key, sizeof seed + row_bytes);
                score += weight != NULL ? ops_get(weight, r) * value : value;
            }
            uint32_t bit = score > 0.0 ? 1 : 0;
            if (dense)
                out[i * bits + j] = (int32_t)bit;
            signature = (signature << 1) | bit;
        }
        if (!dense) {
            if (type == 3)  /* SPARSE: each function in its own range of 2^bits */
                signature += (uint32_t)i * (bits >= 32 ? 0u : (uint32_t)1 << bits);
            out[i] = (int32_t)signature;
        }
    }
    free(key);
    return NPU_OK;
}

/* -- RANDOM_MULTINOMIAL: TensorFlow's Philox4x32-10 ----------------------------------- */

struct philox {
    uint32_t counter[4], key[2];
    uint32_t block[4];
    unsigned used;  /* values of block already handed out (4: none left) */
};

static void philox_block(struct philox *p)
{
    uint32_t c[4], k0 = p->key[0], k1 = p->key[1];
    memcpy(c, p->counter, sizeof c);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t next[4] = {(uint32_t)(p1 >> 32) ^ c[1] ^ k0, (uint32_t)p1, (uint32_t)(p0 >> 32) ^ c[3] ^ k1,
                            (uint32_t)p0};
        memcpy(c, next, sizeof c);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    memcpy(p->block, c, sizeof c);
    p->used = 0;
    for (int i = 0; i < 4 && ++p->counter[i] == 0; i++)
        ;
}

static uint32_t philox_next(struct philox *p)
{
    if (p->used == 4)
        philox_block(p);
    return p->block[p->used++];
}

int npu_op_random_multinomial(const struct npu_tensor *logits, int32_t samples, int32_t seed0,
                              int32_t seed1, const struct npu_tensor *output)
{
    OPS_TRY(check_float_input(logits, 2));
    if (samples < 1)
        return NPU_E_BAD_SCALAR;
    size_t batch = logits->dims[0], classes = logits->dims[1];
    OPS_TRY(shaped(output, NPU_OPERAND_TENSOR_INT32, 2, batch, (size_t)samples, 0));
    uint64_t seed = (uint64_t)(int64_t)seed0, seed2 = (uint64_t)(int64_t)seed1;
    if (seed == 0 && seed2 == 0) {
        /* as the reference: both seeds 0 means seeded at random */
        uint64_t r[2];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            return NPU_E_NO_MEMORY;
        seed = r[0];
        seed2 = r[1];
    }
    struct philox p = {.counter = {0, 0, (uint32_t)seed2, (uint32_t)(seed2 >> 32)},
                       .key = {(uint32_t)seed, (uint32_t)(seed >> 32)}, .used = 4};
    double *cdf = malloc(classes * sizeof *cdf);
    if (cdf == NULL)
        return NPU_E_NO_MEMORY;
    int32_t *out = output->data;
    for (size_t b = 0; b < batch; b++) {
        float top = -3.402823466e38f;
        for (size_t j = 0; j < classes; j++) {
            float v = (float)ops_get(logits, b * classes + j);
            if (isfinite(v) && v > top)
                top = v;
        }
        double total = 0.0;
        for (size_t j = 0; j < classes; j++) {
            float v = (float)ops_get(logits, b * classes + j);
            if (isfinite(v))
                total += exp((double)v - (double)top);
            cdf[j] = total;
        }
        for (size_t k = 0; k < (size_t)samples; k++) {
            uint32_t lo = philox_next(&p), hi = philox_next(&p);
            double u = (double)((((uint64_t)hi & 0xfffffu) << 32) | lo) / 4503599627370496.0;  /* 2^52 */
            double target = u * total;
            size_t first = 0, last = classes;  /* the first class whose running sum exceeds target */
            while (first < last) {
                size_t mid = first + (last - first) / 2;
                if (cdf[mid] > target)
                    last = mid;
                else
                    first = mid + 1;
            }
            out[b * (size_t)samples + k] = (int32_t)first;
        }
    }
    free(cdf);
    return NPU_OK;
}
