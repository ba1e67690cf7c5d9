/*
 * npu/model.h - the model format shared by every layer.
 *
 * struct npu_model mirrors NNAPI HAL 1.2's Model with NNAPI's numbering
 * everywhere (every OperationType and OperandType, operands' quantization), so
 * the NNAPI runtime, the HAL process and a C driver all read the same graph.
 * Every pointer in it is *borrowed*: a call that takes a model reads it during
 * the call and copies what it keeps; the caller may free or reuse its memory
 * as soon as the call returns.
 *
 * Tensors are dense and row-major in their type's storage (float, half,
 * int32, uint8, int8, int16, uint16, bool8).  Each operation takes its
 * inputs as NN HAL 1.2's types.hal lays them out; npuemu computes those that
 * have a binding (npu/bind.h), which checks the operation's signature, its
 * operand types, quantization and shapes, and works out its outputs' shapes
 * from its inputs' and its constant parameters.  A temporary or a model
 * output may leave its shape (or some dimensions, as 0) to that computation.
 */
#ifndef NPU_MODEL_H
#define NPU_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* NN HAL 1.2's OperandType, all of it. */
enum npu_operand_type {
    NPU_OPERAND_FLOAT32 = 0,
    NPU_OPERAND_INT32 = 1,
    NPU_OPERAND_UINT32 = 2,
    NPU_OPERAND_TENSOR_FLOAT32 = 3,
    NPU_OPERAND_TENSOR_INT32 = 4,
    NPU_OPERAND_TENSOR_QUANT8_ASYMM = 5,
    NPU_OPERAND_BOOL = 6,
    NPU_OPERAND_TENSOR_QUANT16_SYMM = 7,
    NPU_OPERAND_TENSOR_FLOAT16 = 8,
    NPU_OPERAND_TENSOR_BOOL8 = 9,
    NPU_OPERAND_FLOAT16 = 10,
    NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL = 11,
    NPU_OPERAND_TENSOR_QUANT16_ASYMM = 12,
    NPU_OPERAND_TENSOR_QUANT8_SYMM = 13,
    NPU_OPERAND_TYPE_COUNT = 14
};

/* NNAPI OperandLifeTime. */
enum npu_operand_lifetime {
    NPU_LIFETIME_TEMPORARY_VARIABLE = 0,
    NPU_LIFETIME_MODEL_INPUT = 1,
    NPU_LIFETIME_MODEL_OUTPUT = 2,
    NPU_LIFETIME_CONSTANT_COPY = 3,
    NPU_LIFETIME_CONSTANT_REFERENCE = 4,
    NPU_LIFETIME_NO_VALUE = 5
};

/* NN HAL 1.2's OperationType, all 95 (which of them a device computes is its
 * bindings' and its own say: npu/bind.h, the driver's get_supported_operations). */
