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
/* plus_one: the norm scales by 1 + weight (Gemma's RMSNorm; weight initialised to 0). */
int gl_rmsnorm_new_ex(nnt_ctx *ctx, int64_t channels, double eps, int plus_one,
                      const nnt_tiling *t, const char *fn, nnt_layer **out);
/* *out = 1 + w in *cache (an activation of l with w's layout; 1 + w rounded once in fp32,
 * as transformers' Gemma RMSNorm computes 1.0 + weight.float()). */
int gl_plus_one(nnt_layer *l, nnt_tensor *w, nnt_tensor **cache, nnt_tensor **out);
/* Multiply an embedding's output by (float) scale (Gemma: sqrt(C)); 1: none. */
int gl_embedding_set_scale(nnt_layer *embedding, double scale);
/* A soft-cap leaf (NNT_LAYER_SOFTCAP): y = tanh(x / cap) cap, cap > 0 (Gemma 2's final
 * logits), not initialised (no parameters). */
int gl_softcap_new(nnt_ctx *ctx, double cap, const char *fn, nnt_layer **out);
/* A scale leaf (NNT_LAYER_SCALE): y = x / divisor, divisor > 0, in place (its output is its
 * input, scaled; its backward scales the incoming gradient in place): Granite's
 * logits_scaling after the head, whose logits nothing else reads. x (1 / divisor) rounded
 * once, as transformers' x / divisor for a divisor that is a power of two (an ulp apart
 * otherwise). */
int gl_scale_new(nnt_ctx *ctx, double divisor, const char *fn, nnt_layer **out);
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
/* E when l is a MoE layer (children: 0 the router, 1 .. E the experts, SwiGLU MLPs whose
 * LoRA modules are gate_up_proj (fused) and their down_proj), else 0. */
int64_t gl_moe_experts(const nnt_layer *l);
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
/* The tables of tree that only lookups read (no product): each embedding's position table,
 * and its token table where no LM head of tree is tied to it; the first cap into tables,
 * their count returned. */
int gl_lookup_tables(const nnt_layer *tree, const nnt_tensor **tables, int cap);
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
 * converted again for every token. In other precisions *copy is released. The backward of
 * that forward reads gl_weight_read(w, *copy).
 * A frozen w of l's own that only products read is narrowed first (nnt_layer_param_narrow):
 * then, a bf16 tensor, it is the operand itself, with no copy. */
int gl_weight_operand(nnt_layer *l, nnt_tensor *w, nnt_tensor **copy, nnt_tensor **operand);
static inline nnt_tensor *gl_weight_read(nnt_tensor *w, nnt_tensor *copy)
{
    return copy ? copy : w;
}
/* 1 if l is a cross_entropy layer whose targets are set (nnt_layer_set_targets with a
 * tensor, not NULL), else 0. */
int gl_cross_entropy_has_targets(const nnt_layer *l);
/* A cross_entropy layer l whose backward writes the gradient over its input, the logits,
 * instead of a tensor of its own: one (..., V) tensor less, for a parent whose logits no
 * backward reads (a model: its head's and soft-cap's backwards read their inputs). */
void gl_cross_entropy_in_place(nnt_layer *l);
/* The NEFTune noise of the first embedding layer of l's tree (nnt_layer_set_neftune):
 * *alpha 0 without one. */
void gl_embedding_noise_of(nnt_layer *l, double *alpha, uint64_t *seed);
/* The label smoothing of the cross-entropy layer that takes l's targets (0: none or no such
 * layer). */
double gl_cross_entropy_smoothing(nnt_layer *l);
/* 1 if l is a loss layer of a model (cross_entropy, pairwise) whose targets are set. */
int gl_loss_has_targets(const nnt_layer *l);
/* A model's loss layer l's host copy of its targets (n of them; ignore: its ignore index):
 * 1 when it has targets, else 0 (*ids undefined). */
int gl_loss_targets(const nnt_layer *l, const int32_t **ids, int64_t *n, int32_t *ignore);
/* The one position of row (n targets) that is not ignore (the last, when *count, their
 * number, is above 1), or -1: a classifier's pooled position. */
