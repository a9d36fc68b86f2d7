/* SPDX-License-Identifier: MIT */
/* Transformer models of every family (nnt_model_* in nnt.h): the checks of a configuration,
 * the automatic tiling, and the layer tree a configuration describes. The tree is made of
 * the generic layers (lib/layers/), which hold all of the math; a family's descriptor
 * (lib/models/family.h, one file per family) says which layers, with which options and
 * names, and this file builds it without knowing the family.
 *
 * A model tree (NNT_LAYER_MODEL) has the children
 *   <embedding>            the token table (V, C) (its parameter: the family's table name)
 *                          and, where the family has one, the position table "wpe.weight"
 *                          (max_seq, C)
 *   <block><i>             L blocks: the family's norm, attention (rotary positions where
 *                          the family has them; NKV kv heads, biases, head size, q/k norms as
 *                          configured), the family's MLP
 *   <norm>                 the final norm
 *   "lm_head"              tied: the embedding's table (no parameter); untied: a linear
 *                          layer, parameter "weight" (V, C), and "bias" (V) where the
 *                          family's head has one (Phi)
 *   "final_logit_softcap"  with final_softcap only: tanh(z / c) c of the logits (no
 *                          parameter)
 *   "logits_scaling"       with logits_scaling other than 0 and 1 only: the logits
 *                          divided by it, in place (no parameter)
 *   "loss"                 cross-entropy (ignore index -1)
 * e.g. for the Llama family "model.embed_tokens", "model.layers.<i>", "model.norm", so that
 * every parameter carries its Hugging Face name, and for GPT-2 "", "h.<i>", "ln_f" (llm.c-
 * derived names, "h.0.attn.q.weight"). A family with a build function of its own (GPT-2:
 * the GPT layer of nnt_gpt_create, lib/models/gpt2_layer.c, which lists the same parameters
 * and adds no math) gets it from nnt_model_create; nnt_model_build_tree gives the bare tree. */
#include "models.h"
#include "family.h"

#include "../layers/generic.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define IGNORE_INDEX (-1)

typedef struct model_impl {
    nnt_model_config cfg;
    nnt_model_lora lora;      /* its adapters' settings (lib/models/lora.c)                */
    int with_loss;            /* the last forward ran the loss (targets were set)          */
    nnt_tensor *logits;       // (B, T, V or num_labels) output of the last forward
    char **label_names;       /* a classifier's num_labels names (id2label); NULL: LABEL_k */
} model_impl;

/* ---- checks ------------------------------------------------------------------------------- */

static int64_t hidden_of(const nnt_model_config *c)
{
    return c->hidden ? c->hidden : 4 * c->channels;
}

int64_t nnt_model_kv_heads(const nnt_model_config *c)
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
    if (c->heads % nnt_model_kv_heads(c))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: kv_heads=%lld does not divide heads=%lld", fn,
                        (long long)c->kv_heads, (long long)c->heads);
    if (!(c->norm_eps > 0.0) || !isfinite(c->norm_eps))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: norm_eps %g must be finite and > 0", fn,
                        c->norm_eps);
    if (c->sliding_window < 0 || c->window_from < 0 || c->window_global_every < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: sliding_window %lld, window_from %lld and "
                        "window_global_every %lld must be >= 0", fn,
                        (long long)c->sliding_window, (long long)c->window_from,
                        (long long)c->window_global_every);
    return NNT_OK;
}

/* The query scale, soft-caps, local rotary base and Granite's multipliers: finite, >= 0, and
 * only in the families that have them. */
static int check_scalar_options(nnt_ctx *ctx, const char *fn, const nnt_model_config *c,
                                const nnt_family *f)
{
    static const struct {
        const char *name;
        size_t offset;
        unsigned feature;
    } opts[8] = {
        {"query_pre_attn_scalar", offsetof(nnt_model_config, query_pre_attn_scalar),
         NNT_FAMILY_HAS_QUERY_SCALE},
        {"attn_softcap", offsetof(nnt_model_config, attn_softcap), NNT_FAMILY_HAS_SOFTCAP},
        {"final_softcap", offsetof(nnt_model_config, final_softcap), NNT_FAMILY_HAS_SOFTCAP},
        {"rope_local_theta", offsetof(nnt_model_config, rope_local_theta),
         NNT_FAMILY_HAS_LOCAL_ROPE},
        {"embedding_multiplier", offsetof(nnt_model_config, embedding_multiplier),
         NNT_FAMILY_HAS_MULTIPLIERS},
        {"residual_multiplier", offsetof(nnt_model_config, residual_multiplier),
         NNT_FAMILY_HAS_MULTIPLIERS},
        {"attention_multiplier", offsetof(nnt_model_config, attention_multiplier),
         NNT_FAMILY_HAS_MULTIPLIERS},
        {"logits_scaling", offsetof(nnt_model_config, logits_scaling),
         NNT_FAMILY_HAS_MULTIPLIERS}};
    for (int i = 0; i < 8; i++) {
        double v;
        memcpy(&v, (const char *)c + opts[i].offset, sizeof v);
        if (!(v >= 0.0) || !isfinite(v))
            return nnt_fail(ctx, NNT_E_INVAL, "%s: %s %g must be finite and >= 0 (0: none)",
                            fn, opts[i].name, v);
        if (v != 0.0 && !(f->features & opts[i].feature))
            return nnt_fail(ctx, NNT_E_INVAL, "%s: the %s family has no %s (%g)", fn, f->title,
                            opts[i].name, v);
    }
    return NNT_OK;
}

