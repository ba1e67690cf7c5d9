/*
 * npu/system.h - one emulated NPU system: hardware + driver + event ring.
 *
 * This is what the Python binding (npuhal._npu) calls.  A struct npu_system
 * owns the emulated hardware, the loaded driver and its instance, the event
 * ring and its eventfd.  Create it with npu_system_create and free it with
 * npu_system_destroy; every other function takes it first.
 *
 * Threads: every function may be called from any thread; calls into the
 * driver are serialised by the system's API lock.  In NPU_CLOCK_REAL mode the
 * hardware's worker threads run jobs in the background; they never call the
 * caller back: events wait in the ring and the eventfd becomes readable.
 *
 * Memory: every pointer argument is borrowed for the call, except the memory
 * of a submitted work's input and output buffers, which is borrowed until
 * that work's final ENDED event (any reason but PAUSED) has been queued.
 */
#ifndef NPU_SYSTEM_H
#define NPU_SYSTEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "npu/errors.h"
#include "npu/model.h"
#include "npu/hw.h"
#include "npu/driver.h"

/* Zero every field you do not set: zero means "the default" throughout. */
struct npu_system_config {
    int32_t clock;                /* NPU_CLOCK_VIRTUAL (default) or NPU_CLOCK_REAL */
    double speed_factor;          /* REAL: wall time = emulated time x this (default 1.0) */
    /* Temperatures (C) at which LIGHT, MODERATE, SEVERE, CRITICAL, EMERGENCY and
     * SHUTDOWN begin; all zero = 45, 55, 65, 75, 85, 95.  Must increase. */
    float thermal_thresholds_c[6];
    float ambient_c;              /* default 25 */
    double thermal_time_constant_ms;  /* default 2000 */
    const char *driver_path;      /* NULL or "": the built-in reference driver */
    int32_t preemption_mode;      /* 0: the driver's choice */
    int32_t scheduling_mode;      /* 0: the driver's choice */
    uint32_t slices_per_operation;    /* default 4; each operation is cut in this many */
};

struct npu_system;

/* ABI version and build id compiled into this library; the binding compares
 * the first with NPU_ABI_VERSION from the cdef at import.  The build id is a
 * hash of the C sources, computed by the builder. */
uint32_t npu_abi_version(void);
const char *npu_build_id(void);
/* "0.1.0 (ABI 2, build <id>)": what `npuemu version` prints.  Static. */
const char *npu_build_version(void);

/* Creates a system.  cfg may be NULL (all defaults).  On success *out
 * receives it; on failure nothing is left allocated. */
int npu_system_create(const struct npu_system_config *cfg, struct npu_system **out);

/* Stops the worker threads, ends outstanding work CANCELLED_SYSTEM, calls the
 * driver's fini, frees everything and closes the eventfd.  NULL is a no-op. */
void npu_system_destroy(struct npu_system *sys);

/* ---- events ---- */

/* A non-blocking eventfd, readable while events wait.  Owned by the system:
 * do not close it (stop polling it before npu_system_destroy). */
int npu_system_event_fd(struct npu_system *sys);

/* Moves up to `max` events, oldest first, into out[] and sets *count.  Once
 * the ring is empty the eventfd is no longer readable. */
int npu_system_drain_events(struct npu_system *sys, struct npu_event *out, uint32_t max,
                            uint32_t *count);

/* Events lost because the ring was full (it holds 65536; drain it). */
uint64_t npu_system_events_dropped(struct npu_system *sys);

/* ---- the clock ---- */

int32_t npu_system_clock(struct npu_system *sys);
int64_t npu_system_now_ns(struct npu_system *sys);

/* VIRTUAL only (else NPU_E_WRONG_CLOCK): move time forward by ns >= 0,
 * completing every slice that ends on the way, in time order. */
int npu_system_advance(struct npu_system *sys, int64_t ns);

/* VIRTUAL only: move to the next slice boundary, context-save end or
 * thermal severity change, if any; *now_ns receives the new time (unchanged
 * if nothing is left to happen). */
int npu_system_advance_to_next_event(struct npu_system *sys, int64_t *now_ns);

/* VIRTUAL only: when the next slice boundary, context-save end or thermal
 * severity change will happen, without moving time; *at_ns receives it, or
 * -1 if nothing is left to happen. */
int npu_system_next_event_ns(struct npu_system *sys, int64_t *at_ns);

/* VIRTUAL only: advance until no channel has anything to do (hung channels
 * excepted), or until max_ns more nanoseconds have passed (0: no limit). */
int npu_system_run_until_idle(struct npu_system *sys, int64_t max_ns);

/* ---- the driver, through the system (see driver.h for each) ---- */

