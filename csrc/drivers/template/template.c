/*
 * The template driver: the smallest correct npuemu driver.  Copy this file,
 * rename the vendor and the device, describe your silicon, and build it:
 *
 *     make driver SRC=path/to/mydriver.c          # -> build/drivers/mydriver.so
 *     npuemu boot --driver build/drivers/mydriver.so
 *
 * It exposes one device ("tmpl-npu", ACCELERATOR, one channel, every
 * operation npuemu computes) and implements the scheduling rules that
 * npu/driver.h requires of every driver.  The hardware queue does the
 * ordering and the preemption; a driver's job is admission (who may submit,
 * at what effective priority) and describing its devices honestly.
 *
 * Rules a driver lives by (see npu/driver.h for each callback):
 *  - everything from the hardware comes through the npu_hw_api table given
 *    to npu_driver_entry; never link against the Python extension;
 *  - callbacks are never called concurrently, so no locks are needed here;
 *  - keep all state in the instance that init allocates: no globals that
 *    change, because one process may run several systems.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/driver.h"
#include "npu/errors.h"

/* `make driver` passes a hash of the source, so every build reports a new
 * version string, as NNAPI's getVersionString() must. */
#ifndef NPU_BUILD_ID
#define NPU_BUILD_ID "unversioned"
#endif

struct tmpl {
    const struct npu_hw_api *hw;
    struct npu_hw *h;
    uint32_t silicon;                    /* our one hardware device */
    struct npu_scheduling_config *cfg;   /* as last set; small, so searched linearly */
    uint32_t ncfg;
    uint32_t *models;                    /* model id - 1 -> hardware handle, 0 once unloaded */
    uint32_t nmodels;
};

static int tmpl_init(const struct npu_hw_api *hw, struct npu_hw *h, void **out)
{
    static const struct npu_hw_device_config SILICON = {
        .name = "tmpl",
        .channel_count = 1,
        .flops_per_ns = {[NPU_COMPUTE_FLOAT32] = 1000.0},  /* 1 TFLOP/s; float16 and quant8 alike */
        .bytes_per_ns = 20.0,                   /* 20 GB/s */
        .weight_memory_bytes = UINT64_C(4) << 30,  /* 4 GiB: `npuemu demo --driver` loads 3.1 GiB at once */
        .sram_bytes = 32 << 20,                 /* 32 MiB: the demo's real models' working sets (pose landmark 18.5 MiB, beside the face detector) */
        .slice_overhead_ns = 20000,
        .context_save_fixed_ns = 10000,
        .heat_rise_c = 10.0f,
    };
    struct tmpl *t = calloc(1, sizeof *t);
    if (!t)
        return NPU_E_NO_MEMORY;
    t->hw = hw;
    t->h = h;
    int rc = hw->add_device(h, &SILICON, &t->silicon);
    if (rc == NPU_OK) /* the default already; said here so you see where to choose */
        rc = hw->set_preemption_mode(h, NPU_PREEMPT_CHECKPOINT);
    if (rc != NPU_OK) {
        free(t);
        return rc;
    }
    *out = t;
    return NPU_OK;
}

static void tmpl_fini(void *d)
{
    struct tmpl *t = d;
    free(t->cfg);
    free(t->models);
    free(t);
}

static uint32_t tmpl_device_count(void *d)
{
    (void)d;
    return 1;
}

static int tmpl_get_device_info(void *d, uint32_t dev, struct npu_device_info *out)
{
    struct tmpl *t = d;
    if (dev != 0)
        return NPU_E_BAD_DEVICE;
    struct npu_hw_device_state st;
    int rc = t->hw->device_state(t->h, t->silicon, &st);
    if (rc != NPU_OK)
        return rc;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "tmpl-npu");   /* {VENDOR}-{DEVICE_NAME} */
    snprintf(out->version, sizeof out->version, "tmpl 0.1 (build %s)", NPU_BUILD_ID);
    out->type = NPU_DEVICE_ACCELERATOR;
    out->feature_level = NPU_FEATURE_LEVEL_NN_HAL_1_2;
    out->status = st.hung_channels == st.channel_count ? NPU_STATUS_OFFLINE : NPU_STATUS_AVAILABLE;
    for (int i = 0; i < NPU_OPERAND_TYPE_COUNT; i++)
        out->operand_performance[i] = (struct npu_performance_info){FLT_MAX, FLT_MAX};
    struct npu_performance_info f32 = {0.5f, 0.5f};   /* twice as good as the CPU */
    out->operand_performance[NPU_OPERAND_FLOAT32] = f32;
    out->operand_performance[NPU_OPERAND_INT32] = f32;
    out->operand_performance[NPU_OPERAND_TENSOR_FLOAT32] = f32;
    out->relaxed_float32_to_float16_scalar = f32;
    out->relaxed_float32_to_float16_tensor = f32;
    out->weight_memory_bytes = st.weight_memory_total;
    out->weight_memory_used = st.weight_memory_used;
    out->sram_bytes = st.sram_total;
    out->sram_used = st.sram_used;
    out->channel_count = st.channel_count;
    return NPU_OK;
}

