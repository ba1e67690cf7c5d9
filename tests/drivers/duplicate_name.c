/*
 * Broken: two devices with the same name.  The template's device is described
 * twice, both "tmpl-npu"; the servicemanager's addService keeps the last one
 * registered and drops the other without a word.  vts must fail
 * NeuralnetworksHidlTest.GetDeviceNameTest.
 */
#include "broken.h"

static uint32_t two_devices(void *d)
{
    (void)d;
    return 2;
}

static int twin_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    return dev > 1 ? NPU_E_BAD_DEVICE : tmpl_get_device_info(d, 0, out);
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

BROKEN_DRIVER(ops.device_count = two_devices; ops.get_device_info = twin_info;
              ops.get_supported_operations = supported_on_either; ops.load_model = load_on_either)