const char *npu_system_vendor(struct npu_system *sys);
uint32_t npu_system_device_count(struct npu_system *sys);
int npu_system_get_device_info(struct npu_system *sys, uint32_t device, struct npu_device_info *out);
int npu_system_get_supported_operations(struct npu_system *sys, uint32_t device,
                                        const struct npu_model *model, bool *supported);
int npu_system_set_scheduling_configs(struct npu_system *sys,
                                      const struct npu_scheduling_config *configs, uint32_t count);
int npu_system_update_scheduling_configs(struct npu_system *sys,
                                         const struct npu_scheduling_config *configs, uint32_t count);
int npu_system_load_model(struct npu_system *sys, uint32_t device, const struct npu_model *model,
                          const struct npu_load_params *params, uint32_t *model_id);
int npu_system_unload_model(struct npu_system *sys, uint32_t model_id);
int npu_system_submit_work(struct npu_system *sys, const struct npu_work_request *request,
                           int32_t *work_id);
int npu_system_cancel_work(struct npu_system *sys, int32_t work_id);
/* fault->device is a driver device number.  NPU_FAULT_CRASH does not return. */
int npu_system_inject_fault(struct npu_system *sys, const struct npu_fault *fault);
int npu_system_reset_channel(struct npu_system *sys, uint32_t device, uint32_t channel);

/* Overrides the driver's choices, e.g. for benchmarks; takes effect at the
 * next slice boundary. */
int npu_system_set_preemption_mode(struct npu_system *sys, int32_t mode);
int npu_system_set_scheduling_mode(struct npu_system *sys, int32_t mode);

/* Current die temperature and severity. */
int npu_system_thermal_state(struct npu_system *sys, int32_t *severity, float *temperature_c);

/* A thermal override, as `cmd thermalservice override-status` on a phone: with
 * hold, the die is set to temperature_c (finite, else NPU_E_INVALID_ARGUMENT)
 * and stays there, neither heating with load nor cooling at rest, so the
 * severity (and the throttling) hold too; a later override moves it, and a
 * heat spike moves the held temperature.  Without hold, the die heats and
 * cools again from where it was (temperature_c is ignored).  Any clock. */
int npu_system_thermal_override(struct npu_system *sys, bool hold, float temperature_c);
/* Whether an override holds the die now. */
bool npu_system_thermal_held(struct npu_system *sys);

/* ---- the cost profile: where each job's emulated time went ---- */

/* What a profile record is: a slice of an operation, or a context save. */
enum npu_slice_kind {
    NPU_SLICE_COMPUTE = 0,
    NPU_SLICE_SAVE = 1
};

/* One slice as the hardware charged it (see hw.h's cost model):
 *     end_ns - start_ns = (overhead_ns + max(compute_ns, memory_ns)) x throttle
 *                         + restore_ns, rounded up to a whole ns (>= 1)
 * where compute_ns = flops / the class's rate x cost_scale and memory_ns =
 * bytes / bytes_per_ns x cost_scale.  A context save (NPU_SLICE_SAVE) has only
 * start_ns, end_ns and bytes (the live tensors saved); its operation is the
 * one the job stopped before. */
struct npu_slice_record {
    int32_t kind;              /* enum npu_slice_kind */
    int32_t work_id;           /* npu_work_info.id */
    int32_t hw_device;
    int32_t channel;
    uint32_t operation;        /* index into the loaded model's operations */
    int32_t operation_type;    /* NPU_OP_* */
    int32_t compute_class;     /* enum npu_compute_class charged (a relaxed float32 op: float16) */
    uint32_t slice;            /* index into the job's slices */
    int64_t start_ns, end_ns;  /* emulated */
    double flops, bytes;       /* this slice's (bytes with its share of streamed weights) */
    double compute_ns, memory_ns, overhead_ns, throttle, restore_ns;
};

/* Starts recording every slice the hardware schedules, keeping at most
 * capacity records until drained (later ones are dropped and counted);
 * capacity 0 stops recording and frees what was kept.  Any clock. */
int npu_system_set_profiling(struct npu_system *sys, uint32_t capacity);
/* Moves up to max records, oldest first, into out[]; *count receives how
 * many, *dropped (may be NULL) how many were dropped since the last drain. */
int npu_system_drain_slices(struct npu_system *sys, struct npu_slice_record *out, uint32_t max, uint32_t *count,
                            uint64_t *dropped);

/* The dumpsys text (driver part, then hardware part) into buf (NUL-terminated,
 * truncated to cap).  *len receives the full length; NPU_E_BUFFER_TOO_SMALL
 * when it did not fit, so the caller can retry with *len + 1 bytes. */
int npu_system_dump(struct npu_system *sys, char *buf, size_t cap, size_t *len);

#endif /* NPU_SYSTEM_H */
