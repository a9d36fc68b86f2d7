/* SPDX-License-Identifier: MIT */
/* The Phi-3 family (NNT_FAMILY_PHI3): Hugging Face Phi3ForCausalLM (model_type phi3):
 * Phi-3-mini, Phi-3.5-mini, Phi-4-mini.
 *
 * The tree (lib/models/transformer.c) is the Llama family's: RMSNorm blocks, grouped-query
 * attention with rotary positions, a SwiGLU MLP, no biases. What differs is in the files and
 * the rope: Phi-3's files hold q, k and v in one tensor "self_attn.qkv_proj.weight" (NH hd +
 * 2 NKV hd, C: q's rows, then k's, then v's) and the MLP's gate and up in one
 * "mlp.gate_up_proj.weight" (2 hidden, C: gate's rows, then up's), read into and written
 * from the tree's q_proj, k_proj, v_proj, gate_proj and up_proj (family.h's nnt_hf_fused);
 * LoRA adapts those fused modules as PEFT names them (qkv_proj, gate_up_proj). Its rope may
 * rotate only part of each head vector (partial_rotary_factor: Phi-4-mini's 0.75) and take
 * LongRoPE's per-frequency factors with their attention factor (Phi-3.5-mini, Phi-4-mini);
 * a sliding window (sliding_window) is on every layer. Checked against transformers 5.24's
 * modeling_phi3.py (tests/test_model_window.c). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

/* Phi-4-mini's LongRoPE: its long factors (config.json of microsoft/Phi-4-mini-instruct), its
 * short factors all 1. */
static const float PHI4_MINI_LONG[48] = {
    1.0f,         1.118320672f, 1.250641126f, 1.398617824f, 1.564103225f, 1.74916897f,
    1.956131817f, 2.187582649f, 2.446418898f, 2.735880826f, 3.059592084f, 3.421605075f,
    3.826451687f, 4.279200023f, 4.785517845f, 5.351743533f, 5.984965424f, 6.693110555f,
    7.485043894f, 8.370679318f, 9.36110372f,  10.4687158f,  11.70738129f, 13.09260651f,
    14.64173252f, 16.37415215f, 18.31155283f, 20.47818807f, 22.90118105f, 25.61086418f,
    28.64115884f, 32.03f,       32.1f,        32.13f,       32.23f,       32.6f,
    32.61f,       32.64f,       32.66f,       32.7f,        32.71f,       32.93f,
    32.97f,       33.28f,       33.49f,       33.5f,        44.16f,       47.77f};

/* microsoft/Phi-3-mini-4k-instruct: V 32064, C 3072, 32 layers of 32 heads of 96, hidden 8192,
 * untied, 4096 positions, a window of 2047, no rope scaling. A block: qkv (3 C, C), o (C, C),
 * gate_up (2 hidden, C), down (C, hidden), two norms = 113,252,352; 32 of them, the
 * embedding and the head (2 x 98,500,608) and the final norm: 3,821,079,552.
 * microsoft/Phi-4-mini-instruct: V 200064, 24 heads of 128 on 8 kv heads, rotary dimension
 * 96 of 128, LongRoPE (original 4096 of 131072 positions), tied, a window of 262144 (none in
 * effect). A block 100,669,440; with the embedding 614,596,608 and the final norm:
 * 3,836,021,760. Both match transformers' parameter counts. */
static const struct phi3_preset {
    const char *name;
    int64_t vocab, max_seq, heads, kv_heads, window;
    int tied, longrope;
} PRESETS[] = {
    {"phi3-mini", 32064, 4096, 32, 32, 2047, 0, 0},
    {"phi4-mini", 200064, 131072, 24, 8, 262144, 1, 1},
};

static const char *const PRESET_NAMES[] = {"phi3-mini", "phi4-mini", NULL};

static int phi3_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct phi3_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_PHI3;
        c->vocab = p->vocab;
        c->max_seq = p->max_seq;
        c->layers = 32;
        c->heads = p->heads;
        c->kv_heads = p->kv_heads;
        c->channels = 3072;
        c->hidden = 8192;
        c->norm_eps = 1e-5;
        c->tied = p->tied;
        c->qkv_bias = c->out_bias = c->mlp_bias = 0;
        c->sliding_window = p->window;
        c->rope.theta = 10000.0;
        if (p->longrope) {
            c->rope.partial_rotary_factor = 0.75;
            c->rope.scaling = NNT_ROPE_SCALING_LONGROPE;
            c->rope.original_max_position = 4096;
            c->rope.factor = 32.0;   /* 131072 / 4096 */
            c->rope.nfactors = 48;
            for (int k = 0; k < 48; k++)
                c->rope.short_factor[k] = 1.0f;
            memcpy(c->rope.long_factor, PHI4_MINI_LONG, sizeof PHI4_MINI_LONG);
        }
        return 1;
    }
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

static const nnt_hf_arch ARCHS[] = {{"Phi3ForCausalLM", "phi3", NULL}};

/* Phi3Config's keys and defaults (transformers 5.24): Phi-3-mini's sizes, kv heads the heads,
 * no biases, head_dim C / NH unless given, sliding_window (absent or null: none) on every
 * layer, the rope of rope_scaling or rope_parameters with partial_rotary_factor, its types
 * default and longrope ("su" and "yarn" read as longrope), original_max_position_embeddings
 * (4096) replacing the rope object's. Dropouts are read and not applied (nnt trains without
 * dropout: a warning says so). */
