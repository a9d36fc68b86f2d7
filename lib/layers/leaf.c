/* SPDX-License-Identifier: MIT */
/* The generic leaf layers: embedding, layernorm, linear, lm_head (tied to an embedding) and
 * cross_entropy, plus the helpers every generic kind shares (generic.h). Shapes: B batch,
 * T sequence, C channels, V vocabulary; "..." are any leading (row) dimensions. */
#include "generic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers -------------------------------------------------------------------------- */

int gl_tiling(nnt_ctx *ctx, const nnt_tiling *tiling, const char *fn, nnt_tiling *out)
{
    static const nnt_tiling automatic = NNT_TILING_INIT;
    *out = automatic;
    if (!tiling)
        return NNT_OK;
    if (tiling->size != sizeof(nnt_tiling))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: tiling->size %zu is not sizeof(nnt_tiling) %zu "
                        "(use NNT_TILING_INIT)", fn, tiling->size, sizeof(nnt_tiling));
    const int64_t e[7] = {tiling->batch, tiling->seq, tiling->channels, tiling->hidden,
                          tiling->vocab, tiling->heads, tiling->head_dim};
    for (int i = 0; i < 7; i++)
        if (e[i] < -1)
            return nnt_fail(ctx, NNT_E_INVAL, "%s: tiling entry %d is %lld (0 or -1: whole "
                            "dimension, > 0: tile size)", fn, i, (long long)e[i]);
    *out = *tiling;
    return NNT_OK;
}

int64_t gl_tile(int64_t entry, int64_t n)
{
    return entry > 0 && entry < n ? entry : n;
}

static int has_tiling(const nnt_tensor *t, const int64_t *tile)
{
    for (int d = 0; d < t->ndim; d++)
        if (t->tile[d] != (tile[d] < t->shape[d] ? tile[d] : t->shape[d]))
            return 0;
    return 1;
}

int gl_retiled(nnt_layer *l, nnt_tensor *src, const int64_t *tile, nnt_tensor **cache,
               nnt_tensor **out)
{
    if (has_tiling(src, tile)) {
        *out = src;
        return NNT_OK;
    }
    NNT_TRY(nnt_layer_ensure_placed(l, cache, src->dtype, src->ndim, src->shape, tile,
                                    src->rows));
    *out = *cache;
    return nnt_tensor_copy(src, *cache);
}

int gl_add_into(nnt_layer *l, nnt_tensor *src, nnt_tensor *dst, nnt_tensor **tmp)
{
    nnt_tensor *same = NULL;
    NNT_TRY(gl_retiled(l, src, dst->tile, tmp, &same));
    return nnt_tensor_axpby(1.0, same, 1.0, dst);
}

int gl_dy_like(nnt_layer *l, nnt_tensor *dy, nnt_tensor *y, const char *fn, nnt_tensor **cache,
               nnt_tensor **out)
{
    int same = dy->dtype == NNT_FP32 && dy->ndim == y->ndim;
    for (int d = 0; same && d < y->ndim; d++)
        same = dy->shape[d] == y->shape[d];
    if (!same)
        return nnt_fail(l->ctx, NNT_E_SHAPE, "%s: dy of a %s layer must be fp32 with the shape "
                        "of its output (%d dims, last %lld)", fn, l->vt->kind_name, y->ndim,
                        (long long)y->shape[y->ndim - 1]);
    return gl_retiled(l, dy, y->tile, cache, out);
}

/* NNT_E_SHAPE unless x is fp32 with at least min_ndim dims and a last dim of `last`. */
/* The box of src tile (so, ss) that lands in dst tile (dor, ds) when src rows [r0, r0 + n)
 * of dimension dim go to dst rows [d0, d0 + n); 0 if they do not meet. */
static int rows_box(int nd, int dim, int64_t r0, int64_t d0, int64_t n, const int64_t *so,
                    const int64_t *ss, const int64_t *dor, const int64_t *ds, nnt_copy_box *b)
{
    int64_t sst[NNT_MAX_DIMS], dst[NNT_MAX_DIMS];
    nnt_row_major_strides(nd, ss, sst);
    nnt_row_major_strides(nd, ds, dst);
    memset(b, 0, sizeof *b);
    for (int e = 0; e < nd; e++) {   /* the overlap [a, z) in dst coordinates */
        int64_t shift = e == dim ? r0 - d0 : 0;
        int64_t a = dor[e] > so[e] - shift ? dor[e] : so[e] - shift;
        int64_t z = dor[e] + ds[e] < so[e] + ss[e] - shift ? dor[e] + ds[e] : so[e] + ss[e] - shift;
        if (e == dim) {
            a = a > d0 ? a : d0;
            z = z < d0 + n ? z : d0 + n;
        }
        if (a >= z)
            return 0;
        b->shape[e] = z - a;
        b->src_stride[e] = sst[e];
        b->dst_stride[e] = dst[e];
        b->src_offset += (a + shift - so[e]) * sst[e];
        b->dst_offset += (a - dor[e]) * dst[e];
    }
    return 1;
}

int gl_copy_rows(nnt_tensor *src, int dim, int64_t r0, nnt_tensor *dst, int64_t d0, int64_t n)
{
    int nd = src->ndim, same = src->dtype == dst->dtype && nd == dst->ndim && dim >= 0 &&
                               dim < nd && n >= 0 && r0 >= 0 && d0 >= 0;
    for (int e = 0; same && e < nd; e++)
        same = e == dim ? r0 + n <= src->shape[e] && d0 + n <= dst->shape[e]
                        : src->shape[e] == dst->shape[e];
    if (!same)
        return nnt_fail(src->ctx, NNT_E_SHAPE, "nnt: rows [%lld, %lld) of dimension %d do not "
                        "fit the shapes of a row copy", (long long)r0, (long long)(r0 + n), dim);
    int rc = nnt_tensor_check_readable(src, "nnt_layer_forward");
    if (rc == 0 && !dst->written)   /* the tasks read and write the tiles they touch */
        rc = nnt_tensor_fill(dst, 0.0);
    for (int64_t i = 0; i < dst->ntiles && rc == 0; i++) {
        int64_t dc[NNT_MAX_DIMS], dor[NNT_MAX_DIMS], ds[NNT_MAX_DIMS];
        nnt_tensor_tile_coord(dst, i, dc);
        nnt_tensor_tile_box(dst, dc, dor, ds);
        for (int64_t j = 0; j < src->ntiles && rc == 0; j++) {
            int64_t sc[NNT_MAX_DIMS], so[NNT_MAX_DIMS], ss[NNT_MAX_DIMS];
            nnt_copy_box b;
            nnt_tensor_tile_coord(src, j, sc);
            nnt_tensor_tile_box(src, sc, so, ss);
            if (rows_box(nd, dim, r0, d0, n, so, ss, dor, ds, &b))
                rc = nnt_insert_copy(dst->ctx, dst->tiles[i].handle, STARPU_RW, 1,
                                     &src->tiles[j].handle, nd, dst->elsize, 1, &b);
        }
    }
    if (rc == 0)
        nnt_tensor_mark_written(dst);
    return rc;
}

int gl_weight_operand(nnt_layer *l, nnt_tensor *w, nnt_tensor **copy, nnt_tensor **operand)
{
    nnt_precision precision = NNT_PRECISION_FP32;
    NNT_TRY(nnt_ctx_precision(l->ctx, &precision));
    NNT_TRY(nnt_layer_note_weight_read(l, w, copy));
    nnt_layer_param_rec *own = nnt_layer_own_param(l, w);
    if (own)   /* frozen under bf16 products: kept in bf16 from now on (or NF4) */
        NNT_TRY(nnt_layer_param_narrow(l->ctx, own));
    /* read as it is: a float weight of float products, a bf16 one, an NF4 one (the product
     * dequantizes it) */
    if (precision != NNT_PRECISION_BF16 || w->dtype == NNT_BF16 || w->dtype == NNT_NF4) {
        nnt_tensor_destroy(*copy);
        *copy = NULL;
        *operand = w;
        return NNT_OK;
    }
    if (!(*copy && l->ctx->weights_fixed)) {   /* else the copy still holds w's values */
        NNT_TRY(nnt_layer_ensure_beside(l, copy, NNT_BF16, w));
        /* converted unless no task wrote w since the last conversion or since an update
         * that wrote the copy too (nnt_tensor_adam_step) */
        if ((*copy)->copy_src != w || !nnt_tensor_copy_current(*copy)) {
            NNT_TRY(nnt_tensor_copy_link(w, *copy));
            NNT_TRY(nnt_tensor_convert(w, *copy));
            nnt_tensor_copy_mark(*copy, -1);
        }
    }
    *operand = *copy;
    return NNT_OK;
}

static int check_rows(nnt_layer *l, nnt_tensor *x, int min_ndim, int64_t last)
{
    if (x->dtype == NNT_FP32 && x->ndim >= min_ndim && x->shape[x->ndim - 1] == last)
        return NNT_OK;
    return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: a %s layer takes fp32 (..., %lld) "
                    "with at least %d dims (got %d dims, last %lld)", l->vt->kind_name,
                    (long long)last, min_ndim, x->ndim, (long long)x->shape[x->ndim - 1]);
}

/* x's shape and tiling with the last dim of size last, tile last_tile. */
static void rows_with(const nnt_tensor *x, int64_t last, int64_t last_tile, int64_t *shape,
                      int64_t *tile)
{
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
    memcpy(tile, x->tile, (size_t)x->ndim * sizeof *tile);
    shape[x->ndim - 1] = last;
    tile[x->ndim - 1] = last_tile;
}

static void destroy_all(nnt_tensor **t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        nnt_tensor_destroy(t[i]);
}

/* A kind whose create failed half-way: destroy what exists, return rc. */
static int abandon(nnt_layer *l, int rc)
{
    nnt_layer_destroy(l);
    return rc;
}

/* ---- embedding ------------------------------------------------------------------------ */

typedef struct embedding {
    nnt_tensor *wte;                // (V, C) tiles (vocab, channels)
    nnt_tensor *wpe;                // (maxT, C) tiles (seq, channels); gradients of both:
                                    // nnt_layer_grad_of (NULL when frozen)
    nnt_tensor *tokens;             // (B, T) int32: a copy of the input
    nnt_tensor *wpe_rows, *dwpe_rows;  // (maxT, C) in the input's T tiling, if it differs
    nnt_tensor *out;                // (B, T, C)
    nnt_tensor *pos_rows;           // (T, C) wpe rows past .. past + T - 1 (cached forward)
    nnt_tensor *dy_cache, *tmp;
    nnt_tensor *dwte_scratch;       // (V, C) a frozen table's scatter target (wpe trained)
    nnt_tensor *pos, *pos_out;      // (B, T) int32 per-token positions (packed examples) in
                                    // the input's tiling; (B, T, C) their wpe rows
    int packed;                     // the last forward used pos
    double scale;                   // out multiplied by (float) scale (Gemma); 0: not
    nnt_tensor *dscaled;            // (B, T, C) scale * dy
    uint64_t table_seen;            // narrow_table: 1 + wte's write count when it last
                                    // looked (0: never)
    double noise_alpha;             // NEFTune (nnt_layer_set_neftune); 0: none
    uint64_t noise_seed;
    int64_t noise_passes;           // training forwards with noise (the pass without the
                                    // trainer's micro-batch number)
    nnt_tensor *noise;              // (B, T, C)
} embedding;

