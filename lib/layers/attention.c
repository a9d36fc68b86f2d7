/* SPDX-License-Identifier: MIT */
/* The generic attention layer: causal self-attention with its output projection. With
 * GPT-2's options (NNT_ATTENTION_OPTIONS_INIT) it is GPT-2's attn (c_attn split into q, k, v,
 * then c_proj); with others the Llama layout under Hugging Face's names: q_proj, k_proj,
 * v_proj (NKV key/value heads: grouped-query attention, done by the attention op itself),
 * o_proj, optional biases, optional RMSNorms of each head vector of q and k (Qwen3's
 * q_norm, k_norm, before the rotation; Gemma 3's scale by 1 + weight), rotary positions on
 * q and k, a query scale (Gemma's query_pre_attn_scalar), soft-capped scores (Gemma 2) and
 * attention sinks (gpt-oss: a logit per head in each softmax row, with no value).
 * Shapes: B batch, T sequence, C channels, NH heads, NKV key/value heads, hd head dimension
 * (C / NH unless the options give it). */
#include "generic.h"
#include "../ops/norm_heads.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* names: [0] GPT-2's, [1] the Llama layout's */
static const char *const QKV_WEIGHT[2][3] = {{"q.weight", "k.weight", "v.weight"},
                                             {"q_proj.weight", "k_proj.weight", "v_proj.weight"}};
static const char *const QKV_BIAS[2][3] = {{"q.bias", "k.bias", "v.bias"},
                                           {"q_proj.bias", "k_proj.bias", "v_proj.bias"}};
static const char *const OUT_WEIGHT[2] = {"c_proj.weight", "o_proj.weight"};
static const char *const OUT_BIAS[2] = {"c_proj.bias", "o_proj.bias"};
static const char *const QK_NORM[2] = {"q_norm.weight", "k_norm.weight"};
static const int SWAP_BT_NH[4] = {0, 2, 1, 3};   /* (B, T, NH, hd) <-> (B, NH, T, hd) */

typedef struct attention {
    int has_rope;
    nnt_rope_options rope;          // a copy of the options' rope
    int64_t window;                 // sliding window of the attention op (0: none)
    double scale, softcap;          // of the scores (the scale as applied; softcap 0: none)
    int qk_plus_one;                // the q/k norms scale by 1 + weight
    nnt_tensor *qkn1[2];            // (hd) 1 + q_norm, 1 + k_norm weights (qk_plus_one)
    int gpt2;                       // GPT-2's names and c_attn (one module for q, k, v)
    nnt_tensor *w[3];               // (NH, hd, C) q weight, (NKV, hd, C) k, v weights
    nnt_tensor *b[3];               // (NH, hd), (NKV, hd), or NULL (no q/k/v bias)
    nnt_tensor *w16[3], *pw16;      // bf16 copies of w, pw under NNT_PRECISION_BF16, else NULL
    nnt_tensor *pw;                 // (C, NH, hd) c_proj / o_proj weight
    nnt_tensor *pb;                 // (C) or NULL (gradients: nnt_layer_grad_of)
    nnt_tensor *sinks;              // (NH) attention sinks (gpt-oss), tiled as q's heads, or
                                    // NULL
    nnt_tensor *sinks_scratch;      // a frozen sinks' gradient (dropped)
    double qk_eps;                  // of the q / k norms
    int qk_full;                    // qk_norm 2: over each token's whole projection (OLMoE)
    nnt_tensor *qkn[2];             // (hd) q_norm, k_norm weights, or NULL (no q/k norm);
                                    // qk_full: (NH hd), (NKV hd)
    nnt_tensor *qkn_scratch[2];     // a frozen norm weight's gradient sum (dropped)
    gl_lora *lora[4];               // adapters: q_proj, k_proj, v_proj, o_proj; GPT-2:
                                    // c_attn ([0], parts q, k, v) and c_proj ([3]); fused
                                    // names: qkv_proj ([0], parts q, k, v) and o_proj ([3])
    int fused;                      // LoRA's q, k, v one module qkv_proj (Phi-3's files)
    nnt_tensor *x;                  // the input of the last forward (not owned)
    nnt_tensor *xin, *x_cache;      // x with the weights' C tiling
    nnt_tensor *heads;              // (B, T, NH, hd) scratch: q/k/v before permute, grads
    nnt_tensor *kv_heads;           // (B, T, NKV, hd) the same for k, v when NKV < NH
    nnt_tensor *qkv[3], *o;         // (B, NH, T, hd) q, o; (B, NKV, T, hd) k, v
    nnt_tensor *qk_in[2];           // q, k before their norms (q/k norm only)
    nnt_tensor *qk_rstd[2];         // (B, NH, T) of q's norm, (B, NKV, T) of k's
    nnt_tensor *dqk_in[2];          // their gradients
    nnt_tensor *lse;                // (B, NH, T)
    nnt_tensor *atty;               // (B, T, NH, hd) heads side by side
    nnt_tensor *y;                  // (B, T, C)
    nnt_tensor *dh[4];              // d o, dq (B, NH, T, hd); dk, dv (B, NKV, T, hd)
    nnt_tensor *dxin, *dx, *dy_cache;
    nnt_tensor *cache[2];           // (B, NKV, rows, hd) keys, values of generation (owned)
    nnt_tensor *spare[2];           // the same, to slide a window's caches into (or NULL)
    int64_t cache_pos0;             // the position of the caches' row 0
    nnt_tensor *pos;                // (B, T) int32 per-token positions (packed examples) in
                                    // x's tiling, copied at the forward for the backward
    int packed;                     // the last forward used pos
} attention;

/* The (B, T, heads, hd) scratch of projection i: q's heads, or k's / v's. */
static nnt_tensor *scratch_of(attention *a, int i)
{
    return i && a->kv_heads ? a->kv_heads : a->heads;
}

/* The adapter of projection i (0 q, 1 k, 2 v) and its part: GPT-2's c_attn (its q, k, v
 * parts) or the projection's own; NULL: none. */
static gl_lora *qkv_lora(const attention *a, int i, int *part)
{
    int one = a->gpt2 || a->fused;   /* q, k, v one module */
    *part = one ? i : 0;
    return a->lora[one ? 0 : i];
}

