/*
 * Model validation, plans and slicing.  Validation is the one gate every
 * model passes (getSupportedOperations, load, the CPU device's run): the
 * model's structure is checked here (operand types, quantization, lifetimes,
 * locations, indexes, the order of writes and reads), each operation by its
 * binding (npu/bind.h), prepared in order with the constants' data so that
 * the shapes it computes flow forward to the operations that read them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/bind.h"
#include "npu/errors.h"
#include "npu/model.h"
#include "ops_internal.h"
#include "plan.h"

/* A tensor larger than this (elements) is refused: the emulator computes for
 * real, and a bogus dimension must fail cleanly, not overflow size_t. */
#define MAX_ELEMENTS ((size_t)1 << 28)

static bool is_scalar(int32_t type)
{
    return type == NPU_OPERAND_FLOAT32 || type == NPU_OPERAND_INT32 || type == NPU_OPERAND_UINT32 ||
           type == NPU_OPERAND_BOOL || type == NPU_OPERAND_FLOAT16;
}

/* Elements of a shape; 0 when a dimension is 0 (unknown) or the total too large. */
static size_t element_count(uint32_t rank, const uint32_t *dims)
{
    size_t n = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] == 0 || n > MAX_ELEMENTS / dims[i])
            return 0;
        n *= dims[i];
    }
    return n;
}

/* Whether a shape's element count stays within MAX_ELEMENTS (a 0 dimension: an empty tensor). */
static bool fits(uint32_t rank, const uint32_t *dims)
{
    size_t n = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] == 0)
            return true;
        if (n > MAX_ELEMENTS / dims[i])
            return false;
        n *= dims[i];
    }
    return true;
}

size_t npu_operand_byte_size(const struct npu_operand *op)
{
    if (op == NULL || op->type < 0 || op->type >= NPU_OPERAND_TYPE_COUNT)
        return 0;
    if (op->dimension_count > NPU_MAX_RANK || (op->dimension_count > 0 && op->dimensions == NULL))
        return 0;
    return element_count(op->dimension_count, op->dimensions) * ops_element_size(op->type);
}

static bool is_constant(const struct npu_operand *op)
{
    return op->lifetime == NPU_LIFETIME_CONSTANT_COPY || op->lifetime == NPU_LIFETIME_CONSTANT_REFERENCE;
}

static const void *constant_data(const struct npu_model *m, const struct npu_operand *op)
{
    if (op->lifetime == NPU_LIFETIME_CONSTANT_COPY)
        return (const unsigned char *)m->operand_values + op->location.offset;
    return (const unsigned char *)m->pools[op->location.pool_index].data + op->location.offset;
}

/* A quantized operand's parameters are its type's; a per-channel one's scales fit its shape. */
static int check_quantization(const struct npu_operand *op)
{
    int32_t lo, hi;
    if (op->type == NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL) {
        if (op->zero_point != 0 || op->channel_dim >= op->dimension_count || op->channel_scales == NULL ||
            op->channel_scale_count != op->dimensions[op->channel_dim])
            return NPU_E_BAD_SCALAR;
        for (uint32_t i = 0; i < op->channel_scale_count; i++)
            if (!(op->channel_scales[i] > 0.0f) || !isfinite(op->channel_scales[i]))
                return NPU_E_BAD_SCALAR;
        return NPU_OK;
    }
    if (op->channel_scale_count != 0)
        return NPU_E_BAD_SCALAR;
    if (!npu_bind_quant_range(op->type, &lo, &hi))
        return NPU_OK;
    if (!(op->scale > 0.0f) || !isfinite(op->scale) || op->zero_point < lo || op->zero_point > hi)
        return NPU_E_BAD_SCALAR;
    return NPU_OK;
}

/* A tensor's shape is known when its rank is and none of its dimensions is 0. */
static bool shape_known(const struct npu_operand *op)
{
    return is_scalar(op->type) || element_count(op->dimension_count, op->dimensions) != 0;
}

