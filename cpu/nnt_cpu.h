/* SPDX-License-Identifier: MIT */
/* nnt CPU kernels: plain C99 on raw pointers.
 *
 * A kernel knows nothing about tiles, StarPU or tensors: it receives sizes, pointers and
 * (where a layout is not contiguous) leading dimensions or strides, all counted in elements.
 * Matrices are row-major. Every kernel has a CUDA twin in cuda/nnt_cuda.h with the same
 * name after the prefix, the same arguments, and a trailing stream (and, for GEMM, cuBLAS
 * handle) argument.
 *
 * Conventions:
 *   - "set" outputs are overwritten; "+=" outputs are accumulated (parameter gradients,
 *     running statistics), so callers can accumulate over tiles and micro-batches.
 *   - int64_t for every size and offset; int32_t for token ids.
 *   - Reductions accumulate in double internally where the comment says so.
 *   - In place is allowed where noted: gelu_fwd and gelu_erf_fwd (y == x), gelu_bwd and
 *     gelu_erf_bwd (dx == dy), xent_bwd_block (dlogits == logits), swiglu (any output may
 *     be an input; the two outputs of the backward must differ), rope (y_lo == x_lo,
 *     y_hi == x_hi). Elsewhere outputs must not alias inputs.
 *   - No kernel allocates more than O(rows) scratch on the stack; none aborts.
 */
#ifndef NNT_CPU_H
#define NNT_CPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- instruction set of the elementwise kernels --------------------------------------------
 * GELU, SwiGLU, LayerNorm, RMSNorm, the softmax rows (cross-entropy, attention), the bf16
 * conversions and the optimizer steps have a portable C path (the reference, any CPU) and,
 * on x86-64 built with GCC or clang, an AVX2 + FMA path chosen at run time when the CPU
 * has both (no -march flag: the library runs on any x86-64).
 * The environment variable NNT_CPU_ISA=generic forces the portable path (read at the first
 * kernel call). Both paths give the same results within float rounding; the AVX2 exp
 * (cpu/simd_avx2.h) has a measured error of a few ulp (tests/test_cpu_kernels.c).          */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define NNT_CPU_X86 1
#else
#define NNT_CPU_X86 0
#endif
#define NNT_CPU_ISA_GENERIC 0
#define NNT_CPU_ISA_AVX2 1
int nnt_cpu_isa(void);                   /* NNT_CPU_ISA_*                                       */
/* The AVX-512 steps the AVX2 path takes where the CPU has them (feature tests; the same bits
 * as its 8-float steps): 2 AVX512-BF16 and AVX-512F (the bf16 conversion by VCVTNEPS2BF16),
 * 1 AVX-512F (the softmax rows, the bf16 conversion), 0 none (or the generic path).
 * nnt_cpu_avx512_force (tests): at most that level (-1: the CPU's); returns the level. */
int nnt_cpu_avx512(void);
int nnt_cpu_avx512_force(int level);
const char *nnt_cpu_isa_name(void);      /* "generic" or "avx2", a static string               */
/* Tests: force a level (one the CPU lacks gives generic); -1 returns to the default (and
 * reads NNT_CPU_ISA again at the next call).                                               */
void nnt_cpu_isa_force(int level);
/* A core's L2 cache in bytes (sysconf; 1 MiB where the system does not say) */
size_t nnt_cpu_l2_bytes(void);

/* ---- elementwise, n contiguous elements ---------------------------------------------- */

/* x[i] = value */
void nnt_cpu_fill_f32(int64_t n, float value, float *x);
void nnt_cpu_fill_i32(int64_t n, int32_t value, int32_t *x);
void nnt_cpu_fill_u16(int64_t n, uint16_t value, uint16_t *x);   /* e.g. bfloat16 bits */
/* x[i] *= alpha */
void nnt_cpu_scale_f32(int64_t n, float alpha, float *x);
/* y[i] = alpha * x[i] + beta * y[i]   (beta == 0: y is not read, so NaN in y is overwritten) */
void nnt_cpu_axpby_f32(int64_t n, float alpha, const float *x, float beta, float *y);
/* z[i] = alpha * x[i] + beta * y[i] with axpby's operations (z may be y, not x; beta == 0:
 * y is not read) */
void nnt_cpu_axpbyz_f32(int64_t n, float alpha, const float *x, float beta, const float *y,
                        float *z);
/* GELU, tanh approximation as in GPT-2:
 * y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))                                     */
void nnt_cpu_gelu_fwd_f32(int64_t n, const float *x, float *y);          /* y set */
/* dx[i] = dy[i] * gelu'(x[i])                                                  dx set */
void nnt_cpu_gelu_bwd_f32(int64_t n, const float *x, const float *dy, float *dx);
/* GELU, exact (erf) form, torch's gelu and transformers' "gelu" (GPT-NeoX, Pythia):
 * y = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); dx[i] = dy[i] gelu'(x[i]) with
 * gelu'(x) = Phi(x) + x phi(x). Phi from a rational approximation of erfc (relative error
 * under 5.6e-7, cpu/elementwise.c); in place as the tanh ones.               y set, dx set */
void nnt_cpu_gelu_erf_fwd_f32(int64_t n, const float *x, float *y);
void nnt_cpu_gelu_erf_bwd_f32(int64_t n, const float *x, const float *dy, float *dx);
/* GeGLU (Gemma's MLP): y = gelu(gate) * up with the GELU above (transformers'
 * gelu_pytorch_tanh); backward dgate = dy up gelu'(gate), dup = dy gelu(gate). Any output
 * may be an input (each element is read before it is written); dgate != dup.        set */
void nnt_cpu_geglu_fwd_f32(int64_t n, const float *gate, const float *up, float *y);
void nnt_cpu_geglu_bwd_f32(int64_t n, const float *gate, const float *up, const float *dy,
                           float *dgate, float *dup);
/* Soft-capping (Gemma 2's final logits), cap > 0: y = tanh(x / cap) cap; its gradient
 * dx = dy (1 - tanh(x / cap)^2). y may be x, dx may be dy.                          set */
void nnt_cpu_softcap_fwd_f32(int64_t n, float cap, const float *x, float *y);
void nnt_cpu_softcap_bwd_f32(int64_t n, float cap, const float *x, const float *dy, float *dx);

/* ---- copies between layouts -------------------------------------------------------- */

/* Copy an ndim-dimensional box of elements of elsize bytes:
 *   dst[sum_d i_d * dst_stride[d]] = src[sum_d i_d * src_stride[d]]  for 0 <= i_d < shape[d].
 * Strides in elements (may describe permutations, e.g. (B,T,NH,hd) -> (B,NH,T,hd)).
 * 1 <= ndim <= 8. The innermost dimension with unit strides on both sides is copied with
 * memcpy. Used for retiling and head transposes.                                          */
void nnt_cpu_copy_box(int ndim, const int64_t *shape, size_t elsize,
                      const void *src, const int64_t *src_stride,
                      void *dst, const int64_t *dst_stride);

/* ---- broadcast add and its reduction (bias, position embedding) ---------------------- */

/* y[o, i] += x[i]   for o < outer, i < inner; y is (outer, inner) with leading dim ldy.   */
void nnt_cpu_add_bcast_f32(int64_t outer, int64_t inner, const float *x, float *y, int64_t ldy);
/* acc[i] += sum_o y[o, i]  (column sums, accumulated in double per column)           += */
void nnt_cpu_sum_outer_f32(int64_t outer, int64_t inner, const float *y, int64_t ldy, float *acc);

/* ---- per-feature products (DoRA's magnitude; x, y, z contiguous (outer, inner)) ------- */

/* z[o, i] = x[o, i] (h[i] + c) [+ z[o, i] when accumulate]; by_row: h[o] instead; x may
 * be z                                                                                     */
void nnt_cpu_mul_bcast_f32(int64_t outer, int64_t inner, const float *x, const float *h,
                           float c, int by_row, int accumulate, float *z);
/* acc[i] += (h ? h[i] : 1) sum_o x[o, i] y[o, i]   (double per column)                  += */
void nnt_cpu_dot_cols_f32(int64_t outer, int64_t inner, const float *x, const float *y,
                          const float *h, float *acc);
/* acc[o] += sum_i x[o, i] y[o, i]   (double per row; bf16 inputs widened exactly)     += */
void nnt_cpu_dot_rows_f32(int64_t outer, int64_t inner, const float *x, const float *y,
                          float *acc);
