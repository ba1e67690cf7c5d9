/*
 * The float convolutions of csrc/kernels on fixed pseudo-random data, their
 * outputs written to stdout as raw float32 (each operation's after a line
 * "name count\n"), and on stderr whether this CPU runs the x86-64-v3 clones and
 * the AVX-512 kernels.  tests/test_kernels_fma.py builds it twice, with the clones
 * and with the baseline alone (-DNPU_NO_CLONES), and compares the two outputs
 * byte for byte.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "npu/errors.h"
#include "npu/model.h"
#include "npu/ops.h"

static uint32_t state = 12345;

static float draw(void)
{
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return (float)(state >> 8) / (float)(1 << 24) * 2.0f - 1.0f;
}

static struct npu_tensor tensor(uint32_t rank, const uint32_t *dims)
{
    struct npu_tensor t = {.type = NPU_OPERAND_TENSOR_FLOAT32, .rank = rank};
    size_t count = 1;
    for (uint32_t i = 0; i < rank; i++)
        count *= t.dims[i] = dims[i];
    float *v = malloc(count * sizeof *v);
    if (v == NULL)
        exit(2);
    for (size_t i = 0; i < count; i++)
        v[i] = draw();
    t.data = v;
    return t;
}

static void emit(const char *name, int rc, const struct npu_tensor *out)
{
    if (rc != NPU_OK) {
        fprintf(stderr, "%s failed: %d\n", name, rc);
        exit(1);
    }
    size_t count = npu_ops_element_count(out);
    printf("%s %zu\n", name, count);
    fflush(stdout);
    fwrite(out->data, sizeof(float), count, stdout);
    fflush(stdout);
}

#define T(...) tensor(sizeof((uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t), (uint32_t[]){__VA_ARGS__})

int main(void)
{
    /* first: the test draws its inputs again */
    struct npu_tensor x = T(7, 37), w = T(39, 37), bf = T(39), y = T(7, 39);  /* two whole panels and 7 */
    emit("fully_connected", npu_op_fully_connected(&x, &w, &bf, 0, &y, 0, 7), &y);
    /* channel counts off the GEMM's 16 and the depthwise kernel's 8, rows off its 6 */
    struct npu_tensor in = T(1, 9, 11, 38), out = T(1, 9, 11, 21), out4 = T(1, 5, 6, 38);
    struct npu_window same = {1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 0, false};
    struct npu_window one = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, false};
    struct npu_window strided = {1, 1, 1, 1, 2, 2, 1, 1, 3, 3, 3, false};
    struct npu_tensor f3 = T(21, 3, 3, 38), f1 = T(21, 1, 1, 38), b = T(21);
    struct npu_tensor fg = T(22, 3, 3, 19), bg = T(22), outg = T(1, 9, 11, 22);
    emit("conv_2d", npu_op_conv_2d(&in, &f3, &b, &same, &out, 0, 9), &out);
    emit("conv_2d_1x1", npu_op_conv_2d(&in, &f1, &b, &one, &out, 0, 9), &out);
    emit("grouped_conv_2d", npu_op_grouped_conv_2d(&in, &fg, &bg, &same, 2, &outg, 0, 9), &outg);
    struct npu_tensor fd = T(1, 3, 3, 38), bd = T(38), fd2 = T(1, 3, 3, 76), bd2 = T(76), out2 = T(1, 5, 6, 76);
    emit("depthwise_conv_2d", npu_op_depthwise_conv_2d(&in, &fd, &bd, &strided, 1, &out4, 0, 5), &out4);
    /* 91 channels: 64 + 16 + 8 + 3 (the AVX-512 kernel's four vectors, one, eight lanes, one
     * by one; the others' 32 + 8 ...), interior and border pixels */
    struct npu_tensor ind = T(1, 7, 9, 91), fd3 = T(1, 3, 3, 91), bd3 = T(91), outd = T(1, 7, 9, 91);
    emit("depthwise_conv_2d_91", npu_op_depthwise_conv_2d(&ind, &fd3, &bd3, &same, 1, &outd, 0, 7), &outd);
    emit("depthwise_conv_2d_x2", npu_op_depthwise_conv_2d(&in, &fd2, &bd2, &strided, 2, &out2, 0, 5), &out2);
    struct npu_window up = {1, 0, 1, 0, 2, 2, 1, 1, 3, 3, 0, false};
    struct npu_tensor ft = T(21, 3, 3, 38), yt = T(1, 18, 22, 21);
    emit("transpose_conv_2d", npu_op_transpose_conv_2d(&in, &ft, &b, &up, &yt, 0, 18), &yt);
    __builtin_cpu_init();
    fprintf(stderr, "x86-64-v3: %s, avx512f: %s\n", __builtin_cpu_supports("x86-64-v3") ? "yes" : "no",
            __builtin_cpu_supports("avx512f") ? "yes" : "no");
    return 0;
}
