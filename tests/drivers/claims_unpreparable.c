/*
 * Broken: getSupportedOperations claims an operation that load_model then
 * refuses.  The driver's support query is the hardware's (L2_NORMALIZATION is
 * computable), but its load path has no lowering for L2_NORMALIZATION.  vts must
 * fail NeuralnetworksHidlTest.ClaimedModelsPrepare.
 */
#include "broken.h"

static int no_l2_load(void *d, uint32_t dev, const struct npu_model *m, const struct npu_load_params *p,
                      uint32_t *id)
{
    for (uint32_t k = 0; k < m->operation_count; k++)
        if (m->operations[k].type == NPU_OP_L2_NORMALIZATION)
            return NPU_E_UNSUPPORTED_OPERATION;
    return tmpl_load_model(d, dev, m, p, id);
}

BROKEN_DRIVER(ops.load_model = no_l2_load)
