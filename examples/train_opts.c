/* nnt-train: command-line options (table-driven parsing, --help, defaults). */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum opt_type { OPT_FLAG, OPT_INT, OPT_REAL, OPT_STR, OPT_CHOICE } opt_type;

/* One option: where its value goes and which values are valid. Integers and reals must lie
 * in [min, max] (max excluded when max_open); choices index `choices`. */
typedef struct opt_def {
    const char *name;
    opt_type type;
    void *dst;          /* int (FLAG, CHOICE), int64_t (INT), double (REAL), const char * */
    double min, max;
    int max_open;
    const char *const *choices;
} opt_def;

static const char *const data_formats[] = {"auto", "text", "llmc", "nanogpt", NULL};
static const char *const tokenizers[] = {"bytes", "bpe", "json", NULL};
static const char *const optimizers[] = {"adamw", "adam", "sgd", NULL};
static const char *const schedules[] = {"constant", "cosine", NULL};
static const char *const precisions[] = {"fp32", "tf32", "bf16", NULL};   /* = nnt_precision */
static const char *const distributions[] = {"root", "sharded", "data", NULL};   /* = nnt_distribution */

#define BIG 9.0e15   /* integers up to here are exact in a double */

static const char usage_text[] =
    "Usage: nnt-train [OPTION]...\n"
    "Train a GPT-2 or Llama-family language model with nnt. Without options: a small GPT-2\n"
    "(4 layers, 128 channels, 4 heads, byte tokens) learns " TRAIN_DEFAULT_DATA " for 2000 steps\n"
    "(a few minutes on 2 CPU cores), validating on the last tenth of the texts, then writes\n"
    "logs, a loss curve and a checkpoint to ./" TRAIN_DEFAULT_OUT " and prints a text sample.\n"
    "\n"
    "Model (default: L 4, C 128, NH 4, context 128, the tokenizer's vocabulary):\n"
    "  --model NAME          preset: %s\n"
    "  --layers L --channels C --heads NH --vocab V --context maxT   override the preset\n"
    "  --kv-heads NKV --hidden F   Llama family: key/value heads, MLP inner size\n"
    "  --head-dim D --qk-norm   Llama family: heads of D (default C / NH), RMSNorm on each\n"
    "                        head of q and k (Qwen3)\n"
    "  --init                fresh initialisation from --seed (default)\n"
    "  --load-hf DIR         start from a Hugging Face model directory (config.json and\n"
    "                        model.safetensors or sharded: GPT-2, Llama, Mistral, Qwen2,\n"
    "                        Qwen3)\n"
    "  --load-llmc FILE      start from an llm.c fp32 checkpoint (gives the configuration)\n"
    "  --load-safetensors FILE  start from a Hugging Face GPT2LMHeadModel safetensors file\n"
    "Data:\n"
    "  --data FILE|DIR|PAT   training tokens (default " TRAIN_DEFAULT_DATA "); a quoted\n"
    "                        pattern names several files, e.g. 'fineweb_train_*.bin'\n"
    "  --data-format F       auto|text|llmc|nanogpt (default auto)\n"
    "  --tokenizer T         bytes|bpe|json, for text (default bytes; json when --load-hf\n"
    "                        DIR has a tokenizer.json)\n"
    "  --bpe-vocab FILE --bpe-merges FILE   GPT-2 vocab.json and merges.txt for bpe\n"
    "  --tokenizer-json F    a Hugging Face tokenizer.json (or its directory) for json\n"
    "Validation (the loss on held-out tokens, without training on them):\n"
    "  --val-data FILE|DIR|PAT   held-out tokens, read like --data\n"
    "  --val-split X         hold out the last X of the data instead (0 <= X < 1; default\n"
    "                        0.1 of the default corpus, 0 of --data: no validation)\n"
    "  --val-every N         steps between validations, and after the last (default steps/10)\n"
    "  --val-batches K       batches of B x T tokens a validation (default 20, at most a\n"
    "                        tenth of the batches trained between validations, at least 1;\n"
    "                        0 = all the held-out tokens hold)\n"
    "Training:\n"
    "  --batch B             sequences per micro-batch (default 8)\n"
    "  --seq T               tokens per sequence (default min(128, context))\n"
    "  --steps N             total optimizer steps, resumed ones included (default 2000);\n"
    "                        0: no training, one validation of every held-out batch\n"
    "  --accum K             micro-batches per step (default 1)\n"
    "  --shuffle             read the data as sequences of T + 1 tokens in a new random\n"
    "                        order each epoch (from --seed), not in order\n"
    "  --recompute           keep only block outputs, recompute in the backward\n"
    "  --precision P         fp32|tf32|bf16 operands of the matrix products (default fp32)\n"
    "  --seed S              initialisation and sampling seed (default 1)\n"
    "  --optim O             adamw|adam|sgd (default adamw)\n"
    "  --lr X                peak learning rate (default by size: 3e-3 under 10M parameters,\n"
    "                        6e-4 under 200M, else 3e-4; 3e-4 with --load-*)\n"
    "  --beta1 X --beta2 X --eps X   Adam(W) (defaults 0.9, 0.95, 1e-8)\n"
    "  --weight-decay X      on matrices and embeddings (default 0.1)\n"
    "  --momentum X          SGD momentum (default 0)\n"
    "  --grad-clip X         clip the global gradient norm; 0 = off (default 1)\n"
    "  --warmup N            linear warmup steps (default steps/20)\n"
    "  --schedule S          constant|cosine (default cosine)\n"
    "  --min-lr X            cosine floor (default lr/10)\n"
    "Tiling (0 automatic, -1 one tile, > 0 tile size; default 0):\n"
    "  --tile-batch N --tile-seq N --tile-channels N --tile-hidden N --tile-vocab N\n"
    "  --tile-heads N\n"
    "Runtime:\n"
    "  --cpus N --gpus N     workers (default -1: all)\n"
    "  --sched NAME          StarPU scheduler\n"
    "  --mem-gpu MiB --mem-cpu MiB   memory budgets (default 0: none)\n"
    "  --swap-dir DIR --swap-size MiB   disk swap for tiles that do not fit\n"
    "  --distribute D        sharded|data|root: one rank of an MPI job (mpirun, srun;\n"
    "                        default sharded when started as several ranks)\n"
    "  --release-weights     under MPI: drop the weights a rank received once a layer has\n"
    "                        used them, gather them again for the backward (less RAM per\n"
    "                        rank, more bytes sent; ZeRO-3 / FSDP full sharding)\n"
    "Output:\n"
    "  --out DIR             output directory (default ./" TRAIN_DEFAULT_OUT ")\n"
    "  --save FILE           checkpoint (default OUT/checkpoint.safetensors)\n"
    "  --save-every N        also save every N steps (default 0: only at the end)\n"
    "  --save-best           also save OUT/best.safetensors after each validation that\n"
    "                        lowers the validation loss (as nanoGPT keeps its best)\n"
    "  --no-save             write no checkpoint (benchmarks, very large models)\n"
    "  --stop-after S        stop after step S (saved; the schedule still ends at --steps)\n"
    "  --save-hf DIR         also write a Hugging Face model directory (config.json,\n"
    "                        model.safetensors) that transformers loads\n"
    "  --save-hf-shard-size SIZE  split --save-hf's weights into shards of at most SIZE\n"
    "                        (e.g. 2GB, 500MB, 4GiB; bytes without a unit) and an index\n"
    "  --save-weights        also write OUT/model.safetensors (Hugging Face, GPT-2)\n"
    "  --save-llmc           also write OUT/model.bin (llm.c fp32 checkpoint, GPT-2)\n"
    "  --resume FILE         continue the run of a checkpoint up to --steps: its model,\n"
    "                        tokenizer, data, batches, steps, optimizer, schedule, seed,\n"
    "                        precision, tiles and checkpointing, each unless given here\n"
    "  --trace FILE.svg      trace --trace-steps steps (default 3) after the first\n"
    "  --trace-steps N       number of steps traced\n"
    "  --sample N            tokens to generate at the end; 0 = none (default 256)\n"
    "  --prompt TEXT         start of the sample (default \"The \")\n"
    "  --temperature X       0 = greedy (default 0.8)\n"
    "  --top-k N             0 = all tokens (default 40)\n"
    "  --peak-gflops X       peak for MFU (default: measured at start on the CPU workers)\n"
    "  --print-loss          print only \"step N loss X\" lines on stdout (and \"val N loss\n"
    "                        X\" after each validation)\n"
    "  --quiet               print errors only\n"
    "  --help, --version\n"
    "\n"
    "MFU counts 6 N + 12 L T NH hd FLOPs per token (N parameters, hd the head dimension;\n"
    "forward and backward, attention included). Exit status: 0 done, 1 library or runtime\n"
    "error, 2 bad usage, 130 interrupted.\n"
    "See nnt-train(1).\n";

