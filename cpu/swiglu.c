/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: SwiGLU, y = silu(gate) * up, and its gradient, n contiguous elements;
 * gpt-oss's clamped SwiGLU, y = gc sigmoid(alpha gc) (uc + 1) with gc = min(gate, limit),
 * uc = clamp(up, -limit, limit), and its gradient.
 * No restrict: every output may be one of the inputs (element i is read before it is
 * written), as long as the two outputs of the backward are distinct. */
#include "nnt_cpu.h"

#include <math.h>

/* silu(g) = g sigmoid(g) = g / (1 + exp(-g)); exp(-g) = inf for g << 0 gives -0. */
static inline float silu(float g)
{
    return g / (1.0f + expf(-g));
}

#if NNT_CPU_X86
#include "simd_avx2.h"

/* 8 elements at a time, the tail through masked loads and stores (an element's value never
 * depends on n); every input of a group is loaded before its outputs are stored, so the
 * aliasing the portable loops allow holds here too. */
static inline NNT_AVX2 __m256 silu_avx2(__m256 g)
{
    __m256 e = nnt_avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static NNT_AVX2 void swiglu_fwd_avx2(int64_t n, const float *gate, const float *up, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu_avx2(g), u));
    }
    if (i < n) {
        __m256i mask = nnt_avx2_tail_mask(n - i);
        __m256 g = _mm256_maskload_ps(gate + i, mask), u = _mm256_maskload_ps(up + i, mask);
        _mm256_maskstore_ps(y + i, mask, _mm256_mul_ps(silu_avx2(g), u));
    }
}

static inline NNT_AVX2 void swiglu_bwd8_avx2(__m256 g, __m256 u, __m256 d, __m256 *dg,
                                             __m256 *du)
{
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 e1 = _mm256_add_ps(one, nnt_avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), g)));
    __m256 s = _mm256_div_ps(one, e1);
    __m256 ds = _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, s))));
    *dg = _mm256_mul_ps(_mm256_mul_ps(d, u), ds);
    *du = _mm256_mul_ps(d, _mm256_div_ps(g, e1));
}

static NNT_AVX2 void swiglu_bwd_avx2(int64_t n, const float *gate, const float *up,
                                     const float *dy, float *dgate, float *dup)
{
    __m256 dg, du;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        swiglu_bwd8_avx2(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i),
                         _mm256_loadu_ps(dy + i), &dg, &du);
        _mm256_storeu_ps(dgate + i, dg);
        _mm256_storeu_ps(dup + i, du);
    }
    if (i < n) {
        __m256i mask = nnt_avx2_tail_mask(n - i);
        swiglu_bwd8_avx2(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask),
                         _mm256_maskload_ps(dy + i, mask), &dg, &du);
        _mm256_maskstore_ps(dgate + i, mask, dg);
        _mm256_maskstore_ps(dup + i, mask, du);
    }
}

/* The clamped SwiGLU, 8 elements: the clamps as the portable loops take them (a NaN gate
 * or up stays NaN: _mm256_min_ps(a, b) is b unless a < b), every product rounded as there. */
static inline NNT_AVX2 void clamp8_avx2(__m256 g, __m256 u, __m256 alpha, __m256 limit,
                                        __m256 *gc, __m256 *u1, __m256 *s, __m256 *a)
{
    __m256 one = _mm256_set1_ps(1.0f);
    *gc = _mm256_min_ps(limit, g);
    __m256 uc = _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), limit),
                              _mm256_min_ps(limit, u));
    *u1 = _mm256_add_ps(uc, one);
    *a = _mm256_mul_ps(alpha, *gc);
    __m256 e = nnt_avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), *a));
    *s = _mm256_div_ps(one, _mm256_add_ps(one, e));
}

static NNT_AVX2 void swiglu_clamp_fwd_avx2(int64_t n, float alpha, float limit,
                                           const float *gate, const float *up, float *y)
{
    __m256 al = _mm256_set1_ps(alpha), li = _mm256_set1_ps(limit), gc, u1, s, a;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        clamp8_avx2(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), al, li, &gc, &u1, &s,
                    &a);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(gc, s), u1));
    }
    if (i < n) {
        __m256i mask = nnt_avx2_tail_mask(n - i);
        clamp8_avx2(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask), al,
                    li, &gc, &u1, &s, &a);
        _mm256_maskstore_ps(y + i, mask, _mm256_mul_ps(_mm256_mul_ps(gc, s), u1));
    }
}