/* Blocks without rotary positions: only in families that have them, and only blocks the
 * model has; serial_blocks 0 or 1, and 1 only where the family has it; parallel_norms 0 to
 * 2, not 0 only where the family has it and not with serial_blocks. */
static int check_blocks(nnt_ctx *ctx, const char *fn, const nnt_model_config *c,
                        const nnt_family *f)
{
    if (c->serial_blocks < 0 || c->serial_blocks > 1 ||
        (c->serial_blocks && !(f->features & NNT_FAMILY_HAS_SERIAL_BLOCKS)))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: serial_blocks %d (0 or 1; 1 only in a family "
                        "whose blocks can be either, not %s)", fn, c->serial_blocks, f->title);
    if (c->parallel_norms < 0 || c->parallel_norms > 2 ||
        (c->parallel_norms && !(f->features & NNT_FAMILY_HAS_PARALLEL_NORMS)) ||
        (c->parallel_norms && c->serial_blocks))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: parallel_norms %lld (0, 1 or 2; not 0 only in a "
                        "family whose blocks take either, not %s, and without serial_blocks %d)",
                        fn, (long long)c->parallel_norms, f->title, c->serial_blocks);
    if (c->mlp_gelu < 0 || c->mlp_gelu > NNT_GELU_ERF ||
        (c->mlp_gelu && !(f->features & NNT_FAMILY_HAS_GELU_CHOICE)))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: mlp_gelu %d (0, NNT_GELU_TANH or NNT_GELU_ERF; "
                        "not 0 only in a family whose MLP takes either GELU, not %s)", fn,
                        c->mlp_gelu, f->title);
    for (int64_t i = 0; i < NNT_MODEL_MAX_NOPE_LAYER; i++) {
        if (!NNT_MODEL_NOPE_LAYER(c, i))
            continue;
        if (!(f->features & NNT_FAMILY_HAS_NOPE))
            return nnt_fail(ctx, NNT_E_INVAL, "%s: the %s family has no blocks without rotary "
                            "positions (nope_layers names block %lld)", fn, f->title,
                            (long long)i);
        if (i >= c->layers)
            return nnt_fail(ctx, NNT_E_INVAL, "%s: nope_layers names block %lld of a model of "
                            "%lld", fn, (long long)i, (long long)c->layers);
    }
    return NNT_OK;
}

int nnt_model_block_moe(const nnt_model_config *c, int64_t i)
{
    if (c->experts <= 0 || (c->moe_every > 1 && (i + 1) % c->moe_every != 0))
        return 0;
    return !NNT_MODEL_DENSE_LAYER(c, i);
}

/* whether a bit of words[0..n) is set */
static int any_bit(const uint64_t *words, int n)
{
    uint64_t any = 0;
    for (int w = 0; w < n; w++)
        any |= words[w];
    return any != 0;
}

int nnt_model_window_listed(const nnt_model_config *c)
{
    return any_bit(c->window_full_layers, NNT_MODEL_MAX_WINDOW_LAYER / 64);
}

int nnt_model_mlp_kind(const nnt_model_config *c)
{
    const nnt_family *f = nnt_family_find(c->family);
    int kind = f ? f->layout.mlp_kind : NNT_MLP_GELU;
    if (c->mlp_gelu && (kind == NNT_MLP_GELU || kind == NNT_MLP_GELU_ERF))
        kind = c->mlp_gelu == NNT_GELU_ERF ? NNT_MLP_GELU_ERF : NNT_MLP_GELU;
    return kind;
}

int nnt_model_block_parallel(const nnt_model_config *c)
{
    const nnt_family *f = nnt_family_find(c->family);
    if (c->serial_blocks)
        return 0;
    return c->parallel_norms ? (int)c->parallel_norms : f ? f->layout.parallel : 0;
}

void nnt_model_multipliers(const nnt_model_config *c, double m[4])
{
    const double set[4] = {c->embedding_multiplier, c->residual_multiplier,
                           c->attention_multiplier, c->logits_scaling};
    for (int i = 0; i < 4; i++)
        m[i] = set[i] != 0.0 ? set[i] : i == 2 ? 1.0 / sqrt((double)head_dim_of(c)) : 1.0;
}

int nnt_model_nope_any(const nnt_model_config *c)
{
    return any_bit(c->nope_layers, NNT_MODEL_MAX_NOPE_LAYER / 64);
}