/* A frozen token table under bf16 products is kept in bf16 only, like a frozen linear
 * map's weight, when that loses nothing: when every value is a bf16 value (a model loaded
 * from bf16 weights, as Hugging Face checkpoints mostly are; checked by a pass over the
 * table, again only once its values change). The gathers then widen its rows (exact) and a
 * tied head's products read it as it is: the same results in half the memory (Llama-3.2-1B:
 * 1 GB). A table that bf16 cannot hold keeps its float values: the lookup is not a product,
 * and rounding the table would change the model's input. */
static int narrow_table(nnt_layer *l, embedding *e)
{
    nnt_layer_param_rec *own = nnt_layer_own_param(l, e->wte);
    if (!own || !own->frozen || own->keep_fp32 || e->wte->dtype != NNT_FP32 ||
        !e->wte->written || l->ctx->precision != NNT_PRECISION_BF16)
        return NNT_OK;   /* (an unwritten table: the gathers refuse it) */
    uint64_t seen = 1 + nnt_tensor_writes(e->wte);
    if (e->table_seen == seen)
        return NNT_OK;   /* looked at these values already: not all bf16 */
    int exact = 0;
    NNT_TRY(nnt_tensor_bf16_exact(e->wte, &exact));
    e->table_seen = seen;
    /* (not marked products_only: freezing it again after an unfreeze, or initialising it,
     * must not round values that bf16 may no longer hold) */
    return exact ? nnt_tensor_retype(e->wte, NNT_BF16) : NNT_OK;
}

/* NNT_E_INVAL naming an id of tokens (B, T) outside [0, V), its place and V, when their
 * values came from the host (nnt_tensor.ids_known: their range was seen as they were
 * copied in, so nothing is read back and nothing waits); the operation itself would give
 * such an id a row of zeros. Ids that tasks wrote are not seen here. */
static int check_ids(nnt_layer *l, const nnt_tensor *x, int64_t V)
{
    if (!x->ids_known || (x->ids_min >= 0 && x->ids_max < V))
        return NNT_OK;
    int low = x->ids_min < 0 && (x->ids_max < V || x->ids_argmin < x->ids_argmax);
    int64_t at = low ? x->ids_argmin : x->ids_argmax;
    return nnt_fail(l->ctx, NNT_E_INVAL, "nnt_layer_forward: token id %d at [%lld, %lld] of the "
                    "input (B %lld, T %lld) is outside the vocabulary: ids are 0 to %lld "
                    "(vocabulary size %lld)", (int)(low ? x->ids_min : x->ids_max),
                    (long long)(at / x->shape[1]), (long long)(at % x->shape[1]),
                    (long long)x->shape[0], (long long)x->shape[1], (long long)(V - 1),
                    (long long)V);
}

/* out += wpe[positions] for per-token positions p (the tree's, nnt_layer_set_positions, or a
 * generation's), copied into e->pos in x's tiling for the backward; wpe (maxT, C) in out's C
 * tiling. */
static int add_positions(nnt_layer *l, embedding *e, nnt_tensor *x, nnt_tensor *p,
                         nnt_tensor *wpe)
{
    if (p->ndim != 2 || p->shape[0] != x->shape[0] || p->shape[1] != x->shape[1])
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: the positions (%lld, %lld) "
                        "are not the input's (B %lld, T %lld)",
                        (long long)p->shape[0], (long long)(p->ndim > 1 ? p->shape[1] : 0),
                        (long long)x->shape[0], (long long)x->shape[1]);
    NNT_TRY(nnt_layer_ensure(l, &e->pos, NNT_INT32, 2, x->shape, x->tile));
    NNT_TRY(nnt_tensor_copy(p, e->pos));
    NNT_TRY(nnt_layer_ensure(l, &e->pos_out, NNT_FP32, 3, e->out->shape, e->out->tile));
    /* pos_out (B, T, C) = wpe[positions]: the position table looked up like a token table */
    NNT_TRY(nnt_tensor_embedding(e->pos, wpe, NULL, e->pos_out));
    return nnt_tensor_axpby(1.0, e->pos_out, 1.0, e->out);
}

/* NEFTune: out (B, T, C) += uniform noise in [-alpha / sqrt(T C), alpha / sqrt(T C)] (after
 * the scale, as transformers' hook adds it to the embedding module's output), drawn for the
 * pass (the trainer's micro-batch number, else the noisy forwards counted), in a forward
 * that trains (none in validation and generation: ctx->no_dropout). */
static int add_noise(nnt_layer *l, embedding *e)
{
    if (e->noise_alpha == 0.0 || l->ctx->no_dropout)
        return NNT_OK;
    nnt_tensor *out = e->out;
    double mag = e->noise_alpha / sqrt((double)out->shape[1] * (double)out->shape[2]);
    int64_t pass = l->ctx->dropout_pass > 0 ? l->ctx->dropout_pass : ++e->noise_passes;
    NNT_TRY(nnt_layer_ensure(l, &e->noise, NNT_FP32, 3, out->shape, out->tile));
    NNT_TRY(nnt_tensor_fill_uniform(e->noise, gl_pass_seed(e->noise_seed, pass), -mag, mag));
    return nnt_tensor_axpby(1.0, e->noise, 1.0, out);
}

/* positions: the tokens' rows of the position table (NULL: 0 .. T - 1); none without one */
static int embedding_forward_pos(nnt_layer *l, nnt_tensor *x, nnt_tensor *positions,
                                 nnt_tensor **y)
{
    embedding *e = l->impl;
    nnt_tensor *p = e->wpe ? positions : NULL;
    e->packed = p != NULL;
    if (x->dtype != NNT_INT32 || x->ndim != 2 || (e->wpe && x->shape[1] > e->wpe->shape[0]))
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: an embedding layer takes "
                        "int32 tokens (B, T) with T <= maxT = %lld",
                        (long long)(e->wpe ? e->wpe->shape[0] : 0));
    NNT_TRY(check_ids(l, x, e->wte->shape[0]));
    NNT_TRY(narrow_table(l, e));
    int64_t C = e->wte->shape[1], ct = e->wte->tile[1];
    int64_t shape[3] = {x->shape[0], x->shape[1], C}, tile[3] = {x->tile[0], x->tile[1], ct};
    int64_t rows_tile[2] = {x->tile[1], ct};
    nnt_tensor *wpe = NULL;
    NNT_TRY(nnt_layer_ensure(l, &e->tokens, NNT_INT32, 2, x->shape, x->tile));
    NNT_TRY(nnt_tensor_copy(x, e->tokens));
    NNT_TRY(nnt_layer_ensure(l, &e->out, NNT_FP32, 3, shape, tile));
    if (e->wpe)   /* max_seq 0: no position table */
        NNT_TRY(gl_retiled(l, e->wpe, rows_tile, &e->wpe_rows, &wpe));
    NNT_TRY(nnt_tensor_embedding(e->tokens, e->wte, p ? NULL : wpe, e->out));
    if (p)
        NNT_TRY(add_positions(l, e, x, p, wpe));
    if (e->scale != 0.0)
        NNT_TRY(nnt_tensor_scale(e->out, e->scale));
    NNT_TRY(add_noise(l, e));
    *y = e->out;
    return NNT_OK;
}

static int embedding_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    return embedding_forward_pos(l, x, nnt_layer_positions_of(l), y);
}

static const nnt_layer_vt embedding_vt;

int gl_embedding_forward_at(nnt_layer *l, nnt_tensor *x, int64_t past, nnt_tensor *positions,
                            nnt_tensor **y)
{
    embedding *e = l->impl;
    NNT_TRY(nnt_layer_check(l, "nnt_layer_forward"));
    if (l->vt != &embedding_vt)
        return nnt_fail(l->ctx, NNT_E_INVAL, "nnt_layer_forward: a %s layer takes no position "
                        "offset", l->vt->kind_name);
    if (positions || past == 0 || !e->wpe)   /* given positions, 0 .. T-1, or none */
        return embedding_forward_pos(l, x, positions, y);
    if (past < 0 || x->dtype != NNT_INT32 || x->ndim != 2 || past + x->shape[1] > e->wpe->shape[0])
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: an embedding layer at position "
                        "%lld takes int32 tokens (B, T) with %lld + T <= maxT = %lld",
                        (long long)past, (long long)past, (long long)e->wpe->shape[0]);
    NNT_TRY(check_ids(l, x, e->wte->shape[0]));
    NNT_TRY(narrow_table(l, e));
    int64_t T = x->shape[1], C = e->wte->shape[1];
    int64_t shape[3] = {x->shape[0], T, C}, tile[3] = {x->tile[0], x->tile[1], e->wte->tile[1]};
    int64_t rows[2] = {T, C}, rows_tile[2] = {x->tile[1], e->wte->tile[1]};
    NNT_TRY(nnt_layer_ensure(l, &e->tokens, NNT_INT32, 2, x->shape, x->tile));
    NNT_TRY(nnt_tensor_copy(x, e->tokens));
    NNT_TRY(nnt_layer_ensure(l, &e->out, NNT_FP32, 3, shape, tile));
    /* wpe rows past .. past + T - 1, in the input's T tiling */
    NNT_TRY(nnt_layer_ensure_placed(l, &e->pos_rows, NNT_FP32, 2, rows, rows_tile, 0));
    NNT_TRY(gl_copy_rows(e->wpe, 0, past, e->pos_rows, 0, T));
    NNT_TRY(nnt_tensor_embedding(e->tokens, e->wte, e->pos_rows, e->out));
    if (e->scale != 0.0)
        NNT_TRY(nnt_tensor_scale(e->out, e->scale));
    *y = e->out;
    return NNT_OK;
}

