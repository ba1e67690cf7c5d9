/*
 * npu/driver.h - the vendor driver ABI.
 *
 * A driver is a shared object that exports one function,
 *
 *     const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw,
 *                                                   uint32_t abi_version);
 *
 * The loader (npu_system_create) dlopens the .so, calls the entry point with
 * the hardware's function table and NPU_ABI_VERSION, and refuses the driver
 * if it returns NULL, an ops table whose abi_version differs, or one that
 * lacks a mandatory callback.  The driver never links against the Python
 * extension: everything it needs from the hardware comes through `hw`.
 *
 * Context and locking, for every callback below: the system calls driver
 * callbacks only from its callers' threads (the HAL's Python thread), never
 * from a hardware worker thread, and holds the system's API lock around each
 * call, so two callbacks of one instance never run at once and a driver needs
 * no locks of its own.  A callback may call any function of the npu_hw_api.
 * Every int-returning callback returns NPU_OK or an NPU_E_* code.
 *
 * Scheduling semantics every driver must follow (android.hardware.npu, the
 * seed's SchedulingConfig):
 *  - a config is valid iff 0 <= appPriority <= 1000 and
 *    0 <= minPriority <= maxPriority <= 2000; an invalid one is
 *    NPU_E_INVALID_PRIORITY, a uid appearing twice in one call is
 *    NPU_E_DUPLICATE_UID, and a failed call changes nothing;
 *  - a uid with no config has appPriority 1000, minPriority 0,
 *    maxPriority 2000, direct access, and no attribution to other uids;
 *  - effectivePriority = clamp(appPriority + jobPriority, minPriority,
 *    maxPriority); lower runs first; ties run in arrival order;
 *  - work is refused with NPU_E_INVALID_JOB_PRIORITY when jobPriority is not
 *    in 0..1000, NPU_E_NO_DIRECT_ACCESS when the uid lacks hasDirectAccess,
 *    NPU_E_ATTRIBUTION_DENIED when originalUid != uid and the uid lacks
 *    canAttributeOtherUid.  A refused submission emits no event.
 */
#ifndef NPU_DRIVER_H
#define NPU_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "npu/model.h"
#include "npu/hw.h"

/* NNAPI DeviceType. */
enum npu_device_type {
    NPU_DEVICE_OTHER = 1,
    NPU_DEVICE_CPU = 2,
    NPU_DEVICE_GPU = 3,
    NPU_DEVICE_ACCELERATOR = 4
};

/* NNAPI DeviceStatus. */
enum npu_device_status {
    NPU_STATUS_AVAILABLE = 0,
    NPU_STATUS_BUSY = 1,
    NPU_STATUS_OFFLINE = 2,
    NPU_STATUS_UNKNOWN = 3
};

enum {
    NPU_FEATURE_LEVEL_NN_HAL_1_2 = 29,
    NPU_DEVICE_NAME_MAX = 64,
    NPU_VERSION_MAX = 128,
    NPU_MAX_PARTS = 8
};

/* NNAPI PerformanceInfo: ratios to the CPU, lower is better, both > 0. */
struct npu_performance_info {
    float exec_time;
    float power_usage;
};

struct npu_device_info {
    char name[NPU_DEVICE_NAME_MAX];     /* "{VENDOR}-{DEVICE_NAME}": exactly one '-' */
    int32_t type;                       /* enum npu_device_type */
    char version[NPU_VERSION_MAX];      /* differs for every driver build */
    int32_t feature_level;              /* 29 for NN HAL 1.2 */
    int32_t status;                     /* enum npu_device_status */
    struct npu_performance_info relaxed_float32_to_float16_scalar;
    struct npu_performance_info relaxed_float32_to_float16_tensor;
    struct npu_performance_info operand_performance[NPU_OPERAND_TYPE_COUNT]; /* by OperandType */
    uint64_t weight_memory_bytes;
    uint64_t weight_memory_used;
    uint64_t sram_bytes;
    uint64_t sram_used;
    uint32_t channel_count;
    uint32_t part_count;                /* > 0 only for a heterogeneous device ... */
    uint32_t parts[NPU_MAX_PARTS];      /* ... the device numbers it manages */
};

/* android.hardware.npu SchedulingConfig, the seed's form. */
struct npu_scheduling_config {
    int32_t min_priority;
    int32_t max_priority;
    int32_t uid;
    int32_t app_priority;
    bool has_direct_access;
    bool can_attribute_other_uid;
};

/* One submission (IScheduling's view of an execution). */
struct npu_work_request {
    uint32_t model_id;                  /* from load_model */
    int32_t uid;
    int32_t original_uid;
    int32_t debug_pid;
    int32_t job_priority;               /* 0..1000 */
    bool has_group_id;
    uint8_t group_id[16];
    const char *debug_feature_id;       /* NULL: none; borrowed for the call */
    uint32_t input_count;
    const struct npu_buffer *inputs;    /* array borrowed for the call; memory until ENDED */
    uint32_t output_count;
    const struct npu_buffer *outputs;   /* array borrowed for the call; memory until ENDED */
    /* Shapes known only at execution (npu_hw_api.submit): the inputs' given
     * dimensions (NULL: as the model declares them; borrowed for the call) and
     * where the outputs' real dimensions go (NULL: not wanted; borrowed until
     * the final ENDED). */
    const struct npu_shape *input_shapes;
    struct npu_shape *output_shapes;
};

