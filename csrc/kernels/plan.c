/*
 * Model validation, plans and slicing.  Validation is the one gate every
 * model passes (getSupportedOperations, load, the CPU device's run): the
 * model's structure is checked here (operand types, quantization, lifetimes,
 * locations, indexes, the order of writes and reads), each operation by its
 * binding (npu/bind.h), prepared in order with the constants' data so that
 * the shapes it computes flow forward to the operations that read them.
 */
#include <math.h>
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
     * that writes it; what a model input or a constant holds must be known */
    bool computed = op->lifetime == NPU_LIFETIME_TEMPORARY_VARIABLE || op->lifetime == NPU_LIFETIME_MODEL_OUTPUT;
    if (!computed && op->lifetime != NPU_LIFETIME_NO_VALUE && !shape_known(op))
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
        for (uint32_t i = 0; i < o->output_count; i++)
            defined[o->outputs[i]] = 1;
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
                if (element_count(c.out[i].t.rank, c.out[i].t.dims) == 0 && c.out[i].t.rank > 0) {
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
            bool known = true;
            for (uint32_t i = 0; i < n; i++)
                known &= args[i].omitted || is_scalar(args[i].t.type) ||
                         ops[i < o->input_count ? o->inputs[i] : o->outputs[i - o->input_count]].has_shape;
            if (!known) {
                /* every shape must be known at load time (dynamic shapes come later) */
                rc = NPU_E_BAD_SHAPE;
                break;
            }
            make_call(ops, o->type, o->input_count, o->inputs, o->output_count, o->outputs, args, &c);
            p->units = def->units ? def->units(&c) : 1;
            if (p->units == 0)
                p->units = 1;
            npu_bind_cost(def, &c, &p->flops, &p->bytes);
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
    for (uint32_t k = 0; p->ops && k < p->op_count; k++)
        free(p->ops[k].operands);
    free(p->operands);
    free(p->ops);
    free(p->slices);
    free(p->inputs);
    free(p->outputs);
    free(p->consts);
    free(p->channel_scales);
    free(p);
}

/* Copies the constants and the per-channel scales into the plan, lays out
 * the temporaries in the arena, and points the descriptors at the copies. */
static int own_memory(const struct npu_model *m, struct npu_plan *p)
{
    size_t scale_count = 0;
    for (uint32_t i = 0; i < m->operand_count; i++) {
        struct npu_plan_operand *d = &p->operands[i];
        d->bytes = d->has_shape && !(d->lifetime == NPU_LIFETIME_NO_VALUE)
                       ? (is_scalar(d->t.type) ? ops_element_size(d->t.type)
                                               : element_count(d->t.rank, d->t.dims) * ops_element_size(d->t.type))
                       : 0;
        /* round to 16 bytes so every tensor in an arena is aligned for float */
        size_t padded = (d->bytes + 15) & ~(size_t)15;
        if (is_constant(&m->operands[i])) {
            d->offset = p->const_bytes;
            p->const_bytes += padded;
        } else if (d->lifetime == NPU_LIFETIME_TEMPORARY_VARIABLE) {
            d->offset = p->temp_bytes;
            p->temp_bytes += padded;
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

int npu_plan_create(const struct npu_model *m, uint32_t slices_per_op, struct npu_plan **out)
{
    if (out == NULL || m == NULL)
        return NPU_E_INVALID_ARGUMENT;
    *out = NULL;
    if (slices_per_op == 0)
        slices_per_op = 1;
    struct npu_plan *p = calloc(1, sizeof *p);
    if (!p)
        return NPU_E_NO_MEMORY;
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
    size_t max_slices = 0;
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
        max_slices += op->units < slices_per_op ? op->units : slices_per_op;
    }
    p->slices = calloc(max_slices ? max_slices : 1, sizeof *p->slices);
    if (!p->slices)
        goto nomem;
    for (uint32_t k = 0; k < p->op_count; k++) {
        const struct npu_plan_op *op = &p->ops[k];
        size_t n = op->units < slices_per_op ? op->units : slices_per_op;
        for (size_t s = 0; s < n; s++) {
            struct npu_plan_slice *sl = &p->slices[p->slice_count++];
            sl->op = k;
            sl->begin = s * op->units / n;
            sl->end = (s + 1) * op->units / n;
            double share = (double)(sl->end - sl->begin) / (double)op->units;
            sl->flops = op->flops * share;
            sl->bytes = op->bytes * share;
        }
    }
    *out = p;
    return NPU_OK;
nomem:
    npu_plan_destroy(p);
    return NPU_E_NO_MEMORY;
}

int npu_plan_check_buffers(const struct npu_plan *p, const struct npu_buffer *in, uint32_t n_in,
                           const struct npu_buffer *outb, uint32_t n_out)
{
    if (n_in != p->input_count || n_out != p->output_count)
        return NPU_E_BAD_BUFFER;
    if ((n_in && !in) || (n_out && !outb))
        return NPU_E_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < n_in; i++)
        if (in[i].data == NULL || in[i].length != p->operands[p->inputs[i]].bytes)
            return NPU_E_BAD_BUFFER;
    for (uint32_t i = 0; i < n_out; i++)
        if (outb[i].data == NULL || outb[i].length != p->operands[p->outputs[i]].bytes)
            return NPU_E_BAD_BUFFER;
    return NPU_OK;
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

int npu_plan_run_slice(const struct npu_plan *p, uint32_t slice, unsigned char *arena,
                       const struct npu_buffer *in, const struct npu_buffer *out, char *why, size_t why_len)
{
    const struct npu_plan_slice *s = &p->slices[slice];
    const struct npu_plan_op *op = &p->ops[s->op];
    uint32_t n = op->input_count + op->output_count;
    struct npu_arg *args = malloc(n * sizeof *args);
    if (!args)
        return NPU_E_NO_MEMORY;
    struct npu_bind_call c;
    make_call(p->operands, op->def->type, op->input_count, op->operands, op->output_count,
              op->operands + op->input_count, args, &c);
    for (uint32_t i = 0; i < n; i++)
        args[i].t.data = tensor_ptr(p, op->operands[i], arena, in, out);
    int rc = op->def->run(&c, s->begin, s->end);
    free(args);
    if (why && why_len) {
        strncpy(why, c.why, why_len - 1);
        why[why_len - 1] = '\0';
    }
    return rc;
}

int npu_kernel_run_model(const struct npu_model *model, const struct npu_buffer *inputs, uint32_t input_count,
                         const struct npu_buffer *outputs, uint32_t output_count)
{
    struct npu_plan *p;
    int rc = npu_plan_create(model, 1, &p);
    if (rc != NPU_OK)
        return rc;
    rc = npu_plan_check_buffers(p, inputs, input_count, outputs, output_count);
    unsigned char *arena = NULL;
    if (rc == NPU_OK) {
        arena = malloc(p->temp_bytes ? p->temp_bytes : 1);
        if (!arena)
            rc = NPU_E_NO_MEMORY;
    }
    for (uint32_t s = 0; rc == NPU_OK && s < p->slice_count; s++)
        rc = npu_plan_run_slice(p, s, arena, inputs, outputs, NULL, 0);
    free(arena);
    npu_plan_destroy(p);
    return rc;
}
