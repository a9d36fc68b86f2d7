/* SPDX-License-Identifier: MIT */
/* Tensor operations of the network layers: LayerNorm, embedding, causal attention and
 * cross-entropy, forward and backward. Each op is compared with a float64 reference computed
 * here on the whole (untiled) tensors, for several tilings (a single tile, partial edge
 * tiles, split last dimensions that the op retiles or reduces over), and the tilings are
 * compared with each other. The float64 backward references are themselves checked against
 * central finite differences of the float64 forward references on tiny cases.
 *
 * LayerNorm is also run on rows of variance at most a few times eps, where eps decides the
 * result.
 *
 * Tolerances: per check, |got - want| <= tol (|want| + max|want|) with tol about 10x the
 * largest error measured for that check (TOL_* below: 5e-8 .. 2e-6 for the ops, errors
 * 5e-9 .. 1.7e-7 on Zen 3 with BLIS zen3/haswell/generic; the issue measured at most
 * 1.4e-7 on another host); the embedding forward is bit-exact. The references' gradients
 * agree with finite differences to 5e-10 .. 2e-9 (|fd - g| / (1 + |g|)). */
#include "testutil.h"

#include <math.h>
#include <stdint.h>

/* Tolerances, each about 10x the largest error measured for its check on Zen 3 under the
 * BLIS kernel sets zen3, haswell and generic (tests/tolerances.sh); only attention goes
 * through BLIS, and only generic changes its errors (the larger figure is given). Errors
 * are max |got - want| / (|want| + max |want|) (expect_close) or, for the finite
 * differences, max |fd - analytic| / (1 + |analytic|). */
/* the float64 references' gradients vs central differences (h = 1e-6): round-off of f / h */
#define TOL_FD_LN_DX 2e-9        /* measured 1.6e-10 */
#define TOL_FD_LN_DG 7e-10       /* measured 7.3e-11 */
#define TOL_FD_LN_DB 1.2e-9      /* measured 1.2e-10 */
#define TOL_FD_AT_DQ 2e-9        /* measured 2.2e-10 */
#define TOL_FD_AT_DK 2e-9        /* measured 2.1e-10 */
#define TOL_FD_AT_DV 1.3e-9      /* measured 1.3e-10 */
#define TOL_FD_XENT 5e-10        /* measured 5.3e-11 */
/* LayerNorm, variance about 2 */
#define TOL_LN_Y 8e-7            /* measured 7.7e-8 */
#define TOL_LN_MEAN 2e-7         /* measured 1.8e-8 */
#define TOL_LN_RSTD 2e-7         /* measured 1.9e-8 */
#define TOL_LN_DX 7e-7           /* measured 7.1e-8 */
#define TOL_LN_DG 8e-7           /* measured 8.2e-8 */
#define TOL_LN_DB 8e-7           /* measured 7.9e-8 */
#define TOL_LN_AGREE_DG 9e-7     /* measured 9.3e-8 (tilings vs tiling 0) */
#define TOL_LN_AGREE_DB 9e-7     /* measured 8.7e-8 */
/* LayerNorm, variance at most a few eps */
#define TOL_LNS_Y 8e-7           /* measured 7.8e-8 */
#define TOL_LNS_RSTD 3e-7        /* measured 2.7e-8 */
#define TOL_LNS_DX 6e-7          /* measured 5.6e-8 */
/* embedding (the forward is bit-exact) */
#define TOL_EM_DWTE 7e-7         /* measured 6.8e-8 */
#define TOL_EM_DWPE 4e-7         /* measured 3.6e-8 */
#define TOL_EM_AGREE_DWTE 5e-7   /* measured 4.8e-8 */
#define TOL_EM_AGREE_DWPE 4e-7   /* measured 4.1e-8 */
/* attention (BLIS zen3 = haswell / generic) */
#define TOL_AT_O 9e-7            /* measured 6.7e-8 / 8.9e-8 */
#define TOL_AT_LSE 5e-7          /* measured 4.0e-8 / 5.0e-8 */
#define TOL_AT_DQ 1e-6           /* measured 8.8e-8 / 9.4e-8 */
#define TOL_AT_DK 2e-6           /* measured 1.4e-7 / 1.7e-7 */
#define TOL_AT_DV 8e-7           /* measured 8.4e-8 / 8.4e-8 */
#define TOL_AT_AGREE_O 9e-7      /* measured 7.9e-8 / 8.9e-8 */
#define TOL_AT_AGREE_LSE 6e-7    /* measured 5.5e-8 / 5.5e-8 */
#define TOL_AT_AGREE_DQ 9e-7     /* measured 7.8e-8 / 9.1e-8 */
#define TOL_AT_AGREE_DK 1.2e-6   /* measured 8.8e-8 / 1.2e-7 */
#define TOL_AT_AGREE_DV 1e-6     /* measured 7.0e-8 / 9.5e-8 */
/* cross-entropy */
#define TOL_XE_LOSS 1.4e-7       /* measured 1.4e-8 */
#define TOL_XE_LSE 5e-8          /* measured 4.6e-9 */
#define TOL_XE_DX 6e-7           /* measured 5.8e-8 */
#define TOL_XE_AGREE_LOSS 1e-7   /* measured 1.1e-8 */
#define TOL_XE_AGREE_LSE 5e-8    /* measured 5.2e-9 */
#define TOL_XE_AGREE_DX 1e-6     /* measured 9.8e-8 */
#define TOL_XE_SMOOTH_LOSS 4.1e-7        /* eps 0.37: measured 4.1e-8 */
#define TOL_XE_SMOOTH_AGREE_LOSS 3.9e-7  /* measured 3.9e-8 */

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

static nnt_tensor *tensor_i32(int ndim, const int64_t *shape, const int64_t *tile,
                              const int32_t *data)
{
    nnt_tensor *t = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, ndim, shape, tile, &t));
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

/* |got - want| <= rtol (|want| + max |want|) everywhere: the error reported (NNT_TOL_REPORT)
 * is the largest |got - want| / (|want| + max |want|), against rtol; each call site reports
 * on its own line. */
#define expect_close(...) expect_close_at(__LINE__, __VA_ARGS__)
/* max |got - want| / (|want| + max |want|), and where (NaN: the first NaN) */
static double close_error(const float *got, const double *want, int64_t n, int64_t *iw)
{
    double amax = 0, worst = 0;
    *iw = 0;
    for (int64_t i = 0; i < n; i++)
        amax = fmax(amax, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]), den = fabs(want[i]) + amax;
        double e = den > 0 ? d / den : (d == 0 ? 0 : INFINITY);
        if (!(e <= worst)) {   /* also a NaN */
            worst = e, *iw = i;
            if (e != e)
                break;
        }
    }
    return worst;
}

static void expect_close_at(int line, const char *what, int tiling, const float *got,
                            const double *want, int64_t n, double rtol)
{
    int64_t iw;
    double worst = close_error(got, want, n, &iw);
    test_tol_note(__FILE__, line, worst, rtol);
    ck_assert_msg(worst <= rtol,
                  "%s, tiling %d, element %lld: got %.9g, want %.9g (error %.3g above %.3g)",
                  what, tiling, (long long)iw, n ? got[iw] : 0.0f, n ? want[iw] : 0.0, worst,
                  rtol);
}

/* Two tilings' results: bitwise equal when exact, else within rtol as in expect_close. */
#define expect_agree(...) expect_agree_at(__LINE__, __VA_ARGS__)
static void expect_agree_at(int line, const char *what, int tiling, const float *a,
                            const float *b, int64_t n, int exact, double rtol)
{
    if (exact) {
        ck_assert_msg(memcmp(a, b, (size_t)n * sizeof *a) == 0,
                      "%s: tiling %d differs bitwise from tiling 0", what, tiling);
        return;
    }
    double *ad = test_to_double(a, n);
    expect_close_at(line, what, tiling, b, ad, n, rtol);
    free(ad);
}

/* ---- float64 references ------------------------------------------------------------------ */

static void ln_fwd_ref(int64_t rows, int64_t c, const double *x, const double *gamma,
                       const double *beta, double eps, double *y, double *mean, double *rstd)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * c;
        double mu = 0, var = 0;
        for (int64_t j = 0; j < c; j++)
            mu += xr[j];
        mu /= (double)c;
        for (int64_t j = 0; j < c; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        double rs = 1.0 / sqrt(var / (double)c + eps);
        for (int64_t j = 0; j < c; j++)
            y[r * c + j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
        if (mean)
            mean[r] = mu;
        if (rstd)
            rstd[r] = rs;
    }
}

