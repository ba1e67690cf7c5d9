/*
 * Broken: priorities ignored.  The driver admits work correctly but hands the
 * hardware the same queue key (500) for every job, and the work reports it as
 * its effective priority.  vts must fail
 * NpuSchedulingAidl.RunInferenceEffectivePriority and
 * NpuSchedulingAidl.RunInferencesPrioritized.
 */
#include "broken.h"

static int same_key_submit(HW_SUBMIT_PARAMS);
BROKEN_HW_INIT(broken_hw.submit = same_key_submit)

static int same_key_submit(HW_SUBMIT_PARAMS)
{
    (void)key;
    return real_hw->submit(hw, handle, 500, info, inputs, input_shapes, input_count, outputs, output_shapes, output_count,
                           work_id);
}

BROKEN_DRIVER(ops.init = broken_init)
