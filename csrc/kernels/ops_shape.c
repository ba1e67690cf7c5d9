/*
 * Operations that move values: RESHAPE, CONCATENATION, PAD, PAD_V2,
 * TRANSPOSE, STRIDED_SLICE, DEPTH_TO_SPACE, SPACE_TO_DEPTH; and the two that
 * mix neighbours, MEAN and RESIZE_BILINEAR.  Moving keeps a quantized value's
 * stored integer; an output declared with another scale or zero point gets the
 * values requantized (CONCATENATION requantizes each input to the output's).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

static int check_pair(const struct npu_tensor *in, const struct npu_tensor *out)
{
    OPS_TRY(ops_check(in));
    OPS_TRY(ops_check(out));
    OPS_TRY(ops_type_in(in, 3, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    return out->type == in->type ? NPU_OK : NPU_E_BAD_OPERAND_TYPE;
}

static void copy_element(const struct npu_tensor *dst, size_t di, const struct npu_tensor *src, size_t si)
{
    size_t size = ops_element_size(src->type);
    memcpy((unsigned char *)dst->data + di * size, (const unsigned char *)src->data + si * size, size);
}

/* Output element i, at coordinates c over counts (rank of them, row-major), is
 * input element base + sum(c[d] * steps[d]): TRANSPOSE and STRIDED_SLICE. */
static void gather(const struct npu_tensor *input, const struct npu_tensor *output, uint32_t rank,
                   const size_t *counts, long base, const long *steps)
{
    size_t n = npu_ops_element_count(output);
    for (size_t i = 0; i < n; i++) {
        size_t rest = i;
        long src = base;
        for (int d = (int)rank - 1; d >= 0; d--) {
            src += (long)(rest % counts[d]) * steps[d];
            rest /= counts[d];
        }
        copy_element(output, i, input, (size_t)src);
    }
    ops_requantize_moved(output, input->scale, input->zero_point);
}

int npu_op_reshape(const struct npu_tensor *input, const struct npu_tensor *output)
{
    OPS_TRY(check_pair(input, output));
    if (npu_ops_element_count(input) != npu_ops_element_count(output))
        return NPU_E_BAD_SHAPE;
    memcpy(output->data, input->data, npu_ops_byte_size(input));
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

int npu_op_concatenation(const struct npu_tensor *const *inputs, uint32_t count, int32_t axis,
                         const struct npu_tensor *output)
{
    if (inputs == NULL || count == 0)
        return NPU_E_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < count; i++)
        OPS_TRY(check_pair(inputs[i], output));
    uint32_t rank = output->rank;
    if (rank == 0 || rank > 4)
        return NPU_E_BAD_SHAPE;
    if (axis < -(int32_t)rank || axis >= (int32_t)rank)
        return NPU_E_BAD_SCALAR;
    uint32_t ax = (uint32_t)(axis < 0 ? axis + (int32_t)rank : axis);
    size_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (inputs[i]->rank != rank)
            return NPU_E_BAD_SHAPE;
        for (uint32_t d = 0; d < rank; d++)
            if (d != ax && inputs[i]->dims[d] != output->dims[d])
                return NPU_E_BAD_SHAPE;
        total += inputs[i]->dims[ax];
    }
    if (total != output->dims[ax])
        return NPU_E_BAD_SHAPE;
    size_t outer = 1, inner = 1;
    for (uint32_t d = 0; d < ax; d++)
        outer *= output->dims[d];
    for (uint32_t d = ax + 1; d < rank; d++)
        inner *= output->dims[d];
    bool quant = output->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM;
    size_t at = 0;
    for (size_t o = 0; o < outer; o++)
        for (uint32_t i = 0; i < count; i++) {
            const struct npu_tensor *in = inputs[i];
            size_t block = in->dims[ax] * inner, from = o * block;
            if (quant)
                for (size_t k = 0; k < block; k++)
                    ops_set(output, at + k, ops_get(in, from + k));
            else
                memcpy((unsigned char *)output->data + at * ops_element_size(in->type),
                       (const unsigned char *)in->data + from * ops_element_size(in->type),
                       block * ops_element_size(in->type));
            at += block;
        }
    return NPU_OK;
}

