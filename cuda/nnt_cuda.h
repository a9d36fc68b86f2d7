/* SPDX-License-Identifier: MIT */
/* nnt CUDA kernels: the twins of cpu/nnt_cpu.h on device pointers.
 *
 * Every nnt_cpu_X in cpu/nnt_cpu.h has a twin nnt_cuda_X here with the same arguments, in the
 * same order and with the same semantics ("set" outputs overwritten, "+=" outputs accumulated,
 * same shapes, leading dimensions and strides in elements), plus:
 *   - every pointer argument to tensor data is a DEVICE pointer (shape / stride arrays such as
 *     copy_box's shape[] and fill_random's global_shape[] stay HOST arrays, as on the CPU);
 *   - a trailing cudaStream_t stream: all work is enqueued asynchronously on that stream;
 *   - GEMM additionally takes a cublasHandle_t before the stream. The caller has already bound
 *     the handle to the stream (cublasSetStream); the wrapper sets the handle's pointer mode to
 *     host (alpha and beta are host values) and leaves its math mode alone (so gemm_f32 uses
 *     TF32 only if the caller enabled it on the handle; gemm_tf32 asks for it).
 *
 * Return value: 0 on success; on a launch or library error the negated cudaError_t or
 * cublasStatus_t value, or -1 for invalid / unsupported arguments (for example head_dim > 256
 * in attention, ndim outside 1..8, or a size that does not fit the library's integer type).
 * Errors of kernels that fail while running asynchronously surface later on the stream, as
 * with any CUDA call. No function aborts, exits, synchronises the host or allocates memory.
 *
 * Determinism: every kernel is deterministic (no floating-point atomics): reductions use a fixed
 * order per launch configuration, and embedding_scatter_add adds the tokens of each table row
 * in increasing token order, exactly as the CPU kernel does (so it is bit-identical to it).
 * fill_random_f32 reproduces the CPU values bit for bit (same integer hash, same double math,
 * no FMA contraction; see the comment in cpu/nnt_cpu.h and cuda/random.cu). Where it costs
 * nothing the float kernels round every operation as the CPU code does (__fmul_rn etc., no
 * FMA contraction): fill, scale, axpby, add_bcast, copy_box, embedding, the optimizer steps
 * and the LayerNorm output formula give the CPU's bits when the CPU build does not contract
 * either; kernels using expf/logf/tanh or reordered sums agree to rounding only.
 *
 * This header is plain C99 and C++ (extern "C").
 */
#ifndef NNT_CUDA_H
#define NNT_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest number of dimensions accepted by copy_box and fill_random. */
#define NNT_CUDA_MAX_NDIM 8
/* Largest head dimension accepted by the attention kernels (larger: return -1). */
#define NNT_CUDA_ATTN_MAX_HD 256

/* ---- elementwise, n contiguous elements (cuda/elementwise.cu) ---------------------------- */

/* x[i] = value */
int nnt_cuda_fill_f32(int64_t n, float value, float *x, cudaStream_t stream);
int nnt_cuda_fill_i32(int64_t n, int32_t value, int32_t *x, cudaStream_t stream);
int nnt_cuda_fill_u16(int64_t n, uint16_t value, uint16_t *x, cudaStream_t stream); /* bf16 bits */
/* x[i] *= alpha */
int nnt_cuda_scale_f32(int64_t n, float alpha, float *x, cudaStream_t stream);
/* y[i] = alpha * x[i] + beta * y[i]   (beta == 0: y is not read) */
int nnt_cuda_axpby_f32(int64_t n, float alpha, const float *x, float beta, float *y,
                       cudaStream_t stream);
/* z[i] = alpha * x[i] + beta * y[i], the same operations (z may be y, not x)     z set */
int nnt_cuda_axpbyz_f32(int64_t n, float alpha, const float *x, float beta, const float *y,
                        float *z, cudaStream_t stream);
/* y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated like the CPU kernel as
 * x sigmoid(2u) (full relative accuracy for x << 0)                                  y set */
