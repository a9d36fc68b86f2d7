/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: rotary position embedding, rotate-half pairs (Hugging Face convention). */
#include "nnt_cpu.h"

#include <math.h>

/* Frequencies handled per pass: their cos and sin are computed once per position and applied
 * to every slab. */
#define ROPE_CHUNK 64

/* The m pairs (xl[i], xh[i]) rotated by the angles of cosines c and sines s into (yl, yh).
 * No restrict: in place is allowed; both values of a pair are read before either is written. */
static inline void rotate(int64_t m, const float *c, const float *s, const float *xl,
                          const float *xh, float *yl, float *yh)
{
    for (int64_t i = 0; i < m; i++) {
        float lo = xl[i], hi = xh[i];
        yl[i] = lo * c[i] - hi * s[i];
        yh[i] = hi * c[i] + lo * s[i];
    }
}

/* Rows r = s * nt + t of nbh slabs of nt positions; pairs (x_lo[r, i], x_hi[r, i]), i < n.
 * The cosines and sines, rounded to float, are multiplied by scale (YaRN's and LongRoPE's
 * attention factor; 1 leaves them as they are). No restrict: y_lo may be x_lo and y_hi x_hi
 * (in place); both values of a pair are read before either is written. */
void nnt_cpu_rope_f32(int64_t nbh, int64_t nt, int64_t n, int64_t pos0, int sign, float scale,
                      const float *inv_freq, const float *x_lo, const float *x_hi, int64_t ldx,
                      float *y_lo, float *y_hi, int64_t ldy)
{
    float c[ROPE_CHUNK], s[ROPE_CHUNK];
    for (int64_t t = 0; t < nt; t++) {
        double pos = (double)(pos0 + t);
        for (int64_t i0 = 0; i0 < n; i0 += ROPE_CHUNK) {
            int64_t m = n - i0 < ROPE_CHUNK ? n - i0 : ROPE_CHUNK;
            for (int64_t i = 0; i < m; i++) {
                double a = pos * (double)inv_freq[i0 + i];
                c[i] = (float)cos(a) * scale;
                s[i] = (float)(sign < 0 ? -sin(a) : sin(a)) * scale;
            }
            for (int64_t b = 0; b < nbh; b++) {
                int64_t r = b * nt + t;
                rotate(m, c, s, x_lo + r * ldx + i0, x_hi + r * ldx + i0, y_lo + r * ldy + i0,
                       y_hi + r * ldy + i0);
            }
        }
    }
}

/* The rows of nb batch rows of nh slabs of nt rows, row (b, h, t) at position pos[b * nt + t]
 * (the same arithmetic as nnt_cpu_rope_f32, position by position). */
void nnt_cpu_rope_pos_f32(int64_t nb, int64_t nh, int64_t nt, int64_t n, const int32_t *pos,
                          int sign, float scale, const float *inv_freq, const float *x_lo,
                          const float *x_hi, int64_t ldx, float *y_lo, float *y_hi, int64_t ldy)
{
    float c[ROPE_CHUNK], s[ROPE_CHUNK];
    for (int64_t b = 0; b < nb; b++)
        for (int64_t t = 0; t < nt; t++) {
            double p = (double)pos[b * nt + t];
            for (int64_t i0 = 0; i0 < n; i0 += ROPE_CHUNK) {
                int64_t m = n - i0 < ROPE_CHUNK ? n - i0 : ROPE_CHUNK;
                for (int64_t i = 0; i < m; i++) {
                    double a = p * (double)inv_freq[i0 + i];
                    c[i] = (float)cos(a) * scale;
                    s[i] = (float)(sign < 0 ? -sin(a) : sin(a)) * scale;
                }
                for (int64_t h = 0; h < nh; h++) {
                    int64_t r = (b * nh + h) * nt + t;
                    rotate(m, c, s, x_lo + r * ldx + i0, x_hi + r * ldx + i0,
                           y_lo + r * ldy + i0, y_hi + r * ldy + i0);
                }
            }
        }
}
