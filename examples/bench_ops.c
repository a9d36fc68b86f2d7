/* SPDX-License-Identifier: MIT */
/* bench_ops: throughput of the tiled GEMM (nnt_tensor_gemm through the public API, timed to
 * nnt_ctx_wait completion) against one multi-threaded BLIS call on the same sizes, for the
 * linear layers of GPT-2 124M at B = 4, T = 64 (M = 256 rows), over several tile sizes; and
 * the runtime overhead per task (fills of 1-element tiles). Not a test: run it by hand.
 *
 *   examples/bench_ops [-r REPS] [-s SCHED] [-t TM,TN,TK] [-l LAYER] [-q]
 *     -r REPS   timed repetitions per configuration (default 5; the best and median print)
 *     -s SCHED  StarPU scheduler (default: the library's default)
 *     -t ...    only this tiling (0 = whole dimension) instead of the sweep
 *     -l LAYER  only the layers whose name contains LAYER (qkv, attproj, fc, fcproj, lm_head)
 *     -q        quick: skip the sweep, run a few tilings only
 *
 * The BLIS reference runs before the runtime starts (idle StarPU workers poll and would steal
 * its cores), with BLIS threads = number of cores. Tiled runs use BLIS's global thread count
 * as the environment sets it (1 unless BLIS_NUM_THREADS or OMP_NUM_THREADS say otherwise), as
 * the library does; one extra line shows what happens when that count is 2 while the
 * workers call BLIS (bli_thread_set_num_threads(2) from the program). */
#define _POSIX_C_SOURCE 200809L
#include <nnt.h>

#include <blis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct shape {
    const char *name;
    int64_t m, n, k;   /* y (m, n) = x (m, k) W^T, W (n, k) */
};

/* GPT-2 124M, C = 768, B * T = 256 */
static const struct shape shapes[] = {
    {"qkv     C->3C", 256, 2304, 768},
    {"attproj C->C", 256, 768, 768},
    {"fc      C->4C", 256, 3072, 768},
    {"fcproj 4C->C", 256, 768, 3072},
    {"lm_head C->V", 256, 50304, 768},
};
#define NSHAPES ((int)(sizeof shapes / sizeof *shapes))

struct tiling {
    int64_t tm, tn, tk;   /* 0: whole dimension */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct timing {
    double best, median;   /* seconds */
};

static struct timing summarize(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    struct timing r = {t[0], t[n / 2]};
    return r;
}

static double gflops(const struct shape *s, double seconds)
{
    return 2.0 * (double)s->m * (double)s->n * (double)s->k / seconds * 1e-9;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_ops: %s: %s: %s\n", what, nnt_strerror(rc), nnt_ctx_last_error(NULL));
    exit(1);
}

#define CHECK(call)                  \
    do {                             \
        int rc_ = (call);            \
        if (rc_ != NNT_OK)           \
            die(#call, rc_);         \
    } while (0)

/* ---- one BLIS call --------------------------------------------------------------------- */

static struct timing blis_sgemm(const struct shape *s, int threads, int reps)
{
    int saved = (int)bli_thread_get_num_threads();
    float *x = malloc((size_t)(s->m * s->k) * sizeof *x);   // (m, k)
    float *w = malloc((size_t)(s->n * s->k) * sizeof *w);   // (n, k)
    float *y = malloc((size_t)(s->m * s->n) * sizeof *y);   // (m, n)
    if (!x || !w || !y) {
        fprintf(stderr, "bench_ops: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < s->m * s->k; i++)
        x[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    for (int64_t i = 0; i < s->n * s->k; i++)
        w[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    bli_thread_set_num_threads(threads);
    double t[64];
    for (int r = -1; r < reps; r++) {   /* r = -1: warm-up */
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (f77_int)s->m, (f77_int)s->n,
                    (f77_int)s->k, 1.0f, x, (f77_int)s->k, w, (f77_int)s->k, 0.0f, y,
                    (f77_int)s->n);
        if (r >= 0)
            t[r] = now() - t0;
    }
    bli_thread_set_num_threads(saved);
    free(x);
    free(w);
    free(y);
    return summarize(t, reps);
}

/* ---- the tiled GEMM ---------------------------------------------------------------------- */

struct operands {
    nnt_tensor *x, *w, *y;
};

static int64_t whole(int64_t tile, int64_t dim) { return tile > 0 ? tile : dim; }

static struct operands make_operands(nnt_ctx *ctx, const struct shape *s, struct tiling t)
{
    struct operands o;
    int64_t tm = whole(t.tm, s->m), tn = whole(t.tn, s->n), tk = whole(t.tk, s->k);
    CHECK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){s->m, s->k}, (int64_t[]){tm, tk}, &o.x));
    CHECK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){s->n, s->k}, (int64_t[]){tn, tk}, &o.w));
    CHECK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){s->m, s->n}, (int64_t[]){tm, tn}, &o.y));
    CHECK(nnt_tensor_fill_uniform(o.x, 1, -1.0, 1.0));
    CHECK(nnt_tensor_fill_uniform(o.w, 2, -0.05, 0.05));
    CHECK(nnt_ctx_wait(ctx));
    return o;
}

