/* SPDX-License-Identifier: MIT */
/* Tests of the nnt CPU kernels (cpu/nnt_cpu.h) against float64 references.
 *
 * Every kernel is compared with a straightforward double-precision reference on random
 * inputs of awkward sizes. Backward kernels are compared either directly with central
 * finite differences of a double reference forward, or with an analytic double reference
 * that is itself checked against finite differences here.
 *
 * LayerNorm is also run on rows of variance at most a few times eps, where eps sets rstd.
 *
 * Tolerances: |got - ref| <= tol (lo + |ref|) elementwise, lo per check (0: relative,
 * max|ref|: normwise, a fixed floor where results cancel to near 0); GELU's forward is
 * checked relative to the condition number of its float evaluation (expect_gelu_close).
 * Every tol (TOL_* below) is about 10x the largest error measured for its check on Zen 3
 * with BLIS zen3/haswell/generic: 5e-7 .. 2e-5 for the kernels (errors 5e-8 .. 1.9e-6),
 * 1.2e-10 .. 4e-10 for the float64 references vs finite differences; fills, copies, the
 * embedding gather, bias addition and broadcast addition are bit-exact.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nnt_cpu.h"
#include "testutil.h" /* test_tol_note */

/* A second copy of the attention kernels in which every malloc fails, so that the
 * scratch-free fallback paths are tested too. */
static void *failing_malloc(size_t n)
{
    (void)n;
    return NULL;
}
#define malloc failing_malloc
#define nnt_cpu_attn_fwd_block_f32 noscratch_attn_fwd_block
#define nnt_cpu_attn_fwd_finalize_f32 noscratch_attn_fwd_finalize
#define nnt_cpu_attn_bwd_prep_f32 noscratch_attn_bwd_prep
#define nnt_cpu_attn_bwd_block_f32 noscratch_attn_bwd_block
#define nnt_cpu_attn_fwd_gqa_f32 noscratch_attn_fwd_gqa
#define nnt_cpu_attn_bwd_gqa_f32 noscratch_attn_bwd_gqa
#define nnt_cpu_attn_fwd_window_f32 noscratch_attn_fwd_window
#define nnt_cpu_attn_bwd_window_f32 noscratch_attn_bwd_window
#define nnt_cpu_attn_fwd_packed_f32 noscratch_attn_fwd_packed
#define nnt_cpu_attn_bwd_packed_f32 noscratch_attn_bwd_packed
#define nnt_cpu_attn_fwd_band_f32 noscratch_attn_fwd_band
#define nnt_cpu_attn_bwd_band_f32 noscratch_attn_bwd_band
#define nnt_cpu_attn_sink_fwd_f32 noscratch_attn_sink_fwd
#define nnt_cpu_attn_sink_bwd_f32 noscratch_attn_sink_bwd
#undef NNT_CPU_H /* attention.c re-includes the header: prototypes under the new names */
#include "../cpu/attention.c"
#undef malloc
#undef nnt_cpu_attn_fwd_block_f32
#undef nnt_cpu_attn_fwd_finalize_f32
#undef nnt_cpu_attn_bwd_prep_f32
#undef nnt_cpu_attn_bwd_block_f32
#undef nnt_cpu_attn_fwd_gqa_f32
#undef nnt_cpu_attn_bwd_gqa_f32
#undef nnt_cpu_attn_fwd_window_f32
#undef nnt_cpu_attn_bwd_window_f32
#undef nnt_cpu_attn_fwd_packed_f32
#undef nnt_cpu_attn_bwd_packed_f32
#undef nnt_cpu_attn_fwd_band_f32
#undef nnt_cpu_attn_bwd_band_f32
#undef nnt_cpu_attn_sink_fwd_f32
#undef nnt_cpu_attn_sink_bwd_f32

/* Tolerances: each about 10x the largest error measured for its check (tests/tolerances.sh)
 * on Zen 3 under the BLIS kernel sets zen3, haswell and generic; the errors are the same
 * under all three except where two figures are given (zen3 = haswell / generic). The
 * error of a check is max |got - ref| / (lo + |ref|) with lo as passed to expect_close
 * (0: relative, max|ref|: normwise, "norm" below), or as described at expect_gelu_close. */
#define TOL_SCALE 1e-6           /* relative; measured 9.5e-8 */
#define TOL_AXPBY 2e-5           /* lo 0.01 (cancellation); measured 1.9e-6 */
#define TOL_GELU_FWD 1.5e-6      /* relative / (1 + |2u|); measured 1.5e-7 */
#define TOL_GELU_BWD 1.7e-5      /* lo 0.1; measured 1.7e-6 (1 - sigmoid rounded, x > 3) */
#define TOL_BIAS_GELU_OUT 1.2e-6 /* as gelu_fwd; measured 1.2e-7 */
/* The exact GELU (erf form): relative, with a floor of 1e-30 for the deep tail (|ref| +
 * 1e-30); its gradient relative to the size of its terms |dy| (|Phi| + |x phi|) (+ 1e-30),
 * since Phi + x phi cancels at its zero (x ~ -0.75). Over every float in [-16, 16] the
 * kernels' errors are at most 5.5e-7 (gelu) and 5.3e-7 (gelu'), cpu/elementwise.c. */
#define TOL_GELU_ERF_FWD 5.5e-6    /* measured 5.5e-7 (at x = 0.0045) */
#define TOL_GELU_ERF_BWD 6e-6      /* measured 5.7e-7 */
#define TOL_BIAS_GELU_ERF_OUT 4e-6 /* as gelu_erf_fwd; measured 3.8e-7 */
#define TOL_FD_GELU_ERF 1.3e-8     /* analytic float64 gelu' vs central differences (h 1e-4),
                                    * relative to 1 + |ref|; measured 1.3e-9 */
#define TOL_SUM_OUTER 6e-7       /* lo 0.1; measured 5.6e-8 */
#define TOL_SUMSQ 5e-7           /* relative; measured 5.2e-8 */
#define TOL_GEMM 2.4e-6          /* norm; measured 2.4e-7 */
#define TOL_FD_LN_DX 3e-10       /* norm, float64 vs central differences; measured 3.2e-11 */
#define TOL_FD_LN_DG 1.2e-10     /* measured 1.2e-11 */
#define TOL_FD_LN_DB 1.8e-10     /* measured 1.8e-11 */
#define TOL_LN_Y 3e-6            /* norm; measured 2.7e-7 */
#define TOL_LN_MEAN 6e-7         /* relative; measured 5.9e-8 */
#define TOL_LN_RSTD 5e-7         /* relative; measured 5.3e-8 */
#define TOL_LN_DX 3e-6           /* norm; measured 3.2e-7 */
#define TOL_LN_DG 1.5e-6         /* norm; measured 1.5e-7 */
#define TOL_LN_DB 7e-7           /* norm; measured 6.9e-8 */
#define TOL_LNS_Y 2.5e-6         /* small variance, norm; measured 2.5e-7 */
#define TOL_LNS_RSTD 5e-7        /* relative; measured 5.0e-8 */
#define TOL_LNS_DX 7e-7          /* norm; measured 7.2e-8 */
#define TOL_FD_ATTN_DQ 4e-10     /* norm, float64 vs central differences; measured 4.0e-11 */
#define TOL_FD_ATTN_DK 3.5e-10   /* measured 3.5e-11 */
#define TOL_FD_ATTN_DV 2.5e-10   /* measured 2.5e-11 */
#define TOL_ATTN_O 5e-6          /* norm; measured 4.7e-7 / 3.5e-7 */
#define TOL_ATTN_LSE 2.2e-6      /* lo 1; measured 2.2e-7 */
#define TOL_ATTN_DQ 3.3e-6       /* norm; measured 3.3e-7 */
#define TOL_ATTN_DK 3.6e-6       /* norm; measured 3.6e-7 */
#define TOL_ATTN_DV 3.7e-6       /* norm; measured 3.7e-7 */
#define TOL_MASKED_O 7e-7        /* norm; measured 6.4e-8 / 6.7e-8 */
#define TOL_MASKED_LSE 7e-7      /* lo 1; measured 7.0e-8 */
#define TOL_FD_XENT 4e-10        /* norm, float64 vs central differences; measured 3.7e-11 */
#define TOL_XENT_LOSS 8e-6       /* lo 0.1; measured 7.6e-7 */
#define TOL_XENT_DX 1.4e-5       /* lo 0.01; measured 1.4e-6 */
#define TOL_XENT_SMOOTH_LOSS 1.7e-6 /* eps 0.3, lo 0.1; measured 1.65e-7 */
#define TOL_XENT_SMOOTH_DX 7.7e-6   /* lo 0.01; measured 7.7e-7 */
#define TOL_EMB_SCATTER 1.6e-5   /* lo 0.1; measured 1.6e-6 */
#define TOL_ADAM_P 1.2e-6        /* norm; measured 1.2e-7 */
#define TOL_ADAM_M 1e-6          /* norm; measured 1.0e-7 */
#define TOL_ADAM_V 1e-6          /* norm; measured 1.1e-7 */
#define TOL_SGD_P 7e-7           /* norm; measured 7.2e-8 */
#define TOL_SGD_BUF 9e-7         /* norm; measured 8.7e-8 */

static const int64_t SIZES[] = {1, 3, 7, 13, 37, 61, 130};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

/* ---- helpers -------------------------------------------------------------------------- */

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
    rng_state = s * 0x9E3779B97F4A7C15ull + 1;
}

/* splitmix64 */
static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi), never exactly 0 */
static float rng_uniform(float lo, float hi)
{
    double u = (double)(rng_u64() >> 11) * (1.0 / 9007199254740992.0);
    float x = (float)(lo + (hi - lo) * u);
    return x == 0.0f ? 0.125f : x;
}

static float *rand_f(int64_t n, float lo, float hi)
{
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_uniform(lo, hi);
    return x;
}

static double *alloc_d(int64_t n)
{
    double *x = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    ck_assert_ptr_nonnull(x);
    return x;
}

static float *alloc_f(int64_t n)
{
    float *x = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    ck_assert_ptr_nonnull(x);
    return x;
}

static double *to_d(int64_t n, const float *x)
{
    double *y = alloc_d(n);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

static float *dup_f(int64_t n, const float *x)
{
    float *y = alloc_f(n);
    memcpy(y, x, (size_t)n * sizeof(float));
    return y;
}

static double *dup_d(int64_t n, const double *x)
{
    double *y = alloc_d(n);
    memcpy(y, x, (size_t)n * sizeof(double));
    return y;
}

static double maxabs(int64_t n, const double *x)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* |got - ref| <= rtol (lo + |ref|) for every element (NaN fails): the error is
 * max |got - ref| / (lo + |ref|), reported per call site (NNT_TOL_REPORT) and compared with
 * rtol. lo = 0: relative; lo = max|ref|: normwise; rtol = 0: exact. */
static double close_err(int64_t n, const float *gotf, const double *gotd, const double *ref,
                        double lo, int64_t *worst_i)
{
    double worst = 0.0;
    *worst_i = 0;
    for (int64_t i = 0; i < n; i++) {
        double got = gotf ? (double)gotf[i] : gotd[i];
        double d = fabs(got - ref[i]), den = lo + fabs(ref[i]);
        double e = den > 0 ? d / den : (d == 0 ? 0.0 : INFINITY);
        if (!(e <= worst)) { /* also NaN */
            worst = e;
            *worst_i = i;
            if (e != e)
                break;
        }
    }
    return worst;
}

#define expect_close(...) expect_close_at(__LINE__, __VA_ARGS__)
static void expect_close_at(int line, const char *what, int64_t n, const float *got,
                            const double *ref, double rtol, double lo)
{
    int64_t i;
    double err = close_err(n, got, NULL, ref, lo, &i);
    test_tol_note(__FILE__, line, err, rtol);
    ck_assert_msg(err <= rtol,
                  "%s: element %lld got %.9g expected %.9g (error %.3g, tolerance %.3g)",
                  what, (long long)i, n ? (double)got[i] : 0.0, n ? ref[i] : 0.0, err, rtol);
}

/* normwise: lo = max|ref| */
#define expect_close_norm(what, n, got, ref, rtol)                                            \
    expect_close_at(__LINE__, what, n, got, ref, rtol, maxabs(n, ref))

/* double results (the references' gradients vs finite differences), normwise */
#define expect_close_dd(...) expect_close_dd_at(__LINE__, __VA_ARGS__)
static void expect_close_dd_at(int line, const char *what, int64_t n, const double *got,
                               const double *ref, double rtol)
{
    int64_t i;
    double err = close_err(n, NULL, got, ref, maxabs(n, ref), &i);
    test_tol_note(__FILE__, line, err, rtol);
    ck_assert_msg(err <= rtol,
                  "%s: element %lld got %.12g expected %.12g (error %.3g, tolerance %.3g)",
                  what, (long long)i, n ? got[i] : 0.0, n ? ref[i] : 0.0, err, rtol);
}

/* Three uneven blocks covering [0, n): bounds b[0..3]; returns the number of blocks. */
static int split3(int64_t n, int64_t *b)
{
    int64_t c1 = n / 5, c2 = n / 5 + (n * 3) / 5;
    int nb = 0;
    b[nb++] = 0;
    if (c1 > 0)
        b[nb++] = c1;
    if (c2 > c1 && c2 < n)
        b[nb++] = c2;
    b[nb] = n;
    return nb;
}

/* Block boundaries for splitting mode 0: whole, 1: three uneven, 2: blocks of 1.
 * b needs room for n + 1 entries. */
static int make_split(int mode, int64_t n, int64_t *b)
{
    if (mode == 0) {
        b[0] = 0;
        b[1] = n;
        return 1;
    }
    if (mode == 1)
        return split3(n, b);
    for (int64_t i = 0; i <= n; i++)
        b[i] = i;
    return (int)n;
}

/* ---- elementwise ------------------------------------------------------------------------- */

static double ref_gelu(double x)
{
    const double k0 = 0.79788456080286535588, k1 = 0.044715; /* sqrt(2/pi) */
    return 0.5 * x * (1.0 + tanh(k0 * (x + k1 * x * x * x)));
}

/* The exact GELU in float64: Phi(x) = 0.5 erfc(-x / sqrt 2) (erfc keeps the relative
 * accuracy of the tail), phi(x) = exp(-x^2 / 2) / sqrt(2 pi). */
static double ref_normal_cdf(double x)
{
    return 0.5 * erfc(-x * 0.70710678118654752440);
}

static double ref_normal_pdf(double x)
{
    return exp(-0.5 * x * x) * 0.39894228040143267794;
}

static double ref_gelu_erf(double x)
{
    return x * ref_normal_cdf(x);
}

static double ref_gelu_erf_grad(double x)
{
    return ref_normal_cdf(x) + x * ref_normal_pdf(x);
}

/* max |got - ref| / (scale + 1e-30) over n, reported at line (NNT_TOL_REPORT) and checked */
#define expect_scaled(...) expect_scaled_at(__LINE__, __VA_ARGS__)
static void expect_scaled_at(int line, const char *what, int64_t n, const float *x,
                             const float *got, const double *ref, const double *scale,
                             double tol)
{
    double worst = 0.0;
    int64_t iw = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (scale[i] + 1e-30);
        if (!(e <= worst)) {
            worst = e;
            iw = i;
            if (e != e)
                break;
        }
    }
    test_tol_note(__FILE__, line, worst, tol);
    ck_assert_msg(worst <= tol, "%s: x %.9g got %.9g expected %.9g (error %.3g, tolerance %.3g)",
                  what, n ? (double)x[iw] : 0.0, n ? (double)got[iw] : 0.0, n ? ref[iw] : 0.0,
                  worst, tol);
}

/* gelu(x) = x sigmoid(2u), u = k0 (x + k1 x^3): sigmoid(2u) evaluated in float has a
 * relative error of about |2u| ulp where u << 0 (the rounding of 2u, amplified by exp),
 * so the relative error of gelu grows to ~5e-6 at x = -6 while it is ~1e-7 for x > 0.
 * The error checked is the relative error over that condition number,
 * max |got - ref| / (|ref| (1 + |2u|)) (|ref| + 1e-30 for the deep tail, where the float
 * result underflows to 0): uniform over x, and a change of the coefficient k1 shows in it at
 * its full size k0 |x|^3 dk1 2 (1 - sigmoid(2u)) / (1 + |2u|) (about 1e-4 at x = -6 for
 * 0.044715 -> 0.04471). */
#define expect_gelu_close(...) expect_gelu_close_at(__LINE__, __VA_ARGS__)
static void expect_gelu_close_at(int line, const char *what, int64_t n, const double *x,
                                 const float *got, const double *ref, double tol)
{
    const double k0 = 0.79788456080286535588, k1 = 0.044715;
    double worst = 0.0;
    int64_t iw = 0;
    for (int64_t i = 0; i < n; i++) {
        double u2 = 2 * k0 * (x[i] + k1 * x[i] * x[i] * x[i]);
        double e = fabs((double)got[i] - ref[i]) / ((fabs(ref[i]) + 1e-30) * (1 + fabs(u2)));
        if (!(e <= worst)) {
            worst = e;
            iw = i;
            if (e != e)
                break;
        }
    }
    test_tol_note(__FILE__, line, worst, tol);
    ck_assert_msg(worst <= tol, "%s: x %.9g got %.9g expected %.9g (error %.3g, tolerance %.3g)",
                  what, n ? x[iw] : 0.0, n ? (double)got[iw] : 0.0, n ? ref[iw] : 0.0, worst,
                  tol);
}

START_TEST(test_fill_scale_axpby)
{
    rng_seed(1);
    for (int si = 0; si < NSIZES; si++) {
        int64_t n = SIZES[si];
        float *x = rand_f(n, -2, 2), *y = rand_f(n, -2, 2);
        double *ref = alloc_d(n);

        nnt_cpu_fill_f32(n, 1.5f, y);
        for (int64_t i = 0; i < n; i++)
            ref[i] = 1.5;
        expect_close("fill", n, y, ref, 0.0, 0.0);

        float *z = dup_f(n, x);
        nnt_cpu_scale_f32(n, -0.3f, z);
        for (int64_t i = 0; i < n; i++)
            ref[i] = -0.3 * x[i];
        expect_close("scale", n, z, ref, TOL_SCALE, 0.0);

        static const float betas[] = {0.0f, 1.0f, 0.3f};
        for (int bi = 0; bi < 3; bi++) {
            float beta = betas[bi];
            float *y0 = rand_f(n, -2, 2), *yy = dup_f(n, y0);
            if (beta == 0.0f)
                for (int64_t i = 0; i < n; i++)
                    yy[i] = NAN; /* must not be read */
            /* axpbyz into a third array: axpby's bits (its y left as it was) */
            float *zz = rand_f(n, -2, 2);
            nnt_cpu_axpbyz_f32(n, 0.7f, x, beta, yy, zz);
            nnt_cpu_axpby_f32(n, 0.7f, x, beta, yy);
            for (int64_t i = 0; i < n; i++)
                ref[i] = 0.7 * x[i] + (beta == 0.0f ? 0.0 : (double)beta * y0[i]);
            expect_close("axpby", n, yy, ref, TOL_AXPBY, 0.01);
            ck_assert_msg(n == 0 || !memcmp(zz, yy, (size_t)n * sizeof *zz),
                          "axpbyz (beta %g, n %lld): not axpby's bits", beta, (long long)n);
            /* and in place (z == y) */
            memcpy(zz, y0, (size_t)n * sizeof *zz);
            nnt_cpu_axpbyz_f32(n, 0.7f, x, beta, zz, zz);
            ck_assert_msg(n == 0 || !memcmp(zz, yy, (size_t)n * sizeof *zz),
                          "axpbyz in place (beta %g): not axpby's bits", beta);
            free(zz);
            free(y0);
            free(yy);
        }
        free(x);
        free(y);
        free(z);
        free(ref);
    }
}
END_TEST

START_TEST(test_gelu)
{
    rng_seed(2);
    const double h = 1e-4;
    for (int si = 0; si < NSIZES; si++) {
        int64_t n = SIZES[si] * 7;
        float *x = rand_f(n, -6, 6), *dy = rand_f(n, -1, 1), *y = alloc_f(n), *dx = alloc_f(n);
        double *ref = alloc_d(n);
        x[0] = -12.0f; /* deep in the tail, where 1 + tanh cancels */
        nnt_cpu_gelu_fwd_f32(n, x, y);
        for (int64_t i = 0; i < n; i++)
            ref[i] = ref_gelu(x[i]);
        double *xd = to_d(n, x);
        expect_gelu_close("gelu_fwd", n, xd, y, ref, TOL_GELU_FWD);
        free(xd);

        /* backward against central differences of the double forward */
        nnt_cpu_gelu_bwd_f32(n, x, dy, dx);
        for (int64_t i = 0; i < n; i++)
            ref[i] = dy[i] * (ref_gelu(x[i] + h) - ref_gelu(x[i] - h)) / (2 * h);
        expect_close("gelu_bwd", n, dx, ref, TOL_GELU_BWD, 0.1);
        /* in place gives the same bits */
        float *z = dup_f(n, x);
        nnt_cpu_gelu_fwd_f32(n, z, z);
        ck_assert(memcmp(z, y, (size_t)n * sizeof(float)) == 0);
        memcpy(z, dy, (size_t)n * sizeof(float));
        nnt_cpu_gelu_bwd_f32(n, x, z, z);
        ck_assert(memcmp(z, dx, (size_t)n * sizeof(float)) == 0);
        free(z);
        free(x);
        free(dy);
        free(y);
        free(dx);
        free(ref);
    }
}
END_TEST

/* gpt-oss's clamped SwiGLU against float64: alpha 1.3 and limit 0.8 (not gpt-oss's), gate
 * over [-4, 4] (above the limit, and far below -limit, which only the up clamp bounds), up
 * over [-2, 2] (beyond both limits and inside), the points at the limits themselves (no
 * gradient there, as torch.clamp's), the far tail (sigmoid 0), and in place. Relative
 * to lo + |ref|: the forward and dup lo 1e-3; dgate lo 0.1 (ds = s (1 + a (1 - s)) is 0 at
 * a ~ -1.28, where its sum cancels). */
#define TOL_SWIGLU_CLAMP_Y 3e-6    /* measured 3.1e-7 */
#define TOL_SWIGLU_CLAMP_DG 3e-6   /* measured 2.8e-7 */
#define TOL_SWIGLU_CLAMP_DU 3e-6   /* measured 2.9e-7 */
START_TEST(test_swiglu_clamp)
{
    rng_seed(41);
    const float alpha = 1.3f, limit = 0.8f;
    const double A = alpha, L = limit;   /* the kernels' float values */
    for (int si = 0; si < NSIZES; si++) {
        int64_t n = SIZES[si] * 7;
        float *g = rand_f(n, -4, 4), *u = rand_f(n, -2, 2), *dy = rand_f(n, -1, 1);
        float *y = alloc_f(n), *dg = alloc_f(n), *du = alloc_f(n);
        double *ry = alloc_d(n), *rdg = alloc_d(n), *rdu = alloc_d(n);
        int64_t above = 0, inside = 0, beyond = 0;
        g[0] = limit, u[0] = 0.5f;                  /* at the limits: no gradient through */
        if (n > 1)
            g[1] = 0.25f, u[1] = -limit;
        if (n > 2)
            g[2] = -0.5f, u[2] = limit;
        if (n > 3)
            g[3] = -80.0f, u[3] = 0.25f;            /* sigmoid(-104) = 0 in float */
        nnt_cpu_swiglu_clamp_fwd_f32(n, alpha, limit, g, u, y);
        nnt_cpu_swiglu_clamp_bwd_f32(n, alpha, limit, g, u, dy, dg, du);
        for (int64_t i = 0; i < n; i++) {
            double gc = fmin(g[i], L), uc = fmax(-L, fmin(u[i], L));
            double s = 1.0 / (1.0 + exp(-A * gc));
            ry[i] = gc * s * (uc + 1.0);
            rdg[i] = g[i] < L ? dy[i] * (uc + 1.0) * (s + A * gc * s * (1.0 - s)) : 0.0;
            rdu[i] = -L < u[i] && u[i] < L ? dy[i] * gc * s : 0.0;
            above += g[i] > L;
            beyond += u[i] > L || u[i] < -L;
            inside += u[i] > -L && u[i] < L;
        }
        if (n > 20)   /* the clamps bite: enough of each kind */
            ck_assert_msg(above > n / 8 && beyond > n / 8 && inside > n / 8,
                          "n %lld: %lld gates above, %lld ups beyond, %lld inside",
                          (long long)n, (long long)above, (long long)beyond, (long long)inside);
        expect_close("swiglu_clamp y", n, y, ry, TOL_SWIGLU_CLAMP_Y, 1e-3);
        expect_close("swiglu_clamp dgate", n, dg, rdg, TOL_SWIGLU_CLAMP_DG, 0.1);
        expect_close("swiglu_clamp dup", n, du, rdu, TOL_SWIGLU_CLAMP_DU, 1e-3);
        /* at the limits the gradients are exactly 0 */
        ck_assert(dg[0] == 0.0f);
        ck_assert(n < 2 || du[1] == 0.0f);
        ck_assert(n < 3 || du[2] == 0.0f);

        /* in place (y == gate, y == up; dgate == gate with dup == up; dgate == dy) gives the
         * same bits */
        float *z = dup_f(n, g), *w = dup_f(n, u);
        nnt_cpu_swiglu_clamp_fwd_f32(n, alpha, limit, z, u, z);
        ck_assert(memcmp(z, y, (size_t)n * sizeof(float)) == 0);
        nnt_cpu_swiglu_clamp_fwd_f32(n, alpha, limit, g, w, w);
        ck_assert(memcmp(w, y, (size_t)n * sizeof(float)) == 0);
        memcpy(z, g, (size_t)n * sizeof(float));
        memcpy(w, u, (size_t)n * sizeof(float));
        nnt_cpu_swiglu_clamp_bwd_f32(n, alpha, limit, z, w, dy, z, w);
        ck_assert(memcmp(z, dg, (size_t)n * sizeof(float)) == 0);
        ck_assert(memcmp(w, du, (size_t)n * sizeof(float)) == 0);
        memcpy(z, dy, (size_t)n * sizeof(float));
        nnt_cpu_swiglu_clamp_bwd_f32(n, alpha, limit, g, u, z, z, w);
        ck_assert(memcmp(z, dg, (size_t)n * sizeof(float)) == 0);
        free(z), free(w);
        free(g), free(u), free(dy), free(y), free(dg), free(du);
        free(ry), free(rdg), free(rdu);
    }
    /* NaN stays NaN (torch.clamp keeps it); +inf gates and +-inf ups are clamped; a -inf
     * gate gives -inf sigmoid(-inf) = -inf 0 = NaN, as in torch */
    const float sg[] = {NAN, 1.0f, INFINITY, -INFINITY, 0.5f};
    const float su[] = {0.5f, NAN, 0.5f, 0.5f, -INFINITY};
    float sy[5];
    nnt_cpu_swiglu_clamp_fwd_f32(5, alpha, limit, sg, su, sy);
    ck_assert(isnan(sy[0]) && isnan(sy[1]));
    ck_assert(fabs(sy[2] - L / (1.0 + exp(-A * L)) * 1.5) < 1e-6);
    ck_assert(isnan(sy[3]));
    ck_assert(fabs(sy[4] - 0.5 / (1.0 + exp(-A * 0.5)) * (1.0 - L)) < 1e-6);
}
END_TEST

/* The exact GELU against float64 erfc: random x over [-10, 10] (results down to 1e-23), the
 * worst point measured over all floats (x = 0.0045, where t ~ 1 and P's Horner sum rounds
 * most), the deep tail, and in place; the gradient also against central differences. */
