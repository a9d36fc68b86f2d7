/* SPDX-License-Identifier: MIT */
/* Shared helpers for the Check suites. */
#ifndef NNT_TESTUTIL_H
#define NNT_TESTUTIL_H

#include <check.h>
#include <nnt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Shards (NNT_TEST_SHARD=I/N, 0 <= I < N): a program runs only the tests, and the loop
 * tests' iterations, whose order of addition is I modulo N, so that N processes share its
 * tests. For GPU machines, where every forked test starts a CUDA context and a program runs
 * 5-20x longer than on 2 CPU cores (scripts/gpu-session.sh suite, NNT_TEST_SHARDS). Unset:
 * every test, loop tests added whole, as Check's own macros do. */
static inline int test_shard_count(int *index)
{
    static int n = -1, i = 0;
    if (n < 0) {
        const char *e = getenv("NNT_TEST_SHARD");
        int a = 0, b = 0;
        char tail = 0;
        n = 1;
        if (e && *e) {
            if (sscanf(e, "%d/%d%c", &a, &b, &tail) != 2 || b < 1 || a < 0 || a >= b) {
                fprintf(stderr, "NNT_TEST_SHARD=%s: want I/N with 0 <= I < N\n", e);
                exit(2);
            }
            n = b, i = a;
        }
    }
    *index = i;
    return n;
}

static inline int test_shard_takes(void)
{
    static int added = 0;
    int index, n = test_shard_count(&index);
    return added++ % n == index;
}

#undef tcase_add_test
#define tcase_add_test(tc, tf)                                                                 do {                                                                                           if (test_shard_takes())                                                                        _tcase_add_test((tc), (tf), 0, 0, 0, 1);                                           } while (0)
#undef tcase_add_loop_test
#define tcase_add_loop_test(tc, tf, s, e)                                                      do {                                                                                           int shard_index_;                                                                          if (test_shard_count(&shard_index_) == 1) {                                                    _tcase_add_test((tc), (tf), 0, 0, (s), (e));                                               break;                                                                                 }                                                                                          for (int it_ = (s); it_ < (e); it_++)                                                          if (test_shard_takes())                                                                        _tcase_add_test((tc), (tf), 0, 0, it_, it_ + 1);                               } while (0)

/* Assert a call returned the expected status, showing the library's message otherwise. */
#define EXPECT_RC(call, want)                                                              \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        ck_assert_msg(rc_ == (want), "%s returned %d (%s: %s), expected %d", #call, rc_,   \
                      nnt_strerror(rc_), nnt_ctx_last_error(NULL), (want));               \
    } while (0)
#define EXPECT_OK(call) EXPECT_RC(call, NNT_OK)

/* A failure must leave a non-empty message that names the function. */
#define EXPECT_FAIL_MSG(call, want, fname)                                                 \
    do {                                                                                   \
        EXPECT_RC(call, want);                                                             \
        const char *msg_ = nnt_ctx_last_error(NULL);                                       \
        ck_assert_msg(strstr(msg_, fname) != NULL, "message '%s' does not name %s", msg_, \
                      fname);                                                             \
    } while (0)

/* The same, its message also mentioning part. */
#define EXPECT_FAIL_NAMING(call, want, fname, part)                                        \
    do {                                                                                   \
        EXPECT_FAIL_MSG(call, want, fname);                                                \
        const char *m_ = nnt_ctx_last_error(NULL);                                         \
        ck_assert_msg(strstr(m_, part) != NULL, "message '%s' does not mention '%s'", m_,  \
                      part);                                                               \
    } while (0)

/* A float tensor's elements copied to a malloc'd host array; *numel (may be NULL) gets
 * their count. */
static inline float *test_to_host(nnt_tensor *t, int64_t *numel)
{
    int64_t n = 0;
    EXPECT_OK(nnt_tensor_numel(t, &n));
    float *buf = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(buf);
    EXPECT_OK(nnt_tensor_copy_to_host(t, buf, (size_t)n * sizeof(float)));
    if (numel)
        *numel = n;
    return buf;
}

/* Parameter i of a layer tree (nnt_layer_param, checked). */
static inline nnt_param_info test_param_at(nnt_layer *l, int64_t i)
{
    nnt_param_info p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    EXPECT_OK(nnt_layer_param(l, i, &p));
    return p;
}

/* Every parameter's values copied to the host (at most max of them; values[i] malloc'ed,
 * numel[i] its size); returns how many. */
static inline int test_param_values(nnt_layer *l, int max, float **values, int64_t *numel)
{
    int64_t count = 0;
    EXPECT_OK(nnt_layer_num_params(l, &count, NULL));
    ck_assert_int_le(count, max);
    for (int64_t i = 0; i < count; i++)
        values[i] = test_to_host(test_param_at(l, i).value, &numel[i]);
    return (int)count;
}

