/*
 * Detection: box transforms, regions of interest, non-maximum suppression,
 * proposals, post-processing and keypoints (npu/ops.h's last section).
 *
 * As Android's reference, everything reads its operands' real values into
 * float, computes in float and stores at the end (quantized with the output's
 * parameters, or rounded to half); ROI_ALIGN's quant8 path is the reference's
 * integer one (weights in 1/255ths, one requantization per bin).  Where the
 * reference sorts with an unstable sort, ties here keep their input order.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

#define BOX_SCALE 0.125f
/* ROI_ALIGN's largest explicit sampling ratio. */
#define ROI_MAX_RATIO 1024

/* -- reading and storing real values -------------------------------------------- */

/* t's values as float (a copy to free). */
static int reals(const struct npu_tensor *t, float **out)
{
    size_t n = npu_ops_element_count(t);
    float *v = malloc(n * sizeof *v);
    if (v == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t i = 0; i < n; i++)
        v[i] = (float)ops_get(t, i);
    *out = v;
    return NPU_OK;
}

/* Element i of an output: float, half, or quantized (halves away from zero, saturated). */
static void store(const struct npu_tensor *t, size_t i, float v)
{
    if (t->type == NPU_OPERAND_TENSOR_QUANT16_ASYMM) {
        double q = round((double)v / t->scale) + t->zero_point;
        ((uint16_t *)t->data)[i] = (uint16_t)(q < 0 ? 0 : (q > 65535 ? 65535 : q));
    } else {
        ops_set(t, i, v);
    }
}

static bool is_box_quant(const struct npu_tensor *t, int32_t type)
{
    return t->type == type && t->scale == BOX_SCALE && t->zero_point == 0;
}

/* The tensor that selects the variant: float32, float16 or quant8. */
static int check_variant(const struct npu_tensor *t)
{
    OPS_TRY(ops_check(t));
    return ops_type_in(t, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_QUANT8_ASYMM);
}

/* A box tensor of the variant selected by like: like's float type, or
 * TENSOR_QUANT16_ASYMM (0.125, 0) when like is quantized. */
static int check_box_type(const struct npu_tensor *t, const struct npu_tensor *like)
{
    OPS_TRY(ops_check(t));
    if (ops_is_float(like))
        return t->type == like->type ? NPU_OK : NPU_E_BAD_OPERAND_TYPE;
    if (t->type != NPU_OPERAND_TENSOR_QUANT16_ASYMM)
        return NPU_E_BAD_OPERAND_TYPE;
    return is_box_quant(t, NPU_OPERAND_TENSOR_QUANT16_ASYMM) ? NPU_OK : NPU_E_BAD_SCALAR;
}

static int check_dims(const struct npu_tensor *t, uint32_t rank, const uint32_t *dims)
{
    if (t->rank != rank)
        return NPU_E_BAD_SHAPE;
    for (uint32_t i = 0; i < rank; i++)
        if (dims[i] != 0 && t->dims[i] != dims[i])
            return NPU_E_BAD_SHAPE;
    return NPU_OK;
}

static int check_int32(const struct npu_tensor *t, uint32_t rank, const uint32_t *dims)
{
    OPS_TRY(ops_check(t));
    if (t->type != NPU_OPERAND_TENSOR_INT32)
        return NPU_E_BAD_OPERAND_TYPE;
    return check_dims(t, rank, dims);
}

/* (x1, y1, x2, y2) with x1 <= x2 and y1 <= y2 (NaN is malformed too). */
static bool box_ok(const float *b)
{
    return b[0] <= b[2] && b[1] <= b[3];
}

/* -- AXIS_ALIGNED_BBOX_TRANSFORM --------------------------------------------------- */

/* One (dx, dy, dw, dh) applied to one box, clipped to [0, width] x [0, height]
 * (in double: the corners are differences of nearby values, which float32
 * would leave a few ulps of the coordinates off). */
static void transform_box(const float *box, const float *d, float height, float width, float *out)
{
    double w = (double)box[2] - box[0], h = (double)box[3] - box[1];
    double cx = ((double)box[0] + box[2]) / 2, cy = ((double)box[1] + box[3]) / 2;
    double ncx = cx + d[0] * w, ncy = cy + d[1] * h;
    double nw = exp(d[2]) * w, nh = exp(d[3]) * h;
    double c[4] = {ncx - nw / 2, ncy - nh / 2, ncx + nw / 2, ncy + nh / 2};
    double bound[4] = {width, height, width, height};
    for (int k = 0; k < 4; k++)
        out[k] = (float)fmin(fmax(c[k], 0.0), bound[k]);
}

