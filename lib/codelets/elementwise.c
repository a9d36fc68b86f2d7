/* SPDX-License-Identifier: MIT */
/* Codelets of the elementwise tensor operations, one task per tile of n contiguous floats:
 * scale, axpby (in place, and axpbyz into a third tile), GELU forward and backward (the tanh
 * approximation or the exact form, chosen by the arguments), soft-capping (Gemma 2's final
 * logits) forward and backward.
 *
 * In place: the GELU tasks may be given the same tile in several roles (y == x, dx == dy,
 * dx == x). StarPU gets each distinct handle once, with the union of the access modes
 * (read + write = RW), and the task body finds each role's buffer through a slot index in
 * its arguments. The CPU GELU kernels allow y == x and dx == dy / x (no restrict). */
#include "../internal.h"
#include "nnt_cpu.h"

#include <string.h>

struct scale_args {
    float alpha;
};

struct axpby_args {
    float alpha, beta;
};

/* Buffer slot of each role: gelu uses x and out (y); gelu_bwd x, dy and out (dx); the
 * softcap tasks the same, with their cap. exact: the GELU tasks compute the exact GELU
 * x Phi(x) (the gelu_erf kernels), not the tanh approximation. */
struct gelu_args {
    int x, dy, out;
    float cap;
    int exact;
};

/* ---- CPU ------------------------------------------------------------------------------ */

/* buffers: x (n) RW */
static void scale_cpu(void *buffers[], void *cl_arg)
{
    const struct scale_args *a = cl_arg;
    nnt_cpu_scale_f32(nnt_tile_numel(buffers[0]), a->alpha, nnt_tile_f32(buffers[0]));
}

/* buffers: x (n) R, y (n) W (beta == 0) or RW */
static void axpby_cpu(void *buffers[], void *cl_arg)
{
    const struct axpby_args *a = cl_arg;
    nnt_cpu_axpby_f32(nnt_tile_numel(buffers[0]), a->alpha, nnt_tile_f32(buffers[0]), a->beta,
                      nnt_tile_f32(buffers[1]));
}

/* buffers: x (n) R, y (n) R, z (n) W */
static void axpbyz_cpu(void *buffers[], void *cl_arg)
{
    const struct axpby_args *a = cl_arg;
    nnt_cpu_axpbyz_f32(nnt_tile_numel(buffers[0]), a->alpha, nnt_tile_f32(buffers[0]), a->beta,
                       nnt_tile_f32(buffers[1]), nnt_tile_f32(buffers[2]));
}

static void softcap_cpu(void *buffers[], void *cl_arg)
{
    const struct gelu_args *a = cl_arg;
    nnt_cpu_softcap_fwd_f32(nnt_tile_numel(buffers[a->x]), a->cap, nnt_tile_f32(buffers[a->x]),
                            nnt_tile_f32(buffers[a->out]));
}

static void softcap_bwd_cpu(void *buffers[], void *cl_arg)
{
    const struct gelu_args *a = cl_arg;
    nnt_cpu_softcap_bwd_f32(nnt_tile_numel(buffers[a->x]), a->cap, nnt_tile_f32(buffers[a->x]),
                            nnt_tile_f32(buffers[a->dy]), nnt_tile_f32(buffers[a->out]));
}

/* buffers: x (n) R and y (n) W, or one buffer RW when y == x */
static void gelu_cpu(void *buffers[], void *cl_arg)
{
    const struct gelu_args *a = cl_arg;
    (a->exact ? nnt_cpu_gelu_erf_fwd_f32 : nnt_cpu_gelu_fwd_f32)(
        nnt_tile_numel(buffers[a->x]), nnt_tile_f32(buffers[a->x]),
        nnt_tile_f32(buffers[a->out]));
}

/* buffers: x (n) R, dy (n) R, dx (n) W, shared ones merged (slots in the arguments) */
static void gelu_bwd_cpu(void *buffers[], void *cl_arg)
{
    const struct gelu_args *a = cl_arg;
    (a->exact ? nnt_cpu_gelu_erf_bwd_f32 : nnt_cpu_gelu_bwd_f32)(
        nnt_tile_numel(buffers[a->x]), nnt_tile_f32(buffers[a->x]),
        nnt_tile_f32(buffers[a->dy]), nnt_tile_f32(buffers[a->out]));
}

/* ---- CUDA ----------------------------------------------------------------------------- */

