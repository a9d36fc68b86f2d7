/* SPDX-License-Identifier: MIT */
/* copy_gbs.c (issue 16): the host's memory bandwidth as a plain copy loop sees it, the
 * yardstick for nnt's memory-bound (non-GEMM) kernels: y[i] = x[i] over 256 MiB arrays by 1
 * and by N threads (argument, default 2), best of 10; GB/s counts bytes read + written.
 *
 *     cc -O2 -pthread bench/copy_gbs.c -o /tmp/copy_gbs && /tmp/copy_gbs 2
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N ((size_t)64 << 20)   /* floats per array: 256 MiB */

struct part {
    const float *x;
    float *y;
    size_t n;
};

static void *copy_part(void *arg)
{
    struct part *p = arg;
    for (size_t i = 0; i < p->n; i++)
        p->y[i] = p->x[i];
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double copy_gbs(const float *x, float *y, int threads)
{
    double best = 1e30;
    for (int r = 0; r < 10; r++) {
        pthread_t th[64];
        struct part p[64];
        double t0 = now();
        for (int t = 0; t < threads; t++) {
            p[t] = (struct part){x + N / threads * t, y + N / threads * t, N / threads};
            pthread_create(&th[t], NULL, copy_part, &p[t]);
        }
        for (int t = 0; t < threads; t++)
            pthread_join(th[t], NULL);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return 2.0 * (double)N * sizeof(float) / best / 1e9;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1 || threads > 64)
        threads = 2;
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    if (!x || !y)
        return 1;
    for (size_t i = 0; i < N; i++) {
        x[i] = (float)i;
        y[i] = 0.0f;
    }
    printf("copy loop, 256 MiB: 1 thread %.1f GB/s, %d threads %.1f GB/s (read + write)\n",
           copy_gbs(x, y, 1), threads, copy_gbs(x, y, threads));
    free(x);
    free(y);
    return 0;
}
