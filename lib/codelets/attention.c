/* SPDX-License-Identifier: MIT */
/* Codelets of causal flash attention. Tiles of q, k, v, o, dq, dk, dv are
 * (nbh, t, hd) with nbh = b-tile * h-tile rows of slabs; m, l, lse, d are (nbh, t).
 * q_pos0 / k_pos0 are the sequence positions of the first query / key row of the tiles.
 * A block task covers the q slabs of an nnt_attn_map (cpu/nnt_cpu.h): all of its q-side
 * tile, or (grouped-query attention, kv heads cut by tiles) the q heads that one kv-side
 * tile serves; the kernels read each q head's kv slab in place. */
#include "../internal.h"
#include "nnt_cpu.h"

#include <math.h>

struct attn_block_args {
    nnt_attn_map map;   /* slabs covered; the q-side tile has map.nb * map.q_hs slabs, the
                           kv-side tile map.nb * map.kv_hs */
    int64_t tq, tk, hd;
    int64_t q_pos0, k_pos0;
    int64_t window;     /* sliding window (keys qp - window < kp <= qp); 0: plain causal */
    float scale;
    float cap;          /* soft-cap of the scores, cap tanh(s / cap); 0: none */
    int init;       /* forward: o, m, l only written: start from 0, -inf, 0;
                       backward: bit 1 dq only written, bit 2 dk, dv only written (zeroed) */
    int has_pos;    /* a last buffer holds the queries' positions (nb, tq) int32: each
                       query sees the keys of its example only (packed rows) */
    int cuda_math;  /* on a CUDA worker: 0 the flash kernels (NNT_CUDA_ATTN=flash); else
                       attention by products (the default) with products of math
                       NNT_CUDA_MATH_F32 + 1 or NNT_CUDA_MATH_TF32 + 1 */
};

struct attn_rows_args {
    int64_t nbh, tq, hd;
};

enum { INIT_DQ = 1, INIT_DKV = 2 };

/* an attention-sink task's tile: nb x nh slabs (b, h) of tq rows of hd */
struct attn_sink_args {
    int64_t nb, nh, tq, hd;
};


/* Footprint of a block task: its sizes, whether it straddles the diagonal (half the work
 * is masked) and its initialisation, which the buffer sizes alone do not tell apart. */
static uint32_t block_footprint(struct starpu_task *task)
{
    const struct attn_block_args *a = task->cl_arg;
    int64_t nbh = a->map.nb * a->map.nh;   /* slabs computed */
    uint32_t h = starpu_hash_crc32c_be_n(&nbh, sizeof nbh, 0);
    if (a->map.group != 1)   /* multi-head footprints as before */
        h = starpu_hash_crc32c_be_n(&a->map.group, sizeof a->map.group, h);
    h = starpu_hash_crc32c_be_n(&a->tq, sizeof a->tq, h);
    h = starpu_hash_crc32c_be_n(&a->tk, sizeof a->tk, h);
    h = starpu_hash_crc32c_be_n(&a->hd, sizeof a->hd, h);
    h = starpu_hash_crc32c_be((uint32_t)(a->k_pos0 + a->tk - 1 > a->q_pos0), h);
    if (a->window > 0)   /* the rows and keys the window leaves (plain causal as before) */
        h = starpu_hash_crc32c_be_n(&a->window, sizeof a->window, h);
    if (a->cap > 0.0f)   /* a tanh per score */
        h = starpu_hash_crc32c_be(1u, h);
    if (a->has_pos)   /* the keys of the queries' examples only */
        h = starpu_hash_crc32c_be(2u, h);
    if (a->map.bf16)   /* bf16 products on a CPU worker */
        h = starpu_hash_crc32c_be(3u, h);
    if (a->cuda_math)   /* products on a CUDA worker */
        h = starpu_hash_crc32c_be(4u + (uint32_t)a->cuda_math, h);
    return starpu_hash_crc32c_be((uint32_t)a->init, h);
}

