/*
 * The C layer's tests.  Virtual-clock tests pin behaviour exactly (event
 * order, reasons, times); the real-clock stress test is what `make tsan` runs.
 *
 *   npu_tests [--only SUBSTR] [--skip SUBSTR] [--driver-so PATH]
 */
#define _GNU_SOURCE
#include <float.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"
#include "../kernels/plan.h"

static const char *g_driver_so;

/* ---- helpers ---- */

static float frand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* A single elementwise op model: out = a OP b, n elements. */
static struct mb *binary_model(int32_t op, uint32_t n, int32_t fuse)
{
    struct mb *b = mb_new();
    uint32_t d[1] = {n};
    uint32_t a = mb_tensor(b, NPU_LIFETIME_MODEL_INPUT, 1, d);
    uint32_t c = mb_tensor(b, NPU_LIFETIME_MODEL_INPUT, 1, d);
    uint32_t f = mb_i32(b, fuse);
    uint32_t o = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 1, d);
    uint32_t ins[3] = {a, c, f};
    mb_op(b, op, 3, ins, o);
    return b;
}

/* FC(in->hidden) -> RELU -> FC(hidden->units): temporaries that a checkpoint
 * must save, and enough slices to preempt between. */
static struct mb *mlp_model(uint32_t in, uint32_t hidden, uint32_t units, unsigned seed)
{
    struct mb *b = mb_new();
    uint32_t din[2] = {1, in}, dw1[2] = {hidden, in}, db1[1] = {hidden}, dh[2] = {1, hidden};
    uint32_t dw2[2] = {units, hidden}, db2[1] = {units}, dout[2] = {1, units};
    float *w1 = malloc(sizeof(float) * hidden * in), *b1 = malloc(sizeof(float) * hidden);
    float *w2 = malloc(sizeof(float) * units * hidden), *b2 = malloc(sizeof(float) * units);
    for (uint32_t i = 0; i < hidden * in; i++)
        w1[i] = frand(&seed) * 0.1f;
    for (uint32_t i = 0; i < hidden; i++)
        b1[i] = frand(&seed);
    for (uint32_t i = 0; i < units * hidden; i++)
        w2[i] = frand(&seed) * 0.1f;
    for (uint32_t i = 0; i < units; i++)
        b2[i] = frand(&seed);
    uint32_t x = mb_tensor(b, NPU_LIFETIME_MODEL_INPUT, 2, din);
    uint32_t W1 = mb_const(b, 2, dw1, w1), B1 = mb_const(b, 1, db1, b1);
    uint32_t none = mb_i32(b, NPU_FUSE_NONE);
    uint32_t h = mb_tensor(b, NPU_LIFETIME_TEMPORARY_VARIABLE, 2, dh);
    uint32_t r = mb_tensor(b, NPU_LIFETIME_TEMPORARY_VARIABLE, 2, dh);
    uint32_t W2 = mb_const(b, 2, dw2, w2), B2 = mb_const(b, 1, db2, b2);
    uint32_t y = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 2, dout);
    uint32_t i1[4] = {x, W1, B1, none}, i2[1] = {h}, i3[4] = {r, W2, B2, none};
    mb_op(b, NPU_OP_FULLY_CONNECTED, 4, i1, h);
    mb_op(b, NPU_OP_RELU, 1, i2, r);
    mb_op(b, NPU_OP_FULLY_CONNECTED, 4, i3, y);
    free(w1), free(b1), free(w2), free(b2);
    return b;
}

static struct npu_work_request req(uint32_t model, int32_t uid, int32_t prio, struct npu_buffer *in,
                                   struct npu_buffer *out)
{
    return (struct npu_work_request){.model_id = model, .uid = uid, .original_uid = uid, .debug_pid = 4242,
                                     .job_priority = prio, .input_count = 1, .inputs = in,
                                     .output_count = 1, .outputs = out};
}

/* Finds the index of the first event of (type, work id[, reason]) at or after `from`. */
static int find_ev(struct npu_event *ev, uint32_t n, int32_t type, int32_t id, int32_t reason, uint32_t from)
{
    for (uint32_t i = from; i < n; i++)
        if (ev[i].type == type && ev[i].work.id == id && (reason < 0 || ev[i].reason == reason))
            return (int)i;
    return -1;
}

/* ---- running a model on the calling thread ---- */

static void test_run_model_matches_kernels(void)
{
    struct mb *b = binary_model(NPU_OP_MUL, 5, NPU_FUSE_NONE);
    float x[5] = {1, 2, 3, 4, 5}, y[5] = {2, 2, 2, 2, -1}, o[5] = {0};
    struct npu_buffer in[2] = {{x, sizeof x}, {y, sizeof y}}, out[1] = {{o, sizeof o}};
    int rc = npu_kernel_run_model(mb_model(b), in, 2, out, 1);
    free(b);
    OK(rc);
    CHECK(o[0] == 2 && o[3] == 8 && o[4] == -5);
    /* wrong buffer size is refused, not read past */
    struct mb *b2 = binary_model(NPU_OP_ADD, 5, NPU_FUSE_NONE);
    struct npu_buffer small[2] = {{x, 8}, {y, sizeof y}};
    rc = npu_kernel_run_model(mb_model(b2), small, 2, out, 1);
    free(b2);
    CHECK_RC(rc, NPU_E_BAD_BUFFER);
}

/* A model input of unspecified dimensions takes them at execution; the output's
 * follow, and a larger buffer than needed is fine, a smaller one is reported. */
static void test_run_model_shapes_at_execution(void)
{
    struct mb *b = binary_model(NPU_OP_ADD, 0, NPU_FUSE_NONE);
    const struct npu_model *m = mb_model(b);
    float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40}, o[5] = {0};
    struct npu_buffer in[2] = {{x, 3 * sizeof(float)}, {y, 3 * sizeof(float)}}, out[1] = {{o, sizeof o}};
    struct npu_shape given[2] = {{.rank = 1, .dims = {3}}, {.rank = 1, .dims = {3}}}, got[1];
    /* not given: the run cannot lay the inputs out */
    CHECK_RC(npu_kernel_run_model(m, in, 2, out, 1), NPU_E_BAD_SHAPE);
    OK(npu_kernel_run_model_shaped(m, in, given, 2, out, got, 1));
    CHECK(got[0].rank == 1 && got[0].dims[0] == 3 && got[0].sufficient);
    CHECK(o[0] == 11 && o[2] == 33 && o[3] == 0);
    /* another shape, same model */
    given[0].dims[0] = given[1].dims[0] = 4;
    in[0].length = in[1].length = sizeof x;
    OK(npu_kernel_run_model_shaped(m, in, given, 2, out, got, 1));
    CHECK(got[0].dims[0] == 4 && o[3] == 44);
    /* an output buffer too small: the needed dimensions come back */
    out[0].length = 2 * sizeof(float);
    CHECK_RC(npu_kernel_run_model_shaped(m, in, given, 2, out, got, 1), NPU_E_BUFFER_TOO_SMALL);
    CHECK(got[0].rank == 1 && got[0].dims[0] == 4 && !got[0].sufficient);
    out[0].length = sizeof o;
    /* dimensions that disagree with each other, with the buffer, with the model, or overflow */
    given[1].dims[0] = 3;
    CHECK_RC(npu_kernel_run_model_shaped(m, in, given, 2, out, got, 1), NPU_E_BAD_BUFFER);
    in[1].length = 3 * sizeof(float);
    CHECK_RC(npu_kernel_run_model_shaped(m, in, given, 2, out, got, 1), NPU_E_BAD_SHAPE);
    struct npu_shape rank2[2] = {{.rank = 2, .dims = {2, 2}}, {.rank = 2, .dims = {2, 2}}};
    CHECK_RC(npu_kernel_run_model_shaped(m, in, rank2, 2, out, got, 1), NPU_E_BAD_SHAPE);
    struct npu_shape zero[2] = {{.rank = 1, .dims = {0}}, {.rank = 1, .dims = {0}}};
    CHECK_RC(npu_kernel_run_model_shaped(m, in, zero, 2, out, got, 1), NPU_E_BAD_SHAPE);
    struct npu_shape huge[2] = {{.rank = 1, .dims = {UINT32_MAX}}, {.rank = 1, .dims = {UINT32_MAX}}};
    CHECK_RC(npu_kernel_run_model_shaped(m, in, huge, 2, out, got, 1), NPU_E_BAD_SHAPE);
    free(b);
    /* a fully declared model: given dimensions must be its own */
    struct mb *f = binary_model(NPU_OP_ADD, 4, NPU_FUSE_NONE);
    in[0].length = in[1].length = out[0].length = sizeof x;
    given[0].dims[0] = given[1].dims[0] = 4;
    OK(npu_kernel_run_model_shaped(mb_model(f), in, given, 2, out, got, 1));
    CHECK(got[0].rank == 1 && got[0].dims[0] == 4 && got[0].sufficient);
    given[0].dims[0] = 3;
    CHECK_RC(npu_kernel_run_model_shaped(mb_model(f), in, given, 2, out, got, 1), NPU_E_BAD_SHAPE);
    free(f);
}

static struct mb *abs_nms_model(uint32_t outs[4]);
static float nms_x[6], nms_rois[24];
static int32_t nms_batches[3];

/* A dynamic plan resolved from input shapes alone is kept per shape tuple: a
 * second run of the same shapes is served the same instance, other shapes get
 * their own, and one whose shapes need values is never kept. */
static void test_plan_instances_are_kept_per_input_shapes(void)
{
    struct mb *b = binary_model(NPU_OP_ADD, 0, NPU_FUSE_NONE);
    struct npu_plan *p, *r1, *r2, *r3;
    OK(npu_plan_create(mb_model(b), 2, &p));
    CHECK(p->dynamic && p->slice_count == 0);
    float x[4] = {0}, y[4] = {0}, o[4];
    struct npu_buffer in[2] = {{x, 8}, {y, 8}}, out[1] = {{o, sizeof o}};
    struct npu_shape two[2] = {{.rank = 1, .dims = {2}}, {.rank = 1, .dims = {2}}};
    struct npu_shape four[2] = {{.rank = 1, .dims = {4}}, {.rank = 1, .dims = {4}}};
    OK(npu_plan_begin(p, in, two, 2, out, NULL, 1, &r1, NULL, 0));
    npu_plan_end(p, r1);
    OK(npu_plan_begin(p, in, two, 2, out, NULL, 1, &r2, NULL, 0));
    CHECK(r1 == r2 && r1->cached && npu_plan_complete(r1) && r1->slice_count >= 1);
    npu_plan_end(p, r2);
    in[0].length = in[1].length = sizeof x;
    OK(npu_plan_begin(p, in, four, 2, out, NULL, 1, &r3, NULL, 0));
    CHECK(r3 != r1 && r3->operands[r3->outputs[0]].t.dims[0] == 4 && p->cache_count == 2);
    npu_plan_end(p, r3);
    npu_plan_destroy(p);  /* frees the kept instances (ASan checks) */
    free(b);
    uint32_t ids[4];
    struct mb *n = abs_nms_model(ids);
    OK(npu_plan_create(mb_model(n), 1, &p));
    float sc[3], bx[12];
    int32_t cl[3], bt[3];
    struct npu_buffer nin[3] = {{nms_x, sizeof nms_x}, {nms_rois, sizeof nms_rois}, {nms_batches, sizeof nms_batches}};
    struct npu_buffer nout[4] = {{sc, sizeof sc}, {bx, sizeof bx}, {cl, sizeof cl}, {bt, sizeof bt}};
    struct npu_shape given[3] = {{.rank = 2, .dims = {3, 2}}, {.rank = 2, .dims = {3, 8}}, {.rank = 1, .dims = {3}}};
    OK(npu_plan_begin(p, nin, given, 3, nout, NULL, 4, &r1, NULL, 0));
    CHECK(!npu_plan_complete(r1) && !r1->cached && p->cache_count == 0 && r1->resolved_ops == 1);
    npu_plan_end(p, r1);
    npu_plan_destroy(p);
    free(n);
}

/* The hardware runs a model whose input dimensions come with each submission:
 * each job gets its plan for its shapes and reports its output's. */
