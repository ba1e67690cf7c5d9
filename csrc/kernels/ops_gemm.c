/*
 * The packed, cache-blocked GEMM under CONV_2D and FULLY_CONNECTED:
 *     C[m][n] = bias[n] + sum_k A(m, k) * W[n][k].
 * W (the filter, [n][k] as NNAPI stores it) is packed once (a convolution's
 * plan keeps it packed across runs) into
 * panels of NR columns, each KC deep, so a micro-kernel streams one panel
 * from cache while it holds an MR x NR block of C in registers.  A is never
 * materialised: a callback packs MR rows of it, KC at a time (for a
 * convolution that is im2col on the fly), into a buffer that stays in L1.
 * The float sum is XNNPACK's: the bias, then one product at a time in k's
 * order, each fused into the sum (OPS_FMA: rounded once).  It keeps that order
 * for every n and every machine (the vector lanes run over n), so results do
 * not depend on the instruction set; the micro-kernels are built for AVX-512
 * (chosen at run time), x86-64-v3 and the baseline (OPS_CLONES).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

#define MR 6
#define NR 16  /* the micro-kernels hold two 8-lane vectors per row */
#define KC 256


static size_t panels(size_t n)
{
    return (n + NR - 1) / NR;
}

/* Offset of (k block starting at k0, panel p) in a packed W. */
static size_t packed_at(size_t N, size_t k0, size_t kc, size_t p)
{
    return k0 * panels(N) * NR + p * kc * NR;
}

