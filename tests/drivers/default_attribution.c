/*
 * Broken: a uid with no config may attribute work to other uids: the driver's
 * default config has canAttributeOtherUid set (driver.h's default has not).
 * vts must fail NpuSchedulingAidl.SetReplacesUpdateMerges, which starts from a
 * uid with no config.
 */
#include "broken.h"

static int attributing_submit(void *d, const struct npu_work_request *q, int32_t *work_id)
{
    struct tmpl *t = d;
    for (uint32_t i = 0; i < t->ncfg; i++)
        if (t->cfg[i].uid == q->uid)
            return tmpl_submit(d, q, work_id);
    /* no config: the template's defaults, but with attribution allowed */
    struct npu_scheduling_config lenient = {.min_priority = 0, .max_priority = 2000, .uid = q->uid,
                                            .app_priority = 1000, .has_direct_access = true,
                                            .can_attribute_other_uid = true};
    struct npu_scheduling_config *saved = t->cfg;
    uint32_t count = t->ncfg;
    t->cfg = &lenient;
    t->ncfg = 1;
    int rc = tmpl_submit(d, q, work_id);
    t->cfg = saved;
    t->ncfg = count;
    return rc;
}

BROKEN_DRIVER(ops.submit_work = attributing_submit)
