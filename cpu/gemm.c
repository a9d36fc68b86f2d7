/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: batched GEMM through BLIS.
 *
 * BLIS 0.9.0 (Debian 12) has out-of-bounds reads in its "sup" small-matrix kernels
 * (flame/blis#635): cblas_sgemm reads up to one float past the end of A or C for some
 * small shapes (valgrind shows it for e.g. m=7 n=3 k=7 with beta=1), which can fault
 * when a tile ends at a page boundary. We therefore call BLIS's typed expert API with
 * the sup path disabled; it takes 64-bit sizes and strides, and like BLAS it does not
 * read C when beta == 0. Threading follows BLIS's global settings (BLIS_NUM_THREADS). */
#include "nnt_cpu.h"

#include <blis.h>

#if NNT_CPU_X86
#include "simd_avx2.h"
#include "simd_avx512.h"
#endif

#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef NNT_HAVE_ONEDNN
#define NNT_CPU_DNNL_COMPILED 1
#else
#define NNT_CPU_DNNL_COMPILED 0
#endif

/* The AVX-512 subsets BLIS's skx kernels use (F, CD, DQ, BW, VL), on a CPU that is not a
 * Xeon Phi (AVX512-ER: BLIS has knl kernels for it). A feature test, whatever the vendor. */
static int has_skx_features(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && !__builtin_cpu_supports("avx512er");
#else
    return 0;
#endif
}

static const char *blis_reason = "";

const char *nnt_cpu_blis_reason(void)
{
    return blis_reason;
}

const char *nnt_cpu_blis_setup(void)
{
    /* BLIS 1.0 has Zen 4 and Zen 5 kernel sets of its own: only before it. BLIS 0.9 picks
     * skx only for Intel CPUs it knows to have two FMA units (else haswell: "FMA units
     * unknown", e.g. under KVM) and generic for AMD models it does not know (Zen 4, 5). */
    const char *version = bli_info_get_version_str();
    int before_1_0 = version && version[0] == '0' && version[1] == '.';
    blis_reason = "BLIS's own choice";
    if (getenv("BLIS_ARCH_TYPE"))
        blis_reason = "BLIS_ARCH_TYPE set";
    else if (before_1_0 && has_skx_features()) {
        char id[16];
        snprintf(id, sizeof id, "%d", (int)BLIS_ARCH_SKX);
        setenv("BLIS_ARCH_TYPE", id, 0);
        blis_reason = "skx forced: the CPU has AVX-512 F/CD/DQ/BW/VL and BLIS is before 1.0";
    }
    bli_init();   /* BLIS 0.9.0 aborts on bli_arch_query_id before its initialisation */
    return bli_arch_string(bli_arch_query_id());
}

/* C (m, n) = beta * C, without reading C when beta == 0 (used when k == 0) */
static void scale_c(int64_t m, int64_t n, float beta, float *c, int64_t ldc)
{
    for (int64_t r = 0; r < m; r++) {
        float *restrict row = c + r * ldc;
        if (beta == 0.0f)
            for (int64_t j = 0; j < n; j++)
                row[j] = 0.0f;
        else
            for (int64_t j = 0; j < n; j++)
                row[j] *= beta;
    }
}

/* One row (m == 1): c (n) = alpha a op(B) + beta c through BLIS's gemv, which streams B once
 * (the gemm path packs B and pads the row to a whole micro-tile: several times the work;
 * the decode steps of generation with a key/value cache are all one-row products). a is
 * the row of op(A): stride inca. beta == 0: c is not read. */
static void gemv_row(int trans_b, int64_t n, int64_t k, float alpha, const float *a,
                     int64_t inca, const float *b, int64_t ldb, float beta, float *c,
                     rntm_t *rntm)
{
    /* trans_b: op(B) = B^T, B (n, k): c = B a; else B (k, n): c = B^T a */
    bli_sgemv_ex(trans_b ? BLIS_NO_TRANSPOSE : BLIS_TRANSPOSE, BLIS_NO_CONJUGATE,
                 trans_b ? n : k, trans_b ? k : n, &alpha, (float *)b, ldb, 1, (float *)a,
                 inca, &beta, c, 1, NULL, rntm);
}

/* For each batch: C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C, all row-major:
 * row stride = leading dim, column stride = 1; BLIS applies the transposes itself. */
void nnt_cpu_gemm_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, int64_t stride_a, const float *b,
                      int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                      int64_t stride_c, int64_t batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return;
    rntm_t rntm;
    bli_rntm_init_from_global(&rntm);
    bli_rntm_disable_l3_sup(&rntm);
    bli_rntm_set_num_threads(1, &rntm);   /* one StarPU worker per core: never oversubscribe */
    trans_t ta = trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
    trans_t tb = trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
    for (int64_t i = 0; i < batch; i++) {
        float *ci = c + i * stride_c;
        if (k <= 0 || alpha == 0.0f) {
            scale_c(m, n, beta, ci, ldc);
            continue;
        }
        if (m == 1) {
            /* nnt's row walk where it can (op(B) = B^T, the row dense), else BLIS's gemv */
            if (!trans_b || (trans_a && lda != 1) ||
                nnt_cpu_gemv_f32(n, k, alpha, a + i * stride_a, b + i * stride_b, ldb, beta,
                                 ci) != 0)
                gemv_row(trans_b, n, k, alpha, a + i * stride_a, trans_a ? lda : 1,
                         b + i * stride_b, ldb, beta, ci, &rntm);
            continue;
        }
        /* BLIS takes non-const operand pointers but only reads A and B */
        bli_sgemm_ex(ta, tb, m, n, k, &alpha, (float *)(a + i * stride_a), lda, 1,
                     (float *)(b + i * stride_b), ldb, 1, &beta, ci, ldc, 1, NULL, &rntm);
    }
}

