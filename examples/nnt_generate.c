/* SPDX-License-Identifier: MIT */
/* nnt-generate: continue a prompt with a model (a Hugging Face directory, an llm.c
 * checkpoint, or an nnt-train training checkpoint) through nnt_model_generate: the key/value
 * cache, greedy or sampled decoding; a classifier's labels of the prompt's text.
 * See man/man1/nnt-generate.1. Exit status: 0 done, 1 error (library, files), 2 bad usage. */
#include <nnt.h>

#include "cli.h"
#include "text_out.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
    const char *load_hf, *load_llmc, *checkpoint;
    const char *adapter;                    /* --adapter DIR: a PEFT LoRA adapter */
    const char *prompt, *prompt_file, *prompt_ids, *vocab, *merges, *tokenizer_json;
    const char *eos;                        /* --eos: auto, none, or ids     */
    const char *system, *tokenizer_config;  /* --chat's system message, configuration */
    const char *messages;                   /* --messages FILE: a conversation (--chat) */
    const char *classify;                   /* --classify FILE: classification records */
    const char *prompts;                    /* --prompts FILE: prompt records, each continued */
    int64_t batch;                          /* --batch: --classify's rows a forward,
                                               --prompts' prompts side by side        */
    int chat, chat_template;                /* --chat; its template (chat_templates)  */
    int no_think;                           /* --no-think: Qwen3's enable_thinking=False */
    const char *chat_date;                  /* --chat-date: Llama 3.1+'s, gpt-oss's date */
    char *model_dir, *trained_tokenizer;    /* a checkpoint's Hugging Face directory and
                                               tokenizer.json, as its run recorded them */
    int64_t max_new, top_k, seed, cpus;
    int64_t num_samples;                    /* --num-samples: sequences side by side */
    int64_t num_labels;                     /* --num-labels: a language model's directory
                                               read into a classifier (0: as it is)   */
    double temperature, top_p, min_p, repetition_penalty;
    double typical_p, epsilon_cutoff, eta_cutoff;
    int64_t no_repeat_ngram;                /* --no-repeat-ngram-size */
    int tokenizer;                          /* TOK_*, -1: not given          */
    int precision;                          /* nnt_precision                 */
    int quantize;                           /* --quantize none|nf4 (index)   */
    int print_ids, no_cache, continuation_only;
    int generation_config;                  /* --generation-config: 0 auto, 1 none */
    char *prompt_buf;                       /* --prompt-file's text (owned) */
    size_t prompt_len;                      /* bytes of the prompt's text   */
} opts;

enum { TOK_BYTES, TOK_BPE, TOK_JSON };
static const char *const tokenizers[] = {"bytes", "bpe", "json", NULL};
static const char *const precisions[] = {"fp32", "tf32", "bf16", NULL};   /* = nnt_precision */
static const char *const quantizes[] = {"none", "nf4", NULL};
static const char *const auto_none[] = {"auto", "none", NULL};
static const char *const chat_templates[] = {"auto", "chatml", "llama3", "qwen2.5", "qwen3",
                                             "llama3.1", "llama3.2", "gemma", "gemma2",
                                             "gemma3", "phi3", "phi3.5", "qwen3-2507",
                                             "deepseek-r1", "gpt-oss", NULL};

#define CLI_OFF(f) offsetof(opts, f)
static const cli_option table[] = {
    OPT_GROUP("Model (one of):"),
    OPT_STR("load-hf", load_hf, NULL, 0, "DIR", "a Hugging Face model directory"),
    OPT_STR("load-llmc", load_llmc, NULL, 0, "FILE", "an llm.c GPT-2 checkpoint"),
    OPT_STR("checkpoint", checkpoint, NULL, 0, "FILE|DIR",
            "an nnt-train checkpoint, or the --out directory holding it"),
    OPT_STR("adapter", adapter, NULL, 0, "DIR", "with the LoRA adapter of a PEFT directory "
            "(nnt-train\n--save-peft, PEFT's save_pretrained) on the model"),
    OPT_INT("num-labels", num_labels, 1, 1 << 20, "0", 0, "N", "read the --load-hf language "
            "model into a classifier\nof N labels (its score head new: give it with\n"
            "--adapter, a classifier's PEFT adapter; 1: a\nreward model)"),
    OPT_GROUP("Prompt (one of):"),
    OPT_STR("prompt", prompt, NULL, 0, "TEXT", "text, encoded with the tokenizer"),
    OPT_STR("prompt-file", prompt_file, NULL, 0, "FILE", "the text of FILE (-: standard input)"),
    OPT_STR("prompt-ids", prompt_ids, NULL, 0, "IDS", "token ids separated by spaces or commas"),
    OPT_FLAG("chat", chat, 0, "the prompt's text is a user's message: rendered with\nthe "
             "model's chat template and its generation\nprompt; the answer alone is printed"),
    OPT_STR("system", system, NULL, 0, "TEXT", "with --chat: a system message before it"),
    OPT_FLAG("no-think", no_think, 0, "with --chat, Qwen3: answer without thinking first\n"
             "(its template's enable_thinking=False: an empty\nthink block after the prompt)"),
    OPT_STR("messages", messages, NULL, 0, "FILE", "a conversation (JSON: {\"messages\": "
            "[...]} or [...]),\nits last message a user's, rendered as --chat\nrenders "
            "(implies --chat; -: standard input)"),
    OPT_CHOICE("chat-template", chat_template, chat_templates, "auto", 0, "NAME",
               "with --chat: auto (the tokenizer_config.json's),\nchatml, llama3, qwen2.5, "
               "qwen3, llama3.1,\nllama3.2, gemma, gemma2, gemma3, phi3, phi3.5,\n"
               "qwen3-2507, deepseek-r1 or gpt-oss"),
    OPT_STR("tokenizer-config", tokenizer_config, NULL, 0, "FILE", "with --chat: the "
            "tokenizer_config.json (default:\nthe --load-hf directory's, or the one beside\n"
            "--tokenizer-json)"),
    OPT_STR("chat-date", chat_date, NULL, 0, "DATE", "with --chat: Llama 3.1/3.2's \"Today "
            "Date\" (\"26 Jul\n2024\"), gpt-oss's \"Current date\" (\"2025-02-03\");\n"
            "default the template's (today for Llama 3.2 and\ngpt-oss)"),
    OPT_STR("classify", classify, NULL, 0, "FILE", "with a classifier: the texts of FILE's "
            "records,\nJSON Lines {\"text\": ...} (a \"label\", index or name,\noptional), "
            "one result a line (JSON) and the\naccuracy over the labelled ones (-: standard "
            "input)"),
    OPT_INT("batch", batch, 1, 4096, "8", 0, "N", "--classify's texts a forward, --prompts' "
            "prompts\ncontinued side by side (default 8)"),
    OPT_STR("prompts", prompts, NULL, 0, "FILE", "JSON Lines of prompts, TRL's prompt-only "
            "records\n{\"prompt\": text or messages, ...} (or {\"messages\":\n[...]}), each "
            "continued as it would be alone\n(messages: with the chat template), written "
            "back\nwith \"generated\" and \"finish_reason\" added, a\nline each (-: "
            "standard input)"),
    OPT_GROUP("Tokenizer (default: the model directory's, or the one the checkpoint was trained "
              "with):"),
    OPT_CHOICE("tokenizer", tokenizer, tokenizers, NULL, 0, "T",
               "bytes|bpe|json (default: from the files given)"),
    OPT_STR("vocab", vocab, NULL, 0, "FILE", NULL),
    OPT_STR("merges", merges, NULL, 0, "FILE", "GPT-2 vocab.json and merges.txt for bpe (also\n"
            "--bpe-vocab, --bpe-merges)"),
    OPT_ALIAS("bpe-vocab", "vocab"),
    OPT_ALIAS("bpe-merges", "merges"),
    OPT_STR("tokenizer-json", tokenizer_json, NULL, 0, "FILE",
            "a Hugging Face tokenizer.json for json"),
    OPT_GROUP("Generation:"),
    OPT_INT("max-new-tokens", max_new, 0, CLI_BIG, "64", 0, "N",
            "tokens to generate (default 64)"),
    OPT_REAL("temperature", temperature, 0, 1e6, "1", 0, "T", "0 = greedy (default 1, or "
             "the model's: below)"),
    OPT_INT("top-k", top_k, 0, 2147483647.0, "40", 0, "K", "0 = all tokens (default 40, or "
            "the model's)"),
    OPT_REAL("top-p", top_p, 0, 1, "1", CLI_OPEN_MIN, "P", "the most likely tokens of "
             "probability P at least\n(default 1, or the model's)"),
    OPT_REAL("min-p", min_p, 0, 1, "0", 0, "P", "only the tokens at least P times as likely "
             "as the\nmost likely one (after the others; default 0: all,\nor the model's)"),
    OPT_REAL("typical-p", typical_p, 0, 1, "1", CLI_OPEN_MIN, "P", "then only the tokens "
             "nearest the entropy (locally\ntypical), of probability P together (default 1:\n"
             "all, or the model's)"),
    OPT_REAL("epsilon-cutoff", epsilon_cutoff, 0, 1, "0", CLI_OPEN_MAX, "E", "then only the "
             "tokens of probability E at least\n(default 0: all, or the model's)"),
    OPT_REAL("eta-cutoff", eta_cutoff, 0, 1, "0", CLI_OPEN_MAX, "E", "then only the tokens of "
             "probability min(E,\nsqrt(E) exp(-entropy)) at least (default 0: all,\nor the "
             "model's)"),
    OPT_REAL("repetition-penalty", repetition_penalty, 0, 1e6, "1", CLI_OPEN_MIN, "R",
             "the logits of the tokens already in the sequence\n(prompt too) divided by R "
             "where positive,\nmultiplied where negative (default 1: none, or\nthe model's)"),
    OPT_INT("no-repeat-ngram-size", no_repeat_ngram, 0, CLI_BIG, "0", 0, "N",
            "never a token that ends an N-gram already in\nthe sequence (prompt too; greedy "
            "too; default 0:\nnone, or the model's)"),
    OPT_CHOICE("generation-config", generation_config, auto_none, "auto", 0, "W",
               "auto: the sampling settings that the model\ndirectory's "
               "generation_config.json gives\n(temperature, top_k, top_p, min_p, typical_p,\n"
               "epsilon_cutoff, eta_cutoff, repetition_penalty,\nno_repeat_ngram_size), for "
               "those not given here (as\nvLLM takes them); none: nnt-generate's defaults\n"
               "(default auto)"),
    OPT_INT("seed", seed, 0, CLI_BIG, "0", 0, "S", "sampling seed (default 0)"),
    OPT_INT("num-samples", num_samples, 1, 4096, "1", 0, "N",
            "N continuations of the prompt generated side by\nside (one batch: the weights "
            "read once a step),\nsample r (from 0) with seed S + r; printed one\nafter "
            "another when all are done (default 1)"),
    OPT_STR("eos", eos, "auto", 0, "IDS", "stop after any of these ids (comma-separated);\n"
            "none (or -1): never; default auto: the --load-hf\ndirectory's (its "
            "generation_config.json's\neos_token_id, else config.json's; a checkpoint's:\n"
            "the directory it was trained from)"),
    OPT_FLAG("no-cache", no_cache, 0, "a forward over the whole window for each token (no "
             "key/value\ncache: the same tokens, slower)"),
    OPT_GROUP("Output (on a terminal, bytes that are not valid UTF-8 and control characters as "
              "\\xHH):"),
    OPT_FLAG("continuation-only", continuation_only, 0,
             "the new text only (default: the prompt, then its continuation)"),
    OPT_FLAG("print-ids", print_ids, 0, "the new ids only"),
    OPT_GROUP("Runtime:"),
    OPT_INT("cpus", cpus, -1, 4096, "-1", 0, "N", "CPU workers (default -1: all)"),
    OPT_CHOICE("precision", precision, precisions, "fp32", 0, "P",
               "fp32|tf32|bf16 operands of the matrix products (default fp32)"),
    OPT_CHOICE("quantize", quantize, quantizes, "none", 0, "Q", "none|nf4: --load-hf's matrices "
               "read into NF4, 4.5 bits a\nweight (bitsandbytes' nf4; default none)"),
};

