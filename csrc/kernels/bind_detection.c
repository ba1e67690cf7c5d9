/*
 * kernels/bind_detection.c - the bindings (npu/bind.h) of boxes, regions of interest, non-maximum suppression and keypoints.
 *
 * The variant is chosen by input 0's type: float32 (FLOAT32 scalars), float16
 * (FLOAT16 scalars) or quantized (FLOAT32 scalars; boxes TENSOR_QUANT16_ASYMM
 * with scale 0.125 and zero point 0).  BOX_WITH_NMS_LIMIT's and
 * GENERATE_PROPOSALS' output counts depend on the data: prepare() leaves their
 * shapes unknown until every input's value is given, then runs the selection
 * to learn the count (which may be 0).  Zero rois (a batch that selected
 * nothing upstream) give empty outputs, as Android's zero-sized tests expect.
 */
#include <stdio.h>
#include <string.h>

#include "npu/bind.h"
#include "ops_internal.h"

#define F32 NPU_OPERAND_TENSOR_FLOAT32
#define F16 NPU_OPERAND_TENSOR_FLOAT16
#define Q8 NPU_OPERAND_TENSOR_QUANT8_ASYMM
#define Q16A NPU_OPERAND_TENSOR_QUANT16_ASYMM
#define Q16S NPU_OPERAND_TENSOR_QUANT16_SYMM
#define I32 NPU_OPERAND_TENSOR_INT32

static const int32_t FLOATS_Q8[] = {F32, F16, Q8};
static const int32_t TYPE_I32[] = {I32};

static bool is_float(int32_t type)
{
    return type == F32 || type == F16;
}

/* The variant's float scalar type. */
static int32_t scalar_type(int32_t variant)
{
    return variant == F16 ? NPU_OPERAND_FLOAT16 : NPU_OPERAND_FLOAT32;
}

static size_t elements(const struct npu_tensor *t)
{
    size_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

/* Input i's shape and value are both known (an empty tensor has no data to know). */
static bool valued(const struct npu_bind_call *c, uint32_t i)
{
    const struct npu_arg *a = &c->in[i];
    return a->has_shape && (a->t.data != NULL || elements(&a->t) == 0);
}

static int check_box_quant(struct npu_bind_call *c, const char *which, uint32_t i, const struct npu_tensor *t)
{
    if (t->scale != 0.125f || t->zero_point != 0)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "%s %u (boxes) must have scale 0.125 and zero point 0, not %g and %d",
                             which, (unsigned)i, (double)t->scale, (int)t->zero_point);
    return NPU_OK;
}

/* Input i is a tensor of type (a quantized box type: with the boxes' parameters). */
static int input_of(struct npu_bind_call *c, uint32_t i, int32_t type)
{
    int rc = npu_bind_tensor(c, i, &type, 1);
    if (rc == NPU_OK && (type == Q16A || type == Q16S))
        rc = check_box_quant(c, "input", i, &c->in[i].t);
    if (rc == NPU_OK && type == Q8 && !(c->in[i].t.scale > 0.0f))
        rc = npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (TENSOR_QUANT8_ASYMM) needs a scale > 0", (unsigned)i);
    return rc;
}

/* Output k is declared of type (a quantized box type: with the boxes' parameters). */
static int output_of(struct npu_bind_call *c, uint32_t k, int32_t type)
{
    const struct npu_tensor *t = &c->out[k].t;
    if (t->type != type)
        return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "output %u must be %s, not %s", (unsigned)k, npu_bind_type_name(type),
                             npu_bind_type_name(t->type));
    if (type == Q16A)
        return check_box_quant(c, "output", k, t);
    if (type == Q8 && !(t->scale > 0.0f && t->zero_point >= 0 && t->zero_point <= 255))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "output %u (TENSOR_QUANT8_ASYMM) needs a scale > 0 and a zero point "
                             "in 0..255", (unsigned)k);
    return NPU_OK;
}

/* The boxes' type of a variant. */
static int32_t box_type(int32_t variant)
{
    return is_float(variant) ? variant : Q16A;
}

