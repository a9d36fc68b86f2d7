/* SPDX-License-Identifier: MIT */
/* Codelet: one GEMM step on tiles, C = alpha op(A) op(B) + beta C for a batch of matrices,
 * optionally followed by an epilogue on the finished C tile (bias, bias + GELU, GELU
 * backward; GELU in its tanh or exact form). Buffers: 0 A tile, 1 B tile (float or bfloat16
 * each), 2 C tile, then the bias tile (R) if the task has one, then the aux tile (W for
 * BIAS_GELU[_ERF], R for DGELU[_ERF]) if it has one. The operands take the precision the
 * task was submitted with (nnt_ctx_set_precision). A B tile in NNT_NF4 (a frozen base's
 * weight, the few rows of generation's decode steps: lib/ops/gemm.c) goes to a CPU-only
 * codelet that reads it as it is (nnt_cpu_nf4_rows). */
#include "../internal.h"
#include "nnt_cpu.h"

#include <string.h>

/* Per-task arguments. The tile of A is (batch, m, k) row-major, or (batch, k, m) when
 * trans_a; the tile of B is (batch, k, n), or (batch, n, k) when trans_b; C is (batch, m, n). */
struct gemm_args {
    int trans_a, trans_b;
    int64_t m, n, k, batch;
    float alpha, beta;
    int epilogue;     /* nnt_epilogue run by this task after the product                   */
    int has_bias;     /* a bias tile (n) follows C                                          */
    int has_aux;      /* an aux tile (batch, m, n) follows                                  */
    int precision;    /* nnt_precision of the operands                                      */
    int a_bf16, b_bf16;   /* the A / B tile holds bfloat16 (NNT_BF16), not float            */
    int b_nf4;            /* the B tile is NNT_NF4 (trans_b, batch 1), CPU only             */
    int64_t m_packed;     /* > 0: the B buffer is packed (nnt_gemm_packing.m), CPU only     */
    int packed_bf16;      /* with m_packed: bf16 products (nnt_gemm_packing.bf16)           */
};

/* Buffer positions of the optional tiles. */
#define BIAS_BUFFER 3
static int aux_index(const struct gemm_args *g) { return 3 + g->has_bias; }

static float *buffer_f32(void *buffers[], int i)
{
    return (float *)STARPU_VECTOR_GET_PTR(buffers[i]);
}

/* Leading dimensions of the stored (row-major) matrices of A and B. */
static int64_t ld_a(const struct gemm_args *g) { return g->trans_a ? g->m : g->k; }
static int64_t ld_b(const struct gemm_args *g) { return g->trans_b ? g->k : g->n; }

static void epilogue_cpu(const struct gemm_args *g, void *buffers[], float *c)
{
    int64_t rows = g->batch * g->m;
    const float *bias = g->has_bias ? buffer_f32(buffers, BIAS_BUFFER) : NULL;   // (n)
    switch (g->epilogue) {
    case NNT_EPILOGUE_BIAS:
        nnt_cpu_add_bcast_f32(rows, g->n, bias, c, g->n);
        break;
    case NNT_EPILOGUE_BIAS_GELU: {
        float *out = buffer_f32(buffers, aux_index(g));   // (rows, n)
        nnt_cpu_bias_gelu_f32(rows, g->n, bias, c, out);
        break;
    }
    case NNT_EPILOGUE_DGELU: {
        const float *pre = buffer_f32(buffers, aux_index(g));   // (rows, n)
        nnt_cpu_gelu_bwd_f32(rows * g->n, pre, c, c);
        break;
    }
    case NNT_EPILOGUE_BIAS_GELU_ERF: {
        float *out = buffer_f32(buffers, aux_index(g));   // (rows, n)
        nnt_cpu_bias_gelu_erf_f32(rows, g->n, bias, c, out);
        break;
    }
    case NNT_EPILOGUE_DGELU_ERF: {
        const float *pre = buffer_f32(buffers, aux_index(g));   // (rows, n)
        nnt_cpu_gelu_erf_bwd_f32(rows * g->n, pre, c, c);
        break;
    }
    default:
        break;
    }
}

/* Elements of the A and B tiles. */
static int64_t numel_a(const struct gemm_args *g) { return g->batch * g->m * g->k; }
/* Scratch elements for A's copy: rounded up so that B's copy after it starts 256-byte
 * aligned (for 2- and 4-byte elements), as cuBLAS's tensor-core kernels want. */