static unsigned char given[sizeof table / sizeof table[0]];   /* the options given */

static const cli_program program = {
    "nnt-generate", table, (int)(sizeof table / sizeof table[0]),
    "Usage: nnt-generate (--load-hf DIR | --load-llmc FILE | --checkpoint FILE|DIR)\n"
    "                    (--prompt TEXT | --prompt-file FILE | --prompt-ids IDS |\n"
    "                     --messages FILE | --prompts FILE | --classify FILE) [OPTION]...\n"
    "Continue a prompt with a language model (nnt_model_generate: a key/value cache, greedy\n"
    "or sampled decoding) and print the prompt and its continuation as they come; with a\n"
    "classifier, print each label's probability of the text (a reward model: its score),\n"
    "or with --classify those of each record of a file; with --prompts, continue each\n"
    "prompt of a file.\n\n",
    "\nExit status: 0 done, 1 error (library, files), 2 bad usage.\nSee nnt-generate(1).\n",
    NULL, NULL};

#define usage(...) cli_error("nnt-generate", __VA_ARGS__)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int lib_error(const char *what, int rc)
{
    fprintf(stderr, "nnt-generate: %s: %s: %s\n", what, nnt_strerror(rc),
            nnt_ctx_last_error(NULL));
    return 1;
}

/* --prompt-file or --messages (option): the whole of path (- : standard input) as the
 * prompt's text. */
static int read_prompt_file(opts *o, const char *option, const char *path)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "nnt-generate: %s %s: %s\n", option, path, strerror(errno));
        return 2;
    }
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        char *more = n == cap ? realloc(buf, cap *= 2) : buf;
        if (!more)
            free(buf);
        buf = more;
    }
    const char *failed = !buf ? "out of memory" : ferror(f) ? "read error" : NULL;
    if (f != stdin)
        fclose(f);
    if (failed) {
        free(buf);
        fprintf(stderr, "nnt-generate: %s %s: %s\n", option, path, failed);
        return 2;
    }
    o->prompt = o->prompt_buf = buf;
    o->prompt_len = n;
    return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
    int rc = cli_parse(&program, argc, argv, o, given, NULL, NULL);
    if (rc)
        return rc;
    if (!!o->load_hf + !!o->load_llmc + !!o->checkpoint != 1)
        return usage("%s", "give one of --load-hf, --load-llmc and --checkpoint");
    if (!!o->prompt + !!o->prompt_ids + !!o->prompt_file + !!o->messages + !!o->classify +
        !!o->prompts != 1)
        return usage("%s", "give one of --prompt, --prompt-file, --prompt-ids, --messages, "
                     "--prompts and --classify");
    if (o->prompts && (o->chat || o->system))
        return usage("%s", "--prompts: a record's messages are rendered with the chat template "
                     "(a system message among them), a text prompt continued as it is: not "
                     "--chat or --system");
    if (o->chat && o->classify)
        return usage("%s", "--classify takes texts, not --chat");
    if (o->num_labels && !o->load_hf)
        return usage("%s", "--num-labels reads a Hugging Face language model's directory into a "
                     "classifier: give --load-hf DIR");
    if (o->quantize && !o->load_hf)
        return usage("%s", "--quantize nf4 reads a Hugging Face directory's matrices into NF4: "
                     "give --load-hf DIR");
    if (o->messages && o->system)
        return usage("%s", "--messages: the system message goes in the file's messages, not "
                     "--system");
    o->chat |= o->messages != NULL;
    if ((o->prompt_file && read_prompt_file(o, "--prompt-file", o->prompt_file)) ||
        (o->classify && read_prompt_file(o, "--classify", o->classify)) ||
        (o->messages && read_prompt_file(o, "--messages", o->messages)) ||
        (o->prompts && read_prompt_file(o, "--prompts", o->prompts)))
        return 2;
    if (o->prompt && !o->prompt_buf)   /* --prompt TEXT (a file's length is counted) */
        o->prompt_len = strlen(o->prompt);
    if (!o->chat && !o->prompts && (o->system || o->chat_template || o->tokenizer_config ||
                                    o->no_think || o->chat_date))
        return usage("%s", "--system, --chat-template, --no-think, --chat-date and "
                     "--tokenizer-config go with --chat (or --prompts)");
    if (o->chat && o->prompt_ids)
        return usage("%s", "--chat takes the text of --prompt or --prompt-file, not "
                     "--prompt-ids");
    if (o->chat && (o->tokenizer == TOK_BYTES || o->vocab))
        return usage("%s", "--chat needs a Hugging Face tokenizer (tokenizer.json)");
    if (!o->vocab != !o->merges)
        return usage("%s", "--vocab and --merges go together");
    if (o->tokenizer_json && o->vocab)
        return usage("%s", "--tokenizer-json excludes --vocab and --merges");
    if (o->tokenizer == TOK_BYTES && (o->tokenizer_json || o->vocab))
        return usage("%s", "--tokenizer bytes takes no tokenizer file");
    if (o->tokenizer == TOK_BPE && !o->vocab)
        return usage("%s", "--tokenizer bpe needs --vocab FILE and --merges FILE");
    if (o->tokenizer == TOK_JSON && !o->tokenizer_json && !o->load_hf)
        return usage("%s", "--tokenizer json needs --tokenizer-json FILE (or a --load-hf "
                     "directory with a tokenizer.json)");
    return 0;
}

/* The ids of a "1 2 3" (spaces or commas) list: *ids malloc'd, *n of them (what: the option,
 * for the messages). */
static int parse_id_list(const char *what, const char *s, int32_t **ids, size_t *n)
{
    size_t cap = strlen(s) / 2 + 1;
    *ids = malloc(cap * sizeof **ids);
    *n = 0;
    if (!*ids)
        return 1;
    while (*s) {
        while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n')
            s++;
        if (!*s)
            break;
        char *end = NULL;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || v < 0 || v > INT32_MAX || *n == cap)
            return usage("bad id list in %s at \"%s\"", what, s);
        (*ids)[(*n)++] = (int32_t)v;
        s = end;
    }
    return *n ? 0 : usage("%s has no id", what);
}

/* The model's Hugging Face directory: --load-hf's, or the one a checkpoint was trained from;
 * NULL for an llm.c file, a checkpoint of a preset or of a directory since moved. */
static const char *model_hf_dir(const opts *o)
{
    const char *dir = o->load_hf ? o->load_hf : o->model_dir;
    struct stat sb;
    return dir && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) ? dir : NULL;
}

/* --eos: none, the ids given, or (auto) the --load-hf directory's (nnt_model_hf_eos_ids; a
 * checkpoint's: the directory its run started from) that the vocabulary of V tokens has (as
 * transformers, which never meets the others); *ids malloc'd (NULL: none), *n of them. */
static int eos_ids(const opts *o, int64_t V, int32_t **ids, size_t *n)
{
    *ids = NULL, *n = 0;
    if (!strcmp(o->eos, "none") || !strcmp(o->eos, "-1"))
        return 0;
    if (strcmp(o->eos, "auto"))
        return parse_id_list("--eos", o->eos, ids, n);
    const char *dir = model_hf_dir(o);
    if (!dir)
        return 0;
    int64_t count = 0;
    int rc = nnt_model_hf_eos_ids(dir, NULL, 0, &count);
    *ids = rc == 0 && count > 0 ? malloc((size_t)count * sizeof **ids) : NULL;
    if (rc == 0 && count > 0 && !*ids)
        rc = NNT_E_NOMEM;
    if (rc == 0 && count > 0)
        rc = nnt_model_hf_eos_ids(dir, *ids, count, &count);
    if (rc)
        return lib_error("--eos auto (the model's eos_token_id)", rc);
    for (int64_t k = 0; k < count; k++)
        if ((*ids)[k] < V)
            (*ids)[(*n)++] = (*ids)[k];
    return 0;
}

/* whether --name was given */
static int was_given(const char *name)
{
    const cli_option *d = cli_find(&program, name, strlen(name));
    return d && given[d - table];
}

/* What --generation-config auto may take from generation_config.json: the option that gives
 * it here, its NNT_HF_SAMPLING_* bit, where it is in nnt_sampling and in opts (an int64_t or
 * a double) */
