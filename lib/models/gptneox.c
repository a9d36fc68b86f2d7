/* SPDX-License-Identifier: MIT */
/* The GPT-NeoX family (NNT_FAMILY_GPTNEOX): Hugging Face GPTNeoXForCausalLM (model_type
 * gpt_neox): EleutherAI's Pythia suite and GPT-NeoX-20B's layout, RedPajama-INCITE.
 *
 * The tree (lib/models/transformer.c) is made of the shared layers, arranged as GPT-NeoX has
 * them: a block has two LayerNorms (weights and biases), the attention on the first and the MLP
 * on the second, side by side, y = x + (attn(n1(x)) + mlp(n2(x))) (nnt_block_options'
 * parallel 2), or with use_parallel_residual false one after the other (serial_blocks); the
 * attention has biases on q, k, v and its output projection or none (attention_bias) and
 * rotates part of each head vector (rotary_pct, GPTNeoXConfig's default 0.25); the MLP is
 * dense_4h_to_h(gelu(dense_h_to_4h(x))) with the exact GELU (or the tanh form: mlp_gelu) and
 * biases; a final LayerNorm; a
 * head of its own ("embed_out") unless tied. The files hold q, k and v in one tensor
 * "attention.query_key_value" whose rows go head by head (head h's q, k, v, then head h + 1's),
 * read into and written from the tree's q_proj, k_proj, v_proj (family.h's nnt_hf_fused with
 * per_head), and LoRA adapts it as PEFT does, one module query_key_value whose B's rows go head
 * by head too. The other modules are renamed on the way in and out (dense, dense_h_to_4h,
 * dense_4h_to_h, attention, embed_out). Dropouts are read and not applied (nnt trains without
 * dropout: a warning says so). Checked against transformers 5.24's modeling_gpt_neox.py
 * (tests/test_model_window.c). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

/* EleutherAI/pythia-*: 2048 positions, rotary dimension a quarter of each head, base 10000,
 * LayerNorm eps 1e-5, every bias, an untied head, the blocks' parts side by side. A block:
 * two LayerNorms 4 C, query_key_value and dense with their biases 4 C^2 + 4 C, the MLP 2 C
 * hidden + hidden + C; with the embedding and the head (2 V C) and the final LayerNorm:
 * pythia-70m 70,426,624, -160m 162,322,944, -410m 405,334,016, -1b 1,011,781,632, -1.4b
 * 1,414,647,808, -2.8b 2,775,208,960, -6.9b 6,857,302,016, -12b 11,846,072,320: the Pythia
 * paper's counts, equal to transformers' for these shapes. */
static const struct neox_preset {
    const char *name;
    int64_t vocab, layers, heads, channels;
} PRESETS[] = {
    {"pythia-70m", 50304, 6, 8, 512},     {"pythia-160m", 50304, 12, 12, 768},
    {"pythia-410m", 50304, 24, 16, 1024}, {"pythia-1b", 50304, 16, 8, 2048},
    {"pythia-1.4b", 50304, 24, 16, 2048}, {"pythia-2.8b", 50304, 32, 32, 2560},
    {"pythia-6.9b", 50432, 32, 32, 4096}, {"pythia-12b", 50688, 36, 40, 5120},
};

static const char *const PRESET_NAMES[] = {"pythia-70m", "pythia-160m", "pythia-410m",
                                           "pythia-1b", "pythia-1.4b", "pythia-2.8b",
                                           "pythia-6.9b", "pythia-12b", NULL};

static int neox_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct neox_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_GPTNEOX;
        c->vocab = p->vocab;
        c->max_seq = 2048;
        c->layers = p->layers;
        c->heads = p->heads;
        c->channels = p->channels;
        c->hidden = 4 * p->channels;
        c->norm_eps = 1e-5;
        c->tied = 0;
        c->qkv_bias = c->out_bias = c->mlp_bias = 1;
        c->rope.theta = 10000.0;
        c->rope.partial_rotary_factor = 0.25;
        return 1;
    }
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

static const nnt_hf_arch ARCHS[] = {{"GPTNeoXForCausalLM", "gpt_neox", NULL}};

/* GPTNeoXConfig's keys and defaults (transformers 5.24): GPT-NeoX-20B's sizes, kv heads the
 * heads, heads of C / NH; the rope of rope_scaling when given and not empty, else of
 * rope_parameters, its rope_theta and partial_rotary_factor, else the top level's
 * rotary_emb_base (10000) and rotary_pct (0.25) (the top level's rope_theta and
 * partial_rotary_factor are not read, as transformers does not); use_parallel_residual
 * (true), attention_bias (true); hidden_act "gelu" (the exact GELU), or "gelu_fast"
 * (GPT-NeoX-20B's), "gelu_new" and "gelu_pytorch_tanh", the tanh form (mlp_gelu). */
static int neox_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[4] = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh"};
    /* GPT-NeoX-20B's gelu_fast and the other names of the tanh form */
    static const int gelus[4] = {0, NNT_GELU_TANH, NNT_GELU_TANH, NNT_GELU_TANH};
    static const char *const drops[2] = {"hidden_dropout", "attention_dropout"};
    static const nnt_cfg_defaults sizes = {50432, 6144, 24576, 44, 64, 0, 2048,
                                           "layer_norm_eps", 1e-5, acts, 4, 0, gelus};
    int parallel = 1;
    (void)arch;
    NNT_TRY(nnt_cfg_sizes(o, &sizes, c));
    c->kv_heads = c->heads;   /* GPTNeoXAttention has no grouped heads */
    NNT_TRY(nnt_cfg_bool(o, "use_parallel_residual", 1, &parallel));
    c->serial_blocks = !parallel;
    NNT_TRY(nnt_cfg_bool(o, "attention_bias", 1, &c->qkv_bias));
    c->out_bias = c->qkv_bias;
    c->mlp_bias = 1;
    NNT_TRY(nnt_cfg_dropouts(o, drops, 2));
    return nnt_cfg_rope_keys(o, "rotary_emb_base", "rotary_pct", 10000.0, 0.25, c->max_seq,
                             &c->rope);
}