START_TEST(test_gelu_erf)
{
    rng_seed(21);
    const double h = 1e-4;
    for (int si = 0; si < NSIZES; si++) {
        int64_t n = SIZES[si] * 7;
        float *x = rand_f(n, -10, 10), *dy = rand_f(n, -1, 1), *y = alloc_f(n), *dx = alloc_f(n);
        double *ref = alloc_d(n), *scale = alloc_d(n);
        x[0] = -12.5f; /* Phi ~ 4e-36: the tail's relative accuracy */
        if (n > 1)
            x[1] = 0.00450617261f;
        if (n > 2)
            x[2] = -0.75179195f; /* gelu' ~ 0 */
        nnt_cpu_gelu_erf_fwd_f32(n, x, y);
        for (int64_t i = 0; i < n; i++) {
            ref[i] = ref_gelu_erf(x[i]);
            scale[i] = fabs(ref[i]);
        }
        expect_scaled("gelu_erf_fwd", n, x, y, ref, scale, TOL_GELU_ERF_FWD);

        nnt_cpu_gelu_erf_bwd_f32(n, x, dy, dx);
        double fd = 0.0;
        for (int64_t i = 0; i < n; i++) {
            double g = ref_gelu_erf_grad(x[i]);
            double c = (ref_gelu_erf(x[i] + h) - ref_gelu_erf(x[i] - h)) / (2 * h);
            fd = fmax(fd, fabs(g - c) / (1.0 + fabs(g)));
            ref[i] = dy[i] * g;
            scale[i] = fabs(dy[i]) * (ref_normal_cdf(x[i]) + fabs(x[i] * ref_normal_pdf(x[i])));
        }
        test_tol_note(__FILE__, __LINE__, fd, TOL_FD_GELU_ERF);
        ck_assert_msg(fd <= TOL_FD_GELU_ERF, "gelu_erf' reference vs differences: %.3g", fd);
        expect_scaled("gelu_erf_bwd", n, x, dx, ref, scale, TOL_GELU_ERF_BWD);

        /* in place (y == x; dx == dy, dx == x) gives the same bits */
        float *z = dup_f(n, x);
        nnt_cpu_gelu_erf_fwd_f32(n, z, z);
        ck_assert(memcmp(z, y, (size_t)n * sizeof(float)) == 0);
        memcpy(z, dy, (size_t)n * sizeof(float));
        nnt_cpu_gelu_erf_bwd_f32(n, x, z, z);
        ck_assert(memcmp(z, dx, (size_t)n * sizeof(float)) == 0);
        memcpy(z, x, (size_t)n * sizeof(float));
        nnt_cpu_gelu_erf_bwd_f32(n, z, dy, z);
        ck_assert(memcmp(z, dx, (size_t)n * sizeof(float)) == 0);
        free(z);
        free(x);
        free(dy);
        free(y);
        free(dx);
        free(ref);
        free(scale);
    }

    /* infinities, huge values, signed zeros and NaN: no NaN from a number, the limits */
    static const float sx[] = {INFINITY, -INFINITY, 1e30f, -1e30f, 3e38f, -3e38f, 20.0f,
                               -20.0f, 0.0f, -0.0f, NAN};
    static const float sy[] = {INFINITY, 0.0f, 1e30f, 0.0f, 3e38f, 0.0f, 20.0f, 0.0f, 0.0f,
                               0.0f, NAN};
    static const float sg[] = {1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.5f, 0.5f, NAN};
    const int64_t ns = (int64_t)(sizeof sx / sizeof sx[0]);
    float one[sizeof sx / sizeof sx[0]], y[sizeof sx / sizeof sx[0]], g[sizeof sx / sizeof sx[0]];
    for (int64_t i = 0; i < ns; i++)
        one[i] = 1.0f;
    nnt_cpu_gelu_erf_fwd_f32(ns, sx, y);
    nnt_cpu_gelu_erf_bwd_f32(ns, sx, one, g);
    for (int64_t i = 0; i < ns; i++) {
        int nan = isnan(sx[i]);
        ck_assert_msg(nan ? isnan(y[i]) : y[i] == sy[i], "gelu_erf(%g) = %g, expected %g",
                      (double)sx[i], (double)y[i], (double)sy[i]);
        ck_assert_msg(nan ? isnan(g[i]) : g[i] == sg[i], "gelu_erf'(%g) = %g, expected %g",
                      (double)sx[i], (double)g[i], (double)sg[i]);
    }
    ck_assert(signbit(y[9]));   /* gelu(-0) = -0 */
}
END_TEST

START_TEST(test_bias_gelu)
{
    rng_seed(3);
    for (int si = 0; si < NSIZES; si++) {
        int64_t m = SIZES[si], n = SIZES[(si + 3) % NSIZES];
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            float *pre0 = rand_f(m * n, -3, 3), *bias = rand_f(n, -1, 1);
            float *pre = dup_f(m * n, pre0), *out = alloc_f(m * n);
            double *rpre = alloc_d(m * n), *rout = alloc_d(m * n);
            nnt_cpu_bias_gelu_f32(m, n, with_bias ? bias : NULL, pre, out);
            for (int64_t r = 0; r < m; r++)
                for (int64_t j = 0; j < n; j++) {
                    float p = pre0[r * n + j] + (with_bias ? bias[j] : 0.0f);
                    rpre[r * n + j] = p;
                    rout[r * n + j] = ref_gelu(p);
                }
            expect_close("bias_gelu pre", m * n, pre, rpre, 0.0, 0.0); /* the same float sum */
            expect_gelu_close("bias_gelu out", m * n, rpre, out, rout, TOL_BIAS_GELU_OUT);
            free(pre0);
            free(bias);
            free(pre);
            free(out);
            free(rpre);
            free(rout);
        }
    }
}
END_TEST

/* ---- broadcast add, column sums, sum of squares ------------------------------------------ */

/* nnt_cpu_bias_gelu_erf_f32: the same float sum into pre as bias_gelu, out against float64 */
START_TEST(test_bias_gelu_erf)
{
    rng_seed(22);
    for (int si = 0; si < NSIZES; si++) {
        int64_t m = SIZES[si], n = SIZES[(si + 3) % NSIZES];
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            float *pre0 = rand_f(m * n, -5, 5), *bias = rand_f(n, -1, 1);
            float *pre = dup_f(m * n, pre0), *out = alloc_f(m * n);
            double *rpre = alloc_d(m * n), *rout = alloc_d(m * n), *scale = alloc_d(m * n);
            nnt_cpu_bias_gelu_erf_f32(m, n, with_bias ? bias : NULL, pre, out);
            for (int64_t r = 0; r < m; r++)
                for (int64_t j = 0; j < n; j++) {
                    float p = pre0[r * n + j] + (with_bias ? bias[j] : 0.0f);
                    rpre[r * n + j] = p;
                    rout[r * n + j] = ref_gelu_erf(p);
                    scale[r * n + j] = fabs(rout[r * n + j]);
                }
            expect_close("bias_gelu_erf pre", m * n, pre, rpre, 0.0, 0.0);
            expect_scaled("bias_gelu_erf out", m * n, pre, out, rout, scale,
                          TOL_BIAS_GELU_ERF_OUT);
            free(pre0);
            free(bias);
            free(pre);
            free(out);
            free(rpre);
            free(rout);
            free(scale);
        }
    }
}
END_TEST

START_TEST(test_add_bcast_sum_outer)
{
    rng_seed(4);
    const double h = 1e-3;
    for (int si = 0; si < NSIZES; si++) {
        int64_t outer = SIZES[si], inner = SIZES[(si + 2) % NSIZES] * 3, ldy = inner + 5;
        float *x = rand_f(inner, -1, 1), *y0 = rand_f(outer * ldy, -1, 1);
        float *y = dup_f(outer * ldy, y0), *acc0 = rand_f(inner, -1, 1);
        float *acc = dup_f(inner, acc0), *w = rand_f(outer * ldy, -1, 1);
        double *ref = alloc_d(outer * ldy);

        nnt_cpu_add_bcast_f32(outer, inner, x, y, ldy);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < ldy; i++) /* padding columns stay untouched */
                ref[o * ldy + i] = (float)((double)y0[o * ldy + i] + (i < inner ? x[i] : 0.0));
        expect_close("add_bcast", outer * ldy, y, ref, 0.0, 0.0); /* one float addition: exact */

        /* sum_outer is the gradient of L = sum(w .* add_bcast(x)) w.r.t. x: central
         * differences of the double forward, plus the non-zero starting value of acc */
        nnt_cpu_sum_outer_f32(outer, inner, w, ldy, acc);
        for (int64_t i = 0; i < inner; i++) {
            double lp = 0.0, lm = 0.0;
            for (int64_t o = 0; o < outer; o++) {
                double wo = w[o * ldy + i], yo = y0[o * ldy + i];
                lp += wo * (yo + x[i] + h);
                lm += wo * (yo + x[i] - h);
            }
            ref[i] = acc0[i] + (lp - lm) / (2 * h);
        }
        expect_close("sum_outer", inner, acc, ref, TOL_SUM_OUTER, 0.1);
        free(x);
        free(y0);
        free(y);
        free(acc0);
        free(acc);
        free(w);
        free(ref);
    }
}
END_TEST

/* DoRA's per-feature kernels against double references: mul_bcast per column and per row
 * (in place too), dot_cols with a factor, dot_rows in float and bf16, rsqrt_mul */
START_TEST(test_feature_products)
{
    rng_seed(6);
    for (int si = 0; si < NSIZES; si++) {
        int64_t outer = SIZES[si], inner = SIZES[(si + 2) % NSIZES] * 3, n = outer * inner;
        float *x = rand_f(n, -1, 1), *y = rand_f(n, -1, 1), *h = rand_f(inner, 0.5, 2);
        float *hr = rand_f(outer, 0.5, 2), *z0 = rand_f(n, -1, 1), *z = dup_f(n, z0);
        float *acc0 = rand_f(inner, -1, 1), *acc = dup_f(inner, acc0);
        float *racc0 = rand_f(outer, -1, 1), *racc = dup_f(outer, racc0);
        double *ref = alloc_d(n);
        /* z += x (h - 1): one product, one add (exact in double, rounded once each) */
        nnt_cpu_mul_bcast_f32(outer, inner, x, h, -1.0f, 0, 1, z);
        for (int64_t k = 0; k < n; k++)
            ref[k] = (float)(z0[k] + (double)(float)(x[k] * (h[k % inner] - 1.0f)));
        expect_close("mul_bcast", n, z, ref, 0.0, 0.0);
        float *w = dup_f(n, x);   /* in place, per row: w = x hr */
        nnt_cpu_mul_bcast_f32(outer, inner, w, hr, 0.0f, 1, 0, w);
        for (int64_t k = 0; k < n; k++)
            ref[k] = (float)((double)x[k] * hr[k / inner]);
        expect_close("mul_bcast by row", n, w, ref, 0.0, 0.0);
        /* acc += h sum_o x y */
        nnt_cpu_dot_cols_f32(outer, inner, x, y, h, acc);
        for (int64_t i = 0; i < inner; i++) {
            double sum = 0.0;
            for (int64_t o = 0; o < outer; o++)
                sum += (double)x[o * inner + i] * y[o * inner + i];
            ref[i] = acc0[i] + h[i] * sum;
        }
        expect_close("dot_cols", inner, acc, ref, TOL_SUM_OUTER, 0.1);
        /* acc += sum_i x y per row, float and bf16 (the values rounded to bf16 first) */
        nnt_cpu_dot_rows_f32(outer, inner, x, y, racc);
        for (int64_t o = 0; o < outer; o++) {
            double sum = 0.0;
            for (int64_t i = 0; i < inner; i++)
                sum += (double)x[o * inner + i] * y[o * inner + i];
            ref[o] = racc0[o] + sum;
        }
        expect_close("dot_rows", outer, racc, ref, TOL_SUM_OUTER, 0.1);
        uint16_t *xb = malloc((size_t)n * sizeof *xb), *yb = malloc((size_t)n * sizeof *yb);
        nnt_cpu_f32_to_bf16(n, x, xb);
        nnt_cpu_f32_to_bf16(n, y, yb);
        memcpy(racc, racc0, (size_t)outer * sizeof *racc);
        nnt_cpu_dot_rows_bf16(outer, inner, xb, yb, racc);
        for (int64_t o = 0; o < outer; o++) {
            double sum = 0.0;
            for (int64_t i = 0; i < inner; i++)
                sum += (double)nnt_cpu_bf16_value(xb[o * inner + i]) *
                       nnt_cpu_bf16_value(yb[o * inner + i]);
            ref[o] = racc0[o] + sum;
        }
        expect_close("dot_rows bf16", outer, racc, ref, TOL_SUM_OUTER, 0.1);
        /* out = m / sqrt(n2), and 1 / sqrt(n2) */
        float *n2 = rand_f(inner, 0.1, 9), *out = alloc_f(inner);
        nnt_cpu_rsqrt_mul_f32(inner, h, n2, out);
        for (int64_t i = 0; i < inner; i++)
            ref[i] = h[i] / sqrt((double)n2[i]);
        expect_close("rsqrt_mul", inner, out, ref, 6e-8, 0.0);   /* one rounding: 6e-8 */
        nnt_cpu_rsqrt_mul_f32(inner, NULL, n2, out);
        for (int64_t i = 0; i < inner; i++)
            ref[i] = 1.0 / sqrt((double)n2[i]);
        expect_close("rsqrt_mul without m", inner, out, ref, 6e-8, 0.0);
        free(x), free(y), free(h), free(hr), free(z0), free(z), free(acc0), free(acc);
        free(racc0), free(racc), free(ref), free(w), free(xb), free(yb), free(n2), free(out);
    }
    /* the squares of NF4 rows: rows of 48 (blocks of 64 across rows) and of 128, against the
     * float dequantization summed in double */
    for (int c = 0; c < 2; c++) {
        int64_t outer = c ? 3 : 8, inner = c ? 128 : 48, n = outer * inner;
        float *x = rand_f(n, -2, 2), *deq = alloc_f(n), *absmax = alloc_f(n / NNT_NF4_BLOCK);
        float *acc0 = rand_f(outer, -1, 1), *acc = dup_f(outer, acc0);
        uint8_t *codes = malloc((size_t)n / 2);
        double *ref = alloc_d(outer);
        nnt_cpu_nf4_quantize(n, x, 0, codes, absmax);
        nnt_cpu_nf4_dequantize(n, codes, absmax, deq, 0);
        nnt_cpu_nf4_sumsq_rows(outer, inner, codes, absmax, acc);
        for (int64_t o = 0; o < outer; o++) {
            ref[o] = acc0[o];
            for (int64_t i = 0; i < inner; i++)
                ref[o] += (double)deq[o * inner + i] * deq[o * inner + i];
        }
        expect_close("nf4_sumsq_rows", outer, acc, ref, TOL_SUM_OUTER, 0.1);
        free(x), free(deq), free(absmax), free(acc0), free(acc), free(codes), free(ref);
    }
}
END_TEST

START_TEST(test_sumsq)
{
    rng_seed(5);
    for (int si = 0; si < NSIZES; si++) {
        int64_t n = SIZES[si] * 11;
        float *x = rand_f(n, -3, 3);
        float acc = 2.5f;
        double ref = 2.5;
        for (int64_t i = 0; i < n; i++)
            ref += (double)x[i] * x[i];
        nnt_cpu_sumsq_f32(n, x, &acc);
        expect_close("sumsq", 1, &acc, &ref, TOL_SUMSQ, 0.0);
        free(x);
    }
}
END_TEST

/* ---- copy_box ---------------------------------------------------------------------------- */

/* Reference strided copy, one element at a time in odometer order. */
static void ref_copy_box(int ndim, const int64_t *shape, size_t es, const char *src,
                         const int64_t *ss, char *dst, const int64_t *ds)
{
    int64_t idx[8] = {0}, total = 1;
    for (int d = 0; d < ndim; d++)
        total *= shape[d];
    for (int64_t e = 0; e < total; e++) {
        int64_t so = 0, doff = 0, rem = e;
        for (int d = ndim - 1; d >= 0; d--) {
            idx[d] = rem % shape[d];
            rem /= shape[d];
            so += idx[d] * ss[d];
            doff += idx[d] * ds[d];
        }
        memcpy(dst + doff * (int64_t)es, src + so * (int64_t)es, es);
    }
}

static void fill_bytes(size_t n, unsigned char *p)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(rng_u64() & 0xff);
}

/* Copy a box, compare byte for byte with the reference (also the bytes outside it). */
static void check_copy(const char *what, int ndim, const int64_t *shape, size_t es,
                       size_t src_elems, const int64_t *ss, int64_t soff, size_t dst_elems,
                       const int64_t *ds, int64_t doff)
{
    unsigned char *src = malloc(src_elems * es), *got = malloc(dst_elems * es);
    unsigned char *ref = malloc(dst_elems * es);
    ck_assert(src && got && ref);
    fill_bytes(src_elems * es, src);
    fill_bytes(dst_elems * es, got);
    memcpy(ref, got, dst_elems * es);
    nnt_cpu_copy_box(ndim, shape, es, src + soff * (int64_t)es, ss, got + doff * (int64_t)es,
                     ds);
    ref_copy_box(ndim, shape, es, (const char *)src + soff * (int64_t)es, ss,
                 (char *)ref + doff * (int64_t)es, ds);
    ck_assert_msg(memcmp(got, ref, dst_elems * es) == 0, "copy_box %s (elsize %zu)", what, es);
    free(src);
    free(got);
    free(ref);
}

/* contiguous row-major strides of shape */
static void row_major(int ndim, const int64_t *shape, int64_t *st)
{
    st[ndim - 1] = 1;
    for (int d = ndim - 2; d >= 0; d--)
        st[d] = st[d + 1] * shape[d + 1];
}

START_TEST(test_copy_box)
{
    rng_seed(6);
    static const size_t elsizes[] = {4, 2, 8, 3};
    for (int ei = 0; ei < 4; ei++) {
        size_t es = elsizes[ei];
        /* (B, T, NH, hd) -> (B, NH, T, hd) */
        int64_t B = 3, T = 7, NH = 5, hd = 13;
        int64_t sh[4] = {B, T, NH, hd}, sst[4], dsh[4] = {B, NH, T, hd}, dst4[4], dsp[4];
        row_major(4, sh, sst);
        row_major(4, dsh, dst4);
        dsp[0] = dst4[0];
        dsp[1] = dst4[2];
        dsp[2] = dst4[1];
        dsp[3] = dst4[3];
        size_t tot = (size_t)(B * T * NH * hd);
        check_copy("head transpose", 4, sh, es, tot, sst, 0, tot, dsp, 0);
        /* and back, plus hd == 1 (no unit-stride inner dim on the transposed side) */
        int64_t sh1[4] = {B, NH, T, 1}, s1[4], d1[4], dd1[4] = {B, T, NH, 1}, st1[4];
        row_major(4, sh1, s1);
        row_major(4, dd1, st1);
        d1[0] = st1[0];
        d1[1] = st1[2];
        d1[2] = st1[1];
        d1[3] = st1[3];
        check_copy("transpose hd=1", 4, sh1, es, (size_t)(B * T * NH), s1, 0,
                   (size_t)(B * T * NH), d1, 0);

        /* sub-box (5, 6, 3) of a (13, 61, 7) tensor at (2, 37, 1) into a (7, 37, 3) tensor
         * at (1, 3, 0) */
        int64_t big[3] = {13, 61, 7}, small[3] = {7, 37, 3}, box[3] = {5, 6, 3};
        int64_t bs[3], sm[3];
        row_major(3, big, bs);
        row_major(3, small, sm);
        int64_t so = 2 * bs[0] + 37 * bs[1] + 1 * bs[2], dof = 1 * sm[0] + 3 * sm[1];
        check_copy("sub-box", 3, box, es, 13 * 61 * 7, bs, so, 7 * 37 * 3, sm, dof);
        /* whole rows of a sub-box merge into one memcpy; single element; 1-d strided */
        int64_t rows[3] = {5, 6, 7};
        check_copy("full rows", 3, rows, es, 13 * 61 * 7, bs, so - 1, 7 * 37 * 7, bs, 0);
        int64_t one[2] = {1, 1};
        check_copy("one element", 2, one, es, 13 * 61 * 7, bs, so, 7 * 37 * 3, sm, dof);
        int64_t n1[1] = {37}, s3[1] = {3}, d2[1] = {2};
        check_copy("1-d strided", 1, n1, es, 130, s3, 1, 130, d2, 3);
        /* 8 dimensions, reversed order (full transpose) */
        int64_t sh8[8] = {2, 3, 1, 2, 3, 2, 1, 3}, s8[8], r8[8], d8[8];
        row_major(8, sh8, s8);
        for (int d = 0; d < 8; d++)
            r8[d] = sh8[7 - d];
        row_major(8, r8, d8);
        int64_t dperm[8];
        for (int d = 0; d < 8; d++)
            dperm[d] = d8[7 - d];
        check_copy("8-d reverse", 8, sh8, es, 216, s8, 0, 216, dperm, 0);
    }
}
END_TEST

/* ---- GEMM -------------------------------------------------------------------------------- */

static void check_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                       float beta, int64_t batch, int tight)
{
    /* stored A is (m, k) or (k, m), with padding in the leading dim and between batches
     * unless tight */
    int64_t arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
    int64_t pad = tight ? 0 : 1;
    int64_t lda = acols + 2 * pad, ldb = bcols + pad, ldc = n + 3 * pad;
    int64_t sa = arows * lda + 5 * pad, sb = brows * ldb + pad, sc = m * ldc + 7 * pad;
    float *a = rand_f(sa * batch, -1, 1), *b = rand_f(sb * batch, -1, 1);
    float *c0 = rand_f(sc * batch, -1, 1), *c = dup_f(sc * batch, c0);
    double *ref = alloc_d(sc * batch);
    if (beta == 0.0f)
        for (int64_t i = 0; i < sc * batch; i++)
            c[i] = NAN; /* C must not be read; padding is compared below, so restore it */
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t i = 0; i < sc; i++) {
            int64_t r = i / ldc, j = i % ldc;
            if (r >= m || j >= n) {
                c[bi * sc + i] = c0[bi * sc + i];
                ref[bi * sc + i] = c0[bi * sc + i];
                continue;
            }
            double s = 0.0;
            for (int64_t p = 0; p < k; p++) {
                double av = ta ? a[bi * sa + p * lda + r] : a[bi * sa + r * lda + p];
                double bv = tb ? b[bi * sb + j * ldb + p] : b[bi * sb + p * ldb + j];
                s += av * bv;
            }
            ref[bi * sc + i] = alpha * s + (beta == 0.0f ? 0.0 : beta * (double)c0[bi * sc + i]);
        }
    nnt_cpu_gemm_f32(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d m=%lld n=%lld k=%lld beta=%g batch=%lld", ta,
             tb, (long long)m, (long long)n, (long long)k, beta, (long long)batch);
    expect_close_norm(what, sc * batch, c, ref, TOL_GEMM);
    free(a);
    free(b);
    free(c0);
    free(c);
    free(ref);
}

/* ---- operand rounding (GEMM precision) -------------------------------------------------- */

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Ties to even, carries, overflow, zeros, subnormals, infinities and NaN, as bit patterns;
 * then random normal floats against an independent rounding (frexp / nearbyint). */
START_TEST(test_round)
{
    static const struct {
        int bits;
        uint32_t in, want;
    } cases[] = {
        {7, 0x3F800000u, 0x3F800000u},   /* 1 */
        {7, 0x3F808000u, 0x3F800000u},   /* 1 + 2^-8: tie, to even (down) */
        {7, 0x3F818000u, 0x3F820000u},   /* tie, to even (up) */
        {7, 0x3F808001u, 0x3F810000u},   /* just above the tie */
        {7, 0x3F807FFFu, 0x3F800000u},   /* just below */
        {7, 0xBF808000u, 0xBF800000u},   /* negative tie */
        {7, 0xBF818000u, 0xBF820000u},
        {7, 0x3FFFC000u, 0x40000000u},   /* carry into the exponent: 1.99.. -> 2 */
        {7, 0x7F7FFFFFu, 0x7F800000u},   /* FLT_MAX overflows to +Inf */
        {7, 0xFF7FFFFFu, 0xFF800000u},
        {7, 0x7F7F0000u, 0x7F7F0000u},   /* the largest bfloat16 stays */
        {7, 0x7F800000u, 0x7F800000u},   /* +-Inf */
        {7, 0xFF800000u, 0xFF800000u},
        {7, 0x7F800001u, 0x7FC00000u},   /* signalling NaN, payload below the cut: quiet NaN */
        {7, 0xFFC12345u, 0xFFC10000u},   /* quiet NaN keeps sign and upper payload */
        {7, 0x00000000u, 0x00000000u},   /* +-0 */
        {7, 0x80000000u, 0x80000000u},
        {7, 0x00000001u, 0x00000000u},   /* subnormals round as integers */
        {7, 0x00008000u, 0x00000000u},
        {7, 0x00018000u, 0x00020000u},
        {7, 0x007FFFFFu, 0x00800000u},   /* largest subnormal -> smallest normal */
        {10, 0x3F801000u, 0x3F800000u},  /* TF32: 1 + 2^-11, tie to even */
        {10, 0x3F803000u, 0x3F804000u},
        {10, 0x3F801001u, 0x3F802000u},
        {10, 0x7F7FFFFFu, 0x7F800000u},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float x = float_of(cases[i].in), y = -1.0f, z = x;
        nnt_cpu_round_f32(1, cases[i].bits, &x, &y);
        nnt_cpu_round_f32(1, cases[i].bits, &z, &z);   /* in place */
        ck_assert_msg(bits_of(y) == cases[i].want && bits_of(z) == cases[i].want,
                      "round(0x%08X, %d bits) = 0x%08X, expected 0x%08X", cases[i].in,
                      cases[i].bits, bits_of(y), cases[i].want);
    }
    rng_state = 404;
    const int64_t n = 4096;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    for (int64_t i = 0; i < n; i++)   /* magnitudes 2^-40 .. 2^40, both signs */
        x[i] = ldexpf(rng_uniform(-1.0f, 1.0f), (int)(rng_u64() % 81) - 40);
    for (int bits = 7; bits <= 10; bits += 3) {
        nnt_cpu_round_f32(n, bits, x, y);
        for (int64_t i = 0; i < n; i++) {
            int e;
            double m = frexp(x[i], &e);
            float want = (float)ldexp(nearbyint(ldexp(m, bits + 1)), e - bits - 1);
            ck_assert_msg(bits_of(y[i]) == bits_of(want), "%d bits: %a -> %a, expected %a",
                          bits, (double)x[i], (double)y[i], (double)want);
        }
    }
    free(x);
    free(y);
}
END_TEST

START_TEST(test_gemm)
{
    rng_seed(7);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int si = 0; si < NSIZES; si++) {
                int64_t m = SIZES[si], n = SIZES[(si + 2) % NSIZES];
                int64_t k = SIZES[(si + 5) % NSIZES];
                check_gemm(ta, tb, m, n, k, 0.7f, 0.0f, 1, 0);
                check_gemm(ta, tb, m, n, k, 1.0f, 1.0f, 3, 0);
                check_gemm(ta, tb, n, k, m, -1.3f, 0.5f, 2, 1);
                check_gemm(ta, tb, m, 1, k, 1.0f, 1.0f, 2, 1);
                check_gemm(ta, tb, 1, m, 1, 1.0f, 0.0f, 1, 1);
                /* one row (generation's decode steps): nnt_cpu_gemv_f32 or BLIS's gemv,
                 * dense and padded rows */
                check_gemm(ta, tb, 1, n, k, 0.7f, 0.0f, 2, 0);
                check_gemm(ta, tb, 1, n, k, -1.3f, 0.5f, 3, 1);
                check_gemm(ta, tb, 1, n, k, -1.1f, 0.5f, 3, 0);
                check_gemm(ta, tb, 1, n, k, 1.0f, 1.0f, 2, 1);
            }
    check_gemm(0, 0, 3, 7, 0, 1.0f, 0.0f, 2, 0); /* k == 0: C = beta C */
    check_gemm(0, 1, 3, 7, 0, 1.0f, 2.0f, 2, 1);
}
END_TEST

/* ---- LayerNorm --------------------------------------------------------------------------- */

