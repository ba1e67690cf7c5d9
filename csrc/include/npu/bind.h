/*
 * npu/bind.h - how a model's operation meets the operation library (npu/ops.h).
 *
 * Each NN HAL 1.2 operation has one binding: a struct npu_op_def whose
 * prepare() reads the operation's operands as NNAPI lays them out (the 1.2
 * signature: counts, optional trailing inputs, operand types, quantization,
 * scalar parameters) and works out its outputs' shapes, and whose run() calls
 * the library.  The same bindings serve every caller:
 *   - the NDK's addOperation (framework.nn), with operand types and declared
 *     shapes only, to refuse a wrong signature with a message naming it;
 *   - the plan (kernels/plan.c), with the constants' data, at load time;
 *   - the plan again at execution time, with every operand's data, when a
 *     shape depended on data or on an input's unspecified dimensions.
 *
 * What a binding knows of an operand is in struct npu_arg: its descriptor
 * (type, quantization, rank and dims), whether the shape is known, and the data
 * when it is known.  A binding checks what it can with what it is given and
 * never reads what it was not given: prepare() with has_shape false or data
 * NULL checks less, and says so by leaving outputs unknown.
 *
 * Errors: a binding fails through npu_bind_fail(), which records a sentence
 * naming the operation and the operand (e.g. "CONV_2D input 3 (padding left)
 * must be an INT32 scalar, not TENSOR_FLOAT32") in the call's why[] and returns
 * the npu_status it was given.
 */
#ifndef NPU_BIND_H
#define NPU_BIND_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "npu/ops.h"

/* One operand of an operation, as its binding sees it. */
struct npu_arg {
    struct npu_tensor t;   /* type and quantization always; rank/dims when has_rank/has_shape;
                            * t.data when the value is known (NULL otherwise) */
    bool omitted;          /* an optional input passed as NO_VALUE (t is then meaningless) */
    bool has_rank;         /* t.rank is known (always true for a scalar type) */
    bool has_shape;        /* t.rank and every t.dims[i] are known; a 0 is then a real 0 */
};

/* One call of a binding: the operation and its operands.  prepare() may set
 * out[i].t.rank/dims (then out[i].has_rank/has_shape) and, for operations
 * whose output quantization the spec fixes, nothing else: the output's
 * declared type and quantization come in and are checked, never invented. */
struct npu_bind_call {
    int32_t type;                       /* OperationType */
    uint32_t input_count, output_count;
    const struct npu_arg *in;
    struct npu_arg *out;
    char why[200];                      /* the failure's sentence, "" on success */
    /* the plan's slot for what run() keeps (NULL: nothing is kept; the plan gives
     * one only when every input but input 0 is a constant of the plan's, so what
     * is kept cannot go stale); filled at most once, atomically (slices of one
     * operation may run at once) */
    struct npu_kept **kept;
};

struct npu_op_def {
    int32_t type;                       /* OperationType; -1 ends a table */
    const char *name;                   /* "CONV_2D" */
    /* Checks the signature and everything it is given; fills the outputs'
     * shapes it can.  NPU_OK or a status (with why[] filled). */
    int (*prepare)(struct npu_bind_call *c);
    /* How many slices of work the operation can be cut into (>= 1), with every
     * shape known; NULL means 1.  run() computes units [begin, end). */
    size_t (*units)(const struct npu_bind_call *c);
    /* Computes, with every operand's data and shape known (outputs' data are
     * the buffers to fill).  NPU_OK or a status (with why[] filled). */
    int (*run)(struct npu_bind_call *c, size_t begin, size_t end);
    /* The whole operation's arithmetic (multiply-adds count 2) and the bytes it
     * moves, for the devices' cost model; NULL means: one FLOP per output
     * element, and the bytes of every input and output. */
    void (*cost)(const struct npu_bind_call *c, double *flops, double *bytes);
};

/* The binding of an OperationType, or NULL when npuemu has none. */
const struct npu_op_def *npu_bind_lookup(int32_t type);

