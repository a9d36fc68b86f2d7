/* SPDX-License-Identifier: MIT */
/* The GPT-2 family (NNT_FAMILY_GPT2): Hugging Face GPT2LMHeadModel and llm.c's GPT-2.
 *
 * The tree (lib/models/transformer.c) is LayerNorm blocks with multi-head attention without
 * rotary positions and a GELU MLP, every bias, a learned position table and the head tied
 * to the token table. Its parameters carry llm.c-derived names: "wte.weight",
 * "wpe.weight", "h.<i>.ln_1.weight", "h.<i>.attn.q.weight" (NH, hd, C) (q, k, v apart),
 * "h.<i>.attn.c_proj.weight" (C, NH, hd), "h.<i>.mlp.c_fc.weight", "ln_f.weight"; Hugging
 * Face's file concatenates q, k, v into c_attn and stores every Conv1D weight as (in, out)
 * (GPT2_HF below), llm.c's stacks each parameter over the layers (GPT2_LLMC).
 * nnt_model_create wraps the tree in the GPT layer of the older nnt_gpt_* API
 * (lib/models/gpt2_layer.c). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

static const struct gpt2_preset {
    const char *name;
    int64_t vocab, max_seq, layers, heads, channels;
} PRESETS[] = {
    {"gpt2", 50257, 1024, 12, 12, 768},
    {"gpt2-medium", 50257, 1024, 24, 16, 1024},
    {"gpt2-large", 50257, 1024, 36, 20, 1280},
    {"gpt2-xl", 50257, 1024, 48, 25, 1600},
    {"tiny", 256, 128, 2, 4, 64},   /* nnt-train's demo */
};

static const char *const PRESET_NAMES[] = {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl",
                                           "tiny", NULL};

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

static int gpt2_preset(const char *name, nnt_model_config *cfg)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct gpt2_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) == 0) {
            *cfg = nnt_gpt2_model_config(p->vocab, p->max_seq, p->layers, p->heads,
                                         p->channels);
            return 1;
        }
    }
    return 0;
}

/* ---- checks --------------------------------------------------------------------------------- */

/* GPT-2 is what nnt_gpt_create builds: no other MLP size, head, biases or eps. */
static int gpt2_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    const char *field = NULL;
    if (c->hidden != 0 && c->hidden != 4 * c->channels)
        field = "hidden (GPT-2: 0 or 4 * channels)";
    else if (c->kv_heads != 0 && c->kv_heads != c->heads)
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

/* ---- config.json (GPT2Config) -------------------------------------------------------------- */

static const nnt_hf_arch ARCHS[] = {{"GPT2LMHeadModel", "gpt2", NULL}};

/* GPT2Config's keys; what nnt_gpt_create cannot build is refused by key. */
static int gpt2_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[2] = {"gelu_new", "gelu_pytorch_tanh"};
    static const nnt_cfg_defaults names = {0, 0, 0, 0, 0, 0, 0, NULL, 1e-5, acts, 2, 0, NULL};
    int scale = 1, by_layer = 0;
    (void)arch;
    NNT_TRY(nnt_cfg_gpt2_sizes(o, 1, &names, c));
    NNT_TRY(nnt_cfg_bool(o, "scale_attn_weights", 1, &scale));
    NNT_TRY(nnt_cfg_bool(o, "scale_attn_by_inverse_layer_idx", 0, &by_layer));
    char v[64];
    if (c->hidden != 4 * c->channels) {
        snprintf(v, sizeof v, "%lld", (long long)c->hidden);
        return nnt_cfg_unsupported(o, "n_inner", v, "null or 4 * n_embd");
    }
    if (c->norm_eps != 1e-5) {
        snprintf(v, sizeof v, "%g", c->norm_eps);
        return nnt_cfg_unsupported(o, "layer_norm_epsilon", v, "1e-05");
    }
    if (!c->tied)
        return nnt_cfg_unsupported(o, "tie_word_embeddings", "false", "true");
    if (!scale)
        return nnt_cfg_unsupported(o, "scale_attn_weights", "false", "true");
    if (by_layer)
        return nnt_cfg_unsupported(o, "scale_attn_by_inverse_layer_idx", "true", "false");
    c->kv_heads = c->heads;
    c->hidden = 4 * c->channels;
    return NNT_OK;
}

static void gpt2_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    (void)arch;
    nnt_cfg_put_gpt2_sizes(t, c);
    nnt_cfg_add(t, ",\n  \"n_inner\": null,\n  \"activation_function\": \"gelu_new\"");
    nnt_cfg_put_double(t, "layer_norm_epsilon", c->norm_eps);
    nnt_cfg_put_double(t, "resid_pdrop", 0.0);
    nnt_cfg_put_double(t, "embd_pdrop", 0.0);
    nnt_cfg_put_double(t, "attn_pdrop", 0.0);
    nnt_cfg_put_bool(t, "tie_word_embeddings", 1);
    /* GPT2Config's default bos/eos 50256 (<|endoftext|>) only where the vocabulary has it */
    if (c->vocab > 50256)
        nnt_cfg_add(t, ",\n  \"bos_token_id\": 50256,\n  \"eos_token_id\": 50256");
    else
        nnt_cfg_add(t, ",\n  \"bos_token_id\": null,\n  \"eos_token_id\": null");
}

