/* GPT-2 on tiled tensors (internal, not installed): parameters, forward, backward, AdamW,
 * llm.c checkpoints. Written only with the public tensor operations of nnt.h.
 *
 * The model
 *   x = wte[tokens] + wpe[0..T)                                  // (B, T, C)
 *   per layer: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))        // pre-LN blocks
 *   logits = ln_f(x) wte^T                                        // (B, T, V), tied lm_head
 *   loss = mean over positions with target != NNT_GPT2_IGNORE of cross-entropy
 * GELU is the tanh approximation, LayerNorm eps 1e-5, attention causal with scale
 * 1/sqrt(hd). Dropout does not exist here.
 *
 * Parameters are held in llm.c's order and memory layout, one tensor per layer:
 *   wte (V, C)           wpe (maxT, C)        ln1w, ln1b (C)
 *   qkvw: three tensors q, k, v (NH, hd, C)   -- llm.c's (3C, C) rows [0,C), [C,2C), [2C,3C)
 *   qkvb: three tensors q, k, v (NH, hd)      -- llm.c's (3C) pieces
 *   attprojw (C, NH, hd) -- llm.c's (C, C): out x in, in = heads side by side
 *   attprojb (C)         ln2w, ln2b (C)       fcw (4C, C)   fcb (4C)
 *   fcprojw (C, 4C)      fcprojb (C)          lnfw, lnfb (C)
 * Splitting the head dimension out of the weights lets the GEMMs write q, k, v as
 * (B, T, NH, hd) directly (one permute each to the attention's (B, NH, T, hd)) and read the
 * re-joined heads (B, T, NH, hd) without a reshape. wte has V rows, not llm.c's padded Vp:
 * the padding rows are dropped on load and written as zeros on save.
 *
 * Tiling. Every tensor of the model is cut with the tile sizes of nnt_gpt2_tiling, per kind
 * of dimension: batch (B), seq (T and wpe's rows), channels (C), hidden (4C), vocab (V),
 * heads (NH), head_dim (hd). Any tiling (partial edge tiles, channel tiles that cut through
 * heads, split head dims) gives the same results up to rounding; the same tiling gives the
 * same bits run to run.
 *
 * Usage (gradients accumulate, so micro-batches are several forward/backward pairs):
 *   nnt_gpt2_load_llmc(ctx, path, &tiling, B, T, &m);
 *   for each step: nnt_gpt2_zero_grad(m);
 *                  nnt_gpt2_forward(m, tokens, targets, &loss); nnt_gpt2_backward(m);
 *                  nnt_gpt2_adamw_step(m, &opts);
 *   nnt_gpt2_generate(m, prompt, nprompt, ngen, &sampling, out);   // a text sample
 *   nnt_gpt2_destroy(m);
 * Every function returns NNT_OK or a negative NNT_E_* code with the context's message set.
 */
#ifndef NNT_MODELS_GPT2_H
#define NNT_MODELS_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "nnt.h"

/* Targets equal to this are ignored by the loss (and get no gradient). */
#define NNT_GPT2_IGNORE (-1)
#define NNT_GPT2_LN_EPS 1e-5

typedef struct nnt_gpt2_config {
    int64_t vocab;         /* V                                                     */
    int64_t padded_vocab;  /* Vp >= V: rows of wte in llm.c files (0: V)            */
    int64_t max_seq;       /* maxT: rows of wpe                                     */
    int64_t layers;        /* L                                                     */
    int64_t heads;         /* NH                                                    */
    int64_t channels;      /* C, a multiple of NH; the MLP hidden size is 4C        */
} nnt_gpt2_config;

/* Tile sizes per kind of dimension; 0 (or more than the dimension) = one tile. */
typedef struct nnt_gpt2_tiling {
    int64_t batch, seq, channels, hidden, vocab, heads, head_dim;
} nnt_gpt2_tiling;

