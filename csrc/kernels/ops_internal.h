/*
 * What the operation library's files share (not public: npu/ops.h is the API).
 */
#ifndef NPU_OPS_INTERNAL_H
#define NPU_OPS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>

#include "npu/errors.h"
#include "npu/ops.h"

/* A tensor larger than this (elements) is refused, as plan.c refuses one. */
#define OPS_MAX_ELEMENTS ((size_t)1 << 28)

/* Kernels built twice, for x86-64-v3 (AVX2 and FMA) and for the baseline, the
 * loader picking one (GCC's target_clones).  Results do not depend on the
 * instruction set: every build sets -ffp-contract=off, so the compiler fuses no
 * a * b + c, and a fused multiply-add is written out (OPS_FMA), as XNNPACK's
 * float convolutions use one.  IEEE 754 rounds it once, correctly, so the
 * x86-64-v3 clone's FMA instruction and the baseline's C99 fmaf (in software
 * where the CPU has no FMA: slower, the same bits) agree on every machine.
 * NPU_NO_CLONES builds the baseline alone. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(NPU_NO_CLONES)
#define OPS_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
/* A kernel of 16-lane vectors (one AVX-512 register) built for AVX-512 alone,
 * called where ops_wide() says the machine has it; its OPS_FMA is AVX-512F's
 * fused multiply-add (FMA's for its 8-lane vectors), the same bits again. */
#define OPS_HAVE_WIDE 1
#define OPS_TARGET_WIDE __attribute__((target("avx512f,fma")))
static inline bool ops_wide(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}
#else
#define OPS_CLONES
#endif
/* x * y + a rounded once, lane by lane, for vectors of any one GCC float vector
 * type: one vfmadd in the x86-64-v3 clone (GCC vectorizes the lanes' fmaf),
 * fmaf per lane in the baseline.  (A float alone: C99's fmaf.) */
#define OPS_FMA(x, y, a)                                                                           \
    ({                                                                                             \
        __typeof__(a) ops_a_ = (a), ops_x_ = (x), ops_y_ = (y);                                    \
        _Pragma("GCC unroll 16") for (size_t ops_l_ = 0; ops_l_ < sizeof ops_a_ / sizeof ops_a_[0]; ops_l_++) \
            ops_a_[ops_l_] = __builtin_fmaf(ops_x_[ops_l_], ops_y_[ops_l_], ops_a_[ops_l_]);       \
        ops_a_;                                                                                    \
    })
/* GCC's vector extensions: eight float lanes, one AVX register (two SSE ones);
 * LOAD and STORE move one unaligned. */
typedef float v8f __attribute__((vector_size(32)));
#define LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define STORE(p, v) memcpy((p), &(v), sizeof(v))
/* A lane mask (all ones where a comparison of v8f holds), a lane-wise choice
 * (macros: a function returning a vector warns of the ABI without AVX). */
typedef int32_t v8m __attribute__((vector_size(32)));
/* sixteen lanes: one AVX-512 register (OPS_TARGET_WIDE's kernels) */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16m __attribute__((vector_size(64)));
#define OPS_V8_SELECT(mask, yes, no) OPS_SELECT(v8f, v8m, mask, yes, no)
#define OPS_SELECT(V, M, mask, yes, no) ((V)(((M)(yes) & (mask)) | ((M)(no) & ~(mask))))
#define OPS_V8_SPLAT(x) ({ float ops_s_ = (x); (v8f){ops_s_, ops_s_, ops_s_, ops_s_, ops_s_, ops_s_, ops_s_, ops_s_}; })

#define OPS_TRY(expr)                  \
    do {                               \
        int ops_rc_ = (expr);          \
        if (ops_rc_ != NPU_OK)         \
            return ops_rc_;            \
    } while (0)

/* Bytes per stored element of a type; 0 for an unknown type. */
size_t ops_element_size(int32_t type);
/* NPU_OK when t is a usable tensor descriptor: not NULL, a known tensor type,
 * rank and dims in range, data not NULL, quantization parameters valid. */
int ops_check(const struct npu_tensor *t);
/* Row-major strides of t, in elements. */
void ops_strides(const struct npu_tensor *t, size_t *strides);

/* One axis of a strided slice, as TFLite's reference clamps it: the element count
 * (0 when empty) of [begin, end) by stride (!= 0) over an axis of dim elements, a
 * masked bound meaning the axis' own end; *first receives the first index. */
