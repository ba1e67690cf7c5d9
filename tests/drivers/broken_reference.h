/*
 * The reference driver, included whole, for broken drivers that need several
 * devices.  BROKEN_REF_HW(patch_hw) defines the entry point: the reference
 * driver's ops, with an init that hands the reference driver a patched copy of
 * the hardware's function table (`patch_hw` edits broken_hw; real_hw is the
 * original to call through).
 */
#ifndef NPU_TESTS_BROKEN_REFERENCE_H
#define NPU_TESTS_BROKEN_REFERENCE_H

#define NPU_BUILTIN_REFERENCE /* its own npu_driver_entry is ours to define */
#include "../../csrc/drivers/reference/reference.c"
#include "broken_hw.h"

static struct npu_hw_api broken_hw;     /* what the reference driver is given */
static const struct npu_hw_api *real_hw; /* the hardware's own table */

#define BROKEN_REF_HW(patch_hw)                                                                      \
    static int broken_ref_init(const struct npu_hw_api *hw, struct npu_hw *h, void **out)           \
    {                                                                                                \
        real_hw = hw;                                                                                \
        broken_hw = *hw;                                                                             \
        patch_hw;                                                                                    \
        return ref_init(&broken_hw, h, out);                                                         \
    }                                                                                                \
    const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version); \
    const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version)  \
    {                                                                                                \
        static struct npu_driver_ops ops;                                                            \
        const struct npu_driver_ops *base = npu_reference_driver_entry(hw, abi_version);             \
        if (base == NULL)                                                                            \
            return NULL;                                                                             \
        ops = *base;                                                                                 \
        ops.init = broken_ref_init;                                                                  \
        return &ops;                                                                                 \
    }

#endif
