/* SPDX-License-Identifier: MIT */
/* Codelets of the broadcast add and the reductions, one task per tile (pair):
 *   add_bcast: y (outer, inner) += x (inner)
 *   sum_outer: y (inner) = [beta y +] column sums of x (outer, inner)   (accumulates)
 *   sumsq:     acc (1) = sum of squares of x (n)
 * outer and inner come from the buffer sizes (inner = size of the (inner) buffer). */
#include "../internal.h"
#include "nnt_cpu.h"

/* The first sum_outer task of a y tile applies beta (0: y is written, not read); later
 * tasks only accumulate. */
struct sum_outer_args {
    int first;
    float beta;
};

/* ---- CPU ------------------------------------------------------------------------------ */

/* buffers: x (inner) R, y (outer, inner) RW */
static void add_bcast_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int64_t inner = nnt_tile_numel(buffers[0]);
    int64_t outer = nnt_tile_numel(buffers[1]) / inner;
    nnt_cpu_add_bcast_f32(outer, inner, nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]), inner);
}

/* buffers: x (outer, inner) R, y (inner) W (first task, beta == 0) or RW */
static void sum_outer_cpu(void *buffers[], void *cl_arg)
{
    const struct sum_outer_args *a = cl_arg;
    int64_t inner = nnt_tile_numel(buffers[1]);
    int64_t outer = nnt_tile_numel(buffers[0]) / inner;
    float *y = nnt_tile_f32(buffers[1]);   // (inner)
    if (a->first && a->beta == 0.0f)
        nnt_cpu_fill_f32(inner, 0.0f, y);
    else if (a->first && a->beta != 1.0f)
        nnt_cpu_scale_f32(inner, a->beta, y);
    nnt_cpu_sum_outer_f32(outer, inner, nnt_tile_f32(buffers[0]), inner, y);
}

/* buffers: x (n) R, acc (1, a StarPU variable) W */
static void sumsq_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    float *acc = (float *)STARPU_VARIABLE_GET_PTR(buffers[1]);
    *acc = 0.0f;
    nnt_cpu_sumsq_f32(nnt_tile_numel(buffers[0]), nnt_tile_f32(buffers[0]), acc);
}

/* ---- CUDA ----------------------------------------------------------------------------- */

#ifdef NNT_CUDA_CODELETS
static void add_bcast_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int64_t inner = nnt_tile_numel(buffers[0]);
    int64_t outer = nnt_tile_numel(buffers[1]) / inner;
    int rc = nnt_cuda_add_bcast_f32(outer, inner, nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]),
                                    inner, nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_add_bcast", "CUDA kernel failed (%d)", rc);
}

static void sum_outer_cuda(void *buffers[], void *cl_arg)
{
    const struct sum_outer_args *a = cl_arg;
    cudaStream_t stream = nnt_cuda_task_stream();
    int64_t inner = nnt_tile_numel(buffers[1]);
    int64_t outer = nnt_tile_numel(buffers[0]) / inner;
    float *y = nnt_tile_f32(buffers[1]);
    int rc = 0;
    if (a->first && a->beta == 0.0f)
        rc = nnt_cuda_fill_f32(inner, 0.0f, y, stream);
    else if (a->first && a->beta != 1.0f)
        rc = nnt_cuda_scale_f32(inner, a->beta, y, stream);
    if (rc == 0)
        rc = nnt_cuda_sum_outer_f32(outer, inner, nnt_tile_f32(buffers[0]), inner, y, stream);
    if (rc)
        nnt_task_error("nnt_sum_outer", "CUDA kernel failed (%d)", rc);
}

static void sumsq_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    cudaStream_t stream = nnt_cuda_task_stream();
    float *acc = (float *)STARPU_VARIABLE_GET_PTR(buffers[1]);
    /* the partial sums in the worker's scratch (stream-ordered: no earlier task still uses
     * it); without scratch memory, one block does the whole tile */
    double *partials = nnt_worker_scratch(NNT_CUDA_SUMSQ_PARTIALS * sizeof(double));
    int rc = nnt_cuda_fill_f32(1, 0.0f, acc, stream);
    if (rc == 0)
        rc = nnt_cuda_sumsq_f32(nnt_tile_numel(buffers[0]), nnt_tile_f32(buffers[0]), acc,
                                partials, stream);
    if (rc)
        nnt_task_error("nnt_sumsq", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

/* ---- codelets ------------------------------------------------------------------------- */

/* The first task of a y tile also zeroes or scales y: hash that with the sizes. */
static uint32_t sum_outer_footprint(struct starpu_task *task)
{
    const struct sum_outer_args *a = task->cl_arg;
    uint32_t kind = a->first ? (a->beta == 0.0f ? 1u : a->beta == 1.0f ? 0u : 2u) : 0u;
    uint32_t h = starpu_hash_crc32c_be(
        (uint32_t)starpu_vector_get_nx(STARPU_TASK_GET_HANDLE(task, 0)), 0);
    h = starpu_hash_crc32c_be((uint32_t)starpu_vector_get_nx(STARPU_TASK_GET_HANDLE(task, 1)), h);
    return starpu_hash_crc32c_be(kind, h);
}

static struct starpu_perfmodel add_bcast_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_add_bcast"};
static struct starpu_perfmodel sum_outer_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_sum_outer", .footprint = sum_outer_footprint};
static struct starpu_perfmodel sumsq_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_sumsq"};

static struct starpu_codelet add_bcast_cl = {
    .name = "nnt_add_bcast",
    .cpu_funcs = {add_bcast_cpu},
    NNT_CUDA_FUNCS(add_bcast_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &add_bcast_model,
};

static struct starpu_codelet sum_outer_cl = {
    .name = "nnt_sum_outer",
    .cpu_funcs = {sum_outer_cpu},
    NNT_CUDA_FUNCS(sum_outer_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sum_outer_model,
};

static struct starpu_codelet sumsq_cl = {
    .name = "nnt_sumsq",
    .cpu_funcs = {sumsq_cpu},
    NNT_CUDA_FUNCS(sumsq_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sumsq_model,
};

/* ---- submission ----------------------------------------------------------------------- */

static const char no_args;   /* add_bcast and sumsq take no arguments */

/* y (outer, inner) += x (inner) broadcast over the rows of the y tile */
int nnt_insert_add_bcast(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t y)
{
    struct starpu_data_descr bufs[2] = {{x, STARPU_R}, {y, STARPU_RW}};
    return nnt_submit(ctx, &add_bcast_cl, 2, bufs, &no_args, 0);
}

/* y (inner) += column sums of x (outer, inner); first: y = beta y before (beta == 0: y is
 * only written) */
int nnt_insert_sum_outer(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t y,
                         int first, float beta)
{
    struct sum_outer_args args = {first, beta};
    enum starpu_data_access_mode y_mode = first && beta == 0.0f ? STARPU_W : STARPU_RW;
    struct starpu_data_descr bufs[2] = {{x, STARPU_R}, {y, y_mode}};
    return nnt_submit(ctx, &sum_outer_cl, 2, bufs, &args, sizeof args);
}

/* acc (a one-float StarPU variable) = sum of squares of x (n), accumulated in double */
int nnt_insert_sumsq(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t acc)
{
    struct starpu_data_descr bufs[2] = {{x, STARPU_R}, {acc, STARPU_W}};
    return nnt_submit(ctx, &sumsq_cl, 2, bufs, &no_args, 0);
}
