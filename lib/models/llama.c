/* SPDX-License-Identifier: MIT */
/* The Llama family (NNT_FAMILY_LLAMA): Hugging Face LlamaForCausalLM, MistralForCausalLM
 * (its sliding window on every layer), Qwen2ForCausalLM, Qwen3ForCausalLM and
 * SmolLM3ForCausalLM (blocks without rotary positions), and the models of their shapes
 * (SmolLM2, TinyLlama).
 *
 * The tree (lib/models/transformer.c) is RMSNorm blocks with grouped-query attention with
 * rotary positions and a SwiGLU MLP; biases, q/k norms, head size and tying come from the
 * configuration. Its parameters carry Hugging Face's names ("model.embed_tokens.weight",
 * "model.layers.<i>.self_attn.q_proj.weight", "model.norm.weight", "lm_head.weight"), so the
 * files hold every parameter under its own name; only the shapes differ: nnt keeps the heads
 * apart, HF has 2-D matrices in the same memory order (q_proj (NH, hd, C) is HF's (NH hd, C),
 * o_proj (C, NH, hd) HF's (C, NH hd)). */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- presets ------------------------------------------------------------------------------- */

static const struct llama_preset {
    const char *name;
    int64_t vocab, max_seq, layers, heads, kv_heads, channels, hidden;
    double eps;
    int tied;
    double theta;
    double llama3;            /* Llama 3.1's rope scaling of this factor (0: none), low 1,
                                 high 4, original 8192 */
    int64_t head_dim;         /* 0: channels / heads */
    int qk_norm;
    int nope_every;           /* every N-th block (from 1) without rotary positions; 0: none */
} PRESETS[] = {
    {"llama-tiny", 256, 256, 2, 4, 2, 64, 172, 1e-5, 1, 10000.0, 0, 0, 0, 0},
    /* HuggingFaceTB/SmolLM2-135M */
    {"smollm2-135m", 49152, 8192, 30, 9, 3, 576, 1536, 1e-5, 1, 100000.0, 0, 0, 0, 0},
    /* TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T */
    {"tinyllama-1.1b", 32000, 2048, 22, 32, 4, 2048, 5632, 1e-5, 0, 10000.0, 0, 0, 0, 0},
    /* meta-llama/Llama-3.2-1B */
    {"llama-3.2-1b", 128256, 131072, 16, 32, 8, 2048, 8192, 1e-5, 1, 500000.0, 32.0, 0, 0, 0},
    /* meta-llama/Llama-3.1-8B: untied, rope factor 8 */
    {"llama-3.1-8b", 128256, 131072, 32, 32, 8, 4096, 14336, 1e-5, 0, 500000.0, 8.0, 0, 0, 0},
    /* Qwen/Qwen3-0.6B: 16 heads of 128 (2048 > C), q/k norms */
    {"qwen3-0.6b", 151936, 40960, 28, 16, 8, 1024, 3072, 1e-6, 1, 1000000.0, 0, 128, 1, 0},
    /* HuggingFaceTB/SmolLM3-3B: every 4th block without rotary positions */
    {"smollm3-3b", 128256, 65536, 36, 16, 4, 2048, 11008, 1e-6, 1, 5000000.0, 0, 0, 0, 4},
};

static const char *const PRESET_NAMES[] = {"llama-tiny", "smollm2-135m", "tinyllama-1.1b",
                                           "llama-3.2-1b", "llama-3.1-8b", "qwen3-0.6b",
                                           "smollm3-3b", NULL};

static int llama_preset(const char *name, nnt_model_config *c)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        const struct llama_preset *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0)
            continue;
        nnt_model_config init = NNT_MODEL_CONFIG_INIT;
        *c = init;
        c->family = NNT_FAMILY_LLAMA;
        c->vocab = p->vocab;
        c->max_seq = p->max_seq;
        c->layers = p->layers;
        c->heads = p->heads;
        c->kv_heads = p->kv_heads;
        c->channels = p->channels;
        c->hidden = p->hidden;
        c->norm_eps = p->eps;
        c->tied = p->tied;
        c->qkv_bias = c->out_bias = c->mlp_bias = 0;
        c->head_dim = p->head_dim;
        c->qk_norm = p->qk_norm;
        for (int64_t b = 0; p->nope_every && b < p->layers; b++)
            if ((b + 1) % p->nope_every == 0)
                c->nope_layers[b / 64] |= (uint64_t)1 << (b % 64);
        c->rope.theta = p->theta;
        if (p->llama3 > 0) {
            c->rope.scaling = NNT_ROPE_SCALING_LLAMA3;
            c->rope.factor = p->llama3;
            c->rope.low_freq_factor = 1.0;
            c->rope.high_freq_factor = 4.0;
            c->rope.original_max_position = 8192;
        }
        return 1;
    }
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------------- */

