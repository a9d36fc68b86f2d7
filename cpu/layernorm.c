/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: LayerNorm over the last dimension, whole rows of n. */
#include "nnt_cpu.h"

#include <math.h>

/* The scalar steps of a row from element j on (the portable path from 0, the AVX2 path for
 * the tail past its last group of 8): two-pass statistics in double, the float formulas. */
static inline double ln_sum(int64_t j, int64_t n, const float *restrict xr, double sum)
{
    for (; j < n; j++)
        sum += xr[j];
    return sum;
}

static inline double ln_sq(int64_t j, int64_t n, const float *restrict xr, double mu, double sq)
{
    for (; j < n; j++) {
        double t = xr[j] - mu;
        sq += t * t;
    }
    return sq;
}

static inline void ln_y(int64_t j, int64_t n, const float *restrict xr,
                        const float *restrict gamma, const float *restrict beta, float mu,
                        float rs, float *restrict yr)
{
    for (; j < n; j++)
        yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
}

/* sg += g, sgx += g xhat; dgamma += dy xhat; dbeta += dy */
static inline void ln_bwd_sums(int64_t j, int64_t n, const float *restrict xr,
                               const float *restrict dyr, const float *restrict gamma, float mu,
                               float rs, double *sg, double *sgx, float *restrict dgamma,
                               float *restrict dbeta)
{
    double a = *sg, b = *sgx;
    for (; j < n; j++) {
        float xh = (xr[j] - mu) * rs;
        float g = dyr[j] * gamma[j];
        a += g;
        b += (double)g * xh;
        dgamma[j] += dyr[j] * xh;
        dbeta[j] += dyr[j];
    }
    *sg = a;
    *sgx = b;
}

static inline void ln_bwd_dx(int64_t j, int64_t n, const float *restrict xr,
                             const float *restrict dyr, const float *restrict gamma, float mu,
                             float rs, float mg, float mgx, float *restrict dxr)
{
    for (; j < n; j++) {
        float xh = (xr[j] - mu) * rs;
        dxr[j] = rs * (dyr[j] * gamma[j] - mg - xh * mgx);
    }
}

static void ln_fwd_row(int64_t n, float eps, const float *restrict xr,
                       const float *restrict gamma, const float *restrict beta,
                       float *restrict yr, float *mean, float *rstd)
{
    double mu = ln_sum(0, n, xr, 0.0) / (double)n;
    double rs = 1.0 / sqrt(ln_sq(0, n, xr, mu, 0.0) / (double)n + (double)eps);
    float muf = (float)mu, rsf = (float)rs;
    ln_y(0, n, xr, gamma, beta, muf, rsf, yr);
    *mean = muf;
    *rstd = rsf;
}

static void ln_bwd_row(int64_t n, const float *restrict xr, const float *restrict dyr,
                       const float *restrict gamma, float mu, float rs, float *restrict dxr,
                       float *restrict dgamma, float *restrict dbeta)
{
    double sg = 0.0, sgx = 0.0;
    ln_bwd_sums(0, n, xr, dyr, gamma, mu, rs, &sg, &sgx, dgamma, dbeta);
    float mg = (float)(sg / (double)n), mgx = (float)(sgx / (double)n);
    ln_bwd_dx(0, n, xr, dyr, gamma, mu, rs, mg, mgx, dxr);
}

#if NNT_CPU_X86
#include "simd_avx2.h"

/* The portable row 8 floats at a time: double sums in 4-lane partial sums (a different
 * order of the same double additions), the float formulas with the same operations (no FMA
 * contraction), so y, dx, dgamma, dbeta match the portable path to float rounding. */
static NNT_AVX2 void ln_fwd_row_avx2(int64_t n, float eps, const float *restrict xr,
                                     const float *restrict gamma, const float *restrict beta,
                                     float *restrict yr, float *mean, float *rstd)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t j = 0, n8 = n & ~(int64_t)7;
    for (; j < n8; j += 8) {
        __m256 v = _mm256_loadu_ps(xr + j);
        s0 = _mm256_add_pd(s0, nnt_avx2_lo_pd(v));
        s1 = _mm256_add_pd(s1, nnt_avx2_hi_pd(v));
    }
    double mu = ln_sum(n8, n, xr, nnt_avx2_hsum_pd(_mm256_add_pd(s0, s1))) / (double)n;
    __m256d vmu = _mm256_set1_pd(mu);
    s0 = _mm256_setzero_pd();
    s1 = _mm256_setzero_pd();
    for (j = 0; j < n8; j += 8) {
        __m256 v = _mm256_loadu_ps(xr + j);
        __m256d t0 = _mm256_sub_pd(nnt_avx2_lo_pd(v), vmu);
        __m256d t1 = _mm256_sub_pd(nnt_avx2_hi_pd(v), vmu);
        s0 = _mm256_add_pd(s0, _mm256_mul_pd(t0, t0));
        s1 = _mm256_add_pd(s1, _mm256_mul_pd(t1, t1));
    }
    double sq = ln_sq(n8, n, xr, mu, nnt_avx2_hsum_pd(_mm256_add_pd(s0, s1)));
    double rs = 1.0 / sqrt(sq / (double)n + (double)eps);
    float muf = (float)mu, rsf = (float)rs;
    __m256 vmuf = _mm256_set1_ps(muf), vrs = _mm256_set1_ps(rsf);
    for (j = 0; j < n8; j += 8) {
        __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vmuf), vrs);
        t = _mm256_add_ps(_mm256_mul_ps(t, _mm256_loadu_ps(gamma + j)),
                          _mm256_loadu_ps(beta + j));
        _mm256_storeu_ps(yr + j, t);
    }
    ln_y(n8, n, xr, gamma, beta, muf, rsf, yr);
    *mean = muf;
    *rstd = rsf;
}