/* A band task's arguments (struct nnt_attn_band_task without its handles) */
struct attn_band_args {
    nnt_attn_map map;
    int64_t tq, hd, q_pos0, window;
    float scale, cap;
    int has_pos, n;
    int64_t tk[NNT_ATTN_BAND_MAX], k_pos0[NNT_ATTN_BAND_MAX];
    int start[NNT_ATTN_BAND_MAX];
};

/* Footprint of a band task: its sizes and each key tile's size and place against the query
 * tile (a band at the sequence's start is shorter, one cut by the window the same as the
 * next) */
static uint32_t band_footprint(struct starpu_task *task)
{
    const struct attn_band_args *a = task->cl_arg;
    int64_t v[7] = {a->map.nb * a->map.nh, a->map.group, a->tq, a->hd, a->window, a->n,
                    (a->cap > 0.0f) | a->has_pos << 1 | (int64_t)(a->map.bf16 != 0) << 2};
    uint32_t h = starpu_hash_crc32c_be_n(v, sizeof v, 0);
    for (int j = 0; j < a->n; j++) {
        int64_t kj[2] = {a->tk[j], a->q_pos0 - a->k_pos0[j]};
        h = starpu_hash_crc32c_be_n(kj, sizeof kj, h);
    }
    return h;
}

#define P(i) ((float *)STARPU_VECTOR_GET_PTR(buffers[i]))
#define CP(i) ((const float *)STARPU_VECTOR_GET_PTR(buffers[i]))
#define POS(a, i) ((a)->has_pos ? (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[i]) : NULL)

/* buffers: q R, k R, v R, o_acc RW (W with init), m RW (W), l RW (W) [, positions R] */
static void fwd_block_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_block_args *a = cl_arg;
    int64_t qrows = a->map.nb * a->map.q_hs * a->tq;   /* of the whole q-side tile */
    if (a->init) {
        nnt_cpu_fill_f32(qrows * a->hd, 0.0f, P(3));
        nnt_cpu_fill_f32(qrows, -INFINITY, P(4));
        nnt_cpu_fill_f32(qrows, 0.0f, P(5));
    }
    nnt_cpu_attn_fwd_packed_f32(nnt_worker_product_cache(), &a->map, a->tq, a->tk, a->hd,
                                a->q_pos0, a->k_pos0, a->window, POS(a, 6), a->scale, a->cap,
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

/* buffers: o RW, lse RW, sinks R */
static void sink_fwd_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_sink_args *a = cl_arg;
    nnt_cpu_attn_sink_fwd_f32(a->nb, a->nh, a->tq, a->hd, CP(2), P(0), P(1));
}

/* buffers: o R, dout R, lse R, sinks R, dsinks RW */
static void sink_bwd_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_sink_args *a = cl_arg;
    nnt_cpu_attn_sink_bwd_f32(a->nb, a->nh, a->tq, a->hd, CP(3), CP(0), CP(1), CP(2), P(4));
}

/* buffers: q, k, v, dout, lse, d R; dq, dk, dv RW (W where init says so) [, positions R] */
static void bwd_block_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_block_args *a = cl_arg;
    int64_t nq = a->map.nb * a->map.q_hs * a->tq * a->hd;
    int64_t nkv = a->map.nb * a->map.kv_hs * a->tk * a->hd;
    if (a->init & INIT_DQ)
        nnt_cpu_fill_f32(nq, 0.0f, P(6));
    if (a->init & INIT_DKV) {
        nnt_cpu_fill_f32(nkv, 0.0f, P(7));
        nnt_cpu_fill_f32(nkv, 0.0f, P(8));
    }
    nnt_cpu_attn_bwd_packed_f32(nnt_worker_product_cache(), &a->map, a->tq, a->tk, a->hd,
                                a->q_pos0, a->k_pos0, a->window, POS(a, 9), a->scale, a->cap,
                                CP(0), CP(1), CP(2), CP(3), CP(4), CP(5), P(6), P(7), P(8));
}

