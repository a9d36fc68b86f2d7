/* SPDX-License-Identifier: MIT */
/* API misuse and bad input: every case returns an NNT_E_* code with a message, never crashes.
 * Also: status names, version, logging, context life cycle. */
#define _GNU_SOURCE   /* dlvsym */
#include "testutil.h"

#include <dlfcn.h>
#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

START_TEST(strerror_names_every_code)
{
    int codes[] = {NNT_OK, NNT_E_INVAL, NNT_E_NOMEM, NNT_E_IO, NNT_E_FORMAT, NNT_E_SHAPE,
                   NNT_E_UNSUPPORTED, NNT_E_RUNTIME, NNT_E_BUSY, NNT_E_STATE};
    int n = (int)(sizeof codes / sizeof *codes);
    for (int i = 0; i < n; i++) {
        const char *name = nnt_strerror(codes[i]);
        ck_assert_ptr_nonnull(name);
        ck_assert_str_ne(name, nnt_strerror(12345));
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(name, nnt_strerror(codes[j]));
    }
    ck_assert_str_eq(nnt_strerror(-1000), "unknown status code");
}
END_TEST

START_TEST(version_matches_header)
{
    int number = 0;
    const char *string = NULL;
    EXPECT_OK(nnt_version(&number, &string));
    ck_assert_int_eq(number, NNT_VERSION_NUMBER);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", NNT_VERSION_MAJOR, NNT_VERSION_MINOR, NNT_VERSION_PATCH);
    ck_assert_str_eq(string, want);
    EXPECT_OK(nnt_version(&number, NULL));
    EXPECT_FAIL_MSG(nnt_version(NULL, NULL), NNT_E_INVAL, "nnt_version");
}
END_TEST

struct log_capture {
    int calls;
    int last_level;
    char last[1024];
};

static void capture(int level, const char *msg, void *user)
{
    struct log_capture *c = user;
    c->calls++;
    c->last_level = level;
    snprintf(c->last, sizeof c->last, "%s", msg);
}

START_TEST(log_hook_and_levels)
{
    struct log_capture cap = {0};
    int level = -1;
    EXPECT_OK(nnt_log_get_level(&level));
    ck_assert_int_eq(level, NNT_LOG_WARN);
    EXPECT_OK(nnt_log_set(capture, &cap));
    nnt_tensor *t;
    EXPECT_RC(nnt_tensor_create(NULL, NNT_FP32, 1, (int64_t[]){4}, NULL, &t), NNT_E_INVAL);
    ck_assert_int_eq(cap.calls, 0);                /* errors are logged at debug level */
    EXPECT_OK(nnt_log_set_level(NNT_LOG_DEBUG));
    EXPECT_RC(nnt_tensor_create(NULL, NNT_FP32, 1, (int64_t[]){4}, NULL, &t), NNT_E_INVAL);
    ck_assert_int_eq(cap.calls, 1);
    ck_assert_int_eq(cap.last_level, NNT_LOG_DEBUG);
    ck_assert_msg(strstr(cap.last, "nnt_tensor_create") != NULL, "log: %s", cap.last);
    EXPECT_FAIL_MSG(nnt_log_set_level(7), NNT_E_INVAL, "nnt_log_set_level");
    EXPECT_FAIL_MSG(nnt_log_set_level(-1), NNT_E_INVAL, "nnt_log_set_level");
    EXPECT_FAIL_MSG(nnt_log_get_level(NULL), NNT_E_INVAL, "nnt_log_get_level");
    EXPECT_OK(nnt_log_set(NULL, NULL));
}
END_TEST

START_TEST(log_level_from_environment)
{
    int level = -1;
    setenv("NNT_LOG_LEVEL", "debug", 1);   /* read on first use; each test runs in a fork */
    EXPECT_OK(nnt_log_get_level(&level));
    ck_assert_int_eq(level, NNT_LOG_DEBUG);
}
END_TEST

START_TEST(log_level_from_environment_number)
{
    int level = -1;
    setenv("NNT_LOG_LEVEL", "0", 1);
    EXPECT_OK(nnt_log_get_level(&level));
    ck_assert_int_eq(level, NNT_LOG_ERROR);
}
END_TEST

/* ---- context options ----------------------------------------------------------------- */

static void expect_bad_options(nnt_ctx_options *o, int want)
{
    nnt_ctx *ctx = (nnt_ctx *)&ctx;   /* must be reset to NULL on failure */
    EXPECT_FAIL_MSG(nnt_ctx_create(o, &ctx), want, "nnt_ctx_create");
    ck_assert_ptr_null(ctx);
}

START_TEST(ctx_rejects_bad_options)
{
    nnt_ctx_options o;
    EXPECT_FAIL_MSG(nnt_ctx_options_init(NULL), NNT_E_INVAL, "nnt_ctx_options_init");
    EXPECT_FAIL_MSG(nnt_ctx_create(NULL, NULL), NNT_E_INVAL, "nnt_ctx_create");

    nnt_ctx_options_init(&o); o.size = 8;                      expect_bad_options(&o, NNT_E_INVAL);
    nnt_ctx_options_init(&o); o.size = sizeof o + 8;           expect_bad_options(&o, NNT_E_UNSUPPORTED);
    nnt_ctx_options_init(&o); o.ncpus = -2;                    expect_bad_options(&o, NNT_E_INVAL);
    nnt_ctx_options_init(&o); o.ncuda = -5;                    expect_bad_options(&o, NNT_E_INVAL);
    nnt_ctx_options_init(&o); o.ncpus = 0; o.ncuda = 0;        expect_bad_options(&o, NNT_E_INVAL);
    nnt_ctx_options_init(&o); o.sched = "no-such-scheduler";   expect_bad_options(&o, NNT_E_INVAL);
    nnt_ctx_options_init(&o); o.mem_gpu_mib = -1;              expect_bad_options(&o, NNT_E_INVAL);
    nnt_ctx_options_init(&o); o.mem_cpu_mib = -1;              expect_bad_options(&o, NNT_E_INVAL);
    nnt_ctx_options_init(&o); o.swap_mib = 64;                 expect_bad_options(&o, NNT_E_INVAL);
    nnt_ctx_options_init(&o); o.swap_dir = "/etc/hostname/nnt"; o.swap_mib = 64;
    expect_bad_options(&o, NNT_E_IO);   /* (cannot be created under a file) */
    nnt_ctx_options_init(&o); o.swap_dir = "/etc/hostname";    o.swap_mib = 64;
    expect_bad_options(&o, NNT_E_IO);
    nnt_ctx_options_init(&o); o.swap_dir = "/tmp";             o.swap_mib = 1;
    expect_bad_options(&o, NNT_E_INVAL);
    nnt_ctx_options_init(&o); o.swap_dir = "/tmp";             o.swap_mib = 0;
    expect_bad_options(&o, NNT_E_INVAL);
    /* a swap larger than the free space of its file system (1 EiB) */
    nnt_ctx_options_init(&o); o.swap_dir = "/tmp";             o.swap_mib = 1LL << 40;
    expect_bad_options(&o, NNT_E_NOMEM);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "MiB free on the file system"));
    nnt_ctx_options_init(&o); o.perfmodel_dir = "/proc/nnt-cannot-create";
    expect_bad_options(&o, NNT_E_IO);
}
END_TEST

