/* SPDX-License-Identifier: MIT */
/* Tiled GEMM over groups of dimensions, with fused epilogues:
 *   C[b..., m..., n...] = alpha sum_k op(A)[b..., m..., k...] op(B)[b..., k..., n...]
 *                         + beta C[b..., m..., n...]
 * One task per (C tile, k tile): a tile of A is a contiguous row-major (b, m, k) block, i.e.
 * a batch of (Mt, Kt) matrices, so each task is one batched GEMM call on its tiles. The k
 * tasks of a C tile are submitted in increasing k order with plain read-write access on C,
 * so they run in that order and the sum is bit-identical run to run. */
#include "../internal.h"
#include "nnt_cpu.h"

#include <pthread.h>

/* Access mode of C in the k tasks after the first. Plain RW keeps the k order fixed
 * (deterministic); building with -DNNT_GEMM_K_COMMUTE lets StarPU run them in any order
 * (RW | COMMUTE), which is how bench/RESULTS.md compared the two. */
#ifdef NNT_GEMM_K_COMMUTE
#define K_ACCUMULATE_MODE ((enum starpu_data_access_mode)(STARPU_RW | STARPU_COMMUTE))
#else
#define K_ACCUMULATE_MODE STARPU_RW
#endif

/* Where each group of dimensions starts in A, B and C, and how many dims it has. */
struct gemm_dims {
    int nb, nm, nn, nk;
    int a_m, a_k;   /* A: (b, m, k) or (b, k, m) */
    int b_k, b_n;   /* B: (b, k, n) or (b, n, k) */
    int c_m, c_n;   /* C: (b, m, n)              */
};

static int check_trans(const char *fn, const nnt_ctx *ctx, const char *name, nnt_trans t)
{
    if (t == NNT_NOTRANS || t == NNT_TRANS)
        return NNT_OK;
    return nnt_fail(ctx, NNT_E_INVAL, "%s: %s = %d is neither NNT_NOTRANS nor NNT_TRANS", fn,
                    name, (int)t);
}

/* Split the dimensions of A, B and C into groups; NNT_E_INVAL / NNT_E_SHAPE when the counts
 * do not add up. */
static int group_dims(const char *fn, nnt_trans trans_a, nnt_trans trans_b, const nnt_tensor *a,
                      const nnt_tensor *b, const nnt_tensor *c, int ndim_k, int ndim_batch,
                      struct gemm_dims *d)
{
    if (ndim_k < 1)
        return nnt_fail(c->ctx, NNT_E_INVAL, "%s: ndim_k = %d must be at least 1", fn, ndim_k);
    if (ndim_batch < 0)
        return nnt_fail(c->ctx, NNT_E_INVAL, "%s: ndim_batch = %d must be >= 0", fn,
                        ndim_batch);
    d->nb = ndim_batch;
    d->nk = ndim_k;
    d->nm = a->ndim - ndim_batch - ndim_k;
    d->nn = b->ndim - ndim_batch - ndim_k;
    if (d->nm < 1)
        return nnt_fail(c->ctx, NNT_E_SHAPE, "%s: A has %d dimensions: no m dimension is left "
                        "after %d batch and %d k dimensions", fn, a->ndim, ndim_batch, ndim_k);
    if (d->nn < 1)
        return nnt_fail(c->ctx, NNT_E_SHAPE, "%s: B has %d dimensions: no n dimension is left "
                        "after %d batch and %d k dimensions", fn, b->ndim, ndim_batch, ndim_k);
    if (c->ndim != d->nb + d->nm + d->nn)
        return nnt_fail(c->ctx, NNT_E_SHAPE, "%s: C has %d dimensions, expected %d batch + %d m "
                        "+ %d n = %d", fn, c->ndim, d->nb, d->nm, d->nn,
                        d->nb + d->nm + d->nn);
    d->a_m = trans_a ? d->nb + d->nk : d->nb;
    d->a_k = trans_a ? d->nb : d->nb + d->nm;
    d->b_k = trans_b ? d->nb + d->nn : d->nb;
    d->b_n = trans_b ? d->nb : d->nb + d->nk;
    d->c_m = d->nb;
    d->c_n = d->nb + d->nm;
    return NNT_OK;
}

/* Every shared group must have equal sizes and tiles in the tensors that hold it. */
static int check_groups(const char *fn, const nnt_tensor *a, const nnt_tensor *b,
                        const nnt_tensor *c, const struct gemm_dims *d)
{
    int rc = nnt_check_dims(fn, "A[b...]", a, 0, "C[b...]", c, 0, d->nb);
    if (rc == 0)
        rc = nnt_check_dims(fn, "B[b...]", b, 0, "C[b...]", c, 0, d->nb);
    if (rc == 0)
        rc = nnt_check_dims(fn, "A[m...]", a, d->a_m, "C[m...]", c, d->c_m, d->nm);
    if (rc == 0)
        rc = nnt_check_dims(fn, "B[n...]", b, d->b_n, "C[n...]", c, d->c_n, d->nn);
    if (rc == 0)
        rc = nnt_check_dims(fn, "A[k...]", a, d->a_k, "B[k...]", b, d->b_k, d->nk);
    return rc;
}

/* A and B: NNT_FP32 or NNT_BF16 (used as they are, or expanded exactly); B also NNT_NF4
 * (dequantized first, gemm_nf4). */
static int check_operand_dtype(const char *fn, const char *role, const nnt_tensor *t)
{
    if (t->dtype == NNT_FP32 || t->dtype == NNT_BF16 || (t->dtype == NNT_NF4 && *role == 'B'))
        return NNT_OK;
    return nnt_fail(t->ctx, NNT_E_SHAPE, "%s: %s must be NNT_FP32 or NNT_BF16%s, not %s", fn,
                    role, *role == 'B' ? " (or NNT_NF4)" : "", nnt_dtype_name(t->dtype));
}

static int check_operands(const char *fn, nnt_trans trans_a, nnt_trans trans_b, nnt_tensor *a,
                          nnt_tensor *b, double beta, nnt_tensor *c, int ndim_k, int ndim_batch,
                          struct gemm_dims *d)
{
    int rc = nnt_tensor_check(a, fn);
    if (rc == 0)
        rc = nnt_tensor_check(b, fn);
    if (rc == 0)
        rc = nnt_tensor_check(c, fn);
    if (rc)
        return rc;
    if ((rc = check_trans(fn, c->ctx, "trans_a", trans_a)) ||
        (rc = check_trans(fn, c->ctx, "trans_b", trans_b)))
        return rc;
    if ((rc = check_operand_dtype(fn, "A", a)) || (rc = check_operand_dtype(fn, "B", b)) ||
        (rc = nnt_check_dtype(fn, "C", c, NNT_FP32)))
        return rc;
    if (c == a || c == b)
        return nnt_fail(c->ctx, NNT_E_INVAL, "%s: C must not be A or B", fn);
    if ((rc = group_dims(fn, trans_a, trans_b, a, b, c, ndim_k, ndim_batch, d)) ||
        (rc = check_groups(fn, a, b, c, d)))
        return rc;
    if ((rc = nnt_tensor_check_readable(a, fn)) || (rc = nnt_tensor_check_readable(b, fn)))
        return rc;
    if (beta != 0.0 && (rc = nnt_tensor_check_readable(c, fn)))
        return rc;
    return NNT_OK;
}