enum { ARCH_LLAMA, ARCH_MISTRAL, ARCH_QWEN2, ARCH_QWEN3, ARCH_SMOLLM3 };

static const nnt_hf_arch ARCHS[] = {
    {"LlamaForCausalLM", "llama", NULL},
    {"MistralForCausalLM", "mistral", NULL},
    {"Qwen2ForCausalLM", "qwen2", NULL},
    {"Qwen3ForCausalLM", "qwen3", NULL},
    {"SmolLM3ForCausalLM", "smollm3", NULL},
};

/* What only some architectures have: biases, q/k norms, sliding windows. Llama:
 * attention_bias on q, k, v and o, mlp_bias; Qwen2: q, k, v biases; Qwen3: attention_bias,
 * q/k norms. Sliding windows as transformers 5.24 reads them: Mistral sliding_window on
 * every layer (absent: MistralConfig's 4096; null: none); Qwen2 and Qwen3 sliding_window
 * (absent: 4096) on the layers i >= max_window_layers (absent: 28) when use_sliding_window,
 * or on those a layer_types list names. */
static int variant(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    int on = 0;
    if (arch == ARCH_LLAMA || arch == ARCH_QWEN3) {
        NNT_TRY(nnt_cfg_bool(o, "attention_bias", 0, &c->qkv_bias));
        c->out_bias = c->qkv_bias;
    }
    if (arch == ARCH_LLAMA)
        NNT_TRY(nnt_cfg_bool(o, "mlp_bias", 0, &c->mlp_bias));
    if (arch == ARCH_QWEN2)
        c->qkv_bias = 1;
    c->qk_norm = arch == ARCH_QWEN3;
    c->sliding_window = c->window_from = c->window_global_every = 0;
    memset(c->window_full_layers, 0, sizeof c->window_full_layers);
    if (arch == ARCH_QWEN2 || arch == ARCH_QWEN3) {   /* sliding_window only applies with it */
        NNT_TRY(nnt_cfg_bool(o, "use_sliding_window", 0, &on));
        if (!on)
            return NNT_OK;
        char v[8];
        nnt_cfg_text(o, "sliding_window", v, sizeof v);   /* null: none; absent: 4096 */
        NNT_TRY(nnt_cfg_int(o, "sliding_window", 0, strcmp(v, "null") ? 4096 : 0,
                            &c->sliding_window));
        NNT_TRY(nnt_cfg_int(o, "max_window_layers", 0, 28, &c->window_from));
        if (c->window_from < 0)
            return nnt_cfg_bad_type(o, "max_window_layers", "an integer >= 0");
        if (nnt_cfg_has(o, "sliding_window") && c->sliding_window < 1)
            return nnt_cfg_bad_type(o, "sliding_window", "a positive integer or null");
        return c->sliding_window ? nnt_cfg_layer_types(o, 0, c) : NNT_OK;
    }
    if (arch == ARCH_MISTRAL) {
        char v[33];
        nnt_cfg_text(o, "sliding_window", v, sizeof v);
        /* absent: MistralConfig's default; null: none */
        int absent = v[0] == '\0' && !nnt_cfg_has(o, "sliding_window");
        int64_t w = 0;
        NNT_TRY(nnt_cfg_int(o, "sliding_window", 0, 0, &w));
        if (nnt_cfg_has(o, "sliding_window") && w < 1)
            return nnt_cfg_bad_type(o, "sliding_window", "a positive integer or null");
        c->sliding_window = absent ? 4096 : w;
    }
    return NNT_OK;
}

/* SmolLM3's layers without rope: no_rope_layers (1: rotary positions, 0: none; at least
 * one entry a layer), else every no_rope_layer_interval-th layer (default 4) from 1. */
