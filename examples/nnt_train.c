/* SPDX-License-Identifier: MIT */
/* nnt-train: train a language model of any family of the library's table with nnt (the
 * library's main program, and an example of its public API: nothing but nnt.h is used).
 *   setup   tokenizer, model configuration, runtime context, model, data, optimizer, the
 *           trainer (nnt_trainer: the loop, its logs in --out, the peak measurement), an
 *           optional resumed state taking the resumed run's options
 *   train   nnt_trainer_run; each step reported as a line (redrawn in place on a terminal)
 *   report  checkpoint and weights, a text sample, the trace table, the final report
 * See nnt-train(1) and nnt-train --help. */
#define _XOPEN_SOURCE 700   /* fileno, fsync */
#include "train.h"
#include "text_out.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

typedef struct trainer {
    train_opts o;
    FILE *info;                   /* summary, progress and sample; NULL with --quiet       */
    nnt_ctx *ctx;
    nnt_tokenizer *tok;
    nnt_data *data, *val_data;    /* training tokens; --val-data or NULL                  */
    int64_t ntokens, held_out;    /* tokens trained on (the first), held out after them   */
    int64_t val_start, val_len, val_batches;   /* held-out tokens of their source; windows */
    int64_t val_runs;             /* validations of this run and their time               */
    double val_s;
    nnt_layer *model;
    nnt_model_config cfg;
    nnt_family_info fam;          /* cfg's family in the library's table                  */
    int cfg_resumed;              /* cfg is the --resume checkpoint's                      */
    int peak_low;                 /* a step beat the measured peak: no MFU printed        */
    char *resume_saved;           /* the checkpoint's options string when nnt-train's      */
    char *resume_tok[3];          /* its tokenizer files (owned)                           */
    char resumed_names[2048];     /* those that changed a value, for the summary           */
    nnt_tiling tiling;
    int64_t nparams;
    int64_t nfrozen;              /* elements of the frozen parameters (--freeze, LoRA)    */
    nnt_optim *opt;
    nnt_trainer *tr;
    nnt_trainer_info ti;          /* its state after setup and after the run               */
    int64_t nonfinite, done, nrun;   /* non-finite step; steps before this run; this run's */
    int failed, ncpus, ncuda, live, line_open, mpi, rank, nranks;
    int col;                       /* the terminal cursor's column (say on a terminal) */
    double ms_sum, ms_rest, last_loss, loss_ema;   /* step times: all, without the first  */
    char *path_ckpt, path_best[4096], path_table[4096];
} trainer;

static volatile sig_atomic_t interrupted;   /* the signal that stopped the run (INT, TERM) */
static volatile sig_atomic_t save_asked;    /* SIGUSR1: 1 asked, 2 no checkpoint to write  */
static nnt_trainer *running;

/* SIGINT, SIGTERM (how Slurm, systemd and docker stop a program): stop after the step in
 * progress and save; a second one ends the program at once (the previous checkpoint stays
 * whole: saves go through a temporary file). SIGUSR1 (e.g. sbatch --signal=B:USR1@120):
 * a checkpoint after the step in progress, the run going on. Only flags are set here. */
static void on_signal(int sig)
{
    if (sig == SIGUSR1) {
        save_asked = nnt_trainer_request_save(running) == NNT_OK ? 1 : 2;
        return;
    }
    interrupted = sig;
    nnt_trainer_request_stop(running);
    signal(sig, SIG_DFL);
}

static void catch_signals(int on)
{
    void (*h)(int) = on ? on_signal : SIG_DFL;
    signal(SIGINT, h), signal(SIGTERM, h), signal(SIGUSR1, on ? h : SIG_IGN);
}

/* A library call failed: its status and the thread's last failure message. */
/* Whether the command line asks for LoRA adapters (--lora-*). */
static int lora_asked(const train_opts *o)
{
    return o->lora_rank > 0 || o->lora_alpha >= 0 || o->lora_dropout >= 0 || o->lora_targets;
}

static int lib_error(const char *what, int rc)
{
    fprintf(stderr, "nnt-train: %s: %s: %s\n", what, nnt_strerror(rc), nnt_ctx_last_error(NULL));
    return 1;
}

/* The width of the terminal t->info is (0: not a terminal, or unknown). */
static int term_width(const trainer *t)
{
    struct winsize ws;
    if (!t->live || ioctl(fileno(t->info), TIOCGWINSZ, &ws) != 0)
        return 0;
    return ws.ws_col;
}

/* Write text to a terminal of width columns, *col the cursor's column, never past its
 * edge: a line that would reach it is broken after the last ", ", "; " or "  " that fits
 * (else the last space; else where it must) and goes on indented by 11 columns (the
 * summary's labels). */
static void put_wrapped(FILE *f, const char *text, int width, int *col)
{
    while (*text) {
        const char *nl = strchr(text, '\n');
        size_t len = nl ? (size_t)(nl - text) : strlen(text);
        size_t room = width - 1 > *col ? (size_t)(width - 1 - *col) : 0;
        if (len <= room) {
            fwrite(text, 1, len, f);
            *col += (int)len;
            text += len;
            if (nl) {
                fputc('\n', f);
                *col = 0;
                text++;
            }
            continue;
        }
        size_t cut = 0, any = 0;   /* never inside the label column */
        for (size_t i = *col < 12 ? (size_t)(12 - *col) : 1; i < room; i++)
            if (text[i] == ' ') {
                any = i;
                if (text[i - 1] == ',' || text[i - 1] == ';' || text[i + 1] == ' ')
                    cut = i;
            }
        cut = cut ? cut : any;
        if (!cut && *col <= 11)
            cut = room;   /* no space to break at: cut the word */
        fwrite(text, 1, cut, f);
        fprintf(f, "\n%11s", "");
        *col = 11;
        text += cut;
        while (*text == ' ')
            text++;
    }
}

static void say(trainer *t, const char *fmt, ...)
{
    if (!t->info)
        return;
    if (t->line_open)   /* end the live progress line first */
        fputc('\n', t->info), t->line_open = 0, t->col = 0;
    va_list ap, copy;
    va_start(ap, fmt);
    va_copy(copy, ap);
    int width = term_width(t);
    char buf[4096];
    int n = width > 20 && !strchr(fmt, '\r') ? vsnprintf(buf, sizeof buf, fmt, copy) : -1;
    va_end(copy);
    if (n >= 0 && (size_t)n < sizeof buf)
        put_wrapped(t->info, buf, width, &t->col);   /* on a terminal: never past its edge */
    else
        vfprintf(t->info, fmt, ap);
    va_end(ap);
}

/* A progress line being built for a terminal of width columns (0: any length): fields are
 * added most useful first, and once one does not fit, neither does any after it (the line
 * is shortened, never wrapped). */
typedef struct fit_line {
    char text[512];
    int width, full;
} fit_line;