static int64_t slot_a(const struct gemm_args *g) { return (numel_a(g) + 127) / 128 * 128; }
static int64_t numel_b(const struct gemm_args *g) { return g->batch * g->k * g->n; }

/* Mantissa bits the operands of a precision keep (nnt_cpu_round_f32), 0 for full fp32. */
static int precision_bits(int precision)
{
    switch (precision) {
    case NNT_PRECISION_TF32:
        return 10;
    case NNT_PRECISION_BF16:
        return 7;
    default:
        return 0;
    }
}

static int operand_bits(const struct gemm_args *g) { return precision_bits(g->precision); }

/* Whether oneDNN multiplies these operands in bf16 on a CPU worker: bf16-precision products
 * and products of two bf16 tiles (exact either way), where the CPU has bf16 dot products. */
static int bf16_products(int precision, int a_bf16, int b_bf16)
{
    return (precision == NNT_PRECISION_BF16 || (a_bf16 && b_bf16)) &&
           nnt_cpu_dnnl_bf16_native();
}

/* One operand as floats for BLIS: a bf16 tile expanded (exact), a float tile rounded to
 * `bits` mantissa bits, both into dst; a float tile at full precision (bits 0) as it is. */
static const float *operand_cpu(const void *tile, int is_bf16, int64_t n, int bits, float *dst)
{
    if (is_bf16)
        nnt_cpu_bf16_to_f32(n, tile, dst);
    else if (bits)
        nnt_cpu_round_f32(n, bits, tile, dst);
    else
        return tile;
    return dst;
}

/* A and B (b NULL: A alone) as floats of the task's precision (in the worker's scratch
 * where they must be copied); 0, or -1 when the scratch cannot be had (reported). */
static int prepare_operands_cpu(const struct gemm_args *g, const float **a, const float **b)
{
    int bits = operand_bits(g);
    int64_t na = numel_a(g), nb = numel_b(g);
    int copy_a = g->a_bf16 || bits, copy_b = b && (g->b_bf16 || bits);
    if (!copy_a && !copy_b)
        return 0;
    size_t bytes = (size_t)((copy_a ? slot_a(g) : 0) + (copy_b ? nb : 0)) * sizeof(float);
    float *ws = nnt_worker_scratch(bytes);   // A (if copied) then B (if copied)
    if (!ws) {
        nnt_task_error("nnt_gemm", "no memory for the operands in float (%zu bytes)", bytes);
        return -1;
    }
    *a = operand_cpu(*a, g->a_bf16, na, bits, ws);
    if (b)
        *b = operand_cpu(*b, g->b_bf16, nb, bits, ws + (copy_a ? slot_a(g) : 0));
    return 0;
}

/* One-row products under NNT_PRECISION_BF16 (the decode steps of generation, m == 1):
 * nnt_cpu_gemv_bf16 reads a bf16 B tile (a weight copy) as it is, at half an fp32 gemv's
 * bytes, where a blocked GEMM would first reorder all of B for the one row. A's row is
 * rounded to bf16 (or expanded, from a bf16 tile) into the worker's scratch, a float B
 * tile rounded there too (then the bits are those of a bf16 B of the same values). 0 done;
 * -1 not applicable (C untouched); 1 no scratch (reported). */
static int product_row_bf16(const struct gemm_args *g, const void *a, const void *b, float *c)
{
    if (g->m != 1 || g->k <= 0 || g->alpha == 0.0f || g->precision != NNT_PRECISION_BF16)
        return -1;
    int64_t k = g->k, n = g->n;
    size_t bytes = (size_t)(slot_a(g) + (g->b_bf16 ? 0 : numel_b(g))) * sizeof(float);
    float *ws = nnt_worker_scratch(bytes);   // the rows of A (batch, k), then B if float
    if (!ws) {
        nnt_task_error("nnt_gemm", "no memory for the bf16 rows (%zu bytes)", bytes);
        return 1;
    }
    /* with m == 1 the row of op(A) is contiguous either way: (1, k) or (k, 1) */
    const float *x = operand_cpu(a, g->a_bf16, numel_a(g), operand_bits(g), ws);
    if (!g->b_bf16)
        b = operand_cpu(b, 0, numel_b(g), operand_bits(g), ws + slot_a(g));
    size_t elsize = g->b_bf16 ? sizeof(uint16_t) : sizeof(float);
    for (int64_t i = 0; i < g->batch; i++)
        nnt_cpu_gemv_bf16(g->trans_b, g->b_bf16, n, k, g->alpha, x + i * k,
                          (const char *)b + (size_t)(i * k * n) * elsize, ld_b(g), g->beta,
                          c + i * n);
    return 0;
}

