/*
 * What the deliberately broken drivers share: the template driver, included
 * whole, so that each broken driver is the template with exactly one thing
 * wrong and follows the template as it evolves.
 *
 * The template's entry point is renamed; BROKEN_DRIVER(patch) defines the real
 * one, which hands out a copy of the template's ops table after `patch` (a
 * statement over `ops`) has replaced what the driver gets wrong.  A driver that
 * breaks how it talks to the hardware instead wraps the npu_hw_api table in
 * its init (see broken_hw below).
 *
 * These drivers exist for tests/test_vts.py: each must fail `npuemu vts` on
 * the check that names its bug, and pass the others.
 */
#ifndef NPU_TESTS_BROKEN_H
#define NPU_TESTS_BROKEN_H

#include <math.h>
#include <signal.h>
#include <unistd.h>

#include "broken_hw.h"

#define npu_driver_entry template_driver_entry
#include "../../csrc/drivers/template/template.c"
#undef npu_driver_entry

#define BROKEN_DRIVER(patch)                                                                         \
    const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version); \
    const struct npu_driver_ops *npu_driver_entry(const struct npu_hw_api *hw, uint32_t abi_version)  \
    {                                                                                                \
        static struct npu_driver_ops ops; /* same contents on every call */                        \
        const struct npu_driver_ops *base = template_driver_entry(hw, abi_version);                  \
        if (base == NULL)                                                                            \
            return NULL;                                                                             \
        ops = *base;                                                                                 \
        patch;                                                                                       \
        return &ops;                                                                                 \
    }

/*
 * Init through a patched hardware table: `patch_hw` edits broken_hw, a copy of
 * the hardware's function table; real_hw is the original to call through.  One
 * system per process in these tests, so one static copy is enough.
 */
#define BROKEN_HW_INIT(patch_hw)                                                                     \
    static struct npu_hw_api broken_hw;                                                              \
    static const struct npu_hw_api *real_hw;                                                         \
    static struct tmpl *broken_instance; /* the driver's state, for a patched hw function */       \
    static int broken_init(const struct npu_hw_api *hw, struct npu_hw *h, void **out)               \
    {                                                                                                \
        real_hw = hw;                                                                                \
        broken_hw = *hw;                                                                             \
        patch_hw;                                                                                    \
        int rc = tmpl_init(&broken_hw, h, out);                                                      \
        if (rc == NPU_OK)                                                                            \
            broken_instance = *out;                                                                  \
        return rc;                                                                                   \
    }

/* A second device that is the template's first again: support and loads go to device 0. */
static inline int broken_supported_on_either(void *d, uint32_t dev, const struct npu_model *m, bool *supported)
{
    return tmpl_get_supported_operations(d, dev == 1 ? 0 : dev, m, supported);
}

static inline int broken_load_on_either(void *d, uint32_t dev, const struct npu_model *m,
                                        const struct npu_load_params *p, uint32_t *id)
{
    return tmpl_load_model(d, dev == 1 ? 0 : dev, m, p, id);
}

static inline uint32_t broken_two_devices(void *d)
{
    (void)d;
    return 2;
}

/*
 * A driver that stores every config after `edit` (a statement over `c`, one
 * config's copy) changed it, in set and update alike.
 */
#define BROKEN_CONFIGS(edit)                                                                          \
    static int edited_store(int (*store)(void *, const struct npu_scheduling_config *, uint32_t),      \
                            void *d, const struct npu_scheduling_config *given, uint32_t n)            \
    {                                                                                                 \
        struct npu_scheduling_config all[256];                                                        \
        if (n > 256)                                                                                  \
            return NPU_E_NO_MEMORY;                                                                   \
        for (uint32_t i = 0; i < n; i++) {                                                            \
            struct npu_scheduling_config *c = &all[i];                                                \
            *c = given[i];                                                                            \
            edit;                                                                                     \
        }                                                                                             \
        return store(d, all, n);                                                                      \
    }                                                                                                 \
    static int edited_set(void *d, const struct npu_scheduling_config *c, uint32_t n)                 \
    {                                                                                                 \
        return edited_store(tmpl_set_configs, d, c, n);                                               \
    }                                                                                                 \
    static int edited_update(void *d, const struct npu_scheduling_config *c, uint32_t n)              \
    {                                                                                                 \
        return edited_store(tmpl_update_configs, d, c, n);                                            \
    }                                                                                                 \
    BROKEN_DRIVER(ops.set_scheduling_configs = edited_set; ops.update_scheduling_configs = edited_update)

