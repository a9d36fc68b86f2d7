/* SPDX-License-Identifier: MIT */
/* Sliding-window attention (nnt_tensor_attention_ex, _backward_ex, _kv_ex with
 * nnt_tensor_attention_options.window): query position i sees keys i - W < j <= i, as
 * Hugging Face's sliding-window mask (masking_utils.sliding_window_overlay: kv_idx > q_idx -
 * sliding_window, on top of the causal mask; transformers 5.24), and Gemma 2's soft-capped
 * scores (softcap). Checked against a float64 reference written here, forward and
 * backward, for windows of 1, shorter than a tile,
 * longer than a tile, T and longer than T (plain causal attention, bit for bit), grouped-
 * query heads and several tilings with partial tiles; random shapes, tilings and options
 * (packed examples too) against it; and the cached attention of generation against the same
 * reference for queries after cached keys. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdint.h>

static nnt_ctx *ctx;

static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

/* ---- host helpers ------------------------------------------------------------------------ */

static nnt_tensor *tensor_f32(int ndim, const int64_t *shape, const int64_t *tile,
                              const float *data)
{
    nnt_tensor *t = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, ndim, shape, tile, &t));
    if (data)
        EXPECT_OK(nnt_tensor_copy_from_host(t, data, (size_t)test_product(ndim, shape) * 4));
    return t;
}

static float *to_host(nnt_tensor *t)
{
    int64_t n = 0;
    EXPECT_OK(nnt_tensor_numel(t, &n));
    float *x = malloc((size_t)n * sizeof *x);
    EXPECT_OK(nnt_tensor_copy_to_host(t, x, (size_t)n * sizeof *x));
    return x;
}

static void destroy_all(int n, nnt_tensor **t)
{
    for (int i = 0; i < n; i++)
        EXPECT_OK(nnt_tensor_destroy(t[i]));
}

/* Normwise relative error: max |got - want| / max |want| (NaN in got gives NaN). */
static double rel_err(const float *got, const double *want, int64_t n)
{
    double amax = 0, emax = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (e != e)
            return e;
        emax = fmax(emax, e);
        amax = fmax(amax, fabs(want[i]));
    }
    return amax > 0 ? emax / amax : emax;
}

static void expect_same_bits(const char *what, int variant, const float *a, const float *b,
                             int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0)
            ck_abort_msg("%s (case %d): element %lld differs: %.9g vs %.9g", what, variant,
                         (long long)i, (double)a[i], (double)b[i]);
}

/* ---- float64 reference ------------------------------------------------------------------ */

/* One slab: tq queries at positions past + i against tk keys at 0 .. tk - 1, query at
 * position p seeing keys p - w < j <= p (w 0: every j <= p) and, with ex (packed examples),
 * j >= p - ex[i] (ex[i], clamped to 0 .. p: query i's position in its example). o,
 * lse set; with dout, dq set and dk, dv added to (several q heads share a kv slab). */
static void slab_ref(int64_t tq, int64_t tk, int64_t past, int64_t w, const int32_t *ex,
                     int64_t hd, double scale, double cap, const double *sink, const double *q,
                     const double *k, const double *v, double *o, double *lse,
                     const double *dout, double *dq, double *dk, double *dv, double *dsink)
{
    double *p = malloc((size_t)tk * sizeof *p), *g = malloc((size_t)tk * sizeof *g);
    for (int64_t i = 0; i < tq; i++) {
        const double *qi = q + i * hd;
        int64_t pos = past + i, j0 = w > 0 && pos - w + 1 > 0 ? pos - w + 1 : 0;
        if (ex) {
            int64_t e = ex[i] < 0 ? 0 : (ex[i] > pos ? pos : ex[i]);
            j0 = pos - e > j0 ? pos - e : j0;
        }
        double mx = -INFINITY, sum = 0;
        for (int64_t j = j0; j <= pos; j++) {
            double sc = 0;
            for (int64_t c = 0; c < hd; c++)
                sc += qi[c] * k[j * hd + c];
            p[j] = scale * sc;
            g[j] = 1;
            if (cap > 0) {   /* soft-capped: cap tanh(s / cap), gradient factor 1 - tanh^2 */
                double t = tanh(p[j] / cap);
                p[j] = cap * t;
                g[j] = 1 - t * t;
            }
            mx = fmax(mx, p[j]);
        }
        if (sink)   /* gpt-oss: the sink's logit in the softmax, with no value */
            mx = fmax(mx, *sink);
        for (int64_t j = j0; j <= pos; j++)
            sum += (p[j] = exp(p[j] - mx));
        if (sink)
            sum += exp(*sink - mx);
        for (int64_t j = j0; j <= pos; j++)
            p[j] /= sum;
        double oi[64] = {0}, dsum = 0;   /* hd <= 64 here */
        for (int64_t c = 0; c < hd; c++)
            for (int64_t j = j0; j <= pos; j++)
                oi[c] += p[j] * v[j * hd + c];
        memcpy(o + i * hd, oi, (size_t)hd * sizeof *oi);
        if (lse)
            lse[i] = mx + log(sum);
        if (!dout)
            continue;
        const double *di = dout + i * hd;
        for (int64_t c = 0; c < hd; c++) {
            dsum += di[c] * oi[c];
            dq[i * hd + c] = 0;
        }
        if (sink && dsink)   /* d sink = p_sink (0 - dout . o) */
            *dsink -= exp(*sink - mx) / sum * dsum;
        for (int64_t j = j0; j <= pos; j++) {
            double dp = 0;
            for (int64_t c = 0; c < hd; c++)
                dp += di[c] * v[j * hd + c];
            double ds = p[j] * (dp - dsum) * g[j];
            for (int64_t c = 0; c < hd; c++) {
                dq[i * hd + c] += scale * ds * k[j * hd + c];
                dk[j * hd + c] += scale * ds * qi[c];
                dv[j * hd + c] += p[j] * di[c];
            }
        }
    }
    free(p);
    free(g);
}

/* Grouped-query attention (q head h reads kv head h / (nh / nkv)) of q (b, nh, tq, hd)
 * against k, v (b, nkv, tk, hd); ex: NULL, or packed examples' positions (b, tq), as
 * slab_ref's. dout NULL: forward only. */
static void window_ref_sinks(int64_t b, int64_t nh, int64_t nkv, int64_t tq, int64_t tk,
                             int64_t past, int64_t w, const int32_t *ex, int64_t hd,
                             double scale, double cap, const double *sinks, const double *q,
                             const double *k, const double *v, double *o, double *lse,
                             const double *dout, double *dq, double *dk, double *dv,
                             double *dsinks);

static void window_ref(int64_t b, int64_t nh, int64_t nkv, int64_t tq, int64_t tk, int64_t past,
                       int64_t w, const int32_t *ex, int64_t hd, double scale, double cap,
                       const double *q, const double *k, const double *v, double *o,
                       double *lse, const double *dout, double *dq, double *dk, double *dv)
{
    window_ref_sinks(b, nh, nkv, tq, tk, past, w, ex, hd, scale, cap, NULL, q, k, v, o, lse,
                     dout, dq, dk, dv, NULL);
}

/* window_ref with attention sinks (gpt-oss): sinks (nh) or NULL; dsinks (nh) set. */
static void window_ref_sinks(int64_t b, int64_t nh, int64_t nkv, int64_t tq, int64_t tk,
                             int64_t past, int64_t w, const int32_t *ex, int64_t hd,
                             double scale, double cap, const double *sinks, const double *q,
                             const double *k, const double *v, double *o, double *lse,
                             const double *dout, double *dq, double *dk, double *dv,
                             double *dsinks)
{
    int64_t g = nh / nkv, sq = tq * hd, sk = tk * hd;
    if (dout) {
        memset(dk, 0, (size_t)(b * nkv * sk) * sizeof *dk);
        memset(dv, 0, (size_t)(b * nkv * sk) * sizeof *dv);
    }
    if (dsinks)
        memset(dsinks, 0, (size_t)nh * sizeof *dsinks);
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t h = 0; h < nh; h++) {
            int64_t qs = bi * nh + h, ks = bi * nkv + h / g;
            slab_ref(tq, tk, past, w, ex ? ex + bi * tq : NULL, hd, scale, cap,
                     sinks ? sinks + h : NULL, q + qs * sq, k + ks * sk, v + ks * sk,
                     o + qs * sq, lse ? lse + qs * tq : NULL, dout ? dout + qs * sq : NULL,
                     dout ? dq + qs * sq : NULL, dout ? dk + ks * sk : NULL,
                     dout ? dv + ks * sk : NULL, dsinks ? dsinks + h : NULL);
        }
}

/* ---- the whole-sequence operations ------------------------------------------------------ */

