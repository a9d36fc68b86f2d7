/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: the attention kernels' float products over a band of keys (see nnt_cpu.h,
 * "band products"). A GEMM computes whole rectangles, so a chunk of 64 query rows against a
 * window's or the diagonal's edge computes a staircase of scores no row sees (63 keys a row at
 * each edge); these products take rows in groups of MR (8 with AVX-512, 6 with AVX2) and give
 * each group only the keys its rows see. Their tiles are register-blocked (MR rows by two
 * vectors of columns), and for the attention's narrow shapes they run a little faster than
 * oneDNN's matmul with B as stored: AMD Zen 5, one thread, 64 rows, 575 keys, 64-dim heads
 * (bench/RESULTS-window.md): q k^T 273-278 against 233-240 GFLOP/s, p v 266-270 against
 * 257-263, p^T q 269-270 against 228-232; a block the diagonal or a window's edge cuts 15-19 %
 * faster. */
#include "nnt_cpu.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_band_groups.h"

#if NNT_CPU_X86
#include "simd_avx2.h"
#include "simd_avx512.h"

/* ---- AVX-512F: tiles of 8 rows by 32 columns ---- */
#define BAND(name) band_##name##_avx512
#define BAND_T NNT_AVX512
#include "attn_band_avx512.h"
#include "attn_band_f32.h"
#include "attn_band_impl.h"

/* ---- AVX2 + FMA: tiles of 6 rows by 16 columns (12 accumulators of the 16 registers) ---- */
static inline NNT_AVX2 __m256 band_loadn8(const float *p, int64_t n)
{
    if (n >= 8)
        return _mm256_loadu_ps(p);
    if (n <= 0)
        return _mm256_setzero_ps();
    return _mm256_maskload_ps(p, nnt_avx2_tail_mask(n));
}

static inline NNT_AVX2 void band_storen8(float *p, __m256 x, int64_t n)
{
    if (n >= 8)
        _mm256_storeu_ps(p, x);
    else if (n > 0)
        _mm256_maskstore_ps(p, nnt_avx2_tail_mask(n), x);
}
#define BAND(name) band_##name##_avx2
#define BAND_T NNT_AVX2
#define VF __m256
#define VW 8
#define MR 6
#define v_zero() _mm256_setzero_ps()
#define v_bcast(x) _mm256_set1_ps(x)
#define v_load(p) _mm256_loadu_ps(p)
#define v_loadn(p, n) band_loadn8((p), (n))
#define v_store(p, x) _mm256_storeu_ps((p), (x))
#define v_storen(p, x, n) band_storen8((p), (x), (n))
#define v_fma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define v_mul(a, b) _mm256_mul_ps((a), (b))
#include "attn_band_f32.h"
#include "attn_band_impl.h"
#endif /* NNT_CPU_X86 */

static int band_forced = -1;
static int band_env = -1;   /* NNT_ATTN_BAND=0 (read once): 0, the GEMMs; else 1 */

int nnt_cpu_band_level(void)
{
    if (band_env < 0) {
        const char *e = getenv("NNT_ATTN_BAND");
        band_env = e && strcmp(e, "0") == 0 ? 0 : 1;
    }
    int level = 0;
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2 && band_env)
        level = nnt_cpu_avx512() >= 1 ? 2 : 1;
    return band_forced >= 0 && band_forced < level ? band_forced : level;
}

int nnt_cpu_band_force(int level)
{
    band_forced = level < 0 ? -1 : level;
    return nnt_cpu_band_level();
}

/* xt[d * ldt + j] = x[j * hd + d] for rows [j0, j1) and columns [d0, d1), 32-bit words (floats
 * or bf16 pairs: moved as they are) */
static void transpose_portable(int64_t j0, int64_t j1, int64_t d0, int64_t d1, int64_t hd,
                               const void *x, void *xt, int64_t ldt)
{
    const char *xb = x;
    char *tb = xt;
    for (int64_t b = j0; b < j1; b += 16)   /* 16 rows of x at a time: xt's runs of 16 */
        for (int64_t d = d0; d < d1; d++) {
            int64_t e = b + 16 < j1 ? b + 16 : j1;
            for (int64_t j = b; j < e; j++)
                memcpy(tb + 4 * (d * ldt + j), xb + 4 * (j * hd + d), 4);
        }
}