/* dx set; dgamma, dbeta += */
static void ln_bwd_ref(int64_t rows, int64_t c, const double *x, const double *gamma,
                       double eps, const double *dy, double *dx, double *dgamma, double *dbeta)
{
    double *y = malloc((size_t)c * sizeof *y), mu, rs;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * c, *dyr = dy + r * c;
        ln_fwd_ref(1, c, xr, gamma, gamma, eps, y, &mu, &rs);
        double mg = 0, mgx = 0;
        for (int64_t j = 0; j < c; j++) {
            double xh = (xr[j] - mu) * rs, g = dyr[j] * gamma[j];
            mg += g / (double)c;
            mgx += g * xh / (double)c;
            dgamma[j] += dyr[j] * xh;
            dbeta[j] += dyr[j];
        }
        for (int64_t j = 0; j < c; j++) {
            double xh = (xr[j] - mu) * rs;
            dx[r * c + j] = rs * (dyr[j] * gamma[j] - mg - xh * mgx);
        }
    }
    free(y);
}

/* q, k, v, o (nbh, t, hd); lse (nbh, t) */
static void attn_fwd_ref(int64_t nbh, int64_t t, int64_t hd, double scale, const double *q,
                         const double *k, const double *v, double *o, double *lse)
{
    double *p = malloc((size_t)t * sizeof *p);
    for (int64_t b = 0; b < nbh; b++)
        for (int64_t i = 0; i < t; i++) {
            const double *qi = q + (b * t + i) * hd;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j <= i; j++) {
                double s = 0;
                for (int64_t c = 0; c < hd; c++)
                    s += qi[c] * k[(b * t + j) * hd + c];
                p[j] = scale * s;
                mx = fmax(mx, p[j]);
            }
            for (int64_t j = 0; j <= i; j++)
                sum += (p[j] = exp(p[j] - mx));
            double *oi = o + (b * t + i) * hd;
            for (int64_t c = 0; c < hd; c++) {
                double acc = 0;
                for (int64_t j = 0; j <= i; j++)
                    acc += p[j] * v[(b * t + j) * hd + c];
                oi[c] = acc / sum;
            }
            if (lse)
                lse[b * t + i] = mx + log(sum);
        }
    free(p);
}

/* dq, dk, dv set */
static void attn_bwd_ref(int64_t nbh, int64_t t, int64_t hd, double scale, const double *q,
                         const double *k, const double *v, const double *dout, double *dq,
                         double *dk, double *dv)
{
    int64_t n = nbh * t * hd;
    double *o = malloc((size_t)n * sizeof *o), *lse = malloc((size_t)(nbh * t) * sizeof *lse);
    attn_fwd_ref(nbh, t, hd, scale, q, k, v, o, lse);
    memset(dq, 0, (size_t)n * sizeof *dq);
    memset(dk, 0, (size_t)n * sizeof *dk);
    memset(dv, 0, (size_t)n * sizeof *dv);
    for (int64_t b = 0; b < nbh; b++)
        for (int64_t i = 0; i < t; i++) {
            int64_t qi = (b * t + i) * hd;
            double d = 0;
            for (int64_t c = 0; c < hd; c++)
                d += dout[qi + c] * o[qi + c];
            for (int64_t j = 0; j <= i; j++) {
                int64_t kj = (b * t + j) * hd;
                double s = 0, dp = 0;
                for (int64_t c = 0; c < hd; c++) {
                    s += q[qi + c] * k[kj + c];
                    dp += dout[qi + c] * v[kj + c];
                }
                double p = exp(scale * s - lse[b * t + i]), ds = p * (dp - d);
                for (int64_t c = 0; c < hd; c++) {
                    dv[kj + c] += p * dout[qi + c];
                    dq[qi + c] += scale * ds * k[kj + c];
                    dk[kj + c] += scale * ds * q[qi + c];
                }
            }
        }
    free(o);
    free(lse);
}

/* The cross-entropy against (1 - eps) onehot + eps / nv: (1 - eps) (lse - x_t) +
 * eps (lse - mean x) (eps 0: the plain one). */
static void xent_fwd_ref(int64_t rows, int64_t nv, const double *x, const int32_t *tg,
                         int32_t ignore, double eps, double *loss, double *lse)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * nv;
        double mx = -INFINITY, sum = 0, sumx = 0;
        for (int64_t j = 0; j < nv; j++)
            mx = fmax(mx, xr[j]), sumx += xr[j];
        for (int64_t j = 0; j < nv; j++)
            sum += exp(xr[j] - mx);
        double l = mx + log(sum);
        if (lse)
            lse[r] = l;
        loss[r] = tg[r] == ignore ? 0.0 : (1 - eps) * (l - xr[tg[r]]) + eps * (l - sumx / nv);
    }
}

/* scale w[r] (softmax - (1 - eps) onehot - eps / nv); w NULL: 1 */
static void xent_bwd_ref(int64_t rows, int64_t nv, const double *x, const int32_t *tg,
                         int32_t ignore, double eps, double scale, const float *w, double *dx)
{
    double *loss = malloc((size_t)rows * sizeof *loss), *lse = malloc((size_t)rows * sizeof *lse);
    xent_fwd_ref(rows, nv, x, tg, ignore, eps, loss, lse);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < nv; j++)
            dx[r * nv + j] = tg[r] == ignore ? 0.0
                             : scale * (w ? w[r] : 1.0) *
                                   (exp(x[r * nv + j] - lse[r]) - (1 - eps) * (j == tg[r]) -
                                    eps / nv);
    free(loss);
    free(lse);
}

/* ---- the references' gradients against finite differences -------------------------------- */

/* Central difference of f along element i of p, with f = sum(out * w). */
typedef double (*scalar_fn)(void *ctx);

static double fd(scalar_fn f, void *c, double *p, int64_t i)
{
    const double h = 1e-6;
    double keep = p[i];
    p[i] = keep + h;
    double up = f(c);
    p[i] = keep - h;
    double down = f(c);
    p[i] = keep;
    return (up - down) / (2 * h);
}

/* |fd - grad| <= tol (1 + |grad|) everywhere; the largest |fd - grad| / (1 + |grad|) is
 * reported per call site. */
#define expect_fd(...) expect_fd_at(__LINE__, __VA_ARGS__)
static void expect_fd_at(int line, const char *what, scalar_fn f, void *c, double *p,
                         const double *grad, int64_t n, double tol)
{
    double worst = 0, num_w = 0;
    int64_t iw = 0;
    for (int64_t i = 0; i < n; i++) {
        double num = fd(f, c, p, i), e = fabs(num - grad[i]) / (1 + fabs(grad[i]));
        if (!(e <= worst))
            worst = e, iw = i, num_w = num;
    }
    test_tol_note(__FILE__, line, worst, tol);
    ck_assert_msg(worst <= tol,
                  "%s[%lld]: analytic %.12g, finite difference %.12g (error %.3g above %.3g)",
                  what, (long long)iw, n ? grad[iw] : 0.0, num_w, worst, tol);
}

struct ln_case {
    int64_t rows, c;
    double x[10], gamma[5], beta[5], w[10];
};

static double ln_loss(void *p)
{
    struct ln_case *s = p;
    double y[10], sum = 0;
    ln_fwd_ref(s->rows, s->c, s->x, s->gamma, s->beta, 1e-5, y, NULL, NULL);
    for (int i = 0; i < 10; i++)
        sum += y[i] * s->w[i];
    return sum;
}

struct attn_case {
    int64_t nbh, t, hd;
    double q[24], k[24], v[24], w[24];
};

static double attn_loss(void *p)
{
    struct attn_case *s = p;
    double o[24], sum = 0;
    attn_fwd_ref(s->nbh, s->t, s->hd, 0.7, s->q, s->k, s->v, o, NULL);
    for (int i = 0; i < 24; i++)
        sum += o[i] * s->w[i];
    return sum;
}

struct xent_case {
    double x[12];
    int32_t tg[3];
    double eps;
    float w[3];
};

static double xent_loss(void *p)
{
    struct xent_case *s = p;
    double loss[3];
    xent_fwd_ref(3, 4, s->x, s->tg, -100, s->eps, loss, NULL);
    return 0.25 * (s->w[0] * loss[0] + s->w[1] * loss[1] + s->w[2] * loss[2]);
}