/* A missing swap directory is created with its parents. */
START_TEST(ctx_creates_swap_dir)
{
    char dir[64] = "/tmp/nnt-swap-XXXXXX", swap[96], cmd[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(swap, sizeof swap, "%s/a/b", dir);
    nnt_ctx_options o;
    nnt_ctx_options_init(&o);
    o.ncpus = 1, o.swap_dir = swap, o.swap_mib = 64;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    struct stat st;
    ck_assert(stat(swap, &st) == 0 && S_ISDIR(st.st_mode));
    EXPECT_OK(nnt_ctx_destroy(ctx));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A program built against 0.2 has the shorter nnt_ctx_options (without mpi and distribution)
 * and nnt_mem_stats (without owned_bytes), and binds nnt_ctx_options_init@NNT_0.1: nothing
 * past its structures is written, and both sizes are accepted. */
START_TEST(ctx_accepts_0_2_programs)
{
    typedef int (*init_fn)(nnt_ctx_options *);
    init_fn init_v01 = (init_fn)dlvsym(RTLD_DEFAULT, "nnt_ctx_options_init", "NNT_0.1");
    ck_assert_msg(init_v01 != NULL, "no nnt_ctx_options_init@NNT_0.1: %s", dlerror());
    const size_t v02 = offsetof(nnt_ctx_options, mpi);
    union { nnt_ctx_options o; unsigned char b[sizeof(nnt_ctx_options) + 16]; } u;
    memset(u.b, 0xab, sizeof u.b);
    EXPECT_OK(init_v01(&u.o));
    ck_assert_uint_eq(u.o.size, v02);
    for (size_t i = v02; i < sizeof u.b; i++)
        ck_assert_msg(u.b[i] == 0xab, "byte %zu past the 0.2 structure was written", i);
    ck_assert_int_eq(u.o.ncpus, -1);
    u.o.ncpus = 1;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&u.o, &ctx));   /* mpi, distribution: the defaults, not 0xab.. */
    int ncpus = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpus, NULL));
    ck_assert_int_eq(ncpus, test_expected_ncpus(1));

    const size_t s02 = offsetof(nnt_mem_stats, owned_bytes);
    union { nnt_mem_stats s; unsigned char b[sizeof(nnt_mem_stats) + 16]; } m;
    memset(m.b, 0xcd, sizeof m.b);
    m.s.size = s02;
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &m.s, 0));
    ck_assert_uint_eq(m.s.size, s02);
    ck_assert_int_ge(m.s.nnodes, 1);
    for (size_t i = s02; i < sizeof m.b; i++)
        ck_assert_msg(m.b[i] == 0xcd, "byte %zu past the 0.2 nnt_mem_stats was written", i);
    m.s.size = s02 + 1;   /* neither size */
    EXPECT_FAIL_MSG(nnt_ctx_mem_stats(ctx, &m.s, 0), NNT_E_INVAL, "nnt_ctx_mem_stats");
    EXPECT_OK(nnt_ctx_destroy(ctx));

    /* built now: the whole structure */
    nnt_ctx_options now;
    memset(&now, 0xab, sizeof now);
    EXPECT_OK(nnt_ctx_options_init(&now));
    ck_assert_uint_eq(now.size, sizeof now);
    ck_assert_int_eq(now.mpi, 0);
}
END_TEST

START_TEST(ctx_cuda_request_without_cuda_runtime)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncuda = 1;
    o.ncpus = 1;
    nnt_ctx *ctx = NULL;
    int rc = nnt_ctx_create(&o, &ctx);
    if (rc == NNT_OK) {      /* a CUDA-enabled StarPU on a machine with a GPU */
        int ncuda = 0;
        EXPECT_OK(nnt_ctx_workers(ctx, NULL, &ncuda));
        ck_assert_int_eq(ncuda, 1);
        EXPECT_OK(nnt_ctx_destroy(ctx));
    } else {
        ck_assert_msg(rc == NNT_E_UNSUPPORTED, "rc %d: %s", rc, nnt_ctx_last_error(NULL));
        ck_assert_ptr_null(ctx);
        ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(NULL), "CUDA"));
    }
}
END_TEST

START_TEST(ctx_life_cycle)
{
    nnt_ctx *ctx = test_ctx(), *second = NULL;
    int ncpus = -1, ncuda = -1;
    const char *sched = NULL;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpus, &ncuda));
    ck_assert_int_ge(ncpus, 1);
    ck_assert_int_ge(ncuda, 0);
    EXPECT_OK(nnt_ctx_workers(ctx, NULL, NULL));
    EXPECT_OK(nnt_ctx_sched(ctx, &sched));
    ck_assert_ptr_nonnull(sched);
    EXPECT_FAIL_MSG(nnt_ctx_sched(ctx, NULL), NNT_E_INVAL, "nnt_ctx_sched");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "nnt_ctx_sched"));
    EXPECT_OK(nnt_ctx_wait(ctx));

    EXPECT_FAIL_MSG(nnt_ctx_create(NULL, &second), NNT_E_BUSY, "nnt_ctx_create");
    ck_assert_ptr_null(second);
    EXPECT_OK(nnt_ctx_destroy(ctx));

    /* the destroyed pointer is recognised without being dereferenced */
    EXPECT_FAIL_MSG(nnt_ctx_wait(ctx), NNT_E_STATE, "nnt_ctx_wait");
    EXPECT_FAIL_MSG(nnt_ctx_workers(ctx, &ncpus, NULL), NNT_E_STATE, "nnt_ctx_workers");
    EXPECT_FAIL_MSG(nnt_ctx_destroy(ctx), NNT_E_STATE, "nnt_ctx_destroy");
    EXPECT_FAIL_MSG(nnt_ctx_wait(NULL), NNT_E_INVAL, "nnt_ctx_wait");
    EXPECT_OK(nnt_ctx_destroy(NULL));

    /* a new context can be started after the first one is gone */
    ctx = test_ctx();
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

