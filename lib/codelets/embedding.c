/* SPDX-License-Identifier: MIT */
/* Codelets of the embedding lookup and its gradient. A tokens tile holds ntok ids, an
 * activation tile is (ntok, nc), a table tile (nv, nc) holds vocabulary rows [v0, v0 + nv);
 * the sizes come from the buffers. Position rows: an activation tile (nb, nt, nc) and a
 * position tile whose first nt rows are the positions of the activation tile's t range. */
#include "../internal.h"
#include "nnt_cpu.h"

struct gather_args {
    int64_t v0;        /* first vocabulary id of the table tile                        */
    int zero_first;    /* 1: out is only written: zero it before gathering             */
};

struct pos_args {
    int64_t nb;        /* batch rows of the activation tile                            */
    int64_t inner;     /* nt * nc: the slab that lines up with the position rows      */
};

/* buffers: tokens (ntok) R, table (nv, nc) R (float, or bf16: elements of 2 bytes), out
 * (ntok, nc) W or RW */
static void gather_cpu(void *buffers[], void *cl_arg)
{
    const struct gather_args *a = cl_arg;
    int64_t ntok = STARPU_VECTOR_GET_NX(buffers[0]);
    int64_t nc = STARPU_VECTOR_GET_NX(buffers[2]) / ntok;
    int64_t nv = STARPU_VECTOR_GET_NX(buffers[1]) / nc;
    const int32_t *tok = (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[0]);
    const void *table = (const void *)STARPU_VECTOR_GET_PTR(buffers[1]);
    float *out = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    if (a->zero_first)
        nnt_cpu_fill_f32(ntok * nc, 0.0f, out);
    if (STARPU_VECTOR_GET_ELEMSIZE(buffers[1]) == 2)
        nnt_cpu_embedding_gather_bf16(ntok, nc, tok, a->v0, nv, table, nc, out, nc);
    else
        nnt_cpu_embedding_gather_f32(ntok, nc, tok, a->v0, nv, table, nc, out, nc);
}

/* buffers: tokens (ntok) R, dout (ntok, nc) R, dtable (nv, nc) RW */
static void scatter_cpu(void *buffers[], void *cl_arg)
{
    const struct gather_args *a = cl_arg;
    int64_t ntok = STARPU_VECTOR_GET_NX(buffers[0]);
    int64_t nc = STARPU_VECTOR_GET_NX(buffers[1]) / ntok;
    int64_t nv = STARPU_VECTOR_GET_NX(buffers[2]) / nc;
    nnt_cpu_embedding_scatter_add_f32(ntok, nc,
                                      (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[0]), a->v0,
                                      nv, (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), nc,
                                      (float *)STARPU_VECTOR_GET_PTR(buffers[2]), nc);
}

/* buffers: wpe (>= nt, nc) R, out (nb, nt, nc) RW:  out[b] += wpe[:nt] */
static void add_pos_cpu(void *buffers[], void *cl_arg)
{
    const struct pos_args *a = cl_arg;
    nnt_cpu_add_bcast_f32(a->nb, a->inner, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                          (float *)STARPU_VECTOR_GET_PTR(buffers[1]), a->inner);
}

/* buffers: dout (nb, nt, nc) R, dwpe (>= nt, nc) RW:  dwpe[:nt] += sum_b dout[b] */
static void sum_pos_cpu(void *buffers[], void *cl_arg)
{
    const struct pos_args *a = cl_arg;
    nnt_cpu_sum_outer_f32(a->nb, a->inner, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                          a->inner, (float *)STARPU_VECTOR_GET_PTR(buffers[1]));
}

