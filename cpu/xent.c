/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: softmax cross-entropy with the vocabulary split over blocks. */
#include "nnt_cpu.h"

#include <math.h>

/* logits (rows, nv; leading dim ld) hold vocabulary ids [v0, v0 + nv).
 * Online logsumexp: m = max(m, block max); s = s exp(m_old - m) + sum exp(x - m).
 * tgt[r] is written only by the block that holds targets[r]; an ignore_index outside
 * every block (e.g. -100) is therefore never looked up. */
void nnt_cpu_xent_fwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, float *m, float *s,
                                float *tgt)
{
    if (nv <= 0)
        return;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = logits + r * ld;
        float bm = nnt_cpu_row_max_f32(nv, x);
        float mnew = m[r] > bm ? m[r] : bm;
        float sum = nnt_cpu_row_sumexp_f32(nv, x, mnew);
        s[r] = s[r] * expf(m[r] - mnew) + sum;
        m[r] = mnew;
        int64_t t = (int64_t)targets[r] - v0;
        if (t >= 0 && t < nv)
            tgt[r] = x[t];
    }
}

void nnt_cpu_xent_loss_f32(int64_t rows, const int32_t *targets, int32_t ignore_index,
                           const float *m, const float *s, const float *tgt, float *loss,
                           float *lse)
{
    for (int64_t r = 0; r < rows; r++) {
        float log_s = logf(s[r]);
        loss[r] = targets[r] == ignore_index ? 0.0f : (m[r] - tgt[r]) + log_s;
        if (lse)
            lse[r] = m[r] + log_s;
    }
}

/* dlogits (rows, nv; leading dim ld) = scale (softmax - onehot), 0 for ignored rows.
 * dlogits may be logits itself (in place). */
void nnt_cpu_xent_bwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, int32_t ignore_index,
                                const float *m, const float *s, const float *w, float scale,
                                float *dlogits)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *x = logits + r * ld;
        float *dx = dlogits + r * ld;
        if (targets[r] == ignore_index) {
            for (int64_t j = 0; j < nv; j++)
                dx[j] = 0.0f;
            continue;
        }
        float sr = w ? scale * w[r] : scale;   /* this row's factor */
        float mr = m[r], c = sr / s[r];
        nnt_cpu_row_scaled_exp_f32(nv, x, mr, c, dx);
        int64_t t = (int64_t)targets[r] - v0;
        if (t >= 0 && t < nv)
            dx[t] -= sr;
    }
}
