/* SPDX-License-Identifier: MIT */
/* The Gemma family (NNT_FAMILY_GEMMA): Hugging Face Gemma3ForCausalLM (model_type
 * gemma3_text), Gemma2ForCausalLM, and the text model of Gemma3ForConditionalGeneration
 * (model_type gemma3: its text_config and its language model's tensors; saved as
 * Gemma3ForCausalLM).
 *
 * The tree (lib/models/transformer.c) is the Llama family's with the options Gemma gives the
 * shared layers: every RMSNorm scales by 1 + weight (weights initialised to 0), four norms
 * per block (input, post-attention, pre- and post-feedforward), the embedding's output
 * times sqrt(C), a GeGLU MLP (gelu_tanh(gate) * up), the attention scores scaled by
 * query_pre_attn_scalar^-1/2, sliding windows on the "sliding_attention" layers; Gemma 2
 * soft-caps the scores (attn_logit_softcapping) and the logits (final_logit_softcapping);
 * Gemma 3 has q/k norms and rotary bases of their own for the windowed layers
 * (rope_local_base_freq, no scaling) and the global ones (rope_theta, with linear scaling).
 * Parameter names are Hugging Face's, as the Llama family's ("model.layers.<i>.
 * pre_feedforward_layernorm.weight", ...); the head is tied unless tie_word_embeddings is
 * false. Checked against transformers 5.24's modeling_gemma3.py / modeling_gemma2.py
 * (tests/test_model_gemma.c). The embedding scale is sqrt(C) rounded to fp32, as
 * transformers computes it for fp32 weights (it rounds it to the weights' dtype: a bf16
 * checkpoint run in bf16 there scales by sqrt(3072) = 55.4256 rounded to 55.5; nnt keeps
 * fp32 weights and activations under --precision bf16 too, so its scale stays fp32). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

/* The shapes of the Hugging Face checkpoints' config.json (transformers' Gemma3TextConfig /
 * Gemma2Config defaults for the keys they omit); parameters counted with the head tied:
 *   google/gemma-3-270m  V 262144, C 640, 18 layers, 4 heads of 256, 1 kv head, hidden 2048,
 *     window 512 on 5 of every 6 layers, rope 1e6 global / 1e4 local, 32768 positions:
 *     embedding 167,772,160 + 18 x 5,573,632 + 640 = 268,098,176 parameters;
 *   google/gemma-3-1b-pt  V 262144, C 1152, 26 layers, 4 heads of 256, 1 kv head, hidden
 *     6912, the same windows and bases: 301,989,888 + 26 x 26,842,112 + 1,152 =
 *     999,885,952;
 *   google/gemma-2-2b  V 256000, C 2304, 26 layers, 8 heads of 256, 4 kv heads, hidden 9216,
 *     window 4096 on every other layer (from the first), rope 1e4, soft-caps 50 (scores) and
 *     30 (logits), 8192 positions: 589,824,000 + 26 x 77,865,984 + 2,304 = 2,614,341,888.
 * A block: q (C, NH hd), k, v (C, NKV hd), o (NH hd, C), three (C, hidden) MLP matrices, four
 * C norms and (Gemma 3) two hd q/k norms. Every one has query_pre_attn_scalar 256 and RMSNorm
 * eps 1e-6. */
static const struct gemma_preset {
    const char *name;
    int gemma3;
    int64_t vocab, max_seq, layers, heads, kv_heads, channels, hidden, window;
} PRESETS[] = {
    {"gemma3-270m", 1, 262144, 32768, 18, 4, 1, 640, 2048, 512},
    {"gemma3-1b", 1, 262144, 32768, 26, 4, 1, 1152, 6912, 512},
    {"gemma2-2b", 0, 256000, 8192, 26, 8, 4, 2304, 9216, 4096},
};

static const char *const PRESET_NAMES[] = {"gemma3-270m", "gemma3-1b", "gemma2-2b", NULL};

