/* SPDX-License-Identifier: MIT */
/* What the model files share (internal): the automatic tiling of a transformer of any family
 * (lib/models/tiling.c) and the transformer models of nnt_model_create
 * (lib/models/transformer.c). */
#ifndef NNT_MODELS_MODELS_H
#define NNT_MODELS_MODELS_H

#include "../internal.h"

/* The sizes the automatic tiling looks at: rows (B, T), channels C, MLP inner size F,
 * vocabulary V, heads NH (head_dim = C / NH). All >= 1, C a multiple of NH. */
typedef struct nnt_model_dims {
    int64_t B, T, C, F, V, NH;
    int64_t HD;               /* head dimension; 0: C / NH */
} nnt_model_dims;

/* Automatic tile sizes (0 = the whole dimension) for nworkers CPU workers (a pure function:
 * no context, no measurement). Rows below are M = B*T; every GEMM of the model is
 * (M x N x K) with (N, K) among (C, C) q/k/v and the attention output, (F, C) the MLP's
 * first products, (C, F) its last, (V, C) the lm head (and their transposes in backward).
 * The rules, from bench/RESULTS.md (tasks at full single-core speed, ~80 GFLOP/s; 2.6 us
 * runtime overhead per task):
 *  - a GEMM task should do >= ~100 MFLOP (>= ~1 ms), so the overhead stays < 1%, unless
 *    that leaves a worker without rows (below);
 *  - channels, heads and head_dim stay whole: C is K of q/k/v, the MLP and the lm head (a K
 *    split only adds accumulation tasks and C traffic); heads and head_dim are not GEMM
 *    tile dimensions worth splitting (the attention tasks follow the batch/seq tiles);
 *  - rows: with C whole, q/k/v, the attention output and the MLP's last product have one
 *    column tile and take their parallelism from rows only, so M is cut into about nworkers
 *    row tiles (also at least ceil(M / 512), i.e. <= ~512 rows a tile), but no tile under 64
 *    rows and no (C, F) task (2 (M/tiles) F C flops) under 10 MFLOP (~0.12 ms; q/k/v tasks
 *    are then >= 2.5 MFLOP at F = 4C). A worker left without rows idles through every
 *    product that has one column tile: with the 100 MFLOP of the column tiles here too,
 *    nnt-train's default model (C 128, B 8 x T 128) had one row tile and ran 1.3-1.6x
 *    slower on 2 workers (bench/RESULTS.md, 2026-12-04), and requiring 100 MFLOP of the
 *    q/k/v tasks left one core idle at C = 512, B*T = 256 (8% slower); the batch is split
 *    first, then each sequence in equal pieces;
 *  - hidden (N of the first MLP products, K of the last): about 2 tasks per worker (hidden
 *    tiles = ceil(2 nworkers / row tiles)), no more since each hidden tile is a k step;
 *  - vocab: >= 2 lm-head tasks per worker and tiles of <= 8192 columns;
 *  - hidden and vocab tiles are >= 128 columns, >= 100 MFLOP a task, rounded up to a
 *    multiple of 64; a tile covering the whole dimension is returned as 0.
 * For GPT-2 124M at B=4, T=64 on 2 workers this gives batch 2, hidden 1536, vocab 7232
 * (7 tiles), the rest 0; small models (e.g. C = 24) get one tile everywhere.
 * nnt_auto_tiling_gpu is the rule when ngpus >= 1 CUDA workers run the model: a GPU does a
 * 100 MFLOP task in well under a microsecond while StarPU spends several on each task, so
 * a GPU task must be as large as memory allows. Rows (B*T) are cut into ngpus row tiles
 * (at least 64 rows each; the batch first, then the sequence) and every other dimension
 * stays whole, except the vocabulary, cut into tiles of at most 8192 columns (rounded up to
 * a multiple of 64) to bound the logits tile. The CPU workers are then left the small tasks
 * that only have CPU code; a dmda-family scheduler (nnt_ctx_create's default with GPUs)
 * keeps the large ones on the GPUs. */
void nnt_auto_tiling_cpu(const nnt_model_dims *d, int nworkers, nnt_tiling *out);
void nnt_auto_tiling_gpu(const nnt_model_dims *d, int ngpus, nnt_tiling *out);
/* The overrides (NULL: all automatic; 0 automatic, -1 whole, > 0 a size) resolved against
 * the automatic tiling for ctx's workers: every entry of *out > 0. Errors name fn. */
int nnt_model_resolve_tiling(nnt_ctx *ctx, const char *fn, const nnt_model_dims *d,
                             const nnt_tiling *overrides, nnt_tiling *out);

/* The GPT-2 configuration of these sizes (the rest GPT-2's: MLP 4C, all biases, tied head,
 * eps 1e-5): what nnt_gpt_config and an llm.c header describe. */
