/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: elementwise ops on n contiguous floats (fill, scale, axpby, GELU in its tanh
 * and exact forms). */
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

static inline NNT_AVX2 __m256 gelu_avx2(__m256 x)
{
    return _mm256_mul_ps(x, gelu_sig_avx2(x));
}

/* The AVX2 loops of an activation given its value and gradient on 8 floats: fwd (y = f(x))
 * and bwd (dx = dy f'(x)); tails through masked loads and stores: an element's value never
 * depends on n. */
#define AVX2_ACTIVATION_LOOPS(fwd, bwd, value, grad)                                          \
    static NNT_AVX2 void fwd(int64_t n, const float *x, float *y)                            \
    {                                                                                         \
        int64_t i = 0;                                                                        \
        for (; i + 8 <= n; i += 8)                                                            \
            _mm256_storeu_ps(y + i, value(_mm256_loadu_ps(x + i)));                           \
        if (i < n) {                                                                          \
            __m256i mask = nnt_avx2_tail_mask(n - i);                                         \
            _mm256_maskstore_ps(y + i, mask, value(_mm256_maskload_ps(x + i, mask)));         \
        }                                                                                     \
    }                                                                                         \
    static NNT_AVX2 void bwd(int64_t n, const float *x, const float *dy, float *dx)          \
    {                                                                                         \
        int64_t i = 0;                                                                        \
        for (; i + 8 <= n; i += 8) {                                                          \
            __m256 g = grad(_mm256_loadu_ps(x + i));                                          \
            _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(dy + i), g));              \
        }                                                                                     \
        if (i < n) {                                                                          \
            __m256i mask = nnt_avx2_tail_mask(n - i);                                         \
            __m256 g = grad(_mm256_maskload_ps(x + i, mask));                                 \
            _mm256_maskstore_ps(dx + i, mask,                                                 \
                                _mm256_mul_ps(_mm256_maskload_ps(dy + i, mask), g));          \
        }                                                                                     \
    }

AVX2_ACTIVATION_LOOPS(gelu_fwd_avx2, gelu_bwd_avx2, gelu_avx2, gelu_grad_avx2)
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

/* pre (m, n) += bias (n) broadcast over rows (bias NULL: nothing); out (m, n) = act(pre) row
 * by row */
static void bias_then(int64_t m, int64_t n, const float *restrict bias, float *restrict pre,
                      float *restrict out, void (*act)(int64_t, const float *, float *))
{
    for (int64_t r = 0; r < m; r++) {
        float *restrict p = pre + r * n;
        float *restrict o = out + r * n;
        if (bias)
            for (int64_t j = 0; j < n; j++)
                p[j] += bias[j];
        act(n, p, o);
    }
}

void nnt_cpu_bias_gelu_f32(int64_t m, int64_t n, const float *restrict bias,
                           float *restrict pre, float *restrict out)
{
    bias_then(m, n, bias, pre, out, nnt_cpu_gelu_fwd_f32);
}

/* ---- GELU, exact (erf) form: gelu(x) = x Phi(x), Phi the standard normal CDF ----------------
 * Phi(x) = 0.5 erfc(-x / sqrt 2): the tail q = Phi(-|x|) = 0.5 erfc(|x| / sqrt 2), then
 * Phi = q for x < 0, 1 - q for x >= 0. erfc(z), z >= 0, by the rational Chebyshev
 * approximation of Numerical Recipes (erfcc, fractional error < 1.2e-7 for every z):
 *   erfc(z) ~= t exp(-z^2 + P(t)),  t = 1 / (1 + z / 2),
 *   P(t) = -1.26551223 + t (1.00002368 + t (0.37409196 + ... + t 0.17087277)).
 * With a = |x|, -z^2 = -a^2 / 2 is taken exactly as -(h + l) (h the float product, l its
 * rounding error) and s = (P - l) - h with its own rounding error e (TwoSum), exp(s) (1 + e):
 * the rounding of a^2 / 2 alone would cost up to a^2 / 2 ulp of the tail (3e-6 at x = -10).
 * gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi), exp of the same -(h + l).
 * a is clamped to 16, beyond which q and phi are 0 in float (q(16) ~ 6e-59): gelu(+inf) =
 * +inf, gelu(-inf) = -0, gelu'(+inf) = 1, gelu'(-inf) = 0; NaN gives NaN.
 * Measured against Phi from double erfc at every float x with 2^-40 <= |x| <= 16 (7.4e8),
 * where the reference is above 1e-36: max relative error of gelu 5.5e-7 (portable path, at
 * x = 0.0045) / 4.7e-7 (AVX2), of gelu' relative to its terms |Phi| + |x phi| 5.3e-7 /
 * 4.8e-7; mostly the float Horner sum (2.3e-7 absolute in P near t = 1) and the
 * approximation itself (1.0e-7). Below 1e-36 results go to 0 (the AVX2 exp flushes at
 * -87.3), an absolute error under 1.3e-36. */
