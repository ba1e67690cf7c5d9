/*
 * Broken: getSupportedOperations answers one slot off.  The driver fills its
 * answer for operation i into supported[i + 1] (and says nothing true of the
 * first), so a model's answers belong to the wrong operations.  vts must fail
 * NeuralnetworksHidlTest.GetSupportedOperations.
 */
#include "broken.h"

static int shifted_supported(void *d, uint32_t dev, const struct npu_model *m, bool *supported)
{
    int rc = tmpl_get_supported_operations(d, dev, m, supported);
    if (rc != NPU_OK || m->operation_count == 0)
        return rc;
    for (uint32_t i = m->operation_count - 1; i > 0; i--)
        supported[i] = supported[i - 1];
    supported[0] = false;
    return NPU_OK;
}

BROKEN_DRIVER(ops.get_supported_operations = shifted_supported)
