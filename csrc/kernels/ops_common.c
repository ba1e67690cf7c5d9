/*
 * The operation library's shared checks and conversions: descriptors, fused
 * activations, real values of any tensor type, float16 scratch, geometry.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

size_t ops_element_size(int32_t type)
{
    switch (type) {
    case NPU_OPERAND_FLOAT32: case NPU_OPERAND_INT32: case NPU_OPERAND_UINT32:
    case NPU_OPERAND_TENSOR_FLOAT32: case NPU_OPERAND_TENSOR_INT32:
        return 4;
    case NPU_OPERAND_TENSOR_QUANT16_SYMM: case NPU_OPERAND_TENSOR_FLOAT16: case NPU_OPERAND_FLOAT16:
    case NPU_OPERAND_TENSOR_QUANT16_ASYMM:
        return 2;
    case NPU_OPERAND_TENSOR_QUANT8_ASYMM: case NPU_OPERAND_BOOL: case NPU_OPERAND_TENSOR_BOOL8:
    case NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL: case NPU_OPERAND_TENSOR_QUANT8_SYMM:
        return 1;
    default:
        return 0;
    }
}

static bool is_tensor_type(int32_t type)
{
    return ops_element_size(type) != 0 && type != NPU_OPERAND_FLOAT32 && type != NPU_OPERAND_INT32 &&
           type != NPU_OPERAND_UINT32 && type != NPU_OPERAND_BOOL && type != NPU_OPERAND_FLOAT16;
}

size_t npu_ops_element_count(const struct npu_tensor *t)
{
    if (t == NULL || t->rank > NPU_MAX_RANK)
        return 0;
    size_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++) {
        if (t->dims[i] == 0 || n > OPS_MAX_ELEMENTS / t->dims[i])
            return 0;
        n *= t->dims[i];
    }
    return n;
}

size_t npu_ops_byte_size(const struct npu_tensor *t)
{
    return t == NULL ? 0 : npu_ops_element_count(t) * ops_element_size(t->type);
}

void ops_strides(const struct npu_tensor *t, size_t *strides)
{
    size_t s = 1;
    for (int d = (int)t->rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= t->dims[d];
    }
}

int ops_check(const struct npu_tensor *t)
{
    if (t == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (!is_tensor_type(t->type))
        return NPU_E_BAD_OPERAND_TYPE;
    if (t->rank > NPU_MAX_RANK || npu_ops_element_count(t) == 0)
        return NPU_E_BAD_SHAPE;
    if (t->data == NULL)
        return NPU_E_INVALID_ARGUMENT;
    switch (t->type) {
    case NPU_OPERAND_TENSOR_QUANT8_ASYMM:
        if (t->zero_point < 0 || t->zero_point > 255)
            return NPU_E_BAD_SCALAR;
        break;
    case NPU_OPERAND_TENSOR_QUANT16_ASYMM:
        if (t->zero_point < 0 || t->zero_point > 65535)
            return NPU_E_BAD_SCALAR;
        break;
    case NPU_OPERAND_TENSOR_QUANT8_SYMM: case NPU_OPERAND_TENSOR_QUANT16_SYMM:
        if (t->zero_point != 0)
            return NPU_E_BAD_SCALAR;
        break;
    case NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL:
        if (t->channel_scales == NULL)
            return NPU_E_INVALID_ARGUMENT;
        if (t->channel_dim >= t->rank || t->zero_point != 0)
            return NPU_E_BAD_SCALAR;
        for (uint32_t i = 0; i < t->dims[t->channel_dim]; i++)
            if (!(t->channel_scales[i] > 0.0f) || !isfinite(t->channel_scales[i]))
                return NPU_E_BAD_SCALAR;
        return NPU_OK;
    default:
        return NPU_OK;
    }
    if (!(t->scale > 0.0f) || !isfinite(t->scale))
        return NPU_E_BAD_SCALAR;
    return NPU_OK;
}

bool ops_same_dims(const struct npu_tensor *a, const struct npu_tensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (uint32_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

int ops_type_in(const struct npu_tensor *t, int count, ...)
{
    va_list ap;
    va_start(ap, count);
    bool found = false;
    for (int i = 0; i < count; i++)
        if (va_arg(ap, int) == t->type)
            found = true;
    va_end(ap);
    return found ? NPU_OK : NPU_E_BAD_OPERAND_TYPE;
}

int ops_check_fuse(int32_t fuse)
{
    return fuse >= 0 && fuse <= 3 ? NPU_OK : NPU_E_BAD_FUSE_CODE;
}

void ops_float_bounds(int32_t fuse, float *lo, float *hi)
{
    *lo = -INFINITY;
    *hi = INFINITY;
    if (fuse == 1) {
        *lo = 0.0f;
    } else if (fuse == 2) {
        *lo = -1.0f;
        *hi = 1.0f;
    } else if (fuse == 3) {
        *lo = 0.0f;
        *hi = 6.0f;
    }
}

void ops_quant_bounds(int32_t fuse, const struct npu_tensor *out, int32_t *lo, int32_t *hi)
{
    float flo, fhi;
    ops_float_bounds(fuse, &flo, &fhi);
    *lo = 0;
    *hi = 255;
    if (isfinite(flo)) {
        double q = out->zero_point + round((double)flo / out->scale);
        if (q > *lo)
            *lo = q > 255.0 ? 255 : (int32_t)q;
    }
    if (isfinite(fhi)) {
        double q = out->zero_point + round((double)fhi / out->scale);
        if (q < *hi)
            *hi = q < 0.0 ? 0 : (int32_t)q;
    }
}

uint8_t ops_quantize_u8(double real, double scale, int32_t zero_point)
{
    double q = round(real / scale) + zero_point;
    if (isnan(q))
        return 0;
    return (uint8_t)(q < 0.0 ? 0.0 : (q > 255.0 ? 255.0 : q));
}

bool ops_is_float(const struct npu_tensor *t)
{
    return t->type == NPU_OPERAND_TENSOR_FLOAT32 || t->type == NPU_OPERAND_TENSOR_FLOAT16;
}

static size_t channel_of(const struct npu_tensor *t, size_t i)
{
    size_t inner = 1;
    for (uint32_t d = t->channel_dim + 1; d < t->rank; d++)
        inner *= t->dims[d];
    return i / inner % t->dims[t->channel_dim];
}

OPS_CLONES
void ops_clamp_f32(float *dst, const float *src, size_t n, float lo, float hi)
{
    v8f lov = OPS_V8_SPLAT(lo), hiv = OPS_V8_SPLAT(hi);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f v;
        LOAD(v, src + i);
        v = OPS_V8_SELECT(v < lov, lov, OPS_V8_SELECT(v > hiv, hiv, v));
        STORE(dst + i, v);
    }
    for (; i < n; i++)
        dst[i] = src[i] < lo ? lo : (src[i] > hi ? hi : src[i]);
}

double ops_get(const struct npu_tensor *t, size_t i)
{
    const void *d = t->data;
    switch (t->type) {
    case NPU_OPERAND_TENSOR_FLOAT32:
        return ((const float *)d)[i];
    case NPU_OPERAND_TENSOR_FLOAT16:
        return npu_half_to_float(((const uint16_t *)d)[i]);
    case NPU_OPERAND_TENSOR_INT32:
        return ((const int32_t *)d)[i];
    case NPU_OPERAND_TENSOR_QUANT8_ASYMM:
        return ((double)((const uint8_t *)d)[i] - t->zero_point) * t->scale;
    case NPU_OPERAND_TENSOR_QUANT8_SYMM:
        return (double)((const int8_t *)d)[i] * t->scale;
    case NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL:
        return (double)((const int8_t *)d)[i] * t->channel_scales[channel_of(t, i)];
    case NPU_OPERAND_TENSOR_QUANT16_SYMM:
        return (double)((const int16_t *)d)[i] * t->scale;
    case NPU_OPERAND_TENSOR_QUANT16_ASYMM:
        return ((double)((const uint16_t *)d)[i] - t->zero_point) * t->scale;
    case NPU_OPERAND_TENSOR_BOOL8:
        return ((const uint8_t *)d)[i] != 0;
    default:
        return 0.0;
    }
}

void ops_set(const struct npu_tensor *t, size_t i, double v)
{
    void *d = t->data;
    switch (t->type) {
    case NPU_OPERAND_TENSOR_FLOAT32:
        ((float *)d)[i] = (float)v;
        break;
    case NPU_OPERAND_TENSOR_FLOAT16:
        ((uint16_t *)d)[i] = npu_float_to_half((float)v);
        break;
    case NPU_OPERAND_TENSOR_QUANT8_ASYMM:
        ((uint8_t *)d)[i] = ops_quantize_u8(v, t->scale, t->zero_point);
        break;
    case NPU_OPERAND_TENSOR_INT32:  /* only ever a value read from an int32 tensor */
        ((int32_t *)d)[i] = (int32_t)v;
        break;
    default:
        break;  /* the operations that call this take no other output type */
    }
}

