/*
 * The reference vendor driver ("emu"): four devices over three pieces of
 * emulated silicon that differ as a phone's do, so that NNAPI discovery,
 * partitioning and assignment mean something.
 *
 *   0 emu-npu     ACCELERATOR  2 channels  the convolutional op set (below) in quant8
 *                                          (per-channel filters too), float16 and float32;
 *                                          fastest on quant8 and float16, slow on float32
 *   1 emu-gpu     GPU          1 channel   every operation whose operand type is float16
 *                                          or float32, no quantized or integer ones;
 *                                          fastest on float32
 *   2 emu-dsp     ACCELERATOR  1 channel   a small quant8 op set (no per-channel filters)
 *                                          and float32 ADD, MUL, RELU, FULLY_CONNECTED;
 *                                          slow on float, frugal
 *   3 emu-hetero  OTHER        manages emu-npu and emu-dsp (also exposed alone,
 *                              as NN HAL 1.2 requires of a heterogeneous device)
 *
 * Claims.  A device claims an operation by its operation type and its operand
 * type (npu_operation_operand_type: the selecting input's), from one table per
 * device (CLAIMS_*: per operation, a mask of operand types), and only when
 * npuemu computes it (hw->check_support).  The hardware computes every bound
 * operation in every type, so the tables are each device's choice, and its
 * promise: what it claims, load_model accepts and the hardware runs.  Every
 * device that claims an operation in float16 claims it in float32 too, so a
 * model relaxed to float16 (npu_model.relax_float32_to_float16) is claimed as
 * its float32 is; the hardware charges its float32 operations at float16's
 * rate, which is why the relaxed figures are float16's.
 * emu-hetero claims, for a model, what the one part that claims most of it
 * claims (its loads go whole to one part, so a union across parts would be a
 * claim no part keeps).
 *
 * PerformanceInfo.  Each device's figures come from its silicon's cost model
 * (the rates the hardware charges, hw.h): for an operand type, the time of
 * a reference convolution in that type's compute class on one channel
 * (roofline: max(FLOPs / flops_per_ns, bytes / bytes_per_ns), bytes by the
 * class's element size), over the time of the same convolution in float32
 * on the CPU described by CPU_SILICON; powerUsage is that time ratio times the
 * ratio of their powers, whose stand-in is heat_rise_c (the die's rise per
 * busy channel is its power times the package's thermal resistance).  A type
 * the device claims no operation of is FLT_MAX.  A scalar type has its tensor
 * type's figures; the relaxed figures are float16's, or float32's on a device
 * without float16.  emu-hetero's are, per type, the best of its parts' times
 * HETERO_OVERHEAD.
 *
 * A model loaded on emu-hetero is placed whole on one of its parts: among the
 * parts that claim every operation of the model, the one with the most free
 * weight memory, or, when the app compiled it with
 * ANEURALNETWORKS_PREFER_LOW_POWER (npu_load_params.preference), the part of
 * least power (heat_rise_c) that has room for it.  Its work then runs on that
 * part's channels but reports deviceNumber 3.
 *
 * Scheduling follows driver.h exactly; the hardware queue does the ordering
 * and preemption (checkpoint by default).
 *
 * Built into npuhal._npu (NPU_BUILTIN_REFERENCE defined), or alone as a .so
 * with `make driver SRC=csrc/drivers/reference/reference.c`.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/driver.h"
#include "npu/errors.h"

#ifndef NPU_BUILD_ID
#define NPU_BUILD_ID "unversioned"
#endif

enum { N_SILICON = 3, N_DEVICES = 4, HETERO = 3, MIB = 1 << 20 };
#define GIB (UINT64_C(1) << 30)

/* ---- claims: per operation, the operand types a device runs it in ---- */

#define T(x) ((uint16_t)(1u << NPU_OPERAND_##x))
#define F32 T(TENSOR_FLOAT32)
#define F16 T(TENSOR_FLOAT16)
#define Q8 T(TENSOR_QUANT8_ASYMM)
#define FLOATS (F32 | F16)
#define FQ (F32 | F16 | Q8)

/* emu-npu: what convolutional vision models are made of (convolutions of every
 * kind, pooling, fully connected layers, element-wise arithmetic and
 * activations, the reshaping and resizing between them, softmax, mean), in
 * every type the spec gives them among float32, float16 and quant8; the
 * quantize/dequantize at a quantized model's edges.  No recurrent,
 * detection, lookup, comparison, logic or elementary-function operations. */