#define WB 2
#define WH 4
#define WT 13
#define WD 8
#define WNQ (WB * WH * WT * WD)
#define WR (WB * WH * WT)

static const int64_t w_nkv[3] = {1, 2, 4};
/* windows: one key, shorter than every T tile below but one, longer than a tile, T - 1, T
 * and longer than T (the last two: plain causal attention) */
static const int64_t w_windows[] = {1, 2, 5, 7, WT - 1, WT, 40};
#define W_NW ((int)(sizeof w_windows / sizeof *w_windows))

/* q tile (B, NH, T, hd), then k's head and hd tiles (clamped to NKV and hd); k, v share
 * q's B and T tiles */
static const int64_t w_tilings[][6] = {
    {2, 4, 13, 8, 4, 8},   /* one tile each                                               */
    {1, 4, 4, 8, 4, 8},    /* T in 4, 4, 4, 1                                             */
    {2, 2, 5, 8, 1, 8},    /* T in 5, 5, 3; q heads in twos, one kv head a tile           */
    {1, 3, 3, 3, 2, 4},    /* T in threes (4 + a partial), q heads 3 + 1, hd split (3,3,2) */
    {2, 1, 2, 8, 1, 8},    /* T in twos: most tile pairs lie outside a short window        */
};
#define W_NT ((int)(sizeof w_tilings / sizeof *w_tilings))

/* Against the float64 reference (normwise, max over NKV, windows and tilings), measured
 * (AMD Zen 3, BLIS zen3) o 1.5e-7, lse 1.0e-7, dq 2.6e-7, dk 3.1e-7, dv 2.1e-7. */
#define W_TOL_O 1.5e-6
#define W_TOL_LSE 1e-6
#define W_TOL_DQ 2.6e-6
#define W_TOL_DK 3.1e-6
#define W_TOL_DV 2.1e-6

struct run {
    float *o, *lse, *dq, *dk, *dv;
    float *dsinks;   /* with sinks: (nh), else NULL */
};

static void run_free(struct run *r)
{
    free(r->o), free(r->lse), free(r->dq), free(r->dk), free(r->dv), free(r->dsinks);
}

/* The tensors of a run through the op: q (b, nh, t, hd) in tiles qt, k and v (b, nkv, t, hd)
 * in tiles kt (q's b and t tiles) */
struct shape {
    int64_t b, nh, nkv, t, hd;
    const int64_t *qt, *kt;
    const float *sinks;   /* (nh) attention sinks (tiled as q's heads), or NULL */
};

/* Forward and backward through the op with window w (w < 0: the plain functions); ex: NULL,
 * or packed examples' positions (b, t) (in q's b and t tiles) */
static struct run attention_op(const struct shape *sh, int64_t w, double cap, double scale,
                               const int32_t *ex, const float *q, const float *k,
                               const float *v, const float *dout)
{
    const int64_t qs[4] = {sh->b, sh->nh, sh->t, sh->hd}, ks[4] = {sh->b, sh->nkv, sh->t, sh->hd};
    const int64_t *qt = sh->qt, *kt = sh->kt, ps[2] = {sh->b, sh->t}, pt[2] = {qt[0], qt[2]};
    nnt_tensor *tq = tensor_f32(4, qs, qt, q), *tk = tensor_f32(4, ks, kt, k),
               *tv = tensor_f32(4, ks, kt, v), *to = tensor_f32(4, qs, qt, NULL),
               *tl = tensor_f32(3, qs, qt, NULL), *tdo = tensor_f32(4, qs, qt, dout),
               *tdq = tensor_f32(4, qs, qt, NULL), *tdk = tensor_f32(4, ks, kt, NULL),
               *tdv = tensor_f32(4, ks, kt, NULL), *tp = NULL, *ts = NULL, *tds = NULL;
    if (ex) {
        EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, ps, pt, &tp));
        EXPECT_OK(nnt_tensor_copy_from_host(tp, ex, (size_t)(sh->b * sh->t) * sizeof *ex));
    }
    if (w < 0) {
        EXPECT_OK(nnt_tensor_attention(tq, tk, tv, scale, to, tl));
        EXPECT_OK(nnt_tensor_attention_backward(tq, tk, tv, to, tl, tdo, scale, tdq, tdk, tdv));
    } else {
        nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
        ao.scale = scale;
        ao.window = w;
        ao.softcap = cap;
        ao.positions = tp;
        if (sh->sinks) {   /* the gradient adds to dsinks: start it at 1 */
            const int64_t ss[1] = {sh->nh}, st[1] = {qt[1]};
            ts = tensor_f32(1, ss, st, sh->sinks);
            tds = tensor_f32(1, ss, st, NULL);
            EXPECT_OK(nnt_tensor_fill(tds, 1.0));
            ao.sinks = ts;
        }
        EXPECT_OK(nnt_tensor_attention_ex(tq, tk, tv, &ao, to, tl));
        ao.dsinks = tds;
        EXPECT_OK(nnt_tensor_attention_backward_ex(tq, tk, tv, to, tl, tdo, &ao, tdq, tdk, tdv));
    }
    struct run r = {to_host(to), to_host(tl), to_host(tdq), to_host(tdk), to_host(tdv),
                    tds ? to_host(tds) : NULL};
    for (int64_t h = 0; tds && h < sh->nh; h++)
        r.dsinks[h] -= 1.0f;
    nnt_tensor *all[12] = {tq, tk, tv, to, tl, tdo, tdq, tdk, tdv, tp, ts, tds};
    destroy_all(12, all);
    return r;
}

/* attention_op on the suite's (WB, WH, WT, WD) with nkv kv heads */
static struct run window_op_cap(int64_t nkv, const int64_t *qt, const int64_t *kt, int64_t w,
                                double cap, double scale, const float *q, const float *k,
                                const float *v, const float *dout)
{
    const struct shape sh = {WB, WH, nkv, WT, WD, qt, kt, NULL};
    return attention_op(&sh, w, cap, scale, NULL, q, k, v, dout);
}

static struct run window_op(int64_t nkv, const int64_t *qt, const int64_t *kt, int64_t w,
                            double scale, const float *q, const float *k, const float *v,
                            const float *dout)
{
    return window_op_cap(nkv, qt, kt, w, 0.0, scale, q, k, v, dout);
}

/* _i indexes w_nkv */
START_TEST(window_matches_reference_for_every_tiling)
{
    const int64_t nkv = w_nkv[_i], nk = WB * nkv * WT * WD;
    const double scale = 1.0 / sqrt((double)WD);
    float *q = test_random_f32(WNQ, 61, -1.5, 1.5), *k = test_random_f32(nk, 62, -1.5, 1.5),
          *v = test_random_f32(nk, 63, -1, 1), *dout = test_random_f32(WNQ, 64, -1, 1);
    double *qd = test_to_double(q, WNQ), *kd = test_to_double(k, nk), *vd = test_to_double(v, nk),
           *dd = test_to_double(dout, WNQ);
    double *o_ref = test_zeros(WNQ), *lse_ref = test_zeros(WR), *dq_ref = test_zeros(WNQ),
           *dk_ref = test_zeros(nk), *dv_ref = test_zeros(nk);
    for (int wi = 0; wi < W_NW; wi++) {
        int64_t w = w_windows[wi];
        window_ref(WB, WH, nkv, WT, WT, 0, w, NULL, WD, scale, 0.0, qd, kd, vd, o_ref, lse_ref,
                   dd, dq_ref, dk_ref, dv_ref);
        for (int t = 0; t < W_NT; t++) {
            const int64_t *tl = w_tilings[t];
            const int64_t kt[4] = {tl[0], tl[4], tl[2], tl[5]};
            struct run r = window_op(nkv, tl, kt, w, scale, q, k, v, dout);
            EXPECT_TOL(rel_err(r.o, o_ref, WNQ), W_TOL_O, "o, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.lse, lse_ref, WR), W_TOL_LSE, "lse, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dq, dq_ref, WNQ), W_TOL_DQ, "dq, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dk, dk_ref, nk), W_TOL_DK, "dk, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dv, dv_ref, nk), W_TOL_DV, "dv, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            if (w >= WT) {   /* no key outside the window: the plain op, bit for bit */
                struct run p = window_op(nkv, tl, kt, -1, scale, q, k, v, dout);
                expect_same_bits("o, W >= T vs plain causal", t, p.o, r.o, WNQ);
                expect_same_bits("lse, W >= T vs plain causal", t, p.lse, r.lse, WR);
                expect_same_bits("dq, W >= T vs plain causal", t, p.dq, r.dq, WNQ);
                expect_same_bits("dk, W >= T vs plain causal", t, p.dk, r.dk, nk);
                expect_same_bits("dv, W >= T vs plain causal", t, p.dv, r.dv, nk);
                run_free(&p);
            }
            run_free(&r);
        }
    }
    free(q), free(k), free(v), free(dout), free(qd), free(kd), free(vd), free(dd);
    free(o_ref), free(lse_ref), free(dq_ref), free(dk_ref), free(dv_ref);
}
END_TEST