/* The product by oneDNN with bf16 operands as they are (a float tile is rounded to bf16 by
 * the kernel, as NNT_PRECISION_BF16 rounds it): when oneDNN is the backend (the worker has a
 * product cache) and the CPU has bf16 dot products, for bf16-precision products and for two
 * bf16 tiles (exact either way). 0 done; -1 not done (not applicable, or oneDNN declined: C
 * untouched). */
static int product_bf16_direct(const struct gemm_args *g, const void *a, const void *b,
                               float *c)
{
    nnt_dnnl_cache *cache = nnt_worker_product_cache();
    if (!cache || !bf16_products(g->precision, g->a_bf16, g->b_bf16))
        return -1;
    /* a float tile is rounded to bf16 by the kernel; a bf16 tile is used as is */
    int dtypes = NNT_DNNL_BF16 | (g->a_bf16 ? NNT_DNNL_A_BF16 : 0) |
                 (g->b_bf16 ? NNT_DNNL_B_BF16 : 0);
    return nnt_cpu_gemm_dnnl(cache, g->trans_a, g->trans_b, dtypes, g->m, g->n, g->k, g->alpha,
                             a, ld_a(g), g->m * g->k, b, ld_b(g), g->k * g->n, g->beta, c, g->n,
                             g->m * g->n, g->batch);
}

/* The product on float operands: oneDNN when it is the backend (nnt_cpu_product_f32). */
static void product_f32(const struct gemm_args *g, const float *a, const float *b, float *c)
{
    nnt_cpu_product_f32(nnt_worker_product_cache(), g->trans_a, g->trans_b, g->m, g->n, g->k,
                        g->alpha, a, ld_a(g), g->m * g->k, b, ld_b(g), g->k * g->n, g->beta, c,
                        g->n, g->m * g->n, g->batch);
}

/* The product on a packed B (nnt_cpu_gemm_dnnl_packed): A as the unpacked product would
 * take it (a bf16 product rounds a float A itself; a float product gets A expanded or
 * rounded to the precision by prepare_operands_cpu). 0, or -1 (reported: a packed B has no
 * other reader). */
static int product_packed(const struct gemm_args *g, const float *a, const void *b, float *c)
{
    int dtypes = g->packed_bf16 ? NNT_DNNL_BF16 | (g->a_bf16 ? NNT_DNNL_A_BF16 : 0) : 0;
    if (!g->packed_bf16 && prepare_operands_cpu(g, &a, NULL))
        return -1;
    if (nnt_cpu_gemm_dnnl_packed(nnt_worker_product_cache(), g->trans_a, dtypes, g->m, g->n,
                                 g->k, g->alpha, a, ld_a(g), b, g->m_packed, g->beta, c,
                                 g->n) == 0)
        return 0;
    nnt_task_error("nnt_gemm", "oneDNN failed on a product with a packed B (%lld x %lld x %lld)",
                   (long long)g->m, (long long)g->n, (long long)g->k);
    return -1;
}

/* The product on an NF4 B tile as it is: A's rows rounded to the task's precision (or
 * expanded from bf16) into the worker's scratch, then nnt_cpu_nf4_rows (its scratch after
 * them): each row as a one-row product on B dequantized would be (the same bits; the same
 * products in another order with AVX512-BF16's dot products). 0, or -1 (no scratch:
 * reported). */
static int product_rows_nf4(const struct gemm_args *g, const void *a, const uint8_t *b,
                            float *c)
{
    int bits = operand_bits(g);
    size_t x_bytes = g->a_bf16 || bits ? (size_t)slot_a(g) * sizeof(float) : 0;
    size_t bytes = x_bytes + nnt_cpu_nf4_rows_scratch(g->m, g->k);
    char *ws = nnt_worker_scratch(bytes);   // A's rows (if copied), then B's rows
    if (!ws) {
        nnt_task_error("nnt_gemm", "no memory for an NF4 product's rows (%zu bytes)", bytes);
        return -1;
    }
    const float *x = operand_cpu(a, g->a_bf16, numel_a(g), bits, (float *)(void *)ws);
    nnt_cpu_nf4_rows(g->m, g->n, g->k, g->alpha, x, b, bits, g->beta, c, ws + x_bytes);
    return 0;
}