void ops_requantize_moved(const struct npu_tensor *out, float scale, int32_t zero_point)
{
    if (out->type != NPU_OPERAND_TENSOR_QUANT8_ASYMM || (out->scale == scale && out->zero_point == zero_point))
        return;
    uint8_t *v = out->data;
    size_t n = npu_ops_element_count(out);
    for (size_t i = 0; i < n; i++)
        v[i] = ops_quantize_u8(((double)v[i] - zero_point) * scale, out->scale, out->zero_point);
}

int ops_broadcast(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *out,
                  uint32_t max_rank, struct ops_broadcast *bc)
{
    if (a->rank > max_rank || b->rank > max_rank || max_rank > NPU_MAX_RANK)
        return NPU_E_BAD_SHAPE;
    uint32_t rank = a->rank > b->rank ? a->rank : b->rank;
    if (out->rank != rank)
        return NPU_E_BAD_SHAPE;
    size_t stride_a = 1, stride_b = 1;
    for (int d = NPU_MAX_RANK - 1; d >= 0; d--) {
        uint32_t back = (uint32_t)(NPU_MAX_RANK - 1 - d);  /* dimensions counted from the right */
        size_t da = back < a->rank ? a->dims[a->rank - 1 - back] : 1;
        size_t db = back < b->rank ? b->dims[b->rank - 1 - back] : 1;
        size_t dout = back < rank ? out->dims[rank - 1 - back] : 1;
        if (da != db && da != 1 && db != 1)
            return NPU_E_BAD_SHAPE;
        if (dout != (da > db ? da : db))
            return NPU_E_BAD_SHAPE;
        bc->dims[d] = dout;
        bc->sa[d] = da == 1 ? 0 : stride_a;
        bc->sb[d] = db == 1 ? 0 : stride_b;
        stride_a *= da;
        stride_b *= db;
    }
    /* Coalesced, the same walk in fewer, longer loops: dimensions of 1 dropped, and a
     * dimension merged into the one right of it when both a and b step over it as
     * over that whole dimension (the innermost stride is then 1, or 0 broadcasting). */
    int to = NPU_MAX_RANK;
    for (int d = NPU_MAX_RANK - 1; d >= 0; d--) {
        if (bc->dims[d] == 1)
            continue;
        if (to < NPU_MAX_RANK && bc->sa[d] == bc->sa[to] * bc->dims[to] && bc->sb[d] == bc->sb[to] * bc->dims[to]) {
            bc->dims[to] *= bc->dims[d];
            continue;
        }
        to--;
        bc->dims[to] = bc->dims[d];
        bc->sa[to] = bc->sa[d];
        bc->sb[to] = bc->sb[d];
    }
    for (int d = to - 1; d >= 0; d--) {
        bc->dims[d] = 1;
        bc->sa[d] = bc->sb[d] = 0;
    }
    return NPU_OK;
}