static int want_rank(struct npu_bind_call *c, uint32_t i, uint32_t rank, const char *what)
{
    const struct npu_arg *a = &c->in[i];
    if (a->has_rank && a->t.rank != rank)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u (%s) must have rank %u, not %u", (unsigned)i, what,
                             (unsigned)rank, (unsigned)a->t.rank);
    return NPU_OK;
}

/* Inputs 0..n-1 (names[i]) have the ranks given, where their rank is known. */
static int want_ranks(struct npu_bind_call *c, uint32_t n, const uint32_t *ranks, const char *const *names)
{
    for (uint32_t i = 0; i < n; i++)
        OPS_TRY(want_rank(c, i, ranks[i], names[i]));
    return NPU_OK;
}

/* When input i's shape is known, its dimension d must be value. */
static int want_dim(struct npu_bind_call *c, uint32_t i, uint32_t d, uint32_t value, const char *what)
{
    const struct npu_arg *a = &c->in[i];
    if (a->has_shape && a->t.dims[d] != value)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u (%s) dimension %u must be %u, not %u", (unsigned)i, what,
                             (unsigned)d, (unsigned)value, (unsigned)a->t.dims[d]);
    return NPU_OK;
}

static int want_positive_dims(struct npu_bind_call *c, uint32_t i, uint32_t from, const char *what)
{
    const struct npu_arg *a = &c->in[i];
    for (uint32_t d = from; a->has_shape && d < a->t.rank; d++)
        if (a->t.dims[d] == 0)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u (%s) dimension %u must not be 0", (unsigned)i, what,
                                 (unsigned)d);
    return NPU_OK;
}

/* A kernel's refusal at run time, as a sentence. */
static int kernel_failed(struct npu_bind_call *c, int rc, const char *bad_data)
{
    if (rc == NPU_E_INVALID_ARGUMENT)
        return npu_bind_fail(c, rc, "%s", bad_data);
    if (rc == NPU_E_NO_MEMORY)
        return npu_bind_fail(c, rc, "out of memory");
    return npu_bind_fail(c, rc, "the kernel refused its operands (%s)", npu_error_name(rc));
}

#define IN(i) (&c->in[i].t)
#define OUT(k) (&c->out[k].t)

/* The counts, and input 0, whose type (float32, float16 or quant8) is the variant. */
static int begin_variant(struct npu_bind_call *c, uint32_t n_in, uint32_t n_out, int32_t *v)
{
    OPS_TRY(npu_bind_counts(c, n_in, n_in, n_out));
    OPS_TRY(npu_bind_tensor(c, 0, FLOATS_Q8, 3));
    *v = IN(0)->type;
    return input_of(c, 0, *v);
}

/* The outputs of a count the data decided: [count], [count, 4] (boxes), then [count] each. */
static int set_counted(struct npu_bind_call *c, uint32_t count)
{
    for (uint32_t k = 0; k < c->output_count; k++)
        OPS_TRY(npu_bind_set_shape(c, k, k == 1 ? 2 : 1, (uint32_t[]){count, 4}));
    return NPU_OK;
}

static const char BAD_ROIS[] = "a roi has x2 < x1 or y2 < y1, lies outside the input, or names a batch it has not";

/* -- AXIS_ALIGNED_BBOX_TRANSFORM ---------------------------------------------------------- */

static int bbox_prepare(struct npu_bind_call *c)
{
    static const int32_t TYPES[] = {F32, F16, Q16A};
    OPS_TRY(npu_bind_counts(c, 4, 4, 1));
    OPS_TRY(npu_bind_tensor(c, 0, TYPES, 3));
    int32_t v = IN(0)->type;
    OPS_TRY(input_of(c, 0, v));
    OPS_TRY(input_of(c, 1, is_float(v) ? v : Q8));
    OPS_TRY(npu_bind_tensor(c, 2, TYPE_I32, 1));
    OPS_TRY(input_of(c, 3, v));
    OPS_TRY(output_of(c, 0, v));
    OPS_TRY(want_ranks(c, 4, (uint32_t[]){2, 2, 1, 2}, (const char *[]){"rois", "deltas", "batches", "image info"}));
    OPS_TRY(want_dim(c, 0, 1, 4, "rois"));
    OPS_TRY(want_dim(c, 3, 1, 2, "image info"));
    OPS_TRY(want_positive_dims(c, 3, 0, "image info"));
    if (c->in[1].has_shape && (IN(1)->dims[1] == 0 || IN(1)->dims[1] % 4 != 0))
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (deltas) dimension 1 must be 4 per class, not %u",
                             (unsigned)IN(1)->dims[1]);
    if (!c->in[0].has_shape)
        return NPU_OK;
    uint32_t n = IN(0)->dims[0];
    OPS_TRY(want_dim(c, 1, 0, n, "deltas"));
    OPS_TRY(want_dim(c, 2, 0, n, "batches"));
    if (!c->in[1].has_shape)
        return NPU_OK;
    return npu_bind_set_shape(c, 0, 2, (uint32_t[]){n, IN(1)->dims[1]});
}

