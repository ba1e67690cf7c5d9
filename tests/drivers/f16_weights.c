/*
 * Broken: weights stored as float16.  At load the driver rounds every float32
 * constant tensor to float16 precision (to halve its weight memory), so outputs are
 * off by about 5e-4 relative: far outside float32's tolerance.  vts must fail
 * NeuralnetworksHidlTest.GeneratedTests.
 */
#include "broken.h"

static float to_half_precision(float x)
{
    if (x == 0.0f || !isfinite(x))
        return x;
    int e;
    float m = frexpf(x, &e);   /* 0.5 <= |m| < 1: 11 significant bits, as float16 keeps */
    return ldexpf(roundf(m * 2048.0f) / 2048.0f, e);
}

static int half_weights_load(void *d, uint32_t dev, const struct npu_model *m, const struct npu_load_params *p,
                             uint32_t *id)
{
    struct broken_model b;
    int rc = broken_model_copy(m, &b);
    if (rc != NPU_OK)
        return rc;
    for (uint32_t i = 0; i < m->operand_count; i++) {
        unsigned char *bytes = broken_constant(&b, i);
        if (bytes == NULL || b.operands[i].type != NPU_OPERAND_TENSOR_FLOAT32)
            continue;
        for (uint32_t k = 0; k + sizeof(float) <= b.operands[i].location.length; k += sizeof(float)) {
            float v;
            memcpy(&v, bytes + k, sizeof v);
            v = to_half_precision(v);
            memcpy(bytes + k, &v, sizeof v);
        }
    }
    rc = tmpl_load_model(d, dev, &b.m, p, id);
    broken_model_free(&b);
    return rc;
}

BROKEN_DRIVER(ops.load_model = half_weights_load)
