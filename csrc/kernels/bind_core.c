/*
 * kernels/bind_core.c - the bindings (npu/bind.h) of the operations of npu/ops.h's
 * first part: convolutions, fully connected, pools, element-wise arithmetic and
 * activations, normalizations along an axis, (de)quantization and the
 * operations that move values.
 *
 * Each binding reads its operation as NN HAL 1.2 lays it out (types.hal): the
 * input counts with their optional trailing inputs (the layout, dilations, an
 * axis), implicit (padding scheme) or explicit padding, the operand types the
 * selecting input allows and the quantization rules that tie the operands
 * together (a quantized convolution's bias has the input's scale times the
 * filter's; LOGISTIC, TANH, SOFTMAX and L2_NORMALIZATION fix their quantized
 * output's range; a pool's output keeps its input's quantization).  A scalar
 * or shape it is not given leaves the output's shape unknown.
 */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "npu/bind.h"
#include "npu/errors.h"
#include "ops_internal.h"

#define TF32 NPU_OPERAND_TENSOR_FLOAT32
#define TF16 NPU_OPERAND_TENSOR_FLOAT16
#define TI32 NPU_OPERAND_TENSOR_INT32
#define TQ8 NPU_OPERAND_TENSOR_QUANT8_ASYMM
#define TPC NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL

static const int32_t FLOAT_Q8[] = {TF32, TF16, TQ8};
static const int32_t FLOATS[] = {TF32, TF16};
static const int32_t ALL4[] = {TF16, TF32, TI32, TQ8};
static const int32_t INT_TENSOR[] = {TI32};
#define COUNT(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

/* -- shared reads --------------------------------------------------------------- */

static const struct npu_tensor *in_t(const struct npu_bind_call *c, uint32_t i)
{
    return &c->in[i].t;
}

static bool shaped(const struct npu_bind_call *c, uint32_t i)
{
    return c->in[i].has_shape;
}

/* Input i's values are known (a constant at load time, anything at execution). */
static bool valued(const struct npu_bind_call *c, uint32_t i)
{
    return c->in[i].has_shape && c->in[i].t.data != NULL;
}

/* An optional trailing input is given (present and not NO_VALUE). */
static bool present(const struct npu_bind_call *c, uint32_t i)
{
    return i < c->input_count && !c->in[i].omitted;
}

/* A quantized operand's parameters are its type's (NN HAL 1.2's Operand rules). */
static int quantization(struct npu_bind_call *c, const struct npu_tensor *t, const char *io, uint32_t i)
{
    int32_t lo, hi;
    if (!npu_bind_quant_range(t->type, &lo, &hi))
        return NPU_OK;
    if (!(t->scale > 0.0f) || !isfinite(t->scale) || t->zero_point < lo || t->zero_point > hi)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "%s %u (%s) needs a scale > 0 and a zero point in %d..%d, not %g and %d", io,
                             (unsigned)i, npu_bind_type_name(t->type), (int)lo, (int)hi, (double)t->scale,
                             (int)t->zero_point);
    return NPU_OK;
}

/* Input i is a tensor of one of types, with valid quantization. */
static int tensor_in(struct npu_bind_call *c, uint32_t i, const int32_t *types, uint32_t n)
{
    OPS_TRY(npu_bind_tensor(c, i, types, n));
    return quantization(c, in_t(c, i), "input", i);
}

/* Input i is a tensor of input like's type. */
static int same_type_in(struct npu_bind_call *c, uint32_t i, uint32_t like)
{
    int32_t type = in_t(c, like)->type;
    return tensor_in(c, i, &type, 1);
}

/* Input i's rank (when known) is within lo..hi. */
static int rank_in(struct npu_bind_call *c, uint32_t i, uint32_t lo, uint32_t hi)
{
    const struct npu_arg *a = &c->in[i];
    if (!a->has_rank || (a->t.rank >= lo && a->t.rank <= hi))
        return NPU_OK;
    if (lo == hi)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u must have rank %u, not %u", (unsigned)i,
                             (unsigned)lo, (unsigned)a->t.rank);
    return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u must have rank %u to %u, not %u", (unsigned)i,
                         (unsigned)lo, (unsigned)hi, (unsigned)a->t.rank);
}

/* Output k is declared of type, with valid quantization. */
static int output_is(struct npu_bind_call *c, uint32_t k, int32_t type)
{
    const struct npu_tensor *t = &c->out[k].t;
    if (t->type != type)
        return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "output %u must be %s, not %s", (unsigned)k,
                             npu_bind_type_name(type), npu_bind_type_name(t->type));
    return quantization(c, t, "output", k);
}

/* Output k is of input 0's type; a quantized one with the range the spec fixes. */
static int output_fixed(struct npu_bind_call *c, uint32_t k, float scale, int32_t zero_point)
{
    OPS_TRY(output_is(c, k, in_t(c, 0)->type));
    const struct npu_tensor *t = &c->out[k].t;
    if (t->type == TQ8 && (t->scale != scale || t->zero_point != zero_point))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "output %u (TENSOR_QUANT8_ASYMM) must have scale %g and zero point %d, not %g and %d",
                             (unsigned)k, (double)scale, (int)zero_point, (double)t->scale, (int)t->zero_point);
    return NPU_OK;
}

/* A quantized output k keeps input i's scale and zero point. */
static int output_keeps_quantization(struct npu_bind_call *c, uint32_t k, uint32_t i)
{
    const struct npu_tensor *o = &c->out[k].t, *x = in_t(c, i);
    if (x->type == TQ8 && (o->scale != x->scale || o->zero_point != x->zero_point))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "output %u must keep input %u's scale %g and zero point %d, not %g and %d",
                             (unsigned)k, (unsigned)i, (double)x->scale, (int)x->zero_point, (double)o->scale,
                             (int)o->zero_point);
    return NPU_OK;
}

/* Output 0 has input i's shape (when known). */
static int shape_of_input(struct npu_bind_call *c, uint32_t i)
{
    if (!shaped(c, i))
        return NPU_OK;
    return npu_bind_set_shape(c, 0, in_t(c, i)->rank, in_t(c, i)->dims);
}

static int fuse_in(struct npu_bind_call *c, uint32_t i, int32_t *fuse, bool *known)
{
    OPS_TRY(npu_bind_i32(c, i, fuse, known));
    if (*known && (*fuse < NPU_FUSE_NONE || *fuse > NPU_FUSE_RELU6))
        return npu_bind_fail(c, NPU_E_BAD_FUSE_CODE, "input %u (fused activation) is %d, not 0..3", (unsigned)i,
                             (int)*fuse);
    return NPU_OK;
}

/* An optional BOOL input (NCHW layout) defaulting to false. */
static int layout_in(struct npu_bind_call *c, uint32_t i, bool *nchw, bool *known)
{
    if (!present(c, i)) {
        *nchw = false;
        *known = true;
        return NPU_OK;
    }
    return npu_bind_bool(c, i, nchw, known);
}

/* An axis input (or def when absent) within [-rank, rank), made non-negative;
 * *known false when its value or the rank is not known. */
static int axis_in(struct npu_bind_call *c, uint32_t i, uint32_t x, int32_t def, int32_t *axis, bool *known)
{
    bool k = true;
    if (present(c, i))
        OPS_TRY(npu_bind_i32(c, i, axis, &k));
    else
        *axis = def;
    *known = k && c->in[x].has_rank;
    if (!*known)
        return NPU_OK;
    int32_t rank = (int32_t)in_t(c, x)->rank;
    if (*axis < -rank || *axis >= rank)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (axis) is %d, outside [-%d, %d)", (unsigned)i,
                             (int)*axis, (int)rank, (int)rank);
    if (*axis < 0)
        *axis += rank;
    return NPU_OK;
}

/* A TENSOR_INT32 input of rank 1 (axes, a shape, a permutation); *values when known. */
static int int_list_in(struct npu_bind_call *c, uint32_t i, const int32_t **values, uint32_t *count)
{
    OPS_TRY(tensor_in(c, i, INT_TENSOR, 1));
    OPS_TRY(rank_in(c, i, 1, 1));
    *values = valued(c, i) ? (const int32_t *)in_t(c, i)->data : NULL;
    *count = shaped(c, i) ? in_t(c, i)->dims[0] : 0;
    return NPU_OK;
}

/* The operation library's status, with a sentence when it refused. */
static int library(struct npu_bind_call *c, int rc)
{
    if (rc == NPU_OK)
        return rc;
    return npu_bind_fail(c, rc, "the operation library refused the operands (%s)", npu_strerror(rc));
}

/* -- slicing the cheap operations ----------------------------------------------------
 * The library computes element-wise operations whole; so that the hardware can
 * still stop between slices, a binding cuts them itself: elements [begin, end)
 * of same-shaped tensors are a rank-1 view each. */

/* Elements [begin, end) of t as a rank-1 tensor (t not per-channel). */
static struct npu_tensor flat_view(const struct npu_tensor *t, size_t begin, size_t end)
{
    struct npu_tensor v = *t;
    v.rank = 1;
    v.dims[0] = (uint32_t)(end - begin);
    v.data = (unsigned char *)t->data + begin * ops_element_size(t->type);
    return v;
}

/* Whether every tensor input and the output have one shape (no broadcasting,
 * no per-channel tensor): then the operation may be cut into elements. */
