/*
 * struct npu_system: the hardware, a driver and the loader that binds them.
 *
 * The system's API lock serialises every call into the driver (driver.h
 * promises drivers that), and is always taken before the hardware's lock,
 * never after: the hardware never calls the driver, so there is no cycle.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/system.h"
#include "hw_internal.h"

#ifndef NPU_BUILD_ID
#define NPU_BUILD_ID "dev"
#endif

struct npu_system {
    pthread_mutex_t api;
    struct npu_hw *hw;
    const struct npu_hw_api *hw_api;
    const struct npu_driver_ops *ops;
    void *driver;
    void *dl;    /* dlopen handle, NULL for the built-in driver */
};

uint32_t npu_abi_version(void) { return NPU_ABI_VERSION; }
const char *npu_build_id(void) { return NPU_BUILD_ID; }

/* NPU_ABI_VERSION is an enum, not a macro: the string spells it out and the
 * static assertion keeps the two in step. */
#define NPU_ABI_STRING "4"
_Static_assert(NPU_ABI_VERSION == 4, "update NPU_ABI_STRING with NPU_ABI_VERSION");
const char *npu_build_version(void) { return "0.1.0 (ABI " NPU_ABI_STRING ", build " NPU_BUILD_ID ")"; }

static int check_ops(const struct npu_driver_ops *o)
{
    if (o->abi_version != NPU_ABI_VERSION)
        return NPU_E_DRIVER_ABI_MISMATCH;
    if (!o->vendor || !o->init || !o->fini || !o->device_count || !o->get_device_info ||
        !o->get_supported_operations || !o->set_scheduling_configs || !o->update_scheduling_configs ||
        !o->load_model || !o->unload_model || !o->submit_work || !o->cancel_work)
        return NPU_E_DRIVER_INCOMPLETE;
    return NPU_OK;
}

static int load_driver(struct npu_system *sys, const char *path)
{
    npu_driver_entry_fn entry = npu_reference_driver_entry;
    if (path && path[0]) {
        /* RTLD_LOCAL: two drivers in two systems must not see each other's symbols */
        sys->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!sys->dl)
            return NPU_E_DRIVER_LOAD_FAILED;
        void *sym = dlsym(sys->dl, "npu_driver_entry");
        if (!sym)
            return NPU_E_DRIVER_NO_ENTRY;
        /* POSIX guarantees an object pointer from dlsym converts to a function pointer */
        memcpy(&entry, &sym, sizeof entry);
    }
    const struct npu_driver_ops *ops = entry(sys->hw_api, NPU_ABI_VERSION);
    if (!ops)
        return NPU_E_DRIVER_ABI_MISMATCH;
    int rc = check_ops(ops);
    if (rc != NPU_OK)
        return rc;
    sys->ops = ops;
    return NPU_OK;
}

void npu_system_destroy(struct npu_system *sys)
{
    if (!sys)
        return;
    if (sys->driver)
        sys->ops->fini(sys->driver);
    npu_hw_destroy(sys->hw);
    if (sys->dl)
        dlclose(sys->dl);
    pthread_mutex_destroy(&sys->api);
    free(sys);
}

int npu_system_create(const struct npu_system_config *cfg, struct npu_system **out)
{
    static const struct npu_system_config defaults;
    if (!out)
        return NPU_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!cfg)
        cfg = &defaults;
    if ((cfg->preemption_mode != 0 &&
         (cfg->preemption_mode < NPU_PREEMPT_NONE || cfg->preemption_mode > NPU_PREEMPT_KILL_RESTART)) ||
        (cfg->scheduling_mode != 0 && cfg->scheduling_mode != NPU_SCHED_PRIORITY &&
         cfg->scheduling_mode != NPU_SCHED_FCFS))
        return NPU_E_INVALID_ARGUMENT;
    struct npu_system *sys = calloc(1, sizeof *sys);
    if (!sys)
        return NPU_E_NO_MEMORY;
    if (pthread_mutex_init(&sys->api, NULL) != 0) {
        free(sys);
        return NPU_E_SYSTEM_ERROR;
    }
    struct npu_hw_options opt;
    memset(&opt, 0, sizeof opt);
    opt.clock = cfg->clock;
    opt.speed_factor = cfg->speed_factor;
    memcpy(opt.thresholds_c, cfg->thermal_thresholds_c, sizeof opt.thresholds_c);
    opt.ambient_c = cfg->ambient_c;
    opt.time_constant_ms = cfg->thermal_time_constant_ms;
    opt.slices_per_operation = cfg->slices_per_operation;
    sys->hw_api = npu_hw_api_table();
    int rc = npu_hw_create(&opt, &sys->hw);
    if (rc == NPU_OK)
        rc = load_driver(sys, cfg->driver_path);
    if (rc == NPU_OK) {
        rc = sys->ops->init(sys->hw_api, sys->hw, &sys->driver);
        if (rc != NPU_OK) {
            sys->driver = NULL;
            if (rc >= 0)
                rc = NPU_E_DRIVER_INIT_FAILED;
        }
    }
    if (rc == NPU_OK && cfg->preemption_mode)
        rc = sys->hw_api->set_preemption_mode(sys->hw, cfg->preemption_mode);
    if (rc == NPU_OK && cfg->scheduling_mode)
        rc = sys->hw_api->set_scheduling_mode(sys->hw, cfg->scheduling_mode);
    if (rc == NPU_OK)
        rc = npu_hw_start(sys->hw);
    if (rc != NPU_OK) {
        npu_system_destroy(sys);
        return rc;
    }
    *out = sys;
    return NPU_OK;
}

