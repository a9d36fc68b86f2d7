/* SPDX-License-Identifier: MIT */
/* Codelets of the optimizer steps, one task per parameter tile:
 *   adam: p (n) RW, g (n) R, m (n) RW, v (n) RW [, p16 (n) W: p's bf16 copy, written too]
 *   sgd:  p (n) RW, g (n) R [, buf (n) W on the first step, RW after]
 * Every element is updated on its own, so the result does not depend on the tiling. */
#include "../internal.h"
#include "nnt_cpu.h"

#include <string.h>

struct adam_args {
    int decoupled;
    int bf16_copy;    /* buffer 4 is p's bf16 copy, written with the update */
    float lr, beta1, beta2, eps, weight_decay;
    float bc1, bc2;   /* bias corrections 1 - beta^step */
    float grad_scale;
};

struct sgd_args {
    int has_buf;      /* momentum != 0: buffer 2 is the momentum buffer */
    int first_step;   /* buf = g' (buf not read) */
    float lr, momentum, weight_decay, grad_scale;
};

/* ---- CPU ------------------------------------------------------------------------------ */

static void adam_cpu(void *buffers[], void *cl_arg)
{
    const struct adam_args *a = cl_arg;
    if (a->bf16_copy)
        nnt_cpu_adam_step_f32_bf16(nnt_tile_numel(buffers[0]), a->decoupled, a->lr, a->beta1,
                                   a->beta2, a->eps, a->weight_decay, a->bc1, a->bc2,
                                   a->grad_scale, nnt_tile_f32(buffers[1]),
                                   nnt_tile_f32(buffers[0]), nnt_tile_f32(buffers[2]),
                                   nnt_tile_f32(buffers[3]),
                                   (uint16_t *)STARPU_VECTOR_GET_PTR(buffers[4]));
    else
        nnt_cpu_adam_step_f32(nnt_tile_numel(buffers[0]), a->decoupled, a->lr, a->beta1,
                              a->beta2, a->eps, a->weight_decay, a->bc1, a->bc2, a->grad_scale,
                              nnt_tile_f32(buffers[1]), nnt_tile_f32(buffers[0]),
                              nnt_tile_f32(buffers[2]), nnt_tile_f32(buffers[3]));
}

static void sgd_cpu(void *buffers[], void *cl_arg)
{
    const struct sgd_args *a = cl_arg;
    nnt_cpu_sgd_step_f32(nnt_tile_numel(buffers[0]), a->lr, a->momentum, a->weight_decay,
                         a->grad_scale, a->first_step, nnt_tile_f32(buffers[1]),
                         nnt_tile_f32(buffers[0]), a->has_buf ? nnt_tile_f32(buffers[2]) : NULL);
}

/* ---- CUDA ----------------------------------------------------------------------------- */