int nnt_cuda_gelu_fwd_f32(int64_t n, const float *x, float *y, cudaStream_t stream);
/* dx[i] = dy[i] * gelu'(x[i])                                                        dx set */
int nnt_cuda_gelu_bwd_f32(int64_t n, const float *x, const float *dy, float *dx,
                          cudaStream_t stream);
/* The exact GELU x Phi(x) and its backward (cpu/nnt_cpu.h's gelu_erf; Phi by normcdff)     */
int nnt_cuda_gelu_erf_fwd_f32(int64_t n, const float *x, float *y, cudaStream_t stream);
int nnt_cuda_gelu_erf_bwd_f32(int64_t n, const float *x, const float *dy, float *dx,
                              cudaStream_t stream);
/* GeGLU and soft-capping (cpu/nnt_cpu.h's geglu and softcap kernels)                  set */
int nnt_cuda_geglu_fwd_f32(int64_t n, const float *gate, const float *up, float *y,
                           cudaStream_t stream);
int nnt_cuda_geglu_bwd_f32(int64_t n, const float *gate, const float *up, const float *dy,
                           float *dgate, float *dup, cudaStream_t stream);
int nnt_cuda_softcap_fwd_f32(int64_t n, float cap, const float *x, float *y, cudaStream_t stream);
int nnt_cuda_softcap_bwd_f32(int64_t n, float cap, const float *x, const float *dy, float *dx,
                             cudaStream_t stream);

/* ---- copies between layouts (cuda/copy.cu) -------------------------------------------------
 * shape, src_stride, dst_stride are HOST arrays of ndim (1..8) entries; src, dst device.
 * Any elsize is accepted; contiguous runs are merged and copied in 16/8/4/2/1-byte words.   */
int nnt_cuda_copy_box(int ndim, const int64_t *shape, size_t elsize,
                      const void *src, const int64_t *src_stride,
                      void *dst, const int64_t *dst_stride, cudaStream_t stream);

/* ---- broadcast add and its reduction -------------------------------------------------------- */

/* y[o, i] += x[i]; y (outer, inner), leading dim ldy            (cuda/elementwise.cu)     */
int nnt_cuda_add_bcast_f32(int64_t outer, int64_t inner, const float *x, float *y, int64_t ldy,
                           cudaStream_t stream);
/* acc[i] += sum_o y[o, i]  (double per column)                  (cuda/reduce.cu)       += */
int nnt_cuda_sum_outer_f32(int64_t outer, int64_t inner, const float *y, int64_t ldy,
                           float *acc, cudaStream_t stream);

/* ---- per-feature products, twins of the CPU's (DoRA; cuda/reduce.cu) ------------------------ */
int nnt_cuda_mul_bcast_f32(int64_t outer, int64_t inner, const float *x, const float *h,
                           float c, int by_row, int accumulate, float *z, cudaStream_t stream);
int nnt_cuda_dot_cols_f32(int64_t outer, int64_t inner, const float *x, const float *y,
                          const float *h, float *acc, cudaStream_t stream);
/* bf16 1: x and y bf16 (uint16_t), else float                                                */
int nnt_cuda_dot_rows(int bf16, int64_t outer, int64_t inner, const void *x, const void *y,
                      float *acc, cudaStream_t stream);
int nnt_cuda_rsqrt_mul_f32(int64_t n, const float *m, const float *n2, float *out,
                           cudaStream_t stream);

/* ---- NF4 (cuda/nf4.cu) ------------------------------------------------------------------------
 * nf4_dequantize: twin of nnt_cpu_nf4_dequantize (the same bits): n values (a multiple of 64)
 * from n / 2 bytes of codes and n / 64 absmax, table the 16 NF4 values (host memory:
 * nnt_cpu_nf4_table), into y (floats, or bf16 bit patterns when y_bf16).                    */
int nnt_cuda_nf4_dequantize(int64_t n, const uint8_t *codes, const float *absmax,
                            const float *table, void *y, int y_bf16, cudaStream_t stream);

