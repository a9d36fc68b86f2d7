/* Codelets of causal flash attention. Tiles of q, k, v, o, dq, dk, dv are
 * (nbh, t, hd) with nbh = b-tile * h-tile rows of slabs; m, l, lse, d are (nbh, t).
 * q_pos0 / k_pos0 are the sequence positions of the first query / key row of the tiles. */
#include "../internal.h"
#include "nnt_cpu.h"

#include <math.h>

struct attn_block_args {
    int64_t nbh, tq, tk, hd;
    int64_t q_pos0, k_pos0;
    float scale;
    int init;       /* forward: o, m, l only written: start from 0, -inf, 0;
                       backward: bit 1 dq only written, bit 2 dk, dv only written (zeroed) */
};

struct attn_rows_args {
    int64_t nbh, tq, hd;
};

enum { INIT_DQ = 1, INIT_DKV = 2 };

/* Footprint of a block task: its sizes, whether it straddles the diagonal (half the work
 * is masked) and its initialisation, which the buffer sizes alone do not tell apart. */
static uint32_t block_footprint(struct starpu_task *task)
{
    const struct attn_block_args *a = task->cl_arg;
    uint32_t h = starpu_hash_crc32c_be_n(&a->nbh, sizeof a->nbh, 0);
    h = starpu_hash_crc32c_be_n(&a->tq, sizeof a->tq, h);
    h = starpu_hash_crc32c_be_n(&a->tk, sizeof a->tk, h);
    h = starpu_hash_crc32c_be_n(&a->hd, sizeof a->hd, h);
    h = starpu_hash_crc32c_be((uint32_t)(a->k_pos0 + a->tk - 1 > a->q_pos0), h);
    return starpu_hash_crc32c_be((uint32_t)a->init, h);
}

#define P(i) ((float *)STARPU_VECTOR_GET_PTR(buffers[i]))
#define CP(i) ((const float *)STARPU_VECTOR_GET_PTR(buffers[i]))

/* buffers: q R, k R, v R, o_acc RW (W with init), m RW (W), l RW (W) */
static void fwd_block_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_block_args *a = cl_arg;
    if (a->init) {
        nnt_cpu_fill_f32(a->nbh * a->tq * a->hd, 0.0f, P(3));
        nnt_cpu_fill_f32(a->nbh * a->tq, -INFINITY, P(4));
        nnt_cpu_fill_f32(a->nbh * a->tq, 0.0f, P(5));
    }
    nnt_cpu_attn_fwd_block_f32(a->nbh, a->tq, a->tk, a->hd, a->q_pos0, a->k_pos0, a->scale,
                               CP(0), CP(1), CP(2), P(3), P(4), P(5));
}

/* buffers: o RW, m R, l R, lse W */
static void fwd_finalize_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_rows_args *a = cl_arg;
    nnt_cpu_attn_fwd_finalize_f32(a->nbh, a->tq, a->hd, P(0), CP(1), CP(2), P(3));
}

/* buffers: o R, dout R, d W */
static void bwd_prep_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_rows_args *a = cl_arg;
    nnt_cpu_attn_bwd_prep_f32(a->nbh, a->tq, a->hd, CP(0), CP(1), P(2));
}

/* buffers: q, k, v, dout, lse, d R; dq, dk, dv RW (W where init says so) */
static void bwd_block_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_block_args *a = cl_arg;
    if (a->init & INIT_DQ)
        nnt_cpu_fill_f32(a->nbh * a->tq * a->hd, 0.0f, P(6));
    if (a->init & INIT_DKV) {
        nnt_cpu_fill_f32(a->nbh * a->tk * a->hd, 0.0f, P(7));
        nnt_cpu_fill_f32(a->nbh * a->tk * a->hd, 0.0f, P(8));
    }
    nnt_cpu_attn_bwd_block_f32(a->nbh, a->tq, a->tk, a->hd, a->q_pos0, a->k_pos0, a->scale,
                               CP(0), CP(1), CP(2), CP(3), CP(4), CP(5), P(6), P(7), P(8));
}

