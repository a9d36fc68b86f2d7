/* SPDX-License-Identifier: MIT */
/* The Falcon family (NNT_FAMILY_FALCON): Hugging Face FalconForCausalLM (model_type falcon):
 * TII's Falcon-7B and Falcon-40B (and Falcon-180B, Falcon2-11B of the same layout).
 *
 * The tree (lib/models/transformer.c) is made of the shared layers as Falcon has them:
 * LayerNorm blocks (weights and biases) whose attention and MLP sit side by side on one norm
 * (parallel_attn, Falcon-7B's: y = x + attn(n(x)) + mlp(n(x))), or on two, one each
 * (new_decoder_architecture with num_ln_in_parallel_attn 2, Falcon-40B's: parallel_norms 2),
 * or one after the other (parallel_attn false: serial_blocks); multi-query attention (one
 * key/value head) or grouped-query attention with rotary positions on the whole head; an MLP
 * dense_4h_to_h(gelu(dense_h_to_4h(x))) with the exact GELU (or the tanh form: mlp_gelu);
 * biases on every product or on none (bias); a final LayerNorm; the head tied to the token
 * table unless tie_word_embeddings is false. The files hold q, k and v in one tensor
 * "self_attention.query_key_value" whose rows go key/value head by key/value head (the q
 * heads of a group, then its k, then its v: family.h's nnt_hf_fused with per_head; Falcon-7B's
 * multi-query one is q's rows then k's then v's), read into and written from the tree's
 * q_proj, k_proj, v_proj; LoRA adapts it as PEFT does, one module query_key_value whose B's
 * rows go the same way. The other modules are renamed on the way in and out
 * (self_attention, dense, dense_h_to_4h, dense_4h_to_h, and with two norms ln_attn, ln_mlp).
 * ALiBi (Falcon-RW) is refused. Dropouts are read and not applied (nnt trains without
 * dropout: a warning says so). Checked against transformers 5.24's modeling_falcon.py
 * (tests/test_model_window.c). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

/* tiiuae/falcon-7b and falcon-40b: V 65024, 2048 positions, heads of 64, hidden 4 C, no
 * biases, LayerNorm eps 1e-5, rope theta 1e4, tied. 7b: C 4544, 32 layers, 71 heads, one
 * key/value head, one norm a block (query_key_value C (C + 2 hd), dense C^2, the MLP 8 C^2,
 * the norm 2 C) 207,274,560 a block, with the table and the final LayerNorm 6,921,720,704;
 * 40b: C 8192, 60 layers, 128 heads, 8 key/value heads, two norms a block, 683,458,560 a
 * block, 41,303,293,952. These are transformers' counts for these shapes, the model cards'
 * 7B and 40B. */
static const struct falcon_preset {
    const char *name;
    int64_t layers, heads, kv_heads, channels, parallel_norms;
} PRESETS[] = {
    {"falcon-7b", 32, 71, 1, 4544, 0},
    {"falcon-40b", 60, 128, 8, 8192, 2},
};

static const char *const PRESET_NAMES[] = {"falcon-7b", "falcon-40b", NULL};

static int falcon_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct falcon_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_FALCON;
        c->vocab = 65024;
        c->max_seq = 2048;
        c->layers = p->layers;
        c->heads = p->heads;
        c->kv_heads = p->kv_heads;
        c->channels = p->channels;
        c->hidden = 4 * p->channels;
        c->qkv_bias = c->out_bias = c->mlp_bias = 0;
        c->parallel_norms = p->parallel_norms;
        return 1;
    }
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

static const nnt_hf_arch ARCHS[] = {{"FalconForCausalLM", "falcon", NULL}};

/* key, else its older name alias (FalconConfig's attribute_map: n_layer, n_head, n_head_kv) */
static int int_or_alias(const nnt_cfg_in *o, const char *key, const char *alias, int64_t def,
                        int64_t *out)
{
    return nnt_cfg_int(o, nnt_cfg_has(o, key) || !nnt_cfg_has(o, alias) ? key : alias, 0, def,
                       out);
}

/* FalconConfig's keys and defaults (transformers 5.24): vocab_size 65024, hidden_size 4544,
 * num_hidden_layers 32, num_attention_heads 71, num_kv_heads (null: the heads), multi_query
 * true, new_decoder_architecture false, parallel_attn true, num_ln_in_parallel_attn (null: 2
 * with the new architecture, else 1), bias false, alibi false (true: unsupported),
 * layer_norm_epsilon 1e-5, max_position_embeddings 2048, ffn_hidden_size (null: 4 C),
 * activation "gelu" (the exact GELU; "gelu_new", "gelu_pytorch_tanh", "gelu_fast": the tanh
 * one), tie_word_embeddings true, the rope of rope_scaling or rope_parameters (rope_theta,
 * default 10000), dropouts 0. The key/value heads as FalconAttention takes them: the new
 * architecture's num_kv_heads, else one with multi_query, else num_kv_heads (which the
 * older layout needs to be the heads). */