void nnt_cpu_dot_rows_bf16(int64_t outer, int64_t inner, const uint16_t *x, const uint16_t *y,
                           float *acc);
/* out[i] = (m ? m[i] : 1) / sqrt(n2[i])   (in double)                                      */
void nnt_cpu_rsqrt_mul_f32(int64_t n, const float *m, const float *n2, float *out);

/* ---- GEMM ------------------------------------------------------------------------------ */

/* Call before the first GEMM (BLIS picks its kernels once, at its first use). BLIS 0.9.0
 * (Debian 12) picks its AVX-512 "skx" kernels only on Intel CPUs it knows to have two FMA
 * units: "haswell" elsewhere (e.g. an AVX-512 + AMX Xeon under KVM, "FMA units unknown":
 * 210-231 GFLOP/s at 2 threads where skx gives 300-365) and its portable "generic" kernels
 * on AMD models it does not know (about 29 GFLOP/s a core on a Zen 5 where skx reaches
 * about 150). When BLIS_ARCH_TYPE is not set, the BLIS is before 1.0 (1.0 has Zen 4 and
 * Zen 5 kernels of its own) and the CPU has the AVX-512 subsets skx uses (F, CD, DQ, BW,
 * VL; a feature test, any vendor), this sets BLIS_ARCH_TYPE to skx. The user's
 * BLIS_ARCH_TYPE always wins. Returns the name of the kernel set BLIS then uses
 * (bli_arch_string), static storage; nnt_cpu_blis_reason says why (static string). */
const char *nnt_cpu_blis_setup(void);
const char *nnt_cpu_blis_reason(void);

/* For each of batch matrices (pointers advanced by stride_a/b/c elements):
 *   C = alpha * op(A) * op(B) + beta * C,  op(X) = X or X^T (trans_x != 0), row-major,
 *   op(A) is (m, k), op(B) is (k, n), C is (m, n). CPU: BLIS's bli_sgemm_ex with its
 *   small-matrix path off (BLIS 0.9.0's sup kernels read past the end of A or C for some
 *   shapes, flame/blis#635); always one thread (each StarPU worker owns a core, so
 *   BLIS_NUM_THREADS / OMP_NUM_THREADS must not multiply the threads). One-row products
 *   (m == 1) by nnt_cpu_gemv_f32 where it runs and op(B) = B^T with a dense row, else by
 *   BLIS's gemv. beta == 0: C is not read.                                                 */
void nnt_cpu_gemm_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, int64_t stride_a,
                      const float *b, int64_t ldb, int64_t stride_b, float beta,
                      float *c, int64_t ldc, int64_t stride_c, int64_t batch);

/* The same products through oneDNN's matmul (cpu/gemm_dnnl.c; configure --with-onednn),
 * for a backend chosen at context start (nnt_cpu_gemm_choose). A cache holds one thread's
 * primitives (keyed by shape, strides, transposes, dtypes, alpha and beta), its stream and
 * its scratchpad: use each cache from one thread at a time. dtypes (NNT_DNNL_*, or 0 for
 * float operands and float products): NNT_DNNL_A_BF16 / _B_BF16, that operand holds bfloat16
 * bit patterns (uint16_t) instead of floats; NNT_DNNL_BF16, or either of those, makes the
 * products bf16: a float operand is then converted to bfloat16 (nnt_cpu_f32_to_bf16's
 * rounding) first. Sums in float, C float; same contract as nnt_cpu_gemm_f32 otherwise
 * (k == 0 or alpha == 0: C = beta C; beta == 0: C not read), one OpenMP thread. Returns 0,
 * or -1 when oneDNN cannot (not compiled in, no bf16 matmul on this CPU, strides it
 * refuses, no memory): C is then untouched and the caller computes the product otherwise. */
#ifndef NNT_DNNL_CACHE_TYPEDEF   /* once, though tests include this header twice */
#define NNT_DNNL_CACHE_TYPEDEF
typedef struct nnt_dnnl_cache nnt_dnnl_cache;
#endif
/* The CPU GEMM backend, chosen at context start (after nnt_cpu_blis_setup, before workers
 * run): NNT_GEMM=blis|onednn in the environment forces one, NNT_GEMM=measure takes the
 * faster on a few GPT-2 tile products timed on one core (once a process, a few ms);
 * otherwise, by feature test, oneDNN when compiled in and its instruction set has AVX2 or
 * AVX-512, else BLIS. Returns 0 with the reason in why, or -1 with the error in why (another
 * NNT_GEMM, or onednn / measure without a usable oneDNN). */
#define NNT_GEMM_BLIS 0
#define NNT_GEMM_ONEDNN 1
int nnt_cpu_gemm_choose(char *why, size_t len);
int nnt_cpu_gemm_backend(void);          /* NNT_GEMM_*                                     */
int nnt_cpu_dnnl_available(void);        /* compiled in and its CPU engine works           */
int nnt_cpu_dnnl_bf16_isa(void);         /* bf16 dot products in hardware (AVX512-BF16/AMX) */
/* Whether products with bf16 operands take oneDNN's bf16 matmul (the hardware has it and the
 * choice below kept it) rather than float products on the operands expanded to floats (exact;
 * the same values, sums in float either way). nnt_cpu_gemm_choose_bf16 chooses at a
 * context's start, when oneDNN is the backend and the hardware has bf16 dot products:
 * NNT_GEMM_BF16=direct|expanded in the environment forces one; otherwise direct unless
 * oneDNN's bf16 products take more than 1.25 times its float products' time on the probe
 * shapes of NNT_GEMM=measure, timed on one core (once a process; an Intel Xeon without AMX
 * ran bf16 at half the float rate, AMD Zen 4 at twice it). Returns 0 with the reason in why
 * ("" when there was nothing to choose), or -1 with the error (another value; direct where
 * it cannot be). nnt_cpu_dnnl_bf16_use: records the choice (nnt_cpu_gemm_choose_bf16). */
int nnt_cpu_dnnl_bf16_native(void);
int nnt_cpu_gemm_choose_bf16(char *why, size_t len);
void nnt_cpu_dnnl_bf16_use(int direct);
const char *nnt_cpu_dnnl_isa(void);      /* oneDNN's instruction set here, static string   */
/* What products do with B tiles whose blocked layout their matmul prefers: chosen by
 * nnt_cpu_dnnl_choose_b (a context's start, before its workers run). NNT_DNNL_B_MEASURED on
 * oneDNN's avx512_core_bf16 kernels (whose matmul gives the same bits on B as stored): each
 * shape's first unpacked products (float or bf16) run both ways, timed, and the shape keeps
 * the faster (cpu/gemm_dnnl.c, b_layout); NNT_DNNL_B_REORDER elsewhere, or with the
 * environment's NNT_GEMM_BF16_B=reorder: always reordered; NNT_DNNL_B_STORED with
 * NNT_GEMM_BF16_B=stored where bf16 is native: bf16 products on B tiles larger than a core's
 * L2 cache as stored (never packed), the others reordered; -1 with why filled for another
 * value. nnt_cpu_dnnl_bf16_b_stored: the L2 size in bytes above which a bf16 product's B may
 * be read as stored whatever its measurement (packs of smaller B tiles are always made), 0:
 * never. nnt_cpu_dnnl_b_verdict (tests, benchmarks): the way a shape (of bf16 products or
 * float ones) kept, 1 as stored, 0 reordered, -1 not measured (yet).
 * nnt_cpu_dnnl_b_forget (tests; while no product runs):
 * forget every shape's measurement, and, when trial_time is not NULL, replace each trial
 * run's measured seconds by trial_time(stored, measured). */
#define NNT_DNNL_B_REORDER 0
#define NNT_DNNL_B_STORED 1
#define NNT_DNNL_B_MEASURED 2
int nnt_cpu_dnnl_choose_b(char *why, size_t len);
int nnt_cpu_dnnl_b_mode(void);
size_t nnt_cpu_dnnl_bf16_b_stored(void);
int nnt_cpu_dnnl_b_verdict(int trans_b, int bf16, int64_t m, int64_t n, int64_t k);
void nnt_cpu_dnnl_b_forget(double (*trial_time)(int stored, double measured));
/* Tests: matmuls made to take B as stored where they would want it blocked (the rule above). */
unsigned long nnt_cpu_dnnl_stored_matmuls(void);
nnt_dnnl_cache *nnt_cpu_dnnl_cache_create(void);   /* NULL when unavailable or no memory */
void nnt_cpu_dnnl_cache_destroy(nnt_dnnl_cache *cache);
/* Tests: the primitives a cache has made (its lookups that missed), and how many it keeps
 * (the least recently used one is replaced when a new one is needed then). */