/* Gemma 2's soft-capped scores (softcap 0.8 against scores up to about 3: every row bites)
 * with and without a window, against the float64 reference, for every tiling; _i indexes
 * w_nkv. Measured (AMD Zen 4): o 1.3e-7, lse 8.6e-8, dq 2.3e-7, dk 3.2e-7, dv 2.1e-7, within
 * the window tolerances. */
START_TEST(softcap_matches_reference)
{
    static const int64_t windows[2] = {0, 5};
    const int64_t nkv = w_nkv[_i], nk = WB * nkv * WT * WD;
    const double scale = 1.0 / sqrt((double)WD), cap = 0.8;
    float *q = test_random_f32(WNQ, 71, -1.5, 1.5), *k = test_random_f32(nk, 72, -1.5, 1.5),
          *v = test_random_f32(nk, 73, -1, 1), *dout = test_random_f32(WNQ, 74, -1, 1);
    double *qd = test_to_double(q, WNQ), *kd = test_to_double(k, nk), *vd = test_to_double(v, nk),
           *dd = test_to_double(dout, WNQ);
    double *o_ref = test_zeros(WNQ), *lse_ref = test_zeros(WR), *dq_ref = test_zeros(WNQ),
           *dk_ref = test_zeros(nk), *dv_ref = test_zeros(nk), *o_nocap = test_zeros(WNQ);
    for (int wi = 0; wi < 2; wi++) {
        int64_t w = windows[wi];
        window_ref(WB, WH, nkv, WT, WT, 0, w, NULL, WD, scale, cap, qd, kd, vd, o_ref, lse_ref,
                   dd, dq_ref, dk_ref, dv_ref);
        /* the cap matters: without it o differs by far more than the tolerance */
        window_ref(WB, WH, nkv, WT, WT, 0, w, NULL, WD, scale, 0.0, qd, kd, vd, o_nocap, NULL,
                   NULL, NULL, NULL, NULL);
        double d = 0;
        for (int64_t i = 0; i < WNQ; i++)
            d = fmax(d, fabs(o_nocap[i] - o_ref[i]));
        ck_assert_msg(d > 1e-2, "softcap %g changes o by %g only", cap, d);
        for (int t = 0; t < W_NT; t++) {
            const int64_t *tl = w_tilings[t];
            const int64_t kt[4] = {tl[0], tl[4], tl[2], tl[5]};
            struct run r = window_op_cap(nkv, tl, kt, w, cap, scale, q, k, v, dout);
            EXPECT_TOL(rel_err(r.o, o_ref, WNQ), W_TOL_O, "softcap o, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.lse, lse_ref, WR), W_TOL_LSE,
                       "softcap lse, NKV %d, W %d, tiling %d", (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dq, dq_ref, WNQ), W_TOL_DQ,
                       "softcap dq, NKV %d, W %d, tiling %d", (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dk, dk_ref, nk), W_TOL_DK,
                       "softcap dk, NKV %d, W %d, tiling %d", (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dv, dv_ref, nk), W_TOL_DV,
                       "softcap dv, NKV %d, W %d, tiling %d", (int)nkv, (int)w, t);
            run_free(&r);
        }
    }
    free(q), free(k), free(v), free(dout), free(qd), free(kd), free(vd), free(dd);
    free(o_ref), free(lse_ref), free(dq_ref), free(dk_ref), free(dv_ref), free(o_nocap);
}
END_TEST

/* Attention sinks (gpt-oss: a logit per head in each softmax row, with no value) with and
 * without a window, for every tiling (heads cut into tiles: the sinks' tiles follow),
 * against the float64 reference; _i indexes w_nkv. Sinks of -1 .. 2.5 against scores of
 * about +-3 take a large share of many rows. Measured (AMD Zen 4): o 2.2e-7, lse 7.5e-8,
 * dq 3.0e-7, dk 2.6e-7, dv 1.6e-7 (within the window tolerances), dsinks 9.1e-7 (a sum of
 * terms of both signs over every row of a head). */
#define W_TOL_DSINKS 9e-6
START_TEST(sinks_match_reference)
{
    static const int64_t windows[2] = {0, 5};
    const int64_t nkv = w_nkv[_i], nk = WB * nkv * WT * WD;
    const double scale = 1.0 / sqrt((double)WD);
    float *q = test_random_f32(WNQ, 75, -1.5, 1.5), *k = test_random_f32(nk, 76, -1.5, 1.5),
          *v = test_random_f32(nk, 77, -1, 1), *dout = test_random_f32(WNQ, 78, -1, 1),
          *sinks = test_random_f32(WH, 79, -1, 2.5);
    double *qd = test_to_double(q, WNQ), *kd = test_to_double(k, nk), *vd = test_to_double(v, nk),
           *dd = test_to_double(dout, WNQ), *sd = test_to_double(sinks, WH);
    double *o_ref = test_zeros(WNQ), *lse_ref = test_zeros(WR), *dq_ref = test_zeros(WNQ),
           *dk_ref = test_zeros(nk), *dv_ref = test_zeros(nk), *ds_ref = test_zeros(WH),
           *o_plain = test_zeros(WNQ), worst[6] = {0, 0, 0, 0, 0, 0};
    for (int wi = 0; wi < 2; wi++) {
        int64_t w = windows[wi];
        window_ref_sinks(WB, WH, nkv, WT, WT, 0, w, NULL, WD, scale, 0.0, sd, qd, kd, vd, o_ref,
                         lse_ref, dd, dq_ref, dk_ref, dv_ref, ds_ref);
        /* the sinks matter: without them o differs by far more than the tolerance */
        window_ref(WB, WH, nkv, WT, WT, 0, w, NULL, WD, scale, 0.0, qd, kd, vd, o_plain, NULL,
                   NULL, NULL, NULL, NULL);
        double d = 0;
        for (int64_t i = 0; i < WNQ; i++)
            d = fmax(d, fabs(o_plain[i] - o_ref[i]));
        ck_assert_msg(d > 5e-2, "the sinks change o by %g only", d);
        for (int t = 0; t < W_NT; t++) {
            const int64_t *tl = w_tilings[t];
            const int64_t kt[4] = {tl[0], tl[4], tl[2], tl[5]};
            const struct shape sh = {WB, WH, nkv, WT, WD, tl, kt, sinks};
            struct run r = attention_op(&sh, w, 0.0, scale, NULL, q, k, v, dout);
            double e[6] = {rel_err(r.o, o_ref, WNQ), rel_err(r.lse, lse_ref, WR),
                           rel_err(r.dq, dq_ref, WNQ), rel_err(r.dk, dk_ref, nk),
                           rel_err(r.dv, dv_ref, nk), rel_err(r.dsinks, ds_ref, WH)};
            for (int m = 0; m < 6; m++)
                worst[m] = fmax(worst[m], e[m]);
            EXPECT_TOL(rel_err(r.o, o_ref, WNQ), W_TOL_O, "sinks o, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.lse, lse_ref, WR), W_TOL_LSE,
                       "sinks lse, NKV %d, W %d, tiling %d", (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dq, dq_ref, WNQ), W_TOL_DQ, "sinks dq, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dk, dk_ref, nk), W_TOL_DK, "sinks dk, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dv, dv_ref, nk), W_TOL_DV, "sinks dv, NKV %d, W %d, tiling %d",
                       (int)nkv, (int)w, t);
            EXPECT_TOL(rel_err(r.dsinks, ds_ref, WH), W_TOL_DSINKS,
                       "dsinks, NKV %d, W %d, tiling %d", (int)nkv, (int)w, t);
            run_free(&r);
        }
    }
    free(q), free(k), free(v), free(dout), free(sinks), free(qd), free(kd), free(vd), free(dd);
    free(sd), free(o_ref), free(lse_ref), free(dq_ref), free(dk_ref), free(dv_ref), free(ds_ref);
    free(o_plain);
    printf("test_ops_window sinks_match_reference: NKV %d, o %.2g, lse %.2g, dq %.2g, dk %.2g, "
           "dv %.2g, dsinks %.2g\n", (int)nkv, worst[0], worst[1], worst[2], worst[3], worst[4],
           worst[5]);
}
END_TEST

/* Window 0 and NULL options are the plain op (scale 0: 1 / sqrt(hd)), bit for bit; a window
 * gives the same bits run to run. */
