/*
 * kernels/bind.c - the bindings' shared checks and the lookup over every table.
 * See npu/bind.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "npu/bind.h"
#include "npu/errors.h"

static const char *const OPERATION_NAMES[] = {
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D",
    "DEPTH_TO_SPACE", "DEQUANTIZE", "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED",
    "HASHTABLE_LOOKUP", "L2_NORMALIZATION", "L2_POOL_2D", "LOCAL_RESPONSE_NORMALIZATION",
    "LOGISTIC", "LSH_PROJECTION", "LSTM", "MAX_POOL_2D", "MUL", "RELU", "RELU1", "RELU6",
    "RESHAPE", "RESIZE_BILINEAR", "RNN", "SOFTMAX", "SPACE_TO_DEPTH", "SVDF", "TANH",
    "BATCH_TO_SPACE_ND", "DIV", "MEAN", "PAD", "SPACE_TO_BATCH_ND", "SQUEEZE",
    "STRIDED_SLICE", "SUB", "TRANSPOSE", "ABS", "ARGMAX", "ARGMIN",
    "AXIS_ALIGNED_BBOX_TRANSFORM", "BIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_RNN",
    "BOX_WITH_NMS_LIMIT", "CAST", "CHANNEL_SHUFFLE", "DETECTION_POSTPROCESSING", "EQUAL", "EXP",
    "EXPAND_DIMS", "GATHER", "GENERATE_PROPOSALS", "GREATER", "GREATER_EQUAL",
    "GROUPED_CONV_2D", "HEATMAP_MAX_KEYPOINT", "INSTANCE_NORMALIZATION", "LESS", "LESS_EQUAL",
    "LOG", "LOGICAL_AND", "LOGICAL_NOT", "LOGICAL_OR", "LOG_SOFTMAX", "MAXIMUM", "MINIMUM",
    "NEG", "NOT_EQUAL", "PAD_V2", "POW", "PRELU", "QUANTIZE", "QUANTIZED_16BIT_LSTM",
    "RANDOM_MULTINOMIAL", "REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD",
    "REDUCE_SUM", "ROI_ALIGN", "ROI_POOLING", "RSQRT", "SELECT", "SIN", "SLICE", "SPLIT", "SQRT",
    "TILE", "TOPK_V2", "TRANSPOSE_CONV_2D", "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "RESIZE_NEAREST_NEIGHBOR",
};
enum { OPERATION_COUNT = sizeof OPERATION_NAMES / sizeof OPERATION_NAMES[0] };

static const char *const TYPE_NAMES[] = {
    "FLOAT32", "INT32", "UINT32", "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM",
    "BOOL", "TENSOR_QUANT16_SYMM", "TENSOR_FLOAT16", "TENSOR_BOOL8", "FLOAT16",
    "TENSOR_QUANT8_SYMM_PER_CHANNEL", "TENSOR_QUANT16_ASYMM", "TENSOR_QUANT8_SYMM",
};

const char *npu_bind_name(int32_t type)
{
    static _Thread_local char other[32];
    if (type >= 0 && type < OPERATION_COUNT)
        return OPERATION_NAMES[type];
    snprintf(other, sizeof other, "operation %d", (int)type);
    return other;
}

const char *npu_bind_type_name(int32_t type)
{
    if (type >= 0 && type < (int32_t)(sizeof TYPE_NAMES / sizeof TYPE_NAMES[0]))
        return TYPE_NAMES[type];
    return "an unknown type";
}

static bool is_scalar_type(int32_t type)
{
    return type == NPU_OPERAND_FLOAT32 || type == NPU_OPERAND_INT32 || type == NPU_OPERAND_UINT32 ||
           type == NPU_OPERAND_BOOL || type == NPU_OPERAND_FLOAT16;
}

const struct npu_op_def *npu_bind_lookup(int32_t type)
{
    static const struct npu_op_def *const TABLES[] = {
        npu_bind_core, npu_bind_math, npu_bind_index, npu_bind_recurrent, npu_bind_detection,
    };
    for (size_t t = 0; t < sizeof TABLES / sizeof TABLES[0]; t++)
        for (const struct npu_op_def *d = TABLES[t]; d->type >= 0; d++)
            if (d->type == type)
                return d;
    return NULL;
}

int npu_bind_fail(struct npu_bind_call *c, int status, const char *fmt, ...)
{
    int n = snprintf(c->why, sizeof c->why, "%s: ", npu_bind_name(c->type));
    if (n < 0 || (size_t)n >= sizeof c->why)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why + n, sizeof c->why - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

/* prepare, then (when run) every unit of run; the sentence copied to why */
static int bind_call(int32_t type, const struct npu_arg *in, uint32_t input_count,
                     struct npu_arg *out, uint32_t output_count, bool run, char *why, size_t why_len)
{
    struct npu_bind_call c = {.type = type, .input_count = input_count,
                              .output_count = output_count, .in = in, .out = out};
    int rc;
    const struct npu_op_def *def = npu_bind_lookup(type);
    if (!def)
        rc = npu_bind_fail(&c, NPU_E_BAD_OPERATION, "npuemu has no binding for this operation");
    else if ((input_count && !in) || (output_count && !out))
        rc = npu_bind_fail(&c, NPU_E_INVALID_ARGUMENT, "NULL operand list");
    else
        rc = def->prepare(&c);
    if (rc == NPU_OK && run) {
        for (uint32_t i = 0; i < output_count && rc == NPU_OK; i++)
            if (!out[i].has_shape)
                rc = npu_bind_fail(&c, NPU_E_BAD_SHAPE, "output %u's shape is still unknown", (unsigned)i);
        if (rc == NPU_OK)
            rc = def->run(&c, 0, def->units ? def->units(&c) : 1);
    }
    if (why && why_len) {
        strncpy(why, c.why, why_len - 1);
        why[why_len - 1] = '\0';
    }
    return rc;
}

