/*
 * The emulated NPU: devices, channels, hardware queues, slices, preemption,
 * weight memory and SRAM, the thermal model and the two clocks.
 *
 * One mutex (hw->lock) guards all of it.  The only work done outside the lock
 * is computing a slice, because that is the part that takes real time; while
 * it runs the channel is marked `computing` and nothing may free its job.
 *
 * Both clocks drive the same state machine: a channel that is not idle has a
 * `busy_until` (emulated ns) at which its slice or context save ends, and
 * channel_boundary() is what happens then.  The virtual clock calls it from
 * npu_hw_advance() in time order; the real clock's worker threads call it
 * when the wall clock reaches busy_until x speed_factor.
 *
 * The real clock's worker of a channel computes each slice as soon as the
 * slice starts (while its emulated time runs), then sleeps on the channel's
 * own condition variable towards the wall-clock deadline of busy_until, so
 * that the boundary itself (a preemption, the next job's start) costs only
 * its bookkeeping.  When a queued job waits for that boundary it sleeps only
 * to SPIN_BEFORE_WALL_NS before it and spins the rest, as a timed sleep wakes
 * late.  Its condition is signalled only when its plan changes: a job started
 * on it, a submission to its device (which may now wait for its boundary), a
 * stop.  hw->cond is broadcast when a slice's computation ends (an unload
 * waits for that); the thermal thread sleeps on a condition of its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npu/errors.h"
#include "npu/hw.h"
#include "../kernels/plan.h"
#include "hw_internal.h"

#define NEVER INT64_MAX

enum ch_state { CH_IDLE, CH_RUNNING, CH_SAVING };
enum job_state { JOB_QUEUED, JOB_ON_CHANNEL };

/* Slowdown of every slice at each thermal severity, NONE..SHUTDOWN. */
static const double THROTTLE[NPU_THERMAL_SEVERITY_COUNT] = {1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 8.0};

struct model;
struct channel;

struct job {
    struct job *next_all;
    int32_t id, key;
    uint64_t seq;                 /* arrival order: ties run in it, also after a pause */
    struct npu_work_info info;
    struct model *model;
    struct npu_plan *plan;        /* this execution's: the model's, or an instance with its shapes */
    struct npu_buffer *in, *out;
    struct npu_shape *out_shapes; /* the submitter's (may be NULL), borrowed until the final end */
    uint32_t n_in, n_out;
    uint32_t next_slice;
    bool started;
    int32_t pending_end;          /* -1, or the end reason to apply at the next boundary */
    unsigned char *arena;         /* live temporaries while on a channel */
    size_t arena_bytes;           /* its size (at least the plan's temp_bytes) */
    unsigned char *saved;         /* the preemption buffer while checkpointed */
    bool restore_pending;         /* the next slice pays for restoring `saved` */
    int state;
    struct channel *ch;
};

struct channel {
    struct device *dev;
    uint32_t index;
    int state;
    struct job *job;
    struct job *claim;            /* the job this channel is saving a context for */
    int64_t busy_until;
    bool hung, computing;
    bool ahead;                   /* real clock: the running slice is already computed */
    pthread_cond_t wake;          /* real clock: the worker sleeps here (CLOCK_MONOTONIC) */
    pthread_t thread;
    bool thread_started;
    struct npu_hw *hw;
    uint64_t slices, busy_ns;
};

struct device {
    struct npu_hw_device_config cfg;
    uint32_t index;
    struct channel ch[NPU_HW_MAX_CHANNELS];
    struct job **queue;
    size_t qlen, qcap;
    uint64_t weight_used, sram_used;
    bool fail_next;
    uint64_t completed, failed, cancelled, preemptions, restarts, models;
};

/* A loaded model.  Each is its own allocation, owned by hw->models[handle - 1]
 * from its load until its unload (which ends all its jobs first): a job's
 * `model` pointer must stay valid for the job's whole life, so the table that
 * grows with every load holds pointers and never moves a model. */
struct model {
    bool live;
    uint32_t dev;
    int32_t device_number;
    struct npu_plan *plan;
    uint64_t weight, sram;
    double cost_scale;
    /* Emulated weight bytes beyond the real tensors, streamed from weight
     * memory once per inference and spread evenly over the slices: a "2 GB"
     * model costs its weight traffic even though only its real tensors exist. */
    double streamed_bytes_per_slice;
    uint32_t jobs;
    /* The arena of the model's last ended job, kept for its next one (a job's
     * temporaries are never read before written, and the next job is the same
     * model's, the same owner's): no allocation, no clearing, no fresh pages
     * faulted in per execution.  NULL, or spare_bytes long. */
    unsigned char *spare_arena;
    size_t spare_bytes;
};

/* Where a starting job gets its arena: the model's spare when it is large
 * enough, else a new zeroed one (NULL when out of memory). */
static unsigned char *arena_for(struct model *m, size_t bytes, size_t *got)
{
    if (m->spare_arena && m->spare_bytes >= bytes) {
        unsigned char *a = m->spare_arena;
        *got = m->spare_bytes;
        m->spare_arena = NULL;
        return a;
    }
    *got = bytes;
    return calloc(1, bytes);
}

/* An ended job's arena: the model's spare if it has none, else freed. */
static void arena_done(struct model *m, unsigned char *arena, size_t bytes)
{
    if (arena && !m->spare_arena) {
        m->spare_arena = arena;
        m->spare_bytes = bytes;
    } else {
        free(arena);
    }
}

struct npu_hw {
    pthread_mutex_t lock;
    pthread_cond_t cond;          /* broadcast when a slice's computation ends */
    pthread_cond_t thermal_wake;  /* the thermal thread's sleep; signalled at stop */
    pthread_condattr_t mono;      /* CLOCK_MONOTONIC, for every condition variable */
    struct npu_hw_options opt;
    struct device dev[NPU_HW_MAX_DEVICES];
    uint32_t ndev;
    struct model **models;        /* by handle - 1; NULL once unloaded (handles are never reused) */
    uint32_t nmodels, models_cap;
    struct job *jobs;
    int32_t next_id;
    uint64_t next_seq;
    int32_t preempt_mode, sched_mode;
    int64_t vnow;
    struct timespec start;
    double temp;
    int32_t severity;
    int64_t thermal_last;
    bool thermal_held;  /* npu_hw_thermal_override: temp neither heats nor cools */
    int64_t last_ts_ms;
    bool started, stop;
    pthread_t thermal_thread;
    bool thermal_started;
    struct npu_ring ring;
    /* the cost profile (npu_hw_set_profiling): a FIFO of at most prof_cap records */
    struct npu_slice_record *prof;
    uint32_t prof_cap, prof_head, prof_count;
    uint64_t prof_dropped;
};

/* ---- time ---- */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t hw_now(struct npu_hw *hw)
{
    if (hw->opt.clock == NPU_CLOCK_VIRTUAL)
        return hw->vnow;
    int64_t wall = mono_ns() - ((int64_t)hw->start.tv_sec * 1000000000 + hw->start.tv_nsec);
    return (int64_t)((double)wall / hw->opt.speed_factor);
}

static struct timespec wall_deadline(struct npu_hw *hw, int64_t emu_ns)
{
    double wall = (double)emu_ns * hw->opt.speed_factor;
    int64_t abs_ns = (int64_t)hw->start.tv_sec * 1000000000 + hw->start.tv_nsec;
    abs_ns = wall > 4e18 ? INT64_MAX / 2 : abs_ns + (int64_t)wall;
    struct timespec ts = {.tv_sec = abs_ns / 1000000000, .tv_nsec = abs_ns % 1000000000};
    return ts;
}

static int64_t timestamp_ms(struct npu_hw *hw)
{
    int64_t ms = hw->opt.clock == NPU_CLOCK_VIRTUAL ? hw->vnow / 1000000 : mono_ns() / 1000000;
    if (ms < hw->last_ts_ms)
        ms = hw->last_ts_ms;
    hw->last_ts_ms = ms;
    return ms;
}

/* ---- events ---- */