START_TEST(references_match_finite_differences)
{
    unsigned long long st = 77;
    struct ln_case ln = {2, 5, {0}, {0}, {0}, {0}};
    for (int i = 0; i < 10; i++) {
        ln.x[i] = 4 * test_rand(&st) - 2;
        ln.w[i] = 2 * test_rand(&st) - 1;
    }
    for (int i = 0; i < 5; i++) {
        ln.gamma[i] = 0.5 + test_rand(&st);
        ln.beta[i] = test_rand(&st) - 0.5;
    }
    double dx[10], dg[5] = {0}, db[5] = {0};
    ln_bwd_ref(2, 5, ln.x, ln.gamma, 1e-5, ln.w, dx, dg, db);
    expect_fd("layernorm dx", ln_loss, &ln, ln.x, dx, 10, TOL_FD_LN_DX);
    expect_fd("layernorm dgamma", ln_loss, &ln, ln.gamma, dg, 5, TOL_FD_LN_DG);
    expect_fd("layernorm dbeta", ln_loss, &ln, ln.beta, db, 5, TOL_FD_LN_DB);

    struct attn_case at = {2, 4, 3, {0}, {0}, {0}, {0}};
    for (int i = 0; i < 24; i++) {
        at.q[i] = 2 * test_rand(&st) - 1;
        at.k[i] = 2 * test_rand(&st) - 1;
        at.v[i] = 2 * test_rand(&st) - 1;
        at.w[i] = 2 * test_rand(&st) - 1;
    }
    double dq[24], dk[24], dv[24];
    attn_bwd_ref(2, 4, 3, 0.7, at.q, at.k, at.v, at.w, dq, dk, dv);
    expect_fd("attention dq", attn_loss, &at, at.q, dq, 24, TOL_FD_AT_DQ);
    expect_fd("attention dk", attn_loss, &at, at.k, dk, 24, TOL_FD_AT_DK);
    expect_fd("attention dv", attn_loss, &at, at.v, dv, 24, TOL_FD_AT_DV);

    struct xent_case xc = {{0}, {2, -100, 0}, 0.0, {1, 1, 1}};
    for (int i = 0; i < 12; i++)
        xc.x[i] = 6 * test_rand(&st) - 3;
    double dl[12];
    xent_bwd_ref(3, 4, xc.x, xc.tg, -100, 0.0, 0.25, NULL, dl);
    expect_fd("cross-entropy dlogits", xent_loss, &xc, xc.x, dl, 12, TOL_FD_XENT);
    /* label smoothing 0.3, rows weighted */
    xc.eps = 0.3, xc.w[0] = 0.7f, xc.w[1] = 2.0f, xc.w[2] = -1.5f;
    xent_bwd_ref(3, 4, xc.x, xc.tg, -100, 0.3, 0.25, xc.w, dl);
    expect_fd("smoothed cross-entropy dlogits", xent_loss, &xc, xc.x, dl, 12, TOL_FD_XENT);
}
END_TEST

/* ---- LayerNorm ----------------------------------------------------------------------------- */

#define LN_B 3
#define LN_T 7
#define LN_C 37
#define LN_ROWS (LN_B * LN_T)
#define LN_N (LN_ROWS * LN_C)

/* x tile (B, T, C) and gamma/beta/dgamma/dbeta tile (C) */
static const int64_t ln_tilings[][4] = {
    {3, 7, 37, 37},   /* one tile                                   */
    {2, 3, 37, 37},   /* partial row tiles                          */
    {1, 4, 10, 10},   /* C split: retiled; gamma split              */
    {2, 7, 16, 37},   /* C split with a partial C tile              */
    {3, 2, 37, 8},    /* whole rows, gamma split                    */
};
#define LN_NT ((int)(sizeof ln_tilings / sizeof *ln_tilings))

START_TEST(layernorm_matches_reference_for_every_tiling)
{
    const int64_t xs[3] = {LN_B, LN_T, LN_C}, cs[1] = {LN_C};
    const double eps = 1e-5;
    float *x = test_random_f32(LN_N, 1, -2, 3), *gamma = test_random_f32(LN_C, 2, 0.5, 1.5),
          *beta = test_random_f32(LN_C, 3, -0.5, 0.5), *dy = test_random_f32(LN_N, 4, -1, 1),
          *dg0 = test_random_f32(LN_C, 5, -1, 1), *db0 = test_random_f32(LN_C, 6, -1, 1);
    double *xd = test_to_double(x, LN_N), *gd = test_to_double(gamma, LN_C), *bd = test_to_double(beta, LN_C),
           *dyd = test_to_double(dy, LN_N);
    double *y_ref = test_zeros(LN_N), *mean_ref = test_zeros(LN_ROWS), *rstd_ref = test_zeros(LN_ROWS),
           *dx_ref = test_zeros(LN_N), *dg_ref = test_to_double(dg0, LN_C), *db_ref = test_to_double(db0, LN_C);
    ln_fwd_ref(LN_ROWS, LN_C, xd, gd, bd, eps, y_ref, mean_ref, rstd_ref);
    ln_bwd_ref(LN_ROWS, LN_C, xd, gd, eps, dyd, dx_ref, dg_ref, db_ref);

    float *first[6] = {NULL};
    for (int k = 0; k < LN_NT; k++) {
        const int64_t *tl = ln_tilings[k], ct[1] = {tl[3]};
        nnt_tensor *tx = tensor_f32(3, xs, tl, x), *tg = tensor_f32(1, cs, ct, gamma),
                   *tb = tensor_f32(1, cs, ct, beta), *ty = tensor_f32(3, xs, tl, NULL),
                   *tm = tensor_f32(2, xs, tl, NULL), *tr = tensor_f32(2, xs, tl, NULL),
                   *tdy = tensor_f32(3, xs, tl, dy), *tdx = tensor_f32(3, xs, tl, NULL),
                   *tdg = tensor_f32(1, cs, ct, dg0), *tdb = tensor_f32(1, cs, ct, db0);
        EXPECT_OK(nnt_tensor_layernorm(tx, tg, tb, eps, ty, tm, tr));
        EXPECT_OK(nnt_tensor_layernorm_backward(tx, tg, tm, tr, tdy, tdx, tdg, tdb));
        float *got[6] = {to_host(ty), to_host(tm), to_host(tr), to_host(tdx), to_host(tdg),
                         to_host(tdb)};
        expect_close("layernorm y", k, got[0], y_ref, LN_N, TOL_LN_Y);
        expect_close("layernorm mean", k, got[1], mean_ref, LN_ROWS, TOL_LN_MEAN);
        expect_close("layernorm rstd", k, got[2], rstd_ref, LN_ROWS, TOL_LN_RSTD);
        expect_close("layernorm dx", k, got[3], dx_ref, LN_N, TOL_LN_DX);
        expect_close("layernorm dgamma", k, got[4], dg_ref, LN_C, TOL_LN_DG);
        expect_close("layernorm dbeta", k, got[5], db_ref, LN_C, TOL_LN_DB);
        static const int64_t sizes[4] = {LN_N, LN_ROWS, LN_ROWS, LN_N};
        if (k == 0) {
            memcpy(first, got, sizeof got);
        } else {
            /* whole rows always: forward and dx are bitwise tiling-invariant; dgamma and
             * dbeta sum over row tiles in a tiling-dependent grouping */
            for (int i = 0; i < 4; i++)
                expect_agree("layernorm output", k, first[i], got[i], sizes[i], 1, 0.0);
            expect_agree("layernorm dgamma", k, first[4], got[4], LN_C, 0, TOL_LN_AGREE_DG);
            expect_agree("layernorm dbeta", k, first[5], got[5], LN_C, 0, TOL_LN_AGREE_DB);
            for (int i = 0; i < 6; i++)
                free(got[i]);
        }
        nnt_tensor *all[10] = {tx, tg, tb, ty, tm, tr, tdy, tdx, tdg, tdb};
        for (int i = 0; i < 10; i++)
            EXPECT_OK(nnt_tensor_destroy(all[i]));
    }
    for (int i = 0; i < 6; i++)
        free(first[i]);
    free(x), free(gamma), free(beta), free(dy), free(dg0), free(db0);
    free(xd), free(gd), free(bd), free(dyd);
    free(y_ref), free(mean_ref), free(rstd_ref), free(dx_ref), free(dg_ref), free(db_ref);
}
END_TEST

/* Rows whose variance is at most a few times eps (spreads 1e-3..1e-2, one constant row):
 * there eps sets rstd (1/sqrt(eps) for the constant row), so LayerNorm without eps, or with
 * the variance over n - 1, is far off; in the test above (variance about 2) eps changes the
 * outputs by only ~2.5e-6 relative. */
#define LNS_B 2
#define LNS_T 5
#define LNS_ROWS (LNS_B * LNS_T)
#define LNS_N (LNS_ROWS * LN_C)

