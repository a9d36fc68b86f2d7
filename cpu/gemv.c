/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: one-row products, the decode steps of generation. nnt_cpu_gemv_bf16
 * (under NNT_PRECISION_BF16) reads B as it is stored: a bf16 weight copy at 2 bytes an
 * element (half of an fp32 gemv's bytes, where a blocked GEMM would first reorder the whole
 * of B for one row). nnt_cpu_gemv_f32 is the same walk on float rows (AVX2 path only).
 *
 * In nnt_cpu_gemv_bf16 both operands hold bf16 values, so every product x[i] * B[.] is
 * exact in float and an FMA gives the bits of a multiply then add. The sums follow one
 * fixed order, which the portable path reproduces lane for lane: the AVX2 and portable
 * paths, and a bf16 B and a float B holding the same values, give the same bits. */
#include "nnt_cpu.h"

#if NNT_CPU_X86
#include "simd_avx2.h"
#endif

#define LANES 8   /* the partial sums of one AVX2 register                                */
#define ACCS 4    /* registers of partial sums along a row (independent FMA chains)       */

/* Element i of B: bf16 bits or a float. */
static inline float b_at(const void *b, int b_bf16, int64_t i)
{
    return b_bf16 ? nnt_cpu_bf16_value(((const uint16_t *)b)[i]) : ((const float *)b)[i];
}

static inline float finish(float s, float alpha, float beta, const float *y)
{
    return beta == 0.0f ? alpha * s : alpha * s + beta * *y;
}

/* The 8 partial sums reduced as nnt_avx2_hsum does: lanes l and l + 4 first, then
 * (0 + 2) + (1 + 3). */
static float hsum8(const float *p)
{
    float s0 = p[0] + p[4], s1 = p[1] + p[5], s2 = p[2] + p[6], s3 = p[3] + p[7];
    return (s0 + s2) + (s1 + s3);
}

/* Dot product of x (k) with one row of B, in the order the AVX2 path sums it, which reads
 * the row as one sequential stream (four rows interleaved ran at half the bandwidth):
 * partial sum (q, l) takes i = 32 t + 8 q + l below k32 in order; then whole blocks of 8
 * below k8 go to q = 0; the registers are added lane by lane as (0 + 1) + (2 + 3), the
 * lanes reduced (hsum8), and the tail i >= k8 added in order. */
static float dot_row(int64_t k, const float *x, const void *b, int b_bf16, int64_t row)
{
    int64_t k32 = k / (ACCS * LANES) * (ACCS * LANES), k8 = k / LANES * LANES;
    float acc[ACCS][LANES] = {{0}}, v[LANES];
    for (int64_t i = 0; i < k32; i += ACCS * LANES)
        for (int q = 0; q < ACCS; q++)
            for (int l = 0; l < LANES; l++)
                acc[q][l] += x[i + 8 * q + l] * b_at(b, b_bf16, row + i + 8 * q + l);
    for (int64_t i = k32; i < k8; i += LANES)
        for (int l = 0; l < LANES; l++)
            acc[0][l] += x[i + l] * b_at(b, b_bf16, row + i + l);
    for (int l = 0; l < LANES; l++)
        v[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
    float s = hsum8(v);
    for (int64_t i = k8; i < k; i++)
        s += x[i] * b_at(b, b_bf16, row + i);
    return s;
}

/* Dot product of x (k) with column j of B (k, n), over i in order. */
static float dot_col(int64_t k, const float *x, const void *b, int b_bf16, int64_t ldb,
                     int64_t j)
{
    float s = 0.0f;
    for (int64_t i = 0; i < k; i++)
        s += x[i] * b_at(b, b_bf16, i * ldb + j);
    return s;
}

static void gemv_portable(int trans_b, int b_bf16, int64_t n, int64_t k, float alpha,
                          const float *x, const void *b, int64_t ldb, float beta, float *y)
{
    if (trans_b) {
        for (int64_t j = 0; j < n; j++)
            y[j] = finish(dot_row(k, x, b, b_bf16, j * ldb), alpha, beta, y + j);
        return;
    }
    for (int64_t j = 0; j < n; j++)   /* B (k, n) */
        y[j] = finish(dot_col(k, x, b, b_bf16, ldb, j), alpha, beta, y + j);
}

#if NNT_CPU_X86
/* 8 elements of B from index i: bf16 expanded (its bits in the upper halves) or floats. */
static inline NNT_AVX2 __m256 load8(const void *b, int b_bf16, int64_t i)
{
    return b_bf16 ? nnt_avx2_bf16x8((const uint16_t *)b + i)
                  : _mm256_loadu_ps((const float *)b + i);
}

/* y (n) over the rows of B (n, k), row after row: dot_row's order */
static inline NNT_AVX2 void gemv_t_avx2(int b_bf16, int64_t n, int64_t k, float alpha,
                                        const float *x, const void *b, int64_t ldb, float beta,
                                        float *y)
{
    int64_t k32 = k / (ACCS * LANES) * (ACCS * LANES), k8 = k / LANES * LANES;
    for (int64_t j = 0; j < n; j++) {
        int64_t row = j * ldb;
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int64_t i = 0; i < k32; i += ACCS * LANES) {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load8(b, b_bf16, row + i), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), load8(b, b_bf16, row + i + 8), s1);
            s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), load8(b, b_bf16, row + i + 16),
                                 s2);
            s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), load8(b, b_bf16, row + i + 24),
                                 s3);
        }
        for (int64_t i = k32; i < k8; i += LANES)
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load8(b, b_bf16, row + i), s0);
        float s = nnt_avx2_hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
        for (int64_t i = k8; i < k; i++)
            s += x[i] * b_at(b, b_bf16, row + i);
        y[j] = finish(s, alpha, beta, y + j);
    }
}

