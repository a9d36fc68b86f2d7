/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: the attention kernels' bf16 products over a band of keys (see nnt_cpu.h,
 * "bf16 band products"). The float band products of cpu/attn_band.c with bf16 operands and
 * float sums, on AVX512-BF16's pairwise dot products (VDPBF16PS: each float lane adds the
 * products of a pair of bf16 values a step), so each operand comes as pairs along the sum's
 * dimension: 32-bit words, the first of a pair in the low half. Tiles of 8 rows (keys for
 * atb) by 32 columns in registers, rows in groups that get only the keys their rows see, as
 * the float products. One thread, AMD Zen 5, 64 x 256 keys x 64 dims: 490-550 GFLOP/s where
 * the float tiles run at 250-265 and oneDNN's bf16 matmul at about 290 (bench/RESULTS-
 * window.md). */
#include "nnt_cpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_band_groups.h"

#if NNT_CPU_X86
#include <cpuid.h>

#include "simd_avx2.h"
#include "simd_avx512.h"

/* AMX-BF16 (CPUID leaf 7, EDX bit 22): oneDNN's bf16 products use its tiles there, which these
 * products were not measured against; such CPUs keep the GEMMs. */
static int cpu_has_amx_bf16(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    return (d >> 22) & 1u;
}
#endif

static int band16_forced = -1;

int nnt_cpu_band16_level(void)
{
    int level = 0;
#if NNT_CPU_X86
    static int amx = -1;   /* the same answer from any thread */
    if (amx < 0)
        amx = cpu_has_amx_bf16();
    level = nnt_cpu_band_level() == 2 && nnt_cpu_avx512() >= 2 && !amx;
#endif
    return band16_forced >= 0 && band16_forced < level ? band16_forced : level;
}

int nnt_cpu_band16_force(int level)
{
    band16_forced = level < 0 ? -1 : level;
    return nnt_cpu_band16_level();
}

static inline uint32_t pair_of(uint16_t first, uint16_t second)
{
    return (uint32_t)first | (uint32_t)second << 16;
}

#if NNT_CPU_X86
/* the pair at p in every lane */
static inline NNT_AVX512BF16 __m512bh b16_bcast(const uint32_t *p)
{
    uint32_t x;
    memcpy(&x, p, sizeof x);
    return (__m512bh)_mm512_set1_epi32((int)x);
}

static NNT_AVX512BF16 void pair_rows_avx512(int64_t n, int64_t m, const uint16_t *x,
                                            int64_t ldx, uint32_t *y, int64_t ldy)
{
    for (int64_t t = 0; t < (n + 1) / 2; t++) {
        const uint16_t *r0 = x + 2 * t * ldx, *r1 = 2 * t + 1 < n ? r0 + ldx : NULL;
        uint32_t *yt = y + t * ldy;
        int64_t c = 0;
        for (; c + 16 <= m; c += 16) {
            __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r0 + c)));
            __m512i b = r1 ? _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r1 + c)))
                           : _mm512_setzero_si512();
            _mm512_storeu_si512(yt + c, _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
        }
        for (; c < m; c++)
            yt[c] = pair_of(r0[c], r1 ? r1[c] : 0);
    }
}

/* ---- the backward's score rows ended (nnt_cpu_band16_grad_rows) ---- */

/* x's 16 values rounded to bf16 as nnt_cpu_f32_to_bf16 rounds them: VCVTNEPS2BF16 (which
 * flushes subnormals) where none is subnormal, else that function itself */
static inline NNT_AVX512BF16 __m256i bf16_of(__m512 x)
{
    const __m512i u = _mm512_castps_si512(x);
    if (_mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000)) &
        _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7fffff))) {
        float f[16];
        uint16_t h[16];
        _mm512_storeu_ps(f, x);
        nnt_cpu_f32_to_bf16(16, f, h);
        return _mm256_loadu_si256((const __m256i *)h);
    }
    return (__m256i)_mm512_cvtneps_pbh(x);
}

