/* SPDX-License-Identifier: MIT */
/* The StarCoder2 family (NNT_FAMILY_STARCODER2): Hugging Face Starcoder2ForCausalLM
 * (model_type starcoder2): BigCode's StarCoder2 3B, 7B and 15B code models.
 *
 * The tree (lib/models/transformer.c) is made of the shared layers as StarCoder2 has them:
 * LayerNorm blocks (weight and bias) with the attention and the MLP one after the other,
 * grouped-query attention with rotary positions on the whole head vector and Mistral's sliding
 * window on every layer (sliding_window; null or absent: none), biases on q, k, v, o and the
 * MLP's products together or nowhere (use_bias), an MLP c_proj(gelu_tanh(c_fc(x))) (or the
 * exact GELU: mlp_gelu), a final
 * LayerNorm, the head tied to the token table unless tie_word_embeddings is false. Every
 * parameter is under its Hugging Face name: the blocks' children input_layernorm, self_attn,
 * post_attention_layernorm and mlp, whose products are c_fc and c_proj as in the files.
 * Dropouts (StarCoder2's files have 0.1 of each) are read and not applied: nnt trains
 * without dropout, and a warning says so. Checked against transformers 5.24's
 * modeling_starcoder2.py (tests/test_model_window.c). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

/* bigcode/starcoder2-3b, -7b, -15b (the StarCoder2 paper's table 8 and the files'
 * config.json): V 49152, 16384 positions, a sliding window of 4096, LayerNorm eps 1e-5, every
 * bias, heads of 128, hidden 4 C. A block: two LayerNorms 4 C, q and o 2 C^2, k and v
 * 2 C NKV hd, their biases 2 C + 2 NKV hd, the MLP 8 C^2 + 5 C:
 * 3b (C 3072, 30 layers, 24 heads, 2 kv heads, theta 999999.442...) 95,979,008 a block, with
 * the tied table (150,994,944) and the final LayerNorm 3,030,371,328;
 * 7b (C 4608, 32 layers, 36 heads, 4 kv heads, theta 1e6) 217,106,944 a block, tied,
 * 7,173,923,840;
 * 15b (C 6144, 40 layers, 48 heads, 4 kv heads, theta 1e5) 383,847,424 a block, with the table
 * and an untied head (2 x 301,989,888) 15,957,889,024. These are the model cards' 3.03B, 7.17B
 * and 15.96B, and transformers' counts for these shapes. */
static const struct starcoder2_preset {
    const char *name;
    int64_t layers, heads, kv_heads, channels;
    double theta;
    int tied;
} PRESETS[] = {
    {"starcoder2-3b", 30, 24, 2, 3072, 999999.4420358813, 1},
    {"starcoder2-7b", 32, 36, 4, 4608, 1000000.0, 1},
    {"starcoder2-15b", 40, 48, 4, 6144, 100000.0, 0},
};

static const char *const PRESET_NAMES[] = {"starcoder2-3b", "starcoder2-7b", "starcoder2-15b",
                                           NULL};

static int starcoder2_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct starcoder2_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_STARCODER2;
        c->vocab = 49152;
        c->max_seq = 16384;
        c->layers = p->layers;
        c->heads = p->heads;
        c->kv_heads = p->kv_heads;
        c->channels = p->channels;
        c->hidden = 4 * p->channels;
        c->norm_eps = 1e-5;
        c->tied = p->tied;
        c->qkv_bias = c->out_bias = c->mlp_bias = 1;
        c->rope.theta = p->theta;
        c->sliding_window = 4096;
        return 1;
    }
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

static const nnt_hf_arch ARCHS[] = {{"Starcoder2ForCausalLM", "starcoder2", NULL}};

/* Starcoder2Config's keys and defaults (transformers 5.24): the class's sizes (StarCoder2
 * 3B's, with 4096 positions), norm_epsilon, head_dim
 * when a file has it (Starcoder2Attention takes the attribute), tie_word_embeddings true,
 * use_bias true, sliding_window (absent or null: none) on every layer, the rope of
 * rope_scaling or rope_parameters (rope_theta, default 10000); hidden_act "gelu_pytorch_tanh",
 * "gelu_new" or "gelu_fast" (the same tanh approximation), or "gelu", the exact GELU
 * (mlp_gelu). */
