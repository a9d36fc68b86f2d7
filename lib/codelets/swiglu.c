/* SPDX-License-Identifier: MIT */
/* Codelets of SwiGLU, y = silu(gate) * up, and its gradient: one task per tile of n
 * contiguous floats (gate, up, y, dy, dgate, dup share one layout). The same codelets run
 * GeGLU (gelu_tanh in place of silu) and gpt-oss's clamped SwiGLU (nnt_glu_act).
 *
 * In place: any output may be given the same tile as an input (y == gate, dgate == gate,
 * dup == up, dgate == dy, ...). StarPU gets each distinct handle once, with the union of the
 * access modes, and the task body finds each role's buffer through a slot index in its
 * arguments (as the GELU codelets do). The kernels read each element before writing it. */
#include "../internal.h"
#include "nnt_cpu.h"

#include <string.h>

/* Buffer slot of each role; forward: gate, up, y (out0); backward: gate, up, dy, dgate
 * (out0), dup (out1). */
struct swiglu_args {
    int gate, up, dy, out0, out1;
    nnt_glu_act act;    /* the activation: SwiGLU, GeGLU, or the clamped SwiGLU's and its
                           alpha, limit */
};

/* ---- CPU ------------------------------------------------------------------------------ */

static void swiglu_fwd_cpu(void *buffers[], void *cl_arg)
{
    const struct swiglu_args *a = cl_arg;
    int64_t n = nnt_tile_numel(buffers[a->gate]);
    const float *gate = nnt_tile_f32(buffers[a->gate]), *up = nnt_tile_f32(buffers[a->up]);
    float *y = nnt_tile_f32(buffers[a->out0]);
    if (a->act.kind == NNT_GLU_SILU_CLAMP)
        nnt_cpu_swiglu_clamp_fwd_f32(n, a->act.alpha, a->act.limit, gate, up, y);
    else
        (a->act.kind == NNT_GLU_GELU_TANH ? nnt_cpu_geglu_fwd_f32 : nnt_cpu_swiglu_fwd_f32)(
            n, gate, up, y);
}

static void swiglu_bwd_cpu(void *buffers[], void *cl_arg)
{
    const struct swiglu_args *a = cl_arg;
    int64_t n = nnt_tile_numel(buffers[a->gate]);
    const float *gate = nnt_tile_f32(buffers[a->gate]), *up = nnt_tile_f32(buffers[a->up]);
    const float *dy = nnt_tile_f32(buffers[a->dy]);
    float *dgate = nnt_tile_f32(buffers[a->out0]), *dup = nnt_tile_f32(buffers[a->out1]);
    if (a->act.kind == NNT_GLU_SILU_CLAMP)
        nnt_cpu_swiglu_clamp_bwd_f32(n, a->act.alpha, a->act.limit, gate, up, dy, dgate, dup);
    else
        (a->act.kind == NNT_GLU_GELU_TANH ? nnt_cpu_geglu_bwd_f32 : nnt_cpu_swiglu_bwd_f32)(
            n, gate, up, dy, dgate, dup);
}

/* ---- CUDA ----------------------------------------------------------------------------- */

#ifdef NNT_CUDA_CODELETS
static void swiglu_fwd_cuda(void *buffers[], void *cl_arg)
{
    const struct swiglu_args *a = cl_arg;
    int64_t n = nnt_tile_numel(buffers[a->gate]);
    const float *gate = nnt_tile_f32(buffers[a->gate]), *up = nnt_tile_f32(buffers[a->up]);
    float *y = nnt_tile_f32(buffers[a->out0]);
    cudaStream_t st = nnt_cuda_task_stream();
    int rc = a->act.kind == NNT_GLU_SILU_CLAMP
                 ? nnt_cuda_swiglu_clamp_fwd_f32(n, a->act.alpha, a->act.limit, gate, up, y, st)
                 : (a->act.kind == NNT_GLU_GELU_TANH ? nnt_cuda_geglu_fwd_f32
                                                     : nnt_cuda_swiglu_fwd_f32)(n, gate, up, y,
                                                                                st);
    if (rc)
        nnt_task_error("nnt_swiglu", "CUDA kernel failed (%d)", rc);
}