static bool elementwise_flat(const struct npu_bind_call *c)
{
    const struct npu_tensor *o = &c->out[0].t;
    if (o->type == TPC)
        return false;
    for (uint32_t i = 0; i < c->input_count; i++) {
        const struct npu_tensor *t = in_t(c, i);
        if (c->in[i].omitted || t->type == NPU_OPERAND_INT32 || t->type == NPU_OPERAND_FLOAT32 ||
            t->type == NPU_OPERAND_FLOAT16 || t->type == NPU_OPERAND_BOOL)
            continue;
        if (t->type == TPC || !ops_same_dims(t, o))
            return false;
    }
    return true;
}

static size_t elementwise_units(const struct npu_bind_call *c)
{
    size_t n = npu_ops_element_count(&c->out[0].t);
    return elementwise_flat(c) && n ? n : 1;
}

/* Clamps a slice to units; false when it is empty. */
static bool clamp_slice(size_t units, size_t *begin, size_t *end)
{
    if (*end > units)
        *end = units;
    return *begin < *end;
}

/* -- convolutions ----------------------------------------------------------------
 * CONV_2D        implicit (7): x, filter, bias, scheme, sw, sh, fuse
 *                explicit (10): x, filter, bias, left, right, top, bottom, sw, sh, fuse
 *                then optional: layout, dilation w, dilation h
 * DEPTHWISE      as CONV_2D with the multiplier before the fuse code (8 or 11)
 * GROUPED        as CONV_2D with groups before the fuse code, the layout required
 *                and no dilation (9 or 12)
 */

enum conv_kind { CONV, DEPTHWISE, GROUPED };

struct conv {
    struct npu_window w;
    int32_t extra;  /* DEPTHWISE's multiplier, GROUPED's groups, 1 for CONV_2D */
    bool known;     /* every scalar known and the padding resolved */
};

/* The filter's types for input 0's, its channel dimension when per-channel,
 * and the bias (the spec's quantization: zero point 0, scale input * filter). */
static int conv_operands(struct npu_bind_call *c, uint32_t channel_dim)
{
    OPS_TRY(tensor_in(c, 0, FLOAT_Q8, COUNT(FLOAT_Q8)));
    const struct npu_tensor *x = in_t(c, 0);
    if (x->type == TQ8) {
        static const int32_t q8_filters[] = {TQ8, TPC};
        OPS_TRY(tensor_in(c, 1, q8_filters, COUNT(q8_filters)));
        OPS_TRY(tensor_in(c, 2, INT_TENSOR, 1));
    } else {
        OPS_TRY(same_type_in(c, 1, 0));
        OPS_TRY(same_type_in(c, 2, 0));
    }
    const struct npu_tensor *f = in_t(c, 1), *bias = in_t(c, 2);
    if (f->type == TPC && f->channel_dim != channel_dim)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (per-channel filter) must have channelDim %u, not %u",
                             (unsigned)channel_dim, (unsigned)f->channel_dim);
    if (x->type == TQ8) {
        if (bias->zero_point != 0)
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 2 (bias) must have zero point 0, not %d",
                                 (int)bias->zero_point);
        double product = (double)x->scale * (double)f->scale;
        if (f->type == TQ8 && !(fabs(product - bias->scale) <= 1e-6 * fmin(product, bias->scale)))
            return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                                 "input 2 (bias) must have the input's scale times the filter's (%g), not %g",
                                 product, (double)bias->scale);
    }
    OPS_TRY(output_is(c, 0, x->type));
    OPS_TRY(rank_in(c, 0, 4, 4));
    OPS_TRY(rank_in(c, 1, 4, 4));
    return rank_in(c, 2, 1, 1);
}

/* Reads the window from input first on: padding (explicit: four, else the
 * scheme), strides; resolves an implicit padding when the shapes are known. */
static int window_in(struct npu_bind_call *c, bool explicit, uint32_t first, uint32_t fh, uint32_t fw,
                     bool geometry_known, struct npu_window *w, bool *known)
{
    bool k[6] = {true, true, true, true, true, true};
    int32_t scheme = 0;
    uint32_t at = first;
    if (explicit) {
        OPS_TRY(npu_bind_i32(c, at++, &w->pad_left, &k[0]));
        OPS_TRY(npu_bind_i32(c, at++, &w->pad_right, &k[1]));
        OPS_TRY(npu_bind_i32(c, at++, &w->pad_top, &k[2]));
        OPS_TRY(npu_bind_i32(c, at++, &w->pad_bottom, &k[3]));
        for (uint32_t i = 0; i < 4; i++)
            if (k[i] && (&w->pad_left)[i] < 0)
                return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (padding) is %d, not >= 0",
                                     (unsigned)(first + i), (int)(&w->pad_left)[i]);
    } else {
        OPS_TRY(npu_bind_i32(c, at++, &scheme, &k[0]));
        if (k[0] && scheme != 1 && scheme != 2)
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (padding scheme) is %d, not SAME (1) or VALID (2)",
                                 (unsigned)first, (int)scheme);
    }
    OPS_TRY(npu_bind_i32(c, at, &w->stride_w, &k[4]));
    OPS_TRY(npu_bind_i32(c, at + 1, &w->stride_h, &k[5]));
    if ((k[4] && w->stride_w < 1) || (k[5] && w->stride_h < 1))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "inputs %u and %u (strides) must be >= 1", (unsigned)at,
                             (unsigned)at + 1);
    *known = k[0] && k[1] && k[2] && k[3] && k[4] && k[5];
    if (!explicit && *known) {
        if (!geometry_known) {
            *known = false;
            return NPU_OK;
        }
        struct ops_image img;
        ops_image(in_t(c, 0), w->nchw, &img);
        int rc = npu_ops_implicit_padding((int32_t)img.h, w->stride_h, (int32_t)fh, w->dilation_h, scheme,
                                          &w->pad_top, &w->pad_bottom);
        if (rc == NPU_OK)
            rc = npu_ops_implicit_padding((int32_t)img.w, w->stride_w, (int32_t)fw, w->dilation_w, scheme,
                                          &w->pad_left, &w->pad_right);
        if (rc != NPU_OK)
            return npu_bind_fail(c, rc, "the implicit padding of input %u does not fit the input", (unsigned)first);
    }
    return NPU_OK;
}

static int conv_read(struct npu_bind_call *c, enum conv_kind kind, struct conv *cv)
{
    uint32_t n = c->input_count, base = kind == CONV ? 7 : 8;
    memset(cv, 0, sizeof *cv);
    cv->w.dilation_w = cv->w.dilation_h = 1;
    cv->extra = 1;
    OPS_TRY(npu_bind_counts(c, base, base + 6, 1));
    bool implicit;
    if (kind == GROUPED) {
        if (n != base + 1 && n != base + 4)
            return npu_bind_fail(c, NPU_E_BAD_OPERATION, "takes %u (implicit padding) or %u inputs, not %u",
                                 (unsigned)base + 1, (unsigned)base + 4, (unsigned)n);
        implicit = n == base + 1;
    } else {
        implicit = n == base || (!c->in[base].omitted && c->in[base].t.type == NPU_OPERAND_BOOL);
        uint32_t m = implicit ? base : base + 3;
        if (n != m && n != m + 1 && n != m + 3)
            return npu_bind_fail(c, NPU_E_BAD_OPERATION,
                                 "takes %u, %u or %u inputs (implicit padding) or %u, %u or %u (explicit), not %u",
                                 (unsigned)base, (unsigned)base + 1, (unsigned)base + 3, (unsigned)base + 3,
                                 (unsigned)base + 4, (unsigned)base + 6, (unsigned)n);
    }
    OPS_TRY(conv_operands(c, kind == DEPTHWISE ? 3 : 0));
    uint32_t layout_at = implicit ? base : base + 3;
    bool k_layout, k_dil = true, k_dil2 = true, k_window, k_extra = true, k_fuse;
    if (kind == GROUPED)
        OPS_TRY(npu_bind_bool(c, layout_at, &cv->w.nchw, &k_layout));
    else
        OPS_TRY(layout_in(c, layout_at, &cv->w.nchw, &k_layout));
    if (kind != GROUPED && present(c, layout_at + 1)) {
        OPS_TRY(npu_bind_i32(c, layout_at + 1, &cv->w.dilation_w, &k_dil));
        OPS_TRY(npu_bind_i32(c, layout_at + 2, &cv->w.dilation_h, &k_dil2));
        if ((k_dil && cv->w.dilation_w < 1) || (k_dil2 && cv->w.dilation_h < 1))
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "inputs %u and %u (dilations) must be >= 1",
                                 (unsigned)layout_at + 1, (unsigned)layout_at + 2);
    }
    const struct npu_tensor *f = in_t(c, 1);
    bool geometry = shaped(c, 0) && shaped(c, 1) && k_layout && k_dil && k_dil2;
    OPS_TRY(window_in(c, !implicit, 3, geometry ? f->dims[1] : 0, geometry ? f->dims[2] : 0, geometry, &cv->w,
                      &k_window));
    uint32_t at = implicit ? 6 : 9;
    if (kind != CONV) {
        OPS_TRY(npu_bind_i32(c, at, &cv->extra, &k_extra));
        if (k_extra && cv->extra < 1)
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (%s) is %d, not >= 1", (unsigned)at,
                                 kind == GROUPED ? "groups" : "depth multiplier", (int)cv->extra);
        at++;
    }
    OPS_TRY(fuse_in(c, at, &cv->w.fuse, &k_fuse));
    cv->known = k_layout && k_dil && k_dil2 && k_window && k_extra && k_fuse;
    return NPU_OK;
}

