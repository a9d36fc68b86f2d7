/* SPDX-License-Identifier: MIT */
/* Codelets of LayerNorm over the last dimension: one task per tile of whole rows.
 * Buffers are plain vectors; rows and the row length come from their sizes
 * (n = size of gamma, rows = size of mean), so the default footprint is exact. */
#include "../internal.h"
#include "nnt_cpu.h"

struct layernorm_args {
    float eps;
};

/* buffers: x (rows, n) R, gamma (n) R, beta (n) R, y (rows, n) W, mean (rows) W,
 * rstd (rows) W */
static void layernorm_fwd_cpu(void *buffers[], void *cl_arg)
{
    const struct layernorm_args *a = cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[1]);
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[4]);
    nnt_cpu_layernorm_fwd_f32(rows, n, a->eps,
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                              (float *)STARPU_VECTOR_GET_PTR(buffers[3]),
                              (float *)STARPU_VECTOR_GET_PTR(buffers[4]),
                              (float *)STARPU_VECTOR_GET_PTR(buffers[5]));
}

/* buffers: x (rows, n) R, dy (rows, n) R, gamma (n) R, mean (rows) R, rstd (rows) R,
 * dx (rows, n) W, dgamma (n) RW, dbeta (n) RW */
static void layernorm_bwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[2]);
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[3]);
    nnt_cpu_layernorm_bwd_f32(rows, n, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[3]),
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[4]),
                              (float *)STARPU_VECTOR_GET_PTR(buffers[5]),
                              (float *)STARPU_VECTOR_GET_PTR(buffers[6]),
                              (float *)STARPU_VECTOR_GET_PTR(buffers[7]));
}

#ifdef NNT_CUDA_CODELETS
static void layernorm_fwd_cuda(void *buffers[], void *cl_arg)
{
    const struct layernorm_args *a = cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[1]);
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[4]);
    int rc = nnt_cuda_layernorm_fwd_f32(rows, n, a->eps,
                                        (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                        (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                        (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                                        (float *)STARPU_VECTOR_GET_PTR(buffers[3]),
                                        (float *)STARPU_VECTOR_GET_PTR(buffers[4]),
                                        (float *)STARPU_VECTOR_GET_PTR(buffers[5]),
                                        nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_layernorm_fwd", "CUDA kernel failed (%d)", rc);
}

static void layernorm_bwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[2]);
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[3]);
    int rc = nnt_cuda_layernorm_bwd_f32(rows, n, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                        (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                        (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                                        (const float *)STARPU_VECTOR_GET_PTR(buffers[3]),
                                        (const float *)STARPU_VECTOR_GET_PTR(buffers[4]),
                                        (float *)STARPU_VECTOR_GET_PTR(buffers[5]),
                                        (float *)STARPU_VECTOR_GET_PTR(buffers[6]),
                                        (float *)STARPU_VECTOR_GET_PTR(buffers[7]),
                                        nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_layernorm_bwd", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

static struct starpu_perfmodel layernorm_fwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_layernorm_fwd"};
static struct starpu_perfmodel layernorm_bwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_layernorm_bwd"};

static struct starpu_codelet layernorm_fwd_cl = {
    .name = "nnt_layernorm_fwd",
    .cpu_funcs = {layernorm_fwd_cpu},
    NNT_CUDA_FUNCS(layernorm_fwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &layernorm_fwd_model,
};

static struct starpu_codelet layernorm_bwd_cl = {
    .name = "nnt_layernorm_bwd",
    .cpu_funcs = {layernorm_bwd_cpu},
    NNT_CUDA_FUNCS(layernorm_bwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &layernorm_bwd_model,
};

int nnt_insert_layernorm_fwd(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t gamma,
                             starpu_data_handle_t beta, float eps, starpu_data_handle_t y,
                             starpu_data_handle_t mean, starpu_data_handle_t rstd)
{
    struct layernorm_args args = {eps};
    struct starpu_data_descr bufs[6] = {
        {x, STARPU_R}, {gamma, STARPU_R}, {beta, STARPU_R},
        {y, STARPU_W}, {mean, STARPU_W}, {rstd, STARPU_W}};
    return nnt_submit(ctx, &layernorm_fwd_cl, 6, bufs, &args, sizeof args);
}

int nnt_insert_layernorm_bwd(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t dy,
                             starpu_data_handle_t gamma, starpu_data_handle_t mean,
                             starpu_data_handle_t rstd, starpu_data_handle_t dx,
                             starpu_data_handle_t dgamma, starpu_data_handle_t dbeta)
{
    struct layernorm_args args = {0.0f};
    struct starpu_data_descr bufs[8] = {
        {x, STARPU_R}, {dy, STARPU_R}, {gamma, STARPU_R}, {mean, STARPU_R}, {rstd, STARPU_R},
        {dx, STARPU_W}, {dgamma, STARPU_RW}, {dbeta, STARPU_RW}};
    return nnt_submit(ctx, &layernorm_bwd_cl, 8, bufs, &args, sizeof args);
}