static int embedding_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    embedding *e = l->impl;
    nnt_tensor *dout = NULL;
    nnt_tensor *dwte = nnt_layer_grad_of(l, e->wte), *dwpe = NULL;   // NULL: frozen
    if (e->wpe)
        dwpe = nnt_layer_grad_of(l, e->wpe);
    *dx = NULL;   /* tokens have no gradient */
    if (!dwte && !dwpe)   /* both frozen: nothing to compute */
        return NNT_OK;
    NNT_TRY(gl_dy_like(l, dy, e->out, "nnt_layer_backward", &e->dy_cache, &dout));
    if (e->scale != 0.0) {   /* d (scale wte[t]) = scale dy */
        NNT_TRY(nnt_layer_ensure(l, &e->dscaled, NNT_FP32, dout->ndim, dout->shape, dout->tile));
        NNT_TRY(nnt_tensor_axpby(e->scale, dout, 0.0, e->dscaled));
        dout = e->dscaled;
    }
    if (!dwte) {   /* the op scatters into a table: a scratch one for a frozen table */
        NNT_TRY(nnt_layer_ensure_placed(l, &e->dwte_scratch, NNT_FP32, 2, e->wte->shape,
                                        e->wte->tile, 0));
        dwte = e->dwte_scratch;
        NNT_TRY(nnt_tensor_fill(dwte, 0.0));
    } else if (nnt_layer_grad_beta(l, dwte) == 0.0) {   /* dropped, not written by a tied head */
        NNT_TRY(nnt_tensor_fill(dwte, 0.0));
    }
    if (!dwpe)
        return nnt_tensor_embedding_backward(e->tokens, dout, dwte, NULL);
    int direct = has_tiling(e->wpe, (int64_t[2]){e->out->tile[1], e->out->tile[2]});
    if (e->packed) {   /* dwte as without positions; dwpe[positions] += dout (a scatter) */
        NNT_TRY(nnt_tensor_embedding_backward(e->tokens, dout, dwte, NULL));
        if (direct)
            return nnt_tensor_embedding_backward(e->pos, dout, dwpe, NULL);
    } else if (direct) {
        return nnt_tensor_embedding_backward(e->tokens, dout, dwte, dwpe);
    }
    /* position rows in the input's T tiling: accumulate apart, then add */
    NNT_TRY(nnt_layer_ensure_placed(l, &e->dwpe_rows, NNT_FP32, 2, e->wpe_rows->shape,
                                    e->wpe_rows->tile, 0));
    NNT_TRY(nnt_tensor_fill(e->dwpe_rows, 0.0));
    if (e->packed)
        NNT_TRY(nnt_tensor_embedding_backward(e->pos, dout, e->dwpe_rows, NULL));
    else
        NNT_TRY(nnt_tensor_embedding_backward(e->tokens, dout, dwte, e->dwpe_rows));
    return gl_add_into(l, e->dwpe_rows, dwpe, &e->tmp);
}

static void embedding_destroy(nnt_layer *l)
{
    embedding *e = l->impl;
    nnt_tensor *own[] = {e->tokens, e->wpe_rows, e->dwpe_rows, e->out, e->pos_rows,
                         e->dy_cache, e->tmp, e->dwte_scratch, e->dscaled, e->pos,
                         e->pos_out, e->noise};
    destroy_all(own, sizeof own / sizeof own[0]);
}

/* The token table's gradient is dropped (a tied head's backward, which runs first, writes
 * it with beta 0; otherwise the embedding's backward zero-fills it before adding); the
 * position table's, a scatter-add target, is zero-filled. */
static int embedding_clear_grad(nnt_layer *l)
{
    NNT_TRY(nnt_layer_drop_grads(l));
    if (l->nparams > 1) {
        if (l->params[1].grad)   /* "wpe.weight"; NULL: frozen */
            NNT_TRY(nnt_tensor_fill(l->params[1].grad, 0.0));
        l->params[1].grad_dropped = 0;
    }
    return NNT_OK;
}

static const nnt_layer_vt embedding_vt = {
    NNT_LAYER_EMBEDDING, "embedding", embedding_forward, embedding_backward,
    NULL, NULL, NULL, NULL, embedding_destroy, embedding_clear_grad, NULL, NULL};

int gl_embedding_new(nnt_ctx *ctx, int64_t vocab, int64_t max_seq, int64_t channels,
                     const nnt_tiling *tiling, const char *table_name, const char *fn,
                     nnt_layer **out)
{
    nnt_tiling t;
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &embedding_vt, sizeof(embedding), fn, &l));
    int rc = gl_tiling(ctx, tiling, fn, &t);
    if (rc == 0 && (vocab < 1 || max_seq < 0 || channels < 1))
        rc = nnt_fail(ctx, NNT_E_INVAL, "%s: vocab %lld and channels %lld must be >= 1, "
                      "max_seq %lld >= 0 (0: no position table)", fn, (long long)vocab,
                      (long long)channels, (long long)max_seq);
    embedding *e = l->impl;
    int64_t ct = gl_tile(t.channels, channels);
    int64_t wte_shape[2] = {vocab, channels}, wte_tile[2] = {gl_tile(t.vocab, vocab), ct};
    int64_t wpe_shape[2] = {max_seq, channels}, wpe_tile[2] = {gl_tile(t.seq, max_seq), ct};
    /* lm_head reads wte only; wpe stays NULL without a position table */
    if (rc == 0)
        rc = nnt_layer_new_param(l, table_name, 2, wte_shape, wte_tile, 1, NNT_INIT_NORMAL,
                                 &e->wte, NULL);
    if (rc == 0 && max_seq > 0)
        rc = nnt_layer_new_param(l, "wpe.weight", 2, wpe_shape, wpe_tile, 1, NNT_INIT_NORMAL,
                                 &e->wpe, NULL);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;
    return NNT_OK;
}

int gl_embedding_set_scale(nnt_layer *l, double scale)
{
    if (l->vt != &embedding_vt || !isfinite(scale))
        return nnt_fail(l->ctx, NNT_E_INVAL, "gl_embedding_set_scale: a %s layer, scale %g",
                        l->vt->kind_name, scale);
    ((embedding *)l->impl)->scale = scale == 1.0 ? 0.0 : scale;
    return NNT_OK;
}

/* The first embedding layer of l's tree, depth first (NULL: none). */
static nnt_layer *first_embedding(nnt_layer *l)
{
    if (l->vt == &embedding_vt)
        return l;
    nnt_layer *inner = l->vt->inner ? l->vt->inner(l) : NULL;
    if (inner && inner != l)
        return first_embedding(inner);
    for (int i = 0; i < l->nchildren; i++) {
        nnt_layer *e = first_embedding(l->children[i]);
        if (e)
            return e;
    }
    return NULL;
}

NNT_API int nnt_layer_set_neftune(nnt_layer *layer, double alpha, uint64_t seed)
{
    static const char fn[] = "nnt_layer_set_neftune";
    NNT_TRY(nnt_layer_check(layer, fn));
    nnt_layer *l = first_embedding(layer);
    if (!l)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: a %s layer has no embedding layer",
                        fn, layer->vt->kind_name);
    if (!(alpha >= 0.0) || !isfinite(alpha))
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: alpha %g (>= 0; 0: no noise)", fn, alpha);
    embedding *e = l->impl;
    e->noise_alpha = alpha, e->noise_seed = seed, e->noise_passes = 0;
    return NNT_OK;
}

void gl_embedding_noise_of(nnt_layer *l, double *alpha, uint64_t *seed)
{
    nnt_layer *emb = first_embedding(l);
    *alpha = emb ? ((embedding *)emb->impl)->noise_alpha : 0.0;
    *seed = emb ? ((embedding *)emb->impl)->noise_seed : 0;
}

NNT_API int nnt_layer_embedding_create(nnt_ctx *ctx, int64_t vocab, int64_t max_seq,
                                       int64_t channels, const nnt_tiling *tiling,
                                       nnt_layer **out)
{
    const char *fn = "nnt_layer_embedding_create";
    nnt_layer *l = NULL;
    NNT_TRY(gl_embedding_new(ctx, vocab, max_seq, channels, tiling, "wte.weight", fn, &l));
    return nnt_layer_finish(l, 0, out);
}

/* ---- layernorm and rmsnorm --------------------------------------------------------------
 * One leaf, two kinds: LayerNorm (weight and bias; mean and rstd saved) and RMSNorm (weight
 * only; rstd saved). The kind is the vtable's. */

typedef struct norm {
    double eps;
    int plus_one;                   /* RMSNorm scaled by 1 + weight (Gemma)                 */
    nnt_tensor *w1;                 // (C) 1 + w, the norm's scale with plus_one
    nnt_tensor *w, *b;              // (C) tile channels; b NULL for RMSNorm (gradients:
                                    // nnt_layer_grad_of)
    nnt_tensor *x;                  // the input of the last forward (not owned)
    nnt_tensor *y, *dx;             // x's shape and tiling
    nnt_tensor *mean, *rstd;        // (...) x's leading tiling; mean NULL for RMSNorm
    nnt_tensor *dy_cache;
    nnt_tensor *scratch[2];         // (C) what the op adds a frozen weight's / bias's gradient to
} norm;

static int is_rms(const nnt_layer *l) { return l->vt->kind == NNT_LAYER_RMSNORM; }

static int norm_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    norm *n = l->impl;
    NNT_TRY(check_rows(l, x, 2, n->w->shape[0]));
    NNT_TRY(nnt_layer_ensure(l, &n->y, NNT_FP32, x->ndim, x->shape, x->tile));
    NNT_TRY(nnt_layer_ensure(l, &n->rstd, NNT_FP32, x->ndim - 1, x->shape, x->tile));
    if (is_rms(l)) {
        nnt_tensor *g = n->w;
        if (n->plus_one)
            NNT_TRY(gl_plus_one(l, n->w, &n->w1, &g));
        NNT_TRY(nnt_tensor_rmsnorm(x, g, n->eps, n->y, n->rstd));
    } else {
        NNT_TRY(nnt_layer_ensure(l, &n->mean, NNT_FP32, x->ndim - 1, x->shape, x->tile));
        NNT_TRY(nnt_tensor_layernorm(x, n->w, n->b, n->eps, n->y, n->mean, n->rstd));
    }
    n->x = x;
    *y = n->y;
    return NNT_OK;
}

static int norm_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    norm *n = l->impl;
    nnt_tensor *d = NULL;
    NNT_TRY(gl_dy_like(l, dy, n->y, "nnt_layer_backward", &n->dy_cache, &d));
    NNT_TRY(nnt_layer_ensure(l, &n->dx, NNT_FP32, n->x->ndim, n->x->shape, n->x->tile));
    /* a frozen weight or bias: the op's sum goes to a scratch vector, dropped */
    nnt_tensor *dgamma[2] = {nnt_layer_grad_of(l, n->w), n->b ? nnt_layer_grad_of(l, n->b) : NULL};
    for (int i = 0; i < (n->b ? 2 : 1); i++) {
        if (dgamma[i])
            continue;
        NNT_TRY(nnt_layer_ensure_placed(l, &n->scratch[i], NNT_FP32, 1, n->w->shape, n->w->tile,
                                        0));
        NNT_TRY(nnt_tensor_fill(n->scratch[i], 0.0));
        dgamma[i] = n->scratch[i];
    }
    if (is_rms(l))   /* d(1 + w) = dw */
        NNT_TRY(nnt_tensor_rmsnorm_backward(n->x, n->plus_one ? n->w1 : n->w, n->rstd, d,
                                            n->dx, dgamma[0]));
    else
        NNT_TRY(nnt_tensor_layernorm_backward(n->x, n->w, n->mean, n->rstd, d, n->dx, dgamma[0],
                                              dgamma[1]));
    *dx = n->dx;
    return NNT_OK;
}