#define GELU_ERF_AMAX 16.0f
#define GELU_ERF_HALF_RSQRT2 0.35355339059327376f /* 1 / (2 sqrt 2): t = 1 / (1 + a k) */
#define GELU_ERF_RSQRT_2PI 0.3989422804014327f    /* 1 / sqrt(2 pi) */
#define ERFC_P0 (-1.26551223f)
#define ERFC_P1 1.00002368f
#define ERFC_P2 0.37409196f
#define ERFC_P3 0.09678418f
#define ERFC_P4 (-0.18628806f)
#define ERFC_P5 0.27886807f
#define ERFC_P6 (-1.13520398f)
#define ERFC_P7 1.48851587f
#define ERFC_P8 (-0.82215223f)
#define ERFC_P9 0.17087277f

/* a^2 / 2 == h + l exactly, a a float (the product of two floats is exact in double) */
static inline void half_square(float a, float *h, float *l)
{
    double a2 = 0.5 * ((double)a * a);
    *h = (float)a2;
    *l = (float)(a2 - *h);
}

/* q = 0.5 erfc(a / sqrt 2) for a = |x| clamped (NaN kept), h + l = a^2 / 2 */
static inline float normal_tail(float a, float h, float l)
{
    float t = 1.0f / (1.0f + GELU_ERF_HALF_RSQRT2 * a);
    float p = ERFC_P9;
    p = p * t + ERFC_P8;
    p = p * t + ERFC_P7;
    p = p * t + ERFC_P6;
    p = p * t + ERFC_P5;
    p = p * t + ERFC_P4;
    p = p * t + ERFC_P3;
    p = p * t + ERFC_P2;
    p = p * t + ERFC_P1;
    p = p * t + ERFC_P0;
    /* s + e == (p - l) - h exactly (TwoSum) */
    float c = p - l, s = c - h;
    float b = s - c, e = (c - (s - b)) + (-h - b);
    float w = 0.5f * t * expf(s);
    return w + w * e;
}

/* |x| clamped to GELU_ERF_AMAX (NaN stays NaN) */
static inline float gelu_erf_abs(float x)
{
    float a = fabsf(x);
    return a > GELU_ERF_AMAX ? GELU_ERF_AMAX : a;
}

static inline float gelu_erf(float x)
{
    float a = gelu_erf_abs(x), h, l;
    half_square(a, &h, &l);
    float q = normal_tail(a, h, l);
    float cdf = x < 0.0f ? q : 1.0f - q;
    return (x < -GELU_ERF_AMAX ? -GELU_ERF_AMAX : x) * cdf;   /* -inf: -0, not NaN */
}

static inline float gelu_erf_grad(float x)
{
    float a = gelu_erf_abs(x), h, l;
    half_square(a, &h, &l);
    float q = normal_tail(a, h, l);
    float e = expf(-h);
    float pdf = (e - e * l) * GELU_ERF_RSQRT_2PI;   /* exp(-h - l) ~= exp(-h) (1 - l) */
    float xc = x < 0.0f ? -a : a;                   /* +-inf: +-16, pdf 0 */
    return x < 0.0f ? q + xc * pdf : (1.0f - q) + xc * pdf;
}

