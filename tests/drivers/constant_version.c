/*
 * Broken: the version string does not change between builds ("tmpl 0.1",
 * without the build id).  Given this file as source, vts builds it twice and
 * must fail Seed.VersionStringChangesWithBuild.
 */
#include "broken.h"

static int same_version_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    int rc = tmpl_get_device_info(d, dev, out);
    if (rc == NPU_OK)
        snprintf(out->version, sizeof out->version, "tmpl 0.1");
    return rc;
}

BROKEN_DRIVER(ops.get_device_info = same_version_info)
