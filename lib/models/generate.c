/* SPDX-License-Identifier: MIT */
/* Text generation for every model (nnt_model_generate, nnt_gpt_generate): a tree of the
 * generic layers (NNT_LAYER_MODEL, transformer.c), or the one inside a GPT layer.
 *
 * The logits after the first n tokens come from the children up to the final norm, which
 * give hidden states (1, w, C) for w tokens; their last row is copied on the device into
 * (1, 1, C) and only that row goes through "lm_head", so that V logits are computed and come
 * back instead of (1, w, V). The "loss" child is not run: the targets set stay set.
 *
 * Key/value cache (window: max_seq for a tree, T for a GPT layer): while n <= window, the
 * prompt is run once (prefill: tokens (1, n) at positions 0 .., every attention layer
 * writing its keys and values into caches of min(window, the longest sequence decoded) rows,
 * gl_forward_cached), then each new
 * token alone (1, 1) at position n - 1 against the cached keys. Past the window the window
 * slides and positions restart at 0, so every key and value changes: each token is then a
 * forward over the last window tokens at positions 0 .. window - 1 (the ordinary forward,
 * as without a cache). nnt_sampling's no_cache runs every token that way. With LongRoPE the
 * token that takes the sequence past original_max_position runs as a prefill again, its
 * cached keys rotated anew with the long factors (transformers' Phi3ForCausalLM drops its
 * cache there).
 *
 * Several sequences (generate_n, generate_batch): each distinct prompt runs once, a row of
 * the prompts' forward each (P rows); its keys and values are then copied into a row for
 * every sequence that continues it (gl_expand_caches) and each step is one forward of the
 * nseq new tokens (nseq, 1), the weights read once for all. Prompts of different lengths are
 * padded on the left to the longest, so that every prompt ends at the same position: each
 * row's pads form an example of their own and its tokens take positions 0, 1, ... as alone
 * (the rows' positions go to the embedding, the rotations and the cached attention through
 * gl_cache_pos.positions), so a token never sees a pad.
 *
 * Under MPI the tensors a generation creates (token ids, activations, key/value caches,
 * logits) belong to rank 0 while it runs (the root distribution; gen_root_placement), so
 * that rank 0 runs every task of a token: the weights it reads from other ranks come once
 * (StarPU-MPI keeps received copies until their owner writes them) and a token costs one
 * transfer (its logits, which every rank samples alike) instead of one per tile that
 * changes rank: 14-25x faster on 2 ranks (bench/RESULTS-mpi.md). Not when rank 0 might
 * lack the memory for the copies: then the tensors stay spread as in training. */
#include "models.h"
#include "sample.h"

#include "../layers/generic.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The prompts of a generation, each different (one shared by every sequence: generate,
 * generate_n), which of them each sequence continues, and the sequences' seeds. */
typedef struct gen_prompts {
    int64_t n;                   /* prompts                                                  */
    const int32_t *const *ids;   // (n) the prompts
    const int64_t *len;          // (n) their lengths
    const int64_t *src;          // (nseq) sequence r continues prompt src[r]; NULL: all prompt 0
    const uint64_t *seeds;       // (nseq) each sequence's seed, or NULL: s's seed + its index
} gen_prompts;

/* What one generation holds. */
typedef struct gen {
    nnt_layer *model;
    gen_prompts p;
    int64_t longest;         /* the longest prompt: the prompts end at its last position,
                                the others padded on the left                              */
    int padded;              /* the prompts' lengths differ: the rows' positions are given  */
    int64_t window;          /* the most tokens a forward sees                            */
    int use_cache;
    int64_t cached;          /* positions in the caches (0: none)                         */
    int64_t cache_len;       /* rows of the caches: the most positions decoded, <= window */
    int64_t reprefill;       /* n at which the caches are computed again (LongRoPE's switch to
                                its long factors: original_max_position + 1); 0: none     */
    int64_t nseq;            /* sequences generated side by side (a batch of nseq rows)   */
    int64_t rows;            /* the last forward's rows: a prompt each for the prompts (one
                                they all share: 1), then nseq                              */
    int64_t cache_seqs;      /* the caches' rows: the prompts' after them                  */
    int32_t *ids;            // (nseq, window) host copy of the windows
    int32_t *pos;            // (nseq, window) their positions in their sequences (padded)
    float *logits;           // (nseq, V) the last forward's logits (a row a prompt after them)
    uint64_t (*rng)[4];      // (nseq) a sampling generator a sequence
    nnt_tensor *tokens;      // (rows, w) int32, one tile
    nnt_tensor *positions;   // (rows, w) int32, one tile (padded)
    nnt_tensor *last;        // (rows, 1, C) the final norm's output at the last position
    nnt_sampler sm;
} gen;

