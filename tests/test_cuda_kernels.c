/* SPDX-License-Identifier: MIT */
/* Tests of the nnt CUDA kernels (cuda/nnt_cuda.h) against the CPU kernels (cpu/nnt_cpu.h).
 *
 * Without a usable CUDA device the program prints "SKIP: no CUDA device (reason)" and exits
 * with 77, automake's skip code. Otherwise every kernel runs on the GPU on random inputs of
 * awkward sizes (1, 3, 17, 61, 130, ... ) and its result is compared with nnt_cpu_X on the
 * same inputs. The suite runs with CK_NOFORK: a CUDA context must not be inherited by fork().
 *
 * Tolerances, |got - ref| <= atol + rtol |ref| per element ("normwise": atol = rtol max|ref|),
 * about 10x the error measured on an NVIDIA H200 (2026-11-26, CUDA 13.0, driver 580; the
 * largest err / tolerance per check, NNT_TOL_REPORT, in brackets):
 *   bit-exact: fill (f32, i32, u16), scale, add_bcast, copy_box, embedding gather /
 *              scatter-add, bias add of bias_gelu (pre), fill_random (uniform,
 *              normal and dropout; see test_fill_random)
 *   1e-6:      DoRA's per-feature products (not yet run on a GPU)
 *   1e-6:      axpby, axpbyz, sum_outer, sumsq, optimizer steps (same operations; all measured
 *              bit-identical, a difference can only come from a CPU build that contracts
 *              multiply-adds into FMAs)
 *   1e-5:      GELU fwd/bwd (atol 1e-6) [0.18], the exact GELU's the same (its forward,
 *              bias_gelu_erf out and specials relative, atol 1e-30; not yet run on a GPU),
 *              bias_gelu out, xent (s, loss, dlogits
 *              normwise) [0.02], LayerNorm and RMSNorm forward (normwise) [0], SwiGLU
 *              fwd/bwd (atol 1e-6) [0.08]
 *   1e-6 normwise: RoPE (angle, cos, sin in double on both sides) [0]
 *   bit-exact: round_f32, f32_to_bf16 (the same integer rounding as the CPU), bf16_to_f32
 *   1e-5 normwise: GEMM (fp32; TF32 and bf16 against the CPU GEMM on rounded operands)
 *              [0.07], the GEMM of gemm_bias_gelu [0.04] (its GELU output 3e-5 [0.08]; the
 *              same for the exact GELU, not yet run on a GPU)
 *   1e-4 normwise: gemm_lt (cuBLASLt epilogues, every math mode; bias + GELU also with the
 *              unfused fallback; its DGELU epilogue measured 6.9e-6)
 *   3e-6 normwise: LayerNorm and RMSNorm backward [0.09]
 *   5e-6 normwise: attention forward / backward, multi-head and grouped-query (different
 *              summation orders in float) [0.09]; the row log-sum-exp l: rtol 1e-5, atol
 *              1e-6 [0.04]
 *   attention by products (the default since its first run on an H200, 2026-11-29):
 *              float products 5e-6 normwise as the flash kernels [0.049: 2.4e-7 measured];
 *              TF32 products 5e-3 (10-bit mantissas) [0.16: 7.9e-4 measured]
 *   mixture of experts (first run on an H200, 2026-11-29): routing choices equal, probs
 *              and w 3e-6 [0.08: 2.4e-7 measured] (expf), dlogits 1e-6 normwise [0.18];
 *              gather and scatter-add bit-exact; weight_grad 1e-6 (sums in double; measured
 *              exact), shared_add 1e-6 (atol 1e-6; expf) [0.23], the shared gate's ds 1e-6
 *              (atol 1e-7; from the same dy on both sides) [0.23], dz 3e-6
 *              normwise [0.08: 2.4e-7 measured]
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>

#include "nnt_cpu.h"
#include "nnt_cuda.h"

static cudaStream_t g_stream;
static cublasHandle_t g_blas;
static cublasLtHandle_t g_lt;
static void *g_ws;
static const size_t g_ws_size = (size_t)32 << 20;

static const int64_t SIZES[] = {1, 3, 17, 61, 130};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
    rng_state = s * 0x9E3779B97F4A7C15ull + 7;
}

static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rng_uniform(float lo, float hi)
{
    double u = (double)(rng_u64() >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    ck_assert_msg(p != NULL, "host malloc(%zu) failed", bytes);
    return p;
}

static float *rand_f(int64_t n, float lo, float hi)
{
    float *x = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_uniform(lo, hi);
    return x;
}

static float *copy_f(const float *x, int64_t n)
{
    float *y = xmalloc((size_t)n * sizeof(float));
    memcpy(y, x, (size_t)n * sizeof(float));
    return y;
}

#define CUDA_OK(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));             \
    } while (0)

#define NNT_OK(call)                                                                           \
    do {                                                                                       \
        int r_ = (call);                                                                       \
        ck_assert_msg(r_ == 0, "%s returned %d", #call, r_);                                   \
    } while (0)

static void *dalloc(size_t bytes)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, bytes > 0 ? bytes : 1));
    return p;
}

/* host -> device on g_stream, finished on return. (A plain cudaMemcpy from pageable memory
 * returns once the data is staged; the DMA can still be landing when a kernel on the
 * non-blocking g_stream reads the destination: seen on an H200 as stale tail elements.) */
static void upload(void *d, const void *h, size_t bytes)
{
    CUDA_OK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream));
}

/* device copy of n host floats */
static float *dup_d(const float *h, int64_t n)
{
    float *d = dalloc((size_t)n * sizeof(float));
    upload(d, h, (size_t)n * sizeof(float));
    return d;
}

static int32_t *dup_i(const int32_t *h, int64_t n)
{
    int32_t *d = dalloc((size_t)n * sizeof(int32_t));
    upload(d, h, (size_t)n * sizeof(int32_t));
    return d;
}

/* wait for the stream, then a new host array with the n device floats */
static float *fetch(const float *d, int64_t n)
{
    float *h = xmalloc((size_t)n * sizeof(float));
    CUDA_OK(cudaStreamSynchronize(g_stream));
    CUDA_OK(cudaMemcpy(h, d, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static void dfree(void *p)
{
    CUDA_OK(cudaFree(p));
}

static double max_abs(const float *x, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabs(x[i]) > m)
            m = fabs(x[i]);
    return m;
}

/* With NNT_TOL_REPORT=FILE, each comparison appends "cuda:WHAT<TAB>ratio<TAB>rtol<TAB>atol",
 * ratio = the largest |got - ref| / (atol + rtol |ref|) over the elements (1 = at the
 * tolerance): the measured error that sets a tolerance (about 10x, tests/testutil.h). */
static void report_margin(const char *what, double ratio, double rtol, double atol)
{
    const char *path = getenv("NNT_TOL_REPORT");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    fprintf(f, "cuda:%s\t%.3e\t%.3e\t%.3e\n", what, ratio, rtol, atol);
    fclose(f);
}

/* |got - ref| <= atol + rtol |ref| everywhere; equal values (incl. infinities) always pass */
static void check_close(const char *what, const float *got, const float *ref, int64_t n,
                        double rtol, double atol)
{
    int64_t bad = -1;
    double worst = 0.0, largest = 0.0; /* the worst failing err/lim; the largest err/lim */
    for (int64_t i = 0; i < n; i++) {
        if (got[i] == ref[i])
            continue;
        double err = fabs((double)got[i] - (double)ref[i]);
        double lim = atol + rtol * fabs((double)ref[i]);
        if (err / lim > largest || isnan(err))
            largest = isnan(err) ? INFINITY : err / lim;
        if (!(err <= lim) && (bad < 0 || !(err / lim <= worst))) {
            worst = err / lim;
            bad = i;
        }
    }
    report_margin(what, largest, rtol, atol);
    ck_assert_msg(bad < 0, "%s: element %lld of %lld: got %.9g, want %.9g (rtol %g, atol %g)",
                  what, (long long)bad, (long long)n, bad >= 0 ? got[bad] : 0.0,
                  bad >= 0 ? ref[bad] : 0.0, rtol, atol);
}

static void check_normwise(const char *what, const float *got, const float *ref, int64_t n,
                           double rtol)
{
    check_close(what, got, ref, n, rtol, rtol * max_abs(ref, n) + 1e-30);
}

static void check_exact(const char *what, const void *got, const void *ref, size_t bytes)
{
    const unsigned char *g = got, *r = ref;
    for (size_t i = 0; i < bytes; i++)
        ck_assert_msg(g[i] == r[i], "%s: byte %zu of %zu differs (got %u, want %u)", what, i,
                      bytes, g[i], r[i]);
}

static void check_exact_f(const char *what, const float *got, const float *ref, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, got + i, 4);
        memcpy(&b, ref + i, 4);
        ck_assert_msg(a == b, "%s: element %lld of %lld: got %.9g (0x%08x), want %.9g (0x%08x)",
                      what, (long long)i, (long long)n, got[i], a, ref[i], b);
    }
}

/* ---- elementwise ------------------------------------------------------------------------------ */

START_TEST(test_elementwise)
{
    static const int64_t ns[] = {1, 3, 17, 61, 130, 4099, (1 << 20) + 3};
    for (int t = 0; t < (int)(sizeof ns / sizeof ns[0]); t++) {
        int64_t n = ns[t];
        rng_seed(100 + t);
        float *x = rand_f(n, -8.0f, 8.0f), *y = rand_f(n, -2.0f, 2.0f);
        float *dx = dup_d(x, n), *dy = dup_d(y, n), *dz = dalloc((size_t)n * 4);
        float *ref = xmalloc((size_t)n * 4), *got;

        /* fill */
        NNT_OK(nnt_cuda_fill_f32(n, 0.375f, dz, g_stream));
        nnt_cpu_fill_f32(n, 0.375f, ref);
        got = fetch(dz, n);
        check_exact_f("fill", got, ref, n);
        free(got);

        /* fill of int32 and of bf16 bit patterns (odd n: the u16 kernel's last element) */
        {
            int32_t *ri = xmalloc((size_t)n * 4), *gi = xmalloc((size_t)n * 4);
            uint16_t *ru = xmalloc((size_t)n * 2), *gu = xmalloc((size_t)n * 2);
            NNT_OK(nnt_cuda_fill_i32(n, -50257, (int32_t *)dz, g_stream));
            nnt_cpu_fill_i32(n, -50257, ri);
            CUDA_OK(cudaStreamSynchronize(g_stream));
            CUDA_OK(cudaMemcpy(gi, dz, (size_t)n * 4, cudaMemcpyDeviceToHost));
            ck_assert_msg(memcmp(gi, ri, (size_t)n * 4) == 0, "fill_i32 differs (n %lld)",
                          (long long)n);
            NNT_OK(nnt_cuda_fill_f32(n, 0.0f, dz, g_stream));
            NNT_OK(nnt_cuda_fill_u16(n, 0xbf80u, (uint16_t *)dz, g_stream));
            nnt_cpu_fill_u16(n, 0xbf80u, ru);
            CUDA_OK(cudaStreamSynchronize(g_stream));
            CUDA_OK(cudaMemcpy(gu, dz, (size_t)n * 2, cudaMemcpyDeviceToHost));
            ck_assert_msg(memcmp(gu, ru, (size_t)n * 2) == 0, "fill_u16 differs (n %lld)",
                          (long long)n);
            /* the u16 fill writes n elements, not one more */
            CUDA_OK(cudaMemcpy(gu, (uint16_t *)dz + n, 2, cudaMemcpyDeviceToHost));
            ck_assert_msg(gu[0] == 0, "fill_u16 wrote past n (n %lld)", (long long)n);
            free(ri);
            free(gi);
            free(ru);
            free(gu);
        }

        /* scale */
        memcpy(ref, x, (size_t)n * 4);
        upload(dz, x, (size_t)n * 4);
        NNT_OK(nnt_cuda_scale_f32(n, -0.7f, dz, g_stream));
        nnt_cpu_scale_f32(n, -0.7f, ref);
        got = fetch(dz, n);
        check_exact_f("scale", got, ref, n);
        free(got);

        /* axpby, beta = 0 with NaN in y, beta = 1, general beta */
        static const float betas[] = {0.0f, 1.0f, -0.3f};
        for (int b = 0; b < 3; b++) {
            for (int64_t i = 0; i < n; i++)
                ref[i] = betas[b] == 0.0f ? NAN : y[i];
            upload(dz, ref, (size_t)n * 4);
            NNT_OK(nnt_cuda_axpby_f32(n, 1.3f, dx, betas[b], dz, g_stream));
            nnt_cpu_axpby_f32(n, 1.3f, x, betas[b], ref);
            got = fetch(dz, n);
            check_close("axpby", got, ref, n, 1e-6, 1e-7);
            free(got);
            /* axpbyz: z = 1.3 x + beta y into a third array, y (here the old z) unchanged */
            float *dy_ = NULL;
            ck_assert_int_eq(cudaMalloc((void **)&dy_, (size_t)(n ? n : 1) * 4), cudaSuccess);
            upload(dy_, y, (size_t)n * 4);
            NNT_OK(nnt_cuda_axpbyz_f32(n, 1.3f, dx, betas[b], dy_, dz, g_stream));
            float *yref = malloc((size_t)(n ? n : 1) * 4);
            memcpy(yref, y, (size_t)n * 4);
            nnt_cpu_axpbyz_f32(n, 1.3f, x, betas[b], y, ref);
            got = fetch(dz, n);
            check_close("axpbyz", got, ref, n, 1e-6, 1e-7);
            free(got);
            got = fetch(dy_, n);
            check_exact_f("axpbyz leaves y", got, yref, n);
            free(got);
            free(yref);
            cudaFree(dy_);
        }

        /* GELU */
        NNT_OK(nnt_cuda_gelu_fwd_f32(n, dx, dz, g_stream));
        nnt_cpu_gelu_fwd_f32(n, x, ref);
        got = fetch(dz, n);
        check_close("gelu_fwd", got, ref, n, 1e-5, 1e-6);
        free(got);
        NNT_OK(nnt_cuda_gelu_bwd_f32(n, dx, dy, dz, g_stream));
        nnt_cpu_gelu_bwd_f32(n, x, y, ref);
        got = fetch(dz, n);
        check_close("gelu_bwd", got, ref, n, 1e-5, 1e-6);
        free(got);
        /* in place, as the GEMM's DGELU epilogue runs it (dx == dy) */
        upload(dz, y, (size_t)n * 4);
        NNT_OK(nnt_cuda_gelu_bwd_f32(n, dx, dz, dz, g_stream));
        got = fetch(dz, n);
        check_close("gelu_bwd in place", got, ref, n, 1e-5, 1e-6);
        free(got);

        /* the exact GELU: forward relative down to the tail (x >= -8: |gelu| >= 5e-15) */
        NNT_OK(nnt_cuda_gelu_erf_fwd_f32(n, dx, dz, g_stream));
        nnt_cpu_gelu_erf_fwd_f32(n, x, ref);
        got = fetch(dz, n);
        check_close("gelu_erf_fwd", got, ref, n, 1e-5, 1e-30);
        free(got);
        upload(dz, x, (size_t)n * 4);   /* in place (y == x) */
        NNT_OK(nnt_cuda_gelu_erf_fwd_f32(n, dz, dz, g_stream));
        got = fetch(dz, n);
        check_close("gelu_erf_fwd in place", got, ref, n, 1e-5, 1e-30);
        free(got);
        NNT_OK(nnt_cuda_gelu_erf_bwd_f32(n, dx, dy, dz, g_stream));
        nnt_cpu_gelu_erf_bwd_f32(n, x, y, ref);
        got = fetch(dz, n);
        check_close("gelu_erf_bwd", got, ref, n, 1e-5, 1e-6);
        free(got);
        upload(dz, y, (size_t)n * 4);   /* in place, as the DGELU_ERF epilogue (dx == dy) */
        NNT_OK(nnt_cuda_gelu_erf_bwd_f32(n, dx, dz, dz, g_stream));
        got = fetch(dz, n);
        check_close("gelu_erf_bwd in place", got, ref, n, 1e-5, 1e-6);
        free(got);

        dfree(dx);
        dfree(dy);
        dfree(dz);
        free(x);
        free(y);
        free(ref);
    }
    /* n == 0 is a no-op */
    NNT_OK(nnt_cuda_fill_f32(0, 1.0f, NULL, g_stream));
    NNT_OK(nnt_cuda_gelu_fwd_f32(0, NULL, NULL, g_stream));
    NNT_OK(nnt_cuda_gelu_erf_fwd_f32(0, NULL, NULL, g_stream));
}
END_TEST

/* The exact GELU at infinities, huge values, signed zeros and NaN: the CPU kernels' values
 * (gelu(-inf) = -0, gelu'(+-inf) = 1, 0; no NaN from a number) */
START_TEST(test_gelu_erf_special)
{
    static const float x[] = {INFINITY, -INFINITY, 1e30f, -1e30f, 3e38f, -3e38f, 20.0f, -20.0f,
                              -13.0f, 0.0f, -0.0f, NAN};
    const int64_t n = (int64_t)(sizeof x / sizeof x[0]);
    float one[sizeof x / sizeof x[0]], y[sizeof x / sizeof x[0]], g[sizeof x / sizeof x[0]];
    for (int64_t i = 0; i < n; i++)
        one[i] = 1.0f;
    nnt_cpu_gelu_erf_fwd_f32(n, x, y);
    nnt_cpu_gelu_erf_bwd_f32(n, x, one, g);
    float *dx = dup_d(x, n), *done = dup_d(one, n), *dz = dalloc((size_t)n * 4);
    for (int bwd = 0; bwd < 2; bwd++) {
        if (bwd)
            NNT_OK(nnt_cuda_gelu_erf_bwd_f32(n, dx, done, dz, g_stream));
        else
            NNT_OK(nnt_cuda_gelu_erf_fwd_f32(n, dx, dz, g_stream));
        float *got = fetch(dz, n);
        const float *want = bwd ? g : y;
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(isnan(want[i]) ? isnan(got[i]) : (double)got[i] == want[i] ||
                          fabs((double)got[i] - want[i]) <= 1e-5 * fabs(want[i]),
                          "gelu_erf%s(%g): got %g, want %g", bwd ? "'" : "", (double)x[i],
                          (double)got[i], (double)want[i]);
        free(got);
    }
    dfree(dx);
    dfree(done);
    dfree(dz);
}
END_TEST

/* DoRA's per-feature kernels against the CPU's (not yet run on a GPU): mul_bcast per column
 * and per row in place, dot_cols with a factor, dot_rows in float and bf16, rsqrt_mul;
 * the sums in double on both sides, in other orders */
