// SPDX-License-Identifier: MIT
/* The mixture-of-experts family (NNT_FAMILY_MOE): Hugging Face MixtralForCausalLM,
 * Qwen3MoeForCausalLM, OlmoeForCausalLM, Qwen2MoeForCausalLM and GptOssForCausalLM. Their blocks are Llama's
 * (RMSNorm, grouped-query attention with rotary positions; Qwen3-MoE's q/k norms per head,
 * OLMoE's over each token's whole q and k projections: qk_norm 2; Qwen2-MoE's q, k, v
 * biases) with an NNT_MLP_MOE MLP (lib/layers/moe.c) in the blocks the configuration says
 * (decoder_sparse_step, mlp_only_layers), a dense SwiGLU MLP in the others. Qwen2-MoE's
 * MoE MLPs add a shared expert gated by a sigmoid ("mlp.shared_expert.gate_proj.weight",
 * "mlp.shared_expert_gate.weight" (1, C)).
 *
 * Parameter names are transformers' in the files save_pretrained writes and the Hub holds
 * (per expert): "model.layers.<i>.mlp.gate.weight" (E, C), "...mlp.experts.<e>.gate_proj
 * .weight" (I, C), up_proj, down_proj (C, I); Mixtral's files name them
 * "...block_sparse_moe.gate.weight" and "...block_sparse_moe.experts.<e>.w1 / w3 / w2
 * .weight" (gate, up, down): those are renamed on the way in and out (hf_rename).
 *
 * gpt-oss (OpenAI's gpt-oss-20b, -120b): every block sparse, q/k/v/o biases, attention sinks
 * ("self_attn.sinks" (NH)), windows on every other block (layer_types), YaRN, a router with a
 * bias ("mlp.router.weight", "mlp.router.bias") taking the top k of its logits and a softmax
 * over them (the renormalised top-k of softmax: norm_topk_prob), experts with biases and
 * gpt-oss's clamped SwiGLU (swiglu_limit, swiglu_alpha). Its files stack each block's experts
 * (hf_stack): "mlp.experts.gate_up_proj" (E, C, 2 I), expert e's gate_proj and up_proj
 * weights transposed with their columns interleaved (gate, up, gate, ...),
 * "mlp.experts.gate_up_proj_bias" (E, 2 I) likewise, "mlp.experts.down_proj" (E, I, C) and
 * "mlp.experts.down_proj_bias" (E, C); the original checkpoints hold gate_up_proj and
 * down_proj as MXFP4 blocks and scales, which are read too. */
#include "models.h"
#include "family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

static const struct moe_preset {
    const char *name;
    int64_t vocab, max_seq, layers, heads, kv_heads, channels, hidden, head_dim;
    double eps, theta;
    int qk_norm;
    int64_t experts, k, expert_hidden;
    int norm;
    double aux;
    int64_t shared;           /* shared expert's inner size (Qwen2-MoE; 0: none) */
    int qkv_bias;
} PRESETS[] = {
    /* tests and demos: Qwen3-MoE's layout */
    {"moe-tiny", 256, 256, 2, 4, 2, 64, 172, 0, 1e-6, 10000.0, 1, 8, 2, 32, 1, 0.01, 0, 0},
    /* mistralai/Mixtral-8x7B-v0.1: 46.7B parameters, 12.9B active */
    {"mixtral-8x7b", 32000, 32768, 32, 32, 8, 4096, 14336, 0, 1e-5, 1e6, 0, 8, 2, 14336, 1,
     0.0, 0, 0},
    /* Qwen/Qwen3-30B-A3B: 30.5B parameters, 3.3B active */
    {"qwen3-30b-a3b", 151936, 40960, 48, 32, 4, 2048, 6144, 128, 1e-6, 1e6, 1, 128, 8, 768, 1,
     0.0, 0, 0},
    /* allenai/OLMoE-1B-7B-0924: 6.92B parameters, 1.28B active; q/k norms over the whole
     * projections, weights not renormalised */
    {"olmoe-1b-7b", 50304, 4096, 16, 16, 16, 2048, 1024, 0, 1e-5, 10000.0, 2, 64, 8, 1024, 0,
     0.0, 0, 0},
    /* Qwen/Qwen1.5-MoE-A2.7B: 14.3B parameters, 2.7B active; a shared expert of 5632 gated
     * by a sigmoid, q/k/v biases, weights not renormalised */
    {"qwen1.5-moe-a2.7b", 151936, 8192, 24, 16, 16, 2048, 5632, 0, 1e-6, 1e6, 0, 60, 4, 1408,
     0, 0.0, 5632, 1},
};

static const char *const PRESET_NAMES[] = {"moe-tiny",    "mixtral-8x7b",
                                           "qwen3-30b-a3b", "olmoe-1b-7b",
                                           "qwen1.5-moe-a2.7b", "gpt-oss-20b",
                                           "gpt-oss-120b", "gpt-oss-tiny", NULL};

