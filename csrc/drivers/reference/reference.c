/*
 * The reference vendor driver ("emu"): four devices over three pieces of
 * emulated silicon, so that NNAPI discovery and assignment mean something.
 *
 *   0 emu-npu     ACCELERATOR  2 channels  all seven operations, the fastest
 *   1 emu-gpu     GPU          1 channel   all seven operations
 *   2 emu-dsp     ACCELERATOR  1 channel   ADD, MUL, RELU, FULLY_CONNECTED; frugal
 *   3 emu-hetero  OTHER        manages emu-npu and emu-dsp (also exposed alone,
 *                              as NN HAL 1.2 requires of a heterogeneous device)
 *
 * A model loaded on emu-hetero is placed whole on one of its parts: among the
 * parts that support every operation of the model, the one with the most free
 * weight memory, or, when the app compiled it with
 * ANEURALNETWORKS_PREFER_LOW_POWER (npu_load_params.preference), the part with
 * the lowest power usage that has room for it.  Its work then runs on that
 * part's channels but reports deviceNumber 3.
 *
 * Scheduling follows driver.h exactly; the hardware queue does the ordering
 * and preemption (checkpoint by default).
 *
 * Built into npuhal._npu (NPU_BUILTIN_REFERENCE defined), or alone as a .so
 * with `make driver SRC=csrc/drivers/reference/reference.c`.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/driver.h"
#include "npu/errors.h"

#ifndef NPU_BUILD_ID
#define NPU_BUILD_ID "unversioned"
#endif

#define OP(x) (UINT64_C(1) << (x))
#define ALL_OPS (OP(NPU_OP_ADD) | OP(NPU_OP_SUB) | OP(NPU_OP_MUL) | OP(NPU_OP_RELU) | OP(NPU_OP_SOFTMAX) | \
                 OP(NPU_OP_FULLY_CONNECTED) | OP(NPU_OP_CONV_2D))
#define DSP_OPS (OP(NPU_OP_ADD) | OP(NPU_OP_MUL) | OP(NPU_OP_RELU) | OP(NPU_OP_FULLY_CONNECTED))

enum { N_SILICON = 3, N_DEVICES = 4, HETERO = 3, MIB = 1 << 20 };
#define GIB (UINT64_C(1) << 30)

struct device_spec {
    const char *name;      /* the DEVICE_NAME part */
    int32_t type;
    uint64_t ops;
    float exec_time, power_usage;   /* PerformanceInfo for float32 operands */
    int silicon;           /* index into SILICON, or -1 for the heterogeneous device */
};

static const struct device_spec DEVICES[N_DEVICES] = {
    {"npu", NPU_DEVICE_ACCELERATOR, ALL_OPS, 0.1f, 0.2f, 0},
    {"gpu", NPU_DEVICE_GPU, ALL_OPS, 0.4f, 0.6f, 1},
    {"dsp", NPU_DEVICE_ACCELERATOR, DSP_OPS, 0.6f, 0.15f, 2},
    {"hetero", NPU_DEVICE_OTHER, ALL_OPS, 0.15f, 0.2f, -1},
};
static const uint32_t HETERO_PARTS[2] = {0, 2};

static const struct npu_hw_device_config SILICON[N_SILICON] = {
    {.name = "npu", .channel_count = 2, .flops_per_ns = 2000.0, .bytes_per_ns = 50.0,
     .weight_memory_bytes = 4 * GIB, .sram_bytes = 8 * MIB, .slice_overhead_ns = 20000,
     .context_save_fixed_ns = 10000, .heat_rise_c = 12.0f},
    {.name = "gpu", .channel_count = 1, .flops_per_ns = 500.0, .bytes_per_ns = 25.0,
     .weight_memory_bytes = 2 * GIB, .sram_bytes = 4 * MIB, .slice_overhead_ns = 30000,
     .context_save_fixed_ns = 20000, .heat_rise_c = 10.0f},
    {.name = "dsp", .channel_count = 1, .flops_per_ns = 100.0, .bytes_per_ns = 10.0,
     .weight_memory_bytes = 512 * (uint64_t)MIB, .sram_bytes = 1 * MIB, .slice_overhead_ns = 10000,
     .context_save_fixed_ns = 5000, .heat_rise_c = 4.0f},
};

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
    /* Types a device cannot run are FLT_MAX, as NNAPI's own drivers report them. */
    for (int t = 0; t < NPU_OPERAND_TYPE_COUNT; t++)
        out->operand_performance[t] = (struct npu_performance_info){FLT_MAX, FLT_MAX};
    struct npu_performance_info f32 = {spec->exec_time, spec->power_usage};
    out->operand_performance[NPU_OPERAND_FLOAT32] = f32;
    out->operand_performance[NPU_OPERAND_TENSOR_FLOAT32] = f32;
    out->operand_performance[NPU_OPERAND_INT32] = f32; /* scalar parameters */
    out->relaxed_float32_to_float16_scalar = f32;
    out->relaxed_float32_to_float16_tensor = f32;
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

static int ref_get_supported_operations(void *d, uint32_t dev, const struct npu_model *m, bool *supported)
{
    struct ref *r = d;
    if (dev >= N_DEVICES)
        return NPU_E_BAD_DEVICE;
    /* supported[] first holds "npuemu can compute it", then the device's own say */
    int rc = r->hw->check_support(m, supported, NULL);
    if (rc != NPU_OK)
        return rc;
    for (uint32_t i = 0; i < m->operation_count; i++) {
        int32_t t = m->operations[i].type;
        supported[i] = supported[i] && t >= 0 && t < 64 && (DEVICES[dev].ops & OP(t));
    }
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
    for (uint32_t i = 0; i < m->operation_count; i++) {
        int32_t t = m->operations[i].type;
        if (t < 0 || t >= 64 || !(DEVICES[dev].ops & OP(t)))
            return false;
    }
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
            better = DEVICES[part].power_usage < DEVICES[HETERO_PARTS[best]].power_usage || best_free < need;
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
