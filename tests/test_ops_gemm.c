/* SPDX-License-Identifier: MIT */
/* nnt_tensor_gemm / nnt_tensor_gemm_ex: grouped-dims tiled GEMM against a float64 host
 * reference, for the four transpose combinations, batch dims, several m / k / n dims, alpha
 * and beta (beta == 0 with C never written), every epilogue and several tilings (a single
 * tile, partial edge tiles, many k tiles) that must all agree; run-to-run bit-identity; and
 * the argument checks. */
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

/* ---- problem description -------------------------------------------------------------- */

#define MAXG 3   /* dims per group in these tests */

/* Sizes of the groups: C[b..., m..., n...] = sum_k A[b..., m..., k...] B[b..., k..., n...]. */
struct dims {
    int nb, nm, nk, nn;
    int64_t b[MAXG], m[MAXG], k[MAXG], n[MAXG];
};

/* Tiles per group dimension (0: the whole dimension). */
struct tiling {
    int64_t b[MAXG], m[MAXG], k[MAXG], n[MAXG];
};

#define NTILINGS 4
struct gcase {
    const char *what;
    struct dims d;
    struct tiling t[NTILINGS];   /* t[0] is always a single tile (all zeros) */
};

static const struct gcase cases[] = {
    {"matrix (13, 11) x (11, 9)",
     {0, 1, 1, 1, {0}, {13}, {11}, {9}},
     {{{0}, {0}, {0}, {0}},
      {{0}, {5}, {4}, {4}},      /* partial tiles in m, k and n */
      {{0}, {0}, {1}, {0}},      /* 11 k tiles */
      {{0}, {13}, {3}, {2}}}},
    {"batched (3, 7, 10) x (3, 10, 6)",
     {1, 1, 1, 1, {3}, {7}, {10}, {6}},
     {{{0}, {0}, {0}, {0}},
      {{2}, {4}, {3}, {5}},      /* partial batch, m, k and n tiles */
      {{1}, {7}, {2}, {6}},      /* 5 k tiles, one batch per tile */
      {{3}, {1}, {10}, {4}}}},
    {"linear x (2, 5, 12) W^T (7, 12) -> (2, 5, 7)",
     {0, 2, 1, 1, {0}, {2, 5}, {12}, {7}},
     {{{0}, {0}, {0}, {0}},
      {{0}, {1, 3}, {5}, {4}},
      {{0}, {2, 2}, {3}, {7}},
      {{0}, {1, 5}, {12}, {3}}}},
    {"weight gradient dY^T (2, 5, 7) X (2, 5, 12) -> (7, 12), k = (B, T)",
     {0, 1, 2, 1, {0}, {7}, {2, 5}, {12}},
     {{{0}, {0}, {0}, {0}},
      {{0}, {3}, {1, 2}, {5}},   /* 6 k tiles, partial */
      {{0}, {7}, {2, 1}, {12}},  /* 5 k tiles */
      {{0}, {4}, {1, 5}, {8}}}},
    {"several dims (4, 3 | 5, 2) x (5, 2 | 3, 2)",
     {0, 2, 2, 2, {0}, {4, 3}, {5, 2}, {3, 2}},
     {{{0}, {0}, {0}, {0}},
      {{0}, {3, 2}, {2, 2}, {2, 1}},
      {{0}, {4, 1}, {1, 1}, {3, 2}},
      {{0}, {1, 3}, {5, 1}, {1, 2}}}},
    {"batch 2 dims (2, 3 | 4 | 6 | 5)",
     {2, 1, 1, 1, {2, 3}, {4}, {6}, {5}},
     {{{0}, {0}, {0}, {0}},
      {{1, 2}, {3}, {4}, {2}},
      {{2, 3}, {4}, {1}, {5}},
      {{1, 1}, {2}, {6}, {3}}}},
};
#define NCASES ((int)(sizeof cases / sizeof *cases))

static int64_t prod(int n, const int64_t *v)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= v[i];
    return p;
}

/* Append the n entries of v to out at index at; returns the next index. */
static int put(int64_t *out, int at, int n, const int64_t *v)
{
    for (int i = 0; i < n; i++)
        out[at + i] = v[i];
    return at + n;
}

/* Shapes (tile == NULL) or tiles of A, B, C in storage order. */
static void layout(const struct dims *d, const struct tiling *t, int ta, int tb, int64_t *a,
                   int64_t *b, int64_t *c, int64_t *bias)
{
    const int64_t *B = t ? t->b : d->b, *M = t ? t->m : d->m;
    const int64_t *K = t ? t->k : d->k, *N = t ? t->n : d->n;
    int i = put(a, 0, d->nb, B);
    i = ta ? put(a, put(a, i, d->nk, K), d->nm, M) : put(a, put(a, i, d->nm, M), d->nk, K);
    i = put(b, 0, d->nb, B);
    i = tb ? put(b, put(b, i, d->nn, N), d->nk, K) : put(b, put(b, i, d->nk, K), d->nn, N);
    put(c, put(c, put(c, 0, d->nb, B), d->nm, M), d->nn, N);
    put(bias, 0, d->nn, N);
}

/* Replace zero tile entries by the dimension. */
static void whole_dims(int n, const int64_t *shape, int64_t *tile)
{
    for (int i = 0; i < n; i++)
        if (tile[i] == 0)
            tile[i] = shape[i];
}

/* ---- host data and reference --------------------------------------------------------- */

struct host {
    int64_t nb, nm, nk, nn;   /* flattened group sizes */
    float *a, *b, *c0, *bias, *aux0;
};

/* uniform in +-[0.25, 1): non-zero */
static void rand_fill(float *x, int64_t n, unsigned long long *state)
{
    for (int64_t i = 0; i < n; i++) {
        double u = test_rand(state);
        x[i] = (float)((u < 0.5 ? -1 : 1) * (0.25 + 1.5 * fabs(u - 0.5)));
    }
}

