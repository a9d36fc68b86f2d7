/* SPDX-License-Identifier: MIT */
/* NNT_DEBUG_TASKS (lib/codelets/debug.c): each fault it is meant to find is made on purpose
 * by a codelet of this file, and found, named in the log and counted (nnt_ctx_wait and
 * nnt_ctx_destroy fail after it):
 *   - a kernel that writes a buffer it declares read-only;
 *   - a kernel that reads a buffer it declares write-only sees the poison (all bits set);
 *   - two handles on the same memory written and read by tasks running at once;
 *   - a task run before the write submitted ahead of it (a handle whose sequential
 *     consistency is off, so that StarPU does not order them, the writer held back by
 *     another handle);
 * and a correct pair of tasks (write, then read) raises nothing. main() sets the variable
 * before any context reads it. */
#include "testutil.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static nnt_ctx *ctx;
static char logged[8][512];
static int nlogged;

static void on_log(int level, const char *msg, void *user)
{
    (void)user;
    if (level == NNT_LOG_ERROR && nlogged < 8)
        snprintf(logged[nlogged++], sizeof logged[0], "%s", msg);
}

static int logged_has(const char *what)
{
    for (int i = 0; i < nlogged; i++)
        if (strstr(logged[i], what))
            return 1;
    return 0;
}

static void setup(void)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncpus = 2;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    nlogged = 0;
    EXPECT_OK(nnt_log_set(on_log, NULL));
}

static void teardown(void)
{
    unsigned long faults = nnt_debug_tasks_faults() - ctx->debug_faults;
    int rc = nnt_ctx_destroy(ctx);
    ck_assert_int_eq(rc, faults ? NNT_E_RUNTIME : NNT_OK);
    nnt_log_set(NULL, NULL);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* buffers: x (4 floats), declared R; adds 1 to x[0] */
static void writes_its_input(void *buffers[], void *arg)
{
    (void)arg;
    ((float *)STARPU_VECTOR_GET_PTR(buffers[0]))[0] += 1.0f;
}

/* buffers: w (W), out (RW): out[0] = w[0], reading what it declared write-only */
static void reads_its_output(void *buffers[], void *arg)
{
    (void)arg;
    memcpy((void *)STARPU_VECTOR_GET_PTR(buffers[1]), (void *)STARPU_VECTOR_GET_PTR(buffers[0]),
           sizeof(float));
}

/* buffers: x (W or R): sleeps 100 ms, then writes 5 into x[0] when it may (arg 1) */
static void slow_task(void *buffers[], void *arg)
{
    sleep_ms(100);
    if (*(const int *)arg)
        ((float *)STARPU_VECTOR_GET_PTR(buffers[0]))[0] = 5.0f;
}

/* buffers: x (R): nothing (a reader) */
static void reader(void *buffers[], void *arg)
{
    (void)buffers, (void)arg;
}

#define CODELET(var, fn) \
    static struct starpu_codelet var = {.name = #fn, .cpu_funcs = {fn}, \
                                        .nbuffers = STARPU_VARIABLE_NBUFFERS}
CODELET(writes_cl, writes_its_input);
CODELET(reads_out_cl, reads_its_output);
CODELET(slow_cl, slow_task);
CODELET(reader_cl, reader);

static nnt_tensor *vector_of(float value)
{
    int64_t shape[1] = {4};
    float v[4] = {value, value, value, value};
    nnt_tensor *t = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, shape, NULL, &t));
    EXPECT_OK(nnt_tensor_copy_from_host(t, v, sizeof v));
    return t;
}

static int submit(struct starpu_codelet *cl, int nbuf, const struct starpu_data_descr *bufs,
                  int arg)
{
    return nnt_submit(ctx, cl, nbuf, bufs, &arg, sizeof arg);
}

START_TEST(test_write_to_read_buffer)
{
    nnt_tensor *x = vector_of(1.0f);
    struct starpu_data_descr b[1] = {{x->tiles[0].handle, STARPU_R}};
    unsigned long before = nnt_debug_tasks_faults();
    EXPECT_OK(submit(&writes_cl, 1, b, 0));
    ck_assert_int_eq(nnt_ctx_wait(ctx), NNT_E_RUNTIME);
    ck_assert_uint_eq(nnt_debug_tasks_faults(), before + 1);
    ck_assert(logged_has("writes_its_input: NNT_DEBUG_TASKS: the task wrote its buffer 0, "
                         "which it declares read-only"));
    nnt_tensor_destroy(x);
}
END_TEST