static void ref_ln_fwd(int64_t rows, int64_t n, double eps, const double *x, const double *g,
                       const double *b, double *y, double *mean, double *rstd)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n;
        double mu = 0.0, var = 0.0;
        for (int64_t j = 0; j < n; j++)
            mu += xr[j];
        mu /= (double)n;
        for (int64_t j = 0; j < n; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        double rs = 1.0 / sqrt(var / (double)n + eps);
        for (int64_t j = 0; j < n; j++)
            y[r * n + j] = (xr[j] - mu) * rs * g[j] + b[j];
        mean[r] = mu;
        rstd[r] = rs;
    }
}

/* analytic backward; dx set, dg and db set (not accumulated) */
static void ref_ln_bwd(int64_t rows, int64_t n, double eps, const double *x, const double *dy,
                       const double *g, double *dx, double *dg, double *db)
{
    double *y = alloc_d(rows * n), *mean = alloc_d(rows), *rstd = alloc_d(rows);
    double *b0 = alloc_d(n);
    ref_ln_fwd(rows, n, eps, x, g, b0, y, mean, rstd);
    for (int64_t j = 0; j < n; j++)
        dg[j] = db[j] = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double sg = 0.0, sgx = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double xh = (x[r * n + j] - mean[r]) * rstd[r], gg = dy[r * n + j] * g[j];
            sg += gg;
            sgx += gg * xh;
            dg[j] += dy[r * n + j] * xh;
            db[j] += dy[r * n + j];
        }
        for (int64_t j = 0; j < n; j++) {
            double xh = (x[r * n + j] - mean[r]) * rstd[r];
            dx[r * n + j] = rstd[r] * (dy[r * n + j] * g[j] - sg / n - xh * sgx / n);
        }
    }
    free(y);
    free(mean);
    free(rstd);
    free(b0);
}

static double ln_loss(int64_t rows, int64_t n, double eps, const double *x, const double *g,
                      const double *b, const double *w)
{
    double *y = alloc_d(rows * n), *mean = alloc_d(rows), *rstd = alloc_d(rows), s = 0.0;
    ref_ln_fwd(rows, n, eps, x, g, b, y, mean, rstd);
    for (int64_t i = 0; i < rows * n; i++)
        s += w[i] * y[i];
    free(y);
    free(mean);
    free(rstd);
    return s;
}

/* central difference of f along each element of p (n of them), into grad */
#define FD_GRAD(n, p, grad, h, expr)                                                          \
    for (int64_t fd_i = 0; fd_i < (n); fd_i++) {                                              \
        double fd_save = (p)[fd_i];                                                           \
        (p)[fd_i] = fd_save + (h);                                                            \
        double fd_lp = (expr);                                                                \
        (p)[fd_i] = fd_save - (h);                                                            \
        double fd_lm = (expr);                                                                \
        (p)[fd_i] = fd_save;                                                                  \
        (grad)[fd_i] = (fd_lp - fd_lm) / (2 * (h));                                           \
    }

START_TEST(test_layernorm_ref_fd)
{
    rng_seed(8);
    int64_t rows = 3, n = 7;
    double eps = 1e-5, h = 1e-5;
    float *xf = rand_f(rows * n, -2, 2), *gf = rand_f(n, -2, 2), *bf = rand_f(n, -1, 1);
    float *wf = rand_f(rows * n, -1, 1);
    double *x = to_d(rows * n, xf), *g = to_d(n, gf), *b = to_d(n, bf), *w = to_d(rows * n, wf);
    double *dx = alloc_d(rows * n), *dg = alloc_d(n), *db = alloc_d(n);
    double *fx = alloc_d(rows * n), *fg = alloc_d(n), *fb = alloc_d(n);
    ref_ln_bwd(rows, n, eps, x, w, g, dx, dg, db);
    FD_GRAD(rows * n, x, fx, h, ln_loss(rows, n, eps, x, g, b, w));
    FD_GRAD(n, g, fg, h, ln_loss(rows, n, eps, x, g, b, w));
    FD_GRAD(n, b, fb, h, ln_loss(rows, n, eps, x, g, b, w));
    expect_close_dd("ln ref dx vs fd", rows * n, dx, fx, TOL_FD_LN_DX);
    expect_close_dd("ln ref dgamma vs fd", n, dg, fg, TOL_FD_LN_DG);
    expect_close_dd("ln ref dbeta vs fd", n, db, fb, TOL_FD_LN_DB);
    free(xf), free(gf), free(bf), free(wf), free(x), free(g), free(b), free(w);
    free(dx), free(dg), free(db), free(fx), free(fg), free(fb);
}
END_TEST

START_TEST(test_layernorm)
{
    rng_seed(9);
    const float eps = 1e-5f;
    for (int ri = 0; ri < 4; ri++)
        for (int si = 0; si < NSIZES; si++) {
            int64_t rows = SIZES[ri], n = SIZES[si];
            float *x = rand_f(rows * n, 2, 5); /* offset mean: tests the two-pass variance */
            float *g = rand_f(n, -2, 2), *b = rand_f(n, -1, 1), *dy = rand_f(rows * n, -1, 1);
            float *y = alloc_f(rows * n), *mean = alloc_f(rows), *rstd = alloc_f(rows);
            float *dx = alloc_f(rows * n), *dg0 = rand_f(n, -1, 1), *db0 = rand_f(n, -1, 1);
            float *dg = dup_f(n, dg0), *db = dup_f(n, db0);
            double *xd = to_d(rows * n, x), *gd = to_d(n, g), *bd = to_d(n, b);
            double *dyd = to_d(rows * n, dy);
            double *ry = alloc_d(rows * n), *rm = alloc_d(rows), *rr = alloc_d(rows);
            double *rdx = alloc_d(rows * n), *rdg = alloc_d(n), *rdb = alloc_d(n);
            char what[64];

            nnt_cpu_layernorm_fwd_f32(rows, n, eps, x, g, b, y, mean, rstd);
            ref_ln_fwd(rows, n, eps, xd, gd, bd, ry, rm, rr);
            snprintf(what, sizeof what, "ln_fwd y rows=%lld n=%lld", (long long)rows,
                     (long long)n);
            expect_close_norm(what, rows * n, y, ry, TOL_LN_Y);
            expect_close("ln_fwd mean", rows, mean, rm, TOL_LN_MEAN, 0.0);
            expect_close("ln_fwd rstd", rows, rstd, rr, TOL_LN_RSTD, 0.0);

            nnt_cpu_layernorm_bwd_f32(rows, n, x, dy, g, mean, rstd, dx, dg, db);
            ref_ln_bwd(rows, n, eps, xd, dyd, gd, rdx, rdg, rdb);
            for (int64_t j = 0; j < n; j++) {
                rdg[j] += dg0[j]; /* += outputs started from non-zero values */
                rdb[j] += db0[j];
            }
            snprintf(what, sizeof what, "ln_bwd dx rows=%lld n=%lld", (long long)rows,
                     (long long)n);
            expect_close_norm(what, rows * n, dx, rdx, TOL_LN_DX);
            expect_close_norm("ln_bwd dgamma", n, dg, rdg, TOL_LN_DG);
            expect_close_norm("ln_bwd dbeta", n, db, rdb, TOL_LN_DB);
            free(x), free(g), free(b), free(dy), free(y), free(mean), free(rstd), free(dx);
            free(dg0), free(db0), free(dg), free(db), free(xd), free(gd), free(bd), free(dyd);
            free(ry), free(rm), free(rr), free(rdx), free(rdg), free(rdb);
        }
}
END_TEST

/* Rows of variance at most a few times eps (spreads 1e-3..1e-2 and constant rows): eps sets
 * rstd there (1/sqrt(eps) for a constant row), so a missing eps or a variance over n - 1 is
 * far off, while in test_layernorm (variance 0.75) eps changes rstd by ~7e-6 only. */
START_TEST(test_layernorm_small_variance)
{
    rng_seed(19);
    static const double spread[5] = {1e-3, 3e-4, 0.0, 3e-3, 1e-2};
    const float eps = 1e-5f;
    for (int ri = 0; ri < 3; ri++)
        for (int si = 0; si < NSIZES; si++) {
            int64_t rows = SIZES[ri] + 2, n = SIZES[si];
            float *x = rand_f(rows * n, -1, 1), *g = rand_f(n, -2, 2), *b = rand_f(n, -1, 1);
            float *dy = rand_f(rows * n, -1, 1), *y = alloc_f(rows * n), *mean = alloc_f(rows);
            float *rstd = alloc_f(rows), *dx = alloc_f(rows * n), *dg = alloc_f(n);
            float *db = alloc_f(n);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < n; j++)
                    x[r * n + j] = (float)(0.01 * (r % 3 - 1) + spread[r % 5] * x[r * n + j]);
            double *xd = to_d(rows * n, x), *gd = to_d(n, g), *bd = to_d(n, b);
            double *dyd = to_d(rows * n, dy), *ry = alloc_d(rows * n), *rm = alloc_d(rows);
            double *rr = alloc_d(rows), *rdx = alloc_d(rows * n), *rdg = alloc_d(n);
            double *rdb = alloc_d(n);
            char what[80];
            nnt_cpu_layernorm_fwd_f32(rows, n, eps, x, g, b, y, mean, rstd);
            ref_ln_fwd(rows, n, eps, xd, gd, bd, ry, rm, rr);
            nnt_cpu_layernorm_bwd_f32(rows, n, x, dy, g, mean, rstd, dx, dg, db);
            ref_ln_bwd(rows, n, eps, xd, dyd, gd, rdx, rdg, rdb);
            snprintf(what, sizeof what, "small-variance ln_fwd y rows=%lld n=%lld",
                     (long long)rows, (long long)n);
            expect_close_norm(what, rows * n, y, ry, TOL_LNS_Y);
            expect_close("small-variance ln_fwd rstd", rows, rstd, rr, TOL_LNS_RSTD, 0.0);
            snprintf(what, sizeof what, "small-variance ln_bwd dx rows=%lld n=%lld",
                     (long long)rows, (long long)n);
            expect_close_norm(what, rows * n, dx, rdx, TOL_LNS_DX);
            free(x), free(g), free(b), free(dy), free(y), free(mean), free(rstd), free(dx);
            free(dg), free(db), free(xd), free(gd), free(bd), free(dyd), free(ry), free(rm);
            free(rr), free(rdx), free(rdg), free(rdb);
        }
}
END_TEST

/* ---- attention --------------------------------------------------------------------------- */

/* One slab: q (tq, hd) at positions qp0.., k, v (tk, hd) at positions kp0..; causal
 * attention over these keys only. o (tq, hd), lse (tq); rows with no visible key get
 * o = 0, lse = -inf. */
static void ref_attn_fwd(int64_t tq, int64_t tk, int64_t hd, int64_t qp0, int64_t kp0,
                         double scale, const double *q, const double *k, const double *v,
                         double *o, double *lse)
{
    double *p = alloc_d(tk);
    for (int64_t i = 0; i < tq; i++) {
        double mx = -INFINITY, sum = 0.0;
        int64_t nv = 0;
        for (int64_t j = 0; j < tk && kp0 + j <= qp0 + i; j++, nv++) {
            double s = 0.0;
            for (int64_t c = 0; c < hd; c++)
                s += q[i * hd + c] * k[j * hd + c];
            p[j] = scale * s;
            mx = p[j] > mx ? p[j] : mx;
        }
        for (int64_t j = 0; j < nv; j++)
            sum += (p[j] = exp(p[j] - mx));
        for (int64_t c = 0; c < hd; c++) {
            double acc = 0.0;
            for (int64_t j = 0; j < nv; j++)
                acc += p[j] * v[j * hd + c];
            o[i * hd + c] = nv ? acc / sum : 0.0;
        }
        lse[i] = nv ? mx + log(sum) : -INFINITY;
    }
    free(p);
}

/* Analytic backward of full self-attention of one slab (positions 0..T-1): dq, dk, dv set. */
static void ref_attn_bwd(int64_t T, int64_t hd, double scale, const double *q, const double *k,
                         const double *v, const double *dout, double *dq, double *dk,
                         double *dv)
{
    double *o = alloc_d(T * hd), *lse = alloc_d(T), *p = alloc_d(T), *dp = alloc_d(T);
    ref_attn_fwd(T, T, hd, 0, 0, scale, q, k, v, o, lse);
    memset(dq, 0, (size_t)(T * hd) * sizeof(double));
    memset(dk, 0, (size_t)(T * hd) * sizeof(double));
    memset(dv, 0, (size_t)(T * hd) * sizeof(double));
    for (int64_t i = 0; i < T; i++) {
        double di = 0.0;
        for (int64_t c = 0; c < hd; c++)
            di += dout[i * hd + c] * o[i * hd + c];
        for (int64_t j = 0; j <= i; j++) {
            double s = 0.0, t = 0.0;
            for (int64_t c = 0; c < hd; c++) {
                s += q[i * hd + c] * k[j * hd + c];
                t += dout[i * hd + c] * v[j * hd + c];
            }
            p[j] = exp(scale * s - lse[i]);
            dp[j] = p[j] * (t - di); /* ds */
        }
        for (int64_t j = 0; j <= i; j++)
            for (int64_t c = 0; c < hd; c++) {
                dv[j * hd + c] += p[j] * dout[i * hd + c];
                dq[i * hd + c] += scale * dp[j] * k[j * hd + c];
                dk[j * hd + c] += scale * dp[j] * q[i * hd + c];
            }
    }
    free(o), free(lse), free(p), free(dp);
}

static double attn_loss(int64_t T, int64_t hd, double scale, const double *q, const double *k,
                        const double *v, const double *w)
{
    double *o = alloc_d(T * hd), *lse = alloc_d(T), s = 0.0;
    ref_attn_fwd(T, T, hd, 0, 0, scale, q, k, v, o, lse);
    for (int64_t i = 0; i < T * hd; i++)
        s += w[i] * o[i];
    free(o), free(lse);
    return s;
}

START_TEST(test_attention_ref_fd)
{
    rng_seed(10);
    int64_t T = 6, hd = 3;
    double scale = 1.0 / sqrt((double)hd), h = 1e-5;
    float *f[4];
    double *x[4], *g[3], *fd[3];
    for (int a = 0; a < 4; a++) {
        f[a] = rand_f(T * hd, -2, 2);
        x[a] = to_d(T * hd, f[a]);
    }
    for (int a = 0; a < 3; a++) {
        g[a] = alloc_d(T * hd);
        fd[a] = alloc_d(T * hd);
    }
    ref_attn_bwd(T, hd, scale, x[0], x[1], x[2], x[3], g[0], g[1], g[2]);
    for (int a = 0; a < 3; a++)
        FD_GRAD(T * hd, x[a], fd[a], h, attn_loss(T, hd, scale, x[0], x[1], x[2], x[3]));
    expect_close_dd("attn ref dq vs fd", T * hd, g[0], fd[0], TOL_FD_ATTN_DQ);
    expect_close_dd("attn ref dk vs fd", T * hd, g[1], fd[1], TOL_FD_ATTN_DK);
    expect_close_dd("attn ref dv vs fd", T * hd, g[2], fd[2], TOL_FD_ATTN_DV);
    for (int a = 0; a < 4; a++)
        free(f[a]), free(x[a]);
    for (int a = 0; a < 3; a++)
        free(g[a]), free(fd[a]);
}
END_TEST

/* rows [a, b) of each slab of src (nbh, T, hd) <-> dst (nbh, b - a, hd) */
static void get_rows(int64_t nbh, int64_t T, int64_t hd, int64_t a, int64_t b, const float *src,
                     float *dst)
{
    for (int64_t s = 0; s < nbh; s++)
        memcpy(dst + s * (b - a) * hd, src + (s * T + a) * hd,
               (size_t)((b - a) * hd) * sizeof(float));
}

static void put_rows(int64_t nbh, int64_t T, int64_t hd, int64_t a, int64_t b, const float *src,
                     float *dst)
{
    for (int64_t s = 0; s < nbh; s++)
        memcpy(dst + (s * T + a) * hd, src + s * (b - a) * hd,
               (size_t)((b - a) * hd) * sizeof(float));
}

typedef void (*attn_fwd_fn)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float,
                            const float *, const float *, const float *, float *, float *,
                            float *);
typedef void (*attn_bwd_fn)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float,
                            const float *, const float *, const float *, const float *,
                            const float *, const float *, float *, float *, float *);

/* Tiled forward over query blocks qb and key blocks kb (every pair, including those above
 * the diagonal): o (nbh, T, hd), lse (nbh * T) set. */
static void tiled_fwd(attn_fwd_fn fwd, int64_t nbh, int64_t T, int64_t hd, float scale,
                      const float *q, const float *k, const float *v, int nq, const int64_t *qb,
                      int nk, const int64_t *kb, float *o, float *lse)
{
    float *qt = alloc_f(nbh * T * hd), *kt = alloc_f(nbh * T * hd), *vt = alloc_f(nbh * T * hd);
    float *ot = alloc_f(nbh * T * hd), *m = alloc_f(nbh * T), *l = alloc_f(nbh * T);
    float *lt = alloc_f(nbh * T);
    for (int a = 0; a < nq; a++) {
        int64_t q0 = qb[a], tq = qb[a + 1] - q0;
        get_rows(nbh, T, hd, q0, q0 + tq, q, qt);
        for (int64_t i = 0; i < nbh * tq; i++) {
            m[i] = -INFINITY;
            l[i] = 0.0f;
        }
        memset(ot, 0, (size_t)(nbh * tq * hd) * sizeof(float));
        for (int c = 0; c < nk; c++) {
            int64_t k0 = kb[c], tk = kb[c + 1] - k0;
            get_rows(nbh, T, hd, k0, k0 + tk, k, kt);
            get_rows(nbh, T, hd, k0, k0 + tk, v, vt);
            fwd(nbh, tq, tk, hd, q0, k0, scale, qt, kt, vt, ot, m, l);
        }
        nnt_cpu_attn_fwd_finalize_f32(nbh, tq, hd, ot, m, l, lt);
        put_rows(nbh, T, hd, q0, q0 + tq, ot, o);
        put_rows(nbh, T, 1, q0, q0 + tq, lt, lse);
    }
    free(qt), free(kt), free(vt), free(ot), free(m), free(l), free(lt);
}

/* Tiled backward; dq, dk, dv (nbh, T, hd) +=. */
static void tiled_bwd(attn_bwd_fn bwd, int64_t nbh, int64_t T, int64_t hd, float scale,
                      const float *q, const float *k, const float *v, const float *dout,
                      const float *lse, const float *d, int nq, const int64_t *qb, int nk,
                      const int64_t *kb, float *dq, float *dk, float *dv)
{
    int64_t n = nbh * T * hd;
    float *qt = alloc_f(n), *kt = alloc_f(n), *vt = alloc_f(n), *dot_ = alloc_f(n);
    float *dqt = alloc_f(n), *dkt = alloc_f(n), *dvt = alloc_f(n);
    float *lt = alloc_f(nbh * T), *dt = alloc_f(nbh * T);
    for (int a = 0; a < nq; a++) {
        int64_t q0 = qb[a], q1 = qb[a + 1], tq = q1 - q0;
        get_rows(nbh, T, hd, q0, q1, q, qt);
        get_rows(nbh, T, hd, q0, q1, dout, dot_);
        get_rows(nbh, T, 1, q0, q1, lse, lt);
        get_rows(nbh, T, 1, q0, q1, d, dt);
        for (int c = 0; c < nk; c++) {
            int64_t k0 = kb[c], k1 = kb[c + 1], tk = k1 - k0;
            get_rows(nbh, T, hd, k0, k1, k, kt);
            get_rows(nbh, T, hd, k0, k1, v, vt);
            get_rows(nbh, T, hd, q0, q1, dq, dqt);
            get_rows(nbh, T, hd, k0, k1, dk, dkt);
            get_rows(nbh, T, hd, k0, k1, dv, dvt);
            bwd(nbh, tq, tk, hd, q0, k0, scale, qt, kt, vt, dot_, lt, dt, dqt, dkt, dvt);
            put_rows(nbh, T, hd, q0, q1, dqt, dq);
            put_rows(nbh, T, hd, k0, k1, dkt, dk);
            put_rows(nbh, T, hd, k0, k1, dvt, dv);
        }
    }
    free(qt), free(kt), free(vt), free(dot_), free(dqt), free(dkt), free(dvt), free(lt);
    free(dt);
}

/* Full check of one (T, hd) case for every pair of query and key splittings. */
static void check_attention(attn_fwd_fn fwd, attn_bwd_fn bwd, int64_t nbh, int64_t T,
                            int64_t hd)
{
    float scale = 1.0f / sqrtf((float)hd);
    int64_t n = nbh * T * hd;
    float *q = rand_f(n, -2, 2), *k = rand_f(n, -2, 2), *v = rand_f(n, -1, 1);
    float *dout = rand_f(n, -1, 1), *o = alloc_f(n), *lse = alloc_f(nbh * T);
    float *d = alloc_f(nbh * T);
    float *dq0 = rand_f(n, -1, 1), *dk0 = rand_f(n, -1, 1), *dv0 = rand_f(n, -1, 1);
    float *dq = alloc_f(n), *dk = alloc_f(n), *dv = alloc_f(n);
    double *qd = to_d(n, q), *kd = to_d(n, k), *vd = to_d(n, v), *dod = to_d(n, dout);
    double *ro = alloc_d(n), *rl = alloc_d(nbh * T), *rdq = alloc_d(n), *rdk = alloc_d(n);
    double *rdv = alloc_d(n);
    for (int64_t s = 0; s < nbh; s++) {
        int64_t off = s * T * hd;
        ref_attn_fwd(T, T, hd, 0, 0, scale, qd + off, kd + off, vd + off, ro + off, rl + s * T);
        ref_attn_bwd(T, hd, scale, qd + off, kd + off, vd + off, dod + off, rdq + off,
                     rdk + off, rdv + off);
    }
    for (int64_t i = 0; i < n; i++) { /* dq, dk, dv accumulate onto non-zero values */
        rdq[i] += dq0[i];
        rdk[i] += dk0[i];
        rdv[i] += dv0[i];
    }
    int64_t *qb = malloc((size_t)(T + 1) * sizeof(int64_t));
    int64_t *kb = malloc((size_t)(T + 1) * sizeof(int64_t));
    ck_assert(qb && kb);
    char what[96];
    for (int qm = 0; qm < 3; qm++)
        for (int km = 0; km < 3; km++) {
            if (qm == 2 && km == 2 && T > 40)
                continue; /* 1 x 1 blocks: quadratic number of calls */
            int nq = make_split(qm, T, qb), nk = make_split(km, T, kb);
            snprintf(what, sizeof what, "attn T=%lld hd=%lld qsplit=%d ksplit=%d",
                     (long long)T, (long long)hd, qm, km);
            tiled_fwd(fwd, nbh, T, hd, scale, q, k, v, nq, qb, nk, kb, o, lse);
            expect_close_norm(what, n, o, ro, TOL_ATTN_O);
            expect_close(what, nbh * T, lse, rl, TOL_ATTN_LSE, 1.0);

            nnt_cpu_attn_bwd_prep_f32(nbh, T, hd, o, dout, d);
            memcpy(dq, dq0, (size_t)n * sizeof(float));
            memcpy(dk, dk0, (size_t)n * sizeof(float));
            memcpy(dv, dv0, (size_t)n * sizeof(float));
            tiled_bwd(bwd, nbh, T, hd, scale, q, k, v, dout, lse, d, nq, qb, nk, kb, dq, dk,
                      dv);
            expect_close_norm(what, n, dq, rdq, TOL_ATTN_DQ);
            expect_close_norm(what, n, dk, rdk, TOL_ATTN_DK);
            expect_close_norm(what, n, dv, rdv, TOL_ATTN_DV);
        }
    free(qb), free(kb), free(q), free(k), free(v), free(dout), free(o), free(lse), free(d);
    free(dq0), free(dk0), free(dv0), free(dq), free(dk), free(dv), free(qd), free(kd);
    free(vd), free(dod), free(ro), free(rl), free(rdq), free(rdk), free(rdv);
}

static const int64_t ATTN_CASES[][2] = {{1, 1}, {37, 1}, {7, 3}, {13, 13}, {37, 7}, {61, 64}, {130, 16}};
#define NATTN ((int)(sizeof ATTN_CASES / sizeof ATTN_CASES[0]))

START_TEST(test_attention_tiled)
{
    rng_seed(11 + (uint64_t)_i);
    check_attention(nnt_cpu_attn_fwd_block_f32, nnt_cpu_attn_bwd_block_f32, 2,
                    ATTN_CASES[_i][0], ATTN_CASES[_i][1]);
}
END_TEST

START_TEST(test_attention_noscratch)
{
    rng_seed(31 + (uint64_t)_i);
    check_attention(noscratch_attn_fwd_block, noscratch_attn_bwd_block, 2, ATTN_CASES[_i][0],
                    ATTN_CASES[_i][1]);
}
END_TEST

/* The kernels' products through oneDNN (the codelets pass the worker's cache when oneDNN is
 * the CPU GEMM backend): the block signature over the _gqa entry points with one cache. */
static nnt_dnnl_cache *attn_dnnl;

static void dnnl_attn_fwd_block(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                int64_t q_pos0, int64_t k_pos0, float scale, const float *q,
                                const float *k, const float *v, float *o_acc, float *m,
                                float *l)
{
    const nnt_attn_map mha = {nbh, 1, 1, 0, 1, 1, 0, 0};
    nnt_cpu_attn_fwd_gqa_f32(attn_dnnl, &mha, tq, tk, hd, q_pos0, k_pos0, scale, q, k, v,
                             o_acc, m, l);
}

static void dnnl_attn_bwd_block(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                int64_t q_pos0, int64_t k_pos0, float scale, const float *q,
                                const float *k, const float *v, const float *dout,
                                const float *lse, const float *d, float *dq, float *dk,
                                float *dv)
{
    const nnt_attn_map mha = {nbh, 1, 1, 0, 1, 1, 0, 0};
    nnt_cpu_attn_bwd_gqa_f32(attn_dnnl, &mha, tq, tk, hd, q_pos0, k_pos0, scale, q, k, v, dout,
                             lse, d, dq, dk, dv);
}

START_TEST(test_attention_onednn)
{
    attn_dnnl = nnt_cpu_dnnl_cache_create();
    if (!attn_dnnl) {
        if (_i == 0)
            printf("attention_onednn: skipped, oneDNN not built in or not usable here\n");
        return;
    }
    rng_seed(51 + (uint64_t)_i);
    check_attention(dnnl_attn_fwd_block, dnnl_attn_bwd_block, 2, ATTN_CASES[_i][0],
                    ATTN_CASES[_i][1]);
    nnt_cpu_dnnl_cache_destroy(attn_dnnl);
    attn_dnnl = NULL;
}
END_TEST

/* ---- attention with bf16 products ------------------------------------------------------- */

