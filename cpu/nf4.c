/* SPDX-License-Identifier: MIT */
/* NF4 (4-bit NormalFloat, QLoRA; bitsandbytes' "nf4" with blocksize 64): each block of 64
 * consecutive values keeps its absolute maximum as a float and each value a 4-bit index
 * into a table of 16 values in [-1, 1]. Quantizing scales a block by the reciprocal of its
 * absmax and takes the index of the nearest table value, a value halfway between two going
 * to the lower one (bitsandbytes' CPU quantizer: torch.bucketize on the midpoints);
 * dequantizing multiplies the table value by the absmax in float. Two values a byte, the
 * first in the high half. */
#include "nnt_cpu.h"

#include <math.h>
#include <string.h>

#if NNT_CPU_X86
#include "simd_avx2.h"
#include "simd_avx512.h"
#endif

/* Blocks whose 16 values are computed together when dequantizing (one rounding pass). */
#define VALUE_BLOCKS 32

/* The NF4 table as bitsandbytes stores it (float32; the QLoRA paper's normal quantiles). */
static const float nf4_table[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

const float *nnt_cpu_nf4_table(void)
{
    return nf4_table;
}

/* The 15 midpoints between neighbouring table values: their float sum halved. */
static void nf4_midpoints(float *mid)
{
    for (int i = 0; i < 15; i++)
        mid[i] = (nf4_table[i] + nf4_table[i + 1]) * 0.5f;
}

/* The index of x (already scaled into [-1, 1]): how many midpoints lie strictly below it. */
static unsigned nf4_index(const float *mid, float x)
{
    unsigned q = 0;
    for (int i = 0; i < 15; i++)
        q += x > mid[i];
    return q;
}

/* One block of NNT_NF4_BLOCK values: its absmax, and its indices packed into 32 bytes. */
static float quantize_block(const float *mid, const float *x, uint8_t *codes)
{
    float absmax = 0.0f;
    for (int i = 0; i < NNT_NF4_BLOCK; i++) {
        float a = fabsf(x[i]);
        absmax = a > absmax ? a : absmax;
    }
    /* bitsandbytes: x * (1 / max(absmax, 1e-38)), clamped to [-1, 1] */
    const float inv = 1.0f / (absmax > 1e-38f ? absmax : 1e-38f);
    for (int i = 0; i < NNT_NF4_BLOCK; i += 2) {
        float s0 = x[i] * inv, s1 = x[i + 1] * inv;
        s0 = s0 < -1.0f ? -1.0f : s0 > 1.0f ? 1.0f : s0;
        s1 = s1 < -1.0f ? -1.0f : s1 > 1.0f ? 1.0f : s1;
        codes[i / 2] = (uint8_t)(nf4_index(mid, s0) << 4 | nf4_index(mid, s1));
    }
    return absmax;
}

#if NNT_CPU_X86
/* quantize_block with AVX-512, the same float operations in lanes: the absmax a maximum
 * that passes over NaNs (max(|x|, m) returns m when |x| is NaN, as the scalar compare
 * does), the clamp keeps a NaN (max(-1, s) and min(1, s) return s when it is NaN), and each
 * index counts the midpoints strictly below (false for a NaN: code 0). */
static NNT_AVX512 float quantize_block_avx512(const float *mid, const float *x,
                                              uint8_t *codes)
{
    __m512 v[4], m = _mm512_setzero_ps();
    for (int h = 0; h < 4; h++) {
        v[h] = _mm512_loadu_ps(x + 16 * h);
        m = _mm512_max_ps(_mm512_abs_ps(v[h]), m);
    }
    const float absmax = _mm512_reduce_max_ps(m);
    const __m512 inv = _mm512_set1_ps(1.0f / (absmax > 1e-38f ? absmax : 1e-38f));
    const __m512 lo = _mm512_set1_ps(-1.0f), hi = _mm512_set1_ps(1.0f);
    const __m512i one = _mm512_set1_epi32(1);
    __m512 mv[15];
    for (int i = 0; i < 15; i++)
        mv[i] = _mm512_set1_ps(mid[i]);
    for (int h = 0; h < 4; h++) {
        __m512 sc = _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_mul_ps(v[h], inv)));
        __m512i q = _mm512_setzero_si512();
        for (int i = 0; i < 15; i++)
            q = _mm512_mask_add_epi32(q, _mm512_cmp_ps_mask(sc, mv[i], _CMP_GT_OQ), q, one);
        /* 16 indices, 4 bits each, into 8 bytes: the first of each pair in the high half */
        __m128i b = _mm512_cvtepi32_epi8(q);
        __m128i pair = _mm_or_si128(_mm_slli_epi16(b, 4), _mm_srli_epi16(b, 8));
        pair = _mm_and_si128(pair, _mm_set1_epi16(0xff));
        _mm_storel_epi64((__m128i *)(void *)(codes + 8 * h), _mm_packus_epi16(pair, pair));
    }
    return absmax;
}
#endif

