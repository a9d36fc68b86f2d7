/* Transformer models of every family (nnt_model_* in nnt.h): presets, the checks of a
 * configuration, the automatic tiling, and the layer tree a configuration describes. The
 * tree is made of the generic layers (lib/layers/), which hold all of the math; this file
 * only says which layers, with which options and names.
 *
 * A model tree (NNT_LAYER_MODEL) has the children, Llama family / GPT-2:
 *   "model.embed_tokens"   embedding without position table, parameter "weight" (V, C)
 *   / ""                   (no prefix) embedding with "wte.weight" (V, C) and the position
 *                          table "wpe.weight" (max_seq, C)
 *   "model.layers.<i>"     L blocks: RMSNorm, attention with RoPE and NKV kv heads, SwiGLU
 *   / "h.<i>"              L blocks: LayerNorm, multi-head attention, GELU MLP (ln_1, attn
 *                          with q, k, v, c_proj; ln_2, mlp with c_fc, c_proj)
 *   "model.norm" / "ln_f"  RMSNorm / LayerNorm
 *   "lm_head"              tied: the embedding's table (no parameter); untied: a linear
 *                          layer without bias, parameter "weight" (V, C)
 *   "loss"                 cross-entropy (ignore index -1)
 * so that every Llama parameter carries its Hugging Face LlamaForCausalLM name and every
 * GPT-2 parameter its llm.c-derived name ("h.0.attn.q.weight"). nnt_model_create (and
 * nnt_gpt_create) wraps a GPT-2 tree in the GPT layer (NNT_LAYER_GPT, lib/layers/gpt.c),
 * which lists the same parameters and adds no math; nnt_model_build_tree gives the bare
 * tree. */
#include "models.h"

#include "../layers/generic.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define IGNORE_INDEX (-1)

typedef struct model_impl {
    nnt_model_config cfg;
    int with_loss;            /* the last forward ran the loss (targets were set)          */
} model_impl;

/* ---- presets ------------------------------------------------------------------------------ */

typedef struct preset {
    const char *name;
    int family;
    int64_t vocab, max_seq, layers, heads, kv_heads, channels, hidden;
    double eps;
    int tied;
    double theta;
    int llama3;               /* Llama 3.1's rope scaling: factor 32, low 1, high 4, 8192 */
    int64_t head_dim;         /* 0: channels / heads */
    int qk_norm;
} preset;

static const preset PRESETS[] = {
    {"gpt2", NNT_FAMILY_GPT2, 50257, 1024, 12, 12, 0, 768, 0, 1e-5, 1, 0, 0, 0, 0},
    {"gpt2-medium", NNT_FAMILY_GPT2, 50257, 1024, 24, 16, 0, 1024, 0, 1e-5, 1, 0, 0, 0, 0},
    {"gpt2-large", NNT_FAMILY_GPT2, 50257, 1024, 36, 20, 0, 1280, 0, 1e-5, 1, 0, 0, 0, 0},
    {"gpt2-xl", NNT_FAMILY_GPT2, 50257, 1024, 48, 25, 0, 1600, 0, 1e-5, 1, 0, 0, 0, 0},
    {"tiny", NNT_FAMILY_GPT2, 256, 128, 2, 4, 0, 64, 0, 1e-5, 1, 0, 0, 0, 0},
    {"llama-tiny", NNT_FAMILY_LLAMA, 256, 256, 2, 4, 2, 64, 172, 1e-5, 1, 10000.0, 0, 0, 0},
    /* HuggingFaceTB/SmolLM2-135M */
    {"smollm2-135m", NNT_FAMILY_LLAMA, 49152, 8192, 30, 9, 3, 576, 1536, 1e-5, 1, 100000.0, 0,
     0, 0},
    /* TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T */
    {"tinyllama-1.1b", NNT_FAMILY_LLAMA, 32000, 2048, 22, 32, 4, 2048, 5632, 1e-5, 0, 10000.0,
     0, 0, 0},
    /* meta-llama/Llama-3.2-1B */
    {"llama-3.2-1b", NNT_FAMILY_LLAMA, 128256, 131072, 16, 32, 8, 2048, 8192, 1e-5, 1,
     500000.0, 1, 0, 0},
    /* Qwen/Qwen3-0.6B: 16 heads of 128 (2048 > C), q/k norms */
    {"qwen3-0.6b", NNT_FAMILY_LLAMA, 151936, 40960, 28, 16, 8, 1024, 3072, 1e-6, 1, 1000000.0,
     0, 128, 1},
};
#define NPRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

