/*
 * hw/hw_internal.h - what the system (hw/system.c) needs from the hardware
 * beyond the driver-facing struct npu_hw_api.  Not installed, not an ABI.
 */
#ifndef NPU_HW_INTERNAL_H
#define NPU_HW_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "npu/hw.h"
#include "npu/system.h"

struct npu_hw_options {
    int32_t clock;
    double speed_factor;
    float thresholds_c[6];
    float ambient_c;
    double time_constant_ms;
    uint32_t slices_per_operation;
};

/* The event ring: a growable FIFO behind a mutex, plus an eventfd that is
 * readable exactly while the FIFO is not empty. */
struct npu_ring {
    pthread_mutex_t lock;
    struct npu_event *buf;
    size_t cap, head, count;
    uint64_t dropped;
    int fd;
};

int npu_ring_init(struct npu_ring *ring);
void npu_ring_fini(struct npu_ring *ring);
void npu_ring_push(struct npu_ring *ring, const struct npu_event *ev);
uint32_t npu_ring_drain(struct npu_ring *ring, struct npu_event *out, uint32_t max);
uint64_t npu_ring_dropped(struct npu_ring *ring);

/* Checks opt (thresholds increasing, speed > 0, ...) after filling defaults. */
int npu_hw_create(const struct npu_hw_options *opt, struct npu_hw **out);
/* Starts the worker threads (real clock); devices are fixed from then on. */
int npu_hw_start(struct npu_hw *hw);
void npu_hw_destroy(struct npu_hw *hw);
const struct npu_hw_api *npu_hw_api_table(void);

struct npu_ring *npu_hw_ring(struct npu_hw *hw);
int32_t npu_hw_clock(struct npu_hw *hw);
int npu_hw_advance(struct npu_hw *hw, int64_t ns);
int npu_hw_advance_to_next_event(struct npu_hw *hw, int64_t *now_ns);
int npu_hw_next_event_ns(struct npu_hw *hw, int64_t *at_ns);
int npu_hw_run_until_idle(struct npu_hw *hw, int64_t max_ns);
/* See npu_system_thermal_override. */
int npu_hw_thermal_override(struct npu_hw *hw, bool hold, double temperature_c);
bool npu_hw_thermal_held(struct npu_hw *hw);
/* See npu_system_set_profiling and npu_system_drain_slices. */
int npu_hw_set_profiling(struct npu_hw *hw, uint32_t capacity);
int npu_hw_drain_slices(struct npu_hw *hw, struct npu_slice_record *out, uint32_t max, uint32_t *count,
                        uint64_t *dropped);

#endif
