/* nnt-train: train a GPT-2 or Llama-family language model with nnt (the library's main program, and an
 * example of its public API: nothing but nnt.h is used).
 *
 *   setup      tokenizer, model configuration, runtime context, model, data, optimizer,
 *              an optional resumed training state
 *   train      per step: zero the gradients; per micro-batch: load B*T+1 consecutive
 *              tokens, forward with targets, backward; one optimizer update
 *   report     a progress line per step, a CSV log, an SVG loss curve, a checkpoint,
 *              a text sample, a trace
 * See nnt-train(1) and nnt-train --help. */
#define _XOPEN_SOURCE 700   /* realpath */
#include "train.h"
#include "saved_options.h"

#include <errno.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* What --resume continues unless the command line says otherwise: the options of the data,
 * the batches, the length of the run, the optimizer and its schedule, the seed (the order
 * of --shuffle), the precision, the recompute, the tiles, the periodic and best checkpoints
 * and whether it ends with a sample, as the checkpoint's options string records them
 * (option name, key). */
static const char *const RESUMED[][2] = {
    {"data", "data"}, {"data-format", "data_format"}, {"val-data", "val_data"},
    {"val-split", "val_split"}, {"val-every", "val_every"}, {"val-batches", "val_batches"},
    {"shuffle", "shuffle"}, {"batch", "batch"}, {"seq", "seq"}, {"accum", "accum"},
    {"steps", "steps"}, {"optim", "optim"}, {"lr", "lr"}, {"beta1", "beta1"},
    {"beta2", "beta2"}, {"eps", "eps"}, {"weight-decay", "weight_decay"},
    {"momentum", "momentum"}, {"grad-clip", "grad_clip"}, {"schedule", "schedule"},
    {"warmup", "warmup"}, {"min-lr", "min_lr"}, {"seed", "seed"}, {"precision", "precision"},
    {"recompute", "recompute"}, {"tile-batch", "tile_batch"}, {"tile-seq", "tile_seq"},
    {"tile-channels", "tile_channels"}, {"tile-hidden", "tile_hidden"},
    {"tile-vocab", "tile_vocab"}, {"tile-heads", "tile_heads"}, {"save-every", "save_every"},
    {"save-best", "save_best"}, {"sample", "sample"}};
#define NRESUMED ((int)(sizeof RESUMED / sizeof RESUMED[0]))
#define NRESUMED_DATA 6   /* the first six: which data; one given, none taken */

/* Everything a run holds. */
typedef struct trainer {
    train_opts o;
    FILE *info;                   /* summary, progress and sample; NULL with --quiet       */
    nnt_ctx *ctx;
    nnt_tokenizer *tok;
    nnt_data *data;
    int64_t ntokens;              /* tokens trained on: the data's first ntokens          */
    int64_t held_out;             /* tokens of the data after those, held out (--val-split) */
    nnt_data *val_data;           /* --val-data, or NULL                                  */
    int64_t val_start, val_len;   /* the held-out tokens: [val_start, +val_len) of their
                                     source (val_data, else data)                         */
    int64_t val_batches;          /* windows of B*T + 1 tokens a validation; 0: none      */
    train_point *val_curve;       /* (nval) validation loss at the steps of validations   */
    int64_t nval, cap_val;
    int64_t val_runs;             /* validations in this run and their time               */
    double val_s;
    FILE *val_csv;
    nnt_layer *model;
    nnt_model_config cfg;
    int cfg_resumed;              /* cfg is the one the --resume checkpoint records         */
    char *resume_saved;           /* the --resume checkpoint's options string, when nnt-train
                                     wrote it (owned); else NULL                           */
    char *resume_tok[3];          /* tokenizer files recorded by the resumed run (owned)    */
    char *resume_opt[NRESUMED];   /* option values taken from the checkpoint (owned)       */
    char resumed_names[2048];     /* those that changed a value, for the summary ("" none)  */
    nnt_tiling tiling;            /* resolved: every entry > 0                            */
    int64_t nparams;
    nnt_optim *opt;
    nnt_trainer *tr;              /* the training loop (libnnt)                           */
    nnt_trainer_info ti;          /* its state after setup and after the run              */
    int64_t nonfinite;            /* the step whose loss was not finite, or 0             */
    int failed;                   /* a report could not be recorded                       */
    int64_t done;                 /* steps done before this run (resumed)                 */
    int ncpus, ncuda;
    double flops_per_token, peak_flops;
    double peak_measured;          /* CPU GEMM rate measured at start (FLOP/s), 0: none   */
    train_point *curve;           /* (ncurve) loss per step, resumed log included          */
    int64_t ncurve, cap_curve;
    double *step_ms;              /* (nrun) time of each step of this run                 */
    int64_t nrun;
    FILE *csv;
    int mem_nodes;                /* memory nodes in the CSV columns                      */
    char *path_csv, *path_svg, *path_ckpt, *path_weights, *path_llmc, *path_trace_table;
    char *path_val_csv, *path_best;
    int live;                     /* info is a terminal: one progress line redrawn in place */
    int line_open;                /* that line is on screen without its newline            */
    double loss_ema;              /* smoothed loss for the live line                        */
    int mpi;                      /* one rank of an MPI job (--distribute or several ranks) */
    int rank, nranks;             /* from the context (0, 1 without MPI)                    */
    char *private_dir;            /* rank > 0: where its outputs go, removed at the end     */
} trainer;

static volatile sig_atomic_t interrupted;
static nnt_trainer *running;   /* the trainer the signal stops */

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
    nnt_trainer_request_stop(running);   /* async-signal-safe: sets a flag */
    signal(SIGINT, SIG_DFL);   /* a second Ctrl-C ends the program at once */
}

/* ---- small helpers ------------------------------------------------------------------ */

/* A library call failed: its status and the message of the last failure in this thread
 * (whichever context recorded it). */
static int lib_error(const char *what, int rc)
{
    fprintf(stderr, "nnt-train: %s: %s: %s\n", what, nnt_strerror(rc), nnt_ctx_last_error(NULL));
    return 1;
}

static void say(trainer *t, const char *fmt, ...)
{
    if (!t->info)
        return;
    if (t->line_open) {   /* end the live progress line first */
        fputc('\n', t->info);
        t->line_open = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(t->info, fmt, ap);
    va_end(ap);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -1;
    for (char *s = p + 1; ; s++) {
        char c = *s;
        if (c == '/' || c == '\0') {
            *s = '\0';
            if (mkdir(p, 0777) && errno != EEXIST) {
                free(p);
                return -1;
            }
            *s = c;
        }
        if (!c)
            break;
    }
    free(p);
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3];
    s[2] ^= t, s[3] = rotl(s[3], 45);
    return result;
}

