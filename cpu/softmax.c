/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: the row steps of a softmax (max, exponentials, their sum), shared by the
 * cross-entropy and the attention kernels. Each has the portable loop and an AVX2 + FMA
 * path (nnt_cpu_isa), whose exponentials take 16 floats a step where the CPU has AVX-512F
 * (nnt_cpu_avx512; the same bits: each element through the same operations, each sum kept in
 * the lanes the 8-float steps keep it in); a tail goes through the same vector exp as the
 * body, masked, so an element's value never depends on the row's length. On AMD Zen 5 (bench/
 * RESULTS-window.md) a whole attention block's forward took 0.88 ms against 0.99-1.01 ms
 * with the rows 8 a step (fp32, one thread). */
#include "nnt_cpu.h"

#include <math.h>

#if NNT_CPU_X86
#include "simd_avx2.h"
#include "simd_avx512.h"

/* row_max_avx2 16 floats a step in four running maxima, the tail in one masked step: the
 * maximum of a set of floats does not depend on the order it is taken in (a NaN aside: the
 * exponentials carry it into the sum either way). A row of 512 scores was a chain of 64
 * dependent 8-float maxima: in a window's forward (T 4096, W 512, one thread, Intel Xeon)
 * the row maxima took 6.6 % of the time, 1.4 % now (perf). */
static NNT_AVX512 float row_max_avx512(int64_t n, const float *restrict x)
{
    const __m512 lowest = _mm512_set1_ps(-INFINITY);
    __m512 m0 = lowest, m1 = lowest, m2 = lowest, m3 = lowest;
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + j));
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + j + 16));
        m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + j + 32));
        m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + j + 48));
    }
    for (; j + 16 <= n; j += 16)
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + j));
    if (j < n)
        m1 = _mm512_max_ps(m1, _mm512_mask_loadu_ps(lowest, nnt_avx512_maskn(n - j), x + j));
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}

static NNT_AVX2 float row_max_avx2(int64_t n, const float *restrict x)
{
    float bm = x[0];
    int64_t j = 0;
    if (n >= 8) {
        __m256 vm = _mm256_loadu_ps(x);
        for (j = 8; j + 8 <= n; j += 8)
            vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + j));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        bm = _mm_cvtss_f32(h);
    }
    for (; j < n; j++)
        bm = x[j] > bm ? x[j] : bm;
    return bm;
}

/* sum of exp(x[j] - mx), 16 partial sums (more accurate than the portable loop's one);
 * with out != NULL also out[j] = exp(x[j] - mx) (out may be x) */
static NNT_AVX2 float row_exp_avx2(int64_t n, const float *x, float mx, float *out)
{
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 e0 = nnt_avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx));
        __m256 e1 = nnt_avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), vmx));
        if (out) {
            _mm256_storeu_ps(out + j, e0);
            _mm256_storeu_ps(out + j + 8, e1);
        }
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; j + 8 <= n; j += 8) {
        __m256 e = nnt_avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx));
        if (out)
            _mm256_storeu_ps(out + j, e);
        s0 = _mm256_add_ps(s0, e);
    }
    if (j < n) {
        __m256i mask = nnt_avx2_tail_mask(n - j);
        __m256 e = nnt_avx2_exp(_mm256_sub_ps(_mm256_maskload_ps(x + j, mask), vmx));
        if (out)
            _mm256_maskstore_ps(out + j, mask, e);
        s1 = _mm256_add_ps(s1, _mm256_and_ps(e, _mm256_castsi256_ps(mask)));
    }
    return nnt_avx2_hsum(_mm256_add_ps(s0, s1));
}

/* row_exp_avx2 16 a step: lanes 0-7 of the sum are its s0, lanes 8-15 its s1, each element
 * added in the lane it goes to there (its 8-float step into s0's, its tail into s1's). A last
 * 8 to 15 floats are one masked step: their first 8 go to s0's lanes as row_exp_avx2's 8-float
 * step puts them, the rest to s1's as its tail does. */
static NNT_AVX512 float row_exp_avx512(int64_t n, const float *x, float mx, float *out)
{
    const __m512 vmx = _mm512_set1_ps(mx);
    __m512 s = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 e = nnt_avx512_exp(_mm512_sub_ps(_mm512_loadu_ps(x + j), vmx));
        if (out)
            _mm512_storeu_ps(out + j, e);
        s = _mm512_add_ps(s, e);
    }
    if (j + 8 <= n) {
        const __mmask16 m = nnt_avx512_mask(n - j, 0);
        __m512 e = nnt_avx512_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vmx));
        if (out)
            _mm512_mask_storeu_ps(out + j, m, e);
        s = _mm512_mask_add_ps(s, m, s, e);
        j = n;
    }
    if (j < n) {
        const __mmask16 m = nnt_avx512_mask(n - j, 0);
        __m512 e = nnt_avx512_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vmx));
        if (out)
            _mm512_mask_storeu_ps(out + j, m, e);
        __m512 up = _mm512_shuffle_f32x4(e, e, 0x44);   /* lanes 0-7 also in 8-15 */
        s = _mm512_mask_add_ps(s, nnt_avx512_mask(n - j, 8), s, up);
    }
    return nnt_avx2_hsum(_mm256_add_ps(_mm512_castps512_ps256(s), nnt_avx512_upper(s)));
}