START_TEST(window_zero_is_plain_and_deterministic)
{
    const int64_t nkv = 2, nk = WB * nkv * WT * WD;
    const int64_t qt[4] = {1, 2, 3, 4}, kt[4] = {1, 1, 3, 8};
    const double scale = 1.0 / sqrt((double)WD);
    float *q = test_random_f32(WNQ, 71, -1, 1), *k = test_random_f32(nk, 72, -1, 1),
          *v = test_random_f32(nk, 73, -1, 1), *dout = test_random_f32(WNQ, 74, -1, 1);
    struct run p = window_op(nkv, qt, kt, -1, scale, q, k, v, dout);
    struct run z = window_op(nkv, qt, kt, 0, 0.0, q, k, v, dout);
    expect_same_bits("o, window 0", 0, p.o, z.o, WNQ);
    expect_same_bits("dq, window 0", 0, p.dq, z.dq, WNQ);
    expect_same_bits("dk, window 0", 0, p.dk, z.dk, nk);
    expect_same_bits("dv, window 0", 0, p.dv, z.dv, nk);
    struct run r[3];
    for (int i = 0; i < 3; i++)
        r[i] = window_op(nkv, qt, kt, 4, scale, q, k, v, dout);
    for (int i = 1; i < 3; i++) {
        expect_same_bits("o, run", i, r[0].o, r[i].o, WNQ);
        expect_same_bits("dq, run", i, r[0].dq, r[i].dq, WNQ);
        expect_same_bits("dk, run", i, r[0].dk, r[i].dk, nk);
        expect_same_bits("dv, run", i, r[0].dv, r[i].dv, nk);
    }
    for (int i = 0; i < 3; i++)
        run_free(&r[i]);
    run_free(&p), run_free(&z);
    free(q), free(k), free(v), free(dout);
}
END_TEST

/* Band tasks (a query tile over its band of key tiles in one task; the window's default on
 * CPU workers) against the block tasks (NNT_ATTN_BAND_TASKS=0) over every tiling: o, lse, dq,
 * dk and dv within float rounding (a band task's kernels take its key tiles as one block of
 * keys, one softmax a row over them, and its dk, dv add in another order): normwise, measured
 * (AMD Zen 5) up to 9.9e-8 (o, lse and dq were the blocks' bits before 2026-11-30, when the
 * kernels took a band's key tiles one at a time). The traced forward submits the band codelet
 * where the tiling allows it (a q head tile reading one kv head tile whole) and the blocks'
 * otherwise; on CUDA workers always the blocks'. */
#define BAND_TOL 1e-6

/* every q head tile (of qh heads; WH q heads, nkv kv heads) reads all of one kv head tile (of
 * kvh heads), the band tasks' condition */
static int reads_whole_kv_tiles(int64_t nkv, int64_t qh, int64_t kvh)
{
    const int64_t g = WH / nkv;
    for (int64_t h0 = 0; h0 < WH; h0 += qh) {
        int64_t h1 = h0 + qh < WH ? h0 + qh : WH, a = h0 / g, b = (h1 - 1) / g;
        int64_t ka = a / kvh * kvh, kb = (ka + kvh < nkv ? ka + kvh : nkv) - 1;
        if (a != ka || b != kb)
            return 0;
    }
    return 1;
}

/* The longest band of T in sequence tiles of ts under window w, in key tiles: query tile i
 * pairs with the key tiles from the first whose last key is not before its first query's
 * window */
static int64_t longest_band(int64_t T, int64_t ts, int64_t w)
{
    int64_t nt = (T + ts - 1) / ts, longest = 0;
    for (int64_t i = 0; i < nt; i++) {
        int64_t j = 0;
        while (j < i && (j + 1) * ts - 1 <= i * ts - w)
            j++;
        longest = i - j + 1 > longest ? i - j + 1 : longest;
    }
    return longest;
}

/* A core's L2 cache as the library reads it (sysconf; 1 MiB where the system does not say) */
static int64_t l2_bytes(void)
{
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#else
    long l2 = 0;
#endif
    return l2 > 0 ? (int64_t)l2 : (int64_t)1 << 20;
}

/* Whether a band task's backward row chunks keep their kv rows within L2
 * (nnt_tensor_attention_ex(3)): five (keys, hd) float arrays over W + 79 keys, at most the
 * band's L key tiles of ts */
static int band_rows_fit(int64_t w, int64_t L, int64_t ts, int64_t hd)
{
    int64_t keys = w + 79 < L * ts ? w + 79 : L * ts;
    return 5 * keys * hd * (int64_t)sizeof(float) <= l2_bytes();
}

/* Whether the backward goes by band tasks (nnt_tensor_attention_ex(3)): on CPU workers alone,
 * where every q head tile reads one kv head tile whole, the sequence holds at least 2 L tiles,
 * the batch and head tiles as many runs of L query tiles as there are CPU workers, and a row
 * chunk's kv rows fit L2 (heads of hd) */
static int backward_by_bands(int whole, int ncpu, int ncuda, int64_t B, int64_t tb,
                             int64_t H, int64_t th, int64_t T, int64_t ts, int64_t w,
                             int64_t hd)
{
    int64_t nt = (T + ts - 1) / ts, L = longest_band(T, ts, w);
    int64_t pairs = (B + tb - 1) / tb * ((H + th - 1) / th);
    return whole && ncuda == 0 && L <= 8 && nt >= 2 * L && pairs * (nt / L) >= ncpu &&
           band_rows_fit(w, L, ts, hd);
}

START_TEST(band_tasks_match_blocks)
{
    static const int64_t windows[2] = {2, 5};
    const int64_t nkv = w_nkv[_i], nk = WB * nkv * WT * WD;
    const double scale = 1.0 / sqrt((double)WD);
    float *q = test_random_f32(WNQ, 81, -1.5, 1.5), *k = test_random_f32(nk, 82, -1.5, 1.5),
          *v = test_random_f32(nk, 83, -1, 1), *dout = test_random_f32(WNQ, 84, -1, 1);
    int ncpu = 0, ncuda = 0, banded = 0, bwd_banded = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpu, &ncuda));
    char path[64];
    snprintf(path, sizeof path, "/tmp/nnt-test-band-%ld.txt", (long)getpid());
    double worst = 0.0;
    for (int wi = 0; wi < 2; wi++)
        for (int t = 0; t < W_NT; t++) {
            const int64_t *tl = w_tilings[t];
            const int64_t kt[4] = {tl[0], tl[4], tl[2], tl[5]};
            EXPECT_OK(nnt_trace_start(ctx));
            struct run b = window_op(nkv, tl, kt, windows[wi], scale, q, k, v, dout);
            EXPECT_OK(nnt_trace_stop(ctx, NULL, path));
            long long fwd_band = test_traced_count(path, "nnt_attn_fwd_band");
            int whole = reads_whole_kv_tiles(nkv, tl[1], kt[1]);
            ck_assert_msg(fwd_band > 0 ? whole && ncuda == 0 : !whole || ncuda > 0,
                          "%lld band tasks, NKV %d, W %d, tiling %d", fwd_band, (int)nkv,
                          (int)windows[wi], t);
            banded += fwd_band > 0;
            long long bwd_band = test_traced_count(path, "nnt_attn_bwd_band");
            int want = backward_by_bands(whole, ncpu, ncuda, WB, tl[0], WH, tl[1], WT, tl[2],
                                         windows[wi], WD);
            ck_assert_msg((bwd_band > 0) == want, "%lld backward band tasks (expected %s), "
                          "NKV %d, W %d, tiling %d, %d CPU workers", bwd_band,
                          want ? "some" : "none", (int)nkv, (int)windows[wi], t, ncpu);
            bwd_banded += bwd_band > 0;
            setenv("NNT_ATTN_BAND_TASKS", "0", 1);
            struct run p = window_op(nkv, tl, kt, windows[wi], scale, q, k, v, dout);
            unsetenv("NNT_ATTN_BAND_TASKS");
            double e = fmax(fmax(test_rel_err(b.o, p.o, WNQ), test_rel_err(b.lse, p.lse, WR)),
                            test_rel_err(b.dq, p.dq, WNQ));
            e = fmax(e, fmax(test_rel_err(b.dk, p.dk, nk), test_rel_err(b.dv, p.dv, nk)));
            EXPECT_TOL(e, BAND_TOL, "o, lse, dq, dk, dv: band tasks vs blocks, NKV %d, W %d, "
                       "tiling %d", (int)nkv, (int)windows[wi], t);
            worst = fmax(worst, e);
            run_free(&b), run_free(&p);
        }
    remove(path);
    /* the backward's band tasks need two runs of L a tile, and as many as the CPU workers:
     * W 2 in tiles of 4, 3 and 2 on 2 workers */
    ck_assert_msg(ncuda > 0 || ncpu > 2 || bwd_banded > 0, "no backward by band tasks, NKV %d",
                  (int)nkv);
    printf("test_ops_window band_tasks_match_blocks: NKV %d, %d of %d runs by band tasks (the "
           "backward %d)%s, o, lse, dq, dk, dv %.2e from the blocks'\n", (int)nkv, banded, 2 * W_NT,
           bwd_banded, ncuda ? " (CUDA workers: blocks)" : "", worst);
    free(q), free(k), free(v), free(dout);
}
END_TEST

