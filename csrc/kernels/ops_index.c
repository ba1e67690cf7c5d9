/*
 * Shapes, reductions, indexing and normalizations (npu/ops.h's index section).
 *
 * The value-moving operations (SQUEEZE, EXPAND_DIMS, SLICE, TILE, SPLIT,
 * CHANNEL_SHUFFLE, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND,
 * RESIZE_NEAREST_NEIGHBOR, EMBEDDING_LOOKUP, HASHTABLE_LOOKUP, TOPK_V2) copy
 * stored elements, as Android's reference does; a quantized output declared
 * with other parameters than its input gets the values requantized.  The
 * reductions and normalizations compute in double from the real values and
 * store in the output's type.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

/* -- shared pieces ------------------------------------------------------------ */

static int check_in_out(const struct npu_tensor *in, const struct npu_tensor *out)
{
    OPS_TRY(ops_check(in));
    OPS_TRY(ops_check(out));
    return out->type == in->type ? NPU_OK : NPU_E_BAD_OPERAND_TYPE;
}

static int movable(const struct npu_tensor *t)
{
    return ops_type_in(t, 4, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_INT32,
                       NPU_OPERAND_TENSOR_QUANT8_ASYMM);
}

static int float_or_q8(const struct npu_tensor *t)
{
    return ops_type_in(t, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_QUANT8_ASYMM);
}

static int floats(const struct npu_tensor *t)
{
    return ops_type_in(t, 2, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16);
}

static void move(const struct npu_tensor *dst, size_t di, const struct npu_tensor *src, size_t si, size_t count)
{
    size_t size = ops_element_size(src->type);
    memcpy((unsigned char *)dst->data + di * size, (const unsigned char *)src->data + si * size, count * size);
}

static bool dims_are(const struct npu_tensor *t, uint32_t rank, const size_t *dims)
{
    if (t->rank != rank)
        return false;
    for (uint32_t d = 0; d < rank; d++)
        if (t->dims[d] != dims[d])
            return false;
    return true;
}

/* The product of dims [from, to) of t. */
static size_t span(const struct npu_tensor *t, uint32_t from, uint32_t to)
{
    size_t n = 1;
    for (uint32_t d = from; d < to; d++)
        n *= t->dims[d];
    return n;
}

/* axis in [-rank, rank) made non-negative in *ax. */
static int axis_of(int32_t axis, uint32_t rank, uint32_t *ax)
{
    if (axis < -(int32_t)rank || axis >= (int32_t)rank)
        return NPU_E_BAD_SCALAR;
    *ax = (uint32_t)(axis < 0 ? axis + (int32_t)rank : axis);
    return NPU_OK;
}

/* Output element i at coordinates over out's dims reads input element
 * sum(coord[d] * step[d]) + base, where coord[d] is reduced modulo wrap[d]
 * when wrap[d] is not 0 (TILE). */
static void affine_copy(const struct npu_tensor *in, const struct npu_tensor *out, size_t base,
                        const size_t *step, const size_t *wrap)
{
    size_t n = npu_ops_element_count(out);
    for (size_t i = 0; i < n; i++) {
        size_t rest = i, src = base;
        for (int d = (int)out->rank - 1; d >= 0; d--) {
            size_t c = rest % out->dims[d];
            rest /= out->dims[d];
            src += (wrap && wrap[d] ? c % wrap[d] : c) * step[d];
        }
        move(out, i, in, src, 1);
    }
}

/* -- reshaping moves ---------------------------------------------------------- */