static void host_init(struct host *h, const struct dims *d, unsigned long long seed)
{
    h->nb = prod(d->nb, d->b);
    h->nm = prod(d->nm, d->m);
    h->nk = prod(d->nk, d->k);
    h->nn = prod(d->nn, d->n);
    int64_t na = h->nb * h->nm * h->nk, nbb = h->nb * h->nk * h->nn, nc = h->nb * h->nm * h->nn;
    h->a = malloc((size_t)na * sizeof(float));
    h->b = malloc((size_t)nbb * sizeof(float));
    h->c0 = malloc((size_t)nc * sizeof(float));
    h->aux0 = malloc((size_t)nc * sizeof(float));
    h->bias = malloc((size_t)h->nn * sizeof(float));
    unsigned long long state = seed;
    rand_fill(h->a, na, &state);
    rand_fill(h->b, nbb, &state);
    rand_fill(h->c0, nc, &state);
    rand_fill(h->aux0, nc, &state);
    rand_fill(h->bias, h->nn, &state);
    for (int64_t i = 0; i < nc; i++)
        h->aux0[i] *= 3.0f;   /* pre-activations over the interesting range of GELU */
}

static void host_free(struct host *h)
{
    free(h->a);
    free(h->b);
    free(h->c0);
    free(h->aux0);
    free(h->bias);
}

static double gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double gelu_grad(double x)
{
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    double t = tanh(u);
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

/* The magnitude of the terms that gelu_grad adds up. */
static double gelu_grad_terms(double x)
{
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    double t = tanh(u);
    return 0.5 * (1.0 + fabs(t)) +
           fabs(0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x));
}

/* The exact GELU x Phi(x), its derivative Phi(x) + x phi(x) and the magnitude of its terms */
static double normal_cdf(double x)
{
    return 0.5 * erfc(-x * 0.70710678118654752440);
}

static double gelu_erf(double x)
{
    return x * normal_cdf(x);
}

static double gelu_erf_grad(double x)
{
    return normal_cdf(x) + x * exp(-0.5 * x * x) * 0.39894228040143267794;
}

static double gelu_erf_grad_terms(double x)
{
    return normal_cdf(x) + fabs(x * exp(-0.5 * x * x) * 0.39894228040143267794);
}

/* The epilogues that write aux (gelu(C)) and those that read it (the pre-activation). */
static int writes_aux(nnt_epilogue e)
{
    return e == NNT_EPILOGUE_BIAS_GELU || e == NNT_EPILOGUE_BIAS_GELU_ERF;
}

static int reads_aux(nnt_epilogue e)
{
    return e == NNT_EPILOGUE_DGELU || e == NNT_EPILOGUE_DGELU_ERF;
}

struct variant {
    double alpha, beta;
    nnt_epilogue epi;
    int with_bias;
};

/* Reference C and aux in double, and a per-element error scale (sum of magnitudes). */
static void reference(const struct host *h, int ta, int tb, const struct variant *v,
                      double *c, double *aux, double *scale)
{
    for (int64_t bi = 0; bi < h->nb; bi++)
        for (int64_t i = 0; i < h->nm; i++)
            for (int64_t j = 0; j < h->nn; j++) {
                double s = 0, mag = 0;
                for (int64_t l = 0; l < h->nk; l++) {
                    double x = ta ? h->a[(bi * h->nk + l) * h->nm + i]
                                  : h->a[(bi * h->nm + i) * h->nk + l];
                    double y = tb ? h->b[(bi * h->nn + j) * h->nk + l]
                                  : h->b[(bi * h->nk + l) * h->nn + j];
                    s += x * y;
                    mag += fabs(x * y);
                }
                int64_t o = (bi * h->nm + i) * h->nn + j;
                double r = v->alpha * s, sc = fabs(v->alpha) * mag;
                if (v->beta != 0) {
                    r += v->beta * h->c0[o];
                    sc += fabs(v->beta * h->c0[o]);
                }
                if (v->with_bias) {
                    r += h->bias[j];
                    sc += fabs(h->bias[j]);
                }
                aux[o] = 0;
                int exact = v->epi == NNT_EPILOGUE_BIAS_GELU_ERF ||
                            v->epi == NNT_EPILOGUE_DGELU_ERF;
                if (writes_aux(v->epi))
                    aux[o] = exact ? gelu_erf(r) : gelu(r);
                if (reads_aux(v->epi)) {
                    /* gelu' in float is exact only to the size of its terms: near its zero
                     * (x ~ -0.75) the error of g, times r, dominates */
                    double x = h->aux0[o];
                    double g = exact ? gelu_erf_grad(x) : gelu_grad(x);
                    sc = sc * fabs(g) + fabs(r) * (exact ? gelu_erf_grad_terms(x)
                                                         : gelu_grad_terms(x));
                    r *= g;
                }
                c[o] = r;
                scale[o] = sc + fabs(r);
            }
}

/* ---- running one tiled product --------------------------------------------------------- */

struct result {
    float *c, *aux;
};

static nnt_tensor *make(int ndim, const int64_t *shape, const int64_t *tile, const float *data)
{
    nnt_tensor *t;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, ndim, shape, tile, &t));
    if (data)
        EXPECT_OK(nnt_tensor_copy_from_host(t, data, (size_t)prod(ndim, shape) * sizeof(float)));
    return t;
}

/* Shapes and tiles of A, B, C and bias for a tiling, with their numbers of dimensions. */
struct layouts {
    int64_t sa[8], sb[8], sc[8], sbias[8], ta[8], tb[8], tc[8], tbias[8];
    int na, nb, nc;
};

static void layouts_of(const struct dims *d, const struct tiling *tl, int ta, int tb,
                       struct layouts *l)
{
    layout(d, NULL, ta, tb, l->sa, l->sb, l->sc, l->sbias);
    layout(d, tl, ta, tb, l->ta, l->tb, l->tc, l->tbias);
    l->na = d->nb + d->nm + d->nk;
    l->nb = d->nb + d->nk + d->nn;
    l->nc = d->nb + d->nm + d->nn;
    whole_dims(l->na, l->sa, l->ta);
    whole_dims(l->nb, l->sb, l->tb);
    whole_dims(l->nc, l->sc, l->tc);
    whole_dims(d->nn, l->sbias, l->tbias);
}