static void preset_config(const preset *p, nnt_model_config *c)
{
    nnt_model_config init = NNT_MODEL_CONFIG_INIT;
    *c = init;
    int llama = p->family == NNT_FAMILY_LLAMA;
    c->family = p->family;
    c->vocab = p->vocab;
    c->max_seq = p->max_seq;
    c->layers = p->layers;
    c->heads = p->heads;
    c->kv_heads = llama ? p->kv_heads : 0;
    c->channels = p->channels;
    c->hidden = llama ? p->hidden : 0;
    c->norm_eps = p->eps;
    c->tied = p->tied;
    c->qkv_bias = c->out_bias = c->mlp_bias = !llama;
    c->head_dim = p->head_dim;
    c->qk_norm = p->qk_norm;
    if (llama)
        c->rope.theta = p->theta;
    if (p->llama3) {
        c->rope.scaling = NNT_ROPE_SCALING_LLAMA3;
        c->rope.factor = 32.0;
        c->rope.low_freq_factor = 1.0;
        c->rope.high_freq_factor = 4.0;
        c->rope.original_max_position = 8192;
    }
}

NNT_API int nnt_model_preset(const char *name, nnt_model_config *cfg)
{
    const char *fn = "nnt_model_preset";
    if (!name || !cfg)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn, name ? "cfg" : "name");
    for (int i = 0; i < NPRESETS; i++) {
        if (strcmp(PRESETS[i].name, name) == 0) {
            preset_config(&PRESETS[i], cfg);
            return NNT_OK;
        }
    }
    char valid[256] = "";
    for (int i = 0; i < NPRESETS; i++) {
        size_t n = strlen(valid);
        snprintf(valid + n, sizeof valid - n, "%s%s", i ? ", " : "", PRESETS[i].name);
    }
    return nnt_fail(NULL, NNT_E_INVAL, "%s: unknown preset '%s' (valid: %s)", fn, name, valid);
}

nnt_model_config nnt_gpt2_model_config(int64_t vocab, int64_t max_seq, int64_t layers,
                                       int64_t heads, int64_t channels)
{
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;   /* GPT-2 124M: the family's defaults */
    c.vocab = vocab;
    c.max_seq = max_seq;
    c.layers = layers;
    c.heads = heads;
    c.channels = channels;
    return c;
}

/* ---- checks ------------------------------------------------------------------------------- */

static int64_t hidden_of(const nnt_model_config *c)
{
    return c->hidden ? c->hidden : 4 * c->channels;
}

static int64_t kv_heads_of(const nnt_model_config *c)
{
    return c->kv_heads ? c->kv_heads : c->heads;
}

static int64_t head_dim_of(const nnt_model_config *c)
{
    return c->head_dim ? c->head_dim : c->channels / c->heads;
}

static int check_sizes(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->vocab < 1 || c->max_seq < 1 || c->layers < 0 || c->heads < 1 || c->channels < 1 ||
        c->kv_heads < 0 || c->hidden < 0 || c->head_dim < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: bad configuration vocab=%lld max_seq=%lld "
                        "layers=%lld heads=%lld kv_heads=%lld channels=%lld hidden=%lld "
                        "head_dim=%lld", fn, (long long)c->vocab, (long long)c->max_seq,
                        (long long)c->layers, (long long)c->heads, (long long)c->kv_heads,
                        (long long)c->channels, (long long)c->hidden, (long long)c->head_dim);
    if (!c->head_dim && c->channels % c->heads)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: channels=%lld is not a multiple of heads=%lld "
                        "(give head_dim for heads of another size)", fn,
                        (long long)c->channels, (long long)c->heads);
    if (c->heads % kv_heads_of(c))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: kv_heads=%lld does not divide heads=%lld", fn,
                        (long long)c->kv_heads, (long long)c->heads);
    if (!(c->norm_eps > 0.0) || !isfinite(c->norm_eps))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: norm_eps %g must be finite and > 0", fn,
                        c->norm_eps);
    return NNT_OK;
}