/* openai/gpt-oss-20b (24 blocks, 32 experts: 20.9B parameters, 3.6B active) and
 * gpt-oss-120b (36 blocks, 128 experts: 116.8B, 5.1B active): their config.json;
 * gpt-oss-tiny (tests and demos): their layout at V 256 (bytes), L 2, C 64, NH 4, NKV 2,
 * hd 16, 4 experts of 64 (top 2), windows of 32 */
static int gpt_oss_preset(const char *name, nnt_model_config *c)
{
    int big = strcmp(name, "gpt-oss-120b") == 0, tiny = strcmp(name, "gpt-oss-tiny") == 0;
    if (!big && !tiny && strcmp(name, "gpt-oss-20b") != 0)
        return 0;
    nnt_model_config init = NNT_MODEL_CONFIG_INIT;
    *c = init;
    c->family = NNT_FAMILY_MOE;
    c->vocab = 201088, c->max_seq = 131072, c->layers = big ? 36 : 24;
    c->heads = 64, c->kv_heads = 8, c->channels = 2880, c->hidden = 2880, c->head_dim = 64;
    c->norm_eps = 1e-5;
    c->tied = 0;
    c->qkv_bias = c->out_bias = 1, c->mlp_bias = 0;
    c->experts = big ? 128 : 32, c->experts_per_token = 4, c->expert_hidden = 2880;
    c->norm_topk_prob = 1, c->moe_every = 1;
    c->sliding_window = 128, c->window_global_every = 2;
    c->attn_sinks = 1, c->moe_bias = 1, c->swiglu_limit = 7.0, c->swiglu_alpha = 1.702;
    c->rope.theta = 150000.0;
    c->rope.scaling = NNT_ROPE_SCALING_YARN;
    c->rope.factor = 32.0, c->rope.original_max_position = 4096;
    c->rope.beta_fast = 32.0, c->rope.beta_slow = 1.0, c->rope.truncate = 0;
    if (tiny) {
        c->vocab = 256, c->max_seq = 256, c->layers = 2, c->heads = 4, c->kv_heads = 2;
        c->channels = 64, c->hidden = c->expert_hidden = 64, c->head_dim = 16;
        c->experts = 4, c->experts_per_token = 2, c->sliding_window = 32;
    }
    return 1;
}

static int moe_preset(const char *name, nnt_model_config *c)
{
    if (gpt_oss_preset(name, c))
        return 1;
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct moe_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_MOE;
        c->vocab = p->vocab, c->max_seq = p->max_seq, c->layers = p->layers;
        c->heads = p->heads, c->kv_heads = p->kv_heads, c->channels = p->channels;
        c->hidden = p->hidden, c->head_dim = p->head_dim, c->norm_eps = p->eps;
        c->tied = 0;
        c->qkv_bias = p->qkv_bias;
        c->out_bias = c->mlp_bias = 0;
        c->qk_norm = p->qk_norm;
        c->rope.theta = p->theta;
        c->shared_expert_hidden = p->shared;
        c->experts = p->experts, c->experts_per_token = p->k;
        c->expert_hidden = p->expert_hidden, c->norm_topk_prob = p->norm;
        c->router_aux_coef = p->aux;
        c->moe_every = 1;
        return 1;
    }
    return 0;
}

/* ---- checks --------------------------------------------------------------------------------- */

/* (the head_dim and qk_norm checks of every family with rotary positions: transformer.c) */
static int moe_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->experts < 1 || c->experts_per_token < 1 || c->experts_per_token > c->experts ||
        c->experts > 1024 || c->expert_hidden < 0 || c->moe_every < 0 ||
        c->shared_expert_hidden < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: a mixture of experts needs 1 <= "
                        "experts_per_token (%lld) <= experts (%lld) <= 1024, expert_hidden "
                        "(%lld), moe_every (%lld) and shared_expert_hidden (%lld) >= 0", fn,
                        (long long)c->experts_per_token, (long long)c->experts,
                        (long long)c->expert_hidden, (long long)c->moe_every,
                        (long long)c->shared_expert_hidden);
    if (!(c->router_aux_coef >= 0.0))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: router_aux_coef %g must be >= 0", fn,
                        c->router_aux_coef);
    if (c->mlp_bias || (c->out_bias && !c->qkv_bias))
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: the MoE family has no MLP biases "
                        "(mlp_bias %d; the experts' are moe_bias) and an output-projection "
                        "bias only with q, k, v biases (out_bias %d, qkv_bias %d: gpt-oss's)",
                        fn, c->mlp_bias, c->out_bias, c->qkv_bias);
    if (!(c->swiglu_limit >= 0.0) || !(c->swiglu_alpha >= 0.0) || !isfinite(c->swiglu_limit) ||
        !isfinite(c->swiglu_alpha) || (c->swiglu_alpha > 0.0 && c->swiglu_limit == 0.0))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: swiglu_limit %g and swiglu_alpha %g must be "
                        "finite and >= 0 (limit 0: SwiGLU experts, and then alpha 0)", fn,
                        c->swiglu_limit, c->swiglu_alpha);
    if (c->shared_expert_hidden > 0 && (c->moe_bias || c->swiglu_limit > 0.0))
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: a shared expert (Qwen2-MoE) with expert "
                        "biases or gpt-oss's experts", fn);
    return NNT_OK;
}

