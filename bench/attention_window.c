/* SPDX-License-Identifier: MIT */
/* Sliding-window attention against plain causal attention, one run side by side
 * (bench/RESULTS-cpu-kernels.md): the forward of nnt_tensor_attention_ex over (B, NH, T, hd)
 * = (1, 8, 2048, 64) in sequence tiles of 256, without a window and with windows of 512 and
 * 128 keys, rounds interleaved; prints ms per forward and the ratio to causal. Public API
 * only. Usage: bench/attention_window [ROUNDS] */
#include <nnt.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    enum { NWIN = 3, REPS = 5 };
    const int64_t windows[NWIN] = {0, 512, 128};
    double best[NWIN] = {1e30, 1e30, 1e30};
    int64_t shape[4] = {1, 8, 2048, 64}, tile[4] = {1, 8, 256, 64};
    int64_t lshape[3] = {1, 8, 2048}, ltile[3] = {1, 8, 256};
    nnt_ctx *ctx = NULL;
    nnt_tensor *t[5] = {NULL, NULL, NULL, NULL, NULL};   /* q, k, v, o, lse */
    int rc = nnt_ctx_create(NULL, &ctx);
    for (int i = 0; i < 4 && !rc; i++)
        rc = nnt_tensor_create(ctx, NNT_FP32, 4, shape, tile, &t[i]);
    if (!rc)
        rc = nnt_tensor_create(ctx, NNT_FP32, 3, lshape, ltile, &t[4]);
    for (int i = 0; i < 3 && !rc; i++)
        rc = nnt_tensor_fill_normal(t[i], (uint64_t)i + 1, 0.0, 1.0);
    if (!rc)
        rc = nnt_ctx_wait(ctx);
    for (int r = 0; r < rounds && !rc; r++)
        for (int w = 0; w < NWIN && !rc; w++) {
            nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
            ao.window = windows[w];
            double start = now_s();
            for (int k = 0; k < REPS && !rc; k++)
                rc = nnt_tensor_attention_ex(t[0], t[1], t[2], &ao, t[3], t[4]);
            if (!rc)
                rc = nnt_ctx_wait(ctx);
            double ms = (now_s() - start) / REPS * 1e3;
            best[w] = ms < best[w] ? ms : best[w];
        }
    if (rc)
        fprintf(stderr, "attention_window: %s: %s\n", nnt_strerror(rc), nnt_ctx_last_error(NULL));
    else
        for (int w = 0; w < NWIN; w++)
            printf("window %4lld: %7.1f ms a forward (best of %d rounds), %.2fx causal's speed\n",
                   (long long)windows[w], best[w], rounds, best[0] / best[w]);
    for (int i = 0; i < 5; i++)
        nnt_tensor_destroy(t[i]);
    nnt_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
