/*
 * kernels/bind_math.c - the bindings (npu/bind.h) of unary and binary math, comparisons and logic.
 *
 * The element-wise operations of NN HAL 1.2 (FLOOR, DIV and the 1.2 additions:
 * ABS, EXP, LOG, RSQRT, SQRT, SIN, NEG, POW, the comparisons, the logical
 * operations, SELECT and CAST), read as the 1.2 spec lays them out, and
 * TRANSPOSE_CONV_2D.
 */
#include <math.h>

#include "npu/bind.h"
#include "npu/errors.h"

static const int32_t FLOATS[] = {NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16};
static const int32_t FLOATS_INT[] = {NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_INT32};
static const int32_t ALL4[] = {NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_INT32,
                               NPU_OPERAND_TENSOR_QUANT8_ASYMM};
static const int32_t COMPARABLE[] = {NPU_OPERAND_TENSOR_BOOL8, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_FLOAT32,
                                     NPU_OPERAND_TENSOR_INT32, NPU_OPERAND_TENSOR_QUANT8_ASYMM};
static const int32_t BOOL8[] = {NPU_OPERAND_TENSOR_BOOL8};

#define COUNT(array) ((uint32_t)(sizeof(array) / sizeof((array)[0])))

/* A TENSOR_QUANT8_ASYMM operand's parameters as the 1.2 spec bounds them. */
static bool quant8_ok(const struct npu_tensor *t)
{
    return t->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM ||
           (t->scale > 0.0f && isfinite(t->scale) && t->zero_point >= 0 && t->zero_point <= 255);
}

/* Input i: a tensor of one of types (quantization in range). */
static int input_tensor(struct npu_bind_call *c, uint32_t i, const int32_t *types, uint32_t n)
{
    int rc = npu_bind_tensor(c, i, types, n);
    if (rc != NPU_OK)
        return rc;
    if (!quant8_ok(&c->in[i].t))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "input %u (TENSOR_QUANT8_ASYMM) needs a scale > 0 and a zero point in 0..255, not %g and %d",
                             (unsigned)i, (double)c->in[i].t.scale, (int)c->in[i].t.zero_point);
    return NPU_OK;
}

/* Input j: a tensor of input i's type. */
static int same_type(struct npu_bind_call *c, uint32_t j, uint32_t i)
{
    return input_tensor(c, j, &c->in[i].t.type, 1);
}

/* Output 0's declared quantization is in range. */
static int output_quant(struct npu_bind_call *c)
{
    const struct npu_tensor *o = &c->out[0].t;
    if (!quant8_ok(o))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "output 0 (TENSOR_QUANT8_ASYMM) needs a scale > 0 and a zero point in 0..255, not %g and %d",
                             (double)o->scale, (int)o->zero_point);
    return NPU_OK;
}

/* Output 0's declared type is type (its quantization in range). */
static int output_type(struct npu_bind_call *c, int32_t type, const char *what)
{
    if (c->out[0].t.type != type)
        return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "output 0 must be %s, not %s", what,
                             npu_bind_type_name(c->out[0].t.type));
    return output_quant(c);
}

/* Output 0 of input i's shape, when it is known. */
static int shape_of(struct npu_bind_call *c, uint32_t i)
{
    const struct npu_arg *a = &c->in[i];
    return a->has_shape ? npu_bind_set_shape(c, 0, a->t.rank, a->t.dims) : NPU_OK;
}

/* Inputs i and j have one shape (when both are known). */
static int same_shape(struct npu_bind_call *c, uint32_t i, uint32_t j)
{
    const struct npu_arg *a = &c->in[i], *b = &c->in[j];
    if (!a->has_shape || !b->has_shape)
        return NPU_OK;
    bool same = a->t.rank == b->t.rank;
    for (uint32_t k = 0; same && k < a->t.rank; k++)
        same = a->t.dims[k] == b->t.dims[k];
    if (!same)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u and input %u must have one shape", (unsigned)i,
                             (unsigned)j);
    return NPU_OK;
}