START_TEST(test_feature_products)
{
    for (int a = 0; a < NSIZES; a++) {
        int64_t outer = SIZES[a], inner = SIZES[(a + 1) % NSIZES] + 5, n = outer * inner;
        rng_seed(900 + a);
        float *x = rand_f(n, -1.0f, 1.0f), *y = rand_f(n, -1.0f, 1.0f);
        float *h = rand_f(inner, 0.5f, 2.0f), *hr = rand_f(outer, 0.5f, 2.0f);
        float *z = rand_f(n, -1.0f, 1.0f), *acc = rand_f(inner, -1.0f, 1.0f);
        float *racc = rand_f(outer, -1.0f, 1.0f), *n2 = rand_f(inner, 0.1f, 9.0f);
        float *dx = dup_d(x, n), *dy = dup_d(y, n), *dh = dup_d(h, inner), *dhr = dup_d(hr, outer);
        float *dz = dup_d(z, n), *dacc = dup_d(acc, inner), *dracc = dup_d(racc, outer);
        float *dn2 = dup_d(n2, inner), *dout = dalloc((size_t)inner * 4), *got;
        NNT_OK(nnt_cuda_mul_bcast_f32(outer, inner, dx, dh, -1.0f, 0, 1, dz, g_stream));
        nnt_cpu_mul_bcast_f32(outer, inner, x, h, -1.0f, 0, 1, z);
        check_close("mul_bcast", got = fetch(dz, n), z, n, 1e-6, 1e-6);
        free(got);
        NNT_OK(nnt_cuda_mul_bcast_f32(outer, inner, dx, dhr, 0.0f, 1, 0, dx, g_stream));
        nnt_cpu_mul_bcast_f32(outer, inner, x, hr, 0.0f, 1, 0, x);
        check_close("mul_bcast by row", got = fetch(dx, n), x, n, 1e-6, 1e-6);
        free(got);
        NNT_OK(nnt_cuda_dot_cols_f32(outer, inner, dx, dy, dh, dacc, g_stream));
        nnt_cpu_dot_cols_f32(outer, inner, x, y, h, acc);
        check_close("dot_cols", got = fetch(dacc, inner), acc, inner, 1e-6, 1e-6);
        free(got);
        NNT_OK(nnt_cuda_dot_rows(0, outer, inner, dx, dy, dracc, g_stream));
        nnt_cpu_dot_rows_f32(outer, inner, x, y, racc);
        check_close("dot_rows", got = fetch(dracc, outer), racc, outer, 1e-6, 1e-6);
        free(got);
        uint16_t *xb = xmalloc((size_t)n * 2), *yb = xmalloc((size_t)n * 2);
        nnt_cpu_f32_to_bf16(n, x, xb);
        nnt_cpu_f32_to_bf16(n, y, yb);
        void *dxb = dalloc((size_t)n * 2), *dyb = dalloc((size_t)n * 2);
        upload(dxb, xb, (size_t)n * 2);
        upload(dyb, yb, (size_t)n * 2);
        NNT_OK(nnt_cuda_dot_rows(1, outer, inner, dxb, dyb, dracc, g_stream));
        nnt_cpu_dot_rows_bf16(outer, inner, xb, yb, racc);
        check_close("dot_rows bf16", got = fetch(dracc, outer), racc, outer, 1e-6, 1e-6);
        free(got);
        NNT_OK(nnt_cuda_rsqrt_mul_f32(inner, dh, dn2, dout, g_stream));
        float *out = xmalloc((size_t)inner * 4);
        nnt_cpu_rsqrt_mul_f32(inner, h, n2, out);
        check_close("rsqrt_mul", got = fetch(dout, inner), out, inner, 1e-6, 0.0);
        free(got);
        free(x), free(y), free(h), free(hr), free(z), free(acc), free(racc), free(n2);
        free(xb), free(yb), free(out);
        dfree(dx), dfree(dy), dfree(dh), dfree(dhr), dfree(dz), dfree(dacc), dfree(dracc);
        dfree(dn2), dfree(dout), dfree(dxb), dfree(dyb);
    }
}
END_TEST

START_TEST(test_bcast_and_bias_gelu)
{
    for (int a = 0; a < NSIZES; a++)
        for (int b = 0; b < NSIZES; b++) {
            int64_t outer = SIZES[a], inner = SIZES[b], ldy = inner + 3, ny = outer * ldy;
            rng_seed(200 + 10 * a + b);
            float *x = rand_f(inner, -1.0f, 1.0f), *y = rand_f(ny, -1.0f, 1.0f);
            float *acc = rand_f(inner, -1.0f, 1.0f);
            float *dx = dup_d(x, inner), *dy = dup_d(y, ny), *dacc = dup_d(acc, inner), *got;

            NNT_OK(nnt_cuda_add_bcast_f32(outer, inner, dx, dy, ldy, g_stream));
            nnt_cpu_add_bcast_f32(outer, inner, x, y, ldy);
            got = fetch(dy, ny);
            check_exact_f("add_bcast", got, y, ny);
            free(got);

            NNT_OK(nnt_cuda_sum_outer_f32(outer, inner, dy, ldy, dacc, g_stream));
            nnt_cpu_sum_outer_f32(outer, inner, y, ldy, acc);
            got = fetch(dacc, inner);
            check_close("sum_outer", got, acc, inner, 1e-6, 1e-6);
            free(got);

            /* bias_gelu on (outer, inner), with and without bias */
            for (int wb = 0; wb < 2; wb++) {
                int64_t mn = outer * inner;
                float *pre = rand_f(mn, -5.0f, 5.0f), *out = xmalloc((size_t)mn * 4);
                float *dpre = dup_d(pre, mn), *dout = dalloc((size_t)mn * 4);
                NNT_OK(nnt_cuda_bias_gelu_f32(outer, inner, wb ? dx : NULL, dpre, dout,
                                              g_stream));
                nnt_cpu_bias_gelu_f32(outer, inner, wb ? x : NULL, pre, out);
                got = fetch(dpre, mn);
                check_exact_f("bias_gelu pre", got, pre, mn);
                free(got);
                got = fetch(dout, mn);
                check_close("bias_gelu out", got, out, mn, 1e-5, 1e-6);
                free(got);
                /* the exact GELU's, on the same pre-activations */
                upload(dpre, pre, (size_t)mn * 4);
                NNT_OK(nnt_cuda_bias_gelu_erf_f32(outer, inner, wb ? dx : NULL, dpre, dout,
                                                  g_stream));
                nnt_cpu_bias_gelu_erf_f32(outer, inner, wb ? x : NULL, pre, out);
                got = fetch(dpre, mn);
                check_exact_f("bias_gelu_erf pre", got, pre, mn);
                free(got);
                got = fetch(dout, mn);
                check_close("bias_gelu_erf out", got, out, mn, 1e-5, 1e-30);
                free(got);
                dfree(dpre);
                dfree(dout);
                free(pre);
                free(out);
            }
            dfree(dx);
            dfree(dy);
            dfree(dacc);
            free(x);
            free(y);
            free(acc);
        }
}
END_TEST

/* ---- copy_box ------------------------------------------------------------------------------ */

/* one past the largest element offset touched by a box with these strides */
static int64_t box_extent(int ndim, const int64_t *shape, const int64_t *stride)
{
    int64_t e = 0;
    for (int d = 0; d < ndim; d++)
        e += (shape[d] - 1) * stride[d];
    return e + 1;
}

static void run_copy_case(const char *what, int ndim, const int64_t *shape, size_t elsize,
                          const int64_t *ss, const int64_t *ds, int64_t src_off, int64_t dst_off)
{
    int64_t ns = box_extent(ndim, shape, ss) + src_off;
    int64_t nd = box_extent(ndim, shape, ds) + dst_off;
    size_t sb = (size_t)ns * elsize, db = (size_t)nd * elsize;
    unsigned char *hs = xmalloc(sb), *hd = xmalloc(db), *got = xmalloc(db);
    for (size_t i = 0; i < sb; i++)
        hs[i] = (unsigned char)rng_u64();
    for (size_t i = 0; i < db; i++)
        hd[i] = (unsigned char)(i * 7 + 1);
    unsigned char *dsrc = dalloc(sb), *ddst = dalloc(db);
    upload(dsrc, hs, sb);
    upload(ddst, hd, db);
    NNT_OK(nnt_cuda_copy_box(ndim, shape, elsize, dsrc + src_off * elsize, ss,
                             ddst + dst_off * elsize, ds, g_stream));
    nnt_cpu_copy_box(ndim, shape, elsize, hs + src_off * elsize, ss, hd + dst_off * elsize, ds);
    CUDA_OK(cudaStreamSynchronize(g_stream));
    CUDA_OK(cudaMemcpy(got, ddst, db, cudaMemcpyDeviceToHost));
    check_exact(what, got, hd, db);
    dfree(dsrc);
    dfree(ddst);
    free(hs);
    free(hd);
    free(got);
}

START_TEST(test_copy_box)
{
    rng_seed(300);
    static const size_t elsizes[] = {1, 2, 4, 8, 12, 16};
    for (int e = 0; e < (int)(sizeof elsizes / sizeof elsizes[0]); e++) {
        size_t es = elsizes[e];
        /* 2-D sub-box (retile): (17, 61) out of a (61, 130) tile at (3, 5) -> contiguous */
        {
            int64_t shape[2] = {17, 61}, ss[2] = {130, 1}, ds[2] = {61, 1};
            run_copy_case("copy 2d subbox", 2, shape, es, ss, ds, 3 * 130 + 5, 0);
            run_copy_case("copy 2d into subbox", 2, shape, es, ds, ss, 0, 3 * 130 + 5);
        }
        /* head transpose (B, T, NH, hd) -> (B, NH, T, hd) */
        {
            int64_t B = 2, T = 17, NH = 3, HD = 13;
            int64_t shape[4] = {B, T, NH, HD};
            int64_t ss[4] = {T * NH * HD, NH * HD, HD, 1};
            int64_t ds[4] = {NH * T * HD, HD, T * HD, 1};
            run_copy_case("copy head transpose", 4, shape, es, ss, ds, 0, 0);
            run_copy_case("copy head transpose, odd offsets", 4, shape, es, ss, ds, 1, 3);
        }
        /* full transpose: innermost strides not unit on the source side */
        {
            int64_t shape[3] = {5, 7, 3}, ss[3] = {1, 5, 35}, ds[3] = {21, 3, 1};
            run_copy_case("copy 3d transpose", 3, shape, es, ss, ds, 0, 0);
        }
        /* 1-D strided, unit dims, 8-D */
        {
            int64_t shape[1] = {61}, ss[1] = {2}, ds[1] = {1};
            run_copy_case("copy 1d strided", 1, shape, es, ss, ds, 0, 1);
            int64_t sh3[3] = {1, 130, 1}, s3[3] = {1000, 1, 7}, d3[3] = {5, 1, 1};
            run_copy_case("copy unit dims", 3, sh3, es, s3, d3, 0, 0);
            int64_t sh8[8] = {2, 1, 3, 2, 1, 3, 2, 3};
            int64_t s8[8], d8[8];
            int64_t st = 1;
            for (int d = 7; d >= 0; d--) {
                d8[d] = st;
                st *= sh8[d];
            }
            st = 1;
            for (int d = 0; d < 8; d++) { /* reversed order on the source side */
                s8[d] = st;
                st *= sh8[d] + 1;
            }
            run_copy_case("copy 8d", 8, sh8, es, s8, d8, 2, 0);
        }
    }
    int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, st[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(nnt_cuda_copy_box(9, shape, 4, NULL, st, NULL, st, g_stream), -1);
    int64_t zero[2] = {0, 5};
    NNT_OK(nnt_cuda_copy_box(2, zero, 4, NULL, st, NULL, st, g_stream));
}
END_TEST

/* ---- GEMM ------------------------------------------------------------------------------------ */

START_TEST(test_gemm)
{
    static const int64_t mnk[][3] = {{1, 1, 1},    {3, 17, 61}, {61, 130, 17},
                                     {130, 3, 130}, {17, 61, 3}, {5, 7, 0}};
    int cs = 0;
    for (int s = 0; s < (int)(sizeof mnk / sizeof mnk[0]); s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bt = 1; bt <= 3; bt += 2)
                    for (int bz = 0; bz < 2; bz++) {
                        int64_t m = mnk[s][0], n = mnk[s][1], k = mnk[s][2], batch = bt;
                        int64_t ar = ta ? k : m, ac = ta ? m : k; /* stored A */
                        int64_t br = tb ? n : k, bc = tb ? k : n; /* stored B */
                        int64_t lda = ac + 2, ldb = bc + 1, ldc = n + 3;
                        int64_t sa = ar * lda + 5, sb = br * ldb + 1, sc = m * ldc + 2;
                        float alpha = 0.7f, beta = bz ? 0.5f : 0.0f;
                        rng_seed(400 + cs++);
                        float *a = rand_f(sa * batch, -1.0f, 1.0f);
                        float *b = rand_f(sb * batch, -1.0f, 1.0f);
                        float *c = rand_f(sc * batch, -1.0f, 1.0f);
                        if (beta == 0.0f) /* C must not be read */
                            for (int64_t i = 0; i < sc * batch; i++)
                                c[i] = NAN;
                        float *da = dup_d(a, sa * batch), *db = dup_d(b, sb * batch);
                        float *dc = dup_d(c, sc * batch);
                        NNT_OK(nnt_cuda_gemm_f32(ta, tb, m, n, k, alpha, da, lda, sa, db, ldb,
                                                 sb, beta, dc, ldc, sc, batch, g_blas,
                                                 g_stream));
                        nnt_cpu_gemm_f32(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta,
                                         c, ldc, sc, batch);
                        float *got = fetch(dc, sc * batch);
                        /* compare only the m x n blocks (padding keeps its initial value) */
                        for (int64_t q = 0; q < batch; q++)
                            for (int64_t r = 0; r < m; r++)
                                check_normwise("gemm", got + q * sc + r * ldc,
                                               c + q * sc + r * ldc, n, 1e-5);
                        free(got);
                        dfree(da);
                        dfree(db);
                        dfree(dc);
                        free(a);
                        free(b);
                        free(c);
                    }
    /* alpha == 0: A and B are not read (NaN there does not leak), C = beta C as on the CPU */
    {
        const int64_t m = 5, n = 7, k = 3;
        float *a = xmalloc(m * k * 4), *b = xmalloc(k * n * 4), *c = rand_f(m * n, -1.0f, 1.0f);
        for (int64_t i = 0; i < m * k; i++)
            a[i] = NAN;
        for (int64_t i = 0; i < k * n; i++)
            b[i] = 1.0f;
        float *da = dup_d(a, m * k), *db = dup_d(b, k * n), *dc = dup_d(c, m * n);
        NNT_OK(nnt_cuda_gemm_f32(0, 0, m, n, k, 0.0f, da, k, 0, db, n, 0, 0.5f, dc, n, 0, 1,
                                 g_blas, g_stream));
        nnt_cpu_gemm_f32(0, 0, m, n, k, 0.0f, a, k, 0, b, n, 0, 0.5f, c, n, 0, 1);
        float *got = fetch(dc, m * n);
        check_exact_f("gemm alpha 0", got, c, m * n);
        free(got), free(a), free(b), free(c), dfree(da), dfree(db), dfree(dc);
    }
}
END_TEST

/* Operand rounding: the GPU twins give the CPU's bits (also for NaN, infinities, overflow and
 * subnormals); then TF32 and bf16 products against the CPU GEMM on the rounded operands. */
/* NF4 dequantization (QLoRA's frozen base on CUDA workers) against the CPU kernel: the same
 * bits, into floats and into bf16, for random codes and absmax (a zero block, a block of a
 * tiny absmax whose products are subnormal, one whose bf16 rounding carries), several blocks. */
START_TEST(test_nf4_dequantize)
{
    const int64_t n = 64 * 37, bytes = n / 2 + n / 64 * 4;
    rng_seed(6464);
    uint8_t *q = xmalloc((size_t)bytes);
    for (int64_t i = 0; i < n / 2; i++)
        q[i] = (uint8_t)rng_u64();
    float *absmax = (float *)(void *)(q + n / 2);
    for (int64_t b = 0; b < n / 64; b++)
        absmax[b] = rng_uniform(0.0f, 3.0f);
    absmax[3] = 0.0f, absmax[5] = 1e-39f, absmax[7] = 1.00390625f;   /* 1 + 2^-8: carries */
    uint8_t *dq = dalloc((size_t)bytes);
    upload(dq, q, (size_t)bytes);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        size_t esize = bf16 ? 2 : 4;
        void *want = xmalloc((size_t)n * esize), *got = xmalloc((size_t)n * esize);
        void *dy = dalloc((size_t)n * esize);
        nnt_cpu_nf4_dequantize(n, q, absmax, want, bf16);
        NNT_OK(nnt_cuda_nf4_dequantize(n, dq, (const float *)(const void *)(dq + n / 2),
                                       nnt_cpu_nf4_table(), dy, bf16, g_stream));
        CUDA_OK(cudaStreamSynchronize(g_stream));
        CUDA_OK(cudaMemcpy(got, dy, (size_t)n * esize, cudaMemcpyDeviceToHost));
        check_exact(bf16 ? "nf4 dequantize bf16" : "nf4 dequantize", got, want,
                    (size_t)n * esize);
        dfree(dy), free(want), free(got);
    }
    ck_assert_int_eq(nnt_cuda_nf4_dequantize(65, dq, NULL, nnt_cpu_nf4_table(), NULL, 0,
                                             g_stream), -1);   /* not whole blocks */
    dfree(dq), free(q);
}
END_TEST

