/* SPDX-License-Identifier: MIT */
/* The Phi family (NNT_FAMILY_PHI): Hugging Face PhiForCausalLM (model_type phi): Phi-1,
 * Phi-1.5, Phi-2.
 *
 * The tree (lib/models/transformer.c) is made of the same layers as the others, arranged as
 * Phi has them: a block is one LayerNorm (weight and bias) whose output goes to the attention
 * and to the MLP side by side, y = x + (attn(n(x)) + mlp(n(x))) (nnt_block_options'
 * parallel); the attention has biases on q, k, v and its output projection and rotates part
 * of each head vector (partial_rotary_factor, PhiConfig's default 0.5); the MLP is fc2(gelu_
 * tanh(fc1(x))) with biases; a final LayerNorm; a head of its own with a bias. The files name
 * the output projection "dense" and the MLP's products "fc1" and "fc2", where the tree has
 * the names the shared layers give them (o_proj, c_fc, c_proj): they are renamed on the way
 * in and out, and so are LoRA's modules (PEFT's default targets for phi: q_proj, v_proj, fc1,
 * fc2). Dropouts are read and not applied (nnt trains without dropout: a warning says so).
 * Checked against transformers 5.24's modeling_phi.py (tests/test_model_window.c). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

/* microsoft/phi-1_5 (and microsoft/phi-1, of the same shapes): V 51200, C 2048, 24 layers of
 * 32 heads of 64, hidden 8192, rotary dimension 32 of 64, 2048 positions. A block: its
 * LayerNorm 2 C, q, k, v and dense with their biases 4 (C^2 + C), fc1 and fc2 with theirs
 * 2 C hidden + hidden + C = 50,354,176; 24 of them, the embedding (104,857,600), the final
 * LayerNorm and the head with its bias (104,908,800): 1,418,270,720.
 * microsoft/phi-2: C 2560, 32 layers of 32 heads of 80, hidden 10240, rotary dimension 32 of
 * 80 (partial_rotary_factor 0.4). A block 78,671,360; with the embedding (131,072,000), the
 * final LayerNorm and the head (131,123,200): 2,779,683,840. Both match transformers'
 * parameter counts. */
static const struct phi_preset {
    const char *name;
    int64_t layers, channels, hidden;
    double partial;
} PRESETS[] = {
    {"phi-1.5", 24, 2048, 8192, 0.5},
    {"phi-2", 32, 2560, 10240, 0.4},
};

static const char *const PRESET_NAMES[] = {"phi-1.5", "phi-2", NULL};

static int phi_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct phi_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_PHI;
        c->vocab = 51200;
        c->max_seq = 2048;
        c->layers = p->layers;
        c->heads = 32;
        c->channels = p->channels;
        c->hidden = p->hidden;
        c->norm_eps = 1e-5;
        c->tied = 0;
        c->qkv_bias = c->out_bias = c->mlp_bias = 1;
        c->rope.theta = 10000.0;
        c->rope.partial_rotary_factor = p->partial;
        return 1;
    }
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

static const nnt_hf_arch ARCHS[] = {{"PhiForCausalLM", "phi", NULL}};

/* PhiConfig's keys and defaults (transformers 5.24): Phi-1's sizes, kv heads the heads,
 * head_dim C / NH unless given (PhiAttention takes the attribute when a file has it), the
 * rope of rope_scaling or rope_parameters with partial_rotary_factor 0.5 unless given, an
 * untied head (its bias makes a tied one another model), no q/k LayerNorms; hidden_act
 * "gelu_new" (Phi's), "gelu_pytorch_tanh" or "gelu_fast", the tanh GELU, or "gelu", the
 * exact one (mlp_gelu). */
