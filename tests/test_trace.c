/* SPDX-License-Identifier: MIT */
/* Tracing (nnt_trace_start / nnt_trace_stop) and memory statistics (nnt_ctx_mem_stats):
 * a tiled GEMM and fills under a trace, the task counts of the table against the tile
 * counts worked out here, the SVG's structure (one row per worker, codelet names), the
 * table's sums; memory used by a filled tensor of known size, peaks, the RAM budget, resets;
 * misuse. */
#define _DEFAULT_SOURCE
#include "testutil.h"
#include "meminfo.h"

#include <math.h>
#include <time.h>
#include <unistd.h>

/* The whole file, NUL-terminated (malloc'd). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

static int count_of(const char *s, const char *piece)
{
    int n = 0;
    for (const char *p = strstr(s, piece); p; p = strstr(p + 1, piece))
        n++;
    return n;
}

static nnt_tensor *filled(nnt_ctx *ctx, int64_t rows, int64_t cols, int64_t tr, int64_t tc,
                          double value)
{
    const int64_t shape[2] = {rows, cols}, tile[2] = {tr, tc};
    nnt_tensor *t = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, shape, tile, &t));
    EXPECT_OK(nnt_tensor_fill(t, value));
    return t;
}

/* The table row of a codelet: its count, total and mean ms and share; 0 when absent. */
static int table_row(const char *table, const char *codelet, long *count, double *total,
                     double *mean, double *share)
{
    size_t len = strlen(codelet);
    for (const char *p = table; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, codelet, len) == 0 && p[len] == ' ')
            return sscanf(p + len, "%ld %lf %lf %lf", count, total, mean, share) == 4;
    return 0;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

