/* SPDX-License-Identifier: MIT */
/* Model families (internal). A family is one file under lib/models/ (gpt2.c, llama.c) holding
 * one descriptor: what its Hugging Face config.json keys mean (read and write), its presets,
 * the checks of a configuration beyond the sizes every family shares, the options it gives
 * the shared layers (the tree's layout), and its parameter names in Hugging Face's files
 * (and llm.c's, for GPT-2). lib/models/families.c keeps the table of descriptors that the
 * configuration readers, presets, model builder and Hugging Face loader and saver consult;
 * none of them branches on a family.
 *
 * Adding a family that needs no new operation: a file with its descriptor, one line in
 * families.c's table, its enum value in nnt.h, its tests. */
#ifndef NNT_MODELS_FAMILY_H
#define NNT_MODELS_FAMILY_H

#include "../internal.h"

/* ---- config.json: reading (lib/models/config_json.c) ------------------------------------- */

/* One JSON object of a config.json: its keys and the spans of their values. Messages name
 * the function, the file and the key (prefixed inside a sub-object: "rope_scaling.factor"). */
typedef struct nnt_cfg_in nnt_cfg_in;

/* A number (def when absent or null; required: absent is an error). */
int nnt_cfg_double(const nnt_cfg_in *o, const char *key, int required, double def,
                   double *out);
/* An integer in [0, 2^53] (def when absent or null). */
int nnt_cfg_int(const nnt_cfg_in *o, const char *key, int required, int64_t def,
                int64_t *out);
/* true / false (def when absent or null). */
int nnt_cfg_bool(const nnt_cfg_in *o, const char *key, int def, int *out);
/* A string that must be one of valid[0..nvalid) (def when absent or null); *which its index.
 * Another value is NNT_E_UNSUPPORTED naming it and listing the valid ones. */
int nnt_cfg_choice(const nnt_cfg_in *o, const char *key, const char *def,
                   const char *const *valid, int nvalid, int *which);
/* A configuration class's defaults for the sizes every Llama-like class reads. */
typedef struct nnt_cfg_defaults {
    int64_t vocab, channels, hidden, layers, heads;
    int64_t kv_heads;              /* num_key_value_heads; 0: the heads                     */
    int64_t max_seq;               /* max_position_embeddings                               */
    const char *eps_key;           /* "rms_norm_eps", "layer_norm_eps"                      */
    double eps;
    const char *const *acts;       /* the hidden_act values nnt computes (acts[0] the
                                      default; others NNT_E_UNSUPPORTED)                    */
    int nacts;
    int head_dim;                  /* head_dim read (0 unless given; a given one > 0)       */
    const int *gelus;              /* the mlp_gelu of each of acts (families with
                                      NNT_FAMILY_HAS_GELU_CHOICE); NULL: 0 for every one   */
} nnt_cfg_defaults;

/* vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
 * num_key_value_heads, max_position_embeddings, the norms' eps, tie_word_embeddings,
 * hidden_act (and with it mlp_gelu) and (d->head_dim) head_dim, with d's defaults. */
int nnt_cfg_sizes(const nnt_cfg_in *o, const nnt_cfg_defaults *d, nnt_model_config *c);
/* The sizes under GPT2Config's keys (GPT-2, GPT-BigCode): vocab_size, n_positions, n_embd,
 * n_layer, n_head (required, or d's defaults), n_inner (absent or null: 4 n_embd) as
 * c->hidden, layer_norm_epsilon (d->eps), activation_function (d->acts, with it mlp_gelu),
 * tie_word_embeddings (true). */
int nnt_cfg_gpt2_sizes(const nnt_cfg_in *o, int required, const nnt_cfg_defaults *d,
                       nnt_model_config *c);
/* nnt_cfg_rope for configuration classes whose partial_rotary_factor defaults to partial
 * (PhiConfig 0.5, StableLmConfig 0.25): that where neither the top level nor the rope object
 * read (rope_scaling when not empty, else rope_parameters) gives one. */
int nnt_cfg_rope_partial(const nnt_cfg_in *o, double theta, int64_t max_position,
                         double partial, nnt_rope_options *rope);
/* Dropout probabilities keys[0..n) (absent or null: 0), each in [0, 1) (else NNT_E_FORMAT);
 * one above 0 is logged as a warning: nnt trains without dropout. */