static void emit_work(struct npu_hw *hw, int32_t type, int32_t reason, struct job *job)
{
    struct npu_event ev;
    memset(&ev, 0, sizeof ev);
    ev.hw_device = (int32_t)job->model->dev;
    ev.channel = job->ch && job->state == JOB_ON_CHANNEL ? (int32_t)job->ch->index : -1;
    ev.type = type;
    ev.reason = reason;
    ev.time_ns = hw_now(hw);
    ev.work = job->info;
    ev.work.timestamp_ms = timestamp_ms(hw);
    ev.device_number = job->info.device_number;
    npu_ring_push(&hw->ring, &ev);
}

static void emit_memory(struct npu_hw *hw, struct device *d, int32_t device_number, int status)
{
    struct npu_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = NPU_EVENT_MEMORY;
    ev.time_ns = hw_now(hw);
    ev.memory_device = (int32_t)d->index;
    ev.hw_device = (int32_t)d->index;
    ev.channel = -1;
    ev.weight_memory_used = d->weight_used;
    ev.weight_memory_total = d->cfg.weight_memory_bytes;
    ev.sram_used = d->sram_used;
    ev.sram_total = d->cfg.sram_bytes;
    ev.memory_status = status;
    ev.device_number = device_number;
    npu_ring_push(&hw->ring, &ev);
}

/* ---- thermal ---- */

static void thermal_set_severity(struct npu_hw *hw)
{
    int32_t sev = 0;
    while (sev < 6 && hw->temp >= hw->opt.thresholds_c[sev])
        sev++;
    if (sev != hw->severity) {
        hw->severity = sev;
        struct npu_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = NPU_EVENT_THERMAL;
        ev.time_ns = hw_now(hw);
        ev.hw_device = -1;
        ev.channel = -1;
        ev.thermal_severity = sev;
        ev.temperature_c = (float)hw->temp;
        npu_ring_push(&hw->ring, &ev);
    }
}

/* Integrates the temperature up to emulated time t with the channels' current
 * load; call before anything changes which channels are busy. */
static void thermal_update(struct npu_hw *hw, int64_t t)
{
    if (t <= hw->thermal_last)
        return;
    if (hw->thermal_held) {
        hw->thermal_last = t; /* time passes; the held die does not follow the load */
        return;
    }
    double rise = 0.0;
    for (uint32_t d = 0; d < hw->ndev; d++)
        for (uint32_t c = 0; c < hw->dev[d].cfg.channel_count; c++)
            if (hw->dev[d].ch[c].state != CH_IDLE)
                rise += hw->dev[d].cfg.heat_rise_c;
    double eq = hw->opt.ambient_c + rise;
    double dt_ms = (double)(t - hw->thermal_last) / 1e6;
    hw->temp = eq + (hw->temp - eq) * exp(-dt_ms / hw->opt.time_constant_ms);
    hw->thermal_last = t;
    thermal_set_severity(hw);
}

/* The emulated time at which the severity next changes if no channel
 * changes state, or NEVER.  The virtual clock steps there, so THERMAL events
 * carry the exact time of the crossing, not the time someone next looked. */
static int64_t next_thermal_crossing(struct npu_hw *hw)
{
    if (hw->thermal_held)
        return NEVER;
    double rise = 0.0;
    for (uint32_t d = 0; d < hw->ndev; d++)
        for (uint32_t c = 0; c < hw->dev[d].cfg.channel_count; c++)
            if (hw->dev[d].ch[c].state != CH_IDLE)
                rise += hw->dev[d].cfg.heat_rise_c;
    double eq = hw->opt.ambient_c + rise, t0 = hw->temp, theta;
    if (eq > t0 && hw->severity < 6 && hw->opt.thresholds_c[hw->severity] < eq)
        theta = hw->opt.thresholds_c[hw->severity];            /* heating past the next threshold */
    else if (eq < t0 && hw->severity > 0 && hw->opt.thresholds_c[hw->severity - 1] > eq)
        theta = hw->opt.thresholds_c[hw->severity - 1];        /* cooling below the current one */
    else
        return NEVER;
    double dt_ms = -hw->opt.time_constant_ms * log((theta - eq) / (t0 - eq));
    if (!(dt_ms >= 0) || dt_ms > 1e12)
        return NEVER;
    /* one ns late rather than early, so the step really crosses */
    return hw->thermal_last + (int64_t)ceil(dt_ms * 1e6) + 1;
}

/* ---- queues and jobs ---- */

static int queue_push(struct device *d, struct job *j)
{
    if (d->qlen == d->qcap) {
        size_t ncap = d->qcap ? d->qcap * 2 : 16;
        struct job **nq = realloc(d->queue, ncap * sizeof *nq);
        if (!nq)
            return NPU_E_NO_MEMORY;
        d->queue = nq;
        d->qcap = ncap;
    }
    d->queue[d->qlen++] = j;
    j->state = JOB_QUEUED;
    j->ch = NULL;
    return NPU_OK;
}

static void queue_remove(struct device *d, struct job *j)
{
    for (size_t i = 0; i < d->qlen; i++)
        if (d->queue[i] == j) {
            memmove(&d->queue[i], &d->queue[i + 1], (d->qlen - i - 1) * sizeof *d->queue);
            d->qlen--;
            return;
        }
}

static bool better(struct npu_hw *hw, const struct job *a, const struct job *b)
{
    if (hw->sched_mode == NPU_SCHED_PRIORITY && a->key != b->key)
        return a->key < b->key;
    return a->seq < b->seq;
}

static struct job *queue_best(struct npu_hw *hw, struct device *d)
{
    struct job *best = NULL;
    for (size_t i = 0; i < d->qlen; i++)
        /* a model being unloaded starts nothing new: its jobs are about to end */
        if (d->queue[i]->model->live && (!best || better(hw, d->queue[i], best)))
            best = d->queue[i];
    return best;
}

static struct device *job_device(struct npu_hw *hw, const struct job *j)
{
    return &hw->dev[j->model->dev];
}

/* Ends a job that is queued or already detached from its channel. */
static void job_end(struct npu_hw *hw, struct job *j, int32_t reason)
{
    struct device *d = job_device(hw, j);
    if (j->state == JOB_QUEUED)
        queue_remove(d, j);
    for (uint32_t c = 0; c < d->cfg.channel_count; c++)
        if (d->ch[c].claim == j)
            d->ch[c].claim = NULL;
    emit_work(hw, NPU_EVENT_WORK_ENDED, reason, j);
    if (reason == NPU_END_REASON_COMPLETED)
        d->completed++;
    else if (reason == NPU_END_REASON_FAILED)
        d->failed++;
    else
        d->cancelled++;
    for (struct job **pp = &hw->jobs; *pp; pp = &(*pp)->next_all)
        if (*pp == j) {
            *pp = j->next_all;
            break;
        }
    j->model->jobs--;
    npu_plan_end(j->model->plan, j->plan);
    arena_done(j->model, j->arena, j->arena_bytes);
    free(j->saved);
    free(j->in);
    free(j->out);
    free(j);
}

static int64_t save_cost(const struct device *d, const struct job *j)
{
    return d->cfg.context_save_fixed_ns + (int64_t)((double)j->model->sram / d->cfg.bytes_per_ns);
}

/* The device's throughput for an operation of operand type t in a plan (a
 * relaxed model's float32 runs as float16; a class the device gave no rate
 * for runs at float32's). */
static double flops_per_ns(const struct device *d, const struct npu_plan *p, int32_t t)
{
    int32_t c = npu_compute_class(t);
    if (p->relaxed && (t == NPU_OPERAND_TENSOR_FLOAT32 || t == NPU_OPERAND_FLOAT32))
        c = NPU_COMPUTE_FLOAT16;
    double rate = d->cfg.flops_per_ns[c];
    return rate > 0 ? rate : d->cfg.flops_per_ns[NPU_COMPUTE_FLOAT32];
}