/* 16 words of a row pair: a's bf16 values in the low halves, b's in the high */
static inline NNT_AVX512BF16 __m512i pair_words(__m256i a, __m256i b)
{
    return _mm512_or_si512(_mm512_cvtepu16_epi32(a),
                           _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
}

/* The first n (> 0) of x's 16 values at y (a masked 16-bit store needs AVX512-BW) */
static inline NNT_AVX512BF16 void store16(uint16_t *y, int64_t n, __m256i x)
{
    if (n >= 16) {
        _mm256_storeu_si256((__m256i *)y, x);
        return;
    }
    uint16_t h[16];
    _mm256_storeu_si256((__m256i *)h, x);
    memcpy(y, h, (size_t)n * sizeof *y);
}

/* Columns [c, c + 16) of one score row of n (its keys [lo, hi)): p = exp(s - lse) and
 * ds = p (dp - d) there, as row_softmax_grad_avx512 computes them, 0 outside the keys */
static inline NNT_AVX512BF16 __attribute__((always_inline)) void
grad_lanes(int64_t c, int64_t n, const float *s, const float *dp, int64_t lo, int64_t hi,
           float lse, float d, __m512 *p, __m512 *ds)
{
    int64_t a = lo > c ? lo - c : 0, b = (hi < n ? hi : n) - c;
    const __mmask16 keys = (__mmask16)(nnt_avx512_maskn(b) & ~nnt_avx512_maskn(a));
    const __mmask16 row = nnt_avx512_maskn(n - c);
    __m512 e = nnt_avx512_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(row, s + c),
                                            _mm512_set1_ps(lse)));
    __m512 g = _mm512_mul_ps(e, _mm512_sub_ps(_mm512_maskz_loadu_ps(row, dp + c),
                                              _mm512_set1_ps(d)));
    *p = _mm512_maskz_mov_ps(keys, e);
    *ds = _mm512_maskz_mov_ps(keys, g);
}

/* Elements [0, a) and [b, n) of a row of `size`-byte elements at x set to 0 (bf16 rows:
 * 0.0's bits; words: pairs of them) */
static void clear_outside(void *x, size_t size, int64_t a, int64_t b, int64_t n)
{
    memset(x, 0, (size_t)a * size);
    memset((char *)x + (size_t)b * size, 0, (size_t)(n - b) * size);
}

/* The keys [*k0, *k1) that rows r and (second) r + 1 see, k0 down to a multiple of 16 (the
 * vectors' columns); an empty pair gives k0 = k1 = ldp */
static void pair_keys(const int64_t *lo, const int64_t *hi, int64_t r, int second, int64_t ldp,
                      int64_t *k0, int64_t *k1)
{
    int64_t a = ldp, b = 0;
    for (int64_t i = r; i < r + 1 + second; i++)
        if (lo[i] < hi[i]) {
            a = lo[i] < a ? lo[i] : a;
            b = hi[i] > b ? hi[i] : b;
        }
    *k0 = a < b ? a - a % 16 : ldp;
    *k1 = a < b ? b : ldp;
}

static NNT_AVX512BF16 void grad_rows_avx512(int64_t rows, int64_t nk, int64_t ldp,
                                            const float *s, const float *dp, const int64_t *lo,
                                            const int64_t *hi, const float *lse, const float *d,
                                            uint16_t *ds16, uint32_t *pp, uint32_t *dsp,
                                            int64_t ldr)
{
    for (int64_t r = 0; r < rows; r += 2) {   /* row pair r / 2 */
        const int second = r + 1 < rows;
        uint32_t *ppt = pp + r / 2 * ldr, *dspt = dsp + r / 2 * ldr;
        uint16_t *ds0 = ds16 + r * ldp, *ds1 = ds0 + ldp;
        int64_t k0, k1;
        pair_keys(lo, hi, r, second, ldp, &k0, &k1);
        const int64_t w0 = k0 < nk ? k0 : nk, w1 = k1 < nk ? k1 : nk;   /* words: < nk */
        clear_outside(ds0, sizeof *ds0, k0, k1, ldp);
        if (second)
            clear_outside(ds1, sizeof *ds1, k0, k1, ldp);
        clear_outside(ppt, sizeof *ppt, w0, w1, nk);
        clear_outside(dspt, sizeof *dspt, w0, w1, nk);
        for (int64_t c = k0; c < k1; c += 16) {
            __m512 p0, g0, p1 = _mm512_setzero_ps(), g1 = p1;
            grad_lanes(c, ldp, s + r * ldp, dp + r * ldp, lo[r], hi[r], lse[r], d[r], &p0,
                       &g0);
            if (second)
                grad_lanes(c, ldp, s + (r + 1) * ldp, dp + (r + 1) * ldp, lo[r + 1],
                           hi[r + 1], lse[r + 1], d[r + 1], &p1, &g1);
            __m256i hp0 = bf16_of(p0), hg0 = bf16_of(g0), hp1 = bf16_of(p1), hg1 = bf16_of(g1);
            store16(ds0 + c, ldp - c, hg0);
            if (second)
                store16(ds1 + c, ldp - c, hg1);
            const __mmask16 words = nnt_avx512_maskn(nk - c);
            _mm512_mask_storeu_epi32(ppt + c, words, pair_words(hp0, hp1));
            _mm512_mask_storeu_epi32(dspt + c, words, pair_words(hg0, hg1));
        }
    }
}