START_TEST(ctx_options_are_applied)
{
    char dir[] = "/tmp/nnt-test-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char models[sizeof dir + 16];
    snprintf(models, sizeof models, "%s/models/a/b", dir);
    nnt_ctx_options o;
    EXPECT_OK(nnt_ctx_options_init(&o));
    o.ncpus = 1;
    o.sched = "eager";
    o.mem_cpu_mib = 512;
    o.swap_dir = dir;
    o.swap_mib = 64;
    o.perfmodel_dir = models;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    int ncpus = 0;
    const char *sched;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpus, NULL));
    ck_assert_int_eq(ncpus, test_expected_ncpus(1));
    EXPECT_OK(nnt_ctx_sched(ctx, &sched));
    ck_assert_str_eq(sched, "eager");
    ck_assert_str_eq(getenv("STARPU_HOME"), models);
    ck_assert_int_eq(access(models, W_OK), 0);

    /* with a 512 MiB RAM budget and disk swap, a tensor still round-trips */
    nnt_tensor *t;
    float in[300], out[300];
    for (int i = 0; i < 300; i++)
        in[i] = (float)i * 0.5f;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){300}, (int64_t[]){64}, &t));
    EXPECT_OK(nnt_tensor_copy_from_host(t, in, sizeof in));
    EXPECT_OK(nnt_tensor_copy_to_host(t, out, sizeof out));
    ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
    EXPECT_OK(nnt_tensor_destroy(t));
    EXPECT_OK(nnt_ctx_destroy(ctx));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A graph of n one-value tiles filled with 2 and scaled by 1.5, read back: 3.0 everywhere */
static void many_small_tasks(nnt_ctx *ctx, int64_t n)
{
    nnt_tensor *t = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){n}, (int64_t[]){1}, &t));
    EXPECT_OK(nnt_tensor_fill(t, 2.0));
    EXPECT_OK(nnt_tensor_scale(t, 1.5));
    float *x = malloc((size_t)n * sizeof *x);
    EXPECT_OK(nnt_tensor_copy_to_host(t, x, (size_t)n * sizeof *x));
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(x[i] == 3.0f, "tile %lld is %g", (long long)i, (double)x[i]);
    free(x);
    EXPECT_OK(nnt_tensor_destroy(t));
}

/* The tasks in flight are bounded (StarPU's STARPU_LIMIT_MAX/MIN_SUBMITTED_TASKS): 100000
 * and 75000 by default while the context lives; the user's values stand, and a graph far
 * past them runs to the end, a submission waiting while they are reached */
START_TEST(ctx_bounds_tasks_in_flight)
{
    const char *max = "STARPU_LIMIT_MAX_SUBMITTED_TASKS", *min = "STARPU_LIMIT_MIN_SUBMITTED_TASKS";
    unsetenv(max);
    unsetenv(min);
    nnt_ctx *ctx = test_ctx();
    ck_assert_str_eq(getenv(max), "100000");
    ck_assert_str_eq(getenv(min), "75000");
    many_small_tasks(ctx, 3000);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ck_assert_ptr_null(getenv(max));
    ck_assert_ptr_null(getenv(min));
    setenv(max, "8", 1);
    setenv(min, "4", 1);
    ctx = test_ctx();
    ck_assert_str_eq(getenv(max), "8");
    many_small_tasks(ctx, 3000);   /* 6000 tasks, at most 8 in flight */
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ck_assert_str_eq(getenv(max), "8");
    ck_assert_str_eq(getenv(min), "4");
    unsetenv(max);
    unsetenv(min);
}
END_TEST

/* Budgets that cannot work give NNT_E_NOMEM instead of a runtime that waits forever. */
START_TEST(ctx_budget_refuses_what_cannot_fit)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.mem_cpu_mib = 1;
    /* RAM counted in tile bytes: without CUDA workers, whose pinned RAM StarPU takes in
     * 32 MiB chunks (a 1 MiB budget holds no tile then: ctx_budget_counts_pinned_chunks) */
    o.ncuda = 0;
    nnt_ctx *ctx = NULL;
    nnt_tensor *a = NULL, *b = NULL, *big = NULL;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    /* no swap: all tiles together must fit in the 1 MiB budget */
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){300000}, NULL, &big),
                    NNT_E_NOMEM, "nnt_tensor_create");
    ck_assert_ptr_null(big);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "RAM budget"));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){150000}, NULL, &a));
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){150000}, NULL, &b),
                    NNT_E_NOMEM, "nnt_tensor_create");
    EXPECT_OK(nnt_tensor_destroy(a));   /* its bytes are given back */
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){150000}, NULL, &b));
    EXPECT_OK(nnt_tensor_fill(b, 1.0));
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ck_assert_ptr_null(getenv("STARPU_LIMIT_CPU_MEM"));   /* the budget ended with it */

    /* with a swap: tensors up to the swap size, but one task must still fit in RAM */
    char dir[] = "/tmp/nnt-test-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    o.swap_dir = dir;
    o.swap_mib = 16;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){5 << 20}, (int64_t[]){1 << 16},
                                      &big), NNT_E_NOMEM, "nnt_tensor_create");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "swap"));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){1 << 19}, NULL, &big));   /* 2 MiB, one tile */
    EXPECT_FAIL_MSG(nnt_tensor_fill(big, 0.0), NNT_E_NOMEM, "nnt_fill");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "smaller tiles"));
    EXPECT_OK(nnt_tensor_destroy(big));
    EXPECT_OK(nnt_ctx_destroy(ctx));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* With CUDA workers StarPU pins RAM and puts tiles of up to 4 MiB in 16 KiB blocks of 32 MiB
 * chunks, counting each chunk whole against the budget and keeping up to 4 empty ones
 * (lib/ctx_alloc.c): the budget check counts that, and its message gives the smallest budget
 * that holds the tensors, which is then accepted (a budget counted in tile bytes left StarPU
 * waiting forever on an H200, bench/RESULTS-gpu.md). Without a GPU the test hook
 * NNT_TEST_PINNED_RAM=1 makes the checks count RAM so; NNT_TEST_BUDGET_CUDA=1 runs the same
 * on the CUDA workers instead (scripts/gpu-session.sh budget), where StarPU really allocates
 * so and the reads below must come back. */
static nnt_ctx *pinned_budget_ctx(int64_t mib)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncpus = 1;
    o.mem_cpu_mib = mib;
    const char *with_cuda = getenv("NNT_TEST_BUDGET_CUDA");
    if (with_cuda && strcmp(with_cuda, "1") == 0)
        unsetenv("NNT_TEST_PINNED_RAM");
    else
        setenv("NNT_TEST_PINNED_RAM", "1", 1), o.ncuda = 0;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    return ctx;
}

