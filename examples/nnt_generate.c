/* nnt-generate: continue a prompt with a model (a Hugging Face directory or an llm.c
 * checkpoint) through nnt_model_generate: the key/value cache, greedy or sampled decoding.
 * See man/man1/nnt-generate.1. Exit status: 0 done, 1 error (library, files), 2 bad usage. */
#include <nnt.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct opts {
    const char *load_hf, *load_llmc, *prompt, *prompt_ids, *vocab, *merges, *tokenizer_json;
    long long max_new, top_k, seed, eos;
    double temperature, top_p;
    int print_ids, no_cache, cpus;
} opts;

static const char USAGE[] =
    "usage: nnt-generate (--load-hf DIR | --load-llmc FILE) (--prompt TEXT | --prompt-ids IDS)\n"
    "                    [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "                    [--seed S] [--eos ID] [--vocab FILE --merges FILE]\n"
    "                    [--tokenizer-json FILE] [--print-ids]\n"
    "                    [--cpus N] [--no-cache]\n";

static int usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "nnt-generate: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", USAGE);
    return 2;
}

static int lib_error(const char *what, int rc)
{
    fprintf(stderr, "nnt-generate: %s: %s: %s\n", what, nnt_strerror(rc),
            nnt_ctx_last_error(NULL));
    return 1;
}

/* *v = the whole of s as a number (strtoll / strtod); 0 on success. */
static int parse_ll(const char *s, long long *v)
{
    char *end = NULL;
    errno = 0;
    *v = strtoll(s, &end, 10);
    return errno || end == s || *end;
}

static int parse_d(const char *s, double *v)
{
    char *end = NULL;
    errno = 0;
    *v = strtod(s, &end);
    return errno || end == s || *end;
}

static int parse_args(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--print-ids") || !strcmp(k, "--no-cache")) {
            *(k[2] == 'p' ? &o->print_ids : &o->no_cache) = 1;
            continue;
        }
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (i + 1 >= argc)
            return usage("%s needs a value", k);
        const char *v = argv[++i];
        long long n = 0;
        int bad = 0;
        if (!strcmp(k, "--load-hf")) o->load_hf = v;
        else if (!strcmp(k, "--load-llmc")) o->load_llmc = v;
        else if (!strcmp(k, "--prompt")) o->prompt = v;
        else if (!strcmp(k, "--prompt-ids")) o->prompt_ids = v;
        else if (!strcmp(k, "--vocab")) o->vocab = v;
        else if (!strcmp(k, "--merges")) o->merges = v;
        else if (!strcmp(k, "--tokenizer-json")) o->tokenizer_json = v;
        else if (!strcmp(k, "--max-new-tokens")) bad = parse_ll(v, &o->max_new) || o->max_new < 0;
        else if (!strcmp(k, "--top-k")) bad = parse_ll(v, &o->top_k) || o->top_k < 0;
        else if (!strcmp(k, "--seed")) bad = parse_ll(v, &o->seed) || o->seed < 0;
        else if (!strcmp(k, "--eos")) bad = parse_ll(v, &o->eos) || o->eos < -1;
        else if (!strcmp(k, "--cpus")) {
            bad = parse_ll(v, &n) || n < -1 || n == 0 || n > 4096;
            o->cpus = (int)n;
        } else if (!strcmp(k, "--temperature"))
            bad = parse_d(v, &o->temperature) || !(o->temperature >= 0.0);
        else if (!strcmp(k, "--top-p"))
            bad = parse_d(v, &o->top_p) || !(o->top_p > 0.0 && o->top_p <= 1.0);
        else
            return usage("unknown option %s", k);
        if (bad)
            return usage("bad value for %s", k);
    }
    if (!o->load_hf == !o->load_llmc)
        return usage("%s", "give one of --load-hf and --load-llmc");
    if (!o->prompt == !o->prompt_ids)
        return usage("%s", "give one of --prompt and --prompt-ids");
    if (!o->vocab != !o->merges)
        return usage("%s", "--vocab and --merges go together");
    if (o->tokenizer_json && o->vocab)
        return usage("%s", "--tokenizer-json excludes --vocab and --merges");
    return 0;
}

