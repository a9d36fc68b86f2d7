/* SPDX-License-Identifier: MIT */
/* nnt-train: command-line options. One table gives each option's name, type, destination,
 * range, default and help lines: parsing, --help, the defaults, and what a checkpoint records
 * and --resume restores all come from it. */
#include "train.h"
#include "cli.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Flags of an option (the program's own bits of cli_option.flags), for --resume. RES: it
 * takes the value the checkpoint records (the library records the run's description and
 * loop under the options' names with '_' for '-'; nnt-train adds "sample") unless the command
 * line gives it; DATA: one of the data options, restored only when none of them is given;
 * TOK: one of the tokenizer's, restored only when none of them nor --load-hf is given, and
 * not listed. OPEN: the range's maximum is excluded. */
enum { RES = 1, DATA = 2, TOK = 4, OPEN = CLI_OPEN_MAX };

static const char *const data_formats[] = {"auto", "text", "llmc", "nanogpt", NULL};
static const char *const tokenizers[] = {"bytes", "bpe", "json", NULL};
static const char *const optimizers[] = {"adamw", "adam", "sgd", NULL};
static const char *const schedules[] = {"constant", "cosine", "linear", "wsd", NULL};
/* = nnt_decay_shape */
static const char *const decay_shapes[] = {"linear", "cosine", "1-sqrt", NULL};
static const char *const off_on[] = {"off", "on", NULL};
static const char *const precisions[] = {"fp32", "tf32", "bf16", NULL};   /* = nnt_precision */
/* = nnt_distribution */
static const char *const distributions[] = {"root", "sharded", "data", NULL};
static const char *const losses[] = {"answers", "all", "assistant", NULL};
static const char *const quantizes[] = {"none", "nf4", NULL};
static const char *const too_long[] = {"cut", "refuse", NULL};
/* = nnt_dpo_loss */
static const char *const dpo_losses[] = {"sigmoid", "ipo", "hinge", "cpo", "simpo", "orpo",
                                         "kto", "apo_zero_unpaired", "robust", "exo_pair",
                                         "nca_pair", "bco_pair", "sppo_hard", "apo_zero",
                                         "apo_down", "discopop", "sigmoid_norm", "aot",
                                         "aot_unpaired", NULL};

#define BIG CLI_BIG
#define CLI_OFF(f) offsetof(train_opts, f)
#define TILE(nm, f, help) OPT_INT(nm, f, -1, BIG, NULL, RES, "N", help)

static const cli_option table[] = {
    OPT_GROUP("Model (default: L 4, C 128, NH 4, context 128, the tokenizer's vocabulary):"),
    OPT_STR("model", model, NULL, 0, "NAME", "preset: %s"),
    OPT_INT("layers", layers, 1, 1e6, "-1", 0, "L", NULL),
    OPT_INT("channels", channels, 1, 1e7, "-1", 0, "C", NULL),
    OPT_INT("heads", heads, 1, 1e6, "-1", 0, "NH", NULL),
    OPT_INT("vocab", vocab, 1, 2147483647.0, "-1", 0, "V", NULL),
    OPT_INT("context", context, 1, 1e8, "-1", 0, "maxT", "override the preset"),
    OPT_INT("kv-heads", kv_heads, 1, 1e6, "-1", 0, "NKV", NULL),
    OPT_INT("hidden", hidden, 1, 1e8, "-1", 0, "F",
            "all but GPT-2: key/value heads (not GPT-NeoX;\nGPT-BigCode: 1 or NH), "
            "MLP inner size"),
    OPT_INT("head-dim", head_dim, 2, 1e5, "-1", 0, "D", NULL),
    OPT_FLAG("qk-norm", qk_norm, 0, "all but GPT-2: heads of D (default C / NH; StableLM,\n"
             "GPT-NeoX, GPT-BigCode, Falcon: C / NH only); RMSNorm\non each head of q and k "
             "(Qwen3; not Phi-3, Phi, Granite,\nStableLM, GPT-NeoX, StarCoder2, GPT-BigCode or "
             "Falcon)"),
    OPT_FLAG("init", init, 0, "fresh initialisation from --seed (default)"),
    OPT_STR("load-hf", load_hf, NULL, 0, "DIR", "start from a Hugging Face model directory "
            "(config.json and\nmodel.safetensors or sharded: GPT-2, Llama, Mistral, "
            "Qwen2,\nQwen3, SmolLM3, Gemma 3, Gemma 2, Mixtral, Qwen3-MoE,\nOLMoE, Qwen2-MoE, "
            "OLMo 2, OLMo 3, Phi-3, Phi-4-mini,\nPhi-1, Phi-1.5, Phi-2, Granite 3, StableLM 2 "
            "1.6B, StableLM 3B,\nPythia, RedPajama-INCITE, StarCoder2, StarCoder,\n"
            "SantaCoder, Falcon-7B, Falcon-40B)"),
    OPT_STR("load-llmc", load_llmc, NULL, 0, "FILE",
            "start from an llm.c fp32 checkpoint (gives the configuration)"),
    OPT_STR("load-safetensors", load_safetensors, NULL, 0, "FILE",
            "start from a Hugging Face GPT2LMHeadModel safetensors file"),
    OPT_GROUP("Data:"),
    OPT_STR("data", run.data, NULL, RES | DATA, "FILE|DIR|PAT", "training tokens "
            "(default " TRAIN_DEFAULT_DATA "); a quoted\npattern names several files, e.g. "
            "'fineweb_train_*.bin';\nFILE.jsonl: prompt/answer records (TRL's forms),\n"
            "rendered with the model's chat template, the\nloss on the answers "
            "(man nnt-tokenize)"),
    OPT_CHOICE("data-format", run.data_format, data_formats, "auto", RES | DATA, "F",
               "auto|text|llmc|nanogpt (default auto)"),
    OPT_CHOICE("tokenizer", run.tokenizer, tokenizers, NULL, RES | TOK, "T",
               "bytes|bpe|json, for text "
               "(default bytes; json when --load-hf\nDIR has a tokenizer.json)"),
    OPT_STR("bpe-vocab", run.bpe_vocab, NULL, RES | TOK, "FILE", NULL),
    OPT_STR("bpe-merges", run.bpe_merges, NULL, RES | TOK, "FILE",
            "GPT-2 vocab.json and merges.txt for bpe"),
    OPT_STR("tokenizer-json", run.tokenizer_json, NULL, RES | TOK, "F",
            "a Hugging Face tokenizer.json (or its directory) for json"),
    OPT_GROUP("Prompt/answer records (--data, --val-data FILE.jsonl; man nnt-tokenize):"),
    OPT_CHOICE("chat-template", jsonl_template, cli_chat_templates, "auto", 0, "NAME",
               CLI_CHAT_TEMPLATE_LIST " for \"messages\"\n(default auto: the "
               "tokenizer_config.json's, when\nnnt knows it)"),
    OPT_CHOICE("loss", jsonl_loss, losses, NULL, 0, "answers|all|assistant", "the tokens "
               "that count: the answers (default), all, or\nthe assistant turns alone (a "
               "completion's tool\nresponses not)"),
    OPT_FLAG("pack", jsonl_pack, 0, "several whole examples a row (default one a row)"),
    OPT_CHOICE("too-long", jsonl_too_long, too_long, "cut", 0, "cut|refuse",
               "an example longer than T (default cut)"),
    OPT_STR("chat-date", jsonl_chat_date, NULL, 0, "DATE", "Llama 3.1/3.2's \"Today Date\", "
            "gpt-oss's \"Current\ndate\" (default the template's)"),
    OPT_STR("tokenizer-config", jsonl_tokenizer_config, NULL, 0, "FILE",
            "tokenizer_config.json (default: the one beside\nthe tokenizer.json)"),
    OPT_GROUP("Validation (the loss on held-out tokens, without training on them):"),
    OPT_STR("val-data", run.val_data, NULL, RES | DATA, "FILE|DIR|PAT",
            "held-out tokens, read like --data"),
    OPT_REAL("val-split", run.val_split, 0, 1, "-1", RES | DATA | OPEN, "X", "hold out the last "
             "X of the data instead (0 <= X < 1; default\n0.1 of the default corpus, 0 of --data: "
             "no validation)"),
    OPT_INT("val-every", loop.val_every, 1, BIG, "-1", RES | DATA, "N",
            "steps between validations, and after the last (default steps/10)"),
    OPT_INT("val-batches", run.val_batches, 0, BIG, "-1", RES | DATA, "K", "batches of B x T "
            "tokens a validation (default 20, at most a\ntenth of the batches trained between "
            "validations, at least 1;\n0 = all the held-out tokens hold)"),
    OPT_INT("early-stop", loop.early_stop, 1, BIG, NULL, RES, "P",
            "stop after P validations in a row without a loss below\nthe lowest before "
            "(by more than --early-stop-delta)"),
    OPT_REAL("early-stop-delta", loop.early_stop_delta, 0, 1e30, NULL, RES, "X",
             "the improvement --early-stop counts (default 0)"),
    OPT_GROUP("Training:"),
    OPT_REAL("label-smoothing", loop.label_smoothing, 0, 1, NULL, RES | OPEN, "X",
             "the loss against the next token's one-hot times 1 - X\nplus X / V on every id "
             "(transformers'\nlabel_smoothing_factor; default 0)"),
    OPT_REAL("neftune-alpha", loop.neftune_alpha, 0, 1e6, NULL, RES, "X",
             "NEFTune: uniform noise in +-X / sqrt(T C) on the\nembeddings of each training "
             "forward (transformers'\nneftune_noise_alpha, e.g. 5; default 0)"),
    OPT_FLAG("shuffle", loop.shuffle, RES, "read the data as sequences of T + 1 tokens in a new "
             "random\norder each epoch (from --seed), not in order"),
    OPT_INT("batch", loop.batch, 1, 1e8, "8", RES, "B", "sequences per micro-batch (default 8)"),
    OPT_INT("seq", loop.seq, 1, 1e8, "-1", RES, "T",
            "tokens per sequence (default min(128, context))"),
    OPT_INT("accum", loop.accum, 1, 1e8, "1", RES, "K", "micro-batches per step (default 1)"),
    OPT_INT("steps", loop.steps, 0, BIG, "2000", RES, "N", "total optimizer steps, resumed ones "
            "included (default 2000);\n0: no training, one validation of every held-out batch"),
    OPT_CHOICE("optim", optim.kind, optimizers, "adamw", RES, "O",
               "adamw|adam|sgd (default adamw)"),
    OPT_REAL("lr", optim.lr, 0, 1e6, "-1", RES, "X",
             "peak learning rate (default by size: 3e-3 under "
             "10M parameters,\n6e-4 under 200M, else 3e-4; 3e-4 with --load-*)"),
    OPT_REAL("beta1", optim.beta1, 0, 1, "0.9", RES | OPEN, "X", NULL),
    OPT_REAL("beta2", optim.beta2, 0, 1, "0.95", RES | OPEN, "X", NULL),
    OPT_REAL("eps", optim.eps, 0, 1, "1e-8", RES, "X", "Adam(W) (defaults 0.9, 0.95, 1e-8)"),
    OPT_REAL("weight-decay", optim.weight_decay, 0, 1e6, "0.1", RES, "X",
             "on matrices and embeddings (default 0.1)"),
    OPT_REAL("momentum", optim.momentum, 0, 1, NULL, RES | OPEN, "X", "SGD momentum (default 0)"),
    OPT_REAL("grad-clip", optim.grad_clip, 0, 1e30, "1", RES, "X",
             "clip the global gradient norm; 0 = off (default 1)"),
    OPT_CHOICE("update-in-backward", loop.update_in_backward, off_on, NULL, 0, "W", "off|on: "
               "update each parameter during the backward (default: on with\n--grad-clip 0)"),
    OPT_CHOICE("schedule", optim.schedule, schedules, "cosine", RES, "S",
               "constant|cosine|linear|wsd: the learning rate after the\nwarmup (default "
               "cosine; wsd: warmup, stable, decay)"),
    OPT_INT("warmup", optim.warmup_steps, 0, BIG, "-1", RES, "N",
            "linear warmup steps (default steps/20)"),
    OPT_INT("decay-steps", optim.decay_steps, 1, BIG, NULL, RES, "N",
            "wsd: the last N steps decay (default steps/10)"),
    OPT_CHOICE("decay-shape", optim.decay_shape, decay_shapes, "linear", RES, "D",
               "wsd: linear|cosine|1-sqrt decay (default linear)"),
    OPT_REAL("min-lr", optim.min_lr, 0, 1e6, "-1", RES, "X",
             "where the schedule decays to (default lr/10)"),
    OPT_INT("seed", loop.seed, 0, BIG, "1", RES, "S",
            "initialisation and sampling seed (default 1)"),
    OPT_CHOICE("precision", run.precision, precisions, "fp32", RES, "P",
               "fp32|tf32|bf16 operands of the matrix products (default fp32)"),
    OPT_FLAG("recompute", run.recompute, RES,
             "keep only block outputs, recompute in the backward"),
    OPT_GROUP("Tiling (0 automatic, -1 one tile, > 0 tile size; default 0):"),
    TILE("tile-batch", tiling.batch, NULL), TILE("tile-seq", tiling.seq, NULL),
    TILE("tile-channels", tiling.channels, NULL), TILE("tile-hidden", tiling.hidden, NULL),
    TILE("tile-vocab", tiling.vocab, NULL), TILE("tile-heads", tiling.heads, ""),
    OPT_GROUP("Fine-tuning (frozen parameters, LoRA adapters in PEFT's format):"),
    OPT_STR("freeze", run.freeze, NULL, RES, "PAT",
            "freeze the parameters whose names match the glob "
            "PAT (several\nseparated by commas; * matches dots too): no gradient, no\noptimizer "
            "state, no weight-gradient product"),
    OPT_CHOICE("quantize", quantize, quantizes, "none", RES, "Q", "none|nf4: keep the frozen "
               "matrices in NF4, 4.5 bits a\nweight (QLoRA; bitsandbytes' nf4; default none)"),
    OPT_INT("lora-rank", lora_rank, 1, 65536, "-1", RES, "R", "LoRA adapters of rank R on "
            "--lora-targets, the rest frozen\n(default 8 when another --lora option is given)"),
    OPT_REAL("lora-alpha", lora_alpha, 0, 1e6, "-1", RES | CLI_OPEN_MIN, "A",
             "their scale alpha / r (default 8)"),
    OPT_REAL("lora-dropout", lora_dropout, 0, 1, "-1", RES | OPEN, "P",
             "dropout on their input (default 0)"),
    OPT_FLAG("lora-dora", lora_dora, RES, "DoRA (PEFT's use_dora): a trained magnitude per "
             "output\nfeature of each adapted module"),
    OPT_STR("lora-targets", lora_targets, NULL, RES, "LIST", "modules: q_proj,v_proj,... "
            "(Llama), c_attn,c_proj,c_fc\n(GPT-2, GPT-BigCode), qkv_proj,gate_up_proj,... "
            "(Phi-3),\ndense,fc1,fc2,... (Phi), query_key_value,dense,...\n(GPT-NeoX, "
            "Falcon), q_proj,...,c_fc,c_proj (StarCoder2)\n"
            "or all-linear (default: PEFT's, q_proj,v_proj or c_attn;\nPhi-3 qkv_proj; Phi "
            "q_proj,v_proj,fc1,fc2; GPT-NeoX\nand Falcon query_key_value; StarCoder2 "
            "q_proj,v_proj;\nGPT-BigCode c_attn)"),
    OPT_REAL("dpo-beta", loop.dpo_beta, 0, 1e6, NULL, RES | CLI_OPEN_MIN, "X",
             "direct preference optimization (TRL's DPO, sigmoid\nloss) with this beta on "
             "--data FILE.jsonl of\npreference records ({\"prompt\", \"chosen\",\n"
             "\"rejected\"}), or a token file of nnt-tokenize\n--preference; the reference: "
             "the model before its\nfirst update (TRL uses 0.1; default: off); with\n"
             "--dpo-loss cpo, simpo or orpo: their beta"),
    OPT_CHOICE("dpo-loss", loop.dpo_loss, dpo_losses, "sigmoid", RES, "L",
               "sigmoid|ipo|hinge: TRL's DPO loss_type (default\nsigmoid: DPO; ipo: the log "
               "ratios averaged over\neach sequence's tokens; hinge: SLiC); its others\n"
               "against the reference: robust, exo_pair,\nnca_pair, bco_pair, sppo_hard, "
               "apo_zero, apo_down,\ndiscopop, sigmoid_norm, aot, aot_unpaired;\n"
               "cpo|simpo|orpo: "
               "without a reference model (TRL's\nCPOTrainer loss_type sigmoid and simpo, "
               "its\nORPOTrainer, beta its lambda); kto|apo_zero_unpaired:\nTRL's KTOTrainer "
               "on unpaired records ({\"prompt\",\n\"completion\", \"label\": true|false}; "
               "nnt-tokenize\n--unpaired; or preference records, unpaired as\n"
               "KTOTrainer does), runs of --batch rows"),
    OPT_REAL("simpo-gamma", loop.simpo_gamma, 0, 1e6, "0.5", RES, "X",
             "--dpo-loss simpo's target margin (TRL's\nsimpo_gamma; default 0.5)"),
    OPT_REAL("dpo-label-smoothing", loop.dpo_label_smoothing, 0, 1, "0", RES | OPEN, "E",
             "--dpo-loss robust, aot, aot_unpaired: the\nprobability that a pair's preference is "
             "flipped,\nbelow 0.5; exo_pair: its epsilon, above 0 (TRL's\nlabel_smoothing; "
             "default 0)"),
    OPT_REAL("discopop-tau", loop.discopop_tau, 0, 1e6, "0.05", RES | CLI_OPEN_MIN, "T",
             "--dpo-loss discopop's temperature (TRL's\ndiscopop_tau; default 0.05)"),
    OPT_REAL("rpo-alpha", loop.rpo_alpha, 0, 1e6, "0", RES, "X",
             "with --dpo-beta and a loss against the reference\non pairs: plus X times "
             "the chosen sequences'\nnegative log-likelihood (RPO: TRL's loss_type\n"
             "[sigmoid, sft], loss_weights [1, X]; default 0)"),
    OPT_REAL("cpo-alpha", loop.cpo_alpha, 0, 1e6, "1", RES, "X",
             "--dpo-loss cpo and simpo: the weight of the chosen\nsequences' negative "
             "log-likelihood (TRL's\ncpo_alpha; default 1; 0: SimPO as its paper)"),
    OPT_REAL("desirable-weight", loop.desirable_weight, 0, 1e6, "1", RES, "X",
             "--dpo-loss kto and apo_zero_unpaired: the weight of\nthe desirable rows' loss "
             "(TRL's desirable_weight;\ndefault 1)"),
    OPT_REAL("undesirable-weight", loop.undesirable_weight, 0, 1e6, "1", RES, "X",
             "and of the undesirable rows' (TRL's\nundesirable_weight; default 1)"),
    OPT_INT("num-labels", run.num_labels, 0, 1 << 20, "0", 0, "N",
            "make the model a sequence classifier of N labels\n(transformers' "
            "*ForSequenceClassification: a score\nhead; a --load-hf language model gives the "
            "rest), trained on --data FILE.jsonl of\nclassification records ({\"text\", "
            "\"label\"}); 1: a\nreward model trained on --data FILE.jsonl of\npreference "
            "records (TRL's RewardTrainer; default:\nthe model's own)"),
    OPT_CHOICE("problem-type", run.problem_type, cli_problem_types, NULL, 0, "P",
               "single_label_classification|regression|\nmulti_label_classification: what "
               "the classifier\nlearns (transformers' problem_type; default: the\nmodel's "
               "own): one label a text, or the values of\nrecords {\"text\", \"label\": V} "
               "(V a number, or a\nlist of N numbers; multi-label: each in [0, 1])"),
    OPT_STR("label-names", label_names, NULL, 0, "LIST", "names of a classifier's labels "
            "0, 1, ... separated\nby commas (config.json's id2label, as --save-hf\nwrites it; "
            "default: the model's, else LABEL_0, ...)"),
    OPT_INT("pad-id", run.pad_token_id, -1, BIG, "-1", 0, "ID",
            "a classifier's padding id, where its rows end\n(default: the tokenizer's pad_token, "
            "else eos_token,\nwith .jsonl data; else the model's pad_token_id)"),
    OPT_REAL("reward-center", loop.reward_center, 0, 1e6, NULL, RES, "X",
             "a reward model's loss plus X times the mean of\n(r_chosen + r_rejected)^2 (TRL's "
             "center_rewards_\ncoefficient; default 0)"),
    OPT_STR("load-peft", run.load_peft, NULL, RES, "DIR", "start from a PEFT adapter "
            "directory (its settings; the\nrest frozen)"),
    OPT_STR("save-peft", save_peft, NULL, 0, "DIR", "write the adapters as a PEFT directory "
            "at the end"),
    OPT_FLAG("merge", merge, 0, "merge the adapters into the weights at the end (after\n"
             "--save-peft, before --save-hf)"),
    OPT_GROUP("Runtime:"),
    OPT_INT("cpus", cpus, -1, 4096, "-1", 0, "N", NULL),
    OPT_INT("gpus", gpus, -1, 1024, "-1", 0, "N", "workers (default -1: all)"),
    OPT_STR("sched", sched, NULL, 0, "NAME", "StarPU scheduler"),
    OPT_INT("mem-gpu", mem_gpu, 0, BIG, NULL, 0, "MiB", NULL),
    OPT_INT("mem-cpu", mem_cpu, 0, BIG, NULL, 0, "MiB",
            "budgets (0: GPU less a reserve, RAM 15/16 of available)"),
    OPT_STR("swap-dir", swap_dir, NULL, 0, "DIR", NULL),
    OPT_INT("swap-size", swap_size, 0, BIG, NULL, 0, "MiB", "disk swap for tiles that do not fit"),
    OPT_CHOICE("distribute", distribute, distributions, NULL, 0, "D", "sharded|data|root: one "
               "rank of an MPI job (mpirun, srun;\ndefault sharded when started as several "
               "ranks)"),
    OPT_FLAG("release-weights", release_weights, 0, "under MPI: drop the weights a rank received "
             "once a layer has\nused them, gather them again for the backward (less RAM per\n"
             "rank, more bytes sent; ZeRO-3 / FSDP full sharding)"),
    OPT_GROUP("Output:"),
    OPT_STR("out", out_dir, TRAIN_DEFAULT_OUT, 0, "DIR",
            "output directory (default ./" TRAIN_DEFAULT_OUT "; with\n--resume, the "
            "checkpoint's)"),
    OPT_STR("save", save, NULL, 0, "FILE", "checkpoint (default OUT/checkpoint.safetensors)"),
    OPT_FLAG("overwrite", overwrite, 0, "replace the files of a previous run in OUT (default: "
             "when\nOUT holds another run's checkpoint, or --save's file "
             "exists,\nmove its files to OUT/previous-N first; a --resume of "
             "a\ncheckpoint in OUT continues in place)"),
    OPT_INT("save-every", loop.save_every, 0, BIG, NULL, RES, "N",
            "also save every N steps (default 0: only at the end)"),
    OPT_FLAG("save-best", save_best, RES, "also save OUT/best.safetensors after each validation "
             "that\nlowers the validation loss (as nanoGPT keeps its best)"),
    OPT_FLAG("no-save", no_save, 0, "write no checkpoint (benchmarks, very large models)"),
    OPT_INT("stop-after", stop_after, 1, BIG, NULL, 0, "S",
            "stop after step S (saved; the schedule still ends at --steps)"),
    OPT_STR("save-hf", save_hf, NULL, 0, "DIR", "also write a Hugging Face model directory "
            "(config.json,\nmodel.safetensors) that transformers loads"),
    OPT_STR("save-hf-shard-size", save_hf_shard_size, NULL, 0, "SIZE", "split --save-hf's weights "
            "into shards of at most SIZE\n(e.g. 2GB, 500MB, 4GiB; bytes without a unit) and an "
            "index"),
    OPT_FLAG("save-weights", save_weights, 0, "also write OUT/model.safetensors (Hugging Face, "
             "GPT-2)"),
    OPT_FLAG("save-llmc", save_llmc, 0, "also write OUT/model.bin (llm.c fp32 checkpoint, GPT-2)"),
    OPT_STR("resume", resume, NULL, 0, "FILE", "continue the run of a checkpoint up to --steps: "
            "its model,\ntokenizer, data, batches, steps, optimizer, schedule, seed,\nprecision, "
            "tiles and checkpointing, each unless given here"),
    OPT_STR("trace", trace, NULL, 0, "FILE.svg", "trace --trace-steps steps (default 3) after the "
            "first"),
    OPT_INT("trace-steps", loop.trace_steps, 1, BIG, "3", 0, "N", "number of steps traced"),
    OPT_INT("sample", sample, 0, 1e7, "256", RES, "N",
            "tokens to generate at the end; 0 = none (default 256)"),
    OPT_STR("prompt", prompt, "The ", 0, "TEXT", "start of the sample (default \"The \")"),
    OPT_REAL("temperature", temperature, 0, 1e6, "0.8", 0, "X", "0 = greedy (default 0.8)"),
    OPT_INT("top-k", top_k, 0, 2147483647.0, "40", 0, "N", "0 = all tokens (default 40)"),
    OPT_REAL("peak-gflops", peak_gflops, 1e-9, 1e12, "-1", 0, "X",
             "peak for MFU (default: measured at start on the CPU workers)"),
    OPT_FLAG("print-loss", print_loss, 0, "print only \"step N loss X\" lines on stdout (and "
             "\"val N loss\nX\" after each validation)"),
    OPT_FLAG("quiet", quiet, 0, "print errors only"),
};
#define NOPT ((int)(sizeof table / sizeof table[0]))

static const char usage_head[] =
    "Usage: nnt-train [OPTION]...\n"
    "Train a GPT-2, Llama-, Gemma-, MoE-, OLMo-, Phi-3-, Phi-, Granite-, StableLM-,\n"
    "GPT-NeoX-, StarCoder2-, GPT-BigCode- or Falcon-family language model with nnt.\n"
    "Without options: a small GPT-2 (4 layers, 128 channels, 4 heads, byte tokens) learns\n"
    TRAIN_DEFAULT_DATA " for 2000 steps (a few minutes on 2 CPU cores), validating\n"
    "on the last tenth of the texts, then writes logs, a loss curve and a checkpoint to\n"
    "./" TRAIN_DEFAULT_OUT " and prints a text sample.\n"
    "\n";
static const char usage_tail[] =
    "\n"
    "MFU counts 6 N + 12 L T NH hd FLOPs per token (N parameters, not the tables only\n"
    "lookups read: positions, an untied token table; hd the head dimension;\n"
    "forward and backward, attention included). Exit status: 0 done, 1 library or runtime\n"
    "error, 2 bad usage, 130 interrupted.\n"
    "See nnt-train(1).\n";

static cli_program program = {"nnt-train", table, NOPT, usage_head, usage_tail, NULL, NULL};

#define dst(o, d) ((void *)((char *)(o) + (d)->off))

void train_preset_list(char *buf, size_t cap, int col)
{
    nnt_family_info f = NNT_FAMILY_INFO_INIT;
    size_t n = 0;
    int wrapped = col > 0;
    buf[0] = '\0';
    for (int i = 0; nnt_model_family_info(i, &f) == 0 && n < cap; i++) {
        char one[512];
        if (!f.presets || !*f.presets)   /* (Granite: read from directories only) */
            continue;
        if (n)
            n += (size_t)snprintf(buf + n, cap - n, ";"), col++;
        snprintf(one, sizeof one, "%s (%s)", f.presets, f.title);
        for (char *w = strtok(one, " "); w && n < cap; w = strtok(NULL, " ")) {
            int len = (int)strlen(w), wrap = wrapped && n && col + 1 + len > 88;
            col = wrap ? 24 + len : col + (n ? 1 : 0) + len;
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", wrap ? "\n                        "
                                  : n ? " " : "", w);
        }
    }
}