/* Keeps r in the cost profile, if one is being recorded. */
static void profile_push(struct npu_hw *hw, const struct npu_slice_record *r)
{
    if (!hw->prof_cap)
        return;
    if (hw->prof_count == hw->prof_cap) {
        hw->prof_dropped++;
        return;
    }
    hw->prof[(hw->prof_head + hw->prof_count++) % hw->prof_cap] = *r;
}

/*
 * The bytes slice s moves, each tensor counted once: an operation's binding
 * counts every tensor it reads and writes, but a temporary was already charged
 * to the operation that wrote it (it is read back from where that left it, in
 * the job's SRAM working set), so its readers do not pay for it again.
 * Constants and model inputs are charged to each reader, outputs to their writer.
 */
static double slice_bytes(const struct npu_plan *p, const struct npu_plan_slice *s)
{
    const struct npu_plan_op *op = &p->ops[s->op];
    if (!(op->bytes > 0))
        return 0.0;
    double again = 0.0;
    for (uint32_t i = 0; i < op->input_count; i++) {
        uint32_t k = op->operands[i];
        if (k < p->operand_count && p->operands[k].lifetime == NPU_LIFETIME_TEMPORARY_VARIABLE)
            again += (double)p->operands[k].bytes;
    }
    return s->bytes * fmax(op->bytes - again, 0.0) / op->bytes;
}

/* The emulated time of job j's next slice on d, and (r, may be NULL) why. */
static int64_t slice_cost(struct npu_hw *hw, const struct device *d, const struct job *j, struct npu_slice_record *r)
{
    const struct npu_plan *p = j->plan;
    const struct npu_plan_slice *s = &p->slices[j->next_slice];
    double bytes = slice_bytes(p, s) + j->model->streamed_bytes_per_slice;
    int32_t t = p->ops[s->op].operand_type;
    double compute = s->flops / flops_per_ns(d, p, t) * j->model->cost_scale;
    double memory = bytes / d->cfg.bytes_per_ns * j->model->cost_scale;
    double throttle = THROTTLE[hw->severity];
    double restore = j->restore_pending ? (double)save_cost(d, j) : 0.0;
    double total = ((double)d->cfg.slice_overhead_ns + fmax(compute, memory)) * throttle + restore;
    int64_t ns = (int64_t)ceil(total);
    if (ns < 1)
        ns = 1;
    if (r) {
        int32_t c = npu_compute_class(t);
        if (p->relaxed && (t == NPU_OPERAND_TENSOR_FLOAT32 || t == NPU_OPERAND_FLOAT32))
            c = NPU_COMPUTE_FLOAT16;
        *r = (struct npu_slice_record){
            .kind = NPU_SLICE_COMPUTE, .work_id = j->info.id, .hw_device = (int32_t)d->index,
            .operation = s->op, .operation_type = p->ops[s->op].def->type, .compute_class = c,
            .slice = j->next_slice, .end_ns = ns, .flops = s->flops, .bytes = bytes, .compute_ns = compute,
            .memory_ns = memory, .overhead_ns = (double)d->cfg.slice_overhead_ns, .throttle = throttle,
            .restore_ns = restore,
        };
    }
    return ns;
}

static void channel_schedule_slice(struct npu_hw *hw, struct channel *ch, int64_t t)
{
    struct npu_slice_record r;
    int64_t cost = slice_cost(hw, ch->dev, ch->job, hw->prof_cap ? &r : NULL);
    ch->busy_until = ch->hung ? NEVER : t + cost;
    ch->busy_ns += (uint64_t)cost;
    if (hw->prof_cap && !ch->hung) {
        r.channel = (int32_t)ch->index;
        r.start_ns = t;
        r.end_ns = t + cost;
        profile_push(hw, &r);
    }
}

/* Puts a queued job on an idle channel at time t. */
static void channel_start(struct npu_hw *hw, struct channel *ch, struct job *j, int64_t t)
{
    struct device *d = ch->dev;
    queue_remove(d, j);
    for (uint32_t c = 0; c < d->cfg.channel_count; c++)
        if (d->ch[c].claim == j)
            d->ch[c].claim = NULL;
    size_t arena_len = j->plan->temp_bytes ? j->plan->temp_bytes : 1;
    if (!j->arena)
        j->arena = arena_for(j->model, arena_len, &j->arena_bytes);
    if (!j->arena) {
        j->state = JOB_ON_CHANNEL; /* not queued any more: job_end must not look there */
        job_end(hw, j, NPU_END_REASON_FAILED);
        return;
    }
    if (j->saved) {
        memcpy(j->arena, j->saved, j->plan->temp_bytes);
        free(j->saved);
        j->saved = NULL;
        j->restore_pending = true;
    }
    j->state = JOB_ON_CHANNEL;
    j->ch = ch;
    ch->job = j;
    ch->state = CH_RUNNING;
    ch->ahead = false;
    emit_work(hw, NPU_EVENT_WORK_STARTED, j->started ? NPU_START_REASON_RESUMED : NPU_START_REASON_INITIAL, j);
    j->started = true;
    channel_schedule_slice(hw, ch, t);
    /* its worker sleeps until a deadline it did not have: wake it (a no-op
     * when this is the worker itself, or on the virtual clock) */
    pthread_cond_signal(&ch->wake);
}

static void device_dispatch(struct npu_hw *hw, struct device *d, int64_t t)
{
    for (uint32_t c = 0; c < d->cfg.channel_count; c++) {
        struct channel *ch = &d->ch[c];
        if (ch->state != CH_IDLE)
            continue;
        struct job *j = queue_best(hw, d);
        if (!j)
            return;
        channel_start(hw, ch, j, t);
    }
}

static void channel_release(struct channel *ch)
{
    ch->job = NULL;
    ch->state = CH_IDLE;
    ch->busy_until = 0;
    ch->ahead = false;
}

/* The queued job, if any, that should take this channel's running job's place. */
static struct job *preemptor(struct npu_hw *hw, struct channel *ch)
{
    if (hw->preempt_mode == NPU_PREEMPT_NONE || hw->sched_mode != NPU_SCHED_PRIORITY)
        return NULL;
    struct device *d = ch->dev;
    struct job *best = NULL;
    for (size_t i = 0; i < d->qlen; i++) {
        struct job *q = d->queue[i];
        bool claimed = false;
        for (uint32_t c = 0; c < d->cfg.channel_count; c++)
            claimed |= d->ch[c].claim == q;
        if (!claimed && q->model->live && q->key < ch->job->key && (!best || better(hw, q, best)))
            best = q;
    }
    return best;
}

static void channel_pause(struct npu_hw *hw, struct channel *ch, struct job *claim, int64_t t)
{
    struct device *d = ch->dev;
    struct job *j = ch->job;
    emit_work(hw, NPU_EVENT_WORK_ENDED, NPU_END_REASON_PAUSED, j);
    d->preemptions++;
    if (hw->preempt_mode == NPU_PREEMPT_CHECKPOINT) {
        size_t n = j->plan->temp_bytes;
        j->saved = malloc(n ? n : 1);
        if (j->saved) {
            memcpy(j->saved, j->arena, n);
            /* The SRAM now belongs to the preemptor: drop it so a broken
             * restore could never pass by reading stale memory. */
            free(j->arena);
            j->arena = NULL;
            ch->state = CH_SAVING;
            ch->claim = claim;
            ch->busy_until = t + save_cost(d, j);
            ch->busy_ns += (uint64_t)save_cost(d, j);
            if (hw->prof_cap) {
                uint32_t op = j->next_slice < j->plan->slice_count ? j->plan->slices[j->next_slice].op : 0;
                struct npu_slice_record r = {
                    .kind = NPU_SLICE_SAVE, .work_id = j->info.id, .hw_device = (int32_t)d->index,
                    .channel = (int32_t)ch->index, .operation = op, .operation_type = j->plan->ops[op].def->type,
                    .slice = j->next_slice, .start_ns = t, .end_ns = ch->busy_until, .bytes = (double)j->model->sram,
                    .throttle = 1.0,
                };
                profile_push(hw, &r);
            }
            return;
        }
        /* no host memory for the preemption buffer: fall back to a restart */
    }
    d->restarts++;
    free(j->arena);
    j->arena = NULL;
    j->next_slice = 0;
    j->restore_pending = false;
    channel_release(ch);
    if (queue_push(d, j) != NPU_OK) {
        job_end(hw, j, NPU_END_REASON_FAILED);
    }
    channel_start(hw, ch, claim, t);
}