static int conv_prepare_kind(struct npu_bind_call *c, enum conv_kind kind)
{
    struct conv cv;
    OPS_TRY(conv_read(c, kind, &cv));
    if (!(cv.known && shaped(c, 0) && shaped(c, 1) && shaped(c, 2)))
        return NPU_OK;
    struct ops_image img;
    ops_image(in_t(c, 0), cv.w.nchw, &img);
    const uint32_t *fd = in_t(c, 1)->dims;
    uint32_t out_c = fd[0];
    if (kind == CONV && fd[3] != img.c)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the filter's depth %u is not the input's %zu", (unsigned)fd[3],
                             img.c);
    if (kind == GROUPED && ((size_t)fd[3] * (size_t)cv.extra != img.c || fd[0] % (uint32_t)cv.extra))
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input depth %zu and filter [%u, %u, %u, %u] do not fit %d groups",
                             img.c, (unsigned)fd[0], (unsigned)fd[1], (unsigned)fd[2], (unsigned)fd[3],
                             (int)cv.extra);
    if (kind == DEPTHWISE) {
        if (fd[0] != 1 || (size_t)fd[3] != img.c * (size_t)cv.extra)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the filter [%u, %u, %u, %u] must be [1, fh, fw, %zu * %d]",
                                 (unsigned)fd[0], (unsigned)fd[1], (unsigned)fd[2], (unsigned)fd[3], img.c,
                                 (int)cv.extra);
        out_c = fd[3];
    }
    if (in_t(c, 2)->dims[0] != out_c)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 2 (bias) has %u values, not the %u output channels",
                             (unsigned)in_t(c, 2)->dims[0], (unsigned)out_c);
    long oh = ops_out_size((long)img.h, fd[1], cv.w.stride_h, cv.w.dilation_h, cv.w.pad_top, cv.w.pad_bottom);
    long ow = ops_out_size((long)img.w, fd[2], cv.w.stride_w, cv.w.dilation_w, cv.w.pad_left, cv.w.pad_right);
    if (oh < 1 || ow < 1 || oh > UINT32_MAX || ow > UINT32_MAX)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the output would be %ldx%ld", oh, ow);
    uint32_t dims[4] = {(uint32_t)img.n, (uint32_t)oh, (uint32_t)ow, out_c};
    if (cv.w.nchw) {
        dims[1] = out_c;
        dims[2] = (uint32_t)oh;
        dims[3] = (uint32_t)ow;
    }
    return npu_bind_set_shape(c, 0, 4, dims);
}

static size_t spatial_units(const struct npu_bind_call *c, bool nchw)
{
    size_t units = npu_ops_units_spatial(&c->out[0].t, nchw);
    return units ? units : 1;
}

/* The layout of a spatial operation whose call has been prepared. */
static bool nchw_at(const struct npu_bind_call *c, uint32_t i)
{
    bool nchw = false;
    if (i < c->input_count && !c->in[i].omitted && c->in[i].t.type == NPU_OPERAND_BOOL && c->in[i].t.data)
        memcpy(&nchw, c->in[i].t.data, 1);
    return nchw != 0;
}

static bool conv_nchw(const struct npu_bind_call *c, enum conv_kind kind)
{
    uint32_t base = kind == CONV ? 7 : 8;
    if (kind == GROUPED)
        return nchw_at(c, c->input_count == base + 1 ? base : base + 3);
    bool implicit = c->input_count == base || c->in[base].t.type == NPU_OPERAND_BOOL;
    return nchw_at(c, implicit ? base : base + 3);
}

static int conv_run_kind(struct npu_bind_call *c, enum conv_kind kind, size_t begin, size_t end)
{
    struct conv cv;
    OPS_TRY(conv_read(c, kind, &cv));
    const struct npu_tensor *x = in_t(c, 0), *f = in_t(c, 1), *b = in_t(c, 2), *o = &c->out[0].t;
    switch (kind) {
    case CONV:
        return library(c, ops_conv_2d_kept(x, f, b, &cv.w, 1, o, begin, end, c->kept));
    case DEPTHWISE:
        return library(c, npu_op_depthwise_conv_2d(x, f, b, &cv.w, cv.extra, o, begin, end));
    default:
        return library(c, ops_conv_2d_kept(x, f, b, &cv.w, cv.extra, o, begin, end, c->kept));
    }
}

/* multiply-adds: every output element sums fh * fw * (the input channels it reads) products */
static void conv_cost_kind(const struct npu_bind_call *c, enum conv_kind kind, double *flops, double *bytes)
{
    const uint32_t *fd = in_t(c, 1)->dims;
    double reads = (double)fd[1] * fd[2] * (kind == DEPTHWISE ? 1 : fd[3]);
    *flops = 2.0 * (double)npu_ops_element_count(&c->out[0].t) * reads;
    *bytes = npu_bind_io_bytes(c);
}

#define CONV_BINDING(fn, kind)                                                                  \
    static int fn##_prepare(struct npu_bind_call *c) { return conv_prepare_kind(c, kind); }        \
    static size_t fn##_units(const struct npu_bind_call *c) { return spatial_units(c, conv_nchw(c, kind)); } \
    static int fn##_run(struct npu_bind_call *c, size_t b, size_t e) { return conv_run_kind(c, kind, b, e); } \
    static void fn##_cost(const struct npu_bind_call *c, double *f, double *b) { conv_cost_kind(c, kind, f, b); }

CONV_BINDING(conv_2d, CONV)
CONV_BINDING(depthwise_conv_2d, DEPTHWISE)
CONV_BINDING(grouped_conv_2d, GROUPED)

/* -- FULLY_CONNECTED: input (rank >= 2, read as rows), weights [units, in], bias, fuse */

static int fully_connected_prepare(struct npu_bind_call *c)
{
    OPS_TRY(npu_bind_counts(c, 4, 4, 1));
    OPS_TRY(tensor_in(c, 0, FLOAT_Q8, COUNT(FLOAT_Q8)));
    OPS_TRY(same_type_in(c, 1, 0));
    const struct npu_tensor *x = in_t(c, 0), *wt = in_t(c, 1), *bias;
    if (x->type == TQ8) {
        OPS_TRY(tensor_in(c, 2, INT_TENSOR, 1));
        bias = in_t(c, 2);
        double product = (double)x->scale * (double)wt->scale;
        if (bias->zero_point != 0 || !(fabs(product - bias->scale) <= 1e-6 * fmin(product, bias->scale)))
            return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                                 "input 2 (bias) must have zero point 0 and the input's scale times the weights' "
                                 "(%g), not %d and %g", product, (int)bias->zero_point, (double)bias->scale);
    } else {
        OPS_TRY(same_type_in(c, 2, 0));
        bias = in_t(c, 2);
    }
    OPS_TRY(rank_in(c, 0, 2, 4));
    OPS_TRY(rank_in(c, 1, 2, 2));
    OPS_TRY(rank_in(c, 2, 1, 1));
    int32_t fuse;
    bool known;
    OPS_TRY(fuse_in(c, 3, &fuse, &known));
    OPS_TRY(output_is(c, 0, x->type));
    if (!(shaped(c, 0) && shaped(c, 1) && shaped(c, 2)))
        return NPU_OK;
    uint32_t units = wt->dims[0], size = wt->dims[1];
    size_t count = npu_ops_element_count(x);
    if (count == 0 || count % size)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 0's %zu values are not rows of the weights' %u",
                             count, (unsigned)size);
    if (bias->dims[0] != units)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 2 (bias) has %u values, not the %u units",
                             (unsigned)bias->dims[0], (unsigned)units);
    uint32_t dims[2] = {(uint32_t)(count / size), units};
    return npu_bind_set_shape(c, 0, 2, dims);
}

/* One batch row a unit, as the library slices it; a single row is cut by
 * output units instead (a block of the weights' rows each). */
static size_t fully_connected_units(const struct npu_bind_call *c)
{
    const struct npu_tensor *o = &c->out[0].t;
    size_t units = o->rank == 2 && o->dims[0] == 1 ? o->dims[1] : npu_ops_units_fully_connected(o);
    return units ? units : 1;
}

static int fully_connected_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    int32_t fuse;
    OPS_TRY(npu_bind_i32(c, 3, &fuse, NULL));
    const struct npu_tensor *x = in_t(c, 0), *wt = in_t(c, 1), *bias = in_t(c, 2), *o = &c->out[0].t;
    if (!(o->rank == 2 && o->dims[0] == 1 && wt->rank == 2 && bias->rank == 1 && wt->dims[0] == o->dims[1] &&
          bias->dims[0] == o->dims[1]))
        return library(c, npu_op_fully_connected(x, wt, bias, fuse, o, begin, end));
    if (!clamp_slice(o->dims[1], &begin, &end))
        return NPU_OK;
    struct npu_tensor w_part = *wt, b_part = flat_view(bias, begin, end), o_part = *o;
    w_part.dims[0] = (uint32_t)(end - begin);
    w_part.data = (unsigned char *)wt->data + begin * wt->dims[1] * ops_element_size(wt->type);
    o_part.dims[1] = (uint32_t)(end - begin);
    o_part.data = (unsigned char *)o->data + begin * ops_element_size(o->type);
    return library(c, npu_op_fully_connected(x, &w_part, &b_part, fuse, &o_part, 0, SIZE_MAX));
}