static void test_hw_shapes_at_submission(void)
{
    struct npu_system_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.slices_per_operation = 3;
    struct npu_system *s;
    OK(npu_system_create(&cfg, &s));
    struct mb *b = binary_model(NPU_OP_MUL, 0, NPU_FUSE_NONE);
    uint32_t model;
    OK(npu_system_load_model(s, 0, mb_model(b), NULL, &model));
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {2, 2, 2, 2, 2, 2}, o1[6] = {0}, o2[6] = {0};
    struct npu_buffer in1[2] = {{x, 2 * sizeof(float)}, {y, 2 * sizeof(float)}}, out1[1] = {{o1, sizeof o1}};
    struct npu_buffer in2[2] = {{x, sizeof x}, {y, sizeof y}}, out2[1] = {{o2, sizeof o2}};
    struct npu_shape two[2] = {{.rank = 1, .dims = {2}}, {.rank = 1, .dims = {2}}};
    struct npu_shape six[2] = {{.rank = 1, .dims = {6}}, {.rank = 1, .dims = {6}}};
    struct npu_shape got1[1], got2[1], got3[1];
    struct npu_work_request q1 = req(model, 1, 0, in1, out1), q2 = req(model, 1, 0, in2, out2);
    q1.input_count = q2.input_count = 2;
    q1.input_shapes = two, q1.output_shapes = got1;
    q2.input_shapes = six, q2.output_shapes = got2;
    int32_t id1, id2, id3;
    OK(npu_system_submit_work(s, &q1, &id1));
    OK(npu_system_submit_work(s, &q2, &id2));
    /* without the dimensions, or with a buffer too small, the submission is refused */
    struct npu_work_request bare = req(model, 1, 0, in2, out2);
    bare.input_count = 2;
    CHECK_RC(npu_system_submit_work(s, &bare, &id3), NPU_E_BAD_SHAPE);
    struct npu_buffer small[1] = {{o2, 3 * sizeof(float)}};
    struct npu_work_request q3 = req(model, 1, 0, in2, small);
    q3.input_count = 2, q3.input_shapes = six, q3.output_shapes = got3;
    CHECK_RC(npu_system_submit_work(s, &q3, &id3), NPU_E_BUFFER_TOO_SMALL);
    CHECK(got3[0].rank == 1 && got3[0].dims[0] == 6 && !got3[0].sufficient);
    OK(npu_system_run_until_idle(s, 0));
    struct npu_event *ev;
    uint32_t n = drain(s, &ev);
    CHECK(find_ev(ev, n, NPU_EVENT_WORK_ENDED, id1, NPU_END_REASON_COMPLETED, 0) >= 0);
    CHECK(find_ev(ev, n, NPU_EVENT_WORK_ENDED, id2, NPU_END_REASON_COMPLETED, 0) >= 0);
    CHECK(got1[0].rank == 1 && got1[0].dims[0] == 2 && got1[0].sufficient);
    CHECK(got2[0].rank == 1 && got2[0].dims[0] == 6 && got2[0].sufficient);
    CHECK(o1[0] == 2 && o1[1] == 4 && o1[2] == 0);
    CHECK(o2[0] == 2 && o2[5] == 12);
    npu_system_destroy(s);
    free(b);
}

/* ABS -> BOX_WITH_NMS_LIMIT: how many boxes the selection keeps depends on the
 * values ABS computes, so the plan knows NMS's outputs only once ABS has run
 * (a partial plan the runner continues).  Rows: N (given at execution). */
static struct mb *abs_nms_model(uint32_t outs[4])
{
    struct mb *b = mb_new();
    uint32_t ds[2] = {0, 2}, dr[2] = {0, 8}, db[1] = {0}, d1[1] = {0}, d2[2] = {0, 4};
    uint32_t x = mb_tensor(b, NPU_LIFETIME_MODEL_INPUT, 2, ds);
    uint32_t rois = mb_tensor(b, NPU_LIFETIME_MODEL_INPUT, 2, dr);
    uint32_t batches = mb_tensor(b, NPU_LIFETIME_MODEL_INPUT, 1, db);
    b->opnd[batches].type = NPU_OPERAND_TENSOR_INT32;
    uint32_t s = mb_tensor(b, NPU_LIFETIME_TEMPORARY_VARIABLE, 2, ds);
    uint32_t i_abs[1] = {x};
    mb_op(b, NPU_OP_ABS, 1, i_abs, s);
    uint32_t i_nms[9] = {s, rois, batches, mb_f32(b, 0.3f), mb_i32(b, -1), mb_i32(b, 0), mb_f32(b, 0.4f),
                         mb_f32(b, 1.0f), mb_f32(b, 0.3f)};
    outs[0] = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 1, d1);
    outs[1] = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 2, d2);
    outs[2] = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 1, d1);
    outs[3] = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 1, d1);
    b->opnd[outs[2]].type = b->opnd[outs[3]].type = NPU_OPERAND_TENSOR_INT32;
    mb_op(b, NPU_OP_BOX_WITH_NMS_LIMIT, 9, i_nms, outs[0]);
    b->ops[1].outputs = outs;
    b->ops[1].output_count = 4;
    return b;
}

/* Three boxes apart; |scores| of class 1 are 0.9, 0.2 and 0.5: two pass 0.3. */
static float nms_x[6] = {0, -0.9f, 0, 0.2f, 0, -0.5f};
static float nms_rois[24] = {0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3, 4, 4, 5, 5, 4, 4, 5, 5};
static int32_t nms_batches[3] = {0, 0, 0};

static void test_run_model_data_dependent_shapes(void)
{
    uint32_t ids[4];
    struct mb *b = abs_nms_model(ids);
    float sc[3] = {0}, bx[12] = {0};
    int32_t cl[3] = {0}, bt[3] = {0};
    struct npu_buffer in[3] = {{nms_x, sizeof nms_x}, {nms_rois, sizeof nms_rois}, {nms_batches, sizeof nms_batches}};
    struct npu_buffer out[4] = {{sc, sizeof sc}, {bx, sizeof bx}, {cl, sizeof cl}, {bt, sizeof bt}};
    struct npu_shape given[3] = {{.rank = 2, .dims = {3, 2}}, {.rank = 2, .dims = {3, 8}}, {.rank = 1, .dims = {3}}};
    struct npu_shape got[4];
    OK(npu_kernel_run_model_shaped(mb_model(b), in, given, 3, out, got, 4));
    CHECK(got[0].rank == 1 && got[0].dims[0] == 2 && got[1].rank == 2 && got[1].dims[0] == 2 && got[1].dims[1] == 4);
    CHECK(got[3].dims[0] == 2 && got[0].sufficient && got[1].sufficient);
    CHECK(fabsf(sc[0] - 0.9f) < 1e-6f && fabsf(sc[1] - 0.5f) < 1e-6f && cl[0] == 1 && bx[4] == 4);
    /* a buffer that holds one box is reported, with what it needs */
    out[0].length = sizeof(float);
    CHECK_RC(npu_kernel_run_model_shaped(mb_model(b), in, given, 3, out, got, 4), NPU_E_BUFFER_TOO_SMALL);
    CHECK(got[0].rank == 1 && got[0].dims[0] == 2 && !got[0].sufficient);
    free(b);
}

static void test_hw_data_dependent_shapes(void)
{
    if (!g_driver_so)
        return;  /* the reference driver's device 0 (emu-npu) claims neither ABS nor BOX_WITH_NMS_LIMIT; the template's claim all */
    struct npu_system_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.driver_path = g_driver_so;
    cfg.slices_per_operation = 2;
    struct npu_system *s;
    OK(npu_system_create(&cfg, &s));
    uint32_t ids[4], model;
    struct mb *b = abs_nms_model(ids);
    OK(npu_system_load_model(s, 0, mb_model(b), NULL, &model));
    float sc[3] = {0}, bx[12] = {0};
    int32_t cl[3] = {0}, bt[3] = {0};
    struct npu_buffer in[3] = {{nms_x, sizeof nms_x}, {nms_rois, sizeof nms_rois}, {nms_batches, sizeof nms_batches}};
    struct npu_buffer out[4] = {{sc, sizeof sc}, {bx, sizeof bx}, {cl, sizeof cl}, {bt, sizeof bt}};
    struct npu_buffer small[4] = {{sc, sizeof(float)}, {bx, sizeof bx}, {cl, sizeof cl}, {bt, sizeof bt}};
    struct npu_shape given[3] = {{.rank = 2, .dims = {3, 2}}, {.rank = 2, .dims = {3, 8}}, {.rank = 1, .dims = {3}}};
    struct npu_shape got[4], got_small[4];
    struct npu_work_request q = req(model, 1, 0, in, out), qs = req(model, 1, 0, in, small);
    q.input_count = qs.input_count = 3;
    q.output_count = qs.output_count = 4;
    q.input_shapes = qs.input_shapes = given;
    q.output_shapes = got, qs.output_shapes = got_small;
    int32_t id, id_small;
    OK(npu_system_submit_work(s, &q, &id));
    /* the count is not known at submission: the too-small buffer fails the work, later */
    OK(npu_system_submit_work(s, &qs, &id_small));
    OK(npu_system_run_until_idle(s, 0));
    struct npu_event *ev;
    uint32_t n = drain(s, &ev);
    CHECK(find_ev(ev, n, NPU_EVENT_WORK_ENDED, id, NPU_END_REASON_COMPLETED, 0) >= 0);
    CHECK(find_ev(ev, n, NPU_EVENT_WORK_ENDED, id_small, NPU_END_REASON_FAILED, 0) >= 0);
    CHECK(got[0].rank == 1 && got[0].dims[0] == 2 && got[0].sufficient && got[1].dims[0] == 2);
    CHECK(fabsf(sc[0] - 0.9f) < 1e-6f && fabsf(sc[1] - 0.5f) < 1e-6f && cl[1] == 1);
    CHECK(got_small[0].dims[0] == 2 && !got_small[0].sufficient);
    npu_system_destroy(s);
    free(b);
}

/* Runs m once on a virtual-clock system cutting each operation into up to
 * slices slices (one input, one output), to the end; dump (may be NULL)
 * receives the system's state after it.  NPU_OK or the first refusal. */
static int run_sliced(const struct npu_model *m, uint32_t slices, struct npu_buffer *in, struct npu_buffer *out,
                      char *dump, size_t dump_len)
{
    if (dump && dump_len)
        dump[0] = '\0';
    struct npu_system_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.slices_per_operation = slices;
    struct npu_system *s;
    int rc = npu_system_create(&cfg, &s);
    if (rc != NPU_OK)
        return rc;
    uint32_t model;
    int32_t id;
    rc = npu_system_load_model(s, 0, m, NULL, &model);
    if (rc == NPU_OK) {
        struct npu_work_request q = req(model, 1, 0, in, out);
        rc = npu_system_submit_work(s, &q, &id);
    }
    npu_system_run_until_idle(s, 0);
    size_t len;
    if (dump)
        npu_system_dump(s, dump, dump_len, &len);
    npu_system_destroy(s);
    return rc;
}

/* CONV_2D -> SOFTMAX -> SUB, cut into many slices by the hardware, gives the
 * same bits as one unsliced run on the calling thread. */
static void test_sliced_run_equals_whole_run(void)
{
    unsigned seed = 11;
    struct mb *b = mb_new();
    uint32_t din[4] = {2, 5, 6, 3}, df[4] = {4, 3, 2, 3}, db[1] = {4}, dout[4] = {2, 3, 3, 4};
    float filt[72], bias[4], k[72];
    for (int i = 0; i < 72; i++)
        filt[i] = frand(&seed);
    for (int i = 0; i < 4; i++)
        bias[i] = frand(&seed);
    for (int i = 0; i < 72; i++)
        k[i] = frand(&seed);
    uint32_t x = mb_tensor(b, NPU_LIFETIME_MODEL_INPUT, 4, din);
    uint32_t f = mb_const(b, 4, df, filt), bb = mb_const(b, 1, db, bias);
    uint32_t p1 = mb_i32(b, 1), p0 = mb_i32(b, 0), s2 = mb_i32(b, 2), s1 = mb_i32(b, 1);
    uint32_t relu = mb_i32(b, NPU_FUSE_RELU6), none = mb_i32(b, NPU_FUSE_NONE);
    uint32_t c = mb_tensor(b, NPU_LIFETIME_TEMPORARY_VARIABLE, 4, dout);
    uint32_t beta = mb_f32(b, 0.7f);
    uint32_t sm = mb_tensor(b, NPU_LIFETIME_TEMPORARY_VARIABLE, 4, dout);
    uint32_t kk = mb_const(b, 4, dout, k);
    uint32_t y = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 4, dout);
    /* pads l=1 r=0 t=0 b=0, stride_w 2, stride_h 1: ow = (6+1-2)/2+1 = 3, oh = (5-3)/1+1 = 3 */
    uint32_t ci[10] = {x, f, bb, p1, p0, p0, p0, s2, s1, relu};
    mb_op(b, NPU_OP_CONV_2D, 10, ci, c);
    uint32_t si[2] = {c, beta};
    mb_op(b, NPU_OP_SOFTMAX, 2, si, sm);
    uint32_t ui[3] = {sm, kk, none};
    mb_op(b, NPU_OP_SUB, 3, ui, y);
    float in[180], whole[72], sliced[72];
    for (int i = 0; i < 180; i++)
        in[i] = frand(&seed) * 3;
    struct npu_buffer ib = {in, sizeof in}, wb = {whole, sizeof whole}, sb = {sliced, sizeof sliced};
    int rw = npu_kernel_run_model(mb_model(b), &ib, 1, &wb, 1);
    char dump[8192];
    int rs = run_sliced(mb_model(b), 7, &ib, &sb, dump, sizeof dump);
    /* CONV_2D's 6 output rows, SOFTMAX's 18 rows, SUB's 72 elements: 6 + 7 + 7 slices on channel 0 */
    int slices = strstr(dump, "ch0 idle      slices 20") != NULL;
    free(b);
    OK(rw);
    OK(rs);
    CHECK(memcmp(whole, sliced, sizeof whole) == 0);
    CHECK(slices);
    float rowsum = 0;
    for (int i = 0; i < 4; i++)
        rowsum += whole[i] + k[i];
    CHECK(fabsf(rowsum - 1.0f) < 1e-5f);
}

