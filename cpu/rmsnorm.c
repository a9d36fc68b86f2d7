/* nnt CPU kernels: RMSNorm over the last dimension, whole rows of n. */
#include "nnt_cpu.h"

#include <math.h>

#if NNT_CPU_X86
#include "simd_avx2.h"

/* The portable loops 8 floats at a time: the double sums in 4-lane partial sums, the float
 * formulas with the same operations (no FMA contraction). */
static inline NNT_AVX2 __m256d lo_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_castps256_ps128(v));
}

static inline NNT_AVX2 __m256d hi_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}

static NNT_AVX2 void rms_fwd_row_avx2(int64_t n, float eps, const float *restrict xr,
                                      const float *restrict gamma, float *restrict yr,
                                      float *rstd)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t j = 0, n8 = n & ~(int64_t)7;
    for (; j < n8; j += 8) {
        __m256 v = _mm256_loadu_ps(xr + j);
        s0 = _mm256_add_pd(s0, _mm256_mul_pd(lo_pd(v), lo_pd(v)));
        s1 = _mm256_add_pd(s1, _mm256_mul_pd(hi_pd(v), hi_pd(v)));
    }
    double sq = nnt_avx2_hsum_pd(_mm256_add_pd(s0, s1));
    for (; j < n; j++)
        sq += (double)xr[j] * xr[j];
    double rs = 1.0 / sqrt(sq / (double)n + (double)eps);
    float rsf = (float)rs;
    __m256 vrs = _mm256_set1_ps(rsf);
    for (j = 0; j < n8; j += 8)
        _mm256_storeu_ps(yr + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + j), vrs),
                                               _mm256_loadu_ps(gamma + j)));
    for (; j < n; j++)
        yr[j] = xr[j] * rsf * gamma[j];
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
        h0 = _mm256_add_pd(h0, _mm256_mul_pd(lo_pd(g), lo_pd(xh)));
        h1 = _mm256_add_pd(h1, _mm256_mul_pd(hi_pd(g), hi_pd(xh)));
        _mm256_storeu_ps(dgamma + j,
                         _mm256_add_ps(_mm256_loadu_ps(dgamma + j), _mm256_mul_ps(dy, xh)));
    }
    double sgx = nnt_avx2_hsum_pd(_mm256_add_pd(h0, h1));
    for (; j < n; j++) {
        float xh = xr[j] * rs;
        float g = dyr[j] * gamma[j];
        sgx += (double)g * xh;
        dgamma[j] += dyr[j] * xh;
    }
    float mgx = (float)(sgx / (double)n);
    __m256 vmgx = _mm256_set1_ps(mgx);
    for (j = 0; j < n8; j += 8) {
        __m256 xh = _mm256_mul_ps(_mm256_loadu_ps(xr + j), vrs);
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dyr + j), _mm256_loadu_ps(gamma + j));
        _mm256_storeu_ps(dxr + j, _mm256_mul_ps(vrs, _mm256_sub_ps(g, _mm256_mul_ps(xh, vmgx))));
    }
    for (; j < n; j++) {
        float xh = xr[j] * rs;
        dxr[j] = rs * (dyr[j] * gamma[j] - xh * mgx);
    }
}
#endif

/* x, y: (rows, n); gamma: (n); rstd: (rows) set. Mean square in double. */
void nnt_cpu_rmsnorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *restrict x,
                             const float *restrict gamma, float *restrict y,
                             float *restrict rstd)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        for (int64_t r = 0; r < rows; r++)
            rms_fwd_row_avx2(n, eps, x + r * n, gamma, y + r * n, rstd + r);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * n;
        float *restrict yr = y + r * n;
        double sq = 0.0;
        for (int64_t j = 0; j < n; j++)
            sq += (double)xr[j] * xr[j];
        double rs = 1.0 / sqrt(sq / (double)n + (double)eps);
        float rsf = (float)rs;
        for (int64_t j = 0; j < n; j++)
            yr[j] = xr[j] * rsf * gamma[j];
        rstd[r] = rsf;
    }
}

/* xhat = x rstd, g = dy gamma:
 *   dx = rstd (g - xhat mean_j(g xhat));  dgamma += dy xhat. */
void nnt_cpu_rmsnorm_bwd_f32(int64_t rows, int64_t n, const float *restrict x,
                             const float *restrict dy, const float *restrict gamma,
                             const float *restrict rstd, float *restrict dx,
                             float *restrict dgamma)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        for (int64_t r = 0; r < rows; r++)
            rms_bwd_row_avx2(n, x + r * n, dy + r * n, gamma, rstd[r], dx + r * n, dgamma);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * n;
        const float *restrict dyr = dy + r * n;
        float *restrict dxr = dx + r * n;
        float rs = rstd[r];
        double sgx = 0.0;
        for (int64_t j = 0; j < n; j++) {
            float xh = xr[j] * rs;
            float g = dyr[j] * gamma[j];
            sgx += (double)g * xh;
            dgamma[j] += dyr[j] * xh;
        }
        float mgx = (float)(sgx / (double)n);
        for (int64_t j = 0; j < n; j++) {
            float xh = xr[j] * rs;
            dxr[j] = rs * (dyr[j] * gamma[j] - xh * mgx);
        }
    }
}