static void fully_connected_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    *flops = 2.0 * (double)npu_ops_element_count(&c->out[0].t) * in_t(c, 1)->dims[1];
    *bytes = npu_bind_io_bytes(c);
}

/* -- pools ------------------------------------------------------------------------
 * explicit (10): x, left, right, top, bottom, sw, sh, fw, fh, fuse; implicit (7):
 * x, scheme, sw, sh, fw, fh, fuse; then the optional layout. */

enum pool_kind { POOL_AVERAGE, POOL_MAX, POOL_L2 };

static int pool_read(struct npu_bind_call *c, enum pool_kind kind, struct npu_window *w, bool *known)
{
    memset(w, 0, sizeof *w);
    w->dilation_w = w->dilation_h = 1;
    OPS_TRY(npu_bind_counts(c, 7, 11, 1));
    uint32_t n = c->input_count;
    if (n == 9)
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "takes 7 or 8 inputs (implicit padding) or 10 or 11 "
                             "(explicit), not 9");
    bool explicit = n >= 10;
    if (kind == POOL_L2)
        OPS_TRY(tensor_in(c, 0, FLOATS, COUNT(FLOATS)));
    else
        OPS_TRY(tensor_in(c, 0, FLOAT_Q8, COUNT(FLOAT_Q8)));
    OPS_TRY(rank_in(c, 0, 4, 4));
    OPS_TRY(output_is(c, 0, in_t(c, 0)->type));
    OPS_TRY(output_keeps_quantization(c, 0, 0));
    uint32_t at = explicit ? 7 : 4;
    bool k_fw, k_fh, k_layout, k_window, k_fuse;
    OPS_TRY(npu_bind_i32(c, at, &w->filter_w, &k_fw));
    OPS_TRY(npu_bind_i32(c, at + 1, &w->filter_h, &k_fh));
    if ((k_fw && w->filter_w < 1) || (k_fh && w->filter_h < 1))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "inputs %u and %u (filter size) must be >= 1", (unsigned)at,
                             (unsigned)at + 1);
    OPS_TRY(layout_in(c, explicit ? 10 : 7, &w->nchw, &k_layout));
    bool geometry = shaped(c, 0) && k_fw && k_fh && k_layout;
    OPS_TRY(window_in(c, explicit, 1, (uint32_t)w->filter_h, (uint32_t)w->filter_w, geometry, w, &k_window));
    OPS_TRY(fuse_in(c, at + 2, &w->fuse, &k_fuse));
    *known = geometry && k_window && k_fuse;
    return NPU_OK;
}

static int pool_prepare_kind(struct npu_bind_call *c, enum pool_kind kind)
{
    struct npu_window w;
    bool known;
    OPS_TRY(pool_read(c, kind, &w, &known));
    if (!known)
        return NPU_OK;
    struct ops_image img;
    ops_image(in_t(c, 0), w.nchw, &img);
    long oh = ops_out_size((long)img.h, w.filter_h, w.stride_h, 1, w.pad_top, w.pad_bottom);
    long ow = ops_out_size((long)img.w, w.filter_w, w.stride_w, 1, w.pad_left, w.pad_right);
    if (oh < 1 || ow < 1 || oh > UINT32_MAX || ow > UINT32_MAX)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the output would be %ldx%ld", oh, ow);
    uint32_t dims[4] = {(uint32_t)img.n, (uint32_t)oh, (uint32_t)ow, (uint32_t)img.c};
    if (w.nchw) {
        dims[1] = (uint32_t)img.c;
        dims[2] = (uint32_t)oh;
        dims[3] = (uint32_t)ow;
    }
    return npu_bind_set_shape(c, 0, 4, dims);
}

static int pool_run_kind(struct npu_bind_call *c, enum pool_kind kind, size_t begin, size_t end)
{
    struct npu_window w;
    bool known;
    OPS_TRY(pool_read(c, kind, &w, &known));
    if (kind == POOL_AVERAGE)
        return library(c, npu_op_average_pool_2d(in_t(c, 0), &w, &c->out[0].t, begin, end));
    if (kind == POOL_MAX)
        return library(c, npu_op_max_pool_2d(in_t(c, 0), &w, &c->out[0].t, begin, end));
    return library(c, npu_op_l2_pool_2d(in_t(c, 0), &w, &c->out[0].t, begin, end));
}

static void pool_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    uint32_t at = c->input_count >= 10 ? 7 : 4;
    int32_t fw = 1, fh = 1;
    if (in_t(c, at)->data && in_t(c, at + 1)->data) {
        memcpy(&fw, in_t(c, at)->data, sizeof fw);
        memcpy(&fh, in_t(c, at + 1)->data, sizeof fh);
    }
    *flops = (double)npu_ops_element_count(&c->out[0].t) * fw * fh;
    *bytes = npu_bind_io_bytes(c);
}

static size_t pool_units(const struct npu_bind_call *c)
{
    return spatial_units(c, nchw_at(c, c->input_count >= 10 ? 10 : 7));
}

#define POOL_BINDING(fn, kind)                                                                   \
    static int fn##_prepare(struct npu_bind_call *c) { return pool_prepare_kind(c, kind); }         \
    static int fn##_run(struct npu_bind_call *c, size_t b, size_t e) { return pool_run_kind(c, kind, b, e); }

POOL_BINDING(average_pool_2d, POOL_AVERAGE)
POOL_BINDING(max_pool_2d, POOL_MAX)
POOL_BINDING(l2_pool_2d, POOL_L2)

/* -- element-wise ------------------------------------------------------------------ */

/* Output 0 is inputs a and b broadcast (NNAPI's rule: aligned from the right,
 * each dimension equal or 1), when both shapes are known; ranks at most 4. */
static int broadcast(struct npu_bind_call *c, uint32_t a, uint32_t b)
{
    OPS_TRY(rank_in(c, a, 0, 4));
    OPS_TRY(rank_in(c, b, 0, 4));
    if (!(shaped(c, a) && shaped(c, b)))
        return NPU_OK;
    const struct npu_tensor *ta = in_t(c, a), *tb = in_t(c, b);
    uint32_t rank = ta->rank > tb->rank ? ta->rank : tb->rank, dims[NPU_MAX_RANK];
    for (uint32_t k = 0; k < rank; k++) {
        uint32_t da = k < rank - ta->rank ? 1 : ta->dims[k - (rank - ta->rank)];
        uint32_t db = k < rank - tb->rank ? 1 : tb->dims[k - (rank - tb->rank)];
        if (da != db && da != 1 && db != 1)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE,
                                 "inputs %u and %u do not broadcast (dimension %u of the result: %u against %u)",
                                 (unsigned)a, (unsigned)b, (unsigned)k, (unsigned)da, (unsigned)db);
        dims[k] = da == 1 ? db : da;
    }
    return npu_bind_set_shape(c, 0, rank, dims);
}

/* ADD, SUB, MUL: a, b (a's type), fuse; MAXIMUM, MINIMUM: a, b */
static int binary_prepare(struct npu_bind_call *c, bool fused, const int32_t *types, uint32_t n)
{
    OPS_TRY(npu_bind_counts(c, fused ? 3 : 2, fused ? 3 : 2, 1));
    OPS_TRY(tensor_in(c, 0, types, n));
    OPS_TRY(same_type_in(c, 1, 0));
    if (fused) {
        int32_t fuse;
        bool known;
        OPS_TRY(fuse_in(c, 2, &fuse, &known));
    }
    OPS_TRY(output_is(c, 0, in_t(c, 0)->type));
    return broadcast(c, 0, 1);
}

static int add_prepare(struct npu_bind_call *c)
{
    return binary_prepare(c, true, FLOAT_Q8, COUNT(FLOAT_Q8));
}

static int mul_prepare(struct npu_bind_call *c)
{
    OPS_TRY(binary_prepare(c, true, FLOAT_Q8, COUNT(FLOAT_Q8)));
    const struct npu_tensor *a = in_t(c, 0), *b = in_t(c, 1), *o = &c->out[0].t;
    if (a->type == TQ8 && !(o->scale > (double)a->scale * b->scale))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "output 0's scale %g must exceed input 0's times input 1's (%g)", (double)o->scale,
                             (double)a->scale * b->scale);
    return NPU_OK;
}

static int extreme_prepare(struct npu_bind_call *c)
{
    return binary_prepare(c, false, ALL4, COUNT(ALL4));
}

static int add_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    int32_t fuse;
    OPS_TRY(npu_bind_i32(c, 2, &fuse, NULL));
    struct npu_tensor a = *in_t(c, 0), b = *in_t(c, 1), o = c->out[0].t;
    if (elementwise_flat(c)) {
        if (!clamp_slice(npu_ops_element_count(&o), &begin, &end))
            return NPU_OK;
        a = flat_view(&a, begin, end), b = flat_view(&b, begin, end), o = flat_view(&o, begin, end);
    }
    if (c->type == NPU_OP_ADD)
        return library(c, npu_op_add(&a, &b, fuse, &o));
    if (c->type == NPU_OP_SUB)
        return library(c, npu_op_sub(&a, &b, fuse, &o));
    return library(c, npu_op_mul(&a, &b, fuse, &o));
}