int npu_op_axis_aligned_bbox_transform(const struct npu_tensor *rois, const struct npu_tensor *deltas,
                                       const struct npu_tensor *batches, const struct npu_tensor *image_info,
                                       const struct npu_tensor *output)
{
    OPS_TRY(ops_check(rois));
    OPS_TRY(ops_check(deltas));
    OPS_TRY(ops_check(image_info));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_type_in(rois, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16,
                        NPU_OPERAND_TENSOR_QUANT16_ASYMM));
    if (ops_is_float(rois)) {
        if (deltas->type != rois->type || image_info->type != rois->type || output->type != rois->type)
            return NPU_E_BAD_OPERAND_TYPE;
    } else {
        if (deltas->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM || image_info->type != rois->type ||
            output->type != rois->type)
            return NPU_E_BAD_OPERAND_TYPE;
        if (!is_box_quant(rois, rois->type) || !is_box_quant(image_info, rois->type) ||
            !is_box_quant(output, rois->type))
            return NPU_E_BAD_SCALAR;
    }
    if (rois->rank != 2 || rois->dims[1] != 4 || deltas->rank != 2 || deltas->dims[1] % 4 != 0)
        return NPU_E_BAD_SHAPE;
    uint32_t n = rois->dims[0], classes = deltas->dims[1] / 4;
    OPS_TRY(check_dims(deltas, 2, (uint32_t[]){n, 4 * classes}));
    OPS_TRY(check_int32(batches, 1, (uint32_t[]){n}));
    OPS_TRY(check_dims(image_info, 2, (uint32_t[]){0, 2}));
    OPS_TRY(check_dims(output, 2, (uint32_t[]){n, 4 * classes}));

    float *box = NULL, *d = NULL, *info = NULL;
    int rc = reals(rois, &box);
    if (rc == NPU_OK)
        rc = reals(deltas, &d);
    if (rc == NPU_OK)
        rc = reals(image_info, &info);
    const int32_t *b = batches->data;
    for (uint32_t r = 0; r < n && rc == NPU_OK; r++) {
        if (b[r] < 0 || (uint32_t)b[r] >= image_info->dims[0] || !box_ok(box + 4 * r)) {
            rc = NPU_E_INVALID_ARGUMENT;
            break;
        }
        for (uint32_t k = 0; k < classes; k++) {
            size_t at = ((size_t)r * classes + k) * 4;
            float out[4];
            transform_box(box + 4 * r, d + at, info[2 * b[r]], info[2 * b[r] + 1], out);
            for (int j = 0; j < 4; j++)
                store(output, at + (size_t)j, out[j]);
        }
    }
    free(box);
    free(d);
    free(info);
    return rc;
}

/* -- ROI_ALIGN and ROI_POOLING -------------------------------------------------------- */

/* The operands both share: input, rois and batches of the input's variant, the
 * output [n, oh, ow, depth] in the input's layout. */
static int check_roi_operands(const struct npu_tensor *input, const struct npu_tensor *rois,
                              const struct npu_tensor *batches, float h_stride, float w_stride, bool nchw,
                              const struct npu_tensor *output, struct ops_image *in, struct ops_image *out)
{
    OPS_TRY(check_variant(input));
    OPS_TRY(ops_check(output));
    OPS_TRY(check_box_type(rois, input));
    if (output->type != input->type)
        return NPU_E_BAD_OPERAND_TYPE;
    if (input->rank != 4 || output->rank != 4 || rois->rank != 2 || rois->dims[1] != 4)
        return NPU_E_BAD_SHAPE;
    OPS_TRY(check_int32(batches, 1, (uint32_t[]){rois->dims[0]}));
    if (!(h_stride > 0.0f) || !(w_stride > 0.0f) || !isfinite(h_stride) || !isfinite(w_stride))
        return NPU_E_BAD_SCALAR;
    ops_image(input, nchw, in);
    ops_image(output, nchw, out);
    if (out->n != rois->dims[0] || out->c != in->c)
        return NPU_E_BAD_SHAPE;
    return NPU_OK;
}

/* Roi r in the input's coordinates, checked as the reference checks it. */
static int roi_region(const struct npu_tensor *rois, const struct npu_tensor *batches, const struct ops_image *in,
                      size_t r, float h_stride, float w_stride, float region[4], size_t *batch)
{
    float box[4];
    for (int k = 0; k < 4; k++)
        box[k] = (float)ops_get(rois, 4 * r + (size_t)k);
    int32_t b = ((const int32_t *)batches->data)[r];
    if (b < 0 || (size_t)b >= in->n || !box_ok(box))
        return NPU_E_INVALID_ARGUMENT;
    float hs = 1.0f / h_stride, ws = 1.0f / w_stride;
    region[0] = box[0] * ws;
    region[1] = box[1] * hs;
    region[2] = box[2] * ws;
    region[3] = box[3] * hs;
    for (int k = 0; k < 4; k++)
        if (!(box[k] >= 0.0f) || !(region[k] <= (float)((k & 1) ? in->h : in->w)))
            return NPU_E_INVALID_ARGUMENT;
    *batch = (size_t)b;
    return NPU_OK;
}

/* One bilinear sample's four taps and weights (the reference's clamping at the
 * far edges). */
struct taps {
    size_t y0, y1, x0, x1;
    float w[4];
};

static void sample_taps(const struct ops_image *in, float y, float x, struct taps *t)
{
    size_t x0 = (size_t)floorf(x), y0 = (size_t)floorf(y);
    size_t x1 = x0 + 1, y1 = y0 + 1;
    float dx = x - (float)x0, dy = y - (float)y0;
    if (x0 >= in->w - 1) {
        x0 = x1 = in->w - 1;
        dx = 0;
    }
    if (y0 >= in->h - 1) {
        y0 = y1 = in->h - 1;
        dy = 0;
    }
    *t = (struct taps){y0, y1, x0, x1, {(1 - dx) * (1 - dy), dx * (1 - dy), (1 - dx) * dy, dx * dy}};
}

