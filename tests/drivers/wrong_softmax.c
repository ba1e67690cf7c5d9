/*
 * Broken: a kernel slightly wrong.  The driver lowers SOFTMAX with its beta
 * scaled by 1.001 (a constant folded once too often), so float32 SOFTMAX outputs
 * are off by about 1e-4: outside float32's tolerance, inside float16's.  vts must
 * fail NeuralnetworksHidlTest.GeneratedTests.
 */
#include "broken.h"

static int skewed_softmax_load(void *d, uint32_t dev, const struct npu_model *m, const struct npu_load_params *p,
                               uint32_t *id)
{
    struct broken_model b;
    int rc = broken_model_copy(m, &b);
    if (rc != NPU_OK)
        return rc;
    for (uint32_t k = 0; k < m->operation_count; k++) {
        const struct npu_operation *op = &m->operations[k];
        if (op->type != NPU_OP_SOFTMAX || op->input_count < 2 || op->inputs[1] >= m->operand_count)
            continue;
        unsigned char *beta = broken_constant(&b, op->inputs[1]);
        if (beta != NULL && b.operands[op->inputs[1]].type == NPU_OPERAND_FLOAT32) {
            float v;
            memcpy(&v, beta, sizeof v);
            v *= 1.001f;
            memcpy(beta, &v, sizeof v);
        }
    }
    rc = tmpl_load_model(d, dev, &b.m, p, id);
    broken_model_free(&b);
    return rc;
}

BROKEN_DRIVER(ops.load_model = skewed_softmax_load)
