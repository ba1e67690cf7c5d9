/*
 * kernels/plan.h - a validated, self-contained copy of a model, cut into slices.
 *
 * Internal to the C layer (not part of the driver ABI).  A plan owns copies of
 * everything it needs: every operand as a tensor descriptor (type,
 * quantization, shape as the bindings of npu/bind.h worked it out from the
 * declared shapes and the constants), each operation with its binding, and
 * the constants' bytes.  Running a plan needs an arena for its temporaries
 * (temp_bytes) and the caller's input and output buffers.
 *
 * Shapes known only at execution.  When a model input leaves dimensions
 * unspecified, or an operation's output shape depends on values (the count
 * BOX_WITH_NMS_LIMIT selects, a RESHAPE whose shape is a model input), the
 * plan made at load is *dynamic*: it has no slices.  Each execution runs an
 * instance (npu_plan_begin) resolved with the inputs' real dimensions: every
 * operation is prepared again by its binding with the shapes of this run,
 * then its temporaries are laid out and its slices costed.  An instance that
 * resolves from the input dimensions alone is kept, per input-shape tuple
 * (up to PLAN_CACHE entries), so repeated executions do not plan again.
 * Where a shape needs values, the binding is given them: the model inputs' at
 * once, and the computed temporaries' once the operations writing them have
 * run: such an instance is *partial* (resolved_ops < op_count) and the runner
 * calls npu_plan_continue when it reaches its last slice.
 *
 * The arena is shared by liveness.  A temporary lives from the operation
 * writing it to the last one reading it (both inclusive, in the plan's
 * order, which is the order its slices run: a job runs one slice at a time,
 * on one channel); two temporaries whose lives overlap never share a byte,
 * and an operation's inputs and outputs never alias.  Each operation's
 * outputs are placed, as it is resolved, first-fit: at the lowest offset
 * clear of every temporary placed before that is still alive then.  Placing
 * in the order the temporaries are written makes this valid for an instance
 * that resolves a piece at a time (npu_plan_continue only adds to the arena:
 * the temporaries still alive keep their place and bytes).  A temporary's
 * bytes are not zero when it is written: they may hold a dead one's.
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
    uint32_t producer;     /* the operation writing it; UINT32_MAX for none */
    uint32_t last_reader;  /* the last operation reading it; UINT32_MAX for none */
};

struct npu_plan_op {
    const struct npu_op_def *def;
    uint32_t input_count, output_count;
    uint32_t *operands;    /* input_count inputs then output_count outputs (operand indexes) */
    bool fixed;            /* every operand's shape was known at load: prepared once, then */
    size_t units;          /* def->units, >= 1 */
    double flops, bytes;   /* the whole operation's, from npu_bind_cost */
    int32_t operand_type;  /* npu_operation_operand_type: the hardware's compute class */
    struct npu_kept *kept; /* what the operation's runs keep (npu_bind_call.kept), or NULL */
};

struct npu_plan_slice {
    uint32_t op;
    size_t begin, end;
    double flops, bytes;
};

enum { PLAN_CACHE = 16 };

struct npu_plan {
    uint32_t operand_count;
    struct npu_plan_operand *operands;
    uint32_t op_count;
    struct npu_plan_op *ops;
    uint32_t slice_count, slice_cap;
    struct npu_plan_slice *slices;
    uint32_t input_count, output_count;
    uint32_t *inputs, *outputs;   /* operand indexes */
    unsigned char *consts;
    size_t const_bytes;
    size_t temp_bytes;
    float *channel_scales;        /* every per-channel operand's scales (the tensors point here) */
    bool relaxed;                 /* the model's relax_float32_to_float16 */
    uint32_t slices_per_op;
    uint32_t resolved_ops;        /* ops [0, resolved_ops) have shapes, storage, costs and slices */
    bool dynamic;                 /* some shape is known only at execution: runs go through instances */
    /* an instance: the dynamic plan it was made from (whose constants, scales and
     * operand lists it borrows), and whether that plan's cache keeps it */
    const struct npu_plan *base;
    bool cached;
    /* a dynamic plan: the instances resolved from input shapes alone */
    uint32_t cache_count;
    struct npu_plan *cache[PLAN_CACHE];
    struct npu_shape *cache_shapes[PLAN_CACHE];  /* input_count shapes each */
};

/* Validates (npu_model_validate) and builds a plan; each operation becomes
 * at most slices_per_op slices (>= 1). */
int npu_plan_create(const struct npu_model *model, uint32_t slices_per_op, struct npu_plan **out);
void npu_plan_destroy(struct npu_plan *plan);

/*
 * The plan of one execution, checked against its buffers.  For a plan whose
 * shapes are all known at load, *run is the plan itself and in_shapes (may be
 * NULL) must agree with it.  For a dynamic one, *run is an instance resolved
 * with in_shapes and, where a shape needs them, the inputs' values; the
 * buffers are borrowed until npu_plan_end.  out_shapes (may be NULL) receives
 * the outputs' shapes as far as they are known.  Errors: NPU_E_BAD_BUFFER
 * (counts, an input's length, a fixed output's length), NPU_E_BAD_SHAPE (given
 * dimensions that contradict the model's, overflow, or leave one unknown; an
 * operation refusing the shapes), NPU_E_BUFFER_TOO_SMALL (an output's buffer
 * is smaller than its shape: out_shapes marks it), or a binding's refusal of
 * the values; why (may be NULL) receives a sentence.
 */
int npu_plan_begin(struct npu_plan *plan,
                   const struct npu_buffer *inputs, const struct npu_shape *in_shapes, uint32_t input_count,
                   const struct npu_buffer *outputs, struct npu_shape *out_shapes, uint32_t output_count,
                   struct npu_plan **run, char *why, size_t why_len);

/* Whether every operation of run has its slices (otherwise npu_plan_continue). */
bool npu_plan_complete(const struct npu_plan *run);

/*
 * A partial instance, all of whose slices have run: resolves the operations
 * after them with the values now computed, appends their slices and grows
 * the arena (*arena, temp_bytes before the call) to the new temp_bytes,
 * keeping what it holds.  Errors as npu_plan_begin's.
 */
int npu_plan_continue(struct npu_plan *run, unsigned char **arena,
                      const struct npu_buffer *inputs, const struct npu_buffer *outputs,
                      struct npu_shape *out_shapes, char *why, size_t why_len);

/* The end of an execution begun with npu_plan_begin on plan. */
void npu_plan_end(struct npu_plan *plan, struct npu_plan *run);

/* Computes one slice.  arena holds temp_bytes bytes.  NPU_OK, or the status
 * of an operation that refused its operands' values (e.g. a GATHER index out
 * of range in an input); why (may be NULL) receives its sentence. */
int npu_plan_run_slice(const struct npu_plan *plan, uint32_t slice, unsigned char *arena,
                       const struct npu_buffer *inputs, const struct npu_buffer *outputs,
                       char *why, size_t why_len);

#endif
