/* SPDX-License-Identifier: MIT */
/* Sliding-window attention against plain causal attention, side by side in one run
 * (bench/RESULTS-window.md): the forward and the backward of nnt_tensor_attention_ex /
 * nnt_tensor_attention_backward_ex over (B, NH, T, hd) with NKV kv heads, the same tiling
 * (sequence tiles of TILE, head tiles of HTILE q heads: whole heads by default), without a window and with a window of W keys,
 * alternating in every round. Prints each round's times and ratio, the median and best,
 * the ratio of query-key pairs (the FLOP ratio), and from a traced pass of each the tasks
 * submitted (against the count of tile pairs that reach a window: none is submitted for a
 * pair wholly outside) and the kernels' busy time. Public API only.
 *
 * Usage: bench/attention_window [ROUNDS [T [W [TILE [NH [NKV [HD [PRECISION [HTILE]]]]]]]]]
 *        defaults 5 4096 512 256 8 8 64 fp32 NH; PRECISION bf16: the context's precision
 *        NNT_PRECISION_BF16 (the CPU attention kernels' products in bf16 where oneDNN has
 *        bf16 dot products, nnt_ctx_set_precision(3)); HTILE divides NH and is a multiple of
 *        NH / NKV (each q head tile reads one kv head tile, of HTILE NKV / NH heads) */
#include <nnt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 64

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static double best(const double *v, int n)
{
    double b = v[0];
    for (int i = 1; i < n; i++)
        b = v[i] < b ? v[i] : b;
    return b;
}

/* The tensors: q, k, v, o, dout, dq, dk, dv (B, heads, T, hd) and lse (B, NH, T). */
enum { Q, K, V, O, DOUT, DQ, DK, DV, LSE, NT };

struct bench {
    nnt_ctx *ctx;
    nnt_tensor *t[NT];
};

/* One forward and one backward with window w (0: causal), waited for; their seconds. */
static int pass(struct bench *b, int64_t w, double *fwd, double *bwd)
{
    nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    nnt_tensor **t = b->t;
    ao.window = w;
    double t0 = now_s();
    int rc = nnt_tensor_attention_ex(t[Q], t[K], t[V], &ao, t[O], t[LSE]);
    if (rc == 0)
        rc = nnt_ctx_wait(b->ctx);
    double t1 = now_s();
    if (rc == 0)
        rc = nnt_tensor_attention_backward_ex(t[Q], t[K], t[V], t[O], t[LSE], t[DOUT], &ao,
                                              t[DQ], t[DK], t[DV]);
    if (rc == 0)
        rc = nnt_ctx_wait(b->ctx);
    *fwd = t1 - t0;
    *bwd = now_s() - t1;
    return rc;
}

/* Query-key pairs that the window w (0: causal) lets through, over one (b, h) slab. */
static double pairs(int64_t T, int64_t w)
{
    double n = 0.0;
    for (int64_t i = 0; i < T; i++)
        n += (double)(w > 0 && w < i + 1 ? w : i + 1);
    return n;
}

/* (query tile, key tile) pairs that get a block task: key tile j <= i not wholly before the
 * window of query tile i's first query, per slab tile. */
static int64_t tile_pairs(int64_t T, int64_t tile, int64_t w)
{
    int64_t n = 0, nt = (T + tile - 1) / tile;
    for (int64_t i = 0; i < nt; i++)
        for (int64_t j = 0; j <= i; j++) {
            int64_t klast = (j + 1) * tile - 1 < T - 1 ? (j + 1) * tile - 1 : T - 1;
            n += !(w > 0 && klast <= i * tile - w);
        }
    return n;
}

/* From a trace table: the count and total ms of codelet name. */
static int table_row(const char *path, const char *name, long long *count, double *ms)
{
    FILE *f = fopen(path, "r");
    char line[512], op[128];
    *count = 0;
    *ms = 0.0;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        long long c = 0;
        double total = 0.0;
        if (sscanf(line, "%127s %lld %lf", op, &c, &total) == 3 && strcmp(op, name) == 0) {
            *count = c;
            *ms = total;
        }
    }
    fclose(f);
    return 0;
}

/* The attention codelets of a trace table: block tasks, band tasks (a query tile over its
 * whole band: sliding windows on CPU workers), the blocks' finalize and prep tasks */
