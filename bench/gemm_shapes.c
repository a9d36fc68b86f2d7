/* SPDX-License-Identifier: MIT */
/* gemm_shapes.c (issue 16): BLIS (nnt_cpu_gemm_f32) against oneDNN (nnt_cpu_gemm_dnnl) on
 * one core, on the products of GPT-2 124M as nnt's automatic tiling cuts them for 2 CPU
 * workers (128-row tiles, C 768, hidden tiles 1536, vocab tiles 7232); best of 6 calls
 * after one warm-up, the two kernels alternating. Needs a build configured with oneDNN:
 *
 *     cc -O2 -std=c99 -D_POSIX_C_SOURCE=200809L -Icpu bench/gemm_shapes.c \
 *        BUILD/.libs/libnntkernels.a -lblis -ldnnl -lgomp -lm -o /tmp/gemm_shapes
 *     OMP_NUM_THREADS=1 /tmp/gemm_shapes
 */
#include "nnt_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const struct {
    int ta, tb;
    long m, n, k;
    float beta;
    const char *name;
} shapes[] = {
    {0, 1, 128, 2304, 768, 0, "qkv forward x W^T"}, {0, 1, 128, 768, 768, 0, "attn proj forward"},
    {0, 1, 128, 1536, 768, 0, "fc forward"},        {0, 1, 128, 768, 1536, 1, "fc proj forward"},
    {0, 1, 128, 7232, 768, 0, "lm head forward"},   {0, 0, 128, 768, 2304, 0, "qkv dX"},
    {0, 0, 128, 768, 1536, 0, "fc dX"},             {1, 0, 2304, 768, 128, 1, "qkv dW"},
    {1, 0, 768, 1536, 128, 1, "fc proj dW"},        {1, 0, 7232, 768, 128, 1, "lm head dW"},
    {0, 0, 128, 1536, 768, 0, "fc proj dX"},
};

int main(void)
{
    printf("BLIS %s, oneDNN ISA %s\n", nnt_cpu_blis_setup(), nnt_cpu_dnnl_isa());
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    if (!cache)
        return 77;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        long m = shapes[i].m, n = shapes[i].n, k = shapes[i].k;
        float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
        float *c = calloc((size_t)(m * n), sizeof(float));
        if (!a || !b || !c)
            return 1;
        for (long j = 0; j < m * k; j++)
            a[j] = (float)(j % 7) * 0.1f;
        for (long j = 0; j < k * n; j++)
            b[j] = (float)(j % 5) * 0.1f;
        long lda = shapes[i].ta ? m : k, ldb = shapes[i].tb ? k : n;
        double tb = 1e30, td = 1e30;
        for (int r = 0; r < 7; r++) {
            double t0 = now();
            nnt_cpu_gemm_f32(shapes[i].ta, shapes[i].tb, m, n, k, 1.0f, a, lda, 0, b, ldb, 0,
                             shapes[i].beta, c, n, 0, 1);
            double t1 = now();
            if (nnt_cpu_gemm_dnnl(cache, shapes[i].ta, shapes[i].tb, 0, m, n, k, 1.0f, a,
                                  lda, 0, b, ldb, 0, shapes[i].beta, c, n, 0, 1))
                return 1;
            double t2 = now();
            if (r > 0) {
                tb = t1 - t0 < tb ? t1 - t0 : tb;
                td = t2 - t1 < td ? t2 - t1 : td;
            }
        }
        double fl = 2.0 * m * n * k;
        printf("%-18s m %5ld n %5ld k %5ld  BLIS %6.1f  oneDNN %6.1f GFLOP/s  BLIS/oneDNN "
               "time %.2f\n", shapes[i].name, m, n, k, fl / tb / 1e9, fl / td / 1e9, tb / td);
        free(a);
        free(b);
        free(c);
    }
    nnt_cpu_dnnl_cache_destroy(cache);
    return 0;
}