START_TEST(test_round_and_reduced_gemm)
{
    const int64_t n = 5000;
    rng_seed(4242);
    float *x = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)rng_u64();   /* every bit pattern: NaN, Inf, subnormal, ... */
        if (i % 2)
            u = (u & 0x807FFFFFu) | ((uint32_t)(100 + rng_u64() % 56) << 23);   /* normal */
        memcpy(&x[i], &u, sizeof u);
    }
    float *dx = dup_d(x, n), *dy = dalloc((size_t)n * sizeof(float));
    uint16_t *d16 = dalloc((size_t)n * sizeof(uint16_t));
    uint16_t *h16 = xmalloc((size_t)n * sizeof(uint16_t));
    float *want = xmalloc((size_t)n * sizeof(float)), *wide = xmalloc((size_t)n * sizeof(float));
    for (int bits = 7; bits <= 10; bits += 3) {
        nnt_cpu_round_f32(n, bits, x, want);
        NNT_OK(nnt_cuda_round_f32(n, bits, dx, dy, g_stream));
        float *got = fetch(dy, n);
        check_exact_f(bits == 7 ? "round_f32 (7 bits)" : "round_f32 (10 bits)", got, want, n);
        free(got);
    }
    nnt_cpu_round_f32(n, 7, x, want);
    NNT_OK(nnt_cuda_f32_to_bf16(n, dx, d16, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream));
    CUDA_OK(cudaMemcpy(h16, d16, (size_t)n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h16[i] << 16;
        memcpy(&wide[i], &u, sizeof u);
    }
    check_exact_f("f32_to_bf16", wide, want, n);
    NNT_OK(nnt_cuda_bf16_to_f32(n, d16, dy, g_stream));   /* back: exact */
    float *back = fetch(dy, n);
    check_exact_f("bf16_to_f32", back, wide, n);
    free(back);
    dfree(dx), dfree(dy), dfree(d16), free(h16), free(want), free(wide), free(x);

    static const int64_t mnk[][3] = {{1, 1, 1}, {3, 17, 61}, {61, 130, 17}, {130, 64, 130},
                                     {5, 7, 0}};
    int cs = 0;
    for (int s = 0; s < (int)(sizeof mnk / sizeof mnk[0]); s++)
        for (int tr = 0; tr < 4; tr++)
            for (int bf16 = 0; bf16 < 2; bf16++) {
                int ta = tr >> 1, tb = tr & 1, bits = bf16 ? 7 : 10;
                int64_t m = mnk[s][0], nn = mnk[s][1], k = mnk[s][2], batch = 2;
                int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? nn : k, bc = tb ? k : nn;
                int64_t lda = ac + 1, ldb = bc + 2, ldc = nn + 1;
                int64_t sa = ar * lda + 3, sb = br * ldb + 1, sc = m * ldc + 2;
                float alpha = 1.25f, beta = s % 2 ? 0.5f : 0.0f;
                rng_seed(900 + cs++);
                float *a = rand_f(sa * batch, -2.0f, 2.0f), *b = rand_f(sb * batch, -2.0f, 2.0f);
                float *c = rand_f(sc * batch, -1.0f, 1.0f);
                float *da = dup_d(a, sa * batch), *db = dup_d(b, sb * batch);
                float *dc = dup_d(c, sc * batch);
                if (bf16) {
                    uint16_t *a16 = dalloc((size_t)(sa * batch) * 2);
                    uint16_t *b16 = dalloc((size_t)(sb * batch) * 2);
                    NNT_OK(nnt_cuda_f32_to_bf16(sa * batch, da, a16, g_stream));
                    NNT_OK(nnt_cuda_f32_to_bf16(sb * batch, db, b16, g_stream));
                    NNT_OK(nnt_cuda_gemm_bf16(ta, tb, m, nn, k, alpha, a16, lda, sa, b16, ldb, sb,
                                              beta, dc, ldc, sc, batch, g_blas, g_stream));
                    CUDA_OK(cudaStreamSynchronize(g_stream));
                    dfree(a16), dfree(b16);
                } else {
                    NNT_OK(nnt_cuda_round_f32(sa * batch, bits, da, da, g_stream));
                    NNT_OK(nnt_cuda_round_f32(sb * batch, bits, db, db, g_stream));
                    NNT_OK(nnt_cuda_gemm_tf32(ta, tb, m, nn, k, alpha, da, lda, sa, db, ldb, sb,
                                              beta, dc, ldc, sc, batch, g_blas, g_stream));
                }
                nnt_cpu_round_f32(sa * batch, bits, a, a);
                nnt_cpu_round_f32(sb * batch, bits, b, b);
                nnt_cpu_gemm_f32(ta, tb, m, nn, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                                 batch);
                float *got = fetch(dc, sc * batch);
                for (int64_t q = 0; q < batch; q++)
                    for (int64_t r = 0; r < m; r++)
                        check_normwise(bf16 ? "gemm_bf16" : "gemm_tf32", got + q * sc + r * ldc,
                                       c + q * sc + r * ldc, nn, 1e-5);
                free(got), free(a), free(b), free(c);
                dfree(da), dfree(db), dfree(dc);
            }
}
END_TEST

START_TEST(test_gemm_bias_gelu)
{
    static const int64_t mnk[][3] = {{1, 8, 1},    {3, 16, 61}, {61, 128, 17}, {17, 61, 3},
                                     {130, 3, 130}, {64, 96, 768}};
    int cs = 0;
    for (int s = 0; s < (int)(sizeof mnk / sizeof mnk[0]); s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int wb = 0; wb < 2; wb++) {
                    int64_t m = mnk[s][0], n = mnk[s][1], k = mnk[s][2];
                    int64_t ar = ta ? k : m, ac = ta ? m : k;
                    int64_t br = tb ? n : k, bc = tb ? k : n;
                    int64_t lda = ac, ldb = bc, mn = m * n;
                    rng_seed(500 + cs++);
                    float *a = rand_f(ar * lda, -1.0f, 1.0f), *b = rand_f(br * ldb, -1.0f, 1.0f);
                    float *bias = rand_f(n, -1.0f, 1.0f);
                    float *pre = xmalloc((size_t)mn * 4), *out = xmalloc((size_t)mn * 4);
                    float *da = dup_d(a, ar * lda), *db = dup_d(b, br * ldb);
                    float *dbias = dup_d(bias, n);
                    float *dpre = dalloc((size_t)mn * 4), *dout = dalloc((size_t)mn * 4);
                    /* as the GEMM codelet does it: fused by cuBLASLt, or (refused) the
                     * product by cuBLAS and then the bias + GELU kernel */
                    int rc = nnt_cuda_gemm_lt(g_lt, NNT_CUDA_MATH_F32, NNT_CUDA_EPI_BIAS_GELU, ta,
                                              tb, m, n, k, 1.0f, da, lda, db, ldb, 0.0f, dpre,
                                              wb ? dbias : NULL, dout, g_ws, g_ws_size,
                                              g_stream);
                    ck_assert(rc == 0 || rc == 1);
                    if (rc == 1) {
                        NNT_OK(nnt_cuda_gemm_f32(ta, tb, m, n, k, 1.0f, da, lda, 0, db, ldb, 0,
                                                 0.0f, dpre, n, 0, 1, g_blas, g_stream));
                        NNT_OK(nnt_cuda_bias_gelu_f32(m, n, wb ? dbias : NULL, dpre, dout,
                                                      g_stream));
                    }
                    nnt_cpu_gemm_f32(ta, tb, m, n, k, 1.0f, a, lda, 0, b, ldb, 0, 0.0f, pre, n,
                                     0, 1);
                    nnt_cpu_bias_gelu_f32(m, n, wb ? bias : NULL, pre, out);
                    float *got = fetch(dpre, mn);
                    check_normwise("gemm_bias_gelu pre", got, pre, mn, 1e-5);
                    free(got);
                    got = fetch(dout, mn);
                    check_normwise("gemm_bias_gelu out", got, out, mn, 3e-5);
                    free(got);
                    /* the exact GELU, as the GEMM codelet does it: the product and the bias
                     * by cuBLASLt (or cuBLAS and the bias + GELU kernel), then our kernel */
                    rc = nnt_cuda_gemm_lt(g_lt, NNT_CUDA_MATH_F32, NNT_CUDA_EPI_BIAS, ta, tb, m,
                                          n, k, 1.0f, da, lda, db, ldb, 0.0f, dpre,
                                          wb ? dbias : NULL, NULL, g_ws, g_ws_size, g_stream);
                    ck_assert(rc == 0 || rc == 1);
                    if (rc == 0) {
                        NNT_OK(nnt_cuda_gelu_erf_fwd_f32(mn, dpre, dout, g_stream));
                    } else {
                        NNT_OK(nnt_cuda_gemm_f32(ta, tb, m, n, k, 1.0f, da, lda, 0, db, ldb, 0,
                                                 0.0f, dpre, n, 0, 1, g_blas, g_stream));
                        NNT_OK(nnt_cuda_bias_gelu_erf_f32(m, n, wb ? dbias : NULL, dpre, dout,
                                                          g_stream));
                    }
                    nnt_cpu_gemm_f32(ta, tb, m, n, k, 1.0f, a, lda, 0, b, ldb, 0, 0.0f, pre, n,
                                     0, 1);
                    nnt_cpu_bias_gelu_erf_f32(m, n, wb ? bias : NULL, pre, out);
                    got = fetch(dpre, mn);
                    check_normwise("gemm_bias_gelu_erf pre", got, pre, mn, 1e-5);
                    free(got);
                    got = fetch(dout, mn);
                    check_normwise("gemm_bias_gelu_erf out", got, out, mn, 3e-5);
                    free(got);
                    dfree(da);
                    dfree(db);
                    dfree(dbias);
                    dfree(dpre);
                    dfree(dout);
                    free(a);
                    free(b);
                    free(bias);
                    free(pre);
                    free(out);
                }
}
END_TEST

/* nnt_cuda_gemm_lt: every math mode and epilogue against the CPU GEMM on operands rounded as
 * the mode rounds them, then the CPU epilogue. A refusal (1) must leave c untouched. */
static void lt_reference(int math, int epi, int ta, int tb, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, const float *bias, float *aux)
{
    int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb;
    float *ar = xmalloc((size_t)na * 4), *br = xmalloc((size_t)nb * 4);
    int bits = math == NNT_CUDA_MATH_BF16 ? 7 : math == NNT_CUDA_MATH_TF32 ? 10 : 0;
    memcpy(ar, a, (size_t)na * 4);
    memcpy(br, b, (size_t)nb * 4);
    if (bits) {
        nnt_cpu_round_f32(na, bits, ar, ar);
        nnt_cpu_round_f32(nb, bits, br, br);
    }
    nnt_cpu_gemm_f32(ta, tb, m, n, k, alpha, ar, lda, 0, br, ldb, 0, beta, c, n, 0, 1);
    if (epi == NNT_CUDA_EPI_BIAS && bias)
        nnt_cpu_add_bcast_f32(m, n, bias, c, n);
    if (epi == NNT_CUDA_EPI_BIAS_GELU)
        nnt_cpu_bias_gelu_f32(m, n, bias, c, aux);
    if (epi == NNT_CUDA_EPI_DGELU)
        nnt_cpu_gelu_bwd_f32(m * n, aux, c, c);
    free(ar);
    free(br);
}

START_TEST(test_gemm_lt)
{
    static const int64_t mnk[][3] = {{1, 8, 1}, {3, 16, 61}, {61, 128, 17}, {17, 61, 3},
                                     {64, 96, 768}};
    static const char *const names[] = {"none", "bias", "bias_gelu", "dgelu"};
    int cs = 0, fused = 0, refused = 0;
    for (int s = 0; s < (int)(sizeof mnk / sizeof mnk[0]); s++)
        for (int math = 0; math < 3; math++)
            for (int epi = 0; epi < 4; epi++)
                for (int tr = 0; tr < 4; tr++) {
                    int ta = tr >> 1, tb = tr & 1;
                    int64_t m = mnk[s][0], n = mnk[s][1], k = mnk[s][2], mn = m * n;
                    int64_t lda = ta ? m : k, ldb = tb ? k : n;
                    int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb;
                    int gelu = epi >= NNT_CUDA_EPI_BIAS_GELU;
                    float beta = gelu ? 0.0f : (tr % 2 ? 0.5f : 0.0f);
                    float alpha = gelu ? 1.0f : 1.25f;
                    rng_seed(700 + cs++);
                    float *a = rand_f(na, -1.0f, 1.0f), *b = rand_f(nb, -1.0f, 1.0f);
                    float *bias = rand_f(n, -1.0f, 1.0f), *c = rand_f(mn, -1.0f, 1.0f);
                    float *aux = rand_f(mn, -3.0f, 3.0f);
                    float *da = dup_d(a, na), *db = dup_d(b, nb), *dbias = dup_d(bias, n);
                    float *dc = dup_d(c, mn), *daux = dup_d(aux, mn);
                    const void *pa = da, *pb = db;
                    uint16_t *a16 = NULL, *b16 = NULL;
                    if (math == NNT_CUDA_MATH_BF16) {
                        a16 = dalloc((size_t)na * 2);
                        b16 = dalloc((size_t)nb * 2);
                        NNT_OK(nnt_cuda_f32_to_bf16(na, da, a16, g_stream));
                        NNT_OK(nnt_cuda_f32_to_bf16(nb, db, b16, g_stream));
                        pa = a16, pb = b16;
                    } else if (math == NNT_CUDA_MATH_TF32) {
                        NNT_OK(nnt_cuda_round_f32(na, 10, da, da, g_stream));
                        NNT_OK(nnt_cuda_round_f32(nb, 10, db, db, g_stream));
                    }
                    int rc = nnt_cuda_gemm_lt(g_lt, math, epi, ta, tb, m, n, k, alpha, pa, lda,
                                              pb, ldb, beta, dc, epi ? dbias : NULL, daux, g_ws,
                                              g_ws_size, g_stream);
                    ck_assert_msg(rc == 0 || rc == 1, "gemm_lt math %d %s: status %d", math,
                                  names[epi], rc);
                    float *got = fetch(dc, mn);
                    if (rc == 1) {
                        refused++;
                        check_exact_f("gemm_lt refused: c untouched", got, c, mn);
                    } else {
                        fused++;
                        lt_reference(math, epi, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                     epi ? bias : NULL, aux);
                        check_normwise(names[epi], got, c, mn, 1e-4);
                        if (epi == NNT_CUDA_EPI_BIAS_GELU) {
                            free(got);
                            got = fetch(daux, mn);
                            check_normwise("bias_gelu out", got, aux, mn, 1e-4);
                        }
                    }
                    free(got), free(a), free(b), free(bias), free(c), free(aux);
                    dfree(da), dfree(db), dfree(dbias), dfree(dc), dfree(daux);
                    if (a16)
                        dfree(a16), dfree(b16);
                }
    printf("gemm_lt: %d products fused by cuBLASLt, %d refused (unfused path)\n", fused, refused);
    ck_assert_msg(fused > 0, "cuBLASLt took none of the products");
}
END_TEST

/* ---- LayerNorm ---------------------------------------------------------------------------- */

START_TEST(test_layernorm)
{
    static const int64_t rows_[] = {1, 3, 17, 61};
    static const int64_t ns[] = {1, 3, 17, 61, 130, 768, 1000};
    int cs = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < (int)(sizeof ns / sizeof ns[0]); b++) {
            int64_t rows = rows_[a], n = ns[b], rn = rows * n;
            rng_seed(600 + cs++);
            float *x = rand_f(rn, -2.0f, 3.0f), *dy = rand_f(rn, -1.0f, 1.0f);
            float *gamma = rand_f(n, 0.5f, 1.5f), *beta = rand_f(n, -0.5f, 0.5f);
            float *dgamma = rand_f(n, -1.0f, 1.0f), *dbeta = rand_f(n, -1.0f, 1.0f);
            float *y = xmalloc((size_t)rn * 4), *dx = xmalloc((size_t)rn * 4);
            float *mean = xmalloc((size_t)rows * 4), *rstd = xmalloc((size_t)rows * 4);
            float *d_x = dup_d(x, rn), *d_dy = dup_d(dy, rn), *d_g = dup_d(gamma, n);
            float *d_b = dup_d(beta, n), *d_dg = dup_d(dgamma, n), *d_db = dup_d(dbeta, n);
            float *d_y = dalloc((size_t)rn * 4), *d_dx = dalloc((size_t)rn * 4);
            float *d_mean = dalloc((size_t)rows * 4), *d_rstd = dalloc((size_t)rows * 4);
            float *got;

            NNT_OK(nnt_cuda_layernorm_fwd_f32(rows, n, 1e-5f, d_x, d_g, d_b, d_y, d_mean,
                                              d_rstd, g_stream));
            nnt_cpu_layernorm_fwd_f32(rows, n, 1e-5f, x, gamma, beta, y, mean, rstd);
            got = fetch(d_y, rn);
            check_normwise("layernorm y", got, y, rn, 1e-5);
            free(got);
            got = fetch(d_mean, rows);
            check_close("layernorm mean", got, mean, rows, 1e-5, 1e-6);
            free(got);
            got = fetch(d_rstd, rows);
            check_close("layernorm rstd", got, rstd, rows, 1e-5, 0.0);
            free(got);

            /* backward from the CPU statistics, so both sides see the same inputs */
            upload(d_mean, mean, (size_t)rows * 4);
            upload(d_rstd, rstd, (size_t)rows * 4);
            NNT_OK(nnt_cuda_layernorm_bwd_f32(rows, n, d_x, d_dy, d_g, d_mean, d_rstd, d_dx,
                                              d_dg, d_db, g_stream));
            nnt_cpu_layernorm_bwd_f32(rows, n, x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
            got = fetch(d_dx, rn);
            check_normwise("layernorm dx", got, dx, rn, 3e-6);
            free(got);
            got = fetch(d_dg, n);
            check_normwise("layernorm dgamma", got, dgamma, n, 3e-6);
            free(got);
            got = fetch(d_db, n);
            check_normwise("layernorm dbeta", got, dbeta, n, 3e-6);
            free(got);

            dfree(d_x);
            dfree(d_dy);
            dfree(d_g);
            dfree(d_b);
            dfree(d_dg);
            dfree(d_db);
            dfree(d_y);
            dfree(d_dx);
            dfree(d_mean);
            dfree(d_rstd);
            free(x);
            free(dy);
            free(gamma);
            free(beta);
            free(dgamma);
            free(dbeta);
            free(y);
            free(dx);
            free(mean);
            free(rstd);
        }
}
END_TEST

/* ---- Llama-family ops: RMSNorm, SwiGLU, RoPE ----------------------------------------------- */

START_TEST(test_rmsnorm)
{
    static const int64_t rows_[] = {1, 3, 17, 61};
    static const int64_t ns[] = {1, 3, 17, 61, 130, 768, 1000};
    int cs = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < (int)(sizeof ns / sizeof ns[0]); b++) {
            int64_t rows = rows_[a], n = ns[b], rn = rows * n;
            rng_seed(1600 + cs++);
            float *x = rand_f(rn, -2.0f, 3.0f), *dy = rand_f(rn, -1.0f, 1.0f);
            float *gamma = rand_f(n, 0.5f, 1.5f), *dgamma = rand_f(n, -1.0f, 1.0f);
            float *y = xmalloc((size_t)rn * 4), *dx = xmalloc((size_t)rn * 4);
            float *rstd = xmalloc((size_t)rows * 4);
            float *d_x = dup_d(x, rn), *d_dy = dup_d(dy, rn), *d_g = dup_d(gamma, n);
            float *d_dg = dup_d(dgamma, n);
            float *d_y = dalloc((size_t)rn * 4), *d_dx = dalloc((size_t)rn * 4);
            float *d_rstd = dalloc((size_t)rows * 4);
            float *got;

            NNT_OK(nnt_cuda_rmsnorm_fwd_f32(rows, n, 1e-5f, d_x, d_g, d_y, d_rstd, g_stream));
            nnt_cpu_rmsnorm_fwd_f32(rows, n, 1e-5f, x, gamma, y, rstd);
            got = fetch(d_y, rn);
            check_normwise("rmsnorm y", got, y, rn, 1e-5);
            free(got);
            got = fetch(d_rstd, rows);
            check_close("rmsnorm rstd", got, rstd, rows, 1e-5, 0.0);
            free(got);

            /* backward from the CPU rstd, so both sides see the same inputs */
            upload(d_rstd, rstd, (size_t)rows * 4);
            NNT_OK(nnt_cuda_rmsnorm_bwd_f32(rows, n, d_x, d_dy, d_g, d_rstd, d_dx, d_dg,
                                            g_stream));
            nnt_cpu_rmsnorm_bwd_f32(rows, n, x, dy, gamma, rstd, dx, dgamma);
            got = fetch(d_dx, rn);
            check_normwise("rmsnorm dx", got, dx, rn, 3e-6);
            free(got);
            got = fetch(d_dg, n);
            check_normwise("rmsnorm dgamma", got, dgamma, n, 3e-6);
            free(got);

            dfree(d_x);
            dfree(d_dy);
            dfree(d_g);
            dfree(d_dg);
            dfree(d_y);
            dfree(d_dx);
            dfree(d_rstd);
            free(x);
            free(dy);
            free(gamma);
            free(dgamma);
            free(y);
            free(dx);
            free(rstd);
        }
}
END_TEST

