/*
 * Broken: a second device whose name is not {VENDOR}-{DEVICE_NAME}.
 *
 * The template's one device is exposed twice; the second copy is named
 * "tmpl_dsp", with no '-'.  The HAL refuses to register it, so vts must fail
 * NeuralnetworksHidlTest.GetDeviceNameTest and pass everything else (the good
 * device still works).
 */
#include "broken.h"

static int badly_named_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    if (dev > 1)
        return NPU_E_BAD_DEVICE;
    int rc = tmpl_get_device_info(d, 0, out);
    if (rc == NPU_OK && dev == 1)
        snprintf(out->name, sizeof out->name, "tmpl_dsp");
    return rc;
}

BROKEN_DRIVER(ops.device_count = broken_two_devices; ops.get_device_info = badly_named_info;
              ops.get_supported_operations = broken_supported_on_either; ops.load_model = broken_load_on_either)