#if NNT_CPU_X86
/* Blocks of 16 x 16 transposed in registers (four rounds of shuffles), the edges portably */
static NNT_AVX512 void transpose_avx512(int64_t n, int64_t hd, const void *xv, void *xtv,
                                        int64_t ldt)
{
    const float *x = xv;   /* only the intrinsics' loads and stores touch the words */
    float *xt = xtv;
    int64_t n16 = n / 16 * 16, hd16 = hd / 16 * 16;
    for (int64_t j = 0; j < n16; j += 16)
        for (int64_t d = 0; d < hd16; d += 16) {
            __m512 r[16], t[16], u[16];
            for (int i = 0; i < 16; i++)
                r[i] = _mm512_loadu_ps(x + (j + i) * hd + d);
            for (int i = 0; i < 16; i += 2) {   /* per 128-bit lane: rows i, i + 1 mixed */
                t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int g = 0; g < 16; g += 4) {   /* per lane: 4 rows of one column */
                __m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 2]);
                __m512d c = _mm512_castps_pd(t[g + 1]), e = _mm512_castps_pd(t[g + 3]);
                u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
                u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
                u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, e));
                u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, e));
            }
            for (int e = 0; e < 4; e++) {   /* columns e, 4 + e, 8 + e, 12 + e */
                __m512 a88 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88);
                __m512 add = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xdd);
                __m512 b88 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88);
                __m512 bdd = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xdd);
                float *o = xt + (d + e) * ldt + j;
                _mm512_storeu_ps(o, _mm512_shuffle_f32x4(a88, b88, 0x88));
                _mm512_storeu_ps(o + 4 * ldt, _mm512_shuffle_f32x4(add, bdd, 0x88));
                _mm512_storeu_ps(o + 8 * ldt, _mm512_shuffle_f32x4(a88, b88, 0xdd));
                _mm512_storeu_ps(o + 12 * ldt, _mm512_shuffle_f32x4(add, bdd, 0xdd));
            }
        }
    transpose_portable(0, n16, hd16, hd, hd, x, xt, ldt);
    transpose_portable(n16, n, 0, hd, hd, x, xt, ldt);
}

/* Blocks of 8 x 8 */
static NNT_AVX2 void transpose_avx2(int64_t n, int64_t hd, const void *xv, void *xtv,
                                    int64_t ldt)
{
    const float *x = xv;
    float *xt = xtv;
    int64_t n8 = n / 8 * 8, hd8 = hd / 8 * 8;
    for (int64_t j = 0; j < n8; j += 8)
        for (int64_t d = 0; d < hd8; d += 8) {
            __m256 r[8], t[8], u[8];
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_loadu_ps(x + (j + i) * hd + d);
            for (int i = 0; i < 8; i += 2) {
                t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int g = 0; g < 8; g += 4) {
                u[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
                u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xee);
                u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
                u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xee);
            }
            for (int e = 0; e < 4; e++) {   /* columns e and 4 + e */
                float *o = xt + (d + e) * ldt + j;
                _mm256_storeu_ps(o, _mm256_permute2f128_ps(u[e], u[4 + e], 0x20));
                _mm256_storeu_ps(o + 4 * ldt, _mm256_permute2f128_ps(u[e], u[4 + e], 0x31));
            }
        }
    transpose_portable(0, n8, hd8, hd, hd, x, xt, ldt);
    transpose_portable(n8, n, 0, hd, hd, x, xt, ldt);
}
#endif

void nnt_cpu_band_transpose(int64_t n, int64_t hd, const void *x, void *xt, int64_t ldt)
{
#if NNT_CPU_X86
    int level = nnt_cpu_band_level();
    if (level == 2) {
        transpose_avx512(n, hd, x, xt, ldt);
        return;
    }
    if (level == 1) {
        transpose_avx2(n, hd, x, xt, ldt);
        return;
    }
#endif
    transpose_portable(0, n, 0, hd, hd, x, xt, ldt);
}