/* "at least N MiB" in the last error, N returned (-1 when absent) */
static long needed_mib(void)
{
    const char *at = strstr(nnt_ctx_last_error(NULL), "need at least ");
    return at ? strtol(at + strlen("need at least "), NULL, 10) : -1;
}

/* The tiny Llama of the budget tests: blocks of C 64 (2 heads), hidden F, V 128, 8 positions. */
static nnt_model_config budget_model(int64_t layers, int64_t hidden)
{
    nnt_model_config c;
    EXPECT_OK(nnt_model_preset("llama-tiny", &c));
    c.vocab = 128, c.max_seq = 8, c.channels = 64, c.heads = 2, c.kv_heads = 2;
    c.hidden = hidden, c.layers = layers;
    return c;
}

/* Tokens (1, 8) and their next tokens, set as m's targets. */
static void budget_tokens(nnt_ctx *ctx, nnt_layer *m, nnt_tensor **tok, nnt_tensor **tgt)
{
    int32_t ids[8] = {1, 5, 9, 2, 7, 3, 8, 4}, next[8] = {5, 9, 2, 7, 3, 8, 4, 6};
    int64_t bt[2] = {1, 8};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, bt, NULL, tok));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, bt, NULL, tgt));
    EXPECT_OK(nnt_tensor_copy_from_host(*tok, ids, sizeof ids));
    EXPECT_OK(nnt_tensor_copy_from_host(*tgt, next, sizeof next));
    EXPECT_OK(nnt_layer_set_targets(m, *tgt));
}

/* The end of a budget test's context: its tasks, tensors, optimizer and model gone. */
static void budget_teardown(nnt_ctx *ctx, nnt_tensor *tok, nnt_tensor *tgt, nnt_optim *opt,
                            nnt_layer *m)
{
    EXPECT_OK(nnt_ctx_wait(ctx));
    nnt_tensor_destroy(tok);
    nnt_tensor_destroy(tgt);
    nnt_optim_destroy(opt);
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}

/* A linear map's or attention's gradient counts in the budget from the first backward that
 * writes it, not from the model's creation: under a 1 MiB budget a model whose values and
 * gradients together exceed it is created, trains with its matrices frozen (their gradients
 * never exist), and unfrozen is refused at its first backward with the budget named,
 * instead of StarPU waiting forever for memory. */
START_TEST(ctx_budget_counts_gradients_when_written)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.mem_cpu_mib = 1;
    o.ncuda = 0;
    /* 2 blocks of C 64, hidden 256: 512 KiB of matrices (their gradients as much), a 32 KiB
     * token table; with the rest the model counts about 0.7 MiB before its matrices'
     * gradients (counting them at creation, as before, refused it there) */
    nnt_model_config c = budget_model(2, 256);
    for (int frozen = 1; frozen >= 0; frozen--) {
        nnt_ctx *ctx = NULL;
        nnt_layer *m = NULL;
        nnt_optim *opt = NULL;
        nnt_tensor *tok = NULL, *tgt = NULL;
        EXPECT_OK(nnt_ctx_create(&o, &ctx));
        EXPECT_OK(nnt_model_create(ctx, &c, 1, 8, NULL, &m));
        EXPECT_OK(nnt_layer_init(m, 3));
        if (frozen) {
            int64_t matrices = 0;
            EXPECT_OK(nnt_layer_freeze(m, "*_proj.weight", 1, &matrices));
            ck_assert_int_eq(matrices, 14);
            nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
            oo.kind = NNT_OPTIM_SGD;   /* no state */
            oo.lr = 0.5;
            EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
            EXPECT_OK(nnt_optim_add_layer(opt, m));
        }
        budget_tokens(ctx, m, &tok, &tgt);
        double loss[3];
        for (int s = 0; s < (frozen ? 3 : 1); s++) {
            EXPECT_OK(nnt_layer_forward(m, tok, NULL));
            EXPECT_OK(nnt_layer_loss(m, &loss[s]));
            if (!frozen) {
                /* the matrices' gradients would take 512 KiB more */
                EXPECT_FAIL_MSG(nnt_layer_backward(m, NULL, NULL), NNT_E_NOMEM,
                                "nnt_layer_backward");
                ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "RAM budget"));
                /* so is a zero-fill of them */
                EXPECT_FAIL_MSG(nnt_layer_zero_grad(m), NNT_E_NOMEM, "nnt_layer_zero_grad");
                break;
            }
            EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
            EXPECT_OK(nnt_optim_step(opt));
            EXPECT_OK(nnt_layer_clear_grad(m));
        }
        if (frozen)
            ck_assert(isfinite(loss[2]) && loss[2] < loss[0]);
        budget_teardown(ctx, tok, tgt, opt, m);
    }
}
END_TEST

/* A model built unwritten (nnt_model_create_empty) counts each parameter in the budget at
 * its first write or conversion, not at creation: under a 1 MiB budget a model whose fp32
 * values exceed it is refused by nnt_model_create at once, and when built empty and left in
 * fp32 by nnt_layer_init and nnt_model_read_hf; given LoRA adapters under bf16 products
 * (its base frozen in bf16) it is initialised, or read from a directory, and trains within
 * the budget, as nnt-train's fine-tuning of a preset or of --load-hf does. */