/* x rounded to bf16 (to nearest even; values here are finite), as a double. */
static double bf16r(double x)
{
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* One slab of one key block (the whole of it: positions 0..T-1, causal; a window of w keys,
 * 0: none) as the kernels
 * compute it with bf16 products: q, k, v, dout and the products' p and ds rounded to bf16,
 * sums exact, the softmax of unrounded scores; l sums the unrounded p. Forward: o (before
 * the final division: o_acc / l is o), lse. Backward from the kernel's own o and lse: the
 * gradients added onto dq, dk, dv. */
static void ref_attn_bf16(int64_t T, int64_t hd, int64_t w, double scale, const float *q,
                          const float *k,
                          const float *v, const float *dout, const float *o, const float *lse,
                          double *ro, double *rlse, double *dq, double *dk, double *dv)
{
    double *p = alloc_d(T), *ds = alloc_d(T);
    for (int64_t i = 0; i < T; i++) {
        double mx = -INFINITY, sum = 0.0, di = 0.0;
        int64_t j0 = w > 0 && i - w + 1 > 0 ? i - w + 1 : 0;   /* the row's first key */
        for (int64_t j = j0; j <= i; j++) {
            double s = 0.0;
            for (int64_t c = 0; c < hd; c++)
                s += bf16r(q[i * hd + c]) * bf16r(k[j * hd + c]);
            p[j] = scale * s;
            mx = p[j] > mx ? p[j] : mx;
        }
        for (int64_t j = j0; j <= i; j++)
            sum += (p[j] = exp(p[j] - mx));
        for (int64_t c = 0; c < hd; c++) {
            double acc = 0.0;
            for (int64_t j = j0; j <= i; j++)
                acc += bf16r(p[j]) * bf16r(v[j * hd + c]);
            ro[i * hd + c] = acc / sum;
            di += (double)o[i * hd + c] * dout[i * hd + c];
        }
        rlse[i] = mx + log(sum);
        di = (float)di;   /* bwd_prep's float d */
        for (int64_t j = j0; j <= i; j++) {
            double s = 0.0, t = 0.0;
            for (int64_t c = 0; c < hd; c++) {
                s += bf16r(q[i * hd + c]) * bf16r(k[j * hd + c]);
                t += bf16r(dout[i * hd + c]) * bf16r(v[j * hd + c]);
            }
            p[j] = exp(scale * s - lse[i]);
            ds[j] = p[j] * (t - di);
        }
        for (int64_t j = j0; j <= i; j++)
            for (int64_t c = 0; c < hd; c++) {
                dv[j * hd + c] += bf16r(p[j]) * bf16r(dout[i * hd + c]);
                dq[i * hd + c] += scale * bf16r(ds[j]) * bf16r(k[j * hd + c]);
                dk[j * hd + c] += scale * bf16r(ds[j]) * bf16r(q[i * hd + c]);
            }
    }
    free(p), free(ds);
}

/* Measured (Zen 4, avx512_core_bf16), normwise: 4e-8 to 3.1e-7 for o, dq, dk, dv in the
 * cases of up to 130 rows; 1.2e-5 to 5.2e-5 at T 200 hd 8, where the float p or ds of the
 * kernel (another sum order, nnt's vector exp) rounds to the neighbouring bf16 now and then
 * (one in some 40000). lse sums the unrounded p: 4e-8 to 1.1e-7. The float kernels' o is
 * 2.5e-3 to 3.2e-3 from the bf16 one. */
#define TOL_ATTN16 5e-4
#define TOL_ATTN16_LSE 1e-6

/* The block kernels with map.bf16 (the codelets set it under NNT_PRECISION_BF16 where
 * oneDNN has bf16 dot products) against ref_attn_bf16: one key block of T keys (the chunks
 * of 64 query rows, a last chunk of one row (nnt's bf16 gemv); with a window, chunks whose
 * first key is past 0), two slabs of heads
 * sharing one kv slab (grouped-query attention: the kv slab's bf16 copy made once for
 * both). */
/* One pass of test_attention_bf16 at a bf16 band level (nnt_cpu_band16_force): o and lse
 * forward with map.bf16 (and o32 without it), then dq, dk, dv; returns the largest normwise
 * error of o, dq, dk, dv against the float64 reference */
static double attention_bf16_at(int level, nnt_dnnl_cache *dnnl, int64_t T, int64_t hd,
                                int64_t w, const char *what)
{
    int64_t nq = 2 * T * hd, nkv = T * hd;
    float scale = 1.0f / sqrtf((float)hd);
    rng_seed(91 + (uint64_t)T);
    float *q = rand_f(nq, -2, 2), *k = rand_f(nkv, -2, 2), *v = rand_f(nkv, -1, 1);
    float *dout = rand_f(nq, -1, 1), *o = alloc_f(nq), *m = alloc_f(2 * T), *l = alloc_f(2 * T);
    float *lse = alloc_f(2 * T), *d = alloc_f(2 * T), *dq = alloc_f(nq), *dk = alloc_f(nkv);
    float *dv = alloc_f(nkv), *o32 = alloc_f(nq);
    double *ro = alloc_d(nq), *rl = alloc_d(2 * T), *rdq = alloc_d(nq), *rdk = alloc_d(nkv);
    double *rdv = alloc_d(nkv);
    ck_assert_int_eq(nnt_cpu_band16_force(level), level);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        const nnt_attn_map gqa = {1, 2, 2, 0, 1, 2, 0, bf16};   /* 2 q heads, 1 kv head */
        for (int64_t i = 0; i < 2 * T; i++)
            m[i] = -INFINITY, l[i] = 0.0f;
        memset(o, 0, (size_t)nq * sizeof(float));
        nnt_cpu_attn_fwd_window_f32(dnnl, &gqa, T, T, hd, 0, 0, w, scale, 0.0f, q, k, v, o, m,
                                    l);
        nnt_cpu_attn_fwd_finalize_f32(2, T, hd, o, m, l, lse);
        if (!bf16) {
            memcpy(o32, o, (size_t)nq * sizeof(float));
            continue;
        }
        nnt_cpu_attn_bwd_prep_f32(2, T, hd, o, dout, d);
        memset(dq, 0, (size_t)nq * sizeof(float));
        memset(dk, 0, (size_t)nkv * sizeof(float));
        memset(dv, 0, (size_t)nkv * sizeof(float));
        nnt_cpu_attn_bwd_window_f32(dnnl, &gqa, T, T, hd, 0, 0, w, scale, 0.0f, q, k, v, dout,
                                    lse, d, dq, dk, dv);
    }
    nnt_cpu_band16_force(-1);
    for (int64_t h = 0; h < 2; h++)   /* both q heads add into the one kv slab's dk, dv */
        ref_attn_bf16(T, hd, w, scale, q + h * T * hd, k, v, dout + h * T * hd, o + h * T * hd,
                      lse + h * T, ro + h * T * hd, rl + h * T, rdq + h * T * hd, rdk, rdv);
    expect_close_norm(what, nq, o, ro, TOL_ATTN16);
    expect_close(what, 2 * T, lse, rl, TOL_ATTN16_LSE, 1.0);
    expect_close_norm(what, nq, dq, rdq, TOL_ATTN16);
    expect_close_norm(what, nkv, dk, rdk, TOL_ATTN16);
    expect_close_norm(what, nkv, dv, rdv, TOL_ATTN16);
    int64_t at;
    const float *got[4] = {o, dq, dk, dv};
    const double *ref[4] = {ro, rdq, rdk, rdv};
    const int64_t len[4] = {nq, nq, nkv, nkv};
    double worst = 0.0;
    for (int i = 0; i < 4; i++) {
        double e = close_err(len[i], got[i], NULL, ref[i], maxabs(len[i], ref[i]), &at);
        worst = e > worst ? e : worst;
    }
    /* and the float kernels' o is farther (the flag is not ignored) */
    double *r32 = to_d(nq, o32), diff = close_err(nq, o, NULL, r32, maxabs(nq, r32), &at);
    ck_assert_msg(diff > TOL_ATTN16, "%s: o with bf16 products equals the float one "
                  "(difference %.3g)", what, diff);
    free(q), free(k), free(v), free(dout), free(o), free(m), free(l), free(lse), free(d);
    free(dq), free(dk), free(dv), free(o32), free(ro), free(rl), free(rdq), free(rdk), free(rdv);
    free(r32);
    return worst;
}

START_TEST(test_attention_bf16)
{
    static const int64_t cases[][3] = {{37, 7, 0}, {65, 64, 0}, {130, 16, 40}, {200, 8, 0}};
    nnt_dnnl_cache *dnnl = nnt_cpu_dnnl_cache_create();
    if (!dnnl || !nnt_cpu_dnnl_bf16_isa()) {
        printf("attention_bf16: skipped, no oneDNN with bf16 dot products here\n");
        nnt_cpu_dnnl_cache_destroy(dnnl);
        return;
    }
    int64_t T = cases[_i][0], hd = cases[_i][1], w = cases[_i][2];
    for (int level = nnt_cpu_band16_level(); level >= 0; level--) {
        char what[96];
        snprintf(what, sizeof what, "bf16 attention T=%lld hd=%lld window %lld, %s",
                 (long long)T, (long long)hd, (long long)w,
                 level ? "bf16 band products" : "oneDNN's products");
        double e = attention_bf16_at(level, dnnl, T, hd, w, what);
        printf("%s: largest normwise error %.2e\n", what, e);
    }
    nnt_cpu_dnnl_cache_destroy(dnnl);
}
END_TEST

/* One key block that starts after some query rows: those rows stay fully masked
 * (m = -inf, l = 0, finalize gives o = 0, lse = -inf); a block entirely above the diagonal
 * changes nothing; the other rows match attention restricted to the block's keys. */
static void check_masked_rows(attn_fwd_fn fwd, attn_bwd_fn bwd)
{
    int64_t nbh = 2, tq = 37, tk = 13, hd = 5, q0 = 20, k0 = 27;
    float scale = 0.4f;
    float *q = rand_f(nbh * tq * hd, -2, 2), *k = rand_f(nbh * tk * hd, -2, 2);
    float *v = rand_f(nbh * tk * hd, -1, 1), *o = alloc_f(nbh * tq * hd);
    float *m = alloc_f(nbh * tq), *l = alloc_f(nbh * tq), *lse = alloc_f(nbh * tq);
    double *qd = to_d(nbh * tq * hd, q), *kd = to_d(nbh * tk * hd, k);
    double *vd = to_d(nbh * tk * hd, v), *ro = alloc_d(nbh * tq * hd), *rl = alloc_d(nbh * tq);
    for (int64_t i = 0; i < nbh * tq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    /* above the diagonal: keys start after the last query */
    fwd(nbh, tq, tk, hd, q0, q0 + tq, scale, q, k, v, o, m, l);
    for (int64_t i = 0; i < nbh * tq; i++)
        ck_assert(isinf(m[i]) && m[i] < 0 && l[i] == 0.0f);
    for (int64_t i = 0; i < nbh * tq * hd; i++)
        ck_assert(o[i] == 0.0f);
    fwd(nbh, tq, tk, hd, q0, k0, scale, q, k, v, o, m, l);
    for (int64_t s = 0; s < nbh; s++)
        for (int64_t i = 0; i < k0 - q0; i++)
            ck_assert(isinf(m[s * tq + i]) && m[s * tq + i] < 0 && l[s * tq + i] == 0.0f);
    nnt_cpu_attn_fwd_finalize_f32(nbh, tq, hd, o, m, l, lse);
    for (int64_t s = 0; s < nbh; s++)
        ref_attn_fwd(tq, tk, hd, q0, k0, scale, qd + s * tq * hd, kd + s * tk * hd,
                     vd + s * tk * hd, ro + s * tq * hd, rl + s * tq);
    expect_close_norm("masked rows o", nbh * tq * hd, o, ro, TOL_MASKED_O);
    for (int64_t i = 0; i < nbh * tq; i++) {
        if (isinf(rl[i]))
            ck_assert_msg(isinf(lse[i]) && lse[i] < 0, "masked row lse");
        else
            expect_close("masked rows lse", 1, lse + i, rl + i, TOL_MASKED_LSE, 1.0);
    }
    /* backward of the same block with lse from it: masked rows get no dq; all finite */
    float *dout = rand_f(nbh * tq * hd, -1, 1), *d = alloc_f(nbh * tq);
    float *dq = alloc_f(nbh * tq * hd), *dk = alloc_f(nbh * tk * hd), *dv = alloc_f(nbh * tk * hd);
    nnt_cpu_attn_bwd_prep_f32(nbh, tq, hd, o, dout, d);
    bwd(nbh, tq, tk, hd, q0, q0 + tq, scale, q, k, v, dout, lse, d, dq, dk, dv);
    bwd(nbh, tq, tk, hd, q0, k0, scale, q, k, v, dout, lse, d, dq, dk, dv);
    for (int64_t s = 0; s < nbh; s++)
        for (int64_t i = 0; i < tq * hd; i++)
            ck_assert(isfinite(dq[s * tq * hd + i]) &&
                      (i >= (k0 - q0) * hd || dq[s * tq * hd + i] == 0.0f));
    for (int64_t i = 0; i < nbh * tk * hd; i++)
        ck_assert(isfinite(dk[i]) && isfinite(dv[i]));
    free(q), free(k), free(v), free(o), free(m), free(l), free(lse), free(qd), free(kd);
    free(vd), free(ro), free(rl), free(dout), free(d), free(dq), free(dk), free(dv);
}

START_TEST(test_attention_masked_rows)
{
    rng_seed(12);
    check_masked_rows(nnt_cpu_attn_fwd_block_f32, nnt_cpu_attn_bwd_block_f32);
    check_masked_rows(noscratch_attn_fwd_block, noscratch_attn_bwd_block);
}
END_TEST

/* ---- cross-entropy ----------------------------------------------------------------------- */

/* loss[r] and dlogits (rows, V) = scale (softmax - onehot); ignored rows: 0 */
static void ref_xent(int64_t rows, int64_t V, const double *x, const int32_t *t, int32_t ign,
                     double scale, double *loss, double *dx)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * V;
        double mx = xr[0], s = 0.0;
        for (int64_t j = 1; j < V; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < V; j++)
            s += exp(xr[j] - mx);
        int valid = t[r] != ign;
        loss[r] = valid ? mx + log(s) - xr[t[r]] : 0.0;
        for (int64_t j = 0; j < V; j++)
            dx[r * V + j] = valid ? scale * (exp(xr[j] - mx) / s - (j == t[r])) : 0.0;
    }
}

static double xent_total(int64_t rows, int64_t V, const double *x, const int32_t *t,
                         int32_t ign, double scale)
{
    double *loss = alloc_d(rows), *dx = alloc_d(rows * V), s = 0.0;
    ref_xent(rows, V, x, t, ign, scale, loss, dx);
    for (int64_t r = 0; r < rows; r++)
        s += scale * loss[r];
    free(loss), free(dx);
    return s;
}

START_TEST(test_xent_ref_fd)
{
    rng_seed(13);
    int64_t rows = 4, V = 7;
    int32_t t[4] = {3, -100, 0, 6};
    float *xf = rand_f(rows * V, -3, 3);
    double *x = to_d(rows * V, xf), *loss = alloc_d(rows), *dx = alloc_d(rows * V);
    double *fd = alloc_d(rows * V), scale = 0.37;
    ref_xent(rows, V, x, t, -100, scale, loss, dx);
    FD_GRAD(rows * V, x, fd, 1e-5, xent_total(rows, V, x, t, -100, scale));
    expect_close_dd("xent ref grad vs fd", rows * V, dx, fd, TOL_FD_XENT);
    free(xf), free(x), free(loss), free(dx), free(fd);
}
END_TEST

/* Label smoothing eps on top of the plain references: loss (1 - eps) loss + eps (lse - mean x),
 * dx - scale eps / V everywhere, + scale eps at the target, on the rows not ignored. */
static void ref_smooth(int64_t rows, int64_t V, const double *x, const int32_t *t, int32_t ign,
                       double scale, double eps, double *loss, double *dx)
{
    for (int64_t r = 0; r < rows; r++) {
        if (t[r] == ign)
            continue;
        const double *xr = x + r * V;
        double mx = -INFINITY, s = 0.0, sum = 0.0;
        for (int64_t j = 0; j < V; j++)
            mx = fmax(mx, xr[j]), sum += xr[j];
        for (int64_t j = 0; j < V; j++)
            s += exp(xr[j] - mx);
        loss[r] = (1 - eps) * loss[r] + eps * (mx + log(s) - sum / V);
        for (int64_t j = 0; j < V; j++)
            dx[r * V + j] += scale * (eps * (j == t[r]) - eps / V);
    }
}

static void check_xent(int64_t rows, int64_t V, int32_t ign)
{
    int64_t ld = V + 3; /* leading dim wider than the vocabulary */
    const float eps = 0.3f;
    float *x = rand_f(rows * ld, -6, 6), *m = alloc_f(rows), *s = alloc_f(rows);
    float *tgt = alloc_f(rows), *loss = alloc_f(rows), *dx = alloc_f(rows * ld);
    float *d = alloc_f(rows);
    for (int64_t r = 0; r < rows; r++)   /* a row of large logits: their mean is cancelled */
        for (int64_t j = 0; r == 0 && j < V; j++)
            x[j] += 70.0f;
    int32_t *t = malloc((size_t)rows * sizeof(int32_t));
    ck_assert_ptr_nonnull(t);
    int64_t nvalid = 0;
    for (int64_t r = 0; r < rows; r++) {
        t[r] = (r % 3 == 1) ? ign : (int32_t)(rng_u64() % (uint64_t)V);
        nvalid += t[r] != ign;
    }
    float scale = 1.5f / (float)(nvalid ? nvalid : 1);
    double *xd = alloc_d(rows * V), *rloss = alloc_d(rows), *rdx = alloc_d(rows * V);
    double *rdx_ld = alloc_d(rows * ld);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < V; j++)
            xd[r * V + j] = x[r * ld + j];
    ref_xent(rows, V, xd, t, ign, scale, rloss, rdx);
    double *sloss = dup_d(rows, rloss), *sdx = dup_d(rows * V, rdx);
    ref_smooth(rows, V, xd, t, ign, scale, eps, sloss, sdx);
    int64_t *b = malloc((size_t)(V + 1) * sizeof(int64_t));
    ck_assert_ptr_nonnull(b);
    char what[96];
    for (int mode = 0; mode < 3; mode++) {
        int nb = make_split(mode, V, b);
        for (int64_t r = 0; r < rows; r++) {
            m[r] = -INFINITY;
            s[r] = 0.0f;
            tgt[r] = NAN; /* only read for valid rows, after the block with the target */
        }
        for (int64_t i = 0; i < rows * ld; i++) { /* padding columns must stay */
            dx[i] = 7.0f;
            rdx_ld[i] = 7.0;
        }
        for (int c = 0; c < nb; c++)   /* d: the sums label smoothing needs, mode 1 none */
            nnt_cpu_xent_fwd_block_f32(rows, b[c + 1] - b[c], b[c], x + b[c], ld, t, m, s, tgt,
                                       mode == 1 ? NULL : d);
        nnt_cpu_xent_loss_f32(rows, t, ign, m, s, tgt, loss, NULL);
        snprintf(what, sizeof what, "xent loss rows=%lld V=%lld ign=%d split=%d",
                 (long long)rows, (long long)V, (int)ign, mode);
        expect_close(what, rows, loss, rloss, TOL_XENT_LOSS, 0.1);
        if (mode != 1) {
            nnt_cpu_xent_smooth_loss_f32(rows, t, ign, eps, V, s, d, loss);
            snprintf(what, sizeof what, "smoothed xent loss rows=%lld V=%lld ign=%d split=%d",
                     (long long)rows, (long long)V, (int)ign, mode);
            expect_close(what, rows, loss, sloss, TOL_XENT_SMOOTH_LOSS, 0.1);
        }
        for (int c = 0; c < nb; c++)
            nnt_cpu_xent_bwd_block_f32(rows, b[c + 1] - b[c], b[c], x + b[c], ld, t, ign, m, s,
                                       NULL, scale, 0.0f, V, dx + b[c]);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < V; j++)
                rdx_ld[r * ld + j] = rdx[r * V + j];
        snprintf(what, sizeof what, "xent dlogits rows=%lld V=%lld ign=%d split=%d",
                 (long long)rows, (long long)V, (int)ign, mode);
        expect_close(what, rows * ld, dx, rdx_ld, TOL_XENT_DX, 0.01);
        if (mode == 1)
            continue;
        float *ds = dup_f(rows * ld, dx);   /* (its padding columns) */
        for (int c = 0; c < nb; c++)
            nnt_cpu_xent_bwd_block_f32(rows, b[c + 1] - b[c], b[c], x + b[c], ld, t, ign, m, s,
                                       NULL, scale, eps, V, ds + b[c]);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < V; j++)
                rdx_ld[r * ld + j] = sdx[r * V + j];
        snprintf(what, sizeof what, "smoothed xent dlogits rows=%lld V=%lld ign=%d split=%d",
                 (long long)rows, (long long)V, (int)ign, mode);
        expect_close(what, rows * ld, ds, rdx_ld, TOL_XENT_SMOOTH_DX, 0.01);
        free(ds);
    }
    /* in place: dlogits written over the logits, block by block */
    float *xi = dup_f(rows * ld, x);
    int nb = make_split(1, V, b);
    for (int c = 0; c < nb; c++)
        nnt_cpu_xent_bwd_block_f32(rows, b[c + 1] - b[c], b[c], xi + b[c], ld, t, ign, m, s,
                                   NULL, scale, 0.0f, V, xi + b[c]);
    for (int64_t r = 0; r < rows; r++)
        ck_assert(memcmp(xi + r * ld, dx + r * ld, (size_t)V * sizeof(float)) == 0);
    free(xi);
    free(x), free(m), free(s), free(tgt), free(loss), free(dx), free(t), free(xd), free(rloss);
    free(rdx), free(rdx_ld), free(b), free(d), free(sloss), free(sdx);
}

START_TEST(test_xent)
{
    rng_seed(14);
    for (int ri = 0; ri < 5; ri++)
        for (int vi = 0; vi < NSIZES; vi++) {
            check_xent(SIZES[ri], SIZES[vi], -100);
            if (SIZES[vi] > 3)
                check_xent(SIZES[ri], SIZES[vi], 2); /* ignore_index inside the vocabulary */
        }
}
END_TEST

/* ---- embedding --------------------------------------------------------------------------- */

START_TEST(test_embedding)
{
    rng_seed(15);
    for (int vi = 0; vi < NSIZES; vi++) {
        int64_t V = SIZES[vi], nc = SIZES[(vi + 3) % NSIZES], ntok = 61;
        int64_t ldt = nc + 2, ldo = nc + 1;
        int32_t *tok = malloc((size_t)ntok * sizeof(int32_t));
        ck_assert_ptr_nonnull(tok);
        for (int64_t i = 0; i < ntok; i++)
            tok[i] = (int32_t)(rng_u64() % (uint64_t)V);
        tok[ntok - 1] = tok[0]; /* repeated token: contributions add up */
        float *table = rand_f(V * ldt, -1, 1), *out = rand_f(ntok * ldo, -1, 1);
        float *out0 = dup_f(ntok * ldo, out), *dout = rand_f(ntok * ldo, -1, 1);
        float *dt0 = rand_f(V * ldt, -1, 1), *dt = alloc_f(V * ldt);
        double *ref = alloc_d(V * ldt > ntok * ldo ? V * ldt : ntok * ldo);
        double *td = to_d(V * ldt, table), *fd = alloc_d(V * ldt);
        int64_t b[131];
        for (int mode = 0; mode < 3; mode++) {
            int nb = make_split(mode, V, b);
            memcpy(out, out0, (size_t)(ntok * ldo) * sizeof(float));
            memcpy(dt, dt0, (size_t)(V * ldt) * sizeof(float));
            for (int c = 0; c < nb; c++) {
                int64_t nv = b[c + 1] - b[c];
                nnt_cpu_embedding_gather_f32(ntok, nc, tok, b[c], nv, table + b[c] * ldt, ldt,
                                             out, ldo);
                nnt_cpu_embedding_scatter_add_f32(ntok, nc, tok, b[c], nv, dout, ldo,
                                                  dt + b[c] * ldt, ldt);
            }
            /* gather: exact copies, padding columns untouched */
            for (int64_t i = 0; i < ntok; i++)
                for (int64_t j = 0; j < ldo; j++)
                    ref[i * ldo + j] = j < nc ? table[tok[i] * ldt + j] : out0[i * ldo + j];
            expect_close("embedding gather", ntok * ldo, out, ref, 0.0, 0.0);
            /* scatter: central differences of L = sum(dout .* gather(table)) in double */
            for (int64_t e = 0; e < V * ldt; e++) {
                double save = td[e], lp = 0.0, lm = 0.0;
                for (int sgn = 0; sgn < 2; sgn++) {
                    td[e] = save + (sgn ? -1e-3 : 1e-3);
                    double acc = 0.0;
                    for (int64_t i = 0; i < ntok; i++)
                        if (e / ldt == tok[i] && e % ldt < nc)
                            acc += dout[i * ldo + e % ldt] * td[e];
                    *(sgn ? &lm : &lp) = acc;
                }
                td[e] = save;
                fd[e] = dt0[e] + (lp - lm) / 2e-3;
            }
            expect_close("embedding scatter", V * ldt, dt, fd, TOL_EMB_SCATTER, 0.1);
        }
        /* tokens outside a block are skipped */
        memcpy(out, out0, (size_t)(ntok * ldo) * sizeof(float));
        nnt_cpu_embedding_gather_f32(ntok, nc, tok, V, 5, table, ldt, out, ldo);
        ck_assert(memcmp(out, out0, (size_t)(ntok * ldo) * sizeof(float)) == 0);
        free(tok), free(table), free(out), free(out0), free(dout), free(dt0), free(dt);
        free(ref), free(td), free(fd);
    }
}
END_TEST

/* ---- optimizers -------------------------------------------------------------------------- */

/* PyTorch Adam/AdamW (torch.optim, foreach=False, amsgrad=False) in double */
static void ref_adam(int64_t n, int decoupled, double lr, double b1, double b2, double eps,
                     double wd, int step, double gs, const float *g, double *p, double *m,
                     double *v)
{
    double bc1 = 1.0 - pow(b1, step), bc2 = 1.0 - pow(b2, step);
    for (int64_t i = 0; i < n; i++) {
        double gi = gs * g[i];
        if (decoupled)
            p[i] *= 1.0 - lr * wd;
        else
            gi += wd * p[i];
        m[i] = b1 * m[i] + (1.0 - b1) * gi;
        v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
        double denom = sqrt(v[i]) / sqrt(bc2) + eps;
        p[i] -= (lr / bc1) * m[i] / denom;
    }
}

START_TEST(test_adam)
{
    rng_seed(16);
    for (int dec = 0; dec < 2; dec++)
        for (int si = 0; si < NSIZES; si++) {
            int64_t n = SIZES[si] * 5;
            float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.8f;
            float *p = rand_f(n, -1, 1), *m = alloc_f(n), *v = alloc_f(n);
            double *pd = to_d(n, p), *md = alloc_d(n), *vd = alloc_d(n);
            for (int step = 1; step <= 5; step++) {
                float *g = rand_f(n, -1, 1);
                float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
                nnt_cpu_adam_step_f32(n, dec, lr, b1, b2, eps, wd, bc1, bc2, gs, g, p, m, v);
                ref_adam(n, dec, lr, b1, b2, eps, wd, step, gs, g, pd, md, vd);
                expect_close_norm(dec ? "adamw p" : "adam p", n, p, pd, TOL_ADAM_P);
                expect_close_norm("adam m", n, m, md, TOL_ADAM_M);
                expect_close_norm("adam v", n, v, vd, TOL_ADAM_V);
                free(g);
            }
            free(p), free(m), free(v), free(pd), free(md), free(vd);
        }
}
END_TEST

START_TEST(test_sgd)
{
    rng_seed(17);
    for (int si = 0; si < NSIZES; si++)
        for (int with_buf = 0; with_buf < 2; with_buf++) {
            int64_t n = SIZES[si] * 5;
            float lr = 0.05f, mom = with_buf ? 0.9f : 0.0f, wd = 0.01f, gs = 0.5f;
            float *p = rand_f(n, -1, 1), *buf = with_buf ? rand_f(n, -1, 1) : NULL;
            double *pd = to_d(n, p), *bd = alloc_d(n);
            if (buf)
                for (int64_t i = 0; i < n; i++)
                    buf[i] = NAN; /* not read on the first step */
            for (int step = 1; step <= 5; step++) {
                float *g = rand_f(n, -1, 1);
                nnt_cpu_sgd_step_f32(n, lr, mom, wd, gs, step == 1, g, p, buf);
                for (int64_t i = 0; i < n; i++) {
                    double gi = gs * (double)g[i] + wd * pd[i];
                    bd[i] = step == 1 ? gi : mom * bd[i] + gi;
                    pd[i] -= lr * bd[i];
                }
                expect_close_norm("sgd p", n, p, pd, TOL_SGD_P);
                if (buf)
                    expect_close_norm("sgd buf", n, buf, bd, TOL_SGD_BUF);
                free(g);
            }
            free(p), free(buf), free(pd), free(bd);
        }
}
END_TEST

/* ---- the AVX2 paths against the portable ones (nnt_cpu_isa) -------------------------------- */

