#include "testlib.h"

const char *t_failure;
char t_failure_buf[512];

struct mb *mb_new(void)
{
    return calloc(1, sizeof(struct mb));
}

uint32_t mb_tensor(struct mb *b, int32_t lifetime, uint32_t rank, const uint32_t *dims)
{
    uint32_t i = b->n++;
    memcpy(b->dims[i], dims, rank * sizeof *dims);
    b->opnd[i] = (struct npu_operand){.type = NPU_OPERAND_TENSOR_FLOAT32, .dimension_count = rank,
                                      .dimensions = b->dims[i], .lifetime = lifetime};
    if (lifetime == NPU_LIFETIME_MODEL_INPUT)
        b->ins[b->nin++] = i;
    if (lifetime == NPU_LIFETIME_MODEL_OUTPUT)
        b->outs[b->nout++] = i;
    return i;
}

static uint32_t put(struct mb *b, uint32_t i, const void *data, size_t len)
{
    memcpy(b->values + b->vlen, data, len);
    b->opnd[i].location = (struct npu_data_location){0, (uint32_t)b->vlen, (uint32_t)len};
    b->vlen += (len + 3) & ~(size_t)3;
    return i;
}

uint32_t mb_const(struct mb *b, uint32_t rank, const uint32_t *dims, const float *data)
{
    uint32_t i = mb_tensor(b, NPU_LIFETIME_CONSTANT_COPY, rank, dims);
    return put(b, i, data, npu_operand_byte_size(&b->opnd[i]));
}

uint32_t mb_i32(struct mb *b, int32_t v)
{
    uint32_t i = b->n++;
    b->opnd[i] = (struct npu_operand){.type = NPU_OPERAND_INT32, .lifetime = NPU_LIFETIME_CONSTANT_COPY};
    return put(b, i, &v, 4);
}

uint32_t mb_f32(struct mb *b, float v)
{
    uint32_t i = b->n++;
    b->opnd[i] = (struct npu_operand){.type = NPU_OPERAND_FLOAT32, .lifetime = NPU_LIFETIME_CONSTANT_COPY};
    return put(b, i, &v, 4);
}

void mb_op(struct mb *b, int32_t type, uint32_t nin, const uint32_t *ins, uint32_t out)
{
    uint32_t k = b->nops++;
    memcpy(b->opin[k], ins, nin * sizeof *ins);
    b->opout[k][0] = out;
    b->ops[k] = (struct npu_operation){.type = type, .input_count = nin, .inputs = b->opin[k],
                                       .output_count = 1, .outputs = b->opout[k]};
}

struct npu_model *mb_model(struct mb *b)
{
    b->m = (struct npu_model){.operand_count = b->n, .operands = b->opnd, .operation_count = b->nops,
                              .operations = b->ops, .input_count = b->nin, .input_indexes = b->ins,
                              .output_count = b->nout, .output_indexes = b->outs,
                              .operand_values = b->values, .operand_values_length = b->vlen};
    return &b->m;
}

struct npu_system *sys_new(int32_t clock, int32_t preempt)
{
    struct npu_system_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.clock = clock;
    cfg.preemption_mode = preempt;
    if (clock == NPU_CLOCK_REAL)
        cfg.speed_factor = 0.01;
    struct npu_system *s = NULL;
    if (npu_system_create(&cfg, &s) != NPU_OK)
        return NULL;
    return s;
}

uint32_t drain(struct npu_system *s, struct npu_event **out)
{
    static struct npu_event buf[4096];
    uint32_t n = 0, got;
    do {
        if (npu_system_drain_events(s, buf + n, 4096 - n, &got) != NPU_OK)
            break;
        n += got;
    } while (got && n < 4096);
    *out = buf;
    return n;
}