int train_opts_parse(int argc, char **argv, train_opts *o)
{
    char presets[1024];   /* --help's list under --model */
    train_preset_list(presets, sizeof presets, 31);
    program.help_fill = presets;
    memset(o, 0, sizeof *o);
    o->run = (nnt_run_config)NNT_RUN_CONFIG_INIT;   /* (the table sets the fields it names) */
    o->loop = (nnt_trainer_options)NNT_TRAINER_OPTIONS_INIT;
    o->optim = (nnt_optim_options)NNT_OPTIM_OPTIONS_INIT;
    o->tiling = (nnt_tiling)NNT_TILING_INIT;
    int rc = cli_parse(&program, argc, argv, o, o->given, NULL, NULL);
    program.help_fill = NULL;
    return rc;
}

int train_opts_given(const train_opts *o, const char *name)
{
    const cli_option *d = cli_find(&program, name, strlen(name));
    return d && o->given[d - table];
}

const char *train_choice_name(const char *option, int value)
{
    return cli_choice_name(&program, option, value);
}

char *train_saved(const char *saved, const char *key)
{
    char buf[4096];
    int found = 0;
    if (!saved || nnt_options_get(saved, key, buf, sizeof buf, &found) || !found)
        return NULL;
    return strdup(buf);
}

int64_t train_saved_int(const char *saved, const char *key)
{
    char *text = train_saved(saved, key);
    int64_t v = text ? strtoll(text, NULL, 10) : -1;
    free(text);
    return v;
}