/* Layouts of the activations for x (B, T, C): heads (B, T, NH, hd), bnth (B, NH, T, hd),
 * lse (B, NH, T); k, v with NKV heads. */
static int ensure_acts(nnt_layer *l, attention *a, const nnt_tensor *x)
{
    const nnt_tensor *w = a->w[0], *wk = a->w[1];
    int64_t B = x->shape[0], T = x->shape[1], NH = w->shape[0], hd = w->shape[1];
    int64_t NKV = wk->shape[0], kt = wk->tile[0], kdt = wk->tile[1];
    int64_t bt = x->tile[0], tt = x->tile[1], nt = w->tile[0], dt = w->tile[1];
    int64_t heads[4] = {B, T, NH, hd}, heads_tile[4] = {bt, tt, nt, dt};
    int64_t bnth[4] = {B, NH, T, hd}, bnth_tile[4] = {bt, nt, tt, dt};
    int64_t kvh[4] = {B, T, NKV, hd}, kvh_tile[4] = {bt, tt, kt, kdt};
    int64_t kv[4] = {B, NKV, T, hd}, kv_tile[4] = {bt, kt, tt, kdt};
    int64_t y[3] = {B, T, a->pw->shape[0]}, y_tile[3] = {bt, tt, a->pw->tile[0]};
    NNT_TRY(nnt_layer_ensure(l, &a->heads, NNT_FP32, 4, heads, heads_tile));
    if (NKV != NH)
        NNT_TRY(nnt_layer_ensure(l, &a->kv_heads, NNT_FP32, 4, kvh, kvh_tile));
    NNT_TRY(nnt_layer_ensure(l, &a->atty, NNT_FP32, 4, heads, heads_tile));
    NNT_TRY(nnt_layer_ensure_placed(l, &a->qkv[0], NNT_FP32, 4, bnth, bnth_tile, NNT_ROWS_BHT));
    for (int i = 1; i < 3; i++)
        NNT_TRY(nnt_layer_ensure_placed(l, &a->qkv[i], NNT_FP32, 4, kv, kv_tile, NNT_ROWS_BHT));
    NNT_TRY(nnt_layer_ensure_placed(l, &a->o, NNT_FP32, 4, bnth, bnth_tile, NNT_ROWS_BHT));
    NNT_TRY(nnt_layer_ensure_placed(l, &a->lse, NNT_FP32, 3, bnth, bnth_tile, NNT_ROWS_BHT));
    for (int i = 0; a->qkn[0] && !a->qk_full && i < 2; i++) {
        const nnt_tensor *like = a->qkv[i];
        NNT_TRY(nnt_layer_ensure_placed(l, &a->qk_in[i], NNT_FP32, 4, like->shape, like->tile,
                                        NNT_ROWS_BHT));
        NNT_TRY(nnt_layer_ensure_placed(l, &a->qk_rstd[i], NNT_FP32, 3, like->shape, like->tile,
                                        NNT_ROWS_BHT));
    }
    for (int i = 0; a->qk_full && i < 2; i++) {   /* (B, T, H, hd) before the norm, (B, T) */
        const nnt_tensor *like = scratch_of(a, i);
        NNT_TRY(nnt_layer_ensure(l, &a->qk_in[i], NNT_FP32, 4, like->shape, like->tile));
        NNT_TRY(nnt_layer_ensure(l, &a->qk_rstd[i], NNT_FP32, 2, like->shape, like->tile));
    }
    return nnt_layer_ensure(l, &a->y, NNT_FP32, 3, y, y_tile);
}

/* the attention op's options: the scale, the sliding window, the soft-cap, the sinks, and the
 * per-token positions pos (NULL: none) */
static nnt_tensor_attention_options op_options(const attention *a, nnt_tensor *pos)
{
    nnt_tensor_attention_options o = NNT_TENSOR_ATTENTION_OPTIONS_INIT;
    o.scale = a->scale;
    o.window = a->window;
    o.softcap = a->softcap;
    o.positions = pos;
    o.sinks = a->sinks;
    return o;
}

/* Per-token positions p (the tree's, nnt_layer_set_positions, or a generation's) for the
 * forward of x (B, T, C): copied into a->pos in x's B and T tiling (a->packed 1), or none
 * (p NULL: a->packed 0). */
static int take_positions(nnt_layer *l, attention *a, const nnt_tensor *x, nnt_tensor *p)
{
    a->packed = 0;
    if (!p)
        return NNT_OK;
    if (p->ndim != 2 || x->ndim != 3 || p->shape[0] != x->shape[0] ||
        p->shape[1] != x->shape[1])
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: the positions (%lld, %lld) "
                        "are not the input's (B %lld, T %lld)",
                        (long long)p->shape[0], (long long)(p->ndim > 1 ? p->shape[1] : 0),
                        (long long)x->shape[0], (long long)x->shape[1]);
    int64_t tile[2] = {x->tile[0], x->tile[1]};
    NNT_TRY(nnt_layer_ensure(l, &a->pos, NNT_INT32, 2, x->shape, tile));
    NNT_TRY(nnt_tensor_copy(p, a->pos));
    a->packed = 1;
    return NNT_OK;
}

/* The scale of the norm of q (i 0) or k (1): its weight, or 1 + weight. */
static int qk_norm_scale(nnt_layer *l, attention *a, int i, nnt_tensor **g)
{
    *g = a->qkn[i];
    return a->qk_plus_one ? gl_plus_one(l, a->qkn[i], &a->qkn1[i], g) : NNT_OK;
}

/* q (B, NH, T, hd), k, v (B, NKV, T, hd) of x (B, T, C) into a->qkv, q and k normalised
 * (if so configured: from a->qk_in) and rotated (if so configured) to the positions a->pos
 * (a->packed), else to past .. past + T - 1. */
