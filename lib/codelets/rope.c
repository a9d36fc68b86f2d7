/* SPDX-License-Identifier: MIT */
/* Codelets of the rotary position embedding (rotate-half pairs) on tiles of the attention
 * layout (B, NH, T, hd): a tile is (nbh, nt, w) with nbh = b-tile * h-tile slabs.
 *
 * One task rotates n pairs of every row: either a tile holding whole head vectors (w = hd,
 * lo = the first r/2 entries of a row, hi = the next r/2 ones, n = r/2, r the rotary
 * dimension: hd, or less with a partial rotary factor), or a pair of tiles of an hd split
 * into tiles of w dividing r/2 (lo = tile j, hi = tile j + r/(2w), n = w). The frequencies
 * of the task's n pairs, computed on the host once per operation, travel in the argument
 * block with the factor of their cosines and sines. In place (y == x) each distinct handle
 * is given to StarPU once, with the union of the access modes, and the body finds the roles
 * through slot indices, as the GELU codelets do. */
#include "../internal.h"
#include "nnt_cpu.h"

#include <stdlib.h>
#include <string.h>

struct rope_args {
    int64_t nbh, nt, n, pos0;
    int64_t ld;          /* row length of the tiles (w)                                     */
    int64_t hi_offset;   /* of the hi half inside its buffer: n for whole vectors, else 0   */
    int sign;            /* +1 forward, -1 the inverse rotation (backward)                  */
    float scale;         /* the cosines' and sines' factor (attention factor; 1: none)      */
    int xlo, xhi, ylo, yhi;   /* buffer slots                                               */
    int pos;             /* nnt_rope_pos: the slot of the positions (nb, nt) int32          */
    int64_t nb, nh;      /* nnt_rope_pos: batch rows and heads of the tile                  */
    float inv_freq[];    /* n                                                               */
};

#define P(i) ((float *)STARPU_VECTOR_GET_PTR(buffers[i]))

static void rope_cpu(void *buffers[], void *cl_arg)
{
    const struct rope_args *a = cl_arg;
    nnt_cpu_rope_f32(a->nbh, a->nt, a->n, a->pos0, a->sign, a->scale, a->inv_freq,
                     P(a->xlo), P(a->xhi) + a->hi_offset, a->ld, P(a->ylo),
                     P(a->yhi) + a->hi_offset, a->ld);
}

/* positions from a buffer: each row its own (packed examples restart at 0) */
static void rope_pos_cpu(void *buffers[], void *cl_arg)
{
    const struct rope_args *a = cl_arg;
    nnt_cpu_rope_pos_f32(a->nb, a->nh, a->nt, a->n,
                         (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[a->pos]), a->sign,
                         a->scale, a->inv_freq, P(a->xlo), P(a->xhi) + a->hi_offset, a->ld,
                         P(a->ylo), P(a->yhi) + a->hi_offset, a->ld);
}

