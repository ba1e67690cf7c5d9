/*
 * Element-wise operations.  ADD, SUB and MUL broadcast (rank <= 4, aligned
 * from the right); quantized, they compute in integers as Android's reference
 * does (ADD and SUB rescale both inputs to twice the larger scale with 20 bits
 * of headroom, MUL requantizes the product of the centred values).  The other
 * operations compute each real value in double and store it in the output's
 * type (quantized with the output's parameters).
 */
#include <math.h>
#include <stdlib.h>

#include "ops_internal.h"

enum arith { ARITH_ADD, ARITH_SUB, ARITH_MUL, ARITH_MAX, ARITH_MIN };

static int32_t clamp32(int64_t v, int32_t lo, int32_t hi)
{
    return (int32_t)(v < lo ? lo : (v > hi ? hi : v));
}

/* One row of a float32 ADD, SUB, MUL, MAXIMUM or MINIMUM: o[j] = x[j * sx] op
 * y[j * sy] for j < n, sx and sy 1 or 0 (broadcast), eight at a time.  Each float
 * operation is the correctly rounded one, as the double computation rounded to
 * float is, so the results are those of the generic path. */
#define ARITH_ROW(VEXPR, SEXPR)                                                                    \
    do {                                                                                           \
        v8f x = OPS_V8_SPLAT(xs[0]), y = OPS_V8_SPLAT(ys[0]);                                      \
        for (; j + 8 <= n; j += 8) {                                                               \
            if (sx)                                                                                \
                LOAD(x, xs + j);                                                                   \
            if (sy)                                                                                \
                LOAD(y, ys + j);                                                                   \
            v8f v = VEXPR;                                                                         \
            STORE(o + j, v);                                                                       \
        }                                                                                          \
        for (; j < n; j++) {                                                                       \
            float xj = xs[j * sx], yj = ys[j * sy];                                                \
            o[j] = SEXPR;                                                                          \
        }                                                                                          \
    } while (0)

OPS_CLONES
static void arith_row_f32(enum arith op, const float *xs, size_t sx, const float *ys, size_t sy, float *o, size_t n)
{
    size_t j = 0;
    if (n == 0)
        return;
    switch (op) {
    case ARITH_ADD: ARITH_ROW(x + y, xj + yj); break;
    case ARITH_SUB: ARITH_ROW(x - y, xj - yj); break;
    case ARITH_MUL: ARITH_ROW(x * y, xj * yj); break;
    case ARITH_MAX: ARITH_ROW(OPS_V8_SELECT(x > y, x, y), xj > yj ? xj : yj); break;
    default: ARITH_ROW(OPS_V8_SELECT(x < y, x, y), xj < yj ? xj : yj); break;
    }
}

