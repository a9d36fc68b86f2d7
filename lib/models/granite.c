/* SPDX-License-Identifier: MIT */
/* The Granite family (NNT_FAMILY_GRANITE): Hugging Face GraniteForCausalLM (model_type
 * granite): IBM Granite 3.0 to 3.3 (2B, 8B).
 *
 * The tree (lib/models/transformer.c) and the files are the Llama family's (RMSNorm blocks,
 * grouped-query attention with rotary positions, a SwiGLU MLP, Llama's parameter names); four
 * numbers of its configuration change the math, each an option of a shared layer: the
 * embedding's output times embedding_multiplier, the scores scaled by attention_multiplier
 * (in place of 1 / sqrt(hd); GraniteConfig's default is 1), each block part's output times
 * residual_multiplier before its residual sum, and the logits divided by logits_scaling.
 * Checked against transformers 5.24's modeling_granite.py (tests/test_model_window.c). */
#include "models.h"
#include "family.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* No presets: nnt_model_preset's shapes are checked against the published config.json files,
 * which could not be read here; load a checkpoint (nnt_model_load_hf) instead. */
static const char *const PRESET_NAMES[] = {NULL};

static int granite_preset(const char *name, nnt_model_config *c)
{
    (void)name;
    (void)c;
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

static const nnt_hf_arch ARCHS[] = {{"GraniteForCausalLM", "granite", NULL}};

static const char *const MULTIPLIERS[4] = {"embedding_multiplier", "residual_multiplier",
                                           "attention_multiplier", "logits_scaling"};

/* The multipliers of c in MULTIPLIERS' order (nnt_model_multipliers'). */
static double *multiplier(nnt_model_config *c, int i)
{
    double *m[4] = {&c->embedding_multiplier, &c->residual_multiplier,
                    &c->attention_multiplier, &c->logits_scaling};
    return m[i];
}

/* GraniteConfig's keys and defaults (transformers 5.24): LlamaConfig's sizes (kv heads the
 * heads, head_dim C / NH unless given), attention_bias on q, k, v and o, mlp_bias, the rope
 * of rope_scaling or rope_parameters, and the four multipliers, each 1 when absent (so the
 * scores' scale is 1, not 1 / sqrt(hd), without attention_multiplier). */
static int granite_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[1] = {"silu"};
    static const char *const drops[1] = {"attention_dropout"};
    static const nnt_cfg_defaults sizes = {32000, 4096, 11008, 32, 32, 0, 2048,
                                           "rms_norm_eps", 1e-6, acts, 1, 1, NULL};
    (void)arch;
    NNT_TRY(nnt_cfg_sizes(o, &sizes, c));
    NNT_TRY(nnt_cfg_dropouts(o, drops, 1));
    NNT_TRY(nnt_cfg_bool(o, "attention_bias", 0, &c->qkv_bias));
    c->out_bias = c->qkv_bias;
    NNT_TRY(nnt_cfg_bool(o, "mlp_bias", 0, &c->mlp_bias));
    for (int i = 0; i < 4; i++) {
        double *m = multiplier(c, i);
        NNT_TRY(nnt_cfg_double(o, MULTIPLIERS[i], 0, 1.0, m));
        if (!(*m > 0.0) || !isfinite(*m))
            return nnt_cfg_bad_type(o, MULTIPLIERS[i], "a finite number > 0");
    }
    return nnt_cfg_rope(o, 10000.0, c->max_seq, &c->rope);
}

/* GraniteForCausalLM: attention_bias on q, k, v and o alike, no q/k norms. */
static int granite_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->qkv_bias != c->out_bias || c->qk_norm)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the Granite family has attention_bias on q, k, "
                        "v and o alike and no q/k norms (qkv_bias=%d, out_bias=%d, qk_norm=%d)",
                        fn, c->qkv_bias, c->out_bias, c->qk_norm);
    return NNT_OK;
}

/* LlamaConfig's keys and the four multipliers (an attention_multiplier of 0, nnt's 1 /
 * sqrt(hd), written as that number: GraniteConfig's default is 1). */
static void granite_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    (void)arch;
    nnt_cfg_put_sizes(t, c);
    nnt_cfg_add(t, ",\n  \"hidden_act\": \"silu\"");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_bool(t, "attention_bias", c->qkv_bias);
    nnt_cfg_put_bool(t, "mlp_bias", c->mlp_bias);
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    double m[4];
    nnt_model_multipliers(c, m);
    for (int i = 0; i < 4; i++)
        nnt_cfg_put_double(t, MULTIPLIERS[i], m[i]);
    nnt_cfg_put_rope(t, &c->rope);
}

/* ---- parameter names in the files: the tree's own (Llama's) ------------------------------- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

const nnt_family nnt_family_granite = {
    NNT_FAMILY_GRANITE, "granite", "Granite",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_HEAD_DIM |
        NNT_FAMILY_HAS_ROPE | NNT_FAMILY_HAS_UNTIED | NNT_FAMILY_HAS_BIASES |
        NNT_FAMILY_HAS_MULTIPLIERS,
    granite_preset, PRESET_NAMES,
    granite_check,
    {"model.embed_tokens", "weight", "model.layers.", "model.norm", 0, NNT_NORM_RMSNORM,
     NNT_MLP_SWIGLU, 1, 0, 0, 0, 0, 0, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), granite_read_hf, NULL,
    granite_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "model.layers.",
    NULL, 0,
    "q_proj,v_proj",   /* PEFT 0.21 has no default for granite: Llama's */
    NULL,
    NULL,
    NULL, 0,
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