static int extreme_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    if (c->type == NPU_OP_MAXIMUM)
        return library(c, npu_op_maximum(in_t(c, 0), in_t(c, 1), &c->out[0].t));
    return library(c, npu_op_minimum(in_t(c, 0), in_t(c, 1), &c->out[0].t));
}

/* RELU, RELU1, RELU6 (the output's own quantization), LOGISTIC and TANH (fixed) */
static int unary_prepare(struct npu_bind_call *c)
{
    OPS_TRY(npu_bind_counts(c, 1, 1, 1));
    OPS_TRY(tensor_in(c, 0, FLOAT_Q8, COUNT(FLOAT_Q8)));
    OPS_TRY(rank_in(c, 0, 0, 4));
    if (c->type == NPU_OP_LOGISTIC)
        OPS_TRY(output_fixed(c, 0, 1.0f / 256, 0));
    else if (c->type == NPU_OP_TANH)
        OPS_TRY(output_fixed(c, 0, 1.0f / 128, 128));
    else
        OPS_TRY(output_is(c, 0, in_t(c, 0)->type));
    return shape_of_input(c, 0);
}

static int unary_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    struct npu_tensor x = *in_t(c, 0), o = c->out[0].t;
    if (elementwise_flat(c)) {
        if (!clamp_slice(npu_ops_element_count(&o), &begin, &end))
            return NPU_OK;
        x = flat_view(&x, begin, end), o = flat_view(&o, begin, end);
    }
    switch (c->type) {
    case NPU_OP_RELU:
        return library(c, npu_op_relu(&x, &o));
    case NPU_OP_RELU1:
        return library(c, npu_op_relu1(&x, &o));
    case NPU_OP_RELU6:
        return library(c, npu_op_relu6(&x, &o));
    case NPU_OP_LOGISTIC:
        return library(c, npu_op_logistic(&x, &o));
    case NPU_OP_TANH:
        return library(c, npu_op_tanh(&x, &o));
    case NPU_OP_QUANTIZE:
        return library(c, npu_op_quantize(&x, &o));
    default:
        return library(c, npu_op_dequantize(&x, &o));
    }
}

static int prelu_prepare(struct npu_bind_call *c)
{
    OPS_TRY(npu_bind_counts(c, 2, 2, 1));
    OPS_TRY(tensor_in(c, 0, FLOAT_Q8, COUNT(FLOAT_Q8)));
    OPS_TRY(same_type_in(c, 1, 0));
    OPS_TRY(output_is(c, 0, in_t(c, 0)->type));
    return broadcast(c, 0, 1);
}

static int prelu_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    return library(c, npu_op_prelu(in_t(c, 0), in_t(c, 1), &c->out[0].t));
}

/* SOFTMAX: x, beta (FLOAT16 for a float16 x, else FLOAT32, > 0), optional axis */
static int softmax_read(struct npu_bind_call *c, float *beta, int32_t *axis, bool *known)
{
    OPS_TRY(npu_bind_counts(c, 2, 3, 1));
    OPS_TRY(tensor_in(c, 0, FLOAT_Q8, COUNT(FLOAT_Q8)));
    OPS_TRY(rank_in(c, 0, 1, 4));
    bool k_beta, k_axis;
    int32_t scalar = in_t(c, 0)->type == TF16 ? NPU_OPERAND_FLOAT16 : NPU_OPERAND_FLOAT32;
    OPS_TRY(npu_bind_f32(c, 1, scalar, beta, &k_beta));
    if (k_beta && !(*beta > 0.0f && isfinite(*beta)))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (beta) is %g, not > 0", (double)*beta);
    OPS_TRY(axis_in(c, 2, 0, -1, axis, &k_axis));
    OPS_TRY(output_fixed(c, 0, 1.0f / 256, 0));
    *known = k_beta && k_axis;
    return NPU_OK;
}

static int softmax_prepare(struct npu_bind_call *c)
{
    float beta;
    int32_t axis;
    bool known;
    OPS_TRY(softmax_read(c, &beta, &axis, &known));
    return shape_of_input(c, 0);
}

/* The rows of a softmax: the product of the dimensions before its axis. */
static size_t softmax_rows(const struct npu_bind_call *c, int32_t axis)
{
    const struct npu_tensor *x = in_t(c, 0);
    size_t rows = 1;
    for (int32_t k = 0; k < axis && (uint32_t)k < x->rank; k++)
        rows *= x->dims[k];
    return rows;
}

static size_t softmax_units(const struct npu_bind_call *c)
{
    int32_t axis = -1, rank = (int32_t)in_t(c, 0)->rank;
    if (present(c, 2) && in_t(c, 2)->data)
        memcpy(&axis, in_t(c, 2)->data, sizeof axis);
    if (axis < -rank || axis >= rank)
        return 1;
    size_t rows = softmax_rows(c, axis < 0 ? axis + rank : axis);
    return rows ? rows : 1;
}

/* Rows [begin, end): a [rows, axis, inner] view of input and output each. */
static int softmax_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    float beta;
    int32_t axis;
    bool known;
    OPS_TRY(softmax_read(c, &beta, &axis, &known));
    const struct npu_tensor *x = in_t(c, 0), *o = &c->out[0].t;
    size_t rows = softmax_rows(c, axis);
    if (rows <= 1 || !ops_same_dims(x, o))
        return library(c, npu_op_softmax(x, beta, axis, o));
    if (!clamp_slice(rows, &begin, &end))
        return NPU_OK;
    size_t row = npu_ops_element_count(x) / rows, inner = row / x->dims[axis];
    struct npu_tensor xv = *x, ov = *o;
    xv.rank = ov.rank = 3;
    xv.dims[0] = ov.dims[0] = (uint32_t)(end - begin);
    xv.dims[1] = ov.dims[1] = x->dims[axis];
    xv.dims[2] = ov.dims[2] = (uint32_t)inner;
    xv.data = (unsigned char *)x->data + begin * row * ops_element_size(x->type);
    ov.data = (unsigned char *)o->data + begin * row * ops_element_size(o->type);
    return library(c, npu_op_softmax(&xv, beta, 1, &ov));
}

/* exp, a sum and a division per element */
static void along_axis_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    *flops = 4.0 * (double)npu_ops_element_count(&c->out[0].t);
    *bytes = npu_bind_io_bytes(c);
}

/* L2_NORMALIZATION: x, optional axis */
static int l2_normalization_read(struct npu_bind_call *c, int32_t *axis)
{
    OPS_TRY(npu_bind_counts(c, 1, 2, 1));
    OPS_TRY(tensor_in(c, 0, FLOAT_Q8, COUNT(FLOAT_Q8)));
    OPS_TRY(rank_in(c, 0, 1, 4));
    bool known;
    OPS_TRY(axis_in(c, 1, 0, -1, axis, &known));
    return output_fixed(c, 0, 1.0f / 128, 128);
}

static int l2_normalization_prepare(struct npu_bind_call *c)
{
    int32_t axis;
    OPS_TRY(l2_normalization_read(c, &axis));
    return shape_of_input(c, 0);
}

static int l2_normalization_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    int32_t axis;
    OPS_TRY(l2_normalization_read(c, &axis));
    return library(c, npu_op_l2_normalization(in_t(c, 0), axis, &c->out[0].t));
}

/* QUANTIZE: a float tensor to TENSOR_QUANT8_ASYMM; DEQUANTIZE: a quant8 one to a float type */
static int quantize_prepare(struct npu_bind_call *c)
{
    OPS_TRY(npu_bind_counts(c, 1, 1, 1));
    OPS_TRY(tensor_in(c, 0, FLOATS, COUNT(FLOATS)));
    OPS_TRY(output_is(c, 0, TQ8));
    return shape_of_input(c, 0);
}

static int dequantize_prepare(struct npu_bind_call *c)
{
    static const int32_t quant8[] = {TQ8, NPU_OPERAND_TENSOR_QUANT8_SYMM, TPC};
    OPS_TRY(npu_bind_counts(c, 1, 1, 1));
    OPS_TRY(tensor_in(c, 0, quant8, COUNT(quant8)));
    if (c->out[0].t.type != TF16)
        OPS_TRY(output_is(c, 0, TF32));
    return shape_of_input(c, 0);
}

/* -- moving values ------------------------------------------------------------------ */

/* x (FLOAT_Q8 unless types says otherwise) of rank lo..hi; output of x's type */
static int moved_input(struct npu_bind_call *c, const int32_t *types, uint32_t n, uint32_t lo, uint32_t hi)
{
    OPS_TRY(tensor_in(c, 0, types, n));
    OPS_TRY(rank_in(c, 0, lo, hi));
    return output_is(c, 0, in_t(c, 0)->type);
}