/* ---- GEMM (cuda/gemm.cu) ---------------------------------------------------------------------
 * Row-major C = alpha op(A) op(B) + beta C for batch matrices, via cublasGemmStridedBatchedEx
 * (float operands, CUBLAS_COMPUTE_32F: full float, no TF32 unless the caller set TF32 math on
 * the handle) on the transposed problem C^T = op(B)^T op(A)^T (column-major). beta == 0: C is
 * not read.
 * k == 0 or alpha == 0: C = beta C (C zeroed when beta == 0), A and B not read.             */
int nnt_cuda_gemm_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, int64_t stride_a,
                      const float *b, int64_t ldb, int64_t stride_b, float beta,
                      float *c, int64_t ldc, int64_t stride_c, int64_t batch,
                      cublasHandle_t handle, cudaStream_t stream);

/* GEMM operand precision (nnt_ctx_set_precision), cuda/gemm.cu.
 * round_f32: twin of nnt_cpu_round_f32 (bit-identical: the same integer rounding).
 * f32_to_bf16, bf16_to_f32: twins of the CPU conversions (bfloat16 as uint16_t bit patterns;
 * to bf16 rounds to nearest even as nnt_cpu_round_f32 with 7 bits, NaN stays NaN; back is exact).
 * gemm_tf32: nnt_cuda_gemm_f32 with compute type CUBLAS_COMPUTE_32F_FAST_TF32 (operands
 * rounded to TF32 by the tensor cores, float accumulation).
 * gemm_bf16: the same product on bfloat16 operands A and B (uint16_t bit patterns, e.g.
 * from f32_to_bf16), float C, CUBLAS_COMPUTE_32F: every product is exact in float, so the
 * result is nnt_cpu_gemm_f32 on nnt_cpu_round_f32(.., 7) operands up to summation order. */
int nnt_cuda_round_f32(int64_t n, int bits, const float *x, float *y, cudaStream_t stream);
int nnt_cuda_f32_to_bf16(int64_t n, const float *x, uint16_t *y, cudaStream_t stream);
int nnt_cuda_bf16_to_f32(int64_t n, const uint16_t *x, float *y, cudaStream_t stream);
int nnt_cuda_gemm_tf32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, int64_t stride_a,
                       const float *b, int64_t ldb, int64_t stride_b, float beta,
                       float *c, int64_t ldc, int64_t stride_c, int64_t batch,
                       cublasHandle_t handle, cudaStream_t stream);
int nnt_cuda_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const uint16_t *a, int64_t lda, int64_t stride_a,
                       const uint16_t *b, int64_t ldb, int64_t stride_b, float beta,
                       float *c, int64_t ldc, int64_t stride_c, int64_t batch,
                       cublasHandle_t handle, cudaStream_t stream);

/* Math modes of a product: operand type and compute type. nnt_cuda_gemm is gemm_f32,
 * gemm_tf32 or gemm_bf16 by mode, with A and B float (F32, TF32) or bfloat16 (BF16).    */
enum { NNT_CUDA_MATH_F32 = 0, NNT_CUDA_MATH_TF32 = 1, NNT_CUDA_MATH_BF16 = 2 };
int nnt_cuda_gemm(int math, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                  int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                  int64_t stride_c, int64_t batch, cublasHandle_t handle, cudaStream_t stream);

/* pre[r, j] += bias[j] (bias may be NULL: skip), then out[r, j] = gelu(pre[r, j]);
 * pre, out (m, n) with leading dim n                            (cuda/elementwise.cu)     */
int nnt_cuda_bias_gelu_f32(int64_t m, int64_t n, const float *bias, float *pre, float *out,
                           cudaStream_t stream);
/* The same with the exact GELU (nnt_cuda_gelu_erf_fwd_f32)                                   */
int nnt_cuda_bias_gelu_erf_f32(int64_t m, int64_t n, const float *bias, float *pre,
                               float *out, cudaStream_t stream);