#define TOL_ISA_EXP 7e-7        /* relative, vs double exp; measured 7.2e-8 */
#define TOL_ISA_ELEM 8e-6       /* relative (lo 1e-3 or 0.1), AVX2 vs portable; measured 8.5e-7 */
#define TOL_ISA_NORM 1e-6       /* normwise, AVX2 vs portable; measured 0 (same bits here) */
#define TOL_ISA_XENT 1.5e-5     /* relative, sums and dlogits; measured 1.5e-6 (the portable
                                  * loop's one float sum of 2 n terms) */
#define TOL_ISA_ROWEXP 2e-6     /* relative, AVX2 exp vs expf; measured 1.2e-7, ds 1.9e-7 */
#define TOL_ISA_ATTN 2.5e-6     /* lo 1, AVX2 vs portable softmax rows; measured 2.5e-7 */

#if NNT_CPU_X86
#include "simd_avx2.h"

static NNT_AVX2 void exp8(const float *x, float *y)
{
    _mm256_storeu_ps(y, nnt_avx2_exp(_mm256_loadu_ps(x)));
}
#endif

/* 1 and the AVX2 path forced when the CPU has it; 0 (and a message) when it has not */
static int force_avx2(const char *test)
{
    nnt_cpu_isa_force(NNT_CPU_ISA_AVX2);
    if (nnt_cpu_isa() == NNT_CPU_ISA_AVX2)
        return 1;
    printf("%s: this CPU (or build) has no AVX2 + FMA path: only the portable one is tested\n",
           test);
    nnt_cpu_isa_force(-1);
    return 0;
}

/* sum of x[i sx] y[i sy] over i < n in float64, and of the terms' magnitudes in *mag */
static double dot_mag(int64_t n, const float *x, int64_t sx, const float *y, int64_t sy,
                      double *mag)
{
    double s = 0.0, g = 0.0;
    for (int64_t i = 0; i < n; i++) {
        s += (double)x[i * sx] * y[i * sy];
        g += fabs((double)x[i * sx] * y[i * sy]);
    }
    *mag = g;
    return s;
}

/* nnt_cpu_gemv_bf16: one row of bf16 values against B (bf16 bits, or floats of the same
 * values), both orientations, padded rows (ldb), tails of every length, alpha / beta (beta 0:
 * y is NaN before and must not be read). Against the float64 sum of the exact products,
 * relative to sum |alpha x b| + |beta y|: float summation only. The bf16 and float B give the
 * same bits, and so do the AVX2 and portable paths (one fixed order of the sums). */
#define TOL_GEMV_BF16 8e-7   /* measured 7.6e-8 (k up to 770) */
static double gemv_case(int trans_b, int64_t n, int64_t k, float alpha, float beta, float *out)
{
    int64_t ldb = (trans_b ? k : n) + 3, rows = trans_b ? n : k, nb = rows * ldb;
    float *x = rand_f(k, -2.0f, 2.0f), *bf = rand_f(nb, -1.0f, 1.0f);
    float *y0 = rand_f(n, -1.0f, 1.0f), *y = alloc_f(n), *y2 = alloc_f(n);
    uint16_t *bh = malloc((size_t)nb * sizeof *bh);
    nnt_cpu_round_f32(k, 7, x, x);
    nnt_cpu_f32_to_bf16(nb, bf, bh);
    nnt_cpu_bf16_to_f32(nb, bh, bf);   /* the float B holds the bf16 values */
    for (int64_t j = 0; j < n; j++)
        y[j] = y2[j] = beta == 0.0f ? NAN : y0[j];
    nnt_cpu_gemv_bf16(trans_b, 1, n, k, alpha, x, bh, ldb, beta, y);
    nnt_cpu_gemv_bf16(trans_b, 0, n, k, alpha, x, bf, ldb, beta, y2);
    ck_assert_msg(memcmp(y, y2, (size_t)n * sizeof *y) == 0,
                  "gemv_bf16 trans %d n %lld k %lld: bf16 and float B differ", trans_b,
                  (long long)n, (long long)k);
    double worst = 0.0;
    for (int64_t j = 0; j < n; j++) {
        double mag, sum = dot_mag(k, x, 1, bf + (trans_b ? j * ldb : j), trans_b ? 1 : ldb, &mag);
        double want = alpha * sum + (beta == 0.0f ? 0.0 : (double)beta * y0[j]);
        double scale = fabs(alpha) * mag + (beta == 0.0f ? 0.0 : fabs(beta * y0[j])) + 1e-30;
        double e = fabs(y[j] - want) / scale;
        worst = e > worst ? e : worst;
    }
    memcpy(out, y, (size_t)n * sizeof *y);
    free(x), free(bf), free(y0), free(y), free(y2), free(bh);
    return worst;
}