static void gen_free(gen *g)
{
    nnt_tensor_destroy(g->tokens);
    nnt_tensor_destroy(g->positions);
    nnt_tensor_destroy(g->last);
    gl_release_caches(g->model);
    free(g->ids);
    free(g->pos);
    free(g->logits);
    free(g->rng);
    nnt_sampler_free(&g->sm);
}

/* Under MPI, whether the generation's tensors go to rank 0 (see the top of this file): when
 * a rank's share of the tiles and the weights it would receive fit in 3/4 of the smallest
 * rank's memory. Only figures every rank has alike decide, so that all decide the same. */
static int gen_root_placement(nnt_layer *model)
{
    nnt_ctx *ctx = model->ctx;
    if (!ctx->mpi || ctx->nranks < 2 || ctx->distribution == NNT_DIST_ROOT)
        return 0;
    int64_t numel = 0;
    if (nnt_layer_num_params(model, NULL, &numel) != NNT_OK)
        return 0;
    int64_t weights = numel * (ctx->precision == NNT_PRECISION_BF16 ? 6 : 4);   /* + bf16 */
    pthread_mutex_lock(&ctx->lock);
    int64_t share = ctx->tile_bytes / ctx->nranks;   /* tile_bytes: every rank's tiles */
    pthread_mutex_unlock(&ctx->lock);
    int fits = share + weights <= ctx->min_rank_ram / 4 * 3;
    nnt_log(NNT_LOG_INFO, "generation under MPI: %s (%.1f MiB of tiles a rank, %.1f MiB of "
            "weights, %.0f MiB on the smallest rank)", fits ? "on rank 0" : "spread over the "
            "ranks, as rank 0 may lack the memory for every weight", share / 1048576.0,
            weights / 1048576.0, ctx->min_rank_ram / 1048576.0);
    return fits;
}

/* No backward may follow: the activations of the earlier forward are overwritten. */
static void cancel_backward(nnt_layer *l)
{
    l->forward_pending = 0;
    for (int i = 0; i < l->nchildren; i++)
        cancel_backward(l->children[i]);
}

/* (Re)create *t as (dtype, ndim, shape) with tile unless it already is one. */
static int ensure(nnt_ctx *ctx, nnt_tensor **t, nnt_dtype dtype, int ndim,
                  const int64_t *shape, const int64_t *tile)
{
    nnt_tensor *x = *t;
    int same = x && x->dtype == dtype && x->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = x->shape[d] == shape[d] && x->tile[d] == (tile[d] < shape[d] ? tile[d] : shape[d]);
    if (same)
        return NNT_OK;
    nnt_tensor_destroy(x);
    *t = NULL;
    return nnt_tensor_create(ctx, dtype, ndim, shape, tile, t);
}

/* dst (B, 1, C), tiles (src's B tile, 1, src's C tile) = the last row of src (B, w, C), any
 * tiling. */
static int copy_last_row(nnt_ctx *ctx, nnt_tensor *src, nnt_tensor **dst)
{
    int64_t shape[3] = {src->shape[0], 1, src->shape[2]};
    int64_t tile[3] = {src->tile[0], 1, src->tile[2]};
    NNT_TRY(ensure(ctx, dst, NNT_FP32, 3, shape, tile));
    return gl_copy_rows(src, 1, src->shape[1] - 1, *dst, 0, 1);
}

/* the prompt sequence r continues */
static int64_t prompt_of_seq(const gen *g, int64_t r)
{
    return g->p.src ? g->p.src[r] : 0;
}

/* The prompt of row r of a forward of g->rows rows (the prompts' forward: a row a prompt,
 * then a row a sequence) */
static int64_t prompt_of(const gen *g, int64_t r)
{
    return g->rows == g->nseq ? prompt_of_seq(g, r) : r;
}

/* Row r's token at position c of the rows (the prompts padded on the left to the longest;
 * out: (nseq, ngen), each sequence's tokens so far) and its position in its sequence (a pad
 * at c: c, its pads an example of their own). */