/* One product with a fused epilogue through cuBLASLt (cuda/gemm.cu), batch 1, row-major:
 *   c (m, n), leading dim n  = epi(alpha op(A) op(B) + beta c)
 * op(A), op(B) and their leading dims as for gemm. math: NNT_CUDA_MATH_F32 (float a, b,
 * CUBLAS_COMPUTE_32F), _TF32 (float a, b, CUBLAS_COMPUTE_32F_FAST_TF32), _BF16 (a, b
 * bfloat16 bit patterns, CUBLAS_COMPUTE_32F); c, bias and aux are float. epilogue:
 *   NNT_CUDA_EPI_NONE       nothing more
 *   NNT_CUDA_EPI_BIAS       + bias[j] on every row (bias NULL: nothing)
 *   NNT_CUDA_EPI_BIAS_GELU  c = pre = product (+ bias), aux (m, n) = gelu_tanh(pre)
 *                           (CUBLASLT_EPILOGUE_GELU_AUX[_BIAS]: aux is Lt's D, c its AUX)
 *   NNT_CUDA_EPI_DGELU      c = product * gelu_tanh'(aux), aux (m, n) the pre-activation
 *                           (CUBLASLT_EPILOGUE_DGELU)
 * The two GELU epilogues need alpha 1, beta 0 (the whole product in this call) and n a
 * multiple of 8 (Lt's EPILOGUE_AUX_LD). Returns 0 when the work is enqueued on `stream`, -1
 * on bad arguments, 1 when cuBLASLt cannot or will not do it (any cuBLASLt error: no
 * algorithm, unsupported, rejected; those conditions; m, n or k 0; alpha 0): nothing was
 * enqueued, the caller runs the unfused path.
 * cuBLASLt's GELU and its derivative use its own fast math: ~1e-6 relative to the kernels.
 * Its GELU is the tanh approximation: the exact GELU's epilogues (NNT_EPILOGUE_*_GELU_ERF)
 * take NNT_CUDA_EPI_BIAS or a plain product here, then the gelu_erf kernels. */
enum { NNT_CUDA_EPI_NONE = 0, NNT_CUDA_EPI_BIAS = 1, NNT_CUDA_EPI_BIAS_GELU = 2,
       NNT_CUDA_EPI_DGELU = 3 };
int nnt_cuda_gemm_lt(cublasLtHandle_t lt, int math, int epilogue, int trans_a, int trans_b,
                     int64_t m, int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                     const void *b, int64_t ldb, float beta, float *c, const float *bias,
                     float *aux, void *workspace, size_t workspace_size, cudaStream_t stream);

/* ---- LayerNorm over the last dimension (cuda/layernorm.cu) -------------------------------------
 * One warp per row, statistics in double (two passes). gamma == NULL means 1, beta == NULL 0;
 * in backward dgamma / dbeta may be NULL (not accumulated).                                   */
/* Whether the LayerNorm and RMSNorm backwards cut their rows into chunks for dgamma / dbeta
 * (a second kernel adds the chunks in order; when the columns are few the one-pass kernel
 * occupies a GPU poorly), process-wide; 0 (the default) the one-pass kernel. lib/ctx.c sets
 * it from NNT_CUDA_NORM_BWD. */
void nnt_cuda_set_norm_split(int on);
/* y = (x - mean) * rstd * gamma + beta; mean, rstd (rows) set                                */
int nnt_cuda_layernorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *x,
                               const float *gamma, const float *beta, float *y,
                               float *mean, float *rstd, cudaStream_t stream);
/* dx set; dgamma, dbeta (n) += (column sums in double, fixed order)                         */
int nnt_cuda_layernorm_bwd_f32(int64_t rows, int64_t n, const float *x, const float *dy,
                               const float *gamma, const float *mean, const float *rstd,
                               float *dx, float *dgamma, float *dbeta, cudaStream_t stream);

/* ---- RMSNorm over the last dimension (cuda/rmsnorm.cu) -----------------------------------------
 * One warp per row, the mean square in double; dgamma (n) += column sums in double (fixed
 * order), NULL: not accumulated.                                                            */
