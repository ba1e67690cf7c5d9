/*
 * Broken: a job priority out of 0..1000 is clamped into it and run, where
 * driver.h says the work is refused (NPU_E_INVALID_JOB_PRIORITY).  vts must fail
 * NpuSchedulingAidl.PrioritiesValidatedAcrossRange.
 */
#include "broken.h"

static int clamping_submit(void *d, const struct npu_work_request *q, int32_t *work_id)
{
    struct npu_work_request mine = *q;
    mine.job_priority = q->job_priority < 0 ? 0 : q->job_priority > 1000 ? 1000 : q->job_priority;
    return tmpl_submit(d, &mine, work_id);
}

BROKEN_DRIVER(ops.submit_work = clamping_submit)