int ops_widen(const struct npu_tensor *in, struct npu_tensor *view, float **owned)
{
    *view = *in;
    *owned = NULL;
    if (in->type != NPU_OPERAND_TENSOR_FLOAT16)
        return NPU_OK;
    size_t n = npu_ops_element_count(in);
    float *f = malloc(n * sizeof *f);
    if (f == NULL)
        return NPU_E_NO_MEMORY;
    const uint16_t *h = in->data;
    for (size_t i = 0; i < n; i++)
        f[i] = npu_half_to_float(h[i]);
    view->type = NPU_OPERAND_TENSOR_FLOAT32;
    view->data = f;
    *owned = f;
    return NPU_OK;
}

int ops_scratch_f32(const struct npu_tensor *out, struct npu_tensor *view, float **owned)
{
    *view = *out;
    *owned = NULL;
    if (out->type != NPU_OPERAND_TENSOR_FLOAT16)
        return NPU_OK;
    float *f = calloc(npu_ops_element_count(out), sizeof *f);
    if (f == NULL)
        return NPU_E_NO_MEMORY;
    view->type = NPU_OPERAND_TENSOR_FLOAT32;
    view->data = f;
    *owned = f;
    return NPU_OK;
}

void ops_narrow(const struct npu_tensor *out, const float *values, size_t from, size_t count)
{
    uint16_t *h = out->data;
    for (size_t i = from; i < from + count; i++)
        h[i] = npu_float_to_half(values[i]);
}