/* GPTNeoXForCausalLM: attention biases on q, k, v and the output projection or on none,
 * the MLP's always, heads of C / NH, no q/k norms. */
static int neox_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (c->qkv_bias != c->out_bias || !c->mlp_bias || c->qk_norm ||
        (c->head_dim && c->head_dim * c->heads != c->channels) ||
        (c->kv_heads && c->kv_heads != c->heads))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the GPT-NeoX family has attention biases on q, "
                        "k, v and the output projection or on none, the MLP's biases, heads of "
                        "C / NH, as many key/value heads and no q/k norms (qkv_bias=%d, "
                        "out_bias=%d, mlp_bias=%d, head_dim=%lld, kv_heads=%lld, qk_norm=%d)", fn,
                        c->qkv_bias, c->out_bias, c->mlp_bias, (long long)c->head_dim,
                        (long long)c->kv_heads, c->qk_norm);
    return NNT_OK;
}

/* GPTNeoXConfig's keys, the rope as both transformers 4 and 5 read it: rotary_pct and
 * rotary_emb_base at the top level, rope_scaling null or its object. */
static void neox_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    double partial = c->rope.partial_rotary_factor;
    (void)arch;
    nnt_cfg_put_int(t, "vocab_size", c->vocab);
    nnt_cfg_put_int(t, "hidden_size", c->channels);
    nnt_cfg_put_int(t, "intermediate_size", c->hidden ? c->hidden : 4 * c->channels);
    nnt_cfg_put_int(t, "num_hidden_layers", c->layers);
    nnt_cfg_put_int(t, "num_attention_heads", c->heads);
    nnt_cfg_put_int(t, "max_position_embeddings", c->max_seq);
    nnt_cfg_put_double(t, "layer_norm_eps", c->norm_eps);
    nnt_cfg_put_gelu(t, c, "gelu_fast");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    nnt_cfg_put_bool(t, "use_parallel_residual", !c->serial_blocks);
    nnt_cfg_put_bool(t, "attention_bias", c->qkv_bias);
    nnt_cfg_put_double(t, "hidden_dropout", 0.0);
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    nnt_cfg_put_double(t, "rotary_pct", partial > 0.0 ? partial : 1.0);
    nnt_cfg_put_double(t, "rotary_emb_base", c->rope.theta);
    nnt_cfg_put_rope_scaling(t, &c->rope);
}

/* ---- parameter names in the files ----------------------------------------------------------- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

/* The tree's module names and GPT-NeoX's, each between dots or at the end of a name (the
 * output projection and the fused LoRA module before the attention itself). */
static const char *const RENAMES[6][2] = {
    {".self_attn.o_proj", ".attention.dense"},
    {".self_attn.qkv_proj", ".attention.query_key_value"},
    {".self_attn", ".attention"},
    {".mlp.c_fc", ".mlp.dense_h_to_4h"},
    {".mlp.c_proj", ".mlp.dense_4h_to_h"},
    {"lm_head", "embed_out"}};

static void neox_hf_rename(const nnt_model_config *c, const char *name, char *out, size_t size)
{
    (void)c;
    nnt_hf_rename_modules(name, RENAMES, 6, out, size);
}

/* The head under transformers 5's own name, "lm_head.weight", where a file has no
 * "embed_out.weight" (transformers renames the one to the other when it loads). */
static int neox_hf_alt(const nnt_model_config *c, const char *name, int i, nnt_hf_alt *alt)
{
    if (i > 0 || strcmp(name, "lm_head.weight") != 0)
        return 0;
    snprintf(alt->name, sizeof alt->name, "lm_head.weight");
    alt->nd = 2;
    alt->shape[0] = c->vocab;
    alt->shape[1] = c->channels;
    alt->offset = 0;
    return 1;
}

/* Buffers the files of transformers 4 (Pythia's among them) hold beside the parameters: the
 * causal mask and its fill value (transformers' _keys_to_ignore_on_load_unexpected) */
static const char *const IGNORED[] = {".attention.bias", ".attention.masked_bias", NULL};

static const nnt_hf_fused FUSED[] = {
    {"attention.query_key_value.weight",
     {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}, 1},
    {"attention.query_key_value.bias",
     {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"}, 1},
};

const nnt_family nnt_family_gptneox = {
    NNT_FAMILY_GPTNEOX, "gptneox", "GPT-NeoX",
    NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_ROPE | NNT_FAMILY_HAS_UNTIED | NNT_FAMILY_HAS_BIASES |
        NNT_FAMILY_HAS_PARTIAL_ROTARY | NNT_FAMILY_HAS_SERIAL_BLOCKS | NNT_FAMILY_HAS_GELU_CHOICE,
    neox_preset, PRESET_NAMES,
    neox_check,
    {"gpt_neox.embed_in", "weight", "gpt_neox.layers.", "gpt_neox.final_layer_norm", 0,
     NNT_NORM_LAYERNORM, NNT_MLP_GELU_ERF, 1, 0, 0, 0, 2, 2, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), neox_read_hf, NULL,
    neox_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "gpt_neox.layers.",
    NULL, 0,
    "query_key_value",   /* PEFT 0.21's default for gpt_neox */
    neox_hf_rename,
    neox_hf_alt,
    FUSED, (int)(sizeof FUSED / sizeof FUSED[0]),
    IGNORED,
    NULL, NULL,   /* no stacked tensors */
};
