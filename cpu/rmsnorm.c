/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: RMSNorm over the last dimension, whole rows of n. */
#include "nnt_cpu.h"

#include <math.h>

/* The scalar steps of a row from element j on (the portable path from 0, the AVX2 path for
 * the tail past its last group of 8): the mean square in double, the float formulas. */
static inline double rms_sq(int64_t j, int64_t n, const float *restrict xr, double sq)
{
    for (; j < n; j++)
        sq += (double)xr[j] * xr[j];
    return sq;
}

static inline void rms_y(int64_t j, int64_t n, const float *restrict xr,
                         const float *restrict gamma, float rs, float *restrict yr)
{
    for (; j < n; j++)
        yr[j] = xr[j] * rs * gamma[j];
}

/* sgx += g xhat; dgamma += dy xhat */
static inline double rms_bwd_sum(int64_t j, int64_t n, const float *restrict xr,
                                 const float *restrict dyr, const float *restrict gamma,
                                 float rs, double sgx, float *restrict dgamma)
{
    for (; j < n; j++) {
        float xh = xr[j] * rs;
        float g = dyr[j] * gamma[j];
        sgx += (double)g * xh;
        dgamma[j] += dyr[j] * xh;
    }
    return sgx;
}

static inline void rms_bwd_dx(int64_t j, int64_t n, const float *restrict xr,
                              const float *restrict dyr, const float *restrict gamma, float rs,
                              float mgx, float *restrict dxr)
{
    for (; j < n; j++) {
        float xh = xr[j] * rs;
        dxr[j] = rs * (dyr[j] * gamma[j] - xh * mgx);
    }
}

static void rms_fwd_row(int64_t n, float eps, const float *restrict xr,
                        const float *restrict gamma, float *restrict yr, float *rstd)
{
    float rsf = (float)(1.0 / sqrt(rms_sq(0, n, xr, 0.0) / (double)n + (double)eps));
    rms_y(0, n, xr, gamma, rsf, yr);
    *rstd = rsf;
}

static void rms_bwd_row(int64_t n, const float *restrict xr, const float *restrict dyr,
                        const float *restrict gamma, float rs, float *restrict dxr,
                        float *restrict dgamma)
{
    double sgx = rms_bwd_sum(0, n, xr, dyr, gamma, rs, 0.0, dgamma);
    rms_bwd_dx(0, n, xr, dyr, gamma, rs, (float)(sgx / (double)n), dxr);
}

#if NNT_CPU_X86
#include "simd_avx2.h"

/* The portable row 8 floats at a time: the double sums in 4-lane partial sums, the float
 * formulas with the same operations (no FMA contraction). */
static NNT_AVX2 void rms_fwd_row_avx2(int64_t n, float eps, const float *restrict xr,
                                      const float *restrict gamma, float *restrict yr,
                                      float *rstd)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t j = 0, n8 = n & ~(int64_t)7;
    for (; j < n8; j += 8) {
        __m256d lo = nnt_avx2_lo_pd(_mm256_loadu_ps(xr + j));
        __m256d hi = nnt_avx2_hi_pd(_mm256_loadu_ps(xr + j));
        s0 = _mm256_add_pd(s0, _mm256_mul_pd(lo, lo));
        s1 = _mm256_add_pd(s1, _mm256_mul_pd(hi, hi));
    }
    double sq = rms_sq(n8, n, xr, nnt_avx2_hsum_pd(_mm256_add_pd(s0, s1)));
    float rsf = (float)(1.0 / sqrt(sq / (double)n + (double)eps));
    __m256 vrs = _mm256_set1_ps(rsf);
    for (j = 0; j < n8; j += 8)
        _mm256_storeu_ps(yr + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + j), vrs),
                                               _mm256_loadu_ps(gamma + j)));
    rms_y(n8, n, xr, gamma, rsf, yr);
    *rstd = rsf;
}

static NNT_AVX2 void rms_bwd_row_avx2(int64_t n, const float *restrict xr,
                                      const float *restrict dyr, const float *restrict gamma,
                                      float rs, float *restrict dxr, float *restrict dgamma)
{
    __m256 vrs = _mm256_set1_ps(rs);
    __m256d h0 = _mm256_setzero_pd(), h1 = _mm256_setzero_pd();
    int64_t j = 0, n8 = n & ~(int64_t)7;
    for (; j < n8; j += 8) {
        __m256 dy = _mm256_loadu_ps(dyr + j);
        __m256 xh = _mm256_mul_ps(_mm256_loadu_ps(xr + j), vrs);
        __m256 g = _mm256_mul_ps(dy, _mm256_loadu_ps(gamma + j));
        h0 = _mm256_add_pd(h0, _mm256_mul_pd(nnt_avx2_lo_pd(g), nnt_avx2_lo_pd(xh)));
        h1 = _mm256_add_pd(h1, _mm256_mul_pd(nnt_avx2_hi_pd(g), nnt_avx2_hi_pd(xh)));
        _mm256_storeu_ps(dgamma + j,
                         _mm256_add_ps(_mm256_loadu_ps(dgamma + j), _mm256_mul_ps(dy, xh)));
    }
    double sgx = rms_bwd_sum(n8, n, xr, dyr, gamma, rs,
                             nnt_avx2_hsum_pd(_mm256_add_pd(h0, h1)), dgamma);
    float mgx = (float)(sgx / (double)n);
    __m256 vmgx = _mm256_set1_ps(mgx);
    for (j = 0; j < n8; j += 8) {
        __m256 xh = _mm256_mul_ps(_mm256_loadu_ps(xr + j), vrs);
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dyr + j), _mm256_loadu_ps(gamma + j));
        _mm256_storeu_ps(dxr + j, _mm256_mul_ps(vrs, _mm256_sub_ps(g, _mm256_mul_ps(xh, vmgx))));
    }
    rms_bwd_dx(n8, n, xr, dyr, gamma, rs, mgx, dxr);
}
#endif

/* x, y: (rows, n); gamma: (n); rstd: (rows) set. Mean square in double. */
void nnt_cpu_rmsnorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *restrict x,
                             const float *restrict gamma, float *restrict y,
                             float *restrict rstd)
{
    void (*row)(int64_t, float, const float *, const float *, float *, float *) = rms_fwd_row;
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        row = rms_fwd_row_avx2;
#endif
    for (int64_t r = 0; r < rows; r++)
        row(n, eps, x + r * n, gamma, y + r * n, rstd + r);
}

/* xhat = x rstd, g = dy gamma:
 *   dx = rstd (g - xhat mean_j(g xhat));  dgamma += dy xhat. */
void nnt_cpu_rmsnorm_bwd_f32(int64_t rows, int64_t n, const float *restrict x,
                             const float *restrict dy, const float *restrict gamma,
                             const float *restrict rstd, float *restrict dx,
                             float *restrict dgamma)
{
    void (*row)(int64_t, const float *, const float *, const float *, float, float *,
                float *) = rms_bwd_row;
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        row = rms_bwd_row_avx2;
#endif
    for (int64_t r = 0; r < rows; r++)
        row(n, x + r * n, dy + r * n, gamma, rstd[r], dx + r * n, dgamma);
}