static NNT_AVX2 void ln_bwd_row_avx2(int64_t n, const float *restrict xr,
                                     const float *restrict dyr, const float *restrict gamma,
                                     float mu, float rs, float *restrict dxr,
                                     float *restrict dgamma, float *restrict dbeta)
{
    __m256 vmu = _mm256_set1_ps(mu), vrs = _mm256_set1_ps(rs);
    __m256d g0 = _mm256_setzero_pd(), g1 = _mm256_setzero_pd();
    __m256d h0 = _mm256_setzero_pd(), h1 = _mm256_setzero_pd();
    int64_t j = 0, n8 = n & ~(int64_t)7;
    for (; j < n8; j += 8) {
        __m256 dy = _mm256_loadu_ps(dyr + j);
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vmu), vrs);
        __m256 g = _mm256_mul_ps(dy, _mm256_loadu_ps(gamma + j));
        g0 = _mm256_add_pd(g0, nnt_avx2_lo_pd(g));
        g1 = _mm256_add_pd(g1, nnt_avx2_hi_pd(g));
        h0 = _mm256_add_pd(h0, _mm256_mul_pd(nnt_avx2_lo_pd(g), nnt_avx2_lo_pd(xh)));
        h1 = _mm256_add_pd(h1, _mm256_mul_pd(nnt_avx2_hi_pd(g), nnt_avx2_hi_pd(xh)));
        _mm256_storeu_ps(dgamma + j,
                         _mm256_add_ps(_mm256_loadu_ps(dgamma + j), _mm256_mul_ps(dy, xh)));
        _mm256_storeu_ps(dbeta + j, _mm256_add_ps(_mm256_loadu_ps(dbeta + j), dy));
    }
    double sg = nnt_avx2_hsum_pd(_mm256_add_pd(g0, g1));
    double sgx = nnt_avx2_hsum_pd(_mm256_add_pd(h0, h1));
    ln_bwd_sums(n8, n, xr, dyr, gamma, mu, rs, &sg, &sgx, dgamma, dbeta);
    float mg = (float)(sg / (double)n), mgx = (float)(sgx / (double)n);
    __m256 vmg = _mm256_set1_ps(mg), vmgx = _mm256_set1_ps(mgx);
    for (j = 0; j < n8; j += 8) {
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vmu), vrs);
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dyr + j), _mm256_loadu_ps(gamma + j));
        __m256 t = _mm256_sub_ps(_mm256_sub_ps(g, vmg), _mm256_mul_ps(xh, vmgx));
        _mm256_storeu_ps(dxr + j, _mm256_mul_ps(vrs, t));
    }
    ln_bwd_dx(n8, n, xr, dyr, gamma, mu, rs, mg, mgx, dxr);
}
#endif

/* x, y: (rows, n); gamma, beta: (n); mean, rstd: (rows) set. Two-pass stats in double. */
void nnt_cpu_layernorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *restrict x,
                               const float *restrict gamma, const float *restrict beta,
                               float *restrict y, float *restrict mean, float *restrict rstd)
{
    void (*row)(int64_t, float, const float *, const float *, const float *, float *, float *,
                float *) = ln_fwd_row;
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        row = ln_fwd_row_avx2;
#endif
    for (int64_t r = 0; r < rows; r++)
        row(n, eps, x + r * n, gamma, beta, y + r * n, mean + r, rstd + r);
}

/* xhat = (x - mean) rstd, g = dy gamma:
 *   dx = rstd (g - mean_j(g) - xhat mean_j(g xhat));  dgamma += dy xhat;  dbeta += dy. */
void nnt_cpu_layernorm_bwd_f32(int64_t rows, int64_t n, const float *restrict x,
                               const float *restrict dy, const float *restrict gamma,
                               const float *restrict mean, const float *restrict rstd,
                               float *restrict dx, float *restrict dgamma,
                               float *restrict dbeta)
{
    void (*row)(int64_t, const float *, const float *, const float *, float, float, float *,
                float *, float *) = ln_bwd_row;
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        row = ln_bwd_row_avx2;
#endif
    for (int64_t r = 0; r < rows; r++)
        row(n, x + r * n, dy + r * n, gamma, mean[r], rstd[r], dx + r * n, dgamma, dbeta);
}