int64_t gl_marked_position(const int32_t *row, int64_t n, int32_t ignore, int64_t *count);
/* A pairwise layer l's B pooled scores of its last forward with targets into scores: 1, or
 * 0 when l is no such layer (or has none of B rows). */
int gl_pairwise_scores(const nnt_layer *l, float *scores, int64_t B);
/* *out = *opts (NNT_ATTENTION_OPTIONS_INIT if NULL), checked; NNT_E_INVAL naming fn. The
 * rope pointer is copied as is (the caller copies what it points to). */
int gl_attention_options(nnt_ctx *ctx, const nnt_attention_options *opts, const char *fn,
                         nnt_attention_options *out);

/* ---- LoRA adapters (lib/layers/lora.c: the math; the linear and attention layers call it) ---- */

/* An adapter of one PEFT module: A (r, in...), and nparts outputs, each with its B_i
 * (out_i..., r) (GPT-2's c_attn: q, k, v). Its tensors are parameters of the layer that
 * holds it (marked adapter); u and du are that layer's activations. */
typedef struct gl_lora {
    int nparts, in_dims;            /* outputs; dims of the input's features              */
    double scale;                   /* s: alpha / r, or alpha / sqrt(r) (rsLoRA)          */
    nnt_tensor *a, *b[3];           // (r, in...), (out_i..., r)
    double dropout;                 /* PEFT's lora_dropout on the input (0: none)          */
    uint64_t seed;                  /* of its masks (the module's own)                     */
    int64_t passes;                 /* backwards done: a new mask for each                 */
    int dropped;                    /* the last forward applied the dropout                */
    nnt_tensor *x;                  // the input the last forward's products read (not owned)
    nnt_tensor *xd, *dxd;           // the input after the dropout, and d(du A) through it
    nnt_tensor *u, *du;             // (rows..., r) x A^T and its gradient
    char prefix[40];                /* of its parameters' names                            */
    const char *part_names[3];
    nnt_tensor *base[3], *bias[3];  // each part's base weight (out_i..., in...) and bias
                                    // (out_i...) or NULL (not owned)
    nnt_layer *owner[3];            // the layer whose parameters they are
    /* DoRA (PEFT's use_dora): y_i = base + (g_i - 1) t_i with t_i = x' W_i^T + s u B_i^T
     * (x' the adapter's input) and g_i = m_i / ||W_i + s B_i A|| per output feature, the norm
     * taken as a constant in the backward */
    int dora;
    nnt_tensor *m[3];               // (out_i...) lora_magnitude_vector, parameters
    nnt_tensor *n2[3];              // (out_i...) ||W_i + s B_i A||^2 of the last forward
    nnt_tensor *w2[3];              // (out_i...) ||W_i||^2, kept while W_i is unchanged:
    const void *w2_of[3];           //   the tiles and
    uint64_t w2_seen[3];            //   1 + the writes (nnt_tensor_writes) it was computed at
    nnt_tensor *gain[3], *rinv[3];  // (out_i...) m_i / norm, 1 / norm
    nnt_tensor *aat;                // (r, r) A A^T
    nnt_tensor *q[3];               // (out_i..., r) 2 s W_i A^T + s^2 B_i A A^T
    nnt_tensor *pt[3];              // (r, out_i...) 2 s A W_i^T (W_i the products' B operand)
    nnt_tensor *t[3];               // (rows..., out_i...) see above
    nnt_tensor *nbias[3];           // (out_i...) minus the bias
    nnt_tensor *wop[3];             // the base weight the forward's products read (not owned)
    nnt_tensor *gs[3], *h[3];       // backward temporaries: g g_i, and (g_i - 1) g when the
                                    // base map's product did not take g g_i
} gl_lora;

/* What an adapter looks like: parameter names "<prefix>lora_A.weight",
 * "<prefix>lora_B.weight" (one part) or "<prefix>lora_B.<part name>.weight"; A's in dims and
 * tiles (those of the base map's input features), each part's out dims and tiles (those of
 * its output's features). */