int nnt_model_block_window(const nnt_model_config *c, int64_t i)
{
    if (c->sliding_window <= 0 || i < c->window_from || NNT_MODEL_WINDOW_FULL(c, i))
        return 0;
    return !(c->window_global_every > 0 && (i + 1) % c->window_global_every == 0);
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
    NNT_TRY(nnt_check_reserved(ctx, fn, "cfg->reserved", cfg->reserved,
                               sizeof cfg->reserved / sizeof cfg->reserved[0]));
    NNT_TRY(nnt_check_reserved(ctx, fn, "cfg->rope.reserved", cfg->rope.reserved,
                               sizeof cfg->rope.reserved / sizeof cfg->rope.reserved[0]));
    const nnt_family *f = nnt_family_find(cfg->family);
    if (!f) {
        char valid[256] = "";
        for (int i = 0; nnt_family_at(i); i++) {
            size_t n = strlen(valid);
            snprintf(valid + n, sizeof valid - n, "%s%d (%s)", i ? ", " : "",
                     nnt_family_at(i)->id, nnt_family_at(i)->title);
        }
        return nnt_fail(ctx, NNT_E_INVAL, "%s: unknown family %d (%s)", fn, cfg->family,
                        valid);
    }
    NNT_TRY(check_sizes(ctx, fn, cfg));
    if (cfg->sliding_window && !(f->features & NNT_FAMILY_HAS_WINDOW))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the %s family has no sliding window "
                        "(sliding_window %lld)", fn, f->title, (long long)cfg->sliding_window);
    NNT_TRY(check_scalar_options(ctx, fn, cfg, f));
    int64_t hd = head_dim_of(cfg);
    if (f->layout.rope && hd % 2)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: rotary positions need an even head_dim (%lld%s)",
                        fn, (long long)hd, cfg->head_dim ? "" : " = channels / heads");
    if (f->layout.rope && nnt_rope_rotary_dim(&cfg->rope, hd) != hd &&
        !(f->features & NNT_FAMILY_HAS_PARTIAL_ROTARY))
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: the %s family rotates whole head vectors "
                        "(rope.partial_rotary_factor %g; the Phi-3, Phi, StableLM and GPT-NeoX "
                        "families rotate a part)", fn, f->title, cfg->rope.partial_rotary_factor);
    if (cfg->qk_norm < 0 || cfg->qk_norm > 2)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: qk_norm %d (0: none, 1: per head, 2: over the "
                        "whole projection)", fn, cfg->qk_norm);
    if (cfg->qk_norm == 2 && !(f->features & NNT_FAMILY_HAS_QK_NORM_WHOLE))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: qk_norm 2 (one norm over the whole q and k "
                        "projections, OLMoE's and OLMo 2's) is for the MoE and OLMo families",
                        fn);
    if (cfg->experts && !(f->features & NNT_FAMILY_HAS_MOE))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the %s family has no mixture of experts "
                        "(experts %lld)", fn, f->title, (long long)cfg->experts);
    if ((cfg->attn_sinks || cfg->moe_bias || cfg->swiglu_limit != 0.0 ||
         cfg->swiglu_alpha != 0.0) && !(f->features & NNT_FAMILY_HAS_MOE))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: attn_sinks %d, moe_bias %d, swiglu_limit %g and "
                        "swiglu_alpha %g are gpt-oss's (the MoE family), not the %s family's "
                        "(0 there)", fn, cfg->attn_sinks, cfg->moe_bias, cfg->swiglu_limit,
                        cfg->swiglu_alpha, f->title);
    NNT_TRY(check_blocks(ctx, fn, cfg, f));
    if (cfg->num_labels < 0 || (cfg->has_pad_token && cfg->pad_token_id < 0))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: num_labels %lld (0: a language model, >= 1: a "
                        "classifier), pad_token_id %lld (>= 0 when has_pad_token)", fn,
                        (long long)cfg->num_labels, (long long)cfg->pad_token_id);
    if (cfg->problem_type < NNT_PROBLEM_DEFAULT || cfg->problem_type > NNT_PROBLEM_MULTI_LABEL ||
        (cfg->problem_type && cfg->num_labels < 1) || cfg->reserved_int)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: problem_type %d (NNT_PROBLEM_*: %s), "
                        "reserved_int %d (0)", fn, cfg->problem_type,
                        cfg->num_labels < 1 ? "0 for a language model" : "0, 1 or 2",
                        cfg->reserved_int);
    return f->check ? f->check(ctx, fn, cfg) : NNT_OK;
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
    int rc = 0;
    if (nnt_family_find(cfg->family)->layout.rope &&
        (rc = nnt_rope_options_read(fn, &cfg->rope, &rope)) == 0)
        rc = nnt_rope_check_head(fn, &rope, head_dim_of(cfg));
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
    m->logits = x;
    if (gl_loss_has_targets(loss)) {
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

/* The cross-entropy, plus the load-balancing loss of mixture-of-experts blocks. */
static int model_loss(nnt_layer *l, double *loss)
{
    double aux = 0.0;
    NNT_TRY(nnt_layer_loss(l->children[l->nchildren - 1], loss));
    NNT_TRY(gl_moe_aux_loss(l, &aux));
    *loss += aux;
    return NNT_OK;
}

static void model_destroy(nnt_layer *l)
{
    model_impl *m = l->impl;
    nnt_label_names_free(m->label_names, m->cfg.num_labels);
    m->label_names = NULL;
}

static const nnt_layer_vt model_vt = {
    NNT_LAYER_MODEL, "model", model_forward, model_backward, NULL, model_loss, NULL, NULL,
    model_destroy, NULL, NULL, NULL};

/* Adopt child under name; on failure the child is destroyed. */
static int adopt(nnt_layer *l, const char *name, nnt_layer *child)
{
    int rc = nnt_layer_add_child(l, name, child);
    if (rc)
        nnt_layer_destroy(child);
    return rc;
}

/* The blocks: the family's norm and MLP, the attention as configured (rotary positions where
 * the family has them). */
static int add_blocks(nnt_layer *l, const nnt_model_config *c, const nnt_family_layout *f,
                      const nnt_tiling *t, const char *fn)
{
    nnt_attention_options ao = NNT_ATTENTION_OPTIONS_INIT;
    ao.kv_heads = nnt_model_kv_heads(c);
    ao.qkv_bias = c->qkv_bias;
    ao.out_bias = c->out_bias;
    ao.rope = f->rope ? &c->rope : NULL;
    ao.llama_names = f->rope || f->llama_names;   /* q_proj ... o_proj in blocks without
                                                     rope too */
    ao.fused_qkv = f->fused_lora != 0;
    ao.head_dim = head_dim_of(c);
    ao.qk_norm = c->qk_norm;
    ao.qk_norm_eps = c->norm_eps;
    ao.qk_norm_plus_one = f->norm_plus_one;
    /* transformers' query_pre_attn_scalar**-0.5, or Granite's attention_multiplier */
    ao.scale = c->query_pre_attn_scalar > 0.0 ? pow(c->query_pre_attn_scalar, -0.5)
                                              : c->attention_multiplier;
    ao.softcap = c->attn_softcap;
    ao.sinks = c->attn_sinks;
    nnt_rope_options local = NNT_ROPE_OPTIONS_INIT;   /* the windowed blocks' (Gemma 3) */
    local.theta = c->rope_local_theta;
    nnt_mlp_options mo = NNT_MLP_OPTIONS_INIT, moe = NNT_MLP_OPTIONS_INIT;
    mo.kind = nnt_model_mlp_kind(c);
    mo.bias = c->mlp_bias;
    mo.fused_gate_up = f->fused_lora == 1;
    moe.kind = NNT_MLP_MOE;
    moe.bias = c->moe_bias;
    moe.expert_kind = c->swiglu_limit > 0.0 ? NNT_MLP_SWIGLU_CLAMP : NNT_MLP_SWIGLU;
    moe.swiglu_limit = c->swiglu_limit;
    moe.swiglu_alpha = c->swiglu_alpha;
    moe.experts = c->experts;
    moe.experts_per_token = c->experts_per_token;
    moe.norm_topk_prob = c->norm_topk_prob;
    moe.router_aux_coef = c->router_aux_coef;
    moe.shared_expert_hidden = c->shared_expert_hidden;
    nnt_block_options bo = NNT_BLOCK_OPTIONS_INIT;
    bo.norm = f->norm_kind;
    bo.norm_eps = c->norm_eps;
    bo.attention = &ao;
    bo.mlp = &mo;
    bo.norm_plus_one = f->norm_plus_one;
    bo.sandwich_norms = f->sandwich_norms;
    bo.parallel = nnt_model_block_parallel(c);
    bo.residual_scale = c->residual_multiplier;
    for (int64_t i = 0; i < c->layers; i++) {
        char name[64];
        nnt_layer *block = NULL;
        /* each block's attention its own window, from the configuration, and with a local
         * rotary base its own rope; its MLP a mixture of experts or not */
        int windowed = nnt_model_block_window(c, i);
        ao.window = windowed ? c->sliding_window : 0;
        if (f->rope)
            ao.rope = NNT_MODEL_NOPE_LAYER(c, i) ? NULL
                      : windowed && c->rope_local_theta > 0.0 ? &local : &c->rope;
        int sparse = nnt_model_block_moe(c, i);
        bo.mlp = sparse ? &moe : &mo;
        snprintf(name, sizeof name, "%s%lld", f->block, (long long)i);
        NNT_TRY(gl_block_new(l->ctx, c->channels, c->heads,
                             sparse && c->expert_hidden ? c->expert_hidden : hidden_of(c), &bo,
                             t, fn, &block));
        NNT_TRY(adopt(l, name, block));
    }
    return NNT_OK;
}

static int add_norm(nnt_layer *l, const nnt_model_config *c, const nnt_family_layout *f,
                    const nnt_tiling *t, const char *fn)
{
    nnt_layer *norm = NULL;
    if (f->norm_kind == NNT_NORM_RMSNORM)
        NNT_TRY(gl_rmsnorm_new_ex(l->ctx, c->channels, c->norm_eps, f->norm_plus_one, t, fn,
                                  &norm));
    else
        NNT_TRY(gl_layernorm_new(l->ctx, c->channels, c->norm_eps, t, fn, &norm));
    return adopt(l, f->norm, norm);
}

/* The head's parameters are the model's output: never in NF4 (bitsandbytes leaves them). */
static void mark_output_head(nnt_layer *head)
{
    for (int i = 0; i < head->nparams; i++)
        head->params[i].output_head = 1;
}

/* A classifier's head: "score" (C -> num_labels, no bias) at every position, and its loss:
 * the cross-entropy over the labels, (one label) the pairwise loss of reward models, or for
 * regression and multi-label problems the label-values loss; the pooled position of each row
 * is the one its targets count. transformers' classifiers take no soft-cap or logits scale. */
static int add_score(nnt_layer *l, const nnt_model_config *c, const nnt_tiling *t,
                     const char *fn)
{
    nnt_layer *head = NULL, *loss = NULL;
    NNT_TRY(gl_linear_new(l->ctx, c->channels, c->num_labels, 0,
                          gl_tile(t->channels, c->channels), c->num_labels, fn, &head));
    mark_output_head(head);
    NNT_TRY(adopt(l, NNT_CLASSIFIER_HEAD, head));
    if (c->problem_type != NNT_PROBLEM_DEFAULT) {
        NNT_TRY(nnt_layer_label_values_create(l->ctx, IGNORE_INDEX, c->problem_type, &loss));
    } else if (c->num_labels == 1) {
        NNT_TRY(nnt_layer_pairwise_create(l->ctx, IGNORE_INDEX, 0.0, &loss));
    } else {
        NNT_TRY(nnt_layer_cross_entropy_create(l->ctx, IGNORE_INDEX, &loss));
        gl_cross_entropy_in_place(loss);
    }
    return adopt(l, "loss", loss);
}

static int add_head(nnt_layer *l, nnt_layer *embedding, const nnt_model_config *c,
                    const nnt_family_layout *f, const nnt_tiling *t, const char *fn)
{
    nnt_layer *head = NULL, *loss = NULL;
    if (c->num_labels > 0)
        return add_score(l, c, t, fn);
    if (c->tied)
        NNT_TRY(gl_lm_head_new(embedding, fn, &head));
    else
        NNT_TRY(gl_linear_new(l->ctx, c->channels, c->vocab, f->head_bias ? NNT_LINEAR_BIAS : 0,
                              gl_tile(t->channels, c->channels), gl_tile(t->vocab, c->vocab),
                              fn, &head));
    mark_output_head(head);   /* an untied head */
    NNT_TRY(adopt(l, "lm_head", head));
    if (c->final_softcap > 0.0) {
        nnt_layer *cap = NULL;
        NNT_TRY(gl_softcap_new(l->ctx, c->final_softcap, fn, &cap));
        NNT_TRY(adopt(l, "final_logit_softcap", cap));
    }
    if (c->logits_scaling > 0.0 && c->logits_scaling != 1.0) {
        nnt_layer *div = NULL;
        NNT_TRY(gl_scale_new(l->ctx, c->logits_scaling, fn, &div));
        NNT_TRY(adopt(l, "logits_scaling", div));
    }
    NNT_TRY(nnt_layer_cross_entropy_create(l->ctx, IGNORE_INDEX, &loss));
    gl_cross_entropy_in_place(loss);   /* the backward overwrites the logits (B, T, V) */
    return adopt(l, "loss", loss);
}

/* The embedding (with the (max_seq, C) position table where the family has one), the
 * blocks, the final norm, the head and the loss. */
static int tree_children(nnt_layer *l, const nnt_model_config *c, const nnt_tiling *t,
                         const char *fn)
{
    const nnt_family_layout *f = &nnt_family_find(c->family)->layout;
    nnt_layer *emb = NULL;
    NNT_TRY(gl_embedding_new(l->ctx, c->vocab, f->positions ? c->max_seq : 0, c->channels, t,
                             f->table, fn, &emb));
    NNT_TRY(adopt(l, f->embedding, emb));
    if (f->embed_scale)   /* transformers' hidden_size**0.5, in the embedding's dtype */
        NNT_TRY(gl_embedding_set_scale(emb, sqrt((double)c->channels)));
    else if (c->embedding_multiplier > 0.0)   /* Granite's */
        NNT_TRY(gl_embedding_set_scale(emb, c->embedding_multiplier));
    NNT_TRY(add_blocks(l, c, f, t, fn));
    NNT_TRY(add_norm(l, c, f, t, fn));
    return add_head(l, emb, c, f, t, fn);
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
    m->cfg.kv_heads = nnt_model_kv_heads(cfg);
    m->cfg.hidden = hidden_of(cfg);
    m->cfg.head_dim = head_dim_of(cfg);
    if (!nnt_family_find(cfg->family)->layout.rope) {   /* ignored, so not reported either */
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
    NNT_TRY(tree_create(ctx, cfg, &t, fn, out));
    (*out)->file_names = nnt_model_file_names;   /* nnt_layer_freeze matches them too */
    return NNT_OK;
}

int nnt_model_build(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                    int64_t T, const nnt_tiling *tiling, nnt_layer **out)
{
    const nnt_family *f = cfg ? nnt_family_find(cfg->family) : NULL;
    if (!f || !f->build || cfg->num_labels > 0)   /* a GPT-2 classifier: the tree */
        return nnt_model_build_tree(ctx, fn, cfg, B, T, tiling, out);
    nnt_tiling t;
    NNT_TRY(check_config(ctx, fn, cfg, B, T));
    NNT_TRY(resolve_tiling(ctx, fn, cfg, B, T, tiling, &t));
    NNT_TRY(f->build(ctx, fn, cfg, B, T, &t, out));
    (*out)->file_names = nnt_model_file_names;
    return NNT_OK;
}

int nnt_model_build_uninit(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg,
                           int64_t B, int64_t T, const nnt_tiling *tiling, nnt_layer **out)
{
    NNT_TRY(nnt_ctx_check(ctx, fn));
    ctx->defer_init++;
    int rc = nnt_model_build(ctx, fn, cfg, B, T, tiling, out);
    ctx->defer_init--;
    return rc;
}

NNT_API int nnt_model_create_empty(nnt_ctx *ctx, const nnt_model_config *cfg, int64_t B,
                                   int64_t T, const nnt_tiling *tiling, nnt_layer **out)
{
    const char *fn = "nnt_model_create_empty";
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    return nnt_model_build_uninit(ctx, fn, cfg, B, T, tiling, out);
}

/* Built without the layers' own initialisations (each layer would write its parameters at
 * seed 0 as it is made, and the model all of them again), then initialised once. */
int nnt_model_build_init(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                         int64_t T, const nnt_tiling *tiling, uint64_t seed, nnt_layer **out)
{
    NNT_TRY(nnt_model_build_uninit(ctx, fn, cfg, B, T, tiling, out));
    /* every value written in fp32: counted (or refused) at once, before any work */
    int rc = nnt_layer_count_values(*out, fn);
    if (rc == 0)
        rc = nnt_layer_init(*out, seed);
    if (rc) {
        nnt_layer_destroy(*out);
        *out = NULL;
    }
    return rc;
}

NNT_API int nnt_model_create(nnt_ctx *ctx, const nnt_model_config *cfg, int64_t B, int64_t T,
                             const nnt_tiling *tiling, nnt_layer **out)
{
    const char *fn = "nnt_model_create";
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    return nnt_model_build_init(ctx, fn, cfg, B, T, tiling, 0, out);
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

nnt_model_lora *nnt_model_lora_of(nnt_layer *tree)
{
    return tree->vt == &model_vt ? &((model_impl *)tree->impl)->lora : NULL;
}

/* ---- classifiers ---------------------------------------------------------------------------- */

void nnt_label_names_free(char **names, int64_t n)
{
    for (int64_t k = 0; names && k < n; k++)
        free(names[k]);
    free(names);
}

/* The tree of a classifier, for fn (NNT_E_INVAL naming fn for another layer or model). */
static int classifier_tree(const nnt_layer *model, const char *fn, model_impl **m)
{
    NNT_TRY(nnt_layer_check(model, fn));
    nnt_layer *l = (nnt_layer *)model;
    nnt_layer *tree = l->vt->inner ? l->vt->inner(l) : l;
    if (tree->vt != &model_vt || ((model_impl *)tree->impl)->cfg.num_labels < 1)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: not a classifier (a model of "
                        "num_labels >= 1)", fn);
    *m = tree->impl;
    return NNT_OK;
}

const char *const *nnt_model_label_names_of(const nnt_layer *model)
{
    nnt_layer *l = (nnt_layer *)model;
    nnt_layer *tree = l->vt->inner ? l->vt->inner(l) : l;
    return tree->vt == &model_vt ? (const char *const *)((model_impl *)tree->impl)->label_names
                                 : NULL;
}

const char *nnt_label_name_at(const char *const *names, int64_t k, char *buf, size_t size)
{
    snprintf(buf, size, "LABEL_%lld", (long long)k);
    return names ? names[k] : buf;
}

int nnt_label_names_check(nnt_ctx *ctx, const char *fn, const char *const *names, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        size_t len = names[k] ? strlen(names[k]) : 0;
        if (len == 0 || len > NNT_LABEL_NAME_MAX)
            return nnt_fail(ctx, NNT_E_INVAL, "%s: the name of label %lld is %s (1 to %d "
                            "bytes)", fn, (long long)k, names[k] ? (len ? "too long" : "empty")
                            : "NULL", NNT_LABEL_NAME_MAX);
        for (const unsigned char *c = (const unsigned char *)names[k]; *c; c++)
            if (*c < 0x20)
                return nnt_fail(ctx, NNT_E_INVAL, "%s: the name of label %lld has a control "
                                "character (0x%02x)", fn, (long long)k, *c);
        for (int64_t j = 0; j < k; j++)
            if (strcmp(names[j], names[k]) == 0)   /* (label2id maps names back to labels) */
                return nnt_fail(ctx, NNT_E_INVAL, "%s: labels %lld and %lld are both named "
                                "\"%s\"", fn, (long long)j, (long long)k, names[k]);
    }
    return NNT_OK;
}

int nnt_label_names_copy(nnt_ctx *ctx, const char *fn, const char *const *names, int64_t n,
                         char ***out)
{
    *out = NULL;
    NNT_TRY(nnt_label_names_check(ctx, fn, names, n));
    char **copy = n ? calloc((size_t)n, sizeof *copy) : NULL;
    int oom = n && !copy;
    for (int64_t k = 0; !oom && k < n; k++)
        oom = !(copy[k] = strdup(names[k]));
    if (oom) {
        nnt_label_names_free(copy, n);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    }
    *out = copy;
    return NNT_OK;
}

NNT_API int nnt_model_set_label_names(nnt_layer *model, const char *const *names, int64_t n)
{
    const char *fn = "nnt_model_set_label_names";
    model_impl *m = NULL;
    NNT_TRY(classifier_tree(model, fn, &m));
    int64_t L = m->cfg.num_labels;
    if (!names != !n || (n && n != L))
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: names %p, n %lld: give a name to each "
                        "of the classifier's %lld labels (or NULL and 0: LABEL_0, ...)", fn,
                        (const void *)names, (long long)n, (long long)L);
    char **copy = NULL;
    NNT_TRY(nnt_label_names_copy(model->ctx, fn, names, n, &copy));
    nnt_label_names_free(m->label_names, L);
    m->label_names = copy;
    return NNT_OK;
}

int nnt_model_label_names_load(nnt_layer *model, const char *fn, const char *dir,
                               const char *text, size_t len)
{
    nnt_model_config cfg;
    NNT_TRY(nnt_model_config_get(model, fn, &cfg));
    char **names = NULL;
    if (cfg.num_labels < 1)
        return NNT_OK;
    NNT_TRY(text ? nnt_model_config_label_names(model->ctx, fn, dir, text, len, cfg.num_labels,
                                                &names)
                 : nnt_model_label_names_read_dir(model->ctx, fn, dir, cfg.num_labels, &names));
    int rc = names ? nnt_model_set_label_names(model, (const char *const *)names, cfg.num_labels)
                   : NNT_OK;
    nnt_label_names_free(names, cfg.num_labels);
    return rc;
}

NNT_API int nnt_model_label_name(const nnt_layer *model, int64_t k, char *buf, size_t size)
{
    const char *fn = "nnt_model_label_name";
    model_impl *m = NULL;
    NNT_TRY(classifier_tree(model, fn, &m));
    if (k < 0 || k >= m->cfg.num_labels || !buf || size == 0)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: label %lld of %lld, buf %p, size %zu",
                        fn, (long long)k, (long long)m->cfg.num_labels, (void *)buf, size);
    return nnt_label_name_into(model->ctx, fn, (const char *const *)m->label_names, k, buf,
                               size);
}

