/* SPDX-License-Identifier: MIT */
/* Rotary position embedding (Hugging Face's rotate-half convention) on tiled tensors of the
 * attention layout (B, NH, T, hd), and its gradient (the transposed rotation).
 *
 * The first r entries of each head vector rotate (r: hd, or the partial rotary factor's
 * part), the others pass. The frequency table inv_freq (r/2) is computed on the host once
 * per call, as Hugging Face computes it in float32 (with its scalings: llama3, linear, yarn,
 * longrope's short or long factors), and each task gets the slice it needs in its argument
 * block, with the attention factor (yarn, longrope) that multiplies the cosines and sines.
 * The kernels take the angle, its cosine and sine in double. Tiling: hd whole (one task per
 * tile) or in tiles of a divisor w of r/2 (one task per pair of tiles j and j + r/(2w),
 * which hold the two halves of the same pairs); any B, NH, T tiling. Every element is
 * computed the same way whatever the tiling, so results are bit-identical across tilings. */
#include "../internal.h"

#include <math.h>
#include <stdlib.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- options and the frequency table -------------------------------------------------------- */

/* YaRN's own fields (factor and original_max_position checked with llama3's) */
static int yarn_check(const char *fn, const nnt_rope_options *o)
{
    int rc;
    if ((rc = nnt_check_range(fn, "beta_fast", o->beta_fast, 0, 1, INFINITY, 0)) ||
        (rc = nnt_check_range(fn, "beta_slow", o->beta_slow, 0, 1, INFINITY, 0)) ||
        (rc = nnt_check_range(fn, "attention_factor", o->attention_factor, 0, 0, INFINITY, 0)))
        return rc;
    if (o->truncate != 0 && o->truncate != 1)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: truncate %d must be 0 or 1", fn, o->truncate);
    return NNT_OK;
}

/* Llama 3.1's own fields: 0 < low_freq_factor < high_freq_factor */
static int llama3_check(const char *fn, const nnt_rope_options *o)
{
    int rc;
    if ((rc = nnt_check_range(fn, "low_freq_factor", o->low_freq_factor, 0, 1, INFINITY, 0)) ||
        (rc = nnt_check_range(fn, "high_freq_factor", o->high_freq_factor, 0, 1, INFINITY, 0)))
        return rc;
    if (!(o->high_freq_factor > o->low_freq_factor))
        return nnt_fail(NULL, NNT_E_INVAL, "%s: high_freq_factor %g must be larger than "
                        "low_freq_factor %g", fn, o->high_freq_factor, o->low_freq_factor);
    return NNT_OK;
}

/* LongRoPE's own fields: nfactors in [1, NNT_ROPE_MAX_FACTORS], every factor > 0 (their
 * count against the head vectors is the op's and the model's check) */
static int longrope_check(const char *fn, const nnt_rope_options *o)
{
    if (o->nfactors < 1 || o->nfactors > NNT_ROPE_MAX_FACTORS)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: nfactors %lld must be in [1, %d]", fn,
                        (long long)o->nfactors, NNT_ROPE_MAX_FACTORS);
    for (int64_t i = 0; i < o->nfactors; i++)
        if (!(o->short_factor[i] > 0.0f) || !(o->long_factor[i] > 0.0f) ||
            isinf(o->short_factor[i]) || isinf(o->long_factor[i]))
            return nnt_fail(NULL, NNT_E_INVAL, "%s: short_factor[%lld] %g and long_factor[%lld] "
                            "%g must be finite and > 0", fn, (long long)i,
                            (double)o->short_factor[i], (long long)i,
                            (double)o->long_factor[i]);
    if (o->attention_factor == 0.0 && o->factor > 1.0 && o->original_max_position < 2)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: longrope's default attention factor divides by "
                        "ln(original_max_position %lld): give attention_factor", fn,
                        (long long)o->original_max_position);
    return nnt_check_range(fn, "attention_factor", o->attention_factor, 0, 0, INFINITY, 0);
}