/* y = x * rstd * gamma; rstd (rows) set                                                       */
int nnt_cuda_rmsnorm_fwd_f32(int64_t rows, int64_t n, float eps, const float *x,
                             const float *gamma, float *y, float *rstd, cudaStream_t stream);
/* dx set; dgamma (n) +=                                                                       */
int nnt_cuda_rmsnorm_bwd_f32(int64_t rows, int64_t n, const float *x, const float *dy,
                             const float *gamma, const float *rstd, float *dx, float *dgamma,
                             cudaStream_t stream);

/* ---- SwiGLU, n contiguous elements (cuda/swiglu.cu) ---------------------------------------------
 * Any output may be one of the inputs; the two outputs of the backward must differ.          */
/* y = silu(gate) * up                                                                    y set */
int nnt_cuda_swiglu_fwd_f32(int64_t n, const float *gate, const float *up, float *y,
                            cudaStream_t stream);
/* dgate = dy up silu'(gate), dup = dy silu(gate)                               dgate, dup set */
int nnt_cuda_swiglu_bwd_f32(int64_t n, const float *gate, const float *up, const float *dy,
                            float *dgate, float *dup, cudaStream_t stream);
/* gpt-oss's clamped SwiGLU (cpu/nnt_cpu.h's nnt_cpu_swiglu_clamp_fwd_f32)           y set */
int nnt_cuda_swiglu_clamp_fwd_f32(int64_t n, float alpha, float limit, const float *gate,
                                  const float *up, float *y, cudaStream_t stream);
/* its gradient (nnt_cpu_swiglu_clamp_bwd_f32)                                dgate, dup set */
int nnt_cuda_swiglu_clamp_bwd_f32(int64_t n, float alpha, float limit, const float *gate,
                                  const float *up, const float *dy, float *dgate, float *dup,
                                  cudaStream_t stream);

/* ---- rotary position embedding (cuda/rope.cu) --------------------------------------------------
 * Twin of nnt_cpu_rope_f32; inv_freq is a HOST array of n <= NNT_CUDA_ROPE_MAX_N entries
 * (larger n: -1), passed to the kernel by value. y_lo may be x_lo and y_hi x_hi.        set */
#define NNT_CUDA_ROPE_MAX_N 512
int nnt_cuda_rope_f32(int64_t nbh, int64_t nt, int64_t n, int64_t pos0, int sign, float scale,
                      const float *inv_freq, const float *x_lo, const float *x_hi, int64_t ldx,
                      float *y_lo, float *y_hi, int64_t ldy, cudaStream_t stream);
/* Twin of nnt_cpu_rope_pos_f32: row (b, h, t) at position pos[b * nt + t], pos (nb, nt) on the
 * device (packed examples). */
int nnt_cuda_rope_pos_f32(int64_t nb, int64_t nh, int64_t nt, int64_t n, const int32_t *pos,
                          int sign, float scale, const float *inv_freq, const float *x_lo,
                          const float *x_hi, int64_t ldx, float *y_lo, float *y_hi, int64_t ldy,
                          cudaStream_t stream);

/* ---- causal attention, flash style (cuda/attention.cu) -----------------------------------------
 * Same layout and state conventions as the CPU kernels: q, o (nbh, tq, hd); k, v (nbh, tk, hd);
 * m, l, lse, d (nbh * tq). hd <= NNT_CUDA_ATTN_MAX_HD (256), else -1.                         */
int nnt_cuda_attn_fwd_block_f32(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                int64_t q_pos0, int64_t k_pos0, float scale,
                                const float *q, const float *k, const float *v,
                                float *o_acc, float *m, float *l, cudaStream_t stream);
/* Grouped-query attention: the slabs of map (struct as in cpu/nnt_cpu.h, a HOST pointer);
 * fwd and dq run over the q slabs, dk/dv over the kv slabs, each adding the q heads that read
 * it in increasing order (no atomics).                                                       */