/* RESHAPE: x, the new shape (TENSOR_INT32, one -1 at most) */
static int reshape_prepare(struct npu_bind_call *c)
{
    OPS_TRY(npu_bind_counts(c, 2, 2, 1));
    OPS_TRY(moved_input(c, FLOAT_Q8, COUNT(FLOAT_Q8), 0, 4));
    const int32_t *shape;
    uint32_t rank;
    OPS_TRY(int_list_in(c, 1, &shape, &rank));
    if (shaped(c, 1) && rank > NPU_MAX_RANK)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (shape) has %u entries, at most %d", (unsigned)rank,
                             NPU_MAX_RANK);
    if (!shape || !shaped(c, 0))
        return NPU_OK;
    size_t count = npu_ops_element_count(in_t(c, 0)), known = 1;
    uint32_t dims[NPU_MAX_RANK], wild = rank;
    for (uint32_t k = 0; k < rank; k++) {
        if (shape[k] == -1 && wild == rank) {
            wild = k;
            continue;
        }
        if (shape[k] < 1 || known > count)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (shape) entry %u is %d: sizes are >= 1, one -1 at most",
                                 (unsigned)k, (int)shape[k]);
        known *= (size_t)shape[k];
        dims[k] = (uint32_t)shape[k];
    }
    if (wild < rank) {
        if (count % known)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "%zu values do not fill a shape of %zu per -1", count, known);
        dims[wild] = (uint32_t)(count / known);
        known = count;
    }
    if (known != count)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (shape) holds %zu values, input 0 has %zu", known, count);
    return npu_bind_set_shape(c, 0, rank, dims);
}

static int reshape_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    return library(c, npu_op_reshape(in_t(c, 0), &c->out[0].t));
}

/* CONCATENATION: n tensors of one type and rank, then the axis */
static int concatenation_prepare(struct npu_bind_call *c)
{
    OPS_TRY(npu_bind_counts(c, 2, UINT32_MAX, 1));
    uint32_t n = c->input_count - 1;
    OPS_TRY(moved_input(c, FLOAT_Q8, COUNT(FLOAT_Q8), 1, 4));
    for (uint32_t i = 1; i < n; i++) {
        OPS_TRY(same_type_in(c, i, 0));
        if (c->in[i].has_rank && c->in[0].has_rank && in_t(c, i)->rank != in_t(c, 0)->rank)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u has rank %u, input 0 %u", (unsigned)i,
                                 (unsigned)in_t(c, i)->rank, (unsigned)in_t(c, 0)->rank);
    }
    int32_t axis;
    bool known;
    OPS_TRY(axis_in(c, n, 0, 0, &axis, &known));
    if (!known)
        return NPU_OK;
    for (uint32_t i = 0; i < n; i++)
        if (!shaped(c, i))
            return NPU_OK;
    const struct npu_tensor *first = in_t(c, 0);
    uint32_t dims[NPU_MAX_RANK];
    memcpy(dims, first->dims, sizeof dims);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct npu_tensor *t = in_t(c, i);
        for (uint32_t k = 0; k < first->rank; k++)
            if (k != (uint32_t)axis && t->dims[k] != first->dims[k])
                return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u's dimension %u is %u, input 0's %u", (unsigned)i,
                                     (unsigned)k, (unsigned)t->dims[k], (unsigned)first->dims[k]);
        total += t->dims[axis];
    }
    if (total > UINT32_MAX)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the concatenated axis would hold %llu", (unsigned long long)total);
    dims[axis] = (uint32_t)total;
    return npu_bind_set_shape(c, 0, first->rank, dims);
}

static int concatenation_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    uint32_t n = c->input_count - 1;
    int32_t axis;
    bool known;
    OPS_TRY(axis_in(c, n, 0, 0, &axis, &known));
    const struct npu_tensor **parts = malloc(n * sizeof *parts);
    if (!parts)
        return npu_bind_fail(c, NPU_E_NO_MEMORY, "no memory for %u inputs", (unsigned)n);
    for (uint32_t i = 0; i < n; i++)
        parts[i] = in_t(c, i);
    int rc = npu_op_concatenation(parts, n, axis, &c->out[0].t);
    free(parts);
    return library(c, rc);
}

/* PAD: x, paddings [rank, 2]; PAD_V2 also the value (FLOAT32, FLOAT16, or INT32 for quant8) */
static int pad_read(struct npu_bind_call *c, const int32_t **paddings, double *value)
{
    bool v2 = c->type == NPU_OP_PAD_V2;
    OPS_TRY(npu_bind_counts(c, v2 ? 3 : 2, v2 ? 3 : 2, 1));
    OPS_TRY(moved_input(c, FLOAT_Q8, COUNT(FLOAT_Q8), 1, 4));
    OPS_TRY(tensor_in(c, 1, INT_TENSOR, 1));
    OPS_TRY(rank_in(c, 1, 2, 2));
    const struct npu_tensor *x = in_t(c, 0), *p = in_t(c, 1);
    if (c->in[0].has_rank && shaped(c, 1) && (p->dims[0] != x->rank || p->dims[1] != 2))
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (paddings) must be [%u, 2], not [%u, %u]",
                             (unsigned)x->rank, (unsigned)p->dims[0], (unsigned)p->dims[1]);
    *paddings = valued(c, 1) ? (const int32_t *)p->data : NULL;
    if (*paddings)
        for (uint32_t k = 0; k < 2 * p->dims[0]; k++)
            if ((*paddings)[k] < 0)
                return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (paddings) holds %d, not >= 0", (int)(*paddings)[k]);
    *value = 0;
    if (v2) {
        bool known;
        if (x->type == TQ8) {
            int32_t q;
            OPS_TRY(npu_bind_i32(c, 2, &q, &known));
            if (known && (q < 0 || q > 255))
                return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 2 (pad value) is %d, not a stored 0..255", (int)q);
            *value = q;
        } else {
            float f;
            OPS_TRY(npu_bind_f32(c, 2, x->type == TF16 ? NPU_OPERAND_FLOAT16 : NPU_OPERAND_FLOAT32, &f, &known));
            *value = f;
        }
    }
    return NPU_OK;
}

static int pad_prepare(struct npu_bind_call *c)
{
    const int32_t *paddings;
    double value;
    OPS_TRY(pad_read(c, &paddings, &value));
    if (!paddings || !shaped(c, 0))
        return NPU_OK;
    const struct npu_tensor *x = in_t(c, 0);
    uint32_t dims[NPU_MAX_RANK];
    for (uint32_t k = 0; k < x->rank; k++) {
        uint64_t d = (uint64_t)x->dims[k] + (uint64_t)paddings[2 * k] + (uint64_t)paddings[2 * k + 1];
        if (d > UINT32_MAX)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "padded dimension %u would be %llu", (unsigned)k,
                                 (unsigned long long)d);
        dims[k] = (uint32_t)d;
    }
    return npu_bind_set_shape(c, 0, x->rank, dims);
}

static int pad_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    const int32_t *paddings;
    double value;
    OPS_TRY(pad_read(c, &paddings, &value));
    if (c->type == NPU_OP_PAD_V2)
        return library(c, npu_op_pad_v2(in_t(c, 0), paddings, value, &c->out[0].t));
    return library(c, npu_op_pad(in_t(c, 0), paddings, &c->out[0].t));
}

/* MEAN (keep_dims INT32), REDUCE_MAX and REDUCE_MIN (keep_dims BOOL): x, axes, keep_dims */
static int reduce_read(struct npu_bind_call *c, const int32_t **axes, uint32_t *count, bool *keep, bool *known)
{
    OPS_TRY(npu_bind_counts(c, 3, 3, 1));
    OPS_TRY(moved_input(c, FLOAT_Q8, COUNT(FLOAT_Q8), 1, 4));
    OPS_TRY(int_list_in(c, 1, axes, count));
    bool k_keep;
    if (c->type == NPU_OP_MEAN) {
        int32_t k;
        OPS_TRY(npu_bind_i32(c, 2, &k, &k_keep));
        *keep = k > 0;
    } else {
        OPS_TRY(npu_bind_bool(c, 2, keep, &k_keep));
    }
    *known = k_keep && *axes && shaped(c, 0);
    if (*axes && c->in[0].has_rank) {
        int32_t rank = (int32_t)in_t(c, 0)->rank;
        for (uint32_t k = 0; k < *count; k++)
            if ((*axes)[k] < -rank || (*axes)[k] >= rank)
                return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (axes) holds %d, outside [-%d, %d)",
                                     (int)(*axes)[k], (int)rank, (int)rank);
    }
    return NPU_OK;
}

static int reduce_prepare(struct npu_bind_call *c)
{
    const int32_t *axes;
    uint32_t count;
    bool keep, known;
    OPS_TRY(reduce_read(c, &axes, &count, &keep, &known));
    if (!known)
        return NPU_OK;
    const struct npu_tensor *x = in_t(c, 0);
    bool reduced[NPU_MAX_RANK] = {false};
    for (uint32_t k = 0; k < count; k++)
        reduced[axes[k] < 0 ? axes[k] + (int32_t)x->rank : axes[k]] = true;
    uint32_t dims[NPU_MAX_RANK], rank = 0;
    for (uint32_t k = 0; k < x->rank; k++)
        if (!reduced[k])
            dims[rank++] = x->dims[k];
        else if (keep)
            dims[rank++] = 1;
    if (rank == 0)  /* every axis reduced away: one value (as Android's reference, shape [1]) */
        dims[rank++] = 1;
    return npu_bind_set_shape(c, 0, rank, dims);
}