int nnt_label_name_into(nnt_ctx *ctx, const char *fn, const char *const *names, int64_t k,
                        char *buf, size_t size)
{
    char dflt[32];
    const char *name = nnt_label_name_at(names, k, dflt, sizeof dflt);
    if (strlen(name) >= size)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the name of label %lld has %zu bytes: size %zu "
                        "is too small", fn, (long long)k, strlen(name), size);
    memcpy(buf, name, strlen(name) + 1);
    return NNT_OK;
}

NNT_API int nnt_model_pool_targets(const int32_t *ids, int64_t B, int64_t T, int64_t pad_id,
                                   const int32_t *labels, int32_t *targets)
{
    const char *fn = "nnt_model_pool_targets";
    if (!ids || !targets || B < 1 || T < 1)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: ids %p, targets %p, B %lld, T %lld (both "
                        "pointers, B, T >= 1)", fn, (const void *)ids, (void *)targets,
                        (long long)B, (long long)T);
    for (int64_t b = 0; b < B; b++) {
        const int32_t *row = ids + b * T;
        int64_t at = T - 1;
        if (pad_id >= 0)   /* transformers: argmax of position * (id != pad), 0 if none */
            for (at = T - 1; at > 0 && row[at] == pad_id; at--)
                ;
        int32_t label = labels ? labels[b] : 0;
        if (label < 0)
            return nnt_fail(NULL, NNT_E_INVAL, "%s: label %d of row %lld (>= 0)", fn,
                            (int)label, (long long)b);
        for (int64_t t = 0; t < T; t++)
            targets[b * T + t] = t == at ? label : IGNORE_INDEX;
    }
    return NNT_OK;
}

