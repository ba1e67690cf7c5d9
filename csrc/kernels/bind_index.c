/*
 * kernels/bind_index.c - the bindings (npu/bind.h) of shapes, reductions, indexing and normalizations.
 *
 * Each operation has one function op(c, run) that reads the operands as the
 * 1.2 signature lays them out, checks what is known, sets the outputs' shapes
 * it can compute and, when run is true (every operand known), calls the
 * kernel of npu/ops.h; prepare() and run() are that function.
 */
#include <math.h>
#include <stdlib.h>

#include "npu/bind.h"
#include "npu/errors.h"
#include "ops_internal.h"

#define F32 NPU_OPERAND_TENSOR_FLOAT32
#define F16 NPU_OPERAND_TENSOR_FLOAT16
#define I32 NPU_OPERAND_TENSOR_INT32
#define Q8 NPU_OPERAND_TENSOR_QUANT8_ASYMM

static const int32_t MOVABLE[] = {F32, F16, I32, Q8};
static const int32_t FLOAT_Q8[] = {F32, F16, Q8};
static const int32_t FLOATS[] = {F32, F16};
static const int32_t LOOKED_UP[] = {F32, I32, Q8};
static const int32_t INTS[] = {I32};
static const int32_t BOOLS[] = {NPU_OPERAND_TENSOR_BOOL8};

#define COUNT(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))
#define TRY OPS_TRY

/* -- reading operands ------------------------------------------------------------ */

static const struct npu_tensor *in_t(const struct npu_bind_call *c, uint32_t i)
{
    return &c->in[i].t;
}

static bool shaped(const struct npu_bind_call *c, uint32_t i)
{
    return c->in[i].has_shape;
}

/* A quantized operand's scale and zero point are usable. */
static int quantization(struct npu_bind_call *c, const struct npu_tensor *t, const char *io, uint32_t i)
{
    if (t->type == Q8 && (!(t->scale > 0.0f) || !isfinite(t->scale) || t->zero_point < 0 || t->zero_point > 255))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                             "%s %u (TENSOR_QUANT8_ASYMM) needs a scale > 0 and a zero point in 0..255, not %g and %d",
                             io, (unsigned)i, (double)t->scale, (int)t->zero_point);
    return NPU_OK;
}

/* The operations Android's reference runs on a zero-sized batch (input 0's
 * first dimension 0, as after a BOX_WITH_NMS_LIMIT that kept nothing): the
 * output is as empty, and nothing is computed. */
static bool zero_batches(const struct npu_bind_call *c)
{
    return c->type == NPU_OP_CHANNEL_SHUFFLE || c->type == NPU_OP_INSTANCE_NORMALIZATION ||
           c->type == NPU_OP_RESIZE_NEAREST_NEIGHBOR;
}

static bool empty_batch(const struct npu_bind_call *c)
{
    return c->in[0].has_shape && c->in[0].t.rank > 0 && c->in[0].t.dims[0] == 0;
}

/* Input i is a tensor of one of types; its rank, when known, at most max_rank
 * and at least min_rank. */
static int tensor(struct npu_bind_call *c, uint32_t i, const int32_t *types, uint32_t n, uint32_t min_rank,
                  uint32_t max_rank)
{
    TRY(npu_bind_tensor(c, i, types, n));
    TRY(quantization(c, in_t(c, i), "input", i));
    const struct npu_arg *a = &c->in[i];
    if (a->has_rank && (a->t.rank < min_rank || a->t.rank > max_rank)) {
        if (min_rank == max_rank)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u must have rank %u, not %u", (unsigned)i,
                                 (unsigned)min_rank, (unsigned)a->t.rank);
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u must have rank %u to %u, not %u", (unsigned)i,
                             (unsigned)min_rank, (unsigned)max_rank, (unsigned)a->t.rank);
    }
    if (a->has_shape && a->t.rank > 0)
        for (uint32_t d = 0; d < a->t.rank; d++)
            if (a->t.dims[d] == 0 && !(i == 0 && d == 0 && zero_batches(c)))
                return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u has an empty dimension %u", (unsigned)i,
                                     (unsigned)d);
    return NPU_OK;
}

/* Output k is declared of type (what names where that type comes from). */
static int output_type(struct npu_bind_call *c, uint32_t k, int32_t type, const char *what)
{
    const struct npu_tensor *o = &c->out[k].t;
    if (o->type != type)
        return npu_bind_fail(c, NPU_E_BAD_OPERAND_TYPE, "output %u must be %s (%s), not %s", (unsigned)k,
                             npu_bind_type_name(type), what, npu_bind_type_name(o->type));
    return quantization(c, o, "output", k);
}

