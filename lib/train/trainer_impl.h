/* SPDX-License-Identifier: MIT */
/* The trainer's state (internal), shared by its files: trainer.c (the loop, the log),
 * record.c (the options string of its checkpoints, the checks of a resume), keep.c (a
 * previous run's files kept) and run.c (a run built from its description). */
#ifndef NNT_TRAIN_TRAINER_IMPL_H
#define NNT_TRAIN_TRAINER_IMPL_H

#include "train.h"
#include "../internal.h"
#include "../io/io.h"

#include <signal.h>
#include <stdio.h>

#define NNT_TRAINER_MAGIC 0x6e6e7472u /* "nntr" */

/* The targets of a micro-batch that do not count in the loss (tr->mask 0) become the
 * cross-entropy's ignore index: -1, the "loss" child's of every model (lib/models). */
#define NNT_TRAINER_IGNORE (-1)

struct nnt_trainer {
    unsigned magic;
    nnt_ctx *ctx;
    nnt_layer *model;
    nnt_optim *opt;
    nnt_data *data;                /* training tokens (NULL: validation only)              */
    nnt_trainer_options o;         /* strings below are owned copies                       */
    /* nnt_trainer_open's trainers own what they were built from (destroyed with them) */
    int owns;
    nnt_tokenizer *tok;
    int tok_kind;                  /* its nnt_tokenizer_kind; AUTO: none                     */
    nnt_data *val_owned;           /* the held-out tokens of run.val_data                   */
    int64_t ntokens;               /* tokens trained on: the data's first ntokens          */
    int64_t held_out;              /* the data's tokens after those                        */
    uint64_t nrows;                /* shuffle: sequences of T + 1 tokens at row * T        */
    nnt_tensor *tokens, *targets;  /* (B, T) int32                                         */
    int masked;                    /* the training data has a loss mask                    */
    int64_t labels;                /* a classifier's num_labels (>= 2): the counted targets
                                      are labels, checked below it; 0: a language model     */
    int64_t values_k;              /* a classifier trained on values: its num_labels, the
                                      values each row of the data carries; 0: none         */
    float *values;                 /* (B, values_k) the micro-batch's rows' values          */
    int values_problem;            /* its NNT_PROBLEM_REGRESSION or NNT_PROBLEM_MULTI_LABEL */
    uint8_t *mask;                 /* (B*T) which targets of a micro-batch count           */
    int32_t *kept;                 /* (B*T) the targets, those not counting ignored        */
    int32_t *window;               /* (B*T + 1) consecutive tokens                         */
    nnt_tensor *positions;         /* packed data (example starts): (B, T) int32 positions of
                                      the inputs in their examples (made at first use)     */
    int32_t *pos_host;             /* (B*T) the same on the host; (B*T) bytes of starts after */
    int32_t *rows;                 /* shuffle: (B, T) inputs, (B, T) targets, (T + 1) a row */
    uint64_t data_pos;             /* next window's start (< ntokens); shuffle: rows read   */
    uint64_t rng[4];
    int64_t done;                  /* updates done when created or resumed                 */
    int64_t until;                 /* the last step of the run in progress                 */
    double best_val;               /* lowest validation loss saved to best_checkpoint      */
    double flops_per_token;
    int64_t params, frozen;        /* elements of the model's parameters, of frozen ones    */
    int base_known;                /* NNT_BASE_SUM_* bits: the checksums computed           */
    uint64_t base_sum;             /* checksum of the frozen parameters, words kind          */
    uint64_t base_sum_fnv;         /* the same, byte kind (resuming older checkpoints)       */
    int tracing;
    volatile sig_atomic_t stop;    /* nnt_trainer_request_stop                             */
    volatile sig_atomic_t save;    /* nnt_trainer_request_save                             */
    volatile sig_atomic_t stop_signal;  /* the signal that asked the stop (signals.c)      */
    volatile sig_atomic_t save_refused; /* SIGUSR1 without a checkpoint path               */
    int stopping;                  /* the ranks' agreed stop, at the last step boundary    */
    double peak;                   /* the MFU's peak (peak_flops or measured)              */
    int peak_measured;
    int peak_low;                  /* a step ran faster than the measured peak             */
    int small_tasks_said;          /* warn_small_tasks has warned                          */
    int no_targets_said;           /* a step without a counted target was warned of        */
    int rank;                      /* this process's rank: only rank 0 writes the log      */
    int logs_open;                 /* log_dir's files opened (at the first step)           */
    FILE *csv, *val_csv;           /* train.csv, val.csv                                   */
    int mem_nodes;                 /* memory nodes in train.csv's columns                  */
    nnt_train_point *curve, *val_curve;   /* (ncurve), (nval): the log's points         */
    int64_t ncurve, cap_curve, nval, cap_val;
    int64_t nvalidations, last_val_step, low_val_step;
    double last_val, low_val;
    int64_t stale;                 /* validations in a row without an improvement (early_stop's
                                      rule), those before a resume included                */
    int vals_resumed;              /* the figures above read from the resumed checkpoint (else
                                      counted again from log_dir's val.csv, if any)        */
    int64_t early_stop_step;       /* the step whose validation stopped the run; 0: none   */
    int smoothing_set;             /* label_smoothing set on the model: put back at destroy */
    double smoothing_before;       /* the model's label smoothing before                  */
    int noise_set;                 /* neftune_alpha set on the model: put back at destroy   */
    double noise_before;           /* the model's NEFTune alpha and seed before             */
    uint64_t noise_seed_before;
    double last_val_accuracy;      /* a classifier's last validation's accuracy             */
    double last_val_exact, last_val_f1; /* a multi-label one's exact match and micro F1      */
    double last_val_mae;           /* a regression's last validation's mean absolute error  */
    char *kept_previous;           /* keep_previous: where another run's files went        */
    char *resumed_options;         /* the resumed checkpoint's options string (or NULL)    */
    int checkpoint_saved;          /* a save to the checkpoint option's path succeeded     */
    int traced;                    /* the trace option's files were written                */
    int tiling_known;              /* nnt_trainer_open's: tiling is the model's            */
    nnt_tiling tiling;
    /* this trainer's steps and validations (nnt_trainer_info) */
    int64_t steps_run, validations_run;
    double ms_rest, last_loss, validation_s;   /* steps' time without the first             */
    double ms_sum, loss_ema, run_s;   /* steps' time, the smoothed loss, time in run/step  */
    struct nnt_dpo *dpo;           /* o.dpo_beta > 0: the pairs and their reference (dpo.c) */
};