static void norm_destroy(nnt_layer *l)
{
    norm *n = l->impl;
    nnt_tensor *own[] = {n->y, n->dx, n->mean, n->rstd, n->dy_cache, n->scratch[0],
                         n->scratch[1], n->w1};
    destroy_all(own, sizeof own / sizeof own[0]);
}

static const nnt_layer_vt layernorm_vt = {
    NNT_LAYER_LAYERNORM, "layernorm", norm_forward, norm_backward,
    NULL, NULL, NULL, NULL, norm_destroy, NULL, NULL, NULL};
static const nnt_layer_vt rmsnorm_vt = {
    NNT_LAYER_RMSNORM, "rmsnorm", norm_forward, norm_backward,
    NULL, NULL, NULL, NULL, norm_destroy, NULL, NULL, NULL};

/* LayerNorm takes eps >= 0, RMSNorm eps > 0 (as their ops). */
static int norm_new(nnt_ctx *ctx, const nnt_layer_vt *vt, int64_t channels, double eps,
                    int plus_one, const nnt_tiling *tiling, const char *fn, nnt_layer **out)
{
    nnt_tiling t;
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, vt, sizeof(norm), fn, &l));
    int rms = is_rms(l);
    int rc = gl_tiling(ctx, tiling, fn, &t);
    if (rc == 0 && (channels < 1 || !(rms ? eps > 0.0 : eps >= 0.0) || !isfinite(eps)))
        rc = nnt_fail(ctx, NNT_E_INVAL, "%s: channels %lld must be >= 1 and eps %g finite "
                      "and %s 0", fn, (long long)channels, eps, rms ? ">" : ">=");
    norm *n = l->impl;
    int64_t shape[1] = {channels}, tile[1] = {gl_tile(t.channels, channels)};
    n->eps = eps;
    n->plus_one = plus_one && rms;
    if (rc == 0)   /* a scale of 1: weight 1, or 0 under 1 + weight */
        rc = nnt_layer_new_param(l, "weight", 1, shape, tile, 0,
                                 n->plus_one ? NNT_INIT_ZERO : NNT_INIT_ONE, &n->w, NULL);
    if (rc == 0 && !rms)
        rc = nnt_layer_new_param(l, "bias", 1, shape, tile, 0, NNT_INIT_ZERO, &n->b, NULL);
    if (rc)
        return abandon(l, rc);
    *out = l;
    return NNT_OK;
}

int gl_layernorm_new(nnt_ctx *ctx, int64_t channels, double eps, const nnt_tiling *tiling,
                     const char *fn, nnt_layer **out)
{
    return norm_new(ctx, &layernorm_vt, channels, eps, 0, tiling, fn, out);
}

int gl_rmsnorm_new(nnt_ctx *ctx, int64_t channels, double eps, const nnt_tiling *tiling,
                   const char *fn, nnt_layer **out)
{
    return norm_new(ctx, &rmsnorm_vt, channels, eps, 0, tiling, fn, out);
}

int gl_rmsnorm_new_ex(nnt_ctx *ctx, int64_t channels, double eps, int plus_one,
                      const nnt_tiling *tiling, const char *fn, nnt_layer **out)
{
    return norm_new(ctx, &rmsnorm_vt, channels, eps, plus_one, tiling, fn, out);
}

int gl_plus_one(nnt_layer *l, nnt_tensor *w, nnt_tensor **cache, nnt_tensor **out)
{
    NNT_TRY(nnt_layer_ensure(l, cache, NNT_FP32, w->ndim, w->shape, w->tile));
    NNT_TRY(nnt_tensor_fill(*cache, 1.0));
    NNT_TRY(nnt_tensor_axpby(1.0, w, 1.0, *cache));   /* 1 + w, rounded once */
    *out = *cache;
    return NNT_OK;
}

NNT_API int nnt_layer_layernorm_create(nnt_ctx *ctx, int64_t channels, double eps,
                                       const nnt_tiling *tiling, nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(gl_layernorm_new(ctx, channels, eps, tiling, "nnt_layer_layernorm_create", &l));
    return nnt_layer_finish(l, 0, out);
}

NNT_API int nnt_layer_rmsnorm_create(nnt_ctx *ctx, int64_t channels, double eps,
                                     const nnt_tiling *tiling, nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(gl_rmsnorm_new(ctx, channels, eps, tiling, "nnt_layer_rmsnorm_create", &l));
    return nnt_layer_finish(l, 0, out);
}

/* ---- linear --------------------------------------------------------------------------- */

/* the fused activations of a linear layer's output */
#define GELUS (NNT_LINEAR_GELU | NNT_LINEAR_GELU_ERF)

typedef struct linear {
    unsigned flags;
    nnt_tensor *w;                  // (out, in) tiles (out_tile, in_tile)
    nnt_tensor *w16;                // w's bf16 copy under NNT_PRECISION_BF16, else NULL
    nnt_tensor *b;                  // (out) or NULL (gradients: nnt_layer_grad_of)
    gl_lora *lora;                  // its LoRA adapter, or NULL
    int no_lora;                    // takes none (part of its parent's fused module)
    nnt_tensor *x;                  // the input of the last forward (not owned)
    nnt_tensor *xin;                // x, or x_cache: x with the weight's in tiling
    nnt_tensor *x_cache;
    nnt_tensor *pre;                // (..., out) before the GELU
    nnt_tensor *y;                  // (..., out)
    nnt_tensor *dpre;               // (..., out) d loss / d pre (GELU)
    nnt_tensor *dxin, *dx;          // xin's and x's layouts
    nnt_tensor *dy_cache;
} linear;

static int linear_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    linear *n = l->impl;
    int64_t in = n->w->shape[1], outf = n->w->shape[0], shape[NNT_MAX_DIMS], tile[NNT_MAX_DIMS];
    NNT_TRY(check_rows(l, x, 2, in));
    rows_with(x, in, n->w->tile[1], shape, tile);
    NNT_TRY(gl_retiled(l, x, tile, &n->x_cache, &n->xin));
    n->x = x;
    rows_with(x, outf, n->w->tile[0], shape, tile);
    NNT_TRY(nnt_layer_ensure(l, &n->y, NNT_FP32, x->ndim, shape, tile));
    *y = n->y;
    nnt_tensor *w = NULL;
    NNT_TRY(gl_weight_operand(l, n->w, &n->w16, &w));
    if (n->lora)   /* u = x A^T */
        NNT_TRY(gl_lora_begin(l, n->lora, n->xin));
    if (!(n->flags & GELUS)) {   /* y (..., out) = x W^T (+ b) (+ s u B^T) */
        NNT_TRY(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, n->xin, w, 0.0, n->y, 1, 0,
                                   n->b ? NNT_EPILOGUE_BIAS : NNT_EPILOGUE_NONE, n->b, NULL));
        return n->lora ? gl_lora_part(l, n->lora, 0, n->y, 1.0, w) : NNT_OK;
    }
    NNT_TRY(nnt_layer_ensure(l, &n->pre, NNT_FP32, x->ndim, shape, tile));
    if (n->lora && n->lora->dora) {   /* pre = DoRA's output of x W^T + b, y = gelu(pre) */
        NNT_TRY(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, n->xin, w, 0.0, n->pre, 1, 0,
                                   n->b ? NNT_EPILOGUE_BIAS : NNT_EPILOGUE_NONE, n->b, NULL));
        NNT_TRY(gl_lora_part(l, n->lora, 0, n->pre, 1.0, w));
        return n->flags & NNT_LINEAR_GELU_ERF ? nnt_tensor_gelu_erf(n->pre, n->y)
                                              : nnt_tensor_gelu(n->pre, n->y);
    }
    /* pre (..., out) = (s u B^T +) x W^T (+ b), y = gelu(pre), in one pass: the adapter's
     * product first, the base product adds to it and applies the GELU */
    if (n->lora)
        NNT_TRY(gl_lora_part(l, n->lora, 0, n->pre, 0.0, w));
    return nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, n->xin, w, n->lora ? 1.0 : 0.0,
                              n->pre, 1, 0,
                              n->flags & NNT_LINEAR_GELU_ERF ? NNT_EPILOGUE_BIAS_GELU_ERF
                                                             : NNT_EPILOGUE_BIAS_GELU,
                              n->b, n->y);
}

static int linear_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    linear *n = l->impl;
    nnt_tensor *g = NULL;   // (..., out) d loss / d (x W^T + b)
    NNT_TRY(gl_dy_like(l, dy, n->y, "nnt_layer_backward", &n->dy_cache, &g));
    if (n->flags & GELUS) {
        NNT_TRY(nnt_layer_ensure(l, &n->dpre, NNT_FP32, n->y->ndim, n->y->shape, n->y->tile));
        NNT_TRY(n->flags & NNT_LINEAR_GELU_ERF ? nnt_tensor_gelu_erf_backward(n->pre, g, n->dpre)
                                               : nnt_tensor_gelu_backward(n->pre, g, n->dpre));
        g = n->dpre;
    }
    /* the adapter's dB, du; the gradient the base products take (DoRA's: scaled) */
    nnt_tensor *gw = g;
    if (n->lora)
        NNT_TRY(gl_lora_backward_part(l, n->lora, 0, g, &gw));
    /* dW (out, in) += gw^T x over all rows; db += sum of g over rows; none when frozen */
    nnt_tensor *dw = nnt_layer_grad_of(l, n->w), *db = n->b ? nnt_layer_grad_of(l, n->b) : NULL;
    if (dw)
        NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, gw, n->xin,
                                nnt_layer_grad_beta(l, dw), dw, g->ndim - 1, 0));
    if (db)
        NNT_TRY(nnt_tensor_sum_leading(1.0, g, nnt_layer_grad_beta(l, db), db));
    /* dx (..., in) = gw W (+ the adapter's), in xin's tiling, then x's */
    nnt_tensor **into = n->xin == n->x ? &n->dx : &n->dxin;
    NNT_TRY(nnt_layer_ensure(l, into, NNT_FP32, n->xin->ndim, n->xin->shape, n->xin->tile));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, gw, gl_weight_read(n->w, n->w16), 0.0,
                            *into, 1, 0));
    if (n->lora)
        NNT_TRY(gl_lora_backward_finish(l, n->lora, *into));
    if (into == &n->dxin) {
        NNT_TRY(nnt_layer_ensure(l, &n->dx, NNT_FP32, n->x->ndim, n->x->shape, n->x->tile));
        NNT_TRY(nnt_tensor_copy(n->dxin, n->dx));
    }
    *dx = n->dx;
    return NNT_OK;
}

