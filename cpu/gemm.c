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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* AMD with the AVX-512 subsets of BLIS's skx kernels (cpu/nnt_cpu.h). */
static int amd_with_avx512(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
    return 0;
#endif
}

const char *nnt_cpu_blis_setup(void)
{
    /* BLIS 1.0 has Zen 4 and Zen 5 kernel sets of its own: only before it */
    const char *version = bli_info_get_version_str();
    int before_1_0 = version && version[0] == '0' && version[1] == '.';
    if (before_1_0 && !getenv("BLIS_ARCH_TYPE") && amd_with_avx512()) {
        char id[16];
        snprintf(id, sizeof id, "%d", (int)BLIS_ARCH_SKX);
        setenv("BLIS_ARCH_TYPE", id, 0);
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
            gemv_row(trans_b, n, k, alpha, a + i * stride_a, trans_a ? lda : 1,
                     b + i * stride_b, ldb, beta, ci, &rntm);
            continue;
        }
        /* BLIS takes non-const operand pointers but only reads A and B */
        bli_sgemm_ex(ta, tb, m, n, k, &alpha, (float *)(a + i * stride_a), lda, 1,
                     (float *)(b + i * stride_b), ldb, 1, &beta, ci, ldc, 1, NULL, &rntm);
    }
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

void nnt_cpu_round_f32(int64_t n, int bits, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u = round_bits(u, 23 - bits);
        memcpy(&y[i], &u, sizeof u);
    }
}

void nnt_cpu_f32_to_bf16(int64_t n, const float *x, uint16_t *y)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        y[i] = (uint16_t)(round_bits(u, 16) >> 16);
    }
}

void nnt_cpu_bf16_to_f32(int64_t n, const uint16_t *x, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)x[i] << 16;
        memcpy(&y[i], &u, sizeof u);
    }
}