int train_opts_restore(train_opts *o, const char *saved, char *names, size_t cap)
{
    int data_given = 0, tok_given = o->load_hf != NULL, rc = 0;
    size_t n = 0;
    for (const cli_option *d = table; d < table + NOPT; d++) {
        data_given |= (d->flags & DATA) && o->given[d - table];
        tok_given |= (d->flags & TOK) && o->given[d - table];
    }
    names[0] = '\0';
    for (const cli_option *d = table; saved && d < table + NOPT && rc == 0; d++) {
        char key[64], *text, *end = NULL, before[4096], after[4096], shown[40];
        if (!(d->flags & RES) || ((d->flags & DATA) && data_given) || o->given[d - table] ||
            ((d->flags & TOK) && tok_given))
            continue;
        /* no checkpoints asked for (--no-save), or no training (--steps 0): none to keep */
        if (!strncmp(d->name, "save-", 5) &&
            (o->no_save || (train_opts_given(o, "steps") && o->loop.steps == 0)))
            continue;
        snprintf(key, sizeof key, "%s", d->name);
        for (char *c = key; *c; c++)
            *c = *c == '-' ? '_' : *c;
        text = train_saved(saved, key);
        if (!text || (d->off == CLI_OFF(run.data) && !strcmp(text, TRAIN_DEFAULT_DATA)) ||
            (d->def && !strcmp(text, d->def))) {
            free(text);   /* not recorded, the default corpus (no --data), or not given (-1) */
            continue;
        }
        cli_value_text(d, o, before, sizeof before);
        if (d->type == CLI_FLAG)
            *(int *)dst(o, d) = strcmp(text, "0") != 0;
        else
            rc = cli_set(&program, d, o, text, NULL);
        cli_value_text(d, o, after, sizeof after);
        double v = strtod(text, &end);   /* a real as %g (it is saved with 17 digits) */
        snprintf(shown, sizeof shown, "%g", v);
        if (strcmp(before, after) && n < cap && !(d->flags & TOK))
            n += (size_t)snprintf(names + n, cap - n, "%s--%s%s%s", n ? " " : "", d->name,
                                  d->type == CLI_FLAG ? "" : " ", d->type == CLI_FLAG ? ""
                                  : *text && !*end && strpbrk(text, ".eE") ? shown : text);
        if (d->type != CLI_STR)
            free(text);
        else if (o->nkept < (int)(sizeof o->kept / sizeof o->kept[0]))
            o->kept[o->nkept++] = text;   /* o points to it (more: not freed) */
    }
    return rc;
}