START_TEST(test_gemv_bf16)
{
    static const int64_t ns[] = {1, 3, 4, 5, 8, 9, 31, 32, 33, 67};
    static const int64_t ks[] = {1, 7, 8, 9, 16, 47, 70, 120, 770};
    float *out[2] = {alloc_f(67), alloc_f(67)};
    double worst = 0.0;
    int avx2 = force_avx2("gemv_bf16");
    for (int tb = 0; tb < 2; tb++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
                for (int ab = 0; ab < 2; ab++) {
                    float alpha = ab ? -0.5f : 1.0f, beta = ab ? 0.75f : 0.0f;
                    for (int path = 0; path < 1 + avx2; path++) {
                        nnt_cpu_isa_force(path ? NNT_CPU_ISA_GENERIC : -1);
                        uint64_t seed = 1000 + 100 * (uint64_t)ni + 10 * ki + (uint64_t)ab;
                        rng_seed(seed);   /* the same operands on both paths */
                        double e = gemv_case(tb, ns[ni], ks[ki], alpha, beta, out[path]);
                        EXPECT_TOL(e, TOL_GEMV_BF16, "gemv_bf16 trans %d n %lld k %lld "
                                   "alpha %g beta %g path %d", tb, (long long)ns[ni],
                                   (long long)ks[ki], alpha, beta, path);
                        worst = e > worst ? e : worst;
                    }
                    ck_assert_msg(!avx2 || memcmp(out[0], out[1], (size_t)ns[ni] * 4) == 0,
                                  "gemv_bf16 trans %d n %lld k %lld: the AVX2 and portable "
                                  "paths differ", tb, (long long)ns[ni], (long long)ks[ki]);
                }
    nnt_cpu_isa_force(-1);
    printf("gemv_bf16: largest error %.2e (relative to sum |alpha x b| + |beta y|)%s\n", worst,
           avx2 ? "; AVX2 and portable paths bit for bit" : "");
    free(out[0]), free(out[1]);
}
END_TEST

START_TEST(test_isa_exp)
{
    if (!force_avx2("isa_exp"))
        return;
#if NNT_CPU_X86
    enum { N = 8 * 4096 };
    float *x = alloc_f(N), *y = alloc_f(N);
    double *ref = alloc_d(N);
    for (int64_t i = 0; i < N; i++) /* [-87.3, 88.7], plus the ends of the reduction's range */
        x[i] = -87.3f + (88.7f + 87.3f) * (float)i / (float)(N - 1);
    x[1] = 0.0f, x[2] = 0.34657359f, x[3] = -0.34657359f, x[4] = 1e-8f, x[5] = 88.72f;
    for (int64_t i = 0; i < N; i += 8)
        exp8(x + i, y + i);
    for (int64_t i = 0; i < N; i++)
        ref[i] = exp((double)x[i]);
    expect_close("avx2 exp", N, y, ref, TOL_ISA_EXP, 0.0);
    ck_assert(y[1] == 1.0f);
    /* overflow, underflow, NaN, infinities */
    float sx[8] = {89.0f, -88.0f, NAN, INFINITY, -INFINITY, 1000.0f, -1000.0f, 1.0f}, sy[8];
    exp8(sx, sy);
    ck_assert(isinf(sy[0]) && sy[0] > 0 && sy[1] == 0.0f && isnan(sy[2]));
    ck_assert(isinf(sy[3]) && sy[4] == 0.0f && isinf(sy[5]) && sy[6] == 0.0f);
    ck_assert(fabsf(sy[7] - 2.7182817f) <= 3e-7f);
    free(x), free(y), free(ref);
#endif
    nnt_cpu_isa_force(-1);
}
END_TEST

/* The SplitMix64 finaliser of cpu/random.c, for the references below */
static uint64_t splitmix(uint64_t seed, uint64_t idx)
{
    uint64_t z = seed + (idx + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The random fill. Normal values against Box-Muller in double on the same two uniforms
 * (largest error measured: TOL_RANDOM_MEASURED x the standard deviation; a wrong
 * polynomial coefficient, quadrant or sign gives 1e-3 to 2), their mean and variance over
 * 2^20 samples, uniform values exactly, and the AVX2 path's bits equal to the portable
 * one's for every row length and a tile inside a larger tensor. */
#define TOL_RANDOM_MEASURED 7.2e-7
START_TEST(test_random)
{
    enum { N = 1 << 20 };
    const uint64_t seed = 12345;
    const int64_t shape[1] = {N}, origin[1] = {0};
    float *v = alloc_f(N);
    for (int path = 0; path < 2; path++) {
        if (path == 1 && !force_avx2("random"))
            break;
        if (path == 0)
            nnt_cpu_isa_force(NNT_CPU_ISA_GENERIC);
        nnt_cpu_fill_random_f32(1, shape, origin, shape, seed, 1, 0.5f, 2.0f, v);
        double worst = 0, sum = 0, sumsq = 0;
        for (int64_t i = 0; i < N; i++) {
            uint64_t z = splitmix(seed, (uint64_t)i);
            double u1 = (double)((z >> 40) + 1) * 0x1p-24;
            double u2 = (double)((z >> 8) & 0xFFFFFF) * 0x1p-24;
            double ref = 0.5 + 2.0 * sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
            double err = fabs((double)v[i] - ref) / 2.0;
            if (err > worst)
                worst = err;
            double x = ((double)v[i] - 0.5) / 2.0;
            sum += x, sumsq += x * x;
        }
        double mean = sum / N, var = sumsq / N - mean * mean;
        printf("random (%s): largest error %.3g x stddev; mean %.5f, variance %.5f\n",
               path ? "avx2" : "portable", worst, mean, var);
        ck_assert_msg(worst <= 10 * TOL_RANDOM_MEASURED, "normal values off by %.3g", worst);
        ck_assert_msg(fabs(mean) < 0.005 && fabs(var - 1.0) < 0.01, "mean %g variance %g", mean,
                      var);
    }
    /* uniform: (a + (b - a) ((z >> 40) + 1/2) 2^-24) in double, rounded once */
    nnt_cpu_isa_force(-1);
    nnt_cpu_fill_random_f32(1, shape, origin, shape, seed, 0, -1.0f, 3.0f, v);
    for (int64_t i = 0; i < N; i += 97) {
        uint64_t z = splitmix(seed, (uint64_t)i);
        float want = (float)(-1.0 + 4.0 * (((double)(z >> 40) + 0.5) * 0x1p-24));
        ck_assert_msg(v[i] == want, "uniform %lld: %.9g, want %.9g", (long long)i, v[i], want);
    }
    free(v);
    if (!force_avx2("random paths"))
        return;
    /* every row length, and a tile (3, 5, 37) at (1, 2, 3) of a (4, 9, 50) tensor */
    const int64_t gs[3] = {4, 9, 50}, org[3] = {1, 2, 3}, ts[3] = {3, 5, 37};
    float *a[2], *b[2];
    for (int path = 0; path < 2; path++) {
        nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
        a[path] = alloc_f(41 * 41), b[path] = alloc_f(3 * 5 * 37);
        for (int64_t n = 1; n <= 41; n++) {
            const int64_t len[1] = {n}, at[1] = {0};
            nnt_cpu_fill_random_f32(1, len, at, len, seed + (uint64_t)n, 1, 0.0f, 0.02f,
                                    a[path] + (n - 1) * 41);
        }
        nnt_cpu_fill_random_f32(3, gs, org, ts, 7, 1, -1.0f, 1.0f, b[path]);
    }
    for (int64_t n = 1; n <= 41; n++)
        ck_assert_msg(memcmp(a[0] + (n - 1) * 41, a[1] + (n - 1) * 41, (size_t)n * sizeof(float)) == 0,
                      "a row of %lld: the AVX2 path's bits differ", (long long)n);
    ck_assert(memcmp(b[0], b[1], 3 * 5 * 37 * sizeof(float)) == 0);
    for (int path = 0; path < 2; path++)
        free(a[path]), free(b[path]);
    nnt_cpu_isa_force(-1);
}
END_TEST

/* The operand roundings of the precision modes (TF32: 10 bits, bf16: 7) and the bf16
 * conversions: the AVX2 path gives the portable path's bits, specials and ties included. */
START_TEST(test_isa_convert)
{
    if (!force_avx2("isa_convert"))
        return;
    enum { N = 4099 };
    float *x = rand_f(N, -1e3f, 1e3f);
    const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffbfffffu,
                                0x00000001u, 0x80000000u, 0x7f7fffffu, 0x3f808000u, 0x3f818000u,
                                0x3f807fffu, 0x3f800fffu, 0x3f801000u, 0x3f803000u, 0x7f7f8000u,
                                0x00400000u, 0x807fffffu};   /* subnormals that round to one */
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        memcpy(&x[3 * i + 1], &special[i], sizeof special[i]);
    float *r[2][2];
    uint16_t *h[2];
    float *back[2];
    /* the AVX2 path's conversion to bf16 at each AVX-512 level this CPU has (2: the
     * instruction, whose subnormal steps take 1's way; 1: AVX-512F; 0: AVX2 alone) */
    const int top = nnt_cpu_avx512_force(-1);
    for (int level = 0; level < top; level++) {
        uint16_t *got = calloc(N, sizeof(uint16_t)), *want = calloc(N, sizeof(uint16_t));
        nnt_cpu_isa_force(NNT_CPU_ISA_GENERIC);
        nnt_cpu_f32_to_bf16(N, x, want);
        nnt_cpu_isa_force(NNT_CPU_ISA_AVX2);
        ck_assert_int_eq(nnt_cpu_avx512_force(level), level);
        for (int64_t n = N - 17; n <= N; n++)   /* every tail length of 16 a step */
            nnt_cpu_f32_to_bf16(n, x, got);
        ck_assert_msg(memcmp(got, want, N * sizeof(uint16_t)) == 0,
                      "bf16 conversion at AVX-512 level %d", level);
        nnt_cpu_avx512_force(-1);
        free(got), free(want);
    }
    printf("test_cpu_kernels isa_convert: bf16 conversions checked at AVX-512 levels 0 to %d\n",
           top);
    for (int path = 0; path < 2; path++) {
        nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
        r[path][0] = alloc_f(N), r[path][1] = alloc_f(N), back[path] = alloc_f(N);
        h[path] = calloc(N, sizeof(uint16_t));
        for (int64_t n = N - 8; n <= N; n++) {   /* every tail length */
            nnt_cpu_round_f32(n, 10, x, r[path][0]);
            nnt_cpu_round_f32(n, 7, x, r[path][1]);
            nnt_cpu_f32_to_bf16(n, x, h[path]);
            nnt_cpu_bf16_to_f32(n, h[path], back[path]);
        }
    }
    ck_assert(memcmp(r[0][0], r[1][0], N * sizeof(float)) == 0);
    ck_assert(memcmp(r[0][1], r[1][1], N * sizeof(float)) == 0);
    ck_assert(memcmp(h[0], h[1], N * sizeof(uint16_t)) == 0);
    ck_assert(memcmp(back[0], back[1], N * sizeof(float)) == 0);
    /* and the bf16 bits are the 7-bit rounding's upper half */
    for (int64_t i = 0; i < N; i++) {
        uint32_t u;
        memcpy(&u, &r[1][1][i], sizeof u);
        ck_assert_msg((uint16_t)(u >> 16) == h[1][i], "element %lld", (long long)i);
    }
    uint32_t tie;   /* 0x3f808000: a tie to even (down), 0x3f818000: a tie up */
    memcpy(&tie, &back[1][3 * 8 + 1], sizeof tie);
    ck_assert_uint_eq(tie, 0x3f800000u);
    memcpy(&tie, &back[1][3 * 9 + 1], sizeof tie);
    ck_assert_uint_eq(tie, 0x3f820000u);
    for (int path = 0; path < 2; path++)
        free(r[path][0]), free(r[path][1]), free(h[path]), free(back[path]);
    free(x);
    nnt_cpu_isa_force(-1);
}
END_TEST

/* got (AVX2) against ref (portable), as doubles for expect_close */
#define expect_path(what, n, got, ref, tol, lo)                                                \
    do {                                                                                       \
        double *rd_ = to_d(n, ref);                                                            \
        expect_close_at(__LINE__, what, n, got, rd_, tol, lo);                                 \
        free(rd_);                                                                             \
    } while (0)

/* Every kernel with an AVX2 path, on sizes that leave every tail length, against the
 * portable path on the same inputs. */
START_TEST(test_isa_paths)
{
    if (!force_avx2("isa_paths"))
        return;
    rng_seed(31);
    const int64_t ns[] = {1, 7, 8, 13, 64, 771, 1536 + 5};
    for (size_t si = 0; si < sizeof ns / sizeof ns[0]; si++) {
        int64_t n = ns[si], rows = 3, nn = rows * n;
        float *x = rand_f(nn, -9, 9), *u = rand_f(nn, -2, 2), *dy = rand_f(nn, -1, 1);
        float *g = rand_f(n, 0.5f, 1.5f), *b = rand_f(n, -1, 1);
        float *a[2][6];
        float st[2][4][3];
        x[0] = -30.0f; /* GELU's and SiLU's far tails */
        if (nn > 1)
            x[1] = 30.0f;
        for (int path = 0; path < 2; path++) {
            nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
            for (int k = 0; k < 6; k++)
                a[path][k] = alloc_f(nn);
            nnt_cpu_gelu_fwd_f32(nn, x, a[path][0]);
            nnt_cpu_gelu_bwd_f32(nn, x, dy, a[path][1]);
            nnt_cpu_swiglu_fwd_f32(nn, x, u, a[path][2]);
            nnt_cpu_swiglu_bwd_f32(nn, x, u, dy, a[path][3], a[path][4]);
            nnt_cpu_layernorm_fwd_f32(rows, n, 1e-5f, x, g, b, a[path][5], st[path][0],
                                      st[path][1]);
        }
        expect_path("gelu fwd", nn, a[1][0], a[0][0], TOL_ISA_ELEM, 1e-3);
        expect_path("gelu bwd", nn, a[1][1], a[0][1], TOL_ISA_ELEM, 0.1);
        expect_path("swiglu fwd", nn, a[1][2], a[0][2], TOL_ISA_ELEM, 1e-3);
        expect_path("swiglu dgate", nn, a[1][3], a[0][3], TOL_ISA_ELEM, 0.1);
        expect_path("swiglu dup", nn, a[1][4], a[0][4], TOL_ISA_ELEM, 1e-3);
        expect_path("layernorm y", nn, a[1][5], a[0][5], TOL_ISA_NORM, 1.0);
        expect_path("layernorm mean", rows, st[1][0], st[0][0], TOL_ISA_NORM, 1.0);
        expect_path("layernorm rstd", rows, st[1][1], st[0][1], TOL_ISA_NORM, 0.0);
        for (int path = 0; path < 2; path++)
            for (int k = 0; k < 6; k++)
                free(a[path][k]);

        /* gpt-oss's clamped SwiGLU (limit 1.5: x beyond it and inside, u too) */
        for (int path = 0; path < 2; path++) {
            nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
            for (int k = 0; k < 3; k++)
                a[path][k] = alloc_f(nn);
            nnt_cpu_swiglu_clamp_fwd_f32(nn, 1.3f, 1.5f, x, u, a[path][0]);
            nnt_cpu_swiglu_clamp_bwd_f32(nn, 1.3f, 1.5f, x, u, dy, a[path][1], a[path][2]);
        }
        expect_path("swiglu_clamp fwd", nn, a[1][0], a[0][0], TOL_ISA_ELEM, 1e-3);
        expect_path("swiglu_clamp dgate", nn, a[1][1], a[0][1], TOL_ISA_ELEM, 0.1);
        expect_path("swiglu_clamp dup", nn, a[1][2], a[0][2], TOL_ISA_ELEM, 1e-3);
        for (int path = 0; path < 2; path++)
            for (int k = 0; k < 3; k++)
                free(a[path][k]);

        /* the exact GELU (relative to 1e-30 + |ref| forward, lo 0.1 backward) */
        for (int path = 0; path < 2; path++) {
            nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
            a[path][0] = alloc_f(nn);
            a[path][1] = alloc_f(nn);
            nnt_cpu_gelu_erf_fwd_f32(nn, x, a[path][0]);
            nnt_cpu_gelu_erf_bwd_f32(nn, x, dy, a[path][1]);
        }
        expect_path("gelu_erf fwd", nn, a[1][0], a[0][0], TOL_ISA_ELEM, 1e-30);
        expect_path("gelu_erf bwd", nn, a[1][1], a[0][1], TOL_ISA_ELEM, 0.1);
        for (int path = 0; path < 2; path++)
            free(a[path][0]), free(a[path][1]);

        /* norm backwards (dgamma, dbeta accumulate onto the same start), RMSNorm */
        float *gb[2][6];
        for (int path = 0; path < 2; path++) {
            nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
            gb[path][0] = alloc_f(nn);
            gb[path][1] = dup_f(n, b);
            gb[path][2] = dup_f(n, g);
            gb[path][3] = alloc_f(nn);
            gb[path][4] = dup_f(n, b);
            gb[path][5] = alloc_f(nn);
            nnt_cpu_layernorm_bwd_f32(rows, n, x, dy, g, st[0][0], st[0][1], gb[path][0],
                                      gb[path][1], gb[path][2]);
            nnt_cpu_rmsnorm_fwd_f32(rows, n, 1e-5f, x, g, gb[path][3], st[path][2]);
            nnt_cpu_rmsnorm_bwd_f32(rows, n, x, dy, g, st[0][2], gb[path][5], gb[path][4]);
        }
        expect_path("layernorm dx", nn, gb[1][0], gb[0][0], TOL_ISA_NORM, 1.0);
        expect_path("layernorm dgamma", n, gb[1][1], gb[0][1], TOL_ISA_NORM, 1.0);
        expect_path("layernorm dbeta", n, gb[1][2], gb[0][2], TOL_ISA_NORM, 1.0);
        expect_path("rmsnorm y", nn, gb[1][3], gb[0][3], TOL_ISA_NORM, 1.0);
        expect_path("rmsnorm rstd", rows, st[1][2], st[0][2], TOL_ISA_NORM, 0.0);
        expect_path("rmsnorm dgamma", n, gb[1][4], gb[0][4], TOL_ISA_NORM, 1.0);
        expect_path("rmsnorm dx", nn, gb[1][5], gb[0][5], TOL_ISA_NORM, 1.0);
        for (int path = 0; path < 2; path++)
            for (int k = 0; k < 6; k++)
                free(gb[path][k]);

        /* cross-entropy over two vocabulary blocks of n (rows of ld = 2 n + 1) */
        int64_t ld = 2 * n + 1;
        float *lg = rand_f(rows * ld, -12, 12), xs[2][3][3], *dl[2];
        int32_t t[3] = {0, (int32_t)(2 * n - 1), -100};
        for (int path = 0; path < 2; path++) {
            nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
            for (int r = 0; r < 3; r++)
                xs[path][0][r] = -INFINITY, xs[path][1][r] = 0.0f, xs[path][2][r] = 0.0f;
            for (int c = 0; c < 2; c++)
                nnt_cpu_xent_fwd_block_f32(rows, n, c * n, lg + c * n, ld, t, xs[path][0],
                                           xs[path][1], xs[path][2], NULL);
            dl[path] = alloc_f(rows * ld);
            for (int c = 0; c < 2; c++)
                nnt_cpu_xent_bwd_block_f32(rows, n, c * n, lg + c * n, ld, t, -100, xs[0][0],
                                           xs[0][1], NULL, 0.5f, 0.0f, 2 * n,
                                           dl[path] + c * n);
        }
        expect_path("xent max", rows, xs[1][0], xs[0][0], 0.0, 0.0);
        expect_path("xent sum", rows, xs[1][1], xs[0][1], TOL_ISA_XENT, 0.0);
        expect_path("xent target", rows, xs[1][2], xs[0][2], 0.0, 0.0);
        expect_path("xent dlogits", rows * ld, dl[1], dl[0], TOL_ISA_XENT, 1e-30);
        free(dl[0]), free(dl[1]), free(lg);

        /* softmax rows (cross-entropy's and attention's): exponentials in place and their
         * sum, the softmax gradient row */
        float *sx[2], *sp[2], *sd[2], ssum[2];
        for (int path = 0; path < 2; path++) {
            nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
            sx[path] = dup_f(n, u); /* not x: its +-30 would leave one term in the sum */
            float mx = nnt_cpu_row_max_f32(n, sx[path]);
            ssum[path] = nnt_cpu_row_exp_f32(n, sx[path], mx);
            sp[path] = dup_f(n, u), sd[path] = dup_f(n, dy);
            nnt_cpu_row_softmax_grad_f32(n, sp[path], sd[path], mx + 0.5f, 0.25f);
        }
        expect_path("row exp", n, sx[1], sx[0], TOL_ISA_ROWEXP, 0.0);
        expect_path("row exp sum", 1, &ssum[1], &ssum[0], TOL_ISA_XENT, 0.0);
        expect_path("softmax grad p", n, sp[1], sp[0], TOL_ISA_ROWEXP, 0.0);
        expect_path("softmax grad ds", n, sd[1], sd[0], TOL_ISA_ROWEXP, 0.0);
        for (int path = 0; path < 2; path++)
            free(sx[path]), free(sp[path]), free(sd[path]);

        /* attention (a q block of n rows over a key block of n + 3 keys that starts 2
         * positions earlier: every row length from 3 to n + 2, so every tail) */
        if (n <= 771) {
            int64_t nbh = 2, tq = n, tk = n + 3, hd = 9;
            float *aq = rand_f(nbh * tq * hd, -2, 2), *ak = rand_f(nbh * tk * hd, -2, 2);
            float *av = rand_f(nbh * tk * hd, -1, 1), *ado = rand_f(nbh * tq * hd, -1, 1);
            float *ao[2], *alse[2], *adq[2], *adk[2], *adv[2];
            for (int path = 0; path < 2; path++) {
                nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
                float *am = alloc_f(nbh * tq), *al = alloc_f(nbh * tq), *ad = alloc_f(nbh * tq);
                for (int64_t i = 0; i < nbh * tq; i++)
                    am[i] = -INFINITY;
                ao[path] = alloc_f(nbh * tq * hd), alse[path] = alloc_f(nbh * tq);
                adq[path] = alloc_f(nbh * tq * hd), adk[path] = alloc_f(nbh * tk * hd);
                adv[path] = alloc_f(nbh * tk * hd);
                nnt_cpu_attn_fwd_block_f32(nbh, tq, tk, hd, 2, 0, 0.3f, aq, ak, av, ao[path],
                                           am, al);
                nnt_cpu_attn_fwd_finalize_f32(nbh, tq, hd, ao[path], am, al, alse[path]);
                nnt_cpu_attn_bwd_prep_f32(nbh, tq, hd, ao[path], ado, ad);
                nnt_cpu_attn_bwd_block_f32(nbh, tq, tk, hd, 2, 0, 0.3f, aq, ak, av, ado,
                                           alse[path], ad, adq[path], adk[path], adv[path]);
                free(am), free(al), free(ad);
            }
            expect_path("attention o", nbh * tq * hd, ao[1], ao[0], TOL_ISA_ATTN, 1.0);
            expect_path("attention lse", nbh * tq, alse[1], alse[0], TOL_ISA_ATTN, 1.0);
            expect_path("attention dq", nbh * tq * hd, adq[1], adq[0], TOL_ISA_ATTN, 1.0);
            expect_path("attention dk", nbh * tk * hd, adk[1], adk[0], TOL_ISA_ATTN, 1.0);
            expect_path("attention dv", nbh * tk * hd, adv[1], adv[0], TOL_ISA_ATTN, 1.0);
            for (int path = 0; path < 2; path++)
                free(ao[path]), free(alse[path]), free(adq[path]), free(adk[path]),
                    free(adv[path]);
            free(aq), free(ak), free(av), free(ado);
        }

        /* Adam and AdamW: the same bits */
        for (int dec = 0; dec < 2; dec++) {
            float *p[2], *m[2], *v[2];
            for (int path = 0; path < 2; path++) {
                nnt_cpu_isa_force(path ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
                p[path] = dup_f(nn, u), m[path] = dup_f(nn, dy), v[path] = alloc_f(nn);
                for (int64_t i = 0; i < nn; i++)
                    v[path][i] = fabsf(x[i]);
                nnt_cpu_adam_step_f32(nn, dec, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.19f, 0.002f,
                                      0.7f, x, p[path], m[path], v[path]);
            }
            ck_assert(memcmp(p[0], p[1], (size_t)nn * sizeof(float)) == 0);
            ck_assert(memcmp(m[0], m[1], (size_t)nn * sizeof(float)) == 0);
            ck_assert(memcmp(v[0], v[1], (size_t)nn * sizeof(float)) == 0);
            for (int path = 0; path < 2; path++)
                free(p[path]), free(m[path]), free(v[path]);
        }
        free(x), free(u), free(dy), free(g), free(b);
    }
    nnt_cpu_isa_force(-1);
}
END_TEST

/* The AVX2 path's AVX-512 steps (nnt_cpu_avx512) give its 8-float steps' bits: the softmax
 * rows (exponentials in place or summed only, the softmax gradient), with every length of
 * tail and of 8-float step, specials among the values, and the cross-entropy and attention
 * kernels that use them. */
static void isa_rows_at(int level, int64_t n, const float *x, const float *dy, float *out[4],
                        float sums[2])
{
    ck_assert_int_eq(nnt_cpu_avx512_force(level), level);
    out[0] = dup_f(n, x), out[1] = dup_f(n, x), out[2] = dup_f(n, dy);
    sums[0] = nnt_cpu_row_exp_f32(n, out[0], 0.75f);
    sums[1] = nnt_cpu_row_sumexp_f32(n, x, -0.5f);
    nnt_cpu_row_softmax_grad_f32(n, out[1], out[2], 1.5f, 0.25f);
    int64_t nbh = 2, tq = n, tk = n + 3, hd = 5;   /* a key block 3 positions longer */
    float *q = rand_f(nbh * tq * hd, -2, 2), *k = rand_f(nbh * tk * hd, -2, 2);
    float *v = rand_f(nbh * tk * hd, -1, 1), *ml = alloc_f(3 * nbh * tq);
    for (int64_t i = 0; i < nbh * tq; i++)
        ml[i] = -INFINITY;
    out[3] = alloc_f(nbh * tq * hd);
    nnt_cpu_attn_fwd_block_f32(nbh, tq, tk, hd, 2, 0, 0.3f, q, k, v, out[3], ml, ml + nbh * tq);
    free(q), free(k), free(v), free(ml);
}

START_TEST(test_isa_avx512)
{
    if (!force_avx2("isa_avx512"))
        return;
    const int top = nnt_cpu_avx512_force(-1);
    if (top == 0) {
        printf("isa_avx512: this CPU has no AVX-512F: its steps are not used\n");
        nnt_cpu_isa_force(-1);
        return;
    }
    for (int64_t n = 1; n <= 49; n += (n < 40 ? 1 : 9)) {
        rng_seed(97 + (unsigned)n);
        float *x = rand_f(n, -6, 6), *dy = rand_f(n, -1, 1), *a[2][4], sums[2][2];
        if (n > 5 && n % 2 == 0)   /* an infinity, a NaN (odd n: none, the sums finite) */
            x[n / 2] = INFINITY, x[n / 3] = NAN, x[n - 1] = -200.0f;
        for (int level = 0; level < 2; level++) {
            rng_seed(5);   /* the attention's operands: the same at both levels */
            isa_rows_at(level ? top : 0, n, x, dy, a[level], sums[level]);
        }
        const int64_t len[4] = {n, n, n, 2 * n * 5};
        for (int i = 0; i < 4; i++)
            ck_assert_msg(memcmp(a[0][i], a[1][i], (size_t)len[i] * sizeof(float)) == 0,
                          "n %lld: output %d of AVX-512 level %d differs from AVX2's",
                          (long long)n, i, top);
        ck_assert_msg(memcmp(sums[0], sums[1], sizeof sums[0]) == 0,
                      "n %lld: the sums differ (%.9g %.9g against %.9g %.9g)", (long long)n,
                      (double)sums[1][0], (double)sums[1][1], (double)sums[0][0],
                      (double)sums[0][1]);
        for (int level = 0; level < 2; level++)
            for (int i = 0; i < 4; i++)
                free(a[level][i]);
        free(x), free(dy);
    }
    printf("isa_avx512: AVX-512 level %d gives the AVX2 steps' bits\n", top);
    nnt_cpu_avx512_force(-1);
    nnt_cpu_isa_force(-1);
}
END_TEST

/* The softmax rows' maximum (nnt_cpu_row_max_f32) on every path: the largest value of rows of
 * every length to 200 (AVX-512: the 64-float steps, 16-float steps and every masked tail),
 * the largest placed first, last, in the middle and at every tail position, and -inf and inf
 * among the values. */
static float row_max_reference(int64_t n, const float *x)
{
    float m = x[0];
    for (int64_t j = 1; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

START_TEST(test_isa_row_max)
{
    const int top = nnt_cpu_avx512_force(-1);
    for (int path = 0; path < 3; path++) {
        if (path > 0 && !force_avx2("isa_row_max"))
            break;
        if (path == 2 && top == 0)
            break;
        if (path == 0)
            nnt_cpu_isa_force(NNT_CPU_ISA_GENERIC);
        else
            nnt_cpu_avx512_force(path == 2 ? top : 0);
        for (int64_t n = 1; n <= 200; n++) {
            rng_seed(31 + (unsigned)n);
            float *x = rand_f(n, -50, -1);
            int64_t at[5] = {0, n - 1, n / 2, n - 1 - n % 16, n / 64 * 64};
            for (int a = 0; a < 5; a++) {
                int64_t i = at[a] < 0 ? 0 : at[a] < n ? at[a] : n - 1;
                float keep = x[i];
                x[i] = 3.5f + (float)a;
                if (n > 2)
                    x[(i + 1) % n] = -INFINITY;
                ck_assert_msg(nnt_cpu_row_max_f32(n, x) == row_max_reference(n, x),
                              "path %d, n %lld, largest at %lld: %.9g against %.9g", path,
                              (long long)n, (long long)i, (double)nnt_cpu_row_max_f32(n, x),
                              (double)row_max_reference(n, x));
                x[i] = keep;
            }
            x[n / 3] = INFINITY;
            ck_assert(nnt_cpu_row_max_f32(n, x) == INFINITY);
            free(x);
        }
    }
    nnt_cpu_avx512_force(-1);
    nnt_cpu_isa_force(-1);
}
END_TEST

/* NNT_CPU_ISA=generic forces the portable path; unset, the CPU decides */
START_TEST(test_isa_env)
{
    ck_assert_int_eq(setenv("NNT_CPU_ISA", "generic", 1), 0);
    nnt_cpu_isa_force(-1);
    ck_assert_int_eq(nnt_cpu_isa(), NNT_CPU_ISA_GENERIC);
    ck_assert_str_eq(nnt_cpu_isa_name(), "generic");
    ck_assert_int_eq(unsetenv("NNT_CPU_ISA"), 0);
    nnt_cpu_isa_force(-1);
#if NNT_CPU_X86
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    int avx2 = 0;
#endif
    ck_assert_int_eq(nnt_cpu_isa(), avx2 ? NNT_CPU_ISA_AVX2 : NNT_CPU_ISA_GENERIC);
    ck_assert_str_eq(nnt_cpu_isa_name(), avx2 ? "avx2" : "generic");
}
END_TEST

/* ---- sliding-window attention: the scratch-free fallback against the chunked path ------- */

/* Measured 2.2e-7 (the same sums in another order: one key at a time against GEMMs) */
#define WIN_TOL 2.2e-6

START_TEST(test_attention_window_noscratch)
{
    /* (q_pos0, k_pos0, window): blocks cut by the window at the start, the end, both, none */
    static const int64_t cases[][3] = {{0, 0, 1}, {0, 0, 3}, {16, 0, 5}, {8, 4, 7}, {40, 0, 9},
                                       {20, 12, 2}, {5, 0, 200}};
    const int64_t nbh = 2, tq = 11, tk = 13, hd = 5;
    const nnt_attn_map mha = {nbh, 1, 1, 0, 1, 1, 0, 0};
    float *q = test_random_f32(nbh * tq * hd, 5, -1, 1), *k = test_random_f32(nbh * tk * hd, 6, -1, 1),
          *v = test_random_f32(nbh * tk * hd, 7, -1, 1), *dout = test_random_f32(nbh * tq * hd, 8, -1, 1);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float o[2][110], m[2][22], l[2][22], lse[22], d[22], dq[2][110], dk[2][130], dv[2][130];
        float cap = c % 2 ? 0.7f : 0.0f;   /* Gemma 2's soft-cap in every other case */
        for (int path = 0; path < 2; path++) {
            for (int i = 0; i < 22; i++)
                m[path][i] = -INFINITY, l[path][i] = 0.0f;
            memset(o[path], 0, sizeof o[path]);
            memset(dq[path], 0, sizeof dq[path]);
            memset(dk[path], 0, sizeof dk[path]);
            memset(dv[path], 0, sizeof dv[path]);
            (path ? noscratch_attn_fwd_window : nnt_cpu_attn_fwd_window_f32)(
                NULL, &mha, tq, tk, hd, cases[c][0], cases[c][1], cases[c][2], 0.4f, cap, q, k, v,
                o[path], m[path], l[path]);
            nnt_cpu_attn_fwd_finalize_f32(nbh, tq, hd, o[path], m[path], l[path], lse);
            nnt_cpu_attn_bwd_prep_f32(nbh, tq, hd, o[path], dout, d);
            (path ? noscratch_attn_bwd_window : nnt_cpu_attn_bwd_window_f32)(
                NULL, &mha, tq, tk, hd, cases[c][0], cases[c][1], cases[c][2], 0.4f, cap, q, k, v,
                dout, lse, d, dq[path], dk[path], dv[path]);
        }
        EXPECT_TOL(test_rel_err(o[1], o[0], 110), WIN_TOL, "window o, case %d", (int)c);
        /* window 1: p = 1, so dq and dk are 0 up to rounding: compared absolutely */
        double eq = test_rel_err(dq[1], dq[0], 110), ek = test_rel_err(dk[1], dk[0], 130);
        if (cases[c][2] == 1) {
            eq = ek = 0;
            for (int i = 0; i < 110; i++)
                eq = fmax(eq, fabs((double)dq[1][i] - dq[0][i]));
            for (int i = 0; i < 130; i++)
                ek = fmax(ek, fabs((double)dk[1][i] - dk[0][i]));
        }
        EXPECT_TOL(eq, WIN_TOL, "window dq, case %d", (int)c);
        EXPECT_TOL(ek, WIN_TOL, "window dk, case %d", (int)c);
        EXPECT_TOL(test_rel_err(dv[1], dv[0], 130), WIN_TOL, "window dv, case %d", (int)c);
    }
    free(q), free(k), free(v), free(dout);
}
END_TEST

/* ---- packed examples: per-query positions against a direct computation ------------------ */

/* Measured 3.4e-7 (max |error| / max |value| of o, dq, dk, dv against double sums; both
 * paths) */
#define PACKED_TOL 3.4e-6
#define PT 23   /* sequence length; tiles of 7 rows and keys cut the examples */
#define PHD 6

/* o, dq, dk, dv (T, hd) of one sequence in double: the query at i with position pos[i] sees
 * the keys max(i - pos[i], i - w + 1) .. i (w 0: no window), scores scaled, capped (cap 0:
 * not), softmax; the gradients of sum(o * dout). */
static void ref_packed(int64_t T, int64_t hd, const int32_t *pos, int64_t w, double scale,
                       double cap, const float *q, const float *k, const float *v,
                       const float *dout, double *o, double *dq, double *dk, double *dv)
{
    memset(dq, 0, (size_t)(T * hd) * sizeof *dq), memset(dk, 0, (size_t)(T * hd) * sizeof *dk);
    memset(dv, 0, (size_t)(T * hd) * sizeof *dv);
    double *sc = alloc_d(T), *g = alloc_d(T), *p = alloc_d(T), *dp = alloc_d(T);
    for (int64_t i = 0; i < T; i++) {
        int64_t lo = i - pos[i];
        if (w > 0 && i - w + 1 > lo)
            lo = i - w + 1;
        double mx = -INFINITY, sum = 0.0, pdp = 0.0;
        for (int64_t j = lo; j <= i; j++) {
            double x = 0.0;
            for (int64_t c = 0; c < hd; c++)
                x += (double)q[i * hd + c] * k[j * hd + c];
            x *= scale;
            g[j] = 1.0;
            if (cap > 0.0) {
                double t = tanh(x / cap);
                x = cap * t, g[j] = 1.0 - t * t;
            }
            sc[j] = x, mx = fmax(mx, x);
        }
        for (int64_t j = lo; j <= i; j++)
            sum += (p[j] = exp(sc[j] - mx));
        for (int64_t c = 0; c < hd; c++)
            o[i * hd + c] = 0.0;
        for (int64_t j = lo; j <= i; j++) {
            p[j] /= sum;
            dp[j] = 0.0;
            for (int64_t c = 0; c < hd; c++) {
                o[i * hd + c] += p[j] * v[j * hd + c];
                dp[j] += (double)dout[i * hd + c] * v[j * hd + c];
            }
            pdp += p[j] * dp[j];
        }
        for (int64_t j = lo; j <= i; j++) {
            double ds = p[j] * (dp[j] - pdp) * g[j];
            for (int64_t c = 0; c < hd; c++) {
                dv[j * hd + c] += p[j] * dout[i * hd + c];
                dq[i * hd + c] += scale * ds * k[j * hd + c];
                dk[j * hd + c] += scale * ds * q[i * hd + c];
            }
        }
    }
    free(sc), free(g), free(p), free(dp);
}

/* max |got - want| / max |want| */
static double max_rel(const float *got, const double *want, int64_t n)
{
    double e = 0.0, top = 0.0;
    for (int64_t i = 0; i < n; i++)
        e = fmax(e, fabs(got[i] - want[i])), top = fmax(top, fabs(want[i]));
    return e / top;
}

/* The _packed kernels over tiles of 7 (query tile, key tile) pairs, as the tensor operation
 * submits them: examples of 5, 9, 1, 8 tokens (and 1, 14, 8 in the second layout) cut by
 * the tiles, with and without a window of 4, with and without a soft-cap; both paths. */
START_TEST(test_attention_packed)
{
    static const int64_t starts[2][5] = {{0, 5, 14, 15, PT}, {0, 1, 15, PT, PT}};
    const nnt_attn_map one = {1, 1, 1, 0, 1, 1, 0, 0};
    const int64_t tile = 7;
    float *q = test_random_f32(PT * PHD, 15, -1, 1), *k = test_random_f32(PT * PHD, 16, -1, 1),
          *v = test_random_f32(PT * PHD, 17, -1, 1), *dout = test_random_f32(PT * PHD, 18, -1, 1);
    double worst = 0.0;
    for (int layout = 0; layout < 2; layout++)
        for (int variant = 0; variant < 4; variant++) {
            int64_t w = variant & 1 ? 4 : 0;
            float cap = variant & 2 ? 0.5f : 0.0f, scale = 0.45f;
            int32_t pos[PT];
            for (int64_t i = 0, e = 0; i < PT; i++) {
                while (starts[layout][e + 1] <= i)
                    e++;
                pos[i] = (int32_t)(i - starts[layout][e]);
            }
            double ro[PT * PHD], rdq[PT * PHD], rdk[PT * PHD], rdv[PT * PHD];
            ref_packed(PT, PHD, pos, w, scale, cap, q, k, v, dout, ro, rdq, rdk, rdv);
            for (int path = 0; path < 2; path++) {
                float o[PT * PHD] = {0}, m[PT], l[PT], lse[PT], d[PT];
                float dq[PT * PHD] = {0}, dk[PT * PHD] = {0}, dv[PT * PHD] = {0};
                for (int64_t i = 0; i < PT; i++)
                    m[i] = -INFINITY, l[i] = 0.0f;
                for (int64_t q0 = 0; q0 < PT; q0 += tile) {
                    int64_t tq = PT - q0 < tile ? PT - q0 : tile;
                    for (int64_t k0 = 0; k0 <= q0; k0 += tile) {
                        int64_t tk = PT - k0 < tile ? PT - k0 : tile;
                        (path ? noscratch_attn_fwd_packed : nnt_cpu_attn_fwd_packed_f32)(
                            NULL, &one, tq, tk, PHD, q0, k0, w, pos + q0, scale, cap,
                            q + q0 * PHD, k + k0 * PHD, v + k0 * PHD, o + q0 * PHD, m + q0,
                            l + q0);
                    }
                }
                nnt_cpu_attn_fwd_finalize_f32(1, PT, PHD, o, m, l, lse);
                nnt_cpu_attn_bwd_prep_f32(1, PT, PHD, o, dout, d);
                for (int64_t q0 = 0; q0 < PT; q0 += tile) {
                    int64_t tq = PT - q0 < tile ? PT - q0 : tile;
                    for (int64_t k0 = 0; k0 <= q0; k0 += tile) {
                        int64_t tk = PT - k0 < tile ? PT - k0 : tile;
                        (path ? noscratch_attn_bwd_packed : nnt_cpu_attn_bwd_packed_f32)(
                            NULL, &one, tq, tk, PHD, q0, k0, w, pos + q0, scale, cap,
                            q + q0 * PHD, k + k0 * PHD, v + k0 * PHD, dout + q0 * PHD,
                            lse + q0, d + q0, dq + q0 * PHD, dk + k0 * PHD, dv + k0 * PHD);
                    }
                }
                double e[4] = {max_rel(o, ro, PT * PHD), max_rel(dq, rdq, PT * PHD),
                               max_rel(dk, rdk, PT * PHD), max_rel(dv, rdv, PT * PHD)};
                for (int x = 0; x < 4; x++) {
                    EXPECT_TOL(e[x], PACKED_TOL, "packed %s, layout %d, window %lld, cap %g, %s",
                               (const char *[]){"o", "dq", "dk", "dv"}[x], layout, (long long)w,
                               (double)cap, path ? "scratch-free" : "chunked");
                    worst = fmax(worst, e[x]);
                }
            }
        }
    printf("test_cpu_kernels attention_packed: worst error %.2e\n", worst);
    free(q), free(k), free(v), free(dout);
}
END_TEST

/* max |got - want| / max |want| over n floats */
static double max_rel_f(const float *got, const float *want, int64_t n)
{
    double e = 0.0, top = 0.0;
    for (int64_t i = 0; i < n; i++)
        e = fmax(e, fabs((double)got[i] - want[i])), top = fmax(top, fabs((double)want[i]));
    return top > 0.0 ? e / top : e;
}

/* One pass of the _packed kernels over tiles of BTILE query rows and keys of a BT-token
 * sequence of BHD-dim heads (map: float or bf16 products; dnnl for the latter): o, dq, dk, dv */
#define BT 61
#define BHD 16
#define BTILE 24
static void packed_pass(const nnt_attn_map *mp, nnt_dnnl_cache *dnnl, const int32_t *pos,
                        int64_t w, float scale, float cap, const float *q, const float *k,
                        const float *v, const float *dout, float *out[4])
{
    float *o = out[0], *dq = out[1], *dk = out[2], *dv = out[3];
    float m[BT], l[BT], lse[BT], d[BT];
    for (int i = 0; i < 4; i++)
        memset(out[i], 0, BT * BHD * sizeof(float));
    for (int64_t i = 0; i < BT; i++)
        m[i] = -INFINITY, l[i] = 0.0f;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            nnt_cpu_attn_fwd_finalize_f32(1, BT, BHD, o, m, l, lse);
            nnt_cpu_attn_bwd_prep_f32(1, BT, BHD, o, dout, d);
        }
        for (int64_t q0 = 0; q0 < BT; q0 += BTILE)
            for (int64_t k0 = 0; k0 <= q0; k0 += BTILE) {
                int64_t tq = BT - q0 < BTILE ? BT - q0 : BTILE;
                int64_t tk = BT - k0 < BTILE ? BT - k0 : BTILE;
                if (pass == 0)
                    nnt_cpu_attn_fwd_packed_f32(dnnl, mp, tq, tk, BHD, q0, k0, w, pos + q0,
                                                scale, cap, q + q0 * BHD, k + k0 * BHD,
                                                v + k0 * BHD, o + q0 * BHD, m + q0, l + q0);
                else
                    nnt_cpu_attn_bwd_packed_f32(dnnl, mp, tq, tk, BHD, q0, k0, w, pos + q0,
                                                scale, cap, q + q0 * BHD, k + k0 * BHD,
                                                v + k0 * BHD, dout + q0 * BHD, lse + q0, d + q0,
                                                dq + q0 * BHD, dk + k0 * BHD, dv + k0 * BHD);
            }
    }
}

/* Measured (AMD Zen 5), max |error| / max |value| of o, dq, dk, dv against double sums: float
 * products 2.5e-7 at every band level; bf16 products 4.4e-3 (bf16 operands). The bf16 band
 * products against oneDNN's: 4.3e-8 here (another sum order); a p or ds value that one of them
 * rounds to the neighbouring bf16 moves an output by up to 5.2e-5 (test_attention_bf16's
 * measurement on Zen 4, one value in some 40000), which the last bound allows. */
#define PACKED_BAND_TOL 2.5e-6
#define PACKED_BF16_TOL 4.4e-2
#define PACKED_BF16_PATHS 2.3e-4

/* The _packed kernels with tiles of 24 (groups of 8 rows: the band products' paths, where the
 * tiles of 7 above take the GEMMs): examples of 9, 21, 1, 19 and 11 tokens (odd starts: a
 * group's keys, and the bf16 pairs, cut by them), with and without a window of 11 and a
 * soft-cap. Float products at every band level against double sums; under bf16 products the
 * bf16 band products and oneDNN's against double sums within bf16's error and against each
 * other. */
START_TEST(test_attention_packed_band)
{
    static const int64_t starts[] = {0, 9, 30, 31, 50, BT};
    const nnt_attn_map f32 = {1, 1, 1, 0, 1, 1, 0, 0}, b16 = {1, 1, 1, 0, 1, 1, 0, 1};
    float *q = test_random_f32(BT * BHD, 25, -1, 1), *k = test_random_f32(BT * BHD, 26, -1, 1);
    float *v = test_random_f32(BT * BHD, 27, -1, 1), *dout = test_random_f32(BT * BHD, 28, -1, 1);
    float *out[2][4];
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 4; i++)
            out[p][i] = alloc_f(BT * BHD);
    double *ref[4] = {alloc_d(BT * BHD), alloc_d(BT * BHD), alloc_d(BT * BHD), alloc_d(BT * BHD)};
    int32_t pos[BT];
    for (int64_t i = 0, e = 0; i < BT; i++) {
        while (starts[e + 1] <= i)
            e++;
        pos[i] = (int32_t)(i - starts[e]);
    }
    nnt_dnnl_cache *dnnl = nnt_cpu_dnnl_cache_create();
    int bf16 = dnnl && nnt_cpu_dnnl_bf16_isa();
    double worst[3] = {0.0, 0.0, 0.0};
    static const char *const names[4] = {"o", "dq", "dk", "dv"};
    for (int variant = 0; variant < 4; variant++) {
        int64_t w = variant & 1 ? 11 : 0;
        float cap = variant & 2 ? 0.5f : 0.0f, scale = 0.4f;
        ref_packed(BT, BHD, pos, w, scale, cap, q, k, v, dout, ref[0], ref[1], ref[2], ref[3]);
        for (int level = nnt_cpu_band_level(); level >= 0; level--) {
            ck_assert_int_eq(nnt_cpu_band_force(level), level);
            packed_pass(&f32, NULL, pos, w, scale, cap, q, k, v, dout, out[0]);
            for (int i = 0; i < 4; i++) {
                double e = max_rel(out[0][i], ref[i], BT * BHD);
                EXPECT_TOL(e, PACKED_BAND_TOL, "packed band %s, window %lld, cap %g, level %d",
                           names[i], (long long)w, (double)cap, level);
                worst[0] = fmax(worst[0], e);
            }
        }
        nnt_cpu_band_force(-1);
        if (!bf16)
            continue;
        for (int p = 0; p < 2; p++) {   /* the bf16 band products where the CPU has them */
            nnt_cpu_band16_force(p == 0 ? -1 : 0);
            packed_pass(&b16, dnnl, pos, w, scale, cap, q, k, v, dout, out[p]);
        }
        nnt_cpu_band16_force(-1);
        for (int i = 0; i < 4; i++) {
            for (int p = 0; p < 2; p++) {
                double e = max_rel(out[p][i], ref[i], BT * BHD);
                EXPECT_TOL(e, PACKED_BF16_TOL, "packed bf16 %s, window %lld, cap %g, %s",
                           names[i], (long long)w, (double)cap, p ? "oneDNN" : "default");
                worst[1] = fmax(worst[1], e);
            }
            double e = max_rel_f(out[0][i], out[1][i], BT * BHD);
            EXPECT_TOL(e, PACKED_BF16_PATHS, "packed bf16 %s, window %lld, cap %g: the two paths",
                       names[i], (long long)w, (double)cap);
            worst[2] = fmax(worst[2], e);
        }
    }
    printf("test_cpu_kernels attention_packed_band: worst error %.2e (float), %.2e (bf16), "
           "%.2e between the bf16 paths%s\n", worst[0], worst[1], worst[2],
           bf16 ? (nnt_cpu_band16_level() ? "" : " (no bf16 band products here: both oneDNN's)")
                : " (no oneDNN bf16 here: not run)");
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 4; i++)
            free(out[p][i]);
    for (int i = 0; i < 4; i++)
        free(ref[i]);
    free(q), free(k), free(v), free(dout);
    nnt_cpu_dnnl_cache_destroy(dnnl);
}
END_TEST


/* The band drivers (a query tile over its band of key tiles, the op's band tasks) against the
 * block kernels over the same tiles in the same order. Where the band products run, a band
 * driver takes its key tiles as one block of keys (one softmax a row over them; dk, dv in other
 * sums), within rounding of the blocks, normwise, measured (AMD Zen 5): float 1.6e-7; bf16 o,
 * dq, dk 1.5e-3 (p rounded to bf16 after one softmax over the band, not a running one), lse
 * 3.9e-8, dv 0. Elsewhere (the portable path, bf16 without the bf16 band products) it calls
 * the block kernels a key tile at a time: their bits. A sequence of BT tokens in tiles of
 * BTILE, each tile a buffer of its own (slabs of the map's tiles, as the op's tiles);
 * multi-head over 2 batch rows, grouped-query and multi-query maps; a window that cuts tiles,
 * one of 30 keys, a soft-cap, packed examples, and bf16 products where oneDNN has them. Query
 * tiles go in decreasing order for both, each dk, dv tile starting at its first task. The copy
 * without scratch refuses (-1) and writes nothing. */
#define BAND_TOL_F32 1.6e-6
#define BAND_TOL_BF16 1.5e-2
#define BAND_TOL_BF16_EXACT 4e-7   /* lse and dv under bf16 */
#define BAND_NT ((BT + BTILE - 1) / BTILE)
static int64_t band_rows(int t)
{
    return BT - t * BTILE < BTILE ? BT - t * BTILE : BTILE;
}

static float *band_tile(int64_t slabs, int t, unsigned seed)   /* random (slabs, rows, BHD) */
{
    return test_random_f32(slabs * band_rows(t) * BHD, seed, -1, 1);
}

