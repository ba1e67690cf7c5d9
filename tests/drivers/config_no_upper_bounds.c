/*
 * Broken: config validation without the upper bounds.  The driver checks that
 * priorities are not negative and minPriority <= maxPriority, but takes an
 * appPriority above 1000 or a maxPriority above 2000 (clamping them to the
 * range), where driver.h says such a call is NPU_E_INVALID_PRIORITY and changes
 * nothing.  vts must fail NpuSchedulingAidl.PrioritiesValidatedAcrossRange.
 */
#include "broken.h"

enum { MAX_CONFIGS = 256 };

static int clamp_and_store(int (*store)(void *, const struct npu_scheduling_config *, uint32_t), void *d,
                           const struct npu_scheduling_config *c, uint32_t n)
{
    struct npu_scheduling_config all[MAX_CONFIGS];
    if (n > MAX_CONFIGS)
        return NPU_E_NO_MEMORY;
    for (uint32_t i = 0; i < n; i++) {
        all[i] = c[i];
        if (all[i].app_priority > 1000)
            all[i].app_priority = 1000;
        if (all[i].max_priority > 2000)
            all[i].max_priority = 2000;
        if (all[i].min_priority > all[i].max_priority && c[i].min_priority <= c[i].max_priority)
            all[i].min_priority = all[i].max_priority;
    }
    return store(d, all, n);
}

static int set_clamped(void *d, const struct npu_scheduling_config *c, uint32_t n)
{
    return clamp_and_store(tmpl_set_configs, d, c, n);
}

static int update_clamped(void *d, const struct npu_scheduling_config *c, uint32_t n)
{
    return clamp_and_store(tmpl_update_configs, d, c, n);
}

BROKEN_DRIVER(ops.set_scheduling_configs = set_clamped; ops.update_scheduling_configs = update_clamped)