static int bbox_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    if (IN(0)->dims[0] == 0)
        return NPU_OK;
    int rc = npu_op_axis_aligned_bbox_transform(IN(0), IN(1), IN(2), IN(3), OUT(0));
    return rc == NPU_OK ? rc : kernel_failed(c, rc, "a roi has x2 < x1 or y2 < y1, or names a batch the image info has not");
}

/* -- ROI_ALIGN and ROI_POOLING ---------------------------------------------------------- */

/* Inputs 0..6 of both (and the layout at layout_at); sets the output's shape
 * when it is known. */
static int roi_prepare(struct npu_bind_call *c, uint32_t count, uint32_t layout_at)
{
    int32_t v;
    OPS_TRY(begin_variant(c, count, 1, &v));
    OPS_TRY(input_of(c, 1, box_type(v)));
    OPS_TRY(npu_bind_tensor(c, 2, TYPE_I32, 1));
    OPS_TRY(output_of(c, 0, v));
    OPS_TRY(want_ranks(c, 3, (uint32_t[]){4, 2, 1}, (const char *[]){"input", "rois", "batches"}));
    OPS_TRY(want_dim(c, 1, 1, 4, "rois"));
    OPS_TRY(want_positive_dims(c, 0, 0, "input"));
    if (c->in[1].has_shape)
        OPS_TRY(want_dim(c, 2, 0, IN(1)->dims[0], "batches"));
    int32_t oh = 0, ow = 0;
    float hs = 0, ws = 0;
    bool known[5] = {false};
    OPS_TRY(npu_bind_i32(c, 3, &oh, &known[0]));
    OPS_TRY(npu_bind_i32(c, 4, &ow, &known[1]));
    OPS_TRY(npu_bind_f32(c, 5, scalar_type(v), &hs, &known[2]));
    OPS_TRY(npu_bind_f32(c, 6, scalar_type(v), &ws, &known[3]));
    bool nchw = false;
    OPS_TRY(npu_bind_bool(c, layout_at, &nchw, &known[4]));
    if ((known[0] && oh <= 0) || (known[1] && ow <= 0))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "the output height and width (inputs 3 and 4) must be > 0, not %d and %d",
                             (int)oh, (int)ow);
    if ((known[2] && !(hs > 0.0f)) || (known[3] && !(ws > 0.0f)))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "the height and width strides (inputs 5 and 6) must be > 0, not %g and %g",
                             (double)hs, (double)ws);
    if (!(known[0] && known[1] && known[4] && c->in[0].has_shape && c->in[1].has_shape))
        return NPU_OK;
    uint32_t n = IN(1)->dims[0], depth = IN(0)->dims[nchw ? 1 : 3];
    uint32_t dims[4] = {n, (uint32_t)oh, (uint32_t)ow, depth};
    if (nchw)
        dims[1] = depth, dims[2] = (uint32_t)oh, dims[3] = (uint32_t)ow;
    return npu_bind_set_shape(c, 0, 4, dims);
}

static size_t roi_units(const struct npu_bind_call *c)
{
    return OUT(0)->dims[0] ? OUT(0)->dims[0] : 1;
}