static inline NNT_AVX2 void swiglu_clamp_bwd8_avx2(__m256 g, __m256 u, __m256 d, __m256 alpha,
                                                   __m256 limit, __m256 *dg, __m256 *du)
{
    __m256 one = _mm256_set1_ps(1.0f), gc, u1, s, a;
    clamp8_avx2(g, u, alpha, limit, &gc, &u1, &s, &a);
    __m256 ds = _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(a, _mm256_sub_ps(one, s))));
    __m256 gin = _mm256_cmp_ps(g, limit, _CMP_LT_OQ);
    __m256 uin = _mm256_and_ps(_mm256_cmp_ps(u, limit, _CMP_LT_OQ),
                               _mm256_cmp_ps(_mm256_sub_ps(_mm256_setzero_ps(), limit), u,
                                             _CMP_LT_OQ));
    *dg = _mm256_and_ps(gin, _mm256_mul_ps(_mm256_mul_ps(d, u1), ds));
    *du = _mm256_and_ps(uin, _mm256_mul_ps(d, _mm256_mul_ps(gc, s)));
}

static NNT_AVX2 void swiglu_clamp_bwd_avx2(int64_t n, float alpha, float limit,
                                           const float *gate, const float *up, const float *dy,
                                           float *dgate, float *dup)
{
    __m256 al = _mm256_set1_ps(alpha), li = _mm256_set1_ps(limit), dg, du;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        swiglu_clamp_bwd8_avx2(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i),
                               _mm256_loadu_ps(dy + i), al, li, &dg, &du);
        _mm256_storeu_ps(dgate + i, dg);
        _mm256_storeu_ps(dup + i, du);
    }
    if (i < n) {
        __m256i mask = nnt_avx2_tail_mask(n - i);
        swiglu_clamp_bwd8_avx2(_mm256_maskload_ps(gate + i, mask),
                               _mm256_maskload_ps(up + i, mask),
                               _mm256_maskload_ps(dy + i, mask), al, li, &dg, &du);
        _mm256_maskstore_ps(dgate + i, mask, dg);
        _mm256_maskstore_ps(dup + i, mask, du);
    }
}
#endif

void nnt_cpu_swiglu_fwd_f32(int64_t n, const float *gate, const float *up, float *y)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        swiglu_fwd_avx2(n, gate, up, y);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i];
        y[i] = silu(g) * u;
    }
}

/* s = sigmoid(g): silu'(g) = s (1 + g (1 - s)); dgate = dy up silu'(g), dup = dy silu(g). */
void nnt_cpu_swiglu_bwd_f32(int64_t n, const float *gate, const float *up, const float *dy,
                            float *dgate, float *dup)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        swiglu_bwd_avx2(n, gate, up, dy, dgate, dup);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i], d = dy[i];
        float e = expf(-g);
        float s = 1.0f / (1.0f + e);
        float ds = s * (1.0f + g * (1.0f - s));
        dgate[i] = d * u * ds;
        dup[i] = d * (g / (1.0f + e));
    }
}

/* gpt-oss's clamps: gc = min(g, limit), uc = clamp(u, -limit, limit), written so that a NaN
 * stays NaN (as torch.clamp keeps it). */
static inline float clamp_gate(float g, float limit)
{
    return g > limit ? limit : g;
}

static inline float clamp_up(float u, float limit)
{
    float m = u > limit ? limit : u;
    return m < -limit ? -limit : m;
}

void nnt_cpu_swiglu_clamp_fwd_f32(int64_t n, float alpha, float limit, const float *gate,
                                  const float *up, float *y)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        swiglu_clamp_fwd_avx2(n, alpha, limit, gate, up, y);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) {
        float gc = clamp_gate(gate[i], limit), u1 = clamp_up(up[i], limit) + 1.0f;
        float s = 1.0f / (1.0f + expf(-(alpha * gc)));
        y[i] = gc * s * u1;
    }
}

/* a = alpha gc, s = sigmoid(a): d/dgc [gc s] = s (1 + a (1 - s)). The gradient passes the
 * clamps where torch.clamp passes it: strictly inside (g < limit; -limit < u < limit), 0 at
 * the limits themselves as beyond them. */
void nnt_cpu_swiglu_clamp_bwd_f32(int64_t n, float alpha, float limit, const float *gate,
                                  const float *up, const float *dy, float *dgate, float *dup)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        swiglu_clamp_bwd_avx2(n, alpha, limit, gate, up, dy, dgate, dup);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i], d = dy[i];
        float gc = clamp_gate(g, limit), u1 = clamp_up(u, limit) + 1.0f;
        float a = alpha * gc;
        float s = 1.0f / (1.0f + expf(-a));
        float ds = s * (1.0f + a * (1.0f - s));
        dgate[i] = g < limit ? d * u1 * ds : 0.0f;
        dup[i] = -limit < u && u < limit ? d * (gc * s) : 0.0f;
    }
}