/* ---- the portable versions (the same sums in the same order) ---- */

static void abt_portable(int64_t m, int64_t hd, float alpha, const float *a, int64_t lda,
                         const float *bt, int64_t ldbt, const int64_t *lo, const int64_t *hi,
                         float *c, int64_t ldc)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = lo[r]; j < hi[r]; j++) {
            float s = 0.0f;
            for (int64_t d = 0; d < hd; d++)
                s = fmaf(a[r * lda + d], bt[d * ldbt + j], s);
            c[r * ldc + j] = alpha * s;
        }
}

static void ab_portable(int64_t m, int64_t hd, float alpha, const float *p, int64_t ldp,
                        const float *b, int64_t ldb, const int64_t *lo, const int64_t *hi,
                        float *c, int64_t ldc)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t x = 0; x < hd && lo[r] < hi[r]; x++) {
            float s = 0.0f;
            for (int64_t j = lo[r]; j < hi[r]; j++)
                s = fmaf(p[r * ldp + j], b[j * ldb + x], s);
            c[r * ldc + x] = fmaf(alpha, s, c[r * ldc + x]);
        }
}

static void atb_portable(int64_t m, int64_t nk, int64_t hd, float alpha, const float *p,
                         int64_t ldp, const float *a, int64_t lda, const int64_t *lo,
                         const int64_t *hi, float *c, int64_t ldc)
{
    for (int64_t j = 0; j < nk; j++) {
        int64_t i0, i1;
        if (!band_key_rows(m, lo, hi, j, j + 1, &i0, &i1))
            continue;
        for (int64_t x = 0; x < hd; x++) {
            float s = 0.0f;
            for (int64_t i = i0; i < i1; i++)
                s = fmaf(p[i * ldp + j], a[i * lda + x], s);
            c[j * ldc + x] = fmaf(alpha, s, c[j * ldc + x]);
        }
    }
}

void nnt_cpu_band_abt(int64_t m, int64_t hd, float alpha, const float *a, int64_t lda,
                      const float *bt, int64_t ldbt, const int64_t *lo, const int64_t *hi,
                      float *c, int64_t ldc)
{
#if NNT_CPU_X86
    int level = nnt_cpu_band_level();
    if (level == 2)
        band_abt_avx512(m, hd, alpha, a, lda, bt, ldbt, lo, hi, c, ldc);
    else if (level == 1)
        band_abt_avx2(m, hd, alpha, a, lda, bt, ldbt, lo, hi, c, ldc);
    else
#endif
        abt_portable(m, hd, alpha, a, lda, bt, ldbt, lo, hi, c, ldc);
}

void nnt_cpu_band_ab(int64_t m, int64_t hd, float alpha, const float *p, int64_t ldp,
                     const float *b, int64_t ldb, const int64_t *lo, const int64_t *hi,
                     float *c, int64_t ldc)
{
#if NNT_CPU_X86
    int level = nnt_cpu_band_level();
    if (level == 2)
        band_ab_avx512(m, hd, alpha, p, ldp, b, ldb, lo, hi, c, ldc);
    else if (level == 1)
        band_ab_avx2(m, hd, alpha, p, ldp, b, ldb, lo, hi, c, ldc);
    else
#endif
        ab_portable(m, hd, alpha, p, ldp, b, ldb, lo, hi, c, ldc);
}

void nnt_cpu_band_atb(int64_t m, int64_t nk, int64_t hd, float alpha, const float *p,
                      int64_t ldp, const float *a, int64_t lda, const int64_t *lo,
                      const int64_t *hi, float *c, int64_t ldc)
{
#if NNT_CPU_X86
    int level = nnt_cpu_band_level();
    if (level == 2)
        band_atb_avx512(m, nk, hd, alpha, p, ldp, a, lda, lo, hi, c, ldc);
    else if (level == 1)
        band_atb_avx2(m, nk, hd, alpha, p, ldp, a, lda, lo, hi, c, ldc);
    else
#endif
        atb_portable(m, nk, hd, alpha, p, ldp, a, lda, lo, hi, c, ldc);
}