static int project_qkv(nnt_layer *l, attention *a, nnt_tensor *x, int64_t past)
{
    int64_t C = a->pw->shape[0];
    if (x->dtype != NNT_FP32 || x->ndim != 3 || x->shape[2] != C)
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: an attention layer takes fp32 "
                        "(B, T, C = %lld) (got %d dims, last %lld)", (long long)C, x->ndim,
                        (long long)x->shape[x->ndim - 1]);
    int64_t tile[3] = {x->tile[0], x->tile[1], a->w[0]->tile[2]};
    NNT_TRY(gl_retiled(l, x, tile, &a->x_cache, &a->xin));
    a->x = x;
    NNT_TRY(ensure_acts(l, a, x));
    for (int i = 0; i < 3; i++)   /* the adapters' u = x A^T */
        if (a->lora[i])
            NNT_TRY(gl_lora_begin(l, a->lora[i], a->xin));
    for (int i = 0; i < 3; i++) {
        /* heads (B, T, NH or NKV, hd) = x (B, T, C) W_i^T (NH or NKV, hd, C) (+ b_i)
         * (+ s u B_i^T) */
        nnt_tensor *h = scratch_of(a, i), *w = NULL;
        int part = 0;
        gl_lora *lo = qkv_lora(a, i, &part);
        int normed = i < 2 && a->qkn[i], full = normed && a->qk_full;
        nnt_tensor *proj = full ? a->qk_in[i] : h;   // (B, T, NH or NKV, hd)
        NNT_TRY(gl_weight_operand(l, a->w[i], &a->w16[i], &w));
        NNT_TRY(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, a->xin, w, 0.0,
                                   proj, 1, 0,
                               a->b[i] ? NNT_EPILOGUE_BIAS : NNT_EPILOGUE_NONE, a->b[i], NULL));
        if (lo)
            NNT_TRY(gl_lora_part(l, lo, part, proj, 1.0, w));
        nnt_tensor *g = NULL;
        if (normed)
            NNT_TRY(qk_norm_scale(l, a, i, &g));
        if (full) {   /* one norm over the token's whole projection, then its heads */
            NNT_TRY(nnt_rmsnorm_heads(a->qk_in[i], g, a->qk_eps, h, a->qk_rstd[i]));
            NNT_TRY(nnt_tensor_permute(h, SWAP_BT_NH, a->qkv[i]));
            continue;
        }
        NNT_TRY(nnt_tensor_permute(h, SWAP_BT_NH, normed ? a->qk_in[i] : a->qkv[i]));
        if (normed)
            NNT_TRY(nnt_tensor_rmsnorm(a->qk_in[i], g, a->qk_eps, a->qkv[i], a->qk_rstd[i]));
    }
    if (a->has_rope && a->packed) {   /* each token at its own position */
        NNT_TRY(nnt_tensor_rope_positions(a->qkv[0], &a->rope, a->pos, a->qkv[0]));
        NNT_TRY(nnt_tensor_rope_positions(a->qkv[1], &a->rope, a->pos, a->qkv[1]));
    } else if (a->has_rope) {   /* q and k rotated in place */
        NNT_TRY(nnt_tensor_rope(a->qkv[0], &a->rope, past, a->qkv[0]));
        NNT_TRY(nnt_tensor_rope(a->qkv[1], &a->rope, past, a->qkv[1]));
    }
    return NNT_OK;
}

/* y (B, T, C) from the attention output a->o (B, NH, T, hd). */
static int project_out(nnt_layer *l, attention *a, nnt_tensor **y)
{
    NNT_TRY(nnt_tensor_permute(a->o, SWAP_BT_NH, a->atty));
    /* y (B, T, C) = atty (B, T, NH, hd) c_proj^T (C, NH, hd) (+ c_proj.bias) */
    nnt_tensor *pw = NULL;
    NNT_TRY(gl_weight_operand(l, a->pw, &a->pw16, &pw));
    NNT_TRY(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, a->atty, pw, 0.0, a->y, 2, 0,
                           a->pb ? NNT_EPILOGUE_BIAS : NNT_EPILOGUE_NONE, a->pb, NULL));
    if (a->lora[3]) {   /* y += s (atty A^T) B^T */
        NNT_TRY(gl_lora_begin(l, a->lora[3], a->atty));
        NNT_TRY(gl_lora_part(l, a->lora[3], 0, a->y, 1.0, pw));
    }
    *y = a->y;
    return NNT_OK;
}

static int attention_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    attention *a = l->impl;
    NNT_TRY(take_positions(l, a, x, nnt_layer_positions_of(l)));
    NNT_TRY(project_qkv(l, a, x, 0));
    /* NKV < NH: q head h reads kv head h / (NH / NKV) inside the op (no copies) */
    nnt_tensor_attention_options ao = op_options(a, a->packed ? a->pos : NULL);
    NNT_TRY(nnt_tensor_attention_ex(a->qkv[0], a->qkv[1], a->qkv[2], &ao, a->o, a->lse));
    return project_out(l, a, y);
}

/* The tensors pair[0..1] (B, NKV, len, hd), tiles (x's B tile, k's head tile, seq_tile, hd),
 * zeroed; kept when they already have that layout. */
static int ensure_pair(nnt_layer *l, attention *a, nnt_tensor **pair, const nnt_tensor *x,
                       int64_t len, int64_t seq_tile)
{
    const nnt_tensor *wk = a->w[1];
    int64_t shape[4] = {x->shape[0], wk->shape[0], len, wk->shape[1]};
    int64_t tile[4] = {x->tile[0], wk->tile[0], seq_tile > 0 && seq_tile < len ? seq_tile : len,
                       wk->shape[1]};
    for (int i = 0; i < 2; i++) {
        nnt_tensor *c = pair[i];
        int same = c != NULL;
        for (int d = 0; same && d < 4; d++)
            same = c->shape[d] == shape[d] && c->tile[d] == tile[d];
        if (same)
            continue;
        nnt_tensor_destroy(c);
        pair[i] = NULL;
        NNT_TRY(nnt_tensor_create(l->ctx, NNT_FP32, 4, shape, tile, &pair[i]));
        NNT_TRY(nnt_tensor_fill(pair[i], 0.0));
    }
    return NNT_OK;
}

/* The rows of a layer's caches for a generation of len positions: a layer with a sliding
 * window of W keys keeps the last W - 1 positions and room for W new ones (2 W - 1 rows; once
 * every W tokens W - 1 rows slide into a spare pair of as many rows), when those 4 W - 2 rows
 * are fewer than len; else len, as a layer without a window. */