/* The common head of a signature: the counts, input 0 a tensor of types (rank
 * min_rank..max_rank when known), output 0 of its type. */
static int head(struct npu_bind_call *c, uint32_t in_lo, uint32_t in_hi, uint32_t n_out, const int32_t *types,
                uint32_t n, uint32_t min_rank, uint32_t max_rank)
{
    TRY(npu_bind_counts(c, in_lo, in_hi, n_out));
    TRY(tensor(c, 0, types, n, min_rank, max_rank));
    return output_type(c, 0, in_t(c, 0)->type, "input 0's type");
}

/* Input i is a TENSOR_INT32 vector (of length len when len >= 0); *values is
 * its data, or NULL when unknown (an empty vector reads as known). */
static int vector(struct npu_bind_call *c, uint32_t i, int64_t len, const int32_t **values, uint32_t *count)
{
    TRY(npu_bind_tensor(c, i, INTS, 1));
    const struct npu_arg *a = &c->in[i];
    if (a->has_rank && a->t.rank != 1)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u must be a vector, not of rank %u", (unsigned)i,
                             (unsigned)a->t.rank);
    *values = NULL;
    *count = a->has_shape ? a->t.dims[0] : 0;
    if (a->has_shape && len >= 0 && a->t.dims[0] != (uint32_t)len)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input %u must hold %u values, not %u", (unsigned)i,
                             (unsigned)len, (unsigned)a->t.dims[0]);
    if (a->has_shape)
        *values = a->t.data;
    return NPU_OK;
}

/* A scalar float parameter, FLOAT16 for a TENSOR_FLOAT16 input 0, else FLOAT32. */
static int real(struct npu_bind_call *c, uint32_t i, float *value, bool *known)
{
    int32_t type = in_t(c, 0)->type == F16 ? NPU_OPERAND_FLOAT16 : NPU_OPERAND_FLOAT32;
    return npu_bind_f32(c, i, type, value, known);
}

/* An optional trailing BOOL layout input (false when absent or omitted). */
static int layout(struct npu_bind_call *c, uint32_t i, bool *nchw, bool *known)
{
    *nchw = false;
    *known = true;
    if (i >= c->input_count || c->in[i].omitted)
        return NPU_OK;
    return npu_bind_bool(c, i, nchw, known);
}

/* axis made non-negative for rank, or a sentence. */
static int axis_in(struct npu_bind_call *c, uint32_t i, int32_t axis, uint32_t rank, uint32_t *ax)
{
    if (axis < -(int32_t)rank || axis >= (int32_t)rank)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (axis %d) must be in [-%u, %u)", (unsigned)i, (int)axis,
                             (unsigned)rank, (unsigned)rank);
    *ax = (uint32_t)(axis < 0 ? axis + (int32_t)rank : axis);
    return NPU_OK;
}

/* Every input's data, for run(): a missing one is refused before a kernel sees NULL. */
static int all_known(struct npu_bind_call *c)
{
    for (uint32_t i = 0; i < c->input_count; i++) {
        const struct npu_arg *a = &c->in[i];
        bool empty = a->has_shape && npu_ops_element_count(&a->t) == 0 && a->t.rank > 0;
        if (!a->omitted && !empty && (a->t.data == NULL || !a->has_shape))
            return npu_bind_fail(c, NPU_E_INVALID_ARGUMENT, "input %u's value is not known", (unsigned)i);
    }
    return NPU_OK;
}

/* The kernel's status, with a sentence when it refused. */
static int ran(struct npu_bind_call *c, int rc)
{
    if (rc != NPU_OK)
        return npu_bind_fail(c, rc, "the kernel refused the operands (%s)", npu_error_name(rc));
    return NPU_OK;
}

static uint32_t dims_of(const struct npu_tensor *t, uint32_t *dims)
{
    for (uint32_t d = 0; d < t->rank; d++)
        dims[d] = t->dims[d];
    return t->rank;
}

/* One function per operation serves both prepare() and run(). */
#define BINDING(fn)                                                                            \
    static int fn##_prepare(struct npu_bind_call *c) { return fn(c, false); }                  \
    static int fn##_run(struct npu_bind_call *c, size_t begin, size_t end)                     \
    {                                                                                          \
        (void)begin;                                                                           \
        (void)end;                                                                             \
        int rc_ = all_known(c);                                                                \
        return rc_ != NPU_OK ? rc_ : fn(c, true);                                              \
    }

/* -- reshaping ------------------------------------------------------------------------ */