typedef struct gl_lora_spec {
    const char *prefix;
    int64_t rank;
    double scale;
    int in_dims;
    int64_t in[2], in_tile[2];
    int nparts;
    int out_dims[3];
    int64_t out[3][2], out_tile[3][2];
    const char *part_names[3];
    nnt_tensor *base[3], *bias[3];  /* the parts' base weights and biases (NULL: none)        */
    nnt_layer *owner[3];            /* whose parameters they are (NULL: the adapter's layer)  */
} gl_lora_spec;

/* Register an adapter's parameters in l (A, B_i uninitialised: nnt_layer_init_adapters). */
int gl_lora_new(nnt_layer *l, const gl_lora_spec *spec, gl_lora **out);
/* Remove it: its parameters and activations (NULL accepted). */
void gl_lora_free(nnt_layer *l, gl_lora *lo);
/* Forward: u = x A^T (x the base map's input in its product's tiling; with dropout, and
 * unless ctx->no_dropout, x with its dropout, a mask of seed and passes), then per part
 * y_i = s u B_i^T + beta y_i (the base product's output; beta 1 after it, 0 before). */
int gl_lora_begin(nnt_layer *l, gl_lora *lo, nnt_tensor *x);
/* w: the base weight part i's product read (gl_weight_operand). With DoRA beta is 1: y_i
 * holds x W_i^T + b_i, and becomes DoRA's output. */
int gl_lora_part(nnt_layer *l, gl_lora *lo, int i, nnt_tensor *y, double beta, nnt_tensor *w);
/* Backward: each part i in order (0 first) with g_i, the gradient of y_i: dB_i, du; then
 * dA and dx += du A (dx in the input's tiling, written already). g_base: where the gradient
 * the base map's products (dx, dW, not db) take is returned: g_i, or with DoRA (no dropout)
 * g_i times the gain; NULL: the base map takes g_i whatever (the adapter adds the rest to
 * dx in the finish). Call it before the base map's products. */
int gl_lora_backward_part(nnt_layer *l, gl_lora *lo, int i, nnt_tensor *g, nnt_tensor **g_base);
int gl_lora_backward_finish(nnt_layer *l, gl_lora *lo, nnt_tensor *dx);
/* W_i += s B_i A (the base weight of part i, (out_i..., in...)); with DoRA then each row
 * times m_i / ||W_i + s B_i A||. */
int gl_lora_merge(nnt_layer *l, gl_lora *lo, int i, nnt_tensor *w);
/* Make lo a DoRA adapter: its magnitudes "<prefix>lora_magnitude_vector" (one part) or
 * "...lora_magnitude_vector.<part>", parameters of l marked adapter (uninitialised). */
int gl_lora_dora_add(nnt_layer *l, gl_lora *lo);
/* m_i = ||W_i + s B_i A|| (PEFT's initialisation: at B = 0, the base rows' norms); a base
 * not written yet (initialised or read after the adapters) leaves m without data, and the
 * first forward or merge computes it then. */
int gl_lora_dora_init(nnt_layer *l, gl_lora *lo);

/* The modules of a layer an adapter can go on, NULL-terminated (NULL: none): a linear layer
 * "" (itself), an attention layer its projections "c_attn", "c_proj" (GPT-2's layout) or
 * "q_proj", "k_proj", "v_proj", "o_proj". */
const char *const *gl_lora_modules(const nnt_layer *l);
/* Add an adapter of rank r and scale s to module of l (NNT_E_INVAL when it has one). */
int gl_lora_attach(nnt_layer *l, const char *module, int64_t rank, double scale);
/* The adapter of a module of l, or NULL. */
gl_lora *gl_lora_of(nnt_layer *l, const char *module);
/* Remove the adapter of a module of l, unmerged (none: nothing). */
void gl_lora_remove(nnt_layer *l, const char *module);
/* Merge every adapter of l into its base weights and remove it. */
int gl_lora_merge_all(nnt_layer *l);
/* The kinds' own parts of the calls above (leaf.c, attention.c). */
const char *const *gl_linear_lora_modules(const nnt_layer *l);
int gl_linear_lora_attach(nnt_layer *l, int64_t rank, double scale);
gl_lora *gl_linear_lora_of(nnt_layer *l);
int gl_linear_lora_merge(nnt_layer *l);
const char *const *gl_attention_lora_modules(const nnt_layer *l);
int gl_attention_lora_attach(nnt_layer *l, const char *module, int64_t rank, double scale);
gl_lora *gl_attention_lora_of(nnt_layer *l, const char *module);
int gl_attention_lora_merge(nnt_layer *l);
void gl_linear_lora_remove(nnt_layer *l);
void gl_attention_lora_remove(nnt_layer *l, const char *module);
/* A SwiGLU / GeGLU MLP with fused_gate_up: its module "gate_up_proj" (parts gate, up);
 * NULL for other MLPs. */