void nnt_cpu_nf4_quantize(int64_t n, const void *x, int x_bf16, uint8_t *codes, float *absmax)
{
    float block[NNT_NF4_BLOCK], mid[15];
    nf4_midpoints(mid);
    float (*quantize)(const float *, const float *, uint8_t *) = quantize_block;
#if NNT_CPU_X86
    if (nnt_cpu_avx512() > 0)
        quantize = quantize_block_avx512;
#endif
    for (int64_t b = 0; b < n / NNT_NF4_BLOCK; b++) {
        const float *src = block;
        if (x_bf16)
            nnt_cpu_bf16_to_f32(NNT_NF4_BLOCK, (const uint16_t *)x + b * NNT_NF4_BLOCK, block);
        else
            src = (const float *)x + b * NNT_NF4_BLOCK;
        absmax[b] = quantize(mid, src, codes + b * (NNT_NF4_BLOCK / 2));
    }
}

/* The 16 values of each of nb blocks (v[16 b + i] = table[i] * absmax[b], in float); with
 * bf16, each rounded to bf16 as nnt_cpu_f32_to_bf16 rounds it and kept as the float of those
 * bits (its low half zero), the blocks of a call rounded in one pass. */
static void block_values(int64_t nb, const float *absmax, int bf16, float *v)
{
    for (int64_t b = 0; b < nb; b++)
        for (int i = 0; i < 16; i++)
            v[16 * b + i] = nf4_table[i] * absmax[b];
    if (bf16) {
        uint16_t h[16 * VALUE_BLOCKS];
        nnt_cpu_f32_to_bf16(16 * nb, v, h);
        for (int64_t i = 0; i < 16 * nb; i++)
            v[i] = nnt_cpu_bf16_value(h[i]);
    }
}

/* One block's 64 values of v (block_values) by its 32 bytes of codes, into out (floats, or
 * bf16: the upper halves of v's bits). */
static void block_out(const float *v, const uint8_t *c, int bf16, void *out)
{
    if (bf16) {
        uint16_t *o = out;
        for (int i = 0; i < NNT_NF4_BLOCK / 2; i++) {
            uint32_t hi, lo;
            memcpy(&hi, &v[c[i] >> 4], 4);
            memcpy(&lo, &v[c[i] & 15], 4);
            o[2 * i] = (uint16_t)(hi >> 16);
            o[2 * i + 1] = (uint16_t)(lo >> 16);
        }
        return;
    }
    float *o = out;
    for (int i = 0; i < NNT_NF4_BLOCK / 2; i++) {
        o[2 * i] = v[c[i] >> 4];
        o[2 * i + 1] = v[c[i] & 15];
    }
}

#if NNT_CPU_X86
/* The 8 indices of 4 bytes of codes, first value of each byte (its high half) first */
static inline NNT_AVX2 __m256i indices8(const uint8_t *c)
{
    uint32_t word;
    memcpy(&word, c, 4);
    __m128i b = _mm_cvtsi32_si128((int)word);
    __m256i x = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(b, b));   /* b0 b0 b1 b1 ... */
    const __m256i shift = _mm256_set_epi32(0, 4, 0, 4, 0, 4, 0, 4);
    return _mm256_and_si256(_mm256_srlv_epi32(x, shift), _mm256_set1_epi32(15));
}