void ops_image(const struct npu_tensor *t, bool nchw, struct ops_image *img)
{
    img->n = t->dims[0];
    if (nchw) {
        img->c = t->dims[1];
        img->h = t->dims[2];
        img->w = t->dims[3];
        img->sx = 1;
        img->sy = img->w;
        img->sc = img->h * img->w;
        img->sn = img->c * img->sc;
    } else {
        img->h = t->dims[1];
        img->w = t->dims[2];
        img->c = t->dims[3];
        img->sc = 1;
        img->sx = img->c;
        img->sy = img->w * img->c;
        img->sn = img->h * img->sy;
    }
}

int ops_resize_images(const struct npu_tensor *input, const struct npu_tensor *output, bool nchw,
                      struct ops_image *in, struct ops_image *out)
{
    if (input->rank != 4 || output->rank != 4)
        return NPU_E_BAD_SHAPE;
    ops_image(input, nchw, in);
    ops_image(output, nchw, out);
    return in->n == out->n && in->c == out->c ? NPU_OK : NPU_E_BAD_SHAPE;
}

long ops_out_size(long size, long filter, long stride, long dilation, long head, long tail)
{
    long effective = (filter - 1) * dilation + 1;
    long num = size - effective + head + tail + stride;
    return num <= 0 ? 0 : num / stride;
}