double nnt_rope_attention_factor(const nnt_rope_options *o)
{
    if (!o || (o->scaling != NNT_ROPE_SCALING_YARN && o->scaling != NNT_ROPE_SCALING_LONGROPE))
        return 1.0;
    if (o->attention_factor > 0.0)
        return o->attention_factor;
    if (o->factor <= 1.0)
        return 1.0;
    if (o->scaling == NNT_ROPE_SCALING_LONGROPE)
        return sqrt(1.0 + log(o->factor) / log((double)o->original_max_position));
    return 0.1 * log(o->factor) + 1.0;
}

int64_t nnt_rope_rotary_dim(const nnt_rope_options *o, int64_t hd)
{
    double f = o ? o->partial_rotary_factor : 1.0;
    return f == 0.0 || f == 1.0 ? hd : (int64_t)((double)hd * f);
}

/* base^(2i / hd) with the exponent in float32, the power taken in double and rounded to
 * float32 (torch's float pow may differ by an ulp) */
static float rope_power(double base, int64_t i, int64_t hd)
{
    float e = (float)(2 * i) / (float)hd;
    return (float)pow(base, (double)e);
}

/* YaRN's correction dimension: the frequency index at which a wavelength spans `rotations`
 * turns over the original context (transformers' find_correction_dim, in double). */
static double yarn_dim(double rotations, int64_t hd, double base, int64_t orig)
{
    return (double)hd * log((double)orig / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

/* YaRN's frequencies (transformers' _compute_yarn_parameters, float32 tensors): ramp r_i =
 * clamp((i - low) / (high - low), 0, 1) between the correction dimensions of beta_fast and
 * beta_slow (rounded out with truncate, clamped to [0, hd - 1]); extrapolation weight
 * e = 1 - r; inv = inv0 / factor * (1 - e) + inv0 * e, inv0 = 1 / base^(2i/hd). */
static void yarn_table(const nnt_rope_options *o, int64_t hd, double base, float *inv)
{
    double low = yarn_dim(o->beta_fast, hd, o->theta, o->original_max_position);
    double high = yarn_dim(o->beta_slow, hd, o->theta, o->original_max_position);
    if (o->truncate)
        low = floor(low), high = ceil(high);
    low = fmax(low, 0.0), high = fmin(high, (double)(hd - 1));
    if (low == high)
        high += 0.001;   /* transformers' guard against a zero-width ramp */
    const float flow = (float)low, span = (float)(high - low), factor = (float)o->factor;
    for (int64_t i = 0; i < hd / 2; i++) {
        float pos_freq = rope_power(base, i, hd);
        float extrapolated = 1.0f / pos_freq, interpolated = 1.0f / (factor * pos_freq);
        float ramp = ((float)i - flow) / span;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        float weight = 1.0f - ramp;   /* of the extrapolated frequency */
        inv[i] = interpolated * (1.0f - weight) + extrapolated * weight;
    }
}

int nnt_rope_options_read(const char *fn, const nnt_rope_options *user, nnt_rope_options *o)
{
    static const nnt_rope_options defaults = NNT_ROPE_OPTIONS_INIT;
    int rc = nnt_read_options(fn, user, &defaults, o, sizeof *o, 0,
                              "initialise them with NNT_ROPE_OPTIONS_INIT");
    if (rc == 0)
        rc = nnt_check_reserved(NULL, fn, "rope reserved", o->reserved,
                                sizeof o->reserved / sizeof o->reserved[0]);
    if (rc == 0)
        rc = nnt_check_range(fn, "theta", o->theta, 0, 1, INFINITY, 0);
    if (rc == 0 && (o->scaling < NNT_ROPE_SCALING_NONE || o->scaling > NNT_ROPE_SCALING_LONGROPE))
        rc = nnt_fail(NULL, NNT_E_INVAL, "%s: scaling %d is none of NNT_ROPE_SCALING_NONE, "
                      "_LLAMA3, _LINEAR, _YARN and _LONGROPE", fn, o->scaling);
    if (rc == 0 && o->partial_rotary_factor != 0.0)
        rc = nnt_check_range(fn, "partial_rotary_factor", o->partial_rotary_factor, 0, 1, 1.0,
                             1);
    /* every scaling has a factor; llama3, yarn and longrope an original context too */
    if (rc || o->scaling == NNT_ROPE_SCALING_NONE)
        return rc;
    rc = nnt_check_range(fn, "factor", o->factor, 0, 1, INFINITY, 0);
    if (rc || o->scaling == NNT_ROPE_SCALING_LINEAR)
        return rc;
    if (o->original_max_position <= 0)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: original_max_position %lld must be > 0", fn,
                        (long long)o->original_max_position);
    if (o->scaling == NNT_ROPE_SCALING_LONGROPE)
        return longrope_check(fn, o);
    return o->scaling == NNT_ROPE_SCALING_YARN ? yarn_check(fn, o) : llama3_check(fn, o);
}

int nnt_rope_check_head(const char *fn, const nnt_rope_options *o, int64_t hd)
{
    int64_t r = nnt_rope_rotary_dim(o, hd);
    if (r < 2 || r % 2)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: the rotary dimension (int)(%lld x "
                        "partial_rotary_factor %g) = %lld must be even and >= 2", fn,
                        (long long)hd, o->partial_rotary_factor, (long long)r);
    if (o->scaling == NNT_ROPE_SCALING_LONGROPE && o->nfactors != r / 2)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: longrope has %lld factors; the rotary dimension "
                        "%lld needs %lld", fn, (long long)o->nfactors, (long long)r,
                        (long long)(r / 2));
    return NNT_OK;
}