static int64_t cache_rows(const attention *a, int64_t len)
{
    int64_t rows = 2 * a->window - 1;
    return a->window > 0 && 2 * rows < len ? rows : len;
}

/* Keys and values of positions [from, past) moved to the caches' first rows (through the
 * spare pair, which becomes the caches): the caches' rows then start at position from. */
static int slide_caches(attention *a, int64_t from, int64_t past)
{
    for (int i = 0; i < 2; i++) {
        NNT_TRY(gl_copy_rows(a->cache[i], 2, from - a->cache_pos0, a->spare[i], 0, past - from));
        nnt_tensor *c = a->cache[i];
        a->cache[i] = a->spare[i], a->spare[i] = c;
    }
    a->cache_pos0 = from;
    return NNT_OK;
}

/* A prompt of T positions longer than a window's caches: its queries against its own keys
 * (the training forward's attention, with the window) into a->o, then its last W - 1 keys
 * and values into the caches' first rows, the keys later queries still see. */
static int prompt_past_caches(attention *a, int64_t T, const nnt_tensor_attention_options *ao)
{
    NNT_TRY(nnt_tensor_attention_ex(a->qkv[0], a->qkv[1], a->qkv[2], ao, a->o, a->lse));
    int64_t keep = a->window - 1;
    for (int i = 0; i < 2; i++)
        NNT_TRY(gl_copy_rows(a->qkv[1 + i], 2, T - keep, a->cache[i], 0, keep));
    a->cache_pos0 = T - keep;
    return NNT_OK;
}

static const nnt_layer_vt attention_vt;

int gl_attention_forward_cached(nnt_layer *l, nnt_tensor *x, const gl_cache_pos *at,
                                nnt_tensor **y)
{
    NNT_TRY(nnt_layer_check(l, "nnt_layer_forward"));
    if (l->vt != &attention_vt)
        return nnt_fail(l->ctx, NNT_E_INVAL, "nnt_layer_forward: a %s layer has no key/value "
                        "cache", l->vt->kind_name);
    attention *a = l->impl;
    int64_t T = x->ndim == 3 ? x->shape[1] : 0, past = at->past, rows = cache_rows(a, at->len);
    if (past < 0 || past + T > at->len)
        return nnt_fail(l->ctx, NNT_E_INVAL, "nnt_layer_forward: %lld cached and %lld new "
                        "positions do not fit a key/value cache of %lld", (long long)past,
                        (long long)T, (long long)at->len);
    if (past == 0) {
        NNT_TRY(ensure_pair(l, a, a->cache, x, rows, at->seq_tile));
        if (rows < at->len)
            NNT_TRY(ensure_pair(l, a, a->spare, x, rows, at->seq_tile));
        a->cache_pos0 = 0;
    } else if (!a->cache[0] || a->cache[0]->shape[2] != rows ||
               a->cache[0]->shape[0] != x->shape[0])
        return nnt_fail(l->ctx, NNT_E_STATE, "nnt_layer_forward: no key/value cache of %lld "
                        "positions to continue at %lld (start at position 0)",
                        (long long)at->len, (long long)past);
    /* generation: positions past .. past + T - 1, or at->positions */
    NNT_TRY(take_positions(l, a, x, at->positions));
    NNT_TRY(project_qkv(l, a, x, past));
    nnt_tensor_attention_options ao = op_options(a, a->packed ? a->pos : NULL);
    if (past == 0 && T > rows) {
        NNT_TRY(prompt_past_caches(a, T, &ao));
        return project_out(l, a, y);
    }
    if (past + T - a->cache_pos0 > rows) {   /* (a window's caches) full: slide them */
        int64_t from = past - (a->window - 1);   /* what the first new query still sees */
        if (from < a->cache_pos0 || past - from + T > rows)
            return nnt_fail(l->ctx, NNT_E_INVAL, "nnt_layer_forward: %lld new positions at "
                            "%lld do not fit a window's key/value cache of %lld rows (one "
                            "token at a time after the prompt)", (long long)T, (long long)past,
                            (long long)rows);
        NNT_TRY(slide_caches(a, from, past));
    }
    for (int i = 0; i < 2; i++)   /* k, v of the new positions into the rows past .. */
        NNT_TRY(gl_copy_rows(a->qkv[1 + i], 2, 0, a->cache[i], past - a->cache_pos0, T));
    NNT_TRY(nnt_tensor_attention_kv_from(a->qkv[0], a->cache[0], a->cache[1], past,
                                         a->cache_pos0, &ao, a->o));
    return project_out(l, a, y);
}

/* A new tensor of like's layout with nseq rows in dimension 0, in one tile there; *t NULL on
 * failure. */
static int batch_like(nnt_layer *l, const nnt_tensor *like, int64_t nseq, nnt_tensor **t)
{
    int64_t shape[4], tile[4];
    for (int d = 0; d < 4; d++)
        shape[d] = like->shape[d], tile[d] = like->tile[d];
    shape[0] = tile[0] = nseq;
    *t = NULL;
    return nnt_tensor_create(l->ctx, NNT_FP32, 4, shape, tile, t);
}

int gl_attention_expand_cache(nnt_layer *l, int64_t nseq, const int64_t *src)
{
    if (l->vt != &attention_vt)
        return NNT_OK;
    attention *a = l->impl;
    if (!a->cache[0])
        return NNT_OK;
    int64_t prompts = a->cache[0]->shape[0];
    for (int64_t r = 0; r < nseq; r++)
        if (src && (src[r] < 0 || src[r] >= prompts))
            return nnt_fail(l->ctx, NNT_E_STATE, "generation: sequence %lld continues prompt "
                            "%lld of key/value caches of %lld", (long long)r,
                            (long long)src[r], (long long)prompts);
    for (int i = 0; i < 2; i++) {
        nnt_tensor *many = NULL, *spare = NULL;   // (nseq, NKV, rows, hd)
        int rc = batch_like(l, a->cache[i], nseq, &many);
        for (int64_t r = 0; r < nseq && rc == NNT_OK; r++)
            rc = gl_copy_rows(a->cache[i], 0, src ? src[r] : 0, many, r, 1);
        if (rc == NNT_OK && a->spare[i] && (rc = batch_like(l, a->spare[i], nseq, &spare)) == 0)
            rc = nnt_tensor_fill(spare, 0.0);
        if (rc != NNT_OK) {
            nnt_tensor_destroy(many);
            nnt_tensor_destroy(spare);
            return rc;
        }
        nnt_tensor_destroy(a->cache[i]);
        a->cache[i] = many;
        if (spare) {
            nnt_tensor_destroy(a->spare[i]);
            a->spare[i] = spare;
        }
    }
    return NNT_OK;
}