static void gemm_cpu(void *buffers[], void *cl_arg)
{
    const struct gemm_args *g = cl_arg;
    if (g->b_nf4) {
        float *c = buffer_f32(buffers, 2);   // (m, n)
        const uint8_t *b = (const uint8_t *)STARPU_VECTOR_GET_PTR(buffers[1]);   // (n, k), NF4
        if (product_rows_nf4(g, buffer_f32(buffers, 0), b, c) == 0)
            epilogue_cpu(g, buffers, c);
        return;
    }
    if (g->m_packed) {
        float *c = buffer_f32(buffers, 2);   // (m, n)
        if (product_packed(g, buffer_f32(buffers, 0), buffer_f32(buffers, 1), c) == 0)
            epilogue_cpu(g, buffers, c);
        return;
    }
    const float *a = buffer_f32(buffers, 0);   // (batch, m, k) or (batch, k, m); bf16 if a_bf16
    const float *b = buffer_f32(buffers, 1);   // (batch, k, n) or (batch, n, k); bf16 if b_bf16
    float *c = buffer_f32(buffers, 2);         // (batch, m, n)
    int row = product_row_bf16(g, a, b, c);   // 0 done, -1 not a bf16 row, 1 failed
    if (row > 0)
        return;
    if (row < 0 && product_bf16_direct(g, a, b, c) != 0) {
        if (prepare_operands_cpu(g, &a, &b))
            return;
        product_f32(g, a, b, c);
    }
    epilogue_cpu(g, buffers, c);
}

#ifdef NNT_CUDA_CODELETS
static int epilogue_cuda(const struct gemm_args *g, void *buffers[], float *c, cudaStream_t s)
{
    int64_t rows = g->batch * g->m;
    const float *bias = g->has_bias ? buffer_f32(buffers, BIAS_BUFFER) : NULL;   // (n)
    switch (g->epilogue) {
    case NNT_EPILOGUE_BIAS:
        return nnt_cuda_add_bcast_f32(rows, g->n, bias, c, g->n, s);
    case NNT_EPILOGUE_BIAS_GELU:
        return nnt_cuda_bias_gelu_f32(rows, g->n, bias, c, buffer_f32(buffers, aux_index(g)), s);
    case NNT_EPILOGUE_DGELU:
        return nnt_cuda_gelu_bwd_f32(rows * g->n, buffer_f32(buffers, aux_index(g)), c, c, s);
    case NNT_EPILOGUE_BIAS_GELU_ERF:
        return nnt_cuda_bias_gelu_erf_f32(rows, g->n, bias, c, buffer_f32(buffers, aux_index(g)),
                                          s);
    case NNT_EPILOGUE_DGELU_ERF:
        return nnt_cuda_gelu_erf_bwd_f32(rows * g->n, buffer_f32(buffers, aux_index(g)), c, c,
                                         s);
    default:
        return 0;
    }
}

/* What remains of the epilogue after a cuBLASLt matmul that took its part of it
 * (product_epilogue_lt): cuBLASLt's GELU is the tanh one, so the exact GELU's epilogues have
 * it add the bias only (BIAS_GELU_ERF) and run the GELU kernel on the finished tile here. */
static int epilogue_after_lt_cuda(const struct gemm_args *g, void *buffers[], float *c,
                                  cudaStream_t s)
{
    int64_t mn = g->batch * g->m * g->n;
    if (g->epilogue == NNT_EPILOGUE_BIAS_GELU_ERF)
        return nnt_cuda_gelu_erf_fwd_f32(mn, c, buffer_f32(buffers, aux_index(g)), s);
    return 0;
}

/* One operand for a product with bf16 operands: a bf16 tile as it is, a float tile
 * converted into dst. */
static const uint16_t *operand_bf16_cuda(const void *tile, int is_bf16, int64_t n,
                                         uint16_t *dst, cudaStream_t stream, int *rc)
{
    if (is_bf16)
        return tile;
    if (*rc == 0)
        *rc = nnt_cuda_f32_to_bf16(n, tile, dst, stream);
    return dst;
}

/* One operand for a float or TF32 product: a bf16 tile expanded (exact) into dst, a float
 * tile rounded to `bits` into dst, or (bits 0) the float tile itself. */
static const float *operand_f32_cuda(const void *tile, int is_bf16, int64_t n, int bits,
                                     float *dst, cudaStream_t stream, int *rc)
{
    if (!is_bf16 && !bits)
        return tile;
    if (*rc == 0)
        *rc = is_bf16 ? nnt_cuda_bf16_to_f32(n, tile, dst, stream)
                      : nnt_cuda_round_f32(n, bits, tile, dst, stream);
    return dst;
}