static int squeeze(struct npu_bind_call *c, bool run)
{
    TRY(head(c, 1, 2, 1, FLOAT_Q8, COUNT(FLOAT_Q8), 0, 4));
    const int32_t *axes = NULL;
    uint32_t count = 0;
    bool axes_known = true;
    if (c->input_count == 2 && !c->in[1].omitted) {
        TRY(vector(c, 1, -1, &axes, &count));
        axes_known = shaped(c, 1) && (axes != NULL || count == 0);
    }
    if (!shaped(c, 0) || !axes_known)
        return NPU_OK;
    const struct npu_tensor *x = in_t(c, 0);
    bool drop[NPU_MAX_RANK] = {false};
    for (uint32_t k = 0; k < count; k++) {
        uint32_t ax = 0;
        TRY(axis_in(c, 1, axes[k], x->rank, &ax));
        if (x->dims[ax] != 1)
            return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 names axis %d, of size %u, not 1", (int)axes[k],
                                 (unsigned)x->dims[ax]);
        drop[ax] = true;
    }
    uint32_t dims[NPU_MAX_RANK], rank = 0;
    for (uint32_t d = 0; d < x->rank; d++)
        if (!(count ? drop[d] : x->dims[d] == 1))
            dims[rank++] = x->dims[d];
    TRY(npu_bind_set_shape(c, 0, rank, dims));
    return run ? ran(c, npu_op_squeeze(x, axes, count, &c->out[0].t)) : NPU_OK;
}
BINDING(squeeze)

static int expand_dims(struct npu_bind_call *c, bool run)
{
    TRY(head(c, 2, 2, 1, MOVABLE, COUNT(MOVABLE), 0, 3));
    int32_t axis = 0;
    bool known;
    TRY(npu_bind_i32(c, 1, &axis, &known));
    const struct npu_tensor *x = in_t(c, 0);
    if (!known || !c->in[0].has_rank)
        return NPU_OK;
    uint32_t ax = 0;
    TRY(axis_in(c, 1, axis, x->rank + 1, &ax));
    if (!shaped(c, 0))
        return NPU_OK;
    uint32_t dims[NPU_MAX_RANK];
    for (uint32_t d = 0, k = 0; d <= x->rank; d++)
        dims[d] = d == ax ? 1 : x->dims[k++];
    TRY(npu_bind_set_shape(c, 0, x->rank + 1, dims));
    return run ? ran(c, npu_op_expand_dims(x, axis, &c->out[0].t)) : NPU_OK;
}
BINDING(expand_dims)

/* -- slicing and repeating ---------------------------------------------------------- */

static int slice(struct npu_bind_call *c, bool run)
{
    TRY(head(c, 3, 3, 1, MOVABLE, COUNT(MOVABLE), 1, 4));
    const struct npu_tensor *x = in_t(c, 0);
    int64_t rank = c->in[0].has_rank ? (int64_t)x->rank : -1;
    const int32_t *begin, *size;
    uint32_t n;
    TRY(vector(c, 1, rank, &begin, &n));
    TRY(vector(c, 2, rank, &size, &n));
    if (!shaped(c, 0) || begin == NULL || size == NULL)
        return NPU_OK;
    uint32_t dims[NPU_MAX_RANK];
    for (uint32_t d = 0; d < x->rank; d++) {
        int64_t dim = x->dims[d], b = begin[d], len = size[d] == -1 ? dim - b : size[d];
        if (b < 0 || b >= dim || len < 1 || b + len > dim)
            return npu_bind_fail(c, NPU_E_BAD_SCALAR,
                                 "inputs 1 and 2 (begin %d, size %d) leave axis %u of size %u", (int)begin[d],
                                 (int)size[d], (unsigned)d, (unsigned)dim);
        dims[d] = (uint32_t)len;
    }
    TRY(npu_bind_set_shape(c, 0, x->rank, dims));
    return run ? ran(c, npu_op_slice(x, begin, size, &c->out[0].t)) : NPU_OK;
}
BINDING(slice)

static int tile(struct npu_bind_call *c, bool run)
{
    TRY(head(c, 2, 2, 1, MOVABLE, COUNT(MOVABLE), 1, 4));
    const struct npu_tensor *x = in_t(c, 0);
    const int32_t *multiples;
    uint32_t n;
    TRY(vector(c, 1, c->in[0].has_rank ? (int64_t)x->rank : -1, &multiples, &n));
    if (!shaped(c, 0) || multiples == NULL)
        return NPU_OK;
    uint32_t dims[NPU_MAX_RANK];
    for (uint32_t d = 0; d < x->rank; d++) {
        if (multiples[d] < 1 || (uint64_t)x->dims[d] * (uint64_t)multiples[d] > UINT32_MAX)
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (multiple %d of axis %u) must be >= 1 and fit",
                                 (int)multiples[d], (unsigned)d);
        dims[d] = x->dims[d] * (uint32_t)multiples[d];
    }
    TRY(npu_bind_set_shape(c, 0, x->rank, dims));
    return run ? ran(c, npu_op_tile(x, multiples, &c->out[0].t)) : NPU_OK;
}
BINDING(tile)

