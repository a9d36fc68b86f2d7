/* SPDX-License-Identifier: MIT */
/* The GPT-BigCode family (NNT_FAMILY_GPTBIGCODE): Hugging Face GPTBigCodeForCausalLM (model_type
 * gpt_bigcode): BigCode's StarCoder and StarCoderBase, SantaCoder, tiny_starcoder_py, and the
 * fine-tunes of StarCoder (WizardCoder, OctoCoder).
 *
 * The tree (lib/models/transformer.c) is GPT-2's layout made of the shared layers: a learned
 * position table, LayerNorm blocks (weights and biases) with the attention and the MLP one
 * after the other, every bias, an MLP c_proj(gelu(c_fc(x))) with the tanh GELU or the exact
 * one (mlp_gelu), a final LayerNorm, the head tied to the token table unless
 * tie_word_embeddings is false. The attention is multi-query (multi_query: one key/value head,
 * StarCoder's and SantaCoder's) or multi-head. The files hold q, k and v in one tensor
 * "attn.c_attn" (nn.Linear: (out, in), no Conv1D transpose) whose rows go key/value head by
 * key/value head: with multi_query q's C rows, then k's hd, then v's hd; without it head h's
 * q, k, v rows, then head h + 1's (family.h's nnt_hf_fused with per_head); LoRA adapts it as
 * PEFT does, one module c_attn whose B's rows go the same way. The tree's module names are
 * renamed on the way in and out (ln_1, ln_2, attn, c_attn, c_proj). Dropouts are read and not
 * applied (nnt trains without dropout: a warning says so). Checked against transformers
 * 5.24's modeling_gpt_bigcode.py (tests/test_model_window.c). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

/* Multi-query attention (one key/value head), LayerNorm eps 1e-5, every bias, hidden 4 C, the
 * head tied to the table. A block: two LayerNorms 4 C, c_attn C (C + 2 hd) + C + 2 hd, the
 * output projection C^2 + C, the MLP 8 C^2 + 5 C; with the table V C and the positions P C
 * and the final LayerNorm 2 C:
 * tiny-starcoder (bigcode/tiny_starcoder_py: V 49152, P 8192, C 768, 20 layers, 12 heads)
 * 6,005,120 a block, 164,144,128;
 * santacoder (bigcode/gpt_bigcode-santacoder: V 49280, P 2048, C 2048, 24 layers, 16 heads)
 * 42,490,112 a block, 1,124,886,528;
 * starcoder (bigcode/starcoder, starcoderbase: V 49152, P 8192, C 6144, 40 layers, 48 heads)
 * 379,128,064 a block, 15,517,456,384. These are the model cards' 164M, 1.1B and 15.5B.
 * SantaCoder's file has the tanh GELU ("gelu_pytorch_tanh"); StarCoder's, and (we take it)
 * the tiny one trained as StarCoder was, the exact one ("gelu"). */
static const struct bigcode_preset {
    const char *name;
    int64_t vocab, max_seq, layers, heads, channels;
    int gelu;
} PRESETS[] = {
    {"tiny-starcoder", 49152, 8192, 20, 12, 768, NNT_GELU_ERF},
    {"santacoder", 49280, 2048, 24, 16, 2048, 0},   /* 0: the family's tanh GELU */
    {"starcoder", 49152, 8192, 40, 48, 6144, NNT_GELU_ERF},
};

static const char *const PRESET_NAMES[] = {"tiny-starcoder", "santacoder", "starcoder", NULL};

static int bigcode_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct bigcode_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_GPTBIGCODE;
        c->vocab = p->vocab;
        c->max_seq = p->max_seq;
        c->layers = p->layers;
        c->heads = p->heads;
        c->kv_heads = 1;
        c->channels = p->channels;
        c->hidden = 4 * p->channels;
        c->mlp_gelu = p->gelu;
        return 1;
    }
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

static const nnt_hf_arch ARCHS[] = {{"GPTBigCodeForCausalLM", "gpt_bigcode", NULL}};

/* GPTBigCodeConfig's keys and defaults (transformers 5.24): vocab_size 50257, n_positions 1024,
 * n_embd 768, n_layer 12, n_head 12, n_inner (null: 4 n_embd), activation_function
 * "gelu_pytorch_tanh" ("gelu_new" and "gelu_fast" the same; "gelu" the exact GELU),
 * layer_norm_epsilon 1e-5, multi_query true (one key/value head; false: as many as heads),
 * tie_word_embeddings true, scale_attn_weights true (false: unsupported), no cross-attention,
 * dropouts 0.1 each. */