static const char *epilogue_name(nnt_epilogue e)
{
    switch (e) {
    case NNT_EPILOGUE_NONE: return "NNT_EPILOGUE_NONE";
    case NNT_EPILOGUE_BIAS: return "NNT_EPILOGUE_BIAS";
    case NNT_EPILOGUE_BIAS_GELU: return "NNT_EPILOGUE_BIAS_GELU";
    case NNT_EPILOGUE_DGELU: return "NNT_EPILOGUE_DGELU";
    case NNT_EPILOGUE_BIAS_GELU_ERF: return "NNT_EPILOGUE_BIAS_GELU_ERF";
    case NNT_EPILOGUE_DGELU_ERF: return "NNT_EPILOGUE_DGELU_ERF";
    default: return NULL;
    }
}

/* Which of bias and aux the epilogue takes: 0 unused (must be NULL), 1 optional, 2 required. */
static void epilogue_operands(nnt_epilogue e, int *bias_use, int *aux_use)
{
    *bias_use = e == NNT_EPILOGUE_BIAS ? 2 : nnt_epilogue_writes_aux(e) ? 1 : 0;
    *aux_use = nnt_epilogue_writes_aux(e) || nnt_epilogue_reads_aux(e) ? 2 : 0;
}

static int check_presence(const char *fn, const nnt_ctx *ctx, const char *role,
                          const nnt_tensor *t, int use, const char *epi)
{
    if (use == 0 && t)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is not used by %s and must be NULL", fn, role,
                        epi);
    if (use == 2 && !t)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL but %s needs it", fn, role, epi);
    return NNT_OK;
}

/* bias (n...) with C's n sizes and tiles. */
static int check_bias(const char *fn, nnt_tensor *bias, const nnt_tensor *c,
                      const struct gemm_dims *d)
{
    int rc = nnt_tensor_check(bias, fn);
    if (rc == 0)
        rc = nnt_check_dtype(fn, "bias", bias, NNT_FP32);
    if (rc)
        return rc;
    if (bias == c)
        return nnt_fail(c->ctx, NNT_E_INVAL, "%s: bias must not be C", fn);
    if (bias->ndim != d->nn)
        return nnt_fail(c->ctx, NNT_E_SHAPE, "%s: bias has %d dimensions, C has %d n "
                        "dimensions", fn, bias->ndim, d->nn);
    rc = nnt_check_dims(fn, "bias", bias, 0, "C[n...]", c, d->c_n, d->nn);
    return rc ? rc : nnt_tensor_check_readable(bias, fn);
}

/* aux with C's shape and tiling; read by DGELU[_ERF], written by BIAS_GELU[_ERF]. */
static int check_aux(const char *fn, nnt_epilogue e, nnt_tensor *aux, const nnt_tensor *a,
                     const nnt_tensor *b, const nnt_tensor *c, const nnt_tensor *bias)
{
    int rc = nnt_check_same_layout(fn, "aux", aux, "C", c);
    if (rc == 0)
        rc = nnt_check_dtype(fn, "aux", aux, NNT_FP32);
    if (rc)
        return rc;
    if (aux == c)
        return nnt_fail(c->ctx, NNT_E_INVAL, "%s: aux must not be C", fn);
    if (nnt_epilogue_reads_aux(e))
        return nnt_tensor_check_readable(aux, fn);
    if (aux == a || aux == b || aux == bias)
        return nnt_fail(c->ctx, NNT_E_INVAL, "%s: aux is written by %s and must not be A, B "
                        "or bias", fn, epilogue_name(e));
    return NNT_OK;
}

static int check_epilogue(const char *fn, nnt_epilogue e, nnt_tensor *bias, nnt_tensor *aux,
                          const nnt_tensor *a, const nnt_tensor *b, const nnt_tensor *c,
                          const struct gemm_dims *d)
{
    const char *name = epilogue_name(e);
    if (!name)
        return nnt_fail(c->ctx, NNT_E_INVAL, "%s: unknown epilogue %d", fn, (int)e);
    int bias_use, aux_use;
    epilogue_operands(e, &bias_use, &aux_use);
    int rc = check_presence(fn, c->ctx, "bias", bias, bias_use, name);
    if (rc == 0)
        rc = check_presence(fn, c->ctx, "aux", aux, aux_use, name);
    if (rc == 0 && bias)
        rc = check_bias(fn, bias, c, d);
    if (rc == 0 && aux)
        rc = check_aux(fn, e, aux, a, b, c, bias);
    return rc;
}

/* Number of tiles of the k group (from A's grid). */
static int64_t k_tile_count(const nnt_tensor *a, const struct gemm_dims *d)
{
    return nnt_box_numel(d->nk, a->grid + d->a_k);
}

/* Grid coordinates of the k-th k tile (row-major over A's k grid) into kc[nk]. */
static void k_tile_coord(const nnt_tensor *a, const struct gemm_dims *d, int64_t kt,
                         int64_t *kc)
{
    for (int i = d->nk - 1; i >= 0; i--) {
        kc[i] = kt % a->grid[d->a_k + i];
        kt /= a->grid[d->a_k + i];
    }
}

/* Index of the A tile for C tile coordinates cc and k tile coordinates kc. */
static int64_t a_tile_of(const nnt_tensor *a, const struct gemm_dims *d, const int64_t *cc,
                         const int64_t *kc)
{
    int64_t ac[NNT_MAX_DIMS];
    for (int i = 0; i < d->nb; i++)
        ac[i] = cc[i];
    for (int i = 0; i < d->nm; i++)
        ac[d->a_m + i] = cc[d->c_m + i];
    for (int i = 0; i < d->nk; i++)
        ac[d->a_k + i] = kc[i];
    return nnt_tensor_tile_index(a, ac);
}

/* Index of the B tile for C tile coordinates cc and k tile coordinates kc. */
static int64_t b_tile_of(const nnt_tensor *b, const struct gemm_dims *d, const int64_t *cc,
                         const int64_t *kc)
{
    int64_t bc[NNT_MAX_DIMS];
    for (int i = 0; i < d->nb; i++)
        bc[i] = cc[i];
    for (int i = 0; i < d->nn; i++)
        bc[d->b_n + i] = cc[d->c_n + i];
    for (int i = 0; i < d->nk; i++)
        bc[d->b_k + i] = kc[i];
    return nnt_tensor_tile_index(b, bc);
}

/* ---- B tiles packed once per product -------------------------------------------------- */

/* The B tiles of one product in oneDNN's blocked layout, each packed by one task for all the
 * C tiles that read it (nnt_insert_gemm_pack): handle[i] NULL where B tile i is used as
 * stored. The handles are temporary: unregistered (freed once their readers ran) when the
 * product's tasks are submitted. */
struct packed_b {
    starpu_data_handle_t *handle;
    nnt_gemm_packing packing;   /* the same for every tile of the product */
    int64_t last[3];            /* the (m, n, k) of reads_packed's last answer, and it */
    int last_ok;
    int kept;                   /* the handles are B's kept packs (not released here) */
};

int nnt_gemm_packs_kept(const nnt_ctx *ctx)
{
    const char *v = getenv("NNT_GEMM_PACK");
    return ctx->pack_b && !(v && strcmp(v, "temp") == 0) && !getenv("STARPU_LIMIT_CPU_MEM");
}