enum npu_operation_type {
    NPU_OP_ADD = 0,
    NPU_OP_AVERAGE_POOL_2D = 1,
    NPU_OP_CONCATENATION = 2,
    NPU_OP_CONV_2D = 3,
    NPU_OP_DEPTHWISE_CONV_2D = 4,
    NPU_OP_DEPTH_TO_SPACE = 5,
    NPU_OP_DEQUANTIZE = 6,
    NPU_OP_EMBEDDING_LOOKUP = 7,
    NPU_OP_FLOOR = 8,
    NPU_OP_FULLY_CONNECTED = 9,
    NPU_OP_HASHTABLE_LOOKUP = 10,
    NPU_OP_L2_NORMALIZATION = 11,
    NPU_OP_L2_POOL_2D = 12,
    NPU_OP_LOCAL_RESPONSE_NORMALIZATION = 13,
    NPU_OP_LOGISTIC = 14,
    NPU_OP_LSH_PROJECTION = 15,
    NPU_OP_LSTM = 16,
    NPU_OP_MAX_POOL_2D = 17,
    NPU_OP_MUL = 18,
    NPU_OP_RELU = 19,
    NPU_OP_RELU1 = 20,
    NPU_OP_RELU6 = 21,
    NPU_OP_RESHAPE = 22,
    NPU_OP_RESIZE_BILINEAR = 23,
    NPU_OP_RNN = 24,
    NPU_OP_SOFTMAX = 25,
    NPU_OP_SPACE_TO_DEPTH = 26,
    NPU_OP_SVDF = 27,
    NPU_OP_TANH = 28,
    NPU_OP_BATCH_TO_SPACE_ND = 29,
    NPU_OP_DIV = 30,
    NPU_OP_MEAN = 31,
    NPU_OP_PAD = 32,
    NPU_OP_SPACE_TO_BATCH_ND = 33,
    NPU_OP_SQUEEZE = 34,
    NPU_OP_STRIDED_SLICE = 35,
    NPU_OP_SUB = 36,
    NPU_OP_TRANSPOSE = 37,
    NPU_OP_ABS = 38,
    NPU_OP_ARGMAX = 39,
    NPU_OP_ARGMIN = 40,
    NPU_OP_AXIS_ALIGNED_BBOX_TRANSFORM = 41,
    NPU_OP_BIDIRECTIONAL_SEQUENCE_LSTM = 42,
    NPU_OP_BIDIRECTIONAL_SEQUENCE_RNN = 43,
    NPU_OP_BOX_WITH_NMS_LIMIT = 44,
    NPU_OP_CAST = 45,
    NPU_OP_CHANNEL_SHUFFLE = 46,
    NPU_OP_DETECTION_POSTPROCESSING = 47,
    NPU_OP_EQUAL = 48,
    NPU_OP_EXP = 49,
    NPU_OP_EXPAND_DIMS = 50,
    NPU_OP_GATHER = 51,
    NPU_OP_GENERATE_PROPOSALS = 52,
    NPU_OP_GREATER = 53,
    NPU_OP_GREATER_EQUAL = 54,
    NPU_OP_GROUPED_CONV_2D = 55,
    NPU_OP_HEATMAP_MAX_KEYPOINT = 56,
    NPU_OP_INSTANCE_NORMALIZATION = 57,
    NPU_OP_LESS = 58,
    NPU_OP_LESS_EQUAL = 59,
    NPU_OP_LOG = 60,
    NPU_OP_LOGICAL_AND = 61,
    NPU_OP_LOGICAL_NOT = 62,
    NPU_OP_LOGICAL_OR = 63,
    NPU_OP_LOG_SOFTMAX = 64,
    NPU_OP_MAXIMUM = 65,
    NPU_OP_MINIMUM = 66,
    NPU_OP_NEG = 67,
    NPU_OP_NOT_EQUAL = 68,
    NPU_OP_PAD_V2 = 69,
    NPU_OP_POW = 70,
    NPU_OP_PRELU = 71,
    NPU_OP_QUANTIZE = 72,
    NPU_OP_QUANTIZED_16BIT_LSTM = 73,
    NPU_OP_RANDOM_MULTINOMIAL = 74,
    NPU_OP_REDUCE_ALL = 75,
    NPU_OP_REDUCE_ANY = 76,
    NPU_OP_REDUCE_MAX = 77,
    NPU_OP_REDUCE_MIN = 78,
    NPU_OP_REDUCE_PROD = 79,
    NPU_OP_REDUCE_SUM = 80,
    NPU_OP_ROI_ALIGN = 81,
    NPU_OP_ROI_POOLING = 82,
    NPU_OP_RSQRT = 83,
    NPU_OP_SELECT = 84,
    NPU_OP_SIN = 85,
    NPU_OP_SLICE = 86,
    NPU_OP_SPLIT = 87,
    NPU_OP_SQRT = 88,
    NPU_OP_TILE = 89,
    NPU_OP_TOPK_V2 = 90,
    NPU_OP_TRANSPOSE_CONV_2D = 91,
    NPU_OP_UNIDIRECTIONAL_SEQUENCE_LSTM = 92,
    NPU_OP_UNIDIRECTIONAL_SEQUENCE_RNN = 93,
    NPU_OP_RESIZE_NEAREST_NEIGHBOR = 94,
    NPU_OPERATION_TYPE_COUNT = 95
};