int npu_bind_check(int32_t type, const struct npu_arg *in, uint32_t input_count,
                   struct npu_arg *out, uint32_t output_count, char *why, size_t why_len)
{
    return bind_call(type, in, input_count, out, output_count, false, why, why_len);
}

int npu_bind_run(int32_t type, const struct npu_arg *in, uint32_t input_count,
                 struct npu_arg *out, uint32_t output_count, char *why, size_t why_len)
{
    return bind_call(type, in, input_count, out, output_count, true, why, why_len);
}

int npu_bind_counts(struct npu_bind_call *c, uint32_t in_lo, uint32_t in_hi, uint32_t n_out)
{
    if (c->input_count < in_lo || c->input_count > in_hi) {
        if (in_lo == in_hi)
            return npu_bind_fail(c, NPU_E_BAD_OPERATION, "takes %u inputs, not %u",
                                 (unsigned)in_lo, (unsigned)c->input_count);
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "takes %u to %u inputs, not %u",
                             (unsigned)in_lo, (unsigned)in_hi, (unsigned)c->input_count);
    }
    if (c->output_count != n_out)
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "has %u output%s, not %u", (unsigned)n_out,
                             n_out == 1 ? "" : "s", (unsigned)c->output_count);
    return NPU_OK;
}

int npu_bind_tensor(struct npu_bind_call *c, uint32_t i, const int32_t *types, uint32_t n)
{
    if (i >= c->input_count)
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "input %u is missing", (unsigned)i);
    const struct npu_arg *a = &c->in[i];
    if (a->omitted)
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "input %u may not be omitted", (unsigned)i);
    for (uint32_t k = 0; k < n; k++)
        if (a->t.type == types[k])
            return NPU_OK;
    char allowed[120] = "";
    size_t used = 0;
    for (uint32_t k = 0; k < n && used < sizeof allowed; k++)
        used += (size_t)snprintf(allowed + used, sizeof allowed - used, "%s%s",
                                 k ? (k + 1 == n ? " or " : ", ") : "", npu_bind_type_name(types[k]));
    return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "input %u must be %s, not %s", (unsigned)i,
                         allowed, npu_bind_type_name(a->t.type));
}

/* Input i must be a present scalar of type; *data its value or NULL when unknown. */
static int scalar(struct npu_bind_call *c, uint32_t i, int32_t type, const void **data)
{
    if (i >= c->input_count)
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "input %u is missing", (unsigned)i);
    const struct npu_arg *a = &c->in[i];
    if (a->omitted)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (a %s scalar) may not be omitted",
                             (unsigned)i, npu_bind_type_name(type));
    if (a->t.type != type)
        return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "input %u must be a %s scalar, not %s",
                             (unsigned)i, npu_bind_type_name(type), npu_bind_type_name(a->t.type));
    if (a->has_rank && a->t.rank != 0)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u (a %s scalar) has dimensions",
                             (unsigned)i, npu_bind_type_name(type));
    *data = a->t.data;
    return NPU_OK;
}

static int unknown(struct npu_bind_call *c, uint32_t i, bool *known)
{
    if (known) {
        *known = false;
        return NPU_OK;
    }
    return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u must be a constant here", (unsigned)i);
}

