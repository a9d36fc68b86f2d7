/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: AVX2 + FMA helpers for the run-time chosen paths (nnt_cpu_isa).
 * Include only where NNT_CPU_X86; every function here carries NNT_AVX2, so the file
 * compiles without -mavx2 and runs only when the CPU has AVX2 and FMA. */
#ifndef NNT_SIMD_AVX2_H
#define NNT_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#define NNT_AVX2 __attribute__((target("avx2,fma")))

/* exp of 8 floats: x = k ln2 + r, |r| <= ln2 / 2 (k = round(x / ln2); ln2 in two parts, so
 * r is exact to a few ulp of r), exp(r) by its Taylor polynomial of degree 7 (truncation
 * error < 6e-9 relative on that range), times 2^k built in the exponent bits as two
 * halves so k = -126..128 stays normal. Maximum relative error measured against double exp
 * over [-87.3, 88.7] (tests/test_cpu_kernels.c, test_isa_exp): 7.2e-8 (under 1 ulp).
 * x > 88.7228 gives +inf, x < -87.3365 gives 0 (expf gives subnormals < FLT_MIN there),
 * NaN gives NaN. */
static inline NNT_AVX2 __m256 nnt_avx2_exp(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(88.72283f), lo = _mm256_set1_ps(-87.33654f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ki = _mm256_cvtps_epi32(k);
    __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN stays NaN */
}

/* 8 bfloat16 bit patterns (p[0..7]) as floats: exact (the bits become the upper halves) */
static inline NNT_AVX2 __m256 nnt_avx2_bf16x8(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* sum of the 8 lanes */
static inline NNT_AVX2 float nnt_avx2_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* sum of the 4 lanes of doubles */
static inline NNT_AVX2 double nnt_avx2_hsum_pd(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* the low and the high 4 floats of v as doubles */
static inline NNT_AVX2 __m256d nnt_avx2_lo_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_castps256_ps128(v));
}

static inline NNT_AVX2 __m256d nnt_avx2_hi_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}

/* the first n < 8 lanes set, for masked loads and stores of a tail */
static inline NNT_AVX2 __m256i nnt_avx2_tail_mask(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#endif /* NNT_SIMD_AVX2_H */