START_TEST(test_trace_gemm)
{
    test_make_tmpdir("test-trace");
    nnt_ctx *ctx = test_ctx();
    int ncpus = 0, ncuda = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpus, &ncuda));
    /* work before the trace is not in it */
    nnt_tensor *before = filled(ctx, 64, 64, 16, 16, 1.0);
    EXPECT_OK(nnt_ctx_wait(ctx));

    const int64_t m = 96, n = 80, k = 72, tm = 32, tn = 16, tk = 24;
    EXPECT_OK(nnt_trace_start(ctx));
    nnt_tensor *a = filled(ctx, m, k, tm, tk, 0.5);        // (m, k)
    nnt_tensor *b = filled(ctx, k, n, tk, tn, 2.0);        // (k, n)
    const int64_t cshape[2] = {m, n}, ctile[2] = {tm, tn};
    nnt_tensor *c = NULL;                                  // (m, n)
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, cshape, ctile, &c));
    EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, a, b, 0.0, c, 1, 0));
    EXPECT_OK(nnt_trace_stop(ctx, test_tmp_path("trace.svg"), test_tmp_path("table.txt")));
    EXPECT_OK(nnt_ctx_wait(ctx));

    /* the product is right (the trace did not disturb it): every entry is k * 0.5 * 2, a sum
     * of ones that float adds exactly (bit-identical to k whatever the order) */
    float *host = malloc((size_t)(m * n) * sizeof *host);
    EXPECT_OK(nnt_tensor_copy_to_host(c, host, (size_t)(m * n) * sizeof *host));
    for (int64_t i = 0; i < m * n; i++)
        ck_assert_float_eq(host[i], (float)k);
    free(host);

    const long gemm_tasks = (long)(ceil_div(m, tm) * ceil_div(n, tn) * ceil_div(k, tk));
    const long fill_tasks = (long)(ceil_div(m, tm) * ceil_div(k, tk) +
                                   ceil_div(k, tk) * ceil_div(n, tn));
    char *table = slurp(test_tmp_path("table.txt"));
    long count = 0;
    double total = 0, mean = 0, share = 0, share_sum = 0;
    ck_assert_msg(table_row(table, "nnt_gemm", &count, &total, &mean, &share),
                  "no nnt_gemm row in\n%s", table);
    ck_assert_int_eq(count, gemm_tasks);
    /* the table prints total with 3 decimals and mean with 4: they agree to that rounding,
     * 0.5e-4 + 0.5e-3 / count, a bound rather than a tolerance over a measured error (the
     * times vary from run to run; so not reported through EXPECT_TOL) */
    ck_assert(total > 0);
    double bound = 0.5e-4 + 0.5e-3 / (double)count + 1e-9;
    ck_assert_msg(fabs(mean - total / (double)count) <= bound,
                  "nnt_gemm mean %.4f ms vs total %.3f ms / %ld: beyond the rounding %g", mean,
                  total, count, bound);
    share_sum += share;
    ck_assert(table_row(table, "nnt_fill_f32", &count, &total, &mean, &share));
    ck_assert_int_eq(count, fill_tasks);   /* not the 16 tiles of `before` */
    share_sum += share;
    /* where oneDNN packs B tiles that 3+ row tiles read (nnt_ctx_kernels(3) says so), each
     * of B's tiles once: its 3 row tiles of C read each */
    const char *kernels = NULL;
    EXPECT_OK(nnt_ctx_kernels(ctx, &kernels));
    int rows = 2 + (strstr(kernels, "packed once a product") != NULL);
    const long pack_tasks = rows == 3 ? (long)(ceil_div(k, tk) * ceil_div(n, tn)) : 0;
    if (rows == 3) {
        ck_assert_msg(table_row(table, "nnt_gemm_pack", &count, &total, &mean, &share),
                      "no nnt_gemm_pack row in\n%s", table);
        ck_assert_int_eq(count, pack_tasks);
        share_sum += share;
    }
    /* shares printed with one decimal: 100 to their rounding, rows x 0.05 (a bound) */
    ck_assert_msg(fabs(share_sum - 100.0) <= 0.05 * rows + 1e-9, "shares sum to %g", share_sum);
    ck_assert_int_eq(count_of(table, "\nnnt_"), rows);   /* no other codelet ran */
    ck_assert_ptr_nonnull(strstr(table, "busy %"));
    free(table);

    char *svg = slurp(test_tmp_path("trace.svg"));
    ck_assert_int_eq(strncmp(svg, "<svg", 4), 0);
    size_t len = strlen(svg);
    while (len && (svg[len - 1] == '\n' || svg[len - 1] == ' '))
        svg[--len] = 0;
    ck_assert_str_eq(svg + len - 6, "</svg>");
    ck_assert_int_eq(count_of(svg, "<svg"), 1);
    ck_assert_int_eq(count_of(svg, "<g class=\"worker\""), ncpus + ncuda);
    ck_assert_int_eq(count_of(svg, "<g "), count_of(svg, "</g>"));
    ck_assert_ptr_nonnull(strstr(svg, "nnt_gemm"));
    ck_assert_ptr_nonnull(strstr(svg, "nnt_fill_f32"));
    ck_assert_ptr_nonnull(strstr(svg, "time (ms)"));
    /* the fills allocate their tiles: data waits are drawn (besides the legend's) */
    ck_assert_int_ge(count_of(svg, "class=\"wait\""), 2);
    /* one rectangle per task (or fewer, merged) plus a background per row, a legend entry
     * per codelet and the legend's data wait */
    int rects = count_of(svg, "<rect") - count_of(svg, "class=\"wait\"");
    ck_assert_int_le(rects,
                     (int)(gemm_tasks + fill_tasks + pack_tasks) + (ncpus + ncuda) + rows);
    ck_assert_int_ge(rects, (ncpus + ncuda) + rows + 1);
    free(svg);

    /* a second trace, to stdout for the table and without an SVG */
    EXPECT_OK(nnt_trace_start(ctx));
    EXPECT_OK(nnt_tensor_fill(before, 3.0));
    EXPECT_OK(nnt_trace_stop(ctx, NULL, "-"));
    /* an unwritable SVG path fails with NNT_E_IO, and the trace is over anyway */
    EXPECT_OK(nnt_trace_start(ctx));
    EXPECT_FAIL_MSG(nnt_trace_stop(ctx, "/nonexistent-nnt-dir/t.svg", NULL), NNT_E_IO,
                    "nnt_trace_stop");
    EXPECT_RC(nnt_trace_stop(ctx, NULL, NULL), NNT_E_STATE);

    nnt_tensor_destroy(a);
    nnt_tensor_destroy(b);
    nnt_tensor_destroy(c);
    nnt_tensor_destroy(before);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    test_remove_tmpdir();
}
END_TEST

