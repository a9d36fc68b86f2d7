/* SPDX-License-Identifier: MIT */
/* Tensor operations of the Llama family: RMSNorm, SwiGLU, rotary position embedding (RoPE)
 * and grouped-query attention (GQA: nnt_tensor_attention with fewer kv heads), forward and
 * backward. Each op is compared with a float64 reference written here on
 * the whole (untiled) tensors, for several tilings (a single tile, partial edge tiles, a split
 * last dimension, hd cut into halves and quarters, tiles that cut through heads), and the
 * tilings are compared with each other (bitwise where every element is computed the same
 * way). The float64 backward references are checked against central finite differences of
 * the float64 forward references. RoPE's frequency tables (default and Llama 3.1 scaling)
 * are checked against values worked out by hand, its pos_offset against the rows of a longer
 * sequence, and rope_backward against the inverse of rope. GQA (NH 6, NKV 1, 2, 3, 6) is
 * checked against a float64 repeat_kv reference for tilings that cut groups and tile k, v
 * apart from q, against the multi-head path run on k, v repeated per q head (o, lse, dq
 * bitwise; dk, dv against its group sums), run to run (bitwise) and for argument errors.
 *
 * Every numerical check goes through EXPECT_TOL: the error is normwise,
 * max |got - want| / max |want| over the checked tensor (relative per value for the frequency
 * tables), and each tolerance is about 10x the largest error measured for that check
 * (tests/tolerances.sh on an AMD EPYC host: default BLIS kernels, haswell and generic), the
 * measured value in the comment beside it. Results that must not depend on the tiling, on
 * in place or on pos_offset are compared bitwise (no tolerance). One-line bugs in these ops
 * (tests/mutate.sh: rms_*, swiglu_*, rope_*, gqa_*) fail this suite. */
#include "testutil.h"

#include <math.h>
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

static nnt_tensor *tensor_i32(int ndim, const int64_t *shape, const int64_t *tile)
{
    nnt_tensor *t = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, ndim, shape, tile, &t));
    EXPECT_OK(nnt_tensor_fill(t, 1));
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
    return emax / (amax > 0 ? amax : 1);
}

/* Bitwise equality of two results (tiling invariance, in place): not a tolerance. */
static void expect_same_bits(const char *what, int variant, const float *a, const float *b,
                             int64_t n)
{
    ck_assert_msg(memcmp(a, b, (size_t)n * sizeof *a) == 0,
                  "%s: variant %d differs bitwise from variant 0", what, variant);
}

/* ---- float64 references ------------------------------------------------------------------ */

static void rms_fwd_ref(int64_t rows, int64_t c, const double *x, const double *gamma,
                        double eps, double *y, double *rstd)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * c;
        double ms = 0;
        for (int64_t j = 0; j < c; j++)
            ms += xr[j] * xr[j];
        double rs = 1.0 / sqrt(ms / (double)c + eps);
        for (int64_t j = 0; j < c; j++)
            y[r * c + j] = xr[j] * rs * gamma[j];
        if (rstd)
            rstd[r] = rs;
    }
}

/* dx set; dgamma += */
static void rms_bwd_ref(int64_t rows, int64_t c, const double *x, const double *gamma,
                        double eps, const double *dy, double *dx, double *dgamma)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * c, *dyr = dy + r * c;
        double ms = 0, mgx = 0;
        for (int64_t j = 0; j < c; j++)
            ms += xr[j] * xr[j];
        double rs = 1.0 / sqrt(ms / (double)c + eps);
        for (int64_t j = 0; j < c; j++) {
            mgx += dyr[j] * gamma[j] * xr[j] * rs / (double)c;
            dgamma[j] += dyr[j] * xr[j] * rs;
        }
        for (int64_t j = 0; j < c; j++)
            dx[r * c + j] = rs * (dyr[j] * gamma[j] - xr[j] * rs * mgx);
    }
}

static double silu_ref(double g) { return g / (1.0 + exp(-g)); }

static void swiglu_fwd_ref(int64_t n, const double *g, const double *u, double *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = silu_ref(g[i]) * u[i];
}

static void swiglu_bwd_ref(int64_t n, const double *g, const double *u, const double *dy,
                           double *dg, double *du)
{
    for (int64_t i = 0; i < n; i++) {
        double s = 1.0 / (1.0 + exp(-g[i]));
        dg[i] = dy[i] * u[i] * (s + g[i] * s * (1.0 - s));
        du[i] = dy[i] * silu_ref(g[i]);
    }
}

/* Hugging Face's inv_freq for hd without scaling: theta^(-2i/hd), a float32 table (transformers
 * computes it in float32; rounded here from the exact value). */
static void rope_table_ref(double theta, int64_t hd, double *inv)
{
    for (int64_t i = 0; i < hd / 2; i++)
        inv[i] = (float)pow(theta, -2.0 * (double)i / (double)hd);
}

/* x, y (nbh, t, hd); position of row j: pos0 + j; sign -1: the inverse rotation. */
static void rope_ref(int64_t nbh, int64_t t, int64_t hd, const double *inv, int64_t pos0,
                     int sign, const double *x, double *y)
{
    int64_t h = hd / 2;
    for (int64_t b = 0; b < nbh; b++)
        for (int64_t j = 0; j < t; j++)
            for (int64_t i = 0; i < h; i++) {
                int64_t o = (b * t + j) * hd;
                double a = (double)(pos0 + j) * inv[i], c = cos(a), s = sign * sin(a);
                double lo = x[o + i], hi = x[o + i + h];
                y[o + i] = lo * c - hi * s;
                y[o + i + h] = hi * c + lo * s;
            }
}

/* ---- the references' gradients against finite differences -------------------------------- */

typedef double (*scalar_fn)(void *ctx);

/* Central difference of f along element i of p. */
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

/* max_i |fd_i - grad_i| / (1 + |grad_i|) */
static double fd_err(scalar_fn f, void *c, double *p, const double *grad, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(fd(f, c, p, i) - grad[i]) / (1 + fabs(grad[i]));
        worst = e > worst || e != e ? e : worst;
    }
    return worst;
}

struct rms_case {
    double x[10], gamma[5], w[10];
};

static double rms_loss(void *p)
{
    struct rms_case *s = p;
    double y[10], sum = 0;
    rms_fwd_ref(2, 5, s->x, s->gamma, 1e-2, y, NULL);
    for (int i = 0; i < 10; i++)
        sum += y[i] * s->w[i];
    return sum;
}

struct swiglu_case {
    double g[8], u[8], w[8];
};

static double swiglu_loss(void *p)
{
    struct swiglu_case *s = p;
    double y[8], sum = 0;
    swiglu_fwd_ref(8, s->g, s->u, y);
    for (int i = 0; i < 8; i++)
        sum += y[i] * s->w[i];
    return sum;
}

struct rope_case {
    double x[24], w[24], inv[2];
};

static double rope_loss(void *p)
{
    struct rope_case *s = p;
    double y[24], sum = 0;
    rope_ref(2, 3, 4, s->inv, 5, 1, s->x, y);
    for (int i = 0; i < 24; i++)
        sum += y[i] * s->w[i];
    return sum;
}

/* Finite-difference errors max |fd - grad| / (1 + |grad|) (h = 1e-6, float64), measured:
 * rmsnorm 2.4e-11, swiglu 5.5e-11, rope 1.6e-10; a wrong term of a gradient is off by O(1). */
#define FD_TOL_RMS 3e-10
#define FD_TOL_SWIGLU 6e-10
#define FD_TOL_ROPE 1.6e-9

START_TEST(references_match_finite_differences)
{
    unsigned long long st = 91;
    struct rms_case rc;
    for (int i = 0; i < 10; i++) {
        rc.x[i] = 0.2 * test_rand(&st) - 0.1;   /* small rows: eps 1e-2 matters */
        rc.w[i] = 2 * test_rand(&st) - 1;
    }
    for (int i = 0; i < 5; i++)
        rc.gamma[i] = 0.5 + test_rand(&st);
    double dx[10], dg[5] = {0};
    rms_bwd_ref(2, 5, rc.x, rc.gamma, 1e-2, rc.w, dx, dg);
    EXPECT_TOL(fd_err(rms_loss, &rc, rc.x, dx, 10), FD_TOL_RMS, "rmsnorm dx");
    EXPECT_TOL(fd_err(rms_loss, &rc, rc.gamma, dg, 5), FD_TOL_RMS, "rmsnorm dgamma");

    struct swiglu_case sc;
    for (int i = 0; i < 8; i++) {
        sc.g[i] = 8 * test_rand(&st) - 4;
        sc.u[i] = 2 * test_rand(&st) - 1;
        sc.w[i] = 2 * test_rand(&st) - 1;
    }
    double dgate[8], dup[8];
    swiglu_bwd_ref(8, sc.g, sc.u, sc.w, dgate, dup);
    EXPECT_TOL(fd_err(swiglu_loss, &sc, sc.g, dgate, 8), FD_TOL_SWIGLU, "swiglu dgate");
    EXPECT_TOL(fd_err(swiglu_loss, &sc, sc.u, dup, 8), FD_TOL_SWIGLU, "swiglu dup");

    /* rope's gradient is the inverse rotation of the output gradient */
    struct rope_case pc = {{0}, {0}, {0.9, 0.13}};
    for (int i = 0; i < 24; i++) {
        pc.x[i] = 2 * test_rand(&st) - 1;
        pc.w[i] = 2 * test_rand(&st) - 1;
    }
    double dxr[24];
    rope_ref(2, 3, 4, pc.inv, 5, -1, pc.w, dxr);
    EXPECT_TOL(fd_err(rope_loss, &pc, pc.x, dxr, 24), FD_TOL_ROPE, "rope dx");
}
END_TEST

/* ---- RMSNorm ------------------------------------------------------------------------------- */

#define RN_B 3
#define RN_T 7
#define RN_C 37
#define RN_ROWS (RN_B * RN_T)
#define RN_N (RN_ROWS * RN_C)
#define RN_EPS 1e-5

/* x tile (B, T, C) and gamma/dgamma tile (C) */
static const int64_t rn_tilings[][4] = {
    {3, 7, 37, 37},   /* one tile                                   */
    {2, 3, 37, 37},   /* partial row tiles                          */
    {1, 4, 10, 10},   /* C split: retiled; gamma split              */
    {2, 7, 16, 37},   /* C split with a partial C tile              */
    {3, 2, 37, 8},    /* whole rows, gamma split                    */
};
#define RN_NT ((int)(sizeof rn_tilings / sizeof *rn_tilings))