/*
 * struct npu_driver_ops - what a driver implements.
 *
 * Mandatory: abi_version, vendor, init, fini, device_count, get_device_info,
 * get_supported_operations, set_scheduling_configs,
 * update_scheduling_configs, load_model, unload_model, submit_work,
 * cancel_work.  The others may be NULL; the system then answers
 * NPU_E_NOT_SUPPORTED (or, for dump, prints only the hardware's part).
 */
struct npu_driver_ops {
    /* NPU_ABI_VERSION as the driver was compiled. */
    uint32_t abi_version;

    /* The {VENDOR} part of device names, e.g. "emu".  Static string. */
    const char *vendor;

    /*
     * @init: called once by npu_system_create, before any other callback.
     * The driver allocates its instance, describes its silicon with
     * hw_api->add_device, may choose a preemption and scheduling mode, and
     * stores hw_api and hw for later calls (both outlive the instance).
     * On success *driver receives the instance pointer passed to every
     * other callback.  On failure the driver frees what it allocated.
     */
    int (*init)(const struct npu_hw_api *hw_api, struct npu_hw *hw, void **driver);

    /*
     * @fini: called once by npu_system_destroy, last.  The driver frees its
     * instance; it need not unload models (the hardware frees them after).
     */
    void (*fini)(void *driver);

    /* @device_count: the number of devices, constant for the instance's life. */
    uint32_t (*device_count)(void *driver);

    /* @get_device_info: fills *out (owned by the caller) for device `device`. */
    int (*get_device_info)(void *driver, uint32_t device, struct npu_device_info *out);

    /*
     * @get_supported_operations: for a model (borrowed for the call), sets
     * supported[i] for each of its operation_count operations (the caller's
     * array).  An invalid model is its validation error, not "unsupported".
     */
    int (*get_supported_operations)(void *driver, uint32_t device,
                                    const struct npu_model *model, bool *supported);

    /* @set_scheduling_configs: replaces every config (count may be 0).  The
     * array is borrowed for the call.  All-or-nothing (see the top). */
    int (*set_scheduling_configs)(void *driver, const struct npu_scheduling_config *configs,
                                  uint32_t count);

    /* @update_scheduling_configs: replaces or adds the given uids' configs,
     * leaves the others.  All-or-nothing. */
    int (*update_scheduling_configs)(void *driver, const struct npu_scheduling_config *configs,
                                     uint32_t count);

    /*
     * @load_model: validates the model, checks every operation is supported
     * by the device (NPU_E_UNSUPPORTED_OPERATION), and loads it into the
     * device's memory.  The model is borrowed for the call.  *model_id
     * receives an id for submit_work and unload_model.  params may be NULL.
     */
    int (*load_model)(void *driver, uint32_t device, const struct npu_model *model,
                      const struct npu_load_params *params, uint32_t *model_id);

    /* @unload_model: frees a model; its work in flight ends CANCELLED_SYSTEM. */
    int (*unload_model)(void *driver, uint32_t model_id);

    /*
     * @submit_work: admits (see the top), computes the effective priority and
     * queues the work on the model's device.  *work_id receives the
     * WorkInfo.id.  The buffers' memory stays borrowed until the work's final
     * ENDED event; the request and its arrays only for the call.
     */
    int (*submit_work)(void *driver, const struct npu_work_request *request, int32_t *work_id);

    /* @cancel_work: ends the work with CANCELLED_USER (see npu_hw_api.cancel). */
    int (*cancel_work)(void *driver, int32_t work_id);

    /* @inject_fault: optional; fault->device is a driver device number. */
    int (*inject_fault)(void *driver, const struct npu_fault *fault);

    /* @reset_channel: optional; un-hangs a channel of a driver device. */
    int (*reset_channel)(void *driver, uint32_t device, uint32_t channel);

    /*
     * @dump: optional; appends the driver's state for `dumpsys` (devices,
     * scheduling configs) to buf at *len, snprintf-style (*len grows by the
     * full length even past cap; buf is NUL-terminated within cap).  The
     * system appends the hardware's own dump after it.
     */
    void (*dump)(void *driver, char *buf, size_t cap, size_t *len);
};

/* The type of the one symbol a driver .so exports.  Return NULL to refuse an
 * abi_version the driver does not speak. */
typedef const struct npu_driver_ops *(*npu_driver_entry_fn)(const struct npu_hw_api *hw,
                                                             uint32_t abi_version);

/* The built-in reference driver (also buildable alone with `make driver`). */
const struct npu_driver_ops *npu_reference_driver_entry(const struct npu_hw_api *hw,
                                                        uint32_t abi_version);

#endif /* NPU_DRIVER_H */
