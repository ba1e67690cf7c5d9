/*
 * kernels/bind_recurrent.c - the bindings (npu/bind.h) of RNN, LSTM, SVDF, LSH_PROJECTION and RANDOM_MULTINOMIAL.
 */
#include "npu/bind.h"
#include "npu/errors.h"

const struct npu_op_def npu_bind_recurrent[] = {
    {.type = -1},
};