static struct result run_tiled(const struct dims *d, const struct tiling *tl, int ta, int tb,
                               const struct host *h, const struct variant *v)
{
    struct layouts l;
    layouts_of(d, tl, ta, tb, &l);
    int na = l.na, nbd = l.nb, nc = l.nc;
    const int64_t *sa = l.sa, *sb = l.sb, *sc = l.sc, *sbias = l.sbias;
    const int64_t *ta_ = l.ta, *tb_ = l.tb, *tc = l.tc, *tbias = l.tbias;
    nnt_tensor *a = make(na, sa, ta_, h->a), *b = make(nbd, sb, tb_, h->b);
    nnt_tensor *c = make(nc, sc, tc, v->beta != 0 ? h->c0 : NULL);   /* beta 0: never written */
    nnt_tensor *bias = v->with_bias ? make(d->nn, sbias, tbias, h->bias) : NULL;
    nnt_tensor *aux = NULL;
    if (writes_aux(v->epi))
        aux = make(nc, sc, tc, NULL);
    if (reads_aux(v->epi))
        aux = make(nc, sc, tc, h->aux0);

    if (v->epi == NNT_EPILOGUE_NONE)
        EXPECT_OK(nnt_tensor_gemm(ta, tb, v->alpha, a, b, v->beta, c, d->nk, d->nb));
    else
        EXPECT_OK(nnt_tensor_gemm_ex(ta, tb, v->alpha, a, b, v->beta, c, d->nk, d->nb, v->epi,
                                     bias, aux));
    int64_t n = prod(nc, sc);
    struct result r = {malloc((size_t)n * sizeof(float)), malloc((size_t)n * sizeof(float))};
    EXPECT_OK(nnt_tensor_copy_to_host(c, r.c, (size_t)n * sizeof(float)));
    if (writes_aux(v->epi))
        EXPECT_OK(nnt_tensor_copy_to_host(aux, r.aux, (size_t)n * sizeof(float)));
    else
        memset(r.aux, 0, (size_t)n * sizeof(float));
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_tensor_destroy(c));
    EXPECT_OK(nnt_tensor_destroy(bias));
    EXPECT_OK(nnt_tensor_destroy(aux));
    return r;
}

/* Tolerances, in units of each element's scale (the sum of the magnitudes of the terms that
 * make it, + 1e-3), about 10x the largest error measured on Zen 3 under the BLIS zen3,
 * haswell and generic kernel sets (which differ by at most 1.3x here):
 * - TOL_C: C against the float64 reference, all epilogues but DGELU, fp32 and the tf32/bf16
 *   modes (against the reference on rounded operands); measured 9.0e-8 (fp32), 7.8e-8
 *   (tf32, bf16).
 * - TOL_C_DGELU: the same with the DGELU epilogues, whose gelu'(aux) in float adds its own
 *   rounding; measured 2.0e-7 (fp32), 2.2e-7 (tf32), 1.6e-7 (bf16); DGELU_ERF 1.0e-7 (fp32),
 *   1.2e-7 (tf32, bf16).
 * - TOL_AUX: gelu(C) of the BIAS_GELU epilogues; measured 1.1e-7 (BIAS_GELU_ERF 1.1e-7).
 * - TOL_TILING: C and aux of a tiling against those of the single tile; measured 1.5e-7.
 * - TOL_MANY: C and aux of the 96x160x80 product; measured 5.7e-8.
 * The reduced-precision modes must also stay visibly away from the full-operand result: at
 * least ROUNDED_MIN (about a tenth of the distance measured, 1.8e-4 tf32, 1.4e-3 bf16). */
#define TOL_C 1e-6
#define TOL_C_DGELU 2e-6
#define TOL_AUX 1e-6
#define TOL_TILING 1.5e-6
#define TOL_MANY 5e-7

/* got vs want within tol relative to the magnitude scale of each element: the largest
 * |got - want| / (scale + 1e-3) is the check's error, reported (test_tol_note) under the
 * caller's line. */
#define expect_close(...) expect_close_at(__LINE__, __VA_ARGS__)
static void expect_close_at(int line, const char *what, int64_t n, const float *got,
                            const double *want, const double *scale, const char *ctxt,
                            double tol)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (scale[i] + 1e-3);
        worst = worse(worst, e);
    }
    test_tol_note(__FILE__, line, worst, tol);
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        ck_assert_msg(err <= tol * (scale[i] + 1e-3),
                      "%s: %s[%lld] = %.9g, expected %.9g (error %.3g in units of the scale, "
                      "tolerance %.3g; line %d)", ctxt, what, (long long)i, (double)got[i],
                      want[i], err / (scale[i] + 1e-3), tol, line);
    }
}

static double tol_c(const struct variant *v)
{
    return reads_aux(v->epi) ? TOL_C_DGELU : TOL_C;
}

static const struct variant variants[] = {
    {1.0, 0.0, NNT_EPILOGUE_NONE, 0},
    {0.5, -1.5, NNT_EPILOGUE_NONE, 0},
    {1.0, 0.0, NNT_EPILOGUE_BIAS, 1},
    {-2.0, 1.0, NNT_EPILOGUE_BIAS, 1},
    {1.0, 0.0, NNT_EPILOGUE_BIAS_GELU, 1},
    {0.75, 0.5, NNT_EPILOGUE_BIAS_GELU, 0},   /* bias NULL */
    {1.0, 0.0, NNT_EPILOGUE_DGELU, 0},
    {1.5, 1.0, NNT_EPILOGUE_DGELU, 0},
    {1.0, 0.0, NNT_EPILOGUE_BIAS_GELU_ERF, 1},
    {0.75, 0.5, NNT_EPILOGUE_BIAS_GELU_ERF, 0},   /* bias NULL */
    {1.0, 0.0, NNT_EPILOGUE_DGELU_ERF, 0},
    {1.5, 1.0, NNT_EPILOGUE_DGELU_ERF, 0},
};
#define NVARIANTS ((int)(sizeof variants / sizeof *variants))

/* Loop index: case * 4 + transposes. Every variant, every tiling, against the reference and
 * against tiling 0. */