static int reduce_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    const int32_t *axes;
    uint32_t count;
    bool keep, known;
    OPS_TRY(reduce_read(c, &axes, &count, &keep, &known));
    const struct npu_tensor *x = in_t(c, 0), *o = &c->out[0].t;
    if (c->type == NPU_OP_MEAN)
        return library(c, npu_op_mean(x, axes, count, keep, o));
    if (c->type == NPU_OP_REDUCE_MAX)
        return library(c, npu_op_reduce_max(x, axes, count, keep, o));
    return library(c, npu_op_reduce_min(x, axes, count, keep, o));
}

/* ARGMAX, ARGMIN: x, axis -> TENSOR_INT32 without the axis */
static int arg_prepare(struct npu_bind_call *c)
{
    OPS_TRY(npu_bind_counts(c, 2, 2, 1));
    OPS_TRY(tensor_in(c, 0, ALL4, COUNT(ALL4)));
    OPS_TRY(rank_in(c, 0, 1, 4));
    OPS_TRY(output_is(c, 0, TI32));
    int32_t axis;
    bool known;
    OPS_TRY(axis_in(c, 1, 0, 0, &axis, &known));
    if (!known || !shaped(c, 0))
        return NPU_OK;
    const struct npu_tensor *x = in_t(c, 0);
    uint32_t dims[NPU_MAX_RANK], rank = 0;
    for (uint32_t k = 0; k < x->rank; k++)
        if (k != (uint32_t)axis)
            dims[rank++] = x->dims[k];
    return npu_bind_set_shape(c, 0, rank, dims);
}

static int arg_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    int32_t axis;
    bool known;
    OPS_TRY(axis_in(c, 1, 0, 0, &axis, &known));
    if (c->type == NPU_OP_ARGMAX)
        return library(c, npu_op_argmax(in_t(c, 0), axis, &c->out[0].t));
    return library(c, npu_op_argmin(in_t(c, 0), axis, &c->out[0].t));
}

/* GATHER: x, axis, indices (TENSOR_INT32) */
static int gather_read(struct npu_bind_call *c, int32_t *axis, bool *known)
{
    OPS_TRY(npu_bind_counts(c, 3, 3, 1));
    OPS_TRY(moved_input(c, ALL4, COUNT(ALL4), 1, 4));
    OPS_TRY(axis_in(c, 1, 0, 0, axis, known));
    OPS_TRY(tensor_in(c, 2, INT_TENSOR, 1));
    return rank_in(c, 2, 1, 4);
}

static int gather_prepare(struct npu_bind_call *c)
{
    int32_t axis;
    bool known;
    OPS_TRY(gather_read(c, &axis, &known));
    if (!known || !shaped(c, 0) || !shaped(c, 2))
        return NPU_OK;
    const struct npu_tensor *x = in_t(c, 0), *idx = in_t(c, 2);
    if (x->rank - 1 + idx->rank > NPU_MAX_RANK)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the output would have rank %u (at most %d)",
                             (unsigned)(x->rank - 1 + idx->rank), NPU_MAX_RANK);
    if (valued(c, 2)) {
        const int32_t *v = idx->data;
        for (size_t k = 0, n = npu_ops_element_count(idx); k < n; k++)
            if (v[k] < 0 || (uint32_t)v[k] >= x->dims[axis])
                return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 2 (indices) holds %d, outside [0, %u)",
                                     (int)v[k], (unsigned)x->dims[axis]);
    }
    uint32_t dims[NPU_MAX_RANK], rank = 0;
    for (uint32_t k = 0; k < (uint32_t)axis; k++)
        dims[rank++] = x->dims[k];
    for (uint32_t k = 0; k < idx->rank; k++)
        dims[rank++] = idx->dims[k];
    for (uint32_t k = (uint32_t)axis + 1; k < x->rank; k++)
        dims[rank++] = x->dims[k];
    return npu_bind_set_shape(c, 0, rank, dims);
}

static int gather_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    int32_t axis;
    bool known;
    OPS_TRY(gather_read(c, &axis, &known));
    return library(c, npu_op_gather(in_t(c, 0), axis, in_t(c, 2), &c->out[0].t));
}

/* TRANSPOSE: x, optional permutation (absent or NO_VALUE: the axes reversed) */
static int transpose_read(struct npu_bind_call *c, const int32_t **perm, bool *known)
{
    OPS_TRY(npu_bind_counts(c, 1, 2, 1));
    OPS_TRY(moved_input(c, FLOAT_Q8, COUNT(FLOAT_Q8), 1, 4));
    *perm = NULL;
    *known = shaped(c, 0);
    if (!present(c, 1))
        return NPU_OK;
    uint32_t count;
    OPS_TRY(int_list_in(c, 1, perm, &count));
    *known = *known && *perm;
    if (*perm && c->in[0].has_rank) {
        uint32_t rank = in_t(c, 0)->rank, seen = 0;
        if (count != rank)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (permutation) has %u entries, not %u",
                                 (unsigned)count, (unsigned)rank);
        for (uint32_t k = 0; k < rank; k++) {
            int32_t p = (*perm)[k];
            if (p < 0 || (uint32_t)p >= rank || (seen >> p & 1u))
                return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 is not a permutation of %u axes",
                                     (unsigned)rank);
            seen |= 1u << p;
        }
    }
    return NPU_OK;
}

static int transpose_prepare(struct npu_bind_call *c)
{
    const int32_t *perm;
    bool known;
    OPS_TRY(transpose_read(c, &perm, &known));
    if (!known)
        return NPU_OK;
    const struct npu_tensor *x = in_t(c, 0);
    uint32_t dims[NPU_MAX_RANK];
    for (uint32_t k = 0; k < x->rank; k++)
        dims[k] = x->dims[perm ? (uint32_t)perm[k] : x->rank - 1 - k];
    return npu_bind_set_shape(c, 0, x->rank, dims);
}

static int transpose_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    const int32_t *perm;
    bool known;
    OPS_TRY(transpose_read(c, &perm, &known));
    return library(c, npu_op_transpose(in_t(c, 0), perm, &c->out[0].t));
}

/* STRIDED_SLICE: x, begin, end, strides ([rank] each), begin mask, end mask, shrink mask */
struct slice {
    const int32_t *begin, *end, *strides;
    int32_t begin_mask, end_mask, shrink_mask;
    bool known;
};

static int strided_slice_read(struct npu_bind_call *c, struct slice *s)
{
    OPS_TRY(npu_bind_counts(c, 7, 7, 1));
    OPS_TRY(moved_input(c, FLOAT_Q8, COUNT(FLOAT_Q8), 1, 4));
    const int32_t **lists[3] = {&s->begin, &s->end, &s->strides};
    bool known = shaped(c, 0);
    for (uint32_t i = 1; i <= 3; i++) {
        uint32_t count;
        OPS_TRY(int_list_in(c, i, lists[i - 1], &count));
        if (shaped(c, i) && c->in[0].has_rank && count != in_t(c, 0)->rank)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u has %u entries, not input 0's rank %u", (unsigned)i,
                                 (unsigned)count, (unsigned)in_t(c, 0)->rank);
        known = known && *lists[i - 1];
    }
    if (s->strides && c->in[0].has_rank)
        for (uint32_t k = 0; k < in_t(c, 0)->rank; k++)
            if (s->strides[k] == 0)
                return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 3 (strides) holds a 0");
    int32_t *masks[3] = {&s->begin_mask, &s->end_mask, &s->shrink_mask};
    for (uint32_t i = 4; i <= 6; i++) {
        bool k;
        OPS_TRY(npu_bind_i32(c, i, masks[i - 4], &k));
        known = known && k;
    }
    s->known = known;
    return NPU_OK;
}

static int strided_slice_prepare(struct npu_bind_call *c)
{
    struct slice s;
    OPS_TRY(strided_slice_read(c, &s));
    if (!s.known)
        return NPU_OK;
    const struct npu_tensor *x = in_t(c, 0);
    uint32_t dims[NPU_MAX_RANK], rank = 0;
    for (uint32_t d = 0; d < x->rank; d++) {
        int64_t first, len = ops_slice_axis(x->dims[d], s.begin[d], s.end[d], s.strides[d], s.begin_mask >> d & 1,
                                            s.end_mask >> d & 1, &first);
        if (s.shrink_mask >> d & 1) {
            if (len != 1)
                return npu_bind_fail(c, NPU_E_BAD_SHAPE, "shrinking axis %u needs one element, the slice has %lld",
                                     (unsigned)d, (long long)len);
            continue;
        }
        if (len < 1)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the slice of axis %u is empty", (unsigned)d);
        dims[rank++] = (uint32_t)len;
    }
    if (rank == 0)  /* every axis shrunk: one value */
        dims[rank++] = 1;
    return npu_bind_set_shape(c, 0, rank, dims);
}

static int strided_slice_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    struct slice s;
    OPS_TRY(strided_slice_read(c, &s));
    return library(c, npu_op_strided_slice(in_t(c, 0), s.begin, s.end, s.strides, s.begin_mask, s.end_mask,
                                           s.shrink_mask, &c->out[0].t));
}

