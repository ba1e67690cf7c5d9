/*
 * Broken: a second device whose name is not {VENDOR}-{DEVICE_NAME}.
 *
 * The template's one device is exposed twice; the second copy is named
 * "tmpl_dsp", with no '-'.  The HAL refuses to register it, so vts must fail
 * NeuralnetworksHidlTest.GetDeviceNameTest and pass everything else (the good
 * device still works).
 */
#include "broken.h"

static uint32_t two_devices(void *d)
{
    (void)d;
    return 2;
}

static int badly_named_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    if (dev > 1)
        return NPU_E_BAD_DEVICE;
    int rc = tmpl_get_device_info(d, 0, out);
    if (rc == NPU_OK && dev == 1)
        snprintf(out->name, sizeof out->name, "tmpl_dsp");
    return rc;
}

static int supported_on_either(void *d, uint32_t dev, const struct npu_model *m, bool *supported)
{
    return tmpl_get_supported_operations(d, dev == 1 ? 0 : dev, m, supported);
}

static int load_on_either(void *d, uint32_t dev, const struct npu_model *m, const struct npu_load_params *p,
                          uint32_t *id)
{
    return tmpl_load_model(d, dev == 1 ? 0 : dev, m, p, id);
}

BROKEN_DRIVER(ops.device_count = two_devices; ops.get_device_info = badly_named_info;
              ops.get_supported_operations = supported_on_either; ops.load_model = load_on_either)