static const uint16_t CLAIMS_NPU[NPU_OPERATION_TYPE_COUNT] = {
    [NPU_OP_CONV_2D] = FQ, [NPU_OP_DEPTHWISE_CONV_2D] = FQ, [NPU_OP_GROUPED_CONV_2D] = FQ,
    [NPU_OP_TRANSPOSE_CONV_2D] = FQ, [NPU_OP_FULLY_CONNECTED] = FQ,
    [NPU_OP_AVERAGE_POOL_2D] = FQ, [NPU_OP_MAX_POOL_2D] = FQ, [NPU_OP_L2_POOL_2D] = FLOATS,
    [NPU_OP_ADD] = FQ, [NPU_OP_SUB] = FQ, [NPU_OP_MUL] = FQ, [NPU_OP_DIV] = FLOATS,
    [NPU_OP_MAXIMUM] = FQ, [NPU_OP_MINIMUM] = FQ,
    [NPU_OP_RELU] = FQ, [NPU_OP_RELU1] = FQ, [NPU_OP_RELU6] = FQ, [NPU_OP_PRELU] = FQ,
    [NPU_OP_LOGISTIC] = FQ, [NPU_OP_TANH] = FQ,
    [NPU_OP_SOFTMAX] = FQ, [NPU_OP_MEAN] = FQ,
    [NPU_OP_L2_NORMALIZATION] = FQ, [NPU_OP_LOCAL_RESPONSE_NORMALIZATION] = FLOATS,
    [NPU_OP_CONCATENATION] = FQ, [NPU_OP_RESHAPE] = FQ, [NPU_OP_SQUEEZE] = FQ,
    [NPU_OP_PAD] = FQ, [NPU_OP_PAD_V2] = FQ, [NPU_OP_TRANSPOSE] = FQ, [NPU_OP_STRIDED_SLICE] = FQ,
    [NPU_OP_DEPTH_TO_SPACE] = FQ, [NPU_OP_SPACE_TO_DEPTH] = FQ, [NPU_OP_CHANNEL_SHUFFLE] = FQ,
    [NPU_OP_BATCH_TO_SPACE_ND] = FQ, [NPU_OP_SPACE_TO_BATCH_ND] = FQ,
    [NPU_OP_RESIZE_BILINEAR] = FQ, [NPU_OP_RESIZE_NEAREST_NEIGHBOR] = FQ,
    [NPU_OP_QUANTIZE] = FLOATS,
    [NPU_OP_DEQUANTIZE] = Q8 | T(TENSOR_QUANT8_SYMM) | T(TENSOR_QUANT8_SYMM_PER_CHANNEL),
};

/* emu-dsp: a small quantized set, and the four float32 operations it always had. */
static const uint16_t CLAIMS_DSP[NPU_OPERATION_TYPE_COUNT] = {
    [NPU_OP_CONV_2D] = Q8, [NPU_OP_DEPTHWISE_CONV_2D] = Q8, [NPU_OP_FULLY_CONNECTED] = Q8 | F32,
    [NPU_OP_AVERAGE_POOL_2D] = Q8, [NPU_OP_MAX_POOL_2D] = Q8,
    [NPU_OP_ADD] = Q8 | F32, [NPU_OP_MUL] = Q8 | F32,
    [NPU_OP_RELU] = Q8 | F32, [NPU_OP_RELU1] = Q8, [NPU_OP_RELU6] = Q8, [NPU_OP_LOGISTIC] = Q8,
    [NPU_OP_TANH] = Q8, [NPU_OP_SOFTMAX] = Q8,
    [NPU_OP_RESHAPE] = Q8, [NPU_OP_SQUEEZE] = Q8, [NPU_OP_CONCATENATION] = Q8, [NPU_OP_PAD] = Q8,
    [NPU_OP_RESIZE_BILINEAR] = Q8,
};

struct device_spec {
    const char *name;      /* the DEVICE_NAME part */
    int32_t type;
    /* claims: the operand types every operation runs in, or'ed with the
     * operation's own entry of `table` (may be NULL) */
    uint16_t every_operation;
    const uint16_t *table;
    bool per_channel;      /* takes TENSOR_QUANT8_SYMM_PER_CHANNEL filters */
    int silicon;           /* index into SILICON, or -1 for the heterogeneous device */
};