unsigned long nnt_cpu_dnnl_cache_builds(const nnt_dnnl_cache *cache);
int nnt_cpu_dnnl_cache_slots(void);
/* B goes through a reorder into the layout the matmul prefers when that layout is blocked
 * (AVX-512 hosts); a preferred plain layout is ignored (B used as stored) unless tests turn
 * this on (then the reorder path runs on any host, and nnt_cpu_dnnl_pack_bytes accepts a
 * plain layout too, so packing B runs there as well). Affects primitives created after it. */
void nnt_cpu_dnnl_reorder_plain(int on);
/* Tests: fn(arg) runs once, in the next matmul built, between its descriptor and its
 * primitive (where another thread may put an equal key's primitive in oneDNN's cache).
 * Not thread-safe: set it while no product runs. */
void nnt_cpu_dnnl_between(void (*fn)(void *), void *arg);
/* How many products oneDNN has computed in this process (every thread), for tests: that the
 * backend really ran (its summation order need not differ from BLIS's: on AVX-512 both
 * accumulate each element in k order, giving the same bits). */
unsigned long nnt_cpu_dnnl_products(void);
#define NNT_DNNL_A_BF16 1    /* A holds bfloat16 bit patterns                             */
#define NNT_DNNL_B_BF16 2    /* B holds bfloat16 bit patterns                             */
#define NNT_DNNL_BF16 4      /* bf16 products: float operands rounded to bf16 first        */
int nnt_cpu_gemm_dnnl(nnt_dnnl_cache *cache, int trans_a, int trans_b, int dtypes,
                      int64_t m, int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                      int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                      float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch);

/* B packed once for several products (a weight tile, or any B tile that several row tiles
 * of C multiply): B (k, n) in the blocked layout oneDNN's matmul of m rows wants, in the
 * products' dtype (bf16 when dtypes has NNT_DNNL_BF16, else float), so that each product
 * skips its own reorder of B (on AVX-512 hosts 20-30 % of a 128-row bf16 product).
 * nnt_cpu_dnnl_pack_bytes: the packed size, 0 when the matmul takes B as stored (then there
 * is nothing to gain; for bf16 products, also where B's layout is measured and the shape
 * (trans_b, m, n, k) has no verdict yet, or kept B as stored) or oneDNN cannot (not
 * compiled in; bf16 without bf16 dot products).
 * nnt_cpu_dnnl_pack: B dense as stored (op(B) = B^T when trans_b; bf16 bit patterns when
 * dtypes has NNT_DNNL_B_BF16) into `packed` (pack_bytes bytes), rounded as the unpacked
 * products round it: a float B of bf16 products by nnt_cpu_f32_to_bf16, a float B of float
 * products to `bits` mantissa bits (nnt_cpu_round_f32; 0 = as it is); a bf16 B of float
 * products expanded (exact). nnt_cpu_gemm_dnnl_packed: C (m, n) = alpha op(A) B + beta C
 * with that packed B (m_packed: the m it was packed for; any m works, the same bits as
 * nnt_cpu_gemm_dnnl on the unpacked B), one matrix, dtypes as nnt_cpu_gemm_dnnl's for A and
 * the products. Both return 0, or -1 when oneDNN fails (no memory): the caller reports it,
 * as a packed B has no other reader. nnt_cpu_dnnl_pack_counts (tests): packs made, products
 * on a packed B, and of those the ones that had to reorder it again (the matmul of their m
 * wanted another layout: correct, only slower). */
size_t nnt_cpu_dnnl_pack_bytes(int trans_b, int dtypes, int64_t m, int64_t n, int64_t k);
int nnt_cpu_dnnl_pack(nnt_dnnl_cache *cache, int trans_b, int dtypes, int bits, int64_t m,
                      int64_t n, int64_t k, const void *b, void *packed);
int nnt_cpu_gemm_dnnl_packed(nnt_dnnl_cache *cache, int trans_a, int dtypes, int64_t m,
                             int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                             const void *packed, int64_t m_packed, float beta, float *c,
                             int64_t ldc);
void nnt_cpu_dnnl_pack_counts(unsigned long *packs, unsigned long *packed_products,
                              unsigned long *reordered);

/* One bf16 product summed over nk k tiles in one matmul: C (m, n) = alpha sum_i op(A_i)
 * op(B_i) + beta C, where tile i of A is (m, k[i]) row-major, or (k[i], m) when trans_a, and
 * tile i of B (k[i], n), or (n, k[i]) when trans_b; dtypes: NNT_DNNL_A_BF16 / _B_BF16 when
 * the tiles hold bf16 (else floats, rounded by nnt_cpu_f32_to_bf16). The tiles are joined
 * along k into the cache's own buffer, so C is read and written once instead of once per
 * k tile (a weight gradient summed over row tiles, 2 bytes of operands per 8 of C each).
 * Returns 0, or -1 when oneDNN cannot (no bf16 matmul here, no memory): C untouched.
 * nnt_cpu_dnnl_ksum_products (tests): how many such products were computed.              */
unsigned long nnt_cpu_dnnl_ksum_products(void);
int nnt_cpu_gemm_dnnl_ksum(nnt_dnnl_cache *cache, int trans_a, int trans_b, int dtypes,
                           int64_t m, int64_t n, int nk, const int64_t *k, float alpha,
                           const void *const *a, const void *const *b, float beta, float *c,
                           int64_t ldc);

/* One row with bfloat16-valued operands (cpu/gemv.c): y (n) = alpha x op(B) + beta y, x (k)
 * dense floats holding bf16 values; trans_b: B (n, k), y[j] = alpha sum_i x[i] B[j, i] +
 * beta y[j]; else B (k, n), y[j] = alpha sum_i x[i] B[i, j] + beta y[j]; leading dim ldb.
 * b_bf16: B holds bf16 bit patterns (uint16_t), read as they are; else floats, which must
 * hold bf16 values for the products to be exact. Sums in float in one fixed order: the
 * AVX2 and portable paths, and a bf16 B and a float B of the same values, give the same
 * bits. beta == 0: y not read. For the decode steps of generation under bf16 precision. */
void nnt_cpu_gemv_bf16(int trans_b, int b_bf16, int64_t n, int64_t k, float alpha,
                       const float *x, const void *b, int64_t ldb, float beta, float *y);
/* The same walk in float where the AVX2 path runs: y (n) = alpha B x + beta y, B (n, k) with
 * leading dim ldb, x dense (k), each row of B read as one sequential stream (22-30 GB/s a
 * core on AMD Zen 4 where BLIS's gemv streams 17-19). Returns 0, or -1 (nothing done) on
 * the portable path. beta == 0: y not read. */
int nnt_cpu_gemv_f32(int64_t n, int64_t k, float alpha, const float *x, const float *b,
                     int64_t ldb, float beta, float *y);

/* The product of nnt_cpu_gemm_f32 through oneDNN on the cache dnnl when dnnl is not NULL (the
 * caller passes one when oneDNN is the backend), else, or where oneDNN declines, through
 * BLIS; one-row products (m == 1: generation's decode steps) always as nnt_cpu_gemm_f32
 * does them (a row walk or BLIS's gemv), which streams B once (GPT-2 124M generation,
 * bench_generate, prompt 64, 128 new tokens, 2 workers, Zen 3: 29.2/30.3/33.0 tokens/s with
 * BLIS's gemv against 27.5/28.3/29.4 with oneDNN, in 3 interleaved pairs). */
void nnt_cpu_product_f32(nnt_dnnl_cache *dnnl, int trans_a, int trans_b, int64_t m, int64_t n,
                         int64_t k, float alpha, const float *a, int64_t lda, int64_t stride_a,
                         const float *b, int64_t ldb, int64_t stride_b, float beta, float *c,
                         int64_t ldc, int64_t stride_c, int64_t batch);

