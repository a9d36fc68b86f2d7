/* SPDX-License-Identifier: MIT */
/* Codelets of softmax cross-entropy with the vocabulary split over tiles. A logits tile is
 * (rows, nv) holding vocabulary ids [v0, v0 + nv); targets, m, s, tgt, loss and lse tiles
 * are (rows). Sizes come from the buffers. */
#include "../internal.h"
#include "nnt_cpu.h"

#include <math.h>

struct xent_args {
    int64_t v0;            /* first vocabulary id of the logits tile                  */
    int32_t ignore_index;
    float scale;
    int init;              /* forward block: m, s, tgt only written (first vocab tile) */
    int in_place;          /* backward block: dlogits is the logits buffer            */
    int weighted;          /* backward block: a last buffer of per-row weights        */
    float eps;             /* label smoothing (finish, backward block; > 0: finish takes
                              a last buffer, d (rows), the sums of logit - m)          */
    int64_t vocab;         /* V, the whole row's ids (label smoothing)                */
    int sums;              /* forward block: a last buffer d, the running sums of
                              logit - m (label smoothing)                             */
};

#define P(i) ((float *)STARPU_VECTOR_GET_PTR(buffers[i]))
#define CP(i) ((const float *)STARPU_VECTOR_GET_PTR(buffers[i]))
#define TARGETS(i) ((const int32_t *)STARPU_VECTOR_GET_PTR(buffers[i]))

/* buffers: logits (rows, nv) R, targets (rows) R, m, s, tgt (rows) RW (W with init),
 * [d (rows) RW (W with init), with sums] */
static void fwd_block_cpu(void *buffers[], void *cl_arg)
{
    const struct xent_args *a = cl_arg;
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[1]);
    int64_t nv = STARPU_VECTOR_GET_NX(buffers[0]) / rows;
    if (a->init) {
        nnt_cpu_fill_f32(rows, -INFINITY, P(2));
        nnt_cpu_fill_f32(rows, 0.0f, P(3));
        nnt_cpu_fill_f32(rows, NAN, P(4));   /* stays NaN for a target outside [0, V) */
    }
    nnt_cpu_xent_fwd_block_f32(rows, nv, a->v0, CP(0), nv, TARGETS(1), P(2), P(3), P(4),
                               a->sums ? P(5) : NULL);
}

/* buffers: targets R, m R, s R, tgt R, loss W, lse W, [d R, with eps] (all (rows)) */
static void finish_cpu(void *buffers[], void *cl_arg)
{
    const struct xent_args *a = cl_arg;
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[0]);
    nnt_cpu_xent_loss_f32(rows, TARGETS(0), a->ignore_index, CP(1), CP(2), CP(3), P(4), P(5));
    if (a->eps > 0.0f)
        nnt_cpu_xent_smooth_loss_f32(rows, TARGETS(0), a->ignore_index, a->eps, a->vocab, CP(2),
                                     CP(6), P(4));
}

/* The backward block's per-row weights: its last buffer, or NULL (every row 1). */
static const float *bwd_weights(void *buffers[], const struct xent_args *a)
{
    return a->weighted ? CP(a->in_place ? 4 : 5) : NULL;
}

/* buffers: logits (rows, nv) R (RW in place), targets R, lse R, ones R, [dlogits W],
 * [weights (rows) R] */
static void bwd_block_cpu(void *buffers[], void *cl_arg)
{
    const struct xent_args *a = cl_arg;
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[1]);
    int64_t nv = STARPU_VECTOR_GET_NX(buffers[0]) / rows;
    float *dlogits = a->in_place ? P(0) : P(4);
    nnt_cpu_xent_bwd_block_f32(rows, nv, a->v0, CP(0), nv, TARGETS(1), a->ignore_index, CP(2),
                               CP(3), bwd_weights(buffers, a), a->scale, a->eps, a->vocab,
                               dlogits);
}

#ifdef NNT_CUDA_CODELETS
static void fwd_block_cuda(void *buffers[], void *cl_arg)
{
    const struct xent_args *a = cl_arg;
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[1]);
    int64_t nv = STARPU_VECTOR_GET_NX(buffers[0]) / rows;
    cudaStream_t st = nnt_cuda_task_stream();
    int rc = 0;
    if (a->init) {
        rc = nnt_cuda_fill_f32(rows, -INFINITY, P(2), st);
        if (rc == 0)
            rc = nnt_cuda_fill_f32(rows, 0.0f, P(3), st);
        if (rc == 0)
            rc = nnt_cuda_fill_f32(rows, NAN, P(4), st);
    }
    if (rc == 0)
        rc = nnt_cuda_xent_fwd_block_f32(rows, nv, a->v0, CP(0), nv, TARGETS(1), P(2), P(3),
                                         P(4), a->sums ? P(5) : NULL, st);
    if (rc)
        nnt_task_error("nnt_xent_fwd_block", "CUDA kernel failed (%d)", rc);
}

