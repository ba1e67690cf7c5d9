/*
 * Broken: every work reports deviceNumber 0, whichever of the reference driver's
 * four devices runs it (the number left at the first device's).  vts must fail
 * NpuSchedulingAidl.WorkDeviceNumber.
 */
#include "broken_reference.h"

static int device_zero_submit(HW_SUBMIT_PARAMS)
{
    struct npu_work_info zero = *info;
    zero.device_number = 0;
    return real_hw->submit(hw, handle, key, &zero, inputs, input_shapes, input_count, outputs, output_shapes, output_count, work_id);
}

BROKEN_REF_HW(broken_hw.submit = device_zero_submit)