/* ---- config.json ---------------------------------------------------------------------------- */

enum { ARCH_MIXTRAL, ARCH_QWEN3_MOE, ARCH_OLMOE, ARCH_QWEN2_MOE, ARCH_GPT_OSS };

static const nnt_hf_arch ARCHS[] = {
    {"MixtralForCausalLM", "mixtral", NULL},
    {"Qwen3MoeForCausalLM", "qwen3_moe", NULL},
    {"OlmoeForCausalLM", "olmoe", NULL},
    {"Qwen2MoeForCausalLM", "qwen2_moe", NULL},
    {"GptOssForCausalLM", "gpt_oss", NULL},
};

/* Whether some block of c is in its dense list. */
static int any_dense(const nnt_model_config *c)
{
    uint64_t any = c->dense_layers;
    for (int w = 0; w < 7; w++)
        any |= c->dense_layers_more[w];
    return any != 0;
}

/* mlp_only_layers: a list of block indices below NNT_MODEL_MAX_DENSE_LAYER (absent or null:
 * none) into c's dense_layers and dense_layers_more. */
static int dense_list(const nnt_cfg_in *o, nnt_model_config *c)
{
    char text[6 * NNT_MODEL_MAX_DENSE_LAYER + 64];   /* "511, " per entry */
    c->dense_layers = 0;
    memset(c->dense_layers_more, 0, sizeof c->dense_layers_more);
    if (!nnt_cfg_has(o, "mlp_only_layers"))
        return NNT_OK;
    nnt_cfg_text(o, "mlp_only_layers", text, sizeof text);
    char *p = text;
    if (*p++ != '[')
        return nnt_cfg_bad_type(o, "mlp_only_layers", "a list of layer indices");
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == ',')
            p++;
        if (*p == ']')
            return NNT_OK;
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p)
            return nnt_cfg_bad_type(o, "mlp_only_layers", "a list of layer indices");
        if (v < 0 || v >= NNT_MODEL_MAX_DENSE_LAYER || v >= c->layers) {
            char value[32];
            snprintf(value, sizeof value, "(index %ld)", v);
            return nnt_cfg_unsupported(o, "mlp_only_layers", value,
                                       "layers below num_hidden_layers and 512");
        }
        *(v < 64 ? &c->dense_layers : &c->dense_layers_more[v / 64 - 1]) |=
            (uint64_t)1 << (v % 64);
        p = end;
    }
}

/* Qwen2-MoE's and Qwen3-MoE's: which blocks are sparse (decoder_sparse_step,
 * mlp_only_layers), and no sliding window (use_sliding_window, layer_types). */
static int sparse_layers(const nnt_cfg_in *o, nnt_model_config *c)
{
    int on = 0;
    NNT_TRY(nnt_cfg_int(o, "decoder_sparse_step", 0, 1, &c->moe_every));
    if (c->moe_every < 1)
        return nnt_cfg_bad_type(o, "decoder_sparse_step", "a positive integer");
    NNT_TRY(nnt_cfg_bool(o, "use_sliding_window", 0, &on));
    if (on)
        return nnt_cfg_unsupported(o, "use_sliding_window", "true", "false");
    nnt_model_config windows = *c;   /* a layer_types list names no sliding layer */
    windows.sliding_window = 1;
    NNT_TRY(nnt_cfg_layer_types(o, 0, &windows));
    if (nnt_cfg_has(o, "layer_types") && windows.sliding_window)
        return nnt_cfg_unsupported(o, "layer_types", "(with sliding_attention)",
                                   "full_attention only");
    return dense_list(o, c);
}

/* The load-balancing loss's weight: router_aux_loss_coef (0.001) with output_router_logits,
 * else none. */
static int aux_coef(const nnt_cfg_in *o, nnt_model_config *c)
{
    int on = 0;
    double coef = 0.0;
    NNT_TRY(nnt_cfg_bool(o, "output_router_logits", 0, &on));
    NNT_TRY(nnt_cfg_double(o, "router_aux_loss_coef", 0, 0.001, &coef));
    c->router_aux_coef = on ? coef : 0.0;
    return NNT_OK;
}

/* A key present with the value null (nnt_cfg_has: present and not null). */
static int is_null(const nnt_cfg_in *o, const char *key)
{
    char text[8];
    nnt_cfg_text(o, key, text, sizeof text);
    return strcmp(text, "null") == 0;
}

/* GptOssConfig's keys (transformers 5.24, its defaults gpt-oss-120b's): the sizes, biases
 * (attention_bias: q, k, v and o), windows on the blocks layer_types names (absent: every
 * other block from the first), the experts, swiglu_limit and swiglu_alpha, and the rope
 * (absent: YaRN factor 32 over 4096 positions, truncate false, base 150000). */