nnt_model_config nnt_gpt2_model_config(int64_t vocab, int64_t max_seq, int64_t layers,
                                       int64_t heads, int64_t channels);
/* Paths of a model directory: dir/name into path (NNT_MODEL_PATH_MAX bytes); NNT_E_INVAL
 * naming fn when too long. */
#define NNT_MODEL_PATH_MAX 4096
/* 1 when source (as nnt_model_open takes it) is a Hugging Face directory, else 0;
 * nnt_model_source_is_fresh: 1 when it makes a fresh model (NULL: from cfg, or a preset). */
int nnt_model_source_is_hf(const char *source);
int nnt_model_source_is_fresh(const char *source);
int nnt_model_path_join(nnt_ctx *ctx, const char *fn, const char *dir, const char *name,
                        char *path);
/* dir/config.json as a configuration nnt can build (nnt_model_hf_config; *arch, unless
 * arch is NULL: the architecture it names, of family.h's table), and cfg written there
 * (temporary file, fsync, rename); errors name fn. */
struct nnt_hf_arch;
int nnt_model_config_read_dir(nnt_ctx *ctx, const char *fn, const char *dir,
                              nnt_model_config *cfg, const struct nnt_hf_arch **arch);
int nnt_model_config_write_dir(nnt_ctx *ctx, const char *fn, const char *dir,
                               const nnt_model_config *cfg, const char *const *label_names);
/* The family of c (*family) and the index of the Hugging Face architecture it saves c as
 * (its hf_arch), or a negative NNT_E_* naming fn. */
struct nnt_family;
int nnt_model_hf_arch(nnt_ctx *ctx, const char *fn, const nnt_model_config *c,
                      const struct nnt_family **family);
/* cfg as the config.json text that nnt_model_save_hf writes (malloc'd, NUL-terminated), and
 * such a text (len bytes; what: the file, for messages) back as a configuration nnt can
 * build (nnt_model_hf_config's reading); also the "model" record of training-state files.
 * Errors name fn. */
int nnt_model_config_text(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg,
                          char **out);
int nnt_model_config_parse(nnt_ctx *ctx, const char *fn, const char *what, const char *text,
                           size_t len, nnt_model_config *cfg);
/* The same text with a classifier's label names (id2label, label2id; NULL: LABEL_k), and the
 * names of such a text: *names num_labels of them (free with nnt_label_names_free), NULL
 * when it has none, another count, or only the defaults LABEL_k; keys that are not the labels
 * 0 .. num_labels - 1 or names unfit (nnt_label_names_check) are NNT_E_FORMAT. */
int nnt_model_config_text_named(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg,
                                const char *const *label_names, char **out);
int nnt_model_config_label_names(nnt_ctx *ctx, const char *fn, const char *what,
                                 const char *text, size_t len, int64_t num_labels,
                                 char ***names);
/* The same from dir/config.json */
int nnt_model_label_names_read_dir(nnt_ctx *ctx, const char *fn, const char *dir,
                                   int64_t num_labels, char ***names);
/* The same from a training-state file's configuration (lib/optim/state.c) */
int nnt_model_train_state_label_names(nnt_ctx *ctx, const char *fn, const char *path,
                                      int64_t num_labels, char ***names);
/* names[k] (NULL: the default LABEL_k) into buf of size bytes; NNT_E_INVAL naming fn when it
 * does not fit */
int nnt_label_name_into(nnt_ctx *ctx, const char *fn, const char *const *names, int64_t k,
                        char *buf, size_t size);
/* model's label names set to those of text (nnt_model_config_label_names), or to those of
 * dir/config.json (text NULL); nothing changes when they are absent or the defaults. */
int nnt_model_label_names_load(nnt_layer *model, const char *fn, const char *dir,
                               const char *text, size_t len);
/* The checks of nnt_model_create without a batch: cfg is a configuration nnt can build,
 * its rope options included (Llama family). Errors name fn. */
int nnt_model_check(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg);
/* Whether block i of c has a mixture-of-experts MLP (experts, moe_every, dense_layers). */
int nnt_model_block_moe(const nnt_model_config *c, int64_t i);
/* Block i of cfg has a sliding window (cfg->sliding_window; nnt.h's rule): 1, else 0. */
int nnt_model_block_window(const nnt_model_config *cfg, int64_t i);
/* whether cfg names blocks without a window in window_full_layers (a layer_types list of no
 * rule's form) */
int nnt_model_window_listed(const nnt_model_config *cfg);
/* Granite's multipliers as the model applies them, in the order embedding_multiplier,
 * residual_multiplier, attention_multiplier, logits_scaling: 0 is 1, and an
 * attention_multiplier of 0 the scores' default scale 1 / sqrt(hd). */