int64_t ops_slice_axis(int64_t dim, int64_t begin, int64_t end, int64_t stride, bool begin_masked,
                       bool end_masked, int64_t *first);
bool ops_same_dims(const struct npu_tensor *a, const struct npu_tensor *b);
/* NPU_E_BAD_OPERAND_TYPE unless t->type is one of the count types given. */
int ops_type_in(const struct npu_tensor *t, int count, ...);
int ops_check_fuse(int32_t fuse);
void ops_float_bounds(int32_t fuse, float *lo, float *hi);
/* dst[i] = src[i] clamped to [lo, hi] (v < lo ? lo : v > hi ? hi : v, so a NaN is
 * kept) for i < n, dst == src allowed: eight at a time without a branch per element
 * (a fused RELU's branch on the sign mispredicts half the time). */
void ops_clamp_f32(float *dst, const float *src, size_t n, float lo, float hi);
/* CalculateActivationRangeUint8: the fused bounds as stored values of out. */
void ops_quant_bounds(int32_t fuse, const struct npu_tensor *out, int32_t *lo, int32_t *hi);
/* round(real / scale) + zero point, halves away from zero, saturated to 0..255. */
uint8_t ops_quantize_u8(double real, double scale, int32_t zero_point);
/* The real value of element i (dequantized, widened) and storing one back
 * (quantized with t's parameters, or rounded to t's float type). */
double ops_get(const struct npu_tensor *t, size_t i);
void ops_set(const struct npu_tensor *t, size_t i, double v);
bool ops_is_float(const struct npu_tensor *t);
/* A quantized output whose (scale, zero point) differ from (scale, zero_point):
 * requantize its count stored values in place.  No-op otherwise. */
void ops_requantize_moved(const struct npu_tensor *out, float scale, int32_t zero_point);

/* NNAPI's broadcasting of two tensors a and b to out: dimensions aligned from
 * the right, each pair equal or one of them 1.  The output's index space as
 * NPU_MAX_RANK loops (row-major), coalesced (dimensions of 1 dropped, neighbours
 * merged where both inputs read them as one; left-padded with 1), and the
 * strides reading a and b at each output index (0 along a dimension that
 * broadcasts; the innermost one is 1 or 0).  NPU_E_BAD_SHAPE when a or b has a
 * rank above max_rank, they do not broadcast, or out is not their broadcast shape. */
struct ops_broadcast {
    size_t dims[NPU_MAX_RANK], sa[NPU_MAX_RANK], sb[NPU_MAX_RANK];
};
int ops_broadcast(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *out,
                  uint32_t max_rank, struct ops_broadcast *bc);
/* Each output index i in order, with ia and ib the elements of a and b it reads
 * (one loop per dimension: NPU_MAX_RANK is 6). */
_Static_assert(NPU_MAX_RANK == 6, "OPS_FOR_BROADCAST has one loop per dimension");
#define OPS_FOR_BROADCAST(bc, i, ia, ib)                                                           \
    for (size_t i0 = 0, i = 0; i0 < (bc).dims[0]; i0++)                                            \
        for (size_t i1 = 0; i1 < (bc).dims[1]; i1++)                                               \
            for (size_t i2 = 0; i2 < (bc).dims[2]; i2++)                                           \
                for (size_t i3 = 0; i3 < (bc).dims[3]; i3++)                                       \
                    for (size_t i4 = 0; i4 < (bc).dims[4]; i4++)                                   \
                        for (size_t i5 = 0,                                                        \
                                    ia = i0 * (bc).sa[0] + i1 * (bc).sa[1] + i2 * (bc).sa[2] +     \
                                         i3 * (bc).sa[3] + i4 * (bc).sa[4],                        \
                                    ib = i0 * (bc).sb[0] + i1 * (bc).sb[1] + i2 * (bc).sb[2] +     \
                                         i3 * (bc).sb[3] + i4 * (bc).sb[4];                        \
                             i5 < (bc).dims[5]; i5++, i++, ia += (bc).sa[5], ib += (bc).sb[5])

/* The same walk a row at a time: i, ia and ib the first output, a and b
 * elements of each run of (bc).dims[5] outputs (a's and b's steps along it
 * (bc).sa[5] and (bc).sb[5]). */