/* A scalar input's value, read after prepare() checked its type (0 or false when unknown). */
static float scalar_value(const struct npu_bind_call *c, uint32_t i)
{
    const struct npu_tensor *t = IN(i);
    if (t->data == NULL)
        return 0.0f;
    if (t->type == NPU_OPERAND_FLOAT16) {
        uint16_t h;
        memcpy(&h, t->data, sizeof h);
        return npu_half_to_float(h);
    }
    float v;
    memcpy(&v, t->data, sizeof v);
    return v;
}

static int32_t int_value(const struct npu_bind_call *c, uint32_t i)
{
    int32_t v = 0;
    if (IN(i)->data)
        memcpy(&v, IN(i)->data, sizeof v);
    return v;
}

static bool bool_value(const struct npu_bind_call *c, uint32_t i)
{
    uint8_t v = 0;
    if (IN(i)->data)
        memcpy(&v, IN(i)->data, 1);
    return v != 0;
}

static int roi_align_prepare(struct npu_bind_call *c)
{
    OPS_TRY(roi_prepare(c, 10, 9));
    int32_t hr = 0, wr = 0;
    bool hk = false, wk = false;
    OPS_TRY(npu_bind_i32(c, 7, &hr, &hk));
    OPS_TRY(npu_bind_i32(c, 8, &wr, &wk));
    if ((hk && (hr < 0 || hr > 1024)) || (wk && (wr < 0 || wr > 1024)))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "the sampling ratios (inputs 7 and 8) must be within 0..1024 (0: adaptive), not %d and %d",
                             (int)hr, (int)wr);
    return NPU_OK;
}

static int roi_align_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    if (IN(1)->dims[0] == 0)
        return NPU_OK;
    int rc = npu_op_roi_align(IN(0), IN(1), IN(2), scalar_value(c, 5), scalar_value(c, 6), int_value(c, 7),
                              int_value(c, 8), bool_value(c, 9), OUT(0), begin, end);
    if (rc == NPU_E_BAD_SCALAR && IN(0)->type == Q8)
        return npu_bind_fail(c, rc, "output 0's scale is too small: Android's requantization needs the input's "
                             "scale / (255 * the output's * the samples per bin) below 1");
    return rc == NPU_OK ? rc : kernel_failed(c, rc, BAD_ROIS);
}

/* Bilinear samples: 4 taps of 2 FLOPs per channel and sample; an adaptive ratio
 * (0) depends on the rois, counted as 2. */
static void roi_align_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    int32_t hr = int_value(c, 7), wr = int_value(c, 8);
    double samples = (hr > 0 ? hr : 2) * (double)(wr > 0 ? wr : 2);
    *flops = (double)elements(OUT(0)) * samples * 8.0;
    *bytes = npu_bind_io_bytes(c);
}

/* One comparison per input cell a bin covers: at most the whole image per roi
 * (the rois' sizes are data), so each output value counts the cells of one bin
 * of a roi spanning the image. */
static void roi_pooling_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    bool nchw = bool_value(c, 7);
    double cells = (double)IN(0)->dims[nchw ? 2 : 1] * IN(0)->dims[nchw ? 3 : 2];
    double bins = (double)OUT(0)->dims[nchw ? 2 : 1] * OUT(0)->dims[nchw ? 3 : 2];
    *flops = (double)elements(OUT(0)) * (cells / bins > 1.0 ? cells / bins : 1.0);
    *bytes = npu_bind_io_bytes(c);
}

static int roi_pooling_prepare(struct npu_bind_call *c)
{
    return roi_prepare(c, 8, 7);
}

static int roi_pooling_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    if (IN(1)->dims[0] == 0)
        return NPU_OK;
    int rc = npu_op_roi_pooling(IN(0), IN(1), IN(2), scalar_value(c, 5), scalar_value(c, 6), bool_value(c, 7),
                                OUT(0), begin, end);
    return rc == NPU_OK ? rc : kernel_failed(c, rc, BAD_ROIS);
}

/* -- HEATMAP_MAX_KEYPOINT -------------------------------------------------------------- */