/* Errors against the float64 reference, relative to the largest reference value: measured
 * (max over tilings and BLIS kernel sets) y 8.0e-8, rstd 6.0e-8, dx 6.8e-8, dgamma 1.8e-7. */
#define RN_TOL_Y 8e-7
#define RN_TOL_RSTD 6e-7
#define RN_TOL_DX 7e-7
#define RN_TOL_DG 1.8e-6

START_TEST(rmsnorm_matches_reference_for_every_tiling)
{
    const int64_t xs[3] = {RN_B, RN_T, RN_C}, cs[1] = {RN_C};
    float *x = test_random_f32(RN_N, 1, -2, 3), *gamma = test_random_f32(RN_C, 2, 0.5, 1.5),
          *dy = test_random_f32(RN_N, 4, -1, 1), *dg0 = test_random_f32(RN_C, 5, -1, 1);
    /* rows of small values: mean(x^2) ~ 1e-5, where eps 1e-5 halves rstd */
    for (int j = 0; j < RN_C; j++) {
        x[4 * RN_C + j] *= 1e-3f;
        x[17 * RN_C + j] *= 3e-3f;
    }
    double *xd = test_to_double(x, RN_N), *gd = test_to_double(gamma, RN_C), *dyd = test_to_double(dy, RN_N);
    double *y_ref = test_zeros(RN_N), *rstd_ref = test_zeros(RN_ROWS), *dx_ref = test_zeros(RN_N),
           *dg_ref = test_to_double(dg0, RN_C);
    rms_fwd_ref(RN_ROWS, RN_C, xd, gd, RN_EPS, y_ref, rstd_ref);
    rms_bwd_ref(RN_ROWS, RN_C, xd, gd, RN_EPS, dyd, dx_ref, dg_ref);

    float *first[4] = {NULL};
    for (int k = 0; k < RN_NT; k++) {
        const int64_t *tl = rn_tilings[k], ct[1] = {tl[3]};
        nnt_tensor *tx = tensor_f32(3, xs, tl, x), *tg = tensor_f32(1, cs, ct, gamma),
                   *ty = tensor_f32(3, xs, tl, NULL), *tr = tensor_f32(2, xs, tl, NULL),
                   *tdy = tensor_f32(3, xs, tl, dy), *tdx = tensor_f32(3, xs, tl, NULL),
                   *tdg = tensor_f32(1, cs, ct, dg0);
        EXPECT_OK(nnt_tensor_rmsnorm(tx, tg, RN_EPS, ty, tr));
        EXPECT_OK(nnt_tensor_rmsnorm_backward(tx, tg, tr, tdy, tdx, tdg));
        float *got[4] = {to_host(ty), to_host(tr), to_host(tdx), to_host(tdg)};
        EXPECT_TOL(rel_err(got[0], y_ref, RN_N), RN_TOL_Y, "rmsnorm y, tiling %d", k);
        EXPECT_TOL(rel_err(got[1], rstd_ref, RN_ROWS), RN_TOL_RSTD, "rmsnorm rstd, tiling %d",
                   k);
        EXPECT_TOL(rel_err(got[2], dx_ref, RN_N), RN_TOL_DX, "rmsnorm dx, tiling %d", k);
        EXPECT_TOL(rel_err(got[3], dg_ref, RN_C), RN_TOL_DG, "rmsnorm dgamma, tiling %d", k);
        static const int64_t sizes[4] = {RN_N, RN_ROWS, RN_N, RN_C};
        for (int i = 0; i < 4; i++) {
            if (k == 0) {
                first[i] = got[i];
                continue;
            }
            /* whole rows always: forward and dx are bitwise tiling-invariant; dgamma sums
             * over row tiles in a tiling-dependent grouping (checked against the reference) */
            if (i < 3)
                expect_same_bits("rmsnorm output", k, first[i], got[i], sizes[i]);
            free(got[i]);
        }
        nnt_tensor *all[7] = {tx, tg, ty, tr, tdy, tdx, tdg};
        destroy_all(7, all);
    }
    for (int i = 0; i < 4; i++)
        free(first[i]);
    free(x), free(gamma), free(dy), free(dg0), free(xd), free(gd), free(dyd);
    free(y_ref), free(rstd_ref), free(dx_ref), free(dg_ref);
}
END_TEST

START_TEST(rmsnorm_is_deterministic)
{
    const int64_t xs[2] = {40, 24}, tl[2] = {7, 24}, cs[1] = {24};
    float *x = test_random_f32(960, 8, -1, 1), *dy = test_random_f32(960, 9, -1, 1);
    nnt_tensor *tx = tensor_f32(2, xs, tl, x), *tg = tensor_f32(1, cs, NULL, NULL),
               *ty = tensor_f32(2, xs, tl, NULL), *tr = tensor_f32(1, xs, tl, NULL),
               *tdy = tensor_f32(2, xs, tl, dy), *tdx = tensor_f32(2, xs, tl, NULL),
               *tdg = tensor_f32(1, cs, NULL, NULL);
    EXPECT_OK(nnt_tensor_fill(tg, 1.25));
    float *dg[3];
    for (int run = 0; run < 3; run++) {
        EXPECT_OK(nnt_tensor_fill(tdg, 0));
        EXPECT_OK(nnt_tensor_rmsnorm(tx, tg, 1e-6, ty, tr));
        EXPECT_OK(nnt_tensor_rmsnorm_backward(tx, tg, tr, tdy, tdx, tdg));
        dg[run] = to_host(tdg);
    }
    expect_same_bits("rmsnorm dgamma, run", 1, dg[0], dg[1], 24);
    expect_same_bits("rmsnorm dgamma, run", 2, dg[0], dg[2], 24);
    for (int run = 0; run < 3; run++)
        free(dg[run]);
    nnt_tensor *all[7] = {tx, tg, ty, tr, tdy, tdx, tdg};
    destroy_all(7, all);
    free(x), free(dy);
}
END_TEST

START_TEST(rmsnorm_rejects_bad_arguments)
{
    const char *fn = "nnt_tensor_rmsnorm", *bfn = "nnt_tensor_rmsnorm_backward";
    const int64_t xs[3] = {2, 3, 8}, xt[3] = {1, 2, 8}, cs[1] = {8};
    nnt_tensor *x = tensor_f32(3, xs, xt, NULL), *g = tensor_f32(1, cs, NULL, NULL),
               *y = tensor_f32(3, xs, xt, NULL), *r = tensor_f32(2, xs, xt, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, 1e-5, y, r), NNT_E_STATE, fn);
    EXPECT_OK(nnt_tensor_fill(x, 1));
    EXPECT_OK(nnt_tensor_fill(g, 1));
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(NULL, g, 1e-5, y, r), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, 1e-5, y, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, 0, y, r), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, -1e-5, y, r), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, NAN, y, r), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, INFINITY, y, r), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, 1e-5, x, r), NNT_E_INVAL, fn);
    nnt_tensor *xi = tensor_i32(3, xs, xt), *g7 = tensor_f32(1, (int64_t[]){7}, NULL, NULL),
               *ybad = tensor_f32(3, xs, (int64_t[]){2, 2, 8}, NULL),
               *rbad = tensor_f32(2, xs, (int64_t[]){2, 3}, NULL),
               *r3 = tensor_f32(3, xs, xt, NULL), *x1 = tensor_f32(1, cs, NULL, NULL);
    EXPECT_OK(nnt_tensor_fill(g7, 1));
    EXPECT_OK(nnt_tensor_fill(x1, 1));
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(xi, g, 1e-5, y, r), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g7, 1e-5, y, r), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, 1e-5, ybad, r), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, 1e-5, y, rbad), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x, g, 1e-5, y, r3), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm(x1, g, 1e-5, g7, r), NNT_E_SHAPE, fn);
    EXPECT_OK(nnt_tensor_rmsnorm(x, g, 1e-5, y, r));
    EXPECT_OK(nnt_tensor_fill(rbad, 1));
    nnt_tensor *dx = tensor_f32(3, xs, xt, NULL), *dg = tensor_f32(1, cs, NULL, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm_backward(x, g, r, y, dx, dg), NNT_E_STATE, bfn);
    EXPECT_OK(nnt_tensor_fill(dg, 0));
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm_backward(x, g, r, y, dx, NULL), NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm_backward(x, g, r, y, y, dg), NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm_backward(x, g, r, y, dx, g), NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm_backward(x, g, r, y, dx, g7), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm_backward(x, g, rbad, y, dx, dg), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm_backward(x, g, r, y, ybad, dg), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_rmsnorm_backward(x, g, r, xi, dx, dg), NNT_E_SHAPE, bfn);
    EXPECT_OK(nnt_tensor_rmsnorm_backward(x, g, r, y, dx, dg));
    nnt_tensor *all[12] = {x, g, y, r, xi, g7, ybad, rbad, r3, x1, dx, dg};
    destroy_all(12, all);
}
END_TEST

/* ---- SwiGLU -------------------------------------------------------------------------------- */

#define SW_A 5
#define SW_B 3
#define SW_C 21
#define SW_N (SW_A * SW_B * SW_C)

static const int64_t sw_tilings[][3] = {
    {5, 3, 21},   /* one tile              */
    {2, 2, 8},    /* partial tiles         */
    {1, 3, 21},   /* rows                  */
    {5, 1, 5},    /* partial last tiles    */
};
#define SW_NT ((int)(sizeof sw_tilings / sizeof *sw_tilings))

/* Measured: y 4.0e-8, dgate 1.3e-7, dup 1.7e-8 (max over tilings, aliasings and BLIS kernel
 * sets; the kernels do not use BLIS). The saturated gates (|g| = 100) set the scale of y and
 * dup; a wrong silu on the others is still off by > 1e-3 of it. */
#define SW_TOL_Y 4e-7
#define SW_TOL_DG 1.3e-6
#define SW_TOL_DU 1.7e-7

/* Aliasing variants of the outputs: 0 none; 1 y = gate, dgate = gate, dup = up; 2 y = up,
 * dgate = dy, dup = gate; 3 dgate = up, dup = dy. */