START_TEST(matches_reference)
{
    const struct gcase *gc = &cases[_i / 4];
    int ta = (_i >> 1) & 1, tb = _i & 1;
    for (int vi = 0; vi < NVARIANTS; vi++) {
        const struct variant *v = &variants[vi];
        struct host h;
        host_init(&h, &gc->d, 0x9e3779b97f4a7c15ULL + (unsigned long long)(_i * 64 + vi));
        int64_t n = h.nb * h.nm * h.nn;
        double *want = malloc((size_t)n * sizeof *want), *want_aux = malloc((size_t)n * sizeof *want);
        double *scale = malloc((size_t)n * sizeof *scale);
        reference(&h, ta, tb, v, want, want_aux, scale);
        struct result first = {NULL, NULL};
        for (int ti = 0; ti < NTILINGS; ti++) {
            char where[256];
            snprintf(where, sizeof where, "%s, trans %d %d, variant %d (alpha %g beta %g epi %d), "
                     "tiling %d", gc->what, ta, tb, vi, v->alpha, v->beta, (int)v->epi, ti);
            struct result r = run_tiled(&gc->d, &gc->t[ti], ta, tb, &h, v);
            expect_close("C", n, r.c, want, scale, where, tol_c(v));
            if (writes_aux(v->epi))
                expect_close("aux", n, r.aux, want_aux, scale, where, TOL_AUX);
            if (ti == 0) {
                first = r;
                continue;
            }
            double worst = 0.0;   /* tilings agree with tiling 0 */
            for (int64_t i = 0; i < n; i++) {
                double e = fmax(fabs(r.c[i] - first.c[i]), fabs(r.aux[i] - first.aux[i])) /
                           (scale[i] + 1e-3);
                worst = worse(worst, e);
            }
            EXPECT_TOL(worst, TOL_TILING, "%.200s: differs from the single tile", where);
            free(r.c);
            free(r.aux);
        }
        free(first.c);
        free(first.aux);
        free(want);
        free(want_aux);
        free(scale);
        host_free(&h);
    }
}
END_TEST

/* The same tiling twice gives bit-identical results (fixed k order). */
START_TEST(deterministic)
{
    const struct gcase *gc = &cases[3];   /* weight gradient: several k tiles */
    const struct variant v = {1.0, 1.0, NNT_EPILOGUE_NONE, 0};
    struct host h;
    host_init(&h, &gc->d, 77);
    int64_t n = h.nb * h.nm * h.nn;
    for (int ti = 1; ti < NTILINGS; ti++) {
        struct result r1 = run_tiled(&gc->d, &gc->t[ti], 1, 0, &h, &v);
        for (int rep = 0; rep < 5; rep++) {
            struct result r2 = run_tiled(&gc->d, &gc->t[ti], 1, 0, &h, &v);
            ck_assert_msg(memcmp(r1.c, r2.c, (size_t)n * sizeof(float)) == 0,
                          "tiling %d: run %d differs from run 0", ti, rep + 1);
            free(r2.c);
            free(r2.aux);
        }
        free(r1.c);
        free(r1.aux);
    }
    host_free(&h);
}
END_TEST

/* A bigger product with many tasks in flight over both workers, against the reference. */
START_TEST(many_tasks)
{
    const struct dims d = {0, 1, 1, 1, {0}, {96}, {160}, {80}};
    const struct tiling t = {{0}, {16}, {32}, {16}};
    const struct variant v = {1.0, 0.0, NNT_EPILOGUE_BIAS_GELU, 1};
    struct host h;
    host_init(&h, &d, 1234);
    int64_t n = h.nm * h.nn;
    double *want = malloc((size_t)n * sizeof *want), *want_aux = malloc((size_t)n * sizeof *want);
    double *scale = malloc((size_t)n * sizeof *scale);
    reference(&h, 0, 1, &v, want, want_aux, scale);
    struct result r = run_tiled(&d, &t, 0, 1, &h, &v);
    expect_close("C", n, r.c, want, scale, "96x160x80 in 16x32x16 tiles", TOL_MANY);
    expect_close("aux", n, r.aux, want_aux, scale, "96x160x80 in 16x32x16 tiles", TOL_MANY);
    free(r.c);
    free(r.aux);
    free(want);
    free(want_aux);
    free(scale);
    host_free(&h);
}
END_TEST

/* ---- the exact GELU's epilogues against the separate operations ----------------------- */

/* Where CUDA workers may take some tasks and not others (their products are summed in
 * another order), |got - want| <= TOL_SEPARATE (1 + |want|); not yet measured on a GPU. On
 * CPU workers the two ways run the same kernels on the same elements: the same bits. */
#define TOL_SEPARATE 1e-5

static void expect_same(const char *what, nnt_tensor *got, nnt_tensor *want, int64_t n,
                        double tol, const char *where)
{
    float *g = malloc((size_t)n * sizeof *g), *w = malloc((size_t)n * sizeof *w);
    EXPECT_OK(nnt_tensor_copy_to_host(got, g, (size_t)n * sizeof *g));
    EXPECT_OK(nnt_tensor_copy_to_host(want, w, (size_t)n * sizeof *w));
    if (tol == 0.0) {
        ck_assert_msg(memcmp(g, w, (size_t)n * sizeof *g) == 0,
                      "%s: %s differs from the separate operations", where, what);
    } else {
        double worst = 0.0;
        for (int64_t i = 0; i < n; i++)
            worst = worse(worst, fabs((double)g[i] - w[i]) / (1.0 + fabs(w[i])));
        EXPECT_TOL(worst, tol, "%s: %s against the separate operations", where, what);
    }
    free(g);
    free(w);
}

/* Loop index: case * 4 + transposes, on tiling 1 (partial tiles, several k tiles):
 * BIAS_GELU_ERF (with a bias and without) against the product with the BIAS epilogue (or
 * none) followed by nnt_tensor_gelu_erf, and DGELU_ERF (alpha 1.5, beta 1) against the
 * product followed by nnt_tensor_gelu_erf_backward(aux, C, C). */