/* A job whose plan resolves as it runs has run every slice it has: its next
 * operations are resolved with the values computed so far (unlocked, as a
 * slice's computation).  False when that fails the job (a binding refused
 * the values, an output's buffer is too small: its out_shapes say so). */
static bool job_continue(struct npu_hw *hw, struct channel *ch, struct job *j)
{
    ch->computing = true;
    size_t before = j->plan->temp_bytes;
    pthread_mutex_unlock(&hw->lock);
    int rc = npu_plan_continue(j->plan, &j->arena, j->in, j->out, j->out_shapes, NULL, 0);
    pthread_mutex_lock(&hw->lock);
    if (j->plan->temp_bytes > before)  /* continue reallocated the arena to exactly that */
        j->arena_bytes = j->plan->temp_bytes;
    ch->computing = false;
    pthread_cond_broadcast(&hw->cond);
    return rc == NPU_OK && j->pending_end < 0 && j->next_slice < j->plan->slice_count;
}

/* What happens when a channel reaches busy_until == t. */
static void channel_boundary(struct npu_hw *hw, struct channel *ch, int64_t t)
{
    struct device *d = ch->dev;
    struct job *j = ch->job;
    if (ch->state == CH_SAVING) {
        struct job *claim = ch->claim;
        ch->claim = NULL;
        channel_release(ch);
        if (j) {
            if (j->pending_end >= 0) {
                job_end(hw, j, j->pending_end);
            } else if (queue_push(d, j) != NPU_OK) {
                j->state = JOB_ON_CHANNEL;
                job_end(hw, j, NPU_END_REASON_FAILED);
            }
        }
        if (claim && claim->state == JOB_QUEUED)
            channel_start(hw, ch, claim, t);
        device_dispatch(hw, d, t);
        return;
    }
    /* CH_RUNNING: the slice in flight is done (in emulated time); compute it,
     * unless its model is being unloaded (the unloader waits for us) */
    if (!j->model->live && j->pending_end < 0)
        j->pending_end = NPU_END_REASON_CANCELLED_SYSTEM;
    if (d->fail_next && j->pending_end < 0) {
        d->fail_next = false;
        j->pending_end = NPU_END_REASON_FAILED;
    }
    if (j->pending_end < 0) {
        if (!ch->ahead) {
            ch->computing = true;
            pthread_mutex_unlock(&hw->lock);
            int rc = npu_plan_run_slice(j->plan, j->next_slice, j->arena, j->in, j->out, NULL, 0);
            pthread_mutex_lock(&hw->lock);
            ch->computing = false;
            if (rc != NPU_OK)
                j->pending_end = NPU_END_REASON_FAILED;
            pthread_cond_broadcast(&hw->cond);
        }
        ch->ahead = false;
        j->next_slice++;
        j->restore_pending = false;
        ch->slices++;
    }
    if (hw->stop)
        return;
    if (ch->hung && j->pending_end < 0) {
        ch->busy_until = NEVER;
        return;
    }
    if (j->pending_end >= 0) {
        channel_release(ch);
        job_end(hw, j, j->pending_end);
    } else if (j->next_slice == j->plan->slice_count && npu_plan_complete(j->plan)) {
        channel_release(ch);
        job_end(hw, j, NPU_END_REASON_COMPLETED);
    } else if (j->next_slice == j->plan->slice_count && !job_continue(hw, ch, j)) {
        channel_release(ch);
        job_end(hw, j, j->pending_end >= 0 ? j->pending_end : NPU_END_REASON_FAILED);
    } else {
        struct job *claim = preemptor(hw, ch);
        if (claim)
            channel_pause(hw, ch, claim, t);
        else
            channel_schedule_slice(hw, ch, t);
    }
    device_dispatch(hw, d, t);
}

/* ---- the virtual clock ---- */

static int64_t next_boundary(struct npu_hw *hw)
{
    int64_t t = NEVER;
    for (uint32_t d = 0; d < hw->ndev; d++)
        for (uint32_t c = 0; c < hw->dev[d].cfg.channel_count; c++) {
            struct channel *ch = &hw->dev[d].ch[c];
            if (ch->state != CH_IDLE && ch->busy_until < t)
                t = ch->busy_until;
        }
    return t;
}

static int64_t next_step(struct npu_hw *hw)
{
    int64_t t = next_boundary(hw), tc = next_thermal_crossing(hw);
    return tc < t ? tc : t;
}

static void advance_locked(struct npu_hw *hw, int64_t target)
{
    for (;;) {
        int64_t t = next_step(hw);
        if (t == NEVER || t > target)
            break;
        hw->vnow = t;
        thermal_update(hw, t);
        for (uint32_t d = 0; d < hw->ndev; d++)
            for (uint32_t c = 0; c < hw->dev[d].cfg.channel_count; c++) {
                struct channel *ch = &hw->dev[d].ch[c];
                if (ch->state != CH_IDLE && ch->busy_until == t)
                    channel_boundary(hw, ch, t);
            }
    }
    if (target > hw->vnow)
        hw->vnow = target;
    thermal_update(hw, hw->vnow);
}

