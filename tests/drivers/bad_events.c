/*
 * Broken: work events out of order.  Each submission is first queued, then
 * cancelled at once, then queued again for real, so the driver reports the
 * caller's work ending (CANCELLED_USER, or COMPLETED when it was quicker than
 * the cancel) before the work that really runs has even been requested.  The
 * callback's debounce folds the two into one clean-looking requested/started/
 * ended; the HAL's undebounced record does not.
 * vts must fail NpuSchedulingAidl.RunInferenceStatusCallbacks and the other
 * checks that count a work's events (attributed, back to back, cancelled).
 */
#include "broken.h"

static int stuttering_submit(HW_SUBMIT_PARAMS);
BROKEN_HW_INIT(broken_hw.submit = stuttering_submit)

static int stuttering_submit(HW_SUBMIT_PARAMS)
{
    int32_t first;
    int rc = real_hw->submit(hw, handle, key, info, inputs, input_shapes, input_count, outputs, output_shapes,
                             output_count, &first);
    if (rc != NPU_OK)
        return rc;
    real_hw->cancel(hw, first); /* a small work may have ended already: then it completed */
    return real_hw->submit(hw, handle, key, info, inputs, input_shapes, input_count, outputs, output_shapes,
                           output_count, work_id);
}

BROKEN_DRIVER(ops.init = broken_init)
