/*
 * kernels/plan.h - a validated, self-contained copy of a model, cut into slices.
 *
 * Internal to the C layer (not part of the driver ABI).  A plan owns copies of
 * everything it needs: every operand as a tensor descriptor (type,
 * quantization, shape as the bindings of npu/bind.h worked it out from the
 * declared shapes and the constants), each operation with its binding, and
 * the constants' bytes.  Running a plan needs an arena for its temporaries
 * (temp_bytes) and the caller's input and output buffers.
 */
#ifndef NPU_KERNELS_PLAN_H
#define NPU_KERNELS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "npu/bind.h"
#include "npu/model.h"

struct npu_plan_operand {
    struct npu_tensor t;   /* t.data: a constant's bytes in consts, NULL for the others */
    bool has_shape;
    int32_t lifetime;
    size_t bytes;
    size_t offset;         /* constants: into consts; temporaries: into the arena */
    uint32_t io_index;     /* MODEL_INPUT / MODEL_OUTPUT: position in the buffer list */
};

struct npu_plan_op {
    const struct npu_op_def *def;
    uint32_t input_count, output_count;
    uint32_t *operands;    /* input_count inputs then output_count outputs (operand indexes) */
    size_t units;          /* def->units, >= 1 */
    double flops, bytes;   /* the whole operation's, from npu_bind_cost */
};

struct npu_plan_slice {
    uint32_t op;
    size_t begin, end;
    double flops, bytes;
};

struct npu_plan {
    uint32_t operand_count;
    struct npu_plan_operand *operands;
    uint32_t op_count;
    struct npu_plan_op *ops;
    uint32_t slice_count;
    struct npu_plan_slice *slices;
    uint32_t input_count, output_count;
    uint32_t *inputs, *outputs;   /* operand indexes */
    unsigned char *consts;
    size_t const_bytes;
    size_t temp_bytes;
    float *channel_scales;        /* every per-channel operand's scales (the tensors point here) */
};

/* Validates (npu_model_validate) and builds a plan; each operation becomes
 * at most slices_per_op slices (>= 1). */
int npu_plan_create(const struct npu_model *model, uint32_t slices_per_op, struct npu_plan **out);
void npu_plan_destroy(struct npu_plan *plan);

/* NPU_OK, or NPU_E_BAD_BUFFER when counts or byte lengths do not match. */
int npu_plan_check_buffers(const struct npu_plan *plan,
                           const struct npu_buffer *inputs, uint32_t input_count,
                           const struct npu_buffer *outputs, uint32_t output_count);

/* Computes one slice.  arena holds temp_bytes bytes.  NPU_OK, or the status
 * of an operation that refused its operands' values (e.g. a GATHER index out
 * of range in an input); why (may be NULL) receives its sentence. */
int npu_plan_run_slice(const struct npu_plan *plan, uint32_t slice, unsigned char *arena,
                       const struct npu_buffer *inputs, const struct npu_buffer *outputs,
                       char *why, size_t why_len);

#endif