/* GPT-2 is what nnt_gpt_create builds: no other MLP size, head, biases or eps. */
static int check_gpt2(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    const char *field = NULL;
    if (c->hidden != 0 && c->hidden != 4 * c->channels)
        field = "hidden (GPT-2: 0 or 4 * channels)";
    else if (kv_heads_of(c) != c->heads)
        field = "kv_heads (GPT-2: 0 or heads)";
    else if (!c->tied)
        field = "tied (GPT-2: 1)";
    else if (!c->qkv_bias || !c->out_bias || !c->mlp_bias)
        field = "qkv_bias, out_bias and mlp_bias (GPT-2: 1)";
    else if (c->norm_eps != 1e-5)
        field = "norm_eps (GPT-2: 1e-5)";
    else if (c->head_dim != 0 && c->head_dim * c->heads != c->channels)
        field = "head_dim (GPT-2: 0 or channels / heads)";
    else if (c->qk_norm)
        field = "qk_norm (GPT-2: 0)";
    if (field)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: a GPT-2 model has no other %s", fn, field);
    return NNT_OK;
}

static int check_llama(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (head_dim_of(c) % 2)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: rotary positions need an even head_dim (%lld%s)",
                        fn, (long long)head_dim_of(c), c->head_dim ? "" : " = channels / heads");
    /* the rope options' own checks run in the attention layer, naming the field */
    return NNT_OK;
}

/* cfg is a readable configuration nnt can build (the rope options are checked by the
 * attention layer, or by nnt_model_check). */
static int check_model(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg)
{
    if (!cfg)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: cfg is NULL", fn);
    if (cfg->size < sizeof(nnt_model_config))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: cfg->size %zu < sizeof(nnt_model_config) %zu "
                        "(initialise it with NNT_MODEL_CONFIG_INIT or nnt_model_preset)", fn,
                        cfg->size, sizeof(nnt_model_config));
    if (cfg->family != NNT_FAMILY_GPT2 && cfg->family != NNT_FAMILY_LLAMA)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: unknown family %d (NNT_FAMILY_GPT2 or "
                        "NNT_FAMILY_LLAMA)", fn, cfg->family);
    NNT_TRY(check_sizes(ctx, fn, cfg));
    if (cfg->family == NNT_FAMILY_GPT2)
        NNT_TRY(check_gpt2(ctx, fn, cfg));
    else
        NNT_TRY(check_llama(ctx, fn, cfg));
    return NNT_OK;
}

/* ... and for batches of (B, T). */
static int check_config(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                        int64_t T)
{
    NNT_TRY(check_model(ctx, fn, cfg));
    if (B < 1 || T < 1 || T > cfg->max_seq)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: B=%lld, T=%lld must be positive with T <= "
                        "max_seq=%lld", fn, (long long)B, (long long)T,
                        (long long)cfg->max_seq);
    return NNT_OK;
}

int nnt_model_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg)
{
    NNT_TRY(check_model(ctx, fn, cfg));
    nnt_rope_options rope;
    int rc = cfg->family == NNT_FAMILY_LLAMA ? nnt_rope_options_read(fn, &cfg->rope, &rope) : 0;
    /* the reader records its message without a context */
    return rc ? nnt_fail(ctx, rc, "%s", nnt_ctx_last_error(NULL)) : NNT_OK;
}

/* ---- tiling ------------------------------------------------------------------------------- */

static int resolve_tiling(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                          int64_t T, const nnt_tiling *overrides, nnt_tiling *out)
{
    nnt_model_dims d = {B, T, cfg->channels, hidden_of(cfg), cfg->vocab, cfg->heads,
                        head_dim_of(cfg)};
    return nnt_model_resolve_tiling(ctx, fn, &d, overrides, out);
}

NNT_API int nnt_model_tiling(nnt_ctx *ctx, const nnt_model_config *cfg, int64_t B, int64_t T,
                             const nnt_tiling *overrides, nnt_tiling *out)
{
    const char *fn = "nnt_model_tiling";
    NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    NNT_TRY(check_config(ctx, fn, cfg, B, T));
    return resolve_tiling(ctx, fn, cfg, B, T, overrides, out);
}

/* ---- the tree of either family ----------------------------------------------------------- */

/* The children up to the head give the logits (B, T, V), the forward's output; the "loss"
 * child (the last) runs only when targets are set, so that a forward without targets leaves
 * the loss of the last one with targets readable. */
