/*
 * npu/hw.h - the emulated NPU hardware, as a driver sees it.
 *
 * The hardware is a set of devices, each with execution channels, weight
 * memory and SRAM, all on one die with one temperature.  A driver describes
 * its devices once (add_device), loads models into a device's weight memory,
 * and submits jobs to a device's hardware queue with a priority key.  The
 * hardware runs each job as a sequence of slices (every operation is cut into
 * several slices along its output) that really compute with the kernels of
 * npu/ops.h and take emulated time from a cost model:
 *
 *     slice time = (slice_overhead_ns + max(flops / flops_per_ns[class],
 *                                           bytes / bytes_per_ns) * cost_scale)
 *                  x throttle(thermal severity)
 *
 * where flops and bytes are the operation's own (its binding's count, bytes by
 * its operands' element sizes, each tensor counted once: a temporary is charged
 * to the operation writing it, not to its readers) and class is the compute class of its operand
 * type (npu_compute_class of npu_operation_operand_type): a device may run
 * quantized or float16 arithmetic faster than float32.
 *
 * Scheduling (NPU_SCHED_PRIORITY): a free channel takes the queued job with
 * the lowest key, ties in submission order.  NPU_SCHED_FCFS ignores keys.
 * Preemption happens only at slice boundaries: when a queued job has a
 * strictly lower key than a running one, the running job's channel, at its
 * next boundary,
 *   NPU_PREEMPT_NONE:         does nothing; the job runs to its end;
 *   NPU_PREEMPT_CHECKPOINT:   saves the job's live tensors to a preemption
 *                             buffer (context_save_fixed_ns + live bytes /
 *                             bytes_per_ns of emulated time, and the same
 *                             again to restore), requeues it, and later
 *                             resumes it at the slice where it stopped, with
 *                             results bit-identical to an unpreempted run;
 *   NPU_PREEMPT_KILL_RESTART: discards the job's progress, requeues it, and
 *                             later restarts it from its first slice.
 * Either way the job reports ENDED(PAUSED) and later STARTED(RESUMED).
 * PAUSED is the only ENDED reason that is not final.
 *
 * Memory: a load reserves, for as long as the model stays loaded, its
 * emulated weight bytes in the device's weight memory and its emulated SRAM
 * working set in the device's SRAM (struct npu_load_params; by default the
 * real sizes of its constants and temporaries), and copies only the real
 * tensors.  A load past either capacity fails and changes nothing.
 *
 * Thermal: the die temperature T relaxes exponentially (time constant
 * thermal_time_constant_ms) towards ambient + the sum of heat_rise_c over
 * busy channels.  Thresholds map T to the thermal HAL severities NONE..SHUTDOWN
 * and every severity lengthens slices by a throttle factor (1, 1.25, 1.5, 2,
 * 3, 4, 8); a change of severity is reported as an NPU_EVENT_THERMAL.
 *
 * Clocks: NPU_CLOCK_VIRTUAL has no threads at all; emulated time moves only
 * in npu_system_advance() and friends, so a run is exactly repeatable.
 * NPU_CLOCK_REAL runs one worker pthread per channel (plus one thermal
 * thread); an emulated duration d takes d x speed_factor of wall time.  A
 * worker computes each slice while the slice's time runs and meets the
 * boundary that a queued job waits for within microseconds (it spins the last
 * 0.1 ms of wall time to it), so a preemptor's wait on the real clock is the
 * virtual clock's plus that, on a machine that gives the worker a CPU.
 * The hardware never calls back into its user: everything it has to say goes
 * into the event ring and signals the system's eventfd.
 *
 * Locking: every function of struct npu_hw_api takes the hardware's own lock;
 * it may be called from any thread, but never from inside another one.
 */
#ifndef NPU_HW_H
#define NPU_HW_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "npu/model.h"

/* The ABI version of hw.h + driver.h together.  A driver's entry point is
 * called with it and the loader refuses an ops table that carries another. */
enum { NPU_ABI_VERSION = 4 };

enum npu_clock {
    NPU_CLOCK_VIRTUAL = 1,
    NPU_CLOCK_REAL = 2
};

/* 0 in a config means "the driver's choice". */
enum npu_preemption_mode {
    NPU_PREEMPT_NONE = 1,
    NPU_PREEMPT_CHECKPOINT = 2,
    NPU_PREEMPT_KILL_RESTART = 3
};

