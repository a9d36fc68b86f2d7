/* SPDX-License-Identifier: MIT */
/* Codelets that overwrite one tile: constant fill (fp32, int32, bf16 bits) and the
 * deterministic random fill, each on CPU and CUDA. */
#include "../internal.h"
#include "nnt_cpu.h"

#include <string.h>

/* The value to fill with, as the tile's dtype takes it (bf16: its bit pattern, rounded once
 * by the submitter). */
struct fill_args {
    double value;
    int dtype;   /* nnt_dtype of the tile */
};

struct fill_random_args {
    int ndim;
    int dist;
    float a, b;
    uint64_t seed;
    int64_t global_shape[NNT_MAX_DIMS];
    int64_t origin[NNT_MAX_DIMS];
    int64_t shape[NNT_MAX_DIMS];
};

static void fill_cpu(void *buffers[], void *cl_arg)
{
    const struct fill_args *args = cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[0]);
    void *x = (void *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (n)
    switch (args->dtype) {
    case NNT_INT32:
        nnt_cpu_fill_i32(n, (int32_t)args->value, x);
        break;
    case NNT_BF16:
        nnt_cpu_fill_u16(n, (uint16_t)args->value, x);
        break;
    default:
        nnt_cpu_fill_f32(n, (float)args->value, x);
        break;
    }
}

static void fill_random_cpu(void *buffers[], void *cl_arg)
{
    const struct fill_random_args *a = cl_arg;
    float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (tile shape)
    nnt_cpu_fill_random_f32(a->ndim, a->global_shape, a->origin, a->shape, a->seed, a->dist,
                            a->a, a->b, x);
}

#ifdef NNT_CUDA_CODELETS
static void fill_cuda(void *buffers[], void *cl_arg)
{
    const struct fill_args *args = cl_arg;
    int64_t n = STARPU_VECTOR_GET_NX(buffers[0]);
    void *x = (void *)STARPU_VECTOR_GET_PTR(buffers[0]);
    cudaStream_t stream = nnt_cuda_task_stream();
    int rc;
    switch (args->dtype) {
    case NNT_INT32:
        rc = nnt_cuda_fill_i32(n, (int32_t)args->value, x, stream);
        break;
    case NNT_BF16:
        rc = nnt_cuda_fill_u16(n, (uint16_t)args->value, x, stream);
        break;
    default:
        rc = nnt_cuda_fill_f32(n, (float)args->value, x, stream);
        break;
    }
    if (rc)
        nnt_task_error("nnt_fill", "CUDA kernel failed (%d)", rc);
}

static void fill_random_cuda(void *buffers[], void *cl_arg)
{
    const struct fill_random_args *a = cl_arg;
    float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    int rc = nnt_cuda_fill_random_f32(a->ndim, a->global_shape, a->origin, a->shape, a->seed,
                                      a->dist, a->a, a->b, x, nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_fill_random", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

static struct starpu_perfmodel fill_f32_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_fill_f32"};
static struct starpu_perfmodel fill_i32_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_fill_i32"};
static struct starpu_perfmodel fill_u16_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_fill_u16"};
static struct starpu_perfmodel fill_random_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_fill_random"};
static struct starpu_perfmodel dropout_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_dropout"};

/* One codelet per dtype (names and models of their own, as traces show them), one function. */
static struct starpu_codelet fill_f32_cl = {
    .name = "nnt_fill_f32",
    .cpu_funcs = {fill_cpu},
    NNT_CUDA_FUNCS(fill_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &fill_f32_model,
};

static struct starpu_codelet fill_i32_cl = {
    .name = "nnt_fill_i32",
    .cpu_funcs = {fill_cpu},
    NNT_CUDA_FUNCS(fill_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &fill_i32_model,
};

static struct starpu_codelet fill_u16_cl = {
    .name = "nnt_fill_u16",
    .cpu_funcs = {fill_cpu},
    NNT_CUDA_FUNCS(fill_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &fill_u16_model,
};

static struct starpu_codelet fill_random_cl = {
    .name = "nnt_fill_random",
    .cpu_funcs = {fill_random_cpu},
    NNT_CUDA_FUNCS(fill_random_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &fill_random_model,
};

/* dist 2 (dropout) reads the tile it writes */
static struct starpu_codelet dropout_cl = {
    .name = "nnt_dropout",
    .cpu_funcs = {fill_random_cpu},
    NNT_CUDA_FUNCS(fill_random_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &dropout_model,
};

int nnt_insert_fill(nnt_tensor *t, starpu_data_handle_t h, double value)
{
    struct fill_args args = {value, t->dtype};
    struct starpu_codelet *cl = &fill_f32_cl;
    if (t->dtype == NNT_INT32)
        cl = &fill_i32_cl;
    if (t->dtype == NNT_BF16) {
        float f = (float)value;
        uint16_t bits;
        nnt_cpu_f32_to_bf16(1, &f, &bits);
        args.value = bits;
        cl = &fill_u16_cl;
    }
    struct starpu_data_descr buf = {h, STARPU_W};
    return nnt_submit(t->ctx, cl, 1, &buf, &args, sizeof args);
}

int nnt_insert_fill_random(nnt_tensor *t, starpu_data_handle_t h, const int64_t *origin,
                           const int64_t *tile_shape, uint64_t seed, int dist, float a,
                           float b)
{
    struct fill_random_args args;
    memset(&args, 0, sizeof args);
    args.ndim = t->ndim;
    args.dist = dist;
    args.a = a;
    args.b = b;
    args.seed = seed;
    memcpy(args.global_shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
    memcpy(args.origin, origin, (size_t)t->ndim * sizeof *origin);
    memcpy(args.shape, tile_shape, (size_t)t->ndim * sizeof *tile_shape);
    struct starpu_data_descr buf = {h, dist == 2 ? STARPU_RW : STARPU_W};
    return nnt_submit(t->ctx, dist == 2 ? &dropout_cl : &fill_random_cl, 1, &buf, &args,
                      sizeof args);
}