START_TEST(layernorm_eps_dominates_small_variance)
{
    const int64_t xs[3] = {LNS_B, LNS_T, LN_C}, cs[1] = {LN_C};
    static const int64_t tilings[2][4] = {{2, 5, 37, 37}, {1, 3, 10, 10}};
    static const double spread[LNS_ROWS] = {1e-3, 3e-4, 0, 3e-3, 1e-2,
                                            2e-3, 5e-4, 1e-3, 0, 6e-3};
    const double eps = 1e-5;
    float *x = test_random_f32(LNS_N, 51, -1, 1), *gamma = test_random_f32(LN_C, 52, 0.5, 1.5),
          *beta = test_random_f32(LN_C, 53, -0.5, 0.5), *dy = test_random_f32(LNS_N, 54, -1, 1);
    for (int r = 0; r < LNS_ROWS; r++)
        for (int j = 0; j < LN_C; j++)   /* offsets 0, +-0.01 */
            x[r * LN_C + j] = (float)(0.01 * (r % 3 - 1) + spread[r] * x[r * LN_C + j]);
    double *xd = test_to_double(x, LNS_N), *gd = test_to_double(gamma, LN_C),
           *bd = test_to_double(beta, LN_C), *dyd = test_to_double(dy, LNS_N);
    double *y_ref = test_zeros(LNS_N), *rstd_ref = test_zeros(LNS_ROWS), *dx_ref = test_zeros(LNS_N),
           *dg_ref = test_zeros(LN_C), *db_ref = test_zeros(LN_C);
    ln_fwd_ref(LNS_ROWS, LN_C, xd, gd, bd, eps, y_ref, NULL, rstd_ref);
    ln_bwd_ref(LNS_ROWS, LN_C, xd, gd, eps, dyd, dx_ref, dg_ref, db_ref);
    for (int k = 0; k < 2; k++) {
        const int64_t *tl = tilings[k], ct[1] = {tl[3]};
        nnt_tensor *tx = tensor_f32(3, xs, tl, x), *tg = tensor_f32(1, cs, ct, gamma),
                   *tb = tensor_f32(1, cs, ct, beta), *ty = tensor_f32(3, xs, tl, NULL),
                   *tm = tensor_f32(2, xs, tl, NULL), *tr = tensor_f32(2, xs, tl, NULL),
                   *tdy = tensor_f32(3, xs, tl, dy), *tdx = tensor_f32(3, xs, tl, NULL),
                   *tdg = tensor_f32(1, cs, ct, NULL), *tdb = tensor_f32(1, cs, ct, NULL);
        EXPECT_OK(nnt_tensor_fill(tdg, 0));
        EXPECT_OK(nnt_tensor_fill(tdb, 0));
        EXPECT_OK(nnt_tensor_layernorm(tx, tg, tb, eps, ty, tm, tr));
        EXPECT_OK(nnt_tensor_layernorm_backward(tx, tg, tm, tr, tdy, tdx, tdg, tdb));
        float *y = to_host(ty), *rstd = to_host(tr), *dx = to_host(tdx);
        expect_close("small-variance layernorm y", k, y, y_ref, LNS_N, TOL_LNS_Y);
        expect_close("small-variance layernorm rstd", k, rstd, rstd_ref, LNS_ROWS,
                     TOL_LNS_RSTD);
        expect_close("small-variance layernorm dx", k, dx, dx_ref, LNS_N, TOL_LNS_DX);
        free(y), free(rstd), free(dx);
        nnt_tensor *all[10] = {tx, tg, tb, ty, tm, tr, tdy, tdx, tdg, tdb};
        for (int i = 0; i < 10; i++)
            EXPECT_OK(nnt_tensor_destroy(all[i]));
    }
    free(x), free(gamma), free(beta), free(dy), free(xd), free(gd), free(bd), free(dyd);
    free(y_ref), free(rstd_ref), free(dx_ref), free(dg_ref), free(db_ref);
}
END_TEST

START_TEST(layernorm_is_deterministic)
{
    const int64_t xs[2] = {40, 24}, tl[2] = {7, 24}, cs[1] = {24};
    float *x = test_random_f32(960, 8, -1, 1), *dy = test_random_f32(960, 9, -1, 1);
    nnt_tensor *tx = tensor_f32(2, xs, tl, x), *tg = tensor_f32(1, cs, NULL, NULL),
               *tb = tensor_f32(1, cs, NULL, NULL), *ty = tensor_f32(2, xs, tl, NULL),
               *tm = tensor_f32(1, xs, tl, NULL), *tr = tensor_f32(1, xs, tl, NULL),
               *tdy = tensor_f32(2, xs, tl, dy), *tdx = tensor_f32(2, xs, tl, NULL),
               *tdg = tensor_f32(1, cs, NULL, NULL), *tdb = tensor_f32(1, cs, NULL, NULL);
    EXPECT_OK(nnt_tensor_fill(tg, 1.25));
    EXPECT_OK(nnt_tensor_fill(tb, -0.5));
    float *dg[3];
    for (int run = 0; run < 3; run++) {
        EXPECT_OK(nnt_tensor_fill(tdg, 0));
        EXPECT_OK(nnt_tensor_fill(tdb, 0));
        EXPECT_OK(nnt_tensor_layernorm(tx, tg, tb, 1e-5, ty, tm, tr));
        EXPECT_OK(nnt_tensor_layernorm_backward(tx, tg, tm, tr, tdy, tdx, tdg, tdb));
        dg[run] = to_host(tdg);
    }
    ck_assert_int_eq(memcmp(dg[0], dg[1], 24 * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(dg[0], dg[2], 24 * sizeof(float)), 0);
    for (int run = 0; run < 3; run++)
        free(dg[run]);
    nnt_tensor *all[10] = {tx, tg, tb, ty, tm, tr, tdy, tdx, tdg, tdb};
    for (int i = 0; i < 10; i++)
        EXPECT_OK(nnt_tensor_destroy(all[i]));
    free(x), free(dy);
}
END_TEST

START_TEST(layernorm_rejects_bad_arguments)
{
    const char *fn = "nnt_tensor_layernorm", *bfn = "nnt_tensor_layernorm_backward";
    const int64_t xs[3] = {2, 3, 8}, xt[3] = {1, 2, 8}, cs[1] = {8};
    nnt_tensor *x = tensor_f32(3, xs, xt, NULL), *g = tensor_f32(1, cs, NULL, NULL),
               *b = tensor_f32(1, cs, NULL, NULL), *y = tensor_f32(3, xs, xt, NULL),
               *m = tensor_f32(2, xs, xt, NULL), *r = tensor_f32(2, xs, xt, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(x, g, b, 1e-5, y, m, r), NNT_E_STATE, fn);
    EXPECT_OK(nnt_tensor_fill(x, 1));
    EXPECT_OK(nnt_tensor_fill(g, 1));
    EXPECT_OK(nnt_tensor_fill(b, 0));
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(NULL, g, b, 1e-5, y, m, r), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(x, g, b, 1e-5, y, m, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(x, g, b, -1, y, m, r), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(x, g, b, 1e-5, x, m, r), NNT_E_INVAL, fn);
    nnt_tensor *xi = tensor_i32(3, xs, xt, NULL), *g7 = tensor_f32(1, (int64_t[]){7}, NULL, NULL),
               *ybad = tensor_f32(3, xs, (int64_t[]){2, 2, 8}, NULL),
               *mbad = tensor_f32(2, xs, (int64_t[]){2, 3}, NULL),
               *x1 = tensor_f32(1, cs, NULL, NULL);
    EXPECT_OK(nnt_tensor_fill(xi, 1));
    EXPECT_OK(nnt_tensor_fill(g7, 1));
    EXPECT_OK(nnt_tensor_fill(x1, 1));
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(xi, g, b, 1e-5, y, m, r), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(x, g7, b, 1e-5, y, m, r), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(x, g, b, 1e-5, ybad, m, r), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(x, g, b, 1e-5, y, mbad, r), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm(x1, g, b, 1e-5, g7, m, r), NNT_E_SHAPE, fn);
    EXPECT_OK(nnt_tensor_layernorm(x, g, b, 1e-5, y, m, r));
    EXPECT_OK(nnt_tensor_fill(mbad, 1));
    nnt_tensor *dx = tensor_f32(3, xs, xt, NULL), *dg = tensor_f32(1, cs, NULL, NULL),
               *db = tensor_f32(1, cs, NULL, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm_backward(x, g, m, r, y, dx, dg, db), NNT_E_STATE, bfn);
    EXPECT_OK(nnt_tensor_fill(dg, 0));
    EXPECT_OK(nnt_tensor_fill(db, 0));
    EXPECT_FAIL_MSG(nnt_tensor_layernorm_backward(x, g, m, r, y, dx, NULL, db), NNT_E_INVAL,
                    bfn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm_backward(x, g, m, r, y, y, dg, db), NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm_backward(x, g, m, r, y, dx, g7, db), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm_backward(x, g, mbad, r, y, dx, dg, db), NNT_E_SHAPE,
                    bfn);
    EXPECT_FAIL_MSG(nnt_tensor_layernorm_backward(x, g, m, r, y, ybad, dg, db), NNT_E_SHAPE,
                    bfn);
    EXPECT_OK(nnt_tensor_layernorm_backward(x, g, m, r, y, dx, dg, db));
    nnt_tensor *all[15] = {x, g, b, y, m, r, xi, g7, ybad, mbad, x1, dx, dg, db, NULL};
    for (int i = 0; i < 15; i++)
        EXPECT_OK(nnt_tensor_destroy(all[i]));
}
END_TEST