START_TEST(erf_epilogues_match_ops)
{
    const struct gcase *gc = &cases[_i / 4];
    int ta = (_i >> 1) & 1, tb = _i & 1, nk = gc->d.nk, nb = gc->d.nb;
    struct layouts l;
    layouts_of(&gc->d, &gc->t[1], ta, tb, &l);
    struct host h;
    host_init(&h, &gc->d, 4242 + (unsigned long long)_i);
    int64_t n = prod(l.nc, l.sc);
    double tol = test_ctx_has_cuda(ctx) ? TOL_SEPARATE : 0.0;
    char where[256];
    nnt_tensor *a = make(l.na, l.sa, l.ta, h.a), *b = make(l.nb, l.sb, l.tb, h.b);
    nnt_tensor *bias = make(gc->d.nn, l.sbias, l.tbias, h.bias);
    nnt_tensor *pre = make(l.nc, l.sc, l.tc, h.aux0);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        snprintf(where, sizeof where, "%s, trans %d %d, BIAS_GELU_ERF, bias %d", gc->what, ta,
                 tb, with_bias);
        nnt_tensor *bs = with_bias ? bias : NULL;
        nnt_tensor *c1 = make(l.nc, l.sc, l.tc, NULL), *aux1 = make(l.nc, l.sc, l.tc, NULL);
        nnt_tensor *c2 = make(l.nc, l.sc, l.tc, NULL), *y2 = make(l.nc, l.sc, l.tc, NULL);
        EXPECT_OK(nnt_tensor_gemm_ex(ta, tb, 1.0, a, b, 0.0, c1, nk, nb,
                                     NNT_EPILOGUE_BIAS_GELU_ERF, bs, aux1));
        EXPECT_OK(nnt_tensor_gemm_ex(ta, tb, 1.0, a, b, 0.0, c2, nk, nb,
                                     bs ? NNT_EPILOGUE_BIAS : NNT_EPILOGUE_NONE, bs, NULL));
        EXPECT_OK(nnt_tensor_gelu_erf(c2, y2));
        expect_same("C", c1, c2, n, tol, where);
        expect_same("aux", aux1, y2, n, tol, where);
        nnt_tensor *t[] = {c1, aux1, c2, y2};
        for (int i = 0; i < 4; i++)
            EXPECT_OK(nnt_tensor_destroy(t[i]));
    }
    snprintf(where, sizeof where, "%s, trans %d %d, DGELU_ERF", gc->what, ta, tb);
    nnt_tensor *c1 = make(l.nc, l.sc, l.tc, h.c0), *c2 = make(l.nc, l.sc, l.tc, h.c0);
    EXPECT_OK(nnt_tensor_gemm_ex(ta, tb, 1.5, a, b, 1.0, c1, nk, nb, NNT_EPILOGUE_DGELU_ERF,
                                 NULL, pre));
    EXPECT_OK(nnt_tensor_gemm(ta, tb, 1.5, a, b, 1.0, c2, nk, nb));
    EXPECT_OK(nnt_tensor_gelu_erf_backward(pre, c2, c2));
    expect_same("C", c1, c2, n, tol, where);
    nnt_tensor *t[] = {a, b, bias, pre, c1, c2};
    for (int i = 0; i < 6; i++)
        EXPECT_OK(nnt_tensor_destroy(t[i]));
    host_free(&h);
}
END_TEST

/* ---- reduced precision (nnt_ctx_set_precision) ------------------------------------------ */

/* Rounding of the operands, written independently of the library's integer version: scale
 * the mantissa to an integer of bits + 1 bits and round it with nearbyint (ties to even in
 * the default rounding mode). For the normal, finite values of these tests. */
static float round_mantissa(float x, int bits)
{
    int e;
    double m = frexp(x, &e);   /* x = m 2^e, 0.5 <= |m| < 1 */
    return (float)ldexp(nearbyint(ldexp(m, bits + 1)), e - bits - 1);
}

static const struct {
    nnt_precision precision;
    int bits;
    const char *name;
    double rounded_min;   /* ROUNDED_MIN above */
} modes[] = {{NNT_PRECISION_TF32, 10, "tf32", 2e-5}, {NNT_PRECISION_BF16, 7, "bf16", 1.5e-4}};

/* Loop index: (case * 4 + transposes) * 2 + mode. Every variant and tiling equals the
 * reference on rounded operands (to float summation), and differs visibly from the one on
 * full operands (so a mode that changed nothing would fail). */
START_TEST(reduced_precision)
{
    const struct gcase *gc = &cases[_i / 8];
    int ta = (_i >> 2) & 1, tb = (_i >> 1) & 1, mi = _i & 1;
    double farthest = 0.0;   /* from the full-precision reference, in units of scale */
    for (int vi = 0; vi < NVARIANTS; vi++) {
        const struct variant *v = &variants[vi];
        struct host h, hr;   /* full operands; the same rounded */
        unsigned long long seed = 0x51ed270b27b6c1a5ULL + (unsigned long long)(_i * 64 + vi);
        host_init(&h, &gc->d, seed);
        host_init(&hr, &gc->d, seed);
        int64_t n = h.nb * h.nm * h.nn;
        double *full = malloc((size_t)n * sizeof *full), *want = malloc((size_t)n * sizeof *want);
        double *want_aux = malloc((size_t)n * sizeof *want);
        double *scale = malloc((size_t)n * sizeof *scale);
        reference(&h, ta, tb, v, full, want_aux, scale);
        for (int64_t i = 0; i < hr.nb * hr.nm * hr.nk; i++)
            hr.a[i] = round_mantissa(hr.a[i], modes[mi].bits);
        for (int64_t i = 0; i < hr.nb * hr.nk * hr.nn; i++)
            hr.b[i] = round_mantissa(hr.b[i], modes[mi].bits);
        reference(&hr, ta, tb, v, want, want_aux, scale);
        for (int ti = 0; ti < NTILINGS; ti++) {
            char where[256];
            snprintf(where, sizeof where, "%s, %s, trans %d %d, variant %d, tiling %d",
                     modes[mi].name, gc->what, ta, tb, vi, ti);
            EXPECT_OK(nnt_ctx_set_precision(ctx, modes[mi].precision));
            struct result r = run_tiled(&gc->d, &gc->t[ti], ta, tb, &h, v);   /* full operands */
            EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_FP32));
            expect_close("C", n, r.c, want, scale, where, tol_c(v));
            if (writes_aux(v->epi))
                expect_close("aux", n, r.aux, want_aux, scale, where, TOL_AUX);
            for (int64_t i = 0; i < n; i++) {
                double d = fabs(r.c[i] - full[i]) / (scale[i] + 1e-3);
                farthest = d > farthest ? d : farthest;
            }
            free(r.c);
            free(r.aux);
        }
        host_free(&h);
        host_free(&hr);
        free(full);
        free(want);
        free(want_aux);
        free(scale);
    }
    ck_assert_msg(farthest > modes[mi].rounded_min,
                  "%s: results within %g of full fp32: not rounded?", modes[mi].name, farthest);
}
END_TEST