/* The ids of a "1 2 3" (spaces or commas) list: *ids malloc'd, *n of them. */
static int parse_ids(const char *s, int32_t **ids, size_t *n)
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
            return usage("bad id list in --prompt-ids at \"%s\"", s);
        (*ids)[(*n)++] = (int32_t)v;
        s = end;
    }
    return *n ? 0 : usage("%s", "--prompt-ids has no id");
}

static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The tokenizer: --tokenizer-json FILE (a Hugging Face tokenizer.json), --vocab / --merges
 * (GPT-2 BPE), else the --load-hf directory's tokenizer.json, else its vocab.json and
 * merges.txt when both exist; *tok NULL if none (2: --prompt needs one). */
static int load_tokenizer(const opts *o, nnt_tokenizer **tok)
{
    *tok = NULL;
    char *v = NULL, *m = NULL, *j = NULL;
    if (o->tokenizer_json) {
        j = strdup(o->tokenizer_json);
    } else if (o->vocab) {
        v = strdup(o->vocab);
        m = strdup(o->merges);
    } else if (o->load_hf) {
        j = path_in(o->load_hf, "tokenizer.json");
        if (j && access(j, R_OK)) {
            free(j);
            j = NULL;
            v = path_in(o->load_hf, "vocab.json");
            m = path_in(o->load_hf, "merges.txt");
        }
        if (v && m && (access(v, R_OK) || access(m, R_OK))) {
            free(v), free(m);
            v = m = NULL;
        }
    }
    int rc = 0;
    if (j && (rc = nnt_tokenizer_hf_load(j, tok)))
        rc = lib_error("nnt_tokenizer_hf_load", rc);
    else if (!j && v && m && (rc = nnt_tokenizer_bpe_load(v, m, tok)))
        rc = lib_error("nnt_tokenizer_bpe_load", rc);
    else if (!*tok && o->prompt)
        rc = usage("%s", "--prompt needs a tokenizer: --tokenizer-json FILE, --vocab and "
                   "--merges (GPT-2 BPE), or a --load-hf directory with tokenizer.json or "
                   "vocab.json and merges.txt; or use --prompt-ids");
    free(v), free(m), free(j);
    return rc;
}

/* Printing the new tokens as they are chosen (nnt_sampling's on_token): ids as numbers
 * (--print-ids, or without a tokenizer), or text: the new tokens so far are decoded whole
 * each time and the bytes beyond those already printed are written, so the streamed text is
 * the text of the whole sequence for the decoders that extend a prefix's text (all those
 * nnt reads). */
typedef struct stream {
    const nnt_tokenizer *tok;    /* NULL: ids                                             */
    int32_t *ids;                /* the new tokens so far                                 */
    size_t n, printed;           /* tokens; bytes of text written                         */
    char *text;
    size_t cap;
    int failed;                  /* a decode failed: the error is reported at the end     */
} stream;

static void print_token(void *arg, int64_t i, int32_t token)
{
    stream *st = arg;
    st->ids[st->n++] = token;
    if (!st->tok) {
        printf("%s%d", i ? " " : "", (int)token);
        fflush(stdout);
        return;
    }
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
        fwrite(st->text + st->printed, 1, len - st->printed, stdout);
        fflush(stdout);
        st->printed = len;
    }
}

