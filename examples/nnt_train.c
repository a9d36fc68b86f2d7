/* SPDX-License-Identifier: MIT */
/* nnt-train: train a language model of any family of the library's table with nnt (the
 * library's main program, and an example of its public API: nothing but nnt.h is used).
 *   setup   the options (a --resume taking its run's), the model configuration, the runtime
 *           context, then the run its options describe (nnt_trainer_open: tokenizer, model,
 *           fine-tuning, tokens, optimizer, the trainer with its logs in --out, a resumed
 *           state, a previous run's files kept)
 *   train   nnt_trainer_run; each step reported as a line (redrawn in place on a terminal)
 *   report  checkpoint and weights, a text sample, the trace table, the final report
 * See nnt-train(1) and nnt-train --help. */
#define _XOPEN_SOURCE 700   /* fileno */
#include "train.h"
#include "text_out.h"
#include "tokenize_jsonl.h"

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
    nnt_trainer *tr;              /* the run (nnt_trainer_open), owning the parts below    */
    nnt_layer *model;
    nnt_tokenizer *tok;
    nnt_model_config cfg;
    nnt_family_info fam;          /* cfg's family in the library's table                  */
    int cfg_resumed;              /* cfg is the --resume checkpoint's                      */
    char *resume_saved;           /* the checkpoint's options string when nnt-train's      */
    char resumed_names[2048];     /* those that changed a value, for the summary           */
    char resume_out[4096];        /* --resume without --out: the checkpoint's directory    */
    nnt_trainer_info ti;          /* its state after setup, during and after the run      */
    int64_t nonfinite, done;      /* non-finite step; steps before this run                */
    int ncpus, ncuda, live, line_open, mpi, rank, nranks;
    char *path_ckpt, path_best[4096], path_table[4096];
    char *jsonl_bin[2];           /* --data, --val-data .jsonl made into token files in OUT */
    char jsonl_said[2][4400];     /* and the summary's line on each ("" when none)         */
} trainer;

/* After an out-of-memory error (the library names its own fields, mem_cpu_mib and swap_dir):
 * the options that give a run more room or make it need less. */
static void memory_hint(int rc)
{
    if (rc == NNT_E_NOMEM)
        fprintf(stderr, "nnt-train: more room: --mem-cpu MiB (the RAM budget; default: 15/16 of "
                "the RAM available at start) or a disk swap (--swap-dir DIR --swap-size MiB); less "
                "needed: a smaller --batch or --seq, --recompute\n");
}

/* A library call failed: its status and the thread's last failure message. */
static int lib_error(const char *what, int rc)
{
    fprintf(stderr, "nnt-train: %s: %s: %s\n", what, nnt_strerror(rc), nnt_ctx_last_error(NULL));
    memory_hint(rc);
    return 1;
}

/* nnt_trainer_open failed: a message "FIELD: ..." is about the option of that field (bad
 * usage, status 2, for an invalid value or a checkpoint of another run); one of a function
 * ("nnt_...: ") is not. */
static int open_error(const trainer *t, int rc)
{
    const train_opts *o = &t->o;
    const char *const renamed[][2] = {
        {"model_source", o->load_hf ? "load-hf" : o->load_llmc ? "load-llmc" : "load-safetensors"},
        {"model_config", "model"}, {"lora", "lora-rank/--lora-targets"}, {"tiling", "tile-*"},
        {"keep_previous", "out (or give --overwrite)"}, {"log_dir", "out"}};
    const char *m = nnt_ctx_last_error(NULL);
    size_t n = strspn(m, "abcdefghijklmnopqrstuvwxyz_");
    char name[64];
    if (n == 0 || n >= sizeof name || strncmp(m + n, ": ", 2) || !strncmp(m, "nnt_", 4))
        return lib_error("cannot set up the run", rc);
    snprintf(name, sizeof name, "%.*s", (int)n, m);
    for (char *c = name; *c; c++)
        *c = *c == '_' ? '-' : *c;
    for (size_t i = 0; i < sizeof renamed / sizeof renamed[0]; i++)
        if (!strncmp(m, renamed[i][0], n) && !renamed[i][0][n])
            snprintf(name, sizeof name, "%s", renamed[i][1]);
    if (rc == NNT_E_NOMEM)   /* (not the option's fault: what was being made for it) */
        fprintf(stderr, "nnt-train: out of memory while making what --%s asks for: %s\n", name,
                m + n + 2);
    else
        fprintf(stderr, "nnt-train: --%s: %s: %s\n", name, nnt_strerror(rc), m + n + 2);
    memory_hint(rc);
    return rc == NNT_E_INVAL || (!strncmp(m, "resume:", 7) && rc != NNT_E_IO) ? 2 : 1;
}

/* The width of the terminal t->info is (0: not a terminal, or unknown). */
static int term_width(const trainer *t)
{
    struct winsize ws;
    if (!t->live || ioctl(fileno(t->info), TIOCGWINSZ, &ws) != 0)
        return 0;
    return ws.ws_col;
}