int npu_hw_advance(struct npu_hw *hw, int64_t ns)
{
    if (hw->opt.clock != NPU_CLOCK_VIRTUAL)
        return NPU_E_WRONG_CLOCK;
    if (ns < 0)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    int64_t target = ns > NEVER - 1 - hw->vnow ? NEVER - 1 : hw->vnow + ns;
    advance_locked(hw, target);
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

int npu_hw_advance_to_next_event(struct npu_hw *hw, int64_t *now_ns)
{
    if (hw->opt.clock != NPU_CLOCK_VIRTUAL)
        return NPU_E_WRONG_CLOCK;
    pthread_mutex_lock(&hw->lock);
    int64_t t = next_step(hw);
    if (t != NEVER)
        advance_locked(hw, t);
    if (now_ns)
        *now_ns = hw->vnow;
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

int npu_hw_next_event_ns(struct npu_hw *hw, int64_t *at_ns)
{
    if (hw->opt.clock != NPU_CLOCK_VIRTUAL)
        return NPU_E_WRONG_CLOCK;
    if (!at_ns)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    int64_t t = next_step(hw);
    *at_ns = t == NEVER ? -1 : t;
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

int npu_hw_run_until_idle(struct npu_hw *hw, int64_t max_ns)
{
    if (hw->opt.clock != NPU_CLOCK_VIRTUAL)
        return NPU_E_WRONG_CLOCK;
    if (max_ns < 0)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    int64_t limit = max_ns == 0 || max_ns > NEVER - 1 - hw->vnow ? NEVER - 1 : hw->vnow + max_ns;
    for (;;) {
        int64_t t = next_boundary(hw);
        if (t == NEVER)
            break;
        if (t > limit) {
            advance_locked(hw, limit);
            break;
        }
        advance_locked(hw, t);
    }
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

/* ---- the real clock ---- */

/* Real clock: how long (wall ns) before a boundary that a job waits for the
 * worker stops sleeping and spins to it.  A timed sleep wakes tens of
 * microseconds late (timer interrupt, wake-up, context switch: a p90 of about
 * 30 us on a 2-vCPU VM, timer slack 1 ns); the spin, spent only where a job
 * waits for this very boundary, takes that out of the job's wait. */
enum { SPIN_BEFORE_WALL_NS = 100000 };

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Whether a job waits for the channel's next boundary: a queued job that
 * preempts there, the preemptor whose way this context save clears, or a
 * queued job that takes the channel when its job ends there. */
static bool boundary_awaited(struct npu_hw *hw, struct channel *ch)
{
    if (ch->state == CH_SAVING)
        return ch->claim || queue_best(hw, ch->dev);
    struct job *j = ch->job;
    if (ch->state != CH_RUNNING || !j)
        return false;
    if (j->pending_end >= 0 || !j->model->live || j->next_slice + 1 >= j->plan->slice_count)
        return queue_best(hw, ch->dev) != NULL;
    return preemptor(hw, ch) != NULL;
}

/* Whether the worker may compute the running slice before its boundary: not
 * if the job is to end there anyway, or the channel is hung. */
static bool slice_to_compute_ahead(const struct channel *ch)
{
    const struct job *j = ch->job;
    return ch->state == CH_RUNNING && j && !ch->ahead && !ch->hung && ch->busy_until != NEVER &&
           j->pending_end < 0 && j->model->live && !ch->dev->fail_next;
}

static void *channel_thread(void *arg)
{
    struct channel *ch = arg;
    struct npu_hw *hw = ch->hw;
#ifdef __linux__
    /* Wake at the deadline, not up to the default 50 us after it: a
     * preemptor waits for exactly this wake-up. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
    pthread_mutex_lock(&hw->lock);
    while (!hw->stop) {
        if (slice_to_compute_ahead(ch)) {
            /* The slice's real computation happens during its emulated time;
             * cancel, reset and unload see `computing` and wait or defer. */
            struct job *j = ch->job;
            ch->computing = true;
            pthread_mutex_unlock(&hw->lock);
            int rc = npu_plan_run_slice(j->plan, j->next_slice, j->arena, j->in, j->out, NULL, 0);
            pthread_mutex_lock(&hw->lock);
            ch->computing = false;
            ch->ahead = true;
            /* an operation that refused its values (data-dependent checks) fails the work */
            if (rc != NPU_OK && j->pending_end < 0)
                j->pending_end = NPU_END_REASON_FAILED;
            pthread_cond_broadcast(&hw->cond);
            continue;
        }
        if (ch->state != CH_IDLE && ch->busy_until != NEVER) {
            int64_t now = hw_now(hw);
            if (now >= ch->busy_until) {
                thermal_update(hw, now);
                channel_boundary(hw, ch, ch->busy_until);
                continue;
            }
            bool awaited = boundary_awaited(hw, ch);
            int64_t spin_emu = (int64_t)((double)SPIN_BEFORE_WALL_NS / hw->opt.speed_factor);
            if (awaited && ch->busy_until - now <= spin_emu) {
                /* Unlocked, so that submitters do not wait for us; the loop
                 * looks at the channel afresh after it. */
                int64_t until = ch->busy_until;
                pthread_mutex_unlock(&hw->lock);
                while (hw_now(hw) < until)
                    cpu_relax();
                pthread_mutex_lock(&hw->lock);
                continue;
            }
            struct timespec ts = wall_deadline(hw, awaited ? ch->busy_until - spin_emu : ch->busy_until);
            pthread_cond_timedwait(&ch->wake, &hw->lock, &ts);
        } else {
            pthread_cond_wait(&ch->wake, &hw->lock);
        }
    }
    pthread_mutex_unlock(&hw->lock);
    return NULL;
}

/* Cooling is reported even when no channel has anything to do. */
static void *thermal_thread(void *arg)
{
    struct npu_hw *hw = arg;
    pthread_mutex_lock(&hw->lock);
    while (!hw->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&hw->thermal_wake, &hw->lock, &ts);
        if (!hw->stop)
            thermal_update(hw, hw_now(hw));
    }
    pthread_mutex_unlock(&hw->lock);
    return NULL;
}

/* ---- lifecycle ---- */

int npu_hw_create(const struct npu_hw_options *in, struct npu_hw **out)
{
    if (!in || !out)
        return NPU_E_INVALID_ARGUMENT;
    *out = NULL;
    struct npu_hw_options o = *in;
    static const float default_thresholds[6] = {45, 55, 65, 75, 85, 95};
    if (o.clock == 0)
        o.clock = NPU_CLOCK_VIRTUAL;
    if (o.clock != NPU_CLOCK_VIRTUAL && o.clock != NPU_CLOCK_REAL)
        return NPU_E_INVALID_ARGUMENT;
    if (o.speed_factor == 0)
        o.speed_factor = 1.0;
    if (!(o.speed_factor > 0) || !isfinite(o.speed_factor))
        return NPU_E_INVALID_ARGUMENT;
    bool all_zero = true;
    for (int i = 0; i < 6; i++)
        all_zero &= o.thresholds_c[i] == 0;
    if (all_zero)
        memcpy(o.thresholds_c, default_thresholds, sizeof default_thresholds);
    if (o.ambient_c == 0)
        o.ambient_c = 25;
    for (int i = 0; i < 6; i++)
        if (!isfinite(o.thresholds_c[i]) || (i > 0 && !(o.thresholds_c[i] > o.thresholds_c[i - 1])))
            return NPU_E_INVALID_ARGUMENT;
    if (!isfinite(o.ambient_c) || o.ambient_c >= o.thresholds_c[0])
        return NPU_E_INVALID_ARGUMENT;
    if (o.time_constant_ms == 0)
        o.time_constant_ms = 2000;
    if (!(o.time_constant_ms > 0) || !isfinite(o.time_constant_ms))
        return NPU_E_INVALID_ARGUMENT;
    if (o.slices_per_operation == 0)
        o.slices_per_operation = 4;
    if (o.slices_per_operation > 4096)
        return NPU_E_INVALID_ARGUMENT;

    struct npu_hw *hw = calloc(1, sizeof *hw);
    if (!hw)
        return NPU_E_NO_MEMORY;
    hw->opt = o;
    hw->next_id = 1;
    hw->preempt_mode = NPU_PREEMPT_CHECKPOINT;
    hw->sched_mode = NPU_SCHED_PRIORITY;
    hw->temp = o.ambient_c;
    int rc = npu_ring_init(&hw->ring);
    if (rc != NPU_OK) {
        free(hw);
        return rc;
    }
    if (pthread_condattr_init(&hw->mono) != 0) {
        npu_ring_fini(&hw->ring);
        free(hw);
        return NPU_E_SYSTEM_ERROR;
    }
    pthread_condattr_setclock(&hw->mono, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&hw->lock, NULL) != 0 || pthread_cond_init(&hw->cond, &hw->mono) != 0 ||
        pthread_cond_init(&hw->thermal_wake, &hw->mono) != 0) {
        pthread_condattr_destroy(&hw->mono);
        npu_ring_fini(&hw->ring);
        free(hw);
        return NPU_E_SYSTEM_ERROR;
    }
    clock_gettime(CLOCK_MONOTONIC, &hw->start);
    *out = hw;
    return NPU_OK;
}

static void stop_threads(struct npu_hw *hw)
{
    pthread_mutex_lock(&hw->lock);
    hw->stop = true;
    pthread_cond_broadcast(&hw->cond);
    pthread_cond_signal(&hw->thermal_wake);
    for (uint32_t d = 0; d < hw->ndev; d++)
        for (uint32_t c = 0; c < hw->dev[d].cfg.channel_count; c++)
            pthread_cond_signal(&hw->dev[d].ch[c].wake);
    pthread_mutex_unlock(&hw->lock);
    for (uint32_t d = 0; d < hw->ndev; d++)
        for (uint32_t c = 0; c < hw->dev[d].cfg.channel_count; c++)
            if (hw->dev[d].ch[c].thread_started) {
                pthread_join(hw->dev[d].ch[c].thread, NULL);
                hw->dev[d].ch[c].thread_started = false;
            }
    if (hw->thermal_started) {
        pthread_join(hw->thermal_thread, NULL);
        hw->thermal_started = false;
    }
}

int npu_hw_start(struct npu_hw *hw)
{
    pthread_mutex_lock(&hw->lock);
    hw->started = true;
    pthread_mutex_unlock(&hw->lock);
    if (hw->opt.clock != NPU_CLOCK_REAL)
        return NPU_OK;
    for (uint32_t d = 0; d < hw->ndev; d++)
        for (uint32_t c = 0; c < hw->dev[d].cfg.channel_count; c++) {
            struct channel *ch = &hw->dev[d].ch[c];
            if (pthread_create(&ch->thread, NULL, channel_thread, ch) != 0) {
                stop_threads(hw);
                return NPU_E_SYSTEM_ERROR;
            }
            ch->thread_started = true;
        }
    if (pthread_create(&hw->thermal_thread, NULL, thermal_thread, hw) != 0) {
        stop_threads(hw);
        return NPU_E_SYSTEM_ERROR;
    }
    hw->thermal_started = true;
    return NPU_OK;
}