START_TEST(swiglu_matches_reference_for_every_tiling)
{
    int alias = _i;
    const int64_t s3[3] = {SW_A, SW_B, SW_C};
    float *g = test_random_f32(SW_N, 11, -6, 6), *u = test_random_f32(SW_N, 12, -2, 2),
          *dy = test_random_f32(SW_N, 13, -1, 1);
    /* saturated gates: exp(-g) overflows (g << 0) or vanishes (g >> 0) */
    g[0] = -100.0f, g[1] = -30.0f, g[2] = 30.0f, g[3] = 100.0f, g[4] = 0.0f;
    double *gd = test_to_double(g, SW_N), *ud = test_to_double(u, SW_N), *dyd = test_to_double(dy, SW_N);
    double *y_ref = test_zeros(SW_N), *dg_ref = test_zeros(SW_N), *du_ref = test_zeros(SW_N);
    swiglu_fwd_ref(SW_N, gd, ud, y_ref);
    swiglu_bwd_ref(SW_N, gd, ud, dyd, dg_ref, du_ref);

    float *first[3] = {NULL};
    for (int k = 0; k < SW_NT; k++) {
        const int64_t *tl = sw_tilings[k];
        /* forward on fg, fu (-> fy); backward on bg, bu, bdy (-> bdg, bdu); own: the
         * output tensors that are no input */
        nnt_tensor *fg = tensor_f32(3, s3, tl, g), *fu = tensor_f32(3, s3, tl, u),
                   *bg = tensor_f32(3, s3, tl, g), *bu = tensor_f32(3, s3, tl, u),
                   *bdy = tensor_f32(3, s3, tl, dy), *own[3] = {NULL, NULL, NULL};
        nnt_tensor *fy = alias == 1 ? fg : alias == 2 ? fu
                         : (own[0] = tensor_f32(3, s3, tl, NULL));
        nnt_tensor *bdg = alias == 1 ? bg : alias == 2 ? bdy : alias == 3 ? bu
                          : (own[1] = tensor_f32(3, s3, tl, NULL));
        nnt_tensor *bdu = alias == 1 ? bu : alias == 2 ? bg : alias == 3 ? bdy
                          : (own[2] = tensor_f32(3, s3, tl, NULL));
        EXPECT_OK(nnt_tensor_swiglu(fg, fu, fy));
        EXPECT_OK(nnt_tensor_swiglu_backward(bg, bu, bdy, bdg, bdu));
        float *got[3] = {to_host(fy), to_host(bdg), to_host(bdu)};
        EXPECT_TOL(rel_err(got[0], y_ref, SW_N), SW_TOL_Y, "swiglu y, tiling %d, alias %d", k,
                   alias);
        EXPECT_TOL(rel_err(got[1], dg_ref, SW_N), SW_TOL_DG, "swiglu dgate, tiling %d, alias %d",
                   k, alias);
        EXPECT_TOL(rel_err(got[2], du_ref, SW_N), SW_TOL_DU, "swiglu dup, tiling %d, alias %d",
                   k, alias);
        for (int i = 0; i < 3; i++) {
            if (k == 0) {
                first[i] = got[i];
                continue;
            }
            expect_same_bits("swiglu output", k, first[i], got[i], SW_N);
            free(got[i]);
        }
        nnt_tensor *all[8] = {fg, fu, bg, bu, bdy, own[0], own[1], own[2]};
        destroy_all(8, all);
    }
    for (int i = 0; i < 3; i++)
        free(first[i]);
    free(g), free(u), free(dy), free(gd), free(ud), free(dyd);
    free(y_ref), free(dg_ref), free(du_ref);
}
END_TEST

