/* SPDX-License-Identifier: MIT */
/* convert_gbs.c (issue 16): the operand conversions of the bf16 / TF32 precision modes
 * (nnt_cpu_f32_to_bf16, nnt_cpu_round_f32) on one thread, portable path against AVX2 and its
 * AVX-512 levels where the CPU has them (nnt_cpu_avx512: 1 AVX-512F, 2 AVX512-BF16), on a
 * GPT-2 124M q/k/v weight (768 x 2304 floats); best of 20 calls, 3 interleaved rounds.
 *
 *     cc -O2 -std=c99 -D_POSIX_C_SOURCE=200809L -Icpu -IBUILD bench/convert_gbs.c \
 *        BUILD/.libs/libnntkernels.a -lblis -ldnnl -lgomp -lm -o /tmp/convert_gbs
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

int main(void)
{
    const long n = 768L * 2304L;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    if (!x || !y || !h)
        return 1;
    for (long i = 0; i < n; i++)
        x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    nnt_cpu_isa_force(NNT_CPU_ISA_AVX2);
    const int top = nnt_cpu_avx512_force(-1);   /* 0 also without AVX2 */
    for (int round = 0; round < 3; round++)
        for (int path = 0; path < 2 + top; path++) {
            nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
            nnt_cpu_avx512_force(path ? path - 1 : -1);
            const char *avx512[3] = {"", "+512f", "+bf16"};
            double to16 = 1e9, rnd = 1e9;
            for (int k = 0; k < 20; k++) {
                double t = now();
                nnt_cpu_f32_to_bf16(n, x, h);
                t = now() - t;
                to16 = t < to16 ? t : to16;
                t = now();
                nnt_cpu_round_f32(n, 7, x, y);
                t = now() - t;
                rnd = t < rnd ? t : rnd;
            }
            printf("%s%-6s f32 -> bf16 %6.2f GB/s   round to 7 bits %6.2f GB/s\n",
                   nnt_cpu_isa_name(), avx512[nnt_cpu_avx512()], 6.0 * (double)n / to16 / 1e9,
                   8.0 * (double)n / rnd / 1e9);
        }
    free(x), free(y), free(h);
    return 0;
}