int npu_op_roi_align(const struct npu_tensor *input, const struct npu_tensor *rois,
                     const struct npu_tensor *batches, float h_stride, float w_stride,
                     int32_t h_ratio, int32_t w_ratio, bool nchw, const struct npu_tensor *output,
                     size_t begin, size_t end)
{
    struct ops_image in, out;
    OPS_TRY(check_roi_operands(input, rois, batches, h_stride, w_stride, nchw, output, &in, &out));
    if (h_ratio < 0 || w_ratio < 0 || h_ratio > ROI_MAX_RATIO || w_ratio > ROI_MAX_RATIO)
        return NPU_E_BAD_SCALAR;
    ops_clamp_range(out.n, &begin, &end);
    if (begin == end)
        return NPU_OK;
    bool quant = input->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM;
    struct npu_tensor view;
    float *owned;
    OPS_TRY(ops_widen(input, &view, &owned));
    const float *xf = view.data;
    const uint8_t *xq = input->data;
    double *acc = malloc(in.c * sizeof *acc);
    int64_t *iacc = malloc(in.c * sizeof *iacc);
    int rc = acc && iacc ? NPU_OK : NPU_E_NO_MEMORY;
    const float w_quantum = 1.0f / 255.0f;
    for (size_t r = begin; r < end && rc == NPU_OK; r++) {
        float region[4];
        size_t b;
        rc = roi_region(rois, batches, &in, r, h_stride, w_stride, region, &b);
        if (rc != NPU_OK)
            break;
        float roi_w = fmaxf(region[2] - region[0], 1.0f), roi_h = fmaxf(region[3] - region[1], 1.0f);
        float w_step = roi_w / (float)out.w, h_step = roi_h / (float)out.h;
        uint32_t ws = w_ratio > 0 ? (uint32_t)w_ratio : (uint32_t)ceilf(w_step);
        uint32_t hs = h_ratio > 0 ? (uint32_t)h_ratio : (uint32_t)ceilf(h_step);
        float w_bin = w_step / (float)ws, h_bin = h_step / (float)hs;
        int32_t multiplier = 0, shift = 0;
        if (quant) {
            float real = input->scale * w_quantum / output->scale / (float)(ws * hs);
            if (!(real < 1.0f) || npu_quantize_multiplier(real, &multiplier, &shift) != NPU_OK) {
                rc = NPU_E_BAD_SCALAR;
                break;
            }
        }
        for (size_t i = 0; i < out.h; i++)
            for (size_t j = 0; j < out.w; j++) {
                for (size_t k = 0; k < in.c; k++)
                    acc[k] = 0, iacc[k] = 0;
                float w_start = w_step * (float)j + region[0], h_start = h_step * (float)i + region[1];
                for (uint32_t sy = 0; sy < hs; sy++)
                    for (uint32_t sx = 0; sx < ws; sx++) {
                        struct taps t;
                        sample_taps(&in, h_start + h_bin / 2 + h_bin * (float)sy,
                                    w_start + w_bin / 2 + w_bin * (float)sx, &t);
                        size_t at[4] = {ops_at(&in, b, t.y0, t.x0, 0), ops_at(&in, b, t.y0, t.x1, 0),
                                        ops_at(&in, b, t.y1, t.x0, 0), ops_at(&in, b, t.y1, t.x1, 0)};
                        if (quant) {
                            int32_t wq[4];
                            for (int c = 0; c < 4; c++)
                                wq[c] = (int32_t)roundf(t.w[c] / w_quantum);
                            for (size_t k = 0; k < in.c; k++) {
                                int32_t v = 0;
                                for (int c = 0; c < 4; c++)
                                    v += wq[c] * ((int32_t)xq[at[c] + k * in.sc] - input->zero_point);
                                iacc[k] += v;
                            }
                        } else {
                            for (size_t k = 0; k < in.c; k++) {
                                float v = 0;
                                for (int c = 0; c < 4; c++)
                                    v += t.w[c] * xf[at[c] + k * in.sc];
                                acc[k] += v;
                            }
                        }
                    }
                for (size_t k = 0; k < in.c; k++) {
                    size_t o = ops_at(&out, r, i, j, k);
                    if (quant) {
                        int64_t sum = iacc[k] < INT32_MIN ? INT32_MIN : (iacc[k] > INT32_MAX ? INT32_MAX : iacc[k]);
                        int32_t q = npu_multiply_by_quantized_multiplier((int32_t)sum, multiplier, shift) +
                                    output->zero_point;
                        ((uint8_t *)output->data)[o] = (uint8_t)(q < 0 ? 0 : (q > 255 ? 255 : q));
                    } else {
                        store(output, o, (float)(acc[k] / (double)(ws * hs)));
                    }
                }
            }
    }
    free(acc);
    free(iacc);
    free(owned);
    return rc;
}

int npu_op_roi_pooling(const struct npu_tensor *input, const struct npu_tensor *rois,
                       const struct npu_tensor *batches, float h_stride, float w_stride, bool nchw,
                       const struct npu_tensor *output, size_t begin, size_t end)
{
    struct ops_image in, out;
    OPS_TRY(check_roi_operands(input, rois, batches, h_stride, w_stride, nchw, output, &in, &out));
    ops_clamp_range(out.n, &begin, &end);
    bool quant = input->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM;
    bool requantize = quant && (output->scale != input->scale || output->zero_point != input->zero_point);
    for (size_t r = begin; r < end; r++) {
        float region[4];
        size_t b;
        OPS_TRY(roi_region(rois, batches, &in, r, h_stride, w_stride, region, &b));
        long x1 = lroundf(region[0]), y1 = lroundf(region[1]), x2 = lroundf(region[2]), y2 = lroundf(region[3]);
        float roi_w = (float)(x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1), roi_h = (float)(y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1);
        float w_step = roi_w / (float)out.w, h_step = roi_h / (float)out.h;
        for (size_t i = 0; i < out.h; i++)
            for (size_t j = 0; j < out.w; j++) {
                size_t hs = (size_t)floorf(h_step * (float)i + (float)y1);
                size_t he = (size_t)ceilf(h_step * (float)(i + 1) + (float)y1);
                size_t ws = (size_t)floorf(w_step * (float)j + (float)x1);
                size_t we = (size_t)ceilf(w_step * (float)(j + 1) + (float)x1);
                hs = hs < in.h ? hs : in.h;
                he = he < in.h ? he : in.h;
                ws = ws < in.w ? ws : in.w;
                we = we < in.w ? we : in.w;
                for (size_t k = 0; k < in.c; k++) {
                    size_t o = ops_at(&out, r, i, j, k);
                    if (quant) {
                        int32_t best = input->zero_point;
                        bool first = true;
                        for (size_t y = hs; y < he; y++)
                            for (size_t x = ws; x < we; x++) {
                                int32_t v = ((const uint8_t *)input->data)[ops_at(&in, b, y, x, k)];
                                if (first || v > best)
                                    best = v, first = false;
                            }
                        ((uint8_t *)output->data)[o] =
                            requantize ? ops_quantize_u8(((double)best - input->zero_point) * input->scale,
                                                         output->scale, output->zero_point)
                                       : (uint8_t)best;
                    } else {
                        float best = 0.0f;
                        bool first = true;
                        for (size_t y = hs; y < he; y++)
                            for (size_t x = ws; x < we; x++) {
                                float v = (float)ops_get(input, ops_at(&in, b, y, x, k));
                                if (first || v > best)
                                    best = v, first = false;
                            }
                        store(output, o, best);
                    }
                }
            }
    }
    return NPU_OK;
}