/* Random shapes, tilings and options against the float64 reference: RS_CASES draws (a fixed
 * seed) of B 1-3, 1-3 kv heads of 1-3 q heads each, T 4-96, hd from rs_hd, a window (none, or
 * 2 .. T + 2: a window of 1 has dq = dk = 0, whose rounding a relative error cannot judge;
 * window_matches_reference has it), tiles of any size in B and T, q head tiles of whole groups
 * over kv head tiles (each q head tile reads one kv head tile whole: the band tasks'
 * condition), hd whole or in two tiles, and in some draws a soft-cap, a scale other than
 * 1 / sqrt(hd) and packed examples, and in every third draw attention sinks (their gradient
 * within dq's tolerance); each draw through the band tasks (the default), the block
 * tasks (NNT_ATTN_BAND_TASKS=0) and the band tasks without the workers' rule (=2). Normwise
 * (rel_err), measured (AMD Zen 4) over these 40 draws: o 4.3e-7, lse 1.8e-7, dq 1.4e-6, dk
 * 1.1e-6, dv 3.1e-7 (without the sinks: dq 5.5e-7, dk 7.9e-7); over 2000 draws of another seed (17.6 s): o 8.6e-7, lse 3.3e-7, dq
 * 1.0e-6, dk 1.5e-6, dv 5.6e-7 (11538 forward and 3641 backward band tasks). */
#define RS_CASES 40
#define RS_TOL_O 8e-6
#define RS_TOL_LSE 3e-6
#define RS_TOL_DQ 1e-5
#define RS_TOL_DK 1.5e-5
#define RS_TOL_DV 6e-6

static const int64_t rs_hd[] = {4, 8, 12, 20, 24, 40, 64};

/* a draw in lo .. hi */
static int64_t rs_draw(unsigned long long *state, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(test_rand(state) * (double)(hi - lo + 1));
}

/* One draw's shapes and options (as RS_CASES's comment says); with packed, the test draws
 * the examples' positions */
struct rs_case {
    int64_t b, nkv, nh, t, hd, w, qt[4], kt[4];
    double cap, scale;
    int packed;
};

static struct rs_case rs_case_draw(unsigned long long *state)
{
    struct rs_case c;
    const int64_t g = rs_draw(state, 1, 3), hdn = (int64_t)(sizeof rs_hd / sizeof *rs_hd);
    c.b = rs_draw(state, 1, 3), c.nkv = rs_draw(state, 1, 3), c.nh = c.nkv * g;
    c.t = rs_draw(state, 4, 96), c.hd = rs_hd[rs_draw(state, 0, hdn - 1)];
    c.w = rs_draw(state, 0, 3) == 0 ? 0 : rs_draw(state, 2, c.t + 2);
    const int64_t tb = rs_draw(state, 1, c.b), ts = rs_draw(state, 2, c.t);
    const int64_t kvh = rs_draw(state, 1, c.nkv);
    const int64_t hdt = rs_draw(state, 0, 1) ? c.hd : (c.hd + 1) / 2;
    const int64_t qt[4] = {tb, kvh * g, ts, hdt}, kt[4] = {tb, kvh, ts, hdt};
    memcpy(c.qt, qt, sizeof qt), memcpy(c.kt, kt, sizeof kt);
    c.cap = rs_draw(state, 0, 2) == 0 ? 1.3 : 0.0;
    c.scale = rs_draw(state, 0, 1) ? 0.29 : 1.0 / sqrt((double)c.hd);
    c.packed = rs_draw(state, 0, 2) == 0;
    return c;
}

START_TEST(random_shapes_match_reference)
{
    static const char *const modes[3] = {NULL, "0", "2"};   /* band tasks, blocks, bands */
    unsigned long long state = 20261130;
    double worst[5] = {0};
    long long fwd_band = 0, bwd_band = 0;
    int ncuda = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, NULL, &ncuda));
    char path[64];
    snprintf(path, sizeof path, "/tmp/nnt-test-random-%ld.txt", (long)getpid());
    for (int ci = 0; ci < RS_CASES; ci++) {
        const struct rs_case c = rs_case_draw(&state);
        const int with_sinks = ci % 3 == 1;   /* every third draw (gpt-oss's sinks) */
        float *sinks = test_random_f32(c.nh, 4 * ci + 5, -1, 2.5);
        const struct shape sh = {c.b, c.nh, c.nkv, c.t, c.hd, c.qt, c.kt,
                                 with_sinks ? sinks : NULL};
        const int64_t nq = c.b * c.nh * c.t * c.hd, nk = c.b * c.nkv * c.t * c.hd;
        const int64_t nr = c.b * c.nh * c.t;
        int32_t *ex = malloc((size_t)(c.b * c.t) * sizeof *ex);
        for (int64_t i = 0, p = 0; i < c.b * c.t; i++, p++) {   /* examples of about 8 */
            p = i % c.t == 0 || (c.packed && rs_draw(&state, 0, 7) == 0) ? 0 : p;
            ex[i] = (int32_t)p;
        }
        float *q = test_random_f32(nq, 4 * ci + 1, -1.5, 1.5),
              *k = test_random_f32(nk, 4 * ci + 2, -1.5, 1.5),
              *v = test_random_f32(nk, 4 * ci + 3, -1, 1),
              *dout = test_random_f32(nq, 4 * ci + 4, -1, 1);
        double *qd = test_to_double(q, nq), *kd = test_to_double(k, nk),
               *vd = test_to_double(v, nk), *dd = test_to_double(dout, nq),
               *sd = test_to_double(sinks, c.nh);
        double *o_ref = test_zeros(nq), *lse_ref = test_zeros(nr), *dq_ref = test_zeros(nq),
               *dk_ref = test_zeros(nk), *dv_ref = test_zeros(nk), *ds_ref = test_zeros(c.nh);
        window_ref_sinks(c.b, c.nh, c.nkv, c.t, c.t, 0, c.w, c.packed ? ex : NULL, c.hd,
                         c.scale, c.cap, with_sinks ? sd : NULL, qd, kd, vd, o_ref, lse_ref, dd,
                         dq_ref, dk_ref, dv_ref, ds_ref);
        for (int m = 0; m < 3; m++) {
            if (modes[m])
                setenv("NNT_ATTN_BAND_TASKS", modes[m], 1);
            else
                EXPECT_OK(nnt_trace_start(ctx));
            struct run r = attention_op(&sh, c.w, c.cap, c.scale, c.packed ? ex : NULL, q, k,
                                        v, dout);
            if (modes[m]) {
                unsetenv("NNT_ATTN_BAND_TASKS");
            } else {
                EXPECT_OK(nnt_trace_stop(ctx, NULL, path));
                fwd_band += test_traced_count(path, "nnt_attn_fwd_band");
                bwd_band += test_traced_count(path, "nnt_attn_bwd_band");
            }
            const double e[5] = {rel_err(r.o, o_ref, nq), rel_err(r.lse, lse_ref, nr),
                                 rel_err(r.dq, dq_ref, nq), rel_err(r.dk, dk_ref, nk),
                                 rel_err(r.dv, dv_ref, nk)};
            static const char *const names[5] = {"o", "lse", "dq", "dk", "dv"};
            static const double tols[5] = {RS_TOL_O, RS_TOL_LSE, RS_TOL_DQ, RS_TOL_DK,
                                           RS_TOL_DV};
            for (int x = 0; x < 5; x++) {
                EXPECT_TOL(e[x], tols[x], "%s, draw %d (B %d, NH %d, NKV %d, T %d, hd %d, W %d, "
                           "q tiles %d %d %d %d, cap %g, scale %g, packed %d), NNT_ATTN_BAND_"
                           "TASKS %s", names[x], ci, (int)c.b, (int)c.nh, (int)c.nkv, (int)c.t,
                           (int)c.hd, (int)c.w, (int)c.qt[0], (int)c.qt[1], (int)c.qt[2],
                           (int)c.qt[3], c.cap, c.scale, c.packed, modes[m] ? modes[m] : "unset");
                worst[x] = fmax(worst[x], e[x]);
            }
            if (with_sinks)
                EXPECT_TOL(rel_err(r.dsinks, ds_ref, c.nh), RS_TOL_DQ, "dsinks, draw %d, "
                           "NNT_ATTN_BAND_TASKS %s", ci, modes[m] ? modes[m] : "unset");
            run_free(&r);
        }
        free(ex), free(q), free(k), free(v), free(dout), free(qd), free(kd), free(vd), free(dd);
        free(o_ref), free(lse_ref), free(dq_ref), free(dk_ref), free(dv_ref);
        free(sinks), free(sd), free(ds_ref);
    }
    remove(path);
    ck_assert_msg(ncuda > 0 || (fwd_band > 0 && bwd_band > 0), "the draws ran %lld forward and "
                  "%lld backward band tasks", fwd_band, bwd_band);
    printf("test_ops_window random_shapes_match_reference: %d draws, %lld forward and %lld "
           "backward band tasks; o %.2e, lse %.2e, dq %.2e, dk %.2e, dv %.2e\n", RS_CASES,
           fwd_band, bwd_band, worst[0], worst[1], worst[2], worst[3], worst[4]);
}
END_TEST