int nnt_gemm_packs(const nnt_ctx *ctx, const char **why)
{
    const char *v = getenv("NNT_GEMM_PACK");
    *why = nnt_cpu_gemm_backend() != NNT_GEMM_ONEDNN ? "BLIS computes the products"
           : v && strcmp(v, "0") == 0               ? "NNT_GEMM_PACK=0"
           : ctx->ncuda > 0                         ? "CUDA workers"
           : ctx->mpi                               ? "MPI"
           : ctx->disk_node >= 0 && !(v && strcmp(v, "temp") == 0)
               ? "disk swap; NNT_GEMM_PACK=temp packs there too"
           /* GPT-2's (128 x 768) x (768 x 768) stands for the products a model makes */
           : !nnt_gemm_pack_bytes(&(nnt_gemm_packing){0, 0, 128, 0}, 768, 768)
               ? "oneDNN takes B as stored here"
               : NULL;
    return *why == NULL;
}

/* ---- bf16 products summed over their k tiles in one task ------------------------------- */

int nnt_gemm_sums_k(const nnt_ctx *ctx, const char **why)
{
    const char *v = getenv("NNT_GEMM_KSUM");
    *why = nnt_cpu_gemm_backend() != NNT_GEMM_ONEDNN ? "BLIS computes the products"
           : !nnt_cpu_dnnl_bf16_native()             ? "no bf16 dot products"
           : v && strcmp(v, "0") == 0                ? "NNT_GEMM_KSUM=0"
           : ctx->ncuda > 0                          ? "CUDA workers"
                                                     : NULL;
    return *why == NULL;
}

/* Whether each C tile's k tiles go to one task (nnt_insert_gemm_ksum) rather than one task
 * each: bf16 products with several k tiles (not more than a task takes), one matrix a task,
 * no epilogue, and C's tiles larger than what the join copies: each further k task would
 * read and write the whole C tile again (8 bytes an element), the joined task copies each k
 * tile's operands once more in bf16 (2 bytes an element; they are rounded into a copy in
 * either case when they are float). So the weight gradients dY^T X, whose k tiles are the
 * row tiles (GPT-2 B 4 T 64 on 2 workers: a 768 x 768 gradient tile summed over two
 * 128-row tiles, 2.4 MB of C against 0.4 MB of a k tile's operands), but not the products
 * whose k is a hidden or vocabulary tile (128 x 768 of C against 2.8 MB). Whether a product
 * is summed so depends on shapes and tiles only, not on the operands' dtypes: bf16 tiles
 * give the bits of float tiles holding the same values. */
static int sums_k(const nnt_tensor *a, const nnt_tensor *c, const struct gemm_dims *d,
                  nnt_epilogue e)
{
    int64_t nkt = k_tile_count(a, d);
    if (!c->ctx->ksum || nkt < 2 || nkt > NNT_GEMM_KSUM_MAX || d->nb != 0 ||
        e != NNT_EPILOGUE_NONE || !nnt_gemm_ksum_applies(c->ctx))
        return 0;
    /* the first (largest) tiles of C and of A's k dims */
    double m = (double)nnt_box_numel(d->nm, c->tile + d->c_m);
    double n = (double)nnt_box_numel(d->nn, c->tile + d->c_n);
    double k = (double)nnt_box_numel(d->nk, a->tile + d->a_k);
    return 4.0 * m * n > 2.0 * k * (m + n);
}

/* C tile ci as one task over all its k tiles (sums_k). One-row tiles keep their row kernel
 * (one task per k tile, submit_c_tile): 1 when the tile was not submitted here. */
static int submit_c_tile_ksum(nnt_trans trans_a, nnt_trans trans_b, double alpha,
                              nnt_tensor *a, nnt_tensor *b, double beta, nnt_tensor *c,
                              const struct gemm_dims *d, int64_t ci, int *rc)
{
    int64_t cc[NNT_MAX_DIMS], origin[NNT_MAX_DIMS], cshape[NNT_MAX_DIMS];
    int64_t kc[NNT_MAX_DIMS], ashape[NNT_MAX_DIMS], k[NNT_GEMM_KSUM_MAX];
    starpu_data_handle_t at[NNT_GEMM_KSUM_MAX], bt[NNT_GEMM_KSUM_MAX];
    nnt_tensor_tile_coord(c, ci, cc);
    nnt_tensor_tile_box(c, cc, origin, cshape);
    int64_t m = nnt_box_numel(d->nm, cshape + d->c_m), n = nnt_box_numel(d->nn, cshape + d->c_n);
    if (m < 2)
        return 1;
    int nk = (int)k_tile_count(a, d);
    for (int kt = 0; kt < nk; kt++) {
        k_tile_coord(a, d, kt, kc);
        int64_t ai = a_tile_of(a, d, cc, kc);
        nnt_tensor_tile_shape_at(a, ai, ashape);
        k[kt] = nnt_box_numel(d->nk, ashape + d->a_k);
        at[kt] = a->tiles[ai].handle;
        bt[kt] = b->tiles[b_tile_of(b, d, cc, kc)].handle;
    }
    *rc = nnt_insert_gemm_ksum(c->ctx, trans_a != NNT_NOTRANS, trans_b != NNT_NOTRANS, m, n, nk,
                               k, (float)alpha, (float)beta, at, bt, c->tiles[ci].handle);
    return 0;
}

/* Whether this product's B tiles are worth packing: the context packs (ctx->pack_b), each
 * tile is read by NNT_GEMM_PACK_MIN_READERS C tiles or more (along m), and there are no
 * batch dims (a task multiplies one matrix). The threshold: a pack task is a reorder of B as
 * the product tasks do it, but measured in GPT-2 124M steps on AMD Zen 4
 * (bench/RESULTS-cpu-kernels.md) it takes about twice as long as each reorder it saves (its
 * output is written to memory and read back by the products, where each product's own
 * reorder stays in its core's cache): with 2 readers the steps were as fast either way, with
 * 3 or more packing wins. */
static int packs_b(const nnt_tensor *c, const struct gemm_dims *d, int keep)
{
    const int64_t readers = keep ? NNT_GEMM_KEEP_MIN_READERS : NNT_GEMM_PACK_MIN_READERS;
    if (!c->ctx->pack_b || d->nb != 0 || nnt_box_numel(d->nm, c->grid + d->c_m) < readers)
        return 0;
    /* the readers: row tiles of 2 rows or more (one-row products read B as stored), each
     * met once per column tile */
    int64_t shape[NNT_MAX_DIMS], multirow = 0;
    for (int64_t i = 0; i < c->ntiles; i++) {
        nnt_tensor_tile_shape_at(c, i, shape);
        multirow += nnt_box_numel(d->nm, shape + d->c_m) > 1;
    }
    return multirow / nnt_box_numel(d->nn, c->grid + d->c_n) >= readers;
}

static void packed_b_release(struct packed_b *pb, int64_t ntiles)
{
    if (pb->kept) {   /* B's own: they stay */
        pb->handle = NULL;
        return;
    }
    for (int64_t i = 0; pb->handle && i < ntiles; i++)
        if (pb->handle[i])
            starpu_data_unregister_submit(pb->handle[i]);
    free(pb->handle);
    pb->handle = NULL;
}

/* Pack the B tiles that oneDNN's matmul wants in a blocked layout, for products of as many
 * rows as C's first tile has along m (2 or more: packs_b counted such readers, and the
 * first tile is the largest). */