/* Output 0: inputs 0 and 1 broadcast (each of rank <= max_rank). */
static int broadcast_shape(struct npu_bind_call *c, uint32_t max_rank)
{
    const struct npu_arg *a = &c->in[0], *b = &c->in[1];
    for (uint32_t i = 0; i < 2; i++)
        if (c->in[i].has_rank && c->in[i].t.rank > max_rank)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u has rank %u (at most %u)", (unsigned)i,
                                 (unsigned)c->in[i].t.rank, (unsigned)max_rank);
    if (!a->has_shape || !b->has_shape)
        return NPU_OK;
    uint32_t rank = a->t.rank > b->t.rank ? a->t.rank : b->t.rank, dims[NPU_MAX_RANK];
    for (uint32_t back = 0; back < rank; back++) {
        uint32_t da = back < a->t.rank ? a->t.dims[a->t.rank - 1 - back] : 1;
        uint32_t db = back < b->t.rank ? b->t.dims[b->t.rank - 1 - back] : 1;
        if (da != db && da != 1 && db != 1)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE,
                                 "inputs 0 and 1 do not broadcast: %u and %u, %u dimensions from the end",
                                 (unsigned)da, (unsigned)db, (unsigned)back + 1);
        dims[rank - 1 - back] = da == 1 ? db : da;
    }
    return npu_bind_set_shape(c, 0, rank, dims);
}

/* A run() whose library call failed (prepare let through what the library refused). */
static int refused(struct npu_bind_call *c, int rc)
{
    if (rc == NPU_OK)
        return NPU_OK;
    return npu_bind_fail(c, rc, "the operation library refused these operands (%s)", npu_error_name(rc));
}

#define OUT (&c->out[0].t)
#define IN(i) (&c->in[i].t)

/* -- one input ------------------------------------------------------------------- */

static int unary_prepare(struct npu_bind_call *c, const int32_t *types, uint32_t n, const char *what)
{
    int rc = npu_bind_counts(c, 1, 1, 1);
    if (rc == NPU_OK)
        rc = input_tensor(c, 0, types, n);
    if (rc == NPU_OK && c->type == NPU_OP_FLOOR && c->in[0].has_rank && c->in[0].t.rank > 4)
        rc = npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 0 has rank %u (at most 4)", (unsigned)c->in[0].t.rank);
    if (rc == NPU_OK && OUT->type != IN(0)->type)
        rc = npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "output 0 must be %s, of input 0's type, not %s",
                           what, npu_bind_type_name(OUT->type));
    return rc == NPU_OK ? shape_of(c, 0) : rc;
}

static int prepare_float_unary(struct npu_bind_call *c)
{
    return unary_prepare(c, FLOATS, COUNT(FLOATS), "a float tensor");
}

static int prepare_neg(struct npu_bind_call *c)
{
    return unary_prepare(c, FLOATS_INT, COUNT(FLOATS_INT), "a float or int32 tensor");
}

static int prepare_logical_not(struct npu_bind_call *c)
{
    return unary_prepare(c, BOOL8, COUNT(BOOL8), "TENSOR_BOOL8");
}

static int run_unary(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    int (*fn)(const struct npu_tensor *, const struct npu_tensor *);
    switch (c->type) {
    case NPU_OP_FLOOR: fn = npu_op_floor; break;
    case NPU_OP_ABS: fn = npu_op_abs; break;
    case NPU_OP_EXP: fn = npu_op_exp; break;
    case NPU_OP_LOG: fn = npu_op_log; break;
    case NPU_OP_RSQRT: fn = npu_op_rsqrt; break;
    case NPU_OP_SQRT: fn = npu_op_sqrt; break;
    case NPU_OP_SIN: fn = npu_op_sin; break;
    case NPU_OP_NEG: fn = npu_op_neg; break;
    case NPU_OP_LOGICAL_NOT: fn = npu_op_logical_not; break;
    default: fn = npu_op_cast; break;
    }
    return refused(c, fn(IN(0), OUT));
}