static void finish_cuda(void *buffers[], void *cl_arg)
{
    const struct xent_args *a = cl_arg;
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[0]);
    cudaStream_t st = nnt_cuda_task_stream();
    int rc = nnt_cuda_xent_loss_f32(rows, TARGETS(0), a->ignore_index, CP(1), CP(2), CP(3),
                                    P(4), P(5), st);
    if (rc == 0 && a->eps > 0.0f)
        rc = nnt_cuda_xent_smooth_loss_f32(rows, TARGETS(0), a->ignore_index, a->eps, a->vocab,
                                           CP(2), CP(6), P(4), st);
    if (rc)
        nnt_task_error("nnt_xent_finish", "CUDA kernel failed (%d)", rc);
}

static void bwd_block_cuda(void *buffers[], void *cl_arg)
{
    const struct xent_args *a = cl_arg;
    int64_t rows = STARPU_VECTOR_GET_NX(buffers[1]);
    int64_t nv = STARPU_VECTOR_GET_NX(buffers[0]) / rows;
    float *dlogits = a->in_place ? P(0) : P(4);
    int rc = nnt_cuda_xent_bwd_block_f32(rows, nv, a->v0, CP(0), nv, TARGETS(1),
                                         a->ignore_index, CP(2), CP(3), bwd_weights(buffers, a),
                                         a->scale, a->eps, a->vocab, dlogits,
                                         nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_xent_bwd_block", "CUDA kernel failed (%d)", rc);
}
#define NNT_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define NNT_CUDA_FUNCS(f)
#endif

static struct starpu_perfmodel fwd_block_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_xent_fwd_block"};
static struct starpu_perfmodel finish_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_xent_finish"};
static struct starpu_perfmodel bwd_block_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_xent_bwd_block"};

static struct starpu_codelet fwd_block_cl = {
    .name = "nnt_xent_fwd_block",
    .cpu_funcs = {fwd_block_cpu},
    NNT_CUDA_FUNCS(fwd_block_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &fwd_block_model,
};

static struct starpu_codelet finish_cl = {
    .name = "nnt_xent_finish",
    .cpu_funcs = {finish_cpu},
    NNT_CUDA_FUNCS(finish_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &finish_model,
};

static struct starpu_codelet bwd_block_cl = {
    .name = "nnt_xent_bwd_block",
    .cpu_funcs = {bwd_block_cpu},
    NNT_CUDA_FUNCS(bwd_block_cuda)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &bwd_block_model,
};

/* h: logits, targets, m, s, tgt, d (NULL: no label smoothing). init: m, s, tgt, d only
 * written (first vocabulary tile). */
int nnt_insert_xent_fwd_block(nnt_ctx *ctx, const starpu_data_handle_t *h, int64_t v0,
                              int init)
{
    struct xent_args args = {v0, 0, 0.0f, init, 0, 0, 0.0f, 0, h[5] != NULL};
    enum starpu_data_access_mode acc = init ? STARPU_W : STARPU_RW;
    struct starpu_data_descr bufs[6] = {
        {h[0], STARPU_R}, {h[1], STARPU_R}, {h[2], acc}, {h[3], acc}, {h[4], acc}, {h[5], acc}};
    return nnt_submit(ctx, &fwd_block_cl, h[5] ? 6 : 5, bufs, &args, sizeof args);
}

/* h: targets, m, s, tgt, loss, lse, d (with eps > 0; V ids a row). */
int nnt_insert_xent_finish(nnt_ctx *ctx, const starpu_data_handle_t *h, int32_t ignore_index,
                           float eps, int64_t vocab)
{
    struct xent_args args = {0, ignore_index, 0.0f, 0, 0, 0, eps, vocab, 0};
    struct starpu_data_descr bufs[7] = {
        {h[0], STARPU_R}, {h[1], STARPU_R}, {h[2], STARPU_R}, {h[3], STARPU_R},
        {h[4], STARPU_W}, {h[5], STARPU_W}, {h[6], STARPU_R}};
    return nnt_submit(ctx, &finish_cl, eps > 0.0f ? 7 : 6, bufs, &args, sizeof args);
}

/* h: logits, targets, lse, ones, dlogits, weights (NULL: every row 1); dlogits == logits: one
 * buffer, in place (RW). eps > 0: label smoothing over V = vocab ids. */
int nnt_insert_xent_bwd_block(nnt_ctx *ctx, const starpu_data_handle_t *h, int64_t v0,
                              int32_t ignore_index, float scale, float eps, int64_t vocab)
{
    int in_place = h[4] == h[0], weighted = h[5] != NULL;
    struct xent_args args = {v0, ignore_index, scale, 0, in_place, weighted, eps, vocab, 0};
    struct starpu_data_descr bufs[6] = {
        {h[0], in_place ? STARPU_RW : STARPU_R}, {h[1], STARPU_R}, {h[2], STARPU_R},
        {h[3], STARPU_R}, {h[4], STARPU_W}};
    int n = in_place ? 4 : 5;   /* (in place: no dlogits buffer) */
    if (weighted)
        bufs[n++] = (struct starpu_data_descr){h[5], STARPU_R};
    return nnt_submit(ctx, &bwd_block_cl, n, bufs, &args, sizeof args);
}