static int bigcode_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[4] = {"gelu_pytorch_tanh", "gelu_new", "gelu_fast", "gelu"};
    static const int gelus[4] = {0, 0, 0, NNT_GELU_ERF};
    static const char *const drops[3] = {"resid_pdrop", "embd_pdrop", "attn_pdrop"};
    static const nnt_cfg_defaults sizes = {50257, 768, 0, 12, 12, 0, 1024, NULL, 1e-5, acts, 4,
                                           0, gelus};
    int mq = 1, scale = 1, cross = 0;
    (void)arch;
    NNT_TRY(nnt_cfg_gpt2_sizes(o, 0, &sizes, c));
    NNT_TRY(nnt_cfg_bool(o, "multi_query", 1, &mq));
    NNT_TRY(nnt_cfg_bool(o, "scale_attn_weights", 1, &scale));
    NNT_TRY(nnt_cfg_bool(o, "add_cross_attention", 0, &cross));
    if (!scale)
        return nnt_cfg_unsupported(o, "scale_attn_weights", "false", "true");
    if (cross)
        return nnt_cfg_unsupported(o, "add_cross_attention", "true", "false");
    NNT_TRY(nnt_cfg_dropouts(o, drops, 3));
    c->kv_heads = mq ? 1 : c->heads;
    return NNT_OK;
}

/* GPTBigCodeForCausalLM: one key/value head or one per head, heads of C / NH, every bias, no
 * q/k norms. */
static int bigcode_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    int64_t kv = nnt_model_kv_heads(c);
    if (kv != 1 && kv != c->heads)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: a GPT-BigCode model has one key/value head "
                        "(multi_query) or one per head (kv_heads %lld, heads %lld)", fn,
                        (long long)c->kv_heads, (long long)c->heads);
    if (c->head_dim != 0 && c->head_dim * c->heads != c->channels)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: a GPT-BigCode model's heads are channels / "
                        "heads wide (head_dim %lld, channels %lld, heads %lld)", fn,
                        (long long)c->head_dim, (long long)c->channels, (long long)c->heads);
    if (!c->qkv_bias || !c->out_bias || !c->mlp_bias || c->qk_norm)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: a GPT-BigCode model has every bias and no "
                        "q/k norms (qkv_bias=%d, out_bias=%d, mlp_bias=%d, qk_norm=%d)", fn,
                        c->qkv_bias, c->out_bias, c->mlp_bias, c->qk_norm);
    return NNT_OK;
}

/* GPTBigCodeConfig's keys; no token ids (the files' generation_config.json is copied). */
static void bigcode_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    int64_t kv = nnt_model_kv_heads(c);
    (void)arch;
    nnt_cfg_put_gpt2_sizes(t, c);
    nnt_cfg_put_int(t, "n_inner", c->hidden ? c->hidden : 4 * c->channels);
    nnt_cfg_add(t, ",\n  \"activation_function\": \"%s\"",
                nnt_model_mlp_kind(c) == NNT_MLP_GELU_ERF ? "gelu" : "gelu_pytorch_tanh");
    nnt_cfg_put_double(t, "layer_norm_epsilon", c->norm_eps);
    nnt_cfg_put_bool(t, "multi_query", kv == 1 && c->heads > 1);
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_bool(t, "scale_attn_weights", 1);
    nnt_cfg_put_double(t, "resid_pdrop", 0.0);
    nnt_cfg_put_double(t, "embd_pdrop", 0.0);
    nnt_cfg_put_double(t, "attn_pdrop", 0.0);
    nnt_cfg_put_no_token_ids(t, c);
}

/* ---- parameter names in the files ----------------------------------------------------------- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

/* The tree's module names and GPT-BigCode's, each between dots or at the end of a name (the
 * output projection and the fused LoRA module before the attention itself). */
static const char *const RENAMES[5][2] = {{".self_attn.o_proj", ".attn.c_proj"},
                                          {".self_attn.qkv_proj", ".attn.c_attn"},
                                          {".self_attn", ".attn"},
                                          {".input_layernorm", ".ln_1"},
                                          {".post_attention_layernorm", ".ln_2"}};

static void bigcode_hf_rename(const nnt_model_config *c, const char *name, char *out,
                              size_t size)
{
    (void)c;
    nnt_hf_rename_modules(name, RENAMES, 5, out, size);
}

static const nnt_hf_fused FUSED[] = {
    {"attn.c_attn.weight",
     {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}, 1},
    {"attn.c_attn.bias",
     {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"}, 1},
};

const nnt_family nnt_family_gptbigcode = {
    NNT_FAMILY_GPTBIGCODE, "gptbigcode", "GPT-BigCode",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_UNTIED |
        NNT_FAMILY_HAS_GELU_CHOICE,
    bigcode_preset, PRESET_NAMES,
    bigcode_check,
    {"transformer", "wte.weight", "transformer.h.", "transformer.ln_f", 1, NNT_NORM_LAYERNORM,
     NNT_MLP_GELU, 0, 0, 0, 0, 2, 0, 0, 1},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), bigcode_read_hf, NULL,
    bigcode_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "transformer.h.",
    NULL, 0,
    "c_attn",   /* PEFT 0.21's default for gpt_bigcode */
    bigcode_hf_rename,
    NULL,
    FUSED, (int)(sizeof FUSED / sizeof FUSED[0]),
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