/* x -> ADD k -> t1 -> ADD k -> ... -> t(n-1) -> ADD -> y: a chain of n
 * operations; with skip, the last ADD also reads t1, which stays alive all
 * along.  n is the element count, 0 leaves it to the execution. */
static struct mb *chain_model(uint32_t ops, uint32_t n, bool skip, const float *k)
{
    struct mb *b = mb_new();
    uint32_t d[1] = {n}, dk[1] = {64};
    uint32_t x = mb_tensor(b, NPU_LIFETIME_MODEL_INPUT, 1, d);
    uint32_t kk = mb_const(b, 1, dk, k), none = mb_i32(b, NPU_FUSE_NONE);
    uint32_t prev = x, first = 0;
    for (uint32_t i = 0; i + 1 < ops; i++) {
        uint32_t t = mb_tensor(b, NPU_LIFETIME_TEMPORARY_VARIABLE, 1, d);
        uint32_t ins[3] = {prev, kk, none};
        mb_op(b, NPU_OP_ADD, 3, ins, t);
        if (i == 0)
            first = t;
        prev = t;
    }
    uint32_t y = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 1, d);
    uint32_t ins[3] = {prev, skip ? first : kk, none};
    mb_op(b, NPU_OP_ADD, 3, ins, y);
    return b;
}

/* The arena is shared by liveness: a chain of 8 operations needs two
 * temporaries' bytes, not seven (three when the first one is read at the
 * end), in the plan made at load and in an instance of a dynamic one; the
 * hardware, cutting every operation into slices, computes what the kernels do. */
static void test_arena_shared_by_liveness(void)
{
    enum { OPS = 8, N = 64 };
    const size_t one = N * sizeof(float);
    float k[N], x[N], y[N], want[N], hw_y[N];
    unsigned seed = 5;
    for (int i = 0; i < N; i++)
        k[i] = frand(&seed), x[i] = frand(&seed);
    for (int skip = 0; skip < 2; skip++) {
        for (int i = 0; i < N; i++) {
            float t1 = x[i] + k[i], t = t1;
            for (int j = 1; j + 1 < OPS; j++)
                t = t + k[i];
            want[i] = t + (skip ? t1 : k[i]);
        }
        size_t need = (skip ? 3 : 2) * one;
        struct mb *b = chain_model(OPS, N, skip, k);
        struct npu_plan *p, *r;
        OK(npu_plan_create(mb_model(b), 3, &p));
        CHECK(!p->dynamic && p->temp_bytes == need);
        npu_plan_destroy(p);
        struct npu_buffer ib = {x, sizeof x}, ob = {y, sizeof y}, hb = {hw_y, sizeof hw_y};
        memset(y, 0, sizeof y);
        OK(npu_kernel_run_model(mb_model(b), &ib, 1, &ob, 1));
        CHECK(memcmp(y, want, sizeof y) == 0);
        OK(run_sliced(mb_model(b), 3, &ib, &hb, NULL, 0));
        CHECK(memcmp(hw_y, want, sizeof hw_y) == 0);
        free(b);
        /* the same chain with its length given at execution */
        struct mb *d = chain_model(OPS, 0, skip, k);
        struct npu_shape given = {.rank = 1, .dims = {N}}, got;
        OK(npu_plan_create(mb_model(d), 1, &p));
        CHECK(p->dynamic);
        OK(npu_plan_begin(p, &ib, &given, 1, &ob, &got, 1, &r, NULL, 0));
        CHECK(npu_plan_complete(r) && r->temp_bytes == need);
        npu_plan_end(p, r);
        npu_plan_destroy(p);
        memset(y, 0, sizeof y);
        OK(npu_kernel_run_model_shaped(mb_model(d), &ib, &given, 1, &ob, &got, 1));
        CHECK(memcmp(y, want, sizeof y) == 0);
        free(d);
    }
}

/* ---- validation ---- */

static void test_validation_errors(void)
{
    uint32_t bad;
    struct mb *b = binary_model(NPU_OP_ADD, 4, NPU_FUSE_NONE);
    struct npu_model *m = mb_model(b);
    OK(npu_model_validate(m, &bad));
    CHECK(bad == UINT32_MAX);
    b->opin[0][1] = 99; /* operand index out of range */
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_OPERAND_INDEX);
    CHECK(bad == 0);
    b->opin[0][1] = 1;
    b->dims[1][0] = 5; /* shapes differ */
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_SHAPE);
    b->dims[1][0] = 4;
    b->ops[0].type = NPU_OPERATION_TYPE_COUNT; /* unknown operation */
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_OPERATION);
    b->ops[0].type = NPU_OP_ADD;
    memcpy(b->values + b->opnd[2].location.offset, &(int32_t){9}, 4); /* bad fuse code */
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_FUSE_CODE);
    memcpy(b->values + b->opnd[2].location.offset, &(int32_t){0}, 4);
    b->opnd[2].location.length = 8; /* wrong constant size */
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_OPERAND_LOCATION);
    b->opnd[2].location.length = 4;
    b->opnd[2].location.offset = 1u << 30; /* out of range */
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_OPERAND_LOCATION);
    b->opnd[2].location.offset = 0;
    b->opnd[0].type = NPU_OPERAND_TENSOR_QUANT8_ASYMM; /* a quantized tensor without a scale */
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_SCALAR);
    b->opnd[0].scale = 0.5f; /* ADD of a quant8 and a float32 tensor */
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_OPERAND_TYPE);
    CHECK(bad == 0);
    b->opnd[0].type = NPU_OPERAND_TENSOR_FLOAT32;
    b->opnd[0].scale = 0.0f;
    b->opnd[0].type = 14; /* not an NN HAL 1.2 operand type */
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_OPERAND_TYPE);
    b->opnd[0].type = NPU_OPERAND_TENSOR_FLOAT32;
    b->opnd[0].lifetime = 42;
    CHECK_RC(npu_model_validate(m, &bad), NPU_E_BAD_LIFETIME);
    b->opnd[0].lifetime = NPU_LIFETIME_TEMPORARY_VARIABLE; /* read before written */
    b->nin = 1;
    b->ins[0] = 1;
    CHECK_RC(npu_model_validate(mb_model(b), &bad), NPU_E_BAD_MODEL_IO);
    CHECK_RC(npu_model_validate(NULL, &bad), NPU_E_INVALID_ARGUMENT);
    free(b);
    /* a zero dimension: a model input's is given at execution, a constant's is wrong */
    struct mb *z = binary_model(NPU_OP_ADD, 0, NPU_FUSE_NONE);
    OK(npu_model_validate(mb_model(z), NULL));
    z->opnd[1].lifetime = NPU_LIFETIME_CONSTANT_COPY;
    z->nin = 1;
    CHECK_RC(npu_model_validate(mb_model(z), NULL), NPU_E_BAD_SHAPE);
    free(z);
}

static void test_validation_conv_and_fc_shapes(void)
{
    struct mb *b = mb_new();
    uint32_t din[4] = {1, 4, 4, 2}, df[4] = {3, 3, 3, 2}, db[1] = {3}, dout[4] = {1, 2, 2, 3};
    float fz[54] = {0}, bz[3] = {0};
    uint32_t x = mb_tensor(b, NPU_LIFETIME_MODEL_INPUT, 4, din);
    uint32_t f = mb_const(b, 4, df, fz), bb = mb_const(b, 1, db, bz);
    uint32_t p0 = mb_i32(b, 0), s1 = mb_i32(b, 1), fuse = mb_i32(b, 0);
    uint32_t y = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 4, dout);
    uint32_t ins[10] = {x, f, bb, p0, p0, p0, p0, s1, s1, fuse};
    mb_op(b, NPU_OP_CONV_2D, 10, ins, y);
    OK(npu_model_validate(mb_model(b), NULL));
    b->dims[y][1] = 3; /* oh must be (4 - 3) / 1 + 1 = 2 */
    CHECK_RC(npu_model_validate(mb_model(b), NULL), NPU_E_BAD_SHAPE);
    b->dims[y][1] = 2;
    b->opin[0][7] = p0; /* stride 0 */
    CHECK_RC(npu_model_validate(mb_model(b), NULL), NPU_E_BAD_SCALAR);
    b->opin[0][7] = s1;
    b->ops[0].input_count = 9;
    CHECK_RC(npu_model_validate(mb_model(b), NULL), NPU_E_BAD_OPERATION);
    free(b);
}

/* Random corruption of a valid model's fields never crashes validation or a
 * run (ASan and valgrind watch this one): it is either refused with a code or
 * runs within the buffers its own shapes ask for. */
static void test_validation_survives_random_mutation(void)
{
    static const uint32_t EDGE[] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 63, 64, 1u << 20, 0x7fffffff, 0xffffffffu};
    unsigned seed = 2024;
    int refused = 0, ran = 0;
    for (int iter = 0; iter < 3000; iter++) {
        struct mb *b = iter % 2 ? mlp_model(8, 6, 4, 1) : binary_model(NPU_OP_ADD, 5, NPU_FUSE_RELU);
        int edits = 1 + (int)((seed >> 4) % 3);
        for (int e = 0; e < edits; e++) {
            seed = seed * 1103515245u + 12345u;
            uint32_t v = EDGE[(seed >> 8) % (sizeof EDGE / sizeof *EDGE)];
            uint32_t which = (seed >> 16) % b->n, op = (seed >> 20) % b->nops;
            switch ((seed >> 24) % 9) {
            case 0: b->opnd[which].type = (int32_t)v; break;
            case 1: b->opnd[which].lifetime = (int32_t)v; break;
            case 2: b->opnd[which].dimension_count = v % 8; break;
            case 3: if (b->opnd[which].dimension_count) b->dims[which][0] = v; break;
            case 4: b->opnd[which].location.offset = v; break;
            case 5: b->opnd[which].location.length = v; break;
            case 6: b->opin[op][(seed >> 12) % b->ops[op].input_count] = v; break;
            case 7: b->opout[op][0] = v; break;
            default: b->ops[op].type = (int32_t)(v % 40); break;
            }
        }
        struct npu_model *m = mb_model(b);
        bool comp[16];
        npu_model_check_support(m, comp, NULL);
        if (npu_model_validate(m, NULL) != NPU_OK) {
            refused++;
            free(b);
            continue;
        }
        struct npu_buffer in[8], out[8];
        for (uint32_t i = 0; i < m->input_count; i++) {
            in[i].length = npu_operand_byte_size(&m->operands[m->input_indexes[i]]);
            in[i].data = calloc(1, in[i].length);
        }
        for (uint32_t i = 0; i < m->output_count; i++) {
            out[i].length = npu_operand_byte_size(&m->operands[m->output_indexes[i]]);
            out[i].data = calloc(1, out[i].length);
        }
        ran += npu_kernel_run_model(m, in, m->input_count, out, m->output_count) == NPU_OK;
        for (uint32_t i = 0; i < m->input_count; i++)
            free(in[i].data);
        for (uint32_t i = 0; i < m->output_count; i++)
            free(out[i].data);
        free(b);
    }
    CHECK(refused > 1000);
    CHECK(ran > 50);
}

/* ---- devices ---- */

