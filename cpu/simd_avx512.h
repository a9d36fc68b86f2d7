/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: AVX-512F helpers for the run-time chosen paths (nnt_cpu_avx512, under the
 * AVX2 level of nnt_cpu_isa). Include only where NNT_CPU_X86, after simd_avx2.h; every
 * function here carries NNT_AVX512 (and those of its includers that need AVX512-BF16 carry
 * NNT_AVX512BF16), so the file compiles without -mavx512f and runs only when the CPU has
 * AVX-512F. Each gives, lane for lane, the bits of its AVX2 twin. */
#ifndef NNT_SIMD_AVX512_H
#define NNT_SIMD_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#define NNT_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define NNT_AVX512BF16 __attribute__((target("avx512f,avx512bf16,avx2,fma")))

/* nnt_avx2_exp on 16 floats: the same operations in the same order, so the same bits, except
 * the scaling by 2^k: one VSCALEFPS for the twin's two multiplies (the same bits too; all
 * 2^32 inputs were compared) */
static inline NNT_AVX512 __m512 nnt_avx512_exp(__m512 x)
{
    const __m512 hi = _mm512_set1_ps(88.72283f), lo = _mm512_set1_ps(-87.33654f);
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), xc);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    /* p 2^k in one rounding, as the twin's p 2^(k/2) 2^(k - k/2): both products exact where
     * normal, the one rounding where the result is subnormal the same */
    __m512 y = _mm512_scalef_ps(p, k);
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y,
                             _mm512_set1_ps(__builtin_inff()));
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x); /* NaN stays */
}

/* the lanes [0, n) of 16, for any n (none when n <= 0, all when n >= 16) */
static inline NNT_AVX512 __mmask16 nnt_avx512_maskn(int64_t n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* the lanes [0, n) of 16 (n <= 16), and those lanes moved up by `up` */
static inline NNT_AVX512 __mmask16 nnt_avx512_mask(int64_t n, int up)
{
    return (__mmask16)(((1u << n) - 1u) << up);
}

/* 16 floats' bits rounded to bf16 as nnt_cpu_f32_to_bf16 rounds them (the half added with
 * the kept part's lowest bit; a NaN keeps its bits, made quiet): each lane's bf16 in its
 * upper 16 bits, the lower 16 not cleared */
static inline NNT_AVX512 __m512i nnt_avx512_round_bf16(__m512i u)
{
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
}

/* the upper 8 lanes of v */
static inline NNT_AVX512 __m256 nnt_avx512_upper(__m512 v)
{
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

#endif /* NNT_SIMD_AVX512_H */
