/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: elementwise ops on n contiguous floats (fill, scale, axpby, GELU). */
#include "nnt_cpu.h"

#include <math.h>
#include <string.h>

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f

/* +0.0 (all bytes zero, the common case: accumulators started) through memset, which
 * writes whole cache lines faster than the store loop (64 KiB from memory: 2.1 us against 2.6
 * for the loop as the build vectorises it, 4.6 scalar; AMD Zen 5). */
void nnt_cpu_fill_f32(int64_t n, float value, float *restrict x)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if (bits == 0 && n > 0) {
        memset(x, 0, (size_t)n * sizeof *x);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        x[i] = value;
}

void nnt_cpu_fill_i32(int64_t n, int32_t value, int32_t *restrict x)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = value;
}

void nnt_cpu_fill_u16(int64_t n, uint16_t value, uint16_t *restrict x)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = value;
}

void nnt_cpu_scale_f32(int64_t n, float alpha, float *restrict x)
{
    for (int64_t i = 0; i < n; i++)
        x[i] *= alpha;
}

void nnt_cpu_axpby_f32(int64_t n, float alpha, const float *restrict x, float beta,
                       float *restrict y)
{
    if (beta == 0.0f) { /* y is not read: NaN in y is overwritten */
        for (int64_t i = 0; i < n; i++)
            y[i] = alpha * x[i];
    } else if (beta == 1.0f) {
        for (int64_t i = 0; i < n; i++)
            y[i] += alpha * x[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = alpha * x[i] + beta * y[i];
    }
}

/* The same operations into a third array; in place (z == y) through axpby, whose restrict
 * loops need no overlap check. */
void nnt_cpu_axpbyz_f32(int64_t n, float alpha, const float *restrict x, float beta,
                        const float *y, float *z)
{
    if (z == y) {
        nnt_cpu_axpby_f32(n, alpha, x, beta, z);
        return;
    }
    const float *restrict yr = y;
    float *restrict zr = z;
    if (beta == 0.0f) {
        for (int64_t i = 0; i < n; i++)
            zr[i] = alpha * x[i];
    } else if (beta == 1.0f) {
        for (int64_t i = 0; i < n; i++)
            zr[i] = yr[i] + alpha * x[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            zr[i] = alpha * x[i] + beta * yr[i];
    }
}

/* 0.5 (1 + tanh(u)) == sigmoid(2u): gelu(x) = x sigmoid(2u), u = k0 (x + k1 x^3).
 * The sigmoid form keeps full relative accuracy where 1 + tanh(u) would cancel (x << 0). */
static inline float gelu_sig(float x)
{
    float u = GELU_K0 * x * (1.0f + GELU_K1 * x * x);
    return 1.0f / (1.0f + expf(-2.0f * u));
}

static inline float gelu(float x)
{
    return x * gelu_sig(x);
}

/* gelu'(x) = sig + 2 x sig (1 - sig) u'(x),  u' = k0 (1 + 3 k1 x^2)
 * (the same as 0.5 (1 + t) + 0.5 x (1 - t^2) u' with t = tanh(u)) */
static inline float gelu_grad(float x)
{
    float sig = gelu_sig(x);
    float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * x * x);
    return sig + 2.0f * x * sig * (1.0f - sig) * du;
}

#if NNT_CPU_X86
#include "simd_avx2.h"

/* gelu_sig of 8 floats, the same formula as the scalar one (the AVX2 exp: a few ulp) */
static inline NNT_AVX2 __m256 gelu_sig_avx2(__m256 x)
{
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_K0), x),
                             _mm256_fmadd_ps(_mm256_set1_ps(GELU_K1), x2, _mm256_set1_ps(1.0f)));
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = nnt_avx2_exp(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
    return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

static inline NNT_AVX2 __m256 gelu_grad_avx2(__m256 x)
{
    __m256 sig = gelu_sig_avx2(x), one = _mm256_set1_ps(1.0f);
    __m256 du = _mm256_mul_ps(_mm256_set1_ps(GELU_K0),
                              _mm256_fmadd_ps(_mm256_set1_ps(3.0f * GELU_K1),
                                              _mm256_mul_ps(x, x), one));
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f), x), sig);
    t = _mm256_mul_ps(_mm256_mul_ps(t, _mm256_sub_ps(one, sig)), du);
    return _mm256_add_ps(sig, t);
}

/* tails through masked loads and stores: an element's value never depends on n */
static NNT_AVX2 void gelu_fwd_avx2(int64_t n, const float *x, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(v, gelu_sig_avx2(v)));
    }
    if (i < n) {
        __m256i mask = nnt_avx2_tail_mask(n - i);
        __m256 v = _mm256_maskload_ps(x + i, mask);
        _mm256_maskstore_ps(y + i, mask, _mm256_mul_ps(v, gelu_sig_avx2(v)));
    }
}

static NNT_AVX2 void gelu_bwd_avx2(int64_t n, const float *x, const float *dy, float *dx)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = gelu_grad_avx2(_mm256_loadu_ps(x + i));
        _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(dy + i), g));
    }
    if (i < n) {
        __m256i mask = nnt_avx2_tail_mask(n - i);
        __m256 g = gelu_grad_avx2(_mm256_maskload_ps(x + i, mask));
        _mm256_maskstore_ps(dx + i, mask, _mm256_mul_ps(_mm256_maskload_ps(dy + i, mask), g));
    }
}
#endif

/* y may alias x, and dx may alias dy or x (in place) */
void nnt_cpu_gelu_fwd_f32(int64_t n, const float *x, float *y)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        gelu_fwd_avx2(n, x, y);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        y[i] = gelu(x[i]);
}

void nnt_cpu_gelu_bwd_f32(int64_t n, const float *x, const float *dy, float *dx)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        gelu_bwd_avx2(n, x, dy, dx);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * gelu_grad(x[i]);
}

/* pre (m, n) += bias (n) broadcast over rows; out (m, n) = gelu(pre) */
void nnt_cpu_bias_gelu_f32(int64_t m, int64_t n, const float *restrict bias,
                           float *restrict pre, float *restrict out)
{
    for (int64_t r = 0; r < m; r++) {
        float *restrict p = pre + r * n;
        float *restrict o = out + r * n;
        if (bias)
            for (int64_t j = 0; j < n; j++)
                p[j] += bias[j];
        nnt_cpu_gelu_fwd_f32(n, p, o);
    }
}

/* ---- GeGLU and soft-capping (Gemma) -------------------------------------------------------- */

void nnt_cpu_geglu_fwd_f32(int64_t n, const float *gate, const float *up, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i];
        y[i] = gelu(g) * u;
    }
}

void nnt_cpu_geglu_bwd_f32(int64_t n, const float *gate, const float *up, const float *dy,
                           float *dgate, float *dup)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i], d = dy[i];
        dgate[i] = d * u * gelu_grad(g);
        dup[i] = d * gelu(g);
    }
}

void nnt_cpu_softcap_fwd_f32(int64_t n, float cap, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = tanhf(x[i] / cap) * cap;
}

void nnt_cpu_softcap_bwd_f32(int64_t n, float cap, const float *x, const float *dy, float *dx)
{
    for (int64_t i = 0; i < n; i++) {
        float t = tanhf(x[i] / cap);
        dx[i] = dy[i] * (1.0f - t * t);
    }
}