typedef struct nnt_gpt2 nnt_gpt2;

/* A tiling for B x T batches on nworkers CPU workers, by a fixed heuristic (a pure function:
 * no context, no measurement). Rows below are M = B*T; every GEMM of the model is
 * (M x N x K) with (N, K) among (C, C) q/k/v and attproj, (4C, C) fc, (C, 4C) fcproj,
 * (V, C) lm head (and their transposes in backward). The rules, from bench/RESULTS.md
 * (tasks at full single-core speed, ~80 GFLOP/s; 2.6 us runtime overhead per task):
 *  - a GEMM task should do >= ~100 MFLOP (>= ~1 ms), so the overhead stays < 1%;
 *  - channels, heads and head_dim stay whole: C is K of q/k/v, fc and the lm head (a K
 *    split only adds accumulation tasks and C traffic); heads and head_dim are not GEMM
 *    tile dimensions worth splitting (the attention tasks follow the batch/seq tiles);
 *  - rows: with C whole, q/k/v, attproj and fcproj have one column tile and take their
 *    parallelism from rows only, so M is cut into about nworkers row tiles (also at least
 *    ceil(M / 512), i.e. <= ~512 rows a tile), but no tile under 64 rows and no fcproj
 *    task (2 (M/tiles) 4C C flops) under 100 MFLOP (q/k/v and attproj tasks are then
 *    >= 25 MFLOP, ~0.3 ms: overhead still ~1%; requiring 100 MFLOP of them too left one
 *    core idle in those GEMMs at C = 512, B*T = 256, 8% slower); the batch is split
 *    first, then each sequence in equal pieces;
 *  - hidden (N of fc, K of fcproj): about 2 fc tasks per worker (hidden tiles =
 *    ceil(2 nworkers / row tiles)), no more since each hidden tile is a k step of fcproj;
 *  - vocab: >= 2 lm-head tasks per worker and tiles of <= 8192 columns;
 *  - hidden and vocab tiles are >= 128 columns, >= 100 MFLOP a task, rounded up to a
 *    multiple of 64; a tile covering the whole dimension is returned as 0.
 * For GPT-2 124M at B=4, T=64 on 2 workers this gives batch 2, hidden 1536, vocab 7232
 * (7 tiles), the rest 0 -- close to the hand-picked tiling of bench/RESULTS.md; small
 * models (e.g. C = 24) get one tile everywhere. Every value is a valid tiling of the model.
 * Errors (message through nnt_ctx_last_error(NULL)): NNT_E_INVAL for a NULL cfg or out, a
 * configuration or B, T that nnt_gpt2_create would reject, nworkers < 1 (*out untouched). */
int nnt_gpt2_auto_tiling(const nnt_gpt2_config *cfg, int64_t B, int64_t T, int nworkers,
                         nnt_gpt2_tiling *out);
/* The tiling when ngpus >= 1 CUDA workers run the model: a GPU does a 100 MFLOP task in well
 * under a microsecond while StarPU spends several on each task, so a GPU task must be as
 * large as memory allows. Rows (B*T) are cut into ngpus row tiles (at least 64 rows each;
 * the batch first, then the sequence) and every other dimension stays whole, except the
 * vocabulary, cut into tiles of at most 8192 columns (rounded up to a multiple of 64) to
 * bound the logits tile: for GPT-2 at B = 8, T = 1024 on one GPU, one (8192, 7232) tile of
 * logits (237 MB) per vocab tile. The CPU workers are then left the small tasks that only
 * have CPU code; a dmda-family scheduler (nnt_ctx_create's default with GPUs) keeps the
 * large ones on the GPUs. Errors as nnt_gpt2_auto_tiling (ngpus < 1 instead of nworkers). */
int nnt_gpt2_auto_tiling_gpu(const nnt_gpt2_config *cfg, int64_t B, int64_t T, int ngpus,
                             nnt_gpt2_tiling *out);