static int tmpl_get_supported_operations(void *d, uint32_t dev, const struct npu_model *m, bool *supported)
{
    struct tmpl *t = d;
    if (dev != 0)
        return NPU_E_BAD_DEVICE;
    /* An invalid model is an error, not "nothing supported".  check_support
     * sets false for operations npuemu's hardware cannot compute; a device
     * with a smaller op set would also clear the ones it lacks. */
    return t->hw->check_support(m, supported, NULL);
}

/* Valid iff 0 <= app <= 1000 and 0 <= min <= max <= 2000, uids distinct. */
static int check_configs(const struct npu_scheduling_config *c, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (c[i].app_priority < 0 || c[i].app_priority > 1000 || c[i].min_priority < 0 ||
            c[i].min_priority > c[i].max_priority || c[i].max_priority > 2000)
            return NPU_E_INVALID_PRIORITY;
        for (uint32_t j = 0; j < i; j++)
            if (c[j].uid == c[i].uid)
                return NPU_E_DUPLICATE_UID;
    }
    return NPU_OK;
}

static int tmpl_set_configs(void *d, const struct npu_scheduling_config *c, uint32_t n)
{
    struct tmpl *t = d;
    int rc = check_configs(c, n);
    if (rc != NPU_OK)
        return rc;   /* a failed call changes nothing */
    struct npu_scheduling_config *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy)
        return NPU_E_NO_MEMORY;
    if (n)
        memcpy(copy, c, n * sizeof *copy);
    free(t->cfg);
    t->cfg = copy;
    t->ncfg = n;
    return NPU_OK;
}

static int tmpl_update_configs(void *d, const struct npu_scheduling_config *c, uint32_t n)
{
    struct tmpl *t = d;
    int rc = check_configs(c, n);
    if (rc != NPU_OK)
        return rc;
    struct npu_scheduling_config *all = malloc(((size_t)t->ncfg + n + 1) * sizeof *all);
    if (!all)
        return NPU_E_NO_MEMORY;
    uint32_t k = 0;
    for (uint32_t i = 0; i < t->ncfg; i++) {   /* keep the uids not being updated */
        bool replaced = false;
        for (uint32_t j = 0; j < n; j++)
            replaced |= c[j].uid == t->cfg[i].uid;
        if (!replaced)
            all[k++] = t->cfg[i];
    }
    for (uint32_t j = 0; j < n; j++)
        all[k++] = c[j];
    free(t->cfg);
    t->cfg = all;
    t->ncfg = k;
    return NPU_OK;
}

static int tmpl_load_model(void *d, uint32_t dev, const struct npu_model *m, const struct npu_load_params *p,
                           uint32_t *id)
{
    struct tmpl *t = d;
    if (dev != 0)
        return NPU_E_BAD_DEVICE;
    uint32_t *grown = realloc(t->models, (t->nmodels + 1) * sizeof *grown);
    if (!grown)
        return NPU_E_NO_MEMORY;
    t->models = grown;
    uint32_t handle;
    int rc = t->hw->load_model(t->h, t->silicon, 0, m, p, &handle);   /* validates and accounts memory */
    if (rc != NPU_OK)
        return rc;
    t->models[t->nmodels] = handle;
    *id = ++t->nmodels;
    return NPU_OK;
}

