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
#define T16 NNT_AVX512BF16
#define VW 16
#define MR 8
#define B16_INLINE static inline T16 __attribute__((always_inline))
#define B16_GROUP static T16 __attribute__((noinline))

static inline T16 __mmask16 b16_mask(int64_t n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* the word at p in every lane */
static inline T16 __m512bh b16_bcast(const uint32_t *p)
{
    uint32_t x;
    memcpy(&x, p, sizeof x);
    return (__m512bh)_mm512_set1_epi32((int)x);
}

/* 16 words at p (full), or the first n of them and zeros */
static inline T16 __m512bh b16_load(const uint32_t *p, int full, int64_t n)
{
    return (__m512bh)(full ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(b16_mask(n), p));
}

static T16 void pair_rows_avx512(int64_t n, int64_t m, const uint16_t *x, int64_t ldx,
                                 uint32_t *y, int64_t ldy)
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

static T16 void pair_transpose_avx512(int64_t n, int64_t m, const uint32_t *x, int64_t ldx,
                                      uint32_t *xt, int64_t ldt)
{
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                             11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)ldx));
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = b16_mask(n - j);
        const uint32_t *xj = x + j * ldx;
        for (int64_t t = 0; t < m; t++) {
            __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, xj + t, 4);
            _mm512_mask_storeu_epi32(xt + t * ldt + j, k, g);
        }
    }
}

/* ---- abt16: c = alpha a b^T over pairs of the inner dimension, b given transposed ---- */

/* c (R x ncol, ldc) = alpha sum over t < hd2 of a[r][t] . bt[t][..] (pairs) */
B16_INLINE void abt16_tile(int R, int NV, int full, int64_t ncol, int64_t hd2, float alpha,
                           const uint32_t *a, int64_t lda, const uint32_t *bt, int64_t ldbt,
                           float *c, int64_t ldc)
{
    __m512 acc0[MR], acc1[MR];
    const uint32_t *ar[MR];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
        acc0[r] = acc1[r] = _mm512_setzero_ps();
        ar[r] = a + r * lda;
    }
    for (int64_t t = 0; t < hd2; t++) {
        const uint32_t *b = bt + t * ldbt;
        __m512bh b0 = b16_load(b, full, ncol);
        __m512bh b1 = NV == 1 ? (__m512bh)_mm512_setzero_si512() : b16_load(b + VW, full,
                                                                            ncol - VW);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            __m512bh x = b16_bcast(ar[r] + t);
            acc0[r] = _mm512_dpbf16_ps(acc0[r], x, b0);
            if (NV == 2)
                acc1[r] = _mm512_dpbf16_ps(acc1[r], x, b1);
        }
    }
    __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
        float *cr = c + r * ldc;
        if (full) {
            _mm512_storeu_ps(cr, _mm512_mul_ps(al, acc0[r]));
            if (NV == 2)
                _mm512_storeu_ps(cr + VW, _mm512_mul_ps(al, acc1[r]));
        } else {
            _mm512_mask_storeu_ps(cr, b16_mask(ncol), _mm512_mul_ps(al, acc0[r]));
            if (NV == 2)
                _mm512_mask_storeu_ps(cr + VW, b16_mask(ncol - VW), _mm512_mul_ps(al, acc1[r]));
        }
    }
}

#define ABT16_G(RR)                                                                           \
    B16_GROUP void abt16_g##RR(int64_t k0, int64_t k1, int64_t hd2, float alpha,              \
                               const uint32_t *a, int64_t lda, const uint32_t *bt,            \
                               int64_t ldbt, float *c, int64_t ldc)                           \
    {                                                                                         \
        int64_t j = k0;                                                                       \
        for (; j + 2 * VW <= k1; j += 2 * VW)                                                 \
            abt16_tile(RR, 2, 1, 2 * VW, hd2, alpha, a, lda, bt + j, ldbt, c + j, ldc);       \
        if (j + VW < k1)                                                                      \
            abt16_tile(RR, 2, 0, k1 - j, hd2, alpha, a, lda, bt + j, ldbt, c + j, ldc);       \
        else if (j < k1)                                                                      \
            abt16_tile(RR, 1, 0, k1 - j, hd2, alpha, a, lda, bt + j, ldbt, c + j, ldc);       \
    }
