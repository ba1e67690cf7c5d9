/*
 * CONV_2D (im2col on the fly into the packed GEMM), DEPTHWISE_CONV_2D (direct,
 * channels innermost) and FULLY_CONNECTED (the GEMM over rows).  Quantized:
 * (input - zero point) * (filter - zero point) summed in int32, plus the int32
 * bias, requantized per output channel; a padded tap is the input's zero point,
 * that is a real zero, so it contributes nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

int ops_conv_types(const struct npu_tensor *in, const struct npu_tensor *filter, const struct npu_tensor *bias,
                       const struct npu_tensor *out, uint32_t channel_dim, enum ops_kind *kind)
{
    OPS_TRY(ops_check(in));
    OPS_TRY(ops_check(filter));
    OPS_TRY(ops_check(bias));
    OPS_TRY(ops_check(out));
    if (in->type == NPU_OPERAND_TENSOR_FLOAT32 || in->type == NPU_OPERAND_TENSOR_FLOAT16) {
        if (filter->type != in->type || bias->type != in->type || out->type != in->type)
            return NPU_E_BAD_OPERAND_TYPE;
        *kind = in->type == NPU_OPERAND_TENSOR_FLOAT32 ? OPS_KIND_F32 : OPS_KIND_F16;
        return NPU_OK;
    }
    if (in->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM || out->type != in->type || bias->type != NPU_OPERAND_TENSOR_INT32)
        return NPU_E_BAD_OPERAND_TYPE;
    if (filter->type == NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL) {
        if (filter->channel_dim != channel_dim)
            return NPU_E_BAD_SCALAR;
    } else if (filter->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM) {
        return NPU_E_BAD_OPERAND_TYPE;
    }
    *kind = OPS_KIND_Q8;
    return NPU_OK;
}

int ops_requant_init(struct ops_requant *q, const struct npu_tensor *in, const struct npu_tensor *filter,
                        const struct npu_tensor *out, size_t channels, int32_t fuse)
{
    q->multiplier = malloc(channels * sizeof *q->multiplier);
    q->shift = malloc(channels * sizeof *q->shift);
    if (q->multiplier == NULL || q->shift == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t c = 0; c < channels; c++) {
        double fs = filter->type == NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL ? filter->channel_scales[c] : filter->scale;
        OPS_TRY(npu_quantize_multiplier((double)in->scale * fs / (double)out->scale, &q->multiplier[c], &q->shift[c]));
    }
    ops_quant_bounds(fuse, out, &q->lo, &q->hi);
    q->zero = out->zero_point;
    return NPU_OK;
}

void ops_requant_free(struct ops_requant *q)
{
    free(q->multiplier);
    free(q->shift);
}

static uint8_t requant_one(const struct ops_requant *q, int32_t acc, size_t c)
{
    int32_t v = npu_multiply_by_quantized_multiplier(acc, q->multiplier[c], q->shift[c]);
    int64_t s = (int64_t)v + q->zero;
    if (s < q->lo)
        s = q->lo;
    if (s > q->hi)
        s = q->hi;
    return (uint8_t)s;
}

/* Adds the bias, requantizes and stores rows x channels accumulators. */
void ops_requant_block(const struct ops_requant *q, const int32_t *acc, const int32_t *bias, size_t count,
                          size_t channels, uint8_t *dst)
{
    for (size_t i = 0; i < count; i++)
        for (size_t c = 0; c < channels; c++) {
            /* int64 then saturate: a hostile bias must not overflow */
            int64_t s = (int64_t)acc[i * channels + c] + bias[c];
            int32_t v = s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : (int32_t)s);
            dst[i * channels + c] = requant_one(q, v, c);
        }
}

/* -- CONV_2D ------------------------------------------------------------------- */

OPS_CONV_PACK(pack_conv_f32, float, float, s[i])
OPS_CONV_PACK(pack_conv_i16, int16_t, uint8_t, (int32_t)s[i] - ctx->zero)

