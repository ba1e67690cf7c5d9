/*
 * Broken: setSchedulingConfigs with no configs changes nothing (the driver
 * returns early on an empty array), where set replaces every config, so an
 * empty set clears them all.  vts must fail NpuSchedulingAidl.SetReplacesUpdateMerges.
 */
#include "broken.h"

static int set_unless_empty(void *d, const struct npu_scheduling_config *c, uint32_t n)
{
    return n == 0 ? NPU_OK : tmpl_set_configs(d, c, n);
}

BROKEN_DRIVER(ops.set_scheduling_configs = set_unless_empty)
