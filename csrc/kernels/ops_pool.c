/*
 * AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D.  A window's padded taps are not
 * counted: the average and the L2 norm divide by the taps inside the image.
 * Quantized (average and max) stay in stored integers, as Android's reference:
 * the average is (sum + count / 2) / count, then the fused bounds clamp.
 */
#include <math.h>
#include <stdlib.h>

#include "ops_internal.h"

enum pool_kind { POOL_AVERAGE, POOL_MAX, POOL_L2 };

/* The taps of output (oy, ox) inside the image: [y0, y1) x [x0, x1). */
static void taps(const struct ops_geometry *g, size_t oy, size_t ox, size_t *y0, size_t *y1, size_t *x0, size_t *x1)
{
    long ys = (long)oy * g->sh - g->top, xs = (long)ox * g->sw - g->left;
    long ye = ys + (long)g->fh, xe = xs + (long)g->fw;
    *y0 = ys < 0 ? 0 : (size_t)ys;
    *x0 = xs < 0 ? 0 : (size_t)xs;
    *y1 = ye > (long)g->h ? g->h : (ye < 0 ? 0 : (size_t)ye);
    *x1 = xe > (long)g->w ? g->w : (xe < 0 ? 0 : (size_t)xe);
}

/* One output pixel of a float pool, its c channels at once: each channel's taps
 * [y0, y1) x [x0, x1) of the NHWC image x (rows of w pixels) in the order the
 * scalar loop reads them (rows, then columns), eight channels at a time, then
 * the average or the L2 norm over taps_in and the fused bounds. */
OPS_CLONES
static void pool_pixel_f32(enum pool_kind kind, const float *x, size_t w, size_t c, size_t y0, size_t y1, size_t x0,
                           size_t x1, size_t taps_in, float lo, float hi, float *out)
{
    float first = kind == POOL_MAX ? -INFINITY : 0.0f;
    for (size_t k = 0; k < c; k++)
        out[k] = first;
    for (size_t y = y0; y < y1; y++)
        for (size_t xx = x0; xx < x1; xx++) {
            const float *s = x + (y * w + xx) * c;
            size_t k = 0;
            for (; k + 8 <= c; k += 8) {
                v8f v, a;
                LOAD(v, s + k);
                LOAD(a, out + k);
                a = kind == POOL_MAX ? OPS_V8_SELECT(v > a, v, a) : a + (kind == POOL_L2 ? v * v : v);
                STORE(out + k, a);
            }
            for (; k < c; k++) {
                float v = s[k];
                out[k] = kind == POOL_MAX ? (v > out[k] ? v : out[k]) : out[k] + (kind == POOL_L2 ? v * v : v);
            }
        }
    for (size_t k = 0; kind != POOL_MAX && k < c; k++)
        out[k] = kind == POOL_L2 ? sqrtf(out[k] / (float)taps_in) : out[k] / (float)taps_in;
    ops_clamp_f32(out, out, c, lo, hi);
}

static int pool(enum pool_kind kind, const struct npu_tensor *input, const struct npu_window *w,
                const struct npu_tensor *output, size_t begin, size_t end)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_check_window(w, true));
    if (kind == POOL_L2)
        OPS_TRY(ops_type_in(input, 2, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16));
    else
        OPS_TRY(ops_type_in(input, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    if (output->type != input->type)
        return NPU_E_BAD_OPERAND_TYPE;
    if (input->rank != 4)
        return NPU_E_BAD_SHAPE;
    struct npu_window plain = *w;
    plain.dilation_h = plain.dilation_w = 1;
    struct ops_geometry g;
    OPS_TRY(ops_geometry(input, &plain, (size_t)w->filter_h, (size_t)w->filter_w, &g));
    g.oc = g.c;
    OPS_TRY(ops_check_geometry_output(output, &g, w->nchw));
    ops_clamp_range(g.n * g.oh, &begin, &end);
    if (begin == end)
        return NPU_OK;

    size_t count = (end - begin) * g.ow * g.c;
    const void *x;
    void *owned;
    OPS_TRY(ops_nhwc_input(input, w->nchw, &x, &owned));
    bool quant = input->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM;
    void *rows = quant ? NULL : ops_rows_in_place(output, w->nchw, begin, end, input), *rows_owned = NULL;
    if (rows == NULL)
        rows = rows_owned = malloc(count * (quant ? 1 : sizeof(float)));
    if (rows == NULL) {
        free(owned);
        return NPU_E_NO_MEMORY;
    }
    float flo, fhi;
    int32_t qlo, qhi;
    ops_float_bounds(w->fuse, &flo, &fhi);
    if (quant)
        ops_quant_bounds(w->fuse, output, &qlo, &qhi);
    size_t i = 0;
    for (size_t r = begin; r < end; r++) {
        size_t n = r / g.oh, oy = r % g.oh;
        for (size_t ox = 0; ox < g.ow; ox++) {
            size_t y0, y1, x0, x1;
            taps(&g, oy, ox, &y0, &y1, &x0, &x1);
            size_t taps_in = (y1 > y0 ? y1 - y0 : 0) * (x1 > x0 ? x1 - x0 : 0);
            if (!quant) {
                pool_pixel_f32(kind, (const float *)x + n * g.h * g.w * g.c, g.w, g.c, y0, y1, x0, x1, taps_in, flo,
                               fhi, (float *)rows + i);
                i += g.c;
                continue;
            }
            const uint8_t *xs = x;
            for (size_t c = 0; c < g.c; c++, i++) {
                int64_t sum = 0;
                int32_t best = 0;
                for (size_t y = y0; y < y1; y++)
                    for (size_t xx = x0; xx < x1; xx++) {
                        int32_t v = xs[((n * g.h + y) * g.w + xx) * g.c + c];
                        sum += v;
                        best = v > best ? v : best;
                    }
                int64_t v = kind == POOL_MAX ? best : (taps_in ? (sum + (int64_t)taps_in / 2) / (int64_t)taps_in : 0);
                ((uint8_t *)rows)[i] = (uint8_t)(v < qlo ? qlo : (v > qhi ? qhi : v));
            }
        }
    }
    if (quant)
        ops_store_rows_u8(output, w->nchw, begin, end, rows);
    else
        ops_store_rows_f32(output, w->nchw, begin, end, rows);
    free(rows_owned);
    free(owned);
    return NPU_OK;
}

int npu_op_average_pool_2d(const struct npu_tensor *input, const struct npu_window *w,
                           const struct npu_tensor *output, size_t begin, size_t end)
{
    return pool(POOL_AVERAGE, input, w, output, begin, end);
}

int npu_op_max_pool_2d(const struct npu_tensor *input, const struct npu_window *w,
                       const struct npu_tensor *output, size_t begin, size_t end)
{
    return pool(POOL_MAX, input, w, output, begin, end);
}

int npu_op_l2_pool_2d(const struct npu_tensor *input, const struct npu_window *w,
                      const struct npu_tensor *output, size_t begin, size_t end)
{
    return pool(POOL_L2, input, w, output, begin, end);
}
