/* SPDX-License-Identifier: MIT */
/* attention_cpu.c (issue 16): the CPU attention kernels (forward block + finalize, backward
 * prep + block) on one thread, in three configurations, interleaved rounds, best of the
 * calls in each round:
 *   generic + BLIS   portable softmax rows (nnt_cpu_isa forced to generic), products by BLIS
 *                    (the kernels before this bench was written);
 *   avx2 + BLIS      the AVX2 softmax rows (where the CPU has AVX2 + FMA);
 *   avx2 + oneDNN    and the products through oneDNN, as the codelets run them when oneDNN
 *                    is the CPU GEMM backend (skipped in a build without oneDNN);
 *   oneDNN bf16      the products with bf16 operands, as the codelets run them under
 *                    NNT_PRECISION_BF16 (only where oneDNN has bf16 dot products).
 *
 * Shapes: one tile of nnt's automatic tiling for GPT-2 124M on 2 workers: 24 slabs (batch
 * tile 2 x 12 heads) of T 64 (B 4, T 64), and 12 slabs of a 512-row query block over a
 * 512-key block (B 1, T 1024: the tiling cuts the sequence in two), diagonal and below.
 * GFLOP/s counts the products over the visible (query, key) pairs only: forward 2 products
 * (q k^T, p v), backward 5 (q k^T and dout v^T again, dv, dq, dk).
 * Built with the library (a build directory's bench/attention_cpu); run it from there:
 *
 *     bench/attention_cpu [ROUNDS]          (default 3 rounds)
 */
#define _POSIX_C_SOURCE 200809L
#include "nnt_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HD 64
#define MIN_SECONDS 0.3

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *buf(int64_t n, float lo, float hi, unsigned seed)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (!p) {
        fprintf(stderr, "attention_cpu: out of memory\n");
        exit(1);
    }
    srand(seed);
    for (int64_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
    return p;
}

struct shape {
    const char *name;
    int64_t nbh, tq, tk, q_pos0, k_pos0;
};

struct bufs {
    float *q, *k, *v, *dout, *o, *m, *l, *lse, *d, *dq, *dk, *dv;
};

static struct bufs alloc_bufs(const struct shape *s)
{
    int64_t nq = s->nbh * s->tq * HD, nk = s->nbh * s->tk * HD, r = s->nbh * s->tq;
    struct bufs b = {buf(nq, -2, 2, 1), buf(nk, -2, 2, 2), buf(nk, -1, 1, 3),
                     buf(nq, -1, 1, 4), buf(nq, 0, 0, 5), buf(r, 0, 0, 6), buf(r, 0, 0, 7),
                     buf(r, 0, 0, 8), buf(r, 0, 0, 9), buf(nq, 0, 0, 10), buf(nk, 0, 0, 11),
                     buf(nk, 0, 0, 12)};
    return b;
}

#define NCONF 4
static const char *const conf_name[NCONF] = {"generic + BLIS", "avx2 + BLIS", "avx2 + oneDNN",
                                             "oneDNN bf16"};
static nnt_dnnl_cache *dnnl; /* the products' cache in the current configuration, or NULL */
static int bf16;             /* the configuration's products in bf16                         */

static void forward(const struct shape *s, struct bufs *b)
{
    const nnt_attn_map mha = {s->nbh, 1, 1, 0, 1, 1, 0, bf16};
    for (int64_t i = 0; i < s->nbh * s->tq; i++)
        b->m[i] = -INFINITY, b->l[i] = 0.0f;
    memset(b->o, 0, (size_t)(s->nbh * s->tq * HD) * sizeof(float));
    nnt_cpu_attn_fwd_gqa_f32(dnnl, &mha, s->tq, s->tk, HD, s->q_pos0, s->k_pos0, 0.125f, b->q,
                             b->k, b->v, b->o, b->m, b->l);
    nnt_cpu_attn_fwd_finalize_f32(s->nbh, s->tq, HD, b->o, b->m, b->l, b->lse);
}