/* Precision of GEMM operands: y[i] = x[i] rounded to nearest, ties to even, to `bits`
 * explicit mantissa bits (1..22), exponent range unchanged: bits = 7 gives the values of
 * bfloat16, bits = 10 those of TF32. Infinities and zeros are kept, NaN stays NaN (made
 * quiet), finite values past the largest representable one round to infinity. y may be x.
 * The GEMM codelet rounds A and B with it (nnt_ctx_set_precision): every product of two
 * rounded operands is then exact in float, so a float GEMM on them computes what bf16 /
 * TF32 tensor cores compute, up to the order of the float accumulation.                  */
void nnt_cpu_round_f32(int64_t n, int bits, const float *x, float *y);
/* bfloat16 values as uint16_t bit patterns (the upper half of a float's bits):
 * f32_to_bf16 rounds as nnt_cpu_round_f32 with 7 bits; bf16_to_f32 is exact.            */
void nnt_cpu_f32_to_bf16(int64_t n, const float *x, uint16_t *y);

void nnt_cpu_bf16_to_f32(int64_t n, const uint16_t *x, float *y);
/* ---- NF4 (4-bit NormalFloat, bitsandbytes' "nf4", blocks of 64) -------------------------- */
#define NNT_NF4_BLOCK 64
/* An NF4 tile of n values: n / 2 bytes of codes (two 4-bit indices a byte), then
 * n / NNT_NF4_BLOCK float absmax; nf4_absmax gives where they start, nf4_values n from the
 * tile's bytes. */
#ifndef NNT_CPU_NF4_LAYOUT_DEFINED   /* once, though tests include this header twice */
#define NNT_CPU_NF4_LAYOUT_DEFINED
static inline float *nnt_cpu_nf4_absmax(const uint8_t *codes, int64_t n)
{
    return (float *)(void *)(uintptr_t)(codes + n / 2);
}
static inline int64_t nnt_cpu_nf4_values(int64_t bytes)
{
    return bytes * 2 * NNT_NF4_BLOCK / (NNT_NF4_BLOCK + 8);   /* bytes = n / 2 + 4 n / 64 */
}
#endif
/* The 16 values of the NF4 table, in [-1, 1], as bitsandbytes stores them (float).        */
const float *nnt_cpu_nf4_table(void);
/* n (a multiple of NNT_NF4_BLOCK) values x (floats, or bf16 bit patterns when x_bf16) into
 * n / 2 bytes of codes (two 4-bit indices a byte, the first in the high half) and
 * n / NNT_NF4_BLOCK absmax: bitsandbytes' quantize_4bit (CPU) bit for bit: a block's
 * absmax = max |x|, each x times 1 / max(absmax, 1e-38) clamped to [-1, 1], the index of
 * the nearest table value (a tie to the lower one).                                        */
void nnt_cpu_nf4_quantize(int64_t n, const void *x, int x_bf16, uint8_t *codes, float *absmax);
/* y = table[code] * absmax of its block in float, stored as floats or (y_bf16) rounded to
 * bf16 as nnt_cpu_f32_to_bf16 rounds: bitsandbytes' dequantize_4bit bit for bit.          */
void nnt_cpu_nf4_dequantize(int64_t n, const uint8_t *codes, const float *absmax, void *y,
                            int y_bf16);
/* acc[o] += sum_i w[o, i]^2, w the float dequantization of the NF4 rows (outer, inner)
 * (codes and absmax of their outer * inner elements, a multiple of NNT_NF4_BLOCK), the
 * squares summed in double                                                             += */
void nnt_cpu_nf4_sumsq_rows(int64_t outer, int64_t inner, const uint8_t *codes,
                            const float *absmax, float *acc);
/* Products with an NF4 B, a few rows at a time (generation's decode steps; cpu/nf4.c):
 * y (m, n) = alpha x (m, k) B^T + beta y, x's rows dense, y's rows n apart, B an NNT_NF4
 * tile of (n, k) values (n k / 2 bytes of codes, then n k / 64 absmax). B is dequantized a
 * group of rows at a time into buf (nnt_cpu_nf4_rows_scratch(m, k) bytes) and each row of x
 * multiplied as a one-row product on the dequantized B would be: bits 7 (bf16 products, x
 * holding bf16 values) by nnt_cpu_gemv_bf16 on B rounded to bf16; else by nnt_cpu_gemm_f32
 * on B's floats rounded to `bits` mantissa bits (0: as they are). So one row gives the bits
 * of the product on nnt_cpu_nf4_dequantize's B, read at 4.5 bits a value (but for float
 * products without AVX2, which BLIS's gemv computes a group of rows at a time). Where k is
 * a multiple of 64 (whole blocks a row) the values are decoded in registers, never stored:
 * with AVX-512 for bits 0 (the same sums), and for bits 7 with AVX512-BF16 by its bf16 dot
 * products (x's and B's bf16 values, two products a lane added in float: the same products
 * summed in another order) or else AVX-512 (the same sums). beta == 0: y not read.       */
size_t nnt_cpu_nf4_rows_scratch(int64_t m, int64_t k);
void nnt_cpu_nf4_rows(int64_t m, int64_t n, int64_t k, float alpha, const float *x,
                      const uint8_t *b, int bits, float beta, float *y, void *buf);
/* How many of x's n floats bf16 cannot hold exactly (low 16 bits not all zero).          */
int64_t nnt_cpu_bf16_inexact_f32(int64_t n, const float *x);
/* One bfloat16 bit pattern as a float (exact). */
#ifndef NNT_CPU_BF16_VALUE_DEFINED   /* once, though tests include this header twice */
#define NNT_CPU_BF16_VALUE_DEFINED
static inline float nnt_cpu_bf16_value(uint16_t h)
{
    union {
        uint32_t u;
        float f;
    } v = {(uint32_t)h << 16};
    return v.f;
}
#endif

/* Epilogue after the last k-step of a linear layer, applied to a hot (m, n) tile:
 *   pre[r, j] += bias[j] (bias may be NULL: skip), then out[r, j] = gelu(pre[r, j]).
 * pre is kept for backward. pre and out have leading dim n.                                */
void nnt_cpu_bias_gelu_f32(int64_t m, int64_t n, const float *bias, float *pre, float *out);
/* The same with the exact GELU (nnt_cpu_gelu_erf_fwd_f32)                                   */
void nnt_cpu_bias_gelu_erf_f32(int64_t m, int64_t n, const float *bias, float *pre, float *out);

/* ---- LayerNorm over the last dimension (whole rows) -------------------------------------- */

/* y = (x - mean) * rstd * gamma + beta, per row of n; mean, rstd (rows) set.
 * rstd = 1 / sqrt(var + eps), var the biased variance; statistics in double.               */
void nnt_cpu_layernorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *x,
                               const float *gamma, const float *beta, float *y,
                               float *mean, float *rstd);
/* dx set; dgamma, dbeta (n) +=.                                                              */
void nnt_cpu_layernorm_bwd_f32(int64_t rows, int64_t n, const float *x, const float *dy,
                               const float *gamma, const float *mean, const float *rstd,
                               float *dx, float *dgamma, float *dbeta);

/* ---- RMSNorm over the last dimension (whole rows) ------------------------------------------ */

/* y = x * rstd * gamma, per row of n; rstd (rows) set, rstd = 1 / sqrt(mean(x^2) + eps),
 * the mean square in double.                                                                 */
void nnt_cpu_rmsnorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *x,
                             const float *gamma, float *y, float *rstd);
/* xhat = x rstd, g = dy gamma: dx = rstd (g - xhat mean_j(g xhat)) set (row mean in double);
 * dgamma (n) += sum over rows of dy xhat.                                                    */
void nnt_cpu_rmsnorm_bwd_f32(int64_t rows, int64_t n, const float *x, const float *dy,
                             const float *gamma, const float *rstd, float *dx, float *dgamma);

/* ---- mixture of experts (cpu/moe.c) ----
 * Routing of n tokens over E <= NNT_MOE_MAX_EXPERTS experts: probs (n, E) = softmax(logits)
 * (the sum in double), idx (n, k) = torch.topk(probs, k).indices as torch selects on CPU
 * (ties included), w (n, k) = the selected probabilities, divided by their sum if norm. */
#define NNT_MOE_MAX_EXPERTS 1024
void nnt_cpu_moe_route_f32(int64_t n, int64_t E, int64_t k, int norm, const float *logits,
                           float *probs, int32_t *idx, float *w);
/* dlogits (n, E) from dw (n, k) through the (renormalised) top-k and the softmax, plus
 * aux (E, may be NULL): a gradient on every probability (the load-balancing loss's). */