void nnt_model_multipliers(const nnt_model_config *c, double m[4]);
/* The MLP kind of cfg's blocks: its family's, with the GELU form cfg->mlp_gelu chooses
 * (NNT_MLP_GELU or NNT_MLP_GELU_ERF) where it is not 0. */
int nnt_model_mlp_kind(const nnt_model_config *cfg);
/* cfg's key/value heads (kv_heads, 0 meaning the heads) */
int64_t nnt_model_kv_heads(const nnt_model_config *cfg);
/* How cfg's blocks arrange the attention and the MLP (nnt_block_options.parallel): 0 one
 * after the other (serial_blocks), 1 side by side on one norm, 2 on two (parallel_norms,
 * else the family's). */
int nnt_model_block_parallel(const nnt_model_config *cfg);
/* whether some block of cfg has no rotary positions (nope_layers) */
int nnt_model_nope_any(const nnt_model_config *cfg);
/* Check cfg as nnt_model_create does and create its model for (B, T) with the caller's
 * tiling overrides (NULL: automatic). Errors name fn. */
int nnt_model_build(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                    int64_t T, const nnt_tiling *tiling, nnt_layer **out);
/* nnt_model_build with the parameters left unwritten (no layer initialises its own): the
 * caller initialises them once (nnt_layer_init, or nnt_layer_init_base after freezing) or
 * reads them. */
int nnt_model_build_uninit(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg,
                           int64_t B, int64_t T, const nnt_tiling *tiling, nnt_layer **out);
/* nnt_model_build_uninit, then every parameter initialised once from seed (nnt_layer_init);
 * on failure nothing is left (*out NULL). */
int nnt_model_build_init(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                         int64_t T, const nnt_tiling *tiling, uint64_t seed, nnt_layer **out);
/* The tree of generic layers (NNT_LAYER_MODEL) of either family, checked as
 * nnt_model_create checks cfg: a Llama configuration gives what nnt_model_create gives; a
 * GPT-2 one the parameters of nnt_gpt_create (names, shapes, order, decay flags), not yet
 * what nnt_model_create returns for it. Tiling as nnt_model_build. Errors name fn. */
int nnt_model_build_tree(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                         int64_t T, const nnt_tiling *tiling, nnt_layer **out);
/* The GPT layer (NNT_LAYER_GPT, lib/models/gpt2_layer.c) around the tree of nnt_model_build_tree
 * for a checked GPT-2 configuration; what nnt_gpt_create and nnt_model_build make. */
int nnt_gpt_layer_new(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                      int64_t T, const nnt_tiling *tiling, nnt_layer **out);
/* The tree inside a GPT layer and the layer's T (NULL if gpt is another kind). */
nnt_layer *nnt_gpt_tree(nnt_layer *gpt, int64_t *T);
/* A GPT layer's pending backward is cancelled (its activations were overwritten). */
void nnt_gpt_cancel_backward(nnt_layer *gpt);

/* nnt_model_load_hf, but a GPT-2 directory gives the tree of nnt_model_build_tree (filled
 * from the same HF GPT2LMHeadModel file) instead of the GPT layer. Errors name
 * nnt_model_load_hf_tree. */
int nnt_model_load_hf_tree(nnt_ctx *ctx, const char *dir, int64_t B, int64_t T,
                           const nnt_tiling *tiling, nnt_layer **out);
/* A GPT-2 model (tree != 0: the tree of nnt_model_build_tree; 0: the GPT layer) of cfg for
 * (B, T) from a Hugging Face GPT2LMHeadModel safetensors file (names with or without
 * "transformer."; F32, BF16 or F16; Conv1D weights (in, out) transposed to nnt's (out, in);
 * other tensors, e.g. a tied lm_head.weight, ignored). Every tensor is checked (present,
 * dtype, shape) before any is read; on failure *out is NULL. Errors name fn and the file. */
int nnt_model_load_gpt2_st(nnt_ctx *ctx, const char *fn, const char *path,
                           const nnt_model_config *cfg, int64_t B, int64_t T,
                           const nnt_tiling *tiling, int tree, nnt_layer **out);
/* The parameters of a GPT-2 model (GPT layer or tree) as a Hugging Face GPT2LMHeadModel
 * safetensors file, F32, "transformer." names, Conv1D weights (in, out), no lm_head.weight,
 * metadata {"format": "pt"}; one tensor in host memory at a time; temporary file, fsync,
 * rename. Errors name fn. */
int nnt_model_save_gpt2_st(nnt_layer *model, const char *fn, const char *path);
/* names[i] (malloc'd, n of them): the name in the family's Hugging Face files of the tensor
 * that holds the model's parameter i (nnt_layer_param order), NULL for none (an adapter's):
 * nnt_layer.file_names of every model. */