static int split(struct npu_bind_call *c, bool run)
{
    TRY(npu_bind_counts(c, 3, 3, c->output_count ? c->output_count : 1));
    TRY(tensor(c, 0, MOVABLE, COUNT(MOVABLE), 1, 4));
    for (uint32_t k = 0; k < c->output_count; k++)
        TRY(output_type(c, k, in_t(c, 0)->type, "input 0's type"));
    int32_t axis = 0, parts = 0;
    bool axis_known, parts_known;
    TRY(npu_bind_i32(c, 1, &axis, &axis_known));
    TRY(npu_bind_i32(c, 2, &parts, &parts_known));
    if (parts_known && (parts < 1 || (uint32_t)parts != c->output_count))
        return npu_bind_fail(c, NPU_E_BAD_OPERATION, "input 2 (num_splits %d) must be its output count, %u",
                             (int)parts, (unsigned)c->output_count);
    const struct npu_tensor *x = in_t(c, 0);
    if (!axis_known || !c->in[0].has_rank)
        return NPU_OK;
    uint32_t ax = 0;
    TRY(axis_in(c, 1, axis, x->rank, &ax));
    if (!shaped(c, 0))
        return NPU_OK;
    uint32_t n = c->output_count, dims[NPU_MAX_RANK];
    if (x->dims[ax] % n)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "axis %d of size %u does not split into %u", (int)axis,
                             (unsigned)x->dims[ax], (unsigned)n);
    dims_of(x, dims);
    dims[ax] /= n;
    for (uint32_t k = 0; k < n; k++)
        TRY(npu_bind_set_shape(c, k, x->rank, dims));
    if (!run)
        return NPU_OK;
    const struct npu_tensor **outs = malloc(n * sizeof *outs);
    if (outs == NULL)
        return npu_bind_fail(c, NPU_E_NO_MEMORY, "no memory for %u outputs", (unsigned)n);
    for (uint32_t k = 0; k < n; k++)
        outs[k] = &c->out[k].t;
    int rc = npu_op_split(x, axis, outs, n);
    free(outs);
    return ran(c, rc);
}
BINDING(split)

static int channel_shuffle(struct npu_bind_call *c, bool run)
{
    TRY(head(c, 3, 3, 1, FLOAT_Q8, COUNT(FLOAT_Q8), 1, 4));
    int32_t groups = 0, axis = 0;
    bool groups_known, axis_known;
    TRY(npu_bind_i32(c, 1, &groups, &groups_known));
    TRY(npu_bind_i32(c, 2, &axis, &axis_known));
    if (groups_known && groups < 1)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (groups %d) must be >= 1", (int)groups);
    const struct npu_tensor *x = in_t(c, 0);
    uint32_t ax = 0;
    if (axis_known && c->in[0].has_rank)
        TRY(axis_in(c, 2, axis, x->rank, &ax));
    if (!shaped(c, 0))
        return NPU_OK;
    if (groups_known && axis_known && x->dims[ax] % (uint32_t)groups)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "axis %d's %u channels do not split into %d groups", (int)axis,
                             (unsigned)x->dims[ax], (int)groups);
    uint32_t dims[NPU_MAX_RANK];
    TRY(npu_bind_set_shape(c, 0, dims_of(x, dims), dims));
    if (!run || empty_batch(c))
        return NPU_OK;
    return ran(c, npu_op_channel_shuffle(x, groups, axis, &c->out[0].t));
}
BINDING(channel_shuffle)

/* -- space and batch -------------------------------------------------------------------- */

/* The (height, width) block input i: two values >= 1, or NULL when unknown. */
static int block(struct npu_bind_call *c, uint32_t i, const int32_t **b)
{
    uint32_t n;
    TRY(vector(c, i, 2, b, &n));
    if (*b && (!shaped(c, i) || (*b)[0] < 1 || (*b)[1] < 1 || (*b)[0] > 65536 || (*b)[1] > 65536))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input %u (the block shape) must be two sizes in 1..65536",
                             (unsigned)i);
    return NPU_OK;
}

/* (n, h, w, c) of a 4-D tensor in its layout, and back. */
static void nhwc(const struct npu_tensor *t, bool nchw, uint32_t *v)
{
    v[0] = t->dims[0];
    v[1] = t->dims[nchw ? 2 : 1];
    v[2] = t->dims[nchw ? 3 : 2];
    v[3] = t->dims[nchw ? 1 : 3];
}