/* inv[i], i < hd/2 (hd: the rotary dimension), with Hugging Face's float32 operations
 * (transformers' _compute_default_rope_parameters, _compute_linear_scaling_rope_parameters,
 * _compute_llama3_parameters and _compute_longrope_parameters, the long factors where
 * use_long):
 *   inv = 1 / base ** (float(2i) / hd)
 * and with linear scaling inv / factor (positions divided by the factor), and
 * and with llama3 scaling, wavelen = 2 pi / inv (torch: reciprocal(inv) * 2 pi):
 *   wavelen > orig / low:   inv / factor                          (low frequencies)
 *   wavelen < orig / high:  inv                                   (high frequencies)
 *   otherwise:              (1 - s) inv / factor + s inv,  s = (orig / wavelen - low) / (high - low)
 * and with longrope 1 / (f[i] * base ** (float(2i) / hd)).
 * The power is taken in double and rounded (torch's float pow may differ by an ulp). */
static void rope_table(const nnt_rope_options *o, int64_t hd, int use_long, float *inv)
{
    const double base = (float)o->theta;   /* torch casts the scalar base to float32 */
    if (o->scaling == NNT_ROPE_SCALING_YARN) {
        yarn_table(o, hd, base, inv);
        return;
    }
    if (o->scaling == NNT_ROPE_SCALING_LONGROPE) {
        const float *ext = use_long ? o->long_factor : o->short_factor;
        for (int64_t i = 0; i < hd / 2; i++)
            inv[i] = 1.0f / (ext[i] * rope_power(base, i, hd));
        return;
    }
    const float two_pi = (float)(2.0 * M_PI), orig = (float)o->original_max_position;
    const float low = (float)o->low_freq_factor;
    const float factor = (float)o->factor;
    const float low_wavelen = (float)((double)o->original_max_position / o->low_freq_factor);
    const float high_wavelen = (float)((double)o->original_max_position / o->high_freq_factor);
    const float span = (float)(o->high_freq_factor - o->low_freq_factor);
    for (int64_t i = 0; i < hd / 2; i++) {
        float f = 1.0f / rope_power(base, i, hd);
        if (o->scaling == NNT_ROPE_SCALING_LINEAR)
            f = f / factor;
        if (o->scaling == NNT_ROPE_SCALING_LLAMA3) {
            float wavelen = (1.0f / f) * two_pi;
            if (wavelen > low_wavelen) {
                f = f / factor;
            } else if (!(wavelen < high_wavelen)) {
                float s = ((1.0f / wavelen) * orig - low) / span;
                f = (1.0f - s) * f / factor + s * f;
            }
        }
        inv[i] = f;
    }
}