static int prepare_cast(struct npu_bind_call *c)
{
    int rc = npu_bind_counts(c, 1, 1, 1);
    if (rc == NPU_OK)
        rc = input_tensor(c, 0, ALL4, COUNT(ALL4));
    bool allowed = false;
    for (uint32_t k = 0; k < COUNT(ALL4); k++)
        allowed = allowed || OUT->type == ALL4[k];
    if (rc == NPU_OK && !allowed)
        rc = npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE,
                           "output 0 must be TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_INT32 or TENSOR_QUANT8_ASYMM, "
                           "not %s", npu_bind_type_name(OUT->type));
    if (rc == NPU_OK)
        rc = output_quant(c);
    return rc == NPU_OK ? shape_of(c, 0) : rc;
}

/* -- two inputs, broadcast ------------------------------------------------------- */

static int prepare_div(struct npu_bind_call *c)
{
    int32_t fuse = 0;
    bool known = false;
    int rc = npu_bind_counts(c, 3, 3, 1);
    if (rc == NPU_OK)
        rc = input_tensor(c, 0, FLOATS, COUNT(FLOATS));
    if (rc == NPU_OK)
        rc = same_type(c, 1, 0);
    if (rc == NPU_OK)
        rc = npu_bind_i32(c, 2, &fuse, &known);
    if (rc == NPU_OK && known && (fuse < 0 || fuse > 3))
        rc = npu_bind_fail(c, NPU_E_BAD_FUSE_CODE, "input 2 (fused activation) must be 0..3, not %d", (int)fuse);
    if (rc == NPU_OK)
        rc = output_type(c, IN(0)->type, "of input 0's type");
    return rc == NPU_OK ? broadcast_shape(c, 4) : rc;
}

static int run_div(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    int32_t fuse;
    int rc = npu_bind_i32(c, 2, &fuse, NULL);
    return rc == NPU_OK ? refused(c, npu_op_div(IN(0), IN(1), fuse, OUT)) : rc;
}

static int binary_prepare(struct npu_bind_call *c, const int32_t *types, uint32_t n, int32_t out_type,
                          const char *what, uint32_t max_rank)
{
    int rc = npu_bind_counts(c, 2, 2, 1);
    if (rc == NPU_OK)
        rc = input_tensor(c, 0, types, n);
    if (rc == NPU_OK)
        rc = same_type(c, 1, 0);
    if (rc == NPU_OK)
        rc = output_type(c, out_type < 0 ? IN(0)->type : out_type, what);
    return rc == NPU_OK ? broadcast_shape(c, max_rank) : rc;
}

static int prepare_pow(struct npu_bind_call *c)
{
    return binary_prepare(c, FLOATS, COUNT(FLOATS), -1, "of input 0's type", 4);
}

static int prepare_comparison(struct npu_bind_call *c)
{
    return binary_prepare(c, COMPARABLE, COUNT(COMPARABLE), NPU_OPERAND_TENSOR_BOOL8, "TENSOR_BOOL8", NPU_MAX_RANK);
}

static int prepare_logical(struct npu_bind_call *c)
{
    return binary_prepare(c, BOOL8, COUNT(BOOL8), NPU_OPERAND_TENSOR_BOOL8, "TENSOR_BOOL8", NPU_MAX_RANK);
}

static int run_binary(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    int (*fn)(const struct npu_tensor *, const struct npu_tensor *, const struct npu_tensor *);
    switch (c->type) {
    case NPU_OP_POW: fn = npu_op_pow; break;
    case NPU_OP_EQUAL: fn = npu_op_equal; break;
    case NPU_OP_NOT_EQUAL: fn = npu_op_not_equal; break;
    case NPU_OP_LESS: fn = npu_op_less; break;
    case NPU_OP_LESS_EQUAL: fn = npu_op_less_equal; break;
    case NPU_OP_GREATER: fn = npu_op_greater; break;
    case NPU_OP_GREATER_EQUAL: fn = npu_op_greater_equal; break;
    case NPU_OP_LOGICAL_AND: fn = npu_op_logical_and; break;
    default: fn = npu_op_logical_or; break;
    }
    return refused(c, fn(IN(0), IN(1), OUT));
}