static int gpt_oss_read_hf(const nnt_cfg_in *o, nnt_model_config *c)
{
    static const char *const acts[1] = {"silu"};
    int act = 0;
    NNT_TRY(nnt_cfg_int(o, "vocab_size", 0, 201088, &c->vocab));
    NNT_TRY(nnt_cfg_int(o, "hidden_size", 0, 2880, &c->channels));
    NNT_TRY(nnt_cfg_int(o, "intermediate_size", 0, 2880, &c->hidden));
    NNT_TRY(nnt_cfg_int(o, "num_hidden_layers", 0, 36, &c->layers));
    NNT_TRY(nnt_cfg_int(o, "num_attention_heads", 0, 64, &c->heads));
    NNT_TRY(nnt_cfg_int(o, "num_key_value_heads", 0, 8, &c->kv_heads));
    NNT_TRY(nnt_cfg_int(o, "head_dim", 0, 64, &c->head_dim));
    NNT_TRY(nnt_cfg_int(o, "max_position_embeddings", 0, 131072, &c->max_seq));
    NNT_TRY(nnt_cfg_double(o, "rms_norm_eps", 0, 1e-5, &c->norm_eps));
    NNT_TRY(nnt_cfg_bool(o, "tie_word_embeddings", 0, &c->tied));
    NNT_TRY(nnt_cfg_choice(o, "hidden_act", "silu", acts, 1, &act));
    NNT_TRY(nnt_cfg_bool(o, "attention_bias", 1, &c->qkv_bias));
    c->out_bias = c->qkv_bias, c->mlp_bias = 0;
    c->qk_norm = 0;
    NNT_TRY(nnt_cfg_int(o, "num_local_experts", 0, 128, &c->experts));
    NNT_TRY(nnt_cfg_int(o, "num_experts_per_tok", 0, 4, &c->experts_per_token));
    c->expert_hidden = c->hidden, c->norm_topk_prob = 1, c->moe_every = 1;
    NNT_TRY(aux_coef(o, c));
    c->attn_sinks = 1, c->moe_bias = 1;
    NNT_TRY(nnt_cfg_double(o, "swiglu_limit", 0, 7.0, &c->swiglu_limit));
    NNT_TRY(nnt_cfg_double(o, "swiglu_alpha", 0, 1.702, &c->swiglu_alpha));
    if (!(c->swiglu_limit > 0.0) || !(c->swiglu_alpha > 0.0))
        return nnt_cfg_bad_type(o, c->swiglu_limit > 0.0 ? "swiglu_alpha" : "swiglu_limit",
                                "a positive number");
    if (c->experts < 1 || c->experts_per_token < 1 || c->experts_per_token > c->experts)
        return nnt_cfg_bad_type(o, "num_experts_per_tok", "between 1 and the experts");
    NNT_TRY(nnt_cfg_int(o, "sliding_window", 0, is_null(o, "sliding_window") ? 0 : 128,
                        &c->sliding_window));
    c->window_from = 0, c->window_global_every = c->sliding_window ? 2 : 0;
    if (c->sliding_window)
        NNT_TRY(nnt_cfg_layer_types(o, 1, c));
    if (nnt_cfg_has(o, "rope_parameters") || nnt_cfg_has(o, "rope_scaling"))
        return nnt_cfg_rope(o, 150000.0, c->max_seq, &c->rope);
    /* none, or null: GptOssConfig's default */
    NNT_TRY(nnt_cfg_double(o, "rope_theta", 0, 150000.0, &c->rope.theta));
    c->rope.scaling = NNT_ROPE_SCALING_YARN;
    c->rope.factor = 32.0, c->rope.original_max_position = 4096;
    c->rope.beta_fast = 32.0, c->rope.beta_slow = 1.0, c->rope.truncate = 0;
    return NNT_OK;
}