static int set_image(struct npu_bind_call *c, bool nchw, uint32_t n, uint32_t h, uint32_t w, uint32_t ch)
{
    uint32_t dims[4] = {n, nchw ? ch : h, nchw ? h : w, nchw ? w : ch};
    return npu_bind_set_shape(c, 0, 4, dims);
}

static int batch_to_space_nd(struct npu_bind_call *c, bool run)
{
    TRY(head(c, 2, 3, 1, FLOAT_Q8, COUNT(FLOAT_Q8), 4, 4));
    const int32_t *b;
    bool nchw, nchw_known;
    TRY(block(c, 1, &b));
    TRY(layout(c, 2, &nchw, &nchw_known));
    if (!shaped(c, 0) || b == NULL || !nchw_known)
        return NPU_OK;
    uint32_t v[4];
    nhwc(in_t(c, 0), nchw, v);
    uint32_t blocks = (uint32_t)b[0] * (uint32_t)b[1];
    if (v[0] % blocks)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 0's batch %u is not a multiple of the block's %u",
                             (unsigned)v[0], (unsigned)blocks);
    if ((uint64_t)v[1] * (uint64_t)b[0] > UINT32_MAX || (uint64_t)v[2] * (uint64_t)b[1] > UINT32_MAX)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the output would be too large");
    TRY(set_image(c, nchw, v[0] / blocks, v[1] * (uint32_t)b[0], v[2] * (uint32_t)b[1], v[3]));
    return run ? ran(c, npu_op_batch_to_space_nd(in_t(c, 0), b[0], b[1], nchw, &c->out[0].t)) : NPU_OK;
}
BINDING(batch_to_space_nd)

static int space_to_batch_nd(struct npu_bind_call *c, bool run)
{
    TRY(head(c, 3, 4, 1, FLOAT_Q8, COUNT(FLOAT_Q8), 4, 4));
    const int32_t *b;
    bool nchw, nchw_known;
    TRY(block(c, 1, &b));
    TRY(tensor(c, 2, INTS, 1, 2, 2));
    const struct npu_arg *p = &c->in[2];
    if (p->has_shape && (p->t.dims[0] != 2 || p->t.dims[1] != 2))
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 2 (paddings) must be [2, 2], not [%u, %u]",
                             (unsigned)p->t.dims[0], (unsigned)p->t.dims[1]);
    const int32_t *pad = p->has_shape ? p->t.data : NULL;
    for (int k = 0; pad && k < 4; k++)
        if (pad[k] < 0 || pad[k] > 65536)
            return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 2 (paddings) must be within 0..65536, not %d",
                                 (int)pad[k]);
    TRY(layout(c, 3, &nchw, &nchw_known));
    if (!shaped(c, 0) || b == NULL || pad == NULL || !nchw_known)
        return NPU_OK;
    uint32_t v[4];
    nhwc(in_t(c, 0), nchw, v);
    uint64_t h = (uint64_t)v[1] + (uint64_t)pad[0] + (uint64_t)pad[1];
    uint64_t w = (uint64_t)v[2] + (uint64_t)pad[2] + (uint64_t)pad[3];
    uint64_t n = (uint64_t)v[0] * (uint64_t)b[0] * (uint64_t)b[1];
    if (h % (uint64_t)b[0] || w % (uint64_t)b[1])
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the padded %llux%llu image is not a multiple of the %dx%d block",
                             (unsigned long long)h, (unsigned long long)w, (int)b[0], (int)b[1]);
    if (n > UINT32_MAX)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "the output would be too large");
    TRY(set_image(c, nchw, (uint32_t)n, (uint32_t)(h / (uint64_t)b[0]), (uint32_t)(w / (uint64_t)b[1]), v[3]));
    return run ? ran(c, npu_op_space_to_batch_nd(in_t(c, 0), b[0], b[1], pad, nchw, &c->out[0].t)) : NPU_OK;
}
BINDING(space_to_batch_nd)