static const struct device_spec DEVICES[N_DEVICES] = {
    {"npu", NPU_DEVICE_ACCELERATOR, 0, CLAIMS_NPU, true, 0},
    /* every operation the spec gives a float type; those it does not never have one */
    {"gpu", NPU_DEVICE_GPU, FLOATS, NULL, false, 1},
    {"dsp", NPU_DEVICE_ACCELERATOR, 0, CLAIMS_DSP, false, 2},
    {"hetero", NPU_DEVICE_OTHER, 0, NULL, true, -1},
};
static const uint32_t HETERO_PARTS[2] = {0, 2};

/*
 * The silicon, as a 2019-2020 flagship phone SoC's (README "The reference
 * driver's devices" cites the figures).  flops_per_ns per compute class:
 * {float32, float16, quant8}, per channel; 0 = float32's rate.
 *   npu: a dual-core NPU (Exynos 990's, Kirin 990's two Da Vinci cores): per
 *        core ~4 TOPS int8, half that in float16; float32 it runs four times
 *        slower than float16 again.  Its DMA reaches the whole LPDDR4X bus
 *        (4266 MT/s x 64 bit = 34.1 GB/s).  A slice costs 2 us to set up (a
 *        layer descriptor and its DMA), a context save 10 us plus the copy.
 *   gpu: an Adreno 630-class GPU: ~0.7 TFLOP/s float32, twice that in float16,
 *        25 GB/s of the bus; 5 us per slice (a kernel dispatch).
 *   dsp: a Hexagon 690-class DSP with its vector units: ~1.6 TOPS int8, 0.3
 *        TFLOP/s float, 10 GB/s; 5 us per slice (a FastRPC-driven graph step).
 */
static const struct npu_hw_device_config SILICON[N_SILICON] = {
    {.name = "npu", .channel_count = 2, .flops_per_ns = {500.0, 2000.0, 4000.0}, .bytes_per_ns = 34.1,
     .weight_memory_bytes = 4 * GIB, .sram_bytes = 32 * MIB, .slice_overhead_ns = 2000,
     .context_save_fixed_ns = 10000, .heat_rise_c = 12.0f},
    {.name = "gpu", .channel_count = 1, .flops_per_ns = {700.0, 1400.0, 0.0}, .bytes_per_ns = 25.0,
     .weight_memory_bytes = 2 * GIB, .sram_bytes = 32 * MIB, .slice_overhead_ns = 5000,
     .context_save_fixed_ns = 20000, .heat_rise_c = 10.0f},
    {.name = "dsp", .channel_count = 1, .flops_per_ns = {300.0, 0.0, 1600.0}, .bytes_per_ns = 10.0,
     .weight_memory_bytes = 512 * (uint64_t)MIB, .sram_bytes = 1 * MIB, .slice_overhead_ns = 5000,
     .context_save_fixed_ns = 5000, .heat_rise_c = 4.0f},
};

/* The phone's CPU, which every PerformanceInfo is a ratio to (in float32). */
static const struct npu_hw_device_config CPU_SILICON = {
    .name = "cpu", .flops_per_ns = {100.0}, .bytes_per_ns = 10.0, .heat_rise_c = 8.0f,
};

/* The reference convolution of the figures: 3x3, 32 -> 32 channels, on 28x28. */
#define REF_FLOPS (2.0 * 3 * 3 * 32 * 32 * 28 * 28)
#define REF_ELEMENTS (2.0 * 28 * 28 * 32 + 3 * 3 * 32 * 32)
static const double CLASS_BYTES[NPU_COMPUTE_CLASS_COUNT] = {4.0, 2.0, 1.0};

#define HETERO_OVERHEAD 1.25f

/* Whether operation k of m (a model check_support accepted) is in dev's claims. */
static bool claims(uint32_t dev, const struct npu_model *m, uint32_t k)
{
    const struct device_spec *spec = &DEVICES[dev];
    const struct npu_operation *o = &m->operations[k];
    int32_t t = npu_operation_operand_type(m, k);
    if (o->type < 0 || o->type >= NPU_OPERATION_TYPE_COUNT || t < 0 || t >= NPU_OPERAND_TYPE_COUNT)
        return false;
    uint16_t mask = spec->every_operation | (spec->table ? spec->table[o->type] : 0);
    if (!(mask & (1u << t)))
        return false;
    for (uint32_t i = 0; i < o->input_count && !spec->per_channel; i++)
        if (o->inputs[i] < m->operand_count &&
            m->operands[o->inputs[i]].type == NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL)
            return false;
    return true;
}