/* -- SELECT ---------------------------------------------------------------------- */

static int prepare_select(struct npu_bind_call *c)
{
    int rc = npu_bind_counts(c, 3, 3, 1);
    if (rc == NPU_OK)
        rc = input_tensor(c, 0, BOOL8, COUNT(BOOL8));
    if (rc == NPU_OK)
        rc = input_tensor(c, 1, ALL4, COUNT(ALL4));
    if (rc == NPU_OK)
        rc = same_type(c, 2, 1);
    if (rc == NPU_OK)
        rc = output_type(c, IN(1)->type, "of input 1's type");
    if (rc == NPU_OK)
        rc = same_shape(c, 0, 1);
    if (rc == NPU_OK)
        rc = same_shape(c, 1, 2);
    return rc == NPU_OK ? shape_of(c, 1) : rc;
}

static int run_select(struct npu_bind_call *c, size_t begin, size_t end)
{
    (void)begin, (void)end;
    return refused(c, npu_op_select(IN(0), IN(1), IN(2), OUT));
}

/* -- TRANSPOSE_CONV_2D ---------------------------------------------------------------
 * 11 inputs: input, filter, bias, padding left, right, top, bottom, stride w, h,
 * fused activation, layout (NCHW when true); 9 inputs: input, filter, bias, the
 * output's shape (TENSOR_INT32 [4], in the layout), padding scheme, stride w, h,
 * fused activation, layout. */

static const int32_t CONV_INPUTS[] = {NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16,
                                      NPU_OPERAND_TENSOR_QUANT8_ASYMM};
static const int32_t Q8_FILTERS[] = {NPU_OPERAND_TENSOR_QUANT8_ASYMM, NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL};
static const int32_t INT32S[] = {NPU_OPERAND_TENSOR_INT32};

/* The layout input's index and, when known, value (false otherwise). */
static bool tconv_nchw(const struct npu_bind_call *c)
{
    const struct npu_arg *a = &c->in[c->input_count == 11 ? 10 : 8];
    return a->t.data != NULL && *(const uint8_t *)a->t.data != 0;
}

/* Input i: an INT32 scalar; *ok false when it is not known yet. */
static int tconv_i32(struct npu_bind_call *c, uint32_t i, int32_t *v, bool *ok)
{
    bool known = false;
    int rc = npu_bind_i32(c, i, v, &known);
    *ok = *ok && known;
    if (!known)
        *v = 0;
    return rc;
}

/* The window from the scalar inputs; *known false while one it needs is unknown.
 * Checks every value it is given. */