enum npu_sched_mode {
    NPU_SCHED_PRIORITY = 1,
    NPU_SCHED_FCFS = 2
};

/* The thermal HAL's ThrottlingSeverity. */
enum npu_thermal_severity {
    NPU_THERMAL_NONE = 0,
    NPU_THERMAL_LIGHT = 1,
    NPU_THERMAL_MODERATE = 2,
    NPU_THERMAL_SEVERE = 3,
    NPU_THERMAL_CRITICAL = 4,
    NPU_THERMAL_EMERGENCY = 5,
    NPU_THERMAL_SHUTDOWN = 6,
    NPU_THERMAL_SEVERITY_COUNT = 7
};

/* ---- events ------------------------------------------------------------ */

enum npu_event_type {
    NPU_EVENT_WORK_REQUESTED = 1,
    NPU_EVENT_WORK_STARTED = 2,
    NPU_EVENT_WORK_ENDED = 3,
    NPU_EVENT_THERMAL = 4,
    NPU_EVENT_MEMORY = 5
};

/* android.hardware.npu StartReason / EndReason (AIDL numbering). */
enum npu_start_reason {
    NPU_START_REASON_INITIAL = 0,
    NPU_START_REASON_RESUMED = 1
};

enum npu_end_reason {
    NPU_END_REASON_CANCELLED_USER = 0,
    NPU_END_REASON_CANCELLED_SYSTEM = 1,
    NPU_END_REASON_PAUSED = 2,
    NPU_END_REASON_FAILED = 3,
    NPU_END_REASON_COMPLETED = 4
};

enum { NPU_FEATURE_ID_MAX = 64 };

/* android.hardware.npu WorkInfo; the two @nullable fields carry a has-flag. */
struct npu_work_info {
    int32_t id;                  /* increases monotonically, from 1, per system */
    bool has_group_id;
    uint8_t group_id[16];        /* NpuUuid */
    int32_t uid;
    int32_t debug_pid;
    int32_t original_uid;
    bool has_debug_feature_id;
    char debug_feature_id[NPU_FEATURE_ID_MAX];  /* NUL-terminated, truncated */
    int32_t job_priority;        /* 0..1000, as submitted */
    int32_t effective_priority;  /* 0..2000, what the queue used */
    int64_t timestamp_ms;        /* virtual ms (virtual clock) or CLOCK_MONOTONIC ms */
    int32_t device_number;       /* the driver's device number, from 0 */
};

struct npu_event {
    int32_t type;                /* enum npu_event_type */
    int32_t reason;              /* STARTED: npu_start_reason; ENDED: npu_end_reason */
    int64_t time_ns;             /* emulated time of the event */
    struct npu_work_info work;   /* WORK_* events */
    /* THERMAL */
    int32_t thermal_severity;    /* enum npu_thermal_severity, the new one */
    float temperature_c;
    /* MEMORY: after a load, an unload or a load refused for lack of memory */
    int32_t memory_device;       /* hardware device index */
    uint64_t weight_memory_used;
    uint64_t weight_memory_total;
    uint64_t sram_used;
    uint64_t sram_total;
    int32_t memory_status;       /* NPU_OK, or the error a refused load got */
    int32_t device_number;       /* MEMORY: the driver device of that load or unload
                                    (-1 if unknown); WORK_*: work.device_number */
    /* Where it happened, for traces with one track per execution channel:
     * the hardware device index (MEMORY and WORK_*; -1 for THERMAL) and the
     * channel (STARTED and ENDED; -1 otherwise, also for an ENDED of queued
     * work). */
    int32_t hw_device;
    int32_t channel;
};

/* ---- devices, loads, faults --------------------------------------------- */

enum { NPU_HW_NAME_MAX = 32, NPU_HW_MAX_DEVICES = 16, NPU_HW_MAX_CHANNELS = 8 };

/*
 * The arithmetic an operation computes in, by its operand type: a device has
 * a throughput for each (struct npu_hw_device_config.flops_per_ns).
 */
enum npu_compute_class {
    NPU_COMPUTE_FLOAT32 = 0,  /* TENSOR_FLOAT32, FLOAT32, and the 32-bit integers */
    NPU_COMPUTE_FLOAT16 = 1,  /* TENSOR_FLOAT16, FLOAT16 */
    NPU_COMPUTE_QUANT8 = 2,   /* the quantized types (QUANT16 too: one integer pipe), bools */
    NPU_COMPUTE_CLASS_COUNT = 3
};