static void free_operands(struct operands *o)
{
    nnt_tensor_destroy(o->x);
    nnt_tensor_destroy(o->w);
    nnt_tensor_destroy(o->y);
}

/* y = x W^T, timed from submission to completion of every task */
static struct timing tiled_sgemm(nnt_ctx *ctx, const struct shape *s, struct tiling t, int reps)
{
    struct operands o = make_operands(ctx, s, t);
    double times[64];
    for (int r = -2; r < reps; r++) {   /* two warm-ups: allocation, perf-model history */
        double t0 = now();
        CHECK(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 1.0, o.x, o.w, 0.0, o.y, 1, 0));
        CHECK(nnt_ctx_wait(ctx));
        if (r >= 0)
            times[r] = now() - t0;
    }
    free_operands(&o);
    return summarize(times, reps);
}

static int64_t tasks_of(const struct shape *s, struct tiling t)
{
    int64_t tm = whole(t.tm, s->m), tn = whole(t.tn, s->n), tk = whole(t.tk, s->k);
    return ((s->m + tm - 1) / tm) * ((s->n + tn - 1) / tn) * ((s->k + tk - 1) / tk);
}

static void print_tiled(const struct shape *s, struct tiling t, struct timing tt, double ref,
                        const char *note)
{
    printf("  tiles %5lld x %5lld x %4lld  %4lld tasks  best %8.2f ms %7.1f GFLOP/s (%5.1f%% "
           "of BLIS)  median %7.1f GFLOP/s%s\n",
           (long long)whole(t.tm, s->m), (long long)whole(t.tn, s->n),
           (long long)whole(t.tk, s->k), (long long)tasks_of(s, t), tt.best * 1e3,
           gflops(s, tt.best), 100.0 * gflops(s, tt.best) / ref, gflops(s, tt.median), note);
}

/* Tilings tried for a shape: whole K or K / 2, rows 256 / 128 / 64, columns N / 2 and
 * fixed widths; plus the single tile. */
static int sweep(const struct shape *s, struct tiling *out)
{
    const int64_t tms[] = {256, 128, 64};
    const int64_t tns[] = {(s->n + 1) / 2, 1536, 768, 512, 256};
    const int64_t tks[] = {0, (s->k + 1) / 2};
    int n = 0;
    out[n++] = (struct tiling){0, 0, 0};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 5; b++)
            for (int c = 0; c < 2; c++) {
                if (tns[b] > s->n || (b > 0 && tns[b] == tns[0]))
                    continue;
                out[n++] = (struct tiling){tms[a], tns[b], tks[c]};
            }
    return n;
}

static int quick(const struct shape *s, struct tiling *out)
{
    int n = 0;
    out[n++] = (struct tiling){0, (s->n + 1) / 2, 0};
    out[n++] = (struct tiling){0, 768, 0};
    out[n++] = (struct tiling){128, 512, 0};
    if (s->n > 2048)
        out[n++] = (struct tiling){0, 1536, 0};
    return n;
}

/* ---- runtime overhead per task ------------------------------------------------------------- */

static void task_overhead(nnt_ctx *ctx)
{
    const int64_t n = 20000;
    nnt_tensor *t;
    CHECK(nnt_tensor_create(ctx, NNT_FP32, 1, &n, (int64_t[]){1}, &t));
    CHECK(nnt_tensor_fill(t, 0.0));   /* first fill allocates the tiles */
    CHECK(nnt_ctx_wait(ctx));
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        CHECK(nnt_tensor_fill(t, (double)r));
        double t1 = now();
        CHECK(nnt_ctx_wait(ctx));
        double t2 = now();
        if (t2 - t0 < best)
            best = t2 - t0;
        if (r == 4)
            printf("  last round: submission %.2f us/task, submission + execution %.2f us/task\n",
                   (t1 - t0) / (double)n * 1e6, (t2 - t0) / (double)n * 1e6);
    }
    printf("  %lld fills of 1-element tiles: best %.2f us per task (wall time / tasks)\n",
           (long long)n, best / (double)n * 1e6);
    nnt_tensor_destroy(t);
}