/* buffers: q R, o W, lse W [, positions R], then k_j R, v_j R a key tile */
static void fwd_band_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_band_args *a = cl_arg;
    const float *k[NNT_ATTN_BAND_MAX], *v[NNT_ATTN_BAND_MAX];
    const int base = 3 + a->has_pos;
    for (int j = 0; j < a->n; j++)
        k[j] = CP(base + 2 * j), v[j] = CP(base + 2 * j + 1);
    nnt_attn_keys keys = {a->n, a->tk, a->k_pos0, k, v, NULL, NULL, NULL};
    if (nnt_cpu_attn_fwd_band_f32(nnt_worker_product_cache(), &a->map, a->tq, a->hd, a->q_pos0,
                                  a->window, POS(a, 3), a->scale, a->cap, &keys, CP(0), P(1),
                                  P(2)) != 0)
        nnt_task_error("nnt_attn_fwd_band", "out of host memory for its scratch");
}

/* buffers: q, o, dout, lse R, dq W [, positions R], then k_j R, v_j R, dk_j, dv_j RW (W where
 * start[j]) a key tile */
static void bwd_band_cpu(void *buffers[], void *cl_arg)
{
    const struct attn_band_args *a = cl_arg;
    const float *k[NNT_ATTN_BAND_MAX], *v[NNT_ATTN_BAND_MAX];
    float *dk[NNT_ATTN_BAND_MAX], *dv[NNT_ATTN_BAND_MAX];
    const int base = 5 + a->has_pos;
    for (int j = 0; j < a->n; j++) {
        k[j] = CP(base + 4 * j), v[j] = CP(base + 4 * j + 1);
        dk[j] = P(base + 4 * j + 2), dv[j] = P(base + 4 * j + 3);
    }
    nnt_attn_keys keys = {a->n, a->tk, a->k_pos0, k, v, dk, dv, a->start};
    if (nnt_cpu_attn_bwd_band_f32(nnt_worker_product_cache(), &a->map, a->tq, a->hd, a->q_pos0,
                                  a->window, POS(a, 5), a->scale, a->cap, &keys, CP(0), CP(1),
                                  CP(2), CP(3), P(4)) != 0)
        nnt_task_error("nnt_attn_bwd_band", "out of host memory for its scratch");
}

#ifdef NNT_CUDA_CODELETS
/* ---- attention by products on a CUDA worker (the default; NNT_CUDA_ATTN=flash: not) ------- */

struct cuda_products {
    int math;   /* NNT_CUDA_MATH_F32 or _TF32 */
    cublasHandle_t handle;
    cudaStream_t stream;
};

static int cuda_products_gemm(void *ctx, int trans_a, int trans_b, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *a, int64_t lda,
                              int64_t stride_a, const float *b, int64_t ldb, int64_t stride_b,
                              float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
    const struct cuda_products *cp = ctx;
    return nnt_cuda_gemm(cp->math, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                         stride_b, beta, c, ldc, stride_c, batch, cp->handle, cp->stream);
}

static int cuda_products_fwd_rows(void *ctx, const nnt_attn_rows *r, float *s, float *m,
                                  float *l, float *o_acc)
{
    return nnt_cuda_attn_rows_fwd_f32(r, s, m, l, o_acc, ((struct cuda_products *)ctx)->stream);
}

static int cuda_products_bwd_rows(void *ctx, const nnt_attn_rows *r, float *s, float *dp,
                                  const float *lse, const float *d)
{
    return nnt_cuda_attn_rows_bwd_f32(r, s, dp, lse, d, ((struct cuda_products *)ctx)->stream);
}

/* The worker's scratch for a block's products: up to 256 rows of every slab of a run, two
 * (tk)-float rows each (the backward's s and dp), at most 32 Mi floats (128 MiB), at least
 * what one row of one slab takes. NULL when the GPU has no room. */
