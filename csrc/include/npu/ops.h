/*
 * npu/ops.h - the operation library: NN HAL 1.2 operations over tensor descriptors.
 *
 * One library, built into both the driver extension (npuhal._npu) and the CPU
 * device's (framework.nn._cpu), so the emulated devices and nnapi-reference
 * compute the same results.  Each operation takes descriptors of its tensors
 * plus its scalar parameters (already read from the model), checks that types
 * and shapes fit the 1.2 spec, and writes its output; it returns NPU_OK or an
 * npu_status code (bad descriptors are an error, never a crash):
 *   NPU_E_INVALID_ARGUMENT   a NULL descriptor or data pointer
 *   NPU_E_BAD_OPERAND_TYPE   a type the operation does not take, or an unknown one
 *   NPU_E_BAD_SHAPE          a rank or dimension that does not fit (the output's too)
 *   NPU_E_BAD_SCALAR         a scalar parameter or quantization parameter out of range
 *   NPU_E_BAD_FUSE_CODE      a fused activation that is not NONE/RELU/RELU1/RELU6
 *   NPU_E_NO_MEMORY          a scratch buffer could not be allocated
 *
 * Arithmetic.  Float32 computes in float; float16 tensors are widened to float32,
 * computed, and rounded back (as Android's reference does).  TENSOR_QUANT8_ASYMM
 * convolutions, FULLY_CONNECTED, ADD, SUB, MUL and the pools compute in integers
 * exactly as Android's reference does (int32 accumulation of zero-point-centred
 * values, requantization by QuantizeMultiplier's Q31 multiplier and shift with
 * SaturatingRoundingDoublingHighMul and RoundingDivideByPOT); the other quantized
 * operations compute real values in double and quantize them with the output's
 * parameters (round half away from zero), within a quantum of Android's.
 *
 * Slicing.  Like the per-operation kernels of npu/model.h, the heavy operations
 * compute a range [begin, end) of their output so the hardware can stop between
 * slices: the unit is noted at each (one output row, that is one (batch, y) pair,
 * for the spatial ones; one batch row for FULLY_CONNECTED).  end is clamped to the
 * unit count, so (0, SIZE_MAX) computes everything; npu_ops_units() gives the count.
 * The other operations are cheap and compute their whole output.
 *
 * All pointers are borrowed for the call; an output must not alias an input.
 */
#ifndef NPU_OPS_H
#define NPU_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "npu/model.h"


/* One tensor: dense, row-major, its type's storage (float, uint16_t halves,
 * int32_t, uint8_t, int8_t...).  scale and zero_point are the quantized types'
 * (real = (stored - zero_point) * scale); a TENSOR_QUANT8_SYMM_PER_CHANNEL
 * tensor has instead channel_scales, one per index of dims[channel_dim]. */
struct npu_tensor {
    int32_t type;                       /* enum npu_operand_type (npu/model.h) */
    uint32_t rank;                      /* 0..NPU_MAX_RANK */
    uint32_t dims[NPU_MAX_RANK];    /* the first rank entries, each > 0 */
    void *data;
    float scale;
    int32_t zero_point;
    const float *channel_scales;
    uint32_t channel_dim;
};

/* A spatial operation's window, always in (height, width) of the image whatever
 * the layout.  Convolutions take the filter's size from the filter tensor and
 * ignore filter_w/h; pools ignore the dilations (pass 1). */
struct npu_window {
    int32_t pad_left, pad_right, pad_top, pad_bottom;
    int32_t stride_w, stride_h;
    int32_t dilation_w, dilation_h;
    int32_t filter_w, filter_h;
    int32_t fuse;                       /* enum npu_fuse_code of npu/model.h: 0..3 */
    bool nchw;                          /* the 1.2 layout input: true for NCHW */
};

/* The 1.2 spec's implicit padding for one spatial dimension: scheme 1 is SAME,
 * 2 VALID.  Writes the padding before (head) and after (tail). */
int npu_ops_implicit_padding(int32_t size, int32_t stride, int32_t filter, int32_t dilation,
                             int32_t scheme, int32_t *head, int32_t *tail);

/* Number of elements of a tensor (0 for a bad descriptor) and its size in bytes. */
size_t npu_ops_element_count(const struct npu_tensor *t);
size_t npu_ops_byte_size(const struct npu_tensor *t);

/* The operations with a range: the unit count of their output tensor (rows of
 * batch*out_h for the spatial ones, batch rows for FULLY_CONNECTED). */
size_t npu_ops_units_spatial(const struct npu_tensor *out, bool nchw);
size_t npu_ops_units_fully_connected(const struct npu_tensor *out);

/* -- the quantization arithmetic (Android's reference, gemmlowp's helpers) ---- */