static int phi3_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[1] = {"silu"};
    static const char *const drops[3] = {"resid_pdrop", "embd_pdrop", "attention_dropout"};
    static const nnt_cfg_defaults sizes = {32064, 3072, 8192, 32, 32, 0, 4096,
                                           "rms_norm_eps", 1e-5, acts, 1, 1, NULL};
    int64_t original = 4096;
    (void)arch;
    NNT_TRY(nnt_cfg_sizes(o, &sizes, c));
    NNT_TRY(nnt_cfg_int(o, "original_max_position_embeddings", 0, 4096, &original));
    NNT_TRY(nnt_cfg_dropouts(o, drops, 3));
    c->qkv_bias = c->out_bias = c->mlp_bias = 0;
    c->window_from = c->window_global_every = 0;
    NNT_TRY(nnt_cfg_int(o, "sliding_window", 0, 0, &c->sliding_window));
    if (nnt_cfg_has(o, "sliding_window") && c->sliding_window < 1)
        return nnt_cfg_bad_type(o, "sliding_window", "a positive integer or null");
    if (original < 1)
        return nnt_cfg_bad_type(o, "original_max_position_embeddings", "a positive integer");
    NNT_TRY(nnt_cfg_rope_ex(o, 10000.0, c->max_seq, original, 1, &c->rope));
    if (c->rope.scaling != NNT_ROPE_SCALING_NONE && c->rope.scaling != NNT_ROPE_SCALING_LONGROPE)
        return nnt_cfg_unsupported(o, "rope_scaling.rope_type", "(not default or longrope)",
                                   "default, longrope (Phi3Config's)");
    return NNT_OK;
}

/* Phi3ForCausalLM: no biases, no q/k norms, a window on every layer or none. */
static int phi3_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->qkv_bias || c->out_bias || c->mlp_bias || c->qk_norm)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the Phi-3 family has no biases and no q/k norms "
                        "(qkv_bias=%d, out_bias=%d, mlp_bias=%d, qk_norm=%d)", fn, c->qkv_bias,
                        c->out_bias, c->mlp_bias, c->qk_norm);
    if (c->sliding_window &&
        (c->window_from || c->window_global_every || nnt_model_window_listed(c)))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the Phi-3 family's window is on every layer "
                        "(window_from %lld, window_global_every %lld, or a window_full_layers "
                        "list)", fn, (long long)c->window_from,
                        (long long)c->window_global_every);
    if (c->rope.scaling != NNT_ROPE_SCALING_NONE && c->rope.scaling != NNT_ROPE_SCALING_LONGROPE)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: Phi3ForCausalLM's rope is default or longrope "
                        "(scaling %d)", fn, c->rope.scaling);
    return NNT_OK;
}

/* The rope as Phi3Config has it: rope_theta, partial_rotary_factor and rope_scaling at the
 * top level, original_max_position_embeddings beside them (the class's attribute, which
 * replaces the rope object's). */
static void phi3_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    (void)arch;
    nnt_cfg_put_sizes(t, c);
    nnt_cfg_add(t, ",\n  \"hidden_act\": \"silu\"");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_window(t, c);
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    nnt_cfg_put_double(t, "resid_pdrop", 0.0);
    nnt_cfg_put_double(t, "embd_pdrop", 0.0);
    nnt_cfg_put_int(t, "original_max_position_embeddings",
                    c->rope.scaling == NNT_ROPE_SCALING_LONGROPE ? c->rope.original_max_position
                                                                 : c->max_seq);
    /* Phi3Config's token ids (pad 32000: its embedding's padding_idx, bos 1, eos 32000) are
     * its tokenizer's; a smaller vocabulary has none of them */
    if (c->vocab <= 32000)
        nnt_cfg_put_no_token_ids(t, c);
    nnt_cfg_put_rope(t, &c->rope);
}

/* ---- parameter names in the files: the tree's own, q/k/v and gate/up fused ---------------- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

static const nnt_hf_fused FUSED[] = {
    {"self_attn.qkv_proj.weight",
     {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}, 0},
    {"mlp.gate_up_proj.weight", {"mlp.gate_proj.weight", "mlp.up_proj.weight", NULL}, 0},
};

const nnt_family nnt_family_phi3 = {
    NNT_FAMILY_PHI3, "phi3", "Phi-3",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_HEAD_DIM |
        NNT_FAMILY_HAS_ROPE | NNT_FAMILY_HAS_UNTIED | NNT_FAMILY_HAS_WINDOW |
        NNT_FAMILY_HAS_PARTIAL_ROTARY,
    phi3_preset, PRESET_NAMES,
    phi3_check,
    {"model.embed_tokens", "weight", "model.layers.", "model.norm", 0, NNT_NORM_RMSNORM,
     NNT_MLP_SWIGLU, 1, 0, 0, 0, 1, 0, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), phi3_read_hf, NULL,
    phi3_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "model.layers.",
    NULL, 0,
    "qkv_proj",   /* PEFT 0.21 has no default for phi3: its fused q, k, v */
    NULL,
    NULL,
    FUSED, (int)(sizeof FUSED / sizeof FUSED[0]),
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