/* The 1-minute load average, to tell whether other processes shared the cores. */
static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* ---- main ------------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    int reps = 5, only = 0, fast = 0, opt;
    const char *sched = NULL, *layer = NULL;
    struct tiling fixed = {0, 0, 0};
    while ((opt = getopt(argc, argv, "r:s:t:l:q")) != -1) {
        switch (opt) {
        case 'r': reps = atoi(optarg); break;
        case 's': sched = optarg; break;
        case 't': {
            long long a, b, c;
            if (sscanf(optarg, "%lld,%lld,%lld", &a, &b, &c) != 3) {
                fprintf(stderr, "bench_ops: -t wants TM,TN,TK\n");
                return 2;
            }
            fixed = (struct tiling){a, b, c};
            only = 1;
            break;
        }
        case 'l': layer = optarg; break;
        case 'q': fast = 1; break;
        default:
            fprintf(stderr, "usage: %s [-r REPS] [-s SCHED] [-t TM,TN,TK] [-l LAYER] [-q]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64)
        reps = 5;
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("load average at start %.2f\n", loadavg());

    /* references first, while no runtime thread competes for the cores */
    double ref[NSHAPES], ref1[NSHAPES];
    printf("BLIS sgemm (one call, row-major, x W^T), %ld threads / 1 thread:\n", ncores);
    for (int i = 0; i < NSHAPES; i++) {
        const struct shape *s = &shapes[i];
        if (layer && !strstr(s->name, layer))
            continue;
        struct timing tb = blis_sgemm(s, (int)ncores, reps), t1 = blis_sgemm(s, 1, reps);
        ref[i] = gflops(s, tb.best);
        ref1[i] = gflops(s, t1.best);
        printf("  %-14s M %lld N %5lld K %4lld: %7.1f GFLOP/s (%.2f ms), 1 thread %6.1f\n",
               s->name, (long long)s->m, (long long)s->n, (long long)s->k, ref[i],
               tb.best * 1e3, ref1[i]);
    }

    nnt_ctx_options opts = NNT_CTX_OPTIONS_INIT;
    opts.ncuda = 0;
    opts.sched = sched;
    nnt_ctx *ctx;
    CHECK(nnt_ctx_create(&opts, &ctx));
    int ncpus;
    const char *sname;
    CHECK(nnt_ctx_workers(ctx, &ncpus, NULL));
    CHECK(nnt_ctx_sched(ctx, &sname));
    printf("\nnnt_tensor_gemm(NOTRANS, TRANS): %d CPU workers, scheduler %s, BLIS threads %d "
           "per worker, %d timed runs each\n", ncpus, sname, (int)bli_thread_get_num_threads(),
           reps);
    double total_blis = 0, total_best = 0;
    for (int i = 0; i < NSHAPES; i++) {
        const struct shape *s = &shapes[i];
        if (layer && !strstr(s->name, layer))
            continue;
        struct tiling list[64];
        int n = only ? 1 : fast ? quick(s, list) : sweep(s, list);
        if (only)
            list[0] = fixed;
        printf("%s (BLIS %.1f GFLOP/s):\n", s->name, ref[i]);
        double best = 0;
        struct tiling best_t = list[0];
        for (int j = 0; j < n; j++) {
            struct timing tt = tiled_sgemm(ctx, s, list[j], reps);
            print_tiled(s, list[j], tt, ref[i], "");
            if (gflops(s, tt.best) > best) {
                best = gflops(s, tt.best);
                best_t = list[j];
            }
        }
        printf("  => best tiling %lld x %lld x %lld: %.1f GFLOP/s = %.1f%% of BLIS\n",
               (long long)whole(best_t.tm, s->m), (long long)whole(best_t.tn, s->n),
               (long long)whole(best_t.tk, s->k), best, 100.0 * best / ref[i]);
        double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
        total_blis += flop / (ref[i] * 1e9);
        total_best += flop / (best * 1e9);
        if (i == 0 && !only) {   /* a global BLIS thread count of 2 inside the workers */
            int saved = (int)bli_thread_get_num_threads();
            bli_thread_set_num_threads(2);
            struct timing tt = tiled_sgemm(ctx, s, best_t, reps);
            print_tiled(s, best_t, tt, ref[i], "  <- BLIS global threads = 2 in each worker");
            bli_thread_set_num_threads(saved);
        }
    }
    if (!layer)
        printf("all five layers, best tiling each: %.2f ms vs BLIS %.2f ms (%.1f%%)\n",
               total_best * 1e3, total_blis * 1e3, 100.0 * total_blis / total_best);

    printf("\nruntime overhead per task:\n");
    task_overhead(ctx);
    CHECK(nnt_ctx_destroy(ctx));
    printf("load average at end %.2f (includes this program)\n", loadavg());
    return 0;
}