START_TEST(ctx_budget_counts_frozen_base_in_bf16)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.mem_cpu_mib = 1;
    o.ncuda = 0;
    /* 3 blocks of C 64, hidden 384: 1.03 MiB of fp32 matrices (0.52 MiB in bf16), tables of
     * 32 KiB */
    nnt_model_config c = budget_model(3, 384);
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    lo.rank = 2, lo.targets = "q_proj,v_proj", lo.seed = 4;
    /* the directory read: the model of seed 3, saved from a context without a budget */
    nnt_ctx *ctx = NULL;
    nnt_layer *m = NULL;
    o.mem_cpu_mib = 0;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    EXPECT_OK(nnt_model_create(ctx, &c, 1, 8, NULL, &m));
    EXPECT_OK(nnt_layer_init(m, 3));
    test_make_tmpdir("api-budget");
    const char *dir = test_tmp_path("hf");
    EXPECT_OK(nnt_model_save_hf(m, dir));
    nnt_layer_destroy(m);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    o.mem_cpu_mib = 1;
    double first[2] = {0, 0};
    /* created; empty, fp32, initialised; empty, fp32, read; LoRA in bf16, initialised;
     * LoRA in bf16, read */
    for (int way = 0; way < 5; way++) {
        int read = way == 2 || way == 4, lora = way >= 3;
        m = NULL;
        EXPECT_OK(nnt_ctx_create(&o, &ctx));
        if (way == 0) {   /* refused before any value is written */
            EXPECT_FAIL_MSG(nnt_model_create(ctx, &c, 1, 8, NULL, &m), NNT_E_NOMEM,
                            "nnt_model_create");
            ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "RAM budget"));
            ck_assert_ptr_null(m);
            EXPECT_OK(nnt_ctx_destroy(ctx));
            continue;
        }
        EXPECT_OK(nnt_ctx_set_precision(ctx, lora ? NNT_PRECISION_BF16 : NNT_PRECISION_FP32));
        EXPECT_OK(nnt_model_create_empty(ctx, &c, 1, 8, NULL, &m));
        if (!lora) {
            EXPECT_FAIL_MSG(read ? nnt_model_read_hf(m, dir) : nnt_layer_init(m, 3),
                            NNT_E_NOMEM, read ? "nnt_model_read_hf" : "nnt_layer_init");
            ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "RAM budget"));
            nnt_layer_destroy(m);
            EXPECT_OK(nnt_ctx_destroy(ctx));
            continue;
        }
        EXPECT_OK(nnt_model_lora_add(m, &lo));
        if (read)
            EXPECT_OK(nnt_model_read_hf(m, dir));
        else
            EXPECT_OK(nnt_layer_init(m, 3));
        nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
        oo.lr = 0.05;
        nnt_optim *opt = NULL;
        nnt_tensor *tok = NULL, *tgt = NULL;
        EXPECT_OK(nnt_optim_create(ctx, &oo, &opt));
        EXPECT_OK(nnt_optim_add_layer(opt, m));
        budget_tokens(ctx, m, &tok, &tgt);
        double loss[4];
        for (int s = 0; s < 4; s++) {
            EXPECT_OK(nnt_layer_forward(m, tok, NULL));
            EXPECT_OK(nnt_layer_loss(m, &loss[s]));
            EXPECT_OK(nnt_layer_backward(m, NULL, NULL));
            EXPECT_OK(nnt_optim_step(opt));
            EXPECT_OK(nnt_layer_clear_grad(m));
        }
        ck_assert(isfinite(loss[3]) && loss[3] < loss[0]);
        first[read] = loss[0];
        /* the bf16 base is counted: 512 KiB more do not fit */
        int64_t half_mib = 1 << 17;
        nnt_tensor *more = NULL;
        EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 1, &half_mib, NULL, &more),
                        NNT_E_NOMEM, "RAM budget");
        printf("ctx_budget_counts_frozen_base_in_bf16 (%s): losses %.6f to %.6f; %s\n",
               read ? "read" : "initialised", loss[0], loss[3], nnt_ctx_last_error(ctx));
        budget_teardown(ctx, tok, tgt, opt, m);
    }
    /* the same base of seed 3 either way (the adapters start at B = 0): the same first loss
     * up to the bf16 rounding of the read values, which the products round anyway */
    ck_assert_msg(first[0] == first[1], "first losses %.9g (initialised) %.9g (read)",
                  first[0], first[1]);
    test_remove_tmpdir();
}
END_TEST

START_TEST(ctx_budget_counts_pinned_chunks)
{
    nnt_tensor *a = NULL, *b = NULL, *c = NULL;
    /* 2000 tiles of 1 KiB: 2 MiB of tiles, 2000 blocks of 16 KiB (31.25 MiB) in 2 chunks */
    int64_t a_shape[2] = {2000, 256}, a_tile[2] = {1, 256};
    nnt_ctx *ctx = pinned_budget_ctx(63);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 2, a_shape, a_tile, &a), NNT_E_NOMEM,
                    "nnt_tensor_create");
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "32 MiB chunks"));
    ck_assert_int_eq(needed_mib(), 64);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ck_assert_ptr_null(getenv("STARPU_LIMIT_CPU_MEM"));

    ctx = pinned_budget_ctx(64);   /* the budget the message gave */
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, a_shape, a_tile, &a));
    EXPECT_OK(nnt_tensor_fill(a, 2.5));
    float *got = test_to_host(a, NULL);   /* in RAM: 2 chunks on a GPU machine */
    ck_assert_float_eq(got[0], 2.5f);
    ck_assert_float_eq(got[2000 * 256 - 1], 2.5f);
    free(got);
    /* 5 MiB in one tile is allocated whole, beside the 2 chunks: 69 MiB */
    int64_t five_mib = 5 << 18;
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 1, &five_mib, NULL, &b), NNT_E_NOMEM,
                    "nnt_tensor_create");
    ck_assert_int_eq(needed_mib(), 69);
    /* once a is gone its 2 chunks may stay, empty: still 69 MiB */
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 1, &five_mib, NULL, &b), NNT_E_NOMEM,
                    "nnt_tensor_create");
    ck_assert_int_eq(needed_mib(), 69);
    /* 1 MiB goes into a kept chunk: 2 chunks, 64 MiB, fits */
    int64_t one_mib = 1 << 18;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, &one_mib, NULL, &b));
    EXPECT_OK(nnt_tensor_fill(b, -1.0));
    got = test_to_host(b, NULL);
    ck_assert_float_eq(got[one_mib - 1], -1.0f);
    free(got);
    /* tiles of exactly 4 MiB go into chunks too (7 to a chunk at best): 15 of them and b,
     * 61 MiB in blocks, take 3 chunks, 96 MiB */
    int64_t c_shape[2] = {15, 1 << 20}, c_tile[2] = {1, 1 << 20};
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 2, c_shape, c_tile, &c), NNT_E_NOMEM,
                    "nnt_tensor_create");
    ck_assert_int_eq(needed_mib(), 96);
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_ctx_destroy(ctx));
    unsetenv("NNT_TEST_PINNED_RAM");

    /* On CUDA workers a GPU budget is counted alike, task by task: a 40 MiB one holds a
     * task on a tile of 1 KiB (one chunk) but not one on a 30 MiB tile (beside the 4
     * empty chunks StarPU may keep: 158 MiB) */
    const char *with_cuda = getenv("NNT_TEST_BUDGET_CUDA");
    if (!(with_cuda && strcmp(with_cuda, "1") == 0))
        return;
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.ncpus = 1;
    o.mem_gpu_mib = 40;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    ck_assert(test_ctx_has_cuda(ctx));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, a_shape, a_tile, &a));
    EXPECT_OK(nnt_tensor_fill(a, 0.5));
    got = test_to_host(a, NULL);
    ck_assert_float_eq(got[2000 * 256 - 1], 0.5f);
    free(got);
    int64_t thirty_mib = 30 << 18;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, &thirty_mib, NULL, &b));
    EXPECT_FAIL_MSG(nnt_tensor_fill(b, 1.0), NNT_E_NOMEM, "GPU budget");
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

