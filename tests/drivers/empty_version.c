/*
 * Broken: getVersionString() is empty.  vts must fail
 * NeuralnetworksHidlTest.GetDeviceVersionStringTest.
 */
#include "broken.h"

static int versionless_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    int rc = tmpl_get_device_info(d, dev, out);
    if (rc == NPU_OK)
        out->version[0] = '\0';
    return rc;
}

BROKEN_DRIVER(ops.get_device_info = versionless_info)