void npu_hw_destroy(struct npu_hw *hw)
{
    if (!hw)
        return;
    stop_threads(hw);
    pthread_mutex_lock(&hw->lock);
    while (hw->jobs) {
        struct job *j = hw->jobs;
        if (j->ch)
            channel_release(j->ch);
        job_end(hw, j, NPU_END_REASON_CANCELLED_SYSTEM);
    }
    pthread_mutex_unlock(&hw->lock);
    for (uint32_t i = 0; i < hw->nmodels; i++)
        if (hw->models[i]) {
            npu_plan_destroy(hw->models[i]->plan);
            free(hw->models[i]->spare_arena);
            free(hw->models[i]);
        }
    free(hw->models);
    for (uint32_t d = 0; d < hw->ndev; d++) {
        free(hw->dev[d].queue);
        for (uint32_t c = 0; c < hw->dev[d].cfg.channel_count; c++)
            pthread_cond_destroy(&hw->dev[d].ch[c].wake);
    }
    pthread_cond_destroy(&hw->cond);
    pthread_cond_destroy(&hw->thermal_wake);
    pthread_condattr_destroy(&hw->mono);
    pthread_mutex_destroy(&hw->lock);
    npu_ring_fini(&hw->ring);
    free(hw->prof);
    free(hw);
}

struct npu_ring *npu_hw_ring(struct npu_hw *hw) { return &hw->ring; }
int32_t npu_hw_clock(struct npu_hw *hw) { return hw->opt.clock; }

int npu_hw_set_profiling(struct npu_hw *hw, uint32_t capacity)
{
    if (!hw)
        return NPU_E_INVALID_ARGUMENT;
    struct npu_slice_record *buf = NULL;
    if (capacity && !(buf = malloc((size_t)capacity * sizeof *buf)))
        return NPU_E_NO_MEMORY;
    pthread_mutex_lock(&hw->lock);
    struct npu_slice_record *old = hw->prof;
    hw->prof = buf;
    hw->prof_cap = capacity;
    hw->prof_head = hw->prof_count = 0;
    hw->prof_dropped = 0;
    pthread_mutex_unlock(&hw->lock);
    free(old);
    return NPU_OK;
}