/* NNT_HOST_RAM_MIB above hwloc's count raises the main memory StarPU counts (a budget
 * above hwloc's figure is held to StarPU's, so the budget nnt_ctx_mem_stats reports shows
 * it) through a topology file of this machine, which is gone, with its variables, once the
 * context started; the workers are the same; below, StarPU's is not lowered; not a number:
 * NNT_E_INVAL naming it. (A virtual machine whose NUMA nodes count less than the kernel gets
 * the same without the variable, from the kernel's figure.) The default budget is 15/16 of
 * the memory available at start, at most the variable's figure. */
static int64_t ram_budget_mib(nnt_ctx *ctx)
{
    nnt_mem_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &st, 0));
    ck_assert_str_eq(st.node[0].name, "RAM");
    return st.node[0].budget_bytes / (1024 * 1024);
}

/* the RAM budget of a context given mem_cpu_mib (StarPU's main memory when it is above) */
static int64_t budget_given_mib(int64_t mib, int *ncpus)
{
    nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
    o.mem_cpu_mib = mib;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    int64_t got = ram_budget_mib(ctx);
    if (ncpus)
        EXPECT_OK(nnt_ctx_workers(ctx, ncpus, NULL));
    EXPECT_OK(nnt_ctx_destroy(ctx));
    return got;
}

START_TEST(ctx_host_ram_raises_starpu_main_memory)
{
    unsetenv("NNT_HOST_RAM_MIB");
    int ncpus = 0, ncpus_raised = 0;
    const int64_t above = (int64_t)1 << 24;   /* 16 TiB: StarPU's figure holds */
    int64_t hwloc_mib = budget_given_mib(above, &ncpus);
    ck_assert_int_gt(hwloc_mib, 0);

    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)(2 * hwloc_mib + 3));
    setenv("NNT_HOST_RAM_MIB", num, 1);
    ck_assert_int_eq(budget_given_mib(above, &ncpus_raised), 2 * hwloc_mib + 3);
    ck_assert_int_eq(ncpus_raised, ncpus);
    nnt_ctx *ctx = test_ctx();
    ck_assert_ptr_null(getenv("HWLOC_XMLFILE"));
    ck_assert_ptr_null(getenv("HWLOC_THISSYSTEM"));
    /* the default budget: what the kernel has available, not the figure raised */
    int64_t default_mib = ram_budget_mib(ctx);
    ck_assert_int_gt(default_mib, 0);
    ck_assert_int_le(default_mib, hwloc_mib);
    nnt_tensor *t = NULL;
    float out[70];
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){70}, (int64_t[]){32}, &t));
    EXPECT_OK(nnt_tensor_fill(t, 1.5));
    EXPECT_OK(nnt_tensor_copy_to_host(t, out, sizeof out));
    ck_assert_float_eq(out[69], 1.5f);
    EXPECT_OK(nnt_tensor_destroy(t));
    EXPECT_OK(nnt_ctx_destroy(ctx));

    /* 1 MiB is below any hwloc count: StarPU keeps hwloc's, which is the figure above
     * except on a machine where it was itself raised to the kernel's figure (an H200 VM:
     * hwloc 4699 MiB, kernel 128887 MiB); nnt's default budget follows the variable: 15/16
     * of 1 MiB */
    setenv("NNT_HOST_RAM_MIB", "1", 1);
    int64_t kept_mib = budget_given_mib(above, NULL);
    ck_assert_int_gt(kept_mib, 1);
    ck_assert_int_le(kept_mib, hwloc_mib);
    ctx = test_ctx();
    ck_assert_int_eq(ram_budget_mib(ctx), 0);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){1 << 18}, NULL, &t),
                    NNT_E_NOMEM, "15/16 of the memory available");
    EXPECT_OK(nnt_ctx_destroy(ctx));

    setenv("NNT_HOST_RAM_MIB", "12GB", 1);
    EXPECT_FAIL_MSG(nnt_ctx_create(NULL, &ctx), NNT_E_INVAL, "NNT_HOST_RAM_MIB");
    ck_assert_ptr_null(ctx);
    unsetenv("NNT_HOST_RAM_MIB");
}
END_TEST

/* NNT_CUDA_ATTN chooses the CUDA workers' attention, NNT_CUDA_NORM_BWD their norms' backward
 * (lib/ctx.c): either of a variable's two values, or empty, is taken (also without CUDA
 * workers, where nothing changes); anything else is refused, named. */
START_TEST(ctx_cuda_attn_choice)
{
    static const struct {
        const char *var, *good[3], *bad;
    } vars[] = {{"NNT_CUDA_ATTN", {"flash", "products", ""}, "tensor-cores"},
                {"NNT_CUDA_NORM_BWD", {"rows", "chunks", ""}, "atomics"}};
    for (int v = 0; v < 2; v++) {
        for (int i = 0; i < 3; i++) {
            setenv(vars[v].var, vars[v].good[i], 1);
            nnt_ctx *ctx = test_ctx();
            EXPECT_OK(nnt_ctx_destroy(ctx));
        }
        nnt_ctx *ctx = NULL;
        char named[64];
        snprintf(named, sizeof named, "%s=%s", vars[v].var, vars[v].bad);
        setenv(vars[v].var, vars[v].bad, 1);
        EXPECT_FAIL_MSG(nnt_ctx_create(NULL, &ctx), NNT_E_INVAL, named);
        ck_assert_ptr_null(ctx);
        unsetenv(vars[v].var);
    }
}
END_TEST

/* ---- tensor misuse --------------------------------------------------------------------- */

START_TEST(tensor_create_rejects_bad_arguments)
{
    nnt_ctx *ctx = test_ctx();
    nnt_tensor *t = NULL;
    int64_t shape[9] = {4, 5, 6, 1, 1, 1, 1, 1, 1}, tile[3] = {2, 2, 2};
    const char *fn = "nnt_tensor_create";
    EXPECT_FAIL_MSG(nnt_tensor_create(NULL, NNT_FP32, 3, shape, tile, &t), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 3, shape, tile, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 0, shape, tile, &t), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 9, shape, NULL, &t), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 3, NULL, tile, &t), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, (nnt_dtype)99, 3, shape, tile, &t), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP16, 3, shape, tile, &t), NNT_E_UNSUPPORTED, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 3, (int64_t[]){4, 0, 6}, tile, &t), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 3, (int64_t[]){4, -5, 6}, tile, &t), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 3, shape, (int64_t[]){2, 0, 2}, &t), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 3, shape, (int64_t[]){2, -1, 2}, &t), NNT_E_INVAL, fn);
    /* element count overflow, and a single tile of more than 2^32-1 elements */
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 3, (int64_t[]){1LL << 40, 1LL << 40, 1LL << 40},
                                      (int64_t[]){1, 1, 1}, &t), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){1LL << 20, 1LL << 20}, NULL, &t),
                    NNT_E_INVAL, fn);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), fn));
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