/* Many small tasks: rectangles narrower than a pixel are merged, so the SVG stays small. */
START_TEST(test_trace_many_tasks)
{
    test_make_tmpdir("test-trace");
    nnt_ctx *ctx = test_ctx();
    nnt_tensor *t = filled(ctx, 100, 100, 1, 100, 0.0);   /* 100 tiles */
    EXPECT_OK(nnt_ctx_wait(ctx));
    EXPECT_OK(nnt_trace_start(ctx));
    for (int i = 0; i < 100; i++)
        EXPECT_OK(nnt_tensor_fill(t, (double)i));
    EXPECT_OK(nnt_trace_stop(ctx, test_tmp_path("many.svg"), test_tmp_path("many.txt")));
    char *table = slurp(test_tmp_path("many.txt"));
    long count = 0;
    double total, mean, share;
    ck_assert(table_row(table, "nnt_fill_f32", &count, &total, &mean, &share));
    ck_assert_int_eq(count, 10000);
    ck_assert_double_eq(share, 100.0);   /* the only codelet: 100 b / b is exactly 100 */
    free(table);
    char *svg = slurp(test_tmp_path("many.svg"));
    int ncpus = 0, ncuda = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpus, &ncuda));
    /* at most one merged task rectangle per pixel column of each row (1200 px), plus the
     * row backgrounds and the legend */
    ck_assert_int_le(count_of(svg, "<rect") - count_of(svg, "class=\"wait\""),
                     (ncpus + ncuda) * (1200 + 2) + 2);
    ck_assert_ptr_nonnull(strstr(svg, "tasks merged"));
    free(svg);
    nnt_tensor_destroy(t);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    test_remove_tmpdir();
}
END_TEST

/* A trace records the tasks submitted from its start on (nnt_trace_start(3)): not a task
 * submitted before, though it runs after the start, nor one that ended before, though its
 * completion callback, which records it, runs after the start (a host read returns once the
 * task's data is back, which can be before the callback has run). Rounds of fills read back
 * at once, each followed by an empty trace (before 2026-11-30 one in a few rounds left a fill
 * there); then 100 rounds of fills submitted just before a trace, which holds none of them
 * but the scale submitted after the start. */
START_TEST(test_trace_starts_after_earlier_tasks)
{
    test_make_tmpdir("test-trace");
    nnt_ctx *ctx = test_ctx();
    nnt_tensor *t = filled(ctx, 64, 64, 8, 64, 0.0);   /* 8 tiles */
    float *host = malloc(64 * 64 * sizeof *host);
    long count = 0;
    double total, mean, share;
    for (int r = 0; r < 200; r++) {
        EXPECT_OK(nnt_tensor_fill(t, (double)r));
        EXPECT_OK(nnt_tensor_copy_to_host(t, host, 64 * 64 * sizeof *host));
        EXPECT_OK(nnt_trace_start(ctx));
        EXPECT_OK(nnt_trace_stop(ctx, NULL, test_tmp_path("empty.txt")));
        char *table = slurp(test_tmp_path("empty.txt"));
        ck_assert_msg(!table_row(table, "nnt_fill_f32", &count, &total, &mean, &share),
                      "round %d: %ld fills that ended before the trace started are in it", r,
                      count);
        free(table);
    }
    for (int r = 0; r < 100; r++)
        EXPECT_OK(nnt_tensor_fill(t, (double)r));
    EXPECT_OK(nnt_trace_start(ctx));
    EXPECT_OK(nnt_tensor_scale(t, 0.5));
    EXPECT_OK(nnt_trace_stop(ctx, NULL, test_tmp_path("after.txt")));
    char *table = slurp(test_tmp_path("after.txt"));
    ck_assert_msg(!table_row(table, "nnt_fill_f32", &count, &total, &mean, &share),
                  "%ld fills submitted before the trace started are in it", count);
    ck_assert_msg(table_row(table, "nnt_scale", &count, &total, &mean, &share) && count == 8,
                  "the scale's 8 tasks: %ld in the trace", count);
    free(table);
    free(host);
    nnt_tensor_destroy(t);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    test_remove_tmpdir();
}
END_TEST