int nnt_cfg_dropouts(const nnt_cfg_in *o, const char *const *keys, int n);
/* Whether key is present and not null. */
int nnt_cfg_has(const nnt_cfg_in *o, const char *key);
/* NNT_E_UNSUPPORTED: "key value is not supported (valid)". */
int nnt_cfg_unsupported(const nnt_cfg_in *o, const char *key, const char *value,
                        const char *valid);
/* NNT_E_FORMAT: "key must be want". */
int nnt_cfg_bad_type(const nnt_cfg_in *o, const char *key, const char *want);
/* The value's text (at most size - 1 bytes of it) for a message. */
void nnt_cfg_text(const nnt_cfg_in *o, const char *key, char *out, size_t size);
/* The rotary options as transformers 5.24 reads them: the rope_scaling object when given and
 * not empty, else rope_parameters; rope types "default", "llama3", "linear", "yarn" and
 * "longrope"; rope_theta and partial_rotary_factor from the object, else from the top level,
 * else theta (the configuration class's default_theta) and 1; original_max_position_embeddings
 * from the object, else max_position (the model's max_position_embeddings). nnt_cfg_rope_ex
 * as Phi3Config reads them: original > 0 replaces every object's
 * original_max_position_embeddings, and with longrope_aliases the types "su" and "yarn" are
 * longrope. */
int nnt_cfg_rope_ex(const nnt_cfg_in *o, double theta, int64_t max_position,
                    int64_t original, int longrope_aliases, nnt_rope_options *rope);
int nnt_cfg_rope(const nnt_cfg_in *o, double theta, int64_t max_position,
                 nnt_rope_options *rope);
/* nnt_cfg_rope with the top level's keys theta_key and partial_key in place of rope_theta and
 * partial_rotary_factor, partial their default (GPTNeoXConfig: rotary_emb_base, rotary_pct,
 * 0.25). */
int nnt_cfg_rope_keys(const nnt_cfg_in *o, const char *theta_key, const char *partial_key,
                      double theta, double partial, int64_t max_position,
                      nnt_rope_options *rope);
/* The rotary options of one rope object (a rope_parameters entry): rope_theta (theta when
 * absent), its rope_type, its partial_rotary_factor (rope's when absent). */
int nnt_cfg_rope_in(const nnt_cfg_in *r, double theta, int64_t max_position,
                    nnt_rope_options *rope);
/* Which layers have the window sliding_window (absent: 4096; null: none): layer_types (full
 * on every N-th layer counting from 1 as window_global_every N, any other list as
 * window_from or window_full_layers), else every `every`-th layer global (pattern_key, when
 * not NULL, gives that N: Gemma 3's sliding_window_pattern). */
int nnt_cfg_windows(const nnt_cfg_in *o, const char *pattern_key, int64_t every,
                    nnt_model_config *c);
/* The rotary options of models whose windowed layers have a rope of their own (Gemma 3,
 * OLMo 3): rope_parameters {"full_attention": {...}, "sliding_attention": {...}}
 * (transformers 5; absent rope_theta: theta and local_theta), else rope_theta (theta) and
 * rope_scaling for the global layers and local_key (local_theta) for the windowed ones, or
 * with local_key NULL the global layers' theta. c->rope is the global layers',
 * c->rope_local_theta the windowed ones' (which take no scaling: NNT_E_UNSUPPORTED). In the
 * first form YaRN's truncate is true whatever the object says, as transformers reads it. */
int nnt_cfg_rope_by_layer_type(const nnt_cfg_in *o, double theta, const char *local_key,
                               double local_theta, nnt_model_config *c);
/* The object under key as *sub (NULL when absent or null; messages prefixed "key."); free
 * it with nnt_cfg_sub_free. */
int nnt_cfg_sub(const nnt_cfg_in *o, const char *key, nnt_cfg_in **sub);
void nnt_cfg_sub_free(nnt_cfg_in *sub);
/* Token ids: an integer or a list (absent or null: none); the first cap into ids, *n of them */
int nnt_cfg_ids(const nnt_cfg_in *o, const char *key, int32_t *ids, int64_t cap, int64_t *n);
/* A list of numbers (absent or null: *n 0): the first cap into vals as floats, *n of them;
 * another value is NNT_E_FORMAT. */
