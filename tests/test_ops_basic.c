/* SPDX-License-Identifier: MIT */
/* Basic tensor operations: scale, axpby, GELU (tanh and exact forms) and its backward,
 * broadcast add and sums over leading dimensions, sum of squares, Adam/AdamW and SGD steps.
 * Each is compared with a float64 reference computed here, for several tilings (single tile,
 * partial edge tiles, tiles of one element along a dimension), and the tilings are compared
 * with each other:
 * bit for bit where the tiling cannot change the arithmetic (elementwise ops, optimizer
 * steps), to rounding where it changes a summation order.
 * Tolerances: about 10x the largest error measured (Zen 3; these ops do not use BLIS, and
 * the zen3, haswell and generic kernel sets give the same errors), noted beside each, in
 * the units of the check (expect_close: |error| / (|want| + abs / rel) against rel). The
 * Adam gradients include elements near 1e-4 and 1e-8, where eps matters. */
#include "testutil.h"

#include <math.h>
#include <stdint.h>

/* The larger of two errors; a NaN, once seen, stays (so that the check fails). */
static double worse(double worst, double e)
{
    return worst != worst || e <= worst ? worst : e;
}

static nnt_ctx *ctx;

static void setup(void) { ctx = test_ctx(); }
static void teardown(void) { EXPECT_OK(nnt_ctx_destroy(ctx)); }

#define GELU_K0 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_K1 0.044715

/* Normwise: |error| / (sum of the magnitudes added); measured 1.2e-7. */
#define SUM_LEADING_TOL 1e-6
/* Relative, of the sum of squares (each tile in double, their sums added in float):
 * against the reference (3 tensors, 1245 elements) measured 3.9e-9, tilings against the
 * first 6.0e-9, one tensor of 101 elements 3.6e-8. */
#define SUMSQ_TOL 4e-8
#define SUMSQ_TILING_TOL 6e-8
#define SUMSQ_ONE_TOL 4e-7

static int64_t numel(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= s[d];
    return n;
}

/* n floats uniform in [lo, hi), none of them zero. */
static float *random_data(int64_t n, unsigned long long seed, double lo, double hi)
{
    float *v = malloc((size_t)n * sizeof *v);
    seed = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int64_t i = 0; i < n; i++) {
        do
            v[i] = (float)(lo + (hi - lo) * test_rand(&seed));
        while (v[i] == 0.0f);
    }
    return v;
}

/* A tensor with the given tiling holding data (NULL: never written). */
static nnt_tensor *make(int nd, const int64_t *shape, const int64_t *tile, const float *data)
{
    nnt_tensor *t;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, nd, shape, tile, &t));
    if (data)
        EXPECT_OK(nnt_tensor_copy_from_host(t, data, (size_t)numel(nd, shape) * sizeof *data));
    return t;
}

static float *download(nnt_tensor *t)
{
    int64_t n;
    EXPECT_OK(nnt_tensor_numel(t, &n));
    float *v = malloc((size_t)n * sizeof *v);
    EXPECT_OK(nnt_tensor_copy_to_host(t, v, (size_t)n * sizeof *v));
    return v;
}

/* |got - want| <= rel |want| + abs_tol, elementwise, with the first failure reported. The
 * check's error, reported through test_tol_note under the caller's line, is the largest
 * |got - want| / (|want| + abs_tol / rel) against rel (with rel == 0: |got - want| against
 * abs_tol), so that the report's ratio is that of the element closest to its limit. */
#define expect_close(...) expect_close_at(__LINE__, __VA_ARGS__)
static void expect_close_at(int line, const char *what, int64_t n, const float *got,
                            const double *want, double rel, double abs_tol)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        double e = rel > 0 ? err / (fabs(want[i]) + abs_tol / rel) : err;
        worst = worse(worst, e);
    }
    test_tol_note(__FILE__, line, worst, rel > 0 ? rel : abs_tol);
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        ck_assert_msg(err <= rel * fabs(want[i]) + abs_tol,
                      "%s (line %d): element %lld is %.9g, reference %.9g (error %.3g)", what,
                      line, (long long)i, (double)got[i], want[i], err);
    }
}

static void expect_same_bits(const char *what, int64_t n, const float *a, const float *b)
{
    ck_assert_msg(memcmp(a, b, (size_t)n * sizeof *a) == 0,
                  "%s: differs from the first tiling", what);
}

/* ---- elementwise ------------------------------------------------------------------------ */

/* (5, 11, 13): one tile, partial edge tiles, tiles of one element along the last dim. */
static const int64_t ew_shape[3] = {5, 11, 13};
static const int64_t ew_tilings[][3] = {{5, 11, 13}, {2, 4, 5}, {5, 3, 1}, {1, 11, 13}};
#define EW_NTILINGS ((int)(sizeof ew_tilings / sizeof *ew_tilings))

START_TEST(scale_matches_reference)
{
    int64_t n = numel(3, ew_shape);
    float *x = random_data(n, 1, -3, 3), *first = NULL;
    double alpha = -1.37, *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = alpha * x[i];
    for (int k = 0; k < EW_NTILINGS; k++) {
        nnt_tensor *t = make(3, ew_shape, ew_tilings[k], x);
        EXPECT_OK(nnt_tensor_scale(t, alpha));
        float *got = download(t);
        /* one rounding: measured 6.0e-8 (2^-24) */
        expect_close("scale", n, got, want, 6e-7, 0);
        if (first)
            expect_same_bits("scale", n, first, got), free(got);
        else
            first = got;
        EXPECT_OK(nnt_tensor_destroy(t));
    }
    free(first);
    free(x);
    free(want);
}
END_TEST