static int resize_nearest_neighbor(struct npu_bind_call *c, bool run)
{
    TRY(head(c, 4, 4, 1, FLOAT_Q8, COUNT(FLOAT_Q8), 4, 4));
    bool by_size = c->in[1].t.type == NPU_OPERAND_INT32, known_w, known_h, nchw, nchw_known;
    int32_t width = 0, height = 0;
    float scale_w = 0.0f, scale_h = 0.0f;
    if (by_size) {
        TRY(npu_bind_i32(c, 1, &width, &known_w));
        TRY(npu_bind_i32(c, 2, &height, &known_h));
    } else {
        TRY(real(c, 1, &scale_w, &known_w));
        TRY(real(c, 2, &scale_h, &known_h));
    }
    TRY(npu_bind_bool(c, 3, &nchw, &nchw_known));
    if (!shaped(c, 0) || !known_w || !known_h || !nchw_known)
        return NPU_OK;
    uint32_t v[4];
    nhwc(in_t(c, 0), nchw, v);
    if (!by_size) {
        /* as the 1.2 reference: the size is the float product, truncated */
        float w = (float)v[2] * scale_w, h = (float)v[1] * scale_h;
        width = w >= 1.0f && w < 65536.0f ? (int32_t)w : 0;
        height = h >= 1.0f && h < 65536.0f ? (int32_t)h : 0;
    }
    if (width < 1 || height < 1 || width > 65536 || height > 65536)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "inputs 1 and 2 make a %dx%d output (each must be 1..65536)",
                             (int)width, (int)height);
    TRY(set_image(c, nchw, v[0], (uint32_t)height, (uint32_t)width, v[3]));
    if (!run || empty_batch(c))
        return NPU_OK;
    return ran(c, npu_op_resize_nearest_neighbor(in_t(c, 0), nchw, &c->out[0].t));
}
BINDING(resize_nearest_neighbor)

/* -- lookups ------------------------------------------------------------------------------- */

/* Output 0's shape: [lookups, values.dims[1:]]. */
static int rows_shape(struct npu_bind_call *c, uint32_t values)
{
    if (!shaped(c, 0) || !shaped(c, values))
        return NPU_OK;
    uint32_t dims[NPU_MAX_RANK];
    dims_of(in_t(c, values), dims);
    dims[0] = in_t(c, 0)->dims[0];
    return npu_bind_set_shape(c, 0, in_t(c, values)->rank, dims);
}

static int embedding_lookup(struct npu_bind_call *c, bool run)
{
    TRY(npu_bind_counts(c, 2, 2, 1));
    TRY(tensor(c, 0, INTS, 1, 1, 1));
    TRY(tensor(c, 1, LOOKED_UP, COUNT(LOOKED_UP), 2, 4));
    TRY(output_type(c, 0, in_t(c, 1)->type, "input 1's type"));
    if (shaped(c, 0) && shaped(c, 1) && in_t(c, 0)->data) {
        const int32_t *rows = in_t(c, 0)->data;
        for (uint32_t i = 0; i < in_t(c, 0)->dims[0]; i++)
            if (rows[i] < 0 || (uint32_t)rows[i] >= in_t(c, 1)->dims[0])
                return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 0 looks up row %d of %u", (int)rows[i],
                                     (unsigned)in_t(c, 1)->dims[0]);
    }
    TRY(rows_shape(c, 1));
    return run ? ran(c, npu_op_embedding_lookup(in_t(c, 0), in_t(c, 1), &c->out[0].t)) : NPU_OK;
}
BINDING(embedding_lookup)

static int hashtable_lookup(struct npu_bind_call *c, bool run)
{
    TRY(npu_bind_counts(c, 3, 3, 2));
    TRY(tensor(c, 0, INTS, 1, 1, 1));
    TRY(tensor(c, 1, INTS, 1, 1, 1));
    TRY(tensor(c, 2, LOOKED_UP, COUNT(LOOKED_UP), 1, 4));
    TRY(output_type(c, 0, in_t(c, 2)->type, "input 2's type"));
    TRY(output_type(c, 1, Q8, "the hits"));
    if (shaped(c, 1) && shaped(c, 2) && in_t(c, 1)->dims[0] != in_t(c, 2)->dims[0])
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 has %u keys for %u rows of input 2",
                             (unsigned)in_t(c, 1)->dims[0], (unsigned)in_t(c, 2)->dims[0]);
    TRY(rows_shape(c, 2));
    if (shaped(c, 0))
        TRY(npu_bind_set_shape(c, 1, 1, &in_t(c, 0)->dims[0]));
    return run ? ran(c, npu_op_hashtable_lookup(in_t(c, 0), in_t(c, 1), in_t(c, 2), &c->out[0].t, &c->out[1].t))
               : NPU_OK;
}
BINDING(hashtable_lookup)

static int topk_v2(struct npu_bind_call *c, bool run)
{
    TRY(head(c, 2, 2, 2, MOVABLE, COUNT(MOVABLE), 1, 4));
    TRY(output_type(c, 1, I32, "the indices"));
    int32_t k = 0;
    bool known;
    TRY(npu_bind_i32(c, 1, &k, &known));
    if (known && k < 1)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (k %d) must be >= 1", (int)k);
    const struct npu_tensor *x = in_t(c, 0);
    if (!known || !shaped(c, 0))
        return NPU_OK;
    uint32_t dims[NPU_MAX_RANK], rank = dims_of(x, dims);
    if ((uint32_t)k > dims[rank - 1])
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (k %d) exceeds the last axis' %u", (int)k,
                             (unsigned)dims[rank - 1]);
    dims[rank - 1] = (uint32_t)k;
    TRY(npu_bind_set_shape(c, 0, rank, dims));
    TRY(npu_bind_set_shape(c, 1, rank, dims));
    return run ? ran(c, npu_op_topk_v2(x, k, &c->out[0].t, &c->out[1].t)) : NPU_OK;
}
BINDING(topk_v2)