static const struct {
    const char *option, *key;
    unsigned bit;
    size_t in_sampling, in_opts;
    int integer;
} hf_taken[] = {
    {"temperature", "temperature", NNT_HF_SAMPLING_TEMPERATURE,
     offsetof(nnt_sampling, temperature), offsetof(opts, temperature), 0},
    {"top-k", "top_k", NNT_HF_SAMPLING_TOP_K, offsetof(nnt_sampling, top_k),
     offsetof(opts, top_k), 1},
    {"top-p", "top_p", NNT_HF_SAMPLING_TOP_P, offsetof(nnt_sampling, top_p),
     offsetof(opts, top_p), 0},
    {"min-p", "min_p", NNT_HF_SAMPLING_MIN_P, offsetof(nnt_sampling, min_p),
     offsetof(opts, min_p), 0},
    {"typical-p", "typical_p", NNT_HF_SAMPLING_TYPICAL_P, offsetof(nnt_sampling, typical_p),
     offsetof(opts, typical_p), 0},
    {"epsilon-cutoff", "epsilon_cutoff", NNT_HF_SAMPLING_EPSILON_CUTOFF,
     offsetof(nnt_sampling, epsilon_cutoff), offsetof(opts, epsilon_cutoff), 0},
    {"eta-cutoff", "eta_cutoff", NNT_HF_SAMPLING_ETA_CUTOFF, offsetof(nnt_sampling, eta_cutoff),
     offsetof(opts, eta_cutoff), 0},
    {"repetition-penalty", "repetition_penalty", NNT_HF_SAMPLING_REPETITION_PENALTY,
     offsetof(nnt_sampling, repetition_penalty), offsetof(opts, repetition_penalty), 0},
    {"no-repeat-ngram-size", "no_repeat_ngram_size", NNT_HF_SAMPLING_NO_REPEAT_NGRAM_SIZE,
     offsetof(nnt_sampling, no_repeat_ngram_size), offsetof(opts, no_repeat_ngram), 1},
};

/* --generation-config auto: the sampling settings of the model directory's
 * generation_config.json (nnt_model_hf_sampling) for those the command line does not give,
 * said on standard error. 0, or 1 reported. */
static int generation_defaults(opts *o)
{
    const char *dir = o->generation_config == 0 ? model_hf_dir(o) : NULL;
    nnt_sampling s = NNT_SAMPLING_INIT;
    unsigned found = 0;
    int rc = dir ? nnt_model_hf_sampling(dir, &s, &found) : 0;
    if (rc)
        return lib_error("--generation-config auto", rc);
    char said[512] = "";   /* what is taken (nine short items at most) */
    int n = 0;
    for (size_t i = 0; i < sizeof hf_taken / sizeof *hf_taken; i++) {
        if (!(found & hf_taken[i].bit) || was_given(hf_taken[i].option))
            continue;
        const char *from = (const char *)&s + hf_taken[i].in_sampling;
        char *to = (char *)o + hf_taken[i].in_opts;
        n += snprintf(said + n, sizeof said - (size_t)n, "%s%s ", n ? ", " : "",
                      hf_taken[i].key);
        if (hf_taken[i].integer) {
            memcpy(to, from, sizeof(int64_t));
            n += snprintf(said + n, sizeof said - (size_t)n, "%lld",
                          (long long)*(const int64_t *)(const void *)from);
        } else {
            memcpy(to, from, sizeof(double));
            n += snprintf(said + n, sizeof said - (size_t)n, "%g",
                          *(const double *)(const void *)from);
        }
    }
    if (n)
        fprintf(stderr, "nnt-generate: sampling with %s from %s/generation_config.json "
                "(--generation-config none: without)\n", said, dir);
    return 0;
}

static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The value of key in a checkpoint's options string, malloc'd; NULL when absent. */
static char *saved(const char *options, const char *key)
{
    char buf[4096];
    int found = 0;
    if (nnt_options_get(options, key, buf, sizeof buf, &found) || !found)
        return NULL;
    return strdup(buf);
}

/* The tokenizer: --tokenizer bytes, --tokenizer-json FILE (a Hugging Face tokenizer.json),
 * --vocab / --merges (GPT-2 BPE), else the model source's (nnt_tokenizer_of_source: the
 * --load-hf directory's tokenizer.json, else its vocab.json and merges.txt; the one the
 * --checkpoint was trained with); *tok NULL if none (2: --prompt needs one). trained: the
 * checkpoint's options or NULL. */
static int load_tokenizer(const opts *o, const char *trained, nnt_tokenizer **tok)
{
    const char *what = o->tokenizer == TOK_BYTES ? "nnt_tokenizer_bytes_create"
                     : o->tokenizer_json ? "nnt_tokenizer_hf_load"
                     : o->vocab ? "nnt_tokenizer_bpe_load" : "nnt_tokenizer_of_source";
    int rc = 0;
    *tok = NULL;
    if (o->tokenizer == TOK_BYTES)
        rc = nnt_tokenizer_bytes_create(tok);
    else if (o->tokenizer_json)
        rc = nnt_tokenizer_hf_load(o->tokenizer_json, tok);
    else if (o->vocab)
        rc = nnt_tokenizer_bpe_load(o->vocab, o->merges, tok);
    else if (!o->load_llmc &&   /* the checkpoint's files gone: --prompt says so below */
             (rc = nnt_tokenizer_of_source(o->load_hf ? o->load_hf : o->checkpoint, tok)) ==
                 NNT_E_IO && trained)
        rc = 0;
    if (rc)
        return lib_error(what, rc);
    char *kind = !*tok && o->prompt && trained ? saved(trained, "tokenizer") : NULL;
    if (kind)
        rc = usage("--prompt needs a tokenizer: the checkpoint was trained with --tokenizer "
                   "%s, whose files are not where it was trained; give --tokenizer-json FILE "
                   "or --vocab and --merges, or use --prompt-ids", kind);
    else if (!*tok && o->prompt)
        rc = usage("%s", "--prompt needs a tokenizer: --tokenizer bytes (one token per byte: "
                   "nnt-train's default, whose --save-hf directories have no tokenizer file), "
                   "--tokenizer-json FILE, --vocab and --merges (GPT-2 BPE), or a --load-hf "
                   "directory with tokenizer.json or vocab.json and merges.txt; or use "
                   "--prompt-ids");
    free(kind);
    return rc;
}

/* Printing the new tokens as they are chosen (nnt_sampling's on_token): ids as numbers
 * (--print-ids, or without a tokenizer), or text: the new tokens so far are decoded whole
 * each time and the bytes beyond those already printed are written, so the streamed text is
 * the text of the whole sequence for the decoders that extend a prefix's text (all those
 * nnt reads). */
typedef struct stream {
    const nnt_tokenizer *tok;    /* NULL: ids                                             */
    int32_t *ids;                /* the prompt's (unless --continuation-only), the new ones */
    size_t n, printed, len;      /* tokens; bytes of text written (or held back), decoded  */
    char *text;
    size_t cap;
    int escape;                  /* stdout is a terminal: escape what is not text         */
    int failed;                  /* a decode failed: the error is reported at the end     */
} stream;

/* Write the text decoded, from the bytes written so far: raw, or (st->escape) newlines, tabs,
 * printable ASCII and valid UTF-8 as they are and other bytes as \xHH, as nnt-train prints
 * its sample (no control sequences reach the terminal); a valid start of a UTF-8 character
 * at the end is held back for the next token unless final. */
static void write_text(stream *st, int final)
{
    const unsigned char *s = (const unsigned char *)st->text;
    size_t k = st->printed, len = st->len;
    if (!st->escape) {
        fwrite(s + k, 1, len - k, stdout);
        k = len;
    }
    k += text_out_escaped(stdout, s + k, len - k, final);
    st->printed = k;
    fflush(stdout);
}

/* Decode all the ids so far and write what is new. */
static void decode_and_write(stream *st)
{
    size_t len = 0;
    int rc = nnt_tokenizer_decode(st->tok, st->ids, st->n, NULL, 0, &len);
    if (rc && rc != NNT_E_INVAL) {
        st->failed = rc;
        return;
    }
    if (len + 1 > st->cap) {
        char *grown = realloc(st->text, 2 * (len + 1));
        if (!grown) {
            st->failed = NNT_E_NOMEM;
            return;
        }
        st->text = grown;
        st->cap = 2 * (len + 1);
    }
    if ((rc = nnt_tokenizer_decode(st->tok, st->ids, st->n, st->text, st->cap, &len))) {
        st->failed = rc;
        return;
    }
    if (len > st->printed) {
        st->len = len;
        write_text(st, 0);
    }
}

static void print_token(void *arg, int64_t i, int32_t token)
{
    stream *st = arg;
    (void)i;
    st->ids[st->n++] = token;
    if (!st->tok) {
        printf("%s%d", st->n > 1 ? " " : "", (int)token);
        fflush(stdout);
        return;
    }
    decode_and_write(st);
}

/* --checkpoint FILE|DIR (DIR: its checkpoint.safetensors, as nnt-train --out writes it): the
 * options the training run saved (*trained, malloc'd; NULL when none), for its tokenizer. */
static int checkpoint_options(const opts *o, char **trained)
{
    struct stat sb;
    char *path = stat(o->checkpoint, &sb) == 0 && S_ISDIR(sb.st_mode)
                     ? path_in(o->checkpoint, "checkpoint.safetensors")
                     : strdup(o->checkpoint);
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    int rc = path ? nnt_train_state_info(NULL, path, &st) : NNT_E_NOMEM;
    free(path);
    if (rc)
        return lib_error("--checkpoint", rc);
    *trained = st.options;   /* ours now: freed by the caller */
    return 0;
}

/* --quantize nf4: the model of cfg built empty, its matrices frozen in NF4, then read from
 * source (never held whole in fp32). */
static int load_nf4(nnt_ctx *ctx, const char *source, const nnt_model_config *cfg, int64_t B,
                    int64_t seq, nnt_layer **model)
{
    int rc = nnt_model_create_empty(ctx, cfg, B, seq, NULL, model);
    if (rc == 0)
        rc = nnt_layer_freeze(*model, "*", NNT_FREEZE_NF4, NULL);
    if (rc == 0)
        rc = nnt_model_read_hf(*model, source);
    return rc;
}

/* The model source the options name, and the option naming it */
static const char *source_of(const opts *o)
{
    return o->load_hf ? o->load_hf : o->load_llmc ? o->load_llmc : o->checkpoint;
}

static const char *source_option(const opts *o)
{
    return o->load_hf ? "--load-hf" : o->load_llmc ? "--load-llmc" : "--checkpoint";
}