static int moe_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[1] = {"silu"};
    if (arch == ARCH_GPT_OSS)
        return gpt_oss_read_hf(o, c);
    int act = 0;
    int64_t head_dim = 0;
    double jitter = 0.0;
    NNT_TRY(nnt_cfg_int(o, "vocab_size", 1, 0, &c->vocab));
    NNT_TRY(nnt_cfg_int(o, "hidden_size", 1, 0, &c->channels));
    NNT_TRY(nnt_cfg_int(o, "intermediate_size", 1, 0, &c->hidden));
    NNT_TRY(nnt_cfg_int(o, "num_hidden_layers", 1, 0, &c->layers));
    NNT_TRY(nnt_cfg_int(o, "num_attention_heads", 1, 0, &c->heads));
    /* absent or null: MixtralConfig's 8, Qwen3MoeConfig's 4, Qwen2MoeConfig's 16, OLMoE the
     * heads (transformers 5.24) */
    int64_t kv = arch == ARCH_MIXTRAL ? 8 : arch == ARCH_QWEN3_MOE ? 4
                 : arch == ARCH_QWEN2_MOE ? 16 : c->heads;
    NNT_TRY(nnt_cfg_int(o, "num_key_value_heads", 0, kv, &c->kv_heads));
    NNT_TRY(nnt_cfg_int(o, "max_position_embeddings", 1, 0, &c->max_seq));
    int qwen = arch == ARCH_QWEN3_MOE || arch == ARCH_QWEN2_MOE;
    NNT_TRY(nnt_cfg_double(o, "rms_norm_eps", 0, qwen ? 1e-6 : 1e-5, &c->norm_eps));
    NNT_TRY(nnt_cfg_bool(o, "tie_word_embeddings", 0, &c->tied));
    NNT_TRY(nnt_cfg_choice(o, "hidden_act", "silu", acts, 1, &act));
    NNT_TRY(nnt_cfg_int(o, "head_dim", 0, 0, &head_dim));
    if (nnt_cfg_has(o, "head_dim") && head_dim < 1)
        return nnt_cfg_bad_type(o, "head_dim", "a positive integer");
    c->head_dim = head_dim;
    c->qkv_bias = c->out_bias = c->mlp_bias = 0;
    /* the configuration classes' defaults: Mixtral 2, Qwen2-MoE 4, Qwen3-MoE and OLMoE 8 */
    NNT_TRY(nnt_cfg_int(o, "num_experts_per_tok", 0,
                        arch == ARCH_MIXTRAL ? 2 : arch == ARCH_QWEN2_MOE ? 4 : 8,
                        &c->experts_per_token));
    NNT_TRY(aux_coef(o, c));
    c->moe_every = 1;
    if (arch == ARCH_MIXTRAL) {
        NNT_TRY(nnt_cfg_int(o, "num_local_experts", 0, 8, &c->experts));
        c->expert_hidden = c->hidden;
        c->norm_topk_prob = 1;
        NNT_TRY(nnt_cfg_double(o, "router_jitter_noise", 0, 0.0, &jitter));
        if (jitter != 0.0)
            return nnt_cfg_unsupported(o, "router_jitter_noise", "(not 0)", "0");
        NNT_TRY(nnt_cfg_int(o, "sliding_window", 0, 0, &c->sliding_window));
        if (nnt_cfg_has(o, "sliding_window") && c->sliding_window < 1)
            return nnt_cfg_bad_type(o, "sliding_window", "a positive integer or null");
    } else if (arch == ARCH_OLMOE) {
        int64_t e = 0;
        NNT_TRY(nnt_cfg_int(o, "num_local_experts", 0, 64, &e));
        NNT_TRY(nnt_cfg_int(o, "num_experts", 0, e, &c->experts));
        c->expert_hidden = c->hidden;
        NNT_TRY(nnt_cfg_bool(o, "norm_topk_prob", 0, &c->norm_topk_prob));
        NNT_TRY(nnt_cfg_bool(o, "attention_bias", 0, &c->qkv_bias));
        if (c->qkv_bias)
            return nnt_cfg_unsupported(o, "attention_bias", "true", "false");
        if (nnt_cfg_has(o, "clip_qkv"))
            return nnt_cfg_unsupported(o, "clip_qkv", "(a number)", "null");
        c->qk_norm = 2;
    } else if (arch == ARCH_QWEN3_MOE) {
        int64_t e = 0;
        NNT_TRY(nnt_cfg_int(o, "num_local_experts", 0, 128, &e));
        NNT_TRY(nnt_cfg_int(o, "num_experts", 0, e, &c->experts));
        NNT_TRY(nnt_cfg_int(o, "moe_intermediate_size", 0, 768, &c->expert_hidden));
        NNT_TRY(nnt_cfg_bool(o, "norm_topk_prob", 0, &c->norm_topk_prob));
        NNT_TRY(sparse_layers(o, c));
        NNT_TRY(nnt_cfg_bool(o, "attention_bias", 0, &c->qkv_bias));
        if (c->qkv_bias)
            return nnt_cfg_unsupported(o, "attention_bias", "true", "false");
        c->qk_norm = 1;
    } else {   /* Qwen2-MoE: Qwen2MoeConfig's defaults are Qwen1.5-MoE-A2.7B's */
        NNT_TRY(nnt_cfg_int(o, "num_experts", 0, 60, &c->experts));
        NNT_TRY(nnt_cfg_int(o, "moe_intermediate_size", 0, 1408, &c->expert_hidden));
        NNT_TRY(nnt_cfg_int(o, "shared_expert_intermediate_size", 0, 5632,
                            &c->shared_expert_hidden));
        if (c->shared_expert_hidden < 1)
            return nnt_cfg_bad_type(o, "shared_expert_intermediate_size", "a positive integer");
        NNT_TRY(nnt_cfg_bool(o, "norm_topk_prob", 0, &c->norm_topk_prob));
        NNT_TRY(sparse_layers(o, c));
        NNT_TRY(nnt_cfg_bool(o, "qkv_bias", 1, &c->qkv_bias));
        c->qk_norm = 0;
    }
    if (c->experts < 1 || c->experts_per_token < 1 || c->experts_per_token > c->experts)
        return nnt_cfg_bad_type(o, "num_experts_per_tok", "between 1 and the experts");
    /* MixtralConfig's default_theta is 1e6, the others' 1e4 (transformers 5.24) */
    return nnt_cfg_rope(o, arch == ARCH_MIXTRAL ? 1000000.0 : 10000.0, c->max_seq,
                        &c->rope);
}