/* real == multiplier * 2^(shift - 31), multiplier in [2^30, 2^31) (0, 0 for 0).
 * NPU_E_BAD_SCALAR for a negative or non-finite real. */
int npu_quantize_multiplier(double real, int32_t *multiplier, int32_t *shift);
int32_t npu_saturating_rounding_doubling_high_mul(int32_t a, int32_t b);
int32_t npu_rounding_divide_by_pot(int32_t x, int32_t exponent);
int32_t npu_multiply_by_quantized_multiplier(int32_t x, int32_t multiplier, int32_t shift);

/* IEEE half <-> float, round to nearest even. */
float npu_half_to_float(uint16_t h);
uint16_t npu_float_to_half(float f);

/* -- convolutions and fully connected ------------------------------------------ */

/* What one operation of a plan keeps between its runs, made from its constant
 * operands alone (a convolution's packed weights): an object beginning with
 * this, freed by its release when the plan goes (npu/bind.h's kept slot). */
struct npu_kept {
    void (*release)(struct npu_kept *self);
};

/* CONV_2D.  input [n,h,w,c] (or [n,c,h,w] when w->nchw), filter [out,fh,fw,c],
 * bias [out], output [n,oh,ow,out] (or NCHW).  Float32: all float32; float16: all
 * float16; quant8: a TENSOR_QUANT8_ASYMM input and output, a TENSOR_QUANT8_ASYMM
 * or (channel_dim 0) TENSOR_QUANT8_SYMM_PER_CHANNEL filter, a TENSOR_INT32 bias
 * (scale input*filter, zero point 0).  Unit: one output row. */
int npu_op_conv_2d(const struct npu_tensor *input, const struct npu_tensor *filter,
                   const struct npu_tensor *bias, const struct npu_window *w,
                   const struct npu_tensor *output, size_t begin, size_t end);

/* GROUPED_CONV_2D: filter [out, fh, fw, c / groups]; output channels
 * [k * out/groups, (k+1) * out/groups) read input channels [k * c/groups, ...).
 * (The 1.2 operation has no dilation: pass 1.)  Unit: one output row. */
int npu_op_grouped_conv_2d(const struct npu_tensor *input, const struct npu_tensor *filter,
                           const struct npu_tensor *bias, const struct npu_window *w, int32_t groups,
                           const struct npu_tensor *output, size_t begin, size_t end);

/* DEPTHWISE_CONV_2D: filter [1,fh,fw,c*multiplier] (per-channel: channel_dim 3),
 * output channel k reads input channel k / multiplier.  Unit: one output row. */
int npu_op_depthwise_conv_2d(const struct npu_tensor *input, const struct npu_tensor *filter,
                             const struct npu_tensor *bias, const struct npu_window *w,
                             int32_t multiplier, const struct npu_tensor *output,
                             size_t begin, size_t end);

/* FULLY_CONNECTED: input of any rank >= 2 read as [batch, in] rows, weights
 * [units, in], bias [units], output [batch, units].  Unit: one batch row. */
int npu_op_fully_connected(const struct npu_tensor *input, const struct npu_tensor *weights,
                           const struct npu_tensor *bias, int32_t fuse,
                           const struct npu_tensor *output, size_t begin, size_t end);

/* -- pools (window->filter_w/h; 4-D input; unit: one output row) --------------- */
int npu_op_average_pool_2d(const struct npu_tensor *input, const struct npu_window *w,
                           const struct npu_tensor *output, size_t begin, size_t end);
int npu_op_max_pool_2d(const struct npu_tensor *input, const struct npu_window *w,
                       const struct npu_tensor *output, size_t begin, size_t end);
int npu_op_l2_pool_2d(const struct npu_tensor *input, const struct npu_window *w,
                      const struct npu_tensor *output, size_t begin, size_t end);

/* -- element-wise ------------------------------------------------------------- */

/* ADD, SUB, MUL: two tensors of one type, broadcast (rank <= 4, aligned from the
 * right, each dimension equal or 1); output of the broadcast shape. */
int npu_op_add(const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse,
               const struct npu_tensor *output);
int npu_op_sub(const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse,
               const struct npu_tensor *output);
int npu_op_mul(const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse,
               const struct npu_tensor *output);

/* MAXIMUM, MINIMUM: broadcast as ADD, no fused activation; also TENSOR_INT32. */
int npu_op_maximum(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);
int npu_op_minimum(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);

/* RELU, RELU1, RELU6, LOGISTIC, TANH: output of the input's shape and type (a
 * quant8 LOGISTIC output has scale 1/256 and zero point 0, TANH's 1/128 and 128). */