START_TEST(test_read_of_write_buffer)
{
    nnt_tensor *w = vector_of(7.0f), *out = vector_of(0.0f);
    struct starpu_data_descr b[2] = {{w->tiles[0].handle, STARPU_W},
                                     {out->tiles[0].handle, STARPU_RW}};
    EXPECT_OK(submit(&reads_out_cl, 2, b, 0));
    EXPECT_OK(nnt_ctx_wait(ctx));   /* not a fault it can name: the poison shows it */
    float got[4];
    EXPECT_OK(nnt_tensor_copy_to_host(out, got, sizeof got));
    uint32_t bits;
    memcpy(&bits, &got[0], sizeof bits);
    ck_assert_uint_eq(bits, 0xffffffffu);   /* 7.0 without the poison */
    nnt_tensor_destroy(w);
    nnt_tensor_destroy(out);
}
END_TEST

START_TEST(test_shared_memory)
{
    int ncpus = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpus, NULL));
    if (ncpus < 2) {
        printf("test_debug_tasks: shared memory needs 2 CPU workers, %d here: skipped\n",
               ncpus);
        return;
    }
    float *memory = calloc(4, sizeof *memory);
    starpu_data_handle_t h1, h2;
    starpu_vector_data_register(&h1, STARPU_MAIN_RAM, (uintptr_t)memory, 4, sizeof(float));
    starpu_vector_data_register(&h2, STARPU_MAIN_RAM, (uintptr_t)memory, 4, sizeof(float));
    struct starpu_data_descr w[1] = {{h1, STARPU_W}}, r[1] = {{h2, STARPU_R}};
    EXPECT_OK(submit(&slow_cl, 1, w, 1));
    EXPECT_OK(submit(&slow_cl, 1, r, 0));   /* both ready: they run together */
    ck_assert_int_eq(nnt_ctx_wait(ctx), NNT_E_RUNTIME);
    ck_assert(logged_has("NNT_DEBUG_TASKS: buffer 0 overlaps buffer 0 of a slow_task task "
                         "running at the same time, one of them writing: two handles share "
                         "memory"));
    starpu_data_unregister(h1);
    starpu_data_unregister(h2);
    free(memory);
}
END_TEST

START_TEST(test_out_of_order)
{
    nnt_tensor *x = vector_of(1.0f), *gate = vector_of(0.0f);
    starpu_data_handle_t h = x->tiles[0].handle, g = gate->tiles[0].handle;
    starpu_data_set_sequential_consistency_flag(h, 0);   /* StarPU orders nothing on h */
    struct starpu_data_descr slow[1] = {{g, STARPU_RW}};
    struct starpu_data_descr w[2] = {{h, STARPU_RW}, {g, STARPU_R}}, r[1] = {{h, STARPU_R}};
    EXPECT_OK(submit(&slow_cl, 1, slow, 1));
    EXPECT_OK(submit(&reader_cl, 2, w, 0));   /* a writer of h, waiting 100 ms for g */
    EXPECT_OK(submit(&reader_cl, 1, r, 0));   /* ready at once: runs before the writer */
    ck_assert_int_eq(nnt_ctx_wait(ctx), NNT_E_RUNTIME);
    ck_assert(logged_has("reader: NNT_DEBUG_TASKS: buffer 0: the task starts after 1 writes "
                         "of its handle ran, but 2 were submitted before it: StarPU ran the "
                         "tasks out of order"));
    nnt_tensor_destroy(x);
    nnt_tensor_destroy(gate);
}
END_TEST

START_TEST(test_correct_tasks)
{
    nnt_tensor *x = vector_of(1.0f);
    struct starpu_data_descr w[1] = {{x->tiles[0].handle, STARPU_RW}},
                             r[1] = {{x->tiles[0].handle, STARPU_R}};
    unsigned long before = nnt_debug_tasks_faults();
    EXPECT_OK(submit(&slow_cl, 1, w, 1));
    EXPECT_OK(submit(&reader_cl, 1, r, 0));
    EXPECT_OK(submit(&slow_cl, 1, w, 1));
    EXPECT_OK(nnt_ctx_wait(ctx));
    ck_assert_uint_eq(nnt_debug_tasks_faults(), before);
    ck_assert_int_eq(nlogged, 0);
    float got[4];
    EXPECT_OK(nnt_tensor_copy_to_host(x, got, sizeof got));
    ck_assert(got[0] == 5.0f && got[1] == 1.0f);
    const char *kernels = NULL;
    EXPECT_OK(nnt_ctx_kernels(ctx, &kernels));
    ck_assert_ptr_nonnull(strstr(kernels, "every task checked on CPU workers (NNT_DEBUG_TASKS)"));
    nnt_tensor_destroy(x);
}
END_TEST

static Suite *debug_tasks_suite(void)
{
    Suite *s = suite_create("debug_tasks");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_write_to_read_buffer);
    tcase_add_test(tc, test_read_of_write_buffer);
    tcase_add_test(tc, test_shared_memory);
    tcase_add_test(tc, test_out_of_order);
    tcase_add_test(tc, test_correct_tasks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    setenv("NNT_DEBUG_TASKS", "1", 1);
    return run_suite(debug_tasks_suite());
}