/* NNAPI FuseCode: the activation applied to an operation's output. */
enum npu_fuse_code {
    NPU_FUSE_NONE = 0,
    NPU_FUSE_RELU = 1,
    NPU_FUSE_RELU1 = 2,
    NPU_FUSE_RELU6 = 3
};

#define NPU_MAX_RANK 6

/* Where a constant operand's bytes are: in operand_values (CONSTANT_COPY,
 * pool_index ignored) or in pools[pool_index] (CONSTANT_REFERENCE). */
struct npu_data_location {
    uint32_t pool_index;
    uint32_t offset;
    uint32_t length;
};

struct npu_operand {
    int32_t type;                 /* enum npu_operand_type */
    uint32_t dimension_count;     /* 0 for scalars; at most NPU_MAX_RANK */
    const uint32_t *dimensions;   /* dimension_count entries, each > 0 */
    int32_t lifetime;             /* enum npu_operand_lifetime */
    struct npu_data_location location;
    /* Quantization, as NNAPI's Operand: real = (stored - zero_point) * scale for the
     * quantized types (0 and 0 for the others); a TENSOR_QUANT8_SYMM_PER_CHANNEL
     * operand has instead channel_scale_count scales, one per index of dimension
     * channel_dim (channel_scales NULL for every other type). */
    float scale;
    int32_t zero_point;
    uint32_t channel_dim;
    uint32_t channel_scale_count;
    const float *channel_scales;
};

struct npu_operation {
    int32_t type;                 /* enum npu_operation_type */
    uint32_t input_count;
    const uint32_t *inputs;       /* operand indexes */
    uint32_t output_count;
    const uint32_t *outputs;      /* operand indexes */
};

/* A memory pool (NNAPI's hidl_memory): shared memory the caller mapped. */
struct npu_pool {
    const void *data;
    size_t length;
};

struct npu_model {
    uint32_t operand_count;
    const struct npu_operand *operands;
    uint32_t operation_count;
    const struct npu_operation *operations;  /* in execution (topological) order */
    uint32_t input_count;
    const uint32_t *input_indexes;           /* operands with lifetime MODEL_INPUT */
    uint32_t output_count;
    const uint32_t *output_indexes;          /* operands with lifetime MODEL_OUTPUT */
    const void *operand_values;              /* CONSTANT_COPY bytes */
    size_t operand_values_length;
    uint32_t pool_count;
    const struct npu_pool *pools;            /* CONSTANT_REFERENCE bytes */
    /* relaxComputationFloat32toFloat16: float32 operations may compute in float16
     * (the kernels keep float32; the hardware charges them at float16's rate) */
    bool relax_float32_to_float16;
};

#ifndef NPU_CDEF
/*
 * The operand type of operation k of a model, as NNAPI prices and partitions
 * an operation: the type of its selecting input, input 0, except the data
 * input of EMBEDDING_LOOKUP (1), HASHTABLE_LOOKUP (2) and SELECT (1).  -1 when
 * the operation lacks that input (a model npu_model_validate refuses).  For a
 * model that passed validation (or npu_model_check_support) it is always a
 * valid type.
 */
static inline int32_t npu_operation_operand_type(const struct npu_model *m, uint32_t k)
{
    const struct npu_operation *o = &m->operations[k];
    uint32_t at = o->type == NPU_OP_HASHTABLE_LOOKUP ? 2
                  : o->type == NPU_OP_EMBEDDING_LOOKUP || o->type == NPU_OP_SELECT ? 1 : 0;
    if (at >= o->input_count || o->inputs[at] >= m->operand_count)
        return -1;
    return m->operands[o->inputs[at]].type;
}
#endif

/* One input or output tensor of an execution: length must equal the operand's
 * size in bytes (its element size x the product of its dimensions). */
struct npu_buffer {
    void *data;
    size_t length;
};

/* One tensor's shape at execution.  An input's: the dimensions the caller gives
 * a model input whose declared shape leaves some unspecified (rank 0: as
 * declared, which must then be complete); a given dimension must match a
 * declared one.  An output's: filled by the run with the dimensions the
 * output really has (rank 0 while they are not known) and whether the
 * caller's buffer held it (false: the run stopped with NPU_E_BUFFER_TOO_SMALL,
 * and the dimensions say how large a buffer must be). */
