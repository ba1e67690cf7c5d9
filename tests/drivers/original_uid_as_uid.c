/*
 * Broken: work events report the submitting uid as originalUid, so work an app
 * attributed to another uid (it may) is charged to itself.  vts must fail
 * NpuSchedulingAidl.RunInferenceAttributedToOtherUid.
 */
#include "broken.h"

static int own_uid_submit(HW_SUBMIT_PARAMS);
BROKEN_HW_INIT(broken_hw.submit = own_uid_submit)

static int own_uid_submit(HW_SUBMIT_PARAMS)
{
    struct npu_work_info mine = *info;
    mine.original_uid = mine.uid;
    return real_hw->submit(hw, handle, key, &mine, inputs, input_shapes, input_count, outputs, output_shapes, output_count, work_id);
}

BROKEN_DRIVER(ops.init = broken_init)