#define OPS_FOR_BROADCAST_ROWS(bc, i, ia, ib)                                                      \
    for (size_t i0 = 0, i = 0; i0 < (bc).dims[0]; i0++)                                            \
        for (size_t i1 = 0; i1 < (bc).dims[1]; i1++)                                               \
            for (size_t i2 = 0; i2 < (bc).dims[2]; i2++)                                           \
                for (size_t i3 = 0; i3 < (bc).dims[3]; i3++)                                       \
                    for (size_t i4 = 0,                                                            \
                                ia = i0 * (bc).sa[0] + i1 * (bc).sa[1] + i2 * (bc).sa[2] +         \
                                     i3 * (bc).sa[3],                                              \
                                ib = i0 * (bc).sb[0] + i1 * (bc).sb[1] + i2 * (bc).sb[2] +         \
                                     i3 * (bc).sb[3];                                              \
                         i4 < (bc).dims[4]; i4++, i += (bc).dims[5], ia += (bc).sa[4], ib += (bc).sb[4])

/* Float16 tensors compute through float32 copies: widen makes *view a float32
 * tensor of in's values (*owned holds the copy to free, NULL when in is not
 * float16); narrow writes a float32 scratch back to a float16 output. */
int ops_widen(const struct npu_tensor *in, struct npu_tensor *view, float **owned);
int ops_scratch_f32(const struct npu_tensor *out, struct npu_tensor *view, float **owned);
void ops_narrow(const struct npu_tensor *out, const float *values, size_t from, size_t count);

/* The spatial geometry of a 4-D tensor whatever its layout, and the offset of
 * element (n, y, x, c). */
struct ops_image {
    size_t n, h, w, c;
    size_t sn, sy, sx, sc;  /* strides in elements */
};
void ops_image(const struct npu_tensor *t, bool nchw, struct ops_image *img);
static inline size_t ops_at(const struct ops_image *img, size_t n, size_t y, size_t x, size_t c)
{
    return n * img->sn + y * img->sy + x * img->sx + c * img->sc;
}
/* A resize's input and output images: both 4-D, of one batch and depth. */
int ops_resize_images(const struct npu_tensor *input, const struct npu_tensor *output, bool nchw,
                      struct ops_image *in, struct ops_image *out);
/* A 4-D input's values as a contiguous NHWC array: float32 (float16 widened)
 * for the float types, the stored bytes for TENSOR_QUANT8_ASYMM.  *owned is
 * the copy to free (NULL when the input's own memory serves). */
int ops_nhwc_input(const struct npu_tensor *in, bool nchw, const void **data, void **owned);
/* Stores output rows [row0, row1) (row = batch * out_h + y) from an NHWC block
 * of float32 values, or of stored uint8 values, into out in its layout and type. */
void ops_store_rows_f32(const struct npu_tensor *out, bool nchw, size_t row0, size_t row1, const float *rows);
/* Where output rows [row0, row1) of out lie as NHWC float32 (out->data itself),
 * so that a kernel can compute them in place: NULL when out is not NHWC
 * float32, or those rows' bytes overlap in's (a kernel still reads in). */
/* Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) do not overlap. */
bool ops_disjoint(const void *a, size_t a_bytes, const void *b, size_t b_bytes);
float *ops_rows_in_place(const struct npu_tensor *out, bool nchw, size_t row0, size_t row1,
                         const struct npu_tensor *in);
void ops_store_rows_u8(const struct npu_tensor *out, bool nchw, size_t row0, size_t row1, const uint8_t *rows);

/* The geometry of a 2-D window over an image (read as NHWC), oc the output's
 * channels (the caller sets it); the output size from the window, BAD_SHAPE
 * when it would be empty. */
struct ops_geometry {
    size_t n, h, w, c;
    size_t fh, fw, oc;
    size_t oh, ow;
    long sh, sw, dh, dw, top, left;
};
int ops_geometry(const struct npu_tensor *in, const struct npu_window *w, size_t fh, size_t fw,
                 struct ops_geometry *g);
/* NPU_OK when out is [n, oh, ow, oc] (in its layout). */
int ops_check_geometry_output(const struct npu_tensor *out, const struct ops_geometry *g, bool nchw);

/* The output size of a window along one dimension (may be <= 0). */
long ops_out_size(long size, long filter, long stride, long dilation, long head, long tail);
int ops_check_window(const struct npu_window *w, bool pool);
/* Clamps [*begin, *end) to [0, units). */
void ops_clamp_range(size_t units, size_t *begin, size_t *end);