void nnt_cpu_moe_route_bwd_f32(int64_t n, int64_t E, int64_t k, int norm, const float *probs,
                               const int32_t *idx, const float *w, const float *dw,
                               const float *aux, float *dlogits);
/* Row maps: m triples (a, b, slot) of rows of width floats. gather: dst[b] = src[a], times
 * w[a k + slot] when w is given (w's rows are src's). scatter_add: dst[b] += src[a], times
 * w[b k + slot] when given (w's rows are dst's). weight_grad: dw[a k + slot] += dy[a] . y[b]
 * (the sum in double). */
void nnt_cpu_moe_gather_f32(int64_t width, int64_t m, const int32_t *map, const float *src,
                            const float *w, int64_t k, float *dst);
void nnt_cpu_moe_scatter_add_f32(int64_t width, int64_t m, const int32_t *map,
                                 const float *src, const float *w, int64_t k, float *dst);
void nnt_cpu_moe_weight_grad_f32(int64_t width, int64_t m, const int32_t *map,
                                 const float *dy, const float *y, int64_t k, float *dw);
/* The shared expert's gate over n rows of width channels: y[r] += sigmoid(z[r]) s[r]; and
 * its gradient, ds[r] = sigmoid(z[r]) dy[r], dz[r] (+)= sigmoid'(z[r]) sum_c dy[r] s[r] (the
 * sum in double; accumulate: added to dz, a later channel tile's). */
void nnt_cpu_moe_shared_add_f32(int64_t n, int64_t width, const float *z, const float *s,
                                float *y);
void nnt_cpu_moe_shared_bwd_f32(int64_t n, int64_t width, int accumulate, const float *z,
                                const float *s, const float *dy, float *ds, float *dz);

/* ---- SwiGLU, n contiguous elements ----------------------------------------------------------- */

/* y = silu(gate) * up, silu(g) = g / (1 + exp(-g))                                      y set */
void nnt_cpu_swiglu_fwd_f32(int64_t n, const float *gate, const float *up, float *y);
/* s = sigmoid(g): dgate = dy up s (1 + g (1 - s)), dup = dy silu(g)           dgate, dup set */
void nnt_cpu_swiglu_bwd_f32(int64_t n, const float *gate, const float *up, const float *dy,
                            float *dgate, float *dup);
/* gpt-oss's clamped SwiGLU (alpha > 0, limit > 0): gc = min(gate, limit), uc = clamp(up,
 * -limit, limit), y = gc sigmoid(alpha gc) (uc + 1) (in float, that order; NaN stays NaN).
 * Aliasing as the SwiGLU kernels.                                                      y set */
void nnt_cpu_swiglu_clamp_fwd_f32(int64_t n, float alpha, float limit, const float *gate,
                                  const float *up, float *y);
/* a = alpha gc, s = sigmoid(a): dgate = dy (uc + 1) s (1 + a (1 - s)) where gate < limit,
 * dup = dy gc s where -limit < up < limit, 0 elsewhere (torch.clamp's gradient: none at
 * the limits themselves)                                                     dgate, dup set */
void nnt_cpu_swiglu_clamp_bwd_f32(int64_t n, float alpha, float limit, const float *gate,
                                  const float *up, const float *dy, float *dgate, float *dup);

/* ---- rotary position embedding, rotate-half pairs (Hugging Face convention) ------------------
 * nbh slabs of nt rows; row r = s * nt + t has position pos0 + t. Pair i < n of row r is
 * (x_lo[r * ldx + i], x_hi[r * ldx + i]); a = pos * inv_freq[i] and its cosine and sine are
 * computed in double, then rounded to float and multiplied by scale in float (c, s; s
 * negated when sign < 0):
 *   y_lo = x_lo c - x_hi s,  y_hi = x_hi c + x_lo s     (float, each operation rounded)
 * sign > 0 rotates by +a (forward), sign < 0 by -a (the inverse: the backward pass; with
 * scale, its transpose). For a whole head vector of hd: n = hd / 2, x_hi = x_lo + hd / 2,
 * ldx = hd; for its first r entries only (partial rotary): n = r / 2, x_hi = x_lo + r / 2,
 * ldx = hd. inv_freq (n) is a host array. y_lo may be x_lo and y_hi x_hi (in place).  set */
void nnt_cpu_rope_f32(int64_t nbh, int64_t nt, int64_t n, int64_t pos0, int sign, float scale,
                      const float *inv_freq, const float *x_lo, const float *x_hi, int64_t ldx,
                      float *y_lo, float *y_hi, int64_t ldy);
/* nnt_cpu_rope_f32 on nb batch rows of nh slabs of nt rows each, row (b, h, t) at position
 * pos[b * nt + t] (per-token positions: packed examples restart at 0).                 set */
void nnt_cpu_rope_pos_f32(int64_t nb, int64_t nh, int64_t nt, int64_t n, const int32_t *pos,
                          int sign, float scale, const float *inv_freq, const float *x_lo,
                          const float *x_hi, int64_t ldx, float *y_lo, float *y_hi,
                          int64_t ldy);

/* ---- causal attention, flash style -----------------------------------------------------------
 * nbh independent (batch, head) slabs. q, o: (nbh, tq, hd); k, v: (nbh, tk, hd) contiguous.
 * q_pos0 / k_pos0: absolute sequence position of row 0 of the query / key block.
 * Causal mask: key position > query position is masked out. scale usually 1/sqrt(hd).
 * Per query row we keep m (running max of scaled scores), l (running sum of exp(s - m)) and
 * an unnormalised accumulator o_acc. Before the first key block the caller sets m = -INFINITY,
 * l = 0, o_acc = 0. Rows with every key masked so far keep m = -inf, l = 0.                 */
void nnt_cpu_attn_fwd_block_f32(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                int64_t q_pos0, int64_t k_pos0, float scale,
                                const float *q, const float *k, const float *v,
                                float *o_acc, float *m, float *l);
/* Grouped-query attention without copies: which q slabs a block call covers and which kv
 * slab each one reads. Slab (b, h), b < nb, h < nh, is q-side slab b * q_hs + q_h0 + h of
 * q, o, m, l (and dout, lse, d, dq) and reads kv-side slab b * kv_hs + (gofs + h) / group
 * of k, v (and dk, dv): q_hs and kv_hs are the heads per batch row of the q-side and kv-side
 * blocks, group = NH / NKV q heads per kv head, gofs = (global q head of h = 0) - group *
 * (global kv head of the kv block's first head). The _gqa kernels process the slabs in
 * order (b, then h); multi-head attention over nbh slabs is {nbh, 1, 1, 0, 1, 1, 0}, which
 * the _block kernels use. Shared with cuda/nnt_cuda.h.                                    */
#ifndef NNT_ATTN_MAP_DEFINED
#define NNT_ATTN_MAP_DEFINED
typedef struct nnt_attn_map {
    int64_t nb, nh;       /* batch rows and q heads covered                               */
    int64_t q_hs, q_h0;   /* heads per batch row of the q-side block; first head covered  */
    int64_t kv_hs;        /* heads per batch row of the kv-side block                     */
    int64_t group, gofs;  /* q heads per kv head; q head offset of h = 0 (see above)      */
    int64_t bf16;         /* CPU: the kernels' products with bf16 operands and float sums
                             (scores, p v and the backward's five) on oneDNN's bf16 dot
                             products; 0 (the initializers' default): float operands      */
} nnt_attn_map;
#endif
/* nnt_cpu_attn_fwd_block_f32 on the slabs of map (q, o_acc, m, l q-side; k, v kv-side), its
 * products through nnt_cpu_product_f32 on dnnl (NULL: BLIS). */
void nnt_cpu_attn_fwd_gqa_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *map, int64_t tq,
                              int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                              float scale, const float *q, const float *k, const float *v,
                              float *o_acc, float *m, float *l);
/* o = o_acc / l (in place), lse = m + log(l)  (rows with l == 0: o = 0, lse = -inf)          */
void nnt_cpu_attn_fwd_finalize_f32(int64_t nbh, int64_t tq, int64_t hd, float *o,
                                   const float *m, const float *l, float *lse);
/* Attention sinks (gpt-oss): a tile of nb x nh slabs (b, h) of tq rows, head h's sink logit
 * sinks[h] added to each row's softmax denominator: lse' = log(exp(lse) + exp(sinks[h])),
 * o *= exp(lse - lse') (in place).                                                         */