static int32_t token_at(const gen *g, const int32_t *out, int64_t ngen, int64_t r, int64_t c,
                        int32_t *pos)
{
    int64_t k = prompt_of(g, r), pad = g->longest - g->p.len[k];
    const int32_t *prompt = g->p.ids[k];
    *pos = (int32_t)(c < pad ? c : c - pad);
    return c < pad ? prompt[0]
                   : nnt_generate_token_at(prompt, g->p.len[k], out + r * ngen, c - pad);
}

/* The token ids (g->rows, w) of positions n - w .. n - 1 of the rows into g->tokens, their
 * positions into g->positions (padded; *positions then that, else NULL). */
static int gen_inputs(gen *g, const int32_t *out, int64_t ngen, int64_t n, int64_t w,
                      nnt_tensor **positions)
{
    nnt_ctx *ctx = g->model->ctx;
    int64_t rows = g->rows, shape[2] = {rows, w};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < w; j++)
            g->ids[r * w + j] = token_at(g, out, ngen, r, n - w + j, &g->pos[r * w + j]);
    NNT_TRY(ensure(ctx, &g->tokens, NNT_INT32, 2, shape, shape));
    NNT_TRY(nnt_tensor_copy_from_host(g->tokens, g->ids, (size_t)(rows * w) * sizeof *g->ids));
    *positions = NULL;
    if (!g->padded)
        return NNT_OK;
    NNT_TRY(ensure(ctx, &g->positions, NNT_INT32, 2, shape, shape));
    NNT_TRY(nnt_tensor_copy_from_host(g->positions, g->pos, (size_t)(rows * w) * sizeof *g->pos));
    *positions = g->positions;
    return NNT_OK;
}

/* The logits (V) after the first n positions of each row into g->logits, a row a sequence
 * (out: (nseq, ngen), each sequence's tokens so far); a row a prompt while n is the longest
 * prompt's length. Children: the embedding, the blocks, the final norm, the head, (a
 * soft-cap,) the loss: the head and what follows it run on the last position only. */
static int gen_logits(gen *g, const int32_t *out, int64_t ngen, int64_t n)
{
    nnt_layer *m = g->model;
    int decode = g->use_cache && n <= g->window && g->cached == n - 1 && g->cached > 0 &&
                 n != g->reprefill;
    int prefill = g->use_cache && n <= g->window && !decode;
    int64_t rows = g->rows = n == g->longest ? g->p.n : g->nseq;
    int64_t w = decode ? 1 : (n < g->window ? n : g->window);
    gl_cache_pos at = {decode ? n - 1 : 0, g->cache_len, 0, NULL};
    if (decode && g->cache_seqs != rows) {   /* the prompts' keys and values, every row's */
        NNT_TRY(gl_expand_caches(m, rows, g->p.src));
        g->cache_seqs = rows;
    }
    NNT_TRY(gen_inputs(g, out, ngen, n, w, &at.positions));
    nnt_tensor *x = g->tokens, *logits = NULL;   // (rows, w) -> (rows, w, C)
    int head = m->nchildren - 2;   /* lm_head: before the soft-cap or the logits' scale */
    while (m->children[head]->vt->kind == NNT_LAYER_SOFTCAP ||
           m->children[head]->vt->kind == NNT_LAYER_SCALE)
        head--;
    g->cached = 0;   /* until this forward has been submitted whole */
    for (int i = 0; i < head; i++)
        NNT_TRY(decode || prefill ? gl_forward_cached(m->children[i], x, &at, &x)
                                  : nnt_layer_forward(m->children[i], x, &x));
    g->cached = decode || prefill ? n : 0;
    g->cache_seqs = decode || prefill ? rows : g->cache_seqs;
    NNT_TRY(copy_last_row(m->ctx, x, &g->last));
    logits = g->last;
    for (int i = head; i < m->nchildren - 1; i++)   // (rows, 1, C) -> (rows, 1, V)
        NNT_TRY(nnt_layer_forward(m->children[i], logits, &logits));
    return nnt_tensor_copy_to_host(logits, g->logits, (size_t)(rows * g->sm.V) * sizeof(float));
}

/* token ends the generation: s's eos or one of its eos_ids */
static int is_eos(const nnt_sampling *s, int32_t token)
{
    if (s->eos >= 0 && token == s->eos)
        return 1;
    for (int64_t k = 0; k < s->n_eos_ids; k++)
        if (token == s->eos_ids[k])
            return 1;
    return 0;
}