/* Whether dev (not emu-hetero) claims operand type t for any operation. */
static bool runs_type(uint32_t dev, int32_t t)
{
    const struct device_spec *spec = &DEVICES[dev];
    uint16_t bit = (uint16_t)(1u << t);
    if (spec->every_operation & bit)
        return true;
    for (int op = 0; spec->table && op < NPU_OPERATION_TYPE_COUNT; op++)
        if (spec->table[op] & bit)
            return true;
    return false;
}

/* The emulated time of the reference convolution in compute class c on one channel. */
static double reference_ns(const struct npu_hw_device_config *s, int32_t c)
{
    double rate = s->flops_per_ns[c] > 0 ? s->flops_per_ns[c] : s->flops_per_ns[NPU_COMPUTE_FLOAT32];
    return fmax(REF_FLOPS / rate, REF_ELEMENTS * CLASS_BYTES[c] / s->bytes_per_ns);
}

/* The tensor type whose figures a scalar type shares (itself for a tensor type). */
static int32_t tensor_of(int32_t t)
{
    switch (t) {
    case NPU_OPERAND_FLOAT32: return NPU_OPERAND_TENSOR_FLOAT32;
    case NPU_OPERAND_FLOAT16: return NPU_OPERAND_TENSOR_FLOAT16;
    case NPU_OPERAND_INT32: case NPU_OPERAND_UINT32: return NPU_OPERAND_TENSOR_INT32;
    case NPU_OPERAND_BOOL: return NPU_OPERAND_TENSOR_BOOL8;
    default: return t;
    }
}

/* PerformanceInfo of a device with silicon (not emu-hetero) for operand type t. */
static struct npu_performance_info silicon_performance(uint32_t dev, int32_t t)
{
    t = tensor_of(t);
    if (!runs_type(dev, t))
        return (struct npu_performance_info){FLT_MAX, FLT_MAX};
    const struct npu_hw_device_config *s = &SILICON[DEVICES[dev].silicon];
    double exec = reference_ns(s, npu_compute_class(t)) / reference_ns(&CPU_SILICON, NPU_COMPUTE_FLOAT32);
    double power = exec * s->heat_rise_c / CPU_SILICON.heat_rise_c;
    return (struct npu_performance_info){(float)exec, (float)power};
}

static struct npu_performance_info performance(uint32_t dev, int32_t t)
{
    if (DEVICES[dev].silicon >= 0)
        return silicon_performance(dev, t);
    struct npu_performance_info best = {FLT_MAX, FLT_MAX};
    for (int i = 0; i < 2; i++) {
        struct npu_performance_info p = silicon_performance(HETERO_PARTS[i], t);
        best.exec_time = fminf(best.exec_time, p.exec_time);
        best.power_usage = fminf(best.power_usage, p.power_usage);
    }
    if (best.exec_time < FLT_MAX) {
        best.exec_time *= HETERO_OVERHEAD;
        best.power_usage *= HETERO_OVERHEAD;
    }
    return best;
}

struct loaded {
    bool live;
    uint32_t device;     /* driver device number, for WorkInfo.deviceNumber */
    uint32_t handle;     /* hardware handle */
};

struct ref {
    const struct npu_hw_api *hw;
    struct npu_hw *h;
    uint32_t silicon[N_SILICON];
    struct npu_scheduling_config *cfg;   /* sorted by uid */
    uint32_t ncfg;
    struct loaded *models;
    uint32_t nmodels, cap;
    uint64_t submitted, refused;
};

static int ref_init(const struct npu_hw_api *hw, struct npu_hw *h, void **out)
{
    struct ref *r = calloc(1, sizeof *r);
    if (!r)
        return NPU_E_NO_MEMORY;
    r->hw = hw;
    r->h = h;
    int rc = NPU_OK;
    for (int i = 0; i < N_SILICON && rc == NPU_OK; i++)
        rc = hw->add_device(h, &SILICON[i], &r->silicon[i]);
    if (rc == NPU_OK)
        rc = hw->set_preemption_mode(h, NPU_PREEMPT_CHECKPOINT);
    if (rc == NPU_OK)
        rc = hw->set_scheduling_mode(h, NPU_SCHED_PRIORITY);
    if (rc != NPU_OK) {
        free(r);
        return rc;
    }
    *out = r;
    return NPU_OK;
}

static void ref_fini(void *d)
{
    struct ref *r = d;
    free(r->cfg);
    free(r->models);
    free(r);
}

