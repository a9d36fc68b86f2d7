/* SPDX-License-Identifier: MIT */
/* Helpers shared by the generic layer kinds (embedding, layernorm, linear, attention,
 * lm_head, cross_entropy, mlp, block, sequential), defined in lib/layers/leaf.c, and the
 * creation functions the composites use: they build a child without initialising it, so
 * that the composite initialises its whole subtree once (nnt_layer_init). */
#ifndef NNT_LAYERS_GENERIC_H
#define NNT_LAYERS_GENERIC_H

#include "layer.h"

/* *out = *tiling (all automatic if NULL); NNT_E_INVAL naming fn for a bad size field or an
 * entry below -1. */
int gl_tiling(nnt_ctx *ctx, const nnt_tiling *tiling, const char *fn, nnt_tiling *out);
/* The tile of a dimension of size n from a tiling entry: 0 or -1 give the whole dimension
 * (the generic layers have no heuristic), more than n too. */
int64_t gl_tile(int64_t entry, int64_t n);

/* *out = src if its tiling is tile (clamped), else *cache (a tensor of the layer, re-created
 * when needed) holding a copy of src in that tiling. */
int gl_retiled(nnt_layer *l, nnt_tensor *src, const int64_t *tile, nnt_tensor **cache,
               nnt_tensor **out);
/* dst += src for any two tilings of one shape; *tmp: the layer's scratch for a retiling. */
int gl_add_into(nnt_layer *l, nnt_tensor *src, nnt_tensor *dst, nnt_tensor **tmp);
/* NNT_E_SHAPE naming fn unless dy has y's shape (its tiling may differ); then *out is dy in
 * y's tiling (dy itself or *cache). */
int gl_dy_like(nnt_layer *l, nnt_tensor *dy, nnt_tensor *y, const char *fn, nnt_tensor **cache,
               nnt_tensor **out);

/* Leaves and composites without their final nnt_layer_init. in_tile / out_tile: the tiles
 * of the linear layer's input and output features. */
int gl_layernorm_new(nnt_ctx *ctx, int64_t channels, double eps, const nnt_tiling *t,
                     const char *fn, nnt_layer **out);
int gl_rmsnorm_new(nnt_ctx *ctx, int64_t channels, double eps, const nnt_tiling *t,
                   const char *fn, nnt_layer **out);
int gl_linear_new(nnt_ctx *ctx, int64_t in, int64_t out_features, unsigned flags,
                  int64_t in_tile, int64_t out_tile, const char *fn, nnt_layer **out);
/* opts NULL: the INIT options (GPT-2's). */
int gl_attention_new(nnt_ctx *ctx, int64_t channels, int64_t heads,
                     const nnt_attention_options *opts, const nnt_tiling *t, const char *fn,
                     nnt_layer **out);
int gl_mlp_new(nnt_ctx *ctx, int64_t channels, int64_t hidden, const nnt_mlp_options *opts,
               const nnt_tiling *t, const char *fn, nnt_layer **out);
/* The mixture-of-experts MLP of o (kind NNT_MLP_MOE; lib/layers/moe.c), not initialised:
 * experts of hidden units. */
int gl_moe_new(nnt_ctx *ctx, int64_t channels, int64_t hidden, const nnt_mlp_options *o,
               const nnt_tiling *t, const char *fn, nnt_layer **out);
/* The load-balancing loss times its coefficient over the MoE layers of root's tree, from
 * their last forwards (0 without MoE layers or coefficient). */
int gl_moe_aux_loss(const nnt_layer *root, double *value);
/* A block (opts NULL: GPT-2's), not initialised. */
int gl_block_new(nnt_ctx *ctx, int64_t channels, int64_t heads, int64_t hidden,
                 const nnt_block_options *opts, const nnt_tiling *tiling, const char *fn,
                 nnt_layer **out);