/* A classifier's (num_labels >= min_labels) last forward with targets, for fn: its tree's
 * state, its loss layer, that layer's host copy of the targets (nids of them, ignore its
 * ignore index) and L; NNT_E_INVAL for other models, NNT_E_STATE after a backward. */
typedef struct last_forward {
    model_impl *m;
    nnt_layer *loss;
    const int32_t *ids;
    int64_t nids, L;
    int32_t ignore;
} last_forward;

static int last_forward_of(nnt_layer *model, const char *fn, int64_t min_labels,
                           last_forward *lf)
{
    NNT_TRY(nnt_layer_check(model, fn));
    nnt_model_config cfg;
    NNT_TRY(nnt_model_config_get(model, fn, &cfg));
    nnt_layer *tree = model->vt->inner ? model->vt->inner(model) : model;
    if (cfg.num_labels < min_labels || tree->vt != &model_vt)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: not a classifier%s (num_labels %lld)",
                        fn, min_labels > 1 ? " of several labels" : "",
                        (long long)cfg.num_labels);
    lf->m = tree->impl;
    lf->loss = tree->children[tree->nchildren - 1];
    lf->L = cfg.num_labels;
    if (!lf->m->with_loss || !gl_loss_targets(lf->loss, &lf->ids, &lf->nids, &lf->ignore))
        return nnt_fail(model->ctx, NNT_E_STATE, "%s: no forward with targets since the last "
                        "backward", fn);
    return NNT_OK;
}