/* Under a RAM budget a band task's tiles must fit in a quarter of it, or the op keeps the
 * block tasks: (1, 8, 512, 64) in sequence tiles of 128 (256 KiB a tile) with a window of 100
 * (bands of 2 key tiles: a backward band task holds 13 tiles, 3.25 MiB). Under 12 MiB the
 * blocks (the bits of NNT_ATTN_BAND_TASKS=0 in the default context), under 64 MiB the bands. */
#define RB_T 512
#define RB_N (8 * RB_T * 64)
/* Forward and backward of (B, 8, RB_T, 64) in tiles of (1, 8, 128, 64) with a window of 100
 * on the current context, traced: the outputs, and the codelets' task counts (forward and
 * backward band tasks, forward and backward block tasks) */
enum { FWD_BANDS, BWD_BANDS, FWD_BLOCKS, BWD_BLOCKS };
static struct run traced_window_run(int64_t B, const float *const *in, long long count[4])
{
    const int64_t shape[4] = {B, 8, RB_T, 64}, tile[4] = {1, 8, 128, 64};
    nnt_tensor *t[9];
    for (int i = 0; i < 8; i++)   /* q, k, v, dout, then o, dq, dk, dv */
        t[i] = tensor_f32(4, shape, tile, i < 4 ? in[i] : NULL);
    t[8] = tensor_f32(3, shape, tile, NULL);
    nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    ao.window = 100;
    char path[64];
    snprintf(path, sizeof path, "/tmp/nnt-test-window-run-%ld.txt", (long)getpid());
    EXPECT_OK(nnt_trace_start(ctx));
    EXPECT_OK(nnt_tensor_attention_ex(t[0], t[1], t[2], &ao, t[4], t[8]));
    EXPECT_OK(nnt_tensor_attention_backward_ex(t[0], t[1], t[2], t[4], t[8], t[3], &ao, t[5],
                                               t[6], t[7]));
    EXPECT_OK(nnt_trace_stop(ctx, NULL, path));
    static const char *const codelets[4] = {"nnt_attn_fwd_band", "nnt_attn_bwd_band",
                                            "nnt_attn_fwd_block", "nnt_attn_bwd_block"};
    for (int c = 0; c < 4; c++)
        count[c] = test_traced_count(path, codelets[c]);
    remove(path);
    struct run r = {to_host(t[4]), to_host(t[8]), to_host(t[5]), to_host(t[6]), to_host(t[7]),
                    NULL};
    destroy_all(9, t);
    return r;
}

static struct run budget_run(int64_t mib, const float *const *in, long long *bands,
                             long long *blocks)
{
    EXPECT_OK(nnt_ctx_destroy(ctx));
    ctx = NULL;
    if (mib > 0) {
        nnt_ctx_options o = NNT_CTX_OPTIONS_INIT;
        o.mem_cpu_mib = mib;
        EXPECT_OK(nnt_ctx_create(&o, &ctx));
    } else {
        ctx = test_ctx();
    }
    long long count[4];
    struct run r = traced_window_run(1, in, count);
    *bands = count[FWD_BANDS] + count[BWD_BANDS];
    *blocks = count[FWD_BLOCKS] + count[BWD_BLOCKS];
    return r;
}

START_TEST(band_tasks_within_ram_budget)
{
    const float *in[4];
    for (int i = 0; i < 4; i++)
        in[i] = test_random_f32(RB_N, 91 + (unsigned)i, -1, 1);
    long long bands[3], blocks[3];
    setenv("NNT_ATTN_BAND_TASKS", "0", 1);
    struct run ref = budget_run(0, in, &bands[0], &blocks[0]);
    unsetenv("NNT_ATTN_BAND_TASKS");
    struct run small = budget_run(12, in, &bands[1], &blocks[1]);
    struct run large = budget_run(64, in, &bands[2], &blocks[2]);
    int ncpu = 0, ncuda = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpu, &ncuda));
    ck_assert_msg(bands[1] == 0 && blocks[1] == blocks[0] && blocks[0] > 0,
                  "12 MiB: %lld band and %lld block tasks (%lld blocks without bands)",
                  bands[1], blocks[1], blocks[0]);
    /* the backward by band tasks where 2 runs keep the CPU workers busy (2 or fewer) */
    int bwd = backward_by_bands(1, ncpu, ncuda, 1, 1, 8, 8, RB_T, 128, 100, 64);
    ck_assert_msg(ncuda > 0 || (bands[2] == (bwd ? 2 : 1) * (RB_T / 128) &&
                                (blocks[2] == 0) == bwd),
                  "64 MiB: %lld band and %lld block tasks, %d CPU workers", bands[2],
                  blocks[2], ncpu);
    expect_same_bits("o, blocks under a 12 MiB budget", 0, ref.o, small.o, RB_N);
    expect_same_bits("dq, blocks under a 12 MiB budget", 0, ref.dq, small.dq, RB_N);
    expect_same_bits("dk, blocks under a 12 MiB budget", 0, ref.dk, small.dk, RB_N);
    EXPECT_TOL(fmax(test_rel_err(large.o, ref.o, RB_N), test_rel_err(large.dk, ref.dk, RB_N)),
               BAND_TOL, "o, dk: bands under 64 MiB");
    run_free(&ref), run_free(&small), run_free(&large);
    for (int i = 0; i < 4; i++)
        free((void *)in[i]);
}
END_TEST

/* With more CPU workers than the backward's band tasks have runs, the backward keeps the block
 * tasks (a diagonal's run in parallel): (B, 8, 512, 64) in sequence tiles of 128 with a window
 * of 100 (L 2: runs of at least 2 query tiles, 2 a (batch, head) tile) on 4 CPU workers
 * (STARPU_NCPU). B 1: 2 runs, the blocks (their task counts); B 2 in batch tiles of 1: 4, the
 * bands. The forward goes by band tasks either way; NNT_ATTN_BAND_TASKS=2 takes the
 * backward's band tasks for B 1 too. */
static struct run workers_run(int64_t B, const float *const *in, const char *band_tasks,
                              long long count[4])
{
    if (band_tasks)
        setenv("NNT_ATTN_BAND_TASKS", band_tasks, 1);
    struct run r = traced_window_run(B, in, count);
    unsetenv("NNT_ATTN_BAND_TASKS");
    return r;
}