void nnt_cpu_product_f32(nnt_dnnl_cache *dnnl, int trans_a, int trans_b, int64_t m, int64_t n,
                         int64_t k, float alpha, const float *a, int64_t lda, int64_t stride_a,
                         const float *b, int64_t ldb, int64_t stride_b, float beta, float *c,
                         int64_t ldc, int64_t stride_c, int64_t batch)
{
    if (dnnl && m > 1 &&
        nnt_cpu_gemm_dnnl(dnnl, trans_a, trans_b, 0, m, n, k, alpha, a, lda, stride_a, b, ldb,
                          stride_b, beta, c, ldc, stride_c, batch) == 0)
        return;
    nnt_cpu_gemm_f32(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                     c, ldc, stride_c, batch);
}

/* x's bits rounded to nearest even with the `drop` low mantissa bits cleared (see
 * nnt_cpu_round_f32 in nnt_cpu.h). */
static uint32_t round_bits(uint32_t u, int drop)
{
    const uint32_t mask = ~((1u << drop) - 1u), half = (1u << (drop - 1)) - 1u;
    if ((u & 0x7f800000u) == 0x7f800000u)   /* Inf stays; NaN: quiet bit survives mask */
        return (u & 0x007fffffu) ? (u | 0x00400000u) & mask : u;
    return (u + half + ((u >> drop) & 1u)) & mask;   /* a carry moves to the next binade/Inf */
}

#if NNT_CPU_X86
/* round_bits on 8 floats' bits, the same results: an infinity rounds to itself without a
 * special case (its low bits are 0, the added half never carries), NaN keeps its quiet bit. */
static inline NNT_AVX2 __m256i round_bits_avx2(__m256i u, int drop)
{
    const __m128i count = _mm_cvtsi32_si128(drop);
    const __m256i mask = _mm256_set1_epi32((int)~((1u << drop) - 1u));
    const __m256i half = _mm256_set1_epi32((int)((1u << (drop - 1)) - 1u));
    __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(u, count), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, half), lsb), mask);
    __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i is_nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    __m256i quiet = _mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), mask);
    return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

/* The AVX2 loops return how many elements they did (a multiple of 8); the portable loops
 * finish the rest. */
static NNT_AVX2 int64_t round_avx2(int64_t n, int drop, const float *x, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        _mm256_storeu_si256((__m256i *)(y + i), round_bits_avx2(u, drop));
    }
    return i;
}

static NNT_AVX2 int64_t to_bf16_avx2(int64_t n, const float *x, uint16_t *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i hi = _mm256_srli_epi32(round_bits_avx2(u, 16), 16);   // 8 values <= 0xffff
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(hi, hi), 0x08);
        _mm_storeu_si128((__m128i *)(y + i), _mm256_castsi256_si128(packed));
    }
    return i;
}

static NNT_AVX2 int64_t from_bf16_avx2(int64_t n, const uint16_t *x, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, nnt_avx2_bf16x8(x + i));
    return i;
}