/* CONV_2D and GROUPED_CONV_2D: one GEMM per group, each writing its columns
 * of one row block. */
int ops_conv_2d_kept(const struct npu_tensor *input, const struct npu_tensor *filter, const struct npu_tensor *bias,
                     const struct npu_window *w, int32_t groups, const struct npu_tensor *output, size_t begin,
                     size_t end, struct npu_kept **kept)
{
    enum ops_kind kind;
    OPS_TRY(ops_conv_types(input, filter, bias, output, 0, &kind));
    OPS_TRY(ops_check_window(w, false));
    if (input->rank != 4 || filter->rank != 4 || bias->rank != 1)
        return NPU_E_BAD_SHAPE;
    if (groups < 1)
        return NPU_E_BAD_SCALAR;
    struct ops_geometry g;
    OPS_TRY(ops_geometry(input, w, filter->dims[1], filter->dims[2], &g));
    g.oc = filter->dims[0];
    if ((size_t)filter->dims[3] * (size_t)groups != g.c || g.oc % (size_t)groups != 0 || bias->dims[0] != g.oc)
        return NPU_E_BAD_SHAPE;
    OPS_TRY(ops_check_geometry_output(output, &g, w->nchw));
    ops_clamp_range(g.n * g.oh, &begin, &end);
    if (begin == end)
        return NPU_OK;

    return ops_conv_gemm(input, filter, bias, output, w->fuse, w->nchw, &g, (size_t)groups, pack_conv_f32,
                         pack_conv_i16, begin, end, kept);
}

int ops_conv_store(const struct npu_tensor *input, const struct npu_tensor *filter, const struct npu_tensor *bias,
                   const struct npu_tensor *output, int32_t fuse, bool nchw, size_t begin, size_t end, size_t count,
                   size_t oc, void *sums)
{
    if (input->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM) {
        float lo, hi, *r = sums;
        ops_float_bounds(fuse, &lo, &hi);
        ops_clamp_f32(r, r, count * oc, lo, hi);
        ops_store_rows_f32(output, nchw, begin, end, r);
        return NPU_OK;
    }
    struct ops_requant q = {0};
    uint8_t *rows = malloc(count * oc);
    int rc = rows ? ops_requant_init(&q, input, filter, output, oc, fuse) : NPU_E_NO_MEMORY;
    if (rc == NPU_OK) {
        ops_requant_block(&q, sums, bias->data, count, oc, rows);
        ops_store_rows_u8(output, nchw, begin, end, rows);
    }
    ops_requant_free(&q);
    free(rows);
    return rc;
}

int ops_conv_weights(const struct npu_tensor *filter, const struct npu_tensor *bias, const void **w, const void **b,
                     float **owned_w, float **owned_b)
{
    struct npu_tensor fv, bv;
    *owned_w = *owned_b = NULL;
    int rc = ops_widen(filter, &fv, owned_w);
    if (rc == NPU_OK)
        rc = ops_widen(bias, &bv, owned_b);
    if (rc == NPU_OK) {
        *w = fv.data;
        *b = bv.data;
    }
    return rc;
}

/* A convolution's float filter packed for the GEMM, one per group: what its
 * plan operation keeps (filter: the constant's bytes it was made from). */
struct conv_kept {
    struct npu_kept base;
    const void *filter;
    int32_t type;
    uint32_t dims[4];
    size_t groups;
    struct ops_gemm_f32 gemm[];
};

static void conv_kept_release(struct npu_kept *k)
{
    struct conv_kept *c = (struct conv_kept *)k;
    for (size_t i = 0; c != NULL && i < c->groups; i++)
        ops_gemm_f32_free(&c->gemm[i]);
    free(c);
}

static bool conv_kept_fits(const struct conv_kept *c, const struct npu_tensor *filter, size_t groups)
{
    return c != NULL && c->filter == filter->data && c->type == filter->type && c->groups == groups &&
           memcmp(c->dims, filter->dims, sizeof c->dims) == 0;
}