/* The stored values as they are (element counts equal), requantized if asked. */
static int moved_whole(const struct npu_tensor *input, const struct npu_tensor *output, uint32_t rank,
                       const size_t *dims)
{
    if (!dims_are(output, rank, dims))
        return NPU_E_BAD_SHAPE;
    move(output, 0, input, 0, npu_ops_element_count(input));
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

int npu_op_squeeze(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                   const struct npu_tensor *output)
{
    OPS_TRY(check_in_out(input, output));
    OPS_TRY(float_or_q8(input));
    if (axes == NULL && axis_count > 0)
        return NPU_E_INVALID_ARGUMENT;
    uint32_t rank = input->rank;
    if (rank > 4)
        return NPU_E_BAD_SHAPE;
    bool drop[NPU_MAX_RANK] = {false};
    for (uint32_t i = 0; i < axis_count; i++) {
        uint32_t ax = 0;
        OPS_TRY(axis_of(axes[i], rank, &ax));
        if (input->dims[ax] != 1)
            return NPU_E_BAD_SHAPE;
        drop[ax] = true;
    }
    size_t dims[NPU_MAX_RANK];
    uint32_t kept = 0;
    for (uint32_t d = 0; d < rank; d++)
        if (!(axis_count ? drop[d] : input->dims[d] == 1))
            dims[kept++] = input->dims[d];
    return moved_whole(input, output, kept, dims);
}

int npu_op_expand_dims(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output)
{
    OPS_TRY(check_in_out(input, output));
    OPS_TRY(movable(input));
    uint32_t rank = input->rank, ax = 0;
    if (rank >= NPU_MAX_RANK)
        return NPU_E_BAD_SHAPE;
    OPS_TRY(axis_of(axis, rank + 1, &ax));
    size_t dims[NPU_MAX_RANK];
    for (uint32_t d = 0, k = 0; d <= rank; d++)
        dims[d] = d == ax ? 1 : input->dims[k++];
    return moved_whole(input, output, rank + 1, dims);
}

/* -- slicing and repeating ------------------------------------------------------ */

int npu_op_slice(const struct npu_tensor *input, const int32_t *begin, const int32_t *size,
                 const struct npu_tensor *output)
{
    OPS_TRY(check_in_out(input, output));
    OPS_TRY(movable(input));
    if (begin == NULL || size == NULL)
        return NPU_E_INVALID_ARGUMENT;
    uint32_t rank = input->rank;
    size_t dims[NPU_MAX_RANK], step[NPU_MAX_RANK], base = 0;
    ops_strides(input, step);
    for (uint32_t d = 0; d < rank; d++) {
        int64_t dim = input->dims[d], b = begin[d];
        int64_t len = size[d] == -1 ? dim - b : size[d];
        if (b < 0 || b >= dim || len < 1 || b + len > dim)
            return NPU_E_BAD_SCALAR;
        dims[d] = (size_t)len;
        base += (size_t)b * step[d];
    }
    if (!dims_are(output, rank, dims))
        return NPU_E_BAD_SHAPE;
    affine_copy(input, output, base, step, NULL);
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

int npu_op_tile(const struct npu_tensor *input, const int32_t *multiples, const struct npu_tensor *output)
{
    OPS_TRY(check_in_out(input, output));
    OPS_TRY(movable(input));
    if (multiples == NULL)
        return NPU_E_INVALID_ARGUMENT;
    uint32_t rank = input->rank;
    size_t dims[NPU_MAX_RANK], step[NPU_MAX_RANK], wrap[NPU_MAX_RANK];
    ops_strides(input, step);
    for (uint32_t d = 0; d < rank; d++) {
        if (multiples[d] < 1 || (size_t)multiples[d] > OPS_MAX_ELEMENTS / input->dims[d])
            return NPU_E_BAD_SCALAR;
        dims[d] = input->dims[d] * (size_t)multiples[d];
        wrap[d] = input->dims[d];
    }
    if (!dims_are(output, rank, dims))
        return NPU_E_BAD_SHAPE;
    affine_copy(input, output, 0, step, wrap);
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

int npu_op_split(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *const *outputs,
                 uint32_t count)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(movable(input));
    if (outputs == NULL || count == 0)
        return NPU_E_INVALID_ARGUMENT;
    uint32_t rank = input->rank, ax = 0;
    OPS_TRY(axis_of(axis, rank, &ax));
    if (input->dims[ax] % count != 0)
        return NPU_E_BAD_SCALAR;
    size_t dims[NPU_MAX_RANK];
    for (uint32_t d = 0; d < rank; d++)
        dims[d] = d == ax ? input->dims[d] / count : input->dims[d];
    for (uint32_t k = 0; k < count; k++) {
        OPS_TRY(check_in_out(input, outputs[k]));
        if (!dims_are(outputs[k], rank, dims))
            return NPU_E_BAD_SHAPE;
    }
    size_t outer = span(input, 0, ax), part = dims[ax] * span(input, ax + 1, rank);
    for (size_t o = 0; o < outer; o++)
        for (uint32_t k = 0; k < count; k++)
            move(outputs[k], o * part, input, (o * count + k) * part, part);
    for (uint32_t k = 0; k < count; k++)
        ops_requantize_moved(outputs[k], input->scale, input->zero_point);
    return NPU_OK;
}

int npu_op_channel_shuffle(const struct npu_tensor *input, int32_t groups, int32_t axis,
                           const struct npu_tensor *output)
{
    OPS_TRY(check_in_out(input, output));
    OPS_TRY(float_or_q8(input));
    uint32_t rank = input->rank, ax = 0;
    if (rank > 4 || !ops_same_dims(input, output))
        return NPU_E_BAD_SHAPE;
    OPS_TRY(axis_of(axis, rank, &ax));
    size_t c = input->dims[ax];
    if (groups < 1 || c % (size_t)groups != 0)
        return NPU_E_BAD_SCALAR;
    size_t g = (size_t)groups, per = c / g, outer = span(input, 0, ax), inner = span(input, ax + 1, rank);
    /* output channel j = a * groups + k reads input channel k * per + a */
    for (size_t o = 0; o < outer; o++)
        for (size_t j = 0; j < c; j++)
            move(output, (o * c + j) * inner, input, (o * c + j % g * per + j / g) * inner, inner);
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

/* -- space and batch ------------------------------------------------------------- */

/* The stored zero of a moved tensor: 0, or the quantized input's zero point. */
static void zero_of(const struct npu_tensor *t, unsigned char zero[4])
{
    memset(zero, 0, 4);
    if (t->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM)
        zero[0] = (unsigned char)t->zero_point;
}

/* The batch/space shuffle of both operations: the wide image (more space,
 * fewer batches) padded by (top, left) and the deep one, whose batch
 * (i * bw + j) * wide_batches + n holds wide pixels (y * bh + i, x * bw + j). */
static int batch_space(const struct npu_tensor *input, int32_t bh, int32_t bw, const int32_t *paddings, bool nchw,
                       const struct npu_tensor *output, bool to_space)
{
    OPS_TRY(check_in_out(input, output));
    OPS_TRY(float_or_q8(input));
    if (input->rank != 4 || output->rank != 4)
        return NPU_E_BAD_SHAPE;
    if (bh < 1 || bw < 1 || bh > 65536 || bw > 65536)
        return NPU_E_BAD_SCALAR;
    long top = 0, bottom = 0, left = 0, right = 0;
    if (paddings) {
        for (int k = 0; k < 4; k++)
            if (paddings[k] < 0 || paddings[k] > 65536)
                return NPU_E_BAD_SCALAR;
        top = paddings[0], bottom = paddings[1], left = paddings[2], right = paddings[3];
    }
    struct ops_image in, out;
    ops_image(input, nchw, &in);
    ops_image(output, nchw, &out);
    const struct ops_image *deep = to_space ? &in : &out, *wide = to_space ? &out : &in;
    size_t bhs = (size_t)bh, bws = (size_t)bw;
    long padded_h = (long)wide->h + top + bottom, padded_w = (long)wide->w + left + right;
    if (padded_h % bh || padded_w % bw || deep->n % (bhs * bws) || wide->c != deep->c ||
        deep->n != wide->n * bhs * bws || (long)deep->h * bh != padded_h || (long)deep->w * bw != padded_w)
        return NPU_E_BAD_SHAPE;
    unsigned char zero[4];
    zero_of(input, zero);
    size_t size = ops_element_size(input->type);
    for (size_t b = 0; b < deep->n; b++) {
        size_t n = b % wide->n, i = b / wide->n / bws, j = b / wide->n % bws;
        for (size_t y = 0; y < deep->h; y++)
            for (size_t x = 0; x < deep->w; x++) {
                long wy = (long)(y * bhs + i) - top, wx = (long)(x * bws + j) - left;
                bool inside = wy >= 0 && wy < (long)wide->h && wx >= 0 && wx < (long)wide->w;
                for (size_t c = 0; c < deep->c; c++) {
                    size_t d = ops_at(deep, b, y, x, c);
                    if (!inside)  /* only the deep side, as output, sees padding */
                        memcpy((unsigned char *)output->data + d * size, zero, size);
                    else if (to_space)
                        move(output, ops_at(wide, n, (size_t)wy, (size_t)wx, c), input, d, 1);
                    else
                        move(output, d, input, ops_at(wide, n, (size_t)wy, (size_t)wx, c), 1);
                }
            }
    }
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

int npu_op_batch_to_space_nd(const struct npu_tensor *input, int32_t block_h, int32_t block_w, bool nchw,
                             const struct npu_tensor *output)
{
    return batch_space(input, block_h, block_w, NULL, nchw, output, true);
}

int npu_op_space_to_batch_nd(const struct npu_tensor *input, int32_t block_h, int32_t block_w,
                             const int32_t *paddings, bool nchw, const struct npu_tensor *output)
{
    if (paddings == NULL)
        return NPU_E_INVALID_ARGUMENT;
    return batch_space(input, block_h, block_w, paddings, nchw, output, false);
}

int npu_op_resize_nearest_neighbor(const struct npu_tensor *input, bool nchw, const struct npu_tensor *output)
{
    OPS_TRY(check_in_out(input, output));
    OPS_TRY(float_or_q8(input));
    struct ops_image in, out;
    OPS_TRY(ops_resize_images(input, output, nchw, &in, &out));
    /* as the 1.2 reference: source = min(floor(dest * (float)in / out), in - 1) */
    float sy = (float)in.h / (float)out.h, sx = (float)in.w / (float)out.w;
    for (size_t n = 0; n < out.n; n++)
        for (size_t y = 0; y < out.h; y++) {
            size_t iy = (size_t)floorf((float)y * sy);
            iy = iy < in.h ? iy : in.h - 1;
            for (size_t x = 0; x < out.w; x++) {
                size_t ix = (size_t)floorf((float)x * sx);
                ix = ix < in.w ? ix : in.w - 1;
                for (size_t c = 0; c < out.c; c++)
                    move(output, ops_at(&out, n, y, x, c), input, ops_at(&in, n, iy, ix, c), 1);
            }
        }
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

/* -- lookups ---------------------------------------------------------------------- */

static int lookup_values(const struct npu_tensor *values)
{
    return ops_type_in(values, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_INT32,
                       NPU_OPERAND_TENSOR_QUANT8_ASYMM);
}

/* output is [lookups, values.dims[1:]] */
static int check_rows_output(const struct npu_tensor *lookups, const struct npu_tensor *values,
                             const struct npu_tensor *output)
{
    OPS_TRY(check_in_out(values, output));
    if (lookups->type != NPU_OPERAND_TENSOR_INT32)
        return NPU_E_BAD_OPERAND_TYPE;
    if (lookups->rank != 1 || output->rank != values->rank || output->dims[0] != lookups->dims[0])
        return NPU_E_BAD_SHAPE;
    for (uint32_t d = 1; d < values->rank; d++)
        if (output->dims[d] != values->dims[d])
            return NPU_E_BAD_SHAPE;
    return NPU_OK;
}

int npu_op_embedding_lookup(const struct npu_tensor *lookups, const struct npu_tensor *values,
                            const struct npu_tensor *output)
{
    OPS_TRY(ops_check(lookups));
    OPS_TRY(ops_check(values));
    OPS_TRY(lookup_values(values));
    if (values->rank < 2)
        return NPU_E_BAD_SHAPE;
    OPS_TRY(check_rows_output(lookups, values, output));
    const int32_t *rows = lookups->data;
    size_t row = span(values, 1, values->rank);
    for (size_t i = 0; i < lookups->dims[0]; i++)
        if (rows[i] < 0 || (uint32_t)rows[i] >= values->dims[0])
            return NPU_E_BAD_SCALAR;
    for (size_t i = 0; i < lookups->dims[0]; i++)
        move(output, i * row, values, (size_t)rows[i] * row, row);
    ops_requantize_moved(output, values->scale, values->zero_point);
    return NPU_OK;
}

struct keyed_row {
    int32_t key;
    size_t row;
};

static int by_key_then_row(const void *a, const void *b)
{
    const struct keyed_row *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->row < y->row ? -1 : (x->row > y->row);
}

int npu_op_hashtable_lookup(const struct npu_tensor *lookups, const struct npu_tensor *keys,
                            const struct npu_tensor *values, const struct npu_tensor *output,
                            const struct npu_tensor *hits)
{
    OPS_TRY(ops_check(lookups));
    OPS_TRY(ops_check(keys));
    OPS_TRY(ops_check(values));
    OPS_TRY(ops_check(hits));
    OPS_TRY(lookup_values(values));
    if (keys->type != NPU_OPERAND_TENSOR_INT32 || hits->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM)
        return NPU_E_BAD_OPERAND_TYPE;
    if (keys->rank != 1 || keys->dims[0] != values->dims[0] || hits->rank != 1 ||
        hits->dims[0] != lookups->dims[0])
        return NPU_E_BAD_SHAPE;
    OPS_TRY(check_rows_output(lookups, values, output));
    size_t count = keys->dims[0], row = span(values, 1, values->rank);
    struct keyed_row *table = malloc(count * sizeof *table);
    if (table == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t r = 0; r < count; r++)
        table[r] = (struct keyed_row){((const int32_t *)keys->data)[r], r};
    qsort(table, count, sizeof *table, by_key_then_row);
    const int32_t *want = lookups->data;
    uint8_t *hit = hits->data;
    size_t size = ops_element_size(values->type);
    for (size_t i = 0; i < lookups->dims[0]; i++) {
        /* the last row holding the key (a later key overrides an earlier one) */
        size_t lo = 0, hi = count;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (table[mid].key <= want[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        hit[i] = lo > 0 && table[lo - 1].key == want[i];
        if (hit[i])
            move(output, i * row, values, table[lo - 1].row * row, row);
        else
            memset((unsigned char *)output->data + i * row * size, 0, row * size);
    }
    free(table);
    ops_requantize_moved(output, values->scale, values->zero_point);
    return NPU_OK;
}

int npu_op_topk_v2(const struct npu_tensor *input, int32_t k, const struct npu_tensor *values,
                   const struct npu_tensor *indices)
{
    OPS_TRY(check_in_out(input, values));
    OPS_TRY(ops_check(indices));
    OPS_TRY(movable(input));
    if (indices->type != NPU_OPERAND_TENSOR_INT32)
        return NPU_E_BAD_OPERAND_TYPE;
    uint32_t rank = input->rank;
    size_t last = input->dims[rank - 1];
    if (k < 1 || (size_t)k > last)
        return NPU_E_BAD_SCALAR;
    size_t dims[NPU_MAX_RANK];
    for (uint32_t d = 0; d < rank; d++)
        dims[d] = d + 1 == rank ? (size_t)k : input->dims[d];
    if (!dims_are(values, rank, dims) || !dims_are(indices, rank, dims))
        return NPU_E_BAD_SHAPE;
    size_t rows = span(input, 0, rank - 1), kk = (size_t)k;
    size_t *best = malloc(kk * sizeof *best);
    if (best == NULL)
        return NPU_E_NO_MEMORY;
    int32_t *idx = indices->data;
    for (size_t r = 0; r < rows; r++) {
        /* insertion into the k best so far: larger first, the earlier index on a tie */
        size_t have = 0, base = r * last;
        for (size_t i = 0; i < last; i++) {
            double v = ops_get(input, base + i);
            if (have == kk && !(v > ops_get(input, base + best[kk - 1])))
                continue;
            size_t at = have < kk ? have++ : kk - 1;
            while (at > 0 && v > ops_get(input, base + best[at - 1])) {
                best[at] = best[at - 1];
                at--;
            }
            best[at] = i;
        }
        for (size_t j = 0; j < kk; j++) {
            idx[r * kk + j] = (int32_t)best[j];
            move(values, r * kk + j, input, base + best[j], 1);
        }
    }
    free(best);
    ops_requantize_moved(values, input->scale, input->zero_point);
    return NPU_OK;
}

/* -- reductions ------------------------------------------------------------------- */

enum index_reduction { SUM, PROD, ALL, ANY };

static int reduce_axes(enum index_reduction kind, const struct npu_tensor *input, const int32_t *axes,
                       uint32_t axis_count, bool keep_dims, const struct npu_tensor *output)
{
    OPS_TRY(check_in_out(input, output));
    if (kind == ALL || kind == ANY) {
        if (input->type != NPU_OPERAND_TENSOR_BOOL8)
            return NPU_E_BAD_OPERAND_TYPE;
    } else {
        OPS_TRY(floats(input));
    }
    if ((axes == NULL && axis_count > 0) || axis_count == 0)
        return axes == NULL ? NPU_E_INVALID_ARGUMENT : NPU_E_BAD_SCALAR;
    uint32_t rank = input->rank;
    if (rank > 4)
        return NPU_E_BAD_SHAPE;
    bool reduced[NPU_MAX_RANK] = {false};
    for (uint32_t i = 0; i < axis_count; i++) {
        uint32_t ax = 0;
        OPS_TRY(axis_of(axes[i], rank, &ax));
        reduced[ax] = true;
    }
    size_t dims[NPU_MAX_RANK], into[NPU_MAX_RANK], s = 1;
    uint32_t kept = 0;
    for (uint32_t d = 0; d < rank; d++)
        if (!reduced[d] || keep_dims)
            dims[kept++] = reduced[d] ? 1 : input->dims[d];
    /* a reduction to a scalar is a [1] tensor */
    bool whole = kept == 0 && output->rank == 1 && output->dims[0] == 1;
    if (!whole && !dims_are(output, kept, dims))
        return NPU_E_BAD_SHAPE;
    for (int d = (int)rank - 1; d >= 0; d--) {
        into[d] = reduced[d] ? 0 : s;
        s *= reduced[d] ? 1 : input->dims[d];
    }
    size_t n_out = npu_ops_element_count(output), n_in = npu_ops_element_count(input);
    double *acc = malloc(n_out * sizeof *acc);
    if (acc == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t o = 0; o < n_out; o++)
        acc[o] = kind == SUM || kind == ANY ? 0.0 : 1.0;
    for (size_t i = 0; i < n_in; i++) {
        size_t rest = i, o = 0;
        for (int d = (int)rank - 1; d >= 0; d--) {
            o += rest % input->dims[d] * into[d];
            rest /= input->dims[d];
        }
        double v = ops_get(input, i);
        switch (kind) {
        case SUM: acc[o] += v; break;
        case PROD: acc[o] *= v; break;
        case ALL: acc[o] = acc[o] != 0.0 && v != 0.0; break;
        case ANY: acc[o] = acc[o] != 0.0 || v != 0.0; break;
        }
    }
    for (size_t o = 0; o < n_out; o++) {
        if (kind == ALL || kind == ANY)
            ((uint8_t *)output->data)[o] = acc[o] != 0.0;
        else
            ops_set(output, o, acc[o]);
    }
    free(acc);
    return NPU_OK;
}

#define REDUCTION(name, kind)                                                                          \
    int npu_op_##name(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count, bool keep_dims, \
                      const struct npu_tensor *output)                                                    \
    {                                                                                                     \
        return reduce_axes(kind, input, axes, axis_count, keep_dims, output);                             \
    }
REDUCTION(reduce_sum, SUM)
REDUCTION(reduce_prod, PROD)
REDUCTION(reduce_all, ALL)
REDUCTION(reduce_any, ANY)

/* -- normalizations ------------------------------------------------------------------ */

/* A float input and output of one shape, and the (outer, dim, inner) split at axis. */
static int along_axis(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output,
                      size_t *outer, size_t *dim, size_t *inner)
{
    OPS_TRY(check_in_out(input, output));
    OPS_TRY(floats(input));
    if (input->rank > 4 || !ops_same_dims(input, output))
        return NPU_E_BAD_SHAPE;
    uint32_t ax = 0;
    OPS_TRY(axis_of(axis, input->rank, &ax));
    *outer = span(input, 0, ax);
    *dim = input->dims[ax];
    *inner = span(input, ax + 1, input->rank);
    return NPU_OK;
}

int npu_op_log_softmax(const struct npu_tensor *input, float beta, int32_t axis, const struct npu_tensor *output)
{
    size_t outer, dim, inner;
    OPS_TRY(along_axis(input, axis, output, &outer, &dim, &inner));
    if (!isfinite(beta))
        return NPU_E_BAD_SCALAR;
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t at = o * dim * inner + i;
            double top = -INFINITY, sum = 0.0;
            for (size_t k = 0; k < dim; k++) {
                double z = beta * ops_get(input, at + k * inner);
                top = z > top ? z : top;
            }
            for (size_t k = 0; k < dim; k++)
                sum += exp(beta * ops_get(input, at + k * inner) - top);
            double log_sum = log(sum);
            for (size_t k = 0; k < dim; k++)
                ops_set(output, at + k * inner, beta * ops_get(input, at + k * inner) - top - log_sum);
        }
    return NPU_OK;
}

int npu_op_local_response_normalization(const struct npu_tensor *input, int32_t radius, float bias, float alpha,
                                        float beta, int32_t axis, const struct npu_tensor *output)
{
    size_t outer, dim, inner;
    OPS_TRY(along_axis(input, axis, output, &outer, &dim, &inner));
    if (radius < 0 || !isfinite(bias) || !isfinite(alpha) || !isfinite(beta))
        return NPU_E_BAD_SCALAR;
    size_t r = (size_t)radius;
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t at = o * dim * inner + i;
            for (size_t k = 0; k < dim; k++) {
                size_t lo = k > r ? k - r : 0, hi = dim - k > r ? k + r + 1 : dim;
                double sq = 0.0;
                for (size_t j = lo; j < hi; j++) {
                    double v = ops_get(input, at + j * inner);
                    sq += v * v;
                }
                ops_set(output, at + k * inner, ops_get(input, at + k * inner) / pow(bias + alpha * sq, beta));
            }
        }
    return NPU_OK;
}

int npu_op_instance_normalization(const struct npu_tensor *input, float gamma, float beta, float epsilon,
                                  bool nchw, const struct npu_tensor *output)
{
    OPS_TRY(check_in_out(input, output));
    OPS_TRY(floats(input));
    if (input->rank != 4 || !ops_same_dims(input, output))
        return NPU_E_BAD_SHAPE;
    if (!isfinite(gamma) || !isfinite(beta) || !(epsilon >= 0.0f) || !isfinite(epsilon))
        return NPU_E_BAD_SCALAR;
    struct ops_image img;
    ops_image(input, nchw, &img);
    double count = (double)(img.h * img.w);
    for (size_t n = 0; n < img.n; n++)
        for (size_t c = 0; c < img.c; c++) {
            double sum = 0.0, sq = 0.0;
            for (size_t y = 0; y < img.h; y++)
                for (size_t x = 0; x < img.w; x++)
                    sum += ops_get(input, ops_at(&img, n, y, x, c));
            double mean = sum / count;
            for (size_t y = 0; y < img.h; y++)
                for (size_t x = 0; x < img.w; x++) {
                    double d = ops_get(input, ops_at(&img, n, y, x, c)) - mean;
                    sq += d * d;
                }
            double scale = gamma / sqrt(sq / count + epsilon);
            for (size_t y = 0; y < img.h; y++)
                for (size_t x = 0; x < img.w; x++) {
                    size_t at = ops_at(&img, n, y, x, c);
                    ops_set(output, at, (ops_get(input, at) - mean) * scale + beta);
                }
        }
    return NPU_OK;
}