#ifndef NNT_ATTN_MAP_DEFINED
#define NNT_ATTN_MAP_DEFINED
typedef struct nnt_attn_map {
    int64_t nb, nh;
    int64_t q_hs, q_h0;
    int64_t kv_hs;
    int64_t group, gofs;
    int64_t bf16;   /* CPU kernels only (cpu/nnt_cpu.h); the CUDA kernels compute in float */
} nnt_attn_map;
#endif
int nnt_cuda_attn_fwd_gqa_f32(const nnt_attn_map *map, int64_t tq, int64_t tk, int64_t hd,
                              int64_t q_pos0, int64_t k_pos0, float scale, const float *q,
                              const float *k, const float *v, float *o_acc, float *m,
                              float *l, cudaStream_t stream);
/* o = o_acc / l (in place), lse = m + log(l)  (rows with l == 0: o = 0, lse = -inf)          */
/* The _gqa kernels with a sliding window (cpu/nnt_cpu.h's _window kernels): query position qp
 * sees keys qp - window < kp <= qp; window 0: plain causal. cap > 0: scores soft-capped,
 * cap tanh(s / cap) (Gemma 2); 0: none. */
int nnt_cuda_attn_fwd_window_f32(const nnt_attn_map *map, int64_t tq, int64_t tk, int64_t hd,
                                 int64_t q_pos0, int64_t k_pos0, int64_t window, float scale,
                                 float cap, const float *q, const float *k, const float *v, float *o_acc,
                                 float *m, float *l, cudaStream_t stream);
int nnt_cuda_attn_bwd_window_f32(const nnt_attn_map *map, int64_t tq, int64_t tk, int64_t hd,
                                 int64_t q_pos0, int64_t k_pos0, int64_t window, float scale,
                                 float cap, const float *q, const float *k, const float *v,
                                 const float *dout, const float *lse, const float *d,
                                 float *dq, float *dk, float *dv, cudaStream_t stream);
/* The _window kernels with the queries' positions qpos (map->nb, tq) int32 on the device, or
 * NULL (cpu/nnt_cpu.h's _packed kernels): packed examples, each query sees its example's keys
 * only. */
int nnt_cuda_attn_fwd_packed_f32(const nnt_attn_map *map, int64_t tq, int64_t tk, int64_t hd,
                                 int64_t q_pos0, int64_t k_pos0, int64_t window,
                                 const int32_t *qpos, float scale, float cap, const float *q,
                                 const float *k, const float *v, float *o_acc, float *m,
                                 float *l, cudaStream_t stream);
int nnt_cuda_attn_bwd_packed_f32(const nnt_attn_map *map, int64_t tq, int64_t tk, int64_t hd,
                                 int64_t q_pos0, int64_t k_pos0, int64_t window,
                                 const int32_t *qpos, float scale, float cap, const float *q,
                                 const float *k, const float *v, const float *dout,
                                 const float *lse, const float *d, float *dq, float *dk,
                                 float *dv, cudaStream_t stream);
int nnt_cuda_attn_fwd_finalize_f32(int64_t nbh, int64_t tq, int64_t hd, float *o,
                                   const float *m, const float *l, float *lse,
                                   cudaStream_t stream);
/* Attention sinks (gpt-oss), as nnt_cpu_attn_sink_fwd_f32 / _bwd_f32 (cpu/nnt_cpu.h): nb x nh
 * slabs of tq rows; lse' = log(exp(lse) + exp(sinks[h])), o *= exp(lse - lse') in place;
 * dsinks[h] -= sum over head h's rows of exp(sinks[h] - lse) (dout . o) (nh <= 65535)     */
int nnt_cuda_attn_sink_fwd_f32(int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                               const float *sinks, float *o, float *lse, cudaStream_t stream);
int nnt_cuda_attn_sink_bwd_f32(int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                               const float *sinks, const float *o, const float *dout,
                               const float *lse, float *dsinks, cudaStream_t stream);
/* d[r] = sum_j dout[r, j] * o[r, j]                                                      set */
int nnt_cuda_attn_bwd_prep_f32(int64_t nbh, int64_t tq, int64_t hd, const float *o,
                               const float *dout, float *d, cudaStream_t stream);
