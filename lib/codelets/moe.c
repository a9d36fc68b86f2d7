// SPDX-License-Identifier: MIT
/* Codelets of the mixture-of-experts routing and row maps (cpu/moe.c): one routing task per
 * tile of tokens, and the gather, scatter-add and weight-gradient tasks between a tile of
 * an activation (B, T, C) and a tile of an expert's rows (n_e, C), whose row map (triples
 * of rows and slots, known on the host once the routing ran) travels in the task's
 * arguments. CPU implementations only: StarPU runs these small tasks on CPU workers (the
 * experts' products are ordinary GEMM tasks and run anywhere). */
#include "../ops/moe.h"
#include "nnt_cpu.h"

#include <stdlib.h>
#include <string.h>

static inline int32_t *tile_i32(void *buffer)
{
    return (int32_t *)STARPU_VECTOR_GET_PTR(buffer);
}

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

static struct starpu_perfmodel route_model = {.type = STARPU_HISTORY_BASED,
                                              .symbol = "nnt_moe_route"};
static struct starpu_perfmodel route_bwd_model = {.type = STARPU_HISTORY_BASED,
                                                  .symbol = "nnt_moe_route_bwd"};

static struct starpu_codelet route_cl = {
    .name = "nnt_moe_route",
    .cpu_funcs = {route_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &route_model,
};

static struct starpu_codelet route_bwd_cl = {
    .name = "nnt_moe_route_bwd",
    .cpu_funcs = {route_bwd_cpu},
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
    struct starpu_data_descr bufs[5] = {{probs, STARPU_R}, {idx, STARPU_R}, {w, STARPU_R},
                                        {dw, STARPU_R}, {dlogits, STARPU_W}};
    size_t size = sizeof(struct route_args) + (aux ? (size_t)E * sizeof(float) : 0);
    struct route_args *args = malloc(size);
    if (!args)
        return nnt_fail(ctx, NNT_E_NOMEM, "nnt_moe_route_bwd: out of host memory");
    args->E = E;
    args->k = k;
    args->norm = norm;
    args->has_aux = aux != NULL;
    if (aux)
        memcpy(args + 1, aux, (size_t)E * sizeof(float));
    int rc = nnt_submit(ctx, &route_bwd_cl, 5, bufs, args, size);
    free(args);
    return rc;
}

/* ---- row maps ----------------------------------------------------------------------------- */

enum { MAP_GATHER, MAP_SCATTER, MAP_WGRAD };

struct map_args {
    int op, has_w;
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
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &map_model,
};

static int submit_map(nnt_ctx *ctx, int op, int64_t width, int64_t k, int64_t m,
                      const int32_t *map, int nbuf, struct starpu_data_descr *bufs, int has_w)
{
    size_t size = sizeof(struct map_args) + (size_t)m * 3 * sizeof(int32_t);
    struct map_args *args = malloc(size);
    if (!args)
        return nnt_fail(ctx, NNT_E_NOMEM, "nnt_moe_map: out of host memory");
    args->op = op;
    args->has_w = has_w;
    args->width = width;
    args->k = k;
    args->m = m;
    memcpy(args + 1, map, (size_t)m * 3 * sizeof(int32_t));
    int rc = nnt_submit(ctx, &map_cl, nbuf, bufs, args, size);
    free(args);
    return rc;
}

int nnt_insert_moe_gather(nnt_ctx *ctx, int64_t width, int64_t k, int64_t m,
                          const int32_t *map, starpu_data_handle_t src, starpu_data_handle_t w,
                          starpu_data_handle_t dst, int first)
{
    struct starpu_data_descr bufs[3] = {
        {src, STARPU_R}, {dst, first ? STARPU_W : STARPU_RW}, {w, STARPU_R}};
    return submit_map(ctx, MAP_GATHER, width, k, m, map, w ? 3 : 2, bufs, w != NULL);
}

int nnt_insert_moe_scatter_add(nnt_ctx *ctx, int64_t width, int64_t k, int64_t m,
                               const int32_t *map, starpu_data_handle_t src,
                               starpu_data_handle_t w, starpu_data_handle_t dst)
{
    struct starpu_data_descr bufs[3] = {{src, STARPU_R}, {dst, STARPU_RW}, {w, STARPU_R}};
    return submit_map(ctx, MAP_SCATTER, width, k, m, map, w ? 3 : 2, bufs, w != NULL);
}

int nnt_insert_moe_weight_grad(nnt_ctx *ctx, int64_t width, int64_t k, int64_t m,
                               const int32_t *map, starpu_data_handle_t dy,
                               starpu_data_handle_t y, starpu_data_handle_t dw)
{
    struct starpu_data_descr bufs[3] = {{dy, STARPU_R}, {y, STARPU_R}, {dw, STARPU_RW}};
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

static struct starpu_perfmodel shared_add_model = {.type = STARPU_HISTORY_BASED,
                                                   .symbol = "nnt_moe_shared_add"};
static struct starpu_perfmodel shared_bwd_model = {.type = STARPU_HISTORY_BASED,
                                                   .symbol = "nnt_moe_shared_bwd"};

static struct starpu_codelet shared_add_cl = {
    .name = "nnt_moe_shared_add",
    .cpu_funcs = {shared_add_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &shared_add_model,
};

static struct starpu_codelet shared_bwd_cl = {
    .name = "nnt_moe_shared_bwd",
    .cpu_funcs = {shared_bwd_cpu},
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