static int model_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    model_impl *m = l->impl;
    nnt_layer *loss = l->children[l->nchildren - 1];
    nnt_tensor *prev_x = NULL;   // the input of the child submitted last
    for (int i = 0; i < l->nchildren - 1; i++) {
        NNT_TRY(nnt_layer_release_window(l, prev_x));
        prev_x = x;
        NNT_TRY(nnt_layer_forward(l->children[i], x, &x));   // (B, T) -> ... -> (B, T, V)
    }
    m->with_loss = 0;
    if (gl_cross_entropy_has_targets(loss)) {
        NNT_TRY(nnt_layer_forward(loss, x, NULL));
        m->with_loss = 1;
    }
    *y = x;
    return NNT_OK;
}

static int model_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    model_impl *m = l->impl;
    if (!m->with_loss)
        return nnt_fail(l->ctx, NNT_E_STATE, "nnt_layer_backward: the last forward of this "
                        "model had no targets (set them with nnt_layer_set_targets first)");
    m->with_loss = 0;
    return gl_chain_backward(l, dy, dx, 1);
}

static const nnt_layer_vt model_vt = {
    NNT_LAYER_MODEL, "model", model_forward, model_backward, NULL, NULL, NULL, NULL, NULL,
    NULL};

/* What a family names its children and its token table. */
typedef struct family_names {
    const char *embedding;    /* "" for GPT-2: its parameters are named wte / wpe already */
    const char *table;        /* the embedding's token-table parameter                     */
    const char *block;        /* block i is "<block><i>"                                   */
    const char *norm;         /* the final norm                                            */
} family_names;

static const family_names GPT2_NAMES = {"", "wte.weight", "h.", "ln_f"};
static const family_names LLAMA_NAMES = {"model.embed_tokens", "weight", "model.layers.",
                                         "model.norm"};

/* Adopt child under name; on failure the child is destroyed. */
static int adopt(nnt_layer *l, const char *name, nnt_layer *child)
{
    int rc = nnt_layer_add_child(l, name, child);
    if (rc)
        nnt_layer_destroy(child);
    return rc;
}

/* GPT-2: LayerNorm, multi-head attention without rope (its q/k/v/c_proj names), GELU MLP;
 * Llama: RMSNorm, grouped-query attention with rope, SwiGLU. Biases as configured. */
static int add_blocks(nnt_layer *l, const nnt_model_config *c, const family_names *names,
                      const nnt_tiling *t, const char *fn)
{
    int llama = c->family == NNT_FAMILY_LLAMA;
    nnt_attention_options ao = NNT_ATTENTION_OPTIONS_INIT;
    ao.kv_heads = kv_heads_of(c);
    ao.qkv_bias = c->qkv_bias;
    ao.out_bias = c->out_bias;
    ao.rope = llama ? &c->rope : NULL;
    ao.head_dim = head_dim_of(c);
    ao.qk_norm = c->qk_norm;
    ao.qk_norm_eps = c->norm_eps;
    nnt_mlp_options mo = NNT_MLP_OPTIONS_INIT;
    mo.kind = llama ? NNT_MLP_SWIGLU : NNT_MLP_GELU;
    mo.bias = c->mlp_bias;
    nnt_block_options bo = NNT_BLOCK_OPTIONS_INIT;
    bo.norm = llama ? NNT_NORM_RMSNORM : NNT_NORM_LAYERNORM;
    bo.norm_eps = c->norm_eps;
    bo.attention = &ao;
    bo.mlp = &mo;
    for (int64_t i = 0; i < c->layers; i++) {
        char name[40];
        nnt_layer *block = NULL;
        snprintf(name, sizeof name, "%s%lld", names->block, (long long)i);
        NNT_TRY(gl_block_new(l->ctx, c->channels, c->heads, hidden_of(c), &bo, t, fn, &block));
        NNT_TRY(adopt(l, name, block));
    }
    return NNT_OK;
}

static int add_norm(nnt_layer *l, const nnt_model_config *c, const family_names *names,
                    const nnt_tiling *t, const char *fn)
{
    nnt_layer *norm = NULL;
    if (c->family == NNT_FAMILY_LLAMA)
        NNT_TRY(gl_rmsnorm_new(l->ctx, c->channels, c->norm_eps, t, fn, &norm));
    else
        NNT_TRY(gl_layernorm_new(l->ctx, c->channels, c->norm_eps, t, fn, &norm));
    return adopt(l, names->norm, norm);
}

