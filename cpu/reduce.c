/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: broadcast add, column sums, sum of squares, DoRA's per-feature products. */
#include "nnt_cpu.h"

#include <math.h>

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

/* ---- DoRA's per-feature products (lib/layers/lora.c) ---------------------------------------- */

/* z (outer, inner) = x (h + c) [+ z]: h[i] per column, or h[o] per row when by_row; x may be
 * z (in place). */
void nnt_cpu_mul_bcast_f32(int64_t outer, int64_t inner, const float *x, const float *h,
                           float c, int by_row, int accumulate, float *z)
{
    for (int64_t o = 0; o < outer; o++) {
        const float *xr = x + o * inner;
        float *zr = z + o * inner;
        if (by_row) {
            float f = h[o] + c;
            for (int64_t i = 0; i < inner; i++)
                zr[i] = accumulate ? zr[i] + xr[i] * f : xr[i] * f;
        } else if (accumulate) {
            for (int64_t i = 0; i < inner; i++)
                zr[i] += xr[i] * (h[i] + c);
        } else {
            for (int64_t i = 0; i < inner; i++)
                zr[i] = xr[i] * (h[i] + c);
        }
    }
}

/* acc[i] += (h ? h[i] : 1) sum_o x[o, i] y[o, i], in double per column */
void nnt_cpu_dot_cols_f32(int64_t outer, int64_t inner, const float *restrict x,
                          const float *restrict y, const float *restrict h, float *restrict acc)
{
    double part[SUM_OUTER_CHUNK];
    for (int64_t i0 = 0; i0 < inner; i0 += SUM_OUTER_CHUNK) {
        int64_t w = inner - i0 < SUM_OUTER_CHUNK ? inner - i0 : SUM_OUTER_CHUNK;
        for (int64_t i = 0; i < w; i++)
            part[i] = 0.0;
        for (int64_t o = 0; o < outer; o++) {
            const float *restrict xr = x + o * inner + i0, *restrict yr = y + o * inner + i0;
            for (int64_t i = 0; i < w; i++)
                part[i] += (double)xr[i] * yr[i];
        }
        for (int64_t i = 0; i < w; i++)
            acc[i0 + i] = (float)((double)acc[i0 + i] + (h ? h[i0 + i] : 1.0) * part[i]);
    }
}

/* acc[o] += sum_i x[o, i] y[o, i], in double per row */
void nnt_cpu_dot_rows_f32(int64_t outer, int64_t inner, const float *restrict x,
                          const float *restrict y, float *restrict acc)
{
    for (int64_t o = 0; o < outer; o++) {
        const float *restrict xr = x + o * inner, *restrict yr = y + o * inner;
        double s0 = 0.0, s1 = 0.0;
        int64_t i = 0;
        for (; i + 2 <= inner; i += 2) {
            s0 += (double)xr[i] * yr[i];
            s1 += (double)xr[i + 1] * yr[i + 1];
        }
        if (i < inner)
            s0 += (double)xr[i] * yr[i];
        acc[o] = (float)((double)acc[o] + (s0 + s1));
    }
}

/* the same of bf16 x and y (exact products in double) */
void nnt_cpu_dot_rows_bf16(int64_t outer, int64_t inner, const uint16_t *restrict x,
                           const uint16_t *restrict y, float *restrict acc)
{
    for (int64_t o = 0; o < outer; o++) {
        const uint16_t *restrict xr = x + o * inner, *restrict yr = y + o * inner;
        double s = 0.0;
        for (int64_t i = 0; i < inner; i++)
            s += (double)nnt_cpu_bf16_value(xr[i]) * nnt_cpu_bf16_value(yr[i]);
        acc[o] = (float)((double)acc[o] + s);
    }
}

/* out[i] = (m ? m[i] : 1) / sqrt(n2[i]), in double */
void nnt_cpu_rsqrt_mul_f32(int64_t n, const float *m, const float *n2, float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = (float)((m ? (double)m[i] : 1.0) / sqrt((double)n2[i]));
}