/* dv += p^T dout; ds = p (dout v^T - d); dq += scale ds k; dk += scale ds^T q            += */
int nnt_cuda_attn_bwd_block_f32(int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                                int64_t q_pos0, int64_t k_pos0, float scale,
                                const float *q, const float *k, const float *v,
                                const float *dout, const float *lse, const float *d,
                                float *dq, float *dk, float *dv, cudaStream_t stream);
int nnt_cuda_attn_bwd_gqa_f32(const nnt_attn_map *map, int64_t tq, int64_t tk, int64_t hd,
                              int64_t q_pos0, int64_t k_pos0, float scale, const float *q,
                              const float *k, const float *v, const float *dout,
                              const float *lse, const float *d, float *dq, float *dk,
                              float *dv, cudaStream_t stream);

/* Attention by products (cpu/nnt_cpu.h, cpu/attn_products.c): the row kernels between its
 * products, twins of nnt_cpu_attn_rows_fwd_f32 / _bwd_f32 (one warp a row; sums in another
 * order). r is a HOST pointer; s, dp, m, l, o_acc, lse, d and r->qpos are on the device. */
#ifndef NNT_ATTN_ROWS_DEFINED
#define NNT_ATTN_ROWS_DEFINED
typedef struct nnt_attn_rows {
    int64_t count, rows, keys;
    int64_t tq, hd;
    int64_t r0;
    int64_t q0, qstride;
    int64_t t0, bdiv;
    int64_t q_pos0, k_pos0, kb;
    int64_t window;
    const int32_t *qpos;
    float cap;
} nnt_attn_rows;
#endif
int nnt_cuda_attn_rows_fwd_f32(const nnt_attn_rows *r, float *s, float *m, float *l,
                               float *o_acc, cudaStream_t stream);
int nnt_cuda_attn_rows_bwd_f32(const nnt_attn_rows *r, float *s, float *dp, const float *lse,
                               const float *d, cudaStream_t stream);

/* ---- softmax cross-entropy (cuda/xent.cu) ------------------------------------------------------ */
int nnt_cuda_xent_fwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, float *m, float *s,
                                float *tgt, float *d, cudaStream_t stream);
int nnt_cuda_xent_loss_f32(int64_t rows, const int32_t *targets, int32_t ignore_index,
                           const float *m, const float *s, const float *tgt, float *loss,
                           float *lse, cudaStream_t stream);
int nnt_cuda_xent_bwd_block_f32(int64_t rows, int64_t nv, int64_t v0, const float *logits,
                                int64_t ld, const int32_t *targets, int32_t ignore_index,
                                const float *m, const float *s, const float *w, float scale,
                                float eps, int64_t vocab, float *dlogits, cudaStream_t stream);
int nnt_cuda_xent_smooth_loss_f32(int64_t rows, const int32_t *targets, int32_t ignore_index,
                                  float eps, int64_t vocab, const float *s, const float *d,
                                  float *loss, cudaStream_t stream);

/* ---- embedding (cuda/embedding.cu) ---------------------------------------------------------------- */
int nnt_cuda_embedding_gather_f32(int64_t ntok, int64_t nc, const int32_t *tok, int64_t v0,
                                  int64_t nv, const float *table, int64_t ldt, float *out,
                                  int64_t ldo, cudaStream_t stream);
/* Deterministic: each thread owns one (column, class of table rows) and adds that class's
 * tokens in increasing order; no atomics. Bit-identical to the CPU kernel.                  += */
int nnt_cuda_embedding_scatter_add_f32(int64_t ntok, int64_t nc, const int32_t *tok,
                                       int64_t v0, int64_t nv, const float *dout, int64_t ldo,
                                       float *dtable, int64_t ldt, cudaStream_t stream);