int npu_system_event_fd(struct npu_system *sys) { return sys ? npu_hw_ring(sys->hw)->fd : -1; }

int npu_system_drain_events(struct npu_system *sys, struct npu_event *out, uint32_t max, uint32_t *count)
{
    if (!sys || !count || (max && !out))
        return NPU_E_INVALID_ARGUMENT;
    *count = npu_ring_drain(npu_hw_ring(sys->hw), out, max);
    return NPU_OK;
}

uint64_t npu_system_events_dropped(struct npu_system *sys) { return sys ? npu_ring_dropped(npu_hw_ring(sys->hw)) : 0; }
int32_t npu_system_clock(struct npu_system *sys) { return sys ? npu_hw_clock(sys->hw) : 0; }
int64_t npu_system_now_ns(struct npu_system *sys) { return sys ? sys->hw_api->now_ns(sys->hw) : 0; }

int npu_system_advance(struct npu_system *sys, int64_t ns)
{
    return sys ? npu_hw_advance(sys->hw, ns) : NPU_E_INVALID_ARGUMENT;
}

int npu_system_advance_to_next_event(struct npu_system *sys, int64_t *now_ns)
{
    return sys ? npu_hw_advance_to_next_event(sys->hw, now_ns) : NPU_E_INVALID_ARGUMENT;
}

int npu_system_next_event_ns(struct npu_system *sys, int64_t *at_ns)
{
    return sys ? npu_hw_next_event_ns(sys->hw, at_ns) : NPU_E_INVALID_ARGUMENT;
}

int npu_system_run_until_idle(struct npu_system *sys, int64_t max_ns)
{
    return sys ? npu_hw_run_until_idle(sys->hw, max_ns) : NPU_E_INVALID_ARGUMENT;
}

const char *npu_system_vendor(struct npu_system *sys) { return sys ? sys->ops->vendor : ""; }

uint32_t npu_system_device_count(struct npu_system *sys)
{
    if (!sys)
        return 0;
    pthread_mutex_lock(&sys->api);
    uint32_t n = sys->ops->device_count(sys->driver);
    pthread_mutex_unlock(&sys->api);
    return n;
}

/* Every driver call goes through here: NULL checks, then the API lock. */
#define CALL_DRIVER(sys, op, ...)                                  \
    do {                                                           \
        if (!(sys))                                                \
            return NPU_E_INVALID_ARGUMENT;                         \
        if (!(sys)->ops->op)                                       \
            return NPU_E_NOT_SUPPORTED;                            \
        pthread_mutex_lock(&(sys)->api);                           \
        int rc_ = (sys)->ops->op((sys)->driver, __VA_ARGS__);      \
        pthread_mutex_unlock(&(sys)->api);                         \
        return rc_;                                                \
    } while (0)

int npu_system_get_device_info(struct npu_system *sys, uint32_t device, struct npu_device_info *out)
{
    if (!out)
        return NPU_E_INVALID_ARGUMENT;
    CALL_DRIVER(sys, get_device_info, device, out);
}

int npu_system_get_supported_operations(struct npu_system *sys, uint32_t device, const struct npu_model *model,
                                        bool *supported)
{
    if (!model || (!supported && model->operation_count))
        return NPU_E_INVALID_ARGUMENT;
    CALL_DRIVER(sys, get_supported_operations, device, model, supported);
}