void gl_attention_release_cache(nnt_layer *l)
{
    if (l->vt != &attention_vt)
        return;
    attention *a = l->impl;
    for (int i = 0; i < 2; i++) {
        nnt_tensor_destroy(a->cache[i]);
        nnt_tensor_destroy(a->spare[i]);
        a->cache[i] = a->spare[i] = NULL;
    }
}

/* d heads (B, T, NH or NKV, hd) of projection i in its scratch: dxin (+)= dheads W_i;
 * W_i, b_i grads. */
static int backward_qkv(nnt_layer *l, attention *a, int i)
{
    nnt_tensor *h = scratch_of(a, i), *hw = h;   // hw: what the base products take
    int part = 0;
    gl_lora *lo = qkv_lora(a, i, &part);
    if (lo)   /* the adapter's dB, du (DoRA: the base's gradient scaled) */
        NNT_TRY(gl_lora_backward_part(l, lo, part, h, &hw));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, hw, gl_weight_read(a->w[i], a->w16[i]),
                            i ? 1.0 : 0.0, a->dxin, 2, 0));
    nnt_tensor *dw = nnt_layer_grad_of(l, a->w[i]);   // NULL: frozen
    nnt_tensor *db = a->b[i] ? nnt_layer_grad_of(l, a->b[i]) : NULL;
    if (dw)
        NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, hw, a->xin,
                                nnt_layer_grad_beta(l, dw), dw, 2, 0));
    if (db)
        NNT_TRY(nnt_tensor_sum_leading(1.0, h, nnt_layer_grad_beta(l, db), db));
    return NNT_OK;
}

/* Back through the norm of q (i 0) or k (1): d qk_in from d qkv[i] (in a->dh[1 + i]); the
 * norm weight's gradient written by the first backward after the gradients were dropped,
 * then accumulated (the op accumulates: a dropped gradient is zeroed first; a frozen
 * weight's sum goes to a scratch vector). */
static int qk_norm_grad(nnt_layer *l, attention *a, int i, nnt_tensor **dn)
{
    *dn = nnt_layer_grad_of(l, a->qkn[i]);
    if (!*dn) {
        NNT_TRY(nnt_layer_ensure_placed(l, &a->qkn_scratch[i], NNT_FP32, 1, a->qkn[i]->shape,
                                        a->qkn[i]->tile, 0));
        *dn = a->qkn_scratch[i];
        return nnt_tensor_fill(*dn, 0.0);
    }
    return nnt_layer_grad_beta(l, *dn) == 0.0 ? nnt_tensor_fill(*dn, 0.0) : NNT_OK;
}

/* The sinks' gradient tensor the op adds to: zeroed by the first backward after the
 * gradients were dropped (a frozen sinks' sum goes to a scratch vector). */
static int sinks_grad(nnt_layer *l, attention *a, nnt_tensor **ds)
{
    *ds = nnt_layer_grad_of(l, a->sinks);
    if (!*ds) {
        NNT_TRY(nnt_layer_ensure_placed(l, &a->sinks_scratch, NNT_FP32, 1, a->sinks->shape,
                                        a->sinks->tile, 0));
        *ds = a->sinks_scratch;
        return nnt_tensor_fill(*ds, 0.0);
    }
    return nnt_layer_grad_beta(l, *ds) == 0.0 ? nnt_tensor_fill(*ds, 0.0) : NNT_OK;
}

static int backward_qk_norm(nnt_layer *l, attention *a, int i)
{
    const nnt_tensor *like = a->qk_in[i];
    NNT_TRY(nnt_layer_ensure_placed(l, &a->dqk_in[i], NNT_FP32, 4, like->shape, like->tile,
                                    NNT_ROWS_BHT));
    nnt_tensor *dn = NULL;
    NNT_TRY(qk_norm_grad(l, a, i, &dn));
    /* d(1 + w) = dw: the same sums with the scale the forward used */
    return nnt_tensor_rmsnorm_backward(a->qk_in[i], a->qk_plus_one ? a->qkn1[i] : a->qkn[i],
                                       a->qk_rstd[i], a->dh[1 + i], a->dqk_in[i], dn);
}

/* Back through OLMoE's norm of the whole projection i (q 0, k 1): d of its input into the
 * projection's scratch (its norm weight's gradient as in backward_qk_norm), then through
 * the projection. */
static int backward_qk_full(nnt_layer *l, attention *a, int i)
{
    const nnt_tensor *like = a->qk_in[i];
    NNT_TRY(nnt_layer_ensure(l, &a->dqk_in[i], NNT_FP32, 4, like->shape, like->tile));
    NNT_TRY(nnt_tensor_permute(a->dh[i + 1], SWAP_BT_NH, a->dqk_in[i]));
    nnt_tensor *dn = NULL;
    NNT_TRY(qk_norm_grad(l, a, i, &dn));
    NNT_TRY(nnt_rmsnorm_heads_backward(a->qk_in[i], a->qk_plus_one ? a->qkn1[i] : a->qkn[i],
                                       a->qk_rstd[i], a->dqk_in[i], scratch_of(a, i), dn));
    return backward_qkv(l, a, i);
}