/* The buffers of g for nseq sequences over V tokens (NNT_E_NOMEM naming fn); each
 * sequence's generator seeded with its seed (g->p.seeds), else seed + its index. */
static int gen_alloc(gen *g, const nnt_ctx *ctx, const char *fn, int64_t V, uint64_t seed)
{
    size_t nseq = (size_t)g->nseq;
    g->ids = malloc(nseq * (size_t)g->window * sizeof *g->ids);
    g->pos = malloc(nseq * (size_t)g->window * sizeof *g->pos);
    g->logits = malloc(nseq * (size_t)V * sizeof *g->logits);
    g->rng = malloc(nseq * sizeof *g->rng);
    if (!g->ids || !g->pos || !g->logits || !g->rng)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory (%lld sequences over %lld tokens)",
                        fn, (long long)g->nseq, (long long)V);
    for (size_t r = 0; r < nseq; r++)
        nnt_sampler_seed(g->rng[r], g->p.seeds ? g->p.seeds[r] : seed + r);
    return NNT_OK;
}

/* Step i's token of every sequence not yet ended from g->logits (g->rows of them: a row a
 * prompt after the prompts) into out (nseq, ngen); *live: the sequences not ended,
 * less those that end here (their eos then fills the rest of their row). */
static int gen_pick(gen *g, nnt_ctx *ctx, const char *fn, const nnt_sampling *s, int64_t i,
                    int64_t ngen, int32_t *out, float *trace, int64_t *live)
{
    int64_t V = g->sm.V;
    for (int64_t r = 0; r < g->nseq; r++) {
        int32_t *o = out + r * ngen;
        if (i > 0 && is_eos(s, o[i - 1]))
            continue;   /* ended */
        const float *lr = g->logits + (g->rows == g->nseq ? r : prompt_of_seq(g, r)) * V;
        if (trace)
            memcpy(trace + (r * ngen + i) * V, lr, (size_t)V * sizeof *trace);
        const int64_t src = prompt_of_seq(g, r);
        const nnt_sample_seq seq = {g->p.ids[src], g->p.len[src], o, i};
        NNT_TRY(nnt_sampler_pick(&g->sm, ctx, fn, lr, &seq, g->rng[r], &o[i]));
        if (s->on_token)
            s->on_token(s->on_token_arg, r * ngen + i, o[i]);
        if (is_eos(s, o[i])) {   /* the rest is that eos, unrun */
            for (int64_t j = i + 1; j < ngen; j++)
                o[j] = o[i];
            (*live)--;
        }
    }
    return NNT_OK;
}

/* model: the tree of cfg's model (window: the most tokens a forward sees); p: the prompts
 * (several: with a cache, the longest of them and ngen - 1 within the window) */
static int tree_generate(nnt_layer *model, const char *fn, const nnt_model_config *cfg,
                         int64_t window, const gen_prompts *p, int64_t nseq, int64_t ngen,
                         const nnt_sampling *s, int32_t *out, float *trace)
{
    int64_t V = cfg->vocab;
    nnt_layer *loss = model->nchildren >= 3 ? model->children[model->nchildren - 1] : NULL;
    if (!loss || loss->vt->kind != NNT_LAYER_CROSS_ENTROPY)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: the model does not end in a head and a "
                        "cross-entropy layer", fn);
    gen g;
    memset(&g, 0, sizeof g);
    g.model = model;
    g.p = *p;
    for (int64_t k = 0; k < p->n; k++)
        g.longest = p->len[k] > g.longest ? p->len[k] : g.longest;
    for (int64_t k = 0; k < p->n; k++)
        g.padded |= p->len[k] != g.longest;
    g.window = window;
    g.nseq = nseq;
    g.use_cache = !s->no_cache;
    g.cache_len = g.longest + ngen - 1 < window ? g.longest + ngen - 1 : window;
    if (cfg->rope.scaling == NNT_ROPE_SCALING_LONGROPE)
        g.reprefill = cfg->rope.original_max_position + 1;
    int rc = nnt_sampler_init(&g.sm, model->ctx, fn, V, s->temperature, s->top_k);
    g.sm.top_p = s->top_p;
    g.sm.min_p = s->min_p;
    g.sm.repetition_penalty = s->repetition_penalty;
    g.sm.typical_p = s->typical_p;
    g.sm.epsilon_cutoff = s->epsilon_cutoff;
    g.sm.eta_cutoff = s->eta_cutoff;
    g.sm.no_repeat_ngram = s->no_repeat_ngram_size;
    if (rc == 0)
        rc = gen_alloc(&g, model->ctx, fn, V, s->seed);
    int distribution = model->ctx->distribution;
    if (rc == 0 && gen_root_placement(model))
        model->ctx->distribution = NNT_DIST_ROOT;   /* for the tensors created from here */
    model->ctx->no_dropout = 1;
    int64_t live = nseq;
    for (int64_t i = 0; i < ngen && rc == 0 && live > 0; i++) {
        rc = gen_logits(&g, out, ngen, g.longest + i);
        /* the weights do not change while generating: their bf16 copies (made by the first
         * forward under NNT_PRECISION_BF16) serve every later token */
        model->ctx->weights_fixed = 1;
        if (rc == 0)
            rc = gen_pick(&g, model->ctx, fn, s, i, ngen, out, trace, &live);
    }
    model->ctx->weights_fixed = 0;
    model->ctx->no_dropout = 0;
    model->ctx->distribution = distribution;
    cancel_backward(model);
    gen_free(&g);
    return rc;
}