int npu_system_set_scheduling_configs(struct npu_system *sys, const struct npu_scheduling_config *configs,
                                      uint32_t count)
{
    if (count && !configs)
        return NPU_E_INVALID_ARGUMENT;
    CALL_DRIVER(sys, set_scheduling_configs, configs, count);
}

int npu_system_update_scheduling_configs(struct npu_system *sys, const struct npu_scheduling_config *configs,
                                         uint32_t count)
{
    if (count && !configs)
        return NPU_E_INVALID_ARGUMENT;
    CALL_DRIVER(sys, update_scheduling_configs, configs, count);
}

int npu_system_load_model(struct npu_system *sys, uint32_t device, const struct npu_model *model,
                          const struct npu_load_params *params, uint32_t *model_id)
{
    if (!model || !model_id)
        return NPU_E_INVALID_ARGUMENT;
    CALL_DRIVER(sys, load_model, device, model, params, model_id);
}

int npu_system_unload_model(struct npu_system *sys, uint32_t model_id)
{
    CALL_DRIVER(sys, unload_model, model_id);
}

int npu_system_submit_work(struct npu_system *sys, const struct npu_work_request *request, int32_t *work_id)
{
    if (!request || !work_id)
        return NPU_E_INVALID_ARGUMENT;
    CALL_DRIVER(sys, submit_work, request, work_id);
}

int npu_system_cancel_work(struct npu_system *sys, int32_t work_id)
{
    CALL_DRIVER(sys, cancel_work, work_id);
}

int npu_system_inject_fault(struct npu_system *sys, const struct npu_fault *fault)
{
    if (!fault)
        return NPU_E_INVALID_ARGUMENT;
    CALL_DRIVER(sys, inject_fault, fault);
}

int npu_system_reset_channel(struct npu_system *sys, uint32_t device, uint32_t channel)
{
    CALL_DRIVER(sys, reset_channel, device, channel);
}

int npu_system_set_preemption_mode(struct npu_system *sys, int32_t mode)
{
    return sys ? sys->hw_api->set_preemption_mode(sys->hw, mode) : NPU_E_INVALID_ARGUMENT;
}

int npu_system_set_scheduling_mode(struct npu_system *sys, int32_t mode)
{
    return sys ? sys->hw_api->set_scheduling_mode(sys->hw, mode) : NPU_E_INVALID_ARGUMENT;
}

int npu_system_thermal_state(struct npu_system *sys, int32_t *severity, float *temperature_c)
{
    return sys ? sys->hw_api->thermal_state(sys->hw, severity, temperature_c) : NPU_E_INVALID_ARGUMENT;
}

int npu_system_thermal_override(struct npu_system *sys, bool hold, float temperature_c)
{
    return sys ? npu_hw_thermal_override(sys->hw, hold, temperature_c) : NPU_E_INVALID_ARGUMENT;
}

bool npu_system_thermal_held(struct npu_system *sys) { return sys && npu_hw_thermal_held(sys->hw); }

int npu_system_set_profiling(struct npu_system *sys, uint32_t capacity)
{
    return sys ? npu_hw_set_profiling(sys->hw, capacity) : NPU_E_INVALID_ARGUMENT;
}

int npu_system_drain_slices(struct npu_system *sys, struct npu_slice_record *out, uint32_t max, uint32_t *count,
                            uint64_t *dropped)
{
    return sys ? npu_hw_drain_slices(sys->hw, out, max, count, dropped) : NPU_E_INVALID_ARGUMENT;
}

int npu_system_dump(struct npu_system *sys, char *buf, size_t cap, size_t *len)
{
    if (!sys || !len || (cap && !buf))
        return NPU_E_INVALID_ARGUMENT;
    *len = 0;
    if (cap)
        buf[0] = '\0';
    pthread_mutex_lock(&sys->api);
    if (sys->ops->dump)
        sys->ops->dump(sys->driver, buf, cap, len);
    sys->hw_api->dump(sys->hw, buf, cap, len);
    pthread_mutex_unlock(&sys->api);
    uint64_t dropped = npu_ring_dropped(npu_hw_ring(sys->hw));
    if (dropped) {
        int n = snprintf(*len < cap ? buf + *len : NULL, *len < cap ? cap - *len : 0,
                         "  Events dropped (ring full): %llu\n", (unsigned long long)dropped);
        if (n > 0)
            *len += (size_t)n;
    }
    if (cap && *len >= cap) {
        buf[cap - 1] = '\0';
        return NPU_E_BUFFER_TOO_SMALL;
    }
    return cap ? NPU_OK : (*len ? NPU_E_BUFFER_TOO_SMALL : NPU_OK);
}