static void test_devices(void)
{
    struct npu_system *s = sys_new(NPU_CLOCK_VIRTUAL, 0);
    CHECK(s);
    CHECK(npu_system_device_count(s) == 4);
    CHECK(strcmp(npu_system_vendor(s), "emu") == 0);
    const char *names[4] = {"emu-npu", "emu-gpu", "emu-dsp", "emu-hetero"};
    int32_t types[4] = {NPU_DEVICE_ACCELERATOR, NPU_DEVICE_GPU, NPU_DEVICE_ACCELERATOR, NPU_DEVICE_OTHER};
    uint32_t channels[4] = {2, 1, 1, 3};
    struct npu_device_info info;
    int fail = 0;
    for (uint32_t i = 0; i < 4; i++) {
        if (npu_system_get_device_info(s, i, &info) != NPU_OK || strcmp(info.name, names[i]) ||
            info.type != types[i] || info.channel_count != channels[i] || info.feature_level != 29 ||
            info.status != NPU_STATUS_AVAILABLE || !strstr(info.version, npu_build_id()) ||
            !(info.operand_performance[NPU_OPERAND_TENSOR_FLOAT32].exec_time > 0))
            fail = 1;
    }
    npu_system_get_device_info(s, 3, &info);
    int parts_ok = info.part_count == 2 && info.parts[0] == 0 && info.parts[1] == 2;
    struct npu_device_info npu;
    npu_system_get_device_info(s, 0, &npu);
    struct npu_device_info gpu;
    npu_system_get_device_info(s, 1, &gpu);
    struct npu_device_info dsp;
    npu_system_get_device_info(s, 2, &dsp);
    /* each device's figures per operand type: the NPU leads on quant8 and float16,
     * the GPU on float32 and runs no quant8, the DSP is frugal on quant8 and has no float16 */
    const struct npu_performance_info *np = npu.operand_performance, *gp = gpu.operand_performance,
                                      *dp = dsp.operand_performance;
    int fastest = np[NPU_OPERAND_TENSOR_FLOAT16].exec_time < gp[NPU_OPERAND_TENSOR_FLOAT16].exec_time &&
                  gp[NPU_OPERAND_TENSOR_FLOAT32].exec_time < np[NPU_OPERAND_TENSOR_FLOAT32].exec_time &&
                  np[NPU_OPERAND_TENSOR_QUANT8_ASYMM].exec_time < dp[NPU_OPERAND_TENSOR_QUANT8_ASYMM].exec_time &&
                  dp[NPU_OPERAND_TENSOR_QUANT8_ASYMM].power_usage < np[NPU_OPERAND_TENSOR_QUANT8_ASYMM].power_usage &&
                  gp[NPU_OPERAND_TENSOR_QUANT8_ASYMM].exec_time == FLT_MAX &&
                  dp[NPU_OPERAND_TENSOR_FLOAT16].exec_time == FLT_MAX &&
                  np[NPU_OPERAND_TENSOR_BOOL8].exec_time == FLT_MAX &&
                  npu.relaxed_float32_to_float16_tensor.exec_time == np[NPU_OPERAND_TENSOR_FLOAT16].exec_time;
    int bad = npu_system_get_device_info(s, 4, &info);
    npu_system_destroy(s);
    CHECK(!fail);
    CHECK(parts_ok);
    CHECK(fastest);
    CHECK_RC(bad, NPU_E_BAD_DEVICE);
}

static void test_supported_operations(void)
{
    struct npu_system *s = sys_new(NPU_CLOCK_VIRTUAL, 0);
    CHECK(s);
    struct mb *b = binary_model(NPU_OP_SUB, 4, NPU_FUSE_NONE);
    bool sup[1];
    int r_npu = npu_system_get_supported_operations(s, 0, mb_model(b), sup);
    bool npu = sup[0];
    int r_dsp = npu_system_get_supported_operations(s, 2, mb_model(b), sup);
    bool dsp = sup[0];
    int r_het = npu_system_get_supported_operations(s, 3, mb_model(b), sup);
    bool het = sup[0];
    uint32_t id;
    int load_dsp = npu_system_load_model(s, 2, mb_model(b), NULL, &id);
    b->opin[0][0] = 50;
    int invalid = npu_system_get_supported_operations(s, 0, mb_model(b), sup);
    npu_system_destroy(s);
    free(b);
    OK(r_npu);
    OK(r_dsp);
    OK(r_het);
    CHECK(npu && !dsp && het);
    CHECK_RC(load_dsp, NPU_E_UNSUPPORTED_OPERATION);
    CHECK_RC(invalid, NPU_E_BAD_OPERAND_INDEX);
}

/* An operation npuemu has no binding for (here an unknown type) is
 * "unsupported" in a support query, not an invalid model. */
static void test_unknown_operation_is_unsupported_not_invalid(void)
{
    struct mb *b = binary_model(NPU_OP_ADD, 4, NPU_FUSE_NONE);
    /* ADD's output feeds an op of unknown type that writes the model output */
    b->opnd[3].lifetime = NPU_LIFETIME_TEMPORARY_VARIABLE;
    b->nout = 0;
    uint32_t d[1] = {4};
    uint32_t y = mb_tensor(b, NPU_LIFETIME_MODEL_OUTPUT, 1, d);
    uint32_t ins[2] = {3, 2};
    mb_op(b, NPU_OPERATION_TYPE_COUNT, 2, ins, y);
    struct npu_system *s = sys_new(NPU_CLOCK_VIRTUAL, 0);
    CHECK(s);
    bool sup[2] = {false, true};
    int rq = npu_system_get_supported_operations(s, 0, mb_model(b), sup);
    uint32_t id;
    int rl = npu_system_load_model(s, 0, mb_model(b), NULL, &id);
    bool comp[2];
    int rv = npu_model_check_support(mb_model(b), comp, NULL);
    b->opin[1][0] = 60; /* still an index error */
    int rbad = npu_system_get_supported_operations(s, 0, mb_model(b), sup);
    npu_system_destroy(s);
    free(b);
    OK(rq);
    CHECK(sup[0] && !sup[1]);
    CHECK_RC(rl, NPU_E_BAD_OPERATION);
    OK(rv);
    CHECK(comp[0] && !comp[1]);
    CHECK_RC(rbad, NPU_E_BAD_OPERAND_INDEX);
    /* a quantized ADD is computed; one its binding refuses is an invalid model, not "unsupported" */
    struct mb *q = binary_model(NPU_OP_ADD, 4, NPU_FUSE_NONE);
    for (int i = 0; i < 4; i++)
        if (i != 2) {
            q->opnd[i].type = NPU_OPERAND_TENSOR_QUANT8_ASYMM;
            q->opnd[i].scale = 0.25f;
        }
    bool qc[1] = {false};
    int rqq = npu_model_check_support(mb_model(q), qc, NULL);
    q->opnd[1].type = NPU_OPERAND_TENSOR_FLOAT32;
    q->opnd[1].scale = 0.0f;
    bool qb[1] = {true};
    int rqb = npu_model_check_support(mb_model(q), qb, NULL);
    free(q);
    OK(rqq);
    CHECK(qc[0]);
    CHECK_RC(rqb, NPU_E_BAD_OPERAND_TYPE);
}

/* ---- scheduling configs and admission ---- */

static void test_configs_refused_and_atomic(void)
{
    struct npu_system *s = sys_new(NPU_CLOCK_VIRTUAL, 0);
    CHECK(s);
    struct npu_scheduling_config good[2] = {{0, 2000, 1001, 500, true, false}, {0, 2000, 1002, 100, false, false}};
    int r1 = npu_system_set_scheduling_configs(s, good, 2);
    struct npu_scheduling_config neg[1] = {{0, 2000, 1001, -1, true, false}};
    int r2 = npu_system_set_scheduling_configs(s, neg, 1);
    struct npu_scheduling_config dup[2] = {{0, 2000, 7, 5, true, false}, {0, 2000, 7, 6, true, false}};
    int r3 = npu_system_set_scheduling_configs(s, dup, 2);
    int r4 = npu_system_update_scheduling_configs(s, dup, 2);
    struct npu_scheduling_config minmax[1] = {{900, 800, 3, 5, true, false}};
    int r5 = npu_system_update_scheduling_configs(s, minmax, 1);
    struct npu_scheduling_config over[1] = {{0, 2001, 3, 5, true, false}};
    int r6 = npu_system_set_scheduling_configs(s, over, 1);
    struct npu_scheduling_config app_over[1] = {{0, 2000, 3, 1001, true, false}};
    int r7 = npu_system_set_scheduling_configs(s, app_over, 1);
    /* after all those failures, uid 1002 must still lack direct access */
    struct mb *b = binary_model(NPU_OP_ADD, 4, NPU_FUSE_NONE);
    uint32_t model;
    int rl = npu_system_load_model(s, 0, mb_model(b), NULL, &model);
    float x[4] = {0}, y[4] = {0}, o[4];
    struct npu_buffer in[2] = {{x, 16}, {y, 16}}, out[1] = {{o, 16}};
    struct npu_work_request q = req(model, 1002, 0, in, out);
    q.input_count = 2;
    int32_t wid;
    int r8 = npu_system_submit_work(s, &q, &wid);
    /* update adds and replaces per uid; leaves the others */
    struct npu_scheduling_config upd[1] = {{0, 2000, 1002, 100, true, false}};
    int r9 = npu_system_update_scheduling_configs(s, upd, 1);
    int r10 = npu_system_submit_work(s, &q, &wid);
    char dump[8192];
    size_t len;
    npu_system_dump(s, dump, sizeof dump, &len);
    int has_1001 = strstr(dump, "uid 1001") != NULL;
    npu_system_run_until_idle(s, 0);
    npu_system_destroy(s);
    free(b);
    OK(r1);
    CHECK_RC(r2, NPU_E_INVALID_PRIORITY);
    CHECK_RC(r3, NPU_E_DUPLICATE_UID);
    CHECK_RC(r4, NPU_E_DUPLICATE_UID);
    CHECK_RC(r5, NPU_E_INVALID_PRIORITY);
    CHECK_RC(r6, NPU_E_INVALID_PRIORITY);
    CHECK_RC(r7, NPU_E_INVALID_PRIORITY);
    OK(rl);
    CHECK_RC(r8, NPU_E_NO_DIRECT_ACCESS);
    OK(r9);
    OK(r10);
    CHECK(has_1001);
}

static void test_admission_refusals(void)
{
    struct npu_system *s = sys_new(NPU_CLOCK_VIRTUAL, 0);
    CHECK(s);
    struct npu_scheduling_config c[2] = {{0, 2000, 1000, 100, true, true}, {0, 2000, 10001, 200, true, false}};
    OK(npu_system_set_scheduling_configs(s, c, 2));
    struct mb *b = binary_model(NPU_OP_ADD, 4, NPU_FUSE_NONE);
    uint32_t model;
    int rl = npu_system_load_model(s, 0, mb_model(b), NULL, &model);
    free(b);
    OK(rl);
    float x[4] = {1, 2, 3, 4}, o[4];
    struct npu_buffer in[2] = {{x, 16}, {x, 16}}, out[1] = {{o, 16}};
    struct npu_work_request q = req(model, 10001, 0, in, out);
    q.input_count = 2;
    int32_t wid;
    q.original_uid = 42;
    int attr = npu_system_submit_work(s, &q, &wid);
    q.uid = 1000; /* system may attribute */
    int sys_attr = npu_system_submit_work(s, &q, &wid);
    q.uid = 10001, q.original_uid = 10001, q.job_priority = 1001;
    int jp_hi = npu_system_submit_work(s, &q, &wid);
    q.job_priority = -1;
    int jp_lo = npu_system_submit_work(s, &q, &wid);
    q.job_priority = 0, q.model_id = 999;
    int bad_model = npu_system_submit_work(s, &q, &wid);
    q.model_id = model, q.input_count = 1;
    int bad_buf = npu_system_submit_work(s, &q, &wid);
    struct npu_event *ev;
    npu_system_run_until_idle(s, 0);
    uint32_t n = drain(s, &ev);
    int requested = 0;
    for (uint32_t i = 0; i < n; i++)
        requested += ev[i].type == NPU_EVENT_WORK_REQUESTED;
    npu_system_destroy(s);
    CHECK_RC(attr, NPU_E_ATTRIBUTION_DENIED);
    OK(sys_attr);
    CHECK_RC(jp_hi, NPU_E_INVALID_JOB_PRIORITY);
    CHECK_RC(jp_lo, NPU_E_INVALID_JOB_PRIORITY);
    CHECK_RC(bad_model, NPU_E_BAD_MODEL_ID);
    CHECK_RC(bad_buf, NPU_E_BAD_BUFFER);
    CHECK(requested == 1); /* refused submissions emit nothing */
    CHECK(o[3] == 8);
}

/* ---- scheduling ---- */

struct run {
    struct npu_system *s;
    struct mb *b;
    uint32_t model;
    float in[64][256];
    float out[64][256];
    struct npu_buffer ib[64], ob[64];
};

static int run_setup(struct run *r, int32_t preempt, uint32_t device, double cost_scale)
{
    r->s = sys_new(NPU_CLOCK_VIRTUAL, preempt);
    if (!r->s)
        return -1;
    r->b = mlp_model(256, 256, 256, 7);
    struct npu_load_params p = {.cost_scale = cost_scale};
    int rc = npu_system_load_model(r->s, device, mb_model(r->b), &p, &r->model);
    unsigned seed = 99;
    for (int i = 0; i < 64; i++) {
        for (int k = 0; k < 256; k++)
            r->in[i][k] = frand(&seed);
        r->ib[i] = (struct npu_buffer){r->in[i], sizeof r->in[i]};
        r->ob[i] = (struct npu_buffer){r->out[i], sizeof r->out[i]};
    }
    return rc;
}

static void run_teardown(struct run *r)
{
    npu_system_destroy(r->s);
    free(r->b);
}

static int32_t submit(struct run *r, int i, int32_t uid, int32_t prio)
{
    struct npu_work_request q = req(r->model, uid, prio, &r->ib[i], &r->ob[i]);
    int32_t id = -1;
    if (npu_system_submit_work(r->s, &q, &id) != NPU_OK)
        return -1;
    return id;
}