START_TEST(swiglu_rejects_bad_arguments)
{
    const char *fn = "nnt_tensor_swiglu", *bfn = "nnt_tensor_swiglu_backward";
    const int64_t s2[2] = {6, 10}, t2[2] = {4, 3};
    nnt_tensor *g = tensor_f32(2, s2, t2, NULL), *u = tensor_f32(2, s2, t2, NULL),
               *y = tensor_f32(2, s2, t2, NULL), *d = tensor_f32(2, s2, t2, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu(g, u, y), NNT_E_STATE, fn);
    EXPECT_OK(nnt_tensor_fill(g, 0.5));
    EXPECT_FAIL_MSG(nnt_tensor_swiglu(g, u, y), NNT_E_STATE, fn);
    EXPECT_OK(nnt_tensor_fill(u, 2));
    nnt_tensor *gi = tensor_i32(2, s2, t2), *gt = tensor_f32(2, s2, (int64_t[]){3, 3}, NULL),
               *gs = tensor_f32(2, (int64_t[]){6, 9}, t2, NULL),
               *g3 = tensor_f32(3, (int64_t[]){1, 6, 10}, (int64_t[]){1, 4, 3}, NULL);
    EXPECT_OK(nnt_tensor_fill(gt, 1));
    EXPECT_OK(nnt_tensor_fill(gs, 1));
    EXPECT_OK(nnt_tensor_fill(g3, 1));
    EXPECT_FAIL_MSG(nnt_tensor_swiglu(NULL, u, y), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu(g, u, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu(gi, u, y), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu(g, gt, y), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu(g, u, gs), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu(g3, u, y), NNT_E_SHAPE, fn);
    EXPECT_OK(nnt_tensor_swiglu(g, u, y));
    EXPECT_FAIL_MSG(nnt_tensor_swiglu_backward(g, u, d, y, y), NNT_E_STATE, bfn);
    EXPECT_OK(nnt_tensor_fill(d, 1));
    EXPECT_FAIL_MSG(nnt_tensor_swiglu_backward(g, u, d, y, y), NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu_backward(g, u, d, g, g), NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu_backward(g, u, d, NULL, y), NNT_E_INVAL, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu_backward(g, u, gt, y, d), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu_backward(g, u, d, gs, y), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_swiglu_backward(g, u, d, y, gi), NNT_E_SHAPE, bfn);
    EXPECT_OK(nnt_tensor_swiglu_backward(g, u, d, y, d));
    nnt_tensor *all[8] = {g, u, y, d, gi, gt, gs, g3};
    destroy_all(8, all);
}
END_TEST

/* ---- RoPE ---------------------------------------------------------------------------------- */

#define RP_B 2
#define RP_H 3
#define RP_T 11
#define RP_D 16
#define RP_N (RP_B * RP_H * RP_T * RP_D)
#define RP_OFF 3

/* x tile (B, NH, T, hd) */
static const int64_t rp_tilings[][4] = {
    {2, 3, 11, 16},   /* one tile                                     */
    {1, 2, 4, 16},    /* partial head and T tiles, whole vectors      */
    {2, 1, 3, 8},     /* hd in halves, T in 3, 3, 3, 2                */
    {1, 3, 5, 4},     /* hd in quarters                               */
    {2, 2, 11, 2},    /* hd in eighths, tiles cut through the heads   */
    {1, 1, 1, 16},    /* one head vector per tile                     */
};
#define RP_NT ((int)(sizeof rp_tilings / sizeof *rp_tilings))

/* Against the float64 reference (positions 3..13, theta 10000): measured y 9.6e-8, dx 7.0e-8
 * (max over tilings, in place or not, BLIS kernel sets). */
#define RP_TOL_Y 1e-6
#define RP_TOL_DX 7e-7

/* variant 0: y and dx separate tensors; 1: in place (y = x, dx = dy) */
START_TEST(rope_matches_reference_for_every_tiling)
{
    int in_place = _i;
    const int64_t s4[4] = {RP_B, RP_H, RP_T, RP_D};
    float *x = test_random_f32(RP_N, 21, -2, 2), *dy = test_random_f32(RP_N, 22, -1, 1);
    double inv[RP_D / 2];
    rope_table_ref(10000.0, RP_D, inv);
    double *xd = test_to_double(x, RP_N), *dyd = test_to_double(dy, RP_N);
    double *y_ref = test_zeros(RP_N), *dx_ref = test_zeros(RP_N);
    rope_ref(RP_B * RP_H, RP_T, RP_D, inv, RP_OFF, 1, xd, y_ref);
    rope_ref(RP_B * RP_H, RP_T, RP_D, inv, RP_OFF, -1, dyd, dx_ref);

    float *first[2] = {NULL};
    for (int k = 0; k < RP_NT; k++) {
        const int64_t *tl = rp_tilings[k];
        nnt_tensor *tx = tensor_f32(4, s4, tl, x), *tdy = tensor_f32(4, s4, tl, dy);
        nnt_tensor *ty = in_place ? tx : tensor_f32(4, s4, tl, NULL);
        nnt_tensor *tdx = in_place ? tdy : tensor_f32(4, s4, tl, NULL);
        EXPECT_OK(nnt_tensor_rope(tx, NULL, RP_OFF, ty));
        EXPECT_OK(nnt_tensor_rope_backward(tdy, NULL, RP_OFF, tdx));
        float *got[2] = {to_host(ty), to_host(tdx)};
        EXPECT_TOL(rel_err(got[0], y_ref, RP_N), RP_TOL_Y, "rope y, tiling %d, in place %d", k,
                   in_place);
        EXPECT_TOL(rel_err(got[1], dx_ref, RP_N), RP_TOL_DX, "rope dx, tiling %d, in place %d", k,
                   in_place);
        for (int i = 0; i < 2; i++) {
            if (k == 0) {
                first[i] = got[i];
                continue;
            }
            expect_same_bits("rope output", k, first[i], got[i], RP_N);
            free(got[i]);
        }
        nnt_tensor *all[4] = {tx, tdy, in_place ? NULL : ty, in_place ? NULL : tdx};
        destroy_all(4, all);
    }
    for (int i = 0; i < 2; i++)
        free(first[i]);
    free(x), free(dy), free(xd), free(dyd), free(y_ref), free(dx_ref);
}
END_TEST

/* In place gives the bits of out of place. */
START_TEST(rope_in_place_equals_out_of_place)
{
    const int64_t s4[4] = {2, 2, 9, 12}, tl[4] = {1, 2, 4, 3};   /* hd in quarters (3 | 6) */
    int64_t n = test_product(4, s4);
    float *x = test_random_f32(n, 25, -1, 1);
    nnt_rope_options ro = NNT_ROPE_OPTIONS_INIT;
    ro.theta = 500000.0;
    ro.scaling = NNT_ROPE_SCALING_LLAMA3;
    ro.original_max_position = 64;   /* puts hd 12's frequencies in all three bands */
    nnt_tensor *a = tensor_f32(4, s4, tl, x), *b = tensor_f32(4, s4, tl, NULL);
    EXPECT_OK(nnt_tensor_rope(a, &ro, 7, b));
    EXPECT_OK(nnt_tensor_rope(a, &ro, 7, a));
    float *ga = to_host(a), *gb = to_host(b);
    expect_same_bits("rope in place", 1, gb, ga, n);
    EXPECT_OK(nnt_tensor_rope_backward(b, &ro, 7, a));
    EXPECT_OK(nnt_tensor_rope_backward(b, &ro, 7, b));
    free(ga), free(gb);
    ga = to_host(a), gb = to_host(b);
    expect_same_bits("rope_backward in place", 1, ga, gb, n);
    nnt_tensor *all[2] = {a, b};
    destroy_all(2, all);
    free(x), free(ga), free(gb);
}
END_TEST

/* rope_backward(rope(x)) == x: the inverse rotation, at large positions too. Measured
 * 1.2e-7 (two roundings of a rotation), tolerance 1.2e-6. */
START_TEST(rope_backward_inverts_rope)
{
    const int64_t s4[4] = {1, 2, 50, 64}, tl[4] = {1, 1, 16, 32};
    int64_t n = test_product(4, s4);
    float *x = test_random_f32(n, 27, -1, 1);
    double *xd = test_to_double(x, n);
    nnt_rope_options ro = NNT_ROPE_OPTIONS_INIT;
    ro.theta = 500000.0;
    ro.scaling = NNT_ROPE_SCALING_LLAMA3;
    const int64_t offsets[2] = {0, 100000};
    for (int k = 0; k < 2; k++) {
        nnt_tensor *a = tensor_f32(4, s4, tl, x), *b = tensor_f32(4, s4, tl, NULL);
        EXPECT_OK(nnt_tensor_rope(a, &ro, offsets[k], b));
        EXPECT_OK(nnt_tensor_rope_backward(b, &ro, offsets[k], b));
        float *got = to_host(b);
        EXPECT_TOL(rel_err(got, xd, n), 1.2e-6, "rope_backward(rope(x)) - x, offset %lld",
                   (long long)offsets[k]);
        free(got);
        nnt_tensor *all[2] = {a, b};
        destroy_all(2, all);
    }
    free(x), free(xd);
}
END_TEST

/* rope on positions [o, o + T) gives rows o.. of the rope of a longer sequence (bitwise:
 * each element is computed from its position alone). */
START_TEST(rope_pos_offset_matches_longer_sequence)
{
    const int64_t o = 9, tshort = 6, tlong = 20, hd = 8, nbh = 2 * 2;
    const int64_t sl[4] = {2, 2, tlong, hd}, ss[4] = {2, 2, tshort, hd};
    int64_t nl = test_product(4, sl), ns = test_product(4, ss);
    float *xl = test_random_f32(nl, 29, -1, 1), *xs = malloc((size_t)ns * sizeof *xs);
    for (int64_t b = 0; b < nbh; b++)
        memcpy(xs + b * tshort * hd, xl + (b * tlong + o) * hd,
               (size_t)(tshort * hd) * sizeof *xs);
    nnt_rope_options ro = NNT_ROPE_OPTIONS_INIT;
    ro.theta = 1e6;
    nnt_tensor *al = tensor_f32(4, sl, (int64_t[]){1, 2, 7, 4}, xl),
               *as = tensor_f32(4, ss, (int64_t[]){2, 1, 4, 8}, xs);
    EXPECT_OK(nnt_tensor_rope(al, &ro, 0, al));
    EXPECT_OK(nnt_tensor_rope(as, &ro, o, as));
    float *gl = to_host(al), *gs = to_host(as);
    for (int64_t b = 0; b < nbh; b++)
        expect_same_bits("rope with pos_offset vs a longer sequence", (int)b,
                         gl + (b * tlong + o) * hd, gs + b * tshort * hd, tshort * hd);
    /* and backward */
    EXPECT_OK(nnt_tensor_copy_from_host(al, xl, (size_t)nl * 4));
    EXPECT_OK(nnt_tensor_copy_from_host(as, xs, (size_t)ns * 4));
    EXPECT_OK(nnt_tensor_rope_backward(al, &ro, 0, al));
    EXPECT_OK(nnt_tensor_rope_backward(as, &ro, o, as));
    free(gl), free(gs);
    gl = to_host(al), gs = to_host(as);
    for (int64_t b = 0; b < nbh; b++)
        expect_same_bits("rope_backward with pos_offset vs a longer sequence", (int)b,
                         gl + (b * tlong + o) * hd, gs + b * tshort * hd, tshort * hd);
    nnt_tensor *all[2] = {al, as};
    destroy_all(2, all);
    free(xl), free(xs), free(gl), free(gs);
}
END_TEST

/* The frequency table read back through the op: at position 1, x = (1, 0) pairs give
 * (cos f, sin f), so f = atan2(y_hi, y_lo) (f < pi). Returns inv[hd/2]. */
static double *table_through_rope(const nnt_rope_options *ro, int64_t hd, int64_t hd_tile)
{
    const int64_t s4[4] = {1, 1, 1, hd}, tl[4] = {1, 1, 1, hd_tile};
    float *x = calloc((size_t)hd, sizeof *x);
    for (int64_t i = 0; i < hd / 2; i++)
        x[i] = 1.0f;
    nnt_tensor *t = tensor_f32(4, s4, tl, x);
    EXPECT_OK(nnt_tensor_rope(t, ro, 1, t));
    float *y = to_host(t);
    double *inv = malloc((size_t)(hd / 2) * sizeof *inv);
    for (int64_t i = 0; i < hd / 2; i++)
        inv[i] = atan2(y[i + hd / 2], y[i]);
    EXPECT_OK(nnt_tensor_destroy(t));
    free(x), free(y);
    return inv;
}

/* Relative error of the recovered frequencies (float cos and sin of the angle: ~6e-8, as is
 * an ulp of the float table): measured default 9.0e-8; llama3 2.4e-7 (the medium band's float
 * arithmetic, as Hugging Face's, against exact values). A wrong band is off by up to 8x. */
#define RP_TABLE_TOL 9e-7
#define RP_TABLE_TOL_LLAMA3 2.4e-6

START_TEST(rope_tables_match_hand_checked_values)
{
    /* Default: theta 10000, hd 16: inv_freq[i] = 10000^(-i/8) = 10^(-i/2). */
    static const struct { int i; double want; } dflt[] = {
        {0, 1.0}, {1, 0.31622776601683794}, {2, 0.1}, {4, 0.01}, {7, 3.1622776601683794e-4}};
    double *inv = table_through_rope(NULL, 16, 8);   /* hd in halves */
    for (size_t k = 0; k < sizeof dflt / sizeof *dflt; k++)
        EXPECT_TOL(fabs(inv[dflt[k].i] - dflt[k].want) / dflt[k].want, RP_TABLE_TOL,
                   "default table, i = %d: %.9g, want %.9g", dflt[k].i, inv[dflt[k].i],
                   dflt[k].want);
    free(inv);

    /* Llama 3.1: theta 500000, hd 128, factor 8, low 1, high 4, original 8192. Per i,
     * f = 500000^(-i/64), wavelen = 2 pi / f; high band (wavelen < 8192/4 = 2048, i <= 28):
     * f; low band (wavelen > 8192, i >= 35): f / 8; between, s = (8192 / wavelen - 1) / 3 and
     * (1 - s) f / 8 + s f. E.g. i = 32: f = 1/sqrt(500000) = 1.41421356e-3, wavelen 4442.88,
     * s = 0.281283, f (0.718717 / 8 + 0.281283) = 5.24846161e-4. */
    static const struct { int i; double want; } l3[] = {
        {0, 1.0},                  /* high band: unchanged                  */
        {1, 8.146172339e-01},
        {20, 1.656044008e-02},
        {28, 3.211445995e-03},     /* wavelen 1956.5: last unchanged        */
        {29, 2.166570764e-03},     /* wavelen 2401.7, s = 0.803621          */
        {30, 1.371893568e-03},     /* wavelen 2948.3, s = 0.592849          */
        {32, 5.248461610e-04},     /* wavelen 4442.9, s = 0.281283          */
        {34, 1.785078128e-04},     /* wavelen 6695.1, s = 0.074527          */
        {35, 9.556212354e-05},     /* wavelen 8218.7: first divided by 8    */
        {40, 3.428102196e-05},
        {63, 3.068925989e-07},     /* 500000^(-63/64) / 8                   */
    };
    nnt_rope_options ro = NNT_ROPE_OPTIONS_INIT;
    ro.theta = 500000.0;
    ro.scaling = NNT_ROPE_SCALING_LLAMA3;
    for (int tiling = 0; tiling < 2; tiling++) {
        inv = table_through_rope(&ro, 128, tiling ? 16 : 128);
        for (size_t k = 0; k < sizeof l3 / sizeof *l3; k++)
            EXPECT_TOL(fabs(inv[l3[k].i] - l3[k].want) / l3[k].want, RP_TABLE_TOL_LLAMA3,
                       "llama3 table, hd tile %d, i = %d: %.9g, want %.9g",
                       tiling ? 16 : 128, l3[k].i, inv[l3[k].i], l3[k].want);
        free(inv);
    }
}
END_TEST

/* ---- partial rotary and LongRoPE (Phi-3) -------------------------------------------------- */

/* x, y (nbh, t, hd): the first r entries rotated as rope_ref does hd, times m (LongRoPE's
 * attention factor: transformers multiplies the cosines and sines), the rest copied; sign -1
 * the transposed rotation (the gradient). */
static void rope_partial_ref(int64_t nbh, int64_t t, int64_t hd, int64_t r, const double *inv,
                             int64_t pos0, int sign, double m, const double *x, double *y)
{
    int64_t h = r / 2;
    for (int64_t row = 0; row < nbh * t; row++) {
        const double *xr = x + row * hd;
        double *yr = y + row * hd;
        for (int64_t i = r; i < hd; i++)
            yr[i] = xr[i];
        for (int64_t i = 0; i < h; i++) {
            double a = (double)(pos0 + row % t) * inv[i], c = m * cos(a), sn = m * sign * sin(a);
            double lo = xr[i], hi = xr[i + h];
            yr[i] = lo * c - hi * sn;
            yr[i + h] = hi * c + lo * sn;
        }
    }
}

/* (2, 3, 7, 12) with partial_rotary_factor 0.5 (r 6, pairs (i, i + 3)) and LongRoPE over an
 * original context of 8: positions 0..6 and 1..7 take the short factors, 2..8 the long ones
 * (their last position + 1 passes 8); factor 4 gives the attention factor sqrt(1 + ln 4 / ln 8) =
 * 1.29099. Against the float64 reference, measured y 1.1e-7 and dx 1.4e-7 (every tiling,
 * in place or not); the entries past r are copied bit for bit. A wrong choice of factors,
 * pair offset or missing attention factor is off by O(1). */
#define RPP_TOL 1e-6

START_TEST(rope_partial_longrope_matches_reference)
{
    enum { B = 2, H = 3, T = 7, D = 12, R = 6, N = B * H * T * D };
    const int64_t s4[4] = {B, H, T, D};
    static const int64_t tilings[][4] = {{2, 3, 7, 12}, {1, 2, 3, 12}, {2, 1, 4, 3},
                                         {1, 3, 2, 1}};
    nnt_rope_options ro = NNT_ROPE_OPTIONS_INIT;
    ro.theta = 500.0;
    ro.partial_rotary_factor = 0.5;
    ro.scaling = NNT_ROPE_SCALING_LONGROPE;
    ro.factor = 4.0;
    ro.original_max_position = 8;
    ro.nfactors = R / 2;
    const float shortf[3] = {1.0f, 1.5f, 3.0f}, longf[3] = {1.25f, 4.0f, 9.5f};
    memcpy(ro.short_factor, shortf, sizeof shortf);
    memcpy(ro.long_factor, longf, sizeof longf);
    const double m = sqrt(1.0 + log(4.0) / log(8.0));
    float *x = test_random_f32(N, 31, -2, 2), *dy = test_random_f32(N, 32, -1, 1);
    double *xd = test_to_double(x, N), *dyd = test_to_double(dy, N);
    double *y_ref = test_zeros(N), *dx_ref = test_zeros(N);
    for (int off = 0; off <= 2; off++) {   /* positions up to 6, 7 (= 8 - 1): short; 8 long */
        double inv[R / 2];
        const float *f = off + T > 8 ? longf : shortf;
        for (int i = 0; i < R / 2; i++)
            inv[i] = (float)(1.0 / (f[i] * pow(500.0, 2.0 * i / R)));
        rope_partial_ref(B * H, T, D, R, inv, off, 1, m, xd, y_ref);
        rope_partial_ref(B * H, T, D, R, inv, off, -1, m, dyd, dx_ref);
        for (size_t k = 0; k < sizeof tilings / sizeof *tilings; k++)
            for (int in_place = 0; in_place < 2; in_place++) {
                nnt_tensor *tx = tensor_f32(4, s4, tilings[k], x);
                nnt_tensor *tdy = tensor_f32(4, s4, tilings[k], dy);
                nnt_tensor *ty = in_place ? tx : tensor_f32(4, s4, tilings[k], NULL);
                nnt_tensor *tdx = in_place ? tdy : tensor_f32(4, s4, tilings[k], NULL);
                EXPECT_OK(nnt_tensor_rope(tx, &ro, off, ty));
                EXPECT_OK(nnt_tensor_rope_backward(tdy, &ro, off, tdx));
                float *gy = to_host(ty), *gdx = to_host(tdx);
                EXPECT_TOL(rel_err(gy, y_ref, N), RPP_TOL, "partial longrope y, offset %d, "
                           "tiling %zu, in place %d", off, k, in_place);
                EXPECT_TOL(rel_err(gdx, dx_ref, N), RPP_TOL, "partial longrope dx, offset %d, "
                           "tiling %zu, in place %d", off, k, in_place);
                for (int64_t e = 0; e < N; e++)   /* the entries past r pass unchanged */
                    if (e % D >= R && (gy[e] != x[e] || gdx[e] != dy[e]))
                        ck_abort_msg("entry %lld past the rotary dimension changed",
                                     (long long)e);
                free(gy), free(gdx);
                nnt_tensor *all[4] = {tx, tdy, in_place ? NULL : ty, in_place ? NULL : tdx};
                destroy_all(4, all);
            }
    }
    /* hd tiles must divide r/2 = 3; r must be even; the factors one per pair; per-token
     * positions past the original context are refused (transformers picks by the largest) */
    const char *fn = "nnt_tensor_rope";
    nnt_tensor *h2 = tensor_f32(4, s4, (int64_t[]){2, 3, 7, 2}, x);
    EXPECT_FAIL_MSG(nnt_tensor_rope(h2, &ro, 0, h2), NNT_E_SHAPE, "half the rotary");
    nnt_tensor *w = tensor_f32(4, s4, s4, x);
    nnt_rope_options bad = ro;
    bad.partial_rotary_factor = 0.25;   /* r 3 */
    EXPECT_FAIL_MSG(nnt_tensor_rope(w, &bad, 0, w), NNT_E_INVAL, "even");
    bad = ro;
    bad.nfactors = 2;
    EXPECT_FAIL_MSG(nnt_tensor_rope(w, &bad, 0, w), NNT_E_INVAL, "needs 3");
    bad = ro;
    bad.long_factor[1] = 0.0f;
    EXPECT_FAIL_MSG(nnt_tensor_rope(w, &bad, 0, w), NNT_E_INVAL, "long_factor[1]");
    bad = ro;
    bad.original_max_position = 1;   /* the default attention factor would divide by ln 1 */
    EXPECT_FAIL_MSG(nnt_tensor_rope(w, &bad, 0, w), NNT_E_INVAL, "give attention_factor");
    bad.attention_factor = 1.1;
    EXPECT_OK(nnt_tensor_rope(w, &bad, 0, w));
    bad = ro;
    bad.partial_rotary_factor = 1.5;
    EXPECT_FAIL_MSG(nnt_tensor_rope(w, &bad, 0, w), NNT_E_INVAL, "partial_rotary_factor");
    nnt_tensor *pos = tensor_i32(2, (int64_t[]){B, T}, (int64_t[]){B, T});
    EXPECT_OK(nnt_tensor_fill(pos, 0));
    EXPECT_OK(nnt_tensor_rope_positions(w, &ro, pos, w));   /* T 7 <= 8: the short factors */
    bad = ro;
    bad.original_max_position = 6;
    EXPECT_FAIL_MSG(nnt_tensor_rope_positions(w, &bad, pos, w), NNT_E_UNSUPPORTED, fn);
    nnt_tensor *all[3] = {h2, w, pos};
    destroy_all(3, all);
    free(x), free(dy), free(xd), free(dyd), free(y_ref), free(dx_ref);
}
END_TEST

START_TEST(rope_rejects_bad_arguments)
{
    const char *fn = "nnt_tensor_rope", *bfn = "nnt_tensor_rope_backward";
    const int64_t s4[4] = {2, 2, 6, 8}, t4[4] = {1, 2, 4, 8};
    nnt_tensor *x = tensor_f32(4, s4, t4, NULL), *y = tensor_f32(4, s4, t4, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, NULL, 0, y), NNT_E_STATE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rope_backward(x, NULL, 0, y), NNT_E_STATE, bfn);
    EXPECT_OK(nnt_tensor_fill(x, 0.5));
    nnt_tensor *xi = tensor_i32(4, s4, t4), *yt = tensor_f32(4, s4, (int64_t[]){1, 2, 3, 8}, NULL),
               *x3 = tensor_f32(3, s4, t4, NULL),
               *odd = tensor_f32(4, (int64_t[]){2, 2, 6, 7}, (int64_t[]){1, 2, 4, 7}, NULL),
               *h3 = tensor_f32(4, s4, (int64_t[]){1, 2, 4, 3}, NULL),
               *h8 = tensor_f32(4, (int64_t[]){2, 2, 6, 12}, (int64_t[]){1, 2, 4, 8}, NULL),
               *h6 = tensor_f32(4, (int64_t[]){2, 2, 6, 12}, (int64_t[]){1, 2, 4, 6}, NULL);
    nnt_tensor *filled[5] = {x3, odd, h3, h8, h6};
    for (int i = 0; i < 5; i++)
        EXPECT_OK(nnt_tensor_fill(filled[i], 1));
    EXPECT_FAIL_MSG(nnt_tensor_rope(NULL, NULL, 0, y), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, NULL, 0, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, NULL, -1, y), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, NULL, INT64_MAX - 2, y), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rope(xi, NULL, 0, y), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, NULL, 0, yt), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rope(x3, NULL, 0, x3), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rope(odd, NULL, 0, odd), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_rope(h3, NULL, 0, h3), NNT_E_SHAPE, fn);   /* 3 does not divide 4 */
    EXPECT_FAIL_MSG(nnt_tensor_rope(h8, NULL, 0, h8), NNT_E_SHAPE, fn);   /* 8 of 12: partial   */
    EXPECT_OK(nnt_tensor_rope(h6, NULL, 0, h6));                          /* halves of 12       */

    nnt_rope_options ro = NNT_ROPE_OPTIONS_INIT;
    ro.size = sizeof ro - 1;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, fn);
    ro.size = sizeof ro + 8;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_UNSUPPORTED, fn);
    nnt_rope_options good = NNT_ROPE_OPTIONS_INIT;
    const double bad_theta[3] = {0, -10000, INFINITY};
    for (int i = 0; i < 3; i++) {
        ro = good;
        ro.theta = bad_theta[i];
        EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, fn);
        EXPECT_FAIL_MSG(nnt_tensor_rope_backward(x, &ro, 0, y), NNT_E_INVAL, bfn);
    }
    ro = good;
    ro.scaling = 5;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, fn);
    /* YaRN's fields, checked with its scaling only */
    ro = good;
    ro.scaling = NNT_ROPE_SCALING_YARN;
    EXPECT_OK(nnt_tensor_rope(x, &ro, 0, y));
    ro.beta_fast = 0.0;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, "beta_fast");
    ro.beta_fast = 32.0, ro.attention_factor = -1.0;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, "attention_factor");
    ro.attention_factor = 0.0, ro.truncate = 2;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, "truncate 2");
    ro.truncate = 0, ro.original_max_position = 0;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, "original_max_position");
    ro = good;
    ro.scaling = NNT_ROPE_SCALING_LINEAR;
    ro.factor = 0;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, "factor");
    ro = good;
    ro.factor = 0;   /* ignored without scaling */
    EXPECT_OK(nnt_tensor_rope(x, &ro, 0, y));
    ro.scaling = NNT_ROPE_SCALING_LLAMA3;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, fn);
    ro = good;
    ro.scaling = NNT_ROPE_SCALING_LLAMA3;
    ro.low_freq_factor = NAN;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, fn);
    ro.low_freq_factor = 4;   /* == high */
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, fn);
    ro.low_freq_factor = 1;
    ro.high_freq_factor = -4;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, fn);
    ro.high_freq_factor = 4;
    ro.original_max_position = 0;
    EXPECT_FAIL_MSG(nnt_tensor_rope(x, &ro, 0, y), NNT_E_INVAL, fn);
    ro.original_max_position = 8192;
    EXPECT_OK(nnt_tensor_rope(x, &ro, 0, y));
    EXPECT_FAIL_MSG(nnt_tensor_rope_backward(x, NULL, 0, yt), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_rope_backward(h3, NULL, 0, h3), NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_rope_backward(x, NULL, -5, y), NNT_E_INVAL, bfn);
    EXPECT_OK(nnt_tensor_rope_backward(y, &ro, 0, x));
    nnt_tensor *all[9] = {x, y, xi, yt, x3, odd, h3, h8, h6};
    destroy_all(9, all);
}
END_TEST