/* ---- parameter names in the files ------------------------------------------------------------ */

/* The GPT2LMHeadModel tensors in nnt_gpt_save_safetensors's order (kind by kind, block by
 * block); conv1d: the trailing nnt dimensions that make a Conv1D weight's in. */
static const nnt_hf_spec GPT2_HF[] = {
    {"wte.weight", {"wte.weight"}, 0, 0, 0},
    {"wpe.weight", {"wpe.weight"}, 0, 0, 0},
    {"ln_1.weight", {"ln_1.weight"}, 1, 0, 0},
    {"ln_1.bias", {"ln_1.bias"}, 1, 0, 0},
    {"attn.c_attn.weight", {"attn.q.weight", "attn.k.weight", "attn.v.weight"}, 1, 1, 0},
    {"attn.c_attn.bias", {"attn.q.bias", "attn.k.bias", "attn.v.bias"}, 1, 0, 0},
    {"attn.c_proj.weight", {"attn.c_proj.weight"}, 1, 2, 0},   /* nnt (C, NH, hd) */
    {"attn.c_proj.bias", {"attn.c_proj.bias"}, 1, 0, 0},
    {"ln_2.weight", {"ln_2.weight"}, 1, 0, 0},
    {"ln_2.bias", {"ln_2.bias"}, 1, 0, 0},
    {"mlp.c_fc.weight", {"mlp.c_fc.weight"}, 1, 1, 0},
    {"mlp.c_fc.bias", {"mlp.c_fc.bias"}, 1, 0, 0},
    {"mlp.c_proj.weight", {"mlp.c_proj.weight"}, 1, 1, 0},
    {"mlp.c_proj.bias", {"mlp.c_proj.bias"}, 1, 0, 0},
    {"ln_f.weight", {"ln_f.weight"}, 0, 0, 0},
    {"ln_f.bias", {"ln_f.bias"}, 0, 0, 0},
};

/* Every tree parameter in llm.c's file order: the llm.c parameter it is a slice of, and its
 * row offset in that parameter's layer slice (q, k, v: rows 0, C, 2C of qkvw's (3C, C) and
 * elements 0, C, 2C of qkvb's (3C)). */
static const nnt_llmc_name GPT2_LLMC[] = {
    {"wte.weight", NNT_LLMC_WTE, 0},
    {"wpe.weight", NNT_LLMC_WPE, 0},
    {"ln_1.weight", NNT_LLMC_LN1W, 0},
    {"ln_1.bias", NNT_LLMC_LN1B, 0},
    {"attn.q.weight", NNT_LLMC_QKVW, 0},   /* nnt (NH, hd, C) = C rows of C */
    {"attn.k.weight", NNT_LLMC_QKVW, 1},
    {"attn.v.weight", NNT_LLMC_QKVW, 2},
    {"attn.q.bias", NNT_LLMC_QKVB, 0},     /* nnt (NH, hd) */
    {"attn.k.bias", NNT_LLMC_QKVB, 1},
    {"attn.v.bias", NNT_LLMC_QKVB, 2},
    {"attn.c_proj.weight", NNT_LLMC_ATTPROJW, 0},   /* nnt (C, NH, hd) */
    {"attn.c_proj.bias", NNT_LLMC_ATTPROJB, 0},
    {"ln_2.weight", NNT_LLMC_LN2W, 0},
    {"ln_2.bias", NNT_LLMC_LN2B, 0},
    {"mlp.c_fc.weight", NNT_LLMC_FCW, 0},
    {"mlp.c_fc.bias", NNT_LLMC_FCB, 0},
    {"mlp.c_proj.weight", NNT_LLMC_FCPROJW, 0},
    {"mlp.c_proj.bias", NNT_LLMC_FCPROJB, 0},
    {"ln_f.weight", NNT_LLMC_LNFW, 0},
    {"ln_f.bias", NNT_LLMC_LNFB, 0},
};

const nnt_family nnt_family_gpt2 = {
    NNT_FAMILY_GPT2, "gpt2", "GPT-2", NNT_FAMILY_HAS_LLMC,
    gpt2_preset, PRESET_NAMES,
    gpt2_check,
    {"", "wte.weight", "h.", "ln_f", 1, NNT_NORM_LAYERNORM, NNT_MLP_GELU, 0, 0, 0, 0, 0, 0, 0, 0},
    nnt_gpt_layer_new,
    ARCHS, 1, gpt2_read_hf, NULL, gpt2_write_hf,
    GPT2_HF, (int)(sizeof GPT2_HF / sizeof GPT2_HF[0]), NULL, "transformer.", 1, 0, "h.",
    GPT2_LLMC, (int)(sizeof GPT2_LLMC / sizeof GPT2_LLMC[0]),
    "c_attn",   /* PEFT's default target for gpt2 */
    NULL,
    NULL,
    NULL, 0,   /* no fused tensors */
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