static void test_priority_order_and_effective_priority(void)
{
    static struct run r;
    OK(run_setup(&r, NPU_PREEMPT_NONE, 1, 1.0)); /* emu-gpu: one channel */
    struct npu_scheduling_config c[2] = {{0, 2000, 10001, 100, true, false}, {300, 400, 10002, 0, true, false}};
    OK(npu_system_set_scheduling_configs(r.s, c, 2));
    int32_t a = submit(&r, 0, 10001, 900);  /* starts at once: the channel is free */
    int32_t b = submit(&r, 1, 10001, 500);  /* 600 */
    int32_t d = submit(&r, 2, 10002, 0);    /* clamped up to 300 */
    int32_t e = submit(&r, 3, 10001, 500);  /* 600, ties with b: after it */
    int32_t f = submit(&r, 4, 10003, 1000); /* no config: 1000 + 1000 = 2000 */
    OK(npu_system_run_until_idle(r.s, 0));
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    run_teardown(&r);
    CHECK(a > 0 && b == a + 1 && d == b + 1 && e == d + 1 && f == e + 1);
    int32_t want[5] = {a, d, b, e, f};
    int32_t eff[5] = {1000, 300, 600, 600, 2000};
    uint32_t k = 0;
    int64_t last_ts = 0;
    for (uint32_t i = 0; i < n; i++) {
        CHECK(ev[i].work.timestamp_ms >= last_ts);
        last_ts = ev[i].work.timestamp_ms;
        if (ev[i].type == NPU_EVENT_WORK_ENDED) {
            CHECK(k < 5 && ev[i].work.id == want[k]);
            CHECK(ev[i].reason == NPU_END_REASON_COMPLETED);
            CHECK(ev[i].work.effective_priority == eff[k]);
            CHECK(ev[i].work.device_number == 1);
            CHECK(ev[i].work.debug_pid == 4242);
            k++;
        }
    }
    CHECK(k == 5);
}

/* A low-priority job is running when a high-priority one arrives: pause,
 * run the high one, resume; the low job's result equals an unpreempted run. */
static void preempt_scenario(int32_t mode, int32_t *reasons, uint32_t *nreasons, float *low_out,
                             int64_t *low_end_ns, int64_t *high_wait_ns, uint64_t *dump_ok)
{
    static struct run r;
    if (run_setup(&r, mode, 1, 50.0) != NPU_OK)
        return;
    struct npu_scheduling_config c[2] = {{0, 2000, 10001, 900, true, false}, {0, 2000, 10002, 0, true, false}};
    npu_system_set_scheduling_configs(r.s, c, 2);
    int32_t low = submit(&r, 0, 10001, 100);
    npu_system_advance(r.s, 300000); /* 0.3 ms: a few slices in (of ~1.1 ms) */
    int64_t t_high = npu_system_now_ns(r.s);
    int32_t high = submit(&r, 1, 10002, 0);
    npu_system_run_until_idle(r.s, 0);
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    *nreasons = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (ev[i].type != NPU_EVENT_WORK_STARTED && ev[i].type != NPU_EVENT_WORK_ENDED)
            continue;
        /* encode: id*100 + type*10 + reason */
        int32_t who = ev[i].work.id == low ? 1 : ev[i].work.id == high ? 2 : 9;
        reasons[(*nreasons)++] = who * 100 + ev[i].type * 10 + ev[i].reason;
        if (ev[i].type == NPU_EVENT_WORK_ENDED && ev[i].work.id == low && ev[i].reason == NPU_END_REASON_COMPLETED)
            *low_end_ns = ev[i].time_ns;
        if (ev[i].type == NPU_EVENT_WORK_STARTED && ev[i].work.id == high)
            *high_wait_ns = ev[i].time_ns - t_high;
    }
    memcpy(low_out, r.out[0], sizeof r.out[0]);
    char dump[8192];
    size_t len;
    *dump_ok = npu_system_dump(r.s, dump, sizeof dump, &len) == NPU_OK && strstr(dump, "preemptions 1");
    run_teardown(&r);
}

static void expected_mlp_output(float *out)
{
    static struct run r;
    r.b = mlp_model(256, 256, 256, 7);
    unsigned seed = 99;
    float in[256];
    for (int k = 0; k < 256; k++)
        in[k] = frand(&seed);
    struct npu_buffer ib = {in, sizeof in}, ob = {out, 256 * sizeof(float)};
    npu_kernel_run_model(mb_model(r.b), &ib, 1, &ob, 1);
    free(r.b);
}

static void test_checkpoint_pause_resume_identical(void)
{
    int32_t got[16];
    uint32_t n = 0;
    float out[256], want[256];
    int64_t end_ckpt = 0, wait_ckpt = 0, end_none = 0, wait_none = 0;
    uint64_t dump_ok = 0, dump_none = 0;
    preempt_scenario(NPU_PREEMPT_CHECKPOINT, got, &n, out, &end_ckpt, &wait_ckpt, &dump_ok);
    expected_mlp_output(want);
    int32_t expect[] = {130 + NPU_START_REASON_INITIAL, 100 + 30 + NPU_END_REASON_PAUSED,
                        200 + 20 + NPU_START_REASON_INITIAL, 200 + 30 + NPU_END_REASON_COMPLETED,
                        100 + 20 + NPU_START_REASON_RESUMED, 100 + 30 + NPU_END_REASON_COMPLETED};
    expect[0] = 100 + 20 + NPU_START_REASON_INITIAL;
    CHECK(n == 6);
    for (int i = 0; i < 6; i++)
        CHECK(got[i] == expect[i]);
    CHECK(memcmp(out, want, sizeof out) == 0);
    CHECK(dump_ok);
    /* without preemption the high job waits for the whole low job */
    int32_t got2[16];
    preempt_scenario(NPU_PREEMPT_NONE, got2, &n, out, &end_none, &wait_none, &dump_none);
    CHECK(n == 4 && got2[1] == 130 + NPU_END_REASON_COMPLETED);
    CHECK(memcmp(out, want, sizeof out) == 0);
    CHECK(wait_ckpt < wait_none);
    /* SPEC budget: at most one slice plus a context save.  On emu-gpu at cost
     * scale 50 the longest slice (a quarter of the first 256x256
     * FULLY_CONNECTED, whose input, weights, bias and output are 264192 B) is
     * 5 us + 66048 B / 25 B/ns x 50 = 137096 ns; the save 20 us + 2 KiB of
     * live temporaries / 25 B/ns = 20082 ns. */
    CHECK(wait_ckpt > 0 && wait_ckpt <= 137096 + 20082);
    /* the low job pays for the save and restore */
    CHECK(end_ckpt > end_none);
}

static void test_kill_restart(void)
{
    int32_t got[16];
    uint32_t n = 0;
    float out[256], want[256];
    int64_t end_kill = 0, wait_kill = 0, end_ckpt = 0, wait_ckpt = 0;
    uint64_t d1, d2;
    preempt_scenario(NPU_PREEMPT_KILL_RESTART, got, &n, out, &end_kill, &wait_kill, &d1);
    expected_mlp_output(want);
    CHECK(n == 6);
    CHECK(got[1] == 130 + NPU_END_REASON_PAUSED && got[4] == 120 + NPU_START_REASON_RESUMED);
    CHECK(memcmp(out, want, sizeof out) == 0);
    preempt_scenario(NPU_PREEMPT_CHECKPOINT, got, &n, out, &end_ckpt, &wait_ckpt, &d2);
    /* a restart redoes the slices already done: later than resuming from a checkpoint */
    CHECK(end_kill > end_ckpt);
    /* and the preemptor does not wait for a context save */
    CHECK(wait_kill < wait_ckpt);
    CHECK(wait_kill <= 137096);
}

static void test_vts_later_higher_priority_finishes_first(void)
{
    static struct run r;
    OK(run_setup(&r, 0, 1, 2500.0)); /* emu-gpu, driver default (checkpoint); ~120 ms a job */
    struct npu_scheduling_config c[1] = {{0, 2000, 1001, 500, true, false}};
    OK(npu_system_set_scheduling_configs(r.s, c, 1));
    /* keep the channel busy so the two jobs under test meet in the queue */
    int32_t bg1 = submit(&r, 0, 1001, 1000), bg2 = bg1;
    int32_t j500 = submit(&r, 2, 1001, 500);
    OK(npu_system_advance(r.s, 50 * 1000000));
    int32_t j250 = submit(&r, 3, 1001, 250);
    OK(npu_system_run_until_idle(r.s, 0));
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    run_teardown(&r);
    CHECK(bg1 > 0 && bg2 > 0 && j500 > 0 && j250 > 0);
    int e500 = find_ev(ev, n, NPU_EVENT_WORK_ENDED, j500, NPU_END_REASON_COMPLETED, 0);
    int e250 = find_ev(ev, n, NPU_EVENT_WORK_ENDED, j250, NPU_END_REASON_COMPLETED, 0);
    CHECK(e500 >= 0 && e250 >= 0 && e250 < e500);
    int s250 = find_ev(ev, n, NPU_EVENT_WORK_STARTED, j250, -1, 0);
    CHECK(ev[s250].work.effective_priority == 750 && ev[s250].work.job_priority == 250);
}

static void test_fcfs_ignores_priority(void)
{
    static struct run r;
    OK(run_setup(&r, NPU_PREEMPT_CHECKPOINT, 1, 1.0));
    OK(npu_system_set_scheduling_mode(r.s, NPU_SCHED_FCFS));
    int32_t a = submit(&r, 0, 1, 1000), b = submit(&r, 1, 1, 900), c = submit(&r, 2, 1, 0);
    OK(npu_system_run_until_idle(r.s, 0));
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    run_teardown(&r);
    int ea = find_ev(ev, n, NPU_EVENT_WORK_ENDED, a, -1, 0), eb = find_ev(ev, n, NPU_EVENT_WORK_ENDED, b, -1, 0),
        ec = find_ev(ev, n, NPU_EVENT_WORK_ENDED, c, -1, 0);
    CHECK(ea >= 0 && ea < eb && eb < ec);
    CHECK(ev[ea].reason == NPU_END_REASON_COMPLETED); /* FCFS never preempts */
}

static void test_cancel(void)
{
    static struct run r;
    OK(run_setup(&r, 0, 1, 10.0));
    int32_t a = submit(&r, 0, 1, 0), b = submit(&r, 1, 1, 0);
    OK(npu_system_advance(r.s, 100000));
    OK(npu_system_cancel_work(r.s, b)); /* queued */
    OK(npu_system_cancel_work(r.s, a)); /* running */
    int again = npu_system_cancel_work(r.s, a);
    int unknown = npu_system_cancel_work(r.s, 12345);
    int32_t c = submit(&r, 2, 1, 0); /* the channel is free again at once */
    int64_t now = npu_system_now_ns(r.s);
    OK(npu_system_run_until_idle(r.s, 0));
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    run_teardown(&r);
    CHECK_RC(again, NPU_E_BAD_WORK_ID);
    CHECK_RC(unknown, NPU_E_BAD_WORK_ID);
    int ea = find_ev(ev, n, NPU_EVENT_WORK_ENDED, a, -1, 0), eb = find_ev(ev, n, NPU_EVENT_WORK_ENDED, b, -1, 0);
    CHECK(ea >= 0 && eb >= 0);
    CHECK(ev[ea].reason == NPU_END_REASON_CANCELLED_USER && ev[eb].reason == NPU_END_REASON_CANCELLED_USER);
    CHECK(find_ev(ev, n, NPU_EVENT_WORK_STARTED, b, -1, 0) < 0);
    int sc = find_ev(ev, n, NPU_EVENT_WORK_STARTED, c, -1, 0);
    CHECK(sc >= 0 && ev[sc].time_ns == now);
}

/* ---- thermal ---- */

static int64_t job_duration(struct run *r, int i)
{
    int32_t id = submit(r, i, 1, 0);
    npu_system_run_until_idle(r->s, 0);
    struct npu_event *ev;
    uint32_t n = drain(r->s, &ev);
    int s = find_ev(ev, n, NPU_EVENT_WORK_STARTED, id, -1, 0), e = find_ev(ev, n, NPU_EVENT_WORK_ENDED, id, -1, 0);
    return s >= 0 && e >= 0 ? ev[e].time_ns - ev[s].time_ns : -1;
}

static void test_thermal_throttling_and_severities(void)
{
    static struct run r;
    OK(run_setup(&r, 0, 1, 1.0));
    int64_t cool = job_duration(&r, 0);
    struct npu_fault spike = {.kind = NPU_FAULT_HEAT_SPIKE, .heat_c = 42.0f}; /* 25 + 42 = 67: SEVERE */
    OK(npu_system_inject_fault(r.s, &spike));
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    int saw_severe = n == 1 && ev[0].type == NPU_EVENT_THERMAL && ev[0].thermal_severity == NPU_THERMAL_SEVERE;
    int32_t sev;
    float temp;
    OK(npu_system_thermal_state(r.s, &sev, &temp));
    int64_t hot = job_duration(&r, 1);
    /* at rest it cools down, through every severity back to NONE */
    int64_t t_hot_end = npu_system_now_ns(r.s);
    int32_t sev_hot_end;
    npu_system_thermal_state(r.s, &sev_hot_end, &temp);
    double t0 = temp;
    OK(npu_system_advance(r.s, 20LL * 1000000000));
    n = drain(r.s, &ev);
    int last_sev = n ? ev[n - 1].thermal_severity : -1;
    /* the first drop (below 65 C) happens when 25 + (t0 - 25) e^(-t / 2 s) = 65, not at the end */
    double want_ms = -2000.0 * log(40.0 / (t0 - 25.0));
    double got_ms = n ? (double)(ev[0].time_ns - t_hot_end) / 1e6 : -1;
    int exact = sev_hot_end == NPU_THERMAL_SEVERE && n >= 3 && ev[0].thermal_severity == NPU_THERMAL_MODERATE &&
                fabs(got_ms - want_ms) < 0.01;
    int32_t sev2;
    float temp2;
    OK(npu_system_thermal_state(r.s, &sev2, &temp2));
    int64_t cooled = job_duration(&r, 2);
    run_teardown(&r);
    CHECK(saw_severe);
    CHECK(sev == NPU_THERMAL_SEVERE && temp > 66.9f);
    CHECK(cool > 0 && hot > cool);
    /* SEVERE throttles by 2x: the job takes twice as long, up to rounding */
    CHECK(hot >= 2 * cool - 64 && hot <= 2 * cool + 64);
    CHECK(last_sev == NPU_THERMAL_NONE && sev2 == NPU_THERMAL_NONE && temp2 < 30.0f);
    CHECK(exact);
    CHECK(cooled == cool);
}