int nnt_cfg_float_list(const nnt_cfg_in *o, const char *key, float *vals, int64_t cap,
                       int64_t *n);
/* A list of integers in [0, 2^31) (absent or null: *n 0): the first cap into vals, *n of
 * them; another value is NNT_E_FORMAT saying key must be what. */
int nnt_cfg_int_list(const nnt_cfg_in *o, const char *key, const char *what, int32_t *vals,
                     int64_t cap, int64_t *n);
/* layer_types (a "sliding_attention" / "full_attention" list) as c's window_from,
 * window_global_every (only with every_rule: the families whose configurations say it) or
 * else window_full_layers (c->layers set; no sliding layer: sliding_window 0); absent: c as
 * is; not such a list, or one of more than NNT_MODEL_MAX_WINDOW_LAYER layers that no rule
 * says: NNT_E_UNSUPPORTED. */
int nnt_cfg_layer_types(const nnt_cfg_in *o, int every_rule, nnt_model_config *c);

/* Other JSON files (adapter_config.json): the object of file path (no file NNT_E_IO,
 * malformed NNT_E_FORMAT naming it); its keys in file order; a string (malloc'd, NULL when
 * absent or null); whether a value is absent, null, [] or {}; a string or a list of strings
 * as one comma-separated string (malloc'd; a list of one string "a" and the string "a"
 * both give "a"; NULL when absent or null). */
int nnt_cfg_open(nnt_ctx *ctx, const char *fn, const char *path, nnt_cfg_in **out);
/* The same from the len bytes of text (copied), named what in messages. */
int nnt_cfg_parse(nnt_ctx *ctx, const char *fn, const char *what, const char *text,
                  size_t len, nnt_cfg_in **out);
void nnt_cfg_close(nnt_cfg_in *o);
size_t nnt_cfg_count(const nnt_cfg_in *o);
const char *nnt_cfg_key_at(const nnt_cfg_in *o, size_t i);
int nnt_cfg_string(const nnt_cfg_in *o, const char *key, char **out);
int nnt_cfg_is_empty(const nnt_cfg_in *o, const char *key);
int nnt_cfg_string_list(const nnt_cfg_in *o, const char *key, char **out);

/* ---- config.json: writing ---------------------------------------------------------------- */

/* A growing JSON text (out of memory is remembered and reported once at the end). */
typedef struct nnt_cfg_out {
    char *buf;
    size_t len, cap;
    int oom;
    int pad_done;   /* pad_token_id written (nnt_cfg_put_pad) */
} nnt_cfg_out;

void nnt_cfg_add(nnt_cfg_out *t, const char *fmt, ...) NNT_PRINTF(2, 3);
/* ,\n  "key": value   (a double that reads back as itself; "10000.0" for integral ones) */
void nnt_cfg_put_double(nnt_cfg_out *t, const char *key, double v);
void nnt_cfg_put_int(nnt_cfg_out *t, const char *key, int64_t v);
void nnt_cfg_put_bool(nnt_cfg_out *t, const char *key, int v);
/* The sizes every family but GPT-2 writes first: vocab_size, hidden_size,
 * intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim
 * (C / NH when 0), max_position_embeddings, rms_norm_eps. */
void nnt_cfg_put_sizes(nnt_cfg_out *t, const nnt_model_config *c);
/* The same with the norms' eps under eps_key ("layer_norm_eps": Phi). */
void nnt_cfg_put_sizes_eps(nnt_cfg_out *t, const nnt_model_config *c, const char *eps_key);
/* vocab_size, n_positions, n_embd, n_layer, n_head (GPT2Config's keys). */
void nnt_cfg_put_gpt2_sizes(nnt_cfg_out *t, const nnt_model_config *c);
/* ,\n  "sliding_window": W, or null without a window. */
void nnt_cfg_put_window(nnt_cfg_out *t, const nnt_model_config *c);
/* ,\n  "pad_token_id": null, "bos_token_id": null, "eos_token_id": null: a configuration
 * class's ids that a model's smaller vocabulary lacks (transformers would refuse an
 * embedding padding_idx out of range). */
void nnt_cfg_put_no_token_ids(nnt_cfg_out *t, const nnt_model_config *c);
/* pad_token_id: the configuration's, else null (t->pad_done set). */
void nnt_cfg_put_pad(nnt_cfg_out *t, const nnt_model_config *c);
/* ,\n  "rope_parameters": {"sliding_attention": {...}, "full_attention": {...}} of c's
 * windowed layers' rope (rope_local_theta, else the global one's theta) and the global. */