static void swiglu_bwd_cuda(void *buffers[], void *cl_arg)
{
    const struct swiglu_args *a = cl_arg;
    int64_t n = nnt_tile_numel(buffers[a->gate]);
    const float *gate = nnt_tile_f32(buffers[a->gate]), *up = nnt_tile_f32(buffers[a->up]);
    const float *dy = nnt_tile_f32(buffers[a->dy]);
    float *dgate = nnt_tile_f32(buffers[a->out0]), *dup = nnt_tile_f32(buffers[a->out1]);
    cudaStream_t st = nnt_cuda_task_stream();
    int rc = a->act.kind == NNT_GLU_SILU_CLAMP
                 ? nnt_cuda_swiglu_clamp_bwd_f32(n, a->act.alpha, a->act.limit, gate, up, dy,
                                                 dgate, dup, st)
                 : (a->act.kind == NNT_GLU_GELU_TANH ? nnt_cuda_geglu_bwd_f32
                                                     : nnt_cuda_swiglu_bwd_f32)(
                       n, gate, up, dy, dgate, dup, st);
    if (rc)
        nnt_task_error("nnt_swiglu_bwd", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

/* ---- codelets ------------------------------------------------------------------------- */

/* In place or not changes the memory traffic: hash the number of distinct buffers (and the
 * activation when it is not SiLU's: 2 GELU's, 3 the clamped SiLU's, whose alpha and limit
 * do not change the work). */
static uint32_t swiglu_footprint(struct starpu_task *task)
{
    const struct swiglu_args *a = task->cl_arg;
    uint32_t n = (uint32_t)starpu_vector_get_nx(STARPU_TASK_GET_HANDLE(task, 0));
    uint32_t h = starpu_hash_crc32c_be((uint32_t)STARPU_TASK_GET_NBUFFERS(task),
                                       starpu_hash_crc32c_be(n, 0));
    if (a->act.kind == NNT_GLU_GELU_TANH)
        return starpu_hash_crc32c_be(2u, h);
    return a->act.kind == NNT_GLU_SILU_CLAMP ? starpu_hash_crc32c_be(3u, h) : h;
}

static struct starpu_perfmodel swiglu_fwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_swiglu", .footprint = swiglu_footprint};
static struct starpu_perfmodel swiglu_bwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_swiglu_bwd", .footprint = swiglu_footprint};

static struct starpu_codelet swiglu_fwd_cl = {
    .name = "nnt_swiglu",
    .cpu_funcs = {swiglu_fwd_cpu},
    NNT_CUDA_FUNCS(swiglu_fwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &swiglu_fwd_model,
};

static struct starpu_codelet swiglu_bwd_cl = {
    .name = "nnt_swiglu_bwd",
    .cpu_funcs = {swiglu_bwd_cpu},
    NNT_CUDA_FUNCS(swiglu_bwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &swiglu_bwd_model,
};

/* ---- submission ----------------------------------------------------------------------- */

/* y = act(gate, up) on one tile (silu(gate) up, ...); y may be gate or up */
int nnt_insert_swiglu(nnt_ctx *ctx, const nnt_glu_act *act, starpu_data_handle_t gate,
                      starpu_data_handle_t up, starpu_data_handle_t y)
{
    struct starpu_data_descr bufs[3];
    struct swiglu_args args;
    int n = 0;
    memset(&args, 0, sizeof args);   /* copied whole: no uninitialised padding */
    args.act = *act;
    args.gate = nnt_buffer_slot(bufs, &n, gate, STARPU_R);
    args.up = nnt_buffer_slot(bufs, &n, up, STARPU_R);
    args.out0 = nnt_buffer_slot(bufs, &n, y, STARPU_W);
    args.dy = args.out1 = args.out0;   /* unused */
    return nnt_submit(ctx, &swiglu_fwd_cl, n, bufs, &args, sizeof args);
}

/* act's gradient on one tile (SwiGLU: dgate = dy up silu'(gate), dup = dy silu(gate));
 * dgate != dup, each may be any of the inputs */
int nnt_insert_swiglu_bwd(nnt_ctx *ctx, const nnt_glu_act *act, starpu_data_handle_t gate,
                          starpu_data_handle_t up, starpu_data_handle_t dy,
                          starpu_data_handle_t dgate, starpu_data_handle_t dup)
{
    struct starpu_data_descr bufs[5];
    struct swiglu_args args;
    int n = 0;
    memset(&args, 0, sizeof args);
    args.act = *act;
    args.gate = nnt_buffer_slot(bufs, &n, gate, STARPU_R);
    args.up = nnt_buffer_slot(bufs, &n, up, STARPU_R);
    args.dy = nnt_buffer_slot(bufs, &n, dy, STARPU_R);
    args.out0 = nnt_buffer_slot(bufs, &n, dgate, STARPU_W);
    args.out1 = nnt_buffer_slot(bufs, &n, dup, STARPU_W);
    return nnt_submit(ctx, &swiglu_bwd_cl, n, bufs, &args, sizeof args);
}