static int gemma_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct gemma_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_GEMMA;
        c->vocab = p->vocab;
        c->max_seq = p->max_seq;
        c->layers = p->layers;
        c->heads = p->heads;
        c->kv_heads = p->kv_heads;
        c->channels = p->channels;
        c->hidden = p->hidden;
        c->head_dim = 256;
        c->norm_eps = 1e-6;
        c->tied = 1;
        c->qkv_bias = c->out_bias = c->mlp_bias = 0;
        c->query_pre_attn_scalar = 256.0;
        c->sliding_window = p->window;
        c->qk_norm = p->gemma3;
        c->window_global_every = p->gemma3 ? 6 : 2;
        c->rope.theta = p->gemma3 ? 1000000.0 : 10000.0;
        c->rope_local_theta = p->gemma3 ? 10000.0 : 0.0;
        c->attn_softcap = p->gemma3 ? 0.0 : 50.0;
        c->final_softcap = p->gemma3 ? 0.0 : 30.0;
        return 1;
    }
    return 0;
}

/* ---- checks --------------------------------------------------------------------------------- */

/* (the head_dim and qk_norm checks of every family with rotary positions: transformer.c) */
static int gemma_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->mlp_bias)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the Gemma family has no MLP biases (mlp_bias "
                        "%d)", fn, c->mlp_bias);
    return NNT_OK;
}

/* ---- config.json ---------------------------------------------------------------------------- */

enum { ARCH_GEMMA3, ARCH_GEMMA2, ARCH_GEMMA3_MM };

/* Gemma3ForConditionalGeneration's files (google/gemma-3-4b-it and larger): the text model
 * under language_model.model. (and an untied head language_model.lm_head.weight), the names
 * of Google's checkpoints that transformers 5.24's save_pretrained writes too; or under the
 * names of transformers' modules, model.language_model. (and lm_head.weight), as files
 * written without that conversion have them. The vision tower and the projector are not
 * read. */
static const nnt_hf_nesting MM_FILES[] = {
    {{{"model.", "language_model.model."}, {"lm_head.", "language_model.lm_head."}},
     {"vision_tower.", "multi_modal_projector.", NULL}},
    {{{"model.", "model.language_model."}},
     {"model.vision_tower.", "model.multi_modal_projector.", NULL}},
    {{{NULL, NULL}}, {NULL}},
};

static const nnt_hf_arch ARCHS[] = {
    {"Gemma3ForCausalLM", "gemma3_text", NULL},
    {"Gemma2ForCausalLM", "gemma2", NULL},
    /* read only, its text model: saved as Gemma3ForCausalLM (gemma_hf_arch) */
    {"Gemma3ForConditionalGeneration", "gemma3", MM_FILES},
};

/* A soft-cap key: absent def, null 0, else a positive number. */
static int softcap(const nnt_cfg_in *o, const char *key, double def, double *out)
{
    char v[8];
    nnt_cfg_text(o, key, v, sizeof v);
    if (strcmp(v, "null") == 0) {
        *out = 0.0;
        return NNT_OK;
    }
    NNT_TRY(nnt_cfg_double(o, key, 0, def, out));
    if (nnt_cfg_has(o, key) && !(*out > 0.0))
        return nnt_cfg_bad_type(o, key, "a positive number or null");
    return NNT_OK;
}