ABT16_G(8)
ABT16_G(4)
ABT16_G(2)
ABT16_G(1)
#undef ABT16_G
static void (*const abt16_gs[4])(int64_t, int64_t, int64_t, float, const uint32_t *, int64_t,
                                 const uint32_t *, int64_t, float *, int64_t) = {
    abt16_g1, abt16_g2, abt16_g4, abt16_g8};   /* by band_group_slot */

/* ---- ab16 and atb16: c += alpha (sum over pairs), the pairs along keys or query rows ---- */

/* c (R x ncol, ldc) += alpha (acc0, acc1) */
B16_INLINE void add16_tile(int R, int full, int64_t ncol, float alpha, const __m512 *acc0,
                           const __m512 *acc1, float *c, int64_t ldc)
{
    __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
        float *cr = c + r * ldc;
        if (full) {
            _mm512_storeu_ps(cr, _mm512_fmadd_ps(al, acc0[r], _mm512_loadu_ps(cr)));
            _mm512_storeu_ps(cr + VW, _mm512_fmadd_ps(al, acc1[r], _mm512_loadu_ps(cr + VW)));
        } else {
            __mmask16 m0 = b16_mask(ncol), m1 = b16_mask(ncol - VW);
            _mm512_mask_storeu_ps(cr, m0, _mm512_fmadd_ps(al, acc0[r],
                                                          _mm512_maskz_loadu_ps(m0, cr)));
            _mm512_mask_storeu_ps(cr + VW, m1,
                                  _mm512_fmadd_ps(al, acc1[r],
                                                  _mm512_maskz_loadu_ps(m1, cr + VW)));
        }
    }
}

/* c (R x ncol) += alpha sum over pairs t in [t0, t1) of x_r(t) . b[t][..]: x_r(t) is
 * x[r * ldxr + t * ldxt] (ab: p's rows of key pairs, ldxr = ldp, ldxt = 1; atb: the row pairs
 * of p at the tile's keys, ldxr = 1, ldxt = ldp), b's pair rows (ldb) from the tile's first
 * column */
B16_INLINE void sum16_tile(int R, int full, int64_t ncol, int64_t t0, int64_t t1, float alpha,
                           const uint32_t *x, int64_t ldxr, int64_t ldxt, const uint32_t *b,
                           int64_t ldb, float *c, int64_t ldc)
{
    __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
        acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int64_t t = t0; t < t1; t++) {
        const uint32_t *bt = b + t * ldb, *xt = x + t * ldxt;
        __m512bh b0 = b16_load(bt, full, ncol), b1 = b16_load(bt + VW, full, ncol - VW);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            __m512bh xr = b16_bcast(xt + r * ldxr);
            acc0[r] = _mm512_dpbf16_ps(acc0[r], xr, b0);
            acc1[r] = _mm512_dpbf16_ps(acc1[r], xr, b1);
        }
    }
    add16_tile(R, full, ncol, alpha, acc0, acc1, c, ldc);
}

/* One group of R rows (ab) or keys (atb): hd columns in tiles of 2 VW, the last one masked */
#define SUM16_G(RR)                                                                           \
    B16_GROUP void sum16_g##RR(int64_t t0, int64_t t1, int64_t hd, float alpha,               \
                               const uint32_t *x, int64_t ldxr, int64_t ldxt,                 \
                               const uint32_t *b, int64_t ldb, float *c, int64_t ldc)         \
    {                                                                                         \
        int64_t col = 0;                                                                      \
        for (; col + 2 * VW <= hd; col += 2 * VW)                                             \
            sum16_tile(RR, 1, 2 * VW, t0, t1, alpha, x, ldxr, ldxt, b + col, ldb, c + col,    \
                       ldc);                                                                  \
        if (col < hd)                                                                         \
            sum16_tile(RR, 0, hd - col, t0, t1, alpha, x, ldxr, ldxt, b + col, ldb, c + col,  \
                       ldc);                                                                  \
    }