/* The architecture c is saved as, or -1 if none has c. */
static int arch_of(const nnt_model_config *c)
{
    int uniform = c->moe_every <= 1 && !any_dense(c) &&
                  (!c->expert_hidden || c->expert_hidden == c->hidden);
    if (c->attn_sinks || c->moe_bias || c->swiglu_limit > 0.0 || c->out_bias)
        return c->attn_sinks && c->moe_bias && c->swiglu_limit > 0.0 && uniform &&
                       c->norm_topk_prob && !c->qk_norm && c->qkv_bias == c->out_bias &&
                       !c->shared_expert_hidden
                   ? ARCH_GPT_OSS
                   : -1;
    if (c->shared_expert_hidden > 0)
        return !c->qk_norm && !c->sliding_window ? ARCH_QWEN2_MOE : -1;
    if (c->qkv_bias)
        return -1;
    if (c->qk_norm == 2 && uniform && !c->sliding_window)
        return ARCH_OLMOE;
    if (!c->qk_norm && c->norm_topk_prob && uniform)
        return ARCH_MIXTRAL;
    if (c->qk_norm == 1 && !c->sliding_window)
        return ARCH_QWEN3_MOE;
    return -1;
}

static int moe_hf_arch(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    int arch = arch_of(c);
    if (arch >= 0)
        return arch;
    return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: no Hugging Face architecture has qk_norm=%d, "
                    "norm_topk_prob=%d, moe_every=%lld, dense layers %s, expert_hidden %lld, "
                    "sliding_window %lld, qkv_bias %d, shared_expert_hidden %lld "
                    "(MixtralForCausalLM: no q/k norms, renormalised, every block sparse with "
                    "experts of hidden, no biases; Qwen3MoeForCausalLM: q/k norms per head, no "
                    "window, no biases; OlmoeForCausalLM: q/k norms over the projections, every "
                    "block sparse with experts of hidden, no window, no biases; "
                    "Qwen2MoeForCausalLM: a shared expert, no q/k norms, no window; "
                    "GptOssForCausalLM: attention sinks, expert biases, the clamped SwiGLU, "
                    "every block sparse with experts of hidden, renormalised, no q/k norms; "
                    "attn_sinks %d, moe_bias %d, swiglu_limit %g)", fn,
                    c->qk_norm, c->norm_topk_prob, (long long)c->moe_every,
                    any_dense(c) ? "some" : "none", (long long)c->expert_hidden,
                    (long long)c->sliding_window, c->qkv_bias,
                    (long long)c->shared_expert_hidden, c->attn_sinks, c->moe_bias,
                    c->swiglu_limit);
}

/* GptOssConfig's keys */
static void gpt_oss_write_hf(nnt_cfg_out *t, const nnt_model_config *c)
{
    nnt_cfg_put_sizes(t, c);
    nnt_cfg_add(t, ",\n  \"hidden_act\": \"silu\"");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_bool(t, "attention_bias", c->qkv_bias);
    nnt_cfg_put_int(t, "num_local_experts", c->experts);
    nnt_cfg_put_int(t, "num_experts_per_tok", c->experts_per_token);
    nnt_cfg_put_bool(t, "output_router_logits", c->router_aux_coef > 0.0);
    nnt_cfg_put_double(t, "router_aux_loss_coef",
                       c->router_aux_coef > 0.0 ? c->router_aux_coef : 0.001);
    nnt_cfg_put_double(t, "swiglu_limit", c->swiglu_limit);
    nnt_cfg_put_double(t, "swiglu_alpha", c->swiglu_alpha > 0.0 ? c->swiglu_alpha : 1.702);
    nnt_cfg_put_window(t, c);
    if (c->sliding_window)
        nnt_cfg_put_layer_types(t, c);
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    /* the rope always as an object: GptOssConfig takes none, or a null rope_scaling, as its
     * default YaRN */
    nnt_cfg_add(t, ",\n  \"rope_parameters\": ");
    nnt_cfg_put_rope_object(t, &c->rope);
}