static NNT_AVX2 void row_scaled_exp_avx2(int64_t n, const float *x, float mx, float c,
                                         float *dx)
{
    const __m256 vmx = _mm256_set1_ps(mx), vc = _mm256_set1_ps(c);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dx + j, _mm256_mul_ps(vc, nnt_avx2_exp(_mm256_sub_ps(
                                                       _mm256_loadu_ps(x + j), vmx))));
    if (j < n) {
        __m256i mask = nnt_avx2_tail_mask(n - j);
        __m256 e = nnt_avx2_exp(_mm256_sub_ps(_mm256_maskload_ps(x + j, mask), vmx));
        _mm256_maskstore_ps(dx + j, mask, _mm256_mul_ps(vc, e));
    }
}

static NNT_AVX2 void row_softmax_grad_avx2(int64_t n, float *p, float *ds, float lse, float d)
{
    const __m256 vl = _mm256_set1_ps(lse), vd = _mm256_set1_ps(d);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = nnt_avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(p + j), vl));
        _mm256_storeu_ps(p + j, e);
        _mm256_storeu_ps(ds + j, _mm256_mul_ps(e, _mm256_sub_ps(_mm256_loadu_ps(ds + j), vd)));
    }
    if (j < n) {
        __m256i mask = nnt_avx2_tail_mask(n - j);
        __m256 e = nnt_avx2_exp(_mm256_sub_ps(_mm256_maskload_ps(p + j, mask), vl));
        _mm256_maskstore_ps(p + j, mask, e);
        _mm256_maskstore_ps(ds + j, mask,
                            _mm256_mul_ps(e, _mm256_sub_ps(_mm256_maskload_ps(ds + j, mask), vd)));
    }
}

static NNT_AVX512 void row_softmax_grad_avx512(int64_t n, float *p, float *ds, float lse,
                                               float d)
{
    const __m512 vl = _mm512_set1_ps(lse), vd = _mm512_set1_ps(d);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 e = nnt_avx512_exp(_mm512_sub_ps(_mm512_loadu_ps(p + j), vl));
        _mm512_storeu_ps(p + j, e);
        _mm512_storeu_ps(ds + j, _mm512_mul_ps(e, _mm512_sub_ps(_mm512_loadu_ps(ds + j), vd)));
    }
    if (j < n) {
        const __mmask16 m = nnt_avx512_mask(n - j, 0);
        __m512 e = nnt_avx512_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + j), vl));
        _mm512_mask_storeu_ps(p + j, m, e);
        _mm512_mask_storeu_ps(ds + j, m,
                              _mm512_mul_ps(e, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, ds + j), vd)));
    }
}
#endif

float nnt_cpu_row_max_f32(int64_t n, const float *x)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        return nnt_cpu_avx512() ? row_max_avx512(n, x) : row_max_avx2(n, x);
#endif
    float bm = x[0];
    for (int64_t j = 1; j < n; j++)
        bm = x[j] > bm ? x[j] : bm;
    return bm;
}

float nnt_cpu_row_sumexp_f32(int64_t n, const float *x, float mx)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        return nnt_cpu_avx512() ? row_exp_avx512(n, x, mx, NULL) : row_exp_avx2(n, x, mx, NULL);
#endif
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++)
        sum += expf(x[j] - mx);
    return sum;
}

float nnt_cpu_row_exp_f32(int64_t n, float *x, float mx)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        return nnt_cpu_avx512() ? row_exp_avx512(n, x, mx, x) : row_exp_avx2(n, x, mx, x);
#endif
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        x[j] = expf(x[j] - mx);
        sum += x[j];
    }
    return sum;
}

void nnt_cpu_row_scaled_exp_f32(int64_t n, const float *x, float mx, float c, float *dx)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        row_scaled_exp_avx2(n, x, mx, c, dx);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++)
        dx[j] = c * expf(x[j] - mx);
}

void nnt_cpu_row_softmax_grad_f32(int64_t n, float *p, float *ds, float lse, float d)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        if (nnt_cpu_avx512())
            row_softmax_grad_avx512(n, p, ds, lse, d);
        else
            row_softmax_grad_avx2(n, p, ds, lse, d);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) {
        p[j] = expf(p[j] - lse);
        ds[j] = p[j] * (ds[j] - d);
    }
}
