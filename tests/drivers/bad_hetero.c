/*
 * Broken: the heterogeneous device is described wrongly.  Besides the
 * template's "tmpl-npu", the driver exposes "tmpl-multi", an interface that
 * manages tmpl-npu and a device 7 that it never exposes on its own, and it
 * calls that interface an ACCELERATOR rather than OTHER.  NN HAL 1.2 wants a
 * heterogeneous interface typed OTHER, with every device it manages exposed
 * too.  vts must fail Seed.ValidDeviceTypes and Seed.HeterogeneousPartsExposed.
 */
#include "broken.h"

static int multi_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    if (dev > 1)
        return NPU_E_BAD_DEVICE;
    int rc = tmpl_get_device_info(d, 0, out);
    if (rc == NPU_OK && dev == 1) {
        snprintf(out->name, sizeof out->name, "tmpl-multi");
        out->type = NPU_DEVICE_ACCELERATOR;   /* should be NPU_DEVICE_OTHER */
        out->part_count = 2;
        out->parts[0] = 0;
        out->parts[1] = 7;                    /* no such device */
    }
    return rc;
}

BROKEN_DRIVER(ops.device_count = broken_two_devices; ops.get_device_info = multi_info;
              ops.get_supported_operations = broken_supported_on_either; ops.load_model = broken_load_on_either)