static int heatmap_prepare(struct npu_bind_call *c)
{
    int32_t v;
    OPS_TRY(begin_variant(c, 3, 2, &v));
    OPS_TRY(input_of(c, 1, box_type(v)));
    OPS_TRY(output_of(c, 0, v));
    OPS_TRY(output_of(c, 1, box_type(v)));
    OPS_TRY(want_ranks(c, 2, (uint32_t[]){4, 2}, (const char *[]){"heatmaps", "boxes"}));
    OPS_TRY(want_dim(c, 1, 1, 4, "boxes"));
    bool nchw = false, known = false;
    OPS_TRY(npu_bind_bool(c, 2, &nchw, &known));
    if (!known || !c->in[0].has_shape)
        return NPU_OK;
    const struct npu_tensor *h = IN(0);
    uint32_t size = h->dims[2], keypoints = h->dims[nchw ? 1 : 3];
    if (h->dims[nchw ? 3 : 1] != size || size < 2 || keypoints == 0)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 0 (heatmaps) must be square, at least 2x2, with keypoints");
    OPS_TRY(want_dim(c, 1, 0, h->dims[0], "boxes"));
    OPS_TRY(npu_bind_set_shape(c, 0, 2, (uint32_t[]){h->dims[0], keypoints}));
    return npu_bind_set_shape(c, 1, 3, (uint32_t[]){h->dims[0], keypoints, 2});
}

static int heatmap_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    if (IN(0)->dims[0] == 0)
        return NPU_OK;
    int rc = npu_op_heatmap_max_keypoint(IN(0), IN(1), bool_value(c, 2), OUT(0), OUT(1));
    return rc == NPU_OK ? rc : kernel_failed(c, rc, "a box has x2 < x1 or y2 < y1");
}

/* -- BOX_WITH_NMS_LIMIT ---------------------------------------------------------------- */

static int nms_params(struct npu_bind_call *c, int32_t v, struct npu_nms_params *p, bool *all_known)
{
    bool k[6] = {false};
    OPS_TRY(npu_bind_f32(c, 3, scalar_type(v), &p->score_threshold, &k[0]));
    OPS_TRY(npu_bind_i32(c, 4, &p->max_detections, &k[1]));
    OPS_TRY(npu_bind_i32(c, 5, &p->kernel, &k[2]));
    OPS_TRY(npu_bind_f32(c, 6, scalar_type(v), &p->iou_threshold, &k[3]));
    OPS_TRY(npu_bind_f32(c, 7, scalar_type(v), &p->sigma, &k[4]));
    OPS_TRY(npu_bind_f32(c, 8, scalar_type(v), &p->nms_score_threshold, &k[5]));
    if (k[2] && (p->kernel < 0 || p->kernel > 2))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 5 (NMS kernel) must be 0 (hard), 1 (linear) or 2 (gaussian), "
                             "not %d", (int)p->kernel);
    if (k[2] && k[4] && p->kernel == 2 && !(p->sigma > 0.0f))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 7 (sigma) of the gaussian kernel must be > 0, not %g",
                             (double)p->sigma);
    *all_known = k[0] && k[1] && k[2] && k[3] && k[4] && k[5];
    return NPU_OK;
}

static int nms_prepare(struct npu_bind_call *c)
{
    int32_t v;
    OPS_TRY(begin_variant(c, 9, 4, &v));
    OPS_TRY(input_of(c, 1, box_type(v)));
    OPS_TRY(npu_bind_tensor(c, 2, TYPE_I32, 1));
    OPS_TRY(output_of(c, 0, v));
    OPS_TRY(output_of(c, 1, box_type(v)));
    OPS_TRY(output_of(c, 2, I32));
    OPS_TRY(output_of(c, 3, I32));
    OPS_TRY(want_ranks(c, 3, (uint32_t[]){2, 2, 1}, (const char *[]){"scores", "rois", "batches"}));
    struct npu_nms_params p;
    bool known;
    OPS_TRY(nms_params(c, v, &p, &known));
    if (c->in[0].has_shape) {
        uint32_t n = IN(0)->dims[0], classes = IN(0)->dims[1];
        if (classes < 2)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 0 (scores) must have 2 classes or more (class 0 is the "
                                 "background), not %u", (unsigned)classes);
        OPS_TRY(want_dim(c, 1, 0, n, "rois"));
        OPS_TRY(want_dim(c, 1, 1, 4 * classes, "rois"));
        OPS_TRY(want_dim(c, 2, 0, n, "batches"));
    }
    if (!(known && valued(c, 0) && valued(c, 1) && valued(c, 2)))
        return NPU_OK;  /* the count depends on the data */
    uint32_t count = 0;
    if (IN(0)->dims[0] > 0) {
        int rc = npu_op_box_with_nms_limit(IN(0), IN(1), IN(2), &p, NULL, NULL, NULL, NULL, &count);
        if (rc != NPU_OK)
            return kernel_failed(c, rc, "a roi has x2 < x1 or y2 < y1");
    }
    return set_counted(c, count);
}