static void format_bytes(char *buf, size_t cap, int64_t bytes)
{
    double v = (double)bytes;
    if (v >= 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.2f GiB", v / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, cap, "%.1f MiB", v / (1024.0 * 1024));
}

/* ---- options that need the library: paths, tokenizer, model configuration -------------- */

static int file_exists(const char *what, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return 0;
    return train_usage_error("%s: cannot open '%s': %s", what, path, strerror(errno));
}

/* A data path: a file, a directory, or a pattern of files (nnt_data_open says if none
 * matches). */
static int data_exists(const char *what, const char *path)
{
    return strpbrk(path, "*?[") ? 0 : file_exists(what, path);
}

static int check_input_files(const train_opts *o)
{
    const char *data = o->data ? o->data : TRAIN_DEFAULT_DATA;
    if (data_exists(o->data ? "--data" : "default corpus (give --data FILE)", data))
        return 2;
    if (o->val_data && data_exists("--val-data", o->val_data))
        return 2;
    if (o->load_llmc && file_exists("--load-llmc", o->load_llmc))
        return 2;
    if (o->load_safetensors && file_exists("--load-safetensors", o->load_safetensors))
        return 2;
    if (o->load_hf && file_exists("--load-hf", o->load_hf))
        return 2;
    /* (--resume: checked first, by resume_run_options) */
    if (o->bpe_vocab && file_exists("--bpe-vocab", o->bpe_vocab))
        return 2;
    if (o->bpe_merges && file_exists("--bpe-merges", o->bpe_merges))
        return 2;
    return 0;
}

static int make_output_paths(trainer *t)
{
    const train_opts *o = &t->o;
    if (make_dirs(o->out_dir)) {
        fprintf(stderr, "nnt-train: --out: cannot create directory '%s': %s\n", o->out_dir,
                strerror(errno));
        return 1;
    }
    t->path_csv = join_path(o->out_dir, "train.csv");
    t->path_svg = join_path(o->out_dir, "loss.svg");
    t->path_ckpt = o->save ? strdup(o->save) : join_path(o->out_dir, "checkpoint.safetensors");
    t->path_weights = join_path(o->out_dir, "model.safetensors");
    t->path_llmc = join_path(o->out_dir, "model.bin");
    t->path_trace_table = join_path(o->out_dir, "trace-ops.txt");
    t->path_val_csv = join_path(o->out_dir, "val.csv");
    t->path_best = join_path(o->out_dir, "best.safetensors");
    if (!t->path_csv || !t->path_svg || !t->path_ckpt || !t->path_weights || !t->path_llmc ||
        !t->path_trace_table || !t->path_val_csv || !t->path_best) {
        fprintf(stderr, "nnt-train: out of memory\n");
        return 1;
    }
    return 0;
}

/* --tokenizer auto: the tokenizer.json of --load-hf DIR if it has one, else bytes. */
static void resolve_tokenizer(train_opts *o)
{
    if (o->tokenizer != TOKENIZER_AUTO)
        return;
    o->tokenizer = o->tokenizer_json ? TOKENIZER_JSON : TOKENIZER_BYTES;
    if (o->tokenizer_json || !o->load_hf)
        return;
    char *path = join_path(o->load_hf, "tokenizer.json");
    if (path && access(path, R_OK) == 0)
        o->tokenizer = TOKENIZER_JSON;
    free(path);
}

static int open_tokenizer(trainer *t)
{
    train_opts *o = &t->o;
    int rc;
    resolve_tokenizer(o);
    if (o->tokenizer == TOKENIZER_BPE)
        rc = nnt_tokenizer_bpe_load(o->bpe_vocab, o->bpe_merges, &t->tok);
    else if (o->tokenizer == TOKENIZER_JSON)   /* a directory means its tokenizer.json */
        rc = nnt_tokenizer_hf_load(o->tokenizer_json ? o->tokenizer_json : o->load_hf, &t->tok);
    else
        rc = nnt_tokenizer_bytes_create(&t->tok);
    return rc ? lib_error("cannot create the tokenizer", rc) : 0;
}

static int is_llama(const trainer *t)
{
    return t->cfg.family == NNT_FAMILY_LLAMA;
}

/* The configuration of a fresh or safetensors-loaded model: preset or the default small
 * GPT-2, then the individual overrides. */
static int model_config(trainer *t)
{
    const train_opts *o = &t->o;
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    int64_t tok_vocab = 0;
    nnt_tokenizer_vocab_size(t->tok, &tok_vocab);
    if (o->model) {
        if (nnt_model_preset(o->model, &c))
            return train_usage_error("--model: unknown preset '%s' (tiny, gpt2, gpt2-medium, "
                                     "gpt2-large, gpt2-xl, llama-tiny, smollm2-135m, "
                                     "tinyllama-1.1b, llama-3.2-1b, qwen3-0.6b)", o->model);
    } else {
        c.layers = 4, c.channels = 128, c.heads = 4, c.max_seq = 128, c.vocab = tok_vocab;
    }
    if (c.family != NNT_FAMILY_LLAMA &&
        (o->kv_heads > 0 || o->hidden > 0 || o->head_dim > 0 || o->qk_norm))
        return train_usage_error("--kv-heads, --hidden, --head-dim and --qk-norm apply to "
                                 "Llama-family models (--model llama-tiny, ...); GPT-2 has kv "
                                 "heads = heads, hidden = 4 C, head dim C / NH, no q/k norm");
    if (o->layers > 0) c.layers = o->layers;
    if (o->channels > 0) c.channels = o->channels;
    if (o->heads > 0) c.heads = o->heads;
    if (o->kv_heads > 0) c.kv_heads = o->kv_heads;
    if (o->hidden > 0) c.hidden = o->hidden;
    if (o->head_dim > 0) c.head_dim = o->head_dim;
    if (o->qk_norm) c.qk_norm = 1;
    if (o->vocab > 0) c.vocab = o->vocab;
    if (o->context > 0) c.max_seq = o->context;
    if (!c.head_dim && c.channels % c.heads)
        return train_usage_error("--channels %lld is not a multiple of --heads %lld (or give "
                                 "--head-dim)", (long long)c.channels, (long long)c.heads);
    if (c.head_dim % 2)
        return train_usage_error("--head-dim %lld: rotary positions need an even head "
                                 "dimension", (long long)c.head_dim);
    if (c.kv_heads > 0 && c.heads % c.kv_heads)
        return train_usage_error("--kv-heads %lld does not divide --heads %lld",
                                 (long long)c.kv_heads, (long long)c.heads);
    t->cfg = c;
    return 0;
}

/* The configuration of --load-hf DIR (its config.json). */
static int read_hf_config(trainer *t)
{
    int rc = nnt_model_hf_config(NULL, t->o.load_hf, &t->cfg);
    if (rc)
        return lib_error("--load-hf", rc);
    return 0;
}

/* Options that only the GPT-2 model has. */
static int check_family_options(trainer *t)
{
    const train_opts *o = &t->o;
    if (!is_llama(t))
        return 0;
    const char *opt = o->save_weights ? "--save-weights"
                    : o->save_llmc ? "--save-llmc" : o->load_safetensors ? "--load-safetensors"
                    : NULL;
    if (opt)
        return train_usage_error("%s is not available for Llama-family models yet%s", opt,
                                 o->save_weights || o->load_safetensors
                                     ? " (use --save-hf DIR / --load-hf DIR)" : "");
    return 0;
}

/* The tokenizer must not give ids the model does not have, where it encodes something. */
static int check_tokenizer_vocab(const trainer *t, const char *hint)
{
    int64_t tok_vocab = 0;
    nnt_tokenizer_vocab_size(t->tok, &tok_vocab);
    if (tok_vocab > t->cfg.vocab)
        return train_usage_error("the tokenizer has %lld tokens but the model's vocab is %lld "
                                 "(--vocab, --tokenizer%s)", (long long)tok_vocab,
                                 (long long)t->cfg.vocab, hint);
    return 0;
}

/* Checks once the configuration is known (also from an llm.c file). */
static int check_config(trainer *t)
{
    if (check_family_options(t))
        return 2;
    if (t->o.seq < 0)
        t->o.seq = t->cfg.max_seq < 128 ? t->cfg.max_seq : 128;
    if (t->o.seq > t->cfg.max_seq)
        return train_usage_error("--seq %lld is longer than the context %lld (--context)",
                                 (long long)t->o.seq, (long long)t->cfg.max_seq);
    /* the sample's prompt goes through the tokenizer; text data too (open_data) */
    if (t->o.sample > 0)
        return check_tokenizer_vocab(t, " (or --sample 0 with token files)");
    return 0;
}

/* ---- runtime and model --------------------------------------------------------------- */

static int start_runtime(trainer *t)
{
    const train_opts *o = &t->o;
    if (o->swap_dir && make_dirs(o->swap_dir)) {
        fprintf(stderr, "nnt-train: --swap-dir: cannot create directory '%s': %s\n",
                o->swap_dir, strerror(errno));
        return 1;
    }
    nnt_ctx_options co = NNT_CTX_OPTIONS_INIT;
    co.ncpus = (int)o->cpus, co.ncuda = (int)o->gpus, co.sched = o->sched;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (o->cpus > 0 && cores > 0 && o->cpus > cores) {   /* more workers than cores: slower */
        fprintf(stderr, "nnt-train: warning: --cpus %lld: this machine has %ld cores online; "
                "using %ld CPU workers\n", (long long)o->cpus, cores, cores);
        co.ncpus = (int)cores;
    }
    co.mem_gpu_mib = o->mem_gpu, co.mem_cpu_mib = o->mem_cpu;
    co.swap_dir = o->swap_dir, co.swap_mib = o->swap_size;
    co.mpi = t->mpi;
    co.distribution = o->distribute >= 0 ? o->distribute : NNT_DIST_SHARDED;
    co.release_weights = o->release_weights;
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    /* The tiles a rank drops are freed by one thread and allocated again by another
     * (StarPU-MPI's receives, the workers); glibc's per-thread arenas would keep each
     * thread's freed memory to itself. One arena, set before the runtime starts its
     * threads, lets them reuse it (GPT-2 124M, 2 ranks: RSS 1324-1357 MB instead of
     * 1451-1611; bench/RESULTS-mpi.md). */
    if (o->release_weights)
        mallopt(M_ARENA_MAX, 1);
#endif
    int rc = nnt_ctx_create(&co, &t->ctx);
    if (rc)
        return lib_error("cannot start the runtime", rc);
    nnt_ctx_rank(t->ctx, &t->rank, &t->nranks);
    nnt_ctx_workers(t->ctx, &t->ncpus, &t->ncuda);
    if (o->release_weights && t->rank == 0 &&
        (t->nranks < 2 || co.distribution == NNT_DIST_ROOT))
        fprintf(stderr, "nnt-train: warning: --release-weights: %s; nothing to release\n",
                t->nranks < 2 ? "one process holds every tile" : "--distribute root keeps "
                "every tile on rank 0");
    if (co.ncpus > 0 && t->ncpus < co.ncpus)
        fprintf(stderr, "nnt-train: warning: --cpus %d: StarPU started %d CPU workers (its "
                "limit STARPU_MAXCPUS, or cores kept for GPUs)\n", co.ncpus, t->ncpus);
    if ((rc = nnt_ctx_set_precision(t->ctx, (nnt_precision)o->precision)))
        return lib_error("--precision", rc);
    return 0;
}

static nnt_tiling tiling_overrides(const train_opts *o)
{
    nnt_tiling tl = NNT_TILING_INIT;
    tl.batch = o->tile_batch, tl.seq = o->tile_seq, tl.channels = o->tile_channels;
    tl.hidden = o->tile_hidden, tl.vocab = o->tile_vocab, tl.heads = o->tile_heads;
    return tl;
}

/* The configuration in an llm.c checkpoint's header (256 little-endian int32: magic
 * 20240326, version 3, maxT, V, L, NH, C, Vp), so that the model is created once with the
 * right tiling for it. */
static int read_llmc_config(trainer *t)
{
    const char *path = t->o.load_llmc;
    unsigned char h[7 * 4];
    int32_t v[7];
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(h, 1, sizeof h, f) : 0;
    if (f)
        fclose(f);
    for (int i = 0; i < 7; i++)
        v[i] = (int32_t)((uint32_t)h[4 * i] | (uint32_t)h[4 * i + 1] << 8 |
                         (uint32_t)h[4 * i + 2] << 16 | (uint32_t)h[4 * i + 3] << 24);
    if (got != sizeof h || v[0] != 20240326 || v[1] != 3 || v[2] < 1 || v[3] < 1 ||
        v[4] < 1 || v[5] < 1 || v[6] < 1) {
        fprintf(stderr, "nnt-train: --load-llmc %s: not an llm.c fp32 checkpoint (header magic "
                "20240326, version 3)\n", path);
        return 1;
    }
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    c.max_seq = v[2], c.vocab = v[3], c.layers = v[4], c.heads = v[5], c.channels = v[6];
    t->cfg = c;
    return 0;
}

static int create_model(trainer *t)
{
    const train_opts *o = &t->o;
    nnt_tiling over = tiling_overrides(o);
    int rc;
    if ((rc = nnt_model_tiling(t->ctx, &t->cfg, o->batch, o->seq, &over, &t->tiling)))
        return lib_error("nnt_model_tiling", rc);
    nnt_gpt_config g = {sizeof g, t->cfg.vocab, t->cfg.max_seq, t->cfg.layers, t->cfg.heads,
                        t->cfg.channels};
    if (o->load_llmc)
        rc = nnt_gpt_load_llmc(t->ctx, o->load_llmc, o->batch, o->seq, &t->tiling, &t->model);
    else if (o->load_safetensors)
        rc = nnt_gpt_load_safetensors(t->ctx, o->load_safetensors, &g, o->batch, o->seq,
                                      &t->tiling, &t->model);
    else if (o->load_hf)
        rc = nnt_model_load_hf(t->ctx, o->load_hf, o->batch, o->seq, &t->tiling, &t->model);
    else if (!(rc = nnt_model_create(t->ctx, &t->cfg, o->batch, o->seq, &t->tiling,
                                     &t->model)))
        rc = nnt_layer_init(t->model, (uint64_t)o->seed);
    if (rc)
        return lib_error(o->load_llmc ? "--load-llmc" : o->load_safetensors ? "--load-safetensors"
                         : o->load_hf ? "--load-hf" : "cannot create the model", rc);
    if (o->recompute && (rc = nnt_layer_set_recompute(t->model, 1)))
        return lib_error("--recompute", rc);
    nnt_model_config_of(t->model, &t->cfg);   /* kv_heads and hidden resolved */
    nnt_layer_num_params(t->model, NULL, &t->nparams);
    return 0;
}

/* The held-out tokens: --val-data, or the data's last held_out tokens; how many windows of
 * B*T + 1 tokens a validation reads (each window's targets are its inputs moved by one). */
static int open_validation(trainer *t)
{
    const train_opts *o = &t->o;
    int64_t bt = o->batch * o->seq;
    if (o->val_data) {
        int rc = nnt_data_open(o->val_data, (nnt_data_format)o->data_format, t->tok,
                               t->cfg.vocab, &t->val_data);
        if (rc)
            return lib_error("--val-data", rc);
        nnt_data_num_tokens(t->val_data, &t->val_len);
    } else {
        t->val_start = t->ntokens, t->val_len = t->held_out;
    }
    if (!o->val_data && t->held_out == 0)
        return 0;
    int64_t fit = t->val_len > bt ? (t->val_len - 1) / bt : 0;
    if (fit == 0) {
        fprintf(stderr, "nnt-train: %s holds %lld tokens, fewer than one batch of B x T + 1 = "
                "%lld: %s, or a smaller --batch/--seq\n", o->val_data ? o->val_data
                : "--val-split", (long long)t->val_len, (long long)(bt + 1),
                o->val_data ? "give more" : "hold out more (a larger --val-split)");
        return 2;
    }
    t->val_batches = o->val_batches > 0 && o->val_batches < fit ? o->val_batches : fit;
    return 0;
}

/* Text data is encoded by the tokenizer: its ids must exist in the model. */
static int check_text_vocab(const trainer *t)
{
    nnt_data_format train_format = NNT_DATA_LLMC, val_format = NNT_DATA_LLMC;
    if (t->data)
        nnt_data_format_of(t->data, &train_format);
    if (t->val_data)
        nnt_data_format_of(t->val_data, &val_format);
    if (train_format == NNT_DATA_TEXT || val_format == NNT_DATA_TEXT)
        return check_tokenizer_vocab(t, "");
    return 0;
}

static int open_data(trainer *t)
{
    const train_opts *o = &t->o;
    const char *path = o->data ? o->data : TRAIN_DEFAULT_DATA;
    if (o->steps == 0 && o->val_data) {   /* validation only: no training data read */
        int rc = open_validation(t);
        return rc ? rc : check_text_vocab(t);
    }
    nnt_data_format f = o->data ? (nnt_data_format)o->data_format
                      : o->data_format == NNT_DATA_AUTO ? NNT_DATA_TEXT
                                                        : (nnt_data_format)o->data_format;
    int rc = nnt_data_open(path, f, t->tok, t->cfg.vocab, &t->data);
    if (rc) {
        rc = lib_error(o->data ? "--data" : "default corpus", rc);
        check_tokenizer_vocab(t, "");   /* the likely cause of ids >= vocab in text */
        return rc;
    }
    nnt_data_num_tokens(t->data, &t->ntokens);
    t->held_out = (int64_t)((double)t->ntokens * o->val_split);
    t->ntokens -= t->held_out;
    if (t->ntokens < 2) {
        fprintf(stderr, "nnt-train: %s: %lld tokens%s, at least 2 are needed\n", path,
                (long long)t->ntokens, t->held_out ? " left for training by --val-split" : "");
        return 2;
    }
    if (o->shuffle && (t->ntokens - 1) / o->seq == 0) {
        fprintf(stderr, "nnt-train: --shuffle reads sequences of T + 1 = %lld tokens: %s has "
                "%lld training tokens\n", (long long)o->seq + 1, path, (long long)t->ntokens);
        return 2;
    }
    rc = open_validation(t);
    return rc ? rc : check_text_vocab(t);
}

static int create_optimizer(trainer *t)
{
    const train_opts *o = &t->o;
    int loaded = o->load_llmc || o->load_safetensors || o->load_hf;
    if (train_opts_resolve_lr(&t->o, loaded, t->nparams))
        return 2;
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.kind = (nnt_optim_kind)o->optim, oo.lr = o->lr;
    oo.beta1 = o->beta1, oo.beta2 = o->beta2, oo.eps = o->eps, oo.momentum = o->momentum;
    oo.weight_decay = o->weight_decay, oo.grad_clip = o->grad_clip;
    oo.schedule = (nnt_schedule)o->schedule, oo.warmup_steps = o->warmup;
    if (o->steps == 0)   /* validation only: no step, no schedule to end */
        oo.schedule = NNT_SCHEDULE_CONSTANT;
    oo.total_steps = o->steps, oo.min_lr = o->min_lr, oo.accum_steps = o->accum;
    int rc = nnt_optim_create(t->ctx, &oo, &t->opt);
    if (!rc)
        rc = nnt_optim_add_layer(t->opt, t->model);
    return rc ? lib_error("cannot create the optimizer", rc) : 0;
}

/* ---- training state ------------------------------------------------------------------ */

static void json_string(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    for (; *s && n + 3 < cap; s++) {
        if (*s == '"' || *s == '\\')
            buf[n++] = '\\';
        buf[n++] = (unsigned char)*s < 0x20 ? '?' : *s;
    }
    buf[n] = '\0';
}

/* Append , "key": "<path made absolute>" to the options string s (room for cap bytes). */
static void options_path(char *s, size_t cap, const char *key, const char *path)
{
    char *abs = path ? realpath(path, NULL) : NULL;
    const char *p = abs ? abs : path;
    size_t n = strlen(s);
    if (p && n + strlen(key) + 2 * strlen(p) + 16 < cap) {
        snprintf(s + n, cap - n, ", \"%s\": \"", key);
        json_string(s, cap - 4, p);
        strcat(s, "\"");
    }
    free(abs);
}

/* The options of this program that the checkpoints record besides the trainer's (the model,
 * batches, optimizer, data split and order, validation and checkpoints): JSON members. */
static char *options_string(const trainer *t)
{
    const train_opts *o = &t->o;
    size_t cap = 4096 + 2 * strlen(o->data ? o->data : TRAIN_DEFAULT_DATA) + 6 * 4096;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    snprintf(s, cap, "\"tokenizer\": \"%s\", \"data_format\": \"%s\", \"data\": \"",
             train_choice_name("tokenizer", o->tokenizer),
             train_choice_name("data-format", o->data_format));
    char *data_abs = o->data ? realpath(o->data, NULL) : NULL;   /* a pattern: as given */
    json_string(s, cap - 4, data_abs ? data_abs : o->data ? o->data : TRAIN_DEFAULT_DATA);
    free(data_abs);
    size_t n = strlen(s);
    snprintf(s + n, cap - n, "\", \"val_split\": %.17g, \"val_batches\": %lld, \"sample\": %lld, "
             "\"precision\": \"%s\", \"recompute\": %d, \"tile_batch\": %lld, \"tile_seq\": %lld, "
             "\"tile_channels\": %lld, \"tile_hidden\": %lld, \"tile_vocab\": %lld, "
             "\"tile_heads\": %lld", o->val_split, (long long)o->val_batches,
             (long long)o->sample, train_choice_name("precision", o->precision), o->recompute,
             (long long)o->tile_batch, (long long)o->tile_seq, (long long)o->tile_channels,
             (long long)o->tile_hidden, (long long)o->tile_vocab, (long long)o->tile_heads);
    if (o->val_data)
        options_path(s, cap, "val_data", o->val_data);
    /* where the tokenizer's files were (absolute), for nnt-generate --checkpoint */
    if (o->tokenizer == TOKENIZER_JSON)
        options_path(s, cap, "tokenizer_json", o->tokenizer_json ? o->tokenizer_json : o->load_hf);
    if (o->tokenizer == TOKENIZER_BPE) {
        options_path(s, cap, "bpe_vocab", o->bpe_vocab);
        options_path(s, cap, "bpe_merges", o->bpe_merges);
    }
    return s;
}

/* Integer value of "key": in a saved options string; -1 when absent. */
static int64_t options_int(const char *s, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = s ? strstr(s, pat) : NULL;
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static int save_state(trainer *t)
{
    int rc = nnt_trainer_save(t->tr, t->path_ckpt);
    return rc ? lib_error("cannot save the checkpoint", rc) : 0;
}

/* The saved model configuration must be this run's; batches may change (with a note). */
static int check_resumed_options(trainer *t, const char *saved)
{
    /* family, kv_heads and hidden: absent from checkpoints of nnt-train 0.2 (GPT-2 only);
     * head_dim and qk_norm from those before Qwen3 (heads of C / NH, no q/k norm) */
    const char *keys[10] = {"vocab", "max_seq", "layers", "heads", "channels", "family",
                            "kv_heads", "hidden", "head_dim", "qk_norm"};
    if (!saved || !strstr(saved, "\"program\": \"nnt-train\"")) {
        say(t, "note: %s was not written by nnt-train: only its tensor shapes were checked\n",
            t->o.resume);
        return 0;
    }
    const int64_t have[10] = {t->cfg.vocab, t->cfg.max_seq, t->cfg.layers, t->cfg.heads,
                              t->cfg.channels, t->cfg.family, t->cfg.kv_heads, t->cfg.hidden,
                              t->cfg.head_dim, t->cfg.qk_norm};
    for (int i = 0; i < 10; i++) {
        int64_t v = options_int(saved, keys[i]);
        if (v != have[i] && (i < 5 || v != -1))
            return train_usage_error("--resume %s: the checkpoint's model has %s %lld, this "
                                     "run %lld: give the same model options", t->o.resume,
                                     keys[i], (long long)v, (long long)have[i]);
    }
    if (options_int(saved, "batch") != t->o.batch || options_int(saved, "seq") != t->o.seq ||
        options_int(saved, "accum") != t->o.accum)
        say(t, "note: the checkpoint was trained with other --batch/--seq/--accum: the data "
               "order differs from an uninterrupted run\n");
    int64_t held = options_int(saved, "held_out");   /* -1: before nnt-train 0.3's validation */
    if (held != t->held_out && (held != -1 || t->held_out != 0))
        say(t, "note: the checkpoint held out %lld tokens of the data, this run %lld "
               "(--val-split): the training tokens and their order differ\n",
            (long long)(held < 0 ? 0 : held), (long long)t->held_out);
    if (options_int(saved, "steps") != t->o.steps && t->o.steps > 0)
        say(t, "note: the checkpoint was trained with --steps %lld: the learning-rate schedule "
               "now ends at step %lld instead\n", (long long)options_int(saved, "steps"),
            (long long)t->o.steps);
    return 0;
}

static int resume_state(trainer *t)
{
    int rc = nnt_trainer_resume(t->tr, t->o.resume);
    if (rc == NNT_E_FORMAT || rc == NNT_E_SHAPE) {
        /* The library checks the whole file first: nothing was changed. */
        fprintf(stderr, "nnt-train: --resume %s cannot be used: it is damaged, or it was saved "
                "for another model or optimizer (give the same --model/--layers/--channels/"
                "--heads/--vocab/--context and --optim, or no model options): %s\n", t->o.resume,
                nnt_ctx_last_error(NULL));
        return 2;
    }
    if (rc)
        return lib_error("--resume", rc);
    if ((rc = check_resumed_options(t, t->resume_saved)))
        return rc;
    int64_t shuffled = options_int(t->resume_saved, "shuffle");   /* -1: not recorded */
    if (shuffled < 0 ? t->o.shuffle : shuffled != t->o.shuffle)
        say(t, "note: the checkpoint read the data %s, this run %s: the data position "
               "restarts at 0\n", t->o.shuffle ? "in order" : "shuffled",
            t->o.shuffle ? "shuffles it" : "reads it in order");
    nnt_trainer_info_get(t->tr, &t->ti);
    t->done = t->ti.step;
    if (t->done >= t->o.steps && t->o.steps > 0)
        return train_usage_error("--resume %s is at step %lld: --steps %lld leaves nothing to "
                                 "do (--steps is the total)", t->o.resume,
                                 (long long)t->done, (long long)t->o.steps);
    if (t->o.stop_after > 0 && t->done >= t->o.stop_after)
        return train_usage_error("--resume %s is at step %lld: --stop-after %lld leaves "
                                 "nothing to do", t->o.resume, (long long)t->done,
                                 (long long)t->o.stop_after);
    return 0;
}

/* ---- summary and reporting ----------------------------------------------------------- */

/* The summary's data line: the training tokens, how a step reads them. */
static void print_data(trainer *t)
{
    const train_opts *o = &t->o;
    int64_t per_step = o->batch * o->seq * o->accum;
    if (!t->data) {
        say(t, "data:      none: --steps 0 only validates, on --val-data\n");
        return;
    }
    nnt_data_format format = NNT_DATA_TEXT;
    nnt_data_format_of(t->data, &format);
    char reading[64];
    if (format == NNT_DATA_TEXT)
        snprintf(reading, sizeof reading, "text, %s tokenizer",
                 train_choice_name("tokenizer", o->tokenizer));
    else
        snprintf(reading, sizeof reading, "%s token file",
                 format == NNT_DATA_LLMC ? "llm.c" : "nanoGPT");
    char held[64] = "";
    if (t->held_out)
        snprintf(held, sizeof held, " to train on (the last %lld held out)",
                 (long long)t->held_out);
    say(t, "data:      %s%s, %s: %lld tokens%s; %lld tokens a step (B %lld x T %lld x "
           "accum %lld), %.2f epochs in %lld steps%s\n", o->data ? o->data : TRAIN_DEFAULT_DATA,
        o->data ? "" : " (the default corpus)", reading, (long long)t->ntokens, held,
        (long long)per_step, (long long)o->batch, (long long)o->seq, (long long)o->accum,
        (double)per_step * (double)o->steps / (double)t->ntokens, (long long)o->steps,
        o->shuffle ? "; shuffled: its sequences of T + 1 tokens in a new order each epoch"
                   : "");
}

/* The summary's validation line: which tokens, how many, how often. */
static void print_validation(trainer *t)
{
    const train_opts *o = &t->o;
    if (!t->val_batches) {
        say(t, "validate:  no (--val-data FILE or --val-split X for a held-out loss)\n");
        return;
    }
    char what[96];
    if (o->val_data)
        snprintf(what, sizeof what, "%lld tokens", (long long)t->val_len);
    else
        snprintf(what, sizeof what, "the last %lld tokens of the data (--val-split %g)",
                 (long long)t->val_len, o->val_split);
    char when[96] = "once, without training (--steps 0)", every[32] = "every step";
    if (o->val_every > 1)
        snprintf(every, sizeof every, "every %lld steps", (long long)o->val_every);
    if (o->steps > 0)
        snprintf(when, sizeof when, "%s and after the last%s", every,
                 o->trace ? " (not during the traced steps)" : "");
    say(t, "validate:  %s%s%s: %lld batch%s of B x T (%lld tokens) %s\n",
        o->val_data ? o->val_data : "", o->val_data ? ", " : "", what,
        (long long)t->val_batches, t->val_batches > 1 ? "es" : "",
        (long long)(t->val_batches * o->batch * o->seq), when);
}

static void print_summary(trainer *t)
{
    const train_opts *o = &t->o;
    const nnt_model_config *c = &t->cfg;
    const char *sched = "?", *version = "?";
    nnt_ctx_sched(t->ctx, &sched);
    nnt_version(NULL, &version);
    say(t, "nnt-train %s\n", version);
    const char *loaded = o->load_llmc ? o->load_llmc : o->load_safetensors ? o->load_safetensors
                       : o->load_hf;
    char shape[200], heads[64] = "";
    if (c->head_dim * c->heads != c->channels)
        snprintf(heads, sizeof heads, ", head dim %lld", (long long)c->head_dim);
    if (c->qk_norm)
        snprintf(heads + strlen(heads), sizeof heads - strlen(heads), ", q/k norm");
    if (is_llama(t))
        snprintf(shape, sizeof shape, "Llama L %lld, C %lld, NH %lld, NKV %lld%s, hidden %lld, "
                 "V %lld, context %lld, %s head, rope theta %g%s", (long long)c->layers,
                 (long long)c->channels, (long long)c->heads, (long long)c->kv_heads, heads,
                 (long long)c->hidden, (long long)c->vocab, (long long)c->max_seq,
                 c->tied ? "tied" : "untied", c->rope.theta,
                 c->rope.scaling == NNT_ROPE_SCALING_LLAMA3 ? " (llama3 scaling)" : "");
    else
        snprintf(shape, sizeof shape, "GPT-2 L %lld, C %lld, NH %lld, V %lld, context %lld",
                 (long long)c->layers, (long long)c->channels, (long long)c->heads,
                 (long long)c->vocab, (long long)c->max_seq);
    say(t, "model:     %s: %.3fM parameters; %s%s", shape, t->nparams / 1e6,
        o->resume ? "weights of " : loaded ? "weights from " : "",
        o->resume ? o->resume : loaded ? loaded : "fresh init");
    if (!o->resume && !loaded)
        say(t, " (seed %lld)", (long long)o->seed);
    say(t, "%s%s\n", o->model ? ", preset " : "", o->model ? o->model : "");
    print_data(t);
    print_validation(t);
    say(t, "tiling:    batch %lld, seq %lld, channels %lld, hidden %lld, vocab %lld, heads "
           "%lld, head_dim %lld\n", (long long)t->tiling.batch, (long long)t->tiling.seq,
        (long long)t->tiling.channels, (long long)t->tiling.hidden, (long long)t->tiling.vocab,
        (long long)t->tiling.heads, (long long)t->tiling.head_dim);
    char ranks[128] = "";
    if (t->mpi)
        snprintf(ranks, sizeof ranks, "%d MPI ranks (distribution %s%s), each ", t->nranks,
                 train_choice_name("distribute", o->distribute >= 0 ? o->distribute
                                                                    : NNT_DIST_SHARDED),
                 o->release_weights ? ", weights released after use" : "");
    say(t, "runtime:   %s%d CPU workers, %d CUDA workers, scheduler %s; %s GEMM operands%s\n",
        ranks, t->ncpus, t->ncuda, sched, train_choice_name("precision", o->precision),
        o->recompute ? "; activation recompute" : "");
    const char *kernels = "?";
    nnt_ctx_kernels(t->ctx, &kernels);
    say(t, "kernels:   %s\n", kernels);
    if (o->steps > 0)   /* (validation only: no optimizer step) */
        say(t, "optimizer: %s, lr %g (%s schedule, warmup %lld, min %g), betas %g %g, eps %g, "
               "weight decay %g, momentum %g, grad clip %g\n",
            train_choice_name("optim", o->optim), o->lr,
            train_choice_name("schedule", o->schedule), (long long)o->warmup, o->min_lr,
            o->beta1, o->beta2, o->eps, o->weight_decay, o->momentum, o->grad_clip);
    if (o->steps == 0) {
        /* no steps: no MFU */
    } else if (t->peak_flops <= 0) {
        say(t, "MFU:       not computed: CUDA workers run tasks and their peak is not known "
               "(give --peak-gflops)\n");
    } else {
        say(t, "MFU:       6 N + 12 L T NH hd = %.1f MFLOP a token against a peak of %.1f GFLOP/s "
               "(%s)\n", t->flops_per_token / 1e6, t->peak_flops / 1e9,
            o->peak_gflops > 0 ? "--peak-gflops"
            : t->mpi ? "87.5 GFLOP/s per CPU worker of every rank"
            : t->peak_measured > 0 ? "measured at start: one 512 x 1024 x 1024 GEMM task per "
                                     "CPU worker, at the training's precision"
                                   : "87.5 GFLOP/s per CPU worker: it could not be measured");
    }
    int64_t tok_vocab = 0;
    nnt_tokenizer_vocab_size(t->tok, &tok_vocab);
    if (o->sample > 0 && c->vocab > tok_vocab)
        say(t, "note:      the model has %lld token ids, the %s tokenizer %lld: the sample "
               "shows the others as <id>\n", (long long)c->vocab,
            train_choice_name("tokenizer", o->tokenizer), (long long)tok_vocab);
    if (t->done)
        say(t, "resumed:   %s at step %lld, data position %llu\n", o->resume,
            (long long)t->done, (unsigned long long)t->ti.data_pos);
    if (t->done && t->resumed_names[0])
        say(t, "           with its run's %s (options given here override them)\n",
            t->resumed_names);
}

/* Append (step, loss) to a curve of *n points with room for *cap. */
static int append_point(train_point **curve, int64_t *n, int64_t *cap, int64_t step,
                        double loss)
{
    if (*n == *cap) {
        int64_t more = *cap ? 2 * *cap : 1024;
        train_point *c = realloc(*curve, (size_t)more * sizeof *c);
        if (!c)
            return lib_error("loss history", NNT_E_NOMEM);
        *curve = c, *cap = more;
    }
    (*curve)[(*n)++] = (train_point){step, loss};
    return 0;
}

/* Append a point to the loss curve. */
static int add_point(trainer *t, int64_t step, double loss)
{
    return append_point(&t->curve, &t->ncurve, &t->cap_curve, step, loss);
}

/* Append a point to the validation curve. */
static int add_val_point(trainer *t, int64_t step, double loss)
{
    return append_point(&t->val_curve, &t->nval, &t->cap_val, step, loss);
}

/* The validation of the lowest loss (the first of equals); -1 when there is none. */
static int64_t lowest_val(const trainer *t)
{
    int64_t best = t->nval ? 0 : -1;
    for (int64_t i = 1; i < t->nval; i++)
        if (t->val_curve[i].loss < t->val_curve[best].loss)
            best = i;
    return best;
}

static int record_step(trainer *t, int64_t step, double loss, double ms)
{
    if (add_point(t, step, loss))
        return 1;
    double *m = realloc(t->step_ms, (size_t)t->cap_curve * sizeof *m);
    if (!m)
        return lib_error("loss history", NNT_E_NOMEM);
    t->step_ms = m;
    t->step_ms[t->nrun++] = ms;
    return 0;
}

/* On resume: the rows of steps 1..done of an existing log (path: train.csv or val.csv), when
 * it has this run's columns, go into their curve (add) and are written again, so that log
 * and curve cover the whole training. Returns them as one string (NULL: nothing kept). */
static char *previous_log(trainer *t, const char *path, const char *header,
                          int (*add)(trainer *, int64_t, double))
{
    FILE *f = t->done ? fopen(path, "r") : NULL;
    char line[1024];
    size_t len = 0, cap = 0;
    char *kept = NULL;
    if (!f)
        return NULL;
    if (!fgets(line, sizeof line, f) || strcmp(line, header)) {
        fclose(f);
        return NULL;
    }
    int64_t prev = 0;
    while (fgets(line, sizeof line, f)) {
        char *end;
        int64_t step = strtoll(line, &end, 10);
        double loss = *end == ',' ? strtod(end + 1, NULL) : NAN;
        size_t n = strlen(line);
        if (step <= prev || step > t->done || !isfinite(loss) || line[n - 1] != '\n')
            break;
        if (len + n + 1 > cap) {
            char *k = realloc(kept, cap = 2 * (len + n + 1));
            if (!k)
                break;
            kept = k;
        }
        memcpy(kept + len, line, n + 1);
        len += n, prev = step;
        if (add(t, step, loss))
            break;
    }
    fclose(f);
    return kept;
}

/* Create a log with its header and, on resume, the earlier rows it had. */
static int start_log(trainer *t, FILE **f, const char *path, const char *header,
                     int (*add)(trainer *, int64_t, double))
{
    char *kept = previous_log(t, path, header, add);
    *f = fopen(path, "w");
    if (!*f) {
        free(kept);
        fprintf(stderr, "nnt-train: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    fputs(header, *f);
    if (kept)
        fputs(kept, *f);
    free(kept);
    return 0;
}

static int open_csv(trainer *t)
{
    nnt_mem_stats ms;
    memset(&ms, 0, sizeof ms);
    ms.size = sizeof ms;
    if (nnt_ctx_mem_stats(t->ctx, &ms, 0) == 0)
        t->mem_nodes = ms.nnodes;
    char header[1024] = "step,loss,lr,grad_norm,ms,tokens_per_s,mfu";
    for (int i = 0; i < t->mem_nodes; i++)
        snprintf(header + strlen(header), sizeof header - strlen(header),
                 ",%s_used_mib,%s_peak_mib", ms.node[i].name, ms.node[i].name);
    strcat(header, "\n");
    return start_log(t, &t->csv, t->path_csv, header, add_point);
}

/* val.csv, when there is validation: step, val_loss, tokens. */
static int open_val_csv(trainer *t)
{
    if (!t->val_batches)
        return 0;
    return start_log(t, &t->val_csv, t->path_val_csv, "step,val_loss,tokens\n", add_val_point);
}

/* What one step measured. */
typedef struct step_result {
    int64_t step;
    double loss, ms, lr, grad_norm;
    int validated;                /* a validation follows: its line after a full step line */
} step_result;

/* On a terminal, a full line every this many steps (and at the last); the others redraw
 * one line in place. */
static int64_t full_line_every(const trainer *t)
{
    int64_t n = t->o.steps / 10;
    return n > 0 ? n : 1;
}

/* "12m05s" / "3.2s": the time the remaining steps and validations take at this run's mean
 * step and validation times. */
static void format_eta(const trainer *t, int64_t step, char *buf, size_t cap)
{
    double sum = 0;
    for (int64_t i = 0; i < t->nrun; i++)
        sum += t->step_ms[i];
    double s = t->nrun ? sum / (double)t->nrun * (double)(t->o.steps - step) / 1e3 : 0;
    int64_t every = t->o.val_every;
    if (t->val_runs && every > 0)   /* the validations left, this step's included */
        s += t->val_s / (double)t->val_runs *
             (double)(t->o.steps / every - (step - 1) / every + (t->o.steps % every != 0));
    if (s >= 60)
        snprintf(buf, cap, "%lldm%02llds", (long long)(s / 60), (long long)s % 60);
    else
        snprintf(buf, cap, "%.1fs", s);
}

static void print_memory(trainer *t, const nnt_mem_stats *ms)
{
    for (int i = 0; i < ms->nnodes; i++) {
        char used[32], budget[32];
        format_bytes(used, sizeof used, ms->node[i].used_bytes);
        format_bytes(budget, sizeof budget, ms->node[i].budget_bytes);
        fprintf(t->info, "  %s %s%s%s", ms->node[i].name, used,
                ms->node[i].budget_bytes > 0 ? " of " : "",
                ms->node[i].budget_bytes > 0 ? budget : "");
    }
}

/* The model FLOP utilisation at tok_s tokens a second; NaN when the peak is not known (CUDA
 * workers without --peak-gflops). */
static double mfu_of(const trainer *t, double tok_s)
{
    return t->peak_flops > 0 ? t->flops_per_token * tok_s / t->peak_flops : NAN;
}

/* "MFU 12.3%" (the number width wide), or "MFU -" for NaN. */
static const char *mfu_text(double mfu, int width, char *buf, size_t len)
{
    if (isnan(mfu))
        snprintf(buf, len, "MFU %*s", width + 1, "-");
    else
        snprintf(buf, len, "MFU %*.1f%%", width, 100 * mfu);
    return buf;
}

/* The live line: step, loss, smoothed loss, tok/s, MFU, memory, ETA; redrawn in place. */
static void report_live(trainer *t, const step_result *r, double tok_s, double mfu,
                        const nnt_mem_stats *ms, int have_mem)
{
    char eta[32], mfu_buf[32];
    format_eta(t, r->step, eta, sizeof eta);
    fprintf(t->info, "\rstep %lld/%lld  loss %.4f (avg %.4f)  %.0f tok/s  %s",
            (long long)r->step, (long long)t->o.steps, r->loss, t->loss_ema, tok_s,
            mfu_text(mfu, 0, mfu_buf, sizeof mfu_buf));
    if (have_mem)
        print_memory(t, ms);
    fprintf(t->info, "  ETA %s\033[K", eta);
    fflush(t->info);
    t->line_open = 1;
}

static void report_step(trainer *t, const step_result *r)
{
    const train_opts *o = &t->o;
    double tokens = (double)(o->batch * o->seq * o->accum);
    double tok_s = tokens / (r->ms / 1e3);
    double mfu = mfu_of(t, tok_s);
    nnt_mem_stats ms;
    memset(&ms, 0, sizeof ms);
    ms.size = sizeof ms;
    int have_mem = nnt_ctx_mem_stats(t->ctx, &ms, 0) == 0;
    t->loss_ema = t->nrun > 1 ? 0.9 * t->loss_ema + 0.1 * r->loss : r->loss;
    int full = !t->live || r->step % full_line_every(t) == 0 || r->step == o->steps ||
               r->validated;
    if (o->print_loss) {
        printf("step %lld loss %.6f\n", (long long)r->step, r->loss);
        fflush(stdout);
    } else if (t->info && !full) {
        report_live(t, r, tok_s, mfu, &ms, have_mem);
    } else if (t->info) {
        if (t->line_open)
            fputs("\r\033[K", t->info);   /* the full line replaces the live one */
        t->line_open = 0;
        char mfu_buf[32];
        fprintf(t->info, "step %*lld/%lld  loss %.6f  lr %.3e  norm %7.4f  %8.1f ms  "
                "%8.0f tok/s  %s", (int)snprintf(NULL, 0, "%lld", (long long)o->steps),
                (long long)r->step, (long long)o->steps, r->loss, r->lr, r->grad_norm, r->ms,
                tok_s, mfu_text(mfu, 5, mfu_buf, sizeof mfu_buf));
        if (have_mem)
            print_memory(t, &ms);
        fputc('\n', t->info);
        fflush(t->info);
    }
    fprintf(t->csv, "%lld,%.9g,%.9g,%.9g,%.3f,%.1f,", (long long)r->step, r->loss, r->lr,
            r->grad_norm, r->ms, tok_s);
    if (!isnan(mfu))   /* empty when the peak is not known */
        fprintf(t->csv, "%.6f", mfu);
    for (int i = 0; i < t->mem_nodes; i++)
        fprintf(t->csv, ",%.3f,%.3f", have_mem ? ms.node[i].used_bytes / 1048576.0 : 0.0,
                have_mem ? ms.node[i].peak_bytes / 1048576.0 : 0.0);
    fputc('\n', t->csv);
    fflush(t->csv);
}

/* ---- training: nnt_trainer, reported here ----------------------------------------------- */

/* The last step of this run: --steps, or --stop-after when it comes first. */
static int64_t last_step(const trainer *t)
{
    const train_opts *o = &t->o;
    return o->stop_after > 0 && o->stop_after < o->steps ? o->stop_after : o->steps;
}

/* A validation's line (stdout under --print-loss: "val N loss X") and its row of val.csv. */
static void report_val(trainer *t, int64_t step, double loss, double seconds)
{
    const train_opts *o = &t->o;
    int64_t tokens = t->val_batches * o->batch * o->seq;
    if (o->print_loss) {
        printf("val %lld loss %.6f\n", (long long)step, loss);
        fflush(stdout);
    } else {
        say(t, "val  %*lld/%lld  loss %.6f  on %lld held-out tokens (%.2f s)\n",
            (int)snprintf(NULL, 0, "%lld", (long long)o->steps), (long long)step,
            (long long)o->steps, loss, (long long)tokens, seconds);
        if (t->info)
            fflush(t->info);
    }
    if (t->val_csv) {
        fprintf(t->val_csv, "%lld,%.9g,%lld\n", (long long)step, loss, (long long)tokens);
        fflush(t->val_csv);
    }
}

/* The trainer's reports: a step (its line, train.csv, the curve) or a validation (its
 * line, val.csv, the curve; the best checkpoint). Nonzero stops the run (out of memory). */
static int on_report(const nnt_trainer_report *rep, void *user)
{
    trainer *t = user;
    if (rep->event == NNT_TRAINER_VALIDATION) {
        if (add_val_point(t, rep->step, rep->loss))
            return t->failed = 1;
        t->val_runs++, t->val_s += rep->ms / 1e3;
        report_val(t, rep->step, rep->loss, rep->ms / 1e3);
        if (rep->saved_best && !t->o.print_loss)
            say(t, "saved %s: the lowest validation loss so far\n", t->path_best);
        return 0;
    }
    if (record_step(t, rep->step, rep->loss, rep->ms))
        return t->failed = 1;
    step_result r = {rep->step, rep->loss, rep->ms, rep->lr, rep->grad_norm, rep->validates};
    report_step(t, &r);
    if (!isfinite(rep->loss))
        t->nonfinite = rep->step;
    return 0;
}

static int create_trainer(trainer *t)
{
    const train_opts *o = &t->o;
    nnt_trainer_options to = NNT_TRAINER_OPTIONS_INIT;
    to.batch = o->batch, to.seq = o->seq, to.accum = o->accum, to.steps = o->steps;
    to.tile_batch = t->tiling.batch, to.tile_seq = t->tiling.seq;
    to.seed = (uint64_t)o->seed, to.shuffle = o->shuffle, to.train_tokens = t->ntokens;
    to.val_data = t->val_data, to.val_start = t->val_start, to.val_len = t->val_len;
    to.val_batches = t->val_batches, to.val_every = o->val_every;
    to.checkpoint = t->path_ckpt, to.save_every = o->save_every;
    to.best_checkpoint = o->save_best ? t->path_best : NULL;
    to.trace = o->trace, to.trace_table = t->path_trace_table;
    to.trace_steps = o->trace_steps > 0 ? o->trace_steps : 1;
    to.peak_flops = t->peak_flops, to.program = "nnt-train", to.callback = on_report, to.user = t;
    char *extra = options_string(t);
    to.extra_options = extra;
    int rc = extra ? nnt_trainer_create(t->model, t->opt, t->data, &to, &t->tr) : NNT_E_NOMEM;
    free(extra);
    t->ti.size = sizeof t->ti;
    if (!rc)
        rc = nnt_trainer_info_get(t->tr, &t->ti);
    return rc ? lib_error("cannot create the trainer", rc) : 0;
}

/* The run: the steps (or a validation with --steps 0). */
static int train_loop(trainer *t)
{
    running = t->tr;
    int rc = nnt_trainer_run(t->tr, last_step(t));
    running = NULL;
    nnt_trainer_info_get(t->tr, &t->ti);
    if (t->failed)
        return 1;
    if (t->nonfinite) {
        fprintf(stderr, "nnt-train: the loss is not finite at step %lld: lower --lr\n",
                (long long)t->nonfinite);
        return 1;
    }
    return rc ? lib_error("training", rc) : 0;
}

/* ---- after training: files, sample, trace table, final report ---------------------------- */

/* The json tokenizer's file, copied into the --save-hf directory as tokenizer.json (through
 * a temporary file and a rename), so that the directory is complete for --load-hf and for
 * transformers. Nothing to do for other tokenizers or a file already there. */
/* Copy src to dst through tmp (fsync, rename); 0 or -1 with errno set. */
static int copy_file(const char *src, const char *dst, const char *tmp)
{
    FILE *in = fopen(src, "rb"), *out = in ? fopen(tmp, "wb") : NULL;
    int ok = in && out;
    char buf[1 << 16];
    for (size_t n; ok && (n = fread(buf, 1, sizeof buf, in)) > 0;)
        ok = fwrite(buf, 1, n, out) == n;
    if (in && ferror(in))
        ok = 0;
    if (in)
        fclose(in);
    if (out && (fflush(out) != 0 || fsync(fileno(out)) != 0))
        ok = 0;
    if (out && fclose(out) != 0)
        ok = 0;
    if (ok && rename(tmp, dst) != 0)
        ok = 0;
    if (!ok && out)
        remove(tmp);
    return ok ? 0 : -1;
}

static int copy_tokenizer_json(const train_opts *o)
{
    if (o->tokenizer != TOKENIZER_JSON)
        return 0;
    const char *from = o->tokenizer_json ? o->tokenizer_json : o->load_hf;
    struct stat st, ds;
    int dir = stat(from, &st) == 0 && S_ISDIR(st.st_mode);
    char *src = dir ? join_path(from, "tokenizer.json") : strdup(from);
    char *dst = join_path(o->save_hf, "tokenizer.json");
    char *tmp = join_path(o->save_hf, "tokenizer.json.tmp");
    int rc = 0;
    if (!src || !dst || !tmp) {
        fprintf(stderr, "nnt-train: --save-hf: out of memory\n");
        rc = 1;
    } else if (stat(src, &st) == 0 && stat(dst, &ds) == 0 && st.st_dev == ds.st_dev &&
             st.st_ino == ds.st_ino)
        rc = 0;   /* --save-hf is the directory the tokenizer came from */
    else if (copy_file(src, dst, tmp) != 0) {
        fprintf(stderr, "nnt-train: --save-hf: cannot copy %s to %s: %s\n", src, dst,
                strerror(errno));
        rc = 1;
    }
    free(src), free(dst), free(tmp);
    return rc;
}

static int write_outputs(trainer *t)
{
    const train_opts *o = &t->o;
    int rc;
    if (t->nrun && !o->no_save && (rc = save_state(t)))
        return rc;
    if (o->save_weights && (rc = nnt_gpt_save_safetensors(t->model, t->path_weights)))
        return lib_error("--save-weights", rc);
    if (o->save_llmc && (rc = nnt_gpt_save_llmc(t->model, t->path_llmc)))
        return lib_error("--save-llmc", rc);
    nnt_hf_save_options hf = NNT_HF_SAVE_OPTIONS_INIT;
    hf.max_shard_bytes = o->save_hf_shard_bytes;
    if (o->save_hf && (rc = nnt_model_save_hf_ex(t->model, o->save_hf, &hf)))
        return lib_error("--save-hf", rc);
    if (o->save_hf && copy_tokenizer_json(o))
        return 1;
    if (o->steps == 0)
        return 0;   /* validation only: no loss curve */
    char title[160];
    snprintf(title, sizeof title, "nnt-train: %s L%lld C%lld NH%lld, loss per step",
             is_llama(t) ? "Llama" : "GPT-2", (long long)t->cfg.layers,
             (long long)t->cfg.channels, (long long)t->cfg.heads);
    if (train_svg_write(t->path_svg, t->curve, t->ncurve, t->val_curve, t->nval, title)) {
        fprintf(stderr, "nnt-train: cannot write %s: %s\n", t->path_svg, strerror(errno));
        return 1;
    }
    return 0;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static int utf8_length(const unsigned char *s, size_t n)
{
    int len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (s[0] >= 0xf5 || (size_t)len > n)
        return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* Text with newlines, tabs, printable ASCII and valid UTF-8 as they are; other bytes as
 * \xHH, so that a sample cannot send control sequences to the terminal. */
static void print_safely(FILE *f, const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        int n = s[i] >= 0x80 ? utf8_length(s + i, len - i) : 0;
        if (n) {
            fwrite(s + i, 1, (size_t)n, f);
            i += (size_t)n;
        } else {
            if (s[i] == '\n' || s[i] == '\t' || (s[i] >= 0x20 && s[i] < 0x7f))
                fputc(s[i], f);
            else
                fprintf(f, "\\x%02x", s[i]);
            i++;
        }
    }
}

static int decode(trainer *t, const int32_t *ids, size_t n, char **text, size_t *len)
{
    size_t cap = 8 * n + 16;
    for (int tries = 0; tries < 2; tries++) {
        char *buf = realloc(*text, cap);
        if (!buf)
            return lib_error("sample", NNT_E_NOMEM);
        *text = buf;
        int rc = nnt_tokenizer_decode(t->tok, ids, n, buf, cap, len);
        if (rc == 0)
            return 0;
        if (rc != NNT_E_INVAL || *len < cap)
            return lib_error("nnt_tokenizer_decode", rc);
        cap = *len + 1;
    }
    return lib_error("nnt_tokenizer_decode", NNT_E_INVAL);
}

/* The text of n ids: runs of ids the tokenizer knows are decoded together (so that
 * characters split over several tokens come out whole); other ids (a model vocabulary
 * larger than the tokenizer's) are shown as <id>. */
static int print_tokens(trainer *t, FILE *f, const int32_t *ids, size_t n)
{
    int64_t vocab = 0;
    char *text = NULL;
    size_t len = 0;
    int rc = nnt_tokenizer_vocab_size(t->tok, &vocab);
    for (size_t i = 0; i < n && !rc;) {
        size_t j = i;
        while (j < n && ids[j] >= 0 && ids[j] < vocab)
            j++;
        if (j > i && !(rc = decode(t, ids + i, j - i, &text, &len)))
            print_safely(f, text, len);
        if (j < n)
            fprintf(f, "<%d>", (int)ids[j++]);
        i = j;
    }
    free(text);
    return rc;
}

static int print_sample(trainer *t)
{
    const train_opts *o = &t->o;
    size_t plen = strlen(o->prompt), nprompt = 0;
    int32_t *ids = malloc((plen + 1 + (size_t)o->sample) * sizeof *ids);
    int rc = ids ? nnt_tokenizer_encode(t->tok, o->prompt, plen, ids, plen + 1, &nprompt)
                 : NNT_E_NOMEM;
    if (rc || nprompt == 0) {
        free(ids);
        return rc ? lib_error("--prompt", rc)
                  : train_usage_error("--prompt: gives no tokens");
    }
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = o->temperature, s.top_k = o->top_k, s.seed = xoshiro_next(t->ti.rng);
    rc = nnt_model_generate(t->model, ids, (int64_t)nprompt, o->sample, &s, ids + nprompt);
    if (rc)
        rc = lib_error("nnt_model_generate", rc);
    else if (t->info) {
        fprintf(t->info, "---- sample: %lld tokens, temperature %g, top-k %lld ----\n",
                (long long)o->sample, o->temperature, (long long)o->top_k);
        rc = print_tokens(t, t->info, ids, nprompt + (size_t)o->sample);
        fputs("\n----\n", t->info);
    }
    free(ids);
    return rc;
}

static void print_trace_table(trainer *t)
{
    FILE *f = fopen(t->path_trace_table, "r");
    char line[512];
    if (!f)
        return;
    say(t, "per-op table of the traced steps (%s):\n", t->path_trace_table);
    while (fgets(line, sizeof line, f))
        say(t, "%s", line);
    fclose(f);
}

/* Peak bytes per memory node, bytes moved between nodes and time spent waiting for data
 * since the runtime started (nnt_ctx_mem_stats). */
static void print_memory_report(trainer *t)
{
    nnt_mem_stats ms;
    memset(&ms, 0, sizeof ms);
    ms.size = sizeof ms;
    if (nnt_ctx_mem_stats(t->ctx, &ms, 0) != 0)
        return;
    say(t, "\nmemory:   ");
    for (int i = 0; i < ms.nnodes; i++) {
        char peak[32], budget[32];
        format_bytes(peak, sizeof peak, ms.node[i].peak_bytes);
        format_bytes(budget, sizeof budget, ms.node[i].budget_bytes);
        say(t, "%s%s peak %s%s%s", i ? ", " : "", ms.node[i].name, peak,
            ms.node[i].budget_bytes > 0 ? " of " : "",
            ms.node[i].budget_bytes > 0 ? budget : "");
    }
    char moved[32];
    format_bytes(moved, sizeof moved, ms.bytes_moved);
    say(t, "; %s moved between nodes; %.3f s of worker time waiting for data", moved,
        ms.transfer_wait_s);
}

/* The times: the steps (train_s), the sample (sample_s, 0 without one), all (total_s). */
static void print_final_report(trainer *t, double train_s, double sample_s, double total_s)
{
    const train_opts *o = &t->o;
    double sum = 0;
    for (int64_t i = 1; i < t->nrun; i++)
        sum += t->step_ms[i];
    if (o->steps == 0)
        say(t, "\nno training (--steps 0)");
    else
        say(t, "\ntrained steps %lld..%lld in %.2f s", (long long)(t->done + 1),
            (long long)(t->done + t->nrun), train_s);
    if (t->nrun > 1) {
        double ms = sum / (double)(t->nrun - 1);
        double tok_s = (double)(o->batch * o->seq * o->accum) / (ms / 1e3);
        double mfu = mfu_of(t, tok_s);
        char mfu_buf[32];
        say(t, ": %.1f ms/step, %.0f tokens/s%s%s (mean without the first step)", ms, tok_s,
            isnan(mfu) ? "" : ", ", isnan(mfu) ? "" : mfu_text(mfu, 0, mfu_buf, sizeof mfu_buf));
    }
    if (t->nrun)
        say(t, "; last loss %.6f", t->curve[t->ncurve - 1].loss);
    if (t->nval) {
        const train_point *last = &t->val_curve[t->nval - 1];
        const train_point *low = &t->val_curve[lowest_val(t)];
        say(t, "\nvalidation: loss %.6f (perplexity %.4g) at step %lld (lowest %.6f at step "
            "%lld)", last->loss, exp(last->loss), (long long)last->step, low->loss,
            (long long)low->step);
        if (t->val_runs)
            say(t, "; %lld validation%s in %.2f s%s", (long long)t->val_runs,
                t->val_runs > 1 ? "s" : "", t->val_s, o->steps ? " of the training time" : "");
    }
    if (sample_s > 0)
        say(t, "\nsample:   %lld tokens in %.2f s (%.1f tokens/s)", (long long)o->sample,
            sample_s, (double)o->sample / sample_s);
    say(t, "\ntotal:    %.2f s with start-up and files", total_s);
    print_memory_report(t);
    int files = o->steps || o->save_hf || o->save_weights || o->save_llmc || o->trace;
    say(t, "\nwritten:%s\n", files ? "" : " nothing (--steps 0: the validation is printed)");
    if (o->steps > 0)
        say(t, "  %s  (log: step, loss, lr, grad norm, ms, tokens/s, MFU, memory)\n"
               "  %s  (loss curve)\n", t->path_csv, t->path_svg);
    if (t->val_csv)
        say(t, "  %s  (validation log: step, loss on the held-out tokens, tokens)\n",
            t->path_val_csv);
    if (o->save_best && t->ti.best_val_loss < HUGE_VAL)
        say(t, "  %s  (checkpoint of the lowest validation loss, %.6f)\n", t->path_best,
            t->ti.best_val_loss);
    if (t->nrun && !o->no_save)
        say(t, "  %s  (checkpoint: continue with --resume, generate with nnt-generate "
               "--checkpoint)\n", t->path_ckpt);
    if (o->save_weights)
        say(t, "  %s  (weights, Hugging Face safetensors)\n", t->path_weights);
    if (o->save_llmc)
        say(t, "  %s  (weights, llm.c fp32 checkpoint)\n", t->path_llmc);
    if (o->save_hf)
        say(t, "  %s/  (Hugging Face model directory: config.json, %s)\n", o->save_hf,
            o->save_hf_shard_bytes ? "weights in shards when above --save-hf-shard-size"
                                   : "model.safetensors");
    if (o->trace)
        say(t, "  %s  (trace timeline)\n  %s  (per-op table)\n", o->trace, t->path_trace_table);
}

/* ---- main ---------------------------------------------------------------------------- */

static void quiet_log(int level, const char *msg, void *user)
{
    (void)level, (void)msg, (void)user;
}

/* The CPU workers' GEMM rate, measured: a (W x 512, 1024) x (1024, 1024) product cut into
 * one 512-row tile per worker (one task each, about 1 GFLOP), best of 3 after a warm-up.
 * 0 when it cannot be measured (e.g. a RAM budget below the tiles' 10 MiB). */
static double measure_cpu_peak(trainer *t)
{
    int64_t w = t->ncpus > 0 ? t->ncpus : 1, rows = 512, n = 1024;
    int64_t shape_a[2] = {w * rows, n}, tile_a[2] = {rows, n}, shape_b[2] = {n, n};
    nnt_tensor *a = NULL, *b = NULL, *c = NULL;
    double best = 0;
    nnt_log_set(quiet_log, NULL);   /* a failure here only means: no measured peak */
    if (!nnt_tensor_create(t->ctx, NNT_FP32, 2, shape_a, tile_a, &a) &&
        !nnt_tensor_create(t->ctx, NNT_FP32, 2, shape_b, shape_b, &b) &&
        !nnt_tensor_create(t->ctx, NNT_FP32, 2, shape_a, tile_a, &c) &&
        !nnt_tensor_fill(a, 0.5) && !nnt_tensor_fill(b, 0.25) && !nnt_ctx_wait(t->ctx)) {
        for (int round = 0; round < 4; round++) {
            double start = now_s();
            if (nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, a, b, 0.0, c, 1, 0) ||
                nnt_ctx_wait(t->ctx))
                break;
            double rate = 2.0 * (double)(w * rows) * (double)n * (double)n / (now_s() - start);
            if (round > 0 && rate > best)
                best = rate;
        }
    }
    nnt_tensor_destroy(a);
    nnt_tensor_destroy(b);
    nnt_tensor_destroy(c);
    nnt_log_set(NULL, NULL);        /* back to the default: stderr */
    return best;
}

static int model_options_given(const train_opts *o)
{
    return o->model || o->layers > 0 || o->channels > 0 || o->heads > 0 || o->kv_heads > 0 ||
           o->hidden > 0 || o->head_dim > 0 || o->qk_norm || o->vocab > 0 || o->context > 0 ||
           o->load_llmc || o->load_safetensors || o->load_hf;
}

/* The tokenizer of the resumed run (saved: its options) when this run names none. */
static int resume_tokenizer(trainer *t, const char *saved)
{
    train_opts *o = &t->o;
    if (o->tokenizer != TOKENIZER_AUTO || o->tokenizer_json || o->bpe_vocab || o->load_hf)
        return 0;
    char *kind = saved_option_str(saved, "tokenizer");
    const char *keys[3] = {"tokenizer_json", "bpe_vocab", "bpe_merges"};
    for (int i = 0; i < 3; i++)
        t->resume_tok[i] = saved_option_str(saved, keys[i]);
    int rc = 0;
    if (kind && !strcmp(kind, "json")) {
        if (!t->resume_tok[0] || access(t->resume_tok[0], R_OK))
            rc = train_usage_error("--resume %s was trained with --tokenizer json%s%s, which "
                                   "is not there: give --tokenizer json --tokenizer-json FILE",
                                   o->resume, t->resume_tok[0] ? " on " : "",
                                   t->resume_tok[0] ? t->resume_tok[0] : "");
        o->tokenizer = TOKENIZER_JSON, o->tokenizer_json = t->resume_tok[0];
    } else if (kind && !strcmp(kind, "bpe")) {
        if (!t->resume_tok[1] || !t->resume_tok[2] || access(t->resume_tok[1], R_OK) ||
            access(t->resume_tok[2], R_OK))
            rc = train_usage_error("--resume %s was trained with --tokenizer bpe on files that "
                                   "are not there: give --tokenizer bpe --bpe-vocab FILE "
                                   "--bpe-merges FILE", o->resume);
        o->tokenizer = TOKENIZER_BPE;
        o->bpe_vocab = t->resume_tok[1], o->bpe_merges = t->resume_tok[2];
    }
    free(kind);
    return rc;
}

/* The --resume checkpoint's caller section (st, cleared by the caller): 0, or the exit
 * status after a message. */
static int resume_info(const trainer *t, nnt_train_state *st)
{
    int rc = nnt_train_state_info(NULL, t->o.resume, st);
    if (rc == 0)
        return 0;
    fprintf(stderr, "nnt-train: --resume %s cannot be used: %s\n", t->o.resume,
            nnt_ctx_last_error(NULL));
    return rc == NNT_E_FORMAT ? 2 : 1;
}

/* Add "--name value" (a flag: "--name"; a real as %g, it is saved with 17 digits) to the
 * summary's list of the options taken from the checkpoint. */
static void note_resumed(trainer *t, const char *name, const char *text)
{
    char *end = NULL, shown[40];
    double v = strtod(text, &end);
    int real = *text && !*end && strpbrk(text, ".eE");
    snprintf(shown, sizeof shown, "%g", v);
    size_t n = strlen(t->resumed_names);
    int flag = train_opts_is_flag(name);   /* only ever turned on here */
    snprintf(t->resumed_names + n, sizeof t->resumed_names - n, "%s--%s%s%s", n ? " " : "",
             name, flag ? "" : " ", flag ? "" : real ? shown : text);
}

/* --resume: each option of RESUMED that the command line does not give takes the value the
 * checkpoint's run had (nnt-train 0.3 checkpoints record them; older ones record some),
 * so that `nnt-train --resume FILE` continues that run; the data options only when none of
 * them is given (other data: its own split and validation). */
static int resume_run_options(trainer *t)
{
    train_opts *o = &t->o;
    if (!o->resume)
        return 0;
    if (file_exists("--resume", o->resume))
        return 2;
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    int rc = resume_info(t, &st);
    if (rc)
        return rc;
    int data_given = 0;
    for (int i = 0; i < NRESUMED_DATA; i++)
        data_given |= train_opts_given(o, RESUMED[i][0]);
    if (st.options && strstr(st.options, "\"program\": \"nnt-train\""))
        t->resume_saved = strdup(st.options);   /* (NULL, out of memory: as not recorded) */
    nnt_train_state_clear(&st);
    const char *saved = t->resume_saved;
    for (int i = data_given ? NRESUMED_DATA : 0; saved && i < NRESUMED && rc == 0; i++) {
        /* no checkpoints asked for (--no-save), or no training (--steps 0): none to keep */
        int saving = !strncmp(RESUMED[i][0], "save-", 5);
        if (saving && (o->no_save || (train_opts_given(o, "steps") && o->steps == 0)))
            continue;
        char *text = saved_option_text(saved, RESUMED[i][1]);
        if (!text || (i == 0 && !strcmp(text, TRAIN_DEFAULT_DATA))) {
            free(text);   /* not recorded, or the default corpus (no --data) */
            continue;
        }
        t->resume_opt[i] = text;
        int changed = 0;
        rc = train_opts_default_to(o, RESUMED[i][0], text, &changed);
        if (changed)
            note_resumed(t, RESUMED[i][0], text);
    }
    return rc;
}

/* --resume without model options: the model the checkpoint records (nnt 0.3 checkpoints);
 * without tokenizer options: the tokenizer that run used. */
static int resume_defaults(trainer *t)
{
    train_opts *o = &t->o;
    if (!o->resume)
        return 0;
    int rc = t->resume_saved ? resume_tokenizer(t, t->resume_saved) : 0;
    if (rc || model_options_given(o))
        return rc;
    t->cfg_resumed = nnt_model_train_state_config(NULL, o->resume, &t->cfg) == 0;
    return 0;
}

static int setup(trainer *t)
{
    train_opts *o = &t->o;
    int rc;
    int loaded = o->load_llmc || o->load_safetensors || o->load_hf;
    if ((rc = resume_run_options(t)) || (rc = train_opts_resolve(o, loaded)) ||
        (rc = check_input_files(o)) || (rc = resume_defaults(t)) || (rc = open_tokenizer(t)) ||
        (rc = o->load_llmc ? read_llmc_config(t) : o->load_hf ? read_hf_config(t)
              : t->cfg_resumed ? 0 : model_config(t)) ||
        (rc = check_config(t)) || (rc = make_output_paths(t)) || (rc = start_runtime(t)) ||
        (rc = create_model(t)) || (rc = open_data(t)) || (rc = create_optimizer(t)))
        return rc;
    /* over MPI the GEMM timing would time one rank's share of the tiles only: the nominal
     * peak of every rank's workers instead */
    if (o->peak_gflops > 0)
        t->peak_flops = 1e9 * o->peak_gflops;
    else if (t->ncuda)
        t->peak_flops = 0;   /* GPUs run tasks and their peak is not known: no MFU */
    else if (!t->mpi && o->steps > 0 && (t->peak_measured = measure_cpu_peak(t)) > 0)
        t->peak_flops = t->peak_measured;
    else
        t->peak_flops = 1e9 * TRAIN_CPU_CORE_GFLOPS * (t->ncpus ? t->ncpus : 1) *
                        (t->nranks > 1 ? t->nranks : 1);
    if ((rc = create_trainer(t)) || (o->resume && (rc = resume_state(t))))
        return rc;
    t->flops_per_token = t->ti.flops_per_token;
    if (o->steps == 0)   /* validation only: the logs of --out (perhaps a training's) kept */
        return 0;
    return open_csv(t) || open_val_csv(t);
}

/* ---- several ranks (mpirun, srun) ------------------------------------------------------ */

/* This process's rank and the job's size from the launcher's environment (Open MPI's mpirun,
 * PMI as srun and MPICH set it, Slurm's own): 0 and 1 when not started as an MPI job. */
static void launcher_rank(int *rank, int *size)
{
    static const char *const vars[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                          {"PMI_RANK", "PMI_SIZE"},
                                          {"SLURM_PROCID", "SLURM_NTASKS"}};
    *rank = 0, *size = 1;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *r = getenv(vars[i][0]), *n = getenv(vars[i][1]);
        if (r && n && atoi(n) >= 1) {
            *rank = atoi(r), *size = atoi(n);
            return;
        }
    }
}

/* Remove a directory of files (a rank's private outputs: no subdirectories). */
static void remove_flat_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *path = join_path(dir, e->d_name);
        if (path)
            remove(path);
        free(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Only rank 0 prints and keeps files. Ranks > 0 print nothing but errors; the library writes
 * checkpoints and weights on rank 0 only (every rank takes part in the reads of a save),
 * and this program's own files (log, loss curve) go to a private temporary directory,
 * removed at the end. */
static int quiet_rank(trainer *t, int rank)
{
    train_opts *o = &t->o;
    const char *tmpdir = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/nnt-train-rank%d-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp",
             rank);
    if (!mkdtemp(tmpl)) {
        fprintf(stderr, "nnt-train: rank %d: cannot create a directory %s: %s\n", rank, tmpl,
                strerror(errno));
        return 1;
    }
    if (!(t->private_dir = strdup(tmpl)) || !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "nnt-train: rank %d: cannot silence its output\n", rank);
        return 1;
    }
    t->info = NULL;
    t->live = 0;
    o->out_dir = t->private_dir;
    if (o->save)
        o->save = NULL;   /* the checkpoint goes to out_dir */
    if (o->save_hf)
        o->save_hf = t->private_dir;
    /* --trace stays: tracing is collective under MPI (rank 0 writes every rank's tasks) */
    return 0;
}

static void teardown(trainer *t)
{
    if (t->csv)
        fclose(t->csv);
    if (t->val_csv)
        fclose(t->val_csv);
    nnt_optim_destroy(t->opt);
    nnt_trainer_destroy(t->tr);
    nnt_layer_destroy(t->model);
    nnt_data_close(t->data);
    nnt_data_close(t->val_data);
    nnt_tokenizer_destroy(t->tok);
    if (t->ctx)
        nnt_ctx_destroy(t->ctx);
    free(t->curve), free(t->step_ms), free(t->val_curve);
    free(t->path_val_csv), free(t->path_best);
    free(t->path_csv), free(t->path_svg), free(t->path_ckpt), free(t->path_weights);
    free(t->path_llmc), free(t->path_trace_table);
    for (int i = 0; i < 3; i++)
        free(t->resume_tok[i]);
    for (int i = 0; i < NRESUMED; i++)
        free(t->resume_opt[i]);
    free(t->resume_saved);
    if (t->private_dir)
        remove_flat_dir(t->private_dir);
    free(t->private_dir);
}

static int run(trainer *t)
{
    double start = now_s();
    int rc = setup(t);
    if (rc)
        return rc;
    print_summary(t);
    signal(SIGINT, on_sigint);
    double train_start = now_s();
    rc = train_loop(t);
    double train_s = now_s() - train_start, sample_s = 0;
    signal(SIGINT, SIG_DFL);
    if (interrupted && t->o.no_save)
        say(t, "interrupted after step %lld (--no-save: no checkpoint)\n",
            (long long)(t->done + t->nrun));
    else if (interrupted)
        say(t, "interrupted after step %lld: saving; continue with the same options and "
               "--resume %s\n", (long long)(t->done + t->nrun), t->path_ckpt);
    if (!rc)
        rc = write_outputs(t);
    if (!rc && t->o.sample > 0 && !interrupted) {
        double sample_start = now_s();
        rc = print_sample(t);
        sample_s = now_s() - sample_start;
    }
    if (!rc && t->o.trace)
        print_trace_table(t);
    if (!rc)
        print_final_report(t, train_s, sample_s, now_s() - start);
    return rc ? rc : interrupted ? 130 : 0;
}

int main(int argc, char **argv)
{
    trainer t;
    memset(&t, 0, sizeof t);
    /* One line per step even into a file or a pipe (tail -f of a long run's log). */
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = train_opts_parse(argc, argv, &t.o);
    if (rc)
        return rc == 1 ? 0 : 2;
    t.info = t.o.quiet ? NULL : t.o.print_loss ? stderr : stdout;
    /* On a terminal one progress line is redrawn in place (NNT_TRAIN_LIVE=0: one line per
     * step, as into a file or a pipe). */
    const char *live = getenv("NNT_TRAIN_LIVE");
    t.live = t.info && !t.o.print_loss && isatty(fileno(t.info)) && !(live && !strcmp(live, "0"));
    int rank, size;
    launcher_rank(&rank, &size);
    t.mpi = t.o.distribute >= 0 || size > 1;
    rc = t.mpi && rank > 0 ? quiet_rank(&t, rank) : 0;
    if (!rc)
        rc = run(&t);
    teardown(&t);
    return rc;
}
