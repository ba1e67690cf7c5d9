/*
 * Math, comparisons and logic of NN HAL 1.2 (npu/ops.h's math section).
 *
 * The float operations compute in float, as Android's reference does (a
 * float16 value widened, computed, rounded back); IEEE decides the edge cases
 * (LOG of a negative value is NaN, RSQRT of 0 infinity, x / 0 infinity or NaN).
 * Comparisons of TENSOR_QUANT8_ASYMM operands compare real values computed in
 * float, (stored - zero point) * scale, each operand with its own parameters.
 * CAST converts stored values, not real ones.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

/* -- one float input, one output of its shape and type ------------------------- */

enum unary { U_FLOOR, U_ABS, U_EXP, U_LOG, U_RSQRT, U_SQRT, U_SIN, U_NEG };

static float unary_value(enum unary fn, float x)
{
    switch (fn) {
    case U_FLOOR: return floorf(x);
    case U_ABS: return fabsf(x);
    case U_EXP: return expf(x);
    case U_LOG: return logf(x);
    case U_RSQRT: return 1.0f / sqrtf(x);
    case U_SQRT: return sqrtf(x);
    case U_SIN: return sinf(x);
    default: return -x;
    }
}

static int unary(enum unary fn, const struct npu_tensor *in, const struct npu_tensor *out)
{
    OPS_TRY(ops_check(in));
    OPS_TRY(ops_check(out));
    if (fn == U_NEG)
        OPS_TRY(ops_type_in(in, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_INT32));
    else
        OPS_TRY(ops_type_in(in, 2, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16));
    if (out->type != in->type)
        return NPU_E_BAD_OPERAND_TYPE;
    if (!ops_same_dims(in, out))
        return NPU_E_BAD_SHAPE;
    size_t n = npu_ops_element_count(in);
    if (in->type == NPU_OPERAND_TENSOR_INT32) {
        const int32_t *x = in->data;
        int32_t *y = out->data;
        for (size_t i = 0; i < n; i++)  /* in unsigned arithmetic: -INT32_MIN wraps to itself */
            y[i] = (int32_t)(0u - (uint32_t)x[i]);
        return NPU_OK;
    }
    if (in->type == NPU_OPERAND_TENSOR_FLOAT32) {
        const float *x = in->data;
        float *y = out->data;
        for (size_t i = 0; i < n; i++)
            y[i] = unary_value(fn, x[i]);
        return NPU_OK;
    }
    const uint16_t *x = in->data;
    uint16_t *y = out->data;
    for (size_t i = 0; i < n; i++)
        y[i] = npu_float_to_half(unary_value(fn, npu_half_to_float(x[i])));
    return NPU_OK;
}

int npu_op_floor(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_FLOOR, input, output);
}

int npu_op_abs(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_ABS, input, output);
}

int npu_op_exp(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_EXP, input, output);
}

int npu_op_log(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_LOG, input, output);
}

int npu_op_rsqrt(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_RSQRT, input, output);
}

int npu_op_sqrt(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_SQRT, input, output);
}

int npu_op_sin(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_SIN, input, output);
}

int npu_op_neg(const struct npu_tensor *input, const struct npu_tensor *output)
{
    return unary(U_NEG, input, output);
}

/* -- two inputs, broadcast ------------------------------------------------------ */

/* a and b of one type among the count given, broadcast (up to max_rank) to out. */
static int binary_check(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *out,
                        uint32_t max_rank, struct ops_broadcast *bc)
{
    OPS_TRY(ops_check(a));
    OPS_TRY(ops_check(b));
    OPS_TRY(ops_check(out));
    if (b->type != a->type)
        return NPU_E_BAD_OPERAND_TYPE;
    return ops_broadcast(a, b, out, max_rank, bc);
}

static float stored_float(const struct npu_tensor *t, size_t i)
{
    return t->type == NPU_OPERAND_TENSOR_FLOAT32 ? ((const float *)t->data)[i]
                                                 : npu_half_to_float(((const uint16_t *)t->data)[i]);
}

static void store_float(const struct npu_tensor *t, size_t i, float v)
{
    if (t->type == NPU_OPERAND_TENSOR_FLOAT32)
        ((float *)t->data)[i] = v;
    else
        ((uint16_t *)t->data)[i] = npu_float_to_half(v);
}