static int use_avx2(void)
{
    return nnt_cpu_isa() == NNT_CPU_ISA_AVX2;
}

/* to_bf16_avx2 on 16 floats a step where the CPU has AVX-512F, and by AVX512-BF16's
 * VCVTNEPS2BF16 where it has that too (feature tests), with the same results: round_bits'
 * (the half added with the kept part's lowest bit, NaN made quiet) is the instruction's
 * rounding, except that the instruction flushes subnormal inputs to zero, so a step with a
 * subnormal takes the integer way. On AMD Zen 5, 64K floats in L2 (bench/RESULTS-window.md):
 * 0.109 ns a float 8 a step, 0.073 16 a step, 0.03 by the instruction. */
static NNT_AVX512 int64_t to_bf16_avx512(int64_t n, const float *x, uint16_t *y)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i r = nnt_avx512_round_bf16(_mm512_loadu_si512((const void *)(x + i)));
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
    }
    return i;
}

static NNT_AVX512BF16 int64_t to_bf16_avx512bf16(int64_t n, const float *x, uint16_t *y)
{
    const __m512i exponent = _mm512_set1_epi32(0x7f800000), fraction = _mm512_set1_epi32(0x7fffff);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 f = _mm512_loadu_ps(x + i);
        __m512i u = _mm512_castps_si512(f);
        __mmask16 subnormal = _mm512_testn_epi32_mask(u, exponent) & _mm512_test_epi32_mask(u, fraction);
        if (subnormal)
            to_bf16_avx512(16, x + i, y + i);
        else
            _mm256_storeu_si256((__m256i *)(y + i), (__m256i)_mm512_cvtneps_pbh(f));
    }
    return i;
}

#endif

void nnt_cpu_round_f32(int64_t n, int bits, const float *x, float *y)
{
    int64_t i = 0;
#if NNT_CPU_X86
    if (use_avx2())
        i = round_avx2(n, 23 - bits, x, y);
#endif
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u = round_bits(u, 23 - bits);
        memcpy(&y[i], &u, sizeof u);
    }
}

void nnt_cpu_f32_to_bf16(int64_t n, const float *x, uint16_t *y)
{
    int64_t i = 0;
#if NNT_CPU_X86
    if (use_avx2()) {
        int level = nnt_cpu_avx512();
        i = level == 2 ? to_bf16_avx512bf16(n, x, y) : level == 1 ? to_bf16_avx512(n, x, y) : 0;
        i += to_bf16_avx2(n - i, x + i, y + i);
    }
#endif
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        y[i] = (uint16_t)(round_bits(u, 16) >> 16);
    }
}

void nnt_cpu_bf16_to_f32(int64_t n, const uint16_t *x, float *y)
{
    int64_t i = 0;
#if NNT_CPU_X86
    if (use_avx2())
        i = from_bf16_avx2(n, x, y);
#endif
    for (; i < n; i++)
        y[i] = nnt_cpu_bf16_value(x[i]);
}

int64_t nnt_cpu_bf16_inexact_f32(int64_t n, const float *x)
{
    int64_t inexact = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, x + i, sizeof bits);
        inexact += (bits & 0xffffu) != 0;
    }
    return inexact;
}

/* ---- the backend: BLIS or oneDNN ------------------------------------------------------------- */

static int gemm_backend = NNT_GEMM_BLIS;