static int nms_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    if (IN(0)->dims[0] == 0 || OUT(0)->dims[0] == 0)
        return NPU_OK;
    struct npu_nms_params p;
    bool known;
    OPS_TRY(nms_params(c, IN(0)->type, &p, &known));
    uint32_t count = 0;
    int rc = npu_op_box_with_nms_limit(IN(0), IN(1), IN(2), &p, OUT(0), OUT(1), OUT(2), OUT(3), &count);
    return rc == NPU_OK ? rc : kernel_failed(c, rc, "a roi has x2 < x1 or y2 < y1");
}

/* -- GENERATE_PROPOSALS ---------------------------------------------------------------- */

static int proposal_params(struct npu_bind_call *c, int32_t v, struct npu_proposal_params *p, bool *all_known)
{
    bool k[7] = {false};
    OPS_TRY(npu_bind_f32(c, 4, scalar_type(v), &p->h_stride, &k[0]));
    OPS_TRY(npu_bind_f32(c, 5, scalar_type(v), &p->w_stride, &k[1]));
    OPS_TRY(npu_bind_i32(c, 6, &p->pre_nms, &k[2]));
    OPS_TRY(npu_bind_i32(c, 7, &p->post_nms, &k[3]));
    OPS_TRY(npu_bind_f32(c, 8, scalar_type(v), &p->iou_threshold, &k[4]));
    OPS_TRY(npu_bind_f32(c, 9, scalar_type(v), &p->min_size, &k[5]));
    OPS_TRY(npu_bind_bool(c, 10, &p->nchw, &k[6]));
    *all_known = k[0] && k[1] && k[2] && k[3] && k[4] && k[5] && k[6];
    return NPU_OK;
}

static int proposals_prepare(struct npu_bind_call *c)
{
    int32_t v;
    OPS_TRY(begin_variant(c, 11, 3, &v));
    OPS_TRY(input_of(c, 1, v));
    OPS_TRY(input_of(c, 2, is_float(v) ? v : Q16S));
    OPS_TRY(input_of(c, 3, box_type(v)));
    OPS_TRY(output_of(c, 0, v));
    OPS_TRY(output_of(c, 1, box_type(v)));
    OPS_TRY(output_of(c, 2, I32));
    static const char *const NAMES[] = {"scores", "deltas", "anchors", "image info"};
    OPS_TRY(want_ranks(c, 4, (uint32_t[]){4, 4, 2, 2}, NAMES));
    OPS_TRY(want_dim(c, 2, 1, 4, "anchors"));
    OPS_TRY(want_dim(c, 3, 1, 2, "image info"));
    for (uint32_t i = 0; i < 4; i++)
        OPS_TRY(want_positive_dims(c, i, 0, NAMES[i]));
    struct npu_proposal_params p;
    bool known;
    OPS_TRY(proposal_params(c, v, &p, &known));
    if (c->in[0].has_shape && c->in[10].t.data) {
        const struct npu_tensor *s = IN(0);
        uint32_t h = s->dims[p.nchw ? 2 : 1], w = s->dims[p.nchw ? 3 : 2], anchors = s->dims[p.nchw ? 1 : 3];
        OPS_TRY(want_dim(c, 1, 0, s->dims[0], "deltas"));
        OPS_TRY(want_dim(c, 1, p.nchw ? 2 : 1, h, "deltas"));
        OPS_TRY(want_dim(c, 1, p.nchw ? 3 : 2, w, "deltas"));
        OPS_TRY(want_dim(c, 1, p.nchw ? 1 : 3, 4 * anchors, "deltas"));
        OPS_TRY(want_dim(c, 2, 0, anchors, "anchors"));
        OPS_TRY(want_dim(c, 3, 0, s->dims[0], "image info"));
    }
    if (!(known && valued(c, 0) && valued(c, 1) && valued(c, 2) && valued(c, 3)))
        return NPU_OK;  /* the count depends on the data */
    uint32_t count = 0;
    int rc = npu_op_generate_proposals(IN(0), IN(1), IN(2), IN(3), &p, NULL, NULL, NULL, &count);
    if (rc != NPU_OK)
        return kernel_failed(c, rc, "an anchor has x2 < x1 or y2 < y1");
    return set_counted(c, count);
}