static float *products_scratch(const struct attn_block_args *a, int64_t *floats)
{
    int64_t rows = a->tq < 256 ? a->tq : 256;
    int64_t slabs = a->map.nb * a->map.nh;
    int64_t want = 2 * slabs * rows * a->tk, most = (int64_t)32 << 20, least = 2 * a->tk;
    want = want > most ? most : want;
    want = want < least ? least : want;
    *floats = want;
    return nnt_worker_scratch((size_t)want * sizeof(float));
}

/* No GPU memory for the scratch: the block runs on the flash kernels instead (said once). */
#define PRODUCTS_NO_SCRATCH 1
static int no_scratch(void)
{
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        nnt_log(NNT_LOG_WARN, "attention on a CUDA worker: no GPU memory for the products' "
                "scratch; such blocks run on the flash kernels (slower)");
    return PRODUCTS_NO_SCRATCH;
}

/* A block by products: 0, a CUDA error, or PRODUCTS_NO_SCRATCH (nothing written) */
static int cuda_products_block(const struct attn_block_args *a, void *buffers[], int backward,
                               cudaStream_t s)
{
    struct cuda_products cp = {a->cuda_math - 1, starpu_cublas_get_local_handle(), s};
    const nnt_attn_products_ops ops = {&cp, cuda_products_gemm, cuda_products_fwd_rows,
                                       cuda_products_bwd_rows};
    int64_t ws_floats;
    float *ws = products_scratch(a, &ws_floats);
    if (!ws)
        return no_scratch();
    if (!backward)
        return nnt_attn_products_fwd(&ops, &a->map, a->tq, a->tk, a->hd, a->q_pos0, a->k_pos0,
                                     a->window, POS(a, 6), a->scale, a->cap, CP(0), CP(1),
                                     CP(2), P(3), P(4), P(5), ws, ws_floats);
    return nnt_attn_products_bwd(&ops, &a->map, a->tq, a->tk, a->hd, a->q_pos0, a->k_pos0,
                                 a->window, POS(a, 9), a->scale, a->cap, CP(0), CP(1), CP(2),
                                 CP(3), CP(4), CP(5), P(6), P(7), P(8), ws, ws_floats);
}

