/*
 * Model validation, plans and slicing.  Validation is the one gate every
 * model passes (getSupportedOperations, load, the CPU device's run), so every
 * check that protects a kernel from reading out of bounds lives here.
 */
#include <stdlib.h>
#include <string.h>

#include "npu/errors.h"
#include "npu/model.h"
#include "plan.h"

/* A tensor larger than this (elements) is refused: the emulator computes for
 * real, and a bogus dimension must fail cleanly, not overflow size_t. */
#define MAX_ELEMENTS ((size_t)1 << 28)

static bool is_tensor(int32_t type)
{
    return type == NPU_OPERAND_TENSOR_FLOAT32 || type == NPU_OPERAND_TENSOR_INT32 ||
           type == NPU_OPERAND_TENSOR_QUANT8_ASYMM;
}

static size_t element_count(const struct npu_operand *op)
{
    size_t n = 1;
    for (uint32_t i = 0; i < op->dimension_count; i++) {
        if (op->dimensions[i] == 0 || n > MAX_ELEMENTS / op->dimensions[i])
            return 0;
        n *= op->dimensions[i];
    }
    return n;
}

size_t npu_operand_byte_size(const struct npu_operand *op)
{
    if (op == NULL || op->type < 0 || op->type >= NPU_OPERAND_TYPE_COUNT)
        return 0;
    if (op->dimension_count > NPU_MAX_RANK || (op->dimension_count > 0 && op->dimensions == NULL))
        return 0;
    size_t elem = op->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM || op->type == NPU_OPERAND_BOOL ? 1 : 4;
    return element_count(op) * elem;
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

static bool same_shape(const struct npu_operand *a, const struct npu_operand *b)
{
    if (a->dimension_count != b->dimension_count)
        return false;
    for (uint32_t i = 0; i < a->dimension_count; i++)
        if (a->dimensions[i] != b->dimensions[i])
            return false;
    return true;
}

static int check_operand(const struct npu_model *m, const struct npu_operand *op, bool lenient)
{
    if (op->type < 0 || op->type >= NPU_OPERAND_TYPE_COUNT)
        return NPU_E_BAD_OPERAND_TYPE;
    /* float32 only: the other tensor types are NNAPI's but not npuemu's; a
     * support query accepts them and answers "not computable" per operation */
    if (!lenient && is_tensor(op->type) && op->type != NPU_OPERAND_TENSOR_FLOAT32)
        return NPU_E_BAD_OPERAND_TYPE;
    if (op->lifetime < NPU_LIFETIME_TEMPORARY_VARIABLE || op->lifetime > NPU_LIFETIME_NO_VALUE)
        return NPU_E_BAD_LIFETIME;
    if (op->dimension_count > NPU_MAX_RANK)
        return NPU_E_BAD_SHAPE;
    if (op->dimension_count > 0 && op->dimensions == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (is_tensor(op->type)) {
        if (op->dimension_count == 0 || element_count(op) == 0)
            return NPU_E_BAD_SHAPE;
    } else if (op->dimension_count != 0) {
        return NPU_E_BAD_SHAPE;
    }
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
        /* offsets of float data must be aligned for the kernels to read it */
        if (loc->offset % 4 != 0)
            return NPU_E_BAD_OPERAND_LOCATION;
    }
    return NPU_OK;
}

static int tensor(const struct npu_model *m, uint32_t idx)
{
    return m->operands[idx].type == NPU_OPERAND_TENSOR_FLOAT32 ? NPU_OK : NPU_E_BAD_OPERAND_TYPE;
}

static int scalar_i32(const struct npu_model *m, uint32_t idx, int32_t *v)
{
    const struct npu_operand *op = &m->operands[idx];
    if (op->type != NPU_OPERAND_INT32 || !is_constant(op))
        return NPU_E_BAD_SCALAR;
    memcpy(v, constant_data(m, op), sizeof *v);
    return NPU_OK;
}

static int scalar_f32(const struct npu_model *m, uint32_t idx, float *v)
{
    const struct npu_operand *op = &m->operands[idx];
    if (op->type != NPU_OPERAND_FLOAT32 || !is_constant(op))
        return NPU_E_BAD_SCALAR;
    memcpy(v, constant_data(m, op), sizeof *v);
    return NPU_OK;
}

static int fuse_code(const struct npu_model *m, uint32_t idx, int32_t *fuse)
{
    int rc = scalar_i32(m, idx, fuse);
    if (rc != NPU_OK)
        return rc;
    return *fuse >= NPU_FUSE_NONE && *fuse <= NPU_FUSE_RELU6 ? NPU_OK : NPU_E_BAD_FUSE_CODE;
}

#define TRY(expr)                 \
    do {                          \
        int rc_ = (expr);         \
        if (rc_ != NPU_OK)        \
            return rc_;           \
    } while (0)

static const uint32_t *dims(const struct npu_model *m, uint32_t idx) { return m->operands[idx].dimensions; }
static uint32_t rank(const struct npu_model *m, uint32_t idx) { return m->operands[idx].dimension_count; }

/* Checks one operation's operand types and shapes and decodes it into *p
 * (which may be NULL when only validating). */
static int check_operation(const struct npu_model *m, const struct npu_operation *o, struct npu_plan_op *p)
{
    struct npu_plan_op tmp;
    if (p == NULL)
        p = &tmp;
    memset(p, 0, sizeof *p);
    p->type = o->type;
    const uint32_t *in = o->inputs;
    uint32_t out = o->outputs[0];
    p->out = out;
    TRY(tensor(m, out));
    switch (o->type) {
    case NPU_OP_ADD:
    case NPU_OP_SUB:
    case NPU_OP_MUL:
        TRY(tensor(m, in[0]));
        TRY(tensor(m, in[1]));
        if (!same_shape(&m->operands[in[0]], &m->operands[in[1]]) ||
            !same_shape(&m->operands[in[0]], &m->operands[out]))
            return NPU_E_BAD_SHAPE;
        TRY(fuse_code(m, in[2], &p->fuse));
        p->in[0] = in[0], p->in[1] = in[1];
        p->units = element_count(&m->operands[out]);
        p->flops_per_unit = 1.0, p->bytes_per_unit = 12.0;
        return NPU_OK;
    case NPU_OP_RELU:
        TRY(tensor(m, in[0]));
        if (!same_shape(&m->operands[in[0]], &m->operands[out]))
            return NPU_E_BAD_SHAPE;
        p->in[0] = in[0];
        p->units = element_count(&m->operands[out]);
        p->flops_per_unit = 1.0, p->bytes_per_unit = 8.0;
        return NPU_OK;
    case NPU_OP_FULLY_CONNECTED: {
        TRY(tensor(m, in[0]));
        TRY(tensor(m, in[1]));
        TRY(tensor(m, in[2]));
        if (rank(m, in[0]) != 2 || rank(m, in[1]) != 2 || rank(m, in[2]) != 1 || rank(m, out) != 2)
            return NPU_E_BAD_SHAPE;
        uint32_t batch = dims(m, in[0])[0], in_size = dims(m, in[0])[1], units = dims(m, in[1])[0];
        if (dims(m, in[1])[1] != in_size || dims(m, in[2])[0] != units || dims(m, out)[0] != batch ||
            dims(m, out)[1] != units)
            return NPU_E_BAD_SHAPE;
        TRY(fuse_code(m, in[3], &p->fuse));
        p->in[0] = in[0], p->in[1] = in[1], p->in[2] = in[2];
        p->fc_in = in_size, p->fc_units = units;
        p->units = (size_t)batch * units;
        p->flops_per_unit = 2.0 * in_size + 1.0;
        p->bytes_per_unit = 8.0 * in_size + 8.0;
        return NPU_OK;
    }
    case NPU_OP_CONV_2D: {
        TRY(tensor(m, in[0]));
        TRY(tensor(m, in[1]));
        TRY(tensor(m, in[2]));
        if (rank(m, in[0]) != 4 || rank(m, in[1]) != 4 || rank(m, in[2]) != 1 || rank(m, out) != 4)
            return NPU_E_BAD_SHAPE;
        struct npu_conv2d_params *c = &p->conv;
        const uint32_t *id = dims(m, in[0]), *fd = dims(m, in[1]);
        c->batches = id[0], c->in_h = id[1], c->in_w = id[2], c->in_c = id[3];
        c->out_c = fd[0], c->filter_h = fd[1], c->filter_w = fd[2];
        if (fd[3] != c->in_c || dims(m, in[2])[0] != c->out_c)
            return NPU_E_BAD_SHAPE;
        int32_t s[6];
        for (int i = 0; i < 6; i++) {
            TRY(scalar_i32(m, in[3 + i], &s[i]));
            if (s[i] < (i < 4 ? 0 : 1) || s[i] > 4096)
                return NPU_E_BAD_SCALAR;
        }
        c->pad_left = (uint32_t)s[0], c->pad_right = (uint32_t)s[1];
        c->pad_top = (uint32_t)s[2], c->pad_bottom = (uint32_t)s[3];
        c->stride_w = (uint32_t)s[4], c->stride_h = (uint32_t)s[5];
        TRY(fuse_code(m, in[9], &c->fuse));
        if (c->in_h + c->pad_top + c->pad_bottom < c->filter_h ||
            c->in_w + c->pad_left + c->pad_right < c->filter_w)
            return NPU_E_BAD_SHAPE;
        c->out_h = (c->in_h + c->pad_top + c->pad_bottom - c->filter_h) / c->stride_h + 1;
        c->out_w = (c->in_w + c->pad_left + c->pad_right - c->filter_w) / c->stride_w + 1;
        const uint32_t *od = dims(m, out);
        if (od[0] != c->batches || od[1] != c->out_h || od[2] != c->out_w || od[3] != c->out_c)
            return NPU_E_BAD_SHAPE;
        p->fuse = c->fuse;
        p->in[0] = in[0], p->in[1] = in[1], p->in[2] = in[2];
        p->units = (size_t)c->batches * c->out_h * c->out_w;
        double taps = (double)c->filter_h * c->filter_w * c->in_c;
        p->flops_per_unit = 2.0 * taps * c->out_c;
        p->bytes_per_unit = 4.0 * (taps + c->out_c);
        return NPU_OK;
    }
    case NPU_OP_SOFTMAX: {
        TRY(tensor(m, in[0]));
        if (!same_shape(&m->operands[in[0]], &m->operands[out]))
            return NPU_E_BAD_SHAPE;
        TRY(scalar_f32(m, in[1], &p->beta));
        if (!(p->beta > 0.0f))
            return NPU_E_BAD_SCALAR;
        uint32_t r = rank(m, in[0]);
        p->sm_n = dims(m, in[0])[r - 1];
        p->in[0] = in[0];
        p->units = element_count(&m->operands[in[0]]) / p->sm_n;
        p->flops_per_unit = 5.0 * p->sm_n, p->bytes_per_unit = 8.0 * p->sm_n;
        return NPU_OK;
    }
    default:
        return NPU_E_BAD_OPERATION;
    }
}

static int expected_inputs(int32_t type)
{
    switch (type) {
    case NPU_OP_ADD:
    case NPU_OP_SUB:
    case NPU_OP_MUL:
        return 3;
    case NPU_OP_RELU:
        return 1;
    case NPU_OP_FULLY_CONNECTED:
        return 4;
    case NPU_OP_CONV_2D:
        return 10;
    case NPU_OP_SOFTMAX:
        return 2;
    default:
        return -1;
    }
}

/* The whole-model checks; fills ops[] when it is not NULL.  With computable
 * not NULL it is the lenient support check (npu_model_check_support). */
static int validate(const struct npu_model *m, uint32_t *bad_op, struct npu_plan_op *ops, bool *computable)
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
        TRY(check_operand(m, &m->operands[i], lenient));

    unsigned char *defined = calloc(m->operand_count, 1);
    unsigned char *listed = calloc(m->operand_count, 1);
    int rc = NPU_OK;
    if (!defined || !listed) {
        rc = NPU_E_NO_MEMORY;
        goto out;
    }
    for (uint32_t i = 0; i < m->operand_count; i++)
        defined[i] = is_constant(&m->operands[i]) || m->operands[i].lifetime == NPU_LIFETIME_MODEL_INPUT;
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
        int want = expected_inputs(o->type);
        bool known = want >= 0 && o->input_count == (uint32_t)want && o->output_count == 1;
        if ((!known && !lenient) || o->output_count == 0) {
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
        if (rc != NPU_OK)
            break;
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
        if (known)
            rc = check_operation(m, o, ops ? &ops[k] : NULL);
        if (lenient) {
            computable[k] = known && rc == NPU_OK;
            if (rc == NPU_E_BAD_OPERAND_TYPE)
                rc = NPU_OK; /* e.g. a quantized ADD: valid NNAPI, not ours to run */
        }
        for (uint32_t i = 0; i < o->output_count; i++)
            defined[o->outputs[i]] = 1;
    }
    if (rc == NPU_OK) {
        *bad_op = UINT32_MAX;
        for (uint32_t i = 0; i < m->output_count; i++)
            if (!defined[m->output_indexes[i]])
                rc = NPU_E_BAD_MODEL_IO;
    }
out:
    free(defined);
    free(listed);
    return rc;
}