int npu_op_relu(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_relu1(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_relu6(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_logistic(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_tanh(const struct npu_tensor *input, const struct npu_tensor *output);

/* SOFTMAX along axis (negative counts from the end) with beta > 0; a quant8
 * output has scale 1/256 and zero point 0. */
int npu_op_softmax(const struct npu_tensor *input, float beta, int32_t axis,
                   const struct npu_tensor *output);

/* L2_NORMALIZATION along axis: x / max(sqrt(sum x^2), 1e-6); a quant8 output
 * has scale 1/128 and zero point 128. */
int npu_op_l2_normalization(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output);

/* PRELU: out = x >= 0 ? x : x * alpha, alpha broadcast against the input. */
int npu_op_prelu(const struct npu_tensor *input, const struct npu_tensor *alpha,
                 const struct npu_tensor *output);

/* DEQUANTIZE: a TENSOR_QUANT8_ASYMM, _SYMM or _SYMM_PER_CHANNEL input to a
 * float32 or float16 output.  QUANTIZE: float32/float16 to TENSOR_QUANT8_ASYMM. */
int npu_op_dequantize(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_quantize(const struct npu_tensor *input, const struct npu_tensor *output);

/* -- moving values ----------------------------------------------------------------
 * A quantized output whose scale or zero point differs from the input's gets
 * the values requantized; otherwise the stored values move as they are. */

/* RESHAPE: any output of the same element count (the caller resolved -1). */
int npu_op_reshape(const struct npu_tensor *input, const struct npu_tensor *output);
/* CONCATENATION of count tensors along axis. */
int npu_op_concatenation(const struct npu_tensor *const *inputs, uint32_t count, int32_t axis,
                         const struct npu_tensor *output);
/* PAD and PAD_V2: paddings is rank pairs (before, after) >= 0; PAD fills with
 * zero (a quantized input's zero point), PAD_V2 with pad_value (a quantized
 * input's stored value; it must be within 0..255). */
int npu_op_pad(const struct npu_tensor *input, const int32_t *paddings,
               const struct npu_tensor *output);
int npu_op_pad_v2(const struct npu_tensor *input, const int32_t *paddings, double pad_value,
                  const struct npu_tensor *output);
/* MEAN over axis_count axes (duplicates and negatives allowed); keep_dims keeps
 * the reduced dimensions as 1. */
int npu_op_mean(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                bool keep_dims, const struct npu_tensor *output);
/* REDUCE_MAX and REDUCE_MIN, as MEAN (a quantized extreme is a stored value). */
int npu_op_reduce_max(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                      bool keep_dims, const struct npu_tensor *output);
int npu_op_reduce_min(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                      bool keep_dims, const struct npu_tensor *output);
/* ARGMAX and ARGMIN along axis: a TENSOR_INT32 output without that axis. */
int npu_op_argmax(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output);
int npu_op_argmin(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output);
/* GATHER: along axis, the slices indices (TENSOR_INT32, each in [0, dims[axis]))
 * name; output dims are input's before axis, indices', input's after. */
int npu_op_gather(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *indices,
                  const struct npu_tensor *output);
/* TRANSPOSE by perm (rank entries), or reversing the axes when perm is NULL. */
int npu_op_transpose(const struct npu_tensor *input, const int32_t *perm,
                     const struct npu_tensor *output);
/* STRIDED_SLICE: begin, end, strides of rank entries each and the three masks. */
int npu_op_strided_slice(const struct npu_tensor *input, const int32_t *begin, const int32_t *end,
                         const int32_t *strides, int32_t begin_mask, int32_t end_mask,
                         int32_t shrink_axis_mask, const struct npu_tensor *output);
/* RESIZE_BILINEAR to the output's height and width (as the 1.2 reference: no
 * corner alignment, source = destination * in/out). */
int npu_op_resize_bilinear(const struct npu_tensor *input, bool nchw, const struct npu_tensor *output);
/* DEPTH_TO_SPACE and SPACE_TO_DEPTH with block size block >= 1. */
int npu_op_depth_to_space(const struct npu_tensor *input, int32_t block, bool nchw,
                          const struct npu_tensor *output);
int npu_op_space_to_depth(const struct npu_tensor *input, int32_t block, bool nchw,
                          const struct npu_tensor *output);

/* -- unary and binary math, comparisons, logic (kernels/ops_math.c) ------------- */

/* FLOOR, ABS, EXP, LOG, RSQRT, SQRT, SIN: a TENSOR_FLOAT32 or TENSOR_FLOAT16
 * input, an output of its shape and type, computed in float (IEEE's NaN and
 * infinities outside a function's domain).  NEG also takes TENSOR_INT32 (where
 * -INT32_MIN wraps to INT32_MIN). */
int npu_op_floor(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_abs(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_exp(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_log(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_rsqrt(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_sqrt(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_sin(const struct npu_tensor *input, const struct npu_tensor *output);
int npu_op_neg(const struct npu_tensor *input, const struct npu_tensor *output);

/* DIV (a / b, with a fused activation) and POW (base ^ exponent): float32 or
 * float16, broadcast as ADD (rank <= 4). */
int npu_op_div(const struct npu_tensor *a, const struct npu_tensor *b, int32_t fuse,
               const struct npu_tensor *output);
int npu_op_pow(const struct npu_tensor *base, const struct npu_tensor *exponent,
               const struct npu_tensor *output);

/* EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL: two tensors of one
 * type (TENSOR_BOOL8, float16, float32, int32, or quant8 compared by real value,
 * each with its own scale and zero point), broadcast at any rank, into a
 * TENSOR_BOOL8 output.  LOGICAL_AND, LOGICAL_OR: two TENSOR_BOOL8, broadcast;
 * LOGICAL_NOT: one, same shape. */
int npu_op_equal(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);
int npu_op_not_equal(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);
int npu_op_less(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);
int npu_op_less_equal(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);
int npu_op_greater(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);
int npu_op_greater_equal(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);
int npu_op_logical_and(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);
int npu_op_logical_or(const struct npu_tensor *a, const struct npu_tensor *b, const struct npu_tensor *output);
int npu_op_logical_not(const struct npu_tensor *input, const struct npu_tensor *output);

/* SELECT: output[i] = condition[i] ? a[i] : b[i]; condition TENSOR_BOOL8, a, b
 * and the output of one type (float16, float32, int32, quant8) and all four of
 * one shape.  A quant8 output gets the picked real value requantized. */
int npu_op_select(const struct npu_tensor *condition, const struct npu_tensor *a, const struct npu_tensor *b,
                  const struct npu_tensor *output);

/* CAST between float16, float32, int32 and quant8 of one shape, converting
 * stored values (a quant8 operand's integers, not its real values): to an
 * integer type truncated toward zero and saturated (quant8 to 0..255; NaN to 0). */
int npu_op_cast(const struct npu_tensor *input, const struct npu_tensor *output);

/* TRANSPOSE_CONV_2D: input [n,h,w,c] (or NCHW when w->nchw), filter
 * [out,fh,fw,c], bias [out], output [n,oh,ow,out] (or NCHW) where oh = (h - 1) *
 * stride_h + fh - pad_top - pad_bottom (likewise ow); types as CONV_2D's (a
 * per-channel filter along dimension 0).  pad_right and pad_bottom may be
 * negative (the 1.2 reference's SAME padding makes them so); dilation must be 1.
 * Unit: one output row. */
int npu_op_transpose_conv_2d(const struct npu_tensor *input, const struct npu_tensor *filter,
                             const struct npu_tensor *bias, const struct npu_window *w,
                             const struct npu_tensor *output, size_t begin, size_t end);
/* Its output size along one dimension (may be < 1: no output). */
long npu_ops_transpose_conv_size(long size, long filter, long stride, long head, long tail);
/* Its implicit padding, from the OUTPUT size the model gives: scheme 2 (VALID)
 * none; 1 (SAME) centres the last stride's footprint on the output, the tail
 * fitted to it (negative when the output reaches past it). */
int npu_ops_transpose_padding(int32_t out_size, int32_t stride, int32_t filter, int32_t scheme,
                              int32_t *head, int32_t *tail);

/* (end of math) */

/* -- shapes, reductions, indexing, normalizations (kernels/ops_index.c) --------- */

/* The moves below keep a quantized value's stored integer; an output declared
 * with another scale or zero point gets the values requantized.  "Movable"
 * types are TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, TENSOR_QUANT8_ASYMM. */

/* SQUEEZE (float or quant8, rank <= 4): drops the axis_count axes named (each of
 * size 1, negatives allowed), or every axis of size 1 when axis_count is 0. */
int npu_op_squeeze(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                   const struct npu_tensor *output);
/* EXPAND_DIMS (movable): a new axis of size 1 at axis, in [-(rank+1), rank]. */
int npu_op_expand_dims(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *output);
/* SLICE (movable): rank entries each of begin (>= 0) and size (>= 1, or -1 for
 * the rest of the axis). */
int npu_op_slice(const struct npu_tensor *input, const int32_t *begin, const int32_t *size,
                 const struct npu_tensor *output);
/* TILE (movable): the input repeated multiples[d] >= 1 times along each axis. */
int npu_op_tile(const struct npu_tensor *input, const int32_t *multiples, const struct npu_tensor *output);
/* SPLIT (movable) along axis into count equal outputs. */
int npu_op_split(const struct npu_tensor *input, int32_t axis, const struct npu_tensor *const *outputs,
                 uint32_t count);
/* CHANNEL_SHUFFLE (float or quant8) of the channels along axis in groups:
 * output channel a * groups + k is input channel k * (channels / groups) + a. */
int npu_op_channel_shuffle(const struct npu_tensor *input, int32_t groups, int32_t axis,
                           const struct npu_tensor *output);
/* BATCH_TO_SPACE_ND and SPACE_TO_BATCH_ND (float or quant8, 4-D, either
 * layout) with a block of block_h x block_w; SPACE_TO_BATCH_ND pads first by
 * paddings {top, bottom, left, right} (with zeros: a quant8 input's zero point). */
int npu_op_batch_to_space_nd(const struct npu_tensor *input, int32_t block_h, int32_t block_w, bool nchw,
                             const struct npu_tensor *output);
int npu_op_space_to_batch_nd(const struct npu_tensor *input, int32_t block_h, int32_t block_w,
                             const int32_t *paddings, bool nchw, const struct npu_tensor *output);
/* RESIZE_NEAREST_NEIGHBOR (float or quant8, 4-D) to the output's height and
 * width, as the 1.2 reference (no corner alignment, source = floor(dest * in/out)). */
int npu_op_resize_nearest_neighbor(const struct npu_tensor *input, bool nchw, const struct npu_tensor *output);
/* EMBEDDING_LOOKUP: rows lookups (TENSOR_INT32 [n], each in [0, values.dims[0]))
 * of values (TENSOR_FLOAT32, _INT32 or _QUANT8_ASYMM, rank >= 2): output
 * [n, values.dims[1:]]. */
int npu_op_embedding_lookup(const struct npu_tensor *lookups, const struct npu_tensor *values,
                            const struct npu_tensor *output);
/* HASHTABLE_LOOKUP: for each of lookups, the row of values whose key (keys:
 * TENSOR_INT32 [rows]) it is (zeros when none; the last such row when a key
 * repeats), and hits (TENSOR_QUANT8_ASYMM [n]) 1 or 0. */
int npu_op_hashtable_lookup(const struct npu_tensor *lookups, const struct npu_tensor *keys,
                            const struct npu_tensor *values, const struct npu_tensor *output,
                            const struct npu_tensor *hits);
/* TOPK_V2 (movable): the k largest along the last axis, largest first (the
 * earlier index first on a tie), and their indices (TENSOR_INT32). */
int npu_op_topk_v2(const struct npu_tensor *input, int32_t k, const struct npu_tensor *values,
                   const struct npu_tensor *indices);
/* REDUCE_SUM, REDUCE_PROD (float) and REDUCE_ALL, REDUCE_ANY (TENSOR_BOOL8)
 * over axis_count >= 1 axes (duplicates and negatives allowed), as MEAN. */
int npu_op_reduce_sum(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                      bool keep_dims, const struct npu_tensor *output);
int npu_op_reduce_prod(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                       bool keep_dims, const struct npu_tensor *output);
int npu_op_reduce_all(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                      bool keep_dims, const struct npu_tensor *output);
int npu_op_reduce_any(const struct npu_tensor *input, const int32_t *axes, uint32_t axis_count,
                      bool keep_dims, const struct npu_tensor *output);
/* LOG_SOFTMAX (float) along axis: beta * x - log(sum(exp(beta * x))). */
int npu_op_log_softmax(const struct npu_tensor *input, float beta, int32_t axis, const struct npu_tensor *output);
/* LOCAL_RESPONSE_NORMALIZATION (float) along axis:
 * x / (bias + alpha * sum of squares within radius) ^ beta. */
int npu_op_local_response_normalization(const struct npu_tensor *input, int32_t radius, float bias, float alpha,
                                        float beta, int32_t axis, const struct npu_tensor *output);
/* INSTANCE_NORMALIZATION (float, 4-D): per batch and channel,
 * (x - mean) * gamma / sqrt(variance + epsilon) + beta over height and width; epsilon >= 0
 * (0 as Android 10 allows: a constant plane then gives NaN). */
int npu_op_instance_normalization(const struct npu_tensor *input, float gamma, float beta, float epsilon,
                                  bool nchw, const struct npu_tensor *output);

/* (end of index) */

/* -- RNN, LSTM, SVDF, LSH_PROJECTION, RANDOM_MULTINOMIAL (kernels/ops_recurrent.c) */

/* The recurrent operations read float32 or float16 tensors (every tensor of
 * one call the same type; float16 widened to float32, as Android's reference
 * does) and compute in float with double accumulation.  An optional tensor is
 * NULL when absent.  Each batch row's recurrence is independent of the
 * others', so the unit of the range is one batch row: [begin, end) clamped to
 * the batch size (npu_ops_units_recurrent). */

/* TFLite's activation codes, which these operations take: 0 none, 1 relu,
 * 2 relu1, 3 relu6, 4 tanh, 6 sigmoid (anything else is NPU_E_BAD_SCALAR). */
enum npu_rnn_activation {
    NPU_RNN_ACT_NONE = 0, NPU_RNN_ACT_RELU = 1, NPU_RNN_ACT_RELU1 = 2, NPU_RNN_ACT_RELU6 = 3,
    NPU_RNN_ACT_TANH = 4, NPU_RNN_ACT_SIGMOID = 6,
};

/* The batch size of a recurrent operation's input (dims[0] of a 2-D input;
 * dims[1] of a time-major sequence, dims[0] of a batch-major one). */
size_t npu_ops_units_recurrent(const struct npu_tensor *input, bool sequence, bool time_major);

/* RNN: h = act(x W^T + h_in R^T + b).  input [batch, in], weights [units, in],
 * recurrent [units, units], bias [units], hidden_in [batch, units]; hidden_out
 * and output [batch, units] (both receive h). */
int npu_op_rnn(const struct npu_tensor *input, const struct npu_tensor *weights,
               const struct npu_tensor *recurrent, const struct npu_tensor *bias,
               const struct npu_tensor *hidden_in, int32_t activation,
               const struct npu_tensor *hidden_out, const struct npu_tensor *output,
               size_t begin, size_t end);

/* One direction of a sequence RNN: input [time, batch, in] (time_major) or
 * [batch, time, in]; aux_input (same layout, [.., aux_in]) with aux_weights
 * [units, aux_in] adds aux x Waux^T, both or neither.  reverse runs the time
 * steps backwards (each step's output still at its own step).  The output is
 * [time, batch, total] or [batch, time, total] and this direction writes its
 * units at columns [column, column + units). */
struct npu_rnn_direction {
    const struct npu_tensor *weights, *recurrent, *bias, *hidden;
    const struct npu_tensor *aux_input, *aux_weights;
    bool reverse;
    uint32_t column;
};
int npu_op_sequence_rnn(const struct npu_tensor *input, const struct npu_rnn_direction *d,
                        int32_t activation, bool time_major, const struct npu_tensor *output,
                        size_t begin, size_t end);

/* SVDF: input [batch, in], weights_feature [filters, in], weights_time
 * [filters, memory], bias [filters / rank] or NULL, state_in [batch, filters *
 * memory]; state_out as state_in, output [batch, filters / rank]. */
int npu_op_svdf(const struct npu_tensor *input, const struct npu_tensor *weights_feature,
                const struct npu_tensor *weights_time, const struct npu_tensor *bias,
                const struct npu_tensor *state_in, int32_t rank, int32_t activation,
                const struct npu_tensor *state_out, const struct npu_tensor *output,
                size_t begin, size_t end);

/* An LSTM cell's parameters, each array by gate in the 1.2 order input,
 * forget, cell, output (peephole: input, forget, output).  CIFG: the input
 * gate's weights, bias (and peephole, layer norm) NULL.  input_to [cells, in],
 * recurrent_to [cells, out], peephole [cells], bias [cells], projection
 * [out, cells] and its bias [out] (out == cells without projection),
 * layer_norm [cells] (all NULL: no layer normalization), aux_to [cells, aux_in]. */
struct npu_lstm_weights {
    const struct npu_tensor *input_to[4], *recurrent_to[4], *peephole[3], *bias[4];
    const struct npu_tensor *projection, *projection_bias;
    const struct npu_tensor *layer_norm[4];
    const struct npu_tensor *aux_to[4];
};
struct npu_lstm_params {
    int32_t activation;       /* enum npu_rnn_activation */
    float cell_clip, proj_clip;  /* > 0: clip to [-clip, clip]; 0: none */
};

/* LSTM: one step.  input [batch, in], output_state_in [batch, out],
 * cell_state_in [batch, cells]; scratch [batch, cells * 4] (3 with CIFG)
 * receives what Android's reference leaves there (gate-major: the input gate,
 * act(new cell), the forget gate (1 - forget with CIFG), output gate * act(new
 * cell)); output_state_out and output [batch, out], cell_state_out [batch, cells]. */
int npu_op_lstm(const struct npu_tensor *input, const struct npu_lstm_weights *w,
                const struct npu_tensor *output_state_in, const struct npu_tensor *cell_state_in,
                const struct npu_lstm_params *p, const struct npu_tensor *scratch,
                const struct npu_tensor *output_state_out, const struct npu_tensor *cell_state_out,
                const struct npu_tensor *output, size_t begin, size_t end);

/* One direction of a sequence LSTM, laid out as npu_op_sequence_rnn's (aux_input
 * with w->aux_to, all four or none; column: where this direction's outputs go). */
struct npu_lstm_direction {
    const struct npu_lstm_weights *w;
    const struct npu_tensor *output_state, *cell_state, *aux_input;
    bool reverse;
    uint32_t column;
};
int npu_op_sequence_lstm(const struct npu_tensor *input, const struct npu_lstm_direction *d,
                         const struct npu_lstm_params *p, bool time_major,
                         const struct npu_tensor *output, size_t begin, size_t end);

/* QUANTIZED_16BIT_LSTM, in Android's integer arithmetic (gemmlowp's 16-bit
 * fixed point, 4 integer bits of cell state): input [batch, in] and
 * prev_output [batch, out] TENSOR_QUANT8_ASYMM at 1/128 around 128; weights
 * [8] (input-to then recurrent-to, gates input, forget, cell, output) one
 * TENSOR_QUANT8_ASYMM scale and zero point; biases [4] TENSOR_INT32 at
 * weights' scale / 128; prev_cell and cell_out [batch, out] TENSOR_QUANT16_SYMM
 * at 2^-11; output as prev_output. */
int npu_op_quantized_16bit_lstm(const struct npu_tensor *input, const struct npu_tensor *const weights[8],
                                const struct npu_tensor *const biases[4], const struct npu_tensor *prev_cell,
                                const struct npu_tensor *prev_output, const struct npu_tensor *cell_out,
                                const struct npu_tensor *output, size_t begin, size_t end);

/* FarmHash's Fingerprint64 (the "na" hash), as Android's LSH_PROJECTION signs with. */
uint64_t npu_fingerprint64(const void *data, size_t length);

/* LSH_PROJECTION: hash [functions, bits <= 32] float, input of any type with
 * rank >= 1 (rows along dims[0]), weight [rows] of hash's type or NULL; type
 * 1 SPARSE_DEPRECATED, 3 SPARSE ([functions] TENSOR_INT32 output), 2 DENSE
 * ([functions * bits]). */
int npu_op_lsh_projection(const struct npu_tensor *hash, const struct npu_tensor *input,
                          const struct npu_tensor *weight, int32_t type, const struct npu_tensor *output);

/* RANDOM_MULTINOMIAL: logits [batch, classes] float, samples per row, the two
 * seeds (both 0: seeded at random); output [batch, samples] TENSOR_INT32 of
 * class indices, drawn as Android's reference does (TensorFlow's Philox4x32-10
 * keyed by the seeds, 52-bit uniform doubles against the running sum of
 * exp(logit - max), non-finite logits never drawn). */
int npu_op_random_multinomial(const struct npu_tensor *logits, int32_t samples, int32_t seed0,
                              int32_t seed1, const struct npu_tensor *output);

/* (end of recurrent) */

/* -- boxes, regions of interest, NMS, keypoints (kernels/ops_detection.c) ------- */

/* Boxes are (x1, y1, x2, y2) corners (DETECTION_POSTPROCESSING's are (y1, x1,
 * y2, x2)).  In the quantized variants every box tensor is TENSOR_QUANT16_ASYMM
 * with scale 0.125 and zero point 0 (GENERATE_PROPOSALS' anchors are
 * TENSOR_QUANT16_SYMM, scale 0.125); everything computes on real values in
 * float, as Android's reference does, except ROI_ALIGN's quant8 path, which is
 * the reference's integer one.  A batch index is a TENSOR_INT32.  Malformed data
 * (a box with x2 < x1 or y2 < y1, a batch index outside the batches, a region
 * outside the image) is NPU_E_INVALID_ARGUMENT.  Zero rois are the caller's
 * case (these take tensors of positive dimensions). */

/* AXIS_ALIGNED_BBOX_TRANSFORM: rois [n, 4], deltas [n, 4 * classes] (dx, dy,
 * dw, dh), batches [n], image_info [batches, 2] (height, width); output
 * [n, 4 * classes], clipped to the image.  Float: all one type; quantized: rois,
 * image_info and output TENSOR_QUANT16_ASYMM, deltas TENSOR_QUANT8_ASYMM. */
int npu_op_axis_aligned_bbox_transform(const struct npu_tensor *rois, const struct npu_tensor *deltas,
                                       const struct npu_tensor *batches, const struct npu_tensor *image_info,
                                       const struct npu_tensor *output);

/* ROI_ALIGN: input [batches, h, w, depth] (or NCHW), rois [n, 4] in the
 * image's coordinates (divided by the strides to reach the input's), batches
 * [n]; output [n, out_h, out_w, depth] (or NCHW), each bin the mean of
 * h_ratio x w_ratio bilinear samples (a ratio of 0: ceil(bin size); a ratio
 * above 1024 is NPU_E_BAD_SCALAR).  Unit: one roi. */
int npu_op_roi_align(const struct npu_tensor *input, const struct npu_tensor *rois,
                     const struct npu_tensor *batches, float h_stride, float w_stride,
                     int32_t h_ratio, int32_t w_ratio, bool nchw, const struct npu_tensor *output,
                     size_t begin, size_t end);

/* ROI_POOLING: as ROI_ALIGN's operands, each bin the maximum of the input
 * cells it covers (rounded corners; an empty bin is 0).  Unit: one roi. */
int npu_op_roi_pooling(const struct npu_tensor *input, const struct npu_tensor *rois,
                       const struct npu_tensor *batches, float h_stride, float w_stride, bool nchw,
                       const struct npu_tensor *output, size_t begin, size_t end);

/* HEATMAP_MAX_KEYPOINT: heatmaps [n, size, size, keypoints] (or NCHW, size
 * >= 2), boxes [n, 4]; scores [n, keypoints] and keypoints [n, keypoints, 2]
 * (x, y), the maximum refined by a quadratic fit of its 3x3 neighbourhood. */
int npu_op_heatmap_max_keypoint(const struct npu_tensor *heatmaps, const struct npu_tensor *boxes, bool nchw,
                                const struct npu_tensor *scores, const struct npu_tensor *keypoints);

/* BOX_WITH_NMS_LIMIT's scalars.  kernel: 0 hard, 1 linear, 2 gaussian. */
struct npu_nms_params {
    float score_threshold;      /* candidates score above it */
    int32_t max_detections;     /* per image and per class; < 0: no limit */
    int32_t kernel;
    float iou_threshold;        /* hard and linear */
    float sigma;                /* gaussian */
    float nms_score_threshold;  /* a score decayed below it is dropped */
};

/* BOX_WITH_NMS_LIMIT: scores [n, classes > 1] (class 0 the background), rois
 * [n, 4 * classes], batches [n].  The output count depends on the data: with
 * every output NULL, only *count is computed; otherwise the outputs are scores
 * [count], rois [count, 4], classes [count] and batches [count] (TENSOR_INT32),
 * per image by class, then by score.  count may be 0. */
int npu_op_box_with_nms_limit(const struct npu_tensor *scores, const struct npu_tensor *rois,
                              const struct npu_tensor *batches, const struct npu_nms_params *p,
                              const struct npu_tensor *out_scores, const struct npu_tensor *out_rois,
                              const struct npu_tensor *out_classes, const struct npu_tensor *out_batches,
                              uint32_t *count);

/* GENERATE_PROPOSALS' scalars. */
struct npu_proposal_params {
    float h_stride, w_stride;   /* the anchors' shift per cell */
    int32_t pre_nms, post_nms;  /* how many to keep before and after NMS; <= 0 / < 0: all */
    float iou_threshold, min_size;
    bool nchw;
};

/* GENERATE_PROPOSALS: scores [batches, h, w, anchors] (or NCHW), deltas
 * [batches, h, w, 4 * anchors], anchors [anchors, 4], image_info [batches, 2];
 * as BOX_WITH_NMS_LIMIT, NULL outputs compute *count only, else out_scores
 * [count], out_rois [count, 4], out_batches [count]. */
int npu_op_generate_proposals(const struct npu_tensor *scores, const struct npu_tensor *deltas,
                              const struct npu_tensor *anchors, const struct npu_tensor *image_info,
                              const struct npu_proposal_params *p, const struct npu_tensor *out_scores,
                              const struct npu_tensor *out_rois, const struct npu_tensor *out_batches,
                              uint32_t *count);

/* DETECTION_POSTPROCESSING's scalars. */
struct npu_detection_params {
    float scale_y, scale_x, scale_h, scale_w;   /* > 0 */
    bool regular_nms;
    int32_t max_detections, max_classes_per_detection, max_detections_per_class;
    float score_threshold, iou_threshold;
    bool background_in_label;
};

/* DETECTION_POSTPROCESSING (float32 or float16): scores [batches, anchors,
 * classes], deltas [batches, anchors, >= 4] (dy, dx, dh, dw), anchors
 * [anchors, 4] (y, x, h, w); outputs scores [batches, d], boxes [batches, d, 4],
 * classes [batches, d], detections [batches] with d max_detections (times
 * max_classes_per_detection without regular NMS); unused slots are 0. */
int npu_op_detection_postprocessing(const struct npu_tensor *scores, const struct npu_tensor *deltas,
                                    const struct npu_tensor *anchors, const struct npu_detection_params *p,
                                    const struct npu_tensor *out_scores, const struct npu_tensor *out_boxes,
                                    const struct npu_tensor *out_classes, const struct npu_tensor *out_detections);

/* (end of detection) */

#endif /* NPU_OPS_H */
