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


static size_t panels(size_t n)
{
    return (n + NR - 1) / NR;
}

/* Offset of (k block starting at k0, panel p) in a packed W. */
static size_t packed_at(size_t N, size_t k0, size_t kc, size_t p)
{
    return k0 * panels(N) * NR + p * kc * NR;
}

/* The MR x NR block lives in 2 * MR vectors (ops_internal.h's v8f) for the
 * whole k loop. */
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int16_t v8h __attribute__((vector_size(16)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* The block: row r is c<r>0 (columns 0-7) and c<r>1 (8-15). */
#define LOAD_ROW(r) (LOAD(c##r##0, c + r * ldc), LOAD(c##r##1, c + r * ldc + 8))
#define STORE_ROW(r) (STORE(c + r * ldc, c##r##0), STORE(c + r * ldc + 8, c##r##1))
#define BLOCK(ROW) (ROW(0), ROW(1), ROW(2), ROW(3), ROW(4), ROW(5))
#define BLOCK_UPDATE(x0, x1, x2, x3, x4, x5)                     \
    (c00 += (x0) * b0, c01 += (x0) * b1, c10 += (x1) * b0, c11 += (x1) * b1, \
     c20 += (x2) * b0, c21 += (x2) * b1, c30 += (x3) * b0, c31 += (x3) * b1, \
     c40 += (x4) * b0, c41 += (x4) * b1, c50 += (x5) * b0, c51 += (x5) * b1)

/* C's block (row stride ldc) += A's MR x kc block times a W panel; A's (r, k)
 * is a[r * lda + k * step] (packed: lda 1, step MR; rows read in place: lda
 * the row stride, step 1). */
OPS_CLONES
static void kernel_f32(size_t kc, const float *restrict a, size_t lda, size_t step, const float *restrict b,
                       float *restrict c, size_t ldc)
{
    v8f c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    BLOCK(LOAD_ROW);
    for (size_t k = 0, i = 0; k < kc; k++, i += step, b += NR) {
        v8f b0, b1;
        LOAD(b0, b);
        LOAD(b1, b + 8);
        BLOCK_UPDATE(a0[i], a1[i], a2[i], a3[i], a4[i], a5[i]);
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
static void kernel_i16(size_t kc, const int16_t *restrict a, size_t lda, size_t step, const int16_t *restrict b,
                       uint32_t *restrict c, size_t ldc)
{
    (void)lda, (void)step;  /* always packed: centring needs the copy */
    v8u c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    BLOCK(LOAD_ROW);
    for (size_t k = 0; k < kc; k++, a += MR, b += NR) {
        v8u b0, b1;
        WIDEN(b0, b);
        WIDEN(b1, b + 8);
        uint32_t x0 = (uint32_t)(int32_t)a[0], x1 = (uint32_t)(int32_t)a[1], x2 = (uint32_t)(int32_t)a[2];
        uint32_t x3 = (uint32_t)(int32_t)a[3], x4 = (uint32_t)(int32_t)a[4], x5 = (uint32_t)(int32_t)a[5];
        BLOCK_UPDATE(x0, x1, x2, x3, x4, x5);
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
                size_t nr = N - p * NR < NR ? N - p * NR : NR;                          \
                for (size_t k = 0; k < kc; k++) /* written in order */                  \
                    for (size_t j = 0; j < nr; j++)                                     \
                        dst[k * NR + j] = (T)(W_AT((p * NR + j) * K + k0 + k));         \
            }                                                                           \
        }                                                                               \
        return NPU_OK;                                                                  \
    } while (0)

/* A's rows come from `direct` in place (row m at direct + m * lda) when it is
 * not NULL and a whole MR rows remain, else the callback packs them; a whole
 * MR x NR block of C is summed in place, an edge one through a local block. */
#define GEMM_RUN(G, T, C_T, ACC_T, KERNEL, C_INIT, DIRECT, LDA)                          \
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
                size_t mr = m1 - mb < MR ? m1 - mb : MR, a_ld = 1, step = MR;           \
                const T *ab = a;                                                        \
                if ((DIRECT) != NULL && mr == MR) {                                     \
                    ab = (DIRECT) + mb * (LDA) + k0;                                    \
                    a_ld = (LDA);                                                       \
                    step = 1;                                                           \
                } else {                                                                \
                    for (size_t r = 0; r < mr; r++)                                     \
                        pack(ctx, mb + r, k0, kc, a + r, MR);                           \
                    for (size_t r = mr; r < MR; r++)                                    \
                        for (size_t k = 0; k < kc; k++)                                 \
                            a[k * MR + r] = 0;                                          \
                }                                                                       \
                for (size_t p = 0; p < panels(N); p++) {                                \
                    size_t nr = N - p * NR < NR ? N - p * NR : NR;                      \
                    const T *w = (G)->packed_w + packed_at(N, k0, kc, p);               \
                    C_T *cb = c + (mb - m0) * ldc + p * NR;                             \
                    if (mr == MR && nr == NR) {                                         \
                        KERNEL(kc, ab, a_ld, step, w, (ACC_T *)cb, ldc);                \
                        continue;                                                       \
                    }                                                                   \
                    ACC_T acc[MR][NR];                                                  \
                    for (size_t r = 0; r < MR; r++)                                     \
                        for (size_t j = 0; j < NR; j++)                                 \
                            acc[r][j] = r < mr && j < nr ? (ACC_T)cb[r * ldc + j] : 0;  \
                    KERNEL(kc, ab, a_ld, step, w, acc[0], NR);                          \
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

int ops_gemm_f32_run_direct(const struct ops_gemm_f32 *g, ops_pack_f32 pack, const void *ctx, const float *direct,
                            size_t lda, size_t m0, size_t m1, const float *bias, float *c, size_t ldc)
{
#define BIAS(n) (bias ? bias[n] : 0.0f)
    GEMM_RUN(g, float, float, float, kernel_f32, BIAS, direct, lda);
#undef BIAS
}

int ops_gemm_f32_run(const struct ops_gemm_f32 *g, ops_pack_f32 pack, const void *ctx,
                     size_t m0, size_t m1, const float *bias, float *c, size_t ldc)
{
    return ops_gemm_f32_run_direct(g, pack, ctx, NULL, 0, m0, m1, bias, c, ldc);
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
    const int16_t *none = NULL;
    GEMM_RUN(g, int16_t, int32_t, uint32_t, kernel_i16, ZERO, none, 0);
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