/* -- HEATMAP_MAX_KEYPOINT ------------------------------------------------------------- */

/* The reference's second-order Taylor refinement of a maximum at grid[1][1]:
 * the offset (x, y) and the refined score (unchanged when the Hessian is singular). */
static void refine(const float g[3][3], float tolerance, float delta[2], float *score)
{
    float b0 = -(g[1][2] - g[1][0]) / 2.0f, b1 = -(g[2][1] - g[0][1]) / 2.0f;
    float a00 = g[1][0] - 2.0f * g[1][1] + g[1][2];
    float a01 = (g[2][2] - g[2][0] - g[0][2] + g[0][0]) / 4.0f;
    float a11 = g[0][1] - 2.0f * g[1][1] + g[2][1];
    float cross = a00 * a11, det = cross - a01 * a01;
    if (fabsf(det) < tolerance + tolerance * cross)
        return;
    delta[0] = (a11 * b0 - a01 * b1) / det;
    delta[1] = (a00 * b1 - a01 * b0) / det;
    float big = fmaxf(fabsf(delta[0]), fabsf(delta[1]));
    if (big > 1.5f) {
        delta[0] *= 1.5f / big;
        delta[1] *= 1.5f / big;
    }
    *score = g[1][1] - b0 * delta[0] - b1 * delta[1] +
             ((a00 * delta[0] + a01 * delta[1]) * delta[0] + (a01 * delta[0] + a11 * delta[1]) * delta[1]) / 2.0f;
}

int npu_op_heatmap_max_keypoint(const struct npu_tensor *heatmaps, const struct npu_tensor *boxes, bool nchw,
                                const struct npu_tensor *scores, const struct npu_tensor *keypoints)
{
    OPS_TRY(check_variant(heatmaps));
    OPS_TRY(ops_check(scores));
    OPS_TRY(check_box_type(boxes, heatmaps));
    OPS_TRY(check_box_type(keypoints, heatmaps));
    if (scores->type != heatmaps->type)
        return NPU_E_BAD_OPERAND_TYPE;
    if (heatmaps->rank != 4)
        return NPU_E_BAD_SHAPE;
    struct ops_image img;
    ops_image(heatmaps, nchw, &img);
    if (img.h != img.w || img.h < 2)
        return NPU_E_BAD_SHAPE;
    uint32_t n = (uint32_t)img.n, kp = (uint32_t)img.c;
    OPS_TRY(check_dims(boxes, 2, (uint32_t[]){n, 4}));
    OPS_TRY(check_dims(scores, 2, (uint32_t[]){n, kp}));
    OPS_TRY(check_dims(keypoints, 3, (uint32_t[]){n, kp, 2}));
    float tolerance = heatmaps->type == NPU_OPERAND_TENSOR_FLOAT16 ? 1e-3f : 1e-5f;
    long size = (long)img.h;
    for (size_t i = 0; i < n; i++) {
        float box[4];
        for (int k = 0; k < 4; k++)
            box[k] = (float)ops_get(boxes, 4 * i + (size_t)k);
        if (!box_ok(box))
            return NPU_E_INVALID_ARGUMENT;
        for (size_t k = 0; k < kp; k++) {
            float best = -FLT_MAX;
            long by = 0, bx = 0;
            for (long y = 0; y < size; y++)
                for (long x = 0; x < size; x++) {
                    float v = (float)ops_get(heatmaps, ops_at(&img, i, (size_t)y, (size_t)x, k));
                    if (best < v)
                        best = v, by = y, bx = x;
                }
            float grid[3][3];
            for (long dy = -1; dy <= 1; dy++)
                for (long dx = -1; dx <= 1; dx++) {
                    long y = by + dy, x = bx + dx;
                    y = y < 0 ? 1 : (y >= size ? size - 2 : y);  /* mirrored at the border */
                    x = x < 0 ? 1 : (x >= size ? size - 2 : x);
                    grid[dy + 1][dx + 1] = (float)ops_get(heatmaps, ops_at(&img, i, (size_t)y, (size_t)x, k));
                }
            float delta[2] = {0.0f, 0.0f}, score = best;
            refine(grid, tolerance, delta, &score);
            float wpos = ((float)bx + delta[0] + 0.5f) / (float)size;
            float hpos = ((float)by + delta[1] + 0.5f) / (float)size;
            store(scores, i * kp + k, score);
            store(keypoints, (i * kp + k) * 2, wpos * (box[2] - box[0]) + box[0]);
            store(keypoints, (i * kp + k) * 2 + 1, hpos * (box[3] - box[1]) + box[1]);
        }
    }
    return NPU_OK;
}