static NNT_AVX2 void block_out_avx2(const float *v, const uint8_t *c, int bf16, void *out)
{
    const __m256 lo = _mm256_loadu_ps(v), hi = _mm256_loadu_ps(v + 8);
    for (int k = 0; k < NNT_NF4_BLOCK / 8; k++) {
        __m256i idx = indices8(c + 4 * k);   /* a table of 16: two of 8, chosen by bit 3 */
        __m256 upper = _mm256_castsi256_ps(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(7)));
        __m256 y = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx),
                                    _mm256_permutevar8x32_ps(hi, idx), upper);
        if (bf16) {
            __m256i h = _mm256_srli_epi32(_mm256_castps_si256(y), 16);
            __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(h),
                                         _mm256_extracti128_si256(h, 1));
            _mm_storeu_si128((__m128i *)(void *)((uint16_t *)out + 8 * k), p);
        } else {
            _mm256_storeu_ps((float *)out + 8 * k, y);
        }
    }
}
#endif

#if NNT_CPU_X86
#define NNT_AVX512BW __attribute__((target("avx512f,avx512bw,avx2,fma")))

/* Whether the AVX-512 path may use AVX512BW's word permutes (vpermw). */
static int avx512bw(void)
{
    static int ok = -1;   /* the same answer from any thread */
    if (ok < 0) {
        __builtin_cpu_init();
        ok = __builtin_cpu_supports("avx512bw");
    }
    return ok && nnt_cpu_avx512() > 0;
}

static void dequant16_avx512bw(int64_t blocks, const uint8_t *codes, const float *absmax,
                               uint16_t *y);
static void dequant32_avx512(int64_t blocks, const uint8_t *codes, const float *absmax,
                             float *y);
#endif

void nnt_cpu_nf4_dequantize(int64_t n, const uint8_t *codes, const float *absmax, void *y,
                            int y_bf16)
{
    void (*out)(const float *, const uint8_t *, int, void *) = block_out;
#if NNT_CPU_X86
    if (y_bf16 ? avx512bw() : nnt_cpu_avx512() > 0) {
        if (y_bf16)
            dequant16_avx512bw(n / NNT_NF4_BLOCK, codes, absmax, y);
        else
            dequant32_avx512(n / NNT_NF4_BLOCK, codes, absmax, y);
        return;
    }
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        out = block_out_avx2;
#endif
    const size_t esize = y_bf16 ? sizeof(uint16_t) : sizeof(float);
    float v[16 * VALUE_BLOCKS];
    for (int64_t b0 = 0; b0 < n / NNT_NF4_BLOCK; b0 += VALUE_BLOCKS) {
        int64_t nb = n / NNT_NF4_BLOCK - b0 < VALUE_BLOCKS ? n / NNT_NF4_BLOCK - b0 : VALUE_BLOCKS;
        block_values(nb, absmax + b0, y_bf16, v);
        for (int64_t b = b0; b < b0 + nb; b++)
            out(v + 16 * (b - b0), codes + b * (NNT_NF4_BLOCK / 2), y_bf16,
                (char *)y + b * NNT_NF4_BLOCK * esize);
    }
}

/* ---- products with an NF4 B, a few rows of A at a time (generation's decode steps) -------- */

/* Rows of B dequantized at a time: whole blocks (64 / gcd(k, 64) rows at least, blocks may
 * cross rows), about NF4_ROWS_VALUES values, which stay in L2 while each row of x reads them. */
#define NF4_ROWS_VALUES 8192

static int64_t rows_group(int64_t k)
{
    int64_t g = 1;   /* the fewest rows that hold whole blocks: 64 / gcd(k, 64) */
    while (g * k % NNT_NF4_BLOCK)
        g *= 2;
    int64_t fit = NF4_ROWS_VALUES / (g * k);
    return g * (fit > 1 ? fit : 1);
}