#ifdef NNT_CUDA_CODELETS
static void adam_cuda(void *buffers[], void *cl_arg)
{
    const struct adam_args *a = cl_arg;
    int rc = nnt_cuda_adam_step_f32(nnt_tile_numel(buffers[0]), a->decoupled, a->lr, a->beta1,
                                    a->beta2, a->eps, a->weight_decay, a->bc1, a->bc2,
                                    a->grad_scale, nnt_tile_f32(buffers[1]), nnt_tile_f32(buffers[0]),
                                    nnt_tile_f32(buffers[2]), nnt_tile_f32(buffers[3]),
                                    nnt_cuda_task_stream());
    if (rc == 0 && a->bf16_copy)   /* the rounding of nnt_tensor_convert, on the same stream */
        rc = nnt_cuda_f32_to_bf16(nnt_tile_numel(buffers[0]), nnt_tile_f32(buffers[0]),
                                  (uint16_t *)STARPU_VECTOR_GET_PTR(buffers[4]),
                                  nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_adam_step", "CUDA kernel failed (%d)", rc);
}

static void sgd_cuda(void *buffers[], void *cl_arg)
{
    const struct sgd_args *a = cl_arg;
    int rc = nnt_cuda_sgd_step_f32(nnt_tile_numel(buffers[0]), a->lr, a->momentum, a->weight_decay,
                                   a->grad_scale, a->first_step, nnt_tile_f32(buffers[1]),
                                   nnt_tile_f32(buffers[0]), a->has_buf ? nnt_tile_f32(buffers[2]) : NULL,
                                   nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_sgd_step", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

/* ---- codelets ------------------------------------------------------------------------- */

static uint32_t hash_size_and(struct starpu_task *task, uint32_t a, uint32_t b)
{
    uint32_t n = (uint32_t)starpu_vector_get_nx(STARPU_TASK_GET_HANDLE(task, 0));
    return starpu_hash_crc32c_be(b, starpu_hash_crc32c_be(a, starpu_hash_crc32c_be(n, 0)));
}

/* Adam and AdamW do slightly different work. */
static uint32_t adam_footprint(struct starpu_task *task)
{
    const struct adam_args *a = task->cl_arg;
    return hash_size_and(task, (uint32_t)a->decoupled, (uint32_t)a->bf16_copy);
}

/* With or without momentum, reading the buffer or not. */
static uint32_t sgd_footprint(struct starpu_task *task)
{
    const struct sgd_args *a = task->cl_arg;
    return hash_size_and(task, (uint32_t)a->has_buf, (uint32_t)a->first_step);
}

static struct starpu_perfmodel adam_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_adam_step", .footprint = adam_footprint};
static struct starpu_perfmodel sgd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_sgd_step", .footprint = sgd_footprint};

static struct starpu_codelet adam_cl = {
    .name = "nnt_adam_step",
    .cpu_funcs = {adam_cpu},
    NNT_CUDA_FUNCS(adam_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &adam_model,
};

static struct starpu_codelet sgd_cl = {
    .name = "nnt_sgd_step",
    .cpu_funcs = {sgd_cpu},
    NNT_CUDA_FUNCS(sgd_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sgd_model,
};

/* ---- submission ----------------------------------------------------------------------- */

/* One Adam/AdamW step on a parameter tile p with gradient g and moments m, v (all distinct
 * tiles of one size); p16: p's bf16 copy (a bf16 tile of p's size) written too, or NULL. */
int nnt_insert_adam_step(nnt_ctx *ctx, int decoupled, float lr, float beta1, float beta2,
                         float eps, float weight_decay, float bc1, float bc2, float grad_scale,
                         starpu_data_handle_t p, starpu_data_handle_t g, starpu_data_handle_t m,
                         starpu_data_handle_t v, starpu_data_handle_t p16)
{
    struct adam_args args;
    memset(&args, 0, sizeof args);
    args.decoupled = decoupled;
    args.lr = lr;
    args.beta1 = beta1;
    args.beta2 = beta2;
    args.eps = eps;
    args.weight_decay = weight_decay;
    args.bc1 = bc1;
    args.bc2 = bc2;
    args.grad_scale = grad_scale;
    args.bf16_copy = p16 != NULL;
    struct starpu_data_descr bufs[5] = {
        {p, STARPU_RW}, {g, STARPU_R}, {m, STARPU_RW}, {v, STARPU_RW}, {p16, STARPU_W}};
    return nnt_submit(ctx, &adam_cl, p16 ? 5 : 4, bufs, &args, sizeof args);
}

/* One SGD step on a parameter tile p with gradient g; buf: the momentum tile, or NULL
 * (plain SGD). On the first step buf is only written. */
int nnt_insert_sgd_step(nnt_ctx *ctx, float lr, float momentum, float weight_decay,
                        float grad_scale, int first_step, starpu_data_handle_t p,
                        starpu_data_handle_t g, starpu_data_handle_t buf)
{
    struct sgd_args args;
    memset(&args, 0, sizeof args);
    args.has_buf = buf != NULL;
    args.first_step = first_step != 0;
    args.lr = lr;
    args.momentum = momentum;
    args.weight_decay = weight_decay;
    args.grad_scale = grad_scale;
    struct starpu_data_descr bufs[3] = {
        {p, STARPU_RW}, {g, STARPU_R}, {buf, first_step ? STARPU_W : STARPU_RW}};
    return nnt_submit(ctx, &sgd_cl, buf ? 3 : 2, bufs, &args, sizeof args);
}