/* _i: beta = 0 (y never written), 1, -0.6 */
START_TEST(axpby_matches_reference)
{
    static const double betas[] = {0.0, 1.0, -0.6};
    double alpha = 0.75, beta = betas[_i];
    int64_t n = numel(3, ew_shape);
    float *x = random_data(n, 2, -2, 2), *y = random_data(n, 3, -2, 2), *first = NULL;
    double *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = alpha * x[i] + beta * y[i];
    for (int k = 0; k < EW_NTILINGS; k++) {
        nnt_tensor *tx = make(3, ew_shape, ew_tilings[k], x);
        nnt_tensor *ty = make(3, ew_shape, ew_tilings[k], beta == 0.0 ? NULL : y);
        EXPECT_OK(nnt_tensor_axpby(alpha, tx, beta, ty));
        float *got = download(ty);
        /* |alpha x|, |beta y| < 2: the abs part covers cancellation; measured 1.3e-7 */
        expect_close("axpby", n, got, want, 1e-6, 1e-6);
        if (first)
            expect_same_bits("axpby", n, first, got), free(got);
        else
            first = got;
        EXPECT_OK(nnt_tensor_destroy(tx));
        EXPECT_OK(nnt_tensor_destroy(ty));
    }
    free(first);
    free(x);
    free(y);
    free(want);
}
END_TEST

START_TEST(axpby_in_place)
{
    int64_t n = numel(3, ew_shape);
    float *x = random_data(n, 4, -2, 2);
    double *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = 0.5 * x[i] - 2.0 * x[i];
    nnt_tensor *t = make(3, ew_shape, ew_tilings[1], x);
    EXPECT_OK(nnt_tensor_axpby(0.5, t, -2.0, t));
    float *got = download(t);
    expect_close("axpby x == y", n, got, want, 6e-7, 0);   /* measured 6.0e-8 */
    EXPECT_OK(nnt_tensor_destroy(t));
    free(got);
    free(x);
    free(want);
}
END_TEST

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(GELU_K0 * (x + GELU_K1 * x * x * x)));
}

