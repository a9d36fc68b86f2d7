// SPDX-License-Identifier: MIT
/* Codelets of the mixture-of-experts routing and row maps (cpu/moe.c, cuda/moe.cu): one
 * routing task per tile of tokens, the gather, scatter-add and weight-gradient tasks between
 * a tile of an activation (B, T, C) and a tile of an expert's rows (n_e, C), whose row map
 * (triples of rows and slots, known on the host once the routing ran) travels in the task's
 * arguments, and the shared expert's gate. CPU and CUDA implementations. The CUDA ones
 * need the map (and the routing backward's aux vector) in device memory: when the context
 * has CUDA workers such a task gets one more buffer, a scratch vector registered for that
 * task alone (StarPU allocates it on the worker's node, no transfer, unregistered once the
 * task ran), into which the CUDA implementation copies the host array from its arguments
 * on its stream before the kernel. */
#include "../ops/moe.h"
#include "nnt_cpu.h"

#include <stdlib.h>
#include <string.h>

static inline int32_t *tile_i32(void *buffer)
{
    return (int32_t *)STARPU_VECTOR_GET_PTR(buffer);
}

/* ---- host arrays for the CUDA implementations ------------------------------------------- */

/* A scratch vector of bytes (a multiple of 4) for one task, or NULL without CUDA workers. */
static starpu_data_handle_t scratch_new(nnt_ctx *ctx, size_t bytes)
{
#ifdef NNT_CUDA_CODELETS
    if (ctx->ncuda > 0 && bytes > 0) {
        starpu_data_handle_t h = NULL;
        starpu_vector_data_register(&h, -1, 0, (uint32_t)(bytes / 4), 4);
        return h;
    }
#else
    (void)ctx, (void)bytes;
#endif
    return NULL;
}

/* Unregister a task's scratch vector once the task ran. */
static void scratch_done(starpu_data_handle_t h)
{
    if (h)
        starpu_data_unregister_submit(h);
}

#ifdef NNT_CUDA_CODELETS
/* The host array src (bytes) copied on the task's stream into its scratch buffer. */
static void *to_device(void *scratch, const void *src, size_t bytes, cudaStream_t stream)
{
    void *d = (void *)STARPU_VECTOR_GET_PTR(scratch);
    return cudaMemcpyAsync(d, src, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess
               ? d : NULL;
}
#endif

/* ---- routing ------------------------------------------------------------------------------ */

struct route_args {
    int64_t E, k;
    int norm, has_aux;
    /* backward: E floats of aux follow */
};

static void route_cpu(void *buffers[], void *cl_arg)
{
    const struct route_args *a = cl_arg;
    nnt_cpu_moe_route_f32(nnt_tile_numel(buffers[0]) / a->E, a->E, a->k, a->norm,
                          nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]),
                          tile_i32(buffers[2]), nnt_tile_f32(buffers[3]));
}

static void route_bwd_cpu(void *buffers[], void *cl_arg)
{
    const struct route_args *a = cl_arg;
    const float *aux = a->has_aux ? (const float *)(a + 1) : NULL;
    nnt_cpu_moe_route_bwd_f32(nnt_tile_numel(buffers[0]) / a->E, a->E, a->k, a->norm,
                              nnt_tile_f32(buffers[0]), tile_i32(buffers[1]),
                              nnt_tile_f32(buffers[2]), nnt_tile_f32(buffers[3]), aux,
                              nnt_tile_f32(buffers[4]));
}

#ifdef NNT_CUDA_CODELETS
static void route_cuda(void *buffers[], void *cl_arg)
{
    const struct route_args *a = cl_arg;
    int rc = nnt_cuda_moe_route_f32(nnt_tile_numel(buffers[0]) / a->E, a->E, a->k, a->norm,
                                    nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]),
                                    tile_i32(buffers[2]), nnt_tile_f32(buffers[3]),
                                    nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_moe_route", "CUDA kernel failed (%d)", rc);
}