static void add_field(fit_line *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void add_field(fit_line *l, const char *fmt, ...)
{
    char field[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(field, sizeof field, fmt, ap);
    va_end(ap);
    size_t n = strlen(l->text), k = strlen(field);
    if (l->full || (l->width > 0 && n + k >= (size_t)l->width) || n + k >= sizeof l->text)
        l->full = 1;
    else
        memcpy(l->text + n, field, k + 1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* OUT/name in buf (4096 bytes). */
static char *out_file(const trainer *t, const char *name, char *buf)
{
    snprintf(buf, 4096, "%s/%s", t->o.out_dir, name);
    return buf;
}

/* mkdir -p; 0 or 1 after a message naming the option. */
static int make_dirs(const char *option, const char *path)
{
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c == '/' || c == '\0') {
            *s = '\0';
            if (mkdir(p, 0777) && errno != EEXIST)
                break;
            *s = c;
        }
        if (!c)
            break;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    fprintf(stderr, "nnt-train: %s: cannot create directory '%s': %s\n", option, path,
            strerror(errno ? errno : ENOTDIR));
    return 1;
}

static void format_bytes(char *buf, size_t cap, int64_t bytes)
{
    double v = (double)bytes;
    if (v >= 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.2f GiB", v / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, cap, "%.1f MiB", v / (1024.0 * 1024));
}

static int file_exists(const char *what, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return 0;
    return train_usage_error("%s: cannot open '%s': %s", what, path, strerror(errno));
}

/* Whether paths a and b name one file (both exist). */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Whether path is a file in directory dir. */
static int in_directory(const char *path, const char *dir)
{
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash)
        snprintf(d, sizeof d, ".");
    else if (slash == d)
        d[1] = '\0';
    else
        *slash = '\0';
    return same_file(d, dir);
}

/* A second run into one --out must not overwrite the first's files: when OUT holds a
 * checkpoint (or --save's file exists) of another run, and neither --overwrite nor a --resume
 * of a checkpoint in OUT (or of that file) was given, the previous run's files move to the
 * first free OUT/previous-N, and a line says so. Rank 0, after OUT was made; 0 or 1 after a
 * message. */
static int keep_previous_run(trainer *t)
{
    const train_opts *o = &t->o;
    static const char *const names[] = {"checkpoint.safetensors", "best.safetensors",
                                        "train.csv", "val.csv", "loss.svg",
                                        "model.safetensors", "model.bin", "trace-ops.txt"};
    char ckpt[4096], dir[4096], from[4096], to[8192 + 64];
    struct stat st;
    int writes = o->steps > 0 || o->save_weights || o->save_llmc || o->trace;
    if (o->overwrite || !writes || (stat(t->path_ckpt, &st) != 0 &&
                                    stat(out_file(t, names[0], from), &st) != 0))
        return 0;   /* no checkpoint of another run: nothing of value to lose */
    if (o->resume && (same_file(o->resume, t->path_ckpt) || in_directory(o->resume, o->out_dir)))
        return 0;   /* the run continued in place */
    int n = 1;
    for (;; n++) {
        snprintf(dir, sizeof dir, "%s/previous-%d", o->out_dir, n);
        if (mkdir(dir, 0777) == 0)
            break;
        if (errno != EEXIST || n > 100000) {
            fprintf(stderr, "nnt-train: --out: cannot create '%s' to keep the previous run's "
                    "files in (or give --overwrite): %s\n", dir, strerror(errno));
            return 1;
        }
    }
    snprintf(ckpt, sizeof ckpt, "%s", t->path_ckpt);
    for (size_t i = 0; i <= sizeof names / sizeof names[0]; i++) {
        const char *p = i < sizeof names / sizeof names[0] ? out_file(t, names[i], from) : ckpt;
        if (stat(p, &st) != 0)
            continue;   /* (the --save file when it is OUT's checkpoint: moved already) */
        const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
        snprintf(to, sizeof to, "%s/%s", dir, base);
        if (rename(p, to)) {
            fprintf(stderr, "nnt-train: cannot move '%s' to '%s' to keep the previous run's "
                    "files (give --overwrite to replace them): %s\n", p, to, strerror(errno));
            return 1;
        }
    }
    if (!o->quiet)
        fprintf(stderr, "nnt-train: kept the previous run's files in %s (--overwrite replaces "
                "them)\n", dir);
    return 0;
}

/* Input files (a data pattern: nnt_data_open says if none matches); --resume: checked first,
 * by resume_run_options. */
static int check_input_files(const train_opts *o)
{
    const char *data = o->data ? o->data : TRAIN_DEFAULT_DATA;
    const char *names[] = {o->data ? "--data" : "default corpus (give --data FILE)", "--val-data",
                           "--load-llmc", "--load-safetensors", "--load-hf", "--bpe-vocab",
                           "--bpe-merges"};
    const char *paths[] = {data, o->val_data, o->load_llmc, o->load_safetensors, o->load_hf,
                           o->bpe_vocab, o->bpe_merges};
    for (int i = 0; i < 7; i++)
        if (paths[i] && !(i < 2 && strpbrk(paths[i], "*?[")) && file_exists(names[i], paths[i]))
            return 2;
    return 0;
}

static int open_tokenizer(trainer *t)
{
    train_opts *o = &t->o;
    char path[4096];
    int rc;
    if (o->tokenizer == TOKENIZER_AUTO) {   /* json when --load-hf DIR has a tokenizer.json */
        snprintf(path, sizeof path, "%s/tokenizer.json", o->load_hf ? o->load_hf : "");
        o->tokenizer = o->tokenizer_json || (o->load_hf && access(path, R_OK) == 0)
                           ? TOKENIZER_JSON : TOKENIZER_BYTES;
    }
    if (o->tokenizer == TOKENIZER_JSON && !o->tokenizer_json) {
        snprintf(path, sizeof path, "%s/tokenizer.json", o->load_hf);
        if (access(path, R_OK))   /* e.g. a byte-level model's directory */
            return train_usage_error("--tokenizer json: %s has no tokenizer.json: give "
                                     "--tokenizer-json FILE, --tokenizer bytes or --tokenizer "
                                     "bpe", o->load_hf);
        o->tokenizer_json = o->load_hf;   /* (recorded in the checkpoints) */
    }
    if (o->tokenizer == TOKENIZER_BPE)
        rc = nnt_tokenizer_bpe_load(o->bpe_vocab, o->bpe_merges, &t->tok);
    else if (o->tokenizer == TOKENIZER_JSON)   /* a directory means its tokenizer.json */
        rc = nnt_tokenizer_hf_load(o->tokenizer_json, &t->tok);
    else
        rc = nnt_tokenizer_bytes_create(&t->tok);
    return rc ? lib_error("cannot create the tokenizer", rc) : 0;
}

/* The family of the library's table that cfg has (t->fam). */
static void find_family(trainer *t)
{
    nnt_family_info f = NNT_FAMILY_INFO_INIT;
    for (int i = 0; nnt_model_family_info(i, &f) == 0; i++)
        if (f.family == t->cfg.family)
            t->fam = f;
    if (!t->fam.title)
        t->fam.title = t->fam.name = "?";
}

/* The configuration of a fresh or safetensors-loaded model: preset or the default small
 * GPT-2, then the individual overrides, each allowed by the family's features. */
static int model_config(trainer *t)
{
    const train_opts *o = &t->o;
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    int64_t tok_vocab = 0;
    nnt_tokenizer_vocab_size(t->tok, &tok_vocab);
    if (o->model && nnt_model_preset(o->model, &c)) {
        char list[1024];
        train_preset_list(list, sizeof list, 0);
        return train_usage_error("--model: unknown preset '%s' (%s)", o->model, list);
    }
    if (!o->model)
        c.layers = 4, c.channels = 128, c.heads = 4, c.max_seq = 128, c.vocab = tok_vocab;
    t->cfg = c;
    find_family(t);
    static const struct { const char *opt; unsigned bit; } need[] = {
        {"kv-heads", NNT_FAMILY_HAS_KV_HEADS}, {"hidden", NNT_FAMILY_HAS_HIDDEN},
        {"head-dim", NNT_FAMILY_HAS_HEAD_DIM}, {"qk-norm", NNT_FAMILY_HAS_QK_NORM}};
    for (int i = 0; i < 4; i++)
        if (train_opts_given(o, need[i].opt) && !(t->fam.features & need[i].bit))
            return train_usage_error("--%s does not apply to %s models (their presets: %s); "
                                     "--kv-heads, --hidden, --head-dim and --qk-norm need a "
                                     "family that has them", need[i].opt, t->fam.title,
                                     t->fam.presets);
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

/* The model's configuration: the --load-hf directory's or the --load-llmc file's (read as the
 * library reads any model source), the resumed checkpoint's, or the options' (model_config). */
static int source_config(trainer *t)
{
    const char *source = t->o.load_hf ? t->o.load_hf : t->o.load_llmc;
    int rc = source ? nnt_model_source_config(NULL, source, &t->cfg) : 0;
    if (rc)
        return lib_error(t->o.load_hf ? "--load-hf" : "--load-llmc", rc);
    return source || t->cfg_resumed ? 0 : model_config(t);
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

/* Checks once the configuration is known: the family's file formats, the sequence. */
static int check_config(trainer *t)
{
    const train_opts *o = &t->o;
    find_family(t);
    const char *opt = o->save_weights ? "--save-weights" : o->save_llmc ? "--save-llmc"
                    : o->load_safetensors ? "--load-safetensors" : NULL;
    if (opt && !(t->fam.features & NNT_FAMILY_HAS_LLMC))
        return train_usage_error("%s is not available for %s models yet%s", opt, t->fam.title,
                                 o->save_weights || o->load_safetensors
                                     ? " (use --save-hf DIR / --load-hf DIR)" : "");
    if (t->o.seq < 0)
        t->o.seq = t->cfg.max_seq < 128 ? t->cfg.max_seq : 128;
    if (t->o.seq > t->cfg.max_seq)
        return train_usage_error("--seq %lld is longer than the context %lld (--context)",
                                 (long long)t->o.seq, (long long)t->cfg.max_seq);
    /* the sample's prompt goes through the tokenizer; text data too (open_data) */
    return o->sample > 0 ? check_tokenizer_vocab(t, " (or --sample 0 with token files)") : 0;
}

static int start_runtime(trainer *t)
{
    const train_opts *o = &t->o;
    if (o->swap_dir && make_dirs("--swap-dir", o->swap_dir))
        return 1;
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
    /* Tiles a rank drops are freed by one thread and allocated again by another; one arena
     * lets them reuse that memory (GPT-2 124M, 2 ranks: RSS 1324-1357 MB instead of
     * 1451-1611; bench/RESULTS-mpi.md). Set before the runtime starts its threads. */
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

/* --freeze's patterns, then the adapters of --load-peft or --lora-*; the trained and frozen
 * parameters' elements counted. */
static int fine_tune(trainer *t)
{
    const train_opts *o = &t->o;
    int rc;
    if (o->load_peft && lora_asked(o))
        return train_usage_error("--load-peft takes the adapters' settings from its "
                                 "adapter_config.json: no --lora-rank, --lora-alpha, "
                                 "--lora-dropout or --lora-targets with it");
    for (const char *p = o->freeze; p && *p;) {
        const char *comma = strchr(p, ',');
        char pat[512];
        snprintf(pat, sizeof pat, "%.*s", (int)(comma ? comma - p : (long)strlen(p)), p);
        if ((rc = nnt_layer_freeze(t->model, pat, 1, NULL)))
            return lib_error("--freeze", rc);
        p = comma ? comma + 1 : "";
    }
    if (o->load_peft && (rc = nnt_model_load_peft(t->model, o->load_peft)))
        return lib_error("--load-peft", rc);
    if (lora_asked(o)) {
        nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
        lo.rank = o->lora_rank > 0 ? o->lora_rank : lo.rank;
        lo.alpha = o->lora_alpha >= 0 ? o->lora_alpha : lo.alpha;
        lo.dropout = o->lora_dropout >= 0 ? o->lora_dropout : 0.0;
        lo.targets = o->lora_targets;
        lo.seed = (uint64_t)o->seed;
        if ((rc = nnt_model_lora_add(t->model, &lo)))
            return lib_error("--lora-rank/--lora-targets", rc);
    }
    if (o->merge && !o->load_peft && !lora_asked(o))
        return train_usage_error("--merge merges LoRA adapters: give --lora-rank, "
                                 "--lora-targets or --load-peft");
    if (o->save_peft && !o->load_peft && !lora_asked(o))
        return train_usage_error("--save-peft writes LoRA adapters: give --lora-rank, "
                                 "--lora-targets or --load-peft");
    int64_t count = 0;
    nnt_layer_num_params(t->model, &count, &t->nparams);
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p;
        int64_t n = 0;
        memset(&p, 0, sizeof p);
        p.size = sizeof p;
        if (nnt_layer_param(t->model, i, &p) == 0 && nnt_tensor_numel(p.value, &n) == 0 &&
            p.frozen)
            t->nfrozen += n;
    }
    return 0;
}

static int create_model(trainer *t)
{
    const train_opts *o = &t->o;
    nnt_tiling over = NNT_TILING_INIT;
    over.batch = o->tile_batch, over.seq = o->tile_seq, over.channels = o->tile_channels;
    over.hidden = o->tile_hidden, over.vocab = o->tile_vocab, over.heads = o->tile_heads;
    int rc;
    if ((rc = nnt_model_tiling(t->ctx, &t->cfg, o->batch, o->seq, &over, &t->tiling)))
        return lib_error("nnt_model_tiling", rc);
    /* loaded, or (source NULL: fresh, or the weights --resume brings) created from --seed */
    const char *source = o->load_llmc ? o->load_llmc : o->load_safetensors ? o->load_safetensors
                       : o->load_hf;
    if ((rc = nnt_model_open(t->ctx, source, &t->cfg, o->batch, o->seq, &t->tiling,
                             (uint64_t)o->seed, &t->model)))
        return lib_error(o->load_llmc ? "--load-llmc" : o->load_safetensors ? "--load-safetensors"
                         : o->load_hf ? "--load-hf" : "cannot create the model", rc);
    if (o->recompute && (rc = nnt_layer_set_recompute(t->model, 1)))
        return lib_error("--recompute", rc);
    nnt_model_config_of(t->model, &t->cfg);   /* kv_heads and hidden resolved */
    nnt_layer_num_params(t->model, NULL, &t->nparams);
    return fine_tune(t);
}

/* The held-out tokens: --val-data, or the data's last held_out tokens; how many windows of
 * B*T + 1 tokens a validation reads. Then: text's ids must exist in the model. */
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
    int64_t fit = t->val_len > bt ? (t->val_len - 1) / bt : 0;
    if ((o->val_data || t->held_out) && fit == 0) {
        fprintf(stderr, "nnt-train: %s holds %lld tokens, fewer than one batch of B x T + 1 = "
                "%lld: %s, or a smaller --batch/--seq\n", o->val_data ? o->val_data
                : "--val-split", (long long)t->val_len, (long long)(bt + 1),
                o->val_data ? "give more" : "hold out more (a larger --val-split)");
        return 2;
    }
    if (o->val_data || t->held_out)
        t->val_batches = o->val_batches > 0 && o->val_batches < fit ? o->val_batches : fit;
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
    if (o->steps == 0 && o->val_data)   /* validation only: no training data read */
        return open_validation(t);
    nnt_data_format f = !o->data && o->data_format == NNT_DATA_AUTO
                            ? NNT_DATA_TEXT : (nnt_data_format)o->data_format;
    int rc = nnt_data_open(path, f, t->tok, t->cfg.vocab, &t->data);
    if (rc) {
        rc = lib_error(o->data ? "--data" : "default corpus", rc);
        check_tokenizer_vocab(t, "");   /* the likely cause of ids >= vocab in text */
        return rc;
    }
    nnt_data_num_tokens(t->data, &t->ntokens);
    t->held_out = (int64_t)((double)t->ntokens * o->val_split);
    nnt_data_info di = NNT_DATA_INFO_INIT;   /* rows of whole examples: split on a row */
    if (nnt_data_info_get(t->data, &di) == 0 && di.block > 0)
        t->held_out -= t->held_out % di.block;
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
    return open_validation(t);
}

/* Too little data for the run: fewer training tokens than a step reads, or each token seen
 * more than TRAIN_MAX_EPOCHS (100) times; one line on stderr before training (rank 0). */
#define TRAIN_MAX_EPOCHS 100.0
static void warn_little_data(const trainer *t, int64_t per_step)
{
    const train_opts *o = &t->o;
    double epochs = (double)per_step * (double)o->steps / (double)t->ntokens;
    if (t->rank != 0 || o->quiet || o->steps <= 0 ||
        (t->ntokens >= per_step && epochs <= TRAIN_MAX_EPOCHS))
        return;
    fprintf(stderr, "nnt-train: warning: too little data: %lld training tokens for %lld steps "
            "of %lld tokens (B %lld x T %lld x accum %lld) = %.0f passes over each token (%s): "
            "the model will memorise them; give more data (--data) or fewer --steps\n",
            (long long)t->ntokens, (long long)o->steps, (long long)per_step,
            (long long)o->batch, (long long)o->seq, (long long)o->accum, epochs,
            t->ntokens < per_step ? "fewer tokens than one step reads" : "more than 100");
}

static int create_optimizer(trainer *t)
{
    const train_opts *o = &t->o;
    if (train_opts_resolve_lr(&t->o, o->load_llmc || o->load_safetensors || o->load_hf,
                              t->nparams))
        return 2;
    nnt_optim_options oo = NNT_OPTIM_OPTIONS_INIT;
    oo.kind = (nnt_optim_kind)o->optim, oo.lr = o->lr;
    oo.beta1 = o->beta1, oo.beta2 = o->beta2, oo.eps = o->eps, oo.momentum = o->momentum;
    oo.weight_decay = o->weight_decay, oo.grad_clip = o->grad_clip;
    /* validation only (--steps 0): no step, no schedule to end */
    oo.schedule = o->steps ? (nnt_schedule)o->schedule : NNT_SCHEDULE_CONSTANT;
    oo.warmup_steps = o->warmup;
    oo.total_steps = o->steps, oo.min_lr = o->min_lr, oo.accum_steps = o->accum;
    int rc = nnt_optim_create(t->ctx, &oo, &t->opt);
    if (!rc)
        rc = nnt_optim_add_layer(t->opt, t->model);
    return rc ? lib_error("cannot create the optimizer", rc) : 0;
}

/* ---- the options string of the checkpoints, and --resume --------------------------------- */

/* The saved model configuration must be this run's; batches may change (with a note). */
static int check_resumed_options(trainer *t, const char *saved)
{
    /* family, kv_heads, hidden: absent from nnt-train 0.2's checkpoints (GPT-2 only);
     * head_dim and qk_norm from those before Qwen3 */
    const char *keys[10] = {"vocab", "max_seq", "layers", "heads", "channels", "family",
                            "kv_heads", "hidden", "head_dim", "qk_norm"};
    const nnt_model_config *c = &t->cfg;
    const int64_t have[10] = {c->vocab, c->max_seq, c->layers, c->heads, c->channels,
                              c->family, c->kv_heads, c->hidden, c->head_dim, c->qk_norm};
    if (!saved) {
        say(t, "note: %s was not written by nnt-train: only its tensor shapes were checked\n",
            t->o.resume);
        return 0;
    }
    for (int i = 0; i < 10; i++) {
        int64_t v = train_saved_int(saved, keys[i]);
        if (v != have[i] && (i < 5 || v != -1))
            return train_usage_error("--resume %s: the checkpoint's model has %s %lld, this "
                                     "run %lld: give the same model options", t->o.resume,
                                     keys[i], (long long)v, (long long)have[i]);
    }
    if (train_saved_int(saved, "batch") != t->o.batch || train_saved_int(saved, "seq") != t->o.seq ||
        train_saved_int(saved, "accum") != t->o.accum)
        say(t, "note: the checkpoint was trained with other --batch/--seq/--accum: the data "
               "order differs from an uninterrupted run\n");
    int64_t held = train_saved_int(saved, "held_out");   /* -1: before nnt-train 0.3's validation */
    if (held != t->held_out && (held != -1 || t->held_out != 0))
        say(t, "note: the checkpoint held out %lld tokens of the data, this run %lld "
               "(--val-split): the training tokens and their order differ\n",
            (long long)(held < 0 ? 0 : held), (long long)t->held_out);
    if (train_saved_int(saved, "steps") != t->o.steps && t->o.steps > 0)
        say(t, "note: the checkpoint was trained with --steps %lld: the learning-rate schedule "
               "now ends at step %lld instead\n", (long long)train_saved_int(saved, "steps"),
            (long long)t->o.steps);
    return 0;
}

static int resume_state(trainer *t)
{
    const train_opts *o = &t->o;
    int rc = nnt_trainer_resume(t->tr, o->resume);
    if (rc == NNT_E_FORMAT || rc == NNT_E_SHAPE) {   /* checked first: nothing was changed */
        fprintf(stderr, "nnt-train: --resume %s cannot be used: it is damaged, or it was saved "
                "for another model or optimizer (give the same --model/--layers/--channels/"
                "--heads/--vocab/--context and --optim, or no model options): %s\n", o->resume,
                nnt_ctx_last_error(NULL));
        return 2;
    }
    if (rc)
        return lib_error("--resume", rc);
    if ((rc = check_resumed_options(t, t->resume_saved)))
        return rc;
    int64_t shuffled = train_saved_int(t->resume_saved, "shuffle");   /* -1: not recorded */
    if (shuffled < 0 ? o->shuffle : shuffled != o->shuffle)
        say(t, "note: the checkpoint read the data %s, this run %s: the data position "
               "restarts at 0\n", o->shuffle ? "in order" : "shuffled",
            o->shuffle ? "shuffles it" : "reads it in order");
    nnt_trainer_info_get(t->tr, &t->ti);
    t->done = t->ti.step;
    if (t->done >= o->steps && o->steps > 0)
        return train_usage_error("--resume %s is at step %lld: --steps %lld leaves nothing to "
                                 "do (--steps is the total)", o->resume, (long long)t->done,
                                 (long long)o->steps);
    if (o->stop_after > 0 && t->done >= o->stop_after)
        return train_usage_error("--resume %s is at step %lld: --stop-after %lld leaves "
                                 "nothing to do", o->resume, (long long)t->done,
                                 (long long)o->stop_after);
    return 0;
}

/* The tokenizer of the resumed run (saved: its options) when this run names none. */
static int resume_tokenizer(trainer *t, const char *saved)
{
    train_opts *o = &t->o;
    if (o->tokenizer != TOKENIZER_AUTO || o->tokenizer_json || o->bpe_vocab || o->load_hf)
        return 0;
    char *kind = train_saved(saved, "tokenizer");
    const char *keys[3] = {"tokenizer_json", "bpe_vocab", "bpe_merges"};
    for (int i = 0; i < 3; i++)
        t->resume_tok[i] = train_saved(saved, keys[i]);
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

/* --resume: the checkpoint's options string when nnt-train wrote it; the options it
 * records that the command line does not give take their saved values. */
static int resume_run_options(trainer *t)
{
    train_opts *o = &t->o;
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    if (!o->resume)
        return 0;
    if (file_exists("--resume", o->resume))
        return 2;
    int rc = nnt_train_state_info(NULL, o->resume, &st);
    if (rc) {
        fprintf(stderr, "nnt-train: --resume %s cannot be used: %s\n", o->resume,
                nnt_ctx_last_error(NULL));
        return rc == NNT_E_FORMAT ? 2 : 1;
    }
    if (st.options && strstr(st.options, "\"program\": \"nnt-train\""))
        t->resume_saved = strdup(st.options);   /* (NULL, out of memory: as not recorded) */
    nnt_train_state_clear(&st);
    /* a fine-tuning run's checkpoint holds its trained parameters only, not the base */
    static const char *const tuned[] = {"freeze", "lora_rank", "lora_alpha", "lora_dropout",
                                        "lora_targets", "load_peft"};
    int set = o->freeze || o->load_peft || lora_asked(o);
    for (int i = 0; i < 6 && !set; i++) {
        char *v = t->resume_saved ? train_saved(t->resume_saved, tuned[i]) : NULL;
        set = v && strcmp(v, "null") != 0 && strcmp(v, "-1") != 0;
        free(v);
    }
    if (set)
        return train_usage_error("--resume %s: a run with --freeze, --lora-* or --load-peft "
                                 "cannot be resumed yet (its checkpoints hold the trained "
                                 "parameters and their optimizer state, not the frozen "
                                 "base)", o->resume);
    return train_opts_restore(o, t->resume_saved, t->resumed_names, sizeof t->resumed_names);
}

/* ---- summary and progress ------------------------------------------------------------------ */

static void print_summary(trainer *t)
{
    const train_opts *o = &t->o;
    const nnt_model_config *c = &t->cfg;
    const char *sched = "?", *version = "?", *kernels = "?";
    nnt_ctx_sched(t->ctx, &sched);
    nnt_version(NULL, &version);
    nnt_ctx_kernels(t->ctx, &kernels);
    say(t, "nnt-train %s\n", version);
    const char *loaded = o->load_llmc ? o->load_llmc : o->load_safetensors ? o->load_safetensors
                       : o->load_hf;
    char shape[700];
    int n = snprintf(shape, sizeof shape, "%s L %lld, C %lld, NH %lld", t->fam.title,
                     (long long)c->layers, (long long)c->channels, (long long)c->heads);
    unsigned f = t->fam.features;
    if (f & NNT_FAMILY_HAS_KV_HEADS)
        n += snprintf(shape + n, sizeof shape - n, ", NKV %lld", (long long)c->kv_heads);
    if (c->head_dim * c->heads != c->channels)
        n += snprintf(shape + n, sizeof shape - n, ", head dim %lld", (long long)c->head_dim);
    if (c->qk_norm)
        n += snprintf(shape + n, sizeof shape - n, ", q/k norm");
    if (f & NNT_FAMILY_HAS_HIDDEN)
        n += snprintf(shape + n, sizeof shape - n, ", hidden %lld", (long long)c->hidden);
    n += snprintf(shape + n, sizeof shape - n, ", V %lld, context %lld", (long long)c->vocab,
                  (long long)c->max_seq);
    if (f & NNT_FAMILY_HAS_ROPE)
        n += snprintf(shape + n, sizeof shape - n, ", %s head, rope theta %g%s",
                      c->tied ? "tied" : "untied", c->rope.theta,
                      c->rope.scaling == NNT_ROPE_SCALING_LLAMA3   ? " (llama3 scaling)"
                      : c->rope.scaling == NNT_ROPE_SCALING_LINEAR ? " (linear scaling)"
                                                                   : "");
    if (c->rope_local_theta > 0.0)
        n += snprintf(shape + n, sizeof shape - n, ", windowed layers' rope theta %g",
                      c->rope_local_theta);
    if (c->sliding_window > 0 && c->window_global_every > 0)
        n += snprintf(shape + n, sizeof shape - n, ", window %lld (every %lld%s layer global)",
                      (long long)c->sliding_window, (long long)c->window_global_every,
                      c->window_global_every == 2 ? "nd" : c->window_global_every == 3 ? "rd"
                                                                                         : "th");
    else if (c->sliding_window > 0)
        n += snprintf(shape + n, sizeof shape - n, ", window %lld from layer %lld",
                      (long long)c->sliding_window, (long long)c->window_from);
    if (c->query_pre_attn_scalar > 0.0)
        n += snprintf(shape + n, sizeof shape - n, ", query_pre_attn_scalar %g",
                      c->query_pre_attn_scalar);
    if (c->attn_softcap > 0.0 || c->final_softcap > 0.0)
        n += snprintf(shape + n, sizeof shape - n, ", soft-caps %g (scores) %g (logits)",
                      c->attn_softcap, c->final_softcap);
    /* mixture of experts: the parameters a token runs through (blocks as nnt.h's
     * nnt_model_config says: experts, moe_every, dense_layers) */
    int64_t idle = 0;
    if ((f & NNT_FAMILY_HAS_MOE) && c->experts > 0) {
        int64_t I = c->expert_hidden ? c->expert_hidden : c->hidden, sparse = 0;
        for (int64_t i = 0; i < c->layers; i++)
            sparse += (c->moe_every <= 1 || (i + 1) % c->moe_every == 0) &&
                      !NNT_MODEL_DENSE_LAYER(c, i);
        idle = sparse * (c->experts - c->experts_per_token) * 3 * c->channels * I;
        snprintf(shape + n, sizeof shape - n, ", %lld of %lld blocks with %lld experts of "
                 "%lld, top %lld", (long long)sparse, (long long)c->layers,
                 (long long)c->experts, (long long)I, (long long)c->experts_per_token);
    }
    if (idle)
        say(t, "model:     %s: %.3fM parameters, %.3fM active; %s%s", shape, t->nparams / 1e6,
            (t->nparams - idle) / 1e6,
            o->resume ? "weights of " : loaded ? "weights from " : "",
            o->resume ? o->resume : loaded ? loaded : "fresh init");
    else
        say(t, "model:     %s: %.3fM parameters; %s%s", shape, t->nparams / 1e6,
            o->resume ? "weights of " : loaded ? "weights from " : "",
            o->resume ? o->resume : loaded ? loaded : "fresh init");
    if (!o->resume && !loaded)
        say(t, " (seed %lld)", (long long)o->seed);
    say(t, "%s%s\n", o->model ? ", preset " : "", o->model ? o->model : "");
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    if (nnt_model_lora_get(t->model, &lo) == 0)
        say(t, "fine-tune: LoRA r %lld, alpha %g%s, dropout %g on %s%s%s\n", (long long)lo.rank,
            lo.alpha, lo.rslora ? " (rsLoRA)" : "", lo.dropout, lo.targets,
            o->load_peft ? " from " : "", o->load_peft ? o->load_peft : "");
    if (t->nfrozen)
        say(t, "trained:   %.3fM of the %.3fM parameters (the rest frozen)\n",
            (t->nparams - t->nfrozen) / 1e6, t->nparams / 1e6);
    int64_t per_step = o->batch * o->seq * o->accum;
    nnt_data_format format = NNT_DATA_TEXT;
    char reading[64], held[64] = "";
    if (t->data) {
        nnt_data_format_of(t->data, &format);
        if (format == NNT_DATA_TEXT)
            snprintf(reading, sizeof reading, "text, %s tokenizer",
                     train_choice_name("tokenizer", o->tokenizer));
        else
            snprintf(reading, sizeof reading, "%s token file",
                     format == NNT_DATA_LLMC ? "llm.c" : "nanoGPT");
        if (t->held_out)
            snprintf(held, sizeof held, " to train on (the last %lld held out)",
                     (long long)t->held_out);
        say(t, "data:      %s%s, %s: %lld tokens%s; %lld tokens a step (B %lld x T %lld x "
               "accum %lld), %.2f epochs in %lld steps%s\n",
            o->data ? o->data : TRAIN_DEFAULT_DATA, o->data ? "" : " (the default corpus)",
            reading, (long long)t->ntokens, held, (long long)per_step, (long long)o->batch,
            (long long)o->seq, (long long)o->accum,
            (double)per_step * (double)o->steps / (double)t->ntokens, (long long)o->steps,
            o->shuffle ? "; shuffled: its sequences of T + 1 tokens in a new order each epoch"
                       : "");
        warn_little_data(t, per_step);
    } else {
        say(t, "data:      none: --steps 0 only validates, on --val-data\n");
    }
    if (!t->val_batches) {
        say(t, "validate:  no (--val-data FILE or --val-split X for a held-out loss)\n");
    } else {
        char what[96], when[96] = "once, without training (--steps 0)", every[32] = "every step";
        if (o->val_data)
            snprintf(what, sizeof what, "%lld tokens", (long long)t->val_len);
        else
            snprintf(what, sizeof what, "the last %lld tokens of the data (--val-split %g)",
                     (long long)t->val_len, o->val_split);
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
    say(t, "runtime:   %s%d CPU workers, %d CUDA workers, scheduler %s; %s GEMM operands%s\n"
           "kernels:   %s\n", ranks, t->ncpus, t->ncuda, sched,
        train_choice_name("precision", o->precision),
        o->recompute ? "; activation recompute" : "", kernels);
    if (o->steps > 0)   /* (validation only: no optimizer step, no MFU) */
        say(t, "optimizer: %s, lr %g (%s schedule, warmup %lld, min %g), betas %g %g, eps %g, "
               "weight decay %g, momentum %g, grad clip %g\n",
            train_choice_name("optim", o->optim), o->lr,
            train_choice_name("schedule", o->schedule), (long long)o->warmup, o->min_lr,
            o->beta1, o->beta2, o->eps, o->weight_decay, o->momentum, o->grad_clip);
    if (o->steps > 0 && t->ti.peak_flops <= 0)
        say(t, "MFU:       not computed: CUDA workers run tasks and their peak is not known "
               "(give --peak-gflops)\n");
    else if (o->steps > 0)
        say(t, "MFU:       6 N + %s12 L T NH hd = %.1f MFLOP a token against a peak of %.1f "
               "GFLOP/s (%s)\n", t->nfrozen ? "4 Nfrozen + " : "", t->ti.flops_per_token / 1e6,
            t->ti.peak_flops / 1e9,
            o->peak_gflops > 0 ? "--peak-gflops"
            : t->mpi ? "87.5 GFLOP/s per CPU worker of every rank"
            : t->ti.peak_measured ? "measured at start: one 512 x 1024 x 1024 GEMM task per "
                                    "CPU worker, at the training's precision"
                                  : "87.5 GFLOP/s per CPU worker: it could not be measured");
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

/* "  RAM 12.0 MiB of 1.00 GiB" per memory node; peak instead of used with peak set. */
/* Memory node i's use (peak: its peak) as "  NAME USED of BUDGET" (", NAME peak ..."). */
static void memory_field(const nnt_mem_stats *ms, int i, int peak, char *buf, size_t cap)
{
    char used[32], budget[32];
    format_bytes(used, sizeof used, peak ? ms->node[i].peak_bytes : ms->node[i].used_bytes);
    format_bytes(budget, sizeof budget, ms->node[i].budget_bytes);
    snprintf(buf, cap, peak ? "%s%s peak %s%s%s" : "%s%s %s%s%s", peak ? (i ? ", " : "") : "  ",
             ms->node[i].name, used, ms->node[i].budget_bytes > 0 ? " of " : "",
             ms->node[i].budget_bytes > 0 ? budget : "");
}

static void print_memory(trainer *t, const nnt_mem_stats *ms, int peak)
{
    for (int i = 0; i < ms->nnodes; i++) {
        char field[128];
        memory_field(ms, i, peak, field, sizeof field);
        say(t, "%s", field);
    }
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

/* A step's line: in full, or (on a terminal, between the full ones every steps/10) a live
 * one redrawn in place with the smoothed loss and the time left; --print-loss: "step N loss
 * X" on stdout. */
static void report_step(trainer *t, const nnt_trainer_report *r)
{
    const train_opts *o = &t->o;
    nnt_mem_stats ms;
    memset(&ms, 0, sizeof ms);
    ms.size = sizeof ms;
    int have_mem = nnt_ctx_mem_stats(t->ctx, &ms, 0) == 0, line_open = t->line_open;
    char mfu[32];
    t->loss_ema = t->nrun > 1 ? 0.9 * t->loss_ema + 0.1 * r->loss : r->loss;
    int64_t every = o->steps / 10 > 0 ? o->steps / 10 : 1;
    if (!have_mem)
        ms.nnodes = 0;
    if (o->print_loss) {
        printf("step %lld loss %.6f\n", (long long)r->step, r->loss);
        fflush(stdout);
    } else if (t->info && t->live && r->step % every && r->step != o->steps && !r->validates) {
        /* the time the remaining steps and validations take at this run's means */
        double s = t->ms_sum / (double)t->nrun * (double)(o->steps - r->step) / 1e3;
        int64_t ve = o->val_every;
        if (t->val_runs && ve > 0)   /* the validations left, this step's included */
            s += t->val_s / (double)t->val_runs *
                 (double)(o->steps / ve - (r->step - 1) / ve + (o->steps % ve != 0));
        /* the fields by use, the last ones dropped where the terminal is narrow */
        fit_line l = {"", term_width(t), 0};
        char field[128];
        add_field(&l, "step %lld/%lld  loss %.4f (avg %.4f)", (long long)r->step,
                  (long long)o->steps, r->loss, t->loss_ema);
        if (s >= 60)
            add_field(&l, "  ETA %lldm%02llds", (long long)(s / 60), (long long)s % 60);
        else
            add_field(&l, "  ETA %.1fs", s);
        add_field(&l, "  %.0f tok/s", r->tokens_per_s);
        add_field(&l, "  %s", mfu_text(r->mfu, 0, mfu, sizeof mfu));
        for (int i = 0; i < ms.nnodes; i++) {
            memory_field(&ms, i, 0, field, sizeof field);
            add_field(&l, "%s", field);
        }
        t->line_open = 0;
        say(t, "\r%s\033[K", l.text);
        fflush(t->info);
        t->line_open = 1;
    } else if (t->info) {
        t->line_open = 0;
        if (line_open)
            fputs("\r\033[K", t->info);   /* the full line replaces the live one */
        /* on a terminal, the fields that do not fit its width are left out (the log has
         * them all: train.csv) */
        fit_line l = {"", term_width(t), 0};
        char field[128];
        add_field(&l, "step %*lld/%lld  loss %.6f",
                  (int)snprintf(NULL, 0, "%lld", (long long)o->steps), (long long)r->step,
                  (long long)o->steps, r->loss);
        add_field(&l, "  lr %.3e", r->lr);
        add_field(&l, "  norm %7.4f", r->grad_norm);
        add_field(&l, "  %8.1f ms", r->ms);
        add_field(&l, "  %8.0f tok/s", r->tokens_per_s);
        add_field(&l, "  %s", mfu_text(r->mfu, 5, mfu, sizeof mfu));
        for (int i = 0; i < ms.nnodes; i++) {
            memory_field(&ms, i, 0, field, sizeof field);
            add_field(&l, "%s", field);
        }
        say(t, "%s\n", l.text);
        fflush(t->info);
    }
}

/* A step ran at flops_per_s, faster than the peak measured at start-up: that measurement
 * was low (a busy machine) and supports no MFU; said once on stderr. */
static void peak_was_low(trainer *t, double flops_per_s)
{
    if (t->peak_low)
        return;
    t->peak_low = 1;
    if (t->o.quiet || t->rank != 0)
        return;
    if (t->line_open && t->info)
        fputc('\n', t->info), fflush(t->info), t->line_open = 0;
    fprintf(stderr, "nnt-train: note: a step ran at %.1f GFLOP/s, above the peak of %.1f "
            "GFLOP/s measured at start (the machine was busy?): MFU is not shown; "
            "--peak-gflops X sets the peak\n", flops_per_s / 1e9, t->ti.peak_flops / 1e9);
}

/* The trainer's reports: a step's or a validation's line. Nonzero stops the run. */
static int on_report(const nnt_trainer_report *rep, void *user)
{
    trainer *t = user;
    const train_opts *o = &t->o;
    if (save_asked == 2) {
        save_asked = 0;
        fprintf(stderr, "nnt-train: SIGUSR1 ignored: --no-save writes no checkpoint\n");
    }
    if (rep->event == NNT_TRAINER_CHECKPOINT) {   /* --save-every, or SIGUSR1's */
        if (save_asked == 1)
            fprintf(stderr, "nnt-train: SIGUSR1: checkpoint of step %lld written to %s\n",
                    (long long)rep->step, t->path_ckpt);
        save_asked = 0;
        return 0;
    }
    if (rep->event == NNT_TRAINER_VALIDATION) {
        t->val_runs++, t->val_s += rep->ms / 1e3;
        if (o->print_loss) {
            printf("val %lld loss %.6f\n", (long long)rep->step, rep->loss);
            fflush(stdout);
            return 0;
        }
        say(t, "val  %*lld/%lld  loss %.6f  on %lld held-out tokens (%.2f s)\n",
            (int)snprintf(NULL, 0, "%lld", (long long)o->steps), (long long)rep->step,
            (long long)o->steps, rep->loss, (long long)rep->tokens, rep->ms / 1e3);
        if (rep->saved_best)
            say(t, "saved %s: the lowest validation loss so far\n", t->path_best);
        if (t->info)
            fflush(t->info);
        return 0;
    }
    t->nrun++, t->ms_sum += rep->ms, t->ms_rest += t->nrun > 1 ? rep->ms : 0;
    t->last_loss = rep->loss;
    if (isnan(rep->mfu) && t->ti.peak_flops > 0 && t->ti.peak_measured)
        peak_was_low(t, t->ti.flops_per_token * rep->tokens_per_s);
    report_step(t, rep);
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
    to.trace = o->trace, to.trace_table = t->path_table;
    to.trace_steps = o->trace_steps > 0 ? o->trace_steps : 1;
    /* the peak: --peak-gflops; none with CUDA workers (theirs is not known); measured on the
     * CPU workers; over MPI (a GEMM would time one rank's share) or when it cannot be
     * measured, the nominal one of every rank's workers */
    to.peak_flops = o->peak_gflops > 0 ? 1e9 * o->peak_gflops : t->ncuda ? 0
                  : 1e9 * TRAIN_CPU_CORE_GFLOPS * (t->ncpus ? t->ncpus : 1) *
                        (t->nranks > 1 ? t->nranks : 1);
    to.measure_peak = o->peak_gflops <= 0 && !t->ncuda && !t->mpi && o->steps > 0;
    to.log_dir = o->out_dir;   /* train.csv, val.csv, loss.svg (steps > 0; rank 0) */
    to.program = "nnt-train", to.callback = on_report, to.user = t;
    char *extra = train_opts_record(o);
    to.extra_options = extra;
    int rc = extra ? nnt_trainer_create(t->model, t->opt, t->data, &to, &t->tr) : NNT_E_NOMEM;
    free(extra);
    t->ti.size = sizeof t->ti;
    if (!rc)
        rc = nnt_trainer_info_get(t->tr, &t->ti);
    return rc ? lib_error("cannot create the trainer", rc) : 0;
}

/* ---- after training: files, sample, final report ------------------------------------------- */

static int write_outputs(trainer *t)
{
    const train_opts *o = &t->o;
    char path[4096];
    int rc;
    if (t->nrun && !o->no_save && (rc = nnt_trainer_save(t->tr, t->path_ckpt)))
        return lib_error("cannot save the checkpoint", rc);
    if (o->save_weights &&
        (rc = nnt_gpt_save_safetensors(t->model, out_file(t, "model.safetensors", path))))
        return lib_error("--save-weights", rc);
    if (o->save_llmc && (rc = nnt_gpt_save_llmc(t->model, out_file(t, "model.bin", path))))
        return lib_error("--save-llmc", rc);
    if (o->save_peft && (rc = nnt_model_save_peft(t->model, o->save_peft)))
        return lib_error("--save-peft", rc);
    if (o->merge && (rc = nnt_model_lora_merge(t->model)))
        return lib_error("--merge", rc);
    nnt_hf_save_options hf = NNT_HF_SAVE_OPTIONS_INIT;
    hf.max_shard_bytes = o->save_hf_shard_bytes;
    /* the json tokenizer's file too, so that the directory is complete for --load-hf */
    hf.tokenizer_json = o->tokenizer == TOKENIZER_JSON ? o->tokenizer_json : NULL;
    if (o->save_hf && (rc = nnt_model_save_hf_ex(t->model, o->save_hf, &hf)))
        return lib_error("--save-hf", rc);
    return 0;
}

/* Text with newlines, tabs, printable ASCII and valid UTF-8 as they are, other bytes as
 * \xHH (a sample cannot send control sequences to the terminal); ids the tokenizer does
 * not have (a larger model vocabulary) as <id>. Runs of known ids are decoded together so
 * that characters split over several tokens come out whole. */
static int print_tokens(trainer *t, FILE *f, const int32_t *ids, size_t n)
{
    int64_t vocab = 0;
    char *text = NULL;
    size_t len = 0, cap = 0;
    int rc = nnt_tokenizer_vocab_size(t->tok, &vocab);
    for (size_t i = 0; i < n && !rc;) {
        size_t j = i;
        while (j < n && ids[j] >= 0 && ids[j] < vocab)
            j++;
        size_t want = 8 * (j - i) + 16;
        for (int tries = 0; j > i && tries < 2; tries++, want = len + 1) {
            char *more = want > cap ? realloc(text, want) : text;
            if (!more)
                return free(text), lib_error("sample", NNT_E_NOMEM);
            text = more, cap = want > cap ? want : cap;
            rc = nnt_tokenizer_decode(t->tok, ids + i, j - i, text, cap, &len);
            if (rc != NNT_E_INVAL || len < cap)   /* else too small: the size needed */
                break;
        }
        if (rc)
            return free(text), lib_error("nnt_tokenizer_decode", rc);
        const unsigned char *s = (const unsigned char *)text;
        if (j > i)
            text_out_escaped(f, s, len, 1);
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
        return rc ? lib_error("--prompt", rc) : train_usage_error("--prompt: gives no tokens");
    }
    /* the seed: the next xoshiro256** output of the trainer's rng words */
    uint64_t x = t->ti.rng[1] * 5;
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = o->temperature, s.top_k = o->top_k, s.seed = ((x << 7) | (x >> 57)) * 9;
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

/* The times: the steps (train_s), the sample (sample_s, 0 without one), all (total_s); the
 * memory since the start; the files written. */
static void print_final_report(trainer *t, double train_s, double sample_s, double total_s)
{
    const train_opts *o = &t->o;
    const nnt_trainer_info *ti = &t->ti;
    char mfu_buf[32], moved[32], path[4096], best[96], hf[4096], peft[4096];
    snprintf(best, sizeof best, "checkpoint of the lowest validation loss, %.6f",
             ti->best_val_loss);
    snprintf(hf, sizeof hf, "%s/", o->save_hf ? o->save_hf : "");
    snprintf(peft, sizeof peft, "%s/", o->save_peft ? o->save_peft : "");
    if (o->steps == 0)
        say(t, "\nno training (--steps 0)");
    else
        say(t, "\ntrained steps %lld..%lld in %.2f s", (long long)(t->done + 1),
            (long long)(t->done + t->nrun), train_s);
    if (t->nrun > 1) {
        double ms = t->ms_rest / (double)(t->nrun - 1);
        double tok_s = (double)(o->batch * o->seq * o->accum) / (ms / 1e3);
        double mfu = ti->peak_flops > 0 ? ti->flops_per_token * tok_s / ti->peak_flops : NAN;
        if (ti->peak_measured && (t->peak_low || mfu > 1)) {
            peak_was_low(t, ti->flops_per_token * tok_s);
            mfu = NAN;
        }
        say(t, ": %.1f ms/step, %.0f tokens/s%s%s (mean without the first step)", ms, tok_s,
            isnan(mfu) ? "" : ", ", isnan(mfu) ? "" : mfu_text(mfu, 0, mfu_buf, sizeof mfu_buf));
    }
    if (t->nrun)
        say(t, "; last loss %.6f", t->last_loss);
    if (ti->validations) {
        say(t, "\nvalidation: loss %.6f (perplexity %.4g) at step %lld (lowest %.6f at step "
            "%lld)", ti->last_val_loss, exp(ti->last_val_loss), (long long)ti->last_val_step,
            ti->lowest_val_loss, (long long)ti->lowest_val_step);
        if (t->val_runs)
            say(t, "; %lld validation%s in %.2f s%s", (long long)t->val_runs,
                t->val_runs > 1 ? "s" : "", t->val_s, o->steps ? " of the training time" : "");
    }
    if (sample_s > 0)
        say(t, "\nsample:   %lld tokens in %.2f s (%.1f tokens/s)", (long long)o->sample,
            sample_s, (double)o->sample / sample_s);
    say(t, "\ntotal:    %.2f s with start-up and files", total_s);
    nnt_mem_stats ms;
    memset(&ms, 0, sizeof ms);
    ms.size = sizeof ms;
    if (nnt_ctx_mem_stats(t->ctx, &ms, 0) == 0) {   /* since the runtime started */
        say(t, "\nmemory:   ");
        print_memory(t, &ms, 1);
        format_bytes(moved, sizeof moved, ms.bytes_moved);
        say(t, "; %s moved between nodes", moved);
        if (ms.bytes_to_disk || ms.bytes_from_disk) {
            char down[32], up[32];
            format_bytes(down, sizeof down, ms.bytes_to_disk);
            format_bytes(up, sizeof up, ms.bytes_from_disk);
            say(t, " (%s written to disk, %s read back)", down, up);
        }
        say(t, "; %.3f s of worker time waiting for data", ms.transfer_wait_s);
    }
    int files = o->steps || o->save_hf || o->save_peft || o->save_weights || o->save_llmc ||
                o->trace;
    say(t, "\nwritten:%s\n", files ? "" : " nothing (--steps 0: the validation is printed)");
    /* each file: whether written, whether in OUT (else path is the whole path), what it is */
    const struct { int on, in_out; const char *path, *what; } w[] = {
        {o->steps > 0, 1, "train.csv",
         "log: step, loss, lr, grad norm, ms, tokens/s, MFU, memory"},
        {o->steps > 0, 1, "loss.svg", "loss curve"},
        {o->steps > 0 && t->val_batches, 1, "val.csv",
         "validation log: step, loss on the held-out tokens, tokens"},
        {o->save_best && ti->best_val_loss < HUGE_VAL, 0, t->path_best, best},
        {t->nrun && !o->no_save, 0, t->path_ckpt, t->nfrozen
         ? "checkpoint of the trained parameters and their optimizer state"
         : "checkpoint: continue with --resume, generate with nnt-generate --checkpoint"},
        {o->save_peft != NULL, 0, peft, o->merge ? "PEFT adapter directory: adapter_config.json, "
         "adapter_model.safetensors (merged after)" : "PEFT adapter directory: "
         "adapter_config.json, adapter_model.safetensors"},
        {o->save_weights, 1, "model.safetensors", "weights, Hugging Face safetensors"},
        {o->save_llmc, 1, "model.bin", "weights, llm.c fp32 checkpoint"},
        {o->save_hf != NULL, 0, hf, o->save_hf_shard_bytes ? "Hugging Face model directory: "
         "config.json, weights in shards when above --save-hf-shard-size" : "Hugging Face "
         "model directory: config.json, model.safetensors"},
        {o->trace != NULL, 0, o->trace, "trace timeline"},
        {o->trace != NULL, 0, t->path_table, "per-op table"}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (w[i].on)
            say(t, "  %s  (%s)\n", w[i].in_out ? out_file(t, w[i].path, path) : w[i].path,
                w[i].what);
}

/* ---- setup, run, main ------------------------------------------------------------------------ */

static int setup(trainer *t)
{
    train_opts *o = &t->o;
    int rc, loaded = o->load_llmc || o->load_safetensors || o->load_hf;
    int model_given = o->model || o->layers > 0 || o->channels > 0 || o->heads > 0 ||
                      o->kv_heads > 0 || o->hidden > 0 || o->head_dim > 0 || o->qk_norm ||
                      o->vocab > 0 || o->context > 0 || loaded;
    if ((rc = resume_run_options(t)) || (rc = train_opts_resolve(o, loaded)) ||
        (rc = check_input_files(o)))
        return rc;
    /* --resume without tokenizer options: the run's tokenizer; without model options: the
     * model the checkpoint records */
    if (o->resume && t->resume_saved && (rc = resume_tokenizer(t, t->resume_saved)))
        return rc;
    if (o->resume && !model_given)
        t->cfg_resumed = nnt_model_train_state_config(NULL, o->resume, &t->cfg) == 0;
    if ((rc = open_tokenizer(t)))
        return rc;
    snprintf(t->path_best, sizeof t->path_best, "%s/best.safetensors", o->out_dir);
    snprintf(t->path_table, sizeof t->path_table, "%s/trace-ops.txt", o->out_dir);
    t->path_ckpt = o->save ? strdup(o->save) : malloc(strlen(o->out_dir) + 32);
    if (t->path_ckpt && !o->save)
        sprintf(t->path_ckpt, "%s/checkpoint.safetensors", o->out_dir);
    if ((rc = source_config(t)) || (rc = check_config(t)))
        return rc;
    if (!t->path_ckpt)
        return lib_error("nnt-train", NNT_E_NOMEM);
    if ((t->rank == 0 && (make_dirs("--out", o->out_dir) || keep_previous_run(t))) ||
        (rc = start_runtime(t)) ||
        (rc = create_model(t)) || (rc = open_data(t)) || (rc = create_optimizer(t)) ||
        (rc = create_trainer(t)))
        return rc ? rc : 1;
    return o->resume ? resume_state(t) : 0;
}

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

static void teardown(trainer *t)
{
    catch_signals(0);   /* (a run that failed: the handlers may still be set) */
    running = NULL;
    nnt_optim_destroy(t->opt);
    nnt_trainer_destroy(t->tr);
    nnt_layer_destroy(t->model);
    nnt_data_close(t->data);
    nnt_data_close(t->val_data);
    nnt_tokenizer_destroy(t->tok);
    if (t->ctx)
        nnt_ctx_destroy(t->ctx);
    for (int i = 0; i < 3; i++)
        free(t->resume_tok[i]);
    train_opts_free(&t->o);
    free(t->resume_saved), free(t->path_ckpt);
}

static int run(trainer *t)
{
    double start = now_s(), sample_s = 0;
    int rc = setup(t);
    if (rc)
        return rc;
    print_summary(t);
    running = t->tr;
    catch_signals(1);
    double train_start = now_s();
    rc = nnt_trainer_run(t->tr, t->o.stop_after > 0 && t->o.stop_after < t->o.steps
                                    ? t->o.stop_after : t->o.steps);
    double train_s = now_s() - train_start;
    nnt_trainer_info_get(t->tr, &t->ti);
    if (t->nonfinite) {
        fprintf(stderr, "nnt-train: the loss is not finite at step %lld: lower --lr\n",
                (long long)t->nonfinite);
        return 1;
    }
    if (rc)
        return lib_error("training", rc);
    /* MPI: the ranks' agreed stop decides (a signal to one rank stops every rank after the
     * same step; the others exit as if they had received SIGTERM; one that came after the
     * last step's agreement stops nothing) */
    int stop_sig = !t->mpi ? interrupted : !t->ti.stopped ? 0 : interrupted ? interrupted
                                                                             : SIGTERM;
    if (stop_sig && !interrupted)
        say(t, "another rank of the job was interrupted: every rank stops after step %lld\n",
            (long long)(t->done + t->nrun));
    if (stop_sig && t->o.no_save)
        say(t, "interrupted after step %lld (--no-save: no checkpoint)\n",
            (long long)(t->done + t->nrun));
    else if (stop_sig)
        say(t, "interrupted (%s) after step %lld: saving; continue with --resume %s\n",
            stop_sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)(t->done + t->nrun),
            t->path_ckpt);
    /* the handlers stay through the save: a first signal that comes now (under MPI: the
     * one of a rank that another rank's signal stopped already) only sets the flag; a
     * second ends the program, the previous checkpoint whole */
    rc = write_outputs(t);
    catch_signals(0);
    running = NULL;
    if (rc)
        return rc;
    if (t->o.sample > 0 && !stop_sig) {
        double sample_start = now_s();
        if ((rc = print_sample(t)))
            return rc;
        sample_s = now_s() - sample_start;
    }
    FILE *f = t->o.trace ? fopen(t->path_table, "r") : NULL;
    char line[512];
    if (f)
        say(t, "per-op table of the traced steps (%s):\n", t->path_table);
    while (f && fgets(line, sizeof line, f))
        say(t, "%s", line);
    if (f)
        fclose(f);
    print_final_report(t, train_s, sample_s, now_s() - start);
    return stop_sig ? 128 + stop_sig : 0;
}

int main(int argc, char **argv)
{
    trainer t;
    memset(&t, 0, sizeof t);
    setvbuf(stdout, NULL, _IOLBF, 0);   /* a line per step into a file or pipe too */
    int rc = train_opts_parse(argc, argv, &t.o), rank, size;
    if (rc)
        return rc == 1 ? 0 : 2;
    t.info = t.o.quiet ? NULL : t.o.print_loss ? stderr : stdout;
    /* On a terminal one progress line is redrawn in place (NNT_TRAIN_LIVE=0: a line a step) */
    const char *live = getenv("NNT_TRAIN_LIVE");
    t.live = t.info && !t.o.print_loss && isatty(fileno(t.info)) && !(live && !strcmp(live, "0"));
    launcher_rank(&rank, &size);
    t.mpi = t.o.distribute >= 0 || size > 1;
    /* Only rank 0 prints and writes files; the others print errors only (the library
     * writes the log, checkpoints and weights on rank 0, every rank taking part) */
    if (t.mpi && rank > 0) {
        t.info = NULL, t.live = 0, t.rank = rank;
        if (!freopen("/dev/null", "w", stdout)) {
            fprintf(stderr, "nnt-train: rank %d: cannot silence its output\n", rank);
            return 1;
        }
    }
    rc = run(&t);
    teardown(&t);
    return rc;
}