/* -- what the convolutions share (ops_conv.c) --------------------------------------
 * The checked types of a convolution-like call: all float32, all float16, or a
 * quant8 input and output with a quant8 or (along channel_dim) per-channel
 * filter and an int32 bias. */
enum ops_kind { OPS_KIND_F32, OPS_KIND_F16, OPS_KIND_Q8 };
int ops_conv_types(const struct npu_tensor *in, const struct npu_tensor *filter, const struct npu_tensor *bias,
                   const struct npu_tensor *out, uint32_t channel_dim, enum ops_kind *kind);
/* Per output channel requantization of int32 sums (Q31 multipliers and shifts
 * of input_scale * filter_scale / output_scale, the fused activation's bounds):
 * init (free even when it fails), then block adds the bias to count rows of
 * channels sums and stores them requantized. */
struct ops_requant {
    int32_t *multiplier, *shift;
    int32_t lo, hi, zero;
};
int ops_requant_init(struct ops_requant *q, const struct npu_tensor *in, const struct npu_tensor *filter,
                     const struct npu_tensor *out, size_t channels, int32_t fuse);
void ops_requant_free(struct ops_requant *q);
void ops_requant_block(const struct ops_requant *q, const int32_t *acc, const int32_t *bias, size_t count,
                       size_t channels, uint8_t *dst);

/* -- the packed GEMM (ops_gemm.c) -----------------------------------------------
 * C[m][n] = bias[n] + sum_k A(m, k) * W[n][k], with A given row by row by a
 * packing callback (so a convolution's im2col never exists whole) and W the
 * filter as stored ([n][k], row-major). */
typedef void (*ops_pack_f32)(const void *ctx, size_t m, size_t k0, size_t kc, float *dst);
typedef void (*ops_pack_i16)(const void *ctx, size_t m, size_t k0, size_t kc, int16_t *dst);

struct ops_gemm_f32 {
    size_t N, K;
    float *packed_w;   /* W in NR-column panels, KC-blocked */
};
int ops_gemm_f32_prepare(struct ops_gemm_f32 *g, const float *w, size_t N, size_t K);
void ops_gemm_f32_free(struct ops_gemm_f32 *g);
/* Rows [m0, m1) of C (row stride ldc), initialised to bias (or 0 when NULL). */
int ops_gemm_f32_run(const struct ops_gemm_f32 *g, ops_pack_f32 pack, const void *ctx,
                     size_t m0, size_t m1, const float *bias, float *c, size_t ldc);
/* The same, reading A's rows in place where it can (row m at direct + m * lda,
 * the k-th element at + k): a 1x1 stride-1 convolution's input, a fully
 * connected layer's; pack still serves the last rows when fewer than a block.
 * The sums are bounded to [lo, hi] as ops_clamp_f32 bounds them (a fused
 * activation; ops_gemm_f32_run: -INFINITY, INFINITY). */
int ops_gemm_f32_run_direct(const struct ops_gemm_f32 *g, ops_pack_f32 pack, const void *ctx, const float *direct,
                            size_t lda, size_t m0, size_t m1, const float *bias, float lo, float hi, float *c,
                            size_t ldc);

/* The integer GEMM: W's stored values minus w_zero (uint8 or int8 storage),
 * A's callback writes centred int16 values; C is int32 accumulators. */
struct ops_gemm_i16 {
    size_t N, K;
    int16_t *packed_w;
};
int ops_gemm_i16_prepare(struct ops_gemm_i16 *g, const void *w, bool w_signed, int32_t w_zero,
                         size_t N, size_t K);
void ops_gemm_i16_free(struct ops_gemm_i16 *g);
int ops_gemm_i16_run(const struct ops_gemm_i16 *g, ops_pack_i16 pack, const void *ctx,
                     size_t m0, size_t m1, int32_t *c, size_t ldc);

/* -- a convolution's GEMM (ops_conv.c) ----------------------------------------------
 * What a convolution-like operation's packing callbacks read (ctx of the GEMM):
 * its geometry, the input as NHWC float32 or stored uint8, the input's zero
 * point, and the current group's input channels [c0, c0 + cg). */
struct ops_conv_ctx {
    const struct ops_geometry *g;
    const void *x;
    int32_t zero;
    size_t c0, cg;
};
/* A packing callback NAME (ops_pack_f32 or ops_pack_i16 as T is float or
 * int16_t) writing one output pixel's taps in a row (dst[k - k0]), k = (fy *
 * fw + fx) * cg + channel, as runs of the group's channels (a padded tap's
 * zeros), CENTRE the value of s[i] stored.  Where a filter row's taps are
 * neighbours in the input (dilation 1, one group) and all inside it, they
 * are one run. */