static int packed_b_submit(nnt_trans trans_b, const nnt_tensor *a, nnt_tensor *b,
                           const nnt_tensor *c, const struct gemm_dims *d, struct packed_b *pb)
{
    int64_t cshape[NNT_MAX_DIMS], bshape[NNT_MAX_DIMS];
    nnt_tensor_tile_shape_at(c, 0, cshape);
    nnt_gemm_packing_of(c->ctx, a->dtype == NNT_BF16, b->dtype == NNT_BF16,
                        trans_b != NNT_NOTRANS, nnt_box_numel(d->nm, cshape + d->c_m),
                        &pb->packing);
    pb->handle = calloc((size_t)b->ntiles, sizeof *pb->handle);
    if (!pb->handle)
        return 0;   /* no memory for the bookkeeping: every B tile as stored */
    int rc = NNT_OK;
    int64_t last_k = -1, last_n = -1;   /* the size asked last: most tiles share a shape */
    size_t bytes = 0;
    for (int64_t i = 0; i < b->ntiles && rc == 0; i++) {
        nnt_tensor_tile_shape_at(b, i, bshape);
        int64_t k = nnt_box_numel(d->nk, bshape + d->b_k);
        int64_t n = nnt_box_numel(d->nn, bshape + d->b_n);
        if (k != last_k || n != last_n)
            bytes = nnt_gemm_pack_bytes(&pb->packing, n, k);
        last_k = k, last_n = n;
        if (bytes == 0)
            continue;
        starpu_vector_data_register(&pb->handle[i], -1, 0, (uint32_t)bytes, 1);
        rc = nnt_insert_gemm_pack(c->ctx, &pb->packing, trans_b != NNT_NOTRANS, n, k,
                                  b->tiles[i].handle, pb->handle[i]);
    }
    return rc;
}

/* B's tiles kept packed between products (ctx->pack_keep): per layout (transpose and
 * packing) a StarPU handle a tile, allocated once, and the version of the B tile it was
 * packed from (nnt_handle_version + 1; 0 never). A product repacks only the tiles written
 * since (a weight after the optimizer's step, a bf16 weight copy after its conversion),
 * so the packs of a weight serve every product that reads it in the same layout until it
 * changes: both row tiles of a forward, the forwards and backwards of several micro-batches
 * (fp32 weights). The writes are known at submission (nnt_submit counts them), in the order
 * StarPU runs them, so a pack task submitted here reads the B tile the products read. Two
 * layouts a tensor (a weight is B of the forward, x W^T, and of the input gradient, dY W);
 * a third replaces the one used longest ago. */
#define KEPT_LAYOUTS 2

struct kept_layout {
    int used, trans_b;
    nnt_gemm_packing packing;
    starpu_data_handle_t *handle;   /* per B tile; NULL where B is used as stored */
    void **memory;                  /* its RAM (the handle's home, ours: never freed and
                                       allocated again by StarPU, whose fresh pages cost a
                                       page fault each)                                 */
    uint64_t *packed_at;
    uint64_t last_use;
};

struct nnt_gemm_kept {
    struct kept_layout layout[KEPT_LAYOUTS];
    uint64_t clock;
};

/* The RAM of packs whose tensor went, kept (up to KEPT_POOL_MAX) for the next packs of the
 * same size: tensors made anew every step (recomputed activations, the bf16 weight copies
 * of blocks that recompute) would otherwise pack into fresh memory, a page fault every 4 KiB. Shared by the contexts
 * of the process; emptied when a context goes (nnt_gemm_kept_drain). */
struct kept_block {
    void *memory;
    size_t bytes;
    struct kept_block *next;
};
static pthread_mutex_t kept_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept_block *kept_pool;
static size_t kept_pool_bytes;
#define KEPT_POOL_MAX ((size_t)1 << 30)   /* beyond 1 GiB, released RAM is freed */

/* Bytes of kept packs in use (allocated for a layout's tile, not yet released) and the most
 * that packs in use and pooled held at once since the context started (nnt_gemm_kept_bytes) */
static int64_t kept_in_use, kept_peak;
static int64_t kept_cap = INT64_MAX;   /* the live context's pack_keep_max: the pool's bound too */

static void kept_count(int64_t bytes)
{
    pthread_mutex_lock(&kept_pool_lock);
    kept_in_use += bytes;
    int64_t held = kept_in_use + (int64_t)kept_pool_bytes;
    kept_peak = held > kept_peak ? held : kept_peak;
    pthread_mutex_unlock(&kept_pool_lock);
}

void nnt_gemm_kept_bytes(int64_t *now, int64_t *peak)
{
    pthread_mutex_lock(&kept_pool_lock);
    if (now)
        *now = kept_in_use + (int64_t)kept_pool_bytes;
    if (peak)
        *peak = kept_peak;
    pthread_mutex_unlock(&kept_pool_lock);
}

/* An eighth of the RAM available at the start (a cache: the products' bits are the same
 * without it): on a 24 GB machine about 2.7 GiB, twice the fp32 weights of a 0.35B model
 * (two layouts a weight). Without a cap, Gemma 3 1B with LoRA adapters (fp32, B 1 x T 256,
 * AMD Zen 4) kept 8 GiB of packs of its frozen weights: peak RSS 13.0 GiB against 5.35 GiB
 * without packs, for steps 11 % faster (5.57 against 6.25 s); with 2 GiB of packs 5.72 s and
 * 7.36 GiB, with 5.4 GiB 5.51 s and 10.7 GiB (bench/RESULTS-lora.md). */
void nnt_gemm_kept_start(nnt_ctx *ctx)
{
    const char *v = getenv("NNT_GEMM_PACK_KEEP_MIB");
    char *end = NULL;
    long long mib = v ? strtoll(v, &end, 10) : -1;
    int given = v && end != v && *end == '\0' && mib >= 0 && mib < (1LL << 40);
    ctx->pack_keep_max = given ? (int64_t)mib << 20 : nnt_host_available_bytes() / 8;
    ctx->pack_keep_given = given;
    if (v && !given)
        nnt_log(NNT_LOG_WARN, "NNT_GEMM_PACK_KEEP_MIB=%s is not a number of MiB: ignored", v);
    pthread_mutex_lock(&kept_pool_lock);
    kept_peak = kept_in_use + (int64_t)kept_pool_bytes;
    kept_cap = ctx->pack_keep_max;
    pthread_mutex_unlock(&kept_pool_lock);
}

/* Whether bytes more kept packs in use stay within the cap and in the room the RAM budget
 * leaves beside the tiles (a cache outside StarPU's counts: with it, tiles at the budget
 * would take the process past it) */
static int kept_fits(nnt_ctx *ctx, int64_t bytes)
{
    int64_t room = nnt_ctx_ram_room(ctx);
    pthread_mutex_lock(&kept_pool_lock);
    int fits = kept_in_use + bytes <= kept_cap && kept_in_use + bytes <= room;
    pthread_mutex_unlock(&kept_pool_lock);
    return fits;
}

static void *kept_alloc(size_t bytes)
{
    void *memory = NULL;
    pthread_mutex_lock(&kept_pool_lock);
    for (struct kept_block **at = &kept_pool; *at; at = &(*at)->next)
        if ((*at)->bytes == bytes) {
            struct kept_block *blk = *at;
            *at = blk->next;
            memory = blk->memory;
            kept_pool_bytes -= blk->bytes;
            free(blk);
            break;
        }
    pthread_mutex_unlock(&kept_pool_lock);
    if (!memory && posix_memalign(&memory, 64, bytes) != 0)
        memory = NULL;
    return memory;
}