static int smollm3_nope(const nnt_cfg_in *o, nnt_model_config *c)
{
    int32_t rope[NNT_MODEL_MAX_NOPE_LAYER];
    int64_t every = 4, n = 0, L = c->layers;   /* L <= 512 (smollm3) */
    memset(c->nope_layers, 0, sizeof c->nope_layers);
    if (!nnt_cfg_has(o, "no_rope_layers")) {
        NNT_TRY(nnt_cfg_int(o, "no_rope_layer_interval", 0, 4, &every));
        if (every < 1)
            return nnt_cfg_bad_type(o, "no_rope_layer_interval", "a positive integer");
        for (int64_t i = every - 1; i < L; i += every)
            c->nope_layers[i / 64] |= (uint64_t)1 << (i % 64);
        return NNT_OK;
    }
    NNT_TRY(nnt_cfg_int_list(o, "no_rope_layers", "a list of 0 or 1 a layer", rope, L, &n));
    if (n < L)
        return nnt_cfg_bad_type(o, "no_rope_layers", "a list of at least num_hidden_layers "
                                "entries");
    for (int64_t i = 0; i < L; i++) {
        if (rope[i] > 1)
            return nnt_cfg_bad_type(o, "no_rope_layers", "a list of 0 or 1 a layer");
        if (rope[i] == 0)
            c->nope_layers[i / 64] |= (uint64_t)1 << (i % 64);
    }
    return NNT_OK;
}

/* SmolLM3's windows: sliding_window on the layers layer_types names "sliding_attention" (the
 * mask of transformers' eager and sdpa attention), or without layer_types, with
 * use_sliding_window, on the layers without rope. */
static int smollm3_windows(const nnt_cfg_in *o, nnt_model_config *c)
{
    int use_window = 0;
    int64_t w = 0;
    NNT_TRY(nnt_cfg_int(o, "sliding_window", 0, 0, &w));
    if (nnt_cfg_has(o, "sliding_window") && w < 1)
        return nnt_cfg_bad_type(o, "sliding_window", "a positive integer or null");
    NNT_TRY(nnt_cfg_bool(o, "use_sliding_window", 0, &use_window));
    c->window_from = c->window_global_every = 0;
    memset(c->window_full_layers, 0, sizeof c->window_full_layers);
    if (nnt_cfg_has(o, "layer_types")) {
        c->sliding_window = 1;   /* to learn which layers the list makes sliding */
        NNT_TRY(nnt_cfg_layer_types(o, 0, c));
        if (c->sliding_window && !w)
            return nnt_cfg_unsupported(o, "layer_types", "(sliding layers)",
                                       "full_attention layers without a sliding_window");
        c->sliding_window = c->sliding_window ? w : 0;
        return NNT_OK;
    }
    c->sliding_window = use_window && nnt_model_nope_any(c) ? w : 0;
    for (int64_t i = 0; c->sliding_window && i < c->layers; i++)
        if (!NNT_MODEL_NOPE_LAYER(c, i))
            c->window_full_layers[i / 64] |= (uint64_t)1 << (i % 64);
    return NNT_OK;
}

/* SmolLM3 as transformers 5.24 reads it: attention_bias, mlp_bias, its layers without rope
 * and its windows (at most 512 layers: the configuration's lists). */
static int smollm3(const nnt_cfg_in *o, nnt_model_config *c)
{
    if (c->layers > NNT_MODEL_MAX_NOPE_LAYER)
        return nnt_cfg_unsupported(o, "num_hidden_layers", "(over 512)",
                                   "at most 512 layers for SmolLM3ForCausalLM");
    NNT_TRY(nnt_cfg_bool(o, "attention_bias", 0, &c->qkv_bias));
    c->out_bias = c->qkv_bias;
    NNT_TRY(nnt_cfg_bool(o, "mlp_bias", 0, &c->mlp_bias));
    NNT_TRY(smollm3_nope(o, c));
    return smollm3_windows(o, c);
}