/* out[x][t]: o, lse, dq, dk, dv tiles; band 1: the band drivers, 0: the block kernels */
static void band_pass(const nnt_attn_map *mp, nnt_dnnl_cache *dnnl, int band, int64_t w,
                      float cap, const int32_t *const *pos, float *const *q, float *const *k,
                      float *const *v, float *const *dout, float *out[5][BAND_NT])
{
    const int64_t nq = mp->nb * mp->q_hs, nkv = mp->nb * mp->kv_hs;
    const float scale = 0.3f;
    int started[BAND_NT] = {0};
    for (int pass = 0; pass < 2; pass++)
        for (int i = pass ? BAND_NT - 1 : 0; pass ? i >= 0 : i < BAND_NT; i += pass ? -1 : 1) {
            const int64_t tq = band_rows(i), q0 = (int64_t)i * BTILE;
            int j0 = 0;   /* the first key tile not wholly before the window of query q0 */
            while (w > 0 && (int64_t)(j0 + 1) * BTILE - 1 <= q0 - w)
                j0++;
            int64_t tk[BAND_NT], kp[BAND_NT];
            const float *kk[BAND_NT], *vv[BAND_NT];
            float *dk[BAND_NT], *dv[BAND_NT];
            int start[BAND_NT];
            for (int j = j0; j <= i; j++) {
                tk[j - j0] = band_rows(j), kp[j - j0] = (int64_t)j * BTILE;
                kk[j - j0] = k[j], vv[j - j0] = v[j];
                dk[j - j0] = out[3][j], dv[j - j0] = out[4][j];
                start[j - j0] = pass && !started[j];
                started[j] |= pass;
            }
            nnt_attn_keys keys = {i - j0 + 1, tk, kp, kk, vv, dk, dv, start};
            float *o = out[0][i], *lse = out[1][i], *dq = out[2][i];
            if (band && pass == 0) {
                ck_assert_int_eq(nnt_cpu_attn_fwd_band_f32(dnnl, mp, tq, BHD, q0, w, pos[i],
                                                           scale, cap, &keys, q[i], o, lse), 0);
                continue;
            }
            if (band) {
                ck_assert_int_eq(nnt_cpu_attn_bwd_band_f32(dnnl, mp, tq, BHD, q0, w, pos[i],
                                                           scale, cap, &keys, q[i], o, dout[i],
                                                           lse, dq), 0);
                continue;
            }
            float *m = alloc_f(nq * tq), *l = alloc_f(nq * tq), *d = alloc_f(nq * tq);
            if (pass == 0) {
                for (int64_t r = 0; r < nq * tq; r++)
                    m[r] = -INFINITY, l[r] = 0.0f;
                memset(o, 0, (size_t)(nq * tq * BHD) * sizeof(float));
            } else {
                nnt_cpu_attn_bwd_prep_f32(nq, tq, BHD, o, dout[i], d);
                memset(dq, 0, (size_t)(nq * tq * BHD) * sizeof(float));
            }
            for (int j = 0; j < keys.n; j++) {
                if (pass == 0) {
                    nnt_cpu_attn_fwd_packed_f32(dnnl, mp, tq, tk[j], BHD, q0, kp[j], w, pos[i],
                                                scale, cap, q[i], kk[j], vv[j], o, m, l);
                    continue;
                }
                if (start[j]) {
                    memset(dk[j], 0, (size_t)(nkv * tk[j] * BHD) * sizeof(float));
                    memset(dv[j], 0, (size_t)(nkv * tk[j] * BHD) * sizeof(float));
                }
                nnt_cpu_attn_bwd_packed_f32(dnnl, mp, tq, tk[j], BHD, q0, kp[j], w, pos[i],
                                            scale, cap, q[i], kk[j], vv[j], dout[i], lse, d, dq,
                                            dk[j], dv[j]);
            }
            if (pass == 0)
                nnt_cpu_attn_fwd_finalize_f32(nq, tq, BHD, o, m, l, lse);
            free(m), free(l), free(d);
        }
}

START_TEST(test_attention_band_tasks)
{
    static const nnt_attn_map maps[] = {
        {2, 3, 3, 0, 3, 1, 0, 0},   /* multi-head, 2 batch rows */
        {2, 6, 6, 0, 2, 3, 0, 0},   /* grouped-query: runs of 3 q heads a kv slab */
        {1, 4, 4, 0, 1, 4, 0, 0},   /* multi-query */
    };
    /* window, soft-cap, packed examples */
    static const struct { int64_t w; float cap; int packed; } variants[] = {
        {11, 0.0f, 0}, {30, 0.0f, 0}, {11, 0.5f, 0}, {11, 0.0f, 1}};
    nnt_dnnl_cache *dnnl = nnt_cpu_dnnl_cache_create();
    const int bf16_native = dnnl && nnt_cpu_dnnl_bf16_isa();
    int64_t compared = 0;
    double worst[2] = {0.0, 0.0};
    for (int mi = 0; mi < 3; mi++)
        for (int b16 = 0; b16 <= bf16_native; b16++) {
            /* the band products: the band drivers' one block of keys (BHD is even) */
            const int bands = b16 ? nnt_cpu_band16_level() > 0 : nnt_cpu_band_level() > 0;
            nnt_attn_map mp = maps[mi];
            mp.bf16 = b16;
            const int64_t nq = mp.nb * mp.q_hs, nkv = mp.nb * mp.kv_hs;
            float *q[BAND_NT], *k[BAND_NT], *v[BAND_NT], *dout[BAND_NT];
            float *out[2][5][BAND_NT];
            int32_t *pos[BAND_NT];
            for (int t = 0; t < BAND_NT; t++) {
                q[t] = band_tile(nq, t, 50 + t), dout[t] = band_tile(nq, t, 60 + t);
                k[t] = band_tile(nkv, t, 70 + t), v[t] = band_tile(nkv, t, 80 + t);
                pos[t] = malloc((size_t)(mp.nb * band_rows(t)) * sizeof(int32_t));
                for (int64_t b = 0; b < mp.nb; b++)   /* examples of 17 tokens, row b later */
                    for (int64_t r = 0; r < band_rows(t); r++)
                        pos[t][b * band_rows(t) + r] = (int32_t)((t * BTILE + r + 5 * b) % 17);
                for (int x = 0; x < 2; x++)
                    for (int o = 0; o < 5; o++) {
                        int64_t n = (o == 1 ? 1 : BHD) * (o < 3 ? nq : nkv) * band_rows(t);
                        out[x][o][t] = alloc_f(n);
                    }
            }
            for (int vi = 0; vi < 4; vi++) {
                const int32_t *const *pp = (const int32_t *const *)pos;
                const int32_t *none[BAND_NT] = {NULL};
                for (int x = 0; x < 2; x++)
                    band_pass(&mp, b16 ? dnnl : NULL, x, variants[vi].w, variants[vi].cap,
                              variants[vi].packed ? pp : none, q, k, v, dout, out[x]);
                for (int o = 0; o < 5; o++)
                    for (int t = 0; t < BAND_NT; t++) {
                        int64_t n = (o == 1 ? 1 : BHD) * (o < 3 ? nq : nkv) * band_rows(t);
                        const char *what = (const char *[]){"o", "lse", "dq", "dk", "dv"}[o];
                        compared += n;
                        if (!bands) {   /* a key tile a call: the blocks' calls */
                            ck_assert_msg(memcmp(out[0][o][t], out[1][o][t], (size_t)n * 4) ==
                                              0,
                                          "band tasks: %s tile %d, map %d, bf16 %d, variant %d "
                                          "differ from the blocks'", what, t, mi, b16, vi);
                            continue;
                        }
                        double tol = !b16 ? BAND_TOL_F32
                                          : (o == 1 || o == 4 ? BAND_TOL_BF16_EXACT
                                                              : BAND_TOL_BF16);
                        double e = test_rel_err(out[1][o][t], out[0][o][t], n);
                        worst[b16] = fmax(worst[b16], e);
                        EXPECT_TOL(e, tol, "band tasks: %s tile %d, map %d, bf16 %d, variant %d",
                                   what, t, mi, b16, vi);
                    }
            }
            /* without scratch: -1, nothing written */
            const int64_t tk0 = BTILE, kp0 = 0;
            const float *k0 = k[0], *v0 = v[0];
            nnt_attn_keys one = {1, &tk0, &kp0, &k0, &v0, NULL, NULL, NULL};
            float *o = alloc_f(nq * BTILE * BHD), *lse = alloc_f(nq * BTILE);
            for (int64_t r = 0; r < nq * BTILE * BHD; r++)
                o[r] = 7.0f;
            ck_assert_int_eq(noscratch_attn_fwd_band(NULL, &mp, BTILE, BHD, 0, 11, NULL, 0.3f,
                                                     0.0f, &one, q[0], o, lse), -1);
            for (int64_t r = 0; r < nq * BTILE * BHD; r++)
                ck_assert(o[r] == 7.0f);
            free(o), free(lse);
            for (int t = 0; t < BAND_NT; t++) {
                free(q[t]), free(k[t]), free(v[t]), free(dout[t]), free(pos[t]);
                for (int x = 0; x < 2; x++)
                    for (int o2 = 0; o2 < 5; o2++)
                        free(out[x][o2][t]);
            }
        }
    printf("test_cpu_kernels attention_band_tasks: %lld values of the band drivers, %s "
           "(float %.2e, bf16 %.2e from the blocks' values)%s\n", (long long)compared,
           nnt_cpu_band_level() > 0 ? "one block of keys a band" : "the blocks' bits",
           worst[0], worst[1], bf16_native ? "" : " (float products; no oneDNN bf16)");
    nnt_cpu_dnnl_cache_destroy(dnnl);
}
END_TEST

/* Attention by products (cpu/attn_products.c, the CPU operations) against the flash kernels
 * on the same blocks: a query tile of 37 rows at position 40 against a key tile of 29 rows
 * before it (at 11) and one that the diagonal cuts (at 40); multi-head, whole grouped-query
 * and partial grouped-query maps; plain causal, a window of 20 that cuts the first key tile,
 * a soft-cap, packed examples, all three; the scratch large (one product per run) and small
 * (chunks of 4 rows of one slab). Forward: o, m, l after both key tiles; backward: dq, dk,
 * dv of both from the flash forward's lse and d. */
#define PROD_TOL 4e-6   /* measured 3.8e-7 (AMD Zen 5, 2026-11-29) */
START_TEST(test_attention_products)
{
    const int64_t tq = 37, tk = 29, hd = 12, qp0 = 40, kp0[2] = {11, 40};
    static const nnt_attn_map maps[] = {
        {2, 3, 3, 0, 3, 1, 0, 0},   /* multi-head: every slab of the blocks */
        {2, 6, 6, 0, 2, 3, 0, 0},   /* grouped-query, whole: 3 runs of 4 slabs */
        {2, 2, 4, 1, 2, 2, 1, 0},   /* grouped-query, q heads 1-2 of 4, a run per head */
    };
    double worst = 0.0;
    for (int mi = 0; mi < (int)(sizeof maps / sizeof maps[0]); mi++) {
        const nnt_attn_map *mp = &maps[mi];
        const int64_t nq = mp->nb * mp->q_hs, nkv = mp->nb * mp->kv_hs;
        float *q = test_random_f32(nq * tq * hd, 31, -1, 1);
        float *dout = test_random_f32(nq * tq * hd, 32, -1, 1);
        float *k[2], *v[2];
        for (int b = 0; b < 2; b++)
            k[b] = test_random_f32(nkv * tk * hd, 33 + 2 * b, -1, 1),
            v[b] = test_random_f32(nkv * tk * hd, 34 + 2 * b, -1, 1);
        int32_t *pos = malloc((size_t)(mp->nb * tq) * sizeof *pos);
        for (int64_t b = 0; b < mp->nb; b++)
            for (int64_t i = 0; i < tq; i++)
                pos[b * tq + i] = (int32_t)((i + 7 * b) % 23 + 3 * b);
        for (int variant = 0; variant < 5; variant++) {
            const int64_t w = variant == 1 || variant == 4 ? 20 : 0;
            const float cap = variant == 2 || variant == 4 ? 0.7f : 0.0f, scale = 0.41f;
            const int32_t *qpos = variant >= 3 ? pos : NULL;
            float *o[2], *m[2], *l[2], *dq[2], *dk[2][2], *dv[2][2];
            float *lse = malloc((size_t)(nq * tq) * 4), *d = malloc((size_t)(nq * tq) * 4);
            for (int path = 0; path < 3; path++) {   /* flash; products, scratch large, small */
                int x = path ? 1 : 0;
                int64_t ws_n = path == 1 ? 2 * nq * tq * tk : 2 * 4 * tk;
                float *ws = malloc((size_t)ws_n * 4);
                if (path < 2) {
                    o[x] = calloc((size_t)(nq * tq * hd), 4);
                    m[x] = malloc((size_t)(nq * tq) * 4), l[x] = calloc((size_t)(nq * tq), 4);
                    for (int64_t i = 0; i < nq * tq; i++)
                        m[x][i] = -INFINITY;
                } else {   /* the small scratch: from the same start */
                    for (int64_t i = 0; i < nq * tq * hd; i++)
                        o[1][i] = 0.0f;
                    for (int64_t i = 0; i < nq * tq; i++)
                        m[1][i] = -INFINITY, l[1][i] = 0.0f;
                }
                for (int b = 0; b < 2; b++) {
                    if (path == 0)
                        nnt_cpu_attn_fwd_packed_f32(NULL, mp, tq, tk, hd, qp0, kp0[b], w, qpos,
                                                    scale, cap, q, k[b], v[b], o[0], m[0], l[0]);
                    else
                        ck_assert_int_eq(nnt_attn_products_fwd(&nnt_cpu_attn_products_ops, mp, tq,
                                                               tk, hd, qp0, kp0[b], w, qpos, scale,
                                                               cap, q, k[b], v[b], o[1], m[1], l[1],
                                                               ws, ws_n), 0);
                }
                if (path == 0) {   /* lse and d from the flash forward, for every path */
                    float *of = malloc((size_t)(nq * tq * hd) * 4);
                    memcpy(of, o[0], (size_t)(nq * tq * hd) * 4);
                    nnt_cpu_attn_fwd_finalize_f32(nq, tq, hd, of, m[0], l[0], lse);
                    nnt_cpu_attn_bwd_prep_f32(nq, tq, hd, of, dout, d);
                    free(of);
                } else {
                    double e[3] = {max_rel_f(o[1], o[0], nq * tq * hd),
                                   max_rel_f(l[1], l[0], nq * tq), 0.0};
                    for (int64_t i = 0; i < nq * tq; i++)
                        if (m[1][i] != m[0][i] && !(isinf(m[0][i]) && isinf(m[1][i])))
                            e[2] = fmax(e[2], fabs((double)m[1][i] - m[0][i]));
                    for (int c = 0; c < 3; c++) {
                        EXPECT_TOL(e[c], PROD_TOL, "products forward %s, map %d, variant %d, "
                                   "scratch %lld", (const char *[]){"o", "l", "m"}[c], mi,
                                   variant, (long long)ws_n);
                        worst = fmax(worst, e[c]);
                    }
                }
                if (path < 2) {
                    dq[x] = calloc((size_t)(nq * tq * hd), 4);
                } else {
                    for (int64_t i = 0; i < nq * tq * hd; i++)
                        dq[1][i] = 0.0f;
                }
                for (int b = 0; b < 2; b++) {
                    if (path < 2)
                        dk[x][b] = calloc((size_t)(nkv * tk * hd), 4),
                        dv[x][b] = calloc((size_t)(nkv * tk * hd), 4);
                    else
                        for (int64_t i = 0; i < nkv * tk * hd; i++)
                            dk[1][b][i] = dv[1][b][i] = 0.0f;
                    if (path == 0)
                        nnt_cpu_attn_bwd_packed_f32(NULL, mp, tq, tk, hd, qp0, kp0[b], w, qpos,
                                                    scale, cap, q, k[b], v[b], dout, lse, d,
                                                    dq[0], dk[0][b], dv[0][b]);
                    else
                        ck_assert_int_eq(nnt_attn_products_bwd(&nnt_cpu_attn_products_ops, mp, tq,
                                                               tk, hd, qp0, kp0[b], w, qpos, scale,
                                                               cap, q, k[b], v[b], dout, lse, d,
                                                               dq[1], dk[1][b], dv[1][b], ws,
                                                               ws_n), 0);
                }
                if (path > 0) {
                    double e[5] = {max_rel_f(dq[1], dq[0], nq * tq * hd),
                                   max_rel_f(dk[1][0], dk[0][0], nkv * tk * hd),
                                   max_rel_f(dk[1][1], dk[0][1], nkv * tk * hd),
                                   max_rel_f(dv[1][0], dv[0][0], nkv * tk * hd),
                                   max_rel_f(dv[1][1], dv[0][1], nkv * tk * hd)};
                    for (int c = 0; c < 5; c++) {
                        EXPECT_TOL(e[c], PROD_TOL, "products backward %s, map %d, variant %d, "
                                   "scratch %lld", (const char *[]){"dq", "dk 0", "dk 1", "dv 0",
                                   "dv 1"}[c], mi, variant, (long long)ws_n);
                        worst = fmax(worst, e[c]);
                    }
                }
                free(ws);
            }
            ck_assert_int_eq(nnt_attn_products_fwd(&nnt_cpu_attn_products_ops, mp, tq, tk, hd,
                                                   qp0, kp0[0], w, qpos, scale, cap, q, k[0],
                                                   v[0], o[1], m[1], l[1], lse, tk - 1), -1);
            for (int x = 0; x < 2; x++) {
                free(o[x]), free(m[x]), free(l[x]), free(dq[x]);
                for (int b = 0; b < 2; b++)
                    free(dk[x][b]), free(dv[x][b]);
            }
            free(lse), free(d);
        }
        free(q), free(dout), free(pos);
        for (int b = 0; b < 2; b++)
            free(k[b]), free(v[b]);
    }
    printf("test_cpu_kernels attention_products: worst error %.2e\n", worst);
}
END_TEST

/* ---- band products (cpu/attn_band.c) ---------------------------------------------------- */

/* The largest error of the three band products' results against float64 sums, each relative to
 * the sum of its terms' magnitudes: s (m, nk) = alpha a k^T over each row's keys (a (m, hd); k's
 * element (j, x) at kb[j * kj + x * kx]); c = c0 + alpha p b and ck = ck0 + alpha p^T a (p (m,
 * nk) of row stride ldp, zero outside each row's keys; b (nk, hd)) */
static double band_errors(int64_t m, int64_t nk, int64_t hd, const int64_t *lo, const int64_t *hi,
                          float alpha, const float *a, const float *kb, int64_t kj, int64_t kx,
                          const float *p, int64_t ldp, const float *b, const float *s,
                          const float *c, const float *c0, const float *ck, const float *ck0)
{
    double e = 0.0;
    for (int64_t r = 0; r < m; r++) {
        for (int64_t j = lo[r]; j < hi[r]; j++) {   /* outside the row's keys: the callers */
            double mag, x = dot_mag(hd, a + r * hd, 1, kb + j * kj, kx, &mag);
            double err = fabs(s[r * nk + j] - alpha * x) / (alpha * mag + 1e-30);
            e = err > e ? err : e;
        }
        for (int64_t x = 0; x < hd; x++) {
            double mag, y = dot_mag(nk, p + r * ldp, 1, b + x, hd, &mag);
            double ref = c0[r * hd + x] + alpha * y;
            double err = fabs(c[r * hd + x] - ref) / (alpha * mag + fabs(c0[r * hd + x]));
            e = err > e ? err : e;
        }
    }
    for (int64_t j = 0; j < nk; j++)
        for (int64_t x = 0; x < hd; x++) {
            double mag, y = dot_mag(m, p + j, ldp, a + x, hd, &mag);
            double ref = ck0[j * hd + x] + alpha * y;
            double err = fabs(ck[j * hd + x] - ref) / (alpha * mag + fabs(ck0[j * hd + x]));
            e = err > e ? err : e;
        }
    return e;
}

/* The three band products on random rows' keys (empty rows, rows out of order as packed
 * examples make them, row counts and widths that leave partial tiles: m not a multiple of 8 or
 * 6, hd not of 32 or 16) at every level the CPU has: the keys each row sees against a float64
 * sum, what no group computes left as it was, and the same bits at every level (each sum in
 * increasing order, one fused multiply-add a step). */
static void band_case(int64_t m, int64_t nk, int64_t hd, int shape, double *worst)
{
    int64_t *lo = malloc((size_t)m * sizeof(int64_t)), *hi = malloc((size_t)m * sizeof(int64_t));
    ck_assert(lo && hi);
    for (int64_t r = 0; r < m; r++) {
        int64_t a, b;
        if (shape == 0) {   /* a window of nk - m + 1 keys sliding one key a row */
            a = r;
            b = r + nk - m + 1;
        } else {            /* anywhere, sometimes empty */
            a = (int64_t)(rng_u64() % (uint64_t)nk);
            b = a + (int64_t)(rng_u64() % (uint64_t)(nk - a + 1));
            if (rng_u64() % 5 == 0)
                b = a;
        }
        lo[r] = a;
        hi[r] = b;
    }
    float *a = rand_f(m * hd, -1, 1), *bt = rand_f(hd * nk, -1, 1), *b = rand_f(nk * hd, -1, 1);
    float *c0 = rand_f(m * hd, -1, 1), *ck0 = rand_f(nk * hd, -1, 1);
    /* p: zero outside each row's keys, as the kernels' softmax leaves it */
    float *p = rand_f(m * nk, -1, 1);
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < nk; j++)
            if (j < lo[r] || j >= hi[r])
                p[r * nk + j] = 0.0f;
    const float sentinel = 12345.0f, alpha = 0.37f;
    float *first[3] = {NULL, NULL, NULL};   /* the highest level's s, c, ck */
    char what[96];
    snprintf(what, sizeof what, "band m %lld nk %lld hd %lld shape %d", (long long)m,
             (long long)nk, (long long)hd, shape);
    for (int level = 2; level >= 0; level--) {
        if (nnt_cpu_band_force(level) != level)
            continue;
        float *s = alloc_f(m * nk), *c = alloc_f(m * hd), *ck = alloc_f(nk * hd);
        for (int64_t i = 0; i < m * nk; i++)
            s[i] = sentinel;
        memcpy(c, c0, (size_t)(m * hd) * sizeof(float));
        memcpy(ck, ck0, (size_t)(nk * hd) * sizeof(float));
        /* the transpose that makes abt's bt, into a wider matrix (ld nk + 5) */
        float *t = alloc_f(hd * (nk + 5));
        nnt_cpu_band_transpose(nk, hd, b, t, nk + 5);
        for (int64_t j = 0; j < nk; j++)
            for (int64_t x = 0; x < hd; x++)
                ck_assert_msg(t[x * (nk + 5) + j] == b[j * hd + x], "%s: transpose level %d",
                              what, level);
        free(t);
        nnt_cpu_band_abt(m, hd, alpha, a, hd, bt, nk, lo, hi, s, nk);
        nnt_cpu_band_ab(m, hd, alpha, p, nk, b, hd, lo, hi, c, hd);
        nnt_cpu_band_atb(m, nk, hd, alpha, p, nk, a, hd, lo, hi, ck, hd);
        /* bt's element (x, j): k (j, x) */
        double e = band_errors(m, nk, hd, lo, hi, alpha, a, bt, 1, nk, p, nk, b, s, c, c0, ck,
                               ck0);
        /* relative to the sum of the terms' magnitudes: measured 1.5e-7 at most */
        EXPECT_TOL(e, 1.5e-6, "%s, level %d", what, level);
        *worst = e > *worst ? e : *worst;
        /* a row's scores outside its group's keys, those from its first key down to a whole
         * vector of columns (16 floats AVX-512, 8 AVX2) aside: never written */
        int mr = level == 2 ? 8 : level == 1 ? 6 : 1, vw = level == 2 ? 16 : level == 1 ? 8 : 1;
        for (int64_t g = 0; g < m; g += mr) {
            int64_t k0 = INT64_MAX, k1 = INT64_MIN;
            for (int64_t r = g; r < g + mr && r < m; r++)
                if (lo[r] < hi[r]) {
                    k0 = lo[r] < k0 ? lo[r] : k0;
                    k1 = hi[r] > k1 ? hi[r] : k1;
                }
            for (int64_t r = g; r < g + mr && r < m; r++)
                for (int64_t j = 0; j < nk; j++)
                    if (j < k0 - k0 % vw || j >= k1)
                        ck_assert_msg(s[r * nk + j] == sentinel,
                                      "%s, level %d: row %lld key %lld written", what, level,
                                      (long long)r, (long long)j);
        }
        if (first[0]) {   /* a higher level's results: the same bits */
            for (int64_t r = 0; r < m; r++)
                for (int64_t j = lo[r]; j < hi[r]; j++)
                    ck_assert_msg(s[r * nk + j] == first[0][r * nk + j],
                                  "%s: abt level %d differs", what, level);
            ck_assert_msg(memcmp(c, first[1], (size_t)(m * hd) * sizeof(float)) == 0,
                          "%s: ab level %d differs", what, level);
            ck_assert_msg(memcmp(ck, first[2], (size_t)(nk * hd) * sizeof(float)) == 0,
                          "%s: atb level %d differs", what, level);
            free(s), free(c), free(ck);
        } else {
            first[0] = s;
            first[1] = c;
            first[2] = ck;
        }
    }
    nnt_cpu_band_force(-1);
    free(first[0]), free(first[1]), free(first[2]);
    free(lo), free(hi), free(a), free(bt), free(b), free(c0), free(ck0), free(p);
}

START_TEST(test_band_products)
{
    rng_seed(97);
    static const int64_t shapes[][3] = {{64, 127, 64}, {13, 40, 80}, {8, 32, 32}, {1, 1, 1},
                                        {29, 100, 24}, {6, 7, 48}, {17, 33, 100},
                                        {40, 48, 16}};
    double worst = 0.0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int shape = 0; shape < 2; shape++)
            if (shape == 1 || shapes[i][1] >= shapes[i][0])
                band_case(shapes[i][0], shapes[i][1], shapes[i][2], shape, &worst);
    printf("test_cpu_kernels band_products: worst error %.2e, every level the same bits\n",
           worst);
}
END_TEST

/* ---- bf16 band products (cpu/attn_band16.c) --------------------------------------------- */

/* x rounded to bf16 (nnt_cpu_f32_to_bf16), in h, and back to float in x */
static void to_bf16_values(int64_t n, float *x, uint16_t *h)
{
    nnt_cpu_f32_to_bf16(n, x, h);
    for (int64_t i = 0; i < n; i++) {
        uint32_t w = (uint32_t)h[i] << 16;
        memcpy(&x[i], &w, sizeof w);
    }
}

/* The three bf16 band products on the rows' keys of band_case (a sliding window, random
 * ranges with empty ones), odd row and key counts among them (the pairs' padding), against
 * float64 sums of the same bf16 values; the pair layouts exact; abt writing nothing outside a
 * group's keys. */