static int tmpl_unload_model(void *d, uint32_t id)
{
    struct tmpl *t = d;
    if (id == 0 || id > t->nmodels || t->models[id - 1] == 0)
        return NPU_E_BAD_MODEL_ID;
    int rc = t->hw->unload_model(t->h, t->models[id - 1]);
    if (rc == NPU_OK)
        t->models[id - 1] = 0;
    return rc;
}

static int tmpl_submit(void *d, const struct npu_work_request *q, int32_t *work_id)
{
    struct tmpl *t = d;
    if (q->model_id == 0 || q->model_id > t->nmodels || t->models[q->model_id - 1] == 0)
        return NPU_E_BAD_MODEL_ID;
    if (q->job_priority < 0 || q->job_priority > 1000)
        return NPU_E_INVALID_JOB_PRIORITY;
    /* the defaults for a uid nobody configured */
    struct npu_scheduling_config c = {.min_priority = 0, .max_priority = 2000, .uid = q->uid,
                                      .app_priority = 1000, .has_direct_access = true,
                                      .can_attribute_other_uid = false};
    for (uint32_t i = 0; i < t->ncfg; i++)
        if (t->cfg[i].uid == q->uid)
            c = t->cfg[i];
    if (!c.has_direct_access)
        return NPU_E_NO_DIRECT_ACCESS;
    if (q->original_uid != q->uid && !c.can_attribute_other_uid)
        return NPU_E_ATTRIBUTION_DENIED;
    int32_t eff = c.app_priority + q->job_priority;
    eff = eff < c.min_priority ? c.min_priority : eff > c.max_priority ? c.max_priority : eff;

    struct npu_work_info info;   /* the hardware fills id, effective priority, timestamp */
    memset(&info, 0, sizeof info);
    info.has_group_id = q->has_group_id;
    memcpy(info.group_id, q->group_id, sizeof info.group_id);
    info.uid = q->uid;
    info.debug_pid = q->debug_pid;
    info.original_uid = q->original_uid;
    if (q->debug_feature_id) {
        info.has_debug_feature_id = true;
        snprintf(info.debug_feature_id, sizeof info.debug_feature_id, "%s", q->debug_feature_id);
    }
    info.job_priority = q->job_priority;
    info.device_number = 0;
    return t->hw->submit(t->h, t->models[q->model_id - 1], eff, &info, q->inputs, q->input_shapes, q->input_count,
                         q->outputs, q->output_shapes, q->output_count, work_id);
}

static int tmpl_cancel(void *d, int32_t work_id)
{
    struct tmpl *t = d;
    return t->hw->cancel(t->h, work_id);
}

static int tmpl_inject_fault(void *d, const struct npu_fault *f)
{
    struct tmpl *t = d;
    if (f->kind != NPU_FAULT_HEAT_SPIKE && f->kind != NPU_FAULT_CRASH && f->device != 0)
        return NPU_E_BAD_DEVICE;
    struct npu_fault hf = *f;
    hf.device = t->silicon;
    return t->hw->inject_fault(t->h, &hf);
}

static int tmpl_reset_channel(void *d, uint32_t dev, uint32_t ch)
{
    struct tmpl *t = d;
    return dev == 0 ? t->hw->reset_channel(t->h, t->silicon, ch) : NPU_E_BAD_DEVICE;
}

static const struct npu_driver_ops TEMPLATE_OPS = {
    .abi_version = NPU_ABI_VERSION,
    .vendor = "tmpl",
    .init = tmpl_init,
    .fini = tmpl_fini,
    .device_count = tmpl_device_count,
    .get_device_info = tmpl_get_device_info,
    .get_supported_operations = tmpl_get_supported_operations,
    .set_scheduling_configs = tmpl_set_configs,
    .update_scheduling_configs = tmpl_update_configs,
    .load_model = tmpl_load_model,
    .unload_model = tmpl_unload_model,
    .submit_work = tmpl_submit,
    .cancel_work = tmpl_cancel,
    .inject_fault = tmpl_inject_fault,
    .reset_channel = tmpl_reset_channel,
    .dump = NULL,   /* optional: the system still prints the hardware's state */
};

/* The one exported symbol.  Refuse an ABI you were not built for. */
const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version);
const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version)
{
    if (abi_version != NPU_ABI_VERSION || hw == NULL || hw->struct_size < sizeof(struct npu_hw_api))
        return NULL;
    return &TEMPLATE_OPS;
}