static void linear_destroy(nnt_layer *l)
{
    linear *n = l->impl;
    nnt_tensor *own[] = {n->x_cache, n->pre, n->y, n->dpre, n->dxin, n->dx, n->dy_cache, n->w16};
    destroy_all(own, sizeof own / sizeof own[0]);
    gl_lora_free(l, n->lora);
    n->lora = NULL;
}

const char *const *gl_linear_lora_modules(const nnt_layer *l)
{
    static const char *const self[] = {"", NULL};
    return ((const linear *)l->impl)->no_lora ? NULL : self;
}

void gl_linear_no_lora(nnt_layer *l)
{
    ((linear *)l->impl)->no_lora = 1;
}

nnt_tensor *gl_linear_weight(nnt_layer *l)
{
    return ((linear *)l->impl)->w;
}

nnt_tensor *gl_linear_input(nnt_layer *l)
{
    return ((linear *)l->impl)->xin;
}

nnt_tensor *gl_linear_operand(nnt_layer *l)
{
    linear *n = l->impl;
    return gl_weight_read(n->w, n->w16);
}

nnt_tensor *gl_linear_bias(nnt_layer *l)
{
    return ((linear *)l->impl)->b;
}

int gl_linear_lora_attach(nnt_layer *l, int64_t rank, double scale)
{
    linear *n = l->impl;
    if (n->lora)
        return nnt_fail(l->ctx, NNT_E_INVAL, "nnt: this linear layer has a LoRA adapter already");
    gl_lora_spec sp = {"", rank, scale, 1, {n->w->shape[1]}, {n->w->tile[1]}, 1, {1},
                       {{n->w->shape[0]}}, {{n->w->tile[0]}}, {NULL}, {n->w}, {n->b}, {l}};
    return gl_lora_new(l, &sp, &n->lora);
}

gl_lora *gl_linear_lora_of(nnt_layer *l)
{
    return ((linear *)l->impl)->lora;
}

void gl_linear_lora_remove(nnt_layer *l)
{
    linear *n = l->impl;
    gl_lora_free(l, n->lora);
    n->lora = NULL;
}

int gl_linear_lora_merge(nnt_layer *l)
{
    linear *n = l->impl;
    if (!n->lora)
        return NNT_OK;
    NNT_TRY(gl_lora_merge(l, n->lora, 0, n->w));
    gl_lora_free(l, n->lora);
    n->lora = NULL;
    return NNT_OK;
}

static const nnt_layer_vt linear_vt = {
    NNT_LAYER_LINEAR, "linear", linear_forward, linear_backward,
    NULL, NULL, NULL, NULL, linear_destroy, nnt_layer_drop_grads, NULL, NULL};

int gl_linear_new(nnt_ctx *ctx, int64_t in, int64_t out_features, unsigned flags,
                  int64_t in_tile, int64_t out_tile, const char *fn, nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &linear_vt, sizeof(linear), fn, &l));
    int rc = NNT_OK;
    if (in < 1 || out_features < 1 || (flags & ~(NNT_LINEAR_BIAS | GELUS)) ||
        (flags & GELUS) == GELUS)
        rc = nnt_fail(ctx, NNT_E_INVAL, "%s: in %lld and out %lld must be >= 1, flags 0x%x "
                      "only NNT_LINEAR_BIAS and one of NNT_LINEAR_GELU, NNT_LINEAR_GELU_ERF", fn,
                      (long long)in, (long long)out_features, flags);
    linear *n = l->impl;
    n->flags = flags;
    int64_t wshape[2] = {out_features, in}, wtile[2] = {out_tile, in_tile};
    if (rc == 0)
        rc = nnt_layer_new_param(l, "weight", 2, wshape, wtile, 1, NNT_INIT_NORMAL, &n->w,
                                 NULL);
    if (rc == 0)   /* known from the start: the release window counts it */
        rc = nnt_layer_note_weight_read(l, n->w, &n->w16);
    if (rc == 0 && (flags & NNT_LINEAR_BIAS))
        rc = nnt_layer_new_param(l, "bias", 1, wshape, wtile, 0, NNT_INIT_ZERO, &n->b, NULL);
    if (rc)
        return abandon(l, rc);
    *out = l;
    return NNT_OK;
}

NNT_API int nnt_layer_linear_create(nnt_ctx *ctx, int64_t in, int64_t out_features,
                                    unsigned flags, const nnt_tiling *tiling, nnt_layer **out)
{
    const char *fn = "nnt_layer_linear_create";
    nnt_tiling t;
    nnt_layer *l = NULL;
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    NNT_TRY(gl_tiling(ctx, tiling, fn, &t));
    NNT_TRY(gl_linear_new(ctx, in, out_features, flags, gl_tile(t.channels, in),
                      gl_tile(t.hidden, out_features), fn, &l));
    return nnt_layer_finish(l, 0, out);
}

/* ---- lm_head -------------------------------------------------------------------------- */

typedef struct lm_head {
    nnt_layer *emb;                 // the embedding whose wte is used (not owned)
    nnt_tensor *x;                  // the input of the last forward (not owned)
    nnt_tensor *xin, *x_cache;      // x with wte's C tiling
    nnt_tensor *wte16;              // wte's bf16 copy under NNT_PRECISION_BF16, else NULL
    nnt_tensor *y;                  // (..., V)
    nnt_tensor *dxin, *dx;
    nnt_tensor *dy_cache;
} lm_head;

static int lm_head_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    lm_head *h = l->impl;
    NNT_TRY(nnt_layer_check(h->emb, "nnt_layer_forward (the lm_head's embedding)"));
    nnt_tensor *wte = ((embedding *)h->emb->impl)->wte;   // (V, C)
    int64_t shape[NNT_MAX_DIMS], tile[NNT_MAX_DIMS];
    NNT_TRY(check_rows(l, x, 2, wte->shape[1]));
    rows_with(x, wte->shape[1], wte->tile[1], shape, tile);
    NNT_TRY(gl_retiled(l, x, tile, &h->x_cache, &h->xin));
    h->x = x;
    rows_with(x, wte->shape[0], wte->tile[0], shape, tile);
    NNT_TRY(nnt_layer_ensure(l, &h->y, NNT_FP32, x->ndim, shape, tile));
    /* logits (..., V) = x (..., C) wte^T */
    nnt_tensor *w = NULL;
    NNT_TRY(gl_weight_operand(l, wte, &h->wte16, &w));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 1.0, h->xin, w, 0.0, h->y, 1, 0));
    *y = h->y;
    return NNT_OK;
}

static int lm_head_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    lm_head *h = l->impl;
    NNT_TRY(nnt_layer_check(h->emb, "nnt_layer_backward (the lm_head's embedding)"));
    embedding *e = h->emb->impl;
    nnt_tensor *g = NULL;
    NNT_TRY(gl_dy_like(l, dy, h->y, "nnt_layer_backward", &h->dy_cache, &g));
    /* dwte (V, C) += dlogits^T x, added to the embedding's own gradient (none: frozen) */
    nnt_tensor *dwte = nnt_layer_grad_of(h->emb, e->wte);
    if (dwte)
        NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, g, h->xin,
                                nnt_layer_grad_beta(h->emb, dwte), dwte, g->ndim - 1, 0));
    nnt_tensor **into = h->xin == h->x ? &h->dx : &h->dxin;
    NNT_TRY(nnt_layer_ensure(l, into, NNT_FP32, h->xin->ndim, h->xin->shape, h->xin->tile));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, g, gl_weight_read(e->wte, h->wte16),
                            0.0, *into, 1, 0));
    if (into == &h->dxin) {
        NNT_TRY(nnt_layer_ensure(l, &h->dx, NNT_FP32, h->x->ndim, h->x->shape, h->x->tile));
        NNT_TRY(nnt_tensor_copy(h->dxin, h->dx));
    }
    *dx = h->dx;
    return NNT_OK;
}

static void lm_head_destroy(nnt_layer *l)
{
    lm_head *h = l->impl;
    nnt_tensor *own[] = {h->x_cache, h->y, h->dxin, h->dx, h->dy_cache, h->wte16};
    destroy_all(own, sizeof own / sizeof own[0]);
}

static const nnt_layer_vt lm_head_vt = {
    NNT_LAYER_LM_HEAD, "lm_head", lm_head_forward, lm_head_backward,
    NULL, NULL, NULL, NULL, lm_head_destroy, NULL, NULL, NULL};

int gl_lm_head_new(nnt_layer *emb, const char *fn, nnt_layer **out)
{
    NNT_TRY(nnt_layer_check(emb, fn));
    if (emb->vt != &embedding_vt)
        return nnt_fail(emb->ctx, NNT_E_INVAL, "%s: the layer to tie is a %s layer, not an "
                        "embedding", fn, emb->vt->kind_name);
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(emb->ctx, &lm_head_vt, sizeof(lm_head), fn, &l));
    lm_head *h = l->impl;
    h->emb = emb;
    /* known from the start: the release window counts the tied table */
    int rc = nnt_layer_note_weight_read(l, ((embedding *)emb->impl)->wte, &h->wte16);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;
    return NNT_OK;
}

/* Whether an LM head of the subtree l is tied to the embedding emb. */
static int head_tied_to(const nnt_layer *l, const nnt_layer *emb)
{
    if (l->vt == &lm_head_vt && ((const lm_head *)l->impl)->emb == emb)
        return 1;
    for (int c = 0; c < l->nchildren; c++)
        if (head_tied_to(l->children[c], emb))
            return 1;
    return 0;
}

/* gl_lookup_tables over the subtree l of tree, from the n found so far; the new n */
static int lookup_tables_in(const nnt_layer *tree, const nnt_layer *l, const nnt_tensor **tables,
                            int cap, int n)
{
    if (l->vt == &embedding_vt) {
        const embedding *e = l->impl;
        const nnt_tensor *found[2] = {e->wpe, head_tied_to(tree, l) ? NULL : e->wte};
        for (int i = 0; i < 2; i++)
            if (found[i] && n++ < cap)
                tables[n - 1] = found[i];
    }
    for (int c = 0; c < l->nchildren; c++)
        n = lookup_tables_in(tree, l->children[c], tables, cap, n);
    return n;
}

int gl_lookup_tables(const nnt_layer *tree, const nnt_tensor **tables, int cap)
{
    return lookup_tables_in(tree, tree, tables, cap, 0);
}