static void moe_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    if (arch == ARCH_GPT_OSS) {
        gpt_oss_write_hf(t, c);
        return;
    }
    nnt_cfg_put_sizes(t, c);
    nnt_cfg_add(t, ",\n  \"hidden_act\": \"silu\"");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_int(t, "num_experts_per_tok", c->experts_per_token);
    nnt_cfg_put_bool(t, "output_router_logits", c->router_aux_coef > 0.0);
    nnt_cfg_put_double(t, "router_aux_loss_coef",
                       c->router_aux_coef > 0.0 ? c->router_aux_coef : 0.001);
    if (arch == ARCH_MIXTRAL) {
        nnt_cfg_put_int(t, "num_local_experts", c->experts);
        nnt_cfg_put_double(t, "router_jitter_noise", 0.0);
        nnt_cfg_put_window(t, c);
    } else if (arch == ARCH_OLMOE) {
        nnt_cfg_put_int(t, "num_experts", c->experts);
        nnt_cfg_put_bool(t, "norm_topk_prob", c->norm_topk_prob);
        nnt_cfg_put_bool(t, "attention_bias", 0);
        nnt_cfg_add(t, ",\n  \"clip_qkv\": null");
    } else {   /* Qwen3-MoE, Qwen2-MoE */
        nnt_cfg_put_int(t, "num_experts", c->experts);
        nnt_cfg_put_int(t, "moe_intermediate_size",
                        c->expert_hidden ? c->expert_hidden : c->hidden);
        if (arch == ARCH_QWEN2_MOE)
            nnt_cfg_put_int(t, "shared_expert_intermediate_size", c->shared_expert_hidden);
        nnt_cfg_put_bool(t, "norm_topk_prob", c->norm_topk_prob);
        nnt_cfg_put_int(t, "decoder_sparse_step", c->moe_every > 1 ? c->moe_every : 1);
        nnt_cfg_add(t, ",\n  \"mlp_only_layers\": [");
        for (int64_t i = 0, n = 0; i < c->layers; i++)
            if (NNT_MODEL_DENSE_LAYER(c, i))
                nnt_cfg_add(t, "%s%lld", n++ ? ", " : "", (long long)i);
        nnt_cfg_add(t, "]");
        if (arch == ARCH_QWEN2_MOE)
            nnt_cfg_put_bool(t, "qkv_bias", c->qkv_bias);
        else
            nnt_cfg_put_bool(t, "attention_bias", 0);
        nnt_cfg_put_bool(t, "use_sliding_window", 0);
    }
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    nnt_cfg_put_rope(t, &c->rope);
}

/* ---- parameter names: Mixtral's files ---------------------------------------------------- */

static void moe_hf_rename(const nnt_model_config *c, const char *name, char *out, size_t size)
{
    static const char *const MIXTRAL[4][2] = {{".mlp", ".block_sparse_moe"},
                                              {".gate_proj", ".w1"},
                                              {".up_proj", ".w3"},
                                              {".down_proj", ".w2"}};
    if (arch_of(c) != ARCH_MIXTRAL) {   /* the others: the tree's own names */
        snprintf(out, size, "%s", name);
        return;
    }
    nnt_hf_rename_modules(name, MIXTRAL, 4, out, size);
}

/* ---- parameter names: transformers' fused layout ----------------------------------------
 * transformers 5 keeps each block's experts as two 3-D tensors, "mlp.experts.gate_up_proj"
 * (E, 2 I, C: expert e's gate_proj rows, then its up_proj rows) and "mlp.experts.down_proj"
 * (E, C, I), and so do the files save_pretrained(save_original_format=False) writes (the
 * router then "mlp.gate.weight" for Mixtral too); it also reads Mixtral's per-expert w1 w2
 * w3 under ".mlp." and the fused tensors under ".block_sparse_moe." (it renames that to
 * ".mlp." first). Those are the other places of an expert's weights (and of Mixtral's
 * router) when a file does not have the per-expert name. */

/* name = "<block>.mlp.experts.<e>.<gate|up|down>_proj.<weight|bias>": the length of
 * "<block>", e, proj (0 gate, 1 up, 2 down) and bias; 0 if not. */
static int expert_param(const char *name, size_t *head, long *e, int *proj, int *bias)
{
    static const char *const PROJ[3] = {"gate_proj.", "up_proj.", "down_proj."};
    const char *m = strstr(name, ".mlp.experts.");
    if (!m)
        return 0;
    *head = (size_t)(m - name);
    char *end = NULL;
    *e = strtol(m + 13, &end, 10);
    if (end == m + 13 || *end != '.' || *e < 0)
        return 0;
    for (*proj = 0; *proj < 3; (*proj)++) {
        size_t n = strlen(PROJ[*proj]);
        if (strncmp(end + 1, PROJ[*proj], n) != 0)
            continue;
        *bias = strcmp(end + 1 + n, "bias") == 0;
        return *bias || strcmp(end + 1 + n, "weight") == 0;
    }
    return 0;
}

/* name = "<block>.mlp.experts.<e>.<proj>.weight" or "<block>.mlp.gate.weight": the length
 * of "<block>", e (-1 for the router) and proj (0 gate, 1 up, 2 down); 0 if neither. */
static int expert_of(const char *name, size_t *head, long *e, int *proj)
{
    const char *m = strstr(name, ".mlp.");
    int bias = 0;
    if (m && strcmp(m + 5, "gate.weight") == 0) {
        *head = (size_t)(m - name), *e = -1, *proj = 0;
        return 1;
    }
    return expert_param(name, head, e, proj, &bias) && !bias;
}