static void say(trainer *t, const char *fmt, ...)
{
    if (!t->info)
        return;
    if (t->line_open)   /* end the live progress line first */
        fputc('\n', t->info), t->line_open = 0;
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

/* OUT/name in buf (4096 bytes). */
static char *out_file(const trainer *t, const char *name, char *buf)
{
    snprintf(buf, 4096, "%s/%s", t->o.out_dir, name);
    return buf;
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

/* --layers L on a preset: its layers without rotary positions (SmolLM3's every 4th) as its
 * pattern repeated over the L layers. */
static void resize_layers(nnt_model_config *c, int64_t layers)
{
    uint64_t nope[NNT_MODEL_MAX_NOPE_LAYER / 64] = {0};
    for (int64_t i = 0; i < layers && i < NNT_MODEL_MAX_NOPE_LAYER; i++)
        if (NNT_MODEL_NOPE_LAYER(c, i % c->layers))
            nope[i / 64] |= (uint64_t)1 << (i % 64);
    memcpy(c->nope_layers, nope, sizeof nope);
    c->layers = layers;
}

/* A preset's LongRoPE factors are one per rotated pair of its head size: with another head
 * size (--channels, --heads, --head-dim) the rope takes no scaling, and says so. */
static void longrope_fit(nnt_model_config *c)
{
    if (c->rope.scaling != NNT_ROPE_SCALING_LONGROPE)
        return;
    int64_t hd = c->head_dim ? c->head_dim : c->channels / c->heads;
    double f = c->rope.partial_rotary_factor;
    int64_t rotary = f == 0.0 || f == 1.0 ? hd : (int64_t)((double)hd * f);
    if (rotary / 2 == c->rope.nfactors)
        return;
    c->rope.scaling = NNT_ROPE_SCALING_NONE;
    fprintf(stderr, "nnt-train: the preset's LongRoPE has %lld factors, for another head size; "
            "with %lld rotated dimensions of %lld the rope takes no scaling\n",
            (long long)c->rope.nfactors, (long long)rotary, (long long)hd);
}

/* The configuration of a fresh or safetensors-loaded model: preset or the default small
 * GPT-2, then the individual overrides, each allowed by the family's features. */
static int model_config(trainer *t)
{
    const train_opts *o = &t->o;
    nnt_model_config c = NNT_MODEL_CONFIG_INIT;
    if (o->model && nnt_model_preset(o->model, &c)) {
        char list[1024];
        train_preset_list(list, sizeof list, 0);
        return train_usage_error("--model: unknown preset '%s' (%s)", o->model, list);
    }
    if (!o->model)   /* (V 0: the tokenizer's) */
        c.layers = 4, c.channels = 128, c.heads = 4, c.max_seq = 128, c.vocab = 0;
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
    if (o->layers > 0)
        resize_layers(&c, o->layers);
    if (o->channels > 0) c.channels = o->channels;
    if (o->heads > 0) {   /* a preset with as many kv heads as heads keeps it so */
        if (c.kv_heads == c.heads)
            c.kv_heads = o->heads;
        c.heads = o->heads;
    }
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
        return train_usage_error("%s %lld does not divide %s %lld%s",
                                 o->kv_heads > 0 ? "--kv-heads" : "the preset's kv heads",
                                 (long long)c.kv_heads, o->heads > 0 ? "--heads" : "the heads",
                                 (long long)c.heads, o->kv_heads > 0 ? "" : " (give --kv-heads)");
    longrope_fit(&c);
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
    if (t->o.loop.seq < 0 && t->cfg.max_seq > 0)   /* (0: a checkpoint's, not known yet) */
        t->o.loop.seq = t->cfg.max_seq < 128 ? t->cfg.max_seq : 128;
    if (t->cfg.max_seq > 0 && t->o.loop.seq > t->cfg.max_seq)
        return train_usage_error("--seq %lld is longer than the context %lld (--context)",
                                 (long long)t->o.loop.seq, (long long)t->cfg.max_seq);
    return 0;
}

static int start_runtime(trainer *t)
{
    const train_opts *o = &t->o;
    nnt_ctx_options co = NNT_CTX_OPTIONS_INIT;
    co.ncpus = (int)o->cpus, co.ncuda = (int)o->gpus, co.sched = o->sched;
    co.mem_gpu_mib = o->mem_gpu, co.mem_cpu_mib = o->mem_cpu;
    co.swap_dir = o->swap_dir, co.swap_mib = o->swap_size;
    co.mpi = o->distribute >= 0 ? 1 : -1;   /* -1: as the launcher started the process */
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
    t->mpi = o->distribute >= 0 || t->nranks > 1;
    /* Only rank 0 prints and writes files; the others print errors only (the library
     * writes the log, checkpoints and weights on rank 0, every rank taking part) */
    if (t->rank > 0 && (t->info = NULL, t->live = 0, !freopen("/dev/null", "w", stdout))) {
        fprintf(stderr, "nnt-train: rank %d: cannot silence its output\n", t->rank);
        return 1;
    }
    return 0;
}

/* The run the options describe (nnt_trainer_open): a fresh model of the options'
 * configuration, the --load-* source, or (a fine-tuning run resumed) the source of its base;
 * the trainer's files in OUT, its report to on_report. */
static int on_report(const nnt_trainer_report *rep, void *user);
static int set_label_names(trainer *t);

static int open_run(trainer *t)
{
    train_opts *o = &t->o;
    const char *source = o->load_llmc ? o->load_llmc : o->load_safetensors ? o->load_safetensors
                       : o->load_hf;
    nnt_lora_options lo = NNT_LORA_OPTIONS_INIT;
    lo.rank = o->lora_rank > 0 ? o->lora_rank : lo.rank;
    lo.alpha = o->lora_alpha >= 0 ? o->lora_alpha : lo.alpha;
    lo.dropout = o->lora_dropout >= 0 ? o->lora_dropout : 0.0;
    lo.targets = o->lora_targets, lo.seed = o->loop.seed, lo.dora = o->lora_dora;
    nnt_run_config *r = &o->run;
    r->model_source = source;
    r->model_config = o->load_llmc || o->load_hf || t->cfg_resumed ? NULL : &t->cfg;
    r->tiling = &o->tiling, r->lora = train_lora_asked(o) ? &lo : NULL, r->optim = &o->optim;
    r->freeze_mode = o->quantize ? NNT_FREEZE_NF4 : 0;
    r->data = r->data ? r->data : TRAIN_DEFAULT_DATA;   /* (a directory: read as text) */
    nnt_trainer_options *l = &o->loop;
    l->checkpoint = t->path_ckpt, l->best_checkpoint = o->save_best ? t->path_best : NULL;
    l->trace = o->trace, l->trace_table = t->path_table;
    /* the peak: --peak-gflops; none with CUDA workers (theirs is not known); measured on the
     * CPU workers; over MPI (a GEMM would time one rank's share) or when it cannot be
     * measured, the nominal one of every rank's workers */
    l->peak_flops = o->peak_gflops > 0 ? 1e9 * o->peak_gflops : t->ncuda ? 0
                  : 1e9 * TRAIN_CPU_CORE_GFLOPS * (t->ncpus ? t->ncpus : 1) *
                        (t->nranks > 1 ? t->nranks : 1);
    l->measure_peak = o->peak_gflops <= 0 && !t->ncuda && !t->mpi && l->steps > 0;
    l->log_dir = o->out_dir;   /* train.csv, val.csv, loss.svg (steps > 0; rank 0) */
    l->program = "nnt-train", l->callback = on_report, l->user = t;
    l->resume = o->resume;
    /* a second run into one --out keeps the first's files (in OUT/previous-N) */
    l->keep_previous = !o->overwrite && (l->steps > 0 || o->save_weights || o->save_llmc ||
                                         o->trace);
    l->keep_also = "best.safetensors,model.safetensors,model.bin,trace-ops.txt";
    char extra[320];   /* (the preset is named in the summary; --quantize for a resume) */
    snprintf(extra, sizeof extra, "\"sample\": %lld%s%s%s%s", (long long)o->sample,
             o->model ? ", \"preset\": \"" : "", o->model ? o->model : "", o->model ? "\"" : "",
             o->quantize ? ", \"quantize\": \"nf4\"" : "");
    l->extra_options = extra;
    int rc = nnt_trainer_open(t->ctx, r, l, &t->tr);
    r->lora = NULL;   /* (a local) */
    if (rc)
        return open_error(t, rc);
    t->ti.size = sizeof t->ti;
    nnt_trainer_info_get(t->tr, &t->ti);
    nnt_trainer_parts(t->tr, &t->model, NULL, NULL, &t->tok);
    nnt_model_config_of(t->model, &t->cfg);
    t->done = t->ti.step;
    if (o->label_names && (rc = set_label_names(t)))
        return rc;
    int64_t tok_vocab = 0;   /* the sample's prompt goes through the tokenizer */
    nnt_tokenizer_vocab_size(t->tok, &tok_vocab);
    if (o->sample > 0 && t->cfg.num_labels == 0 && tok_vocab > t->cfg.vocab)   /* (classifiers:
                                                                                 no sample) */
        return train_usage_error("the tokenizer has %lld tokens but the model's vocab is %lld "
                                 "(--vocab, --tokenizer (or --sample 0 with token files))",
                                 (long long)tok_vocab, (long long)t->cfg.vocab);
    if (t->ti.kept_previous && !o->quiet)
        fprintf(stderr, "nnt-train: kept the previous run's files in %s (--overwrite replaces "
                "them)\n", t->ti.kept_previous);
    return 0;
}

/* The library's warnings about the run (too little data), on stderr before training. */
static void print_warnings(const trainer *t)
{
    char text[2048];
    if (t->rank != 0 || t->o.quiet ||
        nnt_trainer_text(t->tr, NNT_TRAINER_TEXT_WARNINGS, NULL, 0, text, sizeof text))
        return;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        fprintf(stderr, "nnt-train: warning: %s\n", line);
}

/* --label-names LIST: the names of the classifier's labels (nnt_model_set_label_names) */
static int set_label_names(trainer *t)
{
    int64_t L = t->cfg.num_labels, n = 0;
    const char **names = NULL;
    if (L < 1)
        return train_usage_error("--label-names names a classifier's labels: the model is a "
                                 "language model (give --num-labels N)");
    if (cli_names(t->o.label_names, &names, &n))
        return lib_error("--label-names", NNT_E_NOMEM);
    int rc = n != L ? train_usage_error("--label-names gives %lld names for a classifier of "
                                        "%lld labels", (long long)n, (long long)L)
                    : nnt_model_set_label_names(t->model, names, n);
    if (n == L && rc)
        rc = lib_error("--label-names", rc);
    free((void *)names[0]);
    free(names);
    return rc;
}

/* ---- --resume ------------------------------------------------------------------------------ */

/* --resume: the checkpoint's options string when nnt-train wrote it; the options it records
 * that the command line does not give take their saved values (the library takes the model,
 * a fine-tuning run's base included, from the checkpoint unless --load-* is given). */
static int resume_options(trainer *t)
{
    train_opts *o = &t->o;
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    struct stat sb;
    if (!o->resume)
        return 0;
    if (stat(o->resume, &sb))
        return train_usage_error("--resume: cannot open '%s': %s", o->resume, strerror(errno));
    int rc = nnt_train_state_info(NULL, o->resume, &st);
    if (rc) {
        fprintf(stderr, "nnt-train: --resume %s cannot be used: %s\n", o->resume,
                nnt_ctx_last_error(NULL));
        return rc == NNT_E_FORMAT ? 2 : 1;
    }
    if (st.options && strstr(st.options, "\"program\": \"nnt-train\""))
        t->resume_saved = strdup(st.options);   /* (NULL, out of memory: as not recorded) */
    nnt_train_state_clear(&st);
    if (!train_opts_given(o, "out")) {   /* continue where the run's logs are */
        snprintf(t->resume_out, sizeof t->resume_out, "%s", o->resume);
        char *slash = strrchr(t->resume_out, '/');
        if (!slash)
            snprintf(t->resume_out, sizeof t->resume_out, ".");
        else
            slash[slash == t->resume_out] = '\0';   /* ("/x": "/") */
        o->out_dir = t->resume_out;
    }
    return train_opts_restore(o, t->resume_saved, t->resumed_names, sizeof t->resumed_names);
}

/* A resumed run with nothing to do is bad usage (the library's summary notes what else a
 * resume changes). */
static int resume_notes(trainer *t)
{
    const train_opts *o = &t->o;
    int64_t steps = o->loop.steps;
    if (!t->resume_saved)
        say(t, "note: %s was not written by nnt-train: only its tensor shapes were checked\n",
            o->resume);
    if (t->done >= steps && steps > 0)
        return train_usage_error("--resume %s is at step %lld: --steps %lld leaves nothing to "
                                 "do (--steps is the total)", o->resume, (long long)t->done,
                                 (long long)steps);
    if (o->stop_after > 0 && t->done >= o->stop_after)
        return train_usage_error("--resume %s is at step %lld: --stop-after %lld leaves "
                                 "nothing to do", o->resume, (long long)t->done,
                                 (long long)o->stop_after);
    return 0;
}

/* ---- summary and progress ------------------------------------------------------------------ */

static void print_summary(trainer *t)
{
    const char *version = "?";
    char text[16384] = "";
    nnt_version(NULL, &version);
    nnt_trainer_text(t->tr, NNT_TRAINER_TEXT_SUMMARY, NULL, term_width(t), text, sizeof text);
    say(t, "nnt-train %s\n%s%s%s\n", version, t->jsonl_said[0], t->jsonl_said[1], text);
    print_warnings(t);
    int64_t tok_vocab = 0;
    nnt_tokenizer_vocab_size(t->tok, &tok_vocab);
    if (t->o.sample > 0 && t->cfg.vocab > tok_vocab)
        say(t, "note:      the model has %lld token ids, the %s tokenizer %lld: the sample "
               "shows the others as <id>\n", (long long)t->cfg.vocab,
            train_choice_name("tokenizer", t->ti.tokenizer), (long long)tok_vocab);
    if (t->done && t->resumed_names[0])
        say(t, "resumed with its run's %s (options given here override them)\n",
            t->resumed_names);
}

static int run_problem(const trainer *t);

/* A step's or a validation's line: in full, or (a step on a terminal, between the full
 * ones every steps/10) a live one redrawn in place; --print-loss: "step N loss X" or "val N
 * loss X" on stdout. On a terminal, the fields that do not fit its width are left out (the
 * log has them all: train.csv). */
static void report_line(trainer *t, const nnt_trainer_report *r)
{
    int64_t steps = t->o.loop.steps, every = steps / 10 > 0 ? steps / 10 : 1;
    int val = r->event == NNT_TRAINER_VALIDATION;
    int live = !val && t->live && r->step % every && r->step != steps && !r->validates;
    char line[1024] = "";
    if (t->o.print_loss) {
        printf("%s %lld loss %.6f", val ? "val" : "step", (long long)r->step, r->loss);
        if (val && r->examples && run_problem(t) == NNT_PROBLEM_REGRESSION)
            printf(" mae %.6f", r->mae);
        else if (val && r->examples)   /* a classifier's */
            printf(" accuracy %.6f", r->accuracy);
        if (val && r->examples && run_problem(t) == NNT_PROBLEM_MULTI_LABEL)
            printf(" exact_match %.6f f1 %.6f", r->exact_match, r->f1);
        printf("\n");
        fflush(stdout);
        return;
    }
    if (!t->info)
        return;
    nnt_trainer_text(t->tr, live ? NNT_TRAINER_TEXT_LIVE : NNT_TRAINER_TEXT_REPORT, r,
                     val ? 0 : term_width(t), line, sizeof line);
    if (!live && t->line_open && !val)
        fputs("\r\033[K", t->info);   /* the full line replaces the live one */
    t->line_open = val && t->line_open;   /* (say ends a live line before a validation's) */
    say(t, live ? "\r%s\033[K" : "%s\n", line);
    t->line_open = live;
    fflush(t->info);
}

/* The trainer's reports: a step's or a validation's line. Nonzero stops the run. */
static int on_report(const nnt_trainer_report *rep, void *user)
{
    trainer *t = user;
    const train_opts *o = &t->o;
    nnt_trainer_info_get(t->tr, &t->ti);   /* this run's steps and validations so far */
    if (rep->event == NNT_TRAINER_CHECKPOINT) {   /* --save-every, or SIGUSR1's */
        if (rep->requested && t->rank == 0)   /* (rank 0 writes it; the others took part) */
            fprintf(stderr, "nnt-train: SIGUSR1: checkpoint of step %lld written to %s\n",
                    (long long)rep->step, t->path_ckpt);
        return 0;
    }
    report_line(t, rep);
    if (rep->event == NNT_TRAINER_VALIDATION && rep->saved_best && !o->print_loss && t->info)
        say(t, "saved %s: the lowest validation loss so far\n", t->path_best), fflush(t->info);
    if (rep->event == NNT_TRAINER_STEP && !isfinite(rep->loss))
        t->nonfinite = rep->step;
    return 0;
}
/* ---- after training: files, sample, final report ------------------------------------------- */

static int write_outputs(trainer *t)
{
    const train_opts *o = &t->o;
    char path[4096];
    int rc;
    if (t->ti.steps_run && !o->no_save && (rc = nnt_trainer_save(t->tr, t->path_ckpt)))
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
    hf.tokenizer_json = t->ti.tokenizer != NNT_TOKENIZER_JSON ? NULL : o->run.tokenizer_json
                        ? o->run.tokenizer_json : o->load_hf;   /* (or the directory's own) */
    if (o->save_hf && (rc = nnt_model_save_hf_ex(t->model, o->save_hf, &hf)))
        return lib_error("--save-hf", rc);
    return 0;
}

/* The sample: --prompt continued by --sample tokens, control bytes escaped (newlines, tabs,
 * printable ASCII and valid UTF-8 as they are, other bytes as \xHH). */
static int print_sample(trainer *t)
{
    const train_opts *o = &t->o;
    char *text = NULL;
    size_t len = 0;
    uint64_t x = t->ti.rng[1] * 5;   /* the seed: the next xoshiro256** output of the rng */
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = o->temperature, s.top_k = o->top_k, s.seed = ((x << 7) | (x >> 57)) * 9;
    int rc = nnt_model_generate_text(t->model, t->tok, o->prompt, o->sample, &s, &text, &len);
    if (rc)
        return lib_error("sample (--prompt)", rc);
    if (t->info) {
        fprintf(t->info, "---- sample: %lld tokens, temperature %g, top-k %lld ----\n",
                (long long)o->sample, o->temperature, (long long)o->top_k);
        text_out_escaped(t->info, (const unsigned char *)text, len, 1);
        fputs("\n----\n", t->info);
    }
    free(text);
    return 0;
}

/* The steps and validations, the sample's time (sample_s, 0 without one), all (total_s), the
 * memory since the start, the files written. */
static void print_final_report(trainer *t, double sample_s, double total_s)
{
    const train_opts *o = &t->o;
    const nnt_trainer_options *l = &o->loop;
    char text[16384] = "", path[4096], hf[4096], peft[4096];
    snprintf(hf, sizeof hf, "%s/", o->save_hf ? o->save_hf : "");
    snprintf(peft, sizeof peft, "%s/", o->save_peft ? o->save_peft : "");
    if (l->steps == 0)
        say(t, "\nno training (--steps 0)");
    nnt_trainer_text(t->tr, NNT_TRAINER_TEXT_RUN, NULL, term_width(t), text, sizeof text);
    say(t, "%s%s", *text ? "\n" : "", text);
    if (sample_s > 0)
        say(t, "\nsample:   %lld tokens in %.2f s (%.1f tokens/s)", (long long)o->sample,
            sample_s, (double)o->sample / sample_s);
    say(t, "\ntotal:    %.2f s with start-up and files", total_s);
    int width = term_width(t) > 34 ? term_width(t) - 10 : 0;   /* (after its label) */
    if (nnt_trainer_text(t->tr, NNT_TRAINER_TEXT_MEMORY, NULL, width, text, sizeof text) == 0 &&
        *text)   /* since the runtime started */
        say(t, "\nmemory:   %s", text);
    int files = l->steps || o->save_hf || o->save_peft || o->save_weights || o->save_llmc ||
                o->trace;
    say(t, "\nwritten:%s\n", files ? "" : " nothing (--steps 0: the validation is printed)");
    if (nnt_trainer_text(t->tr, NNT_TRAINER_TEXT_FILES, NULL, term_width(t), text,
                         sizeof text) == 0 && *text)
        say(t, "%s\n", text);   /* the logs, checkpoints and trace; then the program's files */
    const struct { int on, in_out; const char *path, *what; } w[] = {
        {o->save_peft != NULL, 0, peft, o->merge ? "PEFT adapter directory: adapter_config.json, "
         "adapter_model.safetensors (merged after)" : "PEFT adapter directory: "
         "adapter_config.json, adapter_model.safetensors"},
        {o->save_weights, 1, "model.safetensors", "weights, Hugging Face safetensors"},
        {o->save_llmc, 1, "model.bin", "weights, llm.c fp32 checkpoint"},
        {o->save_hf != NULL, 0, hf, o->save_hf_shard_bytes ? "Hugging Face model directory: "
         "config.json, weights in shards when above --save-hf-shard-size" : "Hugging Face "
         "model directory: config.json, model.safetensors"}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (w[i].on)
            say(t, "  %s  (%s)\n", w[i].in_out ? out_file(t, w[i].path, path) : w[i].path,
                w[i].what);
}
/* ---- setup, run, main ------------------------------------------------------------------------ */

/* mkdir -p dir (0, or 1 after a message) */
static int make_dirs(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1;; c++)
        if (*c == '/' || *c == '\0') {
            char was = *c;
            *c = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                fprintf(stderr, "nnt-train: --out: cannot create %s: %s\n", p, strerror(errno));
                return 1;
            }
            if ((*c = was) == '\0')
                return 0;
        }
}

/* The labels of the classifier the run trains: --num-labels, else the source's (0: a
 * language model, 1: a reward model or a regression of one value). */
static int64_t run_labels(const trainer *t)
{
    return t->o.run.num_labels ? t->o.run.num_labels : t->cfg.num_labels;
}

/* Its problem type: --problem-type, else the source's (NNT_PROBLEM_*) */
static int run_problem(const trainer *t)
{
    return t->o.run.problem_type >= 0 ? t->o.run.problem_type : t->cfg.problem_type;
}

/* The names the records of a classifier of L labels may give their labels by: --label-names,
 * else those of the classifier the run starts from (nnt_model_source_label_name: its
 * config.json's id2label, as transformers writes it), else none (*names NULL: indexes only).
 * *names as cli_names gives them (free names[0], then names); 0, or 1 (reported). */
static int record_label_names(const trainer *t, int64_t L, const char ***names, int64_t *n)
{
    const train_opts *o = &t->o;
    *names = NULL, *n = 0;
    if (L < 2)
        return 0;
    if (o->label_names)
        return cli_names(o->label_names, names, n) ? lib_error("--label-names", NNT_E_NOMEM) : 0;
    if (!o->load_hf || t->cfg.num_labels != L)
        return 0;
    enum { NAME_MAX_BYTES = 256 };   /* (a name: 1 to 255 bytes, nnt_model_set_label_names) */
    const char **out = calloc((size_t)L, sizeof *out);
    char *store = malloc((size_t)L * NAME_MAX_BYTES);
    int rc = out && store ? 0 : NNT_E_NOMEM;
    for (int64_t k = 0; rc == 0 && k < L; k++) {
        out[k] = store + k * NAME_MAX_BYTES;
        rc = nnt_model_source_label_name(NULL, o->load_hf, k, store + k * NAME_MAX_BYTES,
                                         NAME_MAX_BYTES);
    }
    if (rc) {
        free(store), free(out);
        return lib_error("--load-hf", rc);
    }
    *names = out, *n = L;
    return 0;
}

/* --data or --val-data FILE.jsonl (format auto): prompt/answer records (TRL's forms) made
 * into a token file with a loss mask, OUT/FILE.tokens.bin (--val-data's FILE.val-tokens.bin),
 * rows of T, one example a row (--pack: several), those longer than T cut (--too-long),
 * with --chat-template, --loss, --chat-date and --tokenizer-config as nnt-tokenize --jsonl
 * --seq T takes them (through nnt_sft), which the run then reads; preference records (DPO,
 * a reward model) as pairs of rows; classification records (a classifier) as each text then
 * its label. One process only (rank 0 would write it while the others read). */
static int jsonl_data(trainer *t, const char *option, const char **path, int which)
{
    train_opts *o = &t->o;
    size_t n = *path ? strlen(*path) : 0;
    if (n < 7 || strcmp(*path + n - 6, ".jsonl") != 0 || o->run.data_format != NNT_DATA_AUTO)
        return 0;
    int64_t labels = run_labels(t);
    int problem = labels > 0 ? run_problem(t) : NNT_PROBLEM_DEFAULT;
    /* (a pair: two examples, rows) */
    int unpaired = o->loop.dpo_beta > 0 && train_loss_unpaired(o);
    int pairs = !unpaired &&
                (o->loop.dpo_beta > 0 || (labels == 1 && problem == NNT_PROBLEM_DEFAULT));
    const char *json = o->run.tokenizer_json ? o->run.tokenizer_json : o->load_hf;
    if (t->mpi)
        return train_usage_error("%s %s: prompt/answer records are made into a token file by "
                                 "one process: run nnt-tokenize --jsonl first and give the "
                                 "file it writes", option, *path);
    if (!json || (o->run.tokenizer >= 0 && o->run.tokenizer != NNT_TOKENIZER_JSON))
        return train_usage_error("%s %s: prompt/answer records need the model's Hugging Face "
                                 "tokenizer and chat template: --load-hf DIR or "
                                 "--tokenizer-json FILE", option, *path);
    const char *base = strrchr(*path, '/') ? strrchr(*path, '/') + 1 : *path;
    size_t len = strlen(o->out_dir) + strlen(base) + 16;
    char *out = malloc(len);
    nnt_tokenizer *tok = NULL;
    int64_t vocab = 0;
    int rc = out ? nnt_tokenizer_hf_load(json, &tok) : NNT_E_NOMEM;
    if (rc) {
        free(out);
        return lib_error("tokenizer for the prompt/answer records", rc);
    }
    snprintf(out, len, "%s/%.*s.%s", o->out_dir, (int)(strlen(base) - 6), base,
             which ? "val-tokens.bin" : "tokens.bin");
    nnt_tokenizer_vocab_size(tok, &vocab);
    const char **names = NULL;   /* a classifier's records may name its labels */
    int64_t nnames = 0;
    jsonl_opts jo = {o->loop.seq, o->jsonl_pack, o->jsonl_too_long == 0,
                     cli_chat_template(cli_chat_templates[o->jsonl_template]),
                     o->jsonl_tokenizer_config, json, o->jsonl_chat_date, "nnt-train",
                     o->jsonl_loss == 1, o->jsonl_loss == 2,
                     pairs, labels >= 2 || problem ? labels : 0, NULL, 0, problem, unpaired,
                     labels > 0 ? o->run.pad_token_id : -1};   /* (a classifier's --pad-id) */
    jsonl_stats st = {0};
    char *inputs[1] = {(char *)*path};
    rc = problem ? 0 : record_label_names(t, labels, &names, &nnames);
    jo.label_names = names, jo.nlabel_names = nnames;
    rc = rc || make_dirs(o->out_dir) ? 1
                                     : tokenize_jsonl(tok, &jo, inputs, 1, out, 0, vocab, &st);
    nnt_tokenizer_destroy(tok);
    if (names)
        free((void *)names[0]);
    free(names);
    if (rc) {
        fprintf(stderr, "nnt-train: %s %s: not made into a token file\n", option, *path);
        free(st.label_counts);
        free(out);
        return 1;
    }
    if (labels > 0 && o->run.pad_token_id < 0)   /* a classifier's: TRL's, the tokenizer's */
        o->run.pad_token_id = st.pad;
    /* a classifier's: the examples of each label (the first 8); multi-label: those above 0.5
     * for each label; none for a regression */
    char counts[256] = "";
    if (unpaired)   /* (paired records: two rows each, as KTOTrainer unpairs them) */
        snprintf(counts, sizeof counts, st.paired ? ", unpaired as KTOTrainer does (%lld "
                 "chosen rows desirable, %lld rejected undesirable)" : " (%lld desirable, "
                 "%lld undesirable)", (long long)st.desirable,
                 (long long)(st.examples - st.desirable));
    int64_t shown = problem == NNT_PROBLEM_REGRESSION ? 0 : jo.num_labels;
    for (int64_t k = 0, at = 0; k < shown && k < 8 && at < (int64_t)sizeof counts; k++)
        at += snprintf(counts + at, sizeof counts - (size_t)at, "%s%lld: %lld%s",
                       k ? ", " : problem ? " (above 0.5, labels " : " (labels ", (long long)k,
                       (long long)st.label_counts[k],
                       k + 1 == jo.num_labels ? ")" : k == 7 ? ", ...)" : "");
    free(st.label_counts);
    snprintf(t->jsonl_said[which], sizeof t->jsonl_said[which], "records:   %s: %lld "
             "%s%s (%lld %scut to T %lld) in %lld rows, %lld tokens count in the loss, "
             "written to %s\n", *path, (long long)(pairs ? st.examples / 2 : st.paired ?
                                                  st.paired : st.examples),
             pairs || st.paired ? "preference pairs" : unpaired ? "unpaired preference records"
                                                     : "examples",
             counts, (long long)st.cut,
             pairs ? "sequences " : "",
             (long long)o->loop.seq, (long long)st.rows, (long long)st.counted, out);
    if (st.paired && which == 0 && o->run.val_split > 0)   /* (the last chunk: rejected) */
        fprintf(stderr, "nnt-train: warning: --val-split holds out the last rows of %s, "
                "which of preference records read unpaired are rejected (undesirable) ones; "
                "give --val-data of records held out for a validation of both kinds\n", out);
    t->jsonl_bin[which] = out;
    *path = out;
    return 0;
}

static int setup(trainer *t)
{
    train_opts *o = &t->o;
    int rc;
    if ((rc = resume_options(t)) || (rc = train_opts_resolve(o)))
        return rc;
    int model_given = o->model || o->layers > 0 || o->channels > 0 || o->heads > 0 ||
                      o->kv_heads > 0 || o->hidden > 0 || o->head_dim > 0 || o->qk_norm ||
                      o->vocab > 0 || o->context > 0 || o->load_llmc || o->load_safetensors ||
                      o->load_hf;
    /* --resume without model options: the library takes the checkpoint's model (its
     * configuration here for the checks, when the checkpoint records one) */
    if ((t->cfg_resumed = o->resume && !model_given))
        nnt_model_train_state_config(NULL, o->resume, &t->cfg);
    snprintf(t->path_best, sizeof t->path_best, "%s/best.safetensors", o->out_dir);
    snprintf(t->path_table, sizeof t->path_table, "%s/trace-ops.txt", o->out_dir);
    t->path_ckpt = o->save ? strdup(o->save) : malloc(strlen(o->out_dir) + 32);
    if (t->path_ckpt && !o->save)
        sprintf(t->path_ckpt, "%s/checkpoint.safetensors", o->out_dir);
    if ((rc = source_config(t)) || (rc = check_config(t)))
        return rc;
    if (!t->path_ckpt)
        return lib_error("nnt-train", NNT_E_NOMEM);
    if ((rc = start_runtime(t)) || (rc = jsonl_data(t, "--data", &o->run.data, 0)) ||
        (rc = jsonl_data(t, "--val-data", &o->run.val_data, 1)) || (rc = open_run(t)) ||
        (rc = check_config(t)))
        return rc;   /* (checked again with the model's configuration) */
    return o->resume ? resume_notes(t) : 0;
}

static void teardown(trainer *t)
{
    nnt_trainer_destroy(t->tr);   /* (and the model, data, tokenizer it was built from) */
    if (t->ctx)
        nnt_ctx_destroy(t->ctx);
    train_opts_free(&t->o);
    free(t->resume_saved), free(t->path_ckpt);
    free(t->jsonl_bin[0]), free(t->jsonl_bin[1]);
}

static int run(trainer *t)
{
    double start = now_s(), sample_s = 0;
    int rc = setup(t);
    if (rc)
        return rc;
    print_summary(t);
    /* SIGINT, SIGTERM (how Slurm, systemd and docker stop a program): stop after the step in
     * progress and save; a second one ends the program at once (the previous checkpoint stays
     * whole). SIGUSR1 (e.g. sbatch --signal=B:USR1@120): a checkpoint, the run going on. */
    nnt_trainer_handle_signals(t->tr, 1);
    int64_t steps = t->o.loop.steps;
    rc = nnt_trainer_run(t->tr, t->o.stop_after > 0 && t->o.stop_after < steps ? t->o.stop_after
                                                                               : steps);
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
    int own = t->ti.stop_signal;
    int stop_sig = !t->mpi ? own : !t->ti.stopped ? 0 : own ? own : SIGTERM;
    if (stop_sig && !own)
        say(t, "another rank of the job was interrupted: every rank stops after step %lld\n",
            (long long)(t->done + t->ti.steps_run));
    if (t->ti.early_stop_step > 0)
        say(t, "early stop after step %lld: %lld validations in a row without a loss below "
            "%.6f (step %lld)%s\n", (long long)t->ti.early_stop_step,
            (long long)t->o.loop.early_stop, t->ti.lowest_val_loss,
            (long long)t->ti.lowest_val_step,
            t->o.save_best ? "; its state is in best.safetensors" : "");
    if (stop_sig && t->o.no_save)
        say(t, "interrupted after step %lld (--no-save: no checkpoint)\n",
            (long long)(t->done + t->ti.steps_run));
    else if (stop_sig)
        say(t, "interrupted (%s) after step %lld: saving; continue with --resume %s\n",
            stop_sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)(t->done + t->ti.steps_run),
            t->path_ckpt);
    /* the handlers stay through the save: a first signal that comes now (under MPI: the
     * one of a rank that another rank's signal stopped already) only sets the flag; a
     * second ends the program, the previous checkpoint whole */
    rc = write_outputs(t);
    nnt_trainer_handle_signals(t->tr, 0);
    if (rc)
        return rc;
    if (t->o.sample > 0 && !stop_sig && t->cfg.num_labels == 0) {   /* (no classifier's) */
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
    print_final_report(t, sample_s, now_s() - start);
    return stop_sig ? 128 + stop_sig : 0;
}

int main(int argc, char **argv)
{
    trainer t;
    memset(&t, 0, sizeof t);
    setvbuf(stdout, NULL, _IOLBF, 0);   /* a line per step into a file or pipe too */
    int rc = train_opts_parse(argc, argv, &t.o);
    if (rc)
        return rc == 1 ? 0 : 2;
    t.info = t.o.quiet ? NULL : t.o.print_loss ? stderr : stdout;
    if (t.o.quiet && !getenv("NNT_LOG_LEVEL"))   /* the library's warnings too */
        nnt_log_set_level(NNT_LOG_ERROR);
    /* On a terminal one progress line is redrawn in place (NNT_TRAIN_LIVE=0: a line a step) */
    const char *live = getenv("NNT_TRAIN_LIVE");
    t.live = t.info && !t.o.print_loss && isatty(fileno(t.info)) && !(live && !strcmp(live, "0"));
    rc = run(&t);
    teardown(&t);
    return rc;
}