/* The table lists the longest stretches a worker spent without a task: one CPU worker, fills,
 * then the host sleeps 100 ms, then a scale; the longest stretch is at least the sleep, from
 * the last fill to the scale. */
START_TEST(test_trace_idle_stretch)
{
    test_make_tmpdir("test-trace");
    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.ncpus = 1;
    opts.ncuda = 0;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&opts, &ctx));
    nnt_tensor *t = filled(ctx, 64, 64, 16, 16, 1.0);
    EXPECT_OK(nnt_ctx_wait(ctx));
    EXPECT_OK(nnt_trace_start(ctx));
    EXPECT_OK(nnt_tensor_fill(t, 2.0));
    EXPECT_OK(nnt_ctx_wait(ctx));
    const struct timespec sleep_for = {0, 100 * 1000 * 1000};
    nanosleep(&sleep_for, NULL);
    EXPECT_OK(nnt_tensor_scale(t, 0.5));
    EXPECT_OK(nnt_trace_stop(ctx, NULL, test_tmp_path("idle.txt")));
    char *table = slurp(test_tmp_path("idle.txt"));
    const char *head = "longest idle stretches of workers between their tasks (1 ms or more):\n";
    const char *list = strstr(table, head);
    ck_assert_msg(list != NULL, "no idle stretches in\n%s", table);
    const char *first = strstr(list + strlen(head), " ms at ");
    ck_assert_msg(first != NULL, "no stretch listed in\n%s", list);
    while (first > list && first[-1] != ' ')   /* back to the length's first digit */
        first--;
    double ms = 0.0, at = -1.0;
    char after[64] = "", before[64] = "";
    ck_assert_int_eq(sscanf(first, "%lf ms at %lf ms, after %63[^,], before %63s", &ms, &at,
                            after, before), 4);
    ck_assert_msg(ms >= 100.0, "longest stretch %.3f ms, shorter than the 100 ms sleep", ms);
    ck_assert_msg(at >= 0.0, "stretch at %.3f ms, before the trace's start", at);
    ck_assert_str_eq(after, "nnt_fill_f32");
    ck_assert_str_eq(before, "nnt_scale");
    free(table);
    nnt_tensor_destroy(t);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    test_remove_tmpdir();
}
END_TEST

static nnt_mem_stats stats_of(nnt_ctx *ctx, int reset)
{
    nnt_mem_stats s;
    memset(&s, 0xab, sizeof s);
    s.size = sizeof s;
    EXPECT_OK(nnt_ctx_mem_stats(ctx, &s, reset));
    ck_assert_int_ge(s.nnodes, 1);
    ck_assert_int_le(s.nnodes, NNT_MAX_MEM_NODES);
    return s;
}

static int ram_node(const nnt_mem_stats *s)
{
    for (int i = 0; i < s->nnodes; i++)
        if (strcmp(s->node[i].name, "RAM") == 0)
            return i;
    ck_abort_msg("no RAM node");
    return -1;
}