static uint32_t ref_device_count(void *d)
{
    (void)d;
    return N_DEVICES;
}

static void silicon_status(struct ref *r, int s, int32_t *status, struct npu_hw_device_state *st)
{
    int32_t sev = 0;
    r->hw->device_state(r->h, r->silicon[s], st);
    r->hw->thermal_state(r->h, &sev, NULL);
    if (sev == NPU_THERMAL_SHUTDOWN || st->hung_channels == st->channel_count)
        *status = NPU_STATUS_OFFLINE;
    else if (st->busy_channels == st->channel_count && st->queued_jobs > 0)
        *status = NPU_STATUS_BUSY;
    else
        *status = NPU_STATUS_AVAILABLE;
}

static int ref_get_device_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    struct ref *r = d;
    if (dev >= N_DEVICES)
        return NPU_E_BAD_DEVICE;
    const struct device_spec *spec = &DEVICES[dev];
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "emu-%s", spec->name);
    snprintf(out->version, sizeof out->version, "emu-reference 1.0 (build %s)", NPU_BUILD_ID);
    out->type = spec->type;
    out->feature_level = NPU_FEATURE_LEVEL_NN_HAL_1_2;
    for (int32_t t = 0; t < NPU_OPERAND_TYPE_COUNT; t++)
        out->operand_performance[t] = performance(dev, t);
    struct npu_performance_info f16 = performance(dev, NPU_OPERAND_TENSOR_FLOAT16);
    struct npu_performance_info relaxed = f16.exec_time < FLT_MAX ? f16 : performance(dev, NPU_OPERAND_TENSOR_FLOAT32);
    out->relaxed_float32_to_float16_scalar = relaxed;
    out->relaxed_float32_to_float16_tensor = relaxed;
    int parts[2] = {spec->silicon, -1};
    if (spec->silicon < 0) {
        out->part_count = 2;
        out->parts[0] = HETERO_PARTS[0];
        out->parts[1] = HETERO_PARTS[1];
        parts[0] = DEVICES[HETERO_PARTS[0]].silicon;
        parts[1] = DEVICES[HETERO_PARTS[1]].silicon;
    }
    out->status = NPU_STATUS_OFFLINE;
    for (int i = 0; i < 2 && parts[i] >= 0; i++) {
        struct npu_hw_device_state st;
        int32_t status;
        silicon_status(r, parts[i], &status, &st);
        /* a heterogeneous device is as available as its best part */
        if (i == 0 || status < out->status)
            out->status = status;
        out->weight_memory_bytes += st.weight_memory_total;
        out->weight_memory_used += st.weight_memory_used;
        out->sram_bytes += st.sram_total;
        out->sram_used += st.sram_used;
        out->channel_count += st.channel_count;
    }
    return NPU_OK;
}

/* The part of emu-hetero whose claims it makes for model m: the one that
 * claims most of m's operations (the first on a tie). */
static uint32_t hetero_claimant(const struct npu_model *m)
{
    uint32_t best = HETERO_PARTS[0], best_count = 0;
    for (int i = 0; i < 2; i++) {
        uint32_t count = 0;
        for (uint32_t k = 0; k < m->operation_count; k++)
            count += claims(HETERO_PARTS[i], m, k);
        if (i == 0 || count > best_count) {
            best = HETERO_PARTS[i];
            best_count = count;
        }
    }
    return best;
}

static int ref_get_supported_operations(void *d, uint32_t dev, const struct npu_model *m, bool *supported)
{
    struct ref *r = d;
    if (dev >= N_DEVICES)
        return NPU_E_BAD_DEVICE;
    /* supported[] first holds "npuemu can compute it", then the device's own say */
    int rc = r->hw->check_support(m, supported, NULL);
    if (rc != NPU_OK)
        return rc;
    uint32_t claimant = DEVICES[dev].silicon < 0 ? hetero_claimant(m) : dev;
    for (uint32_t k = 0; k < m->operation_count; k++)
        supported[k] = supported[k] && claims(claimant, m, k);
    return NPU_OK;
}

/* ---- scheduling configs ---- */

static int cmp_uid(const void *a, const void *b)
{
    int32_t x = ((const struct npu_scheduling_config *)a)->uid, y = ((const struct npu_scheduling_config *)b)->uid;
    return (x > y) - (x < y);
}

