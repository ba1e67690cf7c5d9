/*
 * Broken: two devices with the same name.  The template's device is described
 * twice, both "tmpl-npu"; the servicemanager's addService keeps the last one
 * registered and drops the other without a word.  vts must fail
 * NeuralnetworksHidlTest.GetDeviceNameTest.
 */
#include "broken.h"

static int twin_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    return dev > 1 ? NPU_E_BAD_DEVICE : tmpl_get_device_info(d, 0, out);
}

BROKEN_DRIVER(ops.device_count = broken_two_devices; ops.get_device_info = twin_info;
              ops.get_supported_operations = broken_supported_on_either; ops.load_model = broken_load_on_either)
