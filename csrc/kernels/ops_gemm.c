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

/* GCC's vector extensions: eight lanes, one AVX register (two SSE ones).  The
 * MR x NR block lives in 2 * MR of them for the whole k loop. */
typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int16_t v8h __attribute__((vector_size(16)));
typedef int32_t v8i __attribute__((vector_size(32)));

#define LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define STORE(p, v) memcpy((p), &(v), sizeof(v))
/* The block: row r is c<r>0 (columns 0-7) and c<r>1 (8-15). */
#define LOAD_ROW(r) (LOAD(c##r##0, acc[r]), LOAD(c##r##1, acc[r] + 8))
#define STORE_ROW(r) (STORE(acc[r], c##r##0), STORE(acc[r] + 8, c##r##1))
#define BLOCK(ROW) (ROW(0), ROW(1), ROW(2), ROW(3), ROW(4), ROW(5))
#define BLOCK_UPDATE(x0, x1, x2, x3, x4, x5)                     \
    (c00 += (x0) * b0, c01 += (x0) * b1, c10 += (x1) * b0, c11 += (x1) * b1, \
     c20 += (x2) * b0, c21 += (x2) * b1, c30 += (x3) * b0, c31 += (x3) * b1, \
     c40 += (x4) * b0, c41 += (x4) * b1, c50 += (x5) * b0, c51 += (x5) * b1)

OPS_CLONES
static void kernel_f32(size_t kc, const float *restrict a, const float *restrict b, float acc[MR][NR])
{
    v8f c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    BLOCK(LOAD_ROW);
    for (size_t k = 0; k < kc; k++, a += MR, b += NR) {
        v8f b0, b1;
        LOAD(b0, b);
        LOAD(b1, b + 8);
        BLOCK_UPDATE(a[0], a[1], a[2], a[3], a[4], a[5]);
    }
    BLOCK(STORE_ROW);
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
    BLOCK(LOAD_ROW);
    for (size_t k = 0; k < kc; k++, a += MR, b += NR) {
        v8u b0, b1;
        WIDEN(b0, b);
        WIDEN(b1, b + 8);
        uint32_t a0 = (uint32_t)(int32_t)a[0], a1 = (uint32_t)(int32_t)a[1], a2 = (uint32_t)(int32_t)a[2];
        uint32_t a3 = (uint32_t)(int32_t)a[3], a4 = (uint32_t)(int32_t)a[4], a5 = (uint32_t)(int32_t)a[5];
        BLOCK_UPDATE(a0, a1, a2, a3, a4, a5);
    }
    BLOCK(STORE_ROW);
}

/* The packing of W and the blocked loops, written once for both element types:
 * W's element (n, k) is W_AT(n * K + k); C's column n starts at C_INIT(n). */
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
                for (size_t j = 0; j < NR && p * NR + j < N; j++)                       \
                    for (size_t k = 0; k < kc; k++)                                     \
                        dst[k * NR + j] = (T)(W_AT((p * NR + j) * K + k0 + k));         \
            }                                                                           \
        }                                                                               \
        return NPU_OK;                                                                  \
    } while (0)

#define GEMM_RUN(G, T, C_T, ACC_T, KERNEL, C_INIT)                                       \
    do {                                                                                \
        size_t N = (G)->N, K = (G)->K;                                                  \
        T *a = malloc(sizeof(T) * MR * KC);                                             \
        if (a == NULL)                                                                  \
            return NPU_E_NO_MEMORY;                                                     \
        for (size_t m = m0; m < m1; m++)                                                \
            for (size_t n = 0; n < N; n++)                                              \
                c[(m - m0) * ldc + n] = C_INIT(n);                                      \
        for (size_t k0 = 0; k0 < K; k0 += KC) {                                         \
            size_t kc = K - k0 < KC ? K - k0 : KC;                                      \
            for (size_t mb = m0; mb < m1; mb += MR) {                                   \
                size_t mr = m1 - mb < MR ? m1 - mb : MR;                                \
                for (size_t r = 0; r < mr; r++)                                         \
                    pack(ctx, mb + r, k0, kc, a + r, MR);                               \
                for (size_t r = mr; r < MR; r++)                                        \
                    for (size_t k = 0; k < kc; k++)                                     \
                        a[k * MR + r] = 0;                                              \
                for (size_t p = 0; p < panels(N); p++) {                                \
                    size_t nr = N - p * NR < NR ? N - p * NR : NR;                      \
                    ACC_T acc[MR][NR];                                                  \
                    C_T *cb = c + (mb - m0) * ldc + p * NR;                             \
                    for (size_t r = 0; r < MR; r++)                                     \
                        for (size_t j = 0; j < NR; j++)                                 \
                            acc[r][j] = r < mr && j < nr ? (ACC_T)cb[r * ldc + j] : 0;  \
                    KERNEL(kc, a, (G)->packed_w + packed_at(N, k0, kc, p), acc);        \
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

int ops_gemm_f32_run(const struct ops_gemm_f32 *g, ops_pack_f32 pack, const void *ctx,
                     size_t m0, size_t m1, const float *bias, float *c, size_t ldc)
{
#define BIAS(n) (bias ? bias[n] : 0.0f)
    GEMM_RUN(g, float, float, float, kernel_f32, BIAS);
#undef BIAS
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
#define ZERO(n) ((void)(n), 0)
    GEMM_RUN(g, int16_t, int32_t, uint32_t, kernel_i16, ZERO);
#undef ZERO
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