/* The operands as the GPU's product will read them, and its math mode. */
struct cuda_operands {
    const void *a, *b;
    int math;   /* NNT_CUDA_MATH_* */
};

/* When an operand is rounded or held in bf16, it is first rounded, converted or expanded by
 * our own kernels into the worker's GPU scratch, exactly as the CPU codelet does (so the
 * tensor cores see operands they represent exactly): bf16 x bf16 for NNT_PRECISION_BF16,
 * else TF32 or float operands. Returns 0, 1 (no scratch memory), or a kernel's status. */
static int prepare_operands_cuda(const struct gemm_args *g, const void *a, const void *b,
                                 cudaStream_t stream, struct cuda_operands *op)
{
    int bf16 = g->precision == NNT_PRECISION_BF16, bits = operand_bits(g), rc = 0;
    op->a = a;
    op->b = b;
    op->math = bf16 ? NNT_CUDA_MATH_BF16 : bits ? NNT_CUDA_MATH_TF32 : NNT_CUDA_MATH_F32;
    if (!bf16 && !bits && !g->a_bf16 && !g->b_bf16)
        return 0;   /* float tiles in a float product: used in place */
    int64_t na = numel_a(g), nb = numel_b(g), sa = slot_a(g);
    size_t elsize = bf16 ? sizeof(uint16_t) : sizeof(float);
    char *ws = nnt_worker_scratch((size_t)(sa + nb) * elsize);   // A's slot, then B's
    if (!ws)
        return 1;
    if (bf16) {
        op->a = operand_bf16_cuda(a, g->a_bf16, na, (uint16_t *)ws, stream, &rc);
        op->b = operand_bf16_cuda(b, g->b_bf16, nb, (uint16_t *)ws + sa, stream, &rc);
    } else {
        op->a = operand_f32_cuda(a, g->a_bf16, na, bits, (float *)ws, stream, &rc);
        op->b = operand_f32_cuda(b, g->b_bf16, nb, bits, (float *)ws + sa, stream, &rc);
    }
    return rc;
}

/* The product by cuBLAS (any batch), without epilogue. */
static int product_cuda(const struct gemm_args *g, const struct cuda_operands *op, float *c,
                        cudaStream_t stream)
{
    return nnt_cuda_gemm(op->math, g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, op->a,
                         ld_a(g), g->m * g->k, op->b, ld_b(g), g->k * g->n, g->beta, c, g->n,
                         g->m * g->n, g->batch, starpu_cublas_get_local_handle(), stream);
}

/* The product and its epilogue in one cuBLASLt matmul when it can: one matrix (batch 1)
 * and an epilogue that cuBLASLt has (all of it, or for BIAS_GELU_ERF the bias: then
 * epilogue_after_lt_cuda does the rest). Returns 1 when it cannot (nothing enqueued). */
static int product_epilogue_lt(const struct gemm_args *g, void *buffers[],
                               const struct cuda_operands *op, float *c, cudaStream_t stream)
{
    static const int lt_epilogue[] = {   /* -1: none to fuse (a plain product by cuBLAS) */
        [NNT_EPILOGUE_NONE] = -1,
        [NNT_EPILOGUE_BIAS] = NNT_CUDA_EPI_BIAS,
        [NNT_EPILOGUE_BIAS_GELU] = NNT_CUDA_EPI_BIAS_GELU,
        [NNT_EPILOGUE_DGELU] = NNT_CUDA_EPI_DGELU,
        [NNT_EPILOGUE_BIAS_GELU_ERF] = NNT_CUDA_EPI_BIAS,
        [NNT_EPILOGUE_DGELU_ERF] = -1,
    };
    if (g->batch != 1 || g->epilogue < 0 ||
        g->epilogue >= (int)(sizeof lt_epilogue / sizeof lt_epilogue[0]) ||
        lt_epilogue[g->epilogue] < 0)
        return 1;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_size;
    if (nnt_cuda_worker_lt(&lt, &ws, &ws_size))
        return 1;
    const float *bias = g->has_bias ? buffer_f32(buffers, BIAS_BUFFER) : NULL;   // (n)
    float *aux = g->has_aux ? buffer_f32(buffers, aux_index(g)) : NULL;           // (m, n)
    if (g->epilogue == NNT_EPILOGUE_BIAS_GELU_ERF)
        aux = NULL;   /* cuBLASLt adds the bias only */
    return nnt_cuda_gemm_lt(lt, op->math, lt_epilogue[g->epilogue], g->trans_a, g->trans_b,
                            g->m, g->n, g->k, g->alpha, op->a, ld_a(g), op->b, ld_b(g), g->beta,
                            c, bias, aux, ws, ws_size, stream);
}

