/*
 * Broken: work events report the submitting uid as originalUid, so work an app
 * attributed to another uid (it may) is charged to itself.  vts must fail
 * NpuSchedulingAidl.RunInferenceAttributedToOtherUid.
 */
#include "broken.h"

static int own_uid_submit(struct npu_hw *hw, uint32_t handle, int32_t key, const struct npu_work_info *info,
                          const struct npu_buffer *inputs, const struct npu_shape *input_shapes, uint32_t input_count, const struct npu_buffer *outputs, struct npu_shape *output_shapes,
                          uint32_t output_count, int32_t *work_id);
BROKEN_HW_INIT(broken_hw.submit = own_uid_submit)

static int own_uid_submit(struct npu_hw *hw, uint32_t handle, int32_t key, const struct npu_work_info *info,
                          const struct npu_buffer *inputs, const struct npu_shape *input_shapes, uint32_t input_count, const struct npu_buffer *outputs, struct npu_shape *output_shapes,
                          uint32_t output_count, int32_t *work_id)
{
    struct npu_work_info mine = *info;
    mine.original_uid = mine.uid;
    return real_hw->submit(hw, handle, key, &mine, inputs, input_shapes, input_count, outputs, output_shapes, output_count, work_id);
}

BROKEN_DRIVER(ops.init = broken_init)