static void backward(const struct shape *s, struct bufs *b)
{
    const nnt_attn_map mha = {s->nbh, 1, 1, 0, 1, 1, 0, bf16};
    nnt_cpu_attn_bwd_prep_f32(s->nbh, s->tq, HD, b->o, b->dout, b->d);
    nnt_cpu_attn_bwd_gqa_f32(dnnl, &mha, s->tq, s->tk, HD, s->q_pos0, s->k_pos0, 0.125f, b->q,
                             b->k, b->v, b->dout, b->lse, b->d, b->dq, b->dk, b->dv);
}

/* best seconds of one forward and one backward over >= MIN_SECONDS of calls */
static void best_of(const struct shape *s, struct bufs *b, double *fwd, double *bwd)
{
    *fwd = *bwd = 1e30;
    double start = now();
    do {
        double t0 = now();
        forward(s, b);
        double t1 = now();
        backward(s, b);
        double t2 = now();
        *fwd = t1 - t0 < *fwd ? t1 - t0 : *fwd;
        *bwd = t2 - t1 < *bwd ? t2 - t1 : *bwd;
    } while (now() - start < MIN_SECONDS);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    if (rounds < 1 || rounds > 50)
        rounds = 3;
    const struct shape shapes[] = {
        {"GPT-2 B4 T64 tile (24 x 64 x 64)", 24, 64, 64, 0, 0},
        {"T1024 diagonal block (12 x 512 x 512)", 12, 512, 512, 0, 0},
        {"T1024 block below the diagonal (12 x 512 x 512)", 12, 512, 512, 512, 0},
    };
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    int nconf = !cache ? NCONF - 2 : nnt_cpu_dnnl_bf16_native() ? NCONF : NCONF - 1;
    printf("attention_cpu: one thread, head_dim %d, %d rounds (the configurations in turn each "
           "round), ms = best call of the round, median over rounds; CPU ISA %s, oneDNN %s\n",
           HD, rounds, nnt_cpu_isa_name(), cache ? nnt_cpu_dnnl_isa() : "not available");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const struct shape *s = &shapes[si];
        struct bufs b = alloc_bufs(s);
        double t[NCONF][2][50]; /* [configuration][fwd, bwd][round] */
        for (int r = 0; r < rounds; r++)
            for (int c = 0; c < nconf; c++) {
                nnt_cpu_isa_force(c ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
                dnnl = c >= 2 ? cache : NULL;
                bf16 = c == 3;
                best_of(s, &b, &t[c][0][r], &t[c][1][r]);
            }
        /* causal product flops: full 2 tq tk hd per product, minus what lies above */
        double vis = 0.0;
        for (int64_t i = 0; i < s->tq; i++) {
            int64_t n = s->q_pos0 + i - s->k_pos0 + 1;
            vis += (double)(n < 0 ? 0 : n > s->tk ? s->tk : n);
        }
        double prod = 2.0 * vis * HD * (double)s->nbh;
        printf("\n%s\n", s->name);
        for (int c = 0; c < nconf; c++) {
            double med[2];
            for (int w = 0; w < 2; w++) {
                double sorted[50];
                memcpy(sorted, t[c][w], (size_t)rounds * sizeof(double));
                qsort(sorted, (size_t)rounds, sizeof(double), cmp_double);
                med[w] = sorted[rounds / 2];
            }
            printf("  %-14s fwd %8.3f ms (%5.1f GFLOP/s)  bwd %8.3f ms (%5.1f GFLOP/s)\n",
                   conf_name[c], med[0] * 1e3, 2 * prod / med[0] * 1e-9, med[1] * 1e3,
                   5 * prod / med[1] * 1e-9);
        }
        for (int c = 1; c < nconf; c++) {
            printf("  generic + BLIS / %s per round: fwd", conf_name[c]);
            for (int r = 0; r < rounds; r++)
                printf(" %.2f", t[0][0][r] / t[c][0][r]);
            printf(", bwd");
            for (int r = 0; r < rounds; r++)
                printf(" %.2f", t[0][1][r] / t[c][1][r]);
            printf("\n");
        }
        float *all[] = {b.q, b.k, b.v, b.dout, b.o, b.m, b.l, b.lse, b.d, b.dq, b.dk, b.dv};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            free(all[i]);
    }
    nnt_cpu_dnnl_cache_destroy(cache);
    nnt_cpu_isa_force(-1);
    return 0;
}