int ops_check_window(const struct npu_window *w, bool pool)
{
    if (w == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (w->pad_left < 0 || w->pad_right < 0 || w->pad_top < 0 || w->pad_bottom < 0 ||
        w->stride_w < 1 || w->stride_h < 1 || w->dilation_w < 1 || w->dilation_h < 1)
        return NPU_E_BAD_SCALAR;
    if (pool && (w->filter_w < 1 || w->filter_h < 1))
        return NPU_E_BAD_SCALAR;
    /* bound everything so no product of them overflows a long */
    if (w->pad_left > 65536 || w->pad_right > 65536 || w->pad_top > 65536 || w->pad_bottom > 65536 ||
        w->stride_w > 65536 || w->stride_h > 65536 || w->dilation_w > 65536 || w->dilation_h > 65536 ||
        (pool && (w->filter_w > 65536 || w->filter_h > 65536)))
        return NPU_E_BAD_SCALAR;
    return ops_check_fuse(w->fuse);
}

void ops_clamp_range(size_t units, size_t *begin, size_t *end)
{
    if (*end > units)
        *end = units;
    if (*begin > *end)
        *begin = *end;
}

int npu_ops_implicit_padding(int32_t size, int32_t stride, int32_t filter, int32_t dilation,
                             int32_t scheme, int32_t *head, int32_t *tail)
{
    if (head == NULL || tail == NULL)
        return NPU_E_INVALID_ARGUMENT;
    if (size < 1 || stride < 1 || filter < 1 || dilation < 1 || filter > 65536 || dilation > 65536)
        return NPU_E_BAD_SCALAR;
    if (scheme == 2) {
        *head = *tail = 0;
        return NPU_OK;
    }
    if (scheme != 1)
        return NPU_E_BAD_SCALAR;
    long effective = ((long)filter - 1) * dilation + 1;
    long out = ((long)size + stride - 1) / stride;
    long needed = (out - 1) * stride + effective - size;
    if (needed < 0)
        needed = 0;
    if (needed > INT32_MAX)
        return NPU_E_BAD_SCALAR;
    *head = (int32_t)(needed / 2);
    *tail = (int32_t)(needed - needed / 2);
    return NPU_OK;
}

size_t npu_ops_units_spatial(const struct npu_tensor *out, bool nchw)
{
    if (out == NULL || out->rank != 4)
        return 0;
    return (size_t)out->dims[0] * (nchw ? out->dims[2] : out->dims[1]);
}

size_t npu_ops_units_fully_connected(const struct npu_tensor *out)
{
    return out == NULL || out->rank != 2 ? 0 : out->dims[0];
}

int ops_nhwc_input(const struct npu_tensor *in, bool nchw, const void **data, void **owned)
{
    *owned = NULL;
    *data = in->data;
    bool quant = in->type == NPU_OPERAND_TENSOR_QUANT8_ASYMM;
    if (!nchw && (quant || in->type == NPU_OPERAND_TENSOR_FLOAT32))
        return NPU_OK;
    struct ops_image img;
    ops_image(in, nchw, &img);
    size_t count = npu_ops_element_count(in);
    void *copy = malloc(count * (quant ? 1 : sizeof(float)));
    if (copy == NULL)
        return NPU_E_NO_MEMORY;
    size_t i = 0;
    for (size_t n = 0; n < img.n; n++)
        for (size_t y = 0; y < img.h; y++)
            for (size_t x = 0; x < img.w; x++)
                for (size_t c = 0; c < img.c; c++, i++) {
                    size_t at = ops_at(&img, n, y, x, c);
                    if (quant)
                        ((uint8_t *)copy)[i] = ((const uint8_t *)in->data)[at];
                    else if (in->type == NPU_OPERAND_TENSOR_FLOAT16)
                        ((float *)copy)[i] = npu_half_to_float(((const uint16_t *)in->data)[at]);
                    else
                        ((float *)copy)[i] = ((const float *)in->data)[at];
                }
    *owned = copy;
    *data = copy;
    return NPU_OK;
}

float *ops_rows_in_place(const struct npu_tensor *out, bool nchw, size_t row0, size_t row1,
                         const struct npu_tensor *in)
{
    if (nchw || out->type != NPU_OPERAND_TENSOR_FLOAT32)
        return NULL;
    struct ops_image img;
    ops_image(out, nchw, &img);
    float *first = (float *)out->data + row0 * img.sy;
    size_t bytes = (row1 - row0) * img.sy * sizeof(float);
    return ops_disjoint(first, bytes, in->data, npu_ops_element_count(in) * ops_element_size(in->type)) ? first : NULL;
}

bool ops_disjoint(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 + a_bytes <= b0 || b0 + b_bytes <= a0;
}

void ops_store_rows_f32(const struct npu_tensor *out, bool nchw, size_t row0, size_t row1, const float *rows)
{
    struct ops_image img;
    ops_image(out, nchw, &img);
    if (!nchw && out->type == NPU_OPERAND_TENSOR_FLOAT32) {
        float *dst = (float *)out->data + row0 * img.sy;
        if (dst != rows)  /* else computed in place (ops_rows_in_place) */
            memcpy(dst, rows, (row1 - row0) * img.sy * sizeof(float));
        return;
    }
    for (size_t r = row0; r < row1; r++) {
        size_t n = r / img.h, y = r % img.h;
        for (size_t x = 0; x < img.w; x++)
            for (size_t c = 0; c < img.c; c++) {
                float v = *rows++;
                size_t at = ops_at(&img, n, y, x, c);
                if (out->type == NPU_OPERAND_TENSOR_FLOAT16)
                    ((uint16_t *)out->data)[at] = npu_float_to_half(v);
                else
                    ((float *)out->data)[at] = v;
            }
    }
}

void ops_store_rows_u8(const struct npu_tensor *out, bool nchw, size_t row0, size_t row1, const uint8_t *rows)
{
    struct ops_image img;
    ops_image(out, nchw, &img);
    if (!nchw) {
        memcpy((uint8_t *)out->data + row0 * img.sy, rows, (row1 - row0) * img.sy);
        return;
    }
    for (size_t r = row0; r < row1; r++) {
        size_t n = r / img.h, y = r % img.h;
        for (size_t x = 0; x < img.w; x++)
            for (size_t c = 0; c < img.c; c++)
                ((uint8_t *)out->data)[ops_at(&img, n, y, x, c)] = *rows++;
    }
}

int ops_geometry(const struct npu_tensor *in, const struct npu_window *w, size_t fh, size_t fw,
                 struct ops_geometry *g)
{
    struct ops_image img;
    ops_image(in, w->nchw, &img);
    g->n = img.n;
    g->h = img.h;
    g->w = img.w;
    g->c = img.c;
    g->fh = fh;
    g->fw = fw;
    g->sh = w->stride_h;
    g->sw = w->stride_w;
    g->dh = w->dilation_h;
    g->dw = w->dilation_w;
    g->top = w->pad_top;
    g->left = w->pad_left;
    long oh = ops_out_size((long)g->h, (long)fh, g->sh, g->dh, w->pad_top, w->pad_bottom);
    long ow = ops_out_size((long)g->w, (long)fw, g->sw, g->dw, w->pad_left, w->pad_right);
    if (oh < 1 || ow < 1)
        return NPU_E_BAD_SHAPE;
    g->oh = (size_t)oh;
    g->ow = (size_t)ow;
    return NPU_OK;
}

int ops_check_geometry_output(const struct npu_tensor *out, const struct ops_geometry *g, bool nchw)
{
    struct ops_image img;
    if (out->rank != 4)
        return NPU_E_BAD_SHAPE;
    ops_image(out, nchw, &img);
    return img.n == g->n && img.h == g->oh && img.w == g->ow && img.c == g->oc ? NPU_OK : NPU_E_BAD_SHAPE;
}
