/*
 * What the broken drivers' wrappers of the hardware's functions share: the
 * parameters of npu_hw_api.submit, so that a wrapper is declared in one line.
 */
#ifndef NPU_TESTS_BROKEN_HW_H
#define NPU_TESTS_BROKEN_HW_H

#include "npu/hw.h"

#define HW_SUBMIT_PARAMS                                                                                \
    struct npu_hw *hw, uint32_t handle, int32_t key, const struct npu_work_info *info,                  \
        const struct npu_buffer *inputs, const struct npu_shape *input_shapes, uint32_t input_count,    \
        const struct npu_buffer *outputs, struct npu_shape *output_shapes, uint32_t output_count,       \
        int32_t *work_id

#endif