static void fwd_block_cuda(void *buffers[], void *cl_arg)
{
    const struct attn_block_args *a = cl_arg;
    cudaStream_t s = nnt_cuda_task_stream();
    int64_t qrows = a->map.nb * a->map.q_hs * a->tq;
    int rc = 0;
    if (a->init) {
        rc = nnt_cuda_fill_f32(qrows * a->hd, 0.0f, P(3), s);
        if (rc == 0)
            rc = nnt_cuda_fill_f32(qrows, -INFINITY, P(4), s);
        if (rc == 0)
            rc = nnt_cuda_fill_f32(qrows, 0.0f, P(5), s);
    }
    int flash = !a->cuda_math;
    if (rc == 0 && !flash && (rc = cuda_products_block(a, buffers, 0, s)) == PRODUCTS_NO_SCRATCH)
        flash = 1, rc = 0;
    if (rc == 0 && flash)
        rc = nnt_cuda_attn_fwd_packed_f32(&a->map, a->tq, a->tk, a->hd, a->q_pos0, a->k_pos0,
                                          a->window, POS(a, 6), a->scale, a->cap, CP(0), CP(1),
                                          CP(2), P(3), P(4), P(5), s);
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

static void sink_fwd_cuda(void *buffers[], void *cl_arg)
{
    const struct attn_sink_args *a = cl_arg;
    if (nnt_cuda_attn_sink_fwd_f32(a->nb, a->nh, a->tq, a->hd, CP(2), P(0), P(1),
                                   nnt_cuda_task_stream()))
        nnt_task_error("nnt_attn_sink_fwd", "CUDA kernel failed");
}

static void sink_bwd_cuda(void *buffers[], void *cl_arg)
{
    const struct attn_sink_args *a = cl_arg;
    if (nnt_cuda_attn_sink_bwd_f32(a->nb, a->nh, a->tq, a->hd, CP(3), CP(0), CP(1), CP(2),
                                   P(4), nnt_cuda_task_stream()))
        nnt_task_error("nnt_attn_sink_bwd", "CUDA kernel failed");
}

static void bwd_block_cuda(void *buffers[], void *cl_arg)
{
    const struct attn_block_args *a = cl_arg;
    cudaStream_t s = nnt_cuda_task_stream();
    int64_t nq = a->map.nb * a->map.q_hs * a->tq * a->hd;
    int64_t nkv = a->map.nb * a->map.kv_hs * a->tk * a->hd;
    int rc = 0;
    if (a->init & INIT_DQ)
        rc = nnt_cuda_fill_f32(nq, 0.0f, P(6), s);
    if (rc == 0 && (a->init & INIT_DKV))
        rc = nnt_cuda_fill_f32(nkv, 0.0f, P(7), s);
    if (rc == 0 && (a->init & INIT_DKV))
        rc = nnt_cuda_fill_f32(nkv, 0.0f, P(8), s);
    int flash = !a->cuda_math;
    if (rc == 0 && !flash && (rc = cuda_products_block(a, buffers, 1, s)) == PRODUCTS_NO_SCRATCH)
        flash = 1, rc = 0;
    if (rc == 0 && flash)
        rc = nnt_cuda_attn_bwd_packed_f32(&a->map, a->tq, a->tk, a->hd, a->q_pos0, a->k_pos0,
                                          a->window, POS(a, 9), a->scale, a->cap, CP(0), CP(1),
                                          CP(2), CP(3), CP(4), CP(5), P(6), P(7), P(8), s);
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

static struct starpu_perfmodel sink_fwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_attn_sink_fwd"};
static struct starpu_perfmodel sink_bwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_attn_sink_bwd"};

static struct starpu_codelet sink_fwd_cl = {
    .name = "nnt_attn_sink_fwd",
    .cpu_funcs = {sink_fwd_cpu},
    NNT_CUDA_FUNCS(sink_fwd_cuda, NULL)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sink_fwd_model,
};

static struct starpu_codelet sink_bwd_cl = {
    .name = "nnt_attn_sink_bwd",
    .cpu_funcs = {sink_bwd_cpu},
    NNT_CUDA_FUNCS(sink_bwd_cuda, NULL)
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sink_bwd_model,
};

static struct starpu_perfmodel fwd_band_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_attn_fwd_band", .footprint = band_footprint};
static struct starpu_perfmodel bwd_band_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "nnt_attn_bwd_band", .footprint = band_footprint};

static struct starpu_codelet fwd_band_cl = {
    .name = "nnt_attn_fwd_band",
    .cpu_funcs = {fwd_band_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &fwd_band_model,
};

static struct starpu_codelet bwd_band_cl = {
    .name = "nnt_attn_bwd_band",
    .cpu_funcs = {bwd_band_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &bwd_band_model,
};

int nnt_attn_bf16_products(void)
{
    return nnt_cpu_gemm_backend() == NNT_GEMM_ONEDNN && nnt_cpu_dnnl_bf16_native();
}

/* The map of a block task: bf16 products under NNT_PRECISION_BF16 where the CPU kernels can
 * (nnt_attn_bf16_products; CUDA's kernels ignore it). */
static nnt_attn_map task_map(const nnt_ctx *ctx, const nnt_attn_map *map)
{
    nnt_attn_map m = *map;
    m.bf16 = ctx->precision == NNT_PRECISION_BF16 && nnt_attn_bf16_products();
    return m;
}

/* The products' math on a CUDA worker (struct attn_block_args.cuda_math): 0 without CUDA
 * workers or NNT_CUDA_ATTN=products; float under NNT_PRECISION_FP32, TF32 under the others. */
static int task_cuda_math(const nnt_ctx *ctx)
{
#ifdef NNT_CUDA_CODELETS
    if (ctx->cuda_attn_products && ctx->ncuda > 0)
        return 1 + (ctx->precision == NNT_PRECISION_FP32 ? NNT_CUDA_MATH_F32
                                                         : NNT_CUDA_MATH_TF32);
#endif
    (void)ctx;
    return 0;
}

/* One (query tile, key tile) pair: the q slabs of map, (tq, hd) queries each at q_pos0,
 * against their (tk, hd) key slabs at k_pos0, under a sliding window (0: none), scores
 * soft-capped by cap (0: none). h: q, k, v,
 * o, m, l. init: o, m, l are only written (the tile's first task: the whole tile is
 * initialised). pos: the queries' positions tile (map->nb, tq) int32, or NULL. */
int nnt_insert_attn_fwd_block(nnt_ctx *ctx, const nnt_attn_map *map, int64_t tq, int64_t tk,
                              int64_t hd, int64_t q_pos0, int64_t k_pos0, int64_t window,
                              float scale, float cap, const starpu_data_handle_t *h, int init,
                              starpu_data_handle_t pos)
{
    struct attn_block_args args = {task_map(ctx, map), tq, tk, hd, q_pos0, k_pos0, window,
                                   scale, cap, init, pos != NULL, task_cuda_math(ctx)};
    enum starpu_data_access_mode acc = init ? STARPU_W : STARPU_RW;
    struct starpu_data_descr bufs[7] = {
        {h[0], STARPU_R}, {h[1], STARPU_R}, {h[2], STARPU_R},
        {h[3], acc}, {h[4], acc}, {h[5], acc}, {pos, STARPU_R}};
    return nnt_submit(ctx, &fwd_block_cl, pos ? 7 : 6, bufs, &args, sizeof args);
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

/* h: q, k, v, dout, lse, d, dq, dk, dv. init_dq / init_dkv: dq / dk and dv only written
 * (the whole tiles are zeroed first: the first task on each). pos as the forward's. */
int nnt_insert_attn_bwd_block(nnt_ctx *ctx, const nnt_attn_map *map, int64_t tq, int64_t tk,
                              int64_t hd, int64_t q_pos0, int64_t k_pos0, int64_t window,
                              float scale, float cap, const starpu_data_handle_t *h,
                              int init_dq, int init_dkv, starpu_data_handle_t pos)
{
    int init = (init_dq ? INIT_DQ : 0) | (init_dkv ? INIT_DKV : 0);
    struct attn_block_args args = {task_map(ctx, map), tq, tk, hd, q_pos0, k_pos0, window,
                                   scale, cap, init, pos != NULL, task_cuda_math(ctx)};
    enum starpu_data_access_mode mq = init_dq ? STARPU_W : STARPU_RW;
    enum starpu_data_access_mode mkv = init_dkv ? STARPU_W : STARPU_RW;
    struct starpu_data_descr bufs[10] = {
        {h[0], STARPU_R}, {h[1], STARPU_R}, {h[2], STARPU_R}, {h[3], STARPU_R},
        {h[4], STARPU_R}, {h[5], STARPU_R}, {h[6], mq}, {h[7], mkv}, {h[8], mkv},
        {pos, STARPU_R}};
    return nnt_submit(ctx, &bwd_block_cl, pos ? 10 : 9, bufs, &args, sizeof args);
}

static struct attn_band_args band_args(const nnt_ctx *ctx, const struct nnt_attn_band_task *t)
{
    struct attn_band_args a;
    memset(&a, 0, sizeof a);
    a.map = task_map(ctx, t->map);
    a.tq = t->tq, a.hd = t->hd, a.q_pos0 = t->q_pos0, a.window = t->window;
    a.scale = t->scale, a.cap = t->cap;
    a.has_pos = t->pos != NULL, a.n = t->n;
    for (int j = 0; j < t->n; j++)
        a.tk[j] = t->tk[j], a.k_pos0[j] = t->k_pos0[j], a.start[j] = t->start[j];
    return a;
}

int nnt_insert_attn_fwd_band(nnt_ctx *ctx, const struct nnt_attn_band_task *t,
                             starpu_data_handle_t q, starpu_data_handle_t o,
                             starpu_data_handle_t lse, const starpu_data_handle_t *kv)
{
    struct attn_band_args args = band_args(ctx, t);
    struct starpu_data_descr bufs[4 + 2 * NNT_ATTN_BAND_MAX] = {
        {q, STARPU_R}, {o, STARPU_W}, {lse, STARPU_W}};
    int n = 3;
    if (t->pos)
        bufs[n++] = (struct starpu_data_descr){t->pos, STARPU_R};
    for (int j = 0; j < 2 * t->n; j++)
        bufs[n++] = (struct starpu_data_descr){kv[j], STARPU_R};
    return nnt_submit(ctx, &fwd_band_cl, n, bufs, &args, sizeof args);
}

int nnt_insert_attn_bwd_band(nnt_ctx *ctx, const struct nnt_attn_band_task *t,
                             const starpu_data_handle_t *h, const starpu_data_handle_t *kv)
{
    struct attn_band_args args = band_args(ctx, t);
    struct starpu_data_descr bufs[6 + 4 * NNT_ATTN_BAND_MAX] = {
        {h[0], STARPU_R}, {h[1], STARPU_R}, {h[2], STARPU_R}, {h[3], STARPU_R},
        {h[4], STARPU_W}};
    int n = 5;
    if (t->pos)
        bufs[n++] = (struct starpu_data_descr){t->pos, STARPU_R};
    for (int j = 0; j < t->n; j++) {
        enum starpu_data_access_mode acc = t->start[j] ? STARPU_W : STARPU_RW;
        bufs[n++] = (struct starpu_data_descr){kv[4 * j], STARPU_R};
        bufs[n++] = (struct starpu_data_descr){kv[4 * j + 1], STARPU_R};
        bufs[n++] = (struct starpu_data_descr){kv[4 * j + 2], acc};
        bufs[n++] = (struct starpu_data_descr){kv[4 * j + 3], acc};
    }
    return nnt_submit(ctx, &bwd_band_cl, n, bufs, &args, sizeof args);
}

/* Attention sinks (gpt-oss) on a query tile of nb x nh slabs of tq rows: o and lse (the
 * finalized tile) rescaled in place by the sinks' tile (nh) of its heads. */
int nnt_insert_attn_sink_fwd(nnt_ctx *ctx, int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                             starpu_data_handle_t o, starpu_data_handle_t lse,
                             starpu_data_handle_t sinks)
{
    struct attn_sink_args args = {nb, nh, tq, hd};
    struct starpu_data_descr bufs[3] = {{o, STARPU_RW}, {lse, STARPU_RW}, {sinks, STARPU_R}};
    return nnt_submit(ctx, &sink_fwd_cl, 3, bufs, &args, sizeof args);
}

/* The sinks' gradient over the query tile, from the forward's o, lse (with the sinks) and
 * dout, added to dsinks (the tile of the query tile's heads). */
int nnt_insert_attn_sink_bwd(nnt_ctx *ctx, int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                             starpu_data_handle_t o, starpu_data_handle_t dout,
                             starpu_data_handle_t lse, starpu_data_handle_t sinks,
                             starpu_data_handle_t dsinks)
{
    struct attn_sink_args args = {nb, nh, tq, hd};
    struct starpu_data_descr bufs[5] = {{o, STARPU_R}, {dout, STARPU_R}, {lse, STARPU_R},
                                        {sinks, STARPU_R}, {dsinks, STARPU_RW}};
    return nnt_submit(ctx, &sink_bwd_cl, 5, bufs, &args, sizeof args);
}