void nnt_cpu_attn_sink_fwd_f32(int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                               const float *sinks, float *o, float *lse);
/* dsinks[h] -= sum over head h's rows of exp(sinks[h] - lse) (dout . o), o, lse the
 * forward's outputs (with the sink)                                                      += */
void nnt_cpu_attn_sink_bwd_f32(int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                               const float *sinks, const float *o, const float *dout,
                               const float *lse, float *dsinks);
/* d[r] = sum_j dout[r, j] * o[r, j]  per row of (nbh*tq) rows                         set */
void nnt_cpu_attn_bwd_prep_f32(int64_t nbh, int64_t tq, int64_t hd, const float *o,
                               const float *dout, float *d);
/* Recompute p = exp(scale * q k^T - lse) for one (query block, key block) and accumulate
 *   dv += p^T dout;  ds = p * (dout v^T - d);  dq += scale * ds k;  dk += scale * ds^T q.
 * dq (nbh,tq,hd), dk, dv (nbh,tk,hd)                                                      += */
void nnt_cpu_attn_bwd_block_f32(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                int64_t q_pos0, int64_t k_pos0, float scale,
                                const float *q, const float *k, const float *v,
                                const float *dout, const float *lse, const float *d,
                                float *dq, float *dk, float *dv);
/* nnt_cpu_attn_bwd_block_f32 on the slabs of map; q heads sharing a kv slab add into its
 * dk, dv in increasing h; products as in nnt_cpu_attn_fwd_gqa_f32.                      += */
void nnt_cpu_attn_bwd_gqa_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *map, int64_t tq,
                              int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                              float scale, const float *q, const float *k, const float *v,
                              const float *dout, const float *lse, const float *d, float *dq,
                              float *dk, float *dv);

/* The _gqa kernels with a sliding window: query position qp sees the keys kp with
 * qp - window < kp <= qp (Hugging Face's sliding-window mask); window 0: plain causal (the
 * _gqa kernels, bit for bit). Rows and keys outside every row's window cost nothing.
 * cap > 0: every score s = scale q.k is soft-capped first, cap tanh(s / cap) (Gemma 2's
 * attn_logit_softcapping; the backward multiplies ds by 1 - tanh^2); cap 0: none.        */
void nnt_cpu_attn_fwd_window_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *map, int64_t tq,
                                 int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                 int64_t window, float scale, float cap, const float *q,
                                 const float *k, const float *v, float *o_acc, float *m, float *l);
void nnt_cpu_attn_bwd_window_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *map, int64_t tq,
                                 int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                 int64_t window, float scale, float cap, const float *q,
                                 const float *k, const float *v, const float *dout, const float *lse,
                                 const float *d, float *dq, float *dk, float *dv);
/* The _window kernels with per-token positions of the queries: qpos (map->nb, tq), row b of
 * the batch rows the map covers (NULL: the _window kernels). The query at sequence index qp
 * with position p = qpos[b][qp - q_pos0] (clamped to [0, qp]) sees the keys of its example
 * only, qp - p <= kp <= qp (and those of the window): packed examples whose positions
 * restart at 0, Hugging Face's mask for packed position_ids. Rows and keys no query sees
 * are skipped as the window's are.                                                       */
void nnt_cpu_attn_fwd_packed_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *map, int64_t tq,
                                 int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                 int64_t window, const int32_t *qpos, float scale, float cap,
                                 const float *q, const float *k, const float *v, float *o_acc,
                                 float *m, float *l);
void nnt_cpu_attn_bwd_packed_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *map, int64_t tq,
                                 int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                                 int64_t window, const int32_t *qpos, float scale, float cap,
                                 const float *q, const float *k, const float *v,
                                 const float *dout, const float *lse, const float *d,
                                 float *dq, float *dk, float *dv);

/* ---- a query tile over its band of key tiles (the op's band tasks) ---------------------------
 * The _packed kernels of one query tile (map; tq rows at q_pos0) against n key tiles whose
 * positions follow one another, tile j of tk[j] rows at k_pos0[j] (k[j], v[j]; backward dk[j],
 * dv[j]), run by run of the q heads that read one kv slab, the run's q and o (dout, dq) in
 * cache for all of them. Where the band products run (nnt_cpu_band_level, or for bf16
 * products nnt_cpu_band16_level) and n <= 8, a run's key tiles are one block of keys to the
 * kernels (one softmax a row over them; the float products sum each tile's keys apart); else
 * one call a key tile, the block kernels' calls in turn. The map covers every slab of the
 * q-side tiles (and, where start[j], of the kv-side ones). Forward: o and lse written (o the
 * softmax average, as after _finalize), the running m, l in scratch. Backward: d = rowsum(dout
 * o) in scratch from o, dq written, dk[j] and dv[j] added to, or written where start[j] (zeroed
 * before their first sums). Returns 0, or -1 without scratch memory (nothing written).      */
#ifndef NNT_ATTN_KEYS_DEFINED
#define NNT_ATTN_KEYS_DEFINED
typedef struct nnt_attn_keys {
    int n;
    const int64_t *tk, *k_pos0;
    const float *const *k, *const *v;
    float *const *dk, *const *dv;   /* backward */
    const int *start;               /* backward */
} nnt_attn_keys;
#endif
int nnt_cpu_attn_fwd_band_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *map, int64_t tq,
                              int64_t hd, int64_t q_pos0, int64_t window, const int32_t *qpos,
                              float scale, float cap, const nnt_attn_keys *keys, const float *q,
                              float *o, float *lse);
int nnt_cpu_attn_bwd_band_f32(nnt_dnnl_cache *dnnl, const nnt_attn_map *map, int64_t tq,
                              int64_t hd, int64_t q_pos0, int64_t window, const int32_t *qpos,
                              float scale, float cap, const nnt_attn_keys *keys, const float *q,
                              const float *o, const float *dout, const float *lse, float *dq);

/* ---- scratch (cpu/scratch.c) ----------------------------------------------------------------
 * A buffer of at least `bytes` for the calling thread's slot, kept between calls (the same
 * buffer until a call asks for more) and freed when the thread exits; NULL when out of memory.
 * Callers own a slot for the length of one call and free nothing. */
#define NNT_CPU_SCRATCH_SLOTS 8
void *nnt_cpu_scratch(int slot, size_t bytes);

/* ---- band products (cpu/attn_band.c) -------------------------------------------------------
 * The float products of the attention kernels above, over a band: row r of a score block sees
 * the keys [lo[r], hi[r]) (none when hi[r] <= lo[r]), and rows are taken in groups (8 with
 * AVX-512F, 6 with AVX2) that compute only the keys from the group's smallest lo to its
 * largest hi. Sums over the inner dimension in increasing order, one fused multiply-add a
 * step, on every path (nnt_cpu_band_level; the portable path sums each row's own keys, the
 * same bits where the zeros below hold).
 *   abt: c[r][j] = alpha sum_d a[r][d] bt[d][j] for j in its group's keys, and from the
 *        first of them down to a whole vector (a multiple of 16 or 8 columns: aligned loads
 *        of bt where bt is aligned) (c elsewhere not written; the caller's softmax reads
 *        [lo[r], hi[r]) and clears the rest);
 *   ab:  c[r][0..hd) += alpha sum_j p[r][j] b[j][..] over its group's keys, p zero outside
 *        [lo[r], hi[r]) there;
 *   atb: c[j][0..hd) += alpha sum_r p[r][j] a[r][..] over the rows from the first to the last
 *        that sees key j's group of keys, for the keys j < nk some row sees, p zero outside
 *        [lo[r], hi[r]) on those rows.
 * transpose: xt[d * ldt + j] = x[j * hd + d] for j < n (the bt of abt), 32-bit words: floats, or
 *        the bf16 pairs of the bf16 band products below. */
/* 2 AVX-512F, 1 AVX2 + FMA, 0 portable (callers: GEMMs; also with NNT_ATTN_BAND=0 in the
 * environment, read at the first call: the GEMMs side by side, for benchmarks) */
int nnt_cpu_band_level(void);
int nnt_cpu_band_force(int level);  /* tests: at most that level (-1: the CPU's); the level    */
void nnt_cpu_band_transpose(int64_t n, int64_t hd, const void *x, void *xt, int64_t ldt);
void nnt_cpu_band_abt(int64_t m, int64_t hd, float alpha, const float *a, int64_t lda,
                      const float *bt, int64_t ldbt, const int64_t *lo, const int64_t *hi,
                      float *c, int64_t ldc);