START_TEST(band_tasks_keep_every_worker_busy)
{
    const char *old = getenv("STARPU_NCPU");
    char *saved = old ? strdup(old) : NULL;
    EXPECT_OK(nnt_ctx_destroy(ctx));
    setenv("STARPU_NCPU", "4", 1);
    ctx = test_ctx();
    if (saved)
        setenv("STARPU_NCPU", saved, 1);
    else
        unsetenv("STARPU_NCPU");
    free(saved);
    int ncpu = 0, ncuda = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpu, &ncuda));
    if (ncuda > 0 || ncpu < 3) {
        printf("test_ops_window band_tasks_keep_every_worker_busy: skipped: %d CPU and %d CUDA "
               "workers (4 CPU workers and no CUDA wanted)\n", ncpu, ncuda);
        return;
    }
    const float *in[4];
    for (int i = 0; i < 4; i++)
        in[i] = test_random_f32(2 * RB_N, 95 + (unsigned)i, -1, 1);
    for (int64_t B = 1; B <= 2; B++) {
        long long nb[4], nr[4];
        struct run blocks = workers_run(B, in, "0", nb), run = workers_run(B, in, NULL, nr);
        int want = backward_by_bands(1, ncpu, ncuda, B, 1, 8, 8, RB_T, 128, 100, 64);
        ck_assert_msg(nb[FWD_BANDS] == 0 && nb[BWD_BANDS] == 0 &&
                      nr[FWD_BANDS] == B * (RB_T / 128) && nr[FWD_BLOCKS] == 0 &&
                      nr[BWD_BANDS] == (want ? nr[FWD_BANDS] : 0) &&
                      (nr[BWD_BLOCKS] == 0) == want,
                      "B %d, %d CPU workers: %lld forward and %lld backward band tasks, %lld "
                      "backward block tasks", (int)B, ncpu, nr[FWD_BANDS], nr[BWD_BANDS],
                      nr[BWD_BLOCKS]);
        ck_assert_msg(want == (B == 2 && ncpu <= 4), "B %d: the rule's expectation", (int)B);
        const int64_t n = B * RB_N;
        double e = fmax(test_rel_err(run.o, blocks.o, n), test_rel_err(run.dq, blocks.dq, n));
        e = fmax(e, fmax(test_rel_err(run.dk, blocks.dk, n), test_rel_err(run.dv, blocks.dv, n)));
        EXPECT_TOL(e, BAND_TOL, "o, dq, dk, dv: band tasks vs blocks on 4 workers, B %d",
                   (int)B);
        if (!want) {   /* NNT_ATTN_BAND_TASKS=2: the band tasks whatever the workers */
            long long n2[4];
            struct run all = workers_run(B, in, "2", n2);
            ck_assert_msg(n2[BWD_BANDS] == n2[FWD_BANDS] && n2[BWD_BLOCKS] == 0,
                          "NNT_ATTN_BAND_TASKS=2, B %d: %lld backward band tasks, %lld "
                          "blocks", (int)B, n2[BWD_BANDS], n2[BWD_BLOCKS]);
            EXPECT_TOL(test_rel_err(all.dq, blocks.dq, n), BAND_TOL,
                       "dq, NNT_ATTN_BAND_TASKS=2, B %d", (int)B);
            run_free(&all);
        }
        run_free(&blocks), run_free(&run);
    }
    printf("test_ops_window band_tasks_keep_every_worker_busy: %d CPU workers: B 1 backward "
           "by blocks (by band tasks with NNT_ATTN_BAND_TASKS=2), B 2 by band tasks\n", ncpu);
    for (int i = 0; i < 4; i++)
        free((void *)in[i]);
}
END_TEST

/* The backward's band tasks only where a row chunk's kv rows fit a core's L2
 * (nnt_tensor_attention_ex(3)): heads of 256 under the smallest window (a multiple of 128)
 * whose five (W + 79, 256) float arrays exceed this host's L2, in sequence tiles of W / 2 (L
 * 3) over 8 query tiles and as many batch rows as keep the CPU workers' rule met: forward by
 * band tasks, backward by block tasks; NNT_ATTN_BAND_TASKS=2 takes band tasks both ways; the
 * two within float rounding. */
START_TEST(band_backward_needs_l2)
{
    const int64_t hd = 256;
    int64_t w = 128;
    while (band_rows_fit(w, 3, w / 2, hd))
        w += 128;
    int ncpu = 0, ncuda = 0;
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpu, &ncuda));
    if (ncuda > 0) {
        printf("test_ops_window band_backward_needs_l2: skipped: CUDA workers (blocks)\n");
        return;
    }
    const int64_t ts = w / 2, T = 8 * ts, B = ncpu > 2 ? (ncpu + 1) / 2 : 1;
    const int64_t shape[4] = {B, 1, T, hd}, tile[4] = {1, 1, ts, hd}, n = B * T * hd;
    ck_assert(backward_by_bands(1, ncpu, ncuda, B, 1, 1, 1, T, ts, w, hd) == 0 &&
              backward_by_bands(1, ncpu, ncuda, B, 1, 1, 1, T, ts, w, 64) == 1);
    float *in[4];
    for (int i = 0; i < 4; i++)
        in[i] = test_random_f32(n, 61 + (unsigned)i, -1, 1);
    struct run r[2];
    long long count[2][4];
    static const char *const codelets[4] = {"nnt_attn_fwd_band", "nnt_attn_bwd_band",
                                            "nnt_attn_fwd_block", "nnt_attn_bwd_block"};
    char path[64];
    snprintf(path, sizeof path, "/tmp/nnt-test-band-l2-%ld.txt", (long)getpid());
    for (int m = 0; m < 2; m++) {   /* the default, then NNT_ATTN_BAND_TASKS=2 */
        if (m)
            setenv("NNT_ATTN_BAND_TASKS", "2", 1);
        nnt_tensor *t[9];
        for (int i = 0; i < 8; i++)   /* q, k, v, dout, then o, dq, dk, dv */
            t[i] = tensor_f32(4, shape, tile, i < 4 ? in[i] : NULL);
        t[8] = tensor_f32(3, shape, tile, NULL);
        nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
        ao.window = w;
        EXPECT_OK(nnt_trace_start(ctx));
        EXPECT_OK(nnt_tensor_attention_ex(t[0], t[1], t[2], &ao, t[4], t[8]));
        EXPECT_OK(nnt_tensor_attention_backward_ex(t[0], t[1], t[2], t[4], t[8], t[3], &ao,
                                                   t[5], t[6], t[7]));
        EXPECT_OK(nnt_trace_stop(ctx, NULL, path));
        unsetenv("NNT_ATTN_BAND_TASKS");
        for (int c = 0; c < 4; c++)
            count[m][c] = test_traced_count(path, codelets[c]);
        struct run x = {to_host(t[4]), to_host(t[8]), to_host(t[5]), to_host(t[6]),
                        to_host(t[7]), NULL};
        r[m] = x;
        destroy_all(9, t);
    }
    remove(path);
    ck_assert_msg(count[0][FWD_BANDS] == B * 8 && count[0][BWD_BANDS] == 0 &&
                      count[0][BWD_BLOCKS] > 0,
                  "W %d, heads of 256, L2 %lld bytes: %lld forward and %lld backward band "
                  "tasks, %lld backward blocks", (int)w, (long long)l2_bytes(),
                  count[0][FWD_BANDS], count[0][BWD_BANDS], count[0][BWD_BLOCKS]);
    ck_assert_msg(count[1][BWD_BANDS] == B * 8 && count[1][BWD_BLOCKS] == 0,
                  "NNT_ATTN_BAND_TASKS=2: %lld backward band tasks, %lld blocks",
                  count[1][BWD_BANDS], count[1][BWD_BLOCKS]);
    double e = fmax(test_rel_err(r[1].o, r[0].o, n), test_rel_err(r[1].dq, r[0].dq, n));
    e = fmax(e, fmax(test_rel_err(r[1].dk, r[0].dk, n), test_rel_err(r[1].dv, r[0].dv, n)));
    EXPECT_TOL(e, BAND_TOL, "o, dq, dk, dv: backward by bands against blocks, heads of 256");
    printf("test_ops_window band_backward_needs_l2: L2 %lld bytes, W %d, heads of 256: "
           "backward by blocks (%lld tasks), by bands with NNT_ATTN_BAND_TASKS=2; %.2e apart\n",
           (long long)l2_bytes(), (int)w, count[0][BWD_BLOCKS], e);
    run_free(&r[0]), run_free(&r[1]);
    for (int i = 0; i < 4; i++)
        free(in[i]);
}
END_TEST

/* ---- queries after cached keys ---------------------------------------------------------- */

#define KQ 5    /* queries */
#define KK 17   /* rows of the cache (some after the last query: ignored) */

/* (past, window, cache T tile, q T tile) */
static const int64_t kv_cases[][4] = {
    {0, 3, 4, 2}, {6, 3, 4, 5}, {11, 1, 3, 1}, {9, 4, 17, 5}, {12, 6, 5, 3}, {7, 40, 4, 2},
};
#define KV_NC ((int)(sizeof kv_cases / sizeof *kv_cases))

/* Against the float64 reference, measured o 1.6e-7 (max over the cases). */
#define KV_TOL_O 1.6e-6

/* Rows of different lengths side by side (generation's batches): row b padded on the left
 * by kv_pads[b] positions, its pads an example of their own (positions 0, 1, ...), then its
 * tokens at positions 0, 1, ... (row 1's pads end inside the queries of most cases). */
static const int64_t kv_pads[WB] = {3, 9};

/* _i: a case of kv_cases, then the same cases with attention sinks (gpt-oss), then with the
 * queries' positions of left-padded rows (kv_pads; known on the host: key tiles wholly
 * before a query tile's examples get no task), every other one with sinks too */
