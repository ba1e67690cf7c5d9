/*
 * What the deliberately broken drivers share: the template driver, included
 * whole, so that each broken driver is the template with exactly one thing
 * wrong and follows the template as it evolves.
 *
 * The template's entry point is renamed; BROKEN_DRIVER(patch) defines the real
 * one, which hands out a copy of the template's ops table after `patch` (a
 * statement over `ops`) has replaced what the driver gets wrong.  A driver that
 * breaks how it talks to the hardware instead wraps the npu_hw_api table in
 * its init (see broken_hw below).
 *
 * These drivers exist for tests/test_vts.py: each must fail `npuemu vts` on
 * the check that names its bug, and pass the others.
 */
#ifndef NPU_TESTS_BROKEN_H
#define NPU_TESTS_BROKEN_H

#include <signal.h>
#include <unistd.h>

#define npu_driver_entry template_driver_entry
#include "../../csrc/drivers/template/template.c"
#undef npu_driver_entry

#define BROKEN_DRIVER(patch)                                                                         \
    const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version); \
    const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version)  \
    {                                                                                                \
        static struct npu_driver_ops ops; /* same contents on every call */                        \
        const struct npu_driver_ops *base = template_driver_entry(hw, abi_version);                  \
        if (base == NULL)                                                                            \
            return NULL;                                                                             \
        ops = *base;                                                                                 \
        patch;                                                                                       \
        return &ops;                                                                                 \
    }

/*
 * Init through a patched hardware table: `patch_hw` edits broken_hw, a copy of
 * the hardware's function table; real_hw is the original to call through.  One
 * system per process in these tests, so one static copy is enough.
 */
#define BROKEN_HW_INIT(patch_hw)                                                                     \
    static struct npu_hw_api broken_hw;                                                              \
    static const struct npu_hw_api *real_hw;                                                         \
    static int broken_init(const struct npu_hw_api *hw, struct npu_hw *h, void **out)               \
    {                                                                                                \
        real_hw = hw;                                                                                \
        broken_hw = *hw;                                                                             \
        patch_hw;                                                                                    \
        return tmpl_init(&broken_hw, h, out);                                                        \
    }

#endif