/* ---- grouped-query attention -------------------------------------------------------------- */

/* One (t, hd) slab of causal attention in float64: o, lse set (either may be NULL); with
 * dout, dq set and dk, dv added to (several q heads share a kv slab). */
static void attn_slab_ref(int64_t t, int64_t hd, double scale, const double *q,
                          const double *k, const double *v, double *o, double *lse,
                          const double *dout, double *dq, double *dk, double *dv)
{
    double *p = malloc((size_t)t * sizeof *p);
    for (int64_t i = 0; i < t; i++) {
        const double *qi = q + i * hd;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= i; j++) {
            double sc = 0;
            for (int64_t c = 0; c < hd; c++)
                sc += qi[c] * k[j * hd + c];
            p[j] = scale * sc;
            mx = fmax(mx, p[j]);
        }
        for (int64_t j = 0; j <= i; j++)
            sum += (p[j] = exp(p[j] - mx));
        for (int64_t j = 0; j <= i; j++)
            p[j] /= sum;
        double oi[64] = {0}, dsum = 0;   /* hd <= 64 here */
        for (int64_t c = 0; c < hd; c++)
            for (int64_t j = 0; j <= i; j++)
                oi[c] += p[j] * v[j * hd + c];
        if (o)
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
        for (int64_t j = 0; j <= i; j++) {
            double dp = 0;
            for (int64_t c = 0; c < hd; c++)
                dp += di[c] * v[j * hd + c];
            double ds = p[j] * (dp - dsum);
            for (int64_t c = 0; c < hd; c++) {
                dq[i * hd + c] += scale * ds * k[j * hd + c];
                dk[j * hd + c] += scale * ds * qi[c];
                dv[j * hd + c] += p[j] * di[c];
            }
        }
    }
    free(p);
}