void nnt_cpu_band_ab(int64_t m, int64_t hd, float alpha, const float *p, int64_t ldp,
                     const float *b, int64_t ldb, const int64_t *lo, const int64_t *hi,
                     float *c, int64_t ldc);
void nnt_cpu_band_atb(int64_t m, int64_t nk, int64_t hd, float alpha, const float *p,
                      int64_t ldp, const float *a, int64_t lda, const int64_t *lo,
                      const int64_t *hi, float *c, int64_t ldc);

/* ---- bf16 band products (cpu/attn_band16.c) -------------------------------------------------
 * The band products above with bf16 operands and float sums (NNT_PRECISION_BF16's products),
 * on AVX512-BF16's pairwise dot products: every operand comes as 32-bit words holding a pair of
 * bf16 values along the sum's dimension, the first in the low half (nnt_cpu_bf16_pair_rows and
 * nnt_cpu_band_transpose make them). The same groups and keys as the float products; the sums in
 * increasing order of pairs, a pair's two products added in one step.
 *   abt: c[r][j] = alpha sum_{t < hd2} a[r][t] . bt[t][j] (a: rows of hd2 pairs along the head
 *        dimension, bt those of the keys transposed), j in r's group's keys (c elsewhere not
 *        written);
 *   ab:  c[r][0..hd) += alpha sum_t p[r][t] . b[t][..] for the key pairs t from k0 / 2 to
 *        (k1 + 1) / 2 of r's group's keys [k0, k1): p's rows hold key pairs, b's row t the keys
 *        2t and 2t + 1; p must be 0 at those pairs' keys outside [lo[r], hi[r]), the key before
 *        k0 and the one at k1 included;
 *   atb: c[j][0..hd) += alpha sum_t p[t][j] . a[t][..] for the row pairs t from i0 / 2 to
 *        (i1 + 1) / 2 of the rows [i0, i1) that see key j's group (as the float atb): p's row t
 *        holds rows 2t and 2t + 1 of the scores, a's row t those of a; p 0 where a row of those
 *        pairs does not see key j.
 * They return -1 (nothing done) where nnt_cpu_band16_level() is 0. */
/* 1 where the CPU has AVX512-BF16 and the float band products run at level 2, without
 * AMX-BF16 (oneDNN's tiles there; not measured against these); else 0 */
int nnt_cpu_band16_level(void);
int nnt_cpu_band16_force(int level);   /* tests: at most that level (-1: the CPU's) */
/* y[t][c] = x[2t][c] | x[2t + 1][c] << 16 for t < (n + 1) / 2, c < m (x[n][c] = 0 when n is
 * odd) */
void nnt_cpu_bf16_pair_rows(int64_t n, int64_t m, const uint16_t *x, int64_t ldx, uint32_t *y,
                            int64_t ldy);
/* The backward's score rows [0, rows) of a chunk ended for the bf16 band products, in one pass
 * a pair of rows: for row r over its keys [lo[r], hi[r]) p = exp(s - lse[r]) and
 * ds = p (dp - d[r]) (s, dp: (rows, ldp) floats, the scaled scores and dout v^T, only read),
 * as nnt_cpu_row_softmax_grad_f32 computes them, rounded to bf16 as nnt_cpu_f32_to_bf16
 * rounds them, 0 outside those keys; written as ds's bf16 rows ds16 (rows, ldp) and as the
 * row pairs of p and ds, pp and dsp ((rows + 1) / 2 rows of ldr words, columns [0, nk), nk <=
 * ldp): what those three functions and nnt_cpu_bf16_pair_rows give, bit for bit (finite
 * values). */
int nnt_cpu_band16_grad_rows(int64_t rows, int64_t nk, int64_t ldp, const float *s,
                             const float *dp, const int64_t *lo, const int64_t *hi,
                             const float *lse, const float *d, uint16_t *ds16, uint32_t *pp,
                             uint32_t *dsp, int64_t ldr);
int nnt_cpu_band16_abt(int64_t m, int64_t hd2, float alpha, const uint32_t *a, int64_t lda,
                       const uint32_t *bt, int64_t ldbt, const int64_t *lo, const int64_t *hi,
                       float *c, int64_t ldc);
int nnt_cpu_band16_ab(int64_t m, int64_t hd, float alpha, const uint32_t *p, int64_t ldp,
                      const uint32_t *b, int64_t ldb, const int64_t *lo, const int64_t *hi,
                      float *c, int64_t ldc);
int nnt_cpu_band16_atb(int64_t m, int64_t nk, int64_t hd, float alpha, const uint32_t *p,
                       int64_t ldp, const uint32_t *a, int64_t lda, const int64_t *lo,
                       const int64_t *hi, float *c, int64_t ldc);

/* ---- attention by products (cpu/attn_products.c) ----------------------------------------------
 * The same block as nnt_cpu_attn_fwd_packed_f32 / _bwd_packed_f32 (map, window, positions,
 * soft-cap), computed as strided-batched matrix products of whole chunks of query rows and
 * row kernels between them, through a table of operations: CUDA's (cublas products at the
 * tensor cores' or the CUDA cores' rate, lib/codelets/attention.c) or the CPU twins below
 * (tests). Per chunk of up to `rows` query rows of up to `count` slabs, keys [kb, kb + keys):
 *   forward:  s = scale q k^T;  rows_fwd: masks, cap, running (m, l), p = exp(s - m) in s,
 *             o_acc *= alpha;  o_acc += p v
 *   backward: s = scale q k^T, dp = dout v^T;  rows_bwd: p = exp(cap(s) - lse) in s,
 *             ds = p (dp - d) g in dp (g: the cap's 1 - tanh^2);  dv += p^T dout,
 *             dq += scale ds k, dk += scale ds^T q
 * Slabs are taken as strided runs (nnt_attn_run), so a product covers many slabs at once:
 * every slab of the map in `group` runs when the map is whole (q heads of every kv head of
 * the blocks: nh == q_hs == group kv_hs, q_h0 == gofs == 0), else a run per q head over the
 * batch rows. Runs that write dk, dv never name a kv slab twice, and run one after the other.
 * ws: scratch of ws_floats floats: at least 2 tk (forward 1 tk); more lets a product take
 * more rows and slabs (up to 256 rows).                                                     */
#ifndef NNT_ATTN_ROWS_DEFINED   /* shared with cuda/nnt_cuda.h */
#define NNT_ATTN_ROWS_DEFINED
typedef struct nnt_attn_rows {
    int64_t count, rows, keys;   /* s and dp are (count, rows, keys), rows and keys dense    */
    int64_t tq, hd;              /* q-side tile rows; head dimension                          */
    int64_t r0;                  /* the chunk's first query row in the tile                   */
    int64_t q0, qstride;         /* q-side slab of entry e: q0 + (t0 + e) qstride (m, l, lse,
                                    d rows at slab tq + r0 + r, o_acc rows at that hd)      */
    int64_t t0, bdiv;            /* entry e is the run's entry t0 + e; its batch row (for its
                                    positions) (t0 + e) / bdiv                               */
    int64_t q_pos0, k_pos0, kb;  /* positions of the tiles' row 0; the chunk's first key      */
    int64_t window;              /* 0: none                                                   */
    const int32_t *qpos;         /* (nb, tq) positions, or NULL                              */
    float cap;                   /* soft-cap, 0: none                                         */
} nnt_attn_rows;
#endif

#ifndef NNT_ATTN_PRODUCTS_DEFINED   /* (test_cpu_kernels includes this header twice) */
#define NNT_ATTN_PRODUCTS_DEFINED
typedef struct nnt_attn_products_ops {
    void *ctx;   /* passed back to each operation */
    /* row-major C = alpha op(A) op(B) + beta C for batch matrices (nnt_cpu_gemm_f32's
     * arguments); beta 0: C not read */
    int (*gemm)(void *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                int64_t stride_c, int64_t batch);
    int (*rows_fwd)(void *ctx, const nnt_attn_rows *r, float *s, float *m, float *l,
                    float *o_acc);
    int (*rows_bwd)(void *ctx, const nnt_attn_rows *r, float *s, float *dp, const float *lse,
                    const float *d);
} nnt_attn_products_ops;

