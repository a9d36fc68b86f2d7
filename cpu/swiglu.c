/* nnt CPU kernels: SwiGLU, y = silu(gate) * up, and its gradient, n contiguous elements.
 * No restrict: every output may be one of the inputs (element i is read before it is
 * written), as long as the two outputs of the backward are distinct. */
#include "nnt_cpu.h"

#include <math.h>

/* silu(g) = g sigmoid(g) = g / (1 + exp(-g)); exp(-g) = inf for g << 0 gives -0. */
static inline float silu(float g)
{
    return g / (1.0f + expf(-g));
}

void nnt_cpu_swiglu_fwd_f32(int64_t n, const float *gate, const float *up, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i];
        y[i] = silu(g) * u;
    }
}

/* s = sigmoid(g): silu'(g) = s (1 + g (1 - s)); dgate = dy up silu'(g), dup = dy silu(g). */
void nnt_cpu_swiglu_bwd_f32(int64_t n, const float *gate, const float *up, const float *dy,
                            float *dgate, float *dup)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i], d = dy[i];
        float e = expf(-g);
        float s = 1.0f / (1.0f + e);
        float ds = s * (1.0f + g * (1.0f - s));
        dgate[i] = d * u * ds;
        dup[i] = d * (g / (1.0f + e));
    }
}