size_t nnt_cpu_nf4_rows_scratch(int64_t m, int64_t k)
{
    size_t rows = (size_t)(rows_group(k) * k) * sizeof(float);   /* a group of B's rows */
    size_t pairs = (size_t)(m * k) * sizeof(uint16_t);             /* x's rows in bf16 */
    return rows > pairs ? rows : pairs;
}

#if NNT_CPU_X86
/* A block's 16 values in a register: table times absmax in float; with bf16, rounded to
 * bf16 as nnt_cpu_f32_to_bf16 rounds (to nearest even, a NaN made quiet) and kept as
 * floats (low halves zero): block_values' values. */
static inline NNT_AVX512 __m512 block_table(__m512 table, float absmax, int bf16)
{
    __m512 v = _mm512_mul_ps(table, _mm512_set1_ps(absmax));
    if (!bf16)
        return v;
    __m512i r = nnt_avx512_round_bf16(_mm512_castps_si512(v));
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u)));
}

/* The 32 indices of 16 bytes of codes in two registers, the first value of each byte (its
 * high half, shifted down) first, then the byte itself (vpermps reads its low 4 bits) */
static inline NNT_AVX512 void indices32(const uint8_t *c, __m512i *first, __m512i *second)
{
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)c));
    const __m512i hi = _mm512_srli_epi32(lo, 4);
    const __m512i pick0 = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i pick1 = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                           24, 8);
    *first = _mm512_permutex2var_epi32(hi, pick0, lo);
    *second = _mm512_permutex2var_epi32(hi, pick1, lo);
}

/* A block's 16 bf16 values (h) twice over in one register: vpermw reads 5 bits of an index */
static inline NNT_AVX512BW __m512i table16(__m256i h)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
}

/* A block's 64 values from its 32 bytes of codes c and table16's tab, a byte's two values
 * side by side in a dword (one vpermw on the byte's high half and the byte itself): the
 * quarter q of *v0 holds the values of bytes 8q..8q+3 (values 16q..16q+7), of *v1 those of
 * bytes 8q+4..8q+7. */
static inline NNT_AVX512BW void byte_pairs16(__m512i tab, const uint8_t *c, __m512i *v0,
                                             __m512i *v1)
{
    const __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)c));
    const __m512i hi = _mm512_srli_epi16(w, 4);   /* a byte's first value's code */
    *v0 = _mm512_permutexvar_epi16(_mm512_unpacklo_epi16(hi, w), tab);
    *v1 = _mm512_permutexvar_epi16(_mm512_unpackhi_epi16(hi, w), tab);
}

/* nnt_cpu_nf4_dequantize to bf16 with AVX512BW: each block's 16 values (block_table) as
 * bf16, its bytes' value pairs (byte_pairs16), the 128-bit quarters put back in order. */
static NNT_AVX512BW void dequant16_avx512bw(int64_t blocks, const uint8_t *codes,
                                            const float *absmax, uint16_t *y)
{
    const __m512 table = _mm512_loadu_ps(nf4_table);
    const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (int64_t b = 0; b < blocks; b++) {
        const __m256i h = _mm512_cvtepi32_epi16(
            _mm512_srli_epi32(_mm512_castps_si512(block_table(table, absmax[b], 1)), 16));
        __m512i v0, v1;
        byte_pairs16(table16(h), codes + 32 * b, &v0, &v1);
        _mm512_storeu_si512((void *)(y + 64 * b), _mm512_permutex2var_epi64(v0, first, v1));
        _mm512_storeu_si512((void *)(y + 64 * b + 32), _mm512_permutex2var_epi64(v0, second, v1));
    }
}

/* nnt_cpu_nf4_dequantize to floats with AVX-512: each block's 16 values (block_table) in a
 * register, picked by vpermps. */