/* DIV (with a fused activation) and POW: float, rank <= 4. */
static int float_binary(bool pow_op, const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse,
                        const struct npu_tensor *out)
{
    struct ops_broadcast bc;
    OPS_TRY(ops_check(a));
    OPS_TRY(ops_type_in(a, 2, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16));
    OPS_TRY(binary_check(a, b, out, 4, &bc));
    if (out->type != a->type)
        return NPU_E_BAD_OPERAND_TYPE;
    OPS_TRY(ops_check_fuse(fuse));
    float lo, hi;
    ops_float_bounds(fuse, &lo, &hi);
    OPS_FOR_BROADCAST(bc, i, ia, ib) {
        float x = stored_float(a, ia), y = stored_float(b, ib);
        float v = pow_op ? powf(x, y) : x / y;
        store_float(out, i, v < lo ? lo : (v > hi ? hi : v));
    }
    return NPU_OK;
}

int npu_op_div(const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse, const struct npu_tensor *output)
{
    return float_binary(false, a, b, fuse, output);
}

int npu_op_pow(const struct npu_tensor *base, const struct npu_tensor *exponent, const struct npu_tensor *output)
{
    return float_binary(true, base, exponent, 0, output);
}

/* -- comparisons ----------------------------------------------------------------- */

enum compare { C_EQUAL, C_NOT_EQUAL, C_LESS, C_LESS_EQUAL, C_GREATER, C_GREATER_EQUAL };

#define COMPARE(fn, x, y)                                                       \
    ((fn) == C_EQUAL ? (x) == (y) : (fn) == C_NOT_EQUAL ? (x) != (y) :          \
     (fn) == C_LESS ? (x) < (y) : (fn) == C_LESS_EQUAL ? (x) <= (y) :           \
     (fn) == C_GREATER ? (x) > (y) : (x) >= (y))

static int comparison(enum compare fn, const struct npu_tensor *a, const struct npu_tensor *b,
                      const struct npu_tensor *out)
{
    struct ops_broadcast bc;
    OPS_TRY(ops_check(a));
    OPS_TRY(ops_type_in(a, 5, NPU_OPERAND_TENSOR_BOOL8, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_FLOAT32,
                        NPU_OPERAND_TENSOR_INT32, NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    OPS_TRY(binary_check(a, b, out, NPU_MAX_RANK, &bc));
    if (out->type != NPU_OPERAND_TENSOR_BOOL8)
        return NPU_E_BAD_OPERAND_TYPE;
    uint8_t *dst = out->data;
    switch (a->type) {
    case NPU_OPERAND_TENSOR_INT32: {
        const int32_t *x = a->data, *y = b->data;
        OPS_FOR_BROADCAST(bc, i, ia, ib)
            dst[i] = COMPARE(fn, x[ia], y[ib]);
        break;
    }
    case NPU_OPERAND_TENSOR_BOOL8: {
        const uint8_t *x = a->data, *y = b->data;
        OPS_FOR_BROADCAST(bc, i, ia, ib)
            dst[i] = COMPARE(fn, x[ia] != 0, y[ib] != 0);
        break;
    }
    case NPU_OPERAND_TENSOR_QUANT8_ASYMM: {
        const uint8_t *x = a->data, *y = b->data;
        OPS_FOR_BROADCAST(bc, i, ia, ib) {
            float rx = (float)((int32_t)x[ia] - a->zero_point) * a->scale;
            float ry = (float)((int32_t)y[ib] - b->zero_point) * b->scale;
            dst[i] = COMPARE(fn, rx, ry);
        }
        break;
    }
    default:
        OPS_FOR_BROADCAST(bc, i, ia, ib)
            dst[i] = COMPARE(fn, stored_float(a, ia), stored_float(b, ib));
        break;
    }
    return NPU_OK;
}

int npu_op_equal(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return comparison(C_EQUAL, a, b, output);
}

int npu_op_not_equal(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return comparison(C_NOT_EQUAL, a, b, output);
}

int npu_op_less(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return comparison(C_LESS, a, b, output);
}

int npu_op_less_equal(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return comparison(C_LESS_EQUAL, a, b, output);
}

int npu_op_greater(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return comparison(C_GREATER, a, b, output);
}

int npu_op_greater_equal(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return comparison(C_GREATER_EQUAL, a, b, output);
}

/* -- logic ----------------------------------------------------------------------- */

static int logical(bool and_op, const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *out)
{
    struct ops_broadcast bc;
    OPS_TRY(ops_check(a));
    OPS_TRY(ops_type_in(a, 1, NPU_OPERAND_TENSOR_BOOL8));
    OPS_TRY(binary_check(a, b, out, NPU_MAX_RANK, &bc));
    if (out->type != NPU_OPERAND_TENSOR_BOOL8)
        return NPU_E_BAD_OPERAND_TYPE;
    const uint8_t *x = a->data, *y = b->data;
    uint8_t *dst = out->data;
    OPS_FOR_BROADCAST(bc, i, ia, ib)
        dst[i] = and_op ? (x[ia] && y[ib]) : (x[ia] || y[ib]);
    return NPU_OK;
}

int npu_op_logical_and(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return logical(true, a, b, output);
}

int npu_op_logical_or(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output)
{
    return logical(false, a, b, output);
}

int npu_op_logical_not(const struct npu_tensor *input, const struct npu_tensor *output)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_type_in(input, 1, NPU_OPERAND_TENSOR_BOOL8));
    if (output->type != NPU_OPERAND_TENSOR_BOOL8)
        return NPU_E_BAD_OPERAND_TYPE;
    if (!ops_same_dims(input, output))
        return NPU_E_BAD_SHAPE;
    const uint8_t *x = input->data;
    uint8_t *dst = output->data;
    for (size_t i = 0, n = npu_ops_element_count(input); i < n; i++)
        dst[i] = !x[i];
    return NPU_OK;
}