static int falcon_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[4] = {"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"};
    static const char *const drops[2] = {"hidden_dropout", "attention_dropout"};
    int act = 0, mq = 1, new_arch = 0, parallel = 1, alibi = 0;
    int64_t kv = 0, norms = 0;
    (void)arch;
    NNT_TRY(nnt_cfg_int(o, "vocab_size", 0, 65024, &c->vocab));
    NNT_TRY(nnt_cfg_int(o, "hidden_size", 0, 4544, &c->channels));
    NNT_TRY(int_or_alias(o, "num_hidden_layers", "n_layer", 32, &c->layers));
    NNT_TRY(int_or_alias(o, "num_attention_heads", "n_head", 71, &c->heads));
    NNT_TRY(int_or_alias(o, "num_kv_heads", "n_head_kv", c->heads, &kv));
    NNT_TRY(nnt_cfg_int(o, "max_position_embeddings", 0, 2048, &c->max_seq));
    NNT_TRY(nnt_cfg_int(o, "ffn_hidden_size", 0, 4 * c->channels, &c->hidden));
    NNT_TRY(nnt_cfg_double(o, "layer_norm_epsilon", 0, 1e-5, &c->norm_eps));
    NNT_TRY(nnt_cfg_choice(o, "activation", acts[0], acts, 4, &act));
    NNT_TRY(nnt_cfg_bool(o, "multi_query", 1, &mq));
    NNT_TRY(nnt_cfg_bool(o, "new_decoder_architecture", 0, &new_arch));
    NNT_TRY(nnt_cfg_bool(o, "parallel_attn", 1, &parallel));
    NNT_TRY(nnt_cfg_int(o, "num_ln_in_parallel_attn", 0, new_arch ? 2 : 1, &norms));
    NNT_TRY(nnt_cfg_bool(o, "bias", 0, &c->qkv_bias));
    NNT_TRY(nnt_cfg_bool(o, "alibi", 0, &alibi));
    NNT_TRY(nnt_cfg_bool(o, "tie_word_embeddings", 1, &c->tied));
    if (alibi)
        return nnt_cfg_unsupported(o, "alibi", "true", "false: rotary positions");
    if (!parallel && new_arch)   /* transformers' layer reads ln_attn, which it then lacks */
        return nnt_cfg_unsupported(o, "parallel_attn", "false with new_decoder_architecture",
                                   "true");
    if (parallel && (norms < 1 || norms > 2 || (norms == 2 && !new_arch))) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)norms);
        return nnt_cfg_unsupported(o, "num_ln_in_parallel_attn", v,
                                   "1, or 2 with new_decoder_architecture");
    }
    if (!new_arch && !mq && kv != c->heads)
        return nnt_cfg_unsupported(o, "num_kv_heads", "other than the heads",
                                   "the heads without new_decoder_architecture or multi_query");
    NNT_TRY(nnt_cfg_dropouts(o, drops, 2));
    c->out_bias = c->mlp_bias = c->qkv_bias;
    c->kv_heads = new_arch || !mq ? kv : 1;
    c->serial_blocks = !parallel;
    c->parallel_norms = parallel && norms == 2 ? 2 : 0;
    c->mlp_gelu = act ? NNT_GELU_TANH : 0;
    return nnt_cfg_rope(o, 10000.0, c->max_seq, &c->rope);
}

/* The layout FalconForCausalLM can hold: the older architecture (one key/value head, or one
 * per head; one norm side by side, or one after the other) or the new one (any key/value
 * heads, side by side on one norm or two). */
static int new_architecture(const nnt_model_config *c)
{
    int64_t kv = nnt_model_kv_heads(c);
    return c->parallel_norms == 2 || (kv != 1 && kv != c->heads);
}

/* FalconForCausalLM: every bias or none, heads of C / NH, no q/k norms; blocks one after the
 * other only with one key/value head or one per head (the older architecture). */
