/*
 * Broken: every work reports deviceNumber 0, whichever of the reference driver's
 * four devices runs it (the number left at the first device's).  vts must fail
 * NpuSchedulingAidl.WorkDeviceNumber.
 */
#include "broken_reference.h"

static int device_zero_submit(struct npu_hw *hw, uint32_t handle, int32_t key, const struct npu_work_info *info,
                              const struct npu_buffer *inputs, const struct npu_shape *input_shapes, uint32_t input_count,
                              const struct npu_buffer *outputs, struct npu_shape *output_shapes, uint32_t output_count, int32_t *work_id)
{
    struct npu_work_info zero = *info;
    zero.device_number = 0;
    return real_hw->submit(hw, handle, key, &zero, inputs, input_shapes, input_count, outputs, output_shapes, output_count, work_id);
}

BROKEN_REF_HW(broken_hw.submit = device_zero_submit)