NNT_API int nnt_layer_lm_head_create(nnt_layer *emb, nnt_layer **out)
{
    const char *fn = "nnt_layer_lm_head_create";
    if (out)
        *out = NULL;
    NNT_TRY(nnt_layer_check(emb, fn));
    if (!out)
        return nnt_fail(emb->ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    return gl_lm_head_new(emb, fn, out);
}

/* ---- softcap: y = tanh(x / cap) cap (Gemma 2's final logits) ---------------------------- */

typedef struct softcap {
    double cap;
    nnt_tensor *x;                  // the input of the last forward (not owned)
    nnt_tensor *y, *dx, *dy_cache;  // x's layout
} softcap;

static int softcap_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    softcap *c = l->impl;
    NNT_TRY(nnt_layer_ensure(l, &c->y, NNT_FP32, x->ndim, x->shape, x->tile));
    NNT_TRY(nnt_tensor_softcap(x, c->cap, c->y));
    c->x = x;
    *y = c->y;
    return NNT_OK;
}

static int softcap_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    softcap *c = l->impl;
    nnt_tensor *g = NULL;
    NNT_TRY(gl_dy_like(l, dy, c->y, "nnt_layer_backward", &c->dy_cache, &g));
    NNT_TRY(nnt_layer_ensure(l, &c->dx, NNT_FP32, c->x->ndim, c->x->shape, c->x->tile));
    NNT_TRY(nnt_tensor_softcap_backward(c->x, c->cap, g, c->dx));
    *dx = c->dx;
    return NNT_OK;
}

static void softcap_destroy(nnt_layer *l)
{
    softcap *c = l->impl;
    nnt_tensor *own[] = {c->y, c->dx, c->dy_cache};
    destroy_all(own, sizeof own / sizeof own[0]);
}

static const nnt_layer_vt softcap_vt = {
    NNT_LAYER_SOFTCAP, "softcap", softcap_forward, softcap_backward,
    NULL, NULL, NULL, NULL, softcap_destroy, NULL, NULL, NULL};

int gl_softcap_new(nnt_ctx *ctx, double cap, const char *fn, nnt_layer **out)
{
    if (!(cap > 0.0) || !isfinite(cap))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: soft-cap %g must be finite and > 0", fn, cap);
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &softcap_vt, sizeof(softcap), fn, &l));
    ((softcap *)l->impl)->cap = cap;
    *out = l;
    return NNT_OK;
}

/* ---- scale: y = x / divisor in place (Granite's logits) ------------------------------------ */

typedef struct scale {
    double divisor;
    nnt_tensor *dy_cache;           // dy in the layout of the last forward's x, when other
    nnt_tensor *x;                  // the input (and output) of the last forward (not owned)
} scale;

static int scale_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    scale *s = l->impl;
    NNT_TRY(nnt_tensor_scale(x, 1.0 / s->divisor));
    s->x = x;
    *y = x;
    return NNT_OK;
}

static int scale_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    scale *s = l->impl;
    nnt_tensor *g = NULL;
    NNT_TRY(gl_dy_like(l, dy, s->x, "nnt_layer_backward", &s->dy_cache, &g));
    NNT_TRY(nnt_tensor_scale(g, 1.0 / s->divisor));
    *dx = g;
    return NNT_OK;
}

static void scale_destroy(nnt_layer *l)
{
    nnt_tensor_destroy(((scale *)l->impl)->dy_cache);
}

static const nnt_layer_vt scale_vt = {
    NNT_LAYER_SCALE, "scale", scale_forward, scale_backward,
    NULL, NULL, NULL, NULL, scale_destroy, NULL, NULL, NULL};

int gl_scale_new(nnt_ctx *ctx, double divisor, const char *fn, nnt_layer **out)
{
    if (!(divisor > 0.0) || !isfinite(divisor))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: divisor %g must be finite and > 0", fn, divisor);
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &scale_vt, sizeof(scale), fn, &l));
    ((scale *)l->impl)->divisor = divisor;
    *out = l;
    return NNT_OK;
}

/* ---- cross_entropy -------------------------------------------------------------------- */

typedef struct xent {
    int32_t ignore;
    int have_targets;               /* set_targets gave targets (not NULL)                */
    int32_t *ids;                   /* host copy of the targets                           */
    int64_t nvalid;                 /* targets != ignore                                  */
    nnt_tensor *targets;            /* device copy, the caller's tiling                  */
    int with_loss;                  /* the last forward computed losses                   */
    int64_t fwd_nvalid;
    double divisor;                 /* nnt_layer_set_targets_ex's (0: nvalid)             */
    double fwd_divisor;             /* what the last forward's loss is divided by         */
    int loss_ready;
    double loss;
    nnt_tensor *logits;             // (..., V) input of the last forward (not owned)
    nnt_tensor *fwd_targets;        // (...) int32, logits' leading tiling
    nnt_tensor *losses, *lse;       // (...)
    nnt_tensor *dlogits;            // (..., V); unused in place
    nnt_tensor *weights;            // (...) nnt_layer_set_target_weights', logits' layout
    int weighted;                   /* the backward multiplies each row by its weight      */
    int in_place;                   /* the backward writes the gradient over the logits
                                       (gl_cross_entropy_in_place)                      */
    double smoothing;               /* label smoothing epsilon (nnt_layer_set_label_smoothing) */
    double fwd_smoothing;           /* the last forward's, for its backward              */
} xent;

/* A loss layer's targets t (int32, readable) copied to the host: *ids malloc'd, n of them. */
static int targets_to_host(nnt_layer *l, nnt_tensor *t, int32_t **ids, int64_t *n)
{
    const char *fn = "nnt_layer_set_targets";
    NNT_TRY(nnt_tensor_check_readable(t, fn));
    if (t->dtype != NNT_INT32)
        return nnt_fail(l->ctx, NNT_E_SHAPE, "%s: targets must be int32", fn);
    *n = nnt_box_numel(t->ndim, t->shape);
    *ids = malloc((size_t)*n * sizeof **ids);
    if (!*ids)
        return nnt_fail(l->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    int rc = nnt_tensor_copy_to_host(t, *ids, (size_t)*n * sizeof **ids);
    if (rc) {
        free(*ids);
        *ids = NULL;
    }
    return rc;
}

static int xent_set_targets(nnt_layer *l, nnt_tensor *t)
{
    xent *c = l->impl;
    if (!t) {
        c->have_targets = 0;
        return NNT_OK;
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    NNT_TRY(targets_to_host(l, t, &ids, &n));
    int rc = nnt_layer_ensure(l, &c->targets, NNT_INT32, t->ndim, t->shape, t->tile);
    if (rc == 0)
        rc = nnt_tensor_copy(t, c->targets);
    if (rc) {
        free(ids);
        return rc;
    }
    free(c->ids);
    c->ids = ids;
    c->nvalid = 0;
    for (int64_t i = 0; i < n; i++)
        c->nvalid += ids[i] != c->ignore;
    c->divisor = nnt_layer_targets_divisor;   /* nnt_layer_set_targets_ex's, else 0 */
    c->have_targets = 1;
    c->weighted = 0;   /* new targets: weights of the old ones no longer apply */
    return NNT_OK;
}

/* NNT_E_SHAPE / NNT_E_INVAL unless the targets fit logits (..., V). */
static int xent_check_targets(nnt_layer *l, nnt_tensor *x)
{
    xent *c = l->impl;
    nnt_tensor *t = c->targets;
    int fits = t->ndim == x->ndim - 1;
    for (int d = 0; fits && d < t->ndim; d++)
        fits = t->shape[d] == x->shape[d];
    if (!fits)
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: targets (%d dims) must have "
                        "the leading shape of the logits (%d dims)", t->ndim, x->ndim);
    int64_t n = 1, V = x->shape[x->ndim - 1];
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    for (int64_t i = 0; i < n; i++)
        if (c->ids[i] != c->ignore && (c->ids[i] < 0 || c->ids[i] >= V))
            return nnt_fail(l->ctx, NNT_E_INVAL, "nnt_layer_forward: target %d at position "
                            "%lld is outside [0, %lld) and not the ignore index %d",
                            (int)c->ids[i], (long long)i, (long long)V, (int)c->ignore);
    return NNT_OK;
}

static int xent_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    xent *c = l->impl;
    if (x->dtype != NNT_FP32 || x->ndim < 2)
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: a cross_entropy layer takes "
                        "fp32 logits (..., V) with at least 2 dims");
    c->with_loss = 0;
    c->loss_ready = 0;
    if (!c->have_targets) {   /* no targets: the logits pass through */
        *y = x;
        return NNT_OK;
    }
    NNT_TRY(xent_check_targets(l, x));
    int nd = x->ndim - 1;
    NNT_TRY(nnt_layer_ensure(l, &c->fwd_targets, NNT_INT32, nd, x->shape, x->tile));
    NNT_TRY(nnt_tensor_copy(c->targets, c->fwd_targets));
    NNT_TRY(nnt_layer_ensure(l, &c->losses, NNT_FP32, nd, x->shape, x->tile));
    NNT_TRY(nnt_layer_ensure(l, &c->lse, NNT_FP32, nd, x->shape, x->tile));
    NNT_TRY(nnt_tensor_cross_entropy_smoothed(x, c->fwd_targets, c->ignore, c->smoothing,
                                              c->losses, c->lse));
    c->fwd_smoothing = c->smoothing;
    c->logits = x;
    c->fwd_nvalid = c->nvalid;
    c->fwd_divisor = c->divisor > 0 ? c->divisor : (double)c->nvalid;
    c->with_loss = 1;
    *y = c->losses;
    return NNT_OK;
}

/* nnt_layer_loss on a loss layer whose last forward had no targets. */
static int no_loss_yet(nnt_layer *l)
{
    return nnt_fail(l->ctx, NNT_E_STATE, "nnt_layer_loss: no forward with targets yet "
                    "(nnt_layer_set_targets, then nnt_layer_forward)");
}

static int xent_loss(nnt_layer *l, double *loss)
{
    xent *c = l->impl;
    if (!c->with_loss)
        return no_loss_yet(l);
    if (!c->loss_ready) {
        int64_t n = 1;
        for (int d = 0; d < c->losses->ndim; d++)
            n *= c->losses->shape[d];
        float *v = malloc((size_t)n * sizeof *v);
        if (!v)
            return nnt_fail(l->ctx, NNT_E_NOMEM, "nnt_layer_loss: out of memory");
        int rc = nnt_tensor_copy_to_host(c->losses, v, (size_t)n * sizeof *v);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++)
            sum += v[i];   /* ignored positions hold 0 */
        free(v);
        NNT_TRY(rc);
        c->loss = c->fwd_nvalid ? sum / c->fwd_divisor : 0.0;
        c->loss_ready = 1;
    }
    *loss = c->loss;
    return NNT_OK;
}