static void gemm_cuda(void *buffers[], void *cl_arg)
{
    const struct gemm_args *g = cl_arg;
    const void *a = (const void *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (batch, m, k)|(k, m)
    const void *b = (const void *)STARPU_VECTOR_GET_PTR(buffers[1]);   // (batch, k, n)|(n, k)
    float *c = buffer_f32(buffers, 2);                                  // (batch, m, n)
    cudaStream_t stream = nnt_cuda_task_stream();
    struct cuda_operands op;
    int rc = prepare_operands_cuda(g, a, b, stream, &op);
    if (rc == 1) {
        nnt_task_error("nnt_gemm", "no GPU memory for the rounded operands");
        return;
    }
    if (rc == 0 && product_epilogue_lt(g, buffers, &op, c, stream) == 0) {
        rc = epilogue_after_lt_cuda(g, buffers, c, stream);
    } else if (rc == 0) {
        /* not fused (nothing enqueued): the product, then our epilogue kernel */
        rc = product_cuda(g, &op, c, stream);
        if (rc == 0)
            rc = epilogue_cuda(g, buffers, c, stream);
    }
    if (rc)
        nnt_task_error("nnt_gemm", "CUDA GEMM or epilogue failed (%d)", rc);
}
#endif

/* Tasks with equal buffer sizes can differ in transposes, m/n/k split, batch, epilogue,
 * precision and operand dtypes: hash all of them so the history-based model keeps them
 * apart. */
static uint32_t gemm_footprint(struct starpu_task *task)
{
    const struct gemm_args *g = task->cl_arg;
    int64_t key[11] = {g->trans_a, g->trans_b, g->m, g->n, g->k, g->batch, g->epilogue,
                       g->beta == 0.0f, g->precision, g->a_bf16 + 2 * g->b_bf16 + 4 * g->b_nf4,
                       g->m_packed != 0};
    uint32_t h = 0;
    for (int i = 0; i < 11; i++) {
        h = starpu_hash_crc32c_be((uint32_t)((uint64_t)key[i] >> 32), h);
        h = starpu_hash_crc32c_be((uint32_t)key[i], h);
    }
    return h;
}

static struct starpu_perfmodel gemm_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_gemm",
    .footprint = gemm_footprint,
};

static struct starpu_codelet gemm_cl = {
    .name = "nnt_gemm",
    .cpu_funcs = {gemm_cpu},
#ifdef NNT_CUDA_CODELETS
    .cuda_funcs = {gemm_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gemm_model,
};

/* Products on a packed B: CPU workers only (the layout is oneDNN's), the same CPU function. */
static struct starpu_perfmodel gemm_packed_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_gemm_packed",
    .footprint = gemm_footprint,
};

static struct starpu_codelet gemm_packed_cl = {
    .name = "nnt_gemm",
    .cpu_funcs = {gemm_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gemm_packed_model,
};

/* Products on an NF4 B: CPU workers only (no CUDA kernel reads NF4 yet). */
static struct starpu_perfmodel gemm_nf4_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_gemm_nf4",
    .footprint = gemm_footprint,
};