/* ---- embedding ----------------------------------------------------------------------------- */

#define EM_B 3
#define EM_T 9
#define EM_C 13
#define EM_V 11
#define EM_MAXT 12

/* out tile (B, T, C), then the wte vocabulary tile; wpe tiles are (T tile, C tile) */
static const int64_t em_tilings[][4] = {
    {3, 9, 13, 11},   /* one tile (wpe: rows 9 + 3)                     */
    {2, 4, 5, 4},     /* partial tiles everywhere, V split               */
    {1, 9, 13, 3},    /* V split in four, C whole                        */
    {3, 2, 6, 11},    /* C split, T tiles of 2                           */
};
#define EM_NT ((int)(sizeof em_tilings / sizeof *em_tilings))

/* out[b,t,:] = wte[tok] (0 outside [0, V)) + wpe[t] (if any), rounded to float */
static void em_fwd_ref(const int32_t *tok, const float *wte, const float *wpe, double *out)
{
    for (int64_t bt = 0; bt < EM_B * EM_T; bt++)
        for (int64_t c = 0; c < EM_C; c++) {
            int32_t id = tok[bt];
            double v = id >= 0 && id < EM_V ? wte[id * EM_C + c] : 0.0;
            /* one float addition: the op's result is exact to that rounding */
            out[bt * EM_C + c] = (float)(v + (wpe ? wpe[(bt % EM_T) * EM_C + c] : 0.0));
        }
}

static void em_bwd_ref(const int32_t *tok, const float *dout, double *dwte, double *dwpe)
{
    for (int64_t bt = 0; bt < EM_B * EM_T; bt++)
        for (int64_t c = 0; c < EM_C; c++) {
            int32_t id = tok[bt];
            if (id >= 0 && id < EM_V)
                dwte[id * EM_C + c] += dout[bt * EM_C + c];
            if (dwpe)
                dwpe[(bt % EM_T) * EM_C + c] += dout[bt * EM_C + c];
        }
}

START_TEST(embedding_matches_reference_for_every_tiling)
{
    int with_wpe = _i;   /* 0: wpe and dwpe NULL */
    const int64_t ts[2] = {EM_B, EM_T}, os[3] = {EM_B, EM_T, EM_C}, vs[2] = {EM_V, EM_C},
                  ps[2] = {EM_MAXT, EM_C};
    const int64_t n = EM_B * EM_T * EM_C, nv = EM_V * EM_C, np = EM_MAXT * EM_C;
    int32_t tok[EM_B * EM_T];
    unsigned long long st = 42;
    for (int i = 0; i < EM_B * EM_T; i++)   /* 27 tokens over 11 ids: many repeats */
        tok[i] = (int32_t)(test_rand(&st) * EM_V);
    tok[4] = -1, tok[13] = EM_V, tok[20] = 100000;   /* outside the table: zero rows */
    tok[1] = tok[2] = tok[3] = 5;
    float *wte = test_random_f32(nv, 11, -1, 1), *wpe = test_random_f32(np, 12, -1, 1),
          *dout = test_random_f32(n, 13, -1, 1), *dwte0 = test_random_f32(nv, 14, -1, 1),
          *dwpe0 = test_random_f32(np, 15, -1, 1);
    double *out_ref = test_zeros(n), *dwte_ref = test_to_double(dwte0, nv), *dwpe_ref = test_to_double(dwpe0, np);
    em_fwd_ref(tok, wte, with_wpe ? wpe : NULL, out_ref);
    em_bwd_ref(tok, dout, dwte_ref, with_wpe ? dwpe_ref : NULL);

    float *first[3] = {NULL};
    for (int k = 0; k < EM_NT; k++) {
        const int64_t *tl = em_tilings[k], wt[2] = {tl[3], tl[2]}, pt[2] = {tl[1], tl[2]};
        nnt_tensor *ttok = tensor_i32(2, ts, tl, tok), *twte = tensor_f32(2, vs, wt, wte),
                   *twpe = with_wpe ? tensor_f32(2, ps, pt, wpe) : NULL,
                   *tout = tensor_f32(3, os, tl, NULL), *tdout = tensor_f32(3, os, tl, dout),
                   *tdwte = tensor_f32(2, vs, wt, dwte0),
                   *tdwpe = with_wpe ? tensor_f32(2, ps, pt, dwpe0) : NULL;
        EXPECT_OK(nnt_tensor_embedding(ttok, twte, twpe, tout));
        EXPECT_OK(nnt_tensor_embedding_backward(ttok, tdout, tdwte, tdwpe));
        float *got[3] = {to_host(tout), to_host(tdwte), with_wpe ? to_host(tdwpe) : NULL};
        expect_close("embedding out", k, got[0], out_ref, n, 0.0);   /* bit-exact */
        expect_close("embedding dwte", k, got[1], dwte_ref, nv, TOL_EM_DWTE);
        if (with_wpe)
            expect_close("embedding dwpe", k, got[2], dwpe_ref, np, TOL_EM_DWPE);
        if (k == 0) {
            memcpy(first, got, sizeof got);
        } else {
            expect_agree("embedding out", k, first[0], got[0], n, 1, 0.0);
            expect_agree("embedding dwte", k, first[1], got[1], nv, 0, TOL_EM_AGREE_DWTE);
            if (with_wpe)
                expect_agree("embedding dwpe", k, first[2], got[2], np, 0, TOL_EM_AGREE_DWPE);
            for (int i = 0; i < 3; i++)
                free(got[i]);
        }
        nnt_tensor *all[7] = {ttok, twte, twpe, tout, tdout, tdwte, tdwpe};
        for (int i = 0; i < 7; i++)
            EXPECT_OK(nnt_tensor_destroy(all[i]));
    }
    for (int i = 0; i < 3; i++)
        free(first[i]);
    free(wte), free(wpe), free(dout), free(dwte0), free(dwpe0);
    free(out_ref), free(dwte_ref), free(dwpe_ref);
}
END_TEST