START_TEST(test_mem_stats)
{
    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.mem_cpu_mib = 256;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&opts, &ctx));
    nnt_mem_stats s0 = stats_of(ctx, 0);
    int ram = ram_node(&s0);
    ck_assert_int_eq(s0.node[ram].budget_bytes, 256ll << 20);
    for (int i = 0; i < s0.nnodes; i++) {
        ck_assert(s0.node[i].used_bytes >= 0);
        ck_assert(s0.node[i].peak_bytes >= s0.node[i].used_bytes);
    }

    /* a 1024 x 1024 fp32 tensor: 4 MiB in RAM once filled */
    const int64_t bytes = 1024 * 1024 * 4;
    nnt_tensor *t = filled(ctx, 1024, 1024, 256, 256, 1.5);
    EXPECT_OK(nnt_ctx_wait(ctx));
    nnt_mem_stats s1 = stats_of(ctx, 0);
    ck_assert_msg(s1.node[ram].used_bytes >= s0.node[ram].used_bytes + bytes,
                  "RAM used %lld, before %lld", (long long)s1.node[ram].used_bytes,
                  (long long)s0.node[ram].used_bytes);
    ck_assert(s1.node[ram].peak_bytes >= s1.node[ram].used_bytes);
    ck_assert(s1.node[ram].used_bytes <= s1.node[ram].budget_bytes);
    ck_assert(s1.bytes_moved >= 0 && s1.transfer_wait_s >= 0.0);

    /* reset: the peak restarts from what is used now, the counters from 0 */
    nnt_tensor_destroy(t);
    EXPECT_OK(nnt_ctx_wait(ctx));
    nnt_mem_stats s2 = stats_of(ctx, 1);
    ck_assert(s2.node[ram].peak_bytes >= s1.node[ram].used_bytes);  /* before the reset */
    nnt_mem_stats s3 = stats_of(ctx, 0);
    for (int i = 0; i < s3.nnodes; i++)
        ck_assert_int_eq(s3.node[i].peak_bytes, s3.node[i].used_bytes);
    ck_assert_int_eq(s3.bytes_moved, 0);
    ck_assert(s3.transfer_wait_s == 0.0);
    ck_assert(s3.node[ram].used_bytes <= s2.node[ram].used_bytes);

    /* misuse */
    nnt_mem_stats bad;
    bad.size = sizeof bad - 1;
    EXPECT_FAIL_MSG(nnt_ctx_mem_stats(ctx, &bad, 0), NNT_E_INVAL, "nnt_ctx_mem_stats");
    bad.size = 0;
    EXPECT_RC(nnt_ctx_mem_stats(ctx, &bad, 0), NNT_E_INVAL);
    EXPECT_RC(nnt_ctx_mem_stats(ctx, NULL, 0), NNT_E_INVAL);
    bad.size = sizeof bad;
    EXPECT_FAIL_MSG(nnt_ctx_mem_stats(NULL, &bad, 0), NNT_E_INVAL, "nnt_ctx_mem_stats");
    EXPECT_OK(nnt_ctx_destroy(ctx));
    EXPECT_RC(nnt_ctx_mem_stats(ctx, &bad, 0), NNT_E_STATE);  /* a dead context */
}
END_TEST

/* Without a budget the RAM budget is 15/16 of the memory available at start (not the main
 * memory, whose tiles the kernel would kill the process for): reported, and tensors beyond
 * it are refused up front (StarPU would otherwise spin forever looking for memory to free). */
