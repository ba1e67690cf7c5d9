/*
 * kernels/bind_core.c - the bindings (npu/bind.h) of the operations of npu/ops.h's first part (convolutions, pools, element-wise, activations, moving values).
 */
#include "npu/bind.h"
#include "npu/errors.h"

const struct npu_op_def npu_bind_core[] = {
    {.type = -1},
};