/* ---- reductions (cuda/reduce.cu) ------------------------------------------------------------------
 * acc[0] += sum_i x[i]^2 in double: up to NNT_CUDA_SUMSQ_PARTIALS blocks of at least 64K
 * elements each write their sum (fixed-order block reduction) to partials (device memory,
 * NNT_CUDA_SUMSQ_PARTIALS doubles), then one warp adds them in a fixed order: deterministic,
 * the split depends on n only. partials NULL: one block does it all (slow for large n). += */
#define NNT_CUDA_SUMSQ_PARTIALS 512
int nnt_cuda_sumsq_f32(int64_t n, const float *x, float *acc, double *partials,
                       cudaStream_t stream);

/* ---- optimizer steps (cuda/optim.cu) ------------------------------------------------------------ */
int nnt_cuda_adam_step_f32(int64_t n, int decoupled, float lr, float beta1, float beta2,
                           float eps, float weight_decay, float bc1, float bc2, float grad_scale,
                           const float *g, float *p, float *m, float *v, cudaStream_t stream);
int nnt_cuda_sgd_step_f32(int64_t n, float lr, float momentum, float weight_decay,
                          float grad_scale, int first_step, const float *g, float *p,
                          float *buf, cudaStream_t stream);

/* ---- deterministic random fill (cuda/random.cu) ---------------------------------------------------
 * global_shape, tile_origin, tile_shape are HOST arrays of ndim (1..8) entries; out device.
 * Bit-identical to nnt_cpu_fill_random_f32 (double math on the device, no FMA contraction;
 * log and cos come from CUDA's libdevice instead of the C library, both faithful to ~1 ulp of
 * double, so a float result could in principle differ in its last bit when the double value
 * lies within ~1e-16 relative of a float rounding boundary: odds ~1e-8 per normal sample).   */
int nnt_cuda_fill_random_f32(int ndim, const int64_t *global_shape, const int64_t *tile_origin,
                             const int64_t *tile_shape, uint64_t seed, int dist, float a,
                             float b, float *out, cudaStream_t stream);

/* ---- mixture of experts (cuda/moe.cu) -------------------------------------------------------------
 * Twins of nnt_cpu_moe_*; map (3 m int32) and aux (E floats) are DEVICE arrays.
 * route: the per-token code of the CPU (cpu/moe_route.h), one thread per token; probs agree to
 * expf's rounding, equal probabilities choose the CPU's experts; E <= NNT_MOE_MAX_EXPERTS.
 * gather / scatter_add: the CPU's bits; scatter_add needs the rows b of its map distinct (an
 * expert's rows hold a token once), each element then has one writer: no atomics.
 * weight_grad, shared_bwd: one warp per row, sums in double in a fixed order.                 */
int nnt_cuda_moe_route_f32(int64_t n, int64_t E, int64_t k, int norm, const float *logits,
                           float *probs, int32_t *idx, float *w, cudaStream_t stream);
int nnt_cuda_moe_route_bwd_f32(int64_t n, int64_t E, int64_t k, int norm, const float *probs,
                               const int32_t *idx, const float *w, const float *dw,
                               const float *aux, float *dlogits, cudaStream_t stream);
int nnt_cuda_moe_gather_f32(int64_t width, int64_t m, const int32_t *map, const float *src,
                            const float *w, int64_t k, float *dst, cudaStream_t stream);
int nnt_cuda_moe_scatter_add_f32(int64_t width, int64_t m, const int32_t *map,
                                 const float *src, const float *w, int64_t k, float *dst,
                                 cudaStream_t stream);
int nnt_cuda_moe_weight_grad_f32(int64_t width, int64_t m, const int32_t *map,
                                 const float *dy, const float *y, int64_t k, float *dw,
                                 cudaStream_t stream);
int nnt_cuda_moe_shared_add_f32(int64_t n, int64_t width, const float *z, const float *s,
                                float *y, cudaStream_t stream);
int nnt_cuda_moe_shared_bwd_f32(int64_t n, int64_t width, int accumulate, const float *z,
                                const float *s, const float *dy, float *ds, float *dz,
                                cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* NNT_CUDA_H */