/* -- non-maximum suppression ------------------------------------------------------------ */

static float iou(const float *a, const float *b)
{
    float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    float w = fmaxf(fminf(a[2], b[2]) - fmaxf(a[0], b[0]), 0.0f);
    float h = fmaxf(fminf(a[3], b[3]) - fmaxf(a[1], b[1]), 0.0f);
    float inter = w * h, uni = area_a + area_b - inter;
    return uni > 0.0f ? inter / uni : 0.0f;
}

/* What decays the others' scores when a box is taken: a kernel of the IoU. */
struct suppress {
    int kernel;          /* -1: hard, dropping IoU >= iou_threshold, scores untouched;
                          * 0, 1, 2: BOX_WITH_NMS_LIMIT's hard, linear, gaussian */
    float iou_threshold, sigma, drop_below;
    const float *boxes;  /* candidate i's box is boxes + 4 * (i / box_div) */
    uint32_t box_div;
};

/* Greedy NMS over the candidates sel[0..n) (indices into scores), at most limit
 * kept (< 0: all): the best remaining is taken, the rest decayed or dropped.
 * The kept ones end in sel[0..return), in the order taken; the others keep
 * their relative order, so ties go to the earlier candidate. */
static uint32_t nms(float *scores, uint32_t *sel, uint32_t n, int32_t limit, const struct suppress *s)
{
    uint32_t kept = 0;
    while (kept < n && (limit < 0 || kept < (uint32_t)limit)) {
        uint32_t best = kept;
        for (uint32_t i = kept + 1; i < n; i++)
            if (scores[sel[i]] > scores[sel[best]])
                best = i;
        uint32_t taken = sel[best];
        memmove(sel + kept + 1, sel + kept, (best - kept) * sizeof *sel);
        sel[kept++] = taken;
        const float *tb = s->boxes + 4 * (size_t)(taken / s->box_div);
        uint32_t survivors = kept;
        for (uint32_t i = kept; i < n; i++) {
            float o = iou(s->boxes + 4 * (size_t)(sel[i] / s->box_div), tb);
            bool keep;
            if (s->kernel < 0) {
                keep = o < s->iou_threshold;
            } else {
                float factor = s->kernel == 2 ? expf(-o * o / s->sigma)
                                              : (o < s->iou_threshold ? 1.0f : (s->kernel == 1 ? 1.0f - o : 0.0f));
                scores[sel[i]] *= factor;
                keep = !(scores[sel[i]] < s->drop_below);
            }
            if (keep)
                sel[survivors++] = sel[i];
        }
        n = survivors;
    }
    return kept;
}

/* A stable sort of indices by a key: descending score, or ascending class then
 * descending score. */
struct ranked {
    float score;
    uint32_t klass, at, index;
};

static int by_score(const void *pa, const void *pb)
{
    const struct ranked *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return a->at < b->at ? -1 : (a->at > b->at);
}

static int by_class_score(const void *pa, const void *pb)
{
    const struct ranked *a = pa, *b = pb;
    if (a->klass != b->klass)
        return a->klass < b->klass ? -1 : 1;
    return by_score(pa, pb);
}

/* Sorts idx[0..n) stably by cmp (classes is the class count for by_class_score). */
static int sort_indices(uint32_t *idx, uint32_t n, const float *scores, uint32_t classes,
                        int (*cmp)(const void *, const void *))
{
    if (n < 2)
        return NPU_OK;
    struct ranked *r = malloc(n * sizeof *r);
    if (r == NULL)
        return NPU_E_NO_MEMORY;
    for (uint32_t i = 0; i < n; i++)
        r[i] = (struct ranked){scores[idx[i]], classes ? idx[i] % classes : 0, i, idx[i]};
    qsort(r, n, sizeof *r, cmp);
    for (uint32_t i = 0; i < n; i++)
        idx[i] = r[i].index;
    free(r);
    return NPU_OK;
}

/* -- BOX_WITH_NMS_LIMIT ---------------------------------------------------------------- */

static bool all_null(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *c,
                     const struct npu_tensor *d)
{
    return a == NULL && b == NULL && c == NULL && (d == NULL);
}

/* Checks the outputs of a data-dependent count: scores (the input's variant),
 * rois ([count, 4], box type), and TENSOR_INT32 [count] ones (ints2 only when
 * need2). */
static int check_count_outputs(const struct npu_tensor *like, uint32_t count, const struct npu_tensor *out_scores,
                               const struct npu_tensor *out_rois, const struct npu_tensor *ints1,
                               const struct npu_tensor *ints2, bool need2)
{
    if (count == 0)  /* nothing to write; an output must say so */
        return out_scores == NULL || (out_scores->rank == 1 && out_scores->dims[0] == 0) ? NPU_OK : NPU_E_BAD_SHAPE;
    OPS_TRY(ops_check(out_scores));
    if (out_scores->type != like->type)
        return NPU_E_BAD_OPERAND_TYPE;
    OPS_TRY(check_dims(out_scores, 1, (uint32_t[]){count}));
    OPS_TRY(check_box_type(out_rois, like));
    OPS_TRY(check_dims(out_rois, 2, (uint32_t[]){count, 4}));
    OPS_TRY(check_int32(ints1, 1, (uint32_t[]){count}));
    if (need2)
        OPS_TRY(check_int32(ints2, 1, (uint32_t[]){count}));
    return NPU_OK;
}