static int arithmetic(enum arith op, const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse,
                      const struct npu_tensor *out)
{
    OPS_TRY(ops_check(a));
    OPS_TRY(ops_check(b));
    OPS_TRY(ops_check(out));
    bool extreme = op == ARITH_MAX || op == ARITH_MIN;
    if (extreme)
        OPS_TRY(ops_type_in(a, 4, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_QUANT8_ASYMM,
                            NPU_OPERAND_TENSOR_INT32));
    else
        OPS_TRY(ops_type_in(a, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    if (b->type != a->type || out->type != a->type)
        return NPU_E_BAD_OPERAND_TYPE;
    OPS_TRY(ops_check_fuse(fuse));
    struct ops_broadcast bc;
    OPS_TRY(ops_broadcast(a, b, out, 4, &bc));
    if (a->type == NPU_OPERAND_TENSOR_FLOAT32) {
        float lo, hi;
        ops_float_bounds(fuse, &lo, &hi);
        const float *xa = a->data, *xb = b->data;
        float *dst = out->data;
        OPS_FOR_BROADCAST_ROWS(bc, i, ia, ib) {
            arith_row_f32(op, xa + ia, bc.sa[5], xb + ib, bc.sb[5], dst + i, bc.dims[5]);
            if (fuse != NPU_FUSE_NONE)
                ops_clamp_f32(dst + i, dst + i, bc.dims[5], lo, hi);
        }
        return NPU_OK;
    }
    if (a->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM || extreme) {
        /* real values (MAXIMUM and MINIMUM pick one, requantized to the output's) */
        float lo, hi;
        ops_float_bounds(fuse, &lo, &hi);
        OPS_FOR_BROADCAST(bc, i, ia, ib) {
            double x = ops_get(a, ia), y = ops_get(b, ib), v;
            switch (op) {
            case ARITH_ADD: v = x + y; break;
            case ARITH_SUB: v = x - y; break;
            case ARITH_MUL: v = x * y; break;
            case ARITH_MAX: v = x > y ? x : y; break;
            default: v = x < y ? x : y; break;
            }
            ops_set(out, i, v < lo ? lo : (v > hi ? hi : v));
        }
        return NPU_OK;
    }
    const uint8_t *xa = a->data, *xb = b->data;
    uint8_t *dst = out->data;
    int32_t lo, hi;
    ops_quant_bounds(fuse, out, &lo, &hi);
    if (op == ARITH_MUL) {
        int32_t q, s;
        double product = (double)a->scale * b->scale;
        if (!(out->scale > product))
            return NPU_E_BAD_SCALAR;  /* the 1.2 reference's rule for quantized MUL */
        OPS_TRY(npu_quantize_multiplier(product / out->scale, &q, &s));
        OPS_FOR_BROADCAST(bc, i, ia, ib) {
            int32_t acc = ((int32_t)xa[ia] - a->zero_point) * ((int32_t)xb[ib] - b->zero_point);
            dst[i] = (uint8_t)clamp32((int64_t)npu_multiply_by_quantized_multiplier(acc, q, s) + out->zero_point, lo, hi);
        }
        return NPU_OK;
    }
    const int left_shift = 20;
    double twice_max = 2.0 * (a->scale > b->scale ? a->scale : b->scale);
    int32_t q1, s1, q2, s2, qo, so;
    OPS_TRY(npu_quantize_multiplier(a->scale / twice_max, &q1, &s1));
    OPS_TRY(npu_quantize_multiplier(b->scale / twice_max, &q2, &s2));
    OPS_TRY(npu_quantize_multiplier(twice_max / ((double)(1 << left_shift) * out->scale), &qo, &so));
    if (op == ARITH_SUB)
        q2 = -q2;
    /* each input's rescaled term, per stored value */
    int32_t ta[256], tb[256];
    for (int32_t v = 0; v < 256; v++) {
        ta[v] = npu_multiply_by_quantized_multiplier((v - a->zero_point) * (1 << left_shift), q1, s1);
        tb[v] = npu_multiply_by_quantized_multiplier((v - b->zero_point) * (1 << left_shift), q2, s2);
    }
    OPS_FOR_BROADCAST_ROWS(bc, i, ia, ib) {
        const uint8_t *ra = xa + ia, *rb = xb + ib;
        size_t sa = bc.sa[5], sb = bc.sb[5];
        for (size_t j = 0; j < bc.dims[5]; j++) {
            int64_t total = (int64_t)ta[ra[j * sa]] + tb[rb[j * sb]];
            int32_t raw = npu_multiply_by_quantized_multiplier(clamp32(total, INT32_MIN, INT32_MAX), qo, so);
            dst[i + j] = (uint8_t)clamp32((int64_t)raw + out->zero_point, lo, hi);
        }
    }
    return NPU_OK;
}

int npu_op_add(const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse, const struct npu_tensor *output)
{
    return arithmetic(ARITH_ADD, a, b, fuse, output);
}

int npu_op_sub(const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse, const struct npu_tensor *output)
{
    return arithmetic(ARITH_SUB, a, b, fuse, output);
}

int npu_op_mul(const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse, const struct npu_tensor *output)
{
    return arithmetic(ARITH_MUL, a, b, fuse, output);
}

int npu_op_maximum(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return arithmetic(ARITH_MAX, a, b, 0, output);
}

int npu_op_minimum(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return arithmetic(ARITH_MIN, a, b, 0, output);
}

/* -- one input, one output of its shape ----------------------------------------- */

enum unary { U_RELU, U_RELU1, U_RELU6, U_LOGISTIC, U_TANH };

/* The real result of fn at v, in double (each path stores it in its type). */
static double unary_value(enum unary fn, double v)
{
    switch (fn) {
    case U_RELU:
        return v < 0.0 ? 0.0 : v;
    case U_RELU1:
        return v < -1.0 ? -1.0 : (v > 1.0 ? 1.0 : v);
    case U_RELU6:
        return v < 0.0 ? 0.0 : (v > 6.0 ? 6.0 : v);
    case U_LOGISTIC:
        return 1.0 / (1.0 + exp(-v));
    default:
        return tanh(v);
    }
}

static int unary(enum unary fn, const struct npu_tensor *in, const struct npu_tensor *out)
{
    OPS_TRY(ops_check(in));
    OPS_TRY(ops_check(out));
    OPS_TRY(ops_type_in(in, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    if (out->type != in->type)
        return NPU_E_BAD_OPERAND_TYPE;
    if (!ops_same_dims(in, out))
        return NPU_E_BAD_SHAPE;
    if (in->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM) {
        /* the spec fixes these outputs' ranges */
        if (fn == U_LOGISTIC && (out->scale != 1.0f / 256 || out->zero_point != 0))
            return NPU_E_BAD_SCALAR;
        if (fn == U_TANH && (out->scale != 1.0f / 128 || out->zero_point != 128))
            return NPU_E_BAD_SCALAR;
    }
    size_t n = npu_ops_element_count(in);
    if (in->type == NPU_OPERAND_TENSOR_FLOAT32) {
        const float *x = in->data;
        float *y = out->data;
        switch (fn) {
        case U_RELU: ops_clamp_f32(y, x, n, 0.0f, INFINITY); break;
        case U_RELU1: ops_clamp_f32(y, x, n, -1.0f, 1.0f); break;
        case U_RELU6: ops_clamp_f32(y, x, n, 0.0f, 6.0f); break;
        default:
            for (size_t i = 0; i < n; i++)
                y[i] = (float)unary_value(fn, x[i]);
            break;
        }
        return NPU_OK;
    }
    if (in->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM) {
        /* a table of the 256 stored values' results, each as the generic path makes it */
        uint8_t table[256];
        for (int32_t v = 0; v < 256; v++)
            table[v] = ops_quantize_u8(unary_value(fn, ((double)v - in->zero_point) * in->scale), out->scale,
                                       out->zero_point);
        const uint8_t *x = in->data;
        uint8_t *y = out->data;
        for (size_t i = 0; i < n; i++)
            y[i] = table[x[i]];
        return NPU_OK;
    }
    for (size_t i = 0; i < n; i++)
        ops_set(out, i, unary_value(fn, ops_get(in, i)));
    return NPU_OK;
}

int npu_op_relu(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_RELU, input, output);
}

int npu_op_relu1(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_RELU1, input, output);
}

int npu_op_relu6(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_RELU6, input, output);
}

int npu_op_logistic(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_LOGISTIC, input, output);
}

