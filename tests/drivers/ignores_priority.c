/*
 * Broken: priorities ignored.  The driver admits work correctly but hands the
 * hardware the same queue key (500) for every job, and the work reports it as
 * its effective priority.  vts must fail
 * NpuSchedulingAidl.RunInferenceEffectivePriority and
 * NpuSchedulingAidl.RunInferencesPrioritized.
 */
#include "broken.h"

static int same_key_submit(struct npu_hw *hw, uint32_t handle, int32_t key, const struct npu_work_info *info,
                           const struct npu_buffer *inputs, const struct npu_shape *input_shapes, uint32_t input_count,
                           const struct npu_buffer *outputs, struct npu_shape *output_shapes, uint32_t output_count,
                           int32_t *work_id);
BROKEN_HW_INIT(broken_hw.submit = same_key_submit)

static int same_key_submit(struct npu_hw *hw, uint32_t handle, int32_t key, const struct npu_work_info *info,
                           const struct npu_buffer *inputs, const struct npu_shape *input_shapes, uint32_t input_count,
                           const struct npu_buffer *outputs, struct npu_shape *output_shapes, uint32_t output_count,
                           int32_t *work_id)
{
    (void)key;
    return real_hw->submit(hw, handle, 500, info, inputs, input_shapes, input_count, outputs, output_shapes, output_count,
                           work_id);
}

BROKEN_DRIVER(ops.init = broken_init)