/* A model for batches of B sequences of T <= maxT tokens: parameters (uninitialised),
 * gradients (zero), activations. tiling may be NULL (one tile per dimension). */
int nnt_gpt2_create(nnt_ctx *ctx, const nnt_gpt2_config *cfg, const nnt_gpt2_tiling *tiling,
                    int64_t B, int64_t T, nnt_gpt2 **out);
/* Release everything (waits for pending work). NULL is accepted. */
void nnt_gpt2_destroy(nnt_gpt2 *m);
void nnt_gpt2_get_config(const nnt_gpt2 *m, nnt_gpt2_config *cfg);
/* Activation recompute (enable != 0) or not (0, the default). With recompute each block
 * keeps only its output (B, T, C) for the backward; one set of block activations is shared
 * by all layers and the backward recomputes each block's forward from its input before
 * differentiating it: about one more forward pass of work, and activation memory of
 * L + 16 instead of 17 L tensors of (B, T, C) size (a (B, T, 4C) counts 4). Results are
 * bit-identical (same kernels, same tiling). Per-layer activations other than "residual3"
 * (nnt_gpt2_activation) then hold the last block computed. NNT_E_STATE between a forward
 * with targets and its backward. */
int nnt_gpt2_set_recompute(nnt_gpt2 *m, int enable);

/* nnt_gpt2_create with the configuration of an llm.c fp32 checkpoint (version 3), then its
 * weights (wte's padding rows dropped). */
int nnt_gpt2_load_llmc(nnt_ctx *ctx, const char *path, const nnt_gpt2_tiling *tiling,
                       int64_t B, int64_t T, nnt_gpt2 **out);
/* nnt_gpt2_create with cfg, then the weights of a Hugging Face GPT2LMHeadModel safetensors
 * file (names with or without the "transformer." prefix; F32, F16, BF16 or F64; Conv1D
 * weights (in, out) transposed to llm.c's (out, in); a tied lm_head.weight is not read).
 * Every tensor must have the shape cfg implies (NNT_E_FORMAT naming it otherwise); cfg is
 * needed because a safetensors file does not give the number of heads. */
int nnt_gpt2_load_safetensors(nnt_ctx *ctx, const char *path, const nnt_gpt2_config *cfg,
                              const nnt_gpt2_tiling *tiling, int64_t B, int64_t T,
                              nnt_gpt2 **out);
/* Write the parameters as an llm.c fp32 checkpoint (wte padded to Vp with zero rows). */
int nnt_gpt2_save_llmc(nnt_gpt2 *m, const char *path);
/* Write the parameters as a Hugging Face GPT2LMHeadModel safetensors file, F32, metadata
 * {"format": "pt"}: "transformer.wte.weight" (V, C), "transformer.wpe.weight" (maxT, C),
 * "transformer.h.<l>.ln_1.weight" ... (Conv1D weights c_attn, c_proj, c_fc, mlp.c_proj in
 * HF's (in, out) layout), "transformer.ln_f.weight" / ".bias"; no lm_head.weight (tied).
 * Streamed one layer's tensor at a time (host memory: one tensor), written through
 * temp + fsync + rename. nnt_gpt2_load_safetensors reads it back bit for bit. */
int nnt_gpt2_save_safetensors(nnt_gpt2 *m, const char *path);