static int llama_read_hf(const nnt_cfg_in *o, int arch, nnt_model_config *c)
{
    static const char *const acts[1] = {"silu"};
    int64_t head_dim = 0;
    int act = 0;
    NNT_TRY(nnt_cfg_int(o, "vocab_size", 1, 0, &c->vocab));
    NNT_TRY(nnt_cfg_int(o, "hidden_size", 1, 0, &c->channels));
    NNT_TRY(nnt_cfg_int(o, "intermediate_size", 1, 0, &c->hidden));
    NNT_TRY(nnt_cfg_int(o, "num_hidden_layers", 1, 0, &c->layers));
    NNT_TRY(nnt_cfg_int(o, "num_attention_heads", 1, 0, &c->heads));
    /* absent or null: the configuration class's default (transformers 5.24): Llama's the
     * heads, MistralConfig's 8, Qwen2Config's and Qwen3Config's 32, SmolLM3Config's 4 */
    static const int64_t kv_default[] = {0, 8, 32, 32, 4};
    int64_t kv = kv_default[arch];
    NNT_TRY(nnt_cfg_int(o, "num_key_value_heads", 0, kv ? kv : c->heads, &c->kv_heads));
    NNT_TRY(nnt_cfg_int(o, "max_position_embeddings", 1, 0, &c->max_seq));
    NNT_TRY(nnt_cfg_double(o, "rms_norm_eps", 0, 1e-6, &c->norm_eps));
    NNT_TRY(nnt_cfg_bool(o, "tie_word_embeddings", arch == ARCH_SMOLLM3, &c->tied));
    NNT_TRY(nnt_cfg_choice(o, "hidden_act", "silu", acts, 1, &act));
    /* absent or null: hidden_size / num_attention_heads, but Qwen3Config's 128 */
    NNT_TRY(nnt_cfg_int(o, "head_dim", 0, arch == ARCH_QWEN3 ? 128 : 0, &head_dim));
    if (nnt_cfg_has(o, "head_dim") && head_dim < 1)
        return nnt_cfg_bad_type(o, "head_dim", "a positive integer");
    c->head_dim = head_dim;
    c->qkv_bias = c->out_bias = c->mlp_bias = 0;
    if (arch == ARCH_SMOLLM3) {   /* its default_theta 2e6 */
        NNT_TRY(smollm3(o, c));
        return nnt_cfg_rope(o, 2000000.0, c->max_seq, &c->rope);
    }
    NNT_TRY(variant(o, arch, c));
    return nnt_cfg_rope(o, 10000.0, c->max_seq, &c->rope);
}

/* Llama (q, k, v, o biases all or none), Qwen2 (q, k, v biases, no o or MLP bias) or Qwen3
 * (q/k norms; q, k, v, o biases all or none, no MLP bias). */
static int llama_hf_arch(nnt_ctx *ctx, const char *fn, const nnt_model_config *c)
{
    int plain = !c->qk_norm && c->qkv_bias == c->out_bias;
    if (nnt_model_nope_any(c)) {   /* SmolLM3: any windows (a layer_types list) */
        if (plain && c->layers <= NNT_MODEL_MAX_WINDOW_LAYER)
            return ARCH_SMOLLM3;
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: blocks without rotary positions are "
                        "SmolLM3ForCausalLM's, which has no q/k norms, q, k, v and o biases "
                        "all or none and at most 512 layers (qk_norm=%d, qkv_bias=%d, "
                        "out_bias=%d, layers=%lld)", fn, c->qk_norm, c->qkv_bias, c->out_bias,
                        (long long)c->layers);
    }
    if (c->sliding_window) {   /* Mistral: every layer; Qwen2, Qwen3: from max_window_layers */
        if (c->window_global_every == 0 && c->window_from == 0 && !nnt_model_window_listed(c) &&
            plain && !c->qkv_bias && !c->mlp_bias)
            return ARCH_MISTRAL;
        if (c->window_global_every == 0 && !c->qk_norm && c->qkv_bias && !c->out_bias &&
            !c->mlp_bias)
            return ARCH_QWEN2;
        if (c->window_global_every == 0 && c->qk_norm && c->qkv_bias == c->out_bias &&
            !c->mlp_bias)
            return ARCH_QWEN3;
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: no Hugging Face architecture of the Llama "
                        "family has sliding_window=%lld with window_from=%lld, "
                        "window_global_every=%lld, qkv_bias=%d, out_bias=%d, mlp_bias=%d, "
                        "qk_norm=%d (MistralForCausalLM: every layer, no biases; "
                        "Qwen2ForCausalLM, Qwen3ForCausalLM: from a layer on, or a "
                        "window_full_layers list)", fn,
                        (long long)c->sliding_window, (long long)c->window_from,
                        (long long)c->window_global_every, c->qkv_bias, c->out_bias,
                        c->mlp_bias, c->qk_norm);
    }
    if (plain)
        return ARCH_LLAMA;
    if (!c->qk_norm && c->qkv_bias && !c->mlp_bias)
        return ARCH_QWEN2;
    if (c->qk_norm && c->qkv_bias == c->out_bias && !c->mlp_bias)
        return ARCH_QWEN3;
    return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: no Hugging Face architecture has qkv_bias=%d, "
                    "out_bias=%d, mlp_bias=%d, qk_norm=%d (LlamaForCausalLM: qkv_bias = "
                    "out_bias, qk_norm 0; Qwen2ForCausalLM: qkv_bias 1, out_bias 0, mlp_bias 0, "
                    "qk_norm 0; Qwen3ForCausalLM: qk_norm 1, qkv_bias = out_bias, mlp_bias 0)",
                    fn, c->qkv_bias, c->out_bias, c->mlp_bias, c->qk_norm);
}