static NNT_AVX512 void dequant32_avx512(int64_t blocks, const uint8_t *codes,
                                       const float *absmax, float *y)
{
    const __m512 table = _mm512_loadu_ps(nf4_table);
    for (int64_t b = 0; b < blocks; b++) {
        const __m512 tab = block_table(table, absmax[b], 0);
        __m512i i0, i1, i2, i3;
        indices32(codes + 32 * b, &i0, &i1);
        indices32(codes + 32 * b + 16, &i2, &i3);
        _mm512_storeu_ps(y + 64 * b, _mm512_permutexvar_ps(i0, tab));
        _mm512_storeu_ps(y + 64 * b + 16, _mm512_permutexvar_ps(i1, tab));
        _mm512_storeu_ps(y + 64 * b + 32, _mm512_permutexvar_ps(i2, tab));
        _mm512_storeu_ps(y + 64 * b + 48, _mm512_permutexvar_ps(i3, tab));
    }
}

/* Up to 4 rows of x against B's rows as stored (k a multiple of 64, so a row is whole
 * blocks): each value decoded into a register and multiplied there. The sums are those of
 * the one-row kernels on the dequantized B (cpu/gemv.c, gemv_t_avx2): values 32 t + 0..15
 * in one register (its partial sums 0 and 1 side by side), 32 t + 16..31 in another, reduced
 * as (0 + 1) + (2 + 3) and then as nnt_avx2_hsum does. Inlined for each m (a constant), its
 * loops over rows unrolled, so that the sums stay in registers (a loop kept them on the
 * stack: 2 rows took 2.3 times 1 row's time, 4 rows 3.5 times). */
static inline __attribute__((always_inline)) NNT_AVX512 void
rows_avx512_m(const int m, int64_t n, int64_t k, float alpha, const float *x,
              const uint8_t *codes, const float *absmax, int bf16, float beta, float *y,
              int64_t ldy)
{
    const __m512 table = _mm512_loadu_ps(nf4_table);
    const int64_t blocks = k / NNT_NF4_BLOCK;
    for (int64_t j = 0; j < n; j++) {
        __m512 lo[4], hi[4];   /* row r's values 32 t + 0..15 and 32 t + 16..31 */
#pragma GCC unroll 4
        for (int r = 0; r < m; r++)
            lo[r] = hi[r] = _mm512_setzero_ps();
        const uint8_t *c = codes + j * k / 2;
        const float *xi = x;
        for (int64_t t = 0; t < blocks; t++, c += NNT_NF4_BLOCK / 2, xi += NNT_NF4_BLOCK) {
            const __m512 tab = block_table(table, absmax[j * blocks + t], bf16);
            __m512i i0, i1, i2, i3;
            indices32(c, &i0, &i1);
            indices32(c + 16, &i2, &i3);
            const __m512 v0 = _mm512_permutexvar_ps(i0, tab);
            const __m512 v1 = _mm512_permutexvar_ps(i1, tab);
            const __m512 v2 = _mm512_permutexvar_ps(i2, tab);
            const __m512 v3 = _mm512_permutexvar_ps(i3, tab);
#pragma GCC unroll 4
            for (int r = 0; r < m; r++) {
                const float *xr = xi + r * k;
                lo[r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr), v0, lo[r]);
                hi[r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 16), v1, hi[r]);
                lo[r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 32), v2, lo[r]);
                hi[r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 48), v3, hi[r]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < m; r++) {
            __m256 s01 = _mm256_add_ps(_mm512_castps512_ps256(lo[r]), nnt_avx512_upper(lo[r]));
            __m256 s23 = _mm256_add_ps(_mm512_castps512_ps256(hi[r]), nnt_avx512_upper(hi[r]));
            float s = nnt_avx2_hsum(_mm256_add_ps(s01, s23));
            float *out = y + r * ldy + j;
            *out = beta == 0.0f ? alpha * s : alpha * s + beta * *out;
        }
    }
}