/* A float tensor, or (as_bf16) a bf16 one, from float host data; as bf16 the data must hold
 * bf16 values (their upper halves are stored). */
static nnt_tensor *make_as(int ndim, const int64_t *shape, const int64_t *tile, const float *data,
                           int as_bf16)
{
    if (!as_bf16)
        return make(ndim, shape, tile, data);
    int64_t n = prod(ndim, shape);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &data[i], sizeof u);
        ck_assert_msg((u & 0xffffu) == 0, "not a bf16 value");
        h[i] = (uint16_t)(u >> 16);
    }
    nnt_tensor *t;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_BF16, ndim, shape, tile, &t));
    EXPECT_OK(nnt_tensor_copy_from_host(t, h, (size_t)n * sizeof *h));
    free(h);
    return t;
}

/* C = A B with A and/or B stored as NNT_BF16 (bits 0: A, 1: B), C fresh (beta 0). */
static float *run_bf16_operands(const struct dims *d, const struct tiling *tl, int ta, int tb,
                                const struct host *h, int which)
{
    struct layouts l;
    layouts_of(d, tl, ta, tb, &l);
    int na = l.na, nbd = l.nb, nc = l.nc;
    const int64_t *sa = l.sa, *sb = l.sb, *sc = l.sc, *ta_ = l.ta, *tb_ = l.tb, *tc = l.tc;
    nnt_tensor *a = make_as(na, sa, ta_, h->a, which & 1);
    nnt_tensor *b = make_as(nbd, sb, tb_, h->b, which & 2);
    nnt_tensor *c = make(nc, sc, tc, NULL);
    EXPECT_OK(nnt_tensor_gemm(ta, tb, 1.0, a, b, 0.0, c, d->nk, d->nb));
    int64_t n = prod(nc, sc);
    float *out = malloc((size_t)n * sizeof *out);
    EXPECT_OK(nnt_tensor_copy_to_host(c, out, (size_t)n * sizeof(float)));
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_tensor_destroy(c));
    return out;
}

/* Loop index: case * 4 + transposes. Operands stored as bf16 give the bits of float operands
 * holding the same values, in every precision mode and tiling (A, B or both in bf16); the
 * float operand is rounded by the mode as usual. */
START_TEST(bf16_operands)
{
    static const nnt_precision ps[] = {NNT_PRECISION_FP32, NNT_PRECISION_TF32,
                                       NNT_PRECISION_BF16};
    const struct gcase *gc = &cases[_i / 4];
    int ta = (_i >> 1) & 1, tb = _i & 1;
    struct host h;
    host_init(&h, &gc->d, 0xb16b00b5ULL + (unsigned long long)_i);
    for (int64_t i = 0; i < h.nb * h.nm * h.nk; i++)
        h.a[i] = round_mantissa(h.a[i], 7);
    for (int64_t i = 0; i < h.nb * h.nk * h.nn; i++)
        h.b[i] = round_mantissa(h.b[i], 7);
    int64_t n = h.nb * h.nm * h.nn;
    for (int pi = 0; pi < 3; pi++)
        for (int ti = 0; ti < NTILINGS; ti++) {
            EXPECT_OK(nnt_ctx_set_precision(ctx, ps[pi]));
            float *want = run_bf16_operands(&gc->d, &gc->t[ti], ta, tb, &h, 0);
            for (int which = 1; which <= 3; which++) {
                float *got = run_bf16_operands(&gc->d, &gc->t[ti], ta, tb, &h, which);
                ck_assert_msg(memcmp(got, want, (size_t)n * sizeof(float)) == 0,
                              "%s, trans %d %d, precision %d, tiling %d, bf16 operands %d: "
                              "not the bits of float operands", gc->what, ta, tb, (int)ps[pi],
                              ti, which);
                free(got);
            }
            free(want);
        }
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_FP32));
    host_free(&h);
}
END_TEST

START_TEST(precision_setting)
{
    nnt_precision p = (nnt_precision)99;
    EXPECT_OK(nnt_ctx_precision(ctx, &p));
    ck_assert_int_eq(p, NNT_PRECISION_FP32);
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    EXPECT_OK(nnt_ctx_precision(ctx, &p));
    ck_assert_int_eq(p, NNT_PRECISION_BF16);
    EXPECT_FAIL_MSG(nnt_ctx_set_precision(ctx, (nnt_precision)3), NNT_E_INVAL,
                    "nnt_ctx_set_precision");
    EXPECT_FAIL_MSG(nnt_ctx_set_precision(ctx, (nnt_precision)-1), NNT_E_INVAL,
                    "nnt_ctx_set_precision");
    EXPECT_FAIL_MSG(nnt_ctx_precision(ctx, NULL), NNT_E_INVAL, "nnt_ctx_precision");
    EXPECT_FAIL_MSG(nnt_ctx_set_precision(NULL, NNT_PRECISION_FP32), NNT_E_INVAL,
                    "nnt_ctx_set_precision");
    EXPECT_OK(nnt_ctx_precision(ctx, &p));
    ck_assert_int_eq(p, NNT_PRECISION_BF16);   /* refused calls change nothing */

    /* back to fp32: the same bits as a context that never left it */
    const struct gcase *gc = &cases[3];
    const struct variant v = {1.0, 1.0, NNT_EPILOGUE_NONE, 0};
    struct host h;
    host_init(&h, &gc->d, 91);
    int64_t n = h.nb * h.nm * h.nn;
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_FP32));
    struct result r1 = run_tiled(&gc->d, &gc->t[1], 1, 0, &h, &v);
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_BF16));
    struct result r2 = run_tiled(&gc->d, &gc->t[1], 1, 0, &h, &v);
    EXPECT_OK(nnt_ctx_set_precision(ctx, NNT_PRECISION_FP32));
    struct result r3 = run_tiled(&gc->d, &gc->t[1], 1, 0, &h, &v);
    ck_assert_msg(memcmp(r1.c, r3.c, (size_t)n * sizeof(float)) == 0, "fp32 changed");
    ck_assert_msg(memcmp(r1.c, r2.c, (size_t)n * sizeof(float)) != 0, "bf16 gave fp32's bits");
    free(r1.c), free(r1.aux), free(r2.c), free(r2.aux), free(r3.c), free(r3.aux);
    host_free(&h);
}
END_TEST