static int xent_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    xent *c = l->impl;
    (void)dy;   /* NULL: the framework refuses dy for a layer with targets */
    if (!c->with_loss)
        return nnt_fail(l->ctx, NNT_E_STATE, "nnt_layer_backward: the last forward of this "
                        "cross_entropy layer had no targets");
    nnt_tensor *x = c->logits;
    double scale = c->fwd_nvalid ? 1.0 / c->fwd_divisor : 0.0;
    if (!c->in_place)
        NNT_TRY(nnt_layer_ensure(l, &c->dlogits, NNT_FP32, x->ndim, x->shape, x->tile));
    nnt_tensor *dlogits = c->in_place ? x : c->dlogits;   // (..., V)
    NNT_TRY(nnt_tensor_cross_entropy_smoothed_backward(x, c->fwd_targets, c->ignore, c->lse,
                                                       c->fwd_smoothing, scale,
                                                       c->weighted ? c->weights : NULL,
                                                       dlogits));
    *dx = dlogits;
    return NNT_OK;
}

/* A loss layer's vt.has_targets: it always takes targets (dy is refused). */
static int takes_targets(const nnt_layer *l)
{
    (void)l;
    return 1;
}

static void xent_destroy(nnt_layer *l)
{
    xent *c = l->impl;
    nnt_tensor *own[] = {c->targets, c->fwd_targets, c->losses, c->lse, c->dlogits, c->weights};
    destroy_all(own, sizeof own / sizeof own[0]);
    free(c->ids);
}

static const nnt_layer_vt xent_vt = {
    NNT_LAYER_CROSS_ENTROPY, "cross_entropy", xent_forward, xent_backward,
    xent_set_targets, xent_loss, takes_targets, NULL, xent_destroy, NULL, NULL, NULL};

int gl_cross_entropy_has_targets(const nnt_layer *l)
{
    return l->vt == &xent_vt && ((const xent *)l->impl)->have_targets;
}

void gl_cross_entropy_in_place(nnt_layer *l)
{
    if (l->vt == &xent_vt)
        ((xent *)l->impl)->in_place = 1;
}

/* The loss layer of kind vt that takes l's targets (l, its inner tree's or its last child's,
 * as nnt_layer_set_targets passes them on), or NULL. */
static nnt_layer *loss_of(nnt_layer *l, const nnt_layer_vt *vt)
{
    while (l && l->vt != vt) {
        nnt_layer *inner = l->vt->inner ? l->vt->inner(l) : NULL;
        l = inner && inner != l ? inner : l->nchildren > 0 ? l->children[l->nchildren - 1] : NULL;
    }
    return l;
}

/* The cross-entropy layer of l whose last forward had targets, n of them (-1: any number);
 * else a failure. */
static int xent_forwarded(nnt_layer *l, const char *fn, int64_t n, nnt_layer **out)
{
    NNT_TRY(nnt_layer_check(l, fn));
    nnt_layer *x = loss_of(l, &xent_vt);
    if (!x)
        return nnt_fail(l->ctx, NNT_E_INVAL, "%s: a %s layer computes no loss (no "
                        "cross-entropy layer takes its targets)", fn, l->vt->kind_name);
    xent *c = x->impl;
    if (!c->with_loss)
        return nnt_fail(l->ctx, NNT_E_STATE, "%s: no forward with targets yet "
                        "(nnt_layer_set_targets, then nnt_layer_forward)", fn);
    int64_t count = 1;
    for (int d = 0; d < c->losses->ndim; d++)
        count *= c->losses->shape[d];
    if (n != count && n != -1)   /* (-1: not checked) */
        return nnt_fail(l->ctx, NNT_E_SHAPE, "%s: n is %lld; the last forward had %lld targets",
                        fn, (long long)n, (long long)count);
    *out = x;
    return NNT_OK;
}

NNT_API int nnt_layer_target_losses(nnt_layer *layer, float *losses, int64_t n)
{
    static const char fn[] = "nnt_layer_target_losses";
    nnt_layer *x = NULL;
    NNT_TRY(xent_forwarded(layer, fn, n, &x));
    if (!losses)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: losses is NULL", fn);
    return nnt_tensor_copy_to_host(((xent *)x->impl)->losses, losses, (size_t)n * sizeof *losses);
}

NNT_API int nnt_layer_set_target_weights(nnt_layer *layer, const float *weights, int64_t n)
{
    static const char fn[] = "nnt_layer_set_target_weights";
    nnt_layer *x = NULL;
    NNT_TRY(xent_forwarded(layer, fn, weights ? n : -1, &x));
    xent *c = x->impl;
    if (!weights) {
        c->weighted = 0;
        return NNT_OK;
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(weights[i]))
            return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: weight %lld is not finite (%g)", fn,
                            (long long)i, (double)weights[i]);
    nnt_tensor *l = c->losses;   /* the weights take the losses' layout */
    NNT_TRY(nnt_layer_ensure(x, &c->weights, NNT_FP32, l->ndim, l->shape, l->tile));
    NNT_TRY(nnt_tensor_copy_from_host(c->weights, weights, (size_t)n * sizeof *weights));
    c->weighted = 1;
    return NNT_OK;
}

NNT_API int nnt_layer_set_label_smoothing(nnt_layer *layer, double epsilon)
{
    static const char fn[] = "nnt_layer_set_label_smoothing";
    NNT_TRY(nnt_layer_check(layer, fn));
    nnt_layer *x = loss_of(layer, &xent_vt);
    if (!x)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: a %s layer computes no cross-entropy "
                        "(label smoothing is that of a language model's loss)", fn,
                        layer->vt->kind_name);
    if (!(epsilon >= 0.0 && epsilon < 1.0))
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: epsilon %g is outside [0, 1)", fn,
                        epsilon);
    ((xent *)x->impl)->smoothing = epsilon;
    return NNT_OK;
}

double gl_cross_entropy_smoothing(nnt_layer *l)
{
    nnt_layer *x = loss_of(l, &xent_vt);
    return x ? ((xent *)x->impl)->smoothing : 0.0;
}

NNT_API int nnt_layer_cross_entropy_create(nnt_ctx *ctx, int32_t ignore_index, nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &xent_vt, sizeof(xent), "nnt_layer_cross_entropy_create", &l));
    ((xent *)l->impl)->ignore = ignore_index;
    *out = l;
    return NNT_OK;
}

/* ---- losses at each row's pooled position: pairwise (reward models), label values ------- */

typedef struct pooled_loss {
    int problem;                    /* NNT_PROBLEM_*: DEFAULT for the pairwise loss          */
    int32_t ignore;
    double center;                  /* pairwise: the weight of the mean of (r_c + r_r)^2     */
    int have_targets;
    int32_t *ids;                   /* host copy of the targets                              */
    int64_t nids;
    double divisor;                 /* nnt_layer_set_targets_ex's (0: the pairs' or rows' number) */
    float *values;                  /* label values: (B, L) set by nnt_layer_set_label_values */
    int64_t nvalues;                /* their number; 0: none set                             */
    int with_loss;                  /* the last forward computed the loss, no backward since */
    int loss_valid;                 /* the last forward computed the loss (kept by backward) */
    double loss;
    int64_t rows, L, npos;          /* B, L and the positions (B x ...) of the last forward   */
    int64_t *pooled;                /* (B) each row's pooled position within the row         */
    double *score;                  /* (B, L) the logits there                               */
    double fwd_divisor;
    float *host;                    /* (B, ..., L) logits of the last forward, then gradients */
    nnt_tensor *scores;             // (B, ..., L) input of the last forward (not owned)
    nnt_tensor *dscores;            // (B, ..., L)
} pooled_loss;

static int pooled_set_targets(nnt_layer *l, nnt_tensor *t)
{
    pooled_loss *c = l->impl;
    if (!t) {
        c->have_targets = 0;
        return NNT_OK;
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    NNT_TRY(targets_to_host(l, t, &ids, &n));
    free(c->ids);
    c->ids = ids;
    c->nids = n;
    c->divisor = nnt_layer_targets_divisor;   /* nnt_layer_set_targets_ex's, else 0 */
    c->have_targets = 1;
    return NNT_OK;
}

int64_t gl_marked_position(const int32_t *row, int64_t n, int32_t ignore, int64_t *count)
{
    int64_t at = -1;
    *count = 0;
    for (int64_t i = 0; i < n; i++)
        if (row[i] != ignore)
            at = i, ++*count;
    return at;
}

/* Each row's one pooled position (B rows of the targets' n / B positions) into c->pooled. */
static int pooled_positions(nnt_layer *l, int64_t B)
{
    pooled_loss *c = l->impl;
    int64_t per_row = c->nids / B;
    for (int64_t b = 0; b < B; b++) {
        int64_t count = 0, found = gl_marked_position(c->ids + b * per_row, per_row, c->ignore,
                                                      &count);
        if (count != 1)
            return nnt_fail(l->ctx, NNT_E_INVAL, "nnt_layer_forward: row %lld of the targets "
                            "has %lld positions that are not the ignore index %d (a %s loss "
                            "pools exactly one a row)", (long long)b, (long long)count,
                            (int)c->ignore, l->vt->kind_name);
        c->pooled[b] = found;
    }
    return NNT_OK;
}

/* Mean over pairs of -log sigmoid(r_c - r_r) + center (r_c + r_r)^2, summed (the pairwise
 * loss of reward models; c->score one a row) */
static double pairwise_sum(const pooled_loss *c, int64_t B)
{
    double sum = 0.0;
    for (int64_t p = 0; p < B / 2; p++) {
        double rc_ = c->score[2 * p], rr = c->score[2 * p + 1];
        sum += nnt_softplus(-(rc_ - rr)) + c->center * (rc_ + rr) * (rc_ + rr);
    }
    return sum;
}

/* One label's loss at logit z against value y, and its derivative d / dz */
static double value_loss(int problem, double z, double y, double *dz)
{
    if (problem == NNT_PROBLEM_REGRESSION) {   /* (z - y)^2 */
        *dz = 2.0 * (z - y);
        return (z - y) * (z - y);
    }
    /* BCE with logits: -(y log s + (1 - y) log(1 - s)), s = sigmoid(z) */
    double s = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
    *dz = s - y;
    return (z > 0 ? z : 0.0) - z * y + log1p(exp(-fabs(z)));
}

/* The shape and state checks of a forward with targets: *B rows, *n positions a row times
 * rows, *L the last dimension */
static int pooled_check(nnt_layer *l, const nnt_tensor *x, int64_t *B, int64_t *n, int64_t *L)
{
    pooled_loss *c = l->impl;
    *B = x->shape[0];
    *L = x->shape[x->ndim - 1];
    *n = nnt_box_numel(x->ndim - 1, x->shape);
    if (*n != c->nids)
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: %lld targets for %lld "
                        "positions", (long long)c->nids, (long long)*n);
    if (c->problem == NNT_PROBLEM_DEFAULT && *B % 2)
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: a pairwise layer takes pairs "
                        "of rows (chosen, rejected); B is %lld", (long long)*B);
    if (c->problem != NNT_PROBLEM_DEFAULT && c->nvalues != *B * *L)
        return nnt_fail(l->ctx, c->nvalues ? NNT_E_SHAPE : NNT_E_STATE, "nnt_layer_forward: "
                        "%lld label values for %lld rows of %lld labels (nnt_layer_set_label_"
                        "values)", (long long)c->nvalues, (long long)*B, (long long)*L);
    return NNT_OK;
}