int train_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("nnt-train: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static void set_defaults(train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->layers = o->channels = o->heads = o->kv_heads = o->hidden = o->vocab = o->context = -1;
    o->head_dim = -1;
    o->data_format = NNT_DATA_AUTO;
    o->tokenizer = TOKENIZER_AUTO;
    o->batch = 8, o->seq = -1, o->steps = 2000, o->accum = 1, o->seed = 1;
    o->optim = NNT_OPTIM_ADAMW, o->schedule = NNT_SCHEDULE_COSINE;
    o->precision = NNT_PRECISION_FP32;
    o->distribute = -1;
    o->lr = -1, o->beta1 = 0.9, o->beta2 = 0.95, o->eps = 1e-8, o->weight_decay = 0.1;
    o->momentum = 0, o->grad_clip = 1.0, o->min_lr = -1, o->warmup = -1;
    o->cpus = -1, o->gpus = -1;
    o->out_dir = TRAIN_DEFAULT_OUT;
    o->trace_steps = 3;
    o->sample = 256, o->top_k = 40, o->prompt = "The ", o->temperature = 0.8;
    o->peak_gflops = -1;
    o->val_split = -1, o->val_every = -1, o->val_batches = -1;
}

/* The option table, pointing into *o. n gets the number of entries. */
static const opt_def *option_table(train_opts *o, int *n)
{
    static opt_def t[80];
    int i = 0;
#define FLAG(nm, f) t[i++] = (opt_def){nm, OPT_FLAG, &o->f, 0, 0, 0, NULL}
#define INT(nm, f, lo, hi) t[i++] = (opt_def){nm, OPT_INT, &o->f, lo, hi, 0, NULL}
#define REAL(nm, f, lo, hi, open) t[i++] = (opt_def){nm, OPT_REAL, &o->f, lo, hi, open, NULL}
#define STR(nm, f) t[i++] = (opt_def){nm, OPT_STR, &o->f, 0, 0, 0, NULL}
#define CHOICE(nm, f, c) t[i++] = (opt_def){nm, OPT_CHOICE, &o->f, 0, 0, 0, c}
    STR("model", model);
    INT("layers", layers, 1, 1e6);
    INT("channels", channels, 1, 1e7);
    INT("heads", heads, 1, 1e6);
    INT("kv-heads", kv_heads, 1, 1e6);
    INT("hidden", hidden, 1, 1e8);
    INT("head-dim", head_dim, 2, 1e5);
    FLAG("qk-norm", qk_norm);
    INT("vocab", vocab, 1, 2147483647.0);
    INT("context", context, 1, 1e8);
    FLAG("init", init);
    STR("load-llmc", load_llmc);
    STR("load-safetensors", load_safetensors);
    STR("load-hf", load_hf);
    STR("data", data);
    CHOICE("data-format", data_format, data_formats);
    CHOICE("tokenizer", tokenizer, tokenizers);
    STR("bpe-vocab", bpe_vocab);
    STR("tokenizer-json", tokenizer_json);
    STR("bpe-merges", bpe_merges);
    STR("val-data", val_data);
    REAL("val-split", val_split, 0, 1, 1);
    INT("val-every", val_every, 1, BIG);
    INT("val-batches", val_batches, 0, BIG);
    INT("batch", batch, 1, 1e8);
    INT("seq", seq, 1, 1e8);
    INT("steps", steps, 0, BIG);
    INT("accum", accum, 1, 1e8);
    INT("seed", seed, 0, BIG);
    CHOICE("optim", optim, optimizers);
    REAL("lr", lr, 0, 1e6, 0);
    REAL("beta1", beta1, 0, 1, 1);
    REAL("beta2", beta2, 0, 1, 1);
    REAL("eps", eps, 0, 1, 0);
    REAL("weight-decay", weight_decay, 0, 1e6, 0);
    REAL("momentum", momentum, 0, 1, 1);
    REAL("grad-clip", grad_clip, 0, 1e30, 0);
    INT("warmup", warmup, 0, BIG);
    CHOICE("schedule", schedule, schedules);
    REAL("min-lr", min_lr, 0, 1e6, 0);
    INT("tile-batch", tile_batch, -1, BIG);
    INT("tile-seq", tile_seq, -1, BIG);
    INT("tile-channels", tile_channels, -1, BIG);
    INT("tile-hidden", tile_hidden, -1, BIG);
    INT("tile-vocab", tile_vocab, -1, BIG);
    INT("tile-heads", tile_heads, -1, BIG);
    INT("cpus", cpus, -1, 4096);
    INT("gpus", gpus, -1, 1024);
    STR("sched", sched);
    INT("mem-gpu", mem_gpu, 0, BIG);
    INT("mem-cpu", mem_cpu, 0, BIG);
    STR("swap-dir", swap_dir);
    INT("swap-size", swap_size, 0, BIG);
    CHOICE("distribute", distribute, distributions);
    FLAG("release-weights", release_weights);
    STR("out", out_dir);
    STR("save", save);
    INT("save-every", save_every, 0, BIG);
    INT("stop-after", stop_after, 1, BIG);
    FLAG("save-weights", save_weights);
    FLAG("save-llmc", save_llmc);
    STR("save-hf", save_hf);
    STR("save-hf-shard-size", save_hf_shard_size);
    FLAG("no-save", no_save);
    FLAG("save-best", save_best);
    FLAG("recompute", recompute);
    FLAG("shuffle", shuffle);
    CHOICE("precision", precision, precisions);
    STR("resume", resume);
    STR("trace", trace);
    INT("trace-steps", trace_steps, 1, BIG);
    INT("sample", sample, 0, 1e7);
    STR("prompt", prompt);
    REAL("temperature", temperature, 0, 1e6, 0);
    INT("top-k", top_k, 0, 2147483647.0);
    REAL("peak-gflops", peak_gflops, 1e-9, 1e12, 0);
    FLAG("print-loss", print_loss);
    FLAG("quiet", quiet);
#undef FLAG
#undef INT
#undef REAL
#undef STR
#undef CHOICE
    *n = i;
    return t;
}