static int proposals_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    if (OUT(0)->dims[0] == 0)
        return NPU_OK;
    struct npu_proposal_params p;
    bool known;
    OPS_TRY(proposal_params(c, IN(0)->type, &p, &known));
    uint32_t count = 0;
    int rc = npu_op_generate_proposals(IN(0), IN(1), IN(2), IN(3), &p, OUT(0), OUT(1), OUT(2), &count);
    return rc == NPU_OK ? rc : kernel_failed(c, rc, "an anchor has x2 < x1 or y2 < y1");
}

/* -- DETECTION_POSTPROCESSING ---------------------------------------------------------- */

static int detection_params(struct npu_bind_call *c, int32_t v, struct npu_detection_params *p, bool k[11])
{
    OPS_TRY(npu_bind_f32(c, 3, scalar_type(v), &p->scale_y, &k[0]));
    OPS_TRY(npu_bind_f32(c, 4, scalar_type(v), &p->scale_x, &k[1]));
    OPS_TRY(npu_bind_f32(c, 5, scalar_type(v), &p->scale_h, &k[2]));
    OPS_TRY(npu_bind_f32(c, 6, scalar_type(v), &p->scale_w, &k[3]));
    OPS_TRY(npu_bind_bool(c, 7, &p->regular_nms, &k[4]));
    OPS_TRY(npu_bind_i32(c, 8, &p->max_detections, &k[5]));
    OPS_TRY(npu_bind_i32(c, 9, &p->max_classes_per_detection, &k[6]));
    OPS_TRY(npu_bind_i32(c, 10, &p->max_detections_per_class, &k[7]));
    OPS_TRY(npu_bind_f32(c, 11, scalar_type(v), &p->score_threshold, &k[8]));
    OPS_TRY(npu_bind_f32(c, 12, scalar_type(v), &p->iou_threshold, &k[9]));
    OPS_TRY(npu_bind_bool(c, 13, &p->background_in_label, &k[10]));
    float scales[4] = {p->scale_y, p->scale_x, p->scale_h, p->scale_w};
    for (uint32_t i = 0; i < 4; i++)
        if (k[i] && !(scales[i] > 0.0f))
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (a box scale) must be > 0, not %g", (unsigned)(3 + i),
                                 (double)scales[i]);
    if (k[5] && p->max_detections < 1)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 8 (max detections) must be > 0, not %d", (int)p->max_detections);
    if (k[4] && k[7] && p->regular_nms && p->max_detections_per_class < 1)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 10 (max detections per class) must be > 0, not %d",
                             (int)p->max_detections_per_class);
    if (k[4] && k[6] && !p->regular_nms && p->max_classes_per_detection < 1)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 9 (max classes per detection) must be > 0, not %d",
                             (int)p->max_classes_per_detection);
    if ((k[8] && !(p->score_threshold >= 0.0f)) || (k[9] && !(p->iou_threshold >= 0.0f)))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "the score and IoU thresholds (inputs 11 and 12) must be >= 0, not %g "
                             "and %g", (double)p->score_threshold, (double)p->iou_threshold);
    return NPU_OK;
}