static int read_text(const nnt_cfg_in *o, int gemma3, nnt_model_config *c)
{
    static const char *const acts[1] = {"gelu_pytorch_tanh"};
    int act = 0, bidir = 0;
    /* absent keys as Gemma3TextConfig / Gemma2Config default them (a gemma3 config's
     * text_config names only what differs from them) */
    NNT_TRY(nnt_cfg_int(o, "vocab_size", 0, gemma3 ? 262208 : 256000, &c->vocab));
    NNT_TRY(nnt_cfg_int(o, "hidden_size", 0, 2304, &c->channels));
    NNT_TRY(nnt_cfg_int(o, "intermediate_size", 0, 9216, &c->hidden));
    NNT_TRY(nnt_cfg_int(o, "num_hidden_layers", 0, 26, &c->layers));
    NNT_TRY(nnt_cfg_int(o, "num_attention_heads", 0, 8, &c->heads));
    NNT_TRY(nnt_cfg_int(o, "num_key_value_heads", 0, 4, &c->kv_heads));
    NNT_TRY(nnt_cfg_int(o, "head_dim", 0, 256, &c->head_dim));
    if (c->head_dim < 1)
        return nnt_cfg_bad_type(o, "head_dim", "a positive integer");
    NNT_TRY(nnt_cfg_int(o, "max_position_embeddings", 0, gemma3 ? 131072 : 8192, &c->max_seq));
    NNT_TRY(nnt_cfg_double(o, "rms_norm_eps", 0, 1e-6, &c->norm_eps));
    NNT_TRY(nnt_cfg_bool(o, "tie_word_embeddings", 1, &c->tied));
    NNT_TRY(nnt_cfg_choice(o, nnt_cfg_has(o, "hidden_activation") || !nnt_cfg_has(o, "hidden_act")
                                  ? "hidden_activation" : "hidden_act",
                           "gelu_pytorch_tanh", acts, 1, &act));
    NNT_TRY(nnt_cfg_bool(o, "attention_bias", 0, &c->qkv_bias));
    c->out_bias = c->qkv_bias;
    c->mlp_bias = 0;
    NNT_TRY(nnt_cfg_bool(o, "use_bidirectional_attention", 0, &bidir));
    if (bidir)
        return nnt_cfg_unsupported(o, "use_bidirectional_attention", "true",
                                   "false: causal attention");
    NNT_TRY(nnt_cfg_double(o, "query_pre_attn_scalar", 0, 256.0, &c->query_pre_attn_scalar));
    if (!(c->query_pre_attn_scalar > 0.0))
        return nnt_cfg_bad_type(o, "query_pre_attn_scalar", "a positive number");
    NNT_TRY(softcap(o, "final_logit_softcapping", gemma3 ? 0.0 : 30.0, &c->final_softcap));
    /* Gemma 3: transformers 5.24's Gemma3Attention does not pass attn_logit_softcapping to
     * the attention, so it has no effect there; here neither */
    if (!gemma3)
        NNT_TRY(softcap(o, "attn_logit_softcapping", 50.0, &c->attn_softcap));
    c->qk_norm = gemma3;
    /* which layers slide: layer_types, else Gemma 3's sliding_window_pattern (every N-th
     * layer global, default 6) or Gemma 2's alternation (every other from the first) */
    NNT_TRY(nnt_cfg_windows(o, gemma3 ? "sliding_window_pattern" : NULL, gemma3 ? 6 : 2, c));
    /* Gemma 3: global 1e6, local rope_local_base_freq (1e4) */
    return gemma3 ? nnt_cfg_rope_by_layer_type(o, 1000000.0, "rope_local_base_freq", 10000.0, c)
                  : nnt_cfg_rope(o, 10000.0, c->max_seq, &c->rope);
}

/* Gemma3ForConditionalGeneration: its text_config, except that the top level's
 * tie_word_embeddings ties the head (transformers 5.24 ties by the top level's, true by
 * default) and that final_logit_softcapping has no effect (its forward applies none; on
 * text alone, no token_type_ids, its logits are Gemma3ForCausalLM's without that cap). */
static int gemma_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    if (arch != ARCH_GEMMA3_MM)
        return read_text(o, arch == ARCH_GEMMA3, c);
    nnt_cfg_in *text = NULL;
    NNT_TRY(nnt_cfg_sub(o, "text_config", &text));
    if (!text)
        return nnt_cfg_bad_type(o, "text_config", "an object (Gemma 3's text model)");
    int rc = read_text(text, 1, c);
    nnt_cfg_sub_free(text);
    c->final_softcap = 0.0;
    return rc ? rc : nnt_cfg_bool(o, "tie_word_embeddings", 1, &c->tied);
}