/* *out = *s with the fields a smaller (older) size lacks at their defaults; greedy with the
 * defaults if s is NULL. Checks them. */
static int read_sampling(const nnt_ctx *ctx, const char *fn, const nnt_sampling *s, int64_t V,
                         nnt_sampling *out)
{
    static const nnt_sampling defaults = NNT_SAMPLING_INIT;
    *out = defaults;
    if (!s) {
        out->temperature = 0.0;
        out->top_k = 0;
        return NNT_OK;
    }
    /* the 0.2 struct ends before top_p, 0.3's first form before eos_ids, 0.3's last before
     * repetition_penalty */
    static const size_t older[3] = {offsetof(nnt_sampling, top_p),
                                    offsetof(nnt_sampling, eos_ids),
                                    offsetof(nnt_sampling, repetition_penalty)};
    NNT_TRY(nnt_check_struct_sizes(ctx, fn, "s->size", s->size, sizeof(nnt_sampling), older, 3,
                                   "initialise it with NNT_SAMPLING_INIT"));
    memcpy(out, s, s->size);
    out->size = sizeof *out;
    if (!(out->top_p > 0.0 && out->top_p <= 1.0))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: top_p %g must be in (0, 1] (1: all tokens)", fn,
                        out->top_p);
    if (!(out->min_p >= 0.0 && out->min_p <= 1.0))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: min_p %g must be in [0, 1] (0: all tokens)", fn,
                        out->min_p);
    if (!(out->repetition_penalty > 0.0 && isfinite(out->repetition_penalty)))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: repetition_penalty %g must be finite and above 0 "
                        "(1: none)", fn, out->repetition_penalty);
    if (!(out->typical_p > 0.0 && out->typical_p <= 1.0))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: typical_p %g must be in (0, 1] (1: none)", fn,
                        out->typical_p);
    const double cuts[2] = {out->epsilon_cutoff, out->eta_cutoff};
    for (int i = 0; i < 2; i++)
        if (!(cuts[i] >= 0.0 && cuts[i] < 1.0))
            return nnt_fail(ctx, NNT_E_INVAL, "%s: %s %g must be in [0, 1) (0: none)", fn,
                            i ? "eta_cutoff" : "epsilon_cutoff", cuts[i]);
    if (out->no_repeat_ngram_size < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: no_repeat_ngram_size %lld must be >= 0 (0: none)",
                        fn, (long long)out->no_repeat_ngram_size);
    if (out->eos < -1 || out->eos >= V)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: eos %d must be -1 (none) or in [0, %lld)", fn,
                        (int)out->eos, (long long)V);
    if (out->n_eos_ids < 0 || (out->n_eos_ids > 0 && !out->eos_ids))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: eos_ids: %s", fn, out->n_eos_ids < 0
                        ? "n_eos_ids is negative" : "NULL with n_eos_ids > 0");
    for (int64_t k = 0; k < out->n_eos_ids; k++)
        if (out->eos_ids[k] < 0 || out->eos_ids[k] >= V)
            return nnt_fail(ctx, NNT_E_INVAL, "%s: eos_ids[%lld] %d must be in [0, %lld) (the "
                            "model's vocabulary)", fn, (long long)k, (int)out->eos_ids[k],
                            (long long)V);
    return NNT_OK;
}