void nnt_cfg_put_rope_by_layer_type(nnt_cfg_out *t, const nnt_model_config *c);
/* rope_theta, partial_rotary_factor (when not 1) and rope_scaling (null, or the llama3,
 * linear, yarn or longrope object). */
void nnt_cfg_put_rope(nnt_cfg_out *t, const nnt_rope_options *r);
/* rope_scaling alone (null, or the object). */
void nnt_cfg_put_rope_scaling(nnt_cfg_out *t, const nnt_rope_options *r);
/* ,\n  "partial_rotary_factor": 1.0 for a rope on whole head vectors (0 or 1), which
 * nnt_cfg_put_rope leaves out: for the classes of nnt_cfg_rope_partial, whose default is not
 * 1. */
void nnt_cfg_put_partial(nnt_cfg_out *t, const nnt_rope_options *r);
/* ,\n  "hidden_act": "gelu" when the MLP's GELU is the exact one (nnt_model_mlp_kind), else
 * tanh_act, the family's name of the tanh form. */
void nnt_cfg_put_gelu(nnt_cfg_out *t, const nnt_model_config *c, const char *tanh_act);
/* One rope object as a value: {"rope_type": ..., the fields of its scaling (llama3, linear,
 * yarn, longrope), "rope_theta": ...}. */
void nnt_cfg_put_rope_object(nnt_cfg_out *t, const nnt_rope_options *r);
/* ,\n  "layer_types": [...] of c's windowed blocks. */
void nnt_cfg_put_layer_types(nnt_cfg_out *t, const nnt_model_config *c);

/* ---- Hugging Face weights ---------------------------------------------------------------- */

/* One tensor of a Hugging Face file made of the model's parameters (in a family's table):
 * hf, under the family's prefix, and block i's under "<hf_block><i>."; parts: up to 3 of
 * the model's parameters (a block's under "<block><i>." of the tree) whose data follow one
 * another in it; conv1d > 0: stored transposed, (in, out) where nnt has (out, in), in being
 * the product of the parameter's last conv1d dimensions (GPT-2's Conv1D). Its shape: 2-D
 * (in, out) for conv1d; 2-D (rows, last dimension) for one part of two or more dimensions
 * that is not a bias, rows being the product of the other dimensions, or of the first
 * rows_first ones when rows_first > 0 (an output projection (C, NH, hd) is HF's (C, NH hd));
 * 1-D otherwise. */
typedef struct nnt_hf_spec {
    const char *hf;
    const char *parts[3];
    int block;
    int conv1d;
    int rows_first;
} nnt_hf_spec;

/* name with the first of each renames[i][0] that is followed by "." or ends it replaced by
 * renames[i][1], into out (size bytes): the tree's module names and a family's (hf_rename). */
void nnt_hf_rename_modules(const char *name, const char *const (*renames)[2], int n,
                           char *out, size_t size);

/* Another place where a Hugging Face file may hold a parameter listed under its own name:
 * its elements are [offset, offset + its size) of the tensor called name (with the family's
 * prefix), of nd dimensions shape (e.g. expert e's gate_proj inside a fused
 * "mlp.experts.gate_up_proj" (E, 2 I, C): offset e 2 I C). */
typedef struct nnt_hf_alt {
    char name[256];
    int nd;
    int64_t shape[3];
    int64_t offset;
} nnt_hf_alt;

/* A tensor of a Hugging Face file that holds two or three parameters of one module one
 * after the other along its rows (Phi-3's "self_attn.qkv_proj.weight" (NH hd + 2 NKV hd, C):
 * q_proj's rows, k_proj's, v_proj's), or with per_head key/value head by key/value head: the
 * rows of the q heads that share key/value head g, then g's k rows, then its v rows, then
 * those of g + 1 (GPT-NeoX's "attention.query_key_value.weight" (NH 3 hd, C), NKV = NH: head
 * h's q, k, v rows; GPT-BigCode's "attn.c_attn.weight": the same without multi_query, and with
 * it (NKV 1) q's rows then k's then v's); the second part's first dimension is NKV: hf
 * replaces parts[0] at the end of the first part's name. */