static void test_thermal_rises_with_load(void)
{
    static struct run r;
    struct npu_system_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.thermal_thresholds_c[0] = 30; /* low thresholds so a few seconds of load cross them */
    cfg.thermal_thresholds_c[1] = 33;
    cfg.thermal_thresholds_c[2] = 60;
    cfg.thermal_thresholds_c[3] = 70;
    cfg.thermal_thresholds_c[4] = 80;
    cfg.thermal_thresholds_c[5] = 90;
    r.b = mlp_model(256, 256, 256, 1);
    OK(npu_system_create(&cfg, &r.s));
    struct npu_load_params p = {.cost_scale = 4000.0};
    OK(npu_system_load_model(r.s, 0, mb_model(r.b), &p, &r.model));
    for (int i = 0; i < 64; i++) {
        r.ib[i] = (struct npu_buffer){r.in[i], sizeof r.in[i]};
        r.ob[i] = (struct npu_buffer){r.out[i], sizeof r.out[i]};
    }
    for (int i = 0; i < 64; i++)
        submit(&r, i, 1, 0);
    OK(npu_system_run_until_idle(r.s, 0));
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    int first_light = -1, first_mod = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (ev[i].type == NPU_EVENT_THERMAL && ev[i].thermal_severity == 1 && first_light < 0)
            first_light = (int)i;
        if (ev[i].type == NPU_EVENT_THERMAL && ev[i].thermal_severity == 2 && first_mod < 0)
            first_mod = (int)i;
    }
    int32_t sev;
    float temp;
    npu_system_thermal_state(r.s, &sev, &temp);
    run_teardown(&r);
    CHECK(first_light >= 0 && first_mod > first_light);
    CHECK(ev[first_mod].temperature_c >= 33.0f);
    CHECK(temp > 30.0f); /* 2 channels x 12 C: heading for 49 C */
}

/* `npuemu thermal set` / `thermal reset`: an override holds the die until released. */
static void test_thermal_override_holds_until_released(void)
{
    static struct run r;
    OK(run_setup(&r, 0, 1, 1.0));
    int64_t cool = job_duration(&r, 0);
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    int held_before = npu_system_thermal_held(r.s);
    int bad = npu_system_thermal_override(r.s, true, NAN);
    OK(npu_system_thermal_override(r.s, true, 70.0f)); /* the middle of SEVERE */
    n = drain(r.s, &ev);
    int told = n == 1 && ev[0].type == NPU_EVENT_THERMAL && ev[0].thermal_severity == NPU_THERMAL_SEVERE;
    OK(npu_system_advance(r.s, 20LL * 1000000000)); /* at rest: it would have cooled to NONE */
    uint32_t at_rest = drain(r.s, &ev);
    int64_t hot = job_duration(&r, 1); /* under load: it would have heated */
    n = drain(r.s, &ev);
    int thermal_under_load = 0;
    for (uint32_t i = 0; i < n; i++)
        thermal_under_load += ev[i].type == NPU_EVENT_THERMAL;
    int32_t sev;
    float temp;
    OK(npu_system_thermal_state(r.s, &sev, &temp));
    int held = npu_system_thermal_held(r.s);
    struct npu_fault spike = {.kind = NPU_FAULT_HEAT_SPIKE, .heat_c = 10.0f}; /* moves the held die */
    OK(npu_system_inject_fault(r.s, &spike));
    OK(npu_system_advance(r.s, 5LL * 1000000000));
    int32_t sev_spiked;
    float temp_spiked;
    OK(npu_system_thermal_state(r.s, &sev_spiked, &temp_spiked));
    OK(npu_system_thermal_override(r.s, false, 0.0f));
    OK(npu_system_advance(r.s, 30LL * 1000000000));
    n = drain(r.s, &ev);
    int32_t sev_released;
    float temp_released;
    OK(npu_system_thermal_state(r.s, &sev_released, &temp_released));
    int held_after = npu_system_thermal_held(r.s);
    int64_t cooled = job_duration(&r, 2);
    run_teardown(&r);
    CHECK(!held_before && held && !held_after);
    CHECK_RC(bad, NPU_E_INVALID_ARGUMENT);
    CHECK(told && at_rest == 0 && thermal_under_load == 0);
    CHECK(sev == NPU_THERMAL_SEVERE && temp == 70.0f);
    CHECK(hot >= 2 * cool - 64 && hot <= 2 * cool + 64); /* SEVERE's throttling holds too */
    CHECK(sev_spiked == NPU_THERMAL_CRITICAL && temp_spiked == 80.0f);
    CHECK(n >= 4 && ev[n - 1].type == NPU_EVENT_THERMAL && ev[n - 1].thermal_severity == NPU_THERMAL_NONE);
    CHECK(sev_released == NPU_THERMAL_NONE && temp_released < 30.0f && cooled == cool);
}

/* ---- memory ---- */

static void test_capacity_errors(void)
{
    struct npu_system *s = sys_new(NPU_CLOCK_VIRTUAL, 0);
    CHECK(s);
    struct mb *b = binary_model(NPU_OP_ADD, 4, NPU_FUSE_NONE);
    struct npu_load_params two_gb = {.emulated_weight_bytes = 2ULL << 30};
    uint32_t m1, m2, m3, m4;
    int r1 = npu_system_load_model(s, 0, mb_model(b), &two_gb, &m1);
    int r2 = npu_system_load_model(s, 0, mb_model(b), &two_gb, &m2);
    int r3 = npu_system_load_model(s, 0, mb_model(b), &two_gb, &m3); /* 6 GB > 4 GB */
    struct npu_device_info info;
    npu_system_get_device_info(s, 0, &info);
    uint64_t used = info.weight_memory_used;
    int ru = npu_system_unload_model(s, m1);
    int ru2 = npu_system_unload_model(s, m1);
    int r4 = npu_system_load_model(s, 0, mb_model(b), &two_gb, &m3);
    struct npu_load_params big_sram = {.emulated_sram_bytes = 33ULL << 20}; /* 33 MiB > the GPU's 32 MiB */
    int r5 = npu_system_load_model(s, 1, mb_model(b), &big_sram, &m4);
    int r6 = npu_system_load_model(s, 1, mb_model(b), &two_gb, &m4); /* gpu has exactly 2 GB */
    struct npu_event *ev;
    uint32_t n = drain(s, &ev);
    int full_events = 0, gpu_events = 0;
    for (uint32_t i = 0; i < n; i++) {
        full_events += ev[i].type == NPU_EVENT_MEMORY && ev[i].memory_status == NPU_E_WEIGHT_MEMORY_FULL;
        gpu_events += ev[i].type == NPU_EVENT_MEMORY && ev[i].device_number == 1 && ev[i].memory_device == 1;
    }
    npu_system_destroy(s);
    free(b);
    OK(r1);
    OK(r2);
    CHECK_RC(r3, NPU_E_WEIGHT_MEMORY_FULL);
    CHECK(used == 4ULL << 30);
    OK(ru);
    CHECK_RC(ru2, NPU_E_BAD_MODEL_ID);
    OK(r4);
    CHECK_RC(r5, NPU_E_SRAM_FULL);
    OK(r6);
    CHECK(full_events == 1);
    CHECK(gpu_events == 2); /* the refused SRAM load and the 2 GB load on emu-gpu */
}

/* A model that reserves more emulated weight memory than its real tensors
 * streams those bytes once per inference: a "256 MiB" model on emu-gpu
 * (25 bytes/ns) takes about 10.7 ms longer than the same graph loaded at its
 * real size, and loading it twice costs the same each time. */
static void test_emulated_weights_cost_their_streaming_time(void)
{
    static struct run small, big;
    OK(run_setup(&small, 0, 1, 1.0));
    OK(run_setup(&big, 0, 1, 1.0));
    OK(npu_system_unload_model(big.s, big.model));
    struct npu_load_params p = {.emulated_weight_bytes = 256ULL << 20};
    OK(npu_system_load_model(big.s, 1, mb_model(big.b), &p, &big.model));
    int64_t t_small = job_duration(&small, 0);
    int64_t t_big = job_duration(&big, 0), t_big2 = job_duration(&big, 1);
    run_teardown(&small);
    run_teardown(&big);
    double streamed_ns = (double)(256ULL << 20) / 25.0;
    CHECK(t_small > 0 && t_big > t_small);
    CHECK(t_big2 == t_big);
    /* every slice becomes bandwidth-bound, so the extra is the streamed bytes'
     * time less at most the small model's own compute time */
    CHECK((double)(t_big - t_small) <= streamed_ns + 1e3);
    CHECK((double)(t_big - t_small) >= streamed_ns - (double)t_small);
}

static void test_hetero_places_on_a_part(void)
{
    struct npu_system *s = sys_new(NPU_CLOCK_VIRTUAL, 0);
    CHECK(s);
    /* SUB: only the NPU part of emu-hetero supports it */
    struct mb *b = binary_model(NPU_OP_SUB, 4, NPU_FUSE_NONE);
    uint32_t m;
    int rl = npu_system_load_model(s, 3, mb_model(b), NULL, &m);
    float x[4] = {5, 6, 7, 8}, y[4] = {1, 1, 1, 1}, o[4];
    struct npu_buffer in[2] = {{x, 16}, {y, 16}}, out[1] = {{o, 16}};
    struct npu_work_request q = req(m, 1, 0, in, out);
    q.input_count = 2;
    int32_t id;
    int rs = npu_system_submit_work(s, &q, &id);
    npu_system_run_until_idle(s, 0);
    struct npu_event *ev;
    uint32_t n = drain(s, &ev);
    struct npu_device_info npu;
    npu_system_get_device_info(s, 0, &npu);
    npu_system_destroy(s);
    free(b);
    OK(rl);
    OK(rs);
    int e = find_ev(ev, n, NPU_EVENT_WORK_ENDED, id, NPU_END_REASON_COMPLETED, 0);
    CHECK(e >= 0 && ev[e].work.device_number == 3);
    CHECK(o[0] == 4 && o[3] == 7);
    CHECK(npu.weight_memory_used > 0); /* placed on the NPU */
}

/* ---- faults ---- */

static void test_faults_fail_hang_reset(void)
{
    static struct run r;
    OK(run_setup(&r, 0, 1, 1.0));
    struct npu_fault fail = {.kind = NPU_FAULT_FAIL_NEXT_WORK, .device = 1};
    OK(npu_system_inject_fault(r.s, &fail));
    int32_t a = submit(&r, 0, 1, 0);
    OK(npu_system_run_until_idle(r.s, 0));
    struct npu_fault hang = {.kind = NPU_FAULT_HANG_CHANNEL, .device = 1, .channel = 0};
    OK(npu_system_inject_fault(r.s, &hang));
    int32_t b = submit(&r, 1, 1, 0);
    OK(npu_system_run_until_idle(r.s, 0)); /* returns: a hung channel never finishes */
    OK(npu_system_advance(r.s, 10LL * 1000000000));
    struct npu_device_info info;
    npu_system_get_device_info(r.s, 1, &info);
    int32_t offline = info.status;
    int not_hung = npu_system_reset_channel(r.s, 0, 0);
    int bad_ch = npu_system_reset_channel(r.s, 1, 5);
    OK(npu_system_reset_channel(r.s, 1, 0));
    int32_t c = submit(&r, 2, 1, 0);
    OK(npu_system_run_until_idle(r.s, 0));
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    run_teardown(&r);
    int ea = find_ev(ev, n, NPU_EVENT_WORK_ENDED, a, -1, 0), eb = find_ev(ev, n, NPU_EVENT_WORK_ENDED, b, -1, 0),
        ec = find_ev(ev, n, NPU_EVENT_WORK_ENDED, c, -1, 0);
    CHECK(ea >= 0 && ev[ea].reason == NPU_END_REASON_FAILED);
    CHECK(eb >= 0 && ev[eb].reason == NPU_END_REASON_FAILED && ev[eb].time_ns >= 10LL * 1000000000);
    CHECK(ec >= 0 && ev[ec].reason == NPU_END_REASON_COMPLETED);
    CHECK(offline == NPU_STATUS_OFFLINE);
    CHECK_RC(not_hung, NPU_E_NOT_HUNG);
    CHECK_RC(bad_ch, NPU_E_BAD_CHANNEL);
}

