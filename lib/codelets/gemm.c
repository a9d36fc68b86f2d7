/* Codelet: one GEMM step on tiles, C = alpha op(A) op(B) + beta C for a batch of matrices,
 * optionally followed by an epilogue on the finished C tile (bias, bias + GELU, GELU
 * backward). Buffers: 0 A tile, 1 B tile, 2 C tile, then the bias tile (R) if the task has
 * one, then the aux tile (W for BIAS_GELU, R for DGELU) if it has one. */
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
    default:
        break;
    }
}

/* Elements of the A and B tiles. */
static int64_t numel_a(const struct gemm_args *g) { return g->batch * g->m * g->k; }
static int64_t numel_b(const struct gemm_args *g) { return g->batch * g->k * g->n; }

/* Mantissa bits the operands keep (nnt_cpu_round_f32), 0 for full fp32. */
static int operand_bits(const struct gemm_args *g)
{
    switch (g->precision) {
    case NNT_PRECISION_TF32:
        return 10;
    case NNT_PRECISION_BF16:
        return 7;
    default:
        return 0;
    }
}

/* A and B rounded to the task's precision into the worker's scratch; 0, or -1 when the
 * scratch cannot be had (reported). */
static int round_operands_cpu(const struct gemm_args *g, const float **a, const float **b)
{
    int bits = operand_bits(g);
    int64_t na = numel_a(g), nb = numel_b(g);
    if (bits == 0 || g->k == 0 || g->alpha == 0.0f)
        return 0;
    float *ws = nnt_worker_scratch((size_t)(na + nb) * sizeof(float));   // A then B
    if (!ws) {
        nnt_task_error("nnt_gemm", "no memory for the rounded operands (%lld bytes)",
                       (long long)((na + nb) * (int64_t)sizeof(float)));
        return -1;
    }
    nnt_cpu_round_f32(na, bits, *a, ws);
    nnt_cpu_round_f32(nb, bits, *b, ws + na);
    *a = ws;
    *b = ws + na;
    return 0;
}

static void gemm_cpu(void *buffers[], void *cl_arg)
{
    const struct gemm_args *g = cl_arg;
    const float *a = buffer_f32(buffers, 0);   // (batch, m, k) or (batch, k, m)
    const float *b = buffer_f32(buffers, 1);   // (batch, k, n) or (batch, n, k)
    float *c = buffer_f32(buffers, 2);         // (batch, m, n)
    if (round_operands_cpu(g, &a, &b))
        return;
    nnt_cpu_gemm_f32(g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, a, ld_a(g),
                     g->m * g->k, b, ld_b(g), g->k * g->n, g->beta, c, g->n, g->m * g->n,
                     g->batch);
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
    default:
        return 0;
    }
}

/* The whole product in this one task with a fresh C: cuBLASLt can fuse bias and GELU. */
static int fusable_bias_gelu(const struct gemm_args *g)
{
    return g->epilogue == NNT_EPILOGUE_BIAS_GELU && g->beta == 0.0f && g->alpha == 1.0f &&
           g->batch == 1 && g->k > 0;
}

/* The product with TF32 or bf16 operands: A and B are first rounded (converted) by our own
 * kernel into the worker's GPU scratch, exactly as nnt_cpu_round_f32 does on the CPU, so the
 * tensor cores see operands they represent exactly; then cuBLAS with float accumulation. */
static int gemm_cuda_reduced(const struct gemm_args *g, const float *a, const float *b,
                             float *c, cudaStream_t stream)
{
    cublasHandle_t h = starpu_cublas_get_local_handle();
    int64_t na = numel_a(g), nb = numel_b(g);
    int bf16 = g->precision == NNT_PRECISION_BF16;
    size_t elsize = bf16 ? sizeof(uint16_t) : sizeof(float);
    void *ws = nnt_worker_scratch((size_t)(na + nb) * elsize);   // A then B
    if (!ws)
        return 1;   /* kernels return 0 or negative: 1 is ours */
    int rc;
    if (bf16) {
        uint16_t *a16 = ws, *b16 = a16 + na;
        rc = nnt_cuda_f32_to_bf16(na, a, a16, stream);
        if (rc == 0)
            rc = nnt_cuda_f32_to_bf16(nb, b, b16, stream);
        if (rc == 0)
            rc = nnt_cuda_gemm_bf16(g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, a16,
                                    ld_a(g), g->m * g->k, b16, ld_b(g), g->k * g->n, g->beta,
                                    c, g->n, g->m * g->n, g->batch, h, stream);
        return rc;
    }
    float *a32 = ws, *b32 = a32 + na;
    rc = nnt_cuda_round_f32(na, operand_bits(g), a, a32, stream);
    if (rc == 0)
        rc = nnt_cuda_round_f32(nb, operand_bits(g), b, b32, stream);
    if (rc == 0)
        rc = nnt_cuda_gemm_tf32(g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, a32,
                                ld_a(g), g->m * g->k, b32, ld_b(g), g->k * g->n, g->beta, c,
                                g->n, g->m * g->n, g->batch, h, stream);
    return rc;
}