/* A pack's RAM no longer in use: pooled (pool 1, within the pool's bounds) or freed. */
static void kept_release(void *memory, size_t bytes, int pool)
{
    struct kept_block *blk = pool ? malloc(sizeof *blk) : NULL;
    pthread_mutex_lock(&kept_pool_lock);
    kept_in_use -= (int64_t)bytes;
    int keep = blk && kept_pool_bytes + bytes <= KEPT_POOL_MAX &&
               (int64_t)(kept_pool_bytes + bytes) <= kept_cap;
    if (keep) {
        blk->memory = memory;
        blk->bytes = bytes;
        blk->next = kept_pool;
        kept_pool = blk;
        kept_pool_bytes += bytes;
    }
    pthread_mutex_unlock(&kept_pool_lock);
    if (!keep) {
        free(blk);
        free(memory);
    }
}

/* Free pooled blocks until the pool holds at most most bytes. */
static void kept_pool_trim(int64_t most)
{
    pthread_mutex_lock(&kept_pool_lock);
    while (kept_pool && (int64_t)kept_pool_bytes > most) {
        struct kept_block *blk = kept_pool;
        kept_pool = blk->next;
        kept_pool_bytes -= blk->bytes;
        free(blk->memory);
        free(blk);
    }
    pthread_mutex_unlock(&kept_pool_lock);
}

void nnt_gemm_kept_drain(void)
{
    kept_pool_trim(0);
}

static unsigned long kept_handles;   /* atomic: kept packs registered (nnt_gemm_kept_live) */

unsigned long nnt_gemm_kept_live(void)
{
    return __atomic_load_n(&kept_handles, __ATOMIC_RELAXED);
}

/* A kept pack retired without waiting: its RAM goes to the pool once the tasks submitted on
 * it have run (a write acquire, granted after them), then StarPU drops the handle. */
struct kept_retired {
    starpu_data_handle_t handle;
    void *memory;
    size_t bytes;
    int pool;
};

static void kept_retired_cb(void *arg)
{
    struct kept_retired *r = arg;
    starpu_data_release(r->handle);
    kept_release(r->memory, r->bytes, r->pool);   /* nothing reads it again: unregistered next */
    __atomic_sub_fetch(&kept_handles, 1, __ATOMIC_RELAXED);
    free(r);
}

/* Unregister a kept pack: waiting for the tasks that use it (wait 1), or after them, the
 * caller going on at once (wait 0). Its RAM goes to the pool (pool 1) or is freed. */
static void kept_handle_drop(starpu_data_handle_t h, void *memory, int wait, int pool)
{
    size_t bytes = starpu_vector_get_nx(h);
    struct kept_retired *r = wait ? NULL : malloc(sizeof *r);
    if (r) {
        *r = (struct kept_retired){h, memory, bytes, pool};
        if (starpu_data_acquire_cb(h, STARPU_W, kept_retired_cb, r) == 0) {
            starpu_data_unregister_submit(h);   /* after the acquire: no coherency */
            return;
        }
        free(r);
    }
    starpu_data_unregister_no_coherency(h);
    kept_release(memory, bytes, pool);
    __atomic_sub_fetch(&kept_handles, 1, __ATOMIC_RELAXED);
}

/* Unregister a layout's handles (wait, pool: as kept_handle_drop). */
static void kept_layout_clear(struct kept_layout *kl, int64_t ntiles, int wait, int pool)
{
    for (int64_t i = 0; kl->handle && i < ntiles; i++)
        if (kl->handle[i])
            kept_handle_drop(kl->handle[i], kl->memory[i], wait, pool);
    free(kl->handle);
    free(kl->memory);
    free(kl->packed_at);
    memset(kl, 0, sizeof *kl);
}

static void kept_free(nnt_tensor *t, int wait, int pool)
{
    if (!t->kept)
        return;
    for (int i = 0; i < KEPT_LAYOUTS; i++)
        kept_layout_clear(&t->kept->layout[i], t->ntiles, wait, pool);
    free(t->kept);
    t->kept = NULL;
}

void nnt_gemm_kept_free(nnt_tensor *t)
{
    kept_free(t, 1, 1);
}

void nnt_gemm_kept_retire(nnt_tensor *t)
{
    kept_free(t, 0, 1);
}

/* The bytes of t's kept packs */
static int64_t kept_bytes_of(const nnt_tensor *t)
{
    int64_t bytes = 0;
    for (int i = 0; t->kept && i < KEPT_LAYOUTS; i++) {
        const struct kept_layout *kl = &t->kept->layout[i];
        for (int64_t k = 0; kl->handle && k < t->ntiles; k++)
            bytes += kl->handle[k] ? (int64_t)starpu_vector_get_nx(kl->handle[k]) : 0;
    }
    return bytes;
}

/* The packs were kept in the room the budget left when they were made; tensors made since
 * (an optimizer's moments at its first step) take that room back: the pool is emptied, then
 * the packs of tensors are freed (once the tasks on them have run), most recent tensors first,
 * until those left fit the room (their products' bits are the same without them). */
void nnt_gemm_kept_fit_room(nnt_ctx *ctx)
{
    int64_t room = nnt_ctx_ram_room(ctx);
    pthread_mutex_lock(&kept_pool_lock);
    int64_t in_use = kept_in_use, pooled = (int64_t)kept_pool_bytes;
    pthread_mutex_unlock(&kept_pool_lock);
    if (in_use + pooled <= room)
        return;
    kept_pool_trim(in_use < room ? room - in_use : 0);
    if (in_use <= room)
        return;
    /* the tensors with packs, taken under the lock; freed outside it (StarPU calls) */
    pthread_mutex_lock(&ctx->lock);
    size_t n = 0;
    for (nnt_tensor *t = ctx->tensors; t; t = t->next)
        n += t->kept != NULL;
    nnt_tensor **with = malloc((n ? n : 1) * sizeof *with);
    n = 0;
    for (nnt_tensor *t = ctx->tensors; with && t; t = t->next)
        if (t->kept)
            with[n++] = t;
    pthread_mutex_unlock(&ctx->lock);
    for (size_t k = 0; with && k < n && in_use > room; k++) {
        in_use -= kept_bytes_of(with[k]);
        kept_free(with[k], 0, 0);
    }
    free(with);
}

/* B's kept layout for (trans_b, p): found, or made in a free slot or the one used longest
 * ago. NULL without memory for the bookkeeping. */
static struct kept_layout *kept_layout_of(nnt_tensor *b, int trans_b, const nnt_gemm_packing *p)
{
    if (!b->kept && !(b->kept = calloc(1, sizeof *b->kept)))
        return NULL;
    struct nnt_gemm_kept *k = b->kept;
    struct kept_layout *victim = &k->layout[0];
    k->clock++;
    for (int i = 0; i < KEPT_LAYOUTS; i++) {
        struct kept_layout *kl = &k->layout[i];
        if (kl->used && kl->trans_b == trans_b && kl->packing.bf16 == p->bf16 &&
            kl->packing.bits == p->bits && kl->packing.m == p->m) {
            kl->last_use = k->clock;
            return kl;
        }
        if (!kl->used || (victim->used && kl->last_use < victim->last_use))
            victim = kl;
    }
    kept_layout_clear(victim, b->ntiles, 0, 1);
    victim->handle = calloc((size_t)b->ntiles, sizeof *victim->handle);
    victim->memory = calloc((size_t)b->ntiles, sizeof *victim->memory);
    victim->packed_at = calloc((size_t)b->ntiles, sizeof *victim->packed_at);
    if (!victim->handle || !victim->memory || !victim->packed_at) {
        kept_layout_clear(victim, b->ntiles, 0, 1);
        return NULL;
    }
    victim->used = 1;
    victim->trans_b = trans_b;
    victim->packing = *p;
    victim->last_use = k->clock;
    return victim;
}