int nnt_model_file_names(nnt_layer *model, int64_t n, char **names);
/* An llm.c GPT-2 checkpoint (fp32, version 3) as a model for (B, T) (tree != 0: the tree of
 * nnt_model_build_tree; 0: the GPT layer): configuration from the header, every parameter
 * from its slice of the file (q, k, v: rows [0, C), [C, 2C), [2C, 3C) of each layer's qkvw;
 * wte: the first V of Vp rows). Nothing half-loaded: on failure *out is NULL. Errors name
 * fn (and the file). */
int nnt_model_load_llmc(nnt_ctx *ctx, const char *fn, const char *path, int64_t B,
                        int64_t T, const nnt_tiling *tiling, int tree, nnt_layer **out);
/* The GPT-2 configuration of an llm.c checkpoint's header (the file checked as the loader
 * checks it). Errors name fn (and the file). */
int nnt_model_llmc_config(nnt_ctx *ctx, const char *fn, const char *path,
                          nnt_model_config *cfg);
/* A GPT-2 model (GPT layer or tree) as an llm.c checkpoint (temporary file, fsync, rename),
 * Vp = V. Errors name fn. */
int nnt_model_save_llmc(nnt_layer *model, const char *fn, const char *path);
/* nnt_model_generate for any model, its errors naming fn: the argument checks, then the
 * tokens with a key/value cache while the sequence fits w, the layer's T for a GPT layer and
 * max_seq for a tree, then one forward per new token over the last w tokens. */
int nnt_model_run_generate(nnt_layer *model, const char *fn, const int32_t *prompt,
                           int64_t nprompt, int64_t ngen, const nnt_sampling *s,
                           int32_t *out);
/* The same, the logits of every step written to trace (ngen, V) (tests; NULL: none). */
int nnt_model_generate_trace(nnt_layer *model, const char *fn, const int32_t *prompt,
                             int64_t nprompt, int64_t ngen, const nnt_sampling *s,
                             int32_t *out, float *trace);
/* nnt_model_generate_n, its errors naming fn, the logits of every sequence's steps written
 * to trace (nseq, ngen, V) (tests; NULL: none; an ended sequence's steps left as they are). */
int nnt_model_generate_n_trace(nnt_layer *model, const char *fn, const int32_t *prompt,
                               int64_t nprompt, int64_t nseq, int64_t ngen,
                               const nnt_sampling *s, int32_t *out, float *trace);
/* nnt_model_generate_batch, its errors naming fn, the logits of every sequence's steps
 * written to trace (nseq, ngen, V) as nnt_model_generate_n_trace writes them. */
int nnt_model_generate_batch_trace(nnt_layer *model, const char *fn, int64_t nseq,
                                   const int32_t *const *prompts, const int64_t *nprompts,
                                   const uint64_t *seeds, int64_t ngen,
                                   const nnt_sampling *s, int32_t *out, float *trace);
/* The LoRA adapters of a model tree (lib/models/lora.c; kept with the tree's configuration
 * in lib/models/transformer.c): their settings as PEFT's adapter_config.json says them. */
typedef struct nnt_model_lora {
    int on;                   /* the tree has adapters                                    */
    int64_t rank;
    double alpha, dropout;
    int rslora, dora;
    char targets[8192];       /* target_modules, comma-separated, or "all-linear"         */
    char rank_pattern[1024];  /* PEFT's rank_pattern and alpha_pattern as read (JSON     */
    char alpha_pattern[1024]; /* objects; "" : none)                                     */
    int head;                 /* a classifier's head (score) trained whole beside the
                                 adapters and saved with them (PEFT's modules_to_save)     */
} nnt_model_lora;
/* Those of a tree of nnt_model_build_tree (NULL for another layer). */
nnt_model_lora *nnt_model_lora_of(nnt_layer *tree);
/* Whether model's adapters train its classifier's head whole beside them (PEFT's
 * modules_to_save; nnt_model_lora_add on a classifier, nnt_model_load_peft of such an
 * adapter). */
int nnt_model_lora_head(nnt_layer *model);

/* A classifier's head: its child's name in the model tree, unprefixed in every family's
 * Hugging Face files ("score.weight"). */
#define NNT_CLASSIFIER_HEAD "score"

/* The names of a model's labels (num_labels of them), NULL for the defaults LABEL_k or a
 * model that is no classifier; owned by the model. */
const char *const *nnt_model_label_names_of(const nnt_layer *model);

/* The configuration of a model (NNT_LAYER_MODEL or NNT_LAYER_GPT), kv_heads and hidden
 * resolved (never 0). Errors name fn. */
int nnt_model_config_get(const nnt_layer *model, const char *fn, nnt_model_config *cfg);

#endif
