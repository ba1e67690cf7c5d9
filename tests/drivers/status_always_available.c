/*
 * Broken: the status is hard-coded AVAILABLE, even when every channel hangs.
 * vts must fail Seed.StatusTruthful.
 */
#include "broken.h"

static int always_available_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    int rc = tmpl_get_device_info(d, dev, out);
    if (rc == NPU_OK)
        out->status = NPU_STATUS_AVAILABLE;
    return rc;
}

BROKEN_DRIVER(ops.get_device_info = always_available_info)