static const opt_def *find_option(const opt_def *t, int n, const char *name, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(t[i].name) == len && !strncmp(t[i].name, name, len))
            return &t[i];
    return NULL;
}

static int parse_number(const opt_def *d, const char *s, double *v)
{
    char *end;
    errno = 0;
    if (d->type == OPT_INT) {
        long long x = strtoll(s, &end, 10);
        if (end == s || *end || errno)
            return train_usage_error("--%s: '%s' is not an integer", d->name, s);
        *v = (double)x;
    } else {
        *v = strtod(s, &end);
        if (end == s || *end || errno || !isfinite(*v))
            return train_usage_error("--%s: '%s' is not a finite number", d->name, s);
    }
    if (*v < d->min || *v > d->max || (d->max_open && *v == d->max))
        return train_usage_error("--%s: %s is out of range (%g to %g%s)", d->name, s, d->min,
                                 d->max, d->max_open ? ", excluded" : "");
    return 0;
}

static int set_choice(const opt_def *d, const char *s)
{
    for (int k = 0; d->choices[k]; k++)
        if (!strcmp(d->choices[k], s)) {
            *(int *)d->dst = k;
            return 0;
        }
    char list[128] = "";
    for (int k = 0; d->choices[k]; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "",
                 d->choices[k]);
    return train_usage_error("--%s: '%s' is not one of %s", d->name, s, list);
}