static int tconv_window(struct npu_bind_call *c, struct npu_window *w, bool *known)
{
    static const char *const PADS[] = {"padding left", "padding right", "padding top", "padding bottom"};
    bool explicit_pad = c->input_count == 11;
    uint32_t at = explicit_pad ? 7 : 5;
    int32_t pads[4] = {0, 0, 0, 0}, scheme = 2;
    bool nchw = false, layout_known = false;
    int rc = NPU_OK;
    *known = true;
    *w = (struct npu_window){.dilation_w = 1, .dilation_h = 1};
    for (uint32_t k = 0; explicit_pad && k < 4 && rc == NPU_OK; k++) {
        rc = tconv_i32(c, 3 + k, &pads[k], known);
        if (rc == NPU_OK && (pads[k] < -65536 || pads[k] > 65536 || (k % 2 == 0 && pads[k] < 0)))
            rc = npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (%s) must be %s, not %d", (unsigned)(3 + k), PADS[k],
                               k % 2 == 0 ? "within 0..65536" : "within -65536..65536", (int)pads[k]);
    }
    if (rc == NPU_OK && !explicit_pad) {
        rc = tconv_i32(c, 4, &scheme, known);
        if (rc == NPU_OK && scheme != 1 && scheme != 2 && c->in[4].t.data)
            rc = npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 4 (padding scheme) must be 1 (SAME) or 2 (VALID), not %d",
                               (int)scheme);
    }
    if (rc == NPU_OK)
        rc = tconv_i32(c, at, &w->stride_w, known);
    if (rc == NPU_OK)
        rc = tconv_i32(c, at + 1, &w->stride_h, known);
    for (uint32_t k = 0; k < 2 && rc == NPU_OK; k++) {
        int32_t s = k ? w->stride_h : w->stride_w;
        if (c->in[at + k].t.data && (s < 1 || s > 65536))
            rc = npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (stride %s) must be within 1..65536, not %d",
                               (unsigned)(at + k), k ? "height" : "width", (int)s);
    }
    if (rc == NPU_OK)
        rc = tconv_i32(c, at + 2, &w->fuse, known);
    if (rc == NPU_OK && (w->fuse < 0 || w->fuse > 3))
        rc = npu_bind_fail(c, NPU_E_BAD_FUSE_CODE, "input %u (fused activation) must be 0..3, not %d",
                           (unsigned)(at + 2), (int)w->fuse);
    if (rc == NPU_OK)
        rc = npu_bind_bool(c, at + 3, &nchw, &layout_known);
    if (rc != NPU_OK)
        return rc;
    *known = *known && layout_known;
    w->nchw = nchw;
    if (!explicit_pad) {
        const struct npu_arg *shape = &c->in[3];
        rc = input_tensor(c, 3, INT32S, COUNT(INT32S));
        if (rc == NPU_OK && shape->has_shape && (shape->t.rank != 1 || shape->t.dims[0] != 4))
            rc = npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 3 (output shape) must be a TENSOR_INT32 of 4 entries");
        if (rc != NPU_OK)
            return rc;
        if (scheme == 1 && (!*known || !shape->t.data || !shape->has_shape || !c->in[1].has_shape)) {
            *known = false;  /* SAME needs the output's size and the filter's */
        } else if (scheme == 1) {
            const int32_t *size = shape->t.data;
            int32_t oh = size[nchw ? 2 : 1], ow = size[nchw ? 3 : 2];
            rc = npu_ops_transpose_padding(oh, w->stride_h, (int32_t)c->in[1].t.dims[1], 1, &pads[2], &pads[3]);
            if (rc == NPU_OK)
                rc = npu_ops_transpose_padding(ow, w->stride_w, (int32_t)c->in[1].t.dims[2], 1, &pads[0], &pads[1]);
            if (rc != NPU_OK)
                return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 3 (output shape) must hold a height and width >= 1, "
                                     "not %d and %d", (int)oh, (int)ow);
        }
    }
    w->pad_left = pads[0];
    w->pad_right = pads[1];
    w->pad_top = pads[2];
    w->pad_bottom = pads[3];
    return NPU_OK;
}