typedef struct nnt_hf_fused {
    const char *hf;
    const char *parts[3];
    int per_head;
} nnt_hf_fused;

/* The rows of nparts parts (part_n[p] floats each, each divided into groups groups of rows of
 * equal size), from the parts one after the other (src) to group by group (dst: group g of
 * part 0, of part 1, ..., then group g + 1), or back with to_parts: GPT-NeoX's and
 * GPT-BigCode's q, k, v by key/value head. */
void nnt_rows_by_group(const float *src, float *dst, int nparts, const int64_t *part_n,
                       int64_t groups, int to_parts);

/* A tensor of a Hugging Face file that stacks many parameters (gpt-oss's experts:
 * "mlp.experts.gate_up_proj" (E, C, 2 I) holds every expert's gate_proj and up_proj weights,
 * each transposed, their columns interleaved): its name (without the family's prefix), its
 * shape (nd <= 3 dimensions) and its number of members (nnt_hf_member). With mxfp4 a file
 * may hold it as MXFP4 blocks and scales instead, as gpt-oss's original checkpoints do:
 * "<name>_blocks" (shape[0], shape[2], shape[1] / 32, 16) uint8 and "<name>_scales"
 * (shape[0], shape[2], shape[1] / 32) uint8 are the stacked tensor with its last two
 * dimensions swapped, in blocks of 32 FP4 (e2m1) values, value 2j of a block in the low
 * nibble of byte j and 2j + 1 in the high one, each block scaled by 2^(scale byte - 127)
 * (nnt_mxfp4_decode). Read only in that form; written as the stacked tensor. */
typedef struct nnt_hf_stack {
    char name[256];
    int nd;
    int64_t shape[3];
    int64_t members;
    int mxfp4;
} nnt_hf_stack;

/* Member j of a stack: a parameter of the model (its name in the tree) and where its
 * elements are in the stacked tensor (row-major): the parameter viewed as (rows, cols),
 * cols its last dimension and rows the product of the others (a 1-D parameter: (n, 1)),
 * has element (r, c) at offset + r stride[0] + c stride[1]. The members cover every element
 * of the stack once, and each lies within one index of the stack's first dimension. */
typedef struct nnt_hf_member {
    char name[256];
    int64_t offset, stride[2];
} nnt_hf_member;

/* ---- llm.c checkpoints ------------------------------------------------------------------- */

/* llm.c's parameters in file order (lib/io's nnt_llmc_layout); LN1W .. FCPROJB are per layer
 * (L slices). */
enum { NNT_LLMC_WTE, NNT_LLMC_WPE, NNT_LLMC_LN1W, NNT_LLMC_LN1B, NNT_LLMC_QKVW, NNT_LLMC_QKVB,
       NNT_LLMC_ATTPROJW, NNT_LLMC_ATTPROJB, NNT_LLMC_LN2W, NNT_LLMC_LN2B, NNT_LLMC_FCW,
       NNT_LLMC_FCB, NNT_LLMC_FCPROJW, NNT_LLMC_FCPROJB, NNT_LLMC_LNFW, NNT_LLMC_LNFB };

/* A model parameter as a slice of llm.c parameter k (lib/io's nnt_llmc_layout order), at row
 * offset * (its rows) of k's layer slice (a block's parameters: after "<block><i>."). */
typedef struct nnt_llmc_name {
    const char *name;
    int k, offset;
} nnt_llmc_name;

/* ---- the descriptor ---------------------------------------------------------------------- */

/* Where a file keeps the model's tensors when not under the model's own names (the language
 * model of a multimodal checkpoint): rename[k] = {the model's prefix, the file's prefix},
 * the first that begins a name replaced; skip: prefixes of the file's tensors that are not
 * the model's (a vision tower), not read. NULL-terminated lists. */
typedef struct nnt_hf_nesting {
    const char *rename[4][2];
    const char *skip[4];
} nnt_hf_nesting;

/* A Hugging Face architecture a family reads and writes. */
typedef struct nnt_hf_arch {
    const char *architecture;      /* config.json architectures[0]: "LlamaForCausalLM"       */
    const char *model_type;        /* its model_type: "llama"                                */
    /* read only: the layouts of its files (NULL: the model's names; else a list ended by
     * one with no rename), the one whose first renamed prefix begins a tensor of the file,
     * else the first */
    const nnt_hf_nesting *nestings;
} nnt_hf_arch;