/* Text being built in buf (cap bytes) by nnt_text_add (text.c): fields are added in order;
 * with width > 0, once one would reach column width, neither it nor any later one is. */
typedef struct nnt_text {
    char *buf;
    size_t cap, n;
    int width, full, overflow;
} nnt_text;
void nnt_text_add(nnt_text *t, const char *fmt, ...) NNT_PRINTF(2, 3);
/* nnt_trainer_text's MODEL (text.c), SUMMARY, WARNINGS and FILES (summary.c). */
void nnt_trainer_text_model(const nnt_trainer *tr, nnt_text *t);
void nnt_trainer_text_summary(const nnt_trainer *tr, nnt_text *t);
/* The tiling (tr->tiling, tiling_known) as "batch B, seq S, ..., heads H", no head_dim */
void nnt_trainer_text_tiling(const nnt_trainer *tr, nnt_text *t);
void nnt_trainer_text_warnings(const nnt_trainer *tr, nnt_text *t);
void nnt_trainer_text_files(const nnt_trainer *tr, nnt_text *t);

/* The signal handlers of nnt_trainer_handle_signals put back when tr holds them
 * (signals.c; nnt_trainer_destroy calls it). */
void nnt_trainer_release_signals(const nnt_trainer *tr);

/* The held-out tokens' source: val_data, else the training data; NULL without validation
 * (trainer.c). */
