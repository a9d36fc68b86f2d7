/* SPDX-License-Identifier: MIT */
/* nnt-train: declarations shared by its source files (command-line options). Only the
 * public API of nnt.h is used. */
#ifndef NNT_TRAIN_H
#define NNT_TRAIN_H

#include <nnt.h>

#include "cli.h"

#include <stdint.h>
#include <stdio.h>

#define TRAIN_DEFAULT_DATA "/usr/share/common-licenses"
#define TRAIN_DEFAULT_OUT "nnt-train-out"
#define TRAIN_CPU_CORE_GFLOPS 87.5   /* BLIS sgemm on one core of the reference machine */

/* Everything the command line can set: the run's description, loop and optimizer options
 * as the library takes them (nnt_trainer_open), and the program's own. Integers that are -1
 * (reals < 0) after parsing were not given and get their documented defaults in
 * train_opts_resolve (the learning rates in nnt_trainer_open). */
typedef struct train_opts {
    nnt_run_config run;                      /* data, validation, tokenizer, precision,
                                                recompute, fine-tuning (its pointers are set
                                                when the run is opened)                    */
    nnt_trainer_options loop;                /* batches, steps, order, validation, checkpoints */
    nnt_optim_options optim;
    /* model */
    const char *model;                       /* preset name or NULL                      */
    int64_t layers, channels, heads, kv_heads, hidden, vocab, context;
    int64_t head_dim;                        /* --head-dim (Llama family), -1: not given  */
    int qk_norm;                             /* --qk-norm (Llama family: Qwen3's norms)   */
    int init;                                /* --init given                              */
    const char *load_llmc, *load_safetensors, *load_hf;
    /* tiling overrides: 0 automatic, -1 one tile, > 0 tile size */
    nnt_tiling tiling;
    /* runtime */
    int64_t cpus, gpus, mem_gpu, mem_cpu, swap_size;
    const char *sched, *swap_dir;
    int distribute;                          /* --distribute: nnt_distribution, -1 = none
                                                (sharded when started as several ranks)   */
    int release_weights;                     /* --release-weights                         */
    /* fine-tuning: LoRA adapters (PEFT's format) */
    int64_t lora_rank;                       /* --lora-rank R; -1: not given              */
    double lora_alpha, lora_dropout;         /* < 0: not given (8, 0)                     */
    const char *lora_targets;                /* --lora-targets LIST                       */
    int lora_dora;                           /* --lora-dora                               */
    const char *save_peft;                   /* --save-peft DIR                           */
    const char *label_names;                 /* --label-names LIST: a classifier's labels' */
    int merge;                               /* --merge: adapters into the weights at the end */
    int quantize;                            /* --quantize none|nf4 (index)               */
    /* outputs */
    const char *out_dir, *save, *resume, *trace;
    int64_t stop_after;
    int save_weights, save_llmc, no_save;
    int overwrite;                           /* --overwrite: replace a previous run's files */
    int save_best;                           /* --save-best: OUT/best.safetensors         */
    const char *save_hf;                     /* --save-hf DIR                             */
    const char *save_hf_shard_size;          /* --save-hf-shard-size SIZE (text)          */
    uint64_t save_hf_shard_bytes;            /* its value in bytes; 0: one file           */
    /* sampling */
    int64_t sample, top_k;
    const char *prompt;
    double temperature;
    /* prompt/answer records (--data / --val-data FILE.jsonl; nnt-tokenize --jsonl's) */
    int jsonl_template;                      /* --chat-template: index in cli_chat_templates */
    int jsonl_loss;                          /* --loss: -1 unset, 0 answers, 1 all        */
    int jsonl_pack;                          /* --pack: several whole examples a row      */
    int jsonl_too_long;                      /* --too-long: 0 cut (default), 1 refuse     */
    const char *jsonl_chat_date;             /* --chat-date                               */
    const char *jsonl_tokenizer_config;      /* --tokenizer-config                        */
    /* reporting */
    int quiet, print_loss;
    double peak_gflops;
    unsigned char given[128];                /* by option table entry: on the command line */
    char *kept[24];                          /* values restored by --resume (owned)       */
    int nkept;
} train_opts;

/* Parse argv into *o (defaults first). Returns 0 to go on, 1 when --help or --version was
 * printed (exit 0), 2 after printing a one-line error (exit 2). */
int train_opts_parse(int argc, char **argv, train_opts *o);
/* Fill the defaults that depend on other options (warmup, validation). Returns 0 or 2
 * after printing an error about an inconsistent combination. */
int train_opts_resolve(train_opts *o);
/* Whether the command line asks for LoRA adapters (--lora-*). */
int train_lora_asked(const train_opts *o);
/* Whether --dpo-loss is one of unpaired rows (kto, apo_zero_unpaired). */
int train_loss_unpaired(const train_opts *o);
/* Whether the command line gave option name (without "--"). */
int train_opts_given(const train_opts *o, const char *name);
/* --resume: each option that checkpoints record (the table's RES entries: members of the
 * options string the library saves, and nnt-train's "sample") and that the command line does
 * not give takes its saved value, so that `nnt-train --resume FILE` continues that run; the
 * data options only when none of them is given, the tokenizer's only when none of them nor
 * --load-hf is. The changed ones are listed in names ("--name value", a flag "--name"),
 * the tokenizer's not. 0, or 2 after an error about a value. */
int train_opts_restore(train_opts *o, const char *saved, char *names, size_t cap);
/* The value of key in a checkpoint's options string (nnt_options_get) as text, malloc'd;
 * NULL when absent (or longer than 4095 bytes, or out of memory). */
char *train_saved(const char *saved, const char *key);
/* The same as an integer; -1 when absent. */
int64_t train_saved_int(const char *saved, const char *key);
/* Free what train_opts_restore kept. */
void train_opts_free(train_opts *o);
/* Name of a choice value, e.g. train_choice_name("optim", NNT_OPTIM_SGD) = "sgd". */
const char *train_choice_name(const char *option, int value);
/* Print an error "nnt-train: ..." on stderr and return 2 (usage errors). */
#define train_usage_error(...) cli_error("nnt-train", __VA_ARGS__)

/* Every family's presets (nnt_model_family_info), "tiny, gpt2 (GPT-2); llama-tiny (Llama)";
 * col > 0: wrapped for --help, the first line starting at column col, the others at 24. */
void train_preset_list(char *buf, size_t cap, int col);

#endif /* NNT_TRAIN_H */