#define OPS_CONV_PACK(NAME, T, SRC_T, CENTRE)                                                      \
    static void NAME(const void *vctx, size_t m, size_t k0, size_t kc, T *restrict dst)            \
    {                                                                                              \
        const struct ops_conv_ctx *ctx = vctx;                                                     \
        const struct ops_geometry *g = ctx->g;                                                     \
        const SRC_T *x = ctx->x;                                                                   \
        size_t per_image = g->oh * g->ow, cg = ctx->cg;                                            \
        size_t n = m / per_image, oy = m % per_image / g->ow, ox = m % g->ow;                      \
        size_t tap = k0 / cg, ch = k0 % cg, fy = tap / g->fw, fx = tap % g->fw;                    \
        long y0 = (long)oy * g->sh - g->top, x0 = (long)ox * g->sw - g->left;                      \
        bool rows = g->dw == 1 && cg == g->c && x0 >= 0 && x0 + (long)g->fw <= (long)g->w;         \
        for (size_t k = k0, end = k0 + kc; k < end;) {                                             \
            long y = y0 + (long)fy * g->dh, xx = x0 + (long)fx * g->dw;                            \
            size_t taps = rows && fx == 0 && ch == 0 ? g->fw : 1;                                  \
            size_t run = taps * cg - ch < end - k ? taps * cg - ch : end - k;                      \
            T *restrict d = dst + (k - k0);                                                        \
            if (y < 0 || y >= (long)g->h || xx < 0 || xx >= (long)g->w) {                          \
                memset(d, 0, run * sizeof(T));                                                     \
            } else {                                                                               \
                const SRC_T *restrict s = x + ((n * g->h + (size_t)y) * g->w + (size_t)xx) * g->c + ctx->c0 + ch; \
                for (size_t i = 0; i < run; i++)                                                   \
                    d[i] = (T)(CENTRE);                                                            \
            }                                                                                      \
            k += run;                                                                              \
            ch = 0;                                                                                \
            fx += taps;                                                                            \
            if (fx == g->fw) {                                                                     \
                fx = 0;                                                                            \
                fy++;                                                                              \
            }                                                                                      \
        }                                                                                          \
    }
/* Output rows [begin, end) (row = batch * oh + y) of a convolution-like
 * operation whose types ops_conv_types checked and whose geometry g (with oc)
 * fits the output: per group, the filter's rows of that group times the rows
 * the callbacks pack (float32, or centred int16 for quant8), plus the bias,
 * then the fused activation (quant8: requantized per output channel), stored in
 * the output's layout and type. */
int ops_conv_gemm(const struct npu_tensor *input, const struct npu_tensor *filter, const struct npu_tensor *bias,
                  const struct npu_tensor *output, int32_t fuse, bool nchw, const struct ops_geometry *g,
                  size_t groups, ops_pack_f32 pack_f32, ops_pack_i16 pack_i16, size_t begin, size_t end,
                  struct npu_kept **kept);
/* npu_op_grouped_conv_2d (groups 1: npu_op_conv_2d) keeping its float filter
 * packed in *kept (npu/bind.h's slot, NULL: nothing kept) for the later runs. */
int ops_conv_2d_kept(const struct npu_tensor *input, const struct npu_tensor *filter, const struct npu_tensor *bias,
                     const struct npu_window *w, int32_t groups, const struct npu_tensor *output, size_t begin,
                     size_t end, struct npu_kept **kept);

/* The float weights of a convolution (float16 widened: *owned_w, *owned_b to
 * free, NULL when the tensor's own memory serves). */
int ops_conv_weights(const struct npu_tensor *filter, const struct npu_tensor *bias, const void **w, const void **b,
                     float **owned_w, float **owned_b);
/* Stores output rows [begin, end) (count pixels of oc channels) from their
 * sums: float ones (bias included) clamped to the fused activation; quant8
 * int32 ones (without the bias) plus the bias, requantized per channel. */
int ops_conv_store(const struct npu_tensor *input, const struct npu_tensor *filter, const struct npu_tensor *bias,
                   const struct npu_tensor *output, int32_t fuse, bool nchw, size_t begin, size_t end, size_t count,
                   size_t oc, void *sums);

#endif /* NPU_OPS_INTERNAL_H */
