// SPDX-License-Identifier: MIT
/* Mixture-of-experts kernels: the routing of n tokens over E experts (softmax, top-k as
 * torch.topk selects on CPU, optional renormalisation; one token's in cpu/moe_route.h,
 * shared with the CUDA kernels) and its gradient, the row maps that gather tokens into an
 * expert's rows and scatter its outputs back, and the shared expert's sigmoid gate. */
#include "nnt_cpu.h"
#include "moe_route.h"

#include <math.h>
#include <string.h>

/* ---- routing ------------------------------------------------------------------------------ */

void nnt_cpu_moe_route_f32(int64_t n, int64_t E, int64_t k, int norm, const float *logits,
                           float *probs, int32_t *idx, float *w)
{
    moe_pair q[NNT_MOE_MAX_EXPERTS];
    for (int64_t t = 0; t < n; t++)
        nnt_moe_route_row(E, k, norm, logits + t * E, probs + t * E, idx + t * k, w + t * k, q);
}

void nnt_cpu_moe_route_bwd_f32(int64_t n, int64_t E, int64_t k, int norm, const float *probs,
                               const int32_t *idx, const float *w, const float *dw,
                               const float *aux, float *dlogits)
{
    for (int64_t t = 0; t < n; t++)
        nnt_moe_route_bwd_row(E, k, norm, probs + t * E, idx + t * k, w + t * k, dw + t * k,
                              aux, dlogits + t * E);
}

/* ---- row maps ----------------------------------------------------------------------------- */

void nnt_cpu_moe_gather_f32(int64_t width, int64_t m, const int32_t *map, const float *src,
                            const float *w, int64_t k, float *dst)
{
    for (int64_t r = 0; r < m; r++) {
        const float *s = src + (int64_t)map[3 * r] * width;
        float *d = dst + (int64_t)map[3 * r + 1] * width;
        if (!w) {
            memcpy(d, s, (size_t)width * sizeof *d);
            continue;
        }
        float a = w[(int64_t)map[3 * r] * k + map[3 * r + 2]];
        for (int64_t c = 0; c < width; c++)
            d[c] = a * s[c];
    }
}

void nnt_cpu_moe_scatter_add_f32(int64_t width, int64_t m, const int32_t *map,
                                 const float *src, const float *w, int64_t k, float *dst)
{
    for (int64_t r = 0; r < m; r++) {
        const float *s = src + (int64_t)map[3 * r] * width;
        float *d = dst + (int64_t)map[3 * r + 1] * width;
        float a = w ? w[(int64_t)map[3 * r + 1] * k + map[3 * r + 2]] : 1.0f;
        for (int64_t c = 0; c < width; c++)
            d[c] += a * s[c];
    }
}

void nnt_cpu_moe_weight_grad_f32(int64_t width, int64_t m, const int32_t *map,
                                 const float *dy, const float *y, int64_t k, float *dw)
{
    for (int64_t r = 0; r < m; r++) {
        const float *g = dy + (int64_t)map[3 * r] * width;
        const float *v = y + (int64_t)map[3 * r + 1] * width;
        double dot = 0.0;
        for (int64_t c = 0; c < width; c++)
            dot += (double)g[c] * v[c];
        dw[(int64_t)map[3 * r] * k + map[3 * r + 2]] += (float)dot;
    }
}

/* ---- the shared expert's sigmoid gate ------------------------------------------------------ */

static float sigmoid(float z)
{
    return 1.0f / (1.0f + expf(-z));
}

void nnt_cpu_moe_shared_add_f32(int64_t n, int64_t width, const float *z, const float *s,
                                float *y)
{
    for (int64_t r = 0; r < n; r++) {
        float g = sigmoid(z[r]);
        for (int64_t c = 0; c < width; c++)
            y[r * width + c] += g * s[r * width + c];
    }
}

void nnt_cpu_moe_shared_bwd_f32(int64_t n, int64_t width, int accumulate, const float *z,
                                const float *s, const float *dy, float *ds, float *dz)
{
    for (int64_t r = 0; r < n; r++) {
        float g = sigmoid(z[r]);
        double dot = 0.0;
        for (int64_t c = 0; c < width; c++) {
            ds[r * width + c] = g * dy[r * width + c];
            dot += (double)dy[r * width + c] * s[r * width + c];
        }
        float d = (float)((double)g * (1.0 - (double)g) * dot);
        dz[r] = accumulate ? dz[r] + d : d;
    }
}