/* The configuration of the model source (a classifier's: num_labels > 0). */
static int source_config(nnt_ctx *ctx, const opts *o, nnt_model_config *cfg)
{
    const char *source = source_of(o);
    if (access(source, F_OK)) {   /* (not a preset's name: a model to generate with) */
        fprintf(stderr, "nnt-generate: %s %s: %s\n", source_option(o), source, strerror(errno));
        return 1;
    }
    int rc = nnt_model_source_config(ctx, source, cfg);
    return rc ? lib_error(source_option(o), rc) : 0;
}

/* --num-labels N: the configuration of cfg, a language model's, as a classifier of N labels
 * (as nnt-train --num-labels makes one; a classifier of other labels refused); 0, else 1 or
 * 2 (reported). */
static int relabel(const opts *o, nnt_model_config *cfg)
{
    if (!o->num_labels || cfg->num_labels == o->num_labels)
        return 0;
    if (cfg->num_labels > 0) {
        fprintf(stderr, "nnt-generate: --num-labels %lld: %s is a classifier of %lld labels "
                "already\n", (long long)o->num_labels, o->load_hf, (long long)cfg->num_labels);
        return 2;
    }
    cfg->num_labels = o->num_labels;
    if (!o->adapter)
        fprintf(stderr, "nnt-generate: note: --num-labels %lld without --adapter: the score "
                "head is new (initialised from seed 0), not trained\n",
                (long long)o->num_labels);
    return 0;
}

/* The model of --load-hf, --load-llmc or --checkpoint (nnt_model_open) for B sequences of
 * T tokens, at most its context (of the source's configuration cfg); *seq_out the length it
 * takes. */
static int load_model(nnt_ctx *ctx, const opts *o, const nnt_model_config *cfg, int64_t B,
                      int64_t T, nnt_layer **model, int64_t *seq_out)
{
    const char *source = source_of(o);
    int64_t seq = T > cfg->max_seq ? cfg->max_seq : T;
    *seq_out = seq;
    int rc = 0;
    if (o->quantize)
        rc = load_nf4(ctx, source, cfg, B, seq, model);
    else if (o->num_labels) {   /* the classifier, then the language model's weights read */
        rc = nnt_model_create(ctx, cfg, B, seq, NULL, model);
        if (rc == 0)
            rc = nnt_model_read_hf(*model, source);
    } else
        rc = nnt_model_open(ctx, source, NULL, B, seq, NULL, 0, model);
    if (rc)
        return lib_error(source_option(o), rc);
    if (o->adapter && (rc = nnt_model_load_peft(*model, o->adapter)))
        return lib_error("--adapter", rc);
    return 0;
}

/* The sampling settings of the options, eos the ids that stop */
static nnt_sampling sampling_of(const opts *o, const int32_t *eos, size_t neos)
{
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = o->temperature;
    s.top_k = o->top_k;
    s.top_p = o->top_p;
    s.min_p = o->min_p;
    s.repetition_penalty = o->repetition_penalty;
    s.typical_p = o->typical_p;
    s.epsilon_cutoff = o->epsilon_cutoff;
    s.eta_cutoff = o->eta_cutoff;
    s.no_repeat_ngram_size = o->no_repeat_ngram;
    s.seed = (uint64_t)o->seed;
    s.eos_ids = eos;
    s.n_eos_ids = (int64_t)neos;
    s.no_cache = o->no_cache;
    return s;
}

/* A stream over ids (room for the prompt and the new tokens), the prompt written first as
 * nnt-train's sample does (--chat: the answer alone) */
static stream stream_start(const opts *o, const nnt_tokenizer *tok, int32_t *ids,
                           const int32_t *prompt, size_t nprompt)
{
    stream st = {o->print_ids ? NULL : tok, ids, 0, 0, 0, NULL, 0, isatty(STDOUT_FILENO), 0};
    if (st.tok && !o->continuation_only && !o->chat) {
        memcpy(st.ids, prompt, nprompt * sizeof *prompt);
        st.n = nprompt;
        decode_and_write(&st);
    }
    return st;
}

/* The end of a stream's output: a character left incomplete (its bytes, escaped), the line's
 * end; 0, or 1 when a decode failed (reported). */
static int stream_end(stream *st, int ended_line)
{
    if (st->tok && st->printed < st->len)
        write_text(st, 1);
    if (ended_line)
        printf("\n");
    int status = st->failed ? lib_error("nnt_tokenizer_decode", st->failed) : 0;
    free(st->text);
    st->text = NULL;
    return status;
}

static void note_past_context(const opts *o, nnt_layer *model, size_t nprompt)
{
    nnt_model_config cfg;
    if (nnt_model_config_of(model, &cfg) == 0 && (int64_t)nprompt + o->max_new > cfg.max_seq)
        fprintf(stderr, "nnt-generate: note: the prompt and the new tokens (%lld) exceed the "
                "model's context (%lld): past it, each token sees the last %lld (a sliding "
                "window)\n", (long long)nprompt + o->max_new, (long long)cfg.max_seq,
                (long long)cfg.max_seq);
}

/* Generate and stream the new tokens (text through tok, or ids). */
static int generate(const opts *o, nnt_layer *model, nnt_tokenizer *tok, const int32_t *prompt,
                    size_t nprompt, const int32_t *eos, size_t neos)
{
    int32_t *out = malloc(((size_t)o->max_new + 1) * sizeof *out);
    int32_t *ids = malloc((nprompt + (size_t)o->max_new + 1) * sizeof *ids);
    nnt_sampling s = sampling_of(o, eos, neos);
    if (!out || !ids) {
        free(out);
        free(ids);
        return lib_error("out of memory", NNT_E_NOMEM);
    }
    stream st = stream_start(o, tok, ids, prompt, nprompt);
    s.on_token = print_token;
    s.on_token_arg = &st;
    int status = 0, rc = 0;
    note_past_context(o, model, nprompt);
    if ((rc = nnt_model_generate(model, prompt, (int64_t)nprompt, o->max_new, &s, out)))
        status = lib_error("nnt_model_generate", rc);
    int decode_status = stream_end(&st, st.n || !rc);   /* the tokens came as they were made */
    free(ids);
    free(out);
    return status ? status : decode_status;
}

static int is_eos_id(int32_t token, const int32_t *eos, size_t neos)
{
    for (size_t k = 0; k < neos; k++)
        if (token == eos[k])
            return 1;
    return 0;
}

/* Half of n (n >= 2 things side by side that did not fit in memory), said on standard
 * error: "N what side by side do not fit ..." (\r first on a terminal's progress line). */
static size_t halved(size_t n, const char *what, int cr)
{
    fprintf(stderr, "%snnt-generate: %zu %s side by side do not fit in memory: %zu at a time "
            "from here on\n", cr ? "\r" : "", n, what, n / 2);
    return n / 2;
}

/* The nseq samples of --num-samples into out (nseq, ngen), group (<= nseq) side by side
 * (nnt_model_generate_n), sample r with seed S + r; while they do not fit in memory, in groups
 * half as large (each sample the same: its seed is its own), said. 0, or 1 reported. */
static int samples_side_by_side(nnt_layer *model, const int32_t *prompt, size_t nprompt,
                                size_t nseq, size_t group, size_t ngen, const nnt_sampling *s,
                                int32_t *out)
{
    for (size_t r0 = 0; r0 < nseq;) {
        size_t n = nseq - r0 < group ? nseq - r0 : group;
        nnt_sampling g = *s;
        g.seed = s->seed + r0;
        int rc = nnt_model_generate_n(model, prompt, (int64_t)nprompt, (int64_t)n,
                                      (int64_t)ngen, &g, out + r0 * ngen);
        if (rc == NNT_E_NOMEM && n > 1) {
            group = halved(n, "samples", 0);
            continue;
        }
        if (rc)
            return lib_error("nnt_model_generate_n", rc);
        r0 += n;
    }
    return 0;
}

/* --num-samples N > 1: the N sequences generated side by side (samples_side_by_side), then
 * each printed as one sequence alone is (up to its eos, which is printed), text under a line
 * "--- sample R of N ---", ids a line each. */
static int generate_samples(const opts *o, nnt_layer *model, nnt_tokenizer *tok,
                            const int32_t *prompt, size_t nprompt, const int32_t *eos,
                            size_t neos)
{
    size_t nseq = (size_t)o->num_samples, ngen = (size_t)o->max_new;
    int32_t *out = malloc((nseq * ngen + 1) * sizeof *out);
    int32_t *ids = malloc((nprompt + ngen + 1) * sizeof *ids);
    nnt_sampling s = sampling_of(o, eos, neos);
    int status = 0;
    if (!out || !ids)
        status = lib_error("out of memory", NNT_E_NOMEM);
    if (status == 0) {
        note_past_context(o, model, nprompt);
        status = samples_side_by_side(model, prompt, nprompt, nseq, nseq, ngen, &s, out);
    }
    for (size_t r = 0; r < nseq && status == 0; r++) {
        if (!o->print_ids && tok)
            printf("--- sample %zu of %zu ---\n", r + 1, nseq);
        stream st = stream_start(o, tok, ids, prompt, nprompt);
        for (size_t j = 0; j < ngen; j++) {
            print_token(&st, (int64_t)j, out[r * ngen + j]);
            if (is_eos_id(out[r * ngen + j], eos, neos))
                break;
        }
        status = stream_end(&st, 1);
    }
    free(ids);
    free(out);
    return status;
}

static void json_escaped(char *b, size_t *k, const char *text, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '\\')
            *k += (size_t)sprintf(b + *k, "\\%c", c);
        else if (c < 0x20)
            *k += (size_t)sprintf(b + *k, "\\u%04x", c);
        else
            b[(*k)++] = (char)c;
    }
}

/* --chat's configuration: --tokenizer-config, else the one in the --load-hf directory or
 * beside --tokenizer-json (or the tokenizer.json a checkpoint was trained with) (malloc'd;
 * NULL: none, the chosen template alone). */
static char *chat_config(const opts *o)
{
    if (o->tokenizer_config)
        return strdup(o->tokenizer_config);
    return cli_config_beside(o->tokenizer_json ? o->tokenizer_json
                             : o->load_hf ? o->load_hf : o->trained_tokenizer);
}

/* The encoder options of --chat (and --prompts' messages): the template of config (the
 * tokenizer_config.json; NULL: none) or --chat-template, --no-think, --chat-date. */
static nnt_sft_options chat_options(const opts *o, const char *config)
{
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = config;
    so.chat_template = cli_chat_template(chat_templates[o->chat_template]);
    so.no_thinking = o->no_think;
    so.date = o->chat_date;
    return so;
}