/* The norms' parameter gradients over row chunks (nnt_cuda_set_norm_split, NNT_CUDA_NORM_BWD
 * =chunks): rows enough for 3 and 17 chunks, the last one short, against the CPU kernels with
 * the tolerances of the one-pass kernels (the sums in double, in another fixed order), and the
 * one-pass kernels at these sizes too. */
START_TEST(test_norm_split)
{
    static const int64_t shapes[][2] = {{700, 130}, {4097, 768}};
    for (int split = 1; split >= 0; split--)
        for (int k = 0; k < 2; k++) {
            nnt_cuda_set_norm_split(split);
            int64_t rows = shapes[k][0], n = shapes[k][1], rn = rows * n;
            rng_seed(2600 + k);
            float *x = rand_f(rn, -2.0f, 3.0f), *dy = rand_f(rn, -1.0f, 1.0f);
            float *gamma = rand_f(n, 0.5f, 1.5f), *beta = rand_f(n, -0.5f, 0.5f);
            float *dgamma = rand_f(n, -1.0f, 1.0f), *dbeta = rand_f(n, -1.0f, 1.0f);
            float *dg2 = xmalloc((size_t)n * 4), *y = xmalloc((size_t)rn * 4);
            float *dx = xmalloc((size_t)rn * 4), *mean = xmalloc((size_t)rows * 4);
            float *rstd = xmalloc((size_t)rows * 4), *got;
            memcpy(dg2, dgamma, (size_t)n * 4);
            float *d_x = dup_d(x, rn), *d_dy = dup_d(dy, rn), *d_g = dup_d(gamma, n);
            float *d_dg = dup_d(dgamma, n), *d_db = dup_d(dbeta, n), *d_dx = dalloc((size_t)rn * 4);
            nnt_cpu_layernorm_fwd_f32(rows, n, 1e-5f, x, gamma, beta, y, mean, rstd);
            float *d_mean = dup_d(mean, rows), *d_rstd = dup_d(rstd, rows);
            NNT_OK(nnt_cuda_layernorm_bwd_f32(rows, n, d_x, d_dy, d_g, d_mean, d_rstd, d_dx,
                                              d_dg, d_db, g_stream));
            nnt_cpu_layernorm_bwd_f32(rows, n, x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
            got = fetch(d_dg, n);
            check_normwise(split ? "layernorm dgamma (chunks)" : "layernorm dgamma (rows)", got,
                           dgamma, n, 3e-6);
            free(got);
            got = fetch(d_db, n);
            check_normwise(split ? "layernorm dbeta (chunks)" : "layernorm dbeta (rows)", got,
                           dbeta, n, 3e-6);
            free(got);
            /* RMSNorm, the same rows */
            nnt_cpu_rmsnorm_fwd_f32(rows, n, 1e-5f, x, gamma, y, rstd);
            upload(d_rstd, rstd, (size_t)rows * 4);
            float *d_dg2 = dup_d(dg2, n);
            NNT_OK(nnt_cuda_rmsnorm_bwd_f32(rows, n, d_x, d_dy, d_g, d_rstd, d_dx, d_dg2,
                                            g_stream));
            nnt_cpu_rmsnorm_bwd_f32(rows, n, x, dy, gamma, rstd, dx, dg2);
            got = fetch(d_dg2, n);
            check_normwise(split ? "rmsnorm dgamma (chunks)" : "rmsnorm dgamma (rows)", got, dg2,
                           n, 3e-6);
            free(got);
            got = fetch(d_dx, rn);
            check_normwise("rmsnorm dx (norm split test)", got, dx, rn, 3e-6);
            free(got);
            dfree(d_x);
            dfree(d_dy);
            dfree(d_g);
            dfree(d_dg);
            dfree(d_db);
            dfree(d_dx);
            dfree(d_mean);
            dfree(d_rstd);
            dfree(d_dg2);
            free(x);
            free(dy);
            free(gamma);
            free(beta);
            free(dgamma);
            free(dbeta);
            free(dg2);
            free(y);
            free(dx);
            free(mean);
            free(rstd);
        }
    nnt_cuda_set_norm_split(0);
}
END_TEST

/* Gemma's RMSNorm scaled by 1 + w: the scale made on the device as the layers make it (fill
 * with 1, then axpby: 1 + w rounded once, equal to the CPU's bit for bit), then the RMSNorm
 * kernels forward and backward with it, against the CPU's same chain; w = 0.1 N-like values
 * around 0, as Gemma's norms are. */
START_TEST(test_rmsnorm_plus_one)
{
    static const int64_t shapes[][2] = {{3, 17}, {17, 640}, {5, 256}};
    for (int c = 0; c < 3; c++) {
        int64_t rows = shapes[c][0], n = shapes[c][1], rn = rows * n;
        rng_seed(1650 + c);
        float *x = rand_f(rn, -2.0f, 3.0f), *dy = rand_f(rn, -1.0f, 1.0f);
        float *w = rand_f(n, -0.3f, 0.3f), *g1 = xmalloc((size_t)n * 4);
        float *y = xmalloc((size_t)rn * 4), *dx = xmalloc((size_t)rn * 4);
        float *rstd = xmalloc((size_t)rows * 4), *dg = xmalloc((size_t)n * 4), *got;
        float *d_x = dup_d(x, rn), *d_dy = dup_d(dy, rn), *d_w = dup_d(w, n);
        float *d_g1 = dalloc((size_t)n * 4), *d_y = dalloc((size_t)rn * 4);
        float *d_dx = dalloc((size_t)rn * 4), *d_rstd = dalloc((size_t)rows * 4);
        float *d_dg = dalloc((size_t)n * 4);
        nnt_cpu_fill_f32(n, 1.0f, g1);
        nnt_cpu_axpby_f32(n, 1.0f, w, 1.0f, g1);
        NNT_OK(nnt_cuda_fill_f32(n, 1.0f, d_g1, g_stream));
        NNT_OK(nnt_cuda_axpby_f32(n, 1.0f, d_w, 1.0f, d_g1, g_stream));
        got = fetch(d_g1, n);
        ck_assert_msg(memcmp(got, g1, (size_t)n * 4) == 0, "1 + w differs from the CPU's");
        free(got);
        nnt_cpu_rmsnorm_fwd_f32(rows, n, 1e-6f, x, g1, y, rstd);
        NNT_OK(nnt_cuda_rmsnorm_fwd_f32(rows, n, 1e-6f, d_x, d_g1, d_y, d_rstd, g_stream));
        got = fetch(d_y, rn);
        check_normwise("rmsnorm (1 + w) y", got, y, rn, 1e-5);
        free(got);
        upload(d_rstd, rstd, (size_t)rows * 4);
        for (int64_t i = 0; i < n; i++)
            dg[i] = 0.0f;
        NNT_OK(nnt_cuda_fill_f32(n, 0.0f, d_dg, g_stream));
        nnt_cpu_rmsnorm_bwd_f32(rows, n, x, dy, g1, rstd, dx, dg);
        NNT_OK(nnt_cuda_rmsnorm_bwd_f32(rows, n, d_x, d_dy, d_g1, d_rstd, d_dx, d_dg,
                                        g_stream));
        got = fetch(d_dx, rn);
        check_normwise("rmsnorm (1 + w) dx", got, dx, rn, 3e-6);
        free(got);
        got = fetch(d_dg, n);   /* d(1 + w) / dw = 1: the weight's gradient */
        check_normwise("rmsnorm (1 + w) dw", got, dg, n, 3e-6);
        free(got);
        float *dev[10] = {d_x, d_dy, d_w, d_g1, d_y, d_dx, d_rstd, d_dg, NULL};
        for (int i = 0; dev[i]; i++)
            dfree(dev[i]);
        float *host[10] = {x, dy, w, g1, y, dx, rstd, dg, NULL};
        for (int i = 0; host[i]; i++)
            free(host[i]);
    }
}
END_TEST

/* out of place, then in place (y = gate; dgate = gate, dup = up) as the codelets run it */
/* attention sinks (gpt-oss): the rescaling of o and lse and the sinks' gradient against the
 * CPU kernels, on tiles of nb x nh slabs; sinks both above and below the rows' lse, and a
 * row with lse -inf (o 0, lse the sink) */
START_TEST(test_attn_sinks)
{
    static const int64_t shapes[][4] = {{1, 1, 1, 8}, {2, 3, 17, 12}, {3, 4, 64, 64},
                                        {1, 2, 300, 40}};
    for (int t = 0; t < (int)(sizeof shapes / sizeof shapes[0]); t++) {
        int64_t nb = shapes[t][0], nh = shapes[t][1], tq = shapes[t][2], hd = shapes[t][3];
        int64_t rows = nb * nh * tq, n = rows * hd;
        rng_seed(1800 + t);
        float *o = rand_f(n, -1, 1), *dout = rand_f(n, -1, 1), *lse = rand_f(rows, -3, 3),
              *sinks = rand_f(nh, -2, 4), *ds = xmalloc((size_t)nh * 4);
        if (rows > 2)
            lse[1] = -INFINITY;
        for (int64_t h = 0; h < nh; h++)
            ds[h] = 0.25f * (float)h;
        float *d_o = dup_d(o, n), *d_lse = dup_d(lse, rows), *d_s = dup_d(sinks, nh),
              *d_dout = dup_d(dout, n), *d_ds = dup_d(ds, nh), *got;
        nnt_cpu_attn_sink_fwd_f32(nb, nh, tq, hd, sinks, o, lse);
        NNT_OK(nnt_cuda_attn_sink_fwd_f32(nb, nh, tq, hd, d_s, d_o, d_lse, g_stream));
        got = fetch(d_o, n);
        check_close("sinks o", got, o, n, 1e-5, 1e-6);
        free(got);
        got = fetch(d_lse, rows);
        check_close("sinks lse", got, lse, rows, 1e-5, 1e-6);
        free(got);
        nnt_cpu_attn_sink_bwd_f32(nb, nh, tq, hd, sinks, o, dout, lse, ds);
        NNT_OK(nnt_cuda_attn_sink_bwd_f32(nb, nh, tq, hd, d_s, d_o, d_dout, d_lse, d_ds,
                                          g_stream));
        got = fetch(d_ds, nh);
        check_close("dsinks", got, ds, nh, 1e-5, 1e-6);
        free(got);
        dfree(d_o), dfree(d_lse), dfree(d_s), dfree(d_dout), dfree(d_ds);
        free(o), free(dout), free(lse), free(sinks), free(ds);
    }
}
END_TEST

START_TEST(test_swiglu)
{
    static const int64_t ns[] = {1, 3, 17, 61, 130, 4099, (1 << 20) + 3};
    for (int t = 0; t < (int)(sizeof ns / sizeof ns[0]); t++) {
        int64_t n = ns[t];
        rng_seed(1700 + t);
        float *g = rand_f(n, -8.0f, 8.0f), *u = rand_f(n, -2.0f, 2.0f), *dy = rand_f(n, -1, 1);
        if (n > 4) {   /* saturated gates */
            g[0] = -100.0f;
            g[1] = 100.0f;
            g[2] = -30.0f;
        }
        float *y = xmalloc((size_t)n * 4), *dg = xmalloc((size_t)n * 4),
              *du = xmalloc((size_t)n * 4);
        nnt_cpu_swiglu_fwd_f32(n, g, u, y);
        nnt_cpu_swiglu_bwd_f32(n, g, u, dy, dg, du);
        float *d_g = dup_d(g, n), *d_u = dup_d(u, n), *d_dy = dup_d(dy, n);
        float *d_y = dalloc((size_t)n * 4), *d_dg = dalloc((size_t)n * 4),
              *d_du = dalloc((size_t)n * 4), *got;
        NNT_OK(nnt_cuda_swiglu_fwd_f32(n, d_g, d_u, d_y, g_stream));
        got = fetch(d_y, n);
        check_close("swiglu y", got, y, n, 1e-5, 1e-6);
        free(got);
        NNT_OK(nnt_cuda_swiglu_bwd_f32(n, d_g, d_u, d_dy, d_dg, d_du, g_stream));
        got = fetch(d_dg, n);
        check_close("swiglu dgate", got, dg, n, 1e-5, 1e-6);
        free(got);
        got = fetch(d_du, n);
        check_close("swiglu dup", got, du, n, 1e-5, 1e-6);
        free(got);
        /* in place: dgate = gate, dup = up */
        NNT_OK(nnt_cuda_swiglu_bwd_f32(n, d_g, d_u, d_dy, d_g, d_u, g_stream));
        got = fetch(d_g, n);
        check_close("swiglu dgate in place", got, dg, n, 1e-5, 1e-6);
        free(got);
        got = fetch(d_u, n);
        check_close("swiglu dup in place", got, du, n, 1e-5, 1e-6);
        free(got);
        upload(d_g, g, (size_t)n * 4);
        NNT_OK(nnt_cuda_swiglu_fwd_f32(n, d_g, d_u, d_g, g_stream));   /* d_u holds dup now */
        nnt_cpu_swiglu_fwd_f32(n, g, du, y);
        got = fetch(d_g, n);
        check_close("swiglu y in place", got, y, n, 1e-5, 1e-6);
        free(got);
        dfree(d_g);
        dfree(d_u);
        dfree(d_dy);
        dfree(d_y);
        dfree(d_dg);
        dfree(d_du);
        free(g);
        free(u);
        free(dy);
        free(y);
        free(dg);
        free(du);
    }
}
END_TEST

/* gpt-oss's clamped SwiGLU (alpha 1.3, limit 0.8: gates above the limit and far below, ups
 * beyond both limits and inside, points at the limits, where no gradient passes) against
 * the CPU kernel; out of place, then in place (dgate = gate, dup = up; y = gate). */
START_TEST(test_swiglu_clamp)
{
    static const int64_t ns[] = {1, 3, 17, 61, 4099, (1 << 20) + 3};
    const float alpha = 1.3f, limit = 0.8f;
    for (int t = 0; t < (int)(sizeof ns / sizeof ns[0]); t++) {
        int64_t n = ns[t];
        rng_seed(1750 + t);
        float *g = rand_f(n, -4.0f, 4.0f), *u = rand_f(n, -2.0f, 2.0f), *dy = rand_f(n, -1, 1);
        g[0] = limit;   /* no gradient through the clamps at the limits */
        if (n > 4) {
            u[1] = -limit;
            u[2] = limit;
            g[3] = -100.0f;   /* sigmoid 0 */
        }
        float *y = xmalloc((size_t)n * 4), *dg = xmalloc((size_t)n * 4),
              *du = xmalloc((size_t)n * 4), *got;
        nnt_cpu_swiglu_clamp_fwd_f32(n, alpha, limit, g, u, y);
        nnt_cpu_swiglu_clamp_bwd_f32(n, alpha, limit, g, u, dy, dg, du);
        float *d_g = dup_d(g, n), *d_u = dup_d(u, n), *d_dy = dup_d(dy, n);
        float *d_y = dalloc((size_t)n * 4), *d_dg = dalloc((size_t)n * 4),
              *d_du = dalloc((size_t)n * 4);
        NNT_OK(nnt_cuda_swiglu_clamp_fwd_f32(n, alpha, limit, d_g, d_u, d_y, g_stream));
        got = fetch(d_y, n);
        check_close("swiglu_clamp y", got, y, n, 1e-5, 1e-6);
        free(got);
        NNT_OK(nnt_cuda_swiglu_clamp_bwd_f32(n, alpha, limit, d_g, d_u, d_dy, d_dg, d_du,
                                             g_stream));
        got = fetch(d_dg, n);
        check_close("swiglu_clamp dgate", got, dg, n, 1e-5, 1e-6);
        ck_assert(got[0] == 0.0f);
        free(got);
        got = fetch(d_du, n);
        check_close("swiglu_clamp dup", got, du, n, 1e-5, 1e-6);
        ck_assert(n <= 4 || (got[1] == 0.0f && got[2] == 0.0f));
        free(got);
        /* in place: dgate = gate, dup = up */
        NNT_OK(nnt_cuda_swiglu_clamp_bwd_f32(n, alpha, limit, d_g, d_u, d_dy, d_g, d_u,
                                             g_stream));
        got = fetch(d_g, n);
        check_close("swiglu_clamp dgate in place", got, dg, n, 1e-5, 1e-6);
        free(got);
        got = fetch(d_u, n);
        check_close("swiglu_clamp dup in place", got, du, n, 1e-5, 1e-6);
        free(got);
        upload(d_g, g, (size_t)n * 4);
        NNT_OK(nnt_cuda_swiglu_clamp_fwd_f32(n, alpha, limit, d_g, d_u, d_g, g_stream));
        nnt_cpu_swiglu_clamp_fwd_f32(n, alpha, limit, g, du, y);   /* d_u holds dup now */
        got = fetch(d_g, n);
        check_close("swiglu_clamp y in place", got, y, n, 1e-5, 1e-6);
        free(got);
        float *dev[7] = {d_g, d_u, d_dy, d_y, d_dg, d_du, NULL};
        for (int i = 0; dev[i]; i++)
            dfree(dev[i]);
        float *host[7] = {g, u, dy, y, dg, du, NULL};
        for (int i = 0; host[i]; i++)
            free(host[i]);
    }
    ck_assert_int_eq(nnt_cuda_swiglu_clamp_fwd_f32(-1, 1.0f, 1.0f, NULL, NULL, NULL, g_stream),
                     -1);
}
END_TEST

/* Gemma's GeGLU (gelu_tanh(gate) * up) and soft-cap (tanh(x / cap) cap), forward and
 * backward, against the CPU kernels. */
START_TEST(test_geglu_softcap)
{
    static const int64_t ns[] = {1, 17, 4099, (1 << 18) + 5};
    for (int t = 0; t < (int)(sizeof ns / sizeof ns[0]); t++) {
        int64_t n = ns[t];
        rng_seed(1800 + t);
        float *g = rand_f(n, -6.0f, 6.0f), *u = rand_f(n, -2.0f, 2.0f), *dy = rand_f(n, -1, 1);
        float *y = xmalloc((size_t)n * 4), *dg = xmalloc((size_t)n * 4),
              *du = xmalloc((size_t)n * 4), *got;
        float *d_g = dup_d(g, n), *d_u = dup_d(u, n), *d_dy = dup_d(dy, n);
        float *d_y = dalloc((size_t)n * 4), *d_dg = dalloc((size_t)n * 4),
              *d_du = dalloc((size_t)n * 4);
        nnt_cpu_geglu_fwd_f32(n, g, u, y);
        nnt_cpu_geglu_bwd_f32(n, g, u, dy, dg, du);
        NNT_OK(nnt_cuda_geglu_fwd_f32(n, d_g, d_u, d_y, g_stream));
        got = fetch(d_y, n);
        check_close("geglu y", got, y, n, 1e-5, 1e-6);
        free(got);
        NNT_OK(nnt_cuda_geglu_bwd_f32(n, d_g, d_u, d_dy, d_dg, d_du, g_stream));
        got = fetch(d_dg, n);
        check_close("geglu dgate", got, dg, n, 1e-5, 1e-6);
        free(got);
        got = fetch(d_du, n);
        check_close("geglu dup", got, du, n, 1e-5, 1e-6);
        free(got);
        /* soft-cap 2.5 of x in [-6, 6]: saturating and linear parts */
        nnt_cpu_softcap_fwd_f32(n, 2.5f, g, y);
        nnt_cpu_softcap_bwd_f32(n, 2.5f, g, dy, dg);
        NNT_OK(nnt_cuda_softcap_fwd_f32(n, 2.5f, d_g, d_y, g_stream));
        got = fetch(d_y, n);
        check_close("softcap y", got, y, n, 1e-5, 1e-6);
        free(got);
        NNT_OK(nnt_cuda_softcap_bwd_f32(n, 2.5f, d_g, d_dy, d_dy, g_stream));   /* in place */
        got = fetch(d_dy, n);
        check_close("softcap dx", got, dg, n, 1e-5, 1e-6);
        free(got);
        float *dev[7] = {d_g, d_u, d_dy, d_y, d_dg, d_du, NULL};
        for (int i = 0; dev[i]; i++)
            dfree(dev[i]);
        float *host[7] = {g, u, dy, y, dg, du, NULL};
        for (int i = 0; host[i]; i++)
            free(host[i]);
    }
    ck_assert_int_eq(nnt_cuda_softcap_fwd_f32(4, 0.0f, NULL, NULL, g_stream), -1);
}
END_TEST

/* Whole head vectors (one buffer, hi half at n) and split ones (two buffers), forward and
 * inverse, out of place and in place, at small and large positions. Angle, cos and sin in
 * double on both sides: equal to an ulp of cos / sin. */
START_TEST(test_rope)
{
    static const int64_t hds[] = {2, 16, 128, 2 * NNT_CUDA_ROPE_MAX_N};
    static const int64_t nbhs[] = {1, 3}, nts[] = {1, 17};
    static const int64_t pos0s[] = {0, 100000};
    int cs = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 2; c++)
                for (int p = 0; p < 2; p++) {
                    int64_t hd = hds[a], n = hd / 2, nbh = nbhs[b], nt = nts[c];
                    int64_t rn = nbh * nt * hd;
                    int sign = (cs & 1) ? -1 : 1;
                    float sc = p ? 1.19f : 1.0f;   /* an attention factor, and none */
                    rng_seed(1800 + cs++);
                    float *x = rand_f(rn, -2.0f, 2.0f), *inv = xmalloc((size_t)n * 4);
                    for (int64_t i = 0; i < n; i++)
                        inv[i] = (float)pow(10000.0, -2.0 * (double)i / (double)hd);
                    float *y = xmalloc((size_t)rn * 4), *got;
                    float *d_x = dup_d(x, rn), *d_y = dalloc((size_t)rn * 4);
                    /* whole vectors: lo = x, hi = x + n, ld = hd */
                    nnt_cpu_rope_f32(nbh, nt, n, pos0s[p], sign, sc, inv, x, x + n, hd, y, y + n, hd);
                    NNT_OK(nnt_cuda_rope_f32(nbh, nt, n, pos0s[p], sign, sc, inv, d_x, d_x + n, hd,
                                             d_y, d_y + n, hd, g_stream));
                    got = fetch(d_y, rn);
                    check_normwise("rope whole", got, y, rn, 1e-6);
                    free(got);
                    NNT_OK(nnt_cuda_rope_f32(nbh, nt, n, pos0s[p], sign, sc, inv, d_x, d_x + n, hd,
                                             d_x, d_x + n, hd, g_stream));
                    got = fetch(d_x, rn);
                    check_normwise("rope whole in place", got, y, rn, 1e-6);
                    free(got);
                    /* split: the halves of (nbh * nt, hd) stored as two (nbh * nt, n) buffers */
                    int64_t rows = nbh * nt, hn = rows * n;
                    float *lo = xmalloc((size_t)hn * 4), *hi = xmalloc((size_t)hn * 4);
                    for (int64_t r = 0; r < rows; r++) {
                        memcpy(lo + r * n, x + r * hd, (size_t)n * 4);
                        memcpy(hi + r * n, x + r * hd + n, (size_t)n * 4);
                    }
                    float *d_lo = dup_d(lo, hn), *d_hi = dup_d(hi, hn);
                    NNT_OK(nnt_cuda_rope_f32(nbh, nt, n, pos0s[p], sign, sc, inv, d_lo, d_hi, n,
                                             d_lo, d_hi, n, g_stream));
                    nnt_cpu_rope_f32(nbh, nt, n, pos0s[p], sign, sc, inv, lo, hi, n, lo, hi, n);
                    got = fetch(d_lo, hn);
                    check_normwise("rope split lo", got, lo, hn, 1e-6);
                    free(got);
                    got = fetch(d_hi, hn);
                    check_normwise("rope split hi", got, hi, hn, 1e-6);
                    free(got);
                    dfree(d_x);
                    dfree(d_y);
                    dfree(d_lo);
                    dfree(d_hi);
                    free(x);
                    free(inv);
                    free(y);
                    free(lo);
                    free(hi);
                }
    /* more pairs than the kernel's parameter table holds: refused */
    float f = 1.0f;
    ck_assert_int_eq(nnt_cuda_rope_f32(1, 1, NNT_CUDA_ROPE_MAX_N + 1, 0, 1, 1.0f, &f, NULL, NULL,
                                       NNT_CUDA_ROPE_MAX_N + 1, NULL, NULL,
                                       NNT_CUDA_ROPE_MAX_N + 1, g_stream),
                     -1);
}
END_TEST