#ifdef NNT_CUDA_CODELETS
static void fwd_block_cuda(void *buffers[], void *cl_arg)
{
    const struct attn_block_args *a = cl_arg;
    cudaStream_t s = nnt_cuda_task_stream();
    int rc = 0;
    if (a->init) {
        rc = nnt_cuda_fill_f32(a->nbh * a->tq * a->hd, 0.0f, P(3), s);
        if (rc == 0)
            rc = nnt_cuda_fill_f32(a->nbh * a->tq, -INFINITY, P(4), s);
        if (rc == 0)
            rc = nnt_cuda_fill_f32(a->nbh * a->tq, 0.0f, P(5), s);
    }
    if (rc == 0)
        rc = nnt_cuda_attn_fwd_block_f32(a->nbh, a->tq, a->tk, a->hd, a->q_pos0, a->k_pos0,
                                         a->scale, CP(0), CP(1), CP(2), P(3), P(4), P(5), s);
    if (rc)
        nnt_task_error("nnt_attn_fwd_block", "CUDA kernel failed (%d)", rc);
}

static void fwd_finalize_cuda(void *buffers[], void *cl_arg)
{
    const struct attn_rows_args *a = cl_arg;
    int rc = nnt_cuda_attn_fwd_finalize_f32(a->nbh, a->tq, a->hd, P(0), CP(1), CP(2), P(3),
                                            nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_attn_fwd_finalize", "CUDA kernel failed (%d)", rc);
}

static void bwd_prep_cuda(void *buffers[], void *cl_arg)
{
    const struct attn_rows_args *a = cl_arg;
    int rc = nnt_cuda_attn_bwd_prep_f32(a->nbh, a->tq, a->hd, CP(0), CP(1), P(2),
                                        nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_attn_bwd_prep", "CUDA kernel failed (%d)", rc);
}

static void bwd_block_cuda(void *buffers[], void *cl_arg)
{
    const struct attn_block_args *a = cl_arg;
    cudaStream_t s = nnt_cuda_task_stream();
    int rc = 0;
    if (a->init & INIT_DQ)
        rc = nnt_cuda_fill_f32(a->nbh * a->tq * a->hd, 0.0f, P(6), s);
    if (rc == 0 && (a->init & INIT_DKV))
        rc = nnt_cuda_fill_f32(a->nbh * a->tk * a->hd, 0.0f, P(7), s);
    if (rc == 0 && (a->init & INIT_DKV))
        rc = nnt_cuda_fill_f32(a->nbh * a->tk * a->hd, 0.0f, P(8), s);
    if (rc == 0)
        rc = nnt_cuda_attn_bwd_block_f32(a->nbh, a->tq, a->tk, a->hd, a->q_pos0, a->k_pos0,
                                         a->scale, CP(0), CP(1), CP(2), CP(3), CP(4), CP(5),
                                         P(6), P(7), P(8), s);
    if (rc)
        nnt_task_error("nnt_attn_bwd_block", "CUDA kernel failed (%d)", rc);
}
/* The CUDA kernels take head dimensions up to NNT_CUDA_ATTN_MAX_HD: larger ones run on the
 * CPU workers only (StarPU asks before it places a task). */
static int block_can_execute(unsigned worker, struct starpu_task *task, unsigned nimpl)
{
    (void)nimpl;
    const struct attn_block_args *a = task->cl_arg;
    return starpu_worker_get_type((int)worker) != STARPU_CUDA_WORKER ||
           a->hd <= NNT_CUDA_ATTN_MAX_HD;
}

static int rows_can_execute(unsigned worker, struct starpu_task *task, unsigned nimpl)
{
    (void)nimpl;
    const struct attn_rows_args *a = task->cl_arg;
    return starpu_worker_get_type((int)worker) != STARPU_CUDA_WORKER ||
           a->hd <= NNT_CUDA_ATTN_MAX_HD;
}
#define NNT_CUDA_FUNCS(f, can) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC}, \
                               .can_execute = can,
#else
#define NNT_CUDA_FUNCS(f, can)
#endif

static struct starpu_perfmodel fwd_block_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_attn_fwd_block",
    .footprint = block_footprint};
static struct starpu_perfmodel fwd_finalize_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_attn_fwd_finalize"};
static struct starpu_perfmodel bwd_prep_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_attn_bwd_prep"};
static struct starpu_perfmodel bwd_block_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_attn_bwd_block",
    .footprint = block_footprint};

static struct starpu_codelet fwd_block_cl = {
    .name = "nnt_attn_fwd_block",
    .cpu_funcs = {fwd_block_cpu},
    NNT_CUDA_FUNCS(fwd_block_cuda, block_can_execute)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &fwd_block_model,
};