static int falcon_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->qkv_bias != c->out_bias || c->qkv_bias != c->mlp_bias || c->qk_norm)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the Falcon family has biases on q, k, v, dense "
                        "and the MLP together or on none, and no q/k norms (qkv_bias=%d, "
                        "out_bias=%d, mlp_bias=%d, qk_norm=%d)", fn, c->qkv_bias, c->out_bias,
                        c->mlp_bias, c->qk_norm);
    if (c->head_dim != 0 && c->head_dim * c->heads != c->channels)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: a Falcon model's heads are channels / heads "
                        "wide (head_dim %lld, channels %lld, heads %lld)", fn,
                        (long long)c->head_dim, (long long)c->channels, (long long)c->heads);
    if (c->serial_blocks && new_architecture(c))
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: a Falcon model with its blocks' parts one "
                        "after the other has one key/value head or one per head (kv_heads "
                        "%lld of %lld heads: the new architecture, whose parts are side by side)",
                        fn, (long long)c->kv_heads, (long long)c->heads);
    return NNT_OK;
}

/* FalconConfig's keys: the architecture that holds the configuration, its arrangement,
 * bias, activation, the rope, no dropout and no token ids. */
static void falcon_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    int new_arch = new_architecture(c);
    (void)arch;
    nnt_cfg_put_int(t, "vocab_size", c->vocab);
    nnt_cfg_put_int(t, "hidden_size", c->channels);
    nnt_cfg_put_int(t, "num_hidden_layers", c->layers);
    nnt_cfg_put_int(t, "num_attention_heads", c->heads);
    nnt_cfg_put_int(t, "num_kv_heads", nnt_model_kv_heads(c));
    nnt_cfg_put_int(t, "max_position_embeddings", c->max_seq);
    nnt_cfg_put_int(t, "ffn_hidden_size", c->hidden ? c->hidden : 4 * c->channels);
    nnt_cfg_put_double(t, "layer_norm_epsilon", c->norm_eps);
    nnt_cfg_add(t, ",\n  \"activation\": \"%s\"",
                nnt_model_mlp_kind(c) == NNT_MLP_GELU_ERF ? "gelu" : "gelu_pytorch_tanh");
    nnt_cfg_put_bool(t, "new_decoder_architecture", new_arch);
    nnt_cfg_put_bool(t, "multi_query", nnt_model_kv_heads(c) == 1);
    nnt_cfg_put_bool(t, "parallel_attn", !c->serial_blocks);
    nnt_cfg_put_int(t, "num_ln_in_parallel_attn", c->parallel_norms == 2 ? 2 : 1);
    nnt_cfg_put_bool(t, "bias", c->qkv_bias);
    nnt_cfg_put_bool(t, "alibi", 0);
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_double(t, "hidden_dropout", 0.0);
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    nnt_cfg_put_rope(t, &c->rope);
    nnt_cfg_put_no_token_ids(t, c);
}

/* ---- parameter names in the files ----------------------------------------------------------- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

/* The tree's module names and Falcon's, each between dots or at the end of a name (the
 * output projection and the fused LoRA module before the attention itself); the two norms
 * of parallel_norms 2 last. */
static const char *const RENAMES[7][2] = {
    {".self_attn.o_proj", ".self_attention.dense"},
    {".self_attn.qkv_proj", ".self_attention.query_key_value"},
    {".self_attn", ".self_attention"},
    {".mlp.c_fc", ".mlp.dense_h_to_4h"},
    {".mlp.c_proj", ".mlp.dense_4h_to_h"},
    {".input_layernorm", ".ln_attn"},
    {".post_attention_layernorm", ".ln_mlp"}};

static void falcon_hf_rename(const nnt_model_config *c, const char *name, char *out,
                             size_t size)
{
    nnt_hf_rename_modules(name, RENAMES, c->parallel_norms == 2 ? 7 : 5, out, size);
}

static const nnt_hf_fused FUSED[] = {
    {"self_attention.query_key_value.weight",
     {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}, 1},
    {"self_attention.query_key_value.bias",
     {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"}, 1},
};

const nnt_family nnt_family_falcon = {
    NNT_FAMILY_FALCON, "falcon", "Falcon",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_ROPE |
        NNT_FAMILY_HAS_UNTIED | NNT_FAMILY_HAS_BIASES | NNT_FAMILY_HAS_SERIAL_BLOCKS |
        NNT_FAMILY_HAS_GELU_CHOICE | NNT_FAMILY_HAS_PARALLEL_NORMS,
    falcon_preset, PRESET_NAMES,
    falcon_check,
    {"transformer.word_embeddings", "weight", "transformer.h.", "transformer.ln_f", 0,
     NNT_NORM_LAYERNORM, NNT_MLP_GELU_ERF, 1, 0, 0, 0, 2, 1, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), falcon_read_hf, NULL,
    falcon_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "transformer.h.",
    NULL, 0,
    "query_key_value",   /* PEFT 0.21's default for falcon */
    falcon_hf_rename,
    NULL,
    FUSED, (int)(sizeof FUSED / sizeof FUSED[0]),
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