/* ---- attention ---------------------------------------------------------------------------- */

/* One query block against a key range split in two key blocks [0, tk1) and [tk1, tk):
 * forward (two fwd_block calls + finalize) and backward (prep + two bwd_block calls), each
 * compared with the CPU kernels on identical inputs. */
static void run_attention_case(int64_t nbh, int64_t tq, int64_t tk, int64_t tk1, int64_t hd,
                               int64_t q_pos0, int64_t k_pos0, uint64_t seed)
{
    char what[160];
    const float scale = 1.0f / sqrtf((float)hd);
    int64_t nq = nbh * tq * hd, rows = nbh * tq;
    int64_t tk2 = tk - tk1, nk1 = nbh * tk1 * hd, nk2 = nbh * tk2 * hd;
    rng_seed(seed);
    float *q = rand_f(nq, -1.5f, 1.5f), *dout = rand_f(nq, -1.0f, 1.0f);
    float *k1 = rand_f(nk1 > 0 ? nk1 : 1, -1.5f, 1.5f), *v1 = rand_f(nk1 > 0 ? nk1 : 1, -1.0f, 1.0f);
    float *k2 = rand_f(nk2 > 0 ? nk2 : 1, -1.5f, 1.5f), *v2 = rand_f(nk2 > 0 ? nk2 : 1, -1.0f, 1.0f);
    float *o = xmalloc((size_t)nq * 4), *m = xmalloc((size_t)rows * 4);
    float *l = xmalloc((size_t)rows * 4), *lse = xmalloc((size_t)rows * 4);
    float *d = xmalloc((size_t)rows * 4);
    for (int64_t i = 0; i < nq; i++)
        o[i] = 0.0f;
    for (int64_t i = 0; i < rows; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    float *d_q = dup_d(q, nq), *d_dout = dup_d(dout, nq), *d_o = dup_d(o, nq);
    float *d_k1 = dup_d(k1, nk1 > 0 ? nk1 : 1), *d_v1 = dup_d(v1, nk1 > 0 ? nk1 : 1);
    float *d_k2 = dup_d(k2, nk2 > 0 ? nk2 : 1), *d_v2 = dup_d(v2, nk2 > 0 ? nk2 : 1);
    float *d_m = dup_d(m, rows), *d_l = dup_d(l, rows), *d_lse = dalloc((size_t)rows * 4);
    float *d_d = dalloc((size_t)rows * 4), *got;

    /* forward, key block 1 then key block 2 */
    for (int blk = 0; blk < 2; blk++) {
        int64_t tkb = blk ? tk2 : tk1, kp = k_pos0 + (blk ? tk1 : 0);
        const float *kh = blk ? k2 : k1, *vh = blk ? v2 : v1;
        const float *kd = blk ? d_k2 : d_k1, *vd = blk ? d_v2 : d_v1;
        NNT_OK(nnt_cuda_attn_fwd_block_f32(nbh, tq, tkb, hd, q_pos0, kp, scale, d_q, kd, vd, d_o,
                                           d_m, d_l, g_stream));
        nnt_cpu_attn_fwd_block_f32(nbh, tq, tkb, hd, q_pos0, kp, scale, q, kh, vh, o, m, l);
        snprintf(what, sizeof what, "attn fwd m (nbh %lld tq %lld tk %lld hd %lld block %d)",
                 (long long)nbh, (long long)tq, (long long)tkb, (long long)hd, blk);
        got = fetch(d_m, rows);
        check_close(what, got, m, rows, 1e-5, 1e-5);
        free(got);
        what[9] = 'l';
        got = fetch(d_l, rows);
        check_close(what, got, l, rows, 1e-5, 1e-6);
        free(got);
        what[9] = 'o';
        got = fetch(d_o, nq);
        check_normwise(what, got, o, nq, 5e-6);
        free(got);
        /* continue from the CPU state so that errors do not compound */
        upload(d_o, o, (size_t)nq * 4);
        upload(d_m, m, (size_t)rows * 4);
        upload(d_l, l, (size_t)rows * 4);
    }
    NNT_OK(nnt_cuda_attn_fwd_finalize_f32(nbh, tq, hd, d_o, d_m, d_l, d_lse, g_stream));
    nnt_cpu_attn_fwd_finalize_f32(nbh, tq, hd, o, m, l, lse);
    got = fetch(d_o, nq);
    check_normwise("attn finalize o", got, o, nq, 1e-5);
    free(got);
    got = fetch(d_lse, rows);
    check_close("attn finalize lse", got, lse, rows, 1e-5, 1e-5);
    free(got);
    upload(d_o, o, (size_t)nq * 4);
    upload(d_lse, lse, (size_t)rows * 4);

    /* backward */
    NNT_OK(nnt_cuda_attn_bwd_prep_f32(nbh, tq, hd, d_o, d_dout, d_d, g_stream));
    nnt_cpu_attn_bwd_prep_f32(nbh, tq, hd, o, dout, d);
    got = fetch(d_d, rows);
    check_close("attn bwd_prep d", got, d, rows, 1e-5, 1e-5);
    free(got);
    upload(d_d, d, (size_t)rows * 4);

    float *dq = rand_f(nq, -0.1f, 0.1f), *d_dq = dup_d(dq, nq);
    for (int blk = 0; blk < 2; blk++) {
        int64_t tkb = blk ? tk2 : tk1, kp = k_pos0 + (blk ? tk1 : 0), nk = nbh * tkb * hd;
        const float *kh = blk ? k2 : k1, *vh = blk ? v2 : v1;
        const float *kd = blk ? d_k2 : d_k1, *vd = blk ? d_v2 : d_v1;
        float *dk = rand_f(nk > 0 ? nk : 1, -0.1f, 0.1f), *dv = rand_f(nk > 0 ? nk : 1, -0.1f, 0.1f);
        float *d_dk = dup_d(dk, nk > 0 ? nk : 1), *d_dv = dup_d(dv, nk > 0 ? nk : 1);
        NNT_OK(nnt_cuda_attn_bwd_block_f32(nbh, tq, tkb, hd, q_pos0, kp, scale, d_q, kd, vd,
                                           d_dout, d_lse, d_d, d_dq, d_dk, d_dv, g_stream));
        nnt_cpu_attn_bwd_block_f32(nbh, tq, tkb, hd, q_pos0, kp, scale, q, kh, vh, dout, lse, d,
                                   dq, dk, dv);
        snprintf(what, sizeof what, "attn bwd dq (nbh %lld tq %lld tk %lld hd %lld block %d)",
                 (long long)nbh, (long long)tq, (long long)tkb, (long long)hd, blk);
        got = fetch(d_dq, nq);
        check_normwise(what, got, dq, nq, 5e-6);
        free(got);
        upload(d_dq, dq, (size_t)nq * 4);
        what[10] = 'k';
        got = fetch(d_dk, nk);
        check_normwise(what, got, dk, nk, 5e-6);
        free(got);
        what[10] = 'v';
        got = fetch(d_dv, nk);
        check_normwise(what, got, dv, nk, 5e-6);
        free(got);
        dfree(d_dk);
        dfree(d_dv);
        free(dk);
        free(dv);
    }

    dfree(d_q);
    dfree(d_dout);
    dfree(d_o);
    dfree(d_k1);
    dfree(d_v1);
    dfree(d_k2);
    dfree(d_v2);
    dfree(d_m);
    dfree(d_l);
    dfree(d_lse);
    dfree(d_d);
    dfree(d_dq);
    free(q);
    free(dout);
    free(k1);
    free(v1);
    free(k2);
    free(v2);
    free(o);
    free(m);
    free(l);
    free(lse);
    free(d);
    free(dq);
}

START_TEST(test_attention)
{
    /* nbh, tq, tk, tk1, hd, q_pos0, k_pos0 */
    static const int64_t cases[][7] = {
        {1, 1, 2, 1, 1, 1, 0},         /* tiny */
        {3, 17, 34, 17, 64, 17, 0},    /* self-attention block pair on the diagonal */
        {2, 61, 130, 61, 17, 130, 0},  /* every key visible */
        {2, 61, 122, 61, 130, 61, 0},  /* hd > 128 bucket, diagonal in block 2 */
        {1, 130, 121, 61, 256, 40, 30}, /* hd 256, partially masked, masked head rows */
        {2, 33, 40, 20, 3, 0, 10},      /* the first 10 rows see no key at all */
        {1, 17, 34, 17, 80, 0, 100},    /* everything masked: no-op */
        {1, 3, 130, 65, 61, 127, 0},    /* few queries, many keys */
        {1, 70, 70, 35, 128, 0, 0},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        run_attention_case(cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][4],
                           cases[c][5], cases[c][6], 700 + (uint64_t)c);
    /* unsupported head dimension */
    ck_assert_int_eq(nnt_cuda_attn_fwd_block_f32(1, 1, 1, 257, 0, 0, 1.0f, NULL, NULL, NULL,
                                                 NULL, NULL, NULL, g_stream),
                     -1);
    ck_assert_int_eq(nnt_cuda_attn_bwd_block_f32(1, 1, 1, 300, 0, 0, 1.0f, NULL, NULL, NULL,
                                                 NULL, NULL, NULL, NULL, NULL, NULL, g_stream),
                     -1);
}
END_TEST

/* Grouped-query attention: the slabs of a map (some q heads of a q-side block of nb * q_hs
 * slabs, each reading its kv slab of a kv-side block of nb * kv_hs slabs in place), one key
 * block, forward and backward against the CPU _gqa kernels on identical inputs. Slabs the map
 * does not cover must keep their values on both sides. */
/* Packed examples: the queries' positions (nb, tq) of examples that start at the absolute
 * sequence indices 0, 7, 20, 41, 77, 100, 133, 150, 201 (shifted by 3 b in batch row b). */
static int32_t *packed_positions(int64_t nb, int64_t tq, int64_t q_pos0)
{
    static const int64_t starts[] = {0, 7, 20, 41, 77, 100, 133, 150, 201};
    int32_t *pos = xmalloc((size_t)(nb * tq) * sizeof *pos);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < tq; i++) {
            int64_t qp = q_pos0 + i, s = 0;
            for (int j = 0; j < 9; j++)
                if (starts[j] + 3 * b <= qp)
                    s = starts[j] + 3 * b;
            pos[b * tq + i] = (int32_t)(qp - s);
        }
    return pos;
}