void train_opts_free(train_opts *o)
{
    for (int i = 0; i < o->nkept; i++)
        free(o->kept[i]);
    o->nkept = 0;
}

/* Whether the command line asks for LoRA adapters (--lora-*). */
int train_lora_asked(const train_opts *o)
{
    return o->lora_rank > 0 || o->lora_alpha >= 0 || o->lora_dropout >= 0 || o->lora_targets ||
           o->lora_dora;
}

int train_loss_unpaired(const train_opts *o)
{
    return o->loop.dpo_loss == NNT_DPO_KTO || o->loop.dpo_loss == NNT_DPO_APO_ZERO_UNPAIRED;
}

/* path names prompt/answer records (FILE.jsonl) */
static int jsonl_path(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n >= 7 && strcmp(path + n - 6, ".jsonl") == 0;
}

static int check_combinations(const train_opts *o)
{
    const nnt_run_config *r = &o->run;
    int model_opts = o->model || o->layers > 0 || o->channels > 0 || o->heads > 0 ||
                     o->kv_heads > 0 || o->hidden > 0 || o->vocab > 0 || o->context > 0 ||
                     o->head_dim > 0 || o->qk_norm;
    int loads = (o->load_llmc != NULL) + (o->load_safetensors != NULL) + (o->load_hf != NULL);
    int adapters = r->load_peft || train_lora_asked(o);
    if (loads > 1)
        return train_usage_error("--load-llmc, --load-safetensors and --load-hf exclude each "
                                 "other");
    if (o->init && loads)
        return train_usage_error("--init and --load-* exclude each other");
    if ((o->load_llmc || o->load_hf) && model_opts)
        return train_usage_error("--%s takes the model configuration from the %s: drop "
                                 "--model/--layers/--channels/--heads/--kv-heads/--hidden/"
                                 "--head-dim/--qk-norm/--vocab/--context",
                                 o->load_llmc ? "load-llmc" : "load-hf",
                                 o->load_llmc ? "file" : "directory");
    if (r->tokenizer == NNT_TOKENIZER_BPE && (!r->bpe_vocab || !r->bpe_merges))
        return train_usage_error("--tokenizer bpe needs --bpe-vocab FILE and --bpe-merges FILE");
    if (r->tokenizer != NNT_TOKENIZER_BPE && (r->bpe_vocab || r->bpe_merges))
        return train_usage_error("--bpe-vocab/--bpe-merges need --tokenizer bpe");
    if (r->tokenizer == NNT_TOKENIZER_JSON && !r->tokenizer_json && !o->load_hf)
        return train_usage_error("--tokenizer json needs --tokenizer-json FILE (or --load-hf "
                                 "DIR with a tokenizer.json)");
    if (r->tokenizer_json && r->tokenizer != NNT_TOKENIZER_JSON &&
        r->tokenizer != NNT_TOKENIZER_AUTO)
        return train_usage_error("--tokenizer-json goes with --tokenizer json");
    if (o->no_save && (o->save || o->loop.save_every || o->stop_after || o->save_best))
        return train_usage_error("--no-save excludes --save, --save-every, --save-best and "
                                 "--stop-after");
    if (o->sample > 0 && !*o->prompt)
        return train_usage_error("--prompt: empty (the sample starts from it; --sample 0: none)");
    if ((o->swap_dir != NULL) != (o->swap_size > 0))
        return train_usage_error("--swap-dir and --swap-size go together");
    if (o->save_hf_shard_size && !o->save_hf)
        return train_usage_error("--save-hf-shard-size needs --save-hf DIR");
    if (r->val_data && r->val_split > 0)
        return train_usage_error("--val-data and --val-split exclude each other");
    if (!jsonl_path(r->data) && !jsonl_path(r->val_data) &&
        (o->jsonl_template > 0 || o->jsonl_loss >= 0 || o->jsonl_pack || o->jsonl_too_long > 0 ||
         o->jsonl_chat_date || o->jsonl_tokenizer_config))
        return train_usage_error("--chat-template, --loss, --pack, --too-long, --chat-date and "
                                 "--tokenizer-config are for prompt/answer records (--data "
                                 "or --val-data FILE.jsonl)");
    if (o->loop.dpo_loss != NNT_DPO_SIGMOID && !(o->loop.dpo_beta > 0))
        return train_usage_error("--dpo-loss goes with --dpo-beta");
    const int loss = o->loop.dpo_loss;
    if (o->loop.rpo_alpha > 0 &&
        (!(o->loop.dpo_beta > 0) || (loss >= NNT_DPO_CPO && loss <= NNT_DPO_APO_ZERO_UNPAIRED)))
        return train_usage_error("--rpo-alpha goes with --dpo-beta and a DPO loss on pairs "
                                 "against the reference (not cpo, simpo, orpo, kto or "
                                 "apo_zero_unpaired; cpo and simpo take --cpo-alpha)");
    if (train_opts_given(o, "dpo-label-smoothing") && loss != NNT_DPO_ROBUST &&
        loss != NNT_DPO_EXO_PAIR && loss != NNT_DPO_AOT && loss != NNT_DPO_AOT_UNPAIRED)
        return train_usage_error("--dpo-label-smoothing goes with --dpo-loss robust, exo_pair, "
                                 "aot or aot_unpaired");
    if (train_opts_given(o, "discopop-tau") && loss != NNT_DPO_DISCOPOP)
        return train_usage_error("--discopop-tau goes with --dpo-loss discopop");
    if (train_opts_given(o, "simpo-gamma") && o->loop.dpo_loss != NNT_DPO_SIMPO)
        return train_usage_error("--simpo-gamma goes with --dpo-loss simpo");
    if (train_opts_given(o, "cpo-alpha") && o->loop.dpo_loss != NNT_DPO_CPO &&
        o->loop.dpo_loss != NNT_DPO_SIMPO)
        return train_usage_error("--cpo-alpha goes with --dpo-loss cpo or simpo");
    int unpaired = train_loss_unpaired(o);
    if ((train_opts_given(o, "desirable-weight") || train_opts_given(o, "undesirable-weight")) &&
        !unpaired)
        return train_usage_error("--desirable-weight and --undesirable-weight go with --dpo-loss "
                                 "kto or apo_zero_unpaired");
    if (unpaired && o->loop.dpo_loss == NNT_DPO_KTO && o->loop.batch < 2)
        return train_usage_error("--dpo-loss kto estimates its kl from the other rows of a "
                                 "micro-batch: --batch must be at least 2");
    if (o->loop.label_smoothing > 0 && o->loop.dpo_beta > 0)
        return train_usage_error("--label-smoothing smooths the language-model loss: not with "
                                 "--dpo-beta (its losses read log-likelihoods)");
    if (o->loop.neftune_alpha > 0 && o->loop.dpo_beta > 0)
        return train_usage_error("--neftune-alpha: not with --dpo-beta (its reference passes "
                                 "would see the noise or not)");
    if (o->loop.label_smoothing > 0 && (o->run.num_labels > 0 || o->run.problem_type > 0))
        return train_usage_error("--label-smoothing smooths a language model's loss over its "
                                 "vocabulary, not a classifier's or a reward model's");
    if (o->loop.dpo_beta > 0 && o->jsonl_pack)
        return train_usage_error("--dpo-beta reads each sequence %s in a row of its own: not "
                                 "with --pack", unpaired ? "of --dpo-loss kto" : "of a pair");
    if (o->run.problem_type > 0 && o->run.num_labels == 0 && !o->load_hf)
        return train_usage_error("--problem-type is a classifier's: give --num-labels N");
    if (o->run.problem_type > 0 && o->label_names)
        return train_usage_error("--label-names: the records of --problem-type %s give "
                                 "numbers, not label names",
                                 cli_problem_types[o->run.problem_type]);
    if (o->run.problem_type > 0 && o->loop.dpo_beta > 0)
        return train_usage_error("--dpo-beta trains a language model, not a classifier "
                                 "(--problem-type %s)", cli_problem_types[o->run.problem_type]);
    if (o->run.problem_type > 0 && o->loop.reward_center > 0)
        return train_usage_error("--reward-center is for reward models, not --problem-type %s",
                                 cli_problem_types[o->run.problem_type]);
    /* (a regression of one value is no reward model: no pairs) */
    if (o->run.num_labels == 1 && o->run.problem_type <= 0 && o->loop.batch % 2)
        return train_usage_error("--num-labels 1 (a reward model) takes pairs (chosen, "
                                 "rejected) side by side: --batch must be even, not %lld",
                                 (long long)o->loop.batch);
    if (o->run.num_labels == 1 && o->loop.dpo_beta > 0)
        return train_usage_error("--dpo-beta trains a language model, not a reward model "
                                 "(--num-labels 1)");
    if (o->run.num_labels > 1 && o->loop.dpo_beta > 0)
        return train_usage_error("--dpo-beta trains a language model, not a classifier "
                                 "(--num-labels %lld)", (long long)o->run.num_labels);
    if (o->run.num_labels > 1 && o->loop.reward_center > 0)
        return train_usage_error("--reward-center is for reward models (--num-labels 1), not "
                                 "a classifier of %lld labels", (long long)o->run.num_labels);
    if (o->loop.dpo_beta > 0 && o->loop.batch % 2 && !unpaired)
        return train_usage_error("--dpo-beta takes pairs (chosen, rejected) side by side: "
                                 "--batch must be even, not %lld", (long long)o->loop.batch);
    if (r->load_peft && train_lora_asked(o))
        return train_usage_error("--load-peft takes the adapters' settings from its "
                                 "adapter_config.json: no --lora-rank, --lora-alpha, "
                                 "--lora-dropout, --lora-dora or --lora-targets with it");
    if (o->quantize && !adapters && !(r->freeze && *r->freeze))
        return train_usage_error("--quantize nf4 keeps frozen matrices in NF4: give --lora-*, "
                                 "--load-peft or --freeze");
    if ((o->merge || o->save_peft) && !adapters)
        return train_usage_error("%s LoRA adapters: give --lora-rank, --lora-targets or "
                                 "--load-peft", o->merge ? "--merge merges" : "--save-peft "
                                 "writes");
    return 0;
}

