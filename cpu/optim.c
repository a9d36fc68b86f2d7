/* nnt CPU kernels: optimizer steps (Adam, AdamW, SGD with momentum), PyTorch semantics. */
#include "nnt_cpu.h"

#include <math.h>

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
    for (int64_t i = 0; i < n; i++) {
        float gi = grad_scale * g[i] + l2 * p[i];
        float pi = p[i] * decay;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
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