START_TEST(window_kv_matches_reference)
{
    const int c = _i % KV_NC, padded = _i / KV_NC == 2;
    const int with_sinks = _i / KV_NC == 1 || (padded && c % 2);
    const int64_t nkv = 2, past = kv_cases[c][0], w = kv_cases[c][1];
    const int64_t qs[4] = {WB, WH, KQ, WD}, ks[4] = {WB, nkv, KK, WD};
    const int64_t qt[4] = {1, 3, kv_cases[c][3], WD}, kt[4] = {1, 1, kv_cases[c][2], 3};
    const int64_t ss[1] = {WH}, st[1] = {3};
    const int64_t nq = WB * WH * KQ * WD, nk = WB * nkv * KK * WD;
    const double scale = 0.4;
    float *q = test_random_f32(nq, 81, -1.5, 1.5), *k = test_random_f32(nk, 82, -1.5, 1.5),
          *v = test_random_f32(nk, 83, -1, 1), *sinks = test_random_f32(WH, 84, -1, 2.5);
    double *qd = test_to_double(q, nq), *kd = test_to_double(k, nk), *vd = test_to_double(v, nk),
           *o_ref = test_zeros(nq), *sd = test_to_double(sinks, WH);
    int32_t ex[WB * KQ];   /* the queries' positions in their rows' examples */
    for (int64_t b = 0; b < WB; b++)
        for (int64_t i = 0; i < KQ; i++)
            ex[b * KQ + i] = (int32_t)(past + i < kv_pads[b] ? past + i : past + i - kv_pads[b]);
    window_ref_sinks(WB, WH, nkv, KQ, KK, past, w, padded ? ex : NULL, WD, scale, 0.0,
                     with_sinks ? sd : NULL, qd, kd, vd, o_ref, NULL, NULL, NULL, NULL, NULL,
                     NULL);
    nnt_tensor *tq = tensor_f32(4, qs, qt, q), *tk = tensor_f32(4, ks, kt, k),
               *tv = tensor_f32(4, ks, kt, v), *to = tensor_f32(4, qs, qt, NULL),
               *ts = with_sinks ? tensor_f32(1, ss, st, sinks) : NULL, *tp = NULL;
    if (padded) {
        const int64_t ps[2] = {WB, KQ}, pt[2] = {qt[0], qt[2]};
        EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, ps, pt, &tp));
        EXPECT_OK(nnt_tensor_copy_from_host(tp, ex, sizeof ex));
    }
    nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    ao.scale = scale;
    ao.window = w;
    ao.sinks = ts;
    ao.positions = tp;
    EXPECT_OK(nnt_tensor_attention_kv_ex(tq, tk, tv, past, &ao, to));
    float *o = to_host(to);
    EXPECT_TOL(rel_err(o, o_ref, nq), KV_TOL_O, "kv o, past %d, W %d, sinks %d, padded %d",
               (int)past, (int)w, with_sinks, padded);
    if (w >= past + KQ && !with_sinks && !padded) {   /* every key seen: the plain op's bits */
        nnt_tensor *tp = tensor_f32(4, qs, qt, NULL);
        EXPECT_OK(nnt_tensor_attention_kv(tq, tk, tv, past, scale, tp));
        float *op = to_host(tp);
        expect_same_bits("kv o, W >= past + Tq vs plain", _i, op, o, nq);
        free(op);
        EXPECT_OK(nnt_tensor_destroy(tp));
    }
    nnt_tensor *all[6] = {tq, tk, tv, to, ts, tp};
    destroy_all(6, all);
    free(q), free(k), free(v), free(o), free(qd), free(kd), free(vd), free(o_ref);
    free(sinks), free(sd);
}
END_TEST

/* The cached attention of every position one query at a time equals the whole-sequence
 * op's rows (as generation uses it), bit for bit where the tiles agree. */
START_TEST(window_kv_rows_match_whole_sequence)
{
    const int64_t nkv = 2, w = 4, nk = WB * nkv * WT * WD;
    const int64_t qs[4] = {WB, WH, WT, WD}, ks[4] = {WB, nkv, WT, WD};
    const int64_t t[4] = {WB, WH, WT, WD}, kt[4] = {WB, nkv, WT, WD};
    float *q = test_random_f32(WNQ, 91, -1, 1), *k = test_random_f32(nk, 92, -1, 1),
          *v = test_random_f32(nk, 93, -1, 1);
    nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    ao.window = w;
    nnt_tensor *tq = tensor_f32(4, qs, t, q), *tk = tensor_f32(4, ks, kt, k),
               *tv = tensor_f32(4, ks, kt, v), *to = tensor_f32(4, qs, t, NULL),
               *tl = tensor_f32(3, qs, t, NULL), *tk2 = tensor_f32(4, qs, t, NULL);
    EXPECT_OK(nnt_tensor_attention_ex(tq, tk, tv, &ao, to, tl));
    EXPECT_OK(nnt_tensor_attention_kv_ex(tq, tk, tv, 0, &ao, tk2));
    float *a = to_host(to), *b = to_host(tk2);
    expect_same_bits("kv_ex (past 0) vs attention_ex", 0, a, b, WNQ);
    free(a), free(b);
    nnt_tensor *all[6] = {tq, tk, tv, to, tl, tk2};
    destroy_all(6, all);
    free(q), free(k), free(v);
}
END_TEST

START_TEST(window_rejects_bad_options)
{
    const int64_t qs[4] = {1, 2, 5, 4}, qt[4] = {1, 2, 3, 4};
    nnt_tensor *q = tensor_f32(4, qs, qt, NULL), *k = tensor_f32(4, qs, qt, NULL),
               *v = tensor_f32(4, qs, qt, NULL), *o = tensor_f32(4, qs, qt, NULL),
               *lse = tensor_f32(3, qs, qt, NULL), *dq = tensor_f32(4, qs, qt, NULL),
               *dk = tensor_f32(4, qs, qt, NULL), *dv = tensor_f32(4, qs, qt, NULL);
    EXPECT_OK(nnt_tensor_fill(q, 0.5f));
    EXPECT_OK(nnt_tensor_fill(k, 0.25f));
    EXPECT_OK(nnt_tensor_fill(v, 1.0f));
    nnt_tensor_attention_options ao = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    ao.window = -1;
    EXPECT_FAIL_MSG(nnt_tensor_attention_ex(q, k, v, &ao, o, lse), NNT_E_INVAL,
                    "nnt_tensor_attention_ex");
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv_ex(q, k, v, 0, &ao, o), NNT_E_INVAL,
                    "nnt_tensor_attention_kv_ex");
    ao.window = 2;
    ao.size = sizeof(size_t);
    EXPECT_FAIL_MSG(nnt_tensor_attention_ex(q, k, v, &ao, o, lse), NNT_E_INVAL,
                    "nnt_tensor_attention_ex");
    ao.size = sizeof ao;
    ao.scale = INFINITY;
    EXPECT_FAIL_MSG(nnt_tensor_attention_ex(q, k, v, &ao, o, lse), NNT_E_INVAL,
                    "nnt_tensor_attention_ex");
    ao.scale = 0.0;
    ao.softcap = -1.0;
    EXPECT_FAIL_MSG(nnt_tensor_attention_ex(q, k, v, &ao, o, lse), NNT_E_INVAL, "softcap");
    ao.softcap = NAN;
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv_ex(q, k, v, 0, &ao, o), NNT_E_INVAL, "softcap");
    ao.softcap = 0.0;
    EXPECT_FAIL_MSG(nnt_tensor_attention_ex(NULL, k, v, &ao, o, lse), NNT_E_INVAL,
                    "nnt_tensor_attention_ex");
    EXPECT_OK(nnt_tensor_attention_ex(q, k, v, NULL, o, lse));
    EXPECT_OK(nnt_tensor_attention_ex(q, k, v, &ao, o, lse));
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward_ex(q, k, v, o, lse, o, &ao, dq, dq, dv),
                    NNT_E_INVAL, "nnt_tensor_attention_backward_ex");
    ao.window = -3;
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward_ex(q, k, v, o, lse, o, &ao, dq, dk, dv),
                    NNT_E_INVAL, "nnt_tensor_attention_backward_ex");
    ao.window = 2;
    EXPECT_OK(nnt_tensor_attention_backward_ex(q, k, v, o, lse, o, &ao, dq, dk, dv));
    nnt_tensor *all[8] = {q, k, v, o, lse, dq, dk, dv};
    destroy_all(8, all);
}
END_TEST

static Suite *ops_window_suite(void)
{
    Suite *s = suite_create("ops_window");
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, window_matches_reference_for_every_tiling, 0, 3);
    tcase_add_test(tc, window_zero_is_plain_and_deterministic);
    tcase_add_loop_test(tc, softcap_matches_reference, 0, 3);
    tcase_add_loop_test(tc, band_tasks_match_blocks, 0, 3);
    tcase_add_test(tc, random_shapes_match_reference);
    tcase_add_test(tc, band_tasks_within_ram_budget);
    tcase_add_test(tc, band_tasks_keep_every_worker_busy);
    tcase_add_test(tc, band_backward_needs_l2);
    tcase_add_loop_test(tc, window_kv_matches_reference, 0, 3 * KV_NC);
    tcase_add_loop_test(tc, sinks_match_reference, 0, 3);
    tcase_add_test(tc, window_kv_rows_match_whole_sequence);
    tcase_add_test(tc, window_rejects_bad_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(ops_window_suite());
}