#ifdef NNT_CUDA_CODELETS
static void scale_cuda(void *buffers[], void *cl_arg)
{
    const struct scale_args *a = cl_arg;
    int rc = nnt_cuda_scale_f32(nnt_tile_numel(buffers[0]), a->alpha, nnt_tile_f32(buffers[0]),
                                nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_scale", "CUDA kernel failed (%d)", rc);
}

static void axpby_cuda(void *buffers[], void *cl_arg)
{
    const struct axpby_args *a = cl_arg;
    int rc = nnt_cuda_axpby_f32(nnt_tile_numel(buffers[0]), a->alpha, nnt_tile_f32(buffers[0]),
                                a->beta, nnt_tile_f32(buffers[1]), nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_axpby", "CUDA kernel failed (%d)", rc);
}

static void axpbyz_cuda(void *buffers[], void *cl_arg)
{
    const struct axpby_args *a = cl_arg;
    int rc = nnt_cuda_axpbyz_f32(nnt_tile_numel(buffers[0]), a->alpha, nnt_tile_f32(buffers[0]),
                                 a->beta, nnt_tile_f32(buffers[1]), nnt_tile_f32(buffers[2]),
                                 nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_axpbyz", "CUDA kernel failed (%d)", rc);
}

static void gelu_cuda(void *buffers[], void *cl_arg)
{
    const struct gelu_args *a = cl_arg;
    int rc = (a->exact ? nnt_cuda_gelu_erf_fwd_f32 : nnt_cuda_gelu_fwd_f32)(
        nnt_tile_numel(buffers[a->x]), nnt_tile_f32(buffers[a->x]),
        nnt_tile_f32(buffers[a->out]), nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_gelu", "CUDA kernel failed (%d)", rc);
}

static void gelu_bwd_cuda(void *buffers[], void *cl_arg)
{
    const struct gelu_args *a = cl_arg;
    int rc = (a->exact ? nnt_cuda_gelu_erf_bwd_f32 : nnt_cuda_gelu_bwd_f32)(
        nnt_tile_numel(buffers[a->x]), nnt_tile_f32(buffers[a->x]),
        nnt_tile_f32(buffers[a->dy]), nnt_tile_f32(buffers[a->out]), nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_gelu_bwd", "CUDA kernel failed (%d)", rc);
}
static void softcap_cuda(void *buffers[], void *cl_arg)
{
    const struct gelu_args *a = cl_arg;
    int rc = nnt_cuda_softcap_fwd_f32(nnt_tile_numel(buffers[a->x]), a->cap,
                                      nnt_tile_f32(buffers[a->x]), nnt_tile_f32(buffers[a->out]),
                                      nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_softcap", "CUDA kernel failed (%d)", rc);
}

static void softcap_bwd_cuda(void *buffers[], void *cl_arg)
{
    const struct gelu_args *a = cl_arg;
    int rc = nnt_cuda_softcap_bwd_f32(nnt_tile_numel(buffers[a->x]), a->cap,
                                      nnt_tile_f32(buffers[a->x]), nnt_tile_f32(buffers[a->dy]),
                                      nnt_tile_f32(buffers[a->out]), nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_softcap_bwd", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

/* ---- codelets ------------------------------------------------------------------------- */

/* axpby without reading y (beta == 0) does less work than with it: hash both. */
static uint32_t axpby_footprint(struct starpu_task *task)
{
    const struct axpby_args *a = task->cl_arg;
    uint32_t n = (uint32_t)starpu_vector_get_nx(STARPU_TASK_GET_HANDLE(task, 0));
    return starpu_hash_crc32c_be(a->beta == 0.0f, starpu_hash_crc32c_be(n, 0));
}

/* In place or not changes the memory traffic: hash the number of distinct buffers (and the
 * form of GELU when it is the exact one: it costs more). */
static uint32_t gelu_footprint(struct starpu_task *task)
{
    const struct gelu_args *a = task->cl_arg;
    uint32_t n = (uint32_t)starpu_vector_get_nx(STARPU_TASK_GET_HANDLE(task, 0));
    uint32_t h = starpu_hash_crc32c_be((uint32_t)STARPU_TASK_GET_NBUFFERS(task),
                                       starpu_hash_crc32c_be(n, 0));
    return a->exact ? starpu_hash_crc32c_be(1u, h) : h;
}

static struct starpu_perfmodel scale_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_scale"};
static struct starpu_perfmodel axpby_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_axpby", .footprint = axpby_footprint};
static struct starpu_perfmodel axpbyz_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_axpbyz", .footprint = axpby_footprint};
static struct starpu_perfmodel gelu_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_gelu", .footprint = gelu_footprint};
static struct starpu_perfmodel gelu_bwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_gelu_bwd", .footprint = gelu_footprint};

static struct starpu_perfmodel softcap_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_softcap", .footprint = gelu_footprint};
static struct starpu_perfmodel softcap_bwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_softcap_bwd", .footprint = gelu_footprint};

static struct starpu_codelet softcap_cl = {
    .name = "nnt_softcap",
    .cpu_funcs = {softcap_cpu},
    NNT_CUDA_FUNCS(softcap_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &softcap_model,
};

static struct starpu_codelet softcap_bwd_cl = {
    .name = "nnt_softcap_bwd",
    .cpu_funcs = {softcap_bwd_cpu},
    NNT_CUDA_FUNCS(softcap_bwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &softcap_bwd_model,
};

static struct starpu_codelet scale_cl = {
    .name = "nnt_scale",
    .cpu_funcs = {scale_cpu},
    NNT_CUDA_FUNCS(scale_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &scale_model,
};

static struct starpu_codelet axpby_cl = {
    .name = "nnt_axpby",
    .cpu_funcs = {axpby_cpu},
    NNT_CUDA_FUNCS(axpby_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &axpby_model,
};

static struct starpu_codelet axpbyz_cl = {
    .name = "nnt_axpbyz",
    .cpu_funcs = {axpbyz_cpu},
    NNT_CUDA_FUNCS(axpbyz_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &axpbyz_model,
};

static struct starpu_codelet gelu_cl = {
    .name = "nnt_gelu",
    .cpu_funcs = {gelu_cpu},
    NNT_CUDA_FUNCS(gelu_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gelu_model,
};

static struct starpu_codelet gelu_bwd_cl = {
    .name = "nnt_gelu_bwd",
    .cpu_funcs = {gelu_bwd_cpu},
    NNT_CUDA_FUNCS(gelu_bwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gelu_bwd_model,
};

/* ---- submission ----------------------------------------------------------------------- */

/* x = alpha x on one tile */
int nnt_insert_scale(nnt_ctx *ctx, starpu_data_handle_t x, float alpha)
{
    struct scale_args args = {alpha};
    struct starpu_data_descr buf = {x, STARPU_RW};
    return nnt_submit(ctx, &scale_cl, 1, &buf, &args, sizeof args);
}

/* y = alpha x + beta y on one pair of tiles (x != y); beta == 0: y only written */
int nnt_insert_axpby(nnt_ctx *ctx, float alpha, starpu_data_handle_t x, float beta,
                     starpu_data_handle_t y)
{
    struct axpby_args args = {alpha, beta};
    struct starpu_data_descr bufs[2] = {{x, STARPU_R}, {y, beta == 0.0f ? STARPU_W : STARPU_RW}};
    return nnt_submit(ctx, &axpby_cl, 2, bufs, &args, sizeof args);
}

/* z = alpha x + beta y on one tile: three distinct tiles */
int nnt_insert_axpbyz(nnt_ctx *ctx, float alpha, starpu_data_handle_t x, float beta,
                      starpu_data_handle_t y, starpu_data_handle_t z)
{
    struct axpby_args args = {alpha, beta};
    struct starpu_data_descr bufs[3] = {{x, STARPU_R}, {y, STARPU_R}, {z, STARPU_W}};
    return nnt_submit(ctx, &axpbyz_cl, 3, bufs, &args, sizeof args);
}

/* y = gelu(x) on one tile (exact: x Phi(x), else the tanh approximation); y may be x */
int nnt_insert_gelu(nnt_ctx *ctx, int exact, starpu_data_handle_t x, starpu_data_handle_t y)
{
    struct starpu_data_descr bufs[2];
    struct gelu_args args;
    int n = 0;
    memset(&args, 0, sizeof args);
    args.exact = exact != 0;
    args.x = nnt_buffer_slot(bufs, &n, x, STARPU_R);
    args.out = nnt_buffer_slot(bufs, &n, y, STARPU_W);
    args.dy = args.x;   /* unused */
    return nnt_submit(ctx, &gelu_cl, n, bufs, &args, sizeof args);
}

/* dx = dy gelu'(x) on one tile (exact: the exact GELU's); dx may be dy or x */
int nnt_insert_gelu_bwd(nnt_ctx *ctx, int exact, starpu_data_handle_t x,
                        starpu_data_handle_t dy, starpu_data_handle_t dx)
{
    struct starpu_data_descr bufs[3];
    struct gelu_args args;
    int n = 0;
    memset(&args, 0, sizeof args);
    args.exact = exact != 0;
    args.x = nnt_buffer_slot(bufs, &n, x, STARPU_R);
    args.dy = nnt_buffer_slot(bufs, &n, dy, STARPU_R);
    args.out = nnt_buffer_slot(bufs, &n, dx, STARPU_W);
    return nnt_submit(ctx, &gelu_bwd_cl, n, bufs, &args, sizeof args);
}

/* y = tanh(x / cap) cap on one tile; y may be x */
int nnt_insert_softcap(nnt_ctx *ctx, float cap, starpu_data_handle_t x, starpu_data_handle_t y)
{
    struct starpu_data_descr bufs[2];
    struct gelu_args args;
    int n = 0;
    memset(&args, 0, sizeof args);
    args.cap = cap;
    args.x = nnt_buffer_slot(bufs, &n, x, STARPU_R);
    args.out = nnt_buffer_slot(bufs, &n, y, STARPU_W);
    args.dy = args.x;   /* unused */
    return nnt_submit(ctx, &softcap_cl, n, bufs, &args, sizeof args);
}

/* dx = dy (1 - tanh(x / cap)^2) on one tile; dx may be dy or x */
int nnt_insert_softcap_bwd(nnt_ctx *ctx, float cap, starpu_data_handle_t x,
                           starpu_data_handle_t dy, starpu_data_handle_t dx)
{
    struct starpu_data_descr bufs[3];
    struct gelu_args args;
    int n = 0;
    memset(&args, 0, sizeof args);
    args.cap = cap;
    args.x = nnt_buffer_slot(bufs, &n, x, STARPU_R);
    args.dy = nnt_buffer_slot(bufs, &n, dy, STARPU_R);
    args.out = nnt_buffer_slot(bufs, &n, dx, STARPU_W);
    return nnt_submit(ctx, &softcap_bwd_cl, n, bufs, &args, sizeof args);
}