static double gelu_grad_ref(double x)
{
    double t = tanh(GELU_K0 * (x + GELU_K1 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K0 * (1.0 + 3.0 * GELU_K1 * x * x);
}

/* The exact GELU x Phi(x), Phi(x) = 0.5 erfc(-x / sqrt 2), and its derivative
 * Phi(x) + x phi(x). */
static double gelu_erf_ref(double x)
{
    return 0.5 * x * erfc(-x * 0.70710678118654752440);
}

static double gelu_erf_grad_ref(double x)
{
    return 0.5 * erfc(-x * 0.70710678118654752440) +
           x * exp(-0.5 * x * x) * 0.39894228040143267794;
}

/* The two forms of GELU: the operations, their float64 references, the range of x, and the
 * tolerances of expect_close (rel, abs) forward and backward. */
static const struct gelu_form {
    const char *name, *bwd_name;
    int (*fwd)(nnt_tensor *x, nnt_tensor *y);
    int (*bwd)(nnt_tensor *x, nnt_tensor *dy, nnt_tensor *dx);
    double (*ref)(double x), (*grad)(double x);
    double lo, hi, fwd_rel, fwd_abs, bwd_rel, bwd_abs;
} gelu_forms[] = {
    /* measured 4.1e-7; backward 1.8e-6 (gelu' cancels near its zero, x ~ -0.75) */
    {"gelu", "gelu_backward", nnt_tensor_gelu, nnt_tensor_gelu_backward, gelu_ref,
     gelu_grad_ref, -6, 6, 4e-6, 4e-8, 1e-5, 1e-6},
    /* relative down to the tail (|gelu| >= 7.6e-23 over [-10, 10]): measured 3.3e-7;
     * backward 3.6e-7 (its zero as gelu's, x ~ -0.75) */
    {"gelu_erf", "gelu_erf_backward", nnt_tensor_gelu_erf, nnt_tensor_gelu_erf_backward,
     gelu_erf_ref, gelu_erf_grad_ref, -10, 10, 3.3e-6, 1e-30, 3.6e-6, 3.6e-7},
};
#define NGELU ((int)(sizeof gelu_forms / sizeof *gelu_forms))

/* _i: form _i / 2 (0 tanh, 1 exact); _i % 2: 0 separate output, 1 in place (y == x) */
START_TEST(gelu_matches_reference)
{
    const struct gelu_form *f = &gelu_forms[_i / 2];
    int in_place = _i % 2;
    int64_t n = numel(3, ew_shape);
    float *x = random_data(n, 5, f->lo, f->hi), *first = NULL;
    double *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = f->ref(x[i]);
    for (int k = 0; k < EW_NTILINGS; k++) {
        nnt_tensor *tx = make(3, ew_shape, ew_tilings[k], x);
        nnt_tensor *ty = in_place ? tx : make(3, ew_shape, ew_tilings[k], NULL);
        EXPECT_OK(f->fwd(tx, ty));
        float *got = download(ty);
        expect_close(f->name, n, got, want, f->fwd_rel, f->fwd_abs);
        if (first)
            expect_same_bits(f->name, n, first, got), free(got);
        else
            first = got;
        if (!in_place) {
            float *x_after = download(tx);
            expect_same_bits(f->name, n, x, x_after);
            free(x_after);
            EXPECT_OK(nnt_tensor_destroy(ty));
        }
        EXPECT_OK(nnt_tensor_destroy(tx));
    }
    free(first);
    free(x);
    free(want);
}
END_TEST

/* _i: form _i / 3 (as above); _i % 3: 0 separate dx, 1 dx == dy, 2 dx == x */
START_TEST(gelu_backward_matches_reference)
{
    const struct gelu_form *f = &gelu_forms[_i / 3];
    int alias = _i % 3;
    int64_t n = numel(3, ew_shape);
    float *x = random_data(n, 6, f->lo, f->hi), *dy = random_data(n, 7, -2, 2), *first = NULL;
    double *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = dy[i] * f->grad(x[i]);
    for (int k = 0; k < EW_NTILINGS; k++) {
        nnt_tensor *tx = make(3, ew_shape, ew_tilings[k], x);
        nnt_tensor *tdy = make(3, ew_shape, ew_tilings[k], dy);
        nnt_tensor *tdx = alias == 1 ? tdy : alias == 2 ? tx
                                                        : make(3, ew_shape, ew_tilings[k], NULL);
        EXPECT_OK(f->bwd(tx, tdy, tdx));
        float *got = download(tdx);
        expect_close(f->bwd_name, n, got, want, f->bwd_rel, f->bwd_abs);
        if (first)
            expect_same_bits(f->bwd_name, n, first, got), free(got);
        else
            first = got;
        if (alias == 0)
            EXPECT_OK(nnt_tensor_destroy(tdx));
        EXPECT_OK(nnt_tensor_destroy(tx));
        EXPECT_OK(nnt_tensor_destroy(tdy));
    }
    free(first);
    free(x);
    free(dy);
    free(want);
}
END_TEST

/* ---- broadcast add and sums over leading dims --------------------------------------------- */

struct bcast_case {
    int ndim_y, ndim_x;
    int64_t shape[4];                 /* y's shape; x's is its trailing ndim_x dims */
    int64_t tilings[4][4];            /* y's tilings; x's are their trailing dims   */
};

static const struct bcast_case bcast_cases[] = {
    {3, 2, {6, 9, 13}, {{6, 9, 13}, {4, 4, 5}, {1, 9, 1}, {6, 2, 13}}},
    {4, 1, {3, 2, 5, 17}, {{3, 2, 5, 17}, {2, 1, 3, 6}, {1, 2, 5, 17}, {3, 2, 2, 1}}},
    {2, 2, {7, 10}, {{7, 10}, {3, 4}, {1, 10}, {7, 1}}},   /* no leading dims */
};
#define NBCAST ((int)(sizeof bcast_cases / sizeof *bcast_cases))

START_TEST(add_broadcast_matches_reference)
{
    const struct bcast_case *c = &bcast_cases[_i];
    int lead = c->ndim_y - c->ndim_x;
    int64_t ny = numel(c->ndim_y, c->shape), nx = numel(c->ndim_x, c->shape + lead);
    float *x = random_data(nx, 10 + _i, -1, 1), *y = random_data(ny, 20 + _i, -1, 1), *first = NULL;
    double *want = malloc((size_t)ny * sizeof *want);
    for (int64_t i = 0; i < ny; i++)
        want[i] = (double)y[i] + x[i % nx];
    for (int k = 0; k < 4; k++) {
        const int64_t *tile = c->tilings[k];
        nnt_tensor *tx = make(c->ndim_x, c->shape + lead, tile + lead, x);
        nnt_tensor *ty = make(c->ndim_y, c->shape, tile, y);
        EXPECT_OK(nnt_tensor_add_broadcast(tx, ty));
        float *got = download(ty);
        /* one rounding: measured 6.0e-8 (2^-24) */
        expect_close("add_broadcast", ny, got, want, 6e-7, 1e-12);
        if (first)
            expect_same_bits("add_broadcast", ny, first, got), free(got);
        else
            first = got;
        EXPECT_OK(nnt_tensor_destroy(tx));
        EXPECT_OK(nnt_tensor_destroy(ty));
    }
    free(first);
    free(x);
    free(y);
    free(want);
}
END_TEST

/* y = alpha sum_lead x + beta y for (alpha, beta) in {1, 0}, {1, 1}, {0.5, -2}, {-3, 0},
 * each case of shapes; the tilings agree to rounding, and a repeat run is bit-identical. */
START_TEST(sum_leading_matches_reference)
{
    static const double ab[4][2] = {{1, 0}, {1, 1}, {0.5, -2}, {-3, 0}};
    const struct bcast_case *c = &bcast_cases[_i / 4];
    double alpha = ab[_i % 4][0], beta = ab[_i % 4][1];
    int lead = c->ndim_y - c->ndim_x;
    int64_t nx = numel(c->ndim_y, c->shape), ny = numel(c->ndim_x, c->shape + lead);
    float *x = random_data(nx, 30 + _i, -1, 1), *y = random_data(ny, 40 + _i, -1, 1);
    double *want = calloc((size_t)ny, sizeof *want), *scale = calloc((size_t)ny, sizeof *scale);
    for (int64_t i = 0; i < nx; i++) {
        want[i % ny] += alpha * x[i];
        scale[i % ny] += fabs(alpha * x[i]);
    }
    for (int64_t j = 0; j < ny; j++) {
        want[j] += beta * y[j];
        scale[j] += fabs(beta * y[j]);
    }
    for (int k = 0; k < 4; k++) {
        const int64_t *tile = c->tilings[k];
        float *got[2];
        for (int run = 0; run < 2; run++) {
            nnt_tensor *tx = make(c->ndim_y, c->shape, tile, x);
            nnt_tensor *ty = make(c->ndim_x, c->shape + lead, tile + lead, beta == 0 ? NULL : y);
            EXPECT_OK(nnt_tensor_sum_leading(alpha, tx, beta, ty));
            got[run] = download(ty);
            EXPECT_OK(nnt_tensor_destroy(tx));
            EXPECT_OK(nnt_tensor_destroy(ty));
        }
        double worst = 0.0;   /* error relative to the sum of the magnitudes added */
        for (int64_t j = 0; j < ny; j++) {
            double e = fabs(got[0][j] - want[j]) / scale[j];
            worst = worse(worst, e);
        }
        EXPECT_TOL(worst, SUM_LEADING_TOL, "sum_leading case %d, tiling %d", _i, k);
        expect_same_bits("sum_leading repeated", ny, got[0], got[1]);
        free(got[0]);
        free(got[1]);
    }
    free(x);
    free(y);
    free(want);
    free(scale);
}
END_TEST

/* Bias gradients accumulate over uses: sum_leading(1, dy, 1, db) twice adds twice. */
START_TEST(sum_leading_accumulates)
{
    int64_t xs[3] = {4, 6, 8}, xt[3] = {3, 4, 3};
    int64_t n = numel(3, xs);
    float *x = random_data(n, 50, -1, 1), *got;
    double want[8] = {0};
    for (int64_t i = 0; i < n; i++)
        want[i % 8] += 2.0 * x[i];
    nnt_tensor *tx = make(3, xs, xt, x), *ty = make(1, xs + 2, xt + 2, NULL);
    EXPECT_OK(nnt_tensor_fill(ty, 0.0));
    EXPECT_OK(nnt_tensor_sum_leading(1.0, tx, 1.0, ty));
    EXPECT_OK(nnt_tensor_sum_leading(1.0, tx, 1.0, ty));
    got = download(ty);
    expect_close("sum_leading twice", 8, got, want, 1e-6, 1e-7);   /* measured 1.1e-7 */
    EXPECT_OK(nnt_tensor_destroy(tx));
    EXPECT_OK(nnt_tensor_destroy(ty));
    free(got);
    free(x);
}
END_TEST

/* ---- sum of squares --------------------------------------------------------------------- */

START_TEST(sumsq_matches_reference)
{
    int64_t s0[2] = {37, 29}, s1[1] = {101}, s2[3] = {3, 7, 5};
    const int64_t *shapes[3] = {s0, s1, s2};
    int nds[3] = {2, 1, 3};
    int64_t tilings[3][3][3] = {
        {{37, 29}, {8, 7}, {1, 29}},
        {{101}, {10}, {1}},
        {{3, 7, 5}, {2, 3, 2}, {3, 1, 5}},
    };
    float *data[3];
    double want = 0.0, first = 0.0;
    for (int t = 0; t < 3; t++) {
        int64_t n = numel(nds[t], shapes[t]);
        data[t] = random_data(n, 60 + t, -3, 3);
        for (int64_t i = 0; i < n; i++)
            want += (double)data[t][i] * data[t][i];
    }
    for (int k = 0; k < 3; k++) {
        nnt_tensor *ts[3];
        for (int t = 0; t < 3; t++)
            ts[t] = make(nds[t], shapes[t], tilings[t][k], data[t]);
        double got = -1.0, again = -2.0, one = -1.0;
        EXPECT_OK(nnt_tensors_sumsq(3, ts, &got));
        EXPECT_OK(nnt_tensors_sumsq(3, ts, &again));
        EXPECT_TOL(fabs(got - want) / want, SUMSQ_TOL, "sumsq tiling %d: %.12g vs %.12g", k,
                   got, want);
        ck_assert_msg(got == again, "tiling %d: repeated call gives %.17g then %.17g", k, got,
                      again);
        if (k == 0)
            first = got;
        EXPECT_TOL(fabs(got - first) / want, SUMSQ_TILING_TOL, "sumsq tiling %d vs tiling 0", k);
        EXPECT_OK(nnt_tensors_sumsq(1, ts + 1, &one));
        double want1 = 0.0;
        for (int64_t i = 0; i < 101; i++)
            want1 += (double)data[1][i] * data[1][i];
        EXPECT_TOL(fabs(one - want1) / want1, SUMSQ_ONE_TOL, "sumsq of one tensor: %.12g vs %.12g",
                   one, want1);
        for (int t = 0; t < 3; t++)
            EXPECT_OK(nnt_tensor_destroy(ts[t]));
    }
    double zero = -1.0;
    EXPECT_OK(nnt_tensors_sumsq(0, NULL, &zero));
    ck_assert_double_eq(zero, 0.0);
    for (int t = 0; t < 3; t++)
        free(data[t]);
}
END_TEST

/* ---- optimizers ------------------------------------------------------------------------- */

static const int64_t opt_shape[2] = {37, 29};
static const int64_t opt_tilings[][2] = {{37, 29}, {8, 8}, {1, 29}, {37, 5}};
#define OPT_NTILINGS ((int)(sizeof opt_tilings / sizeof *opt_tilings))
#define OPT_STEPS 5

/* PyTorch's Adam / AdamW on one element, float64. */
static void adam_ref(const nnt_adam_options *o, int64_t step, double g, double *p, double *m,
                     double *v)
{
    g *= o->grad_scale;
    if (o->decoupled)
        *p *= 1.0 - o->lr * o->weight_decay;
    else
        g += o->weight_decay * *p;
    *m = o->beta1 * *m + (1.0 - o->beta1) * g;
    *v = o->beta2 * *v + (1.0 - o->beta2) * g * g;
    double bc1 = 1.0 - pow(o->beta1, (double)step), bc2 = 1.0 - pow(o->beta2, (double)step);
    double denom = sqrt(*v) / sqrt(bc2) + o->eps;
    *p -= o->lr / bc1 * *m / denom;
}

/* _i: 0 AdamW, 1 Adam with L2 weight decay */
START_TEST(adam_matches_reference)
{
    nnt_adam_options o = NNT_ADAM_OPTIONS_INIT;
    o.lr = 0.01;
    o.beta1 = 0.8;
    o.beta2 = 0.95;
    o.weight_decay = 0.1;
    o.decoupled = _i == 0;
    o.grad_scale = 0.5;
    int64_t n = numel(2, opt_shape);
    float *p0 = random_data(n, 70, -1, 1), *grads[OPT_STEPS];
    double *p = malloc((size_t)n * sizeof *p), *m = calloc((size_t)n, sizeof *m);
    double *v = calloc((size_t)n, sizeof *v);
    for (int s = 0; s < OPT_STEPS; s++) {
        grads[s] = random_data(n, 80 + s, -2, 2);
        /* a quarter of the elements with gradients around 1e-4, where sqrt(v) + eps and
         * sqrt(v + eps) differ by half, a quarter around 1e-8, where eps dominates */
        for (int64_t i = 0; i < n; i++)
            grads[s][i] *= i % 4 == 1 ? 1e-4f : i % 4 == 2 ? 1e-8f : 1.0f;
    }
    for (int64_t i = 0; i < n; i++) {
        p[i] = p0[i];
        for (int s = 0; s < OPT_STEPS; s++)
            adam_ref(&o, s + 1, grads[s][i], &p[i], &m[i], &v[i]);
    }
    float *first[3] = {NULL, NULL, NULL};
    for (int k = 0; k < OPT_NTILINGS; k++) {
        const int64_t *tile = opt_tilings[k];
        nnt_tensor *tp = make(2, opt_shape, tile, p0), *tg = make(2, opt_shape, tile, NULL);
        nnt_tensor *tm = make(2, opt_shape, tile, NULL), *tv = make(2, opt_shape, tile, NULL);
        EXPECT_OK(nnt_tensor_fill(tm, 0.0));
        EXPECT_OK(nnt_tensor_fill(tv, 0.0));
        for (int s = 0; s < OPT_STEPS; s++) {
            EXPECT_OK(nnt_tensor_copy_from_host(tg, grads[s], (size_t)n * sizeof(float)));
            EXPECT_OK(nnt_tensor_adam_step(&o, s + 1, tp, tg, tm, tv));
        }
        float *got[3] = {download(tp), download(tm), download(tv)};
        /* measured 2.0e-7, 5.2e-7 (m cancels over the steps) and 3.8e-7 */
        expect_close("adam p", n, got[0], p, 0, 2e-6);
        expect_close("adam m", n, got[1], m, 5e-6, 2.5e-7);
        expect_close("adam v", n, got[2], v, 4e-6, 2e-8);
        for (int j = 0; j < 3; j++) {
            if (first[j])
                expect_same_bits("adam", n, first[j], got[j]), free(got[j]);
            else
                first[j] = got[j];
        }
        EXPECT_OK(nnt_tensor_destroy(tp));
        EXPECT_OK(nnt_tensor_destroy(tg));
        EXPECT_OK(nnt_tensor_destroy(tm));
        EXPECT_OK(nnt_tensor_destroy(tv));
    }
    for (int j = 0; j < 3; j++)
        free(first[j]);
    for (int s = 0; s < OPT_STEPS; s++)
        free(grads[s]);
    free(p0);
    free(p);
    free(m);
    free(v);
}
END_TEST

/* NULL options are the defaults (lr 1e-3, betas 0.9, 0.999, eps 1e-8, AdamW, no decay). */
START_TEST(adam_null_options_are_defaults)
{
    nnt_adam_options o = NNT_ADAM_OPTIONS_INIT;
    int64_t n = numel(2, opt_shape);
    float *p0 = random_data(n, 90, -1, 1), *g = random_data(n, 91, -1, 1);
    float *got[2];
    for (int use_null = 0; use_null < 2; use_null++) {
        nnt_tensor *tp = make(2, opt_shape, opt_tilings[1], p0);
        nnt_tensor *tg = make(2, opt_shape, opt_tilings[1], g);
        nnt_tensor *tm = make(2, opt_shape, opt_tilings[1], NULL);
        nnt_tensor *tv = make(2, opt_shape, opt_tilings[1], NULL);
        EXPECT_OK(nnt_tensor_fill(tm, 0.0));
        EXPECT_OK(nnt_tensor_fill(tv, 0.0));
        EXPECT_OK(nnt_tensor_adam_step(use_null ? NULL : &o, 1, tp, tg, tm, tv));
        got[use_null] = download(tp);
        EXPECT_OK(nnt_tensor_destroy(tp));
        EXPECT_OK(nnt_tensor_destroy(tg));
        EXPECT_OK(nnt_tensor_destroy(tm));
        EXPECT_OK(nnt_tensor_destroy(tv));
    }
    expect_same_bits("adam NULL options", n, got[0], got[1]);
    free(got[0]);
    free(got[1]);
    free(p0);
    free(g);
}
END_TEST

/* PyTorch's SGD (dampening 0, no Nesterov) on one element, float64. */
static void sgd_ref(double lr, double momentum, double wd, double gs, int64_t step, double g,
                    double *p, double *buf)
{
    g = gs * g + wd * *p;
    if (momentum != 0.0) {
        *buf = step == 1 ? g : momentum * *buf + g;
        g = *buf;
    }
    *p -= lr * g;
}

/* _i: 0 momentum 0.9 (buf never written before step 1), 1 momentum 0 with buf NULL */
START_TEST(sgd_matches_reference)
{
    double lr = 0.05, momentum = _i == 0 ? 0.9 : 0.0, wd = 0.01, gs = 0.8;
    int64_t n = numel(2, opt_shape);
    float *p0 = random_data(n, 100, -1, 1), *grads[OPT_STEPS];
    double *p = malloc((size_t)n * sizeof *p), *buf = calloc((size_t)n, sizeof *buf);
    for (int s = 0; s < OPT_STEPS; s++)
        grads[s] = random_data(n, 110 + s, -2, 2);
    for (int64_t i = 0; i < n; i++) {
        p[i] = p0[i];
        for (int s = 0; s < OPT_STEPS; s++)
            sgd_ref(lr, momentum, wd, gs, s + 1, grads[s][i], &p[i], &buf[i]);
    }
    float *first[2] = {NULL, NULL};
    for (int k = 0; k < OPT_NTILINGS; k++) {
        const int64_t *tile = opt_tilings[k];
        nnt_tensor *tp = make(2, opt_shape, tile, p0), *tg = make(2, opt_shape, tile, NULL);
        nnt_tensor *tb = momentum != 0.0 ? make(2, opt_shape, tile, NULL) : NULL;
        for (int s = 0; s < OPT_STEPS; s++) {
            EXPECT_OK(nnt_tensor_copy_from_host(tg, grads[s], (size_t)n * sizeof(float)));
            EXPECT_OK(nnt_tensor_sgd_step(lr, momentum, wd, gs, s + 1, tp, tg, tb));
        }
        float *got[2] = {download(tp), tb ? download(tb) : NULL};
        expect_close("sgd p", n, got[0], p, 0, 2e-6);   /* measured 1.8e-7 */
        if (tb)
            expect_close("sgd buf", n, got[1], buf, 5e-6, 2.5e-6);   /* measured 5.1e-7 */
        for (int j = 0; j < 2 && got[j]; j++) {
            if (first[j])
                expect_same_bits("sgd", n, first[j], got[j]), free(got[j]);
            else
                first[j] = got[j];
        }
        EXPECT_OK(nnt_tensor_destroy(tp));
        EXPECT_OK(nnt_tensor_destroy(tg));
        EXPECT_OK(nnt_tensor_destroy(tb));
    }
    free(first[0]);
    free(first[1]);
    for (int s = 0; s < OPT_STEPS; s++)
        free(grads[s]);
    free(p0);
    free(p);
    free(buf);
}
END_TEST

/* ---- bad arguments ------------------------------------------------------------------------ */

START_TEST(elementwise_bad_arguments)
{
    int64_t s[2] = {6, 8}, t1[2] = {3, 4}, t2[2] = {2, 4}, s3[2] = {6, 9};
    nnt_tensor *a = make(2, s, t1, NULL), *b = make(2, s, t1, NULL);
    nnt_tensor *other_tiles = make(2, s, t2, NULL), *other_shape = make(2, s3, t1, NULL);
    nnt_tensor *ints;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, s, t1, &ints));
    EXPECT_FAIL_MSG(nnt_tensor_scale(a, 2.0), NNT_E_STATE, "nnt_tensor_scale");   /* unwritten */
    EXPECT_OK(nnt_tensor_fill(a, 1.0));
    EXPECT_OK(nnt_tensor_fill(ints, 1.0));
    EXPECT_OK(nnt_tensor_fill(other_tiles, 1.0));
    EXPECT_OK(nnt_tensor_fill(other_shape, 1.0));
    EXPECT_FAIL_MSG(nnt_tensor_scale(NULL, 2.0), NNT_E_INVAL, "nnt_tensor_scale");
    EXPECT_FAIL_MSG(nnt_tensor_scale(ints, 2.0), NNT_E_SHAPE, "nnt_tensor_scale");
    EXPECT_FAIL_MSG(nnt_tensor_axpby(1, NULL, 0, b), NNT_E_INVAL, "nnt_tensor_axpby");
    EXPECT_FAIL_MSG(nnt_tensor_axpby(1, a, 0, NULL), NNT_E_INVAL, "nnt_tensor_axpby");
    EXPECT_FAIL_MSG(nnt_tensor_axpby(1, a, 1, b), NNT_E_STATE, "nnt_tensor_axpby");
    EXPECT_FAIL_MSG(nnt_tensor_axpby(1, a, 0, other_tiles), NNT_E_SHAPE, "nnt_tensor_axpby");
    EXPECT_FAIL_MSG(nnt_tensor_axpby(1, a, 0, other_shape), NNT_E_SHAPE, "nnt_tensor_axpby");
    EXPECT_FAIL_MSG(nnt_tensor_axpby(1, ints, 0, b), NNT_E_SHAPE, "nnt_tensor_axpby");
    EXPECT_FAIL_MSG(nnt_tensor_gelu(b, a), NNT_E_STATE, "nnt_tensor_gelu");
    EXPECT_FAIL_MSG(nnt_tensor_gelu(a, other_tiles), NNT_E_SHAPE, "nnt_tensor_gelu");
    EXPECT_FAIL_MSG(nnt_tensor_gelu(a, ints), NNT_E_SHAPE, "nnt_tensor_gelu");
    EXPECT_FAIL_MSG(nnt_tensor_gelu(a, NULL), NNT_E_INVAL, "nnt_tensor_gelu");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_backward(a, b, a), NNT_E_STATE, "nnt_tensor_gelu_backward");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_backward(a, a, other_shape), NNT_E_SHAPE,
                    "nnt_tensor_gelu_backward");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_backward(a, other_tiles, b), NNT_E_SHAPE,
                    "nnt_tensor_gelu_backward");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_backward(NULL, a, b), NNT_E_INVAL, "nnt_tensor_gelu_backward");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_erf(b, a), NNT_E_STATE, "nnt_tensor_gelu_erf");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_erf(a, other_tiles), NNT_E_SHAPE, "nnt_tensor_gelu_erf");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_erf(a, ints), NNT_E_SHAPE, "nnt_tensor_gelu_erf");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_erf(a, NULL), NNT_E_INVAL, "nnt_tensor_gelu_erf");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_erf_backward(a, b, a), NNT_E_STATE,
                    "nnt_tensor_gelu_erf_backward");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_erf_backward(a, a, other_shape), NNT_E_SHAPE,
                    "nnt_tensor_gelu_erf_backward");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_erf_backward(a, other_tiles, b), NNT_E_SHAPE,
                    "nnt_tensor_gelu_erf_backward");
    EXPECT_FAIL_MSG(nnt_tensor_gelu_erf_backward(NULL, a, b), NNT_E_INVAL,
                    "nnt_tensor_gelu_erf_backward");
    EXPECT_OK(nnt_tensor_axpby(1, a, 0, b));   /* beta == 0: b need not be written */
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_tensor_destroy(other_tiles));
    EXPECT_OK(nnt_tensor_destroy(other_shape));
    EXPECT_OK(nnt_tensor_destroy(ints));
}
END_TEST

