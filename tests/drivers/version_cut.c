/*
 * Broken: the version string is cut off, one byte short of its closing bracket
 * ("tmpl 0.1 (build 0123456789a"): formatted into a buffer sized for the id's
 * length, without the ')'.  It still differs per build.  vts must fail
 * NeuralnetworksHidlTest.GetDeviceVersionStringTest.
 */
#include "broken.h"

static int cut_version_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    int rc = tmpl_get_device_info(d, dev, out);
    size_t len = strlen(out->version);
    if (rc == NPU_OK && len > 2)
        out->version[len - 2] = '\0';
    return rc;
}

BROKEN_DRIVER(ops.get_device_info = cut_version_info)