/* The config the template's submit uses for uid (the defaults when it has none). */
static inline struct npu_scheduling_config broken_config_for(const struct tmpl *t, int32_t uid)
{
    struct npu_scheduling_config c = {.min_priority = 0, .max_priority = 2000, .uid = uid,
                                      .app_priority = 1000, .has_direct_access = true};
    for (uint32_t i = 0; i < t->ncfg; i++)
        if (t->cfg[i].uid == uid)
            c = t->cfg[i];
    return c;
}

/*
 * A driver that computes the effective priority its own (wrong) way: `expr`, over
 * app, job, lo and hi (the uid's appPriority, the work's jobPriority, the uid's
 * minPriority and maxPriority), becomes the work's queue key and so its reported
 * effectivePriority.
 */
#define BROKEN_PRIORITY(expr)                                                                         \
    static int priority_submit(HW_SUBMIT_PARAMS);                                                     \
    BROKEN_HW_INIT(broken_hw.submit = priority_submit)                                                 \
    static int priority_submit(HW_SUBMIT_PARAMS)                                                      \
    {                                                                                                 \
        struct npu_scheduling_config c = broken_config_for(broken_instance, info->uid);               \
        int32_t app = c.app_priority, job = info->job_priority, lo = c.min_priority, hi = c.max_priority; \
        (void)key, (void)app, (void)job, (void)lo, (void)hi;                                           \
        return real_hw->submit(hw, handle, (expr), info, inputs, input_shapes, input_count, outputs, output_shapes, output_count,  \
                               work_id);                                                              \
    }                                                                                                 \
    BROKEN_DRIVER(ops.init = broken_init)

/*
 * A model a driver may rewrite before loading it: the operands and the constants'
 * bytes (operand values and pools) copied, so that the driver can change them.
 */
struct broken_model {
    struct npu_model m;
    struct npu_operand *operands;
    unsigned char *values;
    struct npu_pool *pools;
    unsigned char **pool_data;
};

static inline void broken_model_free(struct broken_model *b)
{
    for (uint32_t i = 0; b->pool_data && i < b->m.pool_count; i++)
        free(b->pool_data[i]);
    free(b->pool_data);
    free(b->pools);
    free(b->values);
    free(b->operands);
}

static inline int broken_model_copy(const struct npu_model *m, struct broken_model *b)
{
    memset(b, 0, sizeof *b);
    b->m = *m;
    b->operands = calloc(m->operand_count + 1, sizeof *b->operands);
    b->values = malloc(m->operand_values_length + 1);
    b->pools = calloc(m->pool_count + 1, sizeof *b->pools);
    b->pool_data = calloc(m->pool_count + 1, sizeof *b->pool_data);
    if (!b->operands || !b->values || !b->pools || !b->pool_data) {
        broken_model_free(b);
        return NPU_E_NO_MEMORY;
    }
    if (m->operand_count)
        memcpy(b->operands, m->operands, m->operand_count * sizeof *b->operands);
    if (m->operand_values_length)
        memcpy(b->values, m->operand_values, m->operand_values_length);
    for (uint32_t i = 0; i < m->pool_count; i++) {
        b->pool_data[i] = malloc(m->pools[i].length + 1);
        if (!b->pool_data[i]) {
            broken_model_free(b);
            return NPU_E_NO_MEMORY;
        }
        memcpy(b->pool_data[i], m->pools[i].data, m->pools[i].length);
        b->pools[i] = (struct npu_pool){b->pool_data[i], m->pools[i].length};
    }
    b->m.operands = b->operands;
    b->m.operand_values = b->values;
    b->m.pools = b->pools;
    return NPU_OK;
}

/* The bytes of constant operand i in the copy (NULL if it is not a constant in range). */
static inline unsigned char *broken_constant(struct broken_model *b, uint32_t i)
{
    const struct npu_operand *o = &b->operands[i];
    const struct npu_data_location *at = &o->location;
    if (o->lifetime == NPU_LIFETIME_CONSTANT_COPY && (size_t)at->offset + at->length <= b->m.operand_values_length)
        return b->values + at->offset;
    if (o->lifetime == NPU_LIFETIME_CONSTANT_REFERENCE && at->pool_index < b->m.pool_count &&
        (size_t)at->offset + at->length <= b->pools[at->pool_index].length)
        return b->pool_data[at->pool_index] + at->offset;
    return NULL;
}

#endif