/* PAD and PAD_V2: fill holds one stored element of the input's type. */
static int pad(const struct npu_tensor *input, const int32_t *paddings, const void *fill,
               const struct npu_tensor *output)
{
    OPS_TRY(check_pair(input, output));
    if (paddings == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (input->rank == 0 || input->rank > 4 || output->rank != input->rank)
        return NPU_E_BAD_SHAPE;
    for (uint32_t d = 0; d < input->rank; d++) {
        if (paddings[2 * d] < 0 || paddings[2 * d + 1] < 0)
            return NPU_E_BAD_SCALAR;
        if ((int64_t)output->dims[d] != (int64_t)input->dims[d] + paddings[2 * d] + paddings[2 * d + 1])
            return NPU_E_BAD_SHAPE;
    }
    /* Row by row over the innermost dimension: a row of the output is the fill, or the
     * fill before, one memcpy of the input's row, the fill after. */
    uint32_t last = output->rank - 1;
    size_t size = ops_element_size(input->type);
    size_t in_strides[NPU_MAX_RANK];
    ops_strides(input, in_strides);
    size_t out_row = output->dims[last], in_row = input->dims[last];
    size_t before_row = (size_t)paddings[2 * last], after_row = out_row - before_row - in_row;
    size_t rows = out_row ? npu_ops_element_count(output) / out_row : 0;
    unsigned char *out = output->data;
    const unsigned char *in = input->data;
    for (size_t r = 0; r < rows; r++, out += out_row * size) {
        size_t rest = r, src = 0;
        bool inside = true;
        for (int d = (int)last - 1; d >= 0; d--) {
            size_t coord = rest % output->dims[d];
            rest /= output->dims[d];
            size_t before = (size_t)paddings[2 * d];
            if (coord < before || coord >= before + input->dims[d])
                inside = false;
            else
                src += (coord - before) * in_strides[d];
        }
        size_t k = 0;
        if (inside) {
            for (; k < before_row; k++)
                memcpy(out + k * size, fill, size);
            if (in_row)  /* a zero-sized input may have no data pointer at all */
                memcpy(out + k * size, in + src * size, in_row * size);
            k += in_row;
            for (size_t j = 0; j < after_row; j++, k++)
                memcpy(out + k * size, fill, size);
        } else {
            for (; k < out_row; k++)
                memcpy(out + k * size, fill, size);
        }
    }
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

int npu_op_pad(const struct npu_tensor *input, const int32_t *paddings, const struct npu_tensor *output)
{
    OPS_TRY(ops_check(input));
    float zero_f = 0.0f;
    uint16_t zero_h = 0;
    uint8_t zero_q = (uint8_t)input->zero_point;
    const void *fill = input->type == NPU_OPERAND_TENSOR_FLOAT32 ? (const void *)&zero_f
                       : input->type == NPU_OPERAND_TENSOR_FLOAT16 ? (const void *)&zero_h : (const void *)&zero_q;
    return pad(input, paddings, fill, output);
}

int npu_op_pad_v2(const struct npu_tensor *input, const int32_t *paddings, double pad_value,
                  const struct npu_tensor *output)
{
    OPS_TRY(ops_check(input));
    float value_f = (float)pad_value;
    uint16_t value_h = npu_float_to_half(value_f);
    uint8_t value_q = 0;
    if (input->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM) {
        if (!(pad_value >= 0.0 && pad_value <= 255.0) || pad_value != floor(pad_value))
            return NPU_E_BAD_SCALAR;
        value_q = (uint8_t)pad_value;
    }
    const void *fill = input->type == NPU_OPERAND_TENSOR_FLOAT32 ? (const void *)&value_f
                       : input->type == NPU_OPERAND_TENSOR_FLOAT16 ? (const void *)&value_h : (const void *)&value_q;
    return pad(input, paddings, fill, output);
}

/* ARGMAX and ARGMIN: the first index of the extreme along axis, as TENSOR_INT32
 * (stored values compare as the real ones: a scale is positive). */
static int arg_extreme(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output, bool max)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_type_in(input, 4, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_INT32,
                        NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    if (output->type != NPU_OPERAND_TENSOR_INT32)
        return NPU_E_BAD_OPERAND_TYPE;
    uint32_t rank = input->rank;
    if (axis < -(int32_t)rank || axis >= (int32_t)rank)
        return NPU_E_BAD_SCALAR;
    uint32_t ax = (uint32_t)(axis < 0 ? axis + (int32_t)rank : axis);
    bool shape_ok = output->rank == rank - 1 || (rank == 1 && output->rank == 1 && output->dims[0] == 1);
    for (uint32_t d = 0, o = 0; shape_ok && d < rank && output->rank == rank - 1; d++)
        if (d != ax && output->dims[o++] != input->dims[d])
            shape_ok = false;
    if (!shape_ok)
        return NPU_E_BAD_SHAPE;
    size_t outer = 1, inner = 1, dim = input->dims[ax];
    for (uint32_t d = 0; d < ax; d++)
        outer *= input->dims[d];
    for (uint32_t d = ax + 1; d < rank; d++)
        inner *= input->dims[d];
    int32_t *dst = output->data;
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t best = 0;
            double best_v = ops_get(input, o * dim * inner + i);
            for (size_t k = 1; k < dim; k++) {
                double v = ops_get(input, (o * dim + k) * inner + i);
                if (max ? v > best_v : v < best_v) {
                    best = k;
                    best_v = v;
                }
            }
            dst[o * inner + i] = (int32_t)best;
        }
    return NPU_OK;
}

enum reduction { REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN };

/* MEAN, REDUCE_MAX, REDUCE_MIN over real values (a quantized maximum is one of
 * the stored values: it comes back exactly when the output's parameters are
 * the input's). */
static int reduce(enum reduction kind, const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                  bool keep_dims, const struct npu_tensor *output)
{
    OPS_TRY(check_pair(input, output));
    if (axes == NULL && axis_count > 0)
        return NPU_E_INVALID_ARGUMENT;
    if (input->rank == 0 || input->rank > 4)
        return NPU_E_BAD_SHAPE;
    bool reduced[NPU_MAX_RANK] = {false};
    for (uint32_t i = 0; i < axis_count; i++) {
        if (axes[i] < -(int32_t)input->rank || axes[i] >= (int32_t)input->rank)
            return NPU_E_BAD_SCALAR;
        reduced[axes[i] < 0 ? axes[i] + (int32_t)input->rank : axes[i]] = true;
    }
    /* the output's shape, and each input dimension's stride into it */
    size_t out_stride[NPU_MAX_RANK], kept = 0, count = 1;
    uint32_t expect[NPU_MAX_RANK];
    for (uint32_t d = 0; d < input->rank; d++) {
        if (reduced[d]) {
            count *= input->dims[d];
            if (keep_dims)
                expect[kept++] = 1;
        } else {
            expect[kept++] = input->dims[d];
        }
    }
    bool scalar_ok = kept == 0 && (output->rank == 0 || (output->rank == 1 && output->dims[0] == 1));
    if (!scalar_ok) {
        if (output->rank != kept)
            return NPU_E_BAD_SHAPE;
        for (uint32_t d = 0; d < kept; d++)
            if (output->dims[d] != expect[d])
                return NPU_E_BAD_SHAPE;
    }
    size_t s = 1;
    for (int d = (int)input->rank - 1; d >= 0; d--) {
        out_stride[d] = reduced[d] ? 0 : s;
        if (!reduced[d])
            s *= input->dims[d];
    }
    size_t n_out = npu_ops_element_count(output), n_in = npu_ops_element_count(input);
    double *sums = calloc(n_out, sizeof *sums);
    if (sums == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t o = 0; o < n_out && kind != REDUCE_MEAN; o++)
        sums[o] = kind == REDUCE_MAX ? -INFINITY : INFINITY;
    /* the input in order, its index (idx) and output element (o) stepped as an odometer */
    const float *f32 = input->type == NPU_OPERAND_TENSOR_FLOAT32 ? input->data : NULL;
    size_t idx[NPU_MAX_RANK] = {0}, o = 0;
    for (size_t i = 0; i < n_in; i++) {
        double v = f32 ? f32[i] : ops_get(input, i);
        if (kind == REDUCE_MEAN)
            sums[o] += v;
        else if (kind == REDUCE_MAX ? v > sums[o] : v < sums[o])
            sums[o] = v;
        for (int d = (int)input->rank - 1; d >= 0; d--) {
            o += out_stride[d];
            if (++idx[d] < input->dims[d])
                break;
            o -= out_stride[d] * input->dims[d];
            idx[d] = 0;
        }
    }
    for (size_t o = 0; o < n_out; o++)
        ops_set(output, o, kind == REDUCE_MEAN ? sums[o] / (double)count : sums[o]);
    free(sums);
    return NPU_OK;
}

int npu_op_mean(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count, bool keep_dims,
                const struct npu_tensor *output)
{
    return reduce(REDUCE_MEAN, input, axes, axis_count, keep_dims, output);
}

int npu_op_reduce_max(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count, bool keep_dims,
                      const struct npu_tensor *output)
{
    return reduce(REDUCE_MAX, input, axes, axis_count, keep_dims, output);
}

int npu_op_reduce_min(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count, bool keep_dims,
                      const struct npu_tensor *output)
{
    return reduce(REDUCE_MIN, input, axes, axis_count, keep_dims, output);
}

int npu_op_argmax(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output)
{
    return arg_extreme(input, axis, output, true);
}

int npu_op_argmin(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output)
{
    return arg_extreme(input, axis, output, false);
}

int npu_op_gather(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *indices,
                  const struct npu_tensor *output)
{
    OPS_TRY(ops_check(input));
    OPS_TRY(ops_check(indices));
    OPS_TRY(ops_check(output));
    OPS_TRY(ops_type_in(input, 4, NPU_OPERAND_TENSOR_FLOAT32, NPU_OPERAND_TENSOR_FLOAT16, NPU_OPERAND_TENSOR_INT32,
                        NPU_OPERAND_TENSOR_QUANT8_ASYMM));
    if (indices->type != NPU_OPERAND_TENSOR_INT32 || output->type != input->type)
        return NPU_E_BAD_OPERAND_TYPE;
    uint32_t rank = input->rank;
    if (axis < -(int32_t)rank || axis >= (int32_t)rank)
        return NPU_E_BAD_SCALAR;
    uint32_t ax = (uint32_t)(axis < 0 ? axis + (int32_t)rank : axis);
    /* output: input's dims before axis, the indices' dims, input's dims after */
    if (output->rank != rank - 1 + indices->rank)
        return NPU_E_BAD_SHAPE;
    for (uint32_t d = 0, o = 0; d < rank; d++) {
        if (d == ax) {
            for (uint32_t i = 0; i < indices->rank; i++, o++)
                if (output->dims[o] != indices->dims[i])
                    return NPU_E_BAD_SHAPE;
        } else if (output->dims[o++] != input->dims[d]) {
            return NPU_E_BAD_SHAPE;
        }
    }
    const int32_t *idx = indices->data;
    size_t count = npu_ops_element_count(indices), outer = 1, inner = 1, dim = input->dims[ax];
    for (size_t i = 0; i < count; i++)
        if (idx[i] < 0 || (size_t)idx[i] >= dim)
            return NPU_E_BAD_SCALAR;
    for (uint32_t d = 0; d < ax; d++)
        outer *= input->dims[d];
    for (uint32_t d = ax + 1; d < rank; d++)
        inner *= input->dims[d];
    size_t size = ops_element_size(input->type) * inner;
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < count; i++)
            memcpy((unsigned char *)output->data + (o * count + i) * size,
                   (const unsigned char *)input->data + (o * dim + (size_t)idx[i]) * size, size);
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

int npu_op_transpose(const struct npu_tensor *input, const int32_t *perm, const struct npu_tensor *output)
{
    OPS_TRY(check_pair(input, output));
    uint32_t rank = input->rank;
    if (rank > 4 || output->rank != rank)
        return NPU_E_BAD_SHAPE;
    uint32_t p[NPU_MAX_RANK];
    bool seen[NPU_MAX_RANK] = {false};
    for (uint32_t d = 0; d < rank; d++) {
        int32_t v = perm ? perm[d] : (int32_t)(rank - 1 - d);
        if (v < 0 || v >= (int32_t)rank || seen[v])
            return NPU_E_BAD_SCALAR;
        seen[v] = true;
        p[d] = (uint32_t)v;
        if (output->dims[d] != input->dims[v])
            return NPU_E_BAD_SHAPE;
    }
    size_t in_strides[NPU_MAX_RANK], counts[NPU_MAX_RANK];
    long steps[NPU_MAX_RANK];
    ops_strides(input, in_strides);
    for (uint32_t d = 0; d < rank; d++) {
        counts[d] = output->dims[d];
        steps[d] = (long)in_strides[p[d]];
    }
    gather(input, output, rank, counts, 0, steps);
    return NPU_OK;
}

/* TFLite's index clamping for a strided slice bound. */
static int64_t clamp_index(int64_t index, int64_t dim, bool positive_stride)
{
    if (positive_stride) {
        if (index >= dim)
            return dim;
        if (index < -dim)
            index = -dim;
        return index < 0 ? index + dim : index;
    }
    if (index < -dim)
        return -1;
    if (index > dim - 1)
        index = dim - 1;
    return index < 0 ? index + dim : index;
}

int64_t ops_slice_axis(int64_t dim, int64_t begin, int64_t end, int64_t stride, bool begin_masked,
                       bool end_masked, int64_t *first)
{
    bool forward = stride > 0;
    int64_t b = begin_masked ? (forward ? 0 : dim - 1) : clamp_index(begin, dim, forward);
    int64_t e = end_masked ? (forward ? dim : -1) : clamp_index(end, dim, forward);
    *first = b;
    if (forward)
        return e > b ? (e - b + stride - 1) / stride : 0;
    return b > e ? (b - e + (-stride) - 1) / (-stride) : 0;
}

int npu_op_strided_slice(const struct npu_tensor *input, const int32_t *begin, const int32_t *end,
                         const int32_t *strides, int32_t begin_mask, int32_t end_mask,
                         int32_t shrink_axis_mask, const struct npu_tensor *output)
{
    OPS_TRY(check_pair(input, output));
    if (begin == NULL || end == NULL || strides == NULL)
        return NPU_E_INVALID_ARGUMENT;
    uint32_t rank = input->rank;
    if (rank == 0 || rank > 4)
        return NPU_E_BAD_SHAPE;
    long first[NPU_MAX_RANK], step[NPU_MAX_RANK];
    size_t counts[NPU_MAX_RANK];
    uint32_t kept = 0;
    for (uint32_t d = 0; d < rank; d++) {
        long dim = input->dims[d], s = strides[d];
        if (s == 0)
            return NPU_E_BAD_SCALAR;
        int64_t b;
        long n = (long)ops_slice_axis(dim, begin[d], end[d], s, begin_mask >> d & 1, end_mask >> d & 1, &b);
        first[d] = (long)b;
        step[d] = s;
        counts[d] = (size_t)n;
        if (shrink_axis_mask >> d & 1) {
            if (n != 1)
                return NPU_E_BAD_SHAPE;
        } else {
            if (n == 0 || kept >= output->rank || output->dims[kept] != (uint32_t)n)
                return NPU_E_BAD_SHAPE;
            kept++;
        }
    }
    if (kept != output->rank && !(kept == 0 && output->rank == 1 && output->dims[0] == 1))
        return NPU_E_BAD_SHAPE;
    size_t in_strides[NPU_MAX_RANK];
    long base = 0;
    ops_strides(input, in_strides);
    for (uint32_t d = 0; d < rank; d++) {
        base += first[d] * (long)in_strides[d];
        step[d] *= (long)in_strides[d];
    }
    gather(input, output, rank, counts, base, step);
    return NPU_OK;
}

int npu_op_resize_bilinear(const struct npu_tensor *input, bool nchw, const struct npu_tensor *output)
{
    OPS_TRY(check_pair(input, output));
    struct ops_image in, out;
    OPS_TRY(ops_resize_images(input, output, nchw, &in, &out));
    double sy = (double)in.h / (double)out.h, sx = (double)in.w / (double)out.w;
    for (size_t n = 0; n < out.n; n++)
        for (size_t y = 0; y < out.h; y++) {
            double py = (double)y * sy;
            size_t y0 = (size_t)floor(py), y1 = y0 + 1 < in.h ? y0 + 1 : in.h - 1;
            double dy = py - (double)y0;
            for (size_t x = 0; x < out.w; x++) {
                double px = (double)x * sx;
                size_t x0 = (size_t)floor(px), x1 = x0 + 1 < in.w ? x0 + 1 : in.w - 1;
                double dx = px - (double)x0;
                for (size_t c = 0; c < out.c; c++) {
                    double top = ops_get(input, ops_at(&in, n, y0, x0, c)) * (1 - dx) +
                                 ops_get(input, ops_at(&in, n, y0, x1, c)) * dx;
                    double bottom = ops_get(input, ops_at(&in, n, y1, x0, c)) * (1 - dx) +
                                    ops_get(input, ops_at(&in, n, y1, x1, c)) * dx;
                    ops_set(output, ops_at(&out, n, y, x, c), top * (1 - dy) + bottom * dy);
                }
            }
        }
    return NPU_OK;
}

/* DEPTH_TO_SPACE (to_space) and SPACE_TO_DEPTH: element (n, y, x, c) of the
 * deep tensor is element (n, y*b + c/(b*C) , x*b + c/C%b, c%C) of the wide one,
 * C the wide tensor's depth. */
static int block_move(const struct npu_tensor *input, int32_t block, bool nchw, const struct npu_tensor *output,
                      bool to_space)
{
    OPS_TRY(check_pair(input, output));
    if (input->rank != 4 || output->rank != 4)
        return NPU_E_BAD_SHAPE;
    if (block < 1)
        return NPU_E_BAD_SCALAR;
    struct ops_image in, out;
    ops_image(input, nchw, &in);
    ops_image(output, nchw, &out);
    size_t b = (size_t)block;
    const struct ops_image *deep = to_space ? &in : &out, *wide = to_space ? &out : &in;
    if (deep->c % (b * b) != 0 || wide->n != deep->n || wide->h != deep->h * b || wide->w != deep->w * b ||
        wide->c * b * b != deep->c)
        return NPU_E_BAD_SHAPE;
    size_t depth = wide->c;
    for (size_t n = 0; n < deep->n; n++)
        for (size_t y = 0; y < deep->h; y++)
            for (size_t x = 0; x < deep->w; x++)
                for (size_t c = 0; c < deep->c; c++) {
                    size_t d = ops_at(deep, n, y, x, c);
                    size_t w = ops_at(wide, n, y * b + c / (b * depth), x * b + c / depth % b, c % depth);
                    if (to_space)
                        copy_element(output, w, input, d);
                    else
                        copy_element(output, d, input, w);
                }
    ops_requantize_moved(output, input->scale, input->zero_point);
    return NPU_OK;
}

int npu_op_depth_to_space(const struct npu_tensor *input, int32_t block, bool nchw, const struct npu_tensor *output)
{
    return block_move(input, block, nchw, output, true);
}

int npu_op_space_to_depth(const struct npu_tensor *input, int32_t block, bool nchw, const struct npu_tensor *output)
{
    return block_move(input, block, nchw, output, false);
}