START_TEST(embedding_rejects_bad_arguments)
{
    const char *fn = "nnt_tensor_embedding", *bfn = "nnt_tensor_embedding_backward";
    const int64_t ts[2] = {2, 6}, tt[2] = {1, 3}, os[3] = {2, 6, 8}, ot[3] = {1, 3, 4},
                  vs[2] = {10, 8}, vt[2] = {5, 4}, ps[2] = {8, 8}, pt[2] = {3, 4};
    nnt_tensor *tok = tensor_i32(2, ts, tt, NULL), *wte = tensor_f32(2, vs, vt, NULL),
               *wpe = tensor_f32(2, ps, pt, NULL), *out = tensor_f32(3, os, ot, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_embedding(tok, wte, wpe, out), NNT_E_STATE, fn);
    EXPECT_OK(nnt_tensor_fill(tok, 3));
    EXPECT_OK(nnt_tensor_fill(wte, 1));
    EXPECT_OK(nnt_tensor_fill(wpe, 1));
    nnt_tensor *tokf = tensor_f32(2, ts, tt, NULL),
               *wpe_short = tensor_f32(2, (int64_t[]){5, 8}, pt, NULL),
               *wpe_rows = tensor_f32(2, ps, (int64_t[]){2, 4}, NULL),
               *wte_c = tensor_f32(2, vs, (int64_t[]){5, 8}, NULL),
               *out_bt = tensor_f32(3, os, (int64_t[]){2, 3, 4}, NULL),
               *out2 = tensor_f32(2, ts, NULL, NULL);
    nnt_tensor *filled[4] = {tokf, wpe_short, wpe_rows, wte_c};
    for (int i = 0; i < 4; i++)
        EXPECT_OK(nnt_tensor_fill(filled[i], 0));
    EXPECT_FAIL_MSG(nnt_tensor_embedding(NULL, wte, wpe, out), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding(tok, wte, wpe, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding(tokf, wte, wpe, out), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding(tok, wte, wpe_short, out), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding(tok, wte, wpe_rows, out), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding(tok, wte_c, wpe, out), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding(tok, wte, wpe, out_bt), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding(tok, wte, wpe, out2), NNT_E_SHAPE, fn);
    EXPECT_OK(nnt_tensor_embedding(tok, wte, wpe, out));
    EXPECT_OK(nnt_tensor_embedding(tok, wte, NULL, out));
    EXPECT_FAIL_MSG(nnt_tensor_embedding_backward(tok, out, NULL, wpe), NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding_backward(tok, out, wte, wte), NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding_backward(tok, out, wte_c, wpe), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding_backward(tok, out, wte, wpe_rows), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_embedding_backward(tok, out_bt, wte, wpe), NNT_E_STATE, bfn);
    EXPECT_OK(nnt_tensor_embedding_backward(tok, out, wte, wpe));
    EXPECT_OK(nnt_tensor_embedding_backward(tok, out, wte, NULL));
    nnt_tensor *all[10] = {tok, wte, wpe, out, tokf, wpe_short, wpe_rows, wte_c, out_bt, out2};
    for (int i = 0; i < 10; i++)
        EXPECT_OK(nnt_tensor_destroy(all[i]));
}
END_TEST

/* ---- attention ----------------------------------------------------------------------------- */

#define AT_B 2
#define AT_H 3
#define AT_T 11
#define AT_D 8
#define AT_N (AT_B * AT_H * AT_T * AT_D)
#define AT_R (AT_B * AT_H * AT_T)

/* q/k/v/o tile (B, NH, T, hd) */
static const int64_t at_tilings[][4] = {
    {2, 3, 11, 8},   /* one tile                                  */
    {1, 2, 4, 8},    /* T in tiles 4, 4, 3; partial head tile      */
    {2, 1, 3, 8},    /* T in tiles 3, 3, 3, 2                       */
    {1, 3, 5, 3},    /* hd split (retiled), T in 5, 5, 1             */
    {2, 3, 1, 8},    /* one query row per tile                       */
};
#define AT_NT ((int)(sizeof at_tilings / sizeof *at_tilings))

/* The op's forward and backward on (AT_B, AT_H, AT_T, AT_D) q, k, v, dout in tiles tl: got
 * o, lse, dq, dk, dv on the host (freed by the caller). */
static void run_attention(const int64_t *tl, double scale, const float *q, const float *k,
                          const float *v, const float *dout, float *got[5])
{
    const int64_t s4[4] = {AT_B, AT_H, AT_T, AT_D};
    nnt_tensor *tq = tensor_f32(4, s4, tl, q), *tk = tensor_f32(4, s4, tl, k),
               *tv = tensor_f32(4, s4, tl, v), *to = tensor_f32(4, s4, tl, NULL),
               *tlse = tensor_f32(3, s4, tl, NULL), *tdo = tensor_f32(4, s4, tl, dout),
               *tdq = tensor_f32(4, s4, tl, NULL), *tdk = tensor_f32(4, s4, tl, NULL),
               *tdv = tensor_f32(4, s4, tl, NULL);
    EXPECT_OK(nnt_tensor_attention(tq, tk, tv, scale, to, tlse));
    EXPECT_OK(nnt_tensor_attention_backward(tq, tk, tv, to, tlse, tdo, scale, tdq, tdk, tdv));
    float *host[5] = {to_host(to), to_host(tlse), to_host(tdq), to_host(tdk), to_host(tdv)};
    memcpy(got, host, sizeof host);
    nnt_tensor *all[9] = {tq, tk, tv, to, tlse, tdo, tdq, tdk, tdv};
    for (int i = 0; i < 9; i++)
        EXPECT_OK(nnt_tensor_destroy(all[i]));
}

START_TEST(attention_matches_reference_for_every_tiling)
{
    const double scale = 1.0 / sqrt((double)AT_D);
    float *q = test_random_f32(AT_N, 21, -1.5, 1.5), *k = test_random_f32(AT_N, 22, -1.5, 1.5),
          *v = test_random_f32(AT_N, 23, -1, 1), *dout = test_random_f32(AT_N, 24, -1, 1);
    double *qd = test_to_double(q, AT_N), *kd = test_to_double(k, AT_N), *vd = test_to_double(v, AT_N),
           *dd = test_to_double(dout, AT_N);
    double *o_ref = test_zeros(AT_N), *lse_ref = test_zeros(AT_R), *dq_ref = test_zeros(AT_N),
           *dk_ref = test_zeros(AT_N), *dv_ref = test_zeros(AT_N);
    attn_fwd_ref(AT_B * AT_H, AT_T, AT_D, scale, qd, kd, vd, o_ref, lse_ref);
    attn_bwd_ref(AT_B * AT_H, AT_T, AT_D, scale, qd, kd, vd, dd, dq_ref, dk_ref, dv_ref);

    float *first[5] = {NULL};
    for (int t = 0; t < AT_NT; t++) {
        const int64_t *tl = at_tilings[t];
        float *got[5];
        run_attention(tl, scale, q, k, v, dout, got);
        expect_close("attention o", t, got[0], o_ref, AT_N, TOL_AT_O);
        expect_close("attention lse", t, got[1], lse_ref, AT_R, TOL_AT_LSE);
        expect_close("attention dq", t, got[2], dq_ref, AT_N, TOL_AT_DQ);
        expect_close("attention dk", t, got[3], dk_ref, AT_N, TOL_AT_DK);
        expect_close("attention dv", t, got[4], dv_ref, AT_N, TOL_AT_DV);
        if (t == 0) {
            memcpy(first, got, sizeof got);
        } else {
            expect_agree("attention o", t, first[0], got[0], AT_N, 0, TOL_AT_AGREE_O);
            expect_agree("attention lse", t, first[1], got[1], AT_R, 0, TOL_AT_AGREE_LSE);
            expect_agree("attention dq", t, first[2], got[2], AT_N, 0, TOL_AT_AGREE_DQ);
            expect_agree("attention dk", t, first[3], got[3], AT_N, 0, TOL_AT_AGREE_DK);
            expect_agree("attention dv", t, first[4], got[4], AT_N, 0, TOL_AT_AGREE_DV);
            for (int i = 0; i < 5; i++)
                free(got[i]);
        }
    }
    for (int i = 0; i < 5; i++)
        free(first[i]);
    free(q), free(k), free(v), free(dout), free(qd), free(kd), free(vd), free(dd);
    free(o_ref), free(lse_ref), free(dq_ref), free(dk_ref), free(dv_ref);
}
END_TEST

/* Under NNT_PRECISION_BF16, where the context says the CPU attention kernels' products take
 * bf16 operands (oneDNN with bf16 dot products), o and the gradients are the float ones up to
 * bf16 rounding: farther from the float reference than float rounding, within the bf16
 * bound (with CUDA workers, which keep float attention, only within it); elsewhere the float
 * results. Two tilings. */
#define TOL_AT16 1e-2   /* against the float reference; measured (Zen 4) 0.9e-3 (lse) to 2.6e-3 */
/* TF32 products on an H200 (2026-12-04), tiling 1: o 1.9e-4, lse 6.0e-5, dq 4.6e-4, dk 4.2e-4,
 * dv 1.4e-4 (tiling 0: 1.5e-7 at most) */
#define TOL_AT_TF32 5e-3
START_TEST(attention_under_bf16_precision)
{
    const double scale = 1.0 / sqrt((double)AT_D);
    const char *kernels = NULL;
    int ncpus = 0, ncuda = 0;
    EXPECT_OK(nnt_ctx_kernels(ctx, &kernels));
    EXPECT_OK(nnt_ctx_workers(ctx, &ncpus, &ncuda));
    int bf16 = strstr(kernels, "attention kernels' products take bf16") != NULL;
    /* CUDA workers' attention by products takes TF32 under bf16 precision (float by the
     * flash kernels, NNT_CUDA_ATTN=flash) */
    int tf32 = ncuda > 0 && strstr(kernels, "TF32 under bf16") != NULL;
    int mixed = (bf16 || tf32) && ncuda > 0;   /* either result */
    float *q = test_random_f32(AT_N, 31, -1.5, 1.5), *k = test_random_f32(AT_N, 32, -1.5, 1.5),
          *v = test_random_f32(AT_N, 33, -1, 1), *dout = test_random_f32(AT_N, 34, -1, 1);
    double *qd = test_to_double(q, AT_N), *kd = test_to_double(k, AT_N), *vd = test_to_double(v, AT_N),
           *dd = test_to_double(dout, AT_N);
    double *ref[5] = {test_zeros(AT_N), test_zeros(AT_R), test_zeros(AT_N), test_zeros(AT_N),
                      test_zeros(AT_N)};
    attn_fwd_ref(AT_B * AT_H, AT_T, AT_D, scale, qd, kd, vd, ref[0], ref[1]);
    attn_bwd_ref(AT_B * AT_H, AT_T, AT_D, scale, qd, kd, vd, dd, ref[2], ref[3], ref[4]);
    static const char *const names[5] = {"o", "lse", "dq", "dk", "dv"};
    const double tol32[5] = {TOL_AT_O, TOL_AT_LSE, TOL_AT_DQ, TOL_AT_DK, TOL_AT_DV};
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    for (int t = 0; t < 2; t++) {
        const int64_t *tl = at_tilings[t];
        float *got[5];
        run_attention(tl, scale, q, k, v, dout, got);
        for (int i = 0; i < 5; i++) {
            int64_t n = i == 1 ? AT_R : AT_N, at;
            double err = close_error(got[i], ref[i], n, &at);
            if (!bf16 || mixed || i == 1) {   /* lse: a float softmax of bf16 scores */
                expect_close(names[i], t, got[i], ref[i], n,
                             bf16 ? TOL_AT16 : tf32 ? TOL_AT_TF32 : tol32[i]);
                continue;
            }
            expect_close(names[i], t, got[i], ref[i], n, TOL_AT16);
            ck_assert_msg(err > 10 * tol32[i], "attention %s, tiling %d, under bf16: error %.3g "
                          "is float rounding's (bf16 products not taken)", names[i], t, err);
        }
        for (int i = 0; i < 5; i++)
            free(got[i]);
    }
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_FP32));
    printf("test_ops_nn attention under bf16 precision: %s\n",
           mixed ? (bf16 ? "bf16 on CPU workers, TF32 or float on CUDA workers: within the "
                           "bf16 bound" : "TF32 products on CUDA workers: within the TF32 bound")
                 : bf16 ? "bf16 products (the context's kernels say so)" : "float products");
    for (int i = 0; i < 5; i++)
        free(ref[i]);
    free(q), free(k), free(v), free(dout), free(qd), free(kd), free(vd), free(dd);
}
END_TEST