/* What the tree of a family is made of (lib/models/transformer.c builds it): the names of the
 * model's children and the options of the shared layers that do not come from the
 * configuration's own fields (sizes, biases, heads, rope, q/k norms, eps). */
typedef struct nnt_family_layout {
    const char *embedding;         /* the embedding child ("": its parameters unprefixed)   */
    const char *table;             /* the embedding's token-table parameter                 */
    const char *block;             /* block i is the child "<block><i>"                     */
    const char *norm;              /* the final norm                                        */
    int positions;                 /* learned position table of max_seq rows                */
    int norm_kind;                 /* nnt_norm_kind of the blocks' and the final norm       */
    int mlp_kind;                  /* nnt_mlp_kind                                          */
    int rope;                      /* rotary positions from the configuration's rope        */
    int norm_plus_one;             /* RMSNorms (blocks, final, q/k) scale by 1 + weight      */
    int sandwich_norms;            /* four norms per block (nnt_block_options)               */
    int embed_scale;               /* the embedding's output times sqrt(C)                   */
    int fused_lora;                /* LoRA's modules qkv_proj and gate_up_proj (Phi-3's fused
                                      tensors) in place of q/k/v_proj and gate/up_proj; 2:
                                      qkv_proj alone, its B's rows key/value head by
                                      key/value head in PEFT's files as nnt_hf_fused's
                                      per_head (GPT-NeoX's query_key_value, GPT-BigCode's
                                      c_attn)                                               */
    int parallel;                  /* attention and MLP side by side on one norm (Phi), 2: on
                                      two norms (GPT-NeoX; serial_blocks: one after the
                                      other on the two)                                     */
    int head_bias;                 /* the untied head has a bias "lm_head.bias" (Phi)        */
    int llama_names;               /* without rotary positions too, the attention's parameters
                                      under the Llama layout's names (q_proj, k_proj, v_proj,
                                      o_proj) and the blocks' children input_layernorm,
                                      self_attn, post_attention_layernorm, mlp, whatever the
                                      heads (GPT-BigCode); with rotary positions they always
                                      are                                                   */
} nnt_family_layout;