SUM16_G(8)
SUM16_G(4)
SUM16_G(2)
SUM16_G(1)
#undef SUM16_G
static void (*const sum16_gs[4])(int64_t, int64_t, int64_t, float, const uint32_t *, int64_t,
                                 int64_t, const uint32_t *, int64_t, float *, int64_t) = {
    sum16_g1, sum16_g2, sum16_g4, sum16_g8};   /* by band_group_slot */

static T16 void abt16_avx512(int64_t m, int64_t hd2, float alpha, const uint32_t *a,
                             int64_t lda, const uint32_t *bt, int64_t ldbt, const int64_t *lo,
                             const int64_t *hi, float *c, int64_t ldc)
{
    for (int64_t g = 0; g < m;) {
        int rows = band_group_rows(m - g, MR);
        int64_t k0, k1;
        if (band_group_keys(rows, lo + g, hi + g, &k0, &k1))
            abt16_gs[band_group_slot(rows)](k0, k1, hd2, alpha, a + g * lda, lda, bt, ldbt,
                                            c + g * ldc, ldc);
        g += rows;
    }
}

static T16 void ab16_avx512(int64_t m, int64_t hd, float alpha, const uint32_t *p, int64_t ldp,
                            const uint32_t *b, int64_t ldb, const int64_t *lo, const int64_t *hi,
                            float *c, int64_t ldc)
{
    for (int64_t g = 0; g < m;) {
        int rows = band_group_rows(m - g, MR);
        int64_t k0, k1;
        if (band_group_keys(rows, lo + g, hi + g, &k0, &k1))
            sum16_gs[band_group_slot(rows)](k0 / 2, (k1 + 1) / 2, hd, alpha, p + g * ldp, ldp,
                                            1, b, ldb, c + g * ldc, ldc);
        g += rows;
    }
}

static T16 void atb16_avx512(int64_t m, int64_t nk, int64_t hd, float alpha, const uint32_t *p,
                             int64_t ldp, const uint32_t *a, int64_t lda, const int64_t *lo,
                             const int64_t *hi, float *c, int64_t ldc)
{
    int64_t k0, k1;
    if (m <= 0 || !band_group_keys(m, lo, hi, &k0, &k1))
        return;
    k1 = k1 < nk ? k1 : nk;
    band_rows seen = band_rows_start(m, lo, hi);
    for (int64_t j = k0; j < k1;) {
        int nkeys = band_group_rows(k1 - j, MR);
        int64_t i0, i1;
        if (band_rows_next(&seen, m, lo, hi, j, j + nkeys, &i0, &i1))
            sum16_gs[band_group_slot(nkeys)](i0 / 2, (i1 + 1) / 2, hd, alpha, p + j, 1, ldp, a,
                                             lda, c + j * ldc, ldc);
        j += nkeys;
    }
}
#undef T16
#undef VW
#undef MR
#undef B16_INLINE
#undef B16_GROUP
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

void nnt_cpu_bf16_pair_transpose(int64_t n, int64_t m, const uint32_t *x, int64_t ldx,
                                 uint32_t *xt, int64_t ldt)
{
#if NNT_CPU_X86
    if (nnt_cpu_band16_level() > 0) {
        pair_transpose_avx512(n, m, x, ldx, xt, ldt);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++)
        for (int64_t t = 0; t < m; t++)
            xt[t * ldt + j] = x[j * ldx + t];
}

int nnt_cpu_band16_abt(int64_t m, int64_t hd2, float alpha, const uint32_t *a, int64_t lda,
                       const uint32_t *bt, int64_t ldbt, const int64_t *lo, const int64_t *hi,
                       float *c, int64_t ldc)
{
#if NNT_CPU_X86
    if (nnt_cpu_band16_level() > 0) {
        abt16_avx512(m, hd2, alpha, a, lda, bt, ldbt, lo, hi, c, ldc);
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
        ab16_avx512(m, hd, alpha, p, ldp, b, ldb, lo, hi, c, ldc);
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
        atb16_avx512(m, nk, hd, alpha, p, ldp, a, lda, lo, hi, c, ldc);
        return 0;
    }
#endif
    (void)m, (void)nk, (void)hd, (void)alpha, (void)p, (void)ldp, (void)a, (void)lda, (void)lo;
    (void)hi, (void)c, (void)ldc;
    return -1;
}