int npu_op_tanh(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_TANH, input, output);
}

/* Along one axis: SOFTMAX (beta) and L2_NORMALIZATION, in double. */
enum along { ALONG_SOFTMAX, ALONG_L2 };

static int along_axis(enum along fn, const struct npu_tensor *input, float beta, int32_t axis,
                      const struct npu_tensor *output)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_type_in(input, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    if (output->type != input->type)
        return NPU_E_BAD_OPERAND_TYPE;
    if (!ops_same_dims(input, output) || input->rank > 4)
        return NPU_E_BAD_SHAPE;
    if (!(beta > 0.0f) || !isfinite(beta) || axis < -(int32_t)input->rank || axis >= (int32_t)input->rank)
        return NPU_E_BAD_SCALAR;
    /* the spec fixes the quantized outputs' ranges */
    float scale = fn == ALONG_SOFTMAX ? 1.0f / 256 : 1.0f / 128;
    int32_t zero = fn == ALONG_SOFTMAX ? 0 : 128;
    if (input->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM && (output->scale != scale || output->zero_point != zero))
        return NPU_E_BAD_SCALAR;
    uint32_t ax = (uint32_t)(axis < 0 ? axis + (int32_t)input->rank : axis);
    size_t outer = 1, inner = 1, len = input->dims[ax];
    for (uint32_t d = 0; d < ax; d++)
        outer *= input->dims[d];
    for (uint32_t d = ax + 1; d < input->rank; d++)
        inner *= input->dims[d];
    double *e = malloc(len * sizeof *e);
    if (e == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t o = 0; o < outer; o++)
        for (size_t in = 0; in < inner; in++) {
            size_t base = o * len * inner + in;
            double max = -INFINITY, sum = 0.0;
            for (size_t k = 0; k < len; k++) {
                e[k] = ops_get(input, base + k * inner);
                if (fn == ALONG_SOFTMAX)
                    e[k] *= (double)beta;
                max = e[k] > max ? e[k] : max;
            }
            for (size_t k = 0; k < len; k++) {
                if (fn == ALONG_SOFTMAX)
                    e[k] = exp(e[k] - max);
                sum += fn == ALONG_SOFTMAX ? e[k] : e[k] * e[k];
            }
            double divisor = fn == ALONG_SOFTMAX ? sum : (sqrt(sum) > 1e-6 ? sqrt(sum) : 1e-6);
            for (size_t k = 0; k < len; k++)
                ops_set(output, base + k * inner, e[k] / divisor);
        }
    free(e);
    return NPU_OK;
}