START_TEST(reduce_bad_arguments)
{
    int64_t ys[3] = {4, 6, 8}, yt[3] = {2, 3, 4}, xt_bad[2] = {6, 4}, xs_bad[2] = {6, 7};
    nnt_tensor *y = make(3, ys, yt, NULL), *x = make(2, ys + 1, yt + 1, NULL);
    nnt_tensor *x_tiles = make(2, ys + 1, xt_bad, NULL), *x_shape = make(2, xs_bad, yt + 1, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_add_broadcast(x, y), NNT_E_STATE, "nnt_tensor_add_broadcast");
    EXPECT_OK(nnt_tensor_fill(x, 1.0));
    EXPECT_FAIL_MSG(nnt_tensor_add_broadcast(x, y), NNT_E_STATE, "nnt_tensor_add_broadcast");
    EXPECT_OK(nnt_tensor_fill(y, 1.0));
    EXPECT_OK(nnt_tensor_fill(x_tiles, 1.0));
    EXPECT_OK(nnt_tensor_fill(x_shape, 1.0));
    EXPECT_FAIL_MSG(nnt_tensor_add_broadcast(NULL, y), NNT_E_INVAL, "nnt_tensor_add_broadcast");
    EXPECT_FAIL_MSG(nnt_tensor_add_broadcast(y, x), NNT_E_SHAPE, "nnt_tensor_add_broadcast");
    EXPECT_FAIL_MSG(nnt_tensor_add_broadcast(x_tiles, y), NNT_E_SHAPE, "nnt_tensor_add_broadcast");
    EXPECT_FAIL_MSG(nnt_tensor_add_broadcast(x_shape, y), NNT_E_SHAPE, "nnt_tensor_add_broadcast");
    EXPECT_FAIL_MSG(nnt_tensor_add_broadcast(y, y), NNT_E_INVAL, "nnt_tensor_add_broadcast");
    EXPECT_FAIL_MSG(nnt_tensor_sum_leading(1, y, 0, y), NNT_E_INVAL, "nnt_tensor_sum_leading");
    EXPECT_FAIL_MSG(nnt_tensor_sum_leading(1, x, 0, y), NNT_E_SHAPE, "nnt_tensor_sum_leading");
    EXPECT_FAIL_MSG(nnt_tensor_sum_leading(1, y, 0, x_tiles), NNT_E_SHAPE,
                    "nnt_tensor_sum_leading");
    EXPECT_FAIL_MSG(nnt_tensor_sum_leading(1, y, 0, NULL), NNT_E_INVAL, "nnt_tensor_sum_leading");
    nnt_tensor *fresh = make(2, ys + 1, yt + 1, NULL);
    EXPECT_FAIL_MSG(nnt_tensor_sum_leading(1, y, 1, fresh), NNT_E_STATE, "nnt_tensor_sum_leading");
    EXPECT_OK(nnt_tensor_sum_leading(1, y, 0, fresh));   /* beta == 0: only written */

    double out = 0.0;
    nnt_tensor *list[2] = {x, NULL}, *unwritten = make(1, ys, NULL, NULL), *ints;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 1, ys, NULL, &ints));
    EXPECT_OK(nnt_tensor_fill(ints, 0.0));
    EXPECT_FAIL_MSG(nnt_tensors_sumsq(1, list, NULL), NNT_E_INVAL, "nnt_tensors_sumsq");
    EXPECT_FAIL_MSG(nnt_tensors_sumsq(-1, list, &out), NNT_E_INVAL, "nnt_tensors_sumsq");
    EXPECT_FAIL_MSG(nnt_tensors_sumsq(2, NULL, &out), NNT_E_INVAL, "nnt_tensors_sumsq");
    EXPECT_FAIL_MSG(nnt_tensors_sumsq(2, list, &out), NNT_E_INVAL, "nnt_tensors_sumsq");
    list[1] = unwritten;
    EXPECT_FAIL_MSG(nnt_tensors_sumsq(2, list, &out), NNT_E_STATE, "nnt_tensors_sumsq");
    list[1] = ints;
    EXPECT_FAIL_MSG(nnt_tensors_sumsq(2, list, &out), NNT_E_SHAPE, "nnt_tensors_sumsq");
    list[1] = x;
    EXPECT_OK(nnt_tensors_sumsq(2, list, &out));
    ck_assert_double_eq(out, 96.0);   /* 2 x 48 ones */
    EXPECT_OK(nnt_tensor_destroy(y));
    EXPECT_OK(nnt_tensor_destroy(x));
    EXPECT_OK(nnt_tensor_destroy(x_tiles));
    EXPECT_OK(nnt_tensor_destroy(x_shape));
    EXPECT_OK(nnt_tensor_destroy(fresh));
    EXPECT_OK(nnt_tensor_destroy(unwritten));
    EXPECT_OK(nnt_tensor_destroy(ints));
}
END_TEST