static int moe_hf_alt(const nnt_model_config *c, const char *name, int i, nnt_hf_alt *alt)
{
    static const char *const W[3] = {"w1", "w3", "w2"};
    size_t head = 0;
    long e = 0;
    int proj = 0, mixtral = arch_of(c) == ARCH_MIXTRAL;
    if (arch_of(c) == ARCH_GPT_OSS)   /* its stacks (gpt_oss_stack) */
        return 0;
    if (!expert_of(name, &head, &e, &proj) || (e < 0 && !mixtral) || i > 2 ||
        (!mixtral && i > 0) || (e < 0 && i > 0))
        return 0;
    int64_t C = c->channels, I = c->expert_hidden ? c->expert_hidden : c->hidden;
    if (mixtral && i == 0) {   /* ".mlp." with Mixtral's own names */
        if (e < 0)
            snprintf(alt->name, sizeof alt->name, "%.*s.mlp.gate.weight", (int)head, name);
        else
            snprintf(alt->name, sizeof alt->name, "%.*s.mlp.experts.%ld.%s.weight", (int)head,
                     name, e, W[proj]);
        alt->nd = 2;
        alt->shape[0] = e < 0 ? c->experts : proj == 2 ? C : I;
        alt->shape[1] = e < 0 || proj == 2 ? (e < 0 ? C : I) : C;
        alt->offset = 0;
        return 1;
    }
    snprintf(alt->name, sizeof alt->name, "%.*s.%s.experts.%s", (int)head, name,
             i == 2 ? "block_sparse_moe" : "mlp", proj == 2 ? "down_proj" : "gate_up_proj");
    alt->nd = 3;
    alt->shape[0] = c->experts;
    alt->shape[1] = proj == 2 ? C : 2 * I;
    alt->shape[2] = proj == 2 ? I : C;
    alt->offset = proj == 2 ? e * C * I : e * 2 * I * C + proj * I * C;
    return 1;
}

/* ---- parameter names: gpt-oss's stacked experts ----------------------------------------- */

/* The stacks of gpt-oss's blocks: gate_up_proj (E, C, 2 I), gate_up_proj_bias (E, 2 I),
 * down_proj (E, I, C), down_proj_bias (E, C); expert 0's gate_proj (down_proj) its first
 * member. */
static int gpt_oss_stack(const nnt_model_config *c, const char *name, nnt_hf_stack *s)
{
    size_t head = 0;
    long e = 0;
    int proj = 0, bias = 0;
    if (arch_of(c) != ARCH_GPT_OSS || !expert_param(name, &head, &e, &proj, &bias))
        return 0;
    if (e != 0 || proj == 1)
        return 2;
    int64_t E = c->experts, C = c->channels, I = c->expert_hidden ? c->expert_hidden : c->hidden;
    snprintf(s->name, sizeof s->name, "%.*s.mlp.experts.%s%s", (int)head, name,
             proj == 2 ? "down_proj" : "gate_up_proj", bias ? "_bias" : "");
    s->nd = bias ? 2 : 3;
    s->shape[0] = E;
    s->shape[1] = bias ? (proj == 2 ? C : 2 * I) : (proj == 2 ? I : C);
    s->shape[2] = bias ? 0 : (proj == 2 ? C : 2 * I);
    s->members = proj == 2 ? E : 2 * E;
    s->mxfp4 = !bias;
    return 1;
}

/* Member j: down_proj's expert j; gate_up_proj's expert j / 2, its gate_proj (j even) or
 * up_proj, columns (biases: elements) interleaved. */
static void gpt_oss_member(const nnt_model_config *c, const nnt_hf_stack *s, int64_t j,
                           nnt_hf_member *m)
{
    int64_t C = c->channels, I = c->expert_hidden ? c->expert_hidden : c->hidden;
    const char *x = strstr(s->name, ".mlp.experts.");
    int down = strstr(x, "down_proj") != NULL, bias = strstr(x, "_bias") != NULL;
    int64_t e = down ? j : j / 2, p = down ? 0 : j % 2;
    snprintf(m->name, sizeof m->name, "%.*s.mlp.experts.%lld.%s.%s", (int)(x - s->name),
             s->name, (long long)e, down ? "down_proj" : p ? "up_proj" : "gate_proj",
             bias ? "bias" : "weight");
    if (down) {   /* (C, I) from (I, C); (C) */
        m->offset = e * (bias ? 1 : I) * C;
        m->stride[0] = 1, m->stride[1] = bias ? 0 : C;
    } else {      /* (I, C) from (C, 2 I) columns p, p + 2, ...; (I) from (2 I) */
        m->offset = e * 2 * I * (bias ? 1 : C) + p;
        m->stride[0] = 2, m->stride[1] = bias ? 0 : 2 * I;
    }
}

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

const nnt_family nnt_family_moe = {
    NNT_FAMILY_MOE, "moe", "MoE",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_HEAD_DIM |
        NNT_FAMILY_HAS_QK_NORM | NNT_FAMILY_HAS_ROPE | NNT_FAMILY_HAS_UNTIED |
        NNT_FAMILY_HAS_WINDOW | NNT_FAMILY_HAS_MOE | NNT_FAMILY_HAS_QK_NORM_WHOLE,
    moe_preset, PRESET_NAMES,
    moe_check,
    {"model.embed_tokens", "weight", "model.layers.", "model.norm", 0, NNT_NORM_RMSNORM,
     NNT_MLP_SWIGLU, 1, 0, 0, 0, 0, 0, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), moe_read_hf, moe_hf_arch, moe_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "model.layers.",
    NULL, 0,
    "q_proj,v_proj",   /* PEFT 0.21's default targets for mixtral (none for qwen3_moe, olmoe) */
    moe_hf_rename,
    moe_hf_alt,
    NULL, 0,   /* no fused tensors */
    NULL,
    gpt_oss_stack, gpt_oss_member,
};