/* packed_b_submit with B's kept packs: the tiles written since their packing are packed
 * again (the others are read as they are). */
static int packed_b_kept(nnt_trans trans_b, const nnt_tensor *a, nnt_tensor *b,
                         const nnt_tensor *c, const struct gemm_dims *d, struct packed_b *pb)
{
    int64_t cshape[NNT_MAX_DIMS], bshape[NNT_MAX_DIMS];
    nnt_tensor_tile_shape_at(c, 0, cshape);
    nnt_gemm_packing_of(c->ctx, a->dtype == NNT_BF16, b->dtype == NNT_BF16,
                        trans_b != NNT_NOTRANS, nnt_box_numel(d->nm, cshape + d->c_m),
                        &pb->packing);
    struct kept_layout *kl = kept_layout_of(b, trans_b != NNT_NOTRANS, &pb->packing);
    if (!kl)
        return NNT_OK;   /* no memory for the bookkeeping: every B tile as stored */
    int rc = NNT_OK;
    int64_t last_k = -1, last_n = -1;
    size_t bytes = 0;
    for (int64_t i = 0; i < b->ntiles && rc == 0; i++) {
        nnt_tensor_tile_shape_at(b, i, bshape);
        int64_t k = nnt_box_numel(d->nk, bshape + d->b_k);
        int64_t n = nnt_box_numel(d->nn, bshape + d->b_n);
        if (k != last_k || n != last_n)
            bytes = nnt_gemm_pack_bytes(&pb->packing, n, k);
        last_k = k, last_n = n;
        if (bytes == 0)
            continue;
        uint64_t version = nnt_handle_version(b->tiles[i].handle) + 1;
        if (kl->handle[i] && kl->packed_at[i] == version)
            continue;   /* packed from the tile as it is */
        if (!kl->handle[i]) {
            if (!kept_fits(c->ctx, (int64_t)bytes) || !(kl->memory[i] = kept_alloc(bytes)))
                continue;   /* over the cap, or no memory: this tile as stored */
            kept_count((int64_t)bytes);
            starpu_vector_data_register(&kl->handle[i], STARPU_MAIN_RAM,
                                        (uintptr_t)kl->memory[i], (uint32_t)bytes, 1);
            __atomic_add_fetch(&kept_handles, 1, __ATOMIC_RELAXED);
        }
        rc = nnt_insert_gemm_pack(c->ctx, &pb->packing, trans_b != NNT_NOTRANS, n, k,
                                  b->tiles[i].handle, kl->handle[i]);
        kl->packed_at[i] = rc == 0 ? version : 0;
    }
    pb->handle = kl->handle;
    pb->kept = 1;
    return rc;
}

/* Whether this product keeps B's packs (ctx->pack_keep) or packs for itself alone: float
 * products keep them; bf16 products do not: measured on AMD Zen 4 (bench/RESULTS-bf16.md)
 * bf16 steps were no faster with kept packs read by 2 row tiles while fp32 steps took 8-11 %
 * less CPU time; measured again once the layers kept their bf16 weight copies from step to
 * step (the optimizer writes them, so a pack would serve a whole step): GPT-2 124M B 4 T 64
 * 0.94-0.98x the step time in 3 rounds, SmolLM2-135M B 4 T 256 0.99-1.01x, for 4 more
 * bytes a weight outside the RAM budget's count (two layouts of 2 bytes). */
static int keeps_b(const nnt_tensor *a, const nnt_tensor *b, const nnt_tensor *c)
{
    nnt_gemm_packing p;
    nnt_gemm_packing_of(c->ctx, a->dtype == NNT_BF16, b->dtype == NNT_BF16, 0, 1, &p);
    return c->ctx->pack_keep && !p.bf16;
}

/* Whether a product of m rows reads B tile bi (n x k) packed: only where B as stored would
 * give the same bits, i.e. where that product would run oneDNN's matmul with B reordered into
 * a blocked layout (the packed tile is then reordered into it, if the layouts of m and of
 * the packing's rows differ: an exact copy). Not a one-row product (a row kernel computes it
 * from B as stored), nor one whose matmul takes B as stored (plain layouts). */
static int reads_packed(struct packed_b *pb, int64_t bi, int64_t m, int64_t n, int64_t k)
{
    if (!pb->handle || !pb->handle[bi])
        return 0;
    if (m == pb->packing.m)
        return 1;   /* the tile was packed because this layout is a blocked one */
    if (m != pb->last[0] || n != pb->last[1] || k != pb->last[2]) {
        nnt_gemm_packing rows = pb->packing;
        rows.m = m;
        pb->last_ok = m > 1 && nnt_gemm_pack_bytes(&rows, n, k) != 0;
        pb->last[0] = m, pb->last[1] = n, pb->last[2] = k;
    }
    return pb->last_ok;
}

/* Submit the k tasks of C tile ci in increasing k order; the last one runs the epilogue.
 * travel (MPI, see travels()): C's tile migrates to the rank of each k tile as the rank
 * changes, and back to its owner at the end. pb: B's packed tiles, read instead of B's own
 * where there is one. */
static int submit_c_tile(nnt_trans trans_a, nnt_trans trans_b, double alpha, nnt_tensor *a,
                         nnt_tensor *b, double beta, nnt_tensor *c, const struct gemm_dims *d,
                         int64_t ci, nnt_epilogue e, nnt_tensor *bias, nnt_tensor *aux,
                         int travel, struct packed_b *pb)
{
    int64_t cc[NNT_MAX_DIMS], origin[NNT_MAX_DIMS], cshape[NNT_MAX_DIMS];
    int64_t kc[NNT_MAX_DIMS], ashape[NNT_MAX_DIMS];
    nnt_tensor_tile_coord(c, ci, cc);
    nnt_tensor_tile_box(c, cc, origin, cshape);
    /* {m, n, k, batch} of this C tile; k is filled per k tile */
    int64_t mnkb[4] = {nnt_box_numel(d->nm, cshape + d->c_m),
                       nnt_box_numel(d->nn, cshape + d->c_n), 0, nnt_box_numel(d->nb, cshape)};
    starpu_data_handle_t tiles[5] = {NULL, NULL, c->tiles[ci].handle, NULL, NULL};
    if (bias)
        tiles[3] = bias->tiles[nnt_tensor_tile_index(bias, cc + d->c_n)].handle;
    if (aux)
        tiles[4] = aux->tiles[ci].handle;
    int64_t nkt = k_tile_count(a, d);
    const int home = c->tiles[ci].owner;
    int rc = NNT_OK, at = home;
    for (int64_t kt = 0; kt < nkt && rc == 0; kt++) {
        k_tile_coord(a, d, kt, kc);
        int64_t ai = a_tile_of(a, d, cc, kc);
        nnt_tensor_tile_shape_at(a, ai, ashape);
        mnkb[2] = nnt_box_numel(d->nk, ashape + d->a_k);
        int64_t bi = b_tile_of(b, d, cc, kc);
        const int packed = reads_packed(pb, bi, mnkb[0], mnkb[1], mnkb[2]);
        tiles[0] = a->tiles[ai].handle;
        tiles[1] = packed ? pb->handle[bi] : b->tiles[bi].handle;
        int first = kt == 0, last = kt == nkt - 1;
        if (travel && a->tiles[ai].owner != at) {   /* C's tile moves to the k tile's rank */
            at = a->tiles[ai].owner;
            nnt_mpi_migrate(c->ctx, tiles[2], at, !(first && beta == 0.0));
        }
        enum starpu_data_access_mode mode =
            !first ? K_ACCUMULATE_MODE : beta == 0.0 ? STARPU_W : STARPU_RW;
        rc = nnt_insert_gemm(c->ctx, trans_a, trans_b, mnkb, (float)alpha,
                             first ? (float)beta : 1.0f, mode,
                             last ? (int)e : NNT_EPILOGUE_NONE, tiles,
                             packed ? &pb->packing : NULL);
    }
    if (at != home)
        nnt_mpi_migrate(c->ctx, tiles[2], home, 1);
    return rc;
}

