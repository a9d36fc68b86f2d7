/* SPDX-License-Identifier: MIT */
/* sample_top_p: the time of one top_p draw (nnt_sampler_pick, top_k 0) over a vocabulary of
 * V against the sort of every candidate (what nnt 0.3 did before: qsort of V, then the
 * nucleus), side by side, on Zipf-like logits: logit = -s log(rank) + noise, the ranks
 * shuffled over the ids, s from peaked to flat. Prints each case's nucleus size, both times
 * (median of the rounds) and their ratio, and checks that both draw the same tokens. Not a
 * test; built by hand (bench/RESULTS-generate.md):
 *
 *   cc -O2 -I include -I lib -I build bench/sample_top_p.c -o /tmp/sample_top_p -lm
 *   /tmp/sample_top_p [V] [rounds]
 *
 * It compiles lib/models/sample.c into itself (the sampler is internal); nnt_fail is
 * stubbed. */
#include "../lib/models/sample.c"

#include <stdio.h>
#include <string.h>
#include <time.h>

int nnt_fail(const nnt_ctx *ctx, int rc, const char *fmt, ...)
{
    (void)ctx, (void)fmt;
    return rc;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the former way: every candidate sorted, the nucleus, one draw */
static int32_t sort_all(nnt_sampler *sm, const float *l, uint64_t rng[4])
{
    int64_t V = sm->V, best = 0;
    for (int64_t v = 0; v < V; v++)
        best = l[v] > l[best] ? v : best;
    all_candidates(sm, l);
    qsort(sm->cand, (size_t)V, sizeof *sm->cand, cand_cmp);
    int64_t k = nucleus_size(sm, V, l[best], -1.0);
    return draw(sm, rng, k, l[best]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int64_t V = argc > 1 ? atoll(argv[1]) : 151936;
    int rounds = argc > 2 ? atoi(argv[2]) : 21;
    float *l = malloc((size_t)V * sizeof *l);
    int64_t *perm = malloc((size_t)V * sizeof *perm);
    double *ta = malloc((size_t)rounds * sizeof *ta), *tb = malloc((size_t)rounds * sizeof *tb);
    if (!l || !perm || !ta || !tb)
        return 1;
    uint64_t x = 2026;
    for (int64_t v = 0; v < V; v++)
        perm[v] = v;
    for (int64_t v = V - 1; v > 0; v--) {   /* Fisher-Yates with an LCG */
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t j = (int64_t)((x >> 11) % (uint64_t)(v + 1)), t = perm[v];
        perm[v] = perm[j], perm[j] = t;
    }
    const double scales[4] = {4.0, 2.0, 1.2, 0.8}, ps[2] = {0.9, 0.95};
    printf("V %lld, temperature 0.7, %d rounds (medians)\n", (long long)V, rounds);
    printf("%-6s %-6s %10s %14s %14s %8s\n", "s", "top_p", "nucleus", "nnt ms", "sort-all ms",
           "ratio");
    for (int si = 0; si < 4; si++)
        for (int pi = 0; pi < 2; pi++) {
            for (int64_t r = 0; r < V; r++) {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                double noise = ((double)(x >> 11) * 0x1p-53 - 0.5) * 0.5;
                l[perm[r]] = (float)(-scales[si] * log((double)(r + 1)) + noise);
            }
            nnt_sampler a, b;
            if (nnt_sampler_init(&a, NULL, "bench", V, 0.7, 0) ||
                nnt_sampler_init(&b, NULL, "bench", V, 0.7, 0))
                return 1;
            a.top_p = b.top_p = ps[pi];
            uint64_t ra[4], rb[4];
            nnt_sampler_seed(ra, 5), nnt_sampler_seed(rb, 5);
            for (int i = 0; i < rounds; i++) {
                int32_t tka = -1, tkb = -2;
                double t0 = now();
                nnt_sampler_pick(&a, NULL, "bench", l, ra, &tka);
                double t1 = now();
                tkb = sort_all(&b, l, rb);
                double t2 = now();
                ta[i] = (t1 - t0) * 1e3, tb[i] = (t2 - t1) * 1e3;
                if (tka != tkb) {
                    printf("different tokens: %d and %d\n", (int)tka, (int)tkb);
                    return 1;
                }
            }
            int64_t best = 0;   /* the nucleus's size, as the sort gives it */
            for (int64_t v = 0; v < V; v++)
                best = l[v] > l[best] ? v : best;
            all_candidates(&b, l);
            qsort(b.cand, (size_t)V, sizeof *b.cand, cand_cmp);
            int64_t n = nucleus_size(&b, V, l[best], -1.0);
            qsort(ta, (size_t)rounds, sizeof *ta, cmp_double);
            qsort(tb, (size_t)rounds, sizeof *tb, cmp_double);
            double ma = ta[rounds / 2], mb = tb[rounds / 2];
            printf("%-6.1f %-6.2f %10lld %14.3f %14.3f %8.2f\n", scales[si], ps[pi],
                   (long long)n, ma, mb, mb / ma);
            nnt_sampler_free(&a), nnt_sampler_free(&b);
        }
    free(l), free(perm), free(ta), free(tb);
    return 0;
}