/* Validates and returns a sorted copy (caller frees), or an error. */
static int checked_sorted(const struct npu_scheduling_config *c, uint32_t n, struct npu_scheduling_config **out)
{
    for (uint32_t i = 0; i < n; i++)
        if (c[i].app_priority < 0 || c[i].app_priority > 1000 || c[i].min_priority < 0 ||
            c[i].min_priority > c[i].max_priority || c[i].max_priority > 2000)
            return NPU_E_INVALID_PRIORITY;
    struct npu_scheduling_config *s = malloc((n ? n : 1) * sizeof *s);
    if (!s)
        return NPU_E_NO_MEMORY;
    if (n)
        memcpy(s, c, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_uid);
    for (uint32_t i = 1; i < n; i++)
        if (s[i].uid == s[i - 1].uid) {
            free(s);
            return NPU_E_DUPLICATE_UID;
        }
    *out = s;
    return NPU_OK;
}

static int ref_set_configs(void *d, const struct npu_scheduling_config *c, uint32_t n)
{
    struct ref *r = d;
    struct npu_scheduling_config *s;
    int rc = checked_sorted(c, n, &s);
    if (rc != NPU_OK)
        return rc;
    free(r->cfg);
    r->cfg = s;
    r->ncfg = n;
    return NPU_OK;
}

static int ref_update_configs(void *d, const struct npu_scheduling_config *c, uint32_t n)
{
    struct ref *r = d;
    struct npu_scheduling_config *s;
    int rc = checked_sorted(c, n, &s);
    if (rc != NPU_OK)
        return rc;
    /* merge two sorted lists; the update wins for a uid in both */
    struct npu_scheduling_config *m = malloc(((size_t)r->ncfg + n + 1) * sizeof *m);
    if (!m) {
        free(s);
        return NPU_E_NO_MEMORY;
    }
    uint32_t i = 0, j = 0, k = 0;
    while (i < r->ncfg || j < n) {
        if (j == n || (i < r->ncfg && r->cfg[i].uid < s[j].uid))
            m[k++] = r->cfg[i++];
        else {
            if (i < r->ncfg && r->cfg[i].uid == s[j].uid)
                i++;
            m[k++] = s[j++];
        }
    }
    free(s);
    free(r->cfg);
    r->cfg = m;
    r->ncfg = k;
    return NPU_OK;
}

static struct npu_scheduling_config config_for(struct ref *r, int32_t uid)
{
    struct npu_scheduling_config key = {.uid = uid};
    const struct npu_scheduling_config *c = r->ncfg ? bsearch(&key, r->cfg, r->ncfg, sizeof key, cmp_uid) : NULL;
    if (c)
        return *c;
    /* android.hardware.npu: no config = lowest priority, direct access, no attribution */
    return (struct npu_scheduling_config){.min_priority = 0, .max_priority = 2000, .uid = uid,
                                          .app_priority = 1000, .has_direct_access = true,
                                          .can_attribute_other_uid = false};
}

/* ---- models and work ---- */

static bool device_supports(uint32_t dev, const struct npu_model *m)
{
    for (uint32_t k = 0; k < m->operation_count; k++)
        if (!claims(dev, m, k))
            return false;
    return true;
}

/* The silicon of emu-hetero's part that takes model m, or -1 if none runs it. */
static int hetero_part(struct ref *r, const struct npu_model *m, const struct npu_load_params *p)
{
    bool low_power = p && p->preference == NPU_PREFERENCE_LOW_POWER;
    uint64_t need = p && p->emulated_weight_bytes ? p->emulated_weight_bytes : 0;
    int best = -1;
    uint64_t best_free = 0;
    for (int i = 0; i < 2; i++) {
        uint32_t part = HETERO_PARTS[i];
        struct npu_hw_device_state st;
        if (!device_supports(part, m) || r->hw->device_state(r->h, r->silicon[DEVICES[part].silicon], &st))
            continue;
        uint64_t free_bytes = st.weight_memory_total - st.weight_memory_used;
        bool better;
        if (best < 0)
            better = true;
        else if (low_power && free_bytes >= need)
            better = SILICON[DEVICES[part].silicon].heat_rise_c <
                         SILICON[DEVICES[HETERO_PARTS[best]].silicon].heat_rise_c ||
                     best_free < need;
        else
            better = free_bytes > best_free;
        if (better) {
            best = i;
            best_free = free_bytes;
        }
    }
    return best < 0 ? -1 : DEVICES[HETERO_PARTS[best]].silicon;
}