/* --chat's record into rec (*k bytes): the prompt's text as a user's message after
 * --system's (--messages: the file's text, given as it is). */
static void chat_record(const opts *o, char *rec, size_t *k)
{
    size_t ns = o->system ? strlen(o->system) : 0;
    *k = (size_t)sprintf(rec, "{\"messages\": [");
    if (o->system) {
        *k += (size_t)sprintf(rec + *k, "{\"role\": \"system\", \"content\": \"");
        json_escaped(rec, k, o->system, ns);
        *k += (size_t)sprintf(rec + *k, "\"}, ");
    }
    *k += (size_t)sprintf(rec + *k, "{\"role\": \"user\", \"content\": \"");
    json_escaped(rec, k, o->prompt, o->prompt_len);
    *k += (size_t)sprintf(rec + *k, "\"}]}");
}

/* --chat: the prompt's text as a user's message (after --system's), or --messages's
 * conversation, rendered with the chat template and its generation prompt
 * (nnt_sft_encode_prompt). */
static int chat_tokens(const opts *o, const nnt_tokenizer *tok, int32_t **prompt,
                       size_t *nprompt)
{
    size_t ns = o->system ? strlen(o->system) : 0, k = 0;
    char *rec = malloc(6 * (o->prompt_len + ns) + 128), *config = chat_config(o);
    if (!rec) {
        free(config);
        return lib_error("--chat", NNT_E_NOMEM);
    }
    if (o->messages)
        memcpy(rec, o->prompt, k = o->prompt_len);
    else
        chat_record(o, rec, &k);
    nnt_sft_options so = chat_options(o, config);
    nnt_sft *s = NULL;
    const int32_t *ids = NULL;
    nnt_chat_template used = NNT_CHAT_NONE;
    int rc = 0, status = 0;
    if (!config && so.chat_template == NNT_CHAT_AUTO)
        status = usage("%s", "--chat: no tokenizer_config.json in the --load-hf directory or "
                       "beside --tokenizer-json: give --tokenizer-config FILE or "
                       "--chat-template NAME");
    else if ((rc = nnt_sft_create(tok, &so, &s)) != 0)
        status = lib_error("--chat (nnt_sft_create)", rc);
    else if (nnt_sft_template_of(s, &used) == 0 && used == NNT_CHAT_NONE)
        status = usage("--chat: %s has no chat_template: give --chat-template NAME", config);
    else if ((rc = nnt_sft_encode_prompt(s, rec, k, &ids, nprompt)) != 0)
        status = lib_error(o->messages ? "--messages (nnt_sft_encode_prompt)"
                           : "--chat (nnt_sft_encode_prompt)", rc);
    else if (!(*prompt = malloc((*nprompt + 1) * sizeof **prompt)))
        status = lib_error("--chat", NNT_E_NOMEM);
    else
        memcpy(*prompt, ids, *nprompt * sizeof **prompt);
    nnt_sft_destroy(s);
    free(rec);
    free(config);
    return status;
}

/* A classifier's text (len bytes) through s: its ids as tokenizer(text) gives them, with the
 * special tokens the post-processor adds, as nnt-train trains classifiers
 * (nnt_sft_encode_labelled), into *out (malloc'd). */
static int encode_text(nnt_sft *s, const char *text, size_t len, int32_t **out, size_t *n)
{
    size_t k = 0;
    char *rec = malloc(6 * len + 32);
    const int32_t *ids = NULL;
    int64_t label = 0;
    int rc = rec ? 0 : NNT_E_NOMEM;
    if (rc == 0) {
        k = (size_t)sprintf(rec, "{\"label\": 0, \"text\": \"");
        json_escaped(rec, &k, text, len);
        k += (size_t)sprintf(rec + k, "\"}");
        rc = nnt_sft_encode_labelled(s, rec, k, &ids, n, &label);
    }
    if (rc == 0 && !(*out = malloc(*n * sizeof **out)))
        rc = NNT_E_NOMEM;
    if (rc == 0)
        memcpy(*out, ids, *n * sizeof **out);
    free(rec);
    return rc;
}

/* The prompt's text as a classifier's (encode_text). */
static int text_tokens(const opts *o, const nnt_tokenizer *tok, int32_t **prompt,
                       size_t *nprompt)
{
    nnt_sft *s = NULL;
    int rc = nnt_sft_create(tok, NULL, &s);
    if (rc == 0)
        rc = encode_text(s, o->prompt, o->prompt_len, prompt, nprompt);
    nnt_sft_destroy(s);
    return rc ? lib_error("the classifier's text (nnt_sft_encode_labelled)", rc) : 0;
}

/* The prompt's ids: --prompt-ids, or --prompt through tok (a classifier's: as
 * tokenizer(text)). */
static int prompt_tokens(const opts *o, const nnt_tokenizer *tok, int labels, int32_t **prompt,
                         size_t *nprompt)
{
    if (o->prompt_ids)
        return parse_id_list("--prompt-ids", o->prompt_ids, prompt, nprompt);
    if (o->chat && labels)
        return usage("%s", "--chat, --messages: a classifier takes a text (--prompt, "
                     "--prompt-file or --prompt-ids)");
    if (o->chat)
        return chat_tokens(o, tok, prompt, nprompt);
    if (labels)
        return text_tokens(o, tok, prompt, nprompt);
    int e = nnt_tokenizer_encode(tok, o->prompt, o->prompt_len, NULL, 0, nprompt);
    *prompt = e ? NULL : malloc((*nprompt + 1) * sizeof **prompt);
    if (e || !*prompt ||
        (e = nnt_tokenizer_encode(tok, o->prompt, o->prompt_len, *prompt, *nprompt,
                                  nprompt)))
        return lib_error("nnt_tokenizer_encode", e ? e : NNT_E_NOMEM);
    return *nprompt ? 0 : usage("%s", "--prompt encodes to no token");
}

/* The end of a classifier's line about label k: "  NAME" when the model names its labels
 * (config.json's id2label, not transformers' defaults LABEL_k), then the newline. */
static void print_label_name(const nnt_layer *model, int64_t k)
{
    char name[256], dflt[32];
    snprintf(dflt, sizeof dflt, "LABEL_%lld", (long long)k);
    if (nnt_model_label_name(model, k, name, sizeof name) == 0 && strcmp(name, dflt) != 0)
        printf("  %s", name);
    printf("\n");
}

/* The logits (B, L) at transformers' pooled position (a row's last token that is not
 * padding) of the B rows of ids (B, T), row b holding n[b] tokens then padding (written
 * here; no token after a row's own is seen), through model (of B rows of T); its forward
 * has no targets: its output is the logits. */
static int pooled_logits(nnt_ctx *ctx, nnt_layer *model, const nnt_model_config *cfg,
                         int64_t B, int64_t T, int32_t *ids, const int64_t *n, float *out)
{
    int64_t L = cfg->num_labels, pad = cfg->has_pad_token ? cfg->pad_token_id : -1;
    nnt_tiling tl;
    int rc = nnt_model_tiling(ctx, cfg, B, T, NULL, &tl);
    int64_t *at = calloc((size_t)B, sizeof *at);
    int32_t *targets = malloc((size_t)T * sizeof *targets), label = 0;
    float *logits = malloc((size_t)(B * T * L) * sizeof *logits);   // (B, T, L)
    nnt_tensor *x = NULL, *y = NULL;
    int64_t shape[2] = {B, T}, tile[2] = {tl.batch > 0 ? tl.batch : B, tl.seq};
    if (rc == 0 && (!at || !targets || !logits))
        rc = NNT_E_NOMEM;
    for (int64_t b = 0; rc == 0 && b < B; b++) {   /* where the row pools, then its padding */
        rc = nnt_model_pool_targets(ids + b * T, 1, n[b], pad, &label, targets);
        while (rc == 0 && targets[at[b]] < 0)
            at[b]++;
        for (int64_t t = n[b]; t < T; t++)
            ids[b * T + t] = pad >= 0 ? (int32_t)pad : 0;
    }
    if (rc == 0 && (rc = nnt_tensor_create(ctx, NNT_INT32, 2, shape, tile, &x)) == 0 &&
        (rc = nnt_tensor_copy_from_host(x, ids, (size_t)(B * T) * sizeof *ids)) == 0 &&
        (rc = nnt_layer_set_targets(model, NULL)) == 0 &&
        (rc = nnt_layer_forward(model, x, &y)) == 0)
        rc = nnt_tensor_copy_to_host(y, logits, (size_t)(B * T * L) * sizeof *logits);
    for (int64_t b = 0; rc == 0 && b < B; b++)
        memcpy(out + b * L, logits + (b * T + at[b]) * L, (size_t)L * sizeof *out);
    nnt_tensor_destroy(x);
    free(at), free(targets), free(logits);
    return rc;
}

/* softmax(row) (L) into p; the likeliest label (the first of equals) */
static int64_t label_probs(const float *row, int64_t L, double *p)
{
    double top = row[0], sum = 0.0;
    int64_t best = 0;
    for (int64_t k = 1; k < L; k++)
        best = row[k] > row[best] ? k : best, top = fmax(top, row[k]);
    for (int64_t k = 0; k < L; k++)
        sum += p[k] = exp((double)row[k] - top);
    for (int64_t k = 0; k < L; k++)
        p[k] /= sum;
    return best;
}

/* A classifier trained on values (problem_type): the row's values (regression), or each
 * label's own probability sigmoid(logit) (multi-label) into p */
static void values_of(const float *row, int64_t L, int problem, double *p)
{
    for (int64_t k = 0; k < L; k++)
        p[k] = problem == NNT_PROBLEM_MULTI_LABEL ? 1.0 / (1.0 + exp(-(double)row[k]))
                                                  : (double)row[k];
}

/* A multi-label classifier's labels whose probability is above 0.5 (p), printed as a list:
 * ", " between them (json: a JSON array's items), or "none" */
static void print_labels_above(const double *p, int64_t L, int json)
{
    int any = 0;
    for (int64_t k = 0; k < L; k++)
        if (p[k] > 0.5)
            printf("%s%lld", any++ ? json ? ", " : " " : "", (long long)k);
    if (!any && !json)
        printf("none");
}

/* A classifier trained on values on the prompt: each label's value (regression) or
 * probability and the labels above 0.5 (multi-label) */
