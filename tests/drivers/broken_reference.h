/*
 * The reference driver, included whole, for broken drivers that need several
 * devices: its entry point wraps npu_reference_driver_entry and patches the
 * hardware table the reference driver is given (BROKEN_REF_HW(patch_hw): edit
 * broken_hw; call real_hw).
 */
#ifndef NPU_TESTS_BROKEN_REFERENCE_H
#define NPU_TESTS_BROKEN_REFERENCE_H

#define NPU_BUILTIN_REFERENCE /* its own npu_driver_entry is ours to define */
#include "../../csrc/drivers/reference/reference.c"

static struct npu_hw_api broken_hw;     /* what the reference driver is given */
static const struct npu_hw_api *real_hw; /* the hardware's own table */

#define BROKEN_REF_HW(patch_hw)                                                                      \
    const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version); \
    const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version)  \
    {                                                                                                \
        if (hw == NULL || hw->struct_size < sizeof(struct npu_hw_api))                               \
            return NULL;                                                                             \
        real_hw = hw;                                                                                \
        broken_hw = *hw;                                                                             \
        patch_hw;                                                                                    \
        return npu_reference_driver_entry(&broken_hw, abi_version);                                  \
    }

#endif