static int attention_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    attention *a = l->impl;
    nnt_tensor *g = NULL;   // (B, T, C)
    NNT_TRY(gl_dy_like(l, dy, a->y, "nnt_layer_backward", &a->dy_cache, &g));
    for (int i = 0; i < 4; i++) {
        const nnt_tensor *like = i < 2 ? a->o : a->qkv[1];
        NNT_TRY(nnt_layer_ensure_placed(l, &a->dh[i], NNT_FP32, 4, like->shape, like->tile,
                                        NNT_ROWS_BHT));
    }
    /* c_proj: d atty (B, T, NH, hd) = g c_proj (+ the adapter's); c_proj grads */
    nnt_tensor *gw = g;   // what the base products take (DoRA's: scaled)
    if (a->lora[3])
        NNT_TRY(gl_lora_backward_part(l, a->lora[3], 0, g, &gw));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, gw, gl_weight_read(a->pw, a->pw16),
                            0.0, a->heads, 1, 0));
    nnt_tensor *dpw = nnt_layer_grad_of(l, a->pw);   // NULL: frozen
    nnt_tensor *dpb = a->pb ? nnt_layer_grad_of(l, a->pb) : NULL;
    if (dpw)
        NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, gw, a->atty,
                                nnt_layer_grad_beta(l, dpw), dpw, 2, 0));
    if (dpb)
        NNT_TRY(nnt_tensor_sum_leading(1.0, g, nnt_layer_grad_beta(l, dpb), dpb));
    if (a->lora[3])
        NNT_TRY(gl_lora_backward_finish(l, a->lora[3], a->heads));
    NNT_TRY(nnt_tensor_permute(a->heads, SWAP_BT_NH, a->dh[0]));
    nnt_tensor_attention_options ao = op_options(a, a->packed ? a->pos : NULL);
    if (a->sinks)
        NNT_TRY(sinks_grad(l, a, &ao.dsinks));
    NNT_TRY(nnt_tensor_attention_backward_ex(a->qkv[0], a->qkv[1], a->qkv[2], a->o, a->lse,
                                             a->dh[0], &ao, a->dh[1], a->dh[2], a->dh[3]));
    if (a->has_rope && a->packed) {   /* back through the rotations at the tokens' positions */
        NNT_TRY(nnt_tensor_rope_positions_backward(a->dh[1], &a->rope, a->pos, a->dh[1]));
        NNT_TRY(nnt_tensor_rope_positions_backward(a->dh[2], &a->rope, a->pos, a->dh[2]));
    } else if (a->has_rope) {   /* back through the rotations of q and k, in place */
        NNT_TRY(nnt_tensor_rope_backward(a->dh[1], &a->rope, 0, a->dh[1]));
        NNT_TRY(nnt_tensor_rope_backward(a->dh[2], &a->rope, 0, a->dh[2]));
    }
    for (int i = 0; a->qkn[0] && !a->qk_full && i < 2; i++)
        NNT_TRY(backward_qk_norm(l, a, i));
    /* d xin (B, T, C) = sum over q, k, v of d heads W_i (+ the adapters'), in xin's tiling,
     * then x's */
    NNT_TRY(nnt_layer_ensure(l, &a->dxin, NNT_FP32, 3, a->xin->shape, a->xin->tile));
    for (int i = 0; i < 3; i++) {
        if (i < 2 && a->qk_full) {   /* back through the whole-projection norm */
            NNT_TRY(backward_qk_full(l, a, i));
            continue;
        }
        nnt_tensor *dheads = i < 2 && a->qkn[0] ? a->dqk_in[i] : a->dh[i + 1];
        NNT_TRY(nnt_tensor_permute(dheads, SWAP_BT_NH, scratch_of(a, i)));
        NNT_TRY(backward_qkv(l, a, i));
    }
    for (int i = 0; i < 3; i++)
        if (a->lora[i])
            NNT_TRY(gl_lora_backward_finish(l, a->lora[i], a->dxin));
    if (a->xin == a->x) {
        *dx = a->dxin;
        return NNT_OK;
    }
    NNT_TRY(nnt_layer_ensure(l, &a->dx, NNT_FP32, 3, a->x->shape, a->x->tile));
    NNT_TRY(nnt_tensor_copy(a->dxin, a->dx));
    *dx = a->dx;
    return NNT_OK;
}

static void attention_destroy(nnt_layer *l)
{
    attention *a = l->impl;
    nnt_tensor *own[] = {a->x_cache, a->heads, a->kv_heads, a->qkv[0], a->qkv[1], a->qkv[2],
                         a->o, a->lse, a->atty, a->y, a->dh[0], a->dh[1], a->dh[2], a->dh[3],
                         a->dxin, a->dx, a->dy_cache, a->w16[0], a->w16[1], a->w16[2],
                         a->pw16, a->cache[0], a->cache[1], a->spare[0], a->spare[1], a->pos,
                         a->qk_in[0], a->qk_in[1], a->qk_rstd[0], a->qk_rstd[1], a->dqk_in[0],
                         a->dqk_in[1], a->qkn_scratch[0], a->qkn_scratch[1], a->qkn1[0],
                         a->qkn1[1], a->sinks_scratch};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        nnt_tensor_destroy(own[i]);
    for (int i = 0; i < 4; i++) {
        gl_lora_free(l, a->lora[i]);
        a->lora[i] = NULL;
    }
}

/* ---- LoRA adapters ---------------------------------------------------------------------- */

static const char *const GPT2_MODULES[] = {"c_attn", "c_proj", NULL};
static const char *const LLAMA_MODULES[] = {"q_proj", "k_proj", "v_proj", "o_proj", NULL};
static const char *const FUSED_MODULES[] = {"qkv_proj", "o_proj", NULL};

const char *const *gl_attention_lora_modules(const nnt_layer *l)
{
    const attention *a = l->impl;
    return a->gpt2 ? GPT2_MODULES : a->fused ? FUSED_MODULES : LLAMA_MODULES;
}

/* The slot of a module in a->lora, or -1: GPT-2's and the fused names' two modules are
 * slots 0 (q, k, v) and 3. */
static int lora_slot(const nnt_layer *l, const char *module)
{
    const attention *a = l->impl;
    const char *const *names = gl_attention_lora_modules(l);
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], module) == 0)
            return a->gpt2 || a->fused ? 3 * i : i;
    return -1;
}