#ifdef NNT_CUDA_CODELETS
static void gather_cuda(void *buffers[], void *cl_arg)
{
    const struct gather_args *a = cl_arg;
    int64_t ntok = STARPU_VECTOR_GET_NX(buffers[0]);
    int64_t nc = STARPU_VECTOR_GET_NX(buffers[2]) / ntok;
    int64_t nv = STARPU_VECTOR_GET_NX(buffers[1]) / nc;
    float *out = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    cudaStream_t stream = nnt_cuda_task_stream();
    int rc = a->zero_first ? nnt_cuda_fill_f32(ntok * nc, 0.0f, out, stream) : 0;
    if (rc == 0)
        rc = nnt_cuda_embedding_gather_f32(ntok, nc,
                                           (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                           a->v0, nv,
                                           (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), nc,
                                           out, nc, stream);
    if (rc)
        nnt_task_error("nnt_embedding_gather", "CUDA kernel failed (%d)", rc);
}

static void scatter_cuda(void *buffers[], void *cl_arg)
{
    const struct gather_args *a = cl_arg;
    int64_t ntok = STARPU_VECTOR_GET_NX(buffers[0]);
    int64_t nc = STARPU_VECTOR_GET_NX(buffers[1]) / ntok;
    int64_t nv = STARPU_VECTOR_GET_NX(buffers[2]) / nc;
    int rc = nnt_cuda_embedding_scatter_add_f32(
        ntok, nc, (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[0]), a->v0, nv,
        (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), nc,
        (float *)STARPU_VECTOR_GET_PTR(buffers[2]), nc, nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_embedding_scatter", "CUDA kernel failed (%d)", rc);
}

static void add_pos_cuda(void *buffers[], void *cl_arg)
{
    const struct pos_args *a = cl_arg;
    int rc = nnt_cuda_add_bcast_f32(a->nb, a->inner,
                                    (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                    (float *)STARPU_VECTOR_GET_PTR(buffers[1]), a->inner,
                                    nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_embedding_add_pos", "CUDA kernel failed (%d)", rc);
}

static void sum_pos_cuda(void *buffers[], void *cl_arg)
{
    const struct pos_args *a = cl_arg;
    int rc = nnt_cuda_sum_outer_f32(a->nb, a->inner,
                                    (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a->inner,
                                    (float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                    nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_embedding_sum_pos", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

static struct starpu_perfmodel gather_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_embedding_gather"};
static struct starpu_perfmodel scatter_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_embedding_scatter"};
static struct starpu_perfmodel add_pos_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_embedding_add_pos"};
static struct starpu_perfmodel sum_pos_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_embedding_sum_pos"};

static struct starpu_codelet gather_cl = {
    .name = "nnt_embedding_gather",
    .cpu_funcs = {gather_cpu},
    NNT_CUDA_FUNCS(gather_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gather_model,
};

/* a bf16 table's gathers run on CPU workers (the table is a frozen model's, kept in RAM) */
static struct starpu_codelet gather16_cl = {
    .name = "nnt_embedding_gather_bf16",
    .cpu_funcs = {gather_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &gather_model,
};

static struct starpu_codelet scatter_cl = {
    .name = "nnt_embedding_scatter",
    .cpu_funcs = {scatter_cpu},
    NNT_CUDA_FUNCS(scatter_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &scatter_model,
};

static struct starpu_codelet add_pos_cl = {
    .name = "nnt_embedding_add_pos",
    .cpu_funcs = {add_pos_cpu},
    NNT_CUDA_FUNCS(add_pos_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &add_pos_model,
};

static struct starpu_codelet sum_pos_cl = {
    .name = "nnt_embedding_sum_pos",
    .cpu_funcs = {sum_pos_cpu},
    NNT_CUDA_FUNCS(sum_pos_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sum_pos_model,
};

int nnt_insert_embedding_gather(nnt_ctx *ctx, starpu_data_handle_t tokens,
                                starpu_data_handle_t table, int64_t v0, int zero_first,
                                starpu_data_handle_t out)
{
    const int table_bf16 = starpu_vector_get_elemsize(table) == sizeof(uint16_t);
    struct gather_args args = {v0, zero_first};
    struct starpu_data_descr bufs[3] = {
        {tokens, STARPU_R}, {table, STARPU_R}, {out, zero_first ? STARPU_W : STARPU_RW}};
    return nnt_submit(ctx, table_bf16 ? &gather16_cl : &gather_cl, 3, bufs, &args, sizeof args);
}

int nnt_insert_embedding_scatter(nnt_ctx *ctx, starpu_data_handle_t tokens,
                                 starpu_data_handle_t dout, int64_t v0,
                                 starpu_data_handle_t dtable)
{
    struct gather_args args = {v0, 0};
    struct starpu_data_descr bufs[3] = {
        {tokens, STARPU_R}, {dout, STARPU_R}, {dtable, STARPU_RW}};
    return nnt_submit(ctx, &scatter_cl, 3, bufs, &args, sizeof args);
}

int nnt_insert_embedding_add_pos(nnt_ctx *ctx, starpu_data_handle_t wpe, int64_t nb,
                                 int64_t inner, starpu_data_handle_t out)
{
    struct pos_args args = {nb, inner};
    struct starpu_data_descr bufs[2] = {{wpe, STARPU_R}, {out, STARPU_RW}};
    return nnt_submit(ctx, &add_pos_cl, 2, bufs, &args, sizeof args);
}

int nnt_insert_embedding_sum_pos(nnt_ctx *ctx, starpu_data_handle_t dout, int64_t nb,
                                 int64_t inner, starpu_data_handle_t dwpe)
{
    struct pos_args args = {nb, inner};
    struct starpu_data_descr bufs[2] = {{dout, STARPU_R}, {dwpe, STARPU_RW}};
    return nnt_submit(ctx, &sum_pos_cl, 2, bufs, &args, sizeof args);
}
