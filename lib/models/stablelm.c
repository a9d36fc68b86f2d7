/* SPDX-License-Identifier: MIT */
/* The StableLM family (NNT_FAMILY_STABLELM): Hugging Face StableLmForCausalLM (model_type
 * stablelm): StableLM 2 1.6B (and Zephyr), StableLM 3B 4E1T (and Zephyr 3B).
 *
 * The tree (lib/models/transformer.c) is made of the shared layers as StableLM has them:
 * LayerNorm blocks (weight and bias) with the attention and the MLP one after the other,
 * grouped-query attention with rotary positions on part of each head vector
 * (partial_rotary_factor, StableLmConfig's default 0.25), biases on q, k and v or none
 * (use_qkv_bias), no bias on o_proj, a SwiGLU MLP without biases, a final LayerNorm; every
 * parameter under its Hugging Face name (the blocks' children input_layernorm, self_attn,
 * post_attention_layernorm, mlp, as the attention takes the Llama layout's names); LoRA's
 * default targets PEFT's for stablelm, q_proj and v_proj.
 * StableLM 2 12B's q/k LayerNorms per head (qk_layernorm) and its attention and MLP side by
 * side (use_parallel_residual) are refused. Checked against transformers 5.24's
 * modeling_stablelm.py (tests/test_model_window.c). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

/* stabilityai/stablelm-2-1_6b: V 100352, C 2048, 24 layers of 32 heads of 64, hidden 5632,
 * q, k, v biases, 4096 positions. A block: two LayerNorms 4 C, q, k, v and o 4 C^2 and the q,
 * k, v biases 3 C, the MLP 3 C hidden = 51,394,560; 24 of them, the embedding and the head
 * (2 x 205,520,896) and the final LayerNorm: 1,644,515,328.
 * stabilityai/stablelm-3b-4e1t (StableLmConfig's defaults): V 50304, C 2560, 32 layers of 32
 * heads of 80, hidden 6912, no biases. A block 79,308,800; with the embedding and the head
 * (2 x 128,778,240) and the final LayerNorm: 2,795,443,200. Both match transformers'
 * parameter counts for these shapes. */
static const struct stablelm_preset {
    const char *name;
    int64_t vocab, layers, channels, hidden;
    int qkv_bias;
} PRESETS[] = {
    {"stablelm-2-1.6b", 100352, 24, 2048, 5632, 1},
    {"stablelm-3b", 50304, 32, 2560, 6912, 0},
};

static const char *const PRESET_NAMES[] = {"stablelm-2-1.6b", "stablelm-3b", NULL};

static int stablelm_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct stablelm_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_STABLELM;
        c->vocab = p->vocab;
        c->max_seq = 4096;
        c->layers = p->layers;
        c->heads = 32;
        c->channels = p->channels;
        c->hidden = p->hidden;
        c->norm_eps = 1e-5;
        c->tied = 0;
        c->qkv_bias = p->qkv_bias;
        c->out_bias = c->mlp_bias = 0;
        c->rope.theta = 10000.0;
        c->rope.partial_rotary_factor = 0.25;
        return 1;
    }
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

static const nnt_hf_arch ARCHS[] = {{"StableLmForCausalLM", "stablelm", NULL}};

/* StableLmConfig's keys and defaults (transformers 5.24): StableLM 3B 4E1T's sizes, the rope
 * of rope_scaling or rope_parameters with partial_rotary_factor 0.25 unless given,
 * use_qkv_bias; qk_layernorm and use_parallel_residual refused; dropouts read and not
 * applied. */
static int stablelm_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[1] = {"silu"};
    static const char *const drops[2] = {"hidden_dropout", "attention_dropout"};
    /* num_key_value_heads 32 when absent, whatever the heads (StableLmConfig's);
     * StableLmAttention's head size is C / NH (no head_dim key) */
    static const nnt_cfg_defaults sizes = {50304, 2560, 6912, 32, 32, 32, 4096,
                                           "layer_norm_eps", 1e-5, acts, 1, 0, NULL};
    int flag = 0;
    (void)arch;
    NNT_TRY(nnt_cfg_sizes(o, &sizes, c));
    NNT_TRY(nnt_cfg_bool(o, "qk_layernorm", 0, &flag));
    if (flag)
        return nnt_cfg_unsupported(o, "qk_layernorm", "true", "false (StableLM 2 12B's "
                                   "LayerNorms of q and k per head are not supported)");
    NNT_TRY(nnt_cfg_bool(o, "use_parallel_residual", 0, &flag));
    if (flag)
        return nnt_cfg_unsupported(o, "use_parallel_residual", "true", "false (StableLM 2 "
                                   "12B's attention and MLP side by side are not supported)");
    NNT_TRY(nnt_cfg_dropouts(o, drops, 2));
    NNT_TRY(nnt_cfg_bool(o, "use_qkv_bias", 0, &c->qkv_bias));
    c->out_bias = c->mlp_bias = 0;
    return nnt_cfg_rope_partial(o, 10000.0, c->max_seq, 0.25, &c->rope);
}

/* StableLmForCausalLM: biases on q, k, v or none and nowhere else, heads of C / NH, no q/k
 * norms. */
static int stablelm_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->out_bias || c->mlp_bias || c->qk_norm ||
        (c->head_dim && c->head_dim * c->heads != c->channels))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the StableLM family has biases on q, k and v "
                        "only, heads of C / NH and no q/k norms (out_bias=%d, mlp_bias=%d, "
                        "head_dim=%lld, qk_norm=%d)", fn, c->out_bias, c->mlp_bias,
                        (long long)c->head_dim, c->qk_norm);
    return NNT_OK;
}

/* StableLmConfig's keys: its sizes, layer_norm_eps, use_qkv_bias, partial_rotary_factor always
 * (its default is not 1), blocks one after the other, no dropout. */
static void stablelm_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    (void)arch;
    nnt_cfg_put_sizes_eps(t, c, "layer_norm_eps");
    nnt_cfg_add(t, ",\n  \"hidden_act\": \"silu\"");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_bool(t, "use_qkv_bias", c->qkv_bias);
    nnt_cfg_put_bool(t, "qk_layernorm", 0);
    nnt_cfg_put_bool(t, "use_parallel_residual", 0);
    nnt_cfg_put_double(t, "hidden_dropout", 0.0);
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    nnt_cfg_put_partial(t, &c->rope);
    nnt_cfg_put_rope(t, &c->rope);
}

/* ---- parameter names in the files: the tree's own; o_proj (C, NH, hd) is HF's (C, NH hd) -- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

const nnt_family nnt_family_stablelm = {
    NNT_FAMILY_STABLELM, "stablelm", "StableLM",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_ROPE |
        NNT_FAMILY_HAS_UNTIED | NNT_FAMILY_HAS_BIASES | NNT_FAMILY_HAS_PARTIAL_ROTARY,
    stablelm_preset, PRESET_NAMES,
    stablelm_check,
    {"model.embed_tokens", "weight", "model.layers.", "model.norm", 0, NNT_NORM_LAYERNORM,
     NNT_MLP_SWIGLU, 1, 0, 0, 0, 0, 0, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), stablelm_read_hf, NULL,
    stablelm_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "model.layers.",
    NULL, 0,
    "q_proj,v_proj",   /* PEFT 0.21's default for stablelm */
    NULL,
    NULL,
    NULL, 0,
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
