/*
 * Broken: the group id sticks.  The driver remembers the last groupId it was
 * given and stamps it on every later work, even one submitted with none (a
 * field of the instance set only when present).  vts must fail
 * NpuSchedulingAidl.RunInferencesBackToBack.
 */
#include "broken.h"

static bool have_group;
static uint8_t last_group[16];

static int sticky_group_submit(void *d, const struct npu_work_request *q, int32_t *work_id)
{
    struct npu_work_request mine = *q;
    if (q->has_group_id) {
        have_group = true;
        memcpy(last_group, q->group_id, sizeof last_group);
    }
    mine.has_group_id = have_group;
    memcpy(mine.group_id, last_group, sizeof last_group);
    return tmpl_submit(d, &mine, work_id);
}

BROKEN_DRIVER(ops.submit_work = sticky_group_submit)