#ifdef NNT_CUDA_CODELETS
static void rope_cuda(void *buffers[], void *cl_arg)
{
    const struct rope_args *a = cl_arg;
    int rc = nnt_cuda_rope_f32(a->nbh, a->nt, a->n, a->pos0, a->sign, a->scale, a->inv_freq,
                               P(a->xlo), P(a->xhi) + a->hi_offset, a->ld, P(a->ylo),
                               P(a->yhi) + a->hi_offset, a->ld, nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_rope", "CUDA kernel failed (%d)", rc);
}

static void rope_pos_cuda(void *buffers[], void *cl_arg)
{
    const struct rope_args *a = cl_arg;
    int rc = nnt_cuda_rope_pos_f32(a->nb, a->nh, a->nt, a->n,
                                   (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[a->pos]),
                                   a->sign, a->scale, a->inv_freq, P(a->xlo),
                                   P(a->xhi) + a->hi_offset, a->ld, P(a->ylo),
                                   P(a->yhi) + a->hi_offset, a->ld, nnt_cuda_task_stream());
    if (rc)
        nnt_task_error("nnt_rope_pos", "CUDA kernel failed (%d)", rc);
}

/* The CUDA kernel takes up to NNT_CUDA_ROPE_MAX_N pairs a row (its frequency table travels
 * in the kernel's parameters): larger ones run on the CPU workers only. */
static int rope_can_execute(unsigned worker, struct starpu_task *task, unsigned nimpl)
{
    (void)nimpl;
    const struct rope_args *a = task->cl_arg;
    return starpu_worker_get_type((int)worker) != STARPU_CUDA_WORKER ||
           a->n <= NNT_CUDA_ROPE_MAX_N;
}
#define NNT_CUDA_FUNCS(f, can) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC}, \
                               .can_execute = can,
#else
#define NNT_CUDA_FUNCS(f, can)
#endif

/* Sizes and the number of distinct buffers (in place or not, whole or split vectors) set the
 * cost; positions, sign and frequencies do not. */
static uint32_t rope_footprint(struct starpu_task *task)
{
    const struct rope_args *a = task->cl_arg;
    uint32_t h = starpu_hash_crc32c_be_n(&a->nbh, sizeof a->nbh, 0);
    h = starpu_hash_crc32c_be_n(&a->nt, sizeof a->nt, h);
    h = starpu_hash_crc32c_be_n(&a->n, sizeof a->n, h);
    h = starpu_hash_crc32c_be_n(&a->ld, sizeof a->ld, h);
    return starpu_hash_crc32c_be((uint32_t)STARPU_TASK_GET_NBUFFERS(task), h);
}

static struct starpu_perfmodel rope_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_rope", .footprint = rope_footprint};

static struct starpu_codelet rope_cl = {
    .name = "nnt_rope",
    .cpu_funcs = {rope_cpu},
    NNT_CUDA_FUNCS(rope_cuda, rope_can_execute)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &rope_model,
};

static struct starpu_perfmodel rope_pos_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_rope_pos", .footprint = rope_footprint};

static struct starpu_codelet rope_pos_cl = {
    .name = "nnt_rope_pos",
    .cpu_funcs = {rope_pos_cpu},
    NNT_CUDA_FUNCS(rope_pos_cuda, rope_can_execute)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &rope_pos_model,
};

static int insert(nnt_ctx *ctx, const nnt_rope_task *t, const float *inv_freq,
                  starpu_data_handle_t x_lo, starpu_data_handle_t x_hi,
                  starpu_data_handle_t y_lo, starpu_data_handle_t y_hi,
                  starpu_data_handle_t pos)
{
    size_t size = sizeof(struct rope_args) + (size_t)t->n * sizeof(float);
    struct rope_args *a = calloc(1, size);
    if (!a)
        return nnt_fail(ctx, NNT_E_NOMEM, "nnt_rope: out of host memory");
    struct starpu_data_descr bufs[5];
    int nbuf = 0;
    a->nbh = t->nbh;
    a->nt = t->nt;
    a->n = t->n;
    a->pos0 = t->pos0;
    a->ld = t->ld;
    a->sign = t->sign;
    a->scale = t->scale;
    a->hi_offset = t->whole ? t->n : 0;
    memcpy(a->inv_freq, inv_freq, (size_t)t->n * sizeof(float));
    a->xlo = nnt_buffer_slot(bufs, &nbuf, x_lo, STARPU_R);
    a->xhi = nnt_buffer_slot(bufs, &nbuf, x_hi, STARPU_R);
    a->ylo = nnt_buffer_slot(bufs, &nbuf, y_lo, STARPU_W);
    a->yhi = nnt_buffer_slot(bufs, &nbuf, y_hi, STARPU_W);
    if (pos) {
        a->nb = t->nb;
        a->nh = t->nh;
        a->pos = nnt_buffer_slot(bufs, &nbuf, pos, STARPU_R);
    }
    int rc = nnt_submit(ctx, pos ? &rope_pos_cl : &rope_cl, nbuf, bufs, a, size);
    free(a);
    return rc;
}

/* x_hi == x_lo and y_hi == y_lo when t->whole */
int nnt_insert_rope(nnt_ctx *ctx, const nnt_rope_task *t, const float *inv_freq,
                    starpu_data_handle_t x_lo, starpu_data_handle_t x_hi,
                    starpu_data_handle_t y_lo, starpu_data_handle_t y_hi)
{
    return insert(ctx, t, inv_freq, x_lo, x_hi, y_lo, y_hi, NULL);
}

int nnt_insert_rope_pos(nnt_ctx *ctx, const nnt_rope_task *t, const float *inv_freq,
                        starpu_data_handle_t x_lo, starpu_data_handle_t x_hi,
                        starpu_data_handle_t y_lo, starpu_data_handle_t y_hi,
                        starpu_data_handle_t pos)
{
    return insert(ctx, t, inv_freq, x_lo, x_hi, y_lo, y_hi, pos);
}
