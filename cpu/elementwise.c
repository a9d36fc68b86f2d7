/* nnt CPU kernels: elementwise ops on n contiguous floats (fill, scale, axpby, GELU). */
#include "nnt_cpu.h"

#include <math.h>

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f

void nnt_cpu_fill_f32(int64_t n, float value, float *restrict x)
{
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

/* y may alias x, and dx may alias dy or x (in place) */
void nnt_cpu_gelu_fwd_f32(int64_t n, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = gelu(x[i]);
}

void nnt_cpu_gelu_bwd_f32(int64_t n, const float *x, const float *dy, float *dx)
{
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
        for (int64_t j = 0; j < n; j++)
            o[j] = gelu(p[j]);
    }
}