/* -- reductions ------------------------------------------------------------------------------ */

typedef int (*reduce_kernel)(const struct npu_tensor *, const int32_t *, uint32_t, bool, const struct npu_tensor *);

/* input, axes (TENSOR_INT32 [>= 1]), keep_dims (BOOL).  A reduction of every
 * axis without keep_dims is a [1] tensor, as MEAN's is in Android's reference
 * (its Reduce.cpp leaves such an output of rank 0, which a 1.2 model can only
 * declare as "rank unknown"; [1] fits both that and a declared [1]). */
static int reduction(struct npu_bind_call *c, bool run, const int32_t *types, uint32_t n, reduce_kernel kernel)
{
    TRY(head(c, 3, 3, 1, types, n, 1, 4));
    const int32_t *axes;
    uint32_t count;
    bool keep, keep_known;
    TRY(vector(c, 1, -1, &axes, &count));
    TRY(npu_bind_bool(c, 2, &keep, &keep_known));
    if (shaped(c, 1) && count == 0)
        return npu_bind_fail(c, NPU_E_BAD_SHAPE, "input 1 (axes) must name at least one axis");
    const struct npu_tensor *x = in_t(c, 0);
    if (!shaped(c, 0) || axes == NULL || !keep_known)
        return NPU_OK;
    bool reduced[NPU_MAX_RANK] = {false};
    for (uint32_t k = 0; k < count; k++) {
        uint32_t ax = 0;
        TRY(axis_in(c, 1, axes[k], x->rank, &ax));
        reduced[ax] = true;
    }
    uint32_t dims[NPU_MAX_RANK], rank = 0;
    for (uint32_t d = 0; d < x->rank; d++)
        if (!reduced[d] || keep)
            dims[rank++] = reduced[d] ? 1 : x->dims[d];
    if (rank == 0)
        dims[rank++] = 1;
    TRY(npu_bind_set_shape(c, 0, rank, dims));
    return run ? ran(c, kernel(x, axes, count, keep, &c->out[0].t)) : NPU_OK;
}

static int reduce_all(struct npu_bind_call *c, bool run) { return reduction(c, run, BOOLS, 1, npu_op_reduce_all); }
static int reduce_any(struct npu_bind_call *c, bool run) { return reduction(c, run, BOOLS, 1, npu_op_reduce_any); }
static int reduce_prod(struct npu_bind_call *c, bool run) { return reduction(c, run, FLOATS, 2, npu_op_reduce_prod); }
static int reduce_sum(struct npu_bind_call *c, bool run) { return reduction(c, run, FLOATS, 2, npu_op_reduce_sum); }
BINDING(reduce_all)
BINDING(reduce_any)
BINDING(reduce_prod)
BINDING(reduce_sum)

/* -- normalizations ---------------------------------------------------------------------------- */

/* head() for a float input 0, and output 0 of its shape. */
static int float_same_shape(struct npu_bind_call *c, uint32_t in_lo, uint32_t in_hi, uint32_t min_rank,
                            uint32_t max_rank)
{
    TRY(head(c, in_lo, in_hi, 1, FLOATS, COUNT(FLOATS), min_rank, max_rank));
    if (!shaped(c, 0))
        return NPU_OK;
    uint32_t dims[NPU_MAX_RANK];
    return npu_bind_set_shape(c, 0, dims_of(in_t(c, 0), dims), dims);
}

/* An axis input, checked against input 0's rank when both are known. */
static int axis_input(struct npu_bind_call *c, uint32_t i, int32_t *axis, bool *known)
{
    TRY(npu_bind_i32(c, i, axis, known));
    uint32_t ax = 0;
    if (*known && c->in[0].has_rank)
        TRY(axis_in(c, i, *axis, in_t(c, 0)->rank, &ax));
    return NPU_OK;
}

static int log_softmax(struct npu_bind_call *c, bool run)
{
    TRY(float_same_shape(c, 3, 3, 1, 4));
    float beta = 0.0f;
    int32_t axis = 0;
    bool known;
    TRY(real(c, 1, &beta, &known));
    if (known && !(beta > 0.0f && beta < 3.4e38f))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (beta %g) must be a finite value > 0", (double)beta);
    TRY(axis_input(c, 2, &axis, &known));
    return run ? ran(c, npu_op_log_softmax(in_t(c, 0), beta, axis, &c->out[0].t)) : NPU_OK;
}
BINDING(log_softmax)