int nnt_model_run_generate(nnt_layer *model, const char *fn, const int32_t *prompt,
                           int64_t nprompt, int64_t ngen, const nnt_sampling *s, int32_t *out)
{
    return nnt_model_generate_trace(model, fn, prompt, nprompt, ngen, s, out, NULL);
}

int nnt_model_generate_trace(nnt_layer *model, const char *fn, const int32_t *prompt,
                             int64_t nprompt, int64_t ngen, const nnt_sampling *s,
                             int32_t *out, float *trace)
{
    return nnt_model_generate_n_trace(model, fn, prompt, nprompt, 1, ngen, s, out, trace);
}

/* The checks every generation makes (errors naming fn): model's configuration into *cfg, the
 * sampling settings into *s. */
static int gen_setup(nnt_layer *model, const char *fn, const nnt_sampling *user, int64_t nseq,
                     int64_t ngen, nnt_model_config *cfg, nnt_sampling *s)
{
    NNT_TRY(nnt_model_config_get(model, fn, cfg));
    if (cfg->num_labels > 0)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: a classifier (num_labels %lld) has no "
                        "language model head to generate with", fn, (long long)cfg->num_labels);
    NNT_TRY(read_sampling(model->ctx, fn, user, cfg->vocab, s));
    if (nseq < 1 || (ngen > 0 && nseq > INT64_MAX / ngen) || nseq > INT32_MAX)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: nseq = %lld must be >= 1 (and nseq x "
                        "ngen an array's size)", fn, (long long)nseq);
    return NNT_OK;
}

/* The tree that generates for model (a GPT layer's own; its backward cancelled), its window
 * (the most tokens a forward sees) into *window. */
static nnt_layer *gen_tree(nnt_layer *model, const nnt_model_config *cfg, int64_t *window)
{
    *window = cfg->max_seq;
    nnt_layer *tree = nnt_gpt_tree(model, window);
    if (tree)   /* the layer's activations are the tree's: no backward after this */
        nnt_gpt_cancel_backward(model);
    return tree ? tree : model;
}

int nnt_model_generate_n_trace(nnt_layer *model, const char *fn, const int32_t *prompt,
                               int64_t nprompt, int64_t nseq, int64_t ngen,
                               const nnt_sampling *user, int32_t *out, float *trace)
{
    nnt_model_config cfg;
    nnt_sampling s;
    int64_t window = 0;
    NNT_TRY(gen_setup(model, fn, user, nseq, ngen, &cfg, &s));
    NNT_TRY(nnt_generate_check(model->ctx, fn, cfg.vocab, prompt, nprompt, ngen, s.temperature,
                               s.top_k, out));
    if (ngen == 0)
        return NNT_OK;
    nnt_layer *tree = gen_tree(model, &cfg, &window);
    gen_prompts p = {1, &prompt, &nprompt, NULL, NULL};
    return tree_generate(tree, fn, &cfg, window, &p, nseq, ngen, &s, out, trace);
}

/* on_token of a sequence generated alone as sequence r of a batch of sequences of ngen tokens:
 * the caller's, told the token's index in the batch's out */
typedef struct batch_token {
    const nnt_sampling *s;
    int64_t first;   /* r * ngen */
} batch_token;

static void batch_on_token(void *arg, int64_t i, int32_t token)
{
    const batch_token *b = arg;
    b->s->on_token(b->s->on_token_arg, b->first + i, token);
}

/* The prompts of a batch one after another (a sequence with a prompt of its own each time),
 * when they cannot go side by side. */
static int generate_each(nnt_layer *tree, const char *fn, const nnt_model_config *cfg,
                         int64_t window, const gen_prompts *p, int64_t nseq, int64_t ngen,
                         const nnt_sampling *s, int32_t *out, float *trace)
{
    for (int64_t r = 0; r < nseq; r++) {
        nnt_sampling one = *s;
        batch_token bt = {s, r * ngen};
        one.seed = p->seeds ? p->seeds[r] : s->seed + (uint64_t)r;
        if (s->on_token) {
            one.on_token = batch_on_token;
            one.on_token_arg = &bt;
        }
        gen_prompts q = {1, &p->ids[r], &p->len[r], NULL, NULL};
        NNT_TRY(tree_generate(tree, fn, cfg, window, &q, 1, ngen, &one, out + r * ngen,
                              trace ? trace + r * ngen * cfg->vocab : NULL));
    }
    return NNT_OK;
}