/* Gemma 3 with q/k norms, Gemma 2 without. */
static int gemma_hf_arch(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    int scaled = c->rope.scaling != NNT_ROPE_SCALING_NONE;
    if (c->qkv_bias != c->out_bias || c->mlp_bias)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: Gemma's attention_bias is on q, k, v and o "
                        "alike and its MLP has none (qkv_bias %d, out_bias %d, mlp_bias %d)",
                        fn, c->qkv_bias, c->out_bias, c->mlp_bias);
    if (c->rope.scaling == NNT_ROPE_SCALING_LLAMA3)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: a Gemma config.json is written with "
                        "\"default\" or \"linear\" rope scaling, not llama3", fn);
    if (c->qk_norm) {
        if (c->attn_softcap != 0.0)
            return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: Gemma3ForCausalLM does not soft-cap "
                            "the attention scores (transformers 5.24 ignores "
                            "attn_logit_softcapping): attn_softcap %g", fn, c->attn_softcap);
        return ARCH_GEMMA3;
    }
    if (c->rope_local_theta != 0.0 && (c->rope_local_theta != c->rope.theta || scaled))
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: Gemma2ForCausalLM has one rope for every "
                        "layer (rope_local_theta %g; Gemma 3 has q/k norms)", fn,
                        c->rope_local_theta);
    return ARCH_GEMMA2;
}

/* a soft-cap, or null */
static void put_softcap(nnt_cfg_out *t, const char *key, double v)
{
    if (v > 0.0)
        nnt_cfg_put_double(t, key, v);
    else
        nnt_cfg_add(t, ",\n  \"%s\": null", key);
}

static void gemma_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    int64_t hd = c->head_dim ? c->head_dim : c->channels / c->heads;
    double qs = c->query_pre_attn_scalar > 0.0 ? c->query_pre_attn_scalar : (double)hd;
    nnt_cfg_put_sizes(t, c);
    nnt_cfg_add(t, ",\n  \"hidden_activation\": \"gelu_pytorch_tanh\"");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_bool(t, "attention_bias", c->qkv_bias);
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    /* an integer in transformers' configuration classes when it is one */
    if (qs == (double)(int64_t)qs)
        nnt_cfg_put_int(t, "query_pre_attn_scalar", (int64_t)qs);
    else
        nnt_cfg_put_double(t, "query_pre_attn_scalar", qs);
    nnt_cfg_put_window(t, c);
    nnt_cfg_put_layer_types(t, c);
    put_softcap(t, "final_logit_softcapping", c->final_softcap);
    put_softcap(t, "attn_logit_softcapping", arch == ARCH_GEMMA2 ? c->attn_softcap : 0.0);
    nnt_cfg_put_bool(t, "use_bidirectional_attention", 0);
    if (arch == ARCH_GEMMA3) {
        nnt_cfg_put_rope_by_layer_type(t, c);
    } else {
        nnt_cfg_add(t, ",\n  \"rope_parameters\": ");
        nnt_cfg_put_rope_object(t, &c->rope);
    }
}

/* ---- parameter names in the files: the tree's own; o_proj (C, NH, hd) is HF's (C, NH hd) -- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

const nnt_family nnt_family_gemma = {
    NNT_FAMILY_GEMMA, "gemma", "Gemma",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_HEAD_DIM |
        NNT_FAMILY_HAS_QK_NORM | NNT_FAMILY_HAS_ROPE | NNT_FAMILY_HAS_UNTIED |
        NNT_FAMILY_HAS_BIASES | NNT_FAMILY_HAS_WINDOW | NNT_FAMILY_HAS_SOFTCAP |
        NNT_FAMILY_HAS_QUERY_SCALE | NNT_FAMILY_HAS_LOCAL_ROPE,
    gemma_preset, PRESET_NAMES,
    gemma_check,
    {"model.embed_tokens", "weight", "model.layers.", "model.norm", 0, NNT_NORM_RMSNORM,
     NNT_MLP_GEGLU, 1, 1, 1, 1, 0, 0, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), gemma_read_hf, gemma_hf_arch,
    gemma_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "model.layers.",
    NULL, 0,
    "q_proj,v_proj",   /* PEFT 0.21's default targets for gemma2 and gemma3_text */
    NULL,
    NULL,
    NULL, 0,   /* no fused tensors */
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