START_TEST(tensor_tile_larger_than_shape_is_clamped)
{
    nnt_ctx *ctx = test_ctx();
    nnt_tensor *t;
    int64_t tile[2], grid[2], ntiles;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){3, 10}, (int64_t[]){100, 4}, &t));
    EXPECT_OK(nnt_tensor_tile_shape(t, tile));
    EXPECT_OK(nnt_tensor_grid(t, grid));
    EXPECT_OK(nnt_tensor_ntiles(t, &ntiles));
    ck_assert_int_eq(tile[0], 3);
    ck_assert_int_eq(tile[1], 4);
    ck_assert_int_eq(grid[0], 1);
    ck_assert_int_eq(grid[1], 3);
    ck_assert_int_eq(ntiles, 3);
    EXPECT_OK(nnt_tensor_destroy(t));
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

START_TEST(tensor_calls_reject_bad_arguments)
{
    nnt_ctx *ctx = test_ctx();
    nnt_tensor *f, *i;
    float buf[24];
    int64_t dims[2];
    nnt_dtype dt;
    int nd;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){4, 6}, (int64_t[]){3, 4}, &f));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, (int64_t[]){4, 6}, NULL, &i));

    EXPECT_FAIL_MSG(nnt_tensor_copy_from_host(f, buf, sizeof buf - 4), NNT_E_SHAPE, "nnt_tensor_copy_from_host");
    EXPECT_FAIL_MSG(nnt_tensor_copy_from_host(f, NULL, sizeof buf), NNT_E_INVAL, "nnt_tensor_copy_from_host");
    EXPECT_FAIL_MSG(nnt_tensor_copy_from_host(NULL, buf, sizeof buf), NNT_E_INVAL, "nnt_tensor_copy_from_host");
    /* reading a tensor nobody wrote is an error, not a runtime abort */
    EXPECT_FAIL_MSG(nnt_tensor_copy_to_host(f, buf, sizeof buf), NNT_E_STATE, "nnt_tensor_copy_to_host");
    EXPECT_OK(nnt_tensor_fill(f, 1.0));
    EXPECT_FAIL_MSG(nnt_tensor_copy_to_host(f, buf, sizeof buf + 4), NNT_E_SHAPE, "nnt_tensor_copy_to_host");
    EXPECT_FAIL_MSG(nnt_tensor_copy_to_host(f, NULL, sizeof buf), NNT_E_INVAL, "nnt_tensor_copy_to_host");

    EXPECT_FAIL_MSG(nnt_tensor_fill(NULL, 1.0), NNT_E_INVAL, "nnt_tensor_fill");
    EXPECT_FAIL_MSG(nnt_tensor_fill(i, 1.5), NNT_E_INVAL, "nnt_tensor_fill");
    EXPECT_FAIL_MSG(nnt_tensor_fill(i, 1e12), NNT_E_INVAL, "nnt_tensor_fill");
    EXPECT_FAIL_MSG(nnt_tensor_fill_uniform(i, 1, 0, 1), NNT_E_UNSUPPORTED, "nnt_tensor_fill_uniform");
    EXPECT_FAIL_MSG(nnt_tensor_fill_uniform(f, 1, 2, 1), NNT_E_INVAL, "nnt_tensor_fill_uniform");
    EXPECT_FAIL_MSG(nnt_tensor_fill_uniform(NULL, 1, 0, 1), NNT_E_INVAL, "nnt_tensor_fill_uniform");
    EXPECT_FAIL_MSG(nnt_tensor_fill_normal(f, 1, 0, -1), NNT_E_INVAL, "nnt_tensor_fill_normal");
    EXPECT_FAIL_MSG(nnt_tensor_fill_normal(f, 1, NAN, 1), NNT_E_INVAL, "nnt_tensor_fill_normal");

    EXPECT_FAIL_MSG(nnt_tensor_shape(f, NULL), NNT_E_INVAL, "nnt_tensor_shape");
    EXPECT_FAIL_MSG(nnt_tensor_shape(NULL, dims), NNT_E_INVAL, "nnt_tensor_shape");
    EXPECT_FAIL_MSG(nnt_tensor_tile_shape(f, NULL), NNT_E_INVAL, "nnt_tensor_tile_shape");
    EXPECT_FAIL_MSG(nnt_tensor_grid(f, NULL), NNT_E_INVAL, "nnt_tensor_grid");
    EXPECT_FAIL_MSG(nnt_tensor_dtype(f, NULL), NNT_E_INVAL, "nnt_tensor_dtype");
    EXPECT_FAIL_MSG(nnt_tensor_ndim(NULL, &nd), NNT_E_INVAL, "nnt_tensor_ndim");
    EXPECT_FAIL_MSG(nnt_tensor_numel(f, NULL), NNT_E_INVAL, "nnt_tensor_numel");
    EXPECT_FAIL_MSG(nnt_tensor_ntiles(f, NULL), NNT_E_INVAL, "nnt_tensor_ntiles");
    EXPECT_OK(nnt_tensor_dtype(i, &dt));
    ck_assert_int_eq(dt, NNT_INT32);
    EXPECT_OK(nnt_tensor_destroy(NULL));
    EXPECT_OK(nnt_tensor_destroy(f));
    EXPECT_OK(nnt_tensor_destroy(i));
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