/* ---- training state ------------------------------------------------------------------
 * One safetensors file (F32 tensors, written through temp + fsync + rename: a crash leaves
 * the previous file or the complete new one) holding, per llm.c parameter <name> in llm.c
 * layout (wte unpadded (V, C), per-layer ones (L, ...), e.g. qkvw (L, 3C, C)):
 *   "param.<name>"   the weights
 *   "adam_m.<name>"  AdamW first moments  (zeros when the model has taken no step yet)
 *   "adam_v.<name>"  AdamW second moments
 * and the metadata (decimal strings unless said otherwise):
 *   "format" = "nnt-gpt2-train-state", "format_version" = "1",
 *   "V", "Vp", "maxT", "L", "NH", "C"   the configuration,
 *   "step"      AdamW steps done (nnt_gpt2_step_count),
 *   "data_pos"  the user's position in the training data,
 *   "rng"       the user's RNG state as "[s0,s1,s2,s3]",
 *   "options"   the user's free-form string (e.g. the training options as JSON),
 *   "meta_checksum"  16 lowercase hex digits: 64-bit FNV-1a (h = (h ^ x) * 0x100000001b3
 *               from 0xcbf29ce484222325) over the bytes of the metadata values above, in
 *               that order, each followed by a NUL byte,
 *   "data_checksum"  the same over the tensors in file order, x = each float's 32 bits.
 * Tensor order in the file: all param.*, then adam_m.*, then adam_v.*, each in llm.c order.
 * Gradients and activations are not saved. */
typedef struct nnt_gpt2_train_state {
    uint64_t data_pos;    /* position in the training data (the user's meaning)          */
    uint64_t rng[4];      /* RNG state                                                    */
    char *options;        /* NUL-terminated UTF-8 or NULL (saved as ""); after a load,
                             malloc'd: release it with nnt_gpt2_train_state_clear         */
} nnt_gpt2_train_state;

/* Save the weights, the moments, the step counter and *st (NULL: zeros and ""). Host memory:
 * one layer's slice of one parameter; the tensors are copied to the host twice (the data
 * checksum goes into the header, which precedes the data). */
int nnt_gpt2_save_state(nnt_gpt2 *m, const char *path, const nnt_gpt2_train_state *st);
/* Restore a state saved by nnt_gpt2_save_state into m, whose configuration (V, maxT, L, NH,
 * C) must be the file's (NNT_E_SHAPE naming both otherwise; B, T and the tiling may
 * differ): weights, moments (created if m has none yet), the step counter; gradients are
 * set to zero. st (may be NULL) gets the user section; its options are malloc'd. The whole
 * file is checked (structure, metadata, checksums) before m is touched: a malformed,
 * truncated or corrupted file is NNT_E_FORMAT and leaves m and st unchanged (only an I/O
 * error while copying, e.g. the file shrinking meanwhile, can leave m partly loaded). */
int nnt_gpt2_load_state(nnt_gpt2 *m, const char *path, nnt_gpt2_train_state *st);
/* The configuration stored in a state file (to create a model to load it into); cfg's
 * padded_vocab is the saved model's Vp. Checks the metadata only, not the tensors. */
int nnt_gpt2_state_config(nnt_ctx *ctx, const char *path, nnt_gpt2_config *cfg);
/* free(st->options), zero *st. NULL is accepted. */
void nnt_gpt2_train_state_clear(nnt_gpt2_train_state *st);

/* ---- parameters by llm.c name --------------------------------------------------------
 * name: wte wpe ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb
 * lnfw lnfb. The host buffer holds the whole llm.c tensor in llm.c layout, e.g. qkvw
 * (L, 3C, C), except wte: (V, C), unpadded. count must be its number of floats
 * (nnt_gpt2_param_numel). Export waits for the copy; import is done when it returns. */
enum { NNT_GPT2_PARAMS = 0, NNT_GPT2_GRADS = 1 };
int nnt_gpt2_param_numel(const nnt_gpt2 *m, const char *name, int64_t *numel);
int nnt_gpt2_export(nnt_gpt2 *m, int which, const char *name, float *dst, size_t count);
int nnt_gpt2_import(nnt_gpt2 *m, const char *name, const float *src, size_t count);
/* Number of parameters (V, not Vp, rows of wte). */
int64_t nnt_gpt2_num_params(const nnt_gpt2 *m);
/* The tensors of one parameter piece: name as above, layer (0 for wte, wpe, lnfw, lnfb),
 * piece 0, 1, 2 = q, k, v of qkvw / qkvb (0 for the others). value / grad (either may be
 * NULL) get the model's own tensors (shapes as in the layout above; destroyed with the
 * model). NNT_E_INVAL for an unknown name or a layer or piece outside the model. */