/* That forward's logits (B, T, L) on the host: *all malloc'd. */
static int last_logits(nnt_layer *model, const char *fn, const last_forward *lf, float **all)
{
    size_t bytes = (size_t)(lf->nids * lf->L) * sizeof **all;
    if (!(*all = malloc(bytes)))
        return nnt_fail(model->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    int rc = nnt_tensor_copy_to_host(lf->m->logits, *all, bytes);
    if (rc) {
        free(*all);
        *all = NULL;
    }
    return rc;
}

/* A classifier's (num_labels >= 2) last forward with targets: *counted the targets that
 * count (not the ignore index), *hits those whose largest logit (the first of equal ones, as
 * torch.argmax) is their label. Between that forward and the next backward (NNT_E_STATE
 * else); NNT_E_INVAL for other models. */
int nnt_model_label_hits(nnt_layer *model, int64_t *hits, int64_t *counted)
{
    const char *fn = "nnt_model_label_hits";
    last_forward lf;
    float *all = NULL;
    NNT_TRY(last_forward_of(model, fn, 2, &lf));
    if (lf.m->cfg.problem_type != NNT_PROBLEM_DEFAULT)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: a classifier trained on values "
                        "(problem_type %d) has no one label a row", fn, lf.m->cfg.problem_type);
    NNT_TRY(last_logits(model, fn, &lf, &all));
    *hits = *counted = 0;
    for (int64_t i = 0; i < lf.nids; i++) {
        if (lf.ids[i] == lf.ignore)
            continue;
        const float *row = all + i * lf.L;
        int64_t best = 0;
        for (int64_t k = 1; k < lf.L; k++)
            best = row[k] > row[best] ? k : best;
        ++*counted;
        *hits += best == lf.ids[i];
    }
    free(all);
    return NNT_OK;
}