static NNT_AVX512 void rows_avx512(int m, int64_t n, int64_t k, float alpha, const float *x,
                                   const uint8_t *codes, const float *absmax, int bf16,
                                   float beta, float *y, int64_t ldy)
{
    switch (m) {
    case 1:
        rows_avx512_m(1, n, k, alpha, x, codes, absmax, bf16, beta, y, ldy);
        break;
    case 2:
        rows_avx512_m(2, n, k, alpha, x, codes, absmax, bf16, beta, y, ldy);
        break;
    case 3:
        rows_avx512_m(3, n, k, alpha, x, codes, absmax, bf16, beta, y, ldy);
        break;
    default:
        rows_avx512_m(4, n, k, alpha, x, codes, absmax, bf16, beta, y, ldy);
        break;
    }
}
#endif

#if NNT_CPU_X86
/* ---- bf16 products with AVX512-BF16: the rows by bf16 dot products ---- */

#define NNT_AVX512BF16BW __attribute__((target("avx512f,avx512bw,avx512bf16,avx2,fma")))

static int dpbf16_rows(void)
{
    return avx512bw() && nnt_cpu_avx512() == 2;
}

/* x's rows (floats holding bf16 values) as bf16 in the order rows_dpbf16_m reads them: in
 * each block of 64, the 32 values whose place in their 16 is below 8, then the other 32,
 * each half in order. */
static void x_pairs(int64_t m, int64_t k, const float *x, uint16_t *x16)
{
    for (int64_t i = 0; i < m * k; i++) {
        const int64_t t = i / NNT_NF4_BLOCK * NNT_NF4_BLOCK, v = i % NNT_NF4_BLOCK;
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        x16[t + (v % 16 >= 8) * 32 + v / 16 * 8 + v % 8] = (uint16_t)(u >> 16);
    }
}

/* Up to 4 rows of x (x_pairs) against B's rows as stored (k a multiple of 64), each block's
 * 16 values rounded to bf16 (vcvtneps2bf16) and picked by vpermw for the two values of each
 * byte of codes side by side, summed by vdpbf16ps: two bf16 products a lane (exact in
 * float) added in float, 32 values an instruction, in two chains a row. The sums' order is
 * not the one-row kernels': another float rounding of the same products. */
