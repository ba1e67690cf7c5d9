/*
 * The packed, cache-blocked GEMM under CONV_2D and FULLY_CONNECTED:
 *     C[m][n] = bias[n] + sum_k A(m, k) * W[n][k].
 * W (the filter, [n][k] as NNAPI stores it) is packed once per call into
 * panels of NR columns, each KC deep, so a micro-kernel streams one panel
 * from cache while it holds an MR x NR block of C in registers.  A is never
 * materialised: a callback packs MR rows of it, KC at a time (for a
 * convolution that is im2col on the fly), into a buffer that stays in L1.
 * The sum over k keeps one order for every n and every machine (the vector
 * lanes run over n), so results do not depend on the instruction set; the
 * micro-kernels are built twice, for AVX2 and for the baseline, and the
 * loader picks one (GCC's target_clones).
 */
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

#define MR 6
#define NR 16  /* the micro-kernels hold two 8-lane vectors per row */
#define KC 256

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(NPU_NO_CLONES)
#define OPS_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define OPS_CLONES
#endif

static size_t panels(size_t n)
{
    return (n + NR - 1) / NR;
}

/* Offset of (k block starting at k0, panel p) in a packed W. */
static size_t packed_at(size_t N, size_t k0, size_t kc, size_t p)
{
    return k0 * panels(N) * NR + p * kc * NR;
}

int ops_gemm_f32_prepare(struct ops_gemm_f32 *g, const float *w, size_t N, size_t K)
{
    g->N = N;
    g->K = K;
    g->packed_w = calloc(panels(N) * NR * K, sizeof *g->packed_w);
    if (g->packed_w == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t k0 = 0; k0 < K; k0 += KC) {
        size_t kc = K - k0 < KC ? K - k0 : KC;
        for (size_t p = 0; p < panels(N); p++) {
            float *dst = g->packed_w + packed_at(N, k0, kc, p);
            for (size_t j = 0; j < NR && p * NR + j < N; j++)
                for (size_t k = 0; k < kc; k++)
                    dst[k * NR + j] = w[(p * NR + j) * K + k0 + k];
        }
    }
    return NPU_OK;
}

void ops_gemm_f32_free(struct ops_gemm_f32 *g)
{
    free(g->packed_w);
    g->packed_w = NULL;
}

/* GCC's vector extensions: eight lanes, one AVX register (two SSE ones).  The
 * MR x NR block lives in 2 * MR of them for the whole k loop. */
typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int16_t v8h __attribute__((vector_size(16)));
typedef int32_t v8i __attribute__((vector_size(32)));

#define LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define STORE(p, v) memcpy((p), &(v), sizeof(v))

OPS_CLONES
static void kernel_f32(size_t kc, const float *restrict a, const float *restrict b, float acc[MR][NR])
{
    v8f c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    LOAD(c00, acc[0]); LOAD(c01, acc[0] + 8); LOAD(c10, acc[1]); LOAD(c11, acc[1] + 8);
    LOAD(c20, acc[2]); LOAD(c21, acc[2] + 8); LOAD(c30, acc[3]); LOAD(c31, acc[3] + 8);
    LOAD(c40, acc[4]); LOAD(c41, acc[4] + 8); LOAD(c50, acc[5]); LOAD(c51, acc[5] + 8);
    for (size_t k = 0; k < kc; k++, a += MR, b += NR) {
        v8f b0, b1;
        LOAD(b0, b);
        LOAD(b1, b + 8);
        c00 += a[0] * b0; c01 += a[0] * b1;
        c10 += a[1] * b0; c11 += a[1] * b1;
        c20 += a[2] * b0; c21 += a[2] * b1;
        c30 += a[3] * b0; c31 += a[3] * b1;
        c40 += a[4] * b0; c41 += a[4] * b1;
        c50 += a[5] * b0; c51 += a[5] * b1;
    }
    STORE(acc[0], c00); STORE(acc[0] + 8, c01); STORE(acc[1], c10); STORE(acc[1] + 8, c11);
    STORE(acc[2], c20); STORE(acc[2] + 8, c21); STORE(acc[3], c30); STORE(acc[3] + 8, c31);
    STORE(acc[4], c40); STORE(acc[4] + 8, c41); STORE(acc[5], c50); STORE(acc[5] + 8, c51);
}

int ops_gemm_f32_run(const struct ops_gemm_f32 *g, ops_pack_f32 pack, const void *ctx,
                     size_t m0, size_t m1, const float *bias, float *c, size_t ldc)
{
    size_t N = g->N, K = g->K;
    float *a = malloc(sizeof(float) * MR * KC);
    if (a == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t m = m0; m < m1; m++)
        for (size_t n = 0; n < N; n++)
            c[(m - m0) * ldc + n] = bias ? bias[n] : 0.0f;
    for (size_t k0 = 0; k0 < K; k0 += KC) {
        size_t kc = K - k0 < KC ? K - k0 : KC;
        for (size_t mb = m0; mb < m1; mb += MR) {
            size_t mr = m1 - mb < MR ? m1 - mb : MR;
            for (size_t r = 0; r < mr; r++)
                pack(ctx, mb + r, k0, kc, a + r, MR);
            for (size_t r = mr; r < MR; r++)
                for (size_t k = 0; k < kc; k++)
                    a[k * MR + r] = 0.0f;
            for (size_t p = 0; p < panels(N); p++) {
                size_t nr = N - p * NR < NR ? N - p * NR : NR;
                float acc[MR][NR];
                float *cb = c + (mb - m0) * ldc + p * NR;
                for (size_t r = 0; r < MR; r++)
                    for (size_t j = 0; j < NR; j++)
                        acc[r][j] = r < mr && j < nr ? cb[r * ldc + j] : 0.0f;
                kernel_f32(kc, a, g->packed_w + packed_at(N, k0, kc, p), acc);
                for (size_t r = 0; r < mr; r++)
                    for (size_t j = 0; j < nr; j++)
                        cb[r * ldc + j] = acc[r][j];
            }
        }
    }
    free(a);
    return NPU_OK;
}