NNT_API int nnt_model_pooled_logits(nnt_layer *model, float *logits, int64_t n)
{
    const char *fn = "nnt_model_pooled_logits";
    last_forward lf;
    NNT_TRY(last_forward_of(model, fn, 1, &lf));
    int64_t B = lf.m->logits->shape[0], L = lf.L, per_row = lf.nids / B;
    if (!logits || n != B * L)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: logits %p, n %lld (B * num_labels = "
                        "%lld)", fn, (void *)logits, (long long)n, (long long)(B * L));
    if (gl_pairwise_scores(lf.loss, logits, B))   /* a reward model's loss read them already */
        return NNT_OK;
    float *all = NULL;
    NNT_TRY(last_logits(model, fn, &lf, &all));
    int rc = NNT_OK;
    for (int64_t b = 0; rc == 0 && b < B; b++) {
        int64_t count = 0;
        int64_t at = gl_marked_position(lf.ids + b * per_row, per_row, lf.ignore, &count);
        if (at < 0)
            rc = nnt_fail(model->ctx, NNT_E_STATE, "%s: row %lld of the targets pools no "
                          "position", fn, (long long)b);
        else
            memcpy(logits + b * L, all + (b * per_row + at) * L, (size_t)L * sizeof *logits);
    }
    free(all);
    return rc;
}