int npu_hw_drain_slices(struct npu_hw *hw, struct npu_slice_record *out, uint32_t max, uint32_t *count,
                        uint64_t *dropped)
{
    if (!hw || !count || (max && !out))
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    uint32_t n = hw->prof_count < max ? hw->prof_count : max;
    for (uint32_t i = 0; i < n; i++)
        out[i] = hw->prof[(hw->prof_head + i) % hw->prof_cap];
    if (n) {
        hw->prof_head = (hw->prof_head + n) % hw->prof_cap;
        hw->prof_count -= n;
    }
    *count = n;
    if (dropped) {
        *dropped = hw->prof_dropped;
        hw->prof_dropped = 0;
    }
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

/* ---- the driver-facing API ---- */

static int api_add_device(struct npu_hw *hw, const struct npu_hw_device_config *cfg, uint32_t *index)
{
    if (!hw || !cfg || !index)
        return NPU_E_INVALID_ARGUMENT;
    for (int c = 0; c < NPU_COMPUTE_CLASS_COUNT; c++)
        if (!(cfg->flops_per_ns[c] >= 0) || !isfinite(cfg->flops_per_ns[c]))
            return NPU_E_INVALID_ARGUMENT;
    if (cfg->channel_count < 1 || cfg->channel_count > NPU_HW_MAX_CHANNELS ||
        !(cfg->flops_per_ns[NPU_COMPUTE_FLOAT32] > 0) ||
        !(cfg->bytes_per_ns > 0) || cfg->slice_overhead_ns < 0 || cfg->context_save_fixed_ns < 0 ||
        !isfinite(cfg->heat_rise_c) || cfg->heat_rise_c < 0)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    int rc = NPU_OK;
    if (hw->started)
        rc = NPU_E_INVALID_ARGUMENT; /* devices are fixed once the driver's init returned */
    else if (hw->ndev == NPU_HW_MAX_DEVICES)
        rc = NPU_E_TOO_MANY;
    if (rc == NPU_OK) {
        struct device *d = &hw->dev[hw->ndev];
        memset(d, 0, sizeof *d);
        d->cfg = *cfg;
        d->cfg.name[NPU_HW_NAME_MAX - 1] = '\0';
        d->index = hw->ndev;
        uint32_t c = 0;
        for (; c < cfg->channel_count; c++) {
            d->ch[c].dev = d;
            d->ch[c].index = c;
            d->ch[c].hw = hw;
            if (pthread_cond_init(&d->ch[c].wake, &hw->mono) != 0)
                break;
        }
        if (c < cfg->channel_count) {
            while (c--)
                pthread_cond_destroy(&d->ch[c].wake);
            rc = NPU_E_SYSTEM_ERROR;
        } else {
            *index = hw->ndev++;
        }
    }
    pthread_mutex_unlock(&hw->lock);
    return rc;
}

/* The live model of a handle, or NULL (never loaded, unloaded, or being unloaded). */
static struct model *find_model(struct npu_hw *hw, uint32_t handle)
{
    if (handle == 0 || handle > hw->nmodels || !hw->models[handle - 1] || !hw->models[handle - 1]->live)
        return NULL;
    return hw->models[handle - 1];
}

static int api_load_model(struct npu_hw *hw, uint32_t dev, int32_t device_number, const struct npu_model *model,
                          const struct npu_load_params *params, uint32_t *handle)
{
    if (!hw || !model || !handle)
        return NPU_E_INVALID_ARGUMENT;
    struct npu_load_params p = {0};
    if (params)
        p = *params;
    if (p.cost_scale == 0)
        p.cost_scale = 1.0;
    if (!(p.cost_scale > 0) || !isfinite(p.cost_scale))
        return NPU_E_INVALID_ARGUMENT;
    struct npu_plan *plan;
    int rc = npu_plan_create(model, hw->opt.slices_per_operation, &plan);
    if (rc != NPU_OK)
        return rc;
    uint64_t weight = p.emulated_weight_bytes ? p.emulated_weight_bytes : plan->const_bytes;
    uint64_t sram = p.emulated_sram_bytes ? p.emulated_sram_bytes : plan->temp_bytes;
    struct model *m = calloc(1, sizeof *m);
    if (!m) {
        npu_plan_destroy(plan);
        return NPU_E_NO_MEMORY;
    }
    pthread_mutex_lock(&hw->lock);
    if (dev >= hw->ndev) {
        rc = NPU_E_BAD_DEVICE;
        goto fail;
    }
    struct device *d = &hw->dev[dev];
    if (weight > d->cfg.weight_memory_bytes - d->weight_used) {
        rc = NPU_E_WEIGHT_MEMORY_FULL;
        emit_memory(hw, d, device_number, rc);
        goto fail;
    }
    if (sram > d->cfg.sram_bytes - d->sram_used) {
        rc = NPU_E_SRAM_FULL;
        emit_memory(hw, d, device_number, rc);
        goto fail;
    }
    if (hw->nmodels == UINT32_MAX) {
        rc = NPU_E_TOO_MANY;
        goto fail;
    }
    if (hw->nmodels == hw->models_cap) {
        /* moves the pointers only: jobs keep pointing at their models */
        uint32_t ncap = hw->models_cap ? (hw->models_cap > UINT32_MAX / 2 ? UINT32_MAX : hw->models_cap * 2) : 16;
        struct model **nm = realloc(hw->models, (size_t)ncap * sizeof *nm);
        if (!nm) {
            rc = NPU_E_NO_MEMORY;
            goto fail;
        }
        hw->models = nm;
        hw->models_cap = ncap;
    }
    hw->models[hw->nmodels++] = m;
    m->live = true;
    m->dev = dev;
    m->device_number = device_number;
    m->plan = plan;
    m->weight = weight;
    m->sram = sram;
    m->cost_scale = p.cost_scale;
    m->streamed_bytes_per_slice =
        weight > plan->const_bytes && plan->slice_count ? (double)(weight - plan->const_bytes) / plan->slice_count : 0.0;
    m->jobs = 0;
    d->weight_used += weight;
    d->sram_used += sram;
    d->models++;
    *handle = hw->nmodels; /* index + 1: 0 is never a handle */
    emit_memory(hw, d, device_number, NPU_OK);
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
fail:
    pthread_mutex_unlock(&hw->lock);
    npu_plan_destroy(plan);
    free(m);
    return rc;
}

static int api_unload_model(struct npu_hw *hw, uint32_t handle)
{
    if (!hw)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    struct model *m = find_model(hw, handle);
    if (!m) {
        pthread_mutex_unlock(&hw->lock);
        return NPU_E_BAD_MODEL_ID;
    }
    int64_t now = hw_now(hw);
    thermal_update(hw, now);
    /* Mark first, so nobody starts this model's work while we wait. */
    m->live = false;
    for (;;) {
        bool busy = false;
        for (struct job *j = hw->jobs; j; j = j->next_all)
            if (j->model == m && j->ch && j->ch->computing)
                busy = true;
        if (!busy)
            break;
        pthread_cond_wait(&hw->cond, &hw->lock);
    }
    struct device *d = &hw->dev[m->dev];
    for (struct job *j = hw->jobs, *next; j; j = next) {
        next = j->next_all;
        if (j->model != m)
            continue;
        if (j->ch) {
            struct channel *ch = j->ch;
            if (ch->state == CH_SAVING)
                ch->job = NULL; /* the save still takes its time */
            else
                channel_release(ch);
        }
        job_end(hw, j, NPU_END_REASON_CANCELLED_SYSTEM);
    }
    d->weight_used -= m->weight;
    d->sram_used -= m->sram;
    d->models--;
    /* No job refers to m any more (all ended above, none can start: !live). */
    emit_memory(hw, d, m->device_number, NPU_OK);
    hw->models[handle - 1] = NULL;
    npu_plan_destroy(m->plan);
    free(m->spare_arena);
    free(m);
    device_dispatch(hw, d, now);
    pthread_cond_broadcast(&hw->cond);
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

static int api_submit(struct npu_hw *hw, uint32_t handle, int32_t key, const struct npu_work_info *info,
                      const struct npu_buffer *in, const struct npu_shape *in_shapes, uint32_t n_in,
                      const struct npu_buffer *out, struct npu_shape *out_shapes, uint32_t n_out, int32_t *work_id)
{
    if (!hw || !info || !work_id)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    int rc = NPU_OK;
    struct model *m = find_model(hw, handle);
    struct job *j = NULL;
    if (!m) {
        rc = NPU_E_BAD_MODEL_ID;
        goto out;
    }
    if (hw->severity == NPU_THERMAL_SHUTDOWN) {
        rc = NPU_E_OFFLINE;
        goto out;
    }
    struct npu_plan *run;
    rc = npu_plan_begin(m->plan, in, in_shapes, n_in, out, out_shapes, n_out, &run, NULL, 0);
    if (rc != NPU_OK)
        goto out;
    j = calloc(1, sizeof *j);
    if (j) {
        j->in = malloc((n_in ? n_in : 1) * sizeof *j->in);
        j->out = malloc((n_out ? n_out : 1) * sizeof *j->out);
    }
    if (!j || !j->in || !j->out) {
        if (j) {
            free(j->in);
            free(j->out);
            free(j);
        }
        npu_plan_end(m->plan, run);
        rc = NPU_E_NO_MEMORY;
        goto out;
    }
    if (n_in)
        memcpy(j->in, in, n_in * sizeof *in);
    memcpy(j->out, out, n_out * sizeof *out);
    j->n_in = n_in, j->n_out = n_out;
    j->model = m;
    j->plan = run;
    j->out_shapes = out_shapes;
    j->key = key;
    j->pending_end = -1;
    j->info = *info;
    j->info.debug_feature_id[NPU_FEATURE_ID_MAX - 1] = '\0';
    j->info.id = hw->next_id++;
    j->info.effective_priority = key;
    j->seq = hw->next_seq++;
    struct device *d = &hw->dev[m->dev];
    if (queue_push(d, j) != NPU_OK) {
        npu_plan_end(m->plan, run);
        free(j->in);
        free(j->out);
        free(j);
        rc = NPU_E_NO_MEMORY;
        goto out;
    }
    m->jobs++;
    j->next_all = hw->jobs;
    hw->jobs = j;
    *work_id = j->info.id;
    int64_t now = hw_now(hw);
    thermal_update(hw, now);
    emit_work(hw, NPU_EVENT_WORK_REQUESTED, 0, j);
    device_dispatch(hw, d, now);
    /* The device's busy workers sleep towards their next boundary; the new job
     * may wait for one of them now (to preempt there, or to follow): let them
     * plan the wake-up afresh (see boundary_awaited). */
    for (uint32_t c = 0; c < d->cfg.channel_count; c++)
        if (d->ch[c].state != CH_IDLE)
            pthread_cond_signal(&d->ch[c].wake);
out:
    pthread_mutex_unlock(&hw->lock);
    return rc;
}

static int api_cancel(struct npu_hw *hw, int32_t id)
{
    if (!hw)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    struct job *j = hw->jobs;
    while (j && j->info.id != id)
        j = j->next_all;
    if (!j || j->pending_end >= 0) {
        pthread_mutex_unlock(&hw->lock);
        return NPU_E_BAD_WORK_ID;
    }
    int64_t now = hw_now(hw);
    thermal_update(hw, now);
    struct device *d = job_device(hw, j);
    struct channel *ch = j->ch;
    if (!ch) {
        job_end(hw, j, NPU_END_REASON_CANCELLED_USER);
    } else if (ch->computing) {
        j->pending_end = NPU_END_REASON_CANCELLED_USER;
    } else {
        if (ch->state == CH_SAVING)
            ch->job = NULL;
        else
            channel_release(ch);
        job_end(hw, j, NPU_END_REASON_CANCELLED_USER);
        device_dispatch(hw, d, now);
    }
    pthread_cond_broadcast(&hw->cond);
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

static int api_set_preemption_mode(struct npu_hw *hw, int32_t mode)
{
    if (!hw || mode < NPU_PREEMPT_NONE || mode > NPU_PREEMPT_KILL_RESTART)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    hw->preempt_mode = mode;
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

static int api_set_scheduling_mode(struct npu_hw *hw, int32_t mode)
{
    if (!hw || (mode != NPU_SCHED_PRIORITY && mode != NPU_SCHED_FCFS))
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    hw->sched_mode = mode;
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

static int api_inject_fault(struct npu_hw *hw, const struct npu_fault *f)
{
    if (!hw || !f)
        return NPU_E_INVALID_ARGUMENT;
    if (f->kind == NPU_FAULT_CRASH)
        abort(); /* what a driver bug does to the HAL process; the framework must survive it */
    pthread_mutex_lock(&hw->lock);
    int rc = NPU_OK;
    int64_t now = hw_now(hw);
    thermal_update(hw, now);
    if (f->kind == NPU_FAULT_HEAT_SPIKE) {
        if (!isfinite(f->heat_c))
            rc = NPU_E_INVALID_ARGUMENT;
        else {
            hw->temp += f->heat_c;
            thermal_set_severity(hw);
        }
    } else if (f->device >= hw->ndev) {
        rc = NPU_E_BAD_DEVICE;
    } else if (f->kind == NPU_FAULT_FAIL_NEXT_WORK) {
        hw->dev[f->device].fail_next = true;
    } else if (f->kind == NPU_FAULT_HANG_CHANNEL) {
        struct device *d = &hw->dev[f->device];
        if (f->channel >= d->cfg.channel_count)
            rc = NPU_E_BAD_CHANNEL;
        else {
            struct channel *ch = &d->ch[f->channel];
            ch->hung = true;
            if (ch->state == CH_RUNNING && !ch->computing)
                ch->busy_until = NEVER;
        }
    } else {
        rc = NPU_E_INVALID_ARGUMENT;
    }
    pthread_cond_broadcast(&hw->cond);
    pthread_mutex_unlock(&hw->lock);
    return rc;
}

static int api_reset_channel(struct npu_hw *hw, uint32_t dev, uint32_t channel)
{
    if (!hw)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    int rc = NPU_OK;
    if (dev >= hw->ndev)
        rc = NPU_E_BAD_DEVICE;
    else if (channel >= hw->dev[dev].cfg.channel_count)
        rc = NPU_E_BAD_CHANNEL;
    else if (!hw->dev[dev].ch[channel].hung)
        rc = NPU_E_NOT_HUNG;
    if (rc == NPU_OK) {
        struct device *d = &hw->dev[dev];
        struct channel *ch = &d->ch[channel];
        int64_t now = hw_now(hw);
        thermal_update(hw, now);
        ch->hung = false;
        struct job *j = ch->job;
        if (j && ch->computing) {
            j->pending_end = NPU_END_REASON_FAILED;
        } else if (j && ch->state == CH_RUNNING) {
            channel_release(ch);
            job_end(hw, j, NPU_END_REASON_FAILED);
        }
        device_dispatch(hw, d, now);
        pthread_cond_broadcast(&hw->cond);
    }
    pthread_mutex_unlock(&hw->lock);
    return rc;
}

static int api_device_state(struct npu_hw *hw, uint32_t dev, struct npu_hw_device_state *out)
{
    if (!hw || !out)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    int rc = NPU_OK;
    if (dev >= hw->ndev) {
        rc = NPU_E_BAD_DEVICE;
    } else {
        struct device *d = &hw->dev[dev];
        memset(out, 0, sizeof *out);
        out->weight_memory_used = d->weight_used;
        out->weight_memory_total = d->cfg.weight_memory_bytes;
        out->sram_used = d->sram_used;
        out->sram_total = d->cfg.sram_bytes;
        out->channel_count = d->cfg.channel_count;
        out->queued_jobs = (uint32_t)d->qlen;
        for (uint32_t c = 0; c < d->cfg.channel_count; c++) {
            out->busy_channels += d->ch[c].state != CH_IDLE;
            out->hung_channels += d->ch[c].hung;
        }
    }
    pthread_mutex_unlock(&hw->lock);
    return rc;
}

int npu_hw_thermal_override(struct npu_hw *hw, bool hold, double temperature_c)
{
    if (!hw || (hold && !isfinite(temperature_c)))
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    thermal_update(hw, hw_now(hw)); /* up to now under the old rule */
    hw->thermal_held = hold;
    if (hold) {
        hw->temp = temperature_c;
        thermal_set_severity(hw);
    }
    pthread_cond_broadcast(&hw->cond);
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

bool npu_hw_thermal_held(struct npu_hw *hw)
{
    if (!hw)
        return false;
    pthread_mutex_lock(&hw->lock);
    bool held = hw->thermal_held;
    pthread_mutex_unlock(&hw->lock);
    return held;
}

static int api_thermal_state(struct npu_hw *hw, int32_t *severity, float *temperature)
{
    if (!hw)
        return NPU_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&hw->lock);
    thermal_update(hw, hw_now(hw));
    if (severity)
        *severity = hw->severity;
    if (temperature)
        *temperature = (float)hw->temp;
    pthread_mutex_unlock(&hw->lock);
    return NPU_OK;
}

static int64_t api_now_ns(struct npu_hw *hw)
{
    pthread_mutex_lock(&hw->lock);
    int64_t t = hw_now(hw);
    pthread_mutex_unlock(&hw->lock);
    return t;
}

static void appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = buf && *len < cap ? buf + *len : NULL;
    size_t room = dst ? cap - *len : 0;
    int n = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

/* "512 B", "3.5 KiB", "2.0 GiB": sizes for people. */
static const char *human(char *buf, size_t cap, uint64_t bytes)
{
    static const char *const UNITS[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4)
        v /= 1024.0, u++;
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, cap, "%.1f %s", v, UNITS[u]);
    return buf;
}

static const char *const SEVERITY_NAMES[] = {"NONE", "LIGHT", "MODERATE", "SEVERE", "CRITICAL", "EMERGENCY", "SHUTDOWN"};
static const char *const PREEMPT_NAMES[] = {"?", "none", "checkpoint", "kill-restart"};

static void api_dump(struct npu_hw *hw, char *buf, size_t cap, size_t *len)
{
    if (!hw || !len)
        return;
    pthread_mutex_lock(&hw->lock);
    int64_t now = hw_now(hw);
    thermal_update(hw, now);
    appendf(buf, cap, len, "Emulated hardware (%s clock, now %.3f ms, preemption %s, scheduling %s)\n",
            hw->opt.clock == NPU_CLOCK_VIRTUAL ? "virtual" : "real", (double)now / 1e6,
            PREEMPT_NAMES[hw->preempt_mode], hw->sched_mode == NPU_SCHED_PRIORITY ? "priority" : "fcfs");
    appendf(buf, cap, len, "  Thermal: %.1f C, severity %s%s\n", hw->temp, SEVERITY_NAMES[hw->severity],
            hw->thermal_held ? " (held by an override)" : "");
    for (uint32_t i = 0; i < hw->ndev; i++) {
        struct device *d = &hw->dev[i];
        char wu[32], wt[32], su[32], stt[32];
        appendf(buf, cap, len, "  hw%u %-8s weights %s / %s  sram %s / %s  models %llu  queued %zu\n", i,
                d->cfg.name, human(wu, sizeof wu, d->weight_used), human(wt, sizeof wt, d->cfg.weight_memory_bytes),
                human(su, sizeof su, d->sram_used), human(stt, sizeof stt, d->cfg.sram_bytes),
                (unsigned long long)d->models, d->qlen);
        appendf(buf, cap, len, "      completed %llu  failed %llu  cancelled %llu  preemptions %llu  restarts %llu\n",
                (unsigned long long)d->completed, (unsigned long long)d->failed,
                (unsigned long long)d->cancelled, (unsigned long long)d->preemptions,
                (unsigned long long)d->restarts);
        for (uint32_t c = 0; c < d->cfg.channel_count; c++) {
            struct channel *ch = &d->ch[c];
            const char *st = ch->state == CH_IDLE ? "idle" : ch->state == CH_RUNNING ? "running" : "saving";
            appendf(buf, cap, len, "      ch%u %-8s%s", c, st, ch->hung ? " HUNG" : "");
            if (ch->job)
                appendf(buf, cap, len, " work %d (uid %d, prio %d, slice %u/%u)", ch->job->info.id,
                        ch->job->info.uid, ch->job->key, ch->job->next_slice, ch->job->plan->slice_count);
            appendf(buf, cap, len, "  slices %llu\n", (unsigned long long)ch->slices);
        }
    }
    pthread_mutex_unlock(&hw->lock);
}

static const struct npu_hw_api HW_API = {
    .abi_version = NPU_ABI_VERSION,
    .struct_size = sizeof(struct npu_hw_api),
    .add_device = api_add_device,
    .load_model = api_load_model,
    .unload_model = api_unload_model,
    .submit = api_submit,
    .cancel = api_cancel,
    .set_preemption_mode = api_set_preemption_mode,
    .set_scheduling_mode = api_set_scheduling_mode,
    .inject_fault = api_inject_fault,
    .reset_channel = api_reset_channel,
    .device_state = api_device_state,
    .thermal_state = api_thermal_state,
    .now_ns = api_now_ns,
    .validate_model = npu_model_validate,
    .check_support = npu_model_check_support,
    .dump = api_dump,
};

const struct npu_hw_api *npu_hw_api_table(void) { return &HW_API; }