const char *const *gl_mlp_lora_modules(const nnt_layer *l);
int gl_mlp_lora_attach(nnt_layer *l, int64_t rank, double scale);
gl_lora *gl_mlp_lora_of(nnt_layer *l);
int gl_mlp_lora_merge(nnt_layer *l);
void gl_mlp_lora_remove(nnt_layer *l);
/* A linear layer that lists no LoRA module (its parent adapts it within a fused one), its
 * weight (out, in), and its last forward's input in the weight's in tiling (the input itself
 * or the layer's retiled copy of it). */
void gl_linear_no_lora(nnt_layer *l);
nnt_tensor *gl_linear_weight(nnt_layer *l);
nnt_tensor *gl_linear_bias(nnt_layer *l);      /* (out) or NULL */
nnt_tensor *gl_linear_operand(nnt_layer *l);   /* the weight its last forward's product read */
nnt_tensor *gl_linear_input(nnt_layer *l);

/* ---- forward with a key/value cache (generation) ---- */

/* Where a cached forward's T new positions go: after past cached ones, in caches of len
 * positions whose sequence tile is seq_tile (0: one tile). positions: NULL, or the new
 * tokens' positions in their sequences (B, T) int32 (sequences of different lengths side by
 * side, each padded on the left, its pads an example of their own: the tokens' rotations,
 * position embeddings and the keys each query sees go by them, not by past + t). */
typedef struct gl_cache_pos {
    int64_t past, len, seq_tile;
    nnt_tensor *positions;
} gl_cache_pos;
/* Rows [r0, r0 + n) of dimension dim of src into rows [d0, d0 + n) of dst (the other
 * dimensions equal in size; any tilings): one copy task per meeting pair of tiles. */
int gl_copy_rows(nnt_tensor *src, int dim, int64_t r0, nnt_tensor *dst, int64_t d0, int64_t n);
/* The embedding's forward for tokens at positions past .. past + T - 1 (wpe rows), or at
 * positions (B, T) int32 when not NULL. */
int gl_embedding_forward_at(nnt_layer *l, nnt_tensor *x, int64_t past, nnt_tensor *positions,
                            nnt_tensor **y);
/* The attention layer's forward of x (B, T, C) at positions at->past ..: its k, v written
 * into its caches (created, zeroed, at past 0), queries against all cached keys
 * (nnt_tensor_attention_kv). A layer with a sliding window keeps only the last keys its
 * window needs when that saves memory (lib/layers/attention.c cache_rows); after the
 * prompt, one token at a time then. No backward may follow. */
int gl_attention_forward_cached(nnt_layer *l, nnt_tensor *x, const gl_cache_pos *at,
                                nnt_tensor **y);
void gl_attention_release_cache(nnt_layer *l);
/* The caches' rows (a prompt each) copied into nseq rows (B nseq, one tile): row r a copy of
 * row src[r] (src NULL: of row 0, every sequence continuing one prompt), each sequence then
 * continuing its prompt (a window's spare pair made anew with nseq rows); a layer without
 * caches is left alone. */
int gl_attention_expand_cache(nnt_layer *l, int64_t nseq, const int64_t *src);
/* The forward of l at positions at->past ..: an embedding at an offset, an attention layer or
 * a block (its attention) with the caches, a sequential layer child by child, any other
 * kind (position-free) its ordinary forward. */
int gl_forward_cached(nnt_layer *l, nnt_tensor *x, const gl_cache_pos *at, nnt_tensor **y);
/* Free the key/value caches of the subtree. */
void gl_release_caches(nnt_layer *l);
/* gl_attention_expand_cache over the subtree. */
int gl_expand_caches(nnt_layer *l, int64_t nseq, const int64_t *src);

#endif