static struct starpu_codelet gemm_nf4_cl = {
    .name = "nnt_gemm_nf4",
    .cpu_funcs = {gemm_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gemm_nf4_model,
};

int nnt_insert_gemm(nnt_ctx *ctx, int trans_a, int trans_b, const int64_t *mnkb, float alpha,
                    float beta, enum starpu_data_access_mode c_mode, int epilogue,
                    const starpu_data_handle_t *tiles, const nnt_gemm_packing *packed)
{
    struct gemm_args g;
    memset(&g, 0, sizeof g);   /* the footprint and the copy see no padding garbage */
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.m = mnkb[0];
    g.n = mnkb[1];
    g.k = mnkb[2];
    g.batch = mnkb[3];
    g.alpha = alpha;
    g.beta = beta;
    g.epilogue = epilogue;
    g.has_bias = epilogue != NNT_EPILOGUE_NONE && tiles[3] != NULL;
    g.has_aux = nnt_epilogue_writes_aux(epilogue) || nnt_epilogue_reads_aux(epilogue);
    g.precision = ctx->precision;
    g.a_bf16 = starpu_vector_get_elemsize(tiles[0]) == sizeof(uint16_t);
    g.b_bf16 = !packed && starpu_vector_get_elemsize(tiles[1]) == sizeof(uint16_t);
    g.b_nf4 = !packed && starpu_vector_get_elemsize(tiles[1]) == 1;   /* NNT_NF4's tiles */
    g.m_packed = packed ? packed->m : 0;
    g.packed_bf16 = packed ? packed->bf16 : 0;

    struct starpu_data_descr bufs[5];
    int nbuf = 0;
    bufs[nbuf++] = (struct starpu_data_descr){tiles[0], STARPU_R};
    bufs[nbuf++] = (struct starpu_data_descr){tiles[1], STARPU_R};
    bufs[nbuf++] = (struct starpu_data_descr){tiles[2], c_mode};
    if (g.has_bias)
        bufs[nbuf++] = (struct starpu_data_descr){tiles[3], STARPU_R};
    if (g.has_aux)
        bufs[nbuf++] = (struct starpu_data_descr){
            tiles[4], nnt_epilogue_writes_aux(epilogue) ? STARPU_W : STARPU_R};
    struct starpu_codelet *cl = packed ? &gemm_packed_cl : g.b_nf4 ? &gemm_nf4_cl : &gemm_cl;
    return nnt_submit(ctx, cl, nbuf, bufs, &g, sizeof g);
}

/* ---- products summed over several k tiles in one task ---------------------------------- */

/* Buffers: the nk tiles of A, the nk tiles of B, then C; one matrix (batch 1), no epilogue. */
struct ksum_args {
    int trans_a, trans_b, a_bf16, b_bf16, nk;
    int64_t m, n;
    int64_t k[NNT_GEMM_KSUM_MAX];
    float alpha, beta;
};

static void gemm_ksum_cpu(void *buffers[], void *cl_arg)
{
    const struct ksum_args *g = cl_arg;
    const void *a[NNT_GEMM_KSUM_MAX], *b[NNT_GEMM_KSUM_MAX];
    for (int i = 0; i < g->nk; i++) {
        a[i] = (const void *)STARPU_VECTOR_GET_PTR(buffers[i]);          // (m, k_i) | (k_i, m)
        b[i] = (const void *)STARPU_VECTOR_GET_PTR(buffers[g->nk + i]);  // (k_i, n) | (n, k_i)
    }
    float *c = buffer_f32(buffers, 2 * g->nk);                            // (m, n)
    int dtypes = (g->a_bf16 ? NNT_DNNL_A_BF16 : 0) | (g->b_bf16 ? NNT_DNNL_B_BF16 : 0);
    nnt_dnnl_cache *cache = nnt_worker_product_cache();
    if (nnt_cpu_gemm_dnnl_ksum(cache, g->trans_a, g->trans_b, dtypes, g->m, g->n, g->nk, g->k,
                               g->alpha, a, b, g->beta, c, g->n) == 0)
        return;
    /* no memory for the joined operands: the k tiles one after the other, as separate
     * tasks would have multiplied them */
    for (int i = 0; i < g->nk; i++)
        if (nnt_cpu_gemm_dnnl(cache, g->trans_a, g->trans_b, dtypes | NNT_DNNL_BF16, g->m, g->n,
                              g->k[i], g->alpha, a[i], g->trans_a ? g->m : g->k[i], 0, b[i],
                              g->trans_b ? g->k[i] : g->n, 0, i ? 1.0f : g->beta, c, g->n, 0,
                              1)) {
            nnt_task_error("nnt_gemm", "oneDNN failed on a bf16 product summed over %d k tiles "
                           "(%lld x %lld)", g->nk, (long long)g->m, (long long)g->n);
            return;
        }
}

static uint32_t gemm_ksum_footprint(struct starpu_task *task)
{
    const struct ksum_args *g = task->cl_arg;
    int64_t ktotal = 0;
    for (int i = 0; i < g->nk; i++)
        ktotal += g->k[i];
    int64_t key[7] = {g->trans_a, g->trans_b, g->m, g->n, ktotal, g->nk,
                      g->a_bf16 + 2 * g->b_bf16 + 4 * (g->beta == 0.0f)};
    uint32_t h = 0;
    for (int i = 0; i < 7; i++) {
        h = starpu_hash_crc32c_be((uint32_t)((uint64_t)key[i] >> 32), h);
        h = starpu_hash_crc32c_be((uint32_t)key[i], h);
    }
    return h;
}

static struct starpu_perfmodel gemm_ksum_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_gemm_ksum",
    .footprint = gemm_ksum_footprint,
};

