/*
 * A tiny self-contained test runner and a model builder for the C tests.
 * Each test is a void function; CHECK records the first failure and returns.
 * The runner prints one line per test and closes with exactly
 * "N passed, M failed" so CI can read it.
 */
#ifndef NPU_TESTLIB_H
#define NPU_TESTLIB_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/system.h"

extern const char *t_failure;
extern char t_failure_buf[512];

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            snprintf(t_failure_buf, sizeof t_failure_buf, "%s:%d: CHECK(%s)", __FILE__, __LINE__, #cond); \
            t_failure = t_failure_buf;                                                           \
            return;                                                                              \
        }                                                                                        \
    } while (0)

#define CHECK_RC(expr, want)                                                                     \
    do {                                                                                         \
        int rc_ = (expr);                                                                        \
        if (rc_ != (want)) {                                                                     \
            snprintf(t_failure_buf, sizeof t_failure_buf, "%s:%d: %s returned %s (%d), wanted %s", \
                     __FILE__, __LINE__, #expr, npu_error_name(rc_), rc_, npu_error_name(want));  \
            t_failure = t_failure_buf;                                                           \
            return;                                                                              \
        }                                                                                        \
    } while (0)

#define OK(expr) CHECK_RC(expr, NPU_OK)

/* ---- model builder ---- */
enum { MB_MAX = 64 };
struct mb {
    struct npu_operand opnd[MB_MAX];
    uint32_t dims[MB_MAX][NPU_MAX_RANK];
    uint32_t n;
    struct npu_operation ops[16];
    uint32_t opin[16][10];
    uint32_t opout[16][1];
    uint32_t nops;
    _Alignas(16) unsigned char values[1 << 20];
    size_t vlen;
    uint32_t ins[8], nin, outs[8], nout;
    struct npu_model m;
};

struct mb *mb_new(void);
uint32_t mb_tensor(struct mb *b, int32_t lifetime, uint32_t rank, const uint32_t *dims);
uint32_t mb_const(struct mb *b, uint32_t rank, const uint32_t *dims, const float *data);
uint32_t mb_i32(struct mb *b, int32_t v);
uint32_t mb_f32(struct mb *b, float v);
void mb_op(struct mb *b, int32_t type, uint32_t nin, const uint32_t *ins, uint32_t out);
struct npu_model *mb_model(struct mb *b);

/* A virtual-clock reference-driver system with optional overrides. */
struct npu_system *sys_new(int32_t clock, int32_t preempt);
/* Drains every pending event into a static buffer; returns how many. */
uint32_t drain(struct npu_system *s, struct npu_event **out);

#endif