int npu_op_box_with_nms_limit(const struct npu_tensor *scores, const struct npu_tensor *rois,
                              const struct npu_tensor *batches, const struct npu_nms_params *p,
                              const struct npu_tensor *out_scores, const struct npu_tensor *out_rois,
                              const struct npu_tensor *out_classes, const struct npu_tensor *out_batches,
                              uint32_t *count)
{
    if (p == NULL || count == NULL)
        return NPU_E_INVALID_ARGUMENT;
    OPS_TRY(check_variant(scores));
    OPS_TRY(check_box_type(rois, scores));
    if (scores->rank != 2 || scores->dims[1] < 2)
        return NPU_E_BAD_SHAPE;
    uint32_t n = scores->dims[0], classes = scores->dims[1];
    OPS_TRY(check_dims(rois, 2, (uint32_t[]){n, 4 * classes}));
    OPS_TRY(check_int32(batches, 1, (uint32_t[]){n}));
    if (p->kernel < 0 || p->kernel > 2 || (p->kernel == 2 && !(p->sigma > 0.0f)))
        return NPU_E_BAD_SCALAR;
    bool write = !all_null(out_scores, out_rois, out_classes, out_batches);

    const int32_t *b = batches->data;
    float *s = NULL, *box = NULL;
    uint32_t *sel = malloc((size_t)n * classes * sizeof *sel);
    bool *done = calloc(n, sizeof *done);
    int rc = sel && done ? reals(scores, &s) : NPU_E_NO_MEMORY;
    if (rc == NPU_OK)
        rc = reals(rois, &box);
    for (size_t i = 0; rc == NPU_OK && i < (size_t)n * classes; i++)
        if (!box_ok(box + 4 * i))
            rc = NPU_E_INVALID_ARGUMENT;
    struct suppress sup = {p->kernel, p->iou_threshold, p->sigma, p->nms_score_threshold, box, 1};
    uint32_t total = 0;
    /* each image in the order of its first row: per class, NMS; then the
     * image's best max_detections, sorted by class then score */
    for (uint32_t first = 0; rc == NPU_OK && first < n; first++) {
        if (done[first])
            continue;
        uint32_t start = total;
        for (uint32_t c = 1; c < classes; c++) {
            uint32_t m = total;
            for (uint32_t r = first; r < n; r++)
                if (b[r] == b[first] && s[r * classes + c] > p->score_threshold)
                    sel[m++] = r * classes + c;
            total += nms(s, sel + total, m - total, p->max_detections, &sup);
        }
        for (uint32_t r = first; r < n; r++)
            if (b[r] == b[first])
                done[r] = true;
        rc = sort_indices(sel + start, total - start, s, 0, by_score);
        if (p->max_detections >= 0 && total - start > (uint32_t)p->max_detections)
            total = start + (uint32_t)p->max_detections;
        if (rc == NPU_OK)
            rc = sort_indices(sel + start, total - start, s, classes, by_class_score);
    }
    if (rc == NPU_OK && write)
        rc = check_count_outputs(scores, total, out_scores, out_rois, out_classes, out_batches, true);
    if (rc == NPU_OK && write) {
        size_t size = ops_element_size(rois->type);
        for (uint32_t k = 0; k < total; k++) {
            store(out_scores, k, s[sel[k]]);
            memcpy((unsigned char *)out_rois->data + (size_t)k * 4 * size,
                   (const unsigned char *)rois->data + (size_t)sel[k] * 4 * size, 4 * size);
            ((int32_t *)out_classes->data)[k] = (int32_t)(sel[k] % classes);
            ((int32_t *)out_batches->data)[k] = b[sel[k] / classes];
        }
    }
    if (rc == NPU_OK)
        *count = total;
    free(sel);
    free(done);
    free(s);
    free(box);
    return rc;
}

/* -- GENERATE_PROPOSALS ---------------------------------------------------------------- */

