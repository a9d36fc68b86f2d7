/* SPDX-License-Identifier: MIT */
/* The OLMo family (NNT_FAMILY_OLMO): Hugging Face Olmo2ForCausalLM (model_type olmo2) and
 * Olmo3ForCausalLM (olmo3: OLMo 2's layers with sliding windows on three layers of four,
 * a rope of their own on the windowed layers, YaRN on the others in its checkpoints).
 *
 * The tree (lib/models/transformer.c) is the Llama family's with the options OLMo 2 gives the
 * shared layers: its blocks normalise after each part instead of before it (the block option
 * sandwich_norms 2: x + post_attention_layernorm(attn(x)), then h +
 * post_feedforward_layernorm(mlp(h))), and its q and k norms each take a token's whole
 * projection (qk_norm 2, OLMoE's), after the projection's bias and before the rotation.
 * Parameter names are Hugging Face's ("model.layers.<i>.post_feedforward_layernorm.weight",
 * "model.layers.<i>.self_attn.q_norm.weight" of NH hd values, ...); the head is untied
 * unless tie_word_embeddings is true. Checked against transformers 5.24's modeling_olmo2.py
 * and modeling_olmo3.py (tests/test_model_window.c). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

/* allenai/OLMo-2-0425-1B and allenai/OLMo-2-1124-7B: V 100352, 4096 positions, untied, RMSNorm
 * eps 1e-6, rope theta 500000, heads of 128, as many kv heads as heads. Parameters: a block
 * has q, k, v, o (C, C), three (C, hidden) MLP matrices, q and k norms of C and two C norms:
 *   1B: C 2048, 16 layers, hidden 8192: 2 x 205,520,896 + 16 x 67,117,056 + 2,048 =
 *     1,484,916,736;
 *   7B: C 4096, 32 layers, hidden 11008: 2 x 411,041,792 + 32 x 202,391,552 + 4,096 =
 *     7,298,617,344. */
static const struct olmo_preset {
    const char *name;
    int64_t layers, heads, channels, hidden;
} PRESETS[] = {
    {"olmo2-1b", 16, 16, 2048, 8192},
    {"olmo2-7b", 32, 32, 4096, 11008},
};

static const char *const PRESET_NAMES[] = {"olmo2-1b", "olmo2-7b", NULL};

static int olmo_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct olmo_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_OLMO;
        c->vocab = 100352;
        c->max_seq = 4096;
        c->layers = p->layers;
        c->heads = c->kv_heads = p->heads;
        c->channels = p->channels;
        c->hidden = p->hidden;
        c->norm_eps = 1e-6;
        c->tied = 0;
        c->qkv_bias = c->out_bias = c->mlp_bias = 0;
        c->qk_norm = 2;
        c->rope.theta = 500000.0;
        return 1;
    }
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

enum { ARCH_OLMO2, ARCH_OLMO3 };

static const nnt_hf_arch ARCHS[] = {
    {"Olmo2ForCausalLM", "olmo2", NULL},
    {"Olmo3ForCausalLM", "olmo3", NULL},
};

/* Olmo2Config's and Olmo3Config's keys and defaults (transformers 5.24): attention_bias on q,
 * k, v and o, no MLP bias, head_dim hidden_size / num_attention_heads unless given; OLMo 2
 * has no window and one rope (theta 1e4); OLMo 3 the window sliding_window (4096) on the
 * layers layer_types names (every fourth full by default), the rope of rope_parameters'
 * "full_attention" on the full layers and of "sliding_attention" (no scaling) on the
 * windowed ones (else rope_theta, rope_scaling on the full ones; theta 5e5). */
static int olmo_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[1] = {"silu"};
    static const nnt_cfg_defaults sizes = {50304, 4096, 11008, 32, 32, 0, 2048,
                                           "rms_norm_eps", 1e-5, acts, 1, 1, NULL};
    NNT_TRY(nnt_cfg_sizes(o, &sizes, c));
    NNT_TRY(nnt_cfg_bool(o, "attention_bias", 0, &c->qkv_bias));
    c->out_bias = c->qkv_bias;
    c->mlp_bias = 0;
    c->qk_norm = 2;
    if (arch == ARCH_OLMO2)
        return nnt_cfg_rope(o, 10000.0, c->max_seq, &c->rope);
    NNT_TRY(nnt_cfg_windows(o, NULL, 4, c));
    return nnt_cfg_rope_by_layer_type(o, 500000.0, NULL, 500000.0, c);
}

/* Olmo2ForCausalLM, or with windows or a rope of the windowed layers Olmo3ForCausalLM:
 * q/k norms over the whole projections, biases on q, k, v and o or none, none on the MLP. */
static int olmo_hf_arch(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->qk_norm != 2 || c->qkv_bias != c->out_bias || c->mlp_bias)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: Olmo2ForCausalLM and Olmo3ForCausalLM have "
                        "q/k norms over the whole projections (qk_norm 2), biases on q, k, v "
                        "and o or none and none on the MLP (qk_norm=%d, qkv_bias=%d, "
                        "out_bias=%d, mlp_bias=%d)", fn, c->qk_norm, c->qkv_bias, c->out_bias,
                        c->mlp_bias);
    return c->sliding_window > 0 || c->rope_local_theta > 0.0 ? ARCH_OLMO3 : ARCH_OLMO2;
}

static void olmo_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    nnt_cfg_put_sizes(t, c);
    nnt_cfg_add(t, ",\n  \"hidden_act\": \"silu\"");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_bool(t, "attention_bias", c->qkv_bias);
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    /* Olmo2Config's token ids (pad 1, eos 50279) are its tokenizer's */
    if (c->vocab <= 50279)
        nnt_cfg_put_no_token_ids(t, c);
    if (arch == ARCH_OLMO2) {
        nnt_cfg_put_rope(t, &c->rope);
        return;
    }
    nnt_cfg_put_window(t, c);
    nnt_cfg_put_layer_types(t, c);
    nnt_cfg_put_rope_by_layer_type(t, c);
}

/* ---- parameter names in the files: the tree's own; o_proj (C, NH, hd) is HF's (C, NH hd) -- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

const nnt_family nnt_family_olmo = {
    NNT_FAMILY_OLMO, "olmo", "OLMo",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_HEAD_DIM |
        NNT_FAMILY_HAS_QK_NORM | NNT_FAMILY_HAS_ROPE | NNT_FAMILY_HAS_UNTIED |
        NNT_FAMILY_HAS_BIASES | NNT_FAMILY_HAS_QK_NORM_WHOLE | NNT_FAMILY_HAS_WINDOW |
        NNT_FAMILY_HAS_LOCAL_ROPE,
    olmo_preset, PRESET_NAMES,
    NULL,   /* no checks beyond those of every family with rotary positions */
    {"model.embed_tokens", "weight", "model.layers.", "model.norm", 0, NNT_NORM_RMSNORM,
     NNT_MLP_SWIGLU, 1, 0, 2, 0, 0, 0, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), olmo_read_hf, olmo_hf_arch, olmo_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "model.layers.",
    NULL, 0,
    "q_proj,v_proj",   /* the Llama family's (PEFT 0.21 has no default for olmo2) */
    NULL,
    NULL,
    NULL, 0,   /* no fused tensors */
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