static int detection_prepare(struct npu_bind_call *c)
{
    static const int32_t FLOATS[] = {F32, F16};
    OPS_TRY(npu_bind_counts(c, 14, 14, 4));
    OPS_TRY(npu_bind_tensor(c, 0, FLOATS, 2));
    int32_t v = IN(0)->type;
    OPS_TRY(input_of(c, 1, v));
    OPS_TRY(input_of(c, 2, v));
    OPS_TRY(output_of(c, 0, v));
    OPS_TRY(output_of(c, 1, v));
    OPS_TRY(output_of(c, 2, I32));
    OPS_TRY(output_of(c, 3, I32));
    static const char *const NAMES[] = {"scores", "box encodings", "anchors"};
    OPS_TRY(want_ranks(c, 3, (uint32_t[]){3, 3, 2}, NAMES));
    OPS_TRY(want_dim(c, 2, 1, 4, "anchors"));
    for (uint32_t i = 0; i < 3; i++)
        OPS_TRY(want_positive_dims(c, i, 0, NAMES[i]));
    struct npu_detection_params p;
    bool k[11] = {false};
    OPS_TRY(detection_params(c, v, &p, k));
    if (!c->in[0].has_shape)
        return NPU_OK;
    const struct npu_tensor *s = IN(0);
    if (s->dims[2] < 2)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 0 (scores) must have 2 classes or more, not %u",
                             (unsigned)s->dims[2]);
    OPS_TRY(want_dim(c, 1, 0, s->dims[0], "box encodings"));
    OPS_TRY(want_dim(c, 1, 1, s->dims[1], "box encodings"));
    if (c->in[1].has_shape && IN(1)->dims[2] < 4)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (box encodings) must have 4 values or more per box, not %u",
                             (unsigned)IN(1)->dims[2]);
    OPS_TRY(want_dim(c, 2, 0, s->dims[1], "anchors"));
    if (!(k[4] && k[5] && (p.regular_nms || k[6])))
        return NPU_OK;
    int64_t slots = (int64_t)p.max_detections * (p.regular_nms ? 1 : p.max_classes_per_detection);
    if (slots > (int64_t)1 << 24)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "inputs 8 and 9 ask %lld detections per image, too many",
                             (long long)slots);
    uint32_t b = s->dims[0], d = (uint32_t)slots;
    OPS_TRY(npu_bind_set_shape(c, 0, 2, (uint32_t[]){b, d}));
    OPS_TRY(npu_bind_set_shape(c, 1, 3, (uint32_t[]){b, d, 4}));
    OPS_TRY(npu_bind_set_shape(c, 2, 2, (uint32_t[]){b, d}));
    return npu_bind_set_shape(c, 3, 1, &b);
}

static int detection_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    struct npu_detection_params p;
    bool k[11] = {false};
    OPS_TRY(detection_params(c, IN(0)->type, &p, k));
    int rc = npu_op_detection_postprocessing(IN(0), IN(1), IN(2), &p, OUT(0), OUT(1), OUT(2), OUT(3));
    return rc == NPU_OK ? rc : kernel_failed(c, rc, "the operands do not fit");
}

const struct npu_op_def npu_bind_detection[] = {
    {.type = NPU_OP_AXIS_ALIGNED_BBOX_TRANSFORM, .name = "AXIS_ALIGNED_BBOX_TRANSFORM", .prepare = bbox_prepare,
     .run = bbox_run},
    {.type = NPU_OP_BOX_WITH_NMS_LIMIT, .name = "BOX_WITH_NMS_LIMIT", .prepare = nms_prepare, .run = nms_run},
    {.type = NPU_OP_DETECTION_POSTPROCESSING, .name = "DETECTION_POSTPROCESSING", .prepare = detection_prepare,
     .run = detection_run},
    {.type = NPU_OP_GENERATE_PROPOSALS, .name = "GENERATE_PROPOSALS", .prepare = proposals_prepare,
     .run = proposals_run},
    {.type = NPU_OP_HEATMAP_MAX_KEYPOINT, .name = "HEATMAP_MAX_KEYPOINT", .prepare = heatmap_prepare,
     .run = heatmap_run},
    {.type = NPU_OP_ROI_ALIGN, .name = "ROI_ALIGN", .prepare = roi_align_prepare, .units = roi_units,
     .run = roi_align_run, .cost = roi_align_cost},
    {.type = NPU_OP_ROI_POOLING, .name = "ROI_POOLING", .prepare = roi_pooling_prepare, .units = roi_units,
     .run = roi_pooling_run, .cost = roi_pooling_cost},
    {.type = -1},
};