/* The distinct prompts among prompts[0 .. nseq) into ids and len (room for nseq), in order of
 * first appearance, their count into *n, and into src[r] the one sequence r continues. */
static void distinct_prompts(int64_t nseq, const int32_t *const *prompts,
                             const int64_t *nprompts, const int32_t **ids, int64_t *len,
                             int64_t *src, int64_t *n)
{
    *n = 0;
    for (int64_t r = 0; r < nseq; r++) {
        int64_t k = 0;
        while (k < *n && !(len[k] == nprompts[r] &&
                           (ids[k] == prompts[r] ||
                            !memcmp(ids[k], prompts[r], (size_t)len[k] * sizeof *ids[k]))))
            k++;
        if (k == *n) {
            ids[k] = prompts[r];
            len[k] = nprompts[r];
            ++*n;
        }
        src[r] = k;
    }
}

/* The prompts side by side, a distinct prompt's forward once for every sequence that
 * continues it. */
static int generate_side(nnt_layer *tree, const char *fn, const nnt_model_config *cfg,
                         int64_t window, const gen_prompts *each, int64_t nseq, int64_t ngen,
                         const nnt_sampling *s, int32_t *out, float *trace)
{
    const int32_t **ids = malloc((size_t)nseq * sizeof *ids);
    int64_t *len = malloc((size_t)nseq * sizeof *len), *src = malloc((size_t)nseq * sizeof *src);
    int rc = ids && len && src ? NNT_OK
             : nnt_fail(tree->ctx, NNT_E_NOMEM, "%s: out of memory (%lld prompts)", fn,
                        (long long)nseq);
    if (rc == NNT_OK) {
        gen_prompts p = {0, ids, len, src, each->seeds};
        distinct_prompts(nseq, each->ids, each->len, ids, len, src, &p.n);
        rc = tree_generate(tree, fn, cfg, window, &p, nseq, ngen, s, out, trace);
    }
    free(ids);
    free(len);
    free(src);
    return rc;
}

int nnt_model_generate_batch_trace(nnt_layer *model, const char *fn, int64_t nseq,
                                   const int32_t *const *prompts, const int64_t *nprompts,
                                   const uint64_t *seeds, int64_t ngen,
                                   const nnt_sampling *user, int32_t *out, float *trace)
{
    nnt_model_config cfg;
    nnt_sampling s;
    int64_t window = 0, longest = 0;
    NNT_TRY(gen_setup(model, fn, user, nseq, ngen, &cfg, &s));
    if (!prompts || !nprompts)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: prompts or nprompts is NULL", fn);
    for (int64_t r = 0; r < nseq; r++) {
        int rc = nnt_generate_check(model->ctx, fn, cfg.vocab, prompts[r], nprompts[r], ngen,
                                    s.temperature, s.top_k, out);
        if (rc) {
            const char *why = nnt_ctx_last_error(model->ctx);   /* "fn: why" */
            return nnt_fail(model->ctx, rc, "%s: prompt %lld: %s", fn, (long long)r,
                            strncmp(why, fn, strlen(fn)) ? why : why + strlen(fn) + 2);
        }
        longest = nprompts[r] > longest ? nprompts[r] : longest;
    }
    if (ngen == 0)
        return NNT_OK;
    nnt_layer *tree = gen_tree(model, &cfg, &window);
    gen_prompts each = {nseq, prompts, nprompts, NULL, seeds};
    /* side by side when every sequence stays within the window of one cache (not past it,
     * where positions restart, nor across LongRoPE's switch) */
    int side = !s.no_cache && longest + ngen - 1 <= window && nseq > 1 &&
               !(cfg.rope.scaling == NNT_ROPE_SCALING_LONGROPE &&
                 longest + ngen - 1 > cfg.rope.original_max_position);
    return side ? generate_side(tree, fn, &cfg, window, &each, nseq, ngen, &s, out, trace)
                : generate_each(tree, fn, &cfg, window, &each, nseq, ngen, &s, out, trace);
}