static void test_crash_aborts(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct npu_system *s = sys_new(NPU_CLOCK_VIRTUAL, 0);
        struct npu_fault crash = {.kind = NPU_FAULT_CRASH};
        signal(SIGABRT, SIG_DFL);
        npu_system_inject_fault(s, &crash);
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

static void test_unload_cancels_system(void)
{
    static struct run r;
    OK(run_setup(&r, 0, 1, 10.0));
    int32_t a = submit(&r, 0, 1, 0), b = submit(&r, 1, 1, 0);
    OK(npu_system_advance(r.s, 100000));
    OK(npu_system_unload_model(r.s, r.model));
    int after = submit(&r, 2, 1, 0);
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    run_teardown(&r);
    int ea = find_ev(ev, n, NPU_EVENT_WORK_ENDED, a, -1, 0), eb = find_ev(ev, n, NPU_EVENT_WORK_ENDED, b, -1, 0);
    CHECK(ea >= 0 && ev[ea].reason == NPU_END_REASON_CANCELLED_SYSTEM);
    CHECK(eb >= 0 && ev[eb].reason == NPU_END_REASON_CANCELLED_SYSTEM);
    CHECK(after == -1);
}

/* Issue 12's segfault: apps unload and reload models (the budget policy asks
 * them to) while other work is queued and running, so the hardware's model
 * table grows past its capacity (16, then 32, ...) under live jobs.  A job
 * refers to its model for as long as it lives: the table's growth must never
 * move a model.  Under `make asan` the old table (an array of models that
 * realloc moved) is a heap-use-after-free at the next slice boundary. */
static void test_model_table_grows_under_live_work(void)
{
    static struct run r;
    OK(run_setup(&r, NPU_PREEMPT_KILL_RESTART, 1, 50.0)); /* emu-gpu: one channel */
    int32_t running = submit(&r, 0, 10001, 500), queued = submit(&r, 0, 10001, 600);
    struct mb *small = binary_model(NPU_OP_ADD, 4, NPU_FUSE_NONE);
    float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40}, o[4] = {0};
    struct npu_buffer sin[2] = {{x, sizeof x}, {y, sizeof y}}, sout[1] = {{o, sizeof o}};
    int rc = NPU_OK, last_small = -1;
    uint32_t handles = 1;
    for (int round = 0; round < 70 && rc == NPU_OK; round++) {
        /* a slice boundary between loads: the job on the channel and the
         * queued one are looked at with the table at every size */
        rc = npu_system_advance(r.s, 20000);
        uint32_t m = 0;
        if (rc == NPU_OK)
            rc = npu_system_load_model(r.s, 1, mb_model(small), NULL, &m);
        handles += rc == NPU_OK;
        if (rc == NPU_OK && round % 10 == 8) {
            /* a short job of a fresh model preempts the long ones (kill-restart) */
            struct npu_work_request q = req(m, 10002, 0, sin, sout);
            q.input_count = 2;
            rc = npu_system_submit_work(r.s, &q, &last_small);
        }
        if (rc == NPU_OK && round % 2 == 1)
            rc = npu_system_unload_model(r.s, m);
    }
    if (rc == NPU_OK)
        rc = npu_system_run_until_idle(r.s, 0);
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    float want[256];
    expected_mlp_output(want);
    int same = memcmp(r.out[0], want, sizeof want) == 0;
    run_teardown(&r);
    free(small);
    OK(rc);
    CHECK(handles == 71);
    CHECK(find_ev(ev, n, NPU_EVENT_WORK_ENDED, running, NPU_END_REASON_COMPLETED, 0) >= 0);
    CHECK(find_ev(ev, n, NPU_EVENT_WORK_ENDED, queued, NPU_END_REASON_COMPLETED, 0) >= 0);
    CHECK(find_ev(ev, n, NPU_EVENT_WORK_ENDED, last_small, NPU_END_REASON_COMPLETED, 0) >= 0);
    CHECK(same);
    CHECK(o[0] == 11 && o[3] == 44);
}

/* ---- events, clock, determinism ---- */

static void test_eventfd_and_ids(void)
{
    static struct run r;
    OK(run_setup(&r, 0, 0, 1.0));
    int fd = npu_system_event_fd(r.s);
    struct npu_event *ev;
    drain(r.s, &ev); /* the load's MEMORY event */
    struct pollfd p = {fd, POLLIN, 0};
    int idle = poll(&p, 1, 0);
    int32_t ids[10];
    for (int i = 0; i < 10; i++)
        ids[i] = submit(&r, i, 1, i * 100);
    p.revents = 0;
    int ready = poll(&p, 1, 0);
    OK(npu_system_run_until_idle(r.s, 0));
    uint32_t n = drain(r.s, &ev);
    p.revents = 0;
    int after = poll(&p, 1, 0);
    int64_t t = 0;
    int mono = 1, ended = 0, on_ch[2] = {0, 0}, where_ok = 1;
    for (uint32_t i = 0; i < n; i++) {
        mono &= ev[i].time_ns >= t;
        t = ev[i].time_ns;
        ended += ev[i].type == NPU_EVENT_WORK_ENDED;
        where_ok &= ev[i].hw_device == 0;
        if (ev[i].type == NPU_EVENT_WORK_REQUESTED)
            where_ok &= ev[i].channel == -1;
        else if (ev[i].channel >= 0 && ev[i].channel < 2)
            on_ch[ev[i].channel]++;
        else
            where_ok = 0;
    }
    int wrong = npu_system_advance(r.s, -1);
    run_teardown(&r);
    CHECK(idle == 0);
    CHECK(ready == 1 && (p.revents & POLLIN) == 0);
    CHECK(after == 0);
    for (int i = 1; i < 10; i++)
        CHECK(ids[i] == ids[i - 1] + 1);
    CHECK(mono && ended == 10);
    CHECK(where_ok && on_ch[0] > 0 && on_ch[1] > 0); /* both of emu-npu's channels ran work */
    CHECK_RC(wrong, NPU_E_INVALID_ARGUMENT);
}

/* Nobody drains: the ring keeps the oldest 65536 events and counts the rest. */
static void test_ring_full_counts_drops(void)
{
    static struct run r;
    OK(run_setup(&r, 0, 1, 1.0));
    struct npu_event *ev;
    drain(r.s, &ev);
    for (int i = 0; i < 33000; i++) {
        int32_t id = submit(&r, 0, 1, 0);   /* REQUESTED, STARTED */
        if (id < 0 || npu_system_cancel_work(r.s, id) != NPU_OK)   /* ENDED */
            break;
    }
    uint64_t dropped = npu_system_events_dropped(r.s);
    char dump[8192];
    size_t len;
    npu_system_dump(r.s, dump, sizeof dump, &len);
    int said = strstr(dump, "Events dropped (ring full): 33464") != NULL;
    uint32_t total = 0, got;
    static struct npu_event buf[1024];
    do {
        npu_system_drain_events(r.s, buf, 1024, &got);
        total += got;
    } while (got);
    run_teardown(&r);
    CHECK(dropped == 3 * 33000 - 65536);
    CHECK(said);
    CHECK(total == 65536);
}

static uint32_t scenario_events(struct npu_event *copy, uint32_t cap, float *out)
{
    static struct run r;
    if (run_setup(&r, NPU_PREEMPT_CHECKPOINT, 0, 200.0) != NPU_OK)
        return 0;
    for (int i = 0; i < 12; i++) {
        submit(&r, i, 10000 + i % 3, (i * 337) % 1001);
        npu_system_advance(r.s, 700000);
    }
    npu_system_run_until_idle(r.s, 0);
    struct npu_event *ev;
    uint32_t n = drain(r.s, &ev);
    n = n < cap ? n : cap;
    memcpy(copy, ev, n * sizeof *ev);
    memcpy(out, r.out, sizeof(float) * 256 * 12);
    run_teardown(&r);
    return n;
}

static void test_virtual_clock_is_repeatable(void)
{
    static struct npu_event a[1024], b[1024];
    static float oa[12 * 256], ob[12 * 256];
    uint32_t na = scenario_events(a, 1024, oa), nb = scenario_events(b, 1024, ob);
    CHECK(na > 36 && na == nb);
    for (uint32_t i = 0; i < na; i++) {
        CHECK(a[i].type == b[i].type && a[i].reason == b[i].reason && a[i].time_ns == b[i].time_ns);
        CHECK(a[i].work.id == b[i].work.id && a[i].work.effective_priority == b[i].work.effective_priority);
    }
    CHECK(memcmp(oa, ob, sizeof oa) == 0);
    int paused = 0;
    for (uint32_t i = 0; i < na; i++)
        paused += a[i].type == NPU_EVENT_WORK_ENDED && a[i].reason == NPU_END_REASON_PAUSED;
    CHECK(paused > 0);
}

static void test_real_clock_refuses_advance_and_runs(void)
{
    static struct run r;
    struct npu_system_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.clock = NPU_CLOCK_REAL;
    cfg.speed_factor = 0.01;
    OK(npu_system_create(&cfg, &r.s));
    r.b = mlp_model(256, 256, 256, 7);
    OK(npu_system_load_model(r.s, 0, mb_model(r.b), NULL, &r.model));
    unsigned seed = 99;
    for (int k = 0; k < 256; k++)
        r.in[0][k] = frand(&seed);
    for (int i = 0; i < 4; i++) {
        r.ib[i] = (struct npu_buffer){r.in[i], sizeof r.in[i]};
        r.ob[i] = (struct npu_buffer){r.out[i], sizeof r.out[i]};
    }
    int wrong = npu_system_advance(r.s, 1000);
    int32_t id = submit(&r, 0, 1, 0);
    int fd = npu_system_event_fd(r.s);
    int done = 0;
    struct npu_event evs[64];
    for (int spins = 0; spins < 500 && !done; spins++) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 10);
        uint32_t n;
        npu_system_drain_events(r.s, evs, 64, &n);
        for (uint32_t i = 0; i < n; i++)
            done |= evs[i].type == NPU_EVENT_WORK_ENDED && evs[i].work.id == id &&
                    evs[i].reason == NPU_END_REASON_COMPLETED;
    }
    float want[256];
    expected_mlp_output(want);
    int same = memcmp(r.out[0], want, sizeof want) == 0;
    run_teardown(&r);
    CHECK_RC(wrong, NPU_E_WRONG_CLOCK);
    CHECK(done);
    CHECK(same);
}

/* Waits (polling the eventfd, 10 s at most) for the final ENDED of every id;
 * copies the WORK events into evs.  Returns how many. */
static uint32_t real_clock_collect(struct npu_system *s, const int32_t *ids, int nids, struct npu_event *evs,
                                   uint32_t cap)
{
    uint32_t n = 0;
    int done = 0;
    for (int spins = 0; spins < 1000 && done < nids; spins++) {
        struct pollfd p = {npu_system_event_fd(s), POLLIN, 0};
        poll(&p, 1, 10);
        uint32_t got = 0;
        npu_system_drain_events(s, evs + n, cap - n, &got);
        for (uint32_t i = n; i < n + got; i++)
            for (int k = 0; k < nids; k++)
                done += evs[i].type == NPU_EVENT_WORK_ENDED && evs[i].reason != NPU_END_REASON_PAUSED &&
                        evs[i].work.id == ids[k];
        n += got;
    }
    return n;
}

/* Preemption on the worker thread (slices computed ahead of their boundary,
 * the preemptor's boundary spun to): a checkpointed job resumes bit-identical,
 * a killed one restarts, and the high job runs in between. */