static int starcoder2_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[4] = {"gelu_pytorch_tanh", "gelu_new", "gelu_fast", "gelu"};
    static const int gelus[4] = {0, 0, 0, NNT_GELU_ERF};
    static const char *const drops[3] = {"attention_dropout", "residual_dropout",
                                         "embedding_dropout"};
    static const nnt_cfg_defaults sizes = {49152, 3072, 12288, 30, 24, 2, 4096,
                                           "norm_epsilon", 1e-5, acts, 4, 1, gelus};
    (void)arch;
    NNT_TRY(nnt_cfg_sizes(o, &sizes, c));
    NNT_TRY(nnt_cfg_bool(o, "tie_word_embeddings", 1, &c->tied));
    NNT_TRY(nnt_cfg_bool(o, "use_bias", 1, &c->qkv_bias));
    c->out_bias = c->mlp_bias = c->qkv_bias;
    NNT_TRY(nnt_cfg_int(o, "sliding_window", 0, 0, &c->sliding_window));
    if (nnt_cfg_has(o, "sliding_window") && c->sliding_window < 1)
        return nnt_cfg_bad_type(o, "sliding_window", "a positive integer or null");
    NNT_TRY(nnt_cfg_dropouts(o, drops, 3));
    return nnt_cfg_rope(o, 10000.0, c->max_seq, &c->rope);
}

/* Starcoder2ForCausalLM: every bias or none, no q/k norms, a window on every layer or on
 * none. */
static int starcoder2_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->qkv_bias != c->out_bias || c->qkv_bias != c->mlp_bias || c->qk_norm)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the StarCoder2 family has biases on q, k, v, o "
                        "and the MLP together or on none, and no q/k norms (qkv_bias=%d, "
                        "out_bias=%d, mlp_bias=%d, qk_norm=%d)", fn, c->qkv_bias, c->out_bias,
                        c->mlp_bias, c->qk_norm);
    if (c->sliding_window && (c->window_from || c->window_global_every ||
                              nnt_model_window_listed(c)))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the StarCoder2 family has its sliding window on "
                        "every layer (window_from=%lld, window_global_every=%lld%s; want 0, 0 "
                        "and no window_full_layers)", fn, (long long)c->window_from,
                        (long long)c->window_global_every,
                        nnt_model_window_listed(c) ? ", window_full_layers set" : "");
    return NNT_OK;
}

/* Starcoder2Config's keys: its sizes (head_dim when not C / NH), norm_epsilon, use_bias,
 * sliding_window (null: none), no dropout. */
static void starcoder2_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    (void)arch;
    nnt_cfg_put_sizes_eps(t, c, "norm_epsilon");
    nnt_cfg_put_gelu(t, c, "gelu_pytorch_tanh");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_bool(t, "use_bias", c->qkv_bias);
    if (c->sliding_window)
        nnt_cfg_put_int(t, "sliding_window", c->sliding_window);
    else
        nnt_cfg_add(t, ",\n  \"sliding_window\": null");
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    nnt_cfg_put_double(t, "residual_dropout", 0.0);
    nnt_cfg_put_double(t, "embedding_dropout", 0.0);
    nnt_cfg_put_rope(t, &c->rope);
}

/* ---- parameter names in the files: the tree's own; o_proj (C, NH, hd) is HF's (C, NH hd) -- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

const nnt_family nnt_family_starcoder2 = {
    NNT_FAMILY_STARCODER2, "starcoder2", "StarCoder2",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_HEAD_DIM |
        NNT_FAMILY_HAS_ROPE | NNT_FAMILY_HAS_UNTIED | NNT_FAMILY_HAS_BIASES |
        NNT_FAMILY_HAS_WINDOW | NNT_FAMILY_HAS_GELU_CHOICE,
    starcoder2_preset, PRESET_NAMES,
    starcoder2_check,
    {"model.embed_tokens", "weight", "model.layers.", "model.norm", 0, NNT_NORM_LAYERNORM,
     NNT_MLP_GELU, 1, 0, 0, 0, 0, 0, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), starcoder2_read_hf, NULL,
    starcoder2_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "model.layers.",
    NULL, 0,
    "q_proj,v_proj",   /* PEFT 0.21 has no default for starcoder2: Llama's */
    NULL,
    NULL,
    NULL, 0,
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