static void gemm_cuda(void *buffers[], void *cl_arg)
{
    const struct gemm_args *g = cl_arg;
    const float *a = buffer_f32(buffers, 0);   // (batch, m, k) or (batch, k, m)
    const float *b = buffer_f32(buffers, 1);   // (batch, k, n) or (batch, n, k)
    float *c = buffer_f32(buffers, 2);         // (batch, m, n)
    cudaStream_t stream = starpu_cuda_get_local_stream();
    int rc;
    if (g->precision != NNT_PRECISION_FP32) {
        rc = gemm_cuda_reduced(g, a, b, c, stream);
        if (rc == 0)
            rc = epilogue_cuda(g, buffers, c, stream);
    } else if (fusable_bias_gelu(g)) {
        cublasLtHandle_t lt;
        void *ws;
        size_t ws_size;
        rc = nnt_cuda_worker_lt(&lt, &ws, &ws_size);
        if (rc == 0) {
            const float *bias = g->has_bias ? buffer_f32(buffers, BIAS_BUFFER) : NULL;
            rc = nnt_cuda_gemm_bias_gelu_f32(lt, g->trans_a, g->trans_b, g->m, g->n, g->k, a,
                                             ld_a(g), b, ld_b(g), bias, c,
                                             buffer_f32(buffers, aux_index(g)), ws, ws_size,
                                             stream);
        }
    } else {
        rc = nnt_cuda_gemm_f32(g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, a, ld_a(g),
                               g->m * g->k, b, ld_b(g), g->k * g->n, g->beta, c, g->n,
                               g->m * g->n, g->batch, starpu_cublas_get_local_handle(), stream);
        if (rc == 0)
            rc = epilogue_cuda(g, buffers, c, stream);
    }
    if (rc == 1)
        nnt_task_error("nnt_gemm", "no GPU memory for the rounded operands");
    else if (rc)
        nnt_task_error("nnt_gemm", "CUDA GEMM or epilogue failed (%d)", rc);
}
#endif

/* Tasks with equal buffer sizes can differ in transposes, m/n/k split, batch, epilogue and
 * precision: hash all of them so the history-based model keeps them apart. */
static uint32_t gemm_footprint(struct starpu_task *task)
{
    const struct gemm_args *g = task->cl_arg;
    int64_t key[9] = {g->trans_a, g->trans_b, g->m, g->n, g->k, g->batch, g->epilogue,
                      g->beta == 0.0f, g->precision};
    uint32_t h = 0;
    for (int i = 0; i < 9; i++) {
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

int nnt_insert_gemm(nnt_ctx *ctx, int trans_a, int trans_b, const int64_t *mnkb, float alpha,
                    float beta, enum starpu_data_access_mode c_mode, int epilogue,
                    const starpu_data_handle_t *tiles)
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
    g.has_aux = epilogue == NNT_EPILOGUE_BIAS_GELU || epilogue == NNT_EPILOGUE_DGELU;
    g.precision = ctx->precision;

    struct starpu_data_descr bufs[5];
    int nbuf = 0;
    bufs[nbuf++] = (struct starpu_data_descr){tiles[0], STARPU_R};
    bufs[nbuf++] = (struct starpu_data_descr){tiles[1], STARPU_R};
    bufs[nbuf++] = (struct starpu_data_descr){tiles[2], c_mode};
    if (g.has_bias)
        bufs[nbuf++] = (struct starpu_data_descr){tiles[3], STARPU_R};
    if (g.has_aux)
        bufs[nbuf++] = (struct starpu_data_descr){
            tiles[4], epilogue == NNT_EPILOGUE_BIAS_GELU ? STARPU_W : STARPU_R};
    return nnt_submit(ctx, &gemm_cl, nbuf, bufs, &g, sizeof g);
}