/* Grouped-query attention, Hugging Face's repeat_kv semantics: q, o, dout, dq (b, nh, t, hd);
 * k, v, dk, dv (b, nkv, t, hd); q head h reads kv head h / (nh / nkv). o, lse, dq, dk, dv
 * set (dout NULL: forward only). */
static void gqa_ref(int64_t b, int64_t nh, int64_t nkv, int64_t t, int64_t hd, double scale,
                    const double *q, const double *k, const double *v, double *o, double *lse,
                    const double *dout, double *dq, double *dk, double *dv)
{
    int64_t g = nh / nkv, sq = t * hd;
    if (dout) {
        memset(dk, 0, (size_t)(b * nkv * sq) * sizeof *dk);
        memset(dv, 0, (size_t)(b * nkv * sq) * sizeof *dv);
    }
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t h = 0; h < nh; h++) {
            int64_t qs = bi * nh + h, ks = bi * nkv + h / g;
            attn_slab_ref(t, hd, scale, q + qs * sq, k + ks * sq, v + ks * sq,
                          o ? o + qs * sq : NULL, lse ? lse + qs * t : NULL,
                          dout ? dout + qs * sq : NULL, dout ? dq + qs * sq : NULL,
                          dout ? dk + ks * sq : NULL, dout ? dv + ks * sq : NULL);
        }
}

/* tiny case for finite differences: b 1, nh 4, nkv 2 (groups of 2), t 3, hd 2 */
struct gqa_case {
    double q[24], k[12], v[12], w[24];
};

static double gqa_loss(void *p)
{
    struct gqa_case *s = p;
    double o[24], sum = 0;
    gqa_ref(1, 4, 2, 3, 2, 0.8, s->q, s->k, s->v, o, NULL, NULL, NULL, NULL, NULL);
    for (int i = 0; i < 24; i++)
        sum += o[i] * s->w[i];
    return sum;
}

/* Measured dq 3.0e-10, dk 4.6e-10, dv 2.7e-10; a gradient missing a q head of a group is
 * off by O(1). */
#define FD_TOL_GQA 4.6e-9

START_TEST(gqa_reference_matches_finite_differences)
{
    unsigned long long st = 97;
    struct gqa_case c;
    for (int i = 0; i < 24; i++) {
        c.q[i] = 2 * test_rand(&st) - 1;
        c.w[i] = 2 * test_rand(&st) - 1;
    }
    for (int i = 0; i < 12; i++) {
        c.k[i] = 2 * test_rand(&st) - 1;
        c.v[i] = 2 * test_rand(&st) - 1;
    }
    double o[24], lse[12], dq[24], dk[12], dv[12];
    gqa_ref(1, 4, 2, 3, 2, 0.8, c.q, c.k, c.v, o, lse, c.w, dq, dk, dv);
    EXPECT_TOL(fd_err(gqa_loss, &c, c.q, dq, 24), FD_TOL_GQA, "gqa dq");
    EXPECT_TOL(fd_err(gqa_loss, &c, c.k, dk, 12), FD_TOL_GQA, "gqa dk");
    EXPECT_TOL(fd_err(gqa_loss, &c, c.v, dv, 12), FD_TOL_GQA, "gqa dv");
}
END_TEST

#define GQ_B 2
#define GQ_H 6
#define GQ_T 11
#define GQ_D 8
#define GQ_NQ (GQ_B * GQ_H * GQ_T * GQ_D)
#define GQ_R (GQ_B * GQ_H * GQ_T)

static const int gq_nkv[4] = {1, 2, 3, 6};

/* q tile (B, NH, T, hd), then the kv head tile and kv hd tile (clamped to NKV and hd); k and
 * v share q's B and T tiles */
static const int64_t gq_tilings[][6] = {
    {2, 6, 11, 8, 6, 8},   /* one tile each                                                 */
    {1, 6, 4, 8, 6, 8},    /* T in 4, 4, 3                                                  */
    {2, 4, 5, 8, 1, 8},    /* q heads 4 + 2 (cut groups of 3 and 6), one kv head a tile     */
    {1, 3, 3, 8, 2, 8},    /* q heads in threes (cut groups of 2), kv heads in twos (NKV 3:
                              2 + 1; NKV 6: a q tile spans two kv tiles)                    */
    {2, 5, 6, 3, 1, 4},    /* hd split differently for q (3, 3, 2) and k, v (4, 4)           */
    {1, 1, 7, 8, 4, 2},    /* one q head a tile; kv heads 4 + 2; kv hd in quarters           */
    {2, 2, 11, 8, 3, 8},   /* q heads in twos, kv heads in threes: NKV 6 spans tiles (G 1)   */
};
#define GQ_NT ((int)(sizeof gq_tilings / sizeof *gq_tilings))

/* Against the float64 reference (normwise, max over NKV, tilings and BLIS kernel sets),
 * measured: o 1.5e-7, lse 1.0e-7, dq 2.7e-7, dk 2.8e-7, dv 1.7e-7. */
#define GQ_TOL_O 1.5e-6
#define GQ_TOL_LSE 1e-6
#define GQ_TOL_DQ 2.7e-6
#define GQ_TOL_DK 2.8e-6
#define GQ_TOL_DV 1.7e-6
/* dk, dv against the group sums of the multi-head run on repeated k, v (the same products
 * added in another order), measured dk 2.1e-7, dv 2.4e-7 */
#define GQ_TOL_SUM_DK 2.1e-6
#define GQ_TOL_SUM_DV 2.4e-6

struct gqa_run {
    float *o, *lse, *dq, *dk, *dv;
};

static void gqa_run_free(struct gqa_run *r)
{
    free(r->o), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
}

/* Forward and backward through the op: q, dout (B, NH, T, hd) with tile qt; k, v
 * (B, nkv, T, hd) with tile kt. */
static struct gqa_run gqa_op(int64_t nkv, const int64_t *qt, const int64_t *kt, double scale,
                             const float *q, const float *k, const float *v, const float *dout)
{
    const int64_t qs[4] = {GQ_B, GQ_H, GQ_T, GQ_D}, ks[4] = {GQ_B, nkv, GQ_T, GQ_D};
    nnt_tensor *tq = tensor_f32(4, qs, qt, q), *tk = tensor_f32(4, ks, kt, k),
               *tv = tensor_f32(4, ks, kt, v), *to = tensor_f32(4, qs, qt, NULL),
               *tl = tensor_f32(3, qs, qt, NULL), *tdo = tensor_f32(4, qs, qt, dout),
               *tdq = tensor_f32(4, qs, qt, NULL), *tdk = tensor_f32(4, ks, kt, NULL),
               *tdv = tensor_f32(4, ks, kt, NULL);
    EXPECT_OK(nnt_tensor_attention(tq, tk, tv, scale, to, tl));
    EXPECT_OK(nnt_tensor_attention_backward(tq, tk, tv, to, tl, tdo, scale, tdq, tdk, tdv));
    struct gqa_run r = {to_host(to), to_host(tl), to_host(tdq), to_host(tdk), to_host(tdv)};
    nnt_tensor *all[9] = {tq, tk, tv, to, tl, tdo, tdq, tdk, tdv};
    destroy_all(9, all);
    return r;
}

/* k (B, nkv, T, hd) repeated to (B, NH, T, hd) as repeat_kv does */
static float *repeat_kv(const float *k, int64_t nkv)
{
    int64_t g = GQ_H / nkv, sl = GQ_T * GQ_D;
    float *e = malloc((size_t)GQ_NQ * sizeof *e);
    for (int64_t b = 0; b < GQ_B; b++)
        for (int64_t h = 0; h < GQ_H; h++)
            memcpy(e + (b * GQ_H + h) * sl, k + (b * nkv + h / g) * sl,
                   (size_t)sl * sizeof *e);
    return e;
}

/* the sum over each group of q heads of a (B, NH, T, hd) gradient: (B, nkv, T, hd) */
static double *group_sum(const float *dx, int64_t nkv)
{
    int64_t g = GQ_H / nkv, sl = GQ_T * GQ_D;
    double *s = test_zeros(GQ_B * nkv * sl);
    for (int64_t b = 0; b < GQ_B; b++)
        for (int64_t h = 0; h < GQ_H; h++)
            for (int64_t e = 0; e < sl; e++)
                s[(b * nkv + h / g) * sl + e] += dx[(b * GQ_H + h) * sl + e];
    return s;
}