int nnt_attn_products_fwd(const nnt_attn_products_ops *ops, const nnt_attn_map *map, int64_t tq,
                          int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                          int64_t window, const int32_t *qpos, float scale, float cap,
                          const float *q, const float *k, const float *v, float *o_acc,
                          float *m, float *l, float *ws, int64_t ws_floats);
int nnt_attn_products_bwd(const nnt_attn_products_ops *ops, const nnt_attn_map *map, int64_t tq,
                          int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                          int64_t window, const int32_t *qpos, float scale, float cap,
                          const float *q, const float *k, const float *v, const float *dout,
                          const float *lse, const float *d, float *dq, float *dk, float *dv,
                          float *ws, int64_t ws_floats);
/* The CPU twins of the row kernels (the definition cuda/attention.cu's follow) and a table of
 * CPU operations (products by nnt_cpu_gemm_f32): the orchestration's tests. */
int nnt_cpu_attn_rows_fwd_f32(void *ctx, const nnt_attn_rows *r, float *s, float *m, float *l,
                              float *o_acc);
int nnt_cpu_attn_rows_bwd_f32(void *ctx, const nnt_attn_rows *r, float *s, float *dp,
                              const float *lse, const float *d);
extern const nnt_attn_products_ops nnt_cpu_attn_products_ops;
#endif

/* ---- softmax rows (cross-entropy, attention), n contiguous elements ------------------------ */
/* max of x[0..n), n >= 1 */
float nnt_cpu_row_max_f32(int64_t n, const float *x);
/* sum of exp(x[j] - mx) */
float nnt_cpu_row_sumexp_f32(int64_t n, const float *x, float mx);
/* x[j] = exp(x[j] - mx) in place; returns their sum */
float nnt_cpu_row_exp_f32(int64_t n, float *x, float mx);
/* dx[j] = c * exp(x[j] - mx)  (dx may be x) */
void nnt_cpu_row_scaled_exp_f32(int64_t n, const float *x, float mx, float c, float *dx);
/* p[j] = exp(p[j] - lse); ds[j] = p[j] * (ds[j] - d)  (a softmax row's gradient from its
 * logits p, the upstream products ds and d = sum of p * upstream) */
void nnt_cpu_row_softmax_grad_f32(int64_t n, float *p, float *ds, float lse, float d);

/* ---- softmax cross-entropy, vocabulary split over blocks ------------------------------------
 * logits: (rows, nv) with leading dim ld, columns are vocabulary ids [v0, v0 + nv).
 * targets: (rows) int32; a row whose target == ignore_index contributes nothing.
 * m, s: running max and sum of exp(logit - m) per row (caller sets m = -INFINITY, s = 0);
 * tgt: the target's logit, written by the block that holds the target.
 * d (NULL: none; for label smoothing): the sum of logit - m over the ids seen, [0, v0 + nv)
 * after the block (the blocks in increasing order from v0 = 0; set by the first).          */
void nnt_cpu_xent_fwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, float *m, float *s,
                                float *tgt, float *d);
/* loss[r] = m[r] + log(s[r]) - tgt[r], or 0 where targets[r] == ignore_index;
 * lse[r] = m[r] + log(s[r]) for every row (lse may be NULL: not written)              set */
void nnt_cpu_xent_loss_f32(int64_t rows, const int32_t *targets, int32_t ignore_index,
                           const float *m, const float *s, const float *tgt, float *loss,
                           float *lse);
/* dlogits[r, j] = scale * w[r] * (exp(logit - m) / s - (1 - eps) [v0 + j == target]
 * - eps / V); 0 for ignored rows; w NULL: 1; eps 0: no label smoothing (vocab unused).
 * dlogits has leading dim ld. (scale = dloss / number of valid rows.)                   set */
void nnt_cpu_xent_bwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, int32_t ignore_index,
                                const float *m, const float *s, const float *w, float scale,
                                float eps, int64_t vocab, float *dlogits);
/* Label smoothing eps over a vocabulary of V ids (the target distribution (1 - eps) one-hot +
 * eps / V): loss[r] = (1 - eps) loss[r] + eps (log s[r] - d[r] / V) (= lse - mean logit) for
 * the rows not ignored; loss from nnt_cpu_xent_loss_f32, s and d of the whole row.
 *                                                                             loss updated */
void nnt_cpu_xent_smooth_loss_f32(int64_t rows, const int32_t *targets, int32_t ignore_index,
                                  float eps, int64_t vocab, const float *s, const float *d,
                                  float *loss);

/* ---- embedding, table split over vocabulary blocks -------------------------------------------
 * table: (nv, nc) rows for vocabulary ids [v0, v0 + nv), leading dim ldt.
 * out/dout: (ntok, nc), leading dim ldo. Tokens outside [v0, v0+nv) are skipped.         */
/* out[i, :] = table[tok[i] - v0, :]                                   set (only those rows) */
void nnt_cpu_embedding_gather_f32(int64_t ntok, int64_t nc, const int32_t *tok, int64_t v0,
                                  int64_t nv, const float *table, int64_t ldt, float *out,
                                  int64_t ldo);
/* The same from a table of bfloat16 bit patterns, widened to float (exact)              */
void nnt_cpu_embedding_gather_bf16(int64_t ntok, int64_t nc, const int32_t *tok, int64_t v0,
                                   int64_t nv, const uint16_t *table, int64_t ldt, float *out,
                                   int64_t ldo);
/* dtable[tok[i] - v0, :] += dout[i, :], i in increasing order (deterministic)            += */
void nnt_cpu_embedding_scatter_add_f32(int64_t ntok, int64_t nc, const int32_t *tok,
                                       int64_t v0, int64_t nv, const float *dout, int64_t ldo,
                                       float *dtable, int64_t ldt);

/* ---- reductions ------------------------------------------------------------------------------ */

/* acc[0] += sum_i x[i]^2, summed in double                                                += */
void nnt_cpu_sumsq_f32(int64_t n, const float *x, float *acc);

/* ---- optimizer steps, one parameter block of n elements ----------------------------------------
 * g is multiplied by grad_scale first (global-norm clipping); step t >= 1 gives the bias
 * corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t (computed by the caller).
 * AdamW (PyTorch semantics): p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   p -= lr * (m / bc1) / (sqrt(v / bc2) + eps).
 * Adam (decoupled == 0): g += wd * p first, no decoupled decay.                             */
void nnt_cpu_adam_step_f32(int64_t n, int decoupled, float lr, float beta1, float beta2,
                           float eps, float weight_decay, float bc1, float bc2, float grad_scale,
                           const float *g, float *p, float *m, float *v);
/* The same, and p16 (n) = p rounded to bf16 as nnt_cpu_f32_to_bf16 rounds it, a block at a
 * time while it is in cache: a parameter's bf16 copy written with its update. */
void nnt_cpu_adam_step_f32_bf16(int64_t n, int decoupled, float lr, float beta1, float beta2,
                                float eps, float weight_decay, float bc1, float bc2,
                                float grad_scale, const float *g, float *p, float *m, float *v,
                                uint16_t *p16);
/* SGD with momentum (PyTorch, dampening 0, no Nesterov): g' = grad_scale*g + wd*p;
 * buf = momentum*buf + g' (buf = g' on the first step: first_step != 0); p -= lr * buf.
 * buf == NULL: plain SGD, p -= lr * g'.                                                    */
void nnt_cpu_sgd_step_f32(int64_t n, float lr, float momentum, float weight_decay,
                          float grad_scale, int first_step, const float *g, float *p,
                          float *buf);

/* ---- deterministic random fill ----------------------------------------------------------------
 * Element with global linear index idx gets a value that depends only on (seed, idx), so any
 * tiling yields the same tensor. The box is a tile: tile_shape[ndim] at tile_origin[ndim]
 * inside a tensor of global_shape[ndim]; out is the contiguous tile.
 * dist 0: uniform in [a, b); dist 1: normal with mean a, std b; dist 2: dropout of out in
 * place, each element 0 where dist 0's uniform value in [0, 1) is below a, else times b.     */
void nnt_cpu_fill_random_f32(int ndim, const int64_t *global_shape, const int64_t *tile_origin,
                             const int64_t *tile_shape, uint64_t seed, int dist, float a,
                             float b, float *out);

#ifdef __cplusplus
}
#endif

#endif /* NNT_CPU_H */
