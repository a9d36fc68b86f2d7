/* nnt CPU kernels: LayerNorm over the last dimension, whole rows of n. */
#include "nnt_cpu.h"

#include <math.h>

#if NNT_CPU_X86
#include "simd_avx2.h"

/* The portable loops 8 floats at a time: double sums in 4-lane partial sums (a different
 * order of the same double additions), the float formulas with the same operations (no FMA
 * contraction), so y, dx, dgamma, dbeta match the portable path to float rounding. */
static inline NNT_AVX2 __m256d lo_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_castps256_ps128(v));
}

static inline NNT_AVX2 __m256d hi_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}

static NNT_AVX2 void ln_fwd_row_avx2(int64_t n, float eps, const float *restrict xr,
                                     const float *restrict gamma, const float *restrict beta,
                                     float *restrict yr, float *mean, float *rstd)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t j = 0, n8 = n & ~(int64_t)7;
    for (; j < n8; j += 8) {
        __m256 v = _mm256_loadu_ps(xr + j);
        s0 = _mm256_add_pd(s0, lo_pd(v));
        s1 = _mm256_add_pd(s1, hi_pd(v));
    }
    double sum = nnt_avx2_hsum_pd(_mm256_add_pd(s0, s1));
    for (; j < n; j++)
        sum += xr[j];
    double mu = sum / (double)n;
    __m256d vmu = _mm256_set1_pd(mu);
    s0 = _mm256_setzero_pd();
    s1 = _mm256_setzero_pd();
    for (j = 0; j < n8; j += 8) {
        __m256 v = _mm256_loadu_ps(xr + j);
        __m256d t0 = _mm256_sub_pd(lo_pd(v), vmu), t1 = _mm256_sub_pd(hi_pd(v), vmu);
        s0 = _mm256_add_pd(s0, _mm256_mul_pd(t0, t0));
        s1 = _mm256_add_pd(s1, _mm256_mul_pd(t1, t1));
    }
    double sq = nnt_avx2_hsum_pd(_mm256_add_pd(s0, s1));
    for (; j < n; j++) {
        double t = xr[j] - mu;
        sq += t * t;
    }
    double rs = 1.0 / sqrt(sq / (double)n + (double)eps);
    float muf = (float)mu, rsf = (float)rs;
    __m256 vmuf = _mm256_set1_ps(muf), vrs = _mm256_set1_ps(rsf);
    for (j = 0; j < n8; j += 8) {
        __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vmuf), vrs);
        t = _mm256_add_ps(_mm256_mul_ps(t, _mm256_loadu_ps(gamma + j)),
                          _mm256_loadu_ps(beta + j));
        _mm256_storeu_ps(yr + j, t);
    }
    for (; j < n; j++)
        yr[j] = (xr[j] - muf) * rsf * gamma[j] + beta[j];
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
        g0 = _mm256_add_pd(g0, lo_pd(g));
        g1 = _mm256_add_pd(g1, hi_pd(g));
        h0 = _mm256_add_pd(h0, _mm256_mul_pd(lo_pd(g), lo_pd(xh)));
        h1 = _mm256_add_pd(h1, _mm256_mul_pd(hi_pd(g), hi_pd(xh)));
        _mm256_storeu_ps(dgamma + j,
                         _mm256_add_ps(_mm256_loadu_ps(dgamma + j), _mm256_mul_ps(dy, xh)));
        _mm256_storeu_ps(dbeta + j, _mm256_add_ps(_mm256_loadu_ps(dbeta + j), dy));
    }
    double sg = nnt_avx2_hsum_pd(_mm256_add_pd(g0, g1));
    double sgx = nnt_avx2_hsum_pd(_mm256_add_pd(h0, h1));
    for (; j < n; j++) {
        float xh = (xr[j] - mu) * rs;
        float g = dyr[j] * gamma[j];
        sg += g;
        sgx += (double)g * xh;
        dgamma[j] += dyr[j] * xh;
        dbeta[j] += dyr[j];
    }
    float mg = (float)(sg / (double)n), mgx = (float)(sgx / (double)n);
    __m256 vmg = _mm256_set1_ps(mg), vmgx = _mm256_set1_ps(mgx);
    for (j = 0; j < n8; j += 8) {
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vmu), vrs);
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dyr + j), _mm256_loadu_ps(gamma + j));
        __m256 t = _mm256_sub_ps(_mm256_sub_ps(g, vmg), _mm256_mul_ps(xh, vmgx));
        _mm256_storeu_ps(dxr + j, _mm256_mul_ps(vrs, t));
    }
    for (; j < n; j++) {
        float xh = (xr[j] - mu) * rs;
        dxr[j] = rs * (dyr[j] * gamma[j] - mg - xh * mgx);
    }
}
#endif

/* x, y: (rows, n); gamma, beta: (n); mean, rstd: (rows) set. Two-pass stats in double. */
void nnt_cpu_layernorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *restrict x,
                               const float *restrict gamma, const float *restrict beta,
                               float *restrict y, float *restrict mean, float *restrict rstd)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        for (int64_t r = 0; r < rows; r++)
            ln_fwd_row_avx2(n, eps, x + r * n, gamma, beta, y + r * n, mean + r, rstd + r);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * n;
        float *restrict yr = y + r * n;
        double sum = 0.0, sq = 0.0;
        for (int64_t j = 0; j < n; j++)
            sum += xr[j];
        double mu = sum / (double)n;
        for (int64_t j = 0; j < n; j++) {
            double t = xr[j] - mu;
            sq += t * t;
        }
        double rs = 1.0 / sqrt(sq / (double)n + (double)eps);
        float muf = (float)mu, rsf = (float)rs;
        for (int64_t j = 0; j < n; j++)
            yr[j] = (xr[j] - muf) * rsf * gamma[j] + beta[j];
        mean[r] = muf;
        rstd[r] = rsf;
    }
}

/* xhat = (x - mean) rstd, g = dy gamma:
 *   dx = rstd (g - mean_j(g) - xhat mean_j(g xhat));  dgamma += dy xhat;  dbeta += dy. */
void nnt_cpu_layernorm_bwd_f32(int64_t rows, int64_t n, const float *restrict x,
                               const float *restrict dy, const float *restrict gamma,
                               const float *restrict mean, const float *restrict rstd,
                               float *restrict dx, float *restrict dgamma,
                               float *restrict dbeta)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        for (int64_t r = 0; r < rows; r++)
            ln_bwd_row_avx2(n, x + r * n, dy + r * n, gamma, mean[r], rstd[r], dx + r * n,
                            dgamma, dbeta);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * n;
        const float *restrict dyr = dy + r * n;
        float *restrict dxr = dx + r * n;
        float mu = mean[r], rs = rstd[r];
        double sg = 0.0, sgx = 0.0;
        for (int64_t j = 0; j < n; j++) {
            float xh = (xr[j] - mu) * rs;
            float g = dyr[j] * gamma[j];
            sg += g;
            sgx += (double)g * xh;
            dgamma[j] += dyr[j] * xh;
            dbeta[j] += dyr[j];
        }
        float mg = (float)(sg / (double)n), mgx = (float)(sgx / (double)n);
        for (int64_t j = 0; j < n; j++) {
            float xh = (xr[j] - mu) * rs;
            dxr[j] = rs * (dyr[j] * gamma[j] - mg - xh * mgx);
        }
    }
}