int gl_attention_lora_attach(nnt_layer *l, const char *module, int64_t rank, double scale)
{
    attention *a = l->impl;
    int slot = lora_slot(l, module);
    if (slot < 0)
        return nnt_fail(l->ctx, NNT_E_INVAL, "nnt: an attention layer has no module %s", module);
    if (a->lora[slot])
        return nnt_fail(l->ctx, NNT_E_INVAL, "nnt: the attention's %s has a LoRA adapter "
                        "already", module);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.", module);
    gl_lora_spec sp = {prefix, rank, scale, 1, {0}, {0}, 1, {0}, {{0}}, {{0}}, {"q", "k", "v"},
                       {NULL}, {NULL}, {NULL}};
    if (slot == 3) {   /* o_proj, c_proj: in (NH, hd), out (C) */
        const nnt_tensor *pw = a->pw;
        sp.in_dims = 2;
        sp.in[0] = pw->shape[1], sp.in[1] = pw->shape[2];
        sp.in_tile[0] = pw->tile[1], sp.in_tile[1] = pw->tile[2];
        sp.out_dims[0] = 1;
        sp.out[0][0] = pw->shape[0], sp.out_tile[0][0] = pw->tile[0];
        sp.base[0] = a->pw, sp.bias[0] = a->pb;
    } else {   /* q_proj, k_proj or v_proj; c_attn, qkv_proj: all three */
        int one = a->gpt2 || a->fused, first = one ? 0 : slot, last = one ? 2 : slot;
        sp.in[0] = a->w[first]->shape[2], sp.in_tile[0] = a->w[first]->tile[2];
        sp.nparts = last - first + 1;
        for (int i = first; i <= last; i++) {
            sp.out_dims[i - first] = 2;
            sp.base[i - first] = a->w[i], sp.bias[i - first] = a->b[i];
            for (int d = 0; d < 2; d++) {
                sp.out[i - first][d] = a->w[i]->shape[d];
                sp.out_tile[i - first][d] = a->w[i]->tile[d];
            }
        }
    }
    return gl_lora_new(l, &sp, &a->lora[slot]);
}

gl_lora *gl_attention_lora_of(nnt_layer *l, const char *module)
{
    attention *a = l->impl;
    int slot = lora_slot(l, module);
    return slot < 0 ? NULL : a->lora[slot];
}

void gl_attention_lora_remove(nnt_layer *l, const char *module)
{
    attention *a = l->impl;
    int slot = lora_slot(l, module);
    if (slot >= 0) {
        gl_lora_free(l, a->lora[slot]);
        a->lora[slot] = NULL;
    }
}

int gl_attention_lora_merge(nnt_layer *l)
{
    attention *a = l->impl;
    for (int s = 0; s < 4; s++) {
        gl_lora *lo = a->lora[s];
        if (!lo)
            continue;
        if (s == 3)
            NNT_TRY(gl_lora_merge(l, lo, 0, a->pw));
        else
            for (int i = 0; i < lo->nparts; i++)
                NNT_TRY(gl_lora_merge(l, lo, i, a->w[a->gpt2 || a->fused ? i : s]));
        gl_lora_free(l, lo);
        a->lora[s] = NULL;
    }
    return NNT_OK;
}

static const nnt_layer_vt attention_vt = {
    NNT_LAYER_ATTENTION, "attention", attention_forward, attention_backward,
    NULL, NULL, NULL, NULL, attention_destroy, nnt_layer_drop_grads, NULL, NULL};

/* GPT-2's options: multi-head, all biases, no rope (GPT-2's names), unless the Llama
 * layout's names are asked for. */
static int is_gpt2(const nnt_attention_options *o, int64_t NH)
{
    return !o->llama_names && (o->kv_heads == 0 || o->kv_heads == NH) && o->qkv_bias &&
           o->out_bias && !o->rope && !o->qk_norm && !o->sinks;
}

/* The parameters, in the order q, k, v weights, their biases, c_proj weight and bias (GPT-2's
 * names), or q_proj, k_proj, v_proj, their biases if any, o_proj weight and bias if any,
 * q_norm and k_norm weights if any, sinks if any (Hugging Face's order). */
static int attention_params(nnt_layer *l, attention *a, int64_t C, int64_t NH, int64_t NKV,
                            int64_t hd, const nnt_attention_options *o, const nnt_tiling *t)
{
    int n = !is_gpt2(o, NH), full = o->qk_norm == 2;
    a->gpt2 = !n;
    a->fused = n && o->fused_qkv;
    int64_t ct = gl_tile(t->channels, C), nt = gl_tile(t->heads, NH);
    int64_t kt = gl_tile(t->heads, NKV), dt = gl_tile(t->head_dim, hd);
    if (full)   /* the norm reads each token's whole projection: heads untiled */
        nt = NH, kt = NKV, dt = hd;
    int64_t w[3] = {NH, hd, C}, w_tile[3] = {nt, dt, ct};
    int64_t wk[3] = {NKV, hd, C}, wk_tile[3] = {kt, dt, ct};
    int64_t pw[3] = {C, NH, hd}, pw_tile[3] = {ct, nt, dt};
    for (int i = 0; i < 3; i++)
        NNT_TRY(nnt_layer_new_param(l, QKV_WEIGHT[n][i], 3, i ? wk : w, i ? wk_tile : w_tile, 1,
                                NNT_INIT_NORMAL, &a->w[i], NULL));
    for (int i = 0; o->qkv_bias && i < 3; i++)
        NNT_TRY(nnt_layer_new_param(l, QKV_BIAS[n][i], 2, i ? wk : w, i ? wk_tile : w_tile, 0,
                                NNT_INIT_ZERO, &a->b[i], NULL));
    NNT_TRY(nnt_layer_new_param(l, OUT_WEIGHT[n], 3, pw, pw_tile, 1, NNT_INIT_NORMAL_PROJ,
                            &a->pw, NULL));
    /* the weights its products read, known from the start (the release window counts them) */
    for (int i = 0; i < 3; i++)
        NNT_TRY(nnt_layer_note_weight_read(l, a->w[i], &a->w16[i]));
    NNT_TRY(nnt_layer_note_weight_read(l, a->pw, &a->pw16));
    if (o->out_bias)
        NNT_TRY(nnt_layer_new_param(l, OUT_BIAS[n], 1, pw, pw_tile, 0, NNT_INIT_ZERO, &a->pb,
                                    NULL));
    int64_t norm[1] = {hd}, norm_tile[1] = {dt};
    a->qk_eps = o->qk_norm_eps;
    a->qk_full = full;
    for (int i = 0; o->qk_norm && i < 2; i++) {
        if (full)   /* (NH hd), (NKV hd) */
            norm[0] = norm_tile[0] = (i ? NKV : NH) * hd;
        NNT_TRY(nnt_layer_new_param(l, QK_NORM[i], 1, norm, norm_tile, 0,
                                    o->qk_norm_plus_one ? NNT_INIT_ZERO : NNT_INIT_ONE,
                                    &a->qkn[i], NULL));
    }
    int64_t sinks[1] = {NH}, sinks_tile[1] = {nt};
    if (o->sinks)   /* (NH), tiled as q's heads (the op's sinks) */
        NNT_TRY(nnt_layer_new_param(l, "sinks", 1, sinks, sinks_tile, 1, NNT_INIT_NORMAL,
                                    &a->sinks, NULL));
    return NNT_OK;
}