START_TEST(optim_bad_arguments)
{
    const char *fn = "nnt_tensor_adam_step";
    int64_t s[2] = {5, 6}, t[2] = {2, 3}, t2[2] = {5, 3};
    nnt_tensor *p = make(2, s, t, NULL), *g = make(2, s, t, NULL), *m = make(2, s, t, NULL);
    nnt_tensor *v = make(2, s, t, NULL), *other = make(2, s, t2, NULL);
    nnt_tensor *fresh = make(2, s, t, NULL);
    EXPECT_OK(nnt_tensor_fill(p, 1.0));
    EXPECT_OK(nnt_tensor_fill(g, 1.0));
    EXPECT_OK(nnt_tensor_fill(m, 0.0));
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(NULL, 1, p, g, m, v), NNT_E_STATE, fn); /* v unwritten */
    EXPECT_OK(nnt_tensor_fill(v, 0.0));
    EXPECT_OK(nnt_tensor_fill(other, 0.0));
    nnt_adam_options o = NNT_ADAM_OPTIONS_INIT, bad;
    bad = o, bad.size = sizeof o - 1;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_INVAL, fn);
    bad = o, bad.size = sizeof o + 8;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_UNSUPPORTED, fn);
    bad = o, bad.lr = -1e-3;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_INVAL, fn);
    bad = o, bad.beta1 = 1.0;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_INVAL, fn);
    bad = o, bad.beta2 = -0.1;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_INVAL, fn);
    bad = o, bad.eps = 0.0;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_INVAL, fn);
    bad = o, bad.weight_decay = -0.5;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_INVAL, fn);
    bad = o, bad.grad_scale = NAN;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_INVAL, fn);
    bad = o, bad.grad_scale = INFINITY;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_INVAL, fn);
    bad = o, bad.decoupled = 2;
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&bad, 1, p, g, m, v), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&o, 0, p, g, m, v), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&o, 1, p, g, m, other), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&o, 1, p, g, m, m), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&o, 1, p, p, m, v), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_adam_step(&o, 1, p, NULL, m, v), NNT_E_INVAL, fn);
    EXPECT_OK(nnt_tensor_adam_step(&o, 1, p, g, m, v));

    fn = "nnt_tensor_sgd_step";
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(-1, 0.9, 0, 1, 1, p, g, m), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(0.1, -0.9, 0, 1, 1, p, g, m), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(0.1, 0.9, -1, 1, 1, p, g, m), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(0.1, 0.9, 0, NAN, 1, p, g, m), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(0.1, 0.9, 0, 1, 0, p, g, m), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(0.1, 0.9, 0, 1, 1, p, g, NULL), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(0.1, 0.9, 0, 1, 1, p, g, g), NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(0.1, 0.9, 0, 1, 1, p, g, other), NNT_E_SHAPE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(0.1, 0.9, 0, 1, 2, p, g, fresh), NNT_E_STATE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_sgd_step(0.1, 0.0, 0, 1, 1, p, other, NULL), NNT_E_SHAPE, fn);
    EXPECT_OK(nnt_tensor_sgd_step(0.1, 0.9, 0, 1, 1, p, g, fresh));   /* step 1: written */
    EXPECT_OK(nnt_tensor_sgd_step(0.1, 0.9, 0, 1, 2, p, g, fresh));
    EXPECT_OK(nnt_tensor_sgd_step(0.1, 0.0, 0, 1, 3, p, g, NULL));
    nnt_tensor *all[6] = {p, g, m, v, other, fresh};
    for (int i = 0; i < 6; i++)
        EXPECT_OK(nnt_tensor_destroy(all[i]));
}
END_TEST

static Suite *basic_suite(void)
{
    Suite *s = suite_create("ops_basic");
    TCase *tc = tcase_create("ops_basic");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, scale_matches_reference);
    tcase_add_loop_test(tc, axpby_matches_reference, 0, 3);
    tcase_add_test(tc, axpby_in_place);
    tcase_add_loop_test(tc, gelu_matches_reference, 0, 2 * NGELU);
    tcase_add_loop_test(tc, gelu_backward_matches_reference, 0, 3 * NGELU);
    tcase_add_loop_test(tc, add_broadcast_matches_reference, 0, NBCAST);
    tcase_add_loop_test(tc, sum_leading_matches_reference, 0, 4 * NBCAST);
    tcase_add_test(tc, sum_leading_accumulates);
    tcase_add_test(tc, sumsq_matches_reference);
    tcase_add_loop_test(tc, adam_matches_reference, 0, 2);
    tcase_add_test(tc, adam_null_options_are_defaults);
    tcase_add_loop_test(tc, sgd_matches_reference, 0, 2);
    tcase_add_test(tc, elementwise_bad_arguments);
    tcase_add_test(tc, reduce_bad_arguments);
    tcase_add_test(tc, optim_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(basic_suite());
}