/* buffers: probs, idx, w, dw, dlogits, then the scratch for aux (has_aux) */
static void route_bwd_cuda(void *buffers[], void *cl_arg)
{
    const struct route_args *a = cl_arg;
    cudaStream_t stream = nnt_cuda_task_stream();
    const float *aux = NULL;
    if (a->has_aux &&
        !(aux = to_device(buffers[5], a + 1, (size_t)a->E * sizeof(float), stream))) {
        nnt_task_error("nnt_moe_route_bwd", "copy of aux to the device failed");
        return;
    }
    int rc = nnt_cuda_moe_route_bwd_f32(nnt_tile_numel(buffers[0]) / a->E, a->E, a->k,
                                        a->norm, nnt_tile_f32(buffers[0]),
                                        tile_i32(buffers[1]), nnt_tile_f32(buffers[2]),
                                        nnt_tile_f32(buffers[3]), aux,
                                        nnt_tile_f32(buffers[4]), stream);
    if (rc)
        nnt_task_error("nnt_moe_route_bwd", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

static struct starpu_perfmodel route_model = {.type = STARPU_HISTORY_BASED,
                                              .symbol = "nnt_moe_route"};
static struct starpu_perfmodel route_bwd_model = {.type = STARPU_HISTORY_BASED,
                                                  .symbol = "nnt_moe_route_bwd"};

static struct starpu_codelet route_cl = {
    .name = "nnt_moe_route",
    .cpu_funcs = {route_cpu},
    NNT_CUDA_FUNCS(route_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &route_model,
};

static struct starpu_codelet route_bwd_cl = {
    .name = "nnt_moe_route_bwd",
    .cpu_funcs = {route_bwd_cpu},
    NNT_CUDA_FUNCS(route_bwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &route_bwd_model,
};

int nnt_insert_moe_route(nnt_ctx *ctx, int64_t E, int64_t k, int norm,
                         starpu_data_handle_t logits, starpu_data_handle_t probs,
                         starpu_data_handle_t idx, starpu_data_handle_t w)
{
    struct starpu_data_descr bufs[4] = {
        {logits, STARPU_R}, {probs, STARPU_W}, {idx, STARPU_W}, {w, STARPU_W}};
    struct route_args args = {E, k, norm, 0};
    return nnt_submit(ctx, &route_cl, 4, bufs, &args, sizeof args);
}

int nnt_insert_moe_route_bwd(nnt_ctx *ctx, int64_t E, int64_t k, int norm, const float *aux,
                             starpu_data_handle_t probs, starpu_data_handle_t idx,
                             starpu_data_handle_t w, starpu_data_handle_t dw,
                             starpu_data_handle_t dlogits)
{
    starpu_data_handle_t scratch = aux ? scratch_new(ctx, (size_t)E * sizeof(float)) : NULL;
    struct starpu_data_descr bufs[6] = {{probs, STARPU_R}, {idx, STARPU_R}, {w, STARPU_R},
                                        {dw, STARPU_R}, {dlogits, STARPU_W},
                                        {scratch, STARPU_SCRATCH}};
    size_t size = sizeof(struct route_args) + (aux ? (size_t)E * sizeof(float) : 0);
    struct route_args *args = malloc(size);
    if (!args) {
        scratch_done(scratch);
        return nnt_fail(ctx, NNT_E_NOMEM, "nnt_moe_route_bwd: out of host memory");
    }
    args->E = E;
    args->k = k;
    args->norm = norm;
    args->has_aux = aux != NULL;
    if (aux)
        memcpy(args + 1, aux, (size_t)E * sizeof(float));
    int rc = nnt_submit(ctx, &route_bwd_cl, scratch ? 6 : 5, bufs, args, size);
    scratch_done(scratch);
    free(args);
    return rc;
}

/* ---- row maps ----------------------------------------------------------------------------- */

enum { MAP_GATHER, MAP_SCATTER, MAP_WGRAD };

struct map_args {
    int op, has_w;
    int scratch;        /* the scratch buffer's slot (CUDA workers only) */
    int64_t width, k, m;
    /* 3 m int32 follow */
};

/* buffers: a, b, then w (when has_w) */
static void map_cpu(void *buffers[], void *cl_arg)
{
    const struct map_args *a = cl_arg;
    const int32_t *map = (const int32_t *)(a + 1);
    const float *w = a->has_w ? nnt_tile_f32(buffers[2]) : NULL;
    if (a->op == MAP_GATHER)
        nnt_cpu_moe_gather_f32(a->width, a->m, map, nnt_tile_f32(buffers[0]), w, a->k,
                               nnt_tile_f32(buffers[1]));
    else if (a->op == MAP_SCATTER)
        nnt_cpu_moe_scatter_add_f32(a->width, a->m, map, nnt_tile_f32(buffers[0]), w, a->k,
                                    nnt_tile_f32(buffers[1]));
    else   /* buffers: dy, y, dw */
        nnt_cpu_moe_weight_grad_f32(a->width, a->m, map, nnt_tile_f32(buffers[0]),
                                    nnt_tile_f32(buffers[1]), a->k, nnt_tile_f32(buffers[2]));
}

#ifdef NNT_CUDA_CODELETS
/* buffers: a, b, then w or dw, then the scratch for the map */
static void map_cuda(void *buffers[], void *cl_arg)
{
    const struct map_args *a = cl_arg;
    cudaStream_t stream = nnt_cuda_task_stream();
    const int32_t *map = to_device(buffers[a->scratch], a + 1,
                                   (size_t)a->m * 3 * sizeof(int32_t), stream);
    const float *w = a->has_w ? nnt_tile_f32(buffers[2]) : NULL;
    int rc = -1;
    if (map && a->op == MAP_GATHER)
        rc = nnt_cuda_moe_gather_f32(a->width, a->m, map, nnt_tile_f32(buffers[0]), w, a->k,
                                     nnt_tile_f32(buffers[1]), stream);
    else if (map && a->op == MAP_SCATTER)
        rc = nnt_cuda_moe_scatter_add_f32(a->width, a->m, map, nnt_tile_f32(buffers[0]), w,
                                          a->k, nnt_tile_f32(buffers[1]), stream);
    else if (map)
        rc = nnt_cuda_moe_weight_grad_f32(a->width, a->m, map, nnt_tile_f32(buffers[0]),
                                          nnt_tile_f32(buffers[1]), a->k,
                                          nnt_tile_f32(buffers[2]), stream);
    if (rc)
        nnt_task_error("nnt_moe_map", "CUDA %s failed (%d)", map ? "kernel" : "copy", rc);
}
#endif

static uint32_t map_footprint(struct starpu_task *task)
{
    const struct map_args *a = task->cl_arg;
    return starpu_hash_crc32c_be((uint32_t)(a->m * a->width),
                                 starpu_hash_crc32c_be((uint32_t)a->op, 0));
}

static struct starpu_perfmodel map_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_moe_map", .footprint = map_footprint};

static struct starpu_codelet map_cl = {
    .name = "nnt_moe_map",
    .cpu_funcs = {map_cpu},
    NNT_CUDA_FUNCS(map_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &map_model,
};

/* bufs: nbuf buffers and room for one more (the scratch, added here when there is one) */
static int submit_map(nnt_ctx *ctx, int op, int64_t width, int64_t k, int64_t m,
                      const int32_t *map, int nbuf, struct starpu_data_descr *bufs, int has_w)
{
    size_t size = sizeof(struct map_args) + (size_t)m * 3 * sizeof(int32_t);
    struct map_args *args = malloc(size);
    if (!args)
        return nnt_fail(ctx, NNT_E_NOMEM, "nnt_moe_map: out of host memory");
    starpu_data_handle_t scratch = scratch_new(ctx, (size_t)m * 3 * sizeof(int32_t));
    args->scratch = nbuf;
    if (scratch) {
        bufs[nbuf].handle = scratch;
        bufs[nbuf++].mode = STARPU_SCRATCH;
    }
    args->op = op;
    args->has_w = has_w;
    args->width = width;
    args->k = k;
    args->m = m;
    memcpy(args + 1, map, (size_t)m * 3 * sizeof(int32_t));
    int rc = nnt_submit(ctx, &map_cl, nbuf, bufs, args, size);
    scratch_done(scratch);
    free(args);
    return rc;
}

int nnt_insert_moe_gather(nnt_ctx *ctx, int64_t width, int64_t k, int64_t m,
                          const int32_t *map, starpu_data_handle_t src, starpu_data_handle_t w,
                          starpu_data_handle_t dst, int first)
{
    struct starpu_data_descr bufs[4] = {
        {src, STARPU_R}, {dst, first ? STARPU_W : STARPU_RW}, {w, STARPU_R}, {NULL, 0}};
    return submit_map(ctx, MAP_GATHER, width, k, m, map, w ? 3 : 2, bufs, w != NULL);
}

int nnt_insert_moe_scatter_add(nnt_ctx *ctx, int64_t width, int64_t k, int64_t m,
                               const int32_t *map, starpu_data_handle_t src,
                               starpu_data_handle_t w, starpu_data_handle_t dst)
{
    struct starpu_data_descr bufs[4] = {
        {src, STARPU_R}, {dst, STARPU_RW}, {w, STARPU_R}, {NULL, 0}};
    return submit_map(ctx, MAP_SCATTER, width, k, m, map, w ? 3 : 2, bufs, w != NULL);
}

int nnt_insert_moe_weight_grad(nnt_ctx *ctx, int64_t width, int64_t k, int64_t m,
                               const int32_t *map, starpu_data_handle_t dy,
                               starpu_data_handle_t y, starpu_data_handle_t dw)
{
    struct starpu_data_descr bufs[4] = {
        {dy, STARPU_R}, {y, STARPU_R}, {dw, STARPU_RW}, {NULL, 0}};
    return submit_map(ctx, MAP_WGRAD, width, k, m, map, 3, bufs, 0);
}

/* ---- the shared expert's sigmoid gate ------------------------------------------------------ */

struct shared_args {
    int64_t width;
    int accumulate;
};

/* buffers: z (rows, 1), s, y (rows, width) */
static void shared_add_cpu(void *buffers[], void *cl_arg)
{
    const struct shared_args *a = cl_arg;
    nnt_cpu_moe_shared_add_f32(nnt_tile_numel(buffers[0]), a->width, nnt_tile_f32(buffers[0]),
                               nnt_tile_f32(buffers[1]), nnt_tile_f32(buffers[2]));
}

/* buffers: z, s, dy, ds, dz */
static void shared_bwd_cpu(void *buffers[], void *cl_arg)
{
    const struct shared_args *a = cl_arg;
    nnt_cpu_moe_shared_bwd_f32(nnt_tile_numel(buffers[0]), a->width, a->accumulate,
                               nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]),
                               nnt_tile_f32(buffers[2]), nnt_tile_f32(buffers[3]),
                               nnt_tile_f32(buffers[4]));
}

#ifdef NNT_CUDA_CODELETS
static void shared_add_cuda(void *buffers[], void *cl_arg)
{
    const struct shared_args *a = cl_arg;
    int rc = nnt_cuda_moe_shared_add_f32(nnt_tile_numel(buffers[0]), a->width,
                                         nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]),
                                         nnt_tile_f32(buffers[2]), nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_moe_shared_add", "CUDA kernel failed (%d)", rc);
}

static void shared_bwd_cuda(void *buffers[], void *cl_arg)
{
    const struct shared_args *a = cl_arg;
    int rc = nnt_cuda_moe_shared_bwd_f32(nnt_tile_numel(buffers[0]), a->width, a->accumulate,
                                         nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[1]),
                                         nnt_tile_f32(buffers[2]), nnt_tile_f32(buffers[3]),
                                         nnt_tile_f32(buffers[4]), nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_moe_shared_bwd", "CUDA kernel failed (%d)", rc);
}
#endif

static struct starpu_perfmodel shared_add_model = {.type = STARPU_HISTORY_BASED,
                                                   .symbol = "nnt_moe_shared_add"};
static struct starpu_perfmodel shared_bwd_model = {.type = STARPU_HISTORY_BASED,
                                                   .symbol = "nnt_moe_shared_bwd"};

static struct starpu_codelet shared_add_cl = {
    .name = "nnt_moe_shared_add",
    .cpu_funcs = {shared_add_cpu},
    NNT_CUDA_FUNCS(shared_add_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &shared_add_model,
};

static struct starpu_codelet shared_bwd_cl = {
    .name = "nnt_moe_shared_bwd",
    .cpu_funcs = {shared_bwd_cpu},
    NNT_CUDA_FUNCS(shared_bwd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &shared_bwd_model,
};

int nnt_insert_moe_shared_add(nnt_ctx *ctx, int64_t width, starpu_data_handle_t z,
                              starpu_data_handle_t s, starpu_data_handle_t y)
{
    struct starpu_data_descr bufs[3] = {{z, STARPU_R}, {s, STARPU_R}, {y, STARPU_RW}};
    struct shared_args args = {width, 0};
    return nnt_submit(ctx, &shared_add_cl, 3, bufs, &args, sizeof args);
}

int nnt_insert_moe_shared_bwd(nnt_ctx *ctx, int64_t width, int accumulate,
                              starpu_data_handle_t z, starpu_data_handle_t s,
                              starpu_data_handle_t dy, starpu_data_handle_t ds,
                              starpu_data_handle_t dz)
{
    struct starpu_data_descr bufs[5] = {{z, STARPU_R}, {s, STARPU_R}, {dy, STARPU_R},
                                        {ds, STARPU_W}, {dz, accumulate ? STARPU_RW : STARPU_W}};
    struct shared_args args = {width, accumulate};
    return nnt_submit(ctx, &shared_bwd_cl, 5, bufs, &args, sizeof args);
}
