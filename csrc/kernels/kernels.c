/*
 * The float32 kernels.  Plain loops on purpose: the emulator's results must
 * be the same on every machine and under every sanitizer, and the emulated
 * time comes from the cost model, not from how fast these run.  Every kernel
 * computes a range [begin, end) of its output so the hardware can stop
 * between slices.
 */
#include <math.h>
#include <stddef.h>

#include "npu/model.h"

static inline float fuse(float v, int32_t code)
{
    switch (code) {
    case NPU_FUSE_RELU:
        return v < 0.0f ? 0.0f : v;
    case NPU_FUSE_RELU1:
        return v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
    case NPU_FUSE_RELU6:
        return v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
    default:
        return v;
    }
}

void npu_kernel_add(const float *a, const float *b, float *out, size_t begin, size_t end, int32_t code)
{
    for (size_t i = begin; i < end; i++)
        out[i] = fuse(a[i] + b[i], code);
}

void npu_kernel_sub(const float *a, const float *b, float *out, size_t begin, size_t end, int32_t code)
{
    for (size_t i = begin; i < end; i++)
        out[i] = fuse(a[i] - b[i], code);
}

void npu_kernel_mul(const float *a, const float *b, float *out, size_t begin, size_t end, int32_t code)
{
    for (size_t i = begin; i < end; i++)
        out[i] = fuse(a[i] * b[i], code);
}

void npu_kernel_relu(const float *in, float *out, size_t begin, size_t end)
{
    for (size_t i = begin; i < end; i++)
        out[i] = in[i] < 0.0f ? 0.0f : in[i];
}

void npu_kernel_fully_connected(const float *input, const float *weights, const float *bias,
                                float *out, uint32_t in_size, uint32_t units,
                                size_t begin, size_t end, int32_t code)
{
    for (size_t o = begin; o < end; o++) {
        size_t b = o / units, u = o % units;
        const float *x = input + b * in_size;
        const float *w = weights + u * in_size;
        float acc = bias[u];
        for (uint32_t k = 0; k < in_size; k++)
            acc += x[k] * w[k];
        out[o] = fuse(acc, code);
    }
}

void npu_kernel_conv2d(const float *input, const float *filter, const float *bias, float *out,
                       const struct npu_conv2d_params *p, size_t begin, size_t end)
{
    for (size_t pix = begin; pix < end; pix++) {
        size_t n = pix / ((size_t)p->out_h * p->out_w);
        size_t rest = pix % ((size_t)p->out_h * p->out_w);
        size_t oy = rest / p->out_w, ox = rest % p->out_w;
        float *dst = out + pix * p->out_c;
        for (uint32_t oc = 0; oc < p->out_c; oc++) {
            float acc = bias[oc];
            for (uint32_t fy = 0; fy < p->filter_h; fy++) {
                /* signed: padding makes the first rows fall before the image */
                long iy = (long)(oy * p->stride_h + fy) - (long)p->pad_top;
                if (iy < 0 || iy >= (long)p->in_h)
                    continue;
                for (uint32_t fx = 0; fx < p->filter_w; fx++) {
                    long ix = (long)(ox * p->stride_w + fx) - (long)p->pad_left;
                    if (ix < 0 || ix >= (long)p->in_w)
                        continue;
                    const float *src = input + (((n * p->in_h + (size_t)iy) * p->in_w + (size_t)ix) * p->in_c);
                    const float *f = filter + (((size_t)oc * p->filter_h + fy) * p->filter_w + fx) * p->in_c;
                    for (uint32_t c = 0; c < p->in_c; c++)
                        acc += src[c] * f[c];
                }
            }
            dst[oc] = fuse(acc, p->fuse);
        }
    }
}

void npu_kernel_softmax(const float *in, float *out, uint32_t n, float beta, size_t begin, size_t end)
{
    for (size_t r = begin; r < end; r++) {
        const float *x = in + r * n;
        float *y = out + r * n;
        /* subtract the max so exp never overflows, as NNAPI's reference does */
        float max = x[0];
        for (uint32_t i = 1; i < n; i++)
            if (x[i] > max)
                max = x[i];
        float sum = 0.0f;
        for (uint32_t i = 0; i < n; i++) {
            y[i] = expf((x[i] - max) * beta);
            sum += y[i];
        }
        for (uint32_t i = 0; i < n; i++)
            y[i] /= sum;
    }
}