START_TEST(attention_is_deterministic)
{
    const int64_t s4[4] = {1, 2, 40, 16}, tl[4] = {1, 1, 7, 16};
    int64_t n = 1280;
    float *x = test_random_f32(n, 31, -1, 1);
    nnt_tensor *tq = tensor_f32(4, s4, tl, x), *to = tensor_f32(4, s4, tl, NULL),
               *tlse = tensor_f32(3, s4, tl, NULL), *tdq = tensor_f32(4, s4, tl, NULL),
               *tdk = tensor_f32(4, s4, tl, NULL), *tdv = tensor_f32(4, s4, tl, NULL);
    float *res[2][2];
    for (int run = 0; run < 2; run++) {
        EXPECT_OK(nnt_tensor_attention(tq, tq, tq, 0.25, to, tlse));
        EXPECT_OK(nnt_tensor_attention_backward(tq, tq, tq, to, tlse, tq, 0.25, tdq, tdk, tdv));
        res[run][0] = to_host(tdq);
        res[run][1] = to_host(tdk);
    }
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(memcmp(res[0][i], res[1][i], (size_t)n * sizeof(float)), 0);
        free(res[0][i]);
        free(res[1][i]);
    }
    nnt_tensor *all[6] = {tq, to, tlse, tdq, tdk, tdv};
    for (int i = 0; i < 6; i++)
        EXPECT_OK(nnt_tensor_destroy(all[i]));
    free(x);
}
END_TEST

START_TEST(attention_rejects_bad_arguments)
{
    const char *fn = "nnt_tensor_attention", *bfn = "nnt_tensor_attention_backward";
    const int64_t s4[4] = {2, 2, 6, 4}, t4[4] = {1, 2, 3, 4};
    nnt_tensor *q = tensor_f32(4, s4, t4, NULL), *o = tensor_f32(4, s4, t4, NULL),
               *lse = tensor_f32(3, s4, t4, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_attention(q, q, q, 0.5, o, lse), NNT_E_STATE, fn);
    EXPECT_OK(nnt_tensor_fill(q, 0.5));
    nnt_tensor *kbad = tensor_f32(4, (int64_t[]){2, 2, 7, 4}, t4, NULL),
               *ktile = tensor_f32(4, s4, (int64_t[]){1, 2, 2, 4}, NULL),
               *lsebad = tensor_f32(3, s4, (int64_t[]){2, 2, 3}, NULL),
               *q3 = tensor_f32(3, s4, t4, NULL), *qi = tensor_i32(4, s4, t4, NULL);
    nnt_tensor *filled[4] = {kbad, ktile, q3, qi};
    for (int i = 0; i < 4; i++)
        EXPECT_OK(nnt_tensor_fill(filled[i], 0));
    EXPECT_FAIL_MSG(nnt_tensor_attention(q, q, NULL, 0.5, o, lse), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention(q, q, q, 0.5, q, lse), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention(q, q, q, NAN, o, lse), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention(q, kbad, q, 0.5, o, lse), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention(q, ktile, q, 0.5, o, lse), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention(q, q, q, 0.5, o, lsebad), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention(q3, q3, q3, 0.5, o, lse), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention(qi, q, q, 0.5, o, lse), NNT_E_SHAPE, fn);
    EXPECT_OK(nnt_tensor_attention(q, q, q, 0.5, o, lse));
    nnt_tensor *dq = tensor_f32(4, s4, t4, NULL), *dk = tensor_f32(4, s4, t4, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, q, q, o, lse, q, 0.5, dq, dk, NULL),
                    NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, q, q, o, lse, q, 0.5, dq, dk, dk),
                    NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, q, q, o, lse, q, 0.5, dq, dk, o),
                    NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, q, q, o, lse, ktile, 0.5, dq, dk, kbad),
                    NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, q, q, o, lsebad, q, 0.5, dq, dk, o),
                    NNT_E_STATE, bfn);
    nnt_tensor *all[10] = {q, o, lse, kbad, ktile, lsebad, q3, qi, dq, dk};
    for (int i = 0; i < 10; i++)
        EXPECT_OK(nnt_tensor_destroy(all[i]));
}
END_TEST

/* ---- cross-entropy --------------------------------------------------------------------------- */

#define XE_A 3
#define XE_B 5
#define XE_V 37
#define XE_R (XE_A * XE_B)
#define XE_N (XE_R * XE_V)
#define XE_IGNORE (-100)

/* logits tile (A, B, V) */
static const int64_t xe_tilings[][3] = {
    {3, 5, 37},   /* one tile                          */
    {2, 2, 10},   /* V split, partial tiles everywhere  */
    {1, 5, 8},    /* V in five tiles                     */
    {3, 3, 37},   /* whole V, partial row tiles          */
};
#define XE_NT ((int)(sizeof xe_tilings / sizeof *xe_tilings))

/* _i: in place (dlogits is logits) + 2 * smoothed (nnt_tensor_cross_entropy_smoothed, eps
 * 0.37, and its backward with per-row weights) */