int nnt_cpu_gemm_backend(void)
{
    return gemm_backend;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The shapes timed at start: GPT-2 124M's products as the automatic tiling cuts them for a
 * few workers (C = 768, 128-row tiles): forward x W^T, the input gradient dY W and the
 * weight gradient dY^T x. */
static const struct { int ta, tb; int64_t m, n, k; } probe[] = {
    {0, 1, 128, 768, 768}, {0, 0, 128, 768, 768}, {1, 0, 768, 768, 128}};
#define PROBE_ROUNDS 4

/* What a probe round times: BLIS's float products, oneDNN's float products, oneDNN's bf16
 * products (the float operands rounded to bf16 inside, as --precision bf16 makes them). */
enum { PROBE_BLIS, PROBE_DNNL_F32, PROBE_DNNL_BF16 };

static int probe_run(nnt_dnnl_cache *cache, int variant, size_t p, const float *a,
                     const float *b, float *c)
{
    int64_t m = probe[p].m, n = probe[p].n, k = probe[p].k;
    int64_t lda = probe[p].ta ? m : k, ldb = probe[p].tb ? k : n;
    if (variant == PROBE_BLIS) {
        nnt_cpu_gemm_f32(probe[p].ta, probe[p].tb, m, n, k, 1.0f, a, lda, 0, b, ldb, 0, 0.0f,
                         c, n, 0, 1);
        return 0;
    }
    return nnt_cpu_gemm_dnnl(cache, probe[p].ta, probe[p].tb,
                             variant == PROBE_DNNL_BF16 ? NNT_DNNL_BF16 : 0, m, n, k, 1.0f, a,
                             lda, 0, b, ldb, 0, 0.0f, c, n, 0, 1);
}

/* Seconds of the probe products of each of the two variants (PROBE_*), on this thread: the
 * best of PROBE_ROUNDS interleaved rounds (the first a warm-up, the first variant's turn
 * first in even rounds, second in odd ones), summed over the shapes. -1 when oneDNN failed. */
static int time_probes(const int variant[2], double secs[2])
{
    nnt_dnnl_cache *cache = nnt_cpu_dnnl_cache_create();
    size_t cap = 768 * 768;
    float *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b), *c = malloc(cap * sizeof *c);
    int rc = cache && a && b && c ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < cap; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.02f;
    }
    secs[0] = secs[1] = 0.0;
    for (size_t p = 0; rc == 0 && p < sizeof probe / sizeof probe[0]; p++) {
        double best[2] = {1e30, 1e30};
        for (int r = 0; r < PROBE_ROUNDS && rc == 0; r++) {
            for (int turn = 0; turn < 2 && rc == 0; turn++) {
                int v = (turn + r) % 2;
                double t0 = seconds();
                rc = probe_run(cache, variant[v], p, a, b, c);
                double t = seconds() - t0;
                if (r > 0 && t < best[v])
                    best[v] = t;
            }
        }
        secs[0] += best[0];
        secs[1] += best[1];
    }
    free(a);
    free(b);
    free(c);
    nnt_cpu_dnnl_cache_destroy(cache);
    return rc;
}

static double probe_flop(void)
{
    double flop = 0.0;
    for (size_t p = 0; p < sizeof probe / sizeof probe[0]; p++)
        flop += 2.0 * (double)probe[p].m * (double)probe[p].n * (double)probe[p].k;
    return flop;
}

/* NNT_GEMM=measure: the faster on the probes, measured once a process (later contexts
 * reuse it). Noise can make two runs choose differently, and their results then differ in
 * the last bits. */
static int measured = -1;
static char measured_why[200];

static void choose_by_measurement(void)
{
    static const int variant[2] = {PROBE_BLIS, PROBE_DNNL_F32};
    double t[2];
    if (time_probes(variant, t)) {
        measured = NNT_GEMM_BLIS;
        snprintf(measured_why, sizeof measured_why, "oneDNN failed its start-up probe");
        return;
    }
    double tb = t[0], td = t[1], flop = probe_flop();
    measured = td < tb ? NNT_GEMM_ONEDNN : NNT_GEMM_BLIS;
    snprintf(measured_why, sizeof measured_why, "measured: oneDNN %.1f, BLIS %.1f "
             "GFLOP/s a core on GPT-2 tile products", flop / td * 1e-9, flop / tb * 1e-9);
}

/* The default where oneDNN is compiled in, by feature test (the same on every run of a
 * host, so results are reproducible from one process to the next): oneDNN where its
 * instruction set has AVX2 or AVX-512, else BLIS. Measured: on an AVX-512 + AMX Xeon at 2
 * threads f32 390-433 GFLOP/s against BLIS skx's 300-365 (and bf16 operands multiplied
 * directly where the CPU has bf16 dot products); on AMD Zen 3 (AVX2) GPT-2 124M training
 * steps 8 % (fp32) and 14 % (bf16 operands) faster, medians of 9 interleaved pairs on a
 * shared host (bench/RESULTS-cpu-kernels.md). */
static int default_backend(char *why, size_t len)
{
    const char *isa = nnt_cpu_dnnl_isa();
    if (strncmp(isa, "avx512", 6) == 0 || strncmp(isa, "avx2", 4) == 0) {
        snprintf(why, len, "default for oneDNN's ISA %s", isa);
        return NNT_GEMM_ONEDNN;
    }
    snprintf(why, len, "default: oneDNN's ISA %s has neither AVX2 nor AVX-512", isa);
    return NNT_GEMM_BLIS;
}