static struct starpu_codelet fwd_finalize_cl = {
    .name = "nnt_attn_fwd_finalize",
    .cpu_funcs = {fwd_finalize_cpu},
    NNT_CUDA_FUNCS(fwd_finalize_cuda, rows_can_execute)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &fwd_finalize_model,
};

static struct starpu_codelet bwd_prep_cl = {
    .name = "nnt_attn_bwd_prep",
    .cpu_funcs = {bwd_prep_cpu},
    NNT_CUDA_FUNCS(bwd_prep_cuda, rows_can_execute)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &bwd_prep_model,
};

static struct starpu_codelet bwd_block_cl = {
    .name = "nnt_attn_bwd_block",
    .cpu_funcs = {bwd_block_cpu},
    NNT_CUDA_FUNCS(bwd_block_cuda, block_can_execute)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &bwd_block_model,
};

/* One (query tile, key tile) pair: (nbh, tq, hd) queries at q_pos0 against (nbh, tk, hd)
 * keys at k_pos0. h: q, k, v, o, m, l. init: o, m, l are only written (first key tile). */
int nnt_insert_attn_fwd_block(nnt_ctx *ctx, int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                              int64_t q_pos0, int64_t k_pos0, float scale,
                              const starpu_data_handle_t *h, int init)
{
    struct attn_block_args args = {nbh, tq, tk, hd, q_pos0, k_pos0, scale, init};
    enum starpu_data_access_mode acc = init ? STARPU_W : STARPU_RW;
    struct starpu_data_descr bufs[6] = {
        {h[0], STARPU_R}, {h[1], STARPU_R}, {h[2], STARPU_R},
        {h[3], acc}, {h[4], acc}, {h[5], acc}};
    return nnt_submit(ctx, &fwd_block_cl, 6, bufs, &args, sizeof args);
}

int nnt_insert_attn_fwd_finalize(nnt_ctx *ctx, int64_t nbh, int64_t tq, int64_t hd,
                                 starpu_data_handle_t o, starpu_data_handle_t m,
                                 starpu_data_handle_t l, starpu_data_handle_t lse)
{
    struct attn_rows_args args = {nbh, tq, hd};
    struct starpu_data_descr bufs[4] = {
        {o, STARPU_RW}, {m, STARPU_R}, {l, STARPU_R}, {lse, STARPU_W}};
    return nnt_submit(ctx, &fwd_finalize_cl, 4, bufs, &args, sizeof args);
}

int nnt_insert_attn_bwd_prep(nnt_ctx *ctx, int64_t nbh, int64_t tq, int64_t hd,
                             starpu_data_handle_t o, starpu_data_handle_t dout,
                             starpu_data_handle_t d)
{
    struct attn_rows_args args = {nbh, tq, hd};
    struct starpu_data_descr bufs[3] = {{o, STARPU_R}, {dout, STARPU_R}, {d, STARPU_W}};
    return nnt_submit(ctx, &bwd_prep_cl, 3, bufs, &args, sizeof args);
}

/* h: q, k, v, dout, lse, d, dq, dk, dv. init_dq / init_dkv: dq / dk and dv only written. */
int nnt_insert_attn_bwd_block(nnt_ctx *ctx, int64_t nbh, int64_t tq, int64_t tk, int64_t hd,
                              int64_t q_pos0, int64_t k_pos0, float scale,
                              const starpu_data_handle_t *h, int init_dq, int init_dkv)
{
    int init = (init_dq ? INIT_DQ : 0) | (init_dkv ? INIT_DKV : 0);
    struct attn_block_args args = {nbh, tq, tk, hd, q_pos0, k_pos0, scale, init};
    enum starpu_data_access_mode mq = init_dq ? STARPU_W : STARPU_RW;
    enum starpu_data_access_mode mkv = init_dkv ? STARPU_W : STARPU_RW;
    struct starpu_data_descr bufs[9] = {
        {h[0], STARPU_R}, {h[1], STARPU_R}, {h[2], STARPU_R}, {h[3], STARPU_R},
        {h[4], STARPU_R}, {h[5], STARPU_R}, {h[6], mq}, {h[7], mkv}, {h[8], mkv}};
    return nnt_submit(ctx, &bwd_block_cl, 9, bufs, &args, sizeof args);
}