static void classify_values(const nnt_layer *model, const nnt_model_config *cfg,
                            const float *row, double *p)
{
    int64_t L = cfg->num_labels;
    int multi = cfg->problem_type == NNT_PROBLEM_MULTI_LABEL;
    values_of(row, L, cfg->problem_type, p);
    for (int64_t k = 0; k < L; k++) {
        printf("%s %lld  %.6f", multi ? "label" : "value", (long long)k, p[k]);
        print_label_name(model, k);
    }
    if (multi) {
        printf("predicted labels ");
        print_labels_above(p, L, 0);
        printf("\n");
    }
}

/* A classifier on the prompt: each label's probability and the likeliest one; a reward
 * model's (one label) score; a classifier trained on values, classify_values. */
static int classify(nnt_ctx *ctx, nnt_layer *model, const nnt_model_config *cfg, int64_t T,
                    const int32_t *prompt, size_t nprompt)
{
    int64_t L = cfg->num_labels, n = (int64_t)nprompt;
    if (n > T)
        return usage("the text has %lld tokens, more than the classifier's context (%lld)",
                     (long long)n, (long long)T);
    int32_t *ids = calloc((size_t)T, sizeof *ids);
    float *row = malloc((size_t)L * sizeof *row);
    double *p = malloc((size_t)L * sizeof *p);
    int rc = ids && row && p ? 0 : NNT_E_NOMEM;
    if (rc == 0) {
        memcpy(ids, prompt, nprompt * sizeof *ids);
        rc = pooled_logits(ctx, model, cfg, 1, T, ids, &n, row);
    }
    if (rc == 0 && cfg->problem_type != NNT_PROBLEM_DEFAULT)
        classify_values(model, cfg, row, p);
    else if (rc == 0 && L == 1)
        printf("score %.6f\n", row[0]);
    else if (rc == 0 && L > 1) {
        int64_t best = label_probs(row, L, p);
        for (int64_t k = 0; k < L; k++) {
            printf("label %lld  %.6f", (long long)k, p[k]);
            print_label_name(model, k);
        }
        printf("predicted label %lld", (long long)best);
        print_label_name(model, best);
    }
    free(ids), free(row), free(p);
    return rc ? lib_error("the classifier's forward", rc) : 0;
}

/* One of --classify's or --prompts' records: its line, ids and label (-1: none); kept: a
 * labelled classification record, for its label (label_records), or a prompt record, to be
 * written back with its continuation */
typedef struct record {
    int64_t line, label, len;
    int32_t *ids;
    char *kept;
    float *target;   /* a classifier on values: a labelled record's values (NULL: none) */
} record;

typedef struct records {
    int64_t n, cap, longest;
    record *r;
} records;

static void records_free(records *r)
{
    for (int64_t i = 0; i < r->n; i++)
        free(r->r[i].ids), free(r->r[i].kept), free(r->r[i].target);
    free(r->r);
}

/* A record of line (its ids: malloc'd, n of them, owned from here; keep: its line, copied,
 * or NULL) added to r; 0, or 1 reported (option: the one named). */
static int records_add(records *r, int64_t line, int32_t *ids, size_t n, const char *keep,
                       const char *option)
{
    if (r->n == r->cap) {   /* room for one more */
        int64_t cap = r->cap ? 2 * r->cap : 64;
        record *more = realloc(r->r, (size_t)cap * sizeof *more);
        if (!more) {
            free(ids);
            return lib_error(option, NNT_E_NOMEM);
        }
        r->r = more, r->cap = cap;
    }
    record *at = &r->r[r->n++];
    *at = (record){line, -1, (int64_t)n, ids, keep ? strdup(keep) : NULL, NULL};
    r->longest = (int64_t)n > r->longest ? (int64_t)n : r->longest;
    return keep && !at->kept ? lib_error(option, NNT_E_NOMEM) : 0;
}

/* One record (rec: a NUL-terminated line of JSON, len bytes): {"text": T}, or with a
 * "label" (kept for label_records); its text's ids as nnt-train encodes them. */
static int record_of(nnt_sft *s, char *rec, size_t len, int64_t line, records *r)
{
    char *text = malloc(len + 1);
    int has_label = 0, found = 0;
    int rc = text ? nnt_options_get(rec, "label", text, len + 1, &has_label) : NNT_E_NOMEM;
    if (rc == 0)
        rc = nnt_options_get(rec, "text", text, len + 1, &found);
    if (rc == 0 && !found)
        rc = NNT_E_FORMAT;
    int32_t *ids = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = encode_text(s, text, strlen(text), &ids, &n);
    free(text);
    if (rc == 0)
        return records_add(r, line, ids, n, has_label ? rec : NULL, "--classify");
    free(ids);
    if (rc == NNT_E_NOMEM)
        return lib_error("--classify", rc);
    fprintf(stderr, "nnt-generate: --classify line %lld: %s: not a classification record "
            "({\"text\": ...}, with an optional \"label\" of the model's)\n", (long long)line,
            found ? nnt_ctx_last_error(NULL) : "no \"text\" member");
    return 2;
}

/* One of --prompts' records (rec: a NUL-terminated line, len bytes): its prompt's ids
 * (nnt_sft_encode_prompt), the line kept. */
static int prompt_record(nnt_sft *s, const char *file, char *rec, size_t len, int64_t line,
                         records *r)
{
    const int32_t *ids = NULL;
    size_t n = 0;
    int rc = nnt_sft_encode_prompt(s, rec, len, &ids, &n);
    int32_t *copy = rc == 0 ? malloc((n + 1) * sizeof *copy) : NULL;
    if (rc == 0 && copy) {
        memcpy(copy, ids, n * sizeof *copy);
        return records_add(r, line, copy, n, rec, "--prompts");
    }
    if (rc == 0 || rc == NNT_E_NOMEM)
        return lib_error("--prompts", NNT_E_NOMEM);
    fprintf(stderr, "nnt-generate: --prompts %s line %lld: %s\n", file, (long long)line,
            nnt_ctx_last_error(NULL));
    return 2;
}

/* --classify's or --prompts' FILE (o->prompt: the file's text; blank lines skipped): its
 * records through s, each as record_of (a classification record's text encoded as nnt-train
 * encodes it) or prompt_record reads it. */