int npu_op_softmax(const struct npu_tensor *input, float beta, int32_t axis, const struct npu_tensor *output)
{
    return along_axis(ALONG_SOFTMAX, input, beta, axis, output);
}

int npu_op_l2_normalization(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output)
{
    return along_axis(ALONG_L2, input, 1.0f, axis, output);
}

/* One row of a float32 PRELU (x >= 0 ? x : x * alpha), as arith_row_f32 walks one. */
OPS_CLONES
static void prelu_row_f32(const float *xs, size_t sx, const float *ys, size_t sy, float *o, size_t n)
{
    size_t j = 0;
    if (n > 0)
        ARITH_ROW(OPS_V8_SELECT(x >= OPS_V8_SPLAT(0.0f), x, x * y), xj >= 0.0f ? xj : xj * yj);
}

int npu_op_prelu(const struct npu_tensor *input, const struct npu_tensor *alpha, const struct npu_tensor *output)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(ops_check(alpha));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_type_in(input, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    if (alpha->type != input->type || output->type != input->type)
        return NPU_E_BAD_OPERAND_TYPE;
    struct ops_broadcast bc;
    OPS_TRY(ops_broadcast(input, alpha, output, 4, &bc));
    if (input->type == NPU_OPERAND_TENSOR_FLOAT32) {
        const float *x = input->data, *a = alpha->data;
        OPS_FOR_BROADCAST_ROWS(bc, i, ia, ib)
            prelu_row_f32(x + ia, bc.sa[5], a + ib, bc.sb[5], (float *)output->data + i, bc.dims[5]);
        return NPU_OK;
    }
    OPS_FOR_BROADCAST(bc, i, ia, ib) {
        double x = ops_get(input, ia);
        ops_set(output, i, x >= 0.0 ? x : x * ops_get(alpha, ib));
    }
    return NPU_OK;
}

int npu_op_dequantize(const struct npu_tensor *input, const struct npu_tensor *output)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_type_in(input, 3, NPU_OPERAND_TENSOR_QUANT8_ASYMM, NPU_OPERAND_TENSOR_QUANT8_SYMM,
                        NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL));
    if (!ops_is_float(output))
        return NPU_E_BAD_OPERAND_TYPE;
    if (!ops_same_dims(input, output) || input->rank > 4)
        return NPU_E_BAD_SHAPE;
    size_t n = npu_ops_element_count(input);
    for (size_t i = 0; i < n; i++)
        ops_set(output, i, ops_get(input, i));
    return NPU_OK;
}

int npu_op_quantize(const struct npu_tensor *input, const struct npu_tensor *output)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(ops_check(output));
    if (!ops_is_float(input) || output->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM)
        return NPU_E_BAD_OPERAND_TYPE;
    if (!ops_same_dims(input, output))
        return NPU_E_BAD_SHAPE;
    size_t n = npu_ops_element_count(input);
    for (size_t i = 0; i < n; i++)
        ops_set(output, i, ops_get(input, i));
    return NPU_OK;
}