NNT_API int nnt_model_generate(nnt_layer *model, const int32_t *prompt, int64_t nprompt,
                               int64_t ngen, const nnt_sampling *s, int32_t *out)
{
    return nnt_model_run_generate(model, "nnt_model_generate", prompt, nprompt, ngen, s, out);
}

NNT_API int nnt_model_generate_n(nnt_layer *model, const int32_t *prompt, int64_t nprompt,
                                 int64_t nseq, int64_t ngen, const nnt_sampling *s,
                                 int32_t *out)
{
    return nnt_model_generate_n_trace(model, "nnt_model_generate_n", prompt, nprompt, nseq,
                                      ngen, s, out, NULL);
}

NNT_API int nnt_model_generate_batch(nnt_layer *model, int64_t nseq,
                                     const int32_t *const *prompts, const int64_t *nprompts,
                                     const uint64_t *seeds, int64_t ngen,
                                     const nnt_sampling *s, int32_t *out)
{
    return nnt_model_generate_batch_trace(model, "nnt_model_generate_batch", nseq, prompts,
                                          nprompts, seeds, ngen, s, out, NULL);
}

/* ids[0..n) as text into *out (malloc'd): the runs of ids the tokenizer has decoded whole (a
 * character split over several tokens comes out whole), the others as "<id>". */
static int decode_shown(const nnt_tokenizer *tok, const int32_t *ids, size_t n, char **out,
                        size_t *out_len)
{
    int64_t vocab = 0;
    size_t len = 0, cap = 0, k, need = 0;
    char *text = NULL;
    int rc = nnt_tokenizer_vocab_size(tok, &vocab);
    for (size_t i = 0; rc == NNT_OK && i <= n; i = k + 1) {
        for (k = i; k < n && ids[k] >= 0 && ids[k] < vocab;)
            k++;
        if (k > i && (rc = nnt_tokenizer_decode(tok, ids + i, k - i, NULL, 0, &need)) &&
            rc != NNT_E_INVAL)
            break;   /* (NNT_E_INVAL: the size needed is in need) */
        need = (k > i ? need : 0) + 16;   /* and "<id>" */
        char *more = len + need > cap ? realloc(text, 2 * (len + need)) : text;
        if (!more) {
            rc = NNT_E_NOMEM;
            break;
        }
        text = more, cap = len + need > cap ? 2 * (len + need) : cap;
        size_t got = 0;
        rc = k > i ? nnt_tokenizer_decode(tok, ids + i, k - i, text + len, cap - len, &got) : 0;
        len += got;
        if (rc == NNT_OK && k < n)
            len += (size_t)snprintf(text + len, cap - len, "<%d>", (int)ids[k]);
        text[len] = '\0';
    }
    if (rc)
        free(text), text = NULL, len = 0;
    *out = text, *out_len = len;
    return rc;
}

NNT_API int nnt_model_generate_text(nnt_layer *model, const nnt_tokenizer *tok,
                                    const char *prompt, int64_t ngen, const nnt_sampling *s,
                                    char **text, size_t *len)
{
    const char *fn = "nnt_model_generate_text";
    size_t got = 0;
    nnt_ctx *ctx = model && model->ctx ? model->ctx : NULL;
    size_t nprompt = 0, plen = prompt ? strlen(prompt) : 0;
    if (!text)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: text is NULL", fn);
    *text = NULL;
    if (!tok || !prompt || ngen < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: tok or prompt NULL, or ngen %lld < 0", fn,
                        (long long)ngen);
    int rc = nnt_tokenizer_encode(tok, prompt, plen, NULL, 0, &nprompt);
    if (rc == NNT_OK && nprompt == 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the prompt \"%.40s\" gives no token", fn, prompt);
    int32_t *ids = rc ? NULL : malloc((nprompt + (size_t)ngen) * sizeof *ids);
    if (!rc && !ids)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    if (!rc)
        rc = nnt_tokenizer_encode(tok, prompt, plen, ids, nprompt, &nprompt);
    if (!rc)
        rc = nnt_model_run_generate(model, fn, ids, (int64_t)nprompt, ngen, s, ids + nprompt);
    if (!rc && (rc = decode_shown(tok, ids, nprompt + (size_t)ngen, text, &got)))
        rc = nnt_fail(ctx, rc, "%s: decoding: %s", fn, nnt_ctx_last_error(NULL));
    free(ids);
    if (len)
        *len = got;
    return rc;
}