static int ref_load_model(void *d, uint32_t dev, const struct npu_model *m, const struct npu_load_params *p,
                          uint32_t *id)
{
    struct ref *r = d;
    if (dev >= N_DEVICES)
        return NPU_E_BAD_DEVICE;
    int rc = r->hw->validate_model(m, NULL);
    if (rc != NPU_OK)
        return rc;
    int silicon = DEVICES[dev].silicon;
    if (silicon < 0) {
        silicon = hetero_part(r, m, p);
        if (silicon < 0)
            return NPU_E_UNSUPPORTED_OPERATION;
    } else if (!device_supports(dev, m)) {
        return NPU_E_UNSUPPORTED_OPERATION;
    }
    if (r->nmodels == r->cap) {
        uint32_t ncap = r->cap ? r->cap * 2 : 16;
        struct loaded *nm = realloc(r->models, ncap * sizeof *nm);
        if (!nm)
            return NPU_E_NO_MEMORY;
        r->models = nm;
        r->cap = ncap;
    }
    uint32_t handle;
    rc = r->hw->load_model(r->h, r->silicon[silicon], (int32_t)dev, m, p, &handle);
    if (rc != NPU_OK)
        return rc;
    r->models[r->nmodels] = (struct loaded){.live = true, .device = dev, .handle = handle};
    *id = ++r->nmodels;
    return NPU_OK;
}

static struct loaded *find(struct ref *r, uint32_t id)
{
    return id >= 1 && id <= r->nmodels && r->models[id - 1].live ? &r->models[id - 1] : NULL;
}

static int ref_unload_model(void *d, uint32_t id)
{
    struct ref *r = d;
    struct loaded *l = find(r, id);
    if (!l)
        return NPU_E_BAD_MODEL_ID;
    int rc = r->hw->unload_model(r->h, l->handle);
    if (rc == NPU_OK)
        l->live = false;
    return rc;
}

static int ref_submit(void *d, const struct npu_work_request *q, int32_t *work_id)
{
    struct ref *r = d;
    struct loaded *l = find(r, q->model_id);
    int rc = NPU_OK;
    struct npu_scheduling_config c = config_for(r, q->uid);
    if (!l)
        rc = NPU_E_BAD_MODEL_ID;
    else if (q->job_priority < 0 || q->job_priority > 1000)
        rc = NPU_E_INVALID_JOB_PRIORITY;
    else if (!c.has_direct_access)
        rc = NPU_E_NO_DIRECT_ACCESS;
    else if (q->original_uid != q->uid && !c.can_attribute_other_uid)
        rc = NPU_E_ATTRIBUTION_DENIED;
    if (rc != NPU_OK) {
        r->refused++;
        return rc;
    }
    int32_t eff = c.app_priority + q->job_priority;
    eff = eff < c.min_priority ? c.min_priority : eff > c.max_priority ? c.max_priority : eff;
    struct npu_work_info info;
    memset(&info, 0, sizeof info);
    info.has_group_id = q->has_group_id;
    if (q->has_group_id)
        memcpy(info.group_id, q->group_id, sizeof info.group_id);
    info.uid = q->uid;
    info.debug_pid = q->debug_pid;
    info.original_uid = q->original_uid;
    if (q->debug_feature_id) {
        info.has_debug_feature_id = true;
        snprintf(info.debug_feature_id, sizeof info.debug_feature_id, "%s", q->debug_feature_id);
    }
    info.job_priority = q->job_priority;
    info.device_number = (int32_t)l->device;
    rc = r->hw->submit(r->h, l->handle, eff, &info, q->inputs, q->input_shapes, q->input_count, q->outputs,
                       q->output_shapes, q->output_count, work_id);
    if (rc == NPU_OK)
        r->submitted++;
    return rc;
}

static int ref_cancel(void *d, int32_t work_id)
{
    struct ref *r = d;
    return r->hw->cancel(r->h, work_id);
}

/* Maps a driver device + channel to silicon + channel (the hetero device's
 * channels are its parts' channels, in part order). */
static int map_channel(struct ref *r, uint32_t dev, uint32_t ch, uint32_t *hw_dev, uint32_t *hw_ch)
{
    if (dev >= N_DEVICES)
        return NPU_E_BAD_DEVICE;
    if (DEVICES[dev].silicon >= 0) {
        *hw_dev = r->silicon[DEVICES[dev].silicon];
        *hw_ch = ch;
        return NPU_OK;
    }
    for (int i = 0; i < 2; i++) {
        int s = DEVICES[HETERO_PARTS[i]].silicon;
        if (ch < SILICON[s].channel_count) {
            *hw_dev = r->silicon[s];
            *hw_ch = ch;
            return NPU_OK;
        }
        ch -= SILICON[s].channel_count;
    }
    return NPU_E_BAD_CHANNEL;
}