int npu_bind_i32(struct npu_bind_call *c, uint32_t i, int32_t *value, bool *known)
{
    const void *data;
    int rc = scalar(c, i, NPU_OPERAND_INT32, &data);
    if (rc != NPU_OK)
        return rc;
    if (!data)
        return unknown(c, i, known);
    memcpy(value, data, sizeof *value);
    if (known)
        *known = true;
    return NPU_OK;
}

int npu_bind_f32(struct npu_bind_call *c, uint32_t i, int32_t scalar_type, float *value, bool *known)
{
    if (scalar_type != NPU_OPERAND_FLOAT32 && scalar_type != NPU_OPERAND_FLOAT16)
        return npu_bind_fail(c, NPU_E_INVALID_ARGUMENT, "binding asked input %u for %s",
                             (unsigned)i, npu_bind_type_name(scalar_type));
    const void *data;
    int rc = scalar(c, i, scalar_type, &data);
    if (rc != NPU_OK)
        return rc;
    if (!data)
        return unknown(c, i, known);
    if (scalar_type == NPU_OPERAND_FLOAT16) {
        uint16_t h;
        memcpy(&h, data, sizeof h);
        *value = npu_half_to_float(h);
    } else {
        memcpy(value, data, sizeof *value);
    }
    if (known)
        *known = true;
    return NPU_OK;
}

int npu_bind_bool(struct npu_bind_call *c, uint32_t i, bool *value, bool *known)
{
    const void *data;
    int rc = scalar(c, i, NPU_OPERAND_BOOL, &data);
    if (rc != NPU_OK)
        return rc;
    if (!data)
        return unknown(c, i, known);
    uint8_t b;
    memcpy(&b, data, 1);
    *value = b != 0;
    if (known)
        *known = true;
    return NPU_OK;
}

int npu_bind_set_shape(struct npu_bind_call *c, uint32_t i, uint32_t rank, const uint32_t *dims)
{
    if (i >= c->output_count)
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "output %u is missing", (unsigned)i);
    if (rank > NPU_MAX_RANK)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "output %u would have rank %u (at most %d)",
                             (unsigned)i, (unsigned)rank, NPU_MAX_RANK);
    struct npu_arg *o = &c->out[i];
    if (o->has_rank && !is_scalar_type(o->t.type) && o->t.rank != rank)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "output %u is declared of rank %u, computes rank %u",
                             (unsigned)i, (unsigned)o->t.rank, (unsigned)rank);
    if (o->has_rank) {
        for (uint32_t k = 0; k < rank; k++) {
            bool declared = o->has_shape || o->t.dims[k] != 0;
            if (declared && o->t.dims[k] != dims[k])
                return npu_bind_fail(c, NPU_E_BAD_SHAPE,
                                     "output %u dimension %u is declared %u, computes %u",
                                     (unsigned)i, (unsigned)k, (unsigned)o->t.dims[k], (unsigned)dims[k]);
        }
    }
    o->t.rank = rank;
    for (uint32_t k = 0; k < rank; k++)
        o->t.dims[k] = dims[k];
    o->has_rank = o->has_shape = true;
    return NPU_OK;
}

double npu_bind_io_bytes(const struct npu_bind_call *c)
{
    double bytes = 0;
    for (uint32_t i = 0; i < c->input_count; i++)
        if (!c->in[i].omitted && !is_scalar_type(c->in[i].t.type))
            bytes += (double)npu_ops_byte_size(&c->in[i].t);
    for (uint32_t i = 0; i < c->output_count; i++)
        bytes += (double)npu_ops_byte_size(&c->out[i].t);
    return bytes;
}

void npu_bind_cost(const struct npu_op_def *def, const struct npu_bind_call *c, double *flops, double *bytes)
{
    if (def->cost) {
        def->cost(c, flops, bytes);
        return;
    }
    *flops = 0;
    for (uint32_t i = 0; i < c->output_count; i++)
        *flops += (double)npu_ops_element_count(&c->out[i].t);
    *bytes = npu_bind_io_bytes(c);
}

bool npu_bind_quant_range(int32_t type, int32_t *lo, int32_t *hi)
{
    *lo = *hi = 0;
    switch (type) {
    case NPU_OPERAND_TENSOR_QUANT8_ASYMM:
        *hi = 255;
        return true;
    case NPU_OPERAND_TENSOR_QUANT16_ASYMM:
        *hi = 65535;
        return true;
    case NPU_OPERAND_TENSOR_QUANT8_SYMM: case NPU_OPERAND_TENSOR_QUANT16_SYMM:
        return true;
    default:
        return false;
    }
}