int npu_op_generate_proposals(const struct npu_tensor *scores, const struct npu_tensor *deltas,
                              const struct npu_tensor *anchors, const struct npu_tensor *image_info,
                              const struct npu_proposal_params *p, const struct npu_tensor *out_scores,
                              const struct npu_tensor *out_rois, const struct npu_tensor *out_batches,
                              uint32_t *count)
{
    if (p == NULL || count == NULL)
        return NPU_E_INVALID_ARGUMENT;
    OPS_TRY(check_variant(scores));
    OPS_TRY(ops_check(deltas));
    OPS_TRY(ops_check(anchors));
    if (deltas->type != scores->type)
        return NPU_E_BAD_OPERAND_TYPE;
    if (ops_is_float(scores) ? anchors->type != scores->type : anchors->type != NPU_OPERAND_TENSOR_QUANT16_SYMM)
        return NPU_E_BAD_OPERAND_TYPE;
    if (!ops_is_float(scores) && anchors->scale != BOX_SCALE)
        return NPU_E_BAD_SCALAR;
    OPS_TRY(check_box_type(image_info, scores));
    if (scores->rank != 4 || deltas->rank != 4)
        return NPU_E_BAD_SHAPE;
    struct ops_image si, di;
    ops_image(scores, p->nchw, &si);
    ops_image(deltas, p->nchw, &di);
    uint32_t batches = (uint32_t)si.n, a_count = (uint32_t)si.c;
    if (di.n != si.n || di.h != si.h || di.w != si.w || di.c != 4 * si.c)
        return NPU_E_BAD_SHAPE;
    OPS_TRY(check_dims(anchors, 2, (uint32_t[]){a_count, 4}));
    OPS_TRY(check_dims(image_info, 2, (uint32_t[]){batches, 2}));
    if (!isfinite(p->h_stride) || !isfinite(p->w_stride))
        return NPU_E_BAD_SCALAR;
    bool write = !all_null(out_scores, out_rois, out_batches, NULL);

    size_t per = si.h * si.w * si.c;  /* proposals per image, (y, x, anchor) order */
    float *base = malloc(per * 4 * sizeof *base), *boxes = malloc(per * 4 * sizeof *boxes);
    float *s = malloc(per * sizeof *s), *anchor = NULL, *info = NULL;
    uint32_t *sel = malloc(per * sizeof *sel);
    float *kept_scores = malloc((size_t)batches * per * sizeof *kept_scores);
    float *kept_boxes = malloc((size_t)batches * per * 4 * sizeof *kept_boxes);
    int32_t *kept_batch = malloc((size_t)batches * per * sizeof *kept_batch);
    int rc = base && boxes && s && sel && kept_scores && kept_boxes && kept_batch ? NPU_OK : NPU_E_NO_MEMORY;
    if (rc == NPU_OK)
        rc = reals(anchors, &anchor);
    if (rc == NPU_OK)
        rc = reals(image_info, &info);
    for (size_t y = 0, i = 0; rc == NPU_OK && y < si.h; y++)
        for (size_t x = 0; x < si.w; x++)
            for (size_t a = 0; a < si.c; a++, i++) {
                float sx = (float)x * p->w_stride, sy = (float)y * p->h_stride;
                base[4 * i] = anchor[4 * a] + sx;
                base[4 * i + 1] = anchor[4 * a + 1] + sy;
                base[4 * i + 2] = anchor[4 * a + 2] + sx;
                base[4 * i + 3] = anchor[4 * a + 3] + sy;
                if (!box_ok(base + 4 * i))
                    rc = NPU_E_INVALID_ARGUMENT;  /* the reference's transform refuses it */
            }
    struct suppress sup = {-1, p->iou_threshold, 0.0f, 0.0f, boxes, 1};
    uint32_t total = 0;
    for (uint32_t b = 0; rc == NPU_OK && b < batches; b++) {
        float height = info[2 * b], width = info[2 * b + 1];
        size_t i = 0;
        for (size_t y = 0; y < si.h; y++)
            for (size_t x = 0; x < si.w; x++)
                for (size_t a = 0; a < si.c; a++, i++) {
                    s[i] = (float)ops_get(scores, ops_at(&si, b, y, x, a));
                    float d[4];
                    for (size_t k = 0; k < 4; k++)
                        d[k] = (float)ops_get(deltas, ops_at(&di, b, y, x, 4 * a + k));
                    transform_box(base + 4 * i, d, height, width, boxes + 4 * i);
                }
        uint32_t m = (uint32_t)per;
        for (uint32_t k = 0; k < m; k++)
            sel[k] = k;
        if (p->pre_nms > 0 && (uint32_t)p->pre_nms < m) {
            rc = sort_indices(sel, m, s, 0, by_score);
            m = (uint32_t)p->pre_nms;
        }
        uint32_t f = 0;
        for (uint32_t k = 0; k < m; k++) {
            const float *q = boxes + 4 * (size_t)sel[k];
            float w = q[2] - q[0], h = q[3] - q[1];
            if (w > p->min_size && h > p->min_size && q[0] + w / 2.0f < width && q[1] + h / 2.0f < height)
                sel[f++] = sel[k];
        }
        uint32_t kept = nms(s, sel, f, p->post_nms, &sup);
        for (uint32_t k = 0; k < kept; k++, total++) {
            kept_scores[total] = s[sel[k]];
            memcpy(kept_boxes + 4 * (size_t)total, boxes + 4 * (size_t)sel[k], 4 * sizeof(float));
            kept_batch[total] = (int32_t)b;
        }
    }
    if (rc == NPU_OK && write)
        rc = check_count_outputs(scores, total, out_scores, out_rois, out_batches, NULL, false);
    if (rc == NPU_OK && write)
        for (uint32_t k = 0; k < total; k++) {
            store(out_scores, k, kept_scores[k]);
            for (size_t j = 0; j < 4; j++)
                store(out_rois, 4 * (size_t)k + j, kept_boxes[4 * (size_t)k + j]);
            ((int32_t *)out_batches->data)[k] = kept_batch[k];
        }
    if (rc == NPU_OK)
        *count = total;
    free(base);
    free(boxes);
    free(s);
    free(anchor);
    free(info);
    free(sel);
    free(kept_scores);
    free(kept_boxes);
    free(kept_batch);
    return rc;
}

/* -- DETECTION_POSTPROCESSING -------------------------------------------------------------- */