int nnt_cpu_gemm_choose(char *why, size_t len)
{
    const char *env = getenv("NNT_GEMM");
    int have = nnt_cpu_dnnl_available();
    if (env && *env) {
        if (strcmp(env, "blis") == 0) {
            gemm_backend = NNT_GEMM_BLIS;
            snprintf(why, len, "NNT_GEMM=blis");
            return 0;
        }
        if (strcmp(env, "onednn") != 0 && strcmp(env, "measure") != 0) {
            snprintf(why, len, "NNT_GEMM='%s' is not a GEMM backend: use blis, onednn or "
                     "measure", env);
            return -1;
        }
        if (!have) {
            snprintf(why, len, "NNT_GEMM=%s, but %s", env, NNT_CPU_DNNL_COMPILED
                     ? "oneDNN's CPU engine could not be created"
                     : "this nnt was built without oneDNN (configure --with-onednn)");
            return -1;
        }
        if (strcmp(env, "onednn") == 0) {
            gemm_backend = NNT_GEMM_ONEDNN;
            snprintf(why, len, "NNT_GEMM=onednn");
            return 0;
        }
        if (measured < 0)   /* NNT_GEMM=measure */
            choose_by_measurement();
        gemm_backend = measured;
        snprintf(why, len, "NNT_GEMM=measure: %s", measured_why);
        return 0;
    }
    if (!have) {
        gemm_backend = NNT_GEMM_BLIS;
        snprintf(why, len, "built without oneDNN");
        return 0;
    }
    gemm_backend = default_backend(why, len);
    return 0;
}

/* ---- bf16 products: oneDNN's bf16 matmul, or float products on expanded operands ------- */

/* Direct bf16 products are kept unless they take this many times the float products' time:
 * expanding costs a conversion that a direct product does not make (bf16 tiles expanded to
 * floats), and the margin keeps a host whose two rates are close from choosing differently
 * from one run to the next (the two ways differ in the last bits of their sums). */
#define BF16_EXPAND_ABOVE 1.25

static int bf16_measured = -1;   /* 1 direct, 0 expanded; -1 not measured yet */
static char bf16_measured_why[160];

static void measure_bf16(void)
{
    static const int variant[2] = {PROBE_DNNL_F32, PROBE_DNNL_BF16};
    double t[2];
    if (time_probes(variant, t)) {
        bf16_measured = 0;
        snprintf(bf16_measured_why, sizeof bf16_measured_why,
                 "oneDNN's bf16 matmul failed its start-up probe");
        return;
    }
    double flop = probe_flop();
    bf16_measured = t[1] <= BF16_EXPAND_ABOVE * t[0];
    snprintf(bf16_measured_why, sizeof bf16_measured_why,
             "measured: bf16 products %.1f, float %.1f GFLOP/s a core", flop / t[1] * 1e-9,
             flop / t[0] * 1e-9);
}

int nnt_cpu_gemm_choose_bf16(char *why, size_t len)
{
    const char *env = getenv("NNT_GEMM_BF16");
    int forced = env && *env;
    if (forced && strcmp(env, "direct") != 0 && strcmp(env, "expanded") != 0) {
        snprintf(why, len, "NNT_GEMM_BF16='%s' is not a way of bf16 products: use direct or "
                 "expanded", env);
        return -1;
    }
    int possible = gemm_backend == NNT_GEMM_ONEDNN && nnt_cpu_dnnl_bf16_isa();
    if (forced && strcmp(env, "direct") == 0 && !possible) {
        snprintf(why, len, "NNT_GEMM_BF16=direct, but %s",
                 gemm_backend != NNT_GEMM_ONEDNN ? "BLIS computes the products"
                                                 : "the CPU has no bf16 dot products");
        return -1;
    }
    *why = '\0';
    if (!possible)
        return 0;
    if (forced) {
        nnt_cpu_dnnl_bf16_use(strcmp(env, "direct") == 0);
        snprintf(why, len, "NNT_GEMM_BF16=%s", env);
        return 0;
    }
    if (bf16_measured < 0)
        measure_bf16();
    nnt_cpu_dnnl_bf16_use(bf16_measured);
    snprintf(why, len, "%s", bf16_measured_why);
    return 0;
}