START_TEST(tensor_outliving_its_context)
{
    nnt_ctx *ctx = test_ctx();
    nnt_tensor *t, *never_written;
    float buf[12];
    int64_t shape[2];
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){3, 4}, (int64_t[]){2, 2}, &t));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, (int64_t[]){5}, NULL, &never_written));
    EXPECT_OK(nnt_tensor_fill_normal(t, 7, 0, 1));   /* pending work at destroy time */
    EXPECT_OK(nnt_ctx_destroy(ctx));

    EXPECT_FAIL_MSG(nnt_tensor_copy_to_host(t, buf, sizeof buf), NNT_E_STATE, "nnt_tensor_copy_to_host");
    EXPECT_FAIL_MSG(nnt_tensor_copy_from_host(t, buf, sizeof buf), NNT_E_STATE, "nnt_tensor_copy_from_host");
    EXPECT_FAIL_MSG(nnt_tensor_fill(t, 0), NNT_E_STATE, "nnt_tensor_fill");
    EXPECT_FAIL_MSG(nnt_tensor_fill_uniform(t, 1, 0, 1), NNT_E_STATE, "nnt_tensor_fill_uniform");
    EXPECT_OK(nnt_tensor_shape(t, shape));          /* geometry stays readable */
    ck_assert_int_eq(shape[0], 3);
    ck_assert_int_eq(shape[1], 4);
    EXPECT_OK(nnt_tensor_destroy(t));
    EXPECT_OK(nnt_tensor_destroy(never_written));

    /* a later context does not adopt tensors of the old one */
    ctx = test_ctx();
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

/* The calling thread's share of this process's CPU time while it computes for 0.3 s, under
 * NNT_WORKER_IDLE = mode, beside a context whose one CPU worker sits idle on the same core
 * (the rest goes to that worker). Other processes on the core take from both alike when the
 * worker spins, from the worker first when it yields: the share does not depend on them. */
static double main_thread_share(const char *mode, const char *kernels_want)
{
    setenv("NNT_WORKER_IDLE", mode, 1);
    nnt_ctx_options o;
    EXPECT_OK(nnt_ctx_options_init(&o));
    o.ncpus = 1;
    o.ncuda = 0;   /* a CUDA worker's driver thread would share the core (0.505 and 0.336 on
                    * an H200 machine, 2026-11-29): this is about CPU workers */
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&o, &ctx));
    const char *kernels = NULL;
    EXPECT_OK(nnt_ctx_kernels(ctx, &kernels));
    ck_assert_msg(strstr(kernels, kernels_want), "kernels: %s", kernels);
    struct timespec w0, w1, c0, c1, p0, p1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p0);
    volatile double sink = 0;
    do {
        for (int i = 0; i < 100000; i++)
            sink += 1e-9 * i;
        clock_gettime(CLOCK_MONOTONIC, &w1);
    } while (seconds_between(&w0, &w1) < 0.3);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p1);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    unsetenv("NNT_WORKER_IDLE");
    return seconds_between(&c0, &c1) / seconds_between(&p0, &p1);
}

/* An idle CPU worker gives its core to other threads (NNT_WORKER_IDLE=yield, the default):
 * on one core beside an idle worker, this thread gets nearly all of the process's CPU time,
 * against about half when the worker spins (measured here: 0.981-0.990 against 0.493-0.503,
 * the same with two busy processes on that core; the core's share of the wall time, used
 * before, gave 0.54 against 0.44 once under a loaded make check). */
START_TEST(ctx_idle_workers_give_way)
{
    setenv("NNT_WORKER_IDLE", "sleep", 1);
    nnt_ctx *ctx = NULL;
    EXPECT_FAIL_MSG(nnt_ctx_create(NULL, &ctx), NNT_E_INVAL, "NNT_WORKER_IDLE=sleep");
    ck_assert_ptr_null(ctx);
    setenv("NNT_WORKER_IDLE", "", 1);   /* set but empty: the default */
    ctx = test_ctx();
    const char *kernels = NULL;
    EXPECT_OK(nnt_ctx_kernels(ctx, &kernels));
    ck_assert_msg(strstr(kernels, "idle CPU workers yield"), "kernels: %s", kernels);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    unsetenv("NNT_WORKER_IDLE");

    /* this thread and the worker it starts on one core, where StarPU leaves them */
    cpu_set_t all, one;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &all))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
    const char *nobind = getenv("STARPU_WORKERS_NOBIND");
    char *saved = nobind ? strdup(nobind) : NULL;
    setenv("STARPU_WORKERS_NOBIND", "1", 1);
    double spin = main_thread_share("spin", "idle CPU workers spin");
    double yield = main_thread_share("yield", "idle CPU workers yield");
    if (saved)
        setenv("STARPU_WORKERS_NOBIND", saved, 1);
    else
        unsetenv("STARPU_WORKERS_NOBIND");
    free(saved);
    ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
    fprintf(stderr, "ctx_idle_workers_give_way: this thread's share of the process's CPU "
            "time: %.3f (yield), %.3f (spin)\n", yield, spin);
    ck_assert_msg(yield > 0.8 && spin < 0.65, "share of the process's CPU time beside an "
                  "idle worker: %.3f when it yields, %.3f when it spins", yield, spin);
}
END_TEST

static Suite *api_suite(void)
{
    Suite *s = suite_create("api");
    TCase *basics = tcase_create("basics");
    tcase_add_test(basics, strerror_names_every_code);
    tcase_add_test(basics, ctx_bounds_tasks_in_flight);
    tcase_add_test(basics, version_matches_header);
    tcase_add_test(basics, log_hook_and_levels);
    tcase_add_test(basics, log_level_from_environment);
    tcase_add_test(basics, log_level_from_environment_number);
    suite_add_tcase(s, basics);
    TCase *ctx = tcase_create("context");
    tcase_add_test(ctx, ctx_rejects_bad_options);
    tcase_add_test(ctx, ctx_creates_swap_dir);
    tcase_add_test(ctx, ctx_accepts_0_2_programs);
    tcase_add_test(ctx, ctx_cuda_request_without_cuda_runtime);
    tcase_add_test(ctx, ctx_life_cycle);
    tcase_add_test(ctx, ctx_options_are_applied);
    tcase_add_test(ctx, ctx_budget_refuses_what_cannot_fit);
    tcase_add_test(ctx, ctx_budget_counts_gradients_when_written);
    tcase_add_test(ctx, ctx_budget_counts_frozen_base_in_bf16);
    tcase_add_test(ctx, ctx_budget_counts_pinned_chunks);
    tcase_add_test(ctx, ctx_host_ram_raises_starpu_main_memory);
    tcase_add_test(ctx, ctx_idle_workers_give_way);
    tcase_add_test(ctx, ctx_cuda_attn_choice);
    suite_add_tcase(s, ctx);
    TCase *tensor = tcase_create("tensor misuse");
    tcase_add_test(tensor, tensor_create_rejects_bad_arguments);
    tcase_add_test(tensor, tensor_tile_larger_than_shape_is_clamped);
    tcase_add_test(tensor, tensor_calls_reject_bad_arguments);
    tcase_add_test(tensor, tensor_outliving_its_context);
    suite_add_tcase(s, tensor);
    return s;
}

int main(void)
{
    unsetenv("NNT_LOG_LEVEL");
    return run_suite(api_suite());
}