START_TEST(cross_entropy_matches_reference_for_every_tiling)
{
    int in_place = _i & 1, smoothed = _i >> 1;
    double eps = smoothed ? 0.37 : 0.0;
    const int64_t ls[3] = {XE_A, XE_B, XE_V};
    float *x = test_random_f32(XE_N, 41, -4, 4);
    for (int j = 0; j < XE_V; j++)   /* a row with large logits: the max must be subtracted */
        x[2 * XE_V + j] += 80.0f;
    int32_t tg[XE_R];
    unsigned long long st = 43;
    int nvalid = 0;
    for (int r = 0; r < XE_R; r++) {
        tg[r] = r % 4 == 1 ? XE_IGNORE : (int32_t)(test_rand(&st) * XE_V);
        nvalid += tg[r] != XE_IGNORE;
    }
    tg[0] = 0, tg[3] = XE_V - 1, tg[6] = 9;   /* first, last, a tile boundary (V tiles of 10) */
    double scale = 1.0 / nvalid;
    float *w = smoothed ? test_random_f32(XE_R, 47, -2, 2) : NULL;
    double *xd = test_to_double(x, XE_N), *loss_ref = test_zeros(XE_R), *lse_ref = test_zeros(XE_R),
           *dx_ref = test_zeros(XE_N);
    xent_fwd_ref(XE_R, XE_V, xd, tg, XE_IGNORE, eps, loss_ref, lse_ref);
    xent_bwd_ref(XE_R, XE_V, xd, tg, XE_IGNORE, eps, scale, w, dx_ref);
    for (int r = 0; r < XE_R; r++)
        if (tg[r] == XE_IGNORE)
            ck_assert(loss_ref[r] == 0.0);

    float *first[3] = {NULL};
    for (int t = 0; t < XE_NT; t++) {
        const int64_t *tl = xe_tilings[t];
        nnt_tensor *tx = tensor_f32(3, ls, tl, x), *ttg = tensor_i32(2, ls, tl, tg),
                   *tloss = tensor_f32(2, ls, tl, NULL), *tlse = tensor_f32(2, ls, tl, NULL),
                   *tdx = in_place ? tx : tensor_f32(3, ls, tl, NULL),
                   *tw = w ? tensor_f32(2, ls, tl, w) : NULL;
        if (smoothed) {
            EXPECT_OK(nnt_tensor_cross_entropy_smoothed(tx, ttg, XE_IGNORE, eps, tloss, tlse));
            EXPECT_OK(nnt_tensor_cross_entropy_smoothed_backward(tx, ttg, XE_IGNORE, tlse, eps,
                                                                 scale, tw, tdx));
        } else {
            EXPECT_OK(nnt_tensor_cross_entropy(tx, ttg, XE_IGNORE, tloss, tlse));
            EXPECT_OK(nnt_tensor_cross_entropy_backward(tx, ttg, XE_IGNORE, tlse, scale, tdx));
        }
        float *got[3] = {to_host(tloss), to_host(tlse), to_host(tdx)};
        if (smoothed)   /* (the row of large logits: d's float rounding) */
            expect_close("smoothed loss", t, got[0], loss_ref, XE_R, TOL_XE_SMOOTH_LOSS);
        else
            expect_close("cross-entropy loss", t, got[0], loss_ref, XE_R, TOL_XE_LOSS);
        expect_close("cross-entropy lse", t, got[1], lse_ref, XE_R, TOL_XE_LSE);
        expect_close("cross-entropy dlogits", t, got[2], dx_ref, XE_N, TOL_XE_DX);
        for (int r = 0; r < XE_R; r++)
            if (tg[r] == XE_IGNORE)
                ck_assert_float_eq(got[0][r], 0.0f);
        if (t == 0) {
            memcpy(first, got, sizeof got);
        } else {
            /* the online max/sum over vocabulary tiles rounds differently per V tiling */
            int exact = tl[2] == XE_V;
            if (smoothed)
                expect_agree("smoothed loss", t, first[0], got[0], XE_R, exact,
                             TOL_XE_SMOOTH_AGREE_LOSS);
            else
                expect_agree("cross-entropy loss", t, first[0], got[0], XE_R, exact,
                             TOL_XE_AGREE_LOSS);
            expect_agree("cross-entropy lse", t, first[1], got[1], XE_R, exact,
                         TOL_XE_AGREE_LSE);
            expect_agree("cross-entropy dlogits", t, first[2], got[2], XE_N, exact,
                         TOL_XE_AGREE_DX);
            for (int i = 0; i < 3; i++)
                free(got[i]);
        }
        nnt_tensor *all[6] = {tx, ttg, tloss, tlse, in_place ? NULL : tdx, tw};
        for (int i = 0; i < 6; i++)
            EXPECT_OK(nnt_tensor_destroy(all[i]));
    }
    for (int i = 0; i < 3; i++)
        free(first[i]);
    free(x), free(xd), free(loss_ref), free(lse_ref), free(dx_ref), free(w);
}
END_TEST

START_TEST(cross_entropy_rejects_bad_arguments)
{
    const char *fn = "nnt_tensor_cross_entropy", *bfn = "nnt_tensor_cross_entropy_backward";
    const int64_t ls[2] = {6, 10}, lt[2] = {4, 3}, rs[1] = {6}, rt[1] = {4};
    nnt_tensor *x = tensor_f32(2, ls, lt, NULL), *tg = tensor_i32(1, rs, rt, NULL),
               *loss = tensor_f32(1, rs, rt, NULL), *lse = tensor_f32(1, rs, rt, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy(x, tg, -100, loss, lse), NNT_E_STATE, fn);
    EXPECT_OK(nnt_tensor_fill(x, 0.5));
    EXPECT_OK(nnt_tensor_fill(tg, 3));
    nnt_tensor *tgf = tensor_f32(1, rs, rt, NULL), *loss_tile = tensor_f32(1, rs, NULL, NULL),
               *loss_len = tensor_f32(1, (int64_t[]){5}, rt, NULL),
               *x1 = tensor_f32(1, rs, rt, NULL),
               *dx_tile = tensor_f32(2, ls, (int64_t[]){4, 5}, NULL);
    EXPECT_OK(nnt_tensor_fill(tgf, 3));
    EXPECT_OK(nnt_tensor_fill(x1, 0));
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy(NULL, tg, -100, loss, lse), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy(x, tg, -100, loss, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy(x, tg, -100, loss, loss), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy(x, tgf, -100, loss, lse), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy(x, tg, -100, loss_tile, lse), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy(x, tg, -100, loss, loss_len), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy(x1, tg, -100, loss, lse), NNT_E_SHAPE, fn);
    EXPECT_OK(nnt_tensor_cross_entropy(x, tg, -100, loss, lse));
    nnt_tensor *dx = tensor_f32(2, ls, lt, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy_backward(x, tg, -100, lse, 1.0, NULL),
                    NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy_backward(x, tg, -100, lse, INFINITY, dx),
                    NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy_backward(x, tg, -100, lse, 1.0, dx_tile),
                    NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy_backward(x, tgf, -100, lse, 1.0, dx), NNT_E_SHAPE,
                    bfn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy_backward(x, tg, -100, loss_len, 1.0, dx),
                    NNT_E_STATE, bfn);
    EXPECT_OK(nnt_tensor_cross_entropy_backward(x, tg, -100, lse, 1.0, dx));
    EXPECT_OK(nnt_tensor_cross_entropy_backward(x, tg, -100, lse, 1.0, x));
    const char *sfn = "nnt_tensor_cross_entropy_smoothed",
               *sbfn = "nnt_tensor_cross_entropy_smoothed_backward";
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy_smoothed(x, tg, -100, 1.0, loss, lse), NNT_E_INVAL,
                    sfn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy_smoothed(x, tg, -100, -0.5, loss, lse),
                    NNT_E_INVAL, sfn);
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy_smoothed(x, tg, -100, NAN, loss, lse), NNT_E_INVAL,
                    sfn);
    EXPECT_OK(nnt_tensor_fill(x, 0.5));
    EXPECT_OK(nnt_tensor_cross_entropy_smoothed(x, tg, -100, 0.5, loss, lse));
    EXPECT_FAIL_MSG(nnt_tensor_cross_entropy_smoothed_backward(x, tg, -100, lse, 1.5, 1.0,
                                                               NULL, dx),
                    NNT_E_INVAL, sbfn);
    EXPECT_OK(nnt_tensor_cross_entropy_smoothed_backward(x, tg, -100, lse, 0.5, 1.0, NULL, dx));
    nnt_tensor *all[10] = {x, tg, loss, lse, tgf, loss_tile, loss_len, x1, dx_tile, dx};
    for (int i = 0; i < 10; i++)
        EXPECT_OK(nnt_tensor_destroy(all[i]));
}
END_TEST

static Suite *ops_nn_suite(void)
{
    Suite *s = suite_create("ops_nn");
    TCase *ref = tcase_create("references");
    tcase_add_test(ref, references_match_finite_differences);
    suite_add_tcase(s, ref);
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, layernorm_matches_reference_for_every_tiling);
    tcase_add_test(tc, layernorm_eps_dominates_small_variance);
    tcase_add_test(tc, layernorm_is_deterministic);
    tcase_add_test(tc, layernorm_rejects_bad_arguments);
    tcase_add_loop_test(tc, embedding_matches_reference_for_every_tiling, 0, 2);
    tcase_add_test(tc, embedding_rejects_bad_arguments);
    tcase_add_test(tc, attention_matches_reference_for_every_tiling);
    tcase_add_test(tc, attention_under_bf16_precision);
    tcase_add_test(tc, attention_is_deterministic);
    tcase_add_test(tc, attention_rejects_bad_arguments);
    tcase_add_loop_test(tc, cross_entropy_matches_reference_for_every_tiling, 0, 4);
    tcase_add_test(tc, cross_entropy_rejects_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(ops_nn_suite());
}