static int prepare_transpose_conv(struct npu_bind_call *c)
{
    int rc = npu_bind_counts(c, 9, 11, 1);
    if (rc == NPU_OK && c->input_count == 10)
        rc = npu_bind_fail(c, NPU_E_BAD_OPERATION, "takes 9 (implicit padding) or 11 (explicit) inputs, not 10");
    if (rc == NPU_OK)
        rc = input_tensor(c, 0, CONV_INPUTS, COUNT(CONV_INPUTS));
    bool quant = rc == NPU_OK && IN(0)->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM;
    if (rc == NPU_OK)
        rc = quant ? input_tensor(c, 1, Q8_FILTERS, COUNT(Q8_FILTERS)) : same_type(c, 1, 0);
    if (rc == NPU_OK && IN(1)->type == NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL && IN(1)->channel_dim != 0)
        rc = npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (filter) is quantized per channel along dimension %u, "
                           "not 0 (its output channels)", (unsigned)IN(1)->channel_dim);
    if (rc == NPU_OK)
        rc = quant ? input_tensor(c, 2, INT32S, COUNT(INT32S)) : same_type(c, 2, 0);
    if (rc == NPU_OK && quant && IN(2)->zero_point != 0)
        rc = npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 2 (bias) must have zero point 0, not %d",
                           (int)IN(2)->zero_point);
    if (rc == NPU_OK && quant && IN(1)->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM) {
        /* the spec's quantized bias: scale input * filter (per channel, each channel's implicitly) */
        double product = (double)IN(0)->scale * IN(1)->scale, scale = IN(2)->scale;
        if (!(fabs(product - scale) <= 1e-6 * fmin(product, scale)))
            rc = npu_bind_fail(c, NPU_E_BAD_SCALAR,
                               "input 2 (bias) must have the input's scale times the filter's (%g), not %g", product,
                               scale);
    }
    static const uint32_t RANKS[] = {4, 4, 1};
    for (uint32_t i = 0; i < 3 && rc == NPU_OK; i++)
        if (c->in[i].has_rank && c->in[i].t.rank != RANKS[i])
            rc = npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u (%s) must have rank %u, not %u", (unsigned)i,
                               i == 0 ? "input" : (i == 1 ? "filter" : "bias"), (unsigned)RANKS[i],
                               (unsigned)c->in[i].t.rank);
    if (rc == NPU_OK)
        rc = output_type(c, IN(0)->type, "of input 0's type");
    struct npu_window w;
    bool known;
    if (rc == NPU_OK)
        rc = tconv_window(c, &w, &known);
    if (rc != NPU_OK)
        return rc;
    const struct npu_arg *in = &c->in[0], *filter = &c->in[1], *bias = &c->in[2];
    if (filter->has_shape && bias->has_shape && bias->t.dims[0] != filter->t.dims[0])
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 2 (bias) must have %u entries, one per output channel, not %u",
                             (unsigned)filter->t.dims[0], (unsigned)bias->t.dims[0]);
    if (!known || !in->has_shape || !filter->has_shape)
        return NPU_OK;
    uint32_t n = in->t.dims[0], channels = in->t.dims[w.nchw ? 1 : 3];
    uint32_t h = in->t.dims[w.nchw ? 2 : 1], wd = in->t.dims[w.nchw ? 3 : 2];
    if (h == 0 || wd == 0 || channels == 0)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 0 may have no batches, but not an empty height, width or depth");
    if (filter->t.dims[3] != channels)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (filter) has depth %u, input 0 has %u channels",
                             (unsigned)filter->t.dims[3], (unsigned)channels);
    long oh = npu_ops_transpose_conv_size(h, filter->t.dims[1], w.stride_h, w.pad_top, w.pad_bottom);
    long ow = npu_ops_transpose_conv_size(wd, filter->t.dims[2], w.stride_w, w.pad_left, w.pad_right);
    if (oh < 1 || ow < 1 || oh > UINT32_MAX || ow > UINT32_MAX)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the output would be %ldx%ld", oh, ow);
    uint32_t oc = filter->t.dims[0];
    uint32_t dims[4] = {n, w.nchw ? oc : (uint32_t)oh, w.nchw ? (uint32_t)oh : (uint32_t)ow,
                        w.nchw ? (uint32_t)ow : oc};
    return npu_bind_set_shape(c, 0, 4, dims);
}

static size_t units_transpose_conv(const struct npu_bind_call *c)
{
    size_t units = npu_ops_units_spatial(OUT, tconv_nchw(c));
    return units ? units : 1;
}

