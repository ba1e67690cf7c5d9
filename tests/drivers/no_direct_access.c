/*
 * Broken: direct access not enforced.  The driver stores every config as if
 * hasDirectAccess were true, so a uid the framework denied direct access can
 * still submit.  vts must fail NpuSchedulingAidl.RunInferenceFailsWithoutDirectAccess.
 */
#include "broken.h"

enum { MAX_CONFIGS = 256 };

static int store_all_direct(int (*store)(void *, const struct npu_scheduling_config *, uint32_t), void *d,
                            const struct npu_scheduling_config *c, uint32_t n)
{
    struct npu_scheduling_config all[MAX_CONFIGS];
    if (n > MAX_CONFIGS)
        return NPU_E_NO_MEMORY;
    for (uint32_t i = 0; i < n; i++) {
        all[i] = c[i];
        all[i].has_direct_access = true;
    }
    return store(d, all, n);
}

static int set_all_direct(void *d, const struct npu_scheduling_config *c, uint32_t n)
{
    return store_all_direct(tmpl_set_configs, d, c, n);
}

static int update_all_direct(void *d, const struct npu_scheduling_config *c, uint32_t n)
{
    return store_all_direct(tmpl_update_configs, d, c, n);
}

BROKEN_DRIVER(ops.set_scheduling_configs = set_all_direct; ops.update_scheduling_configs = update_all_direct)