#ifndef NPU_CDEF
/* The compute class of an operand type (an unknown type counts as float32). */
static inline int32_t npu_compute_class(int32_t operand_type)
{
    switch (operand_type) {
    case NPU_OPERAND_TENSOR_FLOAT16: case NPU_OPERAND_FLOAT16:
        return NPU_COMPUTE_FLOAT16;
    case NPU_OPERAND_TENSOR_QUANT8_ASYMM: case NPU_OPERAND_TENSOR_QUANT8_SYMM:
    case NPU_OPERAND_TENSOR_QUANT8_SYMM_PER_CHANNEL: case NPU_OPERAND_TENSOR_QUANT16_ASYMM:
    case NPU_OPERAND_TENSOR_QUANT16_SYMM: case NPU_OPERAND_TENSOR_BOOL8: case NPU_OPERAND_BOOL:
        return NPU_COMPUTE_QUANT8;
    default:
        return NPU_COMPUTE_FLOAT32;
    }
}
#endif

/* What the driver tells the hardware about one device (its silicon). */
struct npu_hw_device_config {
    char name[NPU_HW_NAME_MAX];  /* for dumps and traces */
    uint32_t channel_count;      /* 1..NPU_HW_MAX_CHANNELS */
    /* Throughput of one channel per compute class: 1000.0 is 1 TFLOP/s (TOP/s
     * for integers).  [NPU_COMPUTE_FLOAT32] must be > 0; a 0 elsewhere means
     * "at float32's rate". */
    double flops_per_ns[NPU_COMPUTE_CLASS_COUNT];
    double bytes_per_ns;         /* memory bandwidth: 25.0 is 25 GB/s */
    uint64_t weight_memory_bytes;
    uint64_t sram_bytes;
    int64_t slice_overhead_ns;       /* fixed cost of every slice */
    int64_t context_save_fixed_ns;   /* fixed cost of a checkpoint save or restore */
    float heat_rise_c;               /* equilibrium rise per busy channel, degrees C */
};

/* Options of one model load; zeroes mean "from the real model". */
struct npu_load_params {
    uint64_t emulated_weight_bytes;  /* weight memory reserved; 0 = real constant bytes */
    uint64_t emulated_sram_bytes;    /* SRAM working set reserved; 0 = real temporaries */
    double cost_scale;               /* multiplies FLOPs and bytes; 0 = 1.0 */
    int32_t preference;              /* enum npu_load_preference: the app's, for the driver */
};

/*
 * The NNAPI ExecutionPreference the app compiled the model with
 * (ANeuralNetworksCompilation_setPreference, passed down by prepareModel), for
 * the driver to use as it sees fit; the hardware ignores it.  NNAPI's number
 * plus one, so that a zeroed npu_load_params says nothing.
 */
enum npu_load_preference {
    NPU_PREFERENCE_UNSPECIFIED = 0,       /* treat as FAST_SINGLE_ANSWER */
    NPU_PREFERENCE_LOW_POWER = 1,
    NPU_PREFERENCE_FAST_SINGLE_ANSWER = 2,
    NPU_PREFERENCE_SUSTAINED_SPEED = 3
};

enum npu_fault_kind {
    NPU_FAULT_FAIL_NEXT_WORK = 1,  /* the next slice to finish on the device fails its job (FAILED) */
    NPU_FAULT_HANG_CHANNEL = 2,    /* the channel stops making progress until reset */
    NPU_FAULT_HEAT_SPIKE = 3,      /* the die temperature jumps by heat_c degrees */
    NPU_FAULT_CRASH = 4            /* abort() the process, as a driver bug would */
};

struct npu_fault {
    int32_t kind;       /* enum npu_fault_kind */
    uint32_t device;    /* a *driver* device number at the system API, a hw index at npu_hw_api */
    uint32_t channel;   /* HANG_CHANNEL only */
    float heat_c;       /* HEAT_SPIKE only */
};

/* A snapshot of one hardware device. */
struct npu_hw_device_state {
    uint64_t weight_memory_used, weight_memory_total;
    uint64_t sram_used, sram_total;
    uint32_t channel_count;
    uint32_t busy_channels;   /* running or saving a context */
    uint32_t hung_channels;
    uint32_t queued_jobs;
};