/* -- SELECT and CAST ------------------------------------------------------------- */

int npu_op_select(const struct npu_tensor *condition, const struct npu_tensor *a, const struct npu_tensor *b,
                  const struct npu_tensor *output)
{
    OPS_TRY(ops_check(condition));
    OPS_TRY(ops_check(a));
    OPS_TRY(ops_check(b));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_type_in(condition, 1, NPU_OPERAND_TENSOR_BOOL8));
    OPS_TRY(ops_type_in(a, 4, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_INT32,
                        NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    if (b->type != a->type || output->type != a->type)
        return NPU_E_BAD_OPERAND_TYPE;
    if (!ops_same_dims(condition, a) || !ops_same_dims(a, b) || !ops_same_dims(a, output))
        return NPU_E_BAD_SHAPE;
    const uint8_t *cond = condition->data;
    size_t n = npu_ops_element_count(a), size = ops_element_size(a->type);
    if (a->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM) {
        /* each input's real value, requantized to the output's parameters */
        for (size_t i = 0; i < n; i++)
            ops_set(output, i, ops_get(cond[i] ? a : b, i));
        return NPU_OK;
    }
    char *dst = output->data;
    for (size_t i = 0; i < n; i++)
        memcpy(dst + i * size, (const char *)(cond[i] ? a : b)->data + i * size, size);
    return NPU_OK;
}

/* A stored value converted to an integer type: truncated toward zero,
 * saturated to [lo, hi] (NaN to 0). */
static int64_t to_integer(double v, int64_t lo, int64_t hi)
{
    if (isnan(v))
        return 0;
    if (v <= (double)lo)
        return lo;
    if (v >= (double)hi)
        return hi;
    return (int64_t)v;
}

int npu_op_cast(const struct npu_tensor *input, const struct npu_tensor *output)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_type_in(input, 4, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_INT32,
                        NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    OPS_TRY(ops_type_in(output, 4, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_INT32,
                        NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    if (!ops_same_dims(input, output))
        return NPU_E_BAD_SHAPE;
    size_t n = npu_ops_element_count(input);
    for (size_t i = 0; i < n; i++) {
        double v;  /* the stored value: exact in double for every input type */
        switch (input->type) {
        case NPU_OPERAND_TENSOR_FLOAT32: v = ((const float *)input->data)[i]; break;
        case NPU_OPERAND_TENSOR_FLOAT16: v = npu_half_to_float(((const uint16_t *)input->data)[i]); break;
        case NPU_OPERAND_TENSOR_INT32: v = ((const int32_t *)input->data)[i]; break;
        default: v = ((const uint8_t *)input->data)[i]; break;
        }
        switch (output->type) {
        case NPU_OPERAND_TENSOR_FLOAT32: ((float *)output->data)[i] = (float)v; break;
        case NPU_OPERAND_TENSOR_FLOAT16: ((uint16_t *)output->data)[i] = npu_float_to_half((float)v); break;
        case NPU_OPERAND_TENSOR_INT32: ((int32_t *)output->data)[i] = (int32_t)to_integer(v, INT32_MIN, INT32_MAX); break;
        default: ((uint8_t *)output->data)[i] = (uint8_t)to_integer(v, 0, 255); break;
        }
    }
    return NPU_OK;
}

/* -- TRANSPOSE_CONV_2D ------------------------------------------------------------
 * Each input pixel (y, x) spreads filter * value over the output window whose
 * corner is (y * stride - top, x * stride - left).  Read the other way round,
 * output pixel (oy, ox) gathers, for each filter tap (i, j), the input pixel
 * ((oy + top - i) / stride_h, (ox + left - j) / stride_w) when both divisions
 * are exact and inside the image.  Exact divisions pick the taps by phase: the
 * output pixels with oy = py and ox = px (mod the strides) all read the taps
 * i = (py + top), j = (px + left) (mod the strides).  So each phase is a
 * convolution's GEMM over its own taps (a stride-s layer does 1/s^2 of a dense
 * im2col's multiply-adds), run one output row at a time over the row's pixels
 * of that phase (C rows stride_w pixels apart).  Quantized: sums of centred
 * values in int32, then the bias and requantization per output channel, as
 * Android's reference does. */

struct tconv_phase {
    const struct ops_geometry *g;
    const void *x;      /* NHWC float or uint8 */
    int32_t zero;
    size_t oy, n, px;   /* the output row being packed, its image, the phase's first column */
    size_t i0, j0;      /* the phase's first tap row and column */
    size_t ti, tj;      /* its tap rows and columns */
};

/* Output pixel m of the row's phase (ox = px + m * stride_w): its taps,
 * k = (a * tj + b) * c + channel for tap (i0 + a * stride_h, j0 + b * stride_w). */
#define TCONV_PACK(NAME, T, SRC_T, CENTRE)                                                         \
    static void NAME(const void *vctx, size_t m, size_t k0, size_t kc, T *dst)                     \
    {                                                                                              \
        const struct tconv_phase *p = vctx;                                                        \
        const struct ops_geometry *g = p->g;                                                       \
        const SRC_T *x = p->x;                                                                     \
        long ox = (long)(p->px + m * (size_t)g->sw);                                               \
        for (size_t k = k0, end = k0 + kc; k < end;) {                                             \
            size_t tap = k / g->c, ch = k % g->c, run = g->c - ch < end - k ? g->c - ch : end - k; \
            long y = (long)p->oy + g->top - (long)(p->i0 + tap / p->tj * (size_t)g->sh);           \
            long xx = ox + g->left - (long)(p->j0 + tap % p->tj * (size_t)g->sw);                  \
            T *d = dst + (k - k0);                                                                 \
            if (y < 0 || xx < 0 || y / g->sh >= (long)g->h || xx / g->sw >= (long)g->w) {          \
                for (size_t i = 0; i < run; i++)                                                   \
                    d[i] = 0;                                                                      \
            } else {                                                                               \
                const SRC_T *s = x + ((p->n * g->h + (size_t)(y / g->sh)) * g->w + (size_t)(xx / g->sw)) * g->c + ch; \
                for (size_t i = 0; i < run; i++)                                                   \
                    d[i] = (T)(CENTRE);                                                            \
            }                                                                                      \
            k += run;                                                                              \
        }                                                                                          \
    }

TCONV_PACK(pack_tconv_f32, float, float, s[i])
TCONV_PACK(pack_tconv_i16, int16_t, uint8_t, (int32_t)s[i] - p->zero)

/* One phase's taps of the filter, [oc][ti][tj][c], as one GEMM's W (quant8: the
 * stored bytes; float: the float32 weights w). */
static int tconv_phase_gemm(const struct npu_tensor *filter, const float *w, const struct ops_geometry *g,
                            const struct tconv_phase *p, struct ops_gemm_f32 *gf, struct ops_gemm_i16 *gi)
{
    bool quant = w == NULL;
    size_t K = p->ti * p->tj * g->c, size = quant ? 1 : sizeof(float);
    char *sub = malloc(g->oc * K * size);
    if (sub == NULL)
        return NPU_E_NO_MEMORY;
    const char *src = quant ? (const char *)filter->data : (const char *)w;
    for (size_t o = 0, at = 0; o < g->oc; o++)
        for (size_t a = 0; a < p->ti; a++)
            for (size_t b = 0; b < p->tj; b++, at += g->c) {
                size_t i = p->i0 + a * (size_t)g->sh, j = p->j0 + b * (size_t)g->sw;
                memcpy(sub + at * size, src + (((o * g->fh + i) * g->fw + j) * g->c) * size, g->c * size);
            }
    int rc = quant ? ops_gemm_i16_prepare(gi, sub, filter->type == NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL,
                                          filter->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM ? filter->zero_point : 0,
                                          g->oc, K)
                   : ops_gemm_f32_prepare(gf, (const float *)sub, g->oc, K);
    free(sub);
    return rc;
}

/* Output rows [begin, end) into sums (int32 for quant8, float with the bias
 * otherwise), phase by phase. */
static int tconv_sums(const struct npu_tensor *input, const struct npu_tensor *filter, const float *w, const float *b,
                      const struct ops_geometry *g, const void *x, size_t begin, size_t end, void *sums)
{
    bool quant = w == NULL;
    size_t sh = (size_t)g->sh, sw = (size_t)g->sw, oc = g->oc;
    int rc = NPU_OK;
    for (size_t py = 0; py < sh && py < g->oh && rc == NPU_OK; py++)
        for (size_t px = 0; px < sw && px < g->ow && rc == NPU_OK; px++) {
            struct tconv_phase p = {g, x, input->zero_point, 0, 0, px, 0, 0, 0, 0};
            p.i0 = (py + (size_t)g->top) % sh;
            p.j0 = (px + (size_t)g->left) % sw;
            p.ti = p.i0 < g->fh ? (g->fh - p.i0 + sh - 1) / sh : 0;
            p.tj = p.j0 < g->fw ? (g->fw - p.j0 + sw - 1) / sw : 0;
            size_t pixels = (g->ow - px + sw - 1) / sw, ldc = sw * oc;
            struct ops_gemm_f32 gf = {0};
            struct ops_gemm_i16 gi = {0};
            bool taps = p.ti && p.tj;
            if (taps)
                rc = tconv_phase_gemm(filter, w, g, &p, &gf, &gi);
            for (size_t r = begin; r < end && rc == NPU_OK; r++) {
                p.n = r / g->oh;
                p.oy = r % g->oh;
                if (p.oy % sh != py)
                    continue;
                size_t at = ((r - begin) * g->ow + px) * oc;
                if (taps && quant)
                    rc = ops_gemm_i16_run(&gi, pack_tconv_i16, &p, 0, pixels, (int32_t *)sums + at, ldc);
                else if (taps)
                    rc = ops_gemm_f32_run(&gf, pack_tconv_f32, &p, 0, pixels, b, (float *)sums + at, ldc);
                for (size_t q = 0; !taps && q < pixels; q++)  /* no tap reaches these pixels: the bias alone */
                    for (size_t o = 0; o < oc; o++) {
                        if (quant)
                            ((int32_t *)sums)[at + q * ldc + o] = 0;
                        else
                            ((float *)sums)[at + q * ldc + o] = b[o];
                    }
            }
            ops_gemm_f32_free(&gf);
            ops_gemm_i16_free(&gi);
        }
    return rc;
}

/* The window of a transposed convolution: left and top >= 0, right and bottom
 * may be negative (the output then extends past the last input's footprint,
 * as the 1.2 reference allows), strides >= 1, no dilation. */
static int tconv_window(const struct npu_window *w)
{
    if (w == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (w->pad_left < 0 || w->pad_top < 0 || w->stride_w < 1 || w->stride_h < 1 || w->dilation_w != 1 ||
        w->dilation_h != 1)
        return NPU_E_BAD_SCALAR;
    if (w->pad_left > 65536 || w->pad_top > 65536 || w->pad_right > 65536 || w->pad_bottom > 65536 ||
        w->pad_right < -65536 || w->pad_bottom < -65536 || w->stride_w > 65536 || w->stride_h > 65536)
        return NPU_E_BAD_SCALAR;
    return ops_check_fuse(w->fuse);
}

long npu_ops_transpose_conv_size(long size, long filter, long stride, long head, long tail)
{
    return (size - 1) * stride + filter - head - tail;
}

int npu_op_transpose_conv_2d(const struct npu_tensor *input, const struct npu_tensor *filter,
                             const struct npu_tensor *bias, const struct npu_window *w,
                             const struct npu_tensor *output, size_t begin, size_t end)
{
    enum ops_kind kind;
    OPS_TRY(ops_conv_types(input, filter, bias, output, 0, &kind));
    OPS_TRY(tconv_window(w));
    if (input->rank != 4 || filter->rank != 4 || bias->rank != 1 || output->rank != 4)
        return NPU_E_BAD_SHAPE;
    struct ops_image img;
    ops_image(input, w->nchw, &img);
    struct ops_geometry g = {
        .n = img.n, .h = img.h, .w = img.w, .c = img.c, .fh = filter->dims[1], .fw = filter->dims[2],
        .oc = filter->dims[0], .sh = w->stride_h, .sw = w->stride_w, .dh = 1, .dw = 1,
        .top = w->pad_top, .left = w->pad_left,
    };
    long oh = npu_ops_transpose_conv_size((long)g.h, (long)g.fh, g.sh, w->pad_top, w->pad_bottom);
    long ow = npu_ops_transpose_conv_size((long)g.w, (long)g.fw, g.sw, w->pad_left, w->pad_right);
    if (oh < 1 || ow < 1 || filter->dims[3] != g.c || bias->dims[0] != g.oc)
        return NPU_E_BAD_SHAPE;
    g.oh = (size_t)oh;
    g.ow = (size_t)ow;
    OPS_TRY(ops_check_geometry_output(output, &g, w->nchw));
    ops_clamp_range(g.n * g.oh, &begin, &end);
    if (begin == end)
        return NPU_OK;

    bool quant = input->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM;
    size_t count = (end - begin) * g.ow;
    const void *x = NULL, *wf = NULL, *bf = NULL;
    void *x_owned = NULL;
    float *w_owned = NULL, *b_owned = NULL;
    void *sums = malloc(count * g.oc * (quant ? sizeof(int32_t) : sizeof(float)));
    int rc = sums ? ops_nhwc_input(input, w->nchw, &x, &x_owned) : NPU_E_NO_MEMORY;
    if (rc == NPU_OK && !quant)
        rc = ops_conv_weights(filter, bias, &wf, &bf, &w_owned, &b_owned);
    if (rc == NPU_OK)
        rc = tconv_sums(input, filter, wf, bf, &g, x, begin, end, sums);
    if (rc == NPU_OK)
        rc = ops_conv_store(input, filter, bias, output, w->fuse, w->nchw, begin, end, count, g.oc, sums);
    free(w_owned);
    free(b_owned);
    free(sums);
    free(x_owned);
    return rc;
}

int npu_ops_transpose_padding(int32_t out_size, int32_t stride, int32_t filter, int32_t scheme, int32_t *head,
                              int32_t *tail)
{
    if (head == NULL || tail == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (out_size < 1 || stride < 1 || filter < 1 || stride > 65536 || filter > 65536 || (scheme != 1 && scheme != 2))
        return NPU_E_BAD_SCALAR;
    *head = *tail = 0;
    if (scheme == 2)
        return NPU_OK;
    long needed = (((long)out_size + stride - 1) / stride - 1) * stride + filter - out_size;
    *head = needed > 0 ? (int32_t)(needed / 2) : 0;
    *tail = (int32_t)(needed - *head);
    return NPU_OK;
}