static inline __attribute__((always_inline)) NNT_AVX512BF16BW void
rows_dpbf16_m(const int m, int64_t n, int64_t k, float alpha, const uint16_t *x16,
              const uint8_t *codes, const float *absmax, float beta, float *y, int64_t ldy)
{
    const __m512 table = _mm512_loadu_ps(nf4_table);
    const int64_t blocks = k / NNT_NF4_BLOCK;
    for (int64_t j = 0; j < n; j++) {
        __m512 even[4], odd[4];   /* row r: the values of bytes 0..3, then 4..7 of each 8 */
#pragma GCC unroll 4
        for (int r = 0; r < m; r++)
            even[r] = odd[r] = _mm512_setzero_ps();
        const uint8_t *c = codes + j * k / 2;
        for (int64_t t = 0; t < blocks; t++, c += NNT_NF4_BLOCK / 2) {
            const __m256i h = (__m256i)_mm512_cvtneps_pbh(
                _mm512_mul_ps(table, _mm512_set1_ps(absmax[j * blocks + t])));
            __m512i v0, v1;   /* each dword: a byte's two values */
            byte_pairs16(table16(h), c, &v0, &v1);
#pragma GCC unroll 4
            for (int r = 0; r < m; r++) {
                const uint16_t *xr = x16 + r * k + t * NNT_NF4_BLOCK;
                even[r] = _mm512_dpbf16_ps(even[r], (__m512bh)v0,
                                           (__m512bh)_mm512_loadu_si512((const void *)xr));
                odd[r] = _mm512_dpbf16_ps(odd[r], (__m512bh)v1,
                                          (__m512bh)_mm512_loadu_si512((const void *)(xr + 32)));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < m; r++) {
            float s = _mm512_reduce_add_ps(_mm512_add_ps(even[r], odd[r]));
            float *out = y + r * ldy + j;
            *out = beta == 0.0f ? alpha * s : alpha * s + beta * *out;
        }
    }
}

static NNT_AVX512BF16BW void rows_dpbf16(int m, int64_t n, int64_t k, float alpha,
                                         const uint16_t *x16, const uint8_t *codes,
                                         const float *absmax, float beta, float *y,
                                         int64_t ldy)
{
    switch (m) {
    case 1:
        rows_dpbf16_m(1, n, k, alpha, x16, codes, absmax, beta, y, ldy);
        break;
    case 2:
        rows_dpbf16_m(2, n, k, alpha, x16, codes, absmax, beta, y, ldy);
        break;
    case 3:
        rows_dpbf16_m(3, n, k, alpha, x16, codes, absmax, beta, y, ldy);
        break;
    default:
        rows_dpbf16_m(4, n, k, alpha, x16, codes, absmax, beta, y, ldy);
        break;
    }
}
#endif

void nnt_cpu_nf4_rows(int64_t m, int64_t n, int64_t k, float alpha, const float *x,
                      const uint8_t *b, int bits, float beta, float *y, void *buf)
{
    const float *absmax = nnt_cpu_nf4_absmax(b, n * k);
    const int bf16 = bits == 7;   /* bf16 products: B's values rounded to bf16 on the way */
#if NNT_CPU_X86
    if (bf16 && k % NNT_NF4_BLOCK == 0 && dpbf16_rows()) {
        uint16_t *x16 = buf;   // (m, k), x_pairs' order
        x_pairs(m, k, x, x16);
        for (int64_t r = 0; r < m; r += 4)
            rows_dpbf16(m - r < 4 ? (int)(m - r) : 4, n, k, alpha, x16 + r * k, b, absmax, beta,
                        y + r * n, n);
        return;
    }
    if ((bits == 0 || bf16) && k % NNT_NF4_BLOCK == 0 && nnt_cpu_avx512() > 0) {
        for (int64_t r = 0; r < m; r += 4)   /* x's rows four at a time */
            rows_avx512(m - r < 4 ? (int)(m - r) : 4, n, k, alpha, x + r * k, b, absmax,
                        bf16, beta, y + r * n, n);
        return;
    }
#endif
    const int64_t group = rows_group(k);
    for (int64_t r0 = 0; r0 < n; r0 += group) {
        int64_t rows = n - r0 < group ? n - r0 : group, values = rows * k;
        nnt_cpu_nf4_dequantize(values, b + r0 * k / 2, absmax + r0 * k / NNT_NF4_BLOCK, buf,
                               bf16);
        if (!bf16 && bits)
            nnt_cpu_round_f32(values, bits, buf, buf);
        for (int64_t i = 0; i < m; i++) {
            if (bf16)
                nnt_cpu_gemv_bf16(1, 1, rows, k, alpha, x + i * k, buf, k, beta, y + i * n + r0);
            else
                nnt_cpu_gemm_f32(0, 1, 1, rows, k, alpha, x + i * k, k, 0, buf, k, 0, beta,
                                 y + i * n + r0, rows, 0, 1);
        }
    }
}

/* acc[o] += sum_i w[o, i]^2 over the rows (outer, inner) of an NF4 tile (codes, absmax):
 * each w the float product table[q] * absmax of the dequantization, squared and summed in
 * double (DoRA's norms of an NF4 base). */
void nnt_cpu_nf4_sumsq_rows(int64_t outer, int64_t inner, const uint8_t *codes,
                            const float *absmax, float *acc)
{
    for (int64_t o = 0; o < outer; o++) {
        double s = 0.0;
        for (int64_t i = 0; i < inner; i++) {
            int64_t k = o * inner + i;
            unsigned q = k % 2 ? codes[k / 2] & 15u : codes[k / 2] >> 4;
            float w = nf4_table[q] * absmax[k / NNT_NF4_BLOCK];
            s += (double)w * w;
        }
        acc[o] = (float)((double)acc[o] + s);
    }
}