/* Store the value s (NULL for flags) of option d. */
static int set_option(const opt_def *d, const char *s)
{
    double v;
    switch (d->type) {
    case OPT_FLAG:
        *(int *)d->dst = 1;
        return 0;
    case OPT_STR:
        if (!*s)
            return train_usage_error("--%s: empty value", d->name);
        *(const char **)d->dst = s;
        return 0;
    case OPT_CHOICE:
        return set_choice(d, s);
    case OPT_INT:
        if (parse_number(d, s, &v))
            return 2;
        *(int64_t *)d->dst = (int64_t)v;
        return 0;
    case OPT_REAL:
        if (parse_number(d, s, &v))
            return 2;
        *(double *)d->dst = v;
        return 0;
    }
    return 2;
}

void train_preset_list(char *buf, size_t cap, int col)
{
    nnt_family_info f = NNT_FAMILY_INFO_INIT;
    size_t n = 0;
    int wrapped = col > 0;
    buf[0] = '\0';
    for (int i = 0; nnt_model_family_info(i, &f) == 0 && n < cap; i++) {
        char one[512];
        if (i)
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

static int print_usage(void)
{
    char presets[1024];
    train_preset_list(presets, sizeof presets, 31);
    printf(usage_text, presets);
    return 1;
}

static int print_version(void)
{
    const char *lib;
    nnt_version(NULL, &lib);
    printf("nnt-train (nnt) %d.%d.%d, library %s\n", NNT_VERSION_MAJOR, NNT_VERSION_MINOR,
           NNT_VERSION_PATCH, lib ? lib : "?");
    return 1;
}

int train_opts_parse(int argc, char **argv, train_opts *o)
{
    int n;
    set_defaults(o);
    const opt_def *table = option_table(o, &n);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
            return print_usage();
        if (!strcmp(arg, "--version") || !strcmp(arg, "-V"))
            return print_version();
        if (strncmp(arg, "--", 2) || !arg[2])
            return train_usage_error("unexpected argument '%s' (see nnt-train --help)", arg);
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_def *d = find_option(table, n, name, len);
        if (!d)
            return train_usage_error("unknown option '--%.*s' (see nnt-train --help)",
                                     (int)len, name);
        const char *value = eq ? eq + 1 : NULL;
        if (d->type == OPT_FLAG && value)
            return train_usage_error("--%s takes no value", d->name);
        if (d->type != OPT_FLAG && !value) {
            if (i + 1 >= argc)
                return train_usage_error("--%s needs a value", d->name);
            value = argv[++i];
        }
        if (set_option(d, value))
            return 2;
        o->given[d - table] = 1;
    }
    return 0;
}

/* The entry of option name in o's table, its index in *i; NULL when there is none. */
static const opt_def *option_named(train_opts *o, const char *name, int *i)
{
    int n;
    const opt_def *table = option_table(o, &n);
    const opt_def *d = find_option(table, n, name, strlen(name));
    *i = d ? (int)(d - table) : -1;
    return d;
}

int train_opts_is_flag(const char *name)
{
    train_opts scratch;
    int i;
    const opt_def *d = option_named(&scratch, name, &i);
    return d && d->type == OPT_FLAG;
}

int train_opts_given(const train_opts *o, const char *name)
{
    int i;
    return option_named((train_opts *)o, name, &i) && o->given[i];
}

/* The value of d's option as text (a string: itself), for comparisons. */
static void value_text(const opt_def *d, char *out, size_t size)
{
    if (d->type == OPT_STR) {
        const char *s = *(const char **)d->dst;
        snprintf(out, size, "%s", s ? s : "");
    } else if (d->type == OPT_INT) {
        snprintf(out, size, "%lld", (long long)*(int64_t *)d->dst);
    } else if (d->type == OPT_REAL) {
        snprintf(out, size, "%.17g", *(double *)d->dst);
    } else {
        snprintf(out, size, "%d", *(int *)d->dst);
    }
}

int train_opts_default_to(train_opts *o, const char *name, const char *text, int *changed)
{
    int i;
    char before[4096], after[4096];
    const opt_def *d = option_named(o, name, &i);
    *changed = 0;
    if (!d || o->given[i])
        return 0;
    value_text(d, before, sizeof before);
    if (d->type == OPT_FLAG)
        *(int *)d->dst = strcmp(text, "0") != 0;
    else if (set_option(d, text))
        return 2;
    value_text(d, after, sizeof after);
    *changed = strcmp(before, after) != 0;
    return 0;
}

const char *train_choice_name(const char *option, int value)
{
    const char *const *c = !strcmp(option, "data-format") ? data_formats
                         : !strcmp(option, "tokenizer")   ? tokenizers
                         : !strcmp(option, "optim")       ? optimizers
                         : !strcmp(option, "precision")   ? precisions
                         : !strcmp(option, "distribute")  ? distributions
                         : !strcmp(option, "schedule")    ? schedules
                                                          : NULL;
    for (int k = 0; c && c[k]; k++)
        if (k == value)
            return c[k];
    return "?";
}

/* A size as transformers' max_shard_size writes it: an integer, then nothing (bytes) or
 * one of B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), any
 * case. > 0; 0 or -1 when malformed. */
static int parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *unit; uint64_t mult; } units[] = {
        {"", 1}, {"b", 1}, {"kb", 1000}, {"mb", 1000000}, {"gb", 1000000000},
        {"tb", 1000000000000ULL}, {"kib", 1ULL << 10}, {"mib", 1ULL << 20},
        {"gib", 1ULL << 30}, {"tib", 1ULL << 40}};
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || v == 0)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].unit);
        if (strlen(end) != n)
            continue;
        int same = 1;
        for (size_t k = 0; k < n; k++)
            same &= (end[k] | 0x20) == units[i].unit[k];
        if (same && v <= UINT64_MAX / units[i].mult) {
            *out = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

static int check_combinations(const train_opts *o)
{
    int model_opts = o->model || o->layers > 0 || o->channels > 0 || o->heads > 0 ||
                     o->kv_heads > 0 || o->hidden > 0 || o->vocab > 0 || o->context > 0 ||
                     o->head_dim > 0 || o->qk_norm;
    int loads = (o->load_llmc != NULL) + (o->load_safetensors != NULL) + (o->load_hf != NULL);
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
    if (o->tokenizer == TOKENIZER_BPE && (!o->bpe_vocab || !o->bpe_merges))
        return train_usage_error("--tokenizer bpe needs --bpe-vocab FILE and --bpe-merges FILE");
    if (o->tokenizer != TOKENIZER_BPE && (o->bpe_vocab || o->bpe_merges))
        return train_usage_error("--bpe-vocab/--bpe-merges need --tokenizer bpe");
    if (o->tokenizer == TOKENIZER_JSON && !o->tokenizer_json && !o->load_hf)
        return train_usage_error("--tokenizer json needs --tokenizer-json FILE (or --load-hf "
                                 "DIR with a tokenizer.json)");
    if (o->tokenizer_json && o->tokenizer != TOKENIZER_JSON && o->tokenizer != TOKENIZER_AUTO)
        return train_usage_error("--tokenizer-json goes with --tokenizer json");
    if (o->no_save && (o->save || o->save_every || o->stop_after || o->save_best))
        return train_usage_error("--no-save excludes --save, --save-every, --save-best and "
                                 "--stop-after");
    if ((o->swap_dir != NULL) != (o->swap_size > 0))
        return train_usage_error("--swap-dir and --swap-size go together");
    if (o->save_hf_shard_size && !o->save_hf)
        return train_usage_error("--save-hf-shard-size needs --save-hf DIR");
    if (o->val_data && o->val_split > 0)
        return train_usage_error("--val-data and --val-split exclude each other");
    return 0;
}

int train_opts_resolve(train_opts *o, int loaded_weights)
{
    if (check_combinations(o))
        return 2;
    (void)loaded_weights;   /* the learning rate waits for the model: train_opts_resolve_lr */
    if (o->save_hf_shard_size && parse_size(o->save_hf_shard_size, &o->save_hf_shard_bytes))
        return train_usage_error("--save-hf-shard-size: '%s' is not a size (a positive integer "
                                 "and B, KB, MB, GB, TB, KiB, MiB, GiB or TiB, e.g. 2GB)",
                                 o->save_hf_shard_size);
    if (o->warmup < 0)
        o->warmup = o->steps / 20;
    if (o->val_split < 0)   /* the default corpus: a tenth held out, as nanoGPT splits */
        o->val_split = o->data || o->val_data ? 0 : 0.1;
    if (o->steps == 0 && !o->val_data && o->val_split == 0)
        return train_usage_error("--steps 0 only validates: give --val-data or --val-split");
    if (o->save_best && ((!o->val_data && o->val_split == 0) || o->steps == 0))
        return train_usage_error("--save-best keeps the state of the lowest validation loss: "
                                 "give --val-data or --val-split%s",
                                 o->steps == 0 ? ", and steps to train" : "");
    if (o->steps > 0 && o->schedule == NNT_SCHEDULE_COSINE && o->warmup >= o->steps)
        return train_usage_error("--warmup %lld must be below --steps %lld with the cosine "
                                 "schedule", (long long)o->warmup, (long long)o->steps);
    if (o->lr >= 0 && o->min_lr > o->lr)
        return train_usage_error("--min-lr %g is above --lr %g", o->min_lr, o->lr);
    if (o->peak_gflops < 0)
        o->peak_gflops = 0;   /* 0: TRAIN_CPU_CORE_GFLOPS per CPU worker, once known */
    if (o->val_every < 0)
        o->val_every = o->steps / 10 > 0 ? o->steps / 10 : 1;
    /* validating costs at most ~1/30 of the training time (a forward is ~1/3 of a step), or
     * one batch per validation */
    if (o->val_batches < 0 && o->steps == 0)
        o->val_batches = 0;   /* an evaluation: every batch the held-out tokens hold */
    if (o->val_batches < 0) {
        int64_t tenth = o->val_every * o->accum / 10;
        o->val_batches = tenth < 1 ? 1 : tenth > 20 ? 20 : tenth;
    }
    return 0;
}

/* The default peak learning rate: fine-tuning loaded weights 3e-4; from scratch by size, as
 * small models take larger steps (char-level models ~3e-3; GPT-2 124M 6e-4, as nanoGPT and
 * llm.c; GPT-3's 350M and above 3e-4 or less). */
static double default_lr(int loaded_weights, int64_t nparams)
{
    if (loaded_weights)
        return 3e-4;
    return nparams < 10000000 ? 3e-3 : nparams < 200000000 ? 6e-4 : 3e-4;
}

int train_opts_resolve_lr(train_opts *o, int loaded_weights, int64_t nparams)
{
    if (o->lr < 0)
        o->lr = default_lr(loaded_weights, nparams);
    if (o->min_lr < 0)
        o->min_lr = o->lr / 10;
    if (o->min_lr > o->lr)
        return train_usage_error("--min-lr %g is above --lr %g", o->min_lr, o->lr);
    return 0;
}