/* _i indexes gq_nkv */
START_TEST(gqa_matches_reference_for_every_tiling)
{
    const int64_t nkv = gq_nkv[_i], nk = GQ_B * nkv * GQ_T * GQ_D;
    const double scale = 1.0 / sqrt((double)GQ_D);
    float *q = test_random_f32(GQ_NQ, 41, -1.5, 1.5), *k = test_random_f32(nk, 42, -1.5, 1.5),
          *v = test_random_f32(nk, 43, -1, 1), *dout = test_random_f32(GQ_NQ, 44, -1, 1);
    double *qd = test_to_double(q, GQ_NQ), *kd = test_to_double(k, nk), *vd = test_to_double(v, nk),
           *dd = test_to_double(dout, GQ_NQ);
    double *o_ref = test_zeros(GQ_NQ), *lse_ref = test_zeros(GQ_R), *dq_ref = test_zeros(GQ_NQ),
           *dk_ref = test_zeros(nk), *dv_ref = test_zeros(nk);
    gqa_ref(GQ_B, GQ_H, nkv, GQ_T, GQ_D, scale, qd, kd, vd, o_ref, lse_ref, dd, dq_ref, dk_ref,
            dv_ref);
    float *ke = repeat_kv(k, nkv), *ve = repeat_kv(v, nkv);

    for (int t = 0; t < GQ_NT; t++) {
        const int64_t *tl = gq_tilings[t];
        const int64_t kt[4] = {tl[0], tl[4], tl[2], tl[5]};
        struct gqa_run r = gqa_op(nkv, tl, kt, scale, q, k, v, dout);
        EXPECT_TOL(rel_err(r.o, o_ref, GQ_NQ), GQ_TOL_O, "gqa o, NKV %d, tiling %d", (int)nkv, t);
        EXPECT_TOL(rel_err(r.lse, lse_ref, GQ_R), GQ_TOL_LSE, "gqa lse, NKV %d, tiling %d",
                   (int)nkv, t);
        EXPECT_TOL(rel_err(r.dq, dq_ref, GQ_NQ), GQ_TOL_DQ, "gqa dq, NKV %d, tiling %d",
                   (int)nkv, t);
        EXPECT_TOL(rel_err(r.dk, dk_ref, nk), GQ_TOL_DK, "gqa dk, NKV %d, tiling %d", (int)nkv,
                   t);
        EXPECT_TOL(rel_err(r.dv, dv_ref, nk), GQ_TOL_DV, "gqa dv, NKV %d, tiling %d", (int)nkv,
                   t);

        /* the multi-head path on k, v repeated per q head, with q's tiling: every q slab
         * computes the same operations on the same values (bitwise); dk, dv are its
         * gradients summed over each group (bitwise when NKV == NH: nothing to sum) */
        struct gqa_run e = gqa_op(GQ_H, tl, tl, scale, q, ke, ve, dout);
        expect_same_bits("gqa o vs multi-head on repeated k, v", t, e.o, r.o, GQ_NQ);
        expect_same_bits("gqa lse vs multi-head on repeated k, v", t, e.lse, r.lse, GQ_R);
        expect_same_bits("gqa dq vs multi-head on repeated k, v", t, e.dq, r.dq, GQ_NQ);
        if (nkv == GQ_H) {
            expect_same_bits("dk vs multi-head", t, e.dk, r.dk, nk);
            expect_same_bits("dv vs multi-head", t, e.dv, r.dv, nk);
        }
        double *sk = group_sum(e.dk, nkv), *sv = group_sum(e.dv, nkv);
        EXPECT_TOL(rel_err(r.dk, sk, nk), GQ_TOL_SUM_DK,
                   "gqa dk vs the group sums of multi-head dk, NKV %d, tiling %d", (int)nkv, t);
        EXPECT_TOL(rel_err(r.dv, sv, nk), GQ_TOL_SUM_DV,
                   "gqa dv vs the group sums of multi-head dv, NKV %d, tiling %d", (int)nkv, t);
        free(sk), free(sv);
        gqa_run_free(&r);
        gqa_run_free(&e);
    }
    free(q), free(k), free(v), free(dout), free(qd), free(kd), free(vd), free(dd);
    free(o_ref), free(lse_ref), free(dq_ref), free(dk_ref), free(dv_ref), free(ke), free(ve);
}
END_TEST

/* Several q head tiles and query tiles add into each dk, dv tile: the same bits every run. */
START_TEST(gqa_is_deterministic)
{
    const int64_t nkv = 2, nk = GQ_B * nkv * GQ_T * GQ_D;
    const int64_t qt[4] = {1, 2, 3, 4}, kt[4] = {1, 2, 3, 8};   /* 3 q head tiles a kv tile */
    float *q = test_random_f32(GQ_NQ, 51, -1, 1), *k = test_random_f32(nk, 52, -1, 1),
          *v = test_random_f32(nk, 53, -1, 1), *dout = test_random_f32(GQ_NQ, 54, -1, 1);
    struct gqa_run r[3];
    for (int run = 0; run < 3; run++)
        r[run] = gqa_op(nkv, qt, kt, 0.3, q, k, v, dout);
    for (int run = 1; run < 3; run++) {
        expect_same_bits("gqa o, run", run, r[0].o, r[run].o, GQ_NQ);
        expect_same_bits("gqa lse, run", run, r[0].lse, r[run].lse, GQ_R);
        expect_same_bits("gqa dq, run", run, r[0].dq, r[run].dq, GQ_NQ);
        expect_same_bits("gqa dk, run", run, r[0].dk, r[run].dk, nk);
        expect_same_bits("gqa dv, run", run, r[0].dv, r[run].dv, nk);
    }
    for (int run = 0; run < 3; run++)
        gqa_run_free(&r[run]);
    free(q), free(k), free(v), free(dout);
}
END_TEST

START_TEST(gqa_rejects_bad_arguments)
{
    const char *fn = "nnt_tensor_attention", *bfn = "nnt_tensor_attention_backward";
    const int64_t qs[4] = {2, 6, 5, 4}, qt[4] = {1, 3, 3, 4};
    const int64_t ks[4] = {2, 2, 5, 4}, kt[4] = {1, 1, 3, 4};
    nnt_tensor *q = tensor_f32(4, qs, qt, NULL), *k = tensor_f32(4, ks, kt, NULL),
               *v = tensor_f32(4, ks, kt, NULL), *o = tensor_f32(4, qs, qt, NULL),
               *lse = tensor_f32(3, qs, qt, NULL);
    nnt_tensor *bad[] = {
        tensor_f32(4, (int64_t[]){2, 4, 5, 4}, kt, NULL),   /* 0: 4 kv heads: 6 % 4 != 0  */
        tensor_f32(4, (int64_t[]){2, 3, 5, 4}, kt, NULL),   /* 1: 3 kv heads (not k's 2)  */
        tensor_f32(4, ks, (int64_t[]){1, 2, 3, 4}, NULL),   /* 2: k's heads tiled apart   */
        tensor_f32(4, (int64_t[]){2, 2, 6, 4}, kt, NULL),   /* 3: T 6, not 5              */
        tensor_f32(4, (int64_t[]){2, 2, 5, 3}, kt, NULL),   /* 4: hd 3, not 4             */
        tensor_f32(4, ks, (int64_t[]){2, 1, 3, 4}, NULL),   /* 5: B tiled apart from q    */
        tensor_f32(4, ks, (int64_t[]){1, 1, 2, 4}, NULL),   /* 6: T tiled apart from q    */
        tensor_f32(4, (int64_t[]){2, 12, 5, 4}, kt, NULL),  /* 7: more kv heads than q's  */
        tensor_f32(3, ks, kt, NULL),                        /* 8: 3 dimensions            */
    };
    const int nbad = (int)(sizeof bad / sizeof *bad);
    EXPECT_OK(nnt_tensor_fill(q, 0.5));
    EXPECT_OK(nnt_tensor_fill(k, 0.25));
    EXPECT_OK(nnt_tensor_fill(v, 1));
    for (int i = 0; i < nbad; i++)
        EXPECT_OK(nnt_tensor_fill(bad[i], 1));
    EXPECT_OK(nnt_tensor_attention(q, k, v, 0.5, o, lse));
    for (int i = 0; i < nbad; i++) {
        if (i != 1 && i != 2) {   /* both k and v bad */
            EXPECT_FAIL_MSG(nnt_tensor_attention(q, bad[i], bad[i], 0.5, o, lse), NNT_E_SHAPE,
                            fn);
        }
        EXPECT_FAIL_MSG(nnt_tensor_attention(q, k, bad[i], 0.5, o, lse), NNT_E_SHAPE, fn);
        EXPECT_FAIL_MSG(nnt_tensor_attention(q, bad[i], v, 0.5, o, lse), NNT_E_SHAPE, fn);
    }
    nnt_tensor *dq = tensor_f32(4, qs, qt, NULL), *dk = tensor_f32(4, ks, kt, NULL),
               *dv = tensor_f32(4, ks, kt, NULL);
    for (int i = 0; i < nbad; i++) {
        EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, k, v, o, lse, o, 0.5, dq, bad[i], dv),
                        NNT_E_SHAPE, bfn);
        EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, k, v, o, lse, o, 0.5, dq, dk, bad[i]),
                        NNT_E_SHAPE, bfn);
        EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, bad[i], v, o, lse, o, 0.5, dq, dk, dv),
                        NNT_E_SHAPE, bfn);
    }
    /* kv-side outputs in q's shape, q-side in k's */
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, k, v, o, lse, o, 0.5, dq, dq, dv),
                    NNT_E_INVAL, bfn);
    nnt_tensor *dq2 = tensor_f32(4, qs, qt, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, k, v, o, lse, o, 0.5, dq, dq2, dv),
                    NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_backward(q, k, v, o, lse, o, 0.5, dk, dq, dv),
                    NNT_E_SHAPE, bfn);
    EXPECT_FAIL_MSG(nnt_tensor_attention(q, k, v, 0.5, dk, lse), NNT_E_SHAPE, fn);
    EXPECT_OK(nnt_tensor_attention_backward(q, k, v, o, lse, o, 0.5, dq, dk, dv));
    nnt_tensor *all[9] = {q, k, v, o, lse, dq, dk, dv, dq2};
    destroy_all(9, all);
    destroy_all(nbad, bad);
}
END_TEST

/* ---- attention after cached keys (nnt_tensor_attention_kv) ---------------------------------- */

#define KV_TK 16   /* cache rows; positions 0 .. GQ_T - 1 hold keys */

/* (past, Tq, kv sequence tile) */
static const int64_t kv_cases[][3] = {
    {0, GQ_T, 16}, {0, GQ_T, 5}, {7, 4, 3}, {10, 1, 16}, {10, 1, 4}, {3, 5, 7}, {5, 1, 2},
};
#define KV_NC ((int)(sizeof kv_cases / sizeof *kv_cases))