/* The filter's groups packed (float16 widened first). */
static int conv_kept_make(const struct npu_tensor *filter, size_t groups, size_t og, size_t K, struct conv_kept **out)
{
    struct npu_tensor fv;
    float *owned = NULL;
    struct conv_kept *c = calloc(1, sizeof *c + groups * sizeof c->gemm[0]);
    int rc = c ? ops_widen(filter, &fv, &owned) : NPU_E_NO_MEMORY;
    if (c != NULL) {
        c->base.release = conv_kept_release;
        c->filter = filter->data;
        c->type = filter->type;
        memcpy(c->dims, filter->dims, sizeof c->dims);
        c->groups = groups;
    }
    for (size_t gi = 0; rc == NPU_OK && gi < groups; gi++)
        rc = ops_gemm_f32_prepare(&c->gemm[gi], (const float *)fv.data + gi * og * K, og, K);
    free(owned);
    if (rc != NPU_OK) {
        conv_kept_release(c ? &c->base : NULL);
        return rc;
    }
    *out = c;
    return NPU_OK;
}

/* The packed filter from the slot when it holds this filter's; else made, and
 * left in an empty slot (*mine: one made and not kept, for the caller to free). */
static int conv_kept_get(struct npu_kept **slot, const struct npu_tensor *filter, size_t groups, size_t og, size_t K,
                         const struct conv_kept **packed, struct conv_kept **mine)
{
    *mine = NULL;
    struct npu_kept *held = slot ? __atomic_load_n(slot, __ATOMIC_ACQUIRE) : NULL;
    if (conv_kept_fits((const struct conv_kept *)held, filter, groups)) {
        *packed = (const struct conv_kept *)held;
        return NPU_OK;
    }
    OPS_TRY(conv_kept_make(filter, groups, og, K, mine));
    *packed = *mine;
    struct npu_kept *none = NULL;
    if (slot && held == NULL &&
        __atomic_compare_exchange_n(slot, &none, &(*mine)->base, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        *mine = NULL;  /* the plan's now */
    return NPU_OK;
}

int ops_conv_gemm(const struct npu_tensor *input, const struct npu_tensor *filter, const struct npu_tensor *bias,
                  const struct npu_tensor *output, int32_t fuse, bool nchw, const struct ops_geometry *gp,
                  size_t groups, ops_pack_f32 pack_f32, ops_pack_i16 pack_i16, size_t begin, size_t end,
                  struct npu_kept **kept)
{
    const struct ops_geometry g = *gp;
    size_t cg = g.c / groups, og = g.oc / groups;
    size_t K = g.fh * g.fw * cg, m0 = begin * g.ow, m1 = end * g.ow;
    bool quant = input->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM;
    const void *x = NULL, *b = NULL;
    void *x_owned = NULL;
    float *b_owned = NULL;
    const struct conv_kept *packed = NULL;
    struct conv_kept *packed_owned = NULL;
    void *sums = quant ? NULL : ops_rows_in_place(output, nchw, begin, end, input), *sums_owned = NULL;
    if (sums == NULL)
        sums = sums_owned = malloc((m1 - m0) * g.oc * (quant ? sizeof(int32_t) : sizeof(float)));
    int rc = sums ? ops_nhwc_input(input, nchw, &x, &x_owned) : NPU_E_NO_MEMORY;
    struct ops_conv_ctx ctx = {&g, x, input->zero_point, 0, cg};
    if (rc == NPU_OK && !quant) {
        struct npu_tensor bv;
        rc = ops_widen(bias, &bv, &b_owned);
        b = bv.data;
    }
    if (rc == NPU_OK && !quant)
        rc = conv_kept_get(kept, filter, groups, og, K, &packed, &packed_owned);
    /* 1x1, stride 1, unpadded: output pixel m reads input pixel m alone, so the
     * GEMM reads the input's rows in place */
    bool pointwise = pack_f32 == pack_conv_f32 && g.fh == 1 && g.fw == 1 && g.sh == 1 && g.sw == 1 && g.top == 0 && g.left == 0 &&
                     g.oh == g.h && g.ow == g.w;
    float lo, hi;
    ops_float_bounds(fuse, &lo, &hi);
    for (size_t gi = 0; rc == NPU_OK && gi < groups; gi++) {
        ctx.c0 = gi * cg;
        if (quant) {
            struct ops_gemm_i16 gemm = {0};
            rc = ops_gemm_i16_prepare(&gemm, (const uint8_t *)filter->data + gi * og * K,
                                      filter->type == NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL,
                                      filter->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM ? filter->zero_point : 0, og, K);
            if (rc == NPU_OK)
                rc = ops_gemm_i16_run(&gemm, pack_i16, &ctx, m0, m1, (int32_t *)sums + gi * og, g.oc);
            ops_gemm_i16_free(&gemm);
        } else {
            rc = ops_gemm_f32_run_direct(&packed->gemm[gi], pack_f32, &ctx,
                                         pointwise ? (const float *)x + ctx.c0 : NULL, g.c, m0, m1,
                                         (const float *)b + gi * og, lo, hi, (float *)sums + gi * og, g.oc);
        }
    }
    if (rc == NPU_OK && quant)
        rc = ops_conv_store(input, filter, bias, output, fuse, nchw, begin, end, m1 - m0, g.oc, sums);
    else if (rc == NPU_OK)  /* the GEMM bounded the sums already */
        ops_store_rows_f32(output, nchw, begin, end, sums);
    conv_kept_release(packed_owned ? &packed_owned->base : NULL);
    free(b_owned);
    free(sums_owned);
    free(x_owned);
    return rc;
}

int npu_op_conv_2d(const struct npu_tensor *input, const struct npu_tensor *filter,
                   const struct npu_tensor *bias, const struct npu_window *w,
                   const struct npu_tensor *output, size_t begin, size_t end)
{
    return ops_conv_2d_kept(input, filter, bias, w, 1, output, begin, end, NULL);
}

int npu_op_grouped_conv_2d(const struct npu_tensor *input, const struct npu_tensor *filter,
                           const struct npu_tensor *bias, const struct npu_window *w, int32_t groups,
                           const struct npu_tensor *output, size_t begin, size_t end)
{
    return ops_conv_2d_kept(input, filter, bias, w, groups, output, begin, end, NULL);
}

/* -- DEPTHWISE_CONV_2D --------------------------------------------------------- */

/* The taps of output (n, oy, ox) that fall inside the image, in XNNPACK's
 * order (column by column: fx, then fy): each one's input pixel (an index of
 * the NHWC image's pixels) and filter tap (fy * fw + fx). */
static size_t valid_taps(const struct ops_geometry *g, size_t n, size_t oy, size_t ox, size_t *pixel, size_t *tap)
{
    size_t count = 0;
    for (size_t fx = 0; fx < g->fw; fx++) {
        long ix = (long)ox * g->sw + (long)fx * g->dw - g->left;
        if (ix < 0 || ix >= (long)g->w)
            continue;
        for (size_t fy = 0; fy < g->fh; fy++) {
            long iy = (long)oy * g->sh + (long)fy * g->dh - g->top;
            if (iy < 0 || iy >= (long)g->h)
                continue;
            pixel[count] = (n * g->h + (size_t)iy) * g->w + (size_t)ix;
            tap[count++] = fy * g->fw + fx;
        }
    }
    return count;
}

/* One output pixel of a float depthwise convolution with multiplier 1: out[k] =
 * bias[k] + the sum over its taps t (in order) of x[xoff[t] + k] * f[foff[t] +
 * k], each product fused into the sum (XNNPACK's arithmetic), clamped to [lo,
 * hi] as ops_clamp_f32 does; the channels four vectors V
 * at a time (held in registers across the taps), then one, then eight, then
 * one by one. */
/* The channels from k on, a vector V (of lanes M) at a time while one fits. */
#define DEPTHWISE_VECTORS(V, M)                                                                    \
    for (; k + sizeof(V) / sizeof(float) <= oc; k += sizeof(V) / sizeof(float)) {                 \
        V a, lov = lo - (V){0}, hiv = hi - (V){0};                                                 \
        LOAD(a, bias + k);                                                                         \
        for (size_t t = 0; t < taps; t++) {                                                        \
            V xv, fv;                                                                              \
            LOAD(xv, x + xoff[t] + k);                                                             \
            LOAD(fv, f + foff[t] + k);                                                             \
            a = OPS_FMA(xv, fv, a);                                                                \
        }                                                                                          \
        a = OPS_SELECT(V, M, a < lov, lov, OPS_SELECT(V, M, a > hiv, hiv, a));                     \
        STORE(out + k, a);                                                                         \
    }

#define DEPTHWISE_PIXEL_F32(NAME, ATTR, V, M)                                                      \
    ATTR static void NAME(size_t oc, size_t taps, const float *x, const size_t *xoff, const float *f, \
                          const size_t *foff, const float *bias, float lo, float hi, float *out)    \
    {                                                                                              \
        enum { L = sizeof(V) / sizeof(float), Q = 4 };                                             \
        size_t k = 0;                                                                              \
        V lov = lo - (V){0}, hiv = hi - (V){0};                                                    \
        for (; k + Q * L <= oc; k += Q * L) {                                                      \
            V a[Q];                                                                                \
            _Pragma("GCC unroll 4") for (size_t q = 0; q < Q; q++)                                 \
                LOAD(a[q], bias + k + q * L);                                                      \
            for (size_t t = 0; t < taps; t++) {                                                    \
                const float *xt = x + xoff[t] + k, *ft = f + foff[t] + k;                          \
                _Pragma("GCC unroll 4") for (size_t q = 0; q < Q; q++) {                           \
                    V xv, fv;                                                                      \
                    LOAD(xv, xt + q * L);                                                          \
                    LOAD(fv, ft + q * L);                                                          \
                    a[q] = OPS_FMA(xv, fv, a[q]);                                                  \
                }                                                                                  \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (size_t q = 0; q < Q; q++) {                               \
                a[q] = OPS_SELECT(V, M, a[q] < lov, lov, OPS_SELECT(V, M, a[q] > hiv, hiv, a[q])); \
                STORE(out + k + q * L, a[q]);                                                      \
            }                                                                                      \
        }                                                                                          \
        DEPTHWISE_VECTORS(V, M);                                                                   \
        DEPTHWISE_VECTORS(v8f, v8m);                                                               \
        for (; k < oc; k++) {                                                                      \
            float a = bias[k];                                                                     \
            for (size_t t = 0; t < taps; t++)                                                      \
                a = __builtin_fmaf(x[xoff[t] + k], f[foff[t] + k], a);                             \
            out[k] = a < lo ? lo : (a > hi ? hi : a);                                              \
        }                                                                                          \
    }

#if defined(OPS_HAVE_WIDE)
DEPTHWISE_PIXEL_F32(depthwise_pixel_f32_wide, OPS_TARGET_WIDE, v16f, v16m)
#endif
DEPTHWISE_PIXEL_F32(depthwise_pixel_f32_narrow, OPS_CLONES, v8f, v8m)

static void depthwise_pixel_f32(size_t oc, size_t taps, const float *x, const size_t *xoff, const float *f,
                                const size_t *foff, const float *bias, float lo, float hi, float *out)
{
#if defined(OPS_HAVE_WIDE)
    if (ops_wide())
        return depthwise_pixel_f32_wide(oc, taps, x, xoff, f, foff, bias, lo, hi, out);
#endif
    depthwise_pixel_f32_narrow(oc, taps, x, xoff, f, foff, bias, lo, hi, out);
}

/* Whether every tap of output (oy, ox) falls inside the image. */
static bool interior(const struct ops_geometry *g, size_t oy, size_t ox)
{
    long y0 = (long)oy * g->sh - g->top, x0 = (long)ox * g->sw - g->left;
    return y0 >= 0 && y0 + (long)(g->fh - 1) * g->dh < (long)g->h && x0 >= 0 &&
           x0 + (long)(g->fw - 1) * g->dw < (long)g->w;
}

int npu_op_depthwise_conv_2d(const struct npu_tensor *input, const struct npu_tensor *filter,
                             const struct npu_tensor *bias, const struct npu_window *w,
                             int32_t multiplier, const struct npu_tensor *output,
                             size_t begin, size_t end)
{
    enum ops_kind kind;
    OPS_TRY(ops_conv_types(input, filter, bias, output, 3, &kind));
    OPS_TRY(ops_check_window(w, false));
    if (input->rank != 4 || filter->rank != 4 || bias->rank != 1)
        return NPU_E_BAD_SHAPE;
    if (multiplier < 1)
        return NPU_E_BAD_SCALAR;
    struct ops_geometry g;
    OPS_TRY(ops_geometry(input, w, filter->dims[1], filter->dims[2], &g));
    g.oc = filter->dims[3];
    if (filter->dims[0] != 1 || g.oc != g.c * (size_t)multiplier || bias->dims[0] != g.oc)
        return NPU_E_BAD_SHAPE;
    OPS_TRY(ops_check_geometry_output(output, &g, w->nchw));
    ops_clamp_range(g.n * g.oh, &begin, &end);
    if (begin == end)
        return NPU_OK;

    size_t mult = (size_t)multiplier, oc = g.oc, count = (end - begin) * g.ow;
    const void *x;
    void *x_owned = NULL, *rows = NULL;
    OPS_TRY(ops_nhwc_input(input, w->nchw, &x, &x_owned));
    size_t *pixel = malloc(g.fh * g.fw * sizeof *pixel), *tap = malloc(g.fh * g.fw * sizeof *tap);
    int rc = pixel && tap ? NPU_OK : NPU_E_NO_MEMORY;
    if (rc != NPU_OK) {
        /* nothing computed */
    } else if (kind == OPS_KIND_Q8) {
        struct ops_requant q = {0};
        int32_t *acc = malloc(count * oc * sizeof *acc);
        int16_t *fc = malloc(g.fh * g.fw * oc * sizeof *fc);
        rows = malloc(count * oc);
        rc = acc && fc && rows ? ops_requant_init(&q, input, filter, output, oc, w->fuse) : NPU_E_NO_MEMORY;
        if (rc == NPU_OK) {
            bool per_channel = filter->type == NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL;
            for (size_t i = 0; i < g.fh * g.fw * oc; i++)
                fc[i] = (int16_t)(per_channel ? ((const int8_t *)filter->data)[i]
                                              : ((const uint8_t *)filter->data)[i] - filter->zero_point);
            const uint8_t *xs = x;
            for (size_t r = begin, i = 0; r < end; r++)
                for (size_t ox = 0; ox < g.ow; ox++, i++) {
                    size_t n = r / g.oh, oy = r % g.oh;
                    int32_t *a = acc + i * oc;
                    memset(a, 0, oc * sizeof *a);
                    for (size_t t = 0, taps = valid_taps(&g, n, oy, ox, pixel, tap); t < taps; t++) {
                        const uint8_t *s = xs + pixel[t] * g.c;
                        const int16_t *f = fc + tap[t] * oc;
                        for (size_t k = 0; k < oc; k++)
                            a[k] += ((int32_t)s[k / mult] - input->zero_point) * f[k];
                    }
                }
            ops_requant_block(&q, acc, bias->data, count, oc, rows);
            ops_store_rows_u8(output, w->nchw, begin, end, rows);
        }
        ops_requant_free(&q);
        free(acc);
        free(fc);
    } else {
        struct npu_tensor fv, bv;
        float *f_owned = NULL, *b_owned = NULL;
        size_t all = g.fh * g.fw;
        /* the taps' offsets, in valid_taps' order (XNNPACK's: column by column):
         * all of them from an interior pixel's first (in the input, in the
         * filter), and a border pixel's own */
        size_t *off = malloc(4 * all * sizeof *off), *ftap = off + all, *xoff = off + 2 * all, *foff = off + 3 * all;
        float *out_rows = ops_rows_in_place(output, w->nchw, begin, end, input);
        if (out_rows == NULL)
            out_rows = rows = malloc(count * oc * sizeof(float));
        rc = out_rows && off ? ops_widen(filter, &fv, &f_owned) : NPU_E_NO_MEMORY;
        if (rc == NPU_OK)
            rc = ops_widen(bias, &bv, &b_owned);
        if (rc == NPU_OK) {
            const float *xs = x, *fs = fv.data, *bs = bv.data;
            float lo, hi;
            ops_float_bounds(w->fuse, &lo, &hi);
            for (size_t fx = 0, t = 0; fx < g.fw; fx++)
                for (size_t fy = 0; fy < g.fh; fy++, t++) {
                    off[t] = (fy * (size_t)g.dh * g.w + fx * (size_t)g.dw) * g.c;
                    ftap[t] = (fy * g.fw + fx) * oc;
                }
            for (size_t r = begin, i = 0; r < end; r++)
                for (size_t ox = 0; ox < g.ow; ox++, i++) {
                    size_t n = r / g.oh, oy = r % g.oh;
                    float *a = out_rows + i * oc;
                    if (mult == 1 && interior(&g, oy, ox)) {
                        size_t first = (n * g.h + (size_t)((long)oy * g.sh - g.top)) * g.w +
                                       (size_t)((long)ox * g.sw - g.left);
                        depthwise_pixel_f32(oc, all, xs + first * g.c, off, fs, ftap, bs, lo, hi, a);
                        continue;
                    }
                    size_t taps = valid_taps(&g, n, oy, ox, pixel, tap);
                    if (mult == 1) {
                        for (size_t t = 0; t < taps; t++) {
                            xoff[t] = pixel[t] * g.c;
                            foff[t] = tap[t] * oc;
                        }
                        depthwise_pixel_f32(oc, taps, xs, xoff, fs, foff, bs, lo, hi, a);
                        continue;
                    }
                    memcpy(a, bs, oc * sizeof *a);
                    for (size_t t = 0; t < taps; t++) {
                        const float *s = xs + pixel[t] * g.c;
                        const float *f = fs + tap[t] * oc;
                        for (size_t k = 0; k < oc; k++)
                            a[k] = __builtin_fmaf(s[k / mult], f[k], a[k]);
                    }
                    ops_clamp_f32(a, a, oc, lo, hi);
                }
            ops_store_rows_f32(output, w->nchw, begin, end, out_rows);
        }
        free(f_owned);
        free(b_owned);
        free(off);
    }
    free(pixel);
    free(tap);
    free(rows);
    free(x_owned);
    return rc;
}

/* -- FULLY_CONNECTED ----------------------------------------------------------- */

struct fc_ctx {
    const void *x;
    size_t k;
    int32_t zero;
};

static void pack_fc_f32(const void *vctx, size_t m, size_t k0, size_t kc, float *dst)
{
    const struct fc_ctx *ctx = vctx;
    memcpy(dst, (const float *)ctx->x + m * ctx->k + k0, kc * sizeof *dst);
}

static void pack_fc_i16(const void *vctx, size_t m, size_t k0, size_t kc, int16_t *dst)
{
    const struct fc_ctx *ctx = vctx;
    const uint8_t *row = (const uint8_t *)ctx->x + m * ctx->k + k0;
    for (size_t i = 0; i < kc; i++)
        dst[i] = (int16_t)(row[i] - ctx->zero);
}

int npu_op_fully_connected(const struct npu_tensor *input, const struct npu_tensor *weights,
                           const struct npu_tensor *bias, int32_t fuse,
                           const struct npu_tensor *output, size_t begin, size_t end)
{
    enum ops_kind kind;
    OPS_TRY(ops_conv_types(input, weights, bias, output, 0, &kind));
    OPS_TRY(ops_check_fuse(fuse));
    if (weights->type == NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL)
        return NPU_E_BAD_OPERAND_TYPE;  /* 1.2: per-tensor weights only */
    if (input->rank < 2 || input->rank > 4 || weights->rank != 2 || bias->rank != 1 || output->rank != 2)
        return NPU_E_BAD_SHAPE;
    size_t units = weights->dims[0], size = weights->dims[1], count = npu_ops_element_count(input);
    if (count % size != 0 || bias->dims[0] != units || output->dims[0] != count / size || output->dims[1] != units)
        return NPU_E_BAD_SHAPE;
    size_t batch = count / size;
    ops_clamp_range(batch, &begin, &end);
    if (begin == end)
        return NPU_OK;

    int rc;
    if (kind == OPS_KIND_Q8) {
        struct ops_gemm_i16 gemm = {0};
        struct ops_requant q = {0};
        struct fc_ctx ctx = {input->data, size, input->zero_point};
        int32_t *acc = malloc((end - begin) * units * sizeof *acc);
        rc = acc ? ops_requant_init(&q, input, weights, output, units, fuse) : NPU_E_NO_MEMORY;
        if (rc == NPU_OK)
            rc = ops_gemm_i16_prepare(&gemm, weights->data, false, weights->zero_point, units, size);
        if (rc == NPU_OK)
            rc = ops_gemm_i16_run(&gemm, pack_fc_i16, &ctx, begin, end, acc, units);
        if (rc == NPU_OK)
            ops_requant_block(&q, acc, bias->data, end - begin, units, (uint8_t *)output->data + begin * units);
        ops_gemm_i16_free(&gemm);
        ops_requant_free(&q);
        free(acc);
        return rc;
    }
    struct ops_gemm_f32 gemm = {0};
    struct npu_tensor xv, wv, bv;
    float *x_owned = NULL, *w_owned = NULL, *b_owned = NULL;
    /* in place when the output is float32 and not the input's memory */
    float *rows = (float *)output->data + begin * units, *rows_owned = NULL;
    if (output->type != NPU_OPERAND_TENSOR_FLOAT32 ||
        !ops_disjoint(rows, (end - begin) * units * sizeof *rows, input->data, count * ops_element_size(input->type)))
        rows = rows_owned = malloc((end - begin) * units * sizeof *rows);
    rc = rows ? ops_widen(input, &xv, &x_owned) : NPU_E_NO_MEMORY;
    if (rc == NPU_OK)
        rc = ops_widen(weights, &wv, &w_owned);
    if (rc == NPU_OK)
        rc = ops_widen(bias, &bv, &b_owned);
    if (rc == NPU_OK)
        rc = ops_gemm_f32_prepare(&gemm, wv.data, units, size);
    struct fc_ctx ctx = {rc == NPU_OK ? xv.data : NULL, size, 0};
    float lo, hi;
    ops_float_bounds(fuse, &lo, &hi);
    if (rc == NPU_OK)
        rc = ops_gemm_f32_run_direct(&gemm, pack_fc_f32, &ctx, (const float *)ctx.x, size, begin, end, bv.data, lo, hi,
                                     rows, units);
    if (rc == NPU_OK) {
        for (size_t i = 0; rows_owned && i < (end - begin) * units; i++) {
            float v = rows[i];
            if (output->type == NPU_OPERAND_TENSOR_FLOAT16)
                ((uint16_t *)output->data)[begin * units + i] = npu_float_to_half(v);
            else
                ((float *)output->data)[begin * units + i] = v;
        }
    }
    ops_gemm_f32_free(&gemm);
    free(rows_owned);
    free(x_owned);
    free(w_owned);
    free(b_owned);
    return rc;
}