/* ---- the operation ---------------------------------------------------------------------------- */

/* x (B, NH, T, hd) read, y written with x's layout (may be x); hd even, the rotary dimension
 * r of o even, hd's tile hd or a divisor of r/2. *split = r/(2 w) tile pairs, or 0 for whole
 * head vectors. */
static int check_args(const char *fn, const char *xrole, nnt_tensor *x, const char *yrole,
                      nnt_tensor *y, int64_t pos_offset, const nnt_rope_options *o,
                      int64_t *split)
{
    int rc = nnt_check_arg(fn, xrole, x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, yrole, y, NNT_FP32, 0);
    if (rc)
        return rc;
    if (x->ndim != 4)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: %s must have 4 dimensions (B, NH, T, hd), "
                        "not %d", fn, xrole, x->ndim);
    if ((rc = nnt_check_same_layout(fn, xrole, x, yrole, y)))
        return rc;
    int64_t hd = x->shape[3], w = x->tile[3];
    if (hd % 2)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: the head dimension hd = %lld of %s must be "
                        "even", fn, (long long)hd, xrole);
    if (pos_offset < 0 || pos_offset > INT64_MAX - x->shape[2])
        return nnt_fail(x->ctx, NNT_E_INVAL, "%s: pos_offset %lld must be >= 0 (and the last "
                        "position must fit int64_t)", fn, (long long)pos_offset);
    if ((rc = nnt_rope_check_head(fn, o, hd)))
        return rc;
    int64_t half = nnt_rope_rotary_dim(o, hd) / 2;   /* pairs (i, i + half) */
    *split = 0;
    if (x->grid[3] == 1)
        return NNT_OK;
    if (half % w != 0)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: hd = %lld of %s is split into tiles of %lld; "
                        "the hd tile must be hd (whole head vectors) or divide %lld, half the "
                        "rotary dimension", fn, (long long)hd, xrole, (long long)w,
                        (long long)half);
    *split = half / w;
    return NNT_OK;
}

/* positions (B, T) NNT_INT32 with x's B and T shape and tiling */
static int check_positions(const char *fn, const char *xrole, const nnt_tensor *x,
                           nnt_tensor *pos)
{
    NNT_TRY(nnt_check_arg(fn, "positions", pos, NNT_INT32, 1));
    if (pos->ndim != 2)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: positions must have 2 dimensions (B, T), not "
                        "%d", fn, pos->ndim);
    NNT_TRY(nnt_check_dims(fn, xrole, x, 0, "positions", pos, 0, 1));
    NNT_TRY(nnt_check_dims(fn, xrole, x, 2, "positions", pos, 1, 1));
    return NNT_OK;
}