static int local_response_normalization(struct npu_bind_call *c, bool run)
{
    TRY(float_same_shape(c, 5, 6, 1, 4));
    int32_t radius = 0, axis = -1;
    float bias = 0.0f, alpha = 0.0f, beta = 0.0f;
    bool known;
    TRY(npu_bind_i32(c, 1, &radius, &known));
    if (known && radius < 0)
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 1 (radius %d) must be >= 0", (int)radius);
    TRY(real(c, 2, &bias, &known));
    TRY(real(c, 3, &alpha, &known));
    TRY(real(c, 4, &beta, &known));
    if (c->input_count == 6 && !c->in[5].omitted)
        TRY(axis_input(c, 5, &axis, &known));
    return run ? ran(c, npu_op_local_response_normalization(in_t(c, 0), radius, bias, alpha, beta, axis,
                                                            &c->out[0].t))
               : NPU_OK;
}
BINDING(local_response_normalization)

static int instance_normalization(struct npu_bind_call *c, bool run)
{
    TRY(float_same_shape(c, 5, 5, 4, 4));
    float gamma = 0.0f, beta = 0.0f, epsilon = 0.0f;
    bool known, nchw = false;
    TRY(real(c, 1, &gamma, &known));
    TRY(real(c, 2, &beta, &known));
    TRY(real(c, 3, &epsilon, &known));
    /* Android 10 takes any epsilon (its float16 form of a tiny one is 0); a negative one
     * could make the variance's square root NaN, so that alone is refused. */
    if (known && !(epsilon >= 0.0f && epsilon < INFINITY))
        return npu_bind_fail(c, NPU_E_BAD_SCALAR, "input 3 (epsilon %g) must be a finite value >= 0", (double)epsilon);
    TRY(npu_bind_bool(c, 4, &nchw, &known));
    if (!run || empty_batch(c))
        return NPU_OK;
    return ran(c, npu_op_instance_normalization(in_t(c, 0), gamma, beta, epsilon, nchw, &c->out[0].t));
}
BINDING(instance_normalization)

/* -- costs ------------------------------------------------------------------------------------- */

static double elements(const struct npu_tensor *t)
{
    double n = 1.0;
    for (uint32_t d = 0; d < t->rank; d++)
        n *= t->dims[d];
    return n;
}

/* LRN: a window of 2 * radius + 1 squares summed per element, then a power. */
static void lrn_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    int32_t radius = 0;
    if (c->in[1].t.data)
        radius = *(const int32_t *)c->in[1].t.data;
    *flops = elements(in_t(c, 0)) * (2.0 * (2.0 * radius + 1.0) + 4.0);
    *bytes = npu_bind_io_bytes(c);
}

/* Normalizations over an axis or an image: a few passes of a few operations. */
static void normalization_cost(const struct npu_bind_call *c, double *flops, double *bytes)
{
    *flops = elements(in_t(c, 0)) * 6.0;
    *bytes = npu_bind_io_bytes(c);
}

#define DEF(OP, fn, cost_fn) \
    {.type = NPU_OP_##OP, .name = #OP, .prepare = fn##_prepare, .run = fn##_run, .cost = cost_fn}

const struct npu_op_def npu_bind_index[] = {
    DEF(EMBEDDING_LOOKUP, embedding_lookup, NULL),
    DEF(HASHTABLE_LOOKUP, hashtable_lookup, NULL),
    DEF(LOCAL_RESPONSE_NORMALIZATION, local_response_normalization, lrn_cost),
    DEF(BATCH_TO_SPACE_ND, batch_to_space_nd, NULL),
    DEF(SPACE_TO_BATCH_ND, space_to_batch_nd, NULL),
    DEF(SQUEEZE, squeeze, NULL),
    DEF(CHANNEL_SHUFFLE, channel_shuffle, NULL),
    DEF(EXPAND_DIMS, expand_dims, NULL),
    DEF(INSTANCE_NORMALIZATION, instance_normalization, normalization_cost),
    DEF(LOG_SOFTMAX, log_softmax, normalization_cost),
    DEF(REDUCE_ALL, reduce_all, NULL),
    DEF(REDUCE_ANY, reduce_any, NULL),
    DEF(REDUCE_PROD, reduce_prod, NULL),
    DEF(REDUCE_SUM, reduce_sum, NULL),
    DEF(SLICE, slice, NULL),
    DEF(SPLIT, split, NULL),
    DEF(TILE, tile, NULL),
    DEF(TOPK_V2, topk_v2, NULL),
    DEF(RESIZE_NEAREST_NEIGHBOR, resize_nearest_neighbor, NULL),
    {.type = -1},
};