struct npu_hw;  /* opaque: one emulated die */

/*
 * The hardware's functions, handed to a driver by the loader so that a driver
 * .so never links against the extension.  All return NPU_OK or an NPU_E_*.
 */
struct npu_hw_api {
    uint32_t abi_version;     /* NPU_ABI_VERSION */
    uint32_t struct_size;     /* sizeof(struct npu_hw_api), so the table may grow */

    /* Adds a device; only from the driver's init.  *hw_device receives its
     * index (0, 1, ... in call order). */
    int (*add_device)(struct npu_hw *hw, const struct npu_hw_device_config *cfg,
                      uint32_t *hw_device);

    /* Validates (npu_model_validate) and copies a model into the device:
     * reserves weight memory and SRAM or fails with NPU_E_WEIGHT_MEMORY_FULL /
     * NPU_E_SRAM_FULL and changes nothing.  The model is borrowed for the
     * call.  params may be NULL.  device_number is the driver's device number
     * the MEMORY events of this model report. */
    int (*load_model)(struct npu_hw *hw, uint32_t hw_device, int32_t device_number,
                      const struct npu_model *model, const struct npu_load_params *params,
                      uint32_t *handle);

    /* Frees a model; its queued and running jobs end CANCELLED_SYSTEM first
     * (waiting, in real-clock mode, for a slice being computed). */
    int (*unload_model)(struct npu_hw *hw, uint32_t handle);

    /* Queues a job.  `info` is the WorkInfo template: the hardware fills id,
     * effective_priority (= key) and timestamp_ms, and copies the rest.  The
     * buffers' memory is borrowed until the job's ENDED event with a final
     * reason (anything but PAUSED); the arrays describing them are copied.
     * input_shapes (may be NULL; copied) gives the dimensions of inputs the
     * model leaves unspecified (NNAPI's RequestArgument.dimensions), and
     * output_shapes (may be NULL; borrowed like the buffers) receives every
     * output's dimensions as the job learns them (struct npu_shape): an
     * output whose shape only the data decides is sized as the kernels report
     * it.  A buffer too small for its output refuses the submission with
     * NPU_E_BUFFER_TOO_SMALL when the shapes say so at once, and fails the job
     * (ENDED FAILED, output_shapes marking it) when only computed values do.
     * Emits WORK_REQUESTED.  *work_id receives the new WorkInfo.id. */
    int (*submit)(struct npu_hw *hw, uint32_t handle, int32_t key,
                  const struct npu_work_info *info,
                  const struct npu_buffer *inputs, const struct npu_shape *input_shapes, uint32_t input_count,
                  const struct npu_buffer *outputs, struct npu_shape *output_shapes, uint32_t output_count,
                  int32_t *work_id);

    /* Ends a job with CANCELLED_USER: at once if it is queued or between
     * slices, at the end of the slice being computed otherwise. */
    int (*cancel)(struct npu_hw *hw, int32_t work_id);

    int (*set_preemption_mode)(struct npu_hw *hw, int32_t mode);
    int (*set_scheduling_mode)(struct npu_hw *hw, int32_t mode);

    /* fault->device is a hardware device index here. */
    int (*inject_fault)(struct npu_hw *hw, const struct npu_fault *fault);

    /* Un-hangs a channel; its stuck job ends FAILED.  NPU_E_NOT_HUNG otherwise. */
    int (*reset_channel)(struct npu_hw *hw, uint32_t hw_device, uint32_t channel);

    int (*device_state)(struct npu_hw *hw, uint32_t hw_device, struct npu_hw_device_state *out);
    int (*thermal_state)(struct npu_hw *hw, int32_t *severity, float *temperature_c);

    /* Emulated time now, in ns since the system was created. */
    int64_t (*now_ns)(struct npu_hw *hw);

    /* Validates a model without loading it (npu_model_validate). */
    int (*validate_model)(const struct npu_model *model, uint32_t *bad_operation);

    /* npu_model_check_support, for getSupportedOperations. */
    int (*check_support)(const struct npu_model *model, bool *computable, uint32_t *bad_operation);

    /* Appends the hardware's human-readable state (channels, queues, memory,
     * thermal) to buf at offset *len, snprintf-style: *len always grows by
     * the full length, even past cap. */
    void (*dump)(struct npu_hw *hw, char *buf, size_t cap, size_t *len);
};

#endif /* NPU_HW_H */