/* ---- argument checks -------------------------------------------------------------------- */

static nnt_tensor *filled(int ndim, const int64_t *shape, const int64_t *tile)
{
    nnt_tensor *t;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, ndim, shape, tile, &t));
    EXPECT_OK(nnt_tensor_fill(t, 1.0));
    return t;
}

START_TEST(bad_shapes)
{
    const char *fn = "nnt_tensor_gemm";
    nnt_tensor *a = filled(2, (int64_t[]){4, 6}, (int64_t[]){2, 3});
    nnt_tensor *b = filled(2, (int64_t[]){6, 5}, (int64_t[]){3, 5});
    nnt_tensor *c = filled(2, (int64_t[]){4, 5}, (int64_t[]){2, 5});
    nnt_tensor *b_k = filled(2, (int64_t[]){7, 5}, (int64_t[]){3, 5});     /* k size 7 */
    nnt_tensor *b_kt = filled(2, (int64_t[]){6, 5}, (int64_t[]){2, 5});    /* k tile 2 */
    nnt_tensor *c_m = filled(2, (int64_t[]){3, 5}, (int64_t[]){2, 5});     /* m size 3 */
    nnt_tensor *c_nt = filled(2, (int64_t[]){4, 5}, (int64_t[]){2, 4});    /* n tile 4 */
    nnt_tensor *c_3 = filled(3, (int64_t[]){4, 5, 1}, NULL);
    nnt_tensor *bat = filled(3, (int64_t[]){2, 4, 6}, NULL);
    nnt_tensor *bbt = filled(3, (int64_t[]){3, 6, 5}, NULL);                /* batch 3 != 2 */
    nnt_tensor *cbt = filled(3, (int64_t[]){2, 4, 5}, NULL);

    EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, c, 1, 0));
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b_k, 0, c, 1, 0),
                       NNT_E_SHAPE, fn, "k...");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b_kt, 0, c, 1, 0),
                       NNT_E_SHAPE, fn, "tiling");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, c_m, 1, 0),
                       NNT_E_SHAPE, fn, "m...");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, c_nt, 1, 0),
                       NNT_E_SHAPE, fn, "n...");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, c_3, 1, 0),
                       NNT_E_SHAPE, fn, "C has 3 dimensions");
    /* transposed, A (4, 6) is (k, m): its m dim 6 is not C's 4 */
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1, a, b, 0, c, 1, 0),
                       NNT_E_SHAPE, fn, "A[m...]");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, bat, bbt, 0, cbt, 1, 1),
                       NNT_E_SHAPE, fn, "b...");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, c, 0, 0),
                       NNT_E_INVAL, fn, "ndim_k");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, c, 1, -1),
                       NNT_E_INVAL, fn, "ndim_batch");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, c, 2, 0),
                       NNT_E_SHAPE, fn, "no m dimension");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, c, 1, 1),
                       NNT_E_SHAPE, fn, "no m dimension");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm((nnt_trans)2, NNT_NOTRANS, 1, a, b, 0, c, 1, 0),
                       NNT_E_INVAL, fn, "trans_a");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, (nnt_trans)-1, 1, a, b, 0, c, 1, 0),
                       NNT_E_INVAL, fn, "trans_b");
    EXPECT_FAIL_MSG(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, NULL, b, 0, c, 1, 0),
                    NNT_E_INVAL, fn);
    EXPECT_FAIL_MSG(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, NULL, 1, 0),
                    NNT_E_INVAL, fn);
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, c, b, 0, c, 1, 0),
                       NNT_E_INVAL, fn, "must not be");

    nnt_tensor *tensors[] = {a, b, c, b_k, b_kt, c_m, c_nt, c_3, bat, bbt, cbt};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        EXPECT_OK(nnt_tensor_destroy(tensors[i]));
}
END_TEST

START_TEST(bad_dtype_and_state)
{
    const char *fn = "nnt_tensor_gemm";
    nnt_tensor *a = filled(2, (int64_t[]){4, 6}, NULL);
    nnt_tensor *b = filled(2, (int64_t[]){6, 5}, NULL);
    nnt_tensor *c = filled(2, (int64_t[]){4, 5}, NULL);
    nnt_tensor *ai, *fresh, *cfresh;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 2, (int64_t[]){4, 6}, NULL, &ai));
    EXPECT_OK(nnt_tensor_fill(ai, 1));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){4, 6}, NULL, &fresh));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 2, (int64_t[]){4, 5}, NULL, &cfresh));

    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, ai, b, 0, c, 1, 0),
                       NNT_E_SHAPE, fn, "NNT_FP32 or NNT_BF16");
    nnt_tensor *cb, *biasb;   /* C and bias stay float; A and B may be bf16 */
    EXPECT_OK(nnt_tensor_create(ctx, NNT_BF16, 2, (int64_t[]){4, 5}, NULL, &cb));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_BF16, 1, (int64_t[]){5}, NULL, &biasb));
    EXPECT_OK(nnt_tensor_fill(cb, 0.0));
    EXPECT_OK(nnt_tensor_fill(biasb, 0.0));
    EXPECT_FAIL_NAMING(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, cb, 1, 0),
                       NNT_E_SHAPE, fn, "NNT_BF16");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0, c, 1, 0,
                                          NNT_EPILOGUE_BIAS, biasb, NULL),
                       NNT_E_SHAPE, "nnt_tensor_gemm_ex", "bias");
    EXPECT_OK(nnt_tensor_destroy(cb));
    EXPECT_OK(nnt_tensor_destroy(biasb));
    EXPECT_FAIL_MSG(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, fresh, b, 0, c, 1, 0),
                    NNT_E_STATE, fn);
    /* beta != 0 reads C */
    EXPECT_FAIL_MSG(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0.5, cfresh, 1, 0),
                    NNT_E_STATE, fn);
    EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0.0, cfresh, 1, 0));
    EXPECT_OK(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1, a, b, 0.5, cfresh, 1, 0));
    float out[20];
    EXPECT_OK(nnt_tensor_copy_to_host(cfresh, out, sizeof out));
    for (int i = 0; i < 20; i++)   /* 6 + 0.5 * 6 */
        ck_assert_float_eq(out[i], 9.0f);

    EXPECT_OK(nnt_tensor_destroy(ai));
    EXPECT_OK(nnt_tensor_destroy(fresh));
    EXPECT_OK(nnt_tensor_destroy(cfresh));
    EXPECT_OK(nnt_tensor_destroy(a));
    EXPECT_OK(nnt_tensor_destroy(b));
    EXPECT_OK(nnt_tensor_destroy(c));
}
END_TEST