struct npu_shape {
    uint32_t rank;
    uint32_t dims[NPU_MAX_RANK];
    bool sufficient;
};

/*
 * Checks a model thoroughly: operand types, quantization, lifetimes and
 * locations, operand indexes, that inputs and outputs match the lifetimes,
 * that every operand is written once before it is read, and each operation
 * by its binding (signature, types, scalar parameters, fuse codes, shapes;
 * the shapes it computes flow to the operations after it).  An operation
 * npuemu has no binding for is NPU_E_BAD_OPERATION here.  Returns NPU_OK or
 * the first problem's distinct code (NPU_E_BAD_OPERAND_INDEX,
 * NPU_E_BAD_SHAPE, ...).  When bad_operation is not NULL it receives the
 * index of the offending operation, or UINT32_MAX when the problem is not in
 * an operation.
 */
int npu_model_validate(const struct npu_model *model, uint32_t *bad_operation);

/*
 * The getSupportedOperations check: like npu_model_validate, but an
 * operation npuemu has no binding for (an operation type it does not
 * compute, or an unknown one) is not an error: computable[i] (one per
 * operation, the caller's array) is set false for it and true for the
 * others.  Structural errors (bad operand index, bad location, an operand
 * read before it is written) and an operation its binding refuses (a wrong
 * signature, type, quantization or shape) are still errors.
 */
int npu_model_check_support(const struct npu_model *model, bool *computable, uint32_t *bad_operation);

/*
 * Runs a whole model on the calling thread with the same kernels the emulated
 * hardware uses (this is what the NNAPI runtime's CPU device `nnapi-reference`
 * calls).  inputs[i] is the tensor for model->input_indexes[i], outputs[i]
 * the one for model->output_indexes[i]; both are borrowed for the call, and
 * outputs are fully written when it returns NPU_OK.  Validates first.
 */
int npu_kernel_run_model(const struct npu_model *model,
                         const struct npu_buffer *inputs, uint32_t input_count,
                         const struct npu_buffer *outputs, uint32_t output_count);

/*
 * npu_kernel_run_model for a model whose shapes are known only at execution
 * (npu/bind.h): input_shapes (may be NULL: every input as declared) gives the
 * inputs' dimensions, and output_shapes (may be NULL) receives every
 * output's.  An output whose shape the model leaves unspecified may have a
 * larger buffer than it needs; a smaller one ends the run with
 * NPU_E_BUFFER_TOO_SMALL (output_shapes says which and how large).
 */
int npu_kernel_run_model_shaped(const struct npu_model *model,
                                const struct npu_buffer *inputs, const struct npu_shape *input_shapes,
                                uint32_t input_count,
                                const struct npu_buffer *outputs, struct npu_shape *output_shapes,
                                uint32_t output_count);

/*
 * The same, for a model run many times: npu_kernel_prepare validates and
 * plans the model once (its constants copied: the model need not outlive
 * the call), npu_kernel_run_prepared runs that plan as
 * npu_kernel_run_model_shaped runs a model (the temporaries' arena kept
 * between runs), npu_kernel_release frees it.  One run at a time per
 * prepared model: the caller serialises runs of the same one.
 */
struct npu_kernel_prepared;
int npu_kernel_prepare(const struct npu_model *model, struct npu_kernel_prepared **prepared);
int npu_kernel_run_prepared(struct npu_kernel_prepared *prepared,
                            const struct npu_buffer *inputs, const struct npu_shape *input_shapes,
                            uint32_t input_count,
                            const struct npu_buffer *outputs, struct npu_shape *output_shapes,
                            uint32_t output_count);
void npu_kernel_release(struct npu_kernel_prepared *prepared);

/* Size in bytes of one operand as stored (its type's element size x its
 * element count); 0 for an unknown type or a shape with an unknown dimension. */
size_t npu_operand_byte_size(const struct npu_operand *operand);

#endif /* NPU_MODEL_H */