int npu_op_detection_postprocessing(const struct npu_tensor *scores, const struct npu_tensor *deltas,
                                    const struct npu_tensor *anchors, const struct npu_detection_params *p,
                                    const struct npu_tensor *out_scores, const struct npu_tensor *out_boxes,
                                    const struct npu_tensor *out_classes, const struct npu_tensor *out_detections)
{
    if (p == NULL)
        return NPU_E_INVALID_ARGUMENT;
    const struct npu_tensor *ts[] = {scores, deltas, anchors, out_scores, out_boxes};
    for (size_t i = 0; i < 5; i++) {
        OPS_TRY(ops_check(ts[i]));
        OPS_TRY(ops_type_in(ts[i], 2, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16));
        if (ts[i]->type != scores->type)
            return NPU_E_BAD_OPERAND_TYPE;
    }
    if (scores->rank != 3 || deltas->rank != 3 || scores->dims[2] < 2 || deltas->dims[2] < 4)
        return NPU_E_BAD_SHAPE;
    uint32_t batches = scores->dims[0], a_count = scores->dims[1], classes = scores->dims[2];
    OPS_TRY(check_dims(deltas, 3, (uint32_t[]){batches, a_count, 0}));
    OPS_TRY(check_dims(anchors, 2, (uint32_t[]){a_count, 4}));
    if (!(p->scale_y > 0.0f) || !(p->scale_x > 0.0f) || !(p->scale_h > 0.0f) || !(p->scale_w > 0.0f) ||
        !(p->score_threshold >= 0.0f) || !(p->iou_threshold >= 0.0f) || p->max_detections < 1 ||
        (p->regular_nms ? p->max_detections_per_class < 1 : p->max_classes_per_detection < 1))
        return NPU_E_BAD_SCALAR;
    uint32_t take = classes - 1 < (uint32_t)p->max_classes_per_detection ? classes - 1
                                                                          : (uint32_t)p->max_classes_per_detection;
    uint64_t slots64 = (uint64_t)p->max_detections * (p->regular_nms ? 1 : (uint64_t)p->max_classes_per_detection);
    if (slots64 > OPS_MAX_ELEMENTS)
        return NPU_E_BAD_SHAPE;
    uint32_t slots = (uint32_t)slots64;
    OPS_TRY(check_dims(out_scores, 2, (uint32_t[]){batches, slots}));
    OPS_TRY(check_dims(out_boxes, 3, (uint32_t[]){batches, slots, 4}));
    OPS_TRY(check_int32(out_classes, 2, (uint32_t[]){batches, slots}));
    OPS_TRY(check_int32(out_detections, 1, (uint32_t[]){batches}));

    size_t enc = deltas->dims[2];
    float *s = NULL, *d = NULL, *anchor = NULL;
    float *boxes = malloc((size_t)a_count * 4 * sizeof *boxes);
    float *best = malloc((size_t)a_count * sizeof *best);
    uint32_t *sel = malloc((size_t)a_count * classes * sizeof *sel);
    uint32_t *order = malloc(classes * sizeof *order);
    int rc = boxes && best && sel && order ? reals(scores, &s) : NPU_E_NO_MEMORY;
    if (rc == NPU_OK)
        rc = reals(deltas, &d);
    if (rc == NPU_OK)
        rc = reals(anchors, &anchor);
    int32_t shift = p->background_in_label ? 0 : 1;
    int32_t *classes_out = out_classes->data, *detections = out_detections->data;
    for (uint32_t b = 0; rc == NPU_OK && b < batches; b++) {
        float *sb = s + (size_t)b * a_count * classes;
        for (size_t a = 0; a < a_count; a++) {
            const float *an = anchor + 4 * a, *dl = d + ((size_t)b * a_count + a) * enc;
            float yc = an[0] + an[2] * dl[0] / p->scale_y, xc = an[1] + an[3] * dl[1] / p->scale_x;
            float hh = an[2] * expf(dl[2] / p->scale_h) * 0.5f, hw = an[3] * expf(dl[3] / p->scale_w) * 0.5f;
            float *q = boxes + 4 * a;
            q[0] = yc - hh, q[1] = xc - hw, q[2] = yc + hh, q[3] = xc + hw;
        }
        size_t row = (size_t)b * slots;
        for (size_t k = 0; k < slots; k++) {
            store(out_scores, row + k, 0.0f);
            for (size_t j = 0; j < 4; j++)
                store(out_boxes, (row + k) * 4 + j, 0.0f);
            classes_out[row + k] = 0;
        }
        uint32_t written = 0;
        if (p->regular_nms) {
            struct suppress sup = {-1, p->iou_threshold, 0.0f, 0.0f, boxes, classes};
            uint32_t total = 0;
            for (uint32_t c = 1; c < classes; c++) {
                uint32_t m = total;
                for (uint32_t a = 0; a < a_count; a++)
                    if (sb[a * classes + c] > p->score_threshold)
                        sel[m++] = a * classes + c;
                total += nms(sb, sel + total, m - total, p->max_detections_per_class, &sup);
            }
            rc = sort_indices(sel, total, sb, 0, by_score);
            written = total < (uint32_t)p->max_detections ? total : (uint32_t)p->max_detections;
            for (uint32_t k = 0; k < written; k++) {
                store(out_scores, row + k, sb[sel[k]]);
                for (size_t j = 0; j < 4; j++)
                    store(out_boxes, (row + k) * 4 + j, boxes[4 * (size_t)(sel[k] / classes) + j]);
                classes_out[row + k] = (int32_t)(sel[k] % classes) - shift;
            }
        } else {
            uint32_t m = 0;
            for (uint32_t a = 0; a < a_count; a++) {
                best[a] = sb[a * classes + 1];
                for (uint32_t c = 2; c < classes; c++)
                    best[a] = fmaxf(best[a], sb[a * classes + c]);
                if (best[a] > p->score_threshold)
                    sel[m++] = a;
            }
            struct suppress sup = {-1, p->iou_threshold, 0.0f, 0.0f, boxes, 1};
            uint32_t kept = nms(best, sel, m, p->max_detections, &sup);
            for (uint32_t k = 0; k < kept && rc == NPU_OK; k++) {
                uint32_t a = sel[k];
                for (uint32_t c = 0; c + 1 < classes; c++)
                    order[c] = a * classes + c + 1;
                rc = sort_indices(order, classes - 1, sb, 0, by_score);
                for (uint32_t c = 0; c < take; c++, written++) {
                    store(out_scores, row + written, sb[order[c]]);
                    for (size_t j = 0; j < 4; j++)
                        store(out_boxes, (row + written) * 4 + j, boxes[4 * (size_t)a + j]);
                    classes_out[row + written] = (int32_t)(order[c] % classes) - shift;
                }
            }
        }
        detections[b] = (int32_t)written;
    }
    free(s);
    free(d);
    free(anchor);
    free(boxes);
    free(best);
    free(sel);
    free(order);
    return rc;
}