#if NNT_CPU_X86
/* The same on 8 floats: a = min(16, |x|) (NaN kept); q, and with pdf != NULL phi(a) */
static inline NNT_AVX2 __m256 normal_tail_avx2(__m256 a, __m256 *pdf)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(GELU_ERF_HALF_RSQRT2), a, one));
    __m256 p = _mm256_set1_ps(ERFC_P9);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERFC_P8));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERFC_P7));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERFC_P6));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERFC_P5));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERFC_P4));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERFC_P3));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERFC_P2));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERFC_P1));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(ERFC_P0));
    __m256 ha = _mm256_mul_ps(_mm256_set1_ps(0.5f), a);
    __m256 h = _mm256_mul_ps(ha, a), l = _mm256_fmsub_ps(ha, a, h);   /* h + l = a^2 / 2 */
    __m256 c = _mm256_sub_ps(p, l), s = _mm256_sub_ps(c, h);
    __m256 b = _mm256_sub_ps(s, c);
    __m256 e = _mm256_add_ps(_mm256_sub_ps(c, _mm256_sub_ps(s, b)),
                             _mm256_sub_ps(_mm256_setzero_ps(), _mm256_add_ps(h, b)));
    __m256 w = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), t), nnt_avx2_exp(s));
    if (pdf) {
        __m256 eh = nnt_avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), h));
        *pdf = _mm256_mul_ps(_mm256_fnmadd_ps(eh, l, eh), _mm256_set1_ps(GELU_ERF_RSQRT_2PI));
    }
    return _mm256_fmadd_ps(w, e, w);
}

static inline NNT_AVX2 __m256 gelu_erf_abs_avx2(__m256 x)
{
    __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    return _mm256_min_ps(_mm256_set1_ps(GELU_ERF_AMAX), a);   /* NaN: the second operand */
}

/* Phi from q: q where x < 0, 1 - q elsewhere */
static inline NNT_AVX2 __m256 normal_cdf_avx2(__m256 x, __m256 q)
{
    __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), q), q, neg);
}

static inline NNT_AVX2 __m256 gelu_erf_avx2(__m256 x)
{
    __m256 q = normal_tail_avx2(gelu_erf_abs_avx2(x), NULL);
    __m256 xm = _mm256_max_ps(_mm256_set1_ps(-GELU_ERF_AMAX), x);   /* -inf: -16; NaN kept */
    return _mm256_mul_ps(xm, normal_cdf_avx2(x, q));
}

static inline NNT_AVX2 __m256 gelu_erf_grad_avx2(__m256 x)
{
    __m256 a = gelu_erf_abs_avx2(x), pdf;
    __m256 q = normal_tail_avx2(a, &pdf);
    __m256 xc = _mm256_or_ps(a, _mm256_and_ps(_mm256_set1_ps(-0.0f), x));   /* sign of x */
    return _mm256_fmadd_ps(xc, pdf, normal_cdf_avx2(x, q));
}

AVX2_ACTIVATION_LOOPS(gelu_erf_fwd_avx2, gelu_erf_bwd_avx2, gelu_erf_avx2, gelu_erf_grad_avx2)
#endif

/* y may alias x, and dx may alias dy or x (in place) */
void nnt_cpu_gelu_erf_fwd_f32(int64_t n, const float *x, float *y)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        gelu_erf_fwd_avx2(n, x, y);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        y[i] = gelu_erf(x[i]);
}

void nnt_cpu_gelu_erf_bwd_f32(int64_t n, const float *x, const float *dy, float *dx)
{
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2) {
        gelu_erf_bwd_avx2(n, x, dy, dx);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * gelu_erf_grad(x[i]);
}

void nnt_cpu_bias_gelu_erf_f32(int64_t m, int64_t n, const float *restrict bias,
                               float *restrict pre, float *restrict out)
{
    bias_then(m, n, bias, pre, out, nnt_cpu_gelu_erf_fwd_f32);
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