static void band16_case(int64_t m, int64_t nk, int64_t hd, int shape, double *worst)
{
    int64_t *lo = malloc((size_t)m * sizeof(int64_t)), *hi = malloc((size_t)m * sizeof(int64_t));
    ck_assert(lo && hi);
    for (int64_t r = 0; r < m; r++) {
        int64_t a = r, b = r + nk - m + 1;
        if (shape == 1) {
            a = (int64_t)(rng_u64() % (uint64_t)nk);
            b = rng_u64() % 5 == 0 ? a : a + (int64_t)(rng_u64() % (uint64_t)(nk - a + 1));
        }
        lo[r] = a;
        hi[r] = b;
    }
    int64_t hd2 = hd / 2, nk2 = nk + (nk & 1), m2 = (m + 1) / 2, nkp = (nk + 1) / 2;
    float *q = rand_f(m * hd, -1, 1), *k = rand_f(nk * hd, -1, 1), *v = rand_f(nk * hd, -1, 1);
    float *p = rand_f(m * nk2, -1, 1);   /* (m, nk2): zero outside each row's keys, and pads */
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < nk2; j++)
            if (j < lo[r] || j >= hi[r])
                p[r * nk2 + j] = 0.0f;
    uint16_t *q16 = malloc((size_t)(m * hd) * 2), *k16 = malloc((size_t)(nk * hd) * 2);
    uint16_t *v16 = malloc((size_t)(nk * hd) * 2), *p16 = malloc((size_t)(m * nk2) * 2);
    uint32_t *q32 = malloc((size_t)(m * hd2) * 4), *k32 = malloc((size_t)(nk * hd2) * 4);
    uint32_t *kt = malloc((size_t)(hd2 * (nk + 3)) * 4), *v2 = malloc((size_t)(nkp * hd) * 4);
    uint32_t *p32 = malloc((size_t)(m * nk2 / 2) * 4), *pi = malloc((size_t)(m2 * nk) * 4);
    uint32_t *q2 = malloc((size_t)(m2 * hd) * 4);
    ck_assert(q16 && k16 && v16 && p16 && q32 && k32 && kt && v2 && p32 && pi && q2);
    to_bf16_values(m * hd, q, q16);
    to_bf16_values(nk * hd, k, k16);
    to_bf16_values(nk * hd, v, v16);
    to_bf16_values(m * nk2, p, p16);
    memcpy(q32, q16, (size_t)(m * hd) * 2);   /* pairs along a row: the row's own words */
    memcpy(k32, k16, (size_t)(nk * hd) * 2);
    memcpy(p32, p16, (size_t)(m * nk2) * 2);
    nnt_cpu_band_transpose(nk, hd2, k32, kt, nk + 3);
    nnt_cpu_bf16_pair_rows(nk, hd, v16, hd, v2, hd);
    nnt_cpu_bf16_pair_rows(m, nk, p16, nk2, pi, nk);
    nnt_cpu_bf16_pair_rows(m, hd, q16, hd, q2, hd);
    char what[96];
    snprintf(what, sizeof what, "band16 m %lld nk %lld hd %lld shape %d", (long long)m,
             (long long)nk, (long long)hd, shape);
    for (int64_t j = 0; j < nk; j++)
        for (int64_t t = 0; t < hd2; t++)
            ck_assert_msg(kt[t * (nk + 3) + j] == k32[j * hd2 + t], "%s: transpose", what);
    for (int64_t t = 0; t < nkp; t++)
        for (int64_t c = 0; c < hd; c++)
            ck_assert_msg(v2[t * hd + c] == ((uint32_t)v16[2 * t * hd + c] |
                                             (2 * t + 1 < nk ? (uint32_t)v16[(2 * t + 1) * hd + c]
                                                                   << 16 : 0u)),
                          "%s: pair rows", what);
    const float sentinel = 12345.0f, alpha = 0.37f;
    float *s = alloc_f(m * nk), *c = rand_f(m * hd, -1, 1), *ck = rand_f(nk * hd, -1, 1);
    float *c0 = dup_f(m * hd, c), *ck0 = dup_f(nk * hd, ck);
    for (int64_t i = 0; i < m * nk; i++)
        s[i] = sentinel;
    ck_assert_int_eq(nnt_cpu_band16_abt(m, hd2, alpha, q32, hd2, kt, nk + 3, lo, hi, s, nk), 0);
    ck_assert_int_eq(nnt_cpu_band16_ab(m, hd, alpha, p32, nk2 / 2, v2, hd, lo, hi, c, hd), 0);
    ck_assert_int_eq(nnt_cpu_band16_atb(m, nk, hd, alpha, pi, nk, q2, hd, lo, hi, ck, hd), 0);
    double e = band_errors(m, nk, hd, lo, hi, alpha, q, k, hd, 1, p, nk2, v, s, c, c0, ck, ck0);
    /* relative to the sum of the terms' magnitudes: measured 8.4e-8 at most */
    EXPECT_TOL(e, 1.5e-6, "%s", what);
    *worst = e > *worst ? e : *worst;
    for (int64_t g = 0; g < m; g += 8) {   /* groups of 8 rows, keys from a vector of 16 */
        int64_t k0 = INT64_MAX, k1 = INT64_MIN;
        for (int64_t r = g; r < g + 8 && r < m; r++)
            if (lo[r] < hi[r]) {
                k0 = lo[r] < k0 ? lo[r] : k0;
                k1 = hi[r] > k1 ? hi[r] : k1;
            }
        for (int64_t r = g; r < g + 8 && r < m; r++)
            for (int64_t j = 0; j < nk; j++)
                if (j < k0 - k0 % 16 || j >= k1)
                    ck_assert_msg(s[r * nk + j] == sentinel, "%s: row %lld key %lld written",
                                  what, (long long)r, (long long)j);
    }
    free(lo), free(hi), free(q), free(k), free(v), free(p), free(q16), free(k16), free(v16);
    free(p16), free(q32), free(k32), free(kt), free(v2), free(p32), free(pi), free(q2);
    free(s), free(c), free(ck), free(c0), free(ck0);
}

START_TEST(test_band16_products)
{
    if (nnt_cpu_band16_level() == 0) {
        printf("test_cpu_kernels band16_products: skipped: no AVX512-BF16 band products on this "
               "CPU (or at this level)\n");
        ck_assert_int_eq(nnt_cpu_band16_abt(1, 1, 1.0f, NULL, 1, NULL, 1, NULL, NULL, NULL, 1),
                         -1);
        return;
    }
    rng_seed(101);
    static const int64_t shapes[][3] = {{64, 127, 64}, {13, 40, 80}, {8, 32, 32}, {1, 1, 2},
                                        {29, 101, 24}, {7, 7, 48}, {17, 33, 100},
                                        {40, 48, 16}, {3, 64, 256}};
    double worst = 0.0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int shape = 0; shape < 2; shape++)
            if (shape == 1 || shapes[i][1] >= shapes[i][0])
                band16_case(shapes[i][0], shapes[i][1], shapes[i][2], shape, &worst);
    printf("test_cpu_kernels band16_products: worst error %.2e\n", worst);
}
END_TEST

/* The four passes that nnt_cpu_band16_grad_rows replaces, over rows [0, rows) of (rows, ldp)
 * scores s and dp (changed in place): the softmax's gradient over each row's keys, the rows
 * rounded to bf16 with zeros outside the keys (p16, ds16), and the row pairs of both. */
static void grad_rows_four_passes(int64_t rows, int64_t nk, int64_t ldp, float *s, float *dp,
                                  const int64_t *lo, const int64_t *hi, const float *lse,
                                  const float *d, uint16_t *p16, uint16_t *ds16, uint32_t *pp,
                                  uint32_t *dsp, int64_t ldr)
{
    memset(p16, 0, (size_t)(rows * ldp) * sizeof *p16);
    memset(ds16, 0, (size_t)(rows * ldp) * sizeof *ds16);
    for (int64_t r = 0; r < rows; r++) {
        int64_t a = lo[r], n = hi[r] - lo[r], at = r * ldp + a;
        if (n <= 0)
            continue;
        nnt_cpu_row_softmax_grad_f32(n, s + at, dp + at, lse[r], d[r]);
        nnt_cpu_f32_to_bf16(n, s + at, p16 + at);
        nnt_cpu_f32_to_bf16(n, dp + at, ds16 + at);
    }
    nnt_cpu_bf16_pair_rows(rows, nk, p16, ldp, pp, ldr);
    nnt_cpu_bf16_pair_rows(rows, nk, ds16, ldp, dsp, ldr);
}

/* nnt_cpu_band16_grad_rows against those four passes, bit for bit: odd and even row counts,
 * ldp nk and nk + 1, rows without keys, keys cut anywhere, scores whose p or ds are
 * subnormal (the rounding's other path); s and dp only read, the words past nk untouched.
 * Returns the subnormal p and ds values rounded. */
static int64_t grad_rows_case(int64_t rows, int64_t nk, int64_t ldp, int64_t ldr)
{
    int64_t *lo = malloc((size_t)rows * sizeof(int64_t)), *hi = malloc((size_t)rows * sizeof(int64_t));
    ck_assert(lo && hi);
    float *s = rand_f(rows * ldp, -3, 3), *dp = rand_f(rows * ldp, -2, 2);
    float *lse = rand_f(rows, -1, 2), *d = rand_f(rows, -1, 1);
    for (int64_t r = 0; r < rows; r++) {
        int64_t a = (int64_t)(rng_u64() % (uint64_t)(nk + 1));
        lo[r] = a;
        hi[r] = rng_u64() % 6 == 0 ? a : a + (int64_t)(rng_u64() % (uint64_t)(nk - a + 1));
        if (r % 3 == 1)   /* s - lse in [-87.45, -86.85]: p normal, subnormal and 0 */
            for (int64_t j = 0; j < ldp; j++)
                s[r * ldp + j] = lse[r] - 86.85f - 0.6f * (float)j / (float)ldp;
        if (r % 4 == 2) {   /* d 0 and dp subnormal: ds = p dp subnormal */
            d[r] = 0.0f;
            for (int64_t j = 0; j < ldp; j++)
                dp[r * ldp + j] = 1.25e-39f * (float)(1 + j % 7);
        }
    }
    int64_t npair = (rows + 1) / 2;
    float *s0 = dup_f(rows * ldp, s), *dp0 = dup_f(rows * ldp, dp);
    float *sr = dup_f(rows * ldp, s), *dpr = dup_f(rows * ldp, dp);
    uint16_t *p16 = malloc((size_t)(rows * ldp) * 2), *ds16r = malloc((size_t)(rows * ldp) * 2);
    uint16_t *ds16 = malloc((size_t)(rows * ldp) * 2);
    uint32_t *ppr = malloc((size_t)(npair * ldr) * 4), *dspr = malloc((size_t)(npair * ldr) * 4);
    uint32_t *pp = malloc((size_t)(npair * ldr) * 4), *dsp = malloc((size_t)(npair * ldr) * 4);
    ck_assert(p16 && ds16r && ds16 && ppr && dspr && pp && dsp);
    grad_rows_four_passes(rows, nk, ldp, sr, dpr, lo, hi, lse, d, p16, ds16r, ppr, dspr, ldr);
    memset(ds16, 0xAA, (size_t)(rows * ldp) * 2);
    for (int64_t i = 0; i < npair * ldr; i++)
        pp[i] = dsp[i] = 0xDEADBEEFu;
    ck_assert_int_eq(nnt_cpu_band16_grad_rows(rows, nk, ldp, s, dp, lo, hi, lse, d, ds16, pp,
                                              dsp, ldr), 0);
    char what[80];
    snprintf(what, sizeof what, "grad_rows rows %lld nk %lld ldp %lld", (long long)rows,
             (long long)nk, (long long)ldp);
    ck_assert_msg(memcmp(s, s0, (size_t)(rows * ldp) * 4) == 0, "%s: s written", what);
    ck_assert_msg(memcmp(dp, dp0, (size_t)(rows * ldp) * 4) == 0, "%s: dp written", what);
    int64_t subnormal = 0;
    for (int64_t i = 0; i < rows * ldp; i++) {
        ck_assert_msg(ds16[i] == ds16r[i], "%s: ds16 row %lld column %lld: %04x, %04x", what,
                      (long long)(i / ldp), (long long)(i % ldp), ds16[i], ds16r[i]);
        for (int x = 0; x < 2; x++) {
            float v = x ? dpr[i] : sr[i];
            int64_t j = i % ldp, r = i / ldp;
            subnormal += j >= lo[r] && j < hi[r] && v != 0.0f && fabsf(v) < FLT_MIN;
        }
    }
    for (int64_t t = 0; t < npair; t++)
        for (int64_t c = 0; c < ldr; c++) {
            int64_t i = t * ldr + c;
            uint32_t wp = c < nk ? ppr[i] : 0xDEADBEEFu, wd = c < nk ? dspr[i] : 0xDEADBEEFu;
            ck_assert_msg(pp[i] == wp && dsp[i] == wd, "%s: pair %lld word %lld: %08x %08x, "
                          "expected %08x %08x", what, (long long)t, (long long)c, pp[i], dsp[i],
                          wp, wd);
        }
    free(lo), free(hi), free(s), free(dp), free(lse), free(d), free(s0), free(dp0), free(sr);
    free(dpr), free(p16), free(ds16r), free(ds16), free(ppr), free(dspr), free(pp), free(dsp);
    return subnormal;
}

START_TEST(test_band16_grad_rows)
{
    if (nnt_cpu_band16_level() == 0) {
        printf("test_cpu_kernels band16_grad_rows: skipped: no AVX512-BF16 band products on "
               "this CPU (or at this level)\n");
        ck_assert_int_eq(nnt_cpu_band16_grad_rows(1, 1, 1, NULL, NULL, NULL, NULL, NULL, NULL,
                                                  NULL, NULL, NULL, 1), -1);
        return;
    }
    rng_seed(202);
    static const int64_t shapes[][3] = {{256, 256, 256}, {64, 127, 128}, {7, 33, 34},
                                        {1, 1, 2},       {2, 16, 16},   {13, 40, 40},
                                        {5, 17, 18},     {32, 100, 100}};
    int64_t subnormal = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        subnormal += grad_rows_case(shapes[i][0], shapes[i][1], shapes[i][2],
                                    shapes[i][1] + 3);
    ck_assert_msg(subnormal > 100, "only %lld subnormal values", (long long)subnormal);
    printf("test_cpu_kernels band16_grad_rows: %lld subnormal p or ds values among those "
           "compared\n", (long long)subnormal);
}
END_TEST

/* ---- runner ------------------------------------------------------------------------------ */

/* NF4 dequantization: every byte of codes, absmax of 7 kinds (0, denormal, tiny, large,
 * negative zero's neighbour), to floats and bf16: the table times absmax (in float, then
 * rounded to bf16 by nnt_cpu_f32_to_bf16), the same bits on each path (AVX-512, AVX2,
 * generic); and quantizing those values gives the codes back */
START_TEST(test_nf4_paths)
{
    enum { NB = 24, N = NB * NNT_NF4_BLOCK };
    uint8_t codes[N / 2], back[N / 2];
    float absmax[NB], want32[N], got32[N], back_absmax[NB];
    uint16_t want16[N], got16[N];
    const float scales[7] = {0.0f, 1e-40f, 3e-38f, 0.0123f, 1.0f, 3.5e4f, 2.5e37f};
    const float *table = nnt_cpu_nf4_table();
    for (int i = 0; i < N / 2; i++)
        codes[i] = (uint8_t)(i * 37 + (i >> 8));   /* every byte value */
    for (int b = 0; b < NB; b++) {
        absmax[b] = scales[b % 7] * (1.0f + 0.125f * (float)(b / 7));
        codes[b * 32] = (uint8_t)(codes[b * 32] | 0xf0);   /* the absmax element: code 15 */
    }
    for (int i = 0; i < N; i++) {
        int q = i % 2 ? codes[i / 2] & 15 : codes[i / 2] >> 4;
        want32[i] = table[q] * absmax[i / NNT_NF4_BLOCK];
    }
    nnt_cpu_f32_to_bf16(N, want32, want16);
    for (int path = 0; path < 3; path++) {   /* AVX-512 (where the CPU has it), AVX2, generic */
        nnt_cpu_avx512_force(path == 0 ? -1 : 0);
        nnt_cpu_isa_force(path == 2 ? NNT_CPU_ISA_GENERIC : -1);
        memset(got32, 0xff, sizeof got32);
        memset(got16, 0xff, sizeof got16);
        nnt_cpu_nf4_dequantize(N, codes, absmax, got32, 0);
        nnt_cpu_nf4_dequantize(N, codes, absmax, got16, 1);
        ck_assert_msg(memcmp(got32, want32, sizeof got32) == 0, "path %d: floats", path);
        ck_assert_msg(memcmp(got16, want16, sizeof got16) == 0, "path %d: bf16", path);
    }
    nnt_cpu_avx512_force(-1);
    nnt_cpu_isa_force(-1);
    /* the dequantized values quantize to their codes (blocks of normal absmax: those under
     * 1e-38 are scaled by 1e38, not by 1 / absmax) and their absmax */
    nnt_cpu_nf4_quantize(N, want32, 0, back, back_absmax);
    for (int b = 0; b < NB; b++) {
        if (absmax[b] < 1e-38f)
            continue;
        ck_assert_msg(memcmp(&back_absmax[b], &absmax[b], 4) == 0, "block %d: absmax", b);
        if (absmax[b] > 0.0f)
            ck_assert_msg(memcmp(back + b * 32, codes + b * 32, 32) == 0, "block %d: codes", b);
    }
}
END_TEST

/* nnt_cpu_nf4_quantize with AVX-512 (where the CPU has it) gives the portable code's bytes
 * and absmax: blocks of normal values at 7 scales, one with values on every midpoint and
 * a float either side, zeros, subnormals under the 1e-38 clamp, NaNs, an infinity, -0. */
START_TEST(test_nf4_quantize_paths)
{
    enum { NB = 16, N = NB * 64 };
    float *x = rand_f(N, -1.0f, 1.0f), absmax[2][NB];
    uint8_t codes[2][N / 2];
    const float *table = nnt_cpu_nf4_table();
    for (int b = 0; b < 7; b++)   /* scales from subnormal blocks to 3e37 */
        for (int i = 0; i < 64; i++)
            x[64 * b + i] *= (float[]){1e-40f, 3e-38f, 1e-3f, 1.0f, 7.5f, 3e4f, 3e37f}[b];
    for (int i = 0; i < 15; i++) {   /* block 7: each midpoint, then a float below and above */
        float mid = (table[i] + table[i + 1]) * 0.5f;
        x[64 * 7 + 3 * i] = mid;
        x[64 * 7 + 3 * i + 1] = nextafterf(mid, -2.0f);
        x[64 * 7 + 3 * i + 2] = nextafterf(mid, 2.0f);
    }
    x[64 * 7 + 63] = 1.0f;
    for (int i = 0; i < 64; i++)
        x[64 * 8 + i] = 0.0f;
    x[64 * 9 + 5] = NAN;   /* early and late in their blocks: a maximum may keep either */
    x[64 * 12 + 51] = NAN;
    x[64 * 13 + 63] = NAN;
    x[64 * 10 + 17] = INFINITY;
    x[64 * 11 + 1] = -0.0f;
    for (int path = 0; path < 2; path++) {   /* this pass's path, then the portable code */
        if (path)
            nnt_cpu_isa_force(NNT_CPU_ISA_GENERIC);
        nnt_cpu_nf4_quantize(N, x, 0, codes[path], absmax[path]);
    }
    nnt_cpu_isa_force(-1);
    ck_assert_msg(memcmp(codes[0], codes[1], sizeof codes[0]) == 0, "codes differ");
    ck_assert_msg(memcmp(absmax[0], absmax[1], sizeof absmax[0]) == 0, "absmax differ");
    free(x);
}
END_TEST

/* nnt_cpu_nf4_rows against B dequantized (nnt_cpu_nf4_dequantize, bf16 for bf16 products)
 * and each row multiplied by the one-row kernels: the same bits on this pass's path (the
 * AVX-512 rows decoded in registers where k holds whole blocks, else groups of rows
 * dequantized; rows of 96 make blocks cross rows, and 180 of them three groups), for 1 to 6
 * rows of x (in fours), alpha and beta, float, bf16 and TF32 products; and near the sums in
 * double. */
static void nf4_rows_check(void)
{
    enum { MMAX = 6 };
    static const int64_t ks[3] = {64, 320, 96}, ns[3] = {6, 6, 180};
    static const int bitss[3] = {0, 7, 10};
    for (int ki = 0; ki < 3; ki++) {
        const int64_t k = ks[ki], n = ns[ki], values = n * k;
        uint8_t *tile = malloc((size_t)(values / 2 + values / 64 * 4));
        float *bd = malloc(sizeof(float) * (size_t)values);
        float *bf = malloc(sizeof(float) * (size_t)values);
        uint16_t *b16 = malloc(sizeof(uint16_t) * (size_t)values);
        float *y = malloc(sizeof(float) * (size_t)(MMAX * n));
        float *want = malloc(sizeof(float) * (size_t)(MMAX * n));
        float *x = rand_f(MMAX * k, -2.0f, 2.0f), *xr = malloc(sizeof(float) * (size_t)(MMAX * k));
        void *buf = malloc(nnt_cpu_nf4_rows_scratch(MMAX, k));
        float *absmax = (float *)(void *)(tile + values / 2);
        for (int64_t i = 0; i < values / 2; i++)
            tile[i] = (uint8_t)(i * 53 + 7 * ki + (i >> 5));
        for (int64_t b = 0; b < values / 64; b++)
            absmax[b] = b == 2 ? 0.0f : 0.03f * (float)(b % 11 + 1) * (b % 3 ? 1.0f : 40.0f);
        for (int bi = 0; bi < 3; bi++) {
            const int bits = bitss[bi];
            nnt_cpu_nf4_dequantize(values, tile, absmax, bits == 7 ? (void *)b16 : (void *)bf,
                                   bits == 7);
            if (bits == 10)
                nnt_cpu_round_f32(values, bits, bf, bf);
            if (bits)
                nnt_cpu_round_f32(MMAX * k, bits, x, xr);
            else
                memcpy(xr, x, sizeof(float) * (size_t)(MMAX * k));
            for (int64_t i = 0; i < values; i++)   /* B's values, from the table */
                bd[i] = bits == 7 ? nnt_cpu_bf16_value(b16[i]) : bf[i];
            for (int m = 1; m <= MMAX; m++)
                for (int be = 0; be < 2; be++) {
                    const float beta = be ? 0.75f : 0.0f;
                    for (int64_t i = 0; i < m * n; i++)
                        y[i] = want[i] = 0.5f + (float)i;
                    for (int r = 0; r < m; r++) {
                        if (bits == 7)
                            nnt_cpu_gemv_bf16(1, 1, n, k, 0.5f, xr + r * k, b16, k, beta,
                                              want + r * n);
                        else
                            nnt_cpu_gemm_f32(0, 1, 1, n, k, 0.5f, xr + r * k, k, 0, bf, k, 0,
                                             beta, want + r * n, n, 0, 1);
                    }
                    nnt_cpu_nf4_rows(m, n, k, 0.5f, xr, tile, bits, beta, y, buf);
                    /* bf16 dot products (AVX512-BF16, whole blocks a row) sum in their own
                     * order: their sums are checked in double below; so are the portable
                     * kernels' float ones, BLIS's gemv, which sums a row by its place among
                     * the rows of the call (its fused blocks of rows, then the rest one by
                     * one): nf4_rows gives it B's rows in groups (84 of 180 at k 96), the
                     * one-row call all of them (AMD Zen 4: rows 80-83 and 164-167, the
                     * last 4 of each group of 84, 8 rows a fused block, differ in their
                     * last bits) */
                    const int dot16 = bits == 7 && k % 64 == 0 && nnt_cpu_avx512() == 2;
                    const int blis_rows = bits != 7 && nnt_cpu_isa() == NNT_CPU_ISA_GENERIC;
                    ck_assert_msg(dot16 || blis_rows ||
                                      memcmp(y, want, sizeof(float) * (size_t)(m * n)) == 0,
                                  "k %lld bits %d rows %d beta %g: not the one-row kernels' "
                                  "bits", (long long)k, bits, m, (double)beta);
                    for (int r = 0; r < m; r++)
                        for (int64_t j = 0; j < n; j++) {
                            double s = 0.0, mag = 0.0;
                            for (int64_t i = 0; i < k; i++) {
                                s += (double)xr[r * k + i] * bd[j * k + i];
                                mag += fabs((double)xr[r * k + i] * bd[j * k + i]);
                            }
                            double old = beta * (0.5 + (double)(r * n + j));
                            double ref = 0.5 * s + old;
                            /* float sums of k <= 320 products: at most 5.7e-8 of
                             * mag + |beta y| measured (every path) */
                            ck_assert_msg(fabs(y[r * n + j] - ref) <=
                                              6e-7 * (mag + fabs(old) + 1.0),
                                          "k %lld bits %d row %d col %lld: %g, in double %g",
                                          (long long)k, bits, r, (long long)j,
                                          (double)y[r * n + j], ref);
                        }
                }
        }
        free(tile), free(bd), free(bf), free(b16), free(y), free(want), free(x), free(xr);
        free(buf);
    }
}

/* nf4_rows_check on this pass's path, and where the CPU has AVX512-BF16, again with
 * AVX-512F alone (the bf16 products' rows decoded in registers as floats) */
START_TEST(test_nf4_rows)
{
    const int level = nnt_cpu_avx512();
    nf4_rows_check();
    if (level == 2) {
        nnt_cpu_avx512_force(1);
        nf4_rows_check();
        nnt_cpu_avx512_force(-1);
    }
}
END_TEST

static Suite *cpu_suite(void)
{
    Suite *s = suite_create("cpu_kernels");
    struct {
        const char *name;
        const TTest *fn;
    } cases[] = {
        {"elementwise", test_fill_scale_axpby}, {"gelu", test_gelu},
        {"bias_gelu", test_bias_gelu},           {"bcast", test_add_bcast_sum_outer},
        {"gelu_erf", test_gelu_erf},             {"bias_gelu_erf", test_bias_gelu_erf},
        {"swiglu_clamp", test_swiglu_clamp},
        {"sumsq", test_sumsq},                   {"copy_box", test_copy_box},
        {"feature_products", test_feature_products},
        {"gemm", test_gemm},                     {"gemv_bf16", test_gemv_bf16},
        {"layernorm_ref", test_layernorm_ref_fd},
        {"layernorm", test_layernorm},
        {"layernorm_small_variance", test_layernorm_small_variance},
        {"attention_ref", test_attention_ref_fd},
        {"attention_masked", test_attention_masked_rows},
        {"attention_window", test_attention_window_noscratch},
        {"attention_packed", test_attention_packed},
        {"attention_packed_band", test_attention_packed_band},
        {"attention_band_tasks", test_attention_band_tasks},
        {"attention_products", test_attention_products},
        {"xent_ref", test_xent_ref_fd},          {"xent", test_xent},
        {"embedding", test_embedding},           {"adam", test_adam},
        {"sgd", test_sgd},                       {"round", test_round},
        {"isa_exp", test_isa_exp},               {"isa_paths", test_isa_paths},
        {"isa_env", test_isa_env},               {"isa_convert", test_isa_convert},
        {"isa_avx512", test_isa_avx512},
        {"isa_row_max", test_isa_row_max},
        {"band_products", test_band_products},
        {"band16_products", test_band16_products},
        {"band16_grad_rows", test_band16_grad_rows},
        {"random", test_random},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, cases[i].fn);
        suite_add_tcase(s, tc);
    }
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_attention_tiled, 0, NATTN);
    tcase_add_loop_test(tc, test_attention_noscratch, 0, NATTN);
    tcase_add_loop_test(tc, test_attention_onednn, 0, NATTN);
    tcase_add_loop_test(tc, test_attention_bf16, 0, 4);
    tcase_add_test(tc, test_nf4_paths);
    tcase_add_test(tc, test_nf4_rows);
    tcase_add_test(tc, test_nf4_quantize_paths);
    suite_add_tcase(s, tc);
    return s;
}

/* The whole suite on the default path (AVX2 where the CPU has it, with its AVX-512 steps where
 * it has those), then on the AVX2 path without AVX-512 (where the CPU has it: what a CPU
 * without AVX-512 runs, the band products' AVX2 tiles among them), then on the portable one
 * (the children Check forks inherit the forced levels). */
int main(void)
{
    int failed = 0;
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1) {
            if (nnt_cpu_avx512() == 0)
                continue;
            nnt_cpu_avx512_force(0);
            printf("again without AVX-512 (nnt_cpu_avx512 forced to 0)\n");
        }
        if (pass == 2) {
            nnt_cpu_avx512_force(-1);
            if (nnt_cpu_isa() == NNT_CPU_ISA_GENERIC)
                break;
            nnt_cpu_isa_force(NNT_CPU_ISA_GENERIC);
            printf("again with the portable kernels (nnt_cpu_isa forced to generic)\n");
        }
        SRunner *sr = srunner_create(cpu_suite());
        srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose: every test and its result */
        failed += srunner_ntests_failed(sr);
        srunner_free(sr);
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