enum { FWD_BLOCK, BWD_BLOCK, FWD_BAND, BWD_BAND, FINALIZE, PREP, NCL };
static const char *const codelets[NCL] = {"nnt_attn_fwd_block", "nnt_attn_bwd_block",
                                          "nnt_attn_fwd_band", "nnt_attn_bwd_band",
                                          "nnt_attn_fwd_finalize", "nnt_attn_bwd_prep"};

/* A traced pass with window w: each attention codelet's tasks and busy ms. */
static int traced(struct bench *b, int64_t w, long long counts[NCL], double ms[NCL])
{
    char path[64];
    double f = 0.0, g = 0.0;
    snprintf(path, sizeof path, "/tmp/nnt-attention-window-%ld.txt", (long)getpid());
    int rc = nnt_trace_start(b->ctx);
    if (rc == 0)
        rc = pass(b, w, &f, &g);
    if (rc == 0)
        rc = nnt_trace_stop(b->ctx, NULL, path);
    for (int c = 0; c < NCL && rc == 0; c++)
        if (table_row(path, codelets[c], &counts[c], &ms[c]))
            rc = -1;
    remove(path);
    return rc;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    int64_t T = argc > 2 ? atoll(argv[2]) : 4096, W = argc > 3 ? atoll(argv[3]) : 512;
    int64_t tile = argc > 4 ? atoll(argv[4]) : 256, NH = argc > 5 ? atoll(argv[5]) : 8;
    int64_t NKV = argc > 6 ? atoll(argv[6]) : NH, HD = argc > 7 ? atoll(argv[7]) : 64;
    const char *prec = argc > 8 ? argv[8] : "fp32";
    int64_t htile = argc > 9 ? atoll(argv[9]) : NH;
    if (rounds < 1 || rounds > MAX_ROUNDS || T < 1 || W < 1 || tile < 1 || NH < 1 ||
        NKV < 1 || NH % NKV || HD < 1 || (strcmp(prec, "fp32") && strcmp(prec, "bf16")) ||
        htile < 1 || NH % htile || htile % (NH / NKV)) {
        fprintf(stderr, "usage: %s [ROUNDS (1..%d) [T [W [TILE [NH [NKV [HD [fp32|bf16 "
                "[HTILE]]]]]]]]]\n", argv[0], MAX_ROUNDS);
        return 2;
    }
    int64_t kvtile = htile / (NH / NKV), nht = NH / htile;   /* kv heads a tile; head tiles */
    struct bench b = {NULL, {NULL}};
    int64_t qs[4] = {1, NH, T, HD}, ks[4] = {1, NKV, T, HD}, ls[3] = {1, NH, T};
    int64_t qt[4] = {1, htile, tile, HD}, kt[4] = {1, kvtile, tile, HD};
    int64_t lt[3] = {1, htile, tile};
    int rc = nnt_ctx_create(NULL, &b.ctx);
    if (rc == 0 && strcmp(prec, "bf16") == 0)
        rc = nnt_ctx_set_precision(b.ctx, NNT_PRECISION_BF16);
    for (int i = 0; i < LSE && rc == 0; i++) {
        int kv = i == K || i == V || i == DK || i == DV;
        rc = nnt_tensor_create(b.ctx, NNT_FP32, 4, kv ? ks : qs, kv ? kt : qt, &b.t[i]);
    }
    if (rc == 0)
        rc = nnt_tensor_create(b.ctx, NNT_FP32, 3, ls, lt, &b.t[LSE]);
    const int fill[4] = {Q, K, V, DOUT};
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = nnt_tensor_fill_normal(b.t[fill[i]], (uint64_t)i + 1, 0.0, 1.0);
    double f[2][MAX_ROUNDS], g[2][MAX_ROUNDS], sum[2][MAX_ROUNDS], ratio[MAX_ROUNDS];
    double f0 = 0.0, g0 = 0.0;
    if (rc == 0)
        rc = nnt_ctx_wait(b.ctx);
    for (int v = 0; v < 2 && rc == 0; v++)   /* warm-up: scratch, perf models */
        rc = pass(&b, v ? W : 0, &f0, &g0);
    printf("attention (1, %lld, %lld, %lld), %lld kv heads, sequence tiles of %lld, head "
           "tiles of %lld; window %lld against causal, %d rounds, precision %s\n",
           (long long)NH, (long long)T, (long long)HD, (long long)NKV, (long long)tile,
           (long long)htile, (long long)W, rounds, prec);
    for (int r = 0; r < rounds && rc == 0; r++) {
        for (int v = 0; v < 2 && rc == 0; v++) {
            int which = r % 2 ? 1 - v : v;   /* alternate which goes first */
            rc = pass(&b, which ? W : 0, &f[which][r], &g[which][r]);
            sum[which][r] = f[which][r] + g[which][r];
        }
        if (rc)
            break;
        ratio[r] = sum[1][r] / sum[0][r];
        printf("round %d: causal %8.1f ms (forward %7.1f, backward %7.1f), window %8.1f ms "
               "(forward %7.1f, backward %7.1f): %.3fx\n", r + 1, 1e3 * sum[0][r],
               1e3 * f[0][r], 1e3 * g[0][r], 1e3 * sum[1][r], 1e3 * f[1][r], 1e3 * g[1][r],
               ratio[r]);
    }
    long long counts[2][NCL];
    double busy[2][NCL];
    for (int v = 0; v < 2 && rc == 0; v++)
        rc = traced(&b, v ? W : 0, counts[v], busy[v]);
    if (rc == 0) {
        double pc = pairs(T, 0), pw = pairs(T, W);
        /* B 1: a task per tile pair (or query tile) of each of the nht head tiles */
        int64_t tc = nht * tile_pairs(T, tile, 0), tw = nht * tile_pairs(T, tile, W);
        printf("median: causal %.1f ms (forward %.1f, backward %.1f), window %.1f ms "
               "(forward %.1f, backward %.1f); ratio of the rounds' times: median %.3fx, "
               "best %.3fx\n", 1e3 * median(sum[0], rounds), 1e3 * median(f[0], rounds),
               1e3 * median(g[0], rounds), 1e3 * median(sum[1], rounds),
               1e3 * median(f[1], rounds), 1e3 * median(g[1], rounds),
               median(ratio, rounds), best(ratio, rounds));
        printf("query-key pairs: causal %.0f, window %.0f: FLOP ratio %.3f\n", pc, pw, pw / pc);
        long long nt = nht * ((T + tile - 1) / tile);   /* query tiles: a band task each */
        double all[2] = {0.0, 0.0};
        for (int v = 0; v < 2; v++)
            for (int c = 0; c < NCL; c++)
                all[v] += busy[v][c];
        for (int v = 0; v < 2; v++)
            printf("%s tasks (traced pass): blocks forward %lld backward %lld, bands forward "
                   "%lld backward %lld (tile pairs %s: %lld%s); busy ms: blocks %.1f + %.1f, "
                   "bands %.1f + %.1f, finalize %.1f, prep %.1f\n", v ? "window" : "causal",
                   counts[v][FWD_BLOCK], counts[v][BWD_BLOCK], counts[v][FWD_BAND],
                   counts[v][BWD_BAND], v ? "reaching the window" : "j <= i",
                   (long long)(v ? tw : tc), v ? ", the others get no task" : "",
                   busy[v][FWD_BLOCK], busy[v][BWD_BLOCK], busy[v][FWD_BAND],
                   busy[v][BWD_BAND], busy[v][FINALIZE], busy[v][PREP]);
        printf("attention kernels' busy time (traced pass): causal %.1f ms, window %.1f ms: "
               "%.3fx\n", all[0], all[1], all[1] / all[0]);
        /* blocks: a task per tile pair; bands (the window on CPU workers): a task per query
         * tile, forward and backward (a backward with too few tasks a class keeps blocks) */
        int causal_ok = counts[0][FWD_BLOCK] == tc && counts[0][BWD_BLOCK] == tc;
        int fwd_ok = counts[1][FWD_BLOCK] == tw || (counts[1][FWD_BLOCK] == 0 &&
                                                    counts[1][FWD_BAND] == nt);
        int bwd_ok = counts[1][BWD_BLOCK] == tw || (counts[1][BWD_BLOCK] == 0 &&
                                                    counts[1][BWD_BAND] == nt);
        if (!causal_ok || !fwd_ok || !bwd_ok) {
            fprintf(stderr, "attention_window: the task counts differ from the tile pairs\n");
            rc = 1;
        }
    } else {
        fprintf(stderr, "attention_window: %s: %s\n", nnt_strerror(rc),
                nnt_ctx_last_error(NULL));
    }
    for (int i = 0; i < NT; i++)
        nnt_tensor_destroy(b.t[i]);
    nnt_ctx_destroy(b.ctx);
    return rc ? 1 : 0;
}