static int ref_inject_fault(void *d, const struct npu_fault *f)
{
    struct ref *r = d;
    struct npu_fault hf = *f;
    if (f->kind != NPU_FAULT_HEAT_SPIKE && f->kind != NPU_FAULT_CRASH) {
        int rc = map_channel(r, f->device, f->kind == NPU_FAULT_HANG_CHANNEL ? f->channel : 0, &hf.device,
                             &hf.channel);
        if (rc != NPU_OK)
            return rc;
    }
    return r->hw->inject_fault(r->h, &hf);
}

static int ref_reset_channel(void *d, uint32_t dev, uint32_t ch)
{
    struct ref *r = d;
    uint32_t hd, hc;
    int rc = map_channel(r, dev, ch, &hd, &hc);
    return rc == NPU_OK ? r->hw->reset_channel(r->h, hd, hc) : rc;
}

static void ref_dump(void *d, char *buf, size_t cap, size_t *len)
{
    struct ref *r = d;
    static const char *const TYPES[] = {"?", "OTHER", "CPU", "GPU", "ACCELERATOR"};
    static const char *const STATUS[] = {"AVAILABLE", "BUSY", "OFFLINE", "UNKNOWN"};
#define OUT(...)                                                                          \
    do {                                                                                  \
        int n_ = snprintf(buf && *len < cap ? buf + *len : NULL, *len < cap ? cap - *len : 0, \
                          __VA_ARGS__);                                                   \
        if (n_ > 0)                                                                       \
            *len += (size_t)n_;                                                           \
    } while (0)
    OUT("Driver emu-reference 1.0 (build %s): %u devices, %llu works submitted, %llu refused\n", NPU_BUILD_ID,
        N_DEVICES, (unsigned long long)r->submitted, (unsigned long long)r->refused);
    for (uint32_t i = 0; i < N_DEVICES; i++) {
        struct npu_device_info info;
        ref_get_device_info(r, i, &info);
        OUT("  %u %-11s %-11s %-9s channels %u  weights %llu/%llu MiB", i, info.name, TYPES[info.type],
            STATUS[info.status], info.channel_count, (unsigned long long)(info.weight_memory_used / MIB),
            (unsigned long long)(info.weight_memory_bytes / MIB));
        if (info.part_count)
            OUT("  parts %u,%u", info.parts[0], info.parts[1]);
        OUT("\n");
    }
    OUT("  Scheduling configs (%u; others: app 1000, min 0, max 2000, direct access, no attribution)\n", r->ncfg);
    for (uint32_t i = 0; i < r->ncfg; i++) {
        const struct npu_scheduling_config *c = &r->cfg[i];
        OUT("    uid %-6d app %-4d min %-4d max %-4d direct %-3s attribute %s\n", c->uid, c->app_priority,
            c->min_priority, c->max_priority, c->has_direct_access ? "yes" : "no",
            c->can_attribute_other_uid ? "yes" : "no");
    }
#undef OUT
}

static const struct npu_driver_ops REFERENCE_OPS = {
    .abi_version = NPU_ABI_VERSION,
    .vendor = "emu",
    .init = ref_init,
    .fini = ref_fini,
    .device_count = ref_device_count,
    .get_device_info = ref_get_device_info,
    .get_supported_operations = ref_get_supported_operations,
    .set_scheduling_configs = ref_set_configs,
    .update_scheduling_configs = ref_update_configs,
    .load_model = ref_load_model,
    .unload_model = ref_unload_model,
    .submit_work = ref_submit,
    .cancel_work = ref_cancel,
    .inject_fault = ref_inject_fault,
    .reset_channel = ref_reset_channel,
    .dump = ref_dump,
};

const struct npu_driver_ops *npu_reference_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version)
{
    if (abi_version != NPU_ABI_VERSION || !hw || hw->struct_size < sizeof(struct npu_hw_api))
        return NULL;
    return &REFERENCE_OPS;
}

#ifndef NPU_BUILTIN_REFERENCE
/* Built alone as a .so: the loader's one entry point. */
const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version);
const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version)
{
    return npu_reference_driver_entry(hw, abi_version);
}
#endif
