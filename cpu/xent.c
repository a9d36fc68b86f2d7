/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: softmax cross-entropy with the vocabulary split over blocks. */
#include "nnt_cpu.h"

#include <math.h>

/* The running sum of (x - m) over a row's ids [0, v0 + nv) once a block of nv more is
 * added: d, that sum over [0, v0) with the old m, moves to mnew (v0 terms each
 * mnew - m lower) and takes the block's sum(x) - nv mnew (in double: the logits' magnitude
 * cancels, their spread stays). */
static float shifted_sum(double d, int64_t v0, float m, float mnew, int64_t nv, const float *x)
{
    double sum = 0.0;
    for (int64_t j = 0; j < nv; j++)
        sum += x[j];
    double moved = v0 > 0 && m != -INFINITY ? d - (double)v0 * ((double)mnew - m) : 0.0;
    return (float)(moved + (sum - (double)nv * mnew));
}

/* logits (rows, nv; leading dim ld) hold vocabulary ids [v0, v0 + nv).
 * Online logsumexp: m = max(m, block max); s = s exp(m_old - m) + sum exp(x - m).
 * tgt[r] is written only by the block that holds targets[r]; an ignore_index outside
 * every block (e.g. -100) is therefore never looked up. */
void nnt_cpu_xent_fwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, float *m, float *s,
                                float *tgt, float *d)
{
    if (nv <= 0)
        return;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = logits + r * ld;
        float bm = nnt_cpu_row_max_f32(nv, x);
        float mnew = m[r] > bm ? m[r] : bm;
        float sum = nnt_cpu_row_sumexp_f32(nv, x, mnew);
        if (d)
            d[r] = shifted_sum(d[r], v0, m[r], mnew, nv, x);
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

/* Label smoothing's part of a row's gradient dx (nv ids, the target at t when in [0, nv)),
 * from sr (softmax - one-hot): - sr eps / V everywhere and + sr eps at the target. */
static void smooth_row(int64_t nv, int64_t t, float sr, float eps, int64_t vocab, float *dx)
{
    float uniform = sr * eps / (float)vocab;
    for (int64_t j = 0; j < nv; j++)
        dx[j] -= uniform;
    if (t >= 0 && t < nv)
        dx[t] += sr * eps;   /* the one-hot's weight is 1 - eps */
}

/* dlogits (rows, nv; leading dim ld) = scale (softmax - (1 - eps) onehot - eps / V), 0 for
 * ignored rows; each row's smoothing while it is in cache. dlogits may be logits itself (in
 * place). */
void nnt_cpu_xent_bwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, int32_t ignore_index,
                                const float *m, const float *s, const float *w, float scale,
                                float eps, int64_t vocab, float *dlogits)
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
        if (eps > 0.0f)
            smooth_row(nv, t, sr, eps, vocab, dx);
    }
}

/* ---- label smoothing: the uniform part of the target distribution ------------------------- */

void nnt_cpu_xent_smooth_loss_f32(int64_t rows, const int32_t *targets, int32_t ignore_index,
                                  float eps, int64_t vocab, const float *s, const float *d,
                                  float *loss)
{
    for (int64_t r = 0; r < rows; r++) {
        if (targets[r] == ignore_index)
            continue;   /* 0 already */
        /* lse - mean(x) = (m + log s) - (m + d / V), the mean over v of -log p_v */
        float uniform = logf(s[r]) - d[r] / (float)vocab;
        loss[r] = (1.0f - eps) * loss[r] + eps * uniform;
    }
}