static int phi_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[4] = {"gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu"};
    static const int gelus[4] = {0, 0, 0, NNT_GELU_ERF};
    static const char *const drops[3] = {"resid_pdrop", "embd_pdrop", "attention_dropout"};
    static const nnt_cfg_defaults sizes = {51200, 2048, 8192, 24, 32, 0, 2048,
                                           "layer_norm_eps", 1e-5, acts, 4, 1, gelus};
    int qk_layernorm = 0;
    (void)arch;
    NNT_TRY(nnt_cfg_sizes(o, &sizes, c));
    if (c->tied)
        return nnt_cfg_unsupported(o, "tie_word_embeddings", "true", "false: the Phi family's "
                                   "head has a bias, so nnt keeps it untied");
    NNT_TRY(nnt_cfg_bool(o, "qk_layernorm", 0, &qk_layernorm));
    if (qk_layernorm)
        return nnt_cfg_unsupported(o, "qk_layernorm", "true", "false (no Phi checkpoint has "
                                   "them)");
    NNT_TRY(nnt_cfg_dropouts(o, drops, 3));
    c->qkv_bias = c->out_bias = c->mlp_bias = 1;
    return nnt_cfg_rope_partial(o, 10000.0, c->max_seq, 0.5, &c->rope);
}

/* PhiForCausalLM: every bias, an untied head, no q/k norms. */
static int phi_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    if (!c->qkv_bias || !c->out_bias || !c->mlp_bias || c->qk_norm || c->tied)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the Phi family has every bias, no q/k norms and "
                        "a head of its own with a bias (qkv_bias=%d, out_bias=%d, mlp_bias=%d, "
                        "qk_norm=%d, tied=%d; want 1, 1, 1, 0, 0)", fn, c->qkv_bias, c->out_bias,
                        c->mlp_bias, c->qk_norm, c->tied);
    return NNT_OK;
}

/* PhiConfig's keys: its sizes (head_dim too: PhiAttention takes it), layer_norm_eps,
 * partial_rotary_factor always (its default is not 1), no dropout. */
static void phi_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    (void)arch;
    nnt_cfg_put_sizes_eps(t, c, "layer_norm_eps");
    nnt_cfg_put_gelu(t, c, "gelu_new");
    nnt_cfg_put_bool(t, "tie_word_embeddings", 0);
    nnt_cfg_put_bool(t, "qk_layernorm", 0);
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    nnt_cfg_put_double(t, "resid_pdrop", 0.0);
    nnt_cfg_put_double(t, "embd_pdrop", 0.0);
    nnt_cfg_put_partial(t, &c->rope);
    nnt_cfg_put_rope(t, &c->rope);
}

/* ---- parameter names in the files ----------------------------------------------------------- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

/* The tree's module names and Phi's, each between dots or at the end of a name. */
static const char *const RENAMES[3][2] = {
    {".self_attn.o_proj", ".self_attn.dense"},
    {".mlp.c_fc", ".mlp.fc1"},
    {".mlp.c_proj", ".mlp.fc2"}};

static void phi_hf_rename(const nnt_model_config *c, const char *name, char *out, size_t size)
{
    (void)c;
    nnt_hf_rename_modules(name, RENAMES, 3, out, size);
}

const nnt_family nnt_family_phi = {
    NNT_FAMILY_PHI, "phi", "Phi",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_HEAD_DIM |
        NNT_FAMILY_HAS_ROPE | NNT_FAMILY_HAS_UNTIED | NNT_FAMILY_HAS_PARTIAL_ROTARY |
        NNT_FAMILY_HAS_GELU_CHOICE,
    phi_preset, PRESET_NAMES,
    phi_check,
    {"model.embed_tokens", "weight", "model.layers.", "model.final_layernorm", 0,
     NNT_NORM_LAYERNORM, NNT_MLP_GELU, 1, 0, 0, 0, 0, 1, 1, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), phi_read_hf, NULL,
    phi_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "model.layers.",
    NULL, 0,
    "q_proj,v_proj,fc1,fc2",   /* PEFT 0.21's default for phi */
    phi_hf_rename,
    NULL,
    NULL, 0,
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