/* The band products' template (attn_band_impl.h) on pairs: tiles of 8 rows by 32 columns,
 * each step one VDPBF16PS a row and vector */
#define BAND(name) band16_##name##_avx512
#define BAND_T NNT_AVX512BF16
#include "attn_band_avx512.h"
#define BAND_E uint32_t
#define VB __m512bh
#define v_bload(p) ((__m512bh)_mm512_loadu_si512(p))
#define v_bloadn(p, n) ((__m512bh)_mm512_maskz_loadu_epi32(nnt_avx512_maskn(n), (p)))
#define v_bzero() ((__m512bh)_mm512_setzero_si512())
#define v_abcast(p) b16_bcast(p)
#define v_dot(acc, x, b) _mm512_dpbf16_ps((acc), (x), (b))
#define BAND_IN0(k) ((k) / 2)
#define BAND_IN1(k) (((k) + 1) / 2)
#include "attn_band_impl.h"
#endif /* NNT_CPU_X86 */

/* ---- entry points (callers use them only where nnt_cpu_band16_level() is 1) ---- */

void nnt_cpu_bf16_pair_rows(int64_t n, int64_t m, const uint16_t *x, int64_t ldx, uint32_t *y,
                            int64_t ldy)
{
#if NNT_CPU_X86
    if (nnt_cpu_band16_level() > 0) {
        pair_rows_avx512(n, m, x, ldx, y, ldy);
        return;
    }
#endif
    for (int64_t t = 0; t < (n + 1) / 2; t++)
        for (int64_t c = 0; c < m; c++)
            y[t * ldy + c] = pair_of(x[2 * t * ldx + c], 2 * t + 1 < n ? x[(2 * t + 1) * ldx + c]
                                                                      : 0);
}

int nnt_cpu_band16_grad_rows(int64_t rows, int64_t nk, int64_t ldp, const float *s,
                             const float *dp, const int64_t *lo, const int64_t *hi,
                             const float *lse, const float *d, uint16_t *ds16, uint32_t *pp,
                             uint32_t *dsp, int64_t ldr)
{
#if NNT_CPU_X86
    if (nnt_cpu_band16_level() > 0) {
        grad_rows_avx512(rows, nk, ldp, s, dp, lo, hi, lse, d, ds16, pp, dsp, ldr);
        return 0;
    }
#endif
    (void)rows, (void)nk, (void)ldp, (void)s, (void)dp, (void)lo, (void)hi, (void)lse, (void)d;
    (void)ds16, (void)pp, (void)dsp, (void)ldr;
    return -1;
}

int nnt_cpu_band16_abt(int64_t m, int64_t hd2, float alpha, const uint32_t *a, int64_t lda,
                       const uint32_t *bt, int64_t ldbt, const int64_t *lo, const int64_t *hi,
                       float *c, int64_t ldc)
{
#if NNT_CPU_X86
    if (nnt_cpu_band16_level() > 0) {
        band16_abt_avx512(m, hd2, alpha, a, lda, bt, ldbt, lo, hi, c, ldc);
        return 0;
    }
#endif
    (void)m, (void)hd2, (void)alpha, (void)a, (void)lda, (void)bt, (void)ldbt, (void)lo;
    (void)hi, (void)c, (void)ldc;
    return -1;
}

int nnt_cpu_band16_ab(int64_t m, int64_t hd, float alpha, const uint32_t *p, int64_t ldp,
                      const uint32_t *b, int64_t ldb, const int64_t *lo, const int64_t *hi,
                      float *c, int64_t ldc)
{
#if NNT_CPU_X86
    if (nnt_cpu_band16_level() > 0) {
        band16_ab_avx512(m, hd, alpha, p, ldp, b, ldb, lo, hi, c, ldc);
        return 0;
    }
#endif
    (void)m, (void)hd, (void)alpha, (void)p, (void)ldp, (void)b, (void)ldb, (void)lo, (void)hi;
    (void)c, (void)ldc;
    return -1;
}

int nnt_cpu_band16_atb(int64_t m, int64_t nk, int64_t hd, float alpha, const uint32_t *p,
                       int64_t ldp, const uint32_t *a, int64_t lda, const int64_t *lo,
                       const int64_t *hi, float *c, int64_t ldc)
{
#if NNT_CPU_X86
    if (nnt_cpu_band16_level() > 0) {
        band16_atb_avx512(m, nk, hd, alpha, p, ldp, a, lda, lo, hi, c, ldc);
        return 0;
    }
#endif
    (void)m, (void)nk, (void)hd, (void)alpha, (void)p, (void)ldp, (void)a, (void)lda, (void)lo;
    (void)hi, (void)c, (void)ldc;
    return -1;
}