static inline nnt_ctx *test_ctx(void)
{
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(NULL, &ctx));
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

/* 1 when ctx runs CUDA workers. Where GPU arithmetic (cuBLAS, tasks split differently
 * between CPU and GPU workers from run to run) errs more than the CPU, a check takes its
 * tolerance measured on a GPU (bench/RESULTS-gpu.md) instead of the CPU's. */
static inline int test_ctx_has_cuda(nnt_ctx *ctx)
{
    int ncuda = 0;
    return nnt_ctx_workers(ctx, NULL, &ncuda) == NNT_OK && ncuda > 0;
}

/* The CPU workers a context asked for `asked` gets: StarPU's STARPU_NCPU, when set, wins
 * over nnt_ctx_options.ncpus (as StarPU's variables win over its configuration). */
static inline int test_expected_ncpus(int asked)
{
    const char *env = getenv("STARPU_NCPU");
    return env && *env ? atoi(env) : asked;
}

/* Small deterministic generator for test data (xorshift64*). */
static inline double test_rand(unsigned long long *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (double)((*state * 2685821657736338717ULL) >> 11) * 0x1p-53;
}

/* A fresh temporary directory per test (under $TMPDIR or /tmp), paths inside it, and its
 * removal. tag names the test program in the directory name. */
static inline char *test_tmpdir(void)
{
    static char dir[512];
    return dir;
}

static inline void test_make_tmpdir(const char *tag)
{
    const char *t = getenv("TMPDIR");
    snprintf(test_tmpdir(), 512, "%s/nnt-%s-XXXXXX", t && *t ? t : "/tmp", tag);
    ck_assert_ptr_nonnull(mkdtemp(test_tmpdir()));
}

static inline void test_remove_tmpdir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_tmpdir());
    ck_assert_int_eq(system(cmd), 0);
}

/* A directory dir (new) holding config.json of text. */
static inline void test_write_config(const char *dir, const char *text)
{
    char path[4300];
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* test_tmpdir()/name in a static buffer (one of four, so a few can be alive at once). */
static inline const char *test_tmp_path(const char *name)
{
    static char buf[4][700];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", test_tmpdir(), name);
    return p;
}

/* ---- Numerical tolerances ----------------------------------------------------------------
 * The rule for every suite: a tolerance is about 10x the largest error measured for that
 * check (on the CPU kinds and BLIS kernel sets named in the comment beside it), so that a
 * one-line numerical bug (a missing eps, an off-by-one) fails it; the limits are
 * ceilings, not targets. Checks made through EXPECT_TOL / test_tol_note append a line
 * "file:line<TAB>err<TAB>tol" to the file named by NNT_TOL_REPORT when it is set;
 * tests/tolerances.sh runs the suites that way under several BLIS kernel sets and prints
 * the largest err/tol of every check (about 0.1 is the aim). */
static inline void test_tol_note(const char *file, int line, double err, double tol)
{
    const char *path = getenv("NNT_TOL_REPORT");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "%s:%d\t%.3e\t%.3e\n", file, line, err, tol);
    fclose(f);
}

/* err <= tol (a NaN err fails), reported as above; the message names the check (printf
 * format and arguments) and shows both numbers. */
#define EXPECT_TOL(err, tol, ...)                                                          \
    do {                                                                                   \
        double e_ = (err), t_ = (tol);                                                     \
        char what_[256];                                                                   \
        snprintf(what_, sizeof what_, __VA_ARGS__);                                        \
        test_tol_note(__FILE__, __LINE__, e_, t_);                                         \
        ck_assert_msg(e_ <= t_, "%s: error %.4g above the tolerance %.4g", what_, e_, t_); \
    } while (0)

/* Host-side helpers of the op suites (malloc'd arrays; the caller frees them). */
static inline int64_t test_product(int n, const int64_t *v)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= v[i];
    return p;
}

/* n floats uniform in [lo, hi) from seed (test_rand). */
static inline float *test_random_f32(int64_t n, unsigned long long seed, double lo, double hi)
{
    float *x = malloc((size_t)n * sizeof *x);
    unsigned long long state = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * test_rand(&state));
    return x;
}

static inline double *test_to_double(const float *x, int64_t n)
{
    double *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static inline double *test_zeros(int64_t n) { return calloc((size_t)n, sizeof(double)); }

/* Normwise relative error ||got - want|| / ||want|| (||got - want|| when want is 0). */
static inline double test_rel_err(const float *got, const float *want, int64_t n)
{
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* From a trace table (nnt_trace_stop's table_path): the tasks of codelet name (0: none). */
static inline long long test_traced_count(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    char line[512], op[128];
    long long count = 0, c;
    double total;
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%127s %lld %lf", op, &c, &total) == 3 && strcmp(op, name) == 0)
            count = c;
    fclose(f);
    return count;
}

static inline int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose: every test and its result */
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