int gl_attention_options(nnt_ctx *ctx, const nnt_attention_options *opts, const char *fn,
                         nnt_attention_options *out)
{
    static const nnt_attention_options gpt2 = NNT_ATTENTION_OPTIONS_INIT;
    *out = gpt2;
    if (!opts)
        return NNT_OK;
    NNT_TRY(nnt_check_struct_size(ctx, fn, "attention options size", opts->size,
                                  sizeof(nnt_attention_options),
                                  offsetof(nnt_attention_options, sinks),
                                  "use NNT_ATTENTION_OPTIONS_INIT"));
    memcpy(out, opts, opts->size);   /* the fields after a shorter size keep their 0 */
    out->size = sizeof *out;
    if (out->window < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: window %lld is negative (0: none)", fn,
                        (long long)out->window);
    if (out->kv_heads < 0 || out->head_dim < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s %lld is negative", fn,
                        out->kv_heads < 0 ? "kv_heads" : "head_dim",
                        (long long)(out->kv_heads < 0 ? out->kv_heads : out->head_dim));
    if (!isfinite(out->scale) || out->scale < 0.0 || !isfinite(out->softcap) ||
        out->softcap < 0.0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: scale %g and softcap %g must be finite and >= 0 "
                        "(0: 1 / sqrt(hd), none)", fn, out->scale, out->softcap);
    if (out->qk_norm < 0 || out->qk_norm > 2)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: qk_norm %d (0: none, 1: per head, 2: over the "
                        "whole projection)", fn, out->qk_norm);
    if (out->qk_norm && !(out->qk_norm_eps > 0.0 && isfinite(out->qk_norm_eps)))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: qk_norm_eps %g must be finite and > 0", fn,
                        out->qk_norm_eps);
    if (opts->rope) {   /* the checks of nnt_tensor_rope */
        nnt_rope_options rope;
        return nnt_rope_options_read(fn, opts->rope, &rope);
    }
    return NNT_OK;
}

int gl_attention_new(nnt_ctx *ctx, int64_t channels, int64_t heads,
                     const nnt_attention_options *opts, const nnt_tiling *tiling,
                     const char *fn, nnt_layer **out)
{
    nnt_tiling t;
    nnt_attention_options o;
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &attention_vt, sizeof(attention), fn, &l));
    int rc = gl_tiling(ctx, tiling, fn, &t);
    if (rc == 0)
        rc = gl_attention_options(ctx, opts, fn, &o);
    int64_t nkv = o.kv_heads ? o.kv_heads : heads;
    if (rc == 0 && (channels < 1 || heads < 1 || (!o.head_dim && channels % heads)))
        rc = nnt_fail(ctx, NNT_E_INVAL, "%s: channels %lld must be a positive multiple of "
                      "heads %lld (or head_dim given)", fn, (long long)channels,
                      (long long)heads);
    int64_t hd = rc ? 0 : o.head_dim ? o.head_dim : channels / heads;
    if (rc == 0 && heads % nkv)
        rc = nnt_fail(ctx, NNT_E_INVAL, "%s: kv_heads %lld does not divide heads %lld", fn,
                      (long long)nkv, (long long)heads);
    if (rc == 0 && o.rope) {
        int64_t dt = gl_tile(t.head_dim, hd), half = nnt_rope_rotary_dim(o.rope, hd) / 2;
        if (hd % 2 || (dt != hd && half % dt))
            rc = nnt_fail(ctx, NNT_E_INVAL, "%s: rotary positions need an even head dimension "
                          "(%lld) whose tile (%lld) is whole or divides half the rotary "
                          "dimension (%lld)", fn, (long long)hd, (long long)dt,
                          (long long)half);
    }
    attention *a = l->impl;
    if (rc == 0) {
        a->window = o.window;
        a->softcap = o.softcap;
        a->qk_plus_one = o.qk_norm && o.qk_norm_plus_one;
    }
    if (rc == 0 && o.rope) {
        a->has_rope = 1;
        rc = nnt_rope_options_read(fn, o.rope, &a->rope);
    }
    if (rc == 0 && o.rope)
        rc = nnt_rope_check_head(fn, &a->rope, hd);
    if (rc == 0)   /* the options' (0: 1 / sqrt(hd)); YaRN's and LongRoPE's attention factor
                    * is the rope op's, on the rotated entries as transformers has it */
        a->scale = o.scale != 0.0 ? o.scale : 1.0 / sqrt((double)hd);
    if (rc == 0)
        rc = attention_params(l, a, channels, heads, nkv, hd, &o, &t);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;
    return NNT_OK;
}

NNT_API int nnt_layer_attention_create(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                       const nnt_tiling *tiling, nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(gl_attention_new(ctx, channels, heads, NULL, tiling, "nnt_layer_attention_create",
                         &l));
    return nnt_layer_finish(l, 0, out);
}

NNT_API int nnt_layer_attention_create_ex(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                          const nnt_attention_options *opts,
                                          const nnt_tiling *tiling, nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(gl_attention_new(ctx, channels, heads, opts, tiling,
                         "nnt_layer_attention_create_ex", &l));
    return nnt_layer_finish(l, 0, out);
}