static int run(const opts *o, nnt_tokenizer *tok, const int32_t *prompt, size_t nprompt)
{
    nnt_ctx_options co = NNT_CTX_OPTIONS_INIT;
    co.ncpus = o->cpus;
    nnt_ctx *ctx = NULL;
    nnt_layer *model = NULL;
    int rc = nnt_ctx_create(&co, &ctx);
    if (rc)
        return lib_error("nnt_ctx_create", rc);
    /* B 1; a GPT layer's window is its T: the whole sequence, up to max_seq */
    int64_t T = (int64_t)nprompt + o->max_new;
    if (o->load_hf) {
        nnt_model_config cfg;
        if ((rc = nnt_model_hf_config(ctx, o->load_hf, &cfg)) == 0)
            rc = nnt_model_load_hf(ctx, o->load_hf, 1, T < cfg.max_seq ? T : cfg.max_seq, NULL,
                                   &model);
    } else {   /* the configuration is in the checkpoint: load it, then at its maxT */
        nnt_gpt_config cfg;
        if ((rc = nnt_gpt_load_llmc(ctx, o->load_llmc, 1, 1, NULL, &model)) == 0 &&
            (rc = nnt_gpt_config_of(model, &cfg)) == 0 && T > 1) {
            nnt_layer_destroy(model);
            model = NULL;
            rc = nnt_gpt_load_llmc(ctx, o->load_llmc, 1, T < cfg.max_seq ? T : cfg.max_seq,
                                   NULL, &model);
        }
    }
    int32_t *out = rc ? NULL : malloc(((size_t)o->max_new + 1) * sizeof *out);
    nnt_sampling s = NNT_SAMPLING_INIT;
    s.temperature = o->temperature;
    s.top_k = o->top_k;
    s.top_p = o->top_p;
    s.seed = (uint64_t)o->seed;
    s.eos = (int32_t)o->eos;
    s.no_cache = o->no_cache;
    stream st = {o->print_ids ? NULL : tok, NULL, 0, 0, NULL, 0, 0};
    s.on_token = print_token;
    s.on_token_arg = &st;
    int status = 0;
    if (rc)
        status = lib_error(o->load_hf ? "--load-hf" : "--load-llmc", rc);
    else if (!out)
        status = lib_error("out of memory", NNT_E_NOMEM);
    else {   /* the tokens are printed as they come, up to and with the first eos */
        int32_t *ids = malloc(((size_t)o->max_new + 1) * sizeof *ids);
        st.ids = ids;
        if (!ids)
            status = lib_error("out of memory", NNT_E_NOMEM);
        else if ((rc = nnt_model_generate(model, prompt, (int64_t)nprompt, o->max_new, &s, out)))
            status = lib_error("nnt_model_generate", rc);
        if (ids && (st.n || !rc))
            printf("\n");
        if (status == 0 && st.failed)
            status = lib_error("nnt_tokenizer_decode", st.failed);
        free(ids);
        free(st.text);
    }
    free(out);
    nnt_layer_destroy(model);
    nnt_ctx_destroy(ctx);
    return status;
}

int main(int argc, char **argv)
{
    opts o = {0};
    o.max_new = 64;
    o.temperature = 1.0;
    o.top_k = 40;
    o.top_p = 1.0;
    o.eos = -1;
    o.cpus = -1;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    nnt_tokenizer *tok = NULL;
    int32_t *prompt = NULL;
    size_t nprompt = 0;
    if ((rc = load_tokenizer(&o, &tok)))
        return rc;
    if (o.prompt_ids)
        rc = parse_ids(o.prompt_ids, &prompt, &nprompt);
    else {
        int e = nnt_tokenizer_encode(tok, o.prompt, strlen(o.prompt), NULL, 0, &nprompt);
        prompt = e ? NULL : malloc((nprompt + 1) * sizeof *prompt);
        if (e || !prompt ||
            (e = nnt_tokenizer_encode(tok, o.prompt, strlen(o.prompt), prompt, nprompt,
                                      &nprompt)))
            rc = lib_error("nnt_tokenizer_encode", e ? e : NNT_E_NOMEM);
        else if (nprompt == 0)
            rc = usage("%s", "--prompt encodes to no token");
    }
    if (rc == 0)
        rc = run(&o, tok, prompt, nprompt);
    free(prompt);
    nnt_tokenizer_destroy(tok);
    return rc;
}
