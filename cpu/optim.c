/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: optimizer steps (Adam, AdamW, SGD with momentum), PyTorch semantics. */
#include "nnt_cpu.h"

#include <math.h>

#if NNT_CPU_X86
#include "simd_avx2.h"

/* The portable loop's operations in the same order, without FMA contraction, 8 at a time:
 * sqrt and division are correctly rounded in both, so the results are the same bits.
 * Returns how many elements it did (a multiple of 8); the caller does the rest. */
static NNT_AVX2 int64_t adam_avx2(int64_t n, float step, float inv_sqrt_bc2, float decay,
                                  float l2, float beta1, float beta2, float eps,
                                  float grad_scale, const float *restrict g, float *restrict p,
                                  float *restrict m, float *restrict v)
{
    const __m256 vstep = _mm256_set1_ps(step), visb = _mm256_set1_ps(inv_sqrt_bc2);
    const __m256 vdecay = _mm256_set1_ps(decay), vl2 = _mm256_set1_ps(l2);
    const __m256 vb1 = _mm256_set1_ps(beta1), vb1c = _mm256_set1_ps(1.0f - beta1);
    const __m256 vb2 = _mm256_set1_ps(beta2), vb2c = _mm256_set1_ps(1.0f - beta2);
    const __m256 veps = _mm256_set1_ps(eps), vgs = _mm256_set1_ps(grad_scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 pi = _mm256_loadu_ps(p + i);
        __m256 gi = _mm256_add_ps(_mm256_mul_ps(vgs, _mm256_loadu_ps(g + i)),
                                  _mm256_mul_ps(vl2, pi));
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)),
                                  _mm256_mul_ps(vb1c, gi));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)),
                                  _mm256_mul_ps(_mm256_mul_ps(vb2c, gi), gi));
        __m256 den = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), visb), veps);
        __m256 upd = _mm256_div_ps(_mm256_mul_ps(vstep, mi), den);
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        _mm256_storeu_ps(p + i, _mm256_sub_ps(_mm256_mul_ps(pi, vdecay), upd));
    }
    return i;
}
#endif

/* g, p, m, v: (n). Bias corrections bc1, bc2 come from the caller. As in PyTorch:
 *   denom = sqrt(v) / sqrt(bc2) + eps;  p -= (lr / bc1) m / denom. */
void nnt_cpu_adam_step_f32(int64_t n, int decoupled, float lr, float beta1, float beta2,
                           float eps, float weight_decay, float bc1, float bc2, float grad_scale,
                           const float *restrict g, float *restrict p, float *restrict m,
                           float *restrict v)
{
    float step = lr / bc1;
    float inv_sqrt_bc2 = 1.0f / sqrtf(bc2);
    float decay = decoupled ? 1.0f - lr * weight_decay : 1.0f; /* AdamW: p *= 1 - lr wd */
    float l2 = decoupled ? 0.0f : weight_decay;                 /* Adam: g += wd p */
    int64_t i = 0;
#if NNT_CPU_X86
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        i = adam_avx2(n, step, inv_sqrt_bc2, decay, l2, beta1, beta2, eps, grad_scale, g, p, m,
                      v);
#endif
    for (; i < n; i++) {
        float gi = grad_scale * g[i] + l2 * p[i];
        float pi = p[i] * decay;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

/* Blocks of 16 KiB of p: the update leaves them in the first-level cache for the rounding */
#define ADAM_BF16_BLOCK 4096

void nnt_cpu_adam_step_f32_bf16(int64_t n, int decoupled, float lr, float beta1, float beta2,
                                float eps, float weight_decay, float bc1, float bc2,
                                float grad_scale, const float *restrict g, float *restrict p,
                                float *restrict m, float *restrict v, uint16_t *restrict p16)
{
    for (int64_t i = 0; i < n; i += ADAM_BF16_BLOCK) {
        int64_t len = n - i < ADAM_BF16_BLOCK ? n - i : ADAM_BF16_BLOCK;
        nnt_cpu_adam_step_f32(len, decoupled, lr, beta1, beta2, eps, weight_decay, bc1, bc2,
                              grad_scale, g + i, p + i, m + i, v + i);
        nnt_cpu_f32_to_bf16(len, p + i, p16 + i);
    }
}

/* g' = grad_scale g + wd p;  buf = first_step ? g' : momentum buf + g';  p -= lr buf.
 * buf may be NULL when momentum == 0 (plain SGD: p -= lr g'). */
void nnt_cpu_sgd_step_f32(int64_t n, float lr, float momentum, float weight_decay,
                          float grad_scale, int first_step, const float *restrict g,
                          float *restrict p, float *restrict buf)
{
    if (!buf) {
        for (int64_t i = 0; i < n; i++)
            p[i] -= lr * (grad_scale * g[i] + weight_decay * p[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float gi = grad_scale * g[i] + weight_decay * p[i];
        float bi = first_step ? gi : momentum * buf[i] + gi; /* buf not read on step 1 */
        buf[i] = bi;
        p[i] -= lr * bi;
    }
}