static int read_records(const opts *o, nnt_sft *s, records *r)
{
    int status = 0;
    int64_t line = 0;
    for (size_t at = 0; at < o->prompt_len && status == 0;) {
        const char *end = memchr(o->prompt + at, '\n', o->prompt_len - at);
        size_t len = end ? (size_t)(end - (o->prompt + at)) : o->prompt_len - at;
        char *rec = malloc(len + 1);
        line++;
        if (!rec) {
            status = lib_error(o->prompts ? "--prompts" : "--classify", NNT_E_NOMEM);
            break;
        }
        size_t bom = line == 1 && len >= 3 && memcmp(o->prompt, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
        memcpy(rec, o->prompt + at + bom, len - bom);   /* (a byte-order mark left out) */
        rec[len - bom] = '\0';
        at += len + 1;
        len -= bom;
        while (len > 0 && (rec[len - 1] == '\r' || rec[len - 1] == ' ' || rec[len - 1] == '\t'))
            rec[--len] = '\0';   /* (a record written back ends with its '}') */
        if (len > 0)
            status = o->prompts ? prompt_record(s, o->prompts, rec, len, line, r)
                                : record_of(s, rec, len, line, r);
        free(rec);
    }
    if (status == 0 && r->n == 0) {
        fprintf(stderr, "nnt-generate: %s %s: no record\n", o->prompts ? "--prompts"
                : "--classify", o->prompts ? o->prompts : o->classify);
        status = 2;
    }
    return status;
}

/* The labels of the labelled records, read as nnt-train reads them: an index, or one of the
 * model's label names (nnt_sft_encode_labelled); a classifier trained on values (problem), a
 * list of L numbers, in [0, 1] for a multi-label one (nnt_sft_encode_valued, into the
 * record's target). 0, or 2 naming the first record refused (reported). */
static int label_records(const nnt_layer *model, const nnt_tokenizer *tok, int problem,
                         int64_t L, records *r)
{
    char (*buf)[256] = malloc((size_t)L * sizeof *buf);
    const char **names = malloc((size_t)L * sizeof *names);
    nnt_sft *s = NULL;
    int rc = buf && names ? nnt_sft_create(tok, NULL, &s) : NNT_E_NOMEM;
    for (int64_t k = 0; rc == 0 && problem == NNT_PROBLEM_DEFAULT && k < L; k++)
        if ((rc = nnt_model_label_name(model, k, buf[k], sizeof buf[k])) == 0)
            names[k] = buf[k];
    if (rc == 0 && problem == NNT_PROBLEM_DEFAULT && L > 1)
        rc = nnt_sft_set_label_names(s, names, L);
    int status = rc ? lib_error("--classify", rc) : 0;
    for (record *c = r->r; status == 0 && c < r->r + r->n; c++) {
        const int32_t *ids = NULL;
        size_t n = 0, len = c->kept ? strlen(c->kept) : 0;
        if (!c->kept)
            continue;
        int values = problem != NNT_PROBLEM_DEFAULT;
        if (values && !(c->target = malloc((size_t)L * sizeof *c->target))) {
            status = lib_error("--classify", NNT_E_NOMEM);
            break;
        }
        rc = values ? nnt_sft_encode_valued(s, c->kept, len, problem, L, &ids, &n, c->target)
                    : nnt_sft_encode_labelled(s, c->kept, len, &ids, &n, &c->label);
        if (rc == 0 && c->label >= L)
            fprintf(stderr, "nnt-generate: --classify line %lld: label %lld, but the model has "
                    "%lld labels\n", (long long)c->line, (long long)c->label, (long long)L);
        else if (rc)
            fprintf(stderr, "nnt-generate: --classify line %lld: %s\n", (long long)c->line,
                    nnt_ctx_last_error(NULL));
        status = rc || c->label >= L ? 2 : 0;
    }
    nnt_sft_destroy(s);
    free(buf), free(names);
    return status;
}

/* The metrics of a classifier on values over the labelled records: regression, the squared
 * and absolute errors; multi-label, each label right (its probability above 0.5 as its value
 * is), every label of a record right, and true positive, false positive and false negative
 * labels (micro F1) */
typedef struct value_metrics {
    int64_t records, values, right, exact, tp, fp, fn;
    double sq, abs;
} value_metrics;

static void add_value_metrics(value_metrics *m, const double *p, const float *target,
                              int64_t L)
{
    int64_t right = 0;
    for (int64_t k = 0; k < L; k++) {
        double d = p[k] - (double)target[k];
        int said = p[k] > 0.5, is = target[k] > 0.5f;
        m->sq += d * d, m->abs += fabs(d);
        right += said == is;
        m->tp += said && is, m->fp += said && !is, m->fn += !said && is;
    }
    m->records++, m->values += L, m->right += right, m->exact += right == L;
}

static void print_value_metrics(const value_metrics *m, int problem)
{
    if (!m->records)
        return;
    double n = (double)m->values;
    if (problem == NNT_PROBLEM_REGRESSION)
        fprintf(stderr, "; on the %lld with values: mean squared error %.6f (transformers' "
                "MSELoss), mean absolute error %.6f", (long long)m->records, m->sq / n,
                m->abs / n);
    else
        fprintf(stderr, "; on the %lld with labels: label accuracy %.4f (each label's "
                "probability above 0.5 as its value is), exact match %.4f, micro F1 %.4f",
                (long long)m->records, (double)m->right / n,
                (double)m->exact / (double)m->records,
                m->tp ? 2.0 * (double)m->tp / (double)(2 * m->tp + m->fp + m->fn) : 0.0);
}

/* One record's result as a JSON line: {"line": N, "label": K, "name": "...", "probabilities":
 * [...], "target": K} (a reward model: {"line": N, "score": X}; regression: {"line": N,
 * "values": [...]}; multi-label: {"line": N, "labels": [K, ...], "probabilities": [...]});
 * the likeliest label (-1: none) */
static int64_t print_record(const nnt_layer *model, const record *c, const float *row,
                            int64_t L, int problem, double *p)
{
    printf("{\"line\": %lld", (long long)c->line);
    if (problem != NNT_PROBLEM_DEFAULT) {
        values_of(row, L, problem, p);
        if (problem == NNT_PROBLEM_MULTI_LABEL) {
            printf(", \"labels\": [");
            print_labels_above(p, L, 1);
            printf("]");
        }
        printf(", \"%s\": [", problem == NNT_PROBLEM_MULTI_LABEL ? "probabilities" : "values");
        for (int64_t j = 0; j < L; j++)
            printf("%s%.6f", j ? ", " : "", p[j]);
        printf("]");
        for (int64_t j = 0; c->target && j < L; j++)   /* (a labelled record's values) */
            printf("%s%.9g", j ? ", " : ", \"target\": [", (double)c->target[j]);
        printf("%s}\n", c->target ? "]" : "");
        return -1;
    }
    if (L == 1) {
        printf(", \"score\": %.6f}\n", row[0]);
        return -1;
    }
    int64_t best = label_probs(row, L, p);
    char name[256];
    size_t k = 0;
    char esc[6 * sizeof name + 1];
    if (nnt_model_label_name(model, best, name, sizeof name) != 0)
        snprintf(name, sizeof name, "LABEL_%lld", (long long)best);
    json_escaped(esc, &k, name, strlen(name));
    esc[k] = '\0';
    printf(", \"label\": %lld, \"name\": \"%s\", \"probabilities\": [", (long long)best, esc);
    for (int64_t j = 0; j < L; j++)
        printf("%s%.6f", j ? ", " : "", p[j]);
    printf("]");
    if (c->label >= 0)
        printf(", \"target\": %lld", (long long)c->label);
    printf("}\n");
    return best;
}

/* --classify: the records in batches of B (the last one filled with copies of its first
 * row), a JSON line each, then the accuracy over the labelled ones (standard error). */
static int classify_records(nnt_ctx *ctx, nnt_layer *model, const nnt_model_config *cfg,
                            int64_t B, int64_t T, const records *r)
{
    int64_t L = cfg->num_labels, hits = 0, labelled = 0;
    value_metrics vm = {0};
    int32_t *ids = malloc((size_t)(B * T) * sizeof *ids);
    int64_t *n = malloc((size_t)B * sizeof *n);
    float *out = malloc((size_t)(B * L) * sizeof *out);
    double *p = malloc((size_t)L * sizeof *p);
    int rc = ids && n && out && p ? 0 : NNT_E_NOMEM;
    for (int64_t first = 0; rc == 0 && first < r->n; first += B) {
        for (int64_t b = 0; b < B; b++) {
            const record *c = &r->r[first + b < r->n ? first + b : first];
            memcpy(ids + b * T, c->ids, (size_t)c->len * sizeof *ids);
            n[b] = c->len;
        }
        rc = pooled_logits(ctx, model, cfg, B, T, ids, n, out);
        for (int64_t b = 0; rc == 0 && b < B && first + b < r->n; b++) {
            const record *c = &r->r[first + b];
            int64_t best = print_record(model, c, out + b * L, L, cfg->problem_type, p);
            if (best >= 0 && c->label >= 0)
                labelled++, hits += best == c->label;
            if (c->target)   /* (p: its values or probabilities) */
                add_value_metrics(&vm, p, c->target, L);
        }
    }
    if (rc == 0) {
        fprintf(stderr, "nnt-generate: %lld records classified, %lld a forward", (long long)r->n,
                (long long)B);
        if (labelled)
            fprintf(stderr, "; accuracy %.4f on the %lld with a label", (double)hits /
                    (double)labelled, (long long)labelled);
        print_value_metrics(&vm, cfg->problem_type);
        fprintf(stderr, "\n");
    }
    free(ids), free(n), free(out), free(p);
    return rc ? lib_error("the classifier's forward", rc) : 0;
}

/* --classify's or --prompts' records of o (a prompt's messages rendered with the chat
 * template of --chat-template, or of the tokenizer_config.json --chat would read) */
static int read_file_records(const opts *o, const nnt_tokenizer *tok, records *r)
{
    const char *option = o->prompts ? "--prompts" : "--classify";
    char *config = o->prompts ? chat_config(o) : NULL;
    nnt_sft_options so = chat_options(o, config);
    nnt_sft *s = NULL;
    int rc = nnt_sft_create(tok, o->prompts ? &so : NULL, &s);
    int status = rc ? lib_error(option, rc) : read_records(o, s, r);
    nnt_sft_destroy(s);
    free(config);
    return status;
}

/* The new tokens of a sequence (ngen of out) up to its stopping eos (excluded): their count,
 * *stopped 1 when an eos ended it. */
static size_t new_tokens(const int32_t *out, size_t ngen, const int32_t *eos, size_t neos,
                         int *stopped)
{
    size_t m = 0;
    while (m < ngen && !is_eos_id(out[m], eos, neos))
        m++;
    *stopped = m < ngen;
    return m;
}

/* One sequence's continuation as JSON: its text decoded (--print-ids: its ids), the stopping
 * eos left out; *stopped as new_tokens. 0, or an error code of the decode. */
static int print_continuation(const opts *o, const nnt_tokenizer *tok, const int32_t *out,
                              size_t ngen, const int32_t *eos, size_t neos, char **text,
                              size_t *cap, int *stopped)
{
    size_t m = new_tokens(out, ngen, eos, neos, stopped), len = 0;
    if (o->print_ids || !tok) {
        printf("[");
        for (size_t j = 0; j < m; j++)
            printf("%s%d", j ? ", " : "", (int)out[j]);
        printf("]");
        return 0;
    }
    int rc = nnt_tokenizer_decode(tok, out, m, *text, *cap, &len);
    if (rc == NNT_E_INVAL && len > *cap) {   /* (its length: room for it, then again) */
        char *more = realloc(*text, len + 1);
        if (!more)
            return NNT_E_NOMEM;
        *text = more, *cap = len + 1;
        rc = nnt_tokenizer_decode(tok, out, m, *text, *cap, &len);
    }
    if (rc == 0)
        text_out_json(stdout, (const unsigned char *)*text, len);
    return rc;
}

/* A prompt record written back (a JSON object; a list of messages alone as {"messages": [...]})
 * with its continuations: "generated" (--print-ids: "generated_ids"; --num-samples N > 1: a
 * list of N) and "finish_reason" ("stop": an eos ended it, "length": the new tokens ran out),
 * on one line. */
static int print_prompt_record(const opts *o, const nnt_tokenizer *tok, const record *c,
                               const int32_t *out, size_t nseq, size_t ngen,
                               const int32_t *eos, size_t neos, char **text, size_t *cap)
{
    size_t len = strlen(c->kept);
    const char *at = c->kept + strspn(c->kept, " \t");
    if (*at == '[')
        printf("{\"messages\": %s", at);
    else
        printf("%.*s", (int)(len - 1 - (size_t)(at - c->kept)), at);   /* (its '}' left out) */
    int stopped[4096];   /* (--num-samples <= 4096) */
    printf(", \"%s\": %s", o->print_ids ? "generated_ids" : "generated", nseq > 1 ? "[" : "");
    for (size_t r = 0; r < nseq; r++) {
        printf("%s", r ? ", " : "");
        int rc = print_continuation(o, tok, out + r * ngen, ngen, eos, neos, text, cap,
                                    &stopped[r]);
        if (rc)
            return lib_error("nnt_tokenizer_decode", rc);
    }
    printf("%s, \"finish_reason\": %s", nseq > 1 ? "]" : "", nseq > 1 ? "[" : "");
    for (size_t r = 0; r < nseq; r++)
        printf("%s\"%s\"", r ? ", " : "", stopped[r] ? "stop" : "length");
    printf("%s}\n", nseq > 1 ? "]" : "");
    return fflush(stdout) ? lib_error("standard output", NNT_E_IO) : 0;
}

/* qsort's order of the indexes of --prompts' records (sort_records: the records): by the
 * length of their prompts (a batch's prompts are padded on the left to its longest: prompts
 * of like lengths waste the least), the file's order among equals. */
static const records *sort_records;

static int by_prompt_length(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    int64_t la = sort_records->r[a].len, lb = sort_records->r[b].len;
    return la != lb ? (la < lb ? -1 : 1) : (a < b ? -1 : a > b);
}

/* The continuations of --prompts' records idx[0 .. n) (nseq samples each, sample k with seed
 * S + k, as each record alone) generated side by side (nnt_model_generate_batch) into
 * done[idx[i]] (malloc'd, (nseq, ngen)); 0, or 1 reported. Out of memory with more than one
 * record: nothing done or said, *too_many set (fewer may fit); with one record of several
 * samples, its samples in smaller groups (samples_side_by_side, said). */
static int generate_batch(const opts *o, nnt_layer *model, const records *r,
                          const int64_t *idx, size_t n, const nnt_sampling *s, int32_t **done,
                          int *too_many)
{
    size_t nseq = (size_t)o->num_samples, ngen = (size_t)o->max_new, rows = n * nseq;
    const int32_t **prompts = malloc(rows * sizeof *prompts);
    int64_t *lens = malloc(rows * sizeof *lens);
    uint64_t *seeds = malloc(rows * sizeof *seeds);
    int32_t *out = malloc((rows * ngen + 1) * sizeof *out);
    int rc = prompts && lens && seeds && out ? 0 : NNT_E_NOMEM;
    for (size_t row = 0; rc == 0 && row < rows; row++) {
        const record *c = &r->r[idx[row / nseq]];
        prompts[row] = c->ids;
        lens[row] = c->len;
        seeds[row] = s->seed + row % nseq;
    }
    if (rc == 0) {
        rc = nnt_model_generate_batch(model, (int64_t)rows, prompts, lens, seeds,
                                      (int64_t)ngen, s, out);
        *too_many = rc == NNT_E_NOMEM && n > 1;
        if (rc == NNT_E_NOMEM && n == 1 && nseq > 1) {   /* (all of them: just failed) */
            const record *c = &r->r[idx[0]];
            if (samples_side_by_side(model, c->ids, (size_t)c->len, nseq,
                                     halved(nseq, "samples", 0), ngen, s, out)) {
                free(prompts), free(lens), free(seeds), free(out);
                return 1;
            }
            rc = 0;
        }
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t *mine = malloc((nseq * ngen + 1) * sizeof *mine);
        if (!mine) {
            rc = NNT_E_NOMEM;
            break;
        }
        memcpy(mine, out + i * nseq * ngen, nseq * ngen * sizeof *mine);
        done[idx[i]] = mine;
    }
    free(prompts), free(lens), free(seeds), free(out);
    if (rc == 0 || *too_many)
        return 0;
    const record *c = &r->r[idx[0]];
    if (n > 1)
        fprintf(stderr, "nnt-generate: --prompts %s: %zu records side by side, line %lld "
                "among them:\n", o->prompts, n, (long long)c->line);
    else
        fprintf(stderr, "nnt-generate: --prompts %s line %lld:\n", o->prompts,
                (long long)c->line);
    return lib_error("nnt_model_generate_batch", rc);
}

/* --prompts: the records' prompts continued --batch at a time side by side
 * (nnt_model_generate_batch; --num-samples N: N sequences a record; halved, and said, while
 * a batch does not fit in memory), each as it would be
 * alone (the same sampling, seed S for every record, its sample r S + r), and written back
 * with their continuations (print_prompt_record) in the file's order, each as soon as it
 * and those before it are done. Within a chunk of 16 batches the records go by the length
 * of their prompts (by_prompt_length). On a terminal the count so far; at the end the
 * prompts, tokens and time on standard error. */
static int generate_prompts(const opts *o, nnt_layer *model, const nnt_tokenizer *tok,
                            const records *r, const int32_t *eos, size_t neos)
{
    size_t nseq = (size_t)o->num_samples, ngen = (size_t)o->max_new, cap = 256;
    size_t n = (size_t)r->n, batch = (size_t)o->batch, chunk = 16 * batch, next = 0;
    size_t asked = batch < n ? batch : n;
    int32_t **done = calloc(n, sizeof *done);
    int64_t *idx = malloc(n * sizeof *idx);
    char *text = malloc(cap);
    int status = done && idx && text ? 0 : lib_error("--prompts", NNT_E_NOMEM);
    int tty = isatty(STDERR_FILENO), noted = 0;
    int64_t made = 0;
    double start = now_s();
    nnt_model_config cfg;
    if (status == 0 && nnt_model_config_of(model, &cfg) == 0 &&
        r->longest + o->max_new > cfg.max_seq)
        noted = 1;
    nnt_sampling s = sampling_of(o, eos, neos);
    for (size_t i = 0; status == 0 && i < n; i++)
        idx[i] = (int64_t)i;
    sort_records = r;
    for (size_t c0 = 0; status == 0 && c0 < n; c0 += chunk)
        qsort(idx + c0, n - c0 < chunk ? n - c0 : chunk, sizeof *idx, by_prompt_length);
    for (size_t b0 = 0, nb; status == 0 && b0 < n; b0 += nb) {
        int too_many = 0;
        nb = n - b0 < batch ? n - b0 : batch;
        status = generate_batch(o, model, r, idx + b0, nb, &s, done, &too_many);
        if (status == 0 && too_many) {   /* the same records again, half as many at once */
            batch = halved(nb, "records", tty);
            nb = 0;
            continue;
        }
        for (; status == 0 && next < n && done[next]; next++) {   /* the file's order */
            for (size_t k = 0; k < nseq; k++) {
                int stopped;
                made += (int64_t)new_tokens(done[next] + k * ngen, ngen, eos, neos, &stopped) +
                        stopped;
            }
            status = print_prompt_record(o, tok, &r->r[next], done[next], nseq, ngen, eos,
                                         neos, &text, &cap);
            free(done[next]);
            done[next] = NULL;
        }
        if (tty && status == 0)
            fprintf(stderr, "\rnnt-generate: %zu of %zu prompts", b0 + nb, n);
    }
    double secs = now_s() - start;
    if (status == 0)
        fprintf(stderr, "%snnt-generate: %zu prompts continued (%zu side by side%s%s): %lld "
                "new tokens in %.2f s (%.1f tokens/s)%s\n", tty ? "\r" : "", n,
                batch < n ? batch : n, nseq > 1 ? ", each with its samples" : "",
                batch < asked ? ", fewer than --batch for memory" : "",
                (long long)made, secs, secs > 0 ? (double)made / secs : 0.0, noted ? "; past "
                "the model's context, each token saw the last of them (a sliding window)" : "");
    for (size_t i = 0; done && i < n; i++)
        free(done[i]);
    free(done);
    free(idx);
    free(text);
    return status;
}

int main(int argc, char **argv)
{
    opts o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;   /* 1: --help or --version */
    nnt_ctx_options co = NNT_CTX_OPTIONS_INIT;
    co.ncpus = (int)o.cpus;
    nnt_ctx *ctx = NULL;
    if ((rc = nnt_ctx_create(&co, &ctx)))
        return lib_error("nnt_ctx_create", rc);
    if ((rc = nnt_ctx_set_precision(ctx, (nnt_precision)o.precision))) {
        nnt_ctx_destroy(ctx);
        return lib_error("--precision", rc);
    }
    nnt_layer *model = NULL;
    nnt_tokenizer *tok = NULL;
    int32_t *prompt = NULL, *eos = NULL;
    size_t nprompt = 0, neos = 0;
    char *trained = NULL;   /* a checkpoint's training options: its tokenizer */
    if (o.checkpoint)
        rc = checkpoint_options(&o, &trained);
    if (rc == 0 && trained) {
        o.model_dir = saved(trained, "model_source");
        o.trained_tokenizer = saved(trained, "tokenizer_json");
    }
    nnt_model_config src, cfg;
    int64_t seq = 0;
    if (rc == 0)
        rc = source_config(ctx, &o, &src);
    if (rc == 0)
        rc = relabel(&o, &src);
    int labels = rc == 0 && src.num_labels > 0;   /* a classifier */
    if (rc == 0)
        rc = load_tokenizer(&o, trained, &tok);
    records recs = {0};
    if (rc == 0 && o.classify && !labels)
        rc = usage("--classify %s: the model is a language model, not a classifier (a "
                   "classifier's directory or checkpoint, or --num-labels)", o.classify);
    if (rc == 0 && o.prompts && labels)
        rc = usage("--prompts %s: the model is a classifier: give its texts with --classify",
                   o.prompts);
    if (rc == 0 && !labels && !o.classify)   /* (the model's sampling) */
        rc = generation_defaults(&o);
    if (rc == 0 && (o.classify || o.prompts))
        rc = read_file_records(&o, tok, &recs);
    else if (rc == 0)
        rc = prompt_tokens(&o, tok, labels, &prompt, &nprompt);
    if (rc == 0 && o.classify)   /* (the longest text's length) */
        rc = load_model(ctx, &o, &src, o.batch, recs.longest, &model, &seq);
    else if (rc == 0 && o.prompts)   /* (the longest prompt and its new tokens) */
        rc = load_model(ctx, &o, &src, 1, recs.longest + o.max_new, &model, &seq);
    else if (rc == 0)   /* (a classifier: the prompt alone) */
        rc = load_model(ctx, &o, &src, 1, (int64_t)nprompt + (labels ? 0 : o.max_new), &model,
                        &seq);
    if (rc == 0 && (rc = nnt_model_config_of(model, &cfg)) != 0)
        rc = lib_error("nnt_model_config_of", rc);
    if (rc == 0 && o.classify && recs.longest > seq)
        rc = usage("--classify %s: a text of %lld tokens, more than the classifier's context "
                   "(%lld)", o.classify, (long long)recs.longest, (long long)seq);
    if (rc == 0 && o.classify &&   /* (a reward model's records: texts alone) */
        (cfg.num_labels > 1 || cfg.problem_type != NNT_PROBLEM_DEFAULT))
        rc = label_records(model, tok, cfg.problem_type, cfg.num_labels, &recs);
    if (rc == 0 && o.classify)
        rc = classify_records(ctx, model, &cfg, o.batch, seq, &recs);
    else if (rc == 0 && cfg.num_labels > 0)
        rc = classify(ctx, model, &cfg, seq, prompt, nprompt);
    else if (rc == 0 && (rc = eos_ids(&o, cfg.vocab, &eos, &neos)) == 0)
        rc = o.prompts ? generate_prompts(&o, model, tok, &recs, eos, neos)
             : o.num_samples > 1 ? generate_samples(&o, model, tok, prompt, nprompt, eos, neos)
                                 : generate(&o, model, tok, prompt, nprompt, eos, neos);
    records_free(&recs);
    free(prompt);
    free(eos);
    free(o.prompt_buf);
    free(trained);
    free(o.model_dir);
    free(o.trained_tokenizer);
    nnt_tokenizer_destroy(tok);
    nnt_layer_destroy(model);
    nnt_ctx_destroy(ctx);
    return rc;
}