/* rows [r0, r0 + n) of every (rows, hd) slab of x (nslab slabs of t rows) into a buffer of
 * nslab (n_out, hd) slabs at row d0, the other rows NaN */
static float *slab_rows(const float *x, int64_t nslab, int64_t t, int64_t r0, int64_t n,
                        int64_t n_out, int64_t d0)
{
    float *y = malloc((size_t)(nslab * n_out * GQ_D) * sizeof *y);
    for (int64_t i = 0; i < nslab * n_out * GQ_D; i++)
        y[i] = NAN;
    for (int64_t s = 0; s < nslab; s++)
        memcpy(y + (s * n_out + d0) * GQ_D, x + (s * t + r0) * GQ_D,
               (size_t)(n * GQ_D) * sizeof *y);
    return y;
}

/* The last Tq of past + Tq queries against a cache of KV_TK rows whose rows from past + Tq
 * on are NaN (never read): the rows of the float64 reference over all GQ_T positions, for
 * every tiling of the GQA test (its kv head and hd tiles, the case's sequence tile).
 * _i indexes gq_nkv. */
START_TEST(attention_kv_matches_reference_rows)
{
    const int64_t nkv = gq_nkv[_i], nk = GQ_B * nkv * GQ_T * GQ_D;
    const double scale = 1.0 / sqrt((double)GQ_D);
    float *q = test_random_f32(GQ_NQ, 61, -1.5, 1.5), *k = test_random_f32(nk, 62, -1.5, 1.5),
          *v = test_random_f32(nk, 63, -1, 1);
    double *qd = test_to_double(q, GQ_NQ), *kd = test_to_double(k, nk), *vd = test_to_double(v, nk);
    double *o_ref = test_zeros(GQ_NQ);
    gqa_ref(GQ_B, GQ_H, nkv, GQ_T, GQ_D, scale, qd, kd, vd, o_ref, NULL, NULL, NULL, NULL, NULL);
    for (int c = 0; c < KV_NC; c++) {
        int64_t past = kv_cases[c][0], tq = kv_cases[c][1], n = past + tq;
        float *qc = slab_rows(q, GQ_B * GQ_H, GQ_T, past, tq, tq, 0);
        float *kc = slab_rows(k, GQ_B * nkv, GQ_T, 0, n, KV_TK, 0);
        float *vc = slab_rows(v, GQ_B * nkv, GQ_T, 0, n, KV_TK, 0);
        double *want = malloc((size_t)(GQ_B * GQ_H * tq * GQ_D) * sizeof *want);
        for (int64_t sl = 0; sl < GQ_B * GQ_H; sl++)
            memcpy(want + sl * tq * GQ_D, o_ref + (sl * GQ_T + past) * GQ_D,
                   (size_t)(tq * GQ_D) * sizeof *want);
        for (int t = 0; t < GQ_NT; t++) {
            const int64_t *tl = gq_tilings[t];
            const int64_t qs[4] = {GQ_B, GQ_H, tq, GQ_D}, ks[4] = {GQ_B, nkv, KV_TK, GQ_D};
            const int64_t kt[4] = {tl[0], tl[4], kv_cases[c][2], tl[5]};
            nnt_tensor *tq_ = tensor_f32(4, qs, tl, qc), *tk = tensor_f32(4, ks, kt, kc),
                       *tv = tensor_f32(4, ks, kt, vc), *to = tensor_f32(4, qs, tl, NULL);
            EXPECT_OK(nnt_tensor_attention_kv(tq_, tk, tv, past, scale, to));
            float *got = to_host(to);
            EXPECT_TOL(rel_err(got, want, GQ_B * GQ_H * tq * GQ_D), GQ_TOL_O,
                       "attention_kv o, NKV %d, past %d, Tq %d, tiling %d", (int)nkv, (int)past,
                       (int)tq, t);
            free(got);
            nnt_tensor *all[4] = {tq_, tk, tv, to};
            destroy_all(4, all);
        }
        free(qc), free(kc), free(vc), free(want);
    }
    free(q), free(k), free(v), free(qd), free(kd), free(vd), free(o_ref);
}
END_TEST

/* past 0 and Tk = Tq: the same tasks as nnt_tensor_attention, the same bits, every tiling */
START_TEST(attention_kv_without_past_is_attention)
{
    const int64_t nkv = gq_nkv[_i], nk = GQ_B * nkv * GQ_T * GQ_D;
    float *q = test_random_f32(GQ_NQ, 71, -2, 2), *k = test_random_f32(nk, 72, -2, 2),
          *v = test_random_f32(nk, 73, -1, 1);
    for (int t = 0; t < GQ_NT; t++) {
        const int64_t *tl = gq_tilings[t];
        const int64_t qs[4] = {GQ_B, GQ_H, GQ_T, GQ_D}, ks[4] = {GQ_B, nkv, GQ_T, GQ_D};
        const int64_t kt[4] = {tl[0], tl[4], tl[2], tl[5]};
        nnt_tensor *tq = tensor_f32(4, qs, tl, q), *tk = tensor_f32(4, ks, kt, k),
                   *tv = tensor_f32(4, ks, kt, v), *to = tensor_f32(4, qs, tl, NULL),
                   *to2 = tensor_f32(4, qs, tl, NULL), *tl_ = tensor_f32(3, qs, tl, NULL);
        EXPECT_OK(nnt_tensor_attention(tq, tk, tv, 0.4, to, tl_));
        EXPECT_OK(nnt_tensor_attention_kv(tq, tk, tv, 0, 0.4, to2));
        float *a = to_host(to), *b = to_host(to2);
        expect_same_bits("attention_kv o vs attention o, tiling", t, a, b, GQ_NQ);
        free(a), free(b);
        nnt_tensor *all[6] = {tq, tk, tv, to, to2, tl_};
        destroy_all(6, all);
    }
    free(q), free(k), free(v);
}
END_TEST

START_TEST(attention_kv_rejects_bad_arguments)
{
    const char *fn = "nnt_tensor_attention_kv";
    const int64_t qs[4] = {2, 6, 2, 4}, qt[4] = {1, 3, 1, 4};
    const int64_t ks[4] = {2, 2, 8, 4}, kt[4] = {1, 1, 3, 4};
    nnt_tensor *q = tensor_f32(4, qs, qt, NULL), *k = tensor_f32(4, ks, kt, NULL),
               *v = tensor_f32(4, ks, kt, NULL), *o = tensor_f32(4, qs, qt, NULL);
    nnt_tensor *bad[] = {
        tensor_f32(4, (int64_t[]){2, 4, 8, 4}, kt, NULL),   /* 0: 4 kv heads: 6 % 4 != 0  */
        tensor_f32(4, (int64_t[]){2, 2, 8, 3}, kt, NULL),   /* 1: hd 3, not 4             */
        tensor_f32(4, ks, (int64_t[]){2, 1, 3, 4}, NULL),   /* 2: B tiled apart from q    */
        tensor_f32(4, (int64_t[]){1, 2, 8, 4}, kt, NULL),   /* 3: B 1, not 2              */
        tensor_f32(3, ks, kt, NULL),                        /* 4: 3 dimensions            */
    };
    const int nbad = (int)(sizeof bad / sizeof *bad);
    EXPECT_OK(nnt_tensor_fill(q, 0.5));
    EXPECT_OK(nnt_tensor_fill(k, 0.25));
    EXPECT_OK(nnt_tensor_fill(v, 1));
    for (int i = 0; i < nbad; i++)
        EXPECT_OK(nnt_tensor_fill(bad[i], 1));
    EXPECT_OK(nnt_tensor_attention_kv(q, k, v, 6, 0.5, o));   /* past + Tq = Tk */
    for (int i = 0; i < nbad; i++) {
        EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, bad[i], bad[i], 0, 0.5, o), NNT_E_SHAPE, fn);
        EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, k, bad[i], 0, 0.5, o), NNT_E_SHAPE, fn);
    }
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, k, v, 7, 0.5, o), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, k, v, -1, 0.5, o), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, k, v, 0, NAN, o), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, k, v, 0, 0.5, q), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, k, v, 0, 0.5, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, k, v, 0, 0.5, k), NNT_E_INVAL, fn);
    nnt_tensor *o2 = tensor_f32(4, qs, (int64_t[]){1, 2, 1, 4}, NULL);   /* o tiled apart */
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, k, v, 0, 0.5, o2), NNT_E_SHAPE, fn);
    nnt_tensor *unwritten = tensor_f32(4, ks, kt, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_attention_kv(q, unwritten, v, 0, 0.5, o), NNT_E_STATE, fn);
    nnt_tensor *all[6] = {q, k, v, o, o2, unwritten};
    destroy_all(6, all);
    destroy_all(nbad, bad);
}
END_TEST

static Suite *ops_llama_suite(void)
{
    Suite *s = suite_create("ops_llama");
    TCase *ref = tcase_create("references");
    tcase_add_test(ref, references_match_finite_differences);
    tcase_add_test(ref, gqa_reference_matches_finite_differences);
    suite_add_tcase(s, ref);
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rmsnorm_matches_reference_for_every_tiling);
    tcase_add_test(tc, rmsnorm_is_deterministic);
    tcase_add_test(tc, rmsnorm_rejects_bad_arguments);
    tcase_add_loop_test(tc, swiglu_matches_reference_for_every_tiling, 0, 4);
    tcase_add_test(tc, swiglu_rejects_bad_arguments);
    tcase_add_loop_test(tc, rope_matches_reference_for_every_tiling, 0, 2);
    tcase_add_test(tc, rope_in_place_equals_out_of_place);
    tcase_add_test(tc, rope_backward_inverts_rope);
    tcase_add_test(tc, rope_pos_offset_matches_longer_sequence);
    tcase_add_test(tc, rope_tables_match_hand_checked_values);
    tcase_add_test(tc, rope_partial_longrope_matches_reference);
    tcase_add_test(tc, rope_rejects_bad_arguments);
    tcase_add_loop_test(tc, gqa_matches_reference_for_every_tiling, 0, 4);
    tcase_add_test(tc, gqa_is_deterministic);
    tcase_add_test(tc, gqa_rejects_bad_arguments);
    tcase_add_loop_test(tc, attention_kv_matches_reference_rows, 0, 4);
    tcase_add_loop_test(tc, attention_kv_without_past_is_attention, 0, 4);
    tcase_add_test(tc, attention_kv_rejects_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(ops_llama_suite());
}