/* Set the recompute flag of a block (1), or do nothing for another kind (0). */
int gl_block_set_recompute(nnt_layer *l, int enable);
/* An embedding whose token table is the parameter table_name ("wte.weight" in
 * nnt_layer_embedding_create), not initialised. */
int gl_embedding_new(nnt_ctx *ctx, int64_t vocab, int64_t max_seq, int64_t channels,
                     const nnt_tiling *tiling, const char *table_name, const char *fn,
                     nnt_layer **out);
/* The tied LM head of an embedding made here. */
int gl_lm_head_new(nnt_layer *embedding, const char *fn, nnt_layer **out);
/* Run the children in order (forward), in reverse order (backward; dy NULL when the last
 * child has targets). A child without input gradient, an embedding, can only come first:
 * it alone takes int32 tokens. window: nnt_layer_release_window before each child (a chain of
 * blocks; not the products inside one). */
int gl_chain_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y, int window);
int gl_chain_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx, int window);
/* The tensor a forward's products read for the weight w: w itself, or under
 * NNT_PRECISION_BF16 its bf16 copy *copy (an activation of l: nnt_layer_ensure), converted
 * from w now, once for all the tasks that read it. The conversion rounds to nearest even,
 * the bits each product's own rounding of the fp32 tile gives, so results do not change:
 * the products read half the bytes and round nothing. While the context's weights_fixed
 * is set (generation after its first forward) an existing copy is read as it is, not
 * converted again for every token. In other precisions *copy is released. The backward of that forward reads gl_weight_read(w, *copy). */
int gl_weight_operand(nnt_layer *l, nnt_tensor *w, nnt_tensor **copy, nnt_tensor **operand);
static inline nnt_tensor *gl_weight_read(nnt_tensor *w, nnt_tensor *copy)
{
    return copy ? copy : w;
}
/* 1 if l is a cross_entropy layer whose targets are set (nnt_layer_set_targets with a
 * tensor, not NULL), else 0. */
int gl_cross_entropy_has_targets(const nnt_layer *l);
/* *out = *opts (NNT_ATTENTION_OPTIONS_INIT if NULL), checked; NNT_E_INVAL naming fn. The
 * rope pointer is copied as is (the caller copies what it points to). */
int gl_attention_options(nnt_ctx *ctx, const nnt_attention_options *opts, const char *fn,
                         nnt_attention_options *out);

/* ---- forward with a key/value cache (generation) ---- */

/* Where a cached forward's T new positions go: after past cached ones, in caches of len
 * positions whose sequence tile is seq_tile (0: one tile). */
typedef struct gl_cache_pos {
    int64_t past, len, seq_tile;
} gl_cache_pos;
/* Rows [r0, r0 + n) of dimension dim of src into rows [d0, d0 + n) of dst (the other
 * dimensions equal in size; any tilings): one copy task per meeting pair of tiles. */
int gl_copy_rows(nnt_tensor *src, int dim, int64_t r0, nnt_tensor *dst, int64_t d0, int64_t n);
/* The embedding's forward for tokens at positions past .. past + T - 1 (wpe rows). */
int gl_embedding_forward_at(nnt_layer *l, nnt_tensor *x, int64_t past, nnt_tensor **y);
/* The attention layer's forward of x (B, T, C) at positions at->past ..: its k, v written
 * into its caches (created, zeroed, at past 0), queries against all cached keys
 * (nnt_tensor_attention_kv). No backward may follow. */
int gl_attention_forward_cached(nnt_layer *l, nnt_tensor *x, const gl_cache_pos *at,
                                nnt_tensor **y);
void gl_attention_release_cache(nnt_layer *l);
/* The forward of l at positions at->past ..: an embedding at an offset, an attention layer or
 * a block (its attention) with the caches, a sequential layer child by child, any other
 * kind (position-free) its ordinary forward. */
int gl_forward_cached(nnt_layer *l, nnt_tensor *x, const gl_cache_pos *at, nnt_tensor **y);
/* Free the key/value caches of the subtree. */
void gl_release_caches(nnt_layer *l);

#endif