/* qpos (the map's nb, tq) or NULL: the _packed kernels with those positions */
static void run_gqa_case_pos(nnt_attn_map mp, int64_t tq, int64_t tk, int64_t hd,
                             int64_t q_pos0, int64_t k_pos0, int64_t window, float cap,
                             uint64_t seed, const int32_t *qpos)
{
    char what[200];
    const float scale = 1.0f / sqrtf((float)hd);
    int64_t qsl = mp.nb * mp.q_hs, kvsl = mp.nb * mp.kv_hs;
    int64_t nq = qsl * tq * hd, nk = kvsl * tk * hd, rows = qsl * tq;
    rng_seed(seed);
    float *q = rand_f(nq, -1.5f, 1.5f), *dout = rand_f(nq, -1.0f, 1.0f);
    float *k = rand_f(nk, -1.5f, 1.5f), *v = rand_f(nk, -1.0f, 1.0f);
    float *o = xmalloc((size_t)nq * 4), *m = xmalloc((size_t)rows * 4);
    float *l = xmalloc((size_t)rows * 4), *lse = xmalloc((size_t)rows * 4);
    float *d = xmalloc((size_t)rows * 4), *got;
    for (int64_t i = 0; i < nq; i++)
        o[i] = 0.0f;
    for (int64_t i = 0; i < rows; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    float *d_q = dup_d(q, nq), *d_dout = dup_d(dout, nq), *d_o = dup_d(o, nq);
    float *d_k = dup_d(k, nk), *d_v = dup_d(v, nk), *d_m = dup_d(m, rows), *d_l = dup_d(l, rows);
    /* (int32 positions travel as bytes) */
    float *d_pos = qpos ? dup_d((const float *)(const void *)qpos, mp.nb * tq) : NULL;
    const int32_t *d_qpos = (const int32_t *)(const void *)d_pos;
    snprintf(what, sizeof what,
             "gqa fwd o (nb %lld nh %lld q_hs %lld q_h0 %lld kv_hs %lld group %lld gofs %lld "
             "tq %lld tk %lld hd %lld)", (long long)mp.nb, (long long)mp.nh, (long long)mp.q_hs,
             (long long)mp.q_h0, (long long)mp.kv_hs, (long long)mp.group, (long long)mp.gofs,
             (long long)tq, (long long)tk, (long long)hd);

    NNT_OK(nnt_cuda_attn_fwd_packed_f32(&mp, tq, tk, hd, q_pos0, k_pos0, window, d_qpos, scale,
                                        cap, d_q, d_k, d_v, d_o, d_m, d_l, g_stream));
    nnt_cpu_attn_fwd_packed_f32(NULL, &mp, tq, tk, hd, q_pos0, k_pos0, window, qpos, scale, cap,
                                q, k, v, o, m, l);
    got = fetch(d_o, nq);
    check_normwise(what, got, o, nq, 5e-6);
    free(got);
    what[8] = 'm';
    got = fetch(d_m, rows);
    check_close(what, got, m, rows, 1e-5, 1e-5);
    free(got);
    what[8] = 'l';
    got = fetch(d_l, rows);
    check_close(what, got, l, rows, 1e-5, 1e-6);
    free(got);

    /* backward from the CPU's forward state */
    nnt_cpu_attn_fwd_finalize_f32(qsl, tq, hd, o, m, l, lse);
    nnt_cpu_attn_bwd_prep_f32(qsl, tq, hd, o, dout, d);
    float *d_lse = dup_d(lse, rows), *d_d = dup_d(d, rows);
    float *dq = rand_f(nq, -0.1f, 0.1f), *dk = rand_f(nk, -0.1f, 0.1f);
    float *dv = rand_f(nk, -0.1f, 0.1f);
    float *d_dq = dup_d(dq, nq), *d_dk = dup_d(dk, nk), *d_dv = dup_d(dv, nk);
    NNT_OK(nnt_cuda_attn_bwd_packed_f32(&mp, tq, tk, hd, q_pos0, k_pos0, window, d_qpos, scale,
                                        cap, d_q, d_k, d_v, d_dout, d_lse, d_d, d_dq, d_dk,
                                        d_dv, g_stream));
    nnt_cpu_attn_bwd_packed_f32(NULL, &mp, tq, tk, hd, q_pos0, k_pos0, window, qpos, scale, cap,
                                q, k, v, dout, lse, d, dq, dk, dv);
    memcpy(what, "gqa bwd dq", 10);
    got = fetch(d_dq, nq);
    check_normwise(what, got, dq, nq, 5e-6);
    free(got);
    what[9] = 'k';
    got = fetch(d_dk, nk);
    check_normwise(what, got, dk, nk, 5e-6);
    free(got);
    what[9] = 'v';
    got = fetch(d_dv, nk);
    check_normwise(what, got, dv, nk, 5e-6);
    free(got);

    if (d_pos)
        dfree(d_pos);
    float *dev[13] = {d_q, d_dout, d_o, d_k, d_v, d_m, d_l, d_lse, d_d, d_dq, d_dk, d_dv, NULL};
    for (int i = 0; dev[i]; i++)
        dfree(dev[i]);
    float *host[13] = {q, dout, k, v, o, m, l, lse, d, dq, dk, dv, NULL};
    for (int i = 0; host[i]; i++)
        free(host[i]);
}

static void run_gqa_case(nnt_attn_map mp, int64_t tq, int64_t tk, int64_t hd, int64_t q_pos0,
                         int64_t k_pos0, int64_t window, float cap, uint64_t seed)
{
    run_gqa_case_pos(mp, tq, tk, hd, q_pos0, k_pos0, window, cap, seed, NULL);
}

/* Packed examples (per-query positions) against the CPU's _packed kernels: examples that
 * start inside the 32-row blocks and 32-key chunks, several batch rows with other starts,
 * with grouped heads, a window, a soft-cap, off-diagonal blocks whose keys precede some
 * rows' examples (those rows see nothing there) and a block no query reaches. */
START_TEST(test_attention_packed)
{
    static const struct {
        nnt_attn_map mp;
        int64_t tq, tk, hd, q_pos0, k_pos0, window;
        float cap;
    } cases[] = {
        {{2, 6, 6, 0, 2, 3, 0, 0}, 70, 70, 64, 0, 0, 0, 0.0f},
        {{3, 4, 4, 0, 4, 1, 0, 0}, 64, 64, 17, 64, 64, 0, 0.0f},
        {{2, 4, 4, 0, 1, 4, 0, 0}, 70, 130, 130, 100, 0, 0, 0.0f},
        {{2, 4, 4, 0, 1, 4, 0, 0}, 40, 40, 12, 30, 30, 5, 0.3f},
        {{1, 8, 8, 0, 2, 4, 0, 0}, 70, 130, 256, 100, 0, 64, 2.0f},
        {{2, 2, 2, 0, 2, 1, 0, 0}, 32, 32, 64, 150, 100, 0, 0.0f},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        int32_t *pos = packed_positions(cases[c].mp.nb, cases[c].tq, cases[c].q_pos0);
        run_gqa_case_pos(cases[c].mp, cases[c].tq, cases[c].tk, cases[c].hd, cases[c].q_pos0,
                         cases[c].k_pos0, cases[c].window, cases[c].cap, 950 + (uint64_t)c,
                         pos);
        free(pos);
    }
}
END_TEST

/* RoPE at per-token positions (packed examples) against the CPU kernel, in place too */
START_TEST(test_rope_positions)
{
    const int64_t nb = 2, nh = 3, nt = 45, hd = 64, n = hd / 2, rn = nb * nh * nt * hd;
    rng_seed(1900);
    float *x = rand_f(rn, -2.0f, 2.0f), *inv = xmalloc((size_t)n * 4);
    float *y = xmalloc((size_t)rn * 4), *got;
    for (int64_t i = 0; i < n; i++)
        inv[i] = (float)pow(10000.0, -2.0 * (double)i / (double)hd);
    int32_t *pos = packed_positions(nb, nt, 10);
    float *d_x = dup_d(x, rn), *d_y = dalloc((size_t)rn * 4);
    float *d_pos = dup_d((const float *)(const void *)pos, nb * nt);
    const int32_t *d_p = (const int32_t *)(const void *)d_pos;
    for (int sign = -1; sign <= 1; sign += 2) {
        nnt_cpu_rope_pos_f32(nb, nh, nt, n, pos, sign, 1.25f, inv, x, x + n, hd, y, y + n, hd);
        NNT_OK(nnt_cuda_rope_pos_f32(nb, nh, nt, n, d_p, sign, 1.25f, inv, d_x, d_x + n, hd, d_y,
                                     d_y + n, hd, g_stream));
        got = fetch(d_y, rn);
        check_normwise("rope positions", got, y, rn, 1e-6);
        free(got);
    }
    NNT_OK(nnt_cuda_rope_pos_f32(nb, nh, nt, n, d_p, 1, 1.0f, inv, d_x, d_x + n, hd, d_x, d_x + n, hd,
                                 g_stream));
    nnt_cpu_rope_pos_f32(nb, nh, nt, n, pos, 1, 1.0f, inv, x, x + n, hd, y, y + n, hd);
    got = fetch(d_x, rn);
    check_normwise("rope positions in place", got, y, rn, 1e-6);
    free(got);
    ck_assert_int_eq(nnt_cuda_rope_pos_f32(nb, 0, nt, n, d_p, 1, 1.0f, inv, d_x, d_x + n, hd, d_x,
                                           d_x + n, hd, g_stream),
                     -1);
    dfree(d_x), dfree(d_y), dfree(d_pos);
    free(x), free(inv), free(y), free(pos);
}
END_TEST

START_TEST(test_attention_gqa)
{
    static const struct {
        nnt_attn_map mp;
        int64_t tq, tk, hd, q_pos0, k_pos0, window;
        float cap;
    } cases[] = {
        /* whole tiles: 6 q heads, 2 kv heads (groups of 3), self-attention diagonal block */
        {{2, 6, 6, 0, 2, 3, 0, 0}, 17, 17, 64, 0, 0, 0, 0.0f},
        /* multi-query: 8 q heads read one kv head; hd > 128 bucket; every key visible */
        {{1, 8, 8, 0, 1, 8, 0, 0}, 61, 40, 130, 100, 0, 0, 0.0f},
        /* a q tile of heads [0, 3) with groups of 2: the range that kv tile 1 (one head)
         * serves is q head 2 alone */
        {{2, 1, 3, 2, 1, 2, 0, 0}, 33, 70, 17, 40, 0, 0, 0.0f},
        /* q heads [2, 6) of a q tile, kv tile of 3 heads, groups of 2: kv heads 1, 1, 2, 2;
         * partially masked, first rows see no key */
        {{1, 4, 4, 0, 3, 2, 2, 0}, 40, 33, 3, 0, 10, 0, 0.0f},
        /* multi-head through the map (group 1, sub-range of heads), hd 256 */
        {{2, 2, 4, 1, 4, 1, 1, 0}, 20, 20, 256, 0, 0, 0, 0.0f},
        /* 40 q heads over 5 kv heads (groups of 8), one-row blocks, hd 1 */
        {{3, 40, 40, 0, 5, 8, 0, 0}, 1, 2, 1, 1, 0, 0, 0.0f},
        /* generation with a key/value cache (nnt_tensor_attention_kv): one query at position
         * 70 against a cache block of 96 rows (keys 71.. masked), 9 heads over 3 kv heads */
        {{1, 9, 9, 0, 3, 3, 0, 0}, 1, 96, 64, 70, 0, 0, 0.0f},
        /* 4 queries at 30..33 against the cache block of rows 32..95 (partly masked) */
        {{1, 12, 12, 0, 12, 1, 0, 0}, 4, 64, 64, 30, 32, 0, 0.0f},
        /* Gemma: sliding windows cutting the block (5 and 33 keys), scores soft-capped (0.3
         * on scores of about 1: the cap bites), both, groups of 4 over one kv head */
        {{2, 4, 4, 0, 1, 4, 0, 0}, 40, 40, 12, 0, 0, 5, 0.0f},
        {{2, 4, 4, 0, 1, 4, 0, 0}, 40, 40, 12, 0, 0, 0, 0.3f},
        {{1, 6, 6, 0, 2, 3, 0, 0}, 61, 70, 130, 60, 30, 33, 0.7f},
        {{1, 9, 9, 0, 3, 3, 0, 0}, 1, 96, 64, 70, 0, 20, 0.5f},
        /* the window's edges against the kernels' 32-row blocks and 32-key chunks: queries
         * 100..163 over keys 0..63 with W 40, only rows 0..2 reach the block (the rest of
         * the first row block and every later one see nothing in it) */
        {{1, 4, 4, 0, 1, 4, 0, 0}, 64, 64, 64, 100, 0, 40, 0.0f},
        /* the whole key block before every query's window: nothing changes on either side */
        {{1, 2, 2, 0, 2, 1, 0, 0}, 64, 64, 64, 200, 0, 100, 0.0f},
        /* W 1: each query sees its own key only (diagonal block, 45 rows: a partial block) */
        {{2, 3, 3, 0, 3, 1, 0, 0}, 45, 45, 17, 0, 0, 1, 0.0f},
        /* W 64 over 130 keys in 5 chunks, queries 100..169 (rows whose windows start in
         * different chunks), groups of 4 over 2 kv heads, hd 256 bucket, capped at 2 */
        {{1, 8, 8, 0, 2, 4, 0, 0}, 70, 130, 256, 100, 0, 64, 2.0f},
        /* a window longer than the sequence: causal */
        {{1, 4, 4, 0, 4, 1, 0, 0}, 33, 33, 64, 0, 0, 1000, 0.0f},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        run_gqa_case(cases[c].mp, cases[c].tq, cases[c].tk, cases[c].hd, cases[c].q_pos0,
                     cases[c].k_pos0, cases[c].window, cases[c].cap, 900 + (uint64_t)c);
    /* a bad map or head dimension */
    const nnt_attn_map bad = {1, 2, 2, 0, 1, 0, 0, 0};   /* group 0 */
    const nnt_attn_map ok = {1, 2, 2, 0, 1, 2, 0, 0};
    ck_assert_int_eq(nnt_cuda_attn_fwd_gqa_f32(&bad, 1, 1, 8, 0, 0, 1.0f, NULL, NULL, NULL,
                                               NULL, NULL, NULL, g_stream),
                     -1);
    ck_assert_int_eq(nnt_cuda_attn_bwd_gqa_f32(&ok, 1, 1, 257, 0, 0, 1.0f, NULL, NULL, NULL,
                                               NULL, NULL, NULL, NULL, NULL, NULL, g_stream),
                     -1);
    ck_assert_int_eq(nnt_cuda_attn_fwd_gqa_f32(NULL, 1, 1, 8, 0, 0, 1.0f, NULL, NULL, NULL,
                                               NULL, NULL, NULL, g_stream),
                     -1);
}
END_TEST

/* ---- cross-entropy ---------------------------------------------------------------------------- */

START_TEST(test_xent)
{
    static const int64_t rows_[] = {1, 3, 17, 61};
    static const int64_t vs[] = {2, 17, 130, 1000, 5003};
    int cs = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < (int)(sizeof vs / sizeof vs[0]); b++) {
            int64_t rows = rows_[a], V = vs[b], ld = V + 3, split = V / 3 + 1;
            /* ignore_index -100, or a real vocabulary id (1): its targets are ignored too */
            const int32_t ignore = (a + b) % 2 ? -100 : 1;
            rng_seed(800 + cs++);
            float *logits = rand_f(rows * ld, -6.0f, 6.0f);
            int32_t *tg = xmalloc((size_t)rows * 4);
            for (int64_t r = 0; r < rows; r++)
                tg[r] = (r % 5 == 4) ? ignore : (int32_t)(rng_u64() % (uint64_t)V);
            float *m = xmalloc((size_t)rows * 4), *s = xmalloc((size_t)rows * 4);
            float *tgt = xmalloc((size_t)rows * 4), *loss = xmalloc((size_t)rows * 4);
            for (int64_t r = 0; r < rows; r++) {
                m[r] = -INFINITY;
                s[r] = 0.0f;
                tgt[r] = 0.0f;
            }
            float *d_lg = dup_d(logits, rows * ld), *d_m = dup_d(m, rows), *d_s = dup_d(s, rows);
            float *d_tgt = dup_d(tgt, rows), *d_loss = dalloc((size_t)rows * 4);
            int32_t *d_tg = dup_i(tg, rows);
            float *got;
            for (int blk = 0; blk < 2; blk++) {
                int64_t v0 = blk ? split : 0, nv = blk ? V - split : split;
                NNT_OK(nnt_cuda_xent_fwd_block_f32(rows, nv, v0, d_lg + v0, ld, d_tg, d_m, d_s,
                                                   d_tgt, NULL, g_stream));
                nnt_cpu_xent_fwd_block_f32(rows, nv, v0, logits + v0, ld, tg, m, s, tgt, NULL);
            }
            got = fetch(d_m, rows);
            check_exact_f("xent m", got, m, rows);
            free(got);
            got = fetch(d_s, rows);
            check_close("xent s", got, s, rows, 1e-5, 0.0);
            free(got);
            got = fetch(d_tgt, rows);
            check_exact_f("xent tgt", got, tgt, rows);
            free(got);
            upload(d_s, s, (size_t)rows * 4);

            float *lse = xmalloc((size_t)rows * 4), *d_lse = dalloc((size_t)rows * 4);
            NNT_OK(nnt_cuda_xent_loss_f32(rows, d_tg, ignore, d_m, d_s, d_tgt, d_loss, d_lse,
                                          g_stream));
            nnt_cpu_xent_loss_f32(rows, tg, ignore, m, s, tgt, loss, lse);
            got = fetch(d_loss, rows);
            check_close("xent loss", got, loss, rows, 1e-5, 1e-5);
            free(got);
            got = fetch(d_lse, rows);
            check_close("xent lse", got, lse, rows, 1e-5, 1e-5);
            free(got), free(lse), dfree(d_lse);

            const float scale = 1.0f / (float)rows;
            float *dl = rand_f(rows * ld, -1.0f, 1.0f); /* padding columns keep their values */
            float *d_dl = dup_d(dl, rows * ld);
            for (int blk = 0; blk < 2; blk++) {
                int64_t v0 = blk ? split : 0, nv = blk ? V - split : split;
                NNT_OK(nnt_cuda_xent_bwd_block_f32(rows, nv, v0, d_lg + v0, ld, d_tg, ignore,
                                                   d_m, d_s, NULL, scale, 0.0f, V, d_dl + v0,
                                                   g_stream));
                nnt_cpu_xent_bwd_block_f32(rows, nv, v0, logits + v0, ld, tg, ignore, m, s,
                                           NULL, scale, 0.0f, V, dl + v0);
            }
            got = fetch(d_dl, rows * ld);
            check_close("xent dlogits", got, dl, rows * ld, 1e-5, 1e-6 * scale);
            free(got);
            /* per-row weights (DPO's): the CPU kernel's values */
            float *w = rand_f(rows, -2.0f, 2.0f), *d_w = dup_d(w, rows);
            for (int blk = 0; blk < 2; blk++) {
                int64_t v0 = blk ? split : 0, nv = blk ? V - split : split;
                NNT_OK(nnt_cuda_xent_bwd_block_f32(rows, nv, v0, d_lg + v0, ld, d_tg, ignore,
                                                   d_m, d_s, d_w, scale, 0.0f, V, d_dl + v0,
                                                   g_stream));
                nnt_cpu_xent_bwd_block_f32(rows, nv, v0, logits + v0, ld, tg, ignore, m, s,
                                           w, scale, 0.0f, V, dl + v0);
            }
            got = fetch(d_dl, rows * ld);
            check_close("xent dlogits weighted", got, dl, rows * ld, 1e-5, 2e-6 * scale);
            free(got), free(w), dfree(d_w);
            for (int blk = 0; blk < 2; blk++) {   /* the unweighted values again */
                int64_t v0 = blk ? split : 0, nv = blk ? V - split : split;
                nnt_cpu_xent_bwd_block_f32(rows, nv, v0, logits + v0, ld, tg, ignore, m, s,
                                           NULL, scale, 0.0f, V, dl + v0);
            }
            /* in place, as the codelet runs it (dlogits == logits): the same values */
            for (int blk = 0; blk < 2; blk++) {
                int64_t v0 = blk ? split : 0, nv = blk ? V - split : split;
                NNT_OK(nnt_cuda_xent_bwd_block_f32(rows, nv, v0, d_lg + v0, ld, d_tg, ignore,
                                                   d_m, d_s, NULL, scale, 0.0f, V, d_lg + v0,
                                                   g_stream));
            }
            got = fetch(d_lg, rows * ld);
            for (int64_t r = 0; r < rows; r++)
                check_close("xent dlogits in place", got + r * ld, dl + r * ld, V, 1e-5,
                            1e-6 * scale);
            free(got);

            dfree(d_lg);
            dfree(d_m);
            dfree(d_s);
            dfree(d_tgt);
            dfree(d_loss);
            dfree(d_tg);
            dfree(d_dl);
            free(logits);
            free(tg);
            free(m);
            free(s);
            free(tgt);
            free(loss);
            free(dl);
        }
}
END_TEST

/* Label smoothing: the forward blocks' sums d of logit - m (in three blocks, a row of large
 * logits), the smoothed loss and the smoothed gradient (weighted rows), against the CPU's. */
START_TEST(test_xent_smooth)
{
    static const int64_t rows_[] = {1, 17, 61};
    static const int64_t vs[] = {5, 130, 5003};
    const float eps = 0.2f;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            int64_t rows = rows_[a], V = vs[b], ld = V + 1;
            int64_t bounds[4] = {0, V / 4, V / 2 + 1, V};
            const int32_t ignore = -100;
            rng_seed(900 + 3 * a + b);
            float *logits = rand_f(rows * ld, -6.0f, 6.0f);
            for (int64_t j = 0; j < V; j++)
                logits[j] += 60.0f;
            int32_t *tg = xmalloc((size_t)rows * 4);
            for (int64_t r = 0; r < rows; r++)
                tg[r] = (r % 4 == 3) ? ignore : (int32_t)(rng_u64() % (uint64_t)V);
            float *st[4];   /* m, s, tgt, d */
            float *dv[4];
            for (int i = 0; i < 4; i++) {
                st[i] = xmalloc((size_t)rows * 4);
                for (int64_t r = 0; r < rows; r++)
                    st[i][r] = i == 0 ? -INFINITY : 0.0f;
                dv[i] = dup_d(st[i], rows);
            }
            float *d_lg = dup_d(logits, rows * ld);
            int32_t *d_tg = dup_i(tg, rows);
            for (int k = 0; k < 3; k++) {
                int64_t v0 = bounds[k], nv = bounds[k + 1] - v0;
                NNT_OK(nnt_cuda_xent_fwd_block_f32(rows, nv, v0, d_lg + v0, ld, d_tg, dv[0],
                                                   dv[1], dv[2], dv[3], g_stream));
                nnt_cpu_xent_fwd_block_f32(rows, nv, v0, logits + v0, ld, tg, st[0], st[1],
                                           st[2], st[3]);
            }
            float *got = fetch(dv[3], rows);
            check_close("xent d", got, st[3], rows, 1e-5, 1e-4);
            free(got);
            upload(dv[1], st[1], (size_t)rows * 4);   /* the CPU's s and d from here */
            upload(dv[3], st[3], (size_t)rows * 4);
            float *loss = rand_f(rows, 0.0f, 5.0f), *d_loss = dup_d(loss, rows);
            NNT_OK(nnt_cuda_xent_smooth_loss_f32(rows, d_tg, ignore, eps, V, dv[1], dv[3],
                                                 d_loss, g_stream));
            nnt_cpu_xent_smooth_loss_f32(rows, tg, ignore, eps, V, st[1], st[3], loss);
            got = fetch(d_loss, rows);
            check_close("xent smoothed loss", got, loss, rows, 1e-6, 1e-6);
            free(got);
            const float scale = 1.0f / (float)rows;
            float *w = rand_f(rows, -2.0f, 2.0f), *d_w = dup_d(w, rows);
            float *dl = rand_f(rows * ld, -1.0f, 1.0f), *d_dl = dup_d(dl, rows * ld);
            upload(dv[0], st[0], (size_t)rows * 4);   /* the CPU's m (s above) */
            for (int k = 0; k < 3; k++) {
                int64_t v0 = bounds[k], nv = bounds[k + 1] - v0;
                NNT_OK(nnt_cuda_xent_bwd_block_f32(rows, nv, v0, d_lg + v0, ld, d_tg, ignore,
                                                   dv[0], dv[1], k == 1 ? NULL : d_w, scale,
                                                   eps, V, d_dl + v0, g_stream));
                nnt_cpu_xent_bwd_block_f32(rows, nv, v0, logits + v0, ld, tg, ignore, st[0],
                                           st[1], k == 1 ? NULL : w, scale, eps, V, dl + v0);
            }
            got = fetch(d_dl, rows * ld);
            check_close("xent smoothed dlogits", got, dl, rows * ld, 1e-6, 1e-6 * scale);
            free(got);
            for (int i = 0; i < 4; i++)
                free(st[i]), dfree(dv[i]);
            dfree(d_lg), dfree(d_tg), dfree(d_loss), dfree(d_w), dfree(d_dl);
            free(logits), free(tg), free(loss), free(w), free(dl);
        }
}
END_TEST

