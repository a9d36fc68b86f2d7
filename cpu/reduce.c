/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: broadcast add, column sums, sum of squares. */
#include "nnt_cpu.h"

/* columns handled per pass of sum_outer; the double partial sums live on the stack */
#define SUM_OUTER_CHUNK 256

/* y (outer, inner; leading dim ldy) += x (inner) broadcast over rows */
void nnt_cpu_add_bcast_f32(int64_t outer, int64_t inner, const float *restrict x,
                           float *restrict y, int64_t ldy)
{
    for (int64_t o = 0; o < outer; o++) {
        float *restrict row = y + o * ldy;
        for (int64_t i = 0; i < inner; i++)
            row[i] += x[i];
    }
}

/* acc (inner) += column sums of y (outer, inner; leading dim ldy), in double per column */
void nnt_cpu_sum_outer_f32(int64_t outer, int64_t inner, const float *restrict y, int64_t ldy,
                           float *restrict acc)
{
    double part[SUM_OUTER_CHUNK];
    for (int64_t i0 = 0; i0 < inner; i0 += SUM_OUTER_CHUNK) {
        int64_t w = inner - i0 < SUM_OUTER_CHUNK ? inner - i0 : SUM_OUTER_CHUNK;
        for (int64_t i = 0; i < w; i++)
            part[i] = acc[i0 + i];
        for (int64_t o = 0; o < outer; o++) {
            const float *restrict row = y + o * ldy + i0;
            for (int64_t i = 0; i < w; i++)
                part[i] += row[i];
        }
        for (int64_t i = 0; i < w; i++)
            acc[i0 + i] = (float)part[i];
    }
}

/* acc[0] += sum x[i]^2 in double; four partial sums keep the adds independent */
void nnt_cpu_sumsq_f32(int64_t n, const float *restrict x, float *acc)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)x[i] * x[i];
        s1 += (double)x[i + 1] * x[i + 1];
        s2 += (double)x[i + 2] * x[i + 2];
        s3 += (double)x[i + 3] * x[i + 3];
    }
    for (; i < n; i++)
        s0 += (double)x[i] * x[i];
    acc[0] = (float)((double)acc[0] + ((s0 + s1) + (s2 + s3)));
}