int npu_model_validate(const struct npu_model *model, uint32_t *bad_operation)
{
    uint32_t dummy;
    return validate(model, bad_operation ? bad_operation : &dummy, NULL, NULL);
}

int npu_model_check_support(const struct npu_model *model, bool *computable, uint32_t *bad_operation)
{
    uint32_t dummy;
    if (model && model->operation_count && !computable)
        return NPU_E_INVALID_ARGUMENT;
    return validate(model, bad_operation ? bad_operation : &dummy, NULL, computable);
}

void npu_plan_destroy(struct npu_plan *p)
{
    if (!p)
        return;
    free(p->operands);
    free(p->ops);
    free(p->slices);
    free(p->inputs);
    free(p->outputs);
    free(p->consts);
    free(p);
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
    if (!p->ops) {
        free(p);
        return NPU_E_NO_MEMORY;
    }
    uint32_t bad;
    int rc = validate(m, &bad, p->ops, NULL);
    if (rc != NPU_OK) {
        npu_plan_destroy(p);
        return rc;
    }
    p->op_count = m->operation_count;
    p->operand_count = m->operand_count;
    p->input_count = m->input_count;
    p->output_count = m->output_count;
    p->operands = calloc(m->operand_count, sizeof *p->operands);
    p->inputs = calloc(m->input_count ? m->input_count : 1, sizeof *p->inputs);
    p->outputs = calloc(m->output_count, sizeof *p->outputs);
    if (!p->operands || !p->inputs || !p->outputs)
        goto nomem;
    memcpy(p->inputs, m->input_indexes, m->input_count * sizeof *p->inputs);
    memcpy(p->outputs, m->output_indexes, m->output_count * sizeof *p->outputs);
    for (uint32_t i = 0; i < m->operand_count; i++) {
        const struct npu_operand *src = &m->operands[i];
        struct npu_plan_operand *dst = &p->operands[i];
        dst->type = src->type;
        dst->lifetime = src->lifetime;
        dst->rank = src->dimension_count;
        if (src->dimension_count)
            memcpy(dst->dims, src->dimensions, src->dimension_count * sizeof *dst->dims);
        /* round to 16 bytes so every tensor in an arena is aligned for float */
        dst->bytes = npu_operand_byte_size(src);
        size_t padded = (dst->bytes + 15) & ~(size_t)15;
        if (is_constant(src)) {
            dst->offset = p->const_bytes;
            p->const_bytes += padded;
        } else if (src->lifetime == NPU_LIFETIME_TEMPORARY_VARIABLE) {
            dst->offset = p->temp_bytes;
            p->temp_bytes += padded;
        }
    }
    for (uint32_t i = 0; i < m->input_count; i++)
        p->operands[m->input_indexes[i]].io_index = i;
    for (uint32_t i = 0; i < m->output_count; i++)
        p->operands[m->output_indexes[i]].io_index = i;
    p->consts = malloc(p->const_bytes ? p->const_bytes : 1);
    if (!p->consts)
        goto nomem;
    for (uint32_t i = 0; i < m->operand_count; i++)
        if (is_constant(&m->operands[i]))
            memcpy(p->consts + p->operands[i].offset, constant_data(m, &m->operands[i]), p->operands[i].bytes);

    size_t max_slices = (size_t)m->operation_count * slices_per_op;
    p->slices = calloc(max_slices, sizeof *p->slices);
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
            sl->flops = op->flops_per_unit * (double)(sl->end - sl->begin);
            sl->bytes = op->bytes_per_unit * (double)(sl->end - sl->begin);
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

static float *tensor_ptr(const struct npu_plan *p, uint32_t idx, unsigned char *arena,
                         const struct npu_buffer *in, const struct npu_buffer *out)
{
    const struct npu_plan_operand *o = &p->operands[idx];
    switch (o->lifetime) {
    case NPU_LIFETIME_MODEL_INPUT:
        return (float *)in[o->io_index].data;
    case NPU_LIFETIME_MODEL_OUTPUT:
        return (float *)out[o->io_index].data;
    case NPU_LIFETIME_TEMPORARY_VARIABLE:
        return (float *)(arena + o->offset);
    default:
        return (float *)(p->consts + o->offset);
    }
}

void npu_plan_run_slice(const struct npu_plan *p, uint32_t slice, unsigned char *arena,
                        const struct npu_buffer *in, const struct npu_buffer *out)
{
    const struct npu_plan_slice *s = &p->slices[slice];
    const struct npu_plan_op *op = &p->ops[s->op];
    float *dst = tensor_ptr(p, op->out, arena, in, out);
    const float *a = tensor_ptr(p, op->in[0], arena, in, out);
    switch (op->type) {
    case NPU_OP_ADD:
        npu_kernel_add(a, tensor_ptr(p, op->in[1], arena, in, out), dst, s->begin, s->end, op->fuse);
        break;
    case NPU_OP_SUB:
        npu_kernel_sub(a, tensor_ptr(p, op->in[1], arena, in, out), dst, s->begin, s->end, op->fuse);
        break;
    case NPU_OP_MUL:
        npu_kernel_mul(a, tensor_ptr(p, op->in[1], arena, in, out), dst, s->begin, s->end, op->fuse);
        break;
    case NPU_OP_RELU:
        npu_kernel_relu(a, dst, s->begin, s->end);
        break;
    case NPU_OP_FULLY_CONNECTED:
        npu_kernel_fully_connected(a, tensor_ptr(p, op->in[1], arena, in, out),
                                   tensor_ptr(p, op->in[2], arena, in, out), dst, op->fc_in,
                                   op->fc_units, s->begin, s->end, op->fuse);
        break;
    case NPU_OP_CONV_2D:
        npu_kernel_conv2d(a, tensor_ptr(p, op->in[1], arena, in, out), tensor_ptr(p, op->in[2], arena, in, out),
                          dst, &op->conv, s->begin, s->end);
        break;
    case NPU_OP_SOFTMAX:
        npu_kernel_softmax(a, dst, op->sm_n, op->beta, s->begin, (size_t)s->end);
        break;
    }
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
        npu_plan_run_slice(p, s, arena, inputs, outputs);
    free(arena);
    npu_plan_destroy(p);
    return rc;
}