/* Runs def->prepare on a call the caller filled; for the NDK's addOperation
 * (shapes as declared, no data).  why receives the sentence (why_len >= 1). */
int npu_bind_check(int32_t type, const struct npu_arg *in, uint32_t input_count,
                   struct npu_arg *out, uint32_t output_count, char *why, size_t why_len);

/* Prepares and runs the whole operation (every unit) on operands whose shapes
 * and data are all known, outputs included (their buffers sized by a previous
 * npu_bind_check); for tests and for callers without a plan. */
int npu_bind_run(int32_t type, const struct npu_arg *in, uint32_t input_count,
                 struct npu_arg *out, uint32_t output_count, char *why, size_t why_len);

/* -- for the bindings (kernels/bind_*.c) ------------------------------------------ */

/* Records the failure's sentence (printf format) in c->why; returns status. */
int npu_bind_fail(struct npu_bind_call *c, int status, const char *fmt, ...)
#if defined(__GNUC__) && !defined(NPU_CDEF)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Input/output counts: between lo and hi inputs, exactly n outputs. */
int npu_bind_counts(struct npu_bind_call *c, uint32_t in_lo, uint32_t in_hi, uint32_t n_out);

/* Input i is a tensor of one of the types in types[0..n) (and not omitted). */
int npu_bind_tensor(struct npu_bind_call *c, uint32_t i, const int32_t *types, uint32_t n);

/* Input i is a scalar of type (INT32, FLOAT32, FLOAT16 or BOOL); when its value is
 * known, *known is set true and the value stored (a FLOAT16 widened to float).
 * known may be NULL: then an unknown value is an error (the binding needs it). */
int npu_bind_i32(struct npu_bind_call *c, uint32_t i, int32_t *value, bool *known);
int npu_bind_f32(struct npu_bind_call *c, uint32_t i, int32_t scalar_type, float *value, bool *known);
int npu_bind_bool(struct npu_bind_call *c, uint32_t i, bool *value, bool *known);

/* Sets output i's shape (rank, dims) and marks it known; when the output
 * declared a full shape, it must be the same (NPU_E_BAD_SHAPE otherwise); a
 * declared partial shape must agree where it is specified. */
int npu_bind_set_shape(struct npu_bind_call *c, uint32_t i, uint32_t rank, const uint32_t *dims);

/* The operation's name ("CONV_2D"), or "operation <n>". */
const char *npu_bind_name(int32_t type);

/* An operand type's NN HAL 1.2 name ("TENSOR_FLOAT32"), or "an unknown type". */
const char *npu_bind_type_name(int32_t type);

/* Whether type is quantized with one scale and zero point (TENSOR_QUANT8_ASYMM,
 * _SYMM, TENSOR_QUANT16_ASYMM, _SYMM); then *lo..*hi are the zero points it allows. */
bool npu_bind_quant_range(int32_t type, int32_t *lo, int32_t *hi);

/* The bytes of every present tensor input and every output (their shapes known). */
double npu_bind_io_bytes(const struct npu_bind_call *c);

/* def->cost, or the default (one FLOP per output element, npu_bind_io_bytes)
 * when it has none; with every shape known. */
void npu_bind_cost(const struct npu_op_def *def, const struct npu_bind_call *c, double *flops, double *bytes);

/* The binding tables, one per family of operations (kernels/bind_<family>.c),
 * each ending with an entry whose type is -1.  npu_bind_lookup() reads them all;
 * an operation in two tables is a build error caught by the tests. */
extern const struct npu_op_def npu_bind_core[];       /* bind_core.c: the library of ops.h's first part */
extern const struct npu_op_def npu_bind_math[];       /* bind_math.c: unary/binary math, comparisons, logic */
extern const struct npu_op_def npu_bind_index[];      /* bind_index.c: shapes, reductions, indexing, norms */
extern const struct npu_op_def npu_bind_recurrent[];  /* bind_recurrent.c: RNN, LSTM, SVDF, LSH, sampling */
extern const struct npu_op_def npu_bind_detection[];  /* bind_detection.c: boxes, ROIs, NMS, keypoints */

#endif /* NPU_BIND_H */