START_TEST(bad_epilogue)
{
    const char *fn = "nnt_tensor_gemm_ex";
    nnt_tensor *a = filled(3, (int64_t[]){2, 4, 6}, (int64_t[]){1, 2, 6});
    nnt_tensor *b = filled(2, (int64_t[]){6, 5}, (int64_t[]){6, 2});
    nnt_tensor *c = filled(3, (int64_t[]){2, 4, 5}, (int64_t[]){1, 2, 2});
    nnt_tensor *aux = filled(3, (int64_t[]){2, 4, 5}, (int64_t[]){1, 2, 2});
    nnt_tensor *aux_t = filled(3, (int64_t[]){2, 4, 5}, (int64_t[]){2, 2, 2});
    nnt_tensor *bias = filled(1, (int64_t[]){5}, (int64_t[]){2});
    nnt_tensor *bias_t = filled(1, (int64_t[]){5}, (int64_t[]){3});
    nnt_tensor *bias_n = filled(1, (int64_t[]){4}, (int64_t[]){2});
    nnt_tensor *bias_2 = filled(2, (int64_t[]){1, 5}, (int64_t[]){1, 2});
    nnt_tensor *aux_fresh, *bias_i;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 3, (int64_t[]){2, 4, 5}, (int64_t[]){1, 2, 2},
                                &aux_fresh));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_INT32, 1, (int64_t[]){5}, (int64_t[]){2}, &bias_i));
    EXPECT_OK(nnt_tensor_fill(bias_i, 0));
    nnt_trans N = NNT_NOTRANS;

    EXPECT_OK(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS, bias, NULL));
    EXPECT_OK(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS_GELU, NULL,
                                 aux_fresh));   /* aux is only written */
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS, NULL,
                                          NULL), NNT_E_INVAL, fn, "bias is NULL");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS_GELU,
                                          bias, NULL), NNT_E_INVAL, fn, "aux is NULL");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU, NULL,
                                          NULL), NNT_E_INVAL, fn, "aux is NULL");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_NONE, bias,
                                          NULL), NNT_E_INVAL, fn, "must be NULL");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU, bias,
                                          aux), NNT_E_INVAL, fn, "must be NULL");
    /* the exact GELU's epilogues take the same operands */
    EXPECT_OK(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS_GELU_ERF, NULL,
                                 aux_fresh));
    EXPECT_OK(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU_ERF, NULL, aux));
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS_GELU_ERF,
                                          bias, NULL), NNT_E_INVAL, fn, "aux is NULL");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU_ERF,
                                          NULL, NULL), NNT_E_INVAL, fn, "aux is NULL");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU_ERF,
                                          bias, aux), NNT_E_INVAL, fn,
                       "NNT_EPILOGUE_DGELU_ERF");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU_ERF,
                                          NULL, c), NNT_E_INVAL, fn, "aux must not be C");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS_GELU_ERF,
                                          NULL, b), NNT_E_SHAPE, fn, "aux");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, (nnt_epilogue)9, NULL,
                                          NULL), NNT_E_INVAL, fn, "epilogue");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS, bias_t,
                                          NULL), NNT_E_SHAPE, fn, "tiling");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS, bias_n,
                                          NULL), NNT_E_SHAPE, fn, "bias");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS, bias_2,
                                          NULL), NNT_E_SHAPE, fn, "bias has 2 dimensions");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS, bias_i,
                                          NULL), NNT_E_SHAPE, fn, "NNT_FP32");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU, NULL,
                                          aux_t), NNT_E_SHAPE, fn, "aux");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU, NULL,
                                          c), NNT_E_INVAL, fn, "aux must not be C");
    EXPECT_FAIL_NAMING(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_BIAS_GELU,
                                          NULL, a), NNT_E_SHAPE, fn, "aux");
    nnt_tensor *aux_unread;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 3, (int64_t[]){2, 4, 5}, (int64_t[]){1, 2, 2},
                                &aux_unread));
    EXPECT_FAIL_MSG(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU, NULL,
                                       aux_unread), NNT_E_STATE, fn);
    EXPECT_FAIL_MSG(nnt_tensor_gemm_ex(N, N, 1, a, b, 0, c, 1, 0, NNT_EPILOGUE_DGELU_ERF, NULL,
                                       aux_unread), NNT_E_STATE, fn);

    nnt_tensor *tensors[] = {a, b, c, aux, aux_t, bias, bias_t, bias_n, bias_2, aux_fresh,
                             bias_i, aux_unread};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        EXPECT_OK(nnt_tensor_destroy(tensors[i]));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops_gemm");
    TCase *tc = tcase_create("gemm");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, matches_reference, 0, NCASES * 4);
    tcase_add_test(tc, deterministic);
    tcase_add_test(tc, many_tasks);
    tcase_add_loop_test(tc, erf_epilogues_match_ops, 0, NCASES * 4);
    tcase_add_loop_test(tc, reduced_precision, 0, NCASES * 8);
    tcase_add_test(tc, precision_setting);
    tcase_add_loop_test(tc, bf16_operands, 0, NCASES * 4);
    tcase_add_test(tc, bad_shapes);
    tcase_add_test(tc, bad_dtype_and_state);
    tcase_add_test(tc, bad_epilogue);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