/* 1 for a product whose tiles may travel (travels()): under NNT_DIST_DATA over MPI, C a
 * parameter-like tensor (no rows), A's k tiles activation rows, no epilogue. */
static int sums_rows(const nnt_tensor *a, const nnt_tensor *c, nnt_epilogue e)
{
    const nnt_ctx *ctx = c->ctx;
    return ctx->mpi && ctx->distribution == NNT_DIST_DATA && !c->rows && a->rows &&
           e == NNT_EPILOGUE_NONE;
}

/* NNT_DIST_DATA: C (a parameter-like tensor, e.g. a weight gradient) summed over k tiles of
 * A that belong to other ranks than C's tile (activation rows). C's tile travels: it
 * migrates to the rank of each k tile in turn (starpu_mpi_data_migrate, only when the rank
 * changes: once per rank, as ranks own contiguous blocks of rows), where that rank adds its
 * own k tiles exactly as one process does (the first with beta, the others with 1, in
 * increasing k order), and comes back to its owner. No activation moves, and the sum is
 * one process's in its order: the same bits. Only for the products sums_rows() accepts;
 * 1 when tile ci travels (submit_c_tile), i.e. some k tile is on another rank. */
static int travels(const nnt_tensor *a, const nnt_tensor *c, const struct gemm_dims *d,
                   int64_t ci)
{
    int64_t cc[NNT_MAX_DIMS], kc[NNT_MAX_DIMS];
    nnt_tensor_tile_coord(c, ci, cc);
    for (int64_t kt = 0; kt < k_tile_count(a, d); kt++) {
        k_tile_coord(a, d, kt, kc);
        if (a->tiles[a_tile_of(a, d, cc, kc)].owner != c->tiles[ci].owner)
            return 1;
    }
    return 0;   /* every k tile is on C's owner already */
}

/* Bytes the ranks send each other for the C tiles that travels() picks, either way (each
 * (tile, rank) pair once: StarPU-MPI keeps a received copy until the tile is written again):
 *   travel: each migration of a C tile that carries its contents, and the B tiles its tasks
 *           read on ranks that do not own them (A's k tile is always where the task runs);
 *   stay:   the A and B tiles that C's owner reads from other ranks (one process's tasks on
 *           C's owner, as under NNT_DIST_SHARDED: the same sums in the same order).
 * seen[ntiles of B x nranks] holds the B pairs counted (bit 0 travel, bit 1 stay),
 * seen_a[ntiles of A x nranks] the A pairs (stay only). */
static void data_bytes(const nnt_tensor *a, const nnt_tensor *b, double beta,
                       const nnt_tensor *c, const struct gemm_dims *d,
                       unsigned char *seen_a, unsigned char *seen, int64_t bytes[2])
{
    const int nranks = c->ctx->nranks;
    int64_t cc[NNT_MAX_DIMS], kc[NNT_MAX_DIMS];
    bytes[0] = bytes[1] = 0;
    for (int64_t ci = 0; ci < c->ntiles; ci++) {
        if (!travels(a, c, d, ci))
            continue;
        nnt_tensor_tile_coord(c, ci, cc);
        const int home = c->tiles[ci].owner;
        int at = home;
        for (int64_t kt = 0; kt < k_tile_count(a, d); kt++) {
            k_tile_coord(a, d, kt, kc);
            int64_t ai = a_tile_of(a, d, cc, kc), bi = b_tile_of(b, d, cc, kc);
            int a_rank = a->tiles[ai].owner, b_rank = b->tiles[bi].owner;
            if (a_rank != at) {
                at = a_rank;
                if (kt > 0 || beta != 0.0)
                    bytes[0] += nnt_tensor_tile_bytes(c, ci);
            }
            if (b_rank != at && !(seen[bi * nranks + at] & 1)) {
                seen[bi * nranks + at] |= 1;
                bytes[0] += nnt_tensor_tile_bytes(b, bi);
            }
            if (a_rank != home && !seen_a[ai * nranks + home]) {
                seen_a[ai * nranks + home] = 1;
                bytes[1] += nnt_tensor_tile_bytes(a, ai);
            }
            if (b_rank != home && !(seen[bi * nranks + home] & 2)) {
                seen[bi * nranks + home] |= 2;
                bytes[1] += nnt_tensor_tile_bytes(b, bi);
            }
        }
        if (at != home)
            bytes[0] += nnt_tensor_tile_bytes(c, ci);
    }
}

/* NNT_DIST_DATA: 1 when the C tiles that travels() picks travel, 0 when they stay on their
 * owners and the rows come to them. Both give one process's bits. The rows are chosen when
 * they send less than 0.8 times the bytes of the travelling tiles (data_bytes): with the
 * rows, C's owner also does the other ranks' share of the arithmetic, which a product of
 * few tiles leaves unbalanced. Measured on 2 ranks of GPT-2 124M (bench/RESULTS-mpi.md):
 * at 128 rows per tile the rows send 3 to 9 times fewer bytes (0.4 MB of X and dY against
 * a 2.4 MB gradient tile) and the steps are faster with them; at 512 rows per tile, at
 * 0.44-0.83 times the bytes, as fast or faster; at 1024 rows per tile the tied head's rows
 * (7 tiles on 2 ranks) send 0.88 times the bytes and the steps are slower with them. */
static int data_travel(const nnt_tensor *a, const nnt_tensor *b, double beta,
                       const nnt_tensor *c, const struct gemm_dims *d, nnt_epilogue e)
{
    const nnt_ctx *ctx = c->ctx;
    if (!sums_rows(a, c, e))
        return 0;
    /* With more than two ranks, runs whose tiles travel hang with StarPU-MPI 1.3.10 (-np 3,
     * GPT-2 "tiny", products of 2, 4 or 8 tiles alike: every rank waits in the first
     * gradient norm for the partial of a gradient tile that is never computed; cause not
     * found): the rows travel there, which gives the same bits (tests/check_mpi.sh). */
    if (ctx->nranks > 2)
        return 0;
    unsigned char *seen_a = calloc((size_t)(a->ntiles * ctx->nranks), 1);
    unsigned char *seen = calloc((size_t)(b->ntiles * ctx->nranks), 1);
    const int counted = seen_a && seen;
    int64_t bytes[2] = {0, 0};
    if (counted)
        data_bytes(a, b, beta, c, d, seen_a, seen, bytes);
    free(seen_a);
    free(seen);
    if (!counted)
        return 1;   /* no memory to count: travel (either way is exact) */
    if (bytes[0] == 0 && bytes[1] == 0)
        return 0;   /* no tile to travel */
    const int travel = 5 * bytes[1] >= 4 * bytes[0];
    nnt_log(NNT_LOG_DEBUG, "data distribution: a product summed over rows of several ranks "
            "into %lld tiles: %lld bytes sent if they travel, %lld if the rows do: %s",
            (long long)c->ntiles, (long long)bytes[0], (long long)bytes[1],
            travel ? "they travel" : "the rows travel");
    return travel;
}