static int check_operand(const struct npu_model *m, const struct npu_operand *op)
{
    if (op->type < 0 || op->type >= NPU_OPERAND_TYPE_COUNT)
        return NPU_E_BAD_OPERAND_TYPE;
    if (op->lifetime < NPU_LIFETIME_TEMPORARY_VARIABLE || op->lifetime > NPU_LIFETIME_NO_VALUE)
        return NPU_E_BAD_LIFETIME;
    if (op->dimension_count > NPU_MAX_RANK)
        return NPU_E_BAD_SHAPE;
    if (op->dimension_count > 0 && op->dimensions == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (op->channel_scale_count > 0 && op->channel_scales == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (is_scalar(op->type) && op->dimension_count != 0)
        return NPU_E_BAD_SHAPE;
    /* a temporary's or a model output's shape may be left to the operation
     * that writes it, a model input's to the execution (npu_plan_begin's
     * in_shapes); what a constant holds must be known */
    if (is_constant(op) && !shape_known(op))
        return NPU_E_BAD_SHAPE;
    if (op->lifetime != NPU_LIFETIME_NO_VALUE)
        OPS_TRY(check_quantization(op));
    if (is_constant(op)) {
        size_t bytes = npu_operand_byte_size(op);
        const struct npu_data_location *loc = &op->location;
        if (loc->length != bytes)
            return NPU_E_BAD_OPERAND_LOCATION;
        if (op->lifetime == NPU_LIFETIME_CONSTANT_COPY) {
            if (m->operand_values == NULL || (size_t)loc->offset + loc->length > m->operand_values_length)
                return NPU_E_BAD_OPERAND_LOCATION;
        } else {
            if (loc->pool_index >= m->pool_count || m->pools[loc->pool_index].data == NULL ||
                (size_t)loc->offset + loc->length > m->pools[loc->pool_index].length)
                return NPU_E_BAD_OPERAND_LOCATION;
        }
        /* the bindings read constants in place: aligned for their element type */
        if (loc->offset % ops_element_size(op->type) != 0)
            return NPU_E_BAD_OPERAND_LOCATION;
    }
    return NPU_OK;
}

/* The model's operand i as a tensor descriptor (data: a constant's bytes in
 * the model's memory, NULL otherwise). */
static void describe(const struct npu_model *m, uint32_t i, struct npu_plan_operand *d)
{
    const struct npu_operand *op = &m->operands[i];
    memset(d, 0, sizeof *d);
    d->t.type = op->type;
    d->t.rank = op->dimension_count;
    if (op->dimension_count)
        memcpy(d->t.dims, op->dimensions, op->dimension_count * sizeof *op->dimensions);
    d->t.scale = op->scale;
    d->t.zero_point = op->zero_point;
    d->t.channel_scales = op->channel_scales;
    d->t.channel_dim = op->channel_dim;
    d->t.data = is_constant(op) ? (void *)constant_data(m, op) : NULL;
    d->has_shape = shape_known(op);
    d->lifetime = op->lifetime;
    d->producer = UINT32_MAX;
    d->last_reader = UINT32_MAX;
}

/* The binding call of operation o over the described operands; args holds
 * input_count + output_count entries. */
static void make_call(const struct npu_plan_operand *ops, int32_t type, uint32_t n_in, const uint32_t *in,
                      uint32_t n_out, const uint32_t *out, struct npu_arg *args, struct npu_bind_call *c)
{
    memset(c, 0, sizeof *c);
    c->type = type;
    c->input_count = n_in;
    c->output_count = n_out;
    c->in = args;
    c->out = args + n_in;
    for (uint32_t k = 0; k < n_in + n_out; k++) {
        const struct npu_plan_operand *d = &ops[k < n_in ? in[k] : out[k - n_in]];
        struct npu_arg *a = &args[k];
        memset(a, 0, sizeof *a);
        a->omitted = d->lifetime == NPU_LIFETIME_NO_VALUE;
        a->t = d->t;
        a->has_shape = d->has_shape;
        a->has_rank = d->has_shape || d->t.rank > 0 || is_scalar(d->t.type);
    }
}

/* The whole-model analysis: structure, then each operation's binding in order
 * with shapes flowing forward.  ops (the model's operands, described) is
 * updated with the shapes the bindings compute.  With computable (the support
 * check), an operation npuemu has no binding for is "not computable" rather
 * than an error; plan (may be NULL) receives each operation's call data. */
static int analyse(const struct npu_model *m, struct npu_plan_operand *ops, struct npu_plan_op *plan_ops,
                   bool *computable, uint32_t *bad_op)
{
    bool lenient = computable != NULL;
    *bad_op = UINT32_MAX;
    if (m == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if ((m->operand_count && !m->operands) || (m->operation_count && !m->operations) ||
        (m->input_count && !m->input_indexes) || (m->output_count && !m->output_indexes) ||
        (m->pool_count && !m->pools))
        return NPU_E_INVALID_ARGUMENT;
    if (m->operation_count == 0 || m->output_count == 0)
        return NPU_E_BAD_MODEL_IO;
    for (uint32_t i = 0; i < m->operand_count; i++)
        OPS_TRY(check_operand(m, &m->operands[i]));
    for (uint32_t i = 0; i < m->operand_count; i++)
        describe(m, i, &ops[i]);

    unsigned char *defined = calloc(m->operand_count ? m->operand_count : 1, 1);
    unsigned char *listed = calloc(m->operand_count ? m->operand_count : 1, 1);
    struct npu_arg *args = NULL;
    size_t args_len = 0;
    int rc = NPU_OK;
    if (!defined || !listed) {
        rc = NPU_E_NO_MEMORY;
        goto out;
    }
    for (uint32_t i = 0; i < m->operand_count; i++)
        defined[i] = is_constant(&m->operands[i]) || m->operands[i].lifetime == NPU_LIFETIME_MODEL_INPUT ||
                     m->operands[i].lifetime == NPU_LIFETIME_NO_VALUE;
    /* every MODEL_INPUT listed exactly once in input_indexes, likewise outputs */
    for (int pass = 0; pass < 2 && rc == NPU_OK; pass++) {
        uint32_t count = pass ? m->output_count : m->input_count;
        const uint32_t *idx = pass ? m->output_indexes : m->input_indexes;
        int32_t want = pass ? NPU_LIFETIME_MODEL_OUTPUT : NPU_LIFETIME_MODEL_INPUT;
        uint32_t seen = 0;
        for (uint32_t i = 0; i < count; i++) {
            if (idx[i] >= m->operand_count) {
                rc = NPU_E_BAD_OPERAND_INDEX;
                break;
            }
            if (m->operands[idx[i]].lifetime != want || listed[idx[i]]) {
                rc = NPU_E_BAD_MODEL_IO;
                break;
            }
            listed[idx[i]] = 1;
        }
        for (uint32_t i = 0; i < m->operand_count; i++)
            seen += m->operands[i].lifetime == want;
        if (rc == NPU_OK && seen != count)
            rc = NPU_E_BAD_MODEL_IO;
    }
    for (uint32_t k = 0; k < m->operation_count && rc == NPU_OK; k++) {
        const struct npu_operation *o = &m->operations[k];
        *bad_op = k;
        if (o->output_count == 0) {
            rc = NPU_E_BAD_OPERATION;
            break;
        }
        if ((o->input_count && !o->inputs) || !o->outputs) {
            rc = NPU_E_INVALID_ARGUMENT;
            break;
        }
        for (uint32_t i = 0; i < o->input_count && rc == NPU_OK; i++) {
            if (o->inputs[i] >= m->operand_count)
                rc = NPU_E_BAD_OPERAND_INDEX;
            else if (!defined[o->inputs[i]])
                rc = NPU_E_BAD_MODEL_IO;
        }
        for (uint32_t i = 0; i < o->output_count && rc == NPU_OK; i++) {
            uint32_t out = o->outputs[i];
            if (out >= m->operand_count) {
                rc = NPU_E_BAD_OPERAND_INDEX;
                break;
            }
            int32_t lt = m->operands[out].lifetime;
            if (defined[out] || (lt != NPU_LIFETIME_TEMPORARY_VARIABLE && lt != NPU_LIFETIME_MODEL_OUTPUT))
                rc = NPU_E_BAD_MODEL_IO;
        }
        if (rc != NPU_OK)
            break;
        for (uint32_t i = 0; i < o->input_count; i++)
            ops[o->inputs[i]].last_reader = k;
        for (uint32_t i = 0; i < o->output_count; i++) {
            defined[o->outputs[i]] = 1;
            ops[o->outputs[i]].producer = k;
        }
        const struct npu_op_def *def = npu_bind_lookup(o->type);
        if (computable)
            computable[k] = def != NULL;
        if (!def) {
            /* an operation npuemu cannot compute: unknown to the strict check,
             * "not computable" to the support query; its outputs stay as declared */
            if (!lenient)
                rc = NPU_E_BAD_OPERATION;
            continue;
        }
        size_t n = (size_t)o->input_count + o->output_count;
        if (n > args_len) {
            struct npu_arg *grown = realloc(args, n * sizeof *args);
            if (!grown) {
                rc = NPU_E_NO_MEMORY;
                break;
            }
            args = grown;
            args_len = n;
        }
        struct npu_bind_call c;
        make_call(ops, o->type, o->input_count, o->inputs, o->output_count, o->outputs, args, &c);
        rc = def->prepare(&c);
        if (rc != NPU_OK)
            break;
        for (uint32_t i = 0; i < o->output_count; i++) {
            struct npu_plan_operand *d = &ops[o->outputs[i]];
            if (c.out[i].has_shape) {
                if (!fits(c.out[i].t.rank, c.out[i].t.dims)) {
                    rc = NPU_E_BAD_SHAPE;  /* larger than the emulator computes */
                    break;
                }
                d->t.rank = c.out[i].t.rank;
                memcpy(d->t.dims, c.out[i].t.dims, sizeof d->t.dims);
                d->has_shape = true;
            }
        }
        if (rc != NPU_OK)
            break;
        if (plan_ops) {
            struct npu_plan_op *p = &plan_ops[k];
            p->def = def;
            p->operand_type = npu_operation_operand_type(m, k);
            bool known = true;
            for (uint32_t i = 0; i < n; i++)
                known &= args[i].omitted || is_scalar(args[i].t.type) ||
                         ops[i < o->input_count ? o->inputs[i] : o->outputs[i - o->input_count]].has_shape;
            /* an operation with a shape still unknown is prepared again at
             * execution, with the shapes (and values) of the run */
            p->fixed = known;
        }
    }
    if (rc == NPU_OK) {
        *bad_op = UINT32_MAX;
        for (uint32_t i = 0; i < m->output_count; i++)
            if (!defined[m->output_indexes[i]])
                rc = NPU_E_BAD_MODEL_IO;
    }
out:
    free(args);
    free(defined);
    free(listed);
    return rc;
}

static int check(const struct npu_model *m, bool *computable, uint32_t *bad_operation)
{
    uint32_t dummy;
    if (!bad_operation)
        bad_operation = &dummy;
    if (m == NULL)
        return NPU_E_INVALID_ARGUMENT;
    struct npu_plan_operand *ops = calloc(m->operand_count ? m->operand_count : 1, sizeof *ops);
    if (!ops)
        return NPU_E_NO_MEMORY;
    int rc = analyse(m, ops, NULL, computable, bad_operation);
    free(ops);
    return rc;
}

int npu_model_validate(const struct npu_model *model, uint32_t *bad_operation)
{
    return check(model, NULL, bad_operation);
}

int npu_model_check_support(const struct npu_model *model, bool *computable, uint32_t *bad_operation)
{
    if (model && model->operation_count && !computable)
        return NPU_E_INVALID_ARGUMENT;
    return check(model, computable, bad_operation);
}

void npu_plan_destroy(struct npu_plan *p)
{
    if (!p)
        return;
    free(p->operands);
    free(p->slices);
    if (!p->base) {
        for (uint32_t k = 0; p->ops && k < p->op_count; k++) {
            free(p->ops[k].operands);
            if (p->ops[k].kept != NULL)
                p->ops[k].kept->release(p->ops[k].kept);
        }
        free(p->inputs);
        free(p->outputs);
        free(p->consts);
        free(p->channel_scales);
        for (uint32_t i = 0; i < p->cache_count; i++) {
            npu_plan_destroy(p->cache[i]);
            free(p->cache_shapes[i]);
        }
    }
    free(p->ops);
    free(p);
}

/* Bytes an operand of known shape holds (0 for an omitted one). */
static size_t operand_bytes(const struct npu_plan_operand *d)
{
    if (d->lifetime == NPU_LIFETIME_NO_VALUE || !d->has_shape)
        return 0;
    if (is_scalar(d->t.type))
        return ops_element_size(d->t.type);
    return element_count(d->t.rank, d->t.dims) * ops_element_size(d->t.type);
}

/* Round to 16 bytes so every tensor in an arena is aligned for float. */
static size_t padded(size_t bytes)
{
    return (bytes + 15) & ~(size_t)15;
}

/* Copies the constants and the per-channel scales into the plan and points
 * the descriptors at the copies. */
static int own_memory(const struct npu_model *m, struct npu_plan *p)
{
    size_t scale_count = 0;
    for (uint32_t i = 0; i < m->operand_count; i++) {
        struct npu_plan_operand *d = &p->operands[i];
        d->bytes = operand_bytes(d);
        if (is_constant(&m->operands[i])) {
            d->offset = p->const_bytes;
            p->const_bytes += padded(d->bytes);
        }
        scale_count += m->operands[i].channel_scale_count;
    }
    p->consts = malloc(p->const_bytes ? p->const_bytes : 1);
    p->channel_scales = malloc((scale_count ? scale_count : 1) * sizeof *p->channel_scales);
    if (!p->consts || !p->channel_scales)
        return NPU_E_NO_MEMORY;
    size_t at = 0;
    for (uint32_t i = 0; i < m->operand_count; i++) {
        struct npu_plan_operand *d = &p->operands[i];
        const struct npu_operand *op = &m->operands[i];
        if (is_constant(op)) {
            memcpy(p->consts + d->offset, constant_data(m, op), d->bytes);
            d->t.data = p->consts + d->offset;
        }
        if (op->channel_scale_count) {
            memcpy(p->channel_scales + at, op->channel_scales, op->channel_scale_count * sizeof *p->channel_scales);
            d->t.channel_scales = p->channel_scales + at;
            at += op->channel_scale_count;
        } else {
            d->t.channel_scales = NULL;
        }
    }
    return NPU_OK;
}

/* The last operation during which temporary d is alive: its last reader,
 * or, read by none, the one writing it. */
static uint32_t life_end(const struct npu_plan_operand *d)
{
    return d->last_reader != UINT32_MAX && d->last_reader > d->producer ? d->last_reader : d->producer;
}

static int by_offset(const void *a, const void *b)
{
    const struct npu_plan_operand *x = *(const struct npu_plan_operand *const *)a;
    const struct npu_plan_operand *y = *(const struct npu_plan_operand *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/*
 * Places temporary output `which` of operation k in the arena (the layout
 * plan.h describes): first-fit among the temporaries placed before it that
 * are alive at k, those written by earlier operations and op k's earlier
 * outputs.  live has room for every operand.  Grows temp_bytes to cover it.
 */
static void place_temporary(struct npu_plan *p, uint32_t k, uint32_t which, const struct npu_plan_operand **live)
{
    const struct npu_plan_op *op = &p->ops[k];
    struct npu_plan_operand *d = &p->operands[op->operands[op->input_count + which]];
    size_t n = 0;
    for (uint32_t j = 0; j < p->operand_count; j++) {
        const struct npu_plan_operand *t = &p->operands[j];
        if (t->lifetime == NPU_LIFETIME_TEMPORARY_VARIABLE && t->producer < k && life_end(t) >= k && t->bytes)
            live[n++] = t;
    }
    for (uint32_t i = 0; i < which; i++) {
        const struct npu_plan_operand *t = &p->operands[op->operands[op->input_count + i]];
        if (t->lifetime == NPU_LIFETIME_TEMPORARY_VARIABLE && t->bytes && t != d)
            live[n++] = t;
    }
    qsort(live, n, sizeof *live, by_offset);
    size_t need = padded(d->bytes), at = 0;
    for (size_t i = 0; i < n && live[i]->offset < at + need; i++) {
        size_t end = live[i]->offset + padded(live[i]->bytes);
        if (end > at)
            at = end;
    }
    d->offset = at;
    if (at + need > p->temp_bytes)
        p->temp_bytes = at + need;
}

static void *tensor_ptr(const struct npu_plan *p, uint32_t idx, unsigned char *arena,
                        const struct npu_buffer *in, const struct npu_buffer *out)
{
    const struct npu_plan_operand *o = &p->operands[idx];
    switch (o->lifetime) {
    case NPU_LIFETIME_MODEL_INPUT:
        return in[o->io_index].data;
    case NPU_LIFETIME_MODEL_OUTPUT:
        return out[o->io_index].data;
    case NPU_LIFETIME_TEMPORARY_VARIABLE:
        return arena + o->offset;
    case NPU_LIFETIME_NO_VALUE:
        return NULL;
    default:
        return o->t.data;
    }
}

/* What the bindings may read while a plan resolves: the buffers (NULL at load),
 * the arena, and how many operations have run (their outputs hold values). */
struct values {
    const struct npu_buffer *in, *out;
    unsigned char *arena;
    uint32_t ran;
    bool inputs;          /* the model inputs' values may be read */
};

/* Copies a sentence into why (may be NULL). */
static void tell(char *why, size_t why_len, const char *text)
{
    if (why && why_len) {
        strncpy(why, text, why_len - 1);
        why[why_len - 1] = '\0';
    }
}

/* An output's shape as the run knows it. */
static void report_output(const struct npu_plan *p, uint32_t i, const struct npu_buffer *out, struct npu_shape *s)
{
    const struct npu_plan_operand *d = &p->operands[p->outputs[i]];
    memset(s, 0, sizeof *s);
    s->sufficient = true;
    if (!d->has_shape)
        return;
    s->rank = d->t.rank;
    memcpy(s->dims, d->t.dims, d->t.rank * sizeof *s->dims);
    s->sufficient = out == NULL || d->bytes <= out[i].length;
}

/*
 * Resolves operation k of p: prepares it (unless its shapes were all known at
 * load) with the shapes of p and the values v allows, lays out its outputs,
 * costs it and appends its slices.  *done is false (and nothing changed) when
 * some output's shape still needs values not computed yet.
 */
static int resolve_op(struct npu_plan *p, uint32_t k, const struct values *v, bool *done, char *why, size_t why_len)
{
    struct npu_plan_op *op = &p->ops[k];
    uint32_t n = op->input_count + op->output_count;
    const uint32_t *ins = op->operands, *outs = op->operands + op->input_count;
    struct npu_arg *args = malloc((n ? n : 1) * sizeof *args);
    if (!args)
        return NPU_E_NO_MEMORY;
    const struct npu_plan_operand **live = NULL;  /* place_temporary's scratch */
    struct npu_bind_call c;
    int rc = NPU_OK;
    *done = false;
    make_call(p->operands, op->def->type, op->input_count, ins, op->output_count, outs, args, &c);
    if (!op->fixed) {
        for (uint32_t i = 0; v && i < op->input_count; i++) {
            const struct npu_plan_operand *d = &p->operands[ins[i]];
            bool valued = d->lifetime == NPU_LIFETIME_MODEL_INPUT ? v->inputs
                          : d->producer != UINT32_MAX && d->producer < v->ran && v->in && v->out;
            if (valued && !args[i].omitted)
                args[i].t.data = tensor_ptr(p, ins[i], v->arena, v->in, v->out);
        }
        rc = op->def->prepare(&c);
        if (rc != NPU_OK) {
            tell(why, why_len, c.why);
            goto out;
        }
        for (uint32_t i = 0; i < op->output_count; i++)
            if (!c.out[i].has_shape)
                goto out;  /* the values it needs are not computed yet */
        for (uint32_t i = 0; i < op->output_count; i++) {
            struct npu_plan_operand *d = &p->operands[outs[i]];
            if (!fits(c.out[i].t.rank, c.out[i].t.dims)) {
                tell(why, why_len, "an output would be larger than the emulator computes");
                rc = NPU_E_BAD_SHAPE;
                goto out;
            }
            d->t.rank = c.out[i].t.rank;
            memcpy(d->t.dims, c.out[i].t.dims, sizeof d->t.dims);
            d->has_shape = true;
        }
    }
    for (uint32_t i = 0; i < op->output_count; i++) {
        struct npu_plan_operand *d = &p->operands[outs[i]];
        d->bytes = operand_bytes(d);
        if (d->lifetime == NPU_LIFETIME_TEMPORARY_VARIABLE) {
            if (!live)
                live = malloc((p->operand_count ? p->operand_count : 1) * sizeof *live);
            if (!live) {
                rc = NPU_E_NO_MEMORY;
                goto out;
            }
            place_temporary(p, k, i, live);
        } else if (d->lifetime == NPU_LIFETIME_MODEL_OUTPUT && v && v->out && d->bytes > v->out[d->io_index].length) {
            tell(why, why_len, "an output's buffer is smaller than the output");
            rc = NPU_E_BUFFER_TOO_SMALL;
            goto out;
        }
    }
    make_call(p->operands, op->def->type, op->input_count, ins, op->output_count, outs, args, &c);
    op->units = op->def->units ? op->def->units(&c) : 1;
    if (op->units == 0)
        op->units = 1;
    npu_bind_cost(op->def, &c, &op->flops, &op->bytes);
    size_t slices = op->units < p->slices_per_op ? op->units : p->slices_per_op;
    if (p->slice_count + slices > p->slice_cap) {
        size_t cap = p->slice_cap * 2 + slices + 8;
        struct npu_plan_slice *grown = realloc(p->slices, cap * sizeof *grown);
        if (!grown) {
            rc = NPU_E_NO_MEMORY;
            goto out;
        }
        p->slices = grown;
        p->slice_cap = (uint32_t)cap;
    }
    for (size_t s = 0; s < slices; s++) {
        struct npu_plan_slice *sl = &p->slices[p->slice_count++];
        sl->op = k;
        sl->begin = s * op->units / slices;
        sl->end = (s + 1) * op->units / slices;
        double share = (double)(sl->end - sl->begin) / (double)op->units;
        sl->flops = op->flops * share;
        sl->bytes = op->bytes * share;
    }
    p->resolved_ops = k + 1;
    *done = true;
out:
    free(live);
    free(args);
    return rc;
}

/* Resolves p's operations from resolved_ops on, as far as v allows. */
static int resolve(struct npu_plan *p, const struct values *v, char *why, size_t why_len)
{
    bool done = true;
    while (p->resolved_ops < p->op_count && done) {
        int rc = resolve_op(p, p->resolved_ops, v, &done, why, why_len);
        if (rc != NPU_OK)
            return rc;
    }
    return NPU_OK;
}

int npu_plan_create(const struct npu_model *m, uint32_t slices_per_op, struct npu_plan **out)
{
    if (out == NULL || m == NULL)
        return NPU_E_INVALID_ARGUMENT;
    *out = NULL;
    struct npu_plan *p = calloc(1, sizeof *p);
    if (!p)
        return NPU_E_NO_MEMORY;
    p->slices_per_op = slices_per_op ? slices_per_op : 1;
    p->ops = calloc(m->operation_count ? m->operation_count : 1, sizeof *p->ops);
    p->operands = calloc(m->operand_count ? m->operand_count : 1, sizeof *p->operands);
    if (!p->ops || !p->operands) {
        npu_plan_destroy(p);
        return NPU_E_NO_MEMORY;
    }
    uint32_t bad;
    int rc = analyse(m, p->operands, p->ops, NULL, &bad);
    if (rc != NPU_OK) {
        npu_plan_destroy(p);
        return rc;
    }
    p->op_count = m->operation_count;
    p->relaxed = m->relax_float32_to_float16;
    p->operand_count = m->operand_count;
    p->input_count = m->input_count;
    p->output_count = m->output_count;
    p->inputs = calloc(m->input_count ? m->input_count : 1, sizeof *p->inputs);
    p->outputs = calloc(m->output_count, sizeof *p->outputs);
    if (!p->inputs || !p->outputs)
        goto nomem;
    memcpy(p->inputs, m->input_indexes, m->input_count * sizeof *p->inputs);
    memcpy(p->outputs, m->output_indexes, m->output_count * sizeof *p->outputs);
    for (uint32_t i = 0; i < m->input_count; i++)
        p->operands[m->input_indexes[i]].io_index = i;
    for (uint32_t i = 0; i < m->output_count; i++)
        p->operands[m->output_indexes[i]].io_index = i;
    if (own_memory(m, p) != NPU_OK)
        goto nomem;
    for (uint32_t k = 0; k < p->op_count; k++) {
        const struct npu_operation *o = &m->operations[k];
        struct npu_plan_op *op = &p->ops[k];
        op->input_count = o->input_count;
        op->output_count = o->output_count;
        op->operands = malloc(((size_t)o->input_count + o->output_count) * sizeof *op->operands);
        if (!op->operands)
            goto nomem;
        memcpy(op->operands, o->inputs, o->input_count * sizeof *op->operands);
        memcpy(op->operands + o->input_count, o->outputs, o->output_count * sizeof *op->operands);
        p->dynamic |= !op->fixed;
    }
    for (uint32_t i = 0; i < m->input_count; i++)
        p->dynamic |= !p->operands[m->input_indexes[i]].has_shape;
    if (!p->dynamic) {
        /* every operation prepared at load: lay out and cut them all now */
        rc = resolve(p, NULL, NULL, 0);
        if (rc != NPU_OK) {
            npu_plan_destroy(p);
            return rc;
        }
    }
    *out = p;
    return NPU_OK;
nomem:
    npu_plan_destroy(p);
    return NPU_E_NO_MEMORY;
}

/* Input i's shape for this run into *d: the declared one, or the given one where it agrees. */
static int take_input_shape(struct npu_plan_operand *d, uint32_t i, const struct npu_shape *s, char *why, size_t why_len)
{
    char text[160];
    if (is_scalar(d->t.type) || s == NULL || s->rank == 0) {
        if (!d->has_shape) {
            snprintf(text, sizeof text, "input %u has unspecified dimensions the execution does not give", (unsigned)i);
            tell(why, why_len, text);
            return NPU_E_BAD_SHAPE;
        }
        return NPU_OK;
    }
    if (s->rank > NPU_MAX_RANK || (d->t.rank > 0 && s->rank != d->t.rank)) {
        snprintf(text, sizeof text, "input %u is given rank %u, the model's is %u", (unsigned)i, (unsigned)s->rank,
                 (unsigned)d->t.rank);
        tell(why, why_len, text);
        return NPU_E_BAD_SHAPE;
    }
    for (uint32_t k = 0; k < s->rank; k++) {
        if (s->dims[k] == 0 || (k < d->t.rank && d->t.dims[k] != 0 && d->t.dims[k] != s->dims[k])) {
            snprintf(text, sizeof text, "input %u is given dimension %u = %u, the model's is %u", (unsigned)i,
                     (unsigned)k, (unsigned)s->dims[k], (unsigned)(k < d->t.rank ? d->t.dims[k] : 0));
            tell(why, why_len, text);
            return NPU_E_BAD_SHAPE;
        }
    }
    if (element_count(s->rank, s->dims) == 0) {
        snprintf(text, sizeof text, "input %u's dimensions make more elements than the emulator computes", (unsigned)i);
        tell(why, why_len, text);
        return NPU_E_BAD_SHAPE;
    }
    d->t.rank = s->rank;
    memcpy(d->t.dims, s->dims, s->rank * sizeof *s->dims);
    d->has_shape = true;
    d->bytes = operand_bytes(d);
    return NPU_OK;
}

static bool same_shapes(const struct npu_plan *p, const struct npu_shape *a, const struct npu_plan_operand *ops)
{
    for (uint32_t i = 0; i < p->input_count; i++) {
        const struct npu_plan_operand *d = &ops[p->inputs[i]];
        if (a[i].rank != d->t.rank || memcmp(a[i].dims, d->t.dims, d->t.rank * sizeof *d->t.dims) != 0)
            return false;
    }
    return true;
}

/* A new instance of dynamic plan p, its inputs shaped from in_shapes. */
static int instance(const struct npu_plan *p, const struct npu_shape *in_shapes, struct npu_plan **out, char *why,
                    size_t why_len)
{
    struct npu_plan *r = calloc(1, sizeof *r);
    if (!r)
        return NPU_E_NO_MEMORY;
    *r = *p;
    r->base = p;
    r->cache_count = 0;
    r->dynamic = false;
    r->slices = NULL;
    r->slice_count = r->slice_cap = 0;
    r->temp_bytes = 0;
    r->resolved_ops = 0;
    r->operands = malloc((p->operand_count ? p->operand_count : 1) * sizeof *r->operands);
    r->ops = malloc((p->op_count ? p->op_count : 1) * sizeof *r->ops);
    if (!r->operands || !r->ops) {
        npu_plan_destroy(r);
        return NPU_E_NO_MEMORY;
    }
    memcpy(r->operands, p->operands, p->operand_count * sizeof *r->operands);
    memcpy(r->ops, p->ops, p->op_count * sizeof *r->ops);
    for (uint32_t i = 0; i < p->input_count; i++) {
        int rc = take_input_shape(&r->operands[p->inputs[i]], i, in_shapes ? &in_shapes[i] : NULL, why, why_len);
        if (rc != NPU_OK) {
            npu_plan_destroy(r);
            return rc;
        }
    }
    *out = r;
    return NPU_OK;
}

/* The buffers against a plan resolved as far as it is. */
static int check_buffers(const struct npu_plan *base, const struct npu_plan *r, const struct npu_buffer *in,
                         const struct npu_buffer *outb, char *why, size_t why_len)
{
    char text[160];
    for (uint32_t i = 0; i < r->input_count; i++) {
        if (in[i].data == NULL || in[i].length != r->operands[r->inputs[i]].bytes) {
            snprintf(text, sizeof text, "input %u's buffer is %zu bytes, its shape needs %zu", (unsigned)i,
                     in[i].length, r->operands[r->inputs[i]].bytes);
            tell(why, why_len, text);
            return NPU_E_BAD_BUFFER;
        }
    }
    for (uint32_t i = 0; i < r->output_count; i++) {
        const struct npu_plan_operand *fixed = &base->operands[base->outputs[i]];
        /* an output whose shape only the run gives may be empty (a NULL buffer of 0 bytes) */
        bool bad = fixed->has_shape ? outb[i].data == NULL || outb[i].length != operand_bytes(fixed)
                                    : outb[i].data == NULL && outb[i].length != 0;
        if (bad) {
            snprintf(text, sizeof text, "output %u's buffer is %zu bytes, its shape needs %zu", (unsigned)i,
                     outb[i].length, operand_bytes(fixed));
            tell(why, why_len, text);
            return NPU_E_BAD_BUFFER;
        }
    }
    return NPU_OK;
}

bool npu_plan_complete(const struct npu_plan *run)
{
    return run->resolved_ops == run->op_count;
}

static void report(const struct npu_plan *r, const struct npu_buffer *outb, struct npu_shape *out_shapes)
{
    for (uint32_t i = 0; out_shapes && i < r->output_count; i++)
        report_output(r, i, outb, &out_shapes[i]);
}

int npu_plan_begin(struct npu_plan *p, const struct npu_buffer *in, const struct npu_shape *in_shapes, uint32_t n_in,
                   const struct npu_buffer *outb, struct npu_shape *out_shapes, uint32_t n_out, struct npu_plan **run,
                   char *why, size_t why_len)
{
    tell(why, why_len, "");
    if (run == NULL)
        return NPU_E_INVALID_ARGUMENT;
    *run = NULL;
    if (n_in != p->input_count || n_out != p->output_count) {
        tell(why, why_len, "the number of buffers is not the model's number of inputs and outputs");
        return NPU_E_BAD_BUFFER;
    }
    if ((n_in && !in) || (n_out && !outb))
        return NPU_E_INVALID_ARGUMENT;
    if (!p->dynamic) {
        for (uint32_t i = 0; in_shapes && i < n_in; i++) {
            const struct npu_plan_operand *d = &p->operands[p->inputs[i]];
            if (!is_scalar(d->t.type) && in_shapes[i].rank != 0 &&
                (in_shapes[i].rank != d->t.rank || memcmp(in_shapes[i].dims, d->t.dims, d->t.rank * sizeof *d->t.dims))) {
                char text[96];
                snprintf(text, sizeof text, "input %u is given dimensions other than the model's", (unsigned)i);
                tell(why, why_len, text);
                return NPU_E_BAD_SHAPE;
            }
        }
        int rc = check_buffers(p, p, in, outb, why, why_len);
        report(p, outb, out_shapes);
        if (rc == NPU_OK)
            *run = p;
        return rc;
    }
    struct npu_plan *r;
    int rc = instance(p, in_shapes, &r, why, why_len);
    if (rc != NPU_OK)
        return rc;
    for (uint32_t c = 0; c < p->cache_count; c++) {
        if (same_shapes(p, p->cache_shapes[c], r->operands)) {
            npu_plan_destroy(r);
            r = p->cache[c];
            rc = check_buffers(p, r, in, outb, why, why_len);
            for (uint32_t i = 0; rc == NPU_OK && i < n_out; i++)
                if (r->operands[r->outputs[i]].bytes > outb[i].length)
                    rc = NPU_E_BUFFER_TOO_SMALL;
            report(r, outb, out_shapes);
            if (rc == NPU_OK)
                *run = r;
            return rc;
        }
    }
    rc = check_buffers(p, r, in, outb, why, why_len);
    /* first from the shapes alone: such a plan serves every run of these input shapes */
    struct values shapes_only = {.in = NULL, .out = outb, .arena = NULL, .ran = 0, .inputs = false};
    if (rc == NPU_OK)
        rc = resolve(r, &shapes_only, why, why_len);
    if (rc == NPU_OK && npu_plan_complete(r) && p->cache_count < PLAN_CACHE) {
        struct npu_shape *key = calloc(p->input_count ? p->input_count : 1, sizeof *key);
        if (key) {
            for (uint32_t i = 0; i < p->input_count; i++) {
                const struct npu_plan_operand *d = &r->operands[p->inputs[i]];
                key[i].rank = d->t.rank;
                memcpy(key[i].dims, d->t.dims, d->t.rank * sizeof *d->t.dims);
            }
            p->cache[p->cache_count] = r;
            p->cache_shapes[p->cache_count++] = key;
            r->cached = true;
        }
    }
    /* then with the inputs' values, for the shapes that depend on them */
    struct values with_inputs = {.in = in, .out = outb, .arena = NULL, .ran = 0, .inputs = true};
    if (rc == NPU_OK)
        rc = resolve(r, &with_inputs, why, why_len);
    if (rc == NPU_OK && r->slice_count == 0) {
        /* its first operation reads nothing but inputs and constants: it must resolve */
        tell(why, why_len, "the first operation's output shape stays unknown with its inputs given");
        rc = NPU_E_BAD_SHAPE;
    }
    report(r, outb, out_shapes);
    if (rc != NPU_OK) {
        npu_plan_end(p, r);
        return rc;
    }
    *run = r;
    return NPU_OK;
}

int npu_plan_continue(struct npu_plan *r, unsigned char **arena, const struct npu_buffer *in,
                      const struct npu_buffer *outb, struct npu_shape *out_shapes, char *why, size_t why_len)
{
    tell(why, why_len, "");
    if (npu_plan_complete(r))
        return NPU_OK;
    if (r->slice_count && r->slices[r->slice_count - 1].op + 1 != r->resolved_ops)
        return NPU_E_INVALID_ARGUMENT;
    size_t before = r->temp_bytes;
    struct values computed = {.in = in, .out = outb, .arena = *arena, .ran = r->resolved_ops, .inputs = true};
    uint32_t from = r->resolved_ops;
    int rc = resolve(r, &computed, why, why_len);
    report(r, outb, out_shapes);
    if (rc != NPU_OK)
        return rc;
    if (r->resolved_ops == from) {
        tell(why, why_len, "an operation's output shape stays unknown with every value it reads computed");
        return NPU_E_BAD_SHAPE;
    }
    if (r->temp_bytes > before) {
        unsigned char *grown = realloc(*arena, r->temp_bytes);
        if (!grown)
            return NPU_E_NO_MEMORY;
        memset(grown + before, 0, r->temp_bytes - before);
        *arena = grown;
    }
    return NPU_OK;
}

void npu_plan_end(struct npu_plan *p, struct npu_plan *run)
{
    if (run && run != p && !run->cached)
        npu_plan_destroy(run);
}

int npu_plan_run_slice(const struct npu_plan *p, uint32_t slice, unsigned char *arena,
                       const struct npu_buffer *in, const struct npu_buffer *out, char *why, size_t why_len)
{
    const struct npu_plan_slice *s = &p->slices[slice];
    struct npu_plan_op *op = &p->ops[s->op];
    uint32_t n = op->input_count + op->output_count;
    struct npu_arg *args = malloc(n * sizeof *args);
    if (!args)
        return NPU_E_NO_MEMORY;
    struct npu_bind_call c;
    make_call(p->operands, op->def->type, op->input_count, op->operands, op->output_count,
              op->operands + op->input_count, args, &c);
    /* a plan made whole at load keeps what an operation makes of its constants */
    bool keep = !p->dynamic && p->base == NULL;
    for (uint32_t i = 1; keep && i < op->input_count; i++) {
        int32_t life = p->operands[op->operands[i]].lifetime;
        keep = life == NPU_LIFETIME_CONSTANT_COPY || life == NPU_LIFETIME_CONSTANT_REFERENCE ||
               life == NPU_LIFETIME_NO_VALUE;
    }
    c.kept = keep ? &op->kept : NULL;
    for (uint32_t i = 0; i < n; i++)
        args[i].t.data = tensor_ptr(p, op->operands[i], arena, in, out);
    int rc = op->def->run(&c, s->begin, s->end);
    free(args);
    tell(why, why_len, c.why);
    return rc;
}

struct npu_kernel_prepared {
    struct npu_plan *plan;
    unsigned char *arena;  /* kept between runs, grown to the largest run's temp_bytes */
    size_t arena_bytes;
};

int npu_kernel_prepare(const struct npu_model *model, struct npu_kernel_prepared **out)
{
    if (out == NULL)
        return NPU_E_INVALID_ARGUMENT;
    *out = NULL;
    struct npu_kernel_prepared *k = calloc(1, sizeof *k);
    if (k == NULL)
        return NPU_E_NO_MEMORY;
    int rc = npu_plan_create(model, 1, &k->plan);
    if (rc != NPU_OK) {
        free(k);
        return rc;
    }
    *out = k;
    return NPU_OK;
}

void npu_kernel_release(struct npu_kernel_prepared *k)
{
    if (k == NULL)
        return;
    npu_plan_destroy(k->plan);
    free(k->arena);
    free(k);
}

int npu_kernel_run_prepared(struct npu_kernel_prepared *k, const struct npu_buffer *inputs,
                            const struct npu_shape *input_shapes, uint32_t input_count,
                            const struct npu_buffer *outputs, struct npu_shape *output_shapes, uint32_t output_count)
{
    if (k == NULL)
        return NPU_E_INVALID_ARGUMENT;
    struct npu_plan *r = NULL;
    int rc = npu_plan_begin(k->plan, inputs, input_shapes, input_count, outputs, output_shapes, output_count, &r,
                            NULL, 0);
    if (rc == NPU_OK && (k->arena == NULL || r->temp_bytes > k->arena_bytes)) {
        /* a temporary is never read before it is written: no need to clear it */
        size_t bytes = r->temp_bytes ? r->temp_bytes : 1;
        unsigned char *grown = malloc(bytes);
        if (grown == NULL) {
            rc = NPU_E_NO_MEMORY;
        } else {
            free(k->arena);
            k->arena = grown;
            k->arena_bytes = bytes;
        }
    }
    for (uint32_t s = 0; rc == NPU_OK; s++) {
        if (s == r->slice_count) {
            if (npu_plan_complete(r))
                break;
            size_t before = r->temp_bytes;
            rc = npu_plan_continue(r, &k->arena, inputs, outputs, output_shapes, NULL, 0);
            if (rc != NPU_OK)
                break;
            if (r->temp_bytes > before)  /* continue reallocated the arena to exactly that */
                k->arena_bytes = r->temp_bytes;
        }
        rc = npu_plan_run_slice(r, s, k->arena, inputs, outputs, NULL, 0);
    }
    npu_plan_end(k->plan, r);
    return rc;
}

int npu_kernel_run_model_shaped(const struct npu_model *model, const struct npu_buffer *inputs,
                                const struct npu_shape *input_shapes, uint32_t input_count,
                                const struct npu_buffer *outputs, struct npu_shape *output_shapes, uint32_t output_count)
{
    struct npu_kernel_prepared *k;
    int rc = npu_kernel_prepare(model, &k);
    if (rc != NPU_OK)
        return rc;
    rc = npu_kernel_run_prepared(k, inputs, input_shapes, input_count, outputs, output_shapes, output_count);
    npu_kernel_release(k);
    return rc;
}

int npu_kernel_run_model(const struct npu_model *model, const struct npu_buffer *inputs, uint32_t input_count,
                         const struct npu_buffer *outputs, uint32_t output_count)
{
    return npu_kernel_run_model_shaped(model, inputs, NULL, input_count, outputs, NULL, output_count);
}
