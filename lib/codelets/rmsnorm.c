/* SPDX-License-Identifier: MIT */
/* Codelets of RMSNorm over the last dimension: one task per tile of whole rows.
 * Buffers are plain vectors; rows and the row length come from their sizes
 * (n = size of gamma, rows = size of rstd), so the default footprint is exact. */
#include "../internal.h"
#include "nnt_cpu.h"

struct rmsnorm_args {
    float eps;
};

/* buffers: x (rows, n) R, gamma (n) R, y (rows, n) W, rstd (rows) W */
static void rmsnorm_fwd_cpu(void *buffers[], void *cl_arg)
{
    const struct rmsnorm_args *a = cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[1]);
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[3]);
    nnt_cpu_rmsnorm_fwd_f32(rows, n, a->eps, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                            (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                            (float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                            (float *)STARPU_VECTOR_GET_PTR(buffers[3]));
}

/* buffers: x (rows, n) R, dy (rows, n) R, gamma (n) R, rstd (rows) R, dx (rows, n) W,
 * dgamma (n) RW */
static void rmsnorm_bwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[2]);
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[3]);
    nnt_cpu_rmsnorm_bwd_f32(rows, n, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                            (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                            (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                            (const float *)STARPU_VECTOR_GET_PTR(buffers[3]),
                            (float *)STARPU_VECTOR_GET_PTR(buffers[4]),
                            (float *)STARPU_VECTOR_GET_PTR(buffers[5]));
}

#ifdef NNT_CUDA_CODELETS
static void rmsnorm_fwd_cuda(void *buffers[], void *cl_arg)
{
    const struct rmsnorm_args *a = cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[1]);
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[3]);
    int rc = nnt_cuda_rmsnorm_fwd_f32(rows, n, a->eps,
                                      (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                      (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                      (float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                                      (float *)STARPU_VECTOR_GET_PTR(buffers[3]),
                                      nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_rmsnorm_fwd", "CUDA kernel failed (%d)", rc);
}

static void rmsnorm_bwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[2]);
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[3]);
    int rc = nnt_cuda_rmsnorm_bwd_f32(rows, n, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                      (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                      (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                                      (const float *)STARPU_VECTOR_GET_PTR(buffers[3]),
                                      (float *)STARPU_VECTOR_GET_PTR(buffers[4]),
                                      (float *)STARPU_VECTOR_GET_PTR(buffers[5]),
                                      nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_rmsnorm_bwd", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

static struct starpu_perfmodel rmsnorm_fwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_rmsnorm_fwd"};
static struct starpu_perfmodel rmsnorm_bwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_rmsnorm_bwd"};

static struct starpu_codelet rmsnorm_fwd_cl = {
    .name = "nnt_rmsnorm_fwd",
    .cpu_funcs = {rmsnorm_fwd_cpu},
    NNT_CUDA_FUNCS(rmsnorm_fwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &rmsnorm_fwd_model,
};

static struct starpu_codelet rmsnorm_bwd_cl = {
    .name = "nnt_rmsnorm_bwd",
    .cpu_funcs = {rmsnorm_bwd_cpu},
    NNT_CUDA_FUNCS(rmsnorm_bwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &rmsnorm_bwd_model,
};

int nnt_insert_rmsnorm_fwd(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t gamma,
                           float eps, starpu_data_handle_t y, starpu_data_handle_t rstd)
{
    struct rmsnorm_args args = {eps};
    struct starpu_data_descr bufs[4] = {
        {x, STARPU_R}, {gamma, STARPU_R}, {y, STARPU_W}, {rstd, STARPU_W}};
    return nnt_submit(ctx, &rmsnorm_fwd_cl, 4, bufs, &args, sizeof args);
}

int nnt_insert_rmsnorm_bwd(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t dy,
                           starpu_data_handle_t gamma, starpu_data_handle_t rstd,
                           starpu_data_handle_t dx, starpu_data_handle_t dgamma)
{
    struct rmsnorm_args args = {0.0f};
    struct starpu_data_descr bufs[6] = {
        {x, STARPU_R}, {dy, STARPU_R}, {gamma, STARPU_R}, {rstd, STARPU_R},
        {dx, STARPU_W}, {dgamma, STARPU_RW}};
    return nnt_submit(ctx, &rmsnorm_bwd_cl, 6, bufs, &args, sizeof args);
}