/* RESIZE_BILINEAR: x, then (width, height) as INT32 sizes or as scales
 * (FLOAT16 for a float16 x, else FLOAT32), optional layout */
static int resize_prepare(struct npu_bind_call *c)
{
    OPS_TRY(npu_bind_counts(c, 3, 4, 1));
    OPS_TRY(moved_input(c, FLOAT_Q8, COUNT(FLOAT_Q8), 4, 4));
    bool nchw, k_layout, k_w, k_h;
    OPS_TRY(layout_in(c, 3, &nchw, &k_layout));
    int32_t ow = 0, oh = 0;
    if (c->in[1].t.type == NPU_OPERAND_INT32) {
        OPS_TRY(npu_bind_i32(c, 1, &ow, &k_w));
        OPS_TRY(npu_bind_i32(c, 2, &oh, &k_h));
    } else {
        int32_t scalar = in_t(c, 0)->type == TF16 ? NPU_OPERAND_FLOAT16 : NPU_OPERAND_FLOAT32;
        float sw, sh;
        OPS_TRY(npu_bind_f32(c, 1, scalar, &sw, &k_w));
        OPS_TRY(npu_bind_f32(c, 2, scalar, &sh, &k_h));
        if (!(k_w && k_h && k_layout && shaped(c, 0)))
            return NPU_OK;
        struct ops_image img;
        ops_image(in_t(c, 0), nchw, &img);
        double w = floor((double)img.w * sw), h = floor((double)img.h * sh);
        if (!(w >= 1 && h >= 1 && w <= INT32_MAX && h <= INT32_MAX))
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "scales %g and %g make a %gx%g output", (double)sw,
                                 (double)sh, h, w);
        ow = (int32_t)w;
        oh = (int32_t)h;
    }
    if (!(k_w && k_h && k_layout && shaped(c, 0)))
        return NPU_OK;
    if (ow < 1 || oh < 1)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the output would be %dx%d", (int)oh, (int)ow);
    struct ops_image img;
    ops_image(in_t(c, 0), nchw, &img);
    uint32_t dims[4] = {(uint32_t)img.n, (uint32_t)oh, (uint32_t)ow, (uint32_t)img.c};
    if (nchw) {
        dims[1] = (uint32_t)img.c;
        dims[2] = (uint32_t)oh;
        dims[3] = (uint32_t)ow;
    }
    return npu_bind_set_shape(c, 0, 4, dims);
}

static int resize_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    return library(c, npu_op_resize_bilinear(in_t(c, 0), nchw_at(c, 3), &c->out[0].t));
}

/* DEPTH_TO_SPACE, SPACE_TO_DEPTH: x, block size, optional layout */
static int block_read(struct npu_bind_call *c, int32_t *block, bool *nchw, bool *known)
{
    OPS_TRY(npu_bind_counts(c, 2, 3, 1));
    OPS_TRY(moved_input(c, FLOAT_Q8, COUNT(FLOAT_Q8), 4, 4));
    bool k_block, k_layout;
    OPS_TRY(npu_bind_i32(c, 1, block, &k_block));
    if (k_block && *block < 1)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (block size) is %d, not >= 1", (int)*block);
    OPS_TRY(layout_in(c, 2, nchw, &k_layout));
    *known = k_block && k_layout && shaped(c, 0);
    return NPU_OK;
}

static int block_prepare(struct npu_bind_call *c)
{
    int32_t block;
    bool nchw, known;
    OPS_TRY(block_read(c, &block, &nchw, &known));
    if (!known)
        return NPU_OK;
    struct ops_image img;
    ops_image(in_t(c, 0), nchw, &img);
    size_t b = (size_t)block, h, w, ch;
    if (c->type == NPU_OP_DEPTH_TO_SPACE) {
        if (img.c % (b * b))
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "depth %zu is not a multiple of block %zu squared", img.c, b);
        h = img.h * b, w = img.w * b, ch = img.c / (b * b);
    } else {
        if (img.h % b || img.w % b)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "height %zu and width %zu are not multiples of block %zu", img.h,
                                 img.w, b);
        h = img.h / b, w = img.w / b, ch = img.c * b * b;
    }
    if (h > UINT32_MAX || w > UINT32_MAX || ch > UINT32_MAX)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "block %zu makes the output too large", b);
    uint32_t dims[4] = {(uint32_t)img.n, (uint32_t)h, (uint32_t)w, (uint32_t)ch};
    if (nchw) {
        dims[1] = (uint32_t)ch;
        dims[2] = (uint32_t)h;
        dims[3] = (uint32_t)w;
    }
    return npu_bind_set_shape(c, 0, 4, dims);
}

static int block_run(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    int32_t block;
    bool nchw, known;
    OPS_TRY(block_read(c, &block, &nchw, &known));
    if (c->type == NPU_OP_DEPTH_TO_SPACE)
        return library(c, npu_op_depth_to_space(in_t(c, 0), block, nchw, &c->out[0].t));
    return library(c, npu_op_space_to_depth(in_t(c, 0), block, nchw, &c->out[0].t));
}

/* -- the table ---------------------------------------------------------------------- */

#define SPATIAL(op, fn, units_fn, cost_fn) \
    {.type = NPU_OP_##op, .name = #op, .prepare = fn##_prepare, .units = units_fn, .run = fn##_run, .cost = cost_fn}
#define SIMPLE(op, prep, run_fn, cost_fn) \
    {.type = NPU_OP_##op, .name = #op, .prepare = prep, .run = run_fn, .cost = cost_fn}
#define ELEMENTWISE(op, prep, run_fn, cost_fn) \
    {.type = NPU_OP_##op, .name = #op, .prepare = prep, .units = elementwise_units, .run = run_fn, .cost = cost_fn}

const struct npu_op_def npu_bind_core[] = {
    SPATIAL(CONV_2D, conv_2d, conv_2d_units, conv_2d_cost),
    SPATIAL(DEPTHWISE_CONV_2D, depthwise_conv_2d, depthwise_conv_2d_units, depthwise_conv_2d_cost),
    SPATIAL(GROUPED_CONV_2D, grouped_conv_2d, grouped_conv_2d_units, grouped_conv_2d_cost),
    SPATIAL(FULLY_CONNECTED, fully_connected, fully_connected_units, fully_connected_cost),
    SPATIAL(AVERAGE_POOL_2D, average_pool_2d, pool_units, pool_cost),
    SPATIAL(MAX_POOL_2D, max_pool_2d, pool_units, pool_cost),
    SPATIAL(L2_POOL_2D, l2_pool_2d, pool_units, pool_cost),
    ELEMENTWISE(ADD, add_prepare, add_run, NULL),
    ELEMENTWISE(SUB, add_prepare, add_run, NULL),
    ELEMENTWISE(MUL, mul_prepare, add_run, NULL),
    SIMPLE(MAXIMUM, extreme_prepare, extreme_run, NULL),
    SIMPLE(MINIMUM, extreme_prepare, extreme_run, NULL),
    ELEMENTWISE(RELU, unary_prepare, unary_run, NULL),
    ELEMENTWISE(RELU1, unary_prepare, unary_run, NULL),
    ELEMENTWISE(RELU6, unary_prepare, unary_run, NULL),
    ELEMENTWISE(LOGISTIC, unary_prepare, unary_run, along_axis_cost),
    ELEMENTWISE(TANH, unary_prepare, unary_run, along_axis_cost),
    SIMPLE(PRELU, prelu_prepare, prelu_run, NULL),
    {.type = NPU_OP_SOFTMAX, .name = "SOFTMAX", .prepare = softmax_prepare, .units = softmax_units,
     .run = softmax_run, .cost = along_axis_cost},
    SIMPLE(L2_NORMALIZATION, l2_normalization_prepare, l2_normalization_run, along_axis_cost),
    ELEMENTWISE(QUANTIZE, quantize_prepare, unary_run, NULL),
    ELEMENTWISE(DEQUANTIZE, dequantize_prepare, unary_run, NULL),
    SIMPLE(RESHAPE, reshape_prepare, reshape_run, NULL),
    SIMPLE(CONCATENATION, concatenation_prepare, concatenation_run, NULL),
    SIMPLE(PAD, pad_prepare, pad_run, NULL),
    SIMPLE(PAD_V2, pad_prepare, pad_run, NULL),
    SIMPLE(MEAN, reduce_prepare, reduce_run, NULL),
    SIMPLE(REDUCE_MAX, reduce_prepare, reduce_run, NULL),
    SIMPLE(REDUCE_MIN, reduce_prepare, reduce_run, NULL),
    SIMPLE(ARGMAX, arg_prepare, arg_run, NULL),
    SIMPLE(ARGMIN, arg_prepare, arg_run, NULL),
    SIMPLE(GATHER, gather_prepare, gather_run, NULL),
    SIMPLE(TRANSPOSE, transpose_prepare, transpose_run, NULL),
    SIMPLE(STRIDED_SLICE, strided_slice_prepare, strided_slice_run, NULL),
    SIMPLE(RESIZE_BILINEAR, resize_prepare, resize_run, NULL),
    SIMPLE(DEPTH_TO_SPACE, block_prepare, block_run, NULL),
    SIMPLE(SPACE_TO_DEPTH, block_prepare, block_run, NULL),
    {.type = -1},
};