nnt_data *nnt_trainer_val_source(const nnt_trainer *tr);
/* Whether the held-out tokens of val (NULL: none) are read in whole rows, B T tokens a
 * batch (a row's T + 1-th token never counts): the pairs of DPO and reward models (pairs),
 * or data laid out in rows (nnt-tokenize --seq); else windows of B T + 1 (trainer.c). */
int nnt_held_out_in_rows(int pairs, const nnt_data *val);
/* NNT_OK for a trainer (and its context), else a failure naming fn (trainer.c). */
int nnt_trainer_check(const nnt_trainer *tr, const char *fn);
/* The caller's trainer options (NULL: NNT_TRAINER_OPTIONS_INIT) into *o, errors naming fn;
 * a program of an older release passes the size they had then and gets the defaults of the
 * fields added since (nnt_trainer_create and nnt_trainer_open). */
int nnt_trainer_read_options(const char *fn, const nnt_trainer_options *user,
                             nnt_trainer_options *o);
/* The optimizer's updates done (trainer.c). */
int64_t nnt_trainer_steps(const nnt_trainer *tr);
/* 1 when each step's last backward updates the parameters (trainer.c). */
int nnt_trainer_updates_in_backward(const nnt_trainer *tr);
/* Member key of an options string (a checkpoint's, or the bare members nnt_trainer_open
 * records) into buf, "" when absent; as a number, dflt when absent (record.c). */
const char *nnt_trainer_option(const char *options, const char *key, char *buf, size_t cap);
double nnt_trainer_option_number(const char *options, const char *key, double dflt);
/* The options string of a checkpoint of step into *out, malloc'd (record.c). */
int nnt_trainer_options_string(nnt_trainer *tr, int64_t step, char **out);
/* What a model source names as its tokenizer (source.c): *kind NNT_TOKENIZER_AUTO when
 * nothing, else its kind and its files (files[0] a tokenizer.json, files[1] and [2] GPT-2's
 * vocab.json and merges.txt; malloc'd, the caller frees them). */
int nnt_source_tokenizer(const char *source, int *kind, char *files[3]);
/* The tokenizer of that kind and those files (source.c). */
int nnt_source_tokenizer_open(int kind, char *const files[3], nnt_tokenizer **out);
/* keep_previous at creation (keep.c). */
int nnt_trainer_keep_previous(nnt_trainer *tr);

/* The checksum of the frozen parameters (lib/train/record.c), of a kind; each kind computed
 * at its first call (nnt_trainer_create asks for the words kind before any forward). */
#define NNT_BASE_SUM_WORDS 1   /* "base_checksum2": nnt_hash_words of each parameter     */
#define NNT_BASE_SUM_FNV 2     /* "base_checksum": FNV-1a over the bytes (older checkpoints) */
int nnt_trainer_base_checksum(nnt_trainer *tr, int kind, uint64_t *sum);

/* Direct preference optimization (dpo.c), with o.dpo_beta > 0 (tr->dpo; else NULL). */
typedef struct nnt_dpo nnt_dpo;
/* TRL's name of an nnt_dpo_loss ("sigmoid", "ipo", "hinge"; "cpo", "simpo", "orpo"). */
const char *nnt_dpo_loss_name(int loss);
/* 1 for the losses without a reference (NNT_DPO_CPO, _SIMPO, _ORPO), else 0. */
int nnt_dpo_loss_free(int loss);
/* 1 for a loss of unpaired rows (NNT_DPO_KTO, _APO_ZERO_UNPAIRED). */
int nnt_dpo_loss_unpaired(int loss);
/* An unpaired row's term of o's loss (o->dpo_loss KTO or APO-zero, dpo_beta, the weights)
 * from its log ratio lr, the micro-batch's kl (KTO) and its label; *dlr its derivative by lr
 * (kl held). */
double nnt_dpo_row_loss(const nnt_trainer_options *o, double lr, double kl, int desirable,
                        double *dlr);