static void test_real_clock_preemption_pauses_and_resumes(void)
{
    int32_t modes[2] = {NPU_PREEMPT_CHECKPOINT, NPU_PREEMPT_KILL_RESTART};
    for (int k = 0; k < 2; k++) {
        static struct run r;
        struct npu_system_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.clock = NPU_CLOCK_REAL;
        cfg.preemption_mode = modes[k];
        OK(npu_system_create(&cfg, &r.s));
        r.b = mlp_model(256, 256, 256, 7);
        /* about 12 slices of 30 ms on emu-gpu: the high job arrives mid-run */
        struct npu_load_params p = {.cost_scale = 5000.0};
        int rl = npu_system_load_model(r.s, 1, mb_model(r.b), &p, &r.model);
        unsigned seed = 99;
        for (int i = 0; i < 2; i++) {
            for (int e = 0; e < 256; e++)
                r.in[i][e] = frand(&seed);
            r.ib[i] = (struct npu_buffer){r.in[i], sizeof r.in[i]};
            r.ob[i] = (struct npu_buffer){r.out[i], sizeof r.out[i]};
        }
        int32_t low = rl == NPU_OK ? submit(&r, 0, 10001, 1000) : -1;
        static struct npu_event evs[64];
        uint32_t n = 0;
        for (int spins = 0; spins < 1000 && low > 0 && find_ev(evs, n, NPU_EVENT_WORK_STARTED, low, -1, 0) < 0;
             spins++) {
            struct pollfd pf = {npu_system_event_fd(r.s), POLLIN, 0};
            poll(&pf, 1, 10);
            uint32_t got = 0;
            npu_system_drain_events(r.s, evs + n, 64 - n, &got);
            n += got;
        }
        int32_t high = submit(&r, 1, 10001, 0);
        int32_t ids[2] = {low, high};
        n += real_clock_collect(r.s, ids, 2, evs + n, 64 - n);
        float want[256];
        expected_mlp_output(want);
        int same = memcmp(r.out[0], want, sizeof want) == 0;
        run_teardown(&r);
        OK(rl);
        CHECK(low > 0 && high > 0);
        int paused = find_ev(evs, n, NPU_EVENT_WORK_ENDED, low, NPU_END_REASON_PAUSED, 0);
        int h_start = find_ev(evs, n, NPU_EVENT_WORK_STARTED, high, -1, 0);
        int h_end = find_ev(evs, n, NPU_EVENT_WORK_ENDED, high, NPU_END_REASON_COMPLETED, 0);
        int resumed = find_ev(evs, n, NPU_EVENT_WORK_STARTED, low, NPU_START_REASON_RESUMED, 0);
        int l_end = find_ev(evs, n, NPU_EVENT_WORK_ENDED, low, NPU_END_REASON_COMPLETED, 0);
        CHECK(paused >= 0 && paused < h_start && h_start < h_end && h_end < resumed && resumed < l_end);
        CHECK(evs[h_start].time_ns >= evs[paused].time_ns);
        CHECK(same);
    }
}

/* Several threads submit, cancel and drain at once on the real clock: what
 * `make tsan` runs. */
struct stress {
    struct npu_system *s;
    uint32_t model;
    int thread;
    int32_t submitted, ended;
    float in[32][64], out[32][64];
};

static void *stress_submitter(void *arg)
{
    struct stress *st = arg;
    for (int i = 0; i < 32; i++) {
        struct npu_buffer ib = {st->in[i], sizeof st->in[i]}, ob = {st->out[i], sizeof st->out[i]};
        struct npu_work_request q = req(st->model, 10000 + st->thread, (i * 131) % 1001, &ib, &ob);
        int32_t id;
        if (npu_system_submit_work(st->s, &q, &id) == NPU_OK) {
            __atomic_add_fetch(&st->submitted, 1, __ATOMIC_SEQ_CST);
            if (i % 5 == 4)
                npu_system_cancel_work(st->s, id);
        }
        if (i % 7 == 0) {
            struct npu_scheduling_config c = {0, 2000, 10000 + st->thread, (i * 17) % 1001, true, false};
            npu_system_update_scheduling_configs(st->s, &c, 1);
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Loads, uses and unloads a model over and over while others run: more
 * loads than the hardware's model table first holds (16, 32), so it grows
 * while the channel threads run the other threads' jobs. */
enum { CHURN_ROUNDS = 40 };
struct churn {
    struct npu_system *s;
    int32_t submitted;
    int rc;
    float in[64], out[4][64];
};

static void *stress_churn(void *arg)
{
    struct churn *c = arg;
    struct mb *b = mlp_model(64, 64, 64, 5);
    for (int round = 0; round < CHURN_ROUNDS; round++) {
        uint32_t model;
        struct npu_load_params p = {.cost_scale = 20.0};
        int rc = npu_system_load_model(c->s, round % 2 ? 3 : 0, mb_model(b), &p, &model);
        if (rc != NPU_OK) {
            c->rc = rc;
            break;
        }
        for (int i = 0; i < 4; i++) {
            struct npu_buffer ib = {c->in, sizeof c->in}, ob = {c->out[i], sizeof c->out[i]};
            struct npu_work_request q = req(model, 20000, i * 250, &ib, &ob);
            int32_t id;
            if (npu_system_submit_work(c->s, &q, &id) == NPU_OK)
                __atomic_add_fetch(&c->submitted, 1, __ATOMIC_SEQ_CST);
        }
        struct timespec ts = {0, 300000 * (round % 3)};
        nanosleep(&ts, NULL);
        /* unloading ends whatever is still queued or running: CANCELLED_SYSTEM */
        rc = npu_system_unload_model(c->s, model);
        if (rc != NPU_OK) {
            c->rc = rc;
            break;
        }
    }
    free(b);
    return NULL;
}

static void test_real_clock_stress(void)
{
    struct npu_system_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.clock = NPU_CLOCK_REAL;
    cfg.speed_factor = 0.05;
    struct npu_system *s;
    OK(npu_system_create(&cfg, &s));
    struct mb *b = mlp_model(64, 64, 64, 3);
    uint32_t model;
    int rl = npu_system_load_model(s, 0, mb_model(b), NULL, &model);
    free(b);
    OK(rl);
    enum { T = 4 };
    static struct stress st[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        memset(&st[t], 0, sizeof st[t]);
        st[t].s = s, st[t].model = model, st[t].thread = t;
        pthread_create(&th[t], NULL, stress_submitter, &st[t]);
    }
    static struct churn churn;
    memset(&churn, 0, sizeof churn);
    churn.s = s;
    pthread_t churner;
    pthread_create(&churner, NULL, stress_churn, &churn);
    pthread_join(churner, NULL);
    int32_t ended = 0, submitted = 0, pending_threads = T;
    struct npu_event evs[256];
    char dump[16384];
    size_t len;
    for (int spins = 0; spins < 4000; spins++) {
        uint32_t n;
        npu_system_drain_events(s, evs, 256, &n);
        for (uint32_t i = 0; i < n; i++)
            ended += evs[i].type == NPU_EVENT_WORK_ENDED && evs[i].reason != NPU_END_REASON_PAUSED;
        if (spins % 50 == 0)
            npu_system_dump(s, dump, sizeof dump, &len);
        if (pending_threads) {
            pending_threads = 0;
            for (int t = 0; t < T; t++)
                pending_threads += __atomic_load_n(&st[t].submitted, __ATOMIC_SEQ_CST) < 32;
        }
        submitted = churn.submitted;
        for (int t = 0; t < T; t++)
            submitted += __atomic_load_n(&st[t].submitted, __ATOMIC_SEQ_CST);
        if (!pending_threads && ended == submitted)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    npu_system_destroy(s);
    CHECK_RC(churn.rc, NPU_OK);
    CHECK(churn.submitted == 4 * CHURN_ROUNDS);
    CHECK(submitted == T * 32 + 4 * CHURN_ROUNDS);
    CHECK(ended == submitted);
}

/* ---- the loader, errors, dump ---- */

static void test_loader(void)
{
    struct npu_system_config cfg;
    memset(&cfg, 0, sizeof cfg);
    struct npu_system *s = NULL;
    cfg.driver_path = "/nonexistent/driver.so";
    CHECK_RC(npu_system_create(&cfg, &s), NPU_E_DRIVER_LOAD_FAILED);
    CHECK(s == NULL);
    cfg.driver_path = "libm.so.6"; /* loads, but is no driver */
    CHECK_RC(npu_system_create(&cfg, &s), NPU_E_DRIVER_NO_ENTRY);
    cfg.driver_path = NULL;
    cfg.preemption_mode = 9;
    CHECK_RC(npu_system_create(&cfg, &s), NPU_E_INVALID_ARGUMENT);
    cfg.preemption_mode = 0;
    cfg.thermal_thresholds_c[0] = 50, cfg.thermal_thresholds_c[1] = 40;
    CHECK_RC(npu_system_create(&cfg, &s), NPU_E_INVALID_ARGUMENT);
    if (!g_driver_so)
        return;
    memset(&cfg, 0, sizeof cfg);
    cfg.driver_path = g_driver_so;
    OK(npu_system_create(&cfg, &s));
    struct npu_device_info info;
    int ri = npu_system_get_device_info(s, 0, &info);
    struct mb *b = binary_model(NPU_OP_ADD, 3, NPU_FUSE_RELU);
    uint32_t m;
    int rl = npu_system_load_model(s, 0, mb_model(b), NULL, &m);
    float x[3] = {1, -5, 2}, y[3] = {1, 1, 1}, o[3];
    struct npu_buffer in[2] = {{x, 12}, {y, 12}}, out[1] = {{o, 12}};
    struct npu_work_request q = req(m, 1, 0, in, out);
    q.input_count = 2;
    int32_t id;
    int rs = npu_system_submit_work(s, &q, &id);
    npu_system_run_until_idle(s, 0);
    struct npu_scheduling_config bad = {0, 2000, 1, -1, true, false};
    int rc_bad = npu_system_set_scheduling_configs(s, &bad, 1);
    uint32_t count = npu_system_device_count(s);
    npu_system_destroy(s);
    free(b);
    OK(ri);
    CHECK(count >= 1 && strchr(info.name, '-') && info.name[0] != '-');
    OK(rl);
    OK(rs);
    CHECK(o[0] == 2 && o[1] == 0 && o[2] == 3);
    CHECK_RC(rc_bad, NPU_E_INVALID_PRIORITY);
}

static void test_errors_and_dump(void)
{
    CHECK(strcmp(npu_error_name(NPU_E_WEIGHT_MEMORY_FULL), "WEIGHT_MEMORY_FULL") == 0);
    CHECK(strcmp(npu_error_name(NPU_OK), "OK") == 0);
    CHECK(strcmp(npu_error_name(12345), "UNKNOWN") == 0);
    for (int c = -1; c >= NPU_E_OFFLINE; c--)
        CHECK(strcmp(npu_error_name(c), "UNKNOWN") != 0 && strlen(npu_strerror(c)) > 5);
    struct npu_system *s = sys_new(NPU_CLOCK_VIRTUAL, 0);
    CHECK(s);
    char small[16];
    size_t len = 0;
    int rc = npu_system_dump(s, small, sizeof small, &len);
    char *big = malloc(len + 1);
    size_t len2 = 0;
    int rc2 = npu_system_dump(s, big, len + 1, &len2);
    int has = strstr(big, "emu-hetero") && strstr(big, "Thermal");
    free(big);
    npu_system_destroy(s);
    CHECK_RC(rc, NPU_E_BUFFER_TOO_SMALL);
    CHECK(strlen(small) == 15);
    OK(rc2);
    CHECK(len2 == len && has);
}

/* ---- the runner ---- */

struct test {
    const char *name;
    void (*fn)(void);
};
#define T(f) {#f, f}
static const struct test TESTS[] = {
    T(test_run_model_matches_kernels),
    T(test_run_model_shapes_at_execution),
    T(test_plan_instances_are_kept_per_input_shapes),
    T(test_hw_shapes_at_submission),
    T(test_run_model_data_dependent_shapes),
    T(test_hw_data_dependent_shapes),
    T(test_sliced_run_equals_whole_run), T(test_arena_shared_by_liveness), T(test_validation_errors),
    T(test_validation_conv_and_fc_shapes), T(test_validation_survives_random_mutation), T(test_devices), T(test_supported_operations),
    T(test_unknown_operation_is_unsupported_not_invalid),
    T(test_configs_refused_and_atomic), T(test_admission_refusals),
    T(test_priority_order_and_effective_priority), T(test_checkpoint_pause_resume_identical),
    T(test_kill_restart), T(test_vts_later_higher_priority_finishes_first), T(test_fcfs_ignores_priority),
    T(test_cancel), T(test_thermal_throttling_and_severities), T(test_thermal_rises_with_load),
    T(test_thermal_override_holds_until_released),
    T(test_capacity_errors), T(test_emulated_weights_cost_their_streaming_time), T(test_hetero_places_on_a_part), T(test_faults_fail_hang_reset),
    T(test_crash_aborts), T(test_unload_cancels_system), T(test_model_table_grows_under_live_work),
    T(test_eventfd_and_ids), T(test_ring_full_counts_drops),
    T(test_virtual_clock_is_repeatable), T(test_real_clock_refuses_advance_and_runs),
    T(test_real_clock_preemption_pauses_and_resumes),
    T(test_real_clock_stress), T(test_loader), T(test_errors_and_dump),
};

int main(int argc, char **argv)
{
    const char *only = NULL, *skip = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--only"))
            only = argv[i + 1];
        else if (!strcmp(argv[i], "--skip"))
            skip = argv[i + 1];
        else if (!strcmp(argv[i], "--driver-so"))
            g_driver_so = argv[i + 1];
        else {
            fprintf(stderr, "usage: %s [--only SUBSTR] [--skip SUBSTR] [--driver-so PATH]\n", argv[0]);
            return 2;
        }
    }
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof TESTS / sizeof *TESTS; i++) {
        if ((only && !strstr(TESTS[i].name, only)) || (skip && strstr(TESTS[i].name, skip)))
            continue;
        t_failure = NULL;
        TESTS[i].fn();
        if (t_failure) {
            printf("FAIL %s: %s\n", TESTS[i].name, t_failure);
            failed++;
        } else {
            printf("PASS %s\n", TESTS[i].name);
            passed++;
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