/* Room for B rows of n / B positions of L logits */
static int pooled_room(nnt_layer *l, int64_t B, int64_t n, int64_t L)
{
    pooled_loss *c = l->impl;
    if (B == c->rows && L == c->L && n == c->npos)
        return NNT_OK;
    free(c->pooled), free(c->score), free(c->host);
    c->pooled = malloc((size_t)B * sizeof *c->pooled);
    c->score = malloc((size_t)(B * L) * sizeof *c->score);
    c->host = malloc((size_t)(n * L) * sizeof *c->host);
    c->rows = c->pooled && c->score && c->host ? B : 0;
    c->L = L, c->npos = n;
    return c->rows ? NNT_OK : nnt_fail(l->ctx, NNT_E_NOMEM, "nnt_layer_forward: out of memory");
}

static int pooled_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    pooled_loss *c = l->impl;
    c->with_loss = c->loss_valid = 0;
    int pairs = c->problem == NNT_PROBLEM_DEFAULT;
    if (x->dtype != NNT_FP32 || x->ndim < 2 || (pairs && x->shape[x->ndim - 1] != 1))
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: a %s layer takes fp32 "
                        "logits (B, ..., %s)", l->vt->kind_name, pairs ? "1" : "L");
    if (!c->have_targets) {   /* no targets: the logits pass through */
        *y = x;
        return NNT_OK;
    }
    int64_t B, n, L;
    NNT_TRY(pooled_check(l, x, &B, &n, &L));
    NNT_TRY(pooled_room(l, B, n, L));
    NNT_TRY(pooled_positions(l, B));
    NNT_TRY(nnt_tensor_copy_to_host(x, c->host, (size_t)(n * L) * sizeof *c->host));
    int64_t per_row = n / B;
    for (int64_t b = 0; b < B; b++)
        for (int64_t k = 0; k < L; k++)
            c->score[b * L + k] = c->host[(b * per_row + c->pooled[b]) * L + k];
    double sum = 0.0, unused;
    if (pairs)
        sum = pairwise_sum(c, B);
    else
        for (int64_t i = 0; i < B * L; i++)   /* (each row's mean over its labels) */
            sum += value_loss(c->problem, c->score[i], c->values[i], &unused) / (double)L;
    c->fwd_divisor = c->divisor > 0 ? c->divisor : (double)(pairs ? B / 2 : B);
    c->loss = sum / c->fwd_divisor;
    c->scores = x;
    c->with_loss = c->loss_valid = 1;
    *y = x;
    return NNT_OK;
}

static int pooled_loss_value(nnt_layer *l, double *loss)
{
    pooled_loss *c = l->impl;
    if (!c->loss_valid)
        return no_loss_yet(l);
    *loss = c->loss;
    return NNT_OK;
}

/* Pairwise: d loss / d r = -sigmoid(-(r_c - r_r)) for the chosen score, its negative for the
 * rejected, both plus 2 center (r_c + r_r); label values: each label's derivative over L; all
 * over the divisor, at the pooled positions (0 elsewhere). */
static int pooled_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    pooled_loss *c = l->impl;
    (void)dy;
    if (!c->with_loss)
        return nnt_fail(l->ctx, NNT_E_STATE, "nnt_layer_backward: the last forward of this "
                        "%s layer had no targets", l->vt->kind_name);
    nnt_tensor *x = c->scores;
    int64_t B = x->shape[0], L = c->L, n = nnt_box_numel(x->ndim - 1, x->shape), per_row = n / B;
    memset(c->host, 0, (size_t)(n * L) * sizeof *c->host);
    for (int64_t p = 0; c->problem == NNT_PROBLEM_DEFAULT && p < B / 2; p++) {
        double rc_ = c->score[2 * p], rr = c->score[2 * p + 1];
        double s = 1.0 / (1.0 + exp(rc_ - rr));   /* sigmoid(-(r_c - r_r)) */
        double centered = 2.0 * c->center * (rc_ + rr);
        c->host[2 * p * per_row + c->pooled[2 * p]] = (float)((centered - s) / c->fwd_divisor);
        c->host[(2 * p + 1) * per_row + c->pooled[2 * p + 1]] =
            (float)((centered + s) / c->fwd_divisor);
    }
    for (int64_t b = 0; c->problem != NNT_PROBLEM_DEFAULT && b < B; b++)
        for (int64_t k = 0; k < L; k++) {
            double dz;
            value_loss(c->problem, c->score[b * L + k], c->values[b * L + k], &dz);
            c->host[(b * per_row + c->pooled[b]) * L + k] =
                (float)(dz / (double)L / c->fwd_divisor);
        }
    NNT_TRY(nnt_layer_ensure(l, &c->dscores, NNT_FP32, x->ndim, x->shape, x->tile));
    NNT_TRY(nnt_tensor_copy_from_host(c->dscores, c->host, (size_t)(n * L) * sizeof *c->host));
    c->with_loss = 0;
    *dx = c->dscores;
    return NNT_OK;
}

static void pooled_destroy(nnt_layer *l)
{
    pooled_loss *c = l->impl;
    nnt_tensor *own[] = {c->dscores};
    destroy_all(own, sizeof own / sizeof own[0]);
    free(c->ids), free(c->pooled), free(c->score), free(c->host), free(c->values);
}

static const nnt_layer_vt pairwise_vt = {
    NNT_LAYER_PAIRWISE, "pairwise", pooled_forward, pooled_backward, pooled_set_targets,
    pooled_loss_value, takes_targets, NULL, pooled_destroy, NULL, NULL, NULL};

static const nnt_layer_vt values_vt = {
    NNT_LAYER_LABEL_VALUES, "label values", pooled_forward, pooled_backward,
    pooled_set_targets, pooled_loss_value, takes_targets, NULL, pooled_destroy, NULL, NULL,
    NULL};

/* A pairwise loss's center term weight: >= 0 and finite, else NNT_E_INVAL naming fn. */
static int check_center(nnt_ctx *ctx, const char *fn, double center)
{
    if (!(center >= 0.0) || !isfinite(center))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: center %g (>= 0, finite)", fn, center);
    return NNT_OK;
}

NNT_API int nnt_layer_pairwise_create(nnt_ctx *ctx, int32_t ignore_index, double center,
                                      nnt_layer **out)
{
    const char *fn = "nnt_layer_pairwise_create";
    NNT_TRY(check_center(ctx, fn, center));
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &pairwise_vt, sizeof(pooled_loss), fn, &l));
    pooled_loss *c = l->impl;
    c->problem = NNT_PROBLEM_DEFAULT;
    c->ignore = ignore_index;
    c->center = center;
    *out = l;
    return NNT_OK;
}

NNT_API int nnt_layer_label_values_create(nnt_ctx *ctx, int32_t ignore_index, int problem,
                                          nnt_layer **out)
{
    const char *fn = "nnt_layer_label_values_create";
    if (problem != NNT_PROBLEM_REGRESSION && problem != NNT_PROBLEM_MULTI_LABEL)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: problem %d (NNT_PROBLEM_REGRESSION or "
                        "NNT_PROBLEM_MULTI_LABEL)", fn, problem);
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &values_vt, sizeof(pooled_loss), fn, &l));
    pooled_loss *c = l->impl;
    c->problem = problem;
    c->ignore = ignore_index;
    *out = l;
    return NNT_OK;
}

/* A pooled loss of a model's (pairwise, label values), else NULL */
static const pooled_loss *pooled_of(const nnt_layer *l)
{
    return l->vt == &pairwise_vt || l->vt == &values_vt ? l->impl : NULL;
}

/* The loss layers of models (cross_entropy, pairwise, label values) */
int gl_loss_has_targets(const nnt_layer *l)
{
    const pooled_loss *c = pooled_of(l);
    return c ? c->have_targets : gl_cross_entropy_has_targets(l);
}

int gl_pairwise_scores(const nnt_layer *l, float *scores, int64_t B)
{
    const pooled_loss *c = l->vt == &pairwise_vt ? l->impl : NULL;
    if (!c || !c->with_loss || c->rows != B)
        return 0;
    for (int64_t b = 0; b < B; b++)
        scores[b] = (float)c->score[b];   /* (read from floats: exact) */
    return 1;
}

int gl_loss_targets(const nnt_layer *l, const int32_t **ids, int64_t *n, int32_t *ignore)
{
    const pooled_loss *p = pooled_of(l);
    if (p) {
        *ids = p->ids, *n = p->nids, *ignore = p->ignore;
        return p->have_targets;
    }
    if (l->vt != &xent_vt)
        return 0;
    const xent *c = l->impl;
    *ids = c->ids, *ignore = c->ignore;
    *n = c->targets ? nnt_box_numel(c->targets->ndim, c->targets->shape) : 0;
    return c->have_targets;
}

NNT_API int nnt_layer_set_label_values(nnt_layer *layer, const float *values, int64_t n)
{
    static const char fn[] = "nnt_layer_set_label_values";
    NNT_TRY(nnt_layer_check(layer, fn));
    nnt_layer *l = loss_of(layer, &values_vt);
    if (!l)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: a %s layer has no label-values loss (a "
                        "classifier of problem_type NNT_PROBLEM_REGRESSION or NNT_PROBLEM_"
                        "MULTI_LABEL)", fn, layer->vt->kind_name);
    pooled_loss *c = l->impl;
    if (!values) {
        free(c->values);
        c->values = NULL;
        c->nvalues = 0;
        return NNT_OK;
    }
    if (n < 1)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: n %lld (B * num_labels)", fn, (long long)n);
    int bce = c->problem == NNT_PROBLEM_MULTI_LABEL;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(values[i]) || (bce && !(values[i] >= 0.0f && values[i] <= 1.0f)))
            return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: value %lld is %g (%s)", fn,
                            (long long)i, (double)values[i],
                            bce ? "multi-label: in [0, 1]" : "finite");
    float *copy = malloc((size_t)n * sizeof *copy);
    if (!copy)
        return nnt_fail(layer->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    memcpy(copy, values, (size_t)n * sizeof *copy);
    free(c->values);
    c->values = copy;
    c->nvalues = n;
    return NNT_OK;
}

NNT_API int nnt_layer_set_pairwise_center(nnt_layer *layer, double center)
{
    static const char fn[] = "nnt_layer_set_pairwise_center";
    NNT_TRY(nnt_layer_check(layer, fn));
    nnt_layer *l = loss_of(layer, &pairwise_vt);
    if (!l)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: a %s layer has no pairwise loss (a "
                        "reward model: num_labels 1)", fn, layer->vt->kind_name);
    NNT_TRY(check_center(layer->ctx, fn, center));
    ((pooled_loss *)l->impl)->center = center;
    return NNT_OK;
}