static int add_head(nnt_layer *l, nnt_layer *embedding, const nnt_model_config *c,
                    const nnt_tiling *t, const char *fn)
{
    nnt_layer *head = NULL, *loss = NULL;
    if (c->tied)
        NNT_TRY(gl_lm_head_new(embedding, fn, &head));
    else
        NNT_TRY(gl_linear_new(l->ctx, c->channels, c->vocab, 0, gl_tile(t->channels, c->channels),
                              gl_tile(t->vocab, c->vocab), fn, &head));
    NNT_TRY(adopt(l, "lm_head", head));
    NNT_TRY(nnt_layer_cross_entropy_create(l->ctx, IGNORE_INDEX, &loss));
    return adopt(l, "loss", loss);
}

/* The embedding (GPT-2: with the (max_seq, C) position table), the blocks, the final norm,
 * the head and the loss. */
static int tree_children(nnt_layer *l, const nnt_model_config *c, const nnt_tiling *t,
                         const char *fn)
{
    const family_names *names = c->family == NNT_FAMILY_LLAMA ? &LLAMA_NAMES : &GPT2_NAMES;
    int64_t positions = c->family == NNT_FAMILY_LLAMA ? 0 : c->max_seq;
    nnt_layer *emb = NULL;
    NNT_TRY(gl_embedding_new(l->ctx, c->vocab, positions, c->channels, t, names->table, fn,
                             &emb));
    NNT_TRY(adopt(l, names->embedding, emb));
    NNT_TRY(add_blocks(l, c, names, t, fn));
    NNT_TRY(add_norm(l, c, names, t, fn));
    return add_head(l, emb, c, t, fn);
}

/* The tree of a checked configuration with a resolved tiling. */
static int tree_create(nnt_ctx *ctx, const nnt_model_config *cfg, const nnt_tiling *t,
                       const char *fn, nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &model_vt, sizeof(model_impl), fn, &l));
    model_impl *m = l->impl;
    m->cfg = *cfg;
    m->cfg.size = sizeof m->cfg;
    m->cfg.kv_heads = kv_heads_of(cfg);
    m->cfg.hidden = hidden_of(cfg);
    m->cfg.head_dim = head_dim_of(cfg);
    if (cfg->family == NNT_FAMILY_GPT2) {   /* ignored: as nnt_model_config_of of a GPT layer */
        nnt_rope_options none = NNT_ROPE_OPTIONS_INIT;
        m->cfg.rope = none;
    }
    return nnt_layer_finish(l, tree_children(l, &m->cfg, t, fn), out);
}

int nnt_model_build_tree(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                         int64_t T, const nnt_tiling *tiling, nnt_layer **out)
{
    nnt_tiling t;
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    NNT_TRY(check_config(ctx, fn, cfg, B, T));
    NNT_TRY(resolve_tiling(ctx, fn, cfg, B, T, tiling, &t));
    return tree_create(ctx, cfg, &t, fn, out);
}

int nnt_model_build(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                    int64_t T, const nnt_tiling *tiling, nnt_layer **out)
{
    if (!cfg || cfg->family != NNT_FAMILY_GPT2)
        return nnt_model_build_tree(ctx, fn, cfg, B, T, tiling, out);
    nnt_tiling t;
    NNT_TRY(check_config(ctx, fn, cfg, B, T));
    NNT_TRY(resolve_tiling(ctx, fn, cfg, B, T, tiling, &t));
    return nnt_gpt_layer_new(ctx, fn, cfg, B, T, &t, out);
}

NNT_API int nnt_model_create(nnt_ctx *ctx, const nnt_model_config *cfg, int64_t B, int64_t T,
                             const nnt_tiling *tiling, nnt_layer **out)
{
    const char *fn = "nnt_model_create";
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    return nnt_model_build(ctx, fn, cfg, B, T, tiling, out);
}

/* ---- queries ------------------------------------------------------------------------------ */

int nnt_model_config_get(const nnt_layer *model, const char *fn, nnt_model_config *cfg)
{
    NNT_TRY(nnt_layer_check(model, fn));
    if (!cfg)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: cfg is NULL", fn);
    const nnt_layer *tree = nnt_gpt_tree((nnt_layer *)model, NULL);
    if (tree)
        model = tree;
    if (model->vt != &model_vt)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: the layer is a %s layer, not a model "
                        "(nnt_model_create, nnt_model_load_hf, nnt_gpt_create)", fn,
                        model->vt->kind_name);
    *cfg = ((const model_impl *)model->impl)->cfg;
    return NNT_OK;
}

NNT_API int nnt_model_config_of(const nnt_layer *model, nnt_model_config *cfg)
{
    return nnt_model_config_get(model, "nnt_model_config_of", cfg);
}