/* pos: per-token positions (B, T), or NULL: t + pos_offset */
static int rope_apply(const char *fn, const char *xrole, nnt_tensor *x,
                      const nnt_rope_options *opts, int64_t pos_offset, nnt_tensor *pos,
                      const char *yrole, nnt_tensor *y, int sign)
{
    nnt_rope_options o;
    int64_t split = 0;
    int rc = nnt_rope_options_read(fn, opts, &o);
    if (rc == 0)
        rc = check_args(fn, xrole, x, yrole, y, pos_offset, &o, &split);
    if (rc == 0 && pos)
        rc = check_positions(fn, xrole, x, pos);
    if (rc)
        return rc;
    int64_t hd = x->shape[3], rd = nnt_rope_rotary_dim(&o, hd), T = x->shape[2];
    /* longrope: the long factors where the last position + 1 passes the original context */
    int use_long = pos_offset + T > o.original_max_position;
    if (o.scaling == NNT_ROPE_SCALING_LONGROPE && pos && use_long)
        return nnt_fail(x->ctx, NNT_E_UNSUPPORTED, "%s: longrope with per-token positions over "
                        "T = %lld > original_max_position %lld (transformers picks the factors "
                        "by the largest position)", fn, (long long)T,
                        (long long)o.original_max_position);
    if (rd < hd && y != x) {   /* the entries past the rotary dimension pass unchanged */
        NNT_TRY(nnt_tensor_copy(x, y));
        x = y;
    }
    float *inv = malloc((size_t)(rd / 2) * sizeof *inv);
    if (!inv)
        return nnt_fail(x->ctx, NNT_E_NOMEM, "%s: out of host memory", fn);
    rope_table(&o, rd, use_long, inv);
    const float scale = (float)nnt_rope_attention_factor(&o);
    int64_t nlead = x->grid[0] * x->grid[1] * x->grid[2], npairs = split ? split : 1;
    for (int64_t l = 0; l < nlead && rc == 0; l++) {
        int64_t lo = l * x->grid[3], shape[4];
        nnt_tensor_tile_shape_at(x, lo, shape);
        nnt_rope_task t;
        t.nbh = shape[0] * shape[1];
        t.nt = shape[2];
        t.pos0 = pos_offset + (l % x->grid[2]) * x->tile[2];
        t.sign = sign;
        t.scale = scale;
        t.whole = split == 0;
        t.n = split ? shape[3] : rd / 2;
        t.ld = shape[3];
        t.nb = shape[0];
        t.nh = shape[1];
        /* the positions tile of (b-tile, t-tile) */
        int64_t bi = l / (x->grid[1] * x->grid[2]), ti = l % x->grid[2];
        starpu_data_handle_t ph = pos ? pos->tiles[bi * pos->grid[1] + ti].handle : NULL;
        for (int64_t j = 0; j < npairs && rc == 0; j++) {
            int64_t ilo = lo + j, ihi = split ? lo + j + split : lo;
            if (ph)
                rc = nnt_insert_rope_pos(x->ctx, &t, inv + j * t.n, x->tiles[ilo].handle,
                                         x->tiles[ihi].handle, y->tiles[ilo].handle,
                                         y->tiles[ihi].handle, ph);
            else
                rc = nnt_insert_rope(x->ctx, &t, inv + j * t.n, x->tiles[ilo].handle,
                                     x->tiles[ihi].handle, y->tiles[ilo].handle,
                                     y->tiles[ihi].handle);
        }
    }
    free(inv);
    if (rc == 0)
        nnt_tensor_mark_written(y);
    return rc;
}

int nnt_tensor_rope(nnt_tensor *x, const nnt_rope_options *opts, int64_t pos_offset,
                    nnt_tensor *y)
{
    return rope_apply("nnt_tensor_rope", "x", x, opts, pos_offset, NULL, "y", y, 1);
}

int nnt_tensor_rope_positions(nnt_tensor *x, const nnt_rope_options *opts,
                              nnt_tensor *positions, nnt_tensor *y)
{
    static const char fn[] = "nnt_tensor_rope_positions";
    if (!positions)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: positions is NULL", fn);
    return rope_apply(fn, "x", x, opts, 0, positions, "y", y, 1);
}

int nnt_tensor_rope_positions_backward(nnt_tensor *dy, const nnt_rope_options *opts,
                                       nnt_tensor *positions, nnt_tensor *dx)
{
    static const char fn[] = "nnt_tensor_rope_positions_backward";
    if (!positions)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: positions is NULL", fn);
    return rope_apply(fn, "dy", dy, opts, 0, positions, "dx", dx, -1 /* the inverse */);
}

int nnt_tensor_rope_backward(nnt_tensor *dy, const nnt_rope_options *opts, int64_t pos_offset,
                             nnt_tensor *dx)
{
    const char *fn = "nnt_tensor_rope_backward";
    return rope_apply(fn, "dy", dy, opts, pos_offset, NULL, "dx", dx, -1);
}