static void llama_write_hf(nnt_cfg_out *t, int arch, const nnt_model_config *c)
{
    nnt_cfg_put_sizes(t, c);
    nnt_cfg_add(t, ",\n  \"hidden_act\": \"silu\"");
    nnt_cfg_put_bool(t, "tie_word_embeddings", c->tied);
    if (arch != ARCH_QWEN2 && arch != ARCH_MISTRAL)
        nnt_cfg_put_bool(t, "attention_bias", c->qkv_bias);
    if (arch == ARCH_LLAMA || arch == ARCH_SMOLLM3)
        nnt_cfg_put_bool(t, "mlp_bias", c->mlp_bias);
    if (arch == ARCH_SMOLLM3) {   /* the lists say every layer's rope and window */
        nnt_cfg_add(t, ",\n  \"no_rope_layers\": [");
        for (int64_t i = 0; i < c->layers; i++)
            nnt_cfg_add(t, "%s%d", i ? ", " : "", !NNT_MODEL_NOPE_LAYER(c, i));
        nnt_cfg_add(t, "]");
        nnt_cfg_put_bool(t, "use_sliding_window", c->sliding_window > 0);
        nnt_cfg_put_window(t, c);
        nnt_cfg_put_layer_types(t, c);
        /* SmolLM3Config's token ids (pad 128004: its embedding's padding_idx, bos 128000, eos
         * 128001) are its tokenizer's; a smaller vocabulary has none of them */
        if (c->vocab <= 128004)
            nnt_cfg_put_no_token_ids(t, c);
    } else if (arch == ARCH_MISTRAL) {
        nnt_cfg_put_int(t, "sliding_window", c->sliding_window);
    } else if (arch != ARCH_LLAMA && c->sliding_window) {   /* Qwen2, Qwen3 */
        nnt_cfg_put_bool(t, "use_sliding_window", 1);
        nnt_cfg_put_int(t, "sliding_window", c->sliding_window);
        nnt_cfg_put_int(t, "max_window_layers", c->window_from);
        if (nnt_model_window_listed(c))   /* blocks of no max_window_layers form */
            nnt_cfg_put_layer_types(t, c);
    } else if (arch != ARCH_LLAMA) {
        nnt_cfg_put_bool(t, "use_sliding_window", 0);
    }
    nnt_cfg_put_double(t, "attention_dropout", 0.0);
    nnt_cfg_put_rope(t, &c->rope);
}

/* ---- parameter names in the files: the tree's own; o_proj (C, NH, hd) is HF's (C, NH hd) -- */

static const char *const ROWS_FIRST[] = {"o_proj.weight", NULL};

const nnt_family nnt_family_llama = {
    NNT_FAMILY_LLAMA, "llama", "Llama",
    NNT_FAMILY_HAS_KV_HEADS | NNT_FAMILY_HAS_HIDDEN | NNT_FAMILY_HAS_HEAD_DIM |
        NNT_FAMILY_HAS_QK_NORM | NNT_FAMILY_HAS_ROPE | NNT_FAMILY_HAS_UNTIED |
        NNT_FAMILY_HAS_BIASES | NNT_FAMILY_HAS_WINDOW | NNT_FAMILY_HAS_NOPE,
    llama_preset, PRESET_NAMES,
    NULL,   /* no checks beyond those of every family with rotary positions (transformer.c;
               the rope options' own run in the attention layer, naming the field) */
    {"model.embed_tokens", "weight", "model.layers.", "model.norm", 0, NNT_NORM_RMSNORM,
     NNT_MLP_SWIGLU, 1, 0, 0, 0, 0, 0, 0, 0},
    NULL,
    ARCHS, (int)(sizeof ARCHS / sizeof ARCHS[0]), llama_read_hf, llama_hf_arch,
    llama_write_hf,
    NULL, 0, ROWS_FIRST, "", 0, 1, "model.layers.",
    NULL, 0,
    "q_proj,v_proj",   /* PEFT's default targets for llama, mistral, qwen2, qwen3 */
    NULL,
    NULL,
    NULL, 0,   /* no fused tensors */
    NULL,
    NULL, NULL,   /* no stacked tensors */
};