int nnt_gpt2_param_tensors(nnt_gpt2 *m, const char *name, int64_t layer, int piece,
                           nnt_tensor **value, nnt_tensor **grad);
/* The configuration of an llm.c checkpoint (its header only: to choose a tiling before
 * nnt_gpt2_load_llmc). NNT_E_FORMAT / NNT_E_IO as nnt_gpt2_load_llmc. */
int nnt_gpt2_llmc_config(nnt_ctx *ctx, const char *path, nnt_gpt2_config *cfg);

/* ---- training ------------------------------------------------------------------------ */

/* Forward pass on tokens (B, T) NNT_INT32 (any tiling: copied into the model's tiling).
 * targets (B, T) NNT_INT32 or NULL: with targets, *loss gets the mean cross-entropy over
 * the positions whose target is not NNT_GPT2_IGNORE (waits for it; loss NULL: no wait for
 * the forward's work, nnt_gpt2_loss gives it later), and the activations for
 * nnt_gpt2_backward are kept. Token ids must be in [0, V), targets in [0, V) or
 * NNT_GPT2_IGNORE (the targets are checked on the host). */
int nnt_gpt2_forward(nnt_gpt2 *m, nnt_tensor *tokens, nnt_tensor *targets, double *loss);
/* The mean loss of the last forward with targets (waits for it); still valid after a
 * backward and after forwards without targets. NNT_E_STATE before any. */
int nnt_gpt2_loss(nnt_gpt2 *m, double *loss);
/* Gradients of the last forward's mean loss, ADDED to the gradients (NNT_E_STATE unless the
 * last forward had targets; it consumes them: a second backward needs a new forward). */
int nnt_gpt2_backward(nnt_gpt2 *m);
/* Set every gradient to zero. */
int nnt_gpt2_zero_grad(nnt_gpt2 *m);
/* Drop the gradients instead of zeroing them: the next backward writes each one instead of
 * adding to it (the same values as after nnt_gpt2_zero_grad), and until then the weight
 * matrices' and biases' gradients are unreadable (NNT_E_STATE); the LayerNorm and wpe
 * gradients are zero-filled. Under a memory budget the dropped values are neither kept nor
 * written to disk. */
int nnt_gpt2_clear_grad(nnt_gpt2 *m);
/* Sum of squares of all gradients (for the global norm). */
int nnt_gpt2_grad_sumsq(nnt_gpt2 *m, double *sumsq);

/* One AdamW step over all parameters (PyTorch semantics, bias corrections, decoupled decay,
 * grad_scale for clipping). opts->weight_decay applies to the matrices only -- wte (also the
 * lm_head), wpe, qkvw, attprojw, fcw, fcprojw -- never to biases or LayerNorm parameters;
 * opts->decoupled must be 1. The step counter starts at 1 and the moments are created
 * (zero) on the first call. */
int nnt_gpt2_adamw_step(nnt_gpt2 *m, const nnt_adam_options *opts);
int64_t nnt_gpt2_step_count(const nnt_gpt2 *m);

/* ---- text generation -----------------------------------------------------------------
 * How the next token is picked from the logits l (V) of the last position. */
typedef struct nnt_gpt2_sampling {
    double temperature;   /* 0: greedy (argmax, lowest id on ties; top_k and seed unused);
                             > 0: sample from softmax(l / temperature)                   */
    int64_t top_k;        /* > 0: only the top_k largest logits (ties: lower id first);
                             0 (or >= V): all                                           */
    uint64_t seed;        /* PRNG seed: xoshiro256** seeded through splitmix64, one
                             uniform draw u in [0, 1) per sampled token; the token is the
                             first candidate (top-k: by logit, then id; all: by id) whose
                             running sum of probabilities exceeds u                     */
} nnt_gpt2_sampling;