/* ---- embedding ------------------------------------------------------------------------------ */

START_TEST(test_embedding)
{
    static const int64_t ntoks[] = {1, 3, 17, 61, 130, 1000};
    static const int64_t ncs[] = {1, 3, 17, 61, 130, 768};
    const int64_t v0 = 5, nv = 40, V = 50;
    int cs = 0;
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            int64_t ntok = ntoks[a], nc = ncs[b], ldo = nc + 2, ldt = nc + 1;
            rng_seed(900 + cs++);
            int32_t *tok = xmalloc((size_t)ntok * 4);
            for (int64_t i = 0; i < ntok; i++) /* many repeats, some outside the block */
                tok[i] = (int32_t)(rng_u64() % (uint64_t)V);
            float *table = rand_f(nv * ldt, -1.0f, 1.0f), *out = rand_f(ntok * ldo, -1.0f, 1.0f);
            float *dout = rand_f(ntok * ldo, -1.0f, 1.0f), *dtab = rand_f(nv * ldt, -1.0f, 1.0f);
            int32_t *d_tok = dup_i(tok, ntok);
            float *d_table = dup_d(table, nv * ldt), *d_out = dup_d(out, ntok * ldo);
            float *d_dout = dup_d(dout, ntok * ldo), *d_dtab = dup_d(dtab, nv * ldt), *got;

            NNT_OK(nnt_cuda_embedding_gather_f32(ntok, nc, d_tok, v0, nv, d_table, ldt, d_out,
                                                 ldo, g_stream));
            nnt_cpu_embedding_gather_f32(ntok, nc, tok, v0, nv, table, ldt, out, ldo);
            got = fetch(d_out, ntok * ldo);
            check_exact_f("embedding gather", got, out, ntok * ldo);
            free(got);

            NNT_OK(nnt_cuda_embedding_scatter_add_f32(ntok, nc, d_tok, v0, nv, d_dout, ldo,
                                                      d_dtab, ldt, g_stream));
            nnt_cpu_embedding_scatter_add_f32(ntok, nc, tok, v0, nv, dout, ldo, dtab, ldt);
            got = fetch(d_dtab, nv * ldt);
            check_exact_f("embedding scatter_add", got, dtab, nv * ldt);
            free(got);

            dfree(d_tok);
            dfree(d_table);
            dfree(d_out);
            dfree(d_dout);
            dfree(d_dtab);
            free(tok);
            free(table);
            free(out);
            free(dout);
            free(dtab);
        }
}
END_TEST

/* ---- sumsq ---------------------------------------------------------------------------------- */

START_TEST(test_sumsq)
{
    /* up to 64K: one block; then several partial sums; 40M: NNT_CUDA_SUMSQ_PARTIALS blocks */
    static const int64_t ns[] = {1, 3, 17, 61, 130, 4099, 65537, (1 << 20) + 7, 40000003};
    double *d_part = dalloc(NNT_CUDA_SUMSQ_PARTIALS * sizeof(double));
    for (int t = 0; t < (int)(sizeof ns / sizeof ns[0]); t++)
        for (int off = 0; off < 2; off++) { /* off = 1: not 16-byte aligned */
            int64_t n = ns[t];
            rng_seed(1000 + 2 * t + off);
            float *x = rand_f(n + 1, -2.0f, 2.0f), acc = 0.5f;
            float *d_x = dup_d(x, n + 1), *d_acc = dup_d(&acc, 1);
            NNT_OK(nnt_cuda_sumsq_f32(n, d_x + off, d_acc, d_part, g_stream));
            nnt_cpu_sumsq_f32(n, x + off, &acc);
            float *got = fetch(d_acc, 1);
            check_close("sumsq", got, &acc, 1, 1e-6, 0.0);
            /* deterministic: a second run adds exactly the same amount */
            float first = got[0];
            free(got);
            upload(d_acc, &(float){0.5f}, 4);
            NNT_OK(nnt_cuda_sumsq_f32(n, d_x + off, d_acc, d_part, g_stream));
            got = fetch(d_acc, 1);
            check_exact_f("sumsq repeat", got, &first, 1);
            free(got);
            /* without partials: one block, the same sum up to rounding */
            upload(d_acc, &(float){0.5f}, 4);
            NNT_OK(nnt_cuda_sumsq_f32(n, d_x + off, d_acc, NULL, g_stream));
            got = fetch(d_acc, 1);
            check_close("sumsq one block", got, &acc, 1, 1e-6, 0.0);
            free(got);
            dfree(d_x);
            dfree(d_acc);
            free(x);
        }
    dfree(d_part);
}
END_TEST

/* ---- optimizers ------------------------------------------------------------------------------ */

START_TEST(test_optim)
{
    static const int64_t ns[] = {1, 3, 17, 61, 130, 4099};
    for (int t = 0; t < (int)(sizeof ns / sizeof ns[0]); t++) {
        int64_t n = ns[t];
        rng_seed(1100 + t);
        float *g = rand_f(n, -1.0f, 1.0f), *p0 = rand_f(n, -1.0f, 1.0f);
        float *m0 = rand_f(n, -0.1f, 0.1f), *v0 = rand_f(n, 0.0f, 0.01f);
        float *d_g = dup_d(g, n), *got;
        for (int dec = 0; dec < 2; dec++) {
            float *p = copy_f(p0, n), *m = copy_f(m0, n), *v = copy_f(v0, n);
            float *d_p = dup_d(p, n), *d_m = dup_d(m, n), *d_v = dup_d(v, n);
            const float b1 = 0.9f, b2 = 0.999f;
            const float bc1 = 1.0f - powf(b1, 3.0f), bc2 = 1.0f - powf(b2, 3.0f);
            NNT_OK(nnt_cuda_adam_step_f32(n, dec, 1e-3f, b1, b2, 1e-8f, 0.1f, bc1, bc2, 0.8f, d_g,
                                          d_p, d_m, d_v, g_stream));
            nnt_cpu_adam_step_f32(n, dec, 1e-3f, b1, b2, 1e-8f, 0.1f, bc1, bc2, 0.8f, g, p, m, v);
            got = fetch(d_p, n);
            check_close("adam p", got, p, n, 1e-6, 1e-7);
            free(got);
            got = fetch(d_m, n);
            check_close("adam m", got, m, n, 1e-6, 1e-9);
            free(got);
            got = fetch(d_v, n);
            check_close("adam v", got, v, n, 1e-6, 1e-12);
            free(got);
            dfree(d_p);
            dfree(d_m);
            dfree(d_v);
            free(p);
            free(m);
            free(v);
        }
        for (int mode = 0; mode < 3; mode++) { /* first step, later step, no buffer */
            float *p = copy_f(p0, n), *buf = copy_f(m0, n);
            float *d_p = dup_d(p, n), *d_buf = dup_d(buf, n);
            NNT_OK(nnt_cuda_sgd_step_f32(n, 0.05f, 0.9f, 0.01f, 0.8f, mode == 0, d_g, d_p,
                                         mode == 2 ? NULL : d_buf, g_stream));
            nnt_cpu_sgd_step_f32(n, 0.05f, 0.9f, 0.01f, 0.8f, mode == 0, g, p,
                                 mode == 2 ? NULL : buf);
            got = fetch(d_p, n);
            check_close("sgd p", got, p, n, 1e-6, 1e-7);
            free(got);
            got = fetch(d_buf, n);
            check_close("sgd buf", got, buf, n, 1e-6, 1e-7);
            free(got);
            dfree(d_p);
            dfree(d_buf);
            free(p);
            free(buf);
        }
        dfree(d_g);
        free(g);
        free(p0);
        free(m0);
        free(v0);
    }
}
END_TEST

/* ---- random fill ------------------------------------------------------------------------------ */

/* Uniform and normal draws must match bit for bit: the normal ones use the same float
 * polynomials on both sides (cpu/random.c, cuda/random.cu), each step one correctly rounded
 * or fused operation. (When they used libm's and libdevice's log and cos in double, a float
 * result could differ in its last bit; the check still names such a 1-ulp difference
 * separately, and fails on more than one element in 1e5, or on any larger one.) */
static void compare_random(const char *what, const float *got, const float *ref, int64_t n,
                           int dist)
{
    if (dist == 0) {
        check_exact_f(what, got, ref, n);
        return;
    }
    int64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, got + i, 4);
        memcpy(&b, ref + i, 4);
        if (a == b)
            continue;
        ck_assert_msg(a + 1 == b || b + 1 == a, "%s: element %lld: got %.9g, want %.9g", what,
                      (long long)i, got[i], ref[i]);
        off++;
    }
    if (off)
        fprintf(stderr, "note: %s: %lld of %lld normal samples differ by 1 ulp\n", what,
                (long long)off, (long long)n);
    ck_assert_msg(off * 100000 <= n, "%s: %lld of %lld samples differ", what, (long long)off,
                  (long long)n);
}