/* y (n) = x B, B (k, n): 32 columns at a time, each summed over i in order */
static inline NNT_AVX2 void gemv_n_avx2(int b_bf16, int64_t n, int64_t k, float alpha,
                                        const float *x, const void *b, int64_t ldb, float beta,
                                        float *y)
{
    const __m256 av = _mm256_set1_ps(alpha), bv = _mm256_set1_ps(beta);
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                       _mm256_setzero_ps()};
        for (int64_t i = 0; i < k; i++) {
            __m256 xv = _mm256_set1_ps(x[i]);
            for (int q = 0; q < 4; q++)
                s[q] = _mm256_fmadd_ps(xv, load8(b, b_bf16, i * ldb + j + 8 * q), s[q]);
        }
        for (int q = 0; q < 4; q++) {
            __m256 r = _mm256_mul_ps(av, s[q]);
            if (beta != 0.0f)   /* alpha s + beta y, rounded as finish() rounds it */
                r = _mm256_add_ps(r, _mm256_mul_ps(bv, _mm256_loadu_ps(y + j + 8 * q)));
            _mm256_storeu_ps(y + j + 8 * q, r);
        }
    }
    for (; j + 8 <= n; j += 8) {
        __m256 s = _mm256_setzero_ps();
        for (int64_t i = 0; i < k; i++)
            s = _mm256_fmadd_ps(_mm256_set1_ps(x[i]), load8(b, b_bf16, i * ldb + j), s);
        __m256 r = _mm256_mul_ps(av, s);
        if (beta != 0.0f)
            r = _mm256_add_ps(r, _mm256_mul_ps(bv, _mm256_loadu_ps(y + j)));
        _mm256_storeu_ps(y + j, r);
    }
    for (; j < n; j++)
        y[j] = finish(dot_col(k, x, b, b_bf16, ldb, j), alpha, beta, y + j);
}

static NNT_AVX2 void gemv_avx2(int trans_b, int b_bf16, int64_t n, int64_t k, float alpha,
                               const float *x, const void *b, int64_t ldb, float beta, float *y)
{
    /* each call specialised on b_bf16 (a constant once inlined) */
    if (trans_b)
        b_bf16 ? gemv_t_avx2(1, n, k, alpha, x, b, ldb, beta, y)
               : gemv_t_avx2(0, n, k, alpha, x, b, ldb, beta, y);
    else
        b_bf16 ? gemv_n_avx2(1, n, k, alpha, x, b, ldb, beta, y)
               : gemv_n_avx2(0, n, k, alpha, x, b, ldb, beta, y);
}
#endif

int nnt_cpu_gemv_f32(int64_t n, int64_t k, float alpha, const float *x, const float *b,
                     int64_t ldb, float beta, float *y)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        if (n > 0)
            gemv_avx2(1, 0, n, k, alpha, x, b, ldb, beta, y);
        return 0;
    }
#endif
    (void)n, (void)k, (void)alpha, (void)x, (void)b, (void)ldb, (void)beta, (void)y;
    return -1;
}

void nnt_cpu_gemv_bf16(int trans_b, int b_bf16, int64_t n, int64_t k, float alpha,
                       const float *x, const void *b, int64_t ldb, float beta, float *y)
{
    if (n <= 0)
        return;
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        gemv_avx2(trans_b, b_bf16, n, k, alpha, x, b, ldb, beta, y);
        return;
    }
#endif
    gemv_portable(trans_b, b_bf16, n, k, alpha, x, b, ldb, beta, y);
}
