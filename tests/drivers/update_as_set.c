/*
 * Broken: updateSchedulingConfigs replaces every config, as setSchedulingConfigs
 * does, so the uids it does not name lose theirs.  vts must fail
 * NpuSchedulingAidl.SetReplacesUpdateMerges.
 */
#include "broken.h"

BROKEN_DRIVER(ops.update_scheduling_configs = tmpl_set_configs)