static int gemm(const char *fn, nnt_trans trans_a, nnt_trans trans_b, double alpha,
                nnt_tensor *a, nnt_tensor *b, double beta, nnt_tensor *c, int ndim_k,
                int ndim_batch, nnt_epilogue e, nnt_tensor *bias, nnt_tensor *aux);

/* Products with an NNT_NF4 B and at most this many rows read B's tiles as they are (the
 * gemm codelet's NF4 rows, nnt_cpu_nf4_rows): generation's decode steps, of one sequence or
 * of several side by side (nnt_model_generate_n). Measured (AMD Zen 5, 2 workers, x (M,
 * 8192) against W (2048, 8192) in tiles of 1024 rows, ms, the rows against dequantizing):
 * fp32 M 4 1.6 / 5.5, M 8 2.5 / 6.2, M 16 5.6 / 6.3; bf16 M 4 0.9 / 2.6, M 8 1.7 / 3.2,
 * M 16 2.3 / 3.0; one thread with AVX2 alone, fp32 M 16 21.5 / 31.6. */
#define NF4_ROWS_MAX 16

/* Whether a product with an NF4 B reads B's tiles as they are: few rows of A (m), A as it
 * is and B transposed (a linear's x W^T), no batch dims, alpha not 0. */
static int nf4_rows(nnt_trans trans_a, nnt_trans trans_b, double alpha, const nnt_tensor *a,
                    const struct gemm_dims *d)
{
    return trans_a == NNT_NOTRANS && trans_b == NNT_TRANS && d->nb == 0 && alpha != 0.0 &&
           nnt_box_numel(d->nm, a->shape + d->a_m) <= NF4_ROWS_MAX;
}

/* The product with an NNT_NF4 B and more rows: B dequantized into a temporary of its
 * layout (bf16 for bf16 products, else floats: what bitsandbytes' compute dtype reads), one
 * task a tile before the products that read it, then released after them. The products are
 * those of the temporary (no packs kept: it is made again for each product). The tasks
 * wait for A's first tile: a frozen B is ready long before its product, and a forward's
 * worth of them dequantized at once would hold the whole base in bf16 (Llama 3.1 8B: its
 * RAM peak at 20.3 GiB instead of 7.5) */
static int gemm_nf4(const char *fn, nnt_trans trans_a, nnt_trans trans_b, double alpha,
                    nnt_tensor *a, nnt_tensor *b, double beta, nnt_tensor *c, int ndim_k,
                    int ndim_batch, nnt_epilogue e, nnt_tensor *bias, nnt_tensor *aux)
{
    nnt_dtype dt = c->ctx->precision == NNT_PRECISION_BF16 ? NNT_BF16 : NNT_FP32;
    nnt_tensor *w = NULL;   // B's shape and tiling, dequantized
    NNT_TRY(nnt_tensor_create_beside(c->ctx, dt, b->ndim, b->shape, b->tile, b,
                                     NNT_HELD_ANYWHERE, &w));
    w->dequantized = 1;
    int rc = nnt_tensor_convert_after(b, w, a->tiles[0].handle);
    if (rc == 0)
        rc = gemm(fn, trans_a, trans_b, alpha, a, w, beta, c, ndim_k, ndim_batch, e, bias, aux);
    nnt_temp_release(w);   /* after the products that read it */
    return rc;
}

static int gemm(const char *fn, nnt_trans trans_a, nnt_trans trans_b, double alpha,
                nnt_tensor *a, nnt_tensor *b, double beta, nnt_tensor *c, int ndim_k,
                int ndim_batch, nnt_epilogue e, nnt_tensor *bias, nnt_tensor *aux)
{
    struct gemm_dims d;
    int rc = check_operands(fn, trans_a, trans_b, a, b, beta, c, ndim_k, ndim_batch, &d);
    if (rc == 0)
        rc = check_epilogue(fn, e, bias, aux, a, b, c, &d);
    const int nf4 = rc == 0 && b->dtype == NNT_NF4;
    if (nf4 && !nf4_rows(trans_a, trans_b, alpha, a, &d))
        return gemm_nf4(fn, trans_a, trans_b, alpha, a, b, beta, c, ndim_k, ndim_batch, e,
                        bias, aux);
    /* a C tile summed in one task is computed where it is owned, its rows brought there
     * (under NNT_DIST_DATA too): one process's task, one process's bits */
    const int ksum = rc == 0 && !nf4 && sums_k(a, c, &d, e);
    const int travel = rc == 0 && !ksum && data_travel(a, b, beta, c, &d, e);
    struct packed_b pb = {NULL, {0, 0, 0, 0}, {0, 0, 0}, 0, 0};
    const int keep = rc == 0 && keeps_b(a, b, c) && !b->dequantized;
    if (rc == 0 && !ksum && !nf4 && packs_b(c, &d, keep))
        rc = keep ? packed_b_kept(trans_b, a, b, c, &d, &pb)
                  : packed_b_submit(trans_b, a, b, c, &d, &pb);
    for (int64_t ci = 0; rc == 0 && ci < c->ntiles; ci++)
        if (!ksum || submit_c_tile_ksum(trans_a, trans_b, alpha, a, b, beta, c, &d, ci, &rc))
            rc = submit_c_tile(trans_a, trans_b, alpha, a, b, beta, c, &d, ci, e, bias, aux,
                               travel && travels(a, c, &d, ci), &pb);
    packed_b_release(&pb, b->ntiles);
    if (rc == 0) {
        nnt_tensor_mark_written(c);
        if (nnt_epilogue_writes_aux(e))
            nnt_tensor_mark_written(aux);
    }
    return rc;
}

int nnt_tensor_gemm(nnt_trans trans_a, nnt_trans trans_b, double alpha, nnt_tensor *a,
                    nnt_tensor *b, double beta, nnt_tensor *c, int ndim_k, int ndim_batch)
{
    return gemm("nnt_tensor_gemm", trans_a, trans_b, alpha, a, b, beta, c, ndim_k, ndim_batch,
                NNT_EPILOGUE_NONE, NULL, NULL);
}

int nnt_tensor_gemm_ex(nnt_trans trans_a, nnt_trans trans_b, double alpha, nnt_tensor *a,
                       nnt_tensor *b, double beta, nnt_tensor *c, int ndim_k, int ndim_batch,
                       nnt_epilogue epilogue, nnt_tensor *bias, nnt_tensor *aux)
{
    return gemm("nnt_tensor_gemm_ex", trans_a, trans_b, alpha, a, b, beta, c, ndim_k,
                ndim_batch, epilogue, bias, aux);
}
