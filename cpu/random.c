/* SPDX-License-Identifier: MIT */
/* Deterministic, tiling-invariant random fill: each element's value is a function of
 * (seed, global linear index) only (SplitMix64 finaliser, then uniform or Box-Muller).
 *
 * The normal values are computed in float with polynomials, not libm: log by its exponent
 * and a degree-9 polynomial of the mantissa (the Cephes logf coefficients), cos(2 pi u) by
 * quadrant and the Cephes sinf / cosf polynomials on [-pi/4, pi/4]. Every multiply-add is
 * an explicit fused one (fmaf, _mm256_fmadd_ps) and every other step a single correctly
 * rounded operation, so the portable loop and the AVX2 one (8 elements at a time) give the
 * same bits (tests/test_cpu_kernels.c, isa_random). */
#include "nnt_cpu.h"

#include <math.h>
#include <string.h>

static uint64_t mix64(uint64_t seed, uint64_t idx)
{
    uint64_t z = seed + (idx + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static float uniform_value(uint64_t z, double a, double b)
{
    double u = ((double)(z >> 40) + 0.5) * 0x1p-24;   /* (0, 1) */
    return (float)(a + (b - a) * u);
}

/* The Box-Muller inputs of z: u1 in (0, 1] (its top 24 bits, plus one) and u2 in [0, 1)
 * (24 bits below them), both as integers of at most 2^24, exact in float. */
static int32_t u1_bits(uint64_t z) { return (int32_t)(z >> 40) + 1; }
static int32_t u2_bits(uint64_t z) { return (int32_t)((z >> 8) & 0xFFFFFF); }

#define SQRT_HALF 0.70710678118654752f
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f
#define PI_2 1.57079632679489662f
static const float LOG_P[9] = {7.0376836292e-2f,  -1.1514610310e-1f, 1.1676998740e-1f,
                               -1.2420140846e-1f, 1.4249322787e-1f,  -1.6668057665e-1f,
                               2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};
static const float SIN_P[3] = {-1.9515295891e-4f, 8.3321608736e-3f, -1.6666654611e-1f};
static const float COS_P[3] = {2.443315711809948e-5f, -1.388731625493765e-3f,
                               4.166664568298827e-2f};

/* log(x), x in (0, 1]: x = 2^e m with m in [sqrt(1/2), sqrt(2)), log(1 + t) for t = m - 1. */
static float log_unit(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    int32_t e = (int32_t)(bits >> 23) - 126;          /* x = 2^e m, m in [1/2, 1) */
    bits = (bits & 0x007FFFFFu) | 0x3F000000u;
    float m;
    memcpy(&m, &bits, sizeof m);
    int small = m < SQRT_HALF;   /* selects, not branches: the inputs are random */
    e -= small;
    m = (small ? m + m : m) - 1.0f;
    float z = m * m, p = LOG_P[0];
    for (int i = 1; i < 9; i++)
        p = fmaf(p, m, LOG_P[i]);
    float y = (p * m) * z, ef = (float)e;
    y = fmaf(ef, LN2_LO, y);
    y = fmaf(-0.5f, z, y);
    return fmaf(ef, LN2_HI, m + y);
}

/* cos(2 pi u), u in [0, 1): 4u = k + f, |f| <= 1/2, theta = f pi/2, by quadrant k mod 4. */
static float cos_turn(float u)
{
    float w = 4.0f * u, k = nearbyintf(w), f = w - k;
    float t = f * PI_2, s = t * t;
    float ps = fmaf(fmaf(SIN_P[0], s, SIN_P[1]), s, SIN_P[2]);
    float sin_t = fmaf(ps * s, t, t);
    float pc = fmaf(fmaf(COS_P[0], s, COS_P[1]), s, COS_P[2]);
    float cos_t = fmaf(pc * s, s, fmaf(-0.5f, s, 1.0f));
    int q = (int)k & 3;
    float v = (q & 1) ? sin_t : cos_t;
    return (q == 1 || q == 2) ? -v : v;
}

static float normal_value(uint64_t z, float mean, float stddev)
{
    float u1 = (float)u1_bits(z) * 0x1p-24f, u2 = (float)u2_bits(z) * 0x1p-24f;
    float r = sqrtf(-2.0f * log_unit(u1));
    return fmaf(stddev * r, cos_turn(u2), mean);
}

#if NNT_CPU_X86
#include "simd_avx2.h"

static inline NNT_AVX2 __m256 log_unit_avx2(__m256 x)
{
    __m256i bits = _mm256_castps_si256(x);
    __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126));
    bits = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007FFFFF)),
                           _mm256_set1_epi32(0x3F000000));
    __m256 m = _mm256_castsi256_ps(bits), one = _mm256_set1_ps(1.0f);
    __m256 small = _mm256_cmp_ps(m, _mm256_set1_ps(SQRT_HALF), _CMP_LT_OQ);
    e = _mm256_add_epi32(e, _mm256_castps_si256(small));   /* -1 where small */
    m = _mm256_sub_ps(_mm256_blendv_ps(m, _mm256_add_ps(m, m), small), one);
    __m256 z = _mm256_mul_ps(m, m), p = _mm256_set1_ps(LOG_P[0]);
    for (int i = 1; i < 9; i++)
        p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(LOG_P[i]));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, m), z), ef = _mm256_cvtepi32_ps(e);
    y = _mm256_fmadd_ps(ef, _mm256_set1_ps(LN2_LO), y);
    y = _mm256_fmadd_ps(_mm256_set1_ps(-0.5f), z, y);
    return _mm256_fmadd_ps(ef, _mm256_set1_ps(LN2_HI), _mm256_add_ps(m, y));
}