/* A block of C: MR rows of NR columns held in registers for the whole k loop,
 * a row as P vectors V of NR / P lanes: one 16-lane vector (one register)
 * under AVX-512, two 8-lane ones otherwise (a 16-lane vector the compiler
 * would split keeps its halves in memory). */
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int16_t v8h __attribute__((vector_size(16)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* C's block (row stride ldc) += A's MR x kc block times a W panel, A's (r, k)
 * at a[r * lda + k] (packed rows, or the rows read in place).  The sums start
 * from init's NR values when init is not NULL (the first k block: the bias),
 * else from C; clamp (the last k block) bounds them to [lo, hi] as
 * ops_clamp_f32 does (a NaN kept).  The sum over k is one order whatever the
 * vector width. */
#define KERNEL_F32(NAME, ATTR, V, M, P)                                                            \
    ATTR static void NAME(size_t kc, const float *restrict a, size_t lda, const float *restrict b, \
                          float *restrict c, size_t ldc, const float *init, bool clamp, float lo,  \
                          float hi)                                                                \
    {                                                                                              \
        enum { L = NR / P };                                                                       \
        V acc[MR][P];                                                                              \
        _Pragma("GCC unroll 16") for (size_t r = 0; r < MR; r++)                                   \
            _Pragma("GCC unroll 4") for (size_t q = 0; q < P; q++)                                 \
                LOAD(acc[r][q], init != NULL ? init + q * L : c + r * ldc + q * L);                \
        for (size_t k = 0; k < kc; k++, b += NR) {                                                 \
            V w[P];                                                                                \
            _Pragma("GCC unroll 4") for (size_t q = 0; q < P; q++)                                 \
                LOAD(w[q], b + q * L);                                                             \
            _Pragma("GCC unroll 16") for (size_t r = 0; r < MR; r++) {                             \
                float x = a[r * lda + k];                                                          \
                V xv = x - (V){0};  /* x in every lane (-0 kept) */                                \
                _Pragma("GCC unroll 4") for (size_t q = 0; q < P; q++)                             \
                    acc[r][q] = OPS_FMA(xv, w[q], acc[r][q]);                                      \
            }                                                                                      \
        }                                                                                          \
        V lov = lo - (V){0}, hiv = hi - (V){0};                                                    \
        _Pragma("GCC unroll 16") for (size_t r = 0; r < MR; r++)                                   \
            _Pragma("GCC unroll 4") for (size_t q = 0; q < P; q++) {                               \
                V v = acc[r][q];                                                                   \
                if (clamp)                                                                         \
                    v = OPS_SELECT(V, M, v < lov, lov, OPS_SELECT(V, M, v > hiv, hiv, v));         \
                STORE(c + r * ldc + q * L, v);                                                     \
            }                                                                                      \
    }

#if defined(OPS_HAVE_WIDE)
KERNEL_F32(kernel_f32_wide, OPS_TARGET_WIDE, v16f, v16m, 1)
#endif
KERNEL_F32(kernel_f32_narrow, OPS_CLONES, v8f, v8m, 2)

#if defined(OPS_HAVE_WIDE)
/* Two whole panels side by side (the second bstride floats after the first):
 * twelve registers of sums, each row's A value read once for both; the same
 * sums as kernel_f32 on each panel. */
OPS_TARGET_WIDE
static void kernel_f32_pair(size_t kc, const float *restrict a, size_t lda, const float *restrict b, size_t bstride,
                            float *restrict c, size_t ldc, const float *init, bool clamp, float lo, float hi)
{
    v16f acc[MR][2];
    _Pragma("GCC unroll 16") for (size_t r = 0; r < MR; r++)
        _Pragma("GCC unroll 2") for (size_t q = 0; q < 2; q++)
            LOAD(acc[r][q], init != NULL ? init + q * NR : c + r * ldc + q * NR);
    for (size_t k = 0; k < kc; k++, b += NR) {
        v16f w0, w1;
        LOAD(w0, b);
        LOAD(w1, b + bstride);
        _Pragma("GCC unroll 16") for (size_t r = 0; r < MR; r++) {
            v16f x = a[r * lda + k] - (v16f){0};  /* in every lane (-0 kept) */
            acc[r][0] = OPS_FMA(x, w0, acc[r][0]);
            acc[r][1] = OPS_FMA(x, w1, acc[r][1]);
        }
    }
    v16f lov = lo - (v16f){0}, hiv = hi - (v16f){0};
    _Pragma("GCC unroll 16") for (size_t r = 0; r < MR; r++)
        _Pragma("GCC unroll 2") for (size_t q = 0; q < 2; q++) {
            v16f v = acc[r][q];
            if (clamp)
                v = OPS_SELECT(v16f, v16m, v < lov, lov, OPS_SELECT(v16f, v16m, v > hiv, hiv, v));
            STORE(c + r * ldc + q * NR, v);
        }
}
#endif

static void kernel_f32(size_t kc, const float *restrict a, size_t lda, const float *restrict b, float *restrict c,
                       size_t ldc, const float *init, bool clamp, float lo, float hi)
{
#if defined(OPS_HAVE_WIDE)
    if (ops_wide())
        return kernel_f32_wide(kc, a, lda, b, c, ldc, init, clamp, lo, hi);
#endif
    kernel_f32_narrow(kc, a, lda, b, c, ldc, init, clamp, lo, hi);
}

/* Sums in uint32 lanes, which wrap where int32 would overflow (undefined in
 * C); for any K a real model has (K * 255 * 255 < 2^31) the sum is exact.
 * The same block, of centred int16 values; zero (the first k block) starts
 * the sums from 0. */
OPS_CLONES
static void kernel_i16(size_t kc, const int16_t *restrict a, size_t lda, const int16_t *restrict b,
                       uint32_t *restrict c, size_t ldc, bool zero)
{
    v8u acc[MR][2];
    _Pragma("GCC unroll 16") for (size_t r = 0; r < MR; r++)
        _Pragma("GCC unroll 2") for (size_t q = 0; q < 2; q++) {
            if (zero)
                acc[r][q] = (v8u){0};
            else
                LOAD(acc[r][q], c + r * ldc + q * 8);
        }
    for (size_t k = 0; k < kc; k++, b += NR) {
        v8u w[2];
        _Pragma("GCC unroll 2") for (size_t q = 0; q < 2; q++) {
            v8h h;
            LOAD(h, b + q * 8);
            w[q] = (v8u)__builtin_convertvector(h, v8i);
        }
        _Pragma("GCC unroll 16") for (size_t r = 0; r < MR; r++) {
            uint32_t x = (uint32_t)(int32_t)a[r * lda + k];
            _Pragma("GCC unroll 2") for (size_t q = 0; q < 2; q++)
                acc[r][q] += x * w[q];
        }
    }
    _Pragma("GCC unroll 16") for (size_t r = 0; r < MR; r++)
        _Pragma("GCC unroll 2") for (size_t q = 0; q < 2; q++)
            STORE(c + r * ldc + q * 8, acc[r][q]);
}

/* The packing of W and the blocked loops, written once for both element types:
 * W's element (n, k) is W_AT(n * K + k). */
#define GEMM_PREPARE(G, T, W_AT)                                                        \
    do {                                                                                \
        (G)->N = N;                                                                     \
        (G)->K = K;                                                                     \
        (G)->packed_w = calloc(panels(N) * NR * K, sizeof(T));                          \
        if ((G)->packed_w == NULL)                                                      \
            return NPU_E_NO_MEMORY;                                                     \
        for (size_t k0 = 0; k0 < K; k0 += KC) {                                         \
            size_t kc = K - k0 < KC ? K - k0 : KC;                                      \
            for (size_t p = 0; p < panels(N); p++) {                                    \
                T *dst = (G)->packed_w + packed_at(N, k0, kc, p);                       \
                size_t nr = N - p * NR < NR ? N - p * NR : NR;                          \
                for (size_t k = 0; k < kc; k++) /* written in order */                  \
                    for (size_t j = 0; j < nr; j++)                                     \
                        dst[k * NR + j] = (T)(W_AT((p * NR + j) * K + k0 + k));         \
            }                                                                           \
        }                                                                               \
        return NPU_OK;                                                                  \
    } while (0)

/* A's rows come from `direct` in place (row m at direct + m * lda) when it is
 * not NULL and a whole MR rows remain, else the callback packs them (row r of
 * the block at a + r * KC); a whole MR x NR block of C is summed in place, an
 * edge one through a local block.  KERNEL(kc, a, lda, w, c, ldc, first, last,
 * p) computes one block, first and last saying whether the k block is the
 * first and the last, p the panel; PAIR(the same) computes panels p and p + 1
 * (both whole) at once and says true, or says false. */
#define GEMM_RUN(G, T, C_T, ACC_T, KERNEL, PAIR, DIRECT, LDA)                                  \
    do {                                                                                \
        size_t N = (G)->N, K = (G)->K;                                                  \
        T *a = malloc(sizeof(T) * MR * KC);                                             \
        if (a == NULL)                                                                  \
            return NPU_E_NO_MEMORY;                                                     \
        for (size_t k0 = 0; k0 < K; k0 += KC) {                                         \
            size_t kc = K - k0 < KC ? K - k0 : KC;                                      \
            bool first = k0 == 0, last = k0 + kc == K;                                  \
            for (size_t mb = m0; mb < m1; mb += MR) {                                   \
                size_t mr = m1 - mb < MR ? m1 - mb : MR, a_ld = KC;                     \
                const T *ab = a;                                                        \
                if ((DIRECT) != NULL && mr == MR) {                                     \
                    ab = (DIRECT) + mb * (LDA) + k0;                                    \
                    a_ld = (LDA);                                                       \
                } else {                                                                \
                    for (size_t r = 0; r < mr; r++)                                     \
                        pack(ctx, mb + r, k0, kc, a + r * KC);                       \
                    for (size_t r = mr; r < MR; r++)                                    \
                        memset(a + r * KC, 0, kc * sizeof(T));                          \
                }                                                                       \
                for (size_t p = 0; p < panels(N); p++) {                                \
                    size_t nr = N - p * NR < NR ? N - p * NR : NR;                      \
                    const T *w = (G)->packed_w + packed_at(N, k0, kc, p);               \
                    C_T *cb = c + (mb - m0) * ldc + p * NR;                             \
                    if (mr == MR && (p + 2) * NR <= N && PAIR(kc, ab, a_ld, w, (ACC_T *)cb, ldc, first, last, p)) { \
                        p++;  /* two whole panels at once */                            \
                        continue;                                                       \
                    }                                                                   \
                    if (mr == MR && nr == NR) {                                         \
                        KERNEL(kc, ab, a_ld, w, (ACC_T *)cb, ldc, first, last, p);      \
                        continue;                                                       \
                    }                                                                   \
                    ACC_T acc[MR][NR];                                                  \
                    for (size_t r = 0; r < MR; r++)                                     \
                        for (size_t j = 0; j < NR; j++)                                 \
                            acc[r][j] = !first && r < mr && j < nr ? (ACC_T)cb[r * ldc + j] : 0; \
                    KERNEL(kc, ab, a_ld, w, acc[0], NR, first, last, p);                \
                    for (size_t r = 0; r < mr; r++)                                     \
                        for (size_t j = 0; j < nr; j++)                                 \
                            cb[r * ldc + j] = (C_T)acc[r][j];                           \
                }                                                                       \
            }                                                                           \
        }                                                                               \
        free(a);                                                                        \
        return NPU_OK;                                                                  \
    } while (0)

int ops_gemm_f32_prepare(struct ops_gemm_f32 *g, const float *w, size_t N, size_t K)
{
#define W_F32(i) w[i]
    GEMM_PREPARE(g, float, W_F32);
#undef W_F32
}

static int gemm_f32(const struct ops_gemm_f32 *g, ops_pack_f32 pack, const void *ctx, const float *direct,
                    size_t lda, size_t m0, size_t m1, const float *init, float lo, float hi, float *c, size_t ldc)
{
#define KERNEL(kc, ab, a_ld, w, cb, ldc, first, last, p) \
    kernel_f32(kc, ab, a_ld, w, cb, ldc, (first) ? init + (p) * NR : NULL, last, lo, hi)
#if defined(OPS_HAVE_WIDE)
#define PAIR(kc, ab, a_ld, w, cb, ldc, first, last, p)                                                      \
    (ops_wide() && (kernel_f32_pair(kc, ab, a_ld, w, kc * NR, cb, ldc, (first) ? init + (p) * NR : NULL, last, lo, \
                                    hi),                                                                    \
                    true))
#else
#define PAIR(...) false
#endif
    GEMM_RUN(g, float, float, float, KERNEL, PAIR, direct, lda);
#undef PAIR
#undef KERNEL
}

int ops_gemm_f32_run_direct(const struct ops_gemm_f32 *g, ops_pack_f32 pack, const void *ctx, const float *direct,
                            size_t lda, size_t m0, size_t m1, const float *bias, float lo, float hi, float *c,
                            size_t ldc)
{
    /* the bias padded to whole panels: the first k block's starting sums */
    float *init = calloc(panels(g->N) * NR, sizeof *init);
    if (init == NULL)
        return NPU_E_NO_MEMORY;
    if (bias != NULL)
        memcpy(init, bias, g->N * sizeof *init);
    int rc = gemm_f32(g, pack, ctx, direct, lda, m0, m1, init, lo, hi, c, ldc);
    free(init);
    return rc;
}

int ops_gemm_f32_run(const struct ops_gemm_f32 *g, ops_pack_f32 pack, const void *ctx,
                     size_t m0, size_t m1, const float *bias, float *c, size_t ldc)
{
    return ops_gemm_f32_run_direct(g, pack, ctx, NULL, 0, m0, m1, bias, -INFINITY, INFINITY, c, ldc);
}

int ops_gemm_i16_prepare(struct ops_gemm_i16 *g, const void *w, bool w_signed, int32_t w_zero,
                         size_t N, size_t K)
{
#define W_I16(i) ((w_signed ? ((const int8_t *)w)[i] : ((const uint8_t *)w)[i]) - w_zero)
    GEMM_PREPARE(g, int16_t, W_I16);
#undef W_I16
}

int ops_gemm_i16_run(const struct ops_gemm_i16 *g, ops_pack_i16 pack, const void *ctx,
                     size_t m0, size_t m1, int32_t *c, size_t ldc)
{
#define KERNEL(kc, ab, a_ld, w, cb, ldc, first, last, p) ((void)(last), (void)(p), kernel_i16(kc, ab, a_ld, w, cb, ldc, first))
    const int16_t *none = NULL;
#define PAIR(...) false
    GEMM_RUN(g, int16_t, int32_t, uint32_t, KERNEL, PAIR, none, 0);
#undef PAIR
#undef KERNEL
}

/* Freeing either packed W. */
void ops_gemm_f32_free(struct ops_gemm_f32 *g)
{
    free(g->packed_w);
    g->packed_w = NULL;
}

void ops_gemm_i16_free(struct ops_gemm_i16 *g)
{
    free(g->packed_w);
    g->packed_w = NULL;
}