static int run_transpose_conv(struct npu_bind_call *c, size_t begin, size_t end)
{
    struct npu_window w;
    bool known;
    if (npu_ops_element_count(OUT) == 0 && OUT->rank == 4 && OUT->dims[0] == 0)
        return NPU_OK;  /* no batches (AOSP's zero-sized inputs): nothing to compute */
    int rc = tconv_window(c, &w, &known);
    if (rc == NPU_OK && !known)
        rc = npu_bind_fail(c, NPU_E_BAD_SCALAR, "its scalar inputs and output shape must be known to run");
    return rc == NPU_OK ? refused(c, npu_op_transpose_conv_2d(IN(0), IN(1), IN(2), &w, OUT, begin, end)) : rc;
}

/* Each input pixel's channels times each filter tap's, for every output channel. */
static void cost_transpose_conv(const struct npu_bind_call *c, double *flops, double *bytes)
{
    const struct npu_tensor *filter = IN(1);
    *flops = 2.0 * (double)npu_ops_element_count(IN(0)) * filter->dims[0] * filter->dims[1] * filter->dims[2];
    *bytes = npu_bind_io_bytes(c);
}

const struct npu_op_def npu_bind_math[] = {
    {.type = NPU_OP_FLOOR, .name = "FLOOR", .prepare = prepare_float_unary, .run = run_unary},
    {.type = NPU_OP_ABS, .name = "ABS", .prepare = prepare_float_unary, .run = run_unary},
    {.type = NPU_OP_EXP, .name = "EXP", .prepare = prepare_float_unary, .run = run_unary},
    {.type = NPU_OP_LOG, .name = "LOG", .prepare = prepare_float_unary, .run = run_unary},
    {.type = NPU_OP_RSQRT, .name = "RSQRT", .prepare = prepare_float_unary, .run = run_unary},
    {.type = NPU_OP_SQRT, .name = "SQRT", .prepare = prepare_float_unary, .run = run_unary},
    {.type = NPU_OP_SIN, .name = "SIN", .prepare = prepare_float_unary, .run = run_unary},
    {.type = NPU_OP_NEG, .name = "NEG", .prepare = prepare_neg, .run = run_unary},
    {.type = NPU_OP_LOGICAL_NOT, .name = "LOGICAL_NOT", .prepare = prepare_logical_not, .run = run_unary},
    {.type = NPU_OP_CAST, .name = "CAST", .prepare = prepare_cast, .run = run_unary},
    {.type = NPU_OP_DIV, .name = "DIV", .prepare = prepare_div, .run = run_div},
    {.type = NPU_OP_POW, .name = "POW", .prepare = prepare_pow, .run = run_binary},
    {.type = NPU_OP_EQUAL, .name = "EQUAL", .prepare = prepare_comparison, .run = run_binary},
    {.type = NPU_OP_NOT_EQUAL, .name = "NOT_EQUAL", .prepare = prepare_comparison, .run = run_binary},
    {.type = NPU_OP_LESS, .name = "LESS", .prepare = prepare_comparison, .run = run_binary},
    {.type = NPU_OP_LESS_EQUAL, .name = "LESS_EQUAL", .prepare = prepare_comparison, .run = run_binary},
    {.type = NPU_OP_GREATER, .name = "GREATER", .prepare = prepare_comparison, .run = run_binary},
    {.type = NPU_OP_GREATER_EQUAL, .name = "GREATER_EQUAL", .prepare = prepare_comparison, .run = run_binary},
    {.type = NPU_OP_LOGICAL_AND, .name = "LOGICAL_AND", .prepare = prepare_logical, .run = run_binary},
    {.type = NPU_OP_LOGICAL_OR, .name = "LOGICAL_OR", .prepare = prepare_logical, .run = run_binary},
    {.type = NPU_OP_SELECT, .name = "SELECT", .prepare = prepare_select, .run = run_select},
    {.type = NPU_OP_TRANSPOSE_CONV_2D, .name = "TRANSPOSE_CONV_2D", .prepare = prepare_transpose_conv,
     .units = units_transpose_conv, .run = run_transpose_conv, .cost = cost_transpose_conv},
    {.type = -1},
};