static inline NNT_AVX2 __m256 cos_turn_avx2(__m256 u)
{
    __m256 w = _mm256_mul_ps(_mm256_set1_ps(4.0f), u);
    __m256 k = _mm256_round_ps(w, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 t = _mm256_mul_ps(_mm256_sub_ps(w, k), _mm256_set1_ps(PI_2));
    __m256 s = _mm256_mul_ps(t, t);
    __m256 ps = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(SIN_P[0]), s,
                                                _mm256_set1_ps(SIN_P[1])),
                                s, _mm256_set1_ps(SIN_P[2]));
    __m256 sin_t = _mm256_fmadd_ps(_mm256_mul_ps(ps, s), t, t);
    __m256 pc = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(COS_P[0]), s,
                                                _mm256_set1_ps(COS_P[1])),
                                s, _mm256_set1_ps(COS_P[2]));
    __m256 cos_t = _mm256_fmadd_ps(_mm256_mul_ps(pc, s), s,
                                   _mm256_fmadd_ps(_mm256_set1_ps(-0.5f), s, _mm256_set1_ps(1.0f)));
    __m256i q = _mm256_and_si256(_mm256_cvtps_epi32(k), _mm256_set1_epi32(3));
    __m256 odd = _mm256_castsi256_ps(_mm256_slli_epi32(q, 31));             /* q 1, 3 */
    __m256 neg = _mm256_castsi256_ps(                                         /* q 1, 2 */
        _mm256_slli_epi32(_mm256_xor_si256(q, _mm256_srli_epi32(q, 1)), 31));
    __m256 v = _mm256_blendv_ps(cos_t, sin_t, odd);
    return _mm256_xor_ps(v, _mm256_and_ps(neg, _mm256_set1_ps(-0.0f)));
}

/* n normal values for the consecutive indices idx0, idx0 + 1, ... */
static NNT_AVX2 void normal_row_avx2(uint64_t seed, uint64_t idx0, int64_t n, float mean,
                                     float stddev, float *out)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        int32_t b1[8], b2[8];
        for (int l = 0; l < 8; l++) {
            uint64_t z = mix64(seed, idx0 + (uint64_t)(j + l));
            b1[l] = u1_bits(z), b2[l] = u2_bits(z);
        }
        __m256 scale = _mm256_set1_ps(0x1p-24f);
        __m256 u1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const void *)b1)), scale);
        __m256 u2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const void *)b2)), scale);
        __m256 r = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), log_unit_avx2(u1)));
        __m256 v = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(stddev), r), cos_turn_avx2(u2),
                                   _mm256_set1_ps(mean));
        _mm256_storeu_ps(out + j, v);
    }
    for (; j < n; j++)
        out[j] = normal_value(mix64(seed, idx0 + (uint64_t)j), mean, stddev);
}
#endif

/* One row of n elements from global index idx0. */
static void fill_row(uint64_t seed, uint64_t idx0, int64_t n, int dist, float a, float b,
                     float *out)
{
    if (dist == 2) {   /* dropout in place: 0 where u < a, else scaled by b */
        for (int64_t j = 0; j < n; j++) {
            uint64_t z = mix64(seed, idx0 + (uint64_t)j);
            double u = ((double)(z >> 40) + 0.5) * 0x1p-24;   /* dist 0's, in (0, 1) */
            out[j] = u < (double)a ? 0.0f : out[j] * b;
        }
        return;
    }
    if (dist == 0) {
        for (int64_t j = 0; j < n; j++)
            out[j] = uniform_value(mix64(seed, idx0 + (uint64_t)j), a, b);
        return;
    }
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        normal_row_avx2(seed, idx0, n, a, b, out);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++)
        out[j] = normal_value(mix64(seed, idx0 + (uint64_t)j), a, b);
}

void nnt_cpu_fill_random_f32(int ndim, const int64_t *global_shape, const int64_t *tile_origin,
                             const int64_t *tile_shape, uint64_t seed, int dist, float a,
                             float b, float *out)
{
    int64_t idx[8] = {0};   /* tile-local multi-index of the current row */
    int64_t inner = tile_shape[ndim - 1];
    int64_t rows = 1;
    for (int d = 0; d < ndim - 1; d++)
        rows *= tile_shape[d];

    for (int64_t r = 0; r < rows; r++) {
        uint64_t base = 0;   /* global linear index of the row's first element */
        for (int d = 0; d < ndim; d++)
            base = base * (uint64_t)global_shape[d] + (uint64_t)(tile_origin[d] + idx[d]);
        fill_row(seed, base, inner, dist, a, b, out + r * inner);
        for (int d = ndim - 2; d >= 0; d--) {   /* advance the row multi-index */
            if (++idx[d] < tile_shape[d])
                break;
            idx[d] = 0;
        }
    }
}