typedef struct nnt_family {
    int id;                        /* nnt_model_family (nnt_model_config.family)             */
    const char *name;              /* "gpt2", "llama"                                        */
    const char *title;             /* "GPT-2", "Llama" (messages, programs)                  */
    unsigned features;             /* NNT_FAMILY_* of nnt.h: the options it accepts          */
    /* presets: fill *cfg for a preset of this family, 1 if name is one, else 0; names: its
     * presets, NULL-terminated */
    int (*preset)(const char *name, nnt_model_config *cfg);
    const char *const *preset_names;
    /* the family's own checks of a configuration whose sizes are checked (NNT_E_INVAL or
     * NNT_E_UNSUPPORTED naming fn and the field; NULL: none), after those of every family
     * (transformer.c: with rotary positions an even head_dim, qk_norm 0 to 2, ...) */
    int (*check)(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg);
    nnt_family_layout layout;
    /* builds the model of a checked configuration with a resolved tiling (NULL: the tree
     * of lib/models/transformer.c) */
    int (*build)(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                 int64_t T, const nnt_tiling *tiling, nnt_layer **out);
    /* Hugging Face config.json: the architectures it reads (architectures[0], else
     * model_type) and writes */
    const nnt_hf_arch *archs;
    int narchs;
    /* config.json -> *cfg (set to NNT_MODEL_CONFIG_INIT with family = id before) for
     * archs[arch]; messages through o */
    int (*read_hf)(const nnt_cfg_in *o, int arch, nnt_model_config *cfg);
    /* the architecture cfg is saved as (index of archs), or a negative NNT_E_* naming fn;
     * NULL: archs[0] (a family of one architecture) */
    int (*hf_arch)(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg);
    /* the keys after "architectures" and "model_type" (each ",\n  \"key\": value") */
    void (*write_hf)(nnt_cfg_out *t, int arch, const nnt_model_config *cfg);
    /* Hugging Face weights: hf_specs (nhf_specs) in file order, or NULL: every parameter under
     * its own name, in the model's order (rows_first of names ending in one of
     * hf_rows_first: 1); hf_prefix before every name written ("transformer."), optional
     * when reading if hf_prefix_optional; hf_strict: a tensor that is no parameter (other
     * than the tied lm_head.weight and rotary_emb.inv_freq) is refused; hf_block: the prefix
     * of block i's tensors in the file */
    const nnt_hf_spec *hf_specs;
    int nhf_specs;
    const char *const *hf_rows_first;
    const char *hf_prefix;
    int hf_prefix_optional;
    int hf_strict;
    const char *hf_block;
    /* llm.c checkpoints (GPT-2): the model's parameters in the file's order (NULL: none) */
    const nnt_llmc_name *llmc;
    int nllmc;
    /* LoRA: the modules adapted when no target is given (PEFT's default for the
     * architecture), comma-separated */
    const char *lora_targets;
    /* the name in Hugging Face files of a parameter listed under its own name (NULL: that
     * name), into out (size bytes) */
    void (*hf_rename)(const nnt_model_config *cfg, const char *name, char *out, size_t size);
    /* when a file has no tensor under that name, the other places to look for parameter name,
     * i = 0, 1, ... until it returns 0 (NULL: none); files are written under the names */
    int (*hf_alt)(const nnt_model_config *cfg, const char *name, int i, nnt_hf_alt *alt);
    /* with every parameter under its own name: the tensors that hold several (read and
     * written fused; nhf_fused of them) */
    const nnt_hf_fused *hf_fused;
    int nhf_fused;
    /* the ends of the names of a file's tensors that are no parameter and are skipped (the
     * buffers older files hold: GPT-NeoX's ".attention.bias" causal mask), NULL-terminated;
     * NULL: none */
    const char *const *hf_ignored;
    /* stacked tensors (nnt_hf_stack; NULL: none), with every parameter under its own name:
     * hf_stack(cfg, name, s) is 1 if parameter name is the first member of a stack (s then
     * describes it; the file holds it there and in its place in the file order), 2 if it is
     * another member (visited with the first), 0 if in none; hf_member(cfg, s, j, m) fills
     * member j < s->members of stack s */
    int (*hf_stack)(const nnt_model_config *cfg, const char *name, nnt_hf_stack *s);
    void (*hf_member)(const nnt_model_config *cfg, const nnt_hf_stack *s, int64_t j,
                      nnt_hf_member *m);
} nnt_family;

/* The families (families.c). */
extern const nnt_family nnt_family_gpt2;
extern const nnt_family nnt_family_llama;
extern const nnt_family nnt_family_gemma;
extern const nnt_family nnt_family_moe;
extern const nnt_family nnt_family_olmo;
extern const nnt_family nnt_family_phi3;
extern const nnt_family nnt_family_phi;
extern const nnt_family nnt_family_granite;
extern const nnt_family nnt_family_stablelm;
extern const nnt_family nnt_family_gptneox;
extern const nnt_family nnt_family_starcoder2;
extern const nnt_family nnt_family_gptbigcode;
extern const nnt_family nnt_family_falcon;

/* The family of id (NULL if none). */
const nnt_family *nnt_family_find(int id);
/* The i-th family of the table (NULL past the last). */
const nnt_family *nnt_family_at(int i);
/* The family and architecture index of a config.json's architectures[0] (by_type 0) or
 * model_type (by_type 1); NULL if no family reads it. */
const nnt_family *nnt_family_of_hf(const char *name, int by_type, int *arch);
/* transformers' sequence classifier of the causal architecture causal (GPT2LMHeadModel:
 * GPT2ForSequenceClassification, LlamaForCausalLM: LlamaForSequenceClassification, ...)
 * into out: 1, or 0 when transformers has none. */
int nnt_hf_classifier_name(const char *causal, char *out, size_t size);
/* The family and (causal) architecture index of a classifier's architectures[0]; NULL if
 * none. */
const nnt_family *nnt_family_of_classifier(const char *name, int *arch);
/* The names a family table lookup accepts, for messages: every family's architectures
 * (by_type 0) or model types (by_type 1), ", "-separated, into out. */
void nnt_family_hf_names(int by_type, char *out, size_t size);
/* Add a family to the table (tests: a family made only of a descriptor); NNT_E_BUSY when
 * the table is full or id is taken. Not thread-safe: call before any model is made. */
int nnt_family_register(const nnt_family *f);

#endif
