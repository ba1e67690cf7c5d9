/*
 * Broken: inputs staged in one driver buffer.  Every submission copies its inputs
 * into the same staging area and hands the hardware that, so a work that waits or
 * is preempted while another is submitted computes (or resumes) with the other's
 * input.  One work at a time is right, so only works that overlap show it.  vts must
 * fail NpuSchedulingAidl.PreemptedWorkResumesIntact.
 */
#include "broken.h"

enum { STAGING_BYTES = 1 << 20, MAX_INPUTS = 16 };
static unsigned char staging[STAGING_BYTES];

static int staging_submit(HW_SUBMIT_PARAMS);
BROKEN_HW_INIT(broken_hw.submit = staging_submit)

static int staging_submit(HW_SUBMIT_PARAMS)
{
    struct npu_buffer staged[MAX_INPUTS];
    size_t at = 0;
    for (uint32_t i = 0; i < input_count && input_count <= MAX_INPUTS; i++) {
        if (at + inputs[i].length > STAGING_BYTES)
            return real_hw->submit(hw, handle, key, info, inputs, input_shapes, input_count, outputs, output_shapes, output_count, work_id);
        memcpy(staging + at, inputs[i].data, inputs[i].length);
        staged[i] = (struct npu_buffer){staging + at, inputs[i].length};
        at += (inputs[i].length + 63) & ~(size_t)63;
    }
    if (input_count > MAX_INPUTS)
        return real_hw->submit(hw, handle, key, info, inputs, input_shapes, input_count, outputs, output_shapes, output_count, work_id);
    return real_hw->submit(hw, handle, key, info, staged, input_shapes, input_count, outputs, output_shapes, output_count, work_id);
}

BROKEN_DRIVER(ops.init = broken_init)