/* The files named must exist (a data pattern: the library says if none matches). */
static int check_input_files(const train_opts *o)
{
    const char *names[] = {o->run.data ? "--data" : "default corpus (give --data FILE)",
                           "--val-data", "--load-llmc", "--load-safetensors", "--load-hf",
                           "--bpe-vocab", "--bpe-merges"};
    const char *paths[] = {o->run.data ? o->run.data : TRAIN_DEFAULT_DATA, o->run.val_data,
                           o->load_llmc, o->load_safetensors, o->load_hf, o->run.bpe_vocab,
                           o->run.bpe_merges};
    struct stat st;
    for (int i = 0; i < 7; i++)
        if (paths[i] && !(i < 2 && strpbrk(paths[i], "*?[")) && stat(paths[i], &st))
            return train_usage_error("%s: cannot open '%s': %s", names[i], paths[i],
                                     strerror(errno));
    return 0;
}

int train_opts_resolve(train_opts *o)
{
    nnt_run_config *r = &o->run;
    nnt_trainer_options *l = &o->loop;
    char path[4096];
    if (check_combinations(o) || check_input_files(o))
        return 2;
    if (o->save_hf_shard_size && nnt_hf_size_parse(o->save_hf_shard_size, &o->save_hf_shard_bytes))
        return train_usage_error("--save-hf-shard-size: '%s' is not a size (a positive integer "
                                 "and B, KB, MB, GB, TB, KiB, MiB, GiB or TiB, e.g. 2GB)",
                                 o->save_hf_shard_size);
    snprintf(path, sizeof path, "%s/tokenizer.json", o->load_hf ? o->load_hf : "");
    if (r->tokenizer == NNT_TOKENIZER_JSON && !r->tokenizer_json && access(path, R_OK))
        return train_usage_error("--tokenizer json: %s has no tokenizer.json: give "
                                 "--tokenizer-json FILE, --tokenizer bytes or --tokenizer bpe",
                                 o->load_hf);   /* e.g. a byte-level model's directory */
    if (r->tokenizer == NNT_TOKENIZER_JSON && !r->tokenizer_json)
        r->tokenizer_json = o->load_hf;
    if (o->optim.warmup_steps < 0)
        o->optim.warmup_steps = l->steps / 20;
    if (r->val_split < 0)   /* the default corpus: a tenth held out, as nanoGPT splits */
        r->val_split = r->data || r->val_data ? 0 : 0.1;
    int held_out = r->val_data || r->val_split != 0;
    if (l->steps == 0 && !held_out)
        return train_usage_error("--steps 0 only validates: give --val-data or --val-split");
    /* the options that act on the validations during training */
    const char *on_val = l->early_stop > 0 ? "--early-stop stops on the validation loss"
                         : o->save_best    ? "--save-best keeps the state of the lowest "
                                             "validation loss"
                                           : NULL;
    if (on_val && (!held_out || l->steps == 0))
        return train_usage_error("%s: give --val-data or --val-split%s", on_val,
                                 l->steps == 0 ? ", and steps to train" : "");
    if (train_opts_given(o, "early-stop-delta") && l->early_stop == 0)
        return train_usage_error("--early-stop-delta is the improvement --early-stop counts: "
                                 "give --early-stop P");
    if (l->steps > 0 && o->optim.schedule != NNT_SCHEDULE_CONSTANT &&
        o->optim.warmup_steps >= l->steps)
        return train_usage_error("--warmup %lld must be below --steps %lld with the %s "
                                 "schedule", (long long)o->optim.warmup_steps,
                                 (long long)l->steps, schedules[o->optim.schedule]);
    if ((train_opts_given(o, "decay-steps") || train_opts_given(o, "decay-shape")) &&
        o->optim.schedule != NNT_SCHEDULE_WSD)
        return train_usage_error("--decay-steps and --decay-shape shape the wsd schedule's "
                                 "decay: give --schedule wsd (not %s)",
                                 schedules[o->optim.schedule]);
    if (l->steps > 0 && o->optim.schedule == NNT_SCHEDULE_WSD &&
        o->optim.decay_steps > l->steps - o->optim.warmup_steps)
        return train_usage_error("--decay-steps %lld: the wsd schedule decays after the warmup "
                                 "(%lld steps of --steps %lld)", (long long)o->optim.decay_steps,
                                 (long long)o->optim.warmup_steps, (long long)l->steps);
    if (l->update_in_backward == 1 && o->optim.grad_clip > 0)
        return train_usage_error("--update-in-backward on needs --grad-clip 0 (clipping needs "
                                 "every gradient before the first update)");
    if (o->optim.lr >= 0 && o->optim.min_lr > o->optim.lr)
        return train_usage_error("--min-lr %g is above --lr %g", o->optim.min_lr, o->optim.lr);
    if (o->peak_gflops < 0)
        o->peak_gflops = 0;   /* 0: TRAIN_CPU_CORE_GFLOPS per CPU worker, once known */
    if (l->val_every < 0)
        l->val_every = l->steps / 10 > 0 ? l->steps / 10 : 1;
    /* validating costs at most ~1/30 of the training time (a forward is ~1/3 of a step), or
     * one batch per validation */
    if (r->val_batches < 0 && l->steps == 0)
        r->val_batches = 0;   /* an evaluation: every batch the held-out tokens hold */
    if (r->val_batches < 0) {
        int64_t tenth = l->val_every * l->accum / 10;
        r->val_batches = tenth < 1 ? 1 : tenth > 20 ? 20 : tenth;
    }
    return 0;
}