/* Append ngen tokens to prompt (nprompt >= 1 ids in [0, V)) and write them, without the
 * prompt, to out[0..ngen). s NULL: greedy.
 * Each new token is one nnt_gpt2_forward (no targets) on (B, T): row 0 holds the last
 * w = min(T, n) tokens of the sequence so far (n tokens), at positions 0..w-1; the rest of
 * row 0 and the other rows are token 0 and their outputs are ignored. The logits of
 * position w-1 are picked out on the device (a GEMM with a one-hot (1, B, T) selector, exact)
 * so that V floats come back per token, not (B, T, V); temperature, top-k, softmax and the
 * draw are done on the host in double. There is no KV cache: the cost is ngen forwards of
 * the full (B, T) whatever the prompt length, i.e. O(ngen * B * T) token computations where
 * a cached decoder needs O(ngen). While nprompt + ngen - 1 <= T (every forward sees the
 * whole sequence) this is exact GPT-2 decoding -- greedy equals Hugging Face's generate;
 * beyond that the window slides (positions restart at 0, as llm.c and nanoGPT crop to the
 * block size).
 * Deterministic: the same weights, tiling, B, T, prompt and *s give the same tokens.
 * Training state -- weights, gradients, AdamW moments, the step counter -- is untouched, but
 * every activation (the "logits" of nnt_gpt2_activation included) is overwritten and a
 * pending nnt_gpt2_backward is cancelled (NNT_E_STATE until the next forward with targets).
 * ngen == 0 returns at once (out may then be NULL). Errors: NNT_E_INVAL for a NULL model,
 * prompt or out, nprompt < 1, ngen < 0, a prompt id outside [0, V), a temperature that is
 * negative or not finite, top_k < 0 (nothing is written to out); NNT_E_STATE if a logit is
 * not finite (diverged weights; out holds the tokens generated before). */
int nnt_gpt2_generate(nnt_gpt2 *m, const int32_t *prompt, int64_t nprompt, int64_t ngen,
                      const nnt_gpt2_sampling *s, int32_t *out);

/* ---- activations, for tests and debugging ---------------------------------------------
 * The tensor holding an activation of the last forward, by llm.c-like name: "encoded",
 * "h<l>.ln1", "h<l>.ln1_mean", "h<l>.ln1_rstd", "h<l>.q", "h<l>.k", "h<l>.v" (B, NH, T, hd),
 * "h<l>.atto" (B, NH, T, hd), "h<l>.att_lse" (B, NH, T), "h<l>.atty" (B, T, NH, hd),
 * "h<l>.residual2", "h<l>.ln2", "h<l>.ln2_mean", "h<l>.ln2_rstd", "h<l>.fch" (pre-GELU),
 * "h<l>.fch_gelu", "h<l>.residual3", "lnf", "lnf_mean", "lnf_rstd", "logits" (until
 * backward overwrites it with its gradient), "losses" (B, T). NULL if unknown. */
/* Storage of the activations only products read (ln1, atty, ln2, fch_gelu, lnf): a forward
 * with NNT_PRECISION_BF16 stores them as NNT_BF16 (its products round them to bf16 anyway,
 * so the results are the same bits at half their memory) and gives the products bf16 copies
 * of the weight matrices, converted from the fp32 masters at the start of the forward;
 * other precisions store them as NNT_FP32 and use no copies. Changing it recreates the
 * activations at the next forward. keep != 0 keeps activations and weights float in every
 * precision: for tests that check the bf16 storage changes no bit. */
int nnt_gpt2_set_float_operands(nnt_gpt2 *m, int keep);
nnt_tensor *nnt_gpt2_activation(nnt_gpt2 *m, const char *name);

#endif