static struct starpu_codelet gemm_ksum_cl = {
    .name = "nnt_gemm",
    .cpu_funcs = {gemm_ksum_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gemm_ksum_model,
};

int nnt_gemm_ksum_applies(const nnt_ctx *ctx)
{
    return ctx->ksum && ctx->precision == NNT_PRECISION_BF16 &&
           bf16_products(ctx->precision, 0, 0);
}

int nnt_insert_gemm_ksum(nnt_ctx *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int nk,
                         const int64_t *k, float alpha, float beta,
                         const starpu_data_handle_t *a, const starpu_data_handle_t *b,
                         starpu_data_handle_t c)
{
    struct ksum_args g;
    memset(&g, 0, sizeof g);
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.a_bf16 = starpu_vector_get_elemsize(a[0]) == sizeof(uint16_t);
    g.b_bf16 = starpu_vector_get_elemsize(b[0]) == sizeof(uint16_t);
    g.nk = nk;
    g.m = m;
    g.n = n;
    g.alpha = alpha;
    g.beta = beta;
    struct starpu_data_descr bufs[2 * NNT_GEMM_KSUM_MAX + 1];
    for (int i = 0; i < nk; i++) {
        g.k[i] = k[i];
        bufs[i] = (struct starpu_data_descr){a[i], STARPU_R};
        bufs[nk + i] = (struct starpu_data_descr){b[i], STARPU_R};
    }
    bufs[2 * nk] = (struct starpu_data_descr){c, beta == 0.0f ? STARPU_W : STARPU_RW};
    return nnt_submit(ctx, &gemm_ksum_cl, 2 * nk + 1, bufs, &g, sizeof g);
}

/* ---- packing B -------------------------------------------------------------------------- */

struct pack_args {
    int trans_b, b_bf16;
    int64_t n, k;
    nnt_gemm_packing p;
};

static void gemm_pack_cpu(void *buffers[], void *cl_arg)
{
    const struct pack_args *pa = cl_arg;
    const void *b = (const void *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (k, n) or (n, k)
    void *packed = (void *)STARPU_VECTOR_GET_PTR(buffers[1]);          // oneDNN's layout
    int dtypes = (pa->p.bf16 ? NNT_DNNL_BF16 : 0) | (pa->b_bf16 ? NNT_DNNL_B_BF16 : 0);
    if (nnt_cpu_dnnl_pack(nnt_worker_product_cache(), pa->trans_b, dtypes, pa->p.bits, pa->p.m,
                          pa->n, pa->k, b, packed))
        nnt_task_error("nnt_gemm_pack", "oneDNN failed to pack a B tile (%lld x %lld)",
                       (long long)pa->k, (long long)pa->n);
}

static struct starpu_perfmodel gemm_pack_model = {
    .type = STARPU_HISTORY_BASED,
    .symbol = "nnt_gemm_pack",
};

static struct starpu_codelet gemm_pack_cl = {
    .name = "nnt_gemm_pack",
    .cpu_funcs = {gemm_pack_cpu},
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &gemm_pack_model,
};

void nnt_gemm_packing_of(const nnt_ctx *ctx, int a_bf16, int b_bf16, int trans_b, int64_t m,
                         nnt_gemm_packing *p)
{
    p->bf16 = bf16_products(ctx->precision, a_bf16, b_bf16);
    p->bits = p->bf16 ? 0 : precision_bits(ctx->precision);
    p->m = m;
    p->trans_b = trans_b != 0;
}

size_t nnt_gemm_pack_bytes(const nnt_gemm_packing *p, int64_t n, int64_t k)
{
    return nnt_cpu_dnnl_pack_bytes(p->trans_b, p->bf16 ? NNT_DNNL_BF16 : 0, p->m, n, k);
}

int nnt_insert_gemm_pack(nnt_ctx *ctx, const nnt_gemm_packing *p, int trans_b, int64_t n,
                         int64_t k, starpu_data_handle_t b, starpu_data_handle_t packed)
{
    struct pack_args pa;
    memset(&pa, 0, sizeof pa);
    pa.trans_b = trans_b;
    pa.b_bf16 = starpu_vector_get_elemsize(b) == sizeof(uint16_t);
    pa.n = n;
    pa.k = k;
    pa.p = *p;
    struct starpu_data_descr bufs[2] = {{b, STARPU_R}, {packed, STARPU_W}};
    return nnt_submit(ctx, &gemm_pack_cl, 2, bufs, &pa, sizeof pa);
}