START_TEST(test_mem_stats_no_budget)
{
    int64_t avail = mem_available();
    nnt_ctx *ctx = test_ctx();
    if (getenv("STARPU_LIMIT_CPU_MEM") == NULL) {
        nnt_mem_stats s = stats_of(ctx, 0);
        int64_t budget = s.node[ram_node(&s)].budget_bytes;
        int64_t physical = (int64_t)sysconf(_SC_PHYS_PAGES) * (int64_t)sysconf(_SC_PAGESIZE);
        ck_assert_msg(budget > 0 && budget <= physical, "default RAM budget %lld, physical "
                      "memory %lld", (long long)budget, (long long)physical);
        /* (other processes may free or take some meanwhile: within 1/64) */
        long long off = llabs((long long)(budget - (avail - avail / 16)));
        ck_assert_msg(avail <= 0 || off < avail / 64, "default RAM budget %lld, available "
                      "%lld at start", (long long)budget, (long long)avail);
        int64_t shape[1] = {budget / 4 + 1024}, tile[1] = {1 << 20};
        nnt_tensor *t = (nnt_tensor *)&t;
        EXPECT_FAIL_MSG(nnt_tensor_create(ctx, NNT_FP32, 1, shape, tile, &t), NNT_E_NOMEM,
                        "nnt_tensor_create");
        ck_assert_ptr_nonnull(strstr(nnt_ctx_last_error(ctx), "default RAM budget"));
    }
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

/* With disk swap: a "disk" node whose budget is the swap size. */
START_TEST(test_mem_stats_swap)
{
    test_make_tmpdir("test-trace");
    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.swap_dir = test_tmpdir();
    opts.swap_mib = 64;
    opts.mem_cpu_mib = 128;
    nnt_ctx *ctx = NULL;
    EXPECT_OK(nnt_ctx_create(&opts, &ctx));
    nnt_mem_stats s = stats_of(ctx, 0);
    int disk = -1;
    for (int i = 0; i < s.nnodes; i++)
        if (strcmp(s.node[i].name, "disk") == 0)
            disk = i;
    ck_assert_int_ge(disk, 0);
    ck_assert_int_eq(s.node[disk].budget_bytes, 64ll << 20);
    ck_assert_int_eq(s.node[ram_node(&s)].budget_bytes, 128ll << 20);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    test_remove_tmpdir();
}
END_TEST

START_TEST(test_trace_misuse)
{
    EXPECT_FAIL_MSG(nnt_trace_start(NULL), NNT_E_INVAL, "nnt_trace_start");
    EXPECT_FAIL_MSG(nnt_trace_stop(NULL, NULL, NULL), NNT_E_INVAL, "nnt_trace_stop");
    nnt_ctx *ctx = test_ctx();
    EXPECT_FAIL_MSG(nnt_trace_stop(ctx, NULL, NULL), NNT_E_STATE, "nnt_trace_stop");
    EXPECT_OK(nnt_trace_start(ctx));
    EXPECT_FAIL_MSG(nnt_trace_start(ctx), NNT_E_STATE, "nnt_trace_start");
    EXPECT_OK(nnt_trace_stop(ctx, NULL, NULL));
    EXPECT_RC(nnt_trace_stop(ctx, NULL, NULL), NNT_E_STATE);
    /* a trace left running ends with its context; the next context starts without one */
    EXPECT_OK(nnt_trace_start(ctx));
    EXPECT_OK(nnt_ctx_destroy(ctx));
    EXPECT_RC(nnt_trace_start(ctx), NNT_E_STATE);
    ctx = test_ctx();
    EXPECT_RC(nnt_trace_stop(ctx, NULL, NULL), NNT_E_STATE);
    /* an empty trace still gives a valid SVG and table */
    test_make_tmpdir("test-trace");
    EXPECT_OK(nnt_trace_start(ctx));
    EXPECT_OK(nnt_trace_stop(ctx, test_tmp_path("e.svg"), test_tmp_path("e.txt")));
    char *svg = slurp(test_tmp_path("e.svg"));
    ck_assert_int_eq(strncmp(svg, "<svg", 4), 0);
    ck_assert_ptr_nonnull(strstr(svg, "</svg>"));
    free(svg);
    char *table = slurp(test_tmp_path("e.txt"));
    ck_assert_ptr_nonnull(strstr(table, "0 tasks"));
    free(table);
    test_remove_tmpdir();
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_trace_gemm);
    tcase_add_test(tc, test_trace_many_tasks);
    tcase_add_test(tc, test_trace_starts_after_earlier_tasks);
    tcase_add_test(tc, test_trace_idle_stretch);
    tcase_add_test(tc, test_mem_stats);
    tcase_add_test(tc, test_mem_stats_no_budget);
    tcase_add_test(tc, test_mem_stats_swap);
    tcase_add_test(tc, test_trace_misuse);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