/* What tr->dpo trains, for a line: "DPO", "CPO", "SimPO", "ORPO" or "reward model". */
const char *nnt_dpo_kind(const nnt_trainer *tr);
/* A classifier trained on values: "regression" or "multi-label" (the messages' name) */
const char *nnt_trainer_values_kind(const nnt_trainer *tr);
/* 1 for a multi-label classifier (trained on values in [0, 1], one a label): its
 * validations report label accuracy, exact match and micro F1 */
int nnt_trainer_multi_label(const nnt_trainer *tr);
/* 1 when the trainer's validation reports an accuracy: a classifier of one label a text
 * (its largest logit), or a multi-label one (each label's probability above 0.5 when its
 * value is: the label accuracy) */
int nnt_trainer_has_accuracy(const nnt_trainer *tr);
/* TRL's aot and aot_unpaired (o->dpo_loss, dpo_beta, dpo_label_smoothing) on n pairs together:
 * p[2j], p[2j + 1] pair j's chosen and rejected log-likelihoods under the policy, r[2j],
 * r[2j + 1] under the reference (NULL: 0); two values of each pair, x and y, sorted apart (by
 * value, then pair: aot x = p_c - p_r, y = r_c - r_r; aot_unpaired x = p_c - r_c, y = p_r -
 * r_r); term[j] the term of pair j's position in x's order, dc[j] and dr[j] the derivatives of
 * the n terms' sum by p[2j] and p[2j + 1]; ranks: 2 n entries of scratch. */
typedef struct nnt_dpo_ranked {
    double v;
    int64_t j;
} nnt_dpo_ranked;
void nnt_dpo_sorted_terms(const nnt_trainer_options *o, const double *p, const double *r,
                          int64_t n, nnt_dpo_ranked *ranks, double *term, double *dc,
                          double *dr);
/* A pair's term of o's loss (o->dpo_loss, dpo_beta, simpo_gamma, dpo_label_smoothing,
 * discopop_tau; not aot's) from its rows' log ratios lc, lr (summed over their counted
 * targets, nc and nr of them, >= 1 for SimPO and ORPO; the reference-free losses: the
 * log-likelihoods); *dc, *dr its derivatives by lc and lr. */
double nnt_dpo_pair_loss(const nnt_trainer_options *o, double lc, double lr, int64_t nc,
                         int64_t nr, double *dc, double *dr);
/* The loss and its parameters in words ("SimPO, beta 2 (TRL's CPOTrainer, ...)"), snprintf's
 * return. */
int nnt_dpo_describe(const nnt_trainer_options *o, char *buf, size_t cap);
/* Checks the data and allocates tr->dpo (nothing with dpo_beta 0 and no reward model). */
int nnt_dpo_prepare(nnt_trainer *tr, const char *fn);
void nnt_dpo_free(nnt_trainer *tr);
/* The pairs a micro-batch moves the data position by (B / 2). */
uint64_t nnt_dpo_advance(const nnt_trainer *tr);
/* The training pairs (unpaired: rows) the data position counts, modulo. */
uint64_t nnt_dpo_units(const nnt_trainer *tr);
/* The reference log-likelihoods of every pair, unless known already (recorded, or computed
 * by an earlier call). */
int nnt_dpo_reference(nnt_trainer *tr);
/* A step's micro-batches (the reference first if not known yet): r's loss and dpo_*. */
int nnt_dpo_step(nnt_trainer *tr, int64_t step, nnt_trainer_report *r);
/* A validation's pairs: r's loss and dpo_*. */
int nnt_dpo_validate(nnt_trainer *tr, nnt_trainer_report *r);
/* The options string's DPO members (", \"dpo_beta\": ..."; *out NULL without DPO). */
int nnt_dpo_members(const nnt_trainer *tr, char **out);
/* The reference of a checkpoint's options string (when it records one). */
int nnt_dpo_resume(nnt_trainer *tr, const char *fn, const char *path, const char *options);

#endif