START_TEST(test_fill_random)
{
    static const int64_t gshapes[][4] = {{130, 0, 0, 0}, {61, 17, 0, 0}, {3, 17, 61, 0},
                                         {2, 3, 5, 7}, {1000, 1000, 0, 0}};
    static const int ndims[] = {1, 2, 3, 4, 2};
    for (int s = 0; s < 5; s++)
        for (int dist = 0; dist < 2; dist++) {
            int nd = ndims[s];
            const int64_t *gs = gshapes[s];
            int64_t total = 1;
            for (int d = 0; d < nd; d++)
                total *= gs[d];
            const uint64_t seed = 0x1234567ull + (uint64_t)s;
            const float a = dist ? 0.1f : -0.5f, b = dist ? 0.02f : 1.5f;
            /* whole tensor as one tile */
            int64_t zero[4] = {0, 0, 0, 0};
            float *ref = xmalloc((size_t)total * 4), *d_out = dalloc((size_t)total * 4);
            NNT_OK(nnt_cuda_fill_random_f32(nd, gs, zero, gs, seed, dist, a, b, d_out, g_stream));
            nnt_cpu_fill_random_f32(nd, gs, zero, gs, seed, dist, a, b, ref);
            float *got = fetch(d_out, total);
            compare_random("fill_random whole", got, ref, total, dist);
            free(got);
            /* a partial interior tile and an edge tile */
            for (int t = 0; t < 2; t++) {
                int64_t org[4], ts[4], tn = 1;
                for (int d = 0; d < nd; d++) {
                    org[d] = t ? gs[d] / 2 : gs[d] / 3;
                    ts[d] = t ? gs[d] - org[d] : (gs[d] - org[d] + 1) / 2;
                    if (ts[d] < 1)
                        ts[d] = 1;
                    tn *= ts[d];
                }
                float *tref = xmalloc((size_t)tn * 4), *d_t = dalloc((size_t)tn * 4);
                NNT_OK(nnt_cuda_fill_random_f32(nd, gs, org, ts, seed, dist, a, b, d_t,
                                                g_stream));
                nnt_cpu_fill_random_f32(nd, gs, org, ts, seed, dist, a, b, tref);
                got = fetch(d_t, tn);
                compare_random("fill_random tile", got, tref, tn, dist);
                free(got);
                dfree(d_t);
                free(tref);
            }
            dfree(d_out);
            free(ref);
        }
    /* dist 2: dropout in place (p 0.3, scale 1 / 0.7) of an edge tile, bit for bit */
    {
        int64_t gs[2] = {61, 17}, org[2] = {20, 5}, ts[2] = {41, 12}, tn = 41 * 12;
        float *ref = xmalloc((size_t)tn * 4), *d_t = dalloc((size_t)tn * 4);
        for (int64_t i = 0; i < tn; i++)
            ref[i] = (float)(i % 13) - 6.25f;
        upload(d_t, ref, (size_t)tn * 4);
        NNT_OK(nnt_cuda_fill_random_f32(2, gs, org, ts, 99, 2, 0.3f, 1.0f / 0.7f, d_t, g_stream));
        nnt_cpu_fill_random_f32(2, gs, org, ts, 99, 2, 0.3f, 1.0f / 0.7f, ref);
        float *got = fetch(d_t, tn);
        check_exact_f("dropout tile", got, ref, tn);
        free(got);
        dfree(d_t);
        free(ref);
    }
    int64_t one[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, z[9] = {0};
    ck_assert_int_eq(nnt_cuda_fill_random_f32(9, one, z, one, 1, 0, 0.0f, 1.0f, NULL, g_stream),
                     -1);
}
END_TEST

/* ---- mixture of experts ------------------------------------------------------------------------- */

/* n device int32 into a new host array */
static int32_t *fetch_i(const int32_t *d, int64_t n)
{
    int32_t *h = xmalloc((size_t)n * sizeof(int32_t));
    CUDA_OK(cudaStreamSynchronize(g_stream));
    CUDA_OK(cudaMemcpy(h, d, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost));
    return h;
}

/* The routing (the CPU's per-token code on the device) on random logits and on logits of a
 * few levels (probabilities tied at the k-th place: the same experts must win), both of
 * torch.topk's regimes (k 64 <= E: partial sort; else nth_element), E up to the maximum
 * (6 tokens a block of shared scratch), renormalised or not; and its backward with and
 * without the load-balancing term. */
START_TEST(test_moe_route)
{
    static const int64_t EK[][2] = {{4, 2}, {8, 2}, {60, 4}, {64, 8}, {128, 2}, {300, 2},
                                    {1024, 8}};
    static const int64_t ns[] = {1, 17, 130, 1000};
    int cs = 0;
    for (int a = 0; a < 7; a++)
        for (int b = 0; b < 4; b++)
            for (int tied = 0; tied < 2; tied++) {
                int64_t E = EK[a][0], k = EK[a][1], n = ns[b];
                int norm = cs % 2;
                rng_seed(4000 + cs++);
                float *z = rand_f(n * E, -4.0f, 4.0f);
                if (tied)   /* levels 0, 0.5, 1, 1.5 */
                    for (int64_t i = 0; i < n * E; i++)
                        z[i] = 0.5f * (float)(rng_u64() % 4);
                float *p = xmalloc((size_t)(n * E) * 4), *w = xmalloc((size_t)(n * k) * 4);
                int32_t *idx = xmalloc((size_t)(n * k) * 4);
                nnt_cpu_moe_route_f32(n, E, k, norm, z, p, idx, w);
                float *d_z = dup_d(z, n * E), *d_p = dalloc((size_t)(n * E) * 4);
                float *d_w = dalloc((size_t)(n * k) * 4);
                int32_t *d_idx = dalloc((size_t)(n * k) * 4);
                NNT_OK(nnt_cuda_moe_route_f32(n, E, k, norm, d_z, d_p, d_idx, d_w, g_stream));
                int32_t *gi = fetch_i(d_idx, n * k);
                for (int64_t i = 0; i < n * k; i++)
                    ck_assert_msg(gi[i] == idx[i], "moe route E %lld k %lld n %lld%s: token "
                                  "%lld place %lld: expert %d, the CPU's %d", (long long)E,
                                  (long long)k, (long long)n, tied ? " (tied)" : "",
                                  (long long)(i / k), (long long)(i % k), gi[i], idx[i]);
                float *got = fetch(d_p, n * E);
                check_close("moe route probs", got, p, n * E, 3e-6, 1e-7);
                free(got);
                got = fetch(d_w, n * k);
                check_close("moe route w", got, w, n * k, 3e-6, 1e-7);
                free(got);
                /* backward: dw random, aux on every other case */
                float *dw = rand_f(n * k, -1.0f, 1.0f), *aux = rand_f(E, 0.0f, 0.1f);
                const int with_aux = cs % 3 != 0;
                float *dz = xmalloc((size_t)(n * E) * 4);
                nnt_cpu_moe_route_bwd_f32(n, E, k, norm, p, idx, w, dw, with_aux ? aux : NULL,
                                          dz);
                float *d_dw = dup_d(dw, n * k), *d_aux = dup_d(aux, E);
                float *d_dz = dalloc((size_t)(n * E) * 4);
                upload(d_p, p, (size_t)(n * E) * 4);   /* the CPU's inputs exactly */
                upload(d_w, w, (size_t)(n * k) * 4);
                upload(d_idx, idx, (size_t)(n * k) * 4);
                NNT_OK(nnt_cuda_moe_route_bwd_f32(n, E, k, norm, d_p, d_idx, d_w, d_dw,
                                                  with_aux ? d_aux : NULL, d_dz, g_stream));
                got = fetch(d_dz, n * E);
                check_normwise("moe route dlogits", got, dz, n * E, 1e-6);
                free(got);
                free(gi), free(z), free(p), free(w), free(idx), free(dw), free(aux), free(dz);
                dfree(d_z), dfree(d_p), dfree(d_w), dfree(d_idx), dfree(d_dw), dfree(d_aux);
                dfree(d_dz);
            }
}
END_TEST

/* The row maps between a tile of tokens (rows, width) and a tile of an expert's rows: a
 * gather (with and without the routing weights), the weighted scatter-add of the expert's
 * outputs (its destination rows distinct, as an expert's are; the CPU's bits: the same
 * product and sum per element), the weight gradient; and the shared expert's gate. */
START_TEST(test_moe_maps)
{
    static const int64_t widths[] = {1, 3, 17, 61, 130, 1024};
    static const int64_t ms[] = {1, 5, 64, 300};
    const int64_t k = 3;
    int cs = 0;
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 4; b++) {
            int64_t width = widths[a], m = ms[b], rows = m + 7;   /* token rows of the tile */
            rng_seed(5000 + cs++);
            /* triples (token row, expert row, slot): token rows distinct (a permutation's
             * first m), expert rows in order */
            int32_t *perm = xmalloc((size_t)rows * 4), *gmap = xmalloc((size_t)(3 * m) * 4);
            int32_t *smap = xmalloc((size_t)(3 * m) * 4);
            for (int64_t i = 0; i < rows; i++)
                perm[i] = (int32_t)i;
            for (int64_t i = rows - 1; i > 0; i--) {
                int64_t j = (int64_t)(rng_u64() % (uint64_t)(i + 1));
                int32_t t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            for (int64_t r = 0; r < m; r++) {
                int32_t slot = (int32_t)(rng_u64() % (uint64_t)k);
                gmap[3 * r] = perm[r], gmap[3 * r + 1] = (int32_t)r, gmap[3 * r + 2] = slot;
                smap[3 * r] = (int32_t)r, smap[3 * r + 1] = perm[r], smap[3 * r + 2] = slot;
            }
            float *act = rand_f(rows * width, -2.0f, 2.0f), *w = rand_f(rows * k, 0.0f, 1.0f);
            float *ex = rand_f(m * width, -2.0f, 2.0f), *dst = rand_f(rows * width, -1, 1);
            float *dw = rand_f(rows * k, -1.0f, 1.0f);
            float *d_act = dup_d(act, rows * width), *d_w = dup_d(w, rows * k);
            float *d_ex = dalloc((size_t)(m * width) * 4), *d_dst = dup_d(dst, rows * width);
            float *d_dw = dup_d(dw, rows * k), *got;
            int32_t *d_gmap = dup_i(gmap, 3 * m), *d_smap = dup_i(smap, 3 * m);
            float *ref = xmalloc((size_t)(m * width) * 4);
            for (int weighted = 0; weighted < 2; weighted++) {
                const float *wt = weighted ? w : NULL, *d_wt = weighted ? d_w : NULL;
                nnt_cpu_moe_gather_f32(width, m, gmap, act, wt, k, ref);
                NNT_OK(nnt_cuda_moe_gather_f32(width, m, d_gmap, d_act, d_wt, k, d_ex,
                                               g_stream));
                got = fetch(d_ex, m * width);
                check_exact_f(weighted ? "moe gather weighted" : "moe gather", got, ref,
                              m * width);
                free(got);
                upload(d_ex, ex, (size_t)(m * width) * 4);
                nnt_cpu_moe_scatter_add_f32(width, m, smap, ex, wt, k, dst);
                NNT_OK(nnt_cuda_moe_scatter_add_f32(width, m, d_smap, d_ex, d_wt, k, d_dst,
                                                    g_stream));
                got = fetch(d_dst, rows * width);
                check_exact_f(weighted ? "moe scatter_add weighted" : "moe scatter_add", got,
                              dst, rows * width);
                free(got);
            }
            nnt_cpu_moe_weight_grad_f32(width, m, gmap, act, ex, k, dw);
            NNT_OK(nnt_cuda_moe_weight_grad_f32(width, m, d_gmap, d_act, d_ex, k, d_dw,
                                                g_stream));
            got = fetch(d_dw, rows * k);
            check_close("moe weight_grad", got, dw, rows * k, 1e-6, 1e-7);
            free(got);
            /* the shared expert's gate over the tile's rows: z (rows), s = act, y = dst */
            float *z = rand_f(rows, -6.0f, 6.0f), *ds = xmalloc((size_t)(rows * width) * 4);
            float *dz = rand_f(rows, -1.0f, 1.0f), *d_z = dup_d(z, rows);
            float *d_ds = dalloc((size_t)(rows * width) * 4), *d_dz = dup_d(dz, rows);
            upload(d_dst, dst, (size_t)(rows * width) * 4);
            nnt_cpu_moe_shared_add_f32(rows, width, z, act, dst);
            NNT_OK(nnt_cuda_moe_shared_add_f32(rows, width, d_z, d_act, d_dst, g_stream));
            got = fetch(d_dst, rows * width);
            check_close("moe shared_add", got, dst, rows * width, 1e-6, 1e-6);
            free(got);
            /* dy: the CPU's dst on both sides (the GPU's own shared_add differs by up to
             * 2.3e-7, which ds = g dy carried past its 1e-6 on 2026-11-29) */
            upload(d_dst, dst, (size_t)(rows * width) * 4);
            for (int accumulate = 0; accumulate < 2; accumulate++) {
                nnt_cpu_moe_shared_bwd_f32(rows, width, accumulate, z, act, dst, ds, dz);
                NNT_OK(nnt_cuda_moe_shared_bwd_f32(rows, width, accumulate, d_z, d_act, d_dst,
                                                   d_ds, d_dz, g_stream));
                got = fetch(d_ds, rows * width);
                check_close("moe shared_bwd ds", got, ds, rows * width, 1e-6, 1e-7);
                free(got);
                got = fetch(d_dz, rows);
                check_normwise("moe shared_bwd dz", got, dz, rows, 3e-6);
                free(got);
            }
            free(perm), free(gmap), free(smap), free(act), free(w), free(ex), free(dst);
            free(dw), free(ref), free(z), free(ds), free(dz);
            dfree(d_act), dfree(d_w), dfree(d_ex), dfree(d_dst), dfree(d_dw), dfree(d_gmap);
            dfree(d_smap), dfree(d_z), dfree(d_ds), dfree(d_dz);
        }
}
END_TEST

/* ---- attention by products (cpu/attn_products.c with cuBLAS and the CUDA row kernels) ------- */

struct dev_products {
    int math;
};

static int dev_gemm(void *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                    int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                    int64_t stride_c, int64_t batch)
{
    const struct dev_products *dp = ctx;
    return nnt_cuda_gemm(dp->math, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                         stride_b, beta, c, ldc, stride_c, batch, g_blas, g_stream);
}

static int dev_rows_fwd(void *ctx, const nnt_attn_rows *r, float *s, float *m, float *l,
                        float *o_acc)
{
    (void)ctx;
    return nnt_cuda_attn_rows_fwd_f32(r, s, m, l, o_acc, g_stream);
}

static int dev_rows_bwd(void *ctx, const nnt_attn_rows *r, float *s, float *dp,
                        const float *lse, const float *d)
{
    (void)ctx;
    return nnt_cuda_attn_rows_bwd_f32(r, s, dp, lse, d, g_stream);
}

/* The products path on the GPU against the CPU's flash kernels, the blocks of
 * test_cpu_kernels' attention_products: a 37-row query tile at 40 against key tiles at 11 and
 * 40 (29 rows), multi-head, whole and partial grouped-query maps; causal, a window of 20, a
 * soft-cap, packed examples, all three; a large and a small scratch; float products and TF32. */
static void run_products_case(const nnt_attn_map *mp, int variant, int math, int small)
{
    const int64_t tq = 37, tk = 29, hd = 12, qp0 = 40, kp0[2] = {11, 40};
    const int64_t nq = mp->nb * mp->q_hs, nkv = mp->nb * mp->kv_hs;
    const int64_t nqe = nq * tq * hd, nke = nkv * tk * hd;
    const int64_t w = variant == 1 || variant == 4 ? 20 : 0;
    const float cap = variant == 2 || variant == 4 ? 0.7f : 0.0f, scale = 0.41f;
    int32_t *pos = xmalloc((size_t)(mp->nb * tq) * sizeof *pos);
    for (int64_t b = 0; b < mp->nb; b++)
        for (int64_t i = 0; i < tq; i++)
            pos[b * tq + i] = (int32_t)((i + 7 * b) % 23 + 3 * b);
    const int32_t *qpos = variant >= 3 ? pos : NULL;
    int32_t *d_pos = dup_i(pos, mp->nb * tq);
    float *q = rand_f(nqe, -1, 1), *dout = rand_f(nqe, -1, 1), *k[2], *v[2];
    float *o = xmalloc((size_t)nqe * 4), *m = xmalloc((size_t)(nq * tq) * 4);
    float *l = xmalloc((size_t)(nq * tq) * 4), *lse = xmalloc((size_t)(nq * tq) * 4);
    float *d = xmalloc((size_t)(nq * tq) * 4);
    float *dq = xmalloc((size_t)nqe * 4), *dk[2], *dv[2];
    for (int b = 0; b < 2; b++) {
        k[b] = rand_f(nke, -1, 1), v[b] = rand_f(nke, -1, 1);
        dk[b] = xmalloc((size_t)nke * 4), dv[b] = xmalloc((size_t)nke * 4);
        memset(dk[b], 0, (size_t)nke * 4), memset(dv[b], 0, (size_t)nke * 4);
    }
    memset(o, 0, (size_t)nqe * 4), memset(dq, 0, (size_t)nqe * 4);
    for (int64_t i = 0; i < nq * tq; i++)
        m[i] = -INFINITY, l[i] = 0.0f;
    /* the GPU's state from the same start */
    float *d_q = dup_d(q, nqe), *d_dout = dup_d(dout, nqe), *d_o = dup_d(o, nqe);
    float *d_m = dup_d(m, nq * tq), *d_l = dup_d(l, nq * tq), *d_dq = dup_d(dq, nqe);
    float *d_k[2], *d_v[2], *d_dk[2], *d_dv[2];
    for (int b = 0; b < 2; b++)
        d_k[b] = dup_d(k[b], nke), d_v[b] = dup_d(v[b], nke), d_dk[b] = dup_d(dk[b], nke),
        d_dv[b] = dup_d(dv[b], nke);
    const int64_t ws_n = small ? 2 * 4 * tk : 2 * nq * tq * tk;
    float *d_ws = dalloc((size_t)ws_n * 4);
    struct dev_products dp = {math ? NNT_CUDA_MATH_TF32 : NNT_CUDA_MATH_F32};
    const nnt_attn_products_ops ops = {&dp, dev_gemm, dev_rows_fwd, dev_rows_bwd};
    for (int b = 0; b < 2; b++) {
        nnt_cpu_attn_fwd_packed_f32(NULL, mp, tq, tk, hd, qp0, kp0[b], w, qpos, scale, cap,
                                    q, k[b], v[b], o, m, l);
        NNT_OK(nnt_attn_products_fwd(&ops, mp, tq, tk, hd, qp0, kp0[b], w,
                                     qpos ? d_pos : NULL, scale, cap, d_q, d_k[b], d_v[b],
                                     d_o, d_m, d_l, d_ws, ws_n));
    }
    /* float: the flash kernels' 5e-6; TF32 (10-bit mantissas): an estimate, not yet run */
    const double tol = math ? 5e-3 : 5e-6;
    float *got = fetch(d_o, nqe);
    check_normwise(math ? "products fwd o (tf32)" : "products fwd o", got, o, nqe, tol);
    free(got);
    got = fetch(d_l, nq * tq);
    check_normwise(math ? "products fwd l (tf32)" : "products fwd l", got, l, nq * tq, tol);
    free(got);
    float *of = copy_f(o, nqe);
    nnt_cpu_attn_fwd_finalize_f32(nq, tq, hd, of, m, l, lse);
    nnt_cpu_attn_bwd_prep_f32(nq, tq, hd, of, dout, d);
    float *d_lse = dup_d(lse, nq * tq), *d_d = dup_d(d, nq * tq);
    for (int b = 0; b < 2; b++) {
        nnt_cpu_attn_bwd_packed_f32(NULL, mp, tq, tk, hd, qp0, kp0[b], w, qpos, scale, cap,
                                    q, k[b], v[b], dout, lse, d, dq, dk[b], dv[b]);
        NNT_OK(nnt_attn_products_bwd(&ops, mp, tq, tk, hd, qp0, kp0[b], w,
                                     qpos ? d_pos : NULL, scale, cap, d_q, d_k[b], d_v[b],
                                     d_dout, d_lse, d_d, d_dq, d_dk[b], d_dv[b], d_ws, ws_n));
    }
    got = fetch(d_dq, nqe);
    check_normwise(math ? "products bwd dq (tf32)" : "products bwd dq", got, dq, nqe, tol);
    free(got);
    for (int b = 0; b < 2; b++) {
        got = fetch(d_dk[b], nke);
        check_normwise(math ? "products bwd dk (tf32)" : "products bwd dk", got, dk[b], nke,
                       tol);
        free(got);
        got = fetch(d_dv[b], nke);
        check_normwise(math ? "products bwd dv (tf32)" : "products bwd dv", got, dv[b], nke,
                       tol);
        free(got);
    }
    free(pos), free(q), free(dout), free(o), free(m), free(l), free(lse), free(d), free(dq);
    free(of);
    dfree(d_pos), dfree(d_q), dfree(d_dout), dfree(d_o), dfree(d_m), dfree(d_l);
    dfree(d_dq), dfree(d_ws), dfree(d_lse), dfree(d_d);
    for (int b = 0; b < 2; b++) {
        free(k[b]), free(v[b]), free(dk[b]), free(dv[b]);
        dfree(d_k[b]), dfree(d_v[b]), dfree(d_dk[b]), dfree(d_dv[b]);
    }
}

START_TEST(test_attention_products)
{
    static const nnt_attn_map maps[] = {
        {2, 3, 3, 0, 3, 1, 0, 0}, {2, 6, 6, 0, 2, 3, 0, 0}, {2, 2, 4, 1, 2, 2, 1, 0}};
    for (int mi = 0; mi < 3; mi++)
        for (int variant = 0; variant < 5; variant++)
            for (int math = 0; math < 2; math++)
                for (int small = 0; small < 2; small++)
                    run_products_case(&maps[mi], variant, math, small);
}
END_TEST

/* ---- suite ------------------------------------------------------------------------------------ */

static Suite *cuda_suite(void)
{
    Suite *s = suite_create("nnt_cuda_kernels");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_elementwise);
    tcase_add_test(tc, test_bcast_and_bias_gelu);
    tcase_add_test(tc, test_feature_products);
    tcase_add_test(tc, test_gelu_erf_special);
    tcase_add_test(tc, test_copy_box);
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_gemm_bias_gelu);
    tcase_add_test(tc, test_gemm_lt);
    tcase_add_test(tc, test_round_and_reduced_gemm);
    tcase_add_test(tc, test_nf4_dequantize);
    tcase_add_test(tc, test_layernorm);
    tcase_add_test(tc, test_rmsnorm);
    tcase_add_test(tc, test_rmsnorm_plus_one);
    tcase_add_test(tc, test_norm_split);
    tcase_add_test(tc, test_swiglu);
    tcase_add_test(tc, test_attn_sinks);
    tcase_add_test(tc, test_swiglu_clamp);
    tcase_add_test(tc, test_geglu_softcap);
    tcase_add_test(tc, test_rope);
    tcase_add_test(tc, test_attention);
    tcase_add_test(tc, test_attention_gqa);
    tcase_add_test(tc, test_attention_packed);
    tcase_add_test(tc, test_attention_products);
    tcase_add_test(tc, test_rope_positions);
    tcase_add_test(tc, test_xent);
    tcase_add_test(tc, test_xent_smooth);
    tcase_add_test(tc, test_embedding);
    tcase_add_test(tc, test_sumsq);
    tcase_add_test(tc, test_optim);
    tcase_add_test(tc, test_fill_random);
    tcase_add_test(tc, test_moe_route);
    tcase_add_test(tc, test_moe_maps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        printf("SKIP: no CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount reports 0 devices");
        return 77;
    }
    if ((e = cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaMalloc(&g_ws, g_ws_size)) != cudaSuccess) {
        printf("SKIP: no CUDA device (cannot use device 0: %s)\n", cudaGetErrorString(e));
        return 77;
    }
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(g_blas, g_stream) != CUBLAS_STATUS_SUCCESS ||
        cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cuBLAS / cuBLASLt initialisation failed\n");
        return 1;
    }

    SRunner *sr = srunner_create(cuda_suite());
    srunner_set_fork_status(sr, CK_NOFORK); /* CUDA contexts do not survive fork() */
    srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose: every test and its result */
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);

    cublasLtDestroy(g_lt);
    cublasDestroy(g_blas);
    cudaFree(g_ws);
    cudaStreamDestroy(g_stream);
    return failed == 0 ? 0 : 1;
}