int ops_gemm_i16_prepare(struct ops_gemm_i16 *g, const void *w, bool w_signed, int32_t w_zero,
                         size_t N, size_t K)
{
    g->N = N;
    g->K = K;
    g->packed_w = calloc(panels(N) * NR * K, sizeof *g->packed_w);
    if (g->packed_w == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t k0 = 0; k0 < K; k0 += KC) {
        size_t kc = K - k0 < KC ? K - k0 : KC;
        for (size_t p = 0; p < panels(N); p++) {
            int16_t *dst = g->packed_w + packed_at(N, k0, kc, p);
            for (size_t j = 0; j < NR && p * NR + j < N; j++)
                for (size_t k = 0; k < kc; k++) {
                    size_t at = (p * NR + j) * K + k0 + k;
                    int32_t v = w_signed ? ((const int8_t *)w)[at] : ((const uint8_t *)w)[at];
                    dst[k * NR + j] = (int16_t)(v - w_zero);
                }
        }
    }
    return NPU_OK;
}

void ops_gemm_i16_free(struct ops_gemm_i16 *g)
{
    free(g->packed_w);
    g->packed_w = NULL;
}

/* Sums in uint32 lanes, which wrap where int32 would overflow (undefined in
 * C); for any K a real model has (K * 255 * 255 < 2^31) the sum is exact. */
/* eight int16 at p as uint32 lanes (sign-extended) */
#define WIDEN(v, p)                                     \
    do {                                                \
        v8h h_;                                         \
        LOAD(h_, (p));                                  \
        (v) = (v8u)__builtin_convertvector(h_, v8i);    \
    } while (0)

OPS_CLONES
static void kernel_i16(size_t kc, const int16_t *restrict a, const int16_t *restrict b, uint32_t acc[MR][NR])
{
    v8u c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    LOAD(c00, acc[0]); LOAD(c01, acc[0] + 8); LOAD(c10, acc[1]); LOAD(c11, acc[1] + 8);
    LOAD(c20, acc[2]); LOAD(c21, acc[2] + 8); LOAD(c30, acc[3]); LOAD(c31, acc[3] + 8);
    LOAD(c40, acc[4]); LOAD(c41, acc[4] + 8); LOAD(c50, acc[5]); LOAD(c51, acc[5] + 8);
    for (size_t k = 0; k < kc; k++, a += MR, b += NR) {
        v8u b0, b1;
        WIDEN(b0, b);
        WIDEN(b1, b + 8);
        uint32_t a0 = (uint32_t)(int32_t)a[0], a1 = (uint32_t)(int32_t)a[1], a2 = (uint32_t)(int32_t)a[2];
        uint32_t a3 = (uint32_t)(int32_t)a[3], a4 = (uint32_t)(int32_t)a[4], a5 = (uint32_t)(int32_t)a[5];
        c00 += a0 * b0; c01 += a0 * b1;
        c10 += a1 * b0; c11 += a1 * b1;
        c20 += a2 * b0; c21 += a2 * b1;
        c30 += a3 * b0; c31 += a3 * b1;
        c40 += a4 * b0; c41 += a4 * b1;
        c50 += a5 * b0; c51 += a5 * b1;
    }
    STORE(acc[0], c00); STORE(acc[0] + 8, c01); STORE(acc[1], c10); STORE(acc[1] + 8, c11);
    STORE(acc[2], c20); STORE(acc[2] + 8, c21); STORE(acc[3], c30); STORE(acc[3] + 8, c31);
    STORE(acc[4], c40); STORE(acc[4] + 8, c41); STORE(acc[5], c50); STORE(acc[5] + 8, c51);
}

int ops_gemm_i16_run(const struct ops_gemm_i16 *g, ops_pack_i16 pack, const void *ctx,
                     size_t m0, size_t m1, int32_t *c, size_t ldc)
{
    size_t N = g->N, K = g->K;
    int16_t *a = malloc(sizeof(int16_t) * MR * KC);
    if (a == NULL)
        return NPU_E_NO_MEMORY;
    for (size_t m = m0; m < m1; m++)
        memset(c + (m - m0) * ldc, 0, N * sizeof *c);
    for (size_t k0 = 0; k0 < K; k0 += KC) {
        size_t kc = K - k0 < KC ? K - k0 : KC;
        for (size_t mb = m0; mb < m1; mb += MR) {
            size_t mr = m1 - mb < MR ? m1 - mb : MR;
            for (size_t r = 0; r < mr; r++)
                pack(ctx, mb + r, k0, kc, a + r, MR);
            for (size_t r = mr; r < MR; r++)
                for (size_t k = 0; k < kc; k++)
                    a[k * MR + r] = 0;
            for (size_t p = 0; p < panels(N); p++) {
                size_t nr = N - p * NR < NR ? N - p * NR : NR;
                uint32_t acc[MR][NR];
                int32_t *cb = c + (mb - m0) * ldc + p * NR;
                for (size_t r = 0; r < MR; r++)
                    for (size_t j = 0; j < NR; j++)
                        acc[r][j] = r < mr && j < nr ? (uint32_t)cb[r * ldc + j] : 0u;
                kernel_i16(kc, a, g->packed_w + packed_at(N, k0, kc, p), acc);
                for (size_t r = 0; r < mr; r++)
                    for (size_t j = 0; j < nr; j++)
                        cb[r * ldc + j] = (int32_t)acc[r][j];
            }
        }
    }
    free(a);
    return NPU_OK;
}
